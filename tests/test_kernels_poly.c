/* test_kernels_poly.c — the PolyReLU and PolyNorm CPU twins (kernels/polyrelu.c, polynorm.c).
 *
 *   - fp32-output twins against double-precision formulas within the bounds of kernels/README.md
 *     (forward, backward, coefficient gradients), for orders 2..4 and paper / mixed-sign coefficients
 *   - twins against their element functions, bit for bit (elementwise: per element; PolyNorm: row sums
 *     in the block order of fl_block_sum_order)
 *   - output semantics: bf16 = RNE of the fp32 value; e4m3 = RNE saturating of value * scale with NaN
 *     -> 0x7F (the hardware cvt.rn.satfinite); amax = max |value| before the scale, NaN ignored;
 *     FP8 inputs = decode * scale_inv
 * Inputs: fixed-seed LCG, wide dynamic range, plus specials (0, -0, NaN, +-Inf, huge). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels.h"

static const double U = 1.0 / 16777216.0;

static uint64_t lcg = 0x2545F4914F6CDD1Dull;
static double rnd(void)
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(lcg >> 11) / 9007199254740992.0;
}

static float rnd_act(void) /* activations-like: mostly O(1), sometimes large or tiny */
{
    const double r = rnd();
    if (r < 0.05)
        return (float)ldexp(rnd() - 0.5, (int)(rnd() * 40) - 20);
    return (float)((rnd() - 0.5) * 8.0);
}

static fl_kin in32(const float *p) { return (fl_kin){ p, FL_FMT_FP32, NULL }; }
static fl_kout out32(float *p) { return (fl_kout){ p, FL_FMT_FP32, NULL, NULL }; }

static const float specials[] = { 0.0f, -0.0f, NAN, INFINITY, -INFINITY, 3e38f, -3e38f, 1e-40f, 65504.0f, 1.0f };

/* ---- PolyReLU -------------------------------------------------------------------------------- */

static void test_polyrelu(const fl_poly_coef *c)
{
    const int r = c->order;
    const size_t n = 5 * FL_TILE + 123; /* 6 tiles, the last partial */
    float *x = malloc(n * sizeof *x), *dy = malloc(n * sizeof *dy), *y = malloc(n * sizeof *y), *dx = malloc(n * sizeof *dx);
    for (size_t i = 0; i < n; i++) {
        x[i] = rnd_act();
        dy[i] = rnd_act();
    }
    for (size_t i = 0; i < FL_ARRAY_LEN(specials); i++)
        x[1000 + i] = specials[i];
    CHECK(fl_polyrelu_fwd(out32(y), in32(x), n, c) == 0, "polyrelu_fwd rc");
    float da[FL_POLY_MAX_ORDER + 1];
    CHECK(fl_polyrelu_bwd(out32(dx), da, in32(x), in32(dy), n, c) == 0, "polyrelu_bwd rc");
    double worst_f = 0, worst_b = 0;
    double dae[FL_POLY_MAX_ORDER + 1] = { 0 }, daa[FL_POLY_MAX_ORDER + 1] = { 0 };
    for (size_t i = 0; i < n; i++) {
        /* twin == element function, bit for bit */
        CHECK(fl_f32_bits(y[i]) == fl_f32_bits(fl_polyrelu_f32(c, x[i])) || (isnan(y[i]) && isnan(fl_polyrelu_f32(c, x[i]))),
              "FAIL polyrelu twin != element x=%a", x[i]);
        const float g = dy[i] * fl_polyrelu_grad_f32(c, x[i]);
        CHECK(fl_f32_bits(dx[i]) == fl_f32_bits(g) || (isnan(dx[i]) && isnan(g)), "FAIL polyrelu bwd twin != element x=%a", x[i]);
        if (i >= 1000 && i < 1000 + FL_ARRAY_LEN(specials))
            continue; /* checked bit for bit above; the coefficient sums are redone without them */
        const double t = x[i] > 0 ? x[i] : 0.0;
        double v = 0, va = 0, d = 0, donly = 0;
        for (int k = r; k >= 0; k--) {
            v = v * t + c->a[k];
            va = va * t + fabs(c->a[k]);
        }
        for (int k = r; k >= 1; k--) {
            d = d * t + k * (double)c->a[k];
            donly = donly * t + k * fabs((double)c->a[k]);
        }
        if (!(x[i] > 0))
            d = donly = 0;
        /* forward: gamma_r sum |a_i| t^i;  backward: (r + 2) u |dy| sum i |a_i| t^(i-1) */
        const double bf = (r + 1) * U * va, bb = (r + 2) * U * fabs(dy[i]) * donly;
        CHECK(fabs(y[i] - v) <= bf, "FAIL polyrelu%d fwd x=%a got=%a want=%a", r, x[i], y[i], v);
        CHECK(fabs(dx[i] - dy[i] * d) <= bb, "FAIL polyrelu%d bwd x=%a dy=%a got=%a want=%a", r, x[i], dy[i], dx[i], dy[i] * d);
        if (va > 0)
            worst_f = fmax(worst_f, fabs(y[i] - v) / (U * va));
        if (donly > 0 && dy[i] != 0)
            worst_b = fmax(worst_b, fabs(dx[i] - dy[i] * d) / (U * fabs(dy[i]) * donly));
        double p = 1;
        for (int k = 0; k <= r; k++) {
            dae[k] += dy[i] * p;
            daa[k] += fabs(dy[i] * p);
            p *= t;
        }
    }
    /* the coefficient gradients saw the specials (NaN x): recompute them without */
    for (size_t i = 0; i < FL_ARRAY_LEN(specials); i++)
        x[1000 + i] = 0.5f;
    CHECK(fl_polyrelu_bwd(out32(dx), da, in32(x), in32(dy), n, c) == 0, "polyrelu_bwd rc");
    for (size_t i = 0; i < FL_ARRAY_LEN(specials); i++) {
        double p = 1;
        for (int k = 0; k <= r; k++) {
            dae[k] += dy[1000 + i] * p;
            daa[k] += fabs(dy[1000 + i] * p);
            p *= 0.5;
        }
    }
    /* (L + 8) + (ceil(tiles / 256) + 8) + powers (k) + 1: L = 64 */
    const double ntiles = ceil((double)n / FL_TILE);
    for (int k = 0; k <= r; k++) {
        const double bound = (64 + 8 + ceil(ntiles / 256) + 8 + k + 2) * U * daa[k];
        CHECK(fabs(da[k] - dae[k]) <= bound, "FAIL polyrelu%d da%d got=%a want=%a bound=%g", r, k, da[k], dae[k], bound);
    }
    /* da is the tile order of section 6, reproduced here literally */
    float part[8][FL_POLY_MAX_ORDER + 1];
    for (size_t tile = 0; tile < (size_t)ntiles; tile++) {
        float acc[FL_POLY_MAX_ORDER + 1][FL_RED_THREADS];
        for (int t = 0; t < FL_RED_THREADS; t++) {
            float a[FL_POLY_MAX_ORDER + 1] = { 0 };
            for (int it = 0; it < FL_TILE_ITERS; it++)
                for (size_t j = 0; j < FL_VEC; j++) {
                    const size_t i = tile * FL_TILE + ((size_t)it * FL_RED_THREADS + t) * FL_VEC + j;
                    if (i >= n)
                        continue;
                    float tm[FL_POLY_MAX_ORDER + 1];
                    fl_polyrelu_coef_terms(tm, r, x[i], dy[i]);
                    for (int k = 0; k <= r; k++)
                        a[k] = a[k] + tm[k];
                }
            for (int k = 0; k <= r; k++)
                acc[k][t] = a[k];
        }
        for (int k = 0; k <= r; k++)
            part[tile][k] = fl_tree_sum(acc[k]);
    }
    for (int k = 0; k <= r; k++)
        CHECK(fl_f32_bits(da[k]) == fl_f32_bits(fl_partials_sum_order(&part[0][k], (size_t)ntiles, FL_POLY_MAX_ORDER + 1)),
              "FAIL polyrelu da%d order", k);
    printf("  polyrelu%d (a = %g %g %g ...): max fwd err %.2f u*sum|a t^i|, bwd %.2f\n", r, c->a[0], c->a[1], c->a[2], worst_f, worst_b);
    free(x);
    free(dy);
    free(y);
    free(dx);
}

/* Output-format semantics, shown on PolyReLU (the launchers share the store path). */
static void test_output_semantics(void)
{
    const fl_poly_coef c = fl_poly_coef_default(3);
    enum { N = 4096 };
    float x[N], v[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)((rnd() - 0.3) * ldexp(1.0, (int)(rnd() * 16) - 6));
    x[0] = NAN;
    x[1] = INFINITY;
    x[2] = 9.0f;   /* PolyReLU3 = (9 + 81 + 729) / 3 = 273: inside e4m3 */
    x[3] = 12.0f;  /* (12 + 144 + 1728) / 3 = 628: beyond 464, saturates */
    x[4] = -5.0f;  /* 0 */
    CHECK(fl_polyrelu_fwd(out32(v), in32(x), N, &c) == 0, "rc");
    uint16_t yb[N];
    uint8_t ye[N];
    float amax = 0.0f, amax_b = 0.0f;
    const float scale = 0.75f;
    CHECK(fl_polyrelu_fwd((fl_kout){ yb, FL_FMT_BF16, &scale, &amax_b }, in32(x), N, &c) == 0, "rc bf16");
    CHECK(fl_polyrelu_fwd((fl_kout){ ye, FL_FMT_E4M3, &scale, &amax }, in32(x), N, &c) == 0, "rc e4m3");
    float want_amax = 0.0f;
    for (int i = 0; i < N; i++) {
        /* bf16: no scale, RNE, overflow -> Inf, NaN -> 0x7FFF */
        const uint32_t wb = fl_encode_f32(FL_FMT_BF16, v[i], FL_RND_NE, FL_OVF_NOSATURATE, 0);
        CHECK(yb[i] == wb, "FAIL bf16 out x=%a v=%a got=%#x want=%#x", x[i], v[i], yb[i], wb);
        const uint32_t we = fl_encode_f32(FL_FMT_E4M3, v[i] * scale, FL_RND_NE, FL_OVF_SATURATE, 0);
        CHECK(ye[i] == we, "FAIL e4m3 out x=%a v=%a got=%#x want=%#x", x[i], v[i], ye[i], we);
        if (!isnan(v[i]) && fabsf(v[i]) > want_amax)
            want_amax = fabsf(v[i]);
    }
    CHECK(ye[0] == 0x7F, "NaN -> 0x7F");
    CHECK(ye[1] == 0x7E, "Inf -> 448 (saturating)");
    CHECK(ye[3] == 0x7E, "628 * 0.75 = 471 > 464 -> 448");
    CHECK(ye[2] == fl_encode_f32(FL_FMT_E4M3, 273.0f * 0.75f, FL_RND_NE, FL_OVF_SATURATE, 0), "in range");
    CHECK(yb[1] == 0x7F80 && yb[0] == 0x7FFF, "bf16 Inf, NaN");
    CHECK(amax == INFINITY && amax_b == INFINITY, "amax with an Inf element is Inf (NaN ignored)");
    x[1] = 1.0f;
    amax = 0.0f;
    CHECK(fl_polyrelu_fwd((fl_kout){ ye, FL_FMT_E4M3, &scale, &amax }, in32(x), N, &c) == 0, "rc");
    want_amax = 0.0f;
    for (int i = 1; i < N; i++)
        want_amax = fmaxf(want_amax, fabsf(fl_polyrelu_f32(&c, x[i])));
    CHECK(amax == want_amax, "amax before the scale: got %a want %a", amax, want_amax);
    /* amax accumulates into the caller's value */
    float pre = 1e30f;
    CHECK(fl_polyrelu_fwd((fl_kout){ ye, FL_FMT_E4M3, &scale, &pre }, in32(x), N, &c) == 0 && pre == 1e30f, "amax is a max");
    /* e4m3 input: decode * scale_inv, every code */
    uint8_t q[256];
    float dq[256], o1[256], o2[256];
    const float sinv = 0.125f;
    for (int i = 0; i < 256; i++) {
        q[i] = (uint8_t)i;
        dq[i] = fl_decode(FL_FMT_E4M3, (uint32_t)i) * sinv;
    }
    CHECK(fl_polyrelu_fwd(out32(o1), (fl_kin){ q, FL_FMT_E4M3, &sinv }, 256, &c) == 0, "rc");
    CHECK(fl_polyrelu_fwd(out32(o2), in32(dq), 256, &c) == 0, "rc");
    CHECK(memcmp(o1, o2, sizeof o1) == 0, "e4m3 input = decode * scale_inv");
}

/* ---- PolyNorm ---------------------------------------------------------------------------------- */

typedef struct {
    const float *x;
    int i;
} pw_ctx;

static float pw_sq(size_t j, const void *vctx)
{
    const pw_ctx *ctx = vctx;
    float pw[FL_POLY_MAX_ORDER + 1];
    fl_poly_powers(pw, FL_POLY_MAX_ORDER, ctx->x[j]);
    return pw[ctx->i] * pw[ctx->i];
}

static void test_polynorm(const fl_poly_coef *c, size_t R, size_t H, float xscale)
{
    const int r = c->order;
    const float eps = 1e-6f;
    const size_t n = R * H;
    float *x = malloc(n * sizeof *x), *dy = malloc(n * sizeof *dy), *y = malloc(n * sizeof *y), *dx = malloc(n * sizeof *dx);
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)((rnd() - 0.5) * 4.0) * xscale;
        dy[i] = (float)(rnd() - 0.5);
    }
    if (R > 1)
        for (size_t j = 0; j < H; j++)
            x[H + j] = 0.0f; /* a row of zeros: y = a0 */
    float da[FL_POLY_MAX_ORDER + 1];
    CHECK(fl_polynorm_fwd(out32(y), in32(x), R, H, c, eps) == 0, "polynorm_fwd rc");
    CHECK(fl_polynorm_bwd(out32(dx), da, in32(x), in32(dy), R, H, c, eps) == 0, "polynorm_bwd rc");
    const double L = 16.0 * ceil((double)H / 4096.0);
    const double Kf = (L + 15) / 2 + 8 + r, Kb = 3 * L + 64;
    double worst_f = 0, worst_b = 0;
    double dae[FL_POLY_MAX_ORDER + 1] = { 0 }, daa[FL_POLY_MAX_ORDER + 1] = { 0 };
    for (size_t row = 0; row < R; row++) {
        const float *xr = x + row * H, *dr = dy + row * H;
        /* twin == element functions with sums in the block order */
        float S[FL_POLY_MAX_ORDER + 1] = { 0 }, cr[FL_POLY_MAX_ORDER + 1] = { 0 };
        for (int i = 1; i <= r; i++) {
            pw_ctx ctx = { xr, i };
            S[i] = fl_block_sum_order(H, pw_sq, &ctx);
        }
        fl_polynorm_fwd_consts(cr, S, c, (float)H, eps);
        for (size_t j = 0; j < H; j++)
            CHECK(fl_f32_bits(y[row * H + j]) == fl_f32_bits(fl_polynorm_out_f32(cr, c->a[0], r, xr[j])),
                  "FAIL polynorm twin != element functions row=%zu j=%zu", row, j);
        /* double reference */
        double m[FL_POLY_MAX_ORDER + 1] = { 0 }, D[FL_POLY_MAX_ORDER + 1] = { 0 }, A[FL_POLY_MAX_ORDER + 1] = { 0 };
        for (size_t j = 0; j < H; j++) {
            double p = 1;
            for (int i = 1; i <= r; i++) {
                p *= xr[j];
                m[i] += p * p;
                D[i] += dr[j] * p;
                A[i] += fabs(dr[j] * p);
            }
            D[0] += dr[j];
            A[0] += fabs(dr[j]);
        }
        double rr[FL_POLY_MAX_ORDER + 1];
        for (int i = 1; i <= r; i++)
            rr[i] = 1.0 / sqrt(m[i] / (double)H + (double)eps);
        for (size_t j = 0; j < H; j++) {
            double v = c->a[0], va = fabs(c->a[0]), g = 0, ga = 0, p = 1;
            for (int i = 1; i <= r; i++) {
                const double pm1 = p;
                p *= xr[j];
                v += c->a[i] * p * rr[i];
                va += fabs(c->a[i] * p) * rr[i];
                const double w = rr[i] * rr[i] * rr[i] * D[i] / (double)H;
                g += i * (double)c->a[i] * pm1 * (rr[i] * dr[j] - w * p);
                ga += i * fabs((double)c->a[i] * pm1) * (rr[i] * fabs(dr[j]) + rr[i] * rr[i] * rr[i] * A[i] / (double)H * fabs(p));
            }
            const float yt = y[row * H + j], gt = dx[row * H + j];
            CHECK(fabs(yt - v) <= Kf * U * va, "FAIL polynorm%d fwd H=%zu row=%zu j=%zu x=%a got=%a want=%a bound=%g", r, H, row, j,
                  xr[j], yt, v, Kf * U * va);
            CHECK(fabs(gt - g) <= Kb * U * ga, "FAIL polynorm%d bwd H=%zu row=%zu j=%zu x=%a got=%a want=%a bound=%g", r, H, row, j,
                  xr[j], gt, g, Kb * U * ga);
            if (va > 0)
                worst_f = fmax(worst_f, fabs(yt - v) / (U * va));
            if (ga > 0)
                worst_b = fmax(worst_b, fabs(gt - g) / (U * ga));
        }
        dae[0] += D[0];
        daa[0] += A[0];
        for (int i = 1; i <= r; i++) {
            dae[i] += rr[i] * D[i];
            daa[i] += rr[i] * A[i];
        }
    }
    for (int k = 0; k <= r; k++) {
        const double bound = (2 * L + 64 + ceil(R / 256.0)) * U * daa[k];
        CHECK(fabs(da[k] - dae[k]) <= bound, "FAIL polynorm%d da%d got=%a want=%a bound=%g", r, k, da[k], dae[k], bound);
    }
    printf("  polynorm%d R=%zu H=%zu |x|<%g: max err fwd %.2f u*sum|terms| (bound %.1f), bwd %.2f (bound %.1f)\n", r, R, H,
           2.0 * xscale, worst_f, Kf, worst_b, Kb);
    free(x);
    free(dy);
    free(y);
    free(dx);
}

int main(void)
{
    for (int r = 2; r <= 4; r++) {
        fl_poly_coef c = fl_poly_coef_default(r);
        test_polyrelu(&c);
        fl_poly_coef m = { r, { 0.25f, -1.5f, 0.75f, -0.125f, 0.0625f } }; /* mixed signs: cancellation */
        test_polyrelu(&m);
    }
    test_output_semantics();
    for (int r = 2; r <= 4; r++) {
        fl_poly_coef c = fl_poly_coef_default(r);
        test_polynorm(&c, 3, 1, 1.0f);
        test_polynorm(&c, 3, 17, 1.0f);
        test_polynorm(&c, 4, 4096 + 3 * 16 + 5, 1.0f);
        fl_poly_coef m = { r, { 0.1f, 1.0f, -0.5f, 0.25f, -0.125f } };
        test_polynorm(&m, 2, 8192, 1.0f);
        test_polynorm(&m, 2, 300, 1e-3f); /* eps dominates */
    }
    PASS("test_kernels_poly");
}
