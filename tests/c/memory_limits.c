/* What a program can make the kernel hold, and how memory running out
 * looks from inside. Each mode is one way of asking for memory; the test
 * runs them under a memory limit and watches the sandbox's host process
 * while they run. The modes whose outcome does not depend on a limit
 * (maps, zero-read, sparse, exec-args, timers) print the same natively,
 * and the test compares; the others are what only a limit makes happen
 * (oom and fork-bomb would take the host's memory natively), and the test
 * checks their output against Linux's documented behaviour.
 *
 *   pipes        many pipes, each enlarged to 1 MiB and filled
 *   pipe-writers threads writing large buffers into one pipe at once
 *   sockets      many unix socket pairs, their buffers enlarged and filled
 *   maps         mmap until the map count limit, then splits past it
 *   zero-read    reading far more untouched anonymous memory than the limit
 *   sparse       a 100 GiB MAP_NORESERVE mapping with a few pages touched
 *   oom          a child allocating until memory runs out
 *   exec-args    execve with strings past Linux's bounds
 *   timers       timer_create until RLIMIT_SIGPENDING stops it
 *   fork-bomb    processes forking until fork fails */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t.h"

#define PG 4096UL

/* Enough pipes that filling them all takes several times the limit. */
#define PIPES 1500
#define PIPE_SIZE (1 << 20)

/* Raises the soft limit on descriptors to `want`, or as far as the hard
 * limit allows. */
static void room_for_descriptors(rlim_t want) {
    struct rlimit nofile;
    CHECK(getrlimit(RLIMIT_NOFILE, &nofile) == 0);
    nofile.rlim_cur = nofile.rlim_max < want ? nofile.rlim_max : want;
    CHECK(setrlimit(RLIMIT_NOFILE, &nofile) == 0);
}

static void pipes(void) {
    static int fds[PIPES][2];
    static int holds[PIPES];
    static char chunk[65536];
    memset(chunk, 'p', sizeof chunk);
    room_for_descriptors(2 * PIPES + 16);
    int made = 0, enlarged = 0, full = 0, refused = 0;
    for (int i = 0; i < PIPES; i++) {
        if (pipe2(fds[i], O_NONBLOCK) != 0) {
            CHECK(errno == EMFILE || errno == ENFILE);
            break;
        }
        made++;
        if (fcntl(fds[i][1], F_SETPIPE_SZ, PIPE_SIZE) == PIPE_SIZE)
            enlarged++;
        /* Fill it: the last write fails with EAGAIN (full) or ENOMEM (no
         * memory left for pipe buffers). */
        for (;;) {
            ssize_t n = write(fds[i][1], chunk, sizeof chunk);
            if (n > 0) {
                holds[i] = 1;
                continue;
            }
            if (n < 0 && errno == EAGAIN)
                full++;
            else if (n < 0 && errno == ENOMEM)
                refused++;
            else
                CHECK(!"pipe write failed otherwise");
            break;
        }
    }
    CHECK(made > 0);
    CHECK(enlarged > 0);
    CHECK(full + refused == made);
    /* What went in comes out, and a drained pipe takes data again. */
    char buf[PG];
    int bad_reads = 0;
    for (int i = 0; i < made; i++) {
        if (!holds[i])
            continue;
        ssize_t n = read(fds[i][0], buf, sizeof buf);
        bad_reads += !(n == (ssize_t)sizeof buf && buf[0] == 'p' && buf[PG - 1] == 'p');
    }
    CHECK(bad_reads == 0);
    /* A closed pipe's buffers are memory again: a pipe refused before
     * takes data. */
    close(fds[0][0]);
    close(fds[0][1]);
    CHECK(write(fds[made - 1][1], chunk, 16) == 16);
    for (int i = 1; i < made; i++) {
        close(fds[i][0]);
        close(fds[i][1]);
    }
    if (refused)
        printf("writes were refused for want of memory\n");
    printf("pipes filled\n");
}

/* Enough socket pairs that filling both directions of them all takes
 * several times the limit. */
#define PAIRS 1500

/* Sends `chunk` on `fd` until the send buffer is full (EAGAIN) or the
 * memory is (ENOBUFS, as Linux's sock_alloc_send_pskb fails); returns
 * which errno ended it, and counts the messages sent in *sent. */
static int fill_socket(int fd, const char *chunk, size_t len, int *sent) {
    for (;;) {
        ssize_t n = send(fd, chunk, len, MSG_DONTWAIT);
        if (n > 0) {
            ++*sent;
            continue;
        }
        return n < 0 ? errno : 0;
    }
}

static void sockets(void) {
    static int fds[PAIRS][2];
    static int sent[PAIRS][2];
    static char chunk[65000];
    memset(chunk, 's', sizeof chunk);
    room_for_descriptors(2 * PAIRS + 16);
    int made = 0, full = 0, refused = 0, bad_setsockopt = 0;
    for (int i = 0; i < PAIRS; i++) {
        /* Stream and datagram pairs in turn. */
        int type = i % 2 ? SOCK_DGRAM : SOCK_STREAM;
        if (socketpair(AF_UNIX, type, 0, fds[i]) != 0) {
            CHECK(errno == EMFILE || errno == ENFILE);
            break;
        }
        made++;
        for (int end = 0; end < 2; end++) {
            int big = 1 << 20;
            bad_setsockopt += setsockopt(fds[i][end], SOL_SOCKET, SO_SNDBUF, &big, sizeof big) != 0;
            int e = fill_socket(fds[i][end], chunk, sizeof chunk, &sent[i][end]);
            full += e == EAGAIN;
            refused += e == ENOBUFS;
        }
    }
    CHECK(made > 0);
    CHECK(bad_setsockopt == 0);
    CHECK(full + refused == 2 * made);
    /* What went in comes out. */
    char buf[PG];
    int bad_reads = 0;
    for (int i = 0; i < made; i++) {
        for (int end = 0; end < 2; end++) {
            if (!sent[i][end])
                continue;
            ssize_t n = recv(fds[i][1 - end], buf, sizeof buf, MSG_DONTWAIT);
            bad_reads += !(n == (ssize_t)sizeof buf && buf[0] == 's' && buf[PG - 1] == 's');
        }
    }
    CHECK(bad_reads == 0);
    /* A closed pair's buffers are memory again: the last pair, refused
     * before if any was, takes data. */
    for (int i = 0; i < made - 1 && i < 8; i++) {
        close(fds[i][0]);
        close(fds[i][1]);
    }
    CHECK(send(fds[made - 1][0], chunk, 16, MSG_DONTWAIT) == 16);
    for (int i = 8; i < made; i++) {
        close(fds[i][0]);
        close(fds[i][1]);
    }
    if (refused)
        printf("sends were refused for want of memory\n");
    printf("socket pairs filled\n");
}

#define WRITERS 10
#define WRITE_SIZE (180UL << 20)

static int writers_pipe[2];

static void *writer(void *arg) {
    (void)arg;
    /* Never touched: its pages read as zero without using memory. */
    char *buf = mmap(NULL, WRITE_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED)
        return (void *)1;
    size_t done = 0;
    while (done < WRITE_SIZE) {
        ssize_t n = write(writers_pipe[1], buf + done, WRITE_SIZE - done);
        if (n <= 0)
            return (void *)2;
        done += n;
    }
    munmap(buf, WRITE_SIZE);
    return NULL;
}

static void pipe_writers(void) {
    CHECK(pipe(writers_pipe) == 0);
    CHECK(fcntl(writers_pipe[1], F_SETPIPE_SZ, PIPE_SIZE) == PIPE_SIZE);
    pthread_t t[WRITERS];
    for (int i = 0; i < WRITERS; i++)
        CHECK(pthread_create(&t[i], NULL, writer, NULL) == 0);
    static char buf[PIPE_SIZE];
    unsigned long total = 0, nonzero = 0;
    while (total < WRITERS * WRITE_SIZE) {
        ssize_t n = read(writers_pipe[0], buf, sizeof buf);
        if (n <= 0) {
            CHECK(!"pipe read failed");
            break;
        }
        for (ssize_t i = 0; i < n; i += 512)
            nonzero += buf[i] != 0;
        total += n;
    }
    for (int i = 0; i < WRITERS; i++) {
        void *r;
        CHECK(pthread_join(t[i], &r) == 0 && r == NULL);
    }
    CHECK(nonzero == 0);
    printf("%d writers moved %lu MiB\n", WRITERS, total >> 20);
}

/* Mappings of the process, as /proc/self/maps lists them (the vsyscall
 * page is no mapping of the process's own, and /proc lists it). */
static long count_maps(void) {
    /* No stdio: at the limit, its buffers could not be allocated. The
     * whole listing at once, so no line is split between reads. */
    static char buf[32 << 20];
    int fd = open("/proc/self/maps", O_RDONLY);
    if (fd < 0)
        return -1;
    size_t len = 0;
    ssize_t got;
    while (len < sizeof buf - 1 && (got = read(fd, buf + len, sizeof buf - 1 - len)) > 0)
        len += got;
    close(fd);
    buf[len] = 0;
    long n = 0;
    for (size_t i = 0; i < len; i++)
        n += buf[i] == '\n';
    if (strstr(buf, "[vsyscall]"))
        n--;
    return n;
}

static void maps(void) {
    /* Alternating protections, so neighbours never merge: each call makes
     * one more mapping until the limit (vm.max_map_count, 65530) stops it. */
    long calls = 0;
    char *last = NULL;
    for (; calls < 2000000; calls++) {
        char *p = mmap(NULL, PG, (calls & 1) ? PROT_READ : PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            CHECK(errno == ENOMEM);
            break;
        }
        last = p;
    }
    CHECK(calls < 2000000);
    long at_limit = count_maps();
    printf("mmap stopped with ENOMEM at %ld mappings\n", at_limit);
    /* Removing a mapping's middle, or changing its protection, needs one
     * more mapping: refused at the limit. */
    char *three;
    /* Make room for a three-page mapping, then fill the count again. */
    CHECK(munmap(last, PG) == 0);
    three = mmap(NULL, 3 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(three != MAP_FAILED);
    for (int i = 0;; i++) {
        /* Below `three`, apart from it and from each other. */
        if (mmap(NULL, PG, (i & 1) ? PROT_NONE : PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED)
            break;
    }
    long full = count_maps();
    CHECK_ERR(munmap(three + PG, PG), ENOMEM);
    CHECK_ERR(mprotect(three + PG, PG, PROT_READ), ENOMEM);
    CHECK_ERR(mprotect(three, PG, PROT_READ), ENOMEM);
    /* Unmapping a whole mapping or an end of one needs nothing. */
    CHECK(munmap(three + 2 * PG, PG) == 0);
    CHECK(munmap(three, 2 * PG) == 0);
    CHECK(count_maps() == full - 1);
    printf("splits past the limit fail with ENOMEM\n");
}

#define ZERO_READ (8UL << 30)

static void zero_read(void) {
    unsigned char *p = mmap(NULL, ZERO_READ, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CHECK(p != MAP_FAILED);
    if (p == MAP_FAILED)
        return;
    unsigned long sum = 0;
    for (unsigned long off = 0; off < ZERO_READ; off += PG)
        sum += p[off] + p[off + PG - 1];
    CHECK(sum == 0);
    /* Writing after reading gives the page a frame of its own; its
     * neighbours still read as zero. */
    p[5 * PG] = 7;
    CHECK(p[5 * PG] == 7 && p[4 * PG] == 0 && p[6 * PG] == 0 && p[5 * PG + 1] == 0);
    /* After fork, both sides still read zero and write privately. (Most
     * of the mapping goes first: the child would copy its page tables.) */
    CHECK(munmap(p + 64 * PG, ZERO_READ - 64 * PG) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        p[6 * PG] = 9;
        _exit(p[6 * PG] == 9 && p[5 * PG] == 7 && p[7 * PG] == 0 ? 0 : 1);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(p[6 * PG] == 0 && p[5 * PG] == 7);
    CHECK(munmap(p, 64 * PG) == 0);
    printf("read %lu GiB of untouched memory\n", ZERO_READ >> 30);
}

#define SPARSE (100UL << 30)

static void sparse(void) {
    unsigned char *p = mmap(NULL, SPARSE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CHECK(p != MAP_FAILED);
    if (p == MAP_FAILED)
        return;
    for (unsigned long i = 0; i < 16; i++)
        p[i * (SPARSE / 16) + i] = (unsigned char)(i + 1);
    for (unsigned long i = 0; i < 16; i++)
        CHECK(p[i * (SPARSE / 16) + i] == (unsigned char)(i + 1));
    CHECK(p[SPARSE - 1] == 0);
    CHECK(munmap(p, SPARSE) == 0);
    printf("touched 16 pages of 100 GiB\n");
}

/* Allocates and writes memory until something stops it. Under a memory
 * limit that is the OOM killer's SIGKILL; without one the child gives up
 * after `cap` bytes. */
static void oom(unsigned long cap) {
    pid_t pid = fork();
    if (pid == 0) {
        unsigned long total = 0;
        while (total < cap) {
            char *p = mmap(NULL, 16UL << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED)
                _exit(2);
            for (unsigned long off = 0; off < (16UL << 20); off += PG)
                p[off] = 1;
            total += 16UL << 20;
        }
        _exit(0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    if (WIFSIGNALED(st))
        printf("allocating child killed by signal %d\n", WTERMSIG(st));
    else
        printf("allocating child exited with %d\n", WEXITSTATUS(st));
}

/* A tree of processes far larger than memory can hold: none exits before
 * the whole tree is done forking, so the number alive only grows until
 * memory runs out. Then a fork fails (ENOMEM or EAGAIN, as Linux's fork
 * fails when it cannot get memory), or a process that cannot get a page it
 * touches is killed by the OOM killer (SIGKILL). Each child reports to its
 * parent once its subtree is done forking: 'F' if a fork in it failed or a
 * process of it was killed so, 'N' if none, 'X' if something failed
 * otherwise; then all wait for the release pipe to reach end of file.
 * Only a process's own report pipe stays open in it, so a killed one's
 * parent sees end of file at once. */
#define BOMB_FANOUT 4
#define BOMB_DEPTH 8 /* 4^8 leaves: beyond what 256 MiB can hold */

static int release_rd = -1, release_wr = -1;
/* The write end of this process's report pipe. */
static int my_report = -1;

static char worse(char a, char b) {
    if (a == 'X' || b == 'X')
        return 'X';
    return a == 'F' || b == 'F' ? 'F' : 'N';
}

/* Reaps a child of the tree: 0 if it exited well, 'F' if it or one below
 * it was killed for want of memory, 'X' otherwise. */
static char reap(pid_t pid) {
    int st;
    if (waitpid(pid, &st, 0) != pid)
        return 'X';
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)
        return 'F';
    if (WIFEXITED(st) && WEXITSTATUS(st) <= 1)
        return WEXITSTATUS(st) ? 'F' : 0;
    return 'X';
}

static char grow(int depth, pid_t *kids, int *nkids) {
    int reports[BOMB_FANOUT];
    char report = 'N';
    *nkids = 0;
    for (int i = 0; depth > 0 && i < BOMB_FANOUT; i++) {
        int p[2];
        if (pipe(p) != 0) {
            report = worse(report, errno == ENOMEM ? 'F' : 'X');
            break;
        }
        pid_t pid = fork();
        if (pid == 0) {
            close(p[0]);
            if (release_wr >= 0) {
                close(release_wr);
                release_wr = -1;
            }
            if (my_report >= 0)
                close(my_report);
            my_report = p[1];
            for (int k = 0; k < *nkids; k++)
                close(reports[k]);
            pid_t mine[BOMB_FANOUT];
            int nmine;
            char r = grow(depth - 1, mine, &nmine);
            /* Even a pipe's buffer may find no memory left (ENOMEM): the
             * parent then sees end of file, and the exit status says why. */
            int reported = write(p[1], &r, 1) == 1;
            if (!reported && errno != ENOMEM)
                _exit(3);
            if (!reported)
                r = 'F';
            close(p[1]);
            char c;
            while (read(release_rd, &c, 1) > 0) {
            }
            char worst = r;
            for (int k = 0; k < nmine; k++) {
                char c = reap(mine[k]);
                if (c)
                    worst = worse(worst, c);
            }
            _exit(worst == 'X' ? 3 : worst == 'F' ? 1 : 0);
        }
        close(p[1]);
        if (pid < 0) {
            close(p[0]);
            report = worse(report, errno == ENOMEM || errno == EAGAIN ? 'F' : 'X');
            break;
        }
        kids[*nkids] = pid;
        reports[(*nkids)++] = p[0];
    }
    for (int k = 0; k < *nkids; k++) {
        char r;
        if (read(reports[k], &r, 1) != 1)
            r = 'K'; /* killed before reporting: seen when reaped */
        else
            report = worse(report, r);
        close(reports[k]);
    }
    return report;
}


static void fork_bomb(void) {
    int rel[2];
    CHECK(pipe(rel) == 0);
    release_rd = rel[0];
    release_wr = rel[1];
    pid_t kids[BOMB_FANOUT];
    int nkids;
    char r = grow(BOMB_DEPTH, kids, &nkids);
    close(release_wr);
    release_wr = -1;
    for (int k = 0; k < nkids; k++) {
        char c = reap(kids[k]);
        if (c)
            r = worse(r, c);
    }
    CHECK(r == 'F');
    /* Everything is back: fork works again. */
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    int st;
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st));
    printf("the tree ran out of memory; every process ended\n");
}

/* execve's strings are bounded as Linux bounds them: one string at most
 * MAX_ARG_STRLEN (128 KiB with its NUL), all of them with their pointers
 * a quarter of the stack limit; past either, E2BIG. Passing one string
 * many times counts it each time. */
static void exec_args(const char *self) {
    static char big[128 * 1024 + 1];
    memset(big, 'a', sizeof big - 1);
    char *too_long[] = {(char *)self, big, NULL};
    CHECK_ERR(execv(self, too_long), E2BIG);
    big[128 * 1024 - 1] = 0; /* now just fits */
    static char *repeated[64];
    repeated[0] = (char *)self;
    for (int i = 1; i < 63; i++)
        repeated[i] = big;
    CHECK_ERR(execv(self, repeated), E2BIG);
    pid_t pid = fork();
    if (pid == 0) {
        char *fits[] = {(char *)self, "exit-if-args", big, NULL};
        execv(self, fits);
        _exit(127);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    printf("execve strings bounded\n");
}

/* POSIX timers are bounded by RLIMIT_SIGPENDING, each holding a signal
 * ready to send: past it, timer_create fails with EAGAIN. */
static void timers(void) {
    struct rlimit r = {1000, 1000};
    CHECK(setrlimit(RLIMIT_SIGPENDING, &r) == 0);
    int made = 0;
    for (; made < 100000; made++) {
        timer_t t;
        struct sigevent ev = {.sigev_notify = SIGEV_NONE};
        if (timer_create(CLOCK_MONOTONIC, &ev, &t) != 0) {
            CHECK(errno == EAGAIN);
            break;
        }
    }
    CHECK(made > 0 && made <= 1000);
    printf("timer_create stopped with EAGAIN\n");
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "pipes"))
        pipes();
    else if (!strcmp(mode, "sockets"))
        sockets();
    else if (!strcmp(mode, "pipe-writers"))
        pipe_writers();
    else if (!strcmp(mode, "maps"))
        maps();
    else if (!strcmp(mode, "zero-read"))
        zero_read();
    else if (!strcmp(mode, "sparse"))
        sparse();
    else if (!strcmp(mode, "oom"))
        oom(argc > 2 ? strtoul(argv[2], NULL, 0) : ~0UL);
    else if (!strcmp(mode, "timers"))
        timers();
    else if (!strcmp(mode, "exec-args"))
        exec_args(argv[0]);
    else if (!strcmp(mode, "exit-if-args"))
        return argc == 3 && strlen(argv[2]) == 128 * 1024 - 1 ? 0 : 1;
    else if (!strcmp(mode, "fork-bomb"))
        fork_bomb();
    else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    return done();
}
