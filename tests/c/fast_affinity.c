/* sched_getaffinity of the calling thread, which a platform may answer
 * without the kernel by writing the thread's mask to the caller's buffer.
 * Every call goes through one of two sites, each many times over: a
 * `mov $204, %eax; syscall` (a site the sandbox rewrites after its first
 * call) and a `syscall` whose number is loaded earlier (as in glibc's
 * wrapper, which the sandbox leaves as it is). Each is checked against
 * Linux's answers: the bytes written and their count, EINVAL for a length
 * too small or not a whole number of words (of its low 32 bits: it is an
 * unsigned int), EFAULT for NULL, an unmapped page, a read-only page, a
 * PROT_NONE page, a page past the end of a file and a buffer running into
 * a read-only page; a buffer in a page never touched yet, or shared
 * copy-on-write with a forked child (whose copy alone changes), is
 * written. Then the mask after sched_setaffinity of this thread, of
 * another thread by another thread (polled until it shows, then after a
 * call through the kernel it must), in a forked child and after exec. */
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

#define ROUNDS 50

/* The two sites; `use_kept_site` says which the calls take. */
#define GETAFFINITY_SITE(name, instructions)                                                             \
    __attribute__((noinline)) static long name(long pid, unsigned long len, void *buf) {                 \
        long ret;                                                                                        \
        __asm__ volatile(instructions : "=a"(ret) : "D"(pid), "S"(len), "d"(buf) : "rcx", "r11", "memory"); \
        return ret;                                                                                      \
    }
GETAFFINITY_SITE(rewritable_site, "mov $204, %%eax\n\tsyscall")
GETAFFINITY_SITE(kept_site, "mov $204, %%eax\n\tnop\n\tsyscall")

static int use_kept_site;

static long getaffinity_site(long pid, unsigned long len, void *buf) {
    return use_kept_site ? kept_site(pid, len, buf) : rewritable_site(pid, len, buf);
}

/* The call's result as the C library would give it: -1 and errno. */
static long getaffinity(long pid, unsigned long len, void *buf) {
    long r = getaffinity_site(pid, len, buf);
    if (r < 0) {
        errno = (int)-r;
        return -1;
    }
    return r;
}

/* What Linux writes: cpumask_size() bytes of the mask. */
static long mask_bytes;
static cpu_set_t mask_now;

static long page;

/* ROUNDS calls into `buf` with `len`, each of which must give `want`
 * (bytes written) or fail with `err`. */
static void calls(void *buf, unsigned long len, long want, int err) {
    for (int i = 0; i < ROUNDS; i++) {
        if (err)
            CHECK_ERR(getaffinity(0, len, buf), err);
        else
            CHECK(getaffinity(0, len, buf) == want);
    }
}

/* A good call writes mask_bytes of the current mask and nothing after. */
static void good_call(long pid) {
    unsigned char buf[sizeof(cpu_set_t) + 16];
    for (int i = 0; i < ROUNDS; i++) {
        memset(buf, 0xa5, sizeof buf);
        CHECK(getaffinity(pid, sizeof(cpu_set_t), buf) == mask_bytes);
        CHECK(memcmp(buf, &mask_now, mask_bytes) == 0);
        CHECK(buf[mask_bytes] == 0xa5 && buf[sizeof buf - 1] == 0xa5);
    }
}

static void *map(int prot) {
    void *p = mmap(NULL, 2 * page, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    return p;
}

static void bad_buffers(void) {
    unsigned char buf[sizeof(cpu_set_t)];
    calls(buf, 0, 0, EINVAL);
    calls(buf, 4, 0, EINVAL);
    calls(buf, mask_bytes + 4, 0, EINVAL);
    calls(buf, mask_bytes - 1, 0, EINVAL);
    /* The length is an unsigned int: the high half is not read. */
    calls(buf, 1UL << 32, 0, EINVAL);
    calls(buf, (1UL << 32) | mask_bytes, mask_bytes, 0);
    calls(NULL, sizeof buf, 0, EFAULT);
    calls((void *)8, sizeof buf, 0, EFAULT);
    calls((void *)-4096L, sizeof buf, 0, EFAULT);

    unsigned char *gone = map(PROT_READ | PROT_WRITE);
    CHECK_OK(munmap(gone, 2 * page));
    calls(gone, sizeof buf, 0, EFAULT);

    unsigned char *ro = map(PROT_READ);
    calls(ro, sizeof buf, 0, EFAULT);
    CHECK(ro[0] == 0);
    unsigned char *none = map(PROT_NONE);
    calls(none, sizeof buf, 0, EFAULT);

    /* Running from a writable page into one that is not. */
    unsigned char *half = map(PROT_READ | PROT_WRITE);
    CHECK_OK(mprotect(half + page, page, PROT_READ));
    calls(half + page - 4, mask_bytes, 0, EFAULT);
    calls(half + page - mask_bytes, mask_bytes, mask_bytes, 0);
    CHECK(memcmp(half + page - mask_bytes, &mask_now, mask_bytes) == 0);

    /* Past the end of a file: the page a read would raise SIGBUS for. */
    int fd = memfd_create("short", 0);
    CHECK(fd >= 0);
    CHECK_OK(ftruncate(fd, 1));
    unsigned char *file = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(file != MAP_FAILED);
    calls(file + page, sizeof buf, 0, EFAULT);
    calls(file, sizeof buf, mask_bytes, 0);
    CHECK(memcmp(file, &mask_now, mask_bytes) == 0);
    munmap(file, 2 * page);
    close(fd);
    munmap(ro, 2 * page);
    munmap(none, 2 * page);
    munmap(half, 2 * page);
}

/* Pages the buffer may land in before anything touched them, and shared
 * with a child copy-on-write. */
static void fresh_and_shared_pages(void) {
    unsigned char *fresh = map(PROT_READ | PROT_WRITE);
    CHECK(getaffinity(0, sizeof(cpu_set_t), fresh + 8) == mask_bytes);
    CHECK(memcmp(fresh + 8, &mask_now, mask_bytes) == 0);
    CHECK(fresh[0] == 0 && fresh[8 + mask_bytes] == 0);

    unsigned char *shared = map(PROT_READ | PROT_WRITE);
    memset(shared, 0x5a, 2 * page);
    pid_t child = fork();
    if (child == 0) {
        calls(shared + 16, sizeof(cpu_set_t), mask_bytes, 0);
        int ok = memcmp(shared + 16, &mask_now, mask_bytes) == 0 && shared[15] == 0x5a;
        _exit(t_failures || !ok ? 1 : 0);
    }
    int st = 0;
    CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    for (long i = 0; i < 2 * page; i++) {
        if (shared[i] != 0x5a) {
            CHECK(!"the parent's copy-on-write page changed");
            break;
        }
    }
    munmap(fresh, 2 * page);
    munmap(shared, 2 * page);
}

static pthread_barrier_t barrier;
static volatile pid_t other_tid;
static cpu_set_t other_mask;

/* A thread whose mask another thread changes: it polls until the change
 * shows, and after a call that reaches the kernel (the barrier's) it must. */
static void *changed_thread(void *arg) {
    (void)arg;
    other_tid = (pid_t)syscall(SYS_gettid);
    good_call(0);
    good_call(other_tid);
    pthread_barrier_wait(&barrier);
    cpu_set_t got;
    long bad = 0;
    do {
        CPU_ZERO(&got);
        bad += getaffinity(0, sizeof got, &got) != mask_bytes;
    } while (!CPU_EQUAL(&got, &other_mask));
    CHECK(bad == 0);
    pthread_barrier_wait(&barrier);
    pthread_barrier_wait(&barrier);
    CPU_ZERO(&got);
    CHECK(getaffinity(0, sizeof got, &got) == mask_bytes);
    CHECK(CPU_EQUAL(&got, &mask_now));
    return NULL;
}

static int after_exec(const char *want_first) {
    int first = atoi(want_first);
    cpu_set_t got;
    for (int i = 0; i < ROUNDS; i++) {
        CPU_ZERO(&got);
        CHECK(getaffinity(0, sizeof got, &got) > 0);
        CHECK(CPU_COUNT(&got) == 1 && CPU_ISSET(first, &got));
    }
    return t_failures ? 1 : 0;
}

static void every_case(void) {
    /* The mask and its size as Linux reports them. */
    CHECK_OK(sched_getaffinity(0, sizeof mask_now, &mask_now));
    mask_bytes = getaffinity_site(0, sizeof(cpu_set_t), &(cpu_set_t){0});
    CHECK(mask_bytes >= 8 && mask_bytes % 8 == 0 && mask_bytes <= (long)sizeof(cpu_set_t));
    good_call(0);
    good_call((long)syscall(SYS_gettid));
    bad_buffers();
    fresh_and_shared_pages();

    /* This thread's own change. */
    int first = 0;
    while (!CPU_ISSET(first, &mask_now)) first++;
    cpu_set_t all = mask_now, one;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    CHECK_OK(sched_setaffinity(0, sizeof one, &one));
    mask_now = one;
    good_call(0);

    /* Another thread's, changed from here while it polls. */
    mask_now = all;
    CHECK_OK(sched_setaffinity(0, sizeof all, &all));
    other_mask = one;
    pthread_t th;
    pthread_barrier_init(&barrier, NULL, 2);
    CHECK(pthread_create(&th, NULL, changed_thread, NULL) == 0);
    pthread_barrier_wait(&barrier);
    CHECK_OK(sched_setaffinity(other_tid, sizeof one, &one));
    pthread_barrier_wait(&barrier);
    CHECK_OK(sched_setaffinity(other_tid, sizeof all, &all));
    pthread_barrier_wait(&barrier);
    CHECK(pthread_join(th, NULL) == 0);
    pthread_barrier_destroy(&barrier);
    good_call(0);

    /* A forked child and an exec keep the mask. */
    CHECK_OK(sched_setaffinity(0, sizeof one, &one));
    mask_now = one;
    pid_t child = fork();
    if (child == 0) {
        good_call(0);
        _exit(t_failures ? 1 : 0);
    }
    int st = 0;
    CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    child = fork();
    if (child == 0) {
        char arg[16];
        snprintf(arg, sizeof arg, "%d", first);
        char *args[] = {"fast_affinity", "after-exec", arg, use_kept_site ? "kept" : "rewritable", NULL};
        execv("/proc/self/exe", args);
        _exit(99);
    }
    CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK_OK(sched_setaffinity(0, sizeof all, &all));
}

int main(int argc, char **argv) {
    page = sysconf(_SC_PAGESIZE);
    if (argc == 4 && strcmp(argv[1], "after-exec") == 0) {
        use_kept_site = strcmp(argv[3], "kept") == 0;
        return after_exec(argv[2]);
    }
    for (use_kept_site = 0; use_kept_site < 2; use_kept_site++) every_case();
    return done();
}
