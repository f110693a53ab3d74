/* convert_decode_simd.c — the vector decode kernels behind fl_convert_to_f32 (see convert_simd.h).
 *
 * What the scalar decode (fl_decode_f32 of fl_round.h) defines, and the kernels reproduce bit for bit:
 *   - every value is exact in float32, so there is no rounding to agree on;
 *   - every NaN encoding decodes to the one canonical float32 NaN 0x7FC00000 (positive, quiet, no
 *     payload), whatever its sign and payload bits;
 *   - Inf keeps its sign; -0 keeps its sign (there is none in the FNUZ formats, whose 0x80 is the NaN).
 *
 * How:
 *   - e4m3 and e5m2: moved to fp16's bit places and widened by F16C's VCVTPH2PS (e4m3 then scaled by
 *     2^8, exactly; see dec_e5m2_avx512), the NaN lanes set afterwards.
 *   - the other 1-byte formats (e4m3fnuz, e5m2fnuz, e8m0, e3m2, e2m3, e2m1): a table of the 256
 *     float32 results, filled once by fl_decode_f32 itself, so exact by construction (for a sub-byte
 *     format the table also holds what the scalar decode gives for the bits above its width); the
 *     tails of the e4m3 and e5m2 kernels read their tables too.  AVX-512 looks a table up with eight
 *     VPERMT2D (32 entries each, indexed by the code's low 5 bits) and a tree of masked blends on
 *     bits 5, 6 and 7 (no gathers: they are slow on CPUs with the Gather Data Sampling microcode
 *     fix); AVX2 with VPGATHERDD.
 *   - bf16: the code shifted to the top of the float32 (subnormals included: a bf16 subnormal is a
 *     float32 subnormal with the same bits).
 *   - fp16: F16C's VCVTPH2PS (AVX-512: its zmm form), exact for every fp16, subnormals included
 *     (they become float32 normals).
 *   - bf16 and fp16 then replace every NaN lane by 0x7FC00000: the shift and VCVTPH2PS keep the sign
 *     and payload of a NaN.
 * The scalar bf16 decode builds a subnormal by a multiplication: under flush-to-zero (MXCSR.FTZ,
 * which nothing here sets) it would give 0 where the shift gives the subnormal.
 * tests/test_convert_fast.c compares every kernel with fl_decode_f32 on every code of every format,
 * at several alignments and with tails of 0..63 elements.
 */
#include "convert_simd.h"
#include "fl_round.h"

#include <pthread.h>
#include <string.h>

/* The 256 results of each 1-byte format, float32 bits; rows of wider formats unused. */
static uint32_t dec_tables[FL_FMT_COUNT][256];
static pthread_once_t dec_tables_once = PTHREAD_ONCE_INIT;

static void dec_tables_fill(void)
{
    for (int f = 0; f < FL_FMT_COUNT; f++) {
        const fl_format_desc *d = fl_format_get((fl_format)f);
        if (d->bits <= 8)
            for (uint32_t c = 0; c < 256; c++)
                dec_tables[f][c] = fl_f32_bits(fl_decode_f32(d, c));
    }
}

/* The table of a 1-byte format (filled on first use), NULL for a wider one. */
static const uint32_t *dec_table(fl_format f)
{
    if (fl_format_get(f)->bits > 8)
        return NULL;
    pthread_once(&dec_tables_once, dec_tables_fill);
    return dec_tables[f];
}

/* The scalar tail of a 1-byte kernel: the table itself. */
static inline void dec8_tail(float *dst, const uint8_t *src, size_t n, const uint32_t *t)
{
    for (size_t i = 0; i < n; i++)
        memcpy(dst + i, &t[src[i]], 4);
}

/* The scalar tail of a 2-byte kernel. */
static inline void dec16_tail(float *dst, const uint16_t *src, size_t n, const fl_format_desc *d)
{
    for (size_t i = 0; i < n; i++)
        dst[i] = fl_decode_f32(d, src[i]);
}

#if defined(__x86_64__) && defined(__GNUC__)
#define FL_HAVE_X86_DECODE 1
#include <immintrin.h>

#define D512 FL_TARGET_AVX512
#define D256 __attribute__((target("avx2,f16c")))
#define INL static inline __attribute__((always_inline))

/* ---- AVX-512 ----------------------------------------------------------------------------------- */

/* NaN lanes (magnitude above Inf's 0x7F800000) -> 0x7FC00000. */
D512 INL __m512i dec512_nan(__m512i v)
{
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(v, _mm512_set1_epi32(0x7FFFFFFF)),
                                                  _mm512_set1_epi32(0x7F800000));
    return _mm512_mask_mov_epi32(v, nan, _mm512_set1_epi32(0x7FC00000));
}

D512 static void dec8_avx512(float *dst, const uint8_t *src, size_t n, const uint32_t *t)
{
    __m512i T[16];
    for (int k = 0; k < 16; k++)
        T[k] = _mm512_loadu_si512(t + 16 * k);
    const __m512i b5 = _mm512_set1_epi32(32), b6 = _mm512_set1_epi32(64), b7 = _mm512_set1_epi32(128);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i idx = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(src + i)));
        /* r[j]: entry 32 j + (code & 31); VPERMT2D reads only the index's low 5 bits */
        const __m512i r0 = _mm512_permutex2var_epi32(T[0], idx, T[1]);
        const __m512i r1 = _mm512_permutex2var_epi32(T[2], idx, T[3]);
        const __m512i r2 = _mm512_permutex2var_epi32(T[4], idx, T[5]);
        const __m512i r3 = _mm512_permutex2var_epi32(T[6], idx, T[7]);
        const __m512i r4 = _mm512_permutex2var_epi32(T[8], idx, T[9]);
        const __m512i r5 = _mm512_permutex2var_epi32(T[10], idx, T[11]);
        const __m512i r6 = _mm512_permutex2var_epi32(T[12], idx, T[13]);
        const __m512i r7 = _mm512_permutex2var_epi32(T[14], idx, T[15]);
        const __mmask16 m5 = _mm512_test_epi32_mask(idx, b5), m6 = _mm512_test_epi32_mask(idx, b6);
        const __mmask16 m7 = _mm512_test_epi32_mask(idx, b7);
        const __m512i lo = _mm512_mask_blend_epi32(m6, _mm512_mask_blend_epi32(m5, r0, r1), _mm512_mask_blend_epi32(m5, r2, r3));
        const __m512i hi = _mm512_mask_blend_epi32(m6, _mm512_mask_blend_epi32(m5, r4, r5), _mm512_mask_blend_epi32(m5, r6, r7));
        _mm512_storeu_si512(dst + i, _mm512_mask_blend_epi32(m7, lo, hi));
    }
    dec8_tail(dst + i, src + i, n - i, t);
}

D512 static void dec_bf16_avx512(float *dst, const void *src_v, size_t n)
{
    const uint16_t *src = src_v;
    static const fl_format_desc d = FL_DESC_BF16;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i v = _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(src + i))), 16);
        _mm512_storeu_si512(dst + i, dec512_nan(v));
    }
    dec16_tail(dst + i, src + i, n - i, &d);
}

D512 static void dec_fp16_avx512(float *dst, const void *src_v, size_t n)
{
    const uint16_t *src = src_v;
    static const fl_format_desc d = FL_DESC_FP16;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 x = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(src + i)));
        _mm512_storeu_si512(dst + i, dec512_nan(_mm512_castps_si512(x)));
    }
    dec16_tail(dst + i, src + i, n - i, &d);
}

/* e5m2 is the top byte of fp16 (same exponent width and bias, IEEE specials): its float32 is
   VCVTPH2PS of code << 8.  e4m3 (FN, bias 7) moved to fp16's places, (sign << 15) | (magnitude << 7),
   is an fp16 worth exactly 2^-8 times the e4m3 value (normals and subnormals alike, and never fp16's
   Inf/NaN exponent: an e4m3 exponent field is at most 15); the product by 2^8 is exact (a float32
   normal times a power of two, no overflow), so the rounding mode, FTZ and DAZ cannot change it.
   e4m3's NaN (magnitude 0x7F, which the arithmetic would make 480) becomes fp16's quiet NaN 0x7E00
   first: VCVTPH2PS makes it 0x7FC00000, and the product of a quiet NaN is that NaN itself. */
D512 static void dec_e5m2_avx512(float *dst, const void *src_v, size_t n)
{
    const uint8_t *src = src_v;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i h = _mm256_slli_epi16(_mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(src + i))), 8);
        _mm512_storeu_si512(dst + i, dec512_nan(_mm512_castps_si512(_mm512_cvtph_ps(h))));
    }
    dec8_tail(dst + i, src + i, n - i, dec_tables[FL_FMT_E5M2]);
}

D512 static void dec_e4m3_avx512(float *dst, const void *src_v, size_t n)
{
    const uint8_t *src = src_v;
    const __m256i sgn = _mm256_set1_epi16((short)0x8000), mag = _mm256_set1_epi16(0x3F80);
    const __m256i qnan16 = _mm256_set1_epi16(0x7E00);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i c = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(src + i)));
        /* (c & 0x80) << 8 | (c & 0x7F) << 7 */
        const __m256i h = _mm256_or_si256(_mm256_and_si256(_mm256_slli_epi16(c, 8), sgn), _mm256_and_si256(_mm256_slli_epi16(c, 7), mag));
        const __mmask16 nan = _mm256_cmpeq_epi16_mask(_mm256_and_si256(h, mag), mag);
        const __m256i hn = _mm256_mask_mov_epi16(h, nan, qnan16);
        _mm512_storeu_ps(dst + i, _mm512_mul_ps(_mm512_cvtph_ps(hn), _mm512_set1_ps(256.0f)));
    }
    dec8_tail(dst + i, src + i, n - i, dec_tables[FL_FMT_E4M3]);
}

/* ---- AVX2 -------------------------------------------------------------------------------------- */

D256 INL __m256i dec256_nan(__m256i v)
{
    /* magnitudes are below 2^31, so the signed compare is the unsigned one */
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(v, _mm256_set1_epi32(0x7FFFFFFF)), _mm256_set1_epi32(0x7F800000));
    return _mm256_blendv_epi8(v, _mm256_set1_epi32(0x7FC00000), nan);
}

D256 static void dec8_avx2(float *dst, const uint8_t *src, size_t n, const uint32_t *t)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i idx = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(src + i)));
        _mm256_storeu_si256((__m256i *)(dst + i), _mm256_i32gather_epi32((const int *)t, idx, 4));
    }
    dec8_tail(dst + i, src + i, n - i, t);
}

/* 16 codes of a 16-bit format whose NaNs have magnitudes above inf16 (fp16 0x7C00, bf16 0x7F80):
   any NaN among them?  (A magnitude is below 2^15, so the signed compare is the unsigned one.)  The
   NaN lanes' canonicalisation after the widening is then skipped for the vectors without one,
   nearly all of them. */
D256 INL int dec256_any_nan16(__m256i h, short inf16)
{
    const __m256i m = _mm256_cmpgt_epi16(_mm256_and_si256(h, _mm256_set1_epi16(0x7FFF)), _mm256_set1_epi16(inf16));
    return !_mm256_testz_si256(m, m);
}

D256 INL __m256i dec256_bf16(__m128i h) { return _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16); }
D256 INL __m256i dec256_fp16(__m128i h) { return _mm256_castps_si256(_mm256_cvtph_ps(h)); }

/* The 16-bit decodes, 16 codes a step. */
#define DEC16_AVX2(NAME, DESC, INF16, WIDEN)                                                             \
    D256 static void NAME(float *dst, const void *src_v, size_t n)                                       \
    {                                                                                                    \
        const uint16_t *src = src_v;                                                                     \
        static const fl_format_desc d = DESC;                                                            \
        size_t i = 0;                                                                                    \
        for (; i + 16 <= n; i += 16) {                                                                   \
            const __m256i h = _mm256_loadu_si256((const __m256i *)(src + i));                            \
            /* the halves loaded again, as the widenings' memory operands (VEXTRACTI128 competes with */ \
            /* VCVTPH2PS and VPMOVZXWD for one port) */                                                   \
            __m256i lo = WIDEN(_mm_loadu_si128((const __m128i *)(src + i)));                             \
            __m256i hi = WIDEN(_mm_loadu_si128((const __m128i *)(src + i + 8)));                         \
            if (dec256_any_nan16(h, INF16)) {                                                            \
                lo = dec256_nan(lo);                                                                     \
                hi = dec256_nan(hi);                                                                     \
            }                                                                                            \
            _mm256_storeu_si256((__m256i *)(dst + i), lo);                                               \
            _mm256_storeu_si256((__m256i *)(dst + i + 8), hi);                                           \
        }                                                                                                \
        dec16_tail(dst + i, src + i, n - i, &d);                                                         \
    }
DEC16_AVX2(dec_bf16_avx2, FL_DESC_BF16, 0x7F80, dec256_bf16)
DEC16_AVX2(dec_fp16_avx2, FL_DESC_FP16, 0x7C00, dec256_fp16)
#undef DEC16_AVX2

D256 static void dec_e5m2_avx2(float *dst, const void *src_v, size_t n)
{
    const uint8_t *src = src_v;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i h = _mm_slli_epi16(_mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(src + i))), 8);
        _mm256_storeu_si256((__m256i *)(dst + i), dec256_nan(_mm256_castps_si256(_mm256_cvtph_ps(h))));
    }
    dec8_tail(dst + i, src + i, n - i, dec_tables[FL_FMT_E5M2]);
}

D256 static void dec_e4m3_avx2(float *dst, const void *src_v, size_t n)
{
    const uint8_t *src = src_v;
    const __m128i sgn = _mm_set1_epi16((short)0x8000), mag = _mm_set1_epi16(0x3F80), qnan16 = _mm_set1_epi16(0x7E00);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m128i c = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(src + i)));
        const __m128i h = _mm_or_si128(_mm_and_si128(_mm_slli_epi16(c, 8), sgn), _mm_and_si128(_mm_slli_epi16(c, 7), mag));
        const __m128i hn = _mm_blendv_epi8(h, qnan16, _mm_cmpeq_epi16(_mm_and_si128(h, mag), mag));
        _mm256_storeu_ps(dst + i, _mm256_mul_ps(_mm256_cvtph_ps(hn), _mm256_set1_ps(256.0f)));
    }
    dec8_tail(dst + i, src + i, n - i, dec_tables[FL_FMT_E4M3]);
}

/* One kernel per (1-byte format, set), its table bound by the format. */
#define DEC8_FN(F, SET, TGT)                                                                          \
    TGT static void dec_##F##_##SET(float *dst, const void *src, size_t n)                             \
    {                                                                                                 \
        dec8_##SET(dst, src, n, dec_tables[F]);                                                       \
    }
#define DEC8_SET(SET, TGT)                                                                            \
    DEC8_FN(FL_FMT_E8M0, SET, TGT)                                                                    \
    DEC8_FN(FL_FMT_E3M2, SET, TGT) DEC8_FN(FL_FMT_E2M3, SET, TGT) DEC8_FN(FL_FMT_E2M1, SET, TGT)      \
    DEC8_FN(FL_FMT_E4M3FNUZ, SET, TGT) DEC8_FN(FL_FMT_E5M2FNUZ, SET, TGT)
DEC8_SET(avx512, D512)
DEC8_SET(avx2, D256)
#undef DEC8_SET
#undef DEC8_FN

/* [set: avx2, avx512][format] */
#define DEC_ROW(SET)                                                                                  \
    {                                                                                                 \
        [FL_FMT_BF16] = dec_bf16_##SET, [FL_FMT_FP16] = dec_fp16_##SET,                                 \
        [FL_FMT_E4M3] = dec_e4m3_##SET, [FL_FMT_E5M2] = dec_e5m2_##SET,                               \
        [FL_FMT_E8M0] = dec_FL_FMT_E8M0_##SET, [FL_FMT_E3M2] = dec_FL_FMT_E3M2_##SET,                 \
        [FL_FMT_E2M3] = dec_FL_FMT_E2M3_##SET, [FL_FMT_E2M1] = dec_FL_FMT_E2M1_##SET,                 \
        [FL_FMT_E4M3FNUZ] = dec_FL_FMT_E4M3FNUZ_##SET, [FL_FMT_E5M2FNUZ] = dec_FL_FMT_E5M2FNUZ_##SET, \
    }
static const fl_dec_fn dec_kernels[2][FL_FMT_COUNT] = { DEC_ROW(avx2), DEC_ROW(avx512) };
#undef DEC_ROW
#endif /* x86-64 */

fl_dec_fn fl_dec_kernel(int isa, fl_format from)
{
#ifdef FL_HAVE_X86_DECODE
    if (isa < FL_ISA_AVX2 || isa > fl_cpu_isa() || (unsigned)from >= FL_FMT_COUNT)
        return NULL;
    const fl_dec_fn k = dec_kernels[isa >= FL_ISA_AVX512][from];
    if (k)
        dec_table(from); /* fill the tables before a 1-byte kernel reads one */
    return k;
#else
    (void)isa, (void)from;
    (void)dec_table;
    return NULL;
#endif
}
