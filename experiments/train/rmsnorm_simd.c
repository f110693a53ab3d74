/* rmsnorm_simd.c — the AVX-512 bodies of model.c's rms_forward, rms_backward and amax_rms (see model_simd.h). */
#include "model_simd.h"

#if defined(__AVX512F__)
#include "model.h"

#include <stdlib.h>

/* Lane r: the sum over the C channels of row t0 + r of a b (with gain: (a gain) b), in channel order --
   the 16 rows' products of each 16-channel block are transposed (model_tr16) so that every lane adds
   its own row's.  Rows past the nr of the block repeat the last. */
static inline __attribute__((always_inline)) __m512 rows16_dot(const float *a, const float *b, const float *gain,
                                                                size_t t0, size_t nr, size_t C)
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

void model_rms_forward_avx512(float *y, float *rstd, const float *x, const float *gain, size_t N, size_t C)
{
#pragma omp parallel for schedule(static)
    for (size_t t0 = 0; t0 < N; t0 += 16) {
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
}

void model_rms_backward_avx512(float *dx, float *dgain, const float *dy, const float *x, const float *rstd,
                               const float *gain, size_t N, size_t C, int accumulate)
{
#pragma omp parallel for schedule(static)
    for (size_t t0 = 0; t0 < N; t0 += 16) {
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
    enum { CB = 64 }; /* channels per block: a block's sums stay in registers over the rows */
#pragma omp parallel for schedule(static)
    for (size_t c0 = 0; c0 < C; c0 += CB) {
        __mmask16 mk[CB / 16];
        __m512 s[CB / 16];
        for (size_t q = 0; q < CB / 16; q++) {
            const size_t lo = c0 + 16 * q, nc = lo >= C ? 0 : C - lo < 16 ? C - lo : 16;
            mk[q] = (__mmask16)((1u << nc) - 1u);
            s[q] = _mm512_setzero_ps();
        }
        for (size_t t = 0; t < N; t++) {
            const __m512 rt = _mm512_set1_ps(rstd[t]);
            for (size_t q = 0; q < CB / 16; q++) {
                const size_t o = t * C + c0 + 16 * q;
                s[q] = _mm512_add_ps(s[q], _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(mk[q], dy + o),
                                                                       _mm512_maskz_loadu_ps(mk[q], x + o)), rt));
            }
        }
        for (size_t q = 0; q < CB / 16; q++) {
            float *d = dgain + c0 + 16 * q;
            _mm512_mask_storeu_ps(d, mk[q], _mm512_add_ps(_mm512_maskz_loadu_ps(mk[q], d), s[q]));
        }
    }
}

void model_amax_rms_avx512(float *amax, float *rms, const float *x, size_t R, size_t C)
{
    const size_t n = R * C;
    uint32_t amb = 0;
    double *rs = malloc((R ? R : 1) * sizeof *rs);
#pragma omp parallel for schedule(static) reduction(max : amb)
    for (size_t i0 = 0; i0 < R; i0 += 16) {
        const size_t nr = R - i0 < 16 ? R - i0 : 16;
        __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd(); /* lane r: row i0 + r, i0 + 8 + r */
        __m512i mb = _mm512_setzero_si512();
        for (size_t c0 = 0; c0 < C; c0 += 16) {
            const size_t nc = C - c0 < 16 ? C - c0 : 16;
            const __mmask16 mk = (__mmask16)((1u << nc) - 1u);
            const float *xp = x + i0 * C + c0;
            __m512 v[16];
            if (nr == 16 && nc == 16) { /* a full block: transposed by the loads; the maximum as below */
                model_ld16t(v, xp, C);
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
        const uint32_t m = _mm512_reduce_max_epu32(mb);
        amb = m > amb ? m : amb;
    }
    *amax = fl_f32_from_bits(amb);
    double tot = 0.0;
    for (size_t i = 0; i < R; i++)
        tot += rs[i];
    free(rs);
    *rms = (float)sqrt(tot / (double)(n > 0 ? n : 1));
    return;
}

#endif
