/* tanh.c — tanh and its derivative 1 - tanh^2 = 4 e^-2|x| / (1 + e^-2|x|)^2.
 *
 * Error analysis: mpfr_tanh is correctly rounded (chain of 1).  Exact only at +-0.
 * Tails: |x| > 160: 1 - |tanh x| < 2 e^-320, fl_ref_near(+-1, toward 0); |x| < 2^-120:
 * tanh x = x (1 - x^2/3 + ...), relative gap < 2^-240, fl_ref_near(x, toward 0).
 * Derivative: chain of 5 (exp, add, square, divide, the exact *4 costs nothing); tiny for |x| > 900. */
#include "ref.h"

int fl_ref_eval_tanh(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p; (void)wp;
    mpfr_srcptr v = x[0];
    if (!mpfr_regular_p(v)) {
        if (mpfr_inf_p(v))
            mpfr_set_si(y, mpfr_sgn(v), MPFR_RNDN);
        else
            mpfr_set(y, v, MPFR_RNDN); /* NaN, +-0 */
        return FL_REF_SURE;
    }
    if (mpfr_cmpabs_ui(v, 160) > 0)
        return fl_ref_near_unit(y, mpfr_sgn(v), -1);
    if (mpfr_get_exp(v) < -120)
        return fl_ref_near(y, v, -1);
    mpfr_tanh(y, v, MPFR_RNDN);
    return fl_ref_chain_err(1);
}

int fl_ref_eval_tanh_dx(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p;
    mpfr_srcptr v = x[0];
    if (mpfr_nan_p(v))
        return fl_ref_nan(y);
    if (mpfr_inf_p(v) || mpfr_cmpabs_ui(v, 900) > 0) {
        if (mpfr_inf_p(v)) {
            mpfr_set_zero(y, 1);
            return FL_REF_SURE;
        }
        return fl_ref_tiny(y, 0);
    }
    mpfr_t d;
    mpfr_init2(d, wp);
    int inex = mpfr_abs(y, v, MPFR_RNDN);
    inex |= mpfr_mul_si(y, y, -2, MPFR_RNDN);
    inex |= mpfr_exp(y, y, MPFR_RNDN);
    inex |= mpfr_add_ui(d, y, 1, MPFR_RNDN);
    inex |= mpfr_sqr(d, d, MPFR_RNDN);
    inex |= mpfr_div(y, y, d, MPFR_RNDN);
    mpfr_mul_2ui(y, y, 2, MPFR_RNDN);
    mpfr_clear(d);
    return inex ? fl_ref_chain_err(5) : FL_REF_SURE;
}
