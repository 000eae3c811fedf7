/* CLOCK_MONOTONIC read through libc (the vDSO) between two reads by raw
 * syscall must lie between them, every time. The number of raw reads is
 * fixed (2 per round), so a profile of the run shows whether the vDSO
 * answered from the time page or fell back to the syscall. */
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "t.h"

#define ROUNDS 1000

static int64_t ns_of(struct timespec t) {
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

int main(void) {
    int out_of_order = 0, failed = 0;
    for (int i = 0; i < ROUNDS; i++) {
        struct timespec a, v, b;
        failed += syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &a) != 0;
        failed += clock_gettime(CLOCK_MONOTONIC, &v) != 0;
        failed += syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &b) != 0;
        out_of_order += !(ns_of(a) <= ns_of(v) && ns_of(v) <= ns_of(b));
    }
    CHECK(failed == 0);
    CHECK(out_of_order == 0);
    return done();
}
