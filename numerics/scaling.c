/* scaling.c — amax, scale arrays, quantize/dequantize and delayed scaling (see scaling.h).
 *
 * Every loop here is sequential and visits elements in row-major order, so the results (including
 * the counters) do not depend on threading; the per-element work is the FL_HD functions of
 * scaling.h, which a CUDA kernel calls too.
 */
#include "scaling.h"

#include "cast.h"
#include "convert.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A precondition that stays on in release builds: a wrong argument is a bug in the caller. */
#define FL_REQUIRE(cond)                                                                   \
    do {                                                                                   \
        if (!(cond)) {                                                                     \
            fprintf(stderr, "%s:%d: %s: precondition failed: %s\n", __FILE__, __LINE__,    \
                    __func__, #cond);                                                      \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

static const char *const mx_rule_names[] = { "floor", "ceil" };
static_assert(FL_ARRAY_LEN(mx_rule_names) == FL_MX_RULE_COUNT, "mx_rule_names out of step with fl_mx_rule");

static const char *const amax_algo_names[] = { "max", "most_recent" };
static_assert(FL_ARRAY_LEN(amax_algo_names) == FL_AMAX_ALGO_COUNT,
              "amax_algo_names out of step with fl_amax_algo");

/* The header of a delayed-scaling state is part of the checkpoint format: pin its layout. */
static_assert(sizeof(fl_delayed) == 48, "fl_delayed header layout changed: bump FL_DELAYED_VERSION");
static_assert(offsetof(fl_delayed, steps) == 32 && offsetof(fl_delayed, history) == 48,
              "fl_delayed field offsets changed: bump FL_DELAYED_VERSION");

const char *fl_mx_rule_name(fl_mx_rule r) { return (unsigned)r < FL_MX_RULE_COUNT ? mx_rule_names[r] : "?"; }

int fl_mx_rule_parse(fl_mx_rule *out, const char *name)
{
    for (int i = 0; i < FL_MX_RULE_COUNT; i++)
        if (strcmp(name, mx_rule_names[i]) == 0) {
            *out = (fl_mx_rule)i;
            return 0;
        }
    return -1;
}

const char *fl_amax_algo_name(fl_amax_algo a)
{
    return (unsigned)a < FL_AMAX_ALGO_COUNT ? amax_algo_names[a] : "?";
}

int fl_amax_algo_parse(fl_amax_algo *out, const char *name)
{
    for (int i = 0; i < FL_AMAX_ALGO_COUNT; i++)
        if (strcmp(name, amax_algo_names[i]) == 0) {
            *out = (fl_amax_algo)i;
            return 0;
        }
    return -1;
}

/* Formats a scale can quantize into: one code per byte, a sign, a max (not the e8m0 scale type). */
static int is_element_format(fl_format f)
{
    if ((unsigned)f >= FL_FMT_COUNT)
        return 0;
    const fl_format_desc *d = fl_format_get(f);
    return d->bits <= 8 && d->specials != FL_SPEC_E8M0;
}

/* ---- amax and block grids ---------------------------------------------------------------------- */

static const char *const scaling_names[] = { "none", "delayed", "tensor", "row", "1x128", "mx32", "nvfp4" };
_Static_assert(FL_ARRAY_LEN(scaling_names) == FL_SCALING_COUNT, "scaling names");

const char *fl_scaling_name(fl_scaling s) { return (unsigned)s < FL_SCALING_COUNT ? scaling_names[s] : "?"; }

fl_block fl_scaling_block(fl_scaling s)
{
    switch (s) {
    case FL_SCALING_ROW: return FL_BLOCK_ROW;
    case FL_SCALING_1X128: return FL_BLOCK_1X128;
    case FL_SCALING_MX32: return FL_BLOCK_MX;
    case FL_SCALING_NVFP4: return FL_BLOCK_NVFP4;
    default: return FL_BLOCK_TENSOR;
    }
}

void fl_block_grid(size_t *nr, size_t *nc, fl_block b, size_t R, size_t C)
{
    *nr = b.rows ? (R + b.rows - 1) / b.rows : 1;
    *nc = b.cols ? (C + b.cols - 1) / b.cols : 1;
}

float fl_amax_f32(size_t *nan_count, const float *x, size_t n)
{
    float amax = 0.0f;
    size_t nans = 0;
    for (size_t i = 0; i < n; i++) {
        const uint32_t a = fl_f32_bits(x[i]) & 0x7FFFFFFFu;
        nans += fl_f32_bits_isnan(a);
        amax = fl_fmax_f32(amax, fl_f32_from_bits(a));
    }
    if (nan_count)
        *nan_count = nans;
    return amax;
}

void fl_amax_blocks(float *amax, size_t *nan_count, const float *x, size_t R, size_t C, fl_block b)
{
    size_t nr, nc, nans = 0;
    fl_block_grid(&nr, &nc, b, R, C);
    for (size_t k = 0; k < nr * nc; k++)
        amax[k] = 0.0f;
    for (size_t i = 0; i < R; i++) {
        float *arow = amax + (b.rows ? i / b.rows : 0) * nc;
        for (size_t j = 0; j < C; j++) {
            const uint32_t a = fl_f32_bits(x[i * C + j]) & 0x7FFFFFFFu;
            float *am = arow + (b.cols ? j / b.cols : 0);
            nans += fl_f32_bits_isnan(a);
            *am = fl_fmax_f32(*am, fl_f32_from_bits(a));
        }
    }
    if (nan_count)
        *nan_count = nans;
}

/* ---- scales ------------------------------------------------------------------------------------ */

void fl_scale_blocks(float *scale, const float *amax, size_t n, fl_format fmt, int pow2, float amax_eps)
{
    FL_REQUIRE((unsigned)fmt < FL_FMT_COUNT && fl_format_get(fmt)->specials != FL_SPEC_E8M0);
    const fl_format_desc *f = fl_format_get(fmt);
    for (size_t i = 0; i < n; i++) {
        /* NaN < eps is false: a NaN amax stays NaN and keeps the fallback scale 1, as in TE. */
        const float a = amax[i] < amax_eps ? amax_eps : amax[i];
        scale[i] = fl_scale_from_amax_desc(f, a, 1.0f, 0, pow2);
    }
}

void fl_scale_invert(float *scale_inv, const float *scale, size_t n)
{
    for (size_t i = 0; i < n; i++)
        scale_inv[i] = 1.0f / scale[i];
}

/* ---- quantize / dequantize with float scales --------------------------------------------------- */

/* What saturation did to one element: y = x * scale as computed, q its code. */
typedef struct {
    const fl_format_desc *f;
    double max;      /* fmt_max */
    double boundary; /* RNE overflow boundary */
    int ties_over;   /* the boundary itself overflows */
} sat_info;

static sat_info sat_info_make(fl_format fmt)
{
    sat_info s;
    s.f = fl_format_get(fmt);
    s.max = fl_format_max(fmt);
    s.boundary = fl_format_rne_boundary(fmt, &s.ties_over);
    return s;
}

static void count_element(fl_quant_stats *st, const sat_info *si, float x, float y, uint32_t q)
{
    st->n++;
    const uint32_t uy = fl_f32_bits(y);
    if (fl_f32_bits_isnan(uy)) {
        st->n_nan++;
        return;
    }
    const double ay = (double)fl_f32_from_bits(uy & 0x7FFFFFFFu);
    if (ay > si->max) {
        st->n_sat++;
        if (ay > si->boundary || (ay == si->boundary && si->ties_over))
            st->n_clip++;
        return;
    }
    const uint32_t mag_mask = (1u << (si->f->bits - 1)) - 1u;
    if (x != 0.0f && (q & mag_mask) == 0)
        st->n_ftz++;
}

void fl_quantize(uint8_t *q, fl_quant_stats *st, const float *x, size_t R, size_t C,
                 const float *scale, fl_block b, fl_format fmt)
{
    FL_REQUIRE(is_element_format(fmt));
    const sat_info si = sat_info_make(fmt);
    size_t nr, nc;
    fl_block_grid(&nr, &nc, b, R, C);
    for (size_t i = 0; i < R; i++) {
        const float *srow = scale + (b.rows ? i / b.rows : 0) * nc;
        for (size_t j = 0; j < C; j++) {
            const float s = srow[b.cols ? j / b.cols : 0];
            const float xv = x[i * C + j];
            const uint32_t code = fl_quantize_f32_desc(si.f, xv, s);
            q[i * C + j] = (uint8_t)code;
            if (st)
                count_element(st, &si, xv, xv * s, code);
        }
    }
}

void fl_dequantize(float *x, const uint8_t *q, size_t R, size_t C, const float *scale_inv,
                   fl_block b, fl_format fmt)
{
    FL_REQUIRE(is_element_format(fmt));
    const fl_format_desc *f = fl_format_get(fmt);
    size_t nr, nc;
    fl_block_grid(&nr, &nc, b, R, C);
    for (size_t i = 0; i < R; i++) {
        const float *srow = scale_inv + (b.rows ? i / b.rows : 0) * nc;
        for (size_t j = 0; j < C; j++)
            x[i * C + j] = fl_dequantize_f32_desc(f, q[i * C + j], srow[b.cols ? j / b.cols : 0]);
    }
}

/* ---- MX ---------------------------------------------------------------------------------------- */

uint8_t fl_mx_block_code(size_t *nans, const float *x, size_t n, fl_format elem, fl_mx_rule rule)
{
    FL_REQUIRE(is_element_format(elem) && n <= FL_MX_BLOCK && (unsigned)rule < FL_MX_RULE_COUNT);
    const fl_format_desc *f = fl_format_get(elem);
    const float amax = fl_amax_f32(nans, x, n);
    /* NaN blocks (code 0xFF, see scaling.h): under the floor rule any NaN (an Inf needs nothing
       here: amax = Inf already gives 0xFF); under the ceil rule only where the element format
       cannot store the NaN itself. */
    const int nan_block = *nans && (rule == FL_MX_FLOOR || f->specials == FL_SPEC_NONE);
    return (uint8_t)fl_mx_scale_code_desc(f, nan_block ? fl_f32_from_bits(0x7FC00000u) : amax, rule);
}

void fl_mx_quantize_block(uint8_t *scale_code, uint8_t *q, fl_quant_stats *st, const float *x,
                          size_t n, fl_format elem, fl_mx_rule rule)
{
    size_t nans;
    const uint32_t code = fl_mx_block_code(&nans, x, n, elem, rule);
    const sat_info si = sat_info_make(elem);
    *scale_code = (uint8_t)code;
    if (code == 0xFFu) {
        for (size_t i = 0; i < n; i++)
            q[i] = 0;
        if (st) {
            st->n += n;
            st->n_nan += nans;
        }
        return;
    }
    const float mul = fl_mx_mul_from_code(code);
    for (size_t i = 0; i < n; i++) {
        const uint32_t c = fl_quantize_f32_desc(si.f, x[i], mul);
        q[i] = (uint8_t)c;
        if (st)
            count_element(st, &si, x[i], x[i] * mul, c);
    }
}

void fl_mx_dequantize_block(float *x, uint8_t scale_code, const uint8_t *q, size_t n, fl_format elem)
{
    FL_REQUIRE(is_element_format(elem) && n <= FL_MX_BLOCK);
    const fl_format_desc *f = fl_format_get(elem);
    const float scale = fl_mx_scale_from_code(scale_code);
    for (size_t i = 0; i < n; i++)
        x[i] = fl_decode_f32(f, q[i]) * scale;
}

void fl_mx_quantize(uint8_t *scale, uint8_t *q, fl_quant_stats *st, const float *x, size_t R, size_t C,
                    fl_format elem, fl_mx_rule rule)
{
    const size_t nc = (C + FL_MX_BLOCK - 1) / FL_MX_BLOCK;
    for (size_t i = 0; i < R; i++)
        for (size_t jb = 0; jb < nc; jb++) {
            const size_t j0 = jb * FL_MX_BLOCK;
            const size_t n = C - j0 < FL_MX_BLOCK ? C - j0 : FL_MX_BLOCK;
            fl_mx_quantize_block(&scale[i * nc + jb], q + i * C + j0, st, x + i * C + j0, n, elem, rule);
        }
}

void fl_mx_dequantize(float *x, const uint8_t *scale, const uint8_t *q, size_t R, size_t C, fl_format elem)
{
    const size_t nc = (C + FL_MX_BLOCK - 1) / FL_MX_BLOCK;
    for (size_t i = 0; i < R; i++)
        for (size_t jb = 0; jb < nc; jb++) {
            const size_t j0 = jb * FL_MX_BLOCK;
            const size_t n = C - j0 < FL_MX_BLOCK ? C - j0 : FL_MX_BLOCK;
            fl_mx_dequantize_block(x + i * C + j0, scale[i * nc + jb], q + i * C + j0, n, elem);
        }
}

/* ---- fake quantisation on the cast engine --------------------------------------------------------- */

/* The engine's counts into fl_quant_stats (the same definitions for a cast without smoothing). */
static void add_cast_counts(fl_quant_stats *st, const fl_cast_counts *k, size_t n)
{
    st->n += n;
    st->n_nan += k->nan_in;
    st->n_sat += k->sat;
    st->n_clip += k->clip;
    st->n_ftz += k->ftz;
}

void fl_fake_quantize(float *y, fl_quant_stats *st, const float *x, size_t R, size_t C, const float *scale,
                      const float *scale_inv, fl_block b, fl_format fmt)
{
    FL_REQUIRE(is_element_format(fmt));
    const fl_cast_fmt cf = { .fmt = fmt };
    size_t nr, nc;
    fl_block_grid(&nr, &nc, b, R, C);
    const size_t bc = b.cols ? b.cols : C;
    fl_cast_counts k = { 0 };
    for (size_t i = 0; i < R; i++)
        for (size_t jb = 0; jb < nc; jb++) {
            const size_t j0 = jb * bc, len = C - j0 < bc ? C - j0 : bc;
            const size_t bi = (b.rows ? i / b.rows : 0) * nc + jb;
            const fl_cast_scales cs = { .rs = 1.0f, .rsi = 1.0f, .s = scale[bi], .si = scale_inv[bi] };
            fl_cast_fq_span(y + i * C + j0, x + i * C + j0, len, &cf, &cs, &k, NULL, NULL);
        }
    if (st)
        add_cast_counts(st, &k, R * C);
}

void fl_mx_fake_quantize(float *y, uint8_t *scale, fl_quant_stats *st, const float *x, size_t R, size_t C,
                         fl_format elem, fl_mx_rule rule)
{
    const fl_cast_fmt cf = { .fmt = elem };
    fl_mx_fake_quantize_cast(y, scale, st, x, R, C, &cf, rule);
}

void fl_mx_fake_quantize_cast(float *y, uint8_t *scale, fl_quant_stats *st, const float *x, size_t R, size_t C,
                              const fl_cast_fmt *cf, fl_mx_rule rule)
{
    const size_t nc = (C + FL_MX_BLOCK - 1) / FL_MX_BLOCK;
    fl_cast_counts k = { 0 };
    /* rows on the OpenMP threads; the counts are integers (their sum does not depend on the split) */
#pragma omp parallel for schedule(static) reduction(fl_cnt_add : k) if (R * C >= 65536 && !omp_in_parallel())
    for (size_t i = 0; i < R; i++)
        for (size_t jb = 0; jb < nc; jb++) {
            const size_t j0 = jb * FL_MX_BLOCK, len = C - j0 < FL_MX_BLOCK ? C - j0 : FL_MX_BLOCK;
            size_t nans;
            const uint8_t code = fl_mx_block_code(&nans, x + i * C + j0, len, cf->fmt, rule);
            scale[i * nc + jb] = code;
            if (code == 0xFFu) { /* a NaN block: every element decodes to NaN */
                for (size_t j = 0; j < len; j++)
                    y[i * C + j0 + j] = fl_f32_from_bits(0x7FC00000u);
                k.nan_in += nans;
                continue;
            }
            /* x 2^(127 - code) to the element grid, back by 2^(code - 127): both exact */
            const fl_cast_scales cs = { .rs = 1.0f, .rsi = 1.0f, .s = fl_mx_mul_from_code(code),
                                        .si = fl_mx_scale_from_code(code), .off = i * C + j0 };
            fl_cast_fq_span(y + i * C + j0, x + i * C + j0, len, cf, &cs, &k, NULL, NULL);
        }
    if (st)
        add_cast_counts(st, &k, R * C);
}

/* ---- NVFP4 --------------------------------------------------------------------------------------- */

float fl_nvfp4_global_scale(float amax, int four_over_six)
{
    if (!(amax > 0.0f) || isinf(amax))
        return 1.0f;
    const float s = (four_over_six ? 1536.0f : 2688.0f) / amax; /* 6 x 256, 6 x 448 */
    return s < FLT_MAX ? s : FLT_MAX;
}

/* One tile of NVFP4 (scaling.h): rows x len elements of x (row stride ldx) whose block scale decodes to
   dec_sb (the e4m3 code's value), fake-quantised into y (row stride ldy), counts into *k.  off: the
   stream index of x[0]. */
static void nvfp4_tile(float *y, size_t ldy, const float *x, size_t ldx, size_t rows, size_t len, float dec_sb,
                       float s_dec, const fl_cast_fmt *cf, uint64_t off, fl_cast_counts *k)
{
    /* y = q * dec(sb) * s_dec: the engine's q * si * rsi */
    fl_cast_scales cs = { .rs = 1.0f, .rsi = s_dec, .s = fl_nvfp4_enc_scale(dec_sb, s_dec), .si = dec_sb };
    for (size_t r = 0; r < rows; r++) {
        cs.off = off + r * ldx;
        if (dec_sb != 0.0f) {
            if (cf->reference) /* the engine's reference loop (tests) */
                fl_cast_fq_span(y + r * ldy, x + r * ldx, len, cf, &cs, k, NULL, NULL);
            else
                fl_cast_fq_e2m1(y + r * ldy, x + r * ldx, len, cf, &cs, k);
            continue;
        }
        /* the block scale is 0: every element decodes to a zero (x * FLT_MAX saturates, and q * 0 = 0),
           so the nonzero finite ones count as flushed, none as saturated */
        fl_cast_counts kb = { 0 };
        fl_cast_fq_span(y + r * ldy, x + r * ldx, len, cf, &cs, &kb, NULL, NULL);
        k->nan_in += kb.nan_in;
        for (size_t j = 0; j < len; j++)
            k->ftz += x[r * ldx + j] != 0.0f && isfinite(x[r * ldx + j]);
    }
}

/* sum (y - x)^2 over a tile's non-NaN x (Inf: its y is finite, so +Inf; both candidates alike);
   y has row stride len */
static double tile_sse(const float *y, const float *x, size_t ldx, size_t rows, size_t len)
{
    double e = 0;
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < len; j++) {
            const double xv = x[r * ldx + j], d = (double)y[r * len + j] - xv;
            if (xv == xv)
                e += d * d;
        }
    return e;
}

void fl_nvfp4_fake_quantize(float *y, uint8_t *scale, fl_quant_stats *st, const float *x, size_t R, size_t C,
                            float s_enc, int four_over_six, int sr, uint64_t key)
{
    fl_nvfp4_fake_quantize_tiles(y, scale, st, x, R, C, 1, s_enc, four_over_six, sr, key, 0);
}

void fl_nvfp4_fake_quantize_tiles(float *y, uint8_t *scale, fl_quant_stats *st, const float *x, size_t R, size_t C,
                                  size_t br, float s_enc, int four_over_six, int sr, uint64_t key, int reference)
{
    FL_REQUIRE(s_enc > 0.0f && s_enc <= FLT_MAX);
    FL_REQUIRE(br >= 1 && br <= FL_NVFP4_BLOCK);
    const fl_cast_fmt cf = { .fmt = FL_FMT_E2M1, .sr = sr, .key = key, .reference = reference };
    const float s_dec = 1.0f / s_enc, t6 = s_enc * (1.0f / 6.0f), t4 = s_enc * 0.25f;
    const size_t nc = (C + FL_NVFP4_BLOCK - 1) / FL_NVFP4_BLOCK, nr = (R + br - 1) / br;
    float e4[256]; /* the e4m3 codes' values */
    for (uint32_t c = 0; c < 256; c++)
        e4[c] = fl_decode_f32(fl_format_get(FL_FMT_E4M3), c);
    uint64_t k_sat = 0, k_clip = 0, k_nan = 0, k_ftz = 0;
    /* tile rows on the OpenMP threads; the counts are integers (their sum does not depend on the split) */
#pragma omp parallel reduction(+ : k_sat, k_clip, k_nan, k_ftz) if (R * C >= 65536 && !omp_in_parallel())
    {
        /* per tile row: the tiles' amax, their scale codes by the conversion kernel (e4m3 RNE,
           saturating: fl_nvfp4_scale_code's codes, a row at a time), then the tiles */
        float *v6 = malloc(2 * (nc ? nc : 1) * sizeof *v6), *v4 = v6 + nc;
        uint8_t *c6 = malloc(2 * (nc ? nc : 1)), *c4 = c6 + nc;
#pragma omp for schedule(static)
        for (size_t ib = 0; ib < nr; ib++) {
            const size_t i0 = ib * br, rows = R - i0 < br ? R - i0 : br;
            fl_cast_counts kr = { 0 };
            for (size_t jb = 0; jb < nc; jb++) {
                const size_t j0 = jb * FL_NVFP4_BLOCK, len = C - j0 < FL_NVFP4_BLOCK ? C - j0 : FL_NVFP4_BLOCK;
                float amax_b = 0.0f; /* NaN ignored: a comparison with NaN is false */
                for (size_t r = 0; r < rows; r++)
                    for (size_t j = 0; j < len; j++) {
                        const float ax = fabsf(x[(i0 + r) * C + j0 + j]);
                        amax_b = ax > amax_b ? ax : amax_b;
                    }
                v6[jb] = amax_b * t6;
                v4[jb] = amax_b * t4;
            }
            fl_convert_from_f32(c6, FL_FMT_E4M3, v6, nc, FL_RND_NE, FL_OVF_SATURATE, 0, 0);
            if (four_over_six)
                fl_convert_from_f32(c4, FL_FMT_E4M3, v4, nc, FL_RND_NE, FL_OVF_SATURATE, 0, 0);
            for (size_t jb = 0; jb < nc; jb++) {
                const size_t j0 = jb * FL_NVFP4_BLOCK, len = C - j0 < FL_NVFP4_BLOCK ? C - j0 : FL_NVFP4_BLOCK;
                const float *xb = x + i0 * C + j0;
                float *yb = y + i0 * C + j0;
                uint8_t sb = c6[jb];
                if (!four_over_six) {
                    nvfp4_tile(yb, C, xb, C, rows, len, e4[sb], s_dec, &cf, i0 * C + j0, &kr);
                } else {
                    /* Four Over Six: the tile mapped to 6 and to 4, the one with the smaller squared
                       error kept (6 on a tie) */
                    float y6[FL_NVFP4_BLOCK * FL_NVFP4_BLOCK], y4[FL_NVFP4_BLOCK * FL_NVFP4_BLOCK];
                    fl_cast_counts k6 = { 0 }, k4 = { 0 };
                    nvfp4_tile(y6, len, xb, C, rows, len, e4[c6[jb]], s_dec, &cf, i0 * C + j0, &k6);
                    nvfp4_tile(y4, len, xb, C, rows, len, e4[c4[jb]], s_dec, &cf, i0 * C + j0, &k4);
                    const int four = tile_sse(y4, xb, C, rows, len) < tile_sse(y6, xb, C, rows, len);
                    for (size_t r = 0; r < rows; r++)
                        memcpy(yb + r * C, (four ? y4 : y6) + r * len, len * sizeof *yb);
                    fl_cast_counts_add(&kr, four ? &k4 : &k6);
                    sb = four ? c4[jb] : c6[jb];
                }
                if (scale)
                    scale[ib * nc + jb] = sb;
            }
            k_sat += kr.sat;
            k_clip += kr.clip;
            k_nan += kr.nan_in;
            k_ftz += kr.ftz;
        }
        free(v6);
        free(c6);
    }
    const fl_cast_counts k = { .sat = k_sat, .clip = k_clip, .nan_in = k_nan, .ftz = k_ftz };
    if (st)
        add_cast_counts(st, &k, R * C);
}

/* ---- the random Hadamard transform of size 16 --------------------------------------------------- */

void fl_rht16_signs(float signs[FL_RHT_SIZE], uint64_t seed)
{
    uint64_t st = seed ^ 0x5248543136000000ull; /* "RHT16" */
    const uint64_t r = fl_splitmix64(&st);
    for (int j = 0; j < FL_RHT_SIZE; j++)
        signs[j] = (r >> j) & 1u ? -1.0f : 1.0f;
}

/* Eight float32 lanes (the compiler's vector extension: each operation lane by lane, so the bits do
   not depend on the instructions it picks; eight lanes are one register from AVX on). */
typedef float v8f __attribute__((vector_size(32)));
typedef int32_t v8i __attribute__((vector_size(32)));

/* One butterfly stage of span h < 8 inside eight lanes: lane j with bit h clear gets v[j] + v[j + h],
   its partner v[j] - v[j + h].  p holds each lane's partner (v with the lanes j, j ^ h swapped): the
   lower lane computes v + p = v[j] + v[j + h], the upper p - v = v[j] - v[j + h], the same operations
   as in order. */
#define WHT_STAGE(v, hi, ...)                                                                          \
    do {                                                                                               \
        const v8f p_ = __builtin_shufflevector(v, v, __VA_ARGS__);                                      \
        v = (v8f)(((v8i)(v + p_) & ~(hi)) | ((v8i)(p_ - v) & (hi)));                                    \
    } while (0)

/* The Walsh-Hadamard butterflies of 16 (lo: elements 0..7, hi: 8..15), in the fixed order of the
   stages h = 1, 2, 4, 8: v = H16 v (entries +-1, H16 H16 = 16 I, symmetric).  Each element's
   operations are those of the loop for h: for i: for j in [i, i + h): (v[j], v[j + h]) = (v[j] +
   v[j + h], v[j] - v[j + h]); the stage h = 8 pairs the halves lane by lane. */
static void wht16(v8f *lo, v8f *hi)
{
    const v8i h1 = { 0, -1, 0, -1, 0, -1, 0, -1 }, h2 = { 0, 0, -1, -1, 0, 0, -1, -1 };
    const v8i h4 = { 0, 0, 0, 0, -1, -1, -1, -1 };
    v8f *half[2] = { lo, hi };
    for (int k = 0; k < 2; k++) {
        v8f v = *half[k];
        WHT_STAGE(v, h1, 1, 0, 3, 2, 5, 4, 7, 6);
        WHT_STAGE(v, h2, 2, 3, 0, 1, 6, 7, 4, 5);
        WHT_STAGE(v, h4, 4, 5, 6, 7, 0, 1, 2, 3);
        *half[k] = v;
    }
    const v8f a = *lo, b = *hi;
    *lo = a + b;
    *hi = a - b;
}
#undef WHT_STAGE

_Static_assert(FL_RHT_SIZE == 16, "the transform is written for two halves of 8 lanes");

void fl_rht16(float *v, const float signs[FL_RHT_SIZE])
{
    v8f lo, hi, s0, s1;
    memcpy(&lo, v, sizeof lo);
    memcpy(&hi, v + 8, sizeof hi);
    memcpy(&s0, signs, sizeof s0);
    memcpy(&s1, signs + 8, sizeof s1);
    lo *= s0;
    hi *= s1;
    wht16(&lo, &hi);
    lo *= 0.25f;
    hi *= 0.25f;
    memcpy(v, &lo, sizeof lo);
    memcpy(v + 8, &hi, sizeof hi);
}

void fl_rht16_inv(float *v, const float signs[FL_RHT_SIZE])
{
    v8f lo, hi, s0, s1;
    memcpy(&lo, v, sizeof lo);
    memcpy(&hi, v + 8, sizeof hi);
    memcpy(&s0, signs, sizeof s0);
    memcpy(&s1, signs + 8, sizeof s1);
    wht16(&lo, &hi);
    lo = lo * 0.25f * s0;
    hi = hi * 0.25f * s1;
    memcpy(v, &lo, sizeof lo);
    memcpy(v + 8, &hi, sizeof hi);
}

/* ---- delayed scaling --------------------------------------------------------------------------- */

size_t fl_delayed_size(uint32_t len) { return sizeof(fl_delayed) + (size_t)len * sizeof(float); }

int fl_delayed_init(fl_delayed *s, uint32_t len, fl_amax_algo algo, int margin, fl_format fmt, int pow2)
{
    if (len == 0 || (unsigned)algo >= FL_AMAX_ALGO_COUNT || !is_element_format(fmt) || margin < -127 ||
        margin > 127)
        return -1;
    s->magic = FL_DELAYED_MAGIC;
    s->version = FL_DELAYED_VERSION;
    s->len = len;
    s->algo = (uint32_t)algo;
    s->fmt = (uint32_t)fmt;
    s->margin = margin;
    s->pow2 = pow2 != 0;
    s->head = 0;
    s->steps = 0;
    s->scale = 1.0f;
    s->scale_inv = 1.0f;
    for (uint32_t i = 0; i < len; i++)
        s->history[i] = 0.0f;
    return 0;
}

void fl_delayed_record(fl_delayed *s, float amax)
{
    s->steps++;
    if (amax == 0.0f) /* TE's fused update: no roll, no new scale for an all-zero / unused tensor */
        return;
    s->history[s->head] = amax;
    s->head = s->head + 1 == s->len ? 0 : s->head + 1;
    float a = amax;
    if (s->algo == FL_AMAX_MAX) {
        a = 0.0f;
        for (uint32_t i = 0; i < s->len; i++)
            a = fl_fmax_f32(a, s->history[i]);
    }
    s->scale = fl_scale_from_amax((fl_format)s->fmt, a, s->scale, s->margin, (int)s->pow2);
    s->scale_inv = 1.0f / s->scale;
}

void fl_delayed_history(float *amax, const fl_delayed *s)
{
    for (uint32_t i = 0; i < s->len; i++)
        amax[i] = s->history[(s->head + i) % s->len];
}

const char *fl_delayed_check(const fl_delayed *s, size_t nbytes)
{
    if (nbytes < sizeof(fl_delayed))
        return "delayed-scaling state: shorter than its 48-byte header";
    if (s->magic != FL_DELAYED_MAGIC)
        return "delayed-scaling state: bad magic (not an fl_delayed, or written on a host of the other byte order)";
    if (s->version != FL_DELAYED_VERSION)
        return "delayed-scaling state: unknown version (written by another fp8lab version; re-run to regenerate it)";
    if (s->len == 0 || fl_delayed_size(s->len) != nbytes)
        return "delayed-scaling state: history length does not match the size";
    if (s->algo >= FL_AMAX_ALGO_COUNT)
        return "delayed-scaling state: unknown amax algorithm";
    if (!is_element_format((fl_format)s->fmt))
        return "delayed-scaling state: format is not an 8-bit element format";
    if (s->margin < -127 || s->margin > 127 || s->pow2 > 1)
        return "delayed-scaling state: margin or pow2 out of range";
    if (s->head >= s->len)
        return "delayed-scaling state: ring position beyond the history";
    /* 0 is possible: with a large margin (fmt_max / amax) / 2^margin can underflow. */
    const uint32_t su = fl_f32_bits(s->scale);
    if ((su >> 31) || !fl_f32_bits_isfinite(su))
        return "delayed-scaling state: scale is not a non-negative finite float";
    if (fl_f32_bits(s->scale_inv) != fl_f32_bits(1.0f / s->scale))
        return "delayed-scaling state: scale_inv is not 1/scale";
    return NULL;
}
