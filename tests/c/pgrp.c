/* Process groups and sessions: setpgid/getpgid/getpgrp, setsid/getsid and
 * their errors, a child keeping its parent's group and session, signals to
 * a whole group with kill(-pgid) and kill(0), waits by group, setpgid
 * on a child after it called execve, and orphaned groups: job-control stops
 * dropped, SIGHUP and SIGCONT for one orphaned while stopped. */
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

static int pfd[2], gofd[2];

static void ms_sleep(int ms) { usleep(ms * 1000); }

/* Runs `f` in a child, returns its exit code. */
static int in_child(int (*f)(void)) {
    pid_t pid = fork();
    if (pid == 0) _exit(f());
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

static int new_session(void) {
    pid_t me = getpid();
    if (setsid() != me) return 1;
    if (getsid(0) != me || getpgrp() != me || getpgid(0) != me) return 2;
    /* A session leader cannot change its group. */
    if (setpgid(0, 0) != -1 || errno != EPERM) return 3;
    /* And is a group leader: a second setsid fails. */
    if (setsid() != -1 || errno != EPERM) return 4;
    /* Its child is in the new session and group. */
    pid_t c = fork();
    if (c == 0) _exit(getsid(0) == me && getpgrp() == me ? 0 : 1);
    int st;
    waitpid(c, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) return 5;
    /* Joining a group of another session is refused. */
    if (setpgid(0, getppid()) != -1 || errno != EPERM) return 6;
    return 0;
}

static int leader_setsid(void) {
    if (setpgid(0, 0) != 0) return 1;
    if (setsid() != -1 || errno != EPERM) return 2;
    return 0;
}

static volatile sig_atomic_t got;
static void on_usr1(int sig) { got = 1; }

/* kill(0, sig): the caller's whole group, itself included. SIGUSR1 stays
 * blocked but while waiting in sigsuspend, so none can be missed. */
static int kill_own_group(void) {
    setpgid(0, 0);
    signal(SIGUSR1, on_usr1);
    sigset_t usr1, none;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigemptyset(&none);
    sigprocmask(SIG_BLOCK, &usr1, NULL);
    int p[2];
    if (pipe(p) != 0) return 1;
    pid_t kids[2];
    for (int i = 0; i < 2; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            got = 0;
            (void)!write(p[1], "r", 1);
            while (!got) sigsuspend(&none);
            _exit(7);
        }
    }
    char c;
    for (int i = 0; i < 2; i++)
        if (read(p[0], &c, 1) != 1) return 2;
    got = 0;
    if (kill(0, SIGUSR1) != 0) return 3;
    sigprocmask(SIG_UNBLOCK, &usr1, NULL);
    for (int i = 0; i < 2; i++) {
        int st;
        if (waitpid(kids[i], &st, 0) != kids[i] || !WIFEXITED(st) || WEXITSTATUS(st) != 7) return 4;
    }
    return got ? 0 : 5;
}

int main(int argc, char **argv) {
    if (argc > 1) {
        /* Exec'd child: say it runs, wait to be told to go. */
        char c;
        (void)!write(1, "r", 1);
        (void)!read(0, &c, 1);
        return 0;
    }
    pid_t me = getpid();
    CHECK(getpgrp() == getpgid(0));
    /* Lead a group of our own: a group whose leader is outside our pid
     * namespace reads as 0, which the checks below cannot tell apart
     * from setpgid's "same as the pid". */
    CHECK(getpgrp() == me || setpgid(0, 0) == 0);
    CHECK(getpgrp() == me);
    CHECK(getpgid(me) == getpgrp());
    CHECK(getsid(0) == getsid(me));
    /* 0 when the session's leader lives outside our pid namespace. */
    CHECK(getsid(0) >= 0);
    CHECK_ERR(getpgid(999999), ESRCH);
    CHECK_ERR(getsid(999999), ESRCH);
    CHECK_ERR(setpgid(999999, 0), ESRCH);
    CHECK_ERR(setpgid(0, -1), EINVAL);
    CHECK_ERR(kill(-999999, SIGUSR1), ESRCH);

    /* A child inherits group and session; the parent moves it to a new
     * group, seen from both sides. */
    CHECK_OK(pipe(pfd));
    CHECK_OK(pipe(gofd));
    pid_t c = fork();
    if (c == 0) {
        char b;
        pid_t info[2] = {getpgrp(), getsid(0)};
        (void)!write(pfd[1], info, sizeof info);
        (void)!read(gofd[0], &b, 1); /* wait for the parent's setpgid */
        pid_t now = getpgrp();
        (void)!write(pfd[1], &now, sizeof now);
        (void)!read(gofd[0], &b, 1); /* alive until the parent is done */
        _exit(0);
    }
    pid_t info[2];
    CHECK(read(pfd[0], info, sizeof info) == sizeof info);
    CHECK(info[0] == getpgrp() && info[1] == getsid(0));
    CHECK_OK(setpgid(c, c));
    CHECK(getpgid(c) == c);
    CHECK(write(gofd[1], "g", 1) == 1);
    pid_t now;
    CHECK(read(pfd[0], &now, sizeof now) == sizeof now);
    CHECK(now == c);
    /* Back into our group, then into its own again. */
    CHECK_OK(setpgid(c, getpgrp()));
    CHECK(getpgid(c) == getpgrp());
    CHECK_OK(setpgid(c, 0));
    CHECK(getpgid(c) == c);
    /* A group that does not exist in our session. */
    CHECK_ERR(setpgid(c, 999999), EPERM);
    CHECK(write(gofd[1], "d", 1) == 1);
    int st;
    CHECK(waitpid(c, &st, 0) == c);

    /* Sessions. */
    CHECK(in_child(new_session) == 0);
    CHECK(in_child(leader_setsid) == 0);
    /* getsid of a child in another session. */
    c = fork();
    if (c == 0) {
        char b;
        setsid();
        (void)!write(pfd[1], "s", 1);
        (void)!read(gofd[0], &b, 1); /* alive until the parent is done */
        _exit(0);
    }
    char ready;
    CHECK(read(pfd[0], &ready, 1) == 1);
    CHECK(getsid(c) == c);
    /* Moving a child of another session is refused. */
    CHECK_ERR(setpgid(c, getpgrp()), EPERM);
    CHECK(write(gofd[1], "d", 1) == 1);
    waitpid(c, &st, 0);

    /* kill(-pgid): every member of the group, and nobody else. */
    pid_t leader = 0, kids[3];
    for (int i = 0; i < 3; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            for (;;) pause();
        }
        if (i == 0) leader = kids[0];
        CHECK_OK(setpgid(kids[i], leader));
    }
    pid_t outsider = fork();
    if (outsider == 0) {
        for (;;) pause();
    }
    CHECK_OK(kill(-leader, SIGTERM));
    for (int i = 0; i < 3; i++) {
        CHECK(waitpid(kids[i], &st, 0) == kids[i]);
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    }
    CHECK(waitpid(outsider, &st, WNOHANG) == 0);
    CHECK_ERR(killpg(leader, SIGTERM), ESRCH); /* all gone */
    kill(outsider, SIGKILL);
    waitpid(outsider, &st, 0);

    /* kill(0, sig) in a child that leads its own group. */
    CHECK(in_child(kill_own_group) == 0);

    /* waitpid(-pgid) waits for members only; waitpid(0) for our group. */
    pid_t a = fork();
    if (a == 0) {
        char b;
        (void)!read(gofd[0], &b, 1); /* until the parent has moved it */
        _exit(1);
    }
    setpgid(a, a);
    CHECK(write(gofd[1], "a", 1) == 1);
    pid_t b = fork();
    if (b == 0) _exit(2);
    CHECK(waitpid(-a, &st, 0) == a && WEXITSTATUS(st) == 1);
    CHECK(waitpid(0, &st, 0) == b && WEXITSTATUS(st) == 2);

    /* After the child's execve the parent may no longer set its group. */
    int in[2], out[2];
    CHECK_OK(pipe(in));
    CHECK_OK(pipe(out));
    c = fork();
    if (c == 0) {
        setpgid(0, 0);
        dup2(in[0], 0);
        dup2(out[1], 1);
        execl(argv[0], argv[0], "exec", NULL);
        _exit(127);
    }
    char r;
    CHECK(read(out[0], &r, 1) == 1);
    CHECK(getpgid(c) == c);
    CHECK_ERR(setpgid(c, getpgrp()), EACCES);
    CHECK(write(in[1], "x", 1) == 1);
    CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0);

    /* A child that made its own session leads an orphaned group (its
     * parent is in another session): SIGTSTP is dropped, SIGSTOP is not. */
    int sp[2];
    CHECK_OK(pipe(sp));
    c = fork();
    if (c == 0) {
        setsid();
        (void)!write(sp[1], "s", 1);
        for (;;) pause();
    }
    CHECK(read(sp[0], &r, 1) == 1);
    CHECK_OK(kill(c, SIGTSTP));
    ms_sleep(50);
    CHECK(waitpid(c, &st, WUNTRACED | WNOHANG) == 0);
    CHECK_OK(kill(c, SIGSTOP));
    CHECK(waitpid(c, &st, WUNTRACED) == c && WIFSTOPPED(st) && WSTOPSIG(st) == SIGSTOP);
    kill(c, SIGKILL);
    CHECK(waitpid(c, &st, 0) == c && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);

    /* A group orphaned while a member is stopped gets SIGHUP and SIGCONT.
     * The grandchild leads its own group, linked to the session by its
     * parent, a session leader; when that parent exits, the grandchild
     * comes to us (a subreaper, in another session) and its group is
     * orphaned. SIGHUP's default action ends it. A missing hang-up
     * leaves the wait below waiting: the test's hang limit fails it (an
     * alarm here would fail a slow host instead). */
    CHECK_OK(prctl(PR_SET_CHILD_SUBREAPER, 1));
    c = fork();
    if (c == 0) {
        setsid();
        pid_t gc = fork();
        if (gc == 0) {
            setpgid(0, 0);
            raise(SIGTSTP);
            _exit(3); /* continued without a hang-up */
        }
        int gst;
        if (waitpid(gc, &gst, WUNTRACED) != gc || !WIFSTOPPED(gst) || WSTOPSIG(gst) != SIGTSTP) _exit(1);
        _exit(0);
    }
    CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    pid_t gc = waitpid(-1, &st, 0);
    CHECK(gc > 0 && gc != c);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGHUP);
    return done();
}
