/* System call sites of the form `mov $nr, %eax; syscall`, which a sandbox
 * may rewrite after their first call: the calls through them answer and
 * preserve exactly what a system call does, however many threads run a
 * site while it changes, whatever signals arrive meanwhile; code that is
 * written (JIT buffers, W^X code, shared file mappings) keeps its own
 * bytes. */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <asm/prctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

/* One site per call, each the bare pattern. */
#define SITE(name, nr)                                                                              \
    static long name(void) {                                                                        \
        long r;                                                                                     \
        __asm__ volatile("mov %1, %%eax\n\tsyscall" : "=a"(r) : "i"(nr) : "rcx", "r11", "memory"); \
        return r;                                                                                   \
    }

SITE(site_gettid, SYS_gettid)
SITE(site_getppid, SYS_getppid)
SITE(site_getpid, SYS_getpid)

/* write(fd, buf, len) through its own site. */
static long site_write(int fd, const void *buf, size_t len) {
    long r;
    __asm__ volatile("mov %1, %%eax\n\tsyscall"
                     : "=a"(r)
                     : "i"(SYS_write), "D"((long)fd), "S"(buf), "d"(len)
                     : "rcx", "r11", "memory");
    return r;
}

/* read(fd, buf, len) through its own site. */
static long site_read(int fd, void *buf, size_t len) {
    long r;
    __asm__ volatile("mov %1, %%eax\n\tsyscall"
                     : "=a"(r)
                     : "i"(SYS_read), "D"((long)fd), "S"(buf), "d"(len)
                     : "rcx", "r11", "memory");
    return r;
}

/* ---- many threads through one fresh site ---- */

#define THREADS 8
#define CALLS 20000

static pthread_barrier_t start;

static void *race_gettid(void *arg) {
    (void)arg;
    long tid = syscall(SYS_gettid);
    int devnull = *(int *)arg;
    pthread_barrier_wait(&start);
    long wrong = 0, short_writes = 0;
    for (int i = 0; i < CALLS; i++) {
        if (site_gettid() != tid)
            wrong++;
        if (site_write(devnull, "abc", 3) != 3)
            short_writes++;
    }
    CHECK(wrong == 0);
    CHECK(short_writes == 0);
    return NULL;
}

static void threads_race_through_fresh_sites(void) {
    int devnull = open("/dev/null", O_WRONLY);
    CHECK(devnull >= 0);
    pthread_t t[THREADS];
    pthread_barrier_init(&start, NULL, THREADS);
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, race_gettid, &devnull) == 0);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    close(devnull);
    printf("%d threads made %d calls each through two fresh sites\n", THREADS, 2 * CALLS);
}

/* ---- what a call leaves in the registers and below the stack ---- */

struct regs {
    uint64_t rbx, rbp, rsi, rdi, rdx, r8, r9, r10, r12, r13, r14, r15, rcx, r11, flags, red[16];
    uint8_t xmm[16][16];
    uint64_t expected_rcx;
};

static const uint8_t xmm_pattern[16][16] = {
    {1, 2, 3},    {4, 5, 6},    {7, 8, 9},    {10, 11, 12}, {13, 14, 15}, {16, 17, 18}, {19, 20, 21}, {22, 23, 24},
    {25, 26, 27}, {28, 29, 30}, {31, 32, 33}, {34, 35, 36}, {37, 38, 39}, {40, 41, 42}, {43, 44, 45}, {46, 47, 48},
};

/* capture(out, nr): sets every register to a pattern, fills the red zone
 * and the vector registers, makes getppid (nr 110) or write(-1, ..., 0)
 * (nr 1) through its own site, and saves what is left, before touching
 * the stack. */
void capture(struct regs *out, long nr);
__asm__(".text\n"
        ".globl capture\n"
        "capture:\n"
        "push %rbp\n push %rbx\n push %r12\n push %r13\n push %r14\n push %r15\n"
        "push %rdi\n push %rsi\n" /* 8(%rsp) = out, (%rsp) = nr */
        "lea xmm_pattern(%rip), %rax\n"
        ".irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n movdqu 16*\\n(%rax), %xmm\\n\n .endr\n"
        ".set j, 1\n .rept 16\n mov $0x5a5a000000000000 + j, %rdx\n mov %rdx, -8*j(%rsp)\n .set j, j+1\n .endr\n"
        "mov $0x1111111111111111, %rbx\n mov $0x2222222222222222, %rbp\n"
        "mov $0x3333333333333333, %rsi\n mov $-1, %rdi\n mov $0, %rdx\n"
        "mov $0x8888888888888888, %r8\n mov $0x9999999999999999, %r9\n mov $0xaaaaaaaaaaaaaaaa, %r10\n"
        "mov $0xcccccccccccccccc, %r12\n mov $0xdddddddddddddddd, %r13\n"
        "mov $0xeeeeeeeeeeeeeeee, %r14\n mov $0xffffffffffffffff, %r15\n"
        "cmpq $1, (%rsp)\n je 3f\n"
        "mov $110, %eax\n syscall\n"
        "2: jmp 4f\n"
        "3: mov $1, %eax\n syscall\n"
        "5:\n"
        "4: mov 8(%rsp), %rax\n"
        "mov %rbx, 0(%rax)\n mov %rbp, 8(%rax)\n mov %rsi, 16(%rax)\n mov %rdi, 24(%rax)\n"
        "mov %rdx, 32(%rax)\n mov %r8, 40(%rax)\n mov %r9, 48(%rax)\n mov %r10, 56(%rax)\n"
        "mov %r12, 64(%rax)\n mov %r13, 72(%rax)\n mov %r14, 80(%rax)\n mov %r15, 88(%rax)\n"
        "mov %rcx, 96(%rax)\n mov %r11, 104(%rax)\n"
        ".set j, 1\n .rept 16\n mov -8*j(%rsp), %rdx\n mov %rdx, 120+8*(j-1)(%rax)\n .set j, j+1\n .endr\n"
        ".irp n, 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15\n movdqu %xmm\\n, 248+16*\\n(%rax)\n .endr\n"
        "pushfq\n pop %rdx\n mov %rdx, 112(%rax)\n"
        "lea 2b(%rip), %rdx\n lea 5b(%rip), %rcx\n cmpq $1, (%rsp)\n cmove %rcx, %rdx\n mov %rdx, 504(%rax)\n"
        "add $16, %rsp\n"
        "pop %r15\n pop %r14\n pop %r13\n pop %r12\n pop %rbx\n pop %rbp\n"
        "ret\n");

static void calls_preserve_what_a_syscall_preserves(void) {
    long nrs[2] = {110, 1};
    for (int k = 0; k < 2; k++) {
        int bad = 0;
        /* The first call may trap, the later ones go through the rewrite. */
        for (int i = 0; i < 50; i++) {
            struct regs r;
            memset(&r, 0, sizeof r);
            capture(&r, nrs[k]);
            int ok = r.rbx == 0x1111111111111111 && r.rbp == 0x2222222222222222 && r.rsi == 0x3333333333333333 &&
                     r.rdi == (uint64_t)-1 && r.rdx == 0 && r.r8 == 0x8888888888888888 &&
                     r.r9 == 0x9999999999999999 && r.r10 == 0xaaaaaaaaaaaaaaaa && r.r12 == 0xcccccccccccccccc &&
                     r.r13 == 0xdddddddddddddddd && r.r14 == 0xeeeeeeeeeeeeeeee && r.r15 == 0xffffffffffffffff;
            ok = ok && r.rcx == r.expected_rcx && (r.r11 & 0xcd5) == (r.flags & 0xcd5);
            for (int j = 0; j < 16; j++)
                ok = ok && r.red[j] == 0x5a5a000000000000ull + (uint64_t)(j + 1);
            ok = ok && memcmp(r.xmm, xmm_pattern, sizeof xmm_pattern) == 0;
            if (!ok) {
                bad++;
                if (bad == 1)
                    fprintf(stderr, "nr %ld call %d: rcx %lx expected %lx r11 %lx flags %lx\n", nrs[k], i,
                            (unsigned long)r.rcx, (unsigned long)r.expected_rcx, (unsigned long)r.r11,
                            (unsigned long)r.flags);
            }
        }
        CHECK(bad == 0);
        printf("nr %ld: registers, red zone and vector registers kept over 50 calls\n", nrs[k]);
    }
}

/* ---- signals while threads run through rewritten sites ---- */

static volatile sig_atomic_t handled;
static volatile int stop_spinning;

static void on_usr1(int sig) {
    (void)sig;
    handled++;
}

static void *spin_on_getppid(void *arg) {
    (void)arg;
    long ppid = getppid(), wrong = 0;
    while (!stop_spinning)
        if (site_getppid() != ppid)
            wrong++;
    CHECK(wrong == 0);
    return NULL;
}

static void *spin_on_write(void *arg) {
    int fd = *(int *)arg;
    long wrong = 0;
    while (!stop_spinning)
        if (site_write(fd, "x", 1) != 1)
            wrong++;
    CHECK(wrong == 0);
    return NULL;
}

static void signals_reach_threads_in_calls(void) {
    struct sigaction sa = {0};
    sa.sa_handler = on_usr1;
    CHECK_OK(sigaction(SIGUSR1, &sa, NULL));
    int devnull = open("/dev/null", O_WRONLY);
    void *(*loops[2])(void *) = {spin_on_getppid, spin_on_write};
    const char *what[2] = {"getppid", "write"};
    for (int k = 0; k < 2; k++) {
        stop_spinning = 0;
        pthread_t t;
        CHECK(pthread_create(&t, NULL, loops[k], &devnull) == 0);
        for (int i = 0; i < 300; i++) {
            int before = handled;
            CHECK(pthread_kill(t, SIGUSR1) == 0);
            while (handled == before) {
            }
        }
        stop_spinning = 1;
        pthread_join(t, NULL);
        printf("300 signals handled by a thread calling %s in a loop\n", what[k]);
    }
    close(devnull);
}

/* A thread with its own gs base: calls through rewritten sites still
 * answer, and gs stays its own. */
static uint64_t gs_block[2] = {0x1234567890abcdefull, 42};

static void own_gs_base(void) {
    int devnull = open("/dev/null", O_WRONLY);
    long pid = getpid();
    for (int i = 0; i < 3; i++) {
        CHECK(site_getpid() == pid);
        CHECK(site_write(devnull, "x", 1) == 1);
    }
    CHECK_OK(syscall(SYS_arch_prctl, ARCH_SET_GS, (unsigned long)gs_block));
    int bad = 0;
    for (int i = 0; i < 100; i++) {
        uint64_t v;
        __asm__ volatile("mov %%gs:0, %0" : "=r"(v));
        if (site_getpid() != pid || site_write(devnull, "x", 1) != 1 || v != gs_block[0])
            bad++;
    }
    CHECK(bad == 0);
    unsigned long now = 0;
    CHECK_OK(syscall(SYS_arch_prctl, ARCH_GET_GS, &now));
    CHECK(now == (unsigned long)gs_block);
    CHECK_OK(syscall(SYS_arch_prctl, ARCH_SET_GS, 0UL));
    CHECK(site_getpid() == pid);
    close(devnull);
    printf("calls with the program's own gs base kept it and answered\n");
}

/* A read through a rewritten site, interrupted by a handled signal with
 * SA_RESTART, goes on and returns the data written after. */
static int restart_pipe[2];
static pthread_t reader;
static volatile int reader_tid;

static int sleeping(int tid) {
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    long n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && p[2] == 'S';
}

static void *interrupt_then_write(void *arg) {
    (void)arg;
    while (!reader_tid || !sleeping(reader_tid)) {
        sched_yield();
    }
    int before = handled;
    CHECK(pthread_kill(reader, SIGUSR1) == 0);
    while (handled == before)
        sched_yield();
    CHECK(write(restart_pipe[1], "z", 1) == 1);
    return NULL;
}

static void restarted_calls_through_rewritten_sites(void) {
    struct sigaction sa = {0};
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    CHECK_OK(sigaction(SIGUSR1, &sa, NULL));
    CHECK_OK(pipe(restart_pipe));
    char c = 0;
    /* Once with data waiting: the site is rewritten. */
    CHECK(write(restart_pipe[1], "y", 1) == 1);
    CHECK(site_read(restart_pipe[0], &c, 1) == 1 && c == 'y');
    reader = pthread_self();
    pthread_t t;
    CHECK(pthread_create(&t, NULL, interrupt_then_write, NULL) == 0);
    reader_tid = (int)syscall(SYS_gettid);
    CHECK(site_read(restart_pipe[0], &c, 1) == 1 && c == 'z');
    pthread_join(t, NULL);
    close(restart_pipe[0]);
    close(restart_pipe[1]);
    printf("a read interrupted by a handled signal was restarted and got %c\n", c);
}

/* ---- code the program writes ---- */

static const uint8_t getpid_code[] = {0xb8, SYS_getpid, 0, 0, 0, 0x0f, 0x05, 0xc3};

static void print_bytes(const char *what, const uint8_t *p) {
    printf("%s:", what);
    for (int i = 0; i < 8; i++)
        printf(" %02x", p[i]);
    printf("\n");
}

static void jit_code(void) {
    /* Writable and executable at once. */
    uint8_t *rwx = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(rwx != MAP_FAILED);
    memcpy(rwx, getpid_code, sizeof getpid_code);
    long (*fn)(void) = (long (*)(void))rwx;
    for (int i = 0; i < 10; i++)
        CHECK(fn() == getpid());
    print_bytes("rwx code after 10 calls", rwx);
    rwx[1] = SYS_getppid;
    __builtin___clear_cache((char *)rwx, (char *)rwx + 8);
    CHECK(fn() == getppid());
    munmap(rwx, 4096);

    /* Written, then executable, then written again (W^X). */
    uint8_t *wx = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(wx != MAP_FAILED);
    memcpy(wx, getpid_code, sizeof getpid_code);
    CHECK_OK(mprotect(wx, 4096, PROT_READ | PROT_EXEC));
    fn = (long (*)(void))wx;
    for (int i = 0; i < 10; i++)
        CHECK(fn() == getpid());
    CHECK_OK(mprotect(wx, 4096, PROT_READ | PROT_WRITE));
    print_bytes("W^X code made writable again", wx);
    wx[1] = SYS_getppid;
    CHECK_OK(mprotect(wx, 4096, PROT_READ | PROT_EXEC));
    for (int i = 0; i < 10; i++)
        CHECK(fn() == getppid());
    munmap(wx, 4096);
}

static void file_code(void) {
    int fd = memfd_create("code", 0);
    CHECK(fd >= 0);
    CHECK(write(fd, getpid_code, sizeof getpid_code) == (long)sizeof getpid_code);
    CHECK_OK(ftruncate(fd, 4096));
    int flags[2] = {MAP_SHARED, MAP_PRIVATE};
    for (int k = 0; k < 2; k++) {
        uint8_t *code = mmap(NULL, 4096, PROT_READ | PROT_EXEC, flags[k], fd, 0);
        CHECK(code != MAP_FAILED);
        long (*fn)(void) = (long (*)(void))code;
        for (int i = 0; i < 10; i++)
            CHECK(fn() == getpid());
        munmap(code, 4096);
        uint8_t now[8];
        CHECK(pread(fd, now, 8, 0) == 8);
        print_bytes(k == 0 ? "file after 10 calls from a shared mapping" : "file after 10 calls from a private mapping",
                    now);
    }
    close(fd);
}

/* ---- fork ---- */

static void forked_child_uses_rewritten_sites(void) {
    long parent_pid = site_getpid();
    pid_t pid = fork();
    if (pid == 0) {
        int ok = site_getpid() == getpid() && site_getppid() == parent_pid && site_gettid() == getpid();
        _exit(ok ? 0 : 1);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(site_getpid() == parent_pid);
    printf("a forked child's calls through its parent's sites answer for the child\n");
}

/* A vfork child shares its parent's address space, rewritten sites and
 * all, but is a process of its own. */
static void vfork_child_is_itself(void) {
    long parent_pid = site_getpid();
    CHECK(site_getpid() == parent_pid);
    pid_t pid = vfork();
    if (pid == 0) {
        long me = syscall(SYS_getpid);
        _exit(site_getpid() == me && site_getppid() == parent_pid ? 0 : 1);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(site_getpid() == parent_pid);
    printf("a vfork child's calls through its parent's sites answer for the child\n");
}

int main(void) {
    threads_race_through_fresh_sites();
    calls_preserve_what_a_syscall_preserves();
    signals_reach_threads_in_calls();
    own_gs_base();
    restarted_calls_through_rewritten_sites();
    jit_code();
    file_code();
    forked_child_uses_rewritten_sites();
    vfork_child_is_itself();
    return done();
}
