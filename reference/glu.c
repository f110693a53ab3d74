/* glu.c — the two-input gates h(g) * u: glu (sigmoid), bilinear (identity), reglu (relu), geglu (exact
 * gelu), swiglu (silu), and smooth_swiglu = s * swiglu(g, u) (the value a Smooth-SwiGLU kernel emits
 * before its FP8 GEMM, s the per-channel or per-token scale, broadcast by the caller), with the
 * derivatives d/dg = h'(g) u, d/du = h(g), and for smooth_swiglu d/ds = swiglu(g, u).
 *
 * Specials (every gate): NaN in any input -> NaN; otherwise the IEEE product of h's limit and u:
 * h(+Inf) = 1 (glu), +Inf (gelu, silu, relu, bilinear); h(-Inf) = +0 (glu, relu), -0 (gelu, silu),
 * -Inf (bilinear); h(+-0) = 1/2 (glu), +-0 (others; relu: +0).  0 * Inf is NaN.
 * Error analysis: bilinear and reglu are exact products (SURE).  glu, swiglu: chain of 3 as in
 * silu.c, with fl_ref_near(g u or u) for g > 160 and fl_ref_tiny when
 * log2|g u e^g| < -1200.  geglu: gelu.c's bound plus one product (k = 16).
 * smooth_swiglu evaluates swiglu(g, s u) with s u exact (the product is associative in exact
 * arithmetic), so it is one rounding of the exact s * silu(g) * u. */
#include "ref.h"

int fl_ref_gelu_times(mpfr_ptr y, mpfr_srcptr g, mpfr_srcptr u, mpfr_prec_t wp);

typedef enum { GATE_SIGMOID, GATE_ID, GATE_RELU, GATE_GELU, GATE_SILU } gate_kind;

/* h(g) for a non-regular g (+-Inf, +-0), exactly. */
static void h_special(mpfr_ptr h, mpfr_srcptr g, gate_kind kind)
{
    const int pos = mpfr_sgn(g) > 0 || (mpfr_zero_p(g) && !mpfr_signbit(g));
    if (mpfr_zero_p(g)) {
        if (kind == GATE_SIGMOID)
            mpfr_set_d(h, 0.5, MPFR_RNDN);
        else if (kind == GATE_RELU)
            mpfr_set_zero(h, 1);
        else
            mpfr_set(h, g, MPFR_RNDN);
        return;
    }
    if (pos) {
        if (kind == GATE_SIGMOID)
            mpfr_set_ui(h, 1, MPFR_RNDN);
        else
            mpfr_set_inf(h, 1);
        return;
    }
    switch (kind) {
    case GATE_SIGMOID:
    case GATE_RELU: mpfr_set_zero(h, 1); break;
    case GATE_ID: mpfr_set_inf(h, -1); break;
    default: mpfr_set_zero(h, -1); break; /* gelu, silu -> -0 */
    }
}

/* Specials of h(g) * u.  Returns 1 if handled (y exact). */
static int gate_special(mpfr_ptr y, mpfr_srcptr g, mpfr_srcptr u, gate_kind kind)
{
    if (mpfr_nan_p(g) || mpfr_nan_p(u)) {
        mpfr_set_nan(y);
        return 1;
    }
    if (mpfr_regular_p(g) && mpfr_regular_p(u))
        return 0;
    mpfr_t h;
    mpfr_init2(h, 64);
    if (!mpfr_regular_p(g)) {
        h_special(h, g, kind);
    } else {
        /* u is +-0 or +-Inf: only the sign of h(g) matters (h(g) != 0 except relu at g < 0) */
        int s = kind == GATE_SIGMOID ? 1 : mpfr_sgn(g);
        if (kind == GATE_RELU && s < 0)
            mpfr_set_zero(h, 1);
        else
            mpfr_set_si(h, s, MPFR_RNDN);
    }
    mpfr_mul(y, h, u, MPFR_RNDN); /* exact: a special or a zero */
    mpfr_clear(h);
    return 1;
}

static void mul_exact(mpfr_ptr y, mpfr_srcptr a, mpfr_srcptr b)
{
    mpfr_set_prec(y, mpfr_get_prec(a) + mpfr_get_prec(b));
    mpfr_mul(y, a, b, MPFR_RNDN);
}

static int gate_id(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p; (void)wp;
    mpfr_set_prec(y, mpfr_get_prec(x[0]));
    mpfr_set(y, x[0], MPFR_RNDN);
    return FL_REF_SURE;
}

/* c * sigma(g) for regular g, c (c = u for glu, g u for swiglu). */
static int sigma_times(mpfr_ptr y, mpfr_srcptr g, mpfr_srcptr c)
{
    if (mpfr_cmp_si(g, 160) > 0)
        return fl_ref_near(y, c, -1);
    if (mpfr_cmp_si(g, -160) < 0 &&
        fl_ref_log2abs(c) + mpfr_get_d(g, MPFR_RNDN) * 1.4426950408889634 < -1200.0)
        return fl_ref_tiny(y, mpfr_sgn(c) < 0);
    int inex = mpfr_neg(y, g, MPFR_RNDN);
    inex |= mpfr_exp(y, y, MPFR_RNDN);
    inex |= mpfr_add_ui(y, y, 1, MPFR_RNDN);
    inex |= mpfr_div(y, c, y, MPFR_RNDN);
    return inex ? fl_ref_chain_err(3) : FL_REF_SURE;
}

int fl_ref_eval_glu(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p; (void)wp;
    if (gate_special(y, x[0], x[1], GATE_SIGMOID))
        return FL_REF_SURE;
    return sigma_times(y, x[0], x[1]);
}

int fl_ref_eval_bilinear(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p; (void)wp;
    mul_exact(y, x[0], x[1]);
    return FL_REF_SURE;
}

int fl_ref_eval_reglu(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p; (void)wp;
    if (gate_special(y, x[0], x[1], GATE_RELU))
        return FL_REF_SURE;
    if (mpfr_sgn(x[0]) < 0) {
        mpfr_set_zero(y, mpfr_sgn(x[1])); /* +0 * u */
        return FL_REF_SURE;
    }
    mul_exact(y, x[0], x[1]);
    return FL_REF_SURE;
}

int fl_ref_eval_geglu(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p;
    if (gate_special(y, x[0], x[1], GATE_GELU))
        return FL_REF_SURE;
    return fl_ref_gelu_times(y, x[0], x[1], wp);
}

static int swiglu(mpfr_ptr y, mpfr_srcptr g, mpfr_srcptr u)
{
    if (gate_special(y, g, u, GATE_SILU))
        return FL_REF_SURE;
    mpfr_t c;
    mpfr_init2(c, mpfr_get_prec(g) + mpfr_get_prec(u));
    mpfr_mul(c, g, u, MPFR_RNDN);
    int k = sigma_times(y, g, c);
    mpfr_clear(c);
    return k;
}

int fl_ref_eval_swiglu(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p; (void)wp;
    return swiglu(y, x[0], x[1]);
}

int fl_ref_eval_smooth_swiglu(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p; (void)wp;
    mpfr_t su;
    mpfr_init2(su, mpfr_get_prec(x[1]) + mpfr_get_prec(x[2]));
    mpfr_mul(su, x[2], x[1], MPFR_RNDN); /* exact; NaN for 0 * Inf */
    int k = swiglu(y, x[0], su);
    mpfr_clear(su);
    return k;
}

/* ---- derivatives ------------------------------------------------------------------------------ */

int fl_ref_eval_sigmoid_dx(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp);
int fl_ref_eval_silu_dx(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp);
int fl_ref_eval_gelu_dx(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp);
int fl_ref_eval_silu(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp);
int fl_ref_eval_gelu(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp);
int fl_ref_eval_relu(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp);
int fl_ref_eval_relu_dx(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp);

/* y = h'(g) * u, where h'(g) comes from an elementwise evaluator ev and u is exact.  A SURE h' (exact,
   or a tail stand-in: tiny below 2^-1200 stays below 2^-150 after |u| < 2^1024; near-c becomes near-cu)
   or a special u gives an exact product.  Otherwise |h' u - f| <= 2^k ulp(h')|u| + ulp(hu)/2 and
   ulp(h')|u| <= 2 ulp(h'u): k + 2. */
static int times_u(mpfr_ptr y, fl_ref_eval_fn ev, mpfr_srcptr g, mpfr_srcptr u, const fl_ref_params *p,
                   mpfr_prec_t wp)
{
    mpfr_srcptr in[1] = { g };
    int k = ev(y, in, p, wp);
    if (k != FL_REF_SURE && mpfr_zero_p(y))
        return 0; /* an approximate zero: the driver raises wp */
    if (k == FL_REF_SURE || !mpfr_regular_p(u)) {
        mpfr_t t;
        mpfr_init2(t, mpfr_get_prec(y));
        mpfr_set(t, y, MPFR_RNDN);
        mpfr_set_prec(y, mpfr_get_prec(t) + mpfr_get_prec(u));
        mpfr_mul(y, t, u, MPFR_RNDN);
        mpfr_clear(t);
        return FL_REF_SURE;
    }
    mpfr_mul(y, y, u, MPFR_RNDN);
    return k + 2;
}

static int one(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p; (void)wp;
    if (mpfr_nan_p(x[0]))
        mpfr_set_nan(y);
    else
        mpfr_set_ui(y, 1, MPFR_RNDN);
    return FL_REF_SURE;
}

/* d/dg h(g) u and d/du h(g) u = h(g) * 1; NaN in the other input propagates. */
#define GATE_DERIVS(NAME, H, HDX)                                                                  \
    int fl_ref_eval_##NAME##_dg(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p,         \
                                mpfr_prec_t wp)                                                    \
    {                                                                                              \
        return times_u(y, HDX, x[0], x[1], p, wp);                                                 \
    }                                                                                              \
    int fl_ref_eval_##NAME##_du(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p,         \
                                mpfr_prec_t wp)                                                    \
    {                                                                                              \
        if (mpfr_nan_p(x[1])) {                                                                    \
            mpfr_set_nan(y);                                                                       \
            return FL_REF_SURE;                                                                    \
        }                                                                                          \
        mpfr_srcptr in[1] = { x[0] };                                                              \
        return H(y, in, p, wp);                                                                    \
    }

GATE_DERIVS(glu, fl_ref_eval_sigmoid, fl_ref_eval_sigmoid_dx)
GATE_DERIVS(bilinear, gate_id, one)
GATE_DERIVS(reglu, fl_ref_eval_relu, fl_ref_eval_relu_dx)
GATE_DERIVS(geglu, fl_ref_eval_gelu, fl_ref_eval_gelu_dx)
GATE_DERIVS(swiglu, fl_ref_eval_silu, fl_ref_eval_silu_dx)

/* smooth_swiglu = s silu(g) u: d/dg = silu'(g) (s u), d/du = silu(g) s, d/ds = silu(g) u. */
int fl_ref_eval_smooth_swiglu_dg(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    mpfr_t su;
    mpfr_init2(su, mpfr_get_prec(x[1]) + mpfr_get_prec(x[2]));
    mpfr_mul(su, x[2], x[1], MPFR_RNDN);
    int k = times_u(y, fl_ref_eval_silu_dx, x[0], su, p, wp);
    mpfr_clear(su);
    return k;
}

int fl_ref_eval_smooth_swiglu_du(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    if (mpfr_nan_p(x[1]))
        return fl_ref_nan(y);
    return times_u(y, fl_ref_eval_silu, x[0], x[2], p, wp);
}

int fl_ref_eval_smooth_swiglu_ds(mpfr_ptr y, mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t wp)
{
    (void)p; (void)wp;
    if (mpfr_nan_p(x[2]))
        return fl_ref_nan(y);
    return swiglu(y, x[0], x[1]);
}
