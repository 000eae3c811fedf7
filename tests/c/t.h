/* Assertions for the C test programs. Each check prints nothing on success
 * and a line naming the check on failure; done() prints a summary and gives
 * the exit status (0 only if every check passed). The same program runs
 * natively and inside the sandbox, so every expectation is Linux's own. */
#ifndef CORDON_T_H
#define CORDON_T_H
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* volatile: tests that siglongjmp out of signal handlers must not lose counts
 * kept in registers; counted atomically: threads check at once. */
static volatile int t_checks, t_failures;
#define T_COUNT(counter) __atomic_fetch_add(&(counter), 1, __ATOMIC_RELAXED)

#define CHECK(cond)                                                                                  \
    do {                                                                                             \
        int _e = errno;                                                                              \
        T_COUNT(t_checks);                                                                           \
        if (!(cond)) {                                                                               \
            T_COUNT(t_failures);                                                                     \
            fprintf(stderr, "%s:%d: check failed: %s (errno %d: %s)\n", __FILE__, __LINE__, #cond, _e, \
                    strerror(_e));                                                                   \
        }                                                                                            \
    } while (0)

/* `expr` must fail with -1 and errno `err`. */
#define CHECK_ERR(expr, err)                                                                        \
    do {                                                                                            \
        errno = 0;                                                                                  \
        long _r = (long)(expr);                                                                     \
        int _e = errno;                                                                             \
        T_COUNT(t_checks);                                                                          \
        if (_r != -1 || _e != (err)) {                                                              \
            T_COUNT(t_failures);                                                                    \
            fprintf(stderr, "%s:%d: %s returned %ld errno %d (%s), expected -1 errno %d (%s)\n",    \
                    __FILE__, __LINE__, #expr, _r, _e, strerror(_e), (int)(err), strerror(err));    \
        }                                                                                           \
    } while (0)

/* `expr` must succeed (not -1). */
#define CHECK_OK(expr)                                                                              \
    do {                                                                                            \
        errno = 0;                                                                                  \
        long _r = (long)(expr);                                                                     \
        int _e = errno;                                                                             \
        T_COUNT(t_checks);                                                                          \
        if (_r == -1) {                                                                             \
            T_COUNT(t_failures);                                                                    \
            fprintf(stderr, "%s:%d: %s failed: errno %d (%s)\n", __FILE__, __LINE__, #expr, _e,     \
                    strerror(_e));                                                                  \
        }                                                                                           \
    } while (0)

static int done(void) {
    printf("%d checks, %d failed\n", t_checks, t_failures);
    return t_failures ? 1 : 0;
}

#endif
