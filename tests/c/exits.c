/* A workload whose VM exits and page faults are fixed by its arguments, for
 * the regression guard on the sentry's exit and fault counts. Each argument
 * NAME=N runs one phase:
 *   syscalls=N   N getppid calls by a raw syscall instruction
 *   getpid=N     N getpid calls through the C library's wrapper
 *   affinity=N   N sched_getaffinity calls through the C library's wrapper
 *   touch=N      first write to each of N pages of a fresh anonymous mapping
 *   cow=N        a forked child writes each of N pages its parent filled
 *   signals=N    N SIGUSR1s raised and handled
 *   file=N       first read of each of N pages of a private mapping of a
 *                file (this program itself, capped at its size)
 *   clock=N      N clock_gettime(CLOCK_MONOTONIC) calls through libc
 * It prints what it did, so the native run and the sandboxed run can be
 * compared too. */
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PAGE 4096L

static void die(const char *what) {
    perror(what);
    exit(2);
}

static long raw_getppid(void) {
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "a"((long)SYS_getppid) : "rcx", "r11", "memory");
    return r;
}

static void phase_syscalls(long n) {
    long sum = 0;
    for (long i = 0; i < n; i++)
        sum += raw_getppid() >= 0;
    printf("syscalls: %ld of %ld answered\n", sum, n);
}

static void phase_getpid(long n) {
    long same = 0, pid = getpid();
    for (long i = 0; i < n; i++)
        same += getpid() == pid;
    printf("getpid: %ld of %ld the same\n", same, n);
}

static void phase_affinity(long n) {
    cpu_set_t first, now;
    if (sched_getaffinity(0, sizeof first, &first) != 0)
        die("sched_getaffinity");
    long same = 0;
    for (long i = 0; i < n; i++)
        same += sched_getaffinity(0, sizeof now, &now) == 0 && CPU_EQUAL(&now, &first);
    printf("affinity: %ld of %ld the same\n", same, n);
}

static void phase_touch(long n) {
    volatile char *p = mmap(NULL, n * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        die("mmap");
    for (long i = 0; i < n; i++)
        p[i * PAGE] = (char)i;
    long sum = 0;
    for (long i = 0; i < n; i++)
        sum += p[i * PAGE] == (char)i;
    printf("touch: %ld of %ld pages hold their byte\n", sum, n);
    if (munmap((void *)p, n * PAGE))
        die("munmap");
}

static void phase_cow(long n) {
    char *p = mmap(NULL, n * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED)
        die("mmap");
    memset(p, 'p', n * PAGE);
    pid_t child = fork();
    if (child < 0)
        die("fork");
    if (child == 0) {
        for (long i = 0; i < n; i++)
            p[i * PAGE] = 'c';
        _exit(0);
    }
    int status;
    if (waitpid(child, &status, 0) != child)
        die("waitpid");
    long kept = 0;
    for (long i = 0; i < n; i++)
        kept += p[i * PAGE] == 'p';
    printf("cow: child status %d, parent kept %ld of %ld pages\n", status, kept, n);
    munmap(p, n * PAGE);
}

static volatile long handled;

static void on_usr1(int sig) {
    (void)sig;
    handled++;
}

static void phase_signals(long n) {
    struct sigaction sa = {.sa_handler = on_usr1};
    if (sigaction(SIGUSR1, &sa, NULL))
        die("sigaction");
    for (long i = 0; i < n; i++)
        raise(SIGUSR1);
    printf("signals: %ld of %ld handled\n", handled, n);
}

static void phase_file(long n) {
    int fd = open("/proc/self/exe", O_RDONLY);
    if (fd < 0)
        die("open");
    struct stat st;
    if (fstat(fd, &st))
        die("fstat");
    long pages = st.st_size / PAGE;
    if (n > pages)
        n = pages;
    volatile char *p = mmap(NULL, n * PAGE, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED)
        die("mmap");
    close(fd);
    long nonzero = 0;
    for (long i = 0; i < n; i++)
        nonzero += p[i * PAGE] != 0 || i > 0;
    printf("file: read %ld pages\n", nonzero);
    munmap((void *)p, n * PAGE);
}

static void phase_clock(long n) {
    struct timespec prev = {0, 0}, t;
    long backwards = 0;
    for (long i = 0; i < n; i++) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        backwards += t.tv_sec < prev.tv_sec || (t.tv_sec == prev.tv_sec && t.tv_nsec < prev.tv_nsec);
        prev = t;
    }
    printf("clock: %ld reads, %ld went backwards\n", n, backwards);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (!eq) {
            fprintf(stderr, "usage: exits NAME=N...\n");
            return 2;
        }
        *eq = 0;
        long n = atol(eq + 1);
        if (!strcmp(argv[i], "syscalls"))
            phase_syscalls(n);
        else if (!strcmp(argv[i], "getpid"))
            phase_getpid(n);
        else if (!strcmp(argv[i], "affinity"))
            phase_affinity(n);
        else if (!strcmp(argv[i], "touch"))
            phase_touch(n);
        else if (!strcmp(argv[i], "cow"))
            phase_cow(n);
        else if (!strcmp(argv[i], "signals"))
            phase_signals(n);
        else if (!strcmp(argv[i], "file"))
            phase_file(n);
        else if (!strcmp(argv[i], "clock"))
            phase_clock(n);
        else {
            fprintf(stderr, "unknown phase %s\n", argv[i]);
            return 2;
        }
    }
    return 0;
}
