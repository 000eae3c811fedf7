/* Wall-clock time of whole program runs, for the workloads the driver
 * times from outside: `spawntime REPS [STDIN_FILE|-] -- PROGRAM ARGS...`
 * starts PROGRAM REPS times one after another (posix_spawn, stdout to
 * /dev/null, stderr inherited, stdin from STDIN_FILE or /dev/null), waits
 * for each, and prints
 *
 *   BENCH case=spawn ops=REPS ns=T ns_per_op=X
 *
 * where X is the mean wall time of one run, start to reaped. Any run that
 * does not exit with status 0 stops it: "bench: ... exited with status N"
 * on stderr, and spawntime exits with 1. Timing in C rather than in the
 * Python driver keeps the driver's own process-creation cost (about a
 * millisecond) out of figures that are a fraction of a millisecond
 * natively. */
#include "bench.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv) {
    if (argc < 5 || strcmp(argv[3], "--") != 0) {
        fprintf(stderr, "usage: %s REPS STDIN_FILE|- -- PROGRAM [ARGS...]\n", argv[0]);
        return 2;
    }
    long reps = strtol(argv[1], NULL, 10);
    if (reps <= 0)
        fail("bad REPS '%s'", argv[1]);
    const char *in_path = strcmp(argv[2], "-") == 0 ? "/dev/null" : argv[2];
    char **child_argv = argv + 4;

    uint64_t total = 0;
    for (long i = 0; i < reps; i++) {
        posix_spawn_file_actions_t fa;
        int err = posix_spawn_file_actions_init(&fa);
        if (!err)
            err = posix_spawn_file_actions_addopen(&fa, 0, in_path, O_RDONLY, 0);
        if (!err)
            err = posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        if (err) {
            errno = err;
            die("posix_spawn_file_actions");
        }
        pid_t pid;
        uint64_t t0 = now_ns();
        err = posix_spawnp(&pid, child_argv[0], &fa, NULL, child_argv, environ);
        if (err) {
            errno = err;
            die("spawning %s", child_argv[0]);
        }
        int status;
        if (waitpid(pid, &status, 0) != pid)
            die("waitpid");
        total += now_ns() - t0;
        posix_spawn_file_actions_destroy(&fa);
        if (WIFSIGNALED(status))
            fail("%s was killed by signal %d", child_argv[0], WTERMSIG(status));
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            fail("%s exited with status %d", child_argv[0], WEXITSTATUS(status));
    }
    printf("BENCH case=spawn ops=%ld ns=%llu ns_per_op=%.4f\n", reps, (unsigned long long)total,
           (double)total / (double)reps);
    return fflush(stdout) == 0 ? 0 : 1;
}
