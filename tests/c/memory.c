/* Memory: mmap in its kinds and its errors, munmap, mprotect, mremap,
 * madvise, brk, and a large sparse mapping. Inaccessible memory is detected
 * without signals: the kernel answers EFAULT when a system call is given it
 * (a signal mask read from it, a file read into it). (write() to /dev/null
 * would not do: Linux never looks at the buffer.)
 * argv[1]/data is a 10000-byte file, byte i = i % 251. */
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "t.h"

#define PG 4096UL

static int devnull, datafd;

/* 1 if the 8 bytes at p (8-aligned) can be read by the kernel, 0 on
 * EFAULT: rt_sigprocmask reads a mask from there, and the old mask is put
 * back at once. */
static int readable(const void *p) {
    uint64_t old;
    errno = 0;
    long r = syscall(SYS_rt_sigprocmask, SIG_BLOCK, (const void *)((uintptr_t)p & ~7UL), &old, 8);
    if (r == 0) {
        syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, 8);
        return 1;
    }
    CHECK(r == -1 && errno == EFAULT);
    return 0;
}

/* 1 if the kernel can store into the byte at p (reading one byte of the
 * file there), 0 on EFAULT. Restores the byte. */
static int writable(void *p) {
    unsigned char old = 0;
    int r0 = readable(p);
    if (r0)
        old = *(volatile unsigned char *)p;
    errno = 0;
    long r = pread(datafd, p, 1, 0);
    if (r == 1) {
        *(volatile unsigned char *)p = old;
        return 1;
    }
    CHECK(r == -1 && errno == EFAULT);
    return 0;
}

static int all_equal(const unsigned char *p, size_t n, unsigned char v) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != v)
            return 0;
    return 1;
}

static int pattern_ok(const unsigned char *buf, size_t n, size_t off) {
    for (size_t i = 0; i < n; i++)
        if (buf[i] != (off + i) % 251)
            return 0;
    return 1;
}

/* A free range of n pages: mapped, then unmapped. */
static unsigned char *free_range(size_t n) {
    unsigned char *p = mmap(NULL, n * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    munmap(p, n * PG);
    return p;
}

static void test_anonymous(void) {
    unsigned char *p = mmap(NULL, 3 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    CHECK(((uintptr_t)p & (PG - 1)) == 0);
    CHECK(all_equal(p, 3 * PG, 0));
    memset(p, 0xab, 3 * PG);
    CHECK(all_equal(p, 3 * PG, 0xab));
    CHECK(writable(p + PG));

    /* MAP_FIXED over the middle page replaces it with fresh memory. */
    unsigned char *q = mmap(p + PG, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    CHECK(q == p + PG);
    CHECK(all_equal(p, PG, 0xab) && all_equal(p + PG, PG, 0) && all_equal(p + 2 * PG, PG, 0xab));

    /* MAP_FIXED_NOREPLACE refuses a range in use, partly or wholly. */
    CHECK(mmap(p + 2 * PG, 2 * PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) ==
          MAP_FAILED);
    CHECK(errno == EEXIST);
    CHECK(all_equal(p + 2 * PG, PG, 0xab));
    unsigned char *f = free_range(2);
    CHECK(mmap(f, 2 * PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0) == f);
    CHECK(readable(f + PG));
    munmap(f, 2 * PG);

    /* A hint that is free is taken. */
    f = free_range(4);
    CHECK(mmap(f + PG, PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == f + PG);
    munmap(f + PG, PG);

    /* MAP_POPULATE and MAP_NORESERVE are plain zeroed memory. */
    unsigned char *pop = mmap(NULL, 8 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    CHECK(pop != MAP_FAILED && all_equal(pop, 8 * PG, 0));
    pop[5 * PG] = 1;
    CHECK(pop[5 * PG] == 1);
    munmap(pop, 8 * PG);
    unsigned char *nr =
        mmap(NULL, 64 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CHECK(nr != MAP_FAILED && all_equal(nr + 63 * PG, PG, 0));
    nr[63 * PG] = 7;
    CHECK(nr[63 * PG] == 7);
    munmap(nr, 64 * PG);

    /* MAP_SHARED anonymous memory: a mapping of the same pages made with
     * mremap(old_size 0) sees every write. */
    unsigned char *s = mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(s != MAP_FAILED && all_equal(s, 2 * PG, 0));
    s[10] = 42;
    unsigned char *s2 = mremap(s, 0, 2 * PG, MREMAP_MAYMOVE);
    CHECK(s2 != MAP_FAILED && s2 != s);
    if (s2 != MAP_FAILED) {
        CHECK(s2[10] == 42);
        s2[PG + 1] = 9;
        CHECK(s[PG + 1] == 9);
        munmap(s2, 2 * PG);
    }
    CHECK(s[10] == 42);
    munmap(s, 2 * PG);
    /* ... which private memory does not allow. */
    CHECK(mremap(p, 0, PG, MREMAP_MAYMOVE) == MAP_FAILED && errno == EINVAL);

    /* /dev/zero maps as anonymous memory. */
    int z = open("/dev/zero", O_RDWR);
    unsigned char *zp = mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE, z, 0);
    CHECK(zp != MAP_FAILED && all_equal(zp, 2 * PG, 0));
    zp[0] = 1;
    munmap(zp, 2 * PG);
    close(z);
    munmap(p, 3 * PG);
}

static void test_bad_args(void) {
    CHECK(mmap(NULL, 0, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED && errno == EINVAL);
    CHECK(mmap(NULL, PG, PROT_READ, MAP_PRIVATE, datafd, 100) == MAP_FAILED && errno == EINVAL);
    CHECK(mmap(NULL, PG, PROT_READ, MAP_ANONYMOUS, -1, 0) == MAP_FAILED && errno == EINVAL);
    CHECK(mmap((void *)0x10000001, PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED &&
          errno == EINVAL);
    CHECK(mmap(NULL, PG, PROT_READ, MAP_PRIVATE, 999, 0) == MAP_FAILED && errno == EBADF);
    int rnull = open("/dev/null", O_RDONLY);
    CHECK(mmap(NULL, PG, PROT_READ, MAP_PRIVATE, rnull, 0) == MAP_FAILED && errno == ENODEV);
    close(rnull);
    /* Unknown protection bits: ignored by mmap, refused by mprotect. */
    unsigned char *u = mmap(NULL, PG, PROT_READ | 0x100, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(u != MAP_FAILED && readable(u));
    CHECK_ERR(mprotect(u, PG, PROT_READ | 0x100), EINVAL);
    munmap(u, PG);
    CHECK(mmap(NULL, 1UL << 60, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) == MAP_FAILED && errno == ENOMEM);
    /* A shared writable mapping needs a file open for writing. */
    CHECK(mmap(NULL, PG, PROT_READ | PROT_WRITE, MAP_SHARED, datafd, 0) == MAP_FAILED && errno == EACCES);
    int wfd = open("/dev/null", O_WRONLY);
    CHECK(mmap(NULL, PG, PROT_READ, MAP_PRIVATE, wfd, 0) == MAP_FAILED && errno == EACCES);
    close(wfd);
    /* ... and may then never become writable. */
    unsigned char *ro = mmap(NULL, PG, PROT_READ, MAP_SHARED, datafd, 0);
    CHECK(ro != MAP_FAILED);
    CHECK_ERR(mprotect(ro, PG, PROT_READ | PROT_WRITE), EACCES);
    CHECK(pattern_ok(ro, PG, 0));
    munmap(ro, PG);

    CHECK_ERR(munmap((void *)0x10000001, PG), EINVAL);
    CHECK_ERR(munmap(free_range(1), 0), EINVAL);
    CHECK_OK(munmap(free_range(1), PG)); /* nothing mapped: fine */
    CHECK_ERR(mprotect((void *)0x10000001, PG, PROT_READ), EINVAL);
    CHECK_ERR(mprotect(free_range(1), PG, PROT_READ), ENOMEM);
}

static void test_file(void) {
    unsigned char *p = mmap(NULL, 3 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE, datafd, 0);
    CHECK(p != MAP_FAILED);
    CHECK(pattern_ok(p, 10000, 0));
    /* The rest of the last page, past the end of the file, reads zero. */
    CHECK(all_equal(p + 10000, 3 * PG - 10000, 0));
    /* Private: writes stay in this mapping. */
    p[5] = 0xff;
    p[2 * PG + 100] = 0xee;
    unsigned char b;
    CHECK(pread(datafd, &b, 1, 5) == 1 && b == 5);
    unsigned char *q = mmap(NULL, 3 * PG, PROT_READ, MAP_PRIVATE, datafd, 0);
    CHECK(q[5] == 5 && pattern_ok(q, 10000, 0));

    /* MADV_DONTNEED drops the private copies: the file shows again. */
    CHECK_OK(madvise(p, 3 * PG, MADV_DONTNEED));
    CHECK(p[5] == 5 && p[2 * PG + 100] == (2 * PG + 100) % 251);
    CHECK(all_equal(p + 10000, 3 * PG - 10000, 0));

    /* An offset into the file. */
    unsigned char *o = mmap(NULL, PG, PROT_READ, MAP_PRIVATE, datafd, PG);
    CHECK(o != MAP_FAILED && pattern_ok(o, PG, PG));
    /* Shared read-only mappings of the same file agree. */
    unsigned char *sh = mmap(NULL, 2 * PG, PROT_READ, MAP_SHARED, datafd, 0);
    CHECK(sh != MAP_FAILED && pattern_ok(sh, 2 * PG, 0));
    munmap(sh, 2 * PG);
    munmap(o, PG);
    munmap(q, 3 * PG);
    munmap(p, 3 * PG);
}

static void test_munmap(void) {
    unsigned char *p = mmap(NULL, 6 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(p, 1, 6 * PG);
    CHECK_OK(munmap(p + PG, PG));
    CHECK_OK(munmap(p + 3 * PG, PG));
    CHECK(readable(p) && !readable(p + PG) && readable(p + 2 * PG) && !readable(p + 3 * PG) && readable(p + 4 * PG));
    CHECK(p[0] == 1 && p[2 * PG] == 1 && p[5 * PG] == 1);
    /* Partial: the length rounds up to whole pages. */
    CHECK_OK(munmap(p + 4 * PG, 1));
    CHECK(!readable(p + 4 * PG) && readable(p + 5 * PG));
    /* Over holes and mapped pages alike. */
    CHECK_OK(munmap(p, 6 * PG));
    for (int i = 0; i < 6; i++)
        CHECK(!readable(p + i * PG));
    /* The freed range can be mapped again and is fresh. */
    unsigned char *q = mmap(p, 6 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    CHECK(q == p && all_equal(q, 6 * PG, 0));
    munmap(q, 6 * PG);
}

static void test_mprotect(void) {
    unsigned char *p = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(p, 3, 4 * PG);
    CHECK_OK(mprotect(p + PG, PG, PROT_NONE));
    CHECK(!readable(p + PG) && !writable(p + PG));
    CHECK(readable(p) && readable(p + 2 * PG));
    CHECK_OK(mprotect(p + 2 * PG, PG, PROT_READ));
    CHECK(readable(p + 2 * PG) && !writable(p + 2 * PG));
    CHECK(p[2 * PG] == 3);
    CHECK_ERR(read(datafd, p + 2 * PG, 1), EFAULT);
    CHECK(writable(p + 3 * PG));
    /* Back to read-write: the contents survived. */
    CHECK_OK(mprotect(p, 4 * PG, PROT_READ | PROT_WRITE));
    CHECK(all_equal(p, 4 * PG, 3));
    CHECK(writable(p + PG) && writable(p + 2 * PG));
    /* A page never touched before being made inaccessible. */
    unsigned char *n = mmap(NULL, PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(!readable(n));
    CHECK_OK(mprotect(n, PG, PROT_READ));
    CHECK(readable(n) && n[0] == 0 && !writable(n));
    /* Write-only still reads on x86. */
    CHECK_OK(mprotect(n, PG, PROT_WRITE));
    CHECK(writable(n));
    munmap(n, PG);
    /* A range with a hole fails. */
    CHECK_OK(munmap(p + PG, PG));
    CHECK_ERR(mprotect(p, 3 * PG, PROT_READ), ENOMEM);
    munmap(p, 4 * PG);
}

static void test_mremap(void) {
    /* Grow in place into free space. */
    unsigned char *p = free_range(5);
    CHECK(mmap(p, 2 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == p);
    memset(p, 5, 2 * PG);
    CHECK(mremap(p, 2 * PG, 4 * PG, 0) == p);
    CHECK(all_equal(p, 2 * PG, 5) && all_equal(p + 2 * PG, 2 * PG, 0));
    p[4 * PG - 1] = 6;

    /* Blocked: fails without MREMAP_MAYMOVE, moves with it. */
    unsigned char *after = mmap(p + 4 * PG, PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    CHECK(after == p + 4 * PG);
    CHECK(mremap(p, 4 * PG, 8 * PG, 0) == MAP_FAILED && errno == ENOMEM);
    unsigned char *m = mremap(p, 4 * PG, 8 * PG, MREMAP_MAYMOVE);
    CHECK(m != MAP_FAILED && m != p);
    CHECK(all_equal(m, 2 * PG, 5) && m[4 * PG - 1] == 6 && all_equal(m + 4 * PG, 4 * PG, 0));
    CHECK(!readable(p) && !readable(p + 3 * PG));
    m[8 * PG - 1] = 1;

    /* Shrink: same address, the tail goes. */
    CHECK(mremap(m, 8 * PG, 3 * PG, 0) == m);
    CHECK(readable(m + 2 * PG) && !readable(m + 3 * PG) && !readable(m + 7 * PG));
    CHECK(all_equal(m, 2 * PG, 5));

    /* MREMAP_FIXED: to a chosen place, replacing what is there. */
    unsigned char *dest = mmap(NULL, 5 * PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *f = mremap(m, 3 * PG, 3 * PG, MREMAP_MAYMOVE | MREMAP_FIXED, dest + PG);
    CHECK(f == dest + PG);
    CHECK(all_equal(f, 2 * PG, 5) && !readable(m));
    CHECK(writable(f)); /* the moved pages keep their protection */
    CHECK(readable(dest) && readable(dest + 4 * PG));
    CHECK(mremap(f, PG, PG, MREMAP_FIXED, dest) == MAP_FAILED && errno == EINVAL);
    CHECK(mremap(f + PG, PG, 2 * PG, MREMAP_MAYMOVE | MREMAP_FIXED, f) == MAP_FAILED && errno == EINVAL);
    CHECK(mremap(f + 1, PG, PG, 0) == MAP_FAILED && errno == EINVAL);
    CHECK(mremap(f, PG, 0, 0) == MAP_FAILED && errno == EINVAL);
    CHECK(mremap(free_range(1), PG, 2 * PG, MREMAP_MAYMOVE) == MAP_FAILED && errno == EFAULT);
    /* Sizes past what an address space holds, or no room for them. */
    CHECK(mremap(f, PG, -PG, MREMAP_MAYMOVE) == MAP_FAILED && errno == EINVAL);
    CHECK(mremap(f, PG, 0xffff800000000000UL, MREMAP_MAYMOVE) == MAP_FAILED && errno == EINVAL);
    CHECK(mremap(f, PG, 1UL << 47, MREMAP_MAYMOVE) == MAP_FAILED && errno == EINVAL);
    CHECK(mremap(f, PG, (1UL << 47) - PG, MREMAP_MAYMOVE) == MAP_FAILED && errno == ENOMEM);
    CHECK(all_equal(f, 2 * PG, 5));
    CHECK(mremap(f, PG, PG, 0x100) == MAP_FAILED && errno == EINVAL);
    munmap(dest, 5 * PG);
    munmap(after, PG);

    /* A file mapping moved keeps showing the file. */
    unsigned char *fm = mmap(NULL, PG, PROT_READ, MAP_PRIVATE, datafd, 0);
    unsigned char *fm2 = mremap(fm, PG, 3 * PG, MREMAP_MAYMOVE);
    CHECK(fm2 != MAP_FAILED && pattern_ok(fm2, 10000, 0));
    munmap(fm2, 3 * PG);
}

static void test_madvise(void) {
    unsigned char *p = mmap(NULL, 4 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(p, 9, 4 * PG);
    CHECK_OK(madvise(p + PG, 2 * PG, MADV_DONTNEED));
    CHECK(all_equal(p, PG, 9) && all_equal(p + PG, 2 * PG, 0) && all_equal(p + 3 * PG, PG, 9));
    CHECK_OK(madvise(p, 4 * PG, MADV_WILLNEED));
    CHECK_OK(madvise(p, 4 * PG, MADV_NORMAL));
    CHECK(all_equal(p, PG, 9));
    CHECK_ERR(madvise(p + 1, PG, MADV_DONTNEED), EINVAL);
    CHECK_ERR(madvise(p, PG, 12345), EINVAL);
    munmap(p + PG, PG);
    CHECK_ERR(madvise(p, 4 * PG, MADV_DONTNEED), ENOMEM);
    munmap(p, 4 * PG);
}

static void test_brk(void) {
    char *start = (char *)syscall(SYS_brk, 0);
    char *cur = sbrk(0);
    CHECK(cur >= start);
    cur = (char *)syscall(SYS_brk, 0);
    char *want = cur + (1 << 20);
    CHECK((char *)syscall(SYS_brk, want) == want);
    CHECK((char *)syscall(SYS_brk, 0) == want);
    CHECK(all_equal((unsigned char *)want - (1 << 20) + PG, (1 << 20) - 2 * PG, 0));
    want[-1] = 1;
    CHECK(writable(want - 1));
    /* Shrink: the memory above is gone, below stays. */
    char *lower = cur + PG * 4;
    CHECK((char *)syscall(SYS_brk, lower) == lower);
    char *above = (char *)(((uintptr_t)lower + PG - 1) & ~(PG - 1)) + PG;
    CHECK(!readable(above));
    CHECK(readable(lower - 1));
    /* Grow again: fresh zeros. */
    CHECK((char *)syscall(SYS_brk, want) == want);
    CHECK(want[-1] == 0);
    /* Below the start: refused, the break stays. */
    CHECK((char *)syscall(SYS_brk, start - (1 << 20)) == want);
    CHECK((char *)syscall(SYS_brk, cur) == cur);
}

static void test_sparse(void) {
    size_t len = 1UL << 30;
    unsigned char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    size_t offs[] = {0, PG, len / 4, len / 2 + 12345, len - PG, len - 1};
    for (size_t i = 0; i < sizeof offs / sizeof *offs; i++) {
        CHECK(p[offs[i]] == 0);
        p[offs[i]] = (unsigned char)(i + 1);
    }
    for (size_t i = 0; i < sizeof offs / sizeof *offs; i++)
        CHECK(p[offs[i]] == i + 1);
    /* The kernel reaches it too. */
    CHECK(pread(datafd, p + len / 3, 100, 0) == 100 && pattern_ok(p + len / 3, 100, 0));
    struct rusage ru;
    CHECK_OK(getrusage(RUSAGE_SELF, &ru));
    CHECK(ru.ru_maxrss < 200 * 1024);
    CHECK_OK(munmap(p, len));
    CHECK(!readable(p));
}

/* /proc/self/maps: a file mapping shows its offset, device, inode and
 * path, the path starting in column 74 as Linux lays it out; [heap] and
 * [stack] are named the same way. */
static void test_maps(const char *path) {
    char *p = mmap(NULL, PG, PROT_READ, MAP_PRIVATE, datafd, PG);
    CHECK(p != MAP_FAILED);
    struct stat st;
    CHECK_OK(fstat(datafd, &st));
    char real[4096];
    CHECK(realpath(path, real) != NULL);
    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f != NULL);
    if (!f || p == MAP_FAILED) return;
    char line[4352];
    int found = 0, heap = 0, stack = 0, misplaced = 0, unparsed = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        unsigned long start, end, off, ino;
        unsigned maj, min;
        char perms[5];
        int name_at = 0;
        if (sscanf(line, "%lx-%lx %4s %lx %x:%x %lu %n", &start, &end, perms, &off, &maj, &min, &ino, &name_at) < 7) {
            unparsed++;
            continue;
        }
        const char *name = line + name_at;
        if (*name && name_at != 73) misplaced++;
        if (strcmp(name, "[heap]") == 0) heap++;
        if (strcmp(name, "[stack]") == 0) stack++;
        if (start != (unsigned long)p) continue;
        found++;
        CHECK(end == start + PG);
        CHECK(strcmp(perms, "r--p") == 0);
        CHECK(off == PG);
        CHECK(ino == st.st_ino && maj == major(st.st_dev) && min == minor(st.st_dev));
        CHECK(strcmp(name, real) == 0);
    }
    fclose(f);
    CHECK(unparsed == 0);
    CHECK(misplaced == 0);
    CHECK(found == 1);
    CHECK(stack == 1);
    CHECK(heap <= 1);
    CHECK_OK(munmap(p, PG));
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: memory FIXTURE-DIR\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/data", argv[1]);
    devnull = open("/dev/null", O_WRONLY);
    datafd = open(path, O_RDONLY);
    CHECK(devnull >= 0 && datafd >= 0);
    test_anonymous();
    test_bad_args();
    test_file();
    test_munmap();
    test_mprotect();
    test_mremap();
    test_madvise();
    test_brk();
    test_sparse();
    test_maps(path);
    return done();
}
