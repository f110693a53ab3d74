/* swiglu.c — CPU twins of the SwiGLU and Smooth-SwiGLU kernels (kernels/swiglu.cu).
 *
 * SwiGLU(g, u) = silu(g) * u with silu(g) = g * sigmoid(g).  Smooth-SwiGLU (Fishman et al. 2025)
 * multiplies it by a per-channel (paper) or per-token (released code) power-of-two scale before the
 * FP8 cast; see kernels.h for the axes and how the scale is undone.  Plain loops over the element
 * functions of activations.h; the smoothing amaxes are maxima (exact, order-free). */
#include "kernels.h"

#include <stdio.h>

const char *fl_smooth_axis_name(fl_smooth_axis a)
{
    static const char *const names[] = { "channel", "token" };
    _Static_assert(sizeof names / sizeof names[0] == FL_SMOOTH_AXIS_COUNT, "axis names");
    return (unsigned)a < FL_SMOOTH_AXIS_COUNT ? names[a] : "?";
}

/* ---- the fp32 fast path ----------------------------------------------------------------------- *
 * When every operand is fp32 (the training harness), the loops below run instead of the per-element
 * format switch.  They compute exactly the operations of activations.h's element functions, written
 * without early returns and with the selects as bit masks (sw_sel), so that the compiler vectorises them
 * at AVX2 as well as at AVX-512: every branch of fl_expf_hd / fl_silu_f32 / fl_silu_grad_f32 is
 * evaluated and the right one selected (the tail g < FL_SILU_TAIL_X of fl_swiglu_f32 /
 * fl_swiglu_grad_f32 included, from the same exp reduction), which gives the same bits (each branch
 * is a deterministic IEEE expression; the selects only pick).  Division and fma are the same
 * instructions in packed form.  The backward computes e = exp(-|g|) once for silu(g) and silu'(g)
 * (the element functions compute the same e twice).  tests/test_kernels_swiglu.c compares the twins
 * with the element functions bit for bit, specials included. */

/* c ? a : b by a bit mask.  GCC may turn a ?: whose result feeds a floating-point operation into a
   branch with the operation copied into both arms; under -ftrapping-math (the default) it then cannot
   execute both arms, and vectorises the loop only with AVX-512's masked operations (not with AVX2:
   "control flow in loop", measured with GCC 12 -march=haswell). */
static inline float sw_sel(int c, float a, float b)
{
    const uint32_t m = 0u - (uint32_t)(c != 0);
    return fl_f32_from_bits((fl_f32_bits(a) & m) | (fl_f32_bits(b) & ~m));
}

/* fl_expf_hd(a) for a = -|x| (a <= 0 or NaN: the x > FL_EXP_X_MAX branch cannot occur).  The
   reduction runs at ac = max(a, FL_SILU_TAIL_XMIN) and p, kf are handed out too: for x < FL_SILU_TAIL_X
   (a = x) they are fl_silu_tail_p(x)'s, and for a >= -104 ac = a as in fl_expf_hd (below -104 the
   value is selected away, so clamping at -200 instead of -104 changes no bit). */
static inline float sw_exp_nonpos(float a, float *p_out, float *kf_out)
{
    const float ac = sw_sel(a >= FL_SILU_TAIL_XMIN, a, FL_SILU_TAIL_XMIN); /* NaN too: any in-range value */
    float kf;
    const float p = fl_exp_reduce_hd(ac, &kf);
    const int k = (int)kf;
    const int k1 = k / 2;
    const float v = (p * fl_pow2f(k1)) * fl_pow2f(k - k1);
    *p_out = p;
    *kf_out = kf;
    return sw_sel(fl_isnanf(a), a + a, sw_sel(a < FL_EXP_X_MIN, 0.0f, v));
}

/* fl_silu_f32(x) for x >= FL_SILU_TAIL_X (or NaN) from e = exp(-|x|), d = 1 + e (the callers select
   the tail for x < FL_SILU_TAIL_X): x / d for x >= 0 or NaN, (x e) / d below.  The numerator is
   selected before the one division, which divides the same operands as the branch taken. */
static inline float sw_silu_ed(float x, float e, float d)
{
    return fl_divf(sw_sel((x >= 0.0f) | fl_isnanf(x), x, x * e), d);
}

/* The main loops below compute the body (x = g * mg >= FL_SILU_TAIL_X, or NaN) in every lane and
   count the lanes below FL_SILU_TAIL_X; where there are any (rarely: |g| > 80), a second pass
   overwrites those lanes with the tail's expression -- the value fl_swiglu_f32 /
   fl_swiglu_grad_f32 select there, from the same exp reduction. */
static void swiglu_fwd_f32(float *restrict y, const float *restrict g, const float *restrict u, size_t n,
                           float mg, float mu, float my)
{
    size_t ntail = 0;
    for (size_t i = 0; i < n; i++) {
        const float x = g[i] * mg, uu = u[i] * mu;
        float p, kf;
        const float e = sw_exp_nonpos(-fl_absf(x), &p, &kf);
        const float d = 1.0f + e;
        y[i] = (sw_silu_ed(x, e, d) * uu) * my;
        ntail += x < FL_SILU_TAIL_X;
    }
    for (size_t i = 0; ntail && i < n; i++) {
        const float x = g[i] * mg, uu = u[i] * mu;
        if (x < FL_SILU_TAIL_X) {
            float p, kf;
            (void)sw_exp_nonpos(-fl_absf(x), &p, &kf);
            y[i] = fl_silu_tail_scale(fl_silu_tail_c(x, 0), p, kf, uu) * my;
        }
    }
}

static void swiglu_bwd_f32(float *restrict dg, float *restrict du, const float *restrict g,
                           const float *restrict u, const float *restrict dy, size_t n, float mg, float mu,
                           float md, float og, float ou)
{
    size_t ntail = 0;
    for (size_t i = 0; i < n; i++) {
        const float x = g[i] * mg, uu = u[i] * mu, dh = dy[i] * md;
        float p, kf;
        const float e = sw_exp_nonpos(-fl_absf(x), &p, &kf);
        const float d = 1.0f + e;
        const float one_over_d = fl_divf(1.0f, d), e_over_d = fl_divf(e, d);
        const int neg = x < 0.0f;
        const float sg = sw_sel(neg, e_over_d, one_over_d), sm = sw_sel(neg, one_over_d, e_over_d);
        const float gr = sg * fl_fmaf(x, sm, 1.0f);
        const float infv = sw_sel(x > 0.0f, 1.0f, -0.0f);
        const float grad = sw_sel(fl_absf(x) == fl_f32_from_bits(0x7F800000u), infv, gr);
        const float w = dh * uu;
        dg[i] = (w * grad) * og;
        du[i] = (dh * sw_silu_ed(x, e, d)) * ou;
        ntail += x < FL_SILU_TAIL_X;
    }
    for (size_t i = 0; ntail && i < n; i++) {
        const float x = g[i] * mg, uu = u[i] * mu, dh = dy[i] * md;
        if (x < FL_SILU_TAIL_X) {
            float p, kf;
            (void)sw_exp_nonpos(-fl_absf(x), &p, &kf);
            dg[i] = fl_silu_tail_scale(fl_silu_tail_c(x, 1), p, kf, dh * uu) * og;
            du[i] = fl_silu_tail_scale(fl_silu_tail_c(x, 0), p, kf, dh) * ou;
        }
    }
}

/* amax of v[0..n) with fl_amax_update's semantics (NaN ignored); max is exact, so lanes are free. */
static float amax_f32(const float *v, size_t n, float a0)
{
    float acc[16] = { 0 };
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++)
            acc[l] = fl_amax_update(acc[l], v[i + (size_t)l]);
    float a = a0;
    for (int l = 0; l < 16; l++)
        a = fl_amax_update(a, acc[l]);
    for (; i < n; i++)
        a = fl_amax_update(a, v[i]);
    return a;
}

static int all_f32(const fl_kin *a, const fl_kin *b, const fl_kin *c, const fl_kout *o1, const fl_kout *o2)
{
    return a->fmt == FL_FMT_FP32 && b->fmt == FL_FMT_FP32 && (!c || c->fmt == FL_FMT_FP32) &&
           o1->fmt == FL_FMT_FP32 && (!o2 || o2->fmt == FL_FMT_FP32);
}

int fl_swiglu_fwd(fl_kout y, fl_kin g, fl_kin u, size_t n)
{
    if (n == 0)
        return 0;
    if (!fl_kout_ok(&y) || !fl_kin_ok(&g) || !fl_kin_ok(&u)) {
        fprintf(stderr, "fl_swiglu_fwd: bad formats or NULL data\n");
        return -1;
    }
    const float mg = fl_kin_scale_(&g), mu = fl_kin_scale_(&u), my = fl_kout_mul(&y);
    if (all_f32(&g, &u, NULL, &y, NULL)) { /* fp32 output: my = 1, the stored value is v itself */
        swiglu_fwd_f32(y.data, g.data, u.data, n, mg, mu, my);
        if (y.amax)
            fl_kout_amax(&y, amax_f32(y.data, n, 0.0f));
        return 0;
    }
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++) {
        const float v = fl_swiglu_f32(fl_kin_get(&g, mg, i), fl_kin_get(&u, mu, i));
        amax = fl_amax_update(amax, v);
        fl_kout_put(&y, my, i, v);
    }
    fl_kout_amax(&y, amax);
    return 0;
}

/* dg, du from dh for elements [i0, i1), dh_i = dy_i * s (s = 1: plain SwiGLU). */
static void swiglu_bwd_range(const fl_kout *dg, const fl_kout *du, float *amax_g, float *amax_u,
                             const fl_kin *g, const fl_kin *u, const fl_kin *dy, size_t i0, size_t i1,
                             const float *s, size_t s_stride)
{
    const float mg = fl_kin_scale_(g), mu = fl_kin_scale_(u), md = fl_kin_scale_(dy);
    const float og = fl_kout_mul(dg), ou = fl_kout_mul(du);
    for (size_t i = i0; i < i1; i++) {
        float dh = fl_kin_get(dy, md, i);
        if (s)
            dh = dh * s[(i - i0) * s_stride];
        float a, b;
        fl_swiglu_grad_f32(&a, &b, fl_kin_get(g, mg, i), fl_kin_get(u, mu, i), dh);
        *amax_g = fl_amax_update(*amax_g, a);
        *amax_u = fl_amax_update(*amax_u, b);
        fl_kout_put(dg, og, i, a);
        fl_kout_put(du, ou, i, b);
    }
}

static int bwd_check(const char *who, const fl_kout *dg, const fl_kout *du, const fl_kin *g,
                     const fl_kin *u, const fl_kin *dy)
{
    if (!fl_kout_ok(dg) || !fl_kout_ok(du) || !fl_kin_ok(g) || !fl_kin_ok(u) || !fl_kin_ok(dy)) {
        fprintf(stderr, "%s: bad formats or NULL data\n", who);
        return -1;
    }
    return 0;
}

int fl_swiglu_bwd(fl_kout dg, fl_kout du, fl_kin g, fl_kin u, fl_kin dy, size_t n)
{
    if (n == 0)
        return 0;
    if (bwd_check("fl_swiglu_bwd", &dg, &du, &g, &u, &dy))
        return -1;
    float ag = 0.0f, au = 0.0f;
    if (all_f32(&g, &u, &dy, &dg, &du)) {
        swiglu_bwd_f32(dg.data, du.data, g.data, u.data, dy.data, n, fl_kin_scale_(&g), fl_kin_scale_(&u),
                       fl_kin_scale_(&dy), fl_kout_mul(&dg), fl_kout_mul(&du));
        if (dg.amax)
            fl_kout_amax(&dg, amax_f32(dg.data, n, 0.0f));
        if (du.amax)
            fl_kout_amax(&du, amax_f32(du.data, n, 0.0f));
        return 0;
    }
    swiglu_bwd_range(&dg, &du, &ag, &au, &g, &u, &dy, 0, n, NULL, 0);
    fl_kout_amax(&dg, ag);
    fl_kout_amax(&du, au);
    return 0;
}

int fl_smooth_swiglu_fwd(fl_kout y, float *s, fl_kin g, fl_kin u, size_t R, size_t C,
                         fl_smooth_axis axis, int compute)
{
    if (R == 0 || C == 0)
        return 0;
    if (!fl_kout_ok(&y) || !fl_kin_ok(&g) || !fl_kin_ok(&u) || !s || (unsigned)axis >= FL_SMOOTH_AXIS_COUNT) {
        fprintf(stderr, "fl_smooth_swiglu_fwd: bad formats, axis or NULL data\n");
        return -1;
    }
    const float mg = fl_kin_scale_(&g), mu = fl_kin_scale_(&u), my = fl_kout_mul(&y);
    if (compute) {
        const size_t ns = axis == FL_SMOOTH_CHANNEL ? C : R;
        for (size_t k = 0; k < ns; k++)
            s[k] = 0.0f;
        for (size_t r = 0; r < R; r++)
            for (size_t c = 0; c < C; c++) {
                const float h = fl_swiglu_f32(fl_kin_get(&g, mg, r * C + c), fl_kin_get(&u, mu, r * C + c));
                float *m = &s[axis == FL_SMOOTH_CHANNEL ? c : r];
                *m = fl_amax_update(*m, h);
            }
        for (size_t k = 0; k < ns; k++)
            s[k] = fl_smooth_scale_f32(s[k]);
    }
    float amax = 0.0f;
    for (size_t r = 0; r < R; r++)
        for (size_t c = 0; c < C; c++) {
            const size_t i = r * C + c;
            const float h = fl_swiglu_f32(fl_kin_get(&g, mg, i), fl_kin_get(&u, mu, i));
            const float v = h * s[axis == FL_SMOOTH_CHANNEL ? c : r];
            amax = fl_amax_update(amax, v);
            fl_kout_put(&y, my, i, v);
        }
    fl_kout_amax(&y, amax);
    return 0;
}

int fl_smooth_swiglu_bwd(fl_kout dg, fl_kout du, fl_kin g, fl_kin u, fl_kin dv, const float *s,
                         size_t R, size_t C, fl_smooth_axis axis)
{
    if (R == 0 || C == 0)
        return 0;
    if (bwd_check("fl_smooth_swiglu_bwd", &dg, &du, &g, &u, &dv))
        return -1;
    if (!s || (unsigned)axis >= FL_SMOOTH_AXIS_COUNT) {
        fprintf(stderr, "fl_smooth_swiglu_bwd: bad axis or NULL scales\n");
        return -1;
    }
    float ag = 0.0f, au = 0.0f;
    for (size_t r = 0; r < R; r++) {
        if (axis == FL_SMOOTH_CHANNEL)
            swiglu_bwd_range(&dg, &du, &ag, &au, &g, &u, &dv, r * C, r * C + C, s, 1);
        else
            swiglu_bwd_range(&dg, &du, &ag, &au, &g, &u, &dv, r * C, r * C + C, s + r, 0);
    }
    fl_kout_amax(&dg, ag);
    fl_kout_amax(&du, au);
    return 0;
}
