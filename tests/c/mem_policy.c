/* Memory facilities of a one-node machine without protection keys, as a
 * container sees them: pkey_alloc/pkey_free/pkey_mprotect, the memory
 * policies (set_mempolicy, get_mempolicy, mbind) with node 0 only, and
 * membarrier: its commands, registrations, and the ordering it gives a
 * store followed by a load in another thread (Dekker's pattern, with the
 * barrier on one side only). */
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "container_caps.h"
#include "t.h"

/* Older headers lack it (Linux 6.3). */
#ifndef MEMBARRIER_CMD_GET_REGISTRATIONS
#define MEMBARRIER_CMD_GET_REGISTRATIONS (1 << 9)
#endif

#define MPOL_DEFAULT 0
#define MPOL_PREFERRED 1
#define MPOL_BIND 2
#define MPOL_INTERLEAVE 3
#define MPOL_LOCAL 4
#define MPOL_F_STATIC_NODES (1 << 15)
#define MPOL_F_RELATIVE_NODES (1 << 14)
#define MPOL_F_NUMA_BALANCING (1 << 13)
#define MPOL_F_NODE 1
#define MPOL_F_ADDR 2
#define MPOL_F_MEMS_ALLOWED 4
#define MPOL_MF_STRICT 1
#define MPOL_MF_MOVE_ALL 4

static long set_policy(int mode, unsigned long mask) {
    return syscall(SYS_set_mempolicy, mode, &mask, 64);
}

static void show_policy(const char *what, unsigned long addr, int flags) {
    int mode = -1;
    unsigned long mask = 0xdead;
    long r = syscall(SYS_get_mempolicy, &mode, &mask, 64, addr, flags);
    printf("%s: %s mode %d mask %lx\n", what, r == 0 ? "ok" : strerror(errno), mode, mask);
}

/* Memory protection keys as on a CPU without them (the sandbox's answer
 * whatever the CPU): checked only where the CPU has none (CPUID leaf 7,
 * ECX bit 4, OSPKE), so that the native run agrees. */
static int cpu_has_pkeys(void) {
    unsigned a = 7, b, c = 0, d;
    __asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d));
    return (c >> 4) & 1;
}

static void pkeys(char *page) {
    if (cpu_has_pkeys())
        return;
    /* The one slot is taken by the first call, which cannot set the key
     * up; then there is none. */
    CHECK_ERR(syscall(SYS_pkey_alloc, 0, 4), EINVAL);
    CHECK_ERR(syscall(SYS_pkey_alloc, 0, 0), EINVAL);
    CHECK_ERR(syscall(SYS_pkey_alloc, 0, 1), ENOSPC);
    CHECK_ERR(syscall(SYS_pkey_alloc, 1, 0), EINVAL);
    CHECK_ERR(syscall(SYS_pkey_free, 0), EINVAL);
    CHECK_ERR(syscall(SYS_pkey_free, 1), EINVAL);
    CHECK_ERR(syscall(SYS_pkey_free, -1), EINVAL);
    /* Key -1 is mprotect; no other key is held, not even 0. */
    CHECK_OK(syscall(SYS_pkey_mprotect, page, 4096, PROT_READ, -1));
    CHECK_OK(syscall(SYS_pkey_mprotect, page, 4096, PROT_READ | PROT_WRITE, -1));
    page[0] = 1;
    CHECK_ERR(syscall(SYS_pkey_mprotect, page, 4096, PROT_READ, 0), EINVAL);
    CHECK_ERR(syscall(SYS_pkey_mprotect, page, 4096, PROT_READ, 1), EINVAL);
    CHECK_ERR(syscall(SYS_pkey_mprotect, page + 1, 4096, PROT_READ, 1), EINVAL);
    CHECK_OK(syscall(SYS_pkey_mprotect, page, 0, PROT_READ, 1));
    CHECK_ERR(syscall(SYS_pkey_mprotect, page + 1, 4096, PROT_READ, -1), EINVAL);
    CHECK_ERR(syscall(SYS_pkey_mprotect, page, 4096, 0x100, -1), EINVAL);
    /* Still writable: the refused calls changed nothing. */
    page[0] = 2;
}

static void policies(char *page) {
    show_policy("default", 0, 0);
    CHECK_OK(set_policy(MPOL_BIND, 1));
    show_policy("bind 0", 0, 0);
    CHECK_ERR(syscall(SYS_get_mempolicy, NULL, NULL, 0, 0, MPOL_F_NODE), EINVAL);
    CHECK_ERR(set_policy(MPOL_BIND, 2), EINVAL);
    CHECK_ERR(set_policy(MPOL_BIND, 0), EINVAL);
    CHECK_OK(set_policy(MPOL_INTERLEAVE, 3));
    show_policy("interleave 0,1", 0, 0);
    int node = -1;
    CHECK_OK(syscall(SYS_get_mempolicy, &node, NULL, 0, 0, MPOL_F_NODE));
    CHECK(node == 0);
    CHECK_OK(set_policy(MPOL_PREFERRED, 1));
    show_policy("preferred 0", 0, 0);
    CHECK_OK(set_policy(MPOL_PREFERRED, 0));
    show_policy("preferred, none", 0, 0);
    CHECK_ERR(set_policy(MPOL_PREFERRED | MPOL_F_STATIC_NODES, 0), EINVAL);
    CHECK_OK(set_policy(MPOL_LOCAL, 0));
    show_policy("local", 0, 0);
    CHECK_ERR(set_policy(MPOL_LOCAL, 1), EINVAL);
    CHECK_ERR(set_policy(MPOL_DEFAULT, 1), EINVAL);
    CHECK_ERR(set_policy(7, 1), EINVAL);
    CHECK_ERR(set_policy(MPOL_BIND | MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES, 1), EINVAL);
    CHECK_ERR(set_policy(MPOL_INTERLEAVE | MPOL_F_NUMA_BALANCING, 1), EINVAL);
    CHECK_OK(set_policy(MPOL_BIND | MPOL_F_STATIC_NODES, 1));
    show_policy("bind static 0", 0, 0);
    CHECK_OK(set_policy(MPOL_BIND | MPOL_F_RELATIVE_NODES, 2));
    show_policy("bind relative 1", 0, 0);
    unsigned long big[2] = {1, 0};
    CHECK_ERR(syscall(SYS_set_mempolicy, MPOL_BIND, big, 4096 * 8 + 2), EINVAL);
    CHECK_ERR(syscall(SYS_set_mempolicy, MPOL_BIND, (void *)8, 64), EFAULT);
    CHECK_OK(syscall(SYS_set_mempolicy, MPOL_DEFAULT, NULL, 0));
    show_policy("default again", 0, 0);

    unsigned long mask;
    CHECK_ERR(syscall(SYS_get_mempolicy, NULL, &mask, 0, 0, 0), EINVAL);
    CHECK_ERR(syscall(SYS_get_mempolicy, NULL, NULL, 0, 0, 8), EINVAL);
    CHECK_ERR(syscall(SYS_get_mempolicy, NULL, NULL, 0, page, 0), EINVAL);
    CHECK_ERR(syscall(SYS_get_mempolicy, NULL, NULL, 0, 0, MPOL_F_MEMS_ALLOWED | MPOL_F_NODE), EINVAL);
    show_policy("mems allowed", 0, MPOL_F_MEMS_ALLOWED);
    show_policy("of a page", (unsigned long)page, MPOL_F_ADDR);
    node = -1;
    CHECK_OK(syscall(SYS_get_mempolicy, &node, NULL, 0, page, MPOL_F_ADDR | MPOL_F_NODE));
    CHECK(node == 0);

    /* mbind on mapped memory with node 0; holes are EFAULT. */
    char *two = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(two != MAP_FAILED);
    unsigned long n0 = 1, n1 = 2;
    CHECK_OK(syscall(SYS_mbind, two, 2 * 4096, MPOL_BIND, &n0, 64, MPOL_MF_STRICT));
    CHECK_OK(syscall(SYS_mbind, two, 100, MPOL_INTERLEAVE, &n0, 64, 0));
    CHECK_OK(syscall(SYS_mbind, two, 0, MPOL_BIND, &n1, 64, 0));
    CHECK_ERR(syscall(SYS_mbind, two, 4096, MPOL_BIND, &n1, 64, 0), EINVAL);
    CHECK_ERR(syscall(SYS_mbind, two + 1, 4096, MPOL_BIND, &n0, 64, 0), EINVAL);
    CHECK_ERR(syscall(SYS_mbind, two, 4096, MPOL_BIND, &n0, 64, 8), EINVAL);
    CHECK_ERR(syscall(SYS_mbind, two, 4096, MPOL_BIND, &n0, 64, MPOL_MF_MOVE_ALL), EPERM);
    CHECK_ERR(syscall(SYS_mbind, two, 4096, 9, &n0, 64, 0), EINVAL);
    CHECK_OK(munmap(two + 4096, 4096));
    CHECK_ERR(syscall(SYS_mbind, two, 2 * 4096, MPOL_BIND, &n0, 64, 0), EFAULT);
    show_policy("of an unmapped page", (unsigned long)two + 4096, MPOL_F_ADDR);
    CHECK_OK(syscall(SYS_mbind, two, 4096, MPOL_DEFAULT, NULL, 0, 0));
    munmap(two, 4096);
}

static volatile int x, y, go, done_round;
static int r1;

static void *other_side(void *arg) {
    int rounds = *(int *)arg;
    for (int i = 1; i <= rounds; i++) {
        while (__atomic_load_n(&go, __ATOMIC_ACQUIRE) != i)
            ;
        /* No fence here: the membarrier in the other thread orders it. */
        x = 1;
        __asm__ volatile("" ::: "memory");
        r1 = y;
        __atomic_store_n(&done_round, i, __ATOMIC_RELEASE);
    }
    return NULL;
}

static void barriers(void) {
    long q = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    /* The restartable-sequence commands depend on the kernel's rseq. */
    printf("membarrier query %lx\n", q & ~(long)(MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ |
                                                 MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ));
    CHECK_ERR(syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 1, 0), EINVAL);
    CHECK_ERR(syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0), EPERM);
    CHECK_ERR(syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0), EPERM);
    CHECK(syscall(SYS_membarrier, MEMBARRIER_CMD_GET_REGISTRATIONS, 0, 0) == 0);
    CHECK_OK(syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0));
    CHECK_OK(syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0));
    CHECK_ERR(syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 1, 0), EINVAL);
    CHECK_OK(syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0));
    printf("registrations %lx\n", syscall(SYS_membarrier, MEMBARRIER_CMD_GET_REGISTRATIONS, 0, 0));
    CHECK_OK(syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0));
    CHECK_OK(syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0));
    CHECK_OK(syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0));
    CHECK_OK(syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0));
    CHECK_ERR(syscall(SYS_membarrier, 3, 0, 0), EINVAL);
    CHECK_ERR(syscall(SYS_membarrier, 1 << 12, 0, 0), EINVAL);
    CHECK_ERR(syscall(SYS_membarrier, -1, 0, 0), EINVAL);

    /* One side stores x and loads y with no fence; this side stores y,
     * makes the barrier, loads x. Both loads seeing 0 would mean the
     * other side's store was still unseen after the barrier. */
    int rounds = 100, both_zero = 0;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, other_side, &rounds) == 0);
    for (int i = 1; i <= rounds; i++) {
        x = y = 0;
        __atomic_store_n(&go, i, __ATOMIC_RELEASE);
        y = 1;
        CHECK_OK(syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0));
        int r2 = x;
        while (__atomic_load_n(&done_round, __ATOMIC_ACQUIRE) != i)
            ;
        if (r1 == 0 && r2 == 0)
            both_zero++;
    }
    pthread_join(t, NULL);
    CHECK(both_zero == 0);
}

int main(void) {
    narrow_to_container_caps();
    char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(page != MAP_FAILED);
    page[0] = 0;
    pkeys(page);
    policies(page);
    barriers();
    return done();
}
