/* Signal answers at the edges: a full signal queue, SA_RESETHAND, a
 * sigreturn frame whose FPU state the CPU refuses, `int n` for vectors the
 * IDT refuses to user mode, and a vfork parent killed while it waits.
 *
 * With the argument "int80" it instead runs `int $0x80` and reports what
 * happened (the sandbox runs no 32-bit system calls; the test of that runs
 * in the sandbox only). */
#include "t.h"

#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

static sigjmp_buf jump;
static volatile int got_sig, got_code;
static volatile long got_trapno, got_err;
static void *volatile got_addr;

static void record_and_jump(int sig, siginfo_t *si, void *ucv) {
    ucontext_t *uc = ucv;
    got_sig = sig;
    got_code = si->si_code;
    got_addr = si->si_addr;
    got_trapno = uc->uc_mcontext.gregs[REG_TRAPNO];
    got_err = uc->uc_mcontext.gregs[REG_ERR];
    siglongjmp(jump, 1);
}

static void catch_faults(void) {
    struct sigaction sa = {0};
    sa.sa_sigaction = record_and_jump;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (int s = 1; s < 32; s++) {
        if (s != SIGKILL && s != SIGSTOP && s != SIGALRM && s != SIGCHLD)
            sigaction(s, &sa, NULL);
    }
}

static void default_faults(void) {
    for (int s = 1; s < 32; s++) {
        if (s != SIGKILL && s != SIGSTOP && s != SIGALRM)
            signal(s, SIG_DFL);
    }
}

/* Past RLIMIT_SIGPENDING, sigqueue and tgkill of a real-time signal fail
 * with EAGAIN; kill still succeeds (its siginfo is lost and the instance
 * merges with those pending), and a standard signal sent by sigqueue is
 * delivered without its siginfo. */
static void test_queue_limit(void) {
    pid_t p = fork();
    if (p == 0) {
        struct rlimit rl = {64, 64};
        CHECK_OK(setrlimit(RLIMIT_SIGPENDING, &rl));
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGRTMIN);
        sigaddset(&set, SIGUSR1);
        sigprocmask(SIG_BLOCK, &set, NULL);
        int queued = 0;
        /* The limit counts the user's signals pending anywhere, so fewer
         * than 64 may fit natively; never more. */
        while (queued < 100 && sigqueue(getpid(), SIGRTMIN, (union sigval){.sival_int = queued}) == 0)
            queued++;
        CHECK(queued >= 1 && queued <= 64);
        CHECK_ERR(sigqueue(getpid(), SIGRTMIN, (union sigval){.sival_int = -1}), EAGAIN);
        CHECK_ERR(syscall(SYS_tgkill, getpid(), gettid(), SIGRTMIN), EAGAIN);
        CHECK_OK(kill(getpid(), SIGRTMIN));
        CHECK_OK(sigqueue(getpid(), SIGUSR1, (union sigval){.sival_int = 7}));

        struct timespec zero = {0, 0};
        siginfo_t si;
        CHECK(sigtimedwait(&set, &si, &zero) == SIGUSR1);
        CHECK(si.si_code == SI_USER && si.si_pid == 0 && si.si_uid == 0);
        int taken = 0, in_order = 1;
        while (sigtimedwait(&set, &si, &zero) == SIGRTMIN) {
            in_order &= si.si_code == SI_QUEUE && si.si_value.sival_int == taken;
            taken++;
        }
        CHECK(taken == queued);
        CHECK(in_order);
        /* Taking them gave their room back. */
        CHECK_OK(sigqueue(getpid(), SIGRTMIN, (union sigval){.sival_int = 5}));
        CHECK(sigtimedwait(&set, &si, &zero) == SIGRTMIN && si.si_value.sival_int == 5);
        _exit(t_failures ? 1 : 0);
    }
    int st = 0;
    CHECK(waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static volatile int in_handler_masked;
static void note_mask(int sig) {
    sigset_t now;
    sigprocmask(SIG_SETMASK, NULL, &now);
    in_handler_masked = sigismember(&now, sig);
}
static void note_mask_info(int sig, siginfo_t *si, void *uc) {
    (void)si;
    (void)uc;
    note_mask(sig);
}

/* SA_RESETHAND resets only the handler: the flags stay, and the signal is
 * blocked in the handler unless SA_NODEFER says otherwise. */
static void test_resethand(void) {
    struct sigaction sa = {0}, old;
    sa.sa_sigaction = note_mask_info;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    CHECK_OK(sigaction(SIGUSR1, &sa, NULL));
    CHECK_OK(raise(SIGUSR1));
    CHECK_OK(sigaction(SIGUSR1, NULL, &old));
    CHECK(old.sa_handler == SIG_DFL);
    CHECK((old.sa_flags & SA_SIGINFO) && (old.sa_flags & SA_RESETHAND));
    CHECK(in_handler_masked == 1);

    sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER | SA_RESTART;
    CHECK_OK(sigaction(SIGUSR2, &sa, NULL));
    CHECK_OK(raise(SIGUSR2));
    CHECK_OK(sigaction(SIGUSR2, NULL, &old));
    CHECK(old.sa_handler == SIG_DFL);
    CHECK((old.sa_flags & (SA_SIGINFO | SA_RESETHAND | SA_NODEFER | SA_RESTART)) ==
          (SA_SIGINFO | SA_RESETHAND | SA_NODEFER | SA_RESTART));
    CHECK(in_handler_masked == 0);

    /* Without SA_SIGINFO too. */
    struct sigaction plain = {0};
    plain.sa_handler = note_mask;
    plain.sa_flags = SA_RESETHAND;
    CHECK_OK(sigaction(SIGHUP, &plain, NULL));
    CHECK_OK(raise(SIGHUP));
    CHECK_OK(sigaction(SIGHUP, NULL, &old));
    CHECK(old.sa_handler == SIG_DFL && (old.sa_flags & SA_RESETHAND));
}

/* What a handler does to the FPU image its frame saved. */
enum fp_edit { FP_ROUND_TO_ZERO, FP_MXCSR_RESERVED, FP_HEADER_RESERVED };
static volatile enum fp_edit fp_edit;

static void edit_fp(int sig, siginfo_t *si, void *ucv) {
    (void)sig;
    (void)si;
    ucontext_t *uc = ucv;
    unsigned char *img = (unsigned char *)uc->uc_mcontext.fpregs;
    uint32_t magic1;
    memcpy(&magic1, img + 464, 4);
    switch (fp_edit) {
    case FP_ROUND_TO_ZERO:
        uc->uc_mcontext.fpregs->mxcsr |= 3u << 13;
        break;
    case FP_MXCSR_RESERVED:
        uc->uc_mcontext.fpregs->mxcsr |= 1u << 20;
        break;
    case FP_HEADER_RESERVED:
        /* The XSAVE header's reserved bytes, if the frame has the
         * extended layout; else a reserved MXCSR bit. */
        if (magic1 == 0x46505853)
            img[512 + 20] = 1;
        else
            uc->uc_mcontext.fpregs->mxcsr |= 1u << 20;
        break;
    }
}

/* rt_sigreturn restores the FPU state the frame holds, as the CPU checks
 * it: an image XRSTOR/FXRSTOR would fault on makes sigreturn fail with
 * SIGSEGV (si_code SI_KERNEL). */
static void test_sigreturn_fp_state(void) {
    struct sigaction sa = {0};
    sa.sa_sigaction = edit_fp;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    CHECK_OK(sigaction(SIGUSR2, &sa, NULL));

    unsigned before = __builtin_ia32_stmxcsr();
    fp_edit = FP_ROUND_TO_ZERO;
    CHECK_OK(raise(SIGUSR2));
    unsigned after = __builtin_ia32_stmxcsr();
    CHECK(((after >> 13) & 3) == 3);
    __builtin_ia32_ldmxcsr(before);

    catch_faults();
    CHECK_OK(sigaction(SIGUSR2, &sa, NULL));
    for (int e = FP_MXCSR_RESERVED; e <= FP_HEADER_RESERVED; e++) {
        fp_edit = e;
        got_sig = 0;
        if (sigsetjmp(jump, 1) == 0) {
            raise(SIGUSR2);
            CHECK(!"sigreturn accepted a bad FPU state");
        } else {
            CHECK(got_sig == SIGSEGV && got_code == SI_KERNEL);
        }
    }
    default_faults();
    __builtin_ia32_ldmxcsr(before);
}

#define TRY_INT(n)                                                                                  \
    do {                                                                                            \
        got_sig = 0;                                                                                \
        if (sigsetjmp(jump, 1) == 0) {                                                              \
            __asm__ volatile("int $" #n ::: "memory");                                              \
            CHECK(!"int $" #n " returned");                                                         \
        } else {                                                                                    \
            CHECK(got_sig == SIGSEGV && got_code == SI_KERNEL && got_addr == NULL);                 \
            CHECK(got_trapno == 13 && got_err == ((n) << 3 | 2));                                   \
        }                                                                                           \
    } while (0)

/* `int n` for a vector the IDT keeps from user mode is a general protection
 * fault naming the vector; int3 and into have their own traps. */
static void test_software_interrupts(void) {
    catch_faults();
    TRY_INT(0);
    TRY_INT(1);
    TRY_INT(2);
    TRY_INT(5);
    TRY_INT(6);
    TRY_INT(13);
    TRY_INT(14);
    TRY_INT(32);
    TRY_INT(0x81);
    TRY_INT(0xff);
    got_sig = 0;
    if (sigsetjmp(jump, 1) == 0) {
        __asm__ volatile("int $3" ::: "memory");
    }
    CHECK(got_sig == SIGTRAP && got_code == SI_KERNEL && got_trapno == 3);
    got_sig = 0;
    if (sigsetjmp(jump, 1) == 0) {
        __asm__ volatile("int $4" ::: "memory");
    }
    CHECK(got_sig == SIGSEGV && got_code == SI_KERNEL && got_trapno == 4 && got_err == 0);
    default_faults();
}

/* A process waiting for its vfork child to exec or exit still dies of a
 * signal whose default action kills. */
static void test_vfork_parent_killable(void) {
    int ready[2], hold[2];
    CHECK_OK(pipe(ready));
    CHECK_OK(pipe(hold));
    /* The grandchild outlives its parent: it comes back to us. */
    CHECK_OK(prctl(PR_SET_CHILD_SUBREAPER, 1));
    pid_t mid = fork();
    if (mid == 0) {
        pid_t c = vfork();
        if (c == 0) {
            pid_t me = getpid();
            close(hold[1]);
            if (write(ready[1], &me, sizeof me) != sizeof me)
                _exit(3);
            char b;
            (void)!read(hold[0], &b, 1);
            _exit(0);
        }
        _exit(99);
    }
    close(ready[1]);
    close(hold[0]);
    pid_t grandchild = 0;
    /* Once the vfork child runs, its parent is waiting for it. */
    CHECK(read(ready[0], &grandchild, sizeof grandchild) == sizeof grandchild);
    CHECK_OK(kill(mid, SIGTERM));
    int st = 0;
    CHECK(waitpid(mid, &st, 0) == mid);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
    close(hold[1]);
    CHECK(waitpid(grandchild, &st, 0) == grandchild && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(ready[0]);
    CHECK_OK(prctl(PR_SET_CHILD_SUBREAPER, 0));
}

static int int80(void) {
    catch_faults();
    long r = 20;
    if (sigsetjmp(jump, 1) == 0) {
        __asm__ volatile("int $0x80" : "+a"(r)::"memory");
        printf("int 0x80 returned %ld\n", r);
    } else {
        printf("int 0x80: signal %d code %d addr %p trapno %ld err %#lx\n", got_sig, got_code, got_addr,
               got_trapno, (unsigned long)got_err);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "int80") == 0)
        return int80();
    /* A hang fails the test rather than stalling it. */
    alarm(60);
    test_queue_limit();
    test_resethand();
    test_sigreturn_fp_state();
    test_software_interrupts();
    test_vfork_parent_killable();
    return done();
}
