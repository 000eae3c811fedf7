/* System V shared memory: shmget's rules and limits, shmat with and
 * without an address (SHM_RND, SHM_REMAP, SHM_RDONLY), one segment seen
 * through several attaches and across fork, attaches counted and dropped
 * by fork, exec and exit, IPC_RMID while attached (the key goes at once,
 * the segment at the last detach), shmdt's errors and shmctl's commands. */
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t.h"

static key_t run_key(int n) { return (key_t)(0x7e000000 | ((getpid() & 0xffff) << 8) | n); }

static long nattch(int id) {
    struct shmid_ds ds;
    if (shmctl(id, IPC_STAT, &ds) != 0) return -1;
    return (long)ds.shm_nattch;
}

static int mapped(const char *name) {
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int n = 0;
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, name)) n++;
    if (f) fclose(f);
    return n;
}

static void test_get(void) {
    key_t key = run_key(1);
    CHECK_ERR(shmget(key, 4096, 0600), ENOENT);
    int id = shmget(key, 10000, IPC_CREAT | IPC_EXCL | 0640);
    CHECK(id >= 0);
    CHECK(shmget(key, 10000, 0600) == id);
    CHECK(shmget(key, 0, 0) == id);
    CHECK_ERR(shmget(key, 10001, 0600), EINVAL);
    CHECK_ERR(shmget(key, 1, IPC_CREAT | IPC_EXCL), EEXIST);
    CHECK_ERR(shmget(IPC_PRIVATE, 0, 0600), EINVAL);
    struct shmid_ds ds;
    CHECK_OK(shmctl(id, IPC_STAT, &ds));
    CHECK(ds.shm_segsz == 10000 && ds.shm_nattch == 0);
    CHECK(ds.shm_perm.__key == key && (ds.shm_perm.mode & 0777) == 0640);
    CHECK(ds.shm_cpid == getpid() && ds.shm_lpid == 0 && ds.shm_atime == 0 && ds.shm_dtime == 0);
    CHECK(ds.shm_ctime >= time(NULL) - 5 && ds.shm_ctime <= time(NULL));
    ds.shm_perm.mode = 0604;
    CHECK_OK(shmctl(id, IPC_SET, &ds));
    CHECK_OK(shmctl(id, IPC_STAT, &ds));
    CHECK((ds.shm_perm.mode & 0777) == 0604);
    CHECK_OK(shmctl(id, SHM_LOCK, NULL));
    CHECK_OK(shmctl(id, IPC_STAT, &ds));
    CHECK(ds.shm_perm.mode & SHM_LOCKED);
    CHECK_OK(shmctl(id, SHM_UNLOCK, NULL));
    CHECK_OK(shmctl(id, IPC_STAT, &ds));
    CHECK(!(ds.shm_perm.mode & SHM_LOCKED));
    CHECK_ERR(shmctl(id, IPC_STAT, (void *)8), EFAULT);
    CHECK_ERR(shmctl(id, 12345, &ds), EINVAL);
    CHECK_OK(shmctl(id, IPC_RMID, NULL));
    CHECK_ERR(shmctl(id, IPC_STAT, &ds), EINVAL);
    CHECK_ERR(shmget(key, 1, 0), ENOENT);
    CHECK_ERR(shmat(id, NULL, 0), EINVAL);
    CHECK_ERR(shmat(-1, NULL, 0), EINVAL);

    struct shminfo info;
    CHECK(shmctl(0, IPC_INFO, (struct shmid_ds *)&info) >= 0);
    CHECK(info.shmmni == 4096 && info.shmmin == 1 && info.shmmax == 0xfffffffffeffffffUL);
}

static sigjmp_buf fault_jmp;
static volatile int faults;
static void on_segv(int sig) {
    faults++;
    siglongjmp(fault_jmp, 1);
}

static void test_attach(void) {
    key_t key = run_key(2);
    int id = shmget(key, 3 * 4096 + 100, IPC_CREAT | 0600);
    CHECK(id >= 0);
    char *a = shmat(id, NULL, 0);
    CHECK(a != (void *)-1);
    CHECK(((uintptr_t)a & 4095) == 0);
    char *b = shmat(id, NULL, 0);
    CHECK(b != (void *)-1 && b != a);
    CHECK(nattch(id) == 2);
    /* New pages read zero; each attach sees the other's writes, to the
     * end of the last page. */
    CHECK(a[0] == 0 && a[4 * 4096 - 1] == 0);
    strcpy(a + 5000, "shared");
    a[4 * 4096 - 1] = 'z';
    CHECK(strcmp(b + 5000, "shared") == 0 && b[4 * 4096 - 1] == 'z');
    struct shmid_ds ds;
    CHECK_OK(shmctl(id, IPC_STAT, &ds));
    CHECK(ds.shm_lpid == getpid() && ds.shm_atime >= time(NULL) - 5);

    char name[32];
    snprintf(name, sizeof name, "/SYSV%08x (deleted)", (unsigned)key);
    CHECK(mapped(name) == 2);

    /* Read-only attaches: writing faults, mprotect cannot make them
     * writable. */
    char *r = shmat(id, NULL, SHM_RDONLY);
    CHECK(r != (void *)-1 && strcmp(r + 5000, "shared") == 0);
    CHECK_ERR(mprotect(r, 4096, PROT_READ | PROT_WRITE), EACCES);
    struct sigaction sa = {.sa_handler = on_segv}, old;
    sigaction(SIGSEGV, &sa, &old);
    faults = 0;
    if (sigsetjmp(fault_jmp, 1) == 0) *(volatile char *)r = 1;
    CHECK(faults == 1);
    sigaction(SIGSEGV, &old, NULL);
    CHECK_OK(shmdt(r));

    /* Addresses: aligned or rounded with SHM_RND; one in use only with
     * SHM_REMAP. */
    CHECK_OK(shmdt(b));
    CHECK(nattch(id) == 1);
    CHECK(shmat(id, b, 0) == b);
    CHECK_OK(shmdt(b));
    CHECK_ERR(shmat(id, b + 1, 0), EINVAL);
    CHECK(shmat(id, b + 1, SHM_RND) == b);
    CHECK_ERR(shmat(id, b, 0), EINVAL);
    CHECK(shmat(id, b, SHM_REMAP) == b);
    CHECK_ERR(shmat(id, NULL, SHM_REMAP), EINVAL);
    CHECK(strcmp(b + 5000, "shared") == 0);
    CHECK_OK(shmdt(b));

    /* shmdt takes the address an attach starts at. */
    CHECK_ERR(shmdt(a + 1), EINVAL);
    CHECK_ERR(shmdt(a + 4096), EINVAL);
    static char not_shm[8192];
    CHECK_ERR(shmdt((void *)(((uintptr_t)not_shm + 4095) & ~4095UL)), EINVAL);
    /* A split attach is still one: shmdt takes every piece of it. */
    CHECK_OK(munmap(a + 4096, 4096));
    CHECK_OK(shmdt(a));
    CHECK(mapped(name) == 0);
    CHECK_ERR(shmdt(a), EINVAL);
    CHECK(nattch(id) == 0);
    CHECK_OK(shmctl(id, IPC_STAT, &ds));
    CHECK(ds.shm_dtime >= time(NULL) - 5);
    /* The data outlives the attaches. */
    a = shmat(id, NULL, 0);
    CHECK(strcmp(a + 5000, "shared") == 0);
    CHECK_OK(shmdt(a));
    CHECK_OK(shmctl(id, IPC_RMID, NULL));
}

/* Attaches across fork, exec and exit; IPC_RMID while attached. */
static void test_lifetime(const char *self) {
    key_t key = run_key(3);
    int id = shmget(key, 4096, IPC_CREAT | 0600);
    int *p = shmat(id, NULL, 0);
    CHECK(p != (void *)-1);
    pid_t pid = fork();
    if (pid == 0) {
        /* The child's copy of the attach counts, and shares the pages. */
        if (nattch(id) != 2) _exit(1);
        p[0] = 42;
        _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(p[0] == 42);
    CHECK(nattch(id) == 1);

    pid = fork();
    if (pid == 0) {
        char arg[16];
        snprintf(arg, sizeof arg, "%d", id);
        execl(self, self, "nattch", arg, (char *)NULL);
        _exit(9);
    }
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);

    /* Removed while attached: the key is free at once, the id keeps
     * working (Linux lets it be attached again) until the last detach. */
    CHECK_OK(shmctl(id, IPC_RMID, NULL));
    CHECK_ERR(shmget(key, 4096, 0600), ENOENT);
    struct shmid_ds ds;
    CHECK_OK(shmctl(id, IPC_STAT, &ds));
    CHECK(ds.shm_perm.mode & SHM_DEST);
    CHECK(ds.shm_perm.__key == IPC_PRIVATE);
    int again = shmget(key, 4096, IPC_CREAT | IPC_EXCL | 0600);
    CHECK(again >= 0 && again != id);
    CHECK_OK(shmctl(again, IPC_RMID, NULL));
    int *q = shmat(id, NULL, 0);
    CHECK(q != (void *)-1 && q[0] == 42);
    CHECK(nattch(id) == 2);
    CHECK_OK(shmdt(q));
    pid = fork();
    if (pid == 0) _exit(p[0] == 42 ? 0 : 1);
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(nattch(id) == 1);
    CHECK_OK(shmdt(p));
    CHECK_ERR(shmctl(id, IPC_STAT, &ds), EINVAL);
    CHECK_ERR(shmat(id, NULL, 0), EINVAL);

    /* A process that exits attached detaches. */
    id = shmget(IPC_PRIVATE, 4096, 0600);
    pid = fork();
    if (pid == 0) {
        shmat(id, NULL, 0);
        shmat(id, NULL, 0);
        _exit(nattch(id) == 2 ? 0 : 1);
    }
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(nattch(id) == 0);
    CHECK_OK(shmctl(id, IPC_STAT, &ds));
    CHECK(ds.shm_lpid == pid || ds.shm_lpid == getpid());
    CHECK_OK(shmctl(id, IPC_RMID, NULL));
}

static void test_perms(void) {
    pid_t pid = fork();
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(1);
        int id = shmget(IPC_PRIVATE, 4096, 0400);
        CHECK(id >= 0);
        CHECK_ERR(shmat(id, NULL, 0), EACCES);
        void *r = shmat(id, NULL, SHM_RDONLY);
        CHECK(r != (void *)-1);
        CHECK_OK(shmdt(r));
        CHECK_OK(shmctl(id, SHM_LOCK, NULL));
        CHECK_OK(shmctl(id, SHM_UNLOCK, NULL));
        struct shmid_ds ds;
        CHECK_OK(shmctl(id, IPC_STAT, &ds));
        ds.shm_perm.mode = 0;
        CHECK_OK(shmctl(id, IPC_SET, &ds));
        CHECK_ERR(shmctl(id, IPC_STAT, &ds), EACCES);
        CHECK_ERR(shmat(id, NULL, SHM_RDONLY), EACCES);
        CHECK_OK(shmctl(id, IPC_RMID, NULL));
        _exit(t_failures ? 2 : 0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "nattch") == 0) {
        /* After exec: the attach this process had is gone, the parent's
         * stays. */
        return nattch(atoi(argv[2])) == 1 ? 0 : 1;
    }
    test_get();
    test_attach();
    test_lifetime("/proc/self/exe");
    test_perms();
    return done();
}
