/* attention_simd.c — the AVX-512 key / value transpose of model.c's attention (see model_simd.h). */
#include "model_simd.h"

#if defined(__AVX512F__)
#include "model.h"

void model_attn_transpose_avx512(float *kt, const float *src, size_t jv, size_t dv, size_t Tp, size_t C3)
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

#endif
