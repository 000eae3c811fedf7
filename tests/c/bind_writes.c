/* Changes a directory every way a program commonly does: run natively on a
 * host directory and in the sandbox on a bind mount of a copy of it, the
 * checks (Linux's own answers) and the tree left behind must agree.
 * argv[1]: the directory, holding "existing" ("old contents\n"). */
#include <dirent.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "t.h"

static char buf[4096];

static const char *slurp(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return strerror(errno);
    long n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n < 0 ? 0 : n] = 0;
    return buf;
}

int main(int argc, char **argv) {
    if (argc < 2 || chdir(argv[1]) != 0) {
        perror("chdir");
        return 2;
    }
    umask(022);

    /* Writing: create, write, pwrite, append, read back. */
    int fd = open("new", O_WRONLY | O_CREAT | O_EXCL, 0666);
    CHECK(fd >= 0);
    CHECK(write(fd, "hello world\n", 12) == 12);
    CHECK(pwrite(fd, "HELLO", 5, 0) == 5);
    struct iovec iov[2] = {{"ab", 2}, {"cd\n", 3}};
    CHECK(pwritev(fd, iov, 2, 12) == 5);
    CHECK_OK(fsync(fd));
    CHECK_OK(fdatasync(fd));
    close(fd);
    CHECK(strcmp(slurp("new"), "HELLO world\nabcd\n") == 0);
    CHECK_ERR(open("new", O_WRONLY | O_CREAT | O_EXCL, 0666), EEXIST);
    struct stat st;
    CHECK_OK(stat("new", &st));
    CHECK((st.st_mode & 07777) == 0644);

    fd = open("existing", O_WRONLY | O_APPEND);
    CHECK(fd >= 0);
    CHECK(lseek(fd, 0, SEEK_SET) == 0);
    CHECK(write(fd, "appended\n", 9) == 9);
    CHECK(lseek(fd, 0, SEEK_CUR) == 22);
    close(fd);
    CHECK(strcmp(slurp("existing"), "old contents\nappended\n") == 0);

    /* A file made with a mode that denies writing is still written by the
     * call that made it. */
    fd = open("readonly", O_RDWR | O_CREAT | O_EXCL, 0444);
    CHECK(fd >= 0);
    CHECK(write(fd, "made read-only\n", 15) == 15);
    close(fd);

    /* O_TRUNC, truncate, ftruncate, fallocate. */
    fd = open("new", O_WRONLY | O_TRUNC);
    CHECK(fd >= 0);
    CHECK(write(fd, "short\n", 6) == 6);
    CHECK_OK(ftruncate(fd, 3));
    CHECK_OK(fallocate(fd, 0, 0, 8192));
    CHECK_OK(fstat(fd, &st));
    CHECK(st.st_size == 8192);
    CHECK_OK(ftruncate(fd, 4));
    close(fd);
    CHECK_OK(truncate("new", 2));
    CHECK(strcmp(slurp("new"), "sh") == 0);
    CHECK_ERR(truncate("nothing", 0), ENOENT);

    /* Directories. */
    CHECK_OK(mkdir("dir", 0750));
    CHECK_OK(stat("dir", &st));
    CHECK(S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0750);
    CHECK_ERR(mkdir("dir", 0755), EEXIST);
    CHECK_OK(mkdir("dir/sub", 0777));
    CHECK_ERR(rmdir("dir"), ENOTEMPTY);
    CHECK_ERR(unlink("dir"), EISDIR);
    CHECK_ERR(rmdir("new"), ENOTDIR);
    CHECK_ERR(mkdir("new/x", 0755), ENOTDIR);
    CHECK_OK(mkdir("gone", 0755));
    CHECK_OK(rmdir("gone"));
    CHECK_ERR(rmdir("gone"), ENOENT);

    /* Renames. */
    CHECK_OK(rename("new", "dir/moved"));
    CHECK_ERR(stat("new", &st), ENOENT);
    CHECK(strcmp(slurp("dir/moved"), "sh") == 0);
    CHECK(open("a", O_WRONLY | O_CREAT, 0600) >= 0);
    CHECK(open("b", O_WRONLY | O_CREAT, 0640) >= 0);
    CHECK_ERR(syscall(SYS_renameat2, AT_FDCWD, "a", AT_FDCWD, "b", RENAME_NOREPLACE), EEXIST);
    CHECK_OK(syscall(SYS_renameat2, AT_FDCWD, "a", AT_FDCWD, "dir/sub", RENAME_EXCHANGE));
    CHECK_OK(stat("a", &st));
    CHECK(S_ISDIR(st.st_mode));
    CHECK_OK(stat("dir/sub", &st));
    CHECK(S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0600);
    CHECK_OK(rename("b", "dir/sub"));
    CHECK_ERR(rename("dir", "dir/x"), EINVAL);
    CHECK_ERR(rename("a", "existing"), ENOTDIR);
    CHECK_ERR(rename("existing", "a"), EISDIR);

    /* Removal of an open file. */
    fd = open("doomed", O_RDWR | O_CREAT, 0644);
    CHECK(fd >= 0);
    CHECK_OK(unlink("doomed"));
    CHECK(write(fd, "still here", 10) == 10);
    CHECK(pread(fd, buf, 10, 0) == 10);
    CHECK_OK(fstat(fd, &st));
    CHECK(st.st_nlink == 0);
    close(fd);
    CHECK_ERR(unlink("doomed"), ENOENT);

    /* Modes, times. */
    CHECK_OK(chmod("existing", 0640));
    CHECK_OK(chmod("dir", 02755));
    CHECK_OK(stat("existing", &st));
    CHECK((st.st_mode & 07777) == 0640);
    struct timespec times[2] = {{1000000000, 123456789}, {1200000000, 987654321}};
    CHECK_OK(utimensat(AT_FDCWD, "existing", times, 0));
    CHECK_OK(stat("existing", &st));
    CHECK(st.st_atim.tv_sec == 1000000000 && st.st_atim.tv_nsec == 123456789);
    CHECK(st.st_mtim.tv_sec == 1200000000 && st.st_mtim.tv_nsec == 987654321);
    struct timespec only_mtime[2] = {{0, UTIME_OMIT}, {1300000000, 5}};
    CHECK_OK(utimensat(AT_FDCWD, "existing", only_mtime, 0));
    CHECK_OK(stat("existing", &st));
    CHECK(st.st_atim.tv_sec == 1000000000 && st.st_mtim.tv_sec == 1300000000 && st.st_mtim.tv_nsec == 5);

    /* Symlinks and hard links. */
    CHECK_OK(symlink("existing", "link"));
    CHECK_OK(symlink("../outside/of/it", "dir/dangling"));
    CHECK_ERR(symlink("x", "link"), EEXIST);
    char target[64] = {0};
    CHECK(readlink("dir/dangling", target, sizeof target) == 16);
    CHECK(strcmp(slurp("link"), "old contents\nappended\n") == 0);
    struct timespec link_times[2] = {{1100000000, 0}, {1100000000, 0}};
    CHECK_OK(utimensat(AT_FDCWD, "link", link_times, AT_SYMLINK_NOFOLLOW));
    CHECK_OK(lstat("link", &st));
    CHECK(st.st_mtim.tv_sec == 1100000000);
    CHECK_OK(link("existing", "hard"));
    CHECK_OK(link("link", "hard_to_link"));
    CHECK_OK(lstat("hard_to_link", &st));
    CHECK(S_ISLNK(st.st_mode) && st.st_nlink == 2);
    CHECK_OK(stat("existing", &st));
    CHECK(st.st_nlink == 2);
    CHECK_ERR(link("dir", "dir2"), EPERM);
    CHECK_ERR(link("existing", "hard"), EEXIST);

    /* An unnamed file given a name. */
    fd = open(".", O_TMPFILE | O_RDWR, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, "was unnamed\n", 12) == 12);
    char proc_path[64];
    snprintf(proc_path, sizeof proc_path, "/proc/self/fd/%d", fd);
    CHECK_OK(linkat(AT_FDCWD, proc_path, AT_FDCWD, "named", AT_SYMLINK_FOLLOW));
    close(fd);

    /* FIFOs and sockets as names. */
    CHECK_OK(mkfifo("fifo", 0660));
    CHECK_OK(lstat("fifo", &st));
    CHECK(S_ISFIFO(st.st_mode) && (st.st_mode & 07777) == 0640);
    CHECK_OK(mknod("sock", S_IFSOCK | 0600, 0));
    CHECK_OK(lstat("sock", &st));
    CHECK(S_ISSOCK(st.st_mode));
    CHECK_OK(unlink("sock"));

    /* User extended attributes. */
    if (setxattr("existing", "user.probe", "1", 1, 0) == 0) {
        CHECK_OK(setxattr("existing", "user.color", "blue", 4, XATTR_CREATE));
        CHECK_ERR(setxattr("existing", "user.color", "red", 3, XATTR_CREATE), EEXIST);
        CHECK_ERR(setxattr("existing", "user.none", "x", 1, XATTR_REPLACE), ENODATA);
        char v[16] = {0};
        CHECK(getxattr("existing", "user.color", v, sizeof v) == 4 && strcmp(v, "blue") == 0);
        CHECK_ERR(getxattr("existing", "user.none", v, sizeof v), ENODATA);
        CHECK_OK(removexattr("existing", "user.probe"));
        CHECK_ERR(removexattr("existing", "user.probe"), ENODATA);
        char names[256];
        long n = listxattr("existing", names, sizeof names);
        int found = 0;
        for (long i = 0; i < n; i += strlen(names + i) + 1)
            found += strcmp(names + i, "user.color") == 0;
        CHECK(found == 1);
    } else {
        /* A host file system without user attributes: the same everywhere. */
        CHECK(errno == ENOTSUP);
    }

    struct statfs sfs;
    CHECK_OK(statfs(".", &sfs));
    CHECK(sfs.f_blocks > 0 && sfs.f_namelen == 255);

    /* What the directory holds now, in name order. */
    struct dirent **list;
    int n = scandir(".", &list, NULL, alphasort);
    CHECK(n > 0);
    for (int i = 0; i < n; i++) {
        printf("%s\n", list[i]->d_name);
        free(list[i]);
    }
    free(list);
    return done();
}
