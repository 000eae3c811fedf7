/* CPU time: the thread and process CPU clocks (their own ids and those of
 * clock_getcpuclockid and pthread_getcpuclockid), their resolution,
 * getrusage, times() and /proc/PID/stat agreeing with them, interval
 * timers on CPU time (ITIMER_VIRTUAL, ITIMER_PROF) and POSIX timers on CPU
 * clocks. Nothing depends on how long anything takes: the program spins
 * until its own CPU clock says enough, and checks order and consistency. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/times.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t.h"

#define MS 1000000LL
/* How far two readings of the same time may differ: the host counts a
 * running thread's time at its ticks. */
#define SLACK (20 * MS)

static int64_t ns_of(struct timespec t) {
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* The time on `c`, -1 if it cannot be read. */
static int64_t now_on(clockid_t c) {
    struct timespec t = {0, 0};
    if (clock_gettime(c, &t) != 0)
        return -1;
    return ns_of(t);
}

static int64_t tv_ns(struct timeval t) {
    return (int64_t)t.tv_sec * 1000000000 + (int64_t)t.tv_usec * 1000;
}

/* Spins until the calling thread has used `ns` more of CPU time. */
static void spin(int64_t ns) {
    int64_t until = now_on(CLOCK_THREAD_CPUTIME_ID) + ns;
    while (now_on(CLOCK_THREAD_CPUTIME_ID) < until)
        ;
}

static void clock_ids(void) {
    struct timespec r;
    CHECK_OK(clock_getres(CLOCK_PROCESS_CPUTIME_ID, &r));
    CHECK(r.tv_sec == 0 && r.tv_nsec == 1);
    CHECK_OK(clock_getres(CLOCK_THREAD_CPUTIME_ID, &r));
    CHECK(r.tv_sec == 0 && r.tv_nsec == 1);
    CHECK_OK(clock_getres(CLOCK_THREAD_CPUTIME_ID, NULL));

    clockid_t mine;
    CHECK(clock_getcpuclockid(getpid(), &mine) == 0);
    CHECK_OK(clock_getres(mine, &r));
    CHECK(r.tv_nsec == 1);
    clockid_t own_thread;
    CHECK(pthread_getcpuclockid(pthread_self(), &own_thread) == 0);
    CHECK_OK(clock_getres(own_thread, &r));

    /* The profiling and virtual clocks (which 0 and 1) tick at HZ. */
    clockid_t prof = (clockid_t)((~(unsigned)0) << 3) | 0;
    struct timespec coarse;
    CHECK_OK(clock_getres(CLOCK_REALTIME_COARSE, &coarse));
    CHECK_OK(clock_getres(prof, &r));
    CHECK(r.tv_sec == 0 && r.tv_nsec == coarse.tv_nsec);
    /* Which 3 is no CPU clock. */
    CHECK_ERR(clock_gettime((clockid_t)((~(unsigned)0) << 3) | 3, &r), EINVAL);

    /* Another process's clock: readable; a process that is not there has
     * none. */
    int p[2];
    CHECK_OK(pipe(p));
    pid_t child = fork();
    if (child == 0) {
        char c;
        close(p[1]);
        _exit(read(p[0], &c, 1) == 0 ? 0 : 1);
    }
    clockid_t theirs;
    CHECK(clock_getcpuclockid(child, &theirs) == 0);
    CHECK(now_on(theirs) >= 0);
    CHECK_OK(clock_getres(theirs, &r));
    /* A thread clock names only threads of the caller's process. */
    clockid_t their_thread = (clockid_t)((~(unsigned)child) << 3) | 4 | 2;
    CHECK_ERR(clock_gettime(their_thread, &r), EINVAL);
    CHECK_ERR(clock_getres(their_thread, &r), EINVAL);
    close(p[1]);
    close(p[0]);
    int status;
    CHECK(waitpid(child, &status, 0) == child);
    CHECK(clock_getcpuclockid(child, &theirs) == ESRCH);
    CHECK_ERR(clock_gettime(theirs, &r), EINVAL);
}

static volatile int go_on;
static volatile int spun;

static void *spinner(void *arg) {
    spin(30 * MS);
    spun = 1;
    while (!go_on)
        ;
    return arg;
}

/* Thread time within process time; the clocks never go back; getrusage,
 * times() and /proc/self/stat add up to the process clock. */
static void consistency(void) {
    int64_t t0 = now_on(CLOCK_THREAD_CPUTIME_ID), p0 = now_on(CLOCK_PROCESS_CPUTIME_ID);
    spin(50 * MS);
    int64_t t1 = now_on(CLOCK_THREAD_CPUTIME_ID), p1 = now_on(CLOCK_PROCESS_CPUTIME_ID);
    CHECK(t1 - t0 >= 50 * MS);
    /* The process clock counts the spin too; in a sandbox, a part of it
     * read between the two clocks may have been counted at a scheduler
     * tick rather than to the nanosecond. */
    CHECK(p1 >= p0 && p1 - p0 >= 50 * MS - SLACK);
    CHECK(t1 <= p1);

    clockid_t mine;
    CHECK(clock_getcpuclockid(getpid(), &mine) == 0);
    int64_t via_pid = now_on(mine);
    int64_t p2 = now_on(CLOCK_PROCESS_CPUTIME_ID);
    CHECK(via_pid >= p1 && via_pid <= p2);

    struct rusage self, thread;
    CHECK_OK(getrusage(RUSAGE_SELF, &self));
    CHECK_OK(getrusage(RUSAGE_THREAD, &thread));
    int64_t p3 = now_on(CLOCK_PROCESS_CPUTIME_ID);
    int64_t self_ns = tv_ns(self.ru_utime) + tv_ns(self.ru_stime);
    int64_t thread_ns = tv_ns(thread.ru_utime) + tv_ns(thread.ru_stime);
    CHECK(self_ns >= p2 - SLACK && self_ns <= p3 + SLACK);
    CHECK(thread_ns <= self_ns + SLACK);
    CHECK(thread_ns >= 50 * MS);

    struct tms tm;
    CHECK(times(&tm) != (clock_t)-1);
    long hz = sysconf(_SC_CLK_TCK);
    int64_t tms_ns = (int64_t)(tm.tms_utime + tm.tms_stime) * (1000000000 / hz);
    int64_t p4 = now_on(CLOCK_PROCESS_CPUTIME_ID);
    CHECK(tms_ns >= p3 - SLACK - 1000000000 / hz && tms_ns <= p4 + SLACK);

    FILE *f = fopen("/proc/self/stat", "r");
    CHECK(f != NULL);
    if (f) {
        unsigned long utime = 0, stime = 0;
        CHECK(fscanf(f, "%*d (%*[^)]) %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) == 2);
        fclose(f);
        int64_t stat_ns = (int64_t)(utime + stime) * (1000000000 / hz);
        int64_t p5 = now_on(CLOCK_PROCESS_CPUTIME_ID);
        CHECK(stat_ns >= p4 - SLACK - 1000000000 / hz && stat_ns <= p5 + SLACK);
    }

    /* Another thread's clock, read while it waits, spinning. */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, spinner, NULL) == 0);
    while (!spun)
        ;
    clockid_t theirs;
    CHECK(pthread_getcpuclockid(t, &theirs) == 0);
    int64_t other = now_on(theirs);
    int64_t again = now_on(theirs);
    CHECK(other >= 30 * MS);
    CHECK(again >= other);
    CHECK(other <= now_on(CLOCK_PROCESS_CPUTIME_ID));
    go_on = 1;
    pthread_join(t, NULL);
    /* The process keeps the time of threads that ended. */
    CHECK(now_on(CLOCK_PROCESS_CPUTIME_ID) >= p1 + other);

    /* A reaped child's time is the parent's children's time. */
    struct rusage before;
    CHECK_OK(getrusage(RUSAGE_CHILDREN, &before));
    pid_t child = fork();
    if (child == 0) {
        spin(30 * MS);
        _exit(0);
    }
    CHECK(waitpid(child, NULL, 0) == child);
    struct rusage after;
    CHECK_OK(getrusage(RUSAGE_CHILDREN, &after));
    int64_t grew = tv_ns(after.ru_utime) + tv_ns(after.ru_stime) - tv_ns(before.ru_utime) - tv_ns(before.ru_stime);
    CHECK(grew >= 30 * MS - SLACK);
    CHECK(times(&tm) != (clock_t)-1);
    CHECK((int64_t)(tm.tms_cutime + tm.tms_cstime) * (1000000000 / hz) >= 30 * MS - SLACK - 1000000000 / hz);

    /* SIGCHLD tells the child's CPU time, in clock ticks: Linux's sampled
     * count, which may fall short of the child's clock on a busy host but
     * never exceeds it. */
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    child = fork();
    if (child == 0) {
        spin(50 * MS);
        _exit(0);
    }
    siginfo_t si;
    CHECK(sigwaitinfo(&chld, &si) == SIGCHLD);
    CHECK(si.si_pid == child);
    CHECK(getrusage(RUSAGE_CHILDREN, &before) == 0);
    CHECK(waitpid(child, NULL, 0) == child);
    CHECK_OK(getrusage(RUSAGE_CHILDREN, &after));
    int64_t child_ns = tv_ns(after.ru_utime) + tv_ns(after.ru_stime) - tv_ns(before.ru_utime) - tv_ns(before.ru_stime);
    CHECK(si.si_utime >= 0 && si.si_stime >= 0);
    CHECK((int64_t)(si.si_utime + si.si_stime) * (1000000000 / hz) <= child_ns + SLACK + 1000000000 / hz);
    sigprocmask(SIG_UNBLOCK, &chld, NULL);
}

static volatile sig_atomic_t fired[65];
static volatile int64_t fired_at;

static void on_signal(int sig) {
    fired[sig]++;
    if (!fired_at)
        fired_at = now_on(CLOCK_PROCESS_CPUTIME_ID);
}

/* Spins until `sig` has come `n` times; false if 5 s of CPU were not
 * enough. */
static int spin_until(int sig, int n) {
    int64_t give_up = now_on(CLOCK_THREAD_CPUTIME_ID) + 5000 * MS;
    while (fired[sig] < n)
        if (now_on(CLOCK_THREAD_CPUTIME_ID) > give_up)
            return 0;
    return 1;
}

static void itimers(void) {
    signal(SIGVTALRM, on_signal);
    signal(SIGPROF, on_signal);
    struct itimerval v = {{0, 0}, {0, 20000}}, cur;
    CHECK_OK(getitimer(ITIMER_VIRTUAL, &cur));
    CHECK(cur.it_value.tv_sec == 0 && cur.it_value.tv_usec == 0);
    fired_at = 0;
    int64_t armed = now_on(CLOCK_PROCESS_CPUTIME_ID);
    CHECK_OK(setitimer(ITIMER_VIRTUAL, &v, NULL));
    CHECK_OK(getitimer(ITIMER_VIRTUAL, &cur));
    CHECK(cur.it_value.tv_sec == 0 && cur.it_value.tv_usec > 0);
    CHECK(spin_until(SIGVTALRM, 1));
    CHECK(fired_at - armed >= 20 * MS);
    CHECK_OK(getitimer(ITIMER_VIRTUAL, &cur));
    CHECK(cur.it_value.tv_sec == 0 && cur.it_value.tv_usec == 0);

    /* Periodic: three signals, then off; the old value comes back. */
    struct itimerval p = {{0, 10000}, {0, 10000}}, old;
    CHECK_OK(setitimer(ITIMER_PROF, &p, NULL));
    CHECK(spin_until(SIGPROF, 3));
    struct itimerval off = {{0, 0}, {0, 0}};
    CHECK_OK(setitimer(ITIMER_PROF, &off, &old));
    CHECK(old.it_interval.tv_usec == 10000);
    CHECK(old.it_value.tv_sec == 0 && old.it_value.tv_usec > 0);

    CHECK_ERR(setitimer(3, &v, NULL), EINVAL);
    CHECK_ERR(getitimer(3, &cur), EINVAL);
    signal(SIGVTALRM, SIG_DFL);
    signal(SIGPROF, SIG_DFL);
}

static void posix_cpu_timers(void) {
    signal(SIGUSR1, on_signal);
    signal(SIGUSR2, on_signal);
    struct sigevent ev = {0};
    ev.sigev_notify = SIGEV_SIGNAL;
    ev.sigev_signo = SIGUSR1;
    timer_t t;
    CHECK_OK(timer_create(CLOCK_PROCESS_CPUTIME_ID, &ev, &t));
    struct itimerspec s = {{0, 0}, {0, 20 * MS}}, cur;
    fired_at = 0;
    int64_t armed = now_on(CLOCK_PROCESS_CPUTIME_ID);
    CHECK_OK(timer_settime(t, 0, &s, NULL));
    CHECK_OK(timer_gettime(t, &cur));
    CHECK(ns_of(cur.it_value) > 0 && ns_of(cur.it_value) <= 20 * MS);
    CHECK(spin_until(SIGUSR1, 1));
    CHECK(fired_at - armed >= 20 * MS);
    CHECK_OK(timer_gettime(t, &cur));
    CHECK(ns_of(cur.it_value) == 0);

    /* Absolute: a time on the CPU clock itself. */
    fired[SIGUSR1] = 0;
    fired_at = 0;
    int64_t at = now_on(CLOCK_PROCESS_CPUTIME_ID) + 15 * MS;
    s.it_value.tv_sec = at / 1000000000;
    s.it_value.tv_nsec = at % 1000000000;
    CHECK_OK(timer_settime(t, TIMER_ABSTIME, &s, NULL));
    CHECK(spin_until(SIGUSR1, 1));
    CHECK(fired_at >= at);
    CHECK_OK(timer_delete(t));

    /* The calling thread's clock, signalling that thread. */
    ev.sigev_notify = SIGEV_THREAD_ID;
    ev.sigev_signo = SIGUSR2;
    ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    CHECK_OK(timer_create(CLOCK_THREAD_CPUTIME_ID, &ev, &t));
    struct itimerspec periodic = {{0, 5 * MS}, {0, 5 * MS}};
    CHECK_OK(timer_settime(t, 0, &periodic, NULL));
    CHECK(spin_until(SIGUSR2, 2));
    CHECK_OK(timer_delete(t));

    /* A clock of a process that is not there. */
    clockid_t gone = (clockid_t)((~(unsigned)999999) << 3) | 2;
    ev.sigev_notify = SIGEV_SIGNAL;
    CHECK_ERR(timer_create(gone, &ev, &t), EINVAL);
    signal(SIGUSR1, SIG_DFL);
    signal(SIGUSR2, SIG_DFL);
}

static volatile int stop_spinning;

static void *spin_until_stopped(void *arg) {
    while (!stop_spinning)
        ;
    return arg;
}

/* Sleeping on the process's CPU clock lasts until the other thread has
 * spun that long; a thread's clock is no clock to sleep on. */
static void cpu_sleeps(void) {
    struct timespec d = {0, 20 * MS};
    CHECK(clock_nanosleep(CLOCK_THREAD_CPUTIME_ID, 0, &d, NULL) == EINVAL);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, spin_until_stopped, NULL) == 0);
    int64_t before = now_on(CLOCK_PROCESS_CPUTIME_ID);
    CHECK(clock_nanosleep(CLOCK_PROCESS_CPUTIME_ID, 0, &d, NULL) == 0);
    CHECK(now_on(CLOCK_PROCESS_CPUTIME_ID) - before >= 20 * MS);
    int64_t at = now_on(CLOCK_PROCESS_CPUTIME_ID) + 10 * MS;
    struct timespec abs = {at / 1000000000, at % 1000000000};
    CHECK(clock_nanosleep(CLOCK_PROCESS_CPUTIME_ID, TIMER_ABSTIME, &abs, NULL) == 0);
    CHECK(now_on(CLOCK_PROCESS_CPUTIME_ID) >= at);
    stop_spinning = 1;
    pthread_join(t, NULL);
}

int main(void) {
    clock_ids();
    cpu_sleeps();
    consistency();
    itimers();
    posix_cpu_timers();
    return done();
}
