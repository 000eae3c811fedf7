/* Signals that arrive while a fault is on its way to the process.
 *
 * A child faults on a PROT_NONE page over and over, catching SIGSEGV and
 * jumping back, while its parent sends it SIGUSR1 as fast as it can. Every
 * SIGSEGV must name the faulting instruction and address, whatever signal
 * came in between: a fault must never be reported at the instruction a
 * signal handler starts with.
 *
 * Then children that fault without end are stopped, continued and killed by
 * SIGTERM, many times over; each must die by SIGTERM, and the processes
 * created after them must run normally. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "t.h"

/* The faulting instruction is the first of this function. */
void touch(volatile char *p);
__asm__(".text\n.globl touch\n.type touch,@function\ntouch:\n movb (%rdi), %al\n ret\n");

static sigjmp_buf env;
static char *guard;
static volatile sig_atomic_t wrong_rip, wrong_addr, usr1;

static void on_segv(int sig, siginfo_t *si, void *ctx) {
    ucontext_t *uc = ctx;
    if ((uintptr_t)uc->uc_mcontext.gregs[REG_RIP] != (uintptr_t)touch) wrong_rip++;
    if (si->si_addr != guard) wrong_addr++;
    siglongjmp(env, 1);
}

static void on_usr1(int sig) { usr1++; }

static int fault_many(int faults, int ready_fd) {
    struct sigaction sa = {0};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGSEGV, &sa, NULL);
    signal(SIGUSR1, on_usr1);
    guard = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (guard == MAP_FAILED) return 2;
    if (write(ready_fd, "r", 1) != 1) return 2;
    for (volatile int i = 0; i < faults; i++)
        if (sigsetjmp(env, 1) == 0) touch(guard);
    if (wrong_rip || wrong_addr) {
        fprintf(stderr, "%d faults reported at the wrong instruction, %d at the wrong address (%d SIGUSR1)\n",
                (int)wrong_rip, (int)wrong_addr, (int)usr1);
        return 1;
    }
    return 0;
}

static void faults_under_signals(void) {
    int ready[2];
    CHECK_OK(pipe(ready));
    pid_t pid = fork();
    if (pid == 0) _exit(fault_many(10000, ready[1]));
    char c;
    CHECK(read(ready[0], &c, 1) == 1);
    int st;
    pid_t r;
    while ((r = waitpid(pid, &st, WNOHANG)) == 0) kill(pid, SIGUSR1);
    CHECK(r == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(ready[0]);
    close(ready[1]);
}

static void *fault_forever(void *arg) {
    for (;;) {
        char *p = mmap(NULL, 1 << 24, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) continue;
        for (int i = 0; i < (1 << 24); i += 65536) p[i] = 1;
        munmap(p, 1 << 24);
    }
    return arg;
}

static void stop_continue_kill(int rounds) {
    for (int r = 0; r < rounds; r++) {
        int ready[2];
        CHECK_OK(pipe(ready));
        pid_t pid = fork();
        if (pid == 0) {
            pthread_t t;
            pthread_create(&t, NULL, fault_forever, NULL);
            if (write(ready[1], "r", 1) != 1) _exit(2);
            fault_forever(NULL);
        }
        char c;
        CHECK(read(ready[0], &c, 1) == 1);
        close(ready[0]);
        close(ready[1]);
        for (int i = 0; i < 5; i++) {
            kill(pid, SIGSTOP);
            kill(pid, SIGCONT);
        }
        kill(pid, SIGTERM);
        int st;
        CHECK(waitpid(pid, &st, 0) == pid);
        if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGTERM) {
            CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM);
            fprintf(stderr, "round %d: status %#x\n", r, st);
        }
    }
}

int main(void) {
    faults_under_signals();
    stop_continue_kill(100);
    return done();
}
