/* The calls a platform may answer without the kernel (getpid, gettid,
 * getppid, getuid, geteuid, getgid, getegid), made by raw syscall and
 * checked against what other calls say: the fork return value, the
 * parent's pid sent through a pipe, /proc/self/stat and
 * /proc/thread-self/stat, getresuid and getresgid. In the first process,
 * a forked child, threads, after exec (also from a thread, which takes the
 * process's id), after setresuid/setresgid (as root), after setuid while
 * another thread polls geteuid, and in a child polling getppid while its
 * parent exits (it must see the subreaper that takes it in). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

static long sys(long nr) { return syscall(nr); }

/* The first field and the ppid field of a /proc stat file. */
static void stat_ids(const char *path, long *id, long *ppid) {
    char buf[512] = {0};
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (!f) return;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    *id = strtol(buf, NULL, 10);
    char *close_paren = strrchr(buf, ')');
    CHECK(close_paren != NULL);
    char state;
    CHECK(close_paren && sscanf(close_paren + 1, " %c %ld", &state, ppid) == 2);
}

/* Every fast-path call against the slow sources. */
static void check_ids(void) {
    long pid = -1, ppid = -1, tid = -1, ignored;
    stat_ids("/proc/self/stat", &pid, &ppid);
    stat_ids("/proc/thread-self/stat", &tid, &ignored);
    CHECK(sys(SYS_getpid) == pid);
    CHECK(sys(SYS_getppid) == ppid);
    CHECK(sys(SYS_gettid) == tid);
    uid_t ru, eu, su;
    gid_t rg, eg, sg;
    CHECK_OK(getresuid(&ru, &eu, &su));
    CHECK_OK(getresgid(&rg, &eg, &sg));
    CHECK(sys(SYS_getuid) == (long)ru);
    CHECK(sys(SYS_geteuid) == (long)eu);
    CHECK(sys(SYS_getgid) == (long)rg);
    CHECK(sys(SYS_getegid) == (long)eg);
}

static int child_status(pid_t pid) {
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The image an exec starts: its ids must be those before the exec. */
static int after_exec(char **argv) {
    long pid = strtol(argv[2], NULL, 10), ppid = strtol(argv[3], NULL, 10);
    check_ids();
    CHECK(sys(SYS_getpid) == pid);
    CHECK(sys(SYS_gettid) == pid);
    CHECK(sys(SYS_getppid) == ppid);
    return t_failures ? 1 : 0;
}

static void exec_self(void) {
    char pid[32], ppid[32];
    snprintf(pid, sizeof pid, "%ld", sys(SYS_getpid));
    snprintf(ppid, sizeof ppid, "%ld", sys(SYS_getppid));
    char *argv[] = {"fast_ids", "after-exec", pid, ppid, NULL};
    execv("/proc/self/exe", argv);
    _exit(99);
}

static void *thread_ids(void *main_tid) {
    check_ids();
    CHECK(sys(SYS_gettid) != (long)(intptr_t)main_tid);
    return NULL;
}

static void *thread_exec(void *unused) {
    (void)unused;
    exec_self();
    return NULL;
}

static volatile int euid_changed;

static void *poll_euid(void *unused) {
    (void)unused;
    while (sys(SYS_geteuid) == 0) {
    }
    euid_changed = 1;
    check_ids();
    return NULL;
}

/* A child that polls getppid while its parent exits. */
static void orphan_polls_getppid(void) {
    CHECK_OK(prctl(PR_SET_CHILD_SUBREAPER, 1));
    int report[2];
    CHECK_OK(pipe(report));
    pid_t middle = fork();
    if (middle == 0) {
        int ready[2];
        if (pipe(ready) != 0) _exit(1);
        pid_t me = (pid_t)sys(SYS_getpid);
        pid_t g = fork();
        if (g == 0) {
            long first = sys(SYS_getppid);
            (void)!write(ready[1], "r", 1);
            long now;
            while ((now = sys(SYS_getppid)) == me) {
            }
            long msg[2] = {first, now};
            (void)!write(report[1], msg, sizeof msg);
            _exit(0);
        }
        char c;
        (void)!read(ready[0], &c, 1);
        _exit(0);
    }
    close(report[1]);
    CHECK(child_status(middle) == 0);
    long msg[2] = {0, 0};
    CHECK(read(report[0], msg, sizeof msg) == sizeof msg);
    CHECK(msg[0] == middle);
    CHECK(msg[1] == sys(SYS_getpid));
    /* The orphan is ours now. */
    int st;
    CHECK(wait(&st) > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(report[0]);
}

int main(int argc, char **argv) {
    if (argc >= 4 && strcmp(argv[1], "after-exec") == 0) return after_exec(argv);
    check_ids();

    /* fork: the child's answers are its own, its parent's ours. */
    int p[2];
    CHECK_OK(pipe(p));
    pid_t child = fork();
    if (child == 0) {
        check_ids();
        long msg[3] = {sys(SYS_getpid), sys(SYS_gettid), sys(SYS_getppid)};
        (void)!write(p[1], msg, sizeof msg);
        _exit(t_failures ? 1 : 0);
    }
    long msg[3] = {0, 0, 0};
    CHECK(read(p[0], msg, sizeof msg) == sizeof msg);
    CHECK(msg[0] == child && msg[1] == child);
    CHECK(msg[2] == sys(SYS_getpid));
    CHECK(child_status(child) == 0);
    close(p[0]);
    close(p[1]);

    /* Threads. */
    pthread_t t[4];
    for (int i = 0; i < 4; i++) CHECK(pthread_create(&t[i], NULL, thread_ids, (void *)(intptr_t)sys(SYS_gettid)) == 0);
    for (int i = 0; i < 4; i++) CHECK(pthread_join(t[i], NULL) == 0);

    /* exec from the first thread and from another one. */
    child = fork();
    if (child == 0) exec_self();
    CHECK(child_status(child) == 0);
    child = fork();
    if (child == 0) {
        pthread_t e;
        if (pthread_create(&e, NULL, thread_exec, NULL) != 0) _exit(98);
        pthread_join(e, NULL);
        _exit(97);
    }
    CHECK(child_status(child) == 0);

    /* New ids, in the process that set them and in a thread polling. */
    if (sys(SYS_geteuid) == 0) {
        child = fork();
        if (child == 0) {
            CHECK_OK(syscall(SYS_setresgid, 2001, 2002, 2003));
            CHECK_OK(syscall(SYS_setresuid, 1001, 1002, 1003));
            check_ids();
            CHECK(sys(SYS_getuid) == 1001 && sys(SYS_geteuid) == 1002);
            CHECK(sys(SYS_getgid) == 2001 && sys(SYS_getegid) == 2002);
            _exit(t_failures ? 1 : 0);
        }
        CHECK(child_status(child) == 0);
        child = fork();
        if (child == 0) {
            pthread_t poller;
            if (pthread_create(&poller, NULL, poll_euid, NULL) != 0) _exit(98);
            CHECK_OK(setuid(1001));
            pthread_join(poller, NULL);
            CHECK(euid_changed);
            check_ids();
            _exit(t_failures ? 1 : 0);
        }
        CHECK(child_status(child) == 0);
    }

    orphan_polls_getppid();
    return done();
}
