/* vexp.c — the AVX-512 body of model.c's expf_sub (see model_simd.h). */
#include "model_simd.h"

#if defined(__AVX512F__)
#include "model.h"
#include <math.h>

void model_expf_sub_avx512(float *y, const float *x, float m, size_t n)
{
    size_t i = 0;
    /* 16 at a time, the last block masked (only its low half computed when it has at most 8);
       a block with a special lane calls expf */
    const __m512 mv = _mm512_set1_ps(m);
    const __m512i abs = _mm512_set1_epi32(0x7FFFFFFF), lim = _mm512_set1_epi32(0x42B00000); /* top12 > 0x42a */
    for (; i < n; i += 16) {
        const __mmask16 k = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
        const __m512 a = _mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + i), mv);
        if (_mm512_mask_cmpge_epu32_mask(k, _mm512_and_si512(_mm512_castps_si512(a), abs), lim)) {
            float b[16];
            _mm512_storeu_ps(b, a);
            for (size_t l = 0; l < 16 && i + l < n; l++)
                y[i + l] = expf(b[l]);
        } else {
            _mm512_mask_storeu_ps(y + i, k, model_expf_main16(a, n - i <= 8));
        }
    }
}

#endif
