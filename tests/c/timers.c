/* Timers that send signals: alarm (its return value, cancelling, the
 * siginfo), setitimer/getitimer ITIMER_REAL one-shot and periodic, POSIX
 * timers with SIGEV_SIGNAL (value, SI_TIMER, overruns while blocked,
 * absolute times, timer_gettime), SIGEV_THREAD_ID aimed at one thread,
 * SIGEV_THREAD, SIGEV_NONE, deletion; none inherited by fork; alarm kept
 * and POSIX timers dropped by execve. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t.h"

static volatile int hits, last_code, last_value;
static volatile long last_tid;
static void on_signal(int sig, siginfo_t *si, void *uc) {
    hits++;
    last_code = si->si_code;
    last_value = si->si_value.sival_int;
    last_tid = syscall(SYS_gettid);
}

static void install(int sig) {
    struct sigaction sa = {0};
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    CHECK_OK(sigaction(sig, &sa, NULL));
}

static void wait_hits(int n) {
    for (int i = 0; i < 5000 && hits < n; i++) usleep(1000);
}

static long ms_since(const struct timespec *t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (t1.tv_sec - t0->tv_sec) * 1000 + (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

static volatile int thread_ready;
static volatile long thread_tid;
static void *sleeper(void *arg) {
    thread_tid = syscall(SYS_gettid);
    thread_ready = 1;
    while (hits == 0) usleep(1000);
    return NULL;
}

static _Atomic int callbacks;
static void callback(union sigval v) { callbacks += v.sival_int; }

int main(int argc, char **argv) {
    if (argc > 1) {
        /* After execve: alarm kept (about 10 s left), POSIX timers gone:
         * the SIGUSR1 timer of the old image would kill this one. */
        unsigned left = alarm(0);
        usleep(200000);
        return left >= 8 && left <= 10 ? 0 : 1;
    }
    install(SIGALRM);
    install(SIGUSR1);
    install(SIGUSR2);

    /* alarm: fires once with SI_KERNEL; returns what was left. */
    CHECK(alarm(0) == 0);
    CHECK(alarm(10) == 0);
    CHECK(alarm(1) >= 9);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    wait_hits(1);
    CHECK(hits == 1 && last_code == SI_KERNEL);
    long ms = ms_since(&t0);
    CHECK(ms >= 900 && ms < 3000);
    CHECK(alarm(0) == 0);
    /* Cancelled: nothing comes. */
    hits = 0;
    alarm(1);
    alarm(0);
    usleep(1200000);
    CHECK(hits == 0);

    /* setitimer: periodic, then stopped; getitimer and the old value. */
    struct itimerval it = {{0, 20000}, {0, 20000}}, old, cur;
    hits = 0;
    CHECK_OK(setitimer(ITIMER_REAL, &it, &old));
    CHECK(old.it_value.tv_sec == 0 && old.it_value.tv_usec == 0);
    CHECK_OK(getitimer(ITIMER_REAL, &cur));
    CHECK(cur.it_interval.tv_usec == 20000 && cur.it_value.tv_usec <= 20000);
    wait_hits(5);
    CHECK(hits >= 5);
    struct itimerval zero = {{0, 0}, {0, 0}};
    CHECK_OK(setitimer(ITIMER_REAL, &zero, &old));
    CHECK(old.it_interval.tv_usec == 20000);
    int h = hits;
    usleep(100000);
    CHECK(hits == h);
    CHECK_OK(getitimer(ITIMER_REAL, &cur));
    CHECK(cur.it_value.tv_sec == 0 && cur.it_value.tv_usec == 0);
    it = (struct itimerval){{0, 0}, {0, 1000000}};
    CHECK_ERR(setitimer(ITIMER_REAL, &it, NULL), EINVAL);

    /* POSIX timer, SIGEV_SIGNAL: value and SI_TIMER. */
    struct sigevent sev = {0};
    sev.sigev_notify = SIGEV_SIGNAL;
    sev.sigev_signo = SIGUSR1;
    sev.sigev_value.sival_int = 4242;
    timer_t tm;
    CHECK_OK(timer_create(CLOCK_MONOTONIC, &sev, &tm));
    struct itimerspec its = {{0, 0}, {0, 30000000}}, oits;
    hits = 0;
    CHECK_OK(timer_settime(tm, 0, &its, NULL));
    CHECK_OK(timer_gettime(tm, &oits));
    CHECK(oits.it_value.tv_nsec > 0 && oits.it_value.tv_nsec <= 30000000);
    wait_hits(1);
    CHECK(hits == 1 && last_code == SI_TIMER && last_value == 4242);
    CHECK_OK(timer_gettime(tm, &oits));
    CHECK(oits.it_value.tv_sec == 0 && oits.it_value.tv_nsec == 0);
    /* Periodic with the signal blocked: one queued, the rest overruns,
     * counted when the signal is taken. */
    sigset_t s, prev;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    sigprocmask(SIG_BLOCK, &s, &prev);
    its = (struct itimerspec){{0, 10000000}, {0, 10000000}};
    CHECK_OK(timer_settime(tm, 0, &its, NULL));
    usleep(200000);
    siginfo_t si;
    struct timespec nowait = {0, 0};
    CHECK(sigtimedwait(&s, &si, &nowait) == SIGUSR1);
    CHECK(si.si_code == SI_TIMER && si.si_value.sival_int == 4242);
    CHECK(si.si_overrun >= 5);
    CHECK(timer_getoverrun(tm) == si.si_overrun);
    CHECK_ERR(sigtimedwait(&s, &si, &nowait), EAGAIN); /* only one queued */
    its = (struct itimerspec){{0, 0}, {0, 0}};
    CHECK_OK(timer_settime(tm, 0, &its, &oits));
    CHECK(oits.it_interval.tv_nsec == 10000000);
    /* A signal still queued when the timer is re-armed is dropped. */
    its = (struct itimerspec){{0, 0}, {0, 10000000}};
    CHECK_OK(timer_settime(tm, 0, &its, NULL));
    usleep(50000);
    its = (struct itimerspec){{0, 0}, {0, 0}};
    CHECK_OK(timer_settime(tm, 0, &its, NULL));
    CHECK_ERR(sigtimedwait(&s, &si, &nowait), EAGAIN);
    /* A timer's signal queues beside the same signal sent by kill. */
    kill(getpid(), SIGUSR1);
    its = (struct itimerspec){{0, 0}, {0, 10000000}};
    CHECK_OK(timer_settime(tm, 0, &its, NULL));
    usleep(50000);
    CHECK(sigtimedwait(&s, &si, &nowait) == SIGUSR1 && si.si_code == SI_USER);
    CHECK(sigtimedwait(&s, &si, &nowait) == SIGUSR1 && si.si_code == SI_TIMER);
    sigprocmask(SIG_SETMASK, &prev, NULL);
    /* An absolute time already past fires at once. */
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    its = (struct itimerspec){{0, 0}, now};
    hits = 0;
    CHECK_OK(timer_settime(tm, TIMER_ABSTIME, &its, NULL));
    wait_hits(1);
    CHECK(hits == 1);
    /* Deleted: gone. */
    CHECK_OK(timer_delete(tm));
    CHECK_ERR(timer_settime(tm, 0, &its, NULL), EINVAL);
    CHECK_ERR(timer_create(12345, &sev, &tm), EINVAL);

    /* SIGEV_THREAD_ID: the signal goes to the named thread. */
    pthread_t t;
    hits = 0;
    pthread_create(&t, NULL, sleeper, NULL);
    while (!thread_ready) usleep(1000);
    sev = (struct sigevent){0};
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = SIGUSR2;
    sev._sigev_un._tid = (pid_t)thread_tid;
    sev.sigev_value.sival_int = 7;
    CHECK_OK(timer_create(CLOCK_REALTIME, &sev, &tm));
    its = (struct itimerspec){{0, 0}, {0, 20000000}};
    CHECK_OK(timer_settime(tm, 0, &its, NULL));
    pthread_join(t, NULL);
    CHECK(hits == 1 && last_tid == thread_tid && last_value == 7);
    timer_delete(tm);
    /* A thread id of another process is refused. */
    sev._sigev_un._tid = 999999;
    CHECK_ERR(timer_create(CLOCK_REALTIME, &sev, &tm), EINVAL);

    /* SIGEV_THREAD: the C library runs the callback on a thread. */
    sev = (struct sigevent){0};
    sev.sigev_notify = SIGEV_THREAD;
    sev.sigev_notify_function = callback;
    sev.sigev_value.sival_int = 3;
    CHECK_OK(timer_create(CLOCK_MONOTONIC, &sev, &tm));
    its = (struct itimerspec){{0, 20000000}, {0, 20000000}};
    CHECK_OK(timer_settime(tm, 0, &its, NULL));
    for (int i = 0; i < 5000 && callbacks < 9; i++) usleep(1000);
    CHECK(callbacks >= 9);
    timer_delete(tm);

    /* SIGEV_NONE: counts down, sends nothing. */
    sev = (struct sigevent){0};
    sev.sigev_notify = SIGEV_NONE;
    CHECK_OK(timer_create(CLOCK_MONOTONIC, &sev, &tm));
    its = (struct itimerspec){{0, 0}, {5, 0}};
    CHECK_OK(timer_settime(tm, 0, &its, NULL));
    usleep(20000);
    CHECK_OK(timer_gettime(tm, &oits));
    CHECK(oits.it_value.tv_sec == 4);
    timer_delete(tm);

    /* fork: the child inherits neither alarm nor interval timer. */
    alarm(30);
    it = (struct itimerval){{0, 0}, {20, 0}};
    pid_t pid = fork();
    if (pid == 0) {
        struct itimerval c;
        getitimer(ITIMER_REAL, &c);
        _exit(alarm(0) == 0 && c.it_value.tv_sec == 0 ? 0 : 1);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(alarm(0) > 0);

    /* execve: a periodic POSIX timer must not follow into the new image;
     * the alarm does. */
    pid = fork();
    if (pid == 0) {
        timer_t x;
        struct sigevent e = {0};
        e.sigev_notify = SIGEV_SIGNAL;
        e.sigev_signo = SIGUSR1;
        timer_create(CLOCK_MONOTONIC, &e, &x);
        struct itimerspec p = {{0, 20000000}, {0, 20000000}};
        timer_settime(x, 0, &p, NULL);
        alarm(10);
        execl(argv[0], argv[0], "exec", NULL);
        _exit(127);
    }
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    if (!WIFEXITED(st)) fprintf(stderr, "exec'd child: status %#x\n", st);
    return done();
}
