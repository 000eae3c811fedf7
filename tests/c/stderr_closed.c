/* Writes lines to stderr until its reader goes away (EPIPE: SIGPIPE is
 * ignored), then makes a system call no kernel has (ENOSYS), and exits
 * with status 7 if both failed so. cordon's own messages to the same
 * stderr (strace lines, the notice of the unknown call, the profile) fail
 * too, and must not change the outcome. */
#include <signal.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "t.h"

/* Far above any system call number Linux has. */
#define NO_SUCH_SYSCALL 100000

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    long lines = 0;
    while (write(2, "a line to stderr\n", 17) == 17) lines++;
    int write_errno = errno;
    long r = syscall(NO_SUCH_SYSCALL);
    int syscall_errno = errno;
    printf("write: %s; system call %d: %s\n", strerror(write_errno), NO_SUCH_SYSCALL,
           r == -1 ? strerror(syscall_errno) : "succeeded");
    return write_errno == EPIPE && r == -1 && syscall_errno == ENOSYS ? 7 : 1;
}
