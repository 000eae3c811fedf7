/* Writes a text to a file next to it, reads it back, and prints its
 * counts and CRC-32; `prog FILE` uses FILE instead of ./text.out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc.h"
#include "store.h"
#include "words.h"

#define GREETING "hello from a multi-file build"

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "text.out";
    char text[8192];
    size_t len = 0;
    for (int i = 1; i <= 100; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, "line %d: %s\n", i, GREETING);
    if (store_file(path, text, len) != 0) {
        perror("store_file");
        return 1;
    }
    size_t got;
    char *back = load_file(path, &got);
    if (!back) {
        perror("load_file");
        return 1;
    }
    if (got != len || memcmp(back, text, len) != 0) {
        fprintf(stderr, "read back %zu bytes that differ from the %zu written\n", got, len);
        return 1;
    }
    struct counts c = count_text(back, got);
    printf("%s\n", GREETING);
    printf("lines %zu words %zu bytes %zu\n", c.lines, c.words, c.bytes);
    printf("crc32 %08x\n", crc32_of(back, got));
    printf("crc32(\"123456789\") %08x\n", crc32_of("123456789", 9));
    free(back);
    return 0;
}
