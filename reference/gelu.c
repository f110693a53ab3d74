/* gelu.c — gelu(x) = x Phi(x) (exact, with erfc) and gelu_tanh(x) = 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))),
 * values and d/dx.  0.044715 is the exact decimal (rounded to wp like sqrt(2/pi)).
 *
 * gelu: Phi(x) = erfc(-x/sqrt2)/2 avoids the cancellation of 1 + erf.  Error analysis: t = -x/sqrt2 is
 * within 2u (sqrt, divide); erfc's relative condition number |t erfc'(t)/erfc(t)| is below 2t^2 + 1
 * for t >= 0 (from erfc(t) > 2e^-t^2 / (sqrt(pi)(t + sqrt(t^2+2)))) and below 1 for t < 0; with
 * |x| <= 56 (t^2 <= 1568), the erfc value is within 3137 * 2u + u < 2^13 u, the product with x adds u,
 * /2 is exact: |err| <= 2 (2^13 + 2) u |y| / u ulp, k = 15.
 * Tails: x > 20: gelu = x (1 - Phi(-x)), Phi(-20) < 2^-290: fl_ref_near(x, toward 0).  x < -40:
 * |gelu| < phi(40) < 2^-1150: tiny negative.
 * gelu_tanh = x sigma(2z) = x / (1 + e^-2z), z = c x (1 + 0.044715 x^2), c = sqrt(2/pi): no cancellation.
 * Error: c within 3u, q = 1 + 0.044715x^2 within 3u, 2z within 8u; for |x| <= 20, |2z| <= 602, so
 * e^-2z is within 602*8u + u < 2^13 u; add and divide: 2^13 u + 2u: k = 15.
 * Tails: x > 20: 2z > 602, fl_ref_near(x, toward 0); x < -20: |y| < 20 e^-602, tiny negative. */
#include "ref.h"

/* Phi(x) = erfc(-x/sqrt2)/2 at wp (the /2 is exact). */
static void phi(mpfr_ptr y, mpfr_srcptr v, mpfr_prec_t wp)
{
    mpfr_t s;
    mpfr_init2(s, wp);
    mpfr_sqrt_ui(s, 2, MPFR_RNDN);
    mpfr_div(y, v, s, MPFR_RNDN);
    mpfr_neg(y, y, MPFR_RNDN);
    mpfr_erfc(y, y, MPFR_RNDN);
    mpfr_div_2ui(y, y, 1, MPFR_RNDN);
    mpfr_clear(s);
}

/* gelu by the formula (pattention.c uses it too), into y at wp; the caller multiplies further if it wants.  */
void fl_ref_gelu_core(mpfr_ptr y, mpfr_srcptr v, mpfr_prec_t wp);
void fl_ref_gelu_core(mpfr_ptr y, mpfr_srcptr v, mpfr_prec_t wp)
{
    phi(y, v, wp);
    mpfr_mul(y, y, v, MPFR_RNDN);
}

int fl_ref_gated_tails(mpfr_ptr y, mpfr_srcptr v, long hi, long lo)
{
    if (!mpfr_regular_p(v)) {
        if (mpfr_inf_p(v) && mpfr_sgn(v) < 0)
            mpfr_set_zero(y, -1);
        else
            mpfr_set(y, v, MPFR_RNDN); /* NaN, +Inf, +-0 */
        return 1;
    }
    if (mpfr_cmp_si(v, hi) > 0)
        fl_ref_near(y, v, -1);
    else if (mpfr_cmp_si(v, lo) < 0)
        fl_ref_tiny(y, 1);
    else
        return 0;
    return 1;
}

int fl_ref_gated_dx_tails(mpfr_ptr y, mpfr_srcptr v, long hi, long lo)
{
    if (mpfr_nan_p(v))
        mpfr_set_nan(y);
    else if (mpfr_inf_p(v) && mpfr_sgn(v) > 0)
        mpfr_set_ui(y, 1, MPFR_RNDN);
    else if (mpfr_inf_p(v))
        mpfr_set_zero(y, -1);
    else if (mpfr_cmp_si(v, hi) > 0)
        fl_ref_near_unit(y, 1, 1);
    else if (mpfr_cmp_si(v, lo) < 0)
        fl_ref_tiny(y, 1);
    else
        return 0;
    return 1;
}

int fl_ref_eval_gelu(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p;
    if (fl_ref_gated_tails(y, x[0], 20, -40))
        return FL_REF_SURE;
    fl_ref_gelu_core(y, x[0], wp);
    return 15;
}

/* geglu's gate: y = gelu(g) * u for regular g, u (glu.c). */
int fl_ref_gelu_times(mpfr_ptr y, mpfr_srcptr g, mpfr_srcptr u, mpfr_prec_t wp)
{
    if (mpfr_cmp_si(g, 20) > 0) {
        mpfr_t c;
        mpfr_init2(c, mpfr_get_prec(g) + mpfr_get_prec(u));
        mpfr_mul(c, g, u, MPFR_RNDN);
        fl_ref_near(y, c, -1);
        mpfr_clear(c);
        return FL_REF_SURE;
    }
    if (mpfr_cmp_si(g, -20) < 0) {
        /* |gelu(g)| < phi(g) = e^-g^2/2 / sqrt(2 pi): log2 < -0.7213 g^2 */
        double gd = mpfr_get_d(g, MPFR_RNDN);
        if (-0.7213 * gd * gd + fl_ref_log2abs(u) < -1200.0 || gd < -56.0)
            return fl_ref_tiny(y, mpfr_sgn(u) > 0); /* gelu(g) < 0 */
    }
    fl_ref_gelu_core(y, g, wp);
    mpfr_mul(y, y, u, MPFR_RNDN);
    return 16;
}

/* c = sqrt(2/pi) (within 3u), q = 0.044715 x^2 and e = e^-2z, z = c x (1 + q) (within 2^13 u for
   |x| <= 20), at the precision of c, q and e. */
static void gelu_tanh_exp(mpfr_ptr e, mpfr_ptr c, mpfr_ptr q, mpfr_srcptr v)
{
    mpfr_const_pi(c, MPFR_RNDN);
    mpfr_ui_div(c, 2, c, MPFR_RNDN);
    mpfr_sqrt(c, c, MPFR_RNDN);
    mpfr_set_str(q, "0.044715", 10, MPFR_RNDN);
    mpfr_mul(q, q, v, MPFR_RNDN);
    mpfr_mul(q, q, v, MPFR_RNDN);
    mpfr_add_ui(e, q, 1, MPFR_RNDN);             /* 1 + 0.044715 x^2 */
    mpfr_mul(e, e, c, MPFR_RNDN);
    mpfr_mul(e, e, v, MPFR_RNDN);
    mpfr_mul_si(e, e, -2, MPFR_RNDN);            /* -2z */
    mpfr_exp(e, e, MPFR_RNDN);
}

int fl_ref_eval_gelu_tanh(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p;
    mpfr_srcptr v = x[0];
    if (fl_ref_gated_tails(y, v, 20, -20))
        return FL_REF_SURE;
    mpfr_t c, q, e;
    mpfr_inits2(wp, c, q, e, (mpfr_ptr)0);
    gelu_tanh_exp(e, c, q, v);
    mpfr_add_ui(e, e, 1, MPFR_RNDN);
    mpfr_div(y, v, e, MPFR_RNDN);
    mpfr_clears(c, q, e, (mpfr_ptr)0);
    return 15;
}

/* The derivatives at +-0: Phi(0) = sigma(0) = 1/2.  Returns 1 if v is a zero. */
static int dx_at_zero(mpfr_ptr y, mpfr_srcptr v)
{
    if (!mpfr_zero_p(v))
        return 0;
    mpfr_set_d(y, 0.5, MPFR_RNDN);
    return 1;
}

/* The two terms of gelu'(x) = Phi(x) + x phi(x), phi(x) = e^{-x^2/2}/sqrt(2 pi), at wp: a = Phi(x),
   b = x phi(x) (pattention.c uses them too). */
void fl_ref_gelu_dx_terms(mpfr_ptr a, mpfr_ptr b, mpfr_srcptr v, mpfr_prec_t wp);
void fl_ref_gelu_dx_terms(mpfr_ptr a, mpfr_ptr b, mpfr_srcptr v, mpfr_prec_t wp)
{
    mpfr_t s;
    mpfr_init2(s, wp);
    phi(a, v, wp);
    mpfr_sqr(b, v, MPFR_RNDN);
    mpfr_div_si(b, b, -2, MPFR_RNDN);
    mpfr_exp(b, b, MPFR_RNDN);
    mpfr_const_pi(s, MPFR_RNDN);
    mpfr_mul_2ui(s, s, 1, MPFR_RNDN);
    mpfr_sqrt(s, s, MPFR_RNDN);
    mpfr_div(b, b, s, MPFR_RNDN);
    mpfr_mul(b, b, v, MPFR_RNDN);
    mpfr_clear(s);
}

/* d gelu/dx = Phi(x) + x phi(x).  For x >= 0 both terms are positive.
   For x < 0 the sum Phi(x) + x phi(x) cancels as x -> -Inf (it behaves as phi(x)/x^2), but never
   vanishes: its error is bounded dynamically from the terms' magnitudes.  Tails: x > 40: 1 - Phi(-x)
   + x phi(x) > 1, gap < 41 phi(40) < 2^-1100; x < -40: ~ -phi(x)/x^2, tiny negative. */
int fl_ref_eval_gelu_dx(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p;
    mpfr_srcptr v = x[0];
    if (fl_ref_gated_dx_tails(y, v, 40, -40) || dx_at_zero(y, v))
        return FL_REF_SURE;
    mpfr_t a, b;
    mpfr_inits2(wp, a, b, (mpfr_ptr)0);
    /* |x| <= 40: Phi(x) within 2^13 u (as in gelu); e^{-x^2/2} with |x^2/2| <= 800 within 800u + 2u,
       so x phi(x) within 2^10 u */
    fl_ref_gelu_dx_terms(a, b, v, wp);
    mpfr_add(y, a, b, MPFR_RNDN);
    int k;
    if (mpfr_zero_p(y)) {
        k = 0;
    } else {
        mpfr_exp_t ea = mpfr_get_exp(a), eb = mpfr_get_exp(b);
        long r = (long)((ea > eb ? ea : eb) - mpfr_get_exp(y)) + 1;
        if (r < 0)
            r = 0;
        k = (int)r + 16; /* (2^13 + 2^10) * 2 * 2^r + 2 <= 2^(r+16) */
    }
    mpfr_clears(a, b, (mpfr_ptr)0);
    return k;
}

/* d gelu_tanh/dx = sigma(2z) + x sigma(2z) sigma(-2z) 2 dz/dx, dz/dx = c (1 + 3*0.044715 x^2).
   = [1 + e(1 + x * 2c(1 + 0.134145 x^2))] / (1 + e)^2 with e = e^-2z; the numerator cancels for x < 0:
   dynamic bound as in silu.c.  Tails: x > 20: 1 + e(...) - ... with e < e^-602, just above 1;
   x < -20: tiny negative. */
int fl_ref_eval_gelu_tanh_dx(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p;
    mpfr_srcptr v = x[0];
    if (fl_ref_gated_dx_tails(y, v, 20, -20) || dx_at_zero(y, v))
        return FL_REF_SURE;
    mpfr_t c, q, e, m;
    mpfr_inits2(wp, c, q, e, m, (mpfr_ptr)0);
    gelu_tanh_exp(e, c, q, v);                   /* e^-2z within 2^13 u */
    mpfr_mul_ui(q, q, 3, MPFR_RNDN);
    mpfr_add_ui(q, q, 1, MPFR_RNDN);
    mpfr_mul(q, q, c, MPFR_RNDN);
    mpfr_mul(q, q, v, MPFR_RNDN);
    mpfr_mul_2ui(q, q, 1, MPFR_RNDN);
    mpfr_add_ui(q, q, 1, MPFR_RNDN);             /* 1 + 2 x dz/dx: cancels for x < 0 */
    /* m = e * q; |err m| <= 2^13 u |m| + e * |err q|, |err q| <= 8u (|q| + 1)... bounded below */
    mpfr_mul(m, e, q, MPFR_RNDN);
    mpfr_add_ui(y, m, 1, MPFR_RNDN);
    mpfr_add_ui(c, e, 1, MPFR_RNDN);
    mpfr_sqr(c, c, MPFR_RNDN);
    int k;
    if (mpfr_zero_p(y) || mpfr_zero_p(q)) {
        k = 0;
    } else {
        /* |err m| <= 2^14 u (|m| + |e|(|q| ... )): take E = max(EXP(m), EXP(e) + EXP(2 x dz/dx) + 1) */
        mpfr_exp_t em = mpfr_get_exp(m), ee = mpfr_get_exp(e) + 12; /* |2x dz/dx| <= 2^12 for |x| <= 20 */
        mpfr_exp_t big = em > ee ? em : ee;
        long r = (long)(big - mpfr_get_exp(y)) + 1;
        if (r < 0)
            r = 0;
        mpfr_div(y, y, c, MPFR_RNDN);
        k = (int)r + 17;
    }
    mpfr_clears(c, q, e, m, (mpfr_ptr)0);
    return k;
}
