/* activations.h — the element functions of the activation kernels, shared by CUDA and the CPU twins.
 *
 * Everything here is FL_HD (static inline, host and device): fp32 arithmetic with IEEE basic
 * operations only (+ - * /, sqrt and an explicit fma, all correctly rounded on both sides), integer
 * bit operations and no libm.  nvcc builds with --fmad=false and gcc with -ffp-contract=off, so
 * a*b+c is two roundings on both sides; where one rounding is wanted it is written fl_fmaf.  The same
 * source therefore gives the same bits on the CPU and on the GPU: a CPU twin is bit-identical to its
 * kernel by construction (tests/test_gpu_twins.cu checks it).
 *
 * Contents
 *   1. correctly rounded primitives (fl_fmaf, fl_sqrtf, fl_divf, fl_fma_d) that map to the IEEE operation on
 *      each side (device intrinsics with an explicit _rn, host builtins)
 *   2. fl_expf_hd: our own exp, identical on both sides (CUDA expf and glibc expf differ), error
 *      <= 1.2 ulp; measured over every float of [-104, 88.73]: max 1.06 ulp, 99.23% correctly rounded;
 *      fl_exp_normal_hd, its branch-free core on [-87, 0] (same bits), for the SiLU family
 *   3. SiLU / sigmoid / SwiGLU values and derivatives
 *   4. PolyReLU (orders 2..4) and PolyNorm (orders 2..4) pieces
 *   5. Smooth-SwiGLU's scale rule
 *   6. the fixed reduction orders (per-row block reduce and tiled global sums) written once, as the
 *      CPU simulation of the CUDA block structure
 *   7. (CUDA only) device I/O: vector loads, hardware conversions, FL_CUDA_CHECK
 *
 * Notation: u = 2^-24 (unit roundoff of fp32).  Error bounds are stated next to each function;
 * kernels/README.md collects them with their one-line proofs.
 */
#ifndef FL_ACTIVATIONS_H
#define FL_ACTIVATIONS_H

#ifdef __cplusplus
extern "C" { /* the host library's declarations (fl_format_name, ...) have C linkage */
#endif
#include "fl_round.h"
#ifdef __cplusplus
}
#endif

/* ==== 1. correctly rounded primitives ========================================================= */

FL_HD float fl_fmaf(float a, float b, float c)
{
#if defined(__CUDA_ARCH__)
    return __fmaf_rn(a, b, c);
#else
    return __builtin_fmaf(a, b, c); /* vfmadd with -march=native; glibc's fmaf (exact) otherwise */
#endif
}

FL_HD float fl_sqrtf(float x)
{
#if defined(__CUDA_ARCH__)
    return __fsqrt_rn(x);
#else
    return __builtin_sqrtf(x); /* sqrtss: correctly rounded */
#endif
}

FL_HD float fl_divf(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return __fdiv_rn(a, b); /* IEEE division whatever -prec-div says */
#else
    return a / b;
#endif
}

/* a * b + c with one rounding, in double (fl_erff, fl_expf_glibc) */
FL_HD double fl_fma_d(double a, double b, double c)
{
#if defined(__CUDA_ARCH__)
    return __fma_rn(a, b, c);
#else
    return __builtin_fma(a, b, c);
#endif
}

FL_HD int fl_isnanf(float x) { return (fl_f32_bits(x) & 0x7FFFFFFFu) > 0x7F800000u; }
FL_HD float fl_absf(float x) { return fl_f32_from_bits(fl_f32_bits(x) & 0x7FFFFFFFu); }

/* max(a, |b|) with NaN b ignored (fmaxf semantics; a is never NaN): the amax update. */
FL_HD float fl_amax_update(float a, float b)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 1000
    /* One FMNMX, the same value: fmaxf returns the non-NaN operand, and a >= +0 on the device, so no
       +-0 tie can pick a different zero.  (Not on sm_100: there ptxas 13.0 then spills a register in
       the bf16 PolyReLU forward.) */
    return fmaxf(a, fabsf(b));
#else
    const float m = fl_absf(b);
    return (fl_isnanf(b) || !(m > a)) ? a : m;
#endif
}

/* ==== 2. exp ==================================================================================== *
 *
 * fl_expf_hd(x) = e^x in fp32.  Algorithm:
 *   k  = nearest integer to RN(x * log2(e))  (ties to even, via the 1.5*2^23 shifter)
 *   r  = x - k*LN2_HI - k*LN2_LO  (Cody-Waite: LN2_HI = RN(ln 2); the first fma is exact because
 *        x and k*LN2_HI agree to within 2^-24*|k|*..., the result fits 24 bits; the second rounds once)
 *   p  = 1 + (r + r^2 q(r)),  q = 1/2 + r/6 + ... + r^5/5040 (Taylor, degree 7 in all; truncation
 *        error < r^8/8! < 5.3e-9 relative for |r| <= 0.3466, i.e. < 0.05 ulp)
 *   e^x = (p * 2^k1) * 2^k2, k1 = k/2, k2 = k - k1: the first product is exact (p*2^k1 is normal),
 *        the second rounds once, so a subnormal result is rounded once more (<= 0.5 ulp of the
 *        subnormal grid on top).
 * Error, normal results: |rel err| <= (0.5 [1+p] + 0.25 [r] + 0.25 [r^2 q, fma] + 0.05 [Taylor])
 * ulp <= ~1.05 ulp.  Measured against double exp over all 2.24e9 floats of [-104, 88.73]: max
 * 1.059 ulp (x = -0x1.78e2fcp+2), 0.77% not correctly rounded; tests/test_kernels_act.c re-measures
 * every 61st float and the reduction boundaries and asserts <= 1.2 ulp.
 * Specials: NaN -> NaN; x > 0x1.62e42ep+6 (88.7228317, the largest float whose exp is below
 * FLT_MAX's rounding boundary) -> +Inf; x < -104 (e^x < 2^-150: rounds to 0) -> +0. */
#define FL_EXP_LOG2E 0x1.715476p+0f
#define FL_EXP_LN2_HI 0x1.62e430p-1f  /* RN(ln 2) */
#define FL_EXP_LN2_LO -0x1.05c610p-29f /* RN(ln 2 - LN2_HI) */
#define FL_EXP_SHIFTER 0x1.8p+23f     /* 1.5 * 2^23: adding it rounds to an integer */
#define FL_EXP_X_MAX 0x1.62e42ep+6f
#define FL_EXP_X_MIN -104.0f

/* The reduction and polynomial of fl_expf_hd: e^x = p * 2^kf (before the final rounding), for x in
 * [-200, 88.73] (not NaN): kf an integer in [-289, 129], p in [0.70, 1.42] with relative error
 * <= 1.05 ulp of p.  The first fma stays exact down to x = -200: x - kf LN2_HI is a multiple of 2^-24
 * below 0.35 in magnitude (23 bits); kf LN2_LO and the 2-constant ln 2 add < 2^-45 relative. */
/* The same with t = RN(RN(x LOG2E) + SHIFTER) handed out instead of kf = t - SHIFTER: the low bits of t's
   encoding hold kf (t = 1.5 2^23 + kf, |kf| < 2^22), so kf << 23 is fl_f32_bits(t) << 23 mod 2^32. */
FL_HD float fl_exp_reduce_t_hd(float x, float *t_out)
{
    const float t = x * FL_EXP_LOG2E + FL_EXP_SHIFTER; /* two roundings: --fmad=false / no contraction */
    const float kf = t - FL_EXP_SHIFTER;                /* exact: an integer */
    float r = fl_fmaf(-kf, FL_EXP_LN2_HI, x);
    r = fl_fmaf(-kf, FL_EXP_LN2_LO, r);
    float q = 0x1.a01a02p-13f;           /* 1/5040 */
    q = fl_fmaf(q, r, 0x1.6c16c2p-10f);  /* 1/720 */
    q = fl_fmaf(q, r, 0x1.111112p-7f);   /* 1/120 */
    q = fl_fmaf(q, r, 0x1.555556p-5f);   /* 1/24 */
    q = fl_fmaf(q, r, 0x1.555556p-3f);   /* 1/6 */
    q = fl_fmaf(q, r, 0.5f);
    *t_out = t;
    return 1.0f + fl_fmaf(r * r, q, r);
}

FL_HD float fl_exp_reduce_hd(float x, float *kf_out)
{
    float t;
    const float p = fl_exp_reduce_t_hd(x, &t);
    *kf_out = t - FL_EXP_SHIFTER;
    return p;
}

FL_HD float fl_expf_hd(float x)
{
    if (fl_isnanf(x))
        return x + x;
    if (x > FL_EXP_X_MAX)
        return fl_f32_from_bits(0x7F800000u);
    if (x < FL_EXP_X_MIN)
        return 0.0f;
    float kf; /* an integer in [-151, 129] */
    const float p = fl_exp_reduce_hd(x, &kf);
    const int k = (int)kf;
    const int k1 = k / 2;
    return (p * fl_pow2f(k1)) * fl_pow2f(k - k1);
}

/* fl_expf_hd(a) for a in [FL_EXPN_MIN, 0] (not NaN), without its special cases: there e^a > 2^-126
 * (e^-87 = 1.4 * 2^-126 and p * 2^k is within 1.06 ulp of it), so p * 2^k is a normal number, both of
 * fl_expf_hd's products are exact, and adding k to p's exponent field gives the same bits.  The
 * branch-free core of the SiLU family (section 3): a shifter add, two fma for the reduction, seven
 * for the polynomial, one integer shift-add for the scaling. */
#define FL_EXPN_MIN -87.0f
FL_HD float fl_exp_normal_hd(float a)
{
    float t;
    const float p = fl_exp_reduce_t_hd(a, &t);
    return fl_f32_from_bits(fl_f32_bits(p) + (fl_f32_bits(t) << 23));
}

/* ==== 3. SiLU, sigmoid, SwiGLU ================================================================ *
 *
 * One exponential per element, e = exp(-|x|) in (0, 1], d = 1 + e in (1, 2]:
 *   sigmoid(x)   = 1/d (x >= 0),  e/d (x < 0);   sigmoid(-x) the other one (no 1 - s cancellation)
 *   silu(x)      = x/d (x >= 0),  (x*e)/d (x < 0)
 *   silu'(x)     = s * (1 + x*sigmoid(-x))       with the bracket one fma
 * Error (fp32, normal results; an ulp of e is at most 2u relative, so e has relative error <= 2.4u):
 *   d = 1 + e:        e / d <= 1/2, so 1.2u + u                               = 2.2u
 *   sigmoid:          1/d: 2.2u + u = 3.2u;  e/d: 2.4u + 2.2u + u             < 6u
 *   silu:             x/d: 3.2u;  (x e)/d: 2.4u + u + 2.2u + u                < 7u
 *   swiglu:           silu * u, one more rounding                             < 8u
 *   silu' = s t, t = fma(x, sm, 1): |err| <= s(|x sm| 5.6u + u|t|) + |s t| (5.6u + u) <= 14u M,
 *                     M = s (1 + |x| sigmoid(-x))  (t cancels near x = -1.2785, where silu' = 0, so
 *                     the bound is absolute, relative to M)
 * tests/test_kernels_act.c asserts these on 2.25e6 inputs over [-120, 120]; the measured maxima are
 * 2.9u, 3.2u, 3.7u and 4.1u M.
 * Tail x < -80 (FL_SILU_TAIL_X; e^x < 2^-115, so 1 + e^x rounds to 1): e^x becomes an fp32 subnormal
 * below -87.3 and 0 below -104, while silu(x) * w is still a normal number for |w| up to 2^128 down to
 * x ~ -170 (and nonzero down to -198).  So silu(x), silu'(x) and their products with a second operand
 * w (SwiGLU's u, the backward's dy) never form e^x or silu(x) there: with e^xc = p 2^k from
 * fl_exp_reduce_hd (xc = max(x, -200)), c = xc 2^-9 (silu) or (xc + 1) 2^-9 (silu' = e^x (1 + x) to
 * 2^-114 relative), both exact,
 *     silu(x) w = RN(RN(RN(c p) w) 2^(k+9))    (fl_silu_tail_times: one final scaling)
 * |c p| < 0.56, so RN(c p) w cannot overflow (|w| <= FLT_MAX < 2^128); if RN(c p) w underflows the
 * result is below 2^-232 and rounds to a zero of the right sign anyway.  The scaling is one rounding:
 * by 2^(k1+9), then by 2^(k-k1), k1 = k/2 in [-144, -57] (as fl_expf_hd), both exponents in [-145, -48];
 * the first product is exact unless it falls below 2^-126, and then the result is below 2^-184 and
 * rounds to a zero of the right sign anyway; the second rounds once.  Clamping x at -200 is harmless: |silu(-200)| 2^128 < 2^-152 rounds to 0 and the
 * sign is kept.  Error: p 1.05 ulp (2.1u) + c p (u) + w (u) < 4.2u relative before the final rounding
 * (the final rounding: half an ulp of the fp32 result, 2^-150 absolute where it is subnormal), so the
 * fp32 bounds above hold (< 7u / 8u / 14u M) and results that are bf16 subnormals are still correct to
 * 2^-150.  Specials: x = -Inf takes c = -0 (silu(-Inf) = silu'(-Inf) = -0, so -0 * Inf = NaN as in
 * the reference); finite x < -80 with w = +-Inf gives -+Inf (silu(x) < 0 and silu'(x) < 0 there, the
 * exact product), where forming silu(x) first gave 0 * Inf = NaN below x = -104.
 * Specials: silu(+-Inf) = +Inf, -0; silu'(+Inf) = 1, silu'(-Inf) = -0; NaN propagates. */
#define FL_SILU_TAIL_X -80.0f
#define FL_SILU_TAIL_XMIN -200.0f
typedef struct {
    float s;  /* sigmoid(x) */
    float sm; /* sigmoid(-x) = 1 - sigmoid(x) */
    float e;  /* exp(-|x|) */
    float d;  /* 1 + e */
} fl_sigmoid_parts;

FL_HD fl_sigmoid_parts fl_sigmoid_parts_f32(float x)
{
    fl_sigmoid_parts p;
    p.e = fl_expf_hd(-fl_absf(x));
    p.d = 1.0f + p.e;
    const float one_over_d = fl_divf(1.0f, p.d);
    const float e_over_d = fl_divf(p.e, p.d);
    const int neg = x < 0.0f;
    p.s = neg ? e_over_d : one_over_d;
    p.sm = neg ? one_over_d : e_over_d;
    return p;
}

FL_HD float fl_sigmoid_f32(float x) { return fl_sigmoid_parts_f32(x).s; }

/* The tail's final step: RN(RN(RN(c p) w) 2^(kf + 9)), the scaling rounded once (see above).  Defined
   for any kf in [-289, 0] (the fp32 fast path of kernels/swiglu.c evaluates it for every element and
   selects; its 2^(k - k1) is fl_expf_hd's second factor). */
FL_HD float fl_silu_tail_scale(float c, float p, float kf, float w)
{
    const float t = (c * p) * w;
    const int k = (int)kf;
    const int k1 = k / 2;
    return (t * fl_pow2f(k1 + 9)) * fl_pow2f(k - k1);
}

/* The tail's exp, e^xc = p 2^kf with xc = max(x, FL_SILU_TAIL_XMIN), and c of silu (grad = 0) or
   silu' (grad = 1); x < FL_SILU_TAIL_X or -Inf. */
FL_HD float fl_silu_tail_c(float x, int grad)
{
    const float xc = x >= FL_SILU_TAIL_XMIN ? x : FL_SILU_TAIL_XMIN;
    const float c = (grad ? xc + 1.0f : xc) * 0x1p-9f; /* both exact */
    return x == -fl_f32_from_bits(0x7F800000u) ? -0.0f : c;
}

FL_HD float fl_silu_tail_p(float x, float *kf)
{
    return fl_exp_reduce_hd(x >= FL_SILU_TAIL_XMIN ? x : FL_SILU_TAIL_XMIN, kf);
}

/* RN(silu(x) w) (grad = 0) or RN(silu'(x) w) (grad = 1) for x < FL_SILU_TAIL_X. */
FL_HD float fl_silu_tail_times(float x, float w, int grad)
{
    float kf;
    const float p = fl_silu_tail_p(x, &kf);
    return fl_silu_tail_scale(fl_silu_tail_c(x, grad), p, kf, w);
}

/* The SiLU family's e = exp(-|x|) for x >= FL_SILU_TAIL_X, +Inf or NaN, branch-free: fl_exp_normal_hd
   where -|x| >= FL_EXPN_MIN, else 0.  Below FL_EXPN_MIN (x > 87; x < -80 is the tail's) fl_expf_hd
   gives a subnormal or 0 instead, and every use below gives the same bits with 0: d = 1 + e = 1 either
   way (e < 2^-25), so x / d, 1 / d and the bracket fma(x, e / d, 1) = 1 (|x e^-|x|| < 2^-117) do not
   change.  NaN x gives e = 0 (any value would do: the results are x / d or NaN arithmetic on x). */
FL_HD float fl_silu_e(float x)
{
    const float a = -fl_absf(x);
    const int in = a >= FL_EXPN_MIN;
    const float e = fl_exp_normal_hd(in ? a : FL_EXPN_MIN);
    return in ? e : 0.0f;
}

/* silu(x) from e and d = 1 + e: x / d for x >= 0 or NaN, (x e) / d below; the numerator is selected
   before the one division.  A NaN x takes x e: NaN times a number is x's NaN quieted, which the
   division gives too, so no NaN test is needed. */
FL_HD float fl_silu_ed(float x, float e, float d)
{
    return fl_divf(x >= 0.0f ? x : x * e, d);
}

/* silu'(x) from e, d: s (1 + x sm) with s = sigmoid(x), sm = sigmoid(-x) (1 / d and e / d, selected
   by the sign of x as fl_sigmoid_parts_f32 does); silu'(+Inf) = 1. */
FL_HD float fl_silu_grad_ed(float x, float e, float d)
{
    const float one_over_d = fl_divf(1.0f, d), e_over_d = fl_divf(e, d);
    const int neg = x < 0.0f;
    const float s = neg ? e_over_d : one_over_d, sm = neg ? one_over_d : e_over_d;
    const float g = s * fl_fmaf(x, sm, 1.0f);
    return x == fl_f32_from_bits(0x7F800000u) ? 1.0f : g;
}

/* silu and silu' outside the tail: x >= FL_SILU_TAIL_X, +Inf or NaN.  Bits as fl_sigmoid_parts_f32's
   formulas with fl_expf_hd (see fl_silu_e); no branch. */
FL_HD float fl_silu_body_f32(float x)
{
    /* silu alone needs no zero below FL_EXPN_MIN: there x > 87, d = 1 + e^-87 = 1 and the numerator
       is x, as with fl_silu_e's 0.  So -|x| is clamped (one max) and nothing selected after. */
    const float a = -fl_absf(x);
    const float e = fl_exp_normal_hd(a >= FL_EXPN_MIN ? a : FL_EXPN_MIN);
    return fl_silu_ed(x, e, 1.0f + e);
}

FL_HD float fl_silu_grad_body_f32(float x)
{
    const float e = fl_silu_e(x);
    return fl_silu_grad_ed(x, e, 1.0f + e);
}

FL_HD float fl_silu_f32(float x)
{
    return x < FL_SILU_TAIL_X ? fl_silu_tail_times(x, 1.0f, 0) : fl_silu_body_f32(x);
}

FL_HD float fl_silu_grad_f32(float x)
{
    return x < FL_SILU_TAIL_X ? fl_silu_tail_times(x, 1.0f, 1) : fl_silu_grad_body_f32(x);
}

/* SwiGLU forward: silu(g) * u (one more rounding: relative error < 8u); for g < FL_SILU_TAIL_X the
   product is formed before the exponent is applied (fl_silu_tail_times), so neither an underflowed
   silu(g) nor 0 * Inf spoils it. */
FL_HD float fl_swiglu_f32(float g, float u)
{
    return g < FL_SILU_TAIL_X ? fl_silu_tail_times(g, u, 0) : fl_silu_body_f32(g) * u;
}

/* SwiGLU backward for one element: dg = (dy*u)*silu'(g), du = dy*silu(g).
   With dy = 1 these are the partial derivatives (u * silu'(g), silu(g)) rounded once more.
   g < FL_SILU_TAIL_X: the same products through the tail (one exp for both). */
FL_HD void fl_swiglu_grad_f32(float *dg, float *du, float g, float u, float dy)
{
    if (g < FL_SILU_TAIL_X) {
        float kf;
        const float p = fl_silu_tail_p(g, &kf);
        *dg = fl_silu_tail_scale(fl_silu_tail_c(g, 1), p, kf, dy * u);
        *du = fl_silu_tail_scale(fl_silu_tail_c(g, 0), p, kf, dy);
        return;
    }
    const float e = fl_silu_e(g), d = 1.0f + e; /* one exp for both */
    *dg = (dy * u) * fl_silu_grad_ed(g, e, d);
    *du = dy * fl_silu_ed(g, e, d);
}

/* ==== 4. PolyReLU and PolyNorm =================================================================== */

/* FL_POLY_MAX_ORDER: numerics/fl_base.h */

/* Coefficients a[0..order] of sum_i a_i t^i (PolyReLU: t = relu(x); PolyNorm: t_i = N(x^i)).
   order in [2, 4].  Default (the paper's): a_0 = 0, a_i = RN32(1/order). */
typedef struct {
    int order;
    float a[FL_POLY_MAX_ORDER + 1];
} fl_poly_coef;

FL_HD float fl_relu_f32(float x) { return x > 0.0f ? x : (x == x ? 0.0f : x); }

/* PolyReLU_r(x) = sum_{i=0..r} a_i relu(x)^i by Horner with fma: one rounding per step, so
   |err| <= gamma_r * sum |a_i| relu(x)^i, gamma_r = r u / (1 - r u)  (relative <= 4.01u when the
   coefficients are nonnegative, e.g. the paper's). */
FL_HD float fl_polyrelu_f32(const fl_poly_coef *c, float x)
{
    const float t = fl_relu_f32(x);
    float y = 0.0f;
    for (int i = FL_POLY_MAX_ORDER; i >= 0; i--) /* constant trip count: unrolled, registers only */
        if (i <= c->order)
            y = i == c->order ? c->a[i] : fl_fmaf(y, t, c->a[i]);
    return y;
}

/* d PolyReLU / dx = sum_{i=1..r} i a_i relu(x)^(i-1) for x > 0, 0 for x <= 0 (relu'(0) = 0 as in
   PyTorch), NaN for NaN.  b_i = RN(i a_i) is one rounding (exact for i = 1, 2, 4), then Horner:
   |err| <= gamma_r * sum i |a_i| x^(i-1). */
FL_HD float fl_polyrelu_grad_f32(const fl_poly_coef *c, float x)
{
    if (fl_isnanf(x))
        return x;
    if (!(x > 0.0f))
        return 0.0f;
    float y = 0.0f;
    for (int i = FL_POLY_MAX_ORDER; i >= 1; i--)
        if (i <= c->order)
            y = i == c->order ? (float)i * c->a[i] : fl_fmaf(y, x, (float)i * c->a[i]);
    return y;
}

/* The powers u_1..u_r of x as every PolyReLU / PolyNorm pass computes them:
   u1 = x, u2 = x*x, u3 = u2*x, u4 = u2*u2 (relative errors 0, u, 2u, 3u). */
FL_HD void fl_poly_powers(float *pw, int order, float x)
{
    pw[1] = x;
    pw[2] = x * x;
    if (order >= 3)
        pw[3] = pw[2] * x;
    if (order >= 4)
        pw[4] = pw[2] * pw[2];
}

/* The per-element terms of PolyReLU's coefficient gradients: t_0 = dy, t_k = dy * relu(x)^k (the
   powers as fl_poly_powers), k = 1..order. */
FL_HD void fl_polyrelu_coef_terms(float *t, int order, float x, float dy)
{
    float pw[FL_POLY_MAX_ORDER + 1];
    fl_poly_powers(pw, order, fl_relu_f32(x));
    t[0] = dy;
    for (int k = 1; k <= FL_POLY_MAX_ORDER; k++)
        if (k <= order)
            t[k] = dy * pw[k];
}

/* Per-row constants of PolyNorm from the row sums S_i = sum_j u_i,j^2 (reduced in the fixed order
   below) and the row length H:  r_i = 1 / sqrt(S_i / H + eps) (four roundings). */
FL_HD float fl_polynorm_rinv(float S, float H, float eps)
{
    return fl_divf(1.0f, fl_sqrtf(fl_divf(S, H) + eps));
}

/* Forward output from the per-row factors c_i = RN(a_i r_i):
   y = a0 + c1 u1 + c2 u2 + ... (fma chain, one rounding per term). */
FL_HD float fl_polynorm_out_f32(const float *cr, float a0, int order, float x)
{
    float pw[FL_POLY_MAX_ORDER + 1];
    fl_poly_powers(pw, order, x);
    float y = a0;
    for (int i = 1; i <= FL_POLY_MAX_ORDER; i++)
        if (i <= order)
            y = fl_fmaf(cr[i], pw[i], y);
    return y;
}

/* Backward for one element.  With r_i as above, D_i = sum_j dy_j u_i,j (fixed-order row sum) and
   w_i = RN(RN(RN(r_i r_i) r_i) RN(D_i / H)):
       dx = sum_i b_i x^(i-1) (r_i dy - w_i u_i),   b_i = RN(i a_i)
   i.e. the VJP of N(u) = u r through u = x^i: dN_j/du_l = r d_jl - u_j u_l r^3 / H.
   The bracket is one fma after RN(r_i dy); terms accumulate with fma. */
FL_HD float fl_polynorm_grad_f32(const float *rinv, const float *w, const float *b, int order,
                                 float x, float dy)
{
    float pw[FL_POLY_MAX_ORDER + 1];
    fl_poly_powers(pw, order, x);
    float dx = 0.0f;
    for (int i = 1; i <= FL_POLY_MAX_ORDER; i++) {
        if (i > order)
            break;
        const float g = fl_fmaf(-w[i], pw[i], rinv[i] * dy);
        const float v = i == 1 ? 1.0f : pw[i - 1];
        dx = fl_fmaf(b[i], v * g, dx);
    }
    return dx;
}

/* One element's contribution to the row sums, in the thread's running order:
   forward S_i += u_i^2 (i = 1..order); backward also D_0 += dy, D_i += dy u_i. */
FL_HD void fl_polynorm_fwd_accum(float *S, int order, float x)
{
    float pw[FL_POLY_MAX_ORDER + 1];
    fl_poly_powers(pw, order, x);
    for (int i = 1; i <= FL_POLY_MAX_ORDER; i++)
        if (i <= order)
            S[i] = S[i] + pw[i] * pw[i];
}

FL_HD void fl_polynorm_bwd_accum(float *S, float *D, int order, float x, float dy)
{
    float pw[FL_POLY_MAX_ORDER + 1];
    fl_poly_powers(pw, order, x);
    D[0] = D[0] + dy;
    for (int i = 1; i <= FL_POLY_MAX_ORDER; i++) {
        if (i > order)
            break;
        S[i] = S[i] + pw[i] * pw[i];
        D[i] = D[i] + dy * pw[i];
    }
}

/* Per-row constants.  Forward: cr_i = RN(a_i r_i).  Backward: r_i, w_i, b_i (see
   fl_polynorm_grad_f32) and the row's coefficient-gradient partials pa_0 = D_0, pa_i = RN(r_i D_i). */
FL_HD void fl_polynorm_fwd_consts(float *cr, const float *S, const fl_poly_coef *c, float Hf, float eps)
{
    for (int i = 1; i <= FL_POLY_MAX_ORDER; i++)
        if (i <= c->order)
            cr[i] = c->a[i] * fl_polynorm_rinv(S[i], Hf, eps);
}

FL_HD void fl_polynorm_bwd_consts(float *r, float *w, float *b, float *pa, const float *S,
                                  const float *D, const fl_poly_coef *c, float Hf, float eps)
{
    pa[0] = D[0];
    for (int i = 1; i <= FL_POLY_MAX_ORDER; i++) {
        if (i > c->order)
            break;
        r[i] = fl_polynorm_rinv(S[i], Hf, eps);
        w[i] = ((r[i] * r[i]) * r[i]) * fl_divf(D[i], Hf);
        b[i] = (float)i * c->a[i];
        pa[i] = r[i] * D[i];
    }
}

/* ==== 5. Smooth-SwiGLU scales ================================================================= *
 *
 * The smoothing scale of one channel (or token) from the amax of its SwiGLU outputs: the power of two
 * s = 2^-ceil(log2 amax), so that amax * s lies in (1/2, 1] and multiplying by s and undoing it with
 * 1/s are exact (no rounding outside the fp32 range).  amax 0, NaN or Inf: s = 1.  The exponent is
 * clamped so that s is a normal float: s in [2^-126, 2^126]. */
FL_HD float fl_smooth_scale_f32(float amax)
{
    const uint32_t u = fl_f32_bits(amax);
    if (!(amax > 0.0f) || (u & 0x7F800000u) == 0x7F800000u)
        return 1.0f;
    int e; /* floor(log2 amax) */
    uint32_t frac;
    if (u >> 23) {
        e = (int)(u >> 23) - 127;
        frac = u & 0x7FFFFFu;
    } else {
        int t = 0;
        for (uint32_t v = u; v >>= 1;)
            t++;
        e = t - 149;
        frac = u & ((1u << t) - 1u);
    }
    int c = e + (frac != 0); /* ceil(log2 amax) */
    if (c > 126)
        c = 126;
    if (c < -126)
        c = -126;
    return fl_pow2f(-c);
}

/* ==== 6. fixed reduction orders =================================================================== *
 *
 * Block sums (PolyNorm's row sums, the coefficient gradients) are defined by the CUDA block
 * structure and simulated literally by the CPU twins:
 *   - a block has FL_RED_THREADS = 256 threads (8 warps of 32);
 *   - the data is cut into vectors of FL_VEC = 16 consecutive elements; thread t takes vectors
 *     t, t + 256, t + 512, ... of its range and adds their elements one by one, ascending, into a
 *     running sum that starts at +0 (a vector cut short by the end of the range contributes only its
 *     elements inside the range);
 *   - the 256 thread sums are combined by fl_tree_sum: inside each warp the pairwise tree
 *     v[i] += v[i + off] for off = 16, 8, 4, 2, 1 (the CUDA butterfly __shfl_xor_sync(.., off) gives
 *     lane i the same bits: a + b = b + a exactly), then the same tree over the 8 warp sums.
 * Error of such a sum of n terms: |err| <= (L + 8) u sum |terms| (to first order), L = the longest
 * per-thread run = 16 * ceil(n / 4096).
 * Global sums (PolyReLU's coefficient gradients) cut the tensor into tiles of FL_TILE = 4 * 16 * 256
 * elements (each thread 4 vectors), reduce each tile as above, and reduce the tile partials with a
 * second block: thread t adds tiles t, t + 256, ... in order, then fl_tree_sum. */
#define FL_RED_THREADS 256
#define FL_VEC 16
#define FL_TILE_ITERS 4
#define FL_TILE (FL_TILE_ITERS * FL_VEC * FL_RED_THREADS)

/* v[0..n), n a power of two <= 32: the pairwise halving tree; returns the sum (v is overwritten). */
FL_HD float fl_tree_sum_pow2(float *v, int n)
{
    for (int off = n / 2; off >= 1; off /= 2)
        for (int i = 0; i < off; i++)
            v[i] = v[i] + v[i + off];
    return v[0];
}

/* The block's tree over FL_RED_THREADS thread sums (v is overwritten). */
FL_HD float fl_tree_sum(float *v)
{
    float w[FL_RED_THREADS / 32];
    for (int k = 0; k < FL_RED_THREADS / 32; k++)
        w[k] = fl_tree_sum_pow2(v + 32 * k, 32);
    return fl_tree_sum_pow2(w, FL_RED_THREADS / 32);
}

/* ==== 7. CUDA device I/O ======================================================================= */
#if defined(__CUDACC__)
#include <cuda_runtime.h>
#include <initializer_list>
#include <stdio.h>

#include "cuda_check.h" /* FL_CUDA_CHECK, FL_REQUIRE */

/* Precondition failures of a launcher: print and return -1. */
#define FL_LAUNCH_REQUIRE(cond, ...) FL_REQUIRE("", cond, #cond, __VA_ARGS__)

/* Storage types.  Each has: bytes per element; load of one element (decode, exact); store of two
 * elements (the hardware's paired conversion).  Decode of FP8 uses the hardware cvt to f16x2 (exact),
 * encode uses cvt.rn.satfinite.{e4m3,e5m2}x2.f32 / cvt.rn.bf16x2.f32 on sm_89+ -- equal to
 * fl_encode_f32_bits(RNE, SATURATE) / (RNE, NOSATURATE for bf16), checked exhaustively against
 * cuda_fp8.h by tests/test_nv_oracle. */
struct fl_io_bf16 {
    typedef uint16_t storage;
    static constexpr fl_format fmt = FL_FMT_BF16;
    static __device__ __forceinline__ float load(storage c) { return __uint_as_float((uint32_t)c << 16); }
    static __device__ __forceinline__ uint32_t store2(float lo, float hi)
    {
        uint32_t r;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
        return r; /* lo in bits 0..15, hi in 16..31 */
    }
};

/* The FP8 formats: one byte each, stored in pairs by cvt.rn.satfinite.{e4m3,e5m2}x2.f32. */
template <fl_format F> struct fl_io_fp8 {
    typedef uint8_t storage;
    static constexpr fl_format fmt = F;
    static __device__ __forceinline__ uint32_t store2(float lo, float hi)
    {
        unsigned short r;
        if constexpr (F == FL_FMT_E4M3)
            asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
        else
            asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
        return r; /* lo in bits 0..7, hi in 8..15 */
    }
};

struct fl_io_e4m3 : fl_io_fp8<FL_FMT_E4M3> {
    static __device__ __forceinline__ float load(storage c)
    {
        unsigned short h;
        asm("{\n\t.reg .b32 t;\n\tcvt.rn.f16x2.e4m3x2 t, %1;\n\tmov.b32 {%0, _}, t;\n\t}"
            : "=h"(h) : "h"((unsigned short)c));
        float f;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
        return f;
    }
};

struct fl_io_e5m2 : fl_io_fp8<FL_FMT_E5M2> {
    static __device__ __forceinline__ float load(storage c)
    {
        /* e5m2 is the top byte of an fp16: exact */
        float f;
        asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"((unsigned short)((unsigned short)c << 8)));
        return f;
    }
};

/* float32, for the GPU training step's activations (its twins take float32 views): load and store are
   the value itself.  Not in the dispatch sets below; the launchers that take it pick it when every
   operand is float32 (fl_io_all_f32). */
struct fl_io_f32 {
    typedef float storage;
    static constexpr fl_format fmt = FL_FMT_FP32;
    static __device__ __forceinline__ float load(storage c) { return c; }
};

/* A vector of FL_VEC = 16 elements of storage T: 16 bytes (fp8), 2 x 16 bytes (bf16) or 4 x 16 (fp32). */
template <class IO> struct fl_vec {
    static constexpr int bytes = FL_VEC * (int)sizeof(typename IO::storage);
    static constexpr int words = bytes / 16; /* 16-byte words */
};

/* Load FL_VEC elements starting at p (16-byte aligned) as floats times mul. */
template <class IO>
__device__ __forceinline__ void fl_load_vec(float *f, const typename IO::storage *p, float mul)
{
    const uint4 *q = reinterpret_cast<const uint4 *>(p);
#pragma unroll
    for (int w = 0; w < fl_vec<IO>::words; w++) {
        const uint4 v = __ldg(q + w);
        const typename IO::storage *s = reinterpret_cast<const typename IO::storage *>(&v);
        constexpr int per = 16 / (int)sizeof(typename IO::storage);
#pragma unroll
        for (int j = 0; j < per; j++)
            f[w * per + j] = IO::load(s[j]) * mul;
    }
}

/* Store FL_VEC floats times mul at p (16-byte aligned). */
template <class IO>
__device__ __forceinline__ void fl_store_vec(typename IO::storage *p, const float *f, float mul)
{
    uint4 *q = reinterpret_cast<uint4 *>(p);
#pragma unroll
    for (int w = 0; w < fl_vec<IO>::words; w++) {
        uint4 v;
        uint32_t *vw = reinterpret_cast<uint32_t *>(&v);
        constexpr int per = 16 / (int)sizeof(typename IO::storage);
        if constexpr (sizeof(typename IO::storage) == 4) {
#pragma unroll
            for (int j = 0; j < 4; j++)
                vw[j] = __float_as_uint(f[w * per + j] * mul);
        } else if constexpr (sizeof(typename IO::storage) == 2) {
#pragma unroll
            for (int j = 0; j < 4; j++)
                vw[j] = IO::store2(f[w * per + 2 * j] * mul, f[w * per + 2 * j + 1] * mul);
        } else {
#pragma unroll
            for (int j = 0; j < 4; j++)
                vw[j] = IO::store2(f[4 * j] * mul, f[4 * j + 1] * mul) |
                        (IO::store2(f[4 * j + 2] * mul, f[4 * j + 3] * mul) << 16);
        }
        q[w] = v;
    }
}

/* One element, for tails and unaligned data. */
template <class IO>
__device__ __forceinline__ void fl_store_one(typename IO::storage *p, float f, float mul)
{
    if constexpr (sizeof(typename IO::storage) == 4)
        *p = f * mul;
    else
        *p = (typename IO::storage)(IO::store2(f * mul, 0.0f) & (sizeof(typename IO::storage) == 2 ? 0xFFFFu : 0xFFu));
}

__device__ __forceinline__ int fl_aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* The block's fixed-order sum (section 6): warp butterfly, then the tree over the warp sums.
   Every thread gets the total.  sh: FL_RED_THREADS / 32 floats of shared memory. */
__device__ __forceinline__ float fl_block_sum(float v, float *sh)
{
#pragma unroll
    for (int off = 16; off >= 1; off /= 2)
        v = v + __shfl_xor_sync(0xFFFFFFFFu, v, off);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads(); /* sh may be in use by a previous call */
    if (lane == 0)
        sh[warp] = v;
    __syncthreads();
    float w = lane < FL_RED_THREADS / 32 ? sh[lane] : 0.0f;
#pragma unroll
    for (int off = FL_RED_THREADS / 64; off >= 1; off /= 2)
        w = w + __shfl_xor_sync(0xFFFFFFFFu, w, off); /* lanes < 8 combine only among themselves */
    return __shfl_sync(0xFFFFFFFFu, w, 0);
}

#define FL_RED_WARPS (FL_RED_THREADS / 32)
/* fl_block_sum of NV values at once, with one pair of barriers; every thread gets the totals in v.
   sh: NV * FL_RED_WARPS floats of shared memory.  Each value's additions are fl_block_sum's: the warp
   butterfly, then the 8 warp sums of value k0 + g sit in lanes 8g .. 8g + 7 and combine by xor 4, 2, 1,
   which stays inside the group, so lane 8g + i adds what lane i adds in fl_block_sum; everybody takes
   lane 8g's result (fl_block_sum: lane 0's).  Sharing the barriers adds, removes or reorders nothing. */
template <int NV>
__device__ __forceinline__ void fl_block_sums(float *v, float *sh)
{
#pragma unroll
    for (int k = 0; k < NV; k++)
#pragma unroll
        for (int off = 16; off >= 1; off /= 2)
            v[k] = v[k] + __shfl_xor_sync(0xFFFFFFFFu, v[k], off);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads(); /* sh may be in use by a previous call */
    if (lane == 0)
#pragma unroll
        for (int k = 0; k < NV; k++)
            sh[k * FL_RED_WARPS + warp] = v[k];
    __syncthreads();
    constexpr int G = 32 / FL_RED_WARPS; /* values per round: lanes 8g .. 8g + 7 hold value k0 + g */
#pragma unroll
    for (int k0 = 0; k0 < NV; k0 += G) {
        /* lane = 8 g + i reads warp i's sum of value k0 + g: sh[(k0 + g) * 8 + i] = sh[k0 * 8 + lane] */
        float w = k0 * FL_RED_WARPS + lane < NV * FL_RED_WARPS ? sh[k0 * FL_RED_WARPS + lane] : 0.0f;
#pragma unroll
        for (int off = FL_RED_WARPS / 2; off >= 1; off /= 2)
            w = w + __shfl_xor_sync(0xFFFFFFFFu, w, off);
#pragma unroll
        for (int g = 0; g < G; g++)
            if (k0 + g < NV)
                v[k0 + g] = __shfl_sync(0xFFFFFFFFu, w, g * FL_RED_WARPS);
    }
}

/* The block's amax (order-free: max is exact), NaN ignored; every thread gets it. */
__device__ __forceinline__ float fl_block_amax(float v, float *sh)
{
#pragma unroll
    for (int off = 16; off >= 1; off /= 2)
        v = fl_amax_update(v, __shfl_xor_sync(0xFFFFFFFFu, v, off));
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0)
        sh[warp] = v;
    __syncthreads();
    float w = lane < (int)(blockDim.x >> 5) ? sh[lane] : 0.0f;
#pragma unroll
    for (int off = 16; off >= 1; off /= 2)
        w = fl_amax_update(w, __shfl_xor_sync(0xFFFFFFFFu, w, off));
    return __shfl_sync(0xFFFFFFFFu, w, 0);
}

/* Publish a block's amax (>= 0, not NaN): the bits of nonnegative floats order like integers. */
__device__ __forceinline__ void fl_atomic_amax(float *amax, float v)
{
    if (v > 0.0f)
        atomicMax(reinterpret_cast<unsigned int *>(amax), __float_as_uint(v));
}

/* Fold the threads' amaxes v into *amax (NULL: nothing).  Every thread of the block calls it. */
__device__ __forceinline__ void fl_block_amax_publish(float *amax, float v, float *sh)
{
    if (!amax)
        return;
    const float m = fl_block_amax(v, sh);
    if (threadIdx.x == 0)
        fl_atomic_amax(amax, m);
}

/* The final reduction of K interleaved partial arrays (ws[m * K + k], m < count) by one block, in the
   order of fl_partials_sum_order: thread t adds partials t, t + 256, ..., then the block tree. */
static __global__ void __launch_bounds__(FL_RED_THREADS)
fl_partials_sum_kernel(float *__restrict__ out, const float *__restrict__ ws, size_t count, int K)
{
    __shared__ float sh[FL_RED_THREADS / 32];
    for (int k = 0; k < K; k++) {
        float a = 0.0f;
        for (size_t m = threadIdx.x; m < count; m += FL_RED_THREADS)
            a = a + ws[m * K + k];
        const float tot = fl_block_sum(a, sh);
        if (threadIdx.x == 0)
            out[k] = tot;
    }
}

/* An unused operand slot of fl_ew_kernel (never loaded or stored). */
struct fl_io_none {
    typedef uint8_t storage;
    static constexpr fl_format fmt = FL_FMT_COUNT;
    static __device__ __forceinline__ float load(storage) { return 0.0f; }
    static __device__ __forceinline__ uint32_t store2(float, float) { return 0u; }
};

/* Operands of the generic elementwise kernel.  Element i of input k is load(in[k][i]) * in_mul[k]
   (in_mul: device pointer to scale_inv, NULL = 1); output k stores v * out_mul[k] (the FP8 scale,
   NULL = 1; bf16 outputs pass NULL) and folds |v| into *amax[k] (NULL: no amax). */
struct fl_ew_args {
    const void *in[3];
    const float *in_mul[3];
    void *out[2];
    const float *out_mul[2];
    float *amax[2];
    size_t n;
    int vec_ok; /* every pointer 16-byte aligned: full vectors use 16-byte accesses */
};

/* Element-function kernel: Op::apply(i, in, out, p) computes the outputs of element i from its inputs
   (Op::n_in inputs, Op::n_out outputs).  Thread layout: grid-stride over groups of fl_ew_group<...>
   vectors of FL_VEC elements: two when the one input is one byte wide, so that a thread has 32 bytes
   of loads in flight as with a bf16 input or two FP8 inputs (measured on an H100: PolyReLU e4m3 -> bf16
   from 76% to 89% of a copy's bandwidth; with two FP8 inputs the doubled group took 95-128 registers
   and halved the resident threads); one otherwise.  Kernels of one input and one output are compiled
   for 4 resident blocks (64 registers).  A full group with aligned operands moves
   through 16-byte loads/stores, anything else element by element (the arithmetic is the same either
   way, and the amax is a maximum, so the layout changes no bit). */
template <class I0, class I1, class I2, int n_in> struct fl_ew_group {
    static constexpr int narrow = n_in == 1 && sizeof(typename I0::storage) == 1;
    static constexpr int vecs = narrow ? 2 : 1;
    static constexpr int elems = vecs * FL_VEC;
};

template <class Op, class I0, class I1, class I2, class O0, class O1>
__global__ void __launch_bounds__(FL_RED_THREADS, Op::n_in + Op::n_out <= 2 ? 4 : 1) fl_ew_kernel(fl_ew_args a, typename Op::params p)
{
    typedef fl_ew_group<I0, I1, I2, Op::n_in> grp;
    __shared__ float sh[FL_RED_THREADS / 32];
    const float m0 = a.in_mul[0] ? *a.in_mul[0] : 1.0f;
    const float m1 = a.in_mul[1] ? *a.in_mul[1] : 1.0f;
    const float m2 = a.in_mul[2] ? *a.in_mul[2] : 1.0f;
    const float s0 = a.out_mul[0] ? *a.out_mul[0] : 1.0f;
    const float s1 = a.out_mul[1] ? *a.out_mul[1] : 1.0f;
    const typename I0::storage *x0 = (const typename I0::storage *)a.in[0];
    const typename I1::storage *x1 = (const typename I1::storage *)a.in[1];
    const typename I2::storage *x2 = (const typename I2::storage *)a.in[2];
    typename O0::storage *y0 = (typename O0::storage *)a.out[0];
    typename O1::storage *y1 = (typename O1::storage *)a.out[1];
    float amax0 = 0.0f, amax1 = 0.0f;
    /* A full group; called with literal 1s when every multiplier is 1 (bf16 operands, unscaled FP8),
       so that the compiler drops those multiplications: x * 1 = x, and a NaN, quieted or not, is
       stored as the format's NaN either way. */
    auto group = [&](size_t base, float k0, float k1, float k2, float t0, float t1) {
        float in[3][grp::elems], out[2][grp::elems];
#pragma unroll
        for (int w = 0; w < grp::vecs; w++) {
            fl_load_vec<I0>(in[0] + w * FL_VEC, x0 + base + w * FL_VEC, k0);
            if (Op::n_in > 1)
                fl_load_vec<I1>(in[1] + w * FL_VEC, x1 + base + w * FL_VEC, k1);
            if (Op::n_in > 2)
                fl_load_vec<I2>(in[2] + w * FL_VEC, x2 + base + w * FL_VEC, k2);
        }
#pragma unroll
        for (int j = 0; j < grp::elems; j++) {
            const float e[3] = { in[0][j], Op::n_in > 1 ? in[1][j] : 0.0f, Op::n_in > 2 ? in[2][j] : 0.0f };
            float o[2];
            Op::apply(base + j, e, o, p);
            out[0][j] = o[0];
            out[1][j] = o[1];
            amax0 = fl_amax_update(amax0, o[0]);
            amax1 = fl_amax_update(amax1, o[1]);
        }
#pragma unroll
        for (int w = 0; w < grp::vecs; w++) {
            fl_store_vec<O0>(y0 + base + w * FL_VEC, out[0] + w * FL_VEC, t0);
            if (Op::n_out > 1)
                fl_store_vec<O1>(y1 + base + w * FL_VEC, out[1] + w * FL_VEC, t1);
        }
    };
    const int unit = m0 == 1.0f && m1 == 1.0f && m2 == 1.0f && s0 == 1.0f && s1 == 1.0f;
    const size_t ngrp = (a.n + grp::elems - 1) / grp::elems;
    for (size_t v = blockIdx.x * (size_t)blockDim.x + threadIdx.x; v < ngrp; v += (size_t)gridDim.x * blockDim.x) {
        const size_t base = v * grp::elems;
        if (a.vec_ok && base + grp::elems <= a.n) {
            if (unit)
                group(base, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f);
            else
                group(base, m0, m1, m2, s0, s1);
        } else {
            for (size_t i = base; i < base + grp::elems && i < a.n; i++) {
                const float e[3] = { I0::load(x0[i]) * m0, Op::n_in > 1 ? I1::load(x1[i]) * m1 : 0.0f,
                                     Op::n_in > 2 ? I2::load(x2[i]) * m2 : 0.0f };
                float o[2];
                Op::apply(i, e, o, p);
                amax0 = fl_amax_update(amax0, o[0]);
                amax1 = fl_amax_update(amax1, o[1]);
                fl_store_one<O0>(y0 + i, o[0], s0);
                if (Op::n_out > 1)
                    fl_store_one<O1>(y1 + i, o[1], s1);
            }
        }
    }
    fl_block_amax_publish(a.amax[0], amax0, sh);
    if (Op::n_out > 1)
        fl_block_amax_publish(a.amax[1], amax1, sh);
}

/* Grid size for a grid-stride kernel over `work` items of FL_RED_THREADS threads each:
   enough blocks to fill the device several times over, capped. */
static inline unsigned fl_grid_for(size_t work)
{
    const size_t b = (work + FL_RED_THREADS - 1) / FL_RED_THREADS;
    return (unsigned)(b < 1 ? 1 : b > 65535 ? 65535 : b);
}

/* Dispatch a runtime format to an IO tag type: fn(tag) is instantiated for each format of the set.
   The sets are the precision variants: forward data (activations, their outputs) bf16 or
   e4m3; gradients bf16 or e5m2. */
template <class F> static int fl_io_dispatch_fwd(fl_format f, F fn)
{
    switch (f) {
    case FL_FMT_BF16: return fn(fl_io_bf16());
    case FL_FMT_E4M3: return fn(fl_io_e4m3());
    default: fprintf(stderr, "fp8lab CUDA kernels: %s is not a forward format here (bf16, e4m3)\n", fl_format_name(f)); return -1;
    }
}

template <class F> static int fl_io_dispatch_grad(fl_format f, F fn)
{
    switch (f) {
    case FL_FMT_BF16: return fn(fl_io_bf16());
    case FL_FMT_E5M2: return fn(fl_io_e5m2());
    default: fprintf(stderr, "fp8lab CUDA kernels: %s is not a gradient format here (bf16, e5m2)\n", fl_format_name(f)); return -1;
    }
}

static inline int fl_io_aligned(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* Every operand float32: the launchers of PolyReLU and PolyNorm then run their fl_io_f32 instantiation
   (the GPU training step's activations) instead of the bf16/FP8 dispatch. */
static inline int fl_io_all_f32(std::initializer_list<fl_format> f)
{
    for (fl_format x : f)
        if (x != FL_FMT_FP32)
            return 0;
    return 1;
}

/* Grid of a row-wise kernel: one block per row, capped (blocks then loop over rows). */
static inline unsigned fl_row_grid(size_t R) { return (unsigned)(R < (1u << 20) ? R : (1u << 20)); }

/* The device multiplier of an output view (kernels.h's fl_kout): its FP8 scale; NULL (1) for bf16 and
   fp32, which store unscaled. */
template <class Out> static inline const float *fl_out_mul(const Out &o)
{
    return (o.fmt == FL_FMT_E4M3 || o.fmt == FL_FMT_E5M2) ? o.scale : nullptr;
}

/* fl_ew_args over n elements from input views (fl_kin) and output views (fl_kout), in operand order;
   vec_ok when every pointer is 16-byte aligned. */
template <class In, class Out>
static inline fl_ew_args fl_ew_args_of(size_t n, std::initializer_list<In> in, std::initializer_list<Out> out)
{
    fl_ew_args a = {};
    int k = 0, ok = 1;
    for (const In &v : in) {
        a.in[k] = v.data;
        a.in_mul[k++] = v.scale_inv;
        ok = ok && fl_io_aligned(v.data);
    }
    k = 0;
    for (const Out &o : out) {
        a.out[k] = o.data;
        a.out_mul[k] = fl_out_mul(o);
        a.amax[k++] = o.amax;
        ok = ok && fl_io_aligned(o.data);
    }
    a.n = n;
    a.vec_ok = ok;
    return a;
}

/* The frame of a backward with coefficient gradients (PolyReLU, PolyNorm).  With no partials (an empty
   input) da is zeroed.  Otherwise launch(X, DY, DX, ws) runs the backward kernel for the formats of x,
   dy and dx (IO tags); it writes `parts` rows of order + 1 partials to ws, which is NULL when da is not
   wanted; then one block reduces them into da (fl_partials_sum_kernel). */
template <class Launch>
static int fl_coef_bwd(float *da, float *ws, size_t parts, int order, fl_format x, fl_format dy, fl_format dx,
                       void *stream, Launch launch)
{
    if (parts == 0) {
        if (da)
            FL_CUDA_CHECK(cudaMemsetAsync(da, 0, (order + 1) * sizeof(float), (cudaStream_t)stream));
        return 0;
    }
    float *wsp = da ? ws : nullptr;
    const int rc = fl_io_all_f32({ x, dy, dx }) ? launch(fl_io_f32(), fl_io_f32(), fl_io_f32(), wsp)
                                                 : fl_io_dispatch_fwd(x, [&](auto xi) {
                                                       return fl_io_dispatch_grad(dy, [&](auto di) {
                                                           return fl_io_dispatch_grad(dx, [&](auto oi) {
                                                               return launch(xi, di, oi, wsp);
                                                           });
                                                       });
                                                   });
    if (rc || !da)
        return rc;
    fl_partials_sum_kernel<<<1, FL_RED_THREADS, 0, (cudaStream_t)stream>>>(da, ws, parts, order + 1);
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}

/* Launch fl_ew_kernel over a's n elements (grid-stride, fl_grid_for of the vector count). */
template <class Op, class I0, class I1, class I2, class O0, class O1>
static int fl_ew_launch(const fl_ew_args &a, const typename Op::params &p, void *stream)
{
    const size_t elems = fl_ew_group<I0, I1, I2, Op::n_in>::elems;
    fl_ew_kernel<Op, I0, I1, I2, O0, O1>
        <<<fl_grid_for((a.n + elems - 1) / elems), FL_RED_THREADS, 0, (cudaStream_t)stream>>>(a, p);
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}
#endif /* __CUDACC__ */

#endif /* FL_ACTIVATIONS_H */
