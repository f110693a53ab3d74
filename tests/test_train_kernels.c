/* test_train_kernels.c — the CPU twins of the training-step kernels (kernels/train_step.h).
 *
 *  1. fl_adamw (blocks, vectorised square roots, OpenMP) equals the element functions applied one
 *     element at a time with the scalar correctly rounded sqrt, bit for bit, on n = 5 * 256 + 13
 *     elements whose gradients span 2^-140 .. 2^60, zeros, both signs, Inf and NaN, at 1 and 2 threads.
 *  2. The element functions are the optimizer's update: against the same formula in double precision,
 *     p, m and v agree to a few float32 ulps where the inputs are finite and the update is not
 *     dominated by cancellation.
 *  3. RMSNorm: the twins equal the harness's vector paths (experiments/train/rmsnorm_simd.c at the
 *     machine's level, AVX-512 or AVX2) bit for bit, forward and backward, accumulating or not, with
 *     C not a multiple of 16 and rows of zeros, huge and tiny values; and the forward against double
 *     precision within its bound.
 *  4. The FP8 cast twin (fl_cast_fp8) equals the cast engine the harness casts with: its codes decode to
 *     fl_cast_fq_span's values, its counts and amax are fl_cast_fq_span's, and under RNE its codes are
 *     fl_cast_encode_span's -- e4m3, e5m2 and Gaudi2's e4m3, saturating or not, RNE and SR, three
 *     scales, on a stride of every float32 bit pattern plus the specials; fl_cast_fq (the GPU step's
 *     fake-quantising cast) writes fl_cast_fq_span's values bit for bit, bf16 included.
 *  5. Embeddings: fl_embed_index sorts the rows by token, stably; the device's algorithm over that
 *     index (each token's rows in order, each position's rows in order), run here in C, gives the twin's
 *     gradients bit for bit, with repeated and absent tokens; a token beyond the vocabulary is refused.
 *  6. The head's softmax cross-entropy: fl_expf_glibc equals the libm's expf on a stride of every
 *     float32 and at the special cases' edges where the libm is glibc's FMA expf (the harness's own
 *     check, fl_model_expf_mismatches, says whether it is); the twin's probabilities and losses against
 *     double precision within their bounds; the backward's (p - onehot) / N.
 *  7. The causal attention's softmax: from a tiny model's own saved q, k, v (fp32 recipe), scores formed
 *     as the harness forms them give, through fl_attn_softmax_fwd, the harness's saved probabilities bit
 *     for bit; and after its backward, the score gradients of fl_attn_softmax_bwd give its dq bit for bit.
 *  8. The GPU step's sums: fl_sumsq (the gradient norm's square, in its documented blocked order) is
 *     exact on integer data and within (n + 8) u_double of a long-double sum on random data, at n around
 *     its chunk and lane sizes; fl_amax_rms (the FFN telemetry's reference loops) equals the harness's
 *     vectorised, threaded fl_model_amax_rms bit for bit (NaN, Inf, huge and tiny values, 1 and 2
 *     threads, rows narrower and wider than a vector).
 *  9. The attention's head layout copy (fl_heads_copy): token rows to per-head matrices puts row (b, t)'s
 *     head h values at ((b H + h) T + t) hs, the way back restores the rows (the columns beyond the heads
 *     untouched), and heads wider than the row are refused.
 * The GPU side (each launcher against its twin) is checked by tests/test_gpu_twins.cu.
 */
#include "check.h"
#include "model_test.h"
#include "fl_base.h"
#include "train_step.h"
#include "train/model_simd.h"
#include "train/model.h"
#include "train/recipe.h"

#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { N = 5 * 256 + 13 };

static float rnd_float(uint64_t *s, int k)
{
    const uint64_t r = fl_splitmix64(s);
    if (k % 97 == 5)
        return 0.0f;
    if (k % 211 == 7)
        return (r & 1) ? INFINITY : -INFINITY;
    if (k % 223 == 11)
        return NAN;
    const int e = (int)(r % 200) - 140; /* 2^-140 .. 2^59 */
    const float f = ldexpf(1.0f + (float)((r >> 8) & 0xFFFFFF) * 0x1p-24f, e);
    return (r >> 40) & 1 ? -f : f;
}

static int same_bits(float a, float b)
{
    return fl_f32_bits(a) == fl_f32_bits(b) || (isnan(a) && isnan(b));
}

static void check_blocks_equal_elements(void)
{
    static float p[N], g[N], m[N], v[N], p2[N], m2[N], v2[N];
    uint64_t s = 0x41444157ull; /* "ADAW" */
    for (int i = 0; i < N; i++) {
        g[i] = rnd_float(&s, i);
        p[i] = (float)(fl_splitmix64(&s) % 2001) * 1e-3f - 1.0f;
        m[i] = (float)(fl_splitmix64(&s) % 2001) * 1e-6f - 1e-3f;
        v[i] = (float)(fl_splitmix64(&s) % 2001) * 1e-8f;
    }
    const fl_adamw_hp hp = { .b1 = 0.9f, .b2 = 0.95f, .bc1 = 1.0f - 0.9f * 0.9f * 0.9f, .bc2 = 1.0f - 0.95f * 0.95f * 0.95f,
                             .eps = 1e-8f, .lr = 3e-3f, .wd = 0.1f, .gscale = 0.5f };
    for (int threads = 1; threads <= 2; threads++) {
        memcpy(p2, p, sizeof p);
        memcpy(m2, m, sizeof m);
        memcpy(v2, v, sizeof v);
        omp_set_num_threads(threads);
        CHECK(fl_adamw(p2, g, m2, v2, N, &hp) == 0, "fl_adamw");
        for (int i = 0; i < N; i++) {
            float mi = m[i], vi = v[i], mh;
            const float sv = fl_adamw_moments(&mi, &vi, g[i], &hp, &mh);
            const float pi = fl_adamw_param(p[i], mh, fl_sqrtf(sv), &hp);
            CHECK(same_bits(pi, p2[i]) && same_bits(mi, m2[i]) && same_bits(vi, v2[i]),
                  "element %d (g %a, %d threads): p %a/%a m %a/%a v %a/%a", i, g[i], threads, pi, p2[i], mi, m2[i], vi,
                  v2[i]);
        }
    }
    printf("  fl_adamw: the element functions bit for bit at 1 and 2 threads (%d elements, Inf/NaN/0 gradients)\n", N);
}

static void check_against_double(void)
{
    uint64_t s = 7;
    int n = 0;
    for (int i = 0; i < 20000; i++) {
        const float g = (float)((double)(fl_splitmix64(&s) % 20001) * 1e-4 - 1.0);
        const float p0 = (float)((double)(fl_splitmix64(&s) % 2001) * 1e-3 - 1.0);
        const float m0 = (float)((double)(fl_splitmix64(&s) % 2001) * 1e-4 - 0.1);
        const float v0 = (float)((double)(fl_splitmix64(&s) % 2001) * 1e-5);
        const fl_adamw_hp hp = { 0.9f, 0.95f, 0.271f, 0.142625f, 1e-8f, 1e-3f, 0.1f, 1.0f };
        float m = m0, v = v0, mh;
        const float sv = fl_adamw_moments(&m, &v, g, &hp, &mh);
        const float p = fl_adamw_param(p0, mh, fl_sqrtf(sv), &hp);
        const double gd = (double)g * hp.gscale;
        const double md = (double)hp.b1 * m0 + (1.0 - (double)hp.b1) * gd;
        const double vd = (double)hp.b2 * v0 + (1.0 - (double)hp.b2) * gd * gd;
        const double step = (double)hp.lr * (md / hp.bc1 / (sqrt(vd / hp.bc2) + hp.eps) + (double)hp.wd * p0);
        const double pd = p0 - step;
        /* m, v: a few roundings of terms of one sign (v) or of a sum whose cancellation bounds m's error by
           the terms' size; p: the step's relative error is a few u, and p0 - step is one more rounding */
        const double tm = fabs((double)hp.b1 * m0) + fabs((1.0 - (double)hp.b1) * gd);
        CHECK(fabs(m - md) <= 4 * 0x1p-24 * tm + 1e-45, "m %a vs %a", m, md);
        CHECK(fabs(v - vd) <= 4 * 0x1p-24 * vd + 1e-45, "v %a vs %a", v, vd);
        CHECK(fabs(p - pd) <= 0x1p-24 * fabs(pd) + 12 * 0x1p-24 * fabs(step) + 1e-45, "p %a vs %a (step %g)", p, pd, step);
        n++;
    }
    printf("  the element functions against AdamW in double: %d updates within their rounding bounds\n", n);
}

static void check_rmsnorm(void)
{
    const size_t NR = 37, C = 200; /* C % 16 = 8, NR % 16 = 5: the vector paths' tails */
    float *x = malloc(NR * C * sizeof *x), *dy = malloc(NR * C * sizeof *dy), *g = malloc(C * sizeof *g);
    float *y1 = malloc(NR * C * sizeof *y1), *y2 = malloc(NR * C * sizeof *y2), r1[37], r2[37];
    float *dx1 = malloc(NR * C * sizeof *dx1), *dx2 = malloc(NR * C * sizeof *dx2), dg1[200], dg2[200];
    CHECK(x && dy && g && y1 && y2 && dx1 && dx2, "alloc");
    uint64_t s = 99;
    for (size_t i = 0; i < NR * C; i++) {
        const size_t t = i / C;
        const double u = (double)(fl_splitmix64(&s) >> 11) * 0x1p-53 - 0.5;
        x[i] = t == 3 ? 0.0f : (float)(u * (t == 5 ? 1e30 : t == 6 ? 1e-30 : 4.0));
        dy[i] = (float)((double)(fl_splitmix64(&s) >> 11) * 0x1p-53 - 0.5);
    }
    for (size_t c = 0; c < C; c++)
        g[c] = 0.5f + (float)c / (float)C;
    const int simd = model_rms_forward_simd(y2, r2, x, g, NR, C);
    fl_rmsnorm_fwd(y1, r1, x, g, NR, C, 1e-5f);
    if (simd) {
        CHECK(!memcmp(y1, y2, NR * C * sizeof *y1) && !memcmp(r1, r2, sizeof r1), "forward: twin = harness");
        for (int acc = 0; acc <= 1; acc++) {
            for (size_t i = 0; i < NR * C; i++)
                dx1[i] = dx2[i] = acc ? 0.25f : 0.0f;
            for (size_t c = 0; c < C; c++)
                dg1[c] = dg2[c] = 0.125f;
            CHECK(model_rms_backward_simd(dx2, dg2, dy, x, r1, g, NR, C, acc), "the vector backward ran");
            fl_rmsnorm_bwd(dx1, dg1, dy, x, r1, g, NR, C, acc);
            CHECK(!memcmp(dx1, dx2, NR * C * sizeof *dx1) && !memcmp(dg1, dg2, sizeof dg1), "backward (accumulate %d): twin = harness",
                  acc);
        }
    }
    for (size_t t = 0; t < NR; t++) {
        if (t == 5) /* x^2 overflows float32 (ss = Inf, r = 0, as in the harness): no bound to check */
            continue;
        double ss = 0;
        for (size_t c = 0; c < C; c++)
            ss += (double)x[t * C + c] * x[t * C + c];
        const double r = 1.0 / sqrt(ss / (double)C + 1e-5);
        /* ss: C - 1 roundings of positive terms, then a division, an addition, a sqrt, a division: r's
           relative error <= (C/2 + 4) u; y: two more roundings */
        CHECK(fabs(r1[t] - r) <= ((double)C / 2 + 4) * 0x1p-24 * r, "rstd row %zu: %a vs %a", t, r1[t], r);
        for (size_t c = 0; c < C; c++) {
            const double yd = (double)x[t * C + c] * r * g[c];
            CHECK(fabs(y1[t * C + c] - yd) <= ((double)C / 2 + 7) * 0x1p-24 * fabs(yd) + 0x1p-149, "y[%zu, %zu]", t, c);
        }
    }
    printf("  RMSNorm twins: %s; forward within its bound of double precision\n",
           simd ? "equal to the harness's vector paths bit for bit (forward, backward, accumulating or not)"
                : "no vector path at this instruction-set level to compare with");
    free(x), free(dy), free(g), free(y1), free(y2), free(dx1), free(dx2);
}

/* The smoothed fake-quantising cast (fl_cast_fq_smooth, Smooth-SwiGLU's down-projection input under the
   GPU step's FP8 recipes) against the cast engine run row by row with the same scales (cast.c: rs, cs),
   and fl_smooth_scales against the powers of two of the lines' amaxes. */
static void check_cast_smooth(void)
{
    enum { R = 37, C = 53 };
    float x[R * C], y[R * C], ye[R * C], s[R > C ? R : C], si[R > C ? R : C];
    for (size_t i = 0; i < (size_t)R * C; i++)
        x[i] = fl_f32_from_bits((uint32_t)(i * 2654435761u)) * 0x1p-100f; /* mixed magnitudes, NaN and Inf among them */
    x[5] = NAN;
    x[C + 7] = INFINITY;
    int cases = 0;
    for (int axis = 0; axis <= 1; axis++)
        for (int fmt = 0; fmt < 3; fmt++) {
            const float am = fl_smooth_scales(s, si, x, R, C, axis);
            float want = 0.0f;
            for (size_t i = 0; i < (size_t)R * C; i++) { /* the smoothed tensor's amax, element by element */
                const float v = fabsf(x[i] * s[axis ? i / C : i % C]);
                want = fl_fmax_f32(want, v);
            }
            CHECK(fl_f32_bits(am) == fl_f32_bits(want), "axis %d: smoothed amax %a, element by element %a", axis, am, want);
            for (int j = 0; j < (axis ? R : C); j++)
                CHECK(s[j] * si[j] == 1.0f && (fl_f32_bits(s[j]) & 0x7FFFFFu) == 0, "axis %d line %d: scale %a, inverse %a",
                      axis, j, s[j], si[j]);
            const fl_cast_fmt f = { .fmt = fmt == 2 ? FL_FMT_BF16 : fmt ? FL_FMT_E5M2 : FL_FMT_E4M3 };
            const float sc = fmt == 2 ? 1.0f : 0.5f, sci = 1.0f / sc;
            const fl_cast_smooth sm = { axis ? s : NULL, axis ? si : NULL, axis ? NULL : s, axis ? NULL : si, C };
            fl_cast_counts k = { 0 }, ke = { 0 };
            float amax = 0.0f, ame = 0.0f;
            CHECK(!fl_cast_fq_smooth(y, &amax, &k, x, (size_t)R * C, sc, sci, &f, 0, &sm), "fl_cast_fq_smooth");
            for (size_t r = 0; r < R; r++) {
                const fl_cast_scales scs = { axis ? s[r] : 1.0f, axis ? si[r] : 1.0f, sc, sci, axis ? NULL : s,
                                             axis ? NULL : si, r * C };
                ame = fl_fmax_f32(ame, fl_cast_fq_span(ye + r * C, x + r * C, C, &f, &scs, &ke, NULL, NULL));
            }
            for (size_t i = 0; i < (size_t)R * C; i++)
                if (!same_bits(y[i], ye[i])) {
                    CHECK(0, "axis %d fmt %d: element %zu x %a -> %a, the engine %a", axis, fmt, i, x[i], y[i], ye[i]);
                    break;
                }
            CHECK(!memcmp(&k, &ke, sizeof k) && fl_f32_bits(amax) == fl_f32_bits(ame),
                  "axis %d fmt %d: counts or amax (%a / %a) differ from the engine's", axis, fmt, amax, ame);
            cases++;
        }
    printf("  fl_cast_fq_smooth: the engine's values, counts and amax under row and column smoothing (%d casts); "
           "fl_smooth_scales: powers of two and exact inverses, the smoothed amax element by element\n", cases);
}

static void check_cast(void)
{
    const size_t n = (size_t)(0x100000000ull / 4099) + 16;
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *yq = malloc(n * sizeof *yq);
    uint8_t *codes = malloc(n), *enc = malloc(n);
    CHECK(x && y && yq && codes && enc, "alloc");
    for (size_t i = 0; i + 16 < n; i++)
        x[i] = fl_f32_from_bits((uint32_t)(i * 4099u));
    const float sp[16] = { 0.0f, -0.0f, INFINITY, -INFINITY, NAN, 448.0f, 464.0f, -480.0f, 57344.0f, 61440.0f,
                           0x1p-9f, 0x1p-10f, 0x1p-17f, 0x1.8p-17f, 240.0f, 248.0f };
    memcpy(x + n - 16, sp, sizeof sp);
    const float scales[3] = { 1.0f, 0.125f, 448.0f / 3.0f };
    int cases = 0;
    int fq_cases = 0;
    for (int fmt = 0; fmt < 4; fmt++)
        for (int nosat = 0; nosat <= 1; nosat++)
            for (int sr = 0; sr <= 1; sr++)
                for (int k = 0; k < 3; k++) {
                    if (fmt == 2 && nosat)
                        continue; /* Gaudi2's e4m3 always saturates */
                    if (fmt == 3 && (nosat || sr))
                        continue; /* bf16: RNE, overflowing to Inf (the recipes' bf16 casts) */
                    const fl_cast_fmt f = { .fmt = fmt == 3 ? FL_FMT_BF16 : fmt == 1 ? FL_FMT_E5M2 : FL_FMT_E4M3,
                                            .gaudi2 = fmt == 2, .nosat = nosat, .sr = sr, .key = 0x5EED + (uint64_t)k };
                    const float s = scales[k], si = 1.0f / s;
                    fl_cast_counts kt = { 0 }, ke = { 0 }, kq = { 0 };
                    float amax = 0.0f, amq = 0.0f;
                    const fl_cast_scales sc = { .rs = 1.0f, .rsi = 1.0f, .s = s, .si = si, .off = 1000 };
                    const float am = fl_cast_fq_span(y, x, n, &f, &sc, &ke, NULL, NULL);
                    /* fl_cast_fq (the GPU step's FP8 casts): the engine's values, counts and amax */
                    CHECK(fl_cast_fq(yq, &amq, &kq, x, n, s, si, &f, 1000) == 0, "fl_cast_fq");
                    for (size_t i = 0; i < n; i++)
                        if (!same_bits(yq[i], y[i])) {
                            CHECK(0, "fl_cast_fq fmt %d nosat %d sr %d s %g: x %a -> %a, the engine %a", fmt, nosat, sr, s,
                                  x[i], yq[i], y[i]);
                            break;
                        }
                    CHECK(!memcmp(&kq, &ke, sizeof kq) && fl_f32_bits(amq) == fl_f32_bits(am),
                          "fl_cast_fq fmt %d nosat %d sr %d: counts or amax (%a/%a) differ from the engine's", fmt, nosat,
                          sr, amq, am);
                    fq_cases++;
                    if (fmt == 3)
                        continue;
                    CHECK(fl_cast_fp8(codes, &amax, &kt, x, n, s, &f, 1000) == 0, "cast");
                    fl_cast_limits l;
                    fl_cast_limits_of(&l, &f);
                    for (size_t i = 0; i < n; i++) {
                        const float q = fl_decode_f32(&l.d, codes[i]) * si;
                        if (!same_bits(q, y[i])) {
                            CHECK(0, "fmt %d nosat %d sr %d s %g: x %a code %#x -> %a, the engine %a", fmt, nosat, sr, s,
                                  x[i], codes[i], q, y[i]);
                            break;
                        }
                    }
                    CHECK(!memcmp(&kt, &ke, sizeof kt) && fl_f32_bits(amax) == fl_f32_bits(am),
                          "fmt %d nosat %d sr %d: counts (sat %llu/%llu clip %llu/%llu ftz %llu/%llu nan %llu/%llu) amax %a/%a",
                          fmt, nosat, sr, (unsigned long long)kt.sat, (unsigned long long)ke.sat,
                          (unsigned long long)kt.clip, (unsigned long long)ke.clip, (unsigned long long)kt.ftz,
                          (unsigned long long)ke.ftz, (unsigned long long)kt.nan_out, (unsigned long long)ke.nan_out, amax, am);
                    if (!sr && fmt < 2) {
                        fl_cast_encode_span(enc, x, n, s, f.fmt, nosat);
                        CHECK(!memcmp(enc, codes, n), "fmt %d nosat %d: RNE codes = fl_cast_encode_span's", fmt, nosat);
                    }
                    cases++;
                }
    printf("  fl_cast_fp8: the cast engine's values, counts and amax (and RNE codes) in %d casts of %zu inputs; "
           "fl_cast_fq its values bit for bit in %d (bf16 too)\n", cases, n, fq_cases);
    free(x), free(y), free(yq), free(codes), free(enc);
}

static void check_embed(void)
{
    enum { NT = 6, T = 16, NN = NT * T, C = 24, V = 40 };
    int tok[NN], toks[NN], starts[NN + 1], rows[NN];
    static float wte[V * C], wpe[T * C], dx[NN * C], x[NN * C], g1[V * C], p1[T * C], g2[V * C], p2[T * C];
    uint64_t s = 5;
    for (int i = 0; i < NN; i++)
        tok[i] = (int)(fl_splitmix64(&s) % 13) * 3; /* 13 distinct tokens of 40, each several times */
    for (int i = 0; i < V * C; i++)
        wte[i] = g1[i] = g2[i] = (float)((double)(fl_splitmix64(&s) >> 11) * 0x1p-53 - 0.5);
    for (int i = 0; i < T * C; i++)
        wpe[i] = p1[i] = p2[i] = (float)((double)(fl_splitmix64(&s) >> 11) * 0x1p-53);
    for (int i = 0; i < NN * C; i++)
        dx[i] = (float)((double)(fl_splitmix64(&s) >> 11) * 0x1p-53 - 0.5) * (i % 7 ? 1.0f : 1e6f);
    fl_embed_fwd(x, tok, wte, wpe, NN, T, C);
    for (int i = 0; i < NN * C; i++)
        CHECK(fl_f32_bits(x[i]) == fl_f32_bits(wte[tok[i / C] * C + i % C] + wpe[(i / C % T) * C + i % C]), "fwd %d", i);
    size_t ntok = 0;
    CHECK(fl_embed_index(toks, starts, rows, &ntok, tok, NN, V) == 0, "index");
    CHECK(ntok <= 13 && starts[0] == 0 && starts[ntok] == NN, "%zu tokens", ntok);
    for (size_t j = 0; j < ntok; j++)
        for (int r = starts[j]; r < starts[j + 1]; r++)
            CHECK(tok[rows[r]] == toks[j] && (r == starts[j] || rows[r] > rows[r - 1]) && (j == 0 || toks[j] > toks[j - 1]),
                  "index order at %d", r);
    fl_embed_bwd(g1, p1, dx, tok, NN, T, C);
    for (size_t j = 0; j < ntok; j++) /* the device's loops */
        for (int k = 0; k < C; k++) {
            float g = g2[toks[j] * C + k];
            for (int r = starts[j]; r < starts[j + 1]; r++)
                g += dx[rows[r] * C + k];
            g2[toks[j] * C + k] = g;
        }
    for (int t = 0; t < T; t++)
        for (int k = 0; k < C; k++) {
            float g = p2[t * C + k];
            for (int i = t; i < NN; i += T)
                g += dx[i * C + k];
            p2[t * C + k] = g;
        }
    CHECK(!memcmp(g1, g2, sizeof g1) && !memcmp(p1, p2, sizeof p1), "the indexed sums equal the twin's");
    tok[7] = V;
    CHECK(fl_embed_index(toks, starts, rows, &ntok, tok, NN, V) == -1, "token beyond the vocabulary refused");
    printf("  embeddings: the index's order, the device's sums equal the twin's bit for bit\n");
}

static void check_xent(void)
{
    uint64_t tab[32];
    fl_expf_table(tab);
    const int glibc = fl_model_expf_mismatches(0, 1, 1) >= 0; /* the harness found its libm to be glibc's */
    long bad = 0, n = 0;
    if (glibc) {
        for (uint64_t b = 0; b < (1ull << 32); b += 65521, n++) {
            const float x = fl_f32_from_bits((uint32_t)b);
            bad += !same_bits(fl_expf_glibc(x, tab), expf(x));
        }
        const float edges[] = { 88.0f, 0x1.62e42ep6f, 0x1.62e430p6f, -88.0f, -0x1.9fe368p6f, -0x1.9fe36ap6f, -100.0f,
                                -103.0f, -104.0f, INFINITY, -INFINITY, NAN, 0.0f, -0.0f, 0x1p-149f };
        for (size_t k = 0; k < sizeof edges / sizeof *edges; k++, n++)
            bad += !same_bits(fl_expf_glibc(edges[k], tab), expf(edges[k]));
        CHECK(bad == 0, "fl_expf_glibc differs from expf on %ld of %ld inputs", bad, n);
    }
    enum { R = 5, V = 300 };
    static float z[R * V], z0[R * V];
    double loss[R];
    int tgt[R];
    uint64_t s = 11;
    for (int i = 0; i < R * V; i++)
        z[i] = z0[i] = (float)(((double)(fl_splitmix64(&s) >> 11) * 0x1p-53 - 0.5) * (i / V == 2 ? 200.0 : 8.0));
    for (int r = 0; r < R; r++)
        tgt[r] = (int)(fl_splitmix64(&s) % V);
    fl_xent_fwd(z, loss, tgt, R, V, tab);
    for (int r = 0; r < R; r++) {
        double m = -INFINITY, sum = 0;
        for (int v = 0; v < V; v++)
            m = fmax(m, z0[r * V + v]);
        for (int v = 0; v < V; v++)
            sum += exp((double)z0[r * V + v] - m);
        const double lref = log(sum) - ((double)z0[r * V + tgt[r]] - m);
        /* each exp within ~1 ulp (glibc's expf: 0.502 ulp) of its float argument, itself one rounding of
           z - m; the double sum and the float normalisation add a few u */
        if ((double)z0[r * V + tgt[r]] - m < -103.0) /* the target's float exp underflows to 0, as in the harness */
            CHECK(isinf(loss[r]) && loss[r] > 0, "loss row %d: %g, not +Inf", r, loss[r]);
        else
            CHECK(fabs(loss[r] - lref) <= 4e-6 * (1 + fabs(lref)), "loss row %d: %.9g vs %.9g", r, loss[r], lref);
        for (int v = 0; v < V; v++) {
            const double p = exp((double)z0[r * V + v] - m) / sum;
            CHECK(fabs(z[r * V + v] - p) <= 8 * 0x1p-24 * p + 0x1p-149 + (fabs(z0[r * V + v] - m) + 1) * 0x1p-24 * p,
                  "p[%d, %d]: %a vs %a", r, v, z[r * V + v], p);
        }
    }
    float zb[R * V];
    memcpy(zb, z, sizeof zb);
    fl_xent_bwd(zb, tgt, R, V);
    for (int i = 0; i < R * V; i++) {
        const float want = (i % V == tgt[i / V] ? z[i] - 1.0f : z[i]) * (1.0f / (float)R);
        CHECK(fl_f32_bits(zb[i]) == fl_f32_bits(want), "bwd %d", i);
    }
    printf("  cross-entropy: fl_expf_glibc %s; probabilities and losses within their bounds; the backward\n",
           glibc ? "equal to glibc's expf on a stride of every float32 and the edges" : "not compared (the libm is not glibc's FMA expf)");
}

static void check_attn_softmax(void)
{
    fl_model_cfg cfg = { .V = 32, .C = 16, .L = 1, .H = 2, .F = 16, .T = 37, .B = 2, .init_std = 0.3f };
    CHECK(!fl_act_parse(&cfg.act, "swiglu"), "act");
    test_model tm;
    test_model_init(&tm, &cfg, FL_RECIPE_FP32, 3);
    const size_t B = cfg.B, T = cfg.T, C = cfg.C, H = cfg.H, hs = C / H, C3 = 3 * C;
    uint16_t tok[2 * 38];
    uint64_t s = 1;
    for (size_t i = 0; i < B * (T + 1); i++)
        tok[i] = (uint16_t)(fl_splitmix64(&s) % cfg.V);
    fl_model_forward(&tm.m, tok);
    fl_model_backward(&tm.m);
    uint64_t tab[32];
    fl_expf_table(tab);
    const float scale = 1.0f / sqrtf((float)hs);
    const size_t R = B * H * T;
    float *S = malloc(R * T * sizeof *S), *P = malloc(R * T * sizeof *P), *dP = malloc(R * T * sizeof *dP),
          *dS = malloc(R * T * sizeof *dS);
    CHECK(S && P && dP && dS, "alloc");
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t t = 0; t < T; t++)
                for (size_t j = 0; j < T; j++) {
                    const float *q = tm.m.qkv + (b * T + t) * C3 + h * hs, *k = tm.m.qkv + (b * T + j) * C3 + C + h * hs;
                    const float *go = tm.m.datty + (b * T + t) * C + h * hs, *v = tm.m.qkv + (b * T + j) * C3 + 2 * C + h * hs;
                    float a = 0.0f, g = 0.0f; /* the harness's sums: d ascending from +0 */
                    for (size_t d = 0; d < hs; d++) {
                        a += q[d] * k[d];
                        g += go[d] * v[d];
                    }
                    S[((b * H + h) * T + t) * T + j] = a;
                    dP[((b * H + h) * T + t) * T + j] = g;
                }
    fl_attn_softmax_fwd(P, S, R, T, scale, tab);
    CHECK(!memcmp(P, tm.m.att, R * T * sizeof *P), "the probabilities are the harness's");
    fl_attn_softmax_bwd(dS, tm.m.att, dP, R, T, scale);
    int bad = 0;
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++)
            for (size_t t = 0; t < T; t++)
                for (size_t d = 0; d < hs; d++) {
                    float dq = 0.0f; /* the harness's: j ascending from +0 */
                    for (size_t j = 0; j <= t; j++)
                        dq += dS[((b * H + h) * T + t) * T + j] * tm.m.qkv[(b * T + j) * C3 + C + h * hs + d];
                    bad += fl_f32_bits(dq) != fl_f32_bits(tm.m.dqkv[(b * T + t) * C3 + h * hs + d]);
                }
    CHECK(!bad, "dq from the softmax backward differs from the harness's in %d elements", bad);
    free(S), free(P), free(dP), free(dS);
    test_model_free(&tm);
    printf("  attention softmax: the harness's probabilities and (through dq) its score gradients, bit for bit\n");
}

static void check_step_sums(void)
{
    static const size_t ns[] = { 0, 1, 255, 257, FL_SUMSQ_CHUNK - 1, FL_SUMSQ_CHUNK + 1, 3 * FL_SUMSQ_CHUNK + 300 };
    uint64_t seed = 21;
    for (size_t k = 0; k < FL_ARRAY_LEN(ns); k++) {
        const size_t n = ns[k];
        float *x = malloc((n ? n : 1) * sizeof *x);
        long double ref = 0.0L, iref = 0.0L;
        for (size_t i = 0; i < n; i++)
            iref += (long double)((i % 1000) * (i % 1000)), x[i] = (float)(i % 1000);
        CHECK(fl_sumsq(x, n) == (double)iref, "fl_sumsq exact on integers, n = %zu: %a vs %La", n, fl_sumsq(x, n), iref);
        for (size_t i = 0; i < n; i++) {
            x[i] = (float)(fl_open01(fl_splitmix64(&seed)) - 0.5) * 3.0f;
            ref += (long double)x[i] * x[i];
        }
        const double got = fl_sumsq(x, n), tol = (double)(n + 8) * 0x1p-53 * (double)ref;
        CHECK(fabs(got - (double)ref) <= tol, "fl_sumsq n = %zu: %a vs %La (bound %a)", n, got, ref, tol);
        free(x);
    }
    /* fl_amax_rms against the harness's fl_model_amax_rms */
    static const size_t shapes[][2] = { { 1, 1 }, { 7, 3 }, { 33, 16 }, { 64, 100 }, { 17, 1031 } };
    for (size_t k = 0; k < FL_ARRAY_LEN(shapes); k++)
        for (int threads = 1; threads <= 2; threads++) {
            const size_t R = shapes[k][0], C = shapes[k][1];
            float *x = malloc(R * C * sizeof *x);
            for (size_t i = 0; i < R * C; i++)
                x[i] = rnd_float(&seed, (int)i + 3);
            if (R * C > 20)
                x[19] = NAN;
            omp_set_num_threads(threads);
            float a1, r1, a2, r2;
            fl_amax_rms(&a1, &r1, x, R, C);
            fl_model_amax_rms(&a2, &r2, x, R, C);
            CHECK(same_bits(a1, a2) && same_bits(r1, r2), "amax_rms (%zu, %zu) at %d threads: twin %a %a, harness %a %a", R,
                  C, threads, a1, r1, a2, r2);
            fl_model_amax_rms(&a2, NULL, x, R, C);
            CHECK(same_bits(a1, a2), "amax alone");
            free(x);
        }
    printf("  the GPU step's sums: fl_sumsq exact on integers and within its bound; fl_amax_rms = the harness's "
           "amax_rms bit for bit\n");
}

static void check_heads_copy(void)
{
    enum { B = 3, T = 5, H = 4, hs = 3, ld = H * hs + 2 };
    float rows[B * T * ld], mats[B * H * T * hs], back[B * T * ld];
    for (size_t i = 0; i < B * T * ld; i++)
        rows[i] = (float)i, back[i] = -1.0f;
    CHECK(!fl_heads_copy(mats, rows, B, T, H, hs, ld, 1) && !fl_heads_copy(back, mats, B, T, H, hs, ld, 0), "heads copy");
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++)
            for (size_t c = 0; c < ld; c++) {
                const size_t r = (b * T + t) * ld + c;
                if (c < H * hs)
                    CHECK(mats[((b * H + c / hs) * T + t) * hs + c % hs] == rows[r] && back[r] == rows[r],
                          "heads copy: b %zu t %zu column %zu", b, t, c);
                else
                    CHECK(back[r] == -1.0f, "heads copy wrote column %zu beyond the heads", c);
            }
    fprintf(stderr, "(a refusal is expected next)\n");
    CHECK(fl_heads_copy(mats, rows, B, T, H, hs, H * hs - 1, 1) == -1, "heads wider than the row accepted");
    printf("  the attention's head layout copy: per-head matrices and back, wide heads refused\n");
}

int main(void)
{
    check_step_sums();
    check_blocks_equal_elements();
    check_against_double();
    check_rmsnorm();
    check_cast();
    check_cast_smooth();
    check_embed();
    check_xent();
    check_attn_softmax();
    check_heads_copy();
    PASS("test_train_kernels");
}
