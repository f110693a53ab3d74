/* vexp.c — the AVX-512 and AVX2 bodies of model.c's expf_sub (see model_simd.h and model.c's expf_main:
   glibc's main path of expf, in doubles, with its fused operations as explicit fma). */
#include "model_simd.h"
#include "model.h"

#include <math.h>

#if defined(__x86_64__) && defined(__GNUC__)

/* 32/ln2; 1.5 * 2^52, which rounds to an integer; glibc's cubic (model.c: expf_main) */
#define VEXP_INV 0x1.71547652b82fep+5
#define VEXP_SHIFT 0x1.8p52
#define VEXP_C0 0x1.c6af84b912394p-20
#define VEXP_C1 0x1.ebfce50fac4f3p-13
#define VEXP_C2 0x1.62e42ff0c52d6p-6

/* ---- AVX-512 -------------------------------------------------------------------------------------- */

/* expf_main of 8 floats in doubles; the table lookup is two two-register permutes and a blend on bit
   4 of the index (a gather is slower). */
static inline __attribute__((always_inline)) MODEL_T512 __m256 expf_main8_avx512(__m256 xh)
{
    const __m512d inv = _mm512_set1_pd(VEXP_INV), shift = _mm512_set1_pd(VEXP_SHIFT);
    const __m512d c0 = _mm512_set1_pd(VEXP_C0), c1 = _mm512_set1_pd(VEXP_C1);
    const __m512d c2 = _mm512_set1_pd(VEXP_C2), one = _mm512_set1_pd(1.0);
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
static inline __attribute__((always_inline)) MODEL_T512 __m512 expf_main16_avx512(__m512 xa, int lo8)
{
    const __m512i xi = _mm512_castps_si512(xa);
    const __m512i lo = _mm512_castsi256_si512(_mm256_castps_si256(expf_main8_avx512(_mm512_castps512_ps256(xa))));
    if (lo8)
        return _mm512_castsi512_ps(_mm512_zextsi256_si512(_mm512_castsi512_si256(lo)));
    const __m256 yh = expf_main8_avx512(_mm256_castsi256_ps(_mm512_extracti64x4_epi64(xi, 1)));
    return _mm512_castsi512_ps(_mm512_inserti64x4(lo, _mm256_castps_si256(yh), 1));
}

/* 16 at a time, the last block masked (only its low half computed when it has at most 8); a block with
   a special lane calls expf */
static MODEL_T512 void expf_sub_avx512(float *y, const float *x, float m, size_t n)
{
    const __m512 mv = _mm512_set1_ps(m);
    const __m512i abs = _mm512_set1_epi32(0x7FFFFFFF), lim = _mm512_set1_epi32(0x42B00000); /* top12 > 0x42a */
    for (size_t i = 0; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
        const __m512 a = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), mv);
        if (_mm512_mask_cmpge_epu32_mask(k, _mm512_and_si512(_mm512_castps_si512(a), abs), lim)) {
            float b[16];
            _mm512_storeu_ps(b, a);
            for (size_t l = 0; l < 16 && i + l < n; l++)
                y[i + l] = expf(b[l]);
        } else {
            _mm512_mask_storeu_ps(y + i, k, expf_main16_avx512(a, n - i <= 8));
        }
    }
}

/* ---- AVX2 ----------------------------------------------------------------------------------------- */

/* expf_main of 4 floats in doubles; the table lookup is a gather. */
static inline __attribute__((always_inline)) MODEL_T256 __m128 expf_main4_avx2(__m128 xh)
{
    const __m256d inv = _mm256_set1_pd(VEXP_INV), shift = _mm256_set1_pd(VEXP_SHIFT);
    const __m256d c0 = _mm256_set1_pd(VEXP_C0), c1 = _mm256_set1_pd(VEXP_C1);
    const __m256d c2 = _mm256_set1_pd(VEXP_C2), one = _mm256_set1_pd(1.0);
    const __m256d xd = _mm256_cvtps_pd(xh);
    const __m256d kds = _mm256_fmadd_pd(inv, xd, shift);
    const __m256i ki = _mm256_castpd_si256(kds);
    const __m256d kd = _mm256_sub_pd(kds, shift);
    const __m256d r = _mm256_fmsub_pd(inv, xd, kd);
    const __m256i tab = _mm256_i64gather_epi64((const long long *)model_expf_tab,
                                               _mm256_and_si256(ki, _mm256_set1_epi64x(31)), 8);
    const __m256d sc = _mm256_castsi256_pd(_mm256_add_epi64(tab, _mm256_slli_epi64(ki, 47)));
    const __m256d z = _mm256_fmadd_pd(c0, r, c1), r2 = _mm256_mul_pd(r, r), y0 = _mm256_fmadd_pd(c2, r, one);
    return _mm256_cvtpd_ps(_mm256_mul_pd(_mm256_fmadd_pd(z, r2, y0), sc));
}

/* expf_sub_avx512 with blocks of 8 (the last masked, only its low half computed when it has at most
   4). */
static MODEL_T256 void expf_sub_avx2(float *y, const float *x, float m, size_t n)
{
    const __m256 mv = _mm256_set1_ps(m);
    const __m256i abs = _mm256_set1_epi32(0x7FFFFFFF), lim = _mm256_set1_epi32(0x42AFFFFF); /* top12 > 0x42a */
    for (size_t i = 0; i < n; i += 8) {
        const size_t nl = n - i < 8 ? n - i : 8;
        const __m256i k = model_mask8(nl);
        const __m256 a = _mm256_sub_ps(nl == 8 ? _mm256_loadu_ps(x + i) : _mm256_maskload_ps(x + i, k), mv);
        /* |a| as a signed integer (its sign bit clear) above lim, in the lanes of k */
        const __m256i sp = _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_and_si256(_mm256_castps_si256(a), abs), lim), k);
        if (!_mm256_testz_si256(sp, sp)) {
            float b[8];
            _mm256_storeu_ps(b, a);
            for (size_t l = 0; l < nl; l++)
                y[i + l] = expf(b[l]);
            continue;
        }
        const __m128 lo = expf_main4_avx2(_mm256_castps256_ps128(a));
        const __m256 e = nl <= 4 ? _mm256_castps128_ps256(lo)
                                 : _mm256_insertf128_ps(_mm256_castps128_ps256(lo), expf_main4_avx2(_mm256_extractf128_ps(a, 1)), 1);
        if (nl == 8)
            _mm256_storeu_ps(y + i, e);
        else
            _mm256_maskstore_ps(y + i, k, e);
    }
}

#endif /* x86-64 */

int model_expf_sub_simd(float *y, const float *x, float m, size_t n)
{
#if defined(__x86_64__) && defined(__GNUC__)
    const int isa = model_simd_isa();
    if (isa >= FL_ISA_AVX512)
        expf_sub_avx512(y, x, m, n);
    else if (isa >= FL_ISA_AVX2)
        expf_sub_avx2(y, x, m, n);
    else
        return 0;
    return 1;
#else
    (void)y, (void)x, (void)m, (void)n;
    return 0;
#endif
}
