/* inotify: the events a scripted set of file operations raises, printed one
 * per line (watch, event names, name) so the sandbox's sequence is compared
 * with Linux's; cookies are only checked to pair the two halves of a move.
 * Then the interface itself: errors, watch descriptors, FIONREAD, short
 * buffers, overflow, poll and epoll readiness, and a `tail -f` reader woken
 * by another process's appends. Runs in a fresh directory under /tmp. */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

static char base[64];
static int ino;

/* Names for watch descriptors, so the output does not depend on them. */
static struct {
    int wd;
    const char *label;
} labels[16];
static int nlabels;

static void label(int wd, const char *name) {
    labels[nlabels].wd = wd;
    labels[nlabels++].label = name;
}

static const char *label_of(int wd) {
    for (int i = nlabels - 1; i >= 0; i--)
        if (labels[i].wd == wd) return labels[i].label;
    return wd == -1 ? "-" : "?";
}

static void mask_names(uint32_t m, char *out) {
    static const struct {
        uint32_t bit;
        const char *name;
    } names[] = {
        {IN_ACCESS, "ACCESS"},           {IN_MODIFY, "MODIFY"},         {IN_ATTRIB, "ATTRIB"},
        {IN_CLOSE_WRITE, "CLOSE_WRITE"}, {IN_CLOSE_NOWRITE, "CLOSE_NOWRITE"}, {IN_OPEN, "OPEN"},
        {IN_MOVED_FROM, "MOVED_FROM"},   {IN_MOVED_TO, "MOVED_TO"},     {IN_CREATE, "CREATE"},
        {IN_DELETE, "DELETE"},           {IN_DELETE_SELF, "DELETE_SELF"}, {IN_MOVE_SELF, "MOVE_SELF"},
        {IN_UNMOUNT, "UNMOUNT"},         {IN_Q_OVERFLOW, "Q_OVERFLOW"}, {IN_IGNORED, "IGNORED"},
        {IN_ISDIR, "ISDIR"},
    };
    out[0] = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (m & names[i].bit) {
            if (out[0]) strcat(out, "|");
            strcat(out, names[i].name);
            m &= ~names[i].bit;
        }
    }
    if (m) sprintf(out + strlen(out), "|0x%x", m);
}

/* The cookie of the last MOVED_FROM, to pair with the MOVED_TO after it. */
static uint32_t from_cookie;

/* Prints every queued event (the descriptor is non-blocking). */
static void drain(const char *step) {
    char buf[4096] __attribute__((aligned(8)));
    printf("-- %s\n", step);
    for (;;) {
        ssize_t n = read(ino, buf, sizeof buf);
        if (n < 0) {
            CHECK(errno == EAGAIN);
            return;
        }
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *e = (struct inotify_event *)p;
            char names[256];
            mask_names(e->mask, names);
            printf("%s %s %s", label_of(e->wd), names, e->len ? e->name : "");
            if (e->mask & IN_MOVED_FROM) {
                CHECK(e->cookie != 0);
                from_cookie = e->cookie;
            } else if (e->mask & IN_MOVED_TO) {
                printf(" (cookie %s)", e->cookie == from_cookie ? "paired" : "unpaired");
            } else {
                CHECK(e->cookie == 0);
            }
            /* Names are NUL-padded to whole event headers. */
            CHECK(e->len % sizeof(struct inotify_event) == 0);
            CHECK(e->len == 0 || (strlen(e->name) < e->len && e->name[e->len - 1] == 0));
            printf("\n");
            p += sizeof *e + e->len;
        }
    }
}

static char *at(const char *rel) {
    static char bufs[4][256];
    static int next;
    char *b = bufs[next++ % 4];
    snprintf(b, 256, "%s/%s", base, rel);
    return b;
}

static void write_file(const char *rel, const char *text) {
    int fd = open(at(rel), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
}

static void script(void) {
    CHECK_OK(mkdir(at("a"), 0755));
    CHECK_OK(mkdir(at("b"), 0755));
    int wa = inotify_add_watch(ino, at("a"), IN_ALL_EVENTS);
    int wb = inotify_add_watch(ino, at("b"), IN_ALL_EVENTS);
    CHECK(wa > 0 && wb > 0 && wa != wb);
    label(wa, "a");
    label(wb, "b");

    int fd = open(at("a/f"), O_WRONLY | O_CREAT | O_EXCL, 0644);
    CHECK(fd >= 0);
    drain("create");
    CHECK(write(fd, "hello", 5) == 5);
    CHECK(write(fd, " world", 6) == 6);
    drain("two writes");
    CHECK_OK(close(fd));
    drain("close after writing");

    int wf = inotify_add_watch(ino, at("a/f"), IN_ALL_EVENTS);
    label(wf, "f");
    char buf[64];
    fd = open(at("a/f"), O_RDONLY);
    CHECK(read(fd, buf, sizeof buf) == 11);
    CHECK(read(fd, buf, sizeof buf) == 0);
    CHECK_OK(close(fd));
    drain("open, read, read at the end, close");

    CHECK_OK(chmod(at("a/f"), 0600));
    drain("chmod");
    CHECK_OK(chown(at("a/f"), -1, -1));
    drain("chown to the same owner");
    CHECK_OK(truncate(at("a/f"), 2));
    drain("truncate");
    fd = open(at("a/f"), O_WRONLY);
    CHECK_OK(fallocate(fd, 0, 0, 100));
    CHECK_OK(ftruncate(fd, 2));
    CHECK_OK(close(fd));
    drain("fallocate and ftruncate");
    CHECK_OK(utimes(at("a/f"), NULL));
    drain("utimes");
    struct timespec mt[2] = {{0, UTIME_OMIT}, {12345, 0}};
    CHECK_OK(utimensat(AT_FDCWD, at("a/f"), mt, 0));
    drain("mtime only");
    fd = open(at("a/f"), O_WRONLY | O_TRUNC);
    CHECK_OK(close(fd));
    drain("open with O_TRUNC");

    CHECK_OK(rename(at("a/f"), at("a/g")));
    drain("rename within a");
    CHECK_OK(rename(at("a/g"), at("b/g")));
    drain("rename from a to b");
    CHECK_OK(link(at("b/g"), at("b/h")));
    drain("link");
    CHECK_OK(unlink(at("b/h")));
    drain("unlink one of two links");
    CHECK_OK(unlink(at("b/g")));
    drain("unlink the last link");

    CHECK_OK(mkdir(at("a/sub"), 0755));
    drain("mkdir");
    int ws = inotify_add_watch(ino, at("a/sub"), IN_ALL_EVENTS);
    label(ws, "sub");
    CHECK_OK(rename(at("a/sub"), at("b/sub")));
    drain("move a directory");
    CHECK_OK(rmdir(at("b/sub")));
    drain("rmdir");

    DIR *d = opendir(at("a"));
    CHECK(d != NULL);
    while (readdir(d)) {
    }
    closedir(d);
    drain("list a directory");

    write_file("a/x", "x");
    write_file("a/y", "y");
    drain("make x and y");
    int wy = inotify_add_watch(ino, at("a/y"), IN_ALL_EVENTS);
    label(wy, "y");
    CHECK_OK(rename(at("a/x"), at("a/y")));
    drain("rename over a watched file");

    CHECK_OK(symlink("y", at("a/s")));
    drain("symlink");
    CHECK_OK(mknod(at("a/p"), S_IFIFO | 0644, 0));
    drain("mkfifo");
    CHECK_OK(unlink(at("a/s")));
    CHECK_OK(unlink(at("a/p")));
    CHECK_OK(unlink(at("a/y")));
    drain("unlink three");

    CHECK_OK(inotify_rm_watch(ino, wa));
    drain("rm_watch a");
    CHECK_ERR(inotify_rm_watch(ino, wa), EINVAL);
    write_file("a/quiet", "");
    drain("nobody watches a");
    CHECK_OK(unlink(at("a/quiet")));

    /* One-shot: the watch of b, same descriptor, goes after one event. */
    CHECK(inotify_add_watch(ino, at("b"), IN_CREATE | IN_ONESHOT) == wb);
    write_file("b/o1", "");
    write_file("b/o2", "");
    drain("one-shot");
    CHECK_OK(unlink(at("b/o1")));
    CHECK_OK(unlink(at("b/o2")));
    drain("after the one-shot");
}

static void interface(void) {
    CHECK_ERR(inotify_init1(IN_NONBLOCK | 1), EINVAL);
    CHECK_ERR(inotify_add_watch(ino, at("b"), 0), EINVAL);
    CHECK_ERR(inotify_add_watch(ino, at("b"), IN_CREATE | 0x00400000), EINVAL);
    CHECK_ERR(inotify_add_watch(ino, at("b"), IN_CREATE | IN_MASK_ADD | IN_MASK_CREATE), EINVAL);
    CHECK_ERR(inotify_add_watch(0 + 100, at("b"), IN_CREATE), EBADF);
    int notino = open(at("b"), O_RDONLY);
    CHECK_ERR(inotify_add_watch(notino, at("b"), IN_CREATE), EINVAL);
    CHECK_ERR(inotify_rm_watch(notino, 1), EINVAL);
    close(notino);
    CHECK_ERR(inotify_add_watch(ino, at("missing"), IN_CREATE), ENOENT);
    CHECK_ERR(inotify_rm_watch(ino, 12345), EINVAL);

    write_file("b/file", "data");
    CHECK_ERR(inotify_add_watch(ino, at("b/file"), IN_MODIFY | IN_ONLYDIR), ENOTDIR);
    int w1 = inotify_add_watch(ino, at("b/file"), IN_MODIFY);
    CHECK(w1 > 0);
    CHECK_ERR(inotify_add_watch(ino, at("b/file"), IN_ATTRIB | IN_MASK_CREATE), EEXIST);
    /* The same file by another name is the same watch. */
    CHECK_OK(link(at("b/file"), at("b/other")));
    CHECK(inotify_add_watch(ino, at("b/other"), IN_ATTRIB | IN_MASK_ADD) == w1);
    label(w1, "file");
    CHECK_OK(chmod(at("b/other"), 0644));
    write_file("b/file", "more");
    drain("one watch, two names, masks added");
    /* IN_DONT_FOLLOW watches the link itself. */
    CHECK_OK(symlink("file", at("b/link")));
    CHECK(inotify_add_watch(ino, at("b/link"), IN_ATTRIB) == w1);
    int wl = inotify_add_watch(ino, at("b/link"), IN_ATTRIB | IN_DONT_FOLLOW);
    CHECK(wl > 0 && wl != w1);
    label(wl, "link");
    /* Without IN_MASK_ADD the mask was replaced: MODIFY again. */
    CHECK(inotify_add_watch(ino, at("b/file"), IN_MODIFY | IN_MASK_ADD) == w1);
    drain("watches through a symlink");

    /* FIONREAD, a buffer too small for the first event, and what fits. */
    int fd = open(at("b/file"), O_WRONLY);
    CHECK(write(fd, "1", 1) == 1);
    CHECK_OK(close(fd));
    CHECK_OK(chmod(at("b/file"), 0600));
    int avail = -1;
    CHECK_OK(ioctl(ino, FIONREAD, &avail));
    CHECK(avail == 2 * (int)sizeof(struct inotify_event));
    char small[sizeof(struct inotify_event) + 8] __attribute__((aligned(8)));
    CHECK_ERR(read(ino, small, sizeof(struct inotify_event) - 1), EINVAL);
    CHECK(read(ino, small, sizeof small) == sizeof(struct inotify_event));
    CHECK_OK(ioctl(ino, FIONREAD, &avail));
    CHECK(avail == (int)sizeof(struct inotify_event));
    drain("the rest");
    CHECK_OK(ioctl(ino, FIONREAD, &avail));
    CHECK(avail == 0);

    /* Identical events in a row are one; different ones are not. */
    fd = open(at("b/file"), O_RDWR);
    for (int i = 0; i < 3; i++) CHECK(pwrite(fd, "z", 1, 0) == 1);
    CHECK(pread(fd, small, 1, 0) == 1);
    CHECK(pwrite(fd, "z", 1, 0) == 1);
    drain("repeats merge");

    /* Past max_queued_events, one IN_Q_OVERFLOW. */
    int q = inotify_init1(IN_NONBLOCK);
    CHECK(inotify_add_watch(q, at("b/file"), IN_MODIFY | IN_ACCESS) > 0);
    for (int i = 0; i < 9000; i++) {
        CHECK(pwrite(fd, "z", 1, 0) == 1);
        CHECK(pread(fd, small, 1, 0) == 1);
    }
    long events = 0;
    int overflows = 0, last_overflow = 0;
    char big[8192] __attribute__((aligned(8)));
    ssize_t n;
    while ((n = read(q, big, sizeof big)) > 0) {
        for (char *p = big; p < big + n; p += sizeof(struct inotify_event) + ((struct inotify_event *)p)->len) {
            struct inotify_event *e = (struct inotify_event *)p;
            events++;
            last_overflow = e->mask == IN_Q_OVERFLOW && e->wd == -1;
            overflows += last_overflow;
        }
    }
    printf("overflow: %ld events, %d overflow, last %d\n", events, overflows, last_overflow);
    CHECK(pwrite(fd, "z", 1, 0) == 1);
    CHECK(read(q, big, sizeof big) == sizeof(struct inotify_event));
    close(q);
    CHECK_OK(close(fd));
    drain("the writes the first instance saw");

    /* Readiness: poll and epoll. */
    struct pollfd pfd = {.fd = ino, .events = POLLIN};
    CHECK(poll(&pfd, 1, 0) == 0);
    CHECK_OK(chmod(at("b/file"), 0644));
    CHECK(poll(&pfd, 1, 0) == 1 && pfd.revents == POLLIN);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 7}, out;
    CHECK_OK(epoll_ctl(ep, EPOLL_CTL_ADD, ino, &ev));
    CHECK(epoll_wait(ep, &out, 1, 0) == 1 && out.data.u32 == 7);
    drain("ready");
    CHECK(epoll_wait(ep, &out, 1, 0) == 0);
    close(ep);

    CHECK_OK(unlink(at("b/link")));
    CHECK_OK(unlink(at("b/other")));
    CHECK_OK(unlink(at("b/file")));
    drain("cleaning up");
}

/* A `tail -f`: a blocking inotify read, woken by another process's
 * appends; each wake reads what was added. */
static void follow(void) {
    write_file("b/log", "");
    int reader_ino = inotify_init1(IN_CLOEXEC);
    CHECK(inotify_add_watch(reader_ino, at("b/log"), IN_MODIFY) > 0);
    int log = open(at("b/log"), O_RDONLY);
    int go[2];
    CHECK_OK(pipe(go));
    pid_t writer = fork();
    if (writer == 0) {
        int w = open(at("b/log"), O_WRONLY | O_APPEND);
        char c;
        for (int i = 0; i < 5 && read(go[0], &c, 1) == 1; i++) {
            char line[32];
            int len = snprintf(line, sizeof line, "line %d\n", i);
            if (write(w, line, len) != len) _exit(1);
        }
        _exit(0);
    }
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN}, out;
    CHECK_OK(epoll_ctl(ep, EPOLL_CTL_ADD, reader_ino, &ev));
    for (int i = 0; i < 5; i++) {
        CHECK(write(go[1], "g", 1) == 1);
        if (i == 1) {
            struct pollfd pfd = {.fd = reader_ino, .events = POLLIN};
            CHECK(poll(&pfd, 1, -1) == 1);
        } else if (i == 2) {
            CHECK(epoll_wait(ep, &out, 1, -1) == 1);
        }
        char evbuf[256] __attribute__((aligned(8)));
        ssize_t n = read(reader_ino, evbuf, sizeof evbuf);
        CHECK(n >= (ssize_t)sizeof(struct inotify_event));
        CHECK(((struct inotify_event *)evbuf)->mask == IN_MODIFY);
        char data[64];
        ssize_t got = read(log, data, sizeof data - 1);
        CHECK(got > 0);
        data[got > 0 ? got : 0] = 0;
        printf("followed: %s", data);
    }
    int st;
    CHECK(waitpid(writer, &st, 0) == writer && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(ep);
    close(log);
    close(reader_ino);
    close(go[0]), close(go[1]);
    CHECK_OK(unlink(at("b/log")));
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    strcpy(base, "/tmp/cordon-inotify-XXXXXX");
    if (!mkdtemp(base)) {
        perror("mkdtemp");
        return 2;
    }
    ino = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    CHECK(ino >= 0);
    CHECK((fcntl(ino, F_GETFL) & O_NONBLOCK) && (fcntl(ino, F_GETFD) & FD_CLOEXEC));
    script();
    interface();
    follow();
    close(ino);
    rmdir(at("a"));
    rmdir(at("b"));
    rmdir(base);
    return done();
}
