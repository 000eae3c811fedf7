/* Scheduling attributes, nice values and I/O priorities as a container's
 * root (no CAP_SYS_NICE) sees them: sched_setattr/sched_getattr with their
 * size rules and errors, the policies' priority ranges, getpriority/
 * setpriority, ioprio_set/ioprio_get, and what a child inherits. */
#include <sched.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "container_caps.h"
#include "t.h"

struct attr {
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
    uint32_t util_min, util_max;
    char tail[8];
};

#define NO_SUCH_PID 0x3fffffff
#define SCHED_FLAG_RESET_ON_FORK 0x01
#define SCHED_FLAG_KEEP_POLICY 0x08
#define SCHED_FLAG_KEEP_PARAMS 0x10
#define IOPRIO(class, level) ((class) << 13 | (level))

static long setattr(struct attr *a) {
    return syscall(SYS_sched_setattr, 0, a, 0);
}

static struct attr getattr_(void) {
    struct attr a;
    memset(&a, 0xff, sizeof a);
    CHECK_OK(syscall(SYS_sched_getattr, 0, &a, sizeof a, 0));
    return a;
}

static void show(const char *what) {
    struct attr a = getattr_();
    errno = 0;
    int prio = getpriority(PRIO_PROCESS, 0);
    /* (The runtime of a fair policy is the kernel's time slice, which
     * depends on the kernel and the machine.) */
    printf("%s: size %u policy %u flags %llx nice %d prio %u deadline %llu period %llu sched %ld getpriority %d "
           "ioprio %lx\n",
           what, a.size, a.policy, (unsigned long long)a.flags, a.nice, a.priority, (unsigned long long)a.deadline,
           (unsigned long long)a.period, syscall(SYS_sched_getscheduler, 0), prio, syscall(SYS_ioprio_get, 1, 0));
}

static void in_child(void (*f)(void)) {
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        f();
        fflush(stdout);
        _exit(t_failures ? 1 : 0);
    }
    int st;
    CHECK(waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void getattr_errors(void) {
    struct attr a;
    CHECK_ERR(syscall(SYS_sched_getattr, 0, NULL, sizeof a, 0), EINVAL);
    CHECK_ERR(syscall(SYS_sched_getattr, 0, &a, 47, 0), EINVAL);
    CHECK_ERR(syscall(SYS_sched_getattr, 0, &a, 4097, 0), EINVAL);
    CHECK_ERR(syscall(SYS_sched_getattr, 0, &a, sizeof a, 1), EINVAL);
    CHECK_ERR(syscall(SYS_sched_getattr, -1, &a, sizeof a, 0), EINVAL);
    CHECK_ERR(syscall(SYS_sched_getattr, NO_SUCH_PID, &a, sizeof a, 0), ESRCH);
    CHECK_ERR(syscall(SYS_sched_getattr, 0, (void *)8, sizeof a, 0), EFAULT);
    /* The first version's size: that much is written, and said. */
    memset(&a, 0xff, sizeof a);
    CHECK_OK(syscall(SYS_sched_getattr, 0, &a, 48, 0));
    CHECK(a.size == 48 && a.util_min == 0xffffffff);
    /* A getter in this thread's own id works too. */
    CHECK_OK(syscall(SYS_sched_getattr, getpid(), &a, sizeof a, 0));
}

static void setattr_errors(void) {
    struct attr a = {.size = 48};
    CHECK_ERR(syscall(SYS_sched_setattr, 0, NULL, 0), EINVAL);
    CHECK_ERR(syscall(SYS_sched_setattr, -1, &a, 0), EINVAL);
    CHECK_ERR(syscall(SYS_sched_setattr, 0, &a, 1), EINVAL);
    CHECK_ERR(syscall(SYS_sched_setattr, NO_SUCH_PID, &a, 0), ESRCH);
    CHECK_ERR(syscall(SYS_sched_setattr, 0, (void *)8, 0), EFAULT);
    /* Sizes: too small or too large is E2BIG, with the known size written
     * back; bytes past the known ones must be zero. */
    a.size = 40;
    CHECK_ERR(setattr(&a), E2BIG);
    CHECK(a.size == 56);
    a.size = 4097;
    CHECK_ERR(setattr(&a), E2BIG);
    CHECK(a.size == 56);
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.tail[3] = 1;
    CHECK_ERR(setattr(&a), E2BIG);
    a.tail[3] = 0;
    CHECK_OK(setattr(&a));
    a.size = 0; /* the first version's */
    CHECK_OK(setattr(&a));
    /* Policies and priorities. */
    a.size = 48;
    a.policy = 4;
    CHECK_ERR(setattr(&a), EINVAL);
    a.policy = 7;
    CHECK_ERR(setattr(&a), EINVAL);
    a.policy = SCHED_OTHER;
    a.priority = 1;
    CHECK_ERR(setattr(&a), EINVAL);
    a.policy = SCHED_FIFO;
    a.priority = 0;
    CHECK_ERR(setattr(&a), EINVAL);
    a.priority = 100;
    CHECK_ERR(setattr(&a), EINVAL);
    a.priority = 10;
    CHECK_ERR(setattr(&a), EPERM);
    a.policy = SCHED_RR;
    CHECK_ERR(setattr(&a), EPERM);
    a.priority = 0;
    a.policy = SCHED_OTHER;
    a.flags = 0x80;
    CHECK_ERR(setattr(&a), EINVAL);
    a.flags = 0;
    /* SCHED_DEADLINE: nonsense parameters are EINVAL, sensible ones
     * need CAP_SYS_NICE. */
    a.policy = 6;
    a.runtime = 10000000;
    a.deadline = 0;
    CHECK_ERR(setattr(&a), EINVAL);
    a.deadline = 1000000;
    CHECK_ERR(setattr(&a), EINVAL);
    a.deadline = 30000000;
    a.period = 20000000;
    CHECK_ERR(setattr(&a), EINVAL);
    a.period = 30000000;
    CHECK_ERR(setattr(&a), EPERM);
    a.runtime = 10;
    CHECK_ERR(setattr(&a), EINVAL);
    /* Out-of-range nice values are clamped. */
    memset(&a, 0, sizeof a);
    a.size = 48;
    a.nice = 100;
    CHECK_OK(setattr(&a));
    show("nice clamped");
}

static void nice_only_rises(void) {
    struct attr a = {.size = 48, .nice = 5};
    CHECK_OK(setattr(&a));
    show("nice 5");
    a.nice = 3;
    CHECK_ERR(setattr(&a), EPERM);
    CHECK_ERR(setpriority(PRIO_PROCESS, 0, 4), EACCES);
    CHECK_OK(setpriority(PRIO_PROCESS, 0, 7));
    show("setpriority 7");
    CHECK_ERR(setpriority(3, 0, 7), EINVAL);
    CHECK_ERR(getpriority(3, 0), EINVAL);
    CHECK_ERR(setpriority(PRIO_PROCESS, NO_SUCH_PID, 7), ESRCH);
    CHECK_ERR(getpriority(PRIO_PROCESS, NO_SUCH_PID), ESRCH);
    /* The group's best: the parent's 0. */
    printf("group's getpriority %d\n", getpriority(PRIO_PGRP, 0));
    /* KEEP_PARAMS keeps the nice value; KEEP_POLICY the policy. */
    a = (struct attr){.size = 48, .policy = SCHED_BATCH, .flags = SCHED_FLAG_KEEP_PARAMS};
    CHECK_OK(setattr(&a));
    show("batch, params kept");
    a = (struct attr){.size = 48, .policy = 99, .nice = 9, .flags = SCHED_FLAG_KEEP_POLICY};
    CHECK_OK(setattr(&a));
    show("policy kept, nice 9");
    /* A child inherits all of it. */
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        show("child");
        fflush(stdout);
        _exit(0);
    }
    waitpid(p, NULL, 0);
}

static void idle_is_a_one_way_street(void) {
    struct attr a = {.size = 48, .policy = SCHED_IDLE};
    CHECK_OK(setattr(&a));
    show("idle");
    a.policy = SCHED_OTHER;
    CHECK_ERR(setattr(&a), EPERM);
}

static void reset_on_fork(void) {
    struct attr a = {.size = 48, .nice = 2, .flags = SCHED_FLAG_RESET_ON_FORK};
    CHECK_OK(setattr(&a));
    show("reset on fork");
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        show("reset child");
        fflush(stdout);
        _exit(0);
    }
    waitpid(p, NULL, 0);
    /* Only the privileged may clear the flag. */
    a.flags = 0;
    CHECK_ERR(setattr(&a), EPERM);
}

static void priority_ranges(void) {
    printf("priority ranges: fifo %d-%d rr %d-%d other %d-%d batch %d idle %d deadline %d\n",
           sched_get_priority_min(SCHED_FIFO), sched_get_priority_max(SCHED_FIFO), sched_get_priority_min(SCHED_RR),
           sched_get_priority_max(SCHED_RR), sched_get_priority_min(SCHED_OTHER), sched_get_priority_max(SCHED_OTHER),
           sched_get_priority_max(SCHED_BATCH), sched_get_priority_max(SCHED_IDLE), sched_get_priority_max(6));
    CHECK_ERR(sched_get_priority_max(4), EINVAL);
    CHECK_ERR(sched_get_priority_min(42), EINVAL);
    struct sched_param sp;
    CHECK_OK(sched_getparam(0, &sp));
    CHECK(sp.sched_priority == 0);
    CHECK_ERR(sched_getparam(-1, &sp), EINVAL);
    CHECK_ERR(sched_getparam(NO_SUCH_PID, &sp), ESRCH);
    CHECK_ERR(sched_getscheduler(-1), EINVAL);
    CHECK_ERR(sched_getscheduler(NO_SUCH_PID), ESRCH);
}

static void io_priorities(void) {
    /* None set: 0 for one thread, best-effort level 4 as the best of the
     * group's two (this child and the parent). */
    printf("ioprio: own %lx pgrp %lx\n", syscall(SYS_ioprio_get, 1, 0), syscall(SYS_ioprio_get, 2, 0));
    CHECK(syscall(SYS_ioprio_get, 3, 0) >= 0);
    CHECK_OK(syscall(SYS_ioprio_set, 1, 0, IOPRIO(2, 3)));
    CHECK(syscall(SYS_ioprio_get, 1, 0) == IOPRIO(2, 3));
    CHECK(syscall(SYS_ioprio_get, 1, getpid()) == IOPRIO(2, 3));
    CHECK_OK(syscall(SYS_ioprio_set, 1, 0, IOPRIO(3, 0)));
    CHECK(syscall(SYS_ioprio_get, 1, 0) == IOPRIO(3, 0));
    CHECK_ERR(syscall(SYS_ioprio_set, 1, 0, IOPRIO(1, 0)), EPERM);
    CHECK_ERR(syscall(SYS_ioprio_set, 1, 0, IOPRIO(5, 0)), EINVAL);
    CHECK_ERR(syscall(SYS_ioprio_set, 1, 0, IOPRIO(0, 1)), EINVAL);
    CHECK_ERR(syscall(SYS_ioprio_set, 4, 0, IOPRIO(2, 3)), EINVAL);
    CHECK_ERR(syscall(SYS_ioprio_set, 0, 0, IOPRIO(2, 3)), EINVAL);
    CHECK_ERR(syscall(SYS_ioprio_get, 4, 0), EINVAL);
    CHECK_ERR(syscall(SYS_ioprio_set, 1, NO_SUCH_PID, IOPRIO(2, 3)), ESRCH);
    CHECK_ERR(syscall(SYS_ioprio_get, 1, NO_SUCH_PID), ESRCH);
    /* Back to none: the level follows the nice value again. */
    CHECK_OK(syscall(SYS_ioprio_set, 1, 0, IOPRIO(0, 0)));
    CHECK_OK(setpriority(PRIO_PROCESS, 0, 10));
    printf("ioprio at nice 10: %lx\n", syscall(SYS_ioprio_get, 1, 0));
}

int main(void) {
    narrow_to_container_caps();
    show("start");
    getattr_errors();
    priority_ranges();
    in_child(setattr_errors);
    in_child(nice_only_rises);
    in_child(idle_is_a_one_way_street);
    in_child(reset_on_fork);
    in_child(io_priorities);
    return done();
}
