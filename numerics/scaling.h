/* scaling.h — the scales FP8 and MX kernels quantize with: amax, the amax -> scale rule of
 * TransformerEngine (TE), delayed scaling with an amax history, per-tensor / per-row / 1x128 tile /
 * 128x128 block / MX 1x32 scale arrays, and quantize / dequantize with any of them.
 *
 * Dimension letters: x is a row-major float32 matrix (R, C).  A blocking (fl_block) cuts it into
 * blocks of BR rows by BC columns (the last block along each axis may be partial); there are
 * NR = ceil(R/BR) by NC = ceil(C/BC) blocks and one scale per block, stored row-major (NR, NC).
 *
 * Conventions (TE's): a scale s multiplies:  q = encode(RN32(x * s)), RNE and saturating, and
 * dequantization multiplies by scale_inv = RN32(1.0f / s):  x' = RN32(decode(q) * scale_inv).
 * Everything is float32 arithmetic, so a kernel and its CPU twin agree bit for bit.
 *
 * amax.  max |x| with C's fmaxf semantics: NaN elements are ignored (a NaN never wins against a
 * number) and counted separately; +-Inf gives amax = Inf; an empty or all-NaN array has amax 0.
 * This is what TE's CUDA kernels compute (common/recipe/current_scaling.cu amax_kernel and the
 * fused casts reduce with fmaxf / __hmax, which return the non-NaN operand).  PyTorch's
 * torch.amax(x.abs()) propagates NaN instead; callers that want that read nan_count.  The
 * reduction is sequential (i = 0, 1, ...); max is order-independent, so any GPU tree reduction
 * with the same NaN rule gives the same bits.
 *
 * amax -> scale (fl_scale_from_amax; TE DelayedScaling as its fused CUDA update computes it,
 * common/recipe/delayed_scaling.cu, the PyTorch default):
 *     s = (fmt_max * 2^-margin) / amax       in float32: the product is exact, one rounding
 *     amax == 0, negative, Inf or NaN  ->  s = prev_scale (nothing to learn from this amax)
 *     s == Inf (amax below fmt_max 2^-margin / FLT_MAX, e.g. any subnormal amax for e4m3)
 *                                      ->  s = FLT_MAX
 *     pow2: s rounded down to a power of two (below)
 *   TE's Python fallback (pytorch quantization.py _default_sf_compute) and the usual statement of
 *   the rule compute (fmt_max / amax) / 2^margin: the same bits whenever that scale is a normal
 *   float below FLT_MAX (dividing by a power of two commutes with rounding there).  They differ
 *   only for margin != 0 when fmt_max / amax overflows -- the Python form then returns FLT_MAX and
 *   loses the margin, the fused form keeps it -- or when the scale is subnormal (one rounding
 *   instead of two).  TE's current / block scaling (common/recipe/recipe_common.cuh
 *   compute_scale_from_amax) is this rule with margin 0, amax floored at amax_epsilon and
 *   prev_scale = 1: fl_scale_blocks.
 *
 * Power-of-two scales: the largest power of two <= s (TE clears the mantissa bits: bits &
 * 0xFF800000; we do the same for normal s and take the top bit of a subnormal s, where TE's mask
 * would give 0).  s = RN(fmt_max/amax) rounds up onto a power of two 2^j only if fmt_max/amax is
 * exactly 2^j: that needs a float amax in (m, m(1 + 2^-25)) with m = fmt_max 2^-j, and the float
 * after m is at least m(1 + 2^-24) (m is a float: fmt_max has few significant bits; where m would
 * be subnormal fmt_max/amax overflows to the FLT_MAX case).  So the result is the largest power
 * of two 2^k with amax * 2^k <= fmt_max * 2^-margin, up to 2^127.
 *
 * Delayed scaling (fl_delayed; TE DelayedScaling defaults: L = 1024, "max", margin 0).
 *   The scale used to quantize the tensor of step t was computed before step t, from the amaxes
 *   recorded at steps < t: it is stale by one step.  Training step t does
 *       s = fl_delayed_scale(st);      quantize step t's tensor with s, measuring its amax a_t;
 *       fl_delayed_record(st, a_t);    -> the scale for step t + 1
 *   record(a):  a == 0 (the tensor was all zeros, or unused this step): nothing changes -- TE's
 *               fused update (kernel_bulk, the PyTorch default) skips the roll, so an idle
 *               tensor does not age its history (TE's Python fallback would roll a 0 in).
 *               Otherwise a goes into the ring (NaN and Inf included), evicting the oldest of L,
 *               and the new scale is fl_scale_from_amax(A, old scale, fmt, margin, pow2) with
 *                 "max":         A = fmaxf over the L ring entries (entries never written are 0,
 *                                NaN entries ignored -- TE's fused kernel; an Inf entry keeps the
 *                                old scale until it leaves the window L records later)
 *                 "most_recent": A = a (NaN or Inf keeps the old scale).
 *   Initial state: history all 0, scale 1, scale_inv 1 (TE initialises scale to ones).
 *   Example, "max", L = 4, e4m3: record 56, 224, 14 -> scales used at steps 1..4: 1, 8, 2, 2.
 *   The state is one plain block of memory (header + history, no pointers): a checkpoint saves
 *   fl_delayed_size(len) bytes and restores them bit for bit; fl_delayed_check validates a load.
 *   Byte order is the host's (a byte-swapped blob fails the magic check).
 *
 * MX (OCP Microscaling v1.0): blocks of FL_MX_BLOCK = 32 consecutive elements of a row share one
 * e8m0 scale X = 2^(code - 127); elements are stored as q = encode(x / X) (exact: x / X is x
 * times the power of two 2^(127 - code)) and decode to decode(q) * X.  Two rules pick the code:
 *   FL_MX_FLOOR  OCP / Microsoft microxcaling: X = 2^(floor(log2 amax) - emax_elem), with
 *                emax_elem = floor(log2 fmt_max) (e4m3 8, e5m2 15, e3m2 4, e2m3 2, e2m1 2).  The
 *                scaled amax lands in [2^emax, 2^(emax+1)), above fmt_max when amax's significand
 *                exceeds fmt_max's (e4m3: > 1.75, e2m1: > 1.5): those elements saturate, and
 *                beyond the RNE overflow boundary (e4m3 significand > 1.8125, e2m1 >= 1.75) clip.
 *                A block holding any NaN or +-Inf gets code 0xFF (NaN): the whole block decodes
 *                to NaN (OCP's way to carry a NaN; microxcaling does the same for Inf).
 *   FL_MX_CEIL   TE (ptx::float_to_e8m0(amax * max_norm_rcp), rounding the exponent up): the
 *                smallest 2^k with amax / 2^k <= fmt_max.  Never clips a finite element (k <=
 *                127 - emax + 1 <= 126: e8m0 never tops out).  Computed exactly from
 *                the significands; TE's float32 product amax * RN(1/fmt_max) gives the same code
 *                for every normal amax / fmt_max (checked in tests/test_scaling.c).  NaN elements
 *                are ignored by the amax and stored as the element format's NaN; element formats
 *                without NaN (e3m2, e2m3, e2m1) cannot store one, so there a NaN makes the block
 *                code 0xFF.  amax = Inf gives 0xFE (2^127), as in TE: the Inf saturates to max.
 *   Both: code = k + 127 clamped to [0x00, 0xFE].  A block of zeros (amax 0), or one so small
 *   that k < -127, gets 0x00 = 2^-127, the smallest scale; its elements stay exact zeros / tiny.
 *   (TE quantizes a code-0x00 block with multiplier 1 instead of 2^127; only blocks with
 *   amax <= fmt_max * 2^-127 are affected, which TE flushes to zero and we keep.)
 *
 * NVFP4 (NVIDIA Blackwell; "Pretraining Large Language Models with NVFP4", arXiv 2509.25149, App. B;
 * TransformerEngine's NVFP4BlockScaling, common/util/..._nvfp4 quantize): e2m1 elements in blocks of
 * FL_NVFP4_BLOCK = 16 consecutive elements of a row, each block with a positive e4m3 scale, and one
 * float32 scale per tensor that moves the block scales into e4m3's range.  In float32, each step
 * rounded:
 *   s_enc = 2688 / amax (6 x 448; amax of the tensor, NaN ignored), capped at FLT_MAX; amax 0 or
 *           Inf gives 1 (fl_nvfp4_global_scale; TE's compute_global_encode_scaling_factor_FP4)
 *   s_dec = 1 / s_enc
 *   sb    = e4m3(amax_b * (s_enc * (1/6)))   RNE, saturating at 448: the block's decode scale code
 *           (amax_b: the block's amax, NaN ignored)
 *   enc_b = min(1 / (dec(sb) * s_dec), FLT_MAX)   (1 / 0 = Inf -> FLT_MAX)
 *   q     = e2m1(x * enc_b)                  RNE (or SR), saturating at 6
 *   y     = q * dec(sb) * s_dec              the dequantised value
 * A block whose scale rounds to 0 (a zero block, or amax_b / amax below about 2^-21) decodes to
 * zeros.  Where dec(sb) is within e4m3's normal range, the block's largest element encodes to +-6.
 *
 * Statistics (fl_quant_stats) are ADDED to, so one struct can sum over calls; zero it first.
 */
#ifndef FL_SCALING_H
#define FL_SCALING_H

#include "fl_round.h"

#include <float.h>

/* ---- element functions (FL_HD: shared by kernels, CPU twins and tests) ------------------------ */

FL_HD int fl_f32_bits_isnan(uint32_t u) { return (u & 0x7FFFFFFFu) > 0x7F800000u; }
FL_HD int fl_f32_bits_isfinite(uint32_t u) { return (u & 0x7F800000u) != 0x7F800000u; }

/* max(a, b) with C fmaxf semantics: a NaN operand loses; both NaN gives NaN. */
FL_HD float fl_fmax_f32(float a, float b)
{
    if (fl_f32_bits_isnan(fl_f32_bits(a)))
        return b;
    if (fl_f32_bits_isnan(fl_f32_bits(b)))
        return a;
    return a > b ? a : b;
}

/* Index of the highest set bit of u != 0. */
FL_HD int fl_top_bit_(uint32_t u)
{
    int k = 0;
    while (u >>= 1)
        k++;
    return k;
}

/* floor(log2 |x|) for the finite nonzero float32 with bits u, exact (subnormals included:
   -149 ... 127).  No log2f: the exponent is read off the bit pattern. */
FL_HD int fl_floor_log2_f32_bits(uint32_t u)
{
    const uint32_t a = u & 0x7FFFFFFFu;
    return (a >> 23) ? (int)(a >> 23) - 127 : fl_top_bit_(a) - 149;
}

/* The significand of the finite nonzero float32 with bits u, normalised to 24 bits
   (2^23 <= sig < 2^24), so that |x| = sig * 2^(floor_log2 - 23). */
FL_HD uint32_t fl_sig24_f32_bits(uint32_t u)
{
    const uint32_t a = u & 0x7FFFFFFFu;
    if (a >> 23)
        return (a & 0x7FFFFFu) | 0x800000u;
    return a << (23 - fl_top_bit_(a));
}

/* The largest power of two <= s, for s positive and finite; any other s is returned unchanged. */
FL_HD float fl_pow2_down_f32(float s)
{
    const uint32_t u = fl_f32_bits(s);
    if ((u >> 31) || u == 0 || !fl_f32_bits_isfinite(u))
        return s;
    if (u >> 23)
        return fl_f32_from_bits(u & 0xFF800000u); /* clear the mantissa, as TE does */
    return fl_f32_from_bits(1u << fl_top_bit_(u)); /* subnormal: its top bit */
}

/* The amax -> scale rule (see the header comment).  margin in [-127, 127]. */
FL_HD float fl_scale_from_amax_desc(const fl_format_desc *f, float amax, float prev_scale,
                                    int margin, int pow2)
{
    const float fmt_max = fl_decode_f32(f, f->max_mag);
    float s = prev_scale;
    if (fl_f32_bits_isfinite(fl_f32_bits(amax)) && amax > 0.0f)
        s = (fmt_max * fl_pow2f(-margin)) / amax;
    if ((fl_f32_bits(s) & 0x7FFFFFFFu) == 0x7F800000u)
        s = fl_f32_from_bits(0x7F7FFFFFu); /* FLT_MAX: TE's choice when the quotient overflows */
    if (pow2)
        s = fl_pow2_down_f32(s);
    return s;
}

/* One element: x times its scale, RNE, saturating (TE's cast; NVIDIA __NV_SATFINITE). */
FL_HD uint32_t fl_quantize_f32_desc(const fl_format_desc *f, float x, float scale)
{
    return fl_encode_f32_bits(f, fl_f32_bits(x * scale), FL_RND_NE, FL_OVF_SATURATE, 0);
}

/* One element back: decode(q) times scale_inv (= 1.0f / scale). */
FL_HD float fl_dequantize_f32_desc(const fl_format_desc *f, uint32_t q, float scale_inv)
{
    return fl_decode_f32(f, q) * scale_inv;
}

/* ---- MX (e8m0) scales -------------------------------------------------------------------------- */

#define FL_MX_BLOCK 32

typedef enum {
    FL_MX_FLOOR, /* OCP / microxcaling: 2^(floor(log2 amax) - emax_elem); may clip */
    FL_MX_CEIL,  /* TE: smallest 2^k with amax / 2^k <= fmt_max; never clips */
    FL_MX_RULE_COUNT
} fl_mx_rule;

/* emax_elem: the exponent of the element format's largest binade, floor(log2 fmt_max). */
FL_HD int fl_mx_emax_desc(const fl_format_desc *f)
{
    return fl_floor_log2_f32_bits(fl_f32_bits(fl_decode_f32(f, f->max_mag)));
}

/* The e8m0 code of a block with this amax (>= 0, or NaN for "the block holds a NaN").
   NaN -> 0xFF; Inf -> 0xFF (floor) or 0xFE (ceil); 0 -> 0x00; else k + 127 clamped to [0, 0xFE]. */
FL_HD uint32_t fl_mx_scale_code_desc(const fl_format_desc *f, float amax, fl_mx_rule rule)
{
    const uint32_t a = fl_f32_bits(amax) & 0x7FFFFFFFu;
    if (fl_f32_bits_isnan(a))
        return 0xFFu;
    if (a == 0x7F800000u)
        return rule == FL_MX_FLOOR ? 0xFFu : 0xFEu;
    if (a == 0)
        return 0x00u;
    const uint32_t mb = fl_f32_bits(fl_decode_f32(f, f->max_mag));
    int k = fl_floor_log2_f32_bits(a) - fl_floor_log2_f32_bits(mb);
    /* amax = sa * 2^(ea-23), fmt_max = sm * 2^(em-23): amax / 2^(ea-em) <= fmt_max iff sa <= sm. */
    if (rule == FL_MX_CEIL && fl_sig24_f32_bits(a) > fl_sig24_f32_bits(mb))
        k += 1;
    k += 127;
    return k < 0 ? 0x00u : k > 0xFE ? 0xFEu : (uint32_t)k;
}

/* The multiplier that takes x to the element grid, 2^(127 - code) (exact), and the decode
   scale 2^(code - 127); code 0xFF (NaN) gives NaN for both. */
FL_HD float fl_mx_mul_from_code(uint32_t code)
{
    return code >= 0xFFu ? fl_f32_from_bits(0x7FC00000u) : fl_pow2f(127 - (int)code);
}

FL_HD float fl_mx_scale_from_code(uint32_t code)
{
    return code >= 0xFFu ? fl_f32_from_bits(0x7FC00000u) : fl_pow2f((int)code - 127);
}

/* ---- host API (scaling.c) ---------------------------------------------------------------------- */

/* Host wrappers of the element functions, by format. */
static inline float fl_scale_from_amax(fl_format fmt, float amax, float prev_scale, int margin, int pow2)
{
    return fl_scale_from_amax_desc(fl_format_get(fmt), amax, prev_scale, margin, pow2);
}

static inline int fl_mx_emax(fl_format elem) { return fl_mx_emax_desc(fl_format_get(elem)); }

static inline uint8_t fl_mx_scale_code(fl_format elem, float amax, fl_mx_rule rule)
{
    return (uint8_t)fl_mx_scale_code_desc(fl_format_get(elem), amax, rule);
}

/* Quantization counters; every function that takes one ADDS to it (NULL: not counted). */
typedef struct {
    size_t n;      /* elements quantized */
    size_t n_nan;  /* NaN inputs */
    size_t n_sat;  /* finite |x * scale| > fmt_max, or x = +-Inf: stored as +-max by saturation */
    size_t n_clip; /* those of n_sat beyond the RNE overflow boundary (e4m3: > 464; e5m2, e2m1:
                      >= 61440, 7 since the tie goes up): without saturation they would overflow,
                      so their error exceeds half an ulp.  The rest of n_sat rounds to max anyway. */
    size_t n_ftz;  /* finite x != 0 stored as +-0 (underflow) */
} fl_quant_stats;

/* A blocking: block height and width; 0 means the whole extent (exactly one block that way). */
typedef struct {
    size_t rows, cols;
} fl_block;

#define FL_BLOCK_TENSOR ((fl_block){ 0, 0 })     /* scale (1, 1) */
#define FL_BLOCK_ROW ((fl_block){ 1, 0 })        /* scale (R, 1) */
#define FL_BLOCK_1X128 ((fl_block){ 1, 128 })    /* scale (R, ceil(C/128)): activations, gradients */
#define FL_BLOCK_128X128 ((fl_block){ 128, 128 }) /* scale (ceil(R/128), ceil(C/128)): weights */
#define FL_BLOCK_MX ((fl_block){ 1, FL_MX_BLOCK }) /* scale (R, ceil(C/32)) */
#define FL_BLOCK_NVFP4 ((fl_block){ 1, 16 })      /* scale (R, ceil(C/16)): FL_NVFP4_BLOCK */

/* NR, NC: the number of blocks down and across.  A zero extent gives 0 blocks that way, except
   that a block dimension of 0 always gives 1. */
void fl_block_grid(size_t *nr, size_t *nc, fl_block b, size_t R, size_t C);

/* amax of x (n): max |x_i| over the non-NaN elements (0 if none); *nan_count (may be NULL) is
   set to the number of NaNs. */
float fl_amax_f32(size_t *nan_count, const float *x, size_t n);

/* Per-block amax (NR, NC) of x (R, C); *nan_count (may be NULL) set to the NaNs in x. */
void fl_amax_blocks(float *amax, size_t *nan_count, const float *x, size_t R, size_t C, fl_block b);

/* Current / block scaling (TE Float8CurrentScaling, Float8BlockScaling): scale (n) from amax (n),
   scale[i] = fl_scale_from_amax(fmt, amax[i] < amax_eps ? amax_eps : amax[i], 1.0f, 0, pow2):
   an all-zero (or Inf / NaN) block gets scale 1. */
void fl_scale_blocks(float *scale, const float *amax, size_t n, fl_format fmt, int pow2, float amax_eps);

/* scale_inv[i] = 1.0f / scale[i], float32 (what TE stores beside the FP8 data). */
void fl_scale_invert(float *scale_inv, const float *scale, size_t n);

/* q (R, C) = fl_quantize_f32_desc(fmt, x, scale of x's block), scale (NR, NC).  fmt: any format of
   at most 8 bits other than e8m0 (sub-byte formats: one code per byte). */
void fl_quantize(uint8_t *q, fl_quant_stats *st, const float *x, size_t R, size_t C,
                 const float *scale, fl_block b, fl_format fmt);

/* x (R, C) = decode(q) * scale_inv of q's block, scale_inv (NR, NC). */
void fl_dequantize(float *x, const uint8_t *q, size_t R, size_t C, const float *scale_inv,
                   fl_block b, fl_format fmt);

/* The e8m0 code of one MX block of n <= 32 elements (see the header comment: 0xFF for a block
   holding a NaN under the floor rule, or under the ceil rule where the element format has no NaN);
   *nans set to the block's NaN count. */
uint8_t fl_mx_block_code(size_t *nans, const float *x, size_t n, fl_format elem, fl_mx_rule rule);

/* MX: one block of n <= 32 elements (a partial block is a short row end):
   *scale_code and q (n) from x (n). */
void fl_mx_quantize_block(uint8_t *scale_code, uint8_t *q, fl_quant_stats *st, const float *x,
                          size_t n, fl_format elem, fl_mx_rule rule);
void fl_mx_dequantize_block(float *x, uint8_t scale_code, const uint8_t *q, size_t n, fl_format elem);

/* MX over a matrix: scale (R, ceil(C/32)) e8m0 codes, q (R, C) element codes. */
void fl_mx_quantize(uint8_t *scale, uint8_t *q, fl_quant_stats *st, const float *x, size_t R, size_t C,
                    fl_format elem, fl_mx_rule rule);
void fl_mx_dequantize(float *x, const uint8_t *scale, const uint8_t *q, size_t R, size_t C, fl_format elem);

/* Fake quantisation on the cast engine (numerics/cast.h; its level from fl_convert_isa()): y (R, C) =
   what fl_quantize then fl_dequantize give, bit for bit, and the same counts (added to *st; NULL: not
   counted), without the codes.  fmt: e4m3 or e5m2 take the fused kernels, any other element format
   the engine's reference loop.  y may be x. */
void fl_fake_quantize(float *y, fl_quant_stats *st, const float *x, size_t R, size_t C, const float *scale,
                      const float *scale_inv, fl_block b, fl_format fmt);

/* The same for MX: y = fl_mx_quantize then fl_mx_dequantize's values and counts, scale (R, ceil(C/32))
   the e8m0 codes.  y may not be x (each block's code is taken from x before the block is cast). */
void fl_mx_fake_quantize(float *y, uint8_t *scale, fl_quant_stats *st, const float *x, size_t R, size_t C,
                         fl_format elem, fl_mx_rule rule);
/* The same with the cast's rounding given (cf->fmt the element format; cf->sr: element (i, j) draws
   fl_sr_bits(cf->key, i * C + j); cf->reference: the engine's reference loop), as the training recipe
   mxfp4 casts.  Rows run on the OpenMP threads (the results do not depend on the thread count). */
struct fl_cast_fmt; /* numerics/cast.h */
void fl_mx_fake_quantize_cast(float *y, uint8_t *scale, fl_quant_stats *st, const float *x, size_t R, size_t C,
                              const struct fl_cast_fmt *cf, fl_mx_rule rule);

/* ---- NVFP4 (see the header comment) ----------------------------------------------------------- */
#define FL_NVFP4_BLOCK 16

/* A block's scale code e4m3(amax_b * t), RNE, saturating, with t = s_enc / 6 (s_enc / 4: Four Over
   Six's map to 4) as float32 products; and the encode scale of a block whose scale decodes to dec,
   min(1 / (dec * s_dec), FLT_MAX) with s_dec = 1 / s_enc.  The definition (header comment). */
static inline uint32_t fl_nvfp4_scale_code(float amax_b, float t)
{
    static const fl_format_desc e4 = FL_DESC_E4M3;
    return fl_encode_f32_bits(&e4, fl_f32_bits(amax_b * t), FL_RND_NE, FL_OVF_SATURATE, 0);
}
static inline float fl_nvfp4_enc_scale(float dec, float s_dec)
{
    const float e = 1.0f / (dec * s_dec);
    return e < FLT_MAX ? e : FLT_MAX;
}

/* s_enc of a tensor whose amax (NaN ignored) is amax: 2688 / amax, or with four_over_six 1536 / amax
   (6 x 256: Four Over Six's 256 keeps the blocks mapped to 4, whose scales are 1.5 times larger,
   within e4m3's 448). */
float fl_nvfp4_global_scale(float amax, int four_over_six);

/* y (R, C) = the NVFP4 fake quantisation of x with the tensor scale s_enc (fl_nvfp4_global_scale of
   the tensor's amax, or any positive finite value), on the cast engine; scale (R, ceil(C/16)) the e4m3
   codes of the block scales (may be NULL).  four_over_six: each block also mapped to 4 (its scale code
   e4m3(amax_b * (s_enc * 0.25))), and of the two the one with the smaller sum of squared errors kept,
   6 on a tie (Four Over Six, Cook et al., arXiv 2512.02010).  sr: the elements by stochastic
   rounding, element (i, j) drawing fl_sr_bits(key, i * C + j); else RNE.  Counts added to *st (NULL:
   not counted): saturated and clipped at 6, flushed to zero (x != 0 with y = 0: the block's scale
   set by a larger element, or the block scale itself underflowing).  y may not be x. */
void fl_nvfp4_fake_quantize(float *y, uint8_t *scale, fl_quant_stats *st, const float *x, size_t R, size_t C,
                            float s_enc, int four_over_six, int sr, uint64_t key);

/* The same with tiles of br rows x 16 columns sharing one block scale (1 <= br <= 16): br = 1 is
   fl_nvfp4_fake_quantize; br = 16 NVIDIA's 2D weight blocks, whose quantised values are the same
   whether the tensor is read row- or column-wise (so W and W^T of a GEMM's forward and backward
   agree).  A tile's amax is over all its elements; Four Over Six compares the tiles' squared errors.
   scale (ceil(R/br), ceil(C/16)).  Tile rows run on the OpenMP threads (the results do not depend on
   the thread count).  reference: the elements by the cast engine's reference loop (tests compare). */
void fl_nvfp4_fake_quantize_tiles(float *y, uint8_t *scale, fl_quant_stats *st, const float *x, size_t R, size_t C,
                                  size_t br, float s_enc, int four_over_six, int sr, uint64_t key, int reference);

/* ---- the random Hadamard transform (NVIDIA's NVFP4 recipe, arXiv 2509.25149 Sec. 4) ----------- *
 * Applied to both inputs of the weight-gradient GEMM along its reduction axis (tokens), in groups of
 * FL_RHT_SIZE: v <- M v with M = H16 diag(signs) / 4, H16 the Sylvester Hadamard matrix of order 16.
 * M is orthogonal (M^T M = I), so sum_t dY'_t X'_t over a group equals sum_t dY_t X_t: the GEMM needs
 * no inverse, while the quantisation sees values whose outliers are spread over 16.  Each output is
 * one fixed chain of float32 additions (the butterflies of stages 1, 2, 4, 8) times the exact 1/4. */
#define FL_RHT_SIZE 16
/* 16 signs +-1 from the seed (NVIDIA's recipe fixes one sign vector; here it is drawn per run). */
void fl_rht16_signs(float signs[FL_RHT_SIZE], uint64_t seed);
/* v (16) <- M v, and its inverse v <- M^T v = diag(signs) H16 v / 4. */
void fl_rht16(float *v, const float signs[FL_RHT_SIZE]);
void fl_rht16_inv(float *v, const float signs[FL_RHT_SIZE]);

const char *fl_mx_rule_name(fl_mx_rule r);                 /* "floor", "ceil" */
int fl_mx_rule_parse(fl_mx_rule *out, const char *name);    /* 0, or -1 if unknown */

/* ---- delayed scaling --------------------------------------------------------------------------- */

typedef enum {
    FL_AMAX_MAX,         /* max over the history window (TE "max", the default) */
    FL_AMAX_MOST_RECENT, /* the amax just recorded (TE "most_recent") */
    FL_AMAX_ALGO_COUNT
} fl_amax_algo;

const char *fl_amax_algo_name(fl_amax_algo a);              /* "max", "most_recent" */
int fl_amax_algo_parse(fl_amax_algo *out, const char *name); /* 0, or -1 if unknown */

#define FL_DELAYED_MAGIC 0x53444C46u /* "FLDS" in a little-endian file */
#define FL_DELAYED_VERSION 1u

/* One plain block: this header then the history; allocate fl_delayed_size(len) bytes. */
typedef struct {
    uint32_t magic;   /* FL_DELAYED_MAGIC */
    uint32_t version; /* FL_DELAYED_VERSION */
    uint32_t len;     /* L, the history length (TE default 1024) */
    uint32_t algo;    /* fl_amax_algo */
    uint32_t fmt;     /* fl_format of the quantized tensor */
    int32_t margin;   /* scale divided by 2^margin */
    uint32_t pow2;    /* 1: power-of-two scales */
    uint32_t head;    /* ring slot the next amax goes to; history[head] is the oldest */
    uint64_t steps;   /* fl_delayed_record calls so far (zero-amax ones included) */
    float scale;      /* the scale the next quantization uses */
    float scale_inv;  /* 1.0f / scale */
    float history[];  /* (L) amax ring */
} fl_delayed;

size_t fl_delayed_size(uint32_t len);

/* ---- the scaling schemes: one vocabulary ------------------------------------------------------------ *
 * The same names in the training recipes (experiments/train/recipe.h), `fp8lab order` and `fp8lab quant`.
 * Each scheme is a blocking (its scales' grid) and where the scale comes from. */
typedef enum {
    FL_SCALING_NONE,    /* no scale: the value itself is cast */
    FL_SCALING_DELAYED, /* per tensor, from the amax history (TransformerEngine's DelayedScaling) */
    FL_SCALING_TENSOR,  /* per tensor, from this tensor's own amax ("current" scaling) */
    FL_SCALING_ROW,     /* per row (token), current */
    FL_SCALING_1X128,   /* 1x128 tiles, current; the recipes scale weights in 128x128 blocks (DeepSeek-V3) */
    FL_SCALING_MX32,    /* MX: blocks of 32 along a row, e8m0 scales (OCP Microscaling v1.0) */
    FL_SCALING_NVFP4,   /* NVFP4: blocks of 16 along a row, e4m3 scales under a per-tensor float32 scale
                           (fl_nvfp4_fake_quantize); the recipes scale weights in 16x16 tiles */
    FL_SCALING_COUNT
} fl_scaling;

/* "none", "delayed", "tensor", "row", "1x128", "mx32", "nvfp4"; "?" outside the enum. */
const char *fl_scaling_name(fl_scaling s);

/* The blocking of a scheme for an activation-like tensor (weights of 1x128: FL_BLOCK_128X128). */
fl_block fl_scaling_block(fl_scaling s);

/* Initialise *s (fl_delayed_size(len) bytes).  Returns 0, or -1 for len 0, an unknown algo,
   a format that is not an 8-bit-or-narrower element format, or margin outside [-127, 127]. */
int fl_delayed_init(fl_delayed *s, uint32_t len, fl_amax_algo algo, int margin, fl_format fmt, int pow2);

static inline float fl_delayed_scale(const fl_delayed *s) { return s->scale; }
static inline float fl_delayed_scale_inv(const fl_delayed *s) { return s->scale_inv; }

/* Record the amax of the tensor just quantized with fl_delayed_scale(s): updates the history and
   the scale for the next step (see the header comment). */
void fl_delayed_record(fl_delayed *s, float amax);

/* The history window, oldest first (L entries; slots never written read 0). */
void fl_delayed_history(float *amax, const fl_delayed *s);

/* NULL if s is a valid state occupying exactly nbytes bytes (as loaded from a checkpoint), else a
   one-line description of what is wrong. */
const char *fl_delayed_check(const fl_delayed *s, size_t nbytes);

#endif /* FL_SCALING_H */
