/* 16 threads hammer a mutex built directly on FUTEX_WAIT/FUTEX_WAKE
 * (Drepper's three-state mutex); the final count must be exact. Also the
 * futex operations' own results: EAGAIN on a changed word, ETIMEDOUT,
 * wake counts, bitsets, requeue and wake_op, and a futex in shared memory
 * between two processes. */
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t.h"

static long futex(_Atomic int *uaddr, int op, int val, const struct timespec *ts, _Atomic int *uaddr2, int val3) {
    return syscall(SYS_futex, uaddr, op, val, ts, uaddr2, val3);
}

/* 0 unlocked, 1 locked, 2 locked with waiters. */
static void lock(_Atomic int *m, int shared) {
    int op = shared ? FUTEX_WAIT : FUTEX_WAIT_PRIVATE;
    int c = 0;
    if (atomic_compare_exchange_strong(m, &c, 1)) return;
    if (c != 2) c = atomic_exchange(m, 2);
    while (c != 0) {
        futex(m, op, 2, NULL, NULL, 0);
        c = atomic_exchange(m, 2);
    }
}

static void unlock(_Atomic int *m, int shared) {
    if (atomic_fetch_sub(m, 1) != 1) {
        atomic_store(m, 0);
        futex(m, shared ? FUTEX_WAKE : FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    }
}

#define THREADS 16
#define ROUNDS 20000

static _Atomic int mutex;
static long counter; /* deliberately not atomic: the mutex protects it */

static void *hammer(void *arg) {
    for (int i = 0; i < ROUNDS; i++) {
        lock(&mutex, 0);
        long v = counter;
        if ((i & 255) == 0) sched_yield(); /* widen the window */
        counter = v + 1;
        unlock(&mutex, 0);
    }
    return NULL;
}

static _Atomic int word;
static _Atomic int woken, ready;
static void *waiter(void *arg) {
    int bits = (int)(intptr_t)arg;
    atomic_fetch_add(&ready, 1);
    long r = futex(&word, FUTEX_WAIT_BITSET_PRIVATE, 0, NULL, NULL, bits);
    if (r == 0) atomic_fetch_add(&woken, 1);
    return NULL;
}

/* Waits until `n` waiter threads have started, then gives them time to
 * reach their futex wait. */
static void settle(int n) {
    while (ready < n) sched_yield();
    struct timespec ts = {0, 200 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

int main(void) {
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, hammer, NULL) == 0);
    for (int i = 0; i < THREADS; i++) CHECK(pthread_join(t[i], NULL) == 0);
    CHECK(counter == (long)THREADS * ROUNDS);
    CHECK(mutex == 0);

    /* A changed word: EAGAIN at once. Nobody waiting: wake returns 0. */
    _Atomic int w = 5;
    CHECK_ERR(futex(&w, FUTEX_WAIT_PRIVATE, 4, NULL, NULL, 0), EAGAIN);
    CHECK(futex(&w, FUTEX_WAKE_PRIVATE, 10, NULL, NULL, 0) == 0);
    /* A relative timeout. */
    struct timespec ts = {0, 50 * 1000 * 1000}, a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    CHECK_ERR(futex(&w, FUTEX_WAIT_PRIVATE, 5, &ts, NULL, 0), ETIMEDOUT);
    clock_gettime(CLOCK_MONOTONIC, &b);
    long ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
    CHECK(ms >= 50 && ms < 2000);
    /* An absolute one with WAIT_BITSET (already past: at once). */
    clock_gettime(CLOCK_MONOTONIC, &a);
    CHECK_ERR(futex(&w, FUTEX_WAIT_BITSET_PRIVATE, 5, &a, NULL, FUTEX_BITSET_MATCH_ANY), ETIMEDOUT);
    CHECK_ERR(futex(&w, FUTEX_WAIT_BITSET_PRIVATE, 5, NULL, NULL, 0), EINVAL);
    CHECK_ERR(futex((_Atomic int *)((char *)&w + 1), FUTEX_WAIT_PRIVATE, 5, NULL, NULL, 0), EINVAL);
    CHECK_ERR(futex((_Atomic int *)8, FUTEX_WAIT_PRIVATE, 5, NULL, NULL, 0), EFAULT);

    /* Bitsets: a wake with bit 1 wakes only the waiters with bit 1. */
    pthread_t bw[4];
    for (int i = 0; i < 4; i++) pthread_create(&bw[i], NULL, waiter, (void *)(intptr_t)(i < 2 ? 1 : 2));
    settle(4);
    CHECK(futex(&word, FUTEX_WAKE_BITSET_PRIVATE, 10, NULL, NULL, 1) == 2);
    settle(4);
    CHECK(woken == 2);
    CHECK(futex(&word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0) == 1);
    CHECK(futex(&word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0) == 1);
    for (int i = 0; i < 4; i++) pthread_join(bw[i], NULL);
    CHECK(woken == 4);

    /* Requeue: 4 waiters on `word`; wake 1, move 2 to `w2`; 1 stays. */
    static _Atomic int w2;
    woken = 0;
    ready = 0;
    for (int i = 0; i < 4; i++) pthread_create(&bw[i], NULL, waiter, (void *)(intptr_t)FUTEX_BITSET_MATCH_ANY);
    settle(4);
    CHECK_ERR(futex(&word, FUTEX_CMP_REQUEUE_PRIVATE, 1, (void *)2, &w2, 99), EAGAIN);
    CHECK(futex(&word, FUTEX_CMP_REQUEUE_PRIVATE, 1, (void *)2, &w2, 0) == 3);
    settle(4);
    CHECK(woken == 1);
    CHECK(futex(&w2, FUTEX_WAKE_PRIVATE, 10, NULL, NULL, 0) == 2);
    CHECK(futex(&word, FUTEX_WAKE_PRIVATE, 10, NULL, NULL, 0) == 1);
    for (int i = 0; i < 4; i++) pthread_join(bw[i], NULL);
    CHECK(woken == 4);

    /* Wake_op: w2 += 1 (old 0), wake on word, and on w2 if old == 0. */
    woken = 0;
    w2 = 0;
    CHECK(futex(&word, FUTEX_WAKE_OP_PRIVATE, 1, (void *)1, &w2,
                FUTEX_OP(FUTEX_OP_ADD, 1, FUTEX_OP_CMP_EQ, 0)) == 0);
    CHECK(w2 == 1);
    CHECK(futex(&word, FUTEX_WAKE_OP_PRIVATE, 1, (void *)1, &w2,
                FUTEX_OP(FUTEX_OP_OR, 6, FUTEX_OP_CMP_GT, 0)) == 0);
    CHECK(w2 == 7);

    /* A shared futex in MAP_SHARED memory: a child and the parent take
     * turns on one mutex and a counter. */
    struct shm {
        _Atomic int m;
        long n;
    } *s = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(s != MAP_FAILED);
    pid_t pid = fork();
    if (pid == 0) {
        for (int i = 0; i < 5000; i++) {
            lock(&s->m, 1);
            long v = s->n;
            if ((i & 127) == 0) sched_yield();
            s->n = v + 1;
            unlock(&s->m, 1);
        }
        _exit(0);
    }
    for (int i = 0; i < 5000; i++) {
        lock(&s->m, 1);
        long v = s->n;
        if ((i & 127) == 0) sched_yield();
        s->n = v + 1;
        unlock(&s->m, 1);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(s->n == 10000);

    /* A child waits on a shared word; the parent wakes it from its own
     * address space. */
    s->m = 0;
    pid = fork();
    if (pid == 0) {
        while (s->m == 0) futex(&s->m, FUTEX_WAIT, 0, NULL, NULL, 0);
        _exit(s->m == 1 ? 0 : 1);
    }
    settle(0);
    s->m = 1;
    futex(&s->m, FUTEX_WAKE, 1, NULL, NULL, 0);
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    return done();
}
