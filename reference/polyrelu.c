/* polyrelu.c — PolyReLU_r(x) = sum_{i=0..r} a_i relu(x)^i (PolyCom, Zhuo et al. 2025), r = order 1..4,
 * with d/dx and d/da_i.
 *
 * Coefficients: a given a_i is its exact binary64 value; a default is a_0 = 0, a_i = 1/r (i >= 1) as an
 * exact rational.  Writing every coefficient over the common denominator D (D = r when a default 1/r is
 * in use, else 1) gives integer-free numerators n_i = D a_i, each exact at 64 + 3 bits.  The value is
 * sum n_i x^i / D: every term n_i x^i is computed exactly, the sum is one correctly rounded mpfr_sum
 * at wp and the division by D one more rounding.  Both ternary values zero: the value is exact (e.g.
 * x = 1, r = 3: (1+1+1)/3 = 1), FL_REF_SURE; else a chain of 2.  The Ziv loop terminates because the
 * numerator is a dyadic number, exact once wp covers its span.
 * Specials: NaN -> NaN; x <= 0 (also -0, -Inf) -> a_0 exactly (+0 by default); +Inf -> +-Inf by the
 * sign of the highest-order nonzero coefficient (a_0 if there is none).  An exact zero sum is +0. */
#include "ref.h"

#define PR_PREC 80 /* numerators: binary64 times an integer <= 4, and i * n_i */

static void coeffs(mpfr_t num[5], unsigned *den, const fl_ref_params *p)
{
    const int r = p->order;
    int any_default = 0;
    for (int i = 1; i <= r; i++)
        any_default |= !(p->a_set >> i & 1);
    *den = any_default ? (unsigned)r : 1u;
    for (int i = 0; i < 5; i++) {
        mpfr_init2(num[i], PR_PREC);
        if (i > r)
            mpfr_set_zero(num[i], 1);
        else if (p->a_set >> i & 1) {
            mpfr_set_d(num[i], p->a[i], MPFR_RNDN);
            mpfr_mul_ui(num[i], num[i], *den, MPFR_RNDN); /* exact: 53 + 3 bits */
        }
        else
            mpfr_set_ui(num[i], i == 0 ? 0 : 1, MPFR_RNDN);
    }
}

static void clear_coeffs(mpfr_t num[5])
{
    for (int i = 0; i < 5; i++)
        mpfr_clear(num[i]);
}

/* y = sum_{i=0..deg} c[i] x^i / den for x > 0; returns the error code.  At x = +Inf: +-Inf by the sign of
   the highest-order nonzero c[i] (i >= 1), else c[0] / den. */
static int poly(mpfr_ptr y, mpfr_srcptr x, mpfr_t *c, int deg, unsigned den)
{
    if (mpfr_inf_p(x)) {
        int i = deg;
        while (i > 0 && mpfr_zero_p(c[i]))
            i--;
        if (i > 0) {
            mpfr_set_inf(y, mpfr_sgn(c[i]));
            return FL_REF_SURE;
        }
        return mpfr_div_ui(y, c[0], den, MPFR_RNDN) ? fl_ref_chain_err(1) : FL_REF_SURE;
    }
    mpfr_t t[5];
    mpfr_ptr tp[5] = { 0 };
    const mpfr_prec_t px = mpfr_get_prec(x);
    for (int i = 0; i <= deg; i++) {
        mpfr_init2(t[i], (mpfr_prec_t)(i > 0 ? i : 1) * px + PR_PREC);
        mpfr_pow_ui(t[i], x, (unsigned long)i, MPFR_RNDN); /* exact */
        mpfr_mul(t[i], t[i], c[i], MPFR_RNDN);              /* exact */
        tp[i] = t[i];
    }
    int inex = mpfr_sum(y, tp, (unsigned long)deg + 1, MPFR_RNDN);
    if (den > 1)
        inex |= mpfr_div_ui(y, y, den, MPFR_RNDN);
    for (int i = 0; i <= deg; i++)
        mpfr_clear(t[i]);
    return inex ? fl_ref_chain_err(2) : FL_REF_SURE;
}

/* PolyReLU (deriv 0) or its derivative (deriv 1). */
static int polyrelu(mpfr_ptr y, mpfr_srcptr v, const fl_ref_params *p, int deriv)
{
    if (mpfr_nan_p(v))
        return fl_ref_nan(y);
    if (mpfr_sgn(v) <= 0) {
        /* relu(x <= 0) = 0: a_0 for the value, 0 for the derivative */
        mpfr_set_prec(y, 53);
        if (!deriv && (p->a_set & 1))
            mpfr_set_d(y, p->a[0], MPFR_RNDN);
        else
            mpfr_set_zero(y, 1);
        return FL_REF_SURE;
    }
    mpfr_t num[5];
    unsigned den;
    coeffs(num, &den, p);
    if (deriv) {
        for (int i = 0; i < p->order; i++)
            mpfr_mul_ui(num[i], num[i + 1], (unsigned long)(i + 1), MPFR_RNDN); /* exact at 80 bits */
        mpfr_set_zero(num[p->order], 1);
    }
    int k = poly(y, v, num, p->order - deriv, den);
    clear_coeffs(num);
    return k;
}

int fl_ref_eval_polyrelu(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)wp;
    return polyrelu(y, x[0], p, 0);
}

int fl_ref_eval_polyrelu_dx(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)wp;
    return polyrelu(y, x[0], p, 1);
}

/* d/da_i = relu(x)^i (1 for i = 0), exact; 0 for i > order. */
static int dai(mpfr_ptr y, mpfr_srcptr v, const fl_ref_params *p, int i)
{
    if (mpfr_nan_p(v))
        return fl_ref_nan(y);
    if (i > p->order) {
        mpfr_set_zero(y, 1);
        return FL_REF_SURE;
    }
    if (i == 0) {
        mpfr_set_ui(y, 1, MPFR_RNDN);
        return FL_REF_SURE;
    }
    if (mpfr_sgn(v) <= 0) {
        mpfr_set_zero(y, 1);
        return FL_REF_SURE;
    }
    mpfr_set_prec(y, (mpfr_prec_t)i * mpfr_get_prec(v));
    mpfr_pow_ui(y, v, (unsigned long)i, MPFR_RNDN);
    return FL_REF_SURE;
}

int fl_ref_eval_polyrelu_da0(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{ (void)wp; return dai(y, x[0], p, 0); }
int fl_ref_eval_polyrelu_da1(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{ (void)wp; return dai(y, x[0], p, 1); }
int fl_ref_eval_polyrelu_da2(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{ (void)wp; return dai(y, x[0], p, 2); }
int fl_ref_eval_polyrelu_da3(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{ (void)wp; return dai(y, x[0], p, 3); }
int fl_ref_eval_polyrelu_da4(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{ (void)wp; return dai(y, x[0], p, 4); }
