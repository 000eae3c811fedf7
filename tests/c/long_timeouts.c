/* Timeouts and timer values as long as a timespec can say: Linux clamps
 * them to about 292 years (KTIME_MAX nanoseconds), so they are valid and
 * simply never end. Each call here returns at once (something is ready,
 * or a signal interrupts it) and must not be refused or break anything. */
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "t.h"

#define LONGEST_SEC INT64_MAX
#define HUNDRED_YEARS (100LL * 365 * 24 * 3600)

static void on_signal(int sig) {
    (void)sig;
}

static volatile int sleeping_done;

/* Interrupts the main thread until it is done sleeping. */
static void *interrupter(void *main_thread) {
    while (!sleeping_done) {
        pthread_kill(*(pthread_t *)main_thread, SIGUSR1);
        sched_yield();
    }
    return NULL;
}

int main(void) {
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGALRM, &sa, NULL);
    struct timespec longest = {LONGEST_SEC, 999999999};

    /* Something is ready: the calls return it without waiting. */
    int p[2];
    CHECK_OK(pipe(p));
    CHECK(write(p[1], "x", 1) == 1);
    struct pollfd pfd = {.fd = p[0], .events = POLLIN};
    struct timespec t = longest;
    CHECK(ppoll(&pfd, 1, &t, NULL) == 1);
    CHECK(t.tv_sec > HUNDRED_YEARS);
    fd_set set;
    FD_ZERO(&set);
    FD_SET(p[0], &set);
    t = longest;
    CHECK(pselect(p[0] + 1, &set, NULL, NULL, &t, NULL) == 1);
    FD_ZERO(&set);
    FD_SET(p[0], &set);
    struct timeval tv = {LONGEST_SEC, 999999};
    CHECK(select(p[0] + 1, &set, NULL, NULL, &tv) == 1);
    CHECK(tv.tv_sec > HUNDRED_YEARS);

    int efd = eventfd(1, 0);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN};
    CHECK_OK(epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev));
    t = longest;
    CHECK(syscall(SYS_epoll_pwait2, ep, &ev, 1, &t, NULL, 8) == 1);

    /* A signal already pending is taken at once. */
    sigset_t usr2;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    sigprocmask(SIG_BLOCK, &usr2, NULL);
    raise(SIGUSR2);
    t = longest;
    CHECK(sigtimedwait(&usr2, NULL, &t) == SIGUSR2);

    /* The futex word differs: EAGAIN before any wait. */
    uint32_t word = 1;
    t = longest;
    CHECK_ERR(syscall(SYS_futex, &word, FUTEX_WAIT_PRIVATE, 0, &t, NULL, 0), EAGAIN);
    t = longest;
    CHECK_ERR(syscall(SYS_futex, &word, FUTEX_WAIT_BITSET_PRIVATE, 0, &t, NULL, ~0u), EAGAIN);

    /* Sleeps end only by a signal, with centuries left. */
    pthread_t self = pthread_self(), th;
    sleeping_done = 0;
    CHECK(pthread_create(&th, NULL, interrupter, &self) == 0);
    struct timespec left = {0, 0};
    CHECK_ERR(nanosleep(&longest, &left), EINTR);
    CHECK(left.tv_sec > HUNDRED_YEARS);
    left.tv_sec = 0;
    CHECK(clock_nanosleep(CLOCK_MONOTONIC, 0, &longest, &left) == EINTR);
    CHECK(left.tv_sec > HUNDRED_YEARS);
    CHECK(clock_nanosleep(CLOCK_REALTIME, TIMER_ABSTIME, &longest, NULL) == EINTR);
    sleeping_done = 1;
    pthread_join(th, NULL);

    /* Timers: a value that never comes, and an interval past the first
     * expiry that never comes either. */
    struct itimerval it = {.it_value = {LONGEST_SEC, 999999}}, old;
    CHECK_OK(setitimer(ITIMER_REAL, &it, NULL));
    CHECK_OK(getitimer(ITIMER_REAL, &old));
    CHECK(old.it_value.tv_sec > HUNDRED_YEARS);
    it = (struct itimerval){0};
    CHECK_OK(setitimer(ITIMER_REAL, &it, NULL));

    timer_t timer;
    struct sigevent sev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGUSR2};
    CHECK_OK(timer_create(CLOCK_MONOTONIC, &sev, &timer));
    struct itimerspec its = {.it_value = longest}, got;
    CHECK_OK(timer_settime(timer, 0, &its, NULL));
    CHECK_OK(timer_gettime(timer, &got));
    CHECK(got.it_value.tv_sec > HUNDRED_YEARS);
    its = (struct itimerspec){.it_value = {0, 1}, .it_interval = longest};
    CHECK_OK(timer_settime(timer, 0, &its, NULL));
    CHECK(sigwaitinfo(&usr2, NULL) == SIGUSR2);
    CHECK_OK(timer_gettime(timer, &got));
    CHECK(got.it_value.tv_sec > HUNDRED_YEARS);
    CHECK(got.it_interval.tv_sec > HUNDRED_YEARS);
    CHECK_OK(timer_delete(timer));
    return done();
}
