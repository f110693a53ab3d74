/* pattention.c — TokenFormer's score function over a row of scores A (length n):
 *     y_j = gelu(z_j),  z_j = tau A_j / ||A||_2,  tau = sqrt(n) by default (then z_j = A_j / rms(A)),
 * and its VJP: with g_j = dy_j gelu'(z_j) and P = sum_j g_j A_j,
 *     dA_k = (tau / ||A||) (g_k - A_k P / ||A||^2).
 * Error analysis (reference/README.md): ||A||^2 = mpfr_sum of exact squares (u); z_j is within 4u
 * (sqrt, tau or sqrt(n), product, quotient).  gelu's relative condition number is
 * 1 + z phi(z)/Phi(z) <= 2 + z^2; for z >= -41 (below, |y| < 2^-1200: tiny) gelu(z) is within
 * (2 + 41^2) 4u + 2^14 u < 2^15 u, k = 17.  VJP: g_j within (4 z_j^2 + 2^14) u (gelu' = Phi + z phi has
 * condition <= 4 z^2 + 2 for |z| <= 2^15), the bracket's cancellation is bounded at run time from
 * |g_k| and |A_k| sum|g_j A_j| / ||A||^2.  Exact zeros: dy = 0, or a row whose only nonzero score is
 * A_k (then g_k ||A||^2 = A_k P); others are not detected (the Ziv loop would give up).  Specials: NaN or Inf in the row, or an all-zero row -> NaN row;
 * A_j = +-0 -> +-0 (gelu(+-0)) when tau > 0. */
#include "ref.h"

#include <math.h>
#include <stdlib.h>

void fl_ref_gelu_core(mpfr_ptr y, mpfr_srcptr v, mpfr_prec_t wp);
void fl_ref_gelu_dx_terms(mpfr_ptr a, mpfr_ptr b, mpfr_srcptr v, mpfr_prec_t wp);

/* nrm2 = sum A^2 (rounded, within u) into q at wp; returns -1 for a bad row (NaN/Inf/all zero). */
static int norm2(mpfr_ptr q, mpfr_srcptr const *a, long n)
{
    mpfr_t *t = malloc((size_t)n * sizeof *t);
    mpfr_ptr *tp = calloc((size_t)n, sizeof *tp);
    int bad = 0;
    for (long k = 0; k < n; k++) {
        mpfr_init2(t[k], 2 * mpfr_get_prec(a[k]));
        if (!mpfr_number_p(a[k]))
            bad = 1;
        mpfr_sqr(t[k], a[k], MPFR_RNDN);
        tp[k] = t[k];
    }
    mpfr_sum(q, tp, (unsigned long)n, MPFR_RNDN);
    for (long k = 0; k < n; k++)
        mpfr_clear(t[k]);
    free(t);
    free(tp);
    return bad || mpfr_zero_p(q) ? -1 : 0;
}

/* s = tau / ||A|| at wp, within 3u. */
static void scale(mpfr_ptr s, mpfr_srcptr q, long n, const fl_ref_params *p)
{
    mpfr_sqrt(s, q, MPFR_RNDN);
    if (p->tau_set) {
        mpfr_d_div(s, p->tau, s, MPFR_RNDN);
    } else {
        mpfr_t t;
        mpfr_init2(t, mpfr_get_prec(s));
        mpfr_sqrt_ui(t, (unsigned long)n, MPFR_RNDN);
        mpfr_div(s, t, s, MPFR_RNDN);
        mpfr_clear(t);
    }
}

int fl_ref_row_pattention(mpfr_ptr y, mpfr_srcptr const *const *xs, long n, long j,
                          const fl_ref_params *p, mpfr_prec_t wp)
{
    mpfr_srcptr const *a = xs[0];
    mpfr_t q, z;
    mpfr_inits2(wp, q, z, (mpfr_ptr)0);
    int k;
    if (norm2(q, a, n)) {
        mpfr_set_nan(y);
        k = FL_REF_SURE;
    } else if (mpfr_zero_p(a[j]) || (p->tau_set && p->tau == 0.0)) {
        double t = p->tau_set ? p->tau : 1.0;
        mpfr_set_d(y, t, MPFR_RNDN);
        mpfr_mul(y, y, a[j], MPFR_RNDN); /* a signed zero: gelu(+-0) = +-0 */
        if (!mpfr_zero_p(y))
            mpfr_set_zero(y, 1);
        k = FL_REF_SURE;
    } else {
        scale(z, q, n, p);
        mpfr_mul(z, z, a[j], MPFR_RNDN);
        if (mpfr_cmp_si(z, -41) < 0) {
            k = fl_ref_tiny(y, 1);
        } else {
            fl_ref_gelu_core(y, z, wp); /* the formula for every z >= -41, no tail stand-ins */
            k = 17;
        }
    }
    mpfr_clears(q, z, (mpfr_ptr)0);
    return k;
}

int fl_ref_row_pattention_vjp(mpfr_ptr y, mpfr_srcptr const *const *xs, long n, long kk,
                              const fl_ref_params *p, mpfr_prec_t wp)
{
    mpfr_srcptr const *a = xs[0], *dy = xs[1];
    mpfr_t q, s, z, g, P, M, t, tk;
    mpfr_inits2(wp, q, s, z, g, P, t, tk, (mpfr_ptr)0);
    mpfr_init2(M, 64);
    int k;
    int bad = norm2(q, a, n) != 0;
    for (long j = 0; j < n; j++)
        bad |= !mpfr_number_p(dy[j]);
    if (bad) {
        mpfr_set_nan(y);
        k = FL_REF_SURE;
        goto done;
    }
    /* exact zeros: dy = 0; or A_j = 0 for every j != k, where g_k ||A||^2 = A_k P exactly */
    int dyzero = 1, others_zero = 1;
    for (long j = 0; j < n; j++) {
        dyzero &= mpfr_zero_p(dy[j]) != 0;
        if (j != kk)
            others_zero &= mpfr_zero_p(a[j]) != 0;
    }
    if (dyzero || (others_zero && !mpfr_zero_p(a[kk]))) {
        mpfr_set_zero(y, 1);
        k = FL_REF_SURE;
        goto done;
    }
    scale(s, q, n, p);
    mpfr_set_zero(P, 1);
    mpfr_set_zero(M, 1);
    double zmax = 0;
    mpfr_t *terms = malloc((size_t)n * sizeof *terms);
    mpfr_ptr *tp = calloc((size_t)n, sizeof *tp);
    for (long j = 0; j < n; j++) {
        mpfr_init2(terms[j], wp);
        tp[j] = terms[j];
        mpfr_mul(z, s, a[j], MPFR_RNDN);
        double zd = fabs(mpfr_get_d(z, MPFR_RNDN));
        if (zd > zmax)
            zmax = zd;
        /* gelu'(z) by the formula Phi(z) + z phi(z), no tails (|z| <= 2^15 keeps MPFR in range) */
        fl_ref_gelu_dx_terms(g, t, z, wp);
        mpfr_add(g, g, t, MPFR_RNDN);
        mpfr_mul(g, g, dy[j], MPFR_RNDN);
        if (j == kk)
            mpfr_set(y, g, MPFR_RNDN);            /* g_k */
        mpfr_mul(terms[j], g, a[j], MPFR_RNDN);   /* g_j A_j */
        mpfr_abs(t, terms[j], MPFR_RNDN);
        mpfr_add(M, M, t, MPFR_RNDU);             /* sum |g_j A_j|, an upper bound */
    }
    mpfr_sum(P, tp, (unsigned long)n, MPFR_RNDN);
    for (long j = 0; j < n; j++)
        mpfr_clear(terms[j]);
    free(terms);
    free(tp);
    if (zmax > 32768.0) {
        mpfr_set_nan(y); /* outside the analysed range */
        k = -2;
        goto done;
    }
    /* second = A_k P / ||A||^2 ; magnitude bound M2 = |A_k| M / ||A||^2 */
    mpfr_mul(t, a[kk], P, MPFR_RNDN);
    mpfr_div(t, t, q, MPFR_RNDN);
    mpfr_mul(M, M, a[kk], MPFR_RNDU);
    mpfr_abs(M, M, MPFR_RNDU);
    mpfr_div(M, M, q, MPFR_RNDU);
    mpfr_sub(tk, y, t, MPFR_RNDN);
    if (mpfr_zero_p(tk)) {
        mpfr_set_zero(y, 1);
        k = 0; /* an approximate zero: raise wp */
        goto done;
    }
    {
        mpfr_exp_t big = mpfr_get_exp(tk);
        if (mpfr_regular_p(y) && mpfr_get_exp(y) > big)
            big = mpfr_get_exp(y);
        if (mpfr_regular_p(M) && mpfr_get_exp(M) > big)
            big = mpfr_get_exp(M);
        long r = (long)(big - mpfr_get_exp(tk)) + 2;
        int eg = (int)ceil(log2(4.0 * zmax * zmax + 16384.0)) + 3; /* g within 2^eg u, incl. dy, products */
        mpfr_mul(y, tk, s, MPFR_RNDN);
        k = (int)r + eg + 3;
    }
done:
    mpfr_clears(q, s, z, g, P, M, t, tk, (mpfr_ptr)0);
    return k == -2 ? FL_REF_SURE : k;
}
