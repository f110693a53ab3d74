/* ref.c — the registry of reference functions (names, definitions, parameters, evaluators), the Ziv
 * driver and the tail helpers (see ref.h). */
#include "ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "round_mpfr.h"

#define EV(name) int fl_ref_eval_##name(mpfr_ptr, mpfr_srcptr const *, const fl_ref_params *, mpfr_prec_t);
#define ROW(name) int fl_ref_row_##name(mpfr_ptr, mpfr_srcptr const *const *, long, long, const fl_ref_params *, mpfr_prec_t);
EV(relu) EV(relu_dx) EV(relu2) EV(relu2_dx) EV(leaky_relu) EV(leaky_relu_dx) EV(prelu) EV(prelu_dx)
EV(prelu_dalpha) EV(elu) EV(elu_dx) EV(selu) EV(selu_dx) EV(gelu) EV(gelu_dx) EV(gelu_tanh)
EV(gelu_tanh_dx) EV(sigmoid_dx) EV(tanh) EV(tanh_dx) EV(silu) EV(silu_dx) EV(swish)
EV(swish_dx) EV(mish) EV(mish_dx) EV(softplus) EV(softplus_dx) EV(polyrelu) EV(polyrelu_dx)
EV(polyrelu_da0) EV(polyrelu_da1) EV(polyrelu_da2) EV(polyrelu_da3) EV(polyrelu_da4)
EV(glu) EV(glu_dg) EV(glu_du) EV(bilinear) EV(bilinear_dg) EV(bilinear_du) EV(reglu) EV(reglu_dg)
EV(reglu_du) EV(geglu) EV(geglu_dg) EV(geglu_du) EV(swiglu) EV(swiglu_dg) EV(swiglu_du)
EV(smooth_swiglu) EV(smooth_swiglu_dg) EV(smooth_swiglu_du) EV(smooth_swiglu_ds)
ROW(polynorm) ROW(polynorm_vjp) ROW(polynorm_da0) ROW(polynorm_da1) ROW(polynorm_da2)
ROW(polynorm_da3) ROW(polynorm_da4) ROW(softmax) ROW(softmax_vjp) ROW(pattention) ROW(pattention_vjp)

static void def_prelu(fl_ref_params *p) { p->alpha = 0.25; }
static void def_elu(fl_ref_params *p) { p->alpha = 1.0; }

#define E1(w, f) { w, fl_ref_eval_##f, NULL, 1 }
#define E2(w, f) { w, fl_ref_eval_##f, NULL, 2 }
#define E3(w, f) { w, fl_ref_eval_##f, NULL, 3 }
#define R1(w, f) { w, NULL, fl_ref_row_##f, 1 }
#define R2(w, f) { w, NULL, fl_ref_row_##f, 2 }
#define END { NULL, NULL, NULL, 0 }

const fl_ref_fn fl_ref_table[FL_REF_COUNT] = {
    [FL_REF_RELU] = { "relu", 1, 0, "x", "max(x, 0); relu(-0) = +0; relu'(0) = 0", "", NULL,
                      { E1("", relu), E1("x", relu_dx), END } },
    [FL_REF_RELU2] = { "relu2", 1, 0, "x", "relu(x)^2 (ReLU squared)", "", NULL,
                       { E1("", relu2), E1("x", relu2_dx), END } },
    [FL_REF_LEAKY_RELU] = { "leaky_relu", 1, 0, "x", "x if x > 0 else alpha x", "alpha=0.01", NULL,
                            { E1("", leaky_relu), E1("x", leaky_relu_dx), END } },
    [FL_REF_PRELU] = { "prelu", 1, 0, "x", "x if x > 0 else alpha x (alpha learned)", "alpha=0.25",
                       def_prelu, { E1("", prelu), E1("x", prelu_dx), E1("alpha", prelu_dalpha), END } },
    [FL_REF_ELU] = { "elu", 1, 0, "x", "x if x > 0 else alpha (e^x - 1)", "alpha=1", def_elu,
                     { E1("", elu), E1("x", elu_dx), END } },
    [FL_REF_SELU] = { "selu", 1, 0, "x",
                      "scale (x if x > 0 else alpha (e^x - 1)), scale = 1.0507009873554804934193349852946, "
                      "alpha = 1.6732632423543772848170429916717 (PyTorch's constants, exact decimals)",
                      "", NULL, { E1("", selu), E1("x", selu_dx), END } },
    [FL_REF_GELU] = { "gelu", 1, 0, "x", "x Phi(x) = x erfc(-x/sqrt2)/2 (exact GELU)", "", NULL,
                      { E1("", gelu), E1("x", gelu_dx), END } },
    [FL_REF_GELU_TANH] = { "gelu_tanh", 1, 0, "x",
                           "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), 0.044715 exact decimal", "", NULL,
                           { E1("", gelu_tanh), E1("x", gelu_tanh_dx), END } },
    [FL_REF_SIGMOID] = { "sigmoid", 1, 0, "x", "1 / (1 + e^-x)", "", NULL,
                         { E1("", sigmoid), E1("x", sigmoid_dx), END } },
    [FL_REF_TANH] = { "tanh", 1, 0, "x", "tanh(x)", "", NULL, { E1("", tanh), E1("x", tanh_dx), END } },
    [FL_REF_SILU] = { "silu", 1, 0, "x", "x sigmoid(x)", "", NULL, { E1("", silu), E1("x", silu_dx), END } },
    [FL_REF_SWISH] = { "swish", 1, 0, "x", "x sigmoid(beta x)", "beta=1", NULL,
                       { E1("", swish), E1("x", swish_dx), END } },
    [FL_REF_MISH] = { "mish", 1, 0, "x", "x tanh(softplus(x))", "", NULL,
                      { E1("", mish), E1("x", mish_dx), END } },
    [FL_REF_SOFTPLUS] = { "softplus", 1, 0, "x", "log(1 + e^(beta x)) / beta, exact (no threshold)", "beta=1",
                          NULL, { E1("", softplus), E1("x", softplus_dx), END } },
    [FL_REF_POLYRELU] = { "polyrelu", 1, 0, "x", "sum_{i=0..r} a_i relu(x)^i (PolyCom)",
                          "order=3 a0=0 a1..ar=1/order (exact rational)", NULL,
                          { E1("", polyrelu), E1("x", polyrelu_dx), E1("a0", polyrelu_da0),
                            E1("a1", polyrelu_da1), E1("a2", polyrelu_da2), E1("a3", polyrelu_da3),
                            E1("a4", polyrelu_da4), END } },
    [FL_REF_GLU] = { "glu", 2, 0, "g,u", "sigmoid(g) u", "", NULL,
                     { E2("", glu), E2("g", glu_dg), E2("u", glu_du), END } },
    [FL_REF_BILINEAR] = { "bilinear", 2, 0, "g,u", "g u", "", NULL,
                          { E2("", bilinear), E2("g", bilinear_dg), E2("u", bilinear_du), END } },
    [FL_REF_REGLU] = { "reglu", 2, 0, "g,u", "relu(g) u", "", NULL,
                       { E2("", reglu), E2("g", reglu_dg), E2("u", reglu_du), END } },
    [FL_REF_GEGLU] = { "geglu", 2, 0, "g,u", "gelu(g) u (exact gelu)", "", NULL,
                       { E2("", geglu), E2("g", geglu_dg), E2("u", geglu_du), END } },
    [FL_REF_SWIGLU] = { "swiglu", 2, 0, "g,u", "silu(g) u", "", NULL,
                        { E2("", swiglu), E2("g", swiglu_dg), E2("u", swiglu_du), END } },
    [FL_REF_SMOOTH_SWIGLU] = { "smooth_swiglu", 3, 0, "g,u,s",
                               "s silu(g) u: the value a Smooth-SwiGLU kernel casts to FP8 (s broadcast "
                               "per channel or per token by the caller)", "", NULL,
                               { E3("", smooth_swiglu), E3("g", smooth_swiglu_dg), E3("u", smooth_swiglu_du),
                                 E3("s", smooth_swiglu_ds), END } },
    [FL_REF_POLYNORM] = { "polynorm", 1, 1, "x",
                          "sum_{i=1..r} a_i N(x^i) + a0 per row, N(v) = v / sqrt(mean(v^2) + eps)",
                          "order=3 a0=0 a1..ar=1/order eps=1e-6", NULL,
                          { R1("", polynorm), R2("x", polynorm_vjp), R1("a0", polynorm_da0),
                            R1("a1", polynorm_da1), R1("a2", polynorm_da2), R1("a3", polynorm_da3),
                            R1("a4", polynorm_da4), END } },
    [FL_REF_SOFTMAX] = { "softmax", 1, 1, "x", "e^x_j / sum_i e^x_i per row", "", NULL,
                         { R1("", softmax), R2("x", softmax_vjp), END } },
    [FL_REF_PATTENTION] = { "pattention", 1, 1, "x",
                            "gelu(tau A_j / ||A||_2) per row (TokenFormer)", "tau=sqrt(n)", NULL,
                            { R1("", pattention), R2("x", pattention_vjp), END } },
};
static_assert(sizeof fl_ref_table / sizeof fl_ref_table[0] == FL_REF_COUNT, "one row per fl_ref_id");

const fl_ref_fn *fl_ref_lookup(const char *name)
{
    for (int i = 0; i < FL_REF_COUNT; i++)
        if (fl_ref_table[i].name && !strcmp(fl_ref_table[i].name, name))
            return &fl_ref_table[i];
    return NULL;
}

const fl_ref_evaluator *fl_ref_find_eval(const fl_ref_fn *fn, const char *wrt)
{
    if (!wrt)
        wrt = "";
    for (int i = 0; i < FL_REF_MAX_EVALS && fn->evals[i].wrt; i++)
        if (!strcmp(fn->evals[i].wrt, wrt))
            return &fn->evals[i];
    return NULL;
}

void fl_ref_params_init(fl_ref_params *p, const fl_ref_fn *fn)
{
    memset(p, 0, sizeof *p);
    p->alpha = 0.01;
    p->beta = 1.0;
    p->eps = 1e-6;
    p->order = 3;
    if (fn && fn->defaults)
        fn->defaults(p);
}

int fl_ref_params_set(fl_ref_params *p, const char *name, const char *value)
{
    char *end;
    double v = strtod(value, &end);
    if (!*value || *end)
        return -1;
    if (!strcmp(name, "alpha")) {
        p->alpha = v;
        p->alpha_set = 1;
    } else if (!strcmp(name, "beta")) {
        p->beta = v;
    } else if (!strcmp(name, "eps")) {
        if (!(v >= 0))
            return -1;
        p->eps = v;
    } else if (!strcmp(name, "tau")) {
        p->tau = v;
        p->tau_set = 1;
    } else if (!strcmp(name, "order")) {
        if (v != 1 && v != 2 && v != 3 && v != 4)
            return -1;
        p->order = (int)v;
    } else if (name[0] == 'a' && name[1] >= '0' && name[1] <= '4' && !name[2]) {
        p->a[name[1] - '0'] = v;
        p->a_set |= 1u << (name[1] - '0');
    } else {
        return -1;
    }
    return 0;
}

/* ---- the Ziv driver ------------------------------------------------------------------------- */

int fl_ref_near(mpfr_ptr y, mpfr_srcptr c, int dir)
{
    mpfr_t d;
    mpfr_init2(d, mpfr_get_prec(c));
    mpfr_set(d, c, MPFR_RNDN); /* c may alias an input; copy before changing y's precision */
    mpfr_set_prec(y, mpfr_get_prec(c) + 310);
    mpfr_set(y, d, MPFR_RNDN);
    mpfr_mul_2si(d, d, -300, MPFR_RNDN);
    if (dir > 0)
        mpfr_add(y, y, d, MPFR_RNDN); /* exact: the precision spans both */
    else
        mpfr_sub(y, y, d, MPFR_RNDN);
    mpfr_clear(d);
    return FL_REF_SURE;
}

int fl_ref_tiny(mpfr_ptr y, int negative)
{
    mpfr_set_si_2exp(y, negative ? -1 : 1, -(1L << 20), MPFR_RNDN);
    return FL_REF_SURE;
}

int fl_ref_chain_err(int n)
{
    int k = 0;
    while ((1 << k) < 2 * (n + 1))
        k++;
    return k;
}

double fl_ref_log2abs(mpfr_srcptr x)
{
    if (!mpfr_number_p(x) || mpfr_zero_p(x))
        return mpfr_zero_p(x) ? -HUGE_VAL : HUGE_VAL;
    long e;
    double m = mpfr_get_d_2exp(&e, x, MPFR_RNDN);
    return log2(fabs(m)) + (double)e;
}

/* The Ziv loop shared by both drivers: evaluate at wp, stop when the result is sure or can be
   rounded to `bits` (target precision + 1 for RNE, per MPFR's idiom with MPFR_RNDZ). */
typedef struct {
    fl_ref_eval_fn ev;
    fl_ref_row_fn row;
    mpfr_srcptr const *x;
    mpfr_srcptr const *const *rows;
    long n, j;
    const fl_ref_params *p;
} ziv_job;

static int ziv(mpfr_ptr y, const ziv_job *job, mpfr_prec_t target, int rne, mpfr_prec_t extra)
{
    /* Inputs carry at most 64 bits (binary64 or a decoded format): starting at 64 + 32 bits makes
       copies, negations and small-integer multiples of an input exact inside the evaluators. */
    const mpfr_prec_t wp0 = (target > 64 ? target : 64) + 32 + extra;
    for (mpfr_prec_t wp = wp0; wp <= FL_REF_MAX_PREC; wp *= 2) {
        mpfr_set_prec(y, wp);
        int k = job->ev ? job->ev(y, job->x, job->p, wp)
                        : job->row(y, job->rows, job->n, job->j, job->p, wp);
        if (k == FL_REF_SURE)
            return 0;
        if (!mpfr_regular_p(y))
            continue; /* an approximate zero says nothing: raise the precision */
        if (mpfr_can_round(y, mpfr_get_prec(y) - k, MPFR_RNDN, MPFR_RNDZ, target + rne))
            return 0;
    }
    return -1;
}

static int round_job(uint32_t *out, fl_format f, fl_rounding rnd, fl_overflow ovf, const ziv_job *job,
                     mpfr_prec_t extra)
{
    mpfr_prec_t p;
    mpfr_exp_t emin, emax;
    fl_mpfr_format_range(f, &p, &emin, &emax);
    mpfr_t y;
    mpfr_init2(y, p + 32);
    /* For a subnormal result the format keeps fewer than p bits; every boundary of the shorter
       precision is also one of precision p, so deciding the rounding at p bits decides it there. */
    int rc = ziv(y, job, p, rnd == FL_RND_NE || rnd == FL_RND_SR, extra);
    if (rc == 0)
        *out = fl_mpfr_encode(f, y, rnd, ovf, NULL);
    else
        *out = fl_format_get(f)->nan;
    mpfr_clear(y);
    return rc;
}

int fl_ref_round_wp(uint32_t *out, fl_format f, fl_rounding rnd, fl_overflow ovf, fl_ref_eval_fn ev,
                    mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t extra)
{
    ziv_job job = { ev, NULL, x, NULL, 0, 0, p };
    return round_job(out, f, rnd, ovf, &job, extra);
}

int fl_ref_round(uint32_t *out, fl_format f, fl_rounding rnd, fl_overflow ovf, fl_ref_eval_fn ev,
                 mpfr_srcptr const *x, const fl_ref_params *p)
{
    return fl_ref_round_wp(out, f, rnd, ovf, ev, x, p, 0);
}

int fl_ref_round_row(uint32_t *out, fl_format f, fl_rounding rnd, fl_overflow ovf, fl_ref_row_fn ev,
                     mpfr_srcptr const *const *x, long n, long j, const fl_ref_params *p,
                     mpfr_prec_t extra)
{
    ziv_job job = { NULL, ev, NULL, x, n, j, p };
    return round_job(out, f, rnd, ovf, &job, extra);
}

static int value_job(mpfr_ptr out, const ziv_job *job)
{
    mpfr_t y;
    mpfr_init2(y, mpfr_get_prec(out) + 32);
    int rc = ziv(y, job, mpfr_get_prec(out), 1, 0);
    if (rc == 0)
        mpfr_set(out, y, MPFR_RNDN);
    else
        mpfr_set_nan(out);
    mpfr_clear(y);
    return rc;
}

int fl_ref_value(mpfr_ptr y, fl_ref_eval_fn ev, mpfr_srcptr const *x, const fl_ref_params *p)
{
    ziv_job job = { ev, NULL, x, NULL, 0, 0, p };
    return value_job(y, &job);
}

int fl_ref_value_row(mpfr_ptr y, fl_ref_row_fn ev, mpfr_srcptr const *const *x, long n, long j,
                     const fl_ref_params *p)
{
    ziv_job job = { NULL, ev, NULL, x, n, j, p };
    return value_job(y, &job);
}
