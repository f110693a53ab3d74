/* fl_round.h — exact conversions between float32/double and every fl_format, and exact decodes.
 *
 * Everything here is FL_HD: integer arithmetic on the bit pattern, no libm, compiled both as host C
 * and as CUDA device code, so a kernel and its CPU twin round identically.
 *
 * Encoding algorithm (one routine for every format).  Write a finite nonzero input as
 * sig * 2^(e - P) with sig the input's significand including its implicit bit (P = 23 for float32,
 * 52 for double) and e its unbiased exponent (a subnormal input uses the minimum exponent and no
 * implicit bit).  Its biased exponent in the target is te = e + bias.  If te >= 1 the target keeps M
 * mantissa bits, so s = P - M low bits of sig are discarded; if te < 1 the result is subnormal and
 * 1 - te more bits go.  The kept part q = sig >> s, placed over the biased exponent
 *   code = ((te - 1) << M) + q            (te >= 1; q carries the implicit bit into the exponent)
 *   code = q                              (te <  1; subnormal, or the smallest normal after a carry)
 * is the magnitude encoding; adding 1 to it is the next representable value up, also across a
 * binade, so rounding up is "code + 1" and overflow is "code > max_mag".
 *
 * Rounding modes decide whether to add 1 from the discarded bits (rem, with half = 2^(s-1)):
 *   FL_RND_NE    rem > half, or rem == half and q odd
 *   FL_RND_ZERO  never
 *   FL_RND_UP    rem != 0 and the input is positive;  FL_RND_DOWN: rem != 0 and negative
 *   FL_RND_SR    stochastic: with rbits a caller-supplied uniform 32-bit random number and
 *                frac32 = floor(rem * 2^32 / 2^s) (the discarded fraction of an ulp, as a 32-bit
 *                fixed-point number, truncated), round away from zero iff frac32 + rbits >= 2^32.
 *                So P(away) = frac32 / 2^32: exactly the discarded fraction whenever s <= 32
 *                (every target's normal range from float32), truncated to 32 bits below that.
 *                The result is always one of the two neighbours of the input, and E[result] = x
 *                up to that truncation.
 *
 * Overflow (code > max_mag after rounding) and specials, per fl_overflow:
 *   saturate:    +-max for finite overflow and for +-Inf.                    (__NV_SATFINITE)
 *   no-saturate: the IEEE result: +-Inf when rounding away from zero (NE, SR, UP for +, DOWN for -)
 *                and +-max when rounding toward zero (ZERO, UP for -, DOWN for +); where the format
 *                has no Inf that Inf becomes its NaN, keeping the sign in e4m3 (S.1111.111:
 *                -500 -> 0xFF, as NVIDIA's __NV_NOSAT; fnuz has one unsigned NaN, 0x80).
 *                Formats with neither Inf nor NaN (e3m2, e2m3, e2m1) always saturate.
 *   NaN input:   from float32, the format's canonical NaN with the sign dropped: e4m3 0x7F, e5m2
 *                0x7F, bf16/fp16 0x7FFF, fp32 0x7FFFFFFF, fnuz 0x80 (NVIDIA canonicalises a float
 *                NaN before converting).  From double, e4m3 and e5m2 follow NVIDIA's
 *                __nv_cvt_double_to_fp8, which keeps the sign and, for e5m2, the double's second
 *                payload bit: sign | 0x7F (e4m3), sign | 0x7E | bit 50 (e5m2); every other format
 *                gives its canonical NaN.  Bit-exact with cuda_fp8.h / cuda_bf16.h either way
 *                (tests/test_nv_oracle.cpp, make check-exhaustive).
 *                e3m2/e2m3/e2m1 have no NaN: NaN encodes as +max (the OCP MX way to carry a NaN
 *                is the block's e8m0 scale 0xFF, not the element).
 *   zero:        keeps its sign, except in fnuz formats which have no -0 (there 0x80 is NaN).
 *   E8M0:        positive powers of two only.  Negative inputs, NaN -> 0xFF.  Rounding as a format
 *                with M = 0: RNE sends (1.5, 2) * 2^k up to 2^(k+1) and 1.5 * 2^k to whichever of
 *                2^k, 2^(k+1) has the even exponent code; the directed modes as usual.
 *                E8M0 has no zero: +-0 and anything below 2^-127 clamp to 0x00 = 2^-127.
 *                Overflow: saturate -> 0xFE (2^127); no-saturate -> 0xFF, except when rounding
 *                toward zero (ZERO, DOWN: inputs are positive here), which gives 0xFE as in every
 *                other format (reachable from double inputs >= 2^128 only).
 */
#ifndef FL_ROUND_H
#define FL_ROUND_H

#include "fl_format.h"

/* ---- small helpers ---------------------------------------------------------------------------- */

/* Whether rounding away from zero happens, given the kept lsb, the discarded bits split as
   (round bit, sticky) for the deterministic modes and as a 32-bit fraction for SR. */
FL_HD int fl_round_away_(fl_rounding mode, uint32_t sign, uint32_t q_lsb, uint32_t round_bit,
                         uint32_t sticky, uint32_t frac32, uint32_t rbits)
{
    switch (mode) {
    case FL_RND_NE:   return round_bit && (sticky || q_lsb);
    case FL_RND_ZERO: return 0;
    case FL_RND_UP:   return !sign && (round_bit || sticky);
    case FL_RND_DOWN: return sign && (round_bit || sticky);
    default:          return (uint32_t)(frac32 + rbits) < frac32; /* carry out of 32 bits */
    }
}

/* The NaN an overflow produces without saturation: e4m3 (FN) has a NaN of each sign, S.1111.111,
   and NVIDIA keeps the sign; fnuz has the single NaN 0x80. */
FL_HD uint32_t fl_nan_signed_(const fl_format_desc *f, uint32_t sign)
{
    return f->specials == FL_SPEC_FN && sign ? (1u << (f->bits - 1)) | f->nan : f->nan;
}

/* Assemble the final encoding from a sign and an unbounded magnitude code. */
FL_HD uint32_t fl_finish_(const fl_format_desc *f, uint32_t sign, uint32_t code,
                          fl_rounding mode, fl_overflow ovf)
{
    const uint32_t sbit = 1u << (f->bits - 1);
    if (code > f->max_mag) {
        int toward_zero = mode == FL_RND_ZERO || (mode == FL_RND_UP && sign) ||
                          (mode == FL_RND_DOWN && !sign);
        if (ovf == FL_OVF_SATURATE || toward_zero || f->specials == FL_SPEC_NONE)
            code = f->max_mag;
        else if (f->specials == FL_SPEC_IEEE)
            code = f->max_mag + 1; /* Inf: the encoding right after max */
        else
            return fl_nan_signed_(f, sign);
    }
    if (f->specials == FL_SPEC_FNUZ && code == 0)
        return 0;
    return (sign ? sbit : 0) | code;
}

/* Encoding of an infinite input. */
FL_HD uint32_t fl_encode_inf_(const fl_format_desc *f, uint32_t sign, fl_overflow ovf)
{
    const uint32_t sbit = 1u << (f->bits - 1);
    if (ovf == FL_OVF_SATURATE || f->specials == FL_SPEC_NONE)
        return (sign ? sbit : 0) | f->max_mag;
    if (f->specials == FL_SPEC_IEEE)
        return (sign ? sbit : 0) | (f->max_mag + 1);
    return fl_nan_signed_(f, sign);
}

FL_HD uint32_t fl_encode_nan_(const fl_format_desc *f)
{
    return f->specials == FL_SPEC_NONE ? f->max_mag : f->nan;
}

/* E8M0 from an unbounded exponent code: te = e + 127 of the value rounded to a power of two.
   Only positive inputs get here, so ZERO and DOWN round toward zero: to 0xFE, not to the NaN. */
FL_HD uint32_t fl_finish_e8m0_(int32_t te, fl_rounding mode, fl_overflow ovf)
{
    if (te < 0)
        return 0x00u;
    if (te > 0xFE)
        return ovf == FL_OVF_SATURATE || mode == FL_RND_ZERO || mode == FL_RND_DOWN ? 0xFEu : 0xFFu;
    return (uint32_t)te;
}

/* The 32 random bits stochastic rounding uses for element `index` of a stream with `seed`:
   the upper half of the splitmix64 finaliser applied to a Weyl sequence (a counter-based
   generator, so any chunking or thread layout draws the same bits for the same element). */
FL_HD uint32_t fl_sr_bits(uint64_t seed, uint64_t index)
{
    return (uint32_t)(fl_mix64(seed + (index + 1) * FL_GOLDEN64) >> 32);
}

/* ---- float32 -> format ------------------------------------------------------------------------ */

/* Encode the float32 whose bits are u.  rbits is used by FL_RND_SR only.
   For FL_FMT_FP32 this is the identity on finite values and Inf (NaN is canonicalised). */
FL_HD uint32_t fl_encode_f32_bits(const fl_format_desc *f, uint32_t u, fl_rounding mode,
                                  fl_overflow ovf, uint32_t rbits)
{
    const uint32_t sign = u >> 31;
    const uint32_t a = u & 0x7FFFFFFFu;
    if (a > 0x7F800000u)
        return fl_encode_nan_(f);
    if (f->specials == FL_SPEC_E8M0 && sign && a != 0)
        return 0xFFu;
    if (a == 0x7F800000u)
        return fl_encode_inf_(f, sign, ovf);
    if (f->mbits >= 23) /* fp32 itself */
        return u;

    const int32_t fe = (int32_t)(a >> 23);
    uint32_t sig = (a & 0x7FFFFFu) | (fe ? 0x800000u : 0u);
    int32_t e = (fe ? fe : 1) - 127;
    if (f->specials == FL_SPEC_E8M0 && fe == 0) {
        /* E8M0 reaches 2^-127, a float32 subnormal: normalise [2^-127, 2^-126) by one bit.
           Anything smaller clamps to 0x00 below (te + carry <= 0). */
        sig <<= 1;
        e -= 1;
    }
    const int32_t te = e + f->bias;
    const int32_t M = f->mbits;
    int32_t s = 23 - M;
    uint32_t base = 0; /* E8M0 has no subnormals and assembles its code from te below */
    if (te >= 1)
        base = (uint32_t)(te - 1) << M;
    else if (f->specials != FL_SPEC_E8M0)
        s += 1 - te;
    /* s >= 13 here.  Shifts of 32 or more are clamped: sig < 2^24, so for s >= 25 everything
       is discarded and the round bit (bit s-1 >= 24) is already zero. */
    const int32_t sc = s < 25 ? s : 25;
    const uint32_t q = sig >> sc;
    const uint32_t rem = sig & ((1u << sc) - 1u);
    const uint32_t round_bit = (rem >> (sc - 1)) & 1u;
    const uint32_t sticky = (rem & ((1u << (sc - 1)) - 1u)) != 0;
    uint32_t frac32 = 0;
    if (mode == FL_RND_SR)
        frac32 = s <= 32 ? rem << (32 - s) : (s - 32 < 24 ? sig >> (s - 32) : 0u);
    /* The lsb that ties go to even on is the code's: the mantissa lsb, or for E8M0 (M = 0) the exponent's. */
    const uint32_t lsb = f->specials == FL_SPEC_E8M0 ? (uint32_t)te & 1u : q & 1u;
    const uint32_t away = (uint32_t)fl_round_away_(mode, sign, lsb, round_bit, sticky, frac32, rbits);
    if (f->specials == FL_SPEC_E8M0)
        return a == 0 ? 0x00u : fl_finish_e8m0_(te + (int32_t)((q + away) >> 1), mode, ovf);
    return fl_finish_(f, sign, base + q + away, mode, ovf);
}

static inline uint32_t fl_encode_f32(fl_format fmt, float x, fl_rounding mode, fl_overflow ovf, uint32_t rbits)
{
    return fl_encode_f32_bits(fl_format_get(fmt), fl_f32_bits(x), mode, ovf, rbits);
}

/* ---- double -> format ------------------------------------------------------------------------- */

FL_HD uint32_t fl_encode_f64_bits(const fl_format_desc *f, uint64_t u, fl_rounding mode,
                                  fl_overflow ovf, uint32_t rbits)
{
    const uint32_t sign = (uint32_t)(u >> 63);
    const uint64_t a = u & 0x7FFFFFFFFFFFFFFFull;
    if (a > 0x7FF0000000000000ull)
        {
        /* NVIDIA's __nv_cvt_double_to_fp8 (see the header comment): sign kept, e5m2 payload bit. */
        if (f->bits == 8 && f->specials == FL_SPEC_FN)
            return fl_nan_signed_(f, sign);
        if (f->bits == 8 && f->specials == FL_SPEC_IEEE)
            return (sign << 7) | 0x7Eu | (uint32_t)((a >> 50) & 1u);
        return fl_encode_nan_(f);
    }
    if (f->specials == FL_SPEC_E8M0 && sign && a != 0)
        return 0xFFu;
    if (a == 0x7FF0000000000000ull)
        return fl_encode_inf_(f, sign, ovf);

    const int32_t fe = (int32_t)(a >> 52);
    const uint64_t sig = (a & 0xFFFFFFFFFFFFFull) | (fe ? 0x10000000000000ull : 0u);
    const int32_t e = (fe ? fe : 1) - 1023;
    /* Clamp the exponent: anything beyond these limits overflows or underflows every format,
       and the clamp keeps the shifts and codes below in range. */
    const int32_t te = (e > 1024 ? 1024 : e < -1100 ? -1100 : e) + f->bias;
    const int32_t M = f->mbits;
    int32_t s = 52 - M;
    uint64_t base = 0;
    if (te >= 1)
        base = (uint64_t)(te - 1) << M;
    else if (f->specials != FL_SPEC_E8M0)
        s += 1 - te;
    /* s >= 29.  sig < 2^53: for s >= 54 everything is discarded and the round bit is zero. */
    const int32_t sc = s < 54 ? s : 54;
    const uint64_t q = sig >> sc;
    const uint64_t rem = sig & ((1ull << sc) - 1u);
    const uint32_t round_bit = (uint32_t)((rem >> (sc - 1)) & 1u);
    const uint32_t sticky = (rem & ((1ull << (sc - 1)) - 1u)) != 0;
    uint32_t frac32 = 0;
    if (mode == FL_RND_SR)
        frac32 = s <= 32 ? (uint32_t)(rem << (32 - s))
                         : (s - 32 < 53 ? (uint32_t)(sig >> (s - 32)) : 0u);
    const uint32_t lsb = f->specials == FL_SPEC_E8M0 ? (uint32_t)te & 1u : (uint32_t)(q & 1u);
    const uint32_t away = (uint32_t)fl_round_away_(mode, sign, lsb, round_bit, sticky, frac32, rbits);
    if (f->specials == FL_SPEC_E8M0)
        return a == 0 ? 0x00u : fl_finish_e8m0_(te + (int32_t)((q + away) >> 1), mode, ovf);
    const uint64_t code = base + q + away;
    /* Codes above 2^32 can only come from huge exponents: clamp to something above max_mag. */
    return fl_finish_(f, sign, code > 0xFFFFFFFFull ? 0xFFFFFFFFu : (uint32_t)code, mode, ovf);
}

static inline uint32_t fl_encode_f64(fl_format fmt, double x, fl_rounding mode, fl_overflow ovf, uint32_t rbits)
{
    return fl_encode_f64_bits(fl_format_get(fmt), fl_f64_bits(x), mode, ovf, rbits);
}

/* ---- decode ------------------------------------------------------------------------------------ */

/* 2^k as a float for -149 <= k <= 127, built from its bits. */
FL_HD float fl_pow2f(int k)
{
    return k >= -126 ? fl_f32_from_bits((uint32_t)(k + 127) << 23)
                     : fl_f32_from_bits(1u << (k + 149));
}

/* Classification of an encoding. */
FL_HD int fl_is_nan(const fl_format_desc *f, uint32_t c)
{
    const uint32_t mag = c & ((1u << (f->bits - 1)) - 1u);
    switch (f->specials) {
    case FL_SPEC_IEEE: return mag > f->max_mag + 1;
    case FL_SPEC_FN:   return mag > f->max_mag;
    case FL_SPEC_FNUZ: return c == f->nan;
    case FL_SPEC_E8M0: return c == 0xFFu;
    default:           return 0;
    }
}

FL_HD int fl_is_inf(const fl_format_desc *f, uint32_t c)
{
    return f->specials == FL_SPEC_IEEE && (c & ((1u << (f->bits - 1)) - 1u)) == f->max_mag + 1;
}

/* Exact value of an encoding, as float32 (every format here is a subset of float32). */
FL_HD float fl_decode_f32(const fl_format_desc *f, uint32_t c)
{
    if (f->specials == FL_SPEC_E8M0)
        return c == 0xFFu ? fl_f32_from_bits(0x7FC00000u) : fl_pow2f((int)c - 127);
    if (f->bits == 32)
        return fl_f32_from_bits(c);
    if (fl_is_nan(f, c))
        return fl_f32_from_bits(0x7FC00000u);
    const uint32_t sbit = 1u << (f->bits - 1);
    const uint32_t fsign = (c & sbit) ? 0x80000000u : 0u;
    if (fl_is_inf(f, c))
        return fl_f32_from_bits(fsign | 0x7F800000u);
    const uint32_t mag = c & (sbit - 1u);
    const int M = f->mbits;
    const uint32_t E = mag >> M;
    const uint32_t m = mag & ((1u << M) - 1u);
    if (E)
        return fl_f32_from_bits(fsign | ((E - f->bias + 127) << 23) | (m << (23 - M)));
    /* subnormal: m * 2^(1 - bias - M), exact in float32 (m < 2^M <= 2^10, result >= 2^-133). */
    const float v = (float)m * fl_pow2f(1 - f->bias - M);
    return fsign ? -v : v;
}

static inline float fl_decode(fl_format fmt, uint32_t c) { return fl_decode_f32(fl_format_get(fmt), c); }

#endif /* FL_ROUND_H */
