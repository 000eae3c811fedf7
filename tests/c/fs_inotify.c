/* inotify on a writable file system: the events of creating, writing,
 * closing, renaming (matching cookies) and deleting, on directories and on
 * files watched themselves, printed in the order they arrive, and the errors
 * of the calls. See work_dir.h for the arguments. */
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "work_dir.h"

static int in_fd;
static int wd_names[3];
static uint32_t last_cookie;

static void print_mask(uint32_t mask) {
    static const struct {
        uint32_t bit;
        const char *name;
    } bits[] = {
        {IN_ACCESS, "ACCESS"},         {IN_MODIFY, "MODIFY"},       {IN_ATTRIB, "ATTRIB"},
        {IN_CLOSE_WRITE, "CLOSE_WRITE"}, {IN_CLOSE_NOWRITE, "CLOSE_NOWRITE"}, {IN_OPEN, "OPEN"},
        {IN_MOVED_FROM, "MOVED_FROM"}, {IN_MOVED_TO, "MOVED_TO"},   {IN_CREATE, "CREATE"},
        {IN_DELETE, "DELETE"},         {IN_DELETE_SELF, "DELETE_SELF"}, {IN_MOVE_SELF, "MOVE_SELF"},
        {IN_UNMOUNT, "UNMOUNT"},       {IN_Q_OVERFLOW, "Q_OVERFLOW"}, {IN_IGNORED, "IGNORED"},
        {IN_ISDIR, "ISDIR"},
    };
    const char *sep = "";
    for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++)
        if (mask & bits[i].bit) {
            printf("%s%s", sep, bits[i].name);
            sep = "|";
            mask &= ~bits[i].bit;
        }
    if (mask)
        printf("%s%#x", sep, mask);
}

/* Reads and prints every queued event: which watch, the mask, the name, and
 * whether a move's cookie matches the one before (cookies themselves vary). */
static void drain(const char *step) {
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    printf("%s:\n", step);
    for (;;) {
        ssize_t n = read(in_fd, buf, sizeof buf);
        if (n < 0) {
            CHECK(errno == EAGAIN);
            break;
        }
        CHECK(n > 0);
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *e = (struct inotify_event *)p;
            int which = -1;
            for (int i = 0; i < 3; i++)
                if (wd_names[i] == e->wd)
                    which = i;
            printf("  wd%d ", which);
            print_mask(e->mask);
            if (e->len)
                printf(" %s", e->name);
            if (e->mask & (IN_MOVED_FROM | IN_MOVED_TO)) {
                CHECK(e->cookie != 0);
                if (e->mask & IN_MOVED_TO)
                    printf(" cookie %s", e->cookie == last_cookie ? "matches" : "differs");
                last_cookie = e->cookie;
            } else {
                CHECK(e->cookie == 0);
            }
            /* The name is padded with NULs to an aligned length. */
            CHECK(e->len % sizeof(struct inotify_event) == 0);
            printf("\n");
            p += sizeof *e + e->len;
        }
    }
}

static void events(void) {
    in_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    CHECK(in_fd >= 0);
    CHECK(fcntl(in_fd, F_GETFD) == FD_CLOEXEC);
    CHECK(mkdir("w", 0755) == 0 && mkdir("v", 0755) == 0);
    wd_names[0] = inotify_add_watch(in_fd, "w", IN_ALL_EVENTS);
    wd_names[1] = inotify_add_watch(in_fd, "v", IN_ALL_EVENTS);
    CHECK(wd_names[0] > 0 && wd_names[1] > 0 && wd_names[0] != wd_names[1]);
    /* Adding the same inode again gives the same watch. */
    CHECK(inotify_add_watch(in_fd, "w/.", IN_ALL_EVENTS) == wd_names[0]);
    drain("nothing yet");

    int fd = open("w/a", O_WRONLY | O_CREAT | O_EXCL, 0644);
    drain("create w/a");
    CHECK(write(fd, "hello", 5) == 5);
    drain("write w/a");
    close(fd);
    drain("close w/a");
    fd = open("w/a", O_RDONLY);
    char c[8];
    CHECK(read(fd, c, sizeof c) == 5);
    drain("open and read w/a");
    close(fd);
    drain("close w/a read-only");
    CHECK(chmod("w/a", 0600) == 0);
    drain("chmod w/a");
    CHECK(truncate("w/a", 1) == 0);
    drain("truncate w/a");

    /* Moves: within a directory and across two watched ones, with cookies. */
    CHECK(rename("w/a", "w/b") == 0);
    drain("rename w/a w/b");
    CHECK(rename("w/b", "v/c") == 0);
    drain("rename w/b v/c");
    CHECK(mkdir("w/sub", 0755) == 0);
    drain("mkdir w/sub");
    CHECK(rename("w/sub", "v/sub") == 0);
    drain("rename w/sub v/sub");
    /* Into a watched directory from an unwatched one: only MOVED_TO. */
    CHECK(put_file("outside", "", 0, 0644) == 0);
    drain("create outside");
    CHECK(rename("outside", "w/in") == 0);
    printf("rename outside w/in:\n");
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n = read(in_fd, buf, sizeof buf);
    struct inotify_event *e = (struct inotify_event *)buf;
    CHECK(n == (ssize_t)(sizeof *e + e->len) && e->mask == IN_MOVED_TO && e->cookie != 0);
    printf("  MOVED_TO %s\n", n > 0 ? e->name : "?");

    /* A file watched itself. */
    wd_names[2] = inotify_add_watch(in_fd, "v/c", IN_ALL_EVENTS);
    CHECK(wd_names[2] > 0);
    fd = open("v/c", O_WRONLY | O_APPEND);
    CHECK(write(fd, "!", 1) == 1);
    close(fd);
    drain("append to watched v/c");
    CHECK(rename("v/c", "v/d") == 0);
    drain("rename watched v/c v/d");
    CHECK(link("v/d", "w/hard") == 0);
    drain("link v/d w/hard");
    CHECK(unlink("v/d") == 0);
    drain("unlink v/d (a link remains)");
    CHECK(unlink("w/hard") == 0);
    drain("unlink w/hard (the last link)");
    CHECK(unlink("w/in") == 0 && rmdir("v/sub") == 0);
    drain("unlink w/in, rmdir v/sub");

    /* IN_ONESHOT, and removing a watch. */
    int once = inotify_add_watch(in_fd, "w", IN_CREATE | IN_ONESHOT);
    CHECK(once == wd_names[0]);
    CHECK(put_file("w/x", "", 0, 0644) == 0 && put_file("w/y", "", 0, 0644) == 0);
    drain("oneshot watch of w, create w/x and w/y");
    CHECK_ERR(inotify_rm_watch(in_fd, wd_names[0]), EINVAL);
    CHECK(inotify_rm_watch(in_fd, wd_names[1]) == 0);
    drain("rm_watch v");
    CHECK(put_file("v/z", "", 0, 0644) == 0);
    drain("create v/z, unwatched");
    /* Watching a directory that is then removed. */
    CHECK(mkdir("gone", 0755) == 0);
    wd_names[1] = inotify_add_watch(in_fd, "gone", IN_DELETE_SELF | IN_MOVE_SELF);
    CHECK(rename("gone", "gone2") == 0 && rmdir("gone2") == 0);
    drain("rename and rmdir a watched directory");
    close(in_fd);
}

static void errors(void) {
    int fd = inotify_init();
    CHECK(fd >= 0);
    CHECK(put_file("f", "", 0, 0644) == 0);
    CHECK_ERR(inotify_add_watch(fd, "f", IN_CREATE | IN_ONLYDIR), ENOTDIR);
    CHECK_ERR(inotify_add_watch(fd, "none", IN_CREATE), ENOENT);
    CHECK_ERR(inotify_add_watch(fd, "f", 0), EINVAL);
    CHECK_ERR(inotify_add_watch(-1, "f", IN_CREATE), EBADF);
    CHECK_ERR(inotify_add_watch(0, "f", IN_CREATE), EINVAL);
    CHECK_ERR(inotify_rm_watch(fd, 12345), EINVAL);
    CHECK_ERR(inotify_init1(0x1), EINVAL);
    /* IN_MASK_CREATE refuses to change an existing watch. */
    int wd = inotify_add_watch(fd, "f", IN_ATTRIB);
    CHECK(wd > 0);
    CHECK_ERR(inotify_add_watch(fd, "f", IN_MODIFY | IN_MASK_CREATE), EEXIST);
    CHECK_ERR(inotify_add_watch(fd, "f", IN_MODIFY | IN_MASK_CREATE | IN_MASK_ADD), EINVAL);
    /* A symlink itself with IN_DONT_FOLLOW. */
    CHECK(symlink("f", "l") == 0);
    int lw = inotify_add_watch(fd, "l", IN_ATTRIB | IN_DONT_FOLLOW);
    CHECK(lw > 0 && lw != wd);
    CHECK(inotify_add_watch(fd, "l", IN_ATTRIB) == wd);
    /* FIONREAD counts queued bytes; a buffer too small for one event is
     * EINVAL. */
    CHECK(chmod("f", 0600) == 0);
    int queued = -1;
    CHECK(ioctl(fd, FIONREAD, &queued) == 0 && queued == (int)sizeof(struct inotify_event));
    char small[8];
    CHECK_ERR(read(fd, small, sizeof small), EINVAL);
    char buf[256] __attribute__((aligned(__alignof__(struct inotify_event))));
    CHECK(read(fd, buf, sizeof buf) == sizeof(struct inotify_event));
    CHECK(ioctl(fd, FIONREAD, &queued) == 0 && queued == 0);
    close(fd);
    printf("errors: ENOTDIR, ENOENT, EINVAL, EBADF, EEXIST for IN_MASK_CREATE; FIONREAD\n");
}

int main(int argc, char **argv) {
    enter_work_dir(argc, argv);
    events();
    errors();
    return done();
}
