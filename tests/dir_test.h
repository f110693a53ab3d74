/* dir_test.h — a test's scratch folder: made fresh, its files read back as text or as JSON, removed at
 * the end.  Include after check.h. */
#ifndef FL_DIR_TEST_H
#define FL_DIR_TEST_H

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

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
