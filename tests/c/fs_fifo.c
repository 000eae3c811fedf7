/* Named pipes on a writable file system: a reader and a writer process
 * meeting through one, data larger than the pipe, end of file when the last
 * writer closes, EPIPE when the reader has gone. See work_dir.h for the
 * arguments. */
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "work_dir.h"

#define BIG (256 * 1024)

static unsigned char pattern(size_t i) {
    return (unsigned char)(i % 253);
}

static int wait_ok(pid_t pid) {
    int status;
    return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void meeting(void) {
    CHECK(mkfifo("f", 0644) == 0);
    /* The writer's open waits for a reader and the reader's for a writer: the
     * two blocking opens meet. The data is larger than a pipe holds, so the
     * writer also waits for the reader to drain it. */
    pid_t pid = fork();
    if (pid == 0) {
        static unsigned char out[BIG];
        for (size_t i = 0; i < BIG; i++)
            out[i] = pattern(i);
        int fd = open("f", O_WRONLY);
        if (fd < 0)
            _exit(1);
        size_t done_ = 0;
        while (done_ < BIG) {
            ssize_t n = write(fd, out + done_, BIG - done_);
            if (n <= 0)
                _exit(2);
            done_ += n;
        }
        _exit(close(fd) == 0 ? 0 : 3);
    }
    int fd = open("f", O_RDONLY);
    CHECK(fd >= 0);
    static unsigned char in[BIG + 1];
    size_t total = 0;
    ssize_t n;
    while ((n = read(fd, in + total, sizeof in - total)) > 0)
        total += n;
    CHECK(n == 0 && total == BIG);
    int same = 1;
    for (size_t i = 0; i < total; i++)
        same &= in[i] == pattern(i);
    CHECK(same);
    /* Still end of file after the writer is gone. */
    CHECK(wait_ok(pid));
    CHECK(read(fd, in, 1) == 0);
    close(fd);
    printf("fifo: a writer and a reader process meet, %d bytes pass, then end of file\n", BIG);
}

static void last_writer(void) {
    int rd = open("f", O_RDONLY | O_NONBLOCK);
    CHECK(rd >= 0);
    int wr = open("f", O_WRONLY);
    CHECK(wr >= 0);
    CHECK(fcntl(rd, F_SETFL, 0) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open("f", O_WRONLY);
        _exit(fd >= 0 && write(fd, "child", 5) == 5 ? 0 : 1);
    }
    char buf[16];
    CHECK(read(rd, buf, 5) == 5 && memcmp(buf, "child", 5) == 0);
    CHECK(wait_ok(pid));
    /* The parent still holds a writer: no end of file, just nothing yet. */
    CHECK(fcntl(rd, F_SETFL, O_NONBLOCK) == 0);
    CHECK_ERR(read(rd, buf, 1), EAGAIN);
    /* Data in the FIFO does not show as its size, nor can it seek. */
    CHECK(write(wr, "xyz", 3) == 3);
    struct stat st;
    CHECK(stat("f", &st) == 0 && S_ISFIFO(st.st_mode) && st.st_size == 0);
    CHECK_ERR(lseek(rd, 0, SEEK_SET), ESPIPE);
    CHECK(read(rd, buf, sizeof buf) == 3);
    close(wr);
    CHECK(read(rd, buf, 1) == 0);
    close(rd);
    printf("fifo: end of file only when the last writer closes\n");
}

static void reader_gone(void) {
    signal(SIGPIPE, SIG_IGN);
    int rd = open("f", O_RDONLY | O_NONBLOCK);
    int wr = open("f", O_WRONLY | O_NONBLOCK);
    CHECK(rd >= 0 && wr >= 0);
    close(rd);
    CHECK_ERR(write(wr, "x", 1), EPIPE);
    close(wr);
    /* A fresh reader and writer start empty: nothing was kept. */
    rd = open("f", O_RDONLY | O_NONBLOCK);
    char c;
    CHECK(read(rd, &c, 1) == 0);
    close(rd);
    /* Removing the name does not break descriptors already open. */
    rd = open("f", O_RDONLY | O_NONBLOCK);
    wr = open("f", O_WRONLY | O_NONBLOCK);
    CHECK(unlink("f") == 0);
    CHECK(write(wr, "k", 1) == 1 && read(rd, &c, 1) == 1 && c == 'k');
    close(rd);
    close(wr);
    printf("fifo: EPIPE without a reader; nothing kept between openings; works after unlink\n");
}

int main(int argc, char **argv) {
    enter_work_dir(argc, argv);
    meeting();
    last_writer();
    reader_gone();
    return done();
}
