/* model_simd.h — private to experiments/train: the vector paths of model.c.

   model.c is the plain C reference.  Its RMSNorm, amax_rms, softmax exp, attention transposes and
   attention row sums first offer their work to the functions declared here (rmsnorm_simd.c, vexp.c,
   attention_simd.c), which pick an AVX-512 or an AVX2 + FMA body at run time (model_simd_isa) and
   return 0 where neither applies, so that model.c runs its loops.  Each body has the evaluation order
   of the loops it replaces (one row per lane, sums in channel order, the same operations in the same
   order, fma only where the loops call fma), so the bits depend neither on the build nor on
   FP8LAB_ISA.  model.c's own vector loops (GCC vector extensions, compiled for the build's target)
   inline the AVX-512 helpers at the end of this file when the build targets AVX-512. */
#ifndef FL_TRAIN_MODEL_SIMD_H
#define FL_TRAIN_MODEL_SIMD_H

#include "convert_simd.h" /* FL_ISA_* */

#include <stddef.h>
#include <stdint.h>

#define RMS_EPS 1e-5f /* the RMSNorm epsilon (model.c, rmsnorm_simd.c) */

/* T[i] = the bits of RN(2^(i/32)) minus i << 47 (model.c: expf_tab_init). */
extern uint64_t model_expf_tab[32];

/* The instruction set of the bodies below: fl_convert_isa (the CPU's best, capped by FP8LAB_ISA),
   FL_ISA_SCALAR where AVX2 comes without FMA or the build is not x86-64 GCC/Clang (model_simd.c). */
int model_simd_isa(void);

/* ---- run-time dispatched bodies: nonzero when done, 0 when model.c's loops must run ---- */

/* rms_forward, rms_backward and amax_rms (rms not NULL) of model.c (rmsnorm_simd.c). */
int model_rms_forward_simd(float *y, float *rstd, const float *x, const float *gain, size_t N, size_t C);
int model_rms_backward_simd(float *dx, float *dgain, const float *dy, const float *x, const float *rstd,
                            const float *gain, size_t N, size_t C, int accumulate);
int model_amax_rms_simd(float *amax, float *rms, const float *x, size_t R, size_t C);
/* expf_sub of model.c once expf_check has found expf_main agreeing with expf (vexp.c). */
int model_expf_sub_simd(float *y, const float *x, float m, size_t n);
/* y[i] = fl_erff(x[i]) (kernels/erff.h), i < n, at the level model_simd_isa picks (erf_simd.c); y may be x. */
void model_erff_span(float *y, const float *x, size_t n);
/* kt[d Tp + j] = src[j C3 + d] for j < jv, d < dv (multiples of 16), square blocks through registers
   (attention_simd.c). */
int model_attn_transpose_simd(float *kt, const float *src, size_t jv, size_t dv, size_t Tp, size_t C3);
/* For r < 16: sum[r] = sum_{j < n0 + r} a_r[j] b_r[j] (a_r = a + r T, b_r = b + r T; b NULL: the plain
   sum of a_r), j in order from 0.0f, row r in lane r (attention_simd.c). */
int model_attn_rowsums16_simd(float *sum, const float *a, const float *b, size_t T, size_t n0);

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* The bodies are compiled for their instruction set by target attributes, whatever the build's -march
   (FL_ISA_AVX512 means AVX-512 F, BW, VL and DQ; FL_ISA_AVX2 here also FMA). */
#define MODEL_T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
#define MODEL_T256 __attribute__((target("avx2,fma")))

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

/* Transposes the 8 x 8 block v (v[i] lane j becomes v[j] lane i); the AVX2 bodies. */
static inline __attribute__((always_inline)) MODEL_T256 void model_tr8(__m256 v[8])
{
    __m256 a[8], b[8];
    for (int i = 0; i < 8; i += 2) { /* a[i], a[i+1]: rows i, i+1 interleaved within 128-bit lanes */
        a[i] = _mm256_unpacklo_ps(v[i], v[i + 1]);
        a[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
    }
    for (int g = 0; g < 8; g += 4) { /* b[g+j] lane k: rows g..g+3 of column 4k+j */
        b[g] = _mm256_shuffle_ps(a[g], a[g + 2], 0x44);
        b[g + 1] = _mm256_shuffle_ps(a[g], a[g + 2], 0xEE);
        b[g + 2] = _mm256_shuffle_ps(a[g + 1], a[g + 3], 0x44);
        b[g + 3] = _mm256_shuffle_ps(a[g + 1], a[g + 3], 0xEE);
    }
    for (int j = 0; j < 4; j++) {
        v[j] = _mm256_permute2f128_ps(b[j], b[4 + j], 0x20);
        v[4 + j] = _mm256_permute2f128_ps(b[j], b[4 + j], 0x31);
    }
}

/* The integer mask of the first n (<= 8) lanes, for maskload/maskstore. */
static inline __attribute__((always_inline)) MODEL_T256 __m256i model_mask8(size_t n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
#endif /* x86-64 */

#if defined(__AVX512F__)
#include <math.h>

/* ---- always-inline AVX-512 helpers of model.c's vector loops (builds that target AVX-512) ---- */

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

#endif /* __AVX512F__ */
#endif
