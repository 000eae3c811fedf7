/* AF_UNIX datagram and seqpacket sockets: message boundaries, MSG_TRUNC,
 * peeking, sender addresses, connect and disconnect, queue limits and the
 * poll bits they give, credentials, and the errno cases Linux gives. Works
 * in the directory argv[1] (see work_dir.h). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "work_dir.h"

static socklen_t path_addr(struct sockaddr_un *a, const char *path) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    strcpy(a->sun_path, path);
    return offsetof(struct sockaddr_un, sun_path) + strlen(path) + 1;
}

static short revents(int fd, short events) {
    struct pollfd p = {.fd = fd, .events = events};
    if (poll(&p, 1, 0) < 0)
        return -1;
    return p.revents;
}

static void dgram_pair(void) {
    int sv[2], v;
    char buf[64];
    CHECK_OK(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv));
    CHECK(revents(sv[0], POLLIN | POLLOUT) == POLLOUT);
    CHECK(send(sv[0], "one", 3, 0) == 3);
    CHECK(send(sv[0], "", 0, 0) == 0);
    CHECK(send(sv[0], "three33", 7, 0) == 7);
    CHECK(ioctl(sv[1], FIONREAD, &v) == 0 && v == 3);
    CHECK(revents(sv[1], POLLIN | POLLOUT) == (POLLIN | POLLOUT));
    /* One datagram a read, whatever the room. */
    CHECK(read(sv[1], buf, sizeof buf) == 3);
    CHECK(ioctl(sv[1], FIONREAD, &v) == 0 && v == 0);
    CHECK(read(sv[1], buf, sizeof buf) == 0);
    /* Cut short: the rest is lost; MSG_TRUNC gives the real length. */
    CHECK(recv(sv[1], buf, 2, MSG_PEEK | MSG_TRUNC) == 7);
    struct iovec iov = {.iov_base = buf, .iov_len = 5};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    CHECK(recvmsg(sv[1], &m, 0) == 5 && (m.msg_flags & MSG_TRUNC) && memcmp(buf, "three", 5) == 0);
    CHECK_ERR(recv(sv[1], buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
    /* Unnamed senders have no address. */
    CHECK(send(sv[0], "x", 1, 0) == 1);
    struct sockaddr_un from;
    socklen_t len = sizeof from;
    CHECK(recvfrom(sv[1], buf, sizeof buf, 0, (struct sockaddr *)&from, &len) == 1);
    CHECK(len == 0);
    /* SO_PEEK_OFF walks across datagrams. */
    v = 0;
    CHECK_OK(setsockopt(sv[1], SOL_SOCKET, SO_PEEK_OFF, &v, sizeof v));
    CHECK(send(sv[0], "abcd", 4, 0) == 4);
    CHECK(send(sv[0], "efgh", 4, 0) == 4);
    CHECK(recv(sv[1], buf, 2, MSG_PEEK) == 2 && memcmp(buf, "ab", 2) == 0);
    CHECK(recv(sv[1], buf, 10, MSG_PEEK) == 2 && memcmp(buf, "cd", 2) == 0);
    CHECK(recv(sv[1], buf, 10, MSG_PEEK) == 4 && memcmp(buf, "efgh", 4) == 0);
    CHECK(read(sv[1], buf, sizeof buf) == 4 && memcmp(buf, "abcd", 4) == 0);
    len = sizeof v;
    CHECK_OK(getsockopt(sv[1], SOL_SOCKET, SO_PEEK_OFF, &v, &len));
    CHECK(v == 4);
    CHECK(read(sv[1], buf, sizeof buf) == 4);

    /* A datagram larger than the send buffer can never go. */
    v = 4096;
    CHECK_OK(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &v, sizeof v));
    static char big[16384];
    CHECK_ERR(send(sv[0], big, 8192 - 31, 0), EMSGSIZE);
    CHECK(send(sv[0], big, 8192 - 32, 0) == 8192 - 32);
    CHECK(read(sv[1], big, sizeof big) == 8192 - 32);

    /* Shutdown of a datagram socket is its own: the peer may still send. */
    CHECK_OK(shutdown(sv[1], SHUT_RD));
    CHECK(revents(sv[1], POLLIN | POLLRDHUP) == (POLLIN | POLLRDHUP));
    CHECK(read(sv[1], buf, sizeof buf) == 0);
    CHECK_ERR(send(sv[0], "x", 1, 0), EPIPE);
    CHECK_OK(shutdown(sv[0], SHUT_WR));
    CHECK_ERR(send(sv[0], "x", 1, MSG_NOSIGNAL), EPIPE);
    CHECK(revents(sv[0], POLLIN | POLLOUT | POLLHUP) == POLLOUT);
    close(sv[0]);
    close(sv[1]);

    /* The peer's end: the survivor's sends are refused, then unconnected. */
    CHECK_OK(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv));
    close(sv[1]);
    CHECK(revents(sv[0], POLLIN | POLLOUT | POLLHUP) == POLLOUT);
    CHECK_ERR(send(sv[0], "x", 1, 0), ECONNREFUSED);
    CHECK_ERR(send(sv[0], "x", 1, 0), ENOTCONN);
    CHECK_ERR(recv(sv[0], buf, 1, MSG_DONTWAIT), EAGAIN);
    close(sv[0]);
}

static void dgram_named(void) {
    struct sockaddr_un a, b, from;
    socklen_t alen = path_addr(&a, "d1"), blen = path_addr(&b, "d2"), len;
    char buf[64];
    int r = socket(AF_UNIX, SOCK_DGRAM, 0);
    int s = socket(AF_UNIX, SOCK_DGRAM, 0);
    CHECK_ERR(sendto(s, "x", 1, 0, (struct sockaddr *)&a, alen), ENOENT);
    CHECK_ERR(send(s, "x", 1, 0), ENOTCONN);
    CHECK_ERR(sendto(s, "x", 1, 0, (struct sockaddr *)&a, sizeof(sa_family_t)), EINVAL);
    CHECK_OK(bind(r, (struct sockaddr *)&a, alen));
    CHECK(sendto(s, "anon", 4, 0, (struct sockaddr *)&a, alen) == 4);
    len = sizeof from;
    CHECK(recvfrom(r, buf, sizeof buf, 0, (struct sockaddr *)&from, &len) == 4 && len == 0);
    CHECK_OK(bind(s, (struct sockaddr *)&b, blen));
    CHECK(sendto(s, "named", 5, 0, (struct sockaddr *)&a, alen) == 5);
    len = sizeof from;
    CHECK(recvfrom(r, buf, sizeof buf, 0, (struct sockaddr *)&from, &len) == 5);
    CHECK(len == blen && strcmp(from.sun_path, "d2") == 0);
    /* To itself. */
    CHECK(sendto(r, "self", 4, 0, (struct sockaddr *)&a, alen) == 4);
    CHECK(recv(r, buf, sizeof buf, 0) == 4);
    /* Not a datagram socket. */
    int st = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un c;
    socklen_t clen = path_addr(&c, "d3");
    CHECK_OK(bind(st, (struct sockaddr *)&c, clen));
    CHECK_ERR(sendto(s, "x", 1, 0, (struct sockaddr *)&c, clen), EPROTOTYPE);
    close(st);

    /* Connected to r: sends need no address; r, connected elsewhere,
     * takes nothing from a third. */
    CHECK_OK(connect(s, (struct sockaddr *)&a, alen));
    len = sizeof from;
    CHECK_OK(getpeername(s, (struct sockaddr *)&from, &len));
    CHECK(len == alen && strcmp(from.sun_path, "d1") == 0);
    CHECK(send(s, "conn", 4, 0) == 4);
    CHECK(recv(r, buf, sizeof buf, 0) == 4);
    CHECK_OK(connect(r, (struct sockaddr *)&b, blen));
    int t = socket(AF_UNIX, SOCK_DGRAM, 0);
    CHECK_ERR(sendto(t, "x", 1, 0, (struct sockaddr *)&a, alen), EPERM);
    CHECK_ERR(connect(t, (struct sockaddr *)&a, alen), EPERM);
    /* Disconnect with AF_UNSPEC. */
    struct sockaddr unspec = {.sa_family = AF_UNSPEC};
    CHECK_OK(connect(r, &unspec, sizeof unspec));
    CHECK_ERR(getpeername(r, (struct sockaddr *)&from, &len), ENOTCONN);
    CHECK(sendto(t, "t", 1, 0, (struct sockaddr *)&a, alen) == 1);
    CHECK(recv(r, buf, sizeof buf, 0) == 1);
    close(t);

    /* A receiver not connected back holds max_dgram_qlen datagrams from
     * others (the sender's buffer made large enough not to bind first);
     * then EAGAIN, and poll says the sender cannot write. */
    int q = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    int v = 1 << 20;
    CHECK_OK(setsockopt(q, SOL_SOCKET, SO_SNDBUF, &v, sizeof v));
    CHECK_OK(connect(q, (struct sockaddr *)&a, alen));
    FILE *f = fopen("/proc/sys/net/unix/max_dgram_qlen", "r");
    int qlen = 0;
    CHECK(f && fscanf(f, "%d", &qlen) == 1);
    if (f)
        fclose(f);
    int sent = 0;
    while (send(q, "", 0, 0) == 0)
        sent++;
    CHECK(errno == EAGAIN);
    CHECK(sent == qlen + 1);
    CHECK(revents(q, POLLOUT) == 0);
    int drained = 0;
    while (recv(r, buf, sizeof buf, MSG_DONTWAIT) == 0)
        drained++;
    CHECK(drained == sent);
    CHECK(revents(q, POLLOUT) == POLLOUT);
    for (int i = 0; i < sent; i++)
        send(q, "", 0, 0);
    CHECK_ERR(send(q, "", 0, 0), EAGAIN);
    /* A blocked sender goes on once the receiver reads. */
    int fl = fcntl(q, F_GETFL);
    fcntl(q, F_SETFL, fl & ~O_NONBLOCK);
    pid_t pid = fork();
    if (pid == 0)
        _exit(send(q, "late", 4, 0) == 4 ? 0 : 1);
    int got = 0;
    for (;;) {
        ssize_t n = recv(r, buf, sizeof buf, 0);
        if (n == 4) {
            CHECK(memcmp(buf, "late", 4) == 0);
            break;
        }
        got++;
    }
    CHECK(got == sent);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(q);

    /* Credentials: none asked for, none given; asked for, the sender's. */
    int one = 1;
    CHECK_OK(setsockopt(r, SOL_SOCKET, SO_PASSCRED, &one, sizeof one));
    CHECK(sendto(s, "c", 1, 0, (struct sockaddr *)&a, alen) == 1);
    char cbuf[CMSG_SPACE(sizeof(struct ucred))];
    struct iovec iov = {.iov_base = buf, .iov_len = sizeof buf};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
    CHECK(recvmsg(r, &m, 0) == 1);
    struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
    CHECK(cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_CREDENTIALS);
    if (cm) {
        struct ucred u;
        memcpy(&u, CMSG_DATA(cm), sizeof u);
        CHECK(u.pid == getpid() && u.uid == getuid() && u.gid == getgid());
    }
    /* No room for them: MSG_CTRUNC. */
    CHECK(sendto(s, "c", 1, 0, (struct sockaddr *)&a, alen) == 1);
    struct msghdr m2 = {.msg_iov = &iov, .msg_iovlen = 1};
    CHECK(recvmsg(r, &m2, 0) == 1 && (m2.msg_flags & MSG_CTRUNC));
    /* Claiming another's pid is EPERM. */
    struct ucred other = {.pid = getpid() + 1, .uid = getuid(), .gid = getgid()};
    char obuf[CMSG_SPACE(sizeof other)];
    struct msghdr m3 = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = obuf, .msg_controllen = sizeof obuf};
    iov.iov_len = 1;
    cm = CMSG_FIRSTHDR(&m3);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_CREDENTIALS;
    cm->cmsg_len = CMSG_LEN(sizeof other);
    memcpy(CMSG_DATA(cm), &other, sizeof other);
    m3.msg_name = &a;
    m3.msg_namelen = alen;
    if (getuid() != 0)
        CHECK_ERR(sendmsg(s, &m3, 0), EPERM);
    /* SO_PASSCRED autobinds an unnamed sender. */
    int u = socket(AF_UNIX, SOCK_DGRAM, 0);
    CHECK_OK(setsockopt(u, SOL_SOCKET, SO_PASSCRED, &one, sizeof one));
    CHECK(sendto(u, "u", 1, 0, (struct sockaddr *)&a, alen) == 1);
    len = sizeof from;
    CHECK_OK(getsockname(u, (struct sockaddr *)&from, &len));
    CHECK(len == offsetof(struct sockaddr_un, sun_path) + 6 && from.sun_path[0] == 0);
    len = sizeof from;
    iov.iov_len = sizeof buf;
    CHECK(recvfrom(r, buf, sizeof buf, 0, (struct sockaddr *)&from, &len) == 1);
    CHECK(len == offsetof(struct sockaddr_un, sun_path) + 6);
    close(u);

    /* The receiver gone: its name refuses. */
    close(r);
    CHECK_ERR(sendto(s, "x", 1, 0, (struct sockaddr *)&a, alen), ECONNREFUSED);
    close(s);
    /* SO_TYPE of SOCK_RAW is SOCK_DGRAM. */
    int raw = socket(AF_UNIX, SOCK_RAW, 0);
    len = sizeof v;
    CHECK(raw >= 0 && getsockopt(raw, SOL_SOCKET, SO_TYPE, &v, &len) == 0 && v == SOCK_DGRAM);
    close(raw);
}

static void seqpacket(void) {
    int sv[2];
    char buf[64];
    CHECK_OK(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv));
    CHECK(send(sv[0], "first", 5, 0) == 5);
    CHECK(send(sv[0], "second", 6, MSG_EOR) == 6);
    int v;
    CHECK(ioctl(sv[1], FIONREAD, &v) == 0 && v == 11);
    struct iovec iov = {.iov_base = buf, .iov_len = 3};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    CHECK(recvmsg(sv[1], &m, 0) == 3 && (m.msg_flags & MSG_TRUNC));
    CHECK(recv(sv[1], buf, sizeof buf, 0) == 6 && memcmp(buf, "second", 6) == 0);
    CHECK(revents(sv[1], POLLIN | POLLOUT) == POLLOUT);
    CHECK_OK(shutdown(sv[0], SHUT_WR));
    CHECK(revents(sv[1], POLLIN | POLLOUT | POLLRDHUP) == (POLLIN | POLLOUT | POLLRDHUP));
    CHECK(recv(sv[1], buf, sizeof buf, 0) == 0);
    CHECK_ERR(send(sv[0], "x", 1, MSG_NOSIGNAL), EPIPE);
    CHECK(send(sv[1], "y", 1, 0) == 1);
    close(sv[1]);
    CHECK(revents(sv[0], POLLIN | POLLOUT | POLLRDHUP | POLLHUP) == (POLLIN | POLLOUT | POLLRDHUP | POLLHUP));
    CHECK(recv(sv[0], buf, sizeof buf, 0) == 1);
    CHECK(recv(sv[0], buf, sizeof buf, 0) == 0);
    CHECK_ERR(send(sv[0], "x", 1, MSG_NOSIGNAL), EPIPE);
    close(sv[0]);

    /* Named: listen, connect, accept; unconnected sends and reads. */
    struct sockaddr_un a;
    socklen_t alen = path_addr(&a, "sp");
    int l = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    int c = socket(AF_UNIX, SOCK_SEQPACKET, 0);
    CHECK_ERR(send(c, "x", 1, MSG_NOSIGNAL), ENOTCONN);
    CHECK_ERR(recv(c, buf, 1, 0), ENOTCONN);
    CHECK_ERR(sendto(c, "x", 1, MSG_NOSIGNAL, (struct sockaddr *)&a, alen), ENOTCONN);
    CHECK(revents(c, POLLIN | POLLOUT) == (POLLOUT | POLLHUP));
    CHECK_OK(bind(l, (struct sockaddr *)&a, alen));
    CHECK_OK(listen(l, 4));
    CHECK_OK(connect(c, (struct sockaddr *)&a, alen));
    int s = accept(l, NULL, NULL);
    CHECK(s >= 0);
    CHECK(send(c, "rec", 3, 0) == 3);
    CHECK(send(c, "ord", 3, 0) == 3);
    CHECK(recv(s, buf, sizeof buf, 0) == 3);
    CHECK(recv(s, buf, sizeof buf, 0) == 3);
    /* Closing with unread data resets the peer. */
    CHECK(send(c, "unread", 6, 0) == 6);
    close(s);
    CHECK_ERR(send(c, "x", 1, MSG_NOSIGNAL), ECONNRESET);
    CHECK_ERR(send(c, "x", 1, MSG_NOSIGNAL), EPIPE);
    close(c);
    close(l);
}

int main(int argc, char **argv) {
    enter_work_dir(argc, argv);
    dgram_pair();
    dgram_named();
    seqpacket();
    return done();
}
