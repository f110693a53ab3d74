/* polynorm.c — CPU twins of the PolyNorm kernels (kernels/polynorm.cu).
 *
 * PolyNorm_r(x)_j = a_0 + sum_{i=1..r} a_i u_i,j / sqrt(mean_j(u_i,j^2) + eps),  u_i = x^i, over each
 * row (one token's hidden vector of H elements).  Each row is one CUDA block of FL_RED_THREADS
 * threads; the twin simulates that block's summation order literally (activations.h section 6):
 * thread t runs over vectors t, t + 256, ... of the row, element by element, then the fixed tree.
 * Pass 1 reduces the row, pass 2 writes it (the kernel re-reads the row from L1/L2). */
#include "kernels.h"

#include <stdio.h>
#include <stdlib.h>

/* Row sums in the block order: S[i] (i = 1..order) and, with dy, D[i] (i = 0..order). */
static void row_sums(float *S, float *D, const fl_kin *x, float mx, const fl_kin *dy, float md,
                     size_t row0, size_t H, int order)
{
    float accS[FL_POLY_MAX_ORDER + 1][FL_RED_THREADS], accD[FL_POLY_MAX_ORDER + 1][FL_RED_THREADS];
    const size_t nvec = (H + FL_VEC - 1) / FL_VEC;
    for (int t = 0; t < FL_RED_THREADS; t++) {
        float s[FL_POLY_MAX_ORDER + 1] = { 0 }, d[FL_POLY_MAX_ORDER + 1] = { 0 };
        for (size_t v = (size_t)t; v < nvec; v += FL_RED_THREADS)
            for (size_t j = v * FL_VEC; j < v * FL_VEC + FL_VEC && j < H; j++) {
                const float xv = fl_kin_get(x, mx, row0 + j);
                if (dy)
                    fl_polynorm_bwd_accum(s, d, order, xv, fl_kin_get(dy, md, row0 + j));
                else
                    fl_polynorm_fwd_accum(s, order, xv);
            }
        for (int i = 0; i <= order; i++) {
            accS[i][t] = s[i];
            accD[i][t] = d[i];
        }
    }
    for (int i = 1; i <= order; i++)
        S[i] = fl_tree_sum(accS[i]);
    if (dy)
        for (int i = 0; i <= order; i++)
            D[i] = fl_tree_sum(accD[i]);
}

static int check(const char *who, const fl_kout *y, const fl_kin *x, size_t H, const fl_poly_coef *c)
{
    if (!fl_poly_coef_ok(c) || !fl_kout_ok(y) || !fl_kin_ok(x) || H == 0 || H >= (1u << 24)) {
        fprintf(stderr, "%s: bad arguments (order %d, H %zu, formats %d -> %d, or NULL data)\n", who,
                c ? c->order : -1, H, (int)x->fmt, (int)y->fmt);
        return -1;
    }
    return 0;
}

int fl_polynorm_fwd(fl_kout y, fl_kin x, size_t R, size_t H, const fl_poly_coef *c, float eps)
{
    if (R == 0)
        return 0;
    if (check("fl_polynorm_fwd", &y, &x, H, c))
        return -1;
    const float mx = fl_kin_scale_(&x), my = fl_kout_mul(&y), Hf = (float)H;
    float amax = 0.0f;
    for (size_t r = 0; r < R; r++) {
        float S[FL_POLY_MAX_ORDER + 1] = { 0 }, cr[FL_POLY_MAX_ORDER + 1] = { 0 };
        row_sums(S, NULL, &x, mx, NULL, 0.0f, r * H, H, c->order);
        fl_polynorm_fwd_consts(cr, S, c, Hf, eps);
        for (size_t j = 0; j < H; j++) {
            const float v = fl_polynorm_out_f32(cr, c->a[0], c->order, fl_kin_get(&x, mx, r * H + j));
            amax = fl_amax_update(amax, v);
            fl_kout_put(&y, my, r * H + j, v);
        }
    }
    fl_kout_amax(&y, amax);
    return 0;
}

int fl_polynorm_bwd(fl_kout dx, float *da, fl_kin x, fl_kin dy, size_t R, size_t H,
                    const fl_poly_coef *c, float eps)
{
    if (R == 0) {
        if (da)
            for (int k = 0; c && k <= c->order && k <= FL_POLY_MAX_ORDER; k++)
                da[k] = 0.0f;
        return 0;
    }
    if (check("fl_polynorm_bwd", &dx, &x, H, c) || !fl_kin_ok(&dy))
        return -1;
    const int K = c->order + 1;
    const float mx = fl_kin_scale_(&x), md = fl_kin_scale_(&dy), mo = fl_kout_mul(&dx), Hf = (float)H;
    float *part = da ? malloc(R * K * sizeof *part) : NULL;
    if (da && !part)
        return -1;
    float amax = 0.0f;
    for (size_t r = 0; r < R; r++) {
        float S[FL_POLY_MAX_ORDER + 1] = { 0 }, D[FL_POLY_MAX_ORDER + 1] = { 0 };
        float ri[FL_POLY_MAX_ORDER + 1] = { 0 }, w[FL_POLY_MAX_ORDER + 1] = { 0 };
        float b[FL_POLY_MAX_ORDER + 1] = { 0 }, pa[FL_POLY_MAX_ORDER + 1] = { 0 };
        row_sums(S, D, &x, mx, &dy, md, r * H, H, c->order);
        fl_polynorm_bwd_consts(ri, w, b, pa, S, D, c, Hf, eps);
        for (size_t j = 0; j < H; j++) {
            const size_t i = r * H + j;
            const float v = fl_polynorm_grad_f32(ri, w, b, c->order, fl_kin_get(&x, mx, i), fl_kin_get(&dy, md, i));
            amax = fl_amax_update(amax, v);
            fl_kout_put(&dx, mo, i, v);
        }
        if (part)
            for (int k = 0; k < K; k++)
                part[r * K + k] = pa[k];
    }
    fl_kout_amax(&dx, amax);
    if (part) {
        for (int k = 0; k < K; k++)
            da[k] = fl_partials_sum_order(part + k, R, (size_t)K);
        free(part);
    }
    return 0;
}
