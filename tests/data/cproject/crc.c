#include "crc.h"
#include "crc_table.h"

unsigned int crc32_of(const void *data, size_t len) {
    const unsigned char *p = data;
    unsigned int c = 0xFFFFFFFFu;
    while (len--)
        c = crc_table[(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}
