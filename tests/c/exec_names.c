/* execve and execveat: the name a new program goes by (its comm, and the
 * script name its interpreter gets), programs run by descriptor (also after
 * chroot), and the errors of a missing or unusable ELF interpreter.
 *
 * Usage: exec_names FIXTURE, where FIXTURE holds
 *   script.long-name.sh  a /bin/sh script printing "COMM|$0"
 *   link                 -> script.long-name.sh
 *   prog                 this program, static ("prog comm" prints its comm)
 *   no-interp            an ELF program whose interpreter does not exist
 *   interp-not-exec      one whose interpreter is not executable
 *   interp-not-elf       one whose interpreter is a script (if the host has
 *                        one to name)
 *   jail/                an empty directory
 * (built by the test harness). */
#include "t.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static const char *fixture;

static char *at(const char *name) {
    static char bufs[4][PATH_MAX];
    static int next;
    char *b = bufs[next++ % 4];
    snprintf(b, PATH_MAX, "%s/%s", fixture, name);
    return b;
}

/* How a child runs the program. */
enum how { BY_PATH, BY_FD, BY_DIRFD, BY_DIRFD_NOFOLLOW };

/* Runs the program in a child and returns what it printed (at most one
 * line, without the newline); on a failed exec, "errno N". `setup`
 * prepares the child first (it may chroot). */
static const char *run(enum how how, int fd, const char *path, char *const argv[], void (*setup)(void)) {
    static char out[PATH_MAX + 64];
    int p[2];
    if (pipe(p) != 0)
        return "pipe failed";
    pid_t c = fork();
    if (c == 0) {
        dup2(p[1], 1);
        if (setup)
            setup();
        switch (how) {
        case BY_PATH:
            execve(path, argv, environ);
            break;
        case BY_FD:
            syscall(SYS_execveat, fd, "", argv, environ, AT_EMPTY_PATH);
            break;
        case BY_DIRFD:
            syscall(SYS_execveat, fd, path, argv, environ, 0);
            break;
        case BY_DIRFD_NOFOLLOW:
            syscall(SYS_execveat, fd, path, argv, environ, AT_SYMLINK_NOFOLLOW);
            break;
        }
        printf("errno %d\n", errno);
        fflush(stdout);
        _exit(0);
    }
    close(p[1]);
    size_t n = 0;
    ssize_t r;
    while (n < sizeof out - 1 && (r = read(p[0], out + n, sizeof out - 1 - n)) > 0)
        n += r;
    close(p[0]);
    out[n] = 0;
    char *nl = strchr(out, '\n');
    if (nl)
        *nl = 0;
    waitpid(c, NULL, 0);
    return out;
}

static int same(const char *got, const char *want) {
    if (strcmp(got, want) == 0)
        return 1;
    fprintf(stderr, "  got \"%s\", want \"%s\"\n", got, want);
    return 0;
}

static char expected[2 * PATH_MAX];

static const char *want(const char *comm, const char *name) {
    snprintf(expected, sizeof expected, "%s|%s", comm, name);
    return expected;
}

/* comm is the last component of the name the program was run by, cut to
 * 15 bytes: a script's own name, a symlink's; for a program run by
 * descriptor, the name of the file that runs (the interpreter of a
 * script). The interpreter gets the name too, /dev/fd/N[/path] for a
 * program run by descriptor. */
static void test_names(void) {
    char *script = at("script.long-name.sh");
    char *args[] = {"arg0", NULL};
    CHECK(same(run(BY_PATH, -1, script, args, NULL), want("script.long-nam", script)));
    char *link = at("link");
    CHECK(same(run(BY_PATH, -1, link, args, NULL), want("link", link)));

    char sh[PATH_MAX];
    CHECK(realpath("/bin/sh", sh) != NULL);
    const char *sh_name = strrchr(sh, '/') + 1;
    char dev_fd[64];
    int fd = open(script, O_RDONLY);
    snprintf(dev_fd, sizeof dev_fd, "/dev/fd/%d", fd);
    CHECK(same(run(BY_FD, fd, NULL, args, NULL), want(sh_name, dev_fd)));
    close(fd);

    int dir = open(fixture, O_RDONLY | O_DIRECTORY);
    snprintf(dev_fd, sizeof dev_fd, "/dev/fd/%d/script.long-name.sh", dir);
    CHECK(same(run(BY_DIRFD, dir, "script.long-name.sh", args, NULL), want("script.long-nam", dev_fd)));
    CHECK(same(run(BY_DIRFD_NOFOLLOW, dir, "link", args, NULL), "errno 40"));
    close(dir);

    /* A script by a descriptor closed on exec cannot be opened by its
     * interpreter: ENOENT. */
    fd = open(script, O_RDONLY | O_CLOEXEC);
    CHECK(same(run(BY_FD, fd, NULL, args, NULL), "errno 2"));
    close(fd);

    /* An ELF program by descriptor, or by a /proc/self/fd name. */
    char *prog_args[] = {"prog", "comm", NULL};
    fd = open(at("prog"), O_PATH);
    CHECK(same(run(BY_FD, fd, NULL, prog_args, NULL), "prog"));
    char proc_fd[64];
    snprintf(proc_fd, sizeof proc_fd, "/proc/self/fd/%d", fd);
    char fd_name[16];
    snprintf(fd_name, sizeof fd_name, "%d", fd);
    CHECK(same(run(BY_PATH, -1, proc_fd, prog_args, NULL), fd_name));
    close(fd);
}

/* The errors of opening the ELF interpreter: as opening any program
 * (ENOENT, EACCES), and ELIBBAD for one that is no ELF file. */
static void test_interpreters(void) {
    char *args[] = {"x", NULL};
    CHECK(same(run(BY_PATH, -1, at("no-interp"), args, NULL), "errno 2"));
    CHECK(same(run(BY_PATH, -1, at("interp-not-exec"), args, NULL), "errno 13"));
    if (access(at("interp-not-elf"), F_OK) == 0)
        CHECK(same(run(BY_PATH, -1, at("interp-not-elf"), args, NULL), "errno 80"));
}

static void enter_jail(void) {
    if (chroot(at("jail")) != 0 || chdir("/") != 0) {
        printf("chroot: errno %d\n", errno);
        fflush(stdout);
        _exit(0);
    }
}

/* A program run by descriptor is the open file, wherever the root now is:
 * after chroot its path leads nowhere. */
static void test_exec_after_chroot(void) {
    if (geteuid() != 0)
        return;
    char *prog_args[] = {"prog", "comm", NULL};
    int fd = open(at("prog"), O_RDONLY);
    CHECK(same(run(BY_FD, fd, NULL, prog_args, enter_jail), "prog"));
    close(fd);
    fd = open(at("prog"), O_PATH);
    CHECK(same(run(BY_FD, fd, NULL, prog_args, enter_jail), "prog"));
    close(fd);
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "comm") == 0) {
        char name[17] = {0};
        prctl(PR_GET_NAME, name);
        printf("%s\n", name);
        return 0;
    }
    if (argc < 2) {
        fprintf(stderr, "usage: exec_names FIXTURE\n");
        return 2;
    }
    fixture = argv[1];
    test_names();
    test_interpreters();
    test_exec_after_chroot();
    return done();
}
