/* File data on a writable file system: read and write in all their forms
 * across page boundaries, holes and SEEK_DATA/SEEK_HOLE, shared and private
 * file mappings seen by read and by another process, msync, and the calls
 * that move data between descriptors (copy_file_range, sendfile, splice,
 * tee). See work_dir.h for the arguments. */
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "work_dir.h"

#define PAGE 4096

static unsigned char pattern(size_t i) {
    return (unsigned char)(i * 31 + i / 4093);
}

static int is_pattern(const unsigned char *buf, size_t n, size_t off) {
    for (size_t i = 0; i < n; i++)
        if (buf[i] != pattern(off + i))
            return 0;
    return 1;
}

static int is_zero(const unsigned char *buf, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (buf[i])
            return 0;
    return 1;
}

static unsigned char src[5 * PAGE], got[5 * PAGE];

static void round_trips(void) {
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = pattern(i);
    int fd = open("rw", O_RDWR | O_CREAT | O_TRUNC, 0644);
    /* Pieces that straddle page boundaries. */
    CHECK(write(fd, src, 100) == 100);
    CHECK(write(fd, src + 100, PAGE) == PAGE);
    CHECK(write(fd, src + 100 + PAGE, sizeof src - 100 - PAGE) == (ssize_t)(sizeof src - 100 - PAGE));
    CHECK(lseek(fd, 0, SEEK_CUR) == sizeof src);
    CHECK(pread(fd, got, sizeof got, 0) == sizeof got && is_pattern(got, sizeof got, 0));
    CHECK(pread(fd, got, 10, PAGE - 5) == 10 && is_pattern(got, 10, PAGE - 5));
    /* pwrite does not move the offset. */
    CHECK(pwrite(fd, "XYZ", 3, 2 * PAGE - 1) == 3 && lseek(fd, 0, SEEK_CUR) == sizeof src);
    CHECK(pread(fd, got, 3, 2 * PAGE - 1) == 3 && memcmp(got, "XYZ", 3) == 0);
    CHECK(pwrite(fd, src + 2 * PAGE - 1, 3, 2 * PAGE - 1) == 3);
    /* Reads stop at the end of the file. */
    CHECK(pread(fd, got, 100, sizeof src - 10) == 10);
    CHECK(pread(fd, got, 100, sizeof src + 10) == 0);
    CHECK(read(fd, got, 10) == 0);
    /* readv and writev, with the boundaries of their pieces and of pages apart. */
    struct iovec wv[3] = {{src, 3000}, {src + 3000, 2000}, {src + 5000, 7000}};
    CHECK(lseek(fd, 0, SEEK_SET) == 0);
    CHECK(ftruncate(fd, 0) == 0);
    CHECK(writev(fd, wv, 3) == 12000);
    static unsigned char a[1], b[4095], c[9000];
    struct iovec rv[3] = {{a, sizeof a}, {b, sizeof b}, {c, sizeof c}};
    CHECK(lseek(fd, 0, SEEK_SET) == 0);
    CHECK(readv(fd, rv, 3) == 12000);
    CHECK(is_pattern(a, 1, 0) && is_pattern(b, sizeof b, 1) && is_pattern(c, 12000 - PAGE, PAGE));
    CHECK(pwritev(fd, wv, 1, 20000) == 3000);
    CHECK(preadv(fd, rv + 2, 1, 20000) == 3000 && is_pattern(c, 3000, 0));
    /* The gap between 12000 and 20000 is a hole: zeros. */
    CHECK(pread(fd, got, 8000, 12000) == 8000 && is_zero(got, 8000));
    close(fd);
    CHECK_ERR(pread(-1, got, 1, 0), EBADF);
    int p[2];
    CHECK(pipe(p) == 0);
    CHECK_ERR(pread(p[0], got, 1, 0), ESPIPE);
    CHECK_ERR(pwrite(p[1], got, 1, 0), ESPIPE);
    close(p[0]);
    close(p[1]);
    fd = open("rw", O_RDONLY);
    CHECK_ERR(pread(fd, got, 1, -1), EINVAL);
    CHECK_ERR(write(fd, "x", 1), EBADF);
    close(fd);
    printf("read/write/pread/pwrite/readv/writev: across pages, holes read zeros\n");
}

static void holes(void) {
    int fd = open("sparse", O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(pwrite(fd, src, PAGE, 0) == PAGE);
    CHECK(pwrite(fd, src, PAGE, 256 * PAGE) == PAGE);
    CHECK(fsync(fd) == 0);
    off_t end = 257 * PAGE;
    CHECK(lseek(fd, 0, SEEK_END) == end);
    /* The hole between the two written pages. */
    CHECK(lseek(fd, 0, SEEK_DATA) == 0);
    CHECK(lseek(fd, 0, SEEK_HOLE) == PAGE);
    CHECK(lseek(fd, PAGE, SEEK_DATA) == 256 * PAGE);
    CHECK(lseek(fd, 100 * PAGE, SEEK_HOLE) == 100 * PAGE);
    CHECK(lseek(fd, 256 * PAGE + 5, SEEK_DATA) == 256 * PAGE + 5);
    /* The end of the file counts as a hole; past it is ENXIO. */
    CHECK(lseek(fd, 256 * PAGE, SEEK_HOLE) == end);
    CHECK_ERR(lseek(fd, end, SEEK_DATA), ENXIO);
    CHECK_ERR(lseek(fd, end, SEEK_HOLE), ENXIO);
    CHECK_ERR(lseek(fd, -1, SEEK_DATA), ENXIO);
    CHECK(pread(fd, got, PAGE, 100 * PAGE) == PAGE && is_zero(got, PAGE));
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && st.st_blocks < end / 512);
    /* Past the end a hole grows the file: the SEEK_SET offset is kept. */
    CHECK(lseek(fd, end + 10, SEEK_SET) == end + 10 && write(fd, "e", 1) == 1);
    CHECK(pread(fd, got, 10, end) == 10 && is_zero(got, 10));
    CHECK_ERR(lseek(fd, 0, 7), EINVAL);
    CHECK_ERR(lseek(fd, -1, SEEK_SET), EINVAL);
    close(fd);
    printf("holes: SEEK_DATA/SEEK_HOLE find the data pages and the end, ENXIO past it\n");
}

static void mappings(void) {
    int fd = open("map", O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(ftruncate(fd, 3 * PAGE) == 0);
    unsigned char *m = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(m != MAP_FAILED);
    if (m == MAP_FAILED)
        return;
    CHECK(is_zero(m, 3 * PAGE));
    /* A store through the mapping is seen by read at once, no msync needed. */
    memcpy(m + PAGE - 2, "shared", 6);
    CHECK(pread(fd, got, 6, PAGE - 2) == 6 && memcmp(got, "shared", 6) == 0);
    /* And a write is seen through the mapping. */
    CHECK(pwrite(fd, "written", 7, 2 * PAGE + 1) == 7);
    CHECK(memcmp(m + 2 * PAGE + 1, "written", 7) == 0);
    /* Another process mapping the file sees the parent's stores, and the
     * parent the child's. The processes take turns through pipes. */
    int to_child[2], to_parent[2];
    CHECK(pipe(to_child) == 0 && pipe(to_parent) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        int cfd = open("map", O_RDWR);
        unsigned char *cm = mmap(NULL, 3 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, cfd, 0);
        char c;
        int ok = cm != MAP_FAILED && read(to_child[0], &c, 1) == 1;
        ok = ok && memcmp(cm + 100, "from parent", 11) == 0;
        if (ok)
            memcpy(cm + PAGE + 100, "from child", 10);
        c = ok ? 'y' : 'n';
        _exit(write(to_parent[1], &c, 1) == 1 && ok ? 0 : 1);
    }
    /* Only the child holds these ends now: if it dies, reads see the end. */
    close(to_child[0]);
    close(to_parent[1]);
    memcpy(m + 100, "from parent", 11);
    char c = 0;
    CHECK(write(to_child[1], "go", 1) == 1);
    CHECK(read(to_parent[0], &c, 1) == 1 && c == 'y');
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(memcmp(m + PAGE + 100, "from child", 10) == 0);
    CHECK(pread(fd, got, 10, PAGE + 100) == 10 && memcmp(got, "from child", 10) == 0);
    close(to_child[1]);
    close(to_parent[0]);
    /* msync. */
    CHECK(msync(m, 3 * PAGE, MS_SYNC) == 0);
    CHECK(msync(m, PAGE, MS_ASYNC) == 0);
    CHECK(msync(m, PAGE, MS_INVALIDATE) == 0);
    CHECK_ERR(msync(m, PAGE, MS_SYNC | MS_ASYNC), EINVAL);
    CHECK_ERR(msync(m + 1, PAGE, MS_SYNC), EINVAL);
    CHECK_ERR(msync(m, PAGE, 0x100), EINVAL);
    /* The mapping outlives the descriptor and the name. */
    close(fd);
    CHECK(unlink("map") == 0);
    memcpy(m, "after", 5);
    CHECK(memcmp(m + 100, "from parent", 11) == 0);
    CHECK(munmap(m, 3 * PAGE) == 0);

    /* MAP_PRIVATE: stores stay in the process; the file's later changes show
     * through pages not yet written. */
    fd = open("priv", O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(write(fd, src, 2 * PAGE) == 2 * PAGE);
    m = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    CHECK(m != MAP_FAILED);
    if (m == MAP_FAILED)
        return;
    CHECK(is_pattern(m, 2 * PAGE, 0));
    memcpy(m, "private", 7);
    CHECK(pread(fd, got, 7, 0) == 7 && is_pattern(got, 7, 0));
    CHECK(pwrite(fd, "later", 5, PAGE) == 5);
    CHECK(memcmp(m + PAGE, "later", 5) == 0);
    CHECK(pwrite(fd, "hidden", 6, 10) == 6);
    CHECK(memcmp(m, "private", 7) == 0 && is_pattern(m + 10, 6, 10));
    CHECK(msync(m, 2 * PAGE, MS_SYNC) == 0);
    CHECK(pread(fd, got, 7, 0) == 7 && is_pattern(got, 7, 0));
    CHECK(munmap(m, 2 * PAGE) == 0);
    /* A shared writable mapping needs a descriptor open for writing. */
    int ro = open("priv", O_RDONLY);
    CHECK_ERR(mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, ro, 0) == MAP_FAILED ? -1 : 0, EACCES);
    m = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE, ro, 0);
    CHECK(m != MAP_FAILED);
    if (m != MAP_FAILED)
        munmap(m, PAGE);
    close(ro);
    close(fd);
    printf("mmap: MAP_SHARED seen by read at once and by another process, msync, MAP_PRIVATE private\n");
}

static void moving(void) {
    for (size_t i = 0; i < sizeof src; i++)
        src[i] = pattern(i);
    CHECK(put_file("in", src, sizeof src, 0644) == 0);
    int in = open("in", O_RDONLY);
    int out = open("out", O_RDWR | O_CREAT | O_TRUNC, 0644);

    /* copy_file_range: file offsets move unless offsets are given. */
    CHECK(copy_file_range(in, NULL, out, NULL, 3 * PAGE, 0) == 3 * PAGE);
    CHECK(lseek(in, 0, SEEK_CUR) == 3 * PAGE && lseek(out, 0, SEEK_CUR) == 3 * PAGE);
    loff_t ioff = 100, ooff = 10 * PAGE;
    CHECK(copy_file_range(in, &ioff, out, &ooff, 1000, 0) == 1000);
    CHECK(ioff == 1100 && ooff == 10 * PAGE + 1000 && lseek(in, 0, SEEK_CUR) == 3 * PAGE);
    CHECK(pread(out, got, 3 * PAGE, 0) == 3 * PAGE && is_pattern(got, 3 * PAGE, 0));
    CHECK(pread(out, got, 1000, 10 * PAGE) == 1000 && is_pattern(got, 1000, 100));
    CHECK(pread(out, got, PAGE, 5 * PAGE) == PAGE && is_zero(got, PAGE));
    /* Short at the end of the input, 0 past it. */
    ioff = sizeof src - 10;
    CHECK(copy_file_range(in, &ioff, out, NULL, 100, 0) == 10);
    CHECK(copy_file_range(in, &ioff, out, NULL, 100, 0) == 0);
    CHECK_ERR(copy_file_range(in, NULL, out, NULL, 10, 1), EINVAL);
    CHECK_ERR(copy_file_range(out, NULL, in, NULL, 10, 0), EBADF);
    ioff = 0, ooff = 100;
    CHECK_ERR(copy_file_range(out, &ioff, out, &ooff, 1000, 0), EINVAL);
    int dir = open(".", O_RDONLY | O_DIRECTORY);
    CHECK_ERR(copy_file_range(dir, NULL, out, NULL, 10, 0), EISDIR);
    close(dir);
    /* Non-blocking pipes: a read that finds nothing fails instead of hanging. */
    int p[2];
    CHECK(pipe2(p, O_NONBLOCK) == 0);
    CHECK_ERR(copy_file_range(in, NULL, p[1], NULL, 10, 0), EINVAL);
    printf("copy_file_range: offsets, short at end, EINVAL for overlap, flags and pipes\n");

    /* sendfile, file to pipe and file to file. */
    off_t off = 2;
    CHECK(lseek(in, 0, SEEK_SET) == 0);
    CHECK(sendfile(p[1], in, &off, 5000) == 5000);
    CHECK(off == 5002 && lseek(in, 0, SEEK_CUR) == 0);
    CHECK(read(p[0], got, 5000) == 5000 && is_pattern(got, 5000, 2));
    CHECK(sendfile(p[1], in, NULL, 10) == 10 && lseek(in, 0, SEEK_CUR) == 10);
    CHECK(read(p[0], got, 10) == 10 && is_pattern(got, 10, 0));
    int out2 = open("out2", O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK(sendfile(out2, in, NULL, sizeof src) == (ssize_t)(sizeof src - 10));
    CHECK(pread(out2, got, sizeof src - 10, 0) == (ssize_t)(sizeof src - 10) && is_pattern(got, sizeof src - 10, 10));
    CHECK(sendfile(out2, in, NULL, 10) == 0);
    CHECK_ERR(sendfile(in, out2, NULL, 10), EBADF);
    CHECK_ERR(sendfile(out2, p[0], NULL, 10), EINVAL);
    printf("sendfile: to a pipe and a file, with and without an offset, 0 at the end\n");

    /* splice: file to pipe and pipe to file, with offsets; tee duplicates. */
    loff_t soff = PAGE - 3;
    CHECK(splice(in, &soff, p[1], NULL, 100, 0) == 100);
    CHECK(soff == PAGE + 97 && lseek(in, 0, SEEK_CUR) == sizeof src);
    int q[2];
    CHECK(pipe2(q, O_NONBLOCK) == 0);
    CHECK(tee(p[0], q[1], 1000, 0) == 100);
    CHECK(read(q[0], got, 100) == 100 && is_pattern(got, 100, PAGE - 3));
    loff_t doff = 7;
    CHECK(splice(p[0], NULL, out2, &doff, 100, 0) == 100);
    CHECK(doff == 107);
    CHECK(pread(out2, got, 100, 7) == 100 && is_pattern(got, 100, PAGE - 3));
    /* Without an offset, the file's own moves. */
    CHECK(write(p[1], "tail", 4) == 4);
    off_t at = lseek(out2, 0, SEEK_END);
    CHECK(splice(p[0], NULL, out2, NULL, 4, 0) == 4 && lseek(out2, 0, SEEK_CUR) == at + 4);
    CHECK(pread(out2, got, 4, at) == 4 && memcmp(got, "tail", 4) == 0);
    /* Errors: neither end a pipe, offsets on a pipe, tee from a non-pipe, an
     * empty pipe without blocking. */
    CHECK_ERR(splice(in, NULL, out2, NULL, 10, 0), EINVAL);
    loff_t zero = 0;
    CHECK_ERR(splice(p[0], &zero, out2, NULL, 10, 0), ESPIPE);
    CHECK_ERR(tee(in, q[1], 10, 0), EINVAL);
    CHECK_ERR(splice(p[0], NULL, out2, NULL, 10, SPLICE_F_NONBLOCK), EAGAIN);
    CHECK_ERR(tee(p[0], q[1], 10, SPLICE_F_NONBLOCK), EAGAIN);
    /* A closed writer ends the input: 0. */
    close(p[1]);
    CHECK(splice(p[0], NULL, out2, NULL, 10, 0) == 0);
    close(p[0]);
    close(q[0]);
    close(q[1]);
    close(in);
    close(out);
    close(out2);
    printf("splice and tee: file to pipe, pipe to file, offsets, EINVAL, ESPIPE, EAGAIN\n");
}

int main(int argc, char **argv) {
    enter_work_dir(argc, argv);
    round_trips();
    holes();
    mappings();
    moving();
    return done();
}
