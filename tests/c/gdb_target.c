/* What tests/ptrace.rs debugs with gdb: a breakpoint in square(), steps
 * into and over calls, and a crash (a store through a null pointer) in
 * crash() to show a backtrace of. Not run on its own. */
#include <stdio.h>

__attribute__((noinline)) int square(int x) {
    volatile int y = x * x;
    return y;
}

__attribute__((noinline)) void crash(int *p) {
    int v = square(3);
    *p = v;
}

int main(int argc, char **argv) {
    (void)argv;
    int a = square(argc + 1);
    printf("a=%d\n", a);
    fflush(stdout);
    crash(argc > 5 ? &a : 0);
    return 0;
}
