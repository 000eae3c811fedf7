/* Stress: two threads pass a token back and forth over two pipes N times
 * (default 100000 round trips); every token must come back incremented. */
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "t.h"

static int to_b[2], to_a[2];
static long rounds;

static void *b_side(void *arg) {
    uint64_t v;
    for (long i = 0; i < rounds; i++) {
        if (read(to_b[0], &v, sizeof v) != sizeof v) return (void *)1;
        v++;
        if (write(to_a[1], &v, sizeof v) != sizeof v) return (void *)2;
    }
    return NULL;
}

int main(int argc, char **argv) {
    rounds = argc > 1 ? atol(argv[1]) : 100000;
    CHECK_OK(pipe(to_b));
    CHECK_OK(pipe(to_a));
    pthread_t t;
    CHECK(pthread_create(&t, NULL, b_side, NULL) == 0);
    uint64_t v = 0;
    long bad = 0;
    for (long i = 0; i < rounds; i++) {
        uint64_t sent = v;
        if (write(to_b[1], &v, sizeof v) != sizeof v || read(to_a[0], &v, sizeof v) != sizeof v || v != sent + 1)
            bad++;
        v++;
    }
    void *r;
    CHECK(pthread_join(t, &r) == 0 && r == NULL);
    CHECK(bad == 0);
    CHECK(v == 2 * (uint64_t)rounds);
    printf("%ld round trips\n", rounds);
    return done();
}
