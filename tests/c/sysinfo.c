/* The rest a single-threaded program touches: uname, ids, resource limits,
 * sysinfo, getrandom, clocks and sleeping, affinity, umask, signal
 * dispositions and masks (read back, never delivered), arch_prctl,
 * set_tid_address, futex, prctl names. */
#include <asm/prctl.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <grp.h>
#include <time.h>
#include <unistd.h>

#include "t.h"

static int64_t ns(struct timespec t) {
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int64_t mono_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return ns(t);
}

static void test_uname(void) {
    struct utsname u;
    CHECK_OK(uname(&u));
    printf("uname: sysname %s machine %s\n", u.sysname, u.machine);
    CHECK(strcmp(u.machine, "x86_64") == 0 && strcmp(u.sysname, "Linux") == 0);
    CHECK(u.release[0] >= '1' && u.release[0] <= '9');
    CHECK(strlen(u.nodename) > 0);
}

static void test_ids(void) {
    pid_t pid = getpid();
    CHECK(pid > 0);
    CHECK(syscall(SYS_gettid) == pid);
    CHECK(getppid() >= 0);
    /* 0 when the group's leader lives outside our pid namespace. */
    CHECK(getpgrp() >= 0);
    CHECK(getpgid(0) == getpgrp());
    printf("ids: uid %u euid %u gid %u egid %u\n", getuid(), geteuid(), getgid(), getegid());
    uid_t r, e, s;
    CHECK_OK(getresuid(&r, &e, &s));
    CHECK(r == getuid() && e == geteuid() && s == geteuid());
    gid_t gr, ge, gs;
    CHECK_OK(getresgid(&gr, &ge, &gs));
    CHECK(gr == getgid() && ge == getegid());
    int n = getgroups(0, NULL);
    CHECK(n >= 0);
    gid_t groups[256];
    CHECK(getgroups(256, groups) == n);
    printf("ids: %d supplementary groups\n", n);
    /* Setting an id to its own value is allowed for anyone. */
    CHECK_OK(setuid(getuid()));
    CHECK_OK(setgid(getgid()));
    CHECK_OK(setresuid(-1, getuid(), -1));
    CHECK_OK(setreuid(-1, -1));
    /* Root gives its identity away for good, in a child so this process
     * keeps its own. */
    if (geteuid() == 0) {
        pid_t pid = fork();
        if (pid == 0) {
            int bad = 0;
            bad |= setgroups(0, NULL) != 0;
            bad |= setresgid(65534, 65534, 65534) != 0;
            bad |= setreuid(65534, 65534) != 0;
            uid_t r, e, s;
            getresuid(&r, &e, &s);
            bad |= r != 65534 || e != 65534 || s != 65534 || getgid() != 65534;
            bad |= getgroups(0, NULL) != 0;
            errno = 0;
            bad |= setuid(0) != -1 || errno != EPERM;
            bad |= setgid(0) != -1 || errno != EPERM;
            FILE *f = fopen("/proc/self/status", "r");
            char line[256];
            int uid_line = 0;
            while (f && fgets(line, sizeof line, f))
                uid_line |= strcmp(line, "Uid:\t65534\t65534\t65534\t65534\n") == 0;
            if (f)
                fclose(f);
            bad |= !uid_line;
            _exit(bad);
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
}

static void test_rlimits(void) {
    struct rlimit old, r;
    CHECK_OK(getrlimit(RLIMIT_STACK, &old));
    CHECK(old.rlim_cur > 0);
    r.rlim_cur = 4 << 20;
    r.rlim_max = old.rlim_max;
    CHECK_OK(setrlimit(RLIMIT_STACK, &r));
    CHECK_OK(getrlimit(RLIMIT_STACK, &r));
    CHECK(r.rlim_cur == 4 << 20 && r.rlim_max == old.rlim_max);
    /* prlimit64 sets and returns the previous value in one call. */
    struct rlimit prev, want = {old.rlim_cur, old.rlim_max};
    CHECK_OK(prlimit(0, RLIMIT_STACK, &want, &prev));
    CHECK(prev.rlim_cur == 4 << 20 && prev.rlim_max == old.rlim_max);
    CHECK_OK(prlimit(0, RLIMIT_STACK, NULL, &r));
    CHECK(r.rlim_cur == old.rlim_cur);
    CHECK_OK(prlimit(getpid(), RLIMIT_CORE, NULL, &r));
    r.rlim_cur = r.rlim_max == RLIM_INFINITY ? 1 << 20 : r.rlim_max;
    CHECK_OK(setrlimit(RLIMIT_CORE, &r));
    /* soft above hard */
    r.rlim_cur = 100;
    r.rlim_max = 10;
    CHECK_ERR(setrlimit(RLIMIT_CORE, &r), EINVAL);
    CHECK_ERR(getrlimit(100, &r), EINVAL);
    CHECK_ERR(syscall(SYS_getrlimit, RLIMIT_NOFILE, (void *)1), EFAULT);
}

static void test_sysinfo(void) {
    struct sysinfo si;
    CHECK_OK(sysinfo(&si));
    CHECK(si.mem_unit > 0 && si.totalram > 0 && si.freeram <= si.totalram && si.procs >= 1);
    CHECK(si.uptime >= 0);
    CHECK(get_nprocs() >= 1);
    CHECK(sysconf(_SC_PAGESIZE) == 4096);
}

static void test_getrandom(void) {
    unsigned char a[32], b[32];
    CHECK(getrandom(a, sizeof a, 0) == sizeof a);
    CHECK(getrandom(b, sizeof b, GRND_NONBLOCK) == sizeof b);
    CHECK(memcmp(a, b, sizeof a) != 0);
    CHECK(getrandom(a, 0, 0) == 0);
    CHECK_ERR(getrandom(a, sizeof a, 0x100), EINVAL);
    CHECK_ERR(getrandom(a, sizeof a, GRND_RANDOM | GRND_INSECURE), EINVAL);
}

static void test_clocks(void) {
    struct timespec t1, t2, res;
    CHECK_OK(clock_gettime(CLOCK_MONOTONIC, &t1));
    CHECK_OK(clock_gettime(CLOCK_MONOTONIC, &t2));
    CHECK(ns(t2) >= ns(t1));
    CHECK(t1.tv_nsec >= 0 && t1.tv_nsec < 1000000000);
    clockid_t ids[] = {CLOCK_REALTIME,        CLOCK_MONOTONIC,       CLOCK_PROCESS_CPUTIME_ID,
                       CLOCK_THREAD_CPUTIME_ID, CLOCK_MONOTONIC_RAW, CLOCK_REALTIME_COARSE,
                       CLOCK_MONOTONIC_COARSE, CLOCK_BOOTTIME};
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++) {
        CHECK_OK(clock_gettime(ids[i], &t1));
        CHECK_OK(clock_getres(ids[i], &res));
        printf("clock %d: resolution %ld.%09ld\n", (int)ids[i], (long)res.tv_sec, res.tv_nsec);
    }
    CHECK_OK(clock_getres(CLOCK_MONOTONIC, NULL));
    CHECK_ERR(clock_gettime((clockid_t)1234, &t1), EINVAL);
    CHECK_ERR(clock_getres((clockid_t)1234, &res), EINVAL);

    /* Real time agrees between clock_gettime, gettimeofday and time, read
     * in that order: time() and the time system call count whole seconds
     * of a clock that may lag the precise one by a tick, so they are
     * compared with precise readings taken after them. */
    struct timeval tv;
    time_t before = time(NULL);
    CHECK_OK(clock_gettime(CLOCK_REALTIME, &t1));
    CHECK_OK(gettimeofday(&tv, NULL));
    time_t now = time(NULL);
    CHECK_OK(clock_gettime(CLOCK_REALTIME, &t2));
    CHECK(before <= t1.tv_sec);
    CHECK(tv.tv_sec > t1.tv_sec || (tv.tv_sec == t1.tv_sec && tv.tv_usec >= t1.tv_nsec / 1000));
    CHECK(tv.tv_sec < t2.tv_sec || (tv.tv_sec == t2.tv_sec && tv.tv_usec <= t2.tv_nsec / 1000 + 1));
    CHECK(now >= before && now <= t2.tv_sec);
    CHECK(t1.tv_sec > 1700000000);
    time_t by_call = syscall(SYS_time, NULL);
    CHECK_OK(clock_gettime(CLOCK_REALTIME, &t2));
    CHECK(by_call >= before && by_call <= t2.tv_sec);
    time_t tt;
    CHECK(syscall(SYS_time, &tt) == tt);
    CHECK_OK(syscall(SYS_gettimeofday, &tv, NULL));
}

static void test_sleep(void) {
    int64_t start = mono_ns();
    struct timespec d = {0, 20 * 1000 * 1000}, rem = {9, 9};
    CHECK_OK(nanosleep(&d, &rem));
    CHECK(mono_ns() - start >= 20 * 1000 * 1000);

    start = mono_ns();
    d.tv_nsec = 15 * 1000 * 1000;
    CHECK(clock_nanosleep(CLOCK_MONOTONIC, 0, &d, NULL) == 0);
    CHECK(mono_ns() - start >= 15 * 1000 * 1000);

    /* Absolute: until a point in time; one in the past returns at once. */
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    start = ns(until);
    until.tv_nsec += 10 * 1000 * 1000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    CHECK(clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == 0);
    CHECK(mono_ns() >= ns(until));
    struct timespec past = {1, 0};
    start = mono_ns();
    CHECK(clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &past, NULL) == 0);
    CHECK(mono_ns() - start < 1000 * 1000 * 1000);
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec = 0;
    CHECK(clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &until, NULL) == 0);

    /* clock_nanosleep returns the error instead of setting errno. */
    d.tv_nsec = 1000000000;
    CHECK(clock_nanosleep(CLOCK_MONOTONIC, 0, &d, NULL) == EINVAL);
    d.tv_nsec = 0;
    CHECK(clock_nanosleep(CLOCK_THREAD_CPUTIME_ID, 0, &d, NULL) == EINVAL);
    CHECK(clock_nanosleep((clockid_t)1234, 0, &d, NULL) == EINVAL);
    d.tv_sec = -1;
    CHECK_ERR(nanosleep(&d, NULL), EINVAL);
}

static void test_sched(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CHECK_OK(sched_getaffinity(0, sizeof set, &set));
    int n = CPU_COUNT(&set);
    CHECK(n >= 1);
    CHECK(n == sysconf(_SC_NPROCESSORS_ONLN) || n <= sysconf(_SC_NPROCESSORS_ONLN));
    printf("sched_getaffinity: %d cpus\n", n);
    CHECK_OK(sched_getaffinity(getpid(), sizeof set, &set));
    long r = syscall(SYS_sched_getaffinity, 0, sizeof set, &set);
    CHECK(r > 0 && r % 8 == 0 && r <= (long)sizeof set);
    CHECK_ERR(syscall(SYS_sched_getaffinity, 0, 1, &set), EINVAL);
    CHECK_OK(sched_setaffinity(0, sizeof set, &set));
    CHECK_OK(sched_yield());
    CHECK(sched_getscheduler(0) == SCHED_OTHER);
}

static void test_umask(void) {
    mode_t old = umask(027);
    CHECK(umask(old) == 027);
    CHECK(umask(0777 | 01000) == old);
    CHECK(umask(old) == 0777);
}

static volatile int handled;
static void handler(int sig) {
    handled = sig;
}

static void test_signals(void) {
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGUSR2);
    sigaddset(&sa.sa_mask, SIGKILL);
    sa.sa_flags = SA_RESTART | SA_NODEFER;
    CHECK_OK(sigaction(SIGUSR1, &sa, NULL));
    memset(&old, 0, sizeof old);
    CHECK_OK(sigaction(SIGUSR1, NULL, &old));
    CHECK(old.sa_handler == handler);
    CHECK(sigismember(&old.sa_mask, SIGUSR2) == 1);
    CHECK(sigismember(&old.sa_mask, SIGKILL) == 0); /* cannot be blocked */
    CHECK((old.sa_flags & (SA_RESTART | SA_NODEFER | SA_SIGINFO)) == (SA_RESTART | SA_NODEFER));
    sa.sa_handler = SIG_IGN;
    CHECK_OK(sigaction(SIGUSR1, &sa, &old));
    CHECK(old.sa_handler == handler);
    CHECK_OK(sigaction(SIGUSR1, NULL, &old));
    CHECK(old.sa_handler == SIG_IGN);
    /* An ignored signal sent to oneself vanishes. */
    CHECK_OK(kill(getpid(), SIGUSR1));
    CHECK_OK(raise(SIGUSR1));
    sa.sa_handler = SIG_DFL;
    CHECK_OK(sigaction(SIGUSR1, &sa, NULL));
    CHECK_OK(sigaction(SIGTERM, NULL, &old));
    CHECK(old.sa_handler == SIG_DFL);
    CHECK_ERR(sigaction(SIGKILL, &sa, NULL), EINVAL);
    CHECK_ERR(sigaction(SIGSTOP, &sa, NULL), EINVAL);
    CHECK_OK(sigaction(SIGKILL, NULL, &old));
    CHECK_ERR(sigaction(0, &sa, NULL), EINVAL);
    CHECK_ERR(sigaction(65, &sa, NULL), EINVAL);
    CHECK_ERR(syscall(SYS_rt_sigaction, SIGUSR1, NULL, &old, 4), EINVAL);

    sigset_t set, cur;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGKILL);
    sigaddset(&set, SIGSTOP);
    CHECK_OK(sigprocmask(SIG_BLOCK, &set, NULL));
    CHECK_OK(sigprocmask(SIG_BLOCK, NULL, &cur));
    CHECK(sigismember(&cur, SIGUSR1) == 1 && sigismember(&cur, SIGKILL) == 0 && sigismember(&cur, SIGSTOP) == 0);
    /* A blocked signal sent to oneself stays pending: nothing happens yet. */
    sigemptyset(&set);
    sigaddset(&set, SIGUSR2);
    CHECK_OK(sigprocmask(SIG_SETMASK, &set, &cur));
    CHECK(sigismember(&cur, SIGUSR1) == 1);
    CHECK_OK(sigprocmask(SIG_SETMASK, NULL, &cur));
    CHECK(sigismember(&cur, SIGUSR1) == 0 && sigismember(&cur, SIGUSR2) == 1);
    CHECK_OK(sigprocmask(SIG_UNBLOCK, &set, &cur));
    CHECK_OK(sigprocmask(SIG_SETMASK, NULL, &cur));
    CHECK(sigismember(&cur, SIGUSR2) == 0);
    CHECK_ERR(sigprocmask(99, &set, NULL), EINVAL);
    CHECK_ERR(syscall(SYS_rt_sigprocmask, SIG_BLOCK, &set, NULL, 4), EINVAL);
    CHECK(handled == 0);
}

static void test_arch_prctl(void) {
    uintptr_t fs = 0, self;
    CHECK_OK(syscall(SYS_arch_prctl, ARCH_GET_FS, &fs));
    /* The thread pointer's first word points at itself (x86_64 TLS ABI). */
    __asm__ volatile("mov %%fs:0, %0" : "=r"(self));
    CHECK(fs != 0 && fs == self);
    static __thread int tls_var = 5;
    CHECK((uintptr_t)&tls_var < fs && fs - (uintptr_t)&tls_var < 4096 && tls_var == 5);
    uintptr_t gs = 1;
    CHECK_OK(syscall(SYS_arch_prctl, ARCH_GET_GS, &gs));
    CHECK_ERR(syscall(SYS_arch_prctl, 0x9999, &gs), EINVAL);
    CHECK_ERR(syscall(SYS_arch_prctl, ARCH_GET_FS, (void *)1), EFAULT);
    CHECK_ERR(syscall(SYS_arch_prctl, ARCH_SET_FS, 0xffff800000000000UL), EPERM);
    /* Setting it to what it is changes nothing. */
    CHECK_OK(syscall(SYS_arch_prctl, ARCH_SET_FS, fs));
    CHECK(tls_var == 5);
}

static int tid_word;

static void test_set_tid_address(void) {
    long tid = syscall(SYS_gettid);
    CHECK(syscall(SYS_set_tid_address, &tid_word) == tid);
}

static void test_futex(void) {
    uint32_t word = 7;
    struct timespec t = {0, 10 * 1000 * 1000};
    CHECK_ERR(syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 8, &t, NULL, 0), EAGAIN);
    int64_t start = mono_ns();
    CHECK_ERR(syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 7, &t, NULL, 0), ETIMEDOUT);
    CHECK(mono_ns() - start >= 10 * 1000 * 1000);
    CHECK(syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0) == 0);
    CHECK_ERR(syscall(SYS_futex, (void *)0x1000, FUTEX_WAIT_PRIVATE, 7, &t, NULL, 0), EFAULT);
    /* a misaligned futex word */
    CHECK_ERR(syscall(SYS_futex, (char *)&word + 1, FUTEX_WAIT_PRIVATE, 7, &t, NULL, 0), EINVAL);
    struct timespec bad = {0, -1};
    CHECK_ERR(syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 7, &bad, NULL, 0), EINVAL);
}

static void test_prctl(void) {
    char name[32];
    CHECK_OK(prctl(PR_SET_NAME, "cordon-test-name-that-is-long"));
    memset(name, 'x', sizeof name);
    CHECK_OK(prctl(PR_GET_NAME, name));
    printf("PR_GET_NAME: %s\n", name);
    CHECK(strcmp(name, "cordon-test-nam") == 0);
    int fd = open("/proc/self/comm", O_RDONLY);
    char comm[32] = {0};
    CHECK(read(fd, comm, sizeof comm) == 16);
    CHECK(strcmp(comm, "cordon-test-nam\n") == 0);
    close(fd);
    CHECK_OK(prctl(PR_SET_NAME, "short"));
    CHECK_OK(prctl(PR_GET_NAME, name));
    CHECK(strcmp(name, "short") == 0);
    CHECK(prctl(PR_GET_DUMPABLE) == 1);
    CHECK_ERR(prctl(9999), EINVAL);
}

int main(void) {
    test_uname();
    test_ids();
    test_rlimits();
    test_sysinfo();
    test_getrandom();
    test_clocks();
    test_sleep();
    test_sched();
    test_umask();
    test_signals();
    test_arch_prctl();
    test_set_tid_address();
    test_futex();
    test_prctl();
    return done();
}
