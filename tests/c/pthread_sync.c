/* pthread mutexes, condition variables, barriers, rwlocks, semaphores,
 * thread-specific data, joins with return values, and detached threads. */
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "t.h"

#define THREADS 8

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static long counter;

static void *count(void *arg) {
    for (int i = 0; i < 20000; i++) {
        pthread_mutex_lock(&m);
        counter++;
        pthread_mutex_unlock(&m);
    }
    return (void *)((intptr_t)arg * 3);
}

/* A bounded queue: producers and consumers with two condition variables. */
#define QCAP 4
static int queue[QCAP], qhead, qlen;
static pthread_cond_t not_full = PTHREAD_COND_INITIALIZER, not_empty = PTHREAD_COND_INITIALIZER;
static long consumed_sum;

static void *producer(void *arg) {
    for (int i = 1; i <= 1000; i++) {
        pthread_mutex_lock(&m);
        while (qlen == QCAP) pthread_cond_wait(&not_full, &m);
        queue[(qhead + qlen++) % QCAP] = i;
        pthread_cond_signal(&not_empty);
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

static void *consumer(void *arg) {
    for (int i = 0; i < 1000; i++) {
        pthread_mutex_lock(&m);
        while (qlen == 0) pthread_cond_wait(&not_empty, &m);
        int v = queue[qhead];
        qhead = (qhead + 1) % QCAP;
        qlen--;
        consumed_sum += v;
        pthread_cond_signal(&not_full);
        pthread_mutex_unlock(&m);
    }
    return NULL;
}

/* Barrier phases: every thread must see every other's write of phase k
 * before anyone starts phase k+1. */
static pthread_barrier_t barrier;
static _Atomic int phase_marks[THREADS];
static _Atomic int barrier_errors, serial_count;

static void *phases(void *arg) {
    int me = (int)(intptr_t)arg;
    for (int k = 1; k <= 50; k++) {
        phase_marks[me] = k;
        int r = pthread_barrier_wait(&barrier);
        if (r == PTHREAD_BARRIER_SERIAL_THREAD) serial_count++;
        else if (r != 0) barrier_errors++;
        for (int j = 0; j < THREADS; j++)
            if (phase_marks[j] < k) barrier_errors++;
        pthread_barrier_wait(&barrier);
    }
    return NULL;
}

/* Broadcast: all waiters wake. */
static int go;
static _Atomic int awake;
static void *wait_go(void *arg) {
    pthread_mutex_lock(&m);
    while (!go) pthread_cond_wait(&cv, &m);
    pthread_mutex_unlock(&m);
    awake++;
    return NULL;
}

static pthread_rwlock_t rw = PTHREAD_RWLOCK_INITIALIZER;
static long rw_value;
static _Atomic int rw_errors;
static void *rw_worker(void *arg) {
    for (int i = 0; i < 2000; i++) {
        if (i % 10 == 0) {
            pthread_rwlock_wrlock(&rw);
            long v = rw_value;
            rw_value = -1;
            sched_yield();
            rw_value = v + 1;
            pthread_rwlock_unlock(&rw);
        } else {
            pthread_rwlock_rdlock(&rw);
            if (rw_value < 0) rw_errors++;
            pthread_rwlock_unlock(&rw);
        }
    }
    return NULL;
}

static sem_t sem;
static void *sem_post_later(void *arg) {
    usleep(20000);
    for (int i = 0; i < 5; i++) sem_post(&sem);
    return NULL;
}

static pthread_key_t key;
static _Atomic int destructor_runs;
static void destructor(void *p) {
    if ((intptr_t)p == 42) destructor_runs++;
}
static void *tsd(void *arg) {
    pthread_setspecific(key, (void *)(intptr_t)42);
    return pthread_getspecific(key);
}

static _Atomic int detached_done;
static void *detached(void *arg) {
    detached_done = 1;
    return NULL;
}

int main(void) {
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) CHECK(pthread_create(&t[i], NULL, count, (void *)(intptr_t)i) == 0);
    for (int i = 0; i < THREADS; i++) {
        void *ret;
        CHECK(pthread_join(t[i], &ret) == 0);
        CHECK((intptr_t)ret == i * 3);
    }
    CHECK(counter == THREADS * 20000L);

    pthread_t p[2], c[2];
    for (int i = 0; i < 2; i++) {
        pthread_create(&p[i], NULL, producer, NULL);
        pthread_create(&c[i], NULL, consumer, NULL);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(p[i], NULL);
        pthread_join(c[i], NULL);
    }
    CHECK(consumed_sum == 2 * 500500L);
    CHECK(qlen == 0);

    CHECK(pthread_barrier_init(&barrier, NULL, THREADS) == 0);
    for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, phases, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    CHECK(barrier_errors == 0);
    CHECK(serial_count == 50);
    pthread_barrier_destroy(&barrier);

    for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, wait_go, NULL);
    usleep(50000);
    pthread_mutex_lock(&m);
    go = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&m);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    CHECK(awake == THREADS);

    /* A timed wait that times out, with the mutex held again after. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 30 * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&m);
    CHECK(pthread_cond_timedwait(&cv, &m, &ts) == ETIMEDOUT);
    CHECK(pthread_mutex_trylock(&m) == EBUSY);
    pthread_mutex_unlock(&m);

    /* Error-checking and recursive mutexes. */
    pthread_mutexattr_t a;
    pthread_mutexattr_init(&a);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_t em;
    pthread_mutex_init(&em, &a);
    CHECK(pthread_mutex_lock(&em) == 0);
    CHECK(pthread_mutex_lock(&em) == EDEADLK);
    CHECK(pthread_mutex_unlock(&em) == 0);
    CHECK(pthread_mutex_unlock(&em) == EPERM);
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_t rm;
    pthread_mutex_init(&rm, &a);
    CHECK(pthread_mutex_lock(&rm) == 0 && pthread_mutex_lock(&rm) == 0);
    CHECK(pthread_mutex_unlock(&rm) == 0 && pthread_mutex_unlock(&rm) == 0);

    /* A priority-inheritance mutex contended by every thread. */
    pthread_mutexattr_settype(&a, PTHREAD_MUTEX_NORMAL);
    pthread_mutexattr_setprotocol(&a, PTHREAD_PRIO_INHERIT);
    pthread_mutex_destroy(&m);
    CHECK(pthread_mutex_init(&m, &a) == 0);
    counter = 0;
    for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, count, NULL);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    CHECK(counter == THREADS * 20000L);

    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, rw_worker, NULL);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    CHECK(rw_errors == 0);
    CHECK(rw_value == 4 * 200);

    CHECK(sem_init(&sem, 0, 0) == 0);
    CHECK_ERR(sem_trywait(&sem), EAGAIN);
    pthread_create(&t[0], NULL, sem_post_later, NULL);
    for (int i = 0; i < 5; i++) CHECK(sem_wait(&sem) == 0);
    pthread_join(t[0], NULL);

    CHECK(pthread_key_create(&key, destructor) == 0);
    void *ret;
    pthread_create(&t[0], NULL, tsd, NULL);
    pthread_join(t[0], &ret);
    CHECK((intptr_t)ret == 42);
    CHECK(destructor_runs == 1);
    CHECK(pthread_getspecific(key) == NULL);

    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    CHECK(pthread_create(&t[0], &attr, detached, NULL) == 0);
    for (int i = 0; i < 1000 && !detached_done; i++) usleep(1000);
    CHECK(detached_done == 1);
    return done();
}
