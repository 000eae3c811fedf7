/* Setting the clocks as a container's root: refused (EPERM, no
 * CAP_SYS_TIME) after Linux's own checks of the arguments; adjtimex and
 * clock_adjtime with no modes read the kernel clock's state. */
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timex.h>
#include <time.h>

#include "container_caps.h"
#include "t.h"

int main(void) {
    narrow_to_container_caps();
    struct timespec now;
    CHECK_OK(clock_gettime(CLOCK_REALTIME, &now));
    CHECK_ERR(syscall(SYS_clock_settime, CLOCK_REALTIME, &now), EPERM);
    struct timespec bad = {-1, 0};
    CHECK_ERR(syscall(SYS_clock_settime, CLOCK_REALTIME, &bad), EINVAL);
    bad = (struct timespec){now.tv_sec, 1000000000};
    CHECK_ERR(syscall(SYS_clock_settime, CLOCK_REALTIME, &bad), EINVAL);
    CHECK_ERR(syscall(SYS_clock_settime, CLOCK_REALTIME, (void *)8), EFAULT);
    CHECK_ERR(syscall(SYS_clock_settime, CLOCK_MONOTONIC, &now), EINVAL);
    CHECK_ERR(syscall(SYS_clock_settime, CLOCK_BOOTTIME, &now), EINVAL);
    CHECK_ERR(syscall(SYS_clock_settime, CLOCK_TAI, &now), EINVAL);
    CHECK_ERR(syscall(SYS_clock_settime, 100, &now), EINVAL);
    CHECK_ERR(syscall(SYS_clock_settime, CLOCK_PROCESS_CPUTIME_ID, &now), EINVAL);
    CHECK_ERR(syscall(SYS_clock_settime, CLOCK_THREAD_CPUTIME_ID, &now), EINVAL);

    struct timeval tv = {now.tv_sec, 0};
    CHECK_ERR(syscall(SYS_settimeofday, &tv, NULL), EPERM);
    CHECK_ERR(syscall(SYS_settimeofday, NULL, NULL), EPERM);
    tv.tv_usec = 1000000;
    CHECK_ERR(syscall(SYS_settimeofday, &tv, NULL), EINVAL);
    tv.tv_usec = -1;
    CHECK_ERR(syscall(SYS_settimeofday, &tv, NULL), EINVAL);
    CHECK_ERR(syscall(SYS_settimeofday, (void *)8, NULL), EFAULT);
    struct timezone tz = {0, 0};
    CHECK_ERR(syscall(SYS_settimeofday, NULL, &tz), EPERM);

    /* Reading the clock's state needs no privilege. */
    struct timex t;
    memset(&t, 0, sizeof t);
    int state = syscall(SYS_adjtimex, &t);
    CHECK(state >= 0 && state <= 5);
    printf("adjtimex: state %d tick %ld precision %ld tolerance %ld unsync %d\n", state, t.tick, t.precision,
           t.tolerance, !!(t.status & STA_UNSYNC));
    long ahead = t.time.tv_sec - now.tv_sec;
    CHECK(ahead >= 0 && ahead < 600);
    memset(&t, 0, sizeof t);
    CHECK(syscall(SYS_clock_adjtime, CLOCK_REALTIME, &t) == state);
    /* What is left of an adjtime(3) adjustment: none. */
    memset(&t, 0, sizeof t);
    t.modes = ADJ_OFFSET_SS_READ;
    CHECK(syscall(SYS_adjtimex, &t) == state && t.offset == 0);
    /* Any change is refused. */
    memset(&t, 0, sizeof t);
    t.modes = ADJ_FREQUENCY;
    CHECK_ERR(syscall(SYS_adjtimex, &t), EPERM);
    t.modes = ADJ_SETOFFSET;
    CHECK_ERR(syscall(SYS_adjtimex, &t), EPERM);
    t.modes = ADJ_OFFSET_SINGLESHOT;
    CHECK_ERR(syscall(SYS_adjtimex, &t), EPERM);
    t.modes = 0x8000; /* ADJ_ADJTIME alone */
    CHECK_ERR(syscall(SYS_adjtimex, &t), EINVAL);
    t.modes = ADJ_TICK;
    t.tick = 1;
    CHECK_ERR(syscall(SYS_adjtimex, &t), EPERM);
    CHECK_ERR(syscall(SYS_adjtimex, (void *)8), EFAULT);
    t.modes = 0;
    CHECK_ERR(syscall(SYS_clock_adjtime, CLOCK_MONOTONIC, &t), EOPNOTSUPP);
    CHECK_ERR(syscall(SYS_clock_adjtime, CLOCK_TAI, &t), EOPNOTSUPP);
    CHECK_ERR(syscall(SYS_clock_adjtime, 100, &t), EINVAL);
    CHECK_ERR(syscall(SYS_clock_adjtime, CLOCK_REALTIME, (void *)8), EFAULT);
    t.modes = ADJ_FREQUENCY;
    CHECK_ERR(syscall(SYS_clock_adjtime, CLOCK_REALTIME, &t), EPERM);
    return done();
}
