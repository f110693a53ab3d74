/* test_fl_json.c — JSON strings from arbitrary bytes (numerics/fl_json.h).
 *
 *  1. fl_utf8_seq_len agrees with jansson's own UTF-8 check (json_stringn succeeds) on every 1- and
 *     2-byte string, every 3-byte string with a lead byte E0..F4, and every 4-byte string with a lead
 *     F0..F4, any second byte, and third and fourth bytes at the continuation range's edges
 *     (7F 80 BF C0); and fl_json_string gives a string on each: the input itself when valid.
 *  2. The replacement rule on named cases: one U+FFFD per bad byte (a lone FF, an overlong C0 80, a
 *     surrogate ED A0 80, F4 90 80 80 above U+10FFFF, a cut E2 82), valid 3- and 4-byte sequences
 *     kept, NULL giving JSON null.
 */
#include "check.h"
#include "fl_json.h"

#include <jansson.h>
#include <string.h>

/* s (n bytes) decomposes into well-formed sequences. */
static int valid(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        const size_t k = fl_utf8_seq_len(s + i, n - i);
        if (!k)
            return 0;
        i += k;
    }
    return 1;
}

static long nstr;

static void one(const unsigned char *s, size_t n)
{
    json_t *j = json_stringn((const char *)s, n);
    const int v = valid(s, n);
    CHECK(v == (j != NULL), "fl_utf8_seq_len says %svalid, jansson %s: %02x %02x %02x %02x (n %zu)", v ? "" : "in",
          j ? "valid" : "invalid", s[0], n > 1 ? s[1] : 0, n > 2 ? s[2] : 0, n > 3 ? s[3] : 0, n);
    json_decref(j);
    if (!memchr(s, 0, n)) { /* a C string */
        char c[5] = { 0 };
        memcpy(c, s, n);
        json_t *r = fl_json_string(c);
        CHECK(r && json_is_string(r), "fl_json_string: no string for %02x %02x %02x %02x", s[0], s[1], s[2], s[3]);
        CHECK(!v || (json_string_length(r) == n && !memcmp(json_string_value(r), c, n)), "fl_json_string changed valid %02x %02x %02x %02x",
              s[0], s[1], s[2], s[3]);
        json_decref(r);
    }
    nstr++;
}

static void check_enumerated(void)
{
    unsigned char s[4] = { 0 };
    for (unsigned a = 0; a < 256; a++) {
        s[0] = (unsigned char)a;
        one(s, 1);
        for (unsigned b = 0; b < 256; b++) {
            s[1] = (unsigned char)b;
            one(s, 2);
            if (a >= 0xe0 && a <= 0xf4)
                for (unsigned c = 0; c < 256; c++) {
                    s[2] = (unsigned char)c;
                    one(s, 3);
                }
            static const unsigned char edge[4] = { 0x7f, 0x80, 0xbf, 0xc0 };
            if (a >= 0xf0 && a <= 0xf4)
                for (int c = 0; c < 4; c++)
                    for (int d = 0; d < 4; d++) {
                        s[2] = edge[c];
                        s[3] = edge[d];
                        one(s, 4);
                    }
            s[2] = s[3] = 0;
        }
    }
}

static void check_rule(void)
{
    static const struct {
        const char *in, *out;
    } t[] = {
        { "r\xff x", "r\xef\xbf\xbd x" },
        { "\xc0\x80", "\xef\xbf\xbd\xef\xbf\xbd" },
        { "a\xed\xa0\x80", "a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
        { "\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
        { "\xe2\x82", "\xef\xbf\xbd\xef\xbf\xbd" },
        { "\xe2\x82\xac \xf0\x9f\x98\x80", "\xe2\x82\xac \xf0\x9f\x98\x80" },
        { "\xf4\x8f\xbf\xbf\xe2\x82\xac\xff", "\xf4\x8f\xbf\xbf\xe2\x82\xac\xef\xbf\xbd" },
    };
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++) {
        json_t *j = fl_json_string(t[k].in);
        CHECK(j && !strcmp(json_string_value(j), t[k].out), "case %zu: got '%s'", k, j ? json_string_value(j) : "NULL");
        json_t *o = json_object();
        CHECK(json_object_set_new(o, "run", j) == 0 && json_object_get(o, "run"), "case %zu: the key is dropped", k);
        json_decref(o);
    }
    json_t *n = fl_json_string(NULL);
    CHECK(json_is_null(n), "NULL is not JSON null");
    json_decref(n);
}

int main(void)
{
    check_enumerated();
    check_rule();
    printf("%ld strings enumerated\n", nstr);
    PASS("test_fl_json");
}
