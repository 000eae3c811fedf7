/* Descriptor answers at the edges: eventfd transfer sizes, positional I/O
 * and FIONREAD on pipes, fsync of files that have no fsync, file owners
 * (F_SETOWN_EX and friends), and shared mappings of files opened
 * read-only. */
#include "t.h"

#include <fcntl.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

/* An eventfd write takes exactly 8 bytes; a read at least 8 and gives 8.
 * A vectored write is one write per buffer: each must be 8 bytes, and the
 * call ends at the first that fails. */
static void test_eventfd_sizes(void) {
    int e = eventfd(0, EFD_NONBLOCK);
    CHECK(e >= 0);
    uint64_t buf[2] = {5, 7};
    CHECK_ERR(write(e, buf, 4), EINVAL);
    CHECK_ERR(write(e, buf, 9), EINVAL);
    CHECK_ERR(write(e, buf, 16), EINVAL);
    struct iovec split[2] = {{buf, 3}, {(char *)buf + 3, 5}};
    CHECK_ERR(writev(e, split, 2), EINVAL);
    struct iovec two[3] = {{&buf[0], 8}, {&buf[1], 8}, {&buf[0], 4}};
    CHECK(writev(e, two, 2) == 16);
    CHECK(writev(e, two, 3) == 16);
    CHECK_ERR(read(e, buf, 7), EINVAL);
    /* Even a transfer of nothing is too small; a vectored one of nothing
     * is no transfer at all. */
    CHECK_ERR(write(e, buf, 0), EINVAL);
    CHECK_ERR(read(e, buf, 0), EINVAL);
    struct iovec none = {buf, 0};
    CHECK(writev(e, &none, 1) == 0);
    CHECK(readv(e, &none, 1) == 0);
    uint64_t v = 0;
    CHECK(read(e, &v, 8) == 8 && v == 24);
    /* A value that would pass the maximum waits: here, fails at once. */
    uint64_t big = UINT64_MAX - 1;
    CHECK(write(e, &big, 8) == 8);
    struct iovec over[2] = {{&buf[0], 8}, {&big, 8}};
    CHECK_ERR(writev(e, over, 2), EAGAIN);
    CHECK(read(e, &v, 8) == 8 && v == big);
    struct iovec partial[2] = {{&buf[0], 8}, {&big, 8}};
    CHECK(writev(e, partial, 2) == 8);
    CHECK(read(e, buf, 16) == 8 && buf[0] == 5);
    CHECK_ERR(read(e, buf, 9), EAGAIN);
    close(e);
}

/* A pipe has no position: positional transfers fail with ESPIPE whichever
 * end is used (before the access mode is looked at), and a negative
 * position is EINVAL before the descriptor is. FIONREAD answers for the
 * pipe from either end. */
static void test_pipe_positions(void) {
    int p[2];
    CHECK_OK(pipe(p));
    char c = 'x';
    struct iovec iov = {&c, 1};
    CHECK_ERR(lseek(p[0], 0, SEEK_CUR), ESPIPE);
    CHECK_ERR(lseek(p[1], 0, SEEK_SET), ESPIPE);
    CHECK_ERR(pread(p[0], &c, 1, 0), ESPIPE);
    CHECK_ERR(pread(p[1], &c, 1, 0), ESPIPE);
    CHECK_ERR(pwrite(p[1], &c, 1, 0), ESPIPE);
    CHECK_ERR(pwrite(p[0], &c, 1, 0), ESPIPE);
    CHECK_ERR(preadv(p[1], &iov, 1, 0), ESPIPE);
    CHECK_ERR(pwritev(p[0], &iov, 1, 0), ESPIPE);
    CHECK_ERR(preadv(p[0], &iov, 1, -1), EINVAL);
    CHECK_ERR(pwritev(p[1], &iov, 1, -1), EINVAL);
    CHECK_ERR(pread(p[0], &c, 1, -1), EINVAL);
    CHECK_ERR(pread(999, &c, 1, -1), EINVAL);
    CHECK_ERR(pread(999, &c, 1, 0), EBADF);

    int n = -1;
    CHECK_OK(ioctl(p[0], FIONREAD, &n));
    CHECK(n == 0);
    CHECK(write(p[1], "abc", 3) == 3);
    n = -1;
    CHECK_OK(ioctl(p[0], FIONREAD, &n));
    CHECK(n == 3);
    n = -1;
    CHECK_OK(ioctl(p[1], FIONREAD, &n));
    CHECK(n == 3);
    close(p[0]);
    close(p[1]);
}

/* fsync and fdatasync: EINVAL for files without an fsync operation (pipes,
 * memory devices, procfs, anonymous files), success for files and
 * directories, EBADF for O_PATH. */
static void test_fsync(void) {
    const char *devices[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/urandom"};
    for (unsigned i = 0; i < sizeof devices / sizeof *devices; i++) {
        int fd = open(devices[i], O_RDWR);
        CHECK(fd >= 0);
        CHECK_ERR(fdatasync(fd), EINVAL);
        CHECK_ERR(fsync(fd), EINVAL);
        close(fd);
    }
    int p[2];
    CHECK_OK(pipe(p));
    CHECK_ERR(fsync(p[0]), EINVAL);
    CHECK_ERR(fdatasync(p[1]), EINVAL);
    close(p[0]);
    close(p[1]);
    int e = eventfd(0, 0);
    CHECK_ERR(fsync(e), EINVAL);
    close(e);
    int ep = epoll_create1(0);
    CHECK_ERR(fsync(ep), EINVAL);
    close(ep);
    int proc = open("/proc/self/status", O_RDONLY);
    CHECK_ERR(fsync(proc), EINVAL);
    close(proc);
    int procdir = open("/proc", O_RDONLY | O_DIRECTORY);
    CHECK_ERR(fsync(procdir), EINVAL);
    close(procdir);

    int f = open("/etc/passwd", O_RDONLY);
    CHECK_OK(fsync(f));
    CHECK_OK(fdatasync(f));
    close(f);
    int d = open("/etc", O_RDONLY | O_DIRECTORY);
    CHECK_OK(fsync(d));
    close(d);
    int dev = open("/dev", O_RDONLY | O_DIRECTORY);
    CHECK_OK(fsync(dev));
    close(dev);
    int path = open("/etc/passwd", O_PATH);
    CHECK_ERR(fsync(path), EBADF);
    close(path);
    CHECK_ERR(fsync(-1), EBADF);
}

static int owner_ex(int fd, int *type) {
    struct f_owner_ex o = {99, 99};
    if (fcntl(fd, F_GETOWN_EX, &o) != 0)
        return -99;
    *type = o.type;
    return o.pid;
}

/* The owner of a file's I/O signals: a thread, a process or a process
 * group, as F_SETOWN and F_SETOWN_EX set it. */
static void test_owner(void) {
    int p[2];
    CHECK_OK(pipe(p));
    int type = -1;
    CHECK(owner_ex(p[0], &type) == 0 && type == F_OWNER_TID);
    CHECK(fcntl(p[0], F_GETOWN) == 0);

    struct f_owner_ex o = {F_OWNER_PID, getpid()};
    CHECK_OK(fcntl(p[0], F_SETOWN_EX, &o));
    CHECK(fcntl(p[0], F_GETOWN) == getpid());
    CHECK(owner_ex(p[0], &type) == getpid() && type == F_OWNER_PID);

    o = (struct f_owner_ex){F_OWNER_PGRP, getpgrp()};
    CHECK_OK(fcntl(p[0], F_SETOWN_EX, &o));
    CHECK(owner_ex(p[0], &type) == getpgrp() && type == F_OWNER_PGRP);
    CHECK(fcntl(p[0], F_GETOWN) == -getpgrp());

    o = (struct f_owner_ex){F_OWNER_TID, gettid()};
    CHECK_OK(fcntl(p[0], F_SETOWN_EX, &o));
    CHECK(fcntl(p[0], F_GETOWN) == gettid());
    CHECK(owner_ex(p[0], &type) == gettid() && type == F_OWNER_TID);

    /* The owner belongs to the open file: a dup shares it. */
    int d = dup(p[0]);
    CHECK(owner_ex(d, &type) == gettid() && type == F_OWNER_TID);
    close(d);

    o = (struct f_owner_ex){7, 1};
    CHECK_ERR(fcntl(p[0], F_SETOWN_EX, &o), EINVAL);
    o = (struct f_owner_ex){F_OWNER_PID, 999999};
    CHECK_ERR(fcntl(p[0], F_SETOWN_EX, &o), ESRCH);
    o = (struct f_owner_ex){F_OWNER_PID, -5};
    CHECK_ERR(fcntl(p[0], F_SETOWN_EX, &o), ESRCH);
    CHECK_ERR(fcntl(p[0], F_SETOWN_EX, (void *)1), EFAULT);
    CHECK_ERR(fcntl(p[0], F_GETOWN_EX, (void *)1), EFAULT);
    o = (struct f_owner_ex){F_OWNER_PID, 0};
    CHECK_OK(fcntl(p[0], F_SETOWN_EX, &o));
    CHECK(owner_ex(p[0], &type) == 0 && type == F_OWNER_PID);

    CHECK_OK(fcntl(p[0], F_SETOWN, -getpgrp()));
    CHECK(owner_ex(p[0], &type) == getpgrp() && type == F_OWNER_PGRP);
    CHECK_ERR(fcntl(p[0], F_SETOWN, 999999), ESRCH);

    /* An owner that is gone reads as none. */
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    CHECK_OK(fcntl(p[0], F_SETOWN, child));
    CHECK(fcntl(p[0], F_GETOWN) == child);
    CHECK(waitpid(child, NULL, 0) == child);
    CHECK(fcntl(p[0], F_GETOWN) == 0);
    CHECK(owner_ex(p[0], &type) == 0 && type == F_OWNER_PID);

    CHECK(fcntl(p[0], F_GETSIG) == 0);
    CHECK_OK(fcntl(p[0], F_SETSIG, SIGRTMIN + 1));
    CHECK(fcntl(p[0], F_GETSIG) == SIGRTMIN + 1);
    CHECK_ERR(fcntl(p[0], F_SETSIG, 65), EINVAL);
    CHECK_ERR(fcntl(p[0], F_SETSIG, -1), EINVAL);
    close(p[0]);
    close(p[1]);
}

/* A shared mapping of a file opened read-only can never become writable,
 * /dev/zero's included. */
static void test_shared_readonly_mappings(void) {
    const char *files[] = {"/dev/zero", "/etc/passwd"};
    for (unsigned i = 0; i < 2; i++) {
        int fd = open(files[i], O_RDONLY);
        CHECK(fd >= 0);
        CHECK(mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED && errno == EACCES);
        void *m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
        CHECK(m != MAP_FAILED);
        CHECK_ERR(mprotect(m, 4096, PROT_READ | PROT_WRITE), EACCES);
        CHECK_ERR(mprotect(m, 4096, PROT_WRITE), EACCES);
        CHECK_OK(mprotect(m, 4096, PROT_READ | PROT_EXEC));
        munmap(m, 4096);
        void *priv = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
        CHECK(priv != MAP_FAILED);
        CHECK_OK(mprotect(priv, 4096, PROT_READ | PROT_WRITE));
        munmap(priv, 4096);
        close(fd);
    }
}

int main(void) {
    test_eventfd_sizes();
    test_pipe_positions();
    test_fsync();
    test_owner();
    test_shared_readonly_mappings();
    return done();
}
