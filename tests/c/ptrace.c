/* ptrace between processes of the sandbox: PTRACE_TRACEME and the stops a
 * tracer sees through waitpid (signal-delivery, syscall entry and exit,
 * events), registers and PTRACE_GET_SYSCALL_INFO, a system call skipped or
 * changed by the tracer, peeks and pokes (a poke into read-only memory
 * included), a breakpoint and single steps (over a system call too), the
 * fork, exec and exit events with an auto-attached grandchild, signals the
 * tracer replaces or suppresses, PTRACE_SEIZE with INTERRUPT and LISTEN,
 * PTRACE_ATTACH to a process that is not the tracer's child, TracerPid,
 * detaching by the tracer's exit, and the errors. What the tracer sees is
 * printed, so the sandbox must see what Linux shows. */
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

#ifndef PTRACE_GET_SYSCALL_INFO
#define PTRACE_GET_SYSCALL_INFO 0x420e
#endif

/* A function the tracer sets a breakpoint in and single-steps through:
 * getpid by its system call instruction. */
extern char do_getpid[], sc_insn[], sc_after[];
__asm__(".text\n.globl do_getpid\ndo_getpid:\n  mov $39, %eax\n.globl sc_insn\nsc_insn:\n  syscall\n"
        ".globl sc_after\nsc_after:\n  ret\n");

static volatile long word = 0x1122334455667788;
static const long constant = 7;
static volatile sig_atomic_t got_usr1, got_usr2;

static void on_usr1(int s) { (void)s; got_usr1++; }
static void on_usr2(int s) { (void)s; got_usr2++; }

/* A stop as "stop SIG EVENT", an exit as "exit N", a kill as "killed SIG". */
static void show(const char *what, int status) {
    if (WIFSTOPPED(status))
        printf("%s: stop %d event %d%s\n", what, WSTOPSIG(status) & 0x7f, status >> 16,
               WSTOPSIG(status) & 0x80 ? " sysgood" : "");
    else if (WIFEXITED(status))
        printf("%s: exit %d\n", what, WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        printf("%s: killed %d\n", what, WTERMSIG(status));
}

static int wait_for(pid_t pid) {
    int status = 0;
    CHECK(waitpid(pid, &status, __WALL) == pid);
    return status;
}

/* The child: stopped for its tracer, then the calls the tracer watches
 * and changes; its exit status says what it saw. */
static void syscall_child(pid_t parent) {
    if (ptrace(PTRACE_TRACEME, 0, 0, 0) != 0) _exit(100);
    if (ptrace(PTRACE_TRACEME, 0, 0, 0) != -1 || errno != EPERM) _exit(101);
    syscall(SYS_kill, getpid(), SIGSTOP);
    int bad = 0;
    /* Skipped by the tracer, which answers 4242 itself. */
    if (syscall(SYS_getuid) != 4242) bad |= 1;
    /* Turned into getppid. */
    if (syscall(SYS_getpid) != parent) bad |= 2;
    if (syscall(SYS_write, -1, "x", 1) != -1 || errno != EBADF) bad |= 4;
    /* Changed by the tracer's pokes. */
    if (word != 0x0102030405060708) bad |= 8;
    if (*(volatile const long *)&constant != 99) bad |= 16;
    _exit(bad);
}

static void syscall_stops(void) {
    pid_t me = getpid();
    pid_t pid = fork();
    if (pid == 0) syscall_child(me);
    int status = wait_for(pid);
    show("traceme", status);
    CHECK(WIFSTOPPED(status) && WSTOPSIG(status) == SIGSTOP);
    /* A stopped tracee's siginfo is the signal's. */
    siginfo_t si;
    CHECK_OK(ptrace(PTRACE_GETSIGINFO, pid, 0, &si));
    CHECK(si.si_signo == SIGSTOP && si.si_code == SI_USER && si.si_pid == pid);
    CHECK_OK(ptrace(PTRACE_SETOPTIONS, pid, 0, PTRACE_O_TRACESYSGOOD | PTRACE_O_TRACEEXIT));
    CHECK_ERR(ptrace(PTRACE_SETOPTIONS, pid, 0, 1 << 30), EINVAL);
    /* Memory: read and written while stopped, read-only memory included. */
    errno = 0;
    long v = ptrace(PTRACE_PEEKDATA, pid, (void *)&word, 0);
    CHECK(errno == 0 && v == 0x1122334455667788);
    CHECK_OK(ptrace(PTRACE_POKEDATA, pid, (void *)&word, (void *)0x0102030405060708));
    CHECK_OK(ptrace(PTRACE_POKEDATA, pid, (void *)&constant, (void *)99));
    CHECK_ERR(ptrace(PTRACE_PEEKDATA, pid, (void *)8, 0), EIO);
    CHECK_ERR(ptrace(PTRACE_POKEDATA, pid, (void *)8, 0), EIO);
    /* PEEKUSER: rip, orig_rax and a debug register. */
    errno = 0;
    long rip = ptrace(PTRACE_PEEKUSER, pid, offsetof(struct user, regs.rip), 0);
    struct user_regs_struct regs;
    CHECK_OK(ptrace(PTRACE_GETREGS, pid, 0, &regs));
    CHECK(errno == 0 && (unsigned long)rip == regs.rip);
    CHECK(ptrace(PTRACE_PEEKUSER, pid, offsetof(struct user, u_debugreg[7]), 0) == 0);
    CHECK_ERR(ptrace(PTRACE_PEEKUSER, pid, 3, 0), EIO);
    CHECK_ERR(ptrace(PTRACE_PEEKUSER, pid, 4096, 0), EIO);
    CHECK(regs.cs == 0x33 && regs.ss == 0x2b);

    int n = 0;
    for (;;) {
        CHECK_OK(ptrace(PTRACE_SYSCALL, pid, 0, 0));
        status = wait_for(pid);
        if (!WIFSTOPPED(status) || (status >> 16) == PTRACE_EVENT_EXIT) break;
        CHECK(WSTOPSIG(status) == (SIGTRAP | 0x80));
        struct {
            uint8_t op, pad[3];
            uint32_t arch;
            uint64_t ip, sp;
            union {
                struct { uint64_t nr, args[6]; } entry;
                struct { int64_t rval; uint8_t is_error; } exit;
            };
        } info;
        long size = ptrace(PTRACE_GET_SYSCALL_INFO, pid, sizeof info, &info);
        CHECK_OK(ptrace(PTRACE_GETREGS, pid, 0, &regs));
        CHECK(info.arch == 0xc000003e && info.ip == regs.rip && info.sp == regs.rsp);
        unsigned long msg = 0;
        CHECK_OK(ptrace(PTRACE_GETEVENTMSG, pid, 0, &msg));
        if (info.op == 1) {
            CHECK(size == 80 && msg == 1 && info.entry.nr == regs.orig_rax && (long)regs.rax == -ENOSYS);
            CHECK(info.entry.args[0] == regs.rdi && info.entry.args[1] == regs.rsi);
            printf("entry %llu\n", regs.orig_rax);
            if (regs.orig_rax == SYS_getuid) {
                regs.orig_rax = -1;
                CHECK_OK(ptrace(PTRACE_SETREGS, pid, 0, &regs));
            } else if (regs.orig_rax == SYS_getpid) {
                CHECK_OK(ptrace(PTRACE_POKEUSER, pid, offsetof(struct user, regs.orig_rax), SYS_getppid));
            }
        } else {
            CHECK(size == 33 && msg == 2 && info.exit.rval == (long)regs.rax);
            CHECK(info.exit.is_error == ((long)regs.rax < 0 && (long)regs.rax > -4096));
            printf("exit %llu = %s\n", regs.orig_rax,
                   (long)regs.rax < 0 ? "error" : regs.orig_rax == (unsigned long)-1 ? "skipped" : "value");
            if (regs.orig_rax == (unsigned long)-1) {
                regs.rax = 4242;
                CHECK_OK(ptrace(PTRACE_SETREGS, pid, 0, &regs));
            }
        }
        if (++n > 40) break;
    }
    show("exit event", status);
    unsigned long msg = 0;
    CHECK_OK(ptrace(PTRACE_GETEVENTMSG, pid, 0, &msg));
    CHECK(WIFEXITED(msg) && WEXITSTATUS(msg) == 0);
    CHECK_OK(ptrace(PTRACE_CONT, pid, 0, 0));
    show("end", wait_for(pid));
}

/* A breakpoint written into the code, then single steps across the system
 * call instruction. */
static void breakpoint_and_steps(void) {
    pid_t pid = fork();
    if (pid == 0) {
        if (ptrace(PTRACE_TRACEME, 0, 0, 0) != 0) _exit(100);
        raise(SIGSTOP);
        long r = ((long (*)(void))(void *)do_getpid)();
        _exit(r == getpid() ? 0 : 1);
    }
    show("stepper", wait_for(pid));
    errno = 0;
    long orig = ptrace(PTRACE_PEEKTEXT, pid, (void *)do_getpid, 0);
    CHECK(errno == 0 && (orig & 0xff) == 0xb8);
    CHECK_OK(ptrace(PTRACE_POKETEXT, pid, (void *)do_getpid, (void *)((orig & ~0xffL) | 0xcc)));
    CHECK_OK(ptrace(PTRACE_CONT, pid, 0, 0));
    int status = wait_for(pid);
    show("breakpoint", status);
    struct user_regs_struct regs;
    CHECK_OK(ptrace(PTRACE_GETREGS, pid, 0, &regs));
    CHECK(regs.rip == (unsigned long)do_getpid + 1);
    siginfo_t si;
    CHECK_OK(ptrace(PTRACE_GETSIGINFO, pid, 0, &si));
    printf("breakpoint si_code %d\n", si.si_code);
    /* The instruction back, and rip to it. */
    CHECK_OK(ptrace(PTRACE_POKETEXT, pid, (void *)do_getpid, (void *)orig));
    regs.rip = (unsigned long)do_getpid;
    CHECK_OK(ptrace(PTRACE_SETREGS, pid, 0, &regs));
    const char *names[] = {"sc_insn", "sc_after"};
    char *want[] = {sc_insn, sc_after};
    for (int i = 0; i < 2; i++) {
        CHECK_OK(ptrace(PTRACE_SINGLESTEP, pid, 0, 0));
        status = wait_for(pid);
        show("step", status);
        CHECK_OK(ptrace(PTRACE_GETREGS, pid, 0, &regs));
        printf("at %s: %d\n", names[i], regs.rip == (unsigned long)want[i]);
        CHECK_OK(ptrace(PTRACE_GETSIGINFO, pid, 0, &si));
        printf("step si_code %d\n", si.si_code);
    }
    CHECK((long)regs.rax == pid);
    CHECK_OK(ptrace(PTRACE_CONT, pid, 0, 0));
    show("stepper end", wait_for(pid));
}

/* Fork, exec and exit events; the grandchild is traced from its start. */
static void events(const char *self) {
    pid_t pid = fork();
    if (pid == 0) {
        if (ptrace(PTRACE_TRACEME, 0, 0, 0) != 0) _exit(100);
        raise(SIGSTOP);
        pid_t g = fork();
        if (g == 0) {
            execl(self, self, "exit7", (char *)NULL);
            _exit(99);
        }
        int st;
        if (waitpid(g, &st, 0) != g) _exit(101);
        _exit(WIFEXITED(st) ? WEXITSTATUS(st) + 10 : 102);
    }
    show("events", wait_for(pid));
    CHECK_OK(ptrace(PTRACE_SETOPTIONS, pid, 0,
                    PTRACE_O_TRACEFORK | PTRACE_O_TRACEEXEC | PTRACE_O_TRACEEXIT | PTRACE_O_EXITKILL));
    CHECK_OK(ptrace(PTRACE_CONT, pid, 0, 0));
    int status = wait_for(pid);
    show("parent", status);
    CHECK((status >> 8) == (SIGTRAP | (PTRACE_EVENT_FORK << 8)));
    unsigned long g = 0;
    CHECK_OK(ptrace(PTRACE_GETEVENTMSG, pid, 0, &g));
    CHECK(g > 0);
    /* The grandchild starts stopped by SIGSTOP, traced with the options. */
    show("grandchild", wait_for(g));
    CHECK_OK(ptrace(PTRACE_CONT, g, 0, 0));
    status = wait_for(g);
    show("grandchild", status);
    unsigned long former = 0;
    CHECK_OK(ptrace(PTRACE_GETEVENTMSG, g, 0, &former));
    CHECK(former == g);
    CHECK_OK(ptrace(PTRACE_CONT, g, 0, 0));
    status = wait_for(g);
    show("grandchild", status);
    unsigned long code = 0;
    CHECK_OK(ptrace(PTRACE_GETEVENTMSG, g, 0, &code));
    printf("grandchild exit message %lu\n", code);
    CHECK_OK(ptrace(PTRACE_CONT, g, 0, 0));
    /* The tracer collects it first; its parent then sees its end. */
    show("grandchild", wait_for(g));
    /* Its SIGCHLD, its exit event, its end. */
    for (int i = 0; i < 3; i++) {
        CHECK_OK(ptrace(PTRACE_CONT, pid, 0, 0));
        show("parent", wait_for(pid));
    }
}

/* Without PTRACE_O_TRACEEXEC, an exec of a tracee that was not seized
 * stops it with a SIGTRAP after the call. */
static void exec_sigtrap(const char *self) {
    pid_t pid = fork();
    if (pid == 0) {
        if (ptrace(PTRACE_TRACEME, 0, 0, 0) != 0) _exit(100);
        execl(self, self, "exit7", (char *)NULL);
        _exit(99);
    }
    int status = wait_for(pid);
    show("exec", status);
    siginfo_t si;
    CHECK_OK(ptrace(PTRACE_GETSIGINFO, pid, 0, &si));
    CHECK(si.si_signo == SIGTRAP && si.si_code == SI_USER);
    CHECK_OK(ptrace(PTRACE_CONT, pid, 0, 0));
    show("exec end", wait_for(pid));
}

/* The tracer replaces one signal with another, and suppresses one. */
static void signals(void) {
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGUSR1, on_usr1);
        signal(SIGUSR2, on_usr2);
        if (ptrace(PTRACE_TRACEME, 0, 0, 0) != 0) _exit(100);
        kill(getpid(), SIGUSR1);
        int first = got_usr1 * 10 + got_usr2;
        kill(getpid(), SIGUSR1);
        int second = got_usr1 * 10 + got_usr2;
        _exit(first == 1 && second == 1 ? 0 : 1);
    }
    int status = wait_for(pid);
    show("usr1", status);
    siginfo_t si;
    CHECK_OK(ptrace(PTRACE_GETSIGINFO, pid, 0, &si));
    CHECK(si.si_signo == SIGUSR1 && si.si_code == SI_USER);
    CHECK_ERR(ptrace(PTRACE_CONT, pid, 0, 65), EIO);
    CHECK_OK(ptrace(PTRACE_CONT, pid, 0, SIGUSR2));
    show("usr1 again", wait_for(pid));
    CHECK_OK(ptrace(PTRACE_CONT, pid, 0, 0));
    show("signals end", wait_for(pid));
}

static void show_tracer(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", pid);
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (!f) return;
    while (fgets(line, sizeof line, f)) {
        int t;
        if (sscanf(line, "TracerPid: %d", &t) == 1) printf("tracer is %s\n", t == 0 ? "none" : t == getpid() ? "me" : "other");
    }
    fclose(f);
}

/* PTRACE_SEIZE: no signal; PTRACE_INTERRUPT; group stops as
 * PTRACE_EVENT_STOP; PTRACE_LISTEN until SIGCONT; PTRACE_KILL. */
static void seize(void) {
    pid_t pid = fork();
    if (pid == 0) {
        for (;;) pause();
    }
    CHECK_ERR(ptrace(PTRACE_CONT, pid, 0, 0), ESRCH);
    CHECK_ERR(ptrace(PTRACE_SEIZE, pid, 0, 1 << 30), EIO);
    CHECK_ERR(ptrace(PTRACE_SEIZE, pid, 1, 0), EIO);
    CHECK_OK(ptrace(PTRACE_SEIZE, pid, 0, PTRACE_O_TRACESYSGOOD));
    CHECK_ERR(ptrace(PTRACE_SEIZE, pid, 0, 0), EPERM);
    CHECK_ERR(ptrace(PTRACE_GETREGS, pid, 0, &(struct user_regs_struct){0}), ESRCH);
    CHECK_OK(ptrace(PTRACE_INTERRUPT, pid, 0, 0));
    show("interrupt", wait_for(pid));
    show_tracer(pid);
    CHECK_OK(kill(pid, SIGSTOP));
    CHECK_OK(ptrace(PTRACE_CONT, pid, 0, 0));
    show("sigstop", wait_for(pid));
    CHECK_OK(ptrace(PTRACE_CONT, pid, 0, SIGSTOP));
    show("group stop", wait_for(pid));
    CHECK_OK(ptrace(PTRACE_LISTEN, pid, 0, 0));
    int status;
    CHECK(waitpid(pid, &status, WNOHANG | __WALL) == 0);
    CHECK_OK(kill(pid, SIGCONT));
    show("continued", wait_for(pid));
    CHECK_OK(ptrace(PTRACE_CONT, pid, 0, 0));
    show("sigcont", wait_for(pid));
    CHECK_OK(ptrace(PTRACE_KILL, pid, 0, 0));
    show("killed", wait_for(pid));
}

/* PTRACE_ATTACH by a process that is not the parent; the tracee detaches
 * when its tracer exits. */
static void attach(void) {
    pid_t target = fork();
    if (target == 0) {
        for (;;) pause();
    }
    pid_t tracer = fork();
    if (tracer == 0) {
        if (ptrace(PTRACE_ATTACH, getpid(), 0, 0) != -1 || errno != EPERM) _exit(1);
        if (ptrace(PTRACE_ATTACH, target, 0, 0) != 0) _exit(2);
        int status;
        if (waitpid(target, &status, 0) != target) _exit(3);
        if (!WIFSTOPPED(status) || WSTOPSIG(status) != SIGSTOP) _exit(4);
        show_tracer(target);
        fflush(stdout);
        if (ptrace(PTRACE_DETACH, target, 0, 0) != 0) _exit(5);
        if (ptrace(PTRACE_DETACH, target, 0, 0) != -1 || errno != ESRCH) _exit(6);
        if (ptrace(PTRACE_ATTACH, target, 0, 0) != 0) _exit(7);
        if (waitpid(target, &status, 0) != target) _exit(8);
        /* Exits tracing it: the target runs on. */
        _exit(0);
    }
    show("tracer", wait_for(tracer));
    show_tracer(target);
    CHECK_OK(kill(target, SIGKILL));
    show("target", wait_for(target));
}

/* What gdb asks before it runs a program: no address randomization, kept
 * across fork. */
static void no_randomization(void) {
    int old = personality(0xffffffff);
    CHECK(old == 0);
    CHECK(personality(ADDR_NO_RANDOMIZE) == old);
    CHECK(personality(0xffffffff) == (old | ADDR_NO_RANDOMIZE));
    pid_t pid = fork();
    if (pid == 0) _exit(personality(0xffffffff) == (old | ADDR_NO_RANDOMIZE) ? 0 : 1);
    int status = wait_for(pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(personality(old) == (old | ADDR_NO_RANDOMIZE));
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "exit7") == 0) return 7;
    setvbuf(stdout, NULL, _IONBF, 0);
    CHECK_ERR(ptrace(PTRACE_CONT, 999999, 0, 0), ESRCH);
    CHECK_ERR(ptrace(PTRACE_ATTACH, 999999, 0, 0), ESRCH);
    syscall_stops();
    breakpoint_and_steps();
    events(argv[0]);
    exec_sigtrap(argv[0]);
    signals();
    seize();
    attach();
    no_randomization();
    return done();
}
