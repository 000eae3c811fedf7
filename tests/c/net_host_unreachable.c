/* With the sandbox's own network (--network=none), an address outside
 * its loopback is unreachable: TCP connect, UDP connect and sendto fail
 * with ENETUNREACH, for IPv4 (argv[1]) and IPv6 (argv[2]) alike, while
 * the loopback still works. Prints "unreachable", then waits for a line
 * on stdin, so the test can look at the sentry meanwhile. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "t.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: net_host_unreachable IPV4 IPV6\n");
        return 2;
    }
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(80)};
    CHECK(inet_pton(AF_INET, argv[1], &to.sin_addr) == 1);
    struct sockaddr_in6 to6 = {.sin6_family = AF_INET6, .sin6_port = htons(80)};
    CHECK(inet_pton(AF_INET6, argv[2], &to6.sin6_addr) == 1);

    int c = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(c >= 0);
    CHECK_ERR(connect(c, (struct sockaddr *)&to, sizeof to), ENETUNREACH);
    close(c);
    c = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK_ERR(sendto(c, "x", 1, 0, (struct sockaddr *)&to, sizeof to), ENETUNREACH);
    CHECK_ERR(connect(c, (struct sockaddr *)&to, sizeof to), ENETUNREACH);
    close(c);
    c = socket(AF_INET6, SOCK_STREAM, 0);
    CHECK(c >= 0);
    CHECK_ERR(connect(c, (struct sockaddr *)&to6, sizeof to6), ENETUNREACH);
    close(c);

    /* The loopback is there: a datagram to itself. */
    c = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in self = {.sin_family = AF_INET};
    self.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_OK(bind(c, (struct sockaddr *)&self, sizeof self));
    socklen_t len = sizeof self;
    CHECK_OK(getsockname(c, (struct sockaddr *)&self, &len));
    CHECK(sendto(c, "loop", 4, 0, (struct sockaddr *)&self, sizeof self) == 4);
    char buf[8];
    CHECK(recv(c, buf, sizeof buf, 0) == 4);
    close(c);

    printf("unreachable\n");
    fflush(stdout);
    char line[8];
    (void)!fgets(line, sizeof line, stdin);
    return done();
}
