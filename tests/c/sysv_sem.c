/* System V semaphores: semget's key and flag rules and limits, semop and
 * semtimedop (atomic groups, IPC_NOWAIT, blocking and waking across
 * processes, a timeout, EINTR from a signal, EIDRM when the set goes),
 * SEM_UNDO undone at exit, and every semctl command with its errors. */
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/ipc.h>
#include <sys/sem.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t.h"

union semun {
    int val;
    struct semid_ds *buf;
    unsigned short *array;
    struct seminfo *__buf;
};

static int op(int id, unsigned short num, short sem_op, short flg) {
    struct sembuf b = {num, sem_op, flg};
    return semop(id, &b, 1);
}

static int val(int id, int num) { return semctl(id, num, GETVAL); }

/* A key of this run's own, so that runs side by side on the host never
 * meet. */
static key_t run_key(int n) { return (key_t)(0x5e000000 | ((getpid() & 0xffff) << 8) | n); }

static void test_get(void) {
    key_t key = run_key(1);
    CHECK_ERR(semget(key, 1, 0600), ENOENT);
    int id = semget(key, 3, IPC_CREAT | IPC_EXCL | 0640);
    CHECK(id >= 0);
    CHECK(semget(key, 3, 0600) == id);
    CHECK(semget(key, 0, 0) == id);
    CHECK(semget(key, 2, IPC_CREAT | 0600) == id);
    CHECK_ERR(semget(key, 4, 0600), EINVAL);
    CHECK_ERR(semget(key, 1, IPC_CREAT | IPC_EXCL | 0600), EEXIST);
    CHECK_ERR(semget(IPC_PRIVATE, 0, 0600), EINVAL);
    CHECK_ERR(semget(IPC_PRIVATE, -1, 0600), EINVAL);
    CHECK_ERR(semget(IPC_PRIVATE, 32001, 0600), EINVAL);
    int other = semget(IPC_PRIVATE, 1, 0600);
    CHECK(other >= 0 && other != id);

    struct semid_ds ds;
    CHECK_OK(semctl(id, 0, IPC_STAT, (union semun){.buf = &ds}));
    CHECK(ds.sem_nsems == 3);
    CHECK(ds.sem_perm.__key == key);
    CHECK((ds.sem_perm.mode & 0777) == 0640);
    CHECK(ds.sem_perm.uid == geteuid() && ds.sem_perm.cuid == geteuid());
    CHECK(ds.sem_perm.gid == getegid() && ds.sem_perm.cgid == getegid());
    CHECK(ds.sem_otime == 0);
    CHECK(ds.sem_ctime >= time(NULL) - 5 && ds.sem_ctime <= time(NULL));

    ds.sem_perm.mode = 0600;
    CHECK_OK(semctl(id, 0, IPC_SET, (union semun){.buf = &ds}));
    CHECK_OK(semctl(id, 0, IPC_STAT, (union semun){.buf = &ds}));
    CHECK((ds.sem_perm.mode & 0777) == 0600);

    CHECK_OK(semctl(id, 0, IPC_RMID));
    CHECK_ERR(semctl(id, 0, IPC_RMID), EINVAL);
    CHECK_ERR(semctl(id, 0, GETVAL), EINVAL);
    CHECK_ERR(op(id, 0, 1, 0), EINVAL);
    CHECK_ERR(semget(key, 1, 0600), ENOENT);
    CHECK_ERR(semctl(-1, 0, IPC_STAT, (union semun){.buf = &ds}), EINVAL);
    CHECK_ERR(semctl(other, 0, IPC_STAT, (union semun){.buf = (void *)8}), EFAULT);
    CHECK_ERR(semctl(other, 0, 12345), EINVAL);
    CHECK_OK(semctl(other, 0, IPC_RMID));
}

static void test_values(void) {
    int id = semget(IPC_PRIVATE, 3, 0600);
    CHECK(id >= 0);
    unsigned short all[3] = {1, 2, 3};
    CHECK_OK(semctl(id, 0, SETALL, (union semun){.array = all}));
    CHECK(val(id, 0) == 1 && val(id, 1) == 2 && val(id, 2) == 3);
    CHECK(semctl(id, 1, GETPID) == getpid());
    CHECK_OK(semctl(id, 1, SETVAL, (union semun){.val = 7}));
    unsigned short got[3] = {0};
    CHECK_OK(semctl(id, 0, GETALL, (union semun){.array = got}));
    CHECK(got[0] == 1 && got[1] == 7 && got[2] == 3);
    CHECK_ERR(semctl(id, 3, GETVAL), EINVAL);
    CHECK_ERR(semctl(id, -1, SETVAL, (union semun){.val = 1}), EINVAL);
    CHECK_ERR(semctl(id, 0, SETVAL, (union semun){.val = 32768}), ERANGE);
    CHECK_ERR(semctl(id, 0, SETVAL, (union semun){.val = -1}), ERANGE);
    CHECK_OK(semctl(id, 0, SETVAL, (union semun){.val = 32767}));
    CHECK_ERR(op(id, 0, 1, 0), ERANGE);
    CHECK_ERR(semctl(id, 0, GETALL, (union semun){.array = (void *)8}), EFAULT);

    /* A group is all or nothing. */
    CHECK_OK(semctl(id, 0, SETVAL, (union semun){.val = 1}));
    struct sembuf two[2] = {{0, -1, IPC_NOWAIT}, {2, -4, IPC_NOWAIT}};
    CHECK_ERR(semop(id, two, 2), EAGAIN);
    CHECK(val(id, 0) == 1 && val(id, 2) == 3);
    two[1].sem_op = -3;
    CHECK_OK(semop(id, two, 2));
    CHECK(val(id, 0) == 0 && val(id, 2) == 0);
    CHECK(op(id, 2, 0, 0) == 0); /* waits for zero: already zero */
    CHECK_ERR(op(id, 1, 0, IPC_NOWAIT), EAGAIN);
    /* The same semaphore twice in one group. */
    struct sembuf twice[2] = {{1, -5, 0}, {1, -2, 0}};
    CHECK_OK(semop(id, twice, 2));
    CHECK(val(id, 1) == 0);

    CHECK_ERR(semop(id, two, 0), EINVAL);
    struct sembuf many[501];
    memset(many, 0, sizeof many);
    CHECK_ERR(semop(id, many, 501), E2BIG);
    CHECK_ERR(op(id, 3, 1, 0), EFBIG);
    CHECK_ERR(semop(id, (void *)8, 1), EFAULT);

    struct timespec ts = {0, 20 * 1000 * 1000};
    struct sembuf wait_one = {0, -1, 0};
    CHECK_ERR(semtimedop(id, &wait_one, 1, &ts), EAGAIN);
    ts.tv_nsec = 1000000000;
    CHECK_ERR(semtimedop(id, &wait_one, 1, &ts), EINVAL);
    CHECK_OK(semctl(id, 0, IPC_RMID));
}

/* A child blocks; the parent sees it counted by GETNCNT or GETZCNT, then
 * releases it. */
static void test_blocking(void) {
    int id = semget(IPC_PRIVATE, 2, 0600);
    int ready = semget(IPC_PRIVATE, 1, 0600);
    CHECK(id >= 0 && ready >= 0);
    pid_t pid = fork();
    if (pid == 0) {
        /* Takes two from sem 0, then waits for sem 1 to be zero. */
        if (op(id, 0, -2, 0) != 0) _exit(1);
        if (op(id, 1, 0, 0) != 0) _exit(2);
        _exit(0);
    }
    while (semctl(id, 0, GETNCNT) != 1) sched_yield();
    CHECK(semctl(id, 1, GETNCNT) == 0);
    CHECK(semctl(id, 0, GETZCNT) == 0);
    CHECK_OK(op(id, 0, 1, 0));
    CHECK(semctl(id, 0, GETNCNT) == 1); /* one is not enough */
    CHECK_OK(semctl(id, 1, SETVAL, (union semun){.val = 1}));
    CHECK_OK(op(id, 0, 1, 0));
    while (semctl(id, 1, GETZCNT) != 1) sched_yield();
    CHECK(val(id, 0) == 0);
    CHECK(semctl(id, 0, GETPID) == pid);
    CHECK_OK(op(id, 1, -1, 0));
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);

    /* Removing the set fails a waiter with EIDRM. */
    pid = fork();
    if (pid == 0) {
        if (op(id, 0, -1, 0) == -1 && errno == EIDRM) _exit(0);
        _exit(1);
    }
    while (semctl(id, 0, GETNCNT) != 1) sched_yield();
    CHECK_OK(semctl(id, 0, IPC_RMID));
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_OK(semctl(ready, 0, IPC_RMID));
}

static void on_alarm(int sig) {}

/* A signal with a handler ends a wait with EINTR, SA_RESTART or not. */
static void test_eintr(void) {
    int id = semget(IPC_PRIVATE, 1, 0600);
    struct sigaction sa = {.sa_handler = on_alarm, .sa_flags = SA_RESTART};
    sigaction(SIGUSR1, &sa, NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        while (semctl(id, 0, GETNCNT) != 1) sched_yield();
        kill(parent, SIGUSR1);
        _exit(0);
    }
    CHECK_ERR(op(id, 0, -1, 0), EINTR);
    CHECK(semctl(id, 0, GETNCNT) == 0);
    waitpid(pid, NULL, 0);
    signal(SIGUSR1, SIG_DFL);

    /* A waiter can be killed, and stops being counted. */
    pid = fork();
    if (pid == 0) {
        op(id, 0, -1, 0);
        _exit(1);
    }
    while (semctl(id, 0, GETNCNT) != 1) sched_yield();
    CHECK_OK(kill(pid, SIGKILL));
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    CHECK(semctl(id, 0, GETNCNT) == 0);
    CHECK_OK(semctl(id, 0, IPC_RMID));
}

/* SEM_UNDO: a process's adjustments are undone when it exits, kept across
 * exec, not inherited by fork, and forgotten by SETVAL. */
static void test_undo(void) {
    int id = semget(IPC_PRIVATE, 2, 0600);
    CHECK_OK(semctl(id, 0, SETVAL, (union semun){.val = 5}));
    pid_t pid = fork();
    if (pid == 0) {
        if (op(id, 0, -3, SEM_UNDO) != 0) _exit(1);
        if (op(id, 1, 2, SEM_UNDO) != 0) _exit(2);
        if (op(id, 1, 1, 0) != 0) _exit(3);
        /* A fork's child has no adjustments of its own. */
        pid_t grandchild = fork();
        if (grandchild == 0) _exit(0);
        waitpid(grandchild, NULL, 0);
        if (val(id, 0) != 2 || val(id, 1) != 3) _exit(4);
        _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(val(id, 0) == 5);
    CHECK(val(id, 1) == 1);
    CHECK(semctl(id, 0, GETPID) == pid);

    /* Clamped at zero: the value went below what the undo takes back. */
    pid = fork();
    if (pid == 0) {
        if (op(id, 1, 4, SEM_UNDO) != 0) _exit(1);
        /* 5 now; others take 3 of them. */
        if (op(id, 1, -3, 0) != 0) _exit(2);
        _exit(0);
    }
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(val(id, 1) == 0);

    /* SETVAL forgets the adjustment. */
    pid = fork();
    if (pid == 0) {
        if (op(id, 0, -1, SEM_UNDO) != 0) _exit(1);
        if (semctl(id, 0, SETVAL, (union semun){.val = 9}) != 0) _exit(2);
        _exit(0);
    }
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(val(id, 0) == 9);

    /* Adjustments past SEMAEM fail with ERANGE. */
    CHECK_OK(semctl(id, 0, SETVAL, (union semun){.val = 0}));
    CHECK_OK(op(id, 0, 32767, SEM_UNDO));
    CHECK_OK(op(id, 0, -32767, SEM_UNDO));
    CHECK_OK(semctl(id, 0, IPC_RMID));
}

/* Permissions: an unprivileged user is held to the mode. */
static void test_perms(void) {
    int shared = semget(IPC_PRIVATE, 1, 0666);
    pid_t pid = fork();
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(1);
        if (geteuid() != 0) {
            /* Another's set: usable by its mode, but only the owner or
             * creator changes or removes it. */
            struct semid_ds theirs;
            CHECK_OK(op(shared, 0, 1, 0));
            CHECK_OK(semctl(shared, 0, IPC_STAT, (union semun){.buf = &theirs}));
            CHECK_ERR(semctl(shared, 0, IPC_SET, (union semun){.buf = &theirs}), EPERM);
            CHECK_ERR(semctl(shared, 0, IPC_RMID), EPERM);
        }
        key_t key = run_key(2);
        int id = semget(key, 1, IPC_CREAT | IPC_EXCL | 0400);
        CHECK(id >= 0);
        CHECK(semget(key, 1, 0400) == id);
        CHECK_ERR(semget(key, 1, 0600), EACCES);
        CHECK(val(id, 0) == 0);
        CHECK_ERR(op(id, 0, 1, 0), EACCES);
        CHECK_ERR(semctl(id, 0, SETVAL, (union semun){.val = 1}), EACCES);
        CHECK(op(id, 0, 0, 0) == 0);
        struct semid_ds ds;
        CHECK_OK(semctl(id, 0, IPC_STAT, (union semun){.buf = &ds}));
        ds.sem_perm.mode = 0;
        CHECK_OK(semctl(id, 0, IPC_SET, (union semun){.buf = &ds}));
        CHECK_ERR(semctl(id, 0, IPC_STAT, (union semun){.buf = &ds}), EACCES);
        CHECK_ERR(val(id, 0), EACCES);
        CHECK_OK(semctl(id, 0, IPC_RMID));
        _exit(t_failures ? 2 : 0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_OK(semctl(shared, 0, IPC_RMID));
}

static void test_info(void) {
    struct seminfo info;
    int id = semget(IPC_PRIVATE, 4, 0600);
    CHECK(semctl(0, 0, IPC_INFO, (union semun){.__buf = &info}) >= 0);
    CHECK(info.semmsl == 32000 && info.semopm == 500 && info.semmni == 32000);
    CHECK(info.semvmx == 32767 && info.semaem == 32767);
    CHECK(semctl(0, 0, SEM_INFO, (union semun){.__buf = &info}) >= 0);
    CHECK(info.semusz >= 1 && info.semaem >= 4);
    int max = semctl(0, 0, SEM_INFO, (union semun){.__buf = &info});
    /* SEM_STAT takes an index and answers the id. */
    int found = 0;
    for (int i = 0; i <= max; i++) {
        struct semid_ds ds;
        int r = semctl(i, 0, SEM_STAT, (union semun){.buf = &ds});
        if (r == id) found = ds.sem_nsems == 4;
    }
    CHECK(found);
    CHECK_OK(semctl(id, 0, IPC_RMID));
}

int main(void) {
    test_get();
    test_values();
    test_blocking();
    test_eintr();
    test_undo();
    test_perms();
    test_info();
    return done();
}
