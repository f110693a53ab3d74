/* ffn_act.c — FFN activations forward/backward (see ffn_act.h): the kernels' CPU twins
 * (kernels/kernels.h) for SwiGLU, PolyReLU and PolyNorm; ReLU and GELU are plain loops here. */
#include "ffn_act.h"
#include "fl_libm.h"

#include "kernels.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const fl_act_info fl_act_table[FL_ACT_COUNT] = {
    [FL_ACT_RELU] = { "relu", NULL, 0, 0, 0, 0 },
    [FL_ACT_GELU] = { "gelu", NULL, 0, 0, 0, 0 },
    [FL_ACT_SWIGLU] = { "swiglu", NULL, 1, 0, 0, 0 },
    [FL_ACT_SMOOTH_SWIGLU] = { "smooth_swiglu", "per channel", 1, 0, 0, 0 },
    [FL_ACT_SMOOTH_SWIGLU_TOKEN] = { "smooth_swiglu_token", "per token", 1, 0, 0, 0 },
    [FL_ACT_POLYRELU] = { "polyrelu", NULL, 0, 2, 4, 3 },
    [FL_ACT_POLYNORM] = { "polynorm", NULL, 0, 2, 4, 3 },
};

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

const char *fl_act_name(fl_act a)
{
    static const char *const poly[2][3] = { { "polyrelu2", "polyrelu3", "polyrelu4" },
                                            { "polynorm2", "polynorm3", "polynorm4" } };
    if (a.kind >= FL_ACT_COUNT)
        return "?";
    if ((a.kind == FL_ACT_POLYRELU || a.kind == FL_ACT_POLYNORM) && a.order >= 2 && a.order <= 4)
        return poly[a.kind == FL_ACT_POLYNORM][a.order - 2];
    return fl_act_table[a.kind].name;
}

int fl_act_swiglu(fl_act a)
{
    return a.kind == FL_ACT_SWIGLU || a.kind == FL_ACT_SMOOTH_SWIGLU || a.kind == FL_ACT_SMOOTH_SWIGLU_TOKEN;
}
int fl_act_gated(fl_act a) { return a.kind < FL_ACT_COUNT && fl_act_table[a.kind].gated; }
int fl_act_ncoef(fl_act a)
{
    return (a.kind == FL_ACT_POLYRELU || a.kind == FL_ACT_POLYNORM) ? (int)a.order + 1 : 0;
}

void fl_act_coef_init(float *a, fl_act act)
{
    const int n = fl_act_ncoef(act);
    if (!n)
        return;
    const fl_poly_coef c = fl_poly_coef_default((int)act.order);
    for (int i = 0; i < n; i++)
        a[i] = c.a[i];
}

static fl_poly_coef poly_of(const float *coef, fl_act act)
{
    fl_poly_coef c;
    memset(&c, 0, sizeof c);
    c.order = (int)act.order;
    for (int i = 0; i <= c.order; i++)
        c.a[i] = coef[i];
    return c;
}

#define PN_EPS 1e-6f

static fl_kin kin(const float *p) { return (fl_kin){ p, FL_FMT_FP32, NULL }; }
static fl_kout kout(float *p) { return (fl_kout){ p, FL_FMT_FP32, NULL, NULL }; }

static float gelu_grad_f(float x)
{
    return 0.5f * (1.0f + erff(x * 0.70710678118654752f)) + x * 0.39894228040143268f * expf(-0.5f * x * x);
}

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

void fl_act_forward(float *h, const float *pre, size_t N, size_t F, fl_act act, const float *coef)
{
    const size_t n = N * F;
    if (fl_act_gated(act)) {
        const float *g = pre, *u = pre + n;
        CHUNKS(n, fl_swiglu_fwd(kout(h + i0), kin(g + i0), kin(u + i0), i1 - i0));
        return;
    }
    const fl_poly_coef pc = fl_act_ncoef(act) ? poly_of(coef, act) : (fl_poly_coef){ 0 };
    switch (act.kind) {
    case FL_ACT_RELU:
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++)
            h[i] = fl_relu_f32(pre[i]);
        break;
    case FL_ACT_GELU:
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++)
            h[i] = fl_gelu_erff(pre[i]);
        break;
    case FL_ACT_POLYRELU:
        CHUNKS(n, fl_polyrelu_fwd(kout(h + i0), kin(pre + i0), i1 - i0, &pc));
        break;
    case FL_ACT_POLYNORM: /* row-wise: chunks of whole rows */
        CHUNKS(N, fl_polynorm_fwd(kout(h + i0 * F), kin(pre + i0 * F), i1 - i0, F, &pc, PN_EPS));
        break;
    default:
        break;
    }
}

void fl_act_backward(float *dpre, float *dcoef, const float *dh, const float *pre, size_t N, size_t F,
                     fl_act act, const float *coef)
{
    const size_t n = N * F;
    if (fl_act_gated(act)) {
        const float *g = pre, *u = pre + n;
        float *dg = dpre, *du = dpre + n;
        CHUNKS(n, fl_swiglu_bwd(kout(dg + i0), kout(du + i0), kin(g + i0), kin(u + i0), kin(dh + i0), i1 - i0));
        return;
    }
    const int nc = fl_act_ncoef(act);
    const fl_poly_coef pc = nc ? poly_of(coef, act) : (fl_poly_coef){ 0 };
    float da[FL_POLY_MAX_ORDER + 1] = { 0 };
    switch (act.kind) {
    case FL_ACT_RELU:
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++)
            dpre[i] = pre[i] > 0.0f ? dh[i] : 0.0f;
        break;
    case FL_ACT_GELU:
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < n; i++)
            dpre[i] = dh[i] * gelu_grad_f(pre[i]);
        break;
    case FL_ACT_POLYRELU: /* one call: its coefficient gradient has the twin's fixed tiled order */
        fl_polyrelu_bwd(kout(dpre), da, kin(pre), kin(dh), n, &pc);
        break;
    case FL_ACT_POLYNORM:
        fl_polynorm_bwd(kout(dpre), da, kin(pre), kin(dh), N, F, &pc, PN_EPS);
        break;
    default:
        break;
    }
    for (int i = 0; i < nc; i++)
        dcoef[i] += da[i];
}
