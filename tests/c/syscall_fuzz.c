/* A system call fuzzer: many processes and threads at once make random
 * system calls with random and adversarial arguments, and the sandbox
 * around them must neither panic nor hang.
 *
 *   syscall_fuzz SEED CALLS [WORKERS [THREADS [PER_THREAD [PROGRESS]]]]
 *
 * The run is a series of batches, until CALLS calls were made. Each batch
 * forks WORKERS worker processes; each worker opens a few descriptors of
 * every kind, maps an arena (a read-write buffer ending at a PROT_NONE
 * guard page, a read-only page, a hole nothing is mapped at) and starts
 * THREADS threads that each make PER_THREAD calls: a number from the whole
 * table (and some past it), each argument drawn from a typed generator
 * (descriptors, pointers into every part of the arena and outside it,
 * lengths, flag bits, paths, signals...) chosen by what the call takes
 * or, half the time, at random. Now and then a worker execs itself and
 * goes on as a new worker, in whatever state the calls left it. The seed
 * makes every thread's stream of calls the same from run to run (their
 * interleaving, and so where a batch ends, is not).
 *
 * Workers may die of what they do, or stop; that is a fine outcome. What
 * must not happen: a worker that cannot be ended (each batch has a
 * watchdog) or a sandbox that fails. Blocking calls are interrupted by a
 * signal the worker's supervising thread sends every few milliseconds,
 * and a batch is cut short after a few seconds, so a call that blocks
 * forever costs little.
 *
 * The calls a worker makes never reach the process that runs the batches:
 * every argument naming a process names the worker itself, a descriptor
 * for it, or nobody (and no worker asks its parent to trace it); workers run in a session of their own with their
 * standard descriptors on /dev/null, so the output is the final summary
 * alone; paths name nothing that could be executed.
 *
 * Workers give up CAP_SYS_ADMIN, as a container runtime's default set
 * leaves it out: with it, their mount and umount2 calls would take /dev
 * and /proc away from every later batch, whose workers could then not
 * even open /dev/null. The calls still run, and fail as Linux's do.
 *
 * There is no native mode. As the caller's user (root, in a container)
 * these calls would reboot, unmount, set the clock, kill every process and
 * write wherever they can; the sandbox is the guard, so the program refuses
 * to run outside it.
 *
 * With PROGRESS > 0, a line every PROGRESS batches tells the calls reached
 * so far (for long runs by hand). The last line of output is the summary
 * the test checks:
 *   fuzz: seed S: N calls reached in B batches ...; H hung */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Numbers newer than the C library's headers. */
#ifndef __NR_cachestat
#define __NR_cachestat 451
#endif
#ifndef __NR_fchmodat2
#define __NR_fchmodat2 452
#endif
#ifndef __NR_map_shadow_stack
#define __NR_map_shadow_stack 453
#endif
#ifndef __NR_futex_wake
#define __NR_futex_wake 454
#endif
#ifndef __NR_futex_wait
#define __NR_futex_wait 455
#endif
#ifndef __NR_futex_requeue
#define __NR_futex_requeue 456
#endif
#ifndef __NR_mseal
#define __NR_mseal 462
#endif

/* Past the last system call Linux has, so unknown numbers are tried. */
#define MAX_NR 470

/* What each argument of a call is, one letter per argument:
 *   f descriptor      d directory descriptor (or AT_FDCWD)
 *   b buffer          p pointer (to a structure, in or out)
 *   a address (of the arena, or anywhere)     l length or count
 *   x flags           i small integer         s path
 *   v iovec array     t timeout               S signal number
 *   m mode            u user or group id
 *   P process: always the worker itself, one of its threads, its group, a
 *     descriptor for it or nobody, never random: these arguments could
 *     otherwise signal, trace or limit the process running the batches. */
static const char *const signatures[MAX_NR] = {
    [__NR_read] = "fbl",
    [__NR_write] = "fbl",
    [__NR_open] = "sxm",
    [__NR_close] = "f",
    [__NR_stat] = "sp",
    [__NR_fstat] = "fp",
    [__NR_lstat] = "sp",
    [__NR_poll] = "pli",
    [__NR_lseek] = "fli",
    [__NR_mmap] = "alxxfl",
    [__NR_mprotect] = "alx",
    [__NR_munmap] = "al",
    [__NR_brk] = "a",
    [__NR_rt_sigaction] = "Sppl",
    [__NR_rt_sigprocmask] = "ippl",
    [__NR_rt_sigreturn] = "",
    [__NR_ioctl] = "fxp",
    [__NR_pread64] = "fbll",
    [__NR_pwrite64] = "fbll",
    [__NR_readv] = "fvl",
    [__NR_writev] = "fvl",
    [__NR_access] = "sx",
    [__NR_pipe] = "p",
    [__NR_select] = "lpppt",
    [__NR_mremap] = "allxa",
    [__NR_msync] = "alx",
    [__NR_mincore] = "alp",
    [__NR_madvise] = "ali",
    [__NR_shmget] = "ilx",
    [__NR_shmat] = "iax",
    [__NR_shmctl] = "iip",
    [__NR_dup] = "f",
    [__NR_dup2] = "ff",
    [__NR_nanosleep] = "tp",
    [__NR_getitimer] = "ip",
    [__NR_alarm] = "i",
    [__NR_setitimer] = "ipp",
    [__NR_sendfile] = "ffpl",
    [__NR_socket] = "iii",
    [__NR_connect] = "fpl",
    [__NR_accept] = "fpp",
    [__NR_sendto] = "fblxpl",
    [__NR_recvfrom] = "fblxpp",
    [__NR_sendmsg] = "fpx",
    [__NR_recvmsg] = "fpx",
    [__NR_shutdown] = "fi",
    [__NR_bind] = "fpl",
    [__NR_listen] = "fi",
    [__NR_getsockname] = "fpp",
    [__NR_getpeername] = "fpp",
    [__NR_socketpair] = "iiip",
    [__NR_setsockopt] = "fiipl",
    [__NR_getsockopt] = "fiipp",
    [__NR_clone] = "xpppx",
    [__NR_execve] = "spp",
    [__NR_wait4] = "ipxp",
    [__NR_kill] = "PS",
    [__NR_uname] = "p",
    [__NR_semget] = "iix",
    [__NR_semop] = "ipl",
    [__NR_semctl] = "iiip",
    [__NR_shmdt] = "a",
    [__NR_msgget] = "ix",
    [__NR_msgsnd] = "iblx",
    [__NR_msgrcv] = "iblix",
    [__NR_msgctl] = "iip",
    [__NR_fcntl] = "fip",
    [__NR_flock] = "fx",
    [__NR_fsync] = "f",
    [__NR_fdatasync] = "f",
    [__NR_truncate] = "sl",
    [__NR_ftruncate] = "fl",
    [__NR_getdents] = "fbl",
    [__NR_getcwd] = "bl",
    [__NR_chdir] = "s",
    [__NR_fchdir] = "f",
    [__NR_rename] = "ss",
    [__NR_mkdir] = "sm",
    [__NR_rmdir] = "s",
    [__NR_creat] = "sm",
    [__NR_link] = "ss",
    [__NR_unlink] = "s",
    [__NR_symlink] = "ss",
    [__NR_readlink] = "sbl",
    [__NR_chmod] = "sm",
    [__NR_fchmod] = "fm",
    [__NR_chown] = "suu",
    [__NR_fchown] = "fuu",
    [__NR_lchown] = "suu",
    [__NR_umask] = "m",
    [__NR_gettimeofday] = "pp",
    [__NR_getrlimit] = "ip",
    [__NR_getrusage] = "ip",
    [__NR_sysinfo] = "p",
    [__NR_times] = "p",
    [__NR_ptrace] = "iPpp",
    [__NR_syslog] = "ibl",
    [__NR_setuid] = "u",
    [__NR_setgid] = "u",
    [__NR_setpgid] = "PP",
    [__NR_setreuid] = "uu",
    [__NR_setregid] = "uu",
    [__NR_getgroups] = "lp",
    [__NR_setgroups] = "lp",
    [__NR_setresuid] = "uuu",
    [__NR_getresuid] = "ppp",
    [__NR_setresgid] = "uuu",
    [__NR_getresgid] = "ppp",
    [__NR_getpgid] = "P",
    [__NR_setfsuid] = "u",
    [__NR_setfsgid] = "u",
    [__NR_getsid] = "P",
    [__NR_capget] = "pp",
    [__NR_capset] = "pp",
    [__NR_rt_sigpending] = "pl",
    [__NR_rt_sigtimedwait] = "pptl",
    [__NR_rt_sigqueueinfo] = "PSp",
    [__NR_rt_sigsuspend] = "pl",
    [__NR_sigaltstack] = "pp",
    [__NR_utime] = "sp",
    [__NR_mknod] = "smi",
    [__NR_personality] = "x",
    [__NR_statfs] = "sp",
    [__NR_fstatfs] = "fp",
    [__NR_getpriority] = "iP",
    [__NR_setpriority] = "iPi",
    [__NR_sched_setparam] = "Pp",
    [__NR_sched_getparam] = "Pp",
    [__NR_sched_setscheduler] = "Pip",
    [__NR_sched_getscheduler] = "P",
    [__NR_sched_get_priority_max] = "i",
    [__NR_sched_get_priority_min] = "i",
    [__NR_sched_rr_get_interval] = "Pp",
    [__NR_mlock] = "al",
    [__NR_munlock] = "al",
    [__NR_mlockall] = "x",
    [__NR_modify_ldt] = "ipl",
    [__NR_pivot_root] = "ss",
    [__NR_prctl] = "ixxxx",
    [__NR_arch_prctl] = "ia",
    [__NR_adjtimex] = "p",
    [__NR_setrlimit] = "ip",
    [__NR_chroot] = "s",
    [__NR_acct] = "s",
    [__NR_settimeofday] = "pp",
    [__NR_mount] = "sssxp",
    [__NR_umount2] = "sx",
    [__NR_swapon] = "sx",
    [__NR_swapoff] = "s",
    [__NR_reboot] = "xxxp",
    [__NR_sethostname] = "bl",
    [__NR_setdomainname] = "bl",
    [__NR_iopl] = "i",
    [__NR_ioperm] = "lli",
    [__NR_readahead] = "fll",
    [__NR_setxattr] = "ssblx",
    [__NR_lsetxattr] = "ssblx",
    [__NR_fsetxattr] = "fsblx",
    [__NR_getxattr] = "ssbl",
    [__NR_lgetxattr] = "ssbl",
    [__NR_fgetxattr] = "fsbl",
    [__NR_listxattr] = "sbl",
    [__NR_llistxattr] = "sbl",
    [__NR_flistxattr] = "fbl",
    [__NR_removexattr] = "ss",
    [__NR_lremovexattr] = "ss",
    [__NR_fremovexattr] = "fs",
    [__NR_tkill] = "PS",
    [__NR_time] = "p",
    [__NR_futex] = "pixtpi",
    [__NR_sched_setaffinity] = "Plp",
    [__NR_sched_getaffinity] = "Plp",
    [__NR_io_setup] = "lp",
    [__NR_io_destroy] = "x",
    [__NR_io_getevents] = "xllpt",
    [__NR_io_submit] = "xlp",
    [__NR_io_cancel] = "xpp",
    [__NR_epoll_create] = "i",
    [__NR_getdents64] = "fbl",
    [__NR_set_tid_address] = "p",
    [__NR_semtimedop] = "iplt",
    [__NR_fadvise64] = "flli",
    [__NR_timer_create] = "ipp",
    [__NR_timer_settime] = "ixpp",
    [__NR_timer_gettime] = "ip",
    [__NR_timer_getoverrun] = "i",
    [__NR_timer_delete] = "i",
    [__NR_clock_settime] = "ip",
    [__NR_clock_gettime] = "ip",
    [__NR_clock_getres] = "ip",
    [__NR_clock_nanosleep] = "ixtp",
    [__NR_epoll_wait] = "fpli",
    [__NR_epoll_ctl] = "fifp",
    [__NR_tgkill] = "PPS",
    [__NR_utimes] = "sp",
    [__NR_mbind] = "alipxx",
    [__NR_set_mempolicy] = "ipx",
    [__NR_get_mempolicy] = "ppxax",
    [__NR_mq_open] = "sxmp",
    [__NR_mq_unlink] = "s",
    [__NR_mq_timedsend] = "fblit",
    [__NR_mq_timedreceive] = "fblpt",
    [__NR_mq_notify] = "fp",
    [__NR_mq_getsetattr] = "fpp",
    [__NR_waitid] = "iipxp",
    [__NR_ioprio_set] = "iPi",
    [__NR_ioprio_get] = "iP",
    [__NR_inotify_init] = "",
    [__NR_inotify_add_watch] = "fsx",
    [__NR_inotify_rm_watch] = "fi",
    [__NR_migrate_pages] = "Plpp",
    [__NR_openat] = "dsxm",
    [__NR_mkdirat] = "dsm",
    [__NR_mknodat] = "dsmi",
    [__NR_fchownat] = "dsuux",
    [__NR_futimesat] = "dsp",
    [__NR_newfstatat] = "dspx",
    [__NR_unlinkat] = "dsx",
    [__NR_renameat] = "dsds",
    [__NR_linkat] = "dsdsx",
    [__NR_symlinkat] = "sds",
    [__NR_readlinkat] = "dsbl",
    [__NR_fchmodat] = "dsm",
    [__NR_faccessat] = "dsx",
    [__NR_pselect6] = "lppptp",
    [__NR_ppoll] = "pltpl",
    [__NR_unshare] = "x",
    [__NR_set_robust_list] = "pl",
    [__NR_get_robust_list] = "Ppp",
    [__NR_splice] = "fpfplx",
    [__NR_tee] = "fflx",
    [__NR_sync_file_range] = "fllx",
    [__NR_vmsplice] = "fvlx",
    [__NR_move_pages] = "Plpppx",
    [__NR_utimensat] = "dspx",
    [__NR_epoll_pwait] = "fplipl",
    [__NR_signalfd] = "fpl",
    [__NR_timerfd_create] = "ix",
    [__NR_eventfd] = "i",
    [__NR_fallocate] = "fxll",
    [__NR_timerfd_settime] = "fxpp",
    [__NR_timerfd_gettime] = "fp",
    [__NR_accept4] = "fppx",
    [__NR_signalfd4] = "fplx",
    [__NR_eventfd2] = "ix",
    [__NR_epoll_create1] = "x",
    [__NR_dup3] = "ffx",
    [__NR_pipe2] = "px",
    [__NR_inotify_init1] = "x",
    [__NR_preadv] = "fvll",
    [__NR_pwritev] = "fvll",
    [__NR_rt_tgsigqueueinfo] = "PPSp",
    [__NR_perf_event_open] = "pPiix",
    [__NR_recvmmsg] = "fplxt",
    [__NR_fanotify_init] = "xx",
    [__NR_fanotify_mark] = "fxxds",
    [__NR_prlimit64] = "Pipp",
    [__NR_name_to_handle_at] = "dsppx",
    [__NR_open_by_handle_at] = "fpx",
    [__NR_clock_adjtime] = "ip",
    [__NR_syncfs] = "f",
    [__NR_sendmmsg] = "fplx",
    [__NR_setns] = "fx",
    [__NR_getcpu] = "ppp",
    [__NR_process_vm_readv] = "Pvlvlx",
    [__NR_process_vm_writev] = "Pvlvlx",
    [__NR_kcmp] = "PPill",
    [__NR_finit_module] = "fsx",
    [__NR_sched_setattr] = "Ppx",
    [__NR_sched_getattr] = "Ppxx",
    [__NR_renameat2] = "dsdsx",
    [__NR_seccomp] = "ixp",
    [__NR_getrandom] = "blx",
    [__NR_memfd_create] = "sx",
    [__NR_bpf] = "ipl",
    [__NR_execveat] = "dsppx",
    [__NR_userfaultfd] = "x",
    [__NR_membarrier] = "ixi",
    [__NR_mlock2] = "alx",
    [__NR_copy_file_range] = "fpfplx",
    [__NR_preadv2] = "fvllx",
    [__NR_pwritev2] = "fvllx",
    [__NR_pkey_mprotect] = "alxi",
    [__NR_pkey_alloc] = "xx",
    [__NR_pkey_free] = "i",
    [__NR_statx] = "dsxxp",
    [__NR_io_pgetevents] = "xllptp",
    [__NR_rseq] = "plxx",
    [__NR_pidfd_send_signal] = "fSpx",
    [__NR_io_uring_setup] = "lp",
    [__NR_io_uring_enter] = "fllxpl",
    [__NR_io_uring_register] = "fipl",
    [__NR_open_tree] = "dsx",
    [__NR_move_mount] = "dsdsx",
    [__NR_fsopen] = "sx",
    [__NR_fsconfig] = "fispi",
    [__NR_fsmount] = "fxx",
    [__NR_fspick] = "dsx",
    [__NR_pidfd_open] = "Px",
    [__NR_clone3] = "pl",
    [__NR_close_range] = "iix",
    [__NR_openat2] = "dspl",
    [__NR_pidfd_getfd] = "ffx",
    [__NR_faccessat2] = "dsxx",
    [__NR_process_madvise] = "fvlix",
    [__NR_epoll_pwait2] = "fplppl",
    [__NR_mount_setattr] = "dsxpl",
    [__NR_memfd_secret] = "x",
    [__NR_process_mrelease] = "fx",
    [__NR_futex_waitv] = "plxti",
    [__NR_cachestat] = "fppx",
    [__NR_fchmodat2] = "dsmx",
    [__NR_map_shadow_stack] = "alx",
    [__NR_futex_wake] = "pxix",
    [__NR_futex_wait] = "pxxxti",
    [__NR_futex_requeue] = "pxii",
    [__NR_mseal] = "alx",
};

/* The calls never made: they would end the worker's thread or process at
 * once, which tells nothing (the fork family's children do end so, by
 * design: see fuzz_syscall). */
static int excluded(long nr) {
    return nr == __NR_exit || nr == __NR_exit_group;
}

/* Makes system call `nr`. A child that the fork family creates (fork,
 * vfork, clone, clone3 with any flags, stack or TLS) exits at once with
 * SYS_exit, touching no memory: it may share the caller's stack. */
long fuzz_syscall(long nr, long a0, long a1, long a2, long a3, long a4, long a5);
__asm__(".text\n"
        ".globl fuzz_syscall\n"
        ".type fuzz_syscall, @function\n"
        "fuzz_syscall:\n"
        "    push %r12\n"
        "    mov %rdi, %r12\n"
        "    mov %rdi, %rax\n"
        "    mov %rsi, %rdi\n"
        "    mov %rdx, %rsi\n"
        "    mov %rcx, %rdx\n"
        "    mov %r8, %r10\n"
        "    mov %r9, %r8\n"
        "    mov 16(%rsp), %r9\n"
        "    syscall\n"
        "    test %rax, %rax\n"
        "    jnz 1f\n"
        "    cmp $56, %r12\n" /* clone */
        "    je 2f\n"
        "    cmp $57, %r12\n" /* fork */
        "    je 2f\n"
        "    cmp $58, %r12\n" /* vfork */
        "    je 2f\n"
        "    cmp $435, %r12\n" /* clone3 */
        "    jne 1f\n"
        "2:  mov $60, %eax\n"
        "    xor %edi, %edi\n"
        "    syscall\n"
        "    ud2\n"
        "1:  pop %r12\n"
        "    ret\n"
        ".size fuzz_syscall, .-fuzz_syscall\n");

/* What the workers count, in memory shared with the batch runner. */
struct counters {
    uint64_t calls;
};

static struct counters *shared;

/* xorshift64*, seeded by splitmix64. */
struct rng {
    uint64_t s;
};

static uint64_t splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t next(struct rng *r) {
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545f4914f6cdd1dull;
}

static uint64_t below(struct rng *r, uint64_t n) {
    return next(r) % n;
}

#define PAGE 4096
/* Each thread's read-write buffer, followed by a PROT_NONE guard page. */
#define RW_SIZE (16 * PAGE)

/* One thread's memory: [rw: RW_SIZE][guard: PAGE][ro: PAGE][hole: PAGE]. */
struct arena {
    unsigned char *rw, *guard, *ro, *hole;
};

/* What every thread of a worker shares. */
static pid_t worker_pid;
static int worker_threads;
static long worker_calls;
static int fds[32];
static int nfds;

static const char *const paths[] = {
    "/",
    ".",
    "..",
    "",
    "/etc/passwd",
    "/etc",
    "/etc/passwd/",
    "/etc/passwd/x",
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/urandom",
    "/dev",
    "/proc/self/maps",
    "/proc/self/status",
    "/proc/self/fd",
    "/proc/self/fd/3",
    "/proc/self/cwd/..",
    "/proc/self/task",
    "/proc",
    "/sys/devices/system/cpu/online",
    "/nonexistent",
    "/nonexistent/dir/file",
    "//..//..//etc/./passwd",
    "relative/path",
    "/dev/null/",
};

/* A pid-like argument that never reaches beyond the worker. */
static long gen_pid(struct rng *r) {
    switch (below(r, 6)) {
    case 0:
        return worker_pid;
    case 1:
        return syscall(SYS_gettid);
    case 2:
        return 0; /* the caller, or its own group */
    case 3:
        return -(long)worker_pid; /* its own group */
    case 4:
        return 4194304 + 7; /* past pid_max: nobody */
    default:
        return INT_MIN; /* Linux refuses -INT_MIN */
    }
}

static long gen_fd(struct rng *r) {
    switch (below(r, 8)) {
    case 0:
        return -1 - (long)below(r, 3);
    case 1:
        return below(r, 64);
    case 2:
        return INT_MAX;
    case 3:
        return (int)next(r);
    default:
        return nfds ? fds[below(r, nfds)] : 0;
    }
}

static long gen_dirfd(struct rng *r) {
    return below(r, 2) ? AT_FDCWD : gen_fd(r);
}

static long gen_length(struct rng *r) {
    switch (below(r, 12)) {
    case 0:
        return 0;
    case 1:
        return 1;
    case 2:
        return below(r, 64);
    case 3:
        return below(r, RW_SIZE);
    case 4:
        return PAGE;
    case 5:
        return RW_SIZE;
    case 6:
        return RW_SIZE + 1; /* into the guard page */
    case 7:
        return 1L << (20 + below(r, 28)); /* huge */
    case 8:
        return -1;
    case 9:
        return LONG_MAX;
    case 10:
        return 0x7ffff000;
    default:
        return next(r);
    }
}

static long gen_flags(struct rng *r) {
    switch (below(r, 7)) {
    case 0:
        return 0;
    case 1:
        return 1L << below(r, 64); /* one bit */
    case 2:
        return -1; /* every bit */
    case 3:
        return next(r) & 0xffff;
    case 4:
        return (next(r) & next(r)) & 0xffffffff; /* a few bits */
    case 5:
        return (unsigned)-1; /* every bit of an int */
    default:
        return next(r);
    }
}

static long gen_int(struct rng *r) {
    switch (below(r, 8)) {
    case 0:
        return -1;
    case 1:
        return INT_MIN;
    case 2:
        return INT_MAX;
    case 3:
        return (int)next(r);
    default:
        return below(r, 64);
    }
}

static long gen_signal(struct rng *r) {
    switch (below(r, 8)) {
    case 0:
        return -1;
    case 1:
        return 65 + below(r, 1000);
    default:
        return below(r, 65);
    }
}

/* Addresses with nothing, or nothing of the caller's, behind them. */
static long gen_bad_address(struct rng *r, const struct arena *a) {
    switch (below(r, 9)) {
    case 0:
        return 0;
    case 1:
        return below(r, 0x10000);
    case 2:
        return (long)(a->hole + below(r, PAGE));
    case 3:
        return (long)(0xffff800000000000ull + below(r, 1 << 30)); /* kernel */
    case 4:
        return (long)(0xffffffffffffffffull - below(r, PAGE)); /* top of memory */
    case 5:
        return (long)(0x0000800000000000ull + below(r, PAGE)); /* non-canonical */
    case 6:
        return (long)(0x00007ffffffff000ull + below(r, PAGE)); /* last user page */
    case 7:
        return (long)(a->guard + below(r, PAGE));
    default:
        return next(r);
    }
}

/* A pointer to something: mostly the caller's buffer, at its start, inside
 * it or so close to its end that what is read or written there runs into
 * the guard page; else read-only memory or a bad address. */
static long gen_pointer(struct rng *r, const struct arena *a) {
    switch (below(r, 10)) {
    case 0:
    case 1:
    case 2:
        return (long)a->rw;
    case 3:
        return (long)(a->rw + below(r, RW_SIZE));
    case 4:
        return (long)(a->rw + RW_SIZE - 1 - below(r, 64)); /* straddles the guard page */
    case 5:
        return (long)(a->ro + below(r, 64));
    default:
        return gen_bad_address(r, a);
    }
}

/* An address for the memory-management calls: page-aligned parts of the
 * arena, anywhere, or misaligned. */
static long gen_address(struct rng *r, const struct arena *a) {
    switch (below(r, 6)) {
    case 0:
        return (long)(a->rw + PAGE * below(r, RW_SIZE / PAGE));
    case 1:
        return (long)a->hole;
    case 2:
        return (long)a->ro;
    case 3:
        return (long)(a->rw + 1 + below(r, PAGE - 1)); /* misaligned */
    default:
        return gen_bad_address(r, a);
    }
}

/* Scratch space for the values pointed to: at the start of the buffer the
 * random bytes, then the areas below. */
#define PATH_AREA (RW_SIZE - 3 * PAGE)
#define IOV_AREA (RW_SIZE - 2 * PAGE)
#define TIME_AREA (RW_SIZE - PAGE - 64)

static long gen_path(struct rng *r, const struct arena *a) {
    char *p = (char *)a->rw + PATH_AREA;
    switch (below(r, 8)) {
    case 0:
        return gen_pointer(r, a);
    case 1: {
        /* Longer than PATH_MAX, or just below it. */
        size_t n = below(r, 2) ? PAGE - 1 : 300 + below(r, 3000);
        size_t at = 0;
        while (at + 2 < n) {
            p[at++] = below(r, 8) ? 'a' : '/';
        }
        p[at] = 0;
        return (long)p;
    }
    default:
        strcpy(p, paths[below(r, sizeof paths / sizeof paths[0])]);
        return (long)p;
    }
}

static long gen_iovec(struct rng *r, const struct arena *a) {
    if (below(r, 4) == 0)
        return gen_pointer(r, a);
    struct iov {
        long base, len;
    } *v = (struct iov *)(a->rw + IOV_AREA);
    for (int i = 0; i < 16; i++) {
        v[i].base = below(r, 2) ? (long)(a->rw + below(r, PAGE)) : gen_pointer(r, a);
        v[i].len = below(r, 2) ? (long)below(r, PAGE) : gen_length(r);
    }
    return (long)v;
}

static long gen_timeout(struct rng *r, const struct arena *a) {
    long *t = (long *)(a->rw + TIME_AREA);
    switch (below(r, 8)) {
    case 0:
        return 0;
    case 1:
        return gen_pointer(r, a);
    case 2:
        t[0] = -1, t[1] = 0;
        break;
    case 3:
        t[0] = 0, t[1] = 1000000000; /* nanoseconds out of range */
        break;
    case 4:
        t[0] = LONG_MAX, t[1] = 999999999;
        break;
    default:
        t[0] = 0, t[1] = below(r, 2000000);
        break;
    }
    return (long)t;
}

static long gen_kind(struct rng *r, const struct arena *a, char kind) {
    switch (kind) {
    case 'f':
        return gen_fd(r);
    case 'd':
        return gen_dirfd(r);
    case 'b':
    case 'p':
        return gen_pointer(r, a);
    case 'a':
        return gen_address(r, a);
    case 'l':
        return gen_length(r);
    case 'x':
        return gen_flags(r);
    case 'i':
        return gen_int(r);
    case 's':
        return gen_path(r, a);
    case 'v':
        return gen_iovec(r, a);
    case 't':
        return gen_timeout(r, a);
    case 'S':
        return gen_signal(r);
    case 'm':
        return below(r, 4) ? (long)below(r, 010000) : gen_flags(r);
    case 'u':
        return below(r, 2) ? (long)below(r, 70000) : gen_int(r);
    case 'P':
        return gen_pid(r);
    default:
        return next(r);
    }
}

static const char random_kinds[] = "fdbpalxisvtSmu";

static long pick_number(struct rng *r) {
    for (;;) {
        long nr;
        switch (below(r, 40)) {
        case 0:
            nr = 0x40000000 | below(r, 550); /* x32 */
            break;
        case 1:
            nr = MAX_NR + below(r, 1000);
            break;
        case 2:
            nr = -1 - (long)below(r, 2);
            break;
        default:
            nr = below(r, MAX_NR);
        }
        /* A garbage signal frame kills the thread's process nearly
         * always, ending its batch: tried, but seldom. */
        if (nr == __NR_rt_sigreturn && below(r, 16))
            continue;
        if (!excluded(nr))
            return nr;
    }
}

/* Arguments that would reach beyond the worker through a value of the
 * right type in the wrong place: process owners and targets chosen by a
 * command argument. */
static void confine(long nr, long *args, const struct arena *a) {
    /* PTRACE_TRACEME makes the batch runner the worker's tracer: the
     * worker would stop at its next signal, as on Linux, until a runner
     * that knows nothing of it let it go. Any other request names the
     * worker itself or nobody. */
    if (nr == __NR_ptrace && args[0] == PTRACE_TRACEME)
        args[0] = PTRACE_PEEKUSER;
    if (nr == __NR_fcntl && (args[1] == F_SETOWN || args[1] == F_SETOWN_EX)) {
        int *own = (int *)(a->rw + TIME_AREA);
        own[0] = F_OWNER_PID;
        own[1] = worker_pid;
        args[2] = args[1] == F_SETOWN ? worker_pid : (long)own;
    }
    if (nr == __NR_ioctl) {
        unsigned cmd = (unsigned)args[1];
        if (cmd == 0x8901 /* FIOSETOWN */ || cmd == 0x8902 /* SIOCSPGRP */ || cmd == 0x5410 /* TIOCSPGRP */) {
            int *own = (int *)(a->rw + TIME_AREA);
            own[0] = worker_pid;
            args[2] = (long)own;
        }
    }
}

static void fill_random(struct rng *r, unsigned char *p, size_t n) {
    for (size_t i = 0; i + 8 <= n; i += 8) {
        uint64_t v = next(r);
        /* Small values in places: plausible lengths, descriptors, ids. */
        if ((v & 3) == 0)
            v = (v >> 8) & 0xff;
        memcpy(p + i, &v, 8);
    }
}

/* Interrupts calls that block; handled, so the call fails with EINTR. */
#define KICK_SIGNAL (SIGRTMIN + 2)

static void on_kick(int sig) {
    (void)sig;
}

/* A handler taking siginfo makes a call of its own, so that calls are also
 * made from signal handlers, on whatever stack. */
static void on_signal_info(int sig, siginfo_t *info, void *context) {
    (void)sig, (void)info, (void)context;
    syscall(SYS_getppid);
}

/* The calls may have blocked or ignored the kick: now and then it is let
 * in again, so that a call blocking for good is seldom left to the end of
 * its batch. */
static void let_kicks_in(void) {
    struct sigaction sa = {.sa_handler = on_kick};
    sigaction(KICK_SIGNAL, &sa, NULL);
    sigset_t kick;
    sigemptyset(&kick);
    sigaddset(&kick, KICK_SIGNAL);
    pthread_sigmask(SIG_UNBLOCK, &kick, NULL);
}

struct thread_args {
    uint64_t seed;
    long calls;
    struct arena arena;
    pthread_t thread;
    volatile int done;
};

/* Marks a worker that a worker's execve started. */
#define EXEC_WORKER "--exec-worker"

/* Now and then a worker runs itself again with execve, in whatever state
 * the calls left it and with its other threads in the middle of theirs,
 * and goes on as a new worker (whose calls are not counted: the counters
 * are not mapped across execve). */
static void exec_worker(uint64_t seed) {
    char s[32], threads[16], calls[32];
    snprintf(s, sizeof s, "%llu", (unsigned long long)seed);
    snprintf(threads, sizeof threads, "%d", worker_threads);
    snprintf(calls, sizeof calls, "%ld", worker_calls);
    char *argv[] = {"syscall_fuzz", EXEC_WORKER, s, threads, calls, NULL};
    char *envp[] = {NULL};
    syscall(SYS_execve, "/proc/self/exe", argv, envp);
}

static void *fuzz_thread(void *p) {
    struct thread_args *t = p;
    /* Handlers with SA_ONSTACK run here. */
    stack_t alt = {.ss_sp = malloc(SIGSTKSZ * 4), .ss_size = SIGSTKSZ * 4};
    if (alt.ss_sp)
        sigaltstack(&alt, NULL);
    struct rng r = {splitmix(t->seed) | 1};
    const struct arena *a = &t->arena;
    for (long i = 0; i < t->calls; i++) {
        if (i % 64 == 0)
            fill_random(&r, a->rw, PATH_AREA);
        if (i % 16 == 0)
            let_kicks_in();
        long nr = pick_number(&r);
        const char *sig = nr >= 0 && nr < MAX_NR ? signatures[nr] : NULL;
        int typed = sig && below(&r, 2);
        long args[6];
        for (int k = 0; k < 6; k++) {
            char kind = typed && k < (int)strlen(sig) ? sig[k] : random_kinds[below(&r, sizeof random_kinds - 1)];
            /* A process argument stays one whatever the call's mood. */
            if (sig && k < (int)strlen(sig) && sig[k] == 'P')
                kind = 'P';
            args[k] = gen_kind(&r, a, kind);
        }
        confine(nr, args, a);
        __atomic_fetch_add(&shared->calls, 1, __ATOMIC_RELAXED);
        fuzz_syscall(nr, args[0], args[1], args[2], args[3], args[4], args[5]);
        if (below(&r, 8192) == 0)
            exec_worker(next(&r));
    }
    t->done = 1;
    return NULL;
}

/* How long a batch's threads may take before the supervisor ends the
 * worker: kicks every KICK_MS milliseconds, at most KICKS of them. */
#define KICK_MS 5
#define KICKS 200

static int arena_map(struct arena *a) {
    unsigned char *m = mmap(NULL, RW_SIZE + 3 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return -1;
    a->rw = m;
    a->guard = m + RW_SIZE;
    a->ro = a->guard + PAGE;
    a->hole = a->ro + PAGE;
    memset(a->ro, 0x5a, PAGE);
    if (mprotect(a->guard, PAGE, PROT_NONE) || mprotect(a->ro, PAGE, PROT_READ) || munmap(a->hole, PAGE))
        return -1;
    return 0;
}

static void open_descriptors(void) {
    int p[2];
    nfds = 0;
#define ADD(fd)                                                                                     \
    do {                                                                                            \
        int _fd = (fd);                                                                             \
        if (_fd >= 0 && nfds < (int)(sizeof fds / sizeof fds[0]))                                   \
            fds[nfds++] = _fd;                                                                      \
    } while (0)
    if (pipe2(p, O_CLOEXEC) == 0) {
        ADD(p[0]);
        ADD(p[1]);
    }
    if (pipe2(p, O_NONBLOCK) == 0) {
        ADD(p[0]);
        ADD(p[1]);
    }
    ADD(eventfd(0, 0));
    ADD(eventfd(1, EFD_NONBLOCK | EFD_SEMAPHORE));
    ADD(epoll_create1(0));
    ADD(open("/dev/null", O_RDWR));
    ADD(open("/dev/zero", O_RDONLY));
    ADD(open("/dev/urandom", O_RDONLY));
    ADD(open("/etc/passwd", O_RDONLY));
    ADD(open("/", O_RDONLY | O_DIRECTORY));
    ADD(open("/proc/self", O_RDONLY | O_DIRECTORY));
    ADD(open("/proc/self/maps", O_RDONLY));
    ADD(open("/etc", O_PATH));
    ADD((int)syscall(SYS_pidfd_open, worker_pid, 0));
    ADD((int)syscall(SYS_memfd_create, "fuzz", 0));
    ADD((int)syscall(SYS_timerfd_create, CLOCK_MONOTONIC, 0));
    if (nfds > 0 && fds[0] >= 0)
        ADD(fcntl(fds[0], F_DUPFD, 100));
#undef ADD
}

/* One worker: its own session, the standard descriptors on /dev/null,
 * THREADS threads making `calls` calls each. */
static void worker(uint64_t seed, int threads, long calls) {
    worker_pid = getpid();
    {
        struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
        struct __user_cap_data_struct d[2];
        if (syscall(SYS_capget, &h, d) == 0) {
            d[CAP_SYS_ADMIN / 32].effective &= ~(1u << (CAP_SYS_ADMIN % 32));
            d[CAP_SYS_ADMIN / 32].permitted &= ~(1u << (CAP_SYS_ADMIN % 32));
            d[CAP_SYS_ADMIN / 32].inheritable &= ~(1u << (CAP_SYS_ADMIN % 32));
            if (syscall(SYS_capset, &h, d) != 0)
                _exit(3);
        }
        syscall(SYS_prctl, PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0);
    }
    worker_threads = threads;
    worker_calls = calls;
    setsid();
    int null = open("/dev/null", O_RDWR);
    if (null < 0)
        _exit(3);
    for (int fd = 0; fd < 3; fd++)
        dup2(null, fd);
    close(null);
    /* The last line of defence: SIGALRM ends the worker. */
    alarm(30);
    /* Signals the calls send the worker interrupt it rather than end it,
     * but for faults (returning from a handler would fault again) and the
     * two that cannot be caught. Their handlers take every way a signal
     * can be delivered: with siginfo, on the alternate stack, nested,
     * restarting the call or not, once. */
    struct rng r = {splitmix(seed) | 1};
    for (int sig = 1; sig < 65; sig++) {
        if (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGTRAP || sig == SIGSYS ||
            sig == SIGALRM)
            continue;
        struct sigaction sa = {.sa_handler = on_kick};
        if (sig != KICK_SIGNAL) {
            static const int ways[] = {SA_SIGINFO, SA_ONSTACK, SA_NODEFER, SA_RESTART, SA_RESETHAND};
            for (unsigned w = 0; w < sizeof ways / sizeof ways[0]; w++)
                sa.sa_flags |= below(&r, 2) ? ways[w] : 0;
            if (sa.sa_flags & SA_SIGINFO)
                sa.sa_sigaction = on_signal_info;
            sigfillset(&sa.sa_mask);
            if (below(&r, 2))
                sigemptyset(&sa.sa_mask);
        }
        sigaction(sig, &sa, NULL);
    }
    open_descriptors();
    struct thread_args *t = calloc(threads, sizeof *t);
    if (!t)
        _exit(3);
    for (int i = 0; i < threads; i++) {
        t[i].seed = seed ^ ((uint64_t)(i + 1) << 48);
        t[i].calls = calls;
        if (arena_map(&t[i].arena))
            _exit(3);
    }
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    for (int i = 0; i < threads; i++) {
        if (pthread_create(&t[i].thread, &attr, fuzz_thread, &t[i]))
            _exit(3);
    }
    /* The supervisor: kicks the threads out of blocking calls until they
     * are done or the batch has taken long enough. */
    for (int kick = 0; kick < KICKS; kick++) {
        int running = 0;
        for (int i = 0; i < threads; i++) {
            if (!t[i].done) {
                running++;
                pthread_kill(t[i].thread, KICK_SIGNAL);
            }
        }
        if (!running)
            break;
        struct timespec ts = {0, KICK_MS * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    _exit(0);
}

/* The batch runner's watchdog: a worker that did not end by itself in this
 * long is killed and counted as hung. Far longer than any batch takes. */
#define WATCHDOG_SECONDS 120

static volatile sig_atomic_t watchdog_fired;

static void on_watchdog(int sig) {
    (void)sig;
    watchdog_fired = 1;
}

/* In the sandbox, the kernel version names it. */
static int in_sandbox(void) {
    struct utsname u;
    return uname(&u) == 0 && strstr(u.version, " cordon ") != NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s SEED CALLS [WORKERS [THREADS [PER_THREAD [PROGRESS]]]]\n", argv[0]);
        return 2;
    }
    if (!in_sandbox()) {
        fprintf(stderr, "%s: refusing to run outside the sandbox: these calls could harm the host\n", argv[0]);
        return 2;
    }
    if (strcmp(argv[1], EXEC_WORKER) == 0) {
        if (argc != 5)
            return 2;
        shared = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (shared == MAP_FAILED)
            return 2;
        worker(strtoull(argv[2], NULL, 0), atoi(argv[3]), strtol(argv[4], NULL, 0));
    }
    uint64_t seed = strtoull(argv[1], NULL, 0);
    long budget = strtol(argv[2], NULL, 0);
    int workers = argc > 3 ? atoi(argv[3]) : 4;
    int threads = argc > 4 ? atoi(argv[4]) : 4;
    long per_thread = argc > 5 ? strtol(argv[5], NULL, 0) : 500;
    long progress = argc > 6 ? strtol(argv[6], NULL, 0) : 0;
    if (budget <= 0 || workers <= 0 || threads <= 0 || per_thread <= 0 || workers > 64 || threads > 64) {
        fprintf(stderr, "%s: bad arguments\n", argv[0]);
        return 2;
    }
    shared = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared == MAP_FAILED) {
        perror("mmap");
        return 2;
    }
    struct sigaction sa = {.sa_handler = on_watchdog};
    sigaction(SIGALRM, &sa, NULL);
    long batches = 0;
    long exited = 0, signalled = 0, stops = 0, hung = 0, strangers = 0;
    long by_signal[65] = {0};
    /* Batches in a row whose workers made no call at all: the sandbox no
     * longer lets a worker start, and the budget would never be reached. */
    long stalled = 0;
    unsigned long long calls_before = 0;
    for (long b = 0; (long)__atomic_load_n(&shared->calls, __ATOMIC_RELAXED) < budget; b++) {
        unsigned long long now = __atomic_load_n(&shared->calls, __ATOMIC_RELAXED);
        stalled = now == calls_before && b > 0 ? stalled + 1 : 0;
        calls_before = now;
        if (stalled >= 100) {
            fprintf(stderr, "fuzz: %ld batches in a row made no call: workers cannot start\n", stalled);
            return 1;
        }
        batches++;
        if (progress > 0 && b > 0 && b % progress == 0) {
            printf("progress: %llu calls reached after %ld batches\n",
                   (unsigned long long)__atomic_load_n(&shared->calls, __ATOMIC_RELAXED), b);
            fflush(stdout);
        }
        pid_t pids[64];
        int live = 0;
        for (int w = 0; w < workers; w++) {
            pid_t pid = fork();
            if (pid < 0) {
                perror("fork");
                return 2;
            }
            if (pid == 0)
                worker(splitmix(seed ^ splitmix((uint64_t)b << 8 | (uint64_t)w)), threads, per_thread);
            pids[w] = pid;
            live++;
        }
        watchdog_fired = 0;
        alarm(WATCHDOG_SECONDS);
        while (live > 0) {
            int status;
            pid_t pid = waitpid(-1, &status, WUNTRACED);
            if (pid < 0) {
                if (errno == EINTR && watchdog_fired) {
                    for (int w = 0; w < workers; w++) {
                        if (pids[w] > 0) {
                            kill(pids[w], SIGKILL);
                            hung++;
                        }
                    }
                    watchdog_fired = 0;
                    continue;
                }
                if (errno == EINTR)
                    continue;
                perror("waitpid");
                return 2;
            }
            int w = 0;
            while (w < workers && pids[w] != pid)
                w++;
            if (w == workers) {
                /* A child a worker made with CLONE_PARENT. */
                strangers++;
                continue;
            }
            if (WIFSTOPPED(status)) {
                stops++;
                kill(pid, SIGCONT);
                continue;
            }
            if (WIFEXITED(status)) {
                exited++;
            } else {
                signalled++;
                by_signal[WTERMSIG(status) & 63]++;
            }
            pids[w] = 0;
            live--;
        }
        alarm(0);
        /* Whatever the worker's clones left behind. */
        while (waitpid(-1, NULL, WNOHANG) > 0)
            strangers++;
    }
    printf("workers ended: %ld exited, %ld killed by a signal (", exited, signalled);
    for (int s = 1; s < 65; s++) {
        if (by_signal[s])
            printf(" %s:%ld", strsignal(s), by_signal[s]);
    }
    printf(" ), %ld stops continued, %ld children of clones reaped\n", stops, strangers);
    printf("fuzz: seed %llu: %llu calls reached in %ld batches of %d workers x %d threads; %ld hung\n",
           (unsigned long long)seed, (unsigned long long)__atomic_load_n(&shared->calls, __ATOMIC_RELAXED),
           batches, workers, threads, hung);
    return 0;
}
