/* Pipes between two processes (a forked child).
 *   pipe_pingpong    1 byte there and back over two pipes: the round-trip
 *                    latency of a wake-up in each direction
 *   pipe_throughput  64 KiB writes that the child reads and discards; the
 *                    extra figure is MB/s (10^6 bytes). The pipe may still
 *                    hold its last write when the clock stops, an error
 *                    of at most one operation of the many measured. */
#include "bench.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHUNK (64 * 1024)

struct ctx {
    int to_child;   /* parent's write end */
    int from_child; /* parent's read end, -1 if unused */
};

static void write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            die("write to pipe");
        }
        if (w == 0)
            fail("write to pipe wrote nothing");
        buf += w;
        len -= (size_t)w;
    }
}

static void run_pingpong(long n, void *arg) {
    struct ctx *c = arg;
    char byte = 'p';
    for (long i = 0; i < n; i++) {
        write_all(c->to_child, &byte, 1);
        ssize_t r = read(c->from_child, &byte, 1);
        if (r != 1) {
            if (r < 0)
                die("read from pipe");
            fail("child closed the pipe");
        }
    }
}

static void run_throughput(long n, void *arg) {
    struct ctx *c = arg;
    static char buf[CHUNK];
    for (long i = 0; i < n; i++)
        write_all(c->to_child, buf, sizeof buf);
}

/* The child of pipe_pingpong: echo each byte back until end of file. */
static void echo_child(int in, int out) {
    char byte;
    for (;;) {
        ssize_t r = read(in, &byte, 1);
        if (r == 0)
            _exit(0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            die("child: read from pipe");
        }
        write_all(out, &byte, 1);
    }
}

/* The child of pipe_throughput: read and discard until end of file. */
static void sink_child(int in) {
    static char buf[CHUNK];
    for (;;) {
        ssize_t r = read(in, buf, sizeof buf);
        if (r == 0)
            _exit(0);
        if (r < 0 && errno != EINTR)
            die("child: read from pipe");
    }
}

static const struct bench_case cases[] = {
    {.name = "pipe_pingpong", .run = run_pingpong},
    {.name = "pipe_throughput", .run = run_throughput, .unit = "MB/s", .per_op_amount = CHUNK, .divisor = 1e6},
    {0},
};

int main(int argc, char **argv) {
    double seconds;
    const struct bench_case *c = pick_case(argc, argv, cases, &seconds);
    int down[2], up[2] = {-1, -1};
    if (pipe2(down, O_CLOEXEC) != 0)
        die("pipe2");
    if (c->run == run_pingpong && pipe2(up, O_CLOEXEC) != 0)
        die("pipe2");
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        if (close(down[1]) != 0)
            die("child: close");
        if (c->run == run_pingpong) {
            if (close(up[0]) != 0)
                die("child: close");
            echo_child(down[0], up[1]);
        }
        sink_child(down[0]);
    }
    if (close(down[0]) != 0 || (up[1] >= 0 && close(up[1]) != 0))
        die("close");
    struct ctx ctx = {.to_child = down[1], .from_child = up[0]};
    measure(c, &ctx, seconds);
    if (close(down[1]) != 0)
        die("close");
    int status;
    if (waitpid(pid, &status, 0) != pid)
        die("waitpid");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail("child ended with status 0x%x", status);
    return 0;
}
