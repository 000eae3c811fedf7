/* File system calls on an existing file (the set kbox's bench_test times).
 *   open_close    open(PATH, O_RDONLY) + close
 *   stat          stat(PATH)
 *   lseek_read    lseek(fd, 0, SEEK_SET) + read of 1 byte
 *   write_devnull write of 1 byte to /dev/null
 * PATH is the optional third argument, /etc/passwd by default; it must be a
 * regular file of at least one byte. */
#include "bench.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

struct ctx {
    const char *path;
    int fd;
};

static void run_open_close(long n, void *arg) {
    struct ctx *c = arg;
    for (long i = 0; i < n; i++) {
        int fd = open(c->path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            die("open %s", c->path);
        if (close(fd) != 0)
            die("close");
    }
}

static void run_stat(long n, void *arg) {
    struct ctx *c = arg;
    struct stat st;
    for (long i = 0; i < n; i++)
        if (stat(c->path, &st) != 0)
            die("stat %s", c->path);
}

static void run_lseek_read(long n, void *arg) {
    struct ctx *c = arg;
    char byte;
    for (long i = 0; i < n; i++) {
        if (lseek(c->fd, 0, SEEK_SET) != 0)
            die("lseek %s", c->path);
        ssize_t r = read(c->fd, &byte, 1);
        if (r != 1) {
            if (r < 0)
                die("read %s", c->path);
            fail("read %s returned %zd, expected 1", c->path, r);
        }
    }
}

static void run_write_devnull(long n, void *arg) {
    struct ctx *c = arg;
    const char byte = 'x';
    for (long i = 0; i < n; i++) {
        ssize_t r = write(c->fd, &byte, 1);
        if (r != 1) {
            if (r < 0)
                die("write /dev/null");
            fail("write /dev/null returned %zd, expected 1", r);
        }
    }
}

static const struct bench_case cases[] = {
    {.name = "open_close", .run = run_open_close},
    {.name = "stat", .run = run_stat},
    {.name = "lseek_read", .run = run_lseek_read},
    {.name = "write_devnull", .run = run_write_devnull},
    {0},
};

int main(int argc, char **argv) {
    double seconds;
    const struct bench_case *c = pick_case(argc, argv, cases, &seconds);
    struct ctx ctx = {.path = argc > 3 ? argv[3] : "/etc/passwd", .fd = -1};
    if (c->run == run_lseek_read) {
        ctx.fd = open(ctx.path, O_RDONLY | O_CLOEXEC);
        if (ctx.fd < 0)
            die("open %s", ctx.path);
    } else if (c->run == run_write_devnull) {
        ctx.fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (ctx.fd < 0)
            die("open /dev/null");
    }
    measure(c, &ctx, seconds);
    if (ctx.fd >= 0 && close(ctx.fd) != 0)
        die("close");
    return 0;
}
