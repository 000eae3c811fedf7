/* With --network=none nothing leaves the sandbox: addresses outside
 * loopback are unreachable, and raw sockets are refused as in a container
 * without CAP_NET_RAW. (Run in the sandbox only: the host has a network.) */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "t.h"

int main(void) {
    struct sockaddr_in out = {.sin_family = AF_INET, .sin_port = htons(80)};
    inet_pton(AF_INET, "192.0.2.1", &out.sin_addr);
    struct sockaddr_in6 out6 = {.sin6_family = AF_INET6, .sin6_port = htons(80)};
    inet_pton(AF_INET6, "2001:db8::1", &out6.sin6_addr);

    int t = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_ERR(connect(t, (struct sockaddr *)&out, sizeof out), ENETUNREACH);
    close(t);
    t = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK_ERR(connect(t, (struct sockaddr *)&out, sizeof out), ENETUNREACH);
    close(t);
    t = socket(AF_INET6, SOCK_STREAM, 0);
    CHECK_ERR(connect(t, (struct sockaddr *)&out6, sizeof out6), ENETUNREACH);
    close(t);
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK_ERR(sendto(u, "x", 1, 0, (struct sockaddr *)&out, sizeof out), ENETUNREACH);
    CHECK_ERR(connect(u, (struct sockaddr *)&out, sizeof out), ENETUNREACH);
    close(u);
    u = socket(AF_INET6, SOCK_DGRAM, 0);
    CHECK_ERR(sendto(u, "x", 1, 0, (struct sockaddr *)&out6, sizeof out6), ENETUNREACH);
    close(u);

    CHECK_ERR(socket(AF_INET, SOCK_RAW, IPPROTO_ICMP), EPERM);
    CHECK_ERR(socket(AF_INET6, SOCK_RAW, IPPROTO_ICMPV6), EPERM);
    CHECK_ERR(socket(AF_PACKET, SOCK_RAW, 0), EPERM);

    /* Connecting to the wildcard address reaches loopback. */
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    CHECK_OK(bind(l, (struct sockaddr *)&a, sizeof a));
    CHECK_OK(listen(l, 1));
    socklen_t len = sizeof a;
    CHECK_OK(getsockname(l, (struct sockaddr *)&a, &len));
    t = socket(AF_INET, SOCK_STREAM, 0);
    CHECK_OK(connect(t, (struct sockaddr *)&a, sizeof a));
    struct sockaddr_in peer;
    len = sizeof peer;
    CHECK_OK(getpeername(t, (struct sockaddr *)&peer, &len));
    CHECK(peer.sin_addr.s_addr == htonl(INADDR_LOOPBACK));
    close(t), close(l);
    return done();
}
