/* Locked memory: mlock, mlock2 (MLOCK_ONFAULT), munlock, mlockall
 * (MCL_CURRENT, MCL_FUTURE, MCL_ONFAULT), munlockall, mmap(MAP_LOCKED),
 * mremap and brk growing locked memory, and shmctl(SHM_LOCK), counted
 * against RLIMIT_MEMLOCK as Linux counts them and refused with its errors;
 * CAP_IPC_LOCK lifts the limit. VmLck in /proc/self/status, the Locked
 * size and the `lo` flag in /proc/self/smaps, and locked pages resident.
 *
 * Runs with CAP_IPC_LOCK permitted (natively as root, in the sandbox with
 * --cap-add IPC_LOCK) and takes it out of the effective set for the
 * unprivileged checks. */
#include <linux/capability.h>
#include <stdint.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

#define PG 4096UL

static void set_ipc_lock(int on) {
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    CHECK_OK(syscall(SYS_capget, &h, d));
    if (on)
        d[0].effective |= 1u << CAP_IPC_LOCK;
    else
        d[0].effective &= ~(1u << CAP_IPC_LOCK);
    CHECK_OK(syscall(SYS_capset, &h, d));
}

static void set_memlock(unsigned long pages) {
    struct rlimit r;
    CHECK_OK(getrlimit(RLIMIT_MEMLOCK, &r));
    r.rlim_cur = pages * PG;
    CHECK_OK(setrlimit(RLIMIT_MEMLOCK, &r));
}

/* VmLck of /proc/self/status, in kB. */
static long vmlck(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmLck: %ld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb;
}

struct smap {
    long rss, locked;
    int lo;
};

/* The smaps entry of the mapping starting at `at`. */
static struct smap smaps_of(void *at) {
    struct smap m = {-1, -1, -1};
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[512], want[32];
    int in = 0;
    snprintf(want, sizeof want, "%lx-", (unsigned long)at);
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, want, strlen(want)) == 0) {
            in = 1;
            continue;
        }
        if (!in)
            continue;
        long v;
        if (sscanf(line, "Rss: %ld kB", &v) == 1)
            m.rss = v;
        else if (sscanf(line, "Locked: %ld kB", &v) == 1)
            m.locked = v;
        else if (strncmp(line, "VmFlags:", 8) == 0) {
            m.lo = strstr(line, " lo") != NULL;
            break;
        }
    }
    if (f)
        fclose(f);
    return m;
}

/* Each mapping at an address of its own, far from the others, so that
 * none merges with a neighbour and each has an smaps entry of its own. */
static char *anon(unsigned long pages, int flags) {
    static uintptr_t next = 0x300000000000UL;
    void *p = mmap((void *)next, pages * PG, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE | flags, -1, 0);
    next += 1UL << 24;
    return p == MAP_FAILED ? NULL : p;
}

/* A limit of 0 without CAP_IPC_LOCK forbids locking at all. */
static void no_limit_no_lock(void) {
    set_memlock(0);
    char *p = anon(4, 0);
    CHECK(p != NULL);
    CHECK_ERR(mlock(p, PG), EPERM);
    CHECK_ERR(mlock2(p, PG, MLOCK_ONFAULT), EPERM);
    CHECK_ERR(mlockall(MCL_CURRENT), EPERM);
    CHECK_ERR(mlockall(MCL_FUTURE), EPERM);
    CHECK(mmap(NULL, PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_LOCKED, -1, 0) == MAP_FAILED &&
          errno == EPERM);
    /* Unlocking needs nothing. */
    CHECK_OK(munlock(p, PG));
    CHECK_OK(munlockall());
    /* Argument errors come before the permission check. */
    CHECK_ERR(mlockall(0), EINVAL);
    CHECK_ERR(mlockall(MCL_ONFAULT), EINVAL);
    CHECK_ERR(mlockall(0x100), EINVAL);
    CHECK_ERR(mlock2(p, PG, 2), EINVAL);
    munmap(p, 4 * PG);
}

/* A limit of 64 pages. */
static void within_limit(void) {
    set_memlock(64);
    long base = vmlck();
    CHECK(base == 0);
    char *a = anon(32, 0);
    CHECK(a != NULL);
    struct smap m = smaps_of(a);
    CHECK(m.rss == 0 && m.lo == 0);
    /* An address inside a page locks the whole page. */
    CHECK_OK(mlock(a + 10, 32 * PG - 10));
    CHECK(vmlck() == 128);
    m = smaps_of(a);
    CHECK(m.rss == 128 && m.locked == 128 && m.lo == 1);
    /* Locking again counts nothing twice. */
    CHECK_OK(mlock(a, 32 * PG));
    CHECK(vmlck() == 128);
    char *b = anon(40, 0);
    CHECK(b != NULL);
    CHECK_ERR(mlock(b, 40 * PG), ENOMEM);
    CHECK(vmlck() == 128);
    CHECK_OK(mlock(b, 32 * PG));
    CHECK(vmlck() == 256);
    /* A range partly locked: only its unlocked pages count. */
    CHECK_ERR(mlock(b, 33 * PG), ENOMEM);
    CHECK_OK(munlock(b + 16 * PG, 16 * PG));
    CHECK(vmlck() == 192);
    m = smaps_of(b + 16 * PG);
    CHECK(m.lo == 0 && m.locked == 0);
    /* Holes: ENOMEM, for locking and unlocking alike. */
    CHECK_OK(munmap(b + 36 * PG, 4 * PG));
    CHECK_ERR(mlock(b + 32 * PG, 8 * PG), ENOMEM);
    CHECK_ERR(munlock(b + 32 * PG, 8 * PG), ENOMEM);
    CHECK(vmlck() == 192);
    /* MAP_LOCKED past the limit: EAGAIN; within it, resident at once. */
    CHECK(mmap(NULL, 32 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_LOCKED, -1, 0) ==
              MAP_FAILED &&
          errno == EAGAIN);
    char *c = anon(8, MAP_LOCKED);
    CHECK(c != NULL);
    CHECK(vmlck() == 224);
    m = smaps_of(c);
    CHECK(m.rss == 32 && m.lo == 1);
    /* mremap growing locked memory: within the limit the new part is
     * locked and resident; past it, EAGAIN. */
    CHECK(mremap(c, 8 * PG, 24 * PG, MREMAP_MAYMOVE) == MAP_FAILED && errno == EAGAIN);
    char *c2 = mremap(c, 8 * PG, 12 * PG, MREMAP_MAYMOVE);
    CHECK(c2 != MAP_FAILED);
    CHECK(vmlck() == 240);
    m = smaps_of(c2);
    CHECK(m.rss == 48 && m.lo == 1);
    /* Shrinking gives locked memory back. */
    CHECK(mremap(c2, 12 * PG, 4 * PG, 0) == c2);
    CHECK(vmlck() == 208);
    /* MLOCK_ONFAULT: locked, counted, nothing made resident yet. */
    CHECK_OK(munlock(a, 32 * PG));
    CHECK(vmlck() == 80);
    char *d = anon(16, 0);
    CHECK_OK(mlock2(d, 16 * PG, MLOCK_ONFAULT));
    CHECK(vmlck() == 144);
    m = smaps_of(d);
    CHECK(m.rss == 0 && m.lo == 1);
    /* Locked memory freed by munmap. */
    CHECK_OK(munmap(d, 16 * PG));
    CHECK(vmlck() == 80);
    /* Locks are not inherited by a child. */
    pid_t pid = fork();
    if (pid == 0)
        _exit(vmlck() == 0 ? 0 : 1);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* mlockall(MCL_CURRENT) cannot lock all that is mapped. */
    CHECK_ERR(mlockall(MCL_CURRENT), ENOMEM);
    CHECK(vmlck() == 80);
    /* MCL_FUTURE: new memory is locked and counted. */
    CHECK_OK(mlockall(MCL_FUTURE));
    char *e = anon(8, 0);
    CHECK(e != NULL);
    CHECK(vmlck() == 112);
    m = smaps_of(e);
    CHECK(m.rss == 32 && m.lo == 1);
    CHECK(mmap(NULL, 64 * PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED && errno == EAGAIN);
    uintptr_t cur = (uintptr_t)syscall(SYS_brk, 0);
    CHECK(syscall(SYS_brk, cur + 64 * PG) == (long)cur);
    /* munlockall ends MCL_FUTURE and unlocks everything. */
    CHECK_OK(munlockall());
    CHECK(vmlck() == 0);
    char *f = anon(64, 0);
    CHECK(f != NULL);
    m = smaps_of(e);
    CHECK(m.lo == 0);
    /* MCL_FUTURE | MCL_ONFAULT: locked, not made resident. */
    CHECK_OK(mlockall(MCL_FUTURE | MCL_ONFAULT));
    char *g = anon(8, 0);
    CHECK(g != NULL);
    m = smaps_of(g);
    CHECK(m.rss == 0 && m.lo == 1);
    CHECK(vmlck() == 32);
    CHECK_OK(munlockall());
    munmap(a, 32 * PG);
    munmap(b, 36 * PG);
    munmap(c2, 4 * PG);
    munmap(e, 8 * PG);
    munmap(f, 64 * PG);
    munmap(g, 8 * PG);
}

/* CAP_IPC_LOCK lifts the limit. */
static void privileged(void) {
    set_ipc_lock(1);
    set_memlock(0);
    char *a = anon(128, 0);
    CHECK_OK(mlock(a, 128 * PG));
    CHECK(vmlck() == 512);
    struct smap m = smaps_of(a);
    CHECK(m.rss == 512 && m.lo == 1);
    CHECK_OK(mlockall(MCL_CURRENT | MCL_FUTURE));
    CHECK(vmlck() > 512);
    char *b = anon(8, MAP_LOCKED);
    CHECK(b != NULL);
    CHECK_OK(munlockall());
    CHECK(vmlck() == 0);
    munmap(a, 128 * PG);
    munmap(b, 8 * PG);
    set_ipc_lock(0);
}

/* SHM_LOCK charges the segment to the caller's limit. */
static void shm_lock(void) {
    set_memlock(0);
    int small = shmget(IPC_PRIVATE, 16 * PG, IPC_CREAT | 0600);
    int big = shmget(IPC_PRIVATE, 128 * PG, IPC_CREAT | 0600);
    CHECK(small >= 0 && big >= 0);
    CHECK_ERR(shmctl(small, SHM_LOCK, NULL), EPERM);
    set_memlock(64);
    CHECK_ERR(shmctl(big, SHM_LOCK, NULL), ENOMEM);
    CHECK_OK(shmctl(small, SHM_LOCK, NULL));
    CHECK_OK(shmctl(small, SHM_LOCK, NULL));
    struct shmid_ds ds;
    CHECK_OK(shmctl(small, IPC_STAT, &ds));
    CHECK(ds.shm_perm.mode & SHM_LOCKED);
    CHECK_OK(shmctl(small, SHM_UNLOCK, NULL));
    CHECK_OK(shmctl(small, IPC_STAT, &ds));
    CHECK(!(ds.shm_perm.mode & SHM_LOCKED));
    set_ipc_lock(1);
    CHECK_OK(shmctl(big, SHM_LOCK, NULL));
    set_ipc_lock(0);
    CHECK_OK(shmctl(big, IPC_RMID, NULL));
    CHECK_OK(shmctl(small, IPC_RMID, NULL));
    /* Locked shared memory is not the process's: VmLck stays 0. */
    CHECK(vmlck() == 0);
}

int main(void) {
    set_ipc_lock(0);
    no_limit_no_lock();
    within_limit();
    privileged();
    shm_lock();
    return done();
}
