/* npy.c — the .npy reader and writer declared in npy.h.
 *
 * Layout of this file: dtype tables; error and I/O helpers; the header parser (a small recursive
 * reader for the Python literal NumPy writes); the streaming reader, on which fl_npy_read is built;
 * the streaming writer, on which fl_npy_write is built.
 */
#include "npy.h"
#include "fl_io.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---------------------------------------------------------------- dtypes */

static const char *const dtype_names[] = {
    "float16", "float32", "float64", "uint8", "uint16", "uint32", "int32", "int64",
};
static_assert(FL_ARRAY_LEN(dtype_names) == FL_DT_COUNT, "dtype_names must list every fl_dtype");

/* NumPy's kind character and item size: 'f' 4 is '<f4'. */
static const struct {
    char kind;
    unsigned char size;
} dtype_codes[] = {
    {'f', 2}, {'f', 4}, {'f', 8}, {'u', 1}, {'u', 2}, {'u', 4}, {'i', 4}, {'i', 8},
};
static_assert(FL_ARRAY_LEN(dtype_codes) == FL_DT_COUNT, "dtype_codes must list every fl_dtype");

const char *fl_dtype_name(fl_dtype t)
{
    return (unsigned)t < FL_DT_COUNT ? dtype_names[t] : "invalid";
}

size_t fl_dtype_size(fl_dtype t)
{
    return (unsigned)t < FL_DT_COUNT ? dtype_codes[t].size : 0;
}

/* ---------------------------------------------------------------- helpers */

#define MAGIC "\x93NUMPY"
#define MAGIC_LEN 6
#define IO_BUF (1u << 20)              /* reader and writer buffer: 1 MiB */
#define HEADER_MAX (1u << 20)          /* legitimate headers are < 1 KiB; refuse to allocate more */
#define IO_CHUNK_MAX ((size_t)1 << 30) /* largest single read(2)/write(2) */

/* Writes "<path>: <message>" into err (if any) and returns -1. */
static int fail(char *err, size_t errlen, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, const char *path, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return -1;
    int n = snprintf(err, errlen, "%s: ", path ? path : "(null)");
    if (n < 0)
        n = 0;
    if ((size_t)n < errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    /* One line: a path or header text containing a newline must not break it. */
    for (char *p = err; *p; p++)
        if (*p == '\n' || *p == '\r')
            *p = ' ';
    return -1;
}

static int host_is_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char b;
    memcpy(&b, &one, 1);
    return b == 1;
}

/* Reverses the bytes of each of n elements of size esize, in place; p need not be aligned. */
static void swap_bytes(void *p, size_t n, size_t esize)
{
    unsigned char *b = p;
    switch (esize) {
    case 2:
        for (size_t i = 0; i < n; i++, b += 2) {
            uint16_t v;
            memcpy(&v, b, 2);
            v = __builtin_bswap16(v);
            memcpy(b, &v, 2);
        }
        break;
    case 4:
        for (size_t i = 0; i < n; i++, b += 4) {
            uint32_t v;
            memcpy(&v, b, 4);
            v = __builtin_bswap32(v);
            memcpy(b, &v, 4);
        }
        break;
    case 8:
        for (size_t i = 0; i < n; i++, b += 8) {
            uint64_t v;
            memcpy(&v, b, 8);
            v = __builtin_bswap64(v);
            memcpy(b, &v, 8);
        }
        break;
    default: /* 1-byte elements have no byte order */
        break;
    }
}

/* Reads until n bytes or end of file.  Returns the bytes read, or -1 on an error (errno set). */
static long long read_full(int fd, void *buf, size_t n)
{
    unsigned char *p = buf;
    size_t got = 0;
    while (got < n) {
        size_t want = n - got < IO_CHUNK_MAX ? n - got : IO_CHUNK_MAX;
        ssize_t r = read(fd, p + got, want);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (long long)got;
}

/* Writes all n bytes.  Returns 0, or -1 on an error (errno set). */
static int write_full(int fd, const void *buf, size_t n)
{
    const unsigned char *p = buf;
    while (n > 0) {
        size_t want = n < IO_CHUNK_MAX ? n : IO_CHUNK_MAX;
        ssize_t w = write(fd, p, want);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (w == 0) { /* should not happen for a regular file; avoid spinning */
            errno = EIO;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* a * b into *out; returns 1 when the product exceeds limit. */
static int mul_overflows(uint64_t a, uint64_t b, uint64_t limit, uint64_t *out)
{
    if (a != 0 && b > limit / a)
        return 1;
    *out = a * b;
    return 0;
}

/* The largest data size we accept: it must fit size_t (to allocate it) and int64 (to compare
 * with off_t file sizes after adding the header). */
static uint64_t max_data_bytes(void)
{
    uint64_t lim = (uint64_t)INT64_MAX - (12 + (uint64_t)UINT32_MAX);
    if ((uint64_t)SIZE_MAX < lim)
        lim = (uint64_t)SIZE_MAX;
    return lim;
}

/* "(2, 3)" for messages, cut short with "...)" when it does not fit. */
static const char *shape_text(char *out, size_t outlen, const int64_t *shape, int ndim)
{
    size_t n = (size_t)snprintf(out, outlen, "(");
    for (int i = 0; i < ndim && n < outlen; i++)
        n += (size_t)snprintf(out + n, outlen - n, "%lld%s", (long long)shape[i],
                              ndim == 1 ? "," : i + 1 < ndim ? ", " : "");
    if (n + 1 < outlen)
        snprintf(out + n, outlen - n, ")");
    else if (outlen >= 5)
        memcpy(out + outlen - 5, "...)", 5);
    return out;
}

/* Checks a shape and computes its element count and byte size.  The product of the nonzero
 * dimensions times the element size must not overflow even when some dimension is 0 (NumPy
 * refuses such shapes too), so a file's shape is valid independently of its data.  Returns 0, or
 * -1 with err set. */
static int shape_size(const int64_t *shape, int ndim, size_t esize, size_t *count, uint64_t *nbytes,
                      const char *path, char *err, size_t errlen)
{
    const uint64_t lim = max_data_bytes();
    uint64_t prod = 1, bytes;
    int empty = 0;
    char text[160];
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return fail(err, errlen, path, "negative dimension %lld in shape", (long long)shape[i]);
        if (shape[i] == 0) {
            empty = 1;
            continue;
        }
        if (mul_overflows(prod, (uint64_t)shape[i], lim, &prod))
            return fail(err, errlen, path, "shape %s overflows: its element count does not fit "
                        "int64/size_t", shape_text(text, sizeof text, shape, ndim));
    }
    if (mul_overflows(prod, esize, lim, &bytes))
        return fail(err, errlen, path, "shape %s overflows: its size in bytes (%zu per element) "
                    "does not fit int64/size_t", shape_text(text, sizeof text, shape, ndim), esize);
    *count = empty ? 0 : (size_t)prod;
    *nbytes = empty ? 0 : bytes;
    return 0;
}

/* Copies at most cap bytes of s into out (size outlen) for an error message, replacing
 * non-printable bytes by '?' and marking a cut with "...". */
static const char *excerpt(char *out, size_t outlen, const char *s, size_t n)
{
    const size_t cap = outlen > 4 ? outlen - 4 : 0;
    size_t k = 0;
    for (; k < n && k < cap; k++)
        out[k] = (s[k] >= 0x20 && s[k] < 0x7f) ? s[k] : '?';
    if (k < n && outlen >= 4) {
        memcpy(out + k, "...", 3);
        k += 3;
    }
    out[k] = '\0';
    return out;
}

/* ---------------------------------------------------------------- header parser */

/* The parsed contents of a header dict. */
typedef struct {
    fl_dtype dtype;
    int swap;         /* data are in the non-native byte order */
    int fortran_order;
    int ndim;
    int64_t shape[FL_NPY_MAXDIM];
} npy_header;

typedef struct {
    const char *s;    /* header text, without the terminating '\n' */
    size_t n, i;      /* length and position */
    const char *path; /* for messages */
    char *err;
    size_t errlen;
} cursor;

static int is_space(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v';
}

static void skip_ws(cursor *c)
{
    while (c->i < c->n && is_space(c->s[c->i]))
        c->i++;
}

static int peek(const cursor *c)
{
    return c->i < c->n ? (unsigned char)c->s[c->i] : -1;
}

static int malformed(cursor *c, const char *what)
{
    return fail(c->err, c->errlen, c->path, "malformed header: %s at offset %zu", what, c->i);
}

/* A Python string literal ('...' or "...", optionally u-prefixed).  start and len receive the raw
 * contents between the quotes (escapes are skipped over, not decoded). */
static int parse_string(cursor *c, size_t *start, size_t *len)
{
    if ((peek(c) == 'u' || peek(c) == 'U') && c->i + 1 < c->n &&
        (c->s[c->i + 1] == '\'' || c->s[c->i + 1] == '"'))
        c->i++;
    int q = peek(c);
    if (q != '\'' && q != '"')
        return malformed(c, "expected a quoted string");
    size_t open = c->i++;
    *start = c->i;
    while (c->i < c->n && c->s[c->i] != q && c->s[c->i] != '\n') {
        if (c->s[c->i] == '\\')
            c->i++;
        c->i++;
    }
    if (c->i >= c->n || c->s[c->i] != q) {
        c->i = open;
        return malformed(c, "unterminated string");
    }
    *len = c->i - *start;
    c->i++;
    return 0;
}

/* Skips any Python literal (string, bracketed group, or bare token) and returns its span. */
static int skip_value(cursor *c, size_t *start, size_t *len)
{
    *start = c->i;
    int depth = 0;
    for (;;) {
        int ch = peek(c);
        if (ch < 0)
            break;
        if (ch == '\'' || ch == '"') {
            size_t s, l;
            if (parse_string(c, &s, &l))
                return -1;
        } else if (ch == '(' || ch == '[' || ch == '{') {
            depth++;
            c->i++;
        } else if (ch == ')' || ch == ']' || ch == '}') {
            if (depth == 0)
                break;
            depth--;
            c->i++;
        } else if (depth == 0 && (ch == ',' || ch == ':' || is_space((char)ch))) {
            break;
        } else {
            c->i++;
        }
        if (depth == 0 && (ch == '\'' || ch == '"' || ch == ')' || ch == ']' || ch == '}'))
            break;
    }
    if (depth != 0)
        return malformed(c, "unbalanced brackets");
    *len = c->i - *start;
    if (*len == 0)
        return malformed(c, "expected a value");
    return 0;
}

/* Explains why a NumPy type string is not one of ours. */
static const char *dtype_hint(char kind, unsigned size)
{
    switch (kind) {
    case 'i':
        return size == 1 ? " (int8 is not supported)" : " (supported integers: u1, u2, u4, i4, i8)";
    case 'u':
        return " (supported integers: u1, u2, u4, i4, i8)";
    case 'f':
        return " (supported floats: f2, f4, f8)";
    case 'c':
        return " (complex dtypes are not supported)";
    case 'b':
    case '?':
        return " (bool is not supported)";
    case 'O':
        return " (object arrays are not supported)";
    case 'U':
    case 'S':
    case 'a':
        return " (string dtypes are not supported)";
    case 'V':
        return " (void/structured dtypes are not supported)";
    case 'M':
    case 'm':
        return " (datetime dtypes are not supported)";
    default:
        return "";
    }
}

/* Maps a descr string such as '<f4' to a dtype and byte order. */
static int parse_descr(cursor *c, size_t start, size_t len, npy_header *h)
{
    const char *s = c->s + start;
    char shown[80];
    excerpt(shown, sizeof shown, s, len);
    char order = '=';
    size_t k = 0;
    if (len > 0 && (s[0] == '<' || s[0] == '>' || s[0] == '|' || s[0] == '='))
        order = s[k++];
    char kind = k < len ? s[k++] : '\0';
    unsigned size = 0;
    size_t digits = 0;
    while (k < len && s[k] >= '0' && s[k] <= '9' && digits < 4) {
        size = size * 10 + (unsigned)(s[k++] - '0');
        digits++;
    }
    if (k == len && digits > 0) {
        for (int t = 0; t < FL_DT_COUNT; t++) {
            if (dtype_codes[t].kind == kind && dtype_codes[t].size == size) {
                /* '|' (not applicable) and '=' (native) both mean native order. */
                int little = order == '<' || (order != '>' && host_is_little_endian());
                h->dtype = (fl_dtype)t;
                h->swap = size > 1 && little != host_is_little_endian();
                return 0;
            }
        }
    }
    return fail(c->err, c->errlen, c->path, "unsupported dtype '%s'%s", shown,
                digits > 0 ? dtype_hint(kind, size) : dtype_hint(kind, 0));
}

/* A shape tuple: (), (5,), (2, 3), (2, 3,).  Python 2's long suffix (3L) is accepted. */
static int parse_shape(cursor *c, npy_header *h)
{
    if (peek(c) == '[')
        return malformed(c, "shape must be a tuple, not a list");
    if (peek(c) != '(')
        return malformed(c, "shape must be a tuple");
    c->i++;
    skip_ws(c);
    h->ndim = 0;
    if (peek(c) == ')') {
        c->i++;
        return 0;
    }
    for (;;) {
        size_t start, len;
        char shown[48];
        skip_ws(c);
        if (skip_value(c, &start, &len))
            return -1;
        const char *s = c->s + start;
        size_t k = 0, end = len;
        int neg = 0;
        if (k < end && (s[k] == '-' || s[k] == '+'))
            neg = s[k++] == '-';
        if (end > k + 1 && (s[end - 1] == 'L' || s[end - 1] == 'l'))
            end--;
        if (k == end)
            return fail(c->err, c->errlen, c->path, "non-integer dimension %s in shape",
                        excerpt(shown, sizeof shown, s, len));
        uint64_t v = 0;
        for (size_t j = k; j < end; j++) {
            if (s[j] < '0' || s[j] > '9')
                return fail(c->err, c->errlen, c->path, "non-integer dimension %s in shape",
                            excerpt(shown, sizeof shown, s, len));
            if (v > ((uint64_t)INT64_MAX - (uint64_t)(s[j] - '0')) / 10)
                return fail(c->err, c->errlen, c->path, "dimension %s overflows int64",
                            excerpt(shown, sizeof shown, s, len));
            v = v * 10 + (uint64_t)(s[j] - '0');
        }
        if (neg && v != 0)
            return fail(c->err, c->errlen, c->path, "negative dimension %s in shape",
                        excerpt(shown, sizeof shown, s, len));
        if (h->ndim == FL_NPY_MAXDIM)
            return fail(c->err, c->errlen, c->path, "shape has more than %d dimensions",
                        FL_NPY_MAXDIM);
        h->shape[h->ndim++] = (int64_t)v;
        skip_ws(c);
        if (peek(c) == ',') {
            c->i++;
            skip_ws(c);
            if (peek(c) == ')') {
                c->i++;
                return 0;
            }
            continue;
        }
        if (peek(c) == ')') {
            if (h->ndim == 1)
                return malformed(c, "shape (n) is a number, not a tuple (write (n,))");
            c->i++;
            return 0;
        }
        return malformed(c, "expected ',' or ')' in shape");
    }
}

/* Parses the whole header text (the terminating '\n' already stripped). */
static int parse_header(const char *text, size_t n, const char *path, npy_header *h, char *err,
                        size_t errlen)
{
    cursor cur = {text, n, 0, path, err, errlen};
    cursor *c = &cur;
    int have_descr = 0, have_fortran = 0, have_shape = 0;

    memset(h, 0, sizeof *h);
    skip_ws(c);
    if (peek(c) != '{')
        return malformed(c, "expected '{'");
    c->i++;
    for (;;) {
        skip_ws(c);
        if (peek(c) == '}')
            break;
        size_t ks, kl;
        if (parse_string(c, &ks, &kl))
            return -1;
        const char *key = c->s + ks;
        skip_ws(c);
        if (peek(c) != ':')
            return malformed(c, "expected ':' after a key");
        c->i++;
        skip_ws(c);
        if (kl == 5 && !memcmp(key, "descr", 5)) {
            if (have_descr++)
                return fail(err, errlen, path, "malformed header: duplicate key 'descr'");
            size_t vs, vl;
            const int q = peek(c) == 'u' || peek(c) == 'U' ? (c->i + 1 < c->n ? c->s[c->i + 1] : 0)
                                                           : peek(c);
            if (q == '\'' || q == '"') {
                if (parse_string(c, &vs, &vl) || parse_descr(c, vs, vl, h))
                    return -1;
            } else {
                char shown[80];
                if (skip_value(c, &vs, &vl))
                    return -1;
                return fail(err, errlen, path, "unsupported dtype '%s'%s",
                            excerpt(shown, sizeof shown, c->s + vs, vl),
                            c->s[vs] == '[' || c->s[vs] == '('
                                ? " (structured and subarray dtypes are not supported)"
                                : " (descr must be a quoted type string such as '<f4')");
            }
        } else if (kl == 13 && !memcmp(key, "fortran_order", 13)) {
            if (have_fortran++)
                return fail(err, errlen, path, "malformed header: duplicate key 'fortran_order'");
            size_t vs, vl;
            char shown[48];
            if (skip_value(c, &vs, &vl))
                return -1;
            if (vl == 4 && !memcmp(c->s + vs, "True", 4))
                h->fortran_order = 1;
            else if (vl == 5 && !memcmp(c->s + vs, "False", 5))
                h->fortran_order = 0;
            else
                return fail(err, errlen, path, "fortran_order must be True or False, not '%s'",
                            excerpt(shown, sizeof shown, c->s + vs, vl));
        } else if (kl == 5 && !memcmp(key, "shape", 5)) {
            if (have_shape++)
                return fail(err, errlen, path, "malformed header: duplicate key 'shape'");
            if (parse_shape(c, h))
                return -1;
        } else {
            char shown[48];
            return fail(err, errlen, path, "malformed header: unexpected key '%s'",
                        excerpt(shown, sizeof shown, key, kl));
        }
        skip_ws(c);
        if (peek(c) == ',') {
            c->i++;
            continue;
        }
        if (peek(c) == '}')
            break;
        return malformed(c, "expected ',' or '}'");
    }
    c->i++; /* the '}' */
    skip_ws(c);
    if (c->i != c->n)
        return malformed(c, "unexpected text after the closing '}'");
    if (!have_descr)
        return fail(err, errlen, path, "malformed header: missing key 'descr'");
    if (!have_fortran)
        return fail(err, errlen, path, "malformed header: missing key 'fortran_order'");
    if (!have_shape)
        return fail(err, errlen, path, "malformed header: missing key 'shape'");
    return 0;
}

/* ---------------------------------------------------------------- streaming reader */

struct fl_npy_reader {
    int fd;
    char *path;
    size_t esize;
    int swap;
    size_t count;         /* elements in the file */
    size_t delivered;     /* elements handed out */
    uint64_t data_bytes;  /* count * esize */
    uint64_t file_pos;    /* data bytes read from fd so far */
    long long file_size;  /* -1 when fd is not a regular file */
    unsigned char *buf;   /* IO_BUF bytes, allocated on first use */
    size_t buf_pos, buf_len;
    int failed;
    int end_checked;
};

/* Opens path for reading: the descriptor, or -1 with err set.  *file_size is -1 when path is not a
 * regular file (a pipe). */
static int reader_open_fd(const char *path, long long *file_size, char *err, size_t errlen)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(err, errlen, path, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        fail(err, errlen, path, "cannot stat: %s", strerror(errno));
        close(fd);
        return -1;
    }
    if (S_ISDIR(st.st_mode)) {
        fail(err, errlen, path, "is a directory, not a .npy file");
        close(fd);
        return -1;
    }
    *file_size = S_ISREG(st.st_mode) ? (long long)st.st_size : -1;
    if (*file_size >= 0)
        posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return fd;
}

/* Magic, version and header length: the header's length into *hlen, the data's offset into
 * *data_off.  Returns 0, or -1 with err set. */
static int reader_preamble(int fd, long long file_size, uint32_t *hlen, uint64_t *data_off, const char *path,
                           char *err, size_t errlen)
{
    unsigned char pre[12];
    long long got = read_full(fd, pre, 8);
    if (got < 0)
        return fail(err, errlen, path, "read error: %s", strerror(errno));
    if (got < MAGIC_LEN || memcmp(pre, MAGIC, MAGIC_LEN) != 0) {
        if (got < MAGIC_LEN && memcmp(pre, MAGIC, (size_t)got) == 0)
            return fail(err, errlen, path, "bad magic: file is only %lld bytes long, not a .npy file", got);
        return fail(err, errlen, path, "bad magic: not a .npy file (expected \\x93NUMPY)");
    }
    if (got < 8)
        return fail(err, errlen, path, "truncated header: file ends inside the version bytes");
    const unsigned major = pre[6], minor = pre[7];
    if (!(minor == 0 && (major == 1 || major == 2 || major == 3)))
        return fail(err, errlen, path, "unsupported version %u.%u (known: 1.0, 2.0, 3.0)", major, minor);
    const size_t lenbytes = major == 1 ? 2 : 4;
    got = read_full(fd, pre + 8, lenbytes);
    if (got < 0)
        return fail(err, errlen, path, "read error: %s", strerror(errno));
    if ((size_t)got < lenbytes)
        return fail(err, errlen, path, "truncated header: file ends inside the header length field");
    uint32_t n = (uint32_t)pre[8] | (uint32_t)pre[9] << 8;
    if (lenbytes == 4)
        n |= (uint32_t)pre[10] << 16 | (uint32_t)pre[11] << 24;
    *data_off = 8 + lenbytes + (uint64_t)n;
    if (file_size >= 0 && *data_off > (uint64_t)file_size)
        return fail(err, errlen, path, "header length %u extends beyond end of file (file has %lld bytes)", n,
                    file_size);
    if (n > HEADER_MAX)
        return fail(err, errlen, path, "header length %u exceeds the limit of %u bytes", n, HEADER_MAX);
    *hlen = n;
    return 0;
}

/* The header text, hlen bytes ending in '\n', parsed into *h.  Returns 0, or -1 with err set. */
static int reader_header(int fd, uint32_t hlen, npy_header *h, const char *path, char *err, size_t errlen)
{
    char *text = malloc(hlen ? hlen : 1);
    if (!text)
        return fail(err, errlen, path, "out of memory for a %u-byte header", hlen);
    const long long got = read_full(fd, text, hlen);
    int rc;
    if (got < 0)
        rc = fail(err, errlen, path, "read error: %s", strerror(errno));
    else if (got < hlen)
        rc = fail(err, errlen, path, "header length %u extends beyond end of file", hlen);
    else if (hlen == 0 || text[hlen - 1] != '\n')
        rc = fail(err, errlen, path, "header not terminated by '\\n'");
    else
        rc = parse_header(text, hlen - 1, path, h, err, errlen) ? -1 : 0;
    free(text);
    return rc;
}

/* A regular file (file_size >= 0) holds exactly nbytes of data after data_off.  Returns 0, or -1 with
 * err set. */
static int reader_check_size(long long file_size, uint64_t data_off, uint64_t nbytes, const char *path, char *err,
                             size_t errlen)
{
    if (file_size < 0)
        return 0;
    const uint64_t have = (uint64_t)file_size - data_off;
    if (have < nbytes)
        return fail(err, errlen, path, "truncated data: header promises %llu bytes, file has %llu",
                    (unsigned long long)nbytes, (unsigned long long)have);
    if (have > nbytes)
        return fail(err, errlen, path, "%llu bytes of trailing data after the %llu bytes of array data",
                    (unsigned long long)(have - nbytes), (unsigned long long)nbytes);
    return 0;
}

fl_npy_reader *fl_npy_reader_open(const char *path, fl_array *hdr, char *err, size_t errlen)
{
    fl_npy_reader *r = NULL;
    fl_array unused;

    if (!hdr)
        hdr = &unused;
    memset(hdr, 0, sizeof *hdr);
    if (!path) {
        fail(err, errlen, path, "no path given");
        return NULL;
    }
    long long file_size;
    const int fd = reader_open_fd(path, &file_size, err, errlen);
    if (fd < 0)
        return NULL;
    uint32_t hlen = 0;
    uint64_t data_off = 0, nbytes = 0;
    npy_header h;
    size_t count = 0;
    if (reader_preamble(fd, file_size, &hlen, &data_off, path, err, errlen) ||
        reader_header(fd, hlen, &h, path, err, errlen) ||
        shape_size(h.shape, h.ndim, fl_dtype_size(h.dtype), &count, &nbytes, path, err, errlen) ||
        reader_check_size(file_size, data_off, nbytes, path, err, errlen))
        goto fail;

    r = calloc(1, sizeof *r);
    if (r)
        r->path = strdup(path);
    if (!r || !r->path) {
        fail(err, errlen, path, "out of memory");
        goto fail;
    }
    r->fd = fd;
    r->esize = fl_dtype_size(h.dtype);
    r->swap = h.swap;
    r->count = count;
    r->data_bytes = nbytes;
    r->file_size = file_size;

    hdr->dtype = h.dtype;
    hdr->ndim = h.ndim;
    memcpy(hdr->shape, h.shape, sizeof hdr->shape);
    hdr->count = count;
    hdr->fortran_order = h.fortran_order;
    hdr->data = NULL;
    return r;

fail:
    if (r)
        free(r->path);
    free(r);
    close(fd);
    memset(hdr, 0, sizeof *hdr);
    return NULL;
}

/* Once every element was handed out: a stream must now be at its end.  (A regular file's size
 * was already checked by open.) */
static int reader_check_end(fl_npy_reader *r, char *err, size_t errlen)
{
    r->end_checked = 1;
    if (r->file_size >= 0)
        return 0;
    unsigned char tmp[4096];
    unsigned long long extra = 0;
    for (;;) {
        long long got = read_full(r->fd, tmp, sizeof tmp);
        if (got < 0)
            return fail(err, errlen, r->path, "read error: %s", strerror(errno));
        extra += (unsigned long long)got;
        if ((size_t)got < sizeof tmp)
            break;
    }
    if (extra > 0)
        return fail(err, errlen, r->path, "%llu bytes of trailing data after the %llu bytes of "
                    "array data", extra, (unsigned long long)r->data_bytes);
    return 0;
}

/* Reads exactly n data bytes from the file into dst, or reports truncation. */
static int reader_fetch(fl_npy_reader *r, void *dst, size_t n, char *err, size_t errlen)
{
    long long got = read_full(r->fd, dst, n);
    if (got < 0)
        return fail(err, errlen, r->path, "read error: %s", strerror(errno));
    r->file_pos += (uint64_t)got;
    if ((size_t)got < n)
        return fail(err, errlen, r->path, "truncated data: header promises %llu bytes, file has %llu",
                    (unsigned long long)r->data_bytes, (unsigned long long)r->file_pos);
    return 0;
}

long long fl_npy_reader_read(fl_npy_reader *r, void *buf, size_t max_elems, char *err, size_t errlen)
{
    if (!r)
        return fail(err, errlen, "(reader)", "fl_npy_reader_read on a NULL reader");
    if (r->failed)
        return fail(err, errlen, r->path, "reader already failed");
    const size_t left = r->count - r->delivered;
    const size_t n = max_elems < left ? max_elems : left;
    if (n > 0 && !buf) {
        r->failed = 1;
        return fail(err, errlen, r->path, "fl_npy_reader_read into a NULL buffer");
    }
    unsigned char *out = buf;
    size_t want = n * r->esize; /* <= data_bytes, which fits size_t */

    /* First what is left in the internal buffer, then either straight into the caller's buffer
     * (big requests) or through the internal buffer (small ones, to keep syscalls large). */
    while (want > 0) {
        if (r->buf_pos < r->buf_len) {
            size_t take = r->buf_len - r->buf_pos < want ? r->buf_len - r->buf_pos : want;
            memcpy(out, r->buf + r->buf_pos, take);
            r->buf_pos += take;
            out += take;
            want -= take;
        } else if (want >= IO_BUF) {
            if (reader_fetch(r, out, want, err, errlen)) {
                r->failed = 1;
                return -1;
            }
            out += want;
            want = 0;
        } else {
            if (!r->buf && !(r->buf = malloc(IO_BUF))) {
                r->failed = 1;
                return fail(err, errlen, r->path, "out of memory");
            }
            const uint64_t rest = r->data_bytes - r->file_pos;
            const size_t fill = rest < IO_BUF ? (size_t)rest : IO_BUF;
            if (reader_fetch(r, r->buf, fill, err, errlen)) {
                r->failed = 1;
                return -1;
            }
            r->buf_pos = 0;
            r->buf_len = fill;
        }
    }
    if (r->swap)
        swap_bytes(buf, n, r->esize);
    r->delivered += n;
    if (r->delivered == r->count && !r->end_checked && reader_check_end(r, err, errlen)) {
        r->failed = 1;
        return -1;
    }
    return (long long)n;
}

void fl_npy_reader_close(fl_npy_reader *r)
{
    if (!r)
        return;
    close(r->fd);
    free(r->buf);
    free(r->path);
    free(r);
}

int fl_npy_read(fl_array *out, const char *path, char *err, size_t errlen)
{
    fl_array hdr;
    if (!out)
        return fail(err, errlen, path, "fl_npy_read into a NULL array");
    memset(out, 0, sizeof *out);
    fl_npy_reader *r = fl_npy_reader_open(path, &hdr, err, errlen);
    if (!r)
        return -1;
    const size_t nbytes = hdr.count * fl_dtype_size(hdr.dtype); /* checked by open */
    hdr.data = malloc(nbytes ? nbytes : 1);
    if (!hdr.data) {
        fail(err, errlen, path, "out of memory for %zu bytes of data", nbytes);
        fl_npy_reader_close(r);
        return -1;
    }
    long long got = fl_npy_reader_read(r, hdr.data, hdr.count, err, errlen);
    fl_npy_reader_close(r);
    if (got != (long long)hdr.count) {
        if (got >= 0) /* cannot happen: read hands out everything it was asked for or fails */
            fail(err, errlen, path, "short read: %lld of %zu elements", got, hdr.count);
        free(hdr.data);
        return -1;
    }
    *out = hdr;
    return 0;
}

void fl_array_free(fl_array *a)
{
    if (!a)
        return;
    free(a->data);
    a->data = NULL;
}

/* ---------------------------------------------------------------- streaming writer */

struct fl_npy_writer {
    int fd;
    char *path;
    char *tmp;           /* path + ".tmp.PID.XXXXXX" (fl_atomic_open) */
    size_t esize;
    int swap;            /* the host is big-endian: swap into the buffer */
    size_t count;        /* elements the shape holds */
    size_t written;      /* elements accepted so far */
    unsigned char *buf;  /* IO_BUF bytes */
    size_t buf_len;
    int tmp_made;        /* tmp exists and is ours to remove */
    int failed;
};

/* Formats the header dict, padded with spaces and ended by '\n' so that the data start at a
 * multiple of 64 bytes.  Returns the header length, or 0 if it does not fit outlen. */
static size_t format_header(char *out, size_t outlen, const fl_array *a, int *major)
{
    if ((unsigned)a->dtype >= FL_DT_COUNT) /* checked by the caller; keeps the lookup in bounds */
        return 0;
    const size_t esize = fl_dtype_size(a->dtype);
    char dict[64 + FL_NPY_MAXDIM * 24];
    size_t n = (size_t)snprintf(dict, sizeof dict, "{'descr': '%c%c%u', 'fortran_order': %s, 'shape': (",
                                esize == 1 ? '|' : '<', dtype_codes[a->dtype].kind,
                                (unsigned)esize, a->fortran_order ? "True" : "False");
    for (int i = 0; i < a->ndim; i++)
        n += (size_t)snprintf(dict + n, sizeof dict - n, "%lld%s", (long long)a->shape[i],
                              a->ndim == 1 ? "," : i + 1 < a->ndim ? ", " : "");
    n += (size_t)snprintf(dict + n, sizeof dict - n, "), }");
    /* Version 1.0 has a 10-byte prefix and a 16-bit length; 2.0 a 12-byte prefix and 32 bits. */
    size_t prefix = 10;
    *major = 1;
    size_t total = (prefix + n + 1 + 63) / 64 * 64;
    if (total - prefix > 0xffff) {
        prefix = 12;
        *major = 2;
        total = (prefix + n + 1 + 63) / 64 * 64;
    }
    const size_t hlen = total - prefix;
    if (hlen > outlen)
        return 0;
    memcpy(out, dict, n);
    memset(out + n, ' ', hlen - n - 1);
    out[hlen - 1] = '\n';
    return hlen;
}

static int writer_flush(fl_npy_writer *w, char *err, size_t errlen)
{
    if (w->buf_len == 0)
        return 0;
    if (write_full(w->fd, w->buf, w->buf_len) != 0) {
        w->failed = 1;
        return fail(err, errlen, w->path, "write to temporary file %s failed: %s", w->tmp,
                    strerror(errno));
    }
    w->buf_len = 0;
    return 0;
}

/* Checks what the writer takes from an array: dtype, ndim and shape. */
static int check_header(const fl_array *a, size_t *count, uint64_t *nbytes, const char *path,
                        char *err, size_t errlen)
{
    if (!a)
        return fail(err, errlen, path, "cannot write: no array given");
    if ((unsigned)a->dtype >= FL_DT_COUNT)
        return fail(err, errlen, path, "cannot write: invalid dtype %d", (int)a->dtype);
    if (a->ndim < 0 || a->ndim > FL_NPY_MAXDIM)
        return fail(err, errlen, path, "cannot write: ndim %d is outside 0..%d", a->ndim,
                    FL_NPY_MAXDIM);
    return shape_size(a->shape, a->ndim, fl_dtype_size(a->dtype), count, nbytes, path, err, errlen);
}

/* The mode for the new file: that of the file it replaces, else 0666 & ~umask. */
fl_npy_writer *fl_npy_writer_open(const char *path, const fl_array *hdr, char *err, size_t errlen)
{
    if (!path) {
        fail(err, errlen, path, "no path given");
        return NULL;
    }
    size_t count;
    uint64_t nbytes;
    if (check_header(hdr, &count, &nbytes, path, err, errlen))
        return NULL;
    const size_t esize = fl_dtype_size(hdr->dtype);

    fl_npy_writer *w = calloc(1, sizeof *w);
    if (w) {
        w->fd = -1;
        w->path = strdup(path);
        w->buf = malloc(IO_BUF);
    }
    if (!w || !w->path || !w->buf) {
        fail(err, errlen, path, "out of memory");
        goto fail;
    }
    w->esize = esize;
    w->swap = !host_is_little_endian();
    w->count = count;

    int major;
    const size_t hlen = format_header((char *)w->buf + 12, IO_BUF - 12, hdr, &major);
    if (hlen == 0) { /* cannot happen with FL_NPY_MAXDIM 32 */
        fail(err, errlen, path, "header too long");
        goto fail;
    }
    const size_t prefix = major == 1 ? 10 : 12;
    if (prefix == 10)
        memmove(w->buf + 10, w->buf + 12, hlen);
    memcpy(w->buf, MAGIC, MAGIC_LEN);
    w->buf[6] = (unsigned char)major;
    w->buf[7] = 0;
    for (size_t k = 0; k < prefix - 8; k++)
        w->buf[8 + k] = (unsigned char)((uint64_t)hlen >> (8 * k));
    w->buf_len = prefix + hlen;

    w->fd = fl_atomic_open(path, &w->tmp);
    if (w->fd < 0) {
        fail(err, errlen, path, "cannot create a temporary file beside it: %s", strerror(errno));
        goto fail;
    }
    w->tmp_made = 1;
    return w;

fail:
    fl_npy_writer_abort(w);
    return NULL;
}

int fl_npy_writer_write(fl_npy_writer *w, const void *buf, size_t n_elems, char *err, size_t errlen)
{
    if (!w)
        return fail(err, errlen, "(writer)", "fl_npy_writer_write on a NULL writer");
    if (w->failed)
        return fail(err, errlen, w->path, "writer already failed");
    if (n_elems > w->count - w->written) {
        w->failed = 1;
        return fail(err, errlen, w->path, "too many elements: %zu written + %zu more exceed the %zu "
                    "the shape holds", w->written, n_elems, w->count);
    }
    if (n_elems > 0 && !buf) {
        w->failed = 1;
        return fail(err, errlen, w->path, "fl_npy_writer_write from a NULL buffer");
    }
    const unsigned char *in = buf;
    size_t bytes = n_elems * w->esize;
    if (!w->swap && bytes >= IO_BUF) {
        /* Big chunk on a little-endian host: no copy. */
        if (writer_flush(w, err, errlen))
            return -1;
        if (write_full(w->fd, in, bytes) != 0) {
            w->failed = 1;
            return fail(err, errlen, w->path, "write to temporary file %s failed: %s", w->tmp,
                        strerror(errno));
        }
    } else {
        /* Through the buffer, whole elements at a time so that swapping sees whole elements. */
        while (bytes > 0) {
            size_t room = (IO_BUF - w->buf_len) / w->esize * w->esize;
            if (room == 0) {
                if (writer_flush(w, err, errlen))
                    return -1;
                continue;
            }
            size_t take = bytes < room ? bytes : room;
            memcpy(w->buf + w->buf_len, in, take);
            if (w->swap)
                swap_bytes(w->buf + w->buf_len, take / w->esize, w->esize);
            w->buf_len += take;
            in += take;
            bytes -= take;
        }
    }
    w->written += n_elems;
    return 0;
}

int fl_npy_writer_commit(fl_npy_writer *w, char *err, size_t errlen)
{
    if (!w)
        return fail(err, errlen, "(writer)", "fl_npy_writer_commit on a NULL writer");
    int rc = -1;
    if (w->failed) {
        fail(err, errlen, w->path, "not written: an earlier write failed");
    } else if (w->written != w->count) {
        fail(err, errlen, w->path, "element count mismatch: wrote %zu of the %zu elements the shape "
             "holds", w->written, w->count);
    } else if (writer_flush(w, err, errlen) == 0) {
        const int fd = w->fd;
        const char *what;
        w->fd = -1;
        w->tmp_made = 0; /* committed or removed by fl_atomic_commit */
        if (fl_atomic_commit(fd, w->tmp, w->path, &what) != 0 && !strcmp(what, "rename"))
            fail(err, errlen, w->path, "cannot rename temporary file %s onto it: %s", w->tmp, strerror(errno));
        else if (what)
            fail(err, errlen, w->path, "%s of temporary file %s failed: %s", what, w->tmp, strerror(errno));
        else
            rc = 0;
    }
    fl_npy_writer_abort(w);
    return rc;
}

void fl_npy_writer_abort(fl_npy_writer *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    if (w->tmp_made)
        fl_atomic_abort(-1, w->tmp); /* removed and unregistered */
    free(w->tmp);
    free(w->path);
    free(w->buf);
    free(w);
}

int fl_npy_write(const char *path, const fl_array *a, char *err, size_t errlen)
{
    /* The data size follows from count, so it must agree with the shape; checked before anything
     * is created. */
    size_t count;
    uint64_t nbytes;
    if (check_header(a, &count, &nbytes, path, err, errlen))
        return -1;
    if (a->count != count)
        return fail(err, errlen, path, "cannot write: count %zu does not match the shape's %zu "
                    "elements", a->count, count);
    fl_npy_writer *w = fl_npy_writer_open(path, a, err, errlen);
    if (!w)
        return -1;
    if (fl_npy_writer_write(w, a->data, a->count, err, errlen)) {
        fl_npy_writer_abort(w);
        return -1;
    }
    return fl_npy_writer_commit(w, err, errlen);
}
