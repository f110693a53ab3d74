/* exp.c — the elementary functions exp(x) and expm1(x) = e^x - 1 (reference-only: the building blocks
 * of elu, sigmoid, silu, ...; judged against libm's expf/expm1f by `fp8lab ulp`).
 *
 * Error analysis: mpfr_exp and mpfr_expm1 are correctly rounded at wp: a chain of 1 (reference/README.md),
 * and MPFR's ternary value is 0 exactly when the result is exact (only at x = 0, Lindemann–Weierstrass),
 * which is then reported SURE.
 * Specials: exp(NaN) = NaN, exp(+Inf) = +Inf, exp(-Inf) = +0, exp(+-0) = 1 exactly;
 *           expm1(NaN) = NaN, expm1(+Inf) = +Inf, expm1(-Inf) = -1 exactly, expm1(+-0) = +-0.
 * Tails (each chosen where MPFR's own value would still be finite, so that `fp8lab ref --print` shows
 * the true value almost everywhere):
 *   exp, x > 2^24: e^x > 2^(2^24) > 2^1100, fl_ref_huge (overflow in every format and mode);
 *   exp, x < -2^24: 0 < e^x < 2^-1100, fl_ref_tiny;
 *   exp, 0 < |x| < 2^-201: e^x lies strictly between 1 and 1 + 2x (x > 0) or 1 + x (x < 0), within a
 *        relative 2^-200 of 1 on the side of x's sign: fl_ref_near(1, sign x);
 *   expm1, x > 2^24: as exp (huge);
 *   expm1, x < -160: -1 < expm1(x) = -1 + e^x < -1 + 2^-230: fl_ref_near(-1, toward 0) (as elu);
 *   expm1, 0 < |x| < 2^-201: expm1(x) / x - 1 = x/2 + x^2/6 + ... has x's sign and |.| < |x| < 2^-200:
 *        fl_ref_near(x, sign x) (away from zero for x > 0, toward zero for x < 0).
 * Without the tails the Ziv loop could not stop where the exact value lies within 2^-65536 of a
 * representable number (1, -1, x). */
#include "ref.h"

/* |x| > 2^24 */
static int beyond_2p24(mpfr_srcptr v) { return mpfr_get_exp(v) > 24 && mpfr_cmpabs_ui(v, 1ul << 24) > 0; }

int fl_ref_eval_exp(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p; (void)wp;
    mpfr_srcptr v = x[0];
    if (mpfr_nan_p(v))
        return fl_ref_nan(y);
    if (mpfr_inf_p(v)) {
        if (mpfr_sgn(v) > 0)
            mpfr_set_inf(y, 1);
        else
            mpfr_set_zero(y, 1);
        return FL_REF_SURE;
    }
    if (mpfr_zero_p(v)) {
        mpfr_set_ui(y, 1, MPFR_RNDN);
        return FL_REF_SURE;
    }
    if (beyond_2p24(v))
        return mpfr_sgn(v) > 0 ? fl_ref_huge(y, 0) : fl_ref_tiny(y, 0);
    if (mpfr_get_exp(v) < -200) /* |x| < 2^-201 */
        return fl_ref_near_unit(y, 1, mpfr_sgn(v));
    const int inex = mpfr_exp(y, v, MPFR_RNDN);
    return inex ? fl_ref_chain_err(1) : FL_REF_SURE;
}

int fl_ref_eval_expm1(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p; (void)wp;
    mpfr_srcptr v = x[0];
    if (mpfr_nan_p(v))
        return fl_ref_nan(y);
    if (mpfr_inf_p(v)) {
        if (mpfr_sgn(v) > 0)
            mpfr_set_inf(y, 1);
        else
            mpfr_set_si(y, -1, MPFR_RNDN);
        return FL_REF_SURE;
    }
    if (mpfr_zero_p(v)) {
        mpfr_set(y, v, MPFR_RNDN); /* +-0 keeps its sign */
        return FL_REF_SURE;
    }
    if (mpfr_sgn(v) > 0 && beyond_2p24(v))
        return fl_ref_huge(y, 0);
    if (mpfr_cmp_si(v, -160) < 0)
        return fl_ref_near_unit(y, -1, -1);
    if (mpfr_get_exp(v) < -200) /* |x| < 2^-201 */
        return fl_ref_near(y, v, mpfr_sgn(v));
    const int inex = mpfr_expm1(y, v, MPFR_RNDN);
    return inex ? fl_ref_chain_err(1) : FL_REF_SURE;
}
