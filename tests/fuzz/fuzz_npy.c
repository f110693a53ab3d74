/* fuzz_npy.c — libFuzzer harness of the .npy reader (numerics/npy.c) and of the one way commands read a
 * tensor from it (numerics/fl_tensor.c): one input is one .npy file, read whole (fl_npy_read), streamed
 * in chunks of 1, 3 and 4096 elements (fl_npy_reader_*), and loaded as float32 (fl_tensor_load_f32).
 * The data a successful read hands out are touched end to end.  make fuzz runs it (Makefile). */
#include "fl_tensor.h"
#include "fuzz.h"
#include "npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512], err[512];
    fuzz_file(path, sizeof path, "x.npy", data, size);

    fl_array a;
    err[0] = 0;
    if (fl_npy_read(&a, path, err, sizeof err) == 0) {
        if (!a.data || a.ndim < 0 || a.ndim > FL_NPY_MAXDIM)
            abort();
        fuzz_touch(a.data, a.count * fl_dtype_size(a.dtype));
    } else if (a.data || !err[0]) {
        abort(); /* a failure leaves *out zeroed and says why */
    }
    fl_array_free(&a);

    static const size_t chunks[] = { 1, 3, 4096 };
    static unsigned char buf[4096 * 8];
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        fl_array h;
        fl_npy_reader *r = fl_npy_reader_open(path, &h, err, sizeof err);
        if (!r)
            break;
        size_t got = 0;
        long long n;
        while ((n = fl_npy_reader_read(r, buf, chunks[c], err, sizeof err)) > 0) {
            if ((size_t)n > chunks[c])
                abort();
            fuzz_touch(buf, (size_t)n * fl_dtype_size(h.dtype));
            got += (size_t)n;
        }
        if (n == 0 && got != h.count)
            abort(); /* the end came before the shape's elements */
        fl_npy_reader_close(r);
    }

    float *x;
    size_t R, C;
    if (fl_tensor_load_f32(&x, &R, &C, path, NULL, size & 1, err, sizeof err) == 0) {
        fuzz_touch(x, R * C * sizeof *x);
        free(x);
    }
    return 0;
}
