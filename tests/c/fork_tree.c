/* The first process starts a tree of processes that fork for ever, waits
 * until the tree is busy (LEAVES_BEFORE_EXIT processes at its bottom have
 * run), and exits with status 3 while the others are still forking. As
 * when the first process of a PID namespace exits, every other process
 * must be killed, the new ones included, and the whole ends with status 3.
 * Run natively outside such a namespace, the tree would never end. */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

/* Each process below the first forks BRANCHES children, waits for them
 * and starts again, for ever; processes at depth DEPTH report to the first
 * and exit. */
enum { ROOTS = 16, BRANCHES = 2, DEPTH = 3, LEAVES_BEFORE_EXIT = 50 };

static int leaves[2];

static void grow(int depth) {
    for (;;) {
        for (int b = 0; b < BRANCHES; b++) {
            if (fork() != 0) continue;
            if (++depth == DEPTH) {
                (void)!write(leaves[1], "x", 1);
                _exit(0);
            }
            b = -1; /* the child starts its own round */
        }
        while (wait(NULL) > 0) {
        }
    }
}

int main(void) {
    if (pipe(leaves) != 0) {
        perror("pipe");
        return 1;
    }
    for (int i = 0; i < ROOTS; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0) grow(0);
    }
    for (int n = 0; n < LEAVES_BEFORE_EXIT; n++) {
        char c;
        if (read(leaves[0], &c, 1) != 1) {
            perror("read");
            return 1;
        }
    }
    printf("%d trees growing\n", ROOTS);
    return 3;
}
