/* Hardware faults turned into signals, caught by handlers that recover with
 * siglongjmp: SIGSEGV with si_addr and SEGV_MAPERR (unmapped) or
 * SEGV_ACCERR (write to a read-only page, execute of a non-executable
 * one), SIGFPE for an integer divide, SIGILL for ud2, SIGTRAP for int3
 * (which resumes after the instruction), SIGFPE for an unmasked SSE
 * exception, SIGSEGV with SI_KERNEL for a general protection fault; a
 * fault with the signal blocked or ignored still kills; and a stack
 * overflow caught on an alternate signal stack. (SIGBUS: sig_bus.c.) */
#include <fenv.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "t.h"

static sigjmp_buf env;
static volatile int got_sig, got_code;
static void *volatile got_addr;
static volatile uintptr_t got_rip;
static volatile int on_altstack;
static char *alt_base;
static size_t alt_size;

static void handler(int sig, siginfo_t *si, void *uc) {
    got_sig = sig;
    got_code = si->si_code;
    got_addr = si->si_addr;
    got_rip = ((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
    char here;
    on_altstack = alt_base && &here >= alt_base && &here < alt_base + alt_size;
    siglongjmp(env, 1);
}

/* Traps resume after the instruction; the handler just records. */
static void trap_handler(int sig, siginfo_t *si, void *uc) {
    got_sig = sig;
    got_code = si->si_code;
    got_rip = ((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
}

static void catch(int sig, void (*h)(int, siginfo_t *, void *), int flags) {
    struct sigaction sa = {0};
    sa.sa_sigaction = h;
    sa.sa_flags = SA_SIGINFO | flags;
    sigemptyset(&sa.sa_mask);
    CHECK_OK(sigaction(sig, &sa, NULL));
}

#define EXPECT_FAULT(stmt, sig, code, addr)                                                          \
    do {                                                                                             \
        got_sig = got_code = 0;                                                                      \
        got_addr = NULL;                                                                             \
        if (sigsetjmp(env, 1) == 0) {                                                                \
            stmt;                                                                                    \
            CHECK(!"no fault");                                                                      \
        } else {                                                                                     \
            CHECK(got_sig == (sig));                                                                 \
            CHECK(got_code == (code));                                                               \
            CHECK(got_addr == (void *)(addr));                                                       \
        }                                                                                            \
    } while (0)

static volatile int zero = 0;
static volatile int sink;

static int __attribute__((noinline)) divide(int a, int b) { return a / b; }

static volatile unsigned long depth;
static volatile int forever = 1;
static int __attribute__((noinline)) recurse(int n) {
    volatile char pad[1024];
    pad[0] = (char)n;
    depth++;
    if (!forever) return 0;
    return recurse(n + 1) + pad[0];
}

/* A child that faults with `sig` blocked or ignored dies of it. */
static void dies_of(int sig, int how, void (*fault)(void)) {
    pid_t pid = fork();
    if (pid == 0) {
        if (how == 0) {
            sigset_t s;
            sigemptyset(&s);
            sigaddset(&s, sig);
            sigprocmask(SIG_BLOCK, &s, NULL);
        } else {
            signal(sig, SIG_IGN);
        }
        fault();
        _exit(0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == sig);
}
static void null_write(void) { *(volatile int *)0 = 1; }
static void div_zero(void) { sink = divide(1, zero); }

int main(int argc, char **argv) {
    catch(SIGSEGV, handler, 0);
    catch(SIGBUS, handler, 0);
    catch(SIGFPE, handler, 0);
    catch(SIGILL, handler, 0);

    /* Unmapped: a hole made with munmap, and a low address. */
    char *p = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    CHECK_OK(munmap(p + 4096, 4096));
    EXPECT_FAULT(sink = p[4096 + 123], SIGSEGV, SEGV_MAPERR, p + 4096 + 123);
    EXPECT_FAULT(p[4096 + 5] = 1, SIGSEGV, SEGV_MAPERR, p + 4096 + 5);
    volatile int *volatile low = (int *)16;
    EXPECT_FAULT(sink = *low, SIGSEGV, SEGV_MAPERR, 16);
    /* Read-only: reading works, writing is SEGV_ACCERR. */
    CHECK_OK(mprotect(p, 4096, PROT_READ));
    sink = p[10];
    EXPECT_FAULT(p[10] = 1, SIGSEGV, SEGV_ACCERR, p + 10);
    /* No access at all. */
    CHECK_OK(mprotect(p + 8192, 4096, PROT_NONE));
    EXPECT_FAULT(sink = p[8192 + 7], SIGSEGV, SEGV_ACCERR, p + 8192 + 7);
    /* A page of code that is not executable: si_addr is the jump target. */
    CHECK_OK(mprotect(p, 4096, PROT_READ | PROT_WRITE));
    p[0] = (char)0xc3; /* ret */
    EXPECT_FAULT(((void (*)(void))p)(), SIGSEGV, SEGV_ACCERR, p);
    /* The handler's mask was restored by siglongjmp: the same fault again. */
    EXPECT_FAULT(p[4096] = 2, SIGSEGV, SEGV_MAPERR, p + 4096);

    /* Integer divide by zero: SIGFPE, FPE_INTDIV, si_addr at the insn. */
    got_rip = 0;
    EXPECT_FAULT(sink = divide(7, zero), SIGFPE, FPE_INTDIV, got_rip);
    CHECK(got_rip != 0);
    /* INT_MIN / -1 overflows: also SIGFPE FPE_INTDIV on x86. */
    volatile int minus_one = -1, int_min = INT32_MIN;
    EXPECT_FAULT(sink = divide(int_min, minus_one), SIGFPE, FPE_INTDIV, got_rip);

    /* ud2: SIGILL, ILL_ILLOPN, si_addr is the instruction. */
    EXPECT_FAULT(__asm__ volatile("ud2"), SIGILL, ILL_ILLOPN, got_rip);
    CHECK(*(uint16_t *)got_rip == 0x0b0f);

    /* int3: SIGTRAP, SI_KERNEL, resumes after the instruction. */
    catch(SIGTRAP, trap_handler, 0);
    got_sig = 0;
    __asm__ volatile("int3");
    CHECK(got_sig == SIGTRAP);
    CHECK(got_code == SI_KERNEL);
    CHECK(*(uint8_t *)(got_rip - 1) == 0xcc);

    /* SSE divide by zero with the exception unmasked: FPE_FLTDIV. */
    volatile double dz = 0.0, one = 1.0;
    volatile double dsink;
    feenableexcept(FE_DIVBYZERO);
    EXPECT_FAULT(dsink = one / dz, SIGFPE, FPE_FLTDIV, got_rip);
    fedisableexcept(FE_ALL_EXCEPT);
    feenableexcept(FE_INVALID);
    EXPECT_FAULT(dsink = dz / dz, SIGFPE, FPE_FLTINV, got_rip);
    fedisableexcept(FE_ALL_EXCEPT);
    dsink = one / dz; /* masked again: no signal */
    (void)dsink;

    /* A privileged instruction and a non-canonical address: general
     * protection faults, SIGSEGV with SI_KERNEL and no address. */
    EXPECT_FAULT(__asm__ volatile("hlt"), SIGSEGV, SI_KERNEL, 0);
    volatile long *volatile noncanonical = (long *)0x8000000000001000UL;
    EXPECT_FAULT(sink = (int)*noncanonical, SIGSEGV, SI_KERNEL, 0);

    /* Stack overflow caught on an alternate stack. */
    alt_size = 64 * 1024;
    alt_base = mmap(NULL, alt_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    stack_t ss = {.ss_sp = alt_base, .ss_size = alt_size, .ss_flags = 0};
    CHECK_OK(sigaltstack(&ss, NULL));
    catch(SIGSEGV, handler, SA_ONSTACK);
    for (volatile int round = 0; round < 2; round++) {
        got_sig = 0;
        on_altstack = 0;
        depth = 0;
        if (sigsetjmp(env, 1) == 0) {
            sink = recurse(0);
            CHECK(!"no overflow");
        }
        CHECK(got_sig == SIGSEGV);
        CHECK(on_altstack);
        CHECK(depth > 1000); /* it got deep before failing */
    }
    /* Back on the normal stack, the alternate stack is not in use. */
    stack_t cur;
    CHECK_OK(sigaltstack(NULL, &cur));
    CHECK(cur.ss_sp == alt_base && cur.ss_size == alt_size && cur.ss_flags == 0);

    /* Blocked or ignored synchronous signals still kill. */
    dies_of(SIGSEGV, 0, null_write);
    dies_of(SIGSEGV, 1, null_write);
    dies_of(SIGFPE, 0, div_zero);
    /* Without a handler: the default action, with a core flag. */
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGSEGV, SIG_DFL);
        null_write();
        _exit(0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
    return done();
}
