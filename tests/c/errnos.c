/* Error numbers across the system calls: ENOENT, ENOTDIR, ELOOP, EBADF,
 * EFAULT for bad pointers, ENOSYS for unknown calls, ENAMETOOLONG, EINVAL.
 * argv[1] is the fixture directory (data, link, loop -> loop, dir/). */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "t.h"

static char path_buf[4096];
static const char *base;

static const char *at(const char *name) {
    snprintf(path_buf, sizeof path_buf, "%s/%s", base, name);
    return path_buf;
}

static void test_enoent_enotdir_eloop(void) {
    struct stat st;
    CHECK_ERR(open("/no/such/file", O_RDONLY), ENOENT);
    CHECK_ERR(open(at("missing"), O_RDONLY), ENOENT);
    CHECK_ERR(stat(at("missing"), &st), ENOENT);
    CHECK_ERR(lstat(at("missing/x"), &st), ENOENT);
    CHECK_ERR(open("", O_RDONLY), ENOENT);
    CHECK_ERR(access(at("missing"), F_OK), ENOENT);
    CHECK_ERR(chdir(at("missing")), ENOENT);
    CHECK_ERR(execve(at("missing"), (char *[]){"x", NULL}, (char *[]){NULL}), ENOENT);
    CHECK_ERR(open(at("data/x"), O_RDONLY), ENOTDIR);
    CHECK_ERR(stat(at("data/"), &st), ENOTDIR);
    CHECK_ERR(open(at("loop"), O_RDONLY), ELOOP);
    CHECK_ERR(stat(at("loop"), &st), ELOOP);
    CHECK_ERR(stat(at("loop/x"), &st), ELOOP);
    CHECK_OK(lstat(at("loop"), &st));
    /* MAXSYMLINKS: chain0 -> chain1 -> ... -> chain40 -> data is 41 links,
     * one too many; from chain1 it is 40. */
    CHECK_ERR(stat(at("chain0"), &st), ELOOP);
    CHECK_ERR(open(at("chain0"), O_RDONLY), ELOOP);
    CHECK_OK(stat(at("chain1"), &st));
    CHECK(st.st_size == 10000);
    CHECK_ERR(stat(at("link/.."), &st), ENOTDIR);
    CHECK_ERR(execve(at("data"), (char *[]){"x", NULL}, (char *[]){NULL}), EACCES);
    CHECK_ERR(execve(at("dir"), (char *[]){"x", NULL}, (char *[]){NULL}), EACCES);
}

static void test_ebadf(void) {
    char buf[8];
    struct stat st;
    CHECK_ERR(read(-1, buf, 1), EBADF);
    CHECK_ERR(read(1000, buf, 1), EBADF);
    CHECK_ERR(write(1000, buf, 1), EBADF);
    CHECK_ERR(close(1000), EBADF);
    CHECK_ERR(fstat(1000, &st), EBADF);
    CHECK_ERR(lseek(1000, 0, SEEK_SET), EBADF);
    CHECK_ERR(pread(1000, buf, 1, 0), EBADF);
    CHECK_ERR(fchdir(1000), EBADF);
    CHECK_ERR(dup(1000), EBADF);
    CHECK_ERR(fcntl(1000, F_GETFL), EBADF);
    CHECK_ERR(fsync(1000), EBADF);
    CHECK_ERR(openat(1000, "x", O_RDONLY), EBADF);
    CHECK_ERR(fstatat(1000, "x", &st, 0), EBADF);
    CHECK_OK(fstatat(1000, "/", &st, 0)); /* absolute: the descriptor is unused */
    int w = open("/dev/null", O_WRONLY);
    CHECK_ERR(read(w, buf, 1), EBADF);
    close(w);
    int r = open(at("data"), O_RDONLY);
    CHECK_ERR(write(r, buf, 1), EBADF);
    CHECK_ERR(pwrite(r, buf, 1, 0), EBADF);
    close(r);
}

static void test_efault(void) {
    struct stat st;
    char buf[16];
    int fd = open(at("data"), O_RDONLY);
    CHECK_ERR(stat((char *)1, &st), EFAULT);
    CHECK_ERR(stat(at("data"), (struct stat *)1), EFAULT);
    CHECK_ERR(fstat(fd, (struct stat *)8), EFAULT);
    CHECK_ERR(open((char *)1, O_RDONLY), EFAULT);
    CHECK_ERR(syscall(SYS_read, fd, (void *)1, 10), EFAULT);
    CHECK_ERR(pread(fd, (void *)0x1000, 10, 0), EFAULT);
    struct iovec iov[2] = {{buf, 4}, {(void *)1, 4}};
    /* A transfer stops at the first bad byte with what it moved; only if
     * nothing moved is it EFAULT. */
    CHECK(readv(fd, iov, 2) == 4);
    CHECK_ERR(syscall(SYS_readv, fd, (struct iovec *)1, 2), EFAULT);
    CHECK_ERR(syscall(SYS_uname, (void *)1), EFAULT);
    CHECK_ERR(syscall(SYS_clock_gettime, CLOCK_MONOTONIC, (void *)1), EFAULT);
    CHECK_ERR(syscall(SYS_getcwd, (void *)1, 100), EFAULT);
    CHECK_ERR(access((char *)1, F_OK), EFAULT);
    CHECK_ERR(chdir((char *)1), EFAULT);
    CHECK_ERR(syscall(SYS_readlink, at("link"), (char *)1, 10), EFAULT);
    CHECK_ERR(syscall(SYS_getrandom, (void *)1, 8, 0), EFAULT);
    CHECK_ERR(syscall(SYS_nanosleep, (void *)1, NULL), EFAULT);
    /* Kernel pointers are bad pointers too. */
    CHECK_ERR(stat((char *)0xffff800000000000UL, &st), EFAULT);
    CHECK_ERR(read(fd, (void *)0xffffffffff600000UL, 1), EFAULT);
    /* A buffer that runs off the end of a mapping. */
    unsigned char *p = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    munmap(p + 4096, 4096);
    CHECK(pread(fd, p + 4096 - 8, 8, 0) == 8);
    CHECK(pread(fd, p + 4096 - 8, 16, 0) == 8);
    CHECK(pread(fd, p + 4096 - 8, 16, 9995) == 5);
    CHECK_ERR(pread(fd, p + 4096, 16, 0), EFAULT);
    int null = open("/dev/zero", O_RDONLY);
    CHECK(read(null, p + 4096 - 100, 4096) == 100);
    close(null);
    /* A path string that runs off the end. */
    memset(p + 4096 - 100, 'a', 100);
    CHECK_ERR(stat((char *)p + 4096 - 100, &st), EFAULT);
    /* ... and one too long for PATH_MAX before it would. */
    memset(p, 'a', 4096);
    CHECK_ERR(stat((char *)p, &st), ENAMETOOLONG);
    munmap(p, 4096);
    close(fd);
}

static void test_enosys(void) {
    CHECK_ERR(syscall(1000), ENOSYS);
    CHECK_ERR(syscall(100000, 1, 2, 3), ENOSYS);
    CHECK_ERR(syscall(-1), ENOSYS);
}

static void test_names(void) {
    struct stat st;
    char name[300];
    memset(name, 'n', sizeof name - 1);
    name[sizeof name - 1] = 0;
    CHECK_ERR(stat(name, &st), ENAMETOOLONG);
    CHECK_ERR(open(name, O_RDONLY), ENAMETOOLONG);
    name[255] = 0;
    CHECK_ERR(stat(name, &st), ENOENT); /* 255 is allowed */
    static char longpath[5000];
    for (int i = 0; i < 4999; i += 2) {
        longpath[i] = '/';
        longpath[i + 1] = 'x';
    }
    longpath[4999] = 0;
    CHECK_ERR(stat(longpath, &st), ENAMETOOLONG);
    CHECK_ERR(access(longpath, F_OK), ENAMETOOLONG);
    CHECK_ERR(chdir(longpath), ENAMETOOLONG);
    /* 4095 bytes and a NUL fit in PATH_MAX; 4096 do not. */
    memset(longpath, '/', 4095);
    longpath[4095] = 0;
    CHECK_OK(stat(longpath, &st));
    longpath[4095] = '/';
    longpath[4096] = 0;
    CHECK_ERR(stat(longpath, &st), ENAMETOOLONG);
}

static void test_einval(void) {
    char buf[8];
    int fd = open(at("data"), O_RDONLY);
    CHECK_ERR(lseek(fd, 0, 99), EINVAL);
    CHECK_ERR(readlink(at("data"), buf, sizeof buf), EINVAL);
    CHECK_ERR(fcntl(fd, 9999), EINVAL);
    CHECK_ERR(syscall(SYS_openat, AT_FDCWD, at("data"), O_RDONLY | O_CREAT | O_DIRECTORY, 0), EINVAL);
    close(fd);
    struct timespec bad = {0, 2000000000};
    CHECK_ERR(nanosleep(&bad, NULL), EINVAL);
    bad.tv_sec = -1;
    bad.tv_nsec = 0;
    CHECK_ERR(nanosleep(&bad, NULL), EINVAL);
    CHECK_ERR(syscall(SYS_clock_gettime, 12345, buf), EINVAL);
    CHECK_ERR(syscall(SYS_rt_sigprocmask, 99, buf, NULL, 8), EINVAL);
    CHECK_ERR(syscall(SYS_dup3, 0, 0, 0), EINVAL);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: errnos FIXTURE-DIR\n");
        return 2;
    }
    base = argv[1];
    test_enoent_enotdir_eloop();
    test_ebadf();
    test_efault();
    test_enosys();
    test_names();
    test_einval();
    return done();
}
