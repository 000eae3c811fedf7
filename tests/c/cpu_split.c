/* CPU time split into user and system time: a loop in application code
 * is mostly user time, a loop of system calls that do real work has a
 * real share of system time, and getrusage (self, thread, children),
 * times() and /proc/self/stat agree with each other and, summed, with
 * CLOCK_PROCESS_CPUTIME_ID. ITIMER_VIRTUAL counts user time only,
 * ITIMER_PROF both. Every loop runs until the process's own CPU clock
 * says enough; the checks are inequalities with wide margins. */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/times.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t.h"

#define MS 1000000LL
#define SLACK (30 * MS)

static int64_t cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int64_t tv_ns(struct timeval t) { return (int64_t)t.tv_sec * 1000000000 + (int64_t)t.tv_usec * 1000; }

struct split {
    int64_t user, sys;
};

static struct split usage(int who) {
    struct rusage r;
    CHECK_OK(getrusage(who, &r));
    return (struct split){tv_ns(r.ru_utime), tv_ns(r.ru_stime)};
}

static volatile uint64_t sink;

/* Application code only, for `ns` of CPU time. */
static void spin_user(int64_t ns) {
    int64_t end = cpu_now() + ns;
    uint64_t x = 1;
    while (cpu_now() < end)
        for (int i = 0; i < 2000000; i++)
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    sink = x;
}

static char buf[1 << 20];

/* System calls that do real work (reading a megabyte of zeros), for
 * `ns` of CPU time or until `stop` is set. */
static volatile sig_atomic_t stop;
static void spin_sys(int64_t ns) {
    int fd = open("/dev/zero", O_RDONLY);
    CHECK(fd >= 0);
    int64_t end = cpu_now() + ns;
    while (!stop && (ns == 0 || cpu_now() < end))
        for (int i = 0; i < 20 && !stop; i++)
            if (read(fd, buf, sizeof buf) != sizeof buf)
                break;
    close(fd);
}

static void user_loop(void) {
    struct split a = usage(RUSAGE_SELF);
    spin_user(400 * MS);
    struct split b = usage(RUSAGE_SELF);
    int64_t du = b.user - a.user, ds = b.sys - a.sys;
    CHECK(du >= 300 * MS);
    CHECK(ds * 2 < du);
}

static void sys_loop(void) {
    struct split a = usage(RUSAGE_SELF);
    spin_sys(400 * MS);
    struct split b = usage(RUSAGE_SELF);
    int64_t du = b.user - a.user, ds = b.sys - a.sys;
    CHECK(du + ds >= 300 * MS);
    CHECK(ds * 10 >= du + ds);
}

/* Every view of the split agrees, and their sums with the CPU clock. */
static void views_agree(void) {
    long hz = sysconf(_SC_CLK_TCK);
    int64_t tick = 1000000000 / hz;
    int64_t c0 = cpu_now();
    struct split self = usage(RUSAGE_SELF), thread = usage(RUSAGE_THREAD);
    struct tms tm;
    CHECK(times(&tm) != (clock_t)-1);
    unsigned long utime = 0, stime = 0;
    FILE *f = fopen("/proc/self/stat", "r");
    CHECK(f != NULL);
    if (f) {
        CHECK(fscanf(f, "%*d (%*[^)]) %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime) == 2);
        fclose(f);
    }
    int64_t c1 = cpu_now();
    CHECK(self.user + self.sys >= c0 - SLACK && self.user + self.sys <= c1 + SLACK);
    CHECK(thread.user <= self.user + SLACK && thread.sys <= self.sys + SLACK);
    CHECK((int64_t)tm.tms_utime * tick <= self.user + SLACK + tick);
    CHECK((int64_t)tm.tms_utime * tick >= self.user - SLACK - tick);
    CHECK((int64_t)tm.tms_stime * tick <= self.sys + SLACK + tick);
    CHECK((int64_t)tm.tms_stime * tick >= self.sys - SLACK - tick);
    CHECK((int64_t)utime * tick >= self.user - SLACK - tick && (int64_t)utime * tick <= c1 + SLACK);
    CHECK((int64_t)stime * tick >= self.sys - SLACK - tick && (int64_t)stime * tick <= c1 + SLACK);
    /* A child's split reaches its parent when it is reaped. */
    struct split before = usage(RUSAGE_CHILDREN);
    pid_t pid = fork();
    if (pid == 0) {
        spin_user(200 * MS);
        spin_sys(200 * MS);
        _exit(0);
    }
    int st;
    struct rusage r;
    CHECK(wait4(pid, &st, 0, &r) == pid);
    struct split after = usage(RUSAGE_CHILDREN);
    CHECK(tv_ns(r.ru_utime) >= 100 * MS && tv_ns(r.ru_stime) >= 20 * MS);
    CHECK(after.user - before.user >= 100 * MS && after.sys - before.sys >= 20 * MS);
    CHECK(times(&tm) != (clock_t)-1);
    CHECK((int64_t)tm.tms_cutime * tick >= 100 * MS - tick && (int64_t)tm.tms_cstime * tick >= 20 * MS - tick);
}

static volatile sig_atomic_t got_prof, got_vtalrm;
static void on_prof(int s) {
    got_prof = 1;
    stop = 1;
}
static void on_vtalrm(int s) { got_vtalrm = 1; }

/* Both timers armed alike in a loop of system calls: the profiling timer
 * (all CPU time) fires first; the virtual one (user time) still has time
 * left, and fires once application code has run long enough. */
static void itimers(void) {
    signal(SIGPROF, on_prof);
    signal(SIGVTALRM, on_vtalrm);
    struct itimerval v = {{0, 0}, {0, 300000}};
    CHECK_OK(setitimer(ITIMER_VIRTUAL, &v, NULL));
    CHECK_OK(setitimer(ITIMER_PROF, &v, NULL));
    spin_sys(0);
    CHECK(got_prof);
    CHECK(!got_vtalrm);
    struct itimerval cur;
    CHECK_OK(getitimer(ITIMER_VIRTUAL, &cur));
    CHECK(cur.it_value.tv_sec > 0 || cur.it_value.tv_usec > 0);
    int64_t end = cpu_now() + 2000 * MS;
    while (!got_vtalrm && cpu_now() < end)
        spin_user(10 * MS);
    CHECK(got_vtalrm);
}

int main(void) {
    user_loop();
    sys_loop();
    views_agree();
    itimers();
    return done();
}
