/* order.h — which polynomial order is safe in which precision: overflow / underflow thresholds and
 * ulp errors of PolyReLU and PolyNorm (PolyCom) under two implementation strategies, and the same
 * questions asked of a real pre-activation tensor under each scaling scheme.  `fp8lab order`
 * (experiments/polyorder/cmd_order.c) prints them; experiments/polyorder/ORDER.md holds the definitions in prose, the
 * tables and the recommendation.
 *
 * Dimension letters: a tensor x is (R, C), R rows (tokens), C = n columns (the FFN hidden width;
 * PolyNorm normalises over a row).
 *
 * Strategies.  F is the format under study, RN_F round-to-nearest-even into F, B_F its RNE overflow
 * boundary (fl_format_rne_boundary: e4m3 464, e5m2 61440, fp16 65520, bf16 2^128 - 2^119).
 *   FL_ORDER_FUSED  what fp8lab's kernels do (kernels/activations.h): the input is read as it comes
 *                   (a real, or its fp32 value), every intermediate is fp32, the output is rounded
 *                   ONCE into F.  Its ideal form (exact arithmetic inside, one rounding) is the MPFR
 *                   reference; the fp32 kernel itself is also measured (the twins).
 *   FL_ORDER_NAIVE  an eager framework (PyTorch without a fused kernel): every tensor that a line of
 *                   the model's Python materialises is stored in F, each operation computing its
 *                   exact result from stored operands and rounding it once (PyTorch's elementwise
 *                   kernels compute in fp32 "opmath" and round the result; for F of <= 11 bits the
 *                   fp32 result rounded to F equals the exact result rounded to F for +, -, *, /, sqrt
 *                   except in double-rounding corner cases, which this model ignores):
 *     x_F  = RN_F(x)                         the stored pre-activation
 *     p_1  = x_F;  p_i = RN_F(x_F^i)          torch.pow(x, i): one kernel, one rounding (FL_ORDER_POW_ONCE,
 *                                            the default), or p_i = RN_F(p_(i-1) * x_F), x*x*x written
 *                                            out as Python products (FL_ORDER_POW_MUL)
 *     PolyReLU: x_F is relu'd first (exact); t_i = RN_F(a_i p_i) (a_i the fp32 parameter);
 *               s_1 = t_1, s_i = RN_F(s_(i-1) + t_i); y = RN_F(s_r + a_0) (skipped when a_0 = 0)
 *     PolyNorm: u_i = RN_F(p_i^2)             (x^i).pow(2) inside the mean of squares
 *               m_i = RN_F(mean_row(u_i))     torch.mean: fp32 accumulation, one rounding (modelled as
 *                                            the exact mean rounded once)
 *               d_i = RN_F(m_i + eps32)       eps32 = RN32(1e-6), a Python scalar in opmath
 *               q_i = RN_F(sqrt(d_i)),  N_i = RN_F(p_i / q_i)        x / torch.sqrt(...)
 *               t_i, s_i, y as for PolyReLU.  q_i = 0 (eps flushed to 0 in F and m_i = 0) gives a
 *               division by zero: +-Inf or NaN.
 *   Every RN_F above is an "intermediate"; an intermediate (or the stored input, or the output)
 *   overflows when its exact value v has |v| > B_F, or |v| = B_F and the tie rounds away (fp16, e5m2,
 *   bf16, MX e2m1).  The fused strategy's intermediates are fp32: they overflow beyond fp32's boundary
 *   2^128 - 2^103 (PolyNorm's sum of x^(2r) over the row is the first to).
 *
 * PolyNorm row models (PolyNorm's output for one element depends on its whole row):
 *   outlier row   n elements: one probe x and n-1 elements at the bulk level b (default n = 4096,
 *                 b = 1).  Used for the overflow threshold, the underflow threshold and the ulp sweep.
 *   constant row  all n elements equal to s.  Used for the small-row hazard of the naive strategy: the
 *                 largest s at which the output is not finite (both m_i and eps flushed to zero).
 *
 * Thresholds (per act, order, format, strategy).
 *   overflow_threshold  the smallest positive real input x at which the strategy overflows (some
 *                       intermediate or the output): fused, by bisection over binary64 inputs with the
 *                       exact (MPFR, 256-bit) predicate, so it is the real threshold to within 2^-52
 *                       relative (reported as the smallest binary64 that overflows); naive, from every
 *                       positive input encoding of F (the input is stored in F first): the threshold is
 *                       the rounding boundary below the first overflowing encoding.
 *   overflow_input      the smallest input encoding of F (as its value) whose evaluation overflows.
 *   underflow_threshold the largest real input x > 0 such that every input in (0, x] gives an output
 *                       flushed to zero (+-0) although the exact output is not zero.  None (NaN) when
 *                       a_0 != 0.
 *   fused_fp32_threshold  the fp32 kernel's own overflow threshold: the smallest float input at which
 *                       RN_F of its fp32 output overflows or an fp32 intermediate is infinite.
 *
 * ulp sweep.  Every finite encoding x of F with |x| <= range (default 16) is evaluated by the
 * strategy (fused: the kernels' fp32 element functions / CPU twins, output rounded once; naive: the
 * model above) and compared with the correctly rounded MPFR value (PolyReLU: reference/ref.h;
 * PolyNorm: the outlier row evaluated in closed form, checked against reference/polynorm.c in
 * tests/test_order.c) in ulps of the exact value (numerics/ulp.h's convention).  Outputs that overflow
 * (or are NaN) are counted apart and excluded from the maximum.
 */
#ifndef FL_ORDER_H
#define FL_ORDER_H

#include <stddef.h>
#include <stdint.h>

#include "act_list.h"
#include "fl_format.h"
#include "scaling.h"

/* The polynomial activations of reference/act_list.h (shape *_POLY), in the list's order:
   FL_ORDER_POLYRELU, FL_ORDER_POLYNORM. */
typedef enum {
#define FL_ORDER_ACT_(ID, name) FL_ORDER_##ID,
    FL_ACT_POLYS(FL_ORDER_ACT_)
#undef FL_ORDER_ACT_
    FL_ORDER_ACT_COUNT
} fl_order_act;
typedef enum { FL_ORDER_FUSED, FL_ORDER_NAIVE, FL_ORDER_STRATEGY_COUNT } fl_order_strategy;
typedef enum { FL_ORDER_POW_ONCE, FL_ORDER_POW_MUL, FL_ORDER_POW_COUNT } fl_order_pow;

const char *fl_order_act_name(fl_order_act a);           /* "polyrelu", "polynorm" */
const char *fl_order_strategy_name(fl_order_strategy s); /* "fused", "naive" */
const char *fl_order_pow_name(fl_order_pow p);           /* "pow", "mul" */
int fl_order_act_parse(fl_order_act *out, const char *s);
int fl_order_strategy_parse(fl_order_strategy *out, const char *s);
int fl_order_pow_parse(fl_order_pow *out, const char *s);


typedef struct {
    fl_order_act act;
    int order;           /* r, 1..4 */
    double a[FL_POLY_MAX_ORDER + 1]; /* given coefficients (exact doubles) where a_set bit i is set */
    unsigned a_set;      /* else a_0 = 0, a_i = 1/r: exactly for the reference, RN32(1/r) in fp32 */
    long n;              /* PolyNorm row length (default 4096) */
    double bulk;         /* PolyNorm outlier-row bulk level b (default 1) */
    double eps;          /* PolyNorm eps (default 1e-6) */
    fl_order_pow pow;    /* naive x^i */
} fl_order_cfg;

/* Defaults for an act and order. */
void fl_order_cfg_init(fl_order_cfg *c, fl_order_act act, int order);
/* The coefficient a_i as the exact reference uses it, and as an fp32 parameter. */
double fl_order_coef_exact(const fl_order_cfg *c, int i); /* 1/r as the nearest double (display only) */
float fl_order_coef_f32(const fl_order_cfg *c, int i);

/* ---- single evaluations (exposed for the tests) ----------------------------------------------- */

/* The naive strategy on one input x (any double; it is stored into F first).  PolyReLU: the output
   for x.  PolyNorm: the output at the probe of the outlier row (probe x, n-1 elements at bulk), or,
   with constant_row, of a row whose n elements all equal x.  *y receives the output as a double
   (+-Inf, NaN after an overflow or a zero denominator); returns the name of the first intermediate
   that overflowed ("input", "x^3", "(x^3)^2", "mean((x^3)^2)", "a3*N3", "sum", "output", "zero
   denominator", ...) or NULL if none. */
const char *fl_order_naive_eval(double *y, const fl_order_cfg *c, fl_format f, double x, int constant_row);

/* The fused strategy's overflow predicate on a real input x (exact arithmetic, 256 bits): the name of
   what overflows ("output": |f(x)| beyond B_F; "fp32 sum x^(2r)" for PolyNorm's fp32 row sum), or NULL. */
const char *fl_order_fused_overflow(const fl_order_cfg *c, fl_format f, double x);

/* The fp32 kernel output for x (PolyReLU: fl_polyrelu_f32; PolyNorm: the twin on the outlier row),
   and whether an fp32 intermediate became infinite (PolyNorm's row sums). */
float fl_order_fused_f32(const fl_order_cfg *c, double x, int *f32_overflow);

/* The correctly rounded encoding of the exact output in f (RNE, no saturation: beyond B_F it is Inf
   or NaN) and the error of `code` in ulps of the exact value; PolyNorm on the outlier row.
   Returns 0, or -1 if the Ziv loop gave up. */
int fl_order_ref(uint32_t *code, const fl_order_cfg *c, fl_format f, double x);
double fl_order_ulp_error(const fl_order_cfg *c, fl_format f, double x, uint32_t code);

/* ---- the map --------------------------------------------------------------------------------------- */

typedef struct {
    fl_order_act act;
    int order;
    fl_format fmt;
    fl_order_strategy strategy;
    double overflow_threshold;  /* real; Inf if none below fp32's max (fused) */
    int overflow_inclusive;     /* 1: x = overflow_threshold itself overflows */
    double overflow_input;      /* smallest input encoding of F that overflows; NaN if none */
    const char *overflow_cause; /* what overflows first; NULL if none */
    double fused_fp32_threshold; /* fused only: the fp32 kernel's threshold (NaN for naive) */
    double underflow_threshold; /* real; NaN if the output never flushes */
    double underflow_input;     /* largest input encoding of F whose output is flushed; NaN if none */
    double output_bound;        /* PolyNorm: sup |output| = |a_0| + sqrt(n) sum |a_i|; PolyReLU Inf */
    double small_row_nonfinite; /* PolyNorm naive: largest constant-row level giving a non-finite
                                   output; NaN if none (or not applicable) */
    /* ulp sweep over the encodings of F in [-range, range] */
    double ulp_range;
    long ulp_inputs;            /* inputs evaluated */
    long ulp_overflowed;        /* inputs where the strategy overflowed (an intermediate or the output;
                                   fused: the exact output or an fp32 row sum); excluded from ulp_max */
    long ulp_nonfinite;         /* of those, outputs that are Inf / NaN (the rest are silently wrong) */
    double ulp_silent_max;      /* worst error of an overflowed input whose output is finite (0 if none) */
    long ulp_correct;           /* outputs equal to the correctly rounded one */
    double ulp_max;             /* worst error, ulps of the exact value */
    double ulp_max_x;           /* an input where it occurs */
} fl_order_entry;

/* Computes one entry.  range <= 0: skip the ulp sweep. */
void fl_order_entry_compute(fl_order_entry *e, const fl_order_cfg *c, fl_format f, fl_order_strategy s,
                            double range);

/* ---- real tensors ---------------------------------------------------------------------------------- */

/* The study's scalings are fl_scaling (numerics/scaling.h): none (every cast unscaled: IEEE overflow,
   Inf / NaN), tensor (per-tensor current scaling, TE, saturating), row, 1x128 tiles, and mx32 (MX 1x32,
   e8m0, TE's round-up rule FL_MX_CEIL, which never clips).  Delayed scaling needs a history: not here. */

/* Whether (f, s) is a combination the study runs: scaling for formats of <= 8 bits; the MX element
   formats (e3m2, e2m3, e2m1) with mx32 only. */
int fl_order_scale_applies(fl_format f, fl_scaling s);

typedef struct {
    fl_order_act act;
    int order;
    fl_format fmt;
    fl_order_strategy strategy;
    fl_scaling scale;
    size_t n;            /* elements */
    double frac_overflow; /* an intermediate or the output beyond B_F (unscaled casts: Inf / NaN) */
    double frac_clipped;   /* scaled casts: an intermediate or the output clipped, i.e. |v s| beyond the
                              RNE overflow boundary, stored as +-max with an error above 1/2 ulp (values in
                              (max, boundary] also saturate but round to max anyway: not counted) */
    double frac_flushed;  /* output 0 where the exact output is not */
    size_t ulp_n;         /* sampled outputs judged (finite outputs in the sampled rows) */
    double ulp_p50, ulp_p99, ulp_max; /* of the dequantized output vs the exact value, in ulps of F at
                                         the scaled exact value */
} fl_order_tensor_result;

/* The study of a tensor x (R, C) for one (act, order, format, strategy, scaling).  Fractions over all
   elements; ulp statistics over `sample_rows` rows drawn with `seed` (all rows when R <= sample_rows).
   Returns 0, or -1 out of memory. */
int fl_order_tensor_study(fl_order_tensor_result *res, const fl_order_cfg *c, fl_format f,
                          fl_order_strategy s, fl_scaling sc, const float *x, size_t R, size_t C,
                          size_t sample_rows, uint64_t seed);

/* ---- the verdicts ---------------------------------------------------------------------------------- */

/* A tensor study is safe when nothing overflowed or was clipped and at most max_flush of the outputs
   were flushed to zero. */
int fl_order_tensor_safe(const fl_order_tensor_result *t, double max_flush);

/* Unscaled pre-activations with |x| <= amax stay finite under entry e: amax is below the overflow
   threshold, or equal to it when the tie at the threshold rounds down. */
int fl_order_entry_safe_at(const fl_order_entry *e, double amax);

/* The highest order among entries[0..n) (one group: the orders of one act, format, strategy, scaling)
   that is safe -- fl_order_entry_safe_at(amax) for the map, fl_order_tensor_safe(max_flush) for a
   tensor -- or 0 when none is. */
int fl_order_highest_safe_map(const fl_order_entry *entries, size_t n, double amax);
int fl_order_highest_safe_tensor(const fl_order_tensor_result *res, size_t n, double max_flush);

#endif /* FL_ORDER_H */
