/* The addresses the sandbox keeps for the platform (argv[1] to argv[2], in
 * hex) are never an application's: a fixed mapping or a move there fails
 * with ENOMEM, as Linux fails for an address it cannot give; a hint there
 * is only a hint; a search for free space steps over them; and
 * /proc/self/maps shows nothing there. Sandbox only: natively those
 * addresses are ordinary. */
#define _GNU_SOURCE
#include <stdint.h>
#include <sys/mman.h>

#include "t.h"

static uintptr_t lo, hi;

static int outside(void *p, size_t len) {
    uintptr_t a = (uintptr_t)p;
    return p != MAP_FAILED && (a + len <= lo || a >= hi);
}

int main(int argc, char **argv) {
    if (argc != 3)
        return 2;
    lo = strtoull(argv[1], NULL, 16);
    hi = strtoull(argv[2], NULL, 16);
    const int anon = MAP_PRIVATE | MAP_ANONYMOUS;
    const size_t page = 4096;

    CHECK(mmap((void *)lo, page, PROT_READ, anon | MAP_FIXED, -1, 0) == MAP_FAILED && errno == ENOMEM);
    CHECK(mmap((void *)(hi - page), page, PROT_READ, anon | MAP_FIXED, -1, 0) == MAP_FAILED && errno == ENOMEM);
    CHECK(mmap((void *)(lo - page), 2 * page, PROT_READ, anon | MAP_FIXED_NOREPLACE, -1, 0) == MAP_FAILED &&
          errno == ENOMEM);

    void *hinted = mmap((void *)(lo + 16 * page), page, PROT_READ, anon, -1, 0);
    CHECK(outside(hinted, page));

    /* Moving a mapping there, or growing one into it in place, fails. */
    void *below = mmap((void *)(lo - page), page, PROT_READ | PROT_WRITE, anon | MAP_FIXED_NOREPLACE, -1, 0);
    CHECK(below == (void *)(lo - page));
    CHECK(mremap(below, page, 2 * page, 0) == MAP_FAILED && errno == ENOMEM);
    void *moved = mremap(below, page, page, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)lo);
    CHECK(moved == MAP_FAILED && errno == ENOMEM);
    void *grown = mremap(below, page, 4 * page, MREMAP_MAYMOVE);
    CHECK(outside(grown, 4 * page));

    /* Fill the whole space between the range and the lowest mapping above
     * it, then ask for more: the search passes the range. */
    uintptr_t above = UINTPTR_MAX;
    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f != NULL);
    char line[512];
    int inside = 0;
    while (f && fgets(line, sizeof line, f)) {
        uintptr_t s, e;
        if (sscanf(line, "%lx-%lx", &s, &e) != 2)
            continue;
        inside += s < hi && e > lo;
        if (s >= hi && s < above)
            above = s;
    }
    if (f)
        fclose(f);
    CHECK(inside == 0);
    void *filler = mmap((void *)hi, above - hi, PROT_NONE, anon | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    CHECK(filler == (void *)hi);
    size_t big = 2 * (hi - lo);
    void *next = mmap(NULL, big, PROT_NONE, anon | MAP_NORESERVE, -1, 0);
    CHECK(outside(next, big));
    return done();
}
