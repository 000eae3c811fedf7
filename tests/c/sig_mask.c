/* Signal masks and queues: sigprocmask, sigpending, sigsuspend,
 * sigtimedwait/sigwaitinfo, sigqueue values, real-time signals queued in
 * order and standard ones coalesced, delivery order, siginfo of kill,
 * tgkill and sigqueue; SA_RESETHAND, SA_NODEFER, sa_mask during a handler,
 * SIGKILL and SIGSTOP unblockable and uncatchable, per-thread masks and
 * pending sets. */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t.h"

static volatile int order[64], values[64], norder;
static volatile int last_code, last_pid, last_value;
static void record(int sig, siginfo_t *si, void *uc) {
    if (norder < 64) {
        values[norder] = si->si_value.sival_int;
        order[norder++] = sig;
    }
    last_code = si->si_code;
    last_pid = si->si_pid;
    last_value = si->si_value.sival_int;
}

static void install(int sig, void (*h)(int, siginfo_t *, void *), int flags, const sigset_t *mask) {
    struct sigaction sa = {0};
    sa.sa_sigaction = h;
    sa.sa_flags = SA_SIGINFO | flags;
    if (mask) sa.sa_mask = *mask;
    else sigemptyset(&sa.sa_mask);
    CHECK_OK(sigaction(sig, &sa, NULL));
}

static sigset_t set_of(int a, int b) {
    sigset_t s;
    sigemptyset(&s);
    if (a) sigaddset(&s, a);
    if (b) sigaddset(&s, b);
    return s;
}

static int blocked(int sig) {
    sigset_t cur;
    sigprocmask(SIG_BLOCK, NULL, &cur);
    return sigismember(&cur, sig);
}

/* SA_NODEFER: the handler re-raises once; it nests only with NODEFER. */
static volatile int depth, max_depth, raised, entries;
static void nesting(int sig, siginfo_t *si, void *uc) {
    depth++;
    entries++;
    if (depth > max_depth) max_depth = depth;
    if (!raised) {
        raised = 1;
        raise(sig);
    }
    depth--;
}

/* sa_mask: while in the SIGUSR1 handler, SIGUSR2 is blocked. */
static volatile int usr2_blocked_in_handler, self_blocked_in_handler;
static void check_mask(int sig, siginfo_t *si, void *uc) {
    usr2_blocked_in_handler = blocked(SIGUSR2);
    self_blocked_in_handler = blocked(sig);
}

static volatile int resethand_hits;
static void once(int sig, siginfo_t *si, void *uc) { resethand_hits++; }

static void *thread_pending(void *arg) {
    /* This thread has its own pending set: the main thread's
     * thread-directed signal is not pending here. */
    sigset_t p;
    sigpending(&p);
    return (void *)(long)sigismember(&p, SIGUSR1);
}

static volatile long handler_tid;
static void record_tid(int sig, siginfo_t *si, void *uc) { handler_tid = syscall(SYS_gettid); }

/* Waits with every signal unblocked (it inherits SIGUSR2 blocked, so a
 * signal cannot come before the wait): EINTR once its handler ran. */
static volatile long catcher_tid;
static void *catcher(void *arg) {
    catcher_tid = syscall(SYS_gettid);
    sigset_t none;
    sigemptyset(&none);
    struct timespec ts = {5, 0};
    int r = ppoll(NULL, 0, &ts, &none);
    return (void *)(long)(r == -1 && errno == EINTR);
}

/* Sends SIGUSR1 to the whole process, not blocking it itself. */
static void *kill_process_later(void *arg) {
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
    usleep(50000);
    kill(getpid(), SIGUSR1);
    return NULL;
}

int main(void) {
    /* sigprocmask: block, unblock, setmask, SIGKILL/SIGSTOP ignored. */
    sigset_t s = set_of(SIGUSR1, SIGKILL), old, cur;
    CHECK_OK(sigprocmask(SIG_BLOCK, &s, &old));
    CHECK(blocked(SIGUSR1) && !blocked(SIGKILL));
    CHECK(!sigismember(&old, SIGUSR1));
    s = set_of(SIGSTOP, SIGUSR2);
    CHECK_OK(sigprocmask(SIG_SETMASK, &s, NULL));
    CHECK(!blocked(SIGSTOP) && blocked(SIGUSR2) && !blocked(SIGUSR1));
    CHECK_OK(sigprocmask(SIG_UNBLOCK, &s, NULL));
    CHECK(!blocked(SIGUSR2));
    CHECK_ERR(sigprocmask(99, &s, NULL), EINVAL);
    CHECK_ERR(syscall(SYS_rt_sigprocmask, SIG_BLOCK, &s, NULL, 4), EINVAL);
    /* SIGKILL and SIGSTOP cannot be caught or ignored. */
    struct sigaction sa = {0};
    sa.sa_handler = SIG_IGN;
    CHECK_ERR(sigaction(SIGKILL, &sa, NULL), EINVAL);
    CHECK_ERR(sigaction(SIGSTOP, &sa, NULL), EINVAL);
    CHECK_ERR(sigaction(0, &sa, NULL), EINVAL);
    CHECK_ERR(sigaction(65, &sa, NULL), EINVAL);
    CHECK_OK(sigaction(SIGKILL, NULL, &sa));

    /* Pending while blocked; standard signals coalesce, real-time ones
     * queue. At unblock all are taken at once, lowest number first, each
     * instance of a real-time signal in order, and their frames stacked:
     * the handlers run in the reverse order. A handler blocks its own
     * signal, so the second SIGRTMIN comes when the first one's handler
     * returns. */
    install(SIGUSR1, record, 0, NULL);
    install(SIGUSR2, record, 0, NULL);
    install(SIGRTMIN, record, 0, NULL);
    install(SIGRTMIN + 1, record, 0, NULL);
    install(SIGTERM, record, 0, NULL);
    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    raise(SIGUSR2);
    raise(SIGUSR2);
    raise(SIGUSR1);
    union sigval v;
    v.sival_int = 11;
    sigqueue(getpid(), SIGRTMIN + 1, v);
    v.sival_int = 22;
    sigqueue(getpid(), SIGRTMIN, v);
    v.sival_int = 33;
    sigqueue(getpid(), SIGRTMIN, v);
    raise(SIGTERM);
    sigpending(&cur);
    CHECK(sigismember(&cur, SIGUSR1) && sigismember(&cur, SIGUSR2) && sigismember(&cur, SIGRTMIN) &&
          sigismember(&cur, SIGTERM) && !sigismember(&cur, SIGHUP));
    norder = 0;
    sigprocmask(SIG_SETMASK, &old, NULL);
    CHECK(norder == 6);
    CHECK(order[5] == SIGUSR1 && order[4] == SIGUSR2 && order[3] == SIGTERM && order[2] == SIGRTMIN &&
          order[1] == SIGRTMIN && order[0] == SIGRTMIN + 1);
    CHECK(values[0] == 11 && values[1] == 22 && values[2] == 33);
    sigpending(&cur);
    CHECK(sigisemptyset(&cur));

    /* siginfo of kill, tgkill and sigqueue. */
    kill(getpid(), SIGUSR1);
    CHECK(last_code == SI_USER && last_pid == getpid());
    syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGUSR1);
    CHECK(last_code == SI_TKILL && last_pid == getpid());
    v.sival_int = 1234;
    sigqueue(getpid(), SIGUSR1, v);
    CHECK(last_code == SI_QUEUE && last_value == 1234 && last_pid == getpid());
    /* From another process. */
    pid_t me = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        union sigval cv = {.sival_int = 99};
        sigqueue(me, SIGRTMIN, cv);
        _exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    /* The signal may land just after the child is reaped: wait for it. */
    for (int i = 0; i < 1000 && last_value != 99; i++) usleep(1000);
    CHECK(last_value == 99 && last_pid == pid && last_code == SI_QUEUE);

    /* sigtimedwait: takes a blocked pending signal with its info; times
     * out with EAGAIN; a zero timeout polls. */
    sigprocmask(SIG_BLOCK, &all, &old);
    v.sival_int = 555;
    sigqueue(getpid(), SIGRTMIN + 1, v);
    sigset_t w = set_of(SIGRTMIN + 1, SIGUSR1);
    siginfo_t si;
    struct timespec ts = {1, 0};
    CHECK(sigtimedwait(&w, &si, &ts) == SIGRTMIN + 1);
    CHECK(si.si_value.sival_int == 555 && si.si_code == SI_QUEUE && si.si_pid == getpid());
    struct timespec zero = {0, 0};
    CHECK_ERR(sigtimedwait(&w, &si, &zero), EAGAIN);
    struct timespec t0, t1, short_wait = {0, 50 * 1000 * 1000};
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CHECK_ERR(sigtimedwait(&w, &si, &short_wait), EAGAIN);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    long ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
    CHECK(ms >= 50 && ms < 2000);
    /* A signal sent from another process while waiting. */
    pid = fork();
    if (pid == 0) {
        usleep(50000);
        kill(me, SIGUSR1);
        _exit(0);
    }
    CHECK(sigwaitinfo(&w, &si) == SIGUSR1 && si.si_pid == pid && si.si_code == SI_USER);
    waitpid(pid, &st, 0);
    /* A signal not in the set is left pending. */
    raise(SIGUSR2);
    CHECK_ERR(sigtimedwait(&w, &si, &zero), EAGAIN);
    sigpending(&cur);
    CHECK(sigismember(&cur, SIGUSR2));
    int sig;
    w = set_of(SIGUSR2, 0);
    CHECK(sigwait(&w, &sig) == 0 && sig == SIGUSR2);
    sigprocmask(SIG_SETMASK, &old, NULL);

    /* sigsuspend: waits with a temporary mask, returns EINTR after the
     * handler, and the old mask is back. */
    s = set_of(SIGUSR1, 0);
    sigprocmask(SIG_BLOCK, &s, &old);
    pid = fork();
    if (pid == 0) {
        usleep(50000);
        kill(me, SIGUSR1);
        _exit(0);
    }
    sigset_t during;
    sigemptyset(&during);
    norder = 0;
    CHECK_ERR(sigsuspend(&during), EINTR);
    CHECK(norder == 1 && order[0] == SIGUSR1);
    CHECK(blocked(SIGUSR1));
    waitpid(pid, &st, 0);
    /* A signal already pending: returns at once. */
    raise(SIGUSR1);
    norder = 0;
    CHECK_ERR(sigsuspend(&during), EINTR);
    CHECK(norder == 1);
    sigprocmask(SIG_SETMASK, &old, NULL);

    /* SA_RESETHAND: the handler runs once, then the default applies
     * (ignored here: SIGWINCH) and the disposition reads as SIG_DFL. */
    install(SIGWINCH, once, SA_RESETHAND, NULL);
    raise(SIGWINCH);
    raise(SIGWINCH);
    CHECK(resethand_hits == 1);
    sigaction(SIGWINCH, NULL, &sa);
    CHECK(sa.sa_handler == SIG_DFL);
    /* With SA_RESETHAND the signal is still blocked in its handler. */
    install(SIGUSR1, check_mask, SA_RESETHAND, NULL);
    raise(SIGUSR1);
    CHECK(self_blocked_in_handler == 1);

    /* SA_NODEFER: the same signal nests. Without it, it waits. */
    install(SIGUSR1, nesting, SA_NODEFER, NULL);
    depth = max_depth = raised = entries = 0;
    raise(SIGUSR1);
    CHECK(max_depth == 2 && entries == 2);
    install(SIGUSR1, nesting, 0, NULL);
    depth = max_depth = raised = entries = 0;
    raise(SIGUSR1);
    CHECK(max_depth == 1 && depth == 0 && entries == 2);

    /* sa_mask is added during the handler, and the signal itself too. */
    s = set_of(SIGUSR2, 0);
    install(SIGUSR1, check_mask, 0, &s);
    raise(SIGUSR1);
    CHECK(usr2_blocked_in_handler == 1 && self_blocked_in_handler == 1);
    CHECK(!blocked(SIGUSR2) && !blocked(SIGUSR1));

    /* Per-thread: a thread-directed pending signal belongs to its thread;
     * a new thread inherits the mask. */
    install(SIGUSR1, record, 0, NULL);
    s = set_of(SIGUSR1, 0);
    sigprocmask(SIG_BLOCK, &s, &old);
    syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), SIGUSR1);
    pthread_t t;
    void *r;
    pthread_create(&t, NULL, thread_pending, NULL);
    pthread_join(t, &r);
    CHECK(r == 0);
    sigpending(&cur);
    CHECK(sigismember(&cur, SIGUSR1));
    norder = 0;
    sigprocmask(SIG_SETMASK, &old, NULL);
    CHECK(norder == 1);

    /* Ignoring a pending signal discards it. */
    sigprocmask(SIG_BLOCK, &s, &old);
    raise(SIGUSR1);
    signal(SIGUSR1, SIG_IGN);
    sigpending(&cur);
    CHECK(!sigismember(&cur, SIGUSR1));
    install(SIGUSR1, record, 0, NULL);
    norder = 0;
    sigprocmask(SIG_SETMASK, &old, NULL);
    CHECK(norder == 0);

    /* A process-directed signal goes to a thread that does not block it. */
    install(SIGUSR2, record_tid, 0, NULL);
    s = set_of(SIGUSR2, 0);
    sigprocmask(SIG_BLOCK, &s, &old);
    pthread_create(&t, NULL, catcher, NULL);
    while (!catcher_tid) usleep(1000);
    usleep(20000);
    kill(getpid(), SIGUSR2);
    pthread_join(t, &r);
    CHECK((long)r == 1);
    CHECK(handler_tid == catcher_tid);
    sigprocmask(SIG_SETMASK, &old, NULL);

    /* A process-directed signal sent by a second thread goes to the main
     * thread when it can take it (here: waiting in ppoll), not to the
     * sender, which could take it too. */
    install(SIGUSR1, record_tid, 0, NULL);
    handler_tid = 0;
    s = set_of(SIGUSR1, 0);
    sigprocmask(SIG_BLOCK, &s, &old);
    pthread_create(&t, NULL, kill_process_later, NULL);
    sigset_t none;
    sigemptyset(&none);
    struct timespec five = {5, 0};
    CHECK_ERR(ppoll(NULL, 0, &five, &none), EINTR);
    CHECK(handler_tid == syscall(SYS_gettid));
    pthread_join(t, NULL);
    sigprocmask(SIG_SETMASK, &old, NULL);
    return done();
}
