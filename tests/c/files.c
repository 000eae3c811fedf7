/* Files: open flags, reading at offsets, lseek, the stat family, access,
 * readlink, getdents64, the working directory, ioctl, the memory devices and
 * statfs. argv[1] is a fixture directory made by the Rust test:
 *   data      10000 bytes, byte i = i % 251
 *   empty     an empty file
 *   link      -> data
 *   dangling  -> nowhere
 *   dir/      holding a, b, c
 *   dirlink   -> dir
 * argv[2] is a directory whose sorted listing is printed. */
#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <termios.h>
#include <unistd.h>

#include "t.h"

static char path_buf[4096];
static const char *base;

static const char *at(const char *name) {
    snprintf(path_buf, sizeof path_buf, "%s/%s", base, name);
    return path_buf;
}

static int pattern_ok(const unsigned char *buf, size_t n, size_t off) {
    for (size_t i = 0; i < n; i++)
        if (buf[i] != (off + i) % 251)
            return 0;
    return 1;
}

static void test_open_flags(void) {
    int fd = open(at("data"), O_RDONLY);
    CHECK(fd >= 0);
    CHECK(fcntl(fd, F_GETFD) == 0);
    printf("F_GETFL O_RDONLY file: %#x\n", fcntl(fd, F_GETFL));
    char c;
    CHECK_ERR(write(fd, "x", 1), EBADF);
    close(fd);

    fd = open(at("data"), O_RDONLY | O_CLOEXEC);
    CHECK(fcntl(fd, F_GETFD) == FD_CLOEXEC);
    printf("F_GETFL O_CLOEXEC file: %#x\n", fcntl(fd, F_GETFL));
    close(fd);

    fd = open(at("data"), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    CHECK(fd >= 0);
    printf("F_GETFL O_NOFOLLOW|O_NONBLOCK|O_NOCTTY file: %#x\n", fcntl(fd, F_GETFL));
    close(fd);

    CHECK_ERR(open(at("data"), O_RDONLY | O_DIRECTORY), ENOTDIR);
    CHECK_ERR(open(at("data/"), O_RDONLY), ENOTDIR);
    CHECK_ERR(open(at("data/x"), O_RDONLY), ENOTDIR);
    CHECK_ERR(open(at("link"), O_RDONLY | O_NOFOLLOW), ELOOP);
    /* O_DIRECTORY does not make O_NOFOLLOW follow: the link is no directory. */
    CHECK_ERR(open(at("dirlink"), O_RDONLY | O_NOFOLLOW | O_DIRECTORY), ENOTDIR);
    fd = open(at("dirlink/"), O_RDONLY | O_NOFOLLOW | O_DIRECTORY);
    CHECK(fd >= 0); /* a trailing slash follows */
    close(fd);
    CHECK_ERR(open(at("data"), O_RDONLY | O_CREAT | O_EXCL, 0644), EEXIST);
    CHECK_ERR(open(at("dir"), O_RDONLY | O_CREAT | O_EXCL, 0644), EEXIST);
    CHECK_ERR(open(at("link"), O_RDONLY | O_CREAT | O_EXCL, 0644), EEXIST);
    CHECK_ERR(open(at("dangling"), O_RDONLY | O_CREAT | O_EXCL, 0644), EEXIST);
    CHECK_ERR(open(at("dangling"), O_RDONLY), ENOENT);
    CHECK_ERR(open(at("missing"), O_RDONLY), ENOENT);
    CHECK_ERR(open(at("dir"), O_WRONLY), EISDIR);
    CHECK_ERR(open(at("dir"), O_RDWR), EISDIR);
    CHECK_ERR(open(at("dir"), O_RDONLY | O_CREAT, 0644), EISDIR);

    /* A symlink followed to a directory, with and without O_DIRECTORY. */
    fd = open(at("dirlink"), O_RDONLY | O_DIRECTORY);
    CHECK(fd >= 0);
    printf("F_GETFL O_DIRECTORY: %#x\n", fcntl(fd, F_GETFL));
    CHECK_ERR(read(fd, &c, 1), EISDIR);
    close(fd);

    /* O_PATH: a name only. */
    fd = open(at("link"), O_PATH | O_NOFOLLOW);
    CHECK(fd >= 0);
    printf("F_GETFL O_PATH|O_NOFOLLOW: %#x\n", fcntl(fd, F_GETFL));
    CHECK_ERR(read(fd, &c, 1), EBADF);
    struct stat st;
    CHECK_OK(fstat(fd, &st));
    CHECK(S_ISLNK(st.st_mode));
    close(fd);

    /* openat relative to a directory descriptor, and to a file (ENOTDIR). */
    int dfd = open(at("dir"), O_RDONLY | O_DIRECTORY);
    fd = openat(dfd, "a", O_RDONLY);
    CHECK(fd >= 0);
    close(fd);
    CHECK_ERR(openat(dfd, "nope", O_RDONLY), ENOENT);
    int ffd = open(at("data"), O_RDONLY);
    CHECK_ERR(openat(ffd, "a", O_RDONLY), ENOTDIR);
    fd = openat(ffd, at("data"), O_RDONLY);
    CHECK(fd >= 0); /* an absolute path ignores the descriptor */
    close(fd);
    CHECK_ERR(openat(99, "a", O_RDONLY), EBADF);
    close(ffd);
    close(dfd);
}

static void test_read(void) {
    unsigned char buf[5000];
    int fd = open(at("data"), O_RDONLY);
    CHECK(read(fd, buf, 4096) == 4096 && pattern_ok(buf, 4096, 0));
    CHECK(read(fd, buf, 4096) == 4096 && pattern_ok(buf, 4096, 4096));
    CHECK(read(fd, buf, 4096) == 10000 - 8192 && pattern_ok(buf, 1808, 8192));
    CHECK(read(fd, buf, 4096) == 0);
    CHECK(read(fd, buf, 0) == 0);

    /* pread: at an offset, short at the end, nothing past it, and the file
     * offset does not move. */
    CHECK(lseek(fd, 100, SEEK_SET) == 100);
    CHECK(pread(fd, buf, 50, 9990) == 10 && pattern_ok(buf, 10, 9990));
    CHECK(pread(fd, buf, 50, 10000) == 0);
    CHECK(pread(fd, buf, 50, 1 << 30) == 0);
    CHECK(pread(fd, buf, 300, 1234) == 300 && pattern_ok(buf, 300, 1234));
    CHECK_ERR(pread(fd, buf, 10, -1), EINVAL);
    CHECK(lseek(fd, 0, SEEK_CUR) == 100);
    CHECK(read(fd, buf, 1) == 1 && buf[0] == 100);

    /* readv fills the vectors in order and continues at the offset. */
    unsigned char a[10], b[0], c[20];
    struct iovec iov[3] = {{a, sizeof a}, {b, 0}, {c, sizeof c}};
    CHECK(lseek(fd, 500, SEEK_SET) == 500);
    CHECK(readv(fd, iov, 3) == 30);
    CHECK(pattern_ok(a, 10, 500) && pattern_ok(c, 20, 510));
    CHECK(lseek(fd, 0, SEEK_CUR) == 530);
    CHECK(lseek(fd, 9995, SEEK_SET) == 9995);
    CHECK(readv(fd, iov, 3) == 5 && pattern_ok(a, 5, 9995));
    CHECK_ERR(syscall(SYS_readv, fd, iov, -1), EINVAL);
    CHECK_ERR(syscall(SYS_readv, fd, iov, 5000), EINVAL);

    /* preadv: at an offset, leaving the file offset alone. */
    CHECK(lseek(fd, 7, SEEK_SET) == 7);
    CHECK(preadv(fd, iov, 3, 2000) == 30 && pattern_ok(a, 10, 2000) && pattern_ok(c, 20, 2010));
    CHECK(preadv(fd, iov, 3, 9990) == 10 && pattern_ok(a, 10, 9990));
    CHECK(preadv(fd, iov, 3, 20000) == 0);
    CHECK(lseek(fd, 0, SEEK_CUR) == 7);
    close(fd);

    fd = open(at("empty"), O_RDONLY);
    CHECK(read(fd, buf, sizeof buf) == 0);
    close(fd);
}

static void test_lseek(void) {
    int fd = open(at("data"), O_RDONLY);
    CHECK(lseek(fd, 10, SEEK_SET) == 10);
    CHECK(lseek(fd, 5, SEEK_CUR) == 15);
    CHECK(lseek(fd, -5, SEEK_CUR) == 10);
    CHECK(lseek(fd, 0, SEEK_END) == 10000);
    CHECK(lseek(fd, -1, SEEK_END) == 9999);
    CHECK(lseek(fd, 100, SEEK_END) == 10100);
    unsigned char c;
    CHECK(read(fd, &c, 1) == 0); /* past the end */
    CHECK(lseek(fd, 0, SEEK_CUR) == 10100);
    CHECK_ERR(lseek(fd, -1, SEEK_SET), EINVAL);
    CHECK_ERR(lseek(fd, -20000, SEEK_END), EINVAL);
    CHECK_ERR(lseek(fd, -20000, SEEK_CUR), EINVAL);
    CHECK_ERR(lseek(fd, 0, 42), EINVAL);
    CHECK(lseek(fd, 0, SEEK_CUR) == 10100); /* failures leave it */
    CHECK(lseek(fd, 0, SEEK_DATA) == 0);
    CHECK(lseek(fd, 0, SEEK_HOLE) == 10000);
    CHECK_ERR(lseek(fd, 10000, SEEK_DATA), ENXIO);
    CHECK(lseek(fd, 250, SEEK_SET) == 250);
    CHECK(read(fd, &c, 1) == 1 && c == 250 % 251);
    close(fd);
    CHECK_ERR(lseek(fd, 0, SEEK_SET), EBADF);
}

static void same_stat(const struct stat *a, const struct stat *b, const char *what) {
    int same = a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_mode == b->st_mode &&
               a->st_nlink == b->st_nlink && a->st_uid == b->st_uid && a->st_gid == b->st_gid &&
               a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
               a->st_mtim.tv_nsec == b->st_mtim.tv_nsec && a->st_blocks == b->st_blocks;
    if (!same)
        fprintf(stderr, "stat results differ: %s\n", what);
    CHECK(same);
}

static void print_stat(const char *name, const struct stat *st) {
    printf("stat %s: type %o perm %o nlink %lu size %ld uid %u gid %u\n", name, st->st_mode & S_IFMT,
           st->st_mode & 07777, (unsigned long)st->st_nlink, (long)st->st_size, st->st_uid, st->st_gid);
}

static void test_stat(void) {
    struct stat a, b, c, d;
    CHECK_OK(stat(at("data"), &a));
    print_stat("data", &a);
    int fd = open(at("data"), O_RDONLY);
    CHECK_OK(fstat(fd, &b));
    same_stat(&a, &b, "stat/fstat");
    CHECK_OK(fstatat(fd, "", &c, AT_EMPTY_PATH));
    same_stat(&a, &c, "stat/AT_EMPTY_PATH");
    CHECK_ERR(fstatat(fd, "", &c, 0), ENOENT);
    CHECK_OK(fstatat(AT_FDCWD, at("link"), &c, 0));
    same_stat(&a, &c, "stat/newfstatat through a link");
    CHECK_OK(stat(at("link"), &c));
    same_stat(&a, &c, "stat/stat through a link");
    CHECK(a.st_size == 10000 && S_ISREG(a.st_mode));
    CHECK(a.st_blksize > 0);

    CHECK_OK(lstat(at("link"), &d));
    print_stat("link (lstat)", &d);
    CHECK(S_ISLNK(d.st_mode) && d.st_size == 4);
    CHECK_OK(fstatat(AT_FDCWD, at("link"), &c, AT_SYMLINK_NOFOLLOW));
    same_stat(&d, &c, "lstat/AT_SYMLINK_NOFOLLOW");
    CHECK(d.st_ino != a.st_ino);
    CHECK_ERR(fstatat(AT_FDCWD, at("link"), &c, 0x12345678), EINVAL);

    CHECK_OK(stat(at("dir"), &c));
    print_stat("dir", &c);
    CHECK(S_ISDIR(c.st_mode));
    CHECK_OK(stat(at("dirlink/"), &d));
    same_stat(&c, &d, "dir/dirlink/");
    CHECK_OK(lstat(at("dirlink/"), &d));
    same_stat(&c, &d, "lstat with a trailing slash follows");
    CHECK_OK(stat(at("dir/../data"), &d));
    same_stat(&a, &d, "dir/../data");
    CHECK_OK(stat(at("dir/./././a"), &d));
    CHECK_OK(stat(at("empty"), &d));
    print_stat("empty", &d);

    int dfd = open(at("dir"), O_RDONLY | O_DIRECTORY);
    CHECK_OK(fstatat(dfd, "../data", &d, 0));
    same_stat(&a, &d, "fstatat(dir, ../data)");
    close(dfd);

    CHECK_ERR(stat(at("missing"), &d), ENOENT);
    CHECK_ERR(stat(at("dangling"), &d), ENOENT);
    CHECK_OK(lstat(at("dangling"), &d));
    CHECK_ERR(stat(at("data/x"), &d), ENOTDIR);
    CHECK_ERR(stat("", &d), ENOENT);
    CHECK_ERR(fstat(-1, &d), EBADF);

    /* statx agrees with stat. */
    struct statx x;
    CHECK_OK(statx(AT_FDCWD, at("link"), 0, STATX_BASIC_STATS, &x));
    CHECK((x.stx_mask & STATX_BASIC_STATS) == STATX_BASIC_STATS);
    CHECK(x.stx_ino == a.st_ino && x.stx_size == (uint64_t)a.st_size && x.stx_mode == a.st_mode);
    CHECK(x.stx_nlink == a.st_nlink && x.stx_uid == a.st_uid && x.stx_gid == a.st_gid);
    CHECK(makedev(x.stx_dev_major, x.stx_dev_minor) == a.st_dev);
    CHECK(x.stx_mtime.tv_sec == a.st_mtim.tv_sec && x.stx_mtime.tv_nsec == (uint32_t)a.st_mtim.tv_nsec);
    CHECK(x.stx_blocks == (uint64_t)a.st_blocks && x.stx_blksize == (uint32_t)a.st_blksize);
    CHECK_OK(statx(AT_FDCWD, at("link"), AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS, &x));
    CHECK(S_ISLNK(x.stx_mode) && x.stx_size == 4);
    CHECK_OK(statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &x));
    CHECK(x.stx_ino == a.st_ino);
    CHECK_ERR(statx(fd, "", 0, STATX_BASIC_STATS, &x), ENOENT);
    CHECK_ERR(statx(AT_FDCWD, at("data"), 0x40000000, STATX_BASIC_STATS, &x), EINVAL);
    CHECK_ERR(statx(AT_FDCWD, at("data"), 0, 0x80000000u, &x), EINVAL);
    CHECK_ERR(statx(AT_FDCWD, at("missing"), 0, STATX_BASIC_STATS, &x), ENOENT);
    close(fd);
}

static void test_access(void) {
    CHECK_OK(access(at("data"), F_OK));
    CHECK_OK(access(at("data"), R_OK));
    CHECK_ERR(access(at("data"), X_OK), EACCES); /* mode 0644, even for root */
    CHECK_OK(access(at("dir"), R_OK | X_OK));
    CHECK_ERR(access(at("missing"), F_OK), ENOENT);
    CHECK_ERR(access(at("dangling"), F_OK), ENOENT);
    CHECK_ERR(access(at("data"), 8), EINVAL);
    CHECK_OK(syscall(SYS_faccessat2, AT_FDCWD, at("dangling"), F_OK, AT_SYMLINK_NOFOLLOW));
    CHECK_OK(syscall(SYS_faccessat2, AT_FDCWD, at("link"), R_OK, AT_EACCESS));
    CHECK_ERR(syscall(SYS_faccessat2, AT_FDCWD, at("data"), F_OK, 0x1), EINVAL);
    int dfd = open(at("dir"), O_RDONLY | O_DIRECTORY);
    CHECK_OK(syscall(SYS_faccessat2, dfd, "a", R_OK, 0));
    CHECK_OK(syscall(SYS_faccessat2, dfd, "", R_OK, AT_EMPTY_PATH));
    CHECK_ERR(syscall(SYS_faccessat2, dfd, "nope", R_OK, 0), ENOENT);
    CHECK_OK(syscall(SYS_faccessat, dfd, "b", R_OK));
    close(dfd);
    CHECK_OK(access("/bin/sh", X_OK));
}

static void test_readlink(void) {
    char buf[64];
    memset(buf, 'x', sizeof buf);
    CHECK(readlink(at("link"), buf, sizeof buf) == 4 && memcmp(buf, "dataxx", 6) == 0);
    CHECK(readlink(at("link"), buf, 2) == 2 && memcmp(buf, "da", 2) == 0);
    CHECK(readlink(at("dangling"), buf, sizeof buf) == 7 && memcmp(buf, "nowhere", 7) == 0);
    CHECK_ERR(readlink(at("data"), buf, sizeof buf), EINVAL);
    CHECK_ERR(readlink(at("dir"), buf, sizeof buf), EINVAL);
    CHECK_ERR(readlink(at("missing"), buf, sizeof buf), ENOENT);
    CHECK_ERR(readlink(at("link"), buf, 0), EINVAL);
    CHECK_ERR(readlink(at("dirlink/"), buf, sizeof buf), EINVAL); /* the slash follows it */
    int dfd = open(base, O_RDONLY | O_DIRECTORY);
    CHECK(readlinkat(dfd, "dirlink", buf, sizeof buf) == 3 && memcmp(buf, "dir", 3) == 0);
    CHECK_ERR(readlinkat(dfd, "data", buf, sizeof buf), EINVAL);
    close(dfd);
    int lfd = open(at("link"), O_PATH | O_NOFOLLOW);
    CHECK(readlinkat(lfd, "", buf, sizeof buf) == 4 && memcmp(buf, "data", 4) == 0);
    close(lfd);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Lists a directory with raw getdents64 and a small buffer (several calls),
 * returns the sorted names. */
static int list_dir(const char *dir, char **names, int max, int bufsize) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    CHECK(fd >= 0);
    char buf[8192];
    int n = 0, calls = 0;
    for (;;) {
        long r = syscall(SYS_getdents64, fd, buf, bufsize);
        /* Counted only if it fails: how many entries a call returns, and
           so how many calls a listing takes, is the file system's choice
           (ext4 stops at its hash tree's blocks), not the ABI's. */
        if (r < 0)
            CHECK(r >= 0);
        if (r <= 0)
            break;
        calls++;
        for (long off = 0; off < r;) {
            struct dirent64 *d = (struct dirent64 *)(buf + off);
            if (n < max)
                names[n++] = strdup(d->d_name);
            off += d->d_reclen;
        }
    }
    close(fd);
    qsort(names, n, sizeof *names, cmp_str);
    return n;
}

static void test_getdents(const char *listed) {
    char *names[4096];
    int n = list_dir(at("dir"), names, 4096, 8192);
    printf("getdents64 fixture dir:");
    for (int i = 0; i < n; i++) {
        printf(" %s", names[i]);
        free(names[i]);
    }
    printf("\n");
    CHECK(n == 5);

    n = list_dir(listed, names, 4096, 200);
    printf("getdents64 %s: %d entries\n", listed, n);
    for (int i = 0; i < n; i++) {
        printf("  %s\n", names[i]);
        free(names[i]);
    }
    /* d_type, and the same listing in one large call. */
    int fd = open(at("."), O_RDONLY | O_DIRECTORY);
    char buf[8192];
    long r = syscall(SYS_getdents64, fd, buf, sizeof buf);
    int types = 0;
    for (long off = 0; off < r;) {
        struct dirent64 *d = (struct dirent64 *)(buf + off);
        if (!strcmp(d->d_name, "data"))
            types += d->d_type == DT_REG;
        if (!strcmp(d->d_name, "dir"))
            types += d->d_type == DT_DIR;
        if (!strcmp(d->d_name, "link"))
            types += d->d_type == DT_LNK;
        off += d->d_reclen;
    }
    CHECK(types == 3);
    CHECK(syscall(SYS_getdents64, fd, buf, sizeof buf) == 0);
    /* Rewinding starts the listing again. */
    CHECK(lseek(fd, 0, SEEK_SET) == 0);
    CHECK(syscall(SYS_getdents64, fd, buf, sizeof buf) == r);
    /* A buffer too small for one entry. */
    CHECK(lseek(fd, 0, SEEK_SET) == 0);
    CHECK_ERR(syscall(SYS_getdents64, fd, buf, 10), EINVAL);
    close(fd);
    int ffd = open(at("data"), O_RDONLY);
    CHECK_ERR(syscall(SYS_getdents64, ffd, buf, sizeof buf), ENOTDIR);
    close(ffd);
    CHECK_ERR(syscall(SYS_getdents64, 999, buf, sizeof buf), EBADF);
}

static void test_cwd(void) {
    char buf[4096], small[4];
    CHECK(getcwd(buf, sizeof buf) != NULL);
    CHECK_OK(chdir(base));
    CHECK(getcwd(buf, sizeof buf) != NULL && strcmp(buf, base) == 0);
    CHECK_OK(chdir("dir"));
    CHECK(getcwd(buf, sizeof buf) != NULL && strcmp(buf, at("dir")) == 0);
    CHECK_OK(access("a", F_OK));
    CHECK_OK(chdir(".."));
    CHECK(getcwd(buf, sizeof buf) != NULL && strcmp(buf, base) == 0);
    CHECK_OK(chdir("dirlink"));
    CHECK(getcwd(buf, sizeof buf) != NULL && strcmp(buf, at("dir")) == 0);
    CHECK_OK(chdir(base));

    errno = 0;
    CHECK(getcwd(small, sizeof small) == NULL && errno == ERANGE);
    CHECK_ERR(syscall(SYS_getcwd, small, 1), ERANGE);
    long n = syscall(SYS_getcwd, buf, sizeof buf);
    CHECK(n == (long)strlen(base) + 1);
    CHECK_ERR(syscall(SYS_getcwd, (char *)1, sizeof buf), EFAULT);

    CHECK_ERR(chdir(at("data")), ENOTDIR);
    CHECK_ERR(chdir(at("missing")), ENOENT);
    CHECK_ERR(chdir(""), ENOENT);
    int dfd = open(at("dir"), O_RDONLY | O_DIRECTORY);
    CHECK_OK(fchdir(dfd));
    CHECK(getcwd(buf, sizeof buf) != NULL && strcmp(buf, at("dir")) == 0);
    close(dfd);
    int ffd = open(at("data"), O_RDONLY);
    CHECK_ERR(fchdir(ffd), ENOTDIR);
    close(ffd);
    CHECK_ERR(fchdir(999), EBADF);
    CHECK_OK(chdir("/"));
    CHECK(getcwd(buf, sizeof buf) != NULL && strcmp(buf, "/") == 0);
    CHECK_OK(chdir("../../.."));
    CHECK(getcwd(buf, sizeof buf) != NULL && strcmp(buf, "/") == 0);
    CHECK_OK(chdir(base));
}

static void test_ioctl(void) {
    struct termios t;
    int null = open("/dev/null", O_RDWR);
    CHECK_ERR(ioctl(null, TCGETS, &t), ENOTTY);
    CHECK(isatty(null) == 0);
    int avail = -1;
    CHECK_ERR(ioctl(null, FIONREAD, &avail), ENOTTY);
    int fd = open(at("data"), O_RDONLY);
    CHECK_ERR(ioctl(fd, TCGETS, &t), ENOTTY);
    CHECK_OK(ioctl(fd, FIONREAD, &avail));
    CHECK(avail == 10000);
    CHECK(lseek(fd, 9000, SEEK_SET) == 9000);
    CHECK_OK(ioctl(fd, FIONREAD, &avail));
    CHECK(avail == 1000);
    /* FIOCLEX/FIONCLEX set the descriptor flag; FIONBIO the status flag. */
    CHECK_OK(ioctl(fd, FIOCLEX));
    CHECK(fcntl(fd, F_GETFD) == FD_CLOEXEC);
    CHECK_OK(ioctl(fd, FIONCLEX));
    CHECK(fcntl(fd, F_GETFD) == 0);
    int on = 1;
    CHECK_OK(ioctl(fd, FIONBIO, &on));
    CHECK(fcntl(fd, F_GETFL) & O_NONBLOCK);
    on = 0;
    CHECK_OK(ioctl(fd, FIONBIO, &on));
    CHECK(!(fcntl(fd, F_GETFL) & O_NONBLOCK));
    CHECK_ERR(ioctl(fd, FIONREAD, (int *)1), EFAULT);
    CHECK_ERR(ioctl(999, FIONREAD, &avail), EBADF);
    close(fd);
    close(null);
}

static void test_devices(void) {
    char buf[512];
    int null = open("/dev/null", O_RDWR);
    CHECK(null >= 0);
    CHECK(read(null, buf, sizeof buf) == 0);
    CHECK(write(null, buf, sizeof buf) == sizeof buf);
    CHECK(pwrite(null, buf, 10, 5) == 10);
    struct iovec iov[2] = {{buf, 100}, {buf + 100, 23}};
    CHECK(writev(null, iov, 2) == 123);
    CHECK(writev(null, iov, 0) == 0);
    CHECK_ERR(syscall(SYS_writev, null, iov, -1), EINVAL);
    CHECK(lseek(null, 100, SEEK_SET) == 0);
    CHECK(lseek(null, 5, SEEK_CUR) == 0);
    struct stat st;
    CHECK_OK(fstat(null, &st));
    CHECK(S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 && minor(st.st_rdev) == 3);
    printf("F_GETFL /dev/null O_RDWR: %#x\n", fcntl(null, F_GETFL));
    close(null);

    int zero = open("/dev/zero", O_RDONLY);
    memset(buf, 'x', sizeof buf);
    CHECK(read(zero, buf, sizeof buf) == sizeof buf);
    int zeros = 1;
    for (size_t i = 0; i < sizeof buf; i++)
        zeros &= buf[i] == 0;
    CHECK(zeros);
    CHECK(lseek(zero, 0, SEEK_CUR) == 0);
    CHECK(pread(zero, buf, 10, 1000) == 10);
    CHECK_ERR(write(zero, buf, 1), EBADF);
    CHECK_OK(stat("/dev/zero", &st));
    CHECK(S_ISCHR(st.st_mode) && major(st.st_rdev) == 1 && minor(st.st_rdev) == 5);
    close(zero);

    int full = open("/dev/full", O_RDWR);
    CHECK_ERR(write(full, "x", 1), ENOSPC);
    memset(buf, 'x', sizeof buf);
    CHECK(read(full, buf, 16) == 16 && buf[0] == 0 && buf[15] == 0);
    close(full);

    int ur = open("/dev/urandom", O_RDONLY);
    unsigned char r1[64], r2[64];
    CHECK(read(ur, r1, sizeof r1) == sizeof r1);
    CHECK(read(ur, r2, sizeof r2) == sizeof r2);
    CHECK(memcmp(r1, r2, sizeof r1) != 0);
    int nonzero = 0;
    for (size_t i = 0; i < sizeof r1; i++)
        nonzero += r1[i] != 0;
    CHECK(nonzero > 32);
    close(ur);
    int rnd = open("/dev/random", O_RDONLY);
    CHECK(read(rnd, r1, 16) == 16);
    close(rnd);
}

static void test_statfs(void) {
    struct statfs a, b;
    CHECK_OK(statfs(base, &a));
    int fd = open(at("data"), O_RDONLY);
    CHECK_OK(fstatfs(fd, &b));
    CHECK(a.f_type == b.f_type && a.f_bsize == b.f_bsize && a.f_namelen == b.f_namelen);
    CHECK(a.f_blocks > 0 && a.f_bsize > 0);
    /* The type is the host's natively and the overlay root's in the
     * sandbox. */
    printf("statfs fixture: bsize %ld namelen %ld\n", (long)a.f_bsize, (long)a.f_namelen);
    close(fd);
    CHECK_ERR(statfs(at("missing"), &a), ENOENT);
    CHECK_ERR(fstatfs(999, &a), EBADF);
    CHECK_ERR(statfs((char *)1, &a), EFAULT);
    CHECK_OK(statfs("/proc", &a));
    printf("statfs /proc: type %#lx\n", (long)a.f_type);
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: files FIXTURE-DIR LISTED-DIR\n");
        return 2;
    }
    base = argv[1];
    test_open_flags();
    test_read();
    test_lseek();
    test_stat();
    test_access();
    test_readlink();
    test_getdents(argv[2]);
    test_cwd();
    test_ioctl();
    test_devices();
    test_statfs();
    return done();
}
