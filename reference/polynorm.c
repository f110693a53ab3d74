/* polynorm.c — PolyNorm_r over a row (PolyCom, Zhuo et al. 2025):
 *     y_j = sum_{i=1..r} a_i N(x^i)_j + a_0,   N(v)_j = v_j / D(v),   D(v) = sqrt(mean(v^2) + eps),
 * with d/da_i (N(x^i)_j; 1 for a_0) and the VJP with respect to x:
 *     dx_k = sum_i a_i i x_k^(i-1) [ dy_k / D_i - x_k^i P_i / (n D_i^3) ],   P_i = sum_j dy_j x_j^i.
 * Coefficients as in polyrelu.c: numerators n_i = Den a_i over a common denominator Den (r when a default
 * 1/r is in use), so that exact results (a constant row with eps = 0: a_0 + sum a_i (+-1)^i) come out
 * exact.  Error analysis (reference/README.md): S_i = sum x^(2i) is one mpfr_sum of exact terms (u), the
 * mean (u), + eps (u, positive), sqrt (1.5u + u), the quotient x_j^i / D_i (u): each term T_i = n_i x_j^i / D_i
 * within 6u; y = (sum T_i + n_0) / Den: |err| <= 6u sum|T_i| + 2u|y|, k = r + 5 with sum|T_i|/|y| <= 2^r
 * (terms may cancel, so the bound is computed from the magnitudes at run time).  Exact when every
 * operation is.  The VJP: each product within 12u of its magnitude, the bracket's and the outer sum's
 * cancellation bounded the same way: k = r + 6.  Specials: any NaN or Inf in the row -> NaN row.
 * Known gap: exact zeros of the VJP that are not exact term by term (e.g. eps = 0, n = 1) make the
 * Ziv loop give up (fl_ref_round returns -1). */
#include "ref.h"

#include <stdlib.h>

typedef struct {
    mpfr_t num[5]; /* n_i, exact */
    unsigned den;
    mpfr_t D[5];   /* D_i at wp (1..r) */
    int inex;      /* some D_i inexact */
} pn_state;

static void pn_init(pn_state *s, mpfr_srcptr const *x, long n, const fl_ref_params *p, mpfr_prec_t wp)
{
    const int r = p->order;
    int any_default = 0;
    for (int i = 1; i <= r; i++)
        any_default |= !(p->a_set >> i & 1);
    s->den = any_default ? (unsigned)r : 1u;
    s->inex = 0;
    for (int i = 0; i < 5; i++) {
        mpfr_init2(s->num[i], 80);
        if (i > r)
            mpfr_set_zero(s->num[i], 1);
        else if (p->a_set >> i & 1) {
            mpfr_set_d(s->num[i], p->a[i], MPFR_RNDN);
            mpfr_mul_ui(s->num[i], s->num[i], s->den, MPFR_RNDN);
        } else
            mpfr_set_ui(s->num[i], i == 0 ? 0 : 1, MPFR_RNDN);
        mpfr_init2(s->D[i], wp);
    }
    mpfr_t *t = malloc((size_t)n * sizeof *t);
    mpfr_ptr *tp = calloc((size_t)n, sizeof *tp);
    for (long k = 0; k < n; k++) {
        mpfr_init2(t[k], 8 * mpfr_get_prec(x[k]));
        tp[k] = t[k];
    }
    mpfr_t e;
    mpfr_init2(e, 53);
    mpfr_set_d(e, p->eps, MPFR_RNDN);
    for (int i = 1; i <= r; i++) {
        for (long k = 0; k < n; k++)
            mpfr_pow_ui(t[k], x[k], 2 * (unsigned long)i, MPFR_RNDN); /* exact */
        s->inex |= mpfr_sum(s->D[i], tp, (unsigned long)n, MPFR_RNDN) != 0;
        s->inex |= mpfr_div_ui(s->D[i], s->D[i], (unsigned long)n, MPFR_RNDN) != 0;
        s->inex |= mpfr_add(s->D[i], s->D[i], e, MPFR_RNDN) != 0;
        s->inex |= mpfr_sqrt(s->D[i], s->D[i], MPFR_RNDN) != 0;
    }
    for (long k = 0; k < n; k++)
        mpfr_clear(t[k]);
    free(t);
    free(tp);
    mpfr_clear(e);
}

static void pn_clear(pn_state *s)
{
    for (int i = 0; i < 5; i++) {
        mpfr_clear(s->num[i]);
        mpfr_clear(s->D[i]);
    }
}

/* The row's norms D_i (and, for the VJP, the sums P_i) depend on the whole row but not on j.  Each
   thread keeps them for the last row it evaluated, with a copy of that row (values and signs of
   zero), the parameters and the working precision: an evaluation whose row, parameters and precision
   all match reuses them, anything else recomputes them.  The values are the ones computed afresh, bit
   for bit (same operations, same precisions), so a row of n outputs costs O(n) MPFR operations for
   its sums instead of O(n^2).  The cache lives as long as the thread (released at exit). */
typedef struct {
    int valid;
    long n;
    int nrows; /* 1: x; 2: x, dy */
    mpfr_prec_t wp;
    int order;
    double eps, a[5];
    unsigned a_set;
    mpfr_t *row[2]; /* copies */
    pn_state s;
    int nP;         /* P_1 .. P_nP computed */
    mpfr_t P[5];
} pn_cache;

static _Thread_local pn_cache cache_fwd, cache_vjp;

static void cache_drop(pn_cache *c)
{
    if (c->valid) {
        pn_clear(&c->s);
        for (int i = 1; i <= c->nP; i++)
            mpfr_clear(c->P[i]);
    }
    for (int r = 0; r < c->nrows; r++) {
        for (long k = 0; k < c->n; k++)
            mpfr_clear(c->row[r][k]);
        free(c->row[r]);
        c->row[r] = NULL;
    }
    c->valid = 0;
    c->n = 0;
    c->nrows = 0;
    c->nP = 0;
}

static int same_value(mpfr_srcptr a, mpfr_srcptr b)
{
    return mpfr_get_prec(a) == mpfr_get_prec(b) && mpfr_equal_p(a, b) && mpfr_signbit(a) == mpfr_signbit(b);
}

static int cache_hit(const pn_cache *c, mpfr_srcptr const *const *xs, int nrows, long n, const fl_ref_params *p,
                     mpfr_prec_t wp)
{
    if (!c->valid || c->n != n || c->nrows != nrows || c->wp != wp || c->order != p->order || c->a_set != p->a_set ||
        fl_f64_bits(c->eps) != fl_f64_bits(p->eps))
        return 0;
    for (int i = 0; i < 5; i++)
        if (fl_f64_bits(c->a[i]) != fl_f64_bits(p->a[i]))
            return 0;
    for (int r = 0; r < nrows; r++)
        for (long k = 0; k < n; k++)
            if (!same_value(xs[r][k], c->row[r][k]))
                return 0;
    return 1;
}

/* The state of row xs (nrows rows: x, and dy for the VJP) at wp, from the thread's cache. */
static pn_cache *row_state(pn_cache *c, mpfr_srcptr const *const *xs, int nrows, long n, const fl_ref_params *p,
                           mpfr_prec_t wp)
{
    if (cache_hit(c, xs, nrows, n, p, wp))
        return c;
    cache_drop(c);
    c->nrows = nrows;
    c->n = n;
    for (int r = 0; r < nrows; r++) {
        c->row[r] = malloc((size_t)n * sizeof *c->row[r]);
        for (long k = 0; k < n; k++) {
            mpfr_init2(c->row[r][k], mpfr_get_prec(xs[r][k]));
            mpfr_set(c->row[r][k], xs[r][k], MPFR_RNDN);
        }
    }
    c->wp = wp;
    c->order = p->order;
    c->eps = p->eps;
    c->a_set = p->a_set;
    for (int i = 0; i < 5; i++)
        c->a[i] = p->a[i];
    pn_init(&c->s, xs[0], n, p, wp);
    c->valid = 1;
    return c;
}

static int row_bad(mpfr_ptr y, mpfr_srcptr const *x, long n)
{
    for (long k = 0; k < n; k++)
        if (!mpfr_number_p(x[k])) {
            mpfr_set_nan(y);
            return 1;
        }
    return 0;
}

/* 2^r >= sum |terms| / |y| (r >= 0), from exponents; terms zero are skipped. */
static long cancel_bits(mpfr_t *t, int nt, mpfr_srcptr y)
{
    mpfr_exp_t big = mpfr_get_exp(y);
    for (int i = 0; i < nt; i++)
        if (mpfr_regular_p(t[i]) && mpfr_get_exp(t[i]) > big)
            big = mpfr_get_exp(t[i]);
    long r = (long)(big - mpfr_get_exp(y)) + 1 + 3; /* <= 8 terms: +3 */
    return r < 0 ? 0 : r;
}

int fl_ref_row_polynorm(mpfr_ptr y, mpfr_srcptr const *const *xs, long n, long j, const fl_ref_params *p,
                        mpfr_prec_t wp)
{
    mpfr_srcptr const *x = xs[0];
    if (row_bad(y, x, n))
        return FL_REF_SURE;
    const pn_state *sp = &row_state(&cache_fwd, xs, 1, n, p, wp)->s;
    const int r = p->order;
    mpfr_t t[5];
    mpfr_ptr tp[5];
    int inex = 0; /* D_i's inexactness counts only for nonzero terms */
    for (int i = 0; i <= r; i++) {
        mpfr_init2(t[i], wp);
        tp[i] = t[i];
        if (i == 0) {
            mpfr_set_prec(t[0], 80);
            mpfr_set(t[0], sp->num[0], MPFR_RNDN);
            continue;
        }
        if (mpfr_zero_p(sp->D[i])) { /* all-zero row with eps = 0: 0/0 */
            mpfr_set_nan(y);
            for (int k = 0; k <= i; k++)
                mpfr_clear(t[k]);
            return FL_REF_SURE;
        }
        mpfr_t v;
        mpfr_init2(v, (mpfr_prec_t)i * mpfr_get_prec(x[j]) + 80);
        mpfr_pow_ui(v, x[j], (unsigned long)i, MPFR_RNDN);
        mpfr_mul(v, v, sp->num[i], MPFR_RNDN);           /* exact */
        inex |= mpfr_div(t[i], v, sp->D[i], MPFR_RNDN) != 0;
        if (!mpfr_zero_p(v))
            inex |= sp->inex;
        mpfr_clear(v);
    }
    inex |= mpfr_sum(y, tp, (unsigned long)r + 1, MPFR_RNDN) != 0;
    int k;
    if (!inex) {
        k = FL_REF_SURE;
        if (sp->den > 1 && mpfr_div_ui(y, y, sp->den, MPFR_RNDN))
            k = fl_ref_chain_err(1);
    } else if (mpfr_zero_p(y)) {
        k = 0;
    } else {
        long rb = cancel_bits(t, r + 1, y);
        if (sp->den > 1)
            mpfr_div_ui(y, y, sp->den, MPFR_RNDN);
        k = (int)rb + 5;
    }
    for (int i = 0; i <= r; i++)
        mpfr_clear(t[i]);
    return k;
}

/* d/da_i y_j = N(x^i)_j (a_0: 1): within 5u, chain; exact when every operation is. */
static int da(mpfr_ptr y, mpfr_srcptr const *const *xs, long n, long j, const fl_ref_params *p,
              mpfr_prec_t wp, int i)
{
    mpfr_srcptr const *x = xs[0];
    if (row_bad(y, x, n))
        return FL_REF_SURE;
    if (i == 0 || i > p->order) {
        mpfr_set_ui(y, i == 0, MPFR_RNDN);
        return FL_REF_SURE;
    }
    const pn_state *sp = &row_state(&cache_fwd, xs, 1, n, p, wp)->s;
    int inex = mpfr_zero_p(x[j]) ? 0 : sp->inex, k;
    if (mpfr_zero_p(sp->D[i])) {
        mpfr_set_nan(y);
        k = FL_REF_SURE;
    } else {
        mpfr_t v;
        mpfr_init2(v, (mpfr_prec_t)i * mpfr_get_prec(x[j]));
        mpfr_pow_ui(v, x[j], (unsigned long)i, MPFR_RNDN);
        inex |= mpfr_div(y, v, sp->D[i], MPFR_RNDN) != 0;
        mpfr_clear(v);
        k = inex ? fl_ref_chain_err(5) : FL_REF_SURE;
    }
    return k;
}

int fl_ref_row_polynorm_da0(mpfr_ptr y, mpfr_srcptr const *const *x, long n, long j, const fl_ref_params *p, mpfr_prec_t wp)
{ return da(y, x, n, j, p, wp, 0); }
int fl_ref_row_polynorm_da1(mpfr_ptr y, mpfr_srcptr const *const *x, long n, long j, const fl_ref_params *p, mpfr_prec_t wp)
{ return da(y, x, n, j, p, wp, 1); }
int fl_ref_row_polynorm_da2(mpfr_ptr y, mpfr_srcptr const *const *x, long n, long j, const fl_ref_params *p, mpfr_prec_t wp)
{ return da(y, x, n, j, p, wp, 2); }
int fl_ref_row_polynorm_da3(mpfr_ptr y, mpfr_srcptr const *const *x, long n, long j, const fl_ref_params *p, mpfr_prec_t wp)
{ return da(y, x, n, j, p, wp, 3); }
int fl_ref_row_polynorm_da4(mpfr_ptr y, mpfr_srcptr const *const *x, long n, long j, const fl_ref_params *p, mpfr_prec_t wp)
{ return da(y, x, n, j, p, wp, 4); }

/* P_i = sum_k dy_k x_k^i at wp, one rounding (within u), from the cache (computed once per row). */
static mpfr_srcptr vjp_P(pn_cache *c, int i)
{
    while (c->nP < i) {
        const int m = c->nP + 1;
        const long n = c->n;
        mpfr_t *pt = malloc((size_t)n * sizeof *pt);
        mpfr_ptr *pp = malloc((size_t)n * sizeof *pp);
        for (long k = 0; k < n; k++) {
            mpfr_init2(pt[k], (mpfr_prec_t)(m + 1) * 64);
            mpfr_pow_ui(pt[k], c->row[0][k], (unsigned long)m, MPFR_RNDN);
            mpfr_mul(pt[k], pt[k], c->row[1][k], MPFR_RNDN); /* exact */
            pp[k] = pt[k];
        }
        mpfr_init2(c->P[m], c->wp);
        mpfr_sum(c->P[m], pp, (unsigned long)n, MPFR_RNDN);
        for (long k = 0; k < n; k++)
            mpfr_clear(pt[k]);
        free(pt);
        free(pp);
        c->nP = m;
    }
    return c->P[i];
}

/* VJP, element k = j of dx. */
int fl_ref_row_polynorm_vjp(mpfr_ptr y, mpfr_srcptr const *const *xs, long n, long j,
                            const fl_ref_params *p, mpfr_prec_t wp)
{
    mpfr_srcptr const *x = xs[0], *dy = xs[1];
    if (row_bad(y, x, n) || row_bad(y, dy, n))
        return FL_REF_SURE;
    pn_cache *c = row_state(&cache_vjp, xs, 2, n, p, wp);
    const pn_state *sp = &c->s;
    const int r = p->order;
    /* terms: for each i, A_i = n_i i x^(i-1) dy_j / D_i and B_i = -n_i i x^(2i-1) P_i / (n D_i^3) */
    mpfr_t t[8], v;
    mpfr_ptr tp[8];
    int nt = 0, bad = 0;
    mpfr_init2(v, 64);
    for (int i = 1; i <= r; i++) {
        if (mpfr_zero_p(sp->D[i]))
            bad = 1;
        if (bad)
            break;
        /* A_i */
        mpfr_init2(t[nt], wp);
        mpfr_set_prec(v, (mpfr_prec_t)i * 64 + 160);
        mpfr_pow_ui(v, x[j], (unsigned long)(i - 1), MPFR_RNDN);
        mpfr_mul(v, v, dy[j], MPFR_RNDN);
        mpfr_mul(v, v, sp->num[i], MPFR_RNDN);
        mpfr_mul_ui(v, v, (unsigned long)i, MPFR_RNDN);        /* exact */
        mpfr_div(t[nt], v, sp->D[i], MPFR_RNDN);                 /* within 6u */
        tp[nt] = t[nt];
        nt++;
        /* B_i */
        mpfr_srcptr q = vjp_P(c, i);
        mpfr_init2(t[nt], wp);
        mpfr_set_prec(v, (mpfr_prec_t)(2 * i) * 64 + 160);
        mpfr_pow_ui(v, x[j], (unsigned long)(2 * i - 1), MPFR_RNDN);
        mpfr_mul(v, v, sp->num[i], MPFR_RNDN);
        mpfr_mul_si(v, v, -(long)i, MPFR_RNDN);                  /* exact */
        mpfr_mul(t[nt], v, q, MPFR_RNDN);
        mpfr_div_ui(t[nt], t[nt], (unsigned long)n, MPFR_RNDN);
        mpfr_div(t[nt], t[nt], sp->D[i], MPFR_RNDN);
        mpfr_div(t[nt], t[nt], sp->D[i], MPFR_RNDN);
        mpfr_div(t[nt], t[nt], sp->D[i], MPFR_RNDN);               /* within 12u */
        tp[nt] = t[nt];
        nt++;
    }
    int k;
    if (bad) {
        mpfr_set_nan(y);
        k = FL_REF_SURE;
    } else {
        mpfr_sum(y, tp, (unsigned long)nt, MPFR_RNDN);
        int allzero = 1;
        for (int i = 0; i < nt; i++)
            allzero &= mpfr_zero_p(t[i]) != 0;
        if (allzero) {
            k = FL_REF_SURE; /* every term exactly zero (dy = 0, or x_j = 0 with order 1..) */
        } else if (mpfr_zero_p(y)) {
            k = 0;
        } else {
            long rb = cancel_bits(t, nt, y);
            if (sp->den > 1)
                mpfr_div_ui(y, y, sp->den, MPFR_RNDN);
            k = (int)rb + 6; /* 2 (12 * 2^rb + 2) <= 2^(rb+5)... with margin */
        }
    }
    for (int i = 0; i < nt; i++)
        mpfr_clear(t[i]);
    mpfr_clear(v);
    return k;
}
