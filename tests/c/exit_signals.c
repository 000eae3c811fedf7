/* A process chooses the signal its parent gets when it ends (clone's exit
 * signal), never the signal another process gets:
 * - clone(CLONE_PARENT) makes the child a sibling of its caller: the
 *   caller's parent waits for it and is told of its end with the caller's
 *   own exit signal, not the one the caller put in the flags;
 * - an orphan handed to a new parent ends with SIGCHLD, whatever signal
 *   its first parent asked for. */
#include <sched.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

static volatile sig_atomic_t got_usr1, got_chld;

static void on_usr1(int sig) {
    (void)sig;
    got_usr1++;
}

static void on_chld(int sig) {
    (void)sig;
    got_chld++;
}

int main(void) {
    /* Restarting: the handlers count signals; the waits and reads below
     * must not end early with EINTR when one comes. */
    struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = SA_RESTART};
    sigaction(SIGUSR1, &sa, NULL);
    sa.sa_handler = on_chld;
    sigaction(SIGCHLD, &sa, NULL);
    int p[2];
    CHECK_OK(pipe(p));
    pid_t middle = fork();
    if (middle == 0) {
        /* Asks for SIGUSR1 to go to its parent when the sibling ends. */
        long sibling = syscall(SYS_clone, CLONE_PARENT | SIGUSR1, 0, 0, 0, 0);
        if (sibling == 0)
            _exit(7);
        if (write(p[1], &sibling, sizeof sibling) != sizeof sibling)
            _exit(1);
        _exit(sibling > 0 ? 0 : 2);
    }
    close(p[1]);
    long sibling = -1;
    CHECK(read(p[0], &sibling, sizeof sibling) == sizeof sibling);
    int status;
    CHECK(waitpid(middle, &status, 0) == middle);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* The sibling is this process's child, reported with SIGCHLD: plain
     * waitpid finds it, which it would not for a non-SIGCHLD child. */
    CHECK(waitpid((pid_t)sibling, &status, 0) == sibling);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 7);
    CHECK(got_usr1 == 0);
    CHECK(got_chld >= 1);

    /* An orphan: its parent asks for SIGUSR1 and dies first; this process,
     * a subreaper, inherits it. */
    CHECK_OK(prctl(PR_SET_CHILD_SUBREAPER, 1));
    int gone[2], hold[2];
    CHECK_OK(pipe(gone));
    CHECK_OK(pipe(hold));
    middle = fork();
    if (middle == 0) {
        long orphan = syscall(SYS_clone, SIGUSR1, 0, 0, 0, 0);
        if (orphan == 0) {
            /* Ends once its parent has: the last writer of `hold` gone. */
            char c;
            close(hold[1]);
            while (read(hold[0], &c, 1) > 0)
                ;
            _exit(9);
        }
        if (write(gone[1], &orphan, sizeof orphan) != sizeof orphan)
            _exit(1);
        _exit(orphan > 0 ? 0 : 2);
    }
    close(gone[1]);
    close(hold[1]);
    long orphan = -1;
    CHECK(read(gone[0], &orphan, sizeof orphan) == sizeof orphan);
    CHECK(waitpid(middle, &status, 0) == middle);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(waitpid((pid_t)orphan, &status, 0) == orphan);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 9);
    CHECK(got_usr1 == 0);
    return done();
}
