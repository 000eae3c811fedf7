/* RLIMIT_CPU: a process that spins past its soft limit gets SIGXCPU (and
 * the soft limit moves a second on, so that another would come a second
 * later); at the hard limit, SIGKILL. Without a handler SIGXCPU ends it.
 * Each child spins until a signal stops it: nothing is timed. */
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

static int report = -1;

static void on_xcpu(int sig) {
    struct rlimit l;
    getrlimit(RLIMIT_CPU, &l);
    char c = (char)('0' + (int)l.rlim_cur);
    if (write(report, &c, 1) != 1)
        _exit(3);
}

static pid_t spinner(rlim_t soft, rlim_t hard, int handle, int out) {
    pid_t pid = fork();
    if (pid == 0) {
        report = out;
        if (handle)
            signal(SIGXCPU, on_xcpu);
        struct rlimit l = {soft, hard};
        if (setrlimit(RLIMIT_CPU, &l) != 0)
            _exit(2);
        for (;;)
            ;
    }
    return pid;
}

int main(void) {
    /* Soft 1 s, hard 2 s, SIGXCPU caught: one SIGXCPU (the soft limit is 2
     * by then), then SIGKILL. */
    int p[2];
    CHECK_OK(pipe(p));
    pid_t pid = spinner(1, 2, 1, p[1]);
    close(p[1]);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    char got[8] = {0};
    CHECK(read(p[0], got, sizeof got) == 1);
    CHECK(strcmp(got, "2") == 0);
    close(p[0]);

    /* Soft 1 s, no hard limit, no handler: SIGXCPU's default ends it. */
    pid = spinner(1, RLIM_INFINITY, 0, -1);
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGXCPU);

    /* The limit is inherited: a child of the limited process is held to
     * it on its own time. */
    pid = fork();
    if (pid == 0) {
        struct rlimit l = {1, 1};
        if (setrlimit(RLIMIT_CPU, &l) != 0)
            _exit(2);
        pid_t grandchild = fork();
        if (grandchild == 0)
            for (;;)
                ;
        int s;
        if (waitpid(grandchild, &s, 0) != grandchild)
            _exit(3);
        _exit(WIFSIGNALED(s) && WTERMSIG(s) == SIGKILL ? 0 : 4);
    }
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return done();
}
