/* test_kernels_swiglu.c — the SwiGLU and Smooth-SwiGLU CPU twins (kernels/swiglu.c).
 *
 *   - fp32 twins equal the element functions bit for bit; forward / backward within the bounds of
 *     activations.h against double formulas (silu 7u, swiglu 8u, d/du 8u, d/dg 16u |dy u| M)
 *   - FP8 outputs: e4m3 forward / e5m2 gradients are RNE-saturating encodes of value * scale; amaxes
 *   - Smooth-SwiGLU: computed scales are powers of two with amax * s in (1/2, 1] along the chosen axis
 *     (per channel: the paper; per token: the released code); the given-scale path reproduces the
 *     computed one; the backward multiplies dv by s first; an outlier channel that flushes the other
 *     channels of a per-tensor e4m3 cast is harmless with per-channel smoothing.
 *   - the tail g < -80 (activations.h section 3): silu(g) u, u silu'(g) and dy silu(g) formed before
 *     the exponent is applied, so that an underflowed silu(g) neither loses a normal product (fp32
 *     within 6u / 7u + 2^-150 of a double reference, bf16 within 1/2 ulp + 2^-10) nor turns
 *     silu(g) * Inf into NaN; the fp32 fast path equals the element functions there, specials included. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels.h"

static const double U = 1.0 / 16777216.0;

static uint64_t lcg = 0xD1B54A32D192ED03ull;
static double rnd(void)
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(lcg >> 11) / 9007199254740992.0;
}

static fl_kin in32(const float *p) { return (fl_kin){ p, FL_FMT_FP32, NULL }; }
static fl_kout out32(float *p) { return (fl_kout){ p, FL_FMT_FP32, NULL, NULL }; }
static int same(float a, float b) { return fl_f32_bits(a) == fl_f32_bits(b) || (isnan(a) && isnan(b)); }

/* The six operands of a SwiGLU forward and backward over n elements, each its own allocation (so that
   AddressSanitizer sees a twin that writes past n). */
typedef struct {
    float *g, *u, *dy, *y, *dg, *du;
} swiglu_arrays;

static swiglu_arrays arrays_new(size_t n)
{
    const swiglu_arrays a = { malloc(n * 4), malloc(n * 4), malloc(n * 4), malloc(n * 4), malloc(n * 4), malloc(n * 4) };
    CHECK(a.g && a.u && a.dy && a.y && a.dg && a.du, "out of memory");
    return a;
}

static void arrays_free(swiglu_arrays *a)
{
    free(a->g);
    free(a->u);
    free(a->dy);
    free(a->y);
    free(a->dg);
    free(a->du);
}

static void test_swiglu(void)
{
    enum { N = 200000 };
    swiglu_arrays arr = arrays_new(N);
    float *g = arr.g, *u = arr.u, *dy = arr.dy, *y = arr.y, *dg = arr.dg, *du = arr.du;
    for (int i = 0; i < N; i++) {
        g[i] = (float)((rnd() - 0.5) * ldexp(1.0, (int)(rnd() * 12) - 4));
        u[i] = (float)((rnd() - 0.5) * 8);
        dy[i] = (float)(rnd() - 0.5);
    }
    const float sp[] = { 0.0f, -0.0f, NAN, INFINITY, -INFINITY, -1.2785f, 100.0f, -100.0f };
    for (size_t i = 0; i < FL_ARRAY_LEN(sp); i++)
        g[i] = sp[i];
    CHECK(fl_swiglu_fwd(out32(y), in32(g), in32(u), N) == 0, "rc");
    CHECK(fl_swiglu_bwd(out32(dg), out32(du), in32(g), in32(u), in32(dy), N) == 0, "rc");
    double wf = 0, wg = 0, wu = 0;
    for (int i = 0; i < N; i++) {
        float a, b;
        fl_swiglu_grad_f32(&a, &b, g[i], u[i], dy[i]);
        CHECK(same(y[i], fl_swiglu_f32(g[i], u[i])) && same(dg[i], a) && same(du[i], b), "FAIL twin != element g=%a", g[i]);
        if (!isfinite(g[i]))
            continue;
        const double x = g[i], s = 1 / (1 + exp(-x)), sm = 1 / (1 + exp(x));
        const double h = x * s * u[i], d1 = s * (1 + x * sm), M = s * (1 + fabs(x) * sm);
        const double ddg = dy[i] * (double)u[i] * d1, ddu = dy[i] * x * s;
        const double tiny = 0x1p-149 * (2 + fabs(x)) * 8;
        CHECK(fabs(y[i] - h) <= 8 * U * fabs(h) + tiny, "FAIL swiglu g=%a u=%a got=%a want=%a", g[i], u[i], y[i], h);
        CHECK(fabs(du[i] - ddu) <= 8 * U * fabs(ddu) + tiny, "FAIL d/du g=%a got=%a want=%a", g[i], du[i], ddu);
        const double bg = 16 * U * fabs(dy[i] * (double)u[i]) * M + tiny;
        CHECK(fabs(dg[i] - ddg) <= bg, "FAIL d/dg g=%a u=%a dy=%a got=%a want=%a", g[i], u[i], dy[i], dg[i], ddg);
        if (fabs(x) > 80)
            continue; /* the maxima below are for normal-range results */
        if (h != 0)
            wf = fmax(wf, fabs(y[i] - h) / (U * fabs(h)));
        if (ddu != 0)
            wu = fmax(wu, fabs(du[i] - ddu) / (U * fabs(ddu)));
        if (dy[i] * u[i] != 0)
            wg = fmax(wg, fabs(dg[i] - ddg) / (U * fabs(dy[i] * (double)u[i]) * M));
    }
    printf("  swiglu: max err fwd %.2f u, d/du %.2f u, d/dg %.2f u|dy u|M\n", wf, wu, wg);

    /* FP8: e4m3 forward with scale and amax; e5m2 gradients with scale_inv in and scale / amax out */
    uint8_t qy[N], qg[N], qu[N], qdy[N];
    float amax = 0, amax_g = 0, amax_u = 0;
    const float sy = 3.5f, sg = 1024.0f, su = 0.5f, sdy_inv = 0.25f;
    CHECK(fl_swiglu_fwd((fl_kout){ qy, FL_FMT_E4M3, &sy, &amax }, in32(g), in32(u), N) == 0, "rc");
    for (int i = 0; i < N; i++)
        qdy[i] = (uint8_t)fl_encode_f32(FL_FMT_E5M2, dy[i] * 4.0f, FL_RND_NE, FL_OVF_SATURATE, 0);
    CHECK(fl_swiglu_bwd((fl_kout){ qg, FL_FMT_E5M2, &sg, &amax_g }, (fl_kout){ qu, FL_FMT_E5M2, &su, &amax_u }, in32(g), in32(u),
                        (fl_kin){ qdy, FL_FMT_E5M2, &sdy_inv }, N) == 0,
          "rc");
    float am = 0, amg = 0, amu = 0;
    for (int i = 0; i < N; i++) {
        CHECK(qy[i] == fl_encode_f32(FL_FMT_E4M3, y[i] * sy, FL_RND_NE, FL_OVF_SATURATE, 0), "FAIL e4m3 y i=%d", i);
        float a, b;
        fl_swiglu_grad_f32(&a, &b, g[i], u[i], fl_decode(FL_FMT_E5M2, qdy[i]) * sdy_inv);
        CHECK(qg[i] == fl_encode_f32(FL_FMT_E5M2, a * sg, FL_RND_NE, FL_OVF_SATURATE, 0), "FAIL e5m2 dg i=%d", i);
        CHECK(qu[i] == fl_encode_f32(FL_FMT_E5M2, b * su, FL_RND_NE, FL_OVF_SATURATE, 0), "FAIL e5m2 du i=%d", i);
        if (!isnan(y[i]))
            am = fmaxf(am, fabsf(y[i]));
        if (!isnan(a))
            amg = fmaxf(amg, fabsf(a));
        if (!isnan(b))
            amu = fmaxf(amu, fabsf(b));
    }
    CHECK(amax == am && amax_g == amg && amax_u == amu, "amaxes %a %a %a vs %a %a %a", amax, amax_g, amax_u, am, amg, amu);
    arrays_free(&arr);
}

static void test_smooth(void)
{
    enum { R = 37, C = 100, N = R * C };
    float g[N], u[N], h[N], dv[N];
    for (int i = 0; i < N; i++) {
        g[i] = (float)((rnd() - 0.5) * 6);
        u[i] = (float)((rnd() - 0.5) * 6);
        dv[i] = (float)(rnd() - 0.5);
        if (i % C == 7)
            u[i] *= 3000.0f; /* an outlier channel */
        h[i] = fl_swiglu_f32(g[i], u[i]);
    }
    for (int axis = 0; axis < FL_SMOOTH_AXIS_COUNT; axis++) {
        const size_t ns = axis == FL_SMOOTH_CHANNEL ? C : R;
        float s[R > C ? R : C], s2[R > C ? R : C], v[N], v2[N];
        CHECK(fl_smooth_swiglu_fwd(out32(v), s, in32(g), in32(u), R, C, (fl_smooth_axis)axis, 1) == 0, "rc");
        for (size_t k = 0; k < ns; k++) {
            float m = 0;
            for (int j = 0; j < (axis == FL_SMOOTH_CHANNEL ? R : C); j++) {
                const int i = axis == FL_SMOOTH_CHANNEL ? j * C + (int)k : (int)k * C + j;
                m = fmaxf(m, fabsf(h[i]));
            }
            CHECK(s[k] == fl_smooth_scale_f32(m), "FAIL smooth %s scale k=%zu", fl_smooth_axis_name((fl_smooth_axis)axis), k);
            CHECK((double)m * s[k] > 0.5 && (double)m * s[k] <= 1.0, "amax * s in (1/2, 1]");
        }
        for (int i = 0; i < N; i++)
            CHECK(same(v[i], h[i] * s[axis == FL_SMOOTH_CHANNEL ? i % C : i / C]), "FAIL smooth value i=%d", i);
        /* given scales reproduce it */
        memcpy(s2, s, sizeof s);
        CHECK(fl_smooth_swiglu_fwd(out32(v2), s2, in32(g), in32(u), R, C, (fl_smooth_axis)axis, 0) == 0, "rc");
        CHECK(memcmp(v, v2, sizeof v) == 0, "given scales");
        /* backward: dh = dv * s then the SwiGLU backward */
        float a[N], b[N], a2[N], b2[N], dh[N];
        CHECK(fl_smooth_swiglu_bwd(out32(a), out32(b), in32(g), in32(u), in32(dv), s, R, C, (fl_smooth_axis)axis) == 0, "rc");
        for (int i = 0; i < N; i++)
            dh[i] = dv[i] * s[axis == FL_SMOOTH_CHANNEL ? i % C : i / C];
        CHECK(fl_swiglu_bwd(out32(a2), out32(b2), in32(g), in32(u), in32(dh), N) == 0, "rc");
        CHECK(memcmp(a, a2, sizeof a) == 0 && memcmp(b, b2, sizeof b) == 0, "smooth backward");
    }
    /* The point of it: e4m3 with one per-tensor scale (448 / amax) flushes most of the ordinary
       channels next to the outlier; per-channel smoothing first keeps every element within e4m3's
       half-ulp relative error (2^-4) unless it is below the channel's amax by more than 2^15. */
    float amax = 0;
    for (int i = 0; i < N; i++)
        amax = fmaxf(amax, fabsf(h[i]));
    const float ts = 448.0f / amax, ts_inv = 1.0f / ts;
    float s[C], v[N];
    uint8_t q[N], qs[N];
    CHECK(fl_smooth_swiglu_fwd(out32(v), s, in32(g), in32(u), R, C, FL_SMOOTH_CHANNEL, 1) == 0, "rc");
    const float s8 = 448.0f;
    CHECK(fl_swiglu_fwd((fl_kout){ q, FL_FMT_E4M3, &ts, NULL }, in32(g), in32(u), N) == 0, "rc");
    CHECK(fl_smooth_swiglu_fwd((fl_kout){ qs, FL_FMT_E4M3, &s8, NULL }, s, in32(g), in32(u), R, C, FL_SMOOTH_CHANNEL, 0) == 0, "rc");
    int bad_plain = 0, bad_smooth = 0, n = 0;
    for (int i = 0; i < N; i++) {
        if (i % C == 7 || fabsf(h[i]) < 1e-3f)
            continue;
        n++;
        const double back_plain = fl_decode(FL_FMT_E4M3, q[i]) * ts_inv;
        const double back_smooth = fl_decode(FL_FMT_E4M3, qs[i]) / (448.0 * s[i % C]);
        bad_plain += fabs(back_plain - h[i]) > 0x1p-4 * fabs(h[i]);
        bad_smooth += fabs(back_smooth - h[i]) > 0x1p-4 * fabs(h[i]) + 0x1p-9 / (448.0 * s[i % C]);
    }
    printf("  smooth-swiglu: %d ordinary elements beside an outlier channel: %d off by > 2^-4 with a per-tensor e4m3\n"
           "  scale, %d with per-channel smoothing\n", n, bad_plain, bad_smooth);
    CHECK(bad_smooth == 0 && bad_plain > n / 10, "smoothing");
}

/* bf16 error of y (rounded from fp32 by RNE) against the exact h, in ulps of h's binade (bf16 has
   8 significant bits, subnormals from 2^-133). */
static double bf16_err_ulp(float y, double h)
{
    const float b = fl_decode(FL_FMT_BF16, fl_encode_f32(FL_FMT_BF16, y, FL_RND_NE, FL_OVF_NOSATURATE, 0));
    int ex;
    frexp(h, &ex); /* |h| in [2^(ex-1), 2^ex) */
    const int e = ex - 1 < -126 ? -126 : ex - 1;
    return fabs((double)b - h) / ldexp(1.0, e - 7);
}

static double silu_d(double x) { return x / (1 + exp(-x)); }
static double silu_grad_d(double x)
{
    const double s = 1 / (1 + exp(-x)), sm = 1 / (1 + exp(x));
    return s * (1 + x * sm);
}

static void test_tail(void)
{
    /* (g, u) whose product is a normal number while silu(g) is an fp32 subnormal or 0: the old
       silu(g) * u lost it (g = -110, u = 2^100 gave 0 instead of -2^-45.9). */
    const float pairs[][2] = { { -87.5f, 0x1.8p40f }, { -95.25f, -0x1p80f }, { -100.0f, 0x1p60f },
                               { -103.5f, 0x1.3p70f }, { -110.0f, 0x1p100f }, { -150.0f, 0x1.8p127f },
                               { -170.0f, -0x1.fp127f }, { -185.0f, 0x1.fffffep127f }, { -195.0f, 0x1p127f } };
    for (size_t i = 0; i < FL_ARRAY_LEN(pairs); i++) {
        const float g = pairs[i][0], u = pairs[i][1];
        const double h = silu_d(g) * u;
        const float y = fl_swiglu_f32(g, u);
        CHECK(fabs(y - h) <= 6 * U * fabs(h) + 0x1p-150, "FAIL tail swiglu g=%a u=%a got=%a want=%a", g, u, y, h);
        CHECK(bf16_err_ulp(y, h) <= 0.5 + 0x1p-10, "FAIL tail swiglu bf16 g=%a u=%a: %.3f ulp", g, u, bf16_err_ulp(y, h));
        float a, b;
        fl_swiglu_grad_f32(&a, &b, g, 1.0f, u); /* dy = u: d/du = dy silu(g), d/dg = dy silu'(g) */
        CHECK(same(b, y), "FAIL tail d/du = swiglu(g, dy) g=%a", g);
        const double dd = u * silu_grad_d(g);
        CHECK(fabs(a - dd) <= 7 * U * fabs(dd) + 0x1p-150, "FAIL tail d/dg g=%a dy=%a got=%a want=%a", g, u, a, dd);
    }
    /* Random tail inputs: fp32 within the bounds, bf16 within 1/2 ulp + 2^-10; max bf16 error printed. */
    enum { N = 100000 };
    swiglu_arrays arr = arrays_new(N);
    float *g = arr.g, *u = arr.u, *dy = arr.dy, *y = arr.y, *dg = arr.dg, *du = arr.du;
    double wb = 0;
    for (int i = 0; i < N; i++) {
        g[i] = (float)(-80 - 120 * rnd());
        u[i] = (float)((rnd() < 0.5 ? -1 : 1) * (1 + 0.99 * rnd()) * ldexp(1.0, (int)(rnd() * 148) - 20));
        dy[i] = (float)((1 + 0.99 * rnd()) * ldexp(1.0, (int)(rnd() * 40) - 41)); /* dy u stays finite */
    }
    for (int i = 0; i < N; i++) {
        const double sl = silu_d(g[i]), h = sl * u[i];
        y[i] = fl_swiglu_f32(g[i], u[i]);
        CHECK(fabs(y[i] - h) <= 6 * U * fabs(h) + 0x1p-150, "FAIL tail swiglu g=%a u=%a got=%a want=%a", g[i], u[i], y[i], h);
        const double eb = bf16_err_ulp(y[i], h);
        CHECK(eb <= 0.5 + 0x1p-10, "FAIL tail swiglu bf16 g=%a u=%a: %.4f ulp", g[i], u[i], eb);
        wb = fmax(wb, eb);
        float a, b;
        fl_swiglu_grad_f32(&a, &b, g[i], u[i], dy[i]);
        const double w = (double)(dy[i] * u[i]), ddg = w * silu_grad_d(g[i]), ddu = (double)dy[i] * sl;
        CHECK(fabs(a - ddg) <= 6 * U * fabs(ddg) + 0x1p-150, "FAIL tail d/dg g=%a u=%a dy=%a got=%a want=%a", g[i], u[i], dy[i], a, ddg);
        CHECK(fabs(b - ddu) <= 6 * U * fabs(ddu) + 0x1p-150, "FAIL tail d/du g=%a dy=%a got=%a want=%a", g[i], dy[i], b, ddu);
    }
    printf("  swiglu tail g in [-200, -80]: bf16 max error %.6f ulp (%d pairs)\n", wb, N);

    /* Infinities: silu(g) < 0 for every finite g < 0, so silu(g) * Inf = -Inf however far silu(g)
       underflows; silu(-Inf) = -0, so silu(-Inf) * Inf = NaN (the MPFR reference's values). */
    const float inf = INFINITY;
    CHECK(fl_swiglu_f32(-100.0f, inf) == -inf && fl_swiglu_f32(-100.0f, -inf) == inf, "FAIL swiglu(-100, +-Inf)");
    CHECK(fl_swiglu_f32(-300.0f, inf) == -inf && fl_swiglu_f32(-1e30f, -inf) == inf, "FAIL swiglu(-300, +-Inf)");
    CHECK(fl_swiglu_f32(-0x1.fffffep127f, inf) == -inf, "FAIL swiglu(-FLT_MAX, Inf)");
    CHECK(isnan(fl_swiglu_f32(-inf, inf)) && isnan(fl_swiglu_f32(-inf, -inf)), "FAIL swiglu(-Inf, Inf) is NaN");
    CHECK(isnan(fl_swiglu_f32(-100.0f, NAN)) && isnan(fl_swiglu_f32(-300.0f, NAN)), "FAIL swiglu(g, NaN)");
    CHECK(fl_swiglu_f32(-inf, 1.0f) == 0 && signbit(fl_swiglu_f32(-inf, 1.0f)), "swiglu(-Inf, 1) = -0");
    CHECK(fl_swiglu_f32(-300.0f, 0x1p127f) == 0 && signbit(fl_swiglu_f32(-300.0f, 0x1p127f)), "swiglu(-300, 2^127) = -0");
    CHECK(fl_swiglu_f32(-300.0f, -1.0f) == 0 && !signbit(fl_swiglu_f32(-300.0f, -1.0f)), "swiglu(-300, -1) = +0");
    CHECK(fl_swiglu_f32(-100.0f, 0.0f) == 0 && signbit(fl_swiglu_f32(-100.0f, 0.0f)), "swiglu(-100, +0) = -0");
    CHECK(fl_silu_f32(-inf) == 0 && signbit(fl_silu_f32(-inf)) && fl_silu_grad_f32(-inf) == 0, "silu(-Inf)");
    float a, b;
    fl_swiglu_grad_f32(&a, &b, -100.0f, inf, 1.0f);
    CHECK(a == -inf && b == (float)silu_d(-100.0) && same(b, fl_silu_f32(-100.0f)), "FAIL d/dg(-100, Inf) = -Inf got %a %a", a, b);
    fl_swiglu_grad_f32(&a, &b, -150.0f, 1.0f, inf);
    CHECK(a == -inf && b == -inf, "FAIL dy = Inf at g = -150: got %a %a", a, b);
    fl_swiglu_grad_f32(&a, &b, -inf, 1.0f, inf);
    CHECK(isnan(a) && isnan(b), "FAIL g = -Inf, dy = Inf: NaN");

    /* The fp32 fast path (kernels/swiglu.c) equals the element functions around and inside the tail. */
    const float gs[] = { -80.0f, -0x1.400002p6f, -0x1.3ffffep6f, -87.3f, -104.0f, -104.5f, -199.9f, -200.0f,
                         -200.5f, -1e30f, -0x1.fffffep127f, -inf, NAN, 0.0f, -0.0f, inf, -1.0f };
    const float us[] = { 0.0f, -0.0f, 1.0f, -1.0f, inf, -inf, NAN, 0x1p127f, -0x1.fffffep127f, 1e-40f, 3.0f };
    enum { NG = FL_ARRAY_LEN(gs), NU = FL_ARRAY_LEN(us), NS = NG * NU * NU };
    int k = 0;
    for (size_t i = 0; i < NG; i++)
        for (size_t j = 0; j < NU; j++)
            for (size_t l = 0; l < NU; l++, k++) {
                g[k] = gs[i];
                u[k] = us[j];
                dy[k] = us[l];
            }
    CHECK(k == (int)NS && (int)NS < (int)N, "grid"); /* the rest keeps the random tail inputs above */
    CHECK(fl_swiglu_fwd(out32(y), in32(g), in32(u), N) == 0, "rc");
    CHECK(fl_swiglu_bwd(out32(dg), out32(du), in32(g), in32(u), in32(dy), N) == 0, "rc");
    for (int i = 0; i < N; i++) {
        fl_swiglu_grad_f32(&a, &b, g[i], u[i], dy[i]);
        CHECK(same(y[i], fl_swiglu_f32(g[i], u[i])) && same(dg[i], a) && same(du[i], b),
              "FAIL tail twin != element g=%a u=%a dy=%a", g[i], u[i], dy[i]);
    }
    arrays_free(&arr);
}

int main(void)
{
    test_tail();
    test_swiglu();
    test_smooth();
    PASS("test_kernels_swiglu");
}
