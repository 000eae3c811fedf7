/* How threads end: pthread_join and return values; a raw clone thread with
 * CLONE_CHILD_CLEARTID whose tid word is cleared and woken at its exit;
 * set_tid_address; robust mutexes of a dead thread (EOWNERDEAD); exit()
 * from any thread ending the whole process; the main thread leaving with
 * pthread_exit while others go on; a fatal signal killing every thread. */
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t.h"

static long futex(volatile void *uaddr, int op, int val) {
    return syscall(SYS_futex, uaddr, op, val, NULL, NULL, 0);
}

static _Atomic int raw_ran;
static volatile pid_t raw_tid_seen;
static int raw_thread(void *arg) {
    raw_tid_seen = (pid_t)syscall(SYS_gettid);
    struct timespec ts = {0, 50 * 1000 * 1000};
    syscall(SYS_nanosleep, &ts, NULL);
    raw_ran = 1;
    return 0; /* glibc's clone wrapper then calls exit(2) */
}

static void *returns(void *arg) { return (void *)((intptr_t)arg + 1000); }
static void *exits(void *arg) {
    pthread_exit((void *)(intptr_t)77);
    return NULL;
}

static pthread_mutex_t robust;
static void *dies_holding(void *arg) {
    pthread_mutex_lock(&robust);
    return NULL; /* exits holding the mutex */
}

static void *exit_process(void *arg) {
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    exit(3);
}

static int pipefd[2];
static void *outlives_main(void *arg) {
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    /* The process is still here after the main thread left. */
    char msg[32];
    int n = snprintf(msg, sizeof msg, "%d", getpid());
    (void)!write(pipefd[1], msg, n);
    return NULL; /* the last thread: the process exits with 0 */
}

static void *blocks_forever(void *arg) {
    for (;;) pause();
    return NULL;
}

static int child_status(pid_t pid) {
    int st;
    if (waitpid(pid, &st, 0) != pid) return -1;
    return st;
}

int main(void) {
    /* Join values, from return and from pthread_exit. */
    pthread_t t;
    void *ret;
    CHECK(pthread_create(&t, NULL, returns, (void *)5) == 0);
    CHECK(pthread_join(t, &ret) == 0 && (intptr_t)ret == 1005);
    CHECK(pthread_create(&t, NULL, exits, NULL) == 0);
    CHECK(pthread_join(t, &ret) == 0 && (intptr_t)ret == 77);

    /* A raw clone thread: PARENT_SETTID writes its tid, CHILD_CLEARTID
     * clears the word at exit and wakes a futex waiter on it. */
    size_t stack_size = 64 * 1024;
    char *stack = mmap(NULL, stack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    static volatile pid_t tid_word;
    tid_word = -1;
    int flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM |
                CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID;
    pid_t tid = clone(raw_thread, stack + stack_size, flags, NULL, (pid_t *)&tid_word, NULL, (pid_t *)&tid_word);
    CHECK(tid > 0 && tid != getpid());
    pid_t seen_word = tid_word;
    CHECK(seen_word == tid || seen_word == 0);
    int waits = 0;
    for (pid_t v; (v = tid_word) != 0; waits++) {
        long r = futex(&tid_word, FUTEX_WAIT, v);
        CHECK(r == 0 || errno == EAGAIN || errno == EINTR);
    }
    CHECK(tid_word == 0);
    CHECK(raw_ran == 1);
    CHECK(raw_tid_seen == tid);
    /* The thread is gone (on Linux too the word is cleared a moment
     * before the thread is unhashed): signalling it fails. */
    for (int i = 0; i < 1000 && syscall(SYS_tgkill, getpid(), tid, 0) == 0; i++) usleep(1000);
    CHECK_ERR(syscall(SYS_tgkill, getpid(), tid, 0), ESRCH);

    /* set_tid_address returns the caller's tid. */
    static volatile pid_t dummy;
    CHECK(syscall(SYS_set_tid_address, &dummy) == syscall(SYS_gettid));

    /* A robust mutex whose owner died: EOWNERDEAD, then consistent. */
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(&robust, &ma);
    pthread_create(&t, NULL, dies_holding, NULL);
    pthread_join(t, NULL);
    CHECK(pthread_mutex_lock(&robust) == EOWNERDEAD);
    CHECK(pthread_mutex_consistent(&robust) == 0);
    CHECK(pthread_mutex_unlock(&robust) == 0);
    CHECK(pthread_mutex_lock(&robust) == 0);
    pthread_mutex_unlock(&robust);

    /* exit() in a second thread ends the process with its code, while the
     * main thread is blocked. */
    pid_t pid = fork();
    if (pid == 0) {
        pthread_create(&t, NULL, exit_process, NULL);
        for (;;) pause();
    }
    int st = child_status(pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3);

    /* The main thread leaves with pthread_exit; the process lives on
     * until its last thread ends. */
    CHECK_OK(pipe(pipefd));
    pid = fork();
    if (pid == 0) {
        pthread_create(&t, NULL, outlives_main, NULL);
        pthread_exit(NULL);
    }
    char buf[32] = {0};
    CHECK(read(pipefd[0], buf, sizeof buf - 1) > 0);
    CHECK(atoi(buf) == pid);
    st = child_status(pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);

    /* A fatal signal kills every thread. */
    pid = fork();
    if (pid == 0) {
        for (int i = 0; i < 4; i++) pthread_create(&t, NULL, blocks_forever, NULL);
        for (;;) pause();
    }
    struct timespec ts = {0, 50 * 1000 * 1000};
    nanosleep(&ts, NULL);
    kill(pid, SIGTERM);
    st = child_status(pid);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    /* Also when the signal is aimed at one thread. */
    pid = fork();
    if (pid == 0) {
        pthread_create(&t, NULL, blocks_forever, NULL);
        nanosleep(&ts, NULL);
        pthread_kill(t, SIGUSR1);
        for (;;) pause();
    }
    st = child_status(pid);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGUSR1);

    /* Many short-lived threads. */
    for (int i = 0; i < 200; i++) {
        CHECK(pthread_create(&t, NULL, returns, (void *)(intptr_t)i) == 0);
        CHECK(pthread_join(t, &ret) == 0 && (intptr_t)ret == i + 1000);
    }
    return done();
}
