/* fork and copy-on-write: after fork, a write by either process is invisible
 * to the other, for every kind of private memory (data, heap, stack, private
 * anonymous and private file mappings); shared anonymous memory stays
 * shared. Also fork's return values, getppid, and many forks in a row. */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

static int global_data = 1;
static char bss_page[8192];

/* Waits for `pid` and returns its exit code (-1 if it did not exit). */
static int reap(pid_t pid) {
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

/* Runs `f` in a child; returns its exit code. */
static int in_child(int (*f)(void *), void *arg) {
    pid_t pid = fork();
    if (pid == 0) _exit(f(arg));
    CHECK(pid > 0);
    return reap(pid);
}

struct regions {
    int *data;
    char *bss;
    char *heap;
    volatile int *stack;
    char *anon;
    char *shared;
    const char *file;
    size_t file_len;
};

/* The child writes everything and checks its own view. */
static int child_writes(void *p) {
    struct regions *r = p;
    int bad = 0;
    *r->data = 2;
    r->bss[4096] = 'c';
    memset(r->heap, 'c', 100000);
    *r->stack = 2;
    memset(r->anon, 'c', 3 * 4096);
    strcpy(r->shared, "written by child");
    bad |= *r->data != 2 || r->bss[4096] != 'c' || r->heap[99999] != 'c' || *r->stack != 2 || r->anon[8191] != 'c';
    return bad;
}

/* The parent writes after the fork; the child must still see the values
 * of the moment of the fork (except in the shared page). */
static volatile int go_pipe[2];
static int child_reads_after_parent_writes(void *p) {
    struct regions *r = p;
    char c;
    if (read(go_pipe[0], &c, 1) != 1) return 10;
    int bad = 0;
    if (*r->data != 1) bad |= 1;
    if (r->bss[4096] != 0) bad |= 2;
    if (r->heap[0] != 'p') bad |= 4;
    if (*r->stack != 1) bad |= 8;
    if (r->anon[0] != 'p') bad |= 16;
    if (strcmp(r->shared, "written by parent") != 0) bad |= 32;
    return bad;
}

int main(void) {
    volatile int on_stack = 1;
    char *heap = malloc(100000);
    memset(heap, 'p', 100000);
    char *anon = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(anon != MAP_FAILED && shared != MAP_FAILED);
    memset(anon, 'p', 3 * 4096);
    strcpy(shared, "initial");
    struct regions r = {&global_data, bss_page, heap, &on_stack, anon, shared, NULL, 0};

    /* Child writes: the parent sees none of it, except the shared page. */
    CHECK(in_child(child_writes, &r) == 0);
    CHECK(global_data == 1);
    CHECK(bss_page[4096] == 0);
    CHECK(heap[0] == 'p' && heap[99999] == 'p');
    CHECK(on_stack == 1);
    CHECK(anon[0] == 'p' && anon[8191] == 'p');
    CHECK(strcmp(shared, "written by child") == 0);

    /* Parent writes after the fork: the child keeps the old values. */
    CHECK_OK(pipe((int *)go_pipe));
    pid_t pid = fork();
    if (pid == 0) _exit(child_reads_after_parent_writes(&r));
    global_data = 5;
    bss_page[4096] = 'x';
    memset(heap, 'q', 100000);
    on_stack = 7;
    memset(anon, 'q', 3 * 4096);
    strcpy(shared, "written by parent");
    CHECK(write(go_pipe[1], "g", 1) == 1);
    int code = reap(pid);
    if (code != 0) fprintf(stderr, "child saw parent's writes: mask %d\n", code);
    CHECK(code == 0);
    global_data = 1;
    bss_page[4096] = 0;
    memset(heap, 'p', 100000);
    on_stack = 1;
    memset(anon, 'p', 3 * 4096);

    /* A private file mapping written in the child: the parent's copy keeps
     * the file's bytes. */
    int fd = open("/proc/self/exe", O_RDONLY);
    if (fd < 0) fd = open("/bin/sh", O_RDONLY);
    CHECK(fd >= 0);
    char *fm = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    CHECK(fm != MAP_FAILED);
    CHECK(memcmp(fm, "\177ELF", 4) == 0);
    pid = fork();
    if (pid == 0) {
        memcpy(fm, "XXXX", 4);
        _exit(memcmp(fm, "XXXX", 4) != 0);
    }
    CHECK(reap(pid) == 0);
    CHECK(memcmp(fm, "\177ELF", 4) == 0);
    /* And the parent's write is invisible to a later child's file view. */
    memcpy(fm, "YYYY", 4);
    pid = fork();
    if (pid == 0) _exit(memcmp(fm, "YYYY", 4) != 0);
    CHECK(reap(pid) == 0);
    char *fm2 = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    CHECK(memcmp(fm2, "\177ELF", 4) == 0);
    close(fd);

    /* Two generations: a grandchild's write stays with it. */
    pid = fork();
    if (pid == 0) {
        global_data = 10;
        pid_t g = fork();
        if (g == 0) {
            global_data = 20;
            _exit(getppid() == getppid() && global_data == 20 ? 0 : 1);
        }
        int c = reap(g);
        _exit(c == 0 && global_data == 10 ? 0 : 1);
    }
    CHECK(reap(pid) == 0);
    CHECK(global_data == 1);

    /* fork's return values and parentage. */
    pid_t me = getpid();
    int p[2];
    CHECK_OK(pipe(p));
    pid = fork();
    if (pid == 0) {
        pid_t info[2] = {getpid(), getppid()};
        (void)!write(p[1], info, sizeof info);
        _exit(0);
    }
    pid_t info[2];
    CHECK(read(p[0], info, sizeof info) == sizeof info);
    CHECK(info[0] == pid && info[1] == me && pid != me);
    CHECK(reap(pid) == 0);

    /* 100 forks in a row, each child exiting with its index. */
    int ok = 1;
    for (int i = 0; i < 100; i++) {
        pid = fork();
        if (pid == 0) _exit(i);
        if (pid < 0 || reap(pid) != i) ok = 0;
    }
    CHECK(ok);
    /* And 20 at once, reaped in any order. */
    pid_t kids[20];
    for (int i = 0; i < 20; i++) {
        kids[i] = fork();
        if (kids[i] == 0) _exit(100 + i);
    }
    int seen = 0;
    for (int i = 0; i < 20; i++) {
        int st;
        pid_t w = wait(&st);
        for (int j = 0; j < 20; j++)
            if (kids[j] == w && WIFEXITED(st) && WEXITSTATUS(st) == 100 + j) seen++;
    }
    CHECK(seen == 20);
    CHECK_ERR(wait(NULL), ECHILD);
    return done();
}
