/* sigmoid.c — sigmoid(x) = 1 / (1 + e^-x) and its derivative sigma(x)(1 - sigma(x)).
 *
 * Error analysis: exp, add, divide are three correctly rounded operations on positive numbers
 * (chain of 3, reference/README.md).  Exactness is tracked through MPFR's ternary values, which
 * catches the one dyadic value, sigma(0) = 1/2 (e^-x is transcendental for x != 0).
 * Tails: x > 160: 1 - sigma(x) < e^-160 < 2^-230, fl_ref_near(1, below); x < -160: 0 < sigma < 2^-230,
 * fl_ref_tiny.  The derivative is even: e^-|x| / (1 + e^-|x|)^2, a chain of 4; tiny for |x| > 900. */
#include "ref.h"

int fl_ref_eval_sigmoid(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p; (void)wp;
    mpfr_srcptr v = x[0];
    if (mpfr_nan_p(v))
        return fl_ref_nan(y);
    if (mpfr_inf_p(v)) {
        mpfr_set_ui(y, mpfr_sgn(v) > 0, MPFR_RNDN); /* 1 or +0 */
        return FL_REF_SURE;
    }
    if (mpfr_cmp_si(v, 160) > 0)
        return fl_ref_near_unit(y, 1, -1);
    if (mpfr_cmp_si(v, -160) < 0)
        return fl_ref_tiny(y, 0);
    int inex = mpfr_neg(y, v, MPFR_RNDN);
    inex |= mpfr_exp(y, y, MPFR_RNDN);
    inex |= mpfr_add_ui(y, y, 1, MPFR_RNDN);
    inex |= mpfr_ui_div(y, 1, y, MPFR_RNDN);
    return inex ? fl_ref_chain_err(3) : FL_REF_SURE;
}

int fl_ref_eval_sigmoid_dx(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p;
    mpfr_srcptr v = x[0];
    if (mpfr_nan_p(v))
        return fl_ref_nan(y);
    if (mpfr_inf_p(v)) {
        mpfr_set_zero(y, 1);
        return FL_REF_SURE;
    }
    if (mpfr_cmpabs_ui(v, 900) > 0)
        return fl_ref_tiny(y, 0);
    mpfr_t d;
    mpfr_init2(d, wp);
    int inex = mpfr_abs(y, v, MPFR_RNDN);
    inex |= mpfr_neg(y, y, MPFR_RNDN);
    inex |= mpfr_exp(y, y, MPFR_RNDN);   /* e = e^-|x| */
    inex |= mpfr_add_ui(d, y, 1, MPFR_RNDN);
    inex |= mpfr_sqr(d, d, MPFR_RNDN);
    inex |= mpfr_div(y, y, d, MPFR_RNDN);
    mpfr_clear(d);
    return inex ? fl_ref_chain_err(5) : FL_REF_SURE;
}
