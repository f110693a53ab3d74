/* mish.c — mish(x) = x tanh(softplus(x)).
 *
 * With w = e^x, tanh(log1p(w)) = n / (n + 2), n = w (w + 2): no cancellation anywhere.
 * Error analysis: w (u), w + 2 (u), n (u) -> n within 3u; n + 2 within 4u; the quotient within 8u;
 * times x within 9u: chain of 9 (reference/README.md).  Exact only at +-0.
 * Tails: x > 120: 1 - tanh(softplus x) = 2/(n + 2) < 2 e^-240, fl_ref_near(x, toward 0);
 * x < -160: |mish x| < |x| e^x < 2^-220, tiny negative.
 * Derivative: d/dx = tanh(sp) + x sech^2(sp) sigma(x) = n/(n+2) + x * 4 (w+1) w / (n+2)^2 (since
 * sech^2(sp) = 4(1+w)^2/((1+w)^2+1)^2 = 4(1+w)^2/(n+2)^2 and sigma(x) = w/(1+w)); it vanishes near
 * x = -1.19, so the sum's error is bounded dynamically as in silu.c. */
#include "ref.h"

int fl_ref_eval_mish(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p;
    mpfr_srcptr v = x[0];
    if (fl_ref_gated_tails(y, v, 120, -160))
        return FL_REF_SURE;
    mpfr_t n;
    mpfr_init2(n, wp);
    mpfr_exp(y, v, MPFR_RNDN);
    mpfr_add_ui(n, y, 2, MPFR_RNDN);
    mpfr_mul(n, n, y, MPFR_RNDN);
    mpfr_add_ui(y, n, 2, MPFR_RNDN);
    mpfr_div(y, n, y, MPFR_RNDN);
    mpfr_mul(y, y, v, MPFR_RNDN);
    mpfr_clear(n);
    return fl_ref_chain_err(9);
}

int fl_ref_eval_mish_dx(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p;
    mpfr_srcptr v = x[0];
    /* x > 900: derivative = 1 - 2/(n+2) + x*4(w+1)w/(n+2)^2 ~ 1 + (4x - 2) e^-2x: above 1, gap < 2^-2000;
       x < -900: ~ e^x (1 + x) < 0, tiny */
    if (fl_ref_gated_dx_tails(y, v, 900, -900))
        return FL_REF_SURE;
    mpfr_t w, n, a, b;
    mpfr_inits2(wp, w, n, a, b, (mpfr_ptr)0);
    int inex = mpfr_exp(w, v, MPFR_RNDN);
    inex |= mpfr_add_ui(n, w, 2, MPFR_RNDN);
    inex |= mpfr_mul(n, n, w, MPFR_RNDN);        /* n within 3u */
    inex |= mpfr_add_ui(b, n, 2, MPFR_RNDN);     /* n + 2 within 4u */
    inex |= mpfr_div(a, n, b, MPFR_RNDN);        /* first term within 8u */
    inex |= mpfr_sqr(b, b, MPFR_RNDN);           /* (n+2)^2 within 9u */
    inex |= mpfr_add_ui(y, w, 1, MPFR_RNDN);
    inex |= mpfr_mul(y, y, w, MPFR_RNDN);
    inex |= mpfr_mul(y, y, v, MPFR_RNDN);
    inex |= mpfr_mul_2ui(y, y, 2, MPFR_RNDN);
    inex |= mpfr_div(b, y, b, MPFR_RNDN);        /* second term within 14u */
    inex |= mpfr_add(y, a, b, MPFR_RNDN);
    int k;
    if (!inex) {
        k = FL_REF_SURE; /* x = 0: 3/5 is inexact, so this is never reached; kept for safety */
    } else if (mpfr_zero_p(y)) {
        k = 0; /* approximate zero: raise wp */
    } else {
        /* |err| <= 8u|a| + 14u|b| + u|y| <= (22 * 2^r + 1) u |y|, max(|a|,|b|)/|y| <= 2^r */
        mpfr_exp_t ea = mpfr_get_exp(a), eb = mpfr_zero_p(b) ? ea : mpfr_get_exp(b);
        long r = (long)((ea > eb ? ea : eb) - mpfr_get_exp(y)) + 1;
        if (r < 0)
            r = 0;
        k = (int)r + 6; /* 2^(r+6) >= 2 (22 * 2^r + 1) */
    }
    mpfr_clears(w, n, a, b, (mpfr_ptr)0);
    return k;
}
