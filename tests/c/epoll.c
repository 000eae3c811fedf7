/* epoll and eventfd: the interest list and its errors, level- and
 * edge-triggered reports, EPOLLONESHOT, hang-ups and errors of pipe ends,
 * timeouts, wake-ups from another thread, signals (EINTR, epoll_pwait's
 * mask), entries leaving with their files, and eventfd's counter and
 * semaphore modes. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "t.h"

static long ms_since(const struct timespec *a) {
    struct timespec b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (b.tv_sec - a->tv_sec) * 1000 + (b.tv_nsec - a->tv_nsec) / 1000000;
}

/* epoll_wait with any array pointer, past the compiler's checks. */
static long raw_wait(int ep, void *events, int max, int ms) { return syscall(SYS_epoll_wait, ep, events, max, ms); }

static int add(int ep, int fd, uint32_t events, uint64_t data) {
    struct epoll_event ev = {.events = events, .data.u64 = data};
    return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

static int mod(int ep, int fd, uint32_t events, uint64_t data) {
    struct epoll_event ev = {.events = events, .data.u64 = data};
    return epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
}

/* One event within `ms`: its events, or 0 if none came. */
static uint32_t one(int ep, int ms, uint64_t want_data) {
    struct epoll_event ev[4];
    int n = epoll_wait(ep, ev, 4, ms);
    if (n != 1) return 0;
    CHECK(ev[0].data.u64 == want_data);
    return ev[0].events;
}

static void test_errors(void) {
    CHECK_ERR(epoll_create1(0x1234), EINVAL);
    CHECK_ERR(epoll_create(0), EINVAL);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    CHECK(ep >= 0 && fcntl(ep, F_GETFD) == FD_CLOEXEC);
    int old = epoll_create(1);
    CHECK(old >= 0 && fcntl(old, F_GETFD) == 0);
    int p[2];
    CHECK_OK(pipe(p));
    CHECK_ERR(add(ep, 999, EPOLLIN, 0), EBADF);
    CHECK_ERR(add(999, p[0], EPOLLIN, 0), EBADF);
    CHECK_ERR(add(p[1], p[0], EPOLLIN, 0), EINVAL); /* not an epoll descriptor */
    CHECK_ERR(add(ep, ep, EPOLLIN, 0), EINVAL);
    int file = open("/proc/self/exe", O_RDONLY);
    CHECK_ERR(add(ep, file, EPOLLIN, 0), EPERM); /* regular files have no readiness */
    CHECK_OK(add(ep, p[0], EPOLLIN, 1));
    CHECK_ERR(add(ep, p[0], EPOLLIN, 1), EEXIST);
    CHECK_ERR(mod(ep, p[1], EPOLLOUT, 2), ENOENT);
    CHECK_ERR(epoll_ctl(ep, EPOLL_CTL_DEL, p[1], NULL), ENOENT);
    CHECK_ERR(epoll_ctl(ep, 99, p[0], &(struct epoll_event){0}), EINVAL);
    CHECK_ERR(epoll_ctl(ep, EPOLL_CTL_ADD, p[1], (void *)8), EFAULT);
    CHECK_ERR(mod(ep, p[0], EPOLLIN | EPOLLEXCLUSIVE, 1), EINVAL);
    CHECK_OK(epoll_ctl(ep, EPOLL_CTL_DEL, p[0], NULL));
    struct epoll_event ev[1];
    CHECK_ERR(epoll_wait(ep, ev, 0, 0), EINVAL);
    CHECK_ERR(epoll_wait(p[0], ev, 1, 0), EINVAL);
    CHECK_ERR(epoll_wait(999, ev, 1, 0), EBADF);
    /* The array is only checked for being in user space until an event
     * is copied out. */
    CHECK(raw_wait(ep, NULL, 1, 0) == 0);
    CHECK_OK(add(ep, p[1], EPOLLOUT, 3));
    CHECK_ERR(raw_wait(ep, (void *)8, 1, 0), EFAULT);
    struct stat st;
    CHECK_OK(fstat(ep, &st));
    CHECK((st.st_mode & S_IFMT) == 0 && (st.st_mode & 0777) == 0600);
    char path[64], link[64] = {0};
    snprintf(path, sizeof path, "/proc/self/fd/%d", ep);
    CHECK(readlink(path, link, sizeof link - 1) > 0 && strcmp(link, "anon_inode:[eventpoll]") == 0);
    close(file);
    close(old);
    close(ep);
    close(p[0]);
    close(p[1]);
}

static void test_triggers(void) {
    int ep = epoll_create1(0);
    int p[2];
    CHECK_OK(pipe2(p, O_NONBLOCK));
    char b[64];
    /* Level-triggered: reported while data waits. */
    CHECK_OK(add(ep, p[0], EPOLLIN, 10));
    CHECK(one(ep, 0, 10) == 0);
    CHECK(write(p[1], "abc", 3) == 3);
    CHECK(one(ep, 0, 10) == EPOLLIN);
    CHECK(one(ep, 0, 10) == EPOLLIN);
    CHECK(read(p[0], b, sizeof b) == 3);
    CHECK(one(ep, 0, 10) == 0);
    /* Edge-triggered: once per change. */
    CHECK_OK(mod(ep, p[0], EPOLLIN | EPOLLET, 11));
    CHECK(write(p[1], "a", 1) == 1);
    CHECK(one(ep, 0, 11) == EPOLLIN);
    CHECK(one(ep, 0, 11) == 0);
    CHECK(write(p[1], "b", 1) == 1);
    CHECK(one(ep, 0, 11) == EPOLLIN);
    CHECK(read(p[0], b, sizeof b) == 2);
    /* One-shot: once until re-armed. */
    CHECK_OK(mod(ep, p[0], EPOLLIN | EPOLLONESHOT, 12));
    CHECK(write(p[1], "c", 1) == 1);
    CHECK(one(ep, 0, 12) == EPOLLIN);
    CHECK(one(ep, 0, 12) == 0);
    CHECK_OK(mod(ep, p[0], EPOLLIN | EPOLLONESHOT, 13));
    CHECK(one(ep, 0, 13) == EPOLLIN);
    CHECK(read(p[0], b, sizeof b) == 1);
    /* The write end: writable, then an error once the reader is gone;
     * the read end of another pipe hangs up when its writer goes. */
    CHECK_OK(add(ep, p[1], EPOLLOUT, 14));
    CHECK_OK(epoll_ctl(ep, EPOLL_CTL_DEL, p[0], NULL));
    CHECK(one(ep, 0, 14) == EPOLLOUT);
    close(p[0]);
    CHECK(one(ep, 0, 14) == (EPOLLOUT | EPOLLERR));
    CHECK_OK(epoll_ctl(ep, EPOLL_CTL_DEL, p[1], NULL));
    close(p[1]);
    int q[2];
    CHECK_OK(pipe(q));
    CHECK_OK(add(ep, q[0], EPOLLIN, 15));
    CHECK(write(q[1], "x", 1) == 1);
    close(q[1]);
    CHECK(one(ep, 0, 15) == (EPOLLIN | EPOLLHUP));
    CHECK(read(q[0], b, sizeof b) == 1);
    CHECK(one(ep, 0, 15) == EPOLLHUP);
    /* An entry goes with its file: not with one descriptor of it. */
    int d = dup(q[0]);
    close(q[0]);
    CHECK(one(ep, 0, 15) == EPOLLHUP);
    close(d);
    CHECK(one(ep, 0, 15) == 0);
    close(ep);
}

/* Several ready files and a small array: each gets its turn. */
static void test_fairness(void) {
    int ep = epoll_create1(0);
    int fds[3];
    for (int i = 0; i < 3; i++) {
        fds[i] = eventfd(1, 0);
        CHECK_OK(add(ep, fds[i], EPOLLIN, 100 + i));
    }
    int seen[3] = {0};
    struct epoll_event ev[1];
    for (int i = 0; i < 3; i++)
        if (epoll_wait(ep, ev, 1, 0) == 1 && ev[0].data.u64 >= 100 && ev[0].data.u64 < 103) seen[ev[0].data.u64 - 100]++;
    CHECK(seen[0] == 1 && seen[1] == 1 && seen[2] == 1);
    struct epoll_event all[8];
    CHECK(epoll_wait(ep, all, 8, 0) == 3);
    for (int i = 0; i < 3; i++) close(fds[i]);
    close(ep);
}

static int late_fd;
static void *write_late(void *arg) {
    usleep(50 * 1000);
    uint64_t one = 1;
    (void)!write(late_fd, &one, 8);
    return NULL;
}

static volatile sig_atomic_t got_signal;
static void on_signal(int sig) { got_signal = sig; }

static void test_waiting(void) {
    int ep = epoll_create1(0);
    late_fd = eventfd(0, EFD_NONBLOCK);
    CHECK_OK(add(ep, late_fd, EPOLLIN, 7));
    struct epoll_event ev[2];
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK(epoll_wait(ep, ev, 2, 60) == 0);
    CHECK(ms_since(&t0) >= 55);
    /* Woken by another thread. */
    pthread_t th;
    pthread_create(&th, NULL, write_late, NULL);
    CHECK(epoll_wait(ep, ev, 2, 5000) == 1 && ev[0].data.u64 == 7 && ev[0].events == EPOLLIN);
    pthread_join(th, NULL);
    uint64_t v;
    CHECK(read(late_fd, &v, 8) == 8 && v == 1);
    /* poll on the epoll descriptor itself wakes when a watched file does. */
    struct pollfd pf = {.fd = ep, .events = POLLIN};
    CHECK(poll(&pf, 1, 0) == 0);
    pthread_create(&th, NULL, write_late, NULL);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK(poll(&pf, 1, 5000) == 1 && pf.revents == POLLIN);
    CHECK(ms_since(&t0) < 4000);
    pthread_join(th, NULL);
    CHECK(read(late_fd, &v, 8) == 8 && v == 1);
    /* A handled signal ends the wait with EINTR, SA_RESTART or not. */
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
    sigaction(SIGALRM, &sa, NULL);
    struct itimerspec it = {.it_value = {0, 50 * 1000 * 1000}};
    timer_t tm;
    struct sigevent sev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGALRM};
    CHECK_OK(timer_create(CLOCK_MONOTONIC, &sev, &tm));
    CHECK_OK(timer_settime(tm, 0, &it, NULL));
    got_signal = 0;
    CHECK_ERR(epoll_wait(ep, ev, 2, 5000), EINTR);
    CHECK(got_signal == SIGALRM);
    timer_delete(tm);
    /* epoll_pwait: a blocked, pending signal is let in by the wait's mask. */
    sa.sa_flags = 0;
    sigaction(SIGUSR1, &sa, NULL);
    sigset_t usr1, none;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigemptyset(&none);
    sigprocmask(SIG_BLOCK, &usr1, NULL);
    raise(SIGUSR1);
    got_signal = 0;
    CHECK(epoll_pwait(ep, ev, 2, 0, &usr1) == 0 && got_signal == 0);
    CHECK_ERR(epoll_pwait(ep, ev, 2, 5000, &none), EINTR);
    CHECK(got_signal == SIGUSR1);
    sigset_t now;
    sigprocmask(SIG_SETMASK, NULL, &now);
    CHECK(sigismember(&now, SIGUSR1)); /* the old mask is back */
    sigprocmask(SIG_UNBLOCK, &usr1, NULL);
    close(late_fd);
    close(ep);
}

static void *read_blocking(void *arg) {
    uint64_t v = 0;
    if (read(*(int *)arg, &v, 8) != 8) return (void *)0;
    return (void *)(uintptr_t)v;
}

static void test_eventfd(void) {
    CHECK_ERR(eventfd(0, 0x1234), EINVAL);
    int e = eventfd(5, EFD_NONBLOCK | EFD_CLOEXEC);
    CHECK(e >= 0 && fcntl(e, F_GETFD) == FD_CLOEXEC);
    uint64_t v = 0;
    uint32_t small;
    CHECK_ERR(read(e, &small, 4), EINVAL);
    CHECK(read(e, &v, 8) == 8 && v == 5);
    CHECK_ERR(read(e, &v, 8), EAGAIN);
    v = 3;
    CHECK(write(e, &v, 8) == 8);
    CHECK(write(e, &v, 8) == 8);
    CHECK(read(e, &v, 8) == 8 && v == 6);
    v = UINT64_MAX;
    CHECK_ERR(write(e, &v, 8), EINVAL);
    CHECK_ERR(write(e, &small, 4), EINVAL);
    v = UINT64_MAX - 1;
    CHECK(write(e, &v, 8) == 8);
    v = 1;
    CHECK_ERR(write(e, &v, 8), EAGAIN); /* would pass the maximum */
    CHECK(read(e, &v, 8) == 8 && v == UINT64_MAX - 1);
    char path[64], link[64] = {0};
    snprintf(path, sizeof path, "/proc/self/fd/%d", e);
    CHECK(readlink(path, link, sizeof link - 1) > 0 && strcmp(link, "anon_inode:[eventfd]") == 0);
    close(e);
    /* Semaphore mode: one at a time. */
    int s = eventfd(2, EFD_SEMAPHORE | EFD_NONBLOCK);
    CHECK(read(s, &v, 8) == 8 && v == 1);
    CHECK(read(s, &v, 8) == 8 && v == 1);
    CHECK_ERR(read(s, &v, 8), EAGAIN);
    close(s);
    /* A blocking read waits for a write from another thread. */
    int b = eventfd(0, 0);
    pthread_t th;
    pthread_create(&th, NULL, read_blocking, &b);
    usleep(30 * 1000);
    v = 42;
    CHECK(write(b, &v, 8) == 8);
    void *got;
    pthread_join(th, &got);
    CHECK((uintptr_t)got == 42);
    close(b);
}

int main(void) {
    test_errors();
    test_triggers();
    test_fairness();
    test_waiting();
    test_eventfd();
    return done();
}
