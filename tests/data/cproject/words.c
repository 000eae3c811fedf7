#include "words.h"

#include <ctype.h>

struct counts count_text(const char *text, size_t len) {
    struct counts c = {0, 0, len};
    int in_word = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)text[i];
        if (ch == '\n')
            c.lines++;
        if (isspace(ch)) {
            in_word = 0;
        } else if (!in_word) {
            in_word = 1;
            c.words++;
        }
    }
    return c;
}
