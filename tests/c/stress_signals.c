/* Stress: the main thread sends SIGUSR1 to a thread that loops through
 * system calls N times (default 20000), each as soon as the handler of the
 * one before has counted it, so that most arrive while the thread is still
 * in that handler, with SIGUSR1 blocked, or on its way back through
 * rt_sigreturn. Every signal must be handled: one lost to a race between
 * the sender and the thread unblocking it leaves the sender waiting for
 * good. */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "t.h"

static volatile sig_atomic_t handled;
static volatile int stop;

static void on_usr1(int sig) {
    (void)sig;
    handled++;
}

static void *calls(void *arg) {
    int fd = *(int *)arg;
    long ppid = getppid(), wrong = 0;
    while (!stop) {
        if (syscall(SYS_getppid) != ppid)
            wrong++;
        if (write(fd, "x", 1) != 1)
            wrong++;
    }
    return (void *)wrong;
}

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 20000;
    struct sigaction sa = {0};
    sa.sa_handler = on_usr1;
    CHECK_OK(sigaction(SIGUSR1, &sa, NULL));
    int devnull = open("/dev/null", O_WRONLY);
    CHECK(devnull >= 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, calls, &devnull) == 0);
    for (long i = 0; i < rounds; i++) {
        sig_atomic_t before = handled;
        CHECK(pthread_kill(t, SIGUSR1) == 0);
        while (handled == before)
            sched_yield();
    }
    stop = 1;
    void *wrong;
    CHECK(pthread_join(t, &wrong) == 0);
    CHECK(wrong == NULL);
    CHECK(handled == rounds);
    printf("%ld signals handled\n", rounds);
    return done();
}
