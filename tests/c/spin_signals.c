/* Signals reach a process while it spins in its own code, never entering
 * the kernel: a handled one runs its handler and the loop ends; one whose
 * default action ends the process (SIGTERM, SIGKILL) ends it, and its
 * parent's wait sees that. */
#include <signal.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

static volatile sig_atomic_t alarms;

static void on_alarm(int sig) {
    (void)sig;
    alarms++;
}

/* A child that tells its parent it runs, then spins for ever. */
static pid_t spinning_child(void) {
    int ready[2];
    CHECK_OK(pipe(ready));
    pid_t pid = fork();
    if (pid == 0) {
        close(ready[0]);
        (void)!write(ready[1], "x", 1);
        for (;;) {
        }
    }
    close(ready[1]);
    char c;
    CHECK(read(ready[0], &c, 1) == 1);
    close(ready[0]);
    return pid;
}

int main(void) {
    CHECK(signal(SIGALRM, on_alarm) != SIG_ERR);
    struct itimerval every = {{0, 10000}, {0, 10000}};
    CHECK_OK(setitimer(ITIMER_REAL, &every, NULL));
    while (alarms < 3) {
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    CHECK_OK(setitimer(ITIMER_REAL, &off, NULL));
    printf("handled %d alarms while spinning\n", alarms >= 3 ? 3 : alarms);

    const int sigs[] = {SIGTERM, SIGKILL};
    for (int i = 0; i < 2; i++) {
        pid_t pid = spinning_child();
        CHECK_OK(kill(pid, sigs[i]));
        int st = 0;
        CHECK(waitpid(pid, &st, 0) == pid);
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == sigs[i]);
        printf("spinning child ended by signal %d\n", WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    }
    return done();
}
