/* polyrelu.c — CPU twins of the PolyReLU kernels (kernels/polyrelu.cu), and the fixed-order sums
 * every twin shares (activations.h section 6).
 *
 * PolyReLU_r(x) = sum_{i=0..r} a_i relu(x)^i (PolyCom, Zhuo et al. 2025).  The twins are plain loops
 * over the element functions of activations.h; the coefficient gradients are sums over the whole
 * tensor, reduced in the tile order the CUDA kernel uses (tile partials, then one block over the tile
 * partials), so they are bit-identical too. */
#include "kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

fl_poly_coef fl_poly_coef_default(int order)
{
    fl_poly_coef c;
    memset(&c, 0, sizeof c);
    c.order = order;
    for (int i = 1; i <= order && i <= FL_POLY_MAX_ORDER; i++)
        c.a[i] = 1.0f / (float)order;
    return c;
}

/* ---- fixed-order sums --------------------------------------------------------------------------- */

float fl_block_sum_order(size_t n, float (*term)(size_t i, const void *ctx), const void *ctx)
{
    float acc[FL_RED_THREADS];
    const size_t nvec = (n + FL_VEC - 1) / FL_VEC;
    for (size_t t = 0; t < FL_RED_THREADS; t++) {
        float a = 0.0f;
        for (size_t v = t; v < nvec; v += FL_RED_THREADS)
            for (size_t i = v * FL_VEC; i < v * FL_VEC + FL_VEC && i < n; i++)
                a = a + term(i, ctx);
        acc[t] = a;
    }
    return fl_tree_sum(acc);
}

float fl_partials_sum_order(const float *p, size_t n, size_t stride)
{
    float acc[FL_RED_THREADS];
    for (size_t t = 0; t < FL_RED_THREADS; t++) {
        float a = 0.0f;
        for (size_t k = t; k < n; k += FL_RED_THREADS)
            a = a + p[k * stride];
        acc[t] = a;
    }
    return fl_tree_sum(acc);
}

/* ---- PolyReLU ----------------------------------------------------------------------------------- */

static int check_args(const char *who, const fl_kout *y, const fl_kin *x, const fl_poly_coef *c)
{
    if (!fl_poly_coef_ok(c) || !fl_kout_ok(y) || !fl_kin_ok(x)) {
        fprintf(stderr, "%s: bad arguments (order %d, formats %d -> %d, or NULL data)\n", who,
                c ? c->order : -1, (int)x->fmt, (int)y->fmt);
        return -1;
    }
    return 0;
}

int fl_polyrelu_fwd(fl_kout y, fl_kin x, size_t n, const fl_poly_coef *c)
{
    if (n == 0)
        return 0;
    if (check_args("fl_polyrelu_fwd", &y, &x, c))
        return -1;
    const float mx = fl_kin_scale_(&x), my = fl_kout_mul(&y);
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++) {
        const float v = fl_polyrelu_f32(c, fl_kin_get(&x, mx, i));
        amax = fl_amax_update(amax, v);
        fl_kout_put(&y, my, i, v);
    }
    fl_kout_amax(&y, amax);
    return 0;
}

int fl_polyrelu_bwd(fl_kout dx, float *da, fl_kin x, fl_kin dy, size_t n, const fl_poly_coef *c)
{
    if (n == 0) {
        if (da)
            for (int k = 0; c && k <= c->order && k <= FL_POLY_MAX_ORDER; k++)
                da[k] = 0.0f;
        return 0;
    }
    if (check_args("fl_polyrelu_bwd", &dx, &x, c) || !fl_kin_ok(&dy))
        return -1;
    const int K = c->order + 1;
    const float mx = fl_kin_scale_(&x), md = fl_kin_scale_(&dy), mo = fl_kout_mul(&dx);
    const size_t ntiles = (n + FL_TILE - 1) / FL_TILE;
    float *part = da ? malloc(ntiles * K * sizeof *part) : NULL;
    if (da && !part)
        return -1;
    float amax = 0.0f;
    float acc[FL_POLY_MAX_ORDER + 1][FL_RED_THREADS];
    for (size_t tile = 0; tile < ntiles; tile++) {
        const size_t base = tile * FL_TILE;
        for (int t = 0; t < FL_RED_THREADS; t++) {
            float a[FL_POLY_MAX_ORDER + 1] = { 0 };
            for (int it = 0; it < FL_TILE_ITERS; it++) {
                const size_t v0 = base + ((size_t)it * FL_RED_THREADS + t) * FL_VEC;
                for (size_t i = v0; i < v0 + FL_VEC && i < n; i++) {
                    const float xv = fl_kin_get(&x, mx, i), g = fl_kin_get(&dy, md, i);
                    const float d = g * fl_polyrelu_grad_f32(c, xv);
                    amax = fl_amax_update(amax, d);
                    fl_kout_put(&dx, mo, i, d);
                    if (part) {
                        float term[FL_POLY_MAX_ORDER + 1];
                        fl_polyrelu_coef_terms(term, c->order, xv, g);
                        for (int k = 0; k < K; k++)
                            a[k] = a[k] + term[k];
                    }
                }
            }
            for (int k = 0; k < K; k++)
                acc[k][t] = a[k];
        }
        if (part)
            for (int k = 0; k < K; k++)
                part[tile * K + k] = fl_tree_sum(acc[k]);
    }
    fl_kout_amax(&dx, amax);
    if (part) {
        for (int k = 0; k < K; k++)
            da[k] = fl_partials_sum_order(part + k, ntiles, (size_t)K);
        free(part);
    }
    return 0;
}
