/* Hundreds of processes alive at once, each with its own address space:
 * all are made, each blocks until the parent lets them go, and every one
 * is waited for. */
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

#define CHILDREN 300

int main(void) {
    int gate[2];
    CHECK_OK(pipe(gate));
    int made = 0;
    for (int i = 0; i < CHILDREN; i++) {
        pid_t pid = fork();
        if (pid == 0) {
            close(gate[1]);
            char c;
            _exit(read(gate[0], &c, 1) == 0 ? 0 : 1);
        }
        if (pid < 0) {
            CHECK_OK(pid);
            break;
        }
        made++;
    }
    close(gate[1]);
    int ok = 0;
    for (int i = 0; i < made; i++) {
        int st = 0;
        if (wait(&st) > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0)
            ok++;
    }
    printf("%d processes made, %d ended well\n", made, ok);
    CHECK(made == CHILDREN && ok == CHILDREN);
    return done();
}
