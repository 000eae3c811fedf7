/* mount, umount2 and pivot_root as root in a private mount namespace (the
 * sandbox's own; natively the test runs under `unshare -m`), with
 * /proc/self/mountinfo checked after each change. Everything happens on a
 * tmpfs mounted over /tmp first, so nothing outside the namespace changes.
 * Lines of mountinfo are printed without ids and device numbers, which
 * differ between runs; how ids relate is checked instead. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

struct mnt {
    int id, parent;
    char root[256], point[256], opts[128], tags[128], type[32], source[64], super[128];
};

/* The topmost mount at `point` in /proc/self/mountinfo (the last line). */
static int find_mount(const char *point, struct mnt *out) {
    FILE *f = fopen("/proc/self/mountinfo", "r");
    if (!f) return 0;
    char line[1024];
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        struct mnt m;
        memset(&m, 0, sizeof m);
        int n = 0;
        if (sscanf(line, "%d %d %*s %255s %255s %127s%n", &m.id, &m.parent, m.root, m.point, m.opts, &n) != 5)
            continue;
        char *rest = line + n;
        char *sep = strstr(rest, " - ");
        if (!sep) continue;
        size_t tl = (size_t)(sep - rest);
        if (tl >= sizeof m.tags) tl = sizeof m.tags - 1;
        memcpy(m.tags, rest, tl);
        if (sscanf(sep + 3, "%31s %63s %127s", m.type, m.source, m.super) != 3) continue;
        if (strcmp(m.point, point) == 0) {
            *out = m;
            found = 1;
        }
    }
    fclose(f);
    return found;
}

/* Prints the mount at `point` without the numbers that differ per run. */
static void show(const char *point) {
    struct mnt m;
    if (!find_mount(point, &m)) {
        printf("%s: not mounted\n", point);
        return;
    }
    const char *prop = strstr(m.tags, "shared:")       ? "shared"
                       : strstr(m.tags, "master:")     ? "slave"
                       : strstr(m.tags, "unbindable") ? "unbindable"
                                                       : "private";
    printf("%s: root=%s opts=%s %s type=%s source=%s super=%s\n", m.point, m.root, m.opts, prop, m.type, m.source,
           m.super);
}

static int mount_id(const char *point) {
    struct mnt m;
    return find_mount(point, &m) ? m.id : -1;
}

static int parent_id(const char *point) {
    struct mnt m;
    return find_mount(point, &m) ? m.parent : -1;
}

/* True if some line of /proc/self/mounts names `point`. */
static int in_proc_mounts(const char *point, const char *want_opts) {
    FILE *f = fopen("/proc/self/mounts", "r");
    if (!f) return 0;
    char src[256], at[256], type[64], opts[256];
    int found = 0;
    while (fscanf(f, "%255s %255s %63s %255s %*d %*d", src, at, type, opts) == 4)
        if (strcmp(at, point) == 0) found = want_opts ? strcmp(opts, want_opts) == 0 : 1;
    fclose(f);
    return found;
}

static void put(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0);
    if (fd < 0) return;
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
}

/* The first line of `path`, or "(errno)" when it cannot be read. */
static const char *get(const char *path) {
    static char buf[128];
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        snprintf(buf, sizeof buf, "(%s)", strerror(errno));
        return buf;
    }
    ssize_t n = read(fd, buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = 0;
    close(fd);
    return buf;
}

static void tmpfs_and_stacking(void) {
    CHECK_OK(mount("tmpfs", "/tmp", "tmpfs", 0, "mode=755"));
    show("/tmp");
    CHECK_OK(mkdir("/tmp/t", 0755));
    CHECK_OK(mount("tmpfs", "/tmp/t", "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=750,nr_inodes=1k"));
    show("/tmp/t");
    CHECK(parent_id("/tmp/t") == mount_id("/tmp"));
    CHECK(in_proc_mounts("/tmp/t", "rw,nosuid,nodev,relatime,size=1024k,nr_inodes=1024,mode=750"));
    struct stat st;
    CHECK_OK(stat("/tmp/t", &st));
    CHECK((st.st_mode & 07777) == 0750);
    put("/tmp/t/f", "hello");
    printf("f: %s\n", get("/tmp/t/f"));

    /* A new mount hides what was there; a directory held open below keeps
     * working; unmounting the top shows the lower one again. */
    int below = open("/tmp/t", O_RDONLY | O_DIRECTORY);
    CHECK(below >= 0);
    CHECK_OK(mount("upper", "/tmp/t", "tmpfs", 0, NULL));
    show("/tmp/t");
    int lower_id = -1;
    {
        /* The one below is the parent of the one on top. */
        FILE *f = fopen("/proc/self/mountinfo", "r");
        char line[1024];
        int n = 0;
        while (f && fgets(line, sizeof line, f)) {
            int id, parent;
            char at[256];
            if (sscanf(line, "%d %d %*s %*s %255s", &id, &parent, at) == 3 && strcmp(at, "/tmp/t") == 0) {
                if (n++ == 0) lower_id = id;
                else CHECK(parent == lower_id);
            }
        }
        if (f) fclose(f);
        CHECK(n == 2);
    }
    printf("f on top: %s\n", get("/tmp/t/f"));
    int fd = openat(below, "f", O_RDONLY);
    CHECK(fd >= 0);
    char b[8] = {0};
    CHECK(read(fd, b, 5) == 5 && strcmp(b, "hello") == 0);
    close(fd);
    CHECK_ERR(umount2("/tmp/t", 0x100), EINVAL);
    CHECK_OK(umount("/tmp/t"));
    CHECK(mount_id("/tmp/t") == lower_id);
    printf("f again: %s\n", get("/tmp/t/f"));
    close(below);
}

static void remounts(void) {
    CHECK_OK(mount(NULL, "/tmp/t", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL));
    show("/tmp/t");
    CHECK_ERR(open("/tmp/t/g", O_WRONLY | O_CREAT, 0644), EROFS);
    CHECK_ERR(open("/tmp/t/f", O_WRONLY), EROFS);
    CHECK_ERR(mkdir("/tmp/t/d", 0755), EROFS);
    printf("f read-only: %s\n", get("/tmp/t/f"));
    CHECK_OK(mount(NULL, "/tmp/t", NULL, MS_REMOUNT | MS_RDONLY, NULL));
    show("/tmp/t");
    CHECK(in_proc_mounts("/tmp/t", "ro,relatime,size=1024k,nr_inodes=1024,mode=750"));
    CHECK_OK(mount(NULL, "/tmp/t", NULL, MS_REMOUNT | MS_NOSUID, NULL));
    show("/tmp/t");
    put("/tmp/t/f", "again");
    printf("f rewritten: %s\n", get("/tmp/t/f"));
    CHECK_ERR(mount(NULL, "/tmp/t/nothing", NULL, MS_REMOUNT, NULL), ENOENT);
    CHECK_OK(mkdir("/tmp/t/plain", 0755));
    CHECK_ERR(mount(NULL, "/tmp/t/plain", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL), EINVAL);
}

static void binds(void) {
    CHECK_OK(mkdir("/tmp/t/src", 0755));
    CHECK_OK(mkdir("/tmp/t/src/sub", 0755));
    put("/tmp/t/src/sub/file", "in sub");
    CHECK_OK(mkdir("/tmp/t/dst", 0755));
    CHECK_OK(mount("/tmp/t/src/sub", "/tmp/t/dst", NULL, MS_BIND, NULL));
    show("/tmp/t/dst");
    CHECK(parent_id("/tmp/t/dst") == mount_id("/tmp/t"));
    printf("dst/file: %s\n", get("/tmp/t/dst/file"));
    put("/tmp/t/dst/new", "through the bind");
    printf("src/sub/new: %s\n", get("/tmp/t/src/sub/new"));

    put("/tmp/t/one", "one");
    put("/tmp/t/two", "two");
    CHECK_OK(mount("/tmp/t/one", "/tmp/t/two", NULL, MS_BIND, NULL));
    show("/tmp/t/two");
    printf("two: %s\n", get("/tmp/t/two"));
    CHECK_ERR(mount("/tmp/t/src", "/tmp/t/one", NULL, MS_BIND, NULL), ENOTDIR);
    CHECK_ERR(mount("/tmp/t/nothing", "/tmp/t/dst", NULL, MS_BIND, NULL), ENOENT);

    /* Recursive: the mounts inside come along. */
    CHECK_OK(mkdir("/tmp/t/rec", 0755));
    CHECK_OK(mount("/tmp/t", "/tmp/t/rec", NULL, MS_BIND | MS_REC, NULL));
    show("/tmp/t/rec");
    show("/tmp/t/rec/dst");
    show("/tmp/t/rec/two");
    printf("rec/dst/file: %s\n", get("/tmp/t/rec/dst/file"));
    CHECK(parent_id("/tmp/t/rec/dst") == mount_id("/tmp/t/rec"));

    /* Propagation: one kind at a time; recorded for mountinfo. */
    CHECK_OK(mount(NULL, "/tmp/t/dst", NULL, MS_SHARED, NULL));
    show("/tmp/t/dst");
    CHECK_OK(mount(NULL, "/tmp/t/dst", NULL, MS_SLAVE, NULL));
    show("/tmp/t/dst");
    CHECK_OK(mount(NULL, "/tmp/t/dst", NULL, MS_UNBINDABLE, NULL));
    show("/tmp/t/dst");
    CHECK_ERR(mount("/tmp/t/dst", "/tmp/t/src", NULL, MS_BIND, NULL), EINVAL);
    CHECK_ERR(mount(NULL, "/tmp/t/dst", NULL, MS_PRIVATE | MS_SHARED, NULL), EINVAL);
    CHECK_ERR(mount(NULL, "/tmp/t/src", NULL, MS_PRIVATE, NULL), EINVAL);
    CHECK_OK(mount(NULL, "/tmp", NULL, MS_PRIVATE | MS_REC, NULL));
    show("/tmp/t/dst");

    CHECK_ERR(mount("x", "/tmp/t/src", "nosuchfs", 0, NULL), ENODEV);
    CHECK_ERR(mount("x", "/tmp/t/src", "tmpfs", 0, "size=lots"), EINVAL);
    CHECK_ERR(mount("x", "/tmp/t/src", "tmpfs", 0, "bogus=1"), EINVAL);
    CHECK_ERR(mount("x", "/tmp/t/nothing", "tmpfs", 0, NULL), ENOENT);
    CHECK_ERR(mount("x", "/tmp/t/one", "tmpfs", 0, NULL), ENOTDIR);
}

static void moves(void) {
    CHECK_OK(mkdir("/tmp/t/m1", 0755));
    CHECK_OK(mkdir("/tmp/t/m2", 0755));
    CHECK_OK(mount("moving", "/tmp/t/m1", "tmpfs", 0, NULL));
    put("/tmp/t/m1/x", "moved");
    CHECK_ERR(mount("/tmp/t/m1", "/tmp/t/m1", NULL, MS_MOVE, NULL), ELOOP);
    CHECK_ERR(mount("/tmp/t/src", "/tmp/t/m2", NULL, MS_MOVE, NULL), EINVAL);
    CHECK_OK(mount("/tmp/t/m1", "/tmp/t/m2", NULL, MS_MOVE, NULL));
    show("/tmp/t/m1");
    show("/tmp/t/m2");
    printf("m2/x: %s\n", get("/tmp/t/m2/x"));
    printf("m1/x: %s\n", get("/tmp/t/m1/x"));
}

static void unmounts(void) {
    CHECK_ERR(umount("/tmp/t/src"), EINVAL);
    CHECK_ERR(umount("/tmp/t/nothing"), ENOENT);
    /* A mount with mounts on it is busy. */
    CHECK_ERR(umount("/tmp/t"), EBUSY);

    int fd = open("/tmp/t/dst/file", O_RDONLY);
    CHECK(fd >= 0);
    CHECK_ERR(umount("/tmp/t/dst"), EBUSY);
    close(fd);
    CHECK_OK(umount("/tmp/t/dst"));
    show("/tmp/t/dst");
    printf("dst/file after umount: %s\n", get("/tmp/t/dst/file"));

    /* A working directory inside keeps it busy too. */
    CHECK_OK(chdir("/tmp/t/m2"));
    CHECK_ERR(umount("/tmp/t/m2"), EBUSY);
    CHECK_OK(chdir("/"));
    CHECK_ERR(umount2("/tmp/t/m2", MNT_EXPIRE | MNT_DETACH), EINVAL);
    CHECK_ERR(umount2("/tmp/t/m2", MNT_EXPIRE), EAGAIN);
    CHECK_OK(umount2("/tmp/t/m2", MNT_EXPIRE));
    show("/tmp/t/m2");

    /* Lazily: gone from the table at once, what is open keeps working. */
    CHECK_OK(mount("/tmp/t/src/sub", "/tmp/t/dst", NULL, MS_BIND, NULL));
    fd = open("/tmp/t/dst/file", O_RDONLY);
    CHECK(fd >= 0);
    CHECK_OK(umount2("/tmp/t/dst", MNT_DETACH));
    show("/tmp/t/dst");
    char b[16] = {0};
    CHECK(read(fd, b, sizeof b - 1) == 6 && strcmp(b, "in sub") == 0);
    close(fd);
    printf("dst/file after detach: %s\n", get("/tmp/t/dst/file"));

    CHECK_OK(umount2("/tmp/t/rec", MNT_DETACH));
    show("/tmp/t/rec/dst");
    CHECK_OK(umount("/tmp/t/two"));
    printf("two unmounted: %s\n", get("/tmp/t/two"));
    CHECK_ERR(umount("/tmp/t/two"), EINVAL);
}

static void noexec(void) {
    /* A copy of this program on the tmpfs runs until the mount says
     * noexec. */
    int in = open("/proc/self/exe", O_RDONLY);
    int out = open("/tmp/t/prog", O_WRONLY | O_CREAT | O_TRUNC, 0755);
    CHECK(in >= 0 && out >= 0);
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0) CHECK(write(out, buf, n) == n);
    close(in);
    close(out);
    char *argv[] = {"prog", "--exit", NULL};
    pid_t pid = fork();
    if (pid == 0) {
        execv("/tmp/t/prog", argv);
        _exit(100 + errno);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 7);
    CHECK_OK(mount(NULL, "/tmp/t", NULL, MS_REMOUNT | MS_BIND | MS_NOEXEC, NULL));
    show("/tmp/t");
    CHECK_ERR(execv("/tmp/t/prog", argv), EACCES);
    CHECK_OK(mount(NULL, "/tmp/t", NULL, MS_REMOUNT | MS_BIND, NULL));
}

static void pivot(void) {
    CHECK_OK(mkdir("/tmp/new", 0755));
    CHECK_OK(mount("newroot", "/tmp/new", "tmpfs", 0, NULL));
    CHECK_OK(mkdir("/tmp/new/old", 0755));
    CHECK_OK(mkdir("/tmp/new/proc", 0755));
    CHECK_OK(mkdir("/tmp/new/r2", 0755));
    put("/tmp/new/marker", "new root");
    CHECK_ERR(syscall(SYS_pivot_root, "/tmp/t/src", "/tmp/t/src"), EINVAL);
    CHECK_ERR(syscall(SYS_pivot_root, "/tmp/new", "/tmp"), EINVAL);
    CHECK_ERR(syscall(SYS_pivot_root, "/tmp/new", "/tmp/new/marker"), ENOTDIR);
    CHECK_ERR(syscall(SYS_pivot_root, "/tmp/new/nothing", "/tmp/new/old"), ENOENT);

    CHECK_OK(chdir("/tmp/new"));
    CHECK_OK(syscall(SYS_pivot_root, ".", "old"));
    char cwd[256];
    CHECK(getcwd(cwd, sizeof cwd) != NULL);
    printf("cwd after pivot: %s\n", cwd);
    CHECK_OK(chdir("/"));
    printf("marker: %s\n", get("/marker"));
    printf("old tmp: %s\n", get("/old/tmp/t/f"));
    show("/old");
    CHECK_OK(umount2("/old", MNT_DETACH));
    CHECK_ERR(access("/old/tmp/t/f", F_OK), ENOENT);
    CHECK_OK(rmdir("/old"));
    CHECK_OK(mount("proc", "/proc", "proc", 0, NULL));
    show("/");
    show("/proc");
    show("/old");

    /* pivot_root(".", "."): the old root lands on top of the new one,
     * where unmounting "." finds it. */
    CHECK_OK(mount("r2", "/r2", "tmpfs", 0, NULL));
    CHECK_OK(mkdir("/r2/proc", 0755));
    put("/r2/marker", "second root");
    CHECK_OK(chdir("/r2"));
    CHECK_OK(syscall(SYS_pivot_root, ".", "."));
    CHECK_OK(umount2(".", MNT_DETACH));
    CHECK_OK(chdir("/"));
    printf("marker: %s\n", get("/marker"));
    CHECK_OK(mount("proc", "/proc", "proc", 0, NULL));
    show("/");
    FILE *f = fopen("/proc/self/mountinfo", "r");
    int lines = 0;
    char line[1024];
    while (f && fgets(line, sizeof line, f)) lines++;
    if (f) fclose(f);
    printf("mounts left: %d\n", lines);
}

/* Without CAP_SYS_ADMIN none of it is allowed. */
static void unprivileged(void) {
    pid_t pid = fork();
    if (pid == 0) {
        if (setuid(65534) != 0) _exit(2);
        CHECK_ERR(mount("x", "/tmp", "tmpfs", 0, NULL), EPERM);
        CHECK_ERR(umount2("/proc", 0), EPERM);
        CHECK_ERR(syscall(SYS_pivot_root, "/proc", "/proc"), EPERM);
        _exit(t_failures ? 1 : 0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--exit") == 0) return 7;
    setvbuf(stdout, NULL, _IONBF, 0);
    CHECK_ERR(mount("x", "/nonexistent-mount-target", "tmpfs", 0, NULL), ENOENT);
    unprivileged();
    tmpfs_and_stacking();
    remounts();
    binds();
    moves();
    unmounts();
    noexec();
    pivot();
    return done();
}
