/* test_train_fp4.c — the FP4 recipes of the training harness (experiments/train/recipe.h: nvfp4,
 * mxfp4) against their definitions, and their runs.
 *
 *  1. Each cast of a recipe site equals the numerics functions applied by hand, bit for bit, with the
 *     same counts: nvfp4 X (1x16, tensor scale 2688 / amax), W in 16x16 tiles (and Q(W)^T equals the
 *     tiles of W^T: one quantised W serves both GEMMs), W with --fp4-w1d (1x16, and its 16x1 copy),
 *     dY with stochastic rounding on the stream fl_recipe_sr_key, the wgrad copies (16x1, transposed
 *     by hand) with and without the Hadamard transform of 16 tokens (not when the other input of the
 *     wgrad GEMM is kept in bf16), Four Over Six, per-channel smoothing; mxfp4 against fl_mx_fake_quantize (e2m1, TE's round-up rule, a NaN block).
 *  2. The block telemetry of a cast (clip, flush and underflow mass, the signal-to-noise ratio, the
 *     block amax percentiles) equals its definition computed here in double, on a tensor built so
 *     that every term is nonzero: an outlier block that clips after the e4m3 scale rounds down, small
 *     elements flushed beside a large one, and a block whose e4m3 scale underflows.
 *  3. The Hadamard transform of 16: within 2^-21 of the double-precision product M v for random v;
 *     fl_rht16_inv undoes it exactly on small integers, and M^T M = I on the 16 basis vectors.
 *  4. Through the CLI: an nvfp4 run with --grad-sr --update-sr --rht --four-over-six gives the same
 *     metrics.csv and sites.csv on 1 and 2 threads and at FP8LAB_ISA avx2 and scalar; a run resumed
 *     from its step-20 checkpoint ends with the same metrics.csv and sites.csv; sites.csv has the FP4
 *     header, one row per site and step plus all.gout, all.wgrad on telemetry steps, masses in
 *     [0, 1]; bad FP4 flags exit 2 naming the flag (--rht with a per-token smoothing among them: the
 *     transform mixes tokens of different scales).
 */
#include "check.h"
#include "cli_test.h"
#include "dir_test.h" /* P */
#include "scaling.h"
#include "train/recipe.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>

static int same_bits(float a, float b) { return fl_f32_bits(a) == fl_f32_bits(b); }

/* A tensor with normals across 2^-20 .. 2^6, zeros, a few outliers; deterministic. */
static void fill(float *x, size_t n, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < n; i++) {
        const uint64_t r = fl_splitmix64(&s);
        const float m = 1.0f + (float)(r & 0xFFFF) / 65536.0f;
        const int e = (int)((r >> 16) % 12) - 8;
        x[i] = ((r >> 40) & 1 ? -m : m) * ldexpf(1.0f, e);
        if ((r >> 44) % 97 == 0)
            x[i] = 0.0f;
        if ((r >> 52) % 211 == 0)
            x[i] *= 64.0f;
    }
}

static void transpose(float *t, const float *x, size_t R, size_t C)
{
    for (size_t i = 0; i < R; i++)
        for (size_t c = 0; c < C; c++)
            t[c * R + i] = x[i * C + c];
}

static float amax_of(const float *x, size_t n)
{
    float m = 0.0f;
    for (size_t i = 0; i < n; i++)
        m = fabsf(x[i]) > m ? fabsf(x[i]) : m;
    return m;
}

static void expect_equal(const float *got, const float *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        CHECK(same_bits(got[i], want[i]) || (got[i] != got[i] && want[i] != want[i]),
              "%s: element %zu: got %a want %a", what, i, got[i], want[i]);
}

/* a recipe of one kind with the three sites in, w, gout */
static void recipe(fl_recipe *r, fl_recipe_kind k, const fl_recipe_cfg *opt)
{
    static const char *names[3] = { "L0.fc.in", "L0.fc.w", "L0.fc.gout" };
    static const uint32_t roles[3] = { FL_ROLE_IN, FL_ROLE_W, FL_ROLE_GOUT };
    fl_recipe_cfg c;
    if (opt)
        c = *opt;
    else
        fl_recipe_cfg_default(&c, k);
    c.kind = k;
    CHECK(!fl_recipe_init(r, &c, 3, names, roles, NULL), "recipe init");
    r->sr_seed = 0x1234;
    r->step = 7;
    fl_recipe_step_begin(r, 1);
}

/* The nvfp4 fake quantisation of x (R, C) with its tensor scale, as the definition (tiles br). */
static void nv_ref(float *y, const float *x, size_t R, size_t C, size_t br, int f46, int sr, uint64_t key,
                   fl_quant_stats *st)
{
    fl_nvfp4_fake_quantize_tiles(y, NULL, st, x, R, C, br, fl_nvfp4_global_scale(amax_of(x, R * C), f46), f46, sr,
                                 key, 1);
}

/* A wgrad copy by hand: w (R, C) = the 1x16 NVFP4 quantisation of x^T (C, R), its rows (tokens) first
   transformed 16 at a time with signs (NULL: not), transposed back; t, u scratch of R * C. */
static void copy_ref(float *w, const float *x, size_t R, size_t C, const float *signs, int f46, int sr, uint64_t key,
                     float *t, float *u)
{
    transpose(t, x, R, C);
    if (signs)
        for (size_t i = 0; i < C; i++)
            for (size_t j = 0; j < R; j += FL_RHT_SIZE)
                fl_rht16(t + i * R + j, signs);
    nv_ref(u, t, C, R, 1, f46, sr, key, NULL);
    transpose(w, u, C, R);
}

/* 1. */
static void check_casts(void)
{
    const size_t R = 64, C = 96, n = R * C;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *w = malloc(n * sizeof *w);
    float *t = malloc(n * sizeof *t), *u = malloc(n * sizeof *u);
    fill(x, n, 11);
    fl_recipe r;
    fl_quant_stats q;

    for (int f46 = 0; f46 < 2; f46++) {
        fl_recipe_cfg c;
        fl_recipe_cfg_default(&c, FL_RECIPE_NVFP4);
        c.four_over_six = (uint32_t)f46;
        recipe(&r, FL_RECIPE_NVFP4, &c);
        /* X forward: 1x16 along the rows */
        memset(&q, 0, sizeof q);
        fl_recipe_cast(&r, 0, y, x, R, C, 0, 1, NULL);
        nv_ref(w, x, R, C, 1, f46, 0, 0, &q);
        expect_equal(y, w, n, f46 ? "nvfp4 X (4/6)" : "nvfp4 X");
        const fl_cast_stats *st = &r.sites[0].st;
        CHECK(st->n == n && st->sat == q.n_sat && st->clip == q.n_clip && st->ftz == q.n_ftz && st->nan_in == q.n_nan &&
                  same_bits(st->amax, amax_of(x, n)),
              "nvfp4 X counts: sat %llu/%zu clip %llu/%zu ftz %llu/%zu", (unsigned long long)st->sat, q.n_sat,
              (unsigned long long)st->clip, q.n_clip, (unsigned long long)st->ftz, q.n_ftz);
        /* X's wgrad copy: 16x1 blocks = 1x16 blocks of X^T, back in X's layout */
        CHECK(fl_recipe_needs_bwd_copy(&r, 0) && fl_recipe_needs_bwd_copy(&r, 2) && !fl_recipe_needs_bwd_copy(&r, 1),
              "nvfp4: copies of X and dY, not of the 16x16 W");
        fl_recipe_cast(&r, 0, y, x, R, C, 1, 0, NULL);
        copy_ref(w, x, R, C, NULL, f46, 0, 0, t, u);
        expect_equal(y, w, n, "nvfp4 X wgrad copy");
        /* W: 16x16 tiles, and the tiles of W^T are Q(W)^T */
        fl_recipe_cast(&r, 1, y, x, R, C, 0, 1, NULL);
        nv_ref(w, x, R, C, 16, f46, 0, 0, NULL);
        expect_equal(y, w, n, "nvfp4 W 16x16");
        transpose(t, x, R, C);
        nv_ref(u, t, C, R, 16, f46, 0, 0, NULL);
        transpose(w, u, C, R);
        expect_equal(y, w, n, "nvfp4 Q(W)^T = Q(W^T)");
        fl_recipe_free(&r);
    }

    /* W in 1x16 blocks with its 16x1 copy */
    {
        fl_recipe_cfg c;
        fl_recipe_cfg_default(&c, FL_RECIPE_NVFP4);
        c.fp4_w1d = 1;
        recipe(&r, FL_RECIPE_NVFP4, &c);
        CHECK(fl_recipe_needs_bwd_copy(&r, 1), "--fp4-w1d: W has a dgrad copy");
        fl_recipe_cast(&r, 1, y, x, R, C, 0, 1, NULL);
        nv_ref(w, x, R, C, 1, 0, 0, 0, NULL);
        expect_equal(y, w, n, "nvfp4 W 1x16");
        fl_recipe_cast(&r, 1, y, x, R, C, 1, 0, NULL);
        copy_ref(w, x, R, C, NULL, 0, 0, 0, t, u);
        expect_equal(y, w, n, "nvfp4 W 16x1 copy");
        fl_recipe_free(&r);
    }

    /* dY with SR, its copy with SR after the Hadamard transform; X's copy with --update-sr */
    for (int rht = 0; rht < 2; rht++) {
        fl_recipe_cfg c;
        fl_recipe_cfg_default(&c, FL_RECIPE_NVFP4);
        c.grad_sr = 1;
        c.update_sr = 1;
        c.rht = (uint32_t)rht;
        recipe(&r, FL_RECIPE_NVFP4, &c);
        const uint64_t kg = fl_recipe_sr_key(&r, 2), kx = fl_recipe_sr_key(&r, 0);
        fl_recipe_cast(&r, 2, y, x, R, C, 0, 1, NULL);
        nv_ref(w, x, R, C, 1, 0, 1, kg, NULL);
        expect_equal(y, w, n, "nvfp4 dY SR");
        fl_recipe_cast(&r, 0, y, x, R, C, 0, 1, NULL);
        nv_ref(w, x, R, C, 1, 0, 0, 0, NULL);
        expect_equal(y, w, n, "nvfp4 X forward stays RNE under --update-sr");
        float signs[FL_RHT_SIZE];
        fl_rht16_signs(signs, r.sr_seed);
        for (int site = 0; site < 3; site += 2) {
            fl_recipe_cast(&r, site, y, x, R, C, 1, 0, NULL);
            copy_ref(w, x, R, C, rht ? signs : NULL, 0, 1, (site ? kg : kx) ^ FL_RECIPE_SR_COPY, t, u);
            expect_equal(y, w, n, site ? "nvfp4 dY wgrad copy" : "nvfp4 X wgrad copy (--update-sr)");
        }
        fl_recipe_free(&r);
    }

    /* --rht with X kept in bf16 (--site L0.fc.in=bf16): the transform needs both inputs of the wgrad GEMM,
       so dY's copy is not transformed (M^T M = I only when both sides carry M) */
    {
        fl_recipe_cfg c;
        fl_recipe_cfg_default(&c, FL_RECIPE_NVFP4);
        c.grad_sr = 1;
        c.rht = 1;
        CHECK(!fl_recipe_sites_add(&c, "L0.fc.in=bf16"), "site");
        recipe(&r, FL_RECIPE_NVFP4, &c);
        CHECK(r.sites[0].fmt == FL_FMT_BF16 && !r.sites[2].rht && !fl_recipe_needs_bwd_copy(&r, 0),
              "X in bf16: no transform on dY's copy");
        fl_recipe_cast(&r, 2, y, x, R, C, 1, 0, NULL);
        copy_ref(w, x, R, C, NULL, 0, 1, fl_recipe_sr_key(&r, 2) ^ FL_RECIPE_SR_COPY, t, u);
        expect_equal(y, w, n, "nvfp4 dY wgrad copy, X in bf16: no transform");
        fl_recipe_free(&r);
    }

    /* per-channel smoothing (Smooth-SwiGLU's down input): Q(x s) / s with s = 2^-ceil(log2 amax_c) */
    {
        recipe(&r, FL_RECIPE_NVFP4, NULL);
        float *s = malloc(C * sizeof *s), *si = malloc(C * sizeof *si), *ws = malloc(C * sizeof *ws);
        fl_smooth sm = { 0, s, si };
        fl_recipe_cast(&r, 0, y, x, R, C, 0, 1, &sm);
        for (size_t c = 0; c < C; c++) {
            float a = 0.0f;
            for (size_t i = 0; i < R; i++)
                a = fabsf(x[i * C + c]) > a ? fabsf(x[i * C + c]) : a;
            ws[c] = ldexpf(1.0f, -(int)ceilf(log2f(a)));
            CHECK(same_bits(ws[c], s[c]), "smoothing scale of channel %zu: %a want %a", c, s[c], ws[c]);
        }
        for (size_t i = 0; i < n; i++)
            t[i] = x[i] * ws[i % C];
        nv_ref(u, t, R, C, 1, 0, 0, 0, NULL);
        for (size_t i = 0; i < n; i++)
            w[i] = u[i] * (1.0f / ws[i % C]);
        expect_equal(y, w, n, "nvfp4 smoothed X");
        fl_recipe_free(&r);
        /* its wgrad copy under --rht: per-channel scales commute with a transform of the tokens */
        fl_recipe_cfg c;
        fl_recipe_cfg_default(&c, FL_RECIPE_NVFP4);
        c.rht = 1;
        recipe(&r, FL_RECIPE_NVFP4, &c);
        fl_recipe_cast(&r, 0, y, x, R, C, 1, 0, &sm);
        float signs[FL_RHT_SIZE];
        fl_rht16_signs(signs, r.sr_seed);
        float *xs = malloc(n * sizeof *xs);
        for (size_t i = 0; i < n; i++)
            xs[i] = x[i] * ws[i % C];
        copy_ref(w, xs, R, C, signs, 0, 0, 0, t, u);
        free(xs);
        for (size_t i = 0; i < n; i++)
            w[i] = w[i] * (1.0f / ws[i % C]);
        expect_equal(y, w, n, "nvfp4 smoothed X, wgrad copy after the Hadamard transform");
        free(s);
        free(si);
        free(ws);
        fl_recipe_free(&r);
    }

    /* mxfp4: e2m1 with e8m0 scales, TE's round-up rule; a NaN block decodes to NaNs */
    {
        x[5 * C + 40] = NAN;
        recipe(&r, FL_RECIPE_MXFP4, NULL);
        uint8_t *code = malloc(R * ((C + 31) / 32));
        memset(&q, 0, sizeof q);
        fl_recipe_cast(&r, 0, y, x, R, C, 0, 1, NULL);
        fl_mx_fake_quantize(w, code, &q, x, R, C, FL_FMT_E2M1, FL_MX_CEIL);
        expect_equal(y, w, n, "mxfp4 X");
        const fl_cast_stats *st = &r.sites[0].st;
        CHECK(st->sat == q.n_sat && st->ftz == q.n_ftz && st->nan_in == q.n_nan && q.n_nan == 1,
              "mxfp4 counts: sat %llu/%zu ftz %llu/%zu nan %llu/%zu", (unsigned long long)st->sat, q.n_sat,
              (unsigned long long)st->ftz, q.n_ftz, (unsigned long long)st->nan_in, q.n_nan);
        CHECK(y[5 * C + 33] != y[5 * C + 33] && y[5 * C + 31] == y[5 * C + 31], "the NaN's block only is NaN");
        CHECK(fl_recipe_needs_bwd_copy(&r, 1), "mxfp4: W has a 32x1 dgrad copy");
        x[5 * C + 40] = 1.0f;
        fl_recipe_cast(&r, 1, y, x, R, C, 1, 0, NULL);
        transpose(t, x, R, C);
        fl_mx_fake_quantize(u, code, NULL, t, C, R, FL_FMT_E2M1, FL_MX_CEIL);
        transpose(w, u, C, R);
        expect_equal(y, w, n, "mxfp4 W 32x1 copy");
        fl_recipe_free(&r);
        /* --mx-floor: the OCP rule, which clips where TE's does not */
        fl_recipe_cfg fc;
        fl_recipe_cfg_default(&fc, FL_RECIPE_MXFP4);
        fc.mx_floor = 1;
        recipe(&r, FL_RECIPE_MXFP4, &fc);
        memset(&q, 0, sizeof q);
        fl_recipe_cast(&r, 0, y, x, R, C, 0, 1, NULL);
        fl_mx_fake_quantize(w, code, &q, x, R, C, FL_FMT_E2M1, FL_MX_FLOOR);
        expect_equal(y, w, n, "mxfp4 X, OCP floor rule");
        CHECK(r.sites[0].st.sat == q.n_sat && q.n_sat > 0, "the floor rule saturates (%zu elements)", q.n_sat);
        free(code);
        fl_recipe_free(&r);
    }
    free(x);
    free(y);
    free(w);
    free(t);
    free(u);
    printf("  nvfp4 (X, W 16x16 and 1x16, dY SR, wgrad copies with and without the Hadamard transform, Four Over Six, "
           "smoothing) and mxfp4 casts equal the numerics functions applied by hand\n");
}

/* 2. */
static void check_block_stats(void)
{
    const size_t R = 4, C = 64, n = R * C;
    float x[4 * 64], y[4 * 64];
    fill(x, n, 5);
    /* row 0, block 0: an outlier (clips where the e4m3 scale rounds down) among tiny values (flushed) */
    for (int j = 0; j < 16; j++)
        x[j] = 1e-3f * (float)(j + 1);
    x[3] = 1.3f;
    /* rows 1 and 3: below amax x 2^-10 x 6 / 2688 (about 6.5e-3 here), so that their e4m3 scales
       underflow to 0 */
    for (int j = 0; j < 64; j++) {
        x[C + j] = 1e-4f * (float)(j + 1) * (j & 1 ? -1.0f : 1.0f);
        x[3 * C + j] = 6e-3f - 5e-5f * (float)j;
    }
    x[2 * C + 7] = 3000.0f; /* the tensor's amax */
    fl_recipe rr;
    recipe(&rr, FL_RECIPE_NVFP4, NULL);
    fl_recipe_cast(&rr, 0, y, x, R, C, 0, 1, NULL);
    const fl_cast_stats *st = &rr.sites[0].st;
    /* the definitions, from the codes of the reference quantisation */
    const float am = amax_of(x, n), s_enc = fl_nvfp4_global_scale(am, 0), s_dec = 1.0f / s_enc;
    uint8_t code[4 * 4];
    float w[4 * 64];
    fl_nvfp4_fake_quantize_tiles(w, code, NULL, x, R, C, 1, s_enc, 0, 0, 0, 1);
    expect_equal(y, w, n, "stats tensor");
    double sa = 0, cl = 0, fl = 0, un = 0, x2 = 0, e2 = 0;
    float bam[16];
    for (size_t i = 0; i < R; i++)
        for (size_t b = 0; b < 4; b++) {
            const float unit = fl_decode_f32(fl_format_get(FL_FMT_E4M3), code[i * 4 + b]) * s_dec;
            float m = 0;
            for (size_t j = b * 16; j < b * 16 + 16; j++) {
                const double ax = fabs((double)x[i * C + j]), d = (double)w[i * C + j] - x[i * C + j];
                m = fabsf(x[i * C + j]) > m ? fabsf(x[i * C + j]) : m;
                sa += ax;
                x2 += ax * ax;
                e2 += d * d;
                if (ax > 6.0 * unit)
                    cl += ax - 6.0 * unit;
                if (x[i * C + j] != 0.0f && w[i * C + j] == 0.0f)
                    *(unit == 0.0f ? &un : &fl) += ax;
            }
            bam[i * 4 + b] = m / am;
        }
    CHECK(cl > 0 && fl > 0 && un > 0, "the tensor exercises every mass: clip %g flush %g under %g", cl, fl, un);
    /* The harness sums a block's terms in float32 (6 units rounded to float, ax - 6u rounded, 16 terms
       added on 8 lanes): each term within 2^-22 of its |x|, a block's sum within 16 x 2^-24 of its
       total, so a mass (a fraction of sum |x|) within 2e-6 of the double value, the sums of squares
       within 2e-6 relative.  The masses here are 1e-4 and more. */
    const double tol = 2e-6;
    CHECK(fabs(st->clip_mass - cl / sa) <= tol, "clip mass %.9g want %.9g", st->clip_mass, cl / sa);
    CHECK(fabs(st->flush_mass - fl / sa) <= tol, "flush mass %.9g want %.9g", st->flush_mass, fl / sa);
    CHECK(fabs(st->under_mass - un / sa) <= tol, "underflow mass %.9g want %.9g", st->under_mass, un / sa);
    CHECK(cl / sa > 50 * tol && fl / sa > 50 * tol && un / sa > 50 * tol, "masses large enough to test");
    CHECK(fabs(st->norm2 - x2) <= tol * x2 && fabs(st->err2 - e2) <= tol * e2, "norms %.9g %.9g want %.9g %.9g", st->norm2,
          st->err2, x2, e2);
    /* percentiles: the nearest rank of 0.01, 0.5, 0.99 over the 16 sorted block amaxes */
    for (int i = 1; i < 16; i++) /* insertion sort */
        for (int j = i; j > 0 && bam[j - 1] > bam[j]; j--) {
            const float v = bam[j];
            bam[j] = bam[j - 1];
            bam[j - 1] = v;
        }
    const int rank[3] = { (int)(0.01 * 15 + 0.5), (int)(0.5 * 15 + 0.5), (int)(0.99 * 15 + 0.5) };
    for (int k = 0; k < 3; k++)
        CHECK(same_bits(st->blk_q[k], bam[rank[k]]), "block amax percentile %d: %a want %a", k, st->blk_q[k], bam[rank[k]]);
    fl_recipe_step_begin(&rr, 0);
    fl_recipe_cast(&rr, 0, y, x, R, C, 0, 1, NULL);
    CHECK(isnan(rr.sites[0].st.blk_q[1]), "percentiles only on telemetry steps");
    fl_recipe_free(&rr);
    printf("  block telemetry: clip %.3g, flush %.3g, underflow %.3g mass, snr %.3g, block amax percentiles: as defined\n",
           cl / sa, fl / sa, un / sa, sqrt(x2 / e2));
}

/* 3. */
static void check_rht(void)
{
    float signs[FL_RHT_SIZE];
    fl_rht16_signs(signs, 99);
    double M[16][16];
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++)
            M[i][j] = (__builtin_popcount((unsigned)(i & j)) & 1 ? -1.0 : 1.0) * signs[j] / 4.0;
    uint64_t s = 3;
    double worst = 0;
    for (int rep = 0; rep < 10000; rep++) {
        float v[16], v0[16];
        double l1 = 0;
        for (int j = 0; j < 16; j++) {
            v[j] = v0[j] = (float)((double)(fl_splitmix64(&s) >> 11) * 0x1p-53 * 2.0 - 1.0) * ldexpf(1.0f, (int)(fl_splitmix64(&s) % 20) - 10);
            l1 += fabs((double)v[j]);
        }
        fl_rht16(v, signs);
        for (int i = 0; i < 16; i++) {
            double want = 0;
            for (int j = 0; j < 16; j++)
                want += M[i][j] * v0[j];
            const double e = fabs((double)v[i] - want) / l1;
            worst = e > worst ? e : worst;
            CHECK(e <= 0x1p-21, "M v: row %d: %a want %a", i, v[i], want);
        }
    }
    /* exact inverse on small integers; M^T M = I on the basis vectors */
    for (int rep = 0; rep < 1000; rep++) {
        float v[16], v0[16];
        for (int j = 0; j < 16; j++)
            v[j] = v0[j] = (float)((int)(fl_splitmix64(&s) % 2001) - 1000);
        fl_rht16(v, signs);
        fl_rht16_inv(v, signs);
        for (int j = 0; j < 16; j++)
            CHECK(v[j] == v0[j], "inverse: element %d: %a want %a", j, v[j], v0[j]);
    }
    for (int k = 0; k < 16; k++) {
        float e[16] = { 0 };
        e[k] = 1.0f;
        fl_rht16(e, signs);
        for (int j = 0; j < 16; j++)
            CHECK(e[j] == (float)M[j][k], "M e_%d [%d] = %a want %a", k, j, e[j], M[j][k]);
        fl_rht16_inv(e, signs);
        for (int j = 0; j < 16; j++)
            CHECK(e[j] == (j == k ? 1.0f : 0.0f), "M^T M e_%d [%d] = %a", k, j, e[j]);
    }
    printf("  Hadamard transform of 16: within %.2g x ||v||_1 of the double product, exact inverse, M^T M = I\n", worst);
}

/* 4. */
static char tmp[256];

#define FP4RUN "--recipe", "nvfp4", "--grad-sr", "--update-sr", "--rht", "--four-over-six", "--width", "32", \
               "--ffn", "64", "--seq", "32", "--batch", "4", "--data-len", "20000", "--quiet"

static void check_runs(void)
{
    char e[1024];
    snprintf(e, sizeof e, "%s/err", tmp);
    static const struct {
        const char *isa, *threads;
    } runs[] = { { NULL, "1" }, { NULL, "2" }, { "avx2", "1" }, { "scalar", "2" } };
    char d0[1024] = "";
    for (size_t k = 0; k < sizeof runs / sizeof *runs; k++) {
        char d[1024];
        snprintf(d, sizeof d, "%s/t%zu", tmp, k);
        const char *a[] = { "train", FP4RUN, "--steps", "12", "--log-every", "4", "--threads", runs[k].threads, "--out", d, NULL };
        if (runs[k].isa)
            setenv("FP8LAB_ISA", runs[k].isa, 1);
        CHECK(run(e, a) == 0, "%s: run", d);
        unsetenv("FP8LAB_ISA");
        if (!k) {
            snprintf(d0, sizeof d0, "%s", d);
            continue;
        }
        same_file(P("%s/metrics.csv", d0), P("%s/metrics.csv", d));
        same_file(P("%s/sites.csv", d0), P("%s/sites.csv", d));
    }
    /* sites.csv: the FP4 header, 12 sites (2 layers x 4 linears x in, w, gout) + all.gout per step */
    FILE *f = fopen(P("%s/sites.csv", d0), "r");
    CHECK(f, "sites.csv");
    char line[1024];
    CHECK(fgets(line, sizeof line, f) &&
              !strcmp(line, "step,site,amax,saturated,clip_mass,flush_mass,under_mass,underflow,snr,blk_p01,blk_p50,blk_p99\n"),
          "FP4 sites.csv header: %s", line);
    int rows = 0, gout = 0, wgrad = 0, wmean = 0;
    double wg = NAN;
    while (fgets(line, sizeof line, f)) {
        rows++;
        char site[64];
        double amax, clip, flush, under, uf, snr;
        unsigned long long sat;
        if (strstr(line, ",all.gout,") || strstr(line, ",all.wgrad,") || strstr(line, ",all.wgrad_mean,")) {
            const char *p = line;
            for (int c = 0; c < 8; c++)
                p = strchr(p, ',') + 1;
            const double v = strtod(p, NULL);
            if (strstr(line, ",all.wgrad_mean,")) {
                /* 4 h . (b - h) = ||b||^2 - ||2h - b||^2 <= ||b||^2: never above the batch's ratio */
                wmean++;
                CHECK(isfinite(v) && v <= wg * (1 + 1e-6), "all.wgrad_mean %g above all.wgrad %g: %s", v, wg, line);
                continue;
            }
            if (strstr(line, ",all.gout,"))
                gout++;
            else
                wgrad++, wg = v;
            CHECK(v > 1.0, "all.gout snr: %s", line);
            continue;
        }
        CHECK(sscanf(line, "%*u,%63[^,],%lf,%llu,%lf,%lf,%lf,%lf,%lf", site, &amax, &sat, &clip, &flush, &under, &uf, &snr) == 8,
              "row: %s", line);
        CHECK(amax > 0 && clip >= 0 && clip <= 1 && flush >= 0 && flush <= 1 && under >= 0 && under <= 1 && uf >= 0 && uf <= 1 &&
                  snr > 1.0,
              "row values: %s", line);
    }
    fclose(f);
    CHECK(gout == 12 && wgrad == 4 && wmean == 4 && rows == 12 * 25 + 8,
          "sites.csv: %d rows, %d all.gout rows, %d all.wgrad rows, %d all.wgrad_mean rows (want 308, 12, 4, 4: "
          "telemetry steps 0, 4, 8, 11)", rows, gout, wgrad, wmean);

    /* resume from the step-20 checkpoint */
    char u[1024], r[1024];
    snprintf(u, sizeof u, "%s/uninterrupted", tmp);
    snprintf(r, sizeof r, "%s/resumed", tmp);
    const char *a[] = { "train", FP4RUN, "--steps", "30", "--threads", "2", "--out", u, NULL };
    const char *b[] = { "train", FP4RUN, "--steps", "30", "--threads", "2", "--keep-ckpt", "20", "--out", r, NULL };
    CHECK(run(e, a) == 0 && run(e, b) == 0, "runs to resume");
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "cp '%s/checkpoint-20.bin' '%s/checkpoint.bin'", r, r);
    CHECK(!system(cmd), "cp");
    const char *c[] = { "train", "--resume", r, "--quiet", NULL };
    CHECK(run(e, c) == 0, "resume");
    same_file(P("%s/metrics.csv", u), P("%s/metrics.csv", r));
    same_file(P("%s/sites.csv", u), P("%s/sites.csv", r));

    /* bad flags: exit 2, naming the flag, no run folder */
    char d[1024];
    snprintf(d, sizeof d, "%s/bad", tmp);
    const char *b1[] = { "train", "--recipe", "mxfp4", "--four-over-six", "--quiet", "--out", d, NULL };
    const char *b2[] = { "train", "--recipe", "bf16", "--rht", "--quiet", "--out", d, NULL };
    const char *b3[] = { "train", "--recipe", "fp8-delayed", "--update-sr", "--quiet", "--out", d, NULL };
    const char *b4[] = { "train", "--recipe", "nvfp4", "--site", "L0.fc.in=current", "--quiet", "--out", d, NULL };
    const char *b5[] = { "train", "--recipe", "nvfp4", "--rht", "--seq", "7", "--batch", "3", "--quiet", "--out", d, NULL };
    const char *b6[] = { "train", "--recipe", "nvfp4", "--rht", "--act", "smooth_swiglu_token", "--quiet", "--out", d, NULL };
    const char *b7[] = { "train", "--recipe", "nvfp4", "--mx-floor", "--quiet", "--out", d, NULL };
    const char *const *bad[] = { b1, b2, b3, b4, b5, b6, b7 };
    const char *want[] = { "--four-over-six", "--rht", "--update-sr", "bf16", "--rht", "per-token", "--mx-floor" };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        CHECK(run(e, bad[k]) == 2, "bad flags %zu: exit 2", k);
        CHECK(contains(e, want[k]), "bad flags %zu: the message names %s", k, want[k]);
        struct stat sb;
        CHECK(stat(d, &sb) != 0, "bad flags %zu: no run folder", k);
    }
    printf("  nvfp4 runs (SR, --update-sr, --rht, Four Over Six): identical on 1 and 2 threads, at avx2 and scalar, "
           "and resumed; sites.csv as documented; bad flags exit 2\n");
}

int main(void)
{
    check_rht();
    check_casts();
    check_block_stats();
    cli_init();
    snprintf(tmp, sizeof tmp, "/tmp/fp8lab_test_fp4_%d", (int)getpid());
    CHECK(!mkdir(tmp, 0755), "mkdir %s", tmp);
    check_runs();
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK(!system(cmd), "cleanup");
    PASS("test_train_fp4");
}
