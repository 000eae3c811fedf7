/* Names on a writable file system: mkdir, rmdir, unlink, rename and
 * renameat2, link, symlink and readlink, mknod of FIFOs and sockets, the
 * listing getdents gives after creates and deletes, and getcwd after the
 * working directory is renamed or removed. See work_dir.h for the arguments. */
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "work_dir.h"

static nlink_t links_of(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0)
        return (nlink_t)-1;
    return st.st_nlink;
}

static ino_t inode_of(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0)
        return 0;
    return st.st_ino;
}

static void directories(void) {
    CHECK(mkdir("d", 0755) == 0);
    CHECK(links_of("d") == 2);
    CHECK(mkdir("d/sub/", 0755) == 0);
    CHECK(links_of("d") == 3);
    CHECK(put_file("d/file", "x", 1, 0644) == 0);
    CHECK(links_of("d") == 3);
    CHECK_ERR(mkdir("d", 0755), EEXIST);
    CHECK_ERR(mkdir("d/file", 0755), EEXIST);
    CHECK_ERR(mkdir("d/file/x", 0755), ENOTDIR);
    CHECK_ERR(mkdir("missing/x", 0755), ENOENT);
    CHECK(symlink("d", "dl") == 0);
    CHECK_ERR(mkdir("dl", 0755), EEXIST);
    CHECK_ERR(rmdir("d"), ENOTEMPTY);
    CHECK_ERR(rmdir("d/file"), ENOTDIR);
    CHECK_ERR(rmdir("d/file/"), ENOTDIR);
    CHECK_ERR(rmdir("dl"), ENOTDIR);
    CHECK_ERR(rmdir("d/sub/."), EINVAL);
    CHECK_ERR(rmdir("."), EINVAL);
    CHECK_ERR(rmdir("d/sub/.."), ENOTEMPTY);
    CHECK_ERR(rmdir("d/missing"), ENOENT);
    CHECK(rmdir("d/sub/") == 0);
    CHECK(links_of("d") == 2);
    CHECK_ERR(rmdir("d/sub"), ENOENT);
    CHECK_ERR(unlinkat(AT_FDCWD, "d/file", AT_REMOVEDIR), ENOTDIR);
    CHECK(mkdir("d/sub2", 0755) == 0);
    CHECK(unlinkat(AT_FDCWD, "d/sub2", AT_REMOVEDIR) == 0);
    printf("mkdir/rmdir: nlink 2 3 2, EEXIST, ENOTDIR, ENOENT, ENOTEMPTY, EINVAL for \".\"\n");
}

static void unlinking(void) {
    CHECK_ERR(unlink("d"), EISDIR);
    CHECK_ERR(unlink("d/file/"), ENOTDIR);
    CHECK_ERR(unlink("d/none"), ENOENT);
    CHECK_ERR(unlinkat(AT_FDCWD, "d/file", 0x1), EINVAL);
    /* unlink of a symlink removes the link, not its target. */
    CHECK(unlink("dl") == 0);
    CHECK(access("d/file", F_OK) == 0);
    /* An open file outlives its last name. */
    int fd = open("d/file", O_RDWR);
    CHECK(unlink("d/file") == 0);
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && st.st_nlink == 0);
    char c = 0;
    CHECK(pread(fd, &c, 1, 0) == 1 && c == 'x');
    CHECK(write(fd, "yz", 2) == 2);
    close(fd);
    CHECK_ERR(unlink("d/file"), ENOENT);
    printf("unlink: EISDIR, ENOTDIR, ENOENT; a link goes, not its target; an open file lives on\n");
}

static void renaming(void) {
    CHECK(put_file("a", "A", 1, 0644) == 0);
    CHECK(put_file("b", "B", 1, 0644) == 0);
    ino_t ia = inode_of("a");
    CHECK(rename("a", "c") == 0);
    CHECK(inode_of("c") == ia && access("a", F_OK) == -1);
    CHECK_ERR(renameat2(AT_FDCWD, "c", AT_FDCWD, "b", RENAME_NOREPLACE), EEXIST);
    CHECK(renameat2(AT_FDCWD, "c", AT_FDCWD, "a", RENAME_NOREPLACE) == 0);
    /* Exchange swaps two names, of any kinds. */
    ino_t ib = inode_of("b");
    CHECK(renameat2(AT_FDCWD, "a", AT_FDCWD, "b", RENAME_EXCHANGE) == 0);
    CHECK(inode_of("a") == ib && inode_of("b") == ia);
    CHECK(mkdir("e", 0755) == 0);
    CHECK(put_file("e/in", "", 0, 0644) == 0);
    CHECK(renameat2(AT_FDCWD, "a", AT_FDCWD, "e", RENAME_EXCHANGE) == 0);
    CHECK(S_ISDIR(mode_of("a")) && S_ISREG(mode_of("e")) && access("a/in", F_OK) == 0);
    CHECK(renameat2(AT_FDCWD, "a", AT_FDCWD, "e", RENAME_EXCHANGE) == 0);
    CHECK_ERR(renameat2(AT_FDCWD, "a", AT_FDCWD, "none", RENAME_EXCHANGE), ENOENT);
    CHECK_ERR(renameat2(AT_FDCWD, "a", AT_FDCWD, "b", RENAME_EXCHANGE | RENAME_NOREPLACE), EINVAL);
    CHECK_ERR(renameat2(AT_FDCWD, "a", AT_FDCWD, "b", 1u << 10), EINVAL);

    /* Directories over directories, files and back. */
    CHECK(mkdir("full", 0755) == 0);
    CHECK(put_file("full/x", "", 0, 0644) == 0);
    CHECK(mkdir("empty", 0755) == 0);
    CHECK(mkdir("mover", 0755) == 0);
    CHECK(mkdir("mover/child", 0755) == 0);
    CHECK_ERR(rename("mover", "full"), ENOTEMPTY);
    CHECK_ERR(rename("mover", "a"), ENOTDIR);
    CHECK_ERR(rename("a", "empty"), EISDIR);
    CHECK_ERR(rename("mover", "mover/child/x"), EINVAL);
    CHECK_ERR(rename("mover", "mover/x"), EINVAL);
    CHECK_ERR(rename("a/", "z"), ENOTDIR);
    CHECK_ERR(rename("none", "z"), ENOENT);
    CHECK_ERR(rename("a", "none/z"), ENOENT);
    CHECK_ERR(rename(".", "z"), EBUSY);
    CHECK_ERR(rename("mover", "."), EBUSY);
    ino_t im = inode_of("mover");
    CHECK(rename("mover", "empty") == 0);
    CHECK(inode_of("empty") == im && access("empty/child", F_OK) == 0 && access("mover", F_OK) == -1);
    /* A moved directory's ".." follows it. */
    CHECK(mkdir("full/deep", 0755) == 0);
    CHECK(links_of("full") == 3 && links_of("empty") == 3);
    CHECK(rename("empty/child", "full/deep/child") == 0);
    CHECK(links_of("empty") == 2 && links_of("full/deep") == 3);
    CHECK(inode_of("full/deep/child/..") == inode_of("full/deep"));

    /* Two names of one inode: rename is a no-op that leaves both. */
    CHECK(link("a", "a2") == 0);
    CHECK(rename("a", "a2") == 0);
    CHECK(access("a", F_OK) == 0 && access("a2", F_OK) == 0 && links_of("a") == 2);
    CHECK(rename("a", "a") == 0 && access("a", F_OK) == 0);
    CHECK(unlink("a2") == 0);

    /* Replacement is atomic: an open descriptor keeps the old file, a new open
     * finds the new one, and no moment lacks the name. */
    CHECK(put_file("conf", "old", 3, 0644) == 0);
    CHECK(put_file("conf.new", "new!", 4, 0644) == 0);
    int old = open("conf", O_RDONLY);
    CHECK(rename("conf.new", "conf") == 0);
    char buf[8] = {0};
    CHECK(pread(old, buf, sizeof buf, 0) == 3 && memcmp(buf, "old", 3) == 0);
    struct stat st;
    CHECK(fstat(old, &st) == 0 && st.st_nlink == 0);
    close(old);
    CHECK(get_file("conf", buf, sizeof buf) == 4 && strcmp(buf, "new!") == 0);
    CHECK(access("conf.new", F_OK) == -1);
    /* renameat with directory descriptors. */
    int from = open("full", O_RDONLY | O_DIRECTORY), to = open("e", O_PATH | O_DIRECTORY);
    CHECK(renameat(from, "x", to, "moved") == 0);
    CHECK(access("e/moved", F_OK) == 0 && access("full/x", F_OK) == -1);
    close(from);
    close(to);
    printf("rename: NOREPLACE EEXIST, EXCHANGE swaps, ENOTDIR, EISDIR, ENOTEMPTY, EINVAL into itself, EBUSY for \".\", "
           "same inode no-op, atomic replace\n");
}

static void linking(void) {
    CHECK(put_file("l", "L", 1, 0644) == 0);
    CHECK(links_of("l") == 1);
    CHECK(link("l", "l2") == 0 && link("l", "full/l3") == 0);
    CHECK(links_of("l") == 3 && links_of("l2") == 3 && inode_of("l2") == inode_of("l"));
    CHECK_ERR(link("l", "l2"), EEXIST);
    CHECK_ERR(link("full", "full2"), EPERM);
    CHECK_ERR(link("none", "n2"), ENOENT);
    CHECK_ERR(link("l", "none/n2"), ENOENT);
    CHECK_ERR(link("l/", "n2"), ENOTDIR);
    CHECK(unlink("l2") == 0 && links_of("l") == 2);
    /* link() does not follow a symlink; AT_SYMLINK_FOLLOW does. */
    CHECK(symlink("l", "sl") == 0);
    CHECK(linkat(AT_FDCWD, "sl", AT_FDCWD, "sl_hard", 0) == 0);
    CHECK(S_ISLNK(mode_of("sl_hard")) && inode_of("sl_hard") == inode_of("sl"));
    CHECK(linkat(AT_FDCWD, "sl", AT_FDCWD, "l_hard", AT_SYMLINK_FOLLOW) == 0);
    CHECK(inode_of("l_hard") == inode_of("l") && links_of("l") == 3);
    CHECK_ERR(linkat(AT_FDCWD, "l", AT_FDCWD, "x", 0x1), EINVAL);
    printf("link: nlink 1 3 2 3, EEXIST, EPERM on a directory, symlinks followed only when asked\n");
}

static void symlinks(void) {
    char buf[PATH_MAX];
    CHECK(symlink("nowhere", "dang") == 0);
    CHECK(readlink("dang", buf, sizeof buf) == 7 && memcmp(buf, "nowhere", 7) == 0);
    CHECK_ERR(open("dang", O_RDONLY), ENOENT);
    struct stat st;
    CHECK(lstat("dang", &st) == 0 && S_ISLNK(st.st_mode) && st.st_size == 7);
    CHECK_ERR(stat("dang", &st), ENOENT);
    /* A relative target is relative to the link's own directory. */
    CHECK(mkdir("s", 0755) == 0);
    CHECK(put_file("s/t", "T", 1, 0644) == 0);
    CHECK(symlink("t", "s/rel") == 0);
    CHECK(symlink("s/rel", "chain") == 0);
    CHECK(get_file("s/rel", buf, sizeof buf) == 1 && buf[0] == 'T');
    CHECK(get_file("chain", buf, sizeof buf) == 1 && buf[0] == 'T');
    CHECK(symlink("../l", "s/up") == 0);
    CHECK(get_file("s/up", buf, sizeof buf) == 1 && buf[0] == 'L');
    /* readlink truncates silently and adds no NUL. */
    memset(buf, '#', 8);
    CHECK(readlink("dang", buf, 3) == 3 && memcmp(buf, "now#", 4) == 0);
    CHECK_ERR(readlink("l", buf, sizeof buf), EINVAL);
    CHECK_ERR(readlink("s", buf, sizeof buf), EINVAL);
    CHECK_ERR(readlink("dang", buf, 0), EINVAL);
    CHECK_ERR(readlink("none", buf, sizeof buf), ENOENT);
    CHECK(readlinkat(AT_FDCWD, "s/rel", buf, sizeof buf) == 1);
    CHECK_ERR(symlink("x", "dang"), EEXIST);
    CHECK_ERR(symlink("", "empty_target"), ENOENT);
    CHECK_ERR(symlink("x", "none/y"), ENOENT);
    /* Loops: two links pointing at each other, and a chain past the limit. */
    CHECK(symlink("ping", "pong") == 0 && symlink("pong", "ping") == 0);
    CHECK_ERR(open("ping", O_RDONLY), ELOOP);
    CHECK_ERR(stat("ping", &st), ELOOP);
    CHECK(lstat("ping", &st) == 0);
    CHECK_ERR(open("ping/x", O_RDONLY | O_CREAT, 0644), ELOOP);
    CHECK(mkdir("c", 0755) == 0);
    char name[32], target[32];
    for (int i = 0; i < 41; i++) {
        snprintf(name, sizeof name, "c/%d", i);
        snprintf(target, sizeof target, "%d", i + 1);
        CHECK(symlink(target, name) == 0);
    }
    CHECK(put_file("c/41", "end", 3, 0644) == 0);
    /* 40 links are followed; the 41st is too many. */
    CHECK(get_file("c/1", buf, sizeof buf) == 3);
    CHECK_ERR(open("c/0", O_RDONLY), ELOOP);
    /* A long target: up to PATH_MAX - 1 bytes. */
    static char longt[PATH_MAX + 1];
    memset(longt, 'x', PATH_MAX - 1);
    longt[PATH_MAX - 1] = 0;
    CHECK(symlink(longt, "longlink") == 0);
    CHECK(readlink("longlink", buf, sizeof buf) == PATH_MAX - 1);
    longt[PATH_MAX - 1] = 'x';
    longt[PATH_MAX] = 0;
    CHECK_ERR(symlink(longt, "toolong"), ENAMETOOLONG);
    printf("symlink: dangling ENOENT, relative to its directory, readlink EINVAL and truncation, "
           "ELOOP past 40 links\n");
}

static void nodes(void) {
    CHECK(mknod("fifo", S_IFIFO | 0666, 0) == 0);
    CHECK(mknod("sock", S_IFSOCK | 0666, 0) == 0);
    CHECK(mknod("reg", S_IFREG | 0640, 0) == 0);
    CHECK(mknod("plain", 0640, 0) == 0);
    CHECK(mkfifo("fifo2", 0600) == 0);
    CHECK(S_ISFIFO(mode_of("fifo")) && (mode_of("fifo") & 07777) == 0644);
    CHECK(S_ISSOCK(mode_of("sock")));
    CHECK(S_ISREG(mode_of("reg")) && S_ISREG(mode_of("plain")) && (mode_of("plain") & 07777) == 0640);
    CHECK(S_ISFIFO(mode_of("fifo2")));
    CHECK_ERR(mknod("fifo", S_IFIFO | 0666, 0), EEXIST);
    CHECK_ERR(mknod("bad", S_IFDIR | 0755, 0), EPERM);
    CHECK_ERR(mknod("bad", 0170000 | 0755, 0), EINVAL);
    CHECK_ERR(mkfifo("none/f", 0600), ENOENT);
    struct stat st;
    CHECK(stat("fifo", &st) == 0 && st.st_size == 0 && st.st_rdev == 0);
    /* A FIFO opened without blocking: a reader alone is fine, a writer alone is
     * ENXIO, a writer after a reader is fine. */
    CHECK_ERR(open("fifo", O_WRONLY | O_NONBLOCK), ENXIO);
    int rd = open("fifo", O_RDONLY | O_NONBLOCK);
    CHECK(rd >= 0);
    char c;
    CHECK(read(rd, &c, 1) == 0);
    int wr = open("fifo", O_WRONLY | O_NONBLOCK);
    CHECK(wr >= 0);
    CHECK(read(rd, &c, 1) == -1 && errno == EAGAIN);
    CHECK(write(wr, "f", 1) == 1);
    CHECK(read(rd, &c, 1) == 1 && c == 'f');
    CHECK(fstat(wr, &st) == 0 && S_ISFIFO(st.st_mode));
    close(wr);
    CHECK(read(rd, &c, 1) == 0);
    close(rd);
    /* O_RDWR on a FIFO opens at once (Linux). */
    int rw = open("fifo", O_RDWR);
    CHECK(rw >= 0 && write(rw, "g", 1) == 1 && read(rw, &c, 1) == 1 && c == 'g');
    close(rw);
    /* A socket node is not opened as a file. */
    CHECK_ERR(open("sock", O_RDONLY), ENXIO);
    CHECK(unlink("sock") == 0 && unlink("fifo2") == 0);
    printf("mknod: FIFO, socket and regular nodes, EPERM for a directory; FIFO: ENXIO for a lone writer\n");
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Prints the sorted listing of `dir` (without "." and ".."), a type letter
 * after each name, and checks both dot entries were there. */
static void list(const char *label, const char *dir) {
    DIR *d = opendir(dir);
    CHECK(d != NULL);
    if (!d)
        return;
    char *names[256];
    int n = 0, dots = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) {
            dots++;
            continue;
        }
        char type = e->d_type == DT_DIR ? 'd' : e->d_type == DT_REG ? 'f' : e->d_type == DT_LNK ? 'l'
                  : e->d_type == DT_FIFO ? 'p' : e->d_type == DT_SOCK ? 's' : '?';
        CHECK(asprintf(&names[n], "%s:%c", e->d_name, type) > 0);
        n++;
    }
    closedir(d);
    CHECK(dots == 2);
    qsort(names, n, sizeof names[0], by_name);
    printf("%s:", label);
    for (int i = 0; i < n; i++) {
        printf(" %s", names[i]);
        free(names[i]);
    }
    printf("\n");
}

static void listing(void) {
    CHECK(mkdir("ls", 0755) == 0);
    list("empty directory", "ls");
    char name[64];
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof name, "ls/f%03d", i);
        CHECK(put_file(name, "", 0, 0644) == 0);
    }
    CHECK(mkdir("ls/sub", 0755) == 0);
    CHECK(symlink("f000", "ls/link") == 0);
    CHECK(mkfifo("ls/pipe", 0644) == 0);
    for (int i = 0; i < 100; i++) {
        if (i % 10 == 3)
            continue;
        snprintf(name, sizeof name, "ls/f%03d", i);
        CHECK(unlink(name) == 0);
    }
    CHECK(rename("ls/f013", "ls/renamed") == 0);
    list("after creates and deletes", "ls");
    /* Read again after rewinddir, the stream gives the same entries. */
    DIR *d = opendir("ls");
    struct dirent *e;
    int seen = 0;
    while ((e = readdir(d)))
        seen++;
    rewinddir(d);
    int again = 0;
    while ((e = readdir(d)))
        again++;
    closedir(d);
    CHECK(seen == again && seen == 2 + 9 + 4);
    /* getdents on a file. */
    int fd = open("l", O_RDONLY);
    char buf[256];
    CHECK_ERR(getdents64(fd, buf, sizeof buf), ENOTDIR);
    close(fd);
    fd = open("ls", O_RDONLY | O_DIRECTORY);
    CHECK_ERR(getdents64(fd, buf, 8), EINVAL);
    close(fd);
}

static void working_directory(void) {
    int work = open(".", O_RDONLY | O_DIRECTORY);
    char buf[PATH_MAX], top[PATH_MAX];
    CHECK(getcwd(top, sizeof top) != NULL);
    size_t toplen = strlen(top);
    CHECK(mkdir("before", 0755) == 0);
    CHECK(chdir("before") == 0);
    /* Renamed under us: getcwd gives the new name. */
    CHECK(renameat(work, "before", work, "after") == 0);
    CHECK(getcwd(buf, sizeof buf) != NULL);
    CHECK(strncmp(buf, top, toplen) == 0 && strcmp(buf + toplen, "/after") == 0);
    printf("getcwd after its directory is renamed: WORK%s\n", buf + toplen);
    CHECK(put_file("here", "", 0, 0644) == 0);
    CHECK(fchdir(work) == 0 && access("after/here", F_OK) == 0);
    /* Removed under us: getcwd fails with ENOENT; /proc says "(deleted)";
     * nothing can be made in it, yet "." and ".." still work. */
    CHECK(mkdir("doomed", 0755) == 0);
    CHECK(chdir("doomed") == 0);
    CHECK(unlinkat(work, "doomed", AT_REMOVEDIR) == 0);
    CHECK_ERR(syscall(SYS_getcwd, buf, sizeof buf), ENOENT);
    CHECK(getcwd(buf, sizeof buf) == NULL && errno == ENOENT);
    ssize_t n = readlink("/proc/self/cwd", buf, sizeof buf - 1);
    CHECK(n > 0);
    buf[n < 0 ? 0 : n] = 0;
    CHECK(n > 10 && strcmp(buf + n - 10, " (deleted)") == 0);
    CHECK(strncmp(buf, top, toplen) == 0);
    printf("/proc/self/cwd after its directory is removed: WORK%s\n", buf + toplen);
    struct stat st;
    CHECK(stat(".", &st) == 0 && st.st_nlink == 0);
    CHECK_ERR(open("new", O_WRONLY | O_CREAT, 0644), ENOENT);
    CHECK_ERR(mkdir("newdir", 0755), ENOENT);
    /* It opens, but has no entries to list, not even "." and "..". */
    int dir = open(".", O_RDONLY | O_DIRECTORY);
    CHECK(dir >= 0);
    CHECK_ERR(getdents64(dir, buf, sizeof buf), ENOENT);
    close(dir);
    CHECK(stat("..", &st) == 0 && S_ISDIR(st.st_mode));
    CHECK(chdir("..") == 0 && getcwd(buf, sizeof buf) != NULL && strcmp(buf, top) == 0);
    close(work);
}

int main(int argc, char **argv) {
    enter_work_dir(argc, argv);
    directories();
    unlinking();
    renaming();
    linking();
    symlinks();
    nodes();
    listing();
    working_directory();
    return done();
}
