/* File locks between processes: flock, fcntl record locks (F_SETLK,
 * F_SETLKW, F_GETLK) and OFD locks, in a fresh directory under /tmp.
 * Processes synchronise through pipes only, never by sleeping. */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

static char path[256];

static void put(int fd) {
    char c = 'x';
    if (write(fd, &c, 1) != 1) _exit(90);
}

static void get(int fd) {
    char c;
    if (read(fd, &c, 1) != 1) _exit(91);
}

static int open_file(int flags) {
    int fd = open(path, flags);
    if (fd < 0) {
        perror("open");
        exit(2);
    }
    return fd;
}

static int wait_child(pid_t pid) {
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

/* The exit status of a child that runs `op` and exits with its result. */
#define IN_CHILD(op)                      \
    ({                                    \
        pid_t _p = fork();                \
        if (_p == 0) _exit(op);           \
        wait_child(_p);                   \
    })

/* flock from a fresh description in another process: 0 if granted, the
 * errno otherwise. */
static int other_flock(int op) {
    int fd = open_file(O_RDONLY);
    return flock(fd, op) == 0 ? 0 : errno;
}

static struct flock lk(short type, short whence, off_t start, off_t len) {
    struct flock l;
    memset(&l, 0, sizeof l);
    l.l_type = type;
    l.l_whence = whence;
    l.l_start = start;
    l.l_len = len;
    return l;
}

static int setlk(int fd, int cmd, short type, off_t start, off_t len) {
    struct flock l = lk(type, SEEK_SET, start, len);
    return fcntl(fd, cmd, &l);
}

/* F_GETLK as another process sees it, the result passed back through a
 * shared page. */
static struct flock *shared;

static struct flock other_getlk(short type, off_t start, off_t len) {
    pid_t p = fork();
    if (p == 0) {
        int fd = open_file(O_RDWR);
        struct flock l = lk(type, SEEK_SET, start, len);
        if (fcntl(fd, F_GETLK, &l) != 0) _exit(1);
        *shared = l;
        _exit(0);
    }
    struct flock none = lk(-1, 0, 0, 0);
    if (wait_child(p) != 0) return none;
    return *shared;
}

/* Another process's F_SETLK: 0 or its errno. */
static int other_setlk(short type, off_t start, off_t len) {
    int fd = open_file(O_RDWR);
    return setlk(fd, F_SETLK, type, start, len) == 0 ? 0 : errno;
}

static void test_flock(void) {
    int fd = open_file(O_RDWR);
    CHECK_OK(flock(fd, LOCK_EX));
    CHECK(IN_CHILD(other_flock(LOCK_EX | LOCK_NB)) == EWOULDBLOCK);
    CHECK(IN_CHILD(other_flock(LOCK_SH | LOCK_NB)) == EWOULDBLOCK);
    /* A forked child shares the description, so the lock is its own. */
    CHECK(IN_CHILD(flock(fd, LOCK_EX | LOCK_NB) == 0 ? 0 : errno) == 0);
    CHECK_OK(flock(fd, LOCK_EX)); /* holding it already */

    /* Downgrade: readers may join, a writer may not. */
    CHECK_OK(flock(fd, LOCK_SH | LOCK_NB));
    CHECK(IN_CHILD(other_flock(LOCK_SH | LOCK_NB)) == 0);
    CHECK(IN_CHILD(other_flock(LOCK_EX | LOCK_NB)) == EWOULDBLOCK);

    /* Another description of the same process conflicts too. */
    int fd2 = open_file(O_RDONLY);
    CHECK_ERR(flock(fd2, LOCK_EX | LOCK_NB), EWOULDBLOCK);
    CHECK_OK(flock(fd2, LOCK_SH | LOCK_NB));
    /* Upgrading while another shares it fails, and drops the shared lock
     * first, as Linux converts. */
    CHECK_ERR(flock(fd, LOCK_EX | LOCK_NB), EWOULDBLOCK);
    CHECK_OK(flock(fd2, LOCK_UN));
    CHECK_OK(flock(fd, LOCK_EX | LOCK_NB));

    /* The lock lives while any descriptor of the description does. */
    int d = dup(fd);
    CHECK_OK(close(fd));
    CHECK(IN_CHILD(other_flock(LOCK_SH | LOCK_NB)) == EWOULDBLOCK);
    CHECK_OK(close(d));
    CHECK(IN_CHILD(other_flock(LOCK_EX | LOCK_NB)) == 0);
    CHECK_OK(close(fd2));

    /* A blocked LOCK_EX is granted when the holder lets go. */
    int ready[2], go[2];
    CHECK_OK(pipe(ready));
    CHECK_OK(pipe(go));
    volatile int *released = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    *released = 0;
    pid_t holder = fork();
    if (holder == 0) {
        int h = open_file(O_RDONLY);
        if (flock(h, LOCK_EX) != 0) _exit(1);
        put(ready[1]);
        get(go[0]);
        *released = 1;
        _exit(flock(h, LOCK_UN) == 0 ? 0 : 2);
    }
    get(ready[0]);
    fd = open_file(O_RDONLY);
    CHECK_ERR(flock(fd, LOCK_SH | LOCK_NB), EWOULDBLOCK);
    put(go[1]);
    CHECK_OK(flock(fd, LOCK_SH));
    CHECK(*released == 1);
    CHECK(wait_child(holder) == 0);
    CHECK_OK(close(fd));

    /* Errors. */
    CHECK_ERR(flock(-1, LOCK_SH), EBADF);
    CHECK_ERR(flock(0, 0), EINVAL);
    CHECK_ERR(flock(0, LOCK_SH | LOCK_EX), EINVAL);
    int p = open(path, O_PATH);
    CHECK_ERR(flock(p, LOCK_SH), EBADF);
    close(p);
    close(ready[0]), close(ready[1]), close(go[0]), close(go[1]);
}

static void test_records(void) {
    int fd = open_file(O_RDWR);
    struct flock l;

    CHECK_OK(setlk(fd, F_SETLK, F_WRLCK, 0, 10));
    l = other_getlk(F_RDLCK, 5, 1);
    CHECK(l.l_type == F_WRLCK && l.l_whence == SEEK_SET && l.l_start == 0 && l.l_len == 10 && l.l_pid == getpid());
    CHECK(IN_CHILD(other_setlk(F_RDLCK, 9, 5)) == EAGAIN);
    CHECK(IN_CHILD(other_setlk(F_WRLCK, 10, 5)) == 0);
    /* A process never conflicts with itself. */
    l = lk(F_WRLCK, SEEK_SET, 0, 0);
    CHECK_OK(fcntl(fd, F_GETLK, &l));
    CHECK(l.l_type == F_UNLCK && l.l_start == 0 && l.l_len == 0);

    /* Unlocking the middle splits the lock. */
    CHECK_OK(setlk(fd, F_SETLK, F_UNLCK, 3, 2));
    l = other_getlk(F_WRLCK, 0, 10);
    CHECK(l.l_type == F_WRLCK && l.l_start == 0 && l.l_len == 3);
    l = other_getlk(F_WRLCK, 3, 2);
    CHECK(l.l_type == F_UNLCK);
    l = other_getlk(F_WRLCK, 4, 0);
    CHECK(l.l_type == F_WRLCK && l.l_start == 5 && l.l_len == 5);
    /* And locking it again merges them. */
    CHECK_OK(setlk(fd, F_SETLK, F_WRLCK, 3, 2));
    l = other_getlk(F_RDLCK, 9, 1);
    CHECK(l.l_start == 0 && l.l_len == 10);
    /* A read lock in the middle of a write lock. */
    CHECK_OK(setlk(fd, F_SETLK, F_RDLCK, 4, 2));
    CHECK(IN_CHILD(other_setlk(F_RDLCK, 4, 2)) == 0);
    CHECK(IN_CHILD(other_setlk(F_RDLCK, 3, 2)) == EAGAIN);
    l = other_getlk(F_WRLCK, 4, 6);
    CHECK(l.l_type == F_RDLCK && l.l_start == 4 && l.l_len == 2);
    CHECK_OK(setlk(fd, F_SETLK, F_UNLCK, 0, 0));
    CHECK(other_getlk(F_WRLCK, 0, 0).l_type == F_UNLCK);

    /* To the end of any file, backwards, from the offset and the end. */
    CHECK_OK(setlk(fd, F_SETLK, F_RDLCK, 100, 0));
    l = other_getlk(F_WRLCK, 1 << 30, 1);
    CHECK(l.l_type == F_RDLCK && l.l_start == 100 && l.l_len == 0);
    CHECK_OK(setlk(fd, F_SETLK, F_UNLCK, 0, 0));
    CHECK_OK(setlk(fd, F_SETLK, F_WRLCK, 50, -10));
    l = other_getlk(F_RDLCK, 0, 0);
    CHECK(l.l_start == 40 && l.l_len == 10);
    CHECK_OK(lseek(fd, 20, SEEK_SET));
    l = lk(F_WRLCK, SEEK_CUR, 5, 1);
    CHECK_OK(fcntl(fd, F_SETLK, &l));
    l = other_getlk(F_RDLCK, 25, 1);
    CHECK(l.l_start == 25 && l.l_len == 1);
    l = lk(F_WRLCK, SEEK_END, -1, 1); /* the file holds 100 bytes */
    CHECK_OK(fcntl(fd, F_SETLK, &l));
    l = other_getlk(F_RDLCK, 60, 0);
    CHECK(l.l_start == 99 && l.l_len == 1);
    CHECK_OK(setlk(fd, F_SETLK, F_UNLCK, 0, 0));

    /* Errors. */
    l = lk(F_WRLCK, SEEK_SET, -1, 1);
    CHECK_ERR(fcntl(fd, F_SETLK, &l), EINVAL);
    l = lk(F_WRLCK, SEEK_SET, 5, -6);
    CHECK_ERR(fcntl(fd, F_SETLK, &l), EINVAL);
    l = lk(F_WRLCK, 7, 0, 1);
    CHECK_ERR(fcntl(fd, F_SETLK, &l), EINVAL);
    l = lk(42, SEEK_SET, 0, 1);
    CHECK_ERR(fcntl(fd, F_SETLK, &l), EINVAL);
    l = lk(F_UNLCK, SEEK_SET, 0, 1);
    CHECK_ERR(fcntl(fd, F_GETLK, &l), EINVAL);
    CHECK_ERR(fcntl(fd, F_GETLK, (void *)8), EFAULT);
    int ro = open_file(O_RDONLY), wo = open_file(O_WRONLY);
    CHECK_ERR(setlk(ro, F_SETLK, F_WRLCK, 0, 1), EBADF);
    CHECK_ERR(setlk(wo, F_SETLK, F_RDLCK, 0, 1), EBADF);
    CHECK_OK(setlk(ro, F_SETLK, F_RDLCK, 0, 1));
    CHECK_OK(setlk(wo, F_SETLK, F_WRLCK, 0, 1)); /* converts the process's lock */
    CHECK_OK(setlk(ro, F_SETLK, F_UNLCK, 0, 1));
    int p = open(path, O_PATH);
    CHECK_ERR(setlk(p, F_SETLK, F_RDLCK, 0, 1), EBADF);
    close(p);

    /* Closing any descriptor of the file drops the process's locks. */
    CHECK_OK(setlk(fd, F_SETLK, F_WRLCK, 0, 10));
    CHECK_OK(close(ro));
    CHECK(other_getlk(F_RDLCK, 0, 0).l_type == F_UNLCK);
    CHECK_OK(setlk(fd, F_SETLK, F_WRLCK, 0, 10));
    CHECK_OK(close(wo));
    CHECK(other_getlk(F_RDLCK, 0, 0).l_type == F_UNLCK);

    /* A forked child does not inherit them. */
    CHECK_OK(setlk(fd, F_SETLK, F_WRLCK, 0, 10));
    CHECK(IN_CHILD(setlk(fd, F_SETLK, F_RDLCK, 0, 1) == 0 ? 0 : errno) == EAGAIN);
    CHECK_OK(setlk(fd, F_SETLK, F_UNLCK, 0, 0));

    /* A process's locks go when it exits. */
    int ready[2], go[2];
    CHECK_OK(pipe(ready));
    CHECK_OK(pipe(go));
    pid_t holder = fork();
    if (holder == 0) {
        int h = open_file(O_RDWR);
        if (setlk(h, F_SETLK, F_WRLCK, 20, 5) != 0) _exit(1);
        put(ready[1]);
        get(go[0]);
        _exit(0);
    }
    get(ready[0]);
    l = lk(F_RDLCK, SEEK_SET, 0, 0);
    CHECK_OK(fcntl(fd, F_GETLK, &l));
    CHECK(l.l_type == F_WRLCK && l.l_start == 20 && l.l_len == 5 && l.l_pid == holder);
    put(go[1]);
    CHECK(wait_child(holder) == 0);
    l = lk(F_RDLCK, SEEK_SET, 0, 0);
    CHECK_OK(fcntl(fd, F_GETLK, &l));
    CHECK(l.l_type == F_UNLCK);

    /* F_SETLKW waits until the holder unlocks. */
    volatile int *released = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    *released = 0;
    holder = fork();
    if (holder == 0) {
        int h = open_file(O_RDWR);
        if (setlk(h, F_SETLK, F_WRLCK, 0, 10) != 0) _exit(1);
        put(ready[1]);
        get(go[0]);
        *released = 1;
        _exit(setlk(h, F_SETLK, F_UNLCK, 0, 10) == 0 ? 0 : 2);
    }
    get(ready[0]);
    CHECK_ERR(setlk(fd, F_SETLK, F_WRLCK, 5, 1), EAGAIN);
    put(go[1]);
    CHECK_OK(setlk(fd, F_SETLKW, F_WRLCK, 5, 1));
    CHECK(*released == 1);
    CHECK(wait_child(holder) == 0);
    CHECK_OK(setlk(fd, F_SETLK, F_UNLCK, 0, 0));
    close(ready[0]), close(ready[1]), close(go[0]), close(go[1]);
    close(fd);
}

/* Two processes each hold one byte and wait for the other's: whichever
 * waits second closes the cycle and gets EDEADLK; it lets its byte go, and
 * the other's wait is granted. */
static void test_deadlock(void) {
    int ready[2], go[2];
    CHECK_OK(pipe(ready));
    CHECK_OK(pipe(go));
    int fd = open_file(O_RDWR);
    CHECK_OK(setlk(fd, F_SETLK, F_WRLCK, 0, 1));
    pid_t child = fork();
    if (child == 0) {
        int c = open_file(O_RDWR);
        if (setlk(c, F_SETLK, F_WRLCK, 1, 1) != 0) _exit(10);
        put(ready[1]);
        get(go[0]);
        int r = setlk(c, F_SETLKW, F_WRLCK, 0, 1) == 0 ? 0 : errno;
        if (r == EDEADLK) setlk(c, F_SETLK, F_UNLCK, 1, 1);
        _exit(r);
    }
    get(ready[0]);
    put(go[1]);
    int mine = setlk(fd, F_SETLKW, F_WRLCK, 1, 1) == 0 ? 0 : errno;
    if (mine == EDEADLK) setlk(fd, F_SETLK, F_UNLCK, 0, 1);
    int theirs = wait_child(child);
    CHECK((mine == EDEADLK && theirs == 0) || (mine == 0 && theirs == EDEADLK));
    CHECK_OK(setlk(fd, F_SETLK, F_UNLCK, 0, 0));

    /* A cycle through three processes: byte i is held by process i, which
     * then waits for byte i+1. Once all three wait, one of them got
     * EDEADLK; it lets its byte go, and the others' waits are granted in
     * turn as each finishes. */
    pid_t kids[2];
    for (int i = 1; i <= 2; i++) {
        kids[i - 1] = fork();
        if (kids[i - 1] == 0) {
            int c = open_file(O_RDWR);
            if (setlk(c, F_SETLK, F_WRLCK, i, 1) != 0) _exit(10);
            put(ready[1]);
            get(go[0]);
            int r = setlk(c, F_SETLKW, F_WRLCK, (i + 1) % 3, 1) == 0 ? 0 : errno;
            if (r == EDEADLK) setlk(c, F_SETLK, F_UNLCK, i, 1);
            _exit(r);
        }
    }
    CHECK_OK(setlk(fd, F_SETLK, F_WRLCK, 0, 1));
    get(ready[0]);
    get(ready[0]);
    put(go[1]);
    put(go[1]);
    mine = setlk(fd, F_SETLKW, F_WRLCK, 1, 1) == 0 ? 0 : errno;
    if (mine == EDEADLK) setlk(fd, F_SETLK, F_UNLCK, 0, 1);
    /* Whoever waits for us is granted only when we finish. */
    CHECK_OK(setlk(fd, F_SETLK, F_UNLCK, 0, 0));
    int deadlocks = mine == EDEADLK, granted = mine == 0;
    for (int i = 0; i < 2; i++) {
        int r = wait_child(kids[i]);
        deadlocks += r == EDEADLK;
        granted += r == 0;
    }
    CHECK(deadlocks == 1 && granted == 2);
    close(fd);
    close(ready[0]), close(ready[1]), close(go[0]), close(go[1]);
}

static void test_ofd(void) {
    int a = open_file(O_RDWR), b = open_file(O_RDWR);
    struct flock l;

    CHECK_OK(setlk(a, F_OFD_SETLK, F_WRLCK, 0, 10));
    /* Another description of the same process conflicts. */
    CHECK_ERR(setlk(b, F_OFD_SETLK, F_RDLCK, 5, 1), EAGAIN);
    l = lk(F_RDLCK, SEEK_SET, 0, 0);
    CHECK_OK(fcntl(b, F_OFD_GETLK, &l));
    CHECK(l.l_type == F_WRLCK && l.l_start == 0 && l.l_len == 10 && l.l_pid == -1);
    /* POSIX locks and their F_GETLK see them as well. */
    CHECK_ERR(setlk(b, F_SETLK, F_RDLCK, 5, 1), EAGAIN);
    l = other_getlk(F_RDLCK, 0, 0);
    CHECK(l.l_type == F_WRLCK && l.l_pid == -1);
    /* l_pid must be 0. */
    l = lk(F_RDLCK, SEEK_SET, 0, 1);
    l.l_pid = 1;
    CHECK_ERR(fcntl(b, F_OFD_SETLK, &l), EINVAL);
    l.l_pid = 1;
    CHECK_ERR(fcntl(b, F_OFD_GETLK, &l), EINVAL);

    /* Closing another descriptor of the file keeps them. */
    CHECK_OK(close(b));
    CHECK(other_getlk(F_RDLCK, 0, 0).l_type == F_WRLCK);
    /* A dup or a forked child shares the description and its locks. */
    int d = dup(a);
    CHECK_OK(setlk(d, F_OFD_SETLK, F_WRLCK, 5, 10));
    CHECK(IN_CHILD(setlk(a, F_OFD_SETLK, F_WRLCK, 0, 20) == 0 ? 0 : errno) == 0);
    l = other_getlk(F_RDLCK, 19, 1);
    CHECK(l.l_type == F_WRLCK && l.l_start == 0 && l.l_len == 20);
    CHECK_OK(close(a));
    CHECK(other_getlk(F_RDLCK, 0, 0).l_type == F_WRLCK);
    CHECK_OK(close(d));
    CHECK(other_getlk(F_RDLCK, 0, 0).l_type == F_UNLCK);

    /* A process's POSIX lock blocks its own OFD lock. */
    a = open_file(O_RDWR);
    b = open_file(O_RDWR);
    CHECK_OK(setlk(a, F_SETLK, F_WRLCK, 0, 1));
    CHECK_ERR(setlk(b, F_OFD_SETLK, F_WRLCK, 0, 1), EAGAIN);
    CHECK_OK(setlk(b, F_OFD_SETLK, F_WRLCK, 1, 1));
    CHECK_OK(close(a));
    CHECK_OK(setlk(b, F_OFD_SETLKW, F_WRLCK, 0, 1));
    CHECK_OK(close(b));
}

int main(void) {
    char dir[] = "/tmp/cordon-locks-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 2;
    }
    snprintf(path, sizeof path, "%s/file", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0644);
    char data[100] = {0};
    if (fd < 0 || write(fd, data, sizeof data) != sizeof data) {
        perror("create");
        return 2;
    }
    close(fd);
    shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

    test_flock();
    test_records();
    test_deadlock();
    test_ofd();

    unlink(path);
    rmdir(dir);
    return done();
}
