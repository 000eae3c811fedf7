/* AF_NETLINK NETLINK_ROUTE: binding and port ids, dumps of links,
 * addresses, routes and neighbours with Linux's framing, errors and
 * acknowledgements, MSG_PEEK/MSG_TRUNC, the SOL_NETLINK options, and
 * getifaddrs() and if_nameindex() built on them. Run natively too: only
 * what the loopback interface (index 1) shows is printed, which is the same
 * in any network namespace. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "t.h"

#ifndef NETLINK_EXT_ACK
#define NETLINK_EXT_ACK 11
#endif
#ifndef NETLINK_GET_STRICT_CHK
#define NETLINK_GET_STRICT_CHK 12
#endif
#ifndef NETLINK_CAP_ACK
#define NETLINK_CAP_ACK 10
#endif
#ifndef NLM_F_CAPPED
#define NLM_F_CAPPED 0x100
#endif

static uint32_t seq = 100;

static int nl_socket(void) {
    int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    CHECK(s >= 0);
    return s;
}

static uint32_t port_of(int s) {
    struct sockaddr_nl a;
    socklen_t len = sizeof a;
    memset(&a, 0xff, sizeof a);
    CHECK_OK(getsockname(s, (struct sockaddr *)&a, &len));
    CHECK(len == sizeof a && a.nl_family == AF_NETLINK);
    return a.nl_pid;
}

/* Sends a request of `type` with `flags` and a family header `hdr`. */
static uint32_t request(int s, uint16_t type, uint16_t flags, const void *hdr, size_t hdr_len) {
    char buf[256] = {0};
    struct nlmsghdr *h = (struct nlmsghdr *)buf;
    h->nlmsg_len = NLMSG_LENGTH(hdr_len);
    h->nlmsg_type = type;
    h->nlmsg_flags = flags;
    h->nlmsg_seq = ++seq;
    memcpy(NLMSG_DATA(h), hdr, hdr_len);
    struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
    CHECK(sendto(s, buf, h->nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof kernel) == (ssize_t)h->nlmsg_len);
    return h->nlmsg_seq;
}

static char rbuf[65536];
static int from_kernel = 1;

/* Receives one datagram, checking it comes from the kernel. */
static ssize_t receive(int s) {
    struct sockaddr_nl from;
    struct iovec iov = {rbuf, sizeof rbuf};
    struct msghdr m = {.msg_name = &from, .msg_namelen = sizeof from, .msg_iov = &iov, .msg_iovlen = 1};
    ssize_t n = recvmsg(s, &m, 0);
    /* Checked once at the end: how many datagrams a dump takes varies. */
    from_kernel &= n > 0 && m.msg_namelen == sizeof from && from.nl_family == AF_NETLINK && from.nl_pid == 0 &&
                   from.nl_groups == 0 && m.msg_flags == 0;
    return n;
}

typedef void (*on_message)(struct nlmsghdr *h);

/* Runs a dump to its NLMSG_DONE, giving each message to `each`; every
 * message answers `sq` for `port`, marked NLM_F_MULTI. */
static int dump(int s, uint16_t type, const void *hdr, size_t hdr_len, on_message each) {
    uint32_t port = port_of(s);
    uint32_t sq = request(s, type, NLM_F_REQUEST | NLM_F_DUMP, hdr, hdr_len);
    /* Checked once, not per message: how many there are depends on the
     * namespace's interfaces, and the count of checks is printed. */
    int messages = 0, framed = 1;
    for (;;) {
        ssize_t n = receive(s);
        if (n <= 0)
            return -1;
        for (struct nlmsghdr *h = (struct nlmsghdr *)rbuf; NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
            framed &= h->nlmsg_seq == sq && h->nlmsg_pid == port && (h->nlmsg_flags & NLM_F_MULTI);
            if (h->nlmsg_type == NLMSG_DONE) {
                CHECK(framed);
                CHECK(h->nlmsg_len == NLMSG_LENGTH(sizeof(int)));
                CHECK(*(int *)NLMSG_DATA(h) == 0);
                return messages;
            }
            framed &= h->nlmsg_type != NLMSG_ERROR;
            messages++;
            each(h);
        }
    }
}

static void print_link(struct nlmsghdr *h) {
    struct ifinfomsg *ifi = NLMSG_DATA(h);
    if (ifi->ifi_index != 1)
        return;
    CHECK(h->nlmsg_type == RTM_NEWLINK);
    printf("link family %d type %d index %d flags %#x change %#x\n", ifi->ifi_family, ifi->ifi_type, ifi->ifi_index,
           ifi->ifi_flags, ifi->ifi_change);
    int len = IFLA_PAYLOAD(h);
    for (struct rtattr *a = IFLA_RTA(ifi); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
        void *v = RTA_DATA(a);
        switch (a->rta_type) {
        case IFLA_IFNAME: printf("  name %s\n", (char *)v); break;
        case IFLA_MTU: printf("  mtu %u\n", *(uint32_t *)v); break;
        case IFLA_TXQLEN: printf("  txqlen %u\n", *(uint32_t *)v); break;
        case IFLA_OPERSTATE: printf("  operstate %u\n", *(uint8_t *)v); break;
        case IFLA_LINKMODE: printf("  linkmode %u\n", *(uint8_t *)v); break;
        case IFLA_QDISC: printf("  qdisc %s\n", (char *)v); break;
        case IFLA_GROUP: printf("  group %u\n", *(uint32_t *)v); break;
        case IFLA_CARRIER: printf("  carrier %u\n", *(uint8_t *)v); break;
        case IFLA_NUM_TX_QUEUES: printf("  txqueues %u\n", *(uint32_t *)v); break;
        case IFLA_ADDRESS:
        case IFLA_BROADCAST: {
            printf("  %s", a->rta_type == IFLA_ADDRESS ? "address" : "broadcast");
            for (unsigned i = 0; i < RTA_PAYLOAD(a); i++)
                printf("%c%02x", i ? ':' : ' ', ((unsigned char *)v)[i]);
            printf("\n");
            break;
        }
        case IFLA_AF_SPEC: {
            int l2 = RTA_PAYLOAD(a);
            for (struct rtattr *f = RTA_DATA(a); RTA_OK(f, l2); f = RTA_NEXT(f, l2))
                printf("  af_spec family %d\n", f->rta_type);
            break;
        }
        case IFLA_PROTINFO: printf("  protinfo\n"); break;
        }
    }
}

static void print_address(struct nlmsghdr *h) {
    struct ifaddrmsg *ifa = NLMSG_DATA(h);
    if (ifa->ifa_index != 1)
        return;
    CHECK(h->nlmsg_type == RTM_NEWADDR);
    printf("addr family %d prefix %d flags %#x scope %d\n", ifa->ifa_family, ifa->ifa_prefixlen, ifa->ifa_flags,
           ifa->ifa_scope);
    int len = IFA_PAYLOAD(h);
    char text[INET6_ADDRSTRLEN];
    for (struct rtattr *a = IFA_RTA(ifa); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
        void *v = RTA_DATA(a);
        switch (a->rta_type) {
        case IFA_ADDRESS:
        case IFA_LOCAL:
            inet_ntop(ifa->ifa_family, v, text, sizeof text);
            printf("  %s %s\n", a->rta_type == IFA_ADDRESS ? "address" : "local", text);
            break;
        case IFA_LABEL: printf("  label %s\n", (char *)v); break;
        case IFA_FLAGS: printf("  flags %#x\n", *(uint32_t *)v); break;
        case IFA_CACHEINFO: {
            struct ifa_cacheinfo *c = v;
            printf("  lifetimes %u %u\n", c->ifa_prefered, c->ifa_valid);
            break;
        }
        }
    }
}

static void print_route(struct nlmsghdr *h) {
    struct rtmsg *r = NLMSG_DATA(h);
    int len = RTM_PAYLOAD(h);
    int oif = 0;
    for (struct rtattr *a = RTM_RTA(r); RTA_OK(a, len); a = RTA_NEXT(a, len))
        if (a->rta_type == RTA_OIF)
            oif = *(int *)RTA_DATA(a);
    if (oif != 1)
        return;
    CHECK(h->nlmsg_type == RTM_NEWROUTE);
    printf("route family %d dst_len %d table %d protocol %d scope %d type %d flags %#x\n", r->rtm_family,
           r->rtm_dst_len, r->rtm_table, r->rtm_protocol, r->rtm_scope, r->rtm_type, r->rtm_flags);
    len = RTM_PAYLOAD(h);
    char text[INET6_ADDRSTRLEN];
    for (struct rtattr *a = RTM_RTA(r); RTA_OK(a, len); a = RTA_NEXT(a, len)) {
        void *v = RTA_DATA(a);
        switch (a->rta_type) {
        case RTA_DST:
        case RTA_PREFSRC:
            inet_ntop(r->rtm_family, v, text, sizeof text);
            printf("  %s %s\n", a->rta_type == RTA_DST ? "dst" : "prefsrc", text);
            break;
        case RTA_TABLE: printf("  table %u\n", *(uint32_t *)v); break;
        }
    }
}

static int lo_neighbours;
static void count_neighbour(struct nlmsghdr *h) {
    struct ndmsg *nd = NLMSG_DATA(h);
    if (nd->ndm_ifindex == 1)
        lo_neighbours++;
}

static void dumps(void) {
    int s = nl_socket();
    struct sockaddr_nl me = {.nl_family = AF_NETLINK};
    CHECK_OK(bind(s, (struct sockaddr *)&me, sizeof me));

    struct ifinfomsg ifi = {.ifi_family = AF_UNSPEC};
    CHECK(dump(s, RTM_GETLINK, &ifi, sizeof ifi, print_link) >= 1);
    ifi.ifi_family = AF_INET6;
    CHECK(dump(s, RTM_GETLINK, &ifi, sizeof ifi, print_link) >= 1);

    struct ifaddrmsg ifa = {.ifa_family = AF_UNSPEC};
    CHECK(dump(s, RTM_GETADDR, &ifa, sizeof ifa, print_address) >= 2);
    ifa.ifa_family = AF_INET6;
    CHECK(dump(s, RTM_GETADDR, &ifa, sizeof ifa, print_address) >= 1);

    struct rtmsg rt = {.rtm_family = AF_INET};
    CHECK(dump(s, RTM_GETROUTE, &rt, sizeof rt, print_route) >= 3);
    rt.rtm_family = AF_INET6;
    CHECK(dump(s, RTM_GETROUTE, &rt, sizeof rt, print_route) >= 1);

    struct ndmsg nd = {.ndm_family = AF_UNSPEC};
    /* How many the loopback has depends on its past traffic. */
    CHECK(dump(s, RTM_GETNEIGH, &nd, sizeof nd, count_neighbour) >= 0);

    /* One link by index, answered alone and acknowledged when asked. */
    struct ifinfomsg one = {.ifi_family = AF_UNSPEC, .ifi_index = 1};
    uint32_t sq = request(s, RTM_GETLINK, NLM_F_REQUEST | NLM_F_ACK, &one, sizeof one);
    ssize_t n = receive(s);
    struct nlmsghdr *h = (struct nlmsghdr *)rbuf;
    CHECK(NLMSG_OK(h, n) && h->nlmsg_type == RTM_NEWLINK && h->nlmsg_flags == 0 && h->nlmsg_seq == sq);
    print_link(h);
    n = receive(s);
    CHECK(n == NLMSG_LENGTH(sizeof(struct nlmsgerr)) && h->nlmsg_type == NLMSG_ERROR);
    CHECK(((struct nlmsgerr *)NLMSG_DATA(h))->error == 0 && h->nlmsg_flags == NLM_F_CAPPED);
    /* An index no interface has. */
    one.ifi_index = 999999;
    request(s, RTM_GETLINK, NLM_F_REQUEST, &one, sizeof one);
    n = receive(s);
    CHECK(h->nlmsg_type == NLMSG_ERROR && ((struct nlmsgerr *)NLMSG_DATA(h))->error == -ENODEV);
    close(s);
}

static void errors_and_acks(void) {
    int s = nl_socket();
    uint32_t port = port_of(s);
    CHECK(port == 0);

    /* A type beyond the route family's: EOPNOTSUPP, the request echoed. */
    struct rtgenmsg g = {.rtgen_family = AF_UNSPEC};
    uint32_t sq = request(s, 0x7ff0, NLM_F_REQUEST, &g, sizeof g);
    port = port_of(s);
    CHECK(port == (uint32_t)getpid());
    ssize_t n = receive(s);
    struct nlmsghdr *h = (struct nlmsghdr *)rbuf;
    struct nlmsgerr *e = NLMSG_DATA(h);
    CHECK(h->nlmsg_type == NLMSG_ERROR && h->nlmsg_seq == sq && h->nlmsg_pid == port && h->nlmsg_flags == 0);
    CHECK(e->error == -EOPNOTSUPP);
    /* The length counts the padding after the echoed request. */
    CHECK(h->nlmsg_len == NLMSG_ALIGN(NLMSG_LENGTH(sizeof(int)) + NLMSG_LENGTH(sizeof g)));
    CHECK(n == (ssize_t)h->nlmsg_len);
    CHECK(e->msg.nlmsg_type == 0x7ff0 && e->msg.nlmsg_seq == sq && e->msg.nlmsg_len == NLMSG_LENGTH(sizeof g));

    /* NETLINK_CAP_ACK: the header alone comes back. */
    int one = 1;
    CHECK_OK(setsockopt(s, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof one));
    request(s, 0x7ff0, NLM_F_REQUEST, &g, sizeof g);
    n = receive(s);
    CHECK(n == NLMSG_LENGTH(sizeof(struct nlmsgerr)) && h->nlmsg_flags == NLM_F_CAPPED && e->error == -EOPNOTSUPP);
    int zero = 0;
    CHECK_OK(setsockopt(s, SOL_NETLINK, NETLINK_CAP_ACK, &zero, sizeof zero));

    /* Not a request: nothing happens, but an ack if asked. */
    sq = request(s, RTM_GETLINK, NLM_F_ACK, &g, sizeof g);
    n = receive(s);
    CHECK(h->nlmsg_type == NLMSG_ERROR && e->error == 0 && h->nlmsg_seq == sq && h->nlmsg_flags == NLM_F_CAPPED);
    /* A control message type: the same. */
    request(s, NLMSG_NOOP, NLM_F_REQUEST | NLM_F_ACK, &g, sizeof g);
    n = receive(s);
    CHECK(h->nlmsg_type == NLMSG_ERROR && e->error == 0);
    /* A dump of a kind that has none. */
    request(s, RTM_GETLINK + 0x7000, NLM_F_REQUEST | NLM_F_DUMP, &g, sizeof g);
    n = receive(s);
    CHECK(h->nlmsg_type == NLMSG_ERROR && e->error == -EOPNOTSUPP);

    /* Two requests in one message: two answers, in order. */
    char two[64] = {0};
    struct nlmsghdr *a = (struct nlmsghdr *)two;
    a->nlmsg_len = NLMSG_LENGTH(sizeof g);
    a->nlmsg_type = 0x7ff0;
    a->nlmsg_flags = NLM_F_REQUEST;
    a->nlmsg_seq = 1;
    struct nlmsghdr *b = (struct nlmsghdr *)(two + NLMSG_ALIGN(a->nlmsg_len));
    *b = *a;
    b->nlmsg_seq = 2;
    b->nlmsg_type = NLMSG_NOOP;
    b->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
    size_t total = NLMSG_ALIGN(a->nlmsg_len) + b->nlmsg_len;
    CHECK(send(s, two, total, 0) == (ssize_t)total);
    receive(s);
    CHECK(h->nlmsg_seq == 1 && e->error == -EOPNOTSUPP);
    receive(s);
    CHECK(h->nlmsg_seq == 2 && e->error == 0);
    /* A truncated message is dropped silently, yet counts as sent. */
    CHECK(send(s, two, 10, 0) == 10);
    CHECK_ERR(recv(s, rbuf, sizeof rbuf, MSG_DONTWAIT), EAGAIN);

    /* Sends without data or out of band. */
    CHECK_ERR(send(s, two, 0, 0), ENODATA);
    CHECK_ERR(send(s, two, total, MSG_OOB), EOPNOTSUPP);
    CHECK_ERR(recv(s, rbuf, sizeof rbuf, MSG_OOB), EOPNOTSUPP);
    close(s);
}

static void peek_and_trunc(void) {
    int s = nl_socket();
    struct pollfd p = {.fd = s, .events = POLLIN | POLLOUT};
    CHECK(poll(&p, 1, 0) == 1 && p.revents == POLLOUT);
    CHECK_ERR(recv(s, rbuf, sizeof rbuf, MSG_DONTWAIT), EAGAIN);

    struct ifaddrmsg ifa = {.ifa_family = AF_INET};
    request(s, RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP, &ifa, sizeof ifa);
    CHECK(poll(&p, 1, 0) == 1 && p.revents == (POLLIN | POLLOUT));

    /* How iproute2 sizes its buffer: a peek with no room and MSG_TRUNC. */
    struct iovec iov = {NULL, 0};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    ssize_t whole = recvmsg(s, &m, MSG_PEEK | MSG_TRUNC);
    CHECK(whole >= (ssize_t)NLMSG_LENGTH(sizeof ifa));
    CHECK(m.msg_flags & MSG_TRUNC);
    /* A peek leaves it; a short read cuts it, and the rest is gone. */
    CHECK(recv(s, rbuf, sizeof rbuf, MSG_PEEK) == whole);
    CHECK(recv(s, rbuf, 8, MSG_TRUNC) == whole);
    struct nlmsghdr *h = (struct nlmsghdr *)rbuf;
    ssize_t n = receive(s);
    CHECK(n == NLMSG_LENGTH(sizeof(int)) && h->nlmsg_type == NLMSG_DONE);
    CHECK(poll(&p, 1, 0) == 1 && p.revents == POLLOUT);

    request(s, RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP, &ifa, sizeof ifa);
    iov.iov_base = rbuf;
    iov.iov_len = 16;
    m.msg_flags = 0;
    CHECK(recvmsg(s, &m, 0) == 16 && (m.msg_flags & MSG_TRUNC));
    receive(s);
    CHECK(h->nlmsg_type == NLMSG_DONE);
    close(s);
}

static void binding(void) {
    int s = nl_socket();
    struct sockaddr_nl a = {.nl_family = AF_NETLINK};
    CHECK_ERR(bind(s, (struct sockaddr *)&a, sizeof a - 1), EINVAL);
    a.nl_family = AF_INET;
    CHECK_ERR(bind(s, (struct sockaddr *)&a, sizeof a), EINVAL);
    a.nl_family = AF_NETLINK;
    CHECK_OK(bind(s, (struct sockaddr *)&a, sizeof a));
    uint32_t port = port_of(s);
    printf("first port is the pid: %d\n", port == (uint32_t)getpid());
    /* Bound: only the same port may be named again, with new groups. */
    a.nl_pid = port + 1;
    CHECK_ERR(bind(s, (struct sockaddr *)&a, sizeof a), EINVAL);
    a.nl_pid = port;
    a.nl_groups = RTMGRP_LINK;
    CHECK_OK(bind(s, (struct sockaddr *)&a, sizeof a));
    struct sockaddr_nl got;
    socklen_t len = sizeof got;
    CHECK_OK(getsockname(s, (struct sockaddr *)&got, &len));
    CHECK(got.nl_pid == port && got.nl_groups == RTMGRP_LINK);
    len = sizeof got;
    CHECK_OK(getpeername(s, (struct sockaddr *)&got, &len));
    CHECK(len == sizeof got && got.nl_pid == 0 && got.nl_groups == 0);

    /* A port in use; the next autobind picks another. */
    int t = nl_socket();
    a.nl_groups = 0;
    CHECK_ERR(bind(t, (struct sockaddr *)&a, sizeof a), EADDRINUSE);
    a.nl_pid = 0;
    CHECK_OK(bind(t, (struct sockaddr *)&a, sizeof a));
    uint32_t other = port_of(t);
    CHECK(other != port && other != 0);

    /* From one socket to another's port: allowed with CAP_NET_ADMIN. */
    struct sockaddr_nl to = {.nl_family = AF_NETLINK, .nl_pid = other};
    ssize_t r = sendto(s, "hello", 5, 0, (struct sockaddr *)&to, sizeof to);
    if (r == 5) {
        struct sockaddr_nl from;
        len = sizeof from;
        CHECK(recvfrom(t, rbuf, sizeof rbuf, 0, (struct sockaddr *)&from, &len) == 5);
        CHECK(memcmp(rbuf, "hello", 5) == 0 && from.nl_pid == port);
        printf("unicast delivered\n");
    } else {
        CHECK(errno == EPERM);
        printf("unicast refused\n");
    }
    CHECK_ERR(sendto(s, "hello", 5, 0, (struct sockaddr *)&to, sizeof to - 1), EINVAL);
    close(t);
    close(s);

    /* Types and protocols. */
    CHECK_ERR(socket(AF_NETLINK, SOCK_STREAM, NETLINK_ROUTE), ESOCKTNOSUPPORT);
    CHECK_ERR(socket(AF_NETLINK, SOCK_SEQPACKET, NETLINK_ROUTE), ESOCKTNOSUPPORT);
    CHECK_ERR(socket(AF_NETLINK, SOCK_RAW, 32), EPROTONOSUPPORT);
    CHECK_ERR(socket(AF_NETLINK, SOCK_RAW, -1), EPROTONOSUPPORT);
    int d = socket(AF_NETLINK, SOCK_DGRAM, NETLINK_ROUTE);
    CHECK(d >= 0);
    close(d);
    int sv[2];
    CHECK_ERR(socketpair(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE, sv), EOPNOTSUPP);
    CHECK_ERR(socketpair(AF_NETLINK, SOCK_STREAM, NETLINK_ROUTE, sv), ESOCKTNOSUPPORT);
}

static void options(void) {
    int s = nl_socket();
    int v = -1;
    socklen_t len = sizeof v;
    CHECK_OK(getsockopt(s, SOL_SOCKET, SO_TYPE, &v, &len));
    CHECK(v == SOCK_RAW);
    CHECK_OK(getsockopt(s, SOL_SOCKET, SO_PROTOCOL, &v, &len));
    CHECK(v == NETLINK_ROUTE);
    CHECK_OK(getsockopt(s, SOL_SOCKET, SO_DOMAIN, &v, &len));
    CHECK(v == AF_NETLINK);
    CHECK_OK(getsockopt(s, SOL_SOCKET, SO_RCVBUF, &v, &len));
    printf("rcvbuf %d\n", v);
    int one = 1, zero = 0;
    for (int opt = NETLINK_PKTINFO; opt <= NETLINK_GET_STRICT_CHK; opt++) {
        if (opt == NETLINK_ADD_MEMBERSHIP || opt == NETLINK_DROP_MEMBERSHIP || opt == 6 || opt == 7 ||
            opt == NETLINK_LIST_MEMBERSHIPS || opt == NETLINK_LISTEN_ALL_NSID)
            continue;
        len = sizeof v;
        CHECK_OK(getsockopt(s, SOL_NETLINK, opt, &v, &len));
        CHECK(v == 0 && len == sizeof v);
        CHECK_OK(setsockopt(s, SOL_NETLINK, opt, &one, sizeof one));
        CHECK_OK(getsockopt(s, SOL_NETLINK, opt, &v, &len));
        CHECK(v == 1);
        CHECK_OK(setsockopt(s, SOL_NETLINK, opt, &zero, sizeof zero));
        CHECK_OK(getsockopt(s, SOL_NETLINK, opt, &v, &len));
        CHECK(v == 0);
    }
    short tiny;
    len = sizeof tiny;
    CHECK_ERR(getsockopt(s, SOL_NETLINK, NETLINK_EXT_ACK, &tiny, &len), EINVAL);
    len = sizeof v;
    CHECK_ERR(getsockopt(s, SOL_NETLINK, 99, &v, &len), ENOPROTOOPT);
    CHECK_ERR(setsockopt(s, SOL_NETLINK, 99, &one, sizeof one), ENOPROTOOPT);
    CHECK_ERR(getsockopt(s, SOL_IP, 1, &v, &len), ENOPROTOOPT);
    CHECK_OK(setsockopt(s, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &one, sizeof one));
    CHECK_ERR(setsockopt(s, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &zero, sizeof zero), EINVAL);
    int big = 1000;
    CHECK_ERR(setsockopt(s, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &big, sizeof big), EINVAL);
    CHECK_OK(setsockopt(s, SOL_NETLINK, NETLINK_DROP_MEMBERSHIP, &one, sizeof one));

    /* Strict checking: a filtered dump is marked so. */
    CHECK_OK(setsockopt(s, SOL_NETLINK, NETLINK_GET_STRICT_CHK, &one, sizeof one));
    struct ifaddrmsg ifa = {.ifa_family = AF_INET, .ifa_index = 1};
    request(s, RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP, &ifa, sizeof ifa);
    receive(s);
    struct nlmsghdr *h = (struct nlmsghdr *)rbuf;
    CHECK(h->nlmsg_type == RTM_NEWADDR && h->nlmsg_flags == (NLM_F_MULTI | NLM_F_DUMP_FILTERED));
    receive(s);
    CHECK(h->nlmsg_type == NLMSG_DONE && h->nlmsg_flags == (NLM_F_MULTI | NLM_F_DUMP_FILTERED));
    /* ...and a malformed one answers its error in NLMSG_DONE. */
    ifa.ifa_prefixlen = 8;
    request(s, RTM_GETADDR, NLM_F_REQUEST | NLM_F_DUMP, &ifa, sizeof ifa);
    receive(s);
    CHECK(h->nlmsg_type == NLMSG_DONE && *(int *)NLMSG_DATA(h) == -EINVAL);

    CHECK_ERR(shutdown(s, SHUT_RDWR), EOPNOTSUPP);
    CHECK_ERR(listen(s, 1), EOPNOTSUPP);
    CHECK_ERR(accept(s, NULL, NULL), EOPNOTSUPP);
    int avail;
    CHECK_ERR(ioctl(s, FIONREAD, &avail), ENOTTY);
    close(s);
}

/* The interface ioctls every socket answers, here on a netlink one. */
static void ioctls(void) {
    int s = nl_socket();
    struct ifreq r;
    memset(&r, 0, sizeof r);
    strcpy(r.ifr_name, "lo");
    CHECK_OK(ioctl(s, SIOCGIFFLAGS, &r));
    printf("SIOCGIFFLAGS %#x\n", (unsigned short)r.ifr_flags);
    CHECK_OK(ioctl(s, SIOCGIFINDEX, &r));
    printf("SIOCGIFINDEX %d\n", r.ifr_ifindex);
    CHECK_OK(ioctl(s, SIOCGIFMTU, &r));
    printf("SIOCGIFMTU %d\n", r.ifr_mtu);
    CHECK_OK(ioctl(s, SIOCGIFTXQLEN, &r));
    printf("SIOCGIFTXQLEN %d\n", r.ifr_qlen);
    CHECK_OK(ioctl(s, SIOCGIFMETRIC, &r));
    printf("SIOCGIFMETRIC %d\n", r.ifr_metric);
    CHECK_OK(ioctl(s, SIOCGIFHWADDR, &r));
    printf("SIOCGIFHWADDR family %d address %02x%02x%02x%02x%02x%02x\n", r.ifr_hwaddr.sa_family,
           (unsigned char)r.ifr_hwaddr.sa_data[0], (unsigned char)r.ifr_hwaddr.sa_data[1],
           (unsigned char)r.ifr_hwaddr.sa_data[2], (unsigned char)r.ifr_hwaddr.sa_data[3],
           (unsigned char)r.ifr_hwaddr.sa_data[4], (unsigned char)r.ifr_hwaddr.sa_data[5]);
    strcpy(r.ifr_name, "lo:1");
    CHECK_OK(ioctl(s, SIOCGIFFLAGS, &r));
    CHECK(strcmp(r.ifr_name, "lo:1") == 0);
    memset(&r, 0, sizeof r);
    r.ifr_ifindex = 1;
    CHECK_OK(ioctl(s, SIOCGIFNAME, &r));
    printf("SIOCGIFNAME %s\n", r.ifr_name);
    r.ifr_ifindex = 999999;
    CHECK_ERR(ioctl(s, SIOCGIFNAME, &r), ENODEV);
    strcpy(r.ifr_name, "nosuchif0");
    CHECK_ERR(ioctl(s, SIOCGIFFLAGS, &r), ENODEV);
    CHECK_ERR(ioctl(s, SIOCGIFINDEX, &r), ENODEV);
    strcpy(r.ifr_name, "lo");
    /* The address ioctls are AF_INET's alone. */
    CHECK_ERR(ioctl(s, SIOCGIFADDR, &r), ENOTTY);
    CHECK_ERR(ioctl(s, SIOCGIFNETMASK, &r), ENOTTY);
    CHECK_ERR(ioctl(s, SIOCGIFFLAGS, (void *)8), EFAULT);

    /* SIOCGIFCONF: the IPv4 addresses, lo's among them. */
    struct ifconf c = {.ifc_len = 0, .ifc_buf = NULL};
    CHECK_OK(ioctl(s, SIOCGIFCONF, &c));
    CHECK(c.ifc_len >= (int)sizeof(struct ifreq) && c.ifc_len % sizeof(struct ifreq) == 0);
    struct ifreq reqs[16];
    c.ifc_len = sizeof reqs;
    c.ifc_req = reqs;
    CHECK_OK(ioctl(s, SIOCGIFCONF, &c));
    for (int i = 0; i < c.ifc_len / (int)sizeof(struct ifreq); i++) {
        if (strcmp(reqs[i].ifr_name, "lo") != 0)
            continue;
        struct sockaddr_in *in = (struct sockaddr_in *)&reqs[i].ifr_addr;
        printf("SIOCGIFCONF lo family %d %s\n", in->sin_family, inet_ntoa(in->sin_addr));
    }
    /* A unix socket answers the interface ioctls too, but not the
     * address ones. */
    int u = socket(AF_UNIX, SOCK_DGRAM, 0);
    CHECK(u >= 0);
    strcpy(r.ifr_name, "lo");
    CHECK_OK(ioctl(u, SIOCGIFINDEX, &r));
    CHECK(r.ifr_ifindex == 1);
    CHECK_ERR(ioctl(u, SIOCGIFADDR, &r), ENOTTY);
    close(u);

    /* Too little room for one: none written. */
    c.ifc_len = sizeof(struct ifreq) - 1;
    CHECK_OK(ioctl(s, SIOCGIFCONF, &c));
    CHECK(c.ifc_len == 0);
    close(s);
}

static void libc(void) {
    struct ifaddrs *all;
    CHECK_OK(getifaddrs(&all));
    char text[INET6_ADDRSTRLEN], mask[INET6_ADDRSTRLEN];
    for (struct ifaddrs *i = all; i; i = i->ifa_next) {
        if (strcmp(i->ifa_name, "lo") != 0 || !i->ifa_addr)
            continue;
        int f = i->ifa_addr->sa_family;
        if (f == AF_INET) {
            inet_ntop(f, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, text, sizeof text);
            inet_ntop(f, &((struct sockaddr_in *)i->ifa_netmask)->sin_addr, mask, sizeof mask);
        } else if (f == AF_INET6) {
            inet_ntop(f, &((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, text, sizeof text);
            inet_ntop(f, &((struct sockaddr_in6 *)i->ifa_netmask)->sin6_addr, mask, sizeof mask);
        } else {
            strcpy(text, "-");
            strcpy(mask, "-");
        }
        printf("getifaddrs lo family %d flags %#x %s/%s\n", f, i->ifa_flags, text, mask);
    }
    freeifaddrs(all);

    struct if_nameindex *names = if_nameindex();
    CHECK(names != NULL);
    for (struct if_nameindex *n = names; n && n->if_index; n++)
        if (n->if_index == 1)
            printf("if_nameindex %u %s\n", n->if_index, n->if_name);
    if_freenameindex(names);

    /* These ask an ioctl of a socket of the C library's choosing. */
    printf("if_nametoindex lo %u\n", if_nametoindex("lo"));
    char name[IF_NAMESIZE];
    CHECK(if_indextoname(1, name) != NULL && strcmp(name, "lo") == 0);
    errno = 0;
    CHECK(if_nametoindex("nosuchif0") == 0 && errno == ENODEV);
    CHECK(if_indextoname(999999, name) == NULL && errno == ENXIO);
}

int main(void) {
    binding();
    dumps();
    errors_and_acks();
    peek_and_trunc();
    options();
    ioctls();
    libc();
    CHECK(from_kernel);
    return done();
}
