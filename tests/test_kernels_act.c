/* test_kernels_act.c — the element functions of kernels/activations.h against double precision, and
 * the fixed reduction order.
 *
 *   exp:      every 61st float of [-104, 88.73] plus the specials and the range ends; asserts the
 *             documented <= 1.2 ulp (ulp of the exact value's binade, 2^-149 below the normal range)
 *   sigmoid, silu, silu', swiglu: every 997th float of [-120, 120] plus specials, against the double
 *             formulas, within the bounds stated in activations.h
 *   the block tree: fl_tree_sum equals a literal simulation of the CUDA butterfly (xor shuffles, then
 *             the warp-sum stage), bit for bit, on values where the order matters
 *   smooth scale: powers of two with amax * s in (1/2, 1], specials
 * Deterministic: the inputs are strided sweeps and a fixed-seed LCG. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "kernels.h"

static const double U = 1.0 / 16777216.0; /* 2^-24 */

/* ulp of an exact double value in fp32 (binade of the value, never below 2^-149). */
static double ulp32(double v)
{
    v = fabs(v);
    if (v < 0x1p-126)
        return 0x1p-149;
    int e;
    frexp(v, &e); /* v = f 2^e, 0.5 <= f < 1 */
    return ldexp(1.0, e - 24);
}

static double exp_err(float x)
{
    const double ref = exp((double)x);
    const float y = fl_expf_hd(x);
    if (ref > 0x1.fffffefffffffp+127)
        return isinf(y) ? 0.0 : 1e9;
    return fabs((double)y - ref) / ulp32(ref);
}

static void test_exp(void)
{
    double worst = 0.0;
    float worst_x = 0.0f;
    const uint32_t hi = fl_f32_bits(FL_EXP_X_MAX), lo = fl_f32_bits(-104.0f);
    for (uint32_t b = 0; b <= hi; b += 61) {
        const float x = fl_f32_from_bits(b);
        const double e = exp_err(x);
        if (e > worst)
            worst = e, worst_x = x;
    }
    for (uint32_t b = 0x80000000u; b <= lo; b += 61) {
        const float x = fl_f32_from_bits(b);
        const double e = exp_err(x);
        if (e > worst)
            worst = e, worst_x = x;
    }
    /* around every reduction boundary (k + 1/2) ln 2 and the range ends */
    for (int k = -150; k <= 128; k++) {
        const float c = (float)((k + 0.5) * 0.6931471805599453);
        uint32_t b = fl_f32_bits(c);
        for (int d = -64; d <= 64; d++) {
            const float x = fl_f32_from_bits(b + d);
            if (x > FL_EXP_X_MAX || x < -104.0f)
                continue;
            const double e = exp_err(x);
            if (e > worst)
                worst = e, worst_x = x;
        }
    }
    printf("  exp: max error %.3f ulp at x = %a (sampled)\n", worst, worst_x);
    CHECK(worst <= 1.2, "FAIL exp x=%a err=%.3f ulp > 1.2", worst_x, worst);
    /* specials and ends */
    CHECK(isnan(fl_expf_hd(NAN)), "exp(NaN)");
    CHECK(fl_expf_hd(INFINITY) == INFINITY, "exp(Inf)");
    CHECK(fl_expf_hd(-INFINITY) == 0.0f, "exp(-Inf)");
    CHECK(fl_expf_hd(0.0f) == 1.0f && fl_expf_hd(-0.0f) == 1.0f, "exp(0)");
    CHECK(isfinite(fl_expf_hd(FL_EXP_X_MAX)), "exp(x_max) finite: %a", fl_expf_hd(FL_EXP_X_MAX));
    CHECK(isinf(fl_expf_hd(nextafterf(FL_EXP_X_MAX, 100.0f))), "exp just above x_max overflows");
    CHECK(exp((double)nextafterf(FL_EXP_X_MAX, 100.0f)) > 0x1.fffffefffffffp+127, "x_max is the last finite one");
    CHECK(fl_expf_hd(-104.0f) == 0.0f || fl_expf_hd(-104.0f) == 0x1p-149f, "exp(-104)");
    CHECK(fl_expf_hd(-103.9f) > 0.0f, "exp(-103.9) is a subnormal, not 0");
    /* the Taylor coefficients are the fp32 roundings of 1/k! */
    CHECK(0x1.555556p-3f == (float)(1.0 / 6) && 0x1.555556p-5f == (float)(1.0 / 24) &&
              0x1.111112p-7f == (float)(1.0 / 120) && 0x1.6c16c2p-10f == (float)(1.0 / 720) &&
              0x1.a01a02p-13f == (float)(1.0 / 5040),
          "exp coefficients");
    CHECK(FL_EXP_LN2_HI == (float)0.6931471805599453 &&
              FL_EXP_LN2_LO == (float)(0.6931471805599453 - (double)FL_EXP_LN2_HI),
          "ln2 split");
}

/* Double references. */
static double sig_d(double x) { return 1.0 / (1.0 + exp(-x)); }

static void test_silu_family(void)
{
    double w_sig = 0, w_silu = 0, w_grad = 0, w_sw = 0;
    int n = 0;
    for (uint32_t b = 0; b < 0xFFFFFFFFu - 997; b += 997) {
        const float x = fl_f32_from_bits(b);
        if (!(fabsf(x) <= 120.0f))
            continue;
        n++;
        const double xd = x, s = sig_d(xd), sm = sig_d(-xd);
        /* sigmoid: relative <= 6u (+ the subnormal grid) */
        const double es = fabs(fl_sigmoid_f32(x) - s) / (s * U + 0x1p-149 / U);
        w_sig = es > w_sig ? es : w_sig;
        CHECK(fabs(fl_sigmoid_f32(x) - s) <= 6 * U * s + 0x1p-149, "FAIL sigmoid x=%a got=%a want=%a", x, fl_sigmoid_f32(x), s);
        /* silu: relative <= 7u, absolute 2^-149 (1 + |x|) where e^x is subnormal */
        const double sl = xd * s, gs = fl_silu_f32(x);
        const double tol = 7 * U * fabs(sl) + 0x1p-149 * (2 + fabs(xd));
        CHECK(fabs(gs - sl) <= tol, "FAIL silu x=%a got=%a want=%a", x, (float)gs, sl);
        if (sl != 0)
            w_silu = fmax(w_silu, fabs(gs - sl) / (U * fabs(sl) + 0x1p-149 * (2 + fabs(xd))));
        /* silu': |err| <= 14u M, M = s (1 + |x| sigmoid(-x)) */
        const double gd = s * (1 + xd * sm), M = s * (1 + fabs(xd) * sm);
        const double gg = fl_silu_grad_f32(x);
        CHECK(fabs(gg - gd) <= 14 * U * M + 0x1p-149 * (2 + fabs(xd)), "FAIL silu' x=%a got=%a want=%a", x, (float)gg, gd);
        w_grad = fmax(w_grad, fabs(gg - gd) / (U * M + 0x1p-149 * (2 + fabs(xd))));
        /* swiglu with a fixed u: relative <= 8u */
        const float u = 1.0f + (float)(b % 1000) / 7.0f;
        const double sw = sl * u, gw = fl_swiglu_f32(x, u);
        CHECK(fabs(gw - sw) <= 8 * U * fabs(sw) + 0x1p-149 * (2 + fabs(xd)) * u, "FAIL swiglu g=%a u=%a got=%a want=%a", x, u, (float)gw, sw);
        if (sw != 0)
            w_sw = fmax(w_sw, fabs(gw - sw) / (U * fabs(sw) + 0x1p-149 * (2 + fabs(xd)) * u));
    }
    printf("  %d inputs: max error / u: sigmoid %.2f, silu %.2f, silu' (vs M) %.2f, swiglu %.2f\n", n, w_sig, w_silu, w_grad, w_sw);
    /* specials */
    CHECK(fl_silu_f32(INFINITY) == INFINITY, "silu(Inf)");
    CHECK(fl_silu_f32(-INFINITY) == 0.0f && signbit(fl_silu_f32(-INFINITY)), "silu(-Inf) = -0");
    CHECK(isnan(fl_silu_f32(NAN)) && isnan(fl_silu_grad_f32(NAN)) && isnan(fl_sigmoid_f32(NAN)), "NaN");
    CHECK(fl_silu_grad_f32(INFINITY) == 1.0f && fl_silu_grad_f32(-INFINITY) == 0.0f, "silu'(+-Inf)");
    CHECK(fl_silu_f32(0.0f) == 0.0f && fl_silu_grad_f32(0.0f) == 0.5f && fl_sigmoid_f32(0.0f) == 0.5f, "at 0");
    CHECK(fl_silu_f32(-200.0f) == 0.0f && fl_sigmoid_f32(200.0f) == 1.0f, "tails");
}

/* A literal simulation of fl_block_sum's CUDA structure: 8 warps of 32 lanes exchanging with xor. */
static float butterfly_block_sum(const float *thread_sums)
{
    float lane[FL_RED_THREADS], nxt[FL_RED_THREADS];
    memcpy(lane, thread_sums, sizeof lane);
    for (int off = 16; off >= 1; off /= 2) {
        for (int t = 0; t < FL_RED_THREADS; t++)
            nxt[t] = lane[t] + lane[(t & ~31) | ((t & 31) ^ off)];
        memcpy(lane, nxt, sizeof lane);
    }
    float w[32];
    for (int l = 0; l < 32; l++)
        w[l] = l < FL_RED_THREADS / 32 ? lane[32 * l] : 0.0f;
    for (int off = FL_RED_THREADS / 64; off >= 1; off /= 2) {
        float wn[32];
        for (int l = 0; l < 32; l++)
            wn[l] = w[l] + w[l ^ off];
        memcpy(w, wn, sizeof w);
    }
    /* every lane < 8 holds the same bits */
    for (int l = 1; l < FL_RED_THREADS / 32; l++)
        CHECK(fl_f32_bits(w[l]) == fl_f32_bits(w[0]), "butterfly lanes disagree");
    return w[0];
}

static uint64_t lcg = 0x9E3779B97F4A7C15ull;
static double rnd(void)
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(lcg >> 11) / 9007199254740992.0;
}

static float seq_term(size_t i, const void *ctx) { return ((const float *)ctx)[i]; }

static void test_tree(void)
{
    for (int rep = 0; rep < 200; rep++) {
        float v[FL_RED_THREADS], w[FL_RED_THREADS];
        for (int t = 0; t < FL_RED_THREADS; t++) /* wide dynamic range: the order matters */
            v[t] = (float)((rnd() - 0.5) * ldexp(1.0, (int)(rnd() * 60) - 30));
        if (rep % 7 == 0)
            v[rep % FL_RED_THREADS] = -0.0f;
        memcpy(w, v, sizeof w);
        const float a = fl_tree_sum(w), b = butterfly_block_sum(v);
        CHECK(fl_f32_bits(a) == fl_f32_bits(b), "FAIL tree rep=%d got=%a want=%a", rep, a, b);
    }
    /* The block order of a long sum: thread t takes vectors t, t+256, ...; check against a direct
       simulation, and that it differs from the sequential sum (so the order is really exercised). */
    enum { N = 3 * FL_RED_THREADS * FL_VEC + 77 };
    static float x[N];
    for (int i = 0; i < N; i++)
        x[i] = (float)((rnd() - 0.5) * ldexp(1.0, (int)(rnd() * 40) - 20));
    float acc[FL_RED_THREADS];
    for (int t = 0; t < FL_RED_THREADS; t++) {
        float a = 0.0f;
        for (int v = t; v * FL_VEC < N; v += FL_RED_THREADS)
            for (int j = v * FL_VEC; j < v * FL_VEC + FL_VEC && j < N; j++)
                a = a + x[j];
        acc[t] = a;
    }
    const float want = butterfly_block_sum(acc);
    const float got = fl_block_sum_order(N, seq_term, x);
    CHECK(fl_f32_bits(got) == fl_f32_bits(want), "FAIL block order got=%a want=%a", got, want);
    float seq = 0.0f;
    for (int i = 0; i < N; i++)
        seq = seq + x[i];
    double exact = 0, sabs = 0;
    for (int i = 0; i < N; i++)
        exact += x[i], sabs += fabs(x[i]);
    /* the documented bound: (L + 8) u sum|x|, L = 16 ceil(N / 4096) */
    const double L = 16.0 * ceil(N / 4096.0);
    CHECK(fabs(got - exact) <= (L + 8) * U * sabs, "block sum bound");
    printf("  block-order sum %a, sequential %a, exact %a (bound %.3g)\n", got, seq, exact, (L + 8) * U * sabs);
    /* partials: thread t takes p[t], p[t + 256], ... */
    float p[1000];
    for (int i = 0; i < 1000; i++)
        p[i] = x[i];
    for (int t = 0; t < FL_RED_THREADS; t++) {
        float a = 0.0f;
        for (int k = t; k < 1000; k += FL_RED_THREADS)
            a = a + p[k];
        acc[t] = a;
    }
    CHECK(fl_f32_bits(fl_partials_sum_order(p, 1000, 1)) == fl_f32_bits(butterfly_block_sum(acc)), "partials order");
}

static void test_smooth_scale(void)
{
    CHECK(fl_smooth_scale_f32(0.0f) == 1.0f && fl_smooth_scale_f32(NAN) == 1.0f && fl_smooth_scale_f32(INFINITY) == 1.0f &&
              fl_smooth_scale_f32(-3.0f) == 1.0f,
          "smooth scale specials");
    CHECK(fl_smooth_scale_f32(1.0f) == 1.0f && fl_smooth_scale_f32(2.0f) == 0.5f && fl_smooth_scale_f32(3.0f) == 0.25f &&
              fl_smooth_scale_f32(0.75f) == 1.0f && fl_smooth_scale_f32(0.5f) == 2.0f,
          "smooth scale values");
    for (int i = 0; i < 100000; i++) {
        const float a = (float)ldexp(0.5 + rnd(), (int)(rnd() * 240) - 120);
        const float s = fl_smooth_scale_f32(a);
        CHECK((fl_f32_bits(s) & 0x7FFFFFu) == 0, "FAIL smooth scale not a power of two a=%a s=%a", a, s);
        CHECK((double)a * s > 0.5 && (double)a * s <= 1.0, "FAIL smooth scale a=%a s=%a", a, s);
    }
    CHECK(fl_smooth_scale_f32(0x1p-140f) == 0x1p126f, "clamped low");
    CHECK(fl_smooth_scale_f32(0x1.8p127f) == 0x1p-126f, "clamped high");
}

/* The SiLU family's branch-free body (fl_silu_e / fl_exp_normal_hd: no special cases, the scaling an
   exponent add) against the same formulas written with fl_expf_hd and fl_sigmoid_parts_f32: equal bits
   on every float of [-87, 0] for the exp core, and on every 61st float (both signs, all exponents,
   Inf and NaN included) for silu, silu' and both SwiGLU derivatives.  A NaN output is compared as a
   class (the NaN's sign and payload are not part of the contract). */
static float silu_ref_formula(float x)
{
    if (x < FL_SILU_TAIL_X)
        return fl_silu_tail_times(x, 1.0f, 0);
    const float e = fl_expf_hd(-fl_absf(x)), d = 1.0f + e;
    return (x >= 0.0f || fl_isnanf(x)) ? fl_divf(x, d) : fl_divf(x * e, d);
}

static float silu_grad_ref_formula(float x)
{
    if (x < FL_SILU_TAIL_X)
        return fl_silu_tail_times(x, 1.0f, 1);
    if (x == INFINITY)
        return 1.0f;
    const fl_sigmoid_parts p = fl_sigmoid_parts_f32(x);
    return p.s * fl_fmaf(x, p.sm, 1.0f);
}

static int same_or_both_nan(float a, float b)
{
    return fl_f32_bits(a) == fl_f32_bits(b) || (isnan(a) && isnan(b));
}

static void test_branch_free_body(void)
{
    long bad = 0;
#pragma omp parallel for reduction(+ : bad) schedule(static)
    for (int64_t i = 0; i <= (int64_t)(fl_f32_bits(FL_EXPN_MIN) & 0x7FFFFFFFu); i++) {
        const float a = -fl_f32_from_bits((uint32_t)i);
        bad += fl_f32_bits(fl_exp_normal_hd(a)) != fl_f32_bits(fl_expf_hd(a));
    }
    CHECK(bad == 0, "FAIL fl_exp_normal_hd differs from fl_expf_hd on %ld floats of [-87, 0]", bad);
    long nsil = 0;
#pragma omp parallel for reduction(+ : bad, nsil) schedule(static)
    for (int64_t i = 0; i < (1ll << 32); i += 61) {
        const float x = fl_f32_from_bits((uint32_t)i);
        float dg, du;
        fl_swiglu_grad_f32(&dg, &du, x, 0x1.8p-3f, -0x1.4p+5f);
        const float dy = -0x1.4p+5f, w = dy * 0x1.8p-3f; /* the tail forms the products before scaling */
        const float wg = x < FL_SILU_TAIL_X ? fl_silu_tail_times(x, w, 1) : w * silu_grad_ref_formula(x);
        const float wu = x < FL_SILU_TAIL_X ? fl_silu_tail_times(x, dy, 0) : dy * silu_ref_formula(x);
        bad += !same_or_both_nan(fl_silu_f32(x), silu_ref_formula(x)) +
               !same_or_both_nan(fl_silu_grad_f32(x), silu_grad_ref_formula(x)) + !same_or_both_nan(dg, wg) +
               !same_or_both_nan(du, wu);
        nsil++;
    }
    CHECK(bad == 0, "FAIL the branch-free SiLU body differs from the fl_expf_hd formulas on %ld outputs", bad);
    printf("  branch-free SiLU body: the fl_expf_hd formulas' bits on %ld inputs\n", nsil);
}

int main(void)
{
    test_exp();
    test_silu_family();
    test_branch_free_body();
    test_tree();
    test_smooth_scale();
    PASS("test_kernels_act");
}
