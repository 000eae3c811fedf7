/* An inet server a client on the host reaches: listens on the loopback
 * of family argv[1] ("4" or "6"), on port argv[3] or one the kernel
 * chooses, prints "listening PORT" once it listens, then serves argv[2]
 * connections (1 if not given): reads a line, answers "echo: LINE" and closes. Blocks in
 * accept (the first connection) and in poll (the others), then accept4
 * with flags. The peer's address is the client's. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "t.h"

static void serve(int s) {
    char line[128];
    size_t got = 0;
    while (got < sizeof line - 1) {
        ssize_t n = recv(s, line + got, 1, 0);
        CHECK(n >= 0);
        if (n <= 0 || line[got] == '\n') {
            got += n > 0;
            break;
        }
        got++;
    }
    line[got] = 0;
    char reply[160];
    int len = snprintf(reply, sizeof reply, "echo: %s", line);
    CHECK(send(s, reply, len, MSG_NOSIGNAL) == len);
    close(s);
}

int main(int argc, char **argv) {
    int six = argc > 1 && strcmp(argv[1], "6") == 0;
    int count = argc > 2 ? atoi(argv[2]) : 1;
    int want = argc > 3 ? atoi(argv[3]) : 0;
    int l = socket(six ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
    CHECK(l >= 0);
    int one = 1;
    CHECK_OK(setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one));
    struct sockaddr_storage addr = {0};
    socklen_t len;
    if (six) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&addr;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_loopback;
        a->sin6_port = htons(want);
        len = sizeof *a;
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&addr;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a->sin_port = htons(want);
        len = sizeof *a;
    }
    CHECK_OK(bind(l, (struct sockaddr *)&addr, len));
    CHECK_ERR(accept(l, NULL, NULL), EINVAL);
    CHECK_OK(listen(l, 16));
    int v = 0;
    socklen_t vl = sizeof v;
    CHECK_OK(getsockopt(l, SOL_SOCKET, SO_ACCEPTCONN, &v, &vl));
    CHECK(v == 1);
    socklen_t alen = sizeof addr;
    CHECK_OK(getsockname(l, (struct sockaddr *)&addr, &alen));
    int port = ntohs(six ? ((struct sockaddr_in6 *)&addr)->sin6_port : ((struct sockaddr_in *)&addr)->sin_port);
    printf("listening %d\n", port);
    fflush(stdout);

    for (int i = 0; i < count; i++) {
        struct sockaddr_storage peer;
        socklen_t plen = sizeof peer;
        int s;
        if (i == 0) {
            s = accept(l, (struct sockaddr *)&peer, &plen);
        } else {
            struct pollfd p = {l, POLLIN, 0};
            CHECK(poll(&p, 1, -1) == 1 && (p.revents & POLLIN));
            s = accept4(l, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC | SOCK_NONBLOCK);
            CHECK(s >= 0 && (fcntl(s, F_GETFL) & O_NONBLOCK) && (fcntl(s, F_GETFD) & FD_CLOEXEC));
            if (s >= 0)
                fcntl(s, F_SETFL, 0);
        }
        CHECK(s >= 0);
        if (s < 0)
            break;
        CHECK(peer.ss_family == (six ? AF_INET6 : AF_INET));
        CHECK(plen == (six ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in)));
        serve(s);
    }
    close(l);
    return done();
}
