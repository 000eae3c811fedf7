/* Timer descriptors: timerfd_create, timerfd_settime and timerfd_gettime
 * on each clock, relative and absolute, one-shot and periodic; reads of the
 * expiry count, poll and epoll readiness, /proc/PID/fdinfo, the ticks
 * ioctl, and the errors Linux gives. Every wait is for an expiry the
 * program asked for: nothing depends on how long anything takes. */
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t.h"

#ifndef TFD_IOC_SET_TICKS
#define TFD_IOC_SET_TICKS _IOW('T', 0, uint64_t)
#endif

static int64_t ns_of(struct timespec t) {
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int64_t now_on(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return ns_of(t);
}

static struct itimerspec spec(int64_t value_ns, int64_t interval_ns) {
    struct itimerspec s;
    s.it_value.tv_sec = value_ns / 1000000000;
    s.it_value.tv_nsec = value_ns % 1000000000;
    s.it_interval.tv_sec = interval_ns / 1000000000;
    s.it_interval.tv_nsec = interval_ns % 1000000000;
    return s;
}

static uint64_t read_ticks(int fd) {
    uint64_t n = 0;
    CHECK(read(fd, &n, sizeof n) == sizeof n);
    return n;
}

static void create_errors(void) {
    CHECK_ERR(timerfd_create(CLOCK_PROCESS_CPUTIME_ID, 0), EINVAL);
    CHECK_ERR(timerfd_create(CLOCK_MONOTONIC_RAW, 0), EINVAL);
    CHECK_ERR(timerfd_create(-1, 0), EINVAL);
    CHECK_ERR(timerfd_create(CLOCK_MONOTONIC, 1), EINVAL);
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    CHECK(fd >= 0);
    CHECK(fcntl(fd, F_GETFL) == (O_RDWR | O_NONBLOCK));
    CHECK(fcntl(fd, F_GETFD) == FD_CLOEXEC);
    char link[64], target[64] = {0};
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    CHECK(readlink(link, target, sizeof target - 1) > 0);
    CHECK(strcmp(target, "anon_inode:[timerfd]") == 0);
    uint64_t n;
    CHECK_ERR(read(fd, &n, sizeof n), EAGAIN);
    CHECK_ERR(read(fd, &n, 4), EINVAL);
    CHECK_ERR(write(fd, &n, sizeof n), EINVAL);
    struct itimerspec cur;
    CHECK_OK(timerfd_gettime(fd, &cur));
    CHECK(ns_of(cur.it_value) == 0 && ns_of(cur.it_interval) == 0);

    struct itimerspec s = spec(1000000, 0);
    CHECK_ERR(timerfd_settime(fd, 4, &s, NULL), EINVAL);
    s.it_value.tv_nsec = 1000000000;
    CHECK_ERR(timerfd_settime(fd, 0, &s, NULL), EINVAL);
    s = spec(0, 0);
    s.it_interval.tv_sec = -1;
    CHECK_ERR(timerfd_settime(fd, 0, &s, NULL), EINVAL);
    CHECK_ERR(syscall(SYS_timerfd_settime, fd, 0, NULL, NULL), EFAULT);
    s = spec(1000000, 0);
    CHECK_ERR(timerfd_settime(9999, 0, &s, NULL), EBADF);
    CHECK_ERR(timerfd_gettime(9999, &cur), EBADF);
    int p[2];
    CHECK_OK(pipe(p));
    CHECK_ERR(timerfd_settime(p[0], 0, &s, NULL), EINVAL);
    CHECK_ERR(timerfd_gettime(p[0], &cur), EINVAL);
    CHECK_ERR(syscall(SYS_timerfd_gettime, fd, NULL), EFAULT);
    close(p[0]);
    close(p[1]);
    close(fd);
}

/* A one-shot timer: not ready before it expires, one expiry after, then
 * disarmed. */
static void one_shot(clockid_t clock) {
    int fd = timerfd_create(clock, 0);
    CHECK(fd >= 0);
    struct itimerspec s = spec(20000000, 0), cur;
    CHECK_OK(timerfd_settime(fd, 0, &s, NULL));
    CHECK_OK(timerfd_gettime(fd, &cur));
    CHECK(ns_of(cur.it_value) > 0 && ns_of(cur.it_value) <= 20000000);
    CHECK(ns_of(cur.it_interval) == 0);
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    CHECK(poll(&pfd, 1, -1) == 1 && pfd.revents == POLLIN);
    CHECK(read_ticks(fd) == 1);
    CHECK_OK(timerfd_gettime(fd, &cur));
    CHECK(ns_of(cur.it_value) == 0);
    CHECK(poll(&pfd, 1, 0) == 0);
    CHECK_OK(fcntl(fd, F_SETFL, O_NONBLOCK));
    uint64_t n;
    CHECK_ERR(read(fd, &n, sizeof n), EAGAIN);
    close(fd);
}

/* A periodic timer counts every period that passed between reads. */
static void periodic(void) {
    int fd = timerfd_create(CLOCK_MONOTONIC, 0);
    struct itimerspec s = spec(1000000, 1000000), cur;
    CHECK_OK(timerfd_settime(fd, 0, &s, NULL));
    CHECK(read_ticks(fd) >= 1);
    struct timespec nap = {0, 20000000};
    nanosleep(&nap, NULL);
    /* 20 ms passed since the deadline the last read moved to within 1 ms. */
    CHECK(read_ticks(fd) >= 19);
    CHECK_OK(timerfd_gettime(fd, &cur));
    CHECK(ns_of(cur.it_value) > 0 && ns_of(cur.it_value) <= 1000000);
    CHECK(ns_of(cur.it_interval) == 1000000);
    /* Disarming gives back the setting it replaces. */
    struct itimerspec off = spec(0, 0), old;
    CHECK_OK(timerfd_settime(fd, 0, &off, &old));
    CHECK(ns_of(old.it_interval) == 1000000);
    CHECK(ns_of(old.it_value) <= 1000000);
    CHECK_OK(timerfd_gettime(fd, &cur));
    CHECK(ns_of(cur.it_value) == 0 && ns_of(cur.it_interval) == 0);
    close(fd);
}

/* An absolute time on the timer's own clock; one already past expires at
 * once. */
static void absolute(clockid_t clock) {
    int fd = timerfd_create(clock, 0);
    int64_t at = now_on(clock) + 30000000;
    struct itimerspec s = spec(at, 0), cur;
    CHECK_OK(timerfd_settime(fd, TFD_TIMER_ABSTIME, &s, NULL));
    CHECK_OK(timerfd_gettime(fd, &cur));
    CHECK(ns_of(cur.it_value) > 0 && ns_of(cur.it_value) <= 30000000);
    CHECK(read_ticks(fd) == 1);
    CHECK(now_on(clock) >= at);
    s = spec(1000000000, 0);
    CHECK_OK(timerfd_settime(fd, TFD_TIMER_ABSTIME, &s, NULL));
    CHECK(read_ticks(fd) == 1);
    if (clock == CLOCK_REALTIME) {
        /* Cancel-on-set is accepted; nothing sets the clock here. */
        s = spec(now_on(clock) + 10000000, 0);
        CHECK_OK(timerfd_settime(fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &s, NULL));
        CHECK(read_ticks(fd) == 1);
    }
    close(fd);
}

static void through_epoll(void) {
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 77};
    CHECK_OK(epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev));
    CHECK(epoll_wait(ep, &ev, 1, 0) == 0);
    struct itimerspec s = spec(5000000, 0);
    CHECK_OK(timerfd_settime(fd, 0, &s, NULL));
    CHECK(epoll_wait(ep, &ev, 1, -1) == 1);
    CHECK(ev.events == EPOLLIN && ev.data.u64 == 77);
    CHECK(read_ticks(fd) == 1);
    CHECK(epoll_wait(ep, &ev, 1, 0) == 0);
    /* Edge-triggered: one report per expiry. */
    ev.events = EPOLLIN | EPOLLET;
    CHECK_OK(epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev));
    s = spec(2000000, 0);
    CHECK_OK(timerfd_settime(fd, 0, &s, NULL));
    CHECK(epoll_wait(ep, &ev, 1, -1) == 1);
    CHECK(read_ticks(fd) == 1);
    close(ep);
    close(fd);
}

/* The lines after the common ones of /proc/self/fdinfo/FD. */
static void fdinfo_line(int fd, const char *key, char *out, size_t len) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
    out[0] = 0;
    int f = open(path, O_RDONLY);
    CHECK(f >= 0);
    if (f < 0)
        return;
    ssize_t n = read(f, buf, sizeof buf - 1);
    close(f);
    if (n <= 0)
        return;
    buf[n] = 0;
    char *at = strstr(buf, key);
    if (!at)
        return;
    char *end = strchr(at, '\n');
    size_t l = end ? (size_t)(end - at) : strlen(at);
    if (l >= len)
        l = len - 1;
    memcpy(out, at, l);
    out[l] = 0;
}

static void fdinfo(void) {
    int fd = timerfd_create(CLOCK_MONOTONIC, 0);
    char line[128];
    fdinfo_line(fd, "clockid:", line, sizeof line);
    CHECK(strcmp(line, "clockid: 1") == 0);
    fdinfo_line(fd, "ticks:", line, sizeof line);
    CHECK(strcmp(line, "ticks: 0") == 0);
    fdinfo_line(fd, "it_value:", line, sizeof line);
    CHECK(strcmp(line, "it_value: (0, 0)") == 0);
    struct itimerspec s = spec(500000000000LL, 2000000000);
    CHECK_OK(timerfd_settime(fd, 0, &s, NULL));
    fdinfo_line(fd, "settime flags:", line, sizeof line);
    CHECK(strcmp(line, "settime flags: 00") == 0);
    fdinfo_line(fd, "it_interval:", line, sizeof line);
    CHECK(strcmp(line, "it_interval: (2, 0)") == 0);
    fdinfo_line(fd, "it_value:", line, sizeof line);
    long long sec = -1, nsec = -1;
    CHECK(sscanf(line, "it_value: (%lld, %lld)", &sec, &nsec) == 2);
    CHECK(sec >= 0 && sec < 500 && nsec >= 0 && nsec < 1000000000);
    close(fd);

    fd = timerfd_create(CLOCK_REALTIME, 0);
    s = spec(1000000000, 0);
    CHECK_OK(timerfd_settime(fd, TFD_TIMER_ABSTIME | TFD_TIMER_CANCEL_ON_SET, &s, NULL));
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    CHECK(poll(&pfd, 1, -1) == 1);
    fdinfo_line(fd, "clockid:", line, sizeof line);
    CHECK(strcmp(line, "clockid: 0") == 0);
    fdinfo_line(fd, "ticks:", line, sizeof line);
    CHECK(strcmp(line, "ticks: 1") == 0);
    fdinfo_line(fd, "settime flags:", line, sizeof line);
    CHECK(strcmp(line, "settime flags: 03") == 0);
    fdinfo_line(fd, "it_value:", line, sizeof line);
    CHECK(strcmp(line, "it_value: (0, 0)") == 0);
    close(fd);
}

static void set_ticks(void) {
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
    uint64_t v = 0;
    CHECK_ERR(ioctl(fd, TFD_IOC_SET_TICKS, &v), EINVAL);
    v = 5;
    CHECK_OK(ioctl(fd, TFD_IOC_SET_TICKS, &v));
    CHECK(read_ticks(fd) == 5);
    CHECK_ERR(ioctl(fd, TFD_IOC_SET_TICKS, NULL), EFAULT);
    CHECK_ERR(ioctl(fd, 0x5401 /* TCGETS */, &v), ENOTTY);
    close(fd);
}

/* The alarm clocks take CAP_WAKE_ALARM (35); without it, EPERM. */
static int has_wake_alarm(void) {
    struct {
        uint32_t version;
        int pid;
    } h = {0x20080522, 0};
    struct {
        uint32_t effective, permitted, inheritable;
    } d[2];
    if (syscall(SYS_capget, &h, d) != 0)
        return 0;
    return (d[1].effective >> 3) & 1;
}

static void alarm_clocks(void) {
    /* One check either way: whether the caller holds the capability is
     * the caller's (root natively, a container's root in the sandbox). */
    int fd = timerfd_create(CLOCK_BOOTTIME_ALARM, 0);
    if (has_wake_alarm()) {
        struct itimerspec s = spec(1000000, 0);
        uint64_t n = 0;
        CHECK(fd >= 0 && timerfd_settime(fd, 0, &s, NULL) == 0 && read(fd, &n, sizeof n) == sizeof n && n == 1);
        close(fd);
    } else {
        CHECK(fd == -1 && errno == EPERM);
    }
    pid_t pid = fork();
    if (pid == 0) {
        if (setuid(65534) != 0)
            _exit(2);
        int r = timerfd_create(CLOCK_REALTIME_ALARM, 0);
        _exit(r == -1 && errno == EPERM ? 0 : 1);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* A timer armed in the parent goes on counting for the child, which
 * shares the descriptor. */
static void across_fork(void) {
    int fd = timerfd_create(CLOCK_MONOTONIC, 0);
    struct itimerspec s = spec(5000000, 0);
    CHECK_OK(timerfd_settime(fd, 0, &s, NULL));
    pid_t pid = fork();
    if (pid == 0) {
        uint64_t n = 0;
        _exit(read(fd, &n, sizeof n) == sizeof n && n == 1 ? 0 : 1);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_OK(fcntl(fd, F_SETFL, O_NONBLOCK));
    uint64_t n;
    CHECK_ERR(read(fd, &n, sizeof n), EAGAIN);
    close(fd);
}

int main(void) {
    create_errors();
    one_shot(CLOCK_MONOTONIC);
    one_shot(CLOCK_REALTIME);
    one_shot(CLOCK_BOOTTIME);
    periodic();
    absolute(CLOCK_MONOTONIC);
    absolute(CLOCK_REALTIME);
    absolute(CLOCK_BOOTTIME);
    through_epoll();
    fdinfo();
    set_ticks();
    alarm_clocks();
    across_fork();
    return done();
}
