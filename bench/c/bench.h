/* The harness shared by the microbenchmarks.
 *
 * Each program is run as `PROGRAM CASE SECONDS [ARGS...]`. It times its own
 * loops with clock_gettime(CLOCK_MONOTONIC) and prints one line per case:
 *
 *   BENCH case=NAME ops=N ns=T ns_per_op=X [unit=U value=V]
 *
 * ns is the wall time of the measured loop of N operations; unit/value is
 * an extra figure for throughput cases (MB/s, GB/s, ...). The driver
 * (bench/run) parses only these lines.
 *
 * Loops are sized by time, not by a fixed count, so the same program takes
 * about SECONDS whether an operation costs 0.1 µs natively or 25 µs in a
 * sandbox: batches of doubling size run until one takes at least an eighth
 * of SECONDS (these warm caches up), then one batch sized to take SECONDS is
 * measured. An operation that alone takes SECONDS or more is measured once.
 * Only a handful of clock reads happen per run, so their cost (a real system
 * call inside some sandboxes) does not skew the per-operation figure.
 *
 * Every system call's result is checked; a failure prints what failed and
 * why on stderr and exits with status 1, so a sandbox that lacks a feature
 * shows up as a failed case, never as a fast one. */
#ifndef CORDON_BENCH_H
#define CORDON_BENCH_H

#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Print "bench: <message>: <strerror(errno)>" and exit 1. */
__attribute__((noreturn, format(printf, 1, 2))) static void die(const char *fmt, ...) {
    int err = errno;
    va_list ap;
    fputs("bench: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, ": %s (errno %d)\n", strerror(err), err);
    exit(1);
}

/* Print "bench: <message>" and exit 1 (for failures that set no errno). */
__attribute__((noreturn, format(printf, 1, 2))) static void fail(const char *fmt, ...) {
    va_list ap;
    fputs("bench: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static inline uint64_t now_ns(void) {
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        die("clock_gettime(CLOCK_MONOTONIC)");
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One benchmark case: `run(n, arg)` performs n operations. */
struct bench_case {
    const char *name;
    void (*run)(long n, void *arg);
    /* How many operations one unit of `run` makes (0 means 1): a case whose
     * natural unit is large (a 256 MiB region) can report per page. */
    long items;
    /* Extra figure: value = ops * per_op_amount / seconds / divisor, e.g.
     * bytes per op and 1e6 for MB/s. Leave unit NULL for none. */
    const char *unit;
    double per_op_amount;
    double divisor;
};

/* Run `c` for about `seconds` as described at the top of this file and
 * print its BENCH line. */
static inline void measure(const struct bench_case *c, void *arg, double seconds) {
    const uint64_t target = (uint64_t)(seconds * 1e9);
    long n = 1;
    uint64_t dt;
    for (;;) {
        uint64_t t0 = now_ns();
        c->run(n, arg);
        dt = now_ns() - t0;
        if (dt >= target)
            break; /* this batch alone is long enough: report it */
        if (dt >= target / 8) {
            /* Size one batch to take `target`, from this one's rate. */
            double scaled = (double)n * (double)target / (double)(dt ? dt : 1);
            n = scaled < 1 ? 1 : (long)scaled;
            t0 = now_ns();
            c->run(n, arg);
            dt = now_ns() - t0;
            break;
        }
        if (n > (1L << 40))
            fail("%s: %ld operations took only %llu ns", c->name, n, (unsigned long long)dt);
        n *= 2;
    }
    double ops = (double)n * (double)(c->items > 0 ? c->items : 1);
    printf("BENCH case=%s ops=%.0f ns=%llu ns_per_op=%.4f", c->name, ops, (unsigned long long)dt,
           (double)dt / ops);
    if (c->unit)
        printf(" unit=%s value=%.4f", c->unit, ops * c->per_op_amount / ((double)dt / 1e9) / c->divisor);
    putchar('\n');
    if (fflush(stdout) != 0)
        die("writing the result");
}

/* Parse argv for `PROGRAM CASE SECONDS ...`, find CASE in `cases` (an array
 * ended by a zeroed entry) and return it; *seconds gets SECONDS. */
static inline const struct bench_case *pick_case(int argc, char **argv, const struct bench_case *cases,
                                                 double *seconds) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s CASE SECONDS [ARGS...]\ncases:", argv[0]);
        for (const struct bench_case *c = cases; c->name; c++)
            fprintf(stderr, " %s", c->name);
        fputc('\n', stderr);
        exit(2);
    }
    char *end;
    errno = 0;
    *seconds = strtod(argv[2], &end);
    if (errno || *end || !(*seconds > 0))
        fail("bad SECONDS '%s'", argv[2]);
    for (const struct bench_case *c = cases; c->name; c++)
        if (strcmp(c->name, argv[1]) == 0)
            return c;
    fail("unknown case '%s'", argv[1]);
}

#endif
