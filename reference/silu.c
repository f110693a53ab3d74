/* silu.c — silu(x) = x sigma(x) and swish(x) = x sigma(beta x), values and derivatives.
 *
 * Value: x / (1 + e^-t), t = beta x computed exactly: a chain of 3 (exp, add, divide) without
 * cancellation; exact only where t = 0 (x / 2), caught by the ternary values.
 * Tails: t > 160: 1 - sigma(t) < 2^-230, fl_ref_near(x, toward 0).  t < -160 and
 * log2|x| + t log2(e) < -1200: fl_ref_tiny with x's sign; otherwise the general path (MPFR's exponent
 * range holds e^-t for any t > -2^29).
 * Derivatives (reference/README.md): d/dx = sigma(t) + t sigma(t) sigma(-t) = (1 + e^-t (1 + t)) / (1 + e^-t)^2,
 * which vanishes near t = -1.2785: the numerator N = 1 + m, m = e^-t (1 + t), cancels, so its error is
 * bounded dynamically: |err N| <= 4u|m| + u|N|, then three more operations; k from |m|/|N|.
 * d swish/d beta = x^2 sigma(t) sigma(-t) = x^2 e^-t / (1 + e^-t)^2: chain of 5. */
#include "ref.h"

/* t = beta * x exactly (prec of x + 53). */
static void beta_x(mpfr_ptr t, mpfr_srcptr x, double beta)
{
    mpfr_init2(t, mpfr_get_prec(x) + 53);
    mpfr_mul_d(t, x, beta, MPFR_RNDN);
}

static int swish_eval(mpfr_ptr y, mpfr_srcptr v, double beta, mpfr_prec_t wp)
{
    (void)wp;
    if (mpfr_nan_p(v))
        return fl_ref_nan(y);
    if (mpfr_zero_p(v)) {
        mpfr_set(y, v, MPFR_RNDN); /* x sigma(0) = x / 2 = +-0 */
        return FL_REF_SURE;
    }
    mpfr_t t;
    beta_x(t, v, beta);
    int k;
    if (mpfr_inf_p(v)) {
        if (mpfr_nan_p(t)) /* beta = 0: x / 2 */
            mpfr_set(y, v, MPFR_RNDN);
        else if (mpfr_sgn(t) > 0)
            mpfr_set(y, v, MPFR_RNDN);
        else
            mpfr_set_zero(y, mpfr_sgn(v)); /* x e^t -> 0 with x's sign */
        k = FL_REF_SURE;
    } else if (mpfr_cmp_si(t, 160) > 0) {
        k = fl_ref_near(y, v, -1);
    } else if (mpfr_cmp_si(t, -160) < 0 &&
               fl_ref_log2abs(v) + mpfr_get_d(t, MPFR_RNDN) * 1.4426950408889634 < -1200.0) {
        k = fl_ref_tiny(y, mpfr_sgn(v) < 0);
    } else {
        int inex = mpfr_neg(y, t, MPFR_RNDN);
        inex |= mpfr_exp(y, y, MPFR_RNDN);
        inex |= mpfr_add_ui(y, y, 1, MPFR_RNDN);
        inex |= mpfr_div(y, v, y, MPFR_RNDN);
        k = inex ? fl_ref_chain_err(3) : FL_REF_SURE;
    }
    mpfr_clear(t);
    return k;
}

/* d/dx x sigma(beta x) = sigma(t) (1 + t sigma(-t)), t = beta x. */
static int swish_dx(mpfr_ptr y, mpfr_srcptr v, double beta, mpfr_prec_t wp)
{
    if (mpfr_nan_p(v))
        return fl_ref_nan(y);
    mpfr_t t;
    beta_x(t, v, beta);
    int k;
    if (mpfr_nan_p(t)) { /* Inf * 0: beta = 0, the derivative is 1/2 */
        mpfr_set_d(y, 0.5, MPFR_RNDN);
        k = FL_REF_SURE;
    } else if (fl_ref_gated_dx_tails(y, t, 900, -900)) {
        /* the limits: 1 at t = +Inf, -0 at t = -Inf.  t > 900: derivative - 1 ~ e^-t (t - 1 + ...) /
           (1+e^-t)^2 > 0, below 2^-1200; t < -900: sigma(t)(1 + t sigma(-t)) ~ e^t (1 + t) < 0,
           |.| < 2^-1200 */
        k = FL_REF_SURE;
    } else {
        mpfr_t e, m, d;
        mpfr_inits2(wp, e, m, d, (mpfr_ptr)0);
        int inex = mpfr_neg(e, t, MPFR_RNDN);
        inex |= mpfr_exp(e, e, MPFR_RNDN);
        inex |= mpfr_add_ui(m, t, 1, MPFR_RNDN);
        inex |= mpfr_mul(m, m, e, MPFR_RNDN);     /* m = e^-t (1 + t), rel err <= 3u */
        inex |= mpfr_add_ui(y, m, 1, MPFR_RNDN);  /* N */
        inex |= mpfr_add_ui(d, e, 1, MPFR_RNDN);
        inex |= mpfr_sqr(d, d, MPFR_RNDN);
        if (mpfr_zero_p(y) || !inex) {
            k = mpfr_zero_p(y) ? 0 : FL_REF_SURE; /* an approximate zero: the driver raises wp */
            if (!mpfr_zero_p(y))
                mpfr_div(y, y, d, MPFR_RNDN);     /* t = 0: 1/2, exact */
        } else {
            /* |err N| <= (4|m| + |N|) u; |m| / |N| <= 2^(EXP(m) - EXP(N) + 1) */
            long r = mpfr_zero_p(m) ? 0 : (long)(mpfr_get_exp(m) - mpfr_get_exp(y)) + 1;
            if (r < 0)
                r = 0;
            inex |= mpfr_div(y, y, d, MPFR_RNDN);
            /* rel err <= (4 * 2^r + 1 + 4) u (1 + ...): 2^k ulp with k = r + 5 (covers the factor 2) */
            k = (int)r + 5;
        }
        mpfr_clears(e, m, d, (mpfr_ptr)0);
    }
    mpfr_clear(t);
    return k;
}

/* silu is swish at beta = 1. */
#define SWISH_EVALS(SUFFIX, F)                                                                       \
    int fl_ref_eval_silu##SUFFIX(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p,           \
                                 mpfr_prec_t wp)                                                     \
    {                                                                                                \
        (void)p;                                                                                     \
        return F(y, x[0], 1.0, wp);                                                                  \
    }                                                                                                \
    int fl_ref_eval_swish##SUFFIX(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p,          \
                                  mpfr_prec_t wp)                                                    \
    {                                                                                                \
        return F(y, x[0], p->beta, wp);                                                              \
    }

SWISH_EVALS(, swish_eval)
SWISH_EVALS(_dx, swish_dx)
