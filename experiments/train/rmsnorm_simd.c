/* rmsnorm_simd.c — the AVX-512 and AVX2 bodies of model.c's rms_forward, rms_backward and amax_rms (see
   model_simd.h).  A block of rows (16 with AVX-512, 8 with AVX2) runs side by side, one row per lane:
   each square block of (rows, channels) is transposed in registers and a row's sum takes one vector
   add per channel, in channel order. */
#include "model_simd.h"
#include "model.h"

#include <math.h>
#include <stdlib.h>

#if defined(__x86_64__) && defined(__GNUC__)

/* ---- AVX-512 -------------------------------------------------------------------------------------- */

enum { RMS_CB = 64 }; /* rms_backward's gain gradient: channels per block, whose sums stay in registers over the rows */

/* v[j] = column j of the 16 x 16 block at p (row stride ld): lane i holds p[i ld + j].  The
   cross-lane part is done by the loads (128-bit pieces of four rows into the four lanes), the rest
   by a 4 x 4 transpose within each 128-bit lane. */
static inline __attribute__((always_inline)) MODEL_T512 void ld16t(__m512 v[16], const float *p, size_t ld)
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

/* Lane r: the sum over the C channels of row t0 + r of a b (with gain: (a gain) b), in channel order --
   the 16 rows' products of each 16-channel block are transposed (model_tr16) so that every lane adds
   its own row's.  Rows past the nr of the block repeat the last. */
static inline __attribute__((always_inline)) MODEL_T512 __m512 rows16_dot(const float *a, const float *b,
                                                                           const float *gain, size_t t0, size_t nr,
                                                                           size_t C)
{
    __m512 s = _mm512_setzero_ps();
    for (size_t c0 = 0; c0 < C; c0 += 16) {
        const size_t nc = C - c0 < 16 ? C - c0 : 16;
        const __mmask16 mk = (__mmask16)((1u << nc) - 1u);
        const __m512 g = gain ? _mm512_maskz_loadu_ps(mk, gain + c0) : _mm512_setzero_ps();
        const size_t o = t0 * C + c0;
        const float *ap = a + o, *bp = b + o;
        __m512 v[16];
        for (size_t r = 0; r < 16; r++) {
            const __m512 ar = _mm512_maskz_loadu_ps(mk, ap);
            v[r] = _mm512_mul_ps(gain ? _mm512_mul_ps(ar, g) : ar, _mm512_maskz_loadu_ps(mk, bp));
            const size_t st = r + 1 < nr ? C : 0;
            ap += st;
            bp += st;
        }
        model_tr16(v);
        for (size_t j = 0; j < nc; j++)
            s = _mm512_add_ps(s, v[j]);
    }
    return s;
}

static MODEL_T512 void rms_forward_avx512_block0(float *y, float *rstd, const float *x, const float *gain, size_t N, size_t C, size_t t0)
{
    const size_t nr = N - t0 < 16 ? N - t0 : 16;
    const __m512 ss = rows16_dot(x, x, NULL, t0, nr, C); /* lane r: sum x^2 of row t0 + r */
    const __m512 rr = _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_sqrt_ps(_mm512_add_ps(
                                        _mm512_div_ps(ss, _mm512_set1_ps((float)C)), _mm512_set1_ps(RMS_EPS))));
    _mm512_mask_storeu_ps(rstd + t0, (__mmask16)((1u << nr) - 1u), rr);
    for (size_t t = t0; t < t0 + nr; t++) {
        const float *xr = x + t * C, rt = rstd[t];
        for (size_t c = 0; c < C; c++)
            y[t * C + c] = xr[c] * rt * gain[c];
    }
}

/* The loop bodies are functions of their own: OpenMP outlines a parallel loop into a new function,
   which GCC gives the enclosing target attribute and clang does not. */
static void rms_forward_avx512(float *y, float *rstd, const float *x, const float *gain, size_t N, size_t C)
{
#pragma omp parallel for schedule(static)
    for (size_t t0 = 0; t0 < N; t0 += 16)
        rms_forward_avx512_block0(y, rstd, x, gain, N, C, t0);
}

static MODEL_T512 void rms_backward_avx512_block0(float *dx, const float *dy, const float *x, const float *rstd,
                                                  const float *gain, size_t N, size_t C, int accumulate, size_t t0)
{
    const size_t nr = N - t0 < 16 ? N - t0 : 16;
    const __m512 dot = rows16_dot(dy, x, gain, t0, nr, C); /* lane r: sum dy gain x of row t0 + r */
    const __m512 rr = _mm512_maskz_loadu_ps((__mmask16)((1u << nr) - 1u), rstd + t0);
    float k[16]; /* k[r] = rstd^3 dot / C of row t0 + r */
    _mm512_storeu_ps(k, _mm512_div_ps(_mm512_mul_ps(_mm512_mul_ps(_mm512_mul_ps(rr, rr), rr), dot),
                                      _mm512_set1_ps((float)C)));
    for (size_t r = 0; r < nr; r++) {
        const size_t t = t0 + r;
        const float *xr = x + t * C, *dyr = dy + t * C;
        const float rt = rstd[t], kt = k[r];
        float *dxr = dx + t * C;
        if (accumulate)
            for (size_t c = 0; c < C; c++)
                dxr[c] = dxr[c] + (rt * dyr[c] * gain[c] - kt * xr[c]);
        else
            for (size_t c = 0; c < C; c++)
                dxr[c] = rt * dyr[c] * gain[c] - kt * xr[c];
    }
}

static MODEL_T512 void rms_backward_avx512_block1(float *dgain, const float *dy, const float *x, const float *rstd,
                                                  size_t N, size_t C, size_t c0)
{
    __mmask16 mk[RMS_CB / 16];
    __m512 s[RMS_CB / 16];
    for (size_t q = 0; q < RMS_CB / 16; q++) {
        const size_t lo = c0 + 16 * q, nc = lo >= C ? 0 : C - lo < 16 ? C - lo : 16;
        mk[q] = (__mmask16)((1u << nc) - 1u);
        s[q] = _mm512_setzero_ps();
    }
    for (size_t t = 0; t < N; t++) {
        const __m512 rt = _mm512_set1_ps(rstd[t]);
        for (size_t q = 0; q < RMS_CB / 16; q++) {
            const size_t o = t * C + c0 + 16 * q;
            s[q] = _mm512_add_ps(s[q], _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(mk[q], dy + o),
                                                                   _mm512_maskz_loadu_ps(mk[q], x + o)), rt));
        }
    }
    for (size_t q = 0; q < RMS_CB / 16; q++) {
        float *d = dgain + c0 + 16 * q;
        _mm512_mask_storeu_ps(d, mk[q], _mm512_add_ps(_mm512_maskz_loadu_ps(mk[q], d), s[q]));
    }
}

static void rms_backward_avx512(float *dx, float *dgain, const float *dy, const float *x, const float *rstd,
                                const float *gain, size_t N, size_t C, int accumulate)
{
#pragma omp parallel for schedule(static)
    for (size_t t0 = 0; t0 < N; t0 += 16)
        rms_backward_avx512_block0(dx, dy, x, rstd, gain, N, C, accumulate, t0);
#pragma omp parallel for schedule(static)
    for (size_t c0 = 0; c0 < C; c0 += RMS_CB)
        rms_backward_avx512_block1(dgain, dy, x, rstd, N, C, c0);
}

/* rs[i] = the sum over c of |x_ic|^2 in double, c in order; the returned maximum of the bit patterns
   of |x| over the non-NaN elements. */
static MODEL_T512 uint32_t amax_rms_avx512_block0(double *rs, const float *x, size_t R, size_t C, size_t i0)
{
    const size_t nr = R - i0 < 16 ? R - i0 : 16;
    __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd(); /* lane r: row i0 + r, i0 + 8 + r */
    __m512i mb = _mm512_setzero_si512();
    for (size_t c0 = 0; c0 < C; c0 += 16) {
        const size_t nc = C - c0 < 16 ? C - c0 : 16;
        const __mmask16 mk = (__mmask16)((1u << nc) - 1u);
        const float *xp = x + i0 * C + c0;
        __m512 v[16];
        if (nr == 16 && nc == 16) { /* a full block: transposed by the loads; the maximum as below */
            ld16t(v, xp, C);
            for (size_t j = 0; j < 16; j++) {
                const __m512i b = _mm512_and_si512(_mm512_castps_si512(v[j]), _mm512_set1_epi32(0x7FFFFFFF));
                mb = _mm512_mask_max_epu32(mb, _mm512_cmple_epu32_mask(b, _mm512_set1_epi32(0x7F800000)), mb, b);
                const __m512 a = _mm512_castsi512_ps(b);
                const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(a));
                const __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
                s0 = _mm512_add_pd(s0, _mm512_mul_pd(lo, lo));
                s1 = _mm512_add_pd(s1, _mm512_mul_pd(hi, hi));
            }
            continue;
        }
        for (size_t r = 0; r < 16; r++, xp += r < nr ? C : 0) { /* |x|; rows past R repeat the last */
            const __m512i b = _mm512_and_si512(_mm512_maskz_loadu_epi32(mk, xp), _mm512_set1_epi32(0x7FFFFFFF));
            /* NaN patterns count as 0 in the maximum */
            mb = _mm512_mask_max_epu32(mb, _mm512_cmple_epu32_mask(b, _mm512_set1_epi32(0x7F800000)), mb, b);
            v[r] = _mm512_castsi512_ps(b);
        }
        model_tr16(v);
        for (size_t j = 0; j < nc; j++) {
            const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v[j]));
            const __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v[j]), 1)));
            s0 = _mm512_add_pd(s0, _mm512_mul_pd(lo, lo));
            s1 = _mm512_add_pd(s1, _mm512_mul_pd(hi, hi));
        }
    }
    double s[16];
    _mm512_storeu_pd(s, s0);
    _mm512_storeu_pd(s + 8, s1);
    for (size_t r = 0; r < nr; r++)
        rs[i0 + r] = s[r];
    return (uint32_t)_mm512_reduce_max_epu32(mb);
}

static uint32_t amax_rms_avx512(double *rs, const float *x, size_t R, size_t C)
{
    uint32_t amb = 0;
#pragma omp parallel for schedule(static) reduction(max : amb)
    for (size_t i0 = 0; i0 < R; i0 += 16) {
        const uint32_t m = amax_rms_avx512_block0(rs, x, R, C, i0);
        amb = m > amb ? m : amb;
    }
    return amb;
}

/* ---- AVX2 ----------------------------------------------------------------------------------------- */

/* rows16_dot with 8 rows and 8-channel blocks (model_tr8); the channels past C load as zero and are
   not added. */
static inline __attribute__((always_inline)) MODEL_T256 __m256 rows8_dot(const float *a, const float *b,
                                                                          const float *gain, size_t t0, size_t nr,
                                                                          size_t C)
{
    __m256 s = _mm256_setzero_ps();
    for (size_t c0 = 0; c0 < C; c0 += 8) {
        const size_t nc = C - c0 < 8 ? C - c0 : 8;
        const __m256i mk = model_mask8(nc);
        const __m256 g = gain ? _mm256_maskload_ps(gain + c0, mk) : _mm256_setzero_ps();
        const size_t o = t0 * C + c0;
        const float *ap = a + o, *bp = b + o;
        __m256 v[8];
        for (size_t r = 0; r < 8; r++) {
            const __m256 ar = _mm256_maskload_ps(ap, mk);
            v[r] = _mm256_mul_ps(gain ? _mm256_mul_ps(ar, g) : ar, _mm256_maskload_ps(bp, mk));
            const size_t st = r + 1 < nr ? C : 0;
            ap += st;
            bp += st;
        }
        model_tr8(v);
        for (size_t j = 0; j < nc; j++)
            s = _mm256_add_ps(s, v[j]);
    }
    return s;
}

static MODEL_T256 void rms_forward_avx2_block0(float *y, float *rstd, const float *x, const float *gain, size_t N, size_t C, size_t t0)
{
    const size_t nr = N - t0 < 8 ? N - t0 : 8;
    const __m256 ss = rows8_dot(x, x, NULL, t0, nr, C); /* lane r: sum x^2 of row t0 + r */
    const __m256 rr = _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_sqrt_ps(_mm256_add_ps(
                                        _mm256_div_ps(ss, _mm256_set1_ps((float)C)), _mm256_set1_ps(RMS_EPS))));
    _mm256_maskstore_ps(rstd + t0, model_mask8(nr), rr);
    for (size_t t = t0; t < t0 + nr; t++) {
        const float *xr = x + t * C, rt = rstd[t];
        for (size_t c = 0; c < C; c++)
            y[t * C + c] = xr[c] * rt * gain[c];
    }
}

static void rms_forward_avx2(float *y, float *rstd, const float *x, const float *gain, size_t N, size_t C)
{
#pragma omp parallel for schedule(static)
    for (size_t t0 = 0; t0 < N; t0 += 8)
        rms_forward_avx2_block0(y, rstd, x, gain, N, C, t0);
}

static MODEL_T256 void rms_backward_avx2_block0(float *dx, const float *dy, const float *x, const float *rstd,
                                                const float *gain, size_t N, size_t C, int accumulate, size_t t0)
{
    const size_t nr = N - t0 < 8 ? N - t0 : 8;
    const __m256 dot = rows8_dot(dy, x, gain, t0, nr, C); /* lane r: sum dy gain x of row t0 + r */
    const __m256 rr = _mm256_maskload_ps(rstd + t0, model_mask8(nr));
    float k[8]; /* k[r] = rstd^3 dot / C of row t0 + r */
    _mm256_storeu_ps(k, _mm256_div_ps(_mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(rr, rr), rr), dot),
                                      _mm256_set1_ps((float)C)));
    for (size_t r = 0; r < nr; r++) {
        const size_t t = t0 + r;
        const float *xr = x + t * C, *dyr = dy + t * C;
        const float rt = rstd[t], kt = k[r];
        float *dxr = dx + t * C;
        if (accumulate)
            for (size_t c = 0; c < C; c++)
                dxr[c] = dxr[c] + (rt * dyr[c] * gain[c] - kt * xr[c]);
        else
            for (size_t c = 0; c < C; c++)
                dxr[c] = rt * dyr[c] * gain[c] - kt * xr[c];
    }
}

static MODEL_T256 void rms_backward_avx2_block1(float *dgain, const float *dy, const float *x, const float *rstd,
                                                size_t N, size_t C, size_t c0)
{
    __m256i mk[RMS_CB / 8];
    __m256 s[RMS_CB / 8];
    for (size_t q = 0; q < RMS_CB / 8; q++) {
        const size_t lo = c0 + 8 * q, nc = lo >= C ? 0 : C - lo < 8 ? C - lo : 8;
        mk[q] = model_mask8(nc);
        s[q] = _mm256_setzero_ps();
    }
    for (size_t t = 0; t < N; t++) {
        const __m256 rt = _mm256_set1_ps(rstd[t]);
        for (size_t q = 0; q < RMS_CB / 8; q++) {
            const size_t o = t * C + c0 + 8 * q;
            s[q] = _mm256_add_ps(s[q], _mm256_mul_ps(_mm256_mul_ps(_mm256_maskload_ps(dy + o, mk[q]),
                                                                   _mm256_maskload_ps(x + o, mk[q])), rt));
        }
    }
    for (size_t q = 0; q < RMS_CB / 8; q++) {
        float *d = dgain + c0 + 8 * q;
        _mm256_maskstore_ps(d, mk[q], _mm256_add_ps(_mm256_maskload_ps(d, mk[q]), s[q]));
    }
}

static void rms_backward_avx2(float *dx, float *dgain, const float *dy, const float *x, const float *rstd,
                              const float *gain, size_t N, size_t C, int accumulate)
{
#pragma omp parallel for schedule(static)
    for (size_t t0 = 0; t0 < N; t0 += 8)
        rms_backward_avx2_block0(dx, dy, x, rstd, gain, N, C, accumulate, t0);
#pragma omp parallel for schedule(static)
    for (size_t c0 = 0; c0 < C; c0 += RMS_CB)
        rms_backward_avx2_block1(dgain, dy, x, rstd, N, C, c0);
}

/* amax_rms_avx512 with blocks of 8 rows (lane r of s0: row i0 + r, of s1: row i0 + 4 + r). */
static MODEL_T256 uint32_t amax_rms_avx2_block0(double *rs, const float *x, size_t R, size_t C, size_t i0)
{
    const size_t nr = R - i0 < 8 ? R - i0 : 8;
    __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
    __m256i mb = _mm256_setzero_si256();
    const __m256i abs = _mm256_set1_epi32(0x7FFFFFFF), inf = _mm256_set1_epi32(0x7F800000);
    for (size_t c0 = 0; c0 < C; c0 += 8) {
        const size_t nc = C - c0 < 8 ? C - c0 : 8;
        const __m256i mk = model_mask8(nc);
        const float *xp = x + i0 * C + c0;
        __m256 v[8];
        for (size_t r = 0; r < 8; r++, xp += r < nr ? C : 0) { /* |x|; rows past R repeat the last */
            const __m256i b = _mm256_and_si256(_mm256_maskload_epi32((const int *)xp, mk), abs);
            /* NaN patterns (above 0x7F800000, compared as signed: the sign bit is clear) count as 0 */
            mb = _mm256_max_epu32(mb, _mm256_andnot_si256(_mm256_cmpgt_epi32(b, inf), b));
            v[r] = _mm256_castsi256_ps(b);
        }
        model_tr8(v);
        for (size_t j = 0; j < nc; j++) {
            const __m256d lo = _mm256_cvtps_pd(_mm256_castps256_ps128(v[j]));
            const __m256d hi = _mm256_cvtps_pd(_mm256_extractf128_ps(v[j], 1));
            s0 = _mm256_add_pd(s0, _mm256_mul_pd(lo, lo));
            s1 = _mm256_add_pd(s1, _mm256_mul_pd(hi, hi));
        }
    }
    double s[8];
    _mm256_storeu_pd(s, s0);
    _mm256_storeu_pd(s + 4, s1);
    for (size_t r = 0; r < nr; r++)
        rs[i0 + r] = s[r];
    uint32_t m[8], mx = 0;
    _mm256_storeu_si256((__m256i *)m, mb);
    for (int l = 0; l < 8; l++)
        mx = m[l] > mx ? m[l] : mx;
    return mx;
}

static uint32_t amax_rms_avx2(double *rs, const float *x, size_t R, size_t C)
{
    uint32_t amb = 0;
#pragma omp parallel for schedule(static) reduction(max : amb)
    for (size_t i0 = 0; i0 < R; i0 += 8) {
        const uint32_t m = amax_rms_avx2_block0(rs, x, R, C, i0);
        amb = m > amb ? m : amb;
    }
    return amb;
}

#endif /* x86-64 */

/* ---- dispatch --------------------------------------------------------------------------------------- */

int model_rms_forward_simd(float *y, float *rstd, const float *x, const float *gain, size_t N, size_t C)
{
#if defined(__x86_64__) && defined(__GNUC__)
    const int isa = model_simd_isa();
    if (isa >= FL_ISA_AVX512)
        rms_forward_avx512(y, rstd, x, gain, N, C);
    else if (isa >= FL_ISA_AVX2)
        rms_forward_avx2(y, rstd, x, gain, N, C);
    else
        return 0;
    return 1;
#else
    (void)y, (void)rstd, (void)x, (void)gain, (void)N, (void)C;
    return 0;
#endif
}

int model_rms_backward_simd(float *dx, float *dgain, const float *dy, const float *x, const float *rstd,
                            const float *gain, size_t N, size_t C, int accumulate)
{
#if defined(__x86_64__) && defined(__GNUC__)
    const int isa = model_simd_isa();
    if (isa >= FL_ISA_AVX512)
        rms_backward_avx512(dx, dgain, dy, x, rstd, gain, N, C, accumulate);
    else if (isa >= FL_ISA_AVX2)
        rms_backward_avx2(dx, dgain, dy, x, rstd, gain, N, C, accumulate);
    else
        return 0;
    return 1;
#else
    (void)dx, (void)dgain, (void)dy, (void)x, (void)rstd, (void)gain, (void)N, (void)C, (void)accumulate;
    return 0;
#endif
}

/* amax: as model.c's loop; rms: the row sums in double, then their sum in row order. */
int model_amax_rms_simd(float *amax, float *rms, const float *x, size_t R, size_t C)
{
#if defined(__x86_64__) && defined(__GNUC__)
    const int isa = model_simd_isa();
    if (isa < FL_ISA_AVX2)
        return 0;
    const size_t n = R * C;
    double *rs = malloc((R ? R : 1) * sizeof *rs);
    if (!rs)
        return 0;
    const uint32_t amb = isa >= FL_ISA_AVX512 ? amax_rms_avx512(rs, x, R, C) : amax_rms_avx2(rs, x, R, C);
    *amax = fl_f32_from_bits(amb);
    double tot = 0.0;
    for (size_t i = 0; i < R; i++)
        tot += rs[i];
    free(rs);
    *rms = (float)sqrt(tot / (double)(n > 0 ? n : 1));
    return 1;
#else
    (void)amax, (void)rms, (void)x, (void)R, (void)C;
    return 0;
#endif
}
