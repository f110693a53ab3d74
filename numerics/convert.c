/* convert.c — array conversions (see convert.h).
 *
 * The element work is fl_round.h's, unchanged.  The common cases (round-to-nearest-even into
 * e4m3, e5m2, bf16, fp16 from float32) get loops specialised on a compile-time format descriptor
 * so that the compiler folds the descriptor and vectorises the loop; every other combination goes
 * through the same functions with the descriptor read at run time.  Both give identical bits: the
 * tests compare them, and the exhaustive checks run through these loops.  The vector kernels of
 * both directions (convert_simd.c: float32 -> formats; convert_decode_simd.c: formats -> float32)
 * are chosen here from fl_convert_isa(); the loops below are the scalar level.
 */
#include "convert.h"
#include "convert_simd.h"
#include "fl_round.h"

#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

size_t fl_format_storage_bytes(fl_format f)
{
    const int b = fl_format_get(f)->bits;
    return b <= 8 ? 1 : b <= 16 ? 2 : 4;
}

/* Specialised RNE loops: one per (format, policy, storage type). */
#define FL_RNE_LOOP(NAME, DESC, OVF, T)                                                            \
    static void NAME(T *restrict dst, const float *restrict src, size_t n)                        \
    {                                                                                              \
        static const fl_format_desc d = DESC;                                                      \
        const uint32_t *restrict u = (const uint32_t *)src;                                        \
        for (size_t i = 0; i < n; i++)                                                             \
            dst[i] = (T)fl_encode_f32_bits(&d, u[i], FL_RND_NE, OVF, 0);                            \
    }

/* Both policies of a format (descriptor FL_DESC_FMT): rne_F_sat and rne_F_nosat. */
#define FL_RNE_LOOPS(F, FMT, T)                                                                    \
    FL_RNE_LOOP(rne_##F##_sat, FL_DESC_##FMT, FL_OVF_SATURATE, T)                                  \
    FL_RNE_LOOP(rne_##F##_nosat, FL_DESC_##FMT, FL_OVF_NOSATURATE, T)

FL_RNE_LOOP(rne_e4m3_sat, FL_DESC_E4M3, FL_OVF_SATURATE, uint8_t) /* rne_e4m3_nosat: below */
FL_RNE_LOOPS(e5m2, E5M2, uint8_t)
FL_RNE_LOOPS(bf16, BF16, uint16_t)
FL_RNE_LOOPS(fp16, FP16, uint16_t)

/* e4m3 without saturation.  The encoder's early return to the signed NaN on overflow keeps the
   compiler from vectorising the loop (0.7 GB/s against 7.6 for the saturating one), so this runs the
   saturating encoder and sets the lanes that overflow to the signed NaN (0x7F | sign): the magnitudes
   beyond fl_format_rne_boundary (464; the tie at 464 rounds to max), up to and including Inf.  NaN
   inputs keep the saturating encoder's canonical NaN, as the plain encoder gives them.
   tests/test_convert_fast compares the two on all 2^32 inputs. */
static void rne_e4m3_nosat(uint8_t *restrict dst, const float *restrict src, size_t n)
{
    static const fl_format_desc d = FL_DESC_E4M3;
    int ties_overflow;
    const float boundary = (float)fl_format_rne_boundary(FL_FMT_E4M3, &ties_overflow); /* exact */
    const uint32_t lo = fl_f32_bits(boundary) + (ties_overflow ? 0u : 1u); /* first magnitude that overflows */
    const uint32_t *restrict u = (const uint32_t *)src;
    for (size_t i = 0; i < n; i++) {
        const uint32_t a = u[i] & 0x7FFFFFFFu;
        const uint8_t c = (uint8_t)fl_encode_f32_bits(&d, u[i], FL_RND_NE, FL_OVF_SATURATE, 0);
        dst[i] = a >= lo && a <= 0x7F800000u ? (uint8_t)(((u[i] >> 24) & 0x80u) | d.nan) : c;
    }
}

/* Stochastic rounding, specialised the same way: the random bits of element i are fl_sr_bits(seed,
   offset + i), as in the general loop. */
#define FL_SR_LOOP(NAME, DESC, OVF, T)                                                             \
    static void NAME(T *restrict dst, const float *restrict src, size_t n, uint64_t seed, uint64_t off) \
    {                                                                                              \
        static const fl_format_desc d = DESC;                                                      \
        const uint32_t *restrict u = (const uint32_t *)src;                                        \
        for (size_t i = 0; i < n; i++)                                                             \
            dst[i] = (T)fl_encode_f32_bits(&d, u[i], FL_RND_SR, OVF, fl_sr_bits(seed, off + i));    \
    }

FL_SR_LOOP(sr_e4m3_sat, FL_DESC_E4M3, FL_OVF_SATURATE, uint8_t)
FL_SR_LOOP(sr_e5m2_sat, FL_DESC_E5M2, FL_OVF_SATURATE, uint8_t)
FL_SR_LOOP(sr_bf16_sat, FL_DESC_BF16, FL_OVF_SATURATE, uint16_t)

static int convert_sr_fast(void *dst, fl_format to, const float *src, size_t n, fl_overflow ovf, uint64_t seed,
                           uint64_t off)
{
    if (ovf != FL_OVF_SATURATE)
        return 0;
    switch (to) {
    case FL_FMT_E4M3: sr_e4m3_sat(dst, src, n, seed, off); return 1;
    case FL_FMT_E5M2: sr_e5m2_sat(dst, src, n, seed, off); return 1;
    case FL_FMT_BF16: sr_bf16_sat(dst, src, n, seed, off); return 1;
    default: return 0;
    }
}

static int convert_fast(void *dst, fl_format to, const float *src, size_t n, fl_overflow ovf)
{
    const int sat = ovf == FL_OVF_SATURATE;
    switch (to) {
    case FL_FMT_E4M3: sat ? rne_e4m3_sat(dst, src, n) : rne_e4m3_nosat(dst, src, n); return 1;
    case FL_FMT_E5M2: sat ? rne_e5m2_sat(dst, src, n) : rne_e5m2_nosat(dst, src, n); return 1;
    case FL_FMT_BF16: sat ? rne_bf16_sat(dst, src, n) : rne_bf16_nosat(dst, src, n); return 1;
    case FL_FMT_FP16: sat ? rne_fp16_sat(dst, src, n) : rne_fp16_nosat(dst, src, n); return 1;
    default: return 0;
    }
}

static void store(void *dst, size_t bytes, size_t i, uint32_t code)
{
    if (bytes == 1)
        ((uint8_t *)dst)[i] = (uint8_t)code;
    else if (bytes == 2)
        ((uint16_t *)dst)[i] = (uint16_t)code;
    else
        ((uint32_t *)dst)[i] = code;
}

/* The general loop: any format, mode and policy, the descriptor read at run time; src holds floats
   (f64 = 0) or doubles.  Element i draws its random bits from fl_sr_bits(seed, offset + i). */
static void convert_general(void *dst, fl_format to, const void *src, int f64, size_t n, fl_rounding mode,
                            fl_overflow ovf, uint64_t seed, uint64_t offset)
{
    const fl_format_desc *d = fl_format_get(to);
    const size_t bytes = fl_format_storage_bytes(to);
    for (size_t i = 0; i < n; i++) {
        const uint32_t r = mode == FL_RND_SR ? fl_sr_bits(seed, offset + i) : 0;
        store(dst, bytes, i, f64 ? fl_encode_f64_bits(d, ((const uint64_t *)src)[i], mode, ovf, r)
                                 : fl_encode_f32_bits(d, ((const uint32_t *)src)[i], mode, ovf, r));
    }
}

static int isa_cap = -1; /* fl_convert_set_isa's cap, -1 for none */

static int isa_default(void)
{
    static int isa = -1; /* benign race: every thread computes the same value */
    int v = __atomic_load_n(&isa, __ATOMIC_RELAXED);
    if (v < 0) {
        v = fl_cpu_isa();
        const char *env = getenv("FP8LAB_ISA");
        const int want = env ? fl_isa_parse(env) : -1;
        if (env && want < 0)
            fprintf(stderr, "fp8lab: FP8LAB_ISA=%s is not one of scalar, avx2, avx512, avx512bf16; ignored\n", env);
        if (want >= 0 && want < v)
            v = want;
        __atomic_store_n(&isa, v, __ATOMIC_RELAXED);
    }
    return v;
}

int fl_convert_isa(void)
{
    const int v = isa_default(), cap = __atomic_load_n(&isa_cap, __ATOMIC_RELAXED);
    return cap >= 0 && cap < v ? cap : v;
}

int fl_convert_set_isa(int cap)
{
    __atomic_store_n(&isa_cap, cap, __ATOMIC_RELAXED);
    return fl_convert_isa();
}

/* One thread's share of fl_convert_from_f32. */
static void convert_f32_span(void *dst, fl_format to, const float *src, size_t n, fl_rounding mode,
                             fl_overflow ovf, uint64_t seed, uint64_t offset, fl_cvt_fn kernel)
{
    const size_t bytes = fl_format_storage_bytes(to);
    if (kernel && n * bytes >= FL_STREAM_MIN_BYTES) {
        _Alignas(64) uint32_t buf[FL_STREAM_CHUNK];
        for (size_t i = 0; i < n; i += FL_STREAM_CHUNK) {
            const size_t m = n - i < FL_STREAM_CHUNK ? n - i : FL_STREAM_CHUNK;
            kernel(buf, src + i, m, seed, offset + i);
            fl_stream_store((char *)dst + i * bytes, buf, m * bytes);
        }
        fl_stream_fence();
        return;
    }
    if (kernel) {
        kernel(dst, src, n, seed, offset);
        return;
    }
    if (mode == FL_RND_NE && convert_fast(dst, to, src, n, ovf))
        return;
    if (mode == FL_RND_SR && convert_sr_fast(dst, to, src, n, ovf, seed, offset))
        return;
    convert_general(dst, to, src, 0, n, mode, ovf, seed, offset);
}

void fl_convert_from_f32(void *dst, fl_format to, const float *src, size_t n, fl_rounding mode,
                         fl_overflow ovf, uint64_t seed, uint64_t offset)
{
    const fl_cvt_fn kernel = fl_cvt_kernel(fl_convert_isa(), to, mode, ovf, FL_CVT_BEST);
    const int threads = n >= ((size_t)1 << 18) && !omp_in_parallel() ? omp_get_max_threads() : 1;
    if (threads <= 1) {
        convert_f32_span(dst, to, src, n, mode, ovf, seed, offset, kernel);
        return;
    }
    const size_t bytes = fl_format_storage_bytes(to);
#pragma omp parallel num_threads(threads)
    {
        /* contiguous shares, cut on 64-element boundaries, over the threads the team really has */
        const size_t per = (n / (size_t)omp_get_num_threads() + 63) & ~(size_t)63;
        const size_t lo = (size_t)omp_get_thread_num() * per, hi = lo + per < n ? lo + per : n;
        if (lo < hi)
            convert_f32_span((char *)dst + lo * bytes, to, src + lo, hi - lo, mode, ovf, seed, offset + lo, kernel);
    }
}

void fl_convert_from_f64(void *dst, fl_format to, const double *src, size_t n, fl_rounding mode,
                         fl_overflow ovf, uint64_t seed, uint64_t offset)
{
    convert_general(dst, to, src, 1, n, mode, ovf, seed, offset);
}

void fl_convert_to_f32(float *dst, fl_format from, const void *src, size_t n)
{
    const fl_dec_fn kernel = fl_dec_kernel(fl_convert_isa(), from);
    if (kernel && n * sizeof *dst >= FL_STREAM_MIN_BYTES) {
        _Alignas(64) float buf[FL_STREAM_CHUNK];
        const size_t bytes = fl_format_storage_bytes(from);
        for (size_t i = 0; i < n; i += FL_STREAM_CHUNK) {
            const size_t m = n - i < FL_STREAM_CHUNK ? n - i : FL_STREAM_CHUNK;
            kernel(buf, (const char *)src + i * bytes, m);
            fl_stream_store(dst + i, buf, m * sizeof *dst);
        }
        fl_stream_fence();
        return;
    }
    if (kernel) {
        kernel(dst, src, n);
        return;
    }
    const fl_format_desc *d = fl_format_get(from);
    const size_t bytes = fl_format_storage_bytes(from);
    for (size_t i = 0; i < n; i++) {
        const uint32_t c = bytes == 1 ? ((const uint8_t *)src)[i]
                         : bytes == 2 ? ((const uint16_t *)src)[i]
                                      : ((const uint32_t *)src)[i];
        dst[i] = fl_decode_f32(d, c);
    }
}
