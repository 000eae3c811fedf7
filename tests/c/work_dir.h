/* The work directory of the writable file system tests. argv[1] names a
 * directory the program creates (it must not exist yet, so every run starts
 * empty) and works in; natively it lies under the host's temporary
 * directory, in the sandbox under its /tmp. argv[2], when it is "tmpfs",
 * says the directory must be on a tmpfs: the sandbox's /tmp always is, the
 * host's may not be, so checks that only hold on tmpfs are made only then
 * (and print nothing, so both runs print the same). */
#ifndef CORDON_WORK_DIR_H
#define CORDON_WORK_DIR_H
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "t.h"

static int on_tmpfs;

static void enter_work_dir(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s WORK_DIR [tmpfs]\n", argv[0]);
        exit(2);
    }
    on_tmpfs = argc > 2 && strcmp(argv[2], "tmpfs") == 0;
    umask(022);
    if (mkdir(argv[1], 0755) != 0 || chdir(argv[1]) != 0) {
        fprintf(stderr, "work directory %s: %s\n", argv[1], strerror(errno));
        exit(2);
    }
    /* The mode asked for, whatever the caller's umask or a default ACL. */
    if (chmod(".", 0755) != 0) {
        fprintf(stderr, "chmod %s: %s\n", argv[1], strerror(errno));
        exit(2);
    }
}

/* Creates (or truncates) `path` holding `len` bytes of `data`; -1 on error. */
static __attribute__((unused)) int put_file(const char *path, const void *data, size_t len, mode_t mode) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, data, len);
    close(fd);
    return n == (ssize_t)len ? 0 : -1;
}

/* Reads up to `cap` - 1 bytes of `path` into `buf`, NUL-terminated; the
 * count, or -1. */
static __attribute__((unused)) ssize_t get_file(const char *path, char *buf, size_t cap) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    buf[n < 0 ? 0 : n] = 0;
    return n;
}

static __attribute__((unused)) mode_t mode_of(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0)
        return (mode_t)-1;
    return st.st_mode;
}

#endif
