/* test_cast_scaling.c — the scaled casts of `fp8lab quant` on the cast engine against the scaling
 * library's own loops, bit for bit and count for count:
 *   fl_fake_quantize     == fl_quantize then fl_dequantize   (tensor, row, 1x128, 128x128 scales;
 *                                                            e4m3, e5m2, and e2m1 on the reference loop)
 *   fl_mx_fake_quantize  == fl_mx_quantize then fl_mx_dequantize   (e4m3, e5m2, e3m2, e2m3, e2m1;
 *                                                                  floor and ceil rules)
 * at every instruction-set level the machine has (fl_convert_set_isa), on a 67 x 300 tensor (partial
 * 1x128 tiles and 32-element blocks) whose values span every binade, with zeros, subnormals, +-Inf,
 * NaN and values beyond every format's range, from a printed seed.  A mismatch prints the element,
 * its input in hex and both outputs. */
#include "check.h"
#include "convert.h"
#include "convert_simd.h"
#include "fl_round.h"
#include "scaling.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { R = 67, C = 300 };

/* Every 8th element a raw bit pattern (NaN, Inf, subnormals included), the rest log-uniform magnitudes
   over 2^-140 .. 2^20 with random signs, some zeros; one row of zeros and one of huge values. */
static void fill(float *x, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < (size_t)R * C; i++) {
        const uint64_t u = fl_splitmix64(&s);
        if (u % 8 == 0)
            x[i] = fl_f32_from_bits((uint32_t)(u >> 32));
        else if (u % 53 == 1)
            x[i] = (u >> 40) & 1 ? -0.0f : 0.0f;
        else {
            const int e = (int)((u >> 8) % 161) - 140;
            const float m = 1.0f + (float)((u >> 16) & 0x7FFFFF) * 0x1p-23f;
            x[i] = ((u >> 60) & 1 ? -m : m) * fl_pow2f(e);
        }
    }
    for (size_t j = 0; j < C; j++) {
        x[5 * C + j] = 0.0f;
        x[9 * C + j] = (j & 1 ? -3e38f : 1e30f);
    }
}

static int same_value(float a, float b)
{
    return fl_f32_bits(a) == fl_f32_bits(b) || (a != a && b != b);
}

static void check_stats(const fl_quant_stats *a, const fl_quant_stats *b, const char *what)
{
    CHECK(a->n == b->n && a->n_nan == b->n_nan && a->n_sat == b->n_sat && a->n_clip == b->n_clip && a->n_ftz == b->n_ftz,
          "%s: counts n/nan/sat/clip/ftz %zu/%zu/%zu/%zu/%zu (engine) vs %zu/%zu/%zu/%zu/%zu (library)", what, a->n,
          a->n_nan, a->n_sat, a->n_clip, a->n_ftz, b->n, b->n_nan, b->n_sat, b->n_clip, b->n_ftz);
}

static void check_values(const float *y, const float *ref, const float *x, const char *what)
{
    for (size_t i = 0; i < (size_t)R * C; i++)
        CHECK(same_value(y[i], ref[i]), "%s: element %zu (row %zu), x = %a (0x%08x): engine %a (0x%08x), library %a (0x%08x)",
              what, i, i / C, x[i], fl_f32_bits(x[i]), y[i], fl_f32_bits(y[i]), ref[i], fl_f32_bits(ref[i]));
}

int main(void)
{
    const uint64_t seed = 0xC0FFEE2026ull;
    printf("test_cast_scaling: seed 0x%llx\n", (unsigned long long)seed);
    float *x = malloc(sizeof(float) * R * C), *y = malloc(sizeof(float) * R * C), *ref = malloc(sizeof(float) * R * C);
    uint8_t *q = malloc((size_t)R * C), *mx = malloc((size_t)R * C), *mxr = malloc((size_t)R * C);
    float *amax = malloc(sizeof(float) * R * C), *sc = malloc(sizeof(float) * R * C), *si = malloc(sizeof(float) * R * C);
    CHECK(x && y && ref && q && mx && mxr && amax && sc && si, "out of memory");
    fill(x, seed);

    static const int isas[] = { FL_ISA_SCALAR, FL_ISA_AVX2, FL_ISA_AVX512 };
    static const fl_format fmts[] = { FL_FMT_E4M3, FL_FMT_E5M2, FL_FMT_E2M1 };
    static const fl_format mx_fmts[] = { FL_FMT_E4M3, FL_FMT_E5M2, FL_FMT_E3M2, FL_FMT_E2M3, FL_FMT_E2M1 };
    const fl_block blocks[] = { FL_BLOCK_TENSOR, FL_BLOCK_ROW, FL_BLOCK_1X128, FL_BLOCK_128X128, { 3, 50 } };
    int levels = 0;
    for (size_t l = 0; l < sizeof isas / sizeof *isas; l++) {
        if (isas[l] > fl_cpu_isa())
            continue;
        fl_convert_set_isa(isas[l]);
        levels++;
        char what[160];
        fl_quant_stats tot = { 0 }; /* the data must reach every count somewhere, or the test tests less */
        for (size_t f = 0; f < sizeof fmts / sizeof *fmts; f++)
            for (size_t bk = 0; bk < sizeof blocks / sizeof *blocks; bk++)
                for (int pow2 = 0; pow2 < 2; pow2++) {
                    size_t nr, nc;
                    fl_block_grid(&nr, &nc, blocks[bk], R, C);
                    fl_amax_blocks(amax, NULL, x, R, C, blocks[bk]);
                    fl_scale_blocks(sc, amax, nr * nc, fmts[f], pow2, 0.0f);
                    fl_scale_invert(si, sc, nr * nc);
                    snprintf(what, sizeof what, "%s %s blocks %zux%zu pow2 %d", fl_isa_name(isas[l]),
                             fl_format_name(fmts[f]), blocks[bk].rows, blocks[bk].cols, pow2);
                    fl_quant_stats a = { 0 }, b = { 0 };
                    fl_fake_quantize(y, &a, x, R, C, sc, si, blocks[bk], fmts[f]);
                    fl_quantize(q, &b, x, R, C, sc, blocks[bk], fmts[f]);
                    fl_dequantize(ref, q, R, C, si, blocks[bk], fmts[f]);
                    check_values(y, ref, x, what);
                    check_stats(&a, &b, what);
                    tot.n_sat += a.n_sat, tot.n_clip += a.n_clip, tot.n_ftz += a.n_ftz, tot.n_nan += a.n_nan;
                }
        for (size_t f = 0; f < sizeof mx_fmts / sizeof *mx_fmts; f++)
            for (int rule = 0; rule < FL_MX_RULE_COUNT; rule++) {
                snprintf(what, sizeof what, "%s MX %s %s", fl_isa_name(isas[l]), fl_format_name(mx_fmts[f]),
                         fl_mx_rule_name((fl_mx_rule)rule));
                fl_quant_stats a = { 0 }, b = { 0 };
                fl_mx_fake_quantize(y, mx, &a, x, R, C, mx_fmts[f], (fl_mx_rule)rule);
                fl_mx_quantize(mxr, q, &b, x, R, C, mx_fmts[f], (fl_mx_rule)rule);
                fl_mx_dequantize(ref, mxr, q, R, C, mx_fmts[f]);
                CHECK(!memcmp(mx, mxr, (size_t)R * ((C + 31) / 32)), "%s: e8m0 codes differ", what);
                check_values(y, ref, x, what);
                check_stats(&a, &b, what);
                tot.n_sat += a.n_sat, tot.n_clip += a.n_clip, tot.n_ftz += a.n_ftz, tot.n_nan += a.n_nan;
            }
        CHECK(tot.n_sat && tot.n_clip && tot.n_ftz && tot.n_nan, "%s: some count is never reached: sat %zu clip %zu ftz %zu nan %zu",
              fl_isa_name(isas[l]), tot.n_sat, tot.n_clip, tot.n_ftz, tot.n_nan);
    }
    printf("levels checked: %d (CPU %s)\n", levels, fl_isa_name(fl_cpu_isa()));
    free(x), free(y), free(ref), free(q), free(mx), free(mxr), free(amax), free(sc), free(si);
    PASS("test_cast_scaling");
}
