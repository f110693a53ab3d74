/* test_nvfp4.c — NVFP4 fake quantisation (numerics/scaling.h, fl_nvfp4_fake_quantize) on the cast
 * engine:
 *   1. the tensor scale: 2688 / amax, 1 for amax 0, Inf or NaN, FLT_MAX where the quotient overflows;
 *   2. values, block-scale codes and counts against a plain loop written from the definition in
 *      scaling.h (fl_encode_f32_bits / fl_decode_f32 step by step), at every instruction-set level the
 *      machine has, on a 41 x 149 tensor (a partial last block) from a printed seed: heavy tails,
 *      outlier channels, a zero block, blocks whose scale underflows, subnormals, +-Inf and NaN;
 *   3. the defining property: where a block's e4m3 scale is normal and below 448, its largest
 *      element encodes to +-6;
 *   4. SR: reproducible for a key, every output one of the two e2m1 neighbours, and unbiased (the
 *      mean of 4096 keys within 5 standard errors of the value);
 *   5. Four Over Six (the map to 6 or to 4 per block, the smaller squared error kept) against the
 *      reference at every level, and never a block's error above the map to 6's.
 * A mismatch prints the element, its input in hex and both outputs. */
#include "check.h"
#include "convert.h"
#include "convert_simd.h"
#include "fl_round.h"
#include "scaling.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { R = 41, C = 149 };
#define SEED 20261127u

static void fill(float *x)
{
    uint64_t s = SEED;
    for (size_t i = 0; i < (size_t)R * C; i++) {
        /* a heavy tail: a uniform magnitude over 2^-20 .. 2^8, random sign */
        const uint64_t u = fl_splitmix64(&s);
        const float m = 1.0f + (float)((u >> 16) & 0x7FFFFF) * 0x1p-23f;
        x[i] = ((u >> 60) & 1 ? -m : m) * ldexpf(1.0f, (int)((u >> 8) % 29) - 20);
    }
    for (size_t r = 0; r < R; r += 3) /* outlier channels */
        x[r * C + 7] *= 3000.0f, x[r * C + 100] *= -700.0f;
    for (size_t j = 16; j < 32; j++) /* row 1, block 1: zeros */
        x[1 * C + j] = j & 1 ? -0.0f : 0.0f;
    for (size_t j = 32; j < 48; j++) /* row 2, block 2: far below the tensor's amax (scale underflows) */
        x[2 * C + j] = (float)((int)j - 40) * 0x1p-40f;
    for (size_t j = 0; j < 16; j++) /* row 3, block 0: float32 subnormals */
        x[3 * C + j] = fl_f32_from_bits((uint32_t)(j * 12345u + 1u));
    x[4 * C + 3] = INFINITY; /* row 4: +-Inf; row 5: NaN */
    x[4 * C + 40] = -INFINITY;
    x[5 * C + 20] = NAN;
    x[6 * C + 7] = 2e5f; /* the tensor's amax */
}

/* One block of the definition of scaling.h, element by element: the code of its scale
   e4m3(amax_b * t), y, and the counts added to *st. */
static uint8_t ref_block(float *y, fl_quant_stats *st, const float *x, size_t len, float t, float s_dec)
{
    const fl_format_desc *e4 = fl_format_get(FL_FMT_E4M3), *e2 = fl_format_get(FL_FMT_E2M1);
    float amax = 0.0f;
    for (size_t j = 0; j < len; j++)
        if (fabsf(x[j]) > amax)
            amax = fabsf(x[j]);
    const uint32_t sb = fl_encode_f32_bits(e4, fl_f32_bits(amax * t), FL_RND_NE, FL_OVF_SATURATE, 0);
    const float d = fl_decode_f32(e4, sb);
    float enc = 1.0f / (d * s_dec);
    if (!(enc < FLT_MAX))
        enc = FLT_MAX;
    for (size_t j = 0; j < len; j++) {
        const float xv = x[j], v = xv * enc;
        const float q = fl_decode_f32(e2, fl_encode_f32_bits(e2, fl_f32_bits(v), FL_RND_NE, FL_OVF_SATURATE, 0));
        y[j] = q * d * s_dec;
        st->n++;
        if (xv != xv) {
            st->n_nan++;
            continue;
        }
        if (d == 0.0f) {
            st->n_ftz += xv != 0.0f;
            continue;
        }
        st->n_sat += fabsf(v) > 6.0f;
        st->n_clip += fabsf(v) >= 7.0f; /* the RNE overflow boundary of e2m1 (the tie goes up) */
        st->n_ftz += xv != 0.0f && q == 0.0f;
    }
    return (uint8_t)sb;
}

static double sse(const float *y, const float *x, size_t len)
{
    double e = 0;
    for (size_t j = 0; j < len; j++)
        if (x[j] == x[j])
            e += ((double)y[j] - x[j]) * ((double)y[j] - x[j]);
    return e;
}

/* The tensor: every block, standard (f46 = 0) or Four Over Six (the smaller squared error of the maps
   to 6 and to 4, 6 on a tie); *fours counts the blocks mapped to 4. */
static void reference(float *y, uint8_t *code, fl_quant_stats *st, const float *x, float s_enc, int f46, int *fours)
{
    const float s_dec = 1.0f / s_enc;
    const size_t nc = (C + 15) / 16;
    *fours = 0;
    for (size_t i = 0; i < R; i++)
        for (size_t b = 0; b < nc; b++) {
            const size_t j0 = 16 * b, len = C - j0 < 16 ? C - j0 : 16;
            const float *xb = x + i * C + j0;
            if (!f46) {
                code[i * nc + b] = ref_block(y + i * C + j0, st, xb, len, s_enc * (1.0f / 6.0f), s_dec);
                continue;
            }
            float y6[16], y4[16];
            fl_quant_stats a = { 0 }, c = { 0 };
            const uint8_t s6 = ref_block(y6, &a, xb, len, s_enc * (1.0f / 6.0f), s_dec);
            const uint8_t s4 = ref_block(y4, &c, xb, len, s_enc * 0.25f, s_dec);
            const int four = sse(y4, xb, len) < sse(y6, xb, len);
            *fours += four;
            memcpy(y + i * C + j0, four ? y4 : y6, len * sizeof *y);
            code[i * nc + b] = four ? s4 : s6;
            const fl_quant_stats *k = four ? &c : &a;
            st->n += k->n, st->n_nan += k->n_nan, st->n_sat += k->n_sat, st->n_clip += k->n_clip, st->n_ftz += k->n_ftz;
        }
}

static void check_global_scale(void)
{
    CHECK(fl_nvfp4_global_scale(0.0f, 0) == 1.0f && fl_nvfp4_global_scale(INFINITY, 0) == 1.0f &&
              fl_nvfp4_global_scale(NAN, 1) == 1.0f, "s_enc of amax 0 / Inf / NaN is not 1");
    CHECK(fl_nvfp4_global_scale(448.0f, 0) == 6.0f && fl_nvfp4_global_scale(2688.0f, 0) == 1.0f, "s_enc(448) = %a",
          fl_nvfp4_global_scale(448.0f, 0));
    CHECK(fl_nvfp4_global_scale(0x1p-149f, 0) == FLT_MAX, "s_enc of the smallest subnormal: %a",
          fl_nvfp4_global_scale(0x1p-149f, 0));
    CHECK(fl_nvfp4_global_scale(3.0f, 0) == 2688.0f / 3.0f && fl_nvfp4_global_scale(3.0f, 1) == 512.0f, "s_enc(3)");
}

static void check_against_reference(const float *x)
{
    const size_t nc = (C + 15) / 16;
    float *y = malloc(sizeof(float) * R * C), *want = malloc(sizeof(float) * R * C);
    uint8_t *code = malloc(R * nc), *wcode = malloc(R * nc);
    CHECK(y && want && code && wcode, "out of memory");
    /* the tensor's amax is Inf (which gives s_enc = 1); scale as for its largest finite value, 2e5 */
    CHECK(fl_nvfp4_global_scale(fl_amax_f32(NULL, x, (size_t)R * C), 0) == 1.0f, "s_enc of a tensor with an Inf");
    const float s_enc = fl_nvfp4_global_scale(2e5f, 0);
    fl_quant_stats ws = { 0 };
    int fours;
    reference(want, wcode, &ws, x, s_enc, 0, &fours);
    /* the data reach every count, or the test tests less (clipped: the two Infs, and elements of blocks
       whose e4m3 scale is subnormal, where the scale rounds coarsely) */
    CHECK(ws.n_sat && ws.n_ftz && ws.n_nan == 1 && ws.n_clip >= 2, "reference counts sat %zu ftz %zu nan %zu clip %zu",
          ws.n_sat, ws.n_ftz, ws.n_nan, ws.n_clip);
    CHECK(wcode[1 * nc + 1] == 0 && wcode[2 * nc + 2] == 0, "the zero and the underflowing block have scale codes %u %u",
          wcode[1 * nc + 1], wcode[2 * nc + 2]);
    for (int isa = FL_ISA_SCALAR; isa <= fl_cpu_isa(); isa++) {
        fl_convert_set_isa(isa);
        fl_quant_stats st = { 0 };
        memset(y, 0xA5, sizeof(float) * R * C);
        fl_nvfp4_fake_quantize(y, code, &st, x, R, C, s_enc, 0, 0, 0);
        for (size_t i = 0; i < (size_t)R * C; i++)
            CHECK(fl_f32_bits(y[i]) == fl_f32_bits(want[i]) || (y[i] != y[i] && want[i] != want[i]),
                  "%s: element (%zu, %zu), x = %a (0x%08x): got %a want %a", fl_isa_name(isa), i / C, i % C, x[i],
                  fl_f32_bits(x[i]), y[i], want[i]);
        CHECK(memcmp(code, wcode, R * nc) == 0, "%s: block scale codes differ", fl_isa_name(isa));
        CHECK(st.n == ws.n && st.n_nan == ws.n_nan && st.n_sat == ws.n_sat && st.n_clip == ws.n_clip &&
                  st.n_ftz == ws.n_ftz,
              "%s: counts n %zu nan %zu sat %zu clip %zu ftz %zu, want %zu %zu %zu %zu %zu", fl_isa_name(isa), st.n,
              st.n_nan, st.n_sat, st.n_clip, st.n_ftz, ws.n, ws.n_nan, ws.n_sat, ws.n_clip, ws.n_ftz);
    }
    fl_convert_set_isa(-1);

    /* 3: a normal block scale below 448 takes the block's amax to +-6 */
    const fl_format_desc *e4 = fl_format_get(FL_FMT_E4M3);
    const float s_dec = 1.0f / s_enc;
    int normal_blocks = 0;
    for (size_t i = 0; i < R; i++)
        for (size_t b = 0; b < nc; b++) {
            const float d = fl_decode_f32(e4, code[i * nc + b]);
            if (!(d >= 0x1p-6f && d < 448.0f))
                continue;
            const size_t j0 = 16 * b, len = C - j0 < 16 ? C - j0 : 16;
            size_t jm = j0;
            for (size_t j = j0; j < j0 + len; j++)
                if (fabsf(x[i * C + j]) > fabsf(x[i * C + jm]))
                    jm = j;
            CHECK(fabsf(y[i * C + jm]) == 6.0f * d * s_dec, "block (%zu, %zu): amax %a gives %a, not 6 x scale %a", i, b,
                  x[i * C + jm], y[i * C + jm], d);
            normal_blocks++;
        }
    CHECK(normal_blocks > R * (int)nc / 2, "only %d blocks with a normal scale", normal_blocks);
    /* other tensor scales (any positive value is allowed): values and codes again, at the default level */
    static const float other[] = { 1.0f, 0.37f, 1234.5f, 3.0f / 7.0f, 2688.0f / 3e4f };
    for (size_t k = 0; k < sizeof other / sizeof other[0]; k++) {
        fl_quant_stats a = { 0 }, b = { 0 };
        reference(want, wcode, &b, x, other[k], 0, &fours);
        fl_nvfp4_fake_quantize(y, code, &a, x, R, C, other[k], 0, 0, 0);
        for (size_t i = 0; i < (size_t)R * C; i++)
            CHECK(fl_f32_bits(y[i]) == fl_f32_bits(want[i]) || (y[i] != y[i] && want[i] != want[i]),
                  "s_enc %a: element (%zu, %zu), x = %a: got %a want %a", other[k], i / C, i % C, x[i], y[i], want[i]);
        CHECK(memcmp(code, wcode, R * nc) == 0 && a.n_ftz == b.n_ftz && a.n_sat == b.n_sat,
              "s_enc %a: scale codes or counts differ", other[k]);
    }
    printf("  %d x %d tensor (seed %u), %zu blocks: values, scale codes and counts equal the definition at every level "
           "(sat %zu, clip %zu, flushed %zu, NaN %zu), and at 5 other tensor scales; %d normal-scale blocks map their "
           "amax to 6\n",
           R, C, SEED, (size_t)R * nc, ws.n_sat, ws.n_clip, ws.n_ftz, ws.n_nan, normal_blocks);
    free(y), free(want), free(code), free(wcode);
}

/* 5: Four Over Six against the reference, at every level; no block's error above the standard map's
   under the same tensor scale, and both choices taken somewhere. */
static void check_four_over_six(const float *x)
{
    const size_t nc = (C + 15) / 16;
    float *y = malloc(sizeof(float) * R * C), *want = malloc(sizeof(float) * R * C), *y6 = malloc(sizeof(float) * R * C);
    uint8_t *code = malloc(R * nc), *wcode = malloc(R * nc);
    CHECK(y && want && y6 && code && wcode, "out of memory");
    const float s_enc = fl_nvfp4_global_scale(2e5f, 1);
    fl_quant_stats ws = { 0 };
    int fours;
    reference(want, wcode, &ws, x, s_enc, 1, &fours);
    CHECK(fours > 0 && fours < (int)(R * nc), "Four Over Six chose 4 in %d of %zu blocks", fours, (size_t)R * nc);
    for (int isa = FL_ISA_SCALAR; isa <= fl_cpu_isa(); isa++) {
        fl_convert_set_isa(isa);
        fl_quant_stats st = { 0 };
        fl_nvfp4_fake_quantize(y, code, &st, x, R, C, s_enc, 1, 0, 0);
        for (size_t i = 0; i < (size_t)R * C; i++)
            CHECK(fl_f32_bits(y[i]) == fl_f32_bits(want[i]) || (y[i] != y[i] && want[i] != want[i]),
                  "4/6 at %s: element (%zu, %zu), x = %a: got %a want %a", fl_isa_name(isa), i / C, i % C, x[i], y[i],
                  want[i]);
        CHECK(memcmp(code, wcode, R * nc) == 0 && st.n_sat == ws.n_sat && st.n_ftz == ws.n_ftz && st.n_clip == ws.n_clip &&
                  st.n_nan == ws.n_nan,
              "4/6 at %s: scale codes or counts differ", fl_isa_name(isa));
    }
    fl_convert_set_isa(-1);
    fl_nvfp4_fake_quantize(y6, NULL, NULL, x, R, C, s_enc, 0, 0, 0);
    for (size_t i = 0; i < R; i++)
        for (size_t b = 0; b < nc; b++) {
            const size_t j0 = 16 * b, len = C - j0 < 16 ? C - j0 : 16;
            const double e46 = sse(y + i * C + j0, x + i * C + j0, len), e6 = sse(y6 + i * C + j0, x + i * C + j0, len);
            CHECK(e46 <= e6 || isinf(e6), "block (%zu, %zu): Four Over Six's error %g above the map to 6's %g", i, b, e46, e6);
        }
    printf("  Four Over Six (tensor scale 1536 / amax): equal to the definition at every level; %d of %zu blocks "
           "mapped to 4, none with a larger squared error than the map to 6\n",
           fours, (size_t)R * nc);
    free(y), free(want), free(y6), free(code), free(wcode);
}

/* 4: one block with amax 6 under s_enc = 1: the block scale is 1 and y = q, so SR is on the bare grid. */
static void check_sr(void)
{
    float x[16], y[16], y2[16];
    for (int j = 0; j < 16; j++)
        x[j] = j == 0 ? 6.0f : j & 1 ? 1.25f : -2.5f; /* 1.25 between 1 and 1.5; 2.5 between 2 and 3 */
    double sum_a = 0, sum_b = 0;
    const int keys = 4096;
    for (int k = 0; k < keys; k++) {
        fl_nvfp4_fake_quantize(y, NULL, NULL, x, 1, 16, 1.0f, 0, 1, (uint64_t)k);
        fl_nvfp4_fake_quantize(y2, NULL, NULL, x, 1, 16, 1.0f, 0, 1, (uint64_t)k);
        CHECK(memcmp(y, y2, sizeof y) == 0, "SR with key %d is not reproducible", k);
        CHECK(y[0] == 6.0f, "SR of 6 gives %a", y[0]);
        for (int j = 1; j < 16; j++) {
            if (j & 1) {
                CHECK(y[j] == 1.0f || y[j] == 1.5f, "SR of 1.25 gives %a", y[j]);
                sum_a += y[j];
            } else {
                CHECK(y[j] == -2.0f || y[j] == -3.0f, "SR of -2.5 gives %a", y[j]);
                sum_b += y[j];
            }
        }
    }
    /* each draw has variance 1/4 of the gap squared: SE = gap / 2 / sqrt(N) */
    const double na = keys * 8.0, nb = keys * 7.0;
    const double ma = sum_a / na, mb = sum_b / nb, sea = 0.5 / 2 / sqrt(na), seb = 1.0 / 2 / sqrt(nb);
    CHECK(fabs(ma - 1.25) < 5 * sea && fabs(mb + 2.5) < 5 * seb, "SR means %.6f (1.25) and %.6f (-2.5)", ma, mb);
    printf("  SR: %d keys reproducible, outputs on the two neighbours, means %.5f (1.25) and %.5f (-2.5)\n", keys, ma,
           mb);
}

int main(void)
{
    float *x = malloc(sizeof(float) * R * C);
    CHECK(x, "out of memory");
    fill(x);
    check_global_scale();
    check_against_reference(x);
    check_four_over_six(x);
    check_sr();
    free(x);
    PASS("test_nvfp4");
}
