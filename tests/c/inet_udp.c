/* UDP over loopback, IPv4 and IPv6: addresses both ways, connected
 * sockets and their filter, the refusal a port with no socket draws,
 * truncation, size limits, poll readiness, port conflicts and options.
 * Ports come from bind(0); every expectation is Linux's loopback's. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
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

static int bound(uint32_t addr) {
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in a = v4(addr, 0);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0) return -1;
    return fd;
}

static short revents(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM | POLLWRBAND | POLLRDHUP};
    if (poll(&p, 1, 0) < 0) return -1;
    return p.revents;
}

static int sockopt_int(int fd, int level, int name) {
    int v = -12345;
    socklen_t len = sizeof v;
    if (getsockopt(fd, level, name, &v, &len) < 0) return -1000 - errno;
    return v;
}

static void test_datagrams(void) {
    int a = bound(INADDR_LOOPBACK), b = bound(INADDR_ANY);
    CHECK(a >= 0 && b >= 0);
    CHECK(port_of(a) >= 32768 && port_of(a) <= 60999);
    CHECK(revents(b) == (POLLOUT | POLLWRNORM | POLLWRBAND));
    struct sockaddr_in to = v4(INADDR_LOOPBACK, port_of(b)), from;
    CHECK(sendto(a, "one", 3, 0, (struct sockaddr *)&to, sizeof to) == 3);
    CHECK(sendto(a, "second", 6, 0, (struct sockaddr *)&to, sizeof to) == 6);
    CHECK(sendto(a, "", 0, 0, (struct sockaddr *)&to, sizeof to) == 0);
    CHECK(revents(b) == (POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM | POLLWRBAND));
    int avail = -1;
    CHECK_OK(ioctl(b, FIONREAD, &avail));
    CHECK(avail == 3);

    char buf[64];
    socklen_t len = sizeof from;
    CHECK(recvfrom(b, buf, sizeof buf, MSG_PEEK, (struct sockaddr *)&from, &len) == 3);
    CHECK(len == sizeof from && from.sin_family == AF_INET);
    CHECK(from.sin_addr.s_addr == htonl(INADDR_LOOPBACK) && ntohs(from.sin_port) == port_of(a));
    CHECK(recv(b, buf, sizeof buf, 0) == 3 && memcmp(buf, "one", 3) == 0);

    /* A short buffer truncates the datagram, and says so. */
    struct iovec iov = {buf, 2};
    struct msghdr m = {.msg_name = &from, .msg_namelen = sizeof from, .msg_iov = &iov, .msg_iovlen = 1};
    CHECK(recvmsg(b, &m, MSG_PEEK) == 2 && (m.msg_flags & MSG_TRUNC));
    CHECK(recv(b, buf, 2, MSG_TRUNC) == 6);
    /* The empty datagram is a datagram. */
    len = sizeof from;
    CHECK(recvfrom(b, buf, sizeof buf, 0, (struct sockaddr *)&from, &len) == 0);
    CHECK(ntohs(from.sin_port) == port_of(a));
    CHECK_ERR(recv(b, buf, sizeof buf, 0), EAGAIN);

    /* No destination. */
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK_ERR(send(u, "x", 1, 0), EDESTADDRREQ);
    /* The send bound a port all the same. */
    CHECK(port_of(u) >= 32768);
    struct sockaddr_in zero = v4(INADDR_LOOPBACK, 0);
    CHECK_ERR(sendto(u, "x", 1, 0, (struct sockaddr *)&zero, sizeof zero), EINVAL);
    CHECK_ERR(sendto(u, "x", 1, 0, (struct sockaddr *)&to, 8), EINVAL);
    close(u);

    /* Size limits: 65507 bytes over IPv4. */
    static char big[65536];
    int r = bound(INADDR_LOOPBACK);
    int bufsz = 1 << 20;
    setsockopt(r, SOL_SOCKET, SO_RCVBUF, &bufsz, sizeof bufsz);
    to = v4(INADDR_LOOPBACK, port_of(r));
    CHECK_ERR(sendto(a, big, 65508, 0, (struct sockaddr *)&to, sizeof to), EMSGSIZE);
    CHECK(sendto(a, big, 65507, 0, (struct sockaddr *)&to, sizeof to) == 65507);
    CHECK(recv(r, big, sizeof big, 0) == 65507);
    close(r), close(a), close(b);
}

static void test_connected(void) {
    int a = bound(INADDR_LOOPBACK), b = bound(INADDR_LOOPBACK), other = bound(INADDR_LOOPBACK);
    struct sockaddr_in to_b = v4(INADDR_LOOPBACK, port_of(b)), to_a = v4(INADDR_LOOPBACK, port_of(a));
    CHECK_OK(connect(a, (struct sockaddr *)&to_b, sizeof to_b));
    struct sockaddr_in peer;
    socklen_t len = sizeof peer;
    CHECK_OK(getpeername(a, (struct sockaddr *)&peer, &len));
    CHECK(ntohs(peer.sin_port) == port_of(b));
    CHECK(send(a, "hi", 2, 0) == 2);
    char buf[16];
    CHECK(recv(b, buf, sizeof buf, 0) == 2);
    /* A connected socket takes datagrams from its peer only. */
    CHECK_OK(connect(b, (struct sockaddr *)&to_a, sizeof to_a));
    CHECK(sendto(other, "no", 2, 0, (struct sockaddr *)&to_b, sizeof to_b) == 2);
    CHECK(send(a, "yes", 3, 0) == 3);
    CHECK(recv(b, buf, sizeof buf, 0) == 3 && memcmp(buf, "yes", 3) == 0);
    CHECK_ERR(recv(b, buf, sizeof buf, 0), EAGAIN);
    /* sendto names another destination even when connected. */
    struct sockaddr_in to_other = v4(INADDR_LOOPBACK, port_of(other));
    CHECK(sendto(a, "x", 1, 0, (struct sockaddr *)&to_other, sizeof to_other) == 1);
    CHECK(recv(other, buf, sizeof buf, 0) == 1);

    /* AF_UNSPEC disconnects; a port the connect chose goes with it, one
     * bound by the application stays. */
    struct sockaddr unspec = {.sa_family = AF_UNSPEC};
    CHECK_OK(connect(a, &unspec, sizeof unspec));
    CHECK_ERR(getpeername(a, (struct sockaddr *)&peer, &len), ENOTCONN);
    CHECK_ERR(send(a, "x", 1, 0), EDESTADDRREQ);
    int c = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK_OK(connect(c, (struct sockaddr *)&to_b, sizeof to_b));
    len = sizeof peer;
    CHECK_OK(getsockname(c, (struct sockaddr *)&peer, &len));
    CHECK(peer.sin_addr.s_addr == htonl(INADDR_LOOPBACK) && peer.sin_port != 0);
    CHECK_OK(connect(c, &unspec, sizeof unspec));
    len = sizeof peer;
    CHECK_OK(getsockname(c, (struct sockaddr *)&peer, &len));
    CHECK(peer.sin_addr.s_addr == 0 && peer.sin_port == 0);
    close(c);

    /* A port nobody has: the sender hears of it on its next call. */
    int gone = bound(INADDR_LOOPBACK);
    struct sockaddr_in to_gone = v4(INADDR_LOOPBACK, port_of(gone));
    close(gone);
    c = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    CHECK_OK(connect(c, (struct sockaddr *)&to_gone, sizeof to_gone));
    CHECK(send(c, "x", 1, 0) == 1);
    CHECK(revents(c) & POLLERR);
    CHECK_ERR(send(c, "x", 1, 0), ECONNREFUSED);
    CHECK(send(c, "x", 1, 0) == 1);
    CHECK_ERR(recv(c, buf, sizeof buf, 0), ECONNREFUSED);
    CHECK_ERR(recv(c, buf, sizeof buf, 0), EAGAIN);
    CHECK(send(c, "x", 1, 0) == 1);
    CHECK(sockopt_int(c, SOL_SOCKET, SO_ERROR) == ECONNREFUSED);
    CHECK(sockopt_int(c, SOL_SOCKET, SO_ERROR) == 0);
    close(c);
    /* An unconnected sender is not told. */
    c = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    CHECK(sendto(c, "x", 1, 0, (struct sockaddr *)&to_gone, sizeof to_gone) == 1);
    CHECK(sendto(c, "x", 1, 0, (struct sockaddr *)&to_gone, sizeof to_gone) == 1);
    CHECK(sockopt_int(c, SOL_SOCKET, SO_ERROR) == 0);
    close(c);

    /* shutdown: an unconnected socket answers ENOTCONN but is shut. */
    c = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK_ERR(shutdown(c, SHUT_RDWR), ENOTCONN);
    CHECK(revents(c) == (POLLIN | POLLRDNORM | POLLOUT | POLLWRNORM | POLLWRBAND | POLLHUP | POLLRDHUP));
    CHECK(recv(c, buf, sizeof buf, 0) == 0);
    close(c);
    /* A connected one is shut without complaint; sending then fails. */
    CHECK_OK(shutdown(b, SHUT_WR));
    /* EPIPE, and no SIGPIPE: that is for streams. */
    CHECK_ERR(send(b, "x", 1, 0), EPIPE);
    CHECK_ERR(write(b, "x", 1), EPIPE);
    close(a), close(b), close(other);
}

static void test_v6(void) {
    /* A dual-stack socket on :: hears v4 senders as v4-mapped. */
    int s = socket(AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in6 any = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT};
    CHECK_OK(bind(s, (struct sockaddr *)&any, sizeof any));
    int port = port_of(s);
    int a = bound(INADDR_LOOPBACK);
    struct sockaddr_in to = v4(INADDR_LOOPBACK, port);
    CHECK(sendto(a, "four", 4, 0, (struct sockaddr *)&to, sizeof to) == 4);
    struct sockaddr_in6 from;
    socklen_t len = sizeof from;
    char buf[16];
    CHECK(recvfrom(s, buf, sizeof buf, 0, (struct sockaddr *)&from, &len) == 4);
    CHECK(len == sizeof from && IN6_IS_ADDR_V4MAPPED(&from.sin6_addr) && ntohs(from.sin6_port) == port_of(a));

    /* ...and replies to them, to the mapped address or the v4 one. */
    CHECK(sendto(s, "back", 4, 0, (struct sockaddr *)&from, len) == 4);
    CHECK(recv(a, buf, sizeof buf, 0) == 4);
    /* A v6 sender over ::1. */
    int b = socket(AF_INET6, SOCK_DGRAM, 0);
    struct sockaddr_in6 lo = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT, .sin6_port = htons(port)};
    CHECK(sendto(b, "six", 3, 0, (struct sockaddr *)&lo, sizeof lo) == 3);
    len = sizeof from;
    CHECK(recvfrom(s, buf, sizeof buf, 0, (struct sockaddr *)&from, &len) == 3);
    CHECK(IN6_IS_ADDR_LOOPBACK(&from.sin6_addr) && ntohs(from.sin6_port) == port_of(b));
    static char big[65536];
    CHECK_ERR(sendto(b, big, 65528, 0, (struct sockaddr *)&lo, sizeof lo), EMSGSIZE);

    /* The port is taken for v4 too; a v6-only socket leaves v4 alone. */
    int t = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in any4 = v4(INADDR_ANY, port);
    CHECK_ERR(bind(t, (struct sockaddr *)&any4, sizeof any4), EADDRINUSE);
    close(t);
    close(s);
    s = socket(AF_INET6, SOCK_DGRAM, 0);
    int one = 1;
    CHECK_OK(setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one));
    CHECK_OK(bind(s, (struct sockaddr *)&any, sizeof any));
    port = port_of(s);
    t = socket(AF_INET, SOCK_DGRAM, 0);
    any4 = v4(INADDR_ANY, port);
    CHECK_OK(bind(t, (struct sockaddr *)&any4, sizeof any4));
    CHECK_ERR(setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one), EINVAL);
    close(t), close(s), close(a), close(b);
}

static void test_ports_options(void) {
    int a = bound(INADDR_LOOPBACK);
    struct sockaddr_in same = v4(INADDR_LOOPBACK, port_of(a));
    int t = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK_ERR(bind(t, (struct sockaddr *)&same, sizeof same), EADDRINUSE);
    close(t);
    close(a);
    /* With SO_REUSEADDR on both, two sockets share a port. */
    int one = 1;
    int r1 = socket(AF_INET, SOCK_DGRAM, 0), r2 = socket(AF_INET, SOCK_DGRAM, 0);
    setsockopt(r1, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    setsockopt(r2, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    CHECK_OK(bind(r1, (struct sockaddr *)&same, sizeof same));
    CHECK_OK(bind(r2, (struct sockaddr *)&same, sizeof same));
    close(r1), close(r2);
    struct sockaddr_in far = v4(0xc0000263 /* 192.0.2.99 */, 0);
    t = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK_ERR(bind(t, (struct sockaddr *)&far, sizeof far), EADDRNOTAVAIL);

    CHECK(sockopt_int(t, SOL_SOCKET, SO_TYPE) == SOCK_DGRAM);
    CHECK(sockopt_int(t, SOL_SOCKET, SO_PROTOCOL) == IPPROTO_UDP);
    CHECK(sockopt_int(t, SOL_SOCKET, SO_RCVBUF) == 212992);
    CHECK(sockopt_int(t, SOL_SOCKET, SO_BROADCAST) == 0);
    CHECK_OK(setsockopt(t, SOL_SOCKET, SO_BROADCAST, &one, sizeof one));
    CHECK(sockopt_int(t, SOL_SOCKET, SO_BROADCAST) == 1);
    CHECK(sockopt_int(t, IPPROTO_IP, IP_TTL) == 64);
    int v = 7;
    CHECK_OK(setsockopt(t, IPPROTO_IP, IP_TTL, &v, sizeof v));
    CHECK(sockopt_int(t, IPPROTO_IP, IP_TTL) == 7);
    v = -1;
    CHECK_OK(setsockopt(t, IPPROTO_IP, IP_TTL, &v, sizeof v));
    CHECK(sockopt_int(t, IPPROTO_IP, IP_TTL) == 64);
    v = 256;
    CHECK_ERR(setsockopt(t, IPPROTO_IP, IP_TTL, &v, sizeof v), EINVAL);
    v = 0x10;
    CHECK_OK(setsockopt(t, IPPROTO_IP, IP_TOS, &v, sizeof v));
    CHECK(sockopt_int(t, IPPROTO_IP, IP_TOS) == 0x10);
    CHECK(sockopt_int(t, IPPROTO_IP, IP_RECVERR) == 0);
    CHECK_OK(setsockopt(t, IPPROTO_IP, IP_RECVERR, &one, sizeof one));
    CHECK(sockopt_int(t, IPPROTO_IP, IP_RECVERR) == 1);
    CHECK_OK(setsockopt(t, IPPROTO_IP, IP_PKTINFO, &one, sizeof one));
    CHECK(sockopt_int(t, IPPROTO_IP, IP_PKTINFO) == 1);
    CHECK(sockopt_int(t, IPPROTO_IP, IP_MULTICAST_TTL) == 1);
    CHECK(sockopt_int(t, IPPROTO_IP, IP_MULTICAST_LOOP) == 1);
    CHECK_ERR(getsockopt(t, IPPROTO_IP, IP_MTU, &v, &(socklen_t){4}), ENOTCONN);
    close(t);
    t = socket(AF_INET6, SOCK_DGRAM, 0);
    CHECK(sockopt_int(t, IPPROTO_IPV6, IPV6_UNICAST_HOPS) == 64);
    CHECK(sockopt_int(t, IPPROTO_IPV6, IPV6_RECVPKTINFO) == 0);
    CHECK_OK(setsockopt(t, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof one));
    CHECK(sockopt_int(t, IPPROTO_IPV6, IPV6_RECVPKTINFO) == 1);
    CHECK(sockopt_int(t, SOL_SOCKET, SO_DOMAIN) == AF_INET6);
    close(t);
}

/* Control messages a receiver asks for: where the datagram went, its TTL. */
static void test_ancillary(void) {
    int r = bound(INADDR_ANY), s = bound(INADDR_LOOPBACK), one = 1, ttl = 9;
    CHECK_OK(setsockopt(r, IPPROTO_IP, IP_PKTINFO, &one, sizeof one));
    CHECK_OK(setsockopt(r, IPPROTO_IP, IP_RECVTTL, &one, sizeof one));
    CHECK_OK(setsockopt(s, IPPROTO_IP, IP_TTL, &ttl, sizeof ttl));
    struct sockaddr_in to = v4(INADDR_LOOPBACK, port_of(r));
    CHECK(sendto(s, "pkt", 3, 0, (struct sockaddr *)&to, sizeof to) == 3);
    char buf[16];
    union {
        char b[256];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {buf, sizeof buf};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b};
    CHECK(recvmsg(r, &m, 0) == 3);
    int seen = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
            struct in_pktinfo pi;
            memcpy(&pi, CMSG_DATA(c), sizeof pi);
            CHECK(c->cmsg_len == CMSG_LEN(sizeof pi));
            CHECK(pi.ipi_addr.s_addr == htonl(INADDR_LOOPBACK));
            CHECK(pi.ipi_spec_dst.s_addr == htonl(INADDR_LOOPBACK));
            CHECK(pi.ipi_ifindex > 0);
            CHECK(seen == 0);
            seen |= 1;
        } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TTL) {
            int got;
            memcpy(&got, CMSG_DATA(c), sizeof got);
            CHECK(got == 9);
            seen |= 2;
        } else {
            CHECK(!"another control message");
        }
    }
    CHECK(seen == 3);
    /* No room: the messages are cut and the flag says so. */
    CHECK(sendto(s, "pkt", 3, 0, (struct sockaddr *)&to, sizeof to) == 3);
    m.msg_controllen = 4;
    CHECK(recvmsg(r, &m, 0) == 3 && (m.msg_flags & MSG_CTRUNC));
    close(r), close(s);

    int r6 = socket(AF_INET6, SOCK_DGRAM, 0);
    struct sockaddr_in6 lo = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    CHECK_OK(bind(r6, (struct sockaddr *)&lo, sizeof lo));
    CHECK_OK(setsockopt(r6, IPPROTO_IPV6, IPV6_RECVPKTINFO, &one, sizeof one));
    lo.sin6_port = htons(port_of(r6));
    int s6 = socket(AF_INET6, SOCK_DGRAM, 0);
    CHECK(sendto(s6, "six", 3, 0, (struct sockaddr *)&lo, sizeof lo) == 3);
    m.msg_controllen = sizeof ctl.b;
    m.msg_flags = 0;
    CHECK(recvmsg(r6, &m, 0) == 3);
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    CHECK(c && c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO);
    if (c) {
        struct in6_pktinfo pi;
        memcpy(&pi, CMSG_DATA(c), sizeof pi);
        CHECK(IN6_IS_ADDR_LOOPBACK(&pi.ipi6_addr) && pi.ipi6_ifindex > 0);
        CHECK(CMSG_NXTHDR(&m, c) == NULL);
    }
    close(r6), close(s6);
}

int main(void) {
    test_datagrams();
    test_ancillary();
    test_connected();
    test_v6();
    test_ports_options();
    return done();
}
