/* fuzz_safetensors.c — libFuzzer harness of the .safetensors reader (numerics/safetensors.c) and of the
 * one way commands read a tensor from it (numerics/fl_tensor.c): one input is one .safetensors file,
 * opened and validated (fl_st_open), every tensor's bytes touched and looked up by name, then loaded as
 * float32 (fl_tensor_load_f32) by default and by the name of its last tensor.  make fuzz runs it. */
#include "fl_tensor.h"
#include "fuzz.h"
#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512], err[512], name[256] = "";
    fuzz_file(path, sizeof path, "x.safetensors", data, size);

    err[0] = 0;
    fl_st_file *f = fl_st_open(path, err, sizeof err);
    if (f) {
        for (size_t i = 0; i < fl_st_count(f); i++) {
            const fl_st_tensor *t = fl_st_tensor_at(f, i);
            if (t->end < t->begin || t->end - t->begin != t->count * fl_st_dtype_size(t->dtype) || t->ndim < 0 ||
                t->ndim > FL_ST_MAXDIM)
                abort();
            fuzz_touch(t->data, (size_t)(t->end - t->begin));
            if (fl_st_find(f, t->name) == NULL)
                abort();
            snprintf(name, sizeof name, "%s", t->name);
        }
        fl_st_close(f);
    } else if (!err[0]) {
        abort();
    }

    float *x;
    size_t R, C;
    for (int k = 0; k < 2; k++)
        if (fl_tensor_load_f32(&x, &R, &C, path, k && name[0] ? name : NULL, size & 1, err, sizeof err) == 0) {
            fuzz_touch(x, R * C * sizeof *x);
            free(x);
        }
    return 0;
}
