/* attention_simd.c — the AVX-512 and AVX2 key / value transposes and row sums of model.c's attention (see
   model_simd.h). */
#include "model_simd.h"
#include "model.h"

#if defined(__x86_64__) && defined(__GNUC__)

/* ---- AVX-512 -------------------------------------------------------------------------------------- */

static MODEL_T512 void attn_transpose_avx512(float *kt, const float *src, size_t jv, size_t dv, size_t Tp, size_t C3)
{
    for (size_t d0 = 0; d0 < dv; d0 += 16)
        for (size_t j0 = 0; j0 < jv; j0 += 16) {
            __m512 r[16];
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++)
                r[i] = _mm512_loadu_ps(src + (j0 + i) * C3 + d0);
            model_tr16(r);
#pragma GCC unroll 16
            for (int i = 0; i < 16; i++)
                _mm512_storeu_ps(kt + (d0 + i) * Tp + j0, r[i]);
        }
}

/* Blocks of 16 columns (the products formed row-wise) are transposed in registers and added column by
   column.  Lanes past a row's end load as zero and add +0.0f, which changes no sum (a sum from 0.0f is
   never -0.0f). */
static MODEL_T512 void attn_rowsums16_avx512(float *sum, const float *a, const float *b, size_t T, size_t n0)
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

/* ---- AVX2 ----------------------------------------------------------------------------------------- */

/* The 16 x 16 blocks as four 8 x 8 ones (model_tr8). */
static MODEL_T256 void attn_transpose_avx2(float *kt, const float *src, size_t jv, size_t dv, size_t Tp, size_t C3)
{
    for (size_t d0 = 0; d0 < dv; d0 += 8)
        for (size_t j0 = 0; j0 < jv; j0 += 8) {
            __m256 r[8];
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++)
                r[i] = _mm256_loadu_ps(src + (j0 + i) * C3 + d0);
            model_tr8(r);
#pragma GCC unroll 8
            for (int i = 0; i < 8; i++)
                _mm256_storeu_ps(kt + (d0 + i) * Tp + j0, r[i]);
        }
}

/* attn_rowsums16_avx512 in two halves of 8 rows, over blocks of 8 columns; the zero lanes past a row's
   end (more or fewer of them than with 16-column blocks) change no sum. */
static MODEL_T256 void attn_rowsums16_avx2(float *sum, const float *a, const float *b, size_t T, size_t n0)
{
    for (size_t h = 0; h < 16; h += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (size_t j0 = 0; j0 < n0 + h + 7; j0 += 8) {
            __m256 m[8];
#pragma GCC unroll 8
            for (size_t r = 0; r < 8; r++) {
                const size_t n = n0 + h + r, o = (h + r) * T + j0;
                if (j0 + 8 <= n) {
                    m[r] = _mm256_loadu_ps(a + o);
                    if (b)
                        m[r] = _mm256_mul_ps(m[r], _mm256_loadu_ps(b + o));
                } else if (j0 < n) {
                    const __m256i k = model_mask8(n - j0);
                    m[r] = _mm256_maskload_ps(a + o, k);
                    if (b)
                        m[r] = _mm256_mul_ps(m[r], _mm256_maskload_ps(b + o, k));
                } else {
                    m[r] = _mm256_setzero_ps();
                }
            }
            model_tr8(m);
#pragma GCC unroll 8
            for (int c = 0; c < 8; c++)
                acc = _mm256_add_ps(acc, m[c]);
        }
        _mm256_storeu_ps(sum + h, acc);
    }
}

#endif /* x86-64 */

int model_attn_transpose_simd(float *kt, const float *src, size_t jv, size_t dv, size_t Tp, size_t C3)
{
#if defined(__x86_64__) && defined(__GNUC__)
    const int isa = model_simd_isa();
    if (isa >= FL_ISA_AVX512)
        attn_transpose_avx512(kt, src, jv, dv, Tp, C3);
    else if (isa >= FL_ISA_AVX2)
        attn_transpose_avx2(kt, src, jv, dv, Tp, C3);
    else
        return 0;
    return 1;
#else
    (void)kt, (void)src, (void)jv, (void)dv, (void)Tp, (void)C3;
    return 0;
#endif
}

int model_attn_rowsums16_simd(float *sum, const float *a, const float *b, size_t T, size_t n0)
{
#if defined(__x86_64__) && defined(__GNUC__)
    const int isa = model_simd_isa();
    if (isa >= FL_ISA_AVX512)
        attn_rowsums16_avx512(sum, a, b, T, n0);
    else if (isa >= FL_ISA_AVX2)
        attn_rowsums16_avx2(sum, a, b, T, n0);
    else
        return 0;
    return 1;
#else
    (void)sum, (void)a, (void)b, (void)T, (void)n0;
    return 0;
#endif
}
