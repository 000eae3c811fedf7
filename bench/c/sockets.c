/* Sockets between two processes (a forked child).
 *   unix_pingpong        1 byte there and back over an AF_UNIX stream
 *                        socketpair: the round-trip latency of a wake-up in
 *                        each direction
 *   unix_throughput      64 KiB writes into a socketpair that the child
 *                        reads and discards; the extra figure is MB/s
 *   tcp_loopback_rr      1-byte request and response over a TCP connection
 *                        on 127.0.0.1 (TCP_NODELAY on both ends)
 *   tcp_loopback_stream  64 KiB writes into a TCP connection on 127.0.0.1
 *                        that the child reads and discards; the extra
 *                        figure is MB/s
 * In the throughput cases the socket may still hold data when the clock
 * stops, an error of a few operations of the many measured. */
#include "bench.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHUNK (64 * 1024)

static void write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            die("write to socket");
        }
        if (w == 0)
            fail("write to socket wrote nothing");
        buf += w;
        len -= (size_t)w;
    }
}

static void run_pingpong(long n, void *arg) {
    int fd = *(int *)arg;
    char byte = 'p';
    for (long i = 0; i < n; i++) {
        write_all(fd, &byte, 1);
        ssize_t r = read(fd, &byte, 1);
        if (r != 1) {
            if (r < 0)
                die("read from socket");
            fail("child closed the socket");
        }
        if (byte != 'p')
            fail("child echoed 0x%02x, not 'p'", (unsigned char)byte);
    }
}

static void run_stream(long n, void *arg) {
    int fd = *(int *)arg;
    static char buf[CHUNK];
    for (long i = 0; i < n; i++)
        write_all(fd, buf, sizeof buf);
}

/* The child of the ping-pong cases: echo each byte back until end of file. */
static void echo_child(int fd) {
    char byte;
    for (;;) {
        ssize_t r = read(fd, &byte, 1);
        if (r == 0)
            _exit(0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            die("child: read from socket");
        }
        write_all(fd, &byte, 1);
    }
}

/* The child of the stream cases: read and discard until end of file. */
static void sink_child(int fd) {
    static char buf[CHUNK];
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r == 0)
            _exit(0);
        if (r < 0 && errno != EINTR)
            die("child: read from socket");
    }
}

static void set_nodelay(int fd) {
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0)
        die("setsockopt(TCP_NODELAY)");
}

/* A TCP connection over loopback: returns the parent's end in *mine and
 * the child's in *theirs. The listener is bound to port 0, so runs never
 * collide on a port. */
static void tcp_pair(int *mine, int *theirs) {
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0)
        die("socket(AF_INET, SOCK_STREAM)");
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof addr;
    if (bind(lfd, (struct sockaddr *)&addr, sizeof addr) != 0)
        die("bind(127.0.0.1:0)");
    if (listen(lfd, 1) != 0)
        die("listen");
    if (getsockname(lfd, (struct sockaddr *)&addr, &len) != 0)
        die("getsockname");
    int cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (cfd < 0)
        die("socket(AF_INET, SOCK_STREAM)");
    if (connect(cfd, (struct sockaddr *)&addr, sizeof addr) != 0)
        die("connect(127.0.0.1:%d)", ntohs(addr.sin_port));
    int afd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (afd < 0)
        die("accept4");
    if (close(lfd) != 0)
        die("close");
    set_nodelay(cfd);
    set_nodelay(afd);
    *mine = cfd;
    *theirs = afd;
}

static const struct bench_case cases[] = {
    {.name = "unix_pingpong", .run = run_pingpong},
    {.name = "unix_throughput", .run = run_stream, .unit = "MB/s", .per_op_amount = CHUNK, .divisor = 1e6},
    {.name = "tcp_loopback_rr", .run = run_pingpong},
    {.name = "tcp_loopback_stream", .run = run_stream, .unit = "MB/s", .per_op_amount = CHUNK, .divisor = 1e6},
    {0},
};

int main(int argc, char **argv) {
    double seconds;
    const struct bench_case *c = pick_case(argc, argv, cases, &seconds);
    int mine, theirs;
    if (strncmp(c->name, "unix_", 5) == 0) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
            die("socketpair(AF_UNIX, SOCK_STREAM)");
        mine = sv[0];
        theirs = sv[1];
    } else {
        tcp_pair(&mine, &theirs);
    }
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        if (close(mine) != 0)
            die("child: close");
        if (c->run == run_pingpong)
            echo_child(theirs);
        sink_child(theirs);
    }
    if (close(theirs) != 0)
        die("close");
    measure(c, &mine, seconds);
    if (close(mine) != 0)
        die("close");
    int status;
    if (waitpid(pid, &status, 0) != pid)
        die("waitpid");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail("child ended with status 0x%x", status);
    return 0;
}
