/* convert_simd.c — vector conversion kernels and their run-time choice (see convert_simd.h). */
#include "convert_simd.h"
#include "fl_round.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#define FL_HAVE_X86_KERNELS 1
#include <cpuid.h>
#include <immintrin.h>

/* What every kernel derives from its format's descriptor (a static const, so these fold). */
#define CV_DERIVED static inline __attribute__((always_inline))
/* (127 - bias) << M: float32's exponent bias turned into the target's, at the mantissa's place */
CV_DERIVED uint32_t cv_rebias(const fl_format_desc *d) { return (uint32_t)(127 - d->bias) << d->mbits; }
/* float32 bits of the target's smallest normal; 0 where the target has float32's exponent range
   (bf16): RNE on the float32 bits is then right for every finite input, subnormals included */
CV_DERIVED uint32_t cv_nmin(const fl_format_desc *d) { return d->ebits == 8 ? 0u : (uint32_t)(128 - d->bias) << 23; }

/* The body of fl_stream_store: the head up to dst's first 32-byte boundary and the tail by memcpy,
   the 32-byte lines between by VMOVNTDQ. */
FL_TARGET_AVX2 static void stream_store_avx2(void *dst, const void *src, size_t bytes)
{
    char *d = dst;
    const char *s = src;
    size_t head = (32u - ((uintptr_t)d & 31u)) & 31u;
    head = head < bytes ? head : bytes;
    memcpy(d, s, head);
    d += head, s += head, bytes -= head;
    for (; bytes >= 32; bytes -= 32, d += 32, s += 32)
        _mm256_stream_si256((__m256i *)d, _mm256_loadu_si256((const __m256i *)s));
    memcpy(d, s, bytes);
}

#define VB 32
#define VSUF _avx2
#define VTARGET FL_TARGET_AVX2
#include "convert_vec.h"
#undef VB
#undef VSUF
#undef VTARGET

#define VB 64
#define VSUF _avx512
#define VTARGET FL_TARGET_AVX512
#include "convert_vec.h"
#undef VB
#undef VSUF
#undef VTARGET

/* ---- AVX-512 kernels written with intrinsics ---------------------------------------------------
   The same algorithm as convert_vec.h in fewer instructions, for the formats whose normal range
   starts above float32's subnormals (e4m3, e5m2, fp16) and for bf16:
   - a normal result is RNE on the float32 bits themselves: (a + half - 1 + lsb) >> s, then the
     exponent rebias; the carry of a round-up runs into the exponent as it should;
   - a subnormal result (|x| below the target's smallest normal) is |x| * 2^k rounded to an integer,
     k making the target's subnormal step 1: the product is exact (a power of two), and the
     conversion to integer rounds to nearest-even by its embedded rounding (EVEX static rounding,
     independent of MXCSR; a float32 subnormal |x| treated as zero under DAZ would give the same 0);
   - stochastic rounding: on normal lanes the discarded bits are a << (32 - s), the 32-bit fraction
     fl_round.h defines, and the carry out of frac + rbits decides; a vector with a subnormal lane
     goes through convert_vec.h's general lane code with the same random bits. */
#define K512 FL_TARGET_AVX512
#define K512_INLINE K512 static inline __attribute__((always_inline))
#define SET1(v) _mm512_set1_epi32((int)(v))

/* The final clamp, sign and NaN of convert_vec.h's encode. */
K512_INLINE __m512i k512_finish(__m512i code, __m512i u, __m512i a, const fl_format_desc *d, int sat)
{
    code = _mm512_min_epu32(code, SET1(sat ? d->max_mag : d->max_mag + 1u));
    /* (sign bit moved to the top of the format) | code: ternary logic (A & B) | C */
    code = _mm512_ternarylogic_epi32(_mm512_srli_epi32(u, 32 - d->bits), SET1(1u << (d->bits - 1)), code, 0xEA);
    return _mm512_mask_mov_epi32(code, _mm512_cmpgt_epu32_mask(a, SET1(0x7F800000u)), SET1(d->nan));
}

K512_INLINE __m512i k512_rne(__m512i u, const fl_format_desc *d, int sat)
{
    const int s0 = 23 - d->mbits;
    const __m512i a = _mm512_and_si512(u, SET1(0x7FFFFFFFu));
    const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(a, s0), SET1(1));
    const __m512i r = _mm512_add_epi32(_mm512_add_epi32(a, SET1((1u << (s0 - 1)) - 1u)), lsb);
    __m512i code = _mm512_sub_epi32(_mm512_srli_epi32(r, s0), SET1(cv_rebias(d)));
    if (cv_nmin(d)) {
        /* 2^(bias - 1 + M) makes the target's subnormal step 1 */
        const __mmask16 sub = _mm512_cmplt_epu32_mask(a, SET1(cv_nmin(d)));
        const __m512 v = _mm512_mul_ps(_mm512_castsi512_ps(a), _mm512_set1_ps(fl_pow2f(d->bias - 1 + d->mbits)));
        code = _mm512_mask_cvt_roundps_epi32(code, sub, v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    }
    return k512_finish(code, u, a, d, sat);
}

/* fl_sr_bits for 16 consecutive elements from the two running Weyl states z0 (elements 0..7) and
   z1 (8..15): the high halves of fl_mix64, in element order. */
K512_INLINE __m512i k512_mix(__m512i z)
{
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 30)), _mm512_set1_epi64((long long)0xBF58476D1CE4E5B9ull));
    z = _mm512_mullo_epi64(_mm512_xor_si512(z, _mm512_srli_epi64(z, 27)), _mm512_set1_epi64((long long)0x94D049BB133111EBull));
    return _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
}

K512_INLINE __m512i k512_sr_bits(__m512i z0, __m512i z1)
{
    const __m512i odd = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    return _mm512_permutex2var_epi32(k512_mix(z0), odd, k512_mix(z1));
}

/* Round-to-nearest-even and stochastic rounding into d (storage 1 or 2 bytes); general: the
   convert_vec.h kernel of the same conversion, for the tail and SR's vectors with a subnormal lane. */
K512_INLINE void k512_loop(void *dst, const float *src, size_t n, const fl_format_desc *d, int sr, int sat,
                           uint64_t seed, uint64_t off, fl_cvt_fn general)
{
    const int s0 = 23 - d->mbits;
    const __m512i step = _mm512_set1_epi64((long long)(16 * FL_GOLDEN64));
    __m512i z0 = _mm512_setzero_si512(), z1 = z0;
    if (sr) {
        const uint64_t b = seed + (off + 1) * FL_GOLDEN64;
        z0 = _mm512_set_epi64((long long)(b + 7 * FL_GOLDEN64), (long long)(b + 6 * FL_GOLDEN64), (long long)(b + 5 * FL_GOLDEN64),
                              (long long)(b + 4 * FL_GOLDEN64), (long long)(b + 3 * FL_GOLDEN64), (long long)(b + 2 * FL_GOLDEN64),
                              (long long)(b + FL_GOLDEN64), (long long)b);
        z1 = _mm512_add_epi64(z0, _mm512_set1_epi64((long long)(8 * FL_GOLDEN64)));
    }
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512i u = _mm512_loadu_si512(src + i);
        __m512i code;
        if (!sr) {
            code = k512_rne(u, d, sat);
        } else {
            const __m512i rb = k512_sr_bits(z0, z1);
            z0 = _mm512_add_epi64(z0, step);
            z1 = _mm512_add_epi64(z1, step);
            const __m512i a = _mm512_and_si512(u, SET1(0x7FFFFFFFu));
            if (cv_nmin(d) && _mm512_cmplt_epu32_mask(a, SET1(cv_nmin(d)))) {
                general((char *)dst + i * (d->bits / 8), src + i, 16, seed, off + i);
                continue;
            }
            const __m512i frac = _mm512_slli_epi32(a, 32 - s0);
            const __mmask16 away = _mm512_cmplt_epu32_mask(_mm512_add_epi32(frac, rb), frac);
            code = _mm512_sub_epi32(_mm512_srli_epi32(a, s0), SET1(cv_rebias(d)));
            code = _mm512_mask_add_epi32(code, away, code, SET1(1));
            code = k512_finish(code, u, a, d, sat);
        }
        if (d->bits == 8)
            _mm_storeu_si128((__m128i *)((uint8_t *)dst + i), _mm512_cvtepi32_epi8(code));
        else
            _mm256_storeu_si256((__m256i *)((uint16_t *)dst + i), _mm512_cvtepi32_epi16(code));
    }
    if (i < n)
        general((char *)dst + i * (d->bits / 8), src + i, n - i, seed, off + i);
}

#define K512_INSTANCE(FMT, UP, SR, SAT)                                                               \
    K512 static void k512_##FMT##_##SR##SAT(void *dst, const float *src, size_t n, uint64_t seed,     \
                                             uint64_t off)                                            \
    {                                                                                                 \
        static const fl_format_desc d = FL_DESC_##UP;                                                 \
        k512_loop(dst, src, n, &d, SR, SAT, seed, off, cvt_##FMT##_##SR##SAT##_avx512);                \
    }
#define K512_FORMAT(FMT, UP) K512_INSTANCE(FMT, UP, 0, 0) K512_INSTANCE(FMT, UP, 0, 1) \
                             K512_INSTANCE(FMT, UP, 1, 0) K512_INSTANCE(FMT, UP, 1, 1)
K512_FORMAT(e4m3, E4M3)
K512_FORMAT(e5m2, E5M2)
K512_FORMAT(bf16, BF16)
K512_FORMAT(fp16, FP16)
#undef K512_FORMAT
#undef K512_INSTANCE
#define K512_ROW(FMT) { { k512_##FMT##_00, k512_##FMT##_01 }, { k512_##FMT##_10, k512_##FMT##_11 } }
static const fl_cvt_fn table_k512[4][2][2] = { K512_ROW(e4m3), K512_ROW(e5m2), K512_ROW(bf16), K512_ROW(fp16) };
#undef K512_ROW

/* ---- native conversion instructions ---------------------------------------------------------- */

/* fp16 RNE by VCVTPS2PH, whose rounding is IEEE round-to-nearest-even on every finite input
   (subnormal results included; float32 subnormals are far below fp16's smallest subnormal, so
   MXCSR.DAZ could not change a result either).  Two kinds of lanes differ from fl_round.h:
   a NaN keeps its sign and payload there (here: the canonical 0x7FFF), and an overflow or an
   infinite input gives Inf (here, saturating: max 0x7BFF with the sign). */
#define FP16_RNE_IMM (_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)

__attribute__((target("avx512f,avx512bw,avx512vl"))) static inline __attribute__((always_inline)) void
fp16_native_avx512(uint16_t *dst, const float *src, size_t n, int sat)
{
    static const fl_format_desc d = FL_DESC_FP16;
    const __m512i absm = _mm512_set1_epi32(0x7FFFFFFF), inf32 = _mm512_set1_epi32(0x7F800000);
    const __m256i nan16 = _mm256_set1_epi16(0x7FFF), inf16 = _mm256_set1_epi16(0x7C00);
    const __m256i max16 = _mm256_set1_epi16(0x7BFF), abs16 = _mm256_set1_epi16(0x7FFF);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 x = _mm512_loadu_ps(src + i);
        __m256i h = _mm512_cvtps_ph(x, FP16_RNE_IMM);
        const __mmask16 isnan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(_mm512_castps_si512(x), absm), inf32);
        if (sat) {
            const __mmask16 isinf = _mm256_cmpeq_epi16_mask(_mm256_and_si256(h, abs16), inf16);
            h = _mm256_mask_mov_epi16(h, isinf, _mm256_or_si256(_mm256_andnot_si256(abs16, h), max16));
        }
        _mm256_storeu_si256((__m256i *)(dst + i), _mm256_mask_mov_epi16(h, isnan, nan16));
    }
    const uint32_t *u = (const uint32_t *)src;
    for (; i < n; i++)
        dst[i] = (uint16_t)fl_encode_f32_bits(&d, u[i], FL_RND_NE, sat ? FL_OVF_SATURATE : FL_OVF_NOSATURATE, 0);
}

/* The lanes of VCVTPS2PH's h to re-do: a NaN result comes from a NaN input only, and becomes the
   canonical 0x7FFF; saturating, an Inf result (an overflow or an infinite input) becomes the largest
   finite value with its sign.  Vectors without such a lane (a compare and VPTEST on h) skip this. */
__attribute__((target("avx2,f16c"))) static inline __attribute__((always_inline)) __m256i fp16_f16c_fix(__m256i h, int sat)
{
    const __m256i abs16 = _mm256_set1_epi16(0x7FFF), inf16 = _mm256_set1_epi16(0x7C00), max16 = _mm256_set1_epi16(0x7BFF);
    const __m256i mag = _mm256_and_si256(h, abs16);
    const __m256i odd = _mm256_cmpgt_epi16(mag, sat ? max16 : inf16);
    if (_mm256_testz_si256(odd, odd))
        return h;
    if (sat)
        h = _mm256_blendv_epi8(h, _mm256_or_si256(_mm256_andnot_si256(abs16, h), max16), _mm256_cmpeq_epi16(mag, inf16));
    const __m256i nan16 = _mm256_set1_epi16(0x7FFF); /* the canonical NaN (it is also the magnitude mask) */
    return _mm256_blendv_epi8(h, nan16, _mm256_cmpgt_epi16(mag, inf16));
}

__attribute__((target("avx2,f16c"))) static inline __attribute__((always_inline)) void
fp16_native_f16c(uint16_t *dst, const float *src, size_t n, int sat)
{
    static const fl_format_desc d = FL_DESC_FP16;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm256_cvtps_ph(_mm256_loadu_ps(src + i), FP16_RNE_IMM)),
                                            _mm256_cvtps_ph(_mm256_loadu_ps(src + i + 8), FP16_RNE_IMM), 1);
        _mm256_storeu_si256((__m256i *)(dst + i), fp16_f16c_fix(h, sat));
    }
    for (; i + 8 <= n; i += 8) {
        const __m256i h = _mm256_zextsi128_si256(_mm256_cvtps_ph(_mm256_loadu_ps(src + i), FP16_RNE_IMM));
        _mm_storeu_si128((__m128i *)(dst + i), _mm256_castsi256_si128(fp16_f16c_fix(h, sat)));
    }
    const uint32_t *u = (const uint32_t *)src;
    for (; i < n; i++)
        dst[i] = (uint16_t)fl_encode_f32_bits(&d, u[i], FL_RND_NE, sat ? FL_OVF_SATURATE : FL_OVF_NOSATURATE, 0);
}

/* bf16 RNE by VCVTNEPS2BF16.  It rounds to nearest-even but treats float32 subnormal inputs as
   zero (and would flush subnormal results, which only subnormal inputs produce), gives a NaN its
   sign and payload, and rounds overflow and Inf to Inf.  tests/test_convert_fast.c measures each of
   these on the instruction itself.  A vector holding any such lane -- a nonzero magnitude below
   2^-126, or one at or above 0x7F7F8000 (the first that rounds past max) -- goes through the
   integer kernel instead; ordinary data never has one. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static inline __attribute__((always_inline)) void
bf16_native(uint16_t *dst, const float *src, size_t n, int sat)
{
    const fl_cvt_fn slow = sat ? k512_bf16_01 : k512_bf16_00;
    const __m512i absm = _mm512_set1_epi32(0x7FFFFFFF), one = _mm512_set1_epi32(1);
    const __m512i submax = _mm512_set1_epi32(0x007FFFFF - 1), big = _mm512_set1_epi32(0x7F7F8000 - 1);
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        const __m512 x = _mm512_loadu_ps(src + i);
        const __m512i a = _mm512_and_si512(_mm512_castps_si512(x), absm);
        /* a - 1 <= 0x7FFFFE: subnormal;  a > 0x7F7F7FFF: overflow, Inf, NaN */
        const __mmask16 odd = _mm512_cmple_epu32_mask(_mm512_sub_epi32(a, one), submax) |
                              _mm512_cmpgt_epu32_mask(a, big);
        if (odd)
            slow(dst + i, src + i, 16, 0, 0);
        else
            _mm256_storeu_si256((__m256i *)(dst + i), (__m256i)_mm512_cvtneps_pbh(x));
    }
    if (i < n)
        slow(dst + i, src + i, n - i, 0, 0);
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) static void bf16_raw(uint16_t *dst, const float *src, size_t n)
{
    for (size_t i = 0; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(dst + i), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(src + i)));
}

#define NATIVE_FN(NAME, TARGET, BODY, T, SAT)                                                         \
    __attribute__((target(TARGET))) static void NAME(void *dst, const float *src, size_t n, uint64_t seed, uint64_t off)               \
    {                                                                                                \
        (void)seed;                                                                                  \
        (void)off;                                                                                   \
        BODY((T *)dst, src, n, SAT);                                                                 \
    }
#define T512 "avx512f,avx512bw,avx512vl"
NATIVE_FN(fp16_avx512_0, T512, fp16_native_avx512, uint16_t, 0)
NATIVE_FN(fp16_avx512_1, T512, fp16_native_avx512, uint16_t, 1)
NATIVE_FN(fp16_f16c_0, "avx2,f16c", fp16_native_f16c, uint16_t, 0)
NATIVE_FN(fp16_f16c_1, "avx2,f16c", fp16_native_f16c, uint16_t, 1)
NATIVE_FN(bf16_native_0, T512 ",avx512bf16", bf16_native, uint16_t, 0)
NATIVE_FN(bf16_native_1, T512 ",avx512bf16", bf16_native, uint16_t, 1)
#undef T512
#undef NATIVE_FN
#endif /* x86-64 */

/* ---- the choice ------------------------------------------------------------------------------- */

static const char *const isa_names[FL_ISA_COUNT] = { "scalar", "avx2", "avx512", "avx512bf16" };

const char *fl_isa_name(int isa) { return isa >= 0 && isa < FL_ISA_COUNT ? isa_names[isa] : "?"; }

int fl_isa_parse(const char *name)
{
    for (int k = 0; k < FL_ISA_COUNT; k++)
        if (strcmp(name, isa_names[k]) == 0)
            return k;
    return -1;
}

#ifdef FL_HAVE_X86_KERNELS
/* clang before 16 does not know "f16c" in __builtin_cpu_supports (the fuzz build, make fuzz, uses
   clang 14): CPUID leaf 1, ECX bit 29, as the builtin reads it */
static int cpu_has_f16c(void)
{
#if defined(__clang__) && __clang_major__ < 16
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
#else
    return __builtin_cpu_supports("f16c");
#endif
}
#endif

int fl_cpu_isa(void)
{
    static int isa = -1; /* benign race: every thread computes the same value */
    int v = __atomic_load_n(&isa, __ATOMIC_RELAXED);
    if (v >= 0)
        return v;
    v = FL_ISA_SCALAR;
#ifdef FL_HAVE_X86_KERNELS
    /* __builtin_cpu_supports also checks that the OS saves the vector state (XCR0) */
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("bmi2") && cpu_has_f16c())
        v = FL_ISA_AVX2;
    if (v == FL_ISA_AVX2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        v = FL_ISA_AVX512;
    if (v == FL_ISA_AVX512 && __builtin_cpu_supports("avx512bf16"))
        v = FL_ISA_AVX512BF16;
#endif
    __atomic_store_n(&isa, v, __ATOMIC_RELAXED);
    return v;
}

int fl_bf16_native_raw(uint16_t *dst, const float *src, size_t n)
{
#ifdef FL_HAVE_X86_KERNELS
    if (fl_cpu_isa() >= FL_ISA_AVX512BF16) {
        bf16_raw(dst, src, n);
        return 1;
    }
#else
    (void)dst, (void)src, (void)n;
#endif
    return 0;
}

void fl_stream_store(void *dst, const void *src, size_t bytes)
{
#ifdef FL_HAVE_X86_KERNELS
    if (fl_cpu_isa() >= FL_ISA_AVX2) {
        stream_store_avx2(dst, src, bytes);
        return;
    }
#endif
    memcpy(dst, src, bytes);
}

void fl_stream_fence(void)
{
#ifdef FL_HAVE_X86_KERNELS
    _mm_sfence();
#endif
}

fl_cvt_fn fl_cvt_kernel(int isa, fl_format to, fl_rounding mode, fl_overflow ovf, int variant)
{
#ifdef FL_HAVE_X86_KERNELS
    int f;
    switch (to) {
    case FL_FMT_E4M3: f = 0; break;
    case FL_FMT_E5M2: f = 1; break;
    case FL_FMT_BF16: f = 2; break;
    case FL_FMT_FP16: f = 3; break;
    default: return NULL;
    }
    if (mode != FL_RND_NE && mode != FL_RND_SR)
        return NULL;
    const int sr = mode == FL_RND_SR, sat = ovf == FL_OVF_SATURATE;
    if (variant == FL_CVT_BEST && !sr && to == FL_FMT_FP16 && isa >= FL_ISA_AVX512)
        return sat ? fp16_avx512_1 : fp16_avx512_0;
    if (variant == FL_CVT_BEST && !sr && to == FL_FMT_FP16 && isa == FL_ISA_AVX2)
        return sat ? fp16_f16c_1 : fp16_f16c_0;
    if (variant == FL_CVT_BEST && !sr && to == FL_FMT_BF16 && isa >= FL_ISA_AVX512BF16)
        return sat ? bf16_native_1 : bf16_native_0;
    if (isa >= FL_ISA_AVX512)
        return variant == FL_CVT_GENERIC ? table_avx512[f][sr][sat] : table_k512[f][sr][sat];
    if (isa == FL_ISA_AVX2)
        return table_avx2[f][sr][sat];
#else
    (void)isa, (void)to, (void)mode, (void)ovf, (void)variant;
#endif
    return NULL;
}
