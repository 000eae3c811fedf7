/* /proc/PID/mem: a process's memory at the file offset. pread, pwrite
 * and lseek+read at an address; EIO for an unmapped one, a short count
 * for a read that runs into one; writes into read-only private memory
 * (program text and constants) land on a private copy, as a debugger's
 * do; another process's memory with ptrace's access rule (a process that
 * gave up its ids may not open its parent's). */
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

static char data[64] = "the data of the program";
static const char constant[32] = "a constant string";
static volatile int flag;

static int open_mem(pid_t pid, int flags) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
    return open(path, flags);
}

static void own_memory(void) {
    int fd = open_mem(getpid(), O_RDWR);
    CHECK(fd >= 0);
    char buf[64];
    CHECK(pread(fd, buf, 23, (off_t)(uintptr_t)data) == 23);
    CHECK(memcmp(buf, "the data of the program", 23) == 0);
    CHECK(pwrite(fd, "THE", 3, (off_t)(uintptr_t)data) == 3);
    CHECK(memcmp((const char *)data, "THE data", 8) == 0);
    CHECK(lseek(fd, (off_t)(uintptr_t)data + 4, SEEK_SET) == (off_t)(uintptr_t)data + 4);
    CHECK(read(fd, buf, 4) == 4 && memcmp(buf, "data", 4) == 0);
    CHECK(lseek(fd, 0, SEEK_CUR) == (off_t)(uintptr_t)data + 8);
    /* Read-only private memory takes a debugger's write. */
    CHECK(pwrite(fd, "A", 1, (off_t)(uintptr_t)constant) == 1);
    CHECK(((volatile const char *)constant)[0] == 'A');
    char *ro = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(ro != MAP_FAILED);
    CHECK(pwrite(fd, "xyz", 3, (off_t)(uintptr_t)ro + 100) == 3);
    CHECK(memcmp(ro + 100, "xyz", 3) == 0);
    /* Unmapped memory: EIO; a read running into it stops there. */
    char *two = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(two != MAP_FAILED);
    memset(two, 'q', 4096);
    CHECK_OK(munmap(two + 4096, 4096));
    errno = 0;
    CHECK(pread(fd, buf, 16, (off_t)(uintptr_t)(two + 4096)) == -1 && errno == EIO);
    errno = 0;
    CHECK(pwrite(fd, buf, 16, (off_t)(uintptr_t)(two + 4096)) == -1 && errno == EIO);
    CHECK(pread(fd, buf, 64, (off_t)(uintptr_t)(two + 4096 - 10)) == 10);
    CHECK(memcmp(buf, "qqqqqqqqqq", 10) == 0);
    CHECK(pread(fd, buf, 0, (off_t)(uintptr_t)(two + 4096)) == 0);
    CHECK(close(fd) == 0);
    /* Opened read-only: no writes. */
    fd = open_mem(getpid(), O_RDONLY);
    CHECK(fd >= 0);
    errno = 0;
    CHECK(pwrite(fd, "x", 1, (off_t)(uintptr_t)data) == -1 && errno == EBADF);
    close(fd);
    munmap(ro, 4096);
    munmap(two, 4096);
}

static void child_memory(void) {
    int go[2], ready[2];
    CHECK_OK(pipe(go));
    CHECK_OK(pipe(ready));
    pid_t pid = fork();
    if (pid == 0) {
        memcpy(data, "the child's data", 17);
        flag = 0;
        char c = 1;
        if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
            _exit(3);
        _exit(flag == 42 ? 0 : 1);
    }
    char c;
    CHECK(read(ready[0], &c, 1) == 1);
    int fd = open_mem(pid, O_RDWR);
    CHECK(fd >= 0);
    char buf[32] = {0};
    CHECK(pread(fd, buf, 17, (off_t)(uintptr_t)data) == 17);
    CHECK(strcmp(buf, "the child's data") == 0);
    int v = 42;
    CHECK(pwrite(fd, &v, sizeof v, (off_t)(uintptr_t)&flag) == sizeof v);
    CHECK(flag == 0);
    CHECK(write(go[1], &c, 1) == 1);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    close(fd);
    close(go[0]);
    close(go[1]);
    close(ready[0]);
    close(ready[1]);
}

/* A child that gave up root may not open its parent's memory. */
static void refused(void) {
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0)
            _exit(2);
        int fd = open_mem(parent, O_RDONLY);
        _exit(fd == -1 && errno == EACCES ? 0 : 1);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int main(void) {
    own_memory();
    child_memory();
    refused();
    return done();
}
