/* wait4 and waitid: statuses for exit, death by signal, stop and continue
 * (WUNTRACED, WCONTINUED), waitid's siginfo fields, WNOHANG, WNOWAIT,
 * waiting by pid, by process group and for any child, ECHILD, the SIGCHLD
 * the parent gets, SA_NOCLDSTOP, and automatic reaping when SIGCHLD is
 * ignored or SA_NOCLDWAIT is set. */
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t.h"

static void ms_sleep(int ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static pid_t child_exiting(int code) {
    pid_t pid = fork();
    if (pid == 0) _exit(code);
    return pid;
}

static pid_t child_sleeping(void) {
    pid_t pid = fork();
    if (pid == 0) {
        for (;;) pause();
    }
    return pid;
}

static volatile sig_atomic_t chld_count;
static volatile int chld_code, chld_status, chld_pid;
static void on_chld(int sig, siginfo_t *si, void *uc) {
    chld_count++;
    chld_code = si->si_code;
    chld_status = si->si_status;
    chld_pid = si->si_pid;
}

int main(void) {
    int st;
    /* Exit codes, including the low byte only. */
    pid_t pid = child_exiting(42);
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 42 && !WIFSIGNALED(st) && !WIFSTOPPED(st));
    pid = fork();
    if (pid == 0) exit(256 + 7);
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 7);

    /* Killed by a signal. */
    pid = child_sleeping();
    CHECK_OK(kill(pid, SIGTERM));
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM && !WCOREDUMP(st) && !WIFEXITED(st));
    pid = child_sleeping();
    CHECK_OK(kill(pid, SIGKILL));
    CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    /* abort(): SIGABRT. */
    pid = fork();
    if (pid == 0) abort();
    CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT);

    /* WNOHANG with a live child: 0; ECHILD for a pid that is not a child. */
    pid = child_sleeping();
    /* Its own group, linked to our session by us: not orphaned, so
     * SIGTSTP below stops it wherever this test is started from. */
    CHECK_OK(setpgid(pid, pid));
    CHECK(waitpid(pid, &st, WNOHANG) == 0);
    CHECK_ERR(waitpid(getpid(), &st, 0), ECHILD);
    CHECK_ERR(waitpid(999999, &st, WNOHANG), ECHILD);

    /* Stop and continue. */
    CHECK_OK(kill(pid, SIGSTOP));
    CHECK(waitpid(pid, &st, WUNTRACED) == pid);
    CHECK(WIFSTOPPED(st) && WSTOPSIG(st) == SIGSTOP && !WIFEXITED(st));
    /* Reported once. */
    CHECK(waitpid(pid, &st, WUNTRACED | WNOHANG) == 0);
    /* Not reported without WUNTRACED (the child stays stopped). */
    CHECK_OK(kill(pid, SIGCONT));
    CHECK(waitpid(pid, &st, WCONTINUED) == pid);
    CHECK(WIFCONTINUED(st) && !WIFSTOPPED(st) && !WIFEXITED(st));
    CHECK(waitpid(pid, &st, WCONTINUED | WNOHANG) == 0);
    /* SIGTSTP stops too (default action), reported with its number. */
    CHECK_OK(kill(pid, SIGTSTP));
    CHECK(waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st) && WSTOPSIG(st) == SIGTSTP);
    /* A stopped child killed: reported as killed. */
    CHECK_OK(kill(pid, SIGKILL));
    CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    /* A stopped child receiving SIGTERM dies only when continued. */
    pid = child_sleeping();
    kill(pid, SIGSTOP);
    CHECK(waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st));
    kill(pid, SIGTERM);
    ms_sleep(50);
    CHECK(waitpid(pid, &st, WNOHANG) == 0);
    kill(pid, SIGCONT);
    CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);

    /* waitid: the siginfo fields, WNOWAIT, and WNOHANG's zeroed si_pid. */
    siginfo_t si;
    pid = child_exiting(9);
    memset(&si, 0xff, sizeof si);
    CHECK(waitid(P_PID, pid, &si, WEXITED | WNOWAIT) == 0);
    CHECK(si.si_signo == SIGCHLD && si.si_code == CLD_EXITED && si.si_status == 9 && si.si_pid == pid);
    CHECK(si.si_uid == getuid());
    /* Still there after WNOWAIT: reaped by the next wait. */
    CHECK(waitpid(pid, &st, 0) == pid && WEXITSTATUS(st) == 9);
    pid = child_sleeping();
    memset(&si, 0xff, sizeof si);
    CHECK(waitid(P_PID, pid, &si, WEXITED | WNOHANG) == 0);
    CHECK(si.si_pid == 0 && si.si_signo == 0);
    kill(pid, SIGSTOP);
    CHECK(waitid(P_PID, pid, &si, WSTOPPED) == 0);
    CHECK(si.si_code == CLD_STOPPED && si.si_status == SIGSTOP && si.si_pid == pid);
    kill(pid, SIGCONT);
    CHECK(waitid(P_PID, pid, &si, WCONTINUED) == 0);
    CHECK(si.si_code == CLD_CONTINUED && si.si_status == SIGCONT && si.si_pid == pid);
    kill(pid, SIGQUIT);
    CHECK(waitid(P_ALL, 0, &si, WEXITED) == 0);
    CHECK(si.si_pid == pid && (si.si_code == CLD_KILLED || si.si_code == CLD_DUMPED) && si.si_status == SIGQUIT);
    CHECK_ERR(waitid(P_ALL, 0, &si, 0), EINVAL);
    CHECK_ERR(waitid(P_ALL, 0, &si, WEXITED), ECHILD);

    /* By process group: only the members. */
    pid_t a = fork();
    if (a == 0) {
        setpgid(0, 0);
        ms_sleep(100);
        _exit(1);
    }
    setpgid(a, a);
    pid_t b = child_exiting(2);
    CHECK(waitpid(-a, &st, 0) == a && WEXITSTATUS(st) == 1);
    CHECK(waitpid(0, &st, 0) == b && WEXITSTATUS(st) == 2);
    a = fork();
    if (a == 0) {
        setpgid(0, 0);
        _exit(3);
    }
    setpgid(a, a);
    CHECK(waitid(P_PGID, a, &si, WEXITED) == 0 && si.si_pid == a && si.si_status == 3);

    /* wait4 fills a rusage. */
    struct rusage ru;
    pid = child_exiting(0);
    CHECK(wait4(pid, &st, 0, &ru) == pid);

    /* SIGCHLD with its siginfo, for exit, stop and continue... */
    struct sigaction sa = {0};
    sa.sa_sigaction = on_chld;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
    pid = child_exiting(5);
    while (chld_count == 0) ms_sleep(5);
    CHECK(chld_code == CLD_EXITED && chld_status == 5 && chld_pid == pid);
    waitpid(pid, &st, 0);
    pid = child_sleeping();
    chld_count = 0;
    kill(pid, SIGSTOP);
    while (chld_count == 0) ms_sleep(5);
    CHECK(chld_code == CLD_STOPPED && chld_status == SIGSTOP && chld_pid == pid);
    waitpid(pid, &st, WUNTRACED);
    chld_count = 0;
    kill(pid, SIGCONT);
    while (chld_count == 0) ms_sleep(5);
    CHECK(chld_code == CLD_CONTINUED && chld_status == SIGCONT);
    waitpid(pid, &st, WCONTINUED);
    /* ...but not for stop or continue with SA_NOCLDSTOP. */
    sa.sa_flags |= SA_NOCLDSTOP;
    sigaction(SIGCHLD, &sa, NULL);
    chld_count = 0;
    kill(pid, SIGSTOP);
    CHECK(waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st));
    kill(pid, SIGCONT);
    CHECK(waitpid(pid, &st, WCONTINUED) == pid && WIFCONTINUED(st));
    ms_sleep(50);
    CHECK(chld_count == 0);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    CHECK(chld_count == 1 && chld_code == CLD_KILLED);

    /* SIGCHLD ignored: children are reaped by themselves; wait then
     * blocks until all are gone and fails with ECHILD. */
    signal(SIGCHLD, SIG_IGN);
    child_exiting(0);
    child_exiting(0);
    CHECK_ERR(wait(&st), ECHILD);
    /* SA_NOCLDWAIT with a handler: reaped too, and the signal still comes. */
    sa.sa_flags = SA_SIGINFO | SA_NOCLDWAIT;
    sigaction(SIGCHLD, &sa, NULL);
    chld_count = 0;
    child_exiting(0);
    CHECK_ERR(wait(&st), ECHILD);
    ms_sleep(20);
    CHECK(chld_count == 1);
    signal(SIGCHLD, SIG_DFL);

    /* A wait in progress sees a child that exits later. */
    pid = fork();
    if (pid == 0) {
        ms_sleep(100);
        _exit(77);
    }
    CHECK(wait(&st) == pid && WEXITSTATUS(st) == 77);
    return done();
}
