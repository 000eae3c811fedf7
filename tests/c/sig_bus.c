/* SIGBUS: touching a page of a file mapping that lies wholly past the end
 * of the file, on the first such page and on a later one, each access
 * reported with BUS_ADRERR and its exact address; the partial last page
 * reads as zeros past the end. The file is the program itself. */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "t.h"

static sigjmp_buf env;
static volatile int got_sig, got_code;
static void *volatile got_addr;

static void handler(int sig, siginfo_t *si, void *uc) {
    got_sig = sig;
    got_code = si->si_code;
    got_addr = si->si_addr;
    siglongjmp(env, 1);
}

static volatile char sink;

/* Reads `p` expecting SIGBUS at exactly that address. */
static void expect_bus(volatile char *p) {
    got_sig = got_code = 0;
    got_addr = NULL;
    if (sigsetjmp(env, 1) == 0) {
        sink = *p;
        CHECK(!"no fault");
    } else {
        CHECK(got_sig == SIGBUS);
        CHECK(got_code == BUS_ADRERR);
        CHECK(got_addr == (void *)p);
    }
}

int main(int argc, char **argv) {
    struct sigaction sa = {0};
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO;
    CHECK_OK(sigaction(SIGBUS, &sa, NULL));
    CHECK_OK(sigaction(SIGSEGV, &sa, NULL));
    int fd = open(argv[0], O_RDONLY);
    CHECK(fd >= 0);
    struct stat st;
    CHECK_OK(fstat(fd, &st));
    size_t end = (st.st_size + 4095) & ~4095UL;
    /* Each case in a fresh mapping: nothing faulted in before. */
    for (int pages_past = 0; pages_past < 3; pages_past++) {
        for (int off = 0; off < 4096; off += 2047) {
            char *m = mmap(NULL, end + 3 * 4096, PROT_READ, MAP_PRIVATE, fd, 0);
            CHECK(m != MAP_FAILED);
            expect_bus(m + end + pages_past * 4096 + off);
            CHECK(munmap(m, end + 3 * 4096) == 0);
        }
    }
    /* After reading the file's pages, the first page past the end. */
    char *m = mmap(NULL, end + 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    CHECK(m != MAP_FAILED);
    CHECK(m[0] == 0x7f && m[1] == 'E');
    CHECK(m[st.st_size - 1] == m[st.st_size - 1]);
    if ((size_t)st.st_size < end) CHECK(m[end - 1] == 0);
    else CHECK(1);
    expect_bus(m + end);
    expect_bus(m + end + 4095);
    /* A writable private mapping: a write past the end is SIGBUS too. */
    char *w = mmap(NULL, end + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    got_sig = 0;
    if (sigsetjmp(env, 1) == 0) w[end + 8] = 1;
    CHECK(got_sig == SIGBUS && got_addr == w + end + 8);
    return done();
}
