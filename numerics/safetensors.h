/* safetensors.h — reading .safetensors files (Hugging Face's tensor container).
 *
 * A .safetensors file is
 *     N (8 bytes, little-endian uint64)   header (N bytes of UTF-8 JSON)   byte buffer
 * where the header is one JSON object: for every tensor name
 *     {"dtype": "F32", "shape": [2, 3], "data_offsets": [BEGIN, END]}
 * with the offsets relative to the start of the byte buffer, plus an optional "__metadata__" object of
 * string values.  The header may be padded at its end with spaces.  Data are little-endian, C order.
 *
 * Reading is strict, like npy.c: the header must parse as a JSON object; every entry must have exactly
 * the keys dtype, shape and data_offsets with the right JSON types; shapes are non-negative and their
 * element count times the dtype's size must equal END - BEGIN (checked for overflow); the tensors must
 * not overlap and must cover the byte buffer exactly, without holes and without trailing bytes (the
 * format's own rule against polyglot files).  Every error message is one line that starts with the
 * file's path and says what is wrong.  The file is mapped read-only; tensor data stay valid until
 * fl_st_close.
 *
 * Every dtype of the format is accepted structurally (its size is known); fp8lab computes with the
 * floating-point ones: F64, F32, F16, BF16, F8_E4M3, F8_E5M2 (fl_st_format says which fl_format).
 */
#ifndef FL_SAFETENSORS_H
#define FL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "fl_format.h"

typedef enum {
    FL_ST_F64, FL_ST_F32, FL_ST_F16, FL_ST_BF16, FL_ST_F8_E4M3, FL_ST_F8_E5M2,
    FL_ST_BOOL, FL_ST_U8, FL_ST_I8, FL_ST_U16, FL_ST_I16, FL_ST_U32, FL_ST_I32, FL_ST_U64, FL_ST_I64,
    FL_ST_DTYPE_COUNT
} fl_st_dtype;

#define FL_ST_MAXDIM 32
#define FL_ST_MAX_HEADER (100u << 20) /* 100 MiB, the limit of the reference implementation */

typedef struct {
    char *name;
    fl_st_dtype dtype;
    int ndim;
    int64_t shape[FL_ST_MAXDIM];  /* (d0, ..., d(ndim-1)) */
    uint64_t count;               /* product of the shape (1 for a 0-d tensor) */
    uint64_t begin, end;          /* byte offsets in the buffer */
    const void *data;             /* begin's address in the mapping */
} fl_st_tensor;

typedef struct fl_st_file fl_st_file;

/* Opens and validates path.  NULL on failure with a one-line message in err. */
fl_st_file *fl_st_open(const char *path, char *err, size_t errlen);
void fl_st_close(fl_st_file *f);

size_t fl_st_count(const fl_st_file *f);
const fl_st_tensor *fl_st_tensor_at(const fl_st_file *f, size_t i); /* in header order */
const fl_st_tensor *fl_st_find(const fl_st_file *f, const char *name);
const char *fl_st_path(const fl_st_file *f);

const char *fl_st_dtype_name(fl_st_dtype t); /* "F32", ... */
size_t fl_st_dtype_size(fl_st_dtype t);
/* The fl_format whose encodings a floating dtype holds (F32 fp32, F16 fp16, BF16 bf16, F8_E4M3 e4m3,
   F8_E5M2 e5m2); -1 for F64 and the integer dtypes. */
int fl_st_format(fl_st_dtype t);

#endif /* FL_SAFETENSORS_H */
