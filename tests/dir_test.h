/* dir_test.h — a test's scratch folder: made fresh, its files read back as text or as JSON, removed at
 * the end.  Include after check.h. */
#ifndef FL_DIR_TEST_H
#define FL_DIR_TEST_H

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* A path (or any short string) from printf-style arguments, in one of 8 rotating 1024-byte buffers: valid
   for the arguments of one call (8 at the most). */
static const char *P(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *P(const char *fmt, ...)
{
    static char b[8][1024];
    static int k;
    char *r = b[k++ & 7];
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(r, sizeof b[0], fmt, ap);
    va_end(ap);
    CHECK(n > 0 && (size_t)n < sizeof b[0], "path too long");
    return r;
}

/* dir (len bytes) = a fresh folder named after tmpl, which ends in XXXXXX (mkdtemp). */
static void dir_make(char *dir, size_t len, const char *tmpl)
{
    snprintf(dir, len, "%s", tmpl);
    CHECK(mkdtemp(dir), "mkdtemp %s", tmpl);
}

/* The text of dir/name, NUL-terminated in a static buffer (64 KiB at most; the next call reuses it). */
static char *dir_slurp(const char *dir, const char *name)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "rb");
    CHECK(f, "cannot read %s", p);
    static char buf[1 << 16];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* dir/name parsed as JSON (the caller owns it). */
static json_t *dir_json(const char *dir, const char *name)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    json_error_t je;
    json_t *o = json_load_file(p, 0, &je);
    CHECK(o, "%s is not JSON: %s", p, je.text);
    return o;
}

/* rm -rf dir */
static void dir_remove(const char *dir)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "%s", cmd);
}

#endif /* FL_DIR_TEST_H */
