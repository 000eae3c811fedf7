/* 10,000 descriptor passes whose sockets are closed at both ends, each in
 * a cycle (a socket in flight on itself, two sockets on each other): every
 * file in flight is released, so /proc/net/unix lists as many sockets after
 * as before and the pipe passed beside them reaches its end at once. Run in
 * the sandbox only: the host's list holds the host's sockets, and Linux
 * collects cycles in the background. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "t.h"

static int sockets_listed(void) {
    FILE *f = fopen("/proc/net/unix", "r");
    if (!f)
        return -1;
    int n = -1; /* the header */
    char line[512];
    while (fgets(line, sizeof line, f))
        n++;
    fclose(f);
    return n;
}

static int send_fds(int sock, const int *fds, int n) {
    char cbuf[CMSG_SPACE(sizeof(int) * 4)];
    char c = 'x';
    struct iovec iov = {.iov_base = &c, .iov_len = 1};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = CMSG_SPACE(sizeof(int) * n)};
    struct cmsghdr *h = CMSG_FIRSTHDR(&m);
    h->cmsg_level = SOL_SOCKET;
    h->cmsg_type = SCM_RIGHTS;
    h->cmsg_len = CMSG_LEN(sizeof(int) * n);
    memcpy(CMSG_DATA(h), fds, sizeof(int) * n);
    return sendmsg(sock, &m, 0) == 1 ? 0 : -1;
}

int main(void) {
    int before = sockets_listed();
    CHECK(before >= 0);
    int failures = 0;
    for (int i = 0; i < 10000; i++) {
        int p[2], a[2], b[2];
        char c;
        if (pipe2(p, O_NONBLOCK) || socketpair(AF_UNIX, SOCK_STREAM, 0, a) || socketpair(AF_UNIX, SOCK_DGRAM, 0, b)) {
            failures++;
            break;
        }
        if (i % 2 == 0) {
            /* On itself. */
            int self[] = {a[0], p[1]};
            failures += send_fds(a[1], self, 2) != 0;
        } else {
            /* On each other. */
            int ab[] = {a[0], p[1]};
            failures += send_fds(b[1], ab, 2) != 0;
            failures += send_fds(a[1], &b[0], 1) != 0;
        }
        close(p[1]);
        close(a[0]);
        close(b[0]);
        close(a[1]);
        close(b[1]);
        failures += read(p[0], &c, 1) != 0;
        close(p[0]);
    }
    CHECK(failures == 0);
    CHECK(sockets_listed() == before);
    return done();
}
