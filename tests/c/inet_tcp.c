/* TCP over loopback, IPv4 and IPv6: connection set-up and the accept
 * queue, data both ways, half-close, resets, non-blocking connect, poll
 * readiness, port conflicts and TCP's options. Ports come from bind(0), so
 * runs never collide; every expectation is what Linux's loopback shows. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <linux/sockios.h>
#include <unistd.h>

#include "t.h"

static struct sockaddr_in v4(uint32_t addr, int port) {
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(addr);
    return a;
}

static int port_of(int fd) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0) return -1;
    if (ss.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/* A listener on 127.0.0.1 with a port of its own. */
static int listener(int backlog) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = v4(INADDR_LOOPBACK, 0);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, backlog) < 0) return -1;
    return fd;
}

static int connect_to(int port, int flags) {
    int fd = socket(AF_INET, SOCK_STREAM | flags, 0);
    struct sockaddr_in a = v4(INADDR_LOOPBACK, port);
    int r = connect(fd, (struct sockaddr *)&a, sizeof a);
    if (r < 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

/* A connected pair: *c the client, *s the accepted side. */
static void pair(int l, int *c, int *s) {
    *c = connect_to(port_of(l), 0);
    *s = accept(l, NULL, NULL);
    CHECK(*c >= 0 && *s >= 0);
}

static short revents(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLOUT | POLLRDHUP | POLLPRI};
    if (poll(&p, 1, 0) < 0) return -1;
    return p.revents;
}

static int sockopt_int(int fd, int level, int name) {
    int v = -12345;
    socklen_t len = sizeof v;
    if (getsockopt(fd, level, name, &v, &len) < 0) return -1000 - errno;
    return v;
}

static int tcp_state(int fd) {
    struct tcp_info info;
    socklen_t len = sizeof info;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) < 0) return -1;
    return info.tcpi_state;
}

static void test_connect_accept(void) {
    int l = listener(8);
    CHECK(l >= 0);
    int port = port_of(l);
    CHECK(port >= 32768 && port <= 60999);
    CHECK(sockopt_int(l, SOL_SOCKET, SO_ACCEPTCONN) == 1);
    CHECK(tcp_state(l) == TCP_LISTEN);
    CHECK(revents(l) == 0);

    int c = connect_to(port, 0);
    CHECK(c >= 0);
    CHECK(revents(l) == POLLIN);
    struct sockaddr_in from;
    socklen_t len = sizeof from;
    int s = accept(l, (struct sockaddr *)&from, &len);
    CHECK(s >= 0);
    CHECK(len == sizeof from && from.sin_family == AF_INET);
    CHECK(from.sin_addr.s_addr == htonl(INADDR_LOOPBACK));
    CHECK(ntohs(from.sin_port) == port_of(c));
    struct sockaddr_in a;
    len = sizeof a;
    CHECK_OK(getpeername(c, (struct sockaddr *)&a, &len));
    CHECK(ntohs(a.sin_port) == port && a.sin_addr.s_addr == htonl(INADDR_LOOPBACK));
    len = sizeof a;
    CHECK_OK(getsockname(c, (struct sockaddr *)&a, &len));
    CHECK(a.sin_addr.s_addr == htonl(INADDR_LOOPBACK));
    CHECK(port_of(c) >= 32768 && port_of(c) <= 60999);
    CHECK(port_of(s) == port);
    CHECK(tcp_state(c) == TCP_ESTABLISHED && tcp_state(s) == TCP_ESTABLISHED);
    CHECK(sockopt_int(s, SOL_SOCKET, SO_ACCEPTCONN) == 0);
    CHECK(revents(c) == (POLLOUT));

    /* Data both ways. */
    CHECK(write(c, "hello", 5) == 5);
    CHECK(revents(s) == (POLLIN | POLLOUT));
    int avail = -1;
    CHECK_OK(ioctl(s, FIONREAD, &avail));
    CHECK(avail == 5);
    CHECK_OK(ioctl(s, SIOCINQ, &avail));
    CHECK(avail == 5);
    CHECK_OK(ioctl(c, SIOCOUTQ, &avail));
    char buf[64];
    CHECK(recv(s, buf, 3, MSG_PEEK) == 3 && memcmp(buf, "hel", 3) == 0);
    CHECK(recv(s, buf, sizeof buf, 0) == 5 && memcmp(buf, "hello", 5) == 0);
    CHECK_ERR(recv(s, buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
    CHECK(send(s, "back", 4, 0) == 4);
    CHECK(read(c, buf, sizeof buf) == 4 && memcmp(buf, "back", 4) == 0);

    /* Urgent data: the last byte of a MSG_OOB send. */
    CHECK_ERR(recv(s, buf, 1, MSG_OOB), EINVAL);
    CHECK(send(c, "xy", 2, MSG_OOB) == 2);
    CHECK(revents(s) & POLLPRI);
    CHECK(recv(s, buf, 1, MSG_OOB) == 1 && buf[0] == 'y');
    CHECK(recv(s, buf, sizeof buf, 0) == 1 && buf[0] == 'x');

    /* The queue is taken in order of arrival. */
    int c1 = connect_to(port, 0), c2 = connect_to(port, 0);
    int s1 = accept(l, (struct sockaddr *)&from, &(socklen_t){sizeof from});
    CHECK(ntohs(from.sin_port) == port_of(c1));
    int s2 = accept(l, (struct sockaddr *)&from, &(socklen_t){sizeof from});
    CHECK(ntohs(from.sin_port) == port_of(c2));
    close(s1), close(s2), close(c1), close(c2);

    /* Wrong calls on each kind of socket. */
    CHECK_ERR(connect(c, (struct sockaddr *)&a, sizeof a), EISCONN);
    CHECK_ERR(listen(c, 1), EINVAL);
    CHECK_ERR(accept(c, NULL, NULL), EINVAL);
    CHECK_ERR(recv(l, buf, 1, 0), ENOTCONN);
    CHECK_ERR(send(l, "x", 1, MSG_NOSIGNAL), EPIPE);
    CHECK_OK(shutdown(l, SHUT_WR));
    int fresh = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_ERR(send(fresh, "x", 1, MSG_NOSIGNAL), EPIPE);
    CHECK_ERR(recv(fresh, buf, 1, 0), ENOTCONN);
    CHECK_ERR(getpeername(fresh, (struct sockaddr *)&a, &len), ENOTCONN);
    CHECK_ERR(shutdown(fresh, SHUT_RD), ENOTCONN);
    CHECK_ERR(accept(fresh, NULL, NULL), EINVAL);
    CHECK(tcp_state(fresh) == TCP_CLOSE);
    len = sizeof a;
    CHECK_OK(getsockname(fresh, (struct sockaddr *)&a, &len));
    CHECK(a.sin_port == 0 && a.sin_addr.s_addr == 0);
    close(fresh);
    fresh = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(revents(fresh) == (POLLOUT | POLLHUP));
    /* listen binds a port of its own. */
    CHECK_OK(listen(fresh, 1));
    CHECK(port_of(fresh) >= 32768);
    close(fresh);
    close(c), close(s), close(l);
}

static void test_half_close(void) {
    int l = listener(8), c, s;
    char buf[16];
    pair(l, &c, &s);
    CHECK(write(c, "ab", 2) == 2);
    CHECK_OK(shutdown(c, SHUT_WR));
    CHECK(revents(c) == POLLOUT);
    CHECK(revents(s) == (POLLIN | POLLOUT | POLLRDHUP));
    CHECK_ERR(send(c, "x", 1, MSG_NOSIGNAL), EPIPE);
    CHECK(read(s, buf, sizeof buf) == 2);
    CHECK(read(s, buf, sizeof buf) == 0);
    CHECK(tcp_state(s) == TCP_CLOSE_WAIT);
    /* The other way still works. */
    CHECK(write(s, "cd", 2) == 2);
    CHECK(read(c, buf, sizeof buf) == 2 && memcmp(buf, "cd", 2) == 0);
    CHECK_OK(shutdown(s, SHUT_WR));
    CHECK(revents(s) == (POLLIN | POLLOUT | POLLHUP | POLLRDHUP));
    CHECK(revents(c) == (POLLIN | POLLOUT | POLLHUP | POLLRDHUP));
    CHECK(read(c, buf, sizeof buf) == 0);
    CHECK(tcp_state(s) == TCP_CLOSE);
    CHECK_ERR(shutdown(s, SHUT_RDWR), ENOTCONN);
    close(c), close(s);

    /* SHUT_RD: what is queued, and what comes later, is still read. */
    pair(l, &c, &s);
    CHECK_OK(shutdown(c, SHUT_RD));
    CHECK(revents(c) == (POLLIN | POLLOUT | POLLRDHUP));
    CHECK(read(c, buf, sizeof buf) == 0);
    CHECK(write(s, "q", 1) == 1);
    CHECK(read(c, buf, sizeof buf) == 1 && buf[0] == 'q');
    close(c), close(s);

    /* epoll sees the peer's shutdown as EPOLLRDHUP. */
    pair(l, &c, &s);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.fd = s};
    CHECK_OK(epoll_ctl(ep, EPOLL_CTL_ADD, s, &ev));
    CHECK(epoll_wait(ep, &ev, 1, 0) == 0);
    CHECK_OK(shutdown(c, SHUT_WR));
    CHECK(epoll_wait(ep, &ev, 1, -1) == 1 && ev.events == (EPOLLIN | EPOLLRDHUP));
    close(ep), close(c), close(s), close(l);
}

static void test_resets(void) {
    int l = listener(8), c, s;
    char buf[16];

    /* The peer closes with nothing unread: FIN. Data already sent is
     * read, then end of file; the first write draws a reset, the next
     * fails. */
    pair(l, &c, &s);
    CHECK(write(s, "data", 4) == 4);
    close(s);
    CHECK(revents(c) == (POLLIN | POLLOUT | POLLRDHUP));
    CHECK(tcp_state(c) == TCP_CLOSE_WAIT);
    CHECK(read(c, buf, sizeof buf) == 4);
    CHECK(read(c, buf, sizeof buf) == 0);
    CHECK(send(c, "x", 1, MSG_NOSIGNAL) == 1);
    CHECK_ERR(send(c, "x", 1, MSG_NOSIGNAL), EPIPE);
    CHECK_ERR(send(c, "x", 1, MSG_NOSIGNAL), EPIPE);
    CHECK(read(c, buf, sizeof buf) == 0);
    CHECK(tcp_state(c) == TCP_CLOSE);
    close(c);

    /* The peer closes with data unread: RST. */
    pair(l, &c, &s);
    CHECK(write(s, "data", 4) == 4);
    CHECK(write(c, "zz", 2) == 2);
    close(s);
    CHECK(read(c, buf, sizeof buf) == 4);
    CHECK_ERR(read(c, buf, sizeof buf), ECONNRESET);
    CHECK(read(c, buf, sizeof buf) == 0);
    CHECK_ERR(send(c, "x", 1, MSG_NOSIGNAL), EPIPE);
    CHECK_ERR(getpeername(c, (struct sockaddr *)&(struct sockaddr_in){0}, &(socklen_t){16}), ENOTCONN);
    close(c);

    /* SO_LINGER 0: RST on close; the error comes as SO_ERROR too. */
    pair(l, &c, &s);
    struct linger lg = {1, 0};
    CHECK_OK(setsockopt(s, SOL_SOCKET, SO_LINGER, &lg, sizeof lg));
    close(s);
    CHECK(revents(c) == (POLLIN | POLLOUT | POLLERR | POLLHUP | POLLRDHUP));
    CHECK(sockopt_int(c, SOL_SOCKET, SO_ERROR) == ECONNRESET);
    CHECK(sockopt_int(c, SOL_SOCKET, SO_ERROR) == 0);
    CHECK(revents(c) == (POLLIN | POLLOUT | POLLHUP | POLLRDHUP));
    CHECK(read(c, buf, sizeof buf) == 0);
    close(c);

    /* EPIPE raises SIGPIPE without MSG_NOSIGNAL. */
    pair(l, &c, &s);
    CHECK_OK(shutdown(c, SHUT_WR));
    signal(SIGPIPE, SIG_IGN);
    CHECK_ERR(write(c, "x", 1), EPIPE);
    signal(SIGPIPE, SIG_DFL);
    close(c), close(s);

    /* A listener closed with connections it never accepted resets them. */
    int l2 = listener(8);
    c = connect_to(port_of(l2), 0);
    close(l2);
    CHECK_ERR(read(c, buf, sizeof buf), ECONNRESET);
    close(c);
    close(l);
}

static void test_nonblocking_connect(void) {
    int l = listener(8);
    int port = port_of(l);
    int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = v4(INADDR_LOOPBACK, port);
    CHECK_ERR(connect(c, (struct sockaddr *)&a, sizeof a), EINPROGRESS);
    struct pollfd p = {.fd = c, .events = POLLOUT};
    CHECK(poll(&p, 1, -1) == 1 && p.revents == POLLOUT);
    CHECK(sockopt_int(c, SOL_SOCKET, SO_ERROR) == 0);
    CHECK_OK(connect(c, (struct sockaddr *)&a, sizeof a));
    CHECK_ERR(connect(c, (struct sockaddr *)&a, sizeof a), EISCONN);
    char buf[4];
    CHECK_ERR(read(c, buf, sizeof buf), EAGAIN);
    int s = accept4(l, NULL, NULL, SOCK_NONBLOCK);
    CHECK(s >= 0);
    CHECK(fcntl(s, F_GETFL) & O_NONBLOCK);
    fcntl(l, F_SETFL, O_NONBLOCK);
    CHECK_ERR(accept(l, NULL, NULL), EAGAIN);
    close(s), close(c);

    /* Nothing listens: refused, at once for a blocking connect, through
     * SO_ERROR for a non-blocking one. */
    int gone = listener(1);
    int free_port = port_of(gone);
    close(gone);
    a = v4(INADDR_LOOPBACK, free_port);
    c = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_ERR(connect(c, (struct sockaddr *)&a, sizeof a), ECONNREFUSED);
    close(c);
    c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK_ERR(connect(c, (struct sockaddr *)&a, sizeof a), EINPROGRESS);
    p.revents = 0;
    CHECK(poll(&p, 1, -1) == 1);
    CHECK(sockopt_int(c, SOL_SOCKET, SO_ERROR) == ECONNREFUSED);
    close(c);

    /* The accept queue takes backlog + 1; later connects wait. */
    int bl = listener(1);
    port = port_of(bl);
    int cs[4];
    for (int i = 0; i < 4; i++) cs[i] = connect_to(port, SOCK_NONBLOCK);
    CHECK(revents(cs[0]) == POLLOUT && revents(cs[1]) == POLLOUT);
    CHECK(revents(cs[2]) == 0 && revents(cs[3]) == 0);
    CHECK_ERR(send(cs[2], "x", 1, MSG_NOSIGNAL), EAGAIN);
    struct sockaddr_in from;
    s = accept(bl, (struct sockaddr *)&from, &(socklen_t){sizeof from});
    CHECK(ntohs(from.sin_port) == port_of(cs[0]));
    close(s);
    s = accept(bl, (struct sockaddr *)&from, &(socklen_t){sizeof from});
    CHECK(ntohs(from.sin_port) == port_of(cs[1]));
    close(s);
    for (int i = 0; i < 4; i++) close(cs[i]);
    close(bl), close(l);
}

static void test_ports(void) {
    int l = listener(1);
    int port = port_of(l);
    int one = 1;
    struct sockaddr_in a = v4(INADDR_LOOPBACK, port), any = v4(INADDR_ANY, port);

    int t = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_ERR(bind(t, (struct sockaddr *)&a, sizeof a), EADDRINUSE);
    CHECK_ERR(bind(t, (struct sockaddr *)&any, sizeof any), EADDRINUSE);
    /* SO_REUSEADDR does not share a port a listener holds. */
    CHECK_OK(setsockopt(t, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one));
    CHECK_ERR(bind(t, (struct sockaddr *)&a, sizeof a), EADDRINUSE);
    close(t);
    close(l);
    /* Free again once the listener is closed. */
    t = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_OK(bind(t, (struct sockaddr *)&a, sizeof a));
    CHECK_ERR(bind(t, (struct sockaddr *)&a, sizeof a), EINVAL);
    close(t);

    /* Two bound with SO_REUSEADDR share the port until one listens. */
    int r1 = socket(AF_INET, SOCK_STREAM, 0), r2 = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(r1, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(r2, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    CHECK_OK(bind(r1, (struct sockaddr *)&a, sizeof a));
    CHECK_OK(bind(r2, (struct sockaddr *)&a, sizeof a));
    CHECK_OK(listen(r1, 1));
    CHECK_ERR(listen(r2, 1), EADDRINUSE);
    close(r1), close(r2);

    /* SO_REUSEPORT: listeners share the port, and between them take
     * every connection. */
    r1 = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    r2 = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK_OK(setsockopt(r1, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one));
    CHECK_OK(setsockopt(r2, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one));
    CHECK_OK(bind(r1, (struct sockaddr *)&a, sizeof a));
    CHECK_OK(bind(r2, (struct sockaddr *)&a, sizeof a));
    CHECK_OK(listen(r1, 16));
    CHECK_OK(listen(r2, 16));
    int cs[8];
    for (int i = 0; i < 8; i++) cs[i] = connect_to(port, 0);
    int taken = 0, fd;
    while ((fd = accept(r1, NULL, NULL)) >= 0) taken++, close(fd);
    while ((fd = accept(r2, NULL, NULL)) >= 0) taken++, close(fd);
    CHECK(taken == 8);
    for (int i = 0; i < 8; i++) close(cs[i]);
    close(r1), close(r2);

    /* Addresses: not the sandbox's, a short address, another family. */
    t = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in far = v4(0xc0000263 /* 192.0.2.99 */, 0);
    CHECK_ERR(bind(t, (struct sockaddr *)&far, sizeof far), EADDRNOTAVAIL);
    CHECK_ERR(bind(t, (struct sockaddr *)&a, sizeof a - 1), EINVAL);
    struct sockaddr_in6 six = {.sin6_family = AF_INET6};
    CHECK_ERR(bind(t, (struct sockaddr *)&six, sizeof(struct sockaddr_in)), EAFNOSUPPORT);
    CHECK_ERR(connect(t, (struct sockaddr *)&six, sizeof(struct sockaddr_in)), EAFNOSUPPORT);
    CHECK_ERR(connect(t, (struct sockaddr *)&a, 8), EINVAL);
    close(t);

    /* Ports below 1024 need CAP_NET_BIND_SERVICE. */
    pid_t pid = fork();
    if (pid == 0) {
        if (setuid(65534) < 0) _exit(2);
        int u = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in low = v4(INADDR_LOOPBACK, 80);
        _exit(bind(u, (struct sockaddr *)&low, sizeof low) == -1 && errno == EACCES ? 0 : 1);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void test_v6(void) {
    int one = 1;
    /* A dual-stack listener on :: takes v4 clients, seen as v4-mapped. */
    int l = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT};
    CHECK(sockopt_int(l, IPPROTO_IPV6, IPV6_V6ONLY) == 0);
    CHECK_OK(bind(l, (struct sockaddr *)&a, sizeof a));
    CHECK_ERR(setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one), EINVAL);
    CHECK_OK(listen(l, 8));
    int port = port_of(l);
    int c = connect_to(port, 0);
    CHECK(c >= 0);
    struct sockaddr_in6 from;
    socklen_t len = sizeof from;
    int s = accept(l, (struct sockaddr *)&from, &len);
    CHECK(s >= 0 && len == sizeof from && from.sin6_family == AF_INET6);
    CHECK(IN6_IS_ADDR_V4MAPPED(&from.sin6_addr) && ntohs(from.sin6_port) == port_of(c));
    struct sockaddr_in6 me;
    len = sizeof me;
    CHECK_OK(getsockname(s, (struct sockaddr *)&me, &len));
    CHECK(IN6_IS_ADDR_V4MAPPED(&me.sin6_addr));
    close(c), close(s);

    /* A v6 client over ::1. */
    c = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 lo = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT, .sin6_port = htons(port)};
    CHECK_OK(connect(c, (struct sockaddr *)&lo, sizeof lo));
    s = accept(l, (struct sockaddr *)&from, &(socklen_t){sizeof from});
    CHECK(s >= 0 && IN6_IS_ADDR_LOOPBACK(&from.sin6_addr));
    CHECK(write(c, "six", 3) == 3);
    char buf[8];
    CHECK(read(s, buf, sizeof buf) == 3);
    close(c), close(s);

    /* The v4 wildcard and a dual-stack v6 wildcard conflict. */
    int t = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in any4 = v4(INADDR_ANY, port);
    CHECK_ERR(bind(t, (struct sockaddr *)&any4, sizeof any4), EADDRINUSE);
    close(t);
    close(l);

    /* A v6-only listener leaves v4 alone: both bind the port. */
    l = socket(AF_INET6, SOCK_STREAM, 0);
    CHECK_OK(setsockopt(l, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one));
    CHECK_OK(bind(l, (struct sockaddr *)&a, sizeof a));
    CHECK_OK(listen(l, 8));
    port = port_of(l);
    t = socket(AF_INET, SOCK_STREAM, 0);
    any4 = v4(INADDR_LOOPBACK, port);
    c = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_ERR(connect(c, (struct sockaddr *)&any4, sizeof any4), ECONNREFUSED);
    close(c);
    CHECK_OK(bind(t, (struct sockaddr *)&any4, sizeof any4));
    close(t);
    /* A v6-only socket takes no v4-mapped address. */
    t = socket(AF_INET6, SOCK_STREAM, 0);
    CHECK_OK(setsockopt(t, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one));
    struct sockaddr_in6 mapped = {.sin6_family = AF_INET6};
    inet_pton(AF_INET6, "::ffff:127.0.0.1", &mapped.sin6_addr);
    CHECK_ERR(bind(t, (struct sockaddr *)&mapped, sizeof mapped), EINVAL);
    close(t);
    t = socket(AF_INET6, SOCK_STREAM, 0);
    CHECK_OK(bind(t, (struct sockaddr *)&mapped, sizeof mapped));
    len = sizeof me;
    CHECK_OK(getsockname(t, (struct sockaddr *)&me, &len));
    CHECK(IN6_IS_ADDR_V4MAPPED(&me.sin6_addr));
    close(t);
    t = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 far = {.sin6_family = AF_INET6};
    inet_pton(AF_INET6, "2001:db8::1", &far.sin6_addr);
    CHECK_ERR(bind(t, (struct sockaddr *)&far, sizeof far), EADDRNOTAVAIL);
    CHECK_ERR(bind(t, (struct sockaddr *)&far, 20), EINVAL);
    close(t);
    close(l);
}

static void test_options(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(sockopt_int(fd, SOL_SOCKET, SO_TYPE) == SOCK_STREAM);
    CHECK(sockopt_int(fd, SOL_SOCKET, SO_PROTOCOL) == IPPROTO_TCP);
    CHECK(sockopt_int(fd, SOL_SOCKET, SO_DOMAIN) == AF_INET);
    CHECK(sockopt_int(fd, SOL_SOCKET, SO_RCVBUF) == 131072);
    CHECK(sockopt_int(fd, SOL_SOCKET, SO_SNDBUF) == 16384);
    CHECK(sockopt_int(fd, SOL_SOCKET, SO_ERROR) == 0);
    CHECK(sockopt_int(fd, IPPROTO_TCP, TCP_NODELAY) == 0);
    int one = 1, zero = 0, v;
    CHECK_OK(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one));
    CHECK(sockopt_int(fd, IPPROTO_TCP, TCP_NODELAY) == 1);
    CHECK_OK(setsockopt(fd, IPPROTO_TCP, TCP_CORK, &one, sizeof one));
    CHECK(sockopt_int(fd, IPPROTO_TCP, TCP_CORK) == 1);
    CHECK(sockopt_int(fd, IPPROTO_TCP, TCP_KEEPIDLE) == 7200);
    CHECK(sockopt_int(fd, IPPROTO_TCP, TCP_KEEPINTVL) == 75);
    CHECK(sockopt_int(fd, IPPROTO_TCP, TCP_KEEPCNT) == 9);
    v = 30;
    CHECK_OK(setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &v, sizeof v));
    CHECK(sockopt_int(fd, IPPROTO_TCP, TCP_KEEPIDLE) == 30);
    CHECK_ERR(setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &zero, sizeof zero), EINVAL);
    CHECK_ERR(setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &zero, sizeof zero), EINVAL);
    CHECK_ERR(setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &(int){40000}, sizeof(int)), EINVAL);
    CHECK_ERR(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, 2), EINVAL);
    CHECK(sockopt_int(fd, IPPROTO_TCP, TCP_MAXSEG) == 536);
    v = 1000;
    CHECK_OK(setsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &v, sizeof v));
    CHECK(sockopt_int(fd, IPPROTO_TCP, TCP_MAXSEG) == 1000);
    CHECK_ERR(setsockopt(fd, IPPROTO_TCP, TCP_MAXSEG, &(int){10}, sizeof(int)), EINVAL);
    CHECK(sockopt_int(fd, IPPROTO_TCP, TCP_QUICKACK) == 1);
    CHECK_OK(setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &zero, sizeof zero));
    CHECK(sockopt_int(fd, IPPROTO_TCP, TCP_USER_TIMEOUT) == 0);
    v = 5000;
    CHECK_OK(setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &v, sizeof v));
    CHECK(sockopt_int(fd, IPPROTO_TCP, TCP_USER_TIMEOUT) == 5000);
    CHECK_ERR(setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &(int){-1}, sizeof(int)), EINVAL);
    char cc[16] = {0};
    socklen_t len = sizeof cc;
    CHECK_OK(getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, &len));
    CHECK(len == 16 && cc[0] != 0);
    CHECK_OK(setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, "reno", 4));
    len = sizeof cc;
    CHECK_OK(getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, &len));
    CHECK(strcmp(cc, "reno") == 0);
    CHECK_ERR(setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, "no-such", 7), ENOENT);
    CHECK_ERR(getsockopt(fd, IPPROTO_TCP, 9999, &v, &(socklen_t){4}), ENOPROTOOPT);
    CHECK(sockopt_int(fd, IPPROTO_IP, IP_TTL) == 64);
    CHECK(sockopt_int(fd, IPPROTO_IP, IP_TOS) == 0);
    CHECK_ERR(setsockopt(fd, IPPROTO_IP, IP_TTL, &zero, sizeof zero), EINVAL);
    v = 16;
    CHECK_OK(setsockopt(fd, IPPROTO_IP, IP_TOS, &v, sizeof v));
    CHECK(sockopt_int(fd, IPPROTO_IP, IP_TOS) == 16);
    CHECK_ERR(getsockopt(fd, IPPROTO_IP, IP_MTU, &v, &(socklen_t){4}), ENOTCONN);
    CHECK(sockopt_int(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT) == 0);
    CHECK_OK(setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one));
    CHECK(sockopt_int(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT) == 1);
    CHECK_ERR(getsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v, &(socklen_t){4}), EOPNOTSUPP);
    CHECK_ERR(setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one), ENOPROTOOPT);
    close(fd);

    /* Families and protocols. */
    CHECK_ERR(socket(AF_INET, SOCK_STREAM, IPPROTO_UDP), EPROTONOSUPPORT);
    CHECK_ERR(socket(AF_INET, SOCK_DGRAM, IPPROTO_TCP), EPROTONOSUPPORT);
    CHECK_ERR(socket(AF_INET6, SOCK_STREAM, 99), EPROTONOSUPPORT);
    CHECK_ERR(socket(AF_INET, SOCK_RDM, 0), ESOCKTNOSUPPORT);
    CHECK_ERR(socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP), EACCES);
    int sv[2];
    CHECK_ERR(socketpair(AF_INET, SOCK_STREAM, 0, sv), EOPNOTSUPP);
}

/* A megabyte or so each way between processes, with MSG_WAITALL. */
static void test_bulk(void) {
    int l = listener(1), c, s;
    pair(l, &c, &s);
    enum { TOTAL = 3 << 20 };
    pid_t pid = fork();
    if (pid == 0) {
        static char chunk[65536];
        for (int i = 0; i < TOTAL; i += sizeof chunk) {
            for (size_t j = 0; j < sizeof chunk; j++) chunk[j] = (char)((i + j) * 7);
            if (write(c, chunk, sizeof chunk) != sizeof chunk) _exit(1);
        }
        _exit(0);
    }
    close(c);
    static char got[TOTAL];
    CHECK(recv(s, got, TOTAL, MSG_WAITALL) == TOTAL);
    int bad = 0;
    for (int i = 0; i < TOTAL; i++) bad += got[i] != (char)(i * 7);
    CHECK(bad == 0);
    char b;
    CHECK(read(s, &b, 1) == 0);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(s), close(l);
}

/* Blocked calls are woken: an accept by a connect from another process, a
 * connect waiting at a full queue by the accept that makes room. */
static void test_wakeups(void) {
    int l = listener(0);
    int port = port_of(l);
    pid_t pid = fork();
    if (pid == 0) {
        int c = connect_to(port, 0);
        /* The queue (backlog 0) is full now: this one waits for room. */
        int c2 = connect_to(port, 0);
        _exit(c >= 0 && c2 >= 0 && write(c2, "2", 1) == 1 ? 0 : 1);
    }
    struct sockaddr_in from;
    int s = accept(l, (struct sockaddr *)&from, &(socklen_t){sizeof from});
    CHECK(s >= 0);
    int s2 = accept(l, NULL, NULL);
    CHECK(s2 >= 0);
    char b = 0;
    CHECK(read(s2, &b, 1) == 1 && b == '2');
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(s), close(s2), close(l);
}

int main(void) {
    test_wakeups();
    test_connect_accept();
    test_half_close();
    test_resets();
    test_nonblocking_connect();
    test_ports();
    test_v6();
    test_options();
    test_bulk();
    return done();
}
