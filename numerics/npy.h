/* npy.h — reading and writing NumPy .npy files (format versions 1.0, 2.0 and 3.0).
 *
 * A .npy file is
 *     "\x93NUMPY" major minor  header_len  header  data
 * where header_len is a little-endian uint16 (version 1.0) or uint32 (2.0, 3.0), and header is a
 * Python dict literal such as  {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * padded with spaces and terminated by '\n' (3.0 only differs by allowing UTF-8 in the header).
 * The data follow immediately: prod(shape) elements of the dtype, in C order, or in Fortran order
 * when fortran_order is True.  Nothing may follow the data.
 *
 * Only the plain numeric dtypes below are supported; int8, complex, object, string, datetime and
 * structured dtypes are rejected with "unsupported dtype '...'".  Every error message is one line
 * that starts with the file's path and says what is wrong.
 *
 * Reading is strict: the header must parse completely, the data must be exactly as long as the
 * shape promises (shorter: "truncated data", longer: "N bytes of trailing data"), and element
 * counts and byte sizes are checked for overflow before anything is allocated.
 *
 * Writing is atomic: the bytes go to a temporary file beside the target (path + ".tmp.XXXXXX",
 * created by mkstemp), which is renamed onto path only once everything was written; on any failure
 * the temporary is removed and whatever was at path before is left as it was.  The written file
 * takes the mode of the file it replaces, or 0666 & ~umask for a new file.  (Reading the umask
 * sets it and sets it back, which is not thread safe against a concurrent umask() change.)
 */
#ifndef FL_NPY_H
#define FL_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "fl_base.h"

typedef enum {
    FL_DT_F16, /* '<f2' IEEE binary16, carried as raw bits */
    FL_DT_F32, /* '<f4' */
    FL_DT_F64, /* '<f8' */
    FL_DT_U8,  /* '|u1' */
    FL_DT_U16, /* '<u2' */
    FL_DT_U32, /* '<u4' */
    FL_DT_I32, /* '<i4' */
    FL_DT_I64, /* '<i8' */
    FL_DT_COUNT
} fl_dtype;

/* "float16", "float32", ... (NumPy's names); "invalid" for a value outside the enum. */
const char *fl_dtype_name(fl_dtype t);
/* Bytes per element; 0 for a value outside the enum. */
size_t fl_dtype_size(fl_dtype t);

#define FL_NPY_MAXDIM 32

/* An n-d array in host memory.  Dimension letters: d0..d(ndim-1) are shape[0..ndim-1]. */
typedef struct {
    fl_dtype dtype;
    int ndim;                       /* 0 for a 0-d array (one element) */
    int64_t shape[FL_NPY_MAXDIM];   /* (d0, ..., d(ndim-1)); entries from ndim on are 0 */
    size_t count;                   /* d0 * ... * d(ndim-1); 1 for 0-d; 0 when any d is 0 */
    int fortran_order;              /* 1: data is column-major; elementwise tools just carry it */
    void *data;                     /* (d0, ..., d(ndim-1)) elements, count * fl_dtype_size(dtype)
                                       bytes, native byte order, malloc'd; never NULL after a
                                       successful fl_npy_read, even when count is 0 */
} fl_array;

/* Reads the whole file at path into *out.  Returns 0 on success; on failure returns nonzero, leaves
 * *out zeroed (data NULL, so fl_array_free is harmless) and writes a one-line message naming the
 * file into err, e.g. "x.npy: truncated data: header promises 4096 bytes, file has 100". */
int fl_npy_read(fl_array *out, const char *path, char *err, size_t errlen);

/* Writes a atomically to path (see the top of this file).  a->count must equal the product of
 * a->shape.  The header is version 1.0 when it fits in 65535 bytes, else 2.0 (unreachable with
 * FL_NPY_MAXDIM 32, kept for completeness); dtypes are written little-endian ('<f4', '|u1', ...),
 * padded so that the data start at a multiple of 64 bytes.  Returns 0 on success, else nonzero
 * with err set; nothing is left behind on failure. */
int fl_npy_write(const char *path, const fl_array *a, char *err, size_t errlen);

/* Frees a->data and sets it to NULL.  Safe on a zeroed or already freed array, and on NULL. */
void fl_array_free(fl_array *a);

/* Streaming reader: parses and checks the header (and, for a regular file, that the file size is
 * exactly header + data), then hands out the data in chunks converted to native byte order.  It
 * keeps at most one 1 MiB buffer; chunks of 1 MiB or more are read straight into the caller's
 * buffer.  Returns NULL with err set on failure; *hdr is then zeroed.  On success *hdr receives
 * dtype, ndim, shape, count and fortran_order, with data NULL. */
typedef struct fl_npy_reader fl_npy_reader;
fl_npy_reader *fl_npy_reader_open(const char *path, fl_array *hdr, char *err, size_t errlen);

/* Reads up to max_elems elements into buf (native order).  Returns the number read, 0 once all
 * elements were handed out (or when max_elems is 0), or -1 with err set: truncated data, trailing
 * data (checked by the call that hands out the last element), an I/O error, or a reader that
 * already failed. */
long long fl_npy_reader_read(fl_npy_reader *r, void *buf, size_t max_elems, char *err, size_t errlen);

/* Closes the file and frees r.  Safe on NULL. */
void fl_npy_reader_close(fl_npy_reader *r);

/* Streaming writer: writes to a temporary file beside path; commit renames it onto path.
 * open takes dtype, ndim, shape and fortran_order from hdr (count and data are ignored; the
 * element count is the product of the shape).  Writes are buffered in 1 MiB; larger chunks go
 * straight to the file. */
typedef struct fl_npy_writer fl_npy_writer;
fl_npy_writer *fl_npy_writer_open(const char *path, const fl_array *hdr, char *err, size_t errlen);

/* Appends n_elems native-order elements from buf.  More elements than the shape holds, or an I/O
 * error, returns nonzero with err set, and every later write and the commit fail too; the caller
 * still owns w and must commit or abort it. */
int fl_npy_writer_write(fl_npy_writer *w, const void *buf, size_t n_elems, char *err, size_t errlen);

/* Checks that exactly count elements were written, flushes, closes and renames onto path.  Frees w
 * whatever the outcome; on failure the temporary is removed and path is untouched. */
int fl_npy_writer_commit(fl_npy_writer *w, char *err, size_t errlen);

/* Removes the temporary file and frees w.  Safe on NULL. */
void fl_npy_writer_abort(fl_npy_writer *w);

#endif /* FL_NPY_H */
