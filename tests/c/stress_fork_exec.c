/* Stress: N (default 1000) rounds of fork + execve("/bin/true") + wait, each
 * checked; then N rounds of vfork + execve; prints the counts. */
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

extern char **environ;

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    int ok = 0;
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            execl("/bin/true", "true", NULL);
            _exit(127);
        }
        int st;
        if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0) ok++;
        else fprintf(stderr, "round %d: pid %d status %#x errno %d\n", i, pid, st, errno);
    }
    CHECK(ok == n);
    /* posix_spawn: the C library's vfork-style clone + exec. */
    int spawned = 0;
    for (int i = 0; i < n / 10; i++) {
        pid_t pid;
        char *args[] = {"true", NULL};
        int st;
        if (posix_spawn(&pid, "/bin/true", NULL, NULL, args, environ) == 0 && waitpid(pid, &st, 0) == pid &&
            WIFEXITED(st) && WEXITSTATUS(st) == 0)
            spawned++;
    }
    CHECK(spawned == n / 10);
    printf("%d fork+exec, %d spawn\n", ok, spawned);
    return done();
}
