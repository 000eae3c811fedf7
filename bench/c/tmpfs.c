/* File operations that write, in a private directory made under DIR (the
 * optional third argument, /tmp by default: a tmpfs in the sandboxes,
 * whatever the host has natively) and removed at the end.
 *   create_unlink  open(O_CREAT) + write 4 KiB + close + unlink
 *   write_4k       pwrite of 4 KiB, cycling over the pages of a 1 MiB file
 *   read_4k        pread of 4 KiB, cycling over the pages of a 1 MiB file
 *   rename         rename of a file to another name (back and forth)
 *   readdir_1k     open + read all entries + close of a 1,000-file directory */
#include "bench.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#define PAGE 4096
#define FILE_PAGES 256 /* 1 MiB */
#define DIR_FILES 1000

struct ctx {
    char dir[4096];
    char path[4200], other[4200];
    int fd;
    long renames; /* so far: odd when the file is at `other` */
    char buf[PAGE];
};

static void run_create_unlink(long n, void *arg) {
    struct ctx *c = arg;
    for (long i = 0; i < n; i++) {
        int fd = open(c->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0)
            die("create %s", c->path);
        ssize_t w = write(fd, c->buf, PAGE);
        if (w != PAGE) {
            if (w < 0)
                die("write %s", c->path);
            fail("write %s wrote %zd of %d bytes", c->path, w, PAGE);
        }
        if (close(fd) != 0)
            die("close %s", c->path);
        if (unlink(c->path) != 0)
            die("unlink %s", c->path);
    }
}

static void run_write_4k(long n, void *arg) {
    struct ctx *c = arg;
    for (long i = 0; i < n; i++) {
        c->buf[0] = (char)i;
        ssize_t w = pwrite(c->fd, c->buf, PAGE, (off_t)(i % FILE_PAGES) * PAGE);
        if (w != PAGE) {
            if (w < 0)
                die("pwrite %s", c->path);
            fail("pwrite %s wrote %zd of %d bytes", c->path, w, PAGE);
        }
    }
}

static void run_read_4k(long n, void *arg) {
    struct ctx *c = arg;
    for (long i = 0; i < n; i++) {
        long page = i % FILE_PAGES;
        ssize_t r = pread(c->fd, c->buf, PAGE, (off_t)page * PAGE);
        if (r != PAGE) {
            if (r < 0)
                die("pread %s", c->path);
            fail("pread %s read %zd of %d bytes", c->path, r, PAGE);
        }
        if (c->buf[0] != (char)page || c->buf[PAGE - 1] != (char)page)
            fail("pread %s: page %ld does not hold what was written", c->path, page);
    }
}

static void run_rename(long n, void *arg) {
    struct ctx *c = arg;
    for (long i = 0; i < n; i++, c->renames++) {
        const char *from = c->renames % 2 ? c->other : c->path, *to = c->renames % 2 ? c->path : c->other;
        if (rename(from, to) != 0)
            die("rename %s to %s", from, to);
    }
}

static void run_readdir_1k(long n, void *arg) {
    struct ctx *c = arg;
    for (long i = 0; i < n; i++) {
        DIR *d = opendir(c->dir);
        if (!d)
            die("opendir %s", c->dir);
        long entries = 0;
        errno = 0;
        while (readdir(d))
            entries++;
        if (errno)
            die("readdir %s", c->dir);
        if (closedir(d) != 0)
            die("closedir %s", c->dir);
        if (entries != DIR_FILES + 2)
            fail("readdir %s gave %ld entries, expected %d", c->dir, entries, DIR_FILES + 2);
    }
}

static const struct bench_case cases[] = {
    {.name = "create_unlink", .run = run_create_unlink},
    {.name = "write_4k", .run = run_write_4k, .unit = "MB/s", .per_op_amount = PAGE, .divisor = 1e6},
    {.name = "read_4k", .run = run_read_4k, .unit = "MB/s", .per_op_amount = PAGE, .divisor = 1e6},
    {.name = "rename", .run = run_rename},
    {.name = "readdir_1k", .run = run_readdir_1k},
    {0},
};

static void join(char *out, size_t size, const char *dir, const char *name) {
    if (snprintf(out, size, "%s/%s", dir, name) >= (int)size)
        fail("path too long: %s/%s", dir, name);
}

static struct ctx ctx = {.fd = -1};

/* Removes the private directory and what is in it, so that a run leaves
 * DIR as it found it; returns 0, or -1 with errno set. */
static int remove_private_dir(struct ctx *c) {
    DIR *d = opendir(c->dir);
    if (!d)
        return -1;
    struct dirent *e;
    char path[4200];
    while ((errno = 0, e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        join(path, sizeof path, c->dir, e->d_name);
        if (unlink(path) != 0) {
            closedir(d);
            return -1;
        }
    }
    if (errno) {
        closedir(d);
        return -1;
    }
    if (closedir(d) != 0)
        return -1;
    return rmdir(c->dir);
}

/* After a failure too (die and fail exit through here). */
static void remove_leftovers(void) {
    if (ctx.dir[0])
        remove_private_dir(&ctx);
}

int main(int argc, char **argv) {
    double seconds;
    const struct bench_case *bc = pick_case(argc, argv, cases, &seconds);
    struct ctx *c = &ctx;
    const char *base = argc > 3 ? argv[3] : "/tmp";
    join(c->dir, sizeof c->dir, base, "cordon-bench-XXXXXX");
    if (!mkdtemp(c->dir))
        die("mkdtemp %s", c->dir);
    atexit(remove_leftovers);
    join(c->path, sizeof c->path, c->dir, "file");
    join(c->other, sizeof c->other, c->dir, "renamed");
    memset(c->buf, 'x', PAGE);

    if (bc->run == run_write_4k || bc->run == run_read_4k) {
        c->fd = open(c->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (c->fd < 0)
            die("create %s", c->path);
        for (int p = 0; p < FILE_PAGES; p++) {
            memset(c->buf, p, PAGE);
            if (pwrite(c->fd, c->buf, PAGE, (off_t)p * PAGE) != PAGE)
                die("filling %s", c->path);
        }
    } else if (bc->run == run_rename) {
        int fd = open(c->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0 || write(fd, c->buf, PAGE) != PAGE || close(fd) != 0)
            die("making %s", c->path);
    } else if (bc->run == run_readdir_1k) {
        for (int i = 0; i < DIR_FILES; i++) {
            char name[32], path[4200];
            snprintf(name, sizeof name, "entry-%04d", i);
            join(path, sizeof path, c->dir, name);
            int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
            if (fd < 0 || close(fd) != 0)
                die("making %s", path);
        }
    }

    measure(bc, c, seconds);
    if (c->fd >= 0 && close(c->fd) != 0)
        die("close %s", c->path);
    if (remove_private_dir(c) != 0)
        die("removing %s", c->dir);
    c->dir[0] = 0;
    return 0;
}
