/* Wake-ups that must not be lost: a pipe's hang-up seen through epoll while
 * another thread waits, futex wakes with a count of 0 or less, waitid for
 * stops and continues only, the end of a process while one of its threads
 * makes new ones, and a thread whose nested signals overflow its alternate
 * stack. Each hangs, rather than fails, when the wake-up (or the death) is
 * lost; the harness's kill timeout catches that. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

/* ---- epoll: the last close of a pipe's write end while a thread waits ---- */

struct hup_wait {
    int ep;
    uint32_t events;
};

static void *wait_for_hangup(void *arg) {
    struct hup_wait *w = arg;
    struct epoll_event ev;
    int n;
    do {
        n = epoll_wait(w->ep, &ev, 1, -1);
    } while (n == 0 || (n == 1 && !(ev.events & EPOLLHUP)));
    w->events = n == 1 ? ev.events : 0;
    return NULL;
}

/* A thread waits on an epoll instance watching both ends of a pipe; this
 * thread closes the write end (removing it from the interest list first,
 * as Go's runtime does, or not). Closing the last descriptor releases the
 * file, whatever epoll watches it, so the waiter sees the hang-up. The
 * pause only makes it likely that the waiter is asleep by then; the
 * outcome is the same either way. */
static void test_epoll_hangup(int remove_first, uint32_t flags) {
    for (int round = 0; round < 5; round++) {
        int p[2];
        CHECK_OK(pipe2(p, O_NONBLOCK | O_CLOEXEC));
        struct hup_wait w = {.ep = epoll_create1(EPOLL_CLOEXEC)};
        struct epoll_event in = {.events = EPOLLIN | EPOLLRDHUP | flags, .data.fd = p[0]};
        struct epoll_event out = {.events = EPOLLIN | flags, .data.fd = p[1]}; /* never readable */
        CHECK_OK(epoll_ctl(w.ep, EPOLL_CTL_ADD, p[0], &in));
        CHECK_OK(epoll_ctl(w.ep, EPOLL_CTL_ADD, p[1], &out));
        pthread_t th;
        pthread_create(&th, NULL, wait_for_hangup, &w);
        usleep(10 * 1000);
        if (remove_first) CHECK_OK(epoll_ctl(w.ep, EPOLL_CTL_DEL, p[1], NULL));
        CHECK_OK(close(p[1]));
        pthread_join(th, NULL);
        CHECK(w.events & EPOLLHUP);
        close(p[0]);
        close(w.ep);
    }
}

/* ---- futex wakes with a count of 0 or less ---- */

static uint32_t word;
static int wakeups;

static long futex(uint32_t *addr, int op, uint32_t val, long val2, uint32_t *addr2, uint32_t val3) {
    return syscall(SYS_futex, addr, op, val, val2, addr2, val3);
}

static void *futex_waiter(void *arg) {
    while (__atomic_load_n(&word, __ATOMIC_SEQ_CST) == 0)
        if (futex(&word, FUTEX_WAIT_PRIVATE, 0, 0, NULL, 0) == 0) __atomic_add_fetch(&wakeups, 1, __ATOMIC_SEQ_CST);
    return NULL;
}

/* Waiters queued on `word`, counted by requeueing them onto it again (a
 * requeue to the same word moves them and wakes nobody). */
static long queued(void) { return futex(&word, FUTEX_CMP_REQUEUE_PRIVATE, 0, INT_MAX, &word, 0); }

static void wait_queued(long n) {
    while (queued() < n) sched_yield();
}

static void wait_wakeups(int n) {
    while (__atomic_load_n(&wakeups, __ATOMIC_SEQ_CST) < n) sched_yield();
}

static void test_futex_wake_counts(void) {
    /* Linux counts a waiter as woken before comparing with the count, so
     * a count of 0 or a negative one wakes one waiter. */
    CHECK(futex(&word, FUTEX_WAKE_PRIVATE, 0, 0, NULL, 0) == 0); /* nobody waits */
    pthread_t a, b;
    pthread_create(&a, NULL, futex_waiter, NULL);
    pthread_create(&b, NULL, futex_waiter, NULL);
    wait_queued(2);
    CHECK(futex(&word, FUTEX_WAKE_PRIVATE, 0, 0, NULL, 0) == 1);
    wait_wakeups(1);
    /* The woken waiter sees the word unchanged and waits again. */
    wait_queued(2);
    CHECK(futex(&word, FUTEX_WAKE_BITSET_PRIVATE, (uint32_t)-1, 0, NULL, FUTEX_BITSET_MATCH_ANY) == 1);
    wait_wakeups(2);
    wait_queued(2);
    uint32_t other = 0;
    int wake_op = FUTEX_OP(FUTEX_OP_SET, 0, FUTEX_OP_CMP_EQ, 0);
    CHECK(futex(&word, FUTEX_WAKE_OP_PRIVATE, 0, 0, &other, wake_op) == 1);
    wait_wakeups(3);
    /* A requeue's counts are exact, and negative ones are refused. */
    wait_queued(2);
    CHECK_ERR(futex(&word, FUTEX_CMP_REQUEUE_PRIVATE, (uint32_t)-1, 1, &word, 0), EINVAL);
    CHECK_ERR(futex(&word, FUTEX_CMP_REQUEUE_PRIVATE, 0, -1, &word, 0), EINVAL);
    CHECK(futex(&word, FUTEX_CMP_REQUEUE_PRIVATE, 0, 0, &word, 0) == 0);
    __atomic_store_n(&word, 1, __ATOMIC_SEQ_CST);
    CHECK(futex(&word, FUTEX_WAKE_PRIVATE, INT_MAX, 0, NULL, 0) == 2);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    CHECK(wakeups == 5);
}

/* ---- waitid for stops and continues only ---- */

static void test_waitid_without_wexited(void) {
    int go[2];
    CHECK_OK(pipe(go));
    pid_t pid = fork();
    if (pid == 0) {
        close(go[1]);
        raise(SIGSTOP);
        char c;
        (void)!read(go[0], &c, 1); /* until the parent closes its end */
        _exit(7);
    }
    close(go[0]);
    siginfo_t si = {0};
    CHECK_OK(waitid(P_PID, pid, &si, WSTOPPED));
    CHECK(si.si_pid == pid && si.si_code == CLD_STOPPED && si.si_status == SIGSTOP);
    CHECK_OK(kill(pid, SIGCONT));
    si = (siginfo_t){0};
    CHECK_OK(waitid(P_PID, pid, &si, WCONTINUED));
    CHECK(si.si_pid == pid && si.si_code == CLD_CONTINUED && si.si_status == SIGCONT);
    /* Nothing to report yet; the child lives on. */
    si = (siginfo_t){0};
    CHECK_OK(waitid(P_PID, pid, &si, WSTOPPED | WCONTINUED | WNOHANG));
    CHECK(si.si_pid == 0);
    /* The child exits while the parent waits for a stop or a continue: a
     * child that has exited has nothing more of those to report, so the
     * wait ends with ECHILD rather than waiting for good. */
    close(go[1]);
    CHECK_ERR(waitid(P_PID, pid, &si, WSTOPPED | WCONTINUED), ECHILD);
    CHECK_ERR(waitid(P_ALL, 0, &si, WSTOPPED | WNOHANG), ECHILD);
    /* Its exit is still there to collect. */
    si = (siginfo_t){0};
    CHECK_OK(waitid(P_PID, pid, &si, WEXITED));
    CHECK(si.si_pid == pid && si.si_code == CLD_EXITED && si.si_status == 7);
}

/* ---- a process ending while one of its threads makes new ones ---- */

static void *block_forever(void *arg) {
    for (;;) pause();
    return NULL;
}

static void *spawn_threads(void *arg) {
    for (int i = 0; i < 200; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, block_forever, NULL) != 0) break;
    }
    return block_forever(NULL);
}

/* One thread makes threads that block for good while another ends the
 * process (exit_group, or execve of a program that exits): no thread made
 * meanwhile may outlive it, or the process never ends. */
static void test_exit_while_cloning(const char *self) {
    for (int round = 0; round < 20; round++) {
        pid_t pid = fork();
        if (pid == 0) {
            pthread_t t;
            pthread_create(&t, NULL, spawn_threads, NULL);
            usleep(2000);
            if (round & 1) execl(self, self, "exit", (char *)NULL);
            _exit(3);
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 3);
    }
}

/* ---- nested signals running off the bottom of an alternate stack ---- */

static char static_altstack[16384];

static void raise_again(int sig) { raise(sig); }

static void *overflow_altstack(void *arg) {
    stack_t ss = {.ss_sp = arg, .ss_size = sizeof static_altstack};
    sigaltstack(&ss, NULL);
    raise(SIGUSR1);
    return NULL;
}

/* A handler on the alternate stack that raises its own signal again (with
 * SA_NODEFER) nests frames until one no longer fits: Linux then kills the
 * process with SIGSEGV rather than write a frame below the stack, over the
 * memory there (the heap, other data), and go on for ever. */
static void test_altstack_overflow(void) {
    for (int mode = 0; mode < 4; mode++) {
        pid_t pid = fork();
        if (pid == 0) {
            struct sigaction sa = {.sa_handler = raise_again, .sa_flags = SA_ONSTACK | SA_NODEFER};
            sigaction(SIGUSR1, &sa, NULL);
            void *stack = mode & 1 ? static_altstack : malloc(sizeof static_altstack);
            if (mode & 2) {
                overflow_altstack(stack);
            } else {
                pthread_t t;
                pthread_create(&t, NULL, overflow_altstack, stack);
                pthread_join(t, NULL);
            }
            _exit(0);
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV);
    }
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "exit") == 0) return 3;
    test_epoll_hangup(1, 0);
    test_epoll_hangup(0, 0);
    test_epoll_hangup(1, EPOLLET);
    test_futex_wake_counts();
    test_waitid_without_wexited();
    test_exit_while_cloning(argv[0]);
    test_altstack_overflow();
    return done();
}
