/* erf_simd.c — the AVX-512 and AVX2 bodies of fl_erff (kernels/erff.h) over a span, for the harness's
   GELU (ffn_act.c).  Each lane does fl_erf_abs_d's operations in its order: the piece i = (int)(4a),
   v = a - (2i+1)/8 (or a^2 in piece 0), Horner with fused multiply-adds over the coefficient-major table,
   the product by a in piece 0, one rounding to float; lanes with |x| >= 4 take 1 and NaN lanes x + x, as
   fl_erff's early returns do.  The bits are therefore fl_erff's (tests/test_erff.c compares them on
   every float at every vector level the CPU has).  A coefficient of 8 lanes' pieces is one
   two-register permute on AVX-512; AVX2 runs fl_erff one element at a time (its vector versions were
   slower, below). */
#include "model_simd.h"

#include "erff.h"

#include <assert.h>

#if defined(__x86_64__) && defined(__GNUC__)

static_assert(FL_ERFF_NP == 16, "one two-register permute selects among 16 pieces");

/* ---- AVX-512 -------------------------------------------------------------------------------------- */

/* fl_erff of 8 floats (in doubles) */
static inline __attribute__((always_inline)) MODEL_T512 __m256 erf8_avx512(__m256 x)
{
    const __m256i ux = _mm256_castps_si256(x);
    const __m256i ua = _mm256_and_si256(ux, _mm256_set1_epi32(0x7FFFFFFF));
    const __m256 a = _mm256_castsi256_ps(ua);
    const __mmask8 in = _mm256_cmp_ps_mask(a, _mm256_set1_ps(4.0f), _CMP_LT_OQ); /* NaN: not in */
    const __m256 ac = _mm256_maskz_mov_ps(in, a);
    const __m256i i32 = _mm256_cvttps_epi32(_mm256_mul_ps(ac, _mm256_set1_ps(4.0f)));
    const __m512i idx = _mm512_cvtepi32_epi64(i32);
    const __mmask8 p0 = _mm256_cmpeq_epi32_mask(i32, _mm256_setzero_si256());
    const __m512d ad = _mm512_cvtps_pd(ac);
    const __m512d mid = _mm512_mul_pd(_mm512_cvtepi32_pd(_mm256_add_epi32(_mm256_add_epi32(i32, i32), _mm256_set1_epi32(1))),
                                      _mm512_set1_pd(0.125));
    const __m512d v = _mm512_mask_blend_pd(p0, _mm512_sub_pd(ad, mid), _mm512_mul_pd(ad, ad));
    const double *t = fl_erff_tab_host;
    __m512d q = _mm512_permutex2var_pd(_mm512_load_pd(t), idx, _mm512_load_pd(t + 8));
    for (int k = 1; k < FL_ERFF_NC; k++) {
        const double *c = t + k * FL_ERFF_NP;
        q = _mm512_fmadd_pd(q, v, _mm512_permutex2var_pd(_mm512_load_pd(c), idx, _mm512_load_pd(c + 8)));
    }
    const __m512d y = _mm512_mask_blend_pd(p0, q, _mm512_mul_pd(q, ad));
    const __m256 r = _mm256_mask_blend_ps(in, _mm256_set1_ps(1.0f), _mm512_cvtpd_ps(y));
    const __m256 s = _mm256_or_ps(r, _mm256_castsi256_ps(_mm256_andnot_si256(ua, ux))); /* the sign */
    const __mmask8 nan = _mm256_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    return _mm256_mask_blend_ps(nan, s, _mm256_add_ps(x, x));
}

static MODEL_T512 void erff_span_avx512(float *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i += 8) {
        const __mmask8 k = n - i >= 8 ? (__mmask8)0xFF : (__mmask8)((1u << (n - i)) - 1u);
        _mm256_mask_storeu_ps(y + i, k, erf8_avx512(_mm256_maskz_loadu_ps(k, x + i)));
    }
}

/* ---- AVX2 ----------------------------------------------------------------------------------------- */

/* fl_erff itself, compiled with FMA whatever the build's -march.  On the AMD EPYC (AVX-512) development
   machine, 2026-11-27, a span of 64k inputs in [-3, 3], 1 thread: this loop 3.2 ns an element; four
   lanes with the coefficients gathered 3.7 ns, with four permutes and three blends per coefficient
   3.1 ns, so no vector body (glibc 2.36's erff 10.6 ns; the AVX-512 body 0.80 ns). */
static MODEL_T256 void erff_span_avx2(float *y, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = fl_erff(x[i]);
}

#endif /* x86-64 */

void model_erff_span(float *y, const float *x, size_t n)
{
#if defined(__x86_64__) && defined(__GNUC__)
    const int isa = model_simd_isa();
    if (isa >= FL_ISA_AVX512) {
        erff_span_avx512(y, x, n);
        return;
    }
    if (isa >= FL_ISA_AVX2) {
        erff_span_avx2(y, x, n);
        return;
    }
#endif
    for (size_t i = 0; i < n; i++)
        y[i] = fl_erff(x[i]);
}
