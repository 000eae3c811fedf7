/* execve from a multi-threaded process: every other thread dies, the new
 * program runs as the only thread with the process's pid (also when a
 * non-leader thread calls execve), close-on-exec descriptors are closed,
 * handled signals are reset while ignored ones stay ignored, the signal
 * mask and pending signals survive. The program re-executes itself with
 * "probe PID" to look at what it became. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

/* The number after `key` in /proc/self/status, or -1. */
static long status_field(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == ':') v = strtol(line + n + 1, NULL, 10);
    fclose(f);
    return v;
}

static void *nothing(void *arg) { return arg; }

static int probe(char **argv) {
    pid_t expected = atoi(argv[2]);
    int keep_fd = atoi(argv[3]), cloexec_fd = atoi(argv[4]);
    CHECK(getpid() == expected);
    CHECK(syscall(SYS_gettid) == getpid());
    CHECK(status_field("Threads") == 1);
    CHECK(fcntl(keep_fd, F_GETFD) == 0);
    CHECK_ERR(fcntl(cloexec_fd, F_GETFD), EBADF);
    struct sigaction sa;
    sigaction(SIGUSR1, NULL, &sa);
    CHECK(sa.sa_handler == SIG_DFL); /* was handled */
    sigaction(SIGUSR2, NULL, &sa);
    CHECK(sa.sa_handler == SIG_IGN); /* stays ignored */
    sigset_t mask, pending;
    sigprocmask(SIG_BLOCK, NULL, &mask);
    CHECK(sigismember(&mask, SIGHUP));
    sigpending(&pending);
    CHECK(sigismember(&pending, SIGHUP));
    /* Still able to make threads of its own. */
    pthread_t t;
    CHECK(pthread_create(&t, NULL, nothing, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    /* Exit code: failures, so the parent sees them. */
    return t_failures;
}

static void on_usr1(int sig) {}

static char *self;
static char pidbuf[16], keepbuf[16], cloexecbuf[16];
static int keep_fd, cloexec_fd;
static volatile int ready;

static void do_exec(void) {
    snprintf(pidbuf, sizeof pidbuf, "%d", getpid());
    snprintf(keepbuf, sizeof keepbuf, "%d", keep_fd);
    snprintf(cloexecbuf, sizeof cloexecbuf, "%d", cloexec_fd);
    char *args[] = {self, "probe", pidbuf, keepbuf, cloexecbuf, NULL};
    execv(self, args);
    _exit(100);
}

static void *spin(void *arg) {
    __atomic_add_fetch(&ready, 1, __ATOMIC_SEQ_CST);
    for (;;) sched_yield();
    return NULL;
}
static void *sleeper(void *arg) {
    __atomic_add_fetch(&ready, 1, __ATOMIC_SEQ_CST);
    for (;;) pause();
    return NULL;
}
static void *execer(void *arg) {
    while (__atomic_load_n(&ready, __ATOMIC_SEQ_CST) < 4) sched_yield();
    do_exec();
    return NULL;
}

/* A child process with 4 threads (spinning and sleeping) in which the
 * main thread (`from_main`) or a further thread calls execve. */
static void run_case(int from_main) {
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGUSR1, on_usr1);
        signal(SIGUSR2, SIG_IGN);
        sigset_t hup;
        sigemptyset(&hup);
        sigaddset(&hup, SIGHUP);
        sigprocmask(SIG_BLOCK, &hup, NULL);
        kill(getpid(), SIGHUP);
        pthread_t t;
        for (int i = 0; i < 2; i++) pthread_create(&t, NULL, spin, NULL);
        for (int i = 0; i < 2; i++) pthread_create(&t, NULL, sleeper, NULL);
        if (from_main) {
            while (__atomic_load_n(&ready, __ATOMIC_SEQ_CST) < 4) sched_yield();
            do_exec();
        }
        pthread_create(&t, NULL, execer, NULL);
        for (;;) pause();
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fprintf(stderr, "case %d: status %#x\n", from_main, st);
}

int main(int argc, char **argv) {
    if (argc > 4 && strcmp(argv[1], "probe") == 0) return probe(argv);
    self = argv[0];
    keep_fd = open("/dev/null", O_RDONLY);
    cloexec_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    CHECK(keep_fd >= 0 && cloexec_fd >= 0);
    run_case(1);
    run_case(0);
    /* The parent is single-threaded and sees one thread in itself. */
    CHECK(status_field("Threads") == 1);
    return done();
}
