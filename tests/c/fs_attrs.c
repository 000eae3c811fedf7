/* Attributes on a writable file system, as root: modes, owners, times,
 * sizes (truncate, fallocate), syncing, statx and statfs. See work_dir.h for
 * the arguments. */
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/magic.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "work_dir.h"

static struct stat st_of(const char *path) {
    struct stat st;
    memset(&st, 0, sizeof st);
    CHECK(lstat(path, &st) == 0);
    return st;
}

static void modes(void) {
    CHECK(put_file("m", "", 0, 0644) == 0);
    CHECK(chmod("m", 0600) == 0 && (mode_of("m") & 07777) == 0600);
    CHECK(chmod("m", 07777) == 0 && (mode_of("m") & 07777) == 07777);
    /* Only the permission bits change; the type stays. */
    CHECK(chmod("m", S_IFDIR | 0640) == 0 && mode_of("m") == (S_IFREG | 0640));
    int fd = open("m", O_RDONLY);
    CHECK(fchmod(fd, 04711) == 0 && (mode_of("m") & 07777) == 04711);
    close(fd);
    CHECK(mkdir("md", 0700) == 0);
    CHECK(fchmodat(AT_FDCWD, "md", 03755, 0) == 0 && mode_of("md") == (S_IFDIR | 03755));
    CHECK(symlink("m", "ml") == 0);
    /* chmod follows a symlink; a symlink's own mode cannot be changed. */
    CHECK(chmod("ml", 0604) == 0 && (mode_of("m") & 07777) == 0604 && (mode_of("ml") & 07777) == 0777);
    CHECK_ERR(fchmodat(AT_FDCWD, "ml", 0600, AT_SYMLINK_NOFOLLOW), EOPNOTSUPP);
    CHECK_ERR(fchmodat(AT_FDCWD, "m", 0600, 0x1), EINVAL);
    CHECK_ERR(chmod("none", 0600), ENOENT);
    CHECK_ERR(fchmod(-1, 0600), EBADF);
    /* A mode change touches ctime only. */
    struct stat before = st_of("m");
    CHECK(chmod("m", 0644) == 0);
    struct stat after = st_of("m");
    CHECK(after.st_mtim.tv_sec == before.st_mtim.tv_sec && after.st_mtim.tv_nsec == before.st_mtim.tv_nsec);
    printf("chmod: permission bits only, through symlinks, EOPNOTSUPP on a link itself\n");
}

static void owners(void) {
    CHECK(put_file("o", "", 0, 0644) == 0);
    struct stat st = st_of("o");
    CHECK(st.st_uid == 0 && st.st_gid == 0);
    CHECK(chown("o", 1234, 5678) == 0);
    st = st_of("o");
    CHECK(st.st_uid == 1234 && st.st_gid == 5678);
    CHECK(chown("o", -1, 42) == 0);
    st = st_of("o");
    CHECK(st.st_uid == 1234 && st.st_gid == 42);
    CHECK(chown("o", 7, -1) == 0);
    st = st_of("o");
    CHECK(st.st_uid == 7 && st.st_gid == 42);
    /* lchown and AT_SYMLINK_NOFOLLOW change the link, chown its target. */
    CHECK(symlink("o", "ol") == 0);
    CHECK(lchown("ol", 11, 12) == 0);
    CHECK(st_of("ol").st_uid == 11 && st_of("ol").st_gid == 12 && st_of("o").st_uid == 7);
    CHECK(fchownat(AT_FDCWD, "ol", 13, 14, AT_SYMLINK_NOFOLLOW) == 0);
    CHECK(st_of("ol").st_uid == 13 && st_of("o").st_uid == 7);
    CHECK(chown("ol", 21, 22) == 0);
    CHECK(st_of("o").st_uid == 21 && st_of("o").st_gid == 22 && st_of("ol").st_uid == 13);
    int fd = open("o", O_RDONLY);
    CHECK(fchown(fd, 31, 32) == 0 && st_of("o").st_uid == 31);
    CHECK(fchownat(fd, "", 33, 34, AT_EMPTY_PATH) == 0 && st_of("o").st_uid == 33);
    close(fd);
    CHECK_ERR(fchownat(AT_FDCWD, "o", 1, 1, 0x1), EINVAL);
    CHECK_ERR(chown("none", 1, 1), ENOENT);
    /* A change of owner clears set-user-ID, and set-group-ID when group
     * execute is set, even done by root; a directory keeps both. */
    CHECK(chmod("o", 06755) == 0 && chown("o", 0, 0) == 0);
    CHECK((mode_of("o") & 07777) == 0755);
    CHECK(chmod("o", 06745) == 0 && chown("o", 1, 1) == 0);
    CHECK((mode_of("o") & 07777) == 02745);
    CHECK(mkdir("od", 0755) == 0 && chmod("od", 06755) == 0 && chown("od", 1, 1) == 0);
    CHECK((mode_of("od") & 07777) == 06755);
    printf("chown: uid and gid apart, -1 keeps, lchown on the link, set-id bits cleared on files\n");
}

static int ts_eq(struct timespec a, long sec, long nsec) {
    return a.tv_sec == sec && a.tv_nsec == nsec;
}

static void times(void) {
    CHECK(put_file("t", "", 0, 0644) == 0);
    struct timespec set[2] = {{1000000000, 123456789}, {1500000000, 987654321}};
    CHECK(utimensat(AT_FDCWD, "t", set, 0) == 0);
    struct stat st = st_of("t");
    CHECK(ts_eq(st.st_atim, 1000000000, 123456789) && ts_eq(st.st_mtim, 1500000000, 987654321));
    /* UTIME_OMIT keeps one; both omitted changes nothing at all. */
    struct timespec omit_a[2] = {{0, UTIME_OMIT}, {1600000000, 5}};
    CHECK(utimensat(AT_FDCWD, "t", omit_a, 0) == 0);
    st = st_of("t");
    CHECK(ts_eq(st.st_atim, 1000000000, 123456789) && ts_eq(st.st_mtim, 1600000000, 5));
    struct stat before = st;
    struct timespec omit_both[2] = {{0, UTIME_OMIT}, {0, UTIME_OMIT}};
    CHECK(utimensat(AT_FDCWD, "t", omit_both, 0) == 0);
    st = st_of("t");
    CHECK(ts_eq(st.st_ctim, before.st_ctim.tv_sec, before.st_ctim.tv_nsec));
    /* UTIME_NOW and a NULL array take the current time. */
    struct timespec now0, now1;
    clock_gettime(CLOCK_REALTIME, &now0);
    struct timespec now_m[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
    CHECK(utimensat(AT_FDCWD, "t", now_m, 0) == 0);
    clock_gettime(CLOCK_REALTIME, &now1);
    st = st_of("t");
    /* The file system's clock is coarse: allow it a second either way. */
    CHECK(st.st_mtim.tv_sec >= now0.tv_sec - 1 && st.st_mtim.tv_sec <= now1.tv_sec + 1);
    CHECK(ts_eq(st.st_atim, 1000000000, 123456789));
    CHECK(utimensat(AT_FDCWD, "t", set, 0) == 0);
    CHECK(utimensat(AT_FDCWD, "t", NULL, 0) == 0);
    st = st_of("t");
    CHECK(st.st_atim.tv_sec >= now0.tv_sec - 1 && st.st_mtim.tv_sec >= now0.tv_sec - 1);
    /* A symlink's own times, not its target's. */
    CHECK(symlink("t", "tl") == 0);
    CHECK(utimensat(AT_FDCWD, "t", set, 0) == 0);
    struct timespec link_t[2] = {{1234567890, 1}, {1234567890, 2}};
    CHECK(utimensat(AT_FDCWD, "tl", link_t, AT_SYMLINK_NOFOLLOW) == 0);
    CHECK(ts_eq(st_of("tl").st_mtim, 1234567890, 2) && ts_eq(st_of("t").st_mtim, 1500000000, 987654321));
    CHECK(utimensat(AT_FDCWD, "tl", link_t, 0) == 0);
    CHECK(ts_eq(st_of("t").st_mtim, 1234567890, 2));
    /* futimens, and the other interfaces. */
    int fd = open("t", O_RDONLY);
    CHECK(futimens(fd, set) == 0 && ts_eq(st_of("t").st_mtim, 1500000000, 987654321));
    close(fd);
    struct timeval tv[2] = {{1100000000, 250000}, {1200000000, 750000}};
    CHECK(utimes("t", tv) == 0);
    st = st_of("t");
    CHECK(ts_eq(st.st_atim, 1100000000, 250000000) && ts_eq(st.st_mtim, 1200000000, 750000000));
    /* Errors. */
    struct timespec bad[2] = {{0, 1000000000}, {0, 0}};
    CHECK_ERR(utimensat(AT_FDCWD, "t", bad, 0), EINVAL);
    bad[0].tv_nsec = -1;
    CHECK_ERR(utimensat(AT_FDCWD, "t", bad, 0), EINVAL);
    CHECK_ERR(utimensat(AT_FDCWD, "t", set, 0x1), EINVAL);
    CHECK_ERR(utimensat(AT_FDCWD, "none", set, 0), ENOENT);
    /* Writing moves mtime and ctime. */
    CHECK(utimensat(AT_FDCWD, "t", set, 0) == 0);
    fd = open("t", O_WRONLY);
    CHECK(write(fd, "w", 1) == 1);
    close(fd);
    st = st_of("t");
    CHECK(st.st_mtim.tv_sec >= now0.tv_sec - 1 && ts_eq(st.st_atim, 1000000000, 123456789));
    printf("utimensat: nanoseconds kept, UTIME_OMIT, UTIME_NOW, AT_SYMLINK_NOFOLLOW, EINVAL\n");
}

static int zeros(const char *buf, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (buf[i])
            return 0;
    return 1;
}

static void sizes(void) {
    static char buf[20000];
    CHECK(put_file("s", "0123456789", 10, 0644) == 0);
    CHECK(truncate("s", 10000) == 0 && st_of("s").st_size == 10000);
    CHECK(get_file("s", buf, sizeof buf) == 10000 && memcmp(buf, "0123456789", 10) == 0 && zeros(buf + 10, 9990));
    CHECK(truncate("s", 4) == 0 && get_file("s", buf, sizeof buf) == 4 && strcmp(buf, "0123") == 0);
    /* Shrinking then growing again gives zeros, not the old bytes. */
    CHECK(truncate("s", 8) == 0 && get_file("s", buf, sizeof buf) == 8 && memcmp(buf, "0123\0\0\0\0", 8) == 0);
    int fd = open("s", O_RDWR);
    CHECK(ftruncate(fd, 0) == 0 && st_of("s").st_size == 0);
    /* The offset stays where it was: a write there leaves a hole. */
    CHECK(lseek(fd, 5, SEEK_SET) == 5 && write(fd, "x", 1) == 1 && st_of("s").st_size == 6);
    CHECK_ERR(ftruncate(fd, -1), EINVAL);
    close(fd);
    CHECK_ERR(truncate("s", -1), EINVAL);
    CHECK(mkdir("sd", 0755) == 0);
    CHECK_ERR(truncate("sd", 0), EISDIR);
    CHECK_ERR(truncate("none", 0), ENOENT);
    fd = open("s", O_RDONLY);
    CHECK_ERR(ftruncate(fd, 0), EINVAL);
    close(fd);
    fd = open("s", O_PATH);
    CHECK_ERR(ftruncate(fd, 0), EBADF);
    close(fd);
    fd = open("sd", O_RDONLY | O_DIRECTORY);
    CHECK_ERR(ftruncate(fd, 0), EINVAL);
    close(fd);
    CHECK_ERR(ftruncate(-1, 0), EBADF);
    printf("truncate: grows with zeros, shrinks, EINVAL negative or read-only, EISDIR, EBADF on O_PATH\n");

    /* fallocate: plain grows the size; KEEP_SIZE only reserves; a punched
     * hole reads zeros and frees its blocks. */
    fd = open("fa", O_RDWR | O_CREAT, 0644);
    CHECK(fallocate(fd, 0, 0, 65536) == 0);
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && st.st_size == 65536 && st.st_blocks >= 65536 / 512);
    CHECK(pread(fd, buf, 65536 < sizeof buf ? 65536 : sizeof buf, 0) == sizeof buf && zeros(buf, sizeof buf));
    CHECK(fallocate(fd, FALLOC_FL_KEEP_SIZE, 65536, 65536) == 0);
    CHECK(fstat(fd, &st) == 0 && st.st_size == 65536 && st.st_blocks >= 131072 / 512);
    memset(buf, 'D', sizeof buf);
    CHECK(ftruncate(fd, 0) == 0);
    for (int i = 0; i < 4; i++)
        CHECK(write(fd, buf, 16384) == 16384);
    CHECK(fsync(fd) == 0);
    struct stat full;
    CHECK(fstat(fd, &full) == 0 && full.st_size == 65536);
    CHECK(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 16384, 32768) == 0);
    CHECK(fstat(fd, &st) == 0 && st.st_size == 65536 && st.st_blocks < full.st_blocks);
    CHECK(pread(fd, buf, 16384, 16384) == 16384 && zeros(buf, 16384));
    CHECK(pread(fd, buf, 16384, 32768) == 16384 && zeros(buf, 16384));
    CHECK(pread(fd, buf, 1, 16383) == 1 && buf[0] == 'D');
    CHECK(pread(fd, buf, 1, 49152) == 1 && buf[0] == 'D');
    CHECK_ERR(fallocate(fd, FALLOC_FL_PUNCH_HOLE, 0, 4096), EOPNOTSUPP);
    CHECK_ERR(fallocate(fd, 0, -1, 4096), EINVAL);
    CHECK_ERR(fallocate(fd, 0, 0, 0), EINVAL);
    close(fd);
    fd = open("fa", O_RDONLY);
    CHECK_ERR(fallocate(fd, 0, 0, 4096), EBADF);
    close(fd);
    int p[2];
    CHECK(pipe(p) == 0);
    CHECK_ERR(fallocate(p[1], 0, 0, 4096), ESPIPE);
    close(p[0]);
    close(p[1]);
    printf("fallocate: size and blocks, KEEP_SIZE, PUNCH_HOLE reads zeros and frees blocks, errors\n");
}

static void syncing(void) {
    int fd = open("sync", O_RDWR | O_CREAT, 0644);
    CHECK(write(fd, "data", 4) == 4);
    CHECK(fsync(fd) == 0);
    CHECK(fdatasync(fd) == 0);
    CHECK(sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE) == 0);
    CHECK(sync_file_range(fd, 0, 4096,
                          SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER) == 0);
    CHECK_ERR(sync_file_range(fd, -1, 0, SYNC_FILE_RANGE_WRITE), EINVAL);
    CHECK_ERR(sync_file_range(fd, 0, 0, 0x8), EINVAL);
    CHECK(syncfs(fd) == 0);
    close(fd);
    fd = open("sync", O_RDONLY);
    CHECK(fsync(fd) == 0 && fdatasync(fd) == 0);
    close(fd);
    fd = open(".", O_RDONLY | O_DIRECTORY);
    CHECK(fsync(fd) == 0);
    close(fd);
    CHECK_ERR(fsync(-1), EBADF);
    int p[2];
    CHECK(pipe(p) == 0);
    CHECK_ERR(fsync(p[0]), EINVAL);
    CHECK_ERR(sync_file_range(p[0], 0, 0, SYNC_FILE_RANGE_WRITE), ESPIPE);
    close(p[0]);
    close(p[1]);
    sync();
    printf("fsync, fdatasync, sync_file_range, syncfs: files and directories; EINVAL for a pipe\n");
}

static void statx_fields(void) {
    CHECK(put_file("x", "0123456789", 10, 0640) == 0);
    CHECK(chown("x", 1000, 2000) == 0);
    struct statx sx;
    CHECK(statx(AT_FDCWD, "x", 0, STATX_BASIC_STATS | STATX_BTIME, &sx) == 0);
    CHECK((sx.stx_mask & STATX_BASIC_STATS) == STATX_BASIC_STATS);
    CHECK(sx.stx_mask & STATX_BTIME);
    struct stat st = st_of("x");
    CHECK(sx.stx_mode == st.st_mode && sx.stx_uid == 1000 && sx.stx_gid == 2000 && sx.stx_size == 10);
    CHECK(sx.stx_nlink == 1 && sx.stx_ino == st.st_ino && sx.stx_blocks == (uint64_t)st.st_blocks);
    CHECK(sx.stx_blksize == (uint32_t)st.st_blksize && sx.stx_blksize > 0);
    CHECK(sx.stx_mtime.tv_sec == st.st_mtim.tv_sec && sx.stx_mtime.tv_nsec == (uint32_t)st.st_mtim.tv_nsec);
    CHECK(sx.stx_dev_major == (uint32_t)major(st.st_dev) && sx.stx_dev_minor == (uint32_t)minor(st.st_dev));
    /* Birth is no later than the last change. */
    CHECK(sx.stx_btime.tv_sec <= sx.stx_ctime.tv_sec);
    struct timespec set[2] = {{1000000000, 0}, {1000000000, 0}};
    CHECK(utimensat(AT_FDCWD, "x", set, 0) == 0);
    struct statx sx2;
    CHECK(statx(AT_FDCWD, "x", 0, STATX_BTIME, &sx2) == 0);
    CHECK(sx2.stx_btime.tv_sec == sx.stx_btime.tv_sec && sx2.stx_btime.tv_nsec == sx.stx_btime.tv_nsec);
    /* Blocks: a written file holds some, an empty one none. */
    CHECK(put_file("x0", "", 0, 0644) == 0);
    CHECK(statx(AT_FDCWD, "x0", 0, STATX_BLOCKS, &sx) == 0 && sx.stx_blocks == 0);
    CHECK(statx(AT_FDCWD, "x", AT_STATX_SYNC_AS_STAT, STATX_BLOCKS, &sx) == 0 && sx.stx_blocks > 0);
    /* A symlink, followed or not; an empty path with a descriptor. */
    CHECK(symlink("x", "xl") == 0);
    CHECK(statx(AT_FDCWD, "xl", AT_SYMLINK_NOFOLLOW, STATX_TYPE, &sx) == 0 && S_ISLNK(sx.stx_mode) && sx.stx_size == 1);
    CHECK(statx(AT_FDCWD, "xl", 0, STATX_TYPE, &sx) == 0 && S_ISREG(sx.stx_mode) && sx.stx_size == 10);
    int fd = open("x", O_RDONLY);
    CHECK(statx(fd, "", AT_EMPTY_PATH, STATX_SIZE, &sx) == 0 && sx.stx_size == 10);
    close(fd);
    /* Two links of its own and one for each of md, od and sd. */
    CHECK(statx(AT_FDCWD, ".", 0, STATX_NLINK, &sx) == 0 && S_ISDIR(sx.stx_mode) && sx.stx_nlink == 5);
    CHECK_ERR(statx(AT_FDCWD, "x", 0, STATX__RESERVED, &sx), EINVAL);
    CHECK_ERR(statx(AT_FDCWD, "x", 0x40000000, STATX_BASIC_STATS, &sx), EINVAL);
    CHECK_ERR(statx(AT_FDCWD, "x", AT_STATX_FORCE_SYNC | AT_STATX_DONT_SYNC, STATX_BASIC_STATS, &sx), EINVAL);
    CHECK_ERR(statx(AT_FDCWD, "none", 0, STATX_BASIC_STATS, &sx), ENOENT);
    CHECK_ERR(syscall(SYS_statx, AT_FDCWD, "x", 0, STATX_BASIC_STATS, NULL), EFAULT);
    printf("statx: basic stats agree with stat, btime kept across utimensat, blocks, symlinks, errors\n");
}

static void file_system(void) {
    struct statfs a, b;
    CHECK(statfs(".", &a) == 0);
    int fd = open("x", O_RDONLY);
    CHECK(fstatfs(fd, &b) == 0);
    close(fd);
    CHECK(a.f_type == b.f_type && a.f_bsize == b.f_bsize && a.f_blocks == b.f_blocks);
    CHECK(!on_tmpfs || a.f_type == TMPFS_MAGIC);
    CHECK(a.f_bsize > 0 && a.f_namelen == 255);
    CHECK(a.f_blocks >= a.f_bfree && a.f_bfree >= a.f_bavail);
    CHECK(!on_tmpfs || (a.f_blocks > 0 && a.f_bfree == a.f_bavail && a.f_files > 0 && a.f_files >= a.f_ffree));
    CHECK((a.f_flags & ST_RDONLY) == 0);
    /* Writing a megabyte takes blocks from the free count. */
    static char mb[1 << 20];
    memset(mb, 1, sizeof mb);
    CHECK(put_file("big", mb, sizeof mb, 0644) == 0);
    fd = open("big", O_RDONLY);
    CHECK(fsync(fd) == 0);
    close(fd);
    CHECK(statfs(".", &b) == 0);
    CHECK(!on_tmpfs || b.f_bfree + (sizeof mb / b.f_bsize) <= a.f_bfree);
    CHECK_ERR(statfs("none", &a), ENOENT);
    CHECK_ERR(fstatfs(-1, &a), EBADF);
    printf("statfs: statfs and fstatfs agree, names up to 255, free counts in order, writable\n");
}

int main(int argc, char **argv) {
    enter_work_dir(argc, argv);
    modes();
    owners();
    times();
    sizes();
    syncing();
    statx_fields();
    file_system();
    return done();
}
