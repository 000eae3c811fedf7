#ifndef CRC_H
#define CRC_H
#include <stddef.h>

unsigned int crc32_of(const void *data, size_t len);

#endif
