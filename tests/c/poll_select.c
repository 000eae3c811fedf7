/* poll, ppoll, select and pselect on pipes: readiness bits (POLLIN,
 * POLLOUT, POLLHUP, POLLERR, POLLNVAL), timeouts (zero, short, none),
 * wake-ups from another thread and another process, select's updated
 * timeout and EBADF, and ppoll/pselect's temporary signal mask. */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t.h"

static long ms_since(const struct timespec *t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (t1.tv_sec - t0->tv_sec) * 1000 + (t1.tv_nsec - t0->tv_nsec) / 1000000;
}

static int wfd;
static void *write_later(void *arg) {
    usleep(50000);
    (void)!write(wfd, "t", 1);
    return NULL;
}

static volatile sig_atomic_t hits;
static void on_usr1(int sig) { hits++; }

int main(void) {
    int p[2];
    struct timespec t0;
    CHECK_OK(pipe(p));

    /* Nothing to read: a zero timeout returns at once, a short one after
     * it has passed. */
    struct pollfd fds[4] = {{p[0], POLLIN, 0}};
    CHECK(poll(fds, 1, 0) == 0 && fds[0].revents == 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK(poll(fds, 1, 60) == 0);
    long ms = ms_since(&t0);
    CHECK(ms >= 60 && ms < 2000);
    /* The write end is writable. */
    fds[0] = (struct pollfd){p[1], POLLOUT | POLLIN, 0};
    CHECK(poll(fds, 1, 0) == 1 && fds[0].revents == POLLOUT);
    /* Data: POLLIN; POLLRDNORM when asked for. */
    CHECK(write(p[1], "ab", 2) == 2);
    fds[0] = (struct pollfd){p[0], POLLIN | POLLRDNORM | POLLOUT, 0};
    CHECK(poll(fds, 1, 0) == 1 && fds[0].revents == (POLLIN | POLLRDNORM));
    /* Several descriptors, a negative one ignored, a bad one POLLNVAL. */
    fds[0] = (struct pollfd){p[0], POLLIN, 0};
    fds[1] = (struct pollfd){p[1], POLLOUT, 0};
    fds[2] = (struct pollfd){-1, POLLIN, 77};
    fds[3] = (struct pollfd){999, POLLIN, 0};
    CHECK(poll(fds, 4, 1000) == 3);
    CHECK(fds[0].revents == POLLIN && fds[1].revents == POLLOUT && fds[2].revents == 0 &&
          fds[3].revents == POLLNVAL);
    /* Writer gone: POLLHUP with the data still there, then alone. */
    close(p[1]);
    fds[0] = (struct pollfd){p[0], POLLIN, 0};
    CHECK(poll(fds, 1, 0) == 1 && fds[0].revents == (POLLIN | POLLHUP));
    char buf[8];
    CHECK(read(p[0], buf, 8) == 2);
    CHECK(poll(fds, 1, 0) == 1 && fds[0].revents == POLLHUP);
    /* POLLHUP is reported even if not asked for. */
    fds[0].events = 0;
    CHECK(poll(fds, 1, 0) == 1 && fds[0].revents == POLLHUP);
    close(p[0]);
    /* Reader gone: POLLERR on the write end (with POLLOUT). */
    CHECK_OK(pipe(p));
    close(p[0]);
    fds[0] = (struct pollfd){p[1], POLLOUT, 0};
    CHECK(poll(fds, 1, 0) == 1 && fds[0].revents == (POLLOUT | POLLERR));
    close(p[1]);
    /* A full pipe is not writable. */
    CHECK_OK(pipe2(p, O_NONBLOCK));
    static char big[65536];
    CHECK(write(p[1], big, sizeof big) == sizeof big);
    fds[0] = (struct pollfd){p[1], POLLOUT, 0};
    CHECK(poll(fds, 1, 0) == 0);
    CHECK(read(p[0], big, 4096) == 4096);
    CHECK(poll(fds, 1, 0) == 1 && fds[0].revents == POLLOUT);
    close(p[0]);
    close(p[1]);

    /* Woken by another thread's write, and by another process's. */
    CHECK_OK(pipe(p));
    wfd = p[1];
    pthread_t t;
    pthread_create(&t, NULL, write_later, NULL);
    fds[0] = (struct pollfd){p[0], POLLIN, 0};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK(poll(fds, 1, 5000) == 1 && fds[0].revents == POLLIN);
    CHECK(ms_since(&t0) < 4000);
    pthread_join(t, NULL);
    CHECK(read(p[0], buf, 1) == 1);
    pid_t pid = fork();
    if (pid == 0) {
        usleep(50000);
        (void)!write(p[1], "c", 1);
        _exit(0);
    }
    CHECK(poll(fds, 1, -1) == 1 && fds[0].revents == POLLIN);
    int st;
    waitpid(pid, &st, 0);
    CHECK(read(p[0], buf, 1) == 1);

    /* select: read and write sets, the count, the timeout left. */
    fd_set r, w;
    FD_ZERO(&r);
    FD_ZERO(&w);
    FD_SET(p[0], &r);
    FD_SET(p[1], &w);
    struct timeval tv = {1, 0};
    CHECK(select(p[1] + 1, &r, &w, NULL, &tv) == 1);
    CHECK(!FD_ISSET(p[0], &r) && FD_ISSET(p[1], &w));
    CHECK(tv.tv_sec == 0 || tv.tv_sec == 1); /* time left */
    CHECK(write(p[1], "x", 1) == 1);
    FD_ZERO(&r);
    FD_ZERO(&w);
    FD_SET(p[0], &r);
    FD_SET(p[1], &w);
    CHECK(select(p[1] + 1, &r, &w, NULL, NULL) == 2);
    CHECK(FD_ISSET(p[0], &r) && FD_ISSET(p[1], &w));
    CHECK(read(p[0], buf, 1) == 1);
    /* Timeout: the sets come back empty and tv is zero. */
    FD_ZERO(&r);
    FD_SET(p[0], &r);
    tv = (struct timeval){0, 60000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK(select(p[0] + 1, &r, NULL, NULL, &tv) == 0);
    ms = ms_since(&t0);
    CHECK(ms >= 60 && ms < 2000);
    CHECK(!FD_ISSET(p[0], &r) && tv.tv_sec == 0 && tv.tv_usec == 0);
    /* Only a timeout: select as a sleep. */
    tv = (struct timeval){0, 30000};
    CHECK(select(0, NULL, NULL, NULL, &tv) == 0);
    /* A closed descriptor in a set: EBADF. Negative nfds: EINVAL. */
    int closed = dup(0);
    close(closed);
    FD_ZERO(&r);
    FD_SET(closed, &r);
    tv = (struct timeval){0, 0};
    CHECK_ERR(select(closed + 1, &r, NULL, NULL, &tv), EBADF);
    CHECK_ERR(select(-1, NULL, NULL, NULL, &tv), EINVAL);
    /* End of file is readable for select. */
    int q[2];
    CHECK_OK(pipe(q));
    close(q[1]);
    FD_ZERO(&r);
    FD_SET(q[0], &r);
    tv = (struct timeval){0, 0};
    CHECK(select(q[0] + 1, &r, NULL, NULL, &tv) == 1 && FD_ISSET(q[0], &r));
    close(q[0]);

    /* ppoll and pselect: SIGUSR1 blocked except while waiting. */
    struct sigaction sa = {0};
    sa.sa_handler = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);
    sigset_t block, none, cur;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    sigemptyset(&none);
    sigprocmask(SIG_BLOCK, &block, NULL);
    raise(SIGUSR1); /* pending, blocked */
    CHECK(hits == 0);
    struct timespec ts = {2, 0};
    fds[0] = (struct pollfd){p[0], POLLIN, 0};
    CHECK_ERR(ppoll(fds, 1, &ts, &none), EINTR);
    CHECK(hits == 1);
    sigprocmask(SIG_BLOCK, NULL, &cur);
    CHECK(sigismember(&cur, SIGUSR1)); /* the mask is back */
    /* With the signal blocked in the temporary mask too: a timeout. */
    raise(SIGUSR1);
    ts = (struct timespec){0, 20000000};
    CHECK(ppoll(fds, 1, &ts, &block) == 0);
    CHECK(hits == 1);
    /* The system call itself writes the time left back (the C library's
     * wrapper hides it: use it raw). */
    ts = (struct timespec){0, 20000000};
    CHECK(syscall(SYS_ppoll, fds, 1, &ts, &block, 8) == 0);
    CHECK(ts.tv_sec == 0 && ts.tv_nsec == 0);
    /* Interrupted: the time left is written back too. */
    ts = (struct timespec){5, 0};
    CHECK_ERR(syscall(SYS_ppoll, fds, 1, &ts, &none, 8), EINTR);
    CHECK(hits == 2);
    CHECK(ts.tv_sec == 4 || ts.tv_sec == 3);
    raise(SIGUSR1);
    /* pselect the same way; the pending signal is taken now. */
    FD_ZERO(&r);
    FD_SET(p[0], &r);
    ts = (struct timespec){2, 0};
    CHECK_ERR(pselect(p[0] + 1, &r, NULL, NULL, &ts, &none), EINTR);
    CHECK(hits == 3);
    sigprocmask(SIG_BLOCK, NULL, &cur);
    CHECK(sigismember(&cur, SIGUSR1));
    /* Ready descriptors win over nothing pending: no EINTR. */
    CHECK(write(p[1], "y", 1) == 1);
    CHECK(ppoll(fds, 1, NULL, &none) == 1);
    /* A signal from another process wakes a ppoll. */
    CHECK(read(p[0], buf, 1) == 1);
    pid_t me = getpid();
    pid = fork();
    if (pid == 0) {
        usleep(50000);
        kill(me, SIGUSR1);
        _exit(0);
    }
    CHECK_ERR(ppoll(fds, 1, NULL, &none), EINTR);
    CHECK(hits == 4);
    waitpid(pid, &st, 0);
    sigprocmask(SIG_UNBLOCK, &block, NULL);
    return done();
}
