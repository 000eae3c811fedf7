/* The descriptor table: lowest-free allocation, dup/dup2/dup3, fcntl
 * F_DUPFD/F_DUPFD_CLOEXEC/F_GETFD/F_SETFD/F_GETFL/F_SETFL, close twice,
 * RLIMIT_NOFILE, and close-on-exec across execve: the program re-executes
 * itself through /proc/self/exe and the new image checks which descriptors
 * survived. */
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "t.h"

static int is_null(int fd) {
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3);
}

static int is_open(int fd) {
    return fcntl(fd, F_GETFD) != -1;
}

/* The image after execve: argv[2..] are "fd:expected" pairs, expected 1 for
 * a descriptor that must still be open (on /dev/null), 0 for one that must
 * be closed. */
static int after_exec(int argc, char **argv) {
    for (int i = 2; i < argc; i++) {
        int fd, want;
        if (sscanf(argv[i], "%d:%d", &fd, &want) != 2) {
            fprintf(stderr, "bad argument %s\n", argv[i]);
            return 2;
        }
        if (want) {
            CHECK(is_open(fd) && is_null(fd));
            /* Survivors keep their flags but never close-on-exec. */
            CHECK(fcntl(fd, F_GETFD) == 0);
        } else {
            CHECK_ERR(fcntl(fd, F_GETFD), EBADF);
        }
    }
    /* The lowest free descriptor is the first one closed by the exec. */
    int fd = open("/dev/null", O_RDONLY);
    printf("after exec: first free descriptor %d\n", fd);
    printf("after exec: ");
    return done();
}

static void test_allocation(void) {
    /* 0, 1 and 2 are taken; the next opens get 3, 4, 5. */
    int a = open("/dev/null", O_RDONLY), b = open("/dev/null", O_RDONLY), c = open("/dev/null", O_RDONLY);
    CHECK(a == 3 && b == 4 && c == 5);
    CHECK_OK(close(b));
    CHECK(open("/dev/null", O_RDONLY) == 4);
    CHECK_OK(close(a));
    CHECK_OK(close(c));
    CHECK(open("/dev/null", O_RDONLY) == 3);
    CHECK(open("/dev/null", O_RDONLY) == 5);
    CHECK_OK(close(3));
    CHECK_OK(close(4));
    CHECK_OK(close(5));
    CHECK_ERR(close(5), EBADF);
    CHECK_ERR(close(-1), EBADF);
    CHECK_ERR(close(100000), EBADF);
}

static void test_dup(void) {
    int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    CHECK(fd == 3);
    int d = dup(fd);
    CHECK(d == 4);
    CHECK(fcntl(d, F_GETFD) == 0); /* dup clears close-on-exec */
    CHECK(fcntl(d, F_GETFL) == fcntl(fd, F_GETFL));
    CHECK_ERR(dup(99), EBADF);

    CHECK(dup2(fd, 10) == 10);
    CHECK(is_null(10) && fcntl(10, F_GETFD) == 0);
    CHECK(dup2(fd, 10) == 10); /* over an open descriptor */
    CHECK(dup2(fd, fd) == fd); /* same: nothing happens, still cloexec */
    CHECK(fcntl(fd, F_GETFD) == FD_CLOEXEC);
    CHECK_ERR(dup2(99, 11), EBADF);
    CHECK_ERR(dup2(99, 99), EBADF);
    CHECK_ERR(dup2(fd, -1), EBADF);
    CHECK(open("/dev/null", O_RDONLY) == 5); /* the gap below 10 is free */
    close(5);

    CHECK(dup3(fd, 11, O_CLOEXEC) == 11);
    CHECK(fcntl(11, F_GETFD) == FD_CLOEXEC);
    CHECK(dup3(fd, 12, 0) == 12);
    CHECK(fcntl(12, F_GETFD) == 0);
    CHECK_ERR(dup3(fd, fd, 0), EINVAL);
    CHECK_ERR(dup3(fd, 13, O_NONBLOCK), EINVAL);
    CHECK_ERR(dup3(99, 13, 0), EBADF);
    CHECK_ERR(fcntl(13, F_GETFD), EBADF);

    /* Duplicates share the open file description: the offset and status
     * flags. */
    int f = open("/proc/self/cmdline", O_RDONLY);
    int g = dup(f);
    char buf[4];
    CHECK(read(f, buf, 2) == 2);
    CHECK(lseek(g, 0, SEEK_CUR) == 2);
    CHECK_OK(fcntl(f, F_SETFL, O_NONBLOCK));
    CHECK(fcntl(g, F_GETFL) & O_NONBLOCK);
    close(f);
    close(g);
    for (int i = 3; i <= 12; i++)
        close(i);
}

static void test_fcntl(void) {
    int fd = open("/dev/null", O_RDONLY);
    CHECK(fd == 3);
    CHECK(fcntl(fd, F_DUPFD, 0) == 4);
    CHECK(fcntl(fd, F_DUPFD, 3) == 5);
    CHECK(fcntl(fd, F_DUPFD, 20) == 20);
    CHECK(fcntl(fd, F_DUPFD, 20) == 21);
    CHECK(fcntl(4, F_GETFD) == 0);
    int c = fcntl(fd, F_DUPFD_CLOEXEC, 7);
    CHECK(c == 7);
    CHECK(fcntl(c, F_GETFD) == FD_CLOEXEC);
    CHECK_ERR(fcntl(fd, F_DUPFD, -1), EINVAL);
    CHECK_ERR(fcntl(99, F_DUPFD, 0), EBADF);

    CHECK_OK(fcntl(fd, F_SETFD, FD_CLOEXEC));
    CHECK(fcntl(fd, F_GETFD) == FD_CLOEXEC);
    CHECK_OK(fcntl(fd, F_SETFD, 0));
    CHECK(fcntl(fd, F_GETFD) == 0);
    CHECK_ERR(fcntl(99, F_GETFD), EBADF);
    CHECK_ERR(fcntl(99, F_SETFD, 0), EBADF);

    /* Status flags round-trip; the access mode cannot be changed. */
    int w = open("/dev/null", O_WRONLY);
    int fl = fcntl(w, F_GETFL);
    printf("F_GETFL O_WRONLY: %#x\n", fl);
    CHECK((fl & O_ACCMODE) == O_WRONLY);
    CHECK_OK(fcntl(w, F_SETFL, fl | O_NONBLOCK | O_APPEND));
    printf("F_GETFL after F_SETFL O_NONBLOCK|O_APPEND: %#x\n", fcntl(w, F_GETFL));
    CHECK((fcntl(w, F_GETFL) & (O_NONBLOCK | O_APPEND)) == (O_NONBLOCK | O_APPEND));
    CHECK_OK(fcntl(w, F_SETFL, O_RDWR));
    printf("F_GETFL after F_SETFL O_RDWR: %#x\n", fcntl(w, F_GETFL));
    CHECK((fcntl(w, F_GETFL) & O_ACCMODE) == O_WRONLY);
    CHECK((fcntl(w, F_GETFL) & (O_NONBLOCK | O_APPEND)) == 0);
    CHECK(write(w, "x", 1) == 1);
    CHECK_ERR(fcntl(w, 12345), EINVAL);
    CHECK_ERR(fcntl(99, F_GETFL), EBADF);
    close(w);
    for (int i = 3; i <= 21; i++)
        close(i);
}

static void test_nofile_limit(void) {
    struct rlimit old, lim;
    CHECK_OK(getrlimit(RLIMIT_NOFILE, &old));
    lim.rlim_cur = 8;
    lim.rlim_max = old.rlim_max;
    CHECK_OK(setrlimit(RLIMIT_NOFILE, &lim));
    int last = -1, n = 0;
    for (;;) {
        int fd = open("/dev/null", O_RDONLY);
        if (fd < 0) {
            CHECK(errno == EMFILE);
            break;
        }
        last = fd;
        n++;
    }
    CHECK(last == 7 && n == 5);
    CHECK_ERR(dup(3), EMFILE);
    CHECK_ERR(fcntl(3, F_DUPFD, 8), EINVAL);
    CHECK_ERR(fcntl(3, F_DUPFD, 2), EMFILE);
    CHECK_ERR(dup2(3, 8), EBADF);
    CHECK(dup2(3, 7) == 7);
    for (int i = 3; i <= 7; i++)
        close(i);
    CHECK_OK(setrlimit(RLIMIT_NOFILE, &old));
    CHECK(dup2(0, 100) == 100);
    close(100);
}

static void exec_self(char *argv0) {
    /* Descriptors: 3 plain, 4 O_CLOEXEC, 5 F_DUPFD_CLOEXEC, 6 close-on-exec
     * cleared with F_SETFD, 7 set with F_SETFD, 8 dup3 O_CLOEXEC, 9 dup of a
     * close-on-exec descriptor. */
    int plain = open("/dev/null", O_RDONLY);
    int oc = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int dc = fcntl(plain, F_DUPFD_CLOEXEC, 0);
    int cleared = open("/dev/null", O_RDONLY | O_CLOEXEC);
    CHECK_OK(fcntl(cleared, F_SETFD, 0));
    int set = open("/dev/null", O_RDONLY);
    CHECK_OK(fcntl(set, F_SETFD, FD_CLOEXEC));
    int d3 = dup3(plain, 8, O_CLOEXEC);
    int dd = dup(oc);
    CHECK(plain == 3 && oc == 4 && dc == 5 && cleared == 6 && set == 7 && d3 == 8 && dd == 9);
    if (t_failures)
        exit(done());
    printf("before exec: %d checks, %d failed\n", t_checks, t_failures);
    fflush(stdout);
    char *args[] = {argv0, "after-exec", "3:1", "4:0", "5:0", "6:1", "7:0", "8:0", "9:1", NULL};
    execv("/proc/self/exe", args);
    fprintf(stderr, "execv: %s\n", strerror(errno));
    exit(1);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "after-exec") == 0)
        return after_exec(argc, argv);
    test_allocation();
    test_dup();
    test_fcntl();
    test_nofile_limit();
    exec_self(argv[0]);
    return 1;
}
