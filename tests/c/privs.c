/* Privilege checks ask the calling process's credentials: run as root, it
 * checks what root may do, then drops to nobody (65534) and checks what
 * nobody may not. Capability values and host-dependent answers (raising a
 * hard limit needs CAP_SYS_RESOURCE, which the caller may lack) are printed,
 * to be compared with a native run.
 *
 * argv[1]: a directory holding `secret` (root's, 0600), `plain` (0644),
 * `link` (a symlink to plain) and `locked/` (0700) holding `inner` (0644). */
#include <fcntl.h>
#include <linux/capability.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <grp.h>
#include <unistd.h>

#include "t.h"

#define NOBODY 65534

static char secret[512], plain[512], link_[512], locked[512], inner[512], via_locked[512], locked_link[512];

static void caps(const char *what) {
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    CHECK(syscall(SYS_capget, &h, d) == 0);
    printf("%s: eff %08x%08x prm %08x%08x inh %08x%08x\n", what, d[1].effective, d[0].effective, d[1].permitted,
           d[0].permitted, d[1].inheritable, d[0].inheritable);
}

static int opens(const char *path) {
    int fd = open(path, O_RDONLY);
    if (fd >= 0)
        close(fd);
    return fd >= 0 ? 0 : errno;
}

static void raise_hard_nofile(const char *what) {
    struct rlimit r;
    CHECK(getrlimit(RLIMIT_NOFILE, &r) == 0);
    r.rlim_max += 1;
    int rc = setrlimit(RLIMIT_NOFILE, &r);
    printf("%s: raise hard RLIMIT_NOFILE: %s\n", what, rc == 0 ? "ok" : strerror(errno));
}

static volatile int got_uid = -1;

static void on_usr1(int sig, siginfo_t *si, void *uc) {
    got_uid = (int)si->si_uid;
}

/* Root's view: everything but executing what nobody may execute. */
static void as_root(const char *dir) {
    caps("root");
    printf("root: bounding SYS_ADMIN %d\n", prctl(PR_CAPBSET_READ, CAP_SYS_ADMIN, 0, 0, 0));
    CHECK_ERR(prctl(PR_CAPBSET_READ, 99, 0, 0, 0), EINVAL);
    CHECK(opens(secret) == 0);
    CHECK(opens(inner) == 0);
    CHECK(access(inner, R_OK) == 0);
    CHECK_ERR(access(plain, X_OK), EACCES);
    CHECK(access(locked, X_OK) == 0);
    CHECK_ERR(execl(plain, plain, (char *)NULL), EACCES);
    raise_hard_nofile("root");
    pid_t p = fork();
    if (p == 0) {
        /* chroot is root's: the directory becomes /. */
        if (chroot(dir) != 0 || access("/secret", F_OK) != 0)
            _exit(1);
        _exit(0);
    }
    int st;
    CHECK(waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* seteuid away from root and back: the effective set follows the
 * effective uid, and access(2) asks as the real uid. */
static void effective_only(void) {
    CHECK(seteuid(NOBODY) == 0);
    caps("euid nobody");
    CHECK_ERR(open(secret, O_RDONLY), EACCES);
    CHECK(access(secret, R_OK) == 0);
    CHECK_ERR(faccessat(AT_FDCWD, secret, R_OK, AT_EACCESS), EACCES);
    CHECK(seteuid(0) == 0);
    caps("euid root again");
    CHECK(opens(secret) == 0);
}

/* PR_SET_KEEPCAPS keeps the permitted set over a change to nobody; a
 * capability raised again from it works for nobody. */
static void keep_caps(void) {
    pid_t p = fork();
    if (p == 0) {
        CHECK(prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) == 0);
        CHECK(prctl(PR_GET_KEEPCAPS, 0, 0, 0, 0) == 1);
        CHECK(setresuid(NOBODY, NOBODY, NOBODY) == 0);
        caps("kept");
        CHECK_ERR(open(secret, O_RDONLY), EACCES);
        struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
        struct __user_cap_data_struct d[2];
        CHECK(syscall(SYS_capget, &h, d) == 0);
        d[0].effective = d[0].permitted & (1u << CAP_DAC_READ_SEARCH);
        d[1].effective = 0;
        CHECK(syscall(SYS_capset, &h, d) == 0);
        CHECK(opens(secret) == 0);
        /* More than permitted may not be made effective. */
        d[0].effective = ~0u;
        CHECK_ERR(syscall(SYS_capset, &h, d), EPERM);
        /* Nor may another process's be set. */
        h.pid = getppid();
        d[0].effective = 0;
        CHECK_ERR(syscall(SYS_capset, &h, d), EPERM);
        fflush(stdout);
        _exit(t_failures ? 1 : 0);
    }
    int st;
    CHECK(waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static const char *self_path;

/* Ambient capabilities survive execve for nobody; nothing else does. */
static void ambient_over_exec(void) {
    pid_t p = fork();
    if (p == 0) {
        CHECK(prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) == 0);
        CHECK(setresuid(NOBODY, NOBODY, NOBODY) == 0);
        struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
        struct __user_cap_data_struct d[2];
        CHECK(syscall(SYS_capget, &h, d) == 0);
        d[0].inheritable = 1u << CAP_DAC_READ_SEARCH;
        CHECK(syscall(SYS_capset, &h, d) == 0);
        CHECK_ERR(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_KILL, 0, 0), EPERM);
        CHECK(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_DAC_READ_SEARCH, 0, 0) == 0);
        CHECK(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_DAC_READ_SEARCH, 0, 0) == 1);
        fflush(stdout);
        if (t_failures)
            _exit(1);
        execl(self_path, self_path, "--after-exec", secret, (char *)NULL);
        _exit(127);
    }
    int st;
    CHECK(waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* Nobody may do none of root's things. */
static void as_nobody(const char *dir) {
    pid_t parent = getppid();
    CHECK(setgroups(0, NULL) == 0);
    CHECK(setgid(NOBODY) == 0);
    CHECK(setuid(NOBODY) == 0);
    CHECK(getuid() == NOBODY && geteuid() == NOBODY && getgid() == NOBODY);
    caps("nobody");
    printf("nobody: bounding SYS_ADMIN %d\n", prctl(PR_CAPBSET_READ, CAP_SYS_ADMIN, 0, 0, 0));
    CHECK_ERR(prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0), EPERM);

    CHECK_ERR(open(secret, O_RDONLY), EACCES);
    CHECK_ERR(access(secret, R_OK), EACCES);
    CHECK(opens(plain) == 0);
    CHECK(opens(link_) == 0);
    /* Search permission on every directory walked through. */
    struct stat s;
    CHECK_ERR(stat(inner, &s), EACCES);
    CHECK_ERR(open(via_locked, O_RDONLY), EACCES);
    char buf[64];
    CHECK_ERR(readlink(locked_link, buf, sizeof buf), EACCES);
    CHECK(stat(locked, &s) == 0);
    CHECK_ERR(open(locked, O_RDONLY | O_DIRECTORY), EACCES);
    CHECK_ERR(access(locked, X_OK), EACCES);
    CHECK_ERR(chdir(locked), EACCES);
    CHECK(chdir(dir) == 0);
    CHECK_ERR(chdir("locked"), EACCES);
    CHECK_ERR(execl(plain, plain, (char *)NULL), EACCES);

    CHECK_ERR(chroot(dir), EPERM);
    CHECK_ERR(sethostname("nobody", 6), EPERM);
    CHECK_ERR(chroot(locked), EACCES);
    CHECK_ERR(setuid(0), EPERM);
    CHECK_ERR(setgroups(0, NULL), EPERM);
    raise_hard_nofile("nobody");
    struct rlimit r;
    CHECK(getrlimit(RLIMIT_NOFILE, &r) == 0);
    r.rlim_max -= 1;
    if (r.rlim_cur > r.rlim_max)
        r.rlim_cur = r.rlim_max;
    CHECK(setrlimit(RLIMIT_NOFILE, &r) == 0);
    r.rlim_max += 1;
    CHECK_ERR(setrlimit(RLIMIT_NOFILE, &r), EPERM);

    /* Root's process may not be signalled, but SIGCONT within the session
     * may. */
    CHECK_ERR(kill(parent, 0), EPERM);
    CHECK_ERR(kill(parent, SIGUSR1), EPERM);
    CHECK(kill(parent, SIGCONT) == 0);

    /* The sender's real uid comes with a signal. */
    struct sigaction sa = {0};
    sa.sa_sigaction = on_usr1;
    sa.sa_flags = SA_SIGINFO;
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
    CHECK(kill(getpid(), SIGUSR1) == 0);
    CHECK(got_uid == NOBODY);

    /* What nobody makes is nobody's. */
    int fds[2];
    CHECK(pipe(fds) == 0);
    CHECK(fstat(fds[0], &s) == 0 && s.st_uid == NOBODY && s.st_gid == NOBODY);
    CHECK(stat("/proc/self", &s) == 0 && s.st_uid == NOBODY);
    /* Changing ids made the process undumpable: its files are root's, all
     * but its directory, until it is dumpable again. */
    CHECK(prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0);
    CHECK(stat("/proc/self/status", &s) == 0 && s.st_uid == 0);
    CHECK(prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) == 0);
    CHECK(stat("/proc/self/status", &s) == 0 && s.st_uid == NOBODY);
}

int main(int argc, char **argv) {
    if (argc < 2 || (geteuid() != 0 && argc != 3)) {
        fprintf(stderr, "usage: privs DIR, as root\n");
        return 2;
    }
    self_path = argv[0];
    if (argc == 3 && strcmp(argv[1], "--after-exec") == 0) {
        caps("after exec");
        printf("after exec: keepcaps %d, secret %s\n", prctl(PR_GET_KEEPCAPS, 0, 0, 0, 0), strerror(opens(argv[2])));
        return 0;
    }
    const char *dir = argv[1];
    snprintf(secret, sizeof secret, "%s/secret", dir);
    snprintf(plain, sizeof plain, "%s/plain", dir);
    snprintf(link_, sizeof link_, "%s/link", dir);
    snprintf(locked, sizeof locked, "%s/locked", dir);
    snprintf(inner, sizeof inner, "%s/locked/inner", dir);
    snprintf(via_locked, sizeof via_locked, "%s/locked/../plain", dir);
    snprintf(locked_link, sizeof locked_link, "%s/locked/link", dir);
    setvbuf(stdout, NULL, _IONBF, 0);

    as_root(dir);
    effective_only();
    keep_caps();
    ambient_over_exec();

    pid_t p = fork();
    if (p == 0) {
        as_nobody(dir);
        _exit(t_failures ? 1 : 0);
    }
    siginfo_t si;
    CHECK(waitid(P_PID, p, &si, WEXITED) == 0);
    CHECK(si.si_code == CLD_EXITED && si.si_status == 0);
    CHECK(si.si_uid == NOBODY);
    return done();
}
