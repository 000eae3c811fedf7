/* RLIMIT_NOFILE as Linux enforces it: every call that makes a descriptor
 * fails with EMFILE at the soft limit (a pipe that gets only one of its
 * two leaves nothing behind); dup2/dup3 to a target at or past the limit
 * give EBADF and F_DUPFD from a minimum there EINVAL; a lowered limit
 * leaves descriptors above it working; setrlimit and prlimit's own rules
 * (soft above hard, the hard limit past fs.nr_open, raising the hard limit
 * without privilege, another process's limits); children inherit the
 * limit. */
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

#define LIMIT 16

static int open_null(void) {
    return open("/dev/null", O_RDONLY);
}

static void set_soft(rlim_t cur) {
    struct rlimit l;
    CHECK_OK(getrlimit(RLIMIT_NOFILE, &l));
    l.rlim_cur = cur;
    CHECK_OK(setrlimit(RLIMIT_NOFILE, &l));
}

/* Fills every descriptor below the limit. */
static void fill(void) {
    while (open_null() >= 0) {
    }
    CHECK(errno == EMFILE);
}

static void test_full_table(void) {
    set_soft(LIMIT);
    fill();
    CHECK(fcntl(LIMIT - 1, F_GETFD) != -1);
    int p[2];
    CHECK_ERR(open_null(), EMFILE);
    CHECK_ERR(dup(0), EMFILE);
    CHECK_ERR(fcntl(0, F_DUPFD, 0), EMFILE);
    CHECK_ERR(fcntl(0, F_DUPFD_CLOEXEC, 5), EMFILE);
    CHECK_ERR(pipe(p), EMFILE);
    CHECK_ERR(pipe2(p, O_CLOEXEC), EMFILE);
    CHECK_ERR(eventfd(0, 0), EMFILE);
    CHECK_ERR(epoll_create1(0), EMFILE);
    CHECK_ERR(syscall(SYS_pidfd_open, getpid(), 0), EMFILE);
    CHECK_ERR(openat(AT_FDCWD, "/", O_RDONLY | O_DIRECTORY), EMFILE);
    /* dup2 onto an open descriptor below the limit needs no new slot. */
    CHECK(dup2(0, LIMIT - 1) == LIMIT - 1);
    CHECK(dup3(0, LIMIT - 1, O_CLOEXEC) == LIMIT - 1);
    CHECK_ERR(dup2(0, LIMIT), EBADF);
    CHECK_ERR(dup3(0, LIMIT, 0), EBADF);
    CHECK_ERR(fcntl(0, F_DUPFD, LIMIT), EINVAL);
    CHECK_ERR(fcntl(0, F_DUPFD_CLOEXEC, LIMIT + 100), EINVAL);
    CHECK_ERR(fcntl(0, F_DUPFD, -1), EINVAL);
    /* The minimum is an int: the high half of the argument is ignored. */
    CHECK_ERR(syscall(SYS_fcntl, 0, F_DUPFD, (1L << 32) | LIMIT), EINVAL);

    /* One slot free: a pipe needs two and leaves the one free. */
    CHECK_OK(close(7));
    CHECK_ERR(pipe(p), EMFILE);
    CHECK_ERR(pipe2(p, O_NONBLOCK), EMFILE);
    CHECK(open_null() == 7);
    CHECK_OK(close(7));
    CHECK(syscall(SYS_fcntl, 0, F_DUPFD, (1L << 32) | 2) == 7);
    CHECK_OK(close(7));
    CHECK_OK(close(9));
    CHECK(pipe(p) == 0 && p[0] == 7 && p[1] == 9);
    CHECK_ERR(eventfd(0, 0), EMFILE);
    for (int fd = 3; fd < LIMIT; fd++)
        close(fd);
}

static void test_lowered_limit(void) {
    set_soft(64);
    int high = dup2(0, 40);
    CHECK(high == 40);
    set_soft(LIMIT);
    struct rlimit l;
    CHECK_OK(getrlimit(RLIMIT_NOFILE, &l));
    CHECK(l.rlim_cur == LIMIT);
    /* The descriptor past the limit still works, and can be closed, but
     * nothing new goes there. */
    CHECK(fcntl(high, F_GETFD) == 0);
    CHECK(dup(high) == 3);
    CHECK_ERR(dup2(0, high), EBADF);
    CHECK_ERR(fcntl(0, F_DUPFD, 41), EINVAL);
    CHECK_OK(close(high));
    CHECK_OK(close(3));
    set_soft(3);
    CHECK_ERR(open_null(), EMFILE);
    set_soft(0);
    CHECK_ERR(dup(0), EMFILE);
    CHECK(read(0, NULL, 0) == 0); /* 0, 1 and 2 stay usable */
    set_soft(1024);
}

static void test_setrlimit_rules(void) {
    struct rlimit old, l;
    CHECK_OK(getrlimit(RLIMIT_NOFILE, &old));
    l.rlim_cur = old.rlim_max + 1;
    l.rlim_max = old.rlim_max;
    CHECK_ERR(setrlimit(RLIMIT_NOFILE, &l), EINVAL);
    /* No hard limit past fs.nr_open, even for root. */
    l.rlim_cur = l.rlim_max = RLIM_INFINITY;
    CHECK_ERR(setrlimit(RLIMIT_NOFILE, &l), EPERM);
    l.rlim_cur = 10;
    CHECK_ERR(setrlimit(RLIMIT_NOFILE, &l), EPERM);
    CHECK_ERR(getrlimit(RLIM_NLIMITS, &l), EINVAL);
    CHECK_ERR(setrlimit(RLIM_NLIMITS, &old), EINVAL);
    CHECK_ERR(syscall(SYS_getrlimit, RLIMIT_NOFILE, (void *)8), EFAULT);

    /* prlimit: the new value applies and the old one comes back. */
    struct rlimit prev;
    l.rlim_cur = 100;
    l.rlim_max = old.rlim_max;
    CHECK_OK(prlimit(0, RLIMIT_NOFILE, &l, &prev));
    CHECK(prev.rlim_cur == old.rlim_cur && prev.rlim_max == old.rlim_max);
    CHECK_OK(prlimit(getpid(), RLIMIT_NOFILE, NULL, &prev));
    CHECK(prev.rlim_cur == 100);
    CHECK_ERR(prlimit(0, RLIM_NLIMITS, NULL, &prev), EINVAL);
    CHECK_ERR(prlimit(0x3fffffff, RLIMIT_NOFILE, NULL, &prev), ESRCH);

    /* A child inherits the limit; its parent may read and change it. */
    int go[2], back[2];
    CHECK_OK(pipe(go));
    CHECK_OK(pipe(back));
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        struct rlimit mine;
        getrlimit(RLIMIT_NOFILE, &mine);
        int ok = mine.rlim_cur == 100;
        if (write(back[1], "x", 1) != 1 || read(go[0], &c, 1) != 1)
            _exit(3);
        /* Now the parent has set the limit to 5, below the pipes'
         * descriptors: nothing more fits. */
        getrlimit(RLIMIT_NOFILE, &mine);
        ok = ok && mine.rlim_cur == 5 && dup(0) == -1 && errno == EMFILE;
        _exit(ok ? 0 : 1);
    }
    close(go[0]);
    close(back[1]);
    char c;
    CHECK(read(back[0], &c, 1) == 1);
    CHECK_OK(prlimit(pid, RLIMIT_NOFILE, NULL, &prev));
    CHECK(prev.rlim_cur == 100);
    l.rlim_cur = 5;
    CHECK_OK(prlimit(pid, RLIMIT_NOFILE, &l, &prev));
    CHECK(prev.rlim_cur == 100);
    CHECK(write(go[1], "x", 1) == 1);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(go[1]);
    close(back[0]);
    CHECK_OK(getrlimit(RLIMIT_NOFILE, &l));
    CHECK(l.rlim_cur == 100);

    /* Raising the hard limit again takes privilege. */
    l.rlim_cur = 64;
    l.rlim_max = 128;
    CHECK_OK(setrlimit(RLIMIT_NOFILE, &l));
    l.rlim_max = 256;
    int r = setrlimit(RLIMIT_NOFILE, &l);
    printf("raising the hard limit as uid %d: %s\n", geteuid(), r == 0 ? "allowed" : strerror(errno));
    if (geteuid() == 0) {
        /* Root gives privilege up with its ids. */
        pid = fork();
        if (pid == 0) {
            struct rlimit more = {64, 512};
            if (setresuid(65534, 65534, 65534) != 0)
                _exit(3);
            _exit(setrlimit(RLIMIT_NOFILE, &more) == -1 && errno == EPERM ? 0 : 1);
        }
        CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
}

int main(void) {
    test_full_table();
    test_lowered_limit();
    test_setrlimit_rules();
    return done();
}
