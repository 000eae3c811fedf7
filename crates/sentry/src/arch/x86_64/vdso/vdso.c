/*
 * The sandbox's vDSO: clock reads answered in the application's own
 * address space, from the TSC and a time page the sentry keeps current,
 * instead of by a syscall (a VM exit), and getcpu from rdtscp where the
 * platform keeps the CPU's number in TSC_AUX. Whatever this code cannot answer
 * (another clock, a time zone, a time page marked unusable) it passes on
 * as the real syscall, so every answer is the sentry's answer.
 *
 * Built freestanding into a small shared object with no relocations; the
 * time page is mapped one page below it and reached PC-relative.
 */
#include <stdint.h>

/* Must match TimePage in vdso/clock.rs. */
struct cordon_time_page {
    uint32_t seq;        /* odd while the sentry rewrites the page */
    uint32_t usable;     /* 0: make the syscall instead */
    uint64_t tsc_base;   /* TSC value the bases below were taken at */
    uint64_t mult;       /* ns per TSC tick, times 2^shift */
    uint32_t shift;
    uint32_t cpu_in_tsc_aux; /* rdtscp's TSC_AUX is (node << 12) | cpu */
    int64_t mono_base;   /* CLOCK_MONOTONIC at tsc_base, in ns */
    int64_t real_offset; /* CLOCK_REALTIME - CLOCK_MONOTONIC, in ns */
    int64_t boot_offset; /* CLOCK_BOOTTIME - CLOCK_MONOTONIC, in ns */
    uint32_t cpus;       /* CPUs the sandbox has: getcpu answers below */
    uint32_t pad;
};

extern const struct cordon_time_page cordon_time_page __attribute__((visibility("hidden")));

struct k_timespec {
    long tv_sec;
    long tv_nsec;
};
struct k_timeval {
    long tv_sec;
    long tv_usec;
};

#define NR_gettimeofday 96
#define NR_time 201
#define NR_clock_gettime 228
#define NR_getcpu 309

#define CLOCK_REALTIME 0
#define CLOCK_MONOTONIC 1
#define CLOCK_REALTIME_COARSE 5
#define CLOCK_MONOTONIC_COARSE 6
#define CLOCK_BOOTTIME 7

static long syscall2(long nr, long a, long b) {
    long ret;
    __asm__ volatile("syscall" : "=a"(ret) : "a"(nr), "D"(a), "S"(b) : "rcx", "r11", "memory");
    return ret;
}

static uint64_t rdtsc_ordered(void) {
    uint32_t lo, hi;
    __asm__ volatile("lfence; rdtsc" : "=a"(lo), "=d"(hi)::"memory");
    return ((uint64_t)hi << 32) | lo;
}

enum base { MONO, REAL, BOOT };

/* Nanoseconds on clock `which`, or 0 if the time page cannot be used. */
static int read_ns(enum base which, int64_t *out) {
    const struct cordon_time_page *p = &cordon_time_page;
    for (;;) {
        uint32_t seq = __atomic_load_n(&p->seq, __ATOMIC_ACQUIRE);
        if (seq & 1) {
            __asm__ volatile("pause");
            continue;
        }
        if (!__atomic_load_n(&p->usable, __ATOMIC_RELAXED))
            return 0;
        uint64_t tsc = rdtsc_ordered();
        uint64_t base = __atomic_load_n(&p->tsc_base, __ATOMIC_RELAXED);
        uint64_t mult = __atomic_load_n(&p->mult, __ATOMIC_RELAXED);
        uint32_t shift = __atomic_load_n(&p->shift, __ATOMIC_RELAXED);
        int64_t ns = __atomic_load_n(&p->mono_base, __ATOMIC_RELAXED);
        if (which == REAL)
            ns += __atomic_load_n(&p->real_offset, __ATOMIC_RELAXED);
        else if (which == BOOT)
            ns += __atomic_load_n(&p->boot_offset, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&p->seq, __ATOMIC_RELAXED) != seq)
            continue;
        uint64_t delta = tsc > base ? tsc - base : 0;
        *out = ns + (int64_t)(((unsigned __int128)delta * mult) >> shift);
        return 1;
    }
}

int __vdso_clock_gettime(long clock, struct k_timespec *ts) {
    enum base which;
    switch (clock) {
    case CLOCK_MONOTONIC:
    case CLOCK_MONOTONIC_COARSE:
        which = MONO;
        break;
    case CLOCK_REALTIME:
    case CLOCK_REALTIME_COARSE:
        which = REAL;
        break;
    case CLOCK_BOOTTIME:
        which = BOOT;
        break;
    default:
        return syscall2(NR_clock_gettime, clock, (long)ts);
    }
    int64_t ns;
    if (!read_ns(which, &ns))
        return syscall2(NR_clock_gettime, clock, (long)ts);
    ts->tv_sec = ns / 1000000000;
    ts->tv_nsec = ns % 1000000000;
    return 0;
}

int __vdso_gettimeofday(struct k_timeval *tv, void *tz) {
    int64_t ns;
    if (tz || !read_ns(REAL, &ns))
        return syscall2(NR_gettimeofday, (long)tv, (long)tz);
    if (tv) {
        tv->tv_sec = ns / 1000000000;
        tv->tv_usec = ns % 1000000000 / 1000;
    }
    return 0;
}

long __vdso_time(long *t) {
    int64_t ns;
    if (!read_ns(REAL, &ns))
        return syscall2(NR_time, (long)t, 0);
    long s = ns / 1000000000;
    if (t)
        *t = s;
    return s;
}

long __vdso_getcpu(unsigned *cpu, unsigned *node, void *unused) {
    if (!__atomic_load_n(&cordon_time_page.cpu_in_tsc_aux, __ATOMIC_RELAXED)) {
        long ret;
        __asm__ volatile("syscall"
                         : "=a"(ret)
                         : "a"(NR_getcpu), "D"(cpu), "S"(node), "d"(unused)
                         : "rcx", "r11", "memory");
        return ret;
    }
    uint32_t lo, hi, aux;
    __asm__ volatile("rdtscp" : "=a"(lo), "=d"(hi), "=c"(aux));
    /* The sandbox may say it has fewer CPUs than the host runs it on. */
    if (cpu)
        *cpu = (aux & 0xfff) % cordon_time_page.cpus;
    if (node)
        *node = 0;
    return 0;
}

int clock_gettime(long, struct k_timespec *) __attribute__((weak, alias("__vdso_clock_gettime")));
int gettimeofday(struct k_timeval *, void *) __attribute__((weak, alias("__vdso_gettimeofday")));
long time(long *) __attribute__((weak, alias("__vdso_time")));
long getcpu(unsigned *, unsigned *, void *) __attribute__((weak, alias("__vdso_getcpu")));
