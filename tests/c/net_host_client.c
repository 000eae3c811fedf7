/* An inet client against a server the test runs on the host (port in
 * argv[1], on 127.0.0.1 and ::1): blocking and non-blocking connects
 * (EINPROGRESS, poll, SO_ERROR), a request and the whole reply, names,
 * TCP and socket options, MSG_PEEK and FIONREAD, half-close, and the
 * errors Linux gives: ECONNREFUSED from a port nothing listens on,
 * EISCONN, ENOTCONN, EAGAIN after SO_RCVTIMEO, EPROTONOSUPPORT, EINVAL,
 * EACCES for a privileged port but to root.
 * UDP between two sockets of its own: sendto/recvfrom, connect, MSG_TRUNC.
 * Run natively and in the sandbox with --network=host: both are the
 * host's network, so every answer is Linux's. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

static struct sockaddr_in v4(int port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

/* Sends `req` and reads the reply to its end. */
static void exchange(int fd, const char *req, char *out, size_t room) {
    size_t len = strlen(req), got = 0;
    CHECK(send(fd, req, len, 0) == (ssize_t)len);
    for (;;) {
        ssize_t n = recv(fd, out + got, room - 1 - got, 0);
        CHECK(n >= 0);
        if (n <= 0)
            break;
        got += n;
    }
    out[got] = 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: net_host_client PORT\n");
        return 2;
    }
    int port = atoi(argv[1]);
    char reply[256];

    /* A blocking connect and a request. */
    int c = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(c >= 0);
    struct sockaddr_in to = v4(port);
    CHECK_OK(connect(c, (struct sockaddr *)&to, sizeof to));
    CHECK_ERR(connect(c, (struct sockaddr *)&to, sizeof to), EISCONN);
    struct sockaddr_in peer, self;
    socklen_t len = sizeof peer;
    CHECK_OK(getpeername(c, (struct sockaddr *)&peer, &len));
    CHECK(len == sizeof peer && peer.sin_port == htons(port) && peer.sin_addr.s_addr == htonl(INADDR_LOOPBACK));
    len = sizeof self;
    CHECK_OK(getsockname(c, (struct sockaddr *)&self, &len));
    CHECK(self.sin_family == AF_INET && self.sin_port != 0);
    int one = 1, v = 0;
    CHECK_OK(setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one));
    len = sizeof v;
    CHECK_OK(getsockopt(c, IPPROTO_TCP, TCP_NODELAY, &v, &len));
    CHECK(v == 1 && len == sizeof v);
    len = sizeof v;
    CHECK_OK(getsockopt(c, SOL_SOCKET, SO_TYPE, &v, &len));
    CHECK(v == SOCK_STREAM);
    len = sizeof v;
    CHECK_OK(getsockopt(c, SOL_SOCKET, SO_PROTOCOL, &v, &len));
    CHECK(v == IPPROTO_TCP);
    exchange(c, "first\n", reply, sizeof reply);
    printf("reply: %s", reply);
    close(c);

    /* Non-blocking: EINPROGRESS, writable once connected, no error. */
    c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int r = connect(c, (struct sockaddr *)&to, sizeof to);
    CHECK(r == 0 || errno == EINPROGRESS);
    struct pollfd p = {c, POLLOUT, 0};
    CHECK(poll(&p, 1, 30000) == 1 && (p.revents & POLLOUT));
    int err = -1;
    len = sizeof err;
    CHECK_OK(getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len));
    CHECK(err == 0);
    CHECK(send(c, "sec", 3, 0) == 3);
    /* Half-close: the server answers once it sees the end. */
    CHECK_OK(shutdown(c, SHUT_WR));
    p.events = POLLIN;
    CHECK(poll(&p, 1, 30000) == 1 && (p.revents & POLLIN));
    char peek[8];
    CHECK(recv(c, peek, 5, MSG_PEEK | MSG_WAITALL) >= 1);
    int avail = 0;
    CHECK_OK(ioctl(c, FIONREAD, &avail));
    CHECK(avail >= 1);
    fcntl(c, F_SETFL, 0);
    size_t got = 0;
    for (;;) {
        ssize_t n = recv(c, reply + got, sizeof reply - 1 - got, 0);
        if (n <= 0)
            break;
        got += n;
    }
    reply[got] = 0;
    printf("half-closed reply: %s", reply);
    close(c);

    /* IPv6 loopback, read with read(2). */
    c = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in6 to6 = {.sin6_family = AF_INET6, .sin6_port = htons(port), .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    CHECK_OK(connect(c, (struct sockaddr *)&to6, sizeof to6));
    CHECK(write(c, "six\n", 4) == 4);
    got = 0;
    for (;;) {
        ssize_t n = read(c, reply + got, sizeof reply - 1 - got);
        if (n <= 0)
            break;
        got += n;
    }
    reply[got] = 0;
    printf("v6 reply: %s", reply);
    close(c);

    /* A port bound but not listening refuses, blocking or not. */
    int idle = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in any = v4(0);
    CHECK_OK(bind(idle, (struct sockaddr *)&any, sizeof any));
    struct sockaddr_in idle_addr;
    len = sizeof idle_addr;
    CHECK_OK(getsockname(idle, (struct sockaddr *)&idle_addr, &len));
    c = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_ERR(connect(c, (struct sockaddr *)&idle_addr, sizeof idle_addr), ECONNREFUSED);
    close(c);
    c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    r = connect(c, (struct sockaddr *)&idle_addr, sizeof idle_addr);
    CHECK(r == -1 && (errno == EINPROGRESS || errno == ECONNREFUSED));
    if (r == -1 && errno == EINPROGRESS) {
        p = (struct pollfd){c, POLLOUT, 0};
        CHECK(poll(&p, 1, 30000) == 1);
        len = sizeof err;
        CHECK_OK(getsockopt(c, SOL_SOCKET, SO_ERROR, &err, &len));
        CHECK(err == ECONNREFUSED);
    }
    close(c);
    /* Unconnected: no peer, and nothing to send to. */
    CHECK_ERR(getpeername(idle, (struct sockaddr *)&peer, &(socklen_t){sizeof peer}), ENOTCONN);
    CHECK_ERR(send(idle, "x", 1, MSG_NOSIGNAL), EPIPE);
    CHECK_OK(listen(idle, 1));
    fcntl(idle, F_SETFL, O_NONBLOCK);
    CHECK_ERR(accept4(idle, NULL, NULL, SOCK_CLOEXEC), EAGAIN);
    close(idle);

    /* What socket(2) refuses. */
    CHECK_ERR(socket(AF_INET, SOCK_DGRAM, IPPROTO_TCP), EPROTONOSUPPORT);
    CHECK_ERR(socket(AF_INET6, SOCK_STREAM, IPPROTO_UDP), EPROTONOSUPPORT);
    CHECK_ERR(socket(AF_INET, SOCK_STREAM, 300), EINVAL);

    /* UDP between two sockets: addresses, MSG_TRUNC, connect, a receive
     * timeout. */
    int a = socket(AF_INET, SOCK_DGRAM, 0), b = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in aa = v4(0), ba = v4(0);
    CHECK_OK(bind(a, (struct sockaddr *)&aa, sizeof aa));
    CHECK_OK(bind(b, (struct sockaddr *)&ba, sizeof ba));
    len = sizeof aa;
    CHECK_OK(getsockname(a, (struct sockaddr *)&aa, &len));
    len = sizeof ba;
    CHECK_OK(getsockname(b, (struct sockaddr *)&ba, &len));
    CHECK(sendto(a, "datagram", 8, 0, (struct sockaddr *)&ba, sizeof ba) == 8);
    char buf[16];
    struct sockaddr_in from;
    len = sizeof from;
    CHECK(recvfrom(b, buf, 4, MSG_TRUNC, (struct sockaddr *)&from, &len) == 8);
    CHECK(len == sizeof from && from.sin_port == aa.sin_port && memcmp(buf, "data", 4) == 0);
    CHECK_OK(connect(b, (struct sockaddr *)&aa, sizeof aa));
    CHECK(send(b, "back", 4, 0) == 4);
    struct msghdr mh = {0};
    struct iovec iov = {buf, sizeof buf};
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_name = &from;
    mh.msg_namelen = sizeof from;
    CHECK(recvmsg(a, &mh, 0) == 4 && mh.msg_namelen == sizeof from && from.sin_port == ba.sin_port);
    CHECK(mh.msg_flags == 0);
    struct timeval tv = {0, 20000};
    CHECK_OK(setsockopt(a, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv));
    struct timeval tv2;
    len = sizeof tv2;
    CHECK_OK(getsockopt(a, SOL_SOCKET, SO_RCVTIMEO, &tv2, &len));
    CHECK(tv2.tv_sec == 0 && tv2.tv_usec == 20000);
    CHECK_ERR(recv(a, buf, sizeof buf, 0), EAGAIN);
    CHECK_ERR(recv(a, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
    close(a);
    close(b);

    /* A privileged port: root binds one, anyone else gets EACCES. */
    if (geteuid() == 0) {
        int priv = socket(AF_INET, SOCK_STREAM, 0), bound = -1;
        for (int port = 900; port < 1000 && bound != 0; port++) {
            struct sockaddr_in pa = v4(port);
            bound = bind(priv, (struct sockaddr *)&pa, sizeof pa);
            CHECK(bound == 0 || errno == EADDRINUSE);
        }
        CHECK(bound == 0);
        close(priv);
        pid_t child = fork();
        if (child == 0) {
            int ok = setgid(65534) == 0 && setuid(65534) == 0;
            int s = socket(AF_INET, SOCK_STREAM, 0);
            struct sockaddr_in pa = v4(999);
            _exit(ok && bind(s, (struct sockaddr *)&pa, sizeof pa) == -1 && errno == EACCES ? 0 : 1);
        }
        int status;
        CHECK(waitpid(child, &status, 0) == child && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    return done();
}
