/* SCM_RIGHTS over AF_UNIX sockets: any file passes (pipes, sockets, epoll,
 * eventfd, pidfds) between processes; MSG_CMSG_CLOEXEC, MSG_CTRUNC, peeked
 * descriptors, stream reads stopping at a message with descriptors; and
 * descriptors in flight released once both ends close, cycles included
 * (a socket in flight on itself, two on each other). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

/* Sends `n` descriptors and `len` bytes of `data`. */
static ssize_t send_fds(int sock, const int *fds, int n, const char *data, size_t len) {
    char cbuf[CMSG_SPACE(sizeof(int) * 8)];
    struct iovec iov = {.iov_base = (void *)data, .iov_len = len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
    if (n > 0) {
        m.msg_control = cbuf;
        m.msg_controllen = CMSG_SPACE(sizeof(int) * n);
        struct cmsghdr *c = CMSG_FIRSTHDR(&m);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * n);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
    }
    return sendmsg(sock, &m, 0);
}

/* Receives into `buf`; the descriptors land in `fds` (count in *n, room
 * for `room` given to the kernel as control bytes). */
static ssize_t recv_fds(int sock, int *fds, int *n, size_t room, char *buf, size_t len, int flags, int *mflags) {
    char cbuf[CMSG_SPACE(sizeof(int) * 8)];
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = room ? cbuf : NULL, .msg_controllen = room};
    ssize_t r = recvmsg(sock, &m, flags);
    *n = 0;
    if (r < 0)
        return r;
    if (mflags)
        *mflags = m.msg_flags;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            memcpy(fds + *n, CMSG_DATA(c), sizeof(int) * k);
            *n += k;
        }
    }
    return r;
}

/* True if `fd`'s read end reaches end of file (every writer gone). */
static int reads_eof(int fd) {
    char c;
    return read(fd, &c, 1) == 0;
}

static void kinds(void) {
    int sv[2];
    CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    int p[2];
    CHECK_OK(pipe(p));
    int ep = epoll_create1(0);
    int ev = eventfd(5, 0);
    int inner[2];
    CHECK_OK(socketpair(AF_UNIX, SOCK_DGRAM, 0, inner));
    pid_t child = fork();
    if (child == 0) {
        pause();
        _exit(0);
    }
    int pidfd = syscall(SYS_pidfd_open, child, 0);
    CHECK(pidfd >= 0);

    /* A child receives them all and uses each. */
    pid_t pid = fork();
    if (pid == 0) {
        int fds[8], n, fl;
        char buf[16];
        ssize_t r = recv_fds(sv[1], fds, &n, CMSG_SPACE(sizeof(int) * 8), buf, sizeof buf, MSG_CMSG_CLOEXEC, &fl);
        if (r != 5 || n != 5)
            _exit(10);
        for (int i = 0; i < n; i++)
            if (!(fcntl(fds[i], F_GETFD) & FD_CLOEXEC))
                _exit(11);
        if (write(fds[0], "pipe", 4) != 4)
            _exit(12);
        struct epoll_event e = {.events = EPOLLOUT};
        if (epoll_ctl(fds[1], EPOLL_CTL_ADD, fds[0], &e) != 0)
            _exit(13);
        uint64_t v;
        if (read(fds[2], &v, sizeof v) != sizeof v || v != 5)
            _exit(14);
        if (send(fds[3], "dg", 2, 0) != 2)
            _exit(15);
        if (syscall(SYS_pidfd_send_signal, fds[4], SIGTERM, NULL, 0) != 0)
            _exit(16);
        /* recvmsg gives MSG_CMSG_CLOEXEC back in msg_flags, as it was asked. */
        if (fl != MSG_CMSG_CLOEXEC)
            _exit(17);
        _exit(0);
    }
    int fds[] = {p[1], ep, ev, inner[0], pidfd};
    CHECK(send_fds(sv[0], fds, 5, "files", 5) == 5);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char buf[8];
    CHECK(read(p[0], buf, sizeof buf) == 4);
    CHECK(recv(inner[1], buf, sizeof buf, 0) == 2);
    CHECK(waitpid(child, &status, 0) == child && WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
    /* The epoll instance the child changed is ours too. */
    struct epoll_event e;
    CHECK(epoll_wait(ep, &e, 1, 0) == 1 && e.events == EPOLLOUT);
    close(pidfd);
    close(ep);
    close(ev);
    close(inner[0]);
    close(inner[1]);
    close(p[0]);
    close(p[1]);

    /* Bad descriptors and bad headers. */
    int bad = 1000;
    CHECK_ERR(send_fds(sv[0], &bad, 1, "x", 1), EBADF);
    close(sv[0]);
    close(sv[1]);
}

static void receiving(void) {
    int sv[2], fds[8], n, fl;
    char buf[16];
    int p[2];
    CHECK_OK(pipe(p));
    CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    /* Without MSG_CMSG_CLOEXEC the descriptor is inheritable. */
    CHECK(send_fds(sv[0], &p[1], 1, "a", 1) == 1);
    CHECK(recv_fds(sv[1], fds, &n, CMSG_SPACE(sizeof(int)), buf, sizeof buf, 0, &fl) == 1 && n == 1);
    CHECK(n == 1 && fcntl(fds[0], F_GETFD) == 0);
    struct stat a, b;
    CHECK(n == 1 && fstat(fds[0], &a) == 0 && fstat(p[1], &b) == 0 && a.st_ino == b.st_ino);
    if (n == 1)
        close(fds[0]);

    /* A stream read stops after the message carrying descriptors, and
     * does not reach into one carrying them either when it asked none. */
    CHECK(send(sv[0], "plain", 5, 0) == 5);
    CHECK(send_fds(sv[0], &p[1], 1, "rights", 6) == 6);
    CHECK(send(sv[0], "after", 5, 0) == 5);
    CHECK(recv_fds(sv[1], fds, &n, CMSG_SPACE(sizeof(int)), buf, sizeof buf, 0, &fl) == 11 && n == 1);
    if (n == 1)
        close(fds[0]);
    CHECK(recv_fds(sv[1], fds, &n, CMSG_SPACE(sizeof(int)), buf, sizeof buf, 0, &fl) == 5 && n == 0);

    /* Peeking duplicates them; the read then gets them again. */
    CHECK(send_fds(sv[0], &p[1], 1, "pk", 2) == 2);
    CHECK(recv_fds(sv[1], fds, &n, CMSG_SPACE(sizeof(int)), buf, sizeof buf, MSG_PEEK, &fl) == 2 && n == 1);
    if (n == 1)
        close(fds[0]);
    CHECK(recv_fds(sv[1], fds, &n, CMSG_SPACE(sizeof(int)), buf, sizeof buf, 0, &fl) == 2 && n == 1);
    if (n == 1)
        close(fds[0]);

    /* No room: MSG_CTRUNC and the descriptors are closed. */
    CHECK(send_fds(sv[0], &p[1], 1, "t", 1) == 1);
    CHECK(recv_fds(sv[1], fds, &n, 0, buf, sizeof buf, 0, &fl) == 1 && n == 0 && (fl & MSG_CTRUNC));
    int three[] = {p[1], p[1], p[1]};
    CHECK(send_fds(sv[0], three, 3, "3", 1) == 1);
    CHECK(recv_fds(sv[1], fds, &n, CMSG_SPACE(sizeof(int) * 2), buf, sizeof buf, 0, &fl) == 1);
    CHECK(n == 2 && (fl & MSG_CTRUNC));
    for (int i = 0; i < n; i++)
        close(fds[i]);

    /* Only our own end left as writer: closing it is the end. */
    close(p[1]);
    CHECK(reads_eof(p[0]));
    close(p[0]);
    close(sv[0]);
    close(sv[1]);
}

/* Descriptors in flight are released when both ends close. */
static void released(void) {
    int sv[2], p[2];
    /* Plain: the receiver never read. */
    CHECK_OK(pipe(p));
    CHECK_OK(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv));
    CHECK(send_fds(sv[0], &p[1], 1, "x", 1) == 1);
    close(p[1]);
    close(sv[0]);
    close(sv[1]);
    CHECK(reads_eof(p[0]));
    close(p[0]);

    /* A socket in flight on itself, with a pipe's writer beside it. */
    CHECK_OK(pipe(p));
    CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    int both[] = {sv[0], p[1]};
    CHECK(send_fds(sv[1], both, 2, "x", 1) == 1);
    close(p[1]);
    close(sv[0]);
    close(sv[1]);
    CHECK(reads_eof(p[0]));
    close(p[0]);

    /* Two sockets in flight on each other. The collection runs when a
     * socket is released, so the last close is of one not in flight. */
    CHECK_OK(pipe(p));
    int a[2], b[2];
    CHECK_OK(socketpair(AF_UNIX, SOCK_DGRAM, 0, a));
    CHECK_OK(socketpair(AF_UNIX, SOCK_DGRAM, 0, b));
    int ab[] = {a[1], p[1]};
    CHECK(send_fds(b[0], ab, 2, "x", 1) == 1);
    CHECK(send_fds(a[0], &b[1], 1, "y", 1) == 1);
    close(p[1]);
    close(a[1]);
    close(b[1]);
    close(a[0]);
    close(b[0]);
    CHECK(reads_eof(p[0]));
    close(p[0]);

    /* A listener holding a connection that carries the listener. */
    CHECK_OK(pipe(p));
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path + 1, sizeof addr.sun_path - 1, "cordon-rights-%d", getpid());
    socklen_t alen = sizeof(sa_family_t) + 1 + strlen(addr.sun_path + 1);
    CHECK_OK(bind(l, (struct sockaddr *)&addr, alen));
    CHECK_OK(listen(l, 1));
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK_OK(connect(c, (struct sockaddr *)&addr, alen));
    int lp[] = {l, p[1]};
    CHECK(send_fds(c, lp, 2, "x", 1) == 1);
    close(p[1]);
    close(l);
    close(c);
    CHECK(reads_eof(p[0]));
    close(p[0]);
}

int main(void) {
    kinds();
    receiving();
    released();
    return done();
}
