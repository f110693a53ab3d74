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

fl_st_file *fl_st_open(const char *path, char *err, size_t errlen)
{
    fl_st_file *f = calloc(1, sizeof *f);
    if (!f)
        return fail(NULL, err, errlen, path, "out of memory");
    f->path = strdup(path);
    const int fd = open(path, O_RDONLY);
    if (fd < 0)
        return fail(f, err, errlen, path, "cannot open: %s", strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return fail(f, err, errlen, path, "not a regular file");
    }
    f->size = (size_t)sb.st_size;
    if (f->size < 8) {
        close(fd);
        return fail(f, err, errlen, path, "too short for a safetensors file (%zu bytes; the header length alone is 8)",
                    f->size);
    }
    f->map = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (f->map == MAP_FAILED)
        return fail(f, err, errlen, path, "cannot map: %s", strerror(errno));
    const unsigned char *b = f->map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | b[i];
    if (hlen > FL_ST_MAX_HEADER)
        return fail(f, err, errlen, path, "header length %llu exceeds the 100 MiB limit", (unsigned long long)hlen);
    if (hlen > f->size - 8)
        return fail(f, err, errlen, path, "truncated header: length field says %llu bytes, file has %zu after it",
                    (unsigned long long)hlen, f->size - 8);
    if (hlen == 0 || b[8] != '{')
        return fail(f, err, errlen, path, "header does not start with '{'");
    /* trailing spaces are padding */
    size_t hl = (size_t)hlen;
    while (hl > 0 && b[8 + hl - 1] == ' ')
        hl--;
    json_error_t je;
    json_t *root = json_loadb((const char *)b + 8, hl, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return fail(f, err, errlen, path, "header is not valid JSON: %s (at byte %d)", je.text, je.position);
    if (!json_is_object(root)) {
        json_decref(root);
        return fail(f, err, errlen, path, "header is not a JSON object");
    }
    const uint64_t buf_len = f->size - 8 - hlen;
    const unsigned char *buf = b + 8 + hlen;
    f->t = calloc(json_object_size(root) + 1, sizeof *f->t);
    const char *key;
    json_t *val;
    char msg[256] = "";
    json_object_foreach(root, key, val)
    {
        if (!strcmp(key, "__metadata__")) {
            const char *mk;
            json_t *mv;
            if (!json_is_object(val)) {
                snprintf(msg, sizeof msg, "__metadata__ is not an object");
                break;
            }
            json_object_foreach(val, mk, mv) if (!json_is_string(mv))
            {
                snprintf(msg, sizeof msg, "__metadata__ value of '%s' is not a string", mk);
                break;
            }
            if (*msg)
                break;
            continue;
        }
        fl_st_tensor *t = &f->t[f->n];
        if (!json_is_object(val) || json_object_size(val) != 3) {
            snprintf(msg, sizeof msg, "tensor '%.60s': expected an object with dtype, shape, data_offsets", key);
            break;
        }
        json_t *dt = json_object_get(val, "dtype"), *sh = json_object_get(val, "shape"),
               *off = json_object_get(val, "data_offsets");
        if (!json_is_string(dt) || !json_is_array(sh) || !json_is_array(off) || json_array_size(off) != 2) {
            snprintf(msg, sizeof msg, "tensor '%.60s': expected an object with dtype, shape, data_offsets", key);
            break;
        }
        int dtype = -1;
        for (int i = 0; i < FL_ST_DTYPE_COUNT; i++)
            if (!strcmp(json_string_value(dt), dtypes[i].name))
                dtype = i;
        if (dtype < 0) {
            snprintf(msg, sizeof msg, "tensor '%.60s': unknown dtype '%.20s'", key, json_string_value(dt));
            break;
        }
        t->dtype = (fl_st_dtype)dtype;
        if (json_array_size(sh) > FL_ST_MAXDIM) {
            snprintf(msg, sizeof msg, "tensor '%.60s': more than %d dimensions", key, FL_ST_MAXDIM);
            break;
        }
        t->ndim = (int)json_array_size(sh);
        uint64_t count = 1;
        int bad = 0;
        for (int i = 0; i < t->ndim && !bad; i++) {
            json_t *d = json_array_get(sh, (size_t)i);
            if (!json_is_integer(d) || json_integer_value(d) < 0) {
                bad = 1;
                break;
            }
            t->shape[i] = json_integer_value(d);
            if (t->shape[i] && count > UINT64_MAX / (uint64_t)t->shape[i])
                bad = 2;
            count *= (uint64_t)t->shape[i];
        }
        if (bad) {
            snprintf(msg, sizeof msg, bad == 1 ? "tensor '%.60s': shape entries must be non-negative integers"
                                               : "tensor '%.60s': element count overflows", key);
            break;
        }
        t->count = count;
        json_t *o0 = json_array_get(off, 0), *o1 = json_array_get(off, 1);
        if (!json_is_integer(o0) || !json_is_integer(o1) || json_integer_value(o0) < 0 ||
            json_integer_value(o1) < json_integer_value(o0)) {
            snprintf(msg, sizeof msg, "tensor '%.60s': data_offsets must be [BEGIN, END] with 0 <= BEGIN <= END", key);
            break;
        }
        t->begin = (uint64_t)json_integer_value(o0);
        t->end = (uint64_t)json_integer_value(o1);
        const size_t es = dtypes[dtype].size;
        if (count > UINT64_MAX / es || count * es != t->end - t->begin) {
            snprintf(msg, sizeof msg, "tensor '%.60s': shape holds %llu elements of %zu bytes but data_offsets span %llu bytes",
                     key, (unsigned long long)count, es, (unsigned long long)(t->end - t->begin));
            break;
        }
        if (t->end > buf_len) {
            snprintf(msg, sizeof msg, "tensor '%.60s': data_offsets end %llu beyond the %llu-byte buffer (truncated file?)",
                     key, (unsigned long long)t->end, (unsigned long long)buf_len);
            break;
        }
        t->name = strdup(key);
        t->data = buf + t->begin;
        f->n++;
    }
    json_decref(root);
    if (*msg)
        return fail(f, err, errlen, path, "%s", msg);
    /* no overlaps, no holes, no trailing bytes */
    const fl_st_tensor **order = malloc((f->n + 1) * sizeof *order);
    for (size_t i = 0; i < f->n; i++)
        order[i] = &f->t[i];
    qsort(order, f->n, sizeof *order, cmp_begin);
    uint64_t pos = 0;
    for (size_t i = 0; i < f->n; i++) {
        if (order[i]->begin != pos) {
            const int overlap = order[i]->begin < pos;
            snprintf(msg, sizeof msg, "tensor '%.60s' %s at byte %llu of the buffer (expected %llu)", order[i]->name,
                     overlap ? "overlaps the previous one" : "leaves a hole: starts", (unsigned long long)order[i]->begin,
                     (unsigned long long)pos);
            break;
        }
        pos = order[i]->end;
    }
    free(order);
    if (*msg)
        return fail(f, err, errlen, path, "%s", msg);
    if (pos != buf_len)
        return fail(f, err, errlen, path, "%llu bytes of trailing data after the last tensor",
                    (unsigned long long)(buf_len - pos));
    return f;
}
