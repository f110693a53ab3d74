/* ref.h — the MPFR reference for activations and their derivatives, correctly rounded into any format.
 *
 * Every function is a table row (fl_ref_table, generated from the list reference/act_list.h) holding
 * evaluators: one for the value and one per derivative.  An evaluator approximates the exact result at a working precision wp and says how good
 * the approximation is; one generic Ziv driver (fl_ref_round) raises wp until the result can be
 * rounded, then rounds ONCE into the target format with fl_mpfr_encode (format precision, exponent
 * range, mpfr_subnormalize, overflow policy, e4m3 top-binade clamp).  The definitions, special values,
 * derivative formulas and the error analysis of every evaluator are in reference/README.md.
 *
 * Evaluator contract.  int ev(y, x, p, wp): y has precision wp on entry (the evaluator may change it
 * with mpfr_set_prec when it computes an exact result); x[0..n_inputs-1] are the exact inputs, of at most
 * 64 bits of precision (the driver starts at wp >= 96, so copies of an input are exact).
 * Return value k >= 0:     |y - f(x)| <= 2^k ulp_wp(y), where ulp_wp(y) = 2^(EXP(y) - wp).
 *              FL_REF_SURE: y rounds exactly like f(x) into every format of precision <= 64 bits
 *                           whose smallest subnormal is >= 2^-1074, in every rounding mode: y is exact
 *                           (NaN, Inf, a zero, an exactly computed value), or a stand-in for a tail
 *                           (see fl_ref_near / fl_ref_tiny / fl_ref_huge).
 */
#ifndef FL_REF_H
#define FL_REF_H

#include <assert.h>
#include <mpfr.h>
#include <stdint.h>

#include "act_list.h"
#include "fl_format.h"

#define FL_REF_SURE (-1)
#define FL_REF_MAX_PREC ((mpfr_prec_t)1 << 16) /* Ziv gives up (returns -1) beyond this */

/* Parameters.  Doubles are taken as their exact binary64 values.  The polynomial coefficients a[i]
   are exact doubles when a_set bit i is set, else the default (a0 = 0, a_i = 1/order exactly, as a
   rational, for i >= 1).  tau is sqrt(n) (exactly, n the row length) unless tau_set. */
typedef struct {
    double alpha, beta, eps, tau;
    int order;
    double a[5];
    unsigned a_set;  /* bit i: a[i] given */
    int alpha_set, tau_set;
} fl_ref_params;

typedef int (*fl_ref_eval_fn)(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp);

/* A row-wise evaluator: output element j of a row of n.  x[k] points to the k-th input row (x for
   the forward, then dy for a VJP). */
typedef int (*fl_ref_row_fn)(mpfr_ptr y, mpfr_srcptr const *const *x, long n, long j,
                             const fl_ref_params *p, mpfr_prec_t wp);

typedef struct {
    const char *wrt;     /* "" for the value; else the input or coefficient name */
    fl_ref_eval_fn eval; /* elementwise functions */
    fl_ref_row_fn row;   /* row-wise functions (eval NULL) */
    int n_inputs;        /* inputs this evaluator reads (a VJP reads dy too) */
} fl_ref_evaluator;

#define FL_REF_MAX_EVALS 8

typedef struct {
    const char *name;
    int n_inputs;            /* 1 (x), 2 (g, u), 3 (g, u, s) */
    int rowwise;             /* 1: over the last axis */
    const char *inputs;      /* "x", "g,u", ... */
    const char *definition;
    const char *params;      /* parameters and defaults, "" for none */
    const char *defaults;    /* "name=value ..." over fl_ref_params_init's common defaults, or "" */
    fl_ref_evaluator evals[FL_REF_MAX_EVALS]; /* evals[0] is the value; ends at wrt == NULL */
} fl_ref_fn;

/* One id per row of reference/act_list.h that has a reference, in the list's order. */
typedef enum {
#define FL_REF_ID_(ID, ...) FL_REF_##ID,
    FL_ACT_REFS(FL_REF_ID_)
#undef FL_REF_ID_
    FL_REF_COUNT
} fl_ref_id;

extern const fl_ref_fn fl_ref_table[FL_REF_COUNT];

const fl_ref_fn *fl_ref_lookup(const char *name);
/* The evaluator for wrt ("" or NULL: the value); NULL if the function has none by that name. */
const fl_ref_evaluator *fl_ref_find_eval(const fl_ref_fn *fn, const char *wrt);

/* Defaults common to every function (alpha 0.01, beta 1, eps 1e-6, order 3, ...), then the
   function's own (fn->defaults: prelu alpha 0.25, elu alpha 1). */
void fl_ref_params_init(fl_ref_params *p, const fl_ref_fn *fn);
/* Set "name=value" (alpha, beta, order, a0..a4, eps, tau).  Returns 0, or -1 for a bad name/value. */
int fl_ref_params_set(fl_ref_params *p, const char *name, const char *value);
/* fl_ref_params_set for each of the space-separated "name=value" of list (at most 255 characters;
   "" sets nothing).  Returns 0, or -1 at the first bad one. */
int fl_ref_params_apply(fl_ref_params *p, const char *list);

/* The Ziv driver: *out = the encoding of f(x) in format f, rounded once with rnd (not FL_RND_SR) and the
   overflow policy ovf.  Returns 0, or -1 if no working precision up to FL_REF_MAX_PREC sufficed
   (never expected; *out is then the format's NaN). */
int fl_ref_round(uint32_t *out, fl_format f, fl_rounding rnd, fl_overflow ovf, fl_ref_eval_fn ev,
                 mpfr_srcptr const *x, const fl_ref_params *p);
/* The same with a working precision offset: starts at p + 32 + extra bits (used by the self-check
   "the result does not depend on the working precision"). */
int fl_ref_round_wp(uint32_t *out, fl_format f, fl_rounding rnd, fl_overflow ovf, fl_ref_eval_fn ev,
                    mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t extra);
/* Row-wise: element j of the row. */
int fl_ref_round_row(uint32_t *out, fl_format f, fl_rounding rnd, fl_overflow ovf, fl_ref_row_fn ev,
                     mpfr_srcptr const *const *x, long n, long j, const fl_ref_params *p,
                     mpfr_prec_t extra);
/* Correctly rounded (to nearest) value at the precision of y, MPFR's default exponent range. */
int fl_ref_value(mpfr_ptr y, fl_ref_eval_fn ev, mpfr_srcptr const *x, const fl_ref_params *p);
int fl_ref_value_row(mpfr_ptr y, fl_ref_row_fn ev, mpfr_srcptr const *const *x, long n, long j,
                     const fl_ref_params *p);

/* ---- helpers for evaluators (ref.c) ---------------------------------------------------------- */

/* y = c * (1 + dir * 2^-300) exactly; returns FL_REF_SURE.  For a tail where the exact result lies
   strictly between c and c*(1 + dir*2^-200) and c has at most 195 bits of precision (an input, a
   product of up to three inputs, +-1, +-alpha): no number of <= 65 bits lies in that open interval,
   so y and the exact result round alike. */
int fl_ref_near(mpfr_ptr y, mpfr_srcptr c, int dir);
/* y = sign * 2^-(2^20); returns FL_REF_SURE.  For a tail where 0 < |f(x)| < 2^-1100: both lie below
   half the smallest subnormal of every format, so they round alike. */
int fl_ref_tiny(mpfr_ptr y, int negative);
/* y = sign * 2^(2^20), finite; returns FL_REF_SURE.  For a tail where |f(x)| > 2^1100: both lie beyond
   every format's largest finite value (binary64's is below 2^1024) and its overflow boundary, so
   they round alike (Inf, or max when saturating or rounding toward zero).  Never Inf itself: an exact
   Inf is no overflow and keeps Inf in every mode. */
int fl_ref_huge(mpfr_ptr y, int negative);
/* fl_ref_near of the constant sign * 1 (a tail that approaches +-1); returns FL_REF_SURE. */
int fl_ref_near_unit(mpfr_ptr y, int sign, int dir);
/* y = NaN; returns FL_REF_SURE. */
int fl_ref_nan(mpfr_ptr y);
/* Error exponent for a chain of n correctly rounded operations without cancellation (reference/README.md):
   relative error <= n u (1 + n u) < (n + 1) u and |f| < 2^EXP(y) (1 + (n+1) u), so |y - f| < 2 (n + 1) ulp_wp(y):
   k = ceil(log2(2 (n + 1))). */
int fl_ref_chain_err(int n);
/* log2 |x| as a double (EXP - 1 .. EXP), for tail tests; 0 for zero. */
double fl_ref_log2abs(mpfr_srcptr x);

/* Evaluators shared between families (sigmoid.c, gelu.c). */
int fl_ref_eval_sigmoid(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp);
/* Special values and tails of a self-gated activation x h(x) whose gate h tends to 1 at +Inf and whose
   value tends to -0 at -Inf (gelu, gelu_tanh, mish; swish's derivative in t = beta x; gelu.c).  Each sets
   y and returns 1 where it decides, else returns 0.  The value: NaN, +Inf, +-0 stay, -Inf -> -0;
   x > hi: fl_ref_near(x, toward 0); x < lo: tiny negative.  The derivative: NaN; +Inf -> 1, -Inf -> -0;
   x > hi: just above 1; x < lo: tiny negative.  The caller's error analysis shows the tails hold beyond
   hi and lo. */
int fl_ref_gated_tails(mpfr_ptr y, mpfr_srcptr v, long hi, long lo);
int fl_ref_gated_dx_tails(mpfr_ptr y, mpfr_srcptr v, long hi, long lo);

#endif /* FL_REF_H */
