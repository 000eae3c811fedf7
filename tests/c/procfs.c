/* /proc, /sys and /dev as programs read them: the layout of each file and
 * how its values relate to what system calls report, never a host-specific
 * value, so that the same checks pass natively and in the sandbox. */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <sys/sysmacros.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

static char buf[1 << 16];

/* Reads a whole file into buf; its length, or -1. */
static long slurp(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    long n = 0, r;
    while ((r = read(fd, buf + n, sizeof buf - 1 - n)) > 0)
        n += r;
    close(fd);
    buf[n] = 0;
    return r < 0 ? -1 : n;
}

/* The value after "Key:" in buf (status-like files), or NULL. */
static const char *field(const char *key) {
    size_t k = strlen(key);
    for (const char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (strncmp(l, key, k) == 0 && l[k] == ':')
            return l + k + 1;
    return NULL;
}

static int count_lines_starting(const char *prefix) {
    int n = 0;
    size_t k = strlen(prefix);
    for (const char *l = buf; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        n += strncmp(l, prefix, k) == 0;
    return n;
}

static long read_long(const char *path) {
    if (slurp(path) < 0)
        return -1;
    char *end;
    long v = strtol(buf, &end, 10);
    return *end == '\n' ? v : -2;
}

static void test_stat(void) {
    CHECK(slurp("/proc/self/stat") > 0);
    /* pid (comm) state ppid ...: the name may hold spaces; fields after
     * the last ')' are counted. */
    char *close_paren = strrchr(buf, ')');
    CHECK(close_paren != NULL);
    int pid = atoi(buf);
    CHECK(pid == getpid());
    int fields = 2;
    for (char *t = strtok(close_paren + 1, " \n"); t; t = strtok(NULL, " \n"))
        fields++;
    CHECK(fields == 52);
    long vals[53] = {0};
    CHECK(slurp("/proc/self/stat") > 0);
    char *p = strrchr(buf, ')') + 2;
    CHECK(*p == 'R');
    p += 2;
    for (int i = 4; i <= 52 && *p; i++)
        vals[i] = strtol(p, &p, 10);
    CHECK(vals[4] == getppid());
    CHECK(vals[5] == getpgrp());
    CHECK(vals[20] == 1); /* num_threads */
    CHECK(vals[23] > 0);  /* vsize */
    CHECK(vals[24] > 0);  /* rss */
    CHECK(vals[22] >= 0); /* starttime */

    CHECK(slurp("/proc/self/statm") > 0);
    long size, resident, shared, text, lib, data, dt;
    CHECK(sscanf(buf, "%ld %ld %ld %ld %ld %ld %ld", &size, &resident, &shared, &text, &lib, &data, &dt) == 7);
    CHECK(size > 0 && resident > 0 && resident <= size && shared <= resident && text > 0 && data > 0);
    CHECK(lib == 0 && dt == 0);
    printf("stat and statm: laid out as Linux's\n");
}

static void test_status(void) {
    CHECK(slurp("/proc/self/status") > 0);
    const char *keys[] = {"Name",   "Umask",  "State",       "Tgid",    "Pid",    "PPid",     "Uid",
                          "Gid",    "Groups", "VmSize",      "VmRSS",   "Threads", "SigBlk",  "SigIgn",
                          "SigCgt", "CapEff", "NoNewPrivs",  "Seccomp", "Cpus_allowed", "Cpus_allowed_list"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        if (!field(keys[i]))
            printf("status: no %s\n", keys[i]);
    }
    CHECK(field("Pid") && atoi(field("Pid")) == getpid());
    CHECK(field("PPid") && atoi(field("PPid")) == getppid());
    CHECK(field("Threads") && atoi(field("Threads")) == 1);
    unsigned uid = ~0u;
    CHECK(field("Uid") && sscanf(field("Uid"), "%u", &uid) == 1 && uid == getuid());
    CHECK(field("Umask") && strtol(field("Umask"), NULL, 8) == 022);
    printf("status: the lines programs read\n");
}

static void test_limits(void) {
    CHECK(slurp("/proc/self/limits") > 0);
    CHECK(strncmp(buf, "Limit                     Soft Limit           Hard Limit           Units     \n", 79) == 0);
    CHECK(count_lines_starting("Max ") == 16);
    struct rlimit r;
    CHECK_OK(getrlimit(RLIMIT_NOFILE, &r));
    const char *l = strstr(buf, "Max open files");
    unsigned long soft = 0, hard = 0;
    CHECK(l && sscanf(l + 26, "%lu %lu", &soft, &hard) == 2 && soft == r.rlim_cur && hard == r.rlim_max);
    printf("limits: laid out as Linux's\n");
}

static void test_mountinfo(void) {
    CHECK(slurp("/proc/self/mountinfo") > 0);
    int root = 0, proc = 0, lines = 0, malformed = 0;
    for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n")) {
        int id, parent;
        unsigned major, minor;
        char where[4096], mnt[4096];
        lines++;
        malformed += sscanf(l, "%d %d %u:%u %4095s %4095s", &id, &parent, &major, &minor, where, mnt) != 6;
        malformed += strstr(l, " - ") == NULL;
        root += strcmp(mnt, "/") == 0;
        if (strcmp(mnt, "/proc") == 0)
            proc += strstr(l, " - proc ") != NULL;
    }
    CHECK(lines > 0 && malformed == 0 && root >= 1 && proc == 1);
    printf("mountinfo: / and /proc\n");
}

static void *idle_thread(void *arg) {
    int *fds = arg;
    char c;
    (void)!read(fds[0], &c, 1);
    return NULL;
}

static int tid_in_task_dir(pid_t tid) {
    DIR *d = opendir("/proc/self/task");
    int found = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        found += atoi(e->d_name) == tid;
    if (d)
        closedir(d);
    return found;
}

static pid_t second_tid;

static void *record_tid(void *arg) {
    second_tid = syscall(SYS_gettid);
    return idle_thread(arg);
}

static void test_tasks(void) {
    int fds[2];
    CHECK_OK(pipe(fds));
    pthread_t t;
    CHECK(pthread_create(&t, NULL, record_tid, fds) == 0);
    while (!__atomic_load_n(&second_tid, __ATOMIC_SEQ_CST))
        sched_yield();
    CHECK(tid_in_task_dir(getpid()) == 1);
    CHECK(tid_in_task_dir(second_tid) == 1);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", second_tid);
    CHECK(slurp(path) > 0 && atoi(buf) == second_tid);
    snprintf(path, sizeof path, "/proc/self/task/%d/status", second_tid);
    CHECK(slurp(path) > 0 && field("Pid") && atoi(field("Pid")) == second_tid);
    CHECK(field("Tgid") && atoi(field("Tgid")) == getpid());
    CHECK(slurp("/proc/self/status") > 0 && field("Threads") && atoi(field("Threads")) == 2);
    snprintf(path, sizeof path, "/proc/thread-self");
    char link[64], want[64];
    ssize_t n = readlink(path, link, sizeof link - 1);
    CHECK(n > 0);
    link[n > 0 ? n : 0] = 0;
    snprintf(want, sizeof want, "%d/task/%d", getpid(), getpid());
    CHECK(strcmp(link, want) == 0);
    CHECK(write(fds[1], "x", 1) == 1);
    pthread_join(t, NULL);
    close(fds[0]);
    close(fds[1]);
    printf("task: a directory per thread\n");
}

static void test_fdinfo(void) {
    int fd = open("/proc/self/limits", O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0);
    char c[10];
    CHECK(read(fd, c, sizeof c) == sizeof c);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
    CHECK(slurp(path) > 0);
    CHECK(field("pos") && atol(field("pos")) == 10);
    long flags = field("flags") ? strtol(field("flags"), NULL, 8) : -1;
    CHECK(flags >= 0 && (flags & O_CLOEXEC) && (flags & O_ACCMODE) == O_RDONLY);
    CHECK(field("mnt_id") && field("ino"));
    struct stat st;
    CHECK_OK(fstat(fd, &st));
    CHECK(field("ino") && (unsigned long)atol(field("ino")) == st.st_ino);
    close(fd);
    snprintf(path, sizeof path, "/proc/self/fdinfo/%d", fd);
    CHECK_ERR(open(path, O_RDONLY), ENOENT);
    printf("fdinfo: pos, flags, mnt_id, ino\n");
}

static void test_writable(void) {
    long adj = read_long("/proc/self/oom_score_adj");
    CHECK(adj >= -1000 && adj <= 1000);
    if (adj < 1000) {
        int fd = open("/proc/self/oom_score_adj", O_WRONLY);
        CHECK(fd >= 0);
        char v[16];
        int n = snprintf(v, sizeof v, "%ld\n", adj + 1);
        CHECK(write(fd, v, n) == n);
        CHECK_ERR(write(fd, "1001\n", 5), EINVAL);
        CHECK_ERR(write(fd, "x\n", 2), EINVAL);
        close(fd);
        CHECK(read_long("/proc/self/oom_score_adj") == adj + 1);
    }
    CHECK(slurp("/proc/self/coredump_filter") == 9);
    int fd = open("/proc/self/coredump_filter", O_WRONLY);
    CHECK(fd >= 0);
    CHECK(write(fd, "0x7\n", 4) == 4);
    close(fd);
    CHECK(slurp("/proc/self/coredump_filter") == 9 && strcmp(buf, "00000007\n") == 0);
    /* Kept by a child. */
    pid_t pid = fork();
    if (pid == 0)
        _exit(slurp("/proc/self/coredump_filter") == 9 && strcmp(buf, "00000007\n") == 0 ? 0 : 1);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    struct stat st;
    CHECK_OK(stat("/proc/self/environ", &st));
    CHECK((st.st_mode & 07777) == 0400);
    CHECK_OK(stat("/proc/self/oom_score_adj", &st));
    CHECK((st.st_mode & 07777) == 0644);
    printf("oom_score_adj, coredump_filter: written and read back\n");
}

static void test_sysctl(void) {
    struct utsname u;
    CHECK_OK(uname(&u));
    CHECK(slurp("/proc/sys/kernel/hostname") > 0);
    CHECK(strncmp(buf, u.nodename, strlen(u.nodename)) == 0 && buf[strlen(u.nodename)] == '\n');
    CHECK(slurp("/proc/sys/kernel/osrelease") > 0);
    CHECK(strncmp(buf, u.release, strlen(u.release)) == 0);
    CHECK(slurp("/proc/sys/kernel/ostype") > 0 && strcmp(buf, "Linux\n") == 0);
    CHECK(read_long("/proc/sys/kernel/pid_max") >= 32768);
    CHECK(read_long("/proc/sys/kernel/threads-max") > 0);
    CHECK(read_long("/proc/sys/kernel/ngroups_max") == sysconf(_SC_NGROUPS_MAX));
    CHECK(read_long("/proc/sys/kernel/cap_last_cap") >= 36);
    CHECK(read_long("/proc/sys/vm/max_map_count") > 0);
    long over = read_long("/proc/sys/vm/overcommit_memory");
    CHECK(over >= 0 && over <= 2);
    CHECK(read_long("/proc/sys/fs/file-max") > 0);
    CHECK(read_long("/proc/sys/fs/nr_open") >= 1024);
    CHECK(read_long("/proc/sys/fs/pipe-max-size") >= 4096);
    CHECK(read_long("/proc/sys/net/core/somaxconn") > 0);
    int lo = 0, hi = 0;
    CHECK(slurp("/proc/sys/net/ipv4/ip_local_port_range") > 0 && sscanf(buf, "%d %d", &lo, &hi) == 2 && lo < hi);
    char a[64], b[64];
    CHECK(slurp("/proc/sys/kernel/random/uuid") == 37 && buf[8] == '-' && buf[14] == '4');
    strcpy(a, buf);
    CHECK(slurp("/proc/sys/kernel/random/uuid") == 37 && strcmp(a, buf) != 0);
    CHECK(slurp("/proc/sys/kernel/random/boot_id") == 37);
    strcpy(b, buf);
    CHECK(slurp("/proc/sys/kernel/random/boot_id") == 37 && strcmp(b, buf) == 0);
    struct stat st;
    CHECK_OK(stat("/proc/sys/kernel/pid_max", &st));
    CHECK((st.st_mode & 0777) == 0644);
    CHECK_OK(stat("/proc/sys/kernel/osrelease", &st));
    CHECK((st.st_mode & 0777) == 0444);
    printf("sysctls: kernel, vm, fs, net\n");
}

static void test_global(void) {
    struct sysinfo si;
    CHECK_OK(sysinfo(&si));
    CHECK(slurp("/proc/meminfo") > 0);
    const char *keys[] = {"MemTotal", "MemFree", "MemAvailable", "Buffers", "Cached", "SwapTotal", "SwapFree", "Shmem"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        if (!field(keys[i]))
            printf("meminfo: no %s\n", keys[i]);
    }
    CHECK(field("MemTotal") && (unsigned long long)atoll(field("MemTotal")) * 1024 == (unsigned long long)si.totalram * si.mem_unit);

    int cpus = get_nprocs();
    CHECK(cpus == sysconf(_SC_NPROCESSORS_ONLN));
    CHECK(slurp("/proc/cpuinfo") > 0 && count_lines_starting("processor\t: ") == cpus);
    CHECK(slurp("/proc/stat") > 0 && strncmp(buf, "cpu  ", 5) == 0);
    CHECK(count_lines_starting("cpu") == cpus + 1);
    CHECK(count_lines_starting("btime ") == 1 && count_lines_starting("processes ") == 1);
    CHECK(count_lines_starting("procs_running ") == 1 && count_lines_starting("ctxt ") == 1);
    cpu_set_t set;
    CHECK_OK(sched_getaffinity(0, sizeof set, &set));
    CHECK(CPU_COUNT(&set) <= cpus);

    double l1, l5, l15, up, idle;
    int running, total, last;
    CHECK(slurp("/proc/loadavg") > 0);
    CHECK(sscanf(buf, "%lf %lf %lf %d/%d %d", &l1, &l5, &l15, &running, &total, &last) == 6);
    CHECK(running >= 1 && running <= total);
    CHECK(slurp("/proc/uptime") > 0 && sscanf(buf, "%lf %lf", &up, &idle) == 2 && up > 0);
    CHECK(slurp("/proc/filesystems") > 0 && strstr(buf, "\tproc\n") != NULL);
    CHECK(slurp("/proc/version") > 0 && strncmp(buf, "Linux version ", 14) == 0);

    /* Every CPU online: the three lists agree. */
    char online[64];
    CHECK(slurp("/sys/devices/system/cpu/online") > 0 && strlen(buf) < sizeof online);
    strcpy(online, buf);
    CHECK(slurp("/sys/devices/system/cpu/present") > 0 && strcmp(buf, online) == 0);
    printf("meminfo, cpuinfo, stat, loadavg, uptime, /sys cpus: consistent\n");
}

static void test_dev(void) {
    const char *links[][2] = {
        {"/dev/stdin", "/proc/self/fd/0"},
        {"/dev/stdout", "/proc/self/fd/1"},
        {"/dev/stderr", "/proc/self/fd/2"},
        {"/dev/fd", "/proc/self/fd"},
    };
    for (size_t i = 0; i < 4; i++) {
        char t[64];
        ssize_t n = readlink(links[i][0], t, sizeof t - 1);
        CHECK(n > 0);
        t[n > 0 ? n : 0] = 0;
        if (strcmp(t, links[i][1]) != 0)
            printf("%s -> %s\n", links[i][0], t);
    }
    struct { const char *path; unsigned major, minor; } devs[] = {
        {"/dev/null", 1, 3}, {"/dev/zero", 1, 5}, {"/dev/full", 1, 7},
        {"/dev/random", 1, 8}, {"/dev/urandom", 1, 9}, {"/dev/tty", 5, 0},
    };
    for (size_t i = 0; i < sizeof devs / sizeof *devs; i++) {
        struct stat st;
        CHECK_OK(stat(devs[i].path, &st));
        CHECK(S_ISCHR(st.st_mode) && major(st.st_rdev) == devs[i].major && minor(st.st_rdev) == devs[i].minor);
        CHECK((st.st_mode & 0777) == 0666);
    }
    struct stat st;
    CHECK_OK(stat("/dev/shm", &st));
    CHECK(S_ISDIR(st.st_mode));
    /* /dev/stdout opens the same stream again (a pipe under the tests). */
    int fd = open("/dev/stdout", O_WRONLY);
    CHECK(fd >= 0);
    struct stat a, b;
    CHECK_OK(fstat(fd, &a));
    CHECK_OK(fstat(1, &b));
    CHECK(a.st_ino == b.st_ino && a.st_dev == b.st_dev);
    close(fd);
    printf("/dev: devices, links and shm\n");
}

int main(void) {
    test_stat();
    test_status();
    test_limits();
    test_mountinfo();
    test_tasks();
    test_fdinfo();
    test_writable();
    test_sysctl();
    test_global();
    test_dev();
    return done();
}
