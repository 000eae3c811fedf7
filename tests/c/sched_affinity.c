/* CPU affinity: sched_setaffinity and sched_getaffinity act on the thread
 * they name, refuse one that does not exist, and refuse a mask with none
 * of the machine's CPUs. */
#include "t.h"

#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int cpus;

static pthread_barrier_t started, checked;
static volatile pid_t other_tid;

static void *other_thread(void *arg) {
    (void)arg;
    other_tid = gettid();
    pthread_barrier_wait(&started);
    pthread_barrier_wait(&checked);
    return NULL;
}

int main(void) {
    cpus = sysconf(_SC_NPROCESSORS_ONLN);
    CHECK(cpus >= 1);
    cpu_set_t all, one, got;
    CHECK_OK(sched_getaffinity(0, sizeof all, &all));
    CHECK(CPU_COUNT(&all) >= 1);
    int first = 0;
    while (!CPU_ISSET(first, &all))
        first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);

    /* Only CPUs the machine lacks. */
    cpu_set_t none_here;
    CPU_ZERO(&none_here);
    CPU_SET(CPU_SETSIZE - 1, &none_here);
    CHECK_ERR(sched_setaffinity(0, sizeof none_here, &none_here), EINVAL);
    cpu_set_t empty;
    CPU_ZERO(&empty);
    CHECK_ERR(sched_setaffinity(0, sizeof empty, &empty), EINVAL);

    /* Threads that do not exist. */
    CHECK_ERR(sched_setaffinity(999999, sizeof one, &one), ESRCH);
    CHECK_ERR(sched_getaffinity(999999, sizeof got, &got), ESRCH);
    CHECK_ERR(sched_setaffinity(-1, sizeof one, &one), ESRCH);
    CHECK_ERR(sched_getaffinity(-1, sizeof got, &got), ESRCH);
    CHECK_ERR(syscall(SYS_sched_getaffinity, 0, 4, &got), EINVAL);

    /* A mask set is the one read back, for this thread only. */
    pthread_t th;
    pthread_barrier_init(&started, NULL, 2);
    pthread_barrier_init(&checked, NULL, 2);
    CHECK(pthread_create(&th, NULL, other_thread, NULL) == 0);
    pthread_barrier_wait(&started);
    CHECK_OK(sched_setaffinity(0, sizeof one, &one));
    CHECK_OK(sched_getaffinity(0, sizeof got, &got));
    CHECK(CPU_EQUAL(&got, &one));
    CHECK_OK(sched_getaffinity(other_tid, sizeof got, &got));
    CHECK(CPU_EQUAL(&got, &all));
    /* And another thread's, by its id. */
    CHECK_OK(sched_setaffinity(other_tid, sizeof one, &one));
    CHECK_OK(sched_getaffinity(other_tid, sizeof got, &got));
    CHECK(CPU_EQUAL(&got, &one));
    pthread_barrier_wait(&checked);
    pthread_join(th, NULL);

    /* A child inherits it; another live process can be asked. */
    pid_t child = fork();
    if (child == 0) {
        cpu_set_t mine;
        sched_getaffinity(0, sizeof mine, &mine);
        _exit(CPU_EQUAL(&mine, &one) ? 0 : 1);
    }
    int st = 0;
    CHECK(waitpid(child, &st, 0) == child && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK_OK(sched_getaffinity(getppid(), sizeof got, &got));
    CHECK_OK(sched_setaffinity(0, sizeof all, &all));
    return done();
}
