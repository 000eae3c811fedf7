/* Makes a system call Linux itself no longer implements (tuxcall: ENOSYS
 * natively too) and says what it returned, on stdout and on stderr: the
 * sandbox may note the call in its own log, never in the program's
 * streams. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void) {
    long r = syscall(SYS_tuxcall, 0, 0, 0);
    int e = errno;
    printf("tuxcall: %ld %s\n", r, strerrorname_np(e));
    fprintf(stderr, "stderr: tuxcall gave %s\n", strerrorname_np(e));
    return r == -1 && e == ENOSYS ? 0 : 1;
}
