/* test_npy.c — the .npy reader and writer (numerics/npy.c) against files crafted byte by byte.
 *
 * Round trips: every dtype, both byte orders (and '|' for 1-byte types), versions 1.0/2.0/3.0,
 * 0-d, empty and multi-d shapes, fortran_order True and False; the bytes fl_npy_write produces are
 * compared with an image built here independently.  Tolerance of header spellings NumPy (or a
 * person) may produce.  Every malformed case the reader must reject, each checked for a nonzero
 * return, a message that starts with the file's path and contains a specific phrase, and no data
 * handed back.  Writes that fail (missing or read-only directory, target is a directory, file size
 * limit hit half way, bad arrays) leave nothing at path and no temporary behind, and leave an
 * existing file untouched.  The streaming reader and writer with chunk sizes that do not divide the
 * count, on both sides of their 1 MiB buffer, on a regular file and on a FIFO.
 *
 * Everything is written under a fresh mkdtemp directory in /tmp, removed at the end.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "npy.h"

/* ---------------------------------------------------------------- scaffolding */

static char g_dir[] = "/tmp/test_npy.XXXXXX";

/* g_dir/name, in one of 8 rotating buffers so a few can be live at once. */
static const char *P(const char *name)
{
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
    return buf[k];
}

typedef struct {
    unsigned char *p;
    size_t n, cap;
} bytes;

static void b_put(bytes *b, const void *src, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n)
            cap *= 2;
        b->p = realloc(b->p, cap);
        CHECK(b->p, "out of memory growing a byte image to %zu", cap);
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, src, n);
    b->n += n;
}

static void b_byte(bytes *b, unsigned v)
{
    unsigned char c = (unsigned char)v;
    b_put(b, &c, 1);
}

static void b_str(bytes *b, const char *s) { b_put(b, s, strlen(s)); }

static void b_fill(bytes *b, int c, size_t n)
{
    for (size_t i = 0; i < n; i++)
        b_byte(b, (unsigned)c);
}

static void b_free(bytes *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

/* Magic, version and a little-endian length field (2 bytes for major 1, else 4). */
static void b_prefix(bytes *b, int major, int minor, uint32_t hlen)
{
    b_put(b, "\x93NUMPY", 6);
    b_byte(b, (unsigned)major);
    b_byte(b, (unsigned)minor);
    b_byte(b, hlen & 0xff);
    b_byte(b, (hlen >> 8) & 0xff);
    if (major != 1) {
        b_byte(b, (hlen >> 16) & 0xff);
        b_byte(b, hlen >> 24);
    }
}

/* A well-framed header as NumPy writes it: dict, spaces up to a 64-byte boundary, '\n'. */
static void b_header(bytes *b, int major, int minor, const char *dict)
{
    const size_t prefix = major == 1 ? 10 : 12, dl = strlen(dict);
    const size_t hlen = (prefix + dl + 1 + 63) / 64 * 64 - prefix;
    b_prefix(b, major, minor, (uint32_t)hlen);
    b_str(b, dict);
    b_fill(b, ' ', hlen - dl - 1);
    b_byte(b, '\n');
}

static void write_file(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f, "cannot create %s: %s", path, strerror(errno));
    CHECK((n == 0 || fwrite(p, 1, n, f) == n) && fclose(f) == 0, "cannot write %s", path);
}

static bytes slurp(const char *path)
{
    bytes b = {0};
    FILE *f = fopen(path, "rb");
    CHECK(f, "cannot open %s: %s", path, strerror(errno));
    unsigned char tmp[65536];
    size_t got;
    while ((got = fread(tmp, 1, sizeof tmp, f)) > 0)
        b_put(&b, tmp, got);
    fclose(f);
    return b;
}

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* Entries of dir whose name contains sub (all entries for sub == NULL). */
static int count_entries(const char *dir, const char *sub)
{
    DIR *d = opendir(dir);
    CHECK(d, "cannot list %s: %s", dir, strerror(errno));
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (!sub || strstr(e->d_name, sub))
            n++;
    }
    closedir(d);
    return n;
}

static void check_no_temps(const char *dir, const char *what)
{
    CHECK(count_entries(dir, ".tmp.") == 0, "%s: a temporary file was left in %s", what, dir);
}

/* An error message names the file first, is one line, and says what is wrong. */
static void check_err(const char *err, const char *path, const char *phrase, const char *what)
{
    const size_t pl = strlen(path);
    CHECK(strncmp(err, path, pl) == 0 && err[pl] == ':', "%s: message does not start with \"%s:\": "
          "\"%s\"", what, path, err);
    CHECK(strstr(err, phrase) != NULL, "%s: message lacks \"%s\": \"%s\"", what, phrase, err);
    CHECK(strchr(err, '\n') == NULL, "%s: message is not one line: \"%s\"", what, err);
}

/* Element i of a test array: a 64-bit pattern cut to the element width (NaN payloads, negative
 * integers and subnormals all occur; they are moved as bits). */
static uint64_t pattern(size_t i, unsigned salt)
{
    uint64_t x = (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull + salt * 0xD1B54A32D192ED03ull;
    return x ^ (x >> 29);
}

static void put_native(void *dst, size_t i, size_t esize, uint64_t v)
{
    unsigned char *p = (unsigned char *)dst + i * esize;
    switch (esize) {
    case 1: { uint8_t u = (uint8_t)v; memcpy(p, &u, 1); break; }
    case 2: { uint16_t u = (uint16_t)v; memcpy(p, &u, 2); break; }
    case 4: { uint32_t u = (uint32_t)v; memcpy(p, &u, 4); break; }
    default: { memcpy(p, &v, 8); break; }
    }
}

/* Appends v as esize bytes in the given order ('>' big-endian, anything else little-endian). */
static void b_elem(bytes *b, uint64_t v, size_t esize, char order)
{
    for (size_t k = 0; k < esize; k++)
        b_byte(b, (unsigned)(v >> (8 * (order == '>' ? esize - 1 - k : k))) & 0xff);
}

static const char dt_kind[FL_DT_COUNT] = {'f', 'f', 'f', 'u', 'u', 'u', 'i', 'i'};

/* ---------------------------------------------------------------- dtype tables */

static void test_dtypes(void)
{
    static const char *const names[FL_DT_COUNT] = {"float16", "float32", "float64", "uint8",
                                                   "uint16",  "uint32",  "int32",   "int64"};
    static const size_t sizes[FL_DT_COUNT] = {2, 4, 8, 1, 2, 4, 4, 8};
    for (int t = 0; t < FL_DT_COUNT; t++) {
        CHECK(!strcmp(fl_dtype_name((fl_dtype)t), names[t]), "fl_dtype_name(%d) = %s want %s", t,
              fl_dtype_name((fl_dtype)t), names[t]);
        CHECK(fl_dtype_size((fl_dtype)t) == sizes[t], "fl_dtype_size(%d) = %zu want %zu", t,
              fl_dtype_size((fl_dtype)t), sizes[t]);
    }
    CHECK(!strcmp(fl_dtype_name(FL_DT_COUNT), "invalid"), "fl_dtype_name(FL_DT_COUNT)");
    CHECK(fl_dtype_size(FL_DT_COUNT) == 0, "fl_dtype_size(FL_DT_COUNT)");
}

/* ---------------------------------------------------------------- round trips */

typedef struct {
    int ndim;
    int64_t shape[3];
    size_t count;
    const char *text; /* as NumPy writes it */
} shape_case;

static const shape_case shapes[] = {
    {0, {0}, 1, "()"},
    {1, {0}, 0, "(0,)"},
    {1, {7}, 7, "(7,)"},
    {2, {3, 5}, 15, "(3, 5)"},
    {3, {2, 0, 4}, 0, "(2, 0, 4)"},
    {3, {2, 3, 4}, 24, "(2, 3, 4)"},
};

static void check_array(const fl_array *a, fl_dtype t, const shape_case *s, int fortran,
                        const void *want, const char *what)
{
    CHECK(a->dtype == t, "%s: dtype %d want %d", what, a->dtype, t);
    CHECK(a->ndim == s->ndim, "%s: ndim %d want %d", what, a->ndim, s->ndim);
    for (int i = 0; i < s->ndim; i++)
        CHECK(a->shape[i] == s->shape[i], "%s: shape[%d] %lld want %lld", what, i,
              (long long)a->shape[i], (long long)s->shape[i]);
    CHECK(a->count == s->count, "%s: count %zu want %zu", what, a->count, s->count);
    CHECK(a->fortran_order == fortran, "%s: fortran_order %d want %d", what, a->fortran_order,
          fortran);
    CHECK(a->data != NULL, "%s: data is NULL after a successful read", what);
    const size_t es = fl_dtype_size(t);
    for (size_t i = 0; i < s->count; i++)
        CHECK(!memcmp((const char *)a->data + i * es, (const char *)want + i * es, es),
              "%s: element %zu differs", what, i);
}

static void test_round_trips(void)
{
    int cases = 0;
    for (int t = 0; t < FL_DT_COUNT; t++) {
        const size_t es = fl_dtype_size((fl_dtype)t);
        const char *orders = es == 1 ? "<>|" : "<>";
        for (const char *o = orders; *o; o++) {
            for (int major = 1; major <= 3; major++) {
                for (size_t si = 0; si < FL_ARRAY_LEN(shapes); si++) {
                    for (int fortran = 0; fortran <= 1; fortran++) {
                        const shape_case *s = &shapes[si];
                        char what[160], dict[160];
                        snprintf(what, sizeof what, "round trip %c%c%zu v%d.0 shape %s fortran %d",
                                 *o, dt_kind[t], es, major, s->text, fortran);
                        const unsigned salt = (unsigned)(t * 1000 + cases);
                        unsigned char *want = malloc(s->count * es + 1);
                        bytes img = {0}, expect = {0};
                        snprintf(dict, sizeof dict, "{'descr': '%c%c%zu', 'fortran_order': %s, "
                                 "'shape': %s, }", *o, dt_kind[t], es, fortran ? "True" : "False",
                                 s->text);
                        b_header(&img, major, 0, dict);
                        /* What fl_npy_write must produce: version 1.0, little-endian descr. */
                        snprintf(dict, sizeof dict, "{'descr': '%c%c%zu', 'fortran_order': %s, "
                                 "'shape': %s, }", es == 1 ? '|' : '<', dt_kind[t], es,
                                 fortran ? "True" : "False", s->text);
                        b_header(&expect, 1, 0, dict);
                        for (size_t i = 0; i < s->count; i++) {
                            const uint64_t v = pattern(i, salt);
                            put_native(want, i, es, v);
                            b_elem(&img, v, es, *o);
                            b_elem(&expect, v, es, '<');
                        }
                        const char *in = P("rt_in.npy"), *out = P("rt_out.npy");
                        write_file(in, img.p, img.n);

                        fl_array a;
                        char err[512] = "";
                        CHECK(fl_npy_read(&a, in, err, sizeof err) == 0, "%s: read: %s", what, err);
                        check_array(&a, (fl_dtype)t, s, fortran, want, what);

                        /* Streaming, 2 elements at a time (does not divide 7, 15 or 1). */
                        fl_array h;
                        fl_npy_reader *r = fl_npy_reader_open(in, &h, err, sizeof err);
                        CHECK(r, "%s: reader_open: %s", what, err);
                        CHECK(h.data == NULL && h.count == s->count && h.dtype == (fl_dtype)t &&
                              h.fortran_order == fortran, "%s: reader header", what);
                        unsigned char *got = malloc(s->count * es + 16);
                        size_t n = 0;
                        long long k;
                        while ((k = fl_npy_reader_read(r, got + n * es, 2, err, sizeof err)) > 0)
                            n += (size_t)k;
                        CHECK(k == 0 && n == s->count, "%s: streamed %zu of %zu (%s)", what, n,
                              s->count, err);
                        CHECK(n == 0 || !memcmp(got, want, n * es), "%s: streamed data differ", what);
                        fl_npy_reader_close(r);
                        free(got);

                        CHECK(fl_npy_write(out, &a, err, sizeof err) == 0, "%s: write: %s", what,
                              err);
                        bytes written = slurp(out);
                        CHECK(written.n == expect.n && !memcmp(written.p, expect.p, expect.n),
                              "%s: written file differs from the expected image (%zu vs %zu bytes)",
                              what, written.n, expect.n);
                        CHECK((10 + (size_t)written.p[8] + 256 * (size_t)written.p[9]) % 64 == 0,
                              "%s: data do not start on a 64-byte boundary", what);
                        fl_array b;
                        CHECK(fl_npy_read(&b, out, err, sizeof err) == 0, "%s: reread: %s", what,
                              err);
                        check_array(&b, (fl_dtype)t, s, fortran, want, what);

                        fl_array_free(&a);
                        fl_array_free(&b);
                        CHECK(a.data == NULL, "fl_array_free leaves data set");
                        fl_array_free(&a); /* harmless twice */
                        b_free(&img);
                        b_free(&expect);
                        b_free(&written);
                        free(want);
                        cases++;
                    }
                }
            }
        }
    }
    CHECK(cases == (7 * 2 + 1 * 3) * 3 * (int)FL_ARRAY_LEN(shapes) * 2, "ran %d round trips", cases);
    fl_array_free(NULL);
    CHECK(count_entries(g_dir, NULL) == 2, "round trips left %d files", count_entries(g_dir, NULL));
    unlink(P("rt_in.npy"));
    unlink(P("rt_out.npy"));
}

/* ---------------------------------------------------------------- header spellings */

/* dict must parse to shape (2, 3) of int32 (or of what want_* say), with 6 elements of data. */
static void expect_parse(const char *dict, int major, fl_dtype want_t, int want_ndim,
                         const int64_t *want_shape, int want_fortran)
{
    const char *path = P("spelling.npy");
    const size_t es = fl_dtype_size(want_t);
    size_t count = 1;
    for (int i = 0; i < want_ndim; i++)
        count *= (size_t)want_shape[i];
    bytes img = {0};
    b_header(&img, major, 0, dict);
    b_fill(&img, 0x5a, count * es);
    write_file(path, img.p, img.n);
    fl_array a;
    char err[512] = "";
    CHECK(fl_npy_read(&a, path, err, sizeof err) == 0, "header %s rejected: %s", dict, err);
    CHECK(a.dtype == want_t && a.ndim == want_ndim && a.count == count &&
          a.fortran_order == want_fortran, "header %s: dtype %d ndim %d count %zu fortran %d", dict,
          a.dtype, a.ndim, a.count, a.fortran_order);
    for (int i = 0; i < want_ndim; i++)
        CHECK(a.shape[i] == want_shape[i], "header %s: shape[%d] = %lld", dict, i,
              (long long)a.shape[i]);
    fl_array_free(&a);
    b_free(&img);
    unlink(path);
}

static void test_spellings(void)
{
    static const int64_t s23[] = {2, 3}, s5[] = {5};
    static const char *const ok23[] = {
        "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }",
        "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3)}",
        "{'shape': (2, 3), 'fortran_order': False, 'descr': '<i4'}",
        "{'fortran_order': False, 'shape': (2,3), 'descr': '<i4', }",
        "{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (2, 3)}",
        "  {  'descr'  :  '<i4'  ,\t'fortran_order':False,'shape':( 2 , 3 , ) , }  ",
        "{'descr': '<i4',\n 'fortran_order': False,\n 'shape': (2, 3)}",
        "{'descr': '<i4', 'fortran_order': False, 'shape': (2L, 3L), }", /* Python 2 longs */
        "{u'descr': u'<i4', u'fortran_order': False, u'shape': (2, 3), }",
        "{'descr': '<i4', 'fortran_order': False, 'shape': (+2, 3), }",
    };
    for (size_t i = 0; i < FL_ARRAY_LEN(ok23); i++)
        for (int major = 1; major <= 3; major++)
            expect_parse(ok23[i], major, FL_DT_I32, 2, s23, 0);
    expect_parse("{'descr': '<f8', 'fortran_order': True, 'shape': (5,)}", 1, FL_DT_F64, 1, s5, 1);
    expect_parse("{'descr': '=u2', 'fortran_order': False, 'shape': (5,)}", 1, FL_DT_U16, 1, s5, 0);
    expect_parse("{'descr': '<u1', 'fortran_order': False, 'shape': (5,)}", 1, FL_DT_U8, 1, s5, 0);
    expect_parse("{'descr': '>u1', 'fortran_order': False, 'shape': (5,)}", 1, FL_DT_U8, 1, s5, 0);
    expect_parse("{'descr': '<f4', 'fortran_order': False, 'shape': (-0, 5)}", 1, FL_DT_F32, 2,
                 (const int64_t[]){0, 5}, 0);

    /* Exactly FL_NPY_MAXDIM dimensions is fine. */
    char dict[512];
    int64_t ones[FL_NPY_MAXDIM];
    size_t n = (size_t)snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    for (int i = 0; i < FL_NPY_MAXDIM; i++) {
        n += (size_t)snprintf(dict + n, sizeof dict - n, "1, ");
        ones[i] = 1;
    }
    snprintf(dict + n, sizeof dict - n, "), }");
    expect_parse(dict, 1, FL_DT_F32, FL_NPY_MAXDIM, ones, 0);

    /* A version 2.0 header longer than version 1.0 can describe (32-bit length field), and a
     * version 1.0 header aligned to 16 bytes only, as NumPy < 1.9 wrote them. */
    const char *path = P("long_header.npy");
    const char *d = "{'descr': '>i8', 'fortran_order': False, 'shape': (3,), }";
    bytes img = {0};
    const uint32_t hlen = 70000;
    b_prefix(&img, 2, 0, hlen);
    b_str(&img, d);
    b_fill(&img, ' ', hlen - strlen(d) - 1);
    b_byte(&img, '\n');
    for (int i = 0; i < 3; i++)
        b_elem(&img, (uint64_t)-(int64_t)(i + 1), 8, '>');
    write_file(path, img.p, img.n);
    fl_array a;
    char err[512] = "";
    CHECK(fl_npy_read(&a, path, err, sizeof err) == 0, "70000-byte v2.0 header: %s", err);
    CHECK(a.dtype == FL_DT_I64 && a.count == 3 && ((int64_t *)a.data)[0] == -1 &&
          ((int64_t *)a.data)[2] == -3, "70000-byte v2.0 header: wrong contents");
    fl_array_free(&a);
    b_free(&img);

    d = "{'descr': '<u2', 'fortran_order': False, 'shape': (2,), }";
    b_prefix(&img, 1, 0, 70);
    b_str(&img, d);
    b_fill(&img, ' ', 70 - strlen(d) - 1);
    b_byte(&img, '\n');
    b_elem(&img, 0xbeef, 2, '<');
    b_elem(&img, 0x1234, 2, '<');
    write_file(path, img.p, img.n);
    CHECK(fl_npy_read(&a, path, err, sizeof err) == 0, "16-byte aligned v1.0 header: %s", err);
    CHECK(((uint16_t *)a.data)[0] == 0xbeef && ((uint16_t *)a.data)[1] == 0x1234,
          "16-byte aligned v1.0 header: wrong contents");
    fl_array_free(&a);
    b_free(&img);
    unlink(path);
}

/* ---------------------------------------------------------------- malformed files */

/* img must be rejected by fl_npy_read and fl_npy_reader_open with a message containing phrase. */
static void expect_reject_image(const char *name, const bytes *img, const char *phrase)
{
    const char *path = P(name);
    write_file(path, img->p, img->n);
    fl_array a;
    char err[512] = "";
    memset(&a, 0xab, sizeof a);
    CHECK(fl_npy_read(&a, path, err, sizeof err) != 0, "%s: fl_npy_read accepted it", name);
    CHECK(a.data == NULL && a.count == 0, "%s: a failed read left data behind", name);
    check_err(err, path, phrase, name);
    err[0] = '\0';
    fl_npy_reader *r = fl_npy_reader_open(path, &a, err, sizeof err);
    CHECK(r == NULL, "%s: fl_npy_reader_open accepted it", name);
    check_err(err, path, phrase, name);
    unlink(path);
}

/* A well-framed version 1.0 header around dict, followed by ndata zero bytes. */
static void expect_reject_dict(const char *name, const char *dict, size_t ndata, const char *phrase)
{
    bytes img = {0};
    b_header(&img, 1, 0, dict);
    b_fill(&img, 0, ndata);
    expect_reject_image(name, &img, phrase);
    b_free(&img);
}

#define DICT(descr, shape) "{'descr': '" descr "', 'fortran_order': False, 'shape': " shape ", }"

static void test_malformed(void)
{
    bytes img = {0};
    char err[512];
    fl_array a;

    /* Magic. */
    expect_reject_image("empty.npy", &img, "bad magic");
    b_put(&img, "\x93NUM", 4);
    expect_reject_image("short_magic.npy", &img, "bad magic");
    b_free(&img);
    b_put(&img, "\x93NUMPZ\x01\x00\x10\x00", 10);
    b_fill(&img, ' ', 64);
    expect_reject_image("wrong_magic.npy", &img, "bad magic");
    b_free(&img);
    b_put(&img, "PK\x03\x04\x14\x00\x00\x00", 8); /* an .npz (zip) is not an .npy */
    b_fill(&img, 0, 100);
    expect_reject_image("zip.npy", &img, "bad magic");
    b_free(&img);

    /* Framing. */
    b_put(&img, "\x93NUMPY\x01", 7);
    expect_reject_image("no_minor.npy", &img, "truncated header");
    b_free(&img);
    b_put(&img, "\x93NUMPY\x01\x00\x40", 9);
    expect_reject_image("short_len1.npy", &img, "truncated header");
    b_free(&img);
    b_put(&img, "\x93NUMPY\x02\x00\x40\x00\x00", 11);
    expect_reject_image("short_len2.npy", &img, "truncated header");
    b_free(&img);

    static const int bad_versions[][2] = {{0, 0}, {1, 1}, {2, 1}, {3, 5}, {4, 0}, {255, 0}};
    for (size_t i = 0; i < FL_ARRAY_LEN(bad_versions); i++) {
        b_header(&img, bad_versions[i][0], bad_versions[i][1], DICT("<f4", "(1,)"));
        b_fill(&img, 0, 4);
        char phrase[64];
        snprintf(phrase, sizeof phrase, "unsupported version %d.%d", bad_versions[i][0],
                 bad_versions[i][1]);
        expect_reject_image("version.npy", &img, phrase);
        b_free(&img);
    }

    b_prefix(&img, 1, 0, 1000);
    b_str(&img, DICT("<f4", "(1,)"));
    expect_reject_image("hlen_beyond1.npy", &img, "header length 1000 extends beyond end of file");
    b_free(&img);
    b_prefix(&img, 2, 0, 0xfffffff0u);
    b_str(&img, DICT("<f4", "(1,)"));
    expect_reject_image("hlen_beyond2.npy", &img, "extends beyond end of file");
    b_free(&img);
    b_prefix(&img, 3, 0, (2u << 20) + 64); /* in the file, but beyond any plausible header */
    b_fill(&img, ' ', (2u << 20) + 63);
    b_byte(&img, '\n');
    expect_reject_image("hlen_huge.npy", &img, "exceeds the limit");
    b_free(&img);

    const char *d = DICT("<f4", "(1,)");
    b_prefix(&img, 1, 0, (uint32_t)strlen(d) + 2);
    b_str(&img, d);
    b_str(&img, "  "); /* padded but no '\n' */
    b_fill(&img, 0, 4);
    expect_reject_image("no_newline.npy", &img, "not terminated by '\\n'");
    b_free(&img);
    b_prefix(&img, 1, 0, 0);
    expect_reject_image("zero_hlen.npy", &img, "not terminated");
    b_free(&img);

    /* The dict. */
    static const struct {
        const char *name, *dict, *phrase;
    } bad_dicts[] = {
        {"blank", "", "malformed header"},
        {"list", "['descr', '<f4']", "malformed header"},
        {"no_colon", "{'descr' '<f4', 'fortran_order': False, 'shape': (1,)}", "malformed header"},
        {"no_close", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), ", "malformed header"},
        {"no_comma", "{'descr': '<f4' 'fortran_order': False, 'shape': (1,)}", "malformed header"},
        {"unterminated", "{'descr: '<f4', 'fortran_order': False, 'shape': (1,)}",
         "malformed header"},
        {"bare_key", "{descr: '<f4', 'fortran_order': False, 'shape': (1,)}", "malformed header"},
        {"after_brace", DICT("<f4", "(1,)") " x", "after the closing '}'"},
        {"two_dicts", DICT("<f4", "(1,)") "{}", "after the closing '}'"},
        {"shape_int", DICT("<f4", "(1)"), "not a tuple"},
        {"shape_list", DICT("<f4", "[1]"), "not a list"},
        {"shape_bare", DICT("<f4", "1"), "must be a tuple"},
        {"shape_space", DICT("<f4", "(1 1)"), "malformed header"},
        {"shape_commas", DICT("<f4", "(1,,1)"), "malformed header"},
        {"shape_open", "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1}", "malformed"},
        {"extra_key", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1}",
         "unexpected key 'x'"},
        {"dup_key", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'descr': '<f4'}",
         "duplicate key 'descr'"},
        {"no_descr", "{'fortran_order': False, 'shape': (1,)}", "missing key 'descr'"},
        {"no_fortran", "{'descr': '<f4', 'shape': (1,)}", "missing key 'fortran_order'"},
        {"no_shape", "{'descr': '<f4', 'fortran_order': False}", "missing key 'shape'"},
        {"empty_dict", "{}", "missing key"},
        {"fortran_str", "{'descr': '<f4', 'fortran_order': 'False', 'shape': (1,)}",
         "fortran_order must be True or False"},
        {"fortran_int", "{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}",
         "fortran_order must be True or False"},
        {"fortran_lower", "{'descr': '<f4', 'fortran_order': true, 'shape': (1,)}",
         "fortran_order must be True or False"},
        {"neg_dim", DICT("<f4", "(-1,)"), "negative dimension -1"},
        {"neg_dim2", DICT("<f4", "(2, -3)"), "negative dimension -3"},
        {"float_dim", DICT("<f4", "(2.5,)"), "non-integer dimension 2.5 in shape"},
        {"exp_dim", DICT("<f4", "(1e3,)"), "non-integer dimension"},
        {"str_dim", DICT("<f4", "('a',)"), "non-integer dimension 'a' in shape"},
        {"none_dim", DICT("<f4", "(None,)"), "non-integer dimension"},
        {"bool_dim", DICT("<f4", "(True,)"), "non-integer dimension"},
        {"tuple_dim", DICT("<f4", "((2,),)"), "non-integer dimension"},
        {"sign_dim", DICT("<f4", "(-,)"), "non-integer dimension"},
        {"huge_dim", DICT("<f4", "(99999999999999999999,)"), "overflows int64"},
        {"int64_max_u1", DICT("|u1", "(9223372036854775807,)"), "overflow"},
        {"count_ovf", DICT("<f4", "(4294967296, 4294967296)"),
         "shape (4294967296, 4294967296) overflows: its element count"},
        {"count_ovf3", DICT("|u1", "(2097152, 2097152, 2097152)"), "overflow"},
        {"bytes_ovf", DICT("<f8", "(2305843009213693952,)"),
         "shape (2305843009213693952,) overflows: its size in bytes"},
        {"empty_ovf", DICT("<f4", "(0, 4294967296, 4294967296)"), "overflow"},
        {"dt_int8", DICT("|i1", "(1,)"), "unsupported dtype '|i1' (int8"},
        {"dt_int16", DICT("<i2", "(1,)"), "unsupported dtype '<i2'"},
        {"dt_uint64", DICT("<u8", "(1,)"), "unsupported dtype '<u8'"},
        {"dt_c8", DICT("<c8", "(1,)"), "unsupported dtype '<c8' (complex"},
        {"dt_c16", DICT(">c16", "(1,)"), "unsupported dtype '>c16'"},
        {"dt_obj", DICT("|O", "(1,)"), "unsupported dtype '|O' (object"},
        {"dt_unicode", DICT("<U5", "(1,)"), "unsupported dtype '<U5'"},
        {"dt_bytes", DICT("|S3", "(1,)"), "unsupported dtype '|S3'"},
        {"dt_bool", DICT("|b1", "(1,)"), "unsupported dtype '|b1'"},
        {"dt_void", DICT("|V8", "(1,)"), "unsupported dtype '|V8'"},
        {"dt_datetime", DICT("<M8[ns]", "(1,)"), "unsupported dtype '<M8[ns]'"},
        {"dt_f16", DICT("<f16", "(1,)"), "unsupported dtype '<f16'"},
        {"dt_f3", DICT("<f3", "(1,)"), "unsupported dtype '<f3'"},
        {"dt_empty", DICT("", "(1,)"), "unsupported dtype ''"},
        {"dt_name", DICT("float32", "(1,)"), "unsupported dtype 'float32'"},
        {"dt_struct", "{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, "
                      "'shape': (1,), }", "unsupported dtype '[('a', '<f4'), ('b', '<i4')]'"},
        {"dt_tuple", "{'descr': ('<f4', (2,)), 'fortran_order': False, 'shape': (1,), }",
         "unsupported dtype"},
        {"dt_bare", "{'descr': float32, 'fortran_order': False, 'shape': (1,), }",
         "unsupported dtype"},
    };
    for (size_t i = 0; i < FL_ARRAY_LEN(bad_dicts); i++) {
        char name[64];
        snprintf(name, sizeof name, "%s.npy", bad_dicts[i].name);
        expect_reject_dict(name, bad_dicts[i].dict, 64, bad_dicts[i].phrase);
    }

    /* More than FL_NPY_MAXDIM dimensions. */
    char dict[512];
    size_t n = (size_t)snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    for (int i = 0; i <= FL_NPY_MAXDIM; i++)
        n += (size_t)snprintf(dict + n, sizeof dict - n, "1, ");
    snprintf(dict + n, sizeof dict - n, "), }");
    expect_reject_dict("ndim33.npy", dict, 4, "more than 32 dimensions");
    /* 32 large dimensions: the overflow message quotes the shape, cut short. */
    n = (size_t)snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (");
    for (int i = 0; i < FL_NPY_MAXDIM; i++)
        n += (size_t)snprintf(dict + n, sizeof dict - n, "4294967296, ");
    snprintf(dict + n, sizeof dict - n, "), }");
    expect_reject_dict("ndim32_ovf.npy", dict, 4, "...) overflows");

    /* The data: too short, too long; exact wording of the truncation message. */
    expect_reject_dict("trunc.npy", DICT("<f4", "(2, 3)"), 10, "truncated data");
    expect_reject_dict("trunc0.npy", DICT("<f8", "()"), 0, "truncated data");
    expect_reject_dict("trunc_big.npy", DICT("<f4", "(1152921504606846976,)"), 100,
                       "truncated data: header promises 4611686018427387904 bytes, file has 100");
    b_header(&img, 1, 0, DICT(">f4", "(2, 3)"));
    b_fill(&img, 0, 10);
    write_file(P("x.npy"), img.p, img.n);
    b_free(&img);
    CHECK(fl_npy_read(&a, P("x.npy"), err, sizeof err) != 0, "truncated x.npy accepted");
    char want[600];
    snprintf(want, sizeof want, "%s: truncated data: header promises 24 bytes, file has 10", P("x.npy"));
    CHECK(!strcmp(err, want), "message \"%s\" want \"%s\"", err, want);
    unlink(P("x.npy"));
    expect_reject_dict("trailing.npy", DICT("<f4", "(2, 3)"), 29, "5 bytes of trailing data");
    expect_reject_dict("trailing_empty.npy", DICT("<f4", "(0,)"), 1, "1 bytes of trailing data");
    expect_reject_dict("trailing_0d.npy", DICT("|u1", "()"), 2, "1 bytes of trailing data");

    /* Not a file. */
    const char *missing = P("does_not_exist.npy");
    CHECK(fl_npy_read(&a, missing, err, sizeof err) != 0, "missing file accepted");
    check_err(err, missing, "No such file", "missing file");
    CHECK(mkdir(P("a_dir.npy"), 0755) == 0, "mkdir");
    CHECK(fl_npy_read(&a, P("a_dir.npy"), err, sizeof err) != 0, "directory accepted");
    check_err(err, P("a_dir.npy"), "is a directory", "directory");
    rmdir(P("a_dir.npy"));

    /* A NULL or zero-length err buffer is allowed. */
    CHECK(fl_npy_read(&a, missing, NULL, 0) != 0, "missing file accepted with err NULL");
    CHECK(count_entries(g_dir, NULL) == 0, "malformed tests left %d files", count_entries(g_dir, NULL));
}

/* ---------------------------------------------------------------- failing writes */

static fl_array small_array(size_t count)
{
    fl_array a;
    memset(&a, 0, sizeof a);
    a.dtype = FL_DT_F32;
    a.ndim = 1;
    a.shape[0] = (int64_t)count;
    a.count = count;
    a.data = malloc(count * 4 + 1);
    for (size_t i = 0; i < count; i++)
        put_native(a.data, i, 4, pattern(i, 7));
    return a;
}

/* Writes a, which must fail with phrase; afterwards path must hold exactly `before` (or not exist
 * when before is NULL) and no temporary may be left in dir. */
static void expect_write_fail(const char *path, const char *dir, const fl_array *a,
                              const bytes *before, const char *phrase, const char *what)
{
    char err[512] = "";
    CHECK(fl_npy_write(path, a, err, sizeof err) != 0, "%s: write succeeded", what);
    check_err(err, path, phrase, what);
    if (before) {
        bytes now = slurp(path);
        CHECK(now.n == before->n && !memcmp(now.p, before->p, now.n), "%s: existing file changed",
              what);
        b_free(&now);
    } else {
        CHECK(!exists(path), "%s: something was left at %s", what, path);
    }
    if (dir)
        check_no_temps(dir, what);
}

/* A read-only directory.  Root ignores permission bits, so as root the write is tried in a child
 * that has dropped to nobody (65534). */
static void test_readonly_dir(const fl_array *a)
{
    const char *ro = P("ro");
    const char *path = P("ro/out.npy");
    CHECK(mkdir(ro, 0555) == 0, "mkdir %s", ro);
    if (geteuid() != 0) {
        expect_write_fail(path, ro, a, NULL, "Permission denied", "read-only directory");
    } else {
        CHECK(chmod(g_dir, 0755) == 0, "chmod %s", g_dir);
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
            if (setgid(65534) != 0 || setuid(65534) != 0)
                _exit(FL_TEST_SKIP);
            char err[512] = "";
            if (fl_npy_write(path, a, err, sizeof err) == 0)
                _exit(2);
            _exit(strstr(err, path) && strstr(err, "Permission denied") ? 0 : 3);
        }
        int status = 0;
        CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
        CHECK(chmod(g_dir, 0700) == 0, "chmod %s", g_dir);
        CHECK(WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == FL_TEST_SKIP),
              "read-only directory (as nobody): child status 0x%x", status);
        if (WEXITSTATUS(status) == FL_TEST_SKIP)
            printf("note: could not drop to uid 65534; read-only directory case not run\n");
    }
    CHECK(count_entries(ro, NULL) == 0, "read-only directory: %d entries left", count_entries(ro, NULL));
    CHECK(rmdir(ro) == 0, "rmdir %s", ro);
}

static void test_failing_writes(void)
{
    fl_array a = small_array(100);
    char err[512];

    /* The directory does not exist; a path component is a file. */
    expect_write_fail(P("no_such_dir/out.npy"), NULL, &a, NULL, "No such file", "missing directory");
    write_file(P("plain"), "x", 1);
    expect_write_fail(P("plain/out.npy"), NULL, &a, NULL, "Not a directory", "file as directory");
    unlink(P("plain"));
    test_readonly_dir(&a);

    /* The target is a directory: the temporary is written, the rename fails, the temporary goes. */
    const char *tdir = P("target_dir");
    CHECK(mkdir(tdir, 0755) == 0, "mkdir");
    CHECK(fl_npy_write(tdir, &a, err, sizeof err) != 0, "write onto a directory succeeded");
    check_err(err, tdir, "cannot rename", "target is a directory");
    check_no_temps(g_dir, "target is a directory");
    CHECK(count_entries(g_dir, NULL) == 1 && rmdir(tdir) == 0, "target directory was not left alone");

    /* Invalid arrays: nothing is created, an existing file is untouched. */
    const char *path = P("keep.npy");
    fl_array old = small_array(3);
    CHECK(fl_npy_write(path, &old, err, sizeof err) == 0, "write keep.npy: %s", err);
    bytes before = slurp(path);
    fl_array b = a;
    b.count = 99;
    expect_write_fail(path, g_dir, &b, &before, "does not match", "count mismatch");
    b = a;
    b.dtype = FL_DT_COUNT;
    expect_write_fail(path, g_dir, &b, &before, "invalid dtype", "invalid dtype");
    b = a;
    b.ndim = FL_NPY_MAXDIM + 1;
    expect_write_fail(path, g_dir, &b, &before, "ndim 33", "ndim 33");
    b = a;
    b.ndim = -1;
    expect_write_fail(path, g_dir, &b, &before, "ndim -1", "ndim -1");
    b = a;
    b.shape[0] = -100;
    expect_write_fail(path, g_dir, &b, &before, "negative dimension", "negative dimension");
    b = a;
    b.ndim = 2;
    b.shape[0] = b.shape[1] = (int64_t)1 << 32;
    expect_write_fail(path, g_dir, &b, &before, "overflow", "shape overflow");
    b = a;
    b.data = NULL;
    expect_write_fail(path, g_dir, &b, &before, "NULL", "NULL data");
    CHECK(fl_npy_write(path, NULL, err, sizeof err) != 0, "NULL array written");
    check_err(err, path, "no array", "NULL array");

    /* The file size limit is hit half way through (write(2) fails with EFBIG): the existing file
     * survives, the temporary goes.  Once through the direct path, once through the buffer. */
    struct rlimit old_lim, lim;
    CHECK(getrlimit(RLIMIT_FSIZE, &old_lim) == 0, "getrlimit");
    void (*old_sig)(int) = signal(SIGXFSZ, SIG_IGN);
    lim = old_lim;
    lim.rlim_cur = 64 * 1024;
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0, "setrlimit");
    fl_array big = small_array(1 << 20); /* 4 MiB */
    expect_write_fail(path, g_dir, &big, &before, "File too large", "file size limit (direct)");
    fl_npy_writer *w = fl_npy_writer_open(path, &big, err, sizeof err);
    CHECK(w, "writer_open: %s", err);
    int failed = 0;
    for (size_t i = 0; i < big.count && !failed; i += 1000) {
        size_t k = big.count - i < 1000 ? big.count - i : 1000;
        failed = fl_npy_writer_write(w, (float *)big.data + i, k, err, sizeof err) != 0;
    }
    if (!failed)
        CHECK(fl_npy_writer_commit(w, err, sizeof err) != 0, "commit past the file size limit");
    else
        CHECK(fl_npy_writer_commit(w, err, sizeof err) != 0, "commit after a failed write");
    CHECK(setrlimit(RLIMIT_FSIZE, &old_lim) == 0, "setrlimit restore");
    signal(SIGXFSZ, old_sig);
    bytes now = slurp(path);
    CHECK(now.n == before.n && !memcmp(now.p, before.p, now.n), "file size limit (buffered): "
          "existing file changed");
    check_no_temps(g_dir, "file size limit (buffered)");
    b_free(&now);

    /* Modes: a new file gets 0666 & ~umask, a replaced file keeps its mode. */
    mode_t old_mask = umask(022);
    unlink(path);
    CHECK(fl_npy_write(path, &old, err, sizeof err) == 0, "write: %s", err);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0644, "new file mode %o want 644",
          (unsigned)(st.st_mode & 0777));
    CHECK(chmod(path, 0600) == 0, "chmod");
    CHECK(fl_npy_write(path, &a, err, sizeof err) == 0, "overwrite: %s", err);
    CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "replaced file mode %o want 600",
          (unsigned)(st.st_mode & 0777));
    umask(old_mask);
    fl_array r;
    CHECK(fl_npy_read(&r, path, err, sizeof err) == 0 && r.count == 100 &&
          !memcmp(r.data, a.data, 400), "overwritten file does not hold the new array: %s", err);
    fl_array_free(&r);
    unlink(path);

    b_free(&before);
    fl_array_free(&a);
    fl_array_free(&old);
    fl_array_free(&big);
    CHECK(count_entries(g_dir, NULL) == 0, "failing writes left %d files", count_entries(g_dir, NULL));
}

/* ---------------------------------------------------------------- streaming */

/* N float32 elements, big-endian in the file, so every chunk is byte-swapped: 2.4 MB, more than
 * two reader buffers. */
#define STREAM_N 600001u

static void test_stream_reader(void)
{
    const char *path = P("stream.npy");
    bytes img = {0};
    b_header(&img, 1, 0, "{'descr': '>f4', 'fortran_order': True, 'shape': (600001,), }");
    float *want = malloc(STREAM_N * sizeof *want);
    for (size_t i = 0; i < STREAM_N; i++) {
        put_native(want, i, 4, pattern(i, 3));
        b_elem(&img, pattern(i, 3), 4, '>');
    }
    write_file(path, img.p, img.n);
    b_free(&img);

    /* Chunk sizes that do not divide 600001, below and above the 1 MiB buffer (262144 floats);
     * the last list mixes them so the buffer is part-used when a direct read starts. */
    static const size_t plans[][4] = {
        {1, 0}, {7, 0}, {1000, 0}, {262143, 0}, {262149, 0}, {STREAM_N + 5, 0}, {3, 300000, 11, 0},
    };
    float *got = malloc((STREAM_N + 8) * sizeof *got);
    char err[512] = "";
    for (size_t p = 0; p < FL_ARRAY_LEN(plans); p++) {
        fl_array h;
        fl_npy_reader *r = fl_npy_reader_open(path, &h, err, sizeof err);
        CHECK(r, "stream reader open: %s", err);
        CHECK(h.count == STREAM_N && h.dtype == FL_DT_F32 && h.ndim == 1 && h.fortran_order == 1 &&
              h.data == NULL, "stream reader header");
        size_t n = 0, calls = 0, k_i = 0;
        long long k;
        for (;;) {
            size_t chunk = plans[p][k_i];
            k_i = plans[p][k_i + 1] ? k_i + 1 : 0;
            k = fl_npy_reader_read(r, got + n, chunk, err, sizeof err);
            if (k <= 0)
                break;
            CHECK((size_t)k == (chunk < STREAM_N - n ? chunk : STREAM_N - n),
                  "plan %zu: read returned %lld for a chunk of %zu", p, k, chunk);
            n += (size_t)k;
            calls++;
        }
        CHECK(k == 0, "plan %zu: read failed after %zu elements: %s", p, n, err);
        CHECK(n == STREAM_N && !memcmp(got, want, STREAM_N * sizeof *got),
              "plan %zu: streamed %zu elements, data %s", p, n,
              n == STREAM_N ? "differ" : "incomplete");
        CHECK(fl_npy_reader_read(r, got, 10, err, sizeof err) == 0, "read after the end");
        CHECK(fl_npy_reader_read(r, got, 0, err, sizeof err) == 0, "read of 0 elements");
        fl_npy_reader_close(r);
    }
    fl_npy_reader_close(NULL);

    /* A read of 0 elements is not the end. */
    fl_array h;
    fl_npy_reader *r = fl_npy_reader_open(path, &h, err, sizeof err);
    CHECK(r && fl_npy_reader_read(r, got, 0, err, sizeof err) == 0 &&
          fl_npy_reader_read(r, got, 5, err, sizeof err) == 5, "read of 0 then 5 elements");
    fl_npy_reader_close(r);

    /* fl_npy_read agrees. */
    fl_array a;
    CHECK(fl_npy_read(&a, path, err, sizeof err) == 0 && a.count == STREAM_N &&
          !memcmp(a.data, want, STREAM_N * 4), "fl_npy_read of the stream file: %s", err);
    fl_array_free(&a);
    free(got);
    free(want);
    unlink(path);
}

/* A FIFO has no size, so truncation and trailing data are only found while reading: a child
 * writes img into it. */
static pid_t feed_fifo(const char *fifo, const bytes *img)
{
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        signal(SIGPIPE, SIG_DFL);
        int fd = open(fifo, O_WRONLY);
        size_t off = 0;
        while (fd >= 0 && off < img->n) {
            ssize_t w = write(fd, img->p + off, img->n - off);
            if (w <= 0)
                _exit(1);
            off += (size_t)w;
        }
        _exit(fd >= 0 ? 0 : 1);
    }
    return pid;
}

static void test_fifo(void)
{
    const char *fifo = P("fifo.npy");
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo: %s", strerror(errno));
    const size_t n = 300001; /* 1.2 MB of int32: crosses the reader buffer */
    char err[512] = "";
    for (int variant = 0; variant < 3; variant++) {
        bytes img = {0};
        b_header(&img, 3, 0, "{'descr': '>i4', 'fortran_order': False, 'shape': (300001,), }");
        for (size_t i = 0; i < n; i++)
            b_elem(&img, pattern(i, 9), 4, '>');
        if (variant == 1)
            img.n -= 6; /* truncated */
        if (variant == 2)
            b_fill(&img, 0xee, 7); /* trailing */
        pid_t pid = feed_fifo(fifo, &img);
        fl_array h;
        fl_npy_reader *r = fl_npy_reader_open(fifo, &h, err, sizeof err);
        CHECK(r, "fifo variant %d: open: %s", variant, err);
        int32_t *got = malloc(n * 4);
        size_t have = 0;
        long long k;
        while ((k = fl_npy_reader_read(r, got + have, 4099, err, sizeof err)) > 0)
            have += (size_t)k;
        if (variant == 0) {
            CHECK(k == 0 && have == n, "fifo: %zu of %zu elements (%s)", have, n, err);
            for (size_t i = 0; i < n; i++)
                CHECK((uint32_t)got[i] == (uint32_t)pattern(i, 9), "fifo: element %zu", i);
        } else if (variant == 1) {
            CHECK(k < 0, "fifo: truncated stream accepted");
            check_err(err, fifo, "truncated data: header promises 1200004 bytes, file has 1199998",
                      "fifo truncated");
        } else {
            /* The call that hands out the last element finds the trailing bytes and fails. */
            CHECK(k < 0 && have == n - n % 4099, "fifo: trailing data accepted");
            check_err(err, fifo, "7 bytes of trailing data", "fifo trailing");
        }
        CHECK(fl_npy_reader_read(r, got, 1, err, sizeof err) == (variant ? -1 : 0),
              "fifo variant %d: read after the end", variant);
        fl_npy_reader_close(r);
        int status;
        CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "fifo feeder failed");
        free(got);
        b_free(&img);
    }
    unlink(fifo);
}

static void test_stream_writer(void)
{
    const char *ref = P("ref.npy"), *path = P("streamed.npy");
    fl_array a;
    memset(&a, 0, sizeof a);
    a.dtype = FL_DT_U16;
    a.ndim = 2;
    a.shape[0] = 1201;
    a.shape[1] = 1001; /* 1202201 elements, 2.4 MB */
    a.count = 1201 * 1001;
    a.fortran_order = 1;
    a.data = malloc(a.count * 2);
    for (size_t i = 0; i < a.count; i++)
        put_native(a.data, i, 2, pattern(i, 5));
    char err[512] = "";
    CHECK(fl_npy_write(ref, &a, err, sizeof err) == 0, "write ref: %s", err);
    bytes want = slurp(ref);

    /* Chunk plans as for the reader: 524288 uint16 fill the 1 MiB buffer exactly. */
    static const size_t plans[][4] = {
        {1, 0}, {7, 0}, {524287, 0}, {524289, 0}, {5, 600000, 3, 0},
    };
    for (size_t p = 0; p < FL_ARRAY_LEN(plans); p++) {
        fl_array h = a;
        h.data = NULL;
        h.count = 12345; /* ignored by the streaming writer */
        unlink(path);
        fl_npy_writer *w = fl_npy_writer_open(path, &h, err, sizeof err);
        CHECK(w, "writer open: %s", err);
        CHECK(!exists(path), "plan %zu: %s exists before commit", p, path);
        size_t n = 0, k_i = 0;
        while (n < a.count) {
            size_t chunk = plans[p][k_i];
            k_i = plans[p][k_i + 1] ? k_i + 1 : 0;
            if (chunk > a.count - n)
                chunk = a.count - n;
            CHECK(fl_npy_writer_write(w, (uint16_t *)a.data + n, chunk, err, sizeof err) == 0,
                  "plan %zu: write: %s", p, err);
            n += chunk;
        }
        CHECK(fl_npy_writer_write(w, a.data, 0, err, sizeof err) == 0, "write of 0 elements");
        CHECK(fl_npy_writer_commit(w, err, sizeof err) == 0, "plan %zu: commit: %s", p, err);
        bytes got = slurp(path);
        CHECK(got.n == want.n && !memcmp(got.p, want.p, want.n),
              "plan %zu: streamed file differs from fl_npy_write's", p);
        b_free(&got);
        check_no_temps(g_dir, "streamed write");
    }

    /* Failures: too many elements; too few at commit; abort.  The committed file from the last
     * plan stays as it was each time, and no temporary survives. */
    fl_npy_writer *w = fl_npy_writer_open(path, &a, err, sizeof err);
    CHECK(w && fl_npy_writer_write(w, a.data, a.count - 1, err, sizeof err) == 0, "write");
    CHECK(fl_npy_writer_write(w, a.data, 2, err, sizeof err) != 0, "too many elements accepted");
    check_err(err, path, "too many elements", "too many elements");
    CHECK(fl_npy_writer_write(w, a.data, 1, err, sizeof err) != 0, "write after a failure");
    CHECK(fl_npy_writer_commit(w, err, sizeof err) != 0, "commit after a failed write");
    check_err(err, path, "earlier write failed", "commit after failure");
    check_no_temps(g_dir, "too many elements");

    w = fl_npy_writer_open(path, &a, err, sizeof err);
    CHECK(w && fl_npy_writer_write(w, a.data, 1000, err, sizeof err) == 0, "write");
    CHECK(count_entries(g_dir, ".tmp.") == 1, "the temporary is not beside the target");
    CHECK(fl_npy_writer_commit(w, err, sizeof err) != 0, "short commit accepted");
    check_err(err, path, "element count mismatch: wrote 1000 of the 1202201", "short commit");
    check_no_temps(g_dir, "short commit");

    w = fl_npy_writer_open(path, &a, err, sizeof err);
    CHECK(w && fl_npy_writer_write(w, a.data, a.count, err, sizeof err) == 0, "write");
    fl_npy_writer_abort(w);
    check_no_temps(g_dir, "abort");
    fl_npy_writer_abort(NULL);

    bytes got = slurp(path);
    CHECK(got.n == want.n && !memcmp(got.p, want.p, want.n), "failed streams changed %s", path);
    b_free(&got);
    unlink(path);

    /* A fresh target: after abort nothing exists at all. */
    w = fl_npy_writer_open(path, &a, err, sizeof err);
    CHECK(w && fl_npy_writer_write(w, a.data, 17, err, sizeof err) == 0, "write");
    fl_npy_writer_abort(w);
    CHECK(!exists(path), "abort left %s", path);
    w = fl_npy_writer_open(path, &a, err, sizeof err);
    CHECK(w, "open");
    CHECK(fl_npy_writer_commit(w, err, sizeof err) != 0, "commit of nothing accepted");
    CHECK(!exists(path), "failed commit left %s", path);

    /* 0-d and empty arrays stream too. */
    fl_array z;
    memset(&z, 0, sizeof z);
    z.dtype = FL_DT_F64;
    z.ndim = 1; /* (0,) */
    w = fl_npy_writer_open(path, &z, err, sizeof err);
    CHECK(w && fl_npy_writer_commit(w, err, sizeof err) == 0, "empty array: %s", err);
    fl_array r;
    CHECK(fl_npy_read(&r, path, err, sizeof err) == 0 && r.count == 0 && r.ndim == 1 && r.data,
          "empty array read back: %s", err);
    fl_array_free(&r);
    z.ndim = 0;
    const double x = -0x1.8p-1022;
    w = fl_npy_writer_open(path, &z, err, sizeof err);
    CHECK(w && fl_npy_writer_write(w, &x, 1, err, sizeof err) == 0 &&
          fl_npy_writer_commit(w, err, sizeof err) == 0, "0-d array: %s", err);
    CHECK(fl_npy_read(&r, path, err, sizeof err) == 0 && r.count == 1 && r.ndim == 0 &&
          !memcmp(r.data, &x, 8), "0-d array read back: %s", err);
    fl_array_free(&r);

    unlink(path);
    unlink(ref);
    b_free(&want);
    fl_array_free(&a);
    CHECK(count_entries(g_dir, NULL) == 0, "stream writer left %d files", count_entries(g_dir, NULL));
}

/* ---------------------------------------------------------------- main */

static int g_cleaned;

static int rm_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)type;
    (void)ftw;
    return remove(path);
}

/* On a failed CHECK too: remove the scratch directory. */
static void cleanup(void)
{
    if (g_cleaned)
        return;
    g_cleaned = 1;
    chmod(g_dir, 0700);
    nftw(g_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
    CHECK(mkdtemp(g_dir) != NULL, "mkdtemp %s: %s", g_dir, strerror(errno));
    atexit(cleanup);
    test_dtypes();
    test_round_trips();
    test_spellings();
    test_malformed();
    test_failing_writes();
    test_stream_reader();
    test_fifo();
    test_stream_writer();
    g_cleaned = 1;
    CHECK(count_entries(g_dir, NULL) == 0, "tests left %d entries", count_entries(g_dir, NULL));
    CHECK(rmdir(g_dir) == 0, "cannot remove %s: %s", g_dir, strerror(errno));
    PASS("test_npy");
}
