/* Orphans and prctl: an orphan's parent changes away from the dead parent
 * (to whatever reaps orphans), or to the nearest PR_SET_CHILD_SUBREAPER
 * ancestor, which then waits for it; PR_SET_PDEATHSIG delivered when the
 * parent process dies and when the parent *thread* that created the child
 * exits, with the dead parent's pid, and cleared by fork; PR_SET_NAME and
 * PR_GET_NAME per thread (truncated to 15 bytes, the main thread's shown
 * in /proc/self/comm); PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS;
 * getrusage and times for the process, its threads and its children. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/times.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t.h"

static int rd(int fd, void *buf, size_t n) { return read(fd, buf, n) == (ssize_t)n; }

/* Forks a middle process that forks a grandchild and exits at once; the
 * grandchild reports its parent before and after. */
static void orphan(int out, pid_t *middle_out) {
    pid_t middle = fork();
    if (middle == 0) {
        int go[2], ready[2];
        if (pipe(go) != 0 || pipe(ready) != 0) _exit(1);
        pid_t g = fork();
        if (g == 0) {
            close(go[1]);
            pid_t before = getppid();
            (void)!write(ready[1], "r", 1);
            char c;
            (void)!read(go[0], &c, 1); /* EOF: the middle process is gone */
            pid_t after;
            for (int i = 0; i < 5000 && (after = getppid()) == before; i++) usleep(1000);
            pid_t msg[3] = {getpid(), before, after};
            (void)!write(out, msg, sizeof msg);
            _exit(0);
        }
        char c;
        (void)!read(ready[0], &c, 1);
        _exit(0); /* closes go[1] */
    }
    *middle_out = middle;
}

static volatile int pdeath_sig, pdeath_code, pdeath_pid;
static void on_pdeath(int sig, siginfo_t *si, void *uc) {
    pdeath_sig = sig;
    pdeath_code = si->si_code;
    pdeath_pid = si->si_pid;
}

/* A child that asks for SIGUSR1 at its parent's death and reports it. */
static void pdeath_child(int ready, int out) {
    struct sigaction sa = {0};
    sa.sa_sigaction = on_pdeath;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGUSR1, &sa, NULL);
    pid_t parent = getppid();
    prctl(PR_SET_PDEATHSIG, SIGUSR1);
    int sig = -1;
    prctl(PR_GET_PDEATHSIG, &sig);
    /* A child of ours starts without it. */
    pid_t c = fork();
    if (c == 0) {
        int s2 = -1;
        prctl(PR_GET_PDEATHSIG, &s2);
        _exit(s2 == 0 ? 0 : 1);
    }
    int st;
    waitpid(c, &st, 0);
    (void)!write(ready, "r", 1);
    for (int i = 0; i < 5000 && !pdeath_sig; i++) usleep(1000);
    int msg[5] = {sig, pdeath_sig, pdeath_code, pdeath_pid == parent, WIFEXITED(st) && WEXITSTATUS(st) == 0};
    (void)!write(out, msg, sizeof msg);
    _exit(0);
}

static int thread_ready, thread_out;
static void *thread_forks(void *arg) {
    pid_t c = fork();
    if (c == 0) pdeath_child(thread_ready, thread_out);
    char r;
    (void)!read(*(int *)arg, &r, 1);
    return NULL; /* the creating thread exits; the process lives on */
}

static void *thread_names(void *arg) {
    prctl(PR_SET_NAME, "worker-thread");
    char name[16] = {0};
    prctl(PR_GET_NAME, name);
    return (void *)(long)(strcmp(name, "worker-thread") == 0);
}

static volatile unsigned long spin_sink;
/* Uses `ms` milliseconds of this thread's CPU time. */
static void burn_ms(int ms) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    do {
        for (int i = 0; i < 100000; i++) spin_sink += i;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    } while ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < ms);
}

static long tv_ms(struct timeval a, struct timeval b) {
    return (a.tv_sec + b.tv_sec) * 1000 + (a.tv_usec + b.tv_usec) / 1000;
}

int main(void) {
    int p[2];
    CHECK_OK(pipe(p));
    pid_t msg[3], middle;
    int st;

    /* Without a subreaper: the orphan's parent changes away from the dead
     * middle process (to pid 1 or a subreaper outside the test). */
    orphan(p[1], &middle);
    CHECK(waitpid(middle, &st, 0) == middle);
    CHECK(rd(p[0], msg, sizeof msg));
    CHECK(msg[1] == middle && msg[2] != middle && msg[2] > 0);

    /* With this process a subreaper, the orphan comes here and is ours
     * to wait for. */
    int on = -1;
    CHECK_OK(prctl(PR_GET_CHILD_SUBREAPER, &on));
    CHECK(on == 0);
    CHECK_OK(prctl(PR_SET_CHILD_SUBREAPER, 1));
    CHECK_OK(prctl(PR_GET_CHILD_SUBREAPER, &on));
    CHECK(on == 1);
    orphan(p[1], &middle);
    CHECK(waitpid(middle, &st, 0) == middle);
    CHECK(rd(p[0], msg, sizeof msg));
    CHECK(msg[1] == middle && msg[2] == getpid());
    CHECK(waitpid(msg[0], &st, 0) == msg[0] && WIFEXITED(st));
    /* Two levels down: the nearest subreaper ancestor is this process,
     * though the orphan's grandparent is still alive. */
    pid_t mid2 = fork();
    if (mid2 == 0) {
        pid_t m;
        orphan(p[1], &m);
        waitpid(m, NULL, 0);
        sleep(1); /* alive while the orphan looks */
        _exit(0);
    }
    CHECK(rd(p[0], msg, sizeof msg));
    CHECK(waitpid(mid2, &st, 0) == mid2);
    CHECK(msg[2] == getpid());
    CHECK(waitpid(msg[0], &st, 0) == msg[0]);

    /* PDEATHSIG when the parent process dies. */
    int ready[2];
    CHECK_OK(pipe(ready));
    middle = fork();
    if (middle == 0) {
        pid_t c = fork();
        if (c == 0) pdeath_child(ready[1], p[1]);
        char r;
        (void)!read(ready[0], &r, 1);
        _exit(0);
    }
    CHECK(waitpid(middle, &st, 0) == middle);
    int res[5];
    CHECK(rd(p[0], res, sizeof res));
    CHECK(res[0] == SIGUSR1 && res[1] == SIGUSR1 && res[2] == SI_USER && res[3] == 1 && res[4] == 1);
    while (waitpid(-1, &st, WNOHANG) > 0) {
    }
    /* PDEATHSIG when the creating thread exits, the process staying. */
    middle = fork();
    if (middle == 0) {
        thread_ready = ready[1];
        thread_out = p[1];
        pthread_t t;
        pthread_create(&t, NULL, thread_forks, &ready[0]);
        pthread_join(t, NULL);
        sleep(5); /* still alive when the child gets its signal */
        _exit(0);
    }
    CHECK(rd(p[0], res, sizeof res));
    CHECK(res[1] == SIGUSR1 && res[2] == SI_USER && res[3] == 1);
    kill(middle, SIGKILL);
    waitpid(middle, &st, 0);
    while (waitpid(-1, &st, WNOHANG) > 0) {
    }
    CHECK_ERR(prctl(PR_SET_PDEATHSIG, 65), EINVAL);

    /* Names: truncated to 15 bytes; per thread; /proc/self/comm. */
    char name[32] = {0};
    CHECK_OK(prctl(PR_SET_NAME, "a-name-that-is-much-too-long"));
    CHECK_OK(prctl(PR_GET_NAME, name));
    CHECK(strcmp(name, "a-name-that-is-") == 0);
    int fd = open("/proc/self/comm", O_RDONLY);
    char comm[32] = {0};
    CHECK(fd >= 0 && read(fd, comm, sizeof comm) == 16);
    CHECK(strcmp(comm, "a-name-that-is-\n") == 0);
    close(fd);
    pthread_t t;
    void *ok;
    pthread_create(&t, NULL, thread_names, NULL);
    pthread_join(t, &ok);
    CHECK(ok == (void *)1);
    memset(name, 0, sizeof name);
    prctl(PR_GET_NAME, name);
    CHECK(strcmp(name, "a-name-that-is-") == 0);
    /* A forked child starts with its parent's name. */
    pid_t c = fork();
    if (c == 0) {
        char n2[16] = {0};
        prctl(PR_GET_NAME, n2);
        _exit(strcmp(n2, "a-name-that-is-") == 0 ? 0 : 1);
    }
    CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0);

    /* Dumpable and no_new_privs. */
    CHECK(prctl(PR_GET_DUMPABLE) == 1);
    CHECK_OK(prctl(PR_SET_DUMPABLE, 0));
    CHECK(prctl(PR_GET_DUMPABLE) == 0);
    CHECK_OK(prctl(PR_SET_DUMPABLE, 1));
    CHECK_ERR(prctl(PR_SET_DUMPABLE, 2), EINVAL);
    c = fork();
    if (c == 0) {
        int before = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) _exit(1);
        int after = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0);
        pid_t g = fork();
        if (g == 0) _exit(prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1 ? 0 : 1);
        int gs;
        waitpid(g, &gs, 0);
        _exit(before == 0 && after == 1 && WIFEXITED(gs) && WEXITSTATUS(gs) == 0 ? 0 : 2);
    }
    CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK_ERR(prctl(PR_SET_NO_NEW_PRIVS, 2, 0, 0, 0), EINVAL);
    CHECK_ERR(prctl(0x7fff), EINVAL);

    /* CPU time: this process, this thread, and a reaped child. */
    struct rusage ru0, ru1;
    struct tms tm0, tm1;
    CHECK_OK(getrusage(RUSAGE_SELF, &ru0));
    clock_t e0 = times(&tm0);
    burn_ms(300);
    CHECK_OK(getrusage(RUSAGE_SELF, &ru1));
    clock_t e1 = times(&tm1);
    long used = tv_ms(ru1.ru_utime, ru1.ru_stime) - tv_ms(ru0.ru_utime, ru0.ru_stime);
    CHECK(used >= 200 && used < 5000);
    CHECK(ru1.ru_maxrss > 0);
    long ticks = sysconf(_SC_CLK_TCK);
    long tused = (tm1.tms_utime + tm1.tms_stime - tm0.tms_utime - tm0.tms_stime) * 1000 / ticks;
    CHECK(tused >= 200 && tused < 5000);
    CHECK(e1 - e0 >= 300 * ticks / 1000 - 2);
    struct rusage th;
    CHECK_OK(getrusage(RUSAGE_THREAD, &th));
    CHECK(tv_ms(th.ru_utime, th.ru_stime) >= 250);
    struct rusage ch0, ch1, w4;
    CHECK_OK(getrusage(RUSAGE_CHILDREN, &ch0));
    c = fork();
    if (c == 0) {
        burn_ms(300);
        _exit(0);
    }
    CHECK(wait4(c, &st, 0, &w4) == c);
    CHECK(tv_ms(w4.ru_utime, w4.ru_stime) >= 250);
    CHECK_OK(getrusage(RUSAGE_CHILDREN, &ch1));
    CHECK(tv_ms(ch1.ru_utime, ch1.ru_stime) - tv_ms(ch0.ru_utime, ch0.ru_stime) >= 250);
    CHECK(times(&tm1) != (clock_t)-1);
    CHECK((tm1.tms_cutime + tm1.tms_cstime) * 1000 / ticks >= 250);
    CHECK_ERR(getrusage(99, &ru0), EINVAL);
    return done();
}
