/* A fork bomb under a task limit (`--pids-limit`, as a pids cgroup's
 * pids.max): every process forks children that fork in turn, a tree far
 * larger than the limit. No process exits before the whole tree is done
 * forking, so the number of live tasks only grows and some fork must fail,
 * with EAGAIN. At that point every way of making a task (fork, vfork,
 * clone, clone3, pthread_create) fails with EAGAIN. Then every process
 * exits, each reaped by its parent, and the first process can fork and
 * make threads again. What is printed does not depend on how many
 * processes were made or in which order, so the outcome is the same
 * whatever the scheduling.
 *
 * Each child reports to its parent, over a pipe of its own, once its whole
 * subtree is done forking: 'A' if a fork in it failed with EAGAIN, 'N' if
 * none failed, 'X' if one failed otherwise. All then wait for the release
 * pipe to reach end of file, which happens when the first process closes
 * its end: the children close theirs at once. */
#include <linux/sched.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

#define FANOUT 6
#define DEPTH 5 /* 6^5 leaves alone: far beyond any limit the tests set */

static int release_rd = -1, release_wr = -1;

struct child {
    pid_t pid;
    int report; /* read end of the child's report pipe */
};

/* Worst of two reports: any other failure over EAGAIN over none. */
static char worse(char a, char b) {
    if (a == 'X' || b == 'X')
        return 'X';
    if (a == 'A' || b == 'A')
        return 'A';
    return 'N';
}

/* Forks this process's subtree; returns its report once every process of
 * it is done forking. Children are left in `kids`. */
static char grow(int depth, struct child *kids, int *nkids) {
    char report = 'N';
    *nkids = 0;
    for (int i = 0; depth < DEPTH && i < FANOUT; i++) {
        int p[2];
        if (pipe(p) != 0) {
            report = 'X';
            break;
        }
        pid_t pid = fork();
        if (pid == 0) {
            close(p[0]);
            if (release_wr >= 0) {
                close(release_wr);
                release_wr = -1;
            }
            for (int k = 0; k < *nkids; k++)
                close(kids[k].report);
            struct child mine[FANOUT];
            int nmine;
            char r = grow(depth + 1, mine, &nmine);
            if (write(p[1], &r, 1) != 1)
                _exit(3);
            close(p[1]);
            char c;
            while (read(release_rd, &c, 1) > 0) {
            }
            int bad = 0;
            for (int k = 0; k < nmine; k++) {
                int st;
                if (waitpid(mine[k].pid, &st, 0) != mine[k].pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                    bad = 1;
            }
            _exit(bad);
        }
        close(p[1]);
        if (pid < 0) {
            if (errno != EAGAIN) {
                fprintf(stderr, "fork at depth %d: %s\n", depth, strerror(errno));
                report = 'X';
            } else {
                report = worse(report, 'A');
            }
            close(p[0]);
            break;
        }
        kids[(*nkids)++] = (struct child){pid, p[0]};
    }
    for (int k = 0; k < *nkids; k++) {
        char r = 'X';
        if (read(kids[k].report, &r, 1) != 1)
            r = 'X';
        close(kids[k].report);
        report = worse(report, r);
    }
    return report;
}

static void *idle(void *arg) {
    return arg;
}

static int vfork_child(void) {
    pid_t pid = vfork();
    if (pid == 0)
        _exit(0);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return pid;
}

static long clone3_child(void) {
    struct clone_args args = {.exit_signal = SIGCHLD};
    long pid = syscall(SYS_clone3, &args, sizeof(args));
    if (pid == 0)
        _exit(0);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return pid;
}

/* clone(2) with fork's flags, through the raw system call. */
static long clone_child(void) {
    long pid = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (pid == 0)
        _exit(0);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return pid;
}

int main(void) {
    int r[2];
    CHECK_OK(pipe(r));
    release_rd = r[0];
    release_wr = r[1];
    struct child kids[FANOUT];
    int nkids;
    char report = grow(0, kids, &nkids);
    CHECK(report == 'A');
    if (report == 'A')
        printf("fork failed with EAGAIN\n");

    /* The tree is done and nothing has exited: the limit is reached. */
    CHECK_ERR(fork(), EAGAIN);
    CHECK_ERR(vfork_child(), EAGAIN);
    CHECK_ERR(clone_child(), EAGAIN);
    CHECK_ERR(clone3_child(), EAGAIN);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, idle, NULL) == EAGAIN);

    /* Release the tree; every process reaps its children. */
    close(release_wr);
    int bad = 0;
    for (int k = 0; k < nkids; k++) {
        int st;
        if (waitpid(kids[k].pid, &st, 0) != kids[k].pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
            bad = 1;
    }
    CHECK(bad == 0);
    CHECK_ERR(wait(NULL), ECHILD);
    printf("every process of the tree exited\n");

    /* Their places are free again. */
    pid_t pid = fork();
    if (pid == 0)
        _exit(7);
    int st = 0;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 7);
    CHECK(pthread_create(&t, NULL, idle, NULL) == 0 && pthread_join(t, NULL) == 0);
    CHECK(vfork_child() > 0);
    CHECK(clone3_child() > 0);
    printf("fork works again\n");
    return done();
}
