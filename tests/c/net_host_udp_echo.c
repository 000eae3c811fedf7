/* A UDP echo server: binds the IPv4 loopback's port argv[1], prints
 * "listening PORT", then answers argv[2] datagrams, each with "echo: "
 * and the datagram, to its sender, and prints how many senders it saw. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "t.h"

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: net_host_udp_echo PORT COUNT\n");
        return 2;
    }
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK(s >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[1]))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK_OK(bind(s, (struct sockaddr *)&a, sizeof a));
    printf("listening %s\n", argv[1]);
    fflush(stdout);
    struct sockaddr_in seen[16];
    int senders = 0;
    for (int i = 0; i < atoi(argv[2]); i++) {
        char buf[256], reply[300];
        struct sockaddr_in from;
        socklen_t len = sizeof from;
        ssize_t n = recvfrom(s, buf, sizeof buf - 1, 0, (struct sockaddr *)&from, &len);
        CHECK(n >= 0);
        if (n < 0)
            break;
        buf[n] = 0;
        int known = 0;
        for (int k = 0; k < senders; k++)
            known |= seen[k].sin_port == from.sin_port && seen[k].sin_addr.s_addr == from.sin_addr.s_addr;
        if (!known && senders < 16)
            seen[senders++] = from;
        int rl = snprintf(reply, sizeof reply, "echo: %s", buf);
        CHECK(sendto(s, reply, rl, 0, (struct sockaddr *)&from, len) == rl);
    }
    printf("senders %d\n", senders);
    return done();
}
