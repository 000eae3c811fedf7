/* What the sandbox refuses by design, as a container without CAP_NET_RAW
 * and with fixed interfaces refuses it: packet and raw IP sockets, the
 * netlink protocols it does not serve, families it does not have, and every
 * change to the interfaces, addresses and routes (EPERM without
 * CAP_NET_ADMIN, EOPNOTSUPP with it). Run in the sandbox only: natively a
 * root caller would change the host's network. */
#define _GNU_SOURCE
#include <linux/capability.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "t.h"

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif
#ifndef AF_ALG
#define AF_ALG 38
#endif

/* Sends RTM_NEWADDR for 10.0.0.1/8 on lo and returns the errno answered. */
static int new_address(int s) {
    char buf[128] = {0};
    struct nlmsghdr *h = (struct nlmsghdr *)buf;
    struct ifaddrmsg *ifa = NLMSG_DATA(h);
    h->nlmsg_len = NLMSG_LENGTH(sizeof *ifa);
    h->nlmsg_type = RTM_NEWADDR;
    h->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
    h->nlmsg_seq = 7;
    ifa->ifa_family = AF_INET;
    ifa->ifa_prefixlen = 8;
    ifa->ifa_index = 1;
    struct rtattr *a = (struct rtattr *)(buf + NLMSG_ALIGN(h->nlmsg_len));
    a->rta_type = IFA_LOCAL;
    a->rta_len = RTA_LENGTH(4);
    uint32_t addr = htonl(0x0a000001);
    memcpy(RTA_DATA(a), &addr, 4);
    h->nlmsg_len = NLMSG_ALIGN(h->nlmsg_len) + a->rta_len;
    CHECK(send(s, buf, h->nlmsg_len, 0) == (ssize_t)h->nlmsg_len);
    char reply[256];
    ssize_t n = recv(s, reply, sizeof reply, 0);
    struct nlmsghdr *r = (struct nlmsghdr *)reply;
    CHECK(n > 0 && r->nlmsg_type == NLMSG_ERROR && r->nlmsg_seq == 7);
    return -((struct nlmsgerr *)NLMSG_DATA(r))->error;
}

static int has_net_admin(void) {
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    CHECK_OK(syscall(SYS_capget, &h, d));
    return (d[0].effective >> CAP_NET_ADMIN) & 1;
}

static void refusals(int expected) {
    int s = socket(AF_NETLINK, SOCK_RAW, NETLINK_ROUTE);
    CHECK(s >= 0);
    CHECK(new_address(s) == expected);
    struct ifreq r;
    memset(&r, 0, sizeof r);
    strcpy(r.ifr_name, "lo");
    r.ifr_mtu = 1500;
    CHECK_ERR(ioctl(s, SIOCSIFMTU, &r), expected);
    CHECK_ERR(ioctl(s, SIOCSIFFLAGS, &r), expected);
    CHECK_ERR(ioctl(s, SIOCSIFNAME, &r), expected);
    /* The interfaces are as they were. */
    CHECK_OK(ioctl(s, SIOCGIFMTU, &r));
    CHECK(r.ifr_mtu == 65536);
    close(s);
}

int main(void) {
    CHECK_ERR(socket(AF_PACKET, SOCK_RAW, 0), EPERM);
    CHECK_ERR(socket(AF_PACKET, SOCK_DGRAM, 0), EPERM);
    CHECK_ERR(socket(AF_INET, SOCK_RAW, IPPROTO_ICMP), EPERM);
    CHECK_ERR(socket(AF_INET6, SOCK_RAW, IPPROTO_ICMPV6), EPERM);
    CHECK_ERR(socket(AF_NETLINK, SOCK_RAW, NETLINK_AUDIT), EPROTONOSUPPORT);
    CHECK_ERR(socket(AF_NETLINK, SOCK_RAW, NETLINK_KOBJECT_UEVENT), EPROTONOSUPPORT);
    CHECK_ERR(socket(AF_NETLINK, SOCK_RAW, NETLINK_GENERIC), EPROTONOSUPPORT);
    CHECK_ERR(socket(AF_BLUETOOTH, SOCK_STREAM, 0), EAFNOSUPPORT);
    CHECK_ERR(socket(AF_ALG, SOCK_SEQPACKET, 0), EAFNOSUPPORT);
    CHECK_ERR(socket(AF_VSOCK, SOCK_STREAM, 0), EAFNOSUPPORT);
    CHECK_ERR(socket(AF_CAN, SOCK_RAW, 1), EAFNOSUPPORT);
    CHECK_ERR(socket(AF_MAX, SOCK_STREAM, 0), EAFNOSUPPORT);

    /* With CAP_NET_ADMIN (not a container's default) the change is
     * unsupported; without it, forbidden. */
    refusals(has_net_admin() ? EOPNOTSUPP : EPERM);
    if (geteuid() == 0) {
        CHECK_OK(setuid(65534));
        refusals(EPERM);
    }
    return done();
}
