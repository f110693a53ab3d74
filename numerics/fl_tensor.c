/* fl_tensor.c — see fl_tensor.h. */
#include "fl_tensor.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fl_round.h"
#include "npy.h"
#include "safetensors.h"

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* The tensor of a safetensors file, decoded. */
static int load_st(float **x, size_t *R, size_t *C, const char *path, const char *tensor, char *err, size_t errlen)
{
    fl_st_file *sf = fl_st_open(path, err, errlen);
    if (!sf)
        return -1;
    const fl_st_tensor *t = NULL;
    int rc = -1;
    if (tensor) {
        if (!(t = fl_st_find(sf, tensor))) {
            fail(err, errlen, "%s: no tensor named '%s'", path, tensor);
            goto out;
        }
    } else {
        for (size_t i = 0; i < fl_st_count(sf) && !t; i++) {
            const fl_st_tensor *c = fl_st_tensor_at(sf, i);
            if (c->dtype == FL_ST_F64 || fl_st_format(c->dtype) >= 0)
                t = c;
        }
        if (!t) {
            fail(err, errlen, "%s: no floating-point tensor in the file", path);
            goto out;
        }
    }
    const int fmt = fl_st_format(t->dtype);
    if ((t->dtype != FL_ST_F64 && fmt < 0) || t->count == 0) {
        fail(err, errlen, "%s: tensor '%s' is %s with %llu elements; need a non-empty floating tensor", path, t->name,
             fl_st_dtype_name(t->dtype), (unsigned long long)t->count);
        goto out;
    }
    *C = t->ndim == 0 ? 1 : (size_t)t->shape[t->ndim - 1];
    *R = (size_t)t->count / *C;
    if (!(*x = malloc((size_t)t->count * sizeof **x))) {
        fail(err, errlen, "out of memory");
        goto out;
    }
    const unsigned char *b = t->data;
    const int w = t->dtype == FL_ST_F64 ? 8 : fl_format_storage_bits((fl_format)fmt) / 8;
    for (size_t i = 0; i < t->count; i++) {
        if (t->dtype == FL_ST_F64) {
            double d;
            memcpy(&d, b + 8 * i, 8);
            (*x)[i] = (float)d;
        } else {
            uint32_t code = 0;
            memcpy(&code, b + (size_t)w * i, (size_t)w); /* little-endian host */
            (*x)[i] = fl_decode((fl_format)fmt, code);
        }
    }
    rc = 0;
out:
    fl_st_close(sf);
    return rc;
}

static int load_npy(float **x, size_t *R, size_t *C, const char *path, char *err, size_t errlen)
{
    fl_array arr;
    if (fl_npy_read(&arr, path, err, errlen))
        return -1;
    int rc = -1;
    if ((arr.dtype != FL_DT_F32 && arr.dtype != FL_DT_F64 && arr.dtype != FL_DT_F16) || arr.count == 0)
        fail(err, errlen, "%s: need a non-empty float16/32/64 array, got %s with %zu elements", path,
             fl_dtype_name(arr.dtype), arr.count);
    else if (arr.fortran_order && arr.ndim > 1)
        fail(err, errlen, "%s: Fortran-order arrays are not supported (rows must be contiguous)", path);
    else if (!(*x = malloc(arr.count * sizeof **x)))
        fail(err, errlen, "out of memory");
    else {
        *C = arr.ndim == 0 ? 1 : (size_t)arr.shape[arr.ndim - 1];
        *R = arr.count / *C;
        for (size_t i = 0; i < arr.count; i++)
            (*x)[i] = arr.dtype == FL_DT_F32   ? ((float *)arr.data)[i]
                      : arr.dtype == FL_DT_F64 ? (float)((double *)arr.data)[i]
                                               : fl_decode(FL_FMT_FP16, ((uint16_t *)arr.data)[i]);
        rc = 0;
    }
    fl_array_free(&arr);
    return rc;
}

int fl_tensor_load_f32(float **x, size_t *R, size_t *C, const char *path, const char *tensor, int require_finite,
                       char *err, size_t errlen)
{
    const size_t len = strlen(path);
    *x = NULL;
    const int st = len > 12 && !strcmp(path + len - 12, ".safetensors");
    if (st ? load_st(x, R, C, path, tensor, err, errlen) : load_npy(x, R, C, path, err, errlen)) {
        free(*x);
        *x = NULL;
        return -1;
    }
    if (!require_finite)
        return 0;
    size_t bad = 0;
    for (size_t i = 0; i < *R * *C; i++)
        bad += !isfinite((*x)[i]);
    if (bad) {
        fail(err, errlen, "%s: %zu elements are NaN or Inf (or overflow float32); the study needs finite data", path, bad);
        free(*x);
        *x = NULL;
        return -1;
    }
    return 0;
}
