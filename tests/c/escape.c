/* Tries every way out of the sandbox root it knows and prints where each
 * one led. Run as /prog in a --rootfs built by tests/path_escape.rs: a file
 * called argv[1] lies both outside the root (content "OUTSIDE") and inside
 * it (content "decoy"); the traps are symlinks pointing out. Each line says
 * what a path gave: the first word of the file it reached, or the error. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "t.h"

static const char *marker;

static void show_fd(const char *what, int fd) {
    if (fd < 0) {
        printf("%s: %s\n", what, strerror(errno));
        return;
    }
    char buf[64] = {0};
    long n = read(fd, buf, sizeof buf - 1);
    if (n < 0) {
        printf("%s: read: %s\n", what, strerror(errno));
    } else {
        buf[strcspn(buf, " \n")] = 0;
        printf("%s: %s\n", what, buf);
    }
    close(fd);
}

static void try_open(const char *fmt, const char *arg) {
    char path[4096];
    snprintf(path, sizeof path, fmt, arg);
    show_fd(path, open(path, O_RDONLY));
}

static void try_openat(int dirfd, const char *dirname, const char *fmt, const char *arg) {
    char path[4096], what[4200];
    snprintf(path, sizeof path, fmt, arg);
    snprintf(what, sizeof what, "openat(%s, %s)", dirname, path);
    show_fd(what, openat(dirfd, path, O_RDONLY));
}

static void show_cwd(const char *after) {
    char buf[4096];
    if (getcwd(buf, sizeof buf))
        printf("getcwd after %s: %s\n", after, buf);
    else
        printf("getcwd after %s: %s\n", after, strerror(errno));
}

static void show_link(const char *path) {
    char buf[4096];
    long n = readlink(path, buf, sizeof buf - 1);
    if (n < 0) {
        printf("readlink %s: %s\n", path, strerror(errno));
        return;
    }
    buf[n] = 0;
    printf("readlink %s: %s\n", path, buf);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void list(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) {
        printf("ls %s: %s\n", dir, strerror(errno));
        return;
    }
    char *names[256];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 256)
        names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    printf("ls %s:", dir);
    for (int i = 0; i < n; i++) {
        printf(" %s", names[i]);
        free(names[i]);
    }
    printf("\n");
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: /prog MARKER-NAME HOST-PATH-OF-ITS-DIRECTORY\n");
        return 2;
    }
    marker = argv[1];
    const char *host_dir = argv[2];

    /* ".." at the root. */
    try_open("/%s", marker);
    try_open("/../%s", marker);
    try_open("/../../../../../../../../%s", marker);
    try_open("../../../../%s", marker);
    try_open("/./.././../%s", marker);

    /* Symlinks pointing out, absolute and relative, chains, a link to /. */
    try_open("/abs_out", "");
    try_open("/abs_etc", "");
    try_open("/rel_out", "");
    try_open("/sub/deep/rel_out", "");
    try_open("/chain1", "");
    try_open("/rootlink/../../%s", marker);
    try_open("/rootlink/rootlink/../%s", marker);
    try_open("/sub/uplink/../../%s", marker);
    try_open("/parentlink/%s", marker);
    try_open("/hostlink/%s", marker);
    /* The host path of the file itself means nothing inside. */
    char host_marker[4096];
    snprintf(host_marker, sizeof host_marker, "%s/%s", host_dir, marker);
    show_fd("host path of the outside file", open(host_marker, O_RDONLY));

    /* What the links say: their stored text, unchanged. */
    show_link("/abs_out");
    show_link("/abs_etc");
    show_link("/rel_out");
    show_link("/sub/deep/rel_out");
    show_link("/rootlink");
    show_link("/hostlink");
    show_link("/proc/self/root");
    show_link("/proc/self/exe");

    /* /proc's magic links. */
    try_open("/proc/self/root/../%s", marker);
    try_open("/proc/self/root/../../../%s", marker);
    try_open("/proc/1/root/../%s", marker);
    CHECK_OK(chdir("/sub/deep"));
    try_open("/proc/self/cwd/../../%s", marker);
    try_open("/proc/self/cwd/../../../../../%s", marker);
    int sub = open("/sub", O_RDONLY | O_DIRECTORY);
    char fdpath[64];
    snprintf(fdpath, sizeof fdpath, "/proc/self/fd/%d", sub);
    char p2[4200];
    snprintf(p2, sizeof p2, "%s/../../../%%s", fdpath);
    try_open(p2, marker);

    /* Descriptors of directories as starting points. */
    int root = open("/", O_RDONLY | O_DIRECTORY);
    try_openat(root, "/", "../%s", marker);
    try_openat(root, "/", "../../../../%s", marker);
    try_openat(sub, "/sub", "../../../%s", marker);
    try_openat(sub, "/sub", "uplink/../../../%s", marker);
    int up = openat(root, "..", O_RDONLY | O_DIRECTORY);
    struct stat a, b;
    CHECK_OK(fstat(root, &a));
    CHECK_OK(fstat(up, &b));
    printf("openat(/, ..) is the root: %s\n", a.st_ino == b.st_ino && a.st_dev == b.st_dev ? "yes" : "no");
    try_openat(up, "/..", "%s", marker);
    close(up);

    /* The working directory never gets above the root. */
    CHECK_OK(chdir("/"));
    CHECK_OK(chdir(".."));
    show_cwd("chdir(/), chdir(..)");
    CHECK_OK(chdir("/sub/deep"));
    CHECK_OK(chdir("../../../../../../../../../../.."));
    show_cwd("chdir up many levels");
    try_open("%s", marker);
    CHECK_OK(fchdir(sub));
    for (int i = 0; i < 20; i++)
        CHECK_OK(chdir(".."));
    show_cwd("fchdir(/sub) and 20 times chdir(..)");
    CHECK_OK(chdir("/rootlink/rootlink/.."));
    show_cwd("chdir(/rootlink/rootlink/..)");
    CHECK_OK(chdir("/proc/self/root/.."));
    show_cwd("chdir(/proc/self/root/..)");

    CHECK_OK(stat("/", &a));
    CHECK_OK(stat("/..", &b));
    printf("/.. is /: %s\n", a.st_ino == b.st_ino ? "yes" : "no");
    list("/");
    list("/..");
    list("/rootlink/..");
    close(sub);
    close(root);
    return done();
}
