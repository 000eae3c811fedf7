/* fork while other threads write memory, start and exit: the child's memory
 * must be one snapshot of the parent's, and no write of the parent's may be
 * lost to copy-on-write.
 *
 * Each writer thread owns a row of pages and stamps them in order with a
 * round number: page 0 gets round r, then page 1, ..., then page 0 gets
 * r + 1. Whatever moment a fork copies, the child must see a prefix of that
 * order: rounds never rise from one page to the next, and the first and last
 * page differ by at most one. A writer also checks, before each stamp, that
 * the page still holds the round it wrote last; a write that landed in a
 * frame the child took would show as an older round. A third thread starts
 * and joins short-lived threads all along, so forks meet threads being born
 * and dying. argv[1] sets the number of forks (default 300).
 *
 * Also: a read blocked in one thread while another forks must still deliver
 * its data to the parent's buffer, even after the parent writes elsewhere on
 * the buffer's page (which, were the page shared copy-on-write, would give
 * the parent a new frame and leave the read to fill the child's). The short
 * pause before each fork only makes it likely that the read is in flight;
 * the check holds either way. */
#include <pthread.h>
#include <time.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

#define WRITERS 2
#define PAGES 48
#define PAGE 4096

struct row {
    volatile uint64_t *pages;
    atomic_long lost;
};

static struct row rows[WRITERS];
static atomic_int stop;

static volatile uint64_t *slot(struct row *r, int i) {
    return (volatile uint64_t *)((char *)r->pages + (size_t)i * PAGE);
}

static void *writer(void *arg) {
    struct row *r = arg;
    for (uint64_t round = 1; !atomic_load_explicit(&stop, memory_order_relaxed); round++) {
        for (int i = 0; i < PAGES; i++) {
            if (*slot(r, i) != round - 1) atomic_fetch_add(&r->lost, 1);
            *slot(r, i) = round;
        }
    }
    return NULL;
}

static void *short_lived(void *arg) {
    volatile int x = 0;
    for (int i = 0; i < 1000; i++) x += i;
    return arg;
}

static void *churn(void *arg) {
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        pthread_t t;
        if (pthread_create(&t, NULL, short_lived, NULL) == 0) pthread_join(t, NULL);
    }
    return arg;
}

/* In the child: is each row one moment of its writer's order? */
static int snapshot_consistent(void) {
    for (int w = 0; w < WRITERS; w++) {
        uint64_t first = *slot(&rows[w], 0), prev = first;
        for (int i = 1; i < PAGES; i++) {
            uint64_t v = *slot(&rows[w], i);
            if (v > prev) return 0;
            prev = v;
        }
        if (first - prev > 1) return 0;
    }
    return 1;
}

struct pending_read {
    int fd;
    char *buf;
    ssize_t got;
};

static void *read_one(void *arg) {
    struct pending_read *r = arg;
    r->got = read(r->fd, r->buf, 64);
    return NULL;
}

static void read_across_fork(void) {
    char *page = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(page != MAP_FAILED);
    if (page == MAP_FAILED) return;
    for (int round = 0; round < 10; round++) {
        int p[2];
        CHECK_OK(pipe(p));
        memset(page, 'a', PAGE);
        struct pending_read r = {p[0], page, -1};
        pthread_t t;
        CHECK(pthread_create(&t, NULL, read_one, &r) == 0);
        struct timespec pause = {0, 20 * 1000 * 1000};
        nanosleep(&pause, NULL);
        pid_t pid = fork();
        if (pid == 0) _exit(0);
        page[PAGE / 2] = 'c';
        char data[64];
        memset(data, 'b', sizeof data);
        CHECK(write(p[1], data, sizeof data) == (ssize_t)sizeof data);
        pthread_join(t, NULL);
        CHECK(r.got == 64);
        CHECK(memcmp(page, data, sizeof data) == 0);
        CHECK(page[PAGE / 2] == 'c');
        int st;
        CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
        close(p[0]);
        close(p[1]);
    }
    munmap(page, PAGE);
}

int main(int argc, char **argv) {
    read_across_fork();
    int forks = argc > 1 ? atoi(argv[1]) : 300;
    pthread_t writers[WRITERS], churner;
    for (int w = 0; w < WRITERS; w++) {
        void *p = mmap(NULL, (size_t)PAGES * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
                       -1, 0);
        CHECK(p != MAP_FAILED);
        if (p == MAP_FAILED) return done();
        rows[w].pages = p;
        CHECK(pthread_create(&writers[w], NULL, writer, &rows[w]) == 0);
    }
    CHECK(pthread_create(&churner, NULL, churn, NULL) == 0);
    int torn = 0, failed = 0;
    for (int k = 0; k < forks; k++) {
        pid_t pid = fork();
        if (pid == 0) _exit(snapshot_consistent() ? 0 : 3);
        if (pid < 0) {
            failed++;
            continue;
        }
        int st;
        if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) {
            failed++;
        } else if (WEXITSTATUS(st) == 3) {
            torn++;
        } else if (WEXITSTATUS(st) != 0) {
            failed++;
        }
    }
    atomic_store(&stop, 1);
    for (int w = 0; w < WRITERS; w++) pthread_join(writers[w], NULL);
    pthread_join(churner, NULL);
    CHECK(torn == 0);
    CHECK(failed == 0);
    for (int w = 0; w < WRITERS; w++) CHECK(atomic_load(&rows[w].lost) == 0);
    if (torn || failed) fprintf(stderr, "%d of %d children saw a torn snapshot, %d failed\n", torn, forks, failed);
    for (int w = 0; w < WRITERS; w++)
        if (rows[w].lost) fprintf(stderr, "writer %d lost %ld writes\n", w, (long)rows[w].lost);
    return done();
}
