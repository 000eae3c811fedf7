/* The smallest program: arguments, environment and exit status. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        printf("argv[%d]=%s\n", i, argv[i]);
    const char *v = getenv("CORDON_TEST_VAR");
    printf("CORDON_TEST_VAR=%s\n", v ? v : "(unset)");
    return argc > 1 ? atoi(argv[1]) : 0;
}
