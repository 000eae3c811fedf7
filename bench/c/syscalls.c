/* The cheapest system calls: the cost of one trip into the kernel (or the
 * sandbox's kernel) and back.
 *   getpid          raw `syscall` instruction, no libc wrapper or caching
 *   clock_gettime   clock_gettime(CLOCK_MONOTONIC) through libc (the vDSO
 *                   natively; whatever the sandbox provides otherwise)
 *   gettid          gettid() through libc (always a real system call)
 *   sched_getaffinity  sched_getaffinity(0, ...) through libc: a call that
 *                   writes the caller's memory (a cpu_set_t on the stack) */
#include "bench.h"

#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

static long raw_getpid(void) {
    long ret;
    __asm__ volatile("syscall" : "=a"(ret) : "0"((long)SYS_getpid) : "rcx", "r11", "memory");
    return ret;
}

static void run_getpid(long n, void *arg) {
    long expect = *(long *)arg;
    for (long i = 0; i < n; i++)
        if (raw_getpid() != expect)
            fail("getpid: raw syscall returned a different pid");
}

static void run_clock_gettime(long n, void *arg) {
    (void)arg;
    struct timespec ts;
    for (long i = 0; i < n; i++)
        if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
            die("clock_gettime");
}

static void run_gettid(long n, void *arg) {
    pid_t expect = *(pid_t *)arg;
    for (long i = 0; i < n; i++)
        if (gettid() != expect)
            fail("gettid: returned a different tid");
}

static void run_sched_getaffinity(long n, void *arg) {
    (void)arg;
    cpu_set_t first, now;
    if (sched_getaffinity(0, sizeof first, &first) != 0)
        die("sched_getaffinity");
    for (long i = 0; i < n; i++)
        if (sched_getaffinity(0, sizeof now, &now) != 0 || !CPU_EQUAL(&now, &first))
            fail("sched_getaffinity: a different mask");
}

static const struct bench_case cases[] = {
    {.name = "getpid", .run = run_getpid},
    {.name = "clock_gettime", .run = run_clock_gettime},
    {.name = "gettid", .run = run_gettid},
    {.name = "sched_getaffinity", .run = run_sched_getaffinity},
    {0},
};

int main(int argc, char **argv) {
    double seconds;
    const struct bench_case *c = pick_case(argc, argv, cases, &seconds);
    long pid = raw_getpid();
    if (pid <= 0)
        fail("getpid: raw syscall returned %ld", pid);
    pid_t tid = gettid();
    if (tid <= 0)
        die("gettid");
    void *arg = c->run == run_getpid ? (void *)&pid : (void *)&tid;
    measure(c, arg, seconds);
    return 0;
}
