/* Makes the system call that cordon's tests can turn into a bug in the
 * sentry (number 0xbadc0de, which no Linux system call has), from a child
 * process, while another child spins and a third is blocked in a read.
 * Natively, and in a sandbox not set up for that test, the number is
 * unknown and fails with ENOSYS: the program says so and exits 0. */
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

#define TEST_PANIC_SYSCALL 0x0badc0de

int main(void) {
    int never[2];
    CHECK_OK(pipe(never));
    pid_t spinner = fork();
    if (spinner == 0)
        for (;;) {
        }
    pid_t reader = fork();
    if (reader == 0) {
        char c;
        _exit(read(never[0], &c, 1) == 0 ? 0 : 1);
    }
    pid_t caller = fork();
    if (caller == 0) {
        long r = syscall(TEST_PANIC_SYSCALL);
        _exit(r == -1 && errno == ENOSYS ? 0 : 1);
    }
    int st = 0;
    CHECK(waitpid(caller, &st, 0) == caller);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    printf("system call %#x: %s\n", TEST_PANIC_SYSCALL, WIFEXITED(st) && WEXITSTATUS(st) == 0 ? "ENOSYS" : "?");
    CHECK_OK(kill(spinner, SIGKILL));
    CHECK_OK(kill(reader, SIGKILL));
    CHECK(waitpid(spinner, &st, 0) == spinner && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    CHECK(waitpid(reader, &st, 0) == reader && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    return done();
}
