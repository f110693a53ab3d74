/* ffn_act.c — FFN activations forward/backward (see ffn_act.h): the kernels' CPU twins
 * (kernels/kernels.h) for SwiGLU, PolyReLU and PolyNorm; ReLU and GELU are plain loops here.  The
 * table and the dispatch come from the TRAIN parts of reference/act_list.h. */
#include "ffn_act.h"

#include "erff.h"
#include "kernels.h"
#include "model.h"
#include "model_simd.h"

#include <assert.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INFO_ROW(ID, name, kind, impl, gated, smooth, omin, omax, odef, note) \
    [FL_ACT_##ID] = { #name, note, gated, omin, omax, odef, smooth },
const fl_act_info fl_act_table[FL_ACT_COUNT] = { FL_ACT_TRAINS(INFO_ROW) };

/* The kinds are 0 .. FL_ACT_COUNT-1, each once: FL_ACT_COUNT powers of two add up to 2^FL_ACT_COUNT - 1
   only when they are distinct (a repeated one carries) and then they are 2^0 .. 2^(FL_ACT_COUNT-1). */
#define KIND_BIT(ID, name, kind, ...) +(1ull << (kind))
static_assert((0 FL_ACT_TRAINS(KIND_BIT)) == (1ull << FL_ACT_COUNT) - 1, "act_list.h: kinds must be 0 .. count-1");
/* Orders are one digit (polyrelu3) and index the FL_ACT_NCOEF coefficients. */
#define ORDER_CHECK(ID, name, kind, impl, gated, smooth, omin, omax, odef, note)                             \
    static_assert((omin == 0 && omax == 0 && odef == 0) || (1 <= omin && omin <= odef && odef <= omax && \
                                                             omax < FL_ACT_NCOEF), #name ": order range");
FL_ACT_TRAINS(ORDER_CHECK)

int fl_act_parse(fl_act *out, const char *s)
{
    for (int k = 0; k < FL_ACT_COUNT; k++) {
        const fl_act_info *t = &fl_act_table[k];
        const size_t n = strlen(t->name);
        if (strncmp(s, t->name, n))
            continue;
        if (s[n] == 0) {
            out->kind = (uint32_t)k;
            out->order = (uint32_t)t->order_default;
            return 0;
        }
        if (t->order_max && s[n] >= '0' + t->order_min && s[n] <= '0' + t->order_max && s[n + 1] == 0) {
            out->kind = (uint32_t)k;
            out->order = (uint32_t)(s[n] - '0');
            return 0;
        }
    }
    return -1;
}

char *fl_act_spelling(char *buf, size_t n, int k, int notes)
{
    const fl_act_info *t = &fl_act_table[k];
    int w = snprintf(buf, n, "%s", t->name);
    if (t->order_max && w >= 0 && (size_t)w < n)
        w += snprintf(buf + w, n - (size_t)w, "[%d-%d]", t->order_min, t->order_max);
    if (notes && t->note && w >= 0 && (size_t)w < n)
        snprintf(buf + w, n - (size_t)w, " (%s)", t->note);
    return buf;
}

int fl_act_variants(fl_act *out, int max)
{
    int m = 0;
    for (int k = 0; k < FL_ACT_COUNT; k++) {
        const fl_act_info *t = &fl_act_table[k];
        for (int r = t->order_min; r <= t->order_max; r++, m++)
            if (m < max)
                out[m] = (fl_act){ (uint32_t)k, (uint32_t)r };
    }
    return m;
}

/* "polyrelu0" .. "polyrelu4" for every row; fl_act_name hands out those in the row's order range. */
#define ORDER_NAMES(ID, name, ...) [FL_ACT_##ID] = { #name "0", #name "1", #name "2", #name "3", #name "4" },
static const char *const order_names[FL_ACT_COUNT][FL_ACT_NCOEF] = { FL_ACT_TRAINS(ORDER_NAMES) };
static_assert(FL_ACT_NCOEF == 5, "one name per digit 0 .. FL_ACT_NCOEF-1 above");

const char *fl_act_name(fl_act a)
{
    if (a.kind >= FL_ACT_COUNT)
        return "?";
    const fl_act_info *t = &fl_act_table[a.kind];
    if (t->order_max && (int)a.order >= t->order_min && (int)a.order <= t->order_max)
        return order_names[a.kind][a.order];
    return t->name;
}

int fl_act_gated(fl_act a) { return a.kind < FL_ACT_COUNT && fl_act_table[a.kind].gated; }
int fl_act_ncoef(fl_act a) { return a.kind < FL_ACT_COUNT && fl_act_table[a.kind].order_max ? (int)a.order + 1 : 0; }
int fl_act_smooth_axis(fl_act a) { return a.kind < FL_ACT_COUNT ? fl_act_table[a.kind].smooth : -1; }

void fl_act_coef_init(float *a, fl_act act)
{
    const int n = fl_act_ncoef(act);
    if (!n)
        return;
    const fl_poly_coef c = fl_poly_coef_default((int)act.order);
    for (int i = 0; i < n; i++)
        a[i] = c.a[i];
}

fl_poly_coef fl_act_poly(const float *coef, fl_act act)
{
    fl_poly_coef c;
    memset(&c, 0, sizeof c);
    c.order = (int)act.order;
    for (int i = 0; i <= c.order; i++)
        c.a[i] = coef[i];
    return c;
}

static fl_kin kin(const float *p) { return (fl_kin){ p, FL_FMT_FP32, NULL }; }
static fl_kout kout(float *p) { return (fl_kout){ p, FL_FMT_FP32, NULL, NULL }; }


/* Elementwise twins are run on contiguous chunks, one per thread (no reductions: same bits). */
#define CHUNKS(n, body)                                                                            \
    do {                                                                                           \
        const int nt_ = omp_get_max_threads();                                                     \
        _Pragma("omp parallel for schedule(static)") for (int c_ = 0; c_ < nt_; c_++)              \
        {                                                                                          \
            const size_t i0 = (n) * (size_t)c_ / (size_t)nt_, i1 = (n) * (size_t)(c_ + 1) / (size_t)nt_; \
            if (i1 > i0) {                                                                         \
                body;                                                                              \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* ---- the implementations: fwd_IMPL / bwd_IMPL for each impl column of act_list.h ------------------
 * fwd: h (N, F) from pre ((G, N, F), G = 2 for the gated ones); bwd: dpre (overwritten) and the
 * coefficient gradients into da (zeroed by the caller); c: the coefficients of the polynomial ones. */
typedef void (*act_fwd_fn)(float *h, const float *pre, size_t N, size_t F, const fl_poly_coef *c);
typedef void (*act_bwd_fn)(float *dpre, float *da, const float *dh, const float *pre, size_t N, size_t F,
                           const fl_poly_coef *c);

/* An elementwise activation without a twin: h = f(x), dpre = df(x, dh), one parallel loop each. */
#define ELEMENTWISE(impl, f, df)                                                                        \
    static void fwd_##impl(float *h, const float *pre, size_t N, size_t F, const fl_poly_coef *c)       \
    {                                                                                                   \
        (void)c;                                                                                        \
        _Pragma("omp parallel for schedule(static)") for (size_t i = 0; i < N * F; i++) h[i] = f(pre[i]); \
    }                                                                                                   \
    static void bwd_##impl(float *dpre, float *da, const float *dh, const float *pre, size_t N, size_t F, \
                           const fl_poly_coef *c)                                                       \
    {                                                                                                   \
        (void)da, (void)c;                                                                              \
        _Pragma("omp parallel for schedule(static)") for (size_t i = 0; i < N * F; i++) dpre[i] =       \
            df(pre[i], dh[i]);                                                                          \
    }

static float relu_bwd(float x, float dy) { return x > 0.0f ? dy : 0.0f; }
ELEMENTWISE(relu, fl_relu_f32, relu_bwd)

/* GELU with fp8lab's correctly rounded erff (kernels/erff.h: the same bits on every machine and on the
   device), h = fl_gelu_f32(x) and dx = dy * fl_gelu_grad_f32(x, expf(-0.5f * x * x)), element by
   element: in blocks, erf(x / sqrt 2) by the vector span (erf_simd.c, fl_erff's bits) and e^(-x^2/2)
   by the libm's expf or model.c's vector copy of it (its bits), then erff.h's formulas. */
enum { GELU_BLOCK = 256 };

static void gelu_fwd_span(float *h, const float *x, size_t n)
{
    float t[GELU_BLOCK];
    for (size_t i = 0; i < n; i += GELU_BLOCK) {
        const size_t m = n - i < GELU_BLOCK ? n - i : GELU_BLOCK;
        for (size_t j = 0; j < m; j++)
            t[j] = x[i + j] * FL_GELU_RSQRT2;
        model_erff_span(t, t, m);
        for (size_t j = 0; j < m; j++)
            h[i + j] = fl_gelu_of_erf(x[i + j], t[j]);
    }
}

static void gelu_bwd_span(float *dx, const float *x, const float *dy, size_t n)
{
    float t[GELU_BLOCK], e[GELU_BLOCK];
    for (size_t i = 0; i < n; i += GELU_BLOCK) {
        const size_t m = n - i < GELU_BLOCK ? n - i : GELU_BLOCK;
        for (size_t j = 0; j < m; j++) {
            t[j] = x[i + j] * FL_GELU_RSQRT2;
            e[j] = -0.5f * x[i + j] * x[i + j];
        }
        model_erff_span(t, t, m);
        fl_model_expf_span(e, e, m);
        for (size_t j = 0; j < m; j++)
            dx[i + j] = dy[i + j] * fl_gelu_grad_of_erf(x[i + j], t[j], e[j]);
    }
}

static void fwd_gelu(float *h, const float *pre, size_t N, size_t F, const fl_poly_coef *c)
{
    (void)c;
    CHUNKS(N * F, gelu_fwd_span(h + i0, pre + i0, i1 - i0));
}

static void bwd_gelu(float *dpre, float *da, const float *dh, const float *pre, size_t N, size_t F,
                     const fl_poly_coef *c)
{
    (void)da, (void)c;
    CHUNKS(N * F, gelu_bwd_span(dpre + i0, pre + i0, dh + i0, i1 - i0));
}

/* The SwiGLU family: plane 0 the gate, plane 1 the up projection. */
static void fwd_swiglu(float *h, const float *pre, size_t N, size_t F, const fl_poly_coef *c)
{
    (void)c;
    const size_t n = N * F;
    const float *g = pre, *u = pre + n;
    CHUNKS(n, fl_swiglu_fwd(kout(h + i0), kin(g + i0), kin(u + i0), i1 - i0));
}

static void bwd_swiglu(float *dpre, float *da, const float *dh, const float *pre, size_t N, size_t F,
                       const fl_poly_coef *c)
{
    (void)da, (void)c;
    const size_t n = N * F;
    const float *g = pre, *u = pre + n;
    float *dg = dpre, *du = dpre + n;
    CHUNKS(n, fl_swiglu_bwd(kout(dg + i0), kout(du + i0), kin(g + i0), kin(u + i0), kin(dh + i0), i1 - i0));
}

static void fwd_polyrelu(float *h, const float *pre, size_t N, size_t F, const fl_poly_coef *c)
{
    CHUNKS(N * F, fl_polyrelu_fwd(kout(h + i0), kin(pre + i0), i1 - i0, c));
}

/* one call: its coefficient gradient has the twin's fixed tiled order */
static void bwd_polyrelu(float *dpre, float *da, const float *dh, const float *pre, size_t N, size_t F,
                         const fl_poly_coef *c)
{
    fl_polyrelu_bwd(kout(dpre), da, kin(pre), kin(dh), N * F, c);
}

static void fwd_polynorm(float *h, const float *pre, size_t N, size_t F, const fl_poly_coef *c)
{
    CHUNKS(N, fl_polynorm_fwd(kout(h + i0 * F), kin(pre + i0 * F), i1 - i0, F, c, FL_ACT_POLYNORM_EPS)); /* whole rows */
}

static void bwd_polynorm(float *dpre, float *da, const float *dh, const float *pre, size_t N, size_t F,
                         const fl_poly_coef *c)
{
    fl_polynorm_bwd(kout(dpre), da, kin(pre), kin(dh), N, F, c, FL_ACT_POLYNORM_EPS);
}

static const struct {
    act_fwd_fn fwd;
    act_bwd_fn bwd;
} impls[FL_ACT_COUNT] = {
#define IMPL_ROW(ID, name, kind, impl, ...) [FL_ACT_##ID] = { fwd_##impl, bwd_##impl },
    FL_ACT_TRAINS(IMPL_ROW)
};

int fl_act_swiglu(fl_act a) { return a.kind < FL_ACT_COUNT && impls[a.kind].fwd == fwd_swiglu; }

void fl_act_forward(float *h, const float *pre, size_t N, size_t F, fl_act act, const float *coef)
{
    if (act.kind >= FL_ACT_COUNT)
        return;
    const fl_poly_coef pc = fl_act_ncoef(act) ? fl_act_poly(coef, act) : (fl_poly_coef){ 0 };
    impls[act.kind].fwd(h, pre, N, F, &pc);
}

void fl_act_backward(float *dpre, float *dcoef, const float *dh, const float *pre, size_t N, size_t F,
                     fl_act act, const float *coef)
{
    if (act.kind >= FL_ACT_COUNT)
        return;
    const int nc = fl_act_ncoef(act);
    const fl_poly_coef pc = nc ? fl_act_poly(coef, act) : (fl_poly_coef){ 0 };
    float da[FL_POLY_MAX_ORDER + 1] = { 0 };
    impls[act.kind].bwd(dpre, da, dh, pre, N, F, &pc);
    for (int i = 0; i < nc; i++)
        dcoef[i] += da[i];
}
