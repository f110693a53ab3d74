/* safetensors.c — see safetensors.h. */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct fl_st_file {
    char *path;
    void *map;
    size_t size;
    size_t n;
    fl_st_tensor *t;
};

static const struct {
    const char *name;
    size_t size;
    int fmt;
} dtypes[] = {
    { "F64", 8, -1 },
    { "F32", 4, FL_FMT_FP32 },
    { "F16", 2, FL_FMT_FP16 },
    { "BF16", 2, FL_FMT_BF16 },
    { "F8_E4M3", 1, FL_FMT_E4M3 },
    { "F8_E5M2", 1, FL_FMT_E5M2 },
    { "BOOL", 1, -1 },
    { "U8", 1, -1 },
    { "I8", 1, -1 },
    { "U16", 2, -1 },
    { "I16", 2, -1 },
    { "U32", 4, -1 },
    { "I32", 4, -1 },
    { "U64", 8, -1 },
    { "I64", 8, -1 },
};
_Static_assert(sizeof dtypes / sizeof dtypes[0] == FL_ST_DTYPE_COUNT, "dtypes out of step with fl_st_dtype");

const char *fl_st_dtype_name(fl_st_dtype t) { return (unsigned)t < FL_ST_DTYPE_COUNT ? dtypes[t].name : "invalid"; }
size_t fl_st_dtype_size(fl_st_dtype t) { return (unsigned)t < FL_ST_DTYPE_COUNT ? dtypes[t].size : 0; }
int fl_st_format(fl_st_dtype t) { return (unsigned)t < FL_ST_DTYPE_COUNT ? dtypes[t].fmt : -1; }

size_t fl_st_count(const fl_st_file *f) { return f->n; }
const fl_st_tensor *fl_st_tensor_at(const fl_st_file *f, size_t i) { return i < f->n ? &f->t[i] : NULL; }
const char *fl_st_path(const fl_st_file *f) { return f->path; }

const fl_st_tensor *fl_st_find(const fl_st_file *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name))
            return &f->t[i];
    return NULL;
}

void fl_st_close(fl_st_file *f)
{
    if (!f)
        return;
    for (size_t i = 0; i < f->n; i++)
        free(f->t[i].name);
    free(f->t);
    if (f->map && f->map != MAP_FAILED)
        munmap(f->map, f->size);
    free(f->path);
    free(f);
}

static fl_st_file *fail(fl_st_file *f, char *err, size_t errlen, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static fl_st_file *fail(fl_st_file *f, char *err, size_t errlen, const char *path, const char *fmt, ...)
{
    int k = snprintf(err, errlen, "%s: ", path);
    if (k < 0 || (size_t)k >= errlen)
        k = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + k, errlen - (size_t)k, fmt, ap);
    va_end(ap);
    fl_st_close(f);
    return NULL;
}

static int cmp_begin(const void *a, const void *b)
{
    const fl_st_tensor *const *x = a, *const *y = b;
    return (*x)->begin < (*y)->begin ? -1 : (*x)->begin > (*y)->begin ? 1 : 0;
}

/* The steps of fl_st_open: each writes its reason for refusing the file into msg (fl_st_open prefixes
   the path) and returns -1 or NULL. */

/* Maps path read-only into f->map, its f->size bytes. */
static int st_map(fl_st_file *f, const char *path, char *msg, size_t msglen)
{
    const int fd = open(path, O_RDONLY);
    if (fd < 0) {
        snprintf(msg, msglen, "cannot open: %s", strerror(errno));
        return -1;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        snprintf(msg, msglen, "not a regular file");
        return -1;
    }
    f->size = (size_t)sb.st_size;
    if (f->size < 8) {
        close(fd);
        snprintf(msg, msglen, "too short for a safetensors file (%zu bytes; the header length alone is 8)", f->size);
        return -1;
    }
    f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (f->map == MAP_FAILED) {
        snprintf(msg, msglen, "cannot map: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* The header: a little-endian uint64 length, *hlen, then that many bytes of one JSON object (trailing
   spaces are padding), returned parsed. */
static json_t *st_header(const fl_st_file *f, uint64_t *hlen, char *msg, size_t msglen)
{
    const unsigned char *b = f->map;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = (n << 8) | b[i];
    if (n > FL_ST_MAX_HEADER) {
        snprintf(msg, msglen, "header length %llu exceeds the 100 MiB limit", (unsigned long long)n);
        return NULL;
    }
    if (n > f->size - 8) {
        snprintf(msg, msglen, "truncated header: length field says %llu bytes, file has %zu after it",
                 (unsigned long long)n, f->size - 8);
        return NULL;
    }
    if (n == 0 || b[8] != '{') {
        snprintf(msg, msglen, "header does not start with '{'");
        return NULL;
    }
    size_t hl = (size_t)n;
    while (hl > 0 && b[8 + hl - 1] == ' ')
        hl--;
    json_error_t je;
    json_t *root = json_loadb((const char *)b + 8, hl, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        snprintf(msg, msglen, "header is not valid JSON: %s (at byte %d)", je.text, je.position);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        snprintf(msg, msglen, "header is not a JSON object");
        return NULL;
    }
    *hlen = n;
    return root;
}

/* The header's "__metadata__": an object of strings. */
static int st_metadata(json_t *val, char *msg, size_t msglen)
{
    const char *mk;
    json_t *mv;
    if (!json_is_object(val)) {
        snprintf(msg, msglen, "__metadata__ is not an object");
        return -1;
    }
    json_object_foreach(val, mk, mv) if (!json_is_string(mv))
    {
        snprintf(msg, msglen, "__metadata__ value of '%s' is not a string", mk);
        return -1;
    }
    return 0;
}

/* The shape of tensor key, sh, into t->ndim and t->shape; the element count into *count. */
static int st_shape(fl_st_tensor *t, uint64_t *count, const char *key, const json_t *sh, char *msg, size_t msglen)
{
    if (json_array_size(sh) > FL_ST_MAXDIM) {
        snprintf(msg, msglen, "tensor '%.60s': more than %d dimensions", key, FL_ST_MAXDIM);
        return -1;
    }
    t->ndim = (int)json_array_size(sh);
    uint64_t n = 1;
    int bad = 0;
    for (int i = 0; i < t->ndim && !bad; i++) {
        json_t *d = json_array_get(sh, (size_t)i);
        if (!json_is_integer(d) || json_integer_value(d) < 0) {
            bad = 1;
            break;
        }
        t->shape[i] = json_integer_value(d);
        if (t->shape[i] && n > UINT64_MAX / (uint64_t)t->shape[i])
            bad = 2;
        n *= (uint64_t)t->shape[i];
    }
    if (bad) {
        snprintf(msg, msglen, bad == 1 ? "tensor '%.60s': shape entries must be non-negative integers"
                                       : "tensor '%.60s': element count overflows", key);
        return -1;
    }
    *count = n;
    return 0;
}

/* Tensor key's entry, {"dtype": .., "shape": [..], "data_offsets": [BEGIN, END]}, into t (all but its
   name and data), its bytes within the buffer's buf_len. */
static int st_tensor(fl_st_tensor *t, const char *key, const json_t *val, uint64_t buf_len, char *msg, size_t msglen)
{
    json_t *dt = json_object_get(val, "dtype"), *sh = json_object_get(val, "shape"),
           *off = json_object_get(val, "data_offsets");
    if (!json_is_object(val) || json_object_size(val) != 3 || !json_is_string(dt) || !json_is_array(sh) ||
        !json_is_array(off) || json_array_size(off) != 2) {
        snprintf(msg, msglen, "tensor '%.60s': expected an object with dtype, shape, data_offsets", key);
        return -1;
    }
    int dtype = -1;
    for (int i = 0; i < FL_ST_DTYPE_COUNT; i++)
        if (!strcmp(json_string_value(dt), dtypes[i].name))
            dtype = i;
    if (dtype < 0) {
        snprintf(msg, msglen, "tensor '%.60s': unknown dtype '%.20s'", key, json_string_value(dt));
        return -1;
    }
    t->dtype = (fl_st_dtype)dtype;
    uint64_t count;
    if (st_shape(t, &count, key, sh, msg, msglen))
        return -1;
    t->count = count;
    json_t *o0 = json_array_get(off, 0), *o1 = json_array_get(off, 1);
    if (!json_is_integer(o0) || !json_is_integer(o1) || json_integer_value(o0) < 0 ||
        json_integer_value(o1) < json_integer_value(o0)) {
        snprintf(msg, msglen, "tensor '%.60s': data_offsets must be [BEGIN, END] with 0 <= BEGIN <= END", key);
        return -1;
    }
    t->begin = (uint64_t)json_integer_value(o0);
    t->end = (uint64_t)json_integer_value(o1);
    const size_t es = dtypes[dtype].size;
    if (count > UINT64_MAX / es || count * es != t->end - t->begin) {
        snprintf(msg, msglen, "tensor '%.60s': shape holds %llu elements of %zu bytes but data_offsets span %llu bytes",
                 key, (unsigned long long)count, es, (unsigned long long)(t->end - t->begin));
        return -1;
    }
    if (t->end > buf_len) {
        snprintf(msg, msglen, "tensor '%.60s': data_offsets end %llu beyond the %llu-byte buffer (truncated file?)",
                 key, (unsigned long long)t->end, (unsigned long long)buf_len);
        return -1;
    }
    return 0;
}

/* The header's tensors into f->t, in header order; their data in the buffer buf of buf_len bytes. */
static int st_tensors(fl_st_file *f, json_t *root, const unsigned char *buf, uint64_t buf_len, char *msg,
                      size_t msglen)
{
    const char *key;
    json_t *val;
    f->t = calloc(json_object_size(root) + 1, sizeof *f->t);
    json_object_foreach(root, key, val)
    {
        if (!strcmp(key, "__metadata__")) {
            if (st_metadata(val, msg, msglen))
                return -1;
            continue;
        }
        fl_st_tensor *t = &f->t[f->n];
        if (st_tensor(t, key, val, buf_len, msg, msglen))
            return -1;
        t->name = strdup(key);
        t->data = buf + t->begin;
        f->n++;
    }
    return 0;
}

/* The tensors tile the buffer of buf_len bytes: no overlaps, no holes, no trailing bytes. */
static int st_layout(const fl_st_file *f, uint64_t buf_len, char *msg, size_t msglen)
{
    const fl_st_tensor **order = malloc((f->n + 1) * sizeof *order);
    for (size_t i = 0; i < f->n; i++)
        order[i] = &f->t[i];
    qsort(order, f->n, sizeof *order, cmp_begin);
    uint64_t pos = 0;
    size_t i = 0;
    while (i < f->n && order[i]->begin == pos)
        pos = order[i++]->end;
    int rc = 0;
    if (i < f->n) {
        const int overlap = order[i]->begin < pos;
        snprintf(msg, msglen, "tensor '%.60s' %s at byte %llu of the buffer (expected %llu)", order[i]->name,
                 overlap ? "overlaps the previous one" : "leaves a hole: starts", (unsigned long long)order[i]->begin,
                 (unsigned long long)pos);
        rc = -1;
    } else if (pos != buf_len) {
        snprintf(msg, msglen, "%llu bytes of trailing data after the last tensor", (unsigned long long)(buf_len - pos));
        rc = -1;
    }
    free(order);
    return rc;
}

fl_st_file *fl_st_open(const char *path, char *err, size_t errlen)
{
    fl_st_file *f = calloc(1, sizeof *f);
    if (!f)
        return fail(NULL, err, errlen, path, "out of memory");
    f->path = strdup(path);
    char msg[256] = "";
    if (st_map(f, path, msg, sizeof msg))
        return fail(f, err, errlen, path, "%s", msg);
    uint64_t hlen = 0;
    json_t *root = st_header(f, &hlen, msg, sizeof msg);
    if (!root)
        return fail(f, err, errlen, path, "%s", msg);
    const uint64_t buf_len = f->size - 8 - hlen;
    const int bad = st_tensors(f, root, (const unsigned char *)f->map + 8 + hlen, buf_len, msg, sizeof msg);
    json_decref(root);
    if (bad || st_layout(f, buf_len, msg, sizeof msg))
        return fail(f, err, errlen, path, "%s", msg);
    return f;
}
