/* File locks between processes on a writable file system: flock, POSIX
 * record locks (F_SETLK, F_SETLKW, F_GETLK) with their splitting and
 * release-on-close rules, open file description locks, and EDEADLK. The
 * processes take turns through pipes. See work_dir.h for the arguments. */
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "work_dir.h"

static int to_child[2], to_parent[2];

static void say(int fd, char c) {
    if (write(fd, &c, 1) != 1)
        _exit(9);
}

static char hear(int fd) {
    char c = 0;
    return read(fd, &c, 1) == 1 ? c : 0;
}

/* Starts a child running `body` with the pipes set up: it reads from
 * to_child[0] and writes to to_parent[1]. */
static pid_t child(void (*body)(void)) {
    CHECK(pipe(to_child) == 0 && pipe(to_parent) == 0);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        /* Only the pipe ends: a descriptor inherited from the parent would
         * share its open files, and so its flock and OFD locks. */
        for (int fd = 3; fd < 64; fd++)
            if (fd != to_child[0] && fd != to_parent[1])
                close(fd);
        body();
        fflush(stdout);
        _exit(t_failures ? 1 : 0);
    }
    close(to_child[0]);
    close(to_parent[1]);
    return pid;
}

static void reap(pid_t pid) {
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    close(to_child[1]);
    close(to_parent[0]);
}

static int lock(int fd, int cmd, short type, off_t start, off_t len) {
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len};
    return fcntl(fd, cmd, &fl);
}

/* The lock F_GETLK (or F_OFD_GETLK) finds in the way of a write lock. */
static struct flock probe(int fd, int cmd, off_t start, off_t len) {
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = start, .l_len = len};
    CHECK(fcntl(fd, cmd, &fl) == 0);
    return fl;
}

/* flock: the parent holds an exclusive lock; the child is refused until it
 * lets go. */
static void flock_child(void) {
    int fd = open("lockfile", O_RDWR);
    CHECK(hear(to_child[0]) == 'x');
    CHECK_ERR(flock(fd, LOCK_EX | LOCK_NB), EWOULDBLOCK);
    CHECK_ERR(flock(fd, LOCK_SH | LOCK_NB), EWOULDBLOCK);
    say(to_parent[1], 'r');
    /* Now the parent holds a shared lock: shared is fine, exclusive not. */
    CHECK(hear(to_child[0]) == 's');
    CHECK(flock(fd, LOCK_SH | LOCK_NB) == 0);
    CHECK(flock(fd, LOCK_UN) == 0);
    CHECK_ERR(flock(fd, LOCK_EX | LOCK_NB), EWOULDBLOCK);
    say(to_parent[1], 'r');
    /* The parent closed its descriptor: the lock went with it. A blocking
     * request would not have to wait. */
    CHECK(hear(to_child[0]) == 'c');
    CHECK(flock(fd, LOCK_EX) == 0);
    say(to_parent[1], 'r');
    close(fd);
}

static void flocks(void) {
    CHECK(put_file("lockfile", "0123456789", 10, 0644) == 0);
    int fd = open("lockfile", O_RDWR);
    CHECK(flock(fd, LOCK_EX) == 0);
    /* Locks belong to the open file: a dup shares it, another open conflicts. */
    int dup = fcntl(fd, F_DUPFD, 0);
    CHECK(flock(dup, LOCK_EX | LOCK_NB) == 0);
    int other = open("lockfile", O_RDONLY);
    CHECK_ERR(flock(other, LOCK_EX | LOCK_NB), EWOULDBLOCK);
    CHECK_ERR(flock(other, LOCK_SH | LOCK_NB), EWOULDBLOCK);
    close(other);
    CHECK_ERR(flock(fd, LOCK_EX | LOCK_SH), EINVAL);
    CHECK_ERR(flock(fd, 0), EINVAL);
    CHECK_ERR(flock(-1, LOCK_EX), EBADF);
    pid_t pid = child(flock_child);
    say(to_child[1], 'x');
    CHECK(hear(to_parent[0]) == 'r');
    /* Converting to shared. */
    CHECK(flock(fd, LOCK_SH) == 0);
    say(to_child[1], 's');
    CHECK(hear(to_parent[0]) == 'r');
    close(dup);
    close(fd);
    say(to_child[1], 'c');
    CHECK(hear(to_parent[0]) == 'r');
    reap(pid);
    printf("flock: exclusive and shared between processes, per open file, released on last close\n");
}

/* POSIX locks: the parent holds a write lock on [0, 100) and a read lock on
 * [200, 300). */
static void posix_child(void) {
    int fd = open("lockfile", O_RDWR);
    CHECK(hear(to_child[0]) == 'l');
    struct flock fl = probe(fd, F_GETLK, 50, 10);
    CHECK(fl.l_type == F_WRLCK && fl.l_start == 0 && fl.l_len == 100 && fl.l_pid == getppid());
    fl = probe(fd, F_GETLK, 100, 100);
    CHECK(fl.l_type == F_UNLCK);
    CHECK_ERR(lock(fd, F_SETLK, F_WRLCK, 99, 1), EAGAIN);
    CHECK_ERR(lock(fd, F_SETLK, F_RDLCK, 0, 1), EAGAIN);
    CHECK(lock(fd, F_SETLK, F_WRLCK, 100, 100) == 0);
    CHECK(lock(fd, F_SETLK, F_RDLCK, 250, 10) == 0);
    CHECK_ERR(lock(fd, F_SETLK, F_WRLCK, 250, 10), EAGAIN);
    /* A length of 0 means to the end of the file and beyond. */
    fl = probe(fd, F_GETLK, 1000, 0);
    CHECK(fl.l_type == F_UNLCK);
    say(to_parent[1], 'r');
    /* The parent unlocked [40, 60) from the middle of its write lock. */
    CHECK(hear(to_child[0]) == 'u');
    CHECK(lock(fd, F_SETLK, F_WRLCK, 40, 20) == 0);
    fl = probe(fd, F_GETLK, 30, 40);
    CHECK(fl.l_type == F_WRLCK && fl.l_start == 0 && fl.l_len == 40);
    fl = probe(fd, F_GETLK, 60, 40);
    CHECK(fl.l_type == F_WRLCK && fl.l_start == 60 && fl.l_len == 40);
    say(to_parent[1], 'r');
    /* The parent closed another descriptor of the file: all its POSIX locks
     * on the file are gone. */
    CHECK(hear(to_child[0]) == 'c');
    fl = probe(fd, F_GETLK, 0, 0);
    CHECK(fl.l_type == F_UNLCK);
    say(to_parent[1], 'r');
    /* F_SETLKW: the parent takes [0, 10) again and says so; this waits until
     * it lets go. */
    CHECK(hear(to_child[0]) == 'w');
    CHECK(lock(fd, F_SETLKW, F_WRLCK, 0, 10) == 0);
    say(to_parent[1], 'g');
    CHECK(hear(to_child[0]) == 'q');
    close(fd);
}

static void posix_locks(void) {
    /* (Another file: closing any descriptor of lockfile would drop this
     * process's locks on it, as the test of that below shows.) */
    CHECK(put_file("readonly", "", 0, 0644) == 0);
    int ro = open("readonly", O_RDONLY);
    CHECK_ERR(lock(ro, F_SETLK, F_WRLCK, 0, 1), EBADF);
    CHECK(lock(ro, F_SETLK, F_RDLCK, 0, 1) == 0);
    close(ro);
    int fd = open("lockfile", O_RDWR);
    CHECK(lock(fd, F_SETLK, F_WRLCK, 0, 100) == 0);
    CHECK(lock(fd, F_SETLK, F_RDLCK, 200, 100) == 0);
    /* A process's own locks never conflict with it. */
    struct flock fl = probe(fd, F_GETLK, 0, 0);
    CHECK(fl.l_type == F_UNLCK);
    CHECK(lock(fd, F_SETLK, F_WRLCK, 50, 10) == 0);
    CHECK_ERR(lock(fd, F_SETLK, 42, 0, 1), EINVAL);
    CHECK_ERR(lock(fd, F_SETLK, F_WRLCK, -5, 1), EINVAL);
    pid_t pid = child(posix_child);
    say(to_child[1], 'l');
    CHECK(hear(to_parent[0]) == 'r');
    CHECK(lock(fd, F_SETLK, F_UNLCK, 40, 20) == 0);
    say(to_child[1], 'u');
    CHECK(hear(to_parent[0]) == 'r');
    int other = open("lockfile", O_RDONLY);
    close(other);
    say(to_child[1], 'c');
    /* The child holds [40, 60) and [100, 200) and a read lock in between. */
    fl = probe(fd, F_GETLK, 30, 20);
    CHECK(fl.l_type == F_WRLCK && fl.l_pid == pid && fl.l_start == 40 && fl.l_len == 20);
    fl = probe(fd, F_GETLK, 0, 40);
    CHECK(fl.l_type == F_UNLCK);
    /* Not before the child has seen this process holding nothing. */
    CHECK(hear(to_parent[0]) == 'r');
    CHECK(lock(fd, F_SETLK, F_WRLCK, 0, 10) == 0);
    say(to_child[1], 'w');
    CHECK(lock(fd, F_SETLK, F_UNLCK, 0, 10) == 0);
    CHECK(hear(to_parent[0]) == 'g');
    fl = probe(fd, F_GETLK, 0, 10);
    CHECK(fl.l_type == F_WRLCK && fl.l_pid == pid && fl.l_start == 0 && fl.l_len == 10);
    say(to_child[1], 'q');
    reap(pid);
    /* The child's exit released its locks. */
    fl = probe(fd, F_GETLK, 0, 0);
    CHECK(fl.l_type == F_UNLCK);
    close(fd);
    printf("fcntl locks: F_GETLK reports the holder, splitting, release on any close, F_SETLKW waits\n");
}

/* Open file description locks: per open, not per process, and not dropped
 * by closing another descriptor. */
static void ofd_child(void) {
    int fd = open("lockfile", O_RDWR);
    CHECK(hear(to_child[0]) == 'o');
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 10};
    CHECK(fcntl(fd, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_WRLCK && fl.l_pid == -1);
    CHECK_ERR(lock(fd, F_OFD_SETLK, F_RDLCK, 5, 1), EAGAIN);
    /* Classic locks and OFD locks conflict with each other. */
    CHECK_ERR(lock(fd, F_SETLK, F_WRLCK, 5, 1), EAGAIN);
    CHECK(lock(fd, F_OFD_SETLK, F_WRLCK, 10, 10) == 0);
    say(to_parent[1], 'r');
    CHECK(hear(to_child[0]) == 'q');
    close(fd);
}

static void ofd_locks(void) {
    int a = open("lockfile", O_RDWR), b = open("lockfile", O_RDWR);
    CHECK(lock(a, F_OFD_SETLK, F_WRLCK, 0, 10) == 0);
    /* Two opens in one process do conflict. */
    CHECK_ERR(lock(b, F_OFD_SETLK, F_WRLCK, 0, 1), EAGAIN);
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
    CHECK(fcntl(b, F_OFD_GETLK, &fl) == 0 && fl.l_type == F_WRLCK && fl.l_pid == -1);
    /* l_pid must be 0 when setting. */
    struct flock bad = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 50, .l_len = 1, .l_pid = 1};
    CHECK_ERR(fcntl(a, F_OFD_SETLK, &bad), EINVAL);
    /* Closing another descriptor does not drop it. */
    close(b);
    pid_t pid = child(ofd_child);
    say(to_child[1], 'o');
    CHECK(hear(to_parent[0]) == 'r');
    b = open("lockfile", O_RDWR);
    CHECK_ERR(lock(b, F_OFD_SETLK, F_WRLCK, 15, 1), EAGAIN);
    close(b);
    say(to_child[1], 'q');
    reap(pid);
    CHECK(lock(a, F_OFD_SETLK, F_UNLCK, 0, 10) == 0);
    close(a);
    printf("OFD locks: per open file, l_pid -1, conflict with classic locks\n");
}

/* Each holds one lock and then waits for the other's: exactly one of the two
 * waits is refused with EDEADLK (whichever would close the cycle), and the
 * refused one lets go of its lock so the other finishes. */
static void deadlock_child(void) {
    int fd = open("lockfile", O_RDWR);
    CHECK(lock(fd, F_SETLK, F_WRLCK, 10, 10) == 0);
    say(to_parent[1], 'b');
    int r = lock(fd, F_SETLKW, F_WRLCK, 0, 10);
    int e = errno;
    if (r == -1 && e == EDEADLK) {
        CHECK(lock(fd, F_SETLK, F_UNLCK, 10, 10) == 0);
        say(to_parent[1], 'D');
    } else {
        CHECK(r == 0);
        say(to_parent[1], 'L');
    }
    close(fd);
}

static void deadlock(void) {
    int fd = open("lockfile", O_RDWR);
    CHECK(lock(fd, F_SETLK, F_WRLCK, 0, 10) == 0);
    pid_t pid = child(deadlock_child);
    CHECK(hear(to_parent[0]) == 'b');
    int r = lock(fd, F_SETLKW, F_WRLCK, 10, 10);
    int e = errno;
    int deadlocks = r == -1 && e == EDEADLK;
    CHECK(r == 0 || deadlocks);
    /* (One check either way: which side is refused varies, the output not.) */
    int released = deadlocks ? lock(fd, F_SETLK, F_UNLCK, 0, 10) : 0;
    CHECK(released == 0);
    char c = hear(to_parent[0]);
    CHECK(c == 'D' || c == 'L');
    deadlocks += c == 'D';
    reap(pid);
    close(fd);
    printf("EDEADLK: %d of the two waits refused\n", deadlocks);
}

int main(int argc, char **argv) {
    enter_work_dir(argc, argv);
    flocks();
    posix_locks();
    ofd_locks();
    deadlock();
    return done();
}
