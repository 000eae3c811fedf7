/* Tries every way out of a writable bind mount it knows, reading and
 * writing, and prints where each led. Run as /prog in a --rootfs built by
 * tests/host_binds.rs, with a host directory mounted at /b: a file called
 * argv[1] lies outside both (content "OUTSIDE"), in the root ("decoy") and
 * in the bind ("inside"); argv[2] is the host directory holding them all.
 * Each line says what a path gave: the first word of the file it reached,
 * or the error. The test checks from the host that nothing outside the
 * bind's source changed. */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "t.h"

static const char *marker;

static const char *first_word(int fd) {
    static char buf[64];
    memset(buf, 0, sizeof buf);
    long n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n < 0)
        return strerror(errno);
    buf[strcspn(buf, " \n")] = 0;
    return buf;
}

static void show(const char *what, int fd) {
    printf("%s: %s\n", what, fd < 0 ? strerror(errno) : first_word(fd));
}

static void try_open(const char *fmt) {
    char path[4096];
    snprintf(path, sizeof path, fmt, marker);
    show(path, open(path, O_RDONLY));
}

static void result(const char *what, int r) {
    printf("%s: %s\n", what, r < 0 ? strerror(errno) : "done");
}

int main(int argc, char **argv) {
    if (argc < 3)
        return 2;
    marker = argv[1];
    const char *host = argv[2];
    char path[4096], what[4200];

    try_open("/b/%s");
    try_open("/b/../%s");
    try_open("/b/../../../../%s");
    try_open("/b/sub/../../%s");
    try_open("/b/sub/deep/../../../../../../%s");
    try_open("/b/abs_out");
    try_open("/b/rel_out");
    try_open("/b/sub/deep/rel_out");
    try_open("/b/up/%s");
    try_open("/b/up/b/up/../%s");
    try_open("/b/dir_out/%s");
    snprintf(path, sizeof path, "/b/hostlink/%s", marker);
    show("/b/hostlink/MARKER", open(path, O_RDONLY));
    snprintf(path, sizeof path, "%s/%s", host, marker);
    show("host path of the outside file", open(path, O_RDONLY));

    /* Directory descriptors and their /proc links. */
    int b = open("/b", O_RDONLY | O_DIRECTORY);
    int sub = open("/b/sub", O_RDONLY | O_DIRECTORY);
    snprintf(path, sizeof path, "../%s", marker);
    show("openat(/b, ../MARKER)", openat(b, path, O_RDONLY));
    snprintf(path, sizeof path, "../../../../%s", marker);
    show("openat(/b/sub, ../../../../MARKER)", openat(sub, path, O_RDONLY));
    snprintf(path, sizeof path, "/proc/self/fd/%d/../%s", sub, marker);
    show("/proc/self/fd/SUB/../MARKER", open(path, O_RDONLY));
    snprintf(path, sizeof path, "/proc/self/fd/%d/../../%s", sub, marker);
    show("/proc/self/fd/SUB/../../MARKER", open(path, O_RDONLY));
    snprintf(path, sizeof path, "/proc/self/fd/%d/../../../../%s", b, marker);
    show("/proc/self/fd/B/../../../../MARKER", open(path, O_RDONLY));

    /* The working directory climbing out. */
    CHECK_OK(chdir("/b/sub/deep"));
    for (int i = 0; i < 10; i++)
        CHECK_OK(chdir(".."));
    char cwd[4096];
    printf("getcwd after climbing from /b/sub/deep: %s\n", getcwd(cwd, sizeof cwd) ? cwd : strerror(errno));
    show("MARKER from there", open(marker, O_RDONLY));
    CHECK_OK(fchdir(sub));
    CHECK_OK(chdir("../../.."));
    printf("getcwd after fchdir(/b/sub) and ../../..: %s\n", getcwd(cwd, sizeof cwd) ? cwd : strerror(errno));

    /* Writes through links that point out: resolved in the sandbox, where
     * the host paths they name do not exist. */
    show("create through /b/w_abs", open("/b/w_abs", O_WRONLY | O_CREAT, 0644));
    show("create through /b/w_rel", open("/b/w_rel", O_WRONLY | O_CREAT, 0644));
    snprintf(path, sizeof path, "%s/victim/direct", host);
    show("create at the host path of the outside directory", open(path, O_WRONLY | O_CREAT, 0644));
    snprintf(path, sizeof path, "/b/hostlink/victim/x");
    result("mkdir /b/hostlink/victim/x", mkdir(path, 0755));
    result("symlink /b/hostlink/victim/l", symlink("/etc", "/b/hostlink/victim/l"));

    /* Moving things out of the bind. */
    result("rename /b/sub to /tmp/sub", rename("/b/sub", "/tmp/sub"));
    result("rename /b/sub to /b/../escaped", rename("/b/sub", "/b/../escaped"));
    snprintf(what, sizeof what, "/b/%s", marker);
    result("link /b/MARKER to /tmp/linked", link(what, "/tmp/linked"));
    result("rename /b/MARKER to /b/up/tmp/moved", rename(what, "/b/up/tmp/moved"));

    /* A name under the bind swapped by the host between a directory and
     * symlinks pointing out while it is looked up, read and written
     * through: whatever the interleaving, the outside is never reached. */
    int outside = 0, inside = 0;
    snprintf(path, sizeof path, "/b/race/x/%s", marker);
    for (int i = 0; i < 3000; i++) {
        int fd = open(path, O_RDONLY);
        if (fd >= 0) {
            const char *w = first_word(fd);
            outside += strcmp(w, "OUTSIDE") == 0;
            inside += strcmp(w, "inside") == 0;
        }
        fd = open("/b/race/x/new", O_WRONLY | O_CREAT, 0644);
        if (fd >= 0) {
            CHECK(write(fd, "raced\n", 6) == 6);
            close(fd);
        }
        int d = open("/b/race/x", O_RDONLY | O_DIRECTORY);
        if (d >= 0) {
            fd = openat(d, "../../../victim_via_race", O_WRONLY | O_CREAT, 0644);
            if (fd >= 0)
                close(fd);
            close(d);
        }
    }
    printf("racing lookups reached the outside: %s\n", outside ? "yes" : "no");
    (void)inside;
    return done();
}
