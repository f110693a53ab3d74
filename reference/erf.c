/* erf.c — the elementary function erf(x) = 2/sqrt(pi) int_0^x e^(-t^2) dt (reference-only: the building
 * block of the exact GELU; judged against libm's erff by `fp8lab ulp`).
 *
 * Error analysis: mpfr_erf is correctly rounded at wp: a chain of 1 (reference/README.md); its ternary
 * value is 0 exactly when the result is exact (at x = 0), which is then reported SURE.
 * Specials: NaN -> NaN, +-Inf -> +-1 exactly, +-0 -> +-0.
 * Tail: |x| > 16: 0 < 1 - |erf x| = erfc|x| < e^(-x^2) / (|x| sqrt(pi)) < 2^-369 / 28 < 2^-200:
 * fl_ref_near(+-1, toward 0).  Without it the Ziv loop could not stop where erf(x) lies within
 * 2^-65536 of +-1 (|x| > ~213).  Tiny |x| needs no tail: erf(x) = (2/sqrt(pi)) x (1 - x^2/3 + ...) is
 * a non-dyadic multiple of x, computed by MPFR at any exponent. */
#include "ref.h"

int fl_ref_eval_erf(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
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
    if (mpfr_cmpabs_ui(v, 16) > 0)
        return fl_ref_near_unit(y, mpfr_sgn(v), -1);
    const int inex = mpfr_erf(y, v, MPFR_RNDN);
    return inex ? fl_ref_chain_err(1) : FL_REF_SURE;
}
