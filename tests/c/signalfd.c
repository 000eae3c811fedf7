/* Signal descriptors: signalfd and signalfd4 read the pending signals of
 * their mask as signalfd_siginfo records (the thread's own and the
 * process's), a second call changes the mask, poll and epoll report them,
 * a forked child's copy reads the child's signals, and the errors are
 * Linux's. */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

static sigset_t set_of(int a, int b) {
    sigset_t s;
    sigemptyset(&s);
    if (a)
        sigaddset(&s, a);
    if (b)
        sigaddset(&s, b);
    return s;
}

static int fdinfo_mask(int fd, unsigned long long *mask) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
    int f = open(path, O_RDONLY);
    if (f < 0)
        return -1;
    ssize_t n = read(f, buf, sizeof buf - 1);
    close(f);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    char *at = strstr(buf, "sigmask:\t");
    return at && sscanf(at, "sigmask:\t%llx", mask) == 1 ? 0 : -1;
}

static void errors(void) {
    sigset_t s = set_of(SIGUSR1, 0);
    CHECK_ERR(syscall(SYS_signalfd4, -1, &s, 4, 0), EINVAL);
    CHECK_ERR(syscall(SYS_signalfd4, -1, &s, 8, 1), EINVAL);
    CHECK_ERR(syscall(SYS_signalfd4, -1, NULL, 8, 0), EFAULT);
    CHECK_ERR(signalfd(9999, &s, 0), EBADF);
    int p[2];
    CHECK_OK(pipe(p));
    CHECK_ERR(signalfd(p[0], &s, 0), EINVAL);
    close(p[0]);
    close(p[1]);
    int fd = signalfd(-1, &s, SFD_NONBLOCK | SFD_CLOEXEC);
    CHECK(fd >= 0);
    CHECK(fcntl(fd, F_GETFL) == (O_RDWR | O_NONBLOCK));
    CHECK(fcntl(fd, F_GETFD) == FD_CLOEXEC);
    char link[64], target[64] = {0};
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    CHECK(readlink(link, target, sizeof target - 1) > 0);
    CHECK(strcmp(target, "anon_inode:[signalfd]") == 0);
    struct signalfd_siginfo si;
    CHECK_ERR(read(fd, &si, sizeof si), EAGAIN);
    CHECK_ERR(read(fd, &si, 64), EINVAL);
    CHECK_ERR(write(fd, &si, sizeof si), EINVAL);
    /* SIGKILL and SIGSTOP are dropped from the mask. */
    s = set_of(SIGUSR1, SIGKILL);
    sigaddset(&s, SIGSTOP);
    CHECK(signalfd(fd, &s, 0) == fd);
    unsigned long long mask = 0;
    CHECK(fdinfo_mask(fd, &mask) == 0);
    CHECK(mask == 1ULL << (SIGUSR1 - 1));
    close(fd);
}

/* Signals sent to the thread and to the process, by kill, tgkill and
 * sigqueue, read with their senders' fields. */
static void reads(void) {
    sigset_t s = set_of(SIGUSR1, SIGUSR2);
    sigaddset(&s, SIGRTMIN);
    sigprocmask(SIG_BLOCK, &s, NULL);
    sigset_t only1 = set_of(SIGUSR1, 0);
    int fd = signalfd(-1, &only1, SFD_NONBLOCK);
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    CHECK(poll(&pfd, 1, 0) == 0);

    CHECK_OK(raise(SIGUSR1));
    CHECK(poll(&pfd, 1, 0) == 1 && pfd.revents == POLLIN);
    struct signalfd_siginfo si;
    CHECK(read(fd, &si, sizeof si) == sizeof si);
    CHECK(si.ssi_signo == SIGUSR1);
    CHECK(si.ssi_code == SI_TKILL);
    CHECK(si.ssi_pid == (uint32_t)getpid());
    CHECK(si.ssi_uid == getuid());
    CHECK_ERR(read(fd, &si, sizeof si), EAGAIN);

    /* Not in the mask: left pending until the mask takes it in. */
    CHECK_OK(kill(getpid(), SIGUSR2));
    CHECK(poll(&pfd, 1, 0) == 0);
    CHECK_ERR(read(fd, &si, sizeof si), EAGAIN);
    sigset_t both = set_of(SIGUSR1, SIGUSR2);
    sigaddset(&both, SIGRTMIN);
    CHECK(signalfd(fd, &both, 0) == fd);
    CHECK(poll(&pfd, 1, 0) == 1);
    CHECK(read(fd, &si, sizeof si) == sizeof si);
    CHECK(si.ssi_signo == SIGUSR2 && si.ssi_code == SI_USER);
    CHECK(si.ssi_pid == (uint32_t)getpid());

    /* Queued real-time signals come in order, several per read, each with
     * its value; a read takes only what fits. */
    for (int i = 1; i <= 3; i++)
        CHECK_OK(sigqueue(getpid(), SIGRTMIN, (union sigval){.sival_int = i}));
    struct signalfd_siginfo many[4];
    CHECK(read(fd, many, sizeof many[0] * 2 + 10) == 2 * sizeof many[0]);
    CHECK(many[0].ssi_signo == (uint32_t)SIGRTMIN && many[0].ssi_int == 1 && many[1].ssi_int == 2);
    CHECK(many[0].ssi_code == SI_QUEUE);
    CHECK(read(fd, many, sizeof many) == sizeof many[0]);
    CHECK(many[0].ssi_int == 3 && many[0].ssi_ptr == 3);
    CHECK_ERR(read(fd, &si, sizeof si), EAGAIN);
    close(fd);
}

static void *send_usr1(void *arg) {
    kill(getpid(), SIGUSR1);
    return arg;
}

/* A blocking read and an epoll wait sleep until a signal of the mask
 * comes, from another thread. */
static void waits(void) {
    sigset_t s = set_of(SIGUSR1, 0);
    int fd = signalfd(-1, &s, 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, send_usr1, NULL) == 0);
    struct signalfd_siginfo si;
    CHECK(read(fd, &si, sizeof si) == sizeof si);
    CHECK(si.ssi_signo == SIGUSR1 && si.ssi_code == SI_USER);
    pthread_join(t, NULL);

    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 5};
    CHECK_OK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev));
    CHECK(epoll_wait(ep, &ev, 1, 0) == 0);
    CHECK(pthread_create(&t, NULL, send_usr1, NULL) == 0);
    CHECK(epoll_wait(ep, &ev, 1, -1) == 1);
    CHECK(ev.events == EPOLLIN && ev.data.u64 == 5);
    pthread_join(t, NULL);
    CHECK(read(fd, &si, sizeof si) == sizeof si);
    CHECK(epoll_wait(ep, &ev, 1, 0) == 0);
    close(ep);
    close(fd);
}

/* SIGCHLD with the child's pid and status. */
static void child_exit(void) {
    sigset_t s = set_of(SIGCHLD, 0);
    sigprocmask(SIG_BLOCK, &s, NULL);
    int fd = signalfd(-1, &s, 0);
    pid_t pid = fork();
    if (pid == 0)
        _exit(7);
    struct signalfd_siginfo si;
    CHECK(read(fd, &si, sizeof si) == sizeof si);
    CHECK(si.ssi_signo == SIGCHLD && si.ssi_code == CLD_EXITED);
    CHECK(si.ssi_pid == (uint32_t)pid && si.ssi_status == 7);
    CHECK(waitpid(pid, NULL, 0) == pid);
    close(fd);
}

/* After fork the child's copy reads the child's signals, not the
 * parent's still pending ones. */
static void across_fork(void) {
    sigset_t s = set_of(SIGUSR1, SIGUSR2);
    int fd = signalfd(-1, &s, SFD_NONBLOCK);
    CHECK_OK(kill(getpid(), SIGUSR2));
    pid_t pid = fork();
    if (pid == 0) {
        struct signalfd_siginfo si;
        if (read(fd, &si, sizeof si) != -1 || errno != EAGAIN)
            _exit(1);
        kill(getpid(), SIGUSR1);
        if (read(fd, &si, sizeof si) != sizeof si)
            _exit(2);
        _exit(si.ssi_signo == SIGUSR1 && si.ssi_pid == (uint32_t)getpid() ? 0 : 3);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    struct signalfd_siginfo si;
    CHECK(read(fd, &si, sizeof si) == sizeof si);
    CHECK(si.ssi_signo == SIGUSR2);
    CHECK_ERR(read(fd, &si, sizeof si), EAGAIN);
    close(fd);
}

/* The descriptor outlives execve unless close-on-exec; the new program
 * reads with it. */
static int after_exec(int fd) {
    struct signalfd_siginfo si;
    CHECK_OK(kill(getpid(), SIGUSR1));
    CHECK(read(fd, &si, sizeof si) == sizeof si);
    CHECK(si.ssi_signo == SIGUSR1);
    return done();
}

static void across_exec(const char *self) {
    sigset_t s = set_of(SIGUSR1, 0);
    int fd = signalfd(-1, &s, 0);
    pid_t pid = fork();
    if (pid == 0) {
        char arg[16];
        snprintf(arg, sizeof arg, "%d", fd);
        execl(self, self, "exec", arg, (char *)NULL);
        _exit(9);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(fd);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "exec") == 0) {
        /* The checks of the child print their own summary line. */
        int r = after_exec(atoi(argv[2]));
        return r;
    }
    errors();
    reads();
    waits();
    child_exit();
    across_fork();
    fflush(stdout);
    across_exec("/proc/self/exe");
    return done();
}
