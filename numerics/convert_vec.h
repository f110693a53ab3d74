/* convert_vec.h — the vector body of numerics/convert_simd.c, written once with GCC's vector
 * extensions and included once per instruction set.  The includer defines
 *   VB       vector width in bytes (32: AVX2, 64: AVX-512)
 *   VSUF     a suffix for the names defined here (_avx2, _avx512)
 *   VTARGET  the function attribute selecting the instruction set
 * and the descriptor-derived constants cv_rebias and cv_nmin.
 *
 * Every lane runs fl_round.h's encoding algorithm (see the comment there) on its float32 bits,
 * branch-free, for the formats whose specials are IEEE or FN (e4m3, e5m2, bf16, fp16):
 *   fe = biased float32 exponent, sig = significand with its implicit bit, te = target exponent,
 *   s = discarded bits (23 - M, plus 1 - te below the target's normal range), q = sig >> s,
 *   code = ((te - 1) << M if te >= 1) + q + away.
 * Overflow needs one clamp per policy in these four formats: the code after max_mag is Inf (IEEE)
 * or the NaN (e4m3, FN), and it is exactly what a non-saturating conversion produces for an
 * overflow or an infinite input, with the input's sign; a saturating one clamps to max_mag.
 * A NaN input gives the format's canonical NaN without its sign.  The tail of an array (fewer
 * than one vector) goes through fl_encode_f32_bits itself.
 */
#define CV_CAT_(a, b) a##b
#define CV_CAT(a, b) CV_CAT_(a, b)
#define CV(name) CV_CAT(name, VSUF)
#define CV_L (VB / 4) /* lanes */

typedef uint8_t CV(vb) __attribute__((vector_size(VB / 4)));
typedef uint16_t CV(vh) __attribute__((vector_size(VB / 2)));
#define SV(name) CV(name)
#include "simd_vec.h"
#undef SV

/* a < b ? a : b, and the like, on masks (GCC's vector comparisons give 0 / -1 per lane) */
#define CV_SEL(m, p, q) (((p) & (m)) | ((q) & ~(m)))

/* Encodings of the CV_L float32 in u (sign included, in the low `bits` bits of each lane).
   sr: stochastic rounding with the random bits rb, else round-to-nearest-even. */
VTARGET static inline __attribute__((always_inline)) CV(vu)
    CV(encode)(CV(vu) u, const fl_format_desc *d, int sr, int sat, CV(vu) rb)
{
    const int M = d->mbits, S0 = 23 - M;
    const CV(vu) a = u & 0x7FFFFFFFu;
    if (d->bits == 16 && d->ebits == 8 && !sr && !sat) {
        /* bf16 RNE without saturation: float32's exponent range, so the encoding is RNE on u's upper
           half, sign included -- a round-up never carries into the sign (a + 2^15 < 2^31), and
           the values beyond bf16's largest round to Inf's code by themselves; NaN as below. */
        const CV(vu) r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
        return CV_SEL((CV(vu))(a > 0x7F800000u), d->nan, r);
    }
    const CV(vu) sign = (u >> 31) << (d->bits - 1);
    /* A result in the target's normal range is RNE on the float32 bits themselves (the carry of a
       round-up runs into the exponent), minus the exponent rebias: the common case, done first.
       bf16 shares float32's exponent range, so this is every finite bf16 result. */
    CV(vu) code = ((a + ((1u << (S0 - 1)) - 1u) + ((a >> S0) & 1u)) >> S0) - cv_rebias(d);
    const CV(vu) small = (CV(vu))(a < cv_nmin(d));
    const int any_small = CV(any)(small);
    if (sr && !any_small) {
        /* SR with every lane at or above the target's smallest normal (bf16: every lane): the
           discarded bits are a's low S0 bits, as a 32-bit fraction frac << (32 - S0); up iff
           frac + rb carries out of 32 bits.  Lanes beyond the largest value, Inf and NaN are
           settled by the clamp and the NaN select below, as in the general code. */
        const CV(vu) frac = (a & ((1u << S0) - 1u)) << (32 - S0);
        code = (a >> S0) + ((CV(vu))((frac + rb) < frac) & 1u) - cv_rebias(d);
    } else if (sr || any_small) {
        /* the general lane code: s = 23 - M discarded bits, more below the target's normal range */
        const CV(vu) fe = a >> 23;
        const CV(vu) nz = (CV(vu))(fe != 0);
        const CV(vu) sig = (a & 0x7FFFFFu) | (nz & 0x800000u);
        const CV(vi) te = (CV(vi))(fe + (~nz & 1u)) - (127 - d->bias); /* max(fe, 1) - 127 + bias */
        const CV(vi) below = 1 - te;                                   /* bits below the normal range */
        const CV(vu) s = (CV(vu))(S0 + CV_SEL(below > 0, below, 0));
        const CV(vu) sc = CV_SEL((CV(vu))(s < 25u), s, 25u); /* sig < 2^24: 25 discards everything */
        const CV(vu) base = (CV(vu))CV_SEL(te > 1, te - 1, 0) << M;
        CV(vu) q;
        if (!sr) {
            /* nearest-even: add half an ulp less one, plus the kept lsb, then cut */
            q = (sig + ((1u << (sc - 1u)) - 1u) + ((sig >> sc) & 1u)) >> sc;
            code = CV_SEL(small, base + q, code);
        } else {
            /* frac32: the discarded bits as a 32-bit fraction of an ulp (truncated); away on carry out */
            const CV(vu) rem = sig & ((1u << sc) - 1u);
            const CV(vu) le = (CV(vu))(s <= 32u);
            const CV(vu) hi = s - 32u; /* s > 32 here: sig >> (s - 32), zero from 24 on */
            const CV(vu) frac = CV_SEL(le, rem << (CV_SEL(le, 32u - s, 0u)), sig >> CV_SEL((CV(vu))(hi < 31u), hi, 31u));
            const CV(vu) away = (CV(vu))((frac + rb) < frac) & 1u;
            code = base + (sig >> sc) + away;
        }
    }
    const uint32_t limit = sat ? d->max_mag : d->max_mag + 1u;
    code = CV_SEL((CV(vu))(code < limit), code, limit);
    return CV_SEL((CV(vu))(a > 0x7F800000u), d->nan, code | sign);
}

/* dst[i] = encoding of src[i], i < n, in the storage of d (1 or 2 bytes). */
VTARGET static inline __attribute__((always_inline)) void CV(loop)(void *dst, const float *src, size_t n,
                                                                    const fl_format_desc *d, int sr, int sat,
                                                                    uint64_t seed, uint64_t off)
{
    const fl_rounding mode = sr ? FL_RND_SR : FL_RND_NE;
    const fl_overflow ovf = sat ? FL_OVF_SATURATE : FL_OVF_NOSATURATE;
    const CV(vu) zero = { 0 };
    size_t i = 0;
    for (; i + CV_L <= n; i += CV_L) {
        CV(vu) u;
        memcpy(&u, src + i, sizeof u);
        const CV(vu) c = CV(encode)(u, d, sr, sat, sr ? CV(sr_bits)(seed, off + i) : zero);
        if (d->bits == 8) {
#if VB == 32
            /* the low byte of each lane, gathered by a byte shuffle within each 128-bit half and a
               dword permute across them: GCC narrows the __builtin_convertvector below on AVX2 one
               lane at a time through general registers (8 vpextrd, 8 shifts and ors) */
            const __m256i lo = _mm256_shuffle_epi8((__m256i)c, _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1,
                                                                                  -1, -1, -1, 0, 4, 8, 12, -1, -1, -1, -1, -1,
                                                                                  -1, -1, -1, -1, -1, -1, -1));
            const __m256i o = _mm256_permutevar8x32_epi32(lo, _mm256_setr_epi32(0, 4, 1, 1, 1, 1, 1, 1));
            _mm_storel_epi64((__m128i *)((uint8_t *)dst + i), _mm256_castsi256_si128(o));
#else
            const CV(vb) o = __builtin_convertvector(c, CV(vb));
            memcpy((uint8_t *)dst + i, &o, sizeof o);
#endif
        } else {
#if VB == 32
            /* every code fits 16 bits, so VPACKUSDW's unsigned saturation keeps it; VPERMQ joins the
               halves (GCC's narrowing masks each lane first) */
            const __m256i p = _mm256_packus_epi32((__m256i)c, (__m256i)c);
            _mm_storeu_si128((__m128i *)((uint16_t *)dst + i), _mm256_castsi256_si128(_mm256_permute4x64_epi64(p, 0x08)));
#else
            const CV(vh) o = __builtin_convertvector(c, CV(vh));
            memcpy((uint16_t *)dst + i, &o, sizeof o);
#endif
        }
    }
    const uint32_t *u = (const uint32_t *)src;
    for (; i < n; i++) {
        const uint32_t c = fl_encode_f32_bits(d, u[i], mode, ovf, sr ? fl_sr_bits(seed, off + i) : 0);
        if (d->bits == 8)
            ((uint8_t *)dst)[i] = (uint8_t)c;
        else
            ((uint16_t *)dst)[i] = (uint16_t)c;
    }
}

/* One instance per (format, rounding, policy), the descriptor a compile-time constant. */
#define CV_INSTANCE(FMT, UP, SR, SAT)                                                                               \
    VTARGET static void CV(CV_CAT(CV_CAT(cvt_, FMT), CV_CAT(_, CV_CAT(SR, SAT))))(void *dst, const float *src,    \
                                                                                   size_t n, uint64_t seed,      \
                                                                                   uint64_t off)                 \
    {                                                                                                            \
        static const fl_format_desc d = FL_DESC_##UP;                                                            \
        CV(loop)(dst, src, n, &d, SR, SAT, seed, off);                                                           \
    }
#define CV_FORMAT(FMT, UP) CV_INSTANCE(FMT, UP, 0, 0) CV_INSTANCE(FMT, UP, 0, 1) CV_INSTANCE(FMT, UP, 1, 0) \
                           CV_INSTANCE(FMT, UP, 1, 1)
CV_FORMAT(e4m3, E4M3)
CV_FORMAT(e5m2, E5M2)
CV_FORMAT(bf16, BF16)
CV_FORMAT(fp16, FP16)
#undef CV_FORMAT
#undef CV_INSTANCE

/* The table of this instruction set: [format e4m3, e5m2, bf16, fp16][sr][sat]. */
#define CV_ROW(FMT) { { CV(cvt_##FMT##_00), CV(cvt_##FMT##_01) }, { CV(cvt_##FMT##_10), CV(cvt_##FMT##_11) } }
static const fl_cvt_fn CV(table)[4][2][2] = { CV_ROW(e4m3), CV_ROW(e5m2), CV_ROW(bf16), CV_ROW(fp16) };
#undef CV_ROW

#undef CV_SEL
#undef CV_L
#undef CV
#undef CV_CAT
#undef CV_CAT_
