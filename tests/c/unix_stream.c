/* AF_UNIX stream sockets: socketpair, names in the file system and the
 * abstract namespace, listen/accept backlogs, shutdown and its poll bits,
 * EPIPE and ECONNRESET, peeking, buffer accounting and every errno case
 * Linux gives. Works in the directory argv[1] (see work_dir.h). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "work_dir.h"

#ifndef SIOCINQ
#define SIOCINQ FIONREAD
#endif
#ifndef SIOCOUTQ
#define SIOCOUTQ TIOCOUTQ
#endif

static socklen_t path_addr(struct sockaddr_un *a, const char *path) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    strcpy(a->sun_path, path);
    return offsetof(struct sockaddr_un, sun_path) + strlen(path) + 1;
}

/* An abstract name: a NUL then `name`, the length exactly that. */
static socklen_t abstract_addr(struct sockaddr_un *a, const char *name) {
    memset(a, 0, sizeof *a);
    a->sun_family = AF_UNIX;
    memcpy(a->sun_path + 1, name, strlen(name));
    return offsetof(struct sockaddr_un, sun_path) + 1 + strlen(name);
}

static short revents(int fd, short events) {
    struct pollfd p = {.fd = fd, .events = events};
    if (poll(&p, 1, 0) < 0)
        return -1;
    return p.revents;
}

/* /proc/PID/fd names the socket by its inode, and /proc/net/unix lists it
 * with `flags`, `type`, state `st` and (if given) its path. */
static int listed(int fd, const char *path, unsigned flags, unsigned type, unsigned st) {
    struct stat sb;
    char link[64], want[64], line[512];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, line, sizeof line - 1);
    if (fstat(fd, &sb) != 0 || n < 0)
        return 0;
    line[n] = 0;
    snprintf(want, sizeof want, "socket:[%lu]", (unsigned long)sb.st_ino);
    if (strcmp(line, want) != 0)
        return 0;
    FILE *f = fopen("/proc/net/unix", "r");
    if (!f || !fgets(line, sizeof line, f) || strncmp(line, "Num       RefCount Protocol Flags    Type St Inode Path", 55) != 0)
        return 0;
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned ref, proto, fl, ty, state;
        unsigned long ino;
        char name[256] = "";
        int k = sscanf(line, "%*[0-9a-f]: %x %x %x %x %x %lu %255s", &ref, &proto, &fl, &ty, &state, &ino, name);
        if (k >= 6 && ino == sb.st_ino)
            found = fl == flags && ty == type && state == st && (path ? strcmp(name, path) == 0 : k == 6);
    }
    fclose(f);
    return found;
}

static void pairs(void) {
    int sv[2];
    char buf[64];
    CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    struct stat st;
    CHECK_OK(fstat(sv[0], &st));
    CHECK(S_ISSOCK(st.st_mode));
    CHECK(listed(sv[0], NULL, 0, SOCK_STREAM, 3));
    int v;
    socklen_t len = sizeof v;
    CHECK_OK(getsockopt(sv[0], SOL_SOCKET, SO_TYPE, &v, &len));
    CHECK(v == SOCK_STREAM && len == sizeof v);
    len = sizeof v;
    CHECK_OK(getsockopt(sv[0], SOL_SOCKET, SO_ACCEPTCONN, &v, &len));
    CHECK(v == 0);
    struct ucred cr;
    len = sizeof cr;
    CHECK_OK(getsockopt(sv[0], SOL_SOCKET, SO_PEERCRED, &cr, &len));
    CHECK(cr.pid == getpid() && cr.uid == getuid() && cr.gid == getgid() && len == sizeof cr);

    /* Unnamed: the bare family. */
    struct sockaddr_un a;
    len = sizeof a;
    CHECK_OK(getsockname(sv[0], (struct sockaddr *)&a, &len));
    CHECK(len == sizeof(sa_family_t) && a.sun_family == AF_UNIX);
    len = sizeof a;
    CHECK_OK(getpeername(sv[0], (struct sockaddr *)&a, &len));
    CHECK(len == sizeof(sa_family_t));

    CHECK(revents(sv[0], POLLIN | POLLOUT) == POLLOUT);
    CHECK(write(sv[0], "hello", 5) == 5);
    CHECK(write(sv[0], "world", 5) == 5);
    CHECK(revents(sv[1], POLLIN | POLLOUT) == (POLLIN | POLLOUT));
    CHECK(ioctl(sv[1], FIONREAD, &v) == 0 && v == 10);
    CHECK(ioctl(sv[0], SIOCOUTQ, &v) == 0 && v > 10);
    /* Stream reads glue messages. */
    CHECK(recv(sv[1], buf, 3, MSG_PEEK) == 3 && memcmp(buf, "hel", 3) == 0);
    CHECK(recv(sv[1], buf, sizeof buf, MSG_PEEK) == 10);
    CHECK(read(sv[1], buf, 7) == 7 && memcmp(buf, "hellowo", 7) == 0);
    CHECK(ioctl(sv[1], SIOCINQ, &v) == 0 && v == 3);
    CHECK(read(sv[1], buf, sizeof buf) == 3 && memcmp(buf, "rld", 3) == 0);
    CHECK(ioctl(sv[0], SIOCOUTQ, &v) == 0 && v == 0);
    CHECK_ERR(recv(sv[1], buf, sizeof buf, MSG_DONTWAIT), EAGAIN);
    /* A zero-length read waits for data like any other. */
    CHECK_ERR(recv(sv[1], buf, 0, MSG_DONTWAIT), EAGAIN);

    /* SO_PEEK_OFF: peeks move along, reads move it back. */
    v = 0;
    CHECK_OK(setsockopt(sv[1], SOL_SOCKET, SO_PEEK_OFF, &v, sizeof v));
    CHECK(write(sv[0], "abcdefgh", 8) == 8);
    CHECK(recv(sv[1], buf, 3, MSG_PEEK) == 3 && memcmp(buf, "abc", 3) == 0);
    CHECK(recv(sv[1], buf, 3, MSG_PEEK) == 3 && memcmp(buf, "def", 3) == 0);
    len = sizeof v;
    CHECK_OK(getsockopt(sv[1], SOL_SOCKET, SO_PEEK_OFF, &v, &len));
    CHECK(v == 6);
    CHECK(read(sv[1], buf, 2) == 2 && memcmp(buf, "ab", 2) == 0);
    CHECK(recv(sv[1], buf, 8, MSG_PEEK) == 2 && memcmp(buf, "gh", 2) == 0);
    CHECK(read(sv[1], buf, sizeof buf) == 6);

    /* Options of other levels are no unix socket's. */
    v = 1;
    CHECK_ERR(setsockopt(sv[0], IPPROTO_TCP, 1, &v, sizeof v), EOPNOTSUPP);
    CHECK_ERR(setsockopt(sv[0], SOL_SOCKET, SO_ACCEPTCONN, &v, sizeof v), ENOPROTOOPT);
    CHECK_ERR(sendto(sv[0], "x", 1, 0, (struct sockaddr *)&a, sizeof(sa_family_t)), EISCONN);
    CHECK_ERR(listen(sv[0], 1), EINVAL);
    CHECK_ERR(accept(sv[0], NULL, NULL), EINVAL);

    /* Shutting down writing: the peer reads the end, writing is EPIPE. */
    CHECK_OK(shutdown(sv[0], SHUT_WR));
    CHECK(revents(sv[1], POLLIN | POLLOUT | POLLRDHUP) == (POLLIN | POLLOUT | POLLRDHUP));
    CHECK(revents(sv[0], POLLIN | POLLOUT | POLLRDHUP) == POLLOUT);
    CHECK(read(sv[1], buf, sizeof buf) == 0);
    CHECK_ERR(send(sv[0], "x", 1, MSG_NOSIGNAL), EPIPE);
    CHECK(write(sv[1], "back", 4) == 4);
    CHECK(read(sv[0], buf, sizeof buf) == 4);
    CHECK_OK(shutdown(sv[1], SHUT_WR));
    CHECK(revents(sv[0], POLLIN | POLLOUT | POLLRDHUP) == (POLLIN | POLLOUT | POLLRDHUP | POLLHUP));
    CHECK_ERR(shutdown(sv[0], 3), EINVAL);
    close(sv[0]);
    close(sv[1]);

    /* Closing with unread data resets the peer; once said, it is the end. */
    CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    CHECK(write(sv[1], "unread", 6) == 6);
    CHECK(write(sv[0], "for 1", 5) == 5);
    close(sv[1]);
    CHECK(revents(sv[0], POLLIN | POLLOUT | POLLRDHUP) == (POLLIN | POLLOUT | POLLRDHUP | POLLHUP | POLLERR));
    CHECK(read(sv[0], buf, sizeof buf) == 6);
    CHECK_ERR(read(sv[0], buf, sizeof buf), ECONNRESET);
    CHECK(read(sv[0], buf, sizeof buf) == 0);
    CHECK_ERR(send(sv[0], "x", 1, MSG_NOSIGNAL), EPIPE);
    len = sizeof a;
    CHECK_OK(getpeername(sv[0], (struct sockaddr *)&a, &len));
    close(sv[0]);

    /* SO_ERROR reads and clears the reset. */
    CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    CHECK(write(sv[0], "x", 1) == 1);
    close(sv[1]);
    len = sizeof v;
    CHECK_OK(getsockopt(sv[0], SOL_SOCKET, SO_ERROR, &v, &len));
    CHECK(v == ECONNRESET);
    CHECK_OK(getsockopt(sv[0], SOL_SOCKET, SO_ERROR, &v, &len));
    CHECK(v == 0);
    CHECK(read(sv[0], buf, sizeof buf) == 0);
    close(sv[0]);

    /* A write to a closed peer raises SIGPIPE. */
    CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    close(sv[1]);
    signal(SIGPIPE, SIG_IGN);
    CHECK_ERR(write(sv[0], "x", 1), EPIPE);
    signal(SIGPIPE, SIG_DFL);
    pid_t pid = fork();
    if (pid == 0) {
        write(sv[0], "x", 1);
        _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGPIPE);
    close(sv[0]);

    CHECK_ERR(socketpair(AF_UNIX, SOCK_STREAM, IPPROTO_TCP, sv), EPROTONOSUPPORT);
    CHECK_ERR(socketpair(AF_UNIX, 7, 0, sv), ESOCKTNOSUPPORT);
    CHECK_ERR(socket(AF_UNIX, SOCK_STREAM | 0x100000, 0), EINVAL);
}

/* Filling a non-blocking socket: EAGAIN once the send buffer is spent, a
 * short write at the edge, and room again once the peer reads. */
static void buffers(void) {
    int sv[2];
    CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv));
    int v = 0;
    socklen_t len = sizeof v;
    CHECK_OK(getsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &v, &len));
    CHECK(v == 212992);
    v = 32768;
    CHECK_OK(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &v, sizeof v));
    len = sizeof v;
    CHECK_OK(getsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &v, &len));
    CHECK(v == 65536);
    static char big[1 << 20];
    long total = 0;
    for (;;) {
        ssize_t n = write(sv[0], big, sizeof big);
        if (n < 0)
            break;
        total += n;
    }
    CHECK(errno == EAGAIN);
    CHECK(total >= 32768 && total <= 65536);
    CHECK((revents(sv[0], POLLOUT) & POLLOUT) == 0);
    CHECK((revents(sv[1], POLLIN) & POLLIN) != 0);
    long got = 0;
    for (;;) {
        ssize_t n = read(sv[1], big, sizeof big);
        if (n <= 0)
            break;
        got += n;
    }
    CHECK(got == total);
    CHECK(revents(sv[0], POLLOUT) == POLLOUT);
    close(sv[0]);
    close(sv[1]);

    /* A blocked writer and MSG_WAITALL reader move a large message. */
    CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    pid_t pid = fork();
    if (pid == 0) {
        memset(big, 'z', sizeof big);
        _exit(write(sv[0], big, sizeof big) == sizeof big ? 0 : 1);
    }
    memset(big, 0, sizeof big);
    CHECK(recv(sv[1], big, sizeof big, MSG_WAITALL) == sizeof big);
    CHECK(big[0] == 'z' && big[sizeof big - 1] == 'z');
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(sv[0]);
    close(sv[1]);
}

static void named(void) {
    struct sockaddr_un a, b;
    socklen_t alen = path_addr(&a, "s1"), len;
    int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(l >= 0);
    CHECK_ERR(listen(l, 5), EINVAL);
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK_ERR(connect(c, (struct sockaddr *)&a, alen), ENOENT);
    CHECK_OK(bind(l, (struct sockaddr *)&a, alen));
    struct stat st;
    CHECK_OK(stat("s1", &st));
    CHECK(S_ISSOCK(st.st_mode) && (st.st_mode & 0777) == 0755);
    CHECK_ERR(bind(l, (struct sockaddr *)&a, alen), EADDRINUSE);
    path_addr(&b, "s1b");
    CHECK_ERR(bind(l, (struct sockaddr *)&b, alen + 1), EINVAL);
    CHECK_ERR(access("s1b", F_OK), ENOENT);
    int o = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK_ERR(bind(o, (struct sockaddr *)&a, alen), EADDRINUSE);
    close(o);
    len = sizeof b;
    CHECK_OK(getsockname(l, (struct sockaddr *)&b, &len));
    CHECK(len == alen && strcmp(b.sun_path, "s1") == 0);
    /* A name without its NUL is taken whole and reported with it. */
    o = socket(AF_UNIX, SOCK_STREAM, 0);
    path_addr(&b, "s2");
    CHECK_OK(bind(o, (struct sockaddr *)&b, offsetof(struct sockaddr_un, sun_path) + 2));
    len = sizeof b;
    CHECK_OK(getsockname(o, (struct sockaddr *)&b, &len));
    CHECK(len == offsetof(struct sockaddr_un, sun_path) + 3);
    /* Bound but not listening: refused. */
    CHECK_ERR(connect(c, (struct sockaddr *)&b, len), ECONNREFUSED);
    close(o);
    /* The node stays, with no one behind it. */
    CHECK_ERR(connect(c, (struct sockaddr *)&b, len), ECONNREFUSED);
    /* A file that is no socket. */
    CHECK_OK(put_file("plain", "", 0, 0644));
    path_addr(&b, "plain");
    CHECK_ERR(connect(c, (struct sockaddr *)&b, sizeof b), ECONNREFUSED);
    CHECK_ERR(connect(c, (struct sockaddr *)&a, 1), EINVAL);
    CHECK_ERR(connect(c, (struct sockaddr *)&a, sizeof(sa_family_t)), EINVAL);
    CHECK_ERR(connect(c, (struct sockaddr *)&a, sizeof a + 1), EINVAL);
    b.sun_family = AF_INET;
    CHECK_ERR(connect(c, (struct sockaddr *)&b, sizeof b), EINVAL);
    int d = socket(AF_UNIX, SOCK_DGRAM, 0);
    CHECK_ERR(connect(d, (struct sockaddr *)&a, alen), EPROTOTYPE);
    CHECK_ERR(listen(d, 1), EOPNOTSUPP);
    CHECK_ERR(accept(d, NULL, NULL), EOPNOTSUPP);
    close(d);
    char buf[16];
    CHECK_ERR(send(c, "x", 1, MSG_NOSIGNAL), ENOTCONN);
    CHECK_ERR(recv(c, buf, 1, 0), EINVAL);
    CHECK_ERR(getpeername(c, (struct sockaddr *)&b, &len), ENOTCONN);
    CHECK_ERR(accept(l, NULL, NULL), EINVAL);
    CHECK(revents(c, POLLIN | POLLOUT) == (POLLOUT | POLLHUP));

    /* Backlog 1 takes two connections; the third waits (EAGAIN when
     * non-blocking). */
    CHECK_OK(listen(l, 1));
    int v;
    len = sizeof v;
    CHECK_OK(getsockopt(l, SOL_SOCKET, SO_ACCEPTCONN, &v, &len));
    CHECK(v == 1);
    CHECK(revents(l, POLLIN | POLLOUT) == 0);
    CHECK(listed(l, "s1", 0x10000, SOCK_STREAM, 1));
    CHECK(listed(c, NULL, 0, SOCK_STREAM, 1));
    int fl = fcntl(l, F_GETFL);
    fcntl(l, F_SETFL, fl | O_NONBLOCK);
    CHECK_ERR(accept(l, NULL, NULL), EAGAIN);
    fcntl(l, F_SETFL, fl);
    CHECK_OK(connect(c, (struct sockaddr *)&a, alen));
    CHECK_ERR(connect(c, (struct sockaddr *)&a, alen), EISCONN);
    CHECK(revents(l, POLLIN | POLLOUT) == POLLIN);
    int c2 = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK_OK(connect(c2, (struct sockaddr *)&a, alen));
    int c3 = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK_ERR(connect(c3, (struct sockaddr *)&a, alen), EAGAIN);
    /* Before accept the connection carries data. */
    CHECK(write(c, "early", 5) == 5);
    struct ucred cr;
    len = sizeof cr;
    CHECK_OK(getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cr, &len));
    CHECK(cr.pid == getpid());
    len = sizeof b;
    CHECK_OK(getpeername(c, (struct sockaddr *)&b, &len));
    CHECK(len == alen && strcmp(b.sun_path, "s1") == 0);
    len = sizeof b;
    CHECK_OK(getsockname(c, (struct sockaddr *)&b, &len));
    CHECK(len == sizeof(sa_family_t));

    len = sizeof b;
    memset(&b, 0x55, sizeof b);
    int s = accept4(l, (struct sockaddr *)&b, &len, SOCK_CLOEXEC);
    CHECK(s >= 0);
    CHECK(len == sizeof(sa_family_t) && b.sun_family == AF_UNIX);
    CHECK((fcntl(s, F_GETFD) & FD_CLOEXEC) != 0);
    CHECK(read(s, buf, sizeof buf) == 5 && memcmp(buf, "early", 5) == 0);
    len = sizeof b;
    CHECK_OK(getsockname(s, (struct sockaddr *)&b, &len));
    CHECK(len == alen && strcmp(b.sun_path, "s1") == 0);
    len = sizeof cr;
    CHECK_OK(getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cr, &len));
    CHECK(cr.pid == getpid() && cr.uid == getuid());
    len = sizeof v;
    CHECK_OK(getsockopt(s, SOL_SOCKET, SO_ACCEPTCONN, &v, &len));
    CHECK(v == 0);
    CHECK_ERR(accept4(l, NULL, NULL, 0x4000), EINVAL);
    /* A slot freed: the third goes in. */
    CHECK_OK(connect(c3, (struct sockaddr *)&a, alen));

    /* A blocked connect goes on once accept makes room. */
    int c4 = socket(AF_UNIX, SOCK_STREAM, 0);
    int sync[2];
    CHECK_OK(pipe(sync));
    pid_t pid = fork();
    if (pid == 0) {
        close(sync[0]);
        int r = connect(c4, (struct sockaddr *)&a, alen);
        _exit(r == 0 && write(c4, "late", 4) == 4 ? 0 : 1);
    }
    int s2 = accept(l, NULL, NULL);
    int s3 = accept(l, NULL, NULL);
    int s4 = accept(l, NULL, NULL);
    CHECK(s2 >= 0 && s3 >= 0 && s4 >= 0);
    CHECK(read(s4, buf, sizeof buf) == 4 && memcmp(buf, "late", 4) == 0);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(sync[0]);
    close(sync[1]);

    /* A connection whose listener closed before accepting it is reset. */
    int c5 = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK_OK(connect(c5, (struct sockaddr *)&a, alen));
    close(l);
    CHECK_ERR(read(c5, buf, sizeof buf), ECONNRESET);
    CHECK(read(c5, buf, sizeof buf) == 0);
    int c6 = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK_ERR(connect(c6, (struct sockaddr *)&a, alen), ECONNREFUSED);
    CHECK_OK(unlink("s1"));
    int fds[] = {c, c2, c3, c4, c5, c6, s, s2, s3, s4};
    for (unsigned i = 0; i < sizeof fds / sizeof *fds; i++)
        close(fds[i]);
}

static void abstract(void) {
    struct sockaddr_un a, b;
    char name[32];
    snprintf(name, sizeof name, "cordon-unix-stream-%d", getpid());
    socklen_t alen = abstract_addr(&a, name), len;
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK_OK(bind(l, (struct sockaddr *)&a, alen));
    len = sizeof b;
    CHECK_OK(getsockname(l, (struct sockaddr *)&b, &len));
    CHECK(len == alen && b.sun_path[0] == 0 && memcmp(b.sun_path + 1, name, strlen(name)) == 0);
    int o = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK_ERR(bind(o, (struct sockaddr *)&a, alen), EADDRINUSE);
    /* One byte longer is another name. */
    CHECK_OK(bind(o, (struct sockaddr *)&a, alen + 1));
    CHECK_OK(listen(l, 0));
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK_OK(connect(c, (struct sockaddr *)&a, alen));
    int s = accept(l, NULL, NULL);
    CHECK(s >= 0);
    CHECK(write(s, "abs", 3) == 3);
    char buf[8];
    CHECK(read(c, buf, sizeof buf) == 3);
    close(l);
    /* The name is free once its socket is gone. */
    l = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK_OK(bind(l, (struct sockaddr *)&a, alen));
    close(l);

    /* Autobind: the bare family names the socket "\0" and five hex digits. */
    int x = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK_OK(bind(x, (struct sockaddr *)&a, sizeof(sa_family_t)));
    len = sizeof b;
    CHECK_OK(getsockname(x, (struct sockaddr *)&b, &len));
    CHECK(len == offsetof(struct sockaddr_un, sun_path) + 6 && b.sun_path[0] == 0);
    int hex = 1;
    for (int i = 1; i < 6; i++)
        hex &= (b.sun_path[i] >= '0' && b.sun_path[i] <= '9') || (b.sun_path[i] >= 'a' && b.sun_path[i] <= 'f');
    CHECK(hex);
    /* Asking again for an automatic name is no error. */
    CHECK_OK(bind(x, (struct sockaddr *)&a, sizeof(sa_family_t)));
    CHECK_ERR(bind(x, (struct sockaddr *)&a, alen), EINVAL);
    /* SO_PASSCRED autobinds on connect. */
    int y = socket(AF_UNIX, SOCK_STREAM, 0);
    int one = 1;
    CHECK_OK(setsockopt(y, SOL_SOCKET, SO_PASSCRED, &one, sizeof one));
    CHECK_OK(listen(x, 1));
    CHECK_OK(connect(y, (struct sockaddr *)&b, len));
    len = sizeof b;
    CHECK_OK(getsockname(y, (struct sockaddr *)&b, &len));
    CHECK(len == offsetof(struct sockaddr_un, sun_path) + 6 && b.sun_path[0] == 0);
    close(x);
    close(y);
    close(o);
    close(c);
    close(s);
}

/* A reader blocked in read is woken by the writer. */
static void blocking(void) {
    int sv[2], sync[2];
    CHECK_OK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
    CHECK_OK(pipe(sync));
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        read(sync[0], &c, 1);
        write(sv[1], "wake", 4);
        shutdown(sv[1], SHUT_WR);
        _exit(0);
    }
    char buf[8];
    write(sync[1], "g", 1);
    CHECK(read(sv[0], buf, sizeof buf) == 4);
    CHECK(read(sv[0], buf, sizeof buf) == 0);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    close(sv[0]);
    close(sv[1]);
    close(sync[0]);
    close(sync[1]);
}

int main(int argc, char **argv) {
    enter_work_dir(argc, argv);
    pairs();
    buffers();
    named();
    abstract();
    blocking();
    return done();
}
