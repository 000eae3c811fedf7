/* process_vm_readv and process_vm_writev between processes: scattered
 * buffers on both sides, transfers cut short by a remote page that is not
 * mapped (what was moved is the answer) or failing at once (EFAULT), a
 * read-only remote page refusing writes, and the errors: EINVAL for flags
 * and too many buffers, ESRCH for no such process, EPERM for another
 * user's process. */
#include <stdint.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

/* What the child shares with the parent before the fork: the addresses
 * are the same in both. */
static char buffer[3 * 4096] = "the child's buffer";
static char *window;   /* two pages, the second one inaccessible */
static char *readonly; /* one read-only page */

int main(void) {
    window = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(window != MAP_FAILED);
    CHECK_OK(mprotect(window + 4096, 4096, PROT_NONE));
    memset(window, 'w', 4096);
    readonly = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(readonly != MAP_FAILED);

    int to_child[2], to_parent[2];
    CHECK_OK(pipe(to_child));
    CHECK_OK(pipe(to_parent));
    pid_t pid = fork();
    if (pid == 0) {
        /* Changes its copy, then waits until the parent has written. */
        strcpy(buffer, "changed by the child");
        memset(buffer + 5000, 'c', 100);
        char c = 1;
        if (write(to_parent[1], &c, 1) != 1) _exit(1);
        if (read(to_child[0], &c, 1) != 1) _exit(2);
        _exit(strcmp(buffer + 8000, "written by the parent") == 0 ? 0 : 3);
    }
    char c;
    CHECK(read(to_parent[0], &c, 1) == 1);

    /* Scattered on both sides. */
    char a[8] = {0}, b[40] = {0};
    struct iovec local[2] = {{a, 7}, {b, 13}};
    struct iovec remote[2] = {{buffer, 10}, {buffer + 10, 10}};
    CHECK(process_vm_readv(pid, local, 2, remote, 2, 0) == 20);
    CHECK(memcmp(a, "changed", 7) == 0 && memcmp(b, " by the child", 13) == 0);
    /* The local side may be shorter: the transfer stops there. */
    char one[4];
    struct iovec small = {one, 4};
    CHECK(process_vm_readv(pid, &small, 1, remote, 2, 0) == 4);
    CHECK(memcmp(one, "chan", 4) == 0);
    /* The whole buffer, across page boundaries of both sides. */
    static char whole[sizeof buffer];
    struct iovec big = {whole, sizeof whole};
    struct iovec there = {buffer, sizeof buffer};
    CHECK(process_vm_readv(pid, &big, 1, &there, 1, 0) == (ssize_t)sizeof buffer);
    CHECK(strcmp(whole, "changed by the child") == 0);
    CHECK(whole[4999] == 0 && whole[5000] == 'c' && whole[5099] == 'c' && whole[5100] == 0);

    /* A remote page that cannot be read ends the transfer: what came
     * before it is the answer, or EFAULT if nothing did. */
    char w[8192];
    struct iovec lw = {w, sizeof w};
    struct iovec rw = {window + 4000, 200};
    CHECK(process_vm_readv(pid, &lw, 1, &rw, 1, 0) == 96);
    struct iovec pair[2] = {{window, 10}, {window + 4096, 10}};
    CHECK(process_vm_readv(pid, &lw, 1, pair, 2, 0) == 10);
    struct iovec gone = {window + 4096, 10};
    CHECK_ERR(process_vm_readv(pid, &lw, 1, &gone, 1, 0), EFAULT);
    struct iovec bad_local = {(void *)8, 10};
    CHECK_ERR(process_vm_readv(pid, &bad_local, 1, remote, 1, 0), EFAULT);
    struct iovec ro = {readonly, 10};
    CHECK_ERR(process_vm_writev(pid, &lw, 1, &ro, 1, 0), EFAULT);
    /* Nothing asked: nothing moved, whatever the remote side says. */
    struct iovec none = {a, 0};
    CHECK(process_vm_readv(pid, &none, 1, &gone, 1, 0) == 0);

    CHECK_ERR(process_vm_readv(pid, local, 2, remote, 2, 1), EINVAL);
    CHECK_ERR(process_vm_readv(pid, local, 1025, remote, 2, 0), EINVAL);
    CHECK_ERR(process_vm_readv(pid, local, 2, remote, 1025, 0), EINVAL);
    CHECK_ERR(process_vm_readv(pid, local, 2, (void *)8, 2, 0), EFAULT);
    CHECK_ERR(process_vm_readv(-1, local, 2, remote, 2, 0), ESRCH);

    /* Writing. */
    const char *msg = "written by the parent";
    struct iovec out = {(void *)msg, strlen(msg) + 1};
    struct iovec dest = {buffer + 8000, strlen(msg) + 1};
    CHECK(process_vm_writev(pid, &out, 1, &dest, 1, 0) == (ssize_t)strlen(msg) + 1);
    /* The parent's own copy is its own. */
    CHECK(strcmp(buffer, "the child's buffer") == 0 && buffer[8000] == 0);
    CHECK(write(to_child[1], &c, 1) == 1);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* Reaped: no such process. */
    CHECK_ERR(process_vm_readv(pid, local, 2, remote, 2, 0), ESRCH);

    /* Another user's process is out of reach. */
    pid_t parent = getpid();
    pid = fork();
    if (pid == 0) {
        if (geteuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(1);
        if (geteuid() != 0) {
            char x[4];
            struct iovec l = {x, 4}, r = {buffer, 4};
            if (process_vm_readv(parent, &l, 1, &r, 1, 0) != -1 || errno != EPERM) _exit(2);
            /* Its own memory is always in reach. */
            if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) != 4 || memcmp(x, "the ", 4) != 0) _exit(3);
        }
        _exit(0);
    }
    CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return done();
}
