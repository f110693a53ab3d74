/* elu.c — elu (alpha, default 1) and selu (PyTorch's constants), values and d/dx.
 *
 * elu(x) = x (x > 0), alpha * expm1(x) (x <= 0);  selu(x) = scale * elu_{alpha_selu}(x).
 * Error analysis (reference/README.md, "chains"): each is a chain of n correctly rounded operations
 * with no cancellation (expm1 is evaluated directly), so |y - f| <= 2^fl_ref_chain_err(n) ulp(y).
 * Tail: for elu with x < -160, e^x < 2^-230 and the result is -alpha(1 - e^x), strictly between -alpha
 * and -alpha(1 - 2^-200): fl_ref_near.  (selu's constant is not dyadic, so its tail needs no
 * shortcut: the Ziv loop rounds -scale*alpha like any other value.) */
#include "ref.h"

#include <math.h>

#define SELU_SCALE "1.0507009873554804934193349852946"
#define SELU_ALPHA "1.6732632423543772848170429916717"

/* e^x underflows every format after multiplying by c when x log2(e) + log2|c| < -1200. */
static int exp_tiny(mpfr_srcptr x, double log2c)
{
    return mpfr_get_d(x, MPFR_RNDN) * 1.4426950408889634 + log2c < -1200.0;
}

int fl_ref_eval_elu(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    mpfr_srcptr v = x[0];
    if (mpfr_nan_p(v) || mpfr_sgn(v) > 0) {
        mpfr_set_prec(y, mpfr_get_prec(v));
        mpfr_set(y, v, MPFR_RNDN); /* NaN, +Inf, x > 0 */
        return FL_REF_SURE;
    }
    mpfr_t a;
    mpfr_init2(a, 53);
    mpfr_set_d(a, p->alpha, MPFR_RNDN);
    int k;
    if (mpfr_zero_p(v) || p->alpha == 0.0) {
        /* alpha * x at x = +-0 (the sign follows the product) or alpha = 0: an exact zero */
        mpfr_mul(y, a, mpfr_zero_p(v) ? v : a, MPFR_RNDN);
        if (!mpfr_zero_p(v))
            mpfr_set_zero(y, -1); /* 0 * expm1(x < 0) = -0 */
        k = FL_REF_SURE;
    } else if (mpfr_inf_p(v)) {
        mpfr_set_prec(y, 53);
        mpfr_neg(y, a, MPFR_RNDN); /* -alpha, exact */
        k = FL_REF_SURE;
    } else if (mpfr_cmp_si(v, -160) < 0) {
        mpfr_neg(a, a, MPFR_RNDN);
        k = fl_ref_near(y, a, -1);
    } else {
        (void)wp;
        mpfr_expm1(y, v, MPFR_RNDN);
        mpfr_mul(y, y, a, MPFR_RNDN);
        k = fl_ref_chain_err(2);
    }
    mpfr_clear(a);
    return k;
}

int fl_ref_eval_elu_dx(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)wp;
    mpfr_srcptr v = x[0];
    if (mpfr_nan_p(v))
        return fl_ref_nan(y);
    if (mpfr_sgn(v) > 0 || p->alpha == 0.0) {
        mpfr_set_d(y, mpfr_sgn(v) > 0 ? 1.0 : 0.0, MPFR_RNDN); /* 1; or alpha e^x = +0 */
        return FL_REF_SURE;
    }
    if (mpfr_inf_p(v) || exp_tiny(v, log2(fabs(p->alpha))))
        return fl_ref_tiny(y, p->alpha < 0); /* alpha e^x -> 0 with alpha's sign */
    int inex = mpfr_exp(y, v, MPFR_RNDN);        /* exact only at x = 0 */
    inex |= mpfr_mul_d(y, y, p->alpha, MPFR_RNDN);
    return inex ? fl_ref_chain_err(2) : FL_REF_SURE;
}

/* scale, and scale * alpha, rounded to nearest at wp. */
static void selu_consts(mpfr_ptr s, mpfr_ptr sa, mpfr_prec_t wp)
{
    mpfr_t a;
    mpfr_init2(a, wp);
    mpfr_set_str(s, SELU_SCALE, 10, MPFR_RNDN);
    mpfr_set_str(a, SELU_ALPHA, 10, MPFR_RNDN);
    mpfr_mul(sa, s, a, MPFR_RNDN); /* 3 roundings */
    mpfr_clear(a);
}

int fl_ref_eval_selu(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p;
    mpfr_srcptr v = x[0];
    if (mpfr_nan_p(v) || mpfr_zero_p(v) || (mpfr_inf_p(v) && mpfr_sgn(v) > 0)) {
        mpfr_set(y, v, MPFR_RNDN); /* NaN, +-0 (the sign follows), +Inf */
        return FL_REF_SURE;
    }
    mpfr_t s, sa;
    mpfr_inits2(wp, s, sa, (mpfr_ptr)0);
    selu_consts(s, sa, wp);
    int k;
    if (mpfr_sgn(v) > 0) {
        mpfr_mul(y, s, v, MPFR_RNDN); /* never exact: scale is not dyadic */
        k = fl_ref_chain_err(2);
    } else if (mpfr_inf_p(v)) {
        mpfr_neg(y, sa, MPFR_RNDN);
        k = fl_ref_chain_err(3);
    } else {
        mpfr_expm1(y, v, MPFR_RNDN);
        mpfr_mul(y, y, sa, MPFR_RNDN);
        k = fl_ref_chain_err(5);
    }
    mpfr_clears(s, sa, (mpfr_ptr)0);
    return k;
}

int fl_ref_eval_selu_dx(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p;
    mpfr_srcptr v = x[0];
    if (mpfr_nan_p(v))
        return fl_ref_nan(y);
    if (mpfr_sgn(v) < 0 && (mpfr_inf_p(v) || exp_tiny(v, 1.0)))
        return fl_ref_tiny(y, 0);
    mpfr_t s, sa;
    mpfr_inits2(wp, s, sa, (mpfr_ptr)0);
    selu_consts(s, sa, wp);
    int k;
    if (mpfr_sgn(v) > 0) {
        mpfr_set(y, s, MPFR_RNDN);
        k = fl_ref_chain_err(1);
    } else {
        mpfr_exp(y, v, MPFR_RNDN); /* x = 0 gives scale*alpha, also not dyadic */
        mpfr_mul(y, y, sa, MPFR_RNDN);
        k = fl_ref_chain_err(5);
    }
    mpfr_clears(s, sa, (mpfr_ptr)0);
    return k;
}
