/* Runs each program named on the command line (DIR NAME...) in a child
 * and says how that went: execve's error, or how the new program ended
 * (an exit status, or the signal that killed it, e.g. SIGSEGV when the
 * kernel gave up on it past the point of no return). The test compares
 * the lines with Linux's own. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR NAME...\n", argv[0]);
        return 2;
    }
    /* The programs that die leave no core files behind. */
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    for (int i = 2; i < argc; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", argv[1], argv[i]);
        int report[2];
        if (pipe2(report, O_CLOEXEC)) {
            perror("pipe2");
            return 2;
        }
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 2;
        }
        if (pid == 0) {
            char *child_argv[] = {argv[i], NULL};
            char *envp[] = {NULL};
            execve(path, child_argv, envp);
            int e = errno;
            if (write(report[1], &e, sizeof e) != sizeof e)
                _exit(127);
            _exit(127);
        }
        close(report[1]);
        int e = 0;
        ssize_t n = read(report[0], &e, sizeof e);
        close(report[0]);
        int status;
        if (waitpid(pid, &status, 0) != pid) {
            perror("waitpid");
            return 2;
        }
        if (n == sizeof e)
            printf("%s: execve fails with %s\n", argv[i], strerrorname_np(e));
        else if (WIFEXITED(status))
            printf("%s: runs, exits %d\n", argv[i], WEXITSTATUS(status));
        else
            printf("%s: killed by %s\n", argv[i], sigabbrev_np(WTERMSIG(status)));
    }
    return 0;
}
