/* relu.c — relu, relu2 (ReLU^2), leaky_relu, prelu and their derivatives (see reference/README.md).
 *
 * All four are piecewise polynomials in x with binary64 parameters: every value is computed EXACTLY
 * (the precision of y is raised to hold the product) and returned as FL_REF_SURE, so the Ziv driver
 * rounds it once.  relu'(0) is taken as 0 (the subgradient PyTorch uses); leaky/prelu'(0) = alpha. */
#include "ref.h"

/* y = a * b exactly. */
static void mul_exact(mpfr_ptr y, mpfr_srcptr a, mpfr_srcptr b)
{
    mpfr_set_prec(y, mpfr_get_prec(a) + mpfr_get_prec(b));
    mpfr_mul(y, a, b, MPFR_RNDN);
}

int fl_ref_eval_relu(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p; (void)wp;
    mpfr_set_prec(y, mpfr_get_prec(x[0]));
    if (mpfr_nan_p(x[0]) || mpfr_sgn(x[0]) > 0)
        mpfr_set(y, x[0], MPFR_RNDN);
    else
        mpfr_set_zero(y, 1); /* relu(-0) = relu(-Inf) = +0 */
    return FL_REF_SURE;
}

int fl_ref_eval_relu_dx(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p; (void)wp;
    if (mpfr_nan_p(x[0]))
        mpfr_set_nan(y);
    else
        mpfr_set_ui(y, mpfr_sgn(x[0]) > 0, MPFR_RNDN);
    return FL_REF_SURE;
}

int fl_ref_eval_relu2(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p; (void)wp;
    if (mpfr_nan_p(x[0]) || mpfr_sgn(x[0]) > 0)
        mul_exact(y, x[0], x[0]);
    else
        mpfr_set_zero(y, 1);
    return FL_REF_SURE;
}

int fl_ref_eval_relu2_dx(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p; (void)wp;
    mpfr_set_prec(y, mpfr_get_prec(x[0]) + 1);
    if (mpfr_nan_p(x[0]) || mpfr_sgn(x[0]) > 0)
        mpfr_mul_2ui(y, x[0], 1, MPFR_RNDN); /* 2 relu(x) */
    else
        mpfr_set_zero(y, 1);
    return FL_REF_SURE;
}

/* x > 0 (or NaN): x; else alpha * x (signed zero and -Inf follow the product). */
static int leaky(mpfr_ptr y, mpfr_srcptr x, double alpha)
{
    if (mpfr_nan_p(x) || mpfr_sgn(x) > 0) {
        mpfr_set_prec(y, mpfr_get_prec(x));
        mpfr_set(y, x, MPFR_RNDN);
        return FL_REF_SURE;
    }
    mpfr_t a;
    mpfr_init2(a, 53);
    mpfr_set_d(a, alpha, MPFR_RNDN);
    mul_exact(y, a, x);
    mpfr_clear(a);
    return FL_REF_SURE;
}

static int leaky_dx(mpfr_ptr y, mpfr_srcptr x, double alpha)
{
    mpfr_set_prec(y, 53);
    if (mpfr_nan_p(x))
        mpfr_set_nan(y);
    else if (mpfr_sgn(x) > 0)
        mpfr_set_ui(y, 1, MPFR_RNDN);
    else
        mpfr_set_d(y, alpha, MPFR_RNDN);
    return FL_REF_SURE;
}

/* leaky_relu and prelu are one function of x and alpha (prelu's alpha is learned, hence its d/dalpha). */
#define LEAKY_EVALS(NAME)                                                                            \
    int fl_ref_eval_##NAME(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)  \
    {                                                                                                \
        (void)wp;                                                                                    \
        return leaky(y, x[0], p->alpha);                                                             \
    }                                                                                                \
    int fl_ref_eval_##NAME##_dx(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p,            \
                                mpfr_prec_t wp)                                                      \
    {                                                                                                \
        (void)wp;                                                                                    \
        return leaky_dx(y, x[0], p->alpha);                                                          \
    }

LEAKY_EVALS(leaky_relu)
LEAKY_EVALS(prelu)

/* d prelu / d alpha = min(x, 0) (x for x <= 0, +0 for x > 0). */
int fl_ref_eval_prelu_dalpha(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p; (void)wp;
    mpfr_set_prec(y, mpfr_get_prec(x[0]));
    if (mpfr_nan_p(x[0]) || mpfr_sgn(x[0]) <= 0)
        mpfr_set(y, x[0], MPFR_RNDN);
    else
        mpfr_set_zero(y, 1);
    return FL_REF_SURE;
}
