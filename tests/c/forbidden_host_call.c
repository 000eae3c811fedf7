/* Makes the system call that cordon's tests can turn into a host system
 * call the sentry's seccomp filter forbids (number 0xbadca11, which no
 * Linux system call has), from a second thread while the first waits.
 * Natively, and in a sandbox not set up for that test, the number is
 * unknown and fails with ENOSYS: the program says so and exits 0. A
 * sandbox whose sentry made the host call unconfined would answer with
 * that call's error instead. */
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "t.h"

#define TEST_FORBIDDEN_HOST_CALL 0x0badca11

static void *call(void *arg) {
    long r = syscall(TEST_FORBIDDEN_HOST_CALL);
    *(int *)arg = r == -1 ? errno : 0;
    return NULL;
}

int main(void) {
    int err = -1;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, call, &err) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    printf("system call %#x: %s\n", TEST_FORBIDDEN_HOST_CALL, err == ENOSYS ? "ENOSYS" : strerror(err));
    CHECK(err == ENOSYS);
    return done();
}
