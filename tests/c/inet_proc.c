/* /proc/net/tcp, tcp6, udp and udp6 list the sockets: each line with its
 * addresses, state, queue and inode as Linux prints them. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "t.h"

static int port_of(int fd) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0) return -1;
    if (ss.ss_family == AF_INET6) return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static unsigned long ino_of(int fd) {
    struct stat st;
    return fstat(fd, &st) == 0 ? (unsigned long)st.st_ino : 0;
}

/* The line of `file` for the socket `fd`, found by its inode; 1 if found,
 * with its fields. */
static int find(const char *file, int fd, char *local, char *remote, unsigned *state, unsigned *rxq) {
    FILE *f = fopen(file, "r");
    if (!f) return 0;
    char line[512];
    int found = 0;
    if (!fgets(line, sizeof line, f)) goto out;
    CHECK(strstr(line, " sl  local_address") != NULL);
    while (fgets(line, sizeof line, f)) {
        unsigned txq, rq, uid;
        unsigned long ino;
        if (sscanf(line, "%*d: %63s %63s %x %x:%x %*x:%*x %*x %u %*d %lu", local, remote, state, &txq, &rq, &uid, &ino) !=
            7)
            continue;
        if (ino == ino_of(fd)) {
            *rxq = rq;
            found = 1;
            break;
        }
    }
out:
    fclose(f);
    return found;
}

int main(void) {
    char local[64], remote[64], want[64];
    unsigned state = 0, rxq = 0;

    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK_OK(bind(l, (struct sockaddr *)&a, sizeof a));
    CHECK_OK(listen(l, 4));
    int port = port_of(l);
    CHECK(find("/proc/net/tcp", l, local, remote, &state, &rxq));
    snprintf(want, sizeof want, "0100007F:%04X", port);
    CHECK(strcmp(local, want) == 0);
    CHECK(strcmp(remote, "00000000:0000") == 0);
    CHECK(state == 0x0A);

    int c = socket(AF_INET, SOCK_STREAM, 0);
    a.sin_port = htons(port);
    CHECK_OK(connect(c, (struct sockaddr *)&a, sizeof a));
    int s = accept(l, NULL, NULL);
    CHECK(write(c, "12345", 5) == 5);
    CHECK(find("/proc/net/tcp", s, local, remote, &state, &rxq));
    CHECK(strcmp(local, want) == 0);
    snprintf(want, sizeof want, "0100007F:%04X", port_of(c));
    CHECK(strcmp(remote, want) == 0);
    CHECK(state == 0x01 && rxq == 5);
    CHECK(!find("/proc/net/tcp6", s, local, remote, &state, &rxq));
    close(c);
    CHECK(find("/proc/net/tcp", s, local, remote, &state, &rxq));
    CHECK(state == 0x08);

    int u = socket(AF_INET6, SOCK_DGRAM, 0);
    struct sockaddr_in6 any = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT};
    CHECK_OK(bind(u, (struct sockaddr *)&any, sizeof any));
    CHECK(find("/proc/net/udp6", u, local, remote, &state, &rxq));
    snprintf(want, sizeof want, "00000000000000000000000000000000:%04X", port_of(u));
    CHECK(strcmp(local, want) == 0);
    CHECK(state == 0x07);
    CHECK(!find("/proc/net/udp", u, local, remote, &state, &rxq));
    close(u), close(s), close(l);
    return done();
}
