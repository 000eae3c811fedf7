/* POSIX message queues: mq_open's flags, attributes and errors, messages
 * taken highest priority first, full and empty queues (EAGAIN, a timeout,
 * a receiver woken by another process), mq_getsetattr, the status a read
 * of the descriptor gives, poll and epoll readiness, mq_notify with a
 * signal, a thread and none, and mq_unlink. */
#include <fcntl.h>
#include <mqueue.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t.h"

static char names[4][64];

static const char *name(int i) {
    snprintf(names[i], sizeof names[i], "/cordon-mq-%d-%d", (int)getpid(), i);
    return names[i];
}

static short revents(int fd) {
    struct pollfd p = {fd, POLLIN | POLLOUT, 0};
    return poll(&p, 1, 0) == 1 ? p.revents : 0;
}

static void test_open(void) {
    const char *n = name(0);
    CHECK_ERR(mq_open(n, O_RDWR), ENOENT);
    struct mq_attr attr = {.mq_maxmsg = 3, .mq_msgsize = 16};
    mqd_t q = mq_open(n, O_RDWR | O_CREAT | O_EXCL, 0640, &attr);
    CHECK(q >= 0);
    CHECK_ERR(mq_open(n, O_RDWR | O_CREAT | O_EXCL, 0640, &attr), EEXIST);
    mqd_t again = mq_open(n, O_RDONLY);
    CHECK(again >= 0 && again != q);
    struct mq_attr got;
    CHECK_OK(mq_getattr(again, &got));
    CHECK(got.mq_maxmsg == 3 && got.mq_msgsize == 16 && got.mq_curmsgs == 0 && got.mq_flags == 0);
    struct stat st;
    CHECK_OK(fstat(q, &st));
    CHECK((st.st_mode & 0777) == (0640 & ~umask(022)));
    umask(022);
    CHECK(st.st_uid == geteuid());
    /* Linux makes every queue descriptor close-on-exec. */
    CHECK(fcntl(q, F_GETFD) == FD_CLOEXEC);

    /* Attributes: both positive, within the limits even for root. */
    struct mq_attr bad = {.mq_maxmsg = 0, .mq_msgsize = 16};
    CHECK_ERR(mq_open(name(1), O_RDWR | O_CREAT, 0600, &bad), EINVAL);
    bad = (struct mq_attr){.mq_maxmsg = 3, .mq_msgsize = -1};
    CHECK_ERR(mq_open(name(1), O_RDWR | O_CREAT, 0600, &bad), EINVAL);
    bad = (struct mq_attr){.mq_maxmsg = 70000, .mq_msgsize = 16};
    CHECK_ERR(mq_open(name(1), O_RDWR | O_CREAT, 0600, &bad), EINVAL);
    /* The kernel's own answers to names, past glibc's checks. */
    CHECK_ERR(syscall(SYS_mq_open, "a/b", O_RDWR | O_CREAT, 0600, NULL), EACCES);
    CHECK_ERR(syscall(SYS_mq_open, "", O_RDWR | O_CREAT, 0600, NULL), ENOENT);
    CHECK_ERR(syscall(SYS_mq_open, n + 1, 3, 0600, NULL), EINVAL);
    char longname[300];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    CHECK_ERR(syscall(SYS_mq_open, longname, O_RDWR | O_CREAT, 0600, NULL), ENAMETOOLONG);
    /* Without attributes: Linux's defaults. */
    mqd_t d = mq_open(name(1), O_RDWR | O_CREAT | O_CLOEXEC, 0600, NULL);
    CHECK(d >= 0);
    CHECK(fcntl(d, F_GETFD) == FD_CLOEXEC);
    CHECK_OK(mq_getattr(d, &got));
    CHECK(got.mq_maxmsg == 10 && got.mq_msgsize == 8192);
    CHECK_OK(mq_close(d));
    CHECK_OK(mq_unlink(name(1)));
    CHECK_ERR(mq_unlink(name(1)), ENOENT);
    CHECK_ERR(mq_getattr(0, &got), EBADF);
    CHECK_OK(mq_close(again));
    CHECK_OK(mq_close(q));
    CHECK_OK(mq_unlink(n));
}

static void test_messages(void) {
    struct mq_attr attr = {.mq_maxmsg = 3, .mq_msgsize = 16};
    mqd_t q = mq_open(name(0), O_RDWR | O_CREAT, 0600, &attr);
    mqd_t wr = mq_open(name(0), O_WRONLY);
    CHECK(q >= 0 && wr >= 0);
    CHECK(revents(q) == POLLOUT);
    CHECK_OK(mq_send(q, "low", 3, 1));
    CHECK(revents(q) == (POLLIN | POLLOUT));
    CHECK_OK(mq_send(q, "high", 4, 9));
    CHECK_OK(mq_send(q, "low2", 4, 1));
    CHECK(revents(q) == POLLIN);
    CHECK(revents(wr) == POLLIN);

    /* Reading the descriptor tells the queue's state. */
    char text[128] = {0};
    CHECK(read(q, text, sizeof text - 1) > 0);
    CHECK(strcmp(text, "QSIZE:11         NOTIFY:0     SIGNO:0     NOTIFY_PID:0     \n") == 0);
    CHECK(read(q, text, sizeof text) == 0);
    CHECK(lseek(q, 0, SEEK_SET) == 0);

    /* Full: EAGAIN without waiting, ETIMEDOUT at the deadline. */
    struct mq_attr nb = {.mq_flags = O_NONBLOCK}, old;
    CHECK_OK(mq_setattr(q, &nb, &old));
    CHECK(old.mq_flags == 0 && old.mq_curmsgs == 3);
    CHECK(fcntl(q, F_GETFL) & O_NONBLOCK);
    CHECK_ERR(mq_send(q, "x", 1, 0), EAGAIN);
    struct timespec past = {0, 0};
    CHECK_ERR(mq_timedsend(wr, "x", 1, 0, &past), ETIMEDOUT);
    struct timespec bad = {0, 1000000000};
    CHECK_ERR(mq_timedsend(wr, "x", 1, 0, &bad), EINVAL);
    CHECK_ERR(mq_send(q, "x", 1, 32768), EINVAL);
    CHECK_ERR(mq_send(q, "0123456789abcdefg", 17, 0), EMSGSIZE);

    /* Highest priority first, then oldest. */
    char buf[32];
    unsigned prio;
    CHECK_ERR(mq_receive(q, buf, 15, &prio), EMSGSIZE);
    CHECK(mq_receive(q, buf, sizeof buf, &prio) == 4 && memcmp(buf, "high", 4) == 0 && prio == 9);
    CHECK(mq_receive(q, buf, sizeof buf, &prio) == 3 && memcmp(buf, "low", 3) == 0 && prio == 1);
    CHECK(mq_receive(q, buf, sizeof buf, NULL) == 4 && memcmp(buf, "low2", 4) == 0);
    CHECK_ERR(mq_receive(q, buf, sizeof buf, &prio), EAGAIN);
    CHECK_ERR(mq_receive(wr, buf, sizeof buf, &prio), EBADF);
    nb.mq_flags = 0;
    CHECK_OK(mq_setattr(q, &nb, NULL));
    CHECK_ERR(mq_timedreceive(q, buf, sizeof buf, &prio, &past), ETIMEDOUT);
    CHECK(mq_send(q, "", 0, 0) == 0 && mq_receive(q, buf, sizeof buf, NULL) == 0);
    CHECK_ERR(mq_send(q, (void *)8, 4, 0), EFAULT);

    /* Another process's message wakes a receiver, and an epoll. */
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 7};
    CHECK_OK(epoll_ctl(ep, EPOLL_CTL_ADD, q, &ev));
    CHECK(epoll_wait(ep, &ev, 1, 0) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        if (mq_send(wr, "from child", 10, 3) != 0) _exit(1);
        if (mq_send(wr, "second", 6, 3) != 0) _exit(2);
        _exit(0);
    }
    CHECK(epoll_wait(ep, &ev, 1, -1) == 1 && ev.data.u32 == 7 && (ev.events & EPOLLIN));
    CHECK(mq_receive(q, buf, sizeof buf, &prio) == 10 && memcmp(buf, "from child", 10) == 0 && prio == 3);
    CHECK(mq_receive(q, buf, sizeof buf, &prio) == 6 && memcmp(buf, "second", 6) == 0);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    pid = fork();
    if (pid == 0) {
        char b[32];
        _exit(mq_receive(q, b, sizeof b, NULL) == 5 && memcmp(b, "later", 5) == 0 ? 0 : 1);
    }
    /* Whether the child sleeps yet or not, it gets the message. */
    CHECK_OK(mq_send(wr, "later", 5, 0));
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(ep);

    /* Unlinked, the name is free; the open queue goes on. */
    CHECK_OK(mq_unlink(name(0)));
    CHECK_ERR(mq_open(name(0), O_RDWR), ENOENT);
    CHECK_OK(mq_send(wr, "still", 5, 0));
    CHECK(mq_receive(q, buf, sizeof buf, NULL) == 5);
    mq_close(wr);
    mq_close(q);
}

static void test_notify(void) {
    struct mq_attr attr = {.mq_maxmsg = 4, .mq_msgsize = 16};
    mqd_t q = mq_open(name(2), O_RDWR | O_CREAT, 0600, &attr);
    CHECK(q >= 0);
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_BLOCK, &usr1, NULL);

    struct sigevent sev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGUSR1};
    sev.sigev_value.sival_int = 1234;
    CHECK_OK(mq_notify(q, &sev));
    CHECK_ERR(mq_notify(q, &sev), EBUSY);
    char status[128] = {0};
    CHECK(pread(q, status, sizeof status - 1, 0) > 0);
    CHECK(strncmp(status, "QSIZE:0          NOTIFY:0     SIGNO:10    NOTIFY_PID:", 52) == 0);
    /* Another process may not take the registration. */
    pid_t pid = fork();
    if (pid == 0) {
        struct sigevent none = {.sigev_notify = SIGEV_NONE};
        _exit(mq_notify(q, &none) == -1 && errno == EBUSY ? 0 : 1);
    }
    int status_code;
    CHECK(waitpid(pid, &status_code, 0) == pid && WIFEXITED(status_code) && WEXITSTATUS(status_code) == 0);

    /* A message into the empty queue from another process: the signal
     * names the sender and carries the value. */
    pid = fork();
    if (pid == 0) _exit(mq_send(q, "ping", 4, 0) == 0 ? 0 : 1);
    siginfo_t si;
    CHECK(sigwaitinfo(&usr1, &si) == SIGUSR1);
    CHECK(si.si_code == SI_MESGQ && si.si_pid == pid && si.si_value.sival_int == 1234);
    CHECK(si.si_uid == getuid());
    CHECK(waitpid(pid, &status_code, 0) == pid && WIFEXITED(status_code) && WEXITSTATUS(status_code) == 0);
    /* Once only: the registration is gone. */
    CHECK(pread(q, status, sizeof status - 1, 0) > 0);
    CHECK(strcmp(status, "QSIZE:4          NOTIFY:0     SIGNO:0     NOTIFY_PID:0     \n") == 0);
    /* Not for a queue that has messages already. */
    CHECK_OK(mq_notify(q, &sev));
    CHECK_OK(mq_send(q, "more", 4, 0));
    struct timespec zero = {0, 0};
    CHECK_ERR(sigtimedwait(&usr1, &si, &zero), EAGAIN);
    char buf[32];
    CHECK(mq_receive(q, buf, sizeof buf, NULL) == 4);
    CHECK(mq_receive(q, buf, sizeof buf, NULL) == 4);
    CHECK_OK(mq_send(q, "now", 3, 0));
    CHECK(sigwaitinfo(&usr1, &si) == SIGUSR1 && si.si_pid == getpid());
    CHECK(mq_receive(q, buf, sizeof buf, NULL) == 3);

    /* SIGEV_NONE registers without a signal; NULL unregisters. */
    struct sigevent none = {.sigev_notify = SIGEV_NONE};
    CHECK_OK(mq_notify(q, &none));
    CHECK(pread(q, status, sizeof status - 1, 0) > 0);
    CHECK(strncmp(status, "QSIZE:0          NOTIFY:1     SIGNO:0     NOTIFY_PID:", 52) == 0);
    CHECK_OK(mq_notify(q, NULL));
    CHECK(pread(q, status, sizeof status - 1, 0) > 0);
    CHECK(strcmp(status, "QSIZE:0          NOTIFY:0     SIGNO:0     NOTIFY_PID:0     \n") == 0);
    struct sigevent badsig = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = 65};
    CHECK_ERR(mq_notify(q, &badsig), EINVAL);
    /* Signal 0 is valid, and sends nothing. */
    badsig.sigev_signo = 0;
    CHECK_OK(mq_notify(q, &badsig));
    CHECK_OK(mq_send(q, "zero", 4, 0));
    CHECK_ERR(sigtimedwait(&usr1, &si, &zero), EAGAIN);
    CHECK(mq_receive(q, buf, sizeof buf, NULL) == 4);
    struct sigevent badhow = {.sigev_notify = 99};
    CHECK_ERR(mq_notify(q, &badhow), EINVAL);
    CHECK_ERR(mq_notify(-1, &none), EBADF);
    sigprocmask(SIG_UNBLOCK, &usr1, NULL);
    mq_close(q);
    CHECK_OK(mq_unlink(name(2)));
}

static int thread_pipe[2];
static void on_message(union sigval sv) {
    int v = sv.sival_int;
    if (write(thread_pipe[1], &v, sizeof v) != sizeof v) abort();
}

/* SIGEV_THREAD: glibc's own thread hears of the message through the
 * netlink socket it registers, and starts the function in a new one. */
static void test_notify_thread(void) {
    struct mq_attr attr = {.mq_maxmsg = 4, .mq_msgsize = 16};
    mqd_t q = mq_open(name(3), O_RDWR | O_CREAT, 0600, &attr);
    CHECK(q >= 0);
    CHECK_OK(pipe(thread_pipe));
    struct sigevent sev = {.sigev_notify = SIGEV_THREAD, .sigev_notify_function = on_message};
    sev.sigev_value.sival_int = 77;
    CHECK_OK(mq_notify(q, &sev));
    char status[128] = {0};
    CHECK(pread(q, status, sizeof status - 1, 0) > 0);
    CHECK(strncmp(status, "QSIZE:0          NOTIFY:2     SIGNO:0     NOTIFY_PID:", 52) == 0);
    pid_t pid = fork();
    if (pid == 0) _exit(mq_send(q, "hi", 2, 0) == 0 ? 0 : 1);
    int got = 0;
    CHECK(read(thread_pipe[0], &got, sizeof got) == sizeof got && got == 77);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* Once: registering again works. */
    CHECK_OK(mq_notify(q, &sev));
    CHECK_OK(mq_notify(q, NULL));
    /* The kernel's checks of what glibc passes. */
    char cookie[32] = {0};
    struct sigevent raw = {.sigev_notify = SIGEV_THREAD, .sigev_signo = thread_pipe[0]};
    raw.sigev_value.sival_ptr = cookie;
    CHECK_ERR(syscall(SYS_mq_notify, q, &raw), ENOTSOCK);
    raw.sigev_signo = -1;
    CHECK_ERR(syscall(SYS_mq_notify, q, &raw), EBADF);
    raw.sigev_value.sival_ptr = (void *)8;
    CHECK_ERR(syscall(SYS_mq_notify, q, &raw), EFAULT);
    close(thread_pipe[0]);
    close(thread_pipe[1]);
    mq_close(q);
    CHECK_OK(mq_unlink(name(3)));
}

int main(void) {
    umask(022);
    test_notify_thread();
    test_open();
    test_messages();
    test_notify();
    return done();
}
