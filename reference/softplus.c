/* softplus.c — softplus(x) = log1p(e^(beta x)) / beta (beta > 0, default 1), exact: no threshold.
 *
 * Error analysis: t = beta x exactly; exp (u), log1p (condition w/((1+w)log1p(w)) <= 1, so 2u), divide
 * (u): chain of 3 (reference/README.md).  Never exact (log1p(e^t) is transcendental for rational t).
 * Tails: t > 160: softplus = x + log1p(e^-t)/beta with relative gap log1p(e^-t)/t < 2^-230,
 * fl_ref_near(x, above).  log2(e) t - log2(beta) < -1200: 0 < softplus < e^t/beta < 2^-1200, tiny.
 * Derivative d/dx = sigmoid(beta x) (sigmoid.c's evaluator on t). */
#include "ref.h"

#include <math.h>

int fl_ref_eval_softplus(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)wp;
    mpfr_srcptr v = x[0];
    if (mpfr_nan_p(v) || p->beta <= 0.0)
        return fl_ref_nan(y); /* beta <= 0 is outside the definition */
    if (mpfr_inf_p(v)) {
        if (mpfr_sgn(v) > 0)
            mpfr_set_inf(y, 1);
        else
            mpfr_set_zero(y, 1);
        return FL_REF_SURE;
    }
    mpfr_t t;
    mpfr_init2(t, mpfr_get_prec(v) + 53);
    mpfr_mul_d(t, v, p->beta, MPFR_RNDN);
    int k;
    if (mpfr_cmp_si(t, 160) > 0) {
        k = fl_ref_near(y, v, 1);
    } else if (mpfr_get_d(t, MPFR_RNDN) * 1.4426950408889634 - log2(p->beta) < -1200.0) {
        k = fl_ref_tiny(y, 0);
    } else {
        mpfr_exp(y, t, MPFR_RNDN);
        mpfr_log1p(y, y, MPFR_RNDN);
        mpfr_div_d(y, y, p->beta, MPFR_RNDN);
        k = fl_ref_chain_err(4);
    }
    mpfr_clear(t);
    return k;
}

int fl_ref_eval_softplus_dx(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    if (mpfr_nan_p(x[0]) || p->beta <= 0.0)
        return fl_ref_nan(y);
    mpfr_t t;
    mpfr_init2(t, mpfr_get_prec(x[0]) + 53);
    mpfr_mul_d(t, x[0], p->beta, MPFR_RNDN);
    mpfr_srcptr in[1] = { t };
    int k = fl_ref_eval_sigmoid(y, in, p, wp);
    mpfr_clear(t);
    return k;
}
