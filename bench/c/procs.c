/* Processes.
 *   fork_exec   fork + execve("/bin/true") in the child + waitpid; the
 *               child must exit with status 0. PROGRAM, the optional third
 *               argument, replaces /bin/true. */
#include "bench.h"

#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static void run_fork_exec(long n, void *arg) {
    const char *prog = arg;
    char *const child_argv[] = {(char *)prog, NULL};
    for (long i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid < 0)
            die("fork");
        if (pid == 0) {
            execve(prog, child_argv, environ);
            die("child: execve %s", prog);
        }
        int status;
        if (waitpid(pid, &status, 0) != pid)
            die("waitpid");
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail("%s ended with status 0x%x", prog, status);
    }
}

static const struct bench_case cases[] = {
    {.name = "fork_exec", .run = run_fork_exec},
    {0},
};

int main(int argc, char **argv) {
    double seconds;
    const struct bench_case *c = pick_case(argc, argv, cases, &seconds);
    fflush(stdout);
    measure(c, argc > 3 ? argv[3] : "/bin/true", seconds);
    return 0;
}
