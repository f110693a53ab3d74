/* model_simd.h — private to experiments/train: the AVX-512 paths of model.c.

   model.c is the plain C reference; with __AVX512F__ it calls the functions declared here
   (rmsnorm_simd.c: RMSNorm and amax_rms, vexp.c: the softmax exp, attention_simd.c: the
   attention transposes) and inlines the helpers below into its hot loops.  Each has the
   evaluation order of the loops it replaces, so the bits do not depend on the build. */
#ifndef FL_TRAIN_MODEL_SIMD_H
#define FL_TRAIN_MODEL_SIMD_H

#include <stddef.h>
#include <stdint.h>

#define RMS_EPS 1e-5f /* the RMSNorm epsilon (model.c, rmsnorm_simd.c) */

/* T[i] = the bits of RN(2^(i/32)) minus i << 47 (model.c: expf_tab_init). */
extern uint64_t model_expf_tab[32];

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* Transposes the 16 x 16 block v (v[i] lane j becomes v[j] lane i); RMSNorm, amax_rms, attention and
   the GEMM's panels (gemm.c, which dispatches at run time: hence the target attribute, not __AVX512F__). */
static inline __attribute__((always_inline, target("avx512f"))) void model_tr16(__m512 v[16])
{
    __m512 a[16], b[16];
    for (int i = 0; i < 16; i += 2) { /* a[i], a[i+1]: rows i, i+1 interleaved within 128-bit lanes */
        a[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
        a[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
    }
    for (int g = 0; g < 16; g += 4) { /* b[g+j] lane k: rows g..g+3 of column 4k+j */
        b[g] = _mm512_shuffle_ps(a[g], a[g + 2], 0x44);
        b[g + 1] = _mm512_shuffle_ps(a[g], a[g + 2], 0xEE);
        b[g + 2] = _mm512_shuffle_ps(a[g + 1], a[g + 3], 0x44);
        b[g + 3] = _mm512_shuffle_ps(a[g + 1], a[g + 3], 0xEE);
    }
    for (int j = 0; j < 4; j++) {
        const __m512 p = _mm512_shuffle_f32x4(b[j], b[4 + j], 0x88), q = _mm512_shuffle_f32x4(b[j], b[4 + j], 0xDD);
        const __m512 r = _mm512_shuffle_f32x4(b[8 + j], b[12 + j], 0x88), s = _mm512_shuffle_f32x4(b[8 + j], b[12 + j], 0xDD);
        v[j] = _mm512_shuffle_f32x4(p, r, 0x88);
        v[4 + j] = _mm512_shuffle_f32x4(q, s, 0x88);
        v[8 + j] = _mm512_shuffle_f32x4(p, r, 0xDD);
        v[12 + j] = _mm512_shuffle_f32x4(q, s, 0xDD);
    }
}
#endif

#if defined(__AVX512F__)
#include <immintrin.h>
#include <math.h>

/* ---- exported SIMD bodies ---- */

/* rms_forward, rms_backward and amax_rms (with rms not NULL) of model.c (rmsnorm_simd.c). */
void model_rms_forward_avx512(float *y, float *rstd, const float *x, const float *gain, size_t N, size_t C);
void model_rms_backward_avx512(float *dx, float *dgain, const float *dy, const float *x, const float *rstd,
                               const float *gain, size_t N, size_t C, int accumulate);
void model_amax_rms_avx512(float *amax, float *rms, const float *x, size_t R, size_t C);
/* expf_sub of model.c once expf_check has found expf_main agreeing with expf (vexp.c). */
void model_expf_sub_avx512(float *y, const float *x, float m, size_t n);
/* kt[d Tp + j] = src[j C3 + d] for j < jv, d < dv (multiples of 16), 16 x 16 blocks through registers
   (attention_simd.c). */
void model_attn_transpose_avx512(float *kt, const float *src, size_t jv, size_t dv, size_t Tp, size_t C3);

/* ---- always-inline helpers of the hot loops ---- */

/* v[j] = column j of the 16 x 16 block at p (row stride ld): lane i holds p[i ld + j].  The
   cross-lane part is done by the loads (128-bit pieces of four rows into the four lanes), the rest
   by a 4 x 4 transpose within each 128-bit lane. */
static inline __attribute__((always_inline)) void model_ld16t(__m512 v[16], const float *p, size_t ld)
{
    for (int k = 0; k < 4; k++) {
        __m512 q[4]; /* q[m] lane L: row 4L + m, columns 4k..4k+3 */
        for (int m = 0; m < 4; m++) {
            q[m] = _mm512_castps128_ps512(_mm_loadu_ps(p + (size_t)m * ld + 4 * k));
            q[m] = _mm512_insertf32x4(q[m], _mm_loadu_ps(p + (size_t)(4 + m) * ld + 4 * k), 1);
            q[m] = _mm512_insertf32x4(q[m], _mm_loadu_ps(p + (size_t)(8 + m) * ld + 4 * k), 2);
            q[m] = _mm512_insertf32x4(q[m], _mm_loadu_ps(p + (size_t)(12 + m) * ld + 4 * k), 3);
        }
        const __m512 a0 = _mm512_unpacklo_ps(q[0], q[1]), a1 = _mm512_unpackhi_ps(q[0], q[1]);
        const __m512 a2 = _mm512_unpacklo_ps(q[2], q[3]), a3 = _mm512_unpackhi_ps(q[2], q[3]);
        v[4 * k] = _mm512_shuffle_ps(a0, a2, 0x44);
        v[4 * k + 1] = _mm512_shuffle_ps(a0, a2, 0xEE);
        v[4 * k + 2] = _mm512_shuffle_ps(a1, a3, 0x44);
        v[4 * k + 3] = _mm512_shuffle_ps(a1, a3, 0xEE);
    }
}

/* expf_main of 8 floats in doubles; the table lookup is two two-register permutes and a blend on bit
   4 of the index (a gather is slower). */
static inline __attribute__((always_inline)) __m256 model_expf_main8(__m256 xh)
{
    const __m512d inv = _mm512_set1_pd(0x1.71547652b82fep+5), shift = _mm512_set1_pd(0x1.8p52);
    const __m512d c0 = _mm512_set1_pd(0x1.c6af84b912394p-20), c1 = _mm512_set1_pd(0x1.ebfce50fac4f3p-13);
    const __m512d c2 = _mm512_set1_pd(0x1.62e42ff0c52d6p-6), one = _mm512_set1_pd(1.0);
    const __m512i t0 = _mm512_loadu_si512(model_expf_tab), t1 = _mm512_loadu_si512(model_expf_tab + 8);
    const __m512i t2 = _mm512_loadu_si512(model_expf_tab + 16), t3 = _mm512_loadu_si512(model_expf_tab + 24);
    const __m512d xd = _mm512_cvtps_pd(xh);
    const __m512d kds = _mm512_fmadd_pd(inv, xd, shift);
    const __m512i ki = _mm512_castpd_si512(kds);
    const __m512d kd = _mm512_sub_pd(kds, shift);
    const __m512d r = _mm512_fmsub_pd(inv, xd, kd);
    const __m512i lo = _mm512_permutex2var_epi64(t0, ki, t1), hi = _mm512_permutex2var_epi64(t2, ki, t3);
    const __m512i tab = _mm512_mask_blend_epi64(_mm512_test_epi64_mask(ki, _mm512_set1_epi64(16)), lo, hi);
    const __m512d sc = _mm512_castsi512_pd(_mm512_add_epi64(tab, _mm512_slli_epi64(ki, 47)));
    const __m512d z = _mm512_fmadd_pd(c0, r, c1), r2 = _mm512_mul_pd(r, r), y0 = _mm512_fmadd_pd(c2, r, one);
    return _mm512_cvtpd_ps(_mm512_mul_pd(_mm512_fmadd_pd(z, r2, y0), sc));
}

/* expf_main of 16 floats; with lo8 only the low 8 (the high 8 lanes of the result are then zero). */
static inline __attribute__((always_inline)) __m512 model_expf_main16(__m512 xa, int lo8)
{
    const __m512i xi = _mm512_castps_si512(xa);
    const __m512i lo = _mm512_castsi256_si512(_mm256_castps_si256(model_expf_main8(_mm512_castps512_ps256(xa))));
    if (lo8)
        return _mm512_castsi512_ps(_mm512_zextsi256_si512(_mm512_castsi512_si256(lo)));
    const __m256 yh = model_expf_main8(_mm256_castsi256_ps(_mm512_extracti64x4_epi64(xi, 1)));
    return _mm512_castsi512_ps(_mm512_inserti64x4(lo, _mm256_castps_si256(yh), 1));
}

/* Stores the first nl (< 16) lanes of a at p (attn_store's tail). */
static inline __attribute__((always_inline)) void model_store_lanes(float *p, __m512 a, size_t nl)
{
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << nl) - 1u), a);
}

/* Lane maxima m of the first n - j0 lanes (at most 16) of a; m itself when n <= j0. */
static inline __attribute__((always_inline)) __m512 model_attn_maxacc(__m512 m, __m512 a, size_t j0, size_t n)
{
    if (j0 + 16 <= n)
        return _mm512_max_ps(a, m);
    if (j0 < n)
        return _mm512_mask_max_ps(m, (__mmask16)((1u << (n - j0)) - 1u), a, m);
    return m;
}

/* attn_max of model.c: lane maxima, then their maximum. */
static inline float model_attn_max(const float *s, size_t n)
{
    size_t j = 0;
    __m512 m = _mm512_set1_ps(-INFINITY);
    for (; j + 16 <= n; j += 16)
        m = _mm512_max_ps(_mm512_loadu_ps(s + j), m);
    if (j < n) {
        const __mmask16 k = (__mmask16)((1u << (n - j)) - 1u);
        m = _mm512_mask_max_ps(m, k, _mm512_maskz_loadu_ps(k, s + j), m);
    }
    return _mm512_reduce_max_ps(m);
}

/* For r < 16: sum[r] = sum_{j < n0 + r} a_r[j] b_r[j] (a_r = a + r T, b_r = b + r T; b NULL: the plain
   sum of a_r), j in order from 0.0f, with row r in lane r: blocks of 16 columns (the products formed
   row-wise) are transposed in registers and added column by column.  Lanes past a row's end load as
   zero and add +0.0f, which changes no sum (a sum from 0.0f is never -0.0f). */
static inline __attribute__((always_inline)) void model_attn_rowsums16(float *sum, const float *a, const float *b,
                                                                 size_t T, size_t n0)
{
    __m512 acc = _mm512_setzero_ps();
    for (size_t j0 = 0; j0 < n0 + 15; j0 += 16) {
        __m512 m[16];
#pragma GCC unroll 16
        for (int r = 0; r < 16; r++) {
            const size_t n = n0 + r;
            const __mmask16 k = j0 + 16 <= n ? (__mmask16)0xFFFF : j0 < n ? (__mmask16)((1u << (n - j0)) - 1u) : 0;
            m[r] = _mm512_maskz_loadu_ps(k, a + r * T + j0);
            if (b)
                m[r] = _mm512_mul_ps(m[r], _mm512_maskz_loadu_ps(k, b + r * T + j0));
        }
        model_tr16(m);
#pragma GCC unroll 16
        for (int c = 0; c < 16; c++)
            acc = _mm512_add_ps(acc, m[c]);
    }
    _mm512_storeu_ps(sum, acc);
}

#endif /* __AVX512F__ */
#endif
