/* Untouched private memory reads as zeros through one shared frame: no
 * write, by the program or by the kernel on its behalf (a read(2) into the
 * buffer, a copied-out result), may reach that frame, across mprotect and
 * fork. Every fresh mapping, read after all of that, is still zeros. */
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t.h"

#define LEN (1 << 20)

/* True if all of `p` is zero. */
static int zeros(const unsigned char *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

static unsigned char *fresh(int prot) {
    unsigned char *p = mmap(NULL, LEN, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    return p;
}

int main(void) {
    int p[2];
    CHECK_OK(pipe(p));
    static char msg[4000];
    memset(msg, 'x', sizeof msg);
    for (int round = 0; round < 50; round++) {
        /* Read first (the zero frame is mapped), then written by the
         * program. */
        unsigned char *a = fresh(PROT_READ | PROT_WRITE);
        CHECK(zeros(a, LEN));
        memset(a, 0xff, LEN / 2);
        /* Read, then written by the kernel: a pipe read and a result. */
        CHECK(write(p[1], msg, sizeof msg) == sizeof msg);
        CHECK(read(p[0], a + LEN / 2 + 100, sizeof msg) == sizeof msg);
        CHECK_OK(clock_gettime(CLOCK_REALTIME, (struct timespec *)(a + LEN - 4096)));
        /* Read-only, read, then made writable and written. */
        unsigned char *c = fresh(PROT_READ);
        CHECK(zeros(c, LEN));
        CHECK_OK(mprotect(c, LEN, PROT_READ | PROT_WRITE));
        c[100] = 9;
        /* A child reads fresh memory and writes it, and sees its parent's
         * writes; the parent's memory is its own again after. */
        pid_t pid = fork();
        if (pid == 0) {
            unsigned char *b = fresh(PROT_READ | PROT_WRITE);
            int ok = zeros(b, LEN) && a[7] == 0xff && a[LEN / 2 + 100] == 'x';
            b[5] = 1;
            a[8] = 0;
            _exit(ok ? 0 : 1);
        }
        int st;
        CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
        CHECK(a[8] == 0xff && a[LEN / 2 + 100] == 'x' && c[100] == 9);
        unsigned char *d = fresh(PROT_READ);
        CHECK(zeros(d, LEN));
        CHECK_OK(munmap(a, LEN));
        CHECK_OK(munmap(c, LEN));
        CHECK_OK(munmap(d, LEN));
    }
    return done();
}
