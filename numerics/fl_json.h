/* fl_json.h — JSON strings from arbitrary bytes (paths, user arguments).
 *
 * jansson's json_string() returns NULL for a string that is not valid UTF-8, and
 * json_object_set_new(obj, key, NULL) then drops the key without a word: a run folder with a Latin-1
 * name lost "run" from `attribute --json`.  fl_json_string never returns NULL for a non-NULL string.
 *
 * The rule: s is read left to right; each well-formed UTF-8 sequence (RFC 3629: shortest form, no
 * surrogates, at most U+10FFFF) is kept as it is, and each byte that does not start one is replaced
 * by U+FFFD (the replacement character, EF BF BD), one per byte.  Valid UTF-8 comes out unchanged;
 * anything else comes out valid UTF-8, one U+FFFD where each bad byte was.  Lossy by design: the
 * output stays valid JSON that every reader takes, and the key stays.
 */
#ifndef FL_JSON_H
#define FL_JSON_H

#include <stddef.h>

struct json_t;

/* A new JSON string of s under the rule above (json_null() for s == NULL; NULL only when out of
   memory). */
struct json_t *fl_json_string(const char *s);

/* Well-formed UTF-8 sequence at s (n bytes available): its length 1..4, or 0 when s[0] does not
   start one. */
size_t fl_utf8_seq_len(const unsigned char *s, size_t n);

#endif /* FL_JSON_H */
