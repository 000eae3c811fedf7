#ifndef WORDS_H
#define WORDS_H
#include <stddef.h>

/* Counts of a text, as `wc` gives them. */
struct counts {
    size_t lines, words, bytes;
};

struct counts count_text(const char *text, size_t len);

#endif
