/* Process descriptors: pidfd_open and its errors, pidfd_send_signal with
 * and without a siginfo, poll readiness at exit, waitid(P_PIDFD) blocking
 * and non-blocking, CLONE_PIDFD through clone3, and a descriptor outliving
 * the process it names. */
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

#ifndef PIDFD_NONBLOCK
#define PIDFD_NONBLOCK O_NONBLOCK
#endif
#ifndef P_PIDFD
#define P_PIDFD 3
#endif

static int pidfd_open(pid_t pid, unsigned flags) { return syscall(SYS_pidfd_open, pid, flags); }
static int pidfd_send(int fd, int sig, siginfo_t *info, unsigned flags) {
    return syscall(SYS_pidfd_send_signal, fd, sig, info, flags);
}

static pid_t sleeper(void) {
    pid_t pid = fork();
    if (pid == 0) {
        for (;;) pause();
    }
    return pid;
}

static volatile sig_atomic_t got_code, got_value;
static void on_usr1(int sig, siginfo_t *si, void *uc) {
    got_code = si->si_code;
    got_value = si->si_value.sival_int;
}

static volatile pid_t thread_tid;
static void *note_tid(void *arg) {
    thread_tid = gettid();
    usleep(200 * 1000);
    return NULL;
}

static void test_open_and_errors(void) {
    int self = pidfd_open(getpid(), 0);
    CHECK(self >= 0 && fcntl(self, F_GETFD) == FD_CLOEXEC);
    CHECK_ERR(pidfd_open(getpid(), 0x1), EINVAL);
    CHECK_ERR(pidfd_open(0, 0), EINVAL);
    CHECK_ERR(pidfd_open(-1, 0), EINVAL);
    CHECK_ERR(pidfd_open(999999, 0), ESRCH);
    pthread_t th;
    pthread_create(&th, NULL, note_tid, NULL);
    while (!thread_tid) usleep(1000);
    CHECK_ERR(pidfd_open(thread_tid, 0), ENOENT); /* not a process */
    pthread_join(th, NULL);
    /* We are not our own child. */
    siginfo_t si;
    CHECK_ERR(waitid(P_PIDFD, self, &si, WEXITED | WNOHANG), ECHILD);
    CHECK(pidfd_send(self, 0, NULL, 0) == 0);
    CHECK_ERR(pidfd_send(self, 0, NULL, 8), EINVAL);
    CHECK_ERR(pidfd_send(self, 0, NULL, 3), EINVAL); /* one scope at most */
    CHECK_ERR(pidfd_send(self, 99, NULL, 0), EINVAL);
    int p[2];
    CHECK_OK(pipe(p));
    CHECK_ERR(pidfd_send(p[0], 0, NULL, 0), EBADF);
    CHECK_ERR(waitid(P_PIDFD, p[0], &si, WEXITED | WNOHANG), EBADF);
    CHECK_ERR(pidfd_send(999, 0, NULL, 0), EBADF);
    /* A siginfo of our own making, to ourselves. */
    struct sigaction sa = {.sa_sigaction = on_usr1, .sa_flags = SA_SIGINFO};
    sigaction(SIGUSR1, &sa, NULL);
    siginfo_t info = {0};
    info.si_signo = SIGUSR1;
    info.si_code = SI_QUEUE;
    info.si_value.sival_int = 42;
    CHECK(pidfd_send(self, SIGUSR1, &info, 0) == 0);
    CHECK(got_code == SI_QUEUE && got_value == 42);
    CHECK_ERR(pidfd_send(self, SIGUSR2, &info, 0), EINVAL); /* signo differs */
    char path[64], link[64] = {0};
    snprintf(path, sizeof path, "/proc/self/fd/%d", self);
    CHECK(readlink(path, link, sizeof link - 1) > 0 && strcmp(link, "anon_inode:[pidfd]") == 0);
    close(p[0]);
    close(p[1]);
    close(self);
}

static void test_child(void) {
    pid_t c = sleeper();
    int fd = pidfd_open(c, 0);
    CHECK(fd >= 0);
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    CHECK(poll(&pf, 1, 0) == 0);
    /* Signals go through; the exit makes it readable. */
    CHECK(pidfd_send(fd, SIGTERM, NULL, 0) == 0);
    CHECK(poll(&pf, 1, 5000) == 1 && pf.revents == POLLIN);
    siginfo_t si = {0};
    CHECK_OK(waitid(P_PIDFD, fd, &si, WEXITED));
    CHECK(si.si_pid == c && si.si_code == CLD_KILLED && si.si_status == SIGTERM);
    /* The process is gone; the descriptor stays valid and says so. */
    CHECK_ERR(pidfd_send(fd, SIGTERM, NULL, 0), ESRCH);
    CHECK_ERR(waitid(P_PIDFD, fd, &si, WEXITED | WNOHANG), ECHILD);
    close(fd);

    /* Scopes: the whole process group of the target, or its thread. */
    pid_t c1 = sleeper(), c2 = sleeper();
    CHECK_OK(setpgid(c1, c1));
    CHECK_OK(setpgid(c2, c1));
    fd = pidfd_open(c1, 0);
    CHECK(pidfd_send(fd, SIGTERM, NULL, 4 /* PIDFD_SIGNAL_PROCESS_GROUP */) == 0);
    int st;
    CHECK(waitpid(c1, &st, 0) == c1 && WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    CHECK(waitpid(c2, &st, 0) == c2 && WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    close(fd);
    c = sleeper();
    fd = pidfd_open(c, 0);
    CHECK(pidfd_send(fd, SIGKILL, NULL, 1 /* PIDFD_SIGNAL_THREAD */) == 0);
    CHECK_OK(waitid(P_PIDFD, fd, &si, WEXITED));
    CHECK(si.si_code == CLD_KILLED && si.si_status == SIGKILL);
    close(fd);

    /* Non-blocking: waitid does not wait. */
    c = sleeper();
    fd = pidfd_open(c, PIDFD_NONBLOCK);
    CHECK(fd >= 0 && (fcntl(fd, F_GETFL) & O_NONBLOCK));
    CHECK_ERR(waitid(P_PIDFD, fd, &si, WEXITED), EAGAIN);
    /* With WNOHANG, the usual answer: 0 and no child in si_pid. */
    si.si_pid = 123;
    CHECK(waitid(P_PIDFD, fd, &si, WEXITED | WNOHANG) == 0 && si.si_pid == 0);
    kill(c, SIGKILL);
    CHECK(poll(&(struct pollfd){.fd = fd, .events = POLLIN}, 1, 5000) == 1);
    CHECK_OK(waitid(P_PIDFD, fd, &si, WEXITED));
    CHECK(si.si_pid == c && si.si_status == SIGKILL);
    close(fd);
}

static void test_clone_pidfd(void) {
    int fd = -1;
    struct clone_args args = {0};
    args.flags = CLONE_PIDFD;
    args.pidfd = (uint64_t)(uintptr_t)&fd;
    args.exit_signal = SIGCHLD;
    long pid = syscall(SYS_clone3, &args, sizeof args);
    if (pid == 0) _exit(5);
    CHECK(pid > 0);
    CHECK(fd >= 0 && fcntl(fd, F_GETFD) == FD_CLOEXEC);
    siginfo_t si = {0};
    CHECK_OK(waitid(P_PIDFD, fd, &si, WEXITED));
    CHECK(si.si_pid == pid && si.si_code == CLD_EXITED && si.si_status == 5);
    close(fd);
    /* clone() stores the descriptor where CLONE_PARENT_SETTID would put
     * the tid: both at once are refused. */
    CHECK_ERR(syscall(SYS_clone, CLONE_PIDFD | CLONE_PARENT_SETTID | SIGCHLD, 0, &fd, 0, 0), EINVAL);
    CHECK_ERR(waitpid(-1, NULL, WNOHANG), ECHILD);
}

int main(void) {
    test_open_and_errors();
    test_child();
    test_clone_pidfd();
    return done();
}
