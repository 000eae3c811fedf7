/* Clocks as programs read them: through the vDSO (libc's clock_gettime,
 * gettimeofday, time) and by raw syscall. The two must agree in order, the
 * clocks must never go backwards, not across threads nor into a child, and
 * sleeps measured on them must last at least as long as asked. The vDSO's
 * getcpu answers a CPU the process may run on, as the syscall does. */
#include <elf.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t.h"

static int64_t ns_of(struct timespec t) {
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int64_t libc_ns(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return ns_of(t);
}

static int64_t sys_ns(clockid_t c) {
    struct timespec t;
    syscall(SYS_clock_gettime, c, &t);
    return ns_of(t);
}

static void vdso_is_mapped(void) {
    unsigned long at = getauxval(AT_SYSINFO_EHDR);
    CHECK(at != 0);
    if (at)
        CHECK(memcmp((void *)at, ELFMAG, SELFMAG) == 0);
    FILE *f = fopen("/proc/self/maps", "r");
    CHECK(f != NULL);
    if (!f)
        return;
    char line[512];
    int vdso = 0, vvar = 0;
    unsigned long vvar_at = 0;
    while (fgets(line, sizeof line, f)) {
        if (strstr(line, "[vdso]"))
            vdso++;
        if (strstr(line, "[vvar]")) {
            vvar++;
            sscanf(line, "%lx", &vvar_at);
        }
    }
    fclose(f);
    CHECK(vdso == 1);
    CHECK(vvar == 1);
    /* The time page can never be made writable. */
    if (vvar_at)
        CHECK_ERR(mprotect((void *)vvar_at, 4096, PROT_READ | PROT_WRITE), EACCES);
}

/* vDSO and syscall reads interleaved must be in order. */
static void vdso_and_syscall_agree(void) {
    const clockid_t clocks[] = {CLOCK_MONOTONIC, CLOCK_REALTIME, CLOCK_BOOTTIME};
    for (unsigned i = 0; i < sizeof clocks / sizeof clocks[0]; i++) {
        int out_of_order = 0;
        for (int k = 0; k < 5000; k++) {
            int64_t a = libc_ns(clocks[i]);
            int64_t b = sys_ns(clocks[i]);
            int64_t c = libc_ns(clocks[i]);
            out_of_order += !(a <= b && b <= c);
        }
        CHECK(out_of_order == 0);
    }
    /* The coarse clocks never run ahead of the fine ones. */
    int64_t coarse = libc_ns(CLOCK_MONOTONIC_COARSE);
    CHECK(coarse <= libc_ns(CLOCK_MONOTONIC));
    coarse = libc_ns(CLOCK_REALTIME_COARSE);
    CHECK(coarse <= libc_ns(CLOCK_REALTIME));
    /* Realtime in three forms agrees. */
    time_t t0 = time(NULL);
    struct timeval tv;
    CHECK_OK(gettimeofday(&tv, NULL));
    struct timespec ts;
    CHECK_OK(clock_gettime(CLOCK_REALTIME, &ts));
    time_t t1 = time(NULL);
    /* time() reads the coarse clock, up to a tick behind the others: just
     * past a second boundary it still shows the second before. */
    CHECK(t0 <= tv.tv_sec && tv.tv_sec <= ts.tv_sec && ts.tv_sec <= t1 + 1);
    CHECK(tv.tv_usec >= 0 && tv.tv_usec < 1000000);
    /* A clock the vDSO does not serve still works, and bad ids fail. */
    CHECK_OK(clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts));
    CHECK_ERR(clock_gettime((clockid_t)12345, &ts), EINVAL);
    /* Boot time is at least monotonic time. */
    int64_t mono = libc_ns(CLOCK_MONOTONIC);
    CHECK(libc_ns(CLOCK_BOOTTIME) >= mono);
}

static pthread_mutex_t order_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t last_seen;
static int went_back;

static void *reader(void *arg) {
    (void)arg;
    for (int i = 0; i < 200000; i++) {
        pthread_mutex_lock(&order_lock);
        int64_t now = libc_ns(CLOCK_MONOTONIC);
        if (now < last_seen)
            went_back++;
        last_seen = now;
        pthread_mutex_unlock(&order_lock);
    }
    return NULL;
}

/* Reads taken in a known order, on any CPU, never go backwards. */
static void monotonic_across_threads(void) {
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&t[i], NULL, reader, NULL) == 0);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    CHECK(went_back == 0);
}

static void monotonic_into_child(void) {
    int64_t before = libc_ns(CLOCK_MONOTONIC);
    pid_t pid = fork();
    if (pid == 0)
        _exit(libc_ns(CLOCK_MONOTONIC) >= before ? 0 : 1);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void sleeps_last_long_enough(void) {
    int64_t start = libc_ns(CLOCK_MONOTONIC);
    struct timespec d = {0, 20 * 1000000};
    CHECK_OK(nanosleep(&d, NULL));
    CHECK(libc_ns(CLOCK_MONOTONIC) - start >= 20 * 1000000);

    const clockid_t clocks[] = {CLOCK_MONOTONIC, CLOCK_REALTIME};
    for (unsigned i = 0; i < 2; i++) {
        int64_t deadline_ns = libc_ns(clocks[i]) + 15 * 1000000;
        struct timespec deadline = {deadline_ns / 1000000000, deadline_ns % 1000000000};
        CHECK(clock_nanosleep(clocks[i], TIMER_ABSTIME, &deadline, NULL) == 0);
        CHECK(libc_ns(clocks[i]) >= deadline_ns);
    }
}

/* A symbol of the vDSO, found through its section headers (the vDSO is
 * mapped whole). */
static void *vdso_symbol(const char *name) {
    const char *base = (const char *)getauxval(AT_SYSINFO_EHDR);
    if (!base)
        return NULL;
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)base;
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(base + eh->e_shoff);
    uint64_t load = 0;
    const Elf64_Phdr *ph = (const Elf64_Phdr *)(base + eh->e_phoff);
    for (int i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD) {
            load = ph[i].p_vaddr - ph[i].p_offset;
            break;
        }
    for (int i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNSYM)
            continue;
        const Elf64_Sym *sym = (const Elf64_Sym *)(base + sh[i].sh_offset);
        const char *names = base + sh[sh[i].sh_link].sh_offset;
        for (size_t k = 0; k < sh[i].sh_size / sizeof *sym; k++)
            if (sym[k].st_shndx != SHN_UNDEF && strcmp(names + sym[k].st_name, name) == 0)
                return (void *)(base + sym[k].st_value - load);
    }
    return NULL;
}

static void getcpu_through_vdso(void) {
    long (*vdso_getcpu)(unsigned *, unsigned *, void *) = vdso_symbol("__vdso_getcpu");
    CHECK(vdso_getcpu != NULL);
    if (!vdso_getcpu)
        return;
    long cpus = sysconf(_SC_NPROCESSORS_CONF);
    for (int i = 0; i < 100; i++) {
        unsigned cpu = ~0u, node = ~0u, by_call = ~0u;
        CHECK(vdso_getcpu(&cpu, &node, NULL) == 0);
        CHECK(cpu < (unsigned)cpus);
        CHECK(node < 1024);
        CHECK(vdso_getcpu(NULL, NULL, NULL) == 0);
        CHECK_OK(syscall(SYS_getcpu, &by_call, NULL, NULL));
        CHECK(by_call < (unsigned)cpus);
    }
    printf("getcpu through the vDSO and by syscall name CPUs below %s\n", "_SC_NPROCESSORS_CONF");
}

int main(void) {
    vdso_is_mapped();
    getcpu_through_vdso();
    vdso_and_syscall_agree();
    monotonic_across_threads();
    monotonic_into_child();
    sleeps_last_long_enough();
    return done();
}
