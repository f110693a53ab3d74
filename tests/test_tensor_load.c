/* test_tensor_load.c — numerics/fl_tensor.c, the one reader of real tensors as float32 (R, C): every
 * accepted dtype decoded exactly (npy float16/32/64, safetensors BF16/F8_E4M3/F64, a named and a default
 * tensor), the (R, C) shape rule, and each refusal with a message that names the file (missing file,
 * integer dtype, Fortran order, NaN/Inf with their count, an unknown tensor name). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "fl_round.h"
#include "fl_tensor.h"
#include "npy.h"

static char dir[] = "/tmp/fl_tensor_XXXXXX";

static const char *path_of(const char *name)
{
    static char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return p;
}

static void npy(const char *name, fl_dtype dt, int ndim, int64_t d0, int64_t d1, int fortran, const void *data)
{
    fl_array a;
    memset(&a, 0, sizeof a);
    a.dtype = dt, a.ndim = ndim, a.shape[0] = d0, a.shape[1] = d1, a.fortran_order = fortran;
    a.count = (size_t)(ndim == 0 ? 1 : ndim == 1 ? d0 : d0 * d1);
    a.data = (void *)data;
    char err[256];
    CHECK(fl_npy_write(path_of(name), &a, err, sizeof err) == 0, "%s", err);
}

/* A safetensors file: 8-byte little-endian header length, the JSON header, the data. */
static void st(const char *name, const char *header, const void *data, size_t bytes)
{
    FILE *f = fopen(path_of(name), "wb");
    CHECK(f, "create %s", name);
    uint64_t n = strlen(header);
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)(n >> (8 * i));
    CHECK(fwrite(len, 1, 8, f) == 8 && fwrite(header, 1, n, f) == n && fwrite(data, 1, bytes, f) == bytes && fclose(f) == 0,
          "write %s", name);
}

static int load(const char *name, const char *tensor, int finite, float **x, size_t *R, size_t *C, char *err)
{
    return fl_tensor_load_f32(x, R, C, path_of(name), tensor, finite, err, 512);
}

int main(void)
{
    CHECK(mkdtemp(dir), "mkdtemp");
    char err[512];
    float *x;
    size_t R, C;
    /* npy float32 (3, 4) and its (R, C) */
    const float f32[12] = { 1, -2, 0.5f, 3, 4, 5, 6, 7, 8, 9, 10, 0x1p-140f };
    npy("a.npy", FL_DT_F32, 2, 3, 4, 0, f32);
    CHECK(load("a.npy", NULL, 1, &x, &R, &C, err) == 0 && R == 3 && C == 4 && !memcmp(x, f32, sizeof f32), "float32: %s", err);
    free(x);
    /* 1-D is one row; float64 rounds to float32; float16 decodes exactly */
    const double f64[3] = { 0.1, -1e-50, 3.0 };
    npy("b.npy", FL_DT_F64, 1, 3, 0, 0, f64);
    CHECK(load("b.npy", NULL, 1, &x, &R, &C, err) == 0 && R == 1 && C == 3 && x[0] == 0.1f && x[1] == -0.0f && signbit(x[1]),
          "float64: %s", err);
    free(x);
    const uint16_t f16[2] = { 0x3c00, 0x0001 }; /* 1, the smallest subnormal 2^-24 */
    npy("c.npy", FL_DT_F16, 1, 2, 0, 0, f16);
    CHECK(load("c.npy", NULL, 1, &x, &R, &C, err) == 0 && x[0] == 1.0f && x[1] == 0x1p-24f, "float16: %s", err);
    free(x);
    /* refusals, each naming the file */
    const int32_t i32[2] = { 1, 2 };
    npy("d.npy", FL_DT_I32, 1, 2, 0, 0, i32);
    CHECK(load("d.npy", NULL, 1, &x, &R, &C, err) == -1 && !x && strstr(err, "d.npy") && strstr(err, "int32"), "int32: %s", err);
    npy("e.npy", FL_DT_F32, 2, 2, 6, 1, f32);
    CHECK(load("e.npy", NULL, 1, &x, &R, &C, err) == -1 && strstr(err, "e.npy") && strstr(err, "Fortran"), "fortran: %s", err);
    const double big[3] = { 1e300, NAN, 1 }; /* 1e300 overflows float32 */
    npy("f.npy", FL_DT_F64, 1, 3, 0, 0, big);
    CHECK(load("f.npy", NULL, 1, &x, &R, &C, err) == -1 && strstr(err, "f.npy: 2 elements are NaN or Inf"), "non-finite: %s", err);
    CHECK(load("f.npy", NULL, 0, &x, &R, &C, err) == 0 && isinf(x[0]) && isnan(x[1]), "non-finite allowed: %s", err);
    free(x);
    CHECK(load("missing.npy", NULL, 1, &x, &R, &C, err) == -1 && strstr(err, "missing.npy"), "missing: %s", err);
    /* safetensors: the first floating tensor by default (the I32 one is skipped), or the named one */
    const unsigned char data[4 + 8 + 2] = { 1, 0, 0, 0, /* I32 1 */ 0x80, 0x3f, 0x00, 0xc0, 0x49, 0x40, 0x00, 0x00, /* BF16 1, -2, 3.140625, 0 */
                                            0x7e, 0xfe /* e4m3 448, -448 */ };
    st("g.safetensors",
       "{\"n\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]},"
       "\"w\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[4,12]},"
       "\"q\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[12,14]}}",
       data, sizeof data);
    CHECK(load("g.safetensors", NULL, 1, &x, &R, &C, err) == 0 && R == 2 && C == 2 && x[0] == 1 && x[1] == -2 &&
              x[2] == 3.140625f && x[3] == 0,
          "bf16 tensor: %s", err);
    free(x);
    CHECK(load("g.safetensors", "q", 1, &x, &R, &C, err) == 0 && R == 1 && C == 2 && x[0] == 448 && x[1] == -448, "e4m3: %s", err);
    free(x);
    CHECK(load("g.safetensors", "nope", 1, &x, &R, &C, err) == -1 && strstr(err, "g.safetensors: no tensor named 'nope'"), "%s", err);
    CHECK(load("g.safetensors", "n", 1, &x, &R, &C, err) == -1 && strstr(err, "need a non-empty floating tensor"), "%s", err);
    const char *files[] = { "a.npy", "b.npy", "c.npy", "d.npy", "e.npy", "f.npy", "g.safetensors" };
    for (size_t i = 0; i < FL_ARRAY_LEN(files); i++)
        unlink(path_of(files[i]));
    rmdir(dir);
    PASS("test_tensor_load");
}
