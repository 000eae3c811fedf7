/* Many threads at once: argv[1] threads (default 10,000) are started, each
 * blocks on a futex until the last one has started, then all are woken,
 * each adds its number to a sum, and all are joined. Sleeping threads must
 * not each need a CPU of their own. */
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "t.h"

static atomic_int gate;
static atomic_int started;
static atomic_long sum;

static long futex(atomic_int *word, int op, int val) {
    return syscall(SYS_futex, word, op | FUTEX_PRIVATE_FLAG, val, NULL, NULL, 0);
}

static void *worker(void *arg) {
    atomic_fetch_add(&started, 1);
    while (atomic_load(&gate) == 0) futex(&gate, FUTEX_WAIT, 0);
    atomic_fetch_add(&sum, (long)arg);
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 10000;
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    int created = 0;
    for (long i = 0; i < n; i++) {
        int e = pthread_create(&threads[i], &attr, worker, (void *)(i + 1));
        if (e != 0) {
            fprintf(stderr, "pthread_create %ld: %s\n", i, strerror(e));
            break;
        }
        created++;
    }
    CHECK(created == n);
    atomic_store(&gate, 1);
    futex(&gate, FUTEX_WAKE, 0x7fffffff);
    for (int i = 0; i < created; i++) pthread_join(threads[i], NULL);
    CHECK(atomic_load(&started) == created);
    CHECK(atomic_load(&sum) == (long)created * (created + 1) / 2);
    printf("%d threads\n", created);
    return done();
}
