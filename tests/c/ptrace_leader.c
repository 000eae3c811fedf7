/* A traced thread group leader that exits (SYS_exit) while its other
 * threads run on: its tracer sees the PTRACE_EVENT_EXIT stop at once,
 * and its exit (with the group's status) only when the last thread has
 * gone; a wait before then finds nothing. With the tracer not the
 * parent, the parent learns of the exit after the tracer has. */
#include <pthread.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

static int ready[2], go_leader[2], go_thread[2];

static void *last_thread(void *arg) {
    char c;
    if (read(go_thread[0], &c, 1) != 1)
        _exit(3);
    _exit(7);
}

/* The process whose leader exits first. */
static pid_t start_target(void) {
    CHECK_OK(pipe(ready));
    CHECK_OK(pipe(go_leader));
    CHECK_OK(pipe(go_thread));
    pid_t pid = fork();
    if (pid == 0) {
        pthread_t t;
        if (pthread_create(&t, NULL, last_thread, NULL) != 0)
            _exit(4);
        char c = 1;
        if (write(ready[1], &c, 1) != 1 || read(go_leader[0], &c, 1) != 1)
            _exit(5);
        syscall(SYS_exit, 0);
    }
    char c;
    CHECK(read(ready[0], &c, 1) == 1);
    return pid;
}

static void poke(int fd) {
    char c = 1;
    CHECK(write(fd, &c, 1) == 1);
}

/* The tracer's side: seize, let the leader exit, see its exit stop, find
 * nothing to wait for while the group lives, then its exit. Returns the
 * number of failed checks. */
static void trace(pid_t pid, int tell) {
    CHECK_OK(ptrace(PTRACE_SEIZE, pid, 0, PTRACE_O_TRACEEXIT));
    poke(tell);
    int st;
    CHECK(waitpid(pid, &st, __WALL) == pid);
    CHECK(WIFSTOPPED(st) && (st >> 8) == (SIGTRAP | (PTRACE_EVENT_EXIT << 8)));
    unsigned long msg = 99;
    CHECK_OK(ptrace(PTRACE_GETEVENTMSG, pid, 0, &msg));
    CHECK(msg == 0);
    CHECK_OK(ptrace(PTRACE_CONT, pid, 0, 0));
    CHECK(waitpid(pid, &st, WNOHANG | __WALL) == 0);
    poke(tell);
    CHECK(waitpid(pid, &st, __WALL) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 7);
}

/* The parent traces. */
static void parent_traces(void) {
    pid_t pid = start_target();
    int tell[2];
    CHECK_OK(pipe(tell));
    /* The tracer's messages go to itself: it lets the target on. */
    CHECK_OK(ptrace(PTRACE_SEIZE, pid, 0, PTRACE_O_TRACEEXIT));
    poke(go_leader[1]);
    int st;
    CHECK(waitpid(pid, &st, __WALL) == pid);
    CHECK(WIFSTOPPED(st) && (st >> 8) == (SIGTRAP | (PTRACE_EVENT_EXIT << 8)));
    CHECK_OK(ptrace(PTRACE_CONT, pid, 0, 0));
    CHECK(waitpid(pid, &st, WNOHANG | __WALL) == 0);
    CHECK(waitpid(pid, &st, WNOHANG) == 0);
    poke(go_thread[1]);
    CHECK(waitpid(pid, &st, __WALL) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 7);
    errno = 0;
    CHECK(waitpid(pid, &st, WNOHANG) == -1 && errno == ECHILD);
    close(tell[0]);
    close(tell[1]);
}

/* Another process traces; the parent waits. */
static void sibling_traces(void) {
    pid_t pid = start_target();
    int tell[2];
    CHECK_OK(pipe(tell));
    pid_t tracer = fork();
    if (tracer == 0) {
        trace(pid, tell[1]);
        _exit(t_failures ? 1 : 0);
    }
    char c;
    CHECK(read(tell[0], &c, 1) == 1);
    poke(go_leader[1]);
    CHECK(read(tell[0], &c, 1) == 1);
    poke(go_thread[1]);
    int st;
    CHECK(waitpid(tracer, &st, 0) == tracer && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 7);
}

int main(void) {
    parent_traces();
    sibling_traces();
    return done();
}
