/* System V message queues: msgget's key and flag rules, msgsnd and msgrcv
 * with every kind of msgtyp, MSG_EXCEPT, MSG_NOERROR, E2BIG, IPC_NOWAIT,
 * MSG_COPY, a full queue blocking a sender, a receiver woken by a sender
 * in another process, EIDRM and EINTR, and msgctl's commands. */
#include <sched.h>
#include <signal.h>
#include <sys/ipc.h>
#include <sys/msg.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t.h"

#ifndef MSG_COPY
#define MSG_COPY 040000
#endif

struct m {
    long mtype;
    char text[64];
};

static int send(int id, long type, const char *text, int flags) {
    struct m m = {.mtype = type};
    size_t n = strlen(text);
    memcpy(m.text, text, n);
    return msgsnd(id, &m, n, flags);
}

/* Receives into a string; returns its length. */
static long recv_str(int id, size_t size, long type, int flags, long *got_type, char *out) {
    struct m m;
    memset(&m, 0, sizeof m);
    long n = msgrcv(id, &m, size, type, flags);
    if (n >= 0) {
        memcpy(out, m.text, n);
        out[n] = 0;
        if (got_type) *got_type = m.mtype;
    }
    return n;
}

static key_t run_key(int n) { return (key_t)(0x3e000000 | ((getpid() & 0xffff) << 8) | n); }

static void test_get(void) {
    key_t key = run_key(1);
    CHECK_ERR(msgget(key, 0600), ENOENT);
    int id = msgget(key, IPC_CREAT | 0640);
    CHECK(id >= 0);
    CHECK(msgget(key, 0) == id);
    CHECK_ERR(msgget(key, IPC_CREAT | IPC_EXCL), EEXIST);
    struct msqid_ds ds;
    CHECK_OK(msgctl(id, IPC_STAT, &ds));
    CHECK(ds.msg_perm.__key == key && (ds.msg_perm.mode & 0777) == 0640);
    CHECK(ds.msg_qnum == 0 && ds.msg_cbytes == 0 && ds.msg_qbytes == 16384);
    CHECK(ds.msg_lspid == 0 && ds.msg_lrpid == 0 && ds.msg_stime == 0);
    CHECK(ds.msg_perm.uid == geteuid() && ds.msg_perm.cgid == getegid());
    CHECK_OK(msgctl(id, IPC_RMID, NULL));
    CHECK_ERR(msgctl(id, IPC_STAT, &ds), EINVAL);
    CHECK_ERR(msgget(key, 0), ENOENT);
    CHECK_ERR(msgctl(-1, IPC_STAT, &ds), EINVAL);
}

static void test_types(void) {
    int id = msgget(IPC_PRIVATE, 0600);
    char buf[80];
    long type;
    CHECK_OK(send(id, 3, "three", 0));
    CHECK_OK(send(id, 1, "one", 0));
    CHECK_OK(send(id, 2, "two", 0));
    CHECK_OK(send(id, 1, "uno", 0));
    CHECK_OK(send(id, 5, "five", 0));
    struct msqid_ds ds;
    CHECK_OK(msgctl(id, IPC_STAT, &ds));
    CHECK(ds.msg_qnum == 5 && ds.msg_cbytes == 18 && ds.msg_lspid == getpid());
    CHECK(ds.msg_stime >= time(NULL) - 5);

    /* msgtyp 0: the first; > 0: the first of that type; < 0: the first of
     * the lowest type at most |msgtyp|; MSG_EXCEPT: the first of another. */
    CHECK(recv_str(id, 64, 2, 0, &type, buf) == 3 && strcmp(buf, "two") == 0 && type == 2);
    CHECK(recv_str(id, 64, 1, MSG_EXCEPT, &type, buf) == 5 && strcmp(buf, "three") == 0 && type == 3);
    CHECK(recv_str(id, 64, -4, 0, &type, buf) == 3 && strcmp(buf, "one") == 0 && type == 1);
    CHECK(recv_str(id, 64, -4, 0, &type, buf) == 3 && strcmp(buf, "uno") == 0);
    CHECK_ERR(recv_str(id, 64, -4, IPC_NOWAIT, &type, buf), ENOMSG);
    CHECK_ERR(recv_str(id, 64, 7, IPC_NOWAIT, &type, buf), ENOMSG);

    /* Too long: E2BIG and the message stays, unless MSG_NOERROR. */
    CHECK_ERR(recv_str(id, 2, 0, 0, &type, buf), E2BIG);
    CHECK(recv_str(id, 2, 0, MSG_NOERROR, &type, buf) == 2 && strcmp(buf, "fi") == 0 && type == 5);
    CHECK_OK(msgctl(id, IPC_STAT, &ds));
    CHECK(ds.msg_qnum == 0 && ds.msg_cbytes == 0 && ds.msg_lrpid == getpid());

    /* MSG_COPY: the message at an index, left in place. */
    CHECK_OK(send(id, 4, "a", 0));
    CHECK_OK(send(id, 6, "bb", 0));
    CHECK(recv_str(id, 64, 1, MSG_COPY | IPC_NOWAIT, &type, buf) == 2 && type == 6);
    CHECK_ERR(recv_str(id, 64, 2, MSG_COPY | IPC_NOWAIT, &type, buf), ENOMSG);
    CHECK_ERR(recv_str(id, 64, 0, MSG_COPY, &type, buf), EINVAL);
    CHECK_ERR(recv_str(id, 64, 0, MSG_COPY | MSG_EXCEPT | IPC_NOWAIT, &type, buf), EINVAL);
    CHECK_OK(msgctl(id, IPC_STAT, &ds));
    CHECK(ds.msg_qnum == 2);

    /* Empty messages count. */
    CHECK_OK(send(id, 9, "", 0));
    CHECK(recv_str(id, 64, 9, 0, &type, buf) == 0);

    /* Errors. */
    struct m m = {.mtype = 0};
    CHECK_ERR(msgsnd(id, &m, 1, 0), EINVAL);
    m.mtype = 1;
    CHECK_ERR(msgsnd(id, &m, 8193, 0), EINVAL);
    CHECK_ERR(msgsnd(id, &m, -1, 0), EINVAL);
    CHECK_ERR(msgsnd(id, (void *)8, 1, 0), EFAULT);
    CHECK_ERR(msgrcv(id, &m, -1, 0, 0), EINVAL);
    CHECK_ERR(msgrcv(-1, &m, 1, 0, 0), EINVAL);
    CHECK_ERR(msgsnd(-1, &m, 1, 0), EINVAL);
    CHECK_ERR(msgctl(id, 12345, &ds), EINVAL);
    CHECK_ERR(msgctl(id, IPC_STAT, (void *)8), EFAULT);
    CHECK_OK(msgctl(id, IPC_RMID, NULL));
}

static void on_alarm(int sig) {}

static void test_blocking(void) {
    int id = msgget(IPC_PRIVATE, 0600);
    char buf[80];
    long type;
    struct msqid_ds ds;
    /* A receiver in another process waits for the type it wants. */
    pid_t pid = fork();
    if (pid == 0) {
        char b[80];
        long t;
        if (recv_str(id, 64, 8, 0, &t, b) != 5 || strcmp(b, "eight") != 0) _exit(1);
        if (send(id, 20, "reply", 0) != 0) _exit(2);
        _exit(0);
    }
    CHECK_OK(send(id, 7, "seven", 0));
    CHECK_OK(send(id, 8, "eight", 0));
    CHECK(recv_str(id, 64, 20, 0, &type, buf) == 5 && strcmp(buf, "reply") == 0);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(recv_str(id, 64, 0, 0, &type, buf) == 5 && type == 7);

    /* A full queue: EAGAIN with IPC_NOWAIT, else the sender waits for
     * room. */
    CHECK_OK(msgctl(id, IPC_STAT, &ds));
    ds.msg_qbytes = 10;
    CHECK_OK(msgctl(id, IPC_SET, &ds));
    CHECK_OK(msgctl(id, IPC_STAT, &ds));
    CHECK(ds.msg_qbytes == 10);
    CHECK_OK(send(id, 1, "12345678", 0));
    CHECK_ERR(send(id, 1, "123", IPC_NOWAIT), EAGAIN);
    pid = fork();
    if (pid == 0) {
        if (send(id, 2, "123", 0) != 0) _exit(1);
        _exit(0);
    }
    CHECK(recv_str(id, 64, 1, 0, &type, buf) == 8);
    CHECK(recv_str(id, 64, 2, 0, &type, buf) == 3);
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);

    /* Interrupted with a handler: EINTR, SA_RESTART or not. The timer
     * repeats until one of its signals finds the call asleep. */
    struct sigaction sa = {.sa_handler = on_alarm, .sa_flags = SA_RESTART};
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval every = {{0, 2000}, {0, 2000}}, off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &every, NULL);
    CHECK_ERR(recv_str(id, 64, 0, 0, &type, buf), EINTR);
    CHECK_OK(send(id, 1, "1234567890", 0));
    CHECK_ERR(send(id, 1, "1", 0), EINTR);
    setitimer(ITIMER_REAL, &off, NULL);
    signal(SIGALRM, SIG_DFL);
    CHECK_OK(msgctl(id, IPC_RMID, NULL));

    /* Removing a queue fails a waiting receiver with EIDRM; a receiver
     * that comes after the removal finds no queue (EINVAL). Nothing says
     * when the child sleeps, so this goes on until a removal finds it
     * asleep. */
    int seen_idrm = 0;
    for (int i = 0; i < 200 && !seen_idrm; i++) {
        int q = msgget(IPC_PRIVATE, 0600);
        pid = fork();
        if (pid == 0) {
            char b[80];
            if (recv_str(q, 64, 0, 0, NULL, b) != -1) _exit(1);
            _exit(errno == EIDRM ? 0 : errno == EINVAL ? 2 : 3);
        }
        for (int y = 0; y < 50; y++) sched_yield();
        /* Counted once below: the number of rounds differs from run to
         * run. */
        if (msgctl(q, IPC_RMID, NULL) != 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) break;
        if (WEXITSTATUS(status) != 0 && WEXITSTATUS(status) != 2) break;
        seen_idrm = WEXITSTATUS(status) == 0;
    }
    CHECK(seen_idrm);
}

/* Permissions: the mode for sending and receiving, the owner or creator
 * for IPC_SET and IPC_RMID, CAP_SYS_RESOURCE to raise msg_qbytes past
 * MSGMNB. */
static void test_perms(void) {
    int shared = msgget(IPC_PRIVATE, 0666);
    pid_t pid = fork();
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(1);
        struct msqid_ds ds;
        if (geteuid() != 0) {
            /* Not its queue. */
            CHECK_OK(msgctl(shared, IPC_STAT, &ds));
            CHECK_ERR(msgctl(shared, IPC_SET, &ds), EPERM);
            CHECK_ERR(msgctl(shared, IPC_RMID, NULL), EPERM);
        }
        int id = msgget(IPC_PRIVATE, 0400);
        CHECK(id >= 0);
        CHECK_ERR(send(id, 1, "x", 0), EACCES);
        char buf[80];
        CHECK_ERR(recv_str(id, 64, 0, IPC_NOWAIT, NULL, buf), ENOMSG);
        CHECK_OK(msgctl(id, IPC_STAT, &ds));
        ds.msg_qbytes = 16385;
        CHECK_ERR(msgctl(id, IPC_SET, &ds), EPERM);
        ds.msg_qbytes = 100;
        ds.msg_perm.mode = 0;
        CHECK_OK(msgctl(id, IPC_SET, &ds));
        CHECK_ERR(msgctl(id, IPC_STAT, &ds), EACCES);
        CHECK_ERR(recv_str(id, 64, 0, IPC_NOWAIT, NULL, buf), EACCES);
        CHECK_OK(msgctl(id, IPC_RMID, NULL));
        _exit(t_failures ? 2 : 0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_OK(msgctl(shared, IPC_RMID, NULL));
}

int main(void) {
    test_get();
    test_types();
    test_perms();
    test_blocking();
    return done();
}
