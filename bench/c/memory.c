/* Memory: mappings, page faults and bandwidth.
 *   mmap_4k      mmap 4 KiB anonymous + write to it + munmap
 *   mmap_2m      mmap 2 MiB anonymous + write to each 4 KiB page + munmap
 *   page_fault   first touch of each 4 KiB page of a fresh anonymous
 *                mapping of MIB MiB (default 256; mmap and munmap
 *                included); reported per page, extra figure pages/s
 *   memcpy       memcpy between two buffers of MIB MiB (default 512)
 *                faulted in beforehand (MAP_POPULATE + memset, not timed);
 *                extra figure GB/s (10^9 bytes copied per second)
 * MIB is the optional third argument. */
#include "bench.h"

#include <sys/mman.h>
#include <unistd.h>

#define PAGE 4096UL

/* Sizes of page_fault's region and of memcpy's buffers, in bytes. */
static size_t fault_region = 256UL << 20;
static size_t copy_size = 512UL << 20;

static char *map_anon(size_t len, int extra_flags) {
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | extra_flags, -1, 0);
    if (p == MAP_FAILED)
        die("mmap %zu bytes", len);
    return p;
}

static void unmap(void *p, size_t len) {
    if (munmap(p, len) != 0)
        die("munmap %zu bytes", len);
}

/* Map `len` bytes, write one byte in each page, unmap; `n` times. */
static void map_touch_unmap(long n, size_t len) {
    for (long i = 0; i < n; i++) {
        volatile char *p = map_anon(len, 0);
        for (size_t off = 0; off < len; off += PAGE)
            p[off] = 1;
        unmap((void *)p, len);
    }
}

static void run_mmap_4k(long n, void *arg) {
    (void)arg;
    map_touch_unmap(n, PAGE);
}

static void run_mmap_2m(long n, void *arg) {
    (void)arg;
    map_touch_unmap(n, 2UL << 20);
}

static void run_page_fault(long n, void *arg) {
    (void)arg;
    map_touch_unmap(n, fault_region);
}

struct copy_bufs {
    char *src, *dst;
};

static void run_memcpy(long n, void *arg) {
    struct copy_bufs *b = arg;
    for (long i = 0; i < n; i++) {
        memcpy(b->dst, b->src, copy_size);
        /* Keep the copy from being optimised away or merged. */
        __asm__ volatile("" : : "r"(b->dst) : "memory");
    }
}

static const struct bench_case cases[] = {
    {.name = "mmap_4k", .run = run_mmap_4k},
    {.name = "mmap_2m", .run = run_mmap_2m},
    /* items and per_op_amount are set from the size in main */
    {.name = "page_fault", .run = run_page_fault, .unit = "pages/s", .per_op_amount = 1, .divisor = 1},
    {.name = "memcpy", .run = run_memcpy, .unit = "GB/s", .divisor = 1e9},
    {0},
};

int main(int argc, char **argv) {
    double seconds;
    struct bench_case c = *pick_case(argc, argv, cases, &seconds);
    if (argc > 3) {
        char *end;
        errno = 0;
        unsigned long mib = strtoul(argv[3], &end, 10);
        if (errno || *end || mib == 0 || mib > (1UL << 20))
            fail("bad size '%s' (MiB)", argv[3]);
        fault_region = copy_size = mib << 20;
    }
    if (c.run == run_page_fault)
        c.items = (long)(fault_region / PAGE);
    if (c.run == run_memcpy)
        c.per_op_amount = (double)copy_size;
    long page = sysconf(_SC_PAGESIZE);
    if (page != (long)PAGE)
        fail("page size is %ld, expected %lu", page, PAGE);
    struct copy_bufs bufs = {0};
    if (c.run == run_memcpy) {
        bufs.src = map_anon(copy_size, MAP_POPULATE);
        bufs.dst = map_anon(copy_size, MAP_POPULATE);
        memset(bufs.src, 0x5a, copy_size);
        memset(bufs.dst, 0xa5, copy_size);
    }
    measure(&c, &bufs, seconds);
    if (c.run == run_memcpy) {
        if (bufs.dst[copy_size - 1] != 0x5a)
            fail("memcpy: the copy is wrong");
        unmap(bufs.src, copy_size);
        unmap(bufs.dst, copy_size);
    }
    return 0;
}
