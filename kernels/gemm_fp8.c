/* gemm_fp8.c — CPU twin of the FP8 GEMM wrapper (kernels/gemm_fp8.cu) and the fast-accumulation
 * emulation.  Semantics, layout and bounds: gemm_fp8.h. */
#include "gemm_fp8.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fl_round.h"

/* ---- fast accumulation ---------------------------------------------------------------------- */

/* floor(log2 |x|) of a finite nonzero float. */
static int ilog2f(float x)
{
    int e;
    frexpf(x, &e); /* x = f 2^e, 0.5 <= |f| < 1 */
    return e - 1;
}

float fl_fast_accum_dot(const float *a, const float *b, size_t K, const fl_fast_accum_model *model)
{
    const fl_fast_accum_model m = model ? *model : FL_FAST_ACCUM_HOPPER;
    const size_t group = m.group > 0 ? (size_t)m.group : 32;
    const size_t promote = m.promote > 0 ? (size_t)m.promote : 0;
    const int bits = m.bits > 0 && m.bits <= 24 ? m.bits : 14;
    /* Non-finite products: the plain fp32 sum carries the NaN / Inf. */
    for (size_t k = 0; k < K; k++) {
        const float p = a[k] * b[k];
        if (!isfinite(p)) {
            float s = 0.0f;
            for (size_t j = 0; j < K; j++)
                s = s + a[j] * b[j];
            return s;
        }
    }
    float total = 0.0f, T = 0.0f;
    size_t done = 0;
    for (size_t k0 = 0; k0 < K; k0 += group) {
        const size_t k1 = k0 + group < K ? k0 + group : K;
        /* E: the largest exponent among T and the group's products. */
        int E = T != 0.0f ? ilog2f(T) : INT32_MIN;
        for (size_t k = k0; k < k1; k++) {
            const float p = a[k] * b[k]; /* exact */
            if (p != 0.0f) {
                const int e = ilog2f(p);
                E = e > E ? e : E;
            }
        }
        if (E != INT32_MIN) {
            /* Every term on the grid 2^(E - bits + 1), truncated toward zero; the sum is exact in
               int64 (at most group + 1 terms below 2^bits in magnitude). */
            const int lsb = E - bits + 1;
            int64_t sum = (int64_t)trunc(ldexp((double)T, -lsb));
            for (size_t k = k0; k < k1; k++)
                sum += (int64_t)trunc(ldexp((double)(a[k] * b[k]), -lsb));
            T = (float)ldexp((double)sum, lsb); /* exact for bits <= 18, else rounded once (RNE) */
        }
        done += k1 - k0;
        if (promote && done % promote == 0) {
            total = total + T;
            T = 0.0f;
        }
    }
    return total + T;
}

double fl_fast_accum_bound(size_t K, double sum_abs, const fl_fast_accum_model *model)
{
    const fl_fast_accum_model m = model ? *model : FL_FAST_ACCUM_HOPPER;
    const double groups = ceil((double)K / (m.group > 0 ? m.group : 32));
    const double promos = m.promote > 0 ? (double)K / m.promote + 1.0 : 1.0;
    return groups * (m.group + 1) * ldexp(1.0, 1 - m.bits) * sum_abs + promos * ldexp(1.0, -24) * sum_abs;
}

/* ---- the GEMM ---------------------------------------------------------------------------------- */

static int fp8_ok(fl_format f) { return f == FL_FMT_E4M3 || f == FL_FMT_E5M2; }

int fl_gemm_fp8_cpu(const fl_gemm_fp8 *g, fl_gemm_acc acc, const fl_fast_accum_model *model)
{
    if (!g || !fp8_ok(g->a_fmt) || !fp8_ok(g->b_fmt) || (g->a_fmt == FL_FMT_E5M2 && g->b_fmt == FL_FMT_E5M2) ||
        !(g->d_fmt == FL_FMT_FP32 || g->d_fmt == FL_FMT_BF16 || g->d_fmt == FL_FMT_E4M3 || g->d_fmt == FL_FMT_E5M2) ||
        g->lda < g->k || g->ldb < g->k || g->ldd < g->m || (g->beta != 0.0f && (!g->c || g->ldc < g->m)) ||
        (unsigned)acc >= FL_GEMM_ACC_COUNT || !g->a || !g->b || !g->d) {
        fprintf(stderr, "fl_gemm_fp8_cpu: unsupported types, bad leading dimensions or NULL data\n");
        return -1;
    }
    const size_t M = g->m, N = g->n, K = g->k;
    if (M == 0 || N == 0) {
        if (g->amax_d)
            *g->amax_d = 0.0f;
        return 0;
    }
    /* Decode A and B (exact), packed: Af (M, K) row-major = (K, M) column-major with ld K. */
    float *Af = malloc(M * K * sizeof *Af + 1), *Bf = malloc(N * K * sizeof *Bf + 1), *acc32 = malloc(M * N * sizeof *acc32);
    if (!Af || !Bf || !acc32) {
        free(Af);
        free(Bf);
        free(acc32);
        return -1;
    }
    const fl_format_desc *da = fl_format_get(g->a_fmt), *db = fl_format_get(g->b_fmt);
    for (size_t m = 0; m < M; m++)
        for (size_t k = 0; k < K; k++)
            Af[m * K + k] = fl_decode_f32(da, g->a[m * g->lda + k]);
    for (size_t n = 0; n < N; n++)
        for (size_t k = 0; k < K; k++)
            Bf[n * K + k] = fl_decode_f32(db, g->b[n * g->ldb + k]);

    if (K == 0) {
        memset(acc32, 0, M * N * sizeof *acc32);
    } else if (acc == FL_GEMM_ACC_SGEMM) {
        /* acc (M, N) column-major = Af^T-as-stored (M, K) times Bf (K, N). */
        cblas_sgemm(CblasColMajor, CblasTrans, CblasNoTrans, (int)M, (int)N, (int)K, 1.0f, Af, (int)K, Bf,
                    (int)K, 0.0f, acc32, (int)M);
    } else {
        for (size_t n = 0; n < N; n++)
            for (size_t m = 0; m < M; m++) {
                const float *x = Af + m * K, *y = Bf + n * K;
                float s = 0.0f;
                if (acc == FL_GEMM_ACC_SEQ)
                    for (size_t k = 0; k < K; k++)
                        s = s + x[k] * y[k];
                else
                    s = fl_fast_accum_dot(x, y, K, model);
                acc32[n * M + m] = s;
            }
    }

    /* Epilogue, fp32: v = (alpha * a_scale * b_scale) acc + beta C; amax; D = encode(v * d_scale). */
    const float f = (g->alpha * (g->a_scale ? *g->a_scale : 1.0f)) * (g->b_scale ? *g->b_scale : 1.0f);
    const float ds = (g->d_fmt == FL_FMT_E4M3 || g->d_fmt == FL_FMT_E5M2) && g->d_scale ? *g->d_scale : 1.0f;
    const fl_format_desc *dd = fl_format_get(g->d_fmt), *bf16 = fl_format_get(FL_FMT_BF16);
    float amax = 0.0f;
    for (size_t n = 0; n < N; n++)
        for (size_t m = 0; m < M; m++) {
            float v = acc32[n * M + m] * f;
            if (g->beta != 0.0f) {
                const float cv = g->d_fmt == FL_FMT_FP32 ? ((const float *)g->c)[n * g->ldc + m]
                                                         : fl_decode_f32(bf16, ((const uint16_t *)g->c)[n * g->ldc + m]);
                v = v + g->beta * cv;
            }
            if (!isnan(v) && fabsf(v) > amax)
                amax = fabsf(v);
            const size_t o = n * g->ldd + m;
            switch (g->d_fmt) {
            case FL_FMT_FP32:
                ((float *)g->d)[o] = v;
                break;
            case FL_FMT_BF16:
                ((uint16_t *)g->d)[o] = (uint16_t)fl_encode_f32_bits(dd, fl_f32_bits(v), FL_RND_NE, FL_OVF_NOSATURATE, 0);
                break;
            default:
                ((uint8_t *)g->d)[o] = (uint8_t)fl_encode_f32_bits(dd, fl_f32_bits(v * ds), FL_RND_NE, FL_OVF_SATURATE, 0);
                break;
            }
        }
    if (g->amax_d)
        *g->amax_d = amax;
    free(Af);
    free(Bf);
    free(acc32);
    return 0;
}
