/* Floating-point and vector state across signal handlers: values in the
 * zmm (AVX-512), ymm (AVX) and xmm registers, the x87 stack and control word,
 * and MXCSR survive a handler that clobbers them all; the handler starts
 * with a clean state (default MXCSR and x87 control word); the saved state
 * in the frame is visible (and editable) through the ucontext. Without AVX
 * the ymm part is skipped, with the same output; so is the zmm part
 * without AVX-512. */
#include <cpuid.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "t.h"

static int have_avx(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    if (!(c & bit_AVX) || !(c & bit_OSXSAVE)) return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 6) == 6;
}

static int have_avx512(void) {
    unsigned a, b, c, d;
    if (!have_avx() || !__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(b & bit_AVX512F)) return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 0xe6) == 0xe6;
}

static volatile int handler_mxcsr, handler_fcw, handler_ran;

__attribute__((target("avx512f"))) static void clobber_avx512(void) {
    __asm__ volatile("vpternlogd $0xff, %%zmm0, %%zmm0, %%zmm0\n\t"
                     "vmovdqa64 %%zmm0, %%zmm16\n\tvmovdqa64 %%zmm0, %%zmm31\n\t"
                     "kxnorw %%k0, %%k0, %%k1" ::
                         : "xmm0", "xmm16", "xmm31", "k1");
}

/* Clobbers every vector register and the x87 state. */
static void clobber(int sig, siginfo_t *si, void *uc) {
    uint32_t mx;
    uint16_t cw;
    __asm__ volatile("stmxcsr %0" : "=m"(mx));
    __asm__ volatile("fnstcw %0" : "=m"(cw));
    handler_mxcsr = mx;
    handler_fcw = cw;
    if (have_avx()) {
        __asm__ volatile("vpcmpeqb %%ymm0, %%ymm0, %%ymm0\n\t"
                         "vmovdqa %%ymm0, %%ymm1\n\tvmovdqa %%ymm0, %%ymm2\n\tvmovdqa %%ymm0, %%ymm3\n\t"
                         "vmovdqa %%ymm0, %%ymm8\n\tvmovdqa %%ymm0, %%ymm15\n\t" ::
                             : "xmm0", "xmm1", "xmm2", "xmm3", "xmm8", "xmm15");
    } else {
        __asm__ volatile("pcmpeqb %%xmm0, %%xmm0\n\tmovdqa %%xmm0, %%xmm1\n\tmovdqa %%xmm0, %%xmm15" ::
                             : "xmm0", "xmm1", "xmm15");
    }
    if (have_avx512()) clobber_avx512();
    uint32_t bad = 0x1f80 ^ 0x6000; /* round toward zero */
    __asm__ volatile("ldmxcsr %0" ::"m"(bad));
    uint16_t badcw = 0x0c7f;
    __asm__ volatile("fldcw %0" ::"m"(badcw));
    __asm__ volatile("fld1\n\tfld1\n\tfld1" ::: "st", "st(1)", "st(2)");
    handler_ran++;
}

static void install(void (*h)(int, siginfo_t *, void *), int sig) {
    struct sigaction sa = {0};
    sa.sa_sigaction = h;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    CHECK_OK(sigaction(sig, &sa, NULL));
}

/* Raises SIGUSR1 with a raw tgkill, with ymm0..3, ymm8, ymm15 loaded from
 * `in`, and stores them to `out` right after. No compiler-generated code
 * runs in between, so nothing else touches the registers. */
static void avx_round_trip(const uint8_t in[6][32], uint8_t out[6][32]) {
    long pid = getpid(), tid = syscall(SYS_gettid);
    __asm__ volatile("vmovdqu 0(%[in]), %%ymm0\n\t"
                     "vmovdqu 32(%[in]), %%ymm1\n\t"
                     "vmovdqu 64(%[in]), %%ymm2\n\t"
                     "vmovdqu 96(%[in]), %%ymm3\n\t"
                     "vmovdqu 128(%[in]), %%ymm8\n\t"
                     "vmovdqu 160(%[in]), %%ymm15\n\t"
                     "mov %[nr], %%eax\n\t"
                     "mov %[pid], %%rdi\n\t"
                     "mov %[tid], %%rsi\n\t"
                     "mov %[sig], %%edx\n\t"
                     "syscall\n\t"
                     "vmovdqu %%ymm0, 0(%[out])\n\t"
                     "vmovdqu %%ymm1, 32(%[out])\n\t"
                     "vmovdqu %%ymm2, 64(%[out])\n\t"
                     "vmovdqu %%ymm3, 96(%[out])\n\t"
                     "vmovdqu %%ymm8, 128(%[out])\n\t"
                     "vmovdqu %%ymm15, 160(%[out])\n\t"
                     :
                     : [in] "r"(in), [out] "r"(out), [nr] "i"(SYS_tgkill), [pid] "r"(pid), [tid] "r"(tid),
                       [sig] "i"(SIGUSR1)
                     : "rax", "rdi", "rsi", "rdx", "rcx", "r11", "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm8",
                       "xmm15");
}

/* zmm0, zmm16, zmm31 and the mask register k1 (AVX-512). */
__attribute__((target("avx512f"), noinline)) static void avx512_round_trip(const uint8_t in[3][64], uint8_t out[3][64], uint16_t *k) {
    long pid = getpid(), tid = syscall(SYS_gettid);
    __asm__ volatile("vmovdqu64 0(%[in]), %%zmm0\n\t"
                     "vmovdqu64 64(%[in]), %%zmm16\n\t"
                     "vmovdqu64 128(%[in]), %%zmm31\n\t"
                     "kmovw (%[k]), %%k1\n\t"
                     "mov %[nr], %%eax\n\t"
                     "mov %[pid], %%rdi\n\t"
                     "mov %[tid], %%rsi\n\t"
                     "mov %[sig], %%edx\n\t"
                     "syscall\n\t"
                     "vmovdqu64 %%zmm0, 0(%[out])\n\t"
                     "vmovdqu64 %%zmm16, 64(%[out])\n\t"
                     "vmovdqu64 %%zmm31, 128(%[out])\n\t"
                     "kmovw %%k1, (%[k])\n\t"
                     :
                     : [in] "r"(in), [out] "r"(out), [k] "r"(k), [nr] "i"(SYS_tgkill), [pid] "r"(pid),
                       [tid] "r"(tid), [sig] "i"(SIGUSR1)
                     : "rax", "rdi", "rsi", "rdx", "rcx", "r11", "memory", "xmm0", "xmm16", "xmm31", "k1");
}

static void sse_round_trip(const uint8_t in[3][16], uint8_t out[3][16]) {
    long pid = getpid(), tid = syscall(SYS_gettid);
    __asm__ volatile("movdqu 0(%[in]), %%xmm0\n\t"
                     "movdqu 16(%[in]), %%xmm1\n\t"
                     "movdqu 32(%[in]), %%xmm15\n\t"
                     "mov %[nr], %%eax\n\t"
                     "mov %[pid], %%rdi\n\t"
                     "mov %[tid], %%rsi\n\t"
                     "mov %[sig], %%edx\n\t"
                     "syscall\n\t"
                     "movdqu %%xmm0, 0(%[out])\n\t"
                     "movdqu %%xmm1, 16(%[out])\n\t"
                     "movdqu %%xmm15, 32(%[out])\n\t"
                     :
                     : [in] "r"(in), [out] "r"(out), [nr] "i"(SYS_tgkill), [pid] "r"(pid), [tid] "r"(tid),
                       [sig] "i"(SIGUSR1)
                     : "rax", "rdi", "rsi", "rdx", "rcx", "r11", "memory", "xmm0", "xmm1", "xmm15");
}

/* A handler that rewrites the saved xmm0 in the frame: after sigreturn
 * the interrupted code sees the new value. */
static void edit_frame(int sig, siginfo_t *si, void *p) {
    ucontext_t *uc = p;
    struct _libc_fpstate *fp = uc->uc_mcontext.fpregs;
    for (int i = 0; i < 4; i++) fp->_xmm[0].element[i] = 0x5a5a5a5a;
    handler_ran++;
}

int main(void) {
    install(clobber, SIGUSR1);

    /* x87 and MXCSR: a non-default state survives, the handler starts
     * with the defaults. */
    uint32_t mx = 0x1f80 | 0x2000; /* round down */
    __asm__ volatile("ldmxcsr %0" ::"m"(mx));
    uint16_t cw = 0x037f & ~0x0300; /* single precision */
    __asm__ volatile("fldcw %0" ::"m"(cw));
    volatile long double x = 3.0L;
    raise(SIGUSR1);
    uint32_t mx_after;
    uint16_t cw_after;
    __asm__ volatile("stmxcsr %0" : "=m"(mx_after));
    __asm__ volatile("fnstcw %0" : "=m"(cw_after));
    CHECK(handler_ran == 1);
    CHECK(mx_after == mx);
    CHECK(cw_after == cw);
    CHECK(handler_mxcsr == 0x1f80);
    CHECK(handler_fcw == 0x037f);
    CHECK(x == 3.0L);
    mx = 0x1f80;
    __asm__ volatile("ldmxcsr %0" ::"m"(mx));
    cw = 0x037f;
    __asm__ volatile("fldcw %0" ::"m"(cw));

    /* The x87 register stack: values pushed before survive. */
    double a = 1.5, b = 2.25, r1, r2;
    handler_ran = 0;
    __asm__ volatile("fldl %[a]\n\tfldl %[b]\n\t"
                     "mov %[nr], %%eax\n\tmov %[pid], %%rdi\n\tmov %[sig], %%esi\n\tsyscall\n\t"
                     "fstpl %[r2]\n\tfstpl %[r1]"
                     : [r1] "=m"(r1), [r2] "=m"(r2)
                     : [a] "m"(a), [b] "m"(b), [nr] "i"(SYS_kill), [pid] "r"((long)getpid()), [sig] "i"(SIGUSR1)
                     : "rax", "rdi", "rsi", "rcx", "r11", "memory", "st", "st(1)");
    CHECK(handler_ran == 1);
    CHECK(r1 == 1.5 && r2 == 2.25);

    /* xmm registers. */
    uint8_t sin[3][16], sout[3][16];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 16; j++) sin[i][j] = (uint8_t)(i * 16 + j + 1);
    handler_ran = 0;
    sse_round_trip(sin, sout);
    CHECK(handler_ran == 1);
    CHECK(memcmp(sin, sout, sizeof sin) == 0);

    /* ymm registers, upper halves included. */
    if (have_avx()) {
        uint8_t in[6][32], out[6][32];
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 32; j++) in[i][j] = (uint8_t)(i * 32 + j + 7);
        handler_ran = 0;
        avx_round_trip(in, out);
        CHECK(handler_ran == 1);
        CHECK(memcmp(in, out, sizeof in) == 0);
        /* Many times, to catch state leaking between deliveries. */
        int ok = 1;
        for (int k = 0; k < 200; k++) {
            in[k % 6][k % 32] ^= 0xff;
            avx_round_trip(in, out);
            if (memcmp(in, out, sizeof in) != 0) ok = 0;
        }
        CHECK(ok);
    } else {
        t_checks += 3;
    }
    /* zmm registers and an opmask, where the CPU has AVX-512. */
    if (have_avx512()) {
        uint8_t in[3][64], out[3][64];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 64; j++) in[i][j] = (uint8_t)(i * 64 + j + 3);
        uint16_t k = 0x1234;
        handler_ran = 0;
        avx512_round_trip(in, out, &k);
        CHECK(handler_ran == 1);
        CHECK(memcmp(in, out, sizeof in) == 0);
        CHECK(k == 0x1234);
    } else {
        t_checks += 3;
    }

    /* The saved state is the one sigreturn restores. */
    install(edit_frame, SIGUSR1);
    handler_ran = 0;
    sse_round_trip(sin, sout);
    CHECK(handler_ran == 1);
    uint32_t w;
    memcpy(&w, sout[0], 4);
    CHECK(w == 0x5a5a5a5a);
    CHECK(memcmp(sin[1], sout[1], 16) == 0);
    return done();
}
