#ifndef STORE_H
#define STORE_H
#include <stddef.h>

/* Writes `len` bytes to `path` through a temporary file renamed over it;
 * returns 0, or -1 with errno set. */
int store_file(const char *path, const char *data, size_t len);

/* Reads all of `path` into a new buffer; returns it (free it) and its
 * length in *len, or NULL with errno set. */
char *load_file(const char *path, size_t *len);

#endif
