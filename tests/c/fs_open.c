/* Opening files on a writable file system: the creating and truncating
 * flags, O_APPEND, O_DIRECTORY, O_NOFOLLOW, O_PATH, O_TMPFILE, openat2's
 * RESOLVE_* rules, the umask, and the errors of each. See work_dir.h for the
 * arguments. */
#include <fcntl.h>
#include <limits.h>
#include <dirent.h>
#include <linux/openat2.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "work_dir.h"

static long openat2_(int dirfd, const char *path, unsigned long long flags, unsigned long long mode,
                     unsigned long long resolve) {
    struct open_how how = {.flags = flags, .mode = mode, .resolve = resolve};
    return syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

static void creating(void) {
    int fd = open("new", O_WRONLY | O_CREAT | O_EXCL, 0644);
    CHECK(fd >= 0);
    CHECK(write(fd, "hello world", 11) == 11);
    close(fd);
    CHECK_ERR(open("new", O_WRONLY | O_CREAT | O_EXCL, 0644), EEXIST);
    /* O_EXCL refuses even a dangling symlink, which it does not follow. */
    CHECK(symlink("absent", "dangling") == 0);
    CHECK_ERR(open("dangling", O_WRONLY | O_CREAT | O_EXCL, 0644), EEXIST);
    CHECK(access("absent", F_OK) == -1);
    /* Without O_EXCL, O_CREAT through a dangling symlink creates its target. */
    fd = open("dangling", O_WRONLY | O_CREAT, 0600);
    CHECK(fd >= 0);
    close(fd);
    CHECK((mode_of("absent") & 07777) == 0600);
    /* O_CREAT on an existing file keeps its contents and mode. */
    fd = open("new", O_RDWR | O_CREAT, 0600);
    char buf[32] = {0};
    CHECK(read(fd, buf, sizeof buf) == 11 && memcmp(buf, "hello world", 11) == 0);
    close(fd);
    CHECK((mode_of("new") & 07777) == 0644);
    CHECK_ERR(open("missing/new", O_WRONLY | O_CREAT, 0644), ENOENT);
    CHECK_ERR(open("new/below", O_WRONLY | O_CREAT, 0644), ENOTDIR);
    CHECK_ERR(open("new/", O_WRONLY | O_CREAT, 0644), EISDIR);
    CHECK_ERR(open("nothing/", O_WRONLY | O_CREAT, 0644), EISDIR);
    CHECK_ERR(open("nothing", O_RDONLY), ENOENT);
    printf("O_CREAT, O_EXCL: created, EEXIST, through a dangling link, ENOENT, ENOTDIR, EISDIR\n");
}

static void truncating(void) {
    CHECK(put_file("t", "0123456789", 10, 0644) == 0);
    int fd = open("t", O_RDONLY | O_TRUNC);
    struct stat st;
    /* O_TRUNC truncates even on a read-only open (Linux does). */
    CHECK(fd >= 0 && fstat(fd, &st) == 0 && st.st_size == 0);
    close(fd);
    CHECK(put_file("t", "0123456789", 10, 0644) == 0);
    fd = open("t", O_WRONLY | O_TRUNC);
    CHECK(fd >= 0 && fstat(fd, &st) == 0 && st.st_size == 0);
    CHECK(write(fd, "ab", 2) == 2);
    close(fd);
    char buf[16];
    CHECK(get_file("t", buf, sizeof buf) == 2 && strcmp(buf, "ab") == 0);
    printf("O_TRUNC: size 0 after open, new contents read back\n");
}

static void appending(void) {
    CHECK(put_file("log", "start\n", 6, 0644) == 0);
    int a = open("log", O_WRONLY | O_APPEND);
    int b = open("log", O_WRONLY | O_APPEND);
    CHECK(a >= 0 && b >= 0);
    /* Opening does not move to the end; each write does. */
    CHECK(lseek(a, 0, SEEK_CUR) == 0);
    CHECK(write(a, "one\n", 4) == 4);
    CHECK(lseek(a, 0, SEEK_CUR) == 10);
    CHECK(write(b, "two\n", 4) == 4);
    CHECK(lseek(b, 0, SEEK_CUR) == 14);
    /* A seek before the write does not keep it from going to the end. */
    CHECK(lseek(a, 0, SEEK_SET) == 0);
    CHECK(write(a, "three\n", 6) == 6);
    CHECK(lseek(a, 0, SEEK_CUR) == 20);
    /* pwrite on an O_APPEND file appends too, ignoring its offset. */
    CHECK(pwrite(b, "four\n", 5, 0) == 5);
    CHECK(lseek(b, 0, SEEK_CUR) == 14);
    close(a);
    close(b);
    char buf[64];
    CHECK(get_file("log", buf, sizeof buf) == 25);
    CHECK(strcmp(buf, "start\none\ntwo\nthree\nfour\n") == 0);
    /* fcntl can clear O_APPEND. */
    a = open("log", O_WRONLY | O_APPEND);
    CHECK(fcntl(a, F_SETFL, 0) == 0 && (fcntl(a, F_GETFL) & O_APPEND) == 0);
    CHECK(write(a, "S", 1) == 1 && lseek(a, 0, SEEK_CUR) == 1);
    close(a);
    CHECK(get_file("log", buf, sizeof buf) == 25 && buf[0] == 'S');
    printf("O_APPEND: two descriptors interleave at the end, offsets 10 14 20\n");
}

static void directories_and_links(void) {
    CHECK(mkdir("d", 0755) == 0);
    CHECK(put_file("f", "x", 1, 0644) == 0);
    CHECK(symlink("f", "lf") == 0);
    CHECK(symlink("d", "ld") == 0);
    int fd = open("d", O_RDONLY | O_DIRECTORY);
    CHECK(fd >= 0);
    close(fd);
    CHECK_ERR(open("f", O_RDONLY | O_DIRECTORY), ENOTDIR);
    CHECK_ERR(open("f/", O_RDONLY), ENOTDIR);
    fd = open("ld", O_RDONLY | O_DIRECTORY);
    CHECK(fd >= 0);
    close(fd);
    CHECK_ERR(open("lf", O_RDONLY | O_DIRECTORY), ENOTDIR);
    CHECK_ERR(open("d", O_WRONLY), EISDIR);
    CHECK_ERR(open("d", O_RDWR), EISDIR);
    CHECK_ERR(open("d", O_RDONLY | O_TRUNC), EISDIR);
    CHECK_ERR(open("d", O_WRONLY | O_CREAT, 0644), EISDIR);
    CHECK_ERR(open("lf", O_RDONLY | O_NOFOLLOW), ELOOP);
    /* With O_DIRECTORY too, the symlink is found not to be a directory. */
    CHECK_ERR(open("ld", O_RDONLY | O_NOFOLLOW | O_DIRECTORY), ENOTDIR);
    /* O_NOFOLLOW is about the last component only. */
    CHECK(mkdir("d/sub", 0755) == 0);
    fd = open("ld/sub", O_RDONLY | O_NOFOLLOW);
    CHECK(fd >= 0);
    close(fd);
    CHECK(symlink("loop", "loop") == 0);
    CHECK_ERR(open("loop", O_RDONLY), ELOOP);
    CHECK_ERR(open("loop/x", O_RDONLY), ELOOP);
    printf("O_DIRECTORY: ENOTDIR; write-open of a directory: EISDIR; O_NOFOLLOW: ELOOP\n");
}

static void path_descriptors(void) {
    CHECK(put_file("p", "path", 4, 0644) == 0);
    int fd = open("p", O_PATH);
    CHECK(fd >= 0);
    char c;
    CHECK_ERR(read(fd, &c, 1), EBADF);
    CHECK_ERR(write(fd, "x", 1), EBADF);
    CHECK_ERR(fchmod(fd, 0600), EBADF);
    CHECK_ERR(ftruncate(fd, 0), EBADF);
    CHECK_ERR(mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED ? -1 : 0, EBADF);
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && st.st_size == 4);
    CHECK((fcntl(fd, F_GETFL) & O_PATH) == O_PATH);
    int dup = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    CHECK(dup >= 0);
    close(dup);
    /* A path descriptor re-opens through /proc/self/fd with a real mode. */
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    int rd = open(proc, O_RDONLY);
    char buf[8] = {0};
    CHECK(rd >= 0 && read(rd, buf, sizeof buf) == 4 && memcmp(buf, "path", 4) == 0);
    close(rd);
    close(fd);
    /* A directory's path descriptor serves as an *at() base. */
    int dfd = open("d", O_PATH | O_DIRECTORY);
    CHECK(dfd >= 0);
    CHECK(fstatat(dfd, "sub", &st, 0) == 0 && S_ISDIR(st.st_mode));
    CHECK_ERR(getdents64(dfd, buf, sizeof buf), EBADF);
    close(dfd);
    /* O_PATH|O_NOFOLLOW opens the symlink itself. */
    fd = open("lf", O_PATH | O_NOFOLLOW);
    CHECK(fd >= 0 && fstat(fd, &st) == 0 && S_ISLNK(st.st_mode));
    char target[16] = {0};
    CHECK(readlinkat(fd, "", target, sizeof target) == 1 && target[0] == 'f');
    close(fd);
    printf("O_PATH: fstat, dup, *at base and reopen work; read, write, fchmod, ftruncate, mmap: EBADF\n");
}

static void unnamed_files(void) {
    int fd = open(".", O_TMPFILE | O_RDWR, 0640);
    CHECK(fd >= 0);
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && st.st_nlink == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0640);
    CHECK(write(fd, "anon", 4) == 4);
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    CHECK(linkat(AT_FDCWD, proc, AT_FDCWD, "named", AT_SYMLINK_FOLLOW) == 0);
    CHECK(fstat(fd, &st) == 0 && st.st_nlink == 1);
    char buf[8];
    CHECK(get_file("named", buf, sizeof buf) == 4 && strcmp(buf, "anon") == 0);
    close(fd);
    /* AT_EMPTY_PATH links the descriptor itself (root holds CAP_DAC_READ_SEARCH). */
    fd = open(".", O_TMPFILE | O_WRONLY, 0600);
    CHECK(fd >= 0 && write(fd, "second", 6) == 6);
    CHECK(linkat(fd, "", AT_FDCWD, "named2", AT_EMPTY_PATH) == 0);
    CHECK_ERR(linkat(fd, "", AT_FDCWD, "named2", AT_EMPTY_PATH), EEXIST);
    close(fd);
    CHECK(get_file("named2", buf, sizeof buf) == 6 && memcmp(buf, "second", 6) == 0);
    /* O_EXCL makes it never linkable. */
    fd = open(".", O_TMPFILE | O_WRONLY | O_EXCL, 0600);
    CHECK(fd >= 0);
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    CHECK_ERR(linkat(AT_FDCWD, proc, AT_FDCWD, "named3", AT_SYMLINK_FOLLOW), ENOENT);
    close(fd);
    /* An unlinked file is not linked back either. */
    fd = open("gone", O_CREAT | O_RDWR, 0600);
    CHECK(unlink("gone") == 0);
    CHECK_ERR(linkat(fd, "", AT_FDCWD, "back", AT_EMPTY_PATH), ENOENT);
    close(fd);
    CHECK_ERR(open(".", O_TMPFILE | O_RDONLY, 0600), EINVAL);
    CHECK_ERR(open("named", O_TMPFILE | O_RDWR, 0600), ENOTDIR);
    CHECK_ERR(open("nothing", O_TMPFILE | O_RDWR, 0600), ENOENT);
    printf("O_TMPFILE: nlink 0, linked through /proc/self/fd and AT_EMPTY_PATH; O_EXCL: never linked\n");
}

static void resolving(void) {
    /* d/ holds sub/; f is a file; lf -> f; ld -> d; add a few more links. */
    CHECK(symlink("/", "d/abs") == 0);
    CHECK(symlink("../f", "d/up") == 0);
    CHECK(symlink("../../f", "d/upup") == 0);
    CHECK(put_file("d/sub/g", "g", 1, 0644) == 0);
    int dfd = open("d", O_PATH | O_DIRECTORY);
    CHECK(dfd >= 0);
    long fd;

    fd = openat2_(dfd, "sub/g", O_RDONLY, 0, RESOLVE_BENEATH);
    CHECK(fd >= 0);
    close(fd);
    fd = openat2_(dfd, "sub/../sub/g", O_RDONLY, 0, RESOLVE_BENEATH);
    CHECK(fd >= 0);
    close(fd);
    CHECK_ERR(openat2_(dfd, "../f", O_RDONLY, 0, RESOLVE_BENEATH), EXDEV);
    CHECK_ERR(openat2_(dfd, "up", O_RDONLY, 0, RESOLVE_BENEATH), EXDEV);
    CHECK_ERR(openat2_(dfd, "abs", O_RDONLY, 0, RESOLVE_BENEATH), EXDEV);
    CHECK_ERR(openat2_(dfd, "/etc", O_RDONLY, 0, RESOLVE_BENEATH), EXDEV);
    CHECK_ERR(openat2_(dfd, "/proc/self/cwd", O_RDONLY, 0, RESOLVE_BENEATH), EXDEV);

    /* RESOLVE_IN_ROOT: the directory is /, and ".." at it stays there. */
    fd = openat2_(dfd, "/sub/g", O_RDONLY, 0, RESOLVE_IN_ROOT);
    CHECK(fd >= 0);
    close(fd);
    fd = openat2_(dfd, "../../sub/g", O_RDONLY, 0, RESOLVE_IN_ROOT);
    CHECK(fd >= 0);
    close(fd);
    CHECK_ERR(openat2_(dfd, "up", O_RDONLY, 0, RESOLVE_IN_ROOT), ENOENT);
    CHECK(put_file("d/f", "inner", 5, 0644) == 0);
    fd = openat2_(dfd, "upup", O_RDONLY, 0, RESOLVE_IN_ROOT);
    char buf[8] = {0};
    CHECK(fd >= 0 && read(fd, buf, sizeof buf) == 5 && memcmp(buf, "inner", 5) == 0);
    close(fd);
    fd = openat2_(dfd, "abs", O_RDONLY | O_DIRECTORY, 0, RESOLVE_IN_ROOT);
    struct stat a, b;
    CHECK(fd >= 0 && fstat(fd, &a) == 0 && fstat(dfd, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev);
    close(fd);

    /* RESOLVE_NO_SYMLINKS: any symlink on the way is ELOOP. */
    int wfd = open(".", O_PATH | O_DIRECTORY);
    fd = openat2_(wfd, "d/sub/g", O_RDONLY, 0, RESOLVE_NO_SYMLINKS);
    CHECK(fd >= 0);
    close(fd);
    CHECK_ERR(openat2_(wfd, "lf", O_RDONLY, 0, RESOLVE_NO_SYMLINKS), ELOOP);
    CHECK_ERR(openat2_(wfd, "ld/sub/g", O_RDONLY, 0, RESOLVE_NO_SYMLINKS), ELOOP);
    fd = openat2_(wfd, "lf", O_PATH | O_NOFOLLOW, 0, RESOLVE_NO_SYMLINKS);
    CHECK(fd >= 0);
    close(fd);
    CHECK_ERR(openat2_(AT_FDCWD, "/proc/self/cwd", O_RDONLY, 0, RESOLVE_NO_MAGICLINKS), ELOOP);

    /* RESOLVE_NO_XDEV: crossing into another mount is EXDEV. */
    fd = openat2_(wfd, "d/sub/g", O_RDONLY, 0, RESOLVE_NO_XDEV);
    CHECK(fd >= 0);
    close(fd);
    CHECK_ERR(openat2_(AT_FDCWD, "/proc/self", O_RDONLY, 0, RESOLVE_NO_XDEV), EXDEV);
    int proc = open("/proc", O_PATH | O_DIRECTORY);
    fd = openat2_(proc, "self/comm", O_RDONLY, 0, RESOLVE_NO_XDEV);
    CHECK(fd >= 0);
    close(fd);
    CHECK_ERR(openat2_(proc, "..", O_RDONLY, 0, RESOLVE_NO_XDEV), EXDEV);
    close(proc);

    /* RESOLVE_CACHED cannot create or truncate: EAGAIN, try without it. */
    CHECK_ERR(openat2_(wfd, "cached", O_WRONLY | O_CREAT, 0644, RESOLVE_CACHED), EAGAIN);
    CHECK_ERR(openat2_(wfd, "f", O_WRONLY | O_TRUNC, 0, RESOLVE_CACHED), EAGAIN);
    CHECK(access("cached", F_OK) == -1);

    /* The open_how itself. */
    CHECK_ERR(openat2_(wfd, "f", O_RDONLY, 0644, 0), EINVAL);
    CHECK_ERR(openat2_(wfd, "f", O_RDONLY, 0, 1ULL << 40), EINVAL);
    CHECK_ERR(openat2_(wfd, "f", 1ULL << 40, 0, 0), EINVAL);
    CHECK_ERR(openat2_(wfd, "f", O_RDONLY, 0, RESOLVE_BENEATH | RESOLVE_IN_ROOT), EINVAL);
    struct {
        struct open_how how;
        unsigned long long extra;
    } big = {{.flags = O_RDONLY}, 1};
    CHECK_ERR(syscall(SYS_openat2, wfd, "f", &big, sizeof big), E2BIG);
    big.extra = 0;
    fd = syscall(SYS_openat2, wfd, "f", &big, sizeof big);
    CHECK(fd >= 0);
    close(fd);
    CHECK_ERR(syscall(SYS_openat2, wfd, "f", &big, 8), EINVAL);
    close(wfd);
    close(dfd);
    printf("openat2: BENEATH EXDEV, IN_ROOT clamps, NO_SYMLINKS and NO_MAGICLINKS ELOOP, NO_XDEV EXDEV, "
           "CACHED EAGAIN, bad how EINVAL/E2BIG\n");
}

static void umasks(void) {
    static const mode_t masks[] = {0, 022, 077, 0777, 0257};
    for (size_t i = 0; i < sizeof masks / sizeof masks[0]; i++) {
        umask(masks[i]);
        char name[32];
        snprintf(name, sizeof name, "um%zu", i);
        int fd = open(name, O_WRONLY | O_CREAT | O_EXCL, 0777);
        CHECK(fd >= 0);
        close(fd);
        snprintf(name, sizeof name, "um%zu", i);
        printf("umask %04o: file 0777 -> %04o", (unsigned)masks[i], (unsigned)(mode_of(name) & 07777));
        snprintf(name, sizeof name, "umd%zu", i);
        CHECK(mkdir(name, 01777) == 0);
        printf(", mkdir 01777 -> %04o\n", (unsigned)(mode_of(name) & 07777));
        /* Explicit modes are not masked. */
        CHECK(chmod(name, 0777) == 0 && (mode_of(name) & 07777) == 0777);
    }
    /* umask returns the old mask and keeps only permission bits. */
    CHECK(umask(0) == 0257);
    CHECK(umask(07777) == 0);
    CHECK(umask(022) == 0777);
    /* O_TMPFILE's mode is masked too. */
    umask(027);
    int fd = open(".", O_TMPFILE | O_RDWR, 0777);
    struct stat st;
    CHECK(fd >= 0 && fstat(fd, &st) == 0 && (st.st_mode & 07777) == 0750);
    close(fd);
    umask(022);
}

static void long_names(void) {
    char name[300];
    memset(name, 'n', 255);
    name[255] = 0;
    int fd = open(name, O_WRONLY | O_CREAT, 0644);
    CHECK(fd >= 0);
    close(fd);
    CHECK(unlink(name) == 0);
    memset(name, 'n', 256);
    name[256] = 0;
    CHECK_ERR(open(name, O_WRONLY | O_CREAT, 0644), ENAMETOOLONG);
    CHECK_ERR(open(name, O_RDONLY), ENAMETOOLONG);
    CHECK_ERR(mkdir(name, 0755), ENAMETOOLONG);
    /* A path of PATH_MAX bytes or more, short components. */
    static char path[PATH_MAX + 8];
    size_t n = 0;
    while (n < PATH_MAX + 2) {
        path[n++] = 'a';
        path[n++] = '/';
    }
    path[n] = 0;
    CHECK_ERR(open(path, O_RDONLY), ENAMETOOLONG);
    CHECK_ERR(open("", O_RDONLY), ENOENT);
    printf("names: 255 bytes fine, 256 ENAMETOOLONG, PATH_MAX ENAMETOOLONG, empty ENOENT\n");
}

/* The program text_busy runs: "--hold READY GONE" forks and exits; the
 * child, sharing the address space's program, says it is ready on READY
 * and waits for READY's reader to go. GONE, inherited, closes when the
 * child exits. */
static int hold_program(char **argv) {
    int ready = atoi(argv[2]);
    if (fork() != 0)
        return 0;
    char c = 'r';
    if (write(ready, &c, 1) != 1)
        return 1;
    /* SIGPIPE or EPIPE once the reader closed. */
    while (write(ready, &c, 1) == 1)
        ;
    return 0;
}

/* ETXTBSY: a program some address space runs (its forked children's
 * included) cannot be opened for writing or truncated, under any of its
 * names; a file open for writing cannot be run. A memfd's own descriptor
 * does not count as a writer; a reopening of it does. */
static void text_busy(void) {
    char prog[1 << 16];
    int self = open("/proc/self/exe", O_RDONLY);
    int out = open("prog", O_WRONLY | O_CREAT | O_EXCL, 0755);
    CHECK(self >= 0 && out >= 0);
    for (ssize_t n; (n = read(self, prog, sizeof prog)) > 0;)
        CHECK(write(out, prog, n) == n);
    close(self);
    close(out);
    CHECK(link("prog", "prog-link") == 0);

    int ready[2], gone[2];
    CHECK(pipe(ready) == 0 && pipe(gone) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(ready[0]);
        close(gone[0]);
        char r[16], g[16];
        snprintf(r, sizeof r, "%d", ready[1]);
        snprintf(g, sizeof g, "%d", gone[1]);
        /* The grandchild keeps `gone` open; the child closes it at once. */
        fcntl(gone[1], F_SETFD, 0);
        execl("./prog", "prog", "--hold", r, g, (char *)NULL);
        _exit(127);
    }
    close(ready[1]);
    close(gone[1]);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char c;
    CHECK(read(ready[0], &c, 1) == 1 && c == 'r');
    /* The child that ran prog is gone; its fork still runs it. */
    CHECK_ERR(open("prog", O_WRONLY), ETXTBSY);
    CHECK_ERR(open("prog", O_RDWR), ETXTBSY);
    CHECK_ERR(open("prog-link", O_WRONLY), ETXTBSY);
    CHECK_ERR(open("prog", O_RDONLY | O_TRUNC), ETXTBSY);
    CHECK_ERR(truncate("prog", 0), ETXTBSY);
    int fd = open("prog", O_RDONLY);
    CHECK(fd >= 0);
    close(fd);
    struct stat st;
    CHECK(stat("prog", &st) == 0 && st.st_size > 0);
    /* Renaming and unlinking a running program are allowed. */
    CHECK(rename("prog-link", "prog-moved") == 0);
    CHECK(unlink("prog-moved") == 0);
    close(ready[0]);
    CHECK(read(gone[0], &c, 1) == 0);
    close(gone[0]);
    fd = open("prog", O_WRONLY);
    CHECK(fd >= 0);

    /* Open for writing: not run, from a path or from the descriptor. */
    pid = fork();
    if (pid == 0) {
        execl("./prog", "prog", (char *)NULL);
        _exit(errno == ETXTBSY ? 0 : 1);
    }
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_ERR(syscall(SYS_execveat, fd, "", (char *[]){"prog", NULL}, (char *[]){NULL}, AT_EMPTY_PATH), ETXTBSY);
    close(fd);

    int memfd = memfd_create("prog", 0);
    CHECK(memfd >= 0);
    self = open("prog", O_RDONLY);
    for (ssize_t n; (n = read(self, prog, sizeof prog)) > 0;)
        CHECK(write(memfd, prog, n) == n);
    close(self);
    pid = fork();
    if (pid == 0) {
        char path[32];
        snprintf(path, sizeof path, "/proc/self/fd/%d", memfd);
        int again = open(path, O_RDWR);
        if (again < 0)
            _exit(2);
        syscall(SYS_execveat, memfd, "", (char *[]){"prog", NULL}, (char *[]){NULL}, AT_EMPTY_PATH);
        if (errno != ETXTBSY)
            _exit(3);
        close(again);
        /* The memfd's own descriptor is no writer: it runs ("prog" with no
         * arguments prints its usage and exits 2). */
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 2);
        syscall(SYS_execveat, memfd, "", (char *[]){"prog", NULL}, (char *[]){NULL}, AT_EMPTY_PATH);
        _exit(4);
    }
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 2);
    close(memfd);
    printf("ETXTBSY: running programs (and their forks) refuse writers; open writers refuse exec\n");
}

int main(int argc, char **argv) {
    if (argc > 3 && strcmp(argv[1], "--hold") == 0)
        return hold_program(argv);
    enter_work_dir(argc, argv);
    creating();
    truncating();
    appending();
    directories_and_links();
    path_descriptors();
    unnamed_files();
    resolving();
    umasks();
    long_names();
    text_busy();
    return done();
}
