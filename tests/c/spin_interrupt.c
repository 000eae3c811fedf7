/* A signal reaches a thread that never enters the kernel by itself: one
 * spinning in user code, one calling getpid in a loop (which a platform
 * may answer without the kernel). Each must run its handler and stop. */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "t.h"

static volatile sig_atomic_t got[2];
static volatile int spinning[2];

static void on_usr1(int sig) {
    (void)sig;
    got[0] = 1;
}

static void on_usr2(int sig) {
    (void)sig;
    got[1] = 1;
}

static void *spin_user(void *unused) {
    (void)unused;
    spinning[0] = 1;
    while (!got[0]) {
    }
    return NULL;
}

static void *spin_getpid(void *unused) {
    (void)unused;
    spinning[1] = 1;
    while (!got[1]) syscall(SYS_getpid);
    return NULL;
}

int main(void) {
    CHECK(signal(SIGUSR1, on_usr1) != SIG_ERR);
    CHECK(signal(SIGUSR2, on_usr2) != SIG_ERR);
    pthread_t t[2];
    CHECK(pthread_create(&t[0], NULL, spin_user, NULL) == 0);
    CHECK(pthread_create(&t[1], NULL, spin_getpid, NULL) == 0);
    while (!spinning[0] || !spinning[1]) {
    }
    CHECK(pthread_kill(t[0], SIGUSR1) == 0);
    CHECK(pthread_kill(t[1], SIGUSR2) == 0);
    CHECK(pthread_join(t[0], NULL) == 0);
    CHECK(pthread_join(t[1], NULL) == 0);
    CHECK(got[0] && got[1]);
    return done();
}
