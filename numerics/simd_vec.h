/* simd_vec.h — the vector pieces that numerics/convert_vec.h and numerics/cast_vec.h share, written
 * with GCC's vector extensions.  Included by them once per instruction set; the includer defines
 *   VB        vector width in bytes (32: AVX2, 64: AVX-512)
 *   VTARGET   the function attribute selecting the instruction set
 *   SV(name)  the name this instance gives `name` (its suffix per instruction set)
 * and includes <immintrin.h> (the lane tests below are one instruction each).
 */
typedef uint32_t SV(vu) __attribute__((vector_size(VB)));
typedef int32_t SV(vi) __attribute__((vector_size(VB)));
typedef uint64_t SV(vq) __attribute__((vector_size(VB)));
typedef float SV(vf) __attribute__((vector_size(VB)));
typedef uint32_t SV(vhalf) __attribute__((vector_size(VB / 2)));

/* Any lane of a mask set?  One VPTEST / VPTESTMD: GCC turns a loop over the lanes into a chain of
   lane extractions. */
VTARGET static inline __attribute__((always_inline)) int SV(any)(SV(vu) m)
{
#if VB == 32
    return !_mm256_testz_si256((__m256i)m, (__m256i)m);
#else
    return _mm512_test_epi32_mask((__m512i)m, (__m512i)m) != 0;
#endif
}

/* Any lane of a above b (unsigned)?  AVX-512 compares into a mask register directly. */
VTARGET static inline __attribute__((always_inline)) int SV(any_gt)(SV(vu) a, SV(vu) b)
{
#if VB == 32
    return SV(any)((SV(vu))(a > b));
#else
    return _mm512_cmpgt_epu32_mask((__m512i)a, (__m512i)b) != 0;
#endif
}

/* The lane-wise unsigned maximum (VPMAXUD: GCC does not form it from a compare and a select). */
VTARGET static inline __attribute__((always_inline)) SV(vu) SV(umax)(SV(vu) a, SV(vu) b)
{
#if VB == 32
    return (SV(vu))_mm256_max_epu32((__m256i)a, (__m256i)b);
#else
    return (SV(vu))_mm512_max_epu32((__m512i)a, (__m512i)b);
#endif
}

/* The largest lane, and the sum of the lanes (mod 2^32). */
VTARGET static inline __attribute__((always_inline)) uint32_t SV(hmax)(SV(vu) m)
{
#if VB == 32
    __m128i x = _mm_max_epu32(_mm256_castsi256_si128((__m256i)m), _mm256_extracti128_si256((__m256i)m, 1));
    x = _mm_max_epu32(x, _mm_shuffle_epi32(x, 0x4E));
    x = _mm_max_epu32(x, _mm_shuffle_epi32(x, 0xB1));
    return (uint32_t)_mm_cvtsi128_si32(x);
#else
    return (uint32_t)_mm512_reduce_max_epu32((__m512i)m);
#endif
}

VTARGET static inline __attribute__((always_inline)) uint32_t SV(hsum)(SV(vu) m)
{
#if VB == 32
    __m128i x = _mm_add_epi32(_mm256_castsi256_si128((__m256i)m), _mm256_extracti128_si256((__m256i)m, 1));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0x4E));
    x = _mm_add_epi32(x, _mm_shuffle_epi32(x, 0xB1));
    return (uint32_t)_mm_cvtsi128_si32(x);
#else
    return (uint32_t)_mm512_reduce_add_epi32((__m512i)m);
#endif
}

/* fl_sr_bits(seed, i0 + k) for the lanes k = 0 .. VB / 4 - 1: the high halves of fl_mix64 of
   seed + (i0 + 1 + k) * golden, in lane order. */
#if VB == 32
/* AVX2 has no 64-bit multiply: z * c mod 2^64 from three 32 x 32 -> 64 products (what GCC emits for
   the vector product, written out so that the steps around it can be fused). */
VTARGET static inline __attribute__((always_inline)) __m256i SV(mul64c)(__m256i z, uint64_t c)
{
    const __m256i cl = _mm256_set1_epi64x((long long)(c & 0xFFFFFFFFu)), ch = _mm256_set1_epi64x((long long)(c >> 32));
    const __m256i cross = _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(z, 32), cl), _mm256_mul_epu32(z, ch));
    return _mm256_add_epi64(_mm256_mul_epu32(z, cl), _mm256_slli_epi64(cross, 32));
}

/* z ^ (z >> r) on 64-bit lanes */
#define SV_XSH64(z, r) _mm256_xor_si256((z), _mm256_srli_epi64((z), (r)))

VTARGET static inline __attribute__((always_inline)) SV(vu) SV(sr_bits)(uint64_t seed, uint64_t i0)
{
    const __m256i base = _mm256_set1_epi64x((long long)(seed + (i0 + 1) * FL_GOLDEN64));
    const __m256i k0 = _mm256_setr_epi64x(0, (long long)FL_GOLDEN64, (long long)(2 * FL_GOLDEN64),
                                          (long long)(3 * FL_GOLDEN64));
    const __m256i k1 = _mm256_add_epi64(k0, _mm256_set1_epi64x((long long)(4 * FL_GOLDEN64)));
    __m256i z0 = _mm256_add_epi64(base, k0), z1 = _mm256_add_epi64(base, k1);
    z0 = SV(mul64c)(SV_XSH64(z0, 30), 0xBF58476D1CE4E5B9ull);
    z1 = SV(mul64c)(SV_XSH64(z1, 30), 0xBF58476D1CE4E5B9ull);
    z0 = SV(mul64c)(SV_XSH64(z0, 27), 0x94D049BB133111EBull);
    z1 = SV(mul64c)(SV_XSH64(z1, 27), 0x94D049BB133111EBull);
    /* the high dwords h of the eight lanes, in lane order (VSHUFPS takes dwords 1 and 3 of each
       128-bit half of both, VPERMQ puts the quarters in order); the finaliser's last step,
       hi32(z ^ (z >> 31)), is h ^ (h >> 31) */
    const __m256i h = _mm256_permute4x64_epi64(
        _mm256_castps_si256(_mm256_shuffle_ps(_mm256_castsi256_ps(z0), _mm256_castsi256_ps(z1), 0xDD)), 0xD8);
    return (SV(vu))_mm256_xor_si256(h, _mm256_srli_epi32(h, 31));
}
#undef SV_XSH64
#else
VTARGET static inline __attribute__((always_inline)) SV(vu) SV(sr_bits)(uint64_t seed, uint64_t i0)
{
    SV(vq) k0, k1;
    for (int k = 0; k < VB / 8; k++) {
        k0[k] = (uint64_t)k * FL_GOLDEN64;
        k1[k] = (uint64_t)(k + VB / 8) * FL_GOLDEN64;
    }
    const uint64_t base = seed + (i0 + 1) * FL_GOLDEN64;
    SV(vq) z0 = base + k0, z1 = base + k1;
    z0 = (z0 ^ (z0 >> 30)) * 0xBF58476D1CE4E5B9ull;
    z1 = (z1 ^ (z1 >> 30)) * 0xBF58476D1CE4E5B9ull;
    z0 = (z0 ^ (z0 >> 27)) * 0x94D049BB133111EBull;
    z1 = (z1 ^ (z1 >> 27)) * 0x94D049BB133111EBull;
    const SV(vhalf) lo = __builtin_convertvector((z0 ^ (z0 >> 31)) >> 32, SV(vhalf));
    const SV(vhalf) hi = __builtin_convertvector((z1 ^ (z1 >> 31)) >> 32, SV(vhalf));
    /* the two halves joined in registers (through a union they went by the stack, and the wide
       reload of two narrow stores stalls) */
    return (SV(vu))_mm512_inserti64x4(_mm512_castsi256_si512((__m256i)lo), (__m256i)hi, 1);
}
#endif
