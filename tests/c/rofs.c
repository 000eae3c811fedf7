/* Writes to a read-only file system fail with EROFS, after the checks Linux
 * makes first (a name that must not exist: EEXIST; a parent that is
 * missing: ENOENT; a file that must exist: ENOENT).
 *
 * argv[1] must be on a read-only file system: in the sandbox under
 * --read-only the whole root is. (The expectations were taken from Linux
 * with argv[1] on a read-only bind mount; never run this natively on a
 * writable directory.) Holds data (a file), link -> data, dir/ (with a)
 * and nothing called missing. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "t.h"

static char bufs[4][4096];
static int next;
static const char *base;

static const char *at(const char *name) {
    char *b = bufs[next++ % 4];
    snprintf(b, sizeof bufs[0], "%s/%s", base, name);
    return b;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: rofs DIR-ON-A-READ-ONLY-FS\n");
        return 2;
    }
    base = argv[1];
    struct statvfs sv;
    CHECK_OK(statvfs(base, &sv));
    if (!(sv.f_flag & ST_RDONLY)) {
        fprintf(stderr, "%s is not on a read-only file system\n", base);
        return 2;
    }

    /* open */
    CHECK_ERR(open(at("data"), O_WRONLY), EROFS);
    CHECK_ERR(open(at("data"), O_RDWR), EROFS);
    CHECK_ERR(open(at("data"), O_RDONLY | O_TRUNC), EROFS);
    CHECK_ERR(open(at("link"), O_WRONLY | O_APPEND), EROFS);
    CHECK_ERR(open(at("missing"), O_WRONLY | O_CREAT, 0644), EROFS);
    CHECK_ERR(open(at("missing"), O_RDONLY | O_CREAT, 0644), EROFS);
    CHECK_ERR(open(at("missing"), O_WRONLY), ENOENT);
    CHECK_ERR(open(at("no/such/dir/file"), O_WRONLY | O_CREAT, 0644), ENOENT);
    CHECK_ERR(open(at("data"), O_WRONLY | O_CREAT | O_EXCL, 0644), EEXIST);
    CHECK_ERR(open(at("dir"), O_WRONLY), EISDIR);
    CHECK_ERR(creat(at("missing"), 0644), EROFS);
    CHECK_ERR(open(base, O_RDWR | O_TMPFILE, 0600), EROFS);
    int fd = open(at("data"), O_RDONLY);
    CHECK(fd >= 0);
    /* ... reading still works. */
    char c;
    CHECK(read(fd, &c, 1) == 1);

    /* directories */
    CHECK_ERR(mkdir(at("dir"), 0755), EEXIST);
    CHECK_ERR(mkdir(at("data"), 0755), EEXIST);
    CHECK_ERR(mkdir(at("missing"), 0755), EROFS);
    CHECK_ERR(mkdir(at("no/such"), 0755), ENOENT);
    CHECK_ERR(mkdirat(AT_FDCWD, at("missing"), 0755), EROFS);
    CHECK_ERR(rmdir(at("dir")), EROFS);
    CHECK_ERR(rmdir(at("missing")), EROFS); /* Linux asks for write access first */
    CHECK_ERR(rmdir(at("no/such")), ENOENT);

    /* names */
    CHECK_ERR(unlink(at("data")), EROFS);
    CHECK_ERR(unlink(at("missing")), EROFS);
    CHECK_ERR(unlink(at("no/such")), ENOENT);
    CHECK_ERR(unlinkat(AT_FDCWD, at("dir"), AT_REMOVEDIR), EROFS);
    CHECK_ERR(rename(at("data"), at("data2")), EROFS);
    CHECK_ERR(rename(at("missing"), at("data2")), EROFS);
    CHECK_ERR(rename(at("no/such"), at("data2")), ENOENT);
    CHECK_ERR(symlink("data", at("newlink")), EROFS);
    CHECK_ERR(symlink("data", at("link")), EEXIST);
    CHECK_ERR(symlink("data", at("no/such")), ENOENT);
    CHECK_ERR(link(at("data"), at("hard")), EROFS);
    CHECK_ERR(link(at("missing"), at("hard")), ENOENT);
    CHECK_ERR(link(at("data"), at("link")), EEXIST);
    CHECK_ERR(mknod(at("fifo"), S_IFIFO | 0644, 0), EROFS);
    CHECK_ERR(mknod(at("data"), S_IFIFO | 0644, 0), EEXIST);

    /* "." and ".." */
    CHECK_ERR(rmdir(at("dir/.")), EINVAL);
    CHECK_ERR(rmdir(at("dir/..")), ENOTEMPTY);
    CHECK_ERR(rmdir(at("dir/")), EROFS);
    CHECK_ERR(unlink(at("dir/.")), EISDIR);
    CHECK_ERR(mkdir(at("dir/.."), 0755), EEXIST);
    CHECK_ERR(rename(at("dir/."), at("x")), EBUSY);
    CHECK_ERR(rmdir(at("missing/.")), ENOENT);

    /* metadata and size */
    CHECK_ERR(chmod(at("data"), 0600), EROFS);
    CHECK_ERR(chmod(at("missing"), 0600), ENOENT);
    CHECK_ERR(fchmod(fd, 0600), EROFS);
    CHECK_ERR(fchmodat(AT_FDCWD, at("link"), 0600, 0), EROFS);
    CHECK_ERR(chown(at("data"), getuid(), getgid()), EROFS);
    CHECK_ERR(lchown(at("link"), getuid(), getgid()), EROFS);
    CHECK_ERR(fchown(fd, getuid(), getgid()), EROFS);
    CHECK_ERR(chown(at("missing"), getuid(), getgid()), ENOENT);
    CHECK_ERR(truncate(at("data"), 0), EROFS);
    CHECK_ERR(truncate(at("missing"), 0), ENOENT);
    CHECK_ERR(ftruncate(fd, 0), EINVAL); /* not open for writing */
    CHECK_ERR(utimes(at("data"), NULL), EROFS);
    CHECK_ERR(utimensat(AT_FDCWD, at("data"), NULL, 0), EROFS);
    CHECK_ERR(futimens(fd, NULL), EROFS);
    CHECK_ERR(utimensat(AT_FDCWD, at("missing"), NULL, 0), ENOENT);
    CHECK_ERR(setxattr(at("data"), "user.x", "1", 1, 0), EROFS);
    CHECK_ERR(removexattr(at("data"), "user.x"), EROFS);

    /* access reports it */
    CHECK_ERR(access(at("data"), W_OK), EROFS);
    CHECK_ERR(access(at("dir"), W_OK), EROFS);
    CHECK_OK(access(at("data"), R_OK));
    CHECK_ERR(access(at("missing"), W_OK), ENOENT);

    /* The sentry's own devices stay writable. */
    int null = open("/dev/null", O_WRONLY);
    CHECK(null >= 0 && write(null, "x", 1) == 1);
    close(null);
    close(fd);
    return done();
}
