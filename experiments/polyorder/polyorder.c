/* order.c — the safe-order map of PolyReLU / PolyNorm: thresholds, ulp sweeps, real tensors.
 * Definitions: order.h and experiments/polyorder/ORDER.md. */
#include "polyorder.h"

#include "kernels.h"
#include "ref.h"
#include "round_mpfr.h"
#include "ulp.h"

#include <float.h>
#include <math.h>
#include <mpfr.h>
#include <stdlib.h>
#include <string.h>

#define WP 512 /* working precision of the exact predicates: inputs are doubles (53 bits); x^8 of one is
                  exact at 424 bits, so every power, product and sum of two terms below is exact */

#define ACT_NAME(ID, name) #name,
static const char *const act_names[FL_ORDER_ACT_COUNT] = { FL_ACT_POLYS(ACT_NAME) };
/* The strategies below are written for these two; a new polynomial activation in act_list.h needs its own. */
_Static_assert(FL_ORDER_ACT_COUNT == 2 && FL_ORDER_POLYRELU == 0 && FL_ORDER_POLYNORM == 1, "polyrelu, polynorm");
static const char *const strategy_names[FL_ORDER_STRATEGY_COUNT] = { "fused", "naive" };
static const char *const pow_names[FL_ORDER_POW_COUNT] = { "pow", "mul" };
_Static_assert(sizeof act_names / sizeof *act_names == FL_ORDER_ACT_COUNT, "act names");
_Static_assert(sizeof strategy_names / sizeof *strategy_names == FL_ORDER_STRATEGY_COUNT, "strategy names");
_Static_assert(sizeof pow_names / sizeof *pow_names == FL_ORDER_POW_COUNT, "pow names");

const char *fl_order_act_name(fl_order_act a) { return (unsigned)a < FL_ORDER_ACT_COUNT ? act_names[a] : "?"; }
const char *fl_order_strategy_name(fl_order_strategy s)
{
    return (unsigned)s < FL_ORDER_STRATEGY_COUNT ? strategy_names[s] : "?";
}
const char *fl_order_pow_name(fl_order_pow p) { return (unsigned)p < FL_ORDER_POW_COUNT ? pow_names[p] : "?"; }

static int parse_name(int *out, const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(s, names[i])) {
            *out = i;
            return 0;
        }
    return -1;
}

int fl_order_act_parse(fl_order_act *out, const char *s)
{
    int v;
    if (parse_name(&v, s, act_names, FL_ORDER_ACT_COUNT))
        return -1;
    *out = (fl_order_act)v;
    return 0;
}

int fl_order_strategy_parse(fl_order_strategy *out, const char *s)
{
    int v;
    if (parse_name(&v, s, strategy_names, FL_ORDER_STRATEGY_COUNT))
        return -1;
    *out = (fl_order_strategy)v;
    return 0;
}

int fl_order_pow_parse(fl_order_pow *out, const char *s)
{
    int v;
    if (parse_name(&v, s, pow_names, FL_ORDER_POW_COUNT))
        return -1;
    *out = (fl_order_pow)v;
    return 0;
}

void fl_order_cfg_init(fl_order_cfg *c, fl_order_act act, int order)
{
    memset(c, 0, sizeof *c);
    c->act = act;
    c->order = order;
    c->n = 4096;
    c->bulk = 1.0;
    c->eps = 1e-6;
    c->pow = FL_ORDER_POW_ONCE;
}

double fl_order_coef_exact(const fl_order_cfg *c, int i)
{
    if (i < 0 || i > c->order)
        return 0.0;
    if (c->a_set >> i & 1)
        return c->a[i];
    return i == 0 ? 0.0 : 1.0 / c->order;
}

float fl_order_coef_f32(const fl_order_cfg *c, int i) { return (float)fl_order_coef_exact(c, i); }

/* Exact coefficients as numerators over one denominator (as reference/polyrelu.c does): den = r when
   a default 1/r is in use, else 1; num_i = den * a_i exactly (53 + 3 bits). */
static unsigned coef_exact(mpfr_t num[FL_POLY_MAX_ORDER + 1], const fl_order_cfg *c)
{
    int any_default = 0;
    for (int i = 1; i <= c->order; i++)
        any_default |= !(c->a_set >> i & 1);
    const unsigned den = any_default ? (unsigned)c->order : 1u;
    for (int i = 0; i <= FL_POLY_MAX_ORDER; i++) {
        mpfr_init2(num[i], 64);
        if (i > c->order)
            mpfr_set_zero(num[i], 1);
        else if (c->a_set >> i & 1) {
            mpfr_set_d(num[i], c->a[i], MPFR_RNDN);
            mpfr_mul_ui(num[i], num[i], den, MPFR_RNDN);
        } else
            mpfr_set_ui(num[i], i == 0 ? 0 : 1, MPFR_RNDN);
    }
    return den;
}

static void coef_clear(mpfr_t num[FL_POLY_MAX_ORDER + 1])
{
    for (int i = 0; i <= FL_POLY_MAX_ORDER; i++)
        mpfr_clear(num[i]);
}

static fl_poly_coef coef_f32(const fl_order_cfg *c)
{
    fl_poly_coef k;
    memset(&k, 0, sizeof k);
    k.order = c->order;
    for (int i = 0; i <= c->order; i++)
        k.a[i] = fl_order_coef_f32(c, i);
    return k;
}

/* ---- the naive strategy ------------------------------------------------------------------------- */

/* Names of the intermediates (cause strings are static). */
static const char *const nm_pow[] = { "", "x", "x^2", "x^3", "x^4" };
static const char *const nm_term_relu[] = { "a0", "a1*x", "a2*x^2", "a3*x^3", "a4*x^4" };
static const char *const nm_sq[] = { "", "x^2", "(x^2)^2", "(x^3)^2", "(x^4)^2" };
static const char *const nm_mean[] = { "", "mean(x^2)", "mean((x^2)^2)", "mean((x^3)^2)", "mean((x^4)^2)" };
static const char *const nm_deps[] = { "", "mean(x^2)+eps", "mean(x^4)+eps", "mean(x^6)+eps", "mean(x^8)+eps" };
static const char *const nm_sqrt[] = { "", "sqrt(.. x^2 ..)", "sqrt(.. x^4 ..)", "sqrt(.. x^6 ..)", "sqrt(.. x^8 ..)" };
static const char *const nm_norm[] = { "", "N(x)", "N(x^2)", "N(x^3)", "N(x^4)" };
static const char *const nm_term_norm[] = { "a0", "a1*N(x)", "a2*N(x^2)", "a3*N(x^3)", "a4*N(x^4)" };

typedef struct {
    fl_format f;
    mpfr_t bnd;        /* B_F */
    int ties;          /* B_F itself overflows */
    const char *cause; /* first overflow */
} nvc;

static void nvc_init(nvc *c, fl_format f)
{
    c->f = f;
    mpfr_init2(c->bnd, 64);
    mpfr_set_d(c->bnd, fl_format_rne_boundary(f, &c->ties), MPFR_RNDN);
    c->cause = NULL;
}

static void nvc_clear(nvc *c) { mpfr_clear(c->bnd); }

/* v (exact) -> RN_F(v) in place; an overflow records its name and leaves +-Inf (NaN stays NaN). */
static void nv_rn(nvc *c, mpfr_ptr v, const char *what)
{
    if (mpfr_nan_p(v) || mpfr_inf_p(v)) {
        if (!c->cause)
            c->cause = what;
        return;
    }
    const int cmp = mpfr_cmpabs(v, c->bnd);
    if (cmp > 0 || (cmp == 0 && c->ties)) {
        if (!c->cause)
            c->cause = what;
        mpfr_set_inf(v, mpfr_sgn(v));
        return;
    }
    const uint32_t code = fl_mpfr_encode(c->f, v, FL_RND_NE, FL_OVF_SATURATE, NULL);
    const int neg = mpfr_signbit(v);
    fl_mpfr_decode(v, c->f, code);
    if (mpfr_zero_p(v))
        mpfr_setsign(v, v, neg, MPFR_RNDN);
}

/* Stored powers p[1..r] of the stored input xv (exact product, one rounding each). */
static void nv_powers(nvc *c, mpfr_t *p, mpfr_srcptr xv, int r, fl_order_pow pw)
{
    mpfr_set(p[1], xv, MPFR_RNDN);
    for (int i = 2; i <= r; i++) {
        if (pw == FL_ORDER_POW_MUL)
            mpfr_mul(p[i], p[i - 1], xv, MPFR_RNDN);
        else
            mpfr_pow_ui(p[i], xv, (unsigned long)i, MPFR_RNDN);
        nv_rn(c, p[i], nm_pow[i]);
    }
}

/* t_i = RN(a_i v_i); s_1 = t_1, s_i = RN(s_(i-1) + t_i); y = RN(s_r + a_0) when a_0 != 0. */
static void nv_combine(nvc *c, mpfr_ptr y, mpfr_t *v, const fl_order_cfg *cfg, const char *const *tn)
{
    mpfr_t t;
    mpfr_init2(t, WP);
    const float a0 = fl_order_coef_f32(cfg, 0);
    for (int i = 1; i <= cfg->order; i++) {
        mpfr_set_d(t, (double)fl_order_coef_f32(cfg, i), MPFR_RNDN);
        mpfr_mul(t, t, v[i], MPFR_RNDN); /* 0 * Inf = NaN: the Inf was already an overflow */
        nv_rn(c, t, tn[i]);
        if (i == 1) {
            mpfr_set(y, t, MPFR_RNDN);
        } else {
            mpfr_add(y, y, t, MPFR_RNDN);
            nv_rn(c, y, i == cfg->order && a0 == 0.0f ? "output" : "sum");
        }
    }
    if (a0 != 0.0f) {
        mpfr_set_d(t, (double)a0, MPFR_RNDN);
        mpfr_add(y, y, t, MPFR_RNDN);
        nv_rn(c, y, "output");
    }
    mpfr_clear(t);
}

static void nv_polyrelu(nvc *c, mpfr_ptr y, const fl_order_cfg *cfg, mpfr_srcptr xs)
{
    mpfr_t p[FL_POLY_MAX_ORDER + 1];
    for (int i = 0; i <= FL_POLY_MAX_ORDER; i++)
        mpfr_init2(p[i], WP);
    mpfr_set(p[0], xs, MPFR_RNDN);
    if (!(mpfr_sgn(p[0]) > 0) && !mpfr_nan_p(p[0]))
        mpfr_set_zero(p[0], 1); /* relu: exact */
    nv_powers(c, p, p[0], cfg->order, cfg->pow);
    nv_combine(c, y, p, cfg, nm_term_relu);
    for (int i = 0; i <= FL_POLY_MAX_ORDER; i++)
        mpfr_clear(p[i]);
}

/* The row is the probe xs and n-1 copies of bs (both stored values); output at the probe. */
static void nv_polynorm(nvc *c, mpfr_ptr y, const fl_order_cfg *cfg, mpfr_srcptr xs, mpfr_srcptr bs)
{
    const int r = cfg->order;
    mpfr_t p[FL_POLY_MAX_ORDER + 1], q[FL_POLY_MAX_ORDER + 1], u, v, m, e;
    for (int i = 0; i <= FL_POLY_MAX_ORDER; i++) {
        mpfr_init2(p[i], WP);
        mpfr_init2(q[i], WP);
    }
    mpfr_inits2(WP, u, v, m, e, (mpfr_ptr)0);
    nv_powers(c, p, xs, r, cfg->pow);
    nv_powers(c, q, bs, r, cfg->pow);
    mpfr_set_d(e, (double)(float)cfg->eps, MPFR_RNDN); /* eps32: the scalar in fp32 opmath */
    for (int i = 1; i <= r; i++) {
        mpfr_sqr(u, p[i], MPFR_RNDN);
        nv_rn(c, u, nm_sq[i]);
        mpfr_sqr(v, q[i], MPFR_RNDN);
        nv_rn(c, v, nm_sq[i]);
        /* mean over the row: (u + (n-1) v) / n, exact then one rounding (p <= 11 bits: a 512-bit
           quotient is never within 2^-500 of a midpoint unless exact) */
        mpfr_mul_ui(m, v, (unsigned long)(cfg->n - 1), MPFR_RNDN);
        mpfr_add(m, m, u, MPFR_RNDN);
        mpfr_div_ui(m, m, (unsigned long)cfg->n, MPFR_RNDN);
        nv_rn(c, m, nm_mean[i]);
        mpfr_add(m, m, e, MPFR_RNDN);
        nv_rn(c, m, nm_deps[i]);
        mpfr_sqrt(m, m, MPFR_RNDN);
        nv_rn(c, m, nm_sqrt[i]);
        if (mpfr_zero_p(m)) {
            if (!c->cause)
                c->cause = "zero denominator";
        }
        mpfr_div(p[i], p[i], m, MPFR_RNDN); /* IEEE: x/0 = +-Inf, 0/0 = NaN, x/Inf = 0 */
        nv_rn(c, p[i], nm_norm[i]);
    }
    nv_combine(c, y, p, cfg, nm_term_norm);
    for (int i = 0; i <= FL_POLY_MAX_ORDER; i++) {
        mpfr_clear(p[i]);
        mpfr_clear(q[i]);
    }
    mpfr_clears(u, v, m, e, (mpfr_ptr)0);
}

const char *fl_order_naive_eval(double *y, const fl_order_cfg *c, fl_format f, double x, int constant_row)
{
    nvc ctx;
    nvc_init(&ctx, f);
    mpfr_t xs, bs, out;
    mpfr_inits2(WP, xs, bs, out, (mpfr_ptr)0);
    mpfr_set_d(xs, x, MPFR_RNDN);
    nv_rn(&ctx, xs, "input");
    mpfr_set_d(bs, constant_row ? x : c->bulk, MPFR_RNDN);
    nv_rn(&ctx, bs, "input");
    if (c->act == FL_ORDER_POLYRELU)
        nv_polyrelu(&ctx, out, c, xs);
    else
        nv_polynorm(&ctx, out, c, xs, bs);
    *y = mpfr_get_d(out, MPFR_RNDN);
    const char *cause = ctx.cause;
    mpfr_clears(xs, bs, out, (mpfr_ptr)0);
    nvc_clear(&ctx);
    return cause;
}

/* ---- exact values (fused ideal, reference) ------------------------------------------------------ */

/* PolyReLU at y's precision: sum_i num_i max(x, 0)^i (every term exact), one rounding, then /den.
   The error exponent as exact_eval's. */
static int exact_polyrelu(mpfr_ptr y, mpfr_t num[FL_POLY_MAX_ORDER + 1], unsigned den, int r, double x)
{
    mpfr_t t[FL_POLY_MAX_ORDER + 1], w;
    mpfr_ptr tp[FL_POLY_MAX_ORDER + 1];
    const double rx = x > 0 ? x : 0.0;
    mpfr_init2(w, 8 * 53 + 64);
    for (int i = 0; i <= r; i++) {
        mpfr_init2(t[i], 4 * 53 + 128);
        mpfr_set_d(w, rx, MPFR_RNDN);
        mpfr_pow_ui(t[i], w, (unsigned long)i, MPFR_RNDN);
        mpfr_mul(t[i], t[i], num[i], MPFR_RNDN); /* exact */
        tp[i] = t[i];
    }
    int inex = mpfr_sum(y, tp, (unsigned long)r + 1, MPFR_RNDN);
    if (den > 1)
        inex |= mpfr_div_ui(y, y, den, MPFR_RNDN);
    for (int i = 0; i <= r; i++)
        mpfr_clear(t[i]);
    mpfr_clear(w);
    return inex ? 2 : FL_REF_SURE;
}

/* S_i, the row sum of x^(2i), into D (one rounding to D's precision; exact for the outlier row at WP):
   taken from S[i] when S holds it, else summed over the row xr[0..n-1] or, without xr, over the
   outlier row (probe x, n - 1 elements at c->bulk) and kept in S[i] when S is non-NULL.  tmp: scratch
   of 8 * 53 + 64 bits. */
static void polynorm_row_sum(mpfr_ptr D, mpfr_t *S, const fl_order_cfg *c, double x, const double *xr, long n,
                             int i, mpfr_ptr tmp)
{
    if (S && !mpfr_nan_p(S[i])) {
        mpfr_set(D, S[i], MPFR_RNDN);
        return;
    }
    if (xr) {
        mpfr_t *pw = malloc((size_t)n * sizeof *pw);
        mpfr_ptr *pp = malloc((size_t)n * sizeof *pp);
        for (long q = 0; q < n; q++) {
            mpfr_init2(pw[q], 8 * 53 + 8);
            mpfr_set_d(pw[q], xr[q], MPFR_RNDN);
            mpfr_pow_ui(pw[q], pw[q], 2 * (unsigned long)i, MPFR_RNDN); /* exact */
            pp[q] = pw[q];
        }
        mpfr_sum(D, pp, (unsigned long)n, MPFR_RNDN);
        for (long q = 0; q < n; q++)
            mpfr_clear(pw[q]);
        free(pw);
        free(pp);
    } else {
        mpfr_set_d(tmp, c->bulk, MPFR_RNDN);
        mpfr_pow_ui(tmp, tmp, 2 * (unsigned long)i, MPFR_RNDN);
        mpfr_mul_ui(D, tmp, (unsigned long)(n - 1), MPFR_RNDN);
        mpfr_set_d(tmp, x, MPFR_RNDN);
        mpfr_pow_ui(tmp, tmp, 2 * (unsigned long)i, MPFR_RNDN);
        mpfr_add(D, D, tmp, MPFR_RNDN);
    }
    if (S)
        mpfr_set(S[i], D, MPFR_RNDN);
}

/* PolyNorm's sum y = sum t_i, rounded once, divided by den; the error exponent as exact_eval's.  inex:
   whether any term is nonzero. */
static int polynorm_finish(mpfr_ptr y, mpfr_t t[FL_POLY_MAX_ORDER + 1], int r, unsigned den, int inex)
{
    if (!inex) {
        int k = FL_REF_SURE; /* x = 0: every term is exactly 0 */
        if (den > 1 && mpfr_div_ui(y, y, den, MPFR_RNDN))
            k = 1;
        return k;
    }
    if (mpfr_zero_p(y))
        return 0; /* total cancellation at wp: the caller raises wp */
    mpfr_exp_t big = mpfr_get_exp(y);
    for (int i = 0; i <= r; i++)
        if (mpfr_regular_p(t[i]) && mpfr_get_exp(t[i]) > big)
            big = mpfr_get_exp(t[i]);
    if (den > 1)
        mpfr_div_ui(y, y, den, MPFR_RNDN);
    const int k = (int)(big - mpfr_get_exp(y)) + 6; /* 2^(big-EXP) >= sum|t|/|y|; 6u+2u within 2^5 ulp */
    return k < 5 ? 5 : k;
}

/* PolyNorm at wp bits on the outlier row with probe x, or on the row xr[0..nr-1] (x its element):
   y = (sum_i num_i x^i / D_i) / den.  The error exponent as exact_eval's. */
static int exact_polynorm(mpfr_ptr y, mpfr_t num[FL_POLY_MAX_ORDER + 1], unsigned den, const fl_order_cfg *c,
                          double x, const double *xr, long nr, mpfr_prec_t wp, mpfr_t *S)
{
    /* D_i = sqrt(S_i / n + eps): S_i one rounding (mpfr_sum, or exact for the outlier row at WP),
       then /n, +eps, sqrt: D_i within 4u; t_i = num_i x^i / D_i within 6u; sum: |err| <=
       6u sum|t_i| + u|y|; /den one more u|y|. */
    const int r = c->order;
    const long n = xr ? nr : c->n;
    mpfr_t t[FL_POLY_MAX_ORDER + 1], D, e, tmp;
    mpfr_ptr tp[FL_POLY_MAX_ORDER + 1];
    mpfr_inits2(wp, D, e, (mpfr_ptr)0);
    mpfr_init2(tmp, 8 * 53 + 64);
    mpfr_set_d(e, c->eps, MPFR_RNDN);
    mpfr_init2(t[0], 64);
    mpfr_set(t[0], num[0], MPFR_RNDN);
    tp[0] = t[0];
    for (int i = 1; i <= r; i++) {
        mpfr_init2(t[i], wp);
        tp[i] = t[i];
    }
    int inex = 0, k = FL_REF_SURE;
    for (int i = 1; i <= r; i++) {
        polynorm_row_sum(D, S, c, x, xr, n, i, tmp);
        mpfr_div_ui(D, D, (unsigned long)n, MPFR_RNDN);
        mpfr_add(D, D, e, MPFR_RNDN);
        mpfr_sqrt(D, D, MPFR_RNDN);
        mpfr_set_d(tmp, x, MPFR_RNDN);
        mpfr_pow_ui(tmp, tmp, (unsigned long)i, MPFR_RNDN);
        mpfr_mul(tmp, tmp, num[i], MPFR_RNDN); /* exact */
        if (mpfr_zero_p(D)) {
            mpfr_set_nan(y); /* exact: k stays FL_REF_SURE */
            goto out;
        }
        mpfr_div(t[i], tmp, D, MPFR_RNDN);
        inex |= !mpfr_zero_p(t[i]);
    }
    mpfr_sum(y, tp, (unsigned long)r + 1, MPFR_RNDN);
    k = polynorm_finish(y, t, r, den, inex);
out:
    for (int i = 0; i <= r; i++)
        mpfr_clear(t[i]);
    mpfr_clears(D, e, tmp, (mpfr_ptr)0);
    return k;
}

/* The exact output at working precision wp (PolyReLU: exact at WP; PolyNorm on the outlier row with
   probe x, or on a general row xr[0..n-1] at element j when xr != NULL).  Returns the error exponent
   k: |y - f| <= 2^k ulp_wp(y), or FL_REF_SURE when y is exact.  S_i (the row sums of x^(2i)) are
   written to S when non-NULL (PolyNorm, at wp bits). */
static int exact_eval(mpfr_ptr y, const fl_order_cfg *c, double x, const double *xr, long nr, long j,
                      mpfr_prec_t wp, mpfr_t *S)
{
    mpfr_t num[FL_POLY_MAX_ORDER + 1];
    const unsigned den = coef_exact(num, c);
    mpfr_set_prec(y, wp);
    if (xr)
        x = xr[j];
    const int k = c->act == FL_ORDER_POLYRELU ? exact_polyrelu(y, num, den, c->order, x)
                                              : exact_polynorm(y, num, den, c, x, xr, nr, wp, S);
    coef_clear(num);
    return k;
}

/* Correctly rounded encoding in f (RNE, no saturation) and the exact value (at >= 256 bits) in v. */
static int exact_round(uint32_t *code, mpfr_ptr v, const fl_order_cfg *c, fl_format f, double x,
                       const double *xr, long nr, long j, mpfr_t *S)
{
    mpfr_prec_t p;
    mpfr_exp_t emin, emax;
    fl_mpfr_format_range(f, &p, &emin, &emax);
    for (mpfr_prec_t wp = 256; wp <= 16384; wp *= 2) {
        const int k = exact_eval(v, c, x, xr, nr, j, wp, wp == 256 ? S : NULL);
        if (mpfr_nan_p(v) || k == FL_REF_SURE || (mpfr_regular_p(v) && k < wp - 8 &&
                                                 mpfr_can_round(v, wp - k, MPFR_RNDN, MPFR_RNDZ, p + 1))) {
            *code = fl_mpfr_encode(f, v, FL_RND_NE, FL_OVF_NOSATURATE, NULL);
            return 0;
        }
    }
    *code = fl_mpfr_encode(f, v, FL_RND_NE, FL_OVF_NOSATURATE, NULL);
    return -1;
}

/* |dec(code) - v| / ulp_F(v) (numerics/ulp.h's convention), v exact; +Inf for a class mismatch. */
static double ulp_err_mpfr(fl_format f, uint32_t code, mpfr_srcptr v)
{
    const fl_format_desc *d = fl_format_get(f);
    if (mpfr_nan_p(v))
        return fl_is_nan(d, code) ? 0.0 : INFINITY;
    if (fl_is_nan(d, code) || fl_is_inf(d, code))
        return INFINITY;
    mpfr_t dv;
    mpfr_init2(dv, mpfr_get_prec(v) + 64);
    fl_mpfr_decode(dv, f, code);
    mpfr_sub(dv, dv, v, MPFR_RNDN);
    const int emin = 1 - d->bias;
    int e = mpfr_zero_p(v) ? emin : (int)mpfr_get_exp(v) - 1;
    if (e < emin)
        e = emin;
    mpfr_mul_2si(dv, dv, -(e - d->mbits), MPFR_RNDN);
    const double u = fabs(mpfr_get_d(dv, MPFR_RNDN));
    mpfr_clear(dv);
    return u;
}

int fl_order_ref(uint32_t *code, const fl_order_cfg *c, fl_format f, double x)
{
    if (c->act == FL_ORDER_POLYRELU) {
        /* the library reference, reference/polyrelu.c */
        const fl_ref_fn *fn = fl_ref_lookup("polyrelu");
        fl_ref_params p;
        fl_ref_params_init(&p, fn);
        p.order = c->order;
        for (int i = 0; i <= FL_POLY_MAX_ORDER; i++)
            if (c->a_set >> i & 1) {
                p.a[i] = c->a[i];
                p.a_set |= 1u << i;
            }
        mpfr_t xm;
        mpfr_init2(xm, 64);
        mpfr_set_d(xm, x, MPFR_RNDN);
        mpfr_srcptr xs[1] = { xm };
        const int rc = fl_ref_round(code, f, FL_RND_NE, FL_OVF_NOSATURATE, fl_ref_find_eval(fn, "")->eval, xs, &p);
        mpfr_clear(xm);
        return rc;
    }
    mpfr_t v;
    mpfr_init2(v, 256);
    const int rc = exact_round(code, v, c, f, x, NULL, 0, 0, NULL);
    mpfr_clear(v);
    return rc;
}

double fl_order_ulp_error(const fl_order_cfg *c, fl_format f, double x, uint32_t code)
{
    mpfr_t v;
    mpfr_init2(v, 256);
    uint32_t cr;
    exact_round(&cr, v, c, f, x, NULL, 0, 0, NULL);
    const double u = ulp_err_mpfr(f, code, v);
    mpfr_clear(v);
    return u;
}

const char *fl_order_fused_overflow(const fl_order_cfg *c, fl_format f, double x)
{
    int ties;
    const double B = fl_format_rne_boundary(f, &ties);
    const double B32 = fl_format_rne_boundary(FL_FMT_FP32, NULL); /* ties overflow in fp32 too */
    mpfr_t y, S[FL_POLY_MAX_ORDER + 1];
    mpfr_init2(y, 256);
    for (int i = 0; i <= FL_POLY_MAX_ORDER; i++) {
        mpfr_init2(S[i], 256);
        mpfr_set_nan(S[i]);
    }
    exact_eval(y, c, x, NULL, 0, 0, 256, c->act == FL_ORDER_POLYNORM ? S : NULL);
    const char *cause = NULL;
    if (c->act == FL_ORDER_POLYNORM)
        for (int i = c->order; i >= 1 && !cause; i--)
            if (mpfr_cmp_d(S[i], B32) >= 0)
                cause = i == 1 ? "fp32 row sum of x^2" : i == 2 ? "fp32 row sum of x^4"
                      : i == 3 ? "fp32 row sum of x^6" : "fp32 row sum of x^8";
    if (!cause && !mpfr_nan_p(y)) {
        mpfr_set_d(S[0], B, MPFR_RNDN);
        const int cmp = mpfr_cmpabs(y, S[0]);
        if (cmp > 0 || (cmp == 0 && ties))
            cause = "output";
    }
    mpfr_clear(y);
    for (int i = 0; i <= FL_POLY_MAX_ORDER; i++)
        mpfr_clear(S[i]);
    return cause;
}

/* ---- the fp32 kernel ------------------------------------------------------------------------------ */

float fl_order_fused_f32(const fl_order_cfg *c, double x, int *f32_overflow)
{
    const fl_poly_coef k = coef_f32(c);
    const float xf = (float)x;
    *f32_overflow = 0;
    if (c->act == FL_ORDER_POLYRELU) {
        const float y = fl_polyrelu_f32(&k, xf);
        *f32_overflow = isinf(y) && !isinf(xf);
        return y;
    }
    const size_t n = (size_t)c->n;
    float *row = malloc(n * sizeof *row), y = NAN;
    if (!row)
        return NAN;
    row[0] = xf;
    for (size_t q = 1; q < n; q++)
        row[q] = (float)c->bulk;
    float out[1] = { 0 };
    float *yrow = malloc(n * sizeof *yrow);
    if (yrow) {
        fl_kin in = { row, FL_FMT_FP32, NULL };
        fl_kout o = { yrow, FL_FMT_FP32, NULL, NULL };
        if (!fl_polynorm_fwd(o, in, 1, n, &k, (float)c->eps))
            out[0] = yrow[0];
        y = out[0];
        /* the row sums in fp32 (sequential; an overflow to Inf does not depend on the order when the
           probe's term dominates, which it does wherever it can overflow) */
        float S[FL_POLY_MAX_ORDER + 1] = { 0 };
        for (size_t q = 0; q < n; q++)
            fl_polynorm_fwd_accum(S, c->order, row[q]);
        for (int i = 1; i <= c->order; i++)
            *f32_overflow |= isinf(S[i]);
        free(yrow);
    }
    free(row);
    return y;
}

/* ---- searches ------------------------------------------------------------------------------------- */

typedef int (*pred_fn)(const void *ctx, double x);

/* The smallest positive x (a double, or a float when f32) in [lo, hi] with P(x), assuming P is
   monotone (false then true) between consecutive scan points: 16 scan points per binade, then
   bisection on the bit patterns.  NaN if P is false at hi. */
static double first_true(pred_fn P, const void *ctx, int f32, double lo, double hi)
{
    uint64_t a, b, step;
    if (f32) {
        a = fl_f32_bits((float)lo);
        b = fl_f32_bits((float)hi);
        step = 1u << 19;
    } else {
        a = fl_f64_bits(lo);
        b = fl_f64_bits(hi);
        step = 1ull << 48;
    }
#define VAL(i) (f32 ? (double)fl_f32_from_bits((uint32_t)(i)) : fl_f64_from_bits(i))
    if (P(ctx, VAL(a)))
        return VAL(a);
    uint64_t prev = a, cur = a;
    for (;;) {
        cur = b - cur <= step ? b : cur + step;
        if (P(ctx, VAL(cur)))
            break;
        if (cur == b)
            return NAN;
        prev = cur;
    }
    /* P(prev) false, P(cur) true */
    while (cur - prev > 1) {
        const uint64_t mid = prev + (cur - prev) / 2;
        if (P(ctx, VAL(mid)))
            cur = mid;
        else
            prev = mid;
    }
    return VAL(cur);
#undef VAL
}

typedef struct {
    const fl_order_cfg *c;
    fl_format f;
} pctx;

static int p_fused_ovf(const void *v, double x)
{
    const pctx *p = v;
    return fl_order_fused_overflow(p->c, p->f, x) != NULL;
}

static int p_fused_not_flushed(const void *v, double x)
{
    const pctx *p = v;
    uint32_t code;
    mpfr_t y;
    mpfr_init2(y, 256);
    exact_round(&code, y, p->c, p->f, x, NULL, 0, 0, NULL);
    const int flushed = (code & ((1u << (fl_format_get(p->f)->bits - 1)) - 1u)) == 0 && !mpfr_zero_p(y);
    const int exact_zero = mpfr_zero_p(y);
    mpfr_clear(y);
    return !flushed && !exact_zero;
}

static int p_kernel_ovf(const void *v, double x)
{
    const pctx *p = v;
    int of;
    const float y = fl_order_fused_f32(p->c, x, &of);
    if (of || isnan(y) || isinf(y))
        return 1;
    int ties;
    const double B = fl_format_rne_boundary(p->f, &ties);
    return fabs((double)y) > B || (fabs((double)y) == B && ties);
}

/* ---- one entry ------------------------------------------------------------------------------------- */

/* y (the naive output at x) is 0 although the exact output is not. */
static int is_flushed_naive(const fl_order_cfg *c, double x, double y)
{
    if (y != 0.0)
        return 0;
    mpfr_t v;
    mpfr_init2(v, 256);
    exact_eval(v, c, x, NULL, 0, 0, 256, NULL);
    const int nz = !mpfr_zero_p(v);
    mpfr_clear(v);
    return nz;
}

/* Encodes a double that is a value of f (or +-Inf/NaN). */
static uint32_t enc_value(fl_format f, double y)
{
    return fl_encode_f64(f, y, FL_RND_NE, FL_OVF_NOSATURATE, 0);
}

/* PolyNorm's output bound |a0| + sqrt(n) sum_i |a_i| (|N(v)| < sqrt(n)); none for PolyReLU. */
static double entry_output_bound(const fl_order_cfg *c)
{
    if (c->act != FL_ORDER_POLYNORM)
        return INFINITY;
    double sa = 0;
    for (int i = 1; i <= c->order; i++)
        sa += fabs(fl_order_coef_exact(c, i));
    return fabs(fl_order_coef_exact(c, 0)) + sqrt((double)c->n) * sa;
}

/* PolyNorm's constant rows at the positive encodings from the smallest up: the last level whose naive
   output is not finite before the first one whose output is (NaN when the smallest one's is). */
static double naive_small_row_nonfinite(const fl_order_cfg *c, fl_format f)
{
    double last = NAN;
    for (uint32_t code = 1; code <= fl_format_get(f)->max_mag; code++) {
        const double x = fl_decode(f, code);
        double y;
        fl_order_naive_eval(&y, c, f, x, 1);
        if (isfinite(y))
            break;
        last = x;
    }
    return last;
}

/* The naive strategy's thresholds, from every positive encoding in order: the first whose output
   overflows (and what overflows), the last of the run of flushed outputs from the smallest up. */
static void entry_naive(fl_order_entry *e, const fl_order_cfg *c, fl_format f)
{
    const uint32_t maxc = fl_format_get(f)->max_mag;
    uint32_t first_ovf = 0, last_flush = 0;
    int flushing = 1;
    for (uint32_t code = 1; code <= maxc; code++) {
        const double x = fl_decode(f, code);
        double y;
        const char *cause = fl_order_naive_eval(&y, c, f, x, 0);
        if (flushing) {
            if (!cause && is_flushed_naive(c, x, y))
                last_flush = code;
            else
                flushing = 0;
        }
        if (cause && !first_ovf) {
            first_ovf = code;
            e->overflow_cause = cause;
        }
        if (first_ovf && !flushing)
            break;
    }
    if (first_ovf) {
        const double v = fl_decode(f, first_ovf), pv = fl_decode(f, first_ovf - 1);
        e->overflow_input = v;
        e->overflow_threshold = pv + (v - pv) / 2; /* the rounding boundary below v */
        e->overflow_inclusive = (first_ovf & 1u) == 0; /* the tie goes to the even code */
    } else {
        int ties;
        e->overflow_threshold = fl_format_rne_boundary(f, &ties);
        e->overflow_inclusive = ties;
        e->overflow_cause = "input";
    }
    if (fl_order_coef_f32(c, 0) == 0.0f) {
        if (last_flush) {
            const double v = fl_decode(f, last_flush), nv = fl_decode(f, last_flush + 1);
            e->underflow_input = v;
            e->underflow_threshold = v + (nv - v) / 2;
        } else {
            e->underflow_threshold = fl_format_min_subnormal(f) / 2; /* the input itself flushes on storage */
        }
    }
    if (c->act == FL_ORDER_POLYNORM)
        e->small_row_nonfinite = naive_small_row_nonfinite(c, f);
}

/* The fused strategy's thresholds: searched over the reals (doubles; the kernel's float32 overflow
   over floats), and the first encoding that overflows and the last below the underflow threshold. */
static void entry_fused(fl_order_entry *e, const fl_order_cfg *c, fl_format f)
{
    const uint32_t maxc = fl_format_get(f)->max_mag;
    const double hi = (double)FLT_MAX;
    pctx pc = { c, f };
    const double t = first_true(p_fused_ovf, &pc, 0, 0x1p-30, hi);
    if (!isnan(t)) {
        e->overflow_threshold = t;
        e->overflow_inclusive = 1;
        e->overflow_cause = fl_order_fused_overflow(c, f, t);
    }
    for (uint32_t code = 1; code <= maxc; code++)
        if (fl_order_fused_overflow(c, f, fl_decode(f, code))) {
            e->overflow_input = fl_decode(f, code);
            break;
        }
    const double kt = first_true(p_kernel_ovf, &pc, 1, 0x1p-30, hi);
    e->fused_fp32_threshold = isnan(kt) ? INFINITY : kt;
    if (fl_order_coef_f32(c, 0) == 0.0f) {
        const double nf = first_true(p_fused_not_flushed, &pc, 0, 0x1p-1074, 1.0);
        if (!isnan(nf) && nf > 0x1p-1074) {
            e->underflow_threshold = nextafter(nf, 0.0);
            for (uint32_t code = maxc; code >= 1; code--) {
                const double x = fl_decode(f, code);
                if (x <= e->underflow_threshold) {
                    e->underflow_input = x;
                    break;
                }
            }
        }
    }
}

/* Strategy s at input x: the output's encoding in f into *out; whether an intermediate or the output
   overflowed. */
static int sweep_output(uint32_t *out, const fl_order_cfg *c, fl_format f, fl_order_strategy s, double x)
{
    if (s == FL_ORDER_NAIVE) {
        double y;
        const int ovf = fl_order_naive_eval(&y, c, f, x, 0) != NULL;
        *out = enc_value(f, y);
        return ovf;
    }
    int of;
    const float y = fl_order_fused_f32(c, x, &of);
    *out = fl_encode_f32(f, y, FL_RND_NE, FL_OVF_NOSATURATE, 0);
    return of || fl_order_fused_overflow(c, f, x) != NULL;
}

/* The error in ulps of the finite output out at x; *correct: whether out is the correctly rounded
   encoding (+0 and -0 alike). */
static double sweep_error(int *correct, const fl_order_cfg *c, fl_format f, double x, uint32_t out)
{
    /* the exact value (closed form, >= 256 bits) for the error; the correctly rounded encoding from
       the library reference for PolyReLU, from the same closed form for PolyNorm (the two agree:
       tests/test_order.c) */
    uint32_t cr, cr_model;
    mpfr_t v;
    mpfr_init2(v, 256);
    exact_round(&cr_model, v, c, f, x, NULL, 0, 0, NULL);
    if (c->act != FL_ORDER_POLYRELU || fl_order_ref(&cr, c, f, x))
        cr = cr_model;
    const double u = ulp_err_mpfr(f, out, v);
    mpfr_clear(v);
    const uint32_t mag = (1u << (fl_format_get(f)->bits - 1)) - 1u;
    *correct = out == cr || ((out & mag) == 0 && (cr & mag) == 0);
    return u;
}

/* The ulp sweep of strategy s over every encoding of f in [-range, range]. */
static void entry_ulp_sweep(fl_order_entry *e, const fl_order_cfg *c, fl_format f, fl_order_strategy s, double range)
{
    const fl_format_desc *d = fl_format_get(f);
    long n = 0, nonfin = 0, correct = 0, overflowed = 0;
    double worst = 0, worst_x = NAN, silent = 0;
    for (int sign = 0; sign < 2; sign++)
        for (uint32_t code = sign ? 1 : 0; code <= d->max_mag; code++) {
            double x = fl_decode(f, code);
            if (x > range)
                break;
            if (sign)
                x = -x;
            uint32_t out;
            int ovf = sweep_output(&out, c, f, s, x);
            n++;
            const int nonfinite = fl_is_nan(d, out) || fl_is_inf(d, out);
            ovf |= nonfinite;
            overflowed += ovf;
            nonfin += nonfinite;
            if (nonfinite)
                continue;
            int ok;
            const double u = sweep_error(&ok, c, f, x, out);
            correct += ok;
            if (ovf) {
                silent = u > silent ? u : silent;
            } else if (u > worst) {
                worst = u;
                worst_x = x;
            }
        }
    e->ulp_range = range;
    e->ulp_inputs = n;
    e->ulp_nonfinite = nonfin;
    e->ulp_overflowed = overflowed;
    e->ulp_silent_max = silent;
    e->ulp_correct = correct;
    e->ulp_max = worst;
    e->ulp_max_x = worst_x;
}

void fl_order_entry_compute(fl_order_entry *e, const fl_order_cfg *c, fl_format f, fl_order_strategy s,
                            double range)
{
    memset(e, 0, sizeof *e);
    e->act = c->act;
    e->order = c->order;
    e->fmt = f;
    e->strategy = s;
    e->overflow_input = e->underflow_input = e->underflow_threshold = NAN;
    e->fused_fp32_threshold = e->small_row_nonfinite = NAN;
    e->overflow_threshold = INFINITY;
    e->output_bound = entry_output_bound(c);
    if (s == FL_ORDER_NAIVE)
        entry_naive(e, c, f);
    else
        entry_fused(e, c, f);
    if (range > 0)
        entry_ulp_sweep(e, c, f, s, range);
}

/* ---- real tensors ------------------------------------------------------------------------------------ */

int fl_order_scale_applies(fl_format f, fl_scaling s)
{
    const int mx_elem = f == FL_FMT_E3M2 || f == FL_FMT_E2M3 || f == FL_FMT_E2M1;
    if (s == FL_SCALING_DELAYED || (unsigned)s >= FL_SCALING_COUNT)
        return 0; /* a history of amaxes: a training run's, not a tensor's */
    if (s == FL_SCALING_NVFP4)
        return f == FL_FMT_E2M1; /* NVFP4's elements */
    if (mx_elem)
        return s == FL_SCALING_NONE || s == FL_SCALING_MX32;
    if (fl_format_get(f)->bits > 8)
        return s == FL_SCALING_NONE;
    return 1;
}

/* Per-element flags of the tensor pipelines. */
enum { FLAG_OVF = 1, FLAG_CLIP = 2 };

typedef struct {
    fl_format f;
    fl_scaling sc;
    uint8_t *flags; /* (R, C) */
    float *scale_out; /* (R, C) scale of each element's last store (for the ulp judgement), or NULL */
    uint32_t *code_out; /* (R, C) codes of the last store, or NULL */
} tq;

/* Store the tensor v (R, C) into F with the scheme: v becomes the dequantized values.  Unscaled: IEEE
   overflow (+-Inf) flagged FLAG_OVF.  Scaled (current scaling per block, TE's rule; MX: TE's round-up rule):
   saturating, |v s| beyond the RNE boundary flagged FLAG_CLIP (never with current scaling or
   TE's MX rule, but kept: a scale computed in float32 could round the wrong way). */
static void tq_store(tq *q, double *v, size_t R, size_t C)
{
    const fl_format f = q->f;
    int ties;
    const double B = fl_format_rne_boundary(f, &ties);
    if (q->sc == FL_SCALING_NONE) {
        for (size_t i = 0; i < R * C; i++) {
            if (isnan(v[i]) || isinf(v[i])) {
                q->flags[i] |= FLAG_OVF;
                continue;
            }
            const double a = fabs(v[i]);
            if (a > B || (a == B && ties)) {
                q->flags[i] |= FLAG_OVF;
                v[i] = copysign(INFINITY, v[i]);
                continue;
            }
            const uint32_t code = fl_encode_f64(f, v[i], FL_RND_NE, FL_OVF_SATURATE, 0);
            if (q->code_out)
                q->code_out[i] = code, q->scale_out[i] = 1.0f;
            v[i] = copysign((double)fl_decode(f, code), v[i]);
        }
        return;
    }
    size_t bc = C; /* block width along the row */
    int per_row = 1;
    switch (q->sc) {
    case FL_SCALING_TENSOR: per_row = 0; break;
    case FL_SCALING_ROW: bc = C; break;
    case FL_SCALING_1X128: bc = 128; break;
    case FL_SCALING_NVFP4: bc = FL_NVFP4_BLOCK; break;
    default: bc = FL_MX_BLOCK; break;
    }
    double tamax = 0;
    if (!per_row || q->sc == FL_SCALING_NVFP4) /* NVFP4: the tensor's amax sets the second-level scale */
        for (size_t i = 0; i < R * C; i++)
            if (fabs(v[i]) > tamax || isnan(v[i]))
                tamax = isnan(v[i]) ? tamax : fabs(v[i]);
    for (size_t r = 0; r < R; r++)
        for (size_t c0 = 0; c0 < C; c0 += per_row ? bc : C) {
            const size_t c1 = per_row ? (c0 + bc < C ? c0 + bc : C) : C;
            double amax = tamax;
            if (per_row) {
                amax = 0;
                for (size_t c = c0; c < c1; c++)
                    if (fabs(v[r * C + c]) > amax)
                        amax = fabs(v[r * C + c]);
            }
            const float af = (float)amax;
            double s, sinv;
            if (q->sc == FL_SCALING_MX32) {
                const uint8_t code = fl_mx_scale_code(f, isinf(amax) ? INFINITY : af, FL_MX_CEIL);
                s = fl_mx_mul_from_code(code);
                sinv = fl_mx_scale_from_code(code);
            } else if (q->sc == FL_SCALING_NVFP4) {
                /* NVFP4 (scaling.h): s_enc = 2688 / the tensor's amax, the block's e4m3 scale code
                   e4m3(amax_b * (s_enc / 6)), the encode scale 1 / (dec(code) * s_dec); the decode
                   scale dec(code) * s_dec as one float32 product (the cast engine rounds q * dec and
                   then * s_dec: at most one float rounding apart) */
                const float s_enc = fl_nvfp4_global_scale((float)tamax, 0), s_dec = 1.0f / s_enc;
                const float dec = fl_decode_f32(fl_format_get(FL_FMT_E4M3), fl_nvfp4_scale_code(af, s_enc * (1.0f / 6.0f)));
                s = fl_nvfp4_enc_scale(dec, s_dec);
                sinv = (double)(dec * s_dec);
            } else {
                const float sf = fl_scale_from_amax(f, af > 0 ? af : 0.0f, 1.0f, 0, 0);
                s = sf;
                sinv = (double)(1.0f / sf);
            }
            for (size_t c = c0; c < c1; c++) {
                const size_t i = r * C + c;
                if (isnan(v[i])) {
                    q->flags[i] |= FLAG_OVF;
                    continue;
                }
                const double w = v[i] * s; /* one binary64 rounding before the encode (see ORDER.md) */
                /* (an NVFP4 block whose e4m3 scale underflowed to 0 decodes to zeros: flushed, not clipped) */
                if ((fabs(w) > B || (fabs(w) == B && ties)) && sinv != 0.0)
                    q->flags[i] |= FLAG_CLIP;
                const uint32_t code = fl_encode_f64(f, w, FL_RND_NE, FL_OVF_SATURATE, 0);
                if (q->code_out)
                    q->code_out[i] = code, q->scale_out[i] = (float)s;
                v[i] = (double)fl_decode(f, code) * sinv;
            }
        }
}

/* The naive pipeline on a whole tensor (binary64 emulation, each stored tensor through tq_store).
   y (R, C) receives the output. */
static int naive_tensor(tq *q, double *y, const fl_order_cfg *c, const float *x, size_t R, size_t C)
{
    const size_t N = R * C;
    const int r = c->order;
    double *xs = malloc(N * sizeof *xs), *p[FL_POLY_MAX_ORDER + 1] = { 0 }, *t = malloc(N * sizeof *t);
    double *m = malloc(R * sizeof *m);
    int ok = xs && t && m;
    for (int i = 1; i <= r && ok; i++)
        ok = (p[i] = malloc(N * sizeof *p[i])) != NULL;
    if (!ok)
        goto out;
    for (size_t k = 0; k < N; k++)
        xs[k] = x[k];
    uint32_t *save_code = q->code_out; /* only the output's codes are kept */
    q->code_out = NULL;
    tq_store(q, xs, R, C);
    if (c->act == FL_ORDER_POLYRELU)
        for (size_t k = 0; k < N; k++)
            xs[k] = xs[k] > 0 ? xs[k] : (isnan(xs[k]) ? xs[k] : 0.0);
    memcpy(p[1], xs, N * sizeof *xs);
    for (int i = 2; i <= r; i++) {
        for (size_t k = 0; k < N; k++) /* exact in binary64: <= 4 * 11 bits */
            p[i][k] = c->pow == FL_ORDER_POW_MUL ? p[i - 1][k] * xs[k] : pow(xs[k], i);
        tq_store(q, p[i], R, C);
    }
    if (c->act == FL_ORDER_POLYNORM) {
        /* the per-row means, denominators: (R, 1) tensors with their own flags, spread to the row */
        tq qr = { q->f, q->sc, calloc(R, 1), NULL, NULL };
        if (!qr.flags) {
            ok = 0;
            goto out;
        }
        const double eps32 = (double)(float)c->eps;
        for (int i = 1; i <= r; i++) {
            for (size_t k = 0; k < N; k++)
                t[k] = p[i][k] * p[i][k];
            tq_store(q, t, R, C);
            for (size_t row = 0; row < R; row++) {
                double s = 0; /* binary64 sum of stored values (PyTorch: fp32 accumulation) */
                for (size_t k = 0; k < C; k++)
                    s += t[row * C + k];
                m[row] = s / (double)C;
            }
            tq_store(&qr, m, R, 1);
            for (size_t row = 0; row < R; row++)
                m[row] += eps32;
            tq_store(&qr, m, R, 1);
            for (size_t row = 0; row < R; row++)
                m[row] = sqrt(m[row]);
            tq_store(&qr, m, R, 1);
            for (size_t row = 0; row < R; row++)
                for (size_t k = 0; k < C; k++)
                    p[i][row * C + k] /= m[row]; /* IEEE: /0 -> Inf or NaN */
            tq_store(q, p[i], R, C);
        }
        for (size_t row = 0; row < R; row++)
            for (size_t k = 0; k < C; k++)
                q->flags[row * C + k] |= qr.flags[row];
        free(qr.flags);
    }
    const double a0 = (double)fl_order_coef_f32(c, 0);
    for (int i = 1; i <= r; i++) {
        const double a = (double)fl_order_coef_f32(c, i);
        for (size_t k = 0; k < N; k++)
            t[k] = a * p[i][k];
        tq_store(q, t, R, C);
        if (i == 1) {
            memcpy(y, t, N * sizeof *t);
            continue;
        }
        for (size_t k = 0; k < N; k++)
            y[k] += t[k];
        if (i == r && a0 == 0.0)
            q->code_out = save_code; /* the last sum is the output */
        tq_store(q, y, R, C);
    }
    if (a0 != 0.0) {
        for (size_t k = 0; k < N; k++)
            y[k] += a0;
        q->code_out = save_code;
        tq_store(q, y, R, C);
    }
    q->code_out = save_code;
out:
    free(xs);
    free(t);
    free(m);
    for (int i = 1; i <= r; i++)
        free(p[i]);
    return ok ? 0 : -1;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}


/* The output y (R, C) of strategy s on x, stored through q: the naive pipeline, or the fused kernel's
   float32 output stored once.  cc: the configuration with its row length n = C. */
static int tensor_output(tq *q, double *y, const fl_order_cfg *cc, fl_order_strategy s, const float *x, size_t R,
                         size_t C)
{
    if (s == FL_ORDER_NAIVE)
        return naive_tensor(q, y, cc, x, R, C);
    const size_t N = R * C;
    float *y32 = malloc(N * sizeof *y32);
    if (!y32)
        return -1;
    const fl_poly_coef k = coef_f32(cc);
    fl_kin in = { x, FL_FMT_FP32, NULL };
    fl_kout o = { y32, FL_FMT_FP32, NULL, NULL };
    if (cc->act == FL_ORDER_POLYRELU)
        fl_polyrelu_fwd(o, in, N, &k);
    else
        fl_polynorm_fwd(o, in, R, C, &k, (float)cc->eps);
    for (size_t i = 0; i < N; i++)
        y[i] = y32[i];
    free(y32);
    tq_store(q, y, R, C);
    return 0;
}

/* The fractions of the N outputs y that overflowed, were clipped, were flushed to zero. */
static void tensor_fractions(fl_order_tensor_result *res, const tq *q, const double *y, const fl_order_cfg *c,
                             const float *x, size_t N)
{
    /* a row's (R, 1) store flags were written at index row (see naive_tensor): spread */
    size_t novf = 0, nsat = 0, nflush = 0;
    for (size_t i = 0; i < N; i++) {
        novf += (q->flags[i] & FLAG_OVF) != 0 || isnan(y[i]) || isinf(y[i]);
        nsat += (q->flags[i] & FLAG_CLIP) != 0;
    }
    /* flushed: output 0 where the exact output is not (exact in binary64 suffices to tell 0 apart:
       PolyReLU of x > 0 and PolyNorm's terms are nonzero for x != 0 with nonzero coefficients) */
    for (size_t i = 0; i < N; i++)
        if (y[i] == 0.0 && x[i] != 0.0f && (c->act == FL_ORDER_POLYNORM || x[i] > 0.0f) &&
            fl_order_coef_f32(c, 0) == 0.0f)
            nflush++;
    res->frac_overflow = N ? (double)novf / N : 0;
    res->frac_clipped = N ? (double)nsat / N : 0;
    res->frac_flushed = N ? (double)nflush / N : 0;
}

/* K of the R rows into rows: all of them, in order, when K == R; else K distinct rows drawn with seed
   (a partial Fisher-Yates draw).  Returns the count drawn: K, or 0 out of memory. */
static size_t tensor_draw_rows(size_t *rows, size_t R, size_t K, uint64_t seed)
{
    if (K == R) {
        for (size_t i = 0; i < R; i++)
            rows[i] = i;
        return R;
    }
    size_t *perm = malloc(R * sizeof *perm);
    uint64_t st = seed;
    if (!perm)
        return 0;
    for (size_t i = 0; i < R; i++)
        perm[i] = i;
    for (size_t i = 0; i < K; i++) {
        const size_t j = i + (size_t)(fl_splitmix64(&st) % (R - i));
        const size_t tmp = perm[i];
        perm[i] = perm[j];
        perm[j] = tmp;
        rows[i] = perm[i];
    }
    free(perm);
    return K;
}

/* The ulp errors of the outputs on sample_rows rows drawn with seed (every row when R <= sample_rows),
   each judged in the scaled domain (its code against the exact value times its scale); elements that
   overflowed are left out.  Their percentiles into res. */
static int tensor_ulp(fl_order_tensor_result *res, const tq *q, const double *y, const fl_order_cfg *cc,
                      const float *x, size_t R, size_t C, size_t sample_rows, uint64_t seed)
{
    size_t nsamp = R <= sample_rows ? R : sample_rows;
    size_t *rows = malloc((nsamp ? nsamp : 1) * sizeof *rows);
    double *errs = malloc((nsamp * C > 0 ? nsamp * C : 1) * sizeof *errs);
    double *xr = malloc(C * sizeof *xr);
    if (!rows || !errs || !xr) {
        free(rows), free(errs), free(xr);
        return -1;
    }
    nsamp = tensor_draw_rows(rows, R, nsamp, seed);
    const int norm = cc->act == FL_ORDER_POLYNORM; /* the exact value needs the whole row */
    size_t ne = 0;
    mpfr_t v, S[FL_POLY_MAX_ORDER + 1], sv;
    mpfr_init2(v, 256);
    mpfr_init2(sv, 256 + 32);
    for (int i = 0; i <= FL_POLY_MAX_ORDER; i++)
        mpfr_init2(S[i], 256);
    for (size_t si = 0; si < nsamp; si++) {
        const size_t row = rows[si];
        for (size_t k = 0; k < C; k++)
            xr[k] = x[row * C + k];
        for (int i = 0; i <= FL_POLY_MAX_ORDER; i++)
            mpfr_set_nan(S[i]);
        for (size_t k = 0; k < C; k++) {
            const size_t i = row * C + k;
            if (isnan(y[i]) || isinf(y[i]) || (q->flags[i] & FLAG_OVF))
                continue;
            uint32_t cr;
            exact_round(&cr, v, cc, q->f, 0.0, norm ? xr : &xr[k], norm ? (long)C : 1, norm ? (long)k : 0,
                        norm ? S : NULL);
            mpfr_mul_d(sv, v, (double)q->scale_out[i], MPFR_RNDN);
            errs[ne++] = ulp_err_mpfr(q->f, q->code_out[i], sv);
        }
    }
    if (ne) {
        qsort(errs, ne, sizeof *errs, cmp_double);
        res->ulp_p50 = errs[(ne - 1) / 2];
        res->ulp_p99 = errs[(size_t)((double)(ne - 1) * 0.99)];
        res->ulp_max = errs[ne - 1];
    }
    res->ulp_n = ne;
    mpfr_clears(v, sv, (mpfr_ptr)0);
    for (int i = 0; i <= FL_POLY_MAX_ORDER; i++)
        mpfr_clear(S[i]);
    free(rows), free(errs), free(xr);
    return 0;
}

int fl_order_tensor_study(fl_order_tensor_result *res, const fl_order_cfg *c, fl_format f,
                          fl_order_strategy s, fl_scaling sc, const float *x, size_t R, size_t C,
                          size_t sample_rows, uint64_t seed)
{
    memset(res, 0, sizeof *res);
    res->act = c->act;
    res->order = c->order;
    res->fmt = f;
    res->strategy = s;
    res->scale = sc;
    const size_t N = R * C;
    res->n = N;
    tq q = { f, sc, calloc(N, 1), malloc(N * sizeof(float)), malloc(N * sizeof(uint32_t)) };
    double *y = calloc(N, sizeof *y);
    fl_order_cfg cc = *c;
    cc.n = (long)C;
    int rc = -1;
    if (q.flags && q.scale_out && q.code_out && y && !tensor_output(&q, y, &cc, s, x, R, C)) {
        tensor_fractions(res, &q, y, c, x, N);
        rc = tensor_ulp(res, &q, y, &cc, x, R, C, sample_rows, seed);
    }
    free(q.flags), free(q.scale_out), free(q.code_out), free(y);
    return rc;
}

/* ---- the verdicts ---------------------------------------------------------------------------------- */

int fl_order_tensor_safe(const fl_order_tensor_result *t, double max_flush)
{
    return t->frac_overflow == 0 && t->frac_clipped == 0 && t->frac_flushed <= max_flush;
}

int fl_order_entry_safe_at(const fl_order_entry *e, double amax)
{
    return amax < e->overflow_threshold || (amax == e->overflow_threshold && !e->overflow_inclusive);
}

int fl_order_highest_safe_map(const fl_order_entry *entries, size_t n, double amax)
{
    int best = 0;
    for (size_t i = 0; i < n; i++)
        best = fl_order_entry_safe_at(&entries[i], amax) && entries[i].order > best ? entries[i].order : best;
    return best;
}

int fl_order_highest_safe_tensor(const fl_order_tensor_result *res, size_t n, double max_flush)
{
    int best = 0;
    for (size_t i = 0; i < n; i++)
        best = fl_order_tensor_safe(&res[i], max_flush) && res[i].order > best ? res[i].order : best;
    return best;
}
