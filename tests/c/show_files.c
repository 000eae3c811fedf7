/* Prints, for each path argument, the first line of the file it leads to,
 * or why it could not be read: what a path inside the sandbox reaches. */
#include <fcntl.h>
#include <unistd.h>

#include "t.h"

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        int fd = open(argv[i], O_RDONLY);
        if (fd < 0) {
            printf("%s: %s\n", argv[i], strerror(errno));
            continue;
        }
        char buf[128] = {0};
        long n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n < 0) {
            printf("%s: read: %s\n", argv[i], strerror(errno));
            continue;
        }
        buf[strcspn(buf, "\n")] = 0;
        printf("%s: %s\n", argv[i], n == 0 ? "(empty)" : buf);
    }
    return 0;
}
