/* softmax.c — softmax over a row, y_j = e^(x_j - m) / sum_i e^(x_i - m) (m the row max), and its VJP
 * dx_j = y_j (dy_j - sum_i y_i dy_i), written as e_j sum_i e_i (dy_j - dy_i) / Z^2 (using sum y = 1) so that
 * an exactly zero gradient (all dy equal, or dy_j equal to the mean over every group of equal x) is
 * computed as an exact zero.
 *
 * Error analysis (reference/README.md): the differences x_i - m and dy_j - dy_i are exact (precision from
 * the exponent span); each e_i = exp(x_i - m) is within u; Z = mpfr_sum(e_i) within 2u (positive terms;
 * e_i < 2^-(2^29) underflowing to 0 adds < u); y_j = e_j / Z within 4u: chain of 4.  Exact only when every
 * operation is (all x_i equal and n a power of two: 1/n), caught by the ternary values.
 * VJP: T = sum e_i d_i within 2u A + u|T| (A = sum e_i |d_i|), numerator and the division by Z^2 add 7u:
 * k = r + 5 with A / |T| <= 2^r.  T is exactly zero iff, for every set of equal x_i, the d_i sum to 0
 * (the e^(x_i) of distinct dyadic x_i are linearly independent over the rationals,
 * Lindemann-Weierstrass); that test runs when the computed T is zero.
 * Specials: a NaN in the row -> NaN row; one +Inf -> 1 there and +0 elsewhere; several +Inf or all -Inf
 * -> NaN row; -Inf entries -> +0.  VJP: any non-finite x or dy -> NaN. */
#include "ref.h"

#include <stdlib.h>

/* d = a - b exactly (inputs carry <= 64 bits; 0 if a == b). */
static void sub_exact(mpfr_ptr d, mpfr_srcptr a, mpfr_srcptr b)
{
    mpfr_exp_t ea = mpfr_zero_p(a) ? mpfr_get_exp(b) : mpfr_get_exp(a);
    mpfr_exp_t eb = mpfr_zero_p(b) ? ea : mpfr_get_exp(b);
    if (mpfr_zero_p(a) && mpfr_zero_p(b))
        ea = eb = 0;
    mpfr_exp_t span = ea > eb ? ea - eb : eb - ea;
    mpfr_set_prec(d, (mpfr_prec_t)span + 140);
    mpfr_sub(d, a, b, MPFR_RNDN);
}

/* Returns 0 for a regular row with max in *m (a pointer into the row), 1 if the row is special
   (y set for element j). */
static int row_specials(mpfr_ptr y, mpfr_srcptr const *x, long n, long j, long *imax)
{
    long ninf = 0, nneg = 0, im = -1;
    for (long i = 0; i < n; i++) {
        if (mpfr_nan_p(x[i])) {
            mpfr_set_nan(y);
            return 1;
        }
        if (mpfr_inf_p(x[i])) {
            if (mpfr_sgn(x[i]) > 0)
                ninf++;
            else
                nneg++;
            continue;
        }
        if (im < 0 || mpfr_cmp(x[i], x[im]) > 0)
            im = i;
    }
    if (ninf > 1 || nneg == n) {
        mpfr_set_nan(y);
        return 1;
    }
    if (ninf == 1) {
        mpfr_set_ui(y, mpfr_inf_p(x[j]) && mpfr_sgn(x[j]) > 0, MPFR_RNDN);
        return 1;
    }
    if (mpfr_inf_p(x[j])) { /* -Inf */
        mpfr_set_zero(y, 1);
        return 1;
    }
    *imax = im;
    return 0;
}

/* e = exp(x_i - m); returns the ternary-inexact flag. */
static int term(mpfr_ptr e, mpfr_srcptr xi, mpfr_srcptr m, mpfr_ptr d)
{
    if (mpfr_inf_p(xi)) {
        mpfr_set_zero(e, 1);
        return 0;
    }
    sub_exact(d, xi, m);
    if (mpfr_cmp_si(d, -(1L << 29)) < 0) {
        mpfr_set_zero(e, 1); /* < 2^-(2^29): below u relative to the max term 1 */
        return 1;
    }
    return mpfr_exp(e, d, MPFR_RNDN) != 0;
}

/* Z = sum_i e_i into z; e[] at wp.  Returns inexact flag. */
static int row_exps(mpfr_t *e, mpfr_ptr z, mpfr_srcptr const *x, long n, long im, mpfr_prec_t wp)
{
    mpfr_t d;
    mpfr_init2(d, 64);
    int inex = 0;
    mpfr_ptr *ptr = malloc((size_t)n * sizeof *ptr);
    for (long i = 0; i < n; i++) {
        mpfr_init2(e[i], wp);
        inex |= term(e[i], x[i], x[im], d);
        ptr[i] = e[i];
    }
    inex |= mpfr_sum(z, ptr, (unsigned long)n, MPFR_RNDN) != 0;
    free(ptr);
    mpfr_clear(d);
    return inex;
}

int fl_ref_row_softmax(mpfr_ptr y, mpfr_srcptr const *const *xs, long n, long j, const fl_ref_params *p,
                       mpfr_prec_t wp)
{
    (void)p;
    mpfr_srcptr const *x = xs[0];
    long im;
    if (row_specials(y, x, n, j, &im))
        return FL_REF_SURE;
    mpfr_t d;
    mpfr_init2(d, 64);
    sub_exact(d, x[j], x[im]);
    int tiny = mpfr_cmp_si(d, -900) < 0; /* y_j < e^-900 < 2^-1200 */
    mpfr_clear(d);
    if (tiny)
        return fl_ref_tiny(y, 0);
    mpfr_t *e = malloc((size_t)n * sizeof *e), z;
    mpfr_init2(z, wp);
    int inex = row_exps(e, z, x, n, im, wp);
    inex |= mpfr_div(y, e[j], z, MPFR_RNDN) != 0;
    for (long i = 0; i < n; i++)
        mpfr_clear(e[i]);
    free(e);
    mpfr_clear(z);
    return inex ? fl_ref_chain_err(4) : FL_REF_SURE;
}

/* Is sum_i e^(x_i) (dy_j - dy_i) exactly zero?  Group equal x_i; every group's sum of d_i must be 0. */
static int vjp_exact_zero(mpfr_srcptr const *x, mpfr_srcptr const *dy, long n, long j)
{
    mpfr_t s, d;
    mpfr_init2(s, 64);
    mpfr_init2(d, 64);
    int zero = 1;
    for (long i = 0; i < n && zero; i++) {
        int first = 1;
        for (long k = 0; k < i; k++)
            if (mpfr_equal_p(x[k], x[i]))
                first = 0;
        if (!first)
            continue;
        /* sum over the group of (dy_j - dy_k) = |G| dy_j - sum dy_k: exactly, with mpfr_sum at high prec */
        mpfr_set_prec(s, 4096);
        mpfr_set_zero(s, 1);
        for (long k = i; k < n; k++)
            if (mpfr_equal_p(x[k], x[i])) {
                sub_exact(d, dy[j], dy[k]);
                mpfr_add(s, s, d, MPFR_RNDN); /* exact unless spans exceed 4000 bits */
            }
        zero = mpfr_zero_p(s);
    }
    mpfr_clear(s);
    mpfr_clear(d);
    return zero;
}

int fl_ref_row_softmax_vjp(mpfr_ptr y, mpfr_srcptr const *const *xs, long n, long j,
                           const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p;
    mpfr_srcptr const *x = xs[0], *dy = xs[1];
    for (long i = 0; i < n; i++)
        if (!mpfr_number_p(x[i]) || !mpfr_number_p(dy[i]))
            return fl_ref_nan(y);
    long im = 0;
    for (long i = 1; i < n; i++)
        if (mpfr_cmp(x[i], x[im]) > 0)
            im = i;
    mpfr_t *e = malloc((size_t)n * sizeof *e), z, d, a;
    mpfr_ptr *ptr = malloc((size_t)n * sizeof *ptr), *aptr = malloc((size_t)n * sizeof *aptr);
    mpfr_t *ab = malloc((size_t)n * sizeof *ab);
    mpfr_inits2(wp, z, (mpfr_ptr)0);
    mpfr_init2(d, 64);
    mpfr_init2(a, 64);
    row_exps(e, z, x, n, im, wp);
    for (long i = 0; i < n; i++) {
        sub_exact(d, dy[j], dy[i]);
        mpfr_mul(e[i], e[i], d, MPFR_RNDN); /* within 2u */
        mpfr_init2(ab[i], 64);
        mpfr_abs(ab[i], e[i], MPFR_RNDU);
        ptr[i] = e[i];
        aptr[i] = ab[i];
    }
    mpfr_sum(a, aptr, (unsigned long)n, MPFR_RNDU);
    mpfr_t t;
    mpfr_init2(t, wp);
    mpfr_sum(t, ptr, (unsigned long)n, MPFR_RNDN);
    int k;
    if (mpfr_zero_p(t)) {
        if (vjp_exact_zero(x, dy, n, j)) {
            mpfr_set_zero(y, 1);
            k = FL_REF_SURE;
        } else {
            k = 0; /* approximate zero: raise wp */
        }
    } else {
        long r = (long)(mpfr_get_exp(a) - mpfr_get_exp(t)) + 1;
        if (r < 0)
            r = 0;
        mpfr_t ej;
        mpfr_init2(ej, wp);
        term(ej, x[j], x[im], d);
        mpfr_mul(y, t, ej, MPFR_RNDN);
        mpfr_sqr(z, z, MPFR_RNDN);
        mpfr_div(y, y, z, MPFR_RNDN);
        mpfr_clear(ej);
        k = (int)r + 5;
        if (mpfr_zero_p(y))
            k = 0;
    }
    for (long i = 0; i < n; i++) {
        mpfr_clear(e[i]);
        mpfr_clear(ab[i]);
    }
    free(e);
    free(ab);
    free(ptr);
    free(aptr);
    mpfr_clears(z, d, a, t, (mpfr_ptr)0);
    return k;
}
