/* Tries what an application could against the trap platform's stub, which
 * shares its address space: host system calls made from the stub's own code
 * (the only place its seccomp filter lets them through), a fast path's write
 * to application memory aimed at the stub's read-only page, and scribbling
 * the stub's pages. Each attempt runs in a child; the parent reports how each
 * child ended. Where nothing is mapped at the stub's addresses (natively,
 * or on a platform without stubs) the program says so and checks nothing
 * else. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

#define STUB_CODE 0x6fff00000000UL
#define STUB_CODE_SIZE 0x10000UL
#define STUB_SLOT 0x6fff01000000UL
#define STUB_MEM_FD 900

static sigjmp_buf probe_jmp;

static void on_fault(int sig) {
    (void)sig;
    siglongjmp(probe_jmp, 1);
}

/* True if `addr` can be read. */
static int readable(uintptr_t addr) {
    struct sigaction sa = {0}, old_segv, old_bus;
    sa.sa_handler = on_fault;
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
    int ok = 0;
    if (sigsetjmp(probe_jmp, 1) == 0) {
        (void)*(volatile unsigned char *)addr;
        ok = 1;
    }
    sigaction(SIGSEGV, &old_segv, NULL);
    sigaction(SIGBUS, &old_bus, NULL);
    return ok;
}

/* The address of a `syscall` instruction in the stub's code. */
static uintptr_t find_gadget(void) {
    for (uintptr_t p = STUB_CODE; p + 1 < STUB_CODE + STUB_CODE_SIZE; p++)
        if (*(volatile unsigned char *)p == 0x0f && *(volatile unsigned char *)(p + 1) == 0x05) return p;
    return 0;
}

/* Makes system call `nr` by jumping to the stub's `syscall`; only returns
 * if the stub's code let it through and then came back here (it would not:
 * the gadget is followed by the stub's own code). */
static long through_gadget(uintptr_t gadget, long nr, long a, long b, long c, long d, long e, long f) {
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    long ret;
    __asm__ volatile("sub $128, %%rsp\n" /* past the red zone */
                     "lea 1f(%%rip), %%rcx\n"
                     "push %%rcx\n"
                     "jmp *%[g]\n"
                     "1:\n"
                     "add $128, %%rsp\n"
                     : "=a"(ret)
                     : [g] "r"(gadget), "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}

/* The address of the `n`th `mov %r11, (%rdx)` in the stub's code: a fast
 * path's write to application memory. */
static uintptr_t find_write(int n) {
    for (uintptr_t p = STUB_CODE; p + 2 < STUB_CODE + STUB_CODE_SIZE; p++)
        if (*(volatile unsigned char *)p == 0x4c && *(volatile unsigned char *)(p + 1) == 0x89 &&
            *(volatile unsigned char *)(p + 2) == 0x1a && n-- == 0)
            return p;
    return 0;
}

/* Jumps to a fast path's write with rdx = `target`, r11 = `value`, rax =
 * system call `nr` and rcx the address to come back to, as the path has
 * them; returns rax as it comes back. */
static long through_write(uintptr_t write, uintptr_t target, long value, long nr) {
    register long r11 __asm__("r11") = value;
    long ret;
    __asm__ volatile("sub $128, %%rsp\n" /* past the red zone */
                     "lea 1f(%%rip), %%rcx\n"
                     "jmp *%[w]\n"
                     "1:\n"
                     "add $128, %%rsp\n"
                     : "=a"(ret), "+d"(target), "+r"(r11)
                     : [w] "r"(write), "a"(nr)
                     : "rcx", "memory");
    return ret;
}

/* A fast path's write aimed at the read-only request page faults, and its
 * fixup makes the call in rax the ordinary way: the child gets getpid's
 * answer and nothing else (it exits 3 if so). */
static void fast_path_write(uintptr_t write) {
    volatile uint32_t *count = (volatile uint32_t *)(STUB_SLOT + 4);
    long pid = through_write(write, (uintptr_t)count, 100, SYS_getpid);
    _exit(pid == getpid() ? 3 : 4);
}

static const char escaped[] = "ESCAPED: host write from the stub's code\n";

/* Runs `attempt` in a child; returns its wait status. */
static int in_child(void (*attempt)(uintptr_t), uintptr_t gadget) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        attempt(gadget);
        _exit(0);
    }
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    return status;
}

static void host_write(uintptr_t g) {
    through_gadget(g, SYS_write, 1, (long)escaped, sizeof escaped - 1, 0, 0, 0);
}

static void host_getpid(uintptr_t g) {
    through_gadget(g, SYS_getpid, 0, 0, 0, 0, 0, 0);
}

/* The one mmap the stub's control thread may make: a memory-file mapping. */
static void host_mmap(uintptr_t g) {
    through_gadget(g, SYS_mmap, 0x100000000L, 4096, 3, MAP_SHARED | MAP_FIXED, STUB_MEM_FD, 0);
}

static void host_clone(uintptr_t g) {
    through_gadget(g, SYS_clone, SIGCHLD, 0, 0, 0, 0, 0);
}

/* The request page the control thread reads is read-only. */
static void scribble_requests(uintptr_t g) {
    (void)g;
    *(volatile uint32_t *)(STUB_SLOT + 4) = 100;
    *(volatile uint32_t *)STUB_SLOT += 1;
}

static void *thread_main(void *arg) {
    return arg;
}

/* The response page and every thread area are writable: garbage there must
 * not take the sentry anywhere. The child then goes on with system calls,
 * a new thread and an exit. */
static void scribble_responses(uintptr_t g) {
    (void)g;
    for (uintptr_t p = STUB_SLOT + 4096; p < STUB_SLOT + 0x20000; p += 8) *(volatile uint64_t *)p = 0x4141414141414141UL;
    pthread_t t;
    if (pthread_create(&t, NULL, thread_main, NULL) == 0) pthread_join(t, NULL);
    printf("child after scribbling: pid %s\n", getpid() > 0 ? "ok" : "bad");
    fflush(stdout);
}

static const char *how(int status) {
    static char buf[64];
    if (WIFEXITED(status)) snprintf(buf, sizeof buf, "exited %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status)) snprintf(buf, sizeof buf, "killed by signal %d", WTERMSIG(status));
    else snprintf(buf, sizeof buf, "status %#x", status);
    return buf;
}

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (!readable(STUB_CODE)) {
        printf("no stub code mapped\n");
        return done();
    }
    uintptr_t g = find_gadget();
    CHECK(g != 0);
    if (!g) return done();
    struct {
        const char *name;
        void (*attempt)(uintptr_t);
    } attempts[] = {
        {"host write", host_write},     {"host getpid", host_getpid},
        {"host mmap", host_mmap},       {"host clone", host_clone},
        {"request page write", scribble_requests},
    };
    for (size_t i = 0; i < sizeof attempts / sizeof attempts[0]; i++) {
        int status = in_child(attempts[i].attempt, g);
        printf("%s: %s\n", attempts[i].name, how(status));
        /* A child that got through would have returned into this program
         * and exited 0. */
        CHECK(!(WIFEXITED(status) && WEXITSTATUS(status) == 0));
    }
    for (int n = 0; n < 2; n++) {
        uintptr_t w = find_write(n);
        CHECK(w != 0);
        if (!w) continue;
        int status = in_child(fast_path_write, w);
        printf("fast-path write %d to the request page: %s\n", n, how(status));
    }
    int status = in_child(scribble_responses, g);
    printf("response page garbage: %s\n", how(status));
    /* The sandbox itself is still answering. */
    CHECK(getppid() >= 0);
    printf("parent alive\n");
    return done();
}
