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

int fl_swiglu_fwd(fl_kout y, fl_kin g, fl_kin u, size_t n)
{
    if (n == 0)
        return 0;
    if (!fl_kout_ok(&y) || !fl_kin_ok(&g) || !fl_kin_ok(&u)) {
        fprintf(stderr, "fl_swiglu_fwd: bad formats or NULL data\n");
        return -1;
    }
    const float mg = fl_kin_scale_(&g), mu = fl_kin_scale_(&u), my = fl_kout_mul(&y);
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
