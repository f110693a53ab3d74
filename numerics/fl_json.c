/* fl_json.c — see fl_json.h. */
#include "fl_json.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

size_t fl_utf8_seq_len(const unsigned char *s, size_t n)
{
    if (!n)
        return 0;
    const unsigned c = s[0];
    if (c < 0x80)
        return 1;
    /* the second byte's range depends on the first (Unicode Table 3-7): it excludes overlong forms
       (E0 80..9F, F0 80..8F), the surrogates (ED A0..BF) and code points above U+10FFFF (F4 90..) */
    size_t len;
    unsigned lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        lo = c == 0xe0 ? 0xa0 : 0x80;
        hi = c == 0xed ? 0x9f : 0xbf;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        lo = c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xf4 ? 0x8f : 0xbf;
    } else
        return 0; /* 80..C1 (a continuation byte, or an overlong 2-byte lead), F5..FF */
    if (n < len || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t k = 2; k < len; k++)
        if (s[k] < 0x80 || s[k] > 0xbf)
            return 0;
    return len;
}

json_t *fl_json_string(const char *s)
{
    if (!s)
        return json_null();
    const size_t n = strlen(s);
    const unsigned char *u = (const unsigned char *)s;
    size_t bad = 0;
    for (size_t i = 0; i < n;) {
        const size_t k = fl_utf8_seq_len(u + i, n - i);
        bad += !k;
        i += k ? k : 1;
    }
    if (!bad)
        return json_stringn(s, n);
    char *t = malloc(n + 2 * bad + 1); /* each bad byte becomes 3 */
    if (!t)
        return NULL;
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        const size_t k = fl_utf8_seq_len(u + i, n - i);
        if (k) {
            memcpy(t + w, s + i, k);
            w += k;
            i += k;
        } else {
            memcpy(t + w, "\xef\xbf\xbd", 3); /* U+FFFD */
            w += 3;
            i++;
        }
    }
    json_t *j = json_stringn(t, w);
    free(t);
    return j;
}
