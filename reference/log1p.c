/* log1p.c — the elementary function log1p(x) = log(1 + x) (reference-only: the building block of
 * softplus and mish; judged against libm's log1pf by `fp8lab ulp`).
 *
 * Error analysis: mpfr_log1p is correctly rounded at wp: a chain of 1 (reference/README.md); its
 * ternary value is 0 exactly when the result is exact (only at x = 0: a dyadic r != 0 would make
 * 1 + x = e^r transcendental), which is then reported SURE.
 * Specials: NaN and every x < -1 (-Inf included) give NaN; log1p(-1) = -Inf exactly; +Inf -> +Inf;
 * +-0 -> +-0.  No overflow: an input of <= 64 bits within binary64's range has 1 + x >= 2^-64 (or
 * 1 + x = 0) and 1 + x < 2^1025, so |log1p(x)| < 711.
 * Tail: 0 < |x| < 2^-201: log1p(x) / x - 1 = -x/2 + x^2/3 - ... has the sign of -x and |.| < |x| <
 * 2^-200: fl_ref_near(x, -sign x) (toward zero for x > 0, away from zero for x < 0).  Without it the
 * Ziv loop could not stop where log1p(x) lies within 2^-65536 of x. */
#include "ref.h"

int fl_ref_eval_log1p(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p; (void)wp;
    mpfr_srcptr v = x[0];
    if (mpfr_nan_p(v))
        return fl_ref_nan(y);
    const int c = mpfr_cmp_si(v, -1);
    if (c < 0)
        return fl_ref_nan(y); /* outside the domain, -Inf included */
    if (c == 0) {
        mpfr_set_inf(y, -1);
        return FL_REF_SURE;
    }
    if (!mpfr_regular_p(v)) {
        mpfr_set(y, v, MPFR_RNDN); /* +Inf, +-0 */
        return FL_REF_SURE;
    }
    if (mpfr_get_exp(v) < -200) /* |x| < 2^-201 */
        return fl_ref_near(y, v, -mpfr_sgn(v));
    const int inex = mpfr_log1p(y, v, MPFR_RNDN);
    return inex ? fl_ref_chain_err(1) : FL_REF_SURE;
}
