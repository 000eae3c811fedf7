/* AF_UNIX readiness through epoll (EPOLLRDHUP, EPOLLHUP, a listener's
 * EPOLLIN, edge-triggered wakes, a connected datagram socket's room on its
 * peer's queue), credentials on stream sockets (SO_PASSCRED, messages of
 * different writers never glued), sendmmsg/recvmmsg and SO_RCVTIMEO. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

/* The events epoll reports for its one file right now (0 for none). */
static unsigned ready(int ep) {
    struct epoll_event e;
    int n = epoll_wait(ep, &e, 1, 0);
    return n == 1 ? e.events : 0;
}

static int watch(int fd, unsigned events) {
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event e = {.events = events, .data.fd = fd};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) != 0)
        return -1;
    return ep;
}

static void epoll_stream(void) {
    int sv[2];
    char buf[16];
    CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv));
    int ep = watch(sv[1], EPOLLIN | EPOLLOUT | EPOLLRDHUP);
    CHECK(ready(ep) == EPOLLOUT);
    CHECK(write(sv[0], "a", 1) == 1);
    CHECK(ready(ep) == (EPOLLIN | EPOLLOUT));
    CHECK(read(sv[1], buf, sizeof buf) == 1);
    CHECK_OK(shutdown(sv[0], SHUT_WR));
    CHECK(ready(ep) == (EPOLLIN | EPOLLOUT | EPOLLRDHUP));
    close(sv[0]);
    CHECK(ready(ep) == (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLHUP));
    close(ep);
    close(sv[1]);

    /* Edge-triggered: one wake per arrival. */
    CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv));
    ep = watch(sv[1], EPOLLIN | EPOLLET);
    CHECK(ready(ep) == 0);
    CHECK(write(sv[0], "a", 1) == 1);
    CHECK(ready(ep) == EPOLLIN);
    CHECK(ready(ep) == 0);
    CHECK(write(sv[0], "b", 1) == 1);
    CHECK(ready(ep) == EPOLLIN);
    close(ep);

    /* A reader blocked in epoll_wait is woken by a writer. */
    ep = watch(sv[1], EPOLLIN);
    CHECK(read(sv[1], buf, sizeof buf) == 2);
    pid_t pid = fork();
    if (pid == 0)
        _exit(write(sv[0], "w", 1) == 1 ? 0 : 1);
    struct epoll_event e;
    CHECK(epoll_wait(ep, &e, 1, -1) == 1 && e.events == EPOLLIN);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(ep);
    close(sv[0]);
    close(sv[1]);
}

static void epoll_listener(void) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "cordon-events-%d", getpid());
    socklen_t alen = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(a.sun_path + 1);
    int l = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK_OK(bind(l, (struct sockaddr *)&a, alen));
    CHECK_OK(listen(l, 8));
    int ep = watch(l, EPOLLIN | EPOLLOUT | EPOLLET);
    CHECK(ready(ep) == 0);
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK_OK(connect(c, (struct sockaddr *)&a, alen));
    CHECK(ready(ep) == EPOLLIN);
    CHECK(ready(ep) == 0);
    int s = accept4(l, NULL, NULL, SOCK_NONBLOCK);
    CHECK(s >= 0);
    CHECK_ERR(accept(l, NULL, NULL), EAGAIN);
    close(s);
    close(c);
    close(ep);
    close(l);
}

/* A datagram socket connected to one not connected back can write only
 * while that one's queue has room; it hears when room comes. */
static void epoll_dgram_room(void) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path + 1, sizeof a.sun_path - 1, "cordon-events-dg-%d", getpid());
    socklen_t alen = offsetof(struct sockaddr_un, sun_path) + 1 + strlen(a.sun_path + 1);
    int r = socket(AF_UNIX, SOCK_DGRAM, 0);
    CHECK_OK(bind(r, (struct sockaddr *)&a, alen));
    int q = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    int v = 1 << 20;
    CHECK_OK(setsockopt(q, SOL_SOCKET, SO_SNDBUF, &v, sizeof v));
    CHECK_OK(connect(q, (struct sockaddr *)&a, alen));
    int ep = watch(q, EPOLLOUT);
    CHECK(ready(ep) == EPOLLOUT);
    while (send(q, "", 0, 0) == 0)
        ;
    CHECK(errno == EAGAIN);
    CHECK(ready(ep) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        char buf[4];
        while (recv(r, buf, sizeof buf, MSG_DONTWAIT) == 0)
            ;
        _exit(0);
    }
    struct epoll_event e;
    CHECK(epoll_wait(ep, &e, 1, -1) == 1 && e.events == EPOLLOUT);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    close(ep);
    close(q);
    close(r);
}

static int creds_of(struct msghdr *m, struct ucred *u) {
    for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
            memcpy(u, CMSG_DATA(c), sizeof *u);
            return 1;
        }
    }
    return 0;
}

static void stream_creds(void) {
    int sv[2], one = 1;
    CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    CHECK_OK(setsockopt(sv[1], SOL_SOCKET, SO_PASSCRED, &one, sizeof one));
    /* Written by the parent with write(), then by a child. */
    CHECK(write(sv[0], "parent", 6) == 6);
    pid_t pid = fork();
    if (pid == 0)
        _exit(write(sv[0], "child", 5) == 5 ? 0 : 1);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char buf[32], cbuf[CMSG_SPACE(sizeof(struct ucred))];
    struct iovec iov = {.iov_base = buf, .iov_len = sizeof buf};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
    struct ucred u;
    /* Two writers: two reads, each with its writer's credentials. */
    CHECK(recvmsg(sv[1], &m, 0) == 6);
    CHECK(creds_of(&m, &u) && u.pid == getpid() && u.uid == getuid() && u.gid == getgid());
    m.msg_controllen = sizeof cbuf;
    CHECK(recvmsg(sv[1], &m, 0) == 5);
    CHECK(creds_of(&m, &u) && u.pid == pid);
    close(sv[0]);
    close(sv[1]);
}

static void mmsg(void) {
    int sv[2];
    CHECK_OK(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv));
    char a[] = "one", b[] = "three";
    struct iovec iov[2] = {{.iov_base = a, .iov_len = 3}, {.iov_base = b, .iov_len = 5}};
    struct mmsghdr out[2] = {{.msg_hdr = {.msg_iov = &iov[0], .msg_iovlen = 1}},
                             {.msg_hdr = {.msg_iov = &iov[1], .msg_iovlen = 1}}};
    CHECK(sendmmsg(sv[0], out, 2, 0) == 2);
    CHECK(out[0].msg_len == 3 && out[1].msg_len == 5);
    char x[8], y[8];
    struct iovec riov[2] = {{.iov_base = x, .iov_len = sizeof x}, {.iov_base = y, .iov_len = sizeof y}};
    struct mmsghdr in[2] = {{.msg_hdr = {.msg_iov = &riov[0], .msg_iovlen = 1}},
                            {.msg_hdr = {.msg_iov = &riov[1], .msg_iovlen = 1}}};
    CHECK(recvmmsg(sv[1], in, 2, MSG_DONTWAIT, NULL) == 2);
    CHECK(in[0].msg_len == 3 && in[1].msg_len == 5 && memcmp(y, "three", 5) == 0);
    CHECK_ERR(recvmmsg(sv[1], in, 2, MSG_DONTWAIT, NULL), EAGAIN);

    /* SO_RCVTIMEO: an empty socket gives EAGAIN once the time is up. */
    struct timeval tv = {.tv_sec = 0, .tv_usec = 10000};
    CHECK_OK(setsockopt(sv[1], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv));
    CHECK_ERR(recv(sv[1], x, sizeof x, 0), EAGAIN);
    close(sv[0]);
    close(sv[1]);
}

int main(void) {
    epoll_stream();
    epoll_listener();
    epoll_dgram_room();
    stream_creds();
    mmsg();
    return done();
}
