/* Calls every system call number with arguments no careful program would
 * pass: zeros, all ones, addresses nothing is mapped at, kernel addresses,
 * and pseudo-random words (fixed seed, so runs repeat). Each number runs in
 * a child of its own, which may die of what it does; the sandbox around it
 * must not. Calls that would end the test itself (exit, kill, fork, exec)
 * are left out.
 *
 * Prints one line at the end; the test checks it and that the sandbox
 * exited normally without a panic. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_NR 460

static int skipped(long nr) {
    switch (nr) {
    case SYS_exit:
    case SYS_exit_group:
    case SYS_kill:
    case SYS_tkill:
    case SYS_tgkill:
    case SYS_rt_sigqueueinfo:
    case SYS_rt_tgsigqueueinfo:
    case SYS_pidfd_send_signal:
    case SYS_fork:
    case SYS_vfork:
    case SYS_clone:
    case SYS_clone3:
    case SYS_execve:
    case SYS_execveat:
    /* These could write into the parent, which is fair but ends the test. */
    case SYS_process_vm_writev:
    case SYS_ptrace:
        return 1;
    }
    return 0;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_random(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* One argument pattern; `k` picks it. */
static long arg(int pattern, int k) {
    switch (pattern) {
    case 0:
        return 0;
    case 1:
        return -1;
    case 2:
        return 0x1000 + 0x10 * k; /* below any mapping */
    case 3:
        return (long)0xffff800000000000ull + k; /* kernel half */
    case 4:
        return (long)0x00007ffffffff000ull - k; /* top of user space, unmapped */
    default:
        /* Small numbers make good descriptors, sizes and flags. */
        return (next_random() & 1) ? (long)(next_random() % 64) : (long)next_random();
    }
}

#define PATTERNS 8

int main(void) {
    int ran = 0, died = 0, killed = 0;
    for (long nr = 0; nr < MAX_NR; nr++) {
        if (skipped(nr))
            continue;
        /* Each child gets its own argument stream, the same every run. */
        uint64_t seed = rng;
        next_random();
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 2;
        }
        if (pid == 0) {
            rng = seed;
            alarm(1);
            for (int p = 0; p < PATTERNS; p++)
                syscall(nr, arg(p, 0), arg(p, 1), arg(p, 2), arg(p, 3), arg(p, 4), arg(p, 5));
            _exit(0);
        }
        ran++;
        /* A call may block with SIGALRM masked; give it two seconds. */
        int status = 0;
        for (int waited = 0;; waited++) {
            pid_t r = waitpid(pid, &status, WNOHANG);
            if (r == pid)
                break;
            if (r < 0) {
                perror("waitpid");
                return 2;
            }
            if (waited == 200) {
                kill(pid, SIGKILL);
                killed++;
            }
            struct timespec ten_ms = {0, 10 * 1000 * 1000};
            nanosleep(&ten_ms, NULL);
        }
        if (!WIFEXITED(status))
            died++;
    }
    printf("fuzzed %d system calls: all returned (%d children died of what they did, %d were stuck)\n", ran,
           died, killed);
    return 0;
}
