/* Writes through a shared mapping of a file reach the file: read back at
 * once through the descriptor after msync, and in the file on disk after
 * munmap without msync. Takes a directory holding `a` and `b`, each
 * "0123456789" followed by a newline; rewrites their first bytes. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "t.h"

static void rewrite(const char *path, const char *with, int use_msync) {
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0);
    char *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(p != MAP_FAILED);
    if (p == MAP_FAILED) {
        return;
    }
    memcpy(p, with, strlen(with));
    if (use_msync) {
        CHECK_OK(msync(p, 4096, MS_SYNC));
        char back[16] = {0};
        CHECK(pread(fd, back, 11, 0) == 11);
        printf("%s after msync: %s", path, back);
    }
    CHECK_OK(munmap(p, 4096));
    CHECK_OK(close(fd));
}

int main(int argc, char **argv) {
    if (argc < 2 || chdir(argv[1]) != 0) {
        return 2;
    }
    rewrite("a", "ABC", 1);
    rewrite("b", "XYZW", 0);
    /* A fresh open sees what both wrote. */
    char buf[16] = {0};
    int fd = open("b", O_RDONLY);
    CHECK(read(fd, buf, 11) == 11);
    printf("b after munmap: %s", buf);
    close(fd);
    return done();
}
