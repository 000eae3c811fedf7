/* Capabilities as a container's root holds them, and how they change:
 * securebits and their locks, the ambient set, the bounding set, execve as
 * root, as another user, of a set-user-id-root program and of programs with
 * file capabilities (security.capability, revisions 2 and 3).
 *
 * Natively root holds every capability, so the program first narrows itself
 * to the set docker and runsc grant (bounding, permitted and effective) and
 * runs itself again: from then on both runs must print the same. In the
 * sandbox that set is root's to begin with, and narrowing changes nothing.
 * The program reruns itself for each execve it checks; CAPS_PHASE says
 * which part it is. argv[1] is the work directory (work_dir.h). */
#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/auxv.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>

#include "work_dir.h"

#define NOBODY 65534
#define BIT(c) (1ull << (c))
#define LAST_CAP 40

/* What docker and runsc grant a container's root. */
static const unsigned long long CONTAINER_CAPS =
    BIT(CAP_CHOWN) | BIT(CAP_DAC_OVERRIDE) | BIT(CAP_FSETID) | BIT(CAP_FOWNER) | BIT(CAP_MKNOD) | BIT(CAP_NET_RAW) |
    BIT(CAP_SETGID) | BIT(CAP_SETUID) | BIT(CAP_SETFCAP) | BIT(CAP_SETPCAP) | BIT(CAP_NET_BIND_SERVICE) |
    BIT(CAP_SYS_CHROOT) | BIT(CAP_KILL) | BIT(CAP_AUDIT_WRITE);

struct sets {
    unsigned long long eff, prm, inh;
};

static struct sets get_sets(void) {
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    struct sets s = {0, 0, 0};
    CHECK_OK(syscall(SYS_capget, &h, d));
    s.eff = (unsigned long long)d[1].effective << 32 | d[0].effective;
    s.prm = (unsigned long long)d[1].permitted << 32 | d[0].permitted;
    s.inh = (unsigned long long)d[1].inheritable << 32 | d[0].inheritable;
    return s;
}

static int set_sets(struct sets s) {
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2] = {
        {(unsigned)s.eff, (unsigned)s.prm, (unsigned)s.inh},
        {(unsigned)(s.eff >> 32), (unsigned)(s.prm >> 32), (unsigned)(s.inh >> 32)},
    };
    return (int)syscall(SYS_capset, &h, d);
}

static void print_caps(const char *what) {
    struct sets s = get_sets();
    unsigned long long bounding = 0, ambient = 0;
    for (int c = 0; c <= LAST_CAP; c++) {
        if (prctl(PR_CAPBSET_READ, c, 0, 0, 0) == 1)
            bounding |= BIT(c);
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, c, 0, 0) == 1)
            ambient |= BIT(c);
    }
    uid_t r, e, sv;
    CHECK_OK(getresuid(&r, &e, &sv));
    printf("%s: uid %u/%u/%u eff %llx prm %llx inh %llx amb %llx bnd %llx securebits %x secure %lu\n", what, r, e, sv,
           s.eff, s.prm, s.inh, ambient, bounding, prctl(PR_GET_SECUREBITS, 0, 0, 0, 0), getauxval(AT_SECURE));
}

/* Runs `path` (this program, or a copy of it) as part `phase`. */
static void run_phase(const char *path, const char *phase) {
    char env[64];
    snprintf(env, sizeof env, "CAPS_PHASE=%s", phase);
    char *argv[] = {(char *)path, NULL};
    char *envp[] = {env, NULL};
    fflush(stdout);
    execve(path, argv, envp);
}

/* Runs `f` in a child and waits for it; the child's checks count there. */
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

static void become_nobody(void) {
    CHECK_OK(setresgid(NOBODY, NOBODY, NOBODY));
    CHECK_OK(setresuid(NOBODY, NOBODY, NOBODY));
}

/* Runs `path` as part "print" in a child and waits for it; with
 * `as_nobody`, after giving up root without keeping anything. */
static void exec_and_print(const char *path, int as_nobody, int expect_errno) {
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        if (as_nobody)
            become_nobody();
        run_phase(path, "print");
        printf("exec %s: %s\n", path, strerror(errno));
        fflush(stdout);
        _exit(errno == expect_errno ? 0 : 1);
    }
    int st;
    CHECK(waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* security.capability values (vfs_cap_data, little-endian words). */
static int set_file_caps(const char *path, unsigned revision, int effective, unsigned permitted, int rootid) {
    unsigned v[6] = {revision << 24 | (effective ? 1 : 0), permitted, 0, 0, 0, (unsigned)rootid};
    size_t size = revision == 3 ? 24 : revision == 2 ? 20 : 12;
    return setxattr(path, "security.capability", v, size, 0);
}

/* Copies this program to `name`, mode `mode`. */
static void copy_self(const char *name, mode_t mode) {
    int in = open("/proc/self/exe", O_RDONLY);
    int out = open(name, O_WRONLY | O_CREAT | O_TRUNC, 0700);
    CHECK(in >= 0 && out >= 0);
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        CHECK(write(out, buf, n) == n);
    close(in);
    close(out);
    CHECK_OK(chmod(name, mode));
}

static void securebits_and_locks(void) {
    CHECK(prctl(PR_GET_SECUREBITS, 0, 0, 0, 0) == 0);
    CHECK_OK(prctl(PR_SET_SECUREBITS, SECBIT_KEEP_CAPS, 0, 0, 0));
    CHECK(prctl(PR_GET_KEEPCAPS, 0, 0, 0, 0) == 1);
    CHECK_OK(prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0));
    CHECK(prctl(PR_GET_SECUREBITS, 0, 0, 0, 0) == 0);
    CHECK_ERR(prctl(PR_SET_KEEPCAPS, 2, 0, 0, 0), EINVAL);
    /* Unknown bits are refused. */
    CHECK_ERR(prctl(PR_SET_SECUREBITS, 1 << 20, 0, 0, 0), EPERM);
    CHECK_OK(prctl(PR_SET_SECUREBITS, SECBIT_KEEP_CAPS | SECBIT_KEEP_CAPS_LOCKED, 0, 0, 0));
    /* A locked flag stays, and the lock stays. */
    CHECK_ERR(prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0), EPERM);
    CHECK_ERR(prctl(PR_SET_SECUREBITS, SECBIT_KEEP_CAPS_LOCKED, 0, 0, 0), EPERM);
    CHECK_ERR(prctl(PR_SET_SECUREBITS, SECBIT_KEEP_CAPS, 0, 0, 0), EPERM);
    CHECK_OK(prctl(PR_SET_SECUREBITS, SECBIT_KEEP_CAPS | SECBIT_KEEP_CAPS_LOCKED | SECBIT_NOROOT, 0, 0, 0));
    print_caps("securebits set");
    /* execve clears KEEP_CAPS but not its lock; NOROOT leaves root's next
     * program without capabilities. */
    run_phase("/proc/self/exe", "print");
    CHECK(0);
}

static void no_setuid_fixup(void) {
    CHECK_OK(prctl(PR_SET_SECUREBITS, SECBIT_NO_SETUID_FIXUP, 0, 0, 0));
    become_nobody();
    print_caps("no setuid fixup, nobody");
}

static void keep_caps_then_drop(void) {
    CHECK_OK(prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0));
    become_nobody();
    print_caps("kept caps, nobody");
    /* Without CAP_SETPCAP in effect the bounding set stays. */
    CHECK_ERR(prctl(PR_CAPBSET_DROP, CAP_KILL, 0, 0, 0), EPERM);
    CHECK_ERR(prctl(PR_SET_SECUREBITS, 0, 0, 0, 0), EPERM);
}

static void ambient(void) {
    struct sets s = get_sets();
    s.inh = BIT(CAP_NET_BIND_SERVICE) | BIT(CAP_KILL);
    CHECK_OK(set_sets(s));
    /* Nothing outside the bounding set may become inheritable. */
    s.inh |= BIT(CAP_SYS_ADMIN);
    CHECK_ERR(set_sets(s), EPERM);
    CHECK_OK(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_NET_BIND_SERVICE, 0, 0));
    CHECK(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_NET_BIND_SERVICE, 0, 0) == 1);
    CHECK_ERR(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_CHOWN, 0, 0), EPERM);
    CHECK_ERR(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SYS_ADMIN, 0, 0), EPERM);
    CHECK_ERR(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, LAST_CAP + 1, 0, 0), EINVAL);
    CHECK_ERR(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_KILL, 1, 0), EINVAL);
    CHECK_ERR(prctl(PR_CAP_AMBIENT, 99, CAP_KILL, 0, 0), EINVAL);
    /* Leaving root clears the ambient set even when keeping the rest. */
    CHECK_OK(prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0));
    become_nobody();
    print_caps("ambient, nobody");
    CHECK_OK(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_NET_BIND_SERVICE, 0, 0));
    /* Lowering a capability from the inheritable set lowers it here too. */
    CHECK_OK(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_KILL, 0, 0));
    s = get_sets();
    s.inh &= ~BIT(CAP_KILL);
    CHECK_OK(set_sets(s));
    CHECK(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, CAP_KILL, 0, 0) == 0);
    /* A program run by nobody holds the ambient set, effective. */
    run_phase("./plain", "print");
    CHECK(0);
}

static void no_ambient_raise(void) {
    struct sets s = get_sets();
    s.inh = BIT(CAP_KILL);
    CHECK_OK(set_sets(s));
    CHECK_OK(prctl(PR_SET_SECUREBITS, SECBIT_NO_CAP_AMBIENT_RAISE, 0, 0, 0));
    CHECK_ERR(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_KILL, 0, 0), EPERM);
}

static void bounding(void) {
    CHECK_OK(prctl(PR_CAPBSET_DROP, CAP_SYS_CHROOT, 0, 0, 0));
    CHECK_OK(prctl(PR_CAPBSET_DROP, CAP_SYS_ADMIN, 0, 0, 0));
    CHECK_ERR(prctl(PR_CAPBSET_DROP, LAST_CAP + 1, 0, 0, 0), EINVAL);
    CHECK(prctl(PR_CAPBSET_READ, CAP_SYS_CHROOT, 0, 0, 0) == 0);
    /* Still permitted until the next program. */
    CHECK(get_sets().prm & BIT(CAP_SYS_CHROOT));
    run_phase("/proc/self/exe", "bounded");
    CHECK(0);
}

static void bounded(void) {
    print_caps("bounded");
    CHECK_ERR(chroot("/"), EPERM);
}

/* What root in a container may not do without being given it. */
static void refused_without_caps(void) {
    char name[65] = {0};
    CHECK_OK(gethostname(name, sizeof name - 1));
    CHECK_ERR(sethostname(name, strlen(name)), EPERM);
    CHECK_ERR(mount("none", ".", "tmpfs", 0, NULL), EPERM);
    CHECK_ERR(umount("/proc"), EPERM);
    struct rlimit r;
    CHECK_OK(getrlimit(RLIMIT_NOFILE, &r));
    r.rlim_max += 1;
    CHECK_ERR(setrlimit(RLIMIT_NOFILE, &r), EPERM);
    CHECK_OK(put_file("plain", "x", 1, 0644));
    CHECK_ERR(setxattr("plain", "security.cordon", "x", 1, 0), EPERM);
    /* Held ones work: chown (CAP_CHOWN), kill of another user's process
     * (CAP_KILL). */
    CHECK_OK(chown("plain", NOBODY, NOBODY));
    CHECK_OK(unlink("plain"));
}

static void file_caps(void) {
    copy_self("fcap", 0755);
    /* Malformed values are refused. */
    CHECK_ERR(set_file_caps("fcap", 1, 1, BIT(CAP_KILL), 0), EINVAL);
    CHECK_ERR(setxattr("fcap", "security.capability", "abcde", 5, 0), EINVAL);
    unsigned bad[5] = {0x09000001, 0, 0, 0, 0};
    CHECK_ERR(setxattr("fcap", "security.capability", bad, sizeof bad, 0), EINVAL);

    /* Revision 2, effective: nobody's program gets them, in effect. */
    CHECK_OK(set_file_caps("fcap", 2, 1, BIT(CAP_NET_BIND_SERVICE) | BIT(CAP_KILL), 0));
    unsigned back[8];
    ssize_t n = getxattr("fcap", "security.capability", back, sizeof back);
    printf("revision 2 reads back %zd bytes, magic %08x permitted %x\n", n, back[0], back[1]);
    exec_and_print("./fcap", 1, 0);
    /* Root's program gets its bounding set whatever the file says. */
    exec_and_print("./fcap", 0, 0);

    /* Not effective: permitted only. */
    CHECK_OK(set_file_caps("fcap", 2, 0, BIT(CAP_KILL), 0));
    exec_and_print("./fcap", 1, 0);

    /* Revision 3 for root id 0 is the same as revision 2, and reads back
     * so. */
    CHECK_OK(set_file_caps("fcap", 3, 1, BIT(CAP_FOWNER), 0));
    n = getxattr("fcap", "security.capability", back, sizeof back);
    printf("revision 3 (root 0) reads back %zd bytes, magic %08x permitted %x\n", n, back[0], back[1]);
    exec_and_print("./fcap", 1, 0);

    /* Revision 3 for another root id belongs to a user namespace: no
     * capabilities here. */
    CHECK_OK(set_file_caps("fcap", 3, 1, BIT(CAP_FOWNER), 1000));
    n = getxattr("fcap", "security.capability", back, sizeof back);
    printf("revision 3 (root 1000) reads back %zd bytes, magic %08x root %u\n", n, back[0], back[5]);
    exec_and_print("./fcap", 1, 0);

    /* Effective capabilities the bounding set keeps from the program: it
     * may not run, root's or not. */
    CHECK_OK(set_file_caps("fcap", 2, 1, BIT(CAP_SYS_ADMIN) | BIT(CAP_KILL), 0));
    exec_and_print("./fcap", 1, EPERM);
    exec_and_print("./fcap", 0, EPERM);
    /* Not effective: it runs with what it can have. */
    CHECK_OK(set_file_caps("fcap", 2, 0, BIT(CAP_SYS_ADMIN) | BIT(CAP_KILL), 0));
    exec_and_print("./fcap", 1, 0);

    CHECK_OK(removexattr("fcap", "security.capability"));
    exec_and_print("./fcap", 1, 0);
}

static void file_caps_need_setfcap(void) {
    CHECK_OK(set_file_caps("fcap", 2, 1, BIT(CAP_KILL), 0));
    CHECK_OK(chmod(".", 0777));
    CHECK_OK(chown("fcap", NOBODY, NOBODY));
    become_nobody();
    /* Even the owner needs CAP_SETFCAP. */
    CHECK_ERR(set_file_caps("fcap", 2, 1, BIT(CAP_KILL), 0), EPERM);
    CHECK_ERR(removexattr("fcap", "security.capability"), EPERM);
}

static void setuid_root(void) {
    copy_self("suid", 0755);
    CHECK_OK(chmod("suid", 04755));
    /* nobody running a set-user-id-root program: effective uid 0 and
     * root's capabilities, AT_SECURE. */
    exec_and_print("./suid", 1, 0);
    /* With no_new_privs the set-user-id bit is ignored. */
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        become_nobody();
        CHECK_OK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
        run_phase("./suid", "print");
        _exit(1);
    }
    int st;
    CHECK(waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* Narrows a fully privileged root to the container's sets and runs this
 * program again: natively what the sandbox's root starts with. */
static void contain(void) {
    for (int c = 0; c <= LAST_CAP; c++)
        if (!(CONTAINER_CAPS & BIT(c)))
            CHECK_OK(prctl(PR_CAPBSET_DROP, c, 0, 0, 0));
    struct sets s = {CONTAINER_CAPS, CONTAINER_CAPS, 0};
    CHECK_OK(set_sets(s));
    run_phase("/proc/self/exe", "contained");
    fprintf(stderr, "exec: %s\n", strerror(errno));
    exit(1);
}

int main(int argc, char **argv) {
    const char *phase = getenv("CAPS_PHASE");
    if (phase && strcmp(phase, "print") == 0) {
        print_caps("program");
        fflush(stdout);
        return 0;
    }
    if (phase && strcmp(phase, "bounded") == 0) {
        bounded();
        return done();
    }
    if (!phase) {
        if (geteuid() != 0) {
            fprintf(stderr, "run as root\n");
            return 2;
        }
        enter_work_dir(argc, argv);
        contain();
    }
    print_caps("container root");
    CHECK_ERR(prctl(PR_CAPBSET_READ, LAST_CAP + 1, 0, 0, 0), EINVAL);
    CHECK_ERR(prctl(PR_CAPBSET_READ, -1L, 0, 0, 0), EINVAL);
    refused_without_caps();
    /* A copy nobody may run, wherever this program lies. */
    copy_self("plain", 0755);
    in_child(securebits_and_locks);
    in_child(no_setuid_fixup);
    in_child(keep_caps_then_drop);
    in_child(ambient);
    in_child(no_ambient_raise);
    in_child(bounding);
    /* nobody's program holds nothing. */
    exec_and_print("./plain", 1, 0);
    file_caps();
    in_child(file_caps_need_setfcap);
    setuid_root();
    return done();
}
