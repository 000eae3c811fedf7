/* Writes a file in 1 MiB writes until it holds MIB MiB or a write fails,
 * then prints how many bytes went in and how the writing ended:
 *
 *   tmpfs_fill PATH MIB
 *   PATH: N bytes written, then ENOSPC      (or "then done")
 *   C checks, F failed
 *
 * A write that fails must be refused cleanly: the writer lives on, the file
 * holds exactly what the writes reported written, and the last of it reads
 * back as written. Under a memory limit, tests/tmpfs_limits.rs runs this on
 * the sandbox's /tmp. */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "t.h"

#define CHUNK (1 << 20)

static char chunk[CHUNK], back[CHUNK];

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s PATH MIB\n", argv[0]);
        return 2;
    }
    const char *path = argv[1];
    long long want = atoll(argv[2]) * CHUNK, written = 0;
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        printf("%s: 0 bytes written, then %s (open)\n", path, strerrorname_np(errno));
        return 1;
    }
    int err = 0;
    unsigned char last = 0;
    while (written < want) {
        /* A byte of its own per MiB, never zero: what reads back must be
         * what this write put there. */
        unsigned char mark = (unsigned char)(written / CHUNK % 255 + 1);
        memset(chunk, mark, CHUNK);
        ssize_t n = write(fd, chunk, CHUNK);
        if (n < 0) {
            err = errno;
            break;
        }
        if (n > 0)
            last = mark;
        written += n;
        if (n < CHUNK) {
            /* A short write: the next one says why. */
            n = write(fd, chunk, CHUNK);
            CHECK(n < 0);
            err = n < 0 ? errno : 0;
            break;
        }
    }
    printf("%s: %lld bytes written, then %s\n", path, written, err ? strerrorname_np(err) : "done");

    struct stat st;
    CHECK_OK(fstat(fd, &st));
    CHECK(st.st_size == written);
    if (written > 0) {
        off_t tail = written % CHUNK ? written % CHUNK : CHUNK;
        CHECK(pread(fd, back, (size_t)tail, written - tail) == tail);
        int same = 1;
        for (off_t i = 0; i < tail; i++)
            same &= back[i] == (char)last;
        CHECK(same);
    }
    CHECK_OK(close(fd));
    return done();
}
