/* Pipes: PIPE_BUF atomicity with concurrent writers (processes and
 * threads), EOF once every writer is gone, EPIPE with SIGPIPE default
 * (death), ignored and caught, O_NONBLOCK EAGAIN on both ends, partial
 * non-blocking writes, F_GETPIPE_SZ/F_SETPIPE_SZ, FIONREAD, pipe2 flags,
 * fstat of a pipe, readv/writev, and large transfers intact. */
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

#define WRITERS 4
#define RECORDS 500

/* Each writer writes RECORDS records of PIPE_BUF bytes, each filled with
 * one byte naming the writer and the record. A torn record shows as mixed
 * bytes inside one PIPE_BUF block. */
static void writer(int fd, int id) {
    char buf[PIPE_BUF];
    for (int r = 0; r < RECORDS; r++) {
        memset(buf, 'A' + id, sizeof buf);
        buf[0] = (char)(r & 0x7f);
        buf[1] = (char)(r >> 7);
        if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) _exit(1);
    }
}

static int check_records(int fd, int writers) {
    char buf[PIPE_BUF];
    int next[WRITERS * 2] = {0}, bad = 0, total = 0;
    for (;;) {
        size_t got = 0;
        while (got < sizeof buf) {
            ssize_t n = read(fd, buf + got, sizeof buf - got);
            if (n <= 0) return n == 0 && got == 0 && total == writers * RECORDS && !bad ? 0 : -1;
            got += n;
        }
        int id = buf[2] - 'A';
        if (id < 0 || id >= writers) {
            bad++;
            continue;
        }
        for (size_t i = 2; i < sizeof buf; i++)
            if (buf[i] != 'A' + id) bad++;
        int r = buf[0] | (buf[1] << 7);
        if (r != next[id]++) bad++; /* each writer's records in order */
        total++;
    }
}

static void *thread_writer(void *arg) {
    long *a = arg;
    writer((int)a[0], (int)a[1]);
    return NULL;
}

static volatile sig_atomic_t sigpipes;
static void on_pipe(int sig) { sigpipes++; }

int main(void) {
    int p[2];
    /* Concurrent writer processes. */
    CHECK_OK(pipe(p));
    pid_t kids[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        kids[i] = fork();
        if (kids[i] == 0) {
            close(p[0]);
            writer(p[1], i);
            _exit(0);
        }
    }
    close(p[1]);
    CHECK(check_records(p[0], WRITERS) == 0);
    for (int i = 0; i < WRITERS; i++) {
        int st;
        CHECK(waitpid(kids[i], &st, 0) == kids[i] && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    close(p[0]);
    /* Concurrent writer threads. */
    CHECK_OK(pipe(p));
    pthread_t t[WRITERS];
    long args[WRITERS][2];
    for (int i = 0; i < WRITERS; i++) {
        args[i][0] = p[1];
        args[i][1] = i;
        pthread_create(&t[i], NULL, thread_writer, args[i]);
    }
    pid_t reader = fork();
    if (reader == 0) {
        close(p[1]);
        _exit(check_records(p[0], WRITERS) == 0 ? 0 : 1);
    }
    for (int i = 0; i < WRITERS; i++) pthread_join(t[i], NULL);
    close(p[1]);
    close(p[0]);
    int st;
    CHECK(waitpid(reader, &st, 0) == reader && WIFEXITED(st) && WEXITSTATUS(st) == 0);

    /* EOF only when the last write end closes (a forked copy counts). */
    CHECK_OK(pipe(p));
    int extra = dup(p[1]);
    char c;
    close(p[1]);
    CHECK_OK(fcntl(p[0], F_SETFL, O_NONBLOCK));
    CHECK_ERR(read(p[0], &c, 1), EAGAIN);
    close(extra);
    CHECK(read(p[0], &c, 1) == 0);
    CHECK(read(p[0], &c, 1) == 0);
    close(p[0]);

    /* EPIPE: with SIGPIPE ignored, caught, and by default (death). */
    CHECK_OK(pipe(p));
    close(p[0]);
    signal(SIGPIPE, SIG_IGN);
    CHECK_ERR(write(p[1], "x", 1), EPIPE);
    CHECK(write(p[1], "", 0) == 0); /* an empty write checks nothing */
    signal(SIGPIPE, on_pipe);
    CHECK_ERR(write(p[1], "x", 1), EPIPE);
    CHECK(sigpipes == 1);
    struct iovec iov = {"abc", 3};
    CHECK_ERR(writev(p[1], &iov, 1), EPIPE);
    CHECK(sigpipes == 2);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGPIPE, SIG_DFL);
        (void)!write(p[1], "x", 1);
        _exit(0);
    }
    CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGPIPE);
    /* A blocked SIGPIPE stays pending. */
    sigset_t s, old, pend;
    sigemptyset(&s);
    sigaddset(&s, SIGPIPE);
    sigprocmask(SIG_BLOCK, &s, &old);
    CHECK_ERR(write(p[1], "x", 1), EPIPE);
    sigpending(&pend);
    CHECK(sigismember(&pend, SIGPIPE));
    sigprocmask(SIG_SETMASK, &old, NULL);
    CHECK(sigpipes == 3);
    close(p[1]);

    /* The reader leaves while a large write is blocked on the full pipe:
     * the write returns what went in (a pipe's worth), and SIGPIPE comes
     * all the same; the next write fails with EPIPE. */
    signal(SIGPIPE, on_pipe);
    sigpipes = 0;
    CHECK_OK(pipe(p));
    pid = fork();
    if (pid == 0) {
        /* Leaves once the pipe is full, when the write has put in all it
         * can and waits for room. */
        close(p[1]);
        int queued = 0;
        while (ioctl(p[0], FIONREAD, &queued) == 0 && queued < 65536)
            sched_yield();
        _exit(0);
    }
    close(p[0]);
    static char big[1 << 20];
    ssize_t n = write(p[1], big, sizeof big);
    CHECK(n == 65536);
    CHECK(sigpipes == 1);
    CHECK_ERR(write(p[1], big, 1), EPIPE);
    CHECK(sigpipes == 2);
    waitpid(pid, &st, 0);
    close(p[1]);
    signal(SIGPIPE, SIG_IGN);

    /* Capacity: default, set, rounding, EBUSY below the content, limits. */
    CHECK_OK(pipe2(p, O_NONBLOCK));
    CHECK(fcntl(p[0], F_GETPIPE_SZ) == 65536);
    CHECK(fcntl(p[1], F_GETPIPE_SZ) == 65536);
    CHECK(fcntl(p[1], F_SETPIPE_SZ, 5000) == 8192);
    CHECK(fcntl(p[0], F_GETPIPE_SZ) == 8192);
    CHECK(fcntl(p[1], F_SETPIPE_SZ, 1) == 4096);
    /* Full at the capacity: nonblocking write returns EAGAIN. */
    CHECK(write(p[1], big, 8192) == 4096);
    CHECK_ERR(write(p[1], "x", 1), EAGAIN);
    int avail = -1;
    CHECK_OK(ioctl(p[0], FIONREAD, &avail));
    CHECK(avail == 4096);
    CHECK(fcntl(p[1], F_SETPIPE_SZ, 65536) == 65536);
    /* A write larger than PIPE_BUF is split when space is short; one of
     * at most PIPE_BUF bytes is all or nothing. Space is counted in
     * page-sized slots: bytes read from a slot free nothing until the
     * whole slot is read, and a small write only tops up the last one. */
    CHECK(write(p[1], big, 65536) == 65536 - 4096);
    CHECK(read(p[0], big, 100) == 100);
    CHECK_ERR(write(p[1], big, 100), EAGAIN);
    CHECK(read(p[0], big, 3996) == 3996);
    CHECK(write(p[1], big, 100) == 100);
    CHECK(write(p[1], big, 3996) == 3996); /* fills the same page */
    CHECK_ERR(write(p[1], big, 1), EAGAIN);
    CHECK_OK(ioctl(p[0], FIONREAD, &avail));
    CHECK(avail == 65536);
    CHECK_ERR(fcntl(p[0], F_SETPIPE_SZ, 4096), EBUSY);
    CHECK_ERR(fcntl(p[0], F_SETPIPE_SZ, 1 << 30), EPERM);
    /* Drained: reads in pieces, then EAGAIN. */
    int total = 0;
    while ((n = read(p[0], big, 10000)) > 0) total += n;
    CHECK(n == -1 && errno == EAGAIN && total == 65536);
    close(p[0]);
    close(p[1]);

    /* pipe2 flags; fstat; O_NONBLOCK toggled with F_SETFL. */
    CHECK_OK(pipe2(p, O_CLOEXEC));
    CHECK(fcntl(p[0], F_GETFD) == FD_CLOEXEC && fcntl(p[1], F_GETFD) == FD_CLOEXEC);
    CHECK((fcntl(p[0], F_GETFL) & O_ACCMODE) == O_RDONLY);
    CHECK((fcntl(p[1], F_GETFL) & O_ACCMODE) == O_WRONLY);
    CHECK(!(fcntl(p[0], F_GETFL) & O_NONBLOCK));
    CHECK_ERR(pipe2(p, O_RDWR), EINVAL);
    struct stat sb0, sb1;
    CHECK_OK(fstat(p[0], &sb0));
    CHECK_OK(fstat(p[1], &sb1));
    CHECK(S_ISFIFO(sb0.st_mode) && sb0.st_ino == sb1.st_ino && sb0.st_dev == sb1.st_dev);
    CHECK_ERR(write(p[0], "x", 1), EBADF);
    CHECK_ERR(read(p[1], &c, 1), EBADF);
    CHECK_ERR(lseek(p[0], 0, SEEK_SET), ESPIPE);
    CHECK_ERR(pread(p[0], &c, 1, 0), ESPIPE);
    /* readv/writev gather and scatter. */
    struct iovec w[3] = {{"one", 3}, {"", 0}, {"two!", 4}};
    CHECK(writev(p[1], w, 3) == 7);
    char a1[2], a2[10];
    struct iovec r[2] = {{a1, 2}, {a2, 10}};
    CHECK(readv(p[0], r, 2) == 7);
    CHECK(memcmp(a1, "on", 2) == 0 && memcmp(a2, "etwo!", 5) == 0);
    /* A zero-length read returns 0 at once even when empty. */
    CHECK(read(p[0], &c, 0) == 0);

    /* A large transfer through a child: every byte intact. */
    pid = fork();
    if (pid == 0) {
        close(p[0]);
        static unsigned char out[300000];
        for (size_t i = 0; i < sizeof out; i++) out[i] = (unsigned char)(i * 7 + (i >> 11));
        size_t off = 0;
        while (off < sizeof out) {
            size_t len = 1 + (off % 9000);
            if (len > sizeof out - off) len = sizeof out - off;
            ssize_t k = write(p[1], out + off, len);
            if (k <= 0) _exit(1);
            off += k;
        }
        _exit(0);
    }
    close(p[1]);
    size_t got = 0;
    int mismatch = 0;
    unsigned char in[7777];
    while ((n = read(p[0], in, sizeof in)) > 0) {
        for (ssize_t i = 0; i < n; i++, got++)
            if (in[i] != (unsigned char)(got * 7 + (got >> 11))) mismatch++;
    }
    CHECK(n == 0 && got == 300000 && mismatch == 0);
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    return done();
}
