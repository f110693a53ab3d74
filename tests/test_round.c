/* test_round.c — the encoders and decode of fl_round.h against MPFR (reference/round_mpfr.c).
 *
 * 1. Round trip, every encoding of every format (fp32: 2^18 patterns covering every sign/exponent/
 *    top-mantissa combination): fl_decode agrees with fl_mpfr_decode (value, sign of zero, NaN), and
 *    encoding the decoded value again (float32 path and double path, RNE/RTZ/UP/DOWN and SR with
 *    three rbits, saturate and no-saturate) gives the same encoding back, except the documented
 *    canonicalisations: every NaN encoding -> the format's canonical NaN (e4m3 0xFF -> 0x7F,
 *    e5m2 0xFD -> 0x7F, ...), and +-Inf under saturate -> +-max.
 * 2. Neighbourhoods, compared with fl_mpfr_encode for the 4 deterministic modes x 2 policies: for
 *    every finite magnitude code c of every format (fp32: every binade's first and last 16 codes,
 *    the first 2048, and a stride), both signs, the value v(c) and the exact midpoint of v(c) and
 *    v(c+1) — so across zero, across every binade, at the subnormal/normal boundary, and at max,
 *    where v(max_mag + 1) is the virtual next value and the midpoint is the RNE overflow boundary
 *    — each at the point itself and one step below and above, as a float32 (nextafterf around the
 *    nearest float32) and as a double (nextafter).  Plus: max*(1 +- 2^-k), boundary*(1 +- 2^-k),
 *    min_sub*2^-k; +-0, +-Inf, NaNs with payloads and both signs, float32 subnormals (a stride and
 *    both ends), huge and tiny doubles (1e300, DBL_MAX, 1e-300, double subnormals), random float32
 *    patterns and random doubles.  For fp32 the double path is also checked against the C cast.
 * 3. Stochastic rounding, deterministic part: for the codes of 2 (all of them up to 8 bits, a stride
 *    for 16 and 32 bits), both signs, the value, k/16 of the gap above it (k = 1..15), one float32
 *    and one double step inside the gap at either end, and points a tiny fraction of the gap above
 *    the value (where the documented frac32 = floor(rem * 2^32 / 2^s) truncates to a few units or
 *    to 0), plus 2^-k (k = 1..149) and specials; the result for
 *    rbits in {0, 2^32-1, 2^32-frac32, 2^32-frac32-1, 2^31, random} is exactly "away iff
 *    frac32 + rbits >= 2^32", with frac32 computed independently in MPFR as
 *    floor((|x| - |rtz(x)|) / ulp * 2^32), rtz and away from fl_mpfr_encode; beyond the virtual
 *    next value the result is the overflow result (SR counts as rounding away).
 * 4. Stochastic rounding, statistical part: N = 100000 draws from a splitmix64 stream with a fixed,
 *    printed seed, for inputs at k/16 of an ulp in e4m3 (k = 1..15), a subnormal, values near max,
 *    and one point in each of e5m2, bf16, fp16, e8m0, e2m1, e4m3fnuz: |mean - x| <= 5 standard errors of the
 *    mean of a two-point distribution, (hi - lo) * sqrt(p (1 - p) / N) with p = (x - lo) / (hi - lo).
 *
 * A failure prints a reproducer: "FAIL ...: e4m3 rne sat f32 x=0x1.d00000p+8 got=0x7e want=0x7f".
 * The work is bounded: about 16 million fl_mpfr_encode calls dominate (about 7 s at -O2, 30 s under
 * AddressSanitizer at -O1).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "fl_format.h"
#include "fl_round.h"
#include "round_mpfr.h"

static const fl_rounding MODES[4] = { FL_RND_NE, FL_RND_ZERO, FL_RND_UP, FL_RND_DOWN };
static const fl_overflow OVFS[2] = { FL_OVF_SATURATE, FL_OVF_NOSATURATE };
static const char *ovf_name(fl_overflow o) { return o == FL_OVF_SATURATE ? "sat" : "nosat"; }

static mpfr_t X;   /* the current input, exact (53 bits hold any double) */
static mpfr_t R;   /* decode results */
static mpfr_t W1, W2; /* wide scratch for the SR fraction: |x| - lo needs up to 128 + 1074 bits */

static long n_f32, n_f64, n_sr, n_sr_trunc;

static int hexw(fl_format f) { return (fl_format_get(f)->bits + 3) / 4; }
static uint32_t sbit_of(fl_format f)
{
    const fl_format_desc *d = fl_format_get(f);
    return d->specials == FL_SPEC_E8M0 ? 0 : 1u << (d->bits - 1);
}

/* Value of a magnitude code, written here independently of fl_decode; c may be max_mag + 1, the
   virtual next value above max (e4m3 480, e5m2 65536, bf16/fp32/e8m0 2^128, e2m1 8, ...). */
static double mag_value(fl_format f, uint32_t c)
{
    const fl_format_desc *d = fl_format_get(f);
    if (d->specials == FL_SPEC_E8M0)
        return ldexp(1.0, (int)c - 127);
    const uint32_t E = c >> d->mbits, m = c & ((1u << d->mbits) - 1u);
    return E ? ldexp(1.0 + ldexp((double)m, -d->mbits), (int)E - d->bias)
             : ldexp((double)m, 1 - d->bias - d->mbits);
}

/* splitmix64: the test's own PRNG, so that seeds reproduce everywhere. */
static uint64_t sm_state;
static uint64_t splitmix64(void) { return fl_splitmix64(&sm_state); }

/* ---- deterministic modes against MPFR ---------------------------------------------------------- */

/* The encoding of a double NaN, stated independently of fl_round.h: NVIDIA's __nv_cvt_double_to_fp8
   keeps the sign (e4m3: S.1111.111) and, for e5m2, sets S.11111.1p with p the double's bit 50;
   every other format gives its canonical NaN (what MPFR's sign- and payload-free NaN encodes to). */
static uint32_t nan_f64_want(fl_format f, double y, uint32_t canonical)
{
    const uint64_t u = fl_f64_bits(y);
    const uint32_t sign = (uint32_t)(u >> 63) << 7;
    if (f == FL_FMT_E4M3)
        return sign | 0x7Fu;
    if (f == FL_FMT_E5M2)
        return sign | 0x7Eu | (uint32_t)((u >> 50) & 1u);
    return canonical;
}

/* Compare the float32 path (on x) and/or the double path (on y) with MPFR; when both are given they
   must be the same value, and MPFR is asked once. */
static void check_paths(fl_format f, const float *x, const double *y)
{
    const int w = hexw(f);
    if (y)
        mpfr_set_d(X, *y, MPFR_RNDN);
    else
        mpfr_set_flt(X, *x, MPFR_RNDN);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 2; j++) {
            const uint32_t want = fl_mpfr_encode(f, X, MODES[i], OVFS[j], NULL);
            if (x) {
                const uint32_t got = fl_encode_f32(f, *x, MODES[i], OVFS[j], 0);
                CHECK(got == want, "%s %s %s f32 x=%.6a (0x%08x) got=0x%0*x want=0x%0*x", fl_format_name(f),
                      fl_rounding_name(MODES[i]), ovf_name(OVFS[j]), (double)*x, (unsigned)fl_f32_bits(*x), w,
                      (unsigned)got, w, (unsigned)want);
            }
            if (y) {
                const uint32_t got = fl_encode_f64(f, *y, MODES[i], OVFS[j], 0);
                const uint32_t want64 = isnan(*y) ? nan_f64_want(f, *y, want) : want;
                CHECK(got == want64, "%s %s %s f64 x=%.13a (0x%016llx) got=0x%0*x want=0x%0*x", fl_format_name(f),
                      fl_rounding_name(MODES[i]), ovf_name(OVFS[j]), *y, (unsigned long long)fl_f64_bits(*y),
                      w, (unsigned)got, w, (unsigned)want64);
            }
        }
    if (y && f == FL_FMT_FP32 && !isnan(*y)) { /* a third opinion: the C cast rounds to nearest even */
        const uint32_t got = fl_encode_f64(f, *y, FL_RND_NE, FL_OVF_NOSATURATE, 0);
        const uint32_t want = fl_f32_bits((float)*y);
        CHECK(got == want, "fp32 rne nosat f64 x=%.13a got=0x%08x want=0x%08x (C cast)", *y, (unsigned)got,
              (unsigned)want);
    }
    n_f32 += x != NULL;
    n_f64 += y != NULL;
}

static void check_f32(fl_format f, float x) { check_paths(f, &x, NULL); }
static void check_f64(fl_format f, double y) { check_paths(f, NULL, &y); }

/* y itself and one step either side, as doubles, and the float32 nearest y with its neighbours. */
static void check_around(fl_format f, double y)
{
    const float x = (float)y;
    if ((double)x == y) {
        check_paths(f, &x, &y);
    } else {
        check_f64(f, y);
        check_f32(f, x);
    }
    check_f64(f, nextafter(y, -INFINITY));
    check_f64(f, nextafter(y, INFINITY));
    check_f32(f, nextafterf(x, -INFINITY));
    check_f32(f, nextafterf(x, INFINITY));
}

/* The magnitude codes a neighbourhood sweep visits: all of them up to 16 bits; for fp32 every
   binade's first and last 16 codes, the first 2048 and a stride.  Returns the count. */
static size_t sweep_codes(fl_format f, uint32_t **out)
{
    const fl_format_desc *d = fl_format_get(f);
    if (d->bits <= 16) {
        uint32_t *c = malloc(sizeof *c * (d->max_mag + 1));
        CHECK(c, "out of memory");
        for (uint32_t i = 0; i <= d->max_mag; i++)
            c[i] = i;
        *out = c;
        return d->max_mag + 1;
    }
    const uint32_t stride = 262147; /* prime: lands on every residue of the low mantissa bits */
    size_t cap = 2048 + 255 * 32 + d->max_mag / stride + 2, n = 0;
    uint32_t *c = malloc(sizeof *c * cap);
    CHECK(c, "out of memory");
    for (uint32_t i = 0; i < 2048; i++)
        c[n++] = i;
    for (uint32_t e = 0; e < 255; e++)
        for (uint32_t j = 0; j < 16; j++) {
            c[n++] = e << 23 | j;
            c[n++] = (e << 23 | 0x7FFFFFu) - j;
        }
    for (uint32_t i = 0; i <= d->max_mag / stride; i++)
        c[n++] = i * stride;
    CHECK(n <= cap, "sweep_codes overflow");
    *out = c;
    return n;
}

static void test_neighbourhoods(fl_format f)
{
    const fl_format_desc *d = fl_format_get(f);
    uint32_t *codes;
    const size_t n = sweep_codes(f, &codes);
    for (size_t i = 0; i < n; i++) {
        const double v = mag_value(f, codes[i]), next = mag_value(f, codes[i] + 1);
        for (int s = 0; s < 2; s++) {
            const double sg = s ? -1.0 : 1.0;
            check_around(f, sg * v);
            check_around(f, sg * (v + (next - v) / 2)); /* exact: one more bit than the format */
        }
    }
    free(codes);

    /* Around max, the overflow boundary and the bottom of the range, from both sides. */
    const double max = fl_format_max(f), bnd = fl_format_rne_boundary(f, NULL);
    const double tiny = fl_format_min_subnormal(f);
    for (int k = 1; k <= 60; k++)
        for (int s = 0; s < 2; s++) {
            const double sg = s ? -1.0 : 1.0;
            check_around(f, sg * (max + ldexp(max, -k)));
            check_around(f, sg * (max - ldexp(max, -k)));
            check_around(f, sg * (bnd + ldexp(bnd, -k)));
            check_around(f, sg * (bnd - ldexp(bnd, -k)));
            check_around(f, sg * ldexp(tiny, -k));
            check_around(f, sg * (tiny + ldexp(tiny, -k)));
            check_around(f, sg * (tiny / 2 + ldexp(tiny, -k - 1)));
        }
    if (d->specials == FL_SPEC_E8M0) { /* below 2^-127 everything clamps to 0x00 */
        check_around(f, ldexp(1.0, -128));
        check_around(f, ldexp(0.75, -127));
        for (int k = 128; k <= 1074; k += 3)
            check_around(f, ldexp(1.0, -k));
    }
}

/* Inputs every format sees: specials, float32 subnormals, huge and tiny doubles, random patterns. */
static void test_specials(fl_format f)
{
    static const uint32_t fbits[] = {
        0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u,                           /* zeros, Infs */
        0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu, 0xFFFFFFFFu, /* NaNs */
        0x7FA00000u, 0xFFA5A5A5u, 0x7FC00001u, 0xFF812345u,
        0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F000000u, 0x00800000u, 0x80800000u, 0x007FFFFFu, 0x807FFFFFu,
        0x00000001u, 0x80000001u, 0x00000002u, 0x00000003u, 0x00400000u, 0x00400001u, 0x003FFFFFu,
    };
    for (size_t i = 0; i < FL_ARRAY_LEN(fbits); i++) {
        check_f32(f, fl_f32_from_bits(fbits[i]));
        check_f64(f, (double)fl_f32_from_bits(fbits[i]));
    }
    /* float32 subnormals: both ends and a stride, both signs */
    for (uint32_t m = 1; m < 0x800000u; m = m < 256 || m > 0x7FFF00u ? m + 1 : m + 4093) {
        check_f32(f, fl_f32_from_bits(m));
        check_f32(f, fl_f32_from_bits(0x80000000u | m));
    }
    static const uint64_t dbits[] = {
        0x0000000000000000ull, 0x8000000000000000ull, 0x7FF0000000000000ull, 0xFFF0000000000000ull,
        0x7FF8000000000000ull, 0xFFF8000000000000ull, 0x7FF0000000000001ull, 0xFFF0000000000001ull,
        0x7FFFFFFFFFFFFFFFull, 0xFFFFFFFFFFFFFFFFull, 0x7FF4000000000000ull, 0x7FFC000000000001ull,
        0x7FEFFFFFFFFFFFFFull, 0xFFEFFFFFFFFFFFFFull, /* +-DBL_MAX */
        0x0000000000000001ull, 0x8000000000000001ull, 0x000FFFFFFFFFFFFFull, 0x0008000000000000ull,
        0x0010000000000000ull, 0x8010000000000000ull, /* +-DBL_MIN */
        0x47F0000000000000ull, 0x47EFFFFFE0000000ull, 0x47EFFFFFF0000000ull, 0x47EFFFFFF0000001ull,
        0x36A0000000000000ull, 0x3690000000000000ull, 0x3690000000000001ull, 0x368FFFFFFFFFFFFFull,
    };
    for (size_t i = 0; i < FL_ARRAY_LEN(dbits); i++)
        check_f64(f, fl_f64_from_bits(dbits[i]));
    static const double dvals[] = { 1e300, -1e300, 1e-300, -1e-300, 1e38, 3.5e38, 1e-40, 1e-45, 1e-46,
                                    0x1p1023, 0x1.8p1000, 0x1p-1000, 0x1p-1074, 0x1p-150, 0x1.000001p-150 };
    for (size_t i = 0; i < FL_ARRAY_LEN(dvals); i++) {
        check_around(f, dvals[i]);
        check_around(f, -dvals[i]);
    }
    /* Random float32 patterns (every class) and random doubles with exponents in [-160, 140]. */
    sm_state = 0x5EED0000u + (uint64_t)f;
    for (int i = 0; i < 4000; i++) {
        const uint64_t r = splitmix64();
        check_f32(f, fl_f32_from_bits((uint32_t)r));
        const uint64_t e = (uint64_t)(1023 - 160 + (int)((r >> 32) % 301));
        const uint64_t db = (r & 0x8000000000000000ull) | e << 52 | (splitmix64() & 0xFFFFFFFFFFFFFull);
        check_f64(f, fl_f64_from_bits(db));
    }
}

/* ---- round trip -------------------------------------------------------------------------------- */

static void test_roundtrip(fl_format f)
{
    const fl_format_desc *d = fl_format_get(f);
    const int w = hexw(f);
    const uint32_t sb = sbit_of(f);
    const uint64_t n = d->bits == 32 ? 1ull << 18 : 1ull << d->bits;
    const uint32_t rb[3] = { 0, 0xFFFFFFFFu, 0x9E3779B9u };
    for (uint64_t i = 0; i < n; i++) {
        /* fp32: the top 16 bits exhaustively with low halves 0x0000, 0x0001, 0x5555, 0xFFFF */
        static const uint32_t lows[4] = { 0x0000u, 0x0001u, 0x5555u, 0xFFFFu };
        const uint32_t c = d->bits == 32 ? (uint32_t)(i >> 2) << 16 | lows[i & 3] : (uint32_t)i;
        const float v = fl_decode(f, c);
        fl_mpfr_decode(R, f, c);
        const int is_nan = fl_is_nan(d, c);
        if (is_nan)
            CHECK(isnan(v) && mpfr_nan_p(R), "%s decode(0x%0*x) = %a, MPFR %s: both should be NaN",
                  fl_format_name(f), w, (unsigned)c, (double)v, mpfr_nan_p(R) ? "NaN" : "a number");
        else
            CHECK(!isnan(v) && !mpfr_nan_p(R) && mpfr_cmp_d(R, (double)v) == 0 &&
                      !mpfr_signbit(R) == !signbit(v),
                  "%s decode(0x%0*x) = %a, MPFR %a", fl_format_name(f), w, (unsigned)c, (double)v,
                  mpfr_get_d(R, MPFR_RNDN));
        for (int j = 0; j < 2; j++) {
            uint32_t want = c;
            if (is_nan)
                want = d->nan; /* canonical NaN: e4m3 0xFF -> 0x7F, e5m2 0x7D.. -> 0x7F, bf16 -> 0x7FFF */
            else if (fl_is_inf(d, c) && OVFS[j] == FL_OVF_SATURATE)
                want = (c & sb) | d->max_mag;
            for (int m = 0; m < 4 + 3; m++) {
                const fl_rounding mode = m < 4 ? MODES[m] : FL_RND_SR;
                const uint32_t r = m < 4 ? 0 : rb[m - 4];
                const uint32_t g32 = fl_encode_f32(f, v, mode, OVFS[j], r);
                const uint32_t g64 = fl_encode_f64(f, (double)v, mode, OVFS[j], r);
                CHECK(g32 == want, "%s %s %s f32 x=%.6a (decode of 0x%0*x, rbits 0x%08x) got=0x%0*x want=0x%0*x",
                      fl_format_name(f), fl_rounding_name(mode), ovf_name(OVFS[j]), (double)v, w, (unsigned)c,
                      (unsigned)r, w, (unsigned)g32, w, (unsigned)want);
                const uint32_t want64 = is_nan ? nan_f64_want(f, (double)v, want) : want;
                CHECK(g64 == want64, "%s %s %s f64 x=%.13a (decode of 0x%0*x, rbits 0x%08x) got=0x%0*x want=0x%0*x",
                      fl_format_name(f), fl_rounding_name(mode), ovf_name(OVFS[j]), (double)v, w, (unsigned)c,
                      (unsigned)r, w, (unsigned)g64, w, (unsigned)want64);
            }
        }
    }
}

/* ---- stochastic rounding: which neighbour, for given rbits ------------------------------------- */

/* Check SR on the double y (and on the float32 y, when y is one) for both policies and a set of
   rbits, against the independent prediction described at the top. */
static void check_sr(fl_format f, double y)
{
    const uint32_t sb = sbit_of(f);
    const int w = hexw(f);
    const int is_f32 = (double)(float)y == y || isnan(y);
    mpfr_set_d(X, y, MPFR_RNDN);
    const int neg = signbit(y) != 0;
    const double vnext = mag_value(f, fl_format_get(f)->max_mag + 1);
    for (int j = 0; j < 2; j++) {
        const fl_overflow o = OVFS[j];
        uint32_t rtz, away;
        uint32_t frac32 = 0;
        if (!isfinite(y) || y == 0) {
            rtz = away = fl_mpfr_encode(f, X, FL_RND_NE, o, NULL); /* mode-independent */
        } else {
            rtz = fl_mpfr_encode(f, X, FL_RND_ZERO, o, NULL);
            away = fl_mpfr_encode(f, X, neg ? FL_RND_DOWN : FL_RND_UP, o, NULL);
            if (fabs(y) >= vnext) {
                rtz = away; /* beyond the virtual next value: SR overflows like rounding away */
            } else if (rtz != away) {
                const uint32_t mag = sb ? rtz & (sb - 1u) : rtz;
                const double lo = mag_value(f, mag), hi = mag_value(f, mag + 1);
                mpfr_abs(W1, X, MPFR_RNDN);
                mpfr_sub_d(W1, W1, lo, MPFR_RNDN); /* exact at this width */
                mpfr_set_d(W2, hi - lo, MPFR_RNDN);  /* a power of two: exact */
                mpfr_div(W1, W1, W2, MPFR_RNDN);     /* division by a power of two: exact */
                CHECK(mpfr_cmp_ui(W1, 0) > 0 && mpfr_cmp_ui(W1, 1) < 0,
                      "%s sr x=%.13a: MPFR neighbours 0x%0*x / 0x%0*x do not bracket x", fl_format_name(f), y, w,
                      (unsigned)rtz, w, (unsigned)away);
                mpfr_mul_2ui(W1, W1, 32, MPFR_RNDN);
                frac32 = (uint32_t)mpfr_get_ui(W1, MPFR_RNDD); /* floor: the documented truncation */
                n_sr_trunc += frac32 == 0;
            }
        }
        const uint32_t rbs[6] = { 0u, 0xFFFFFFFFu, (uint32_t)(0x100000000ull - frac32),
                                  (uint32_t)(0x100000000ull - frac32 - 1u), 0x80000000u, (uint32_t)splitmix64() };
        for (int k = 0; k < 6; k++) {
            const uint32_t r = rbs[k];
            const uint32_t want = (uint64_t)frac32 + r >= 0x100000000ull ? away : rtz;
            const uint32_t g64 = fl_encode_f64(f, y, FL_RND_SR, o, r);
            const uint32_t want64 = isnan(y) ? nan_f64_want(f, y, want) : want;
            CHECK(g64 == want64, "%s sr %s f64 x=%.13a rbits=0x%08x (frac32 0x%08x) got=0x%0*x want=0x%0*x",
                  fl_format_name(f), ovf_name(o), y, (unsigned)r, (unsigned)frac32, w, (unsigned)g64, w,
                  (unsigned)want64);
            if (is_f32) {
                const uint32_t g32 = fl_encode_f32(f, (float)y, FL_RND_SR, o, r);
                CHECK(g32 == want, "%s sr %s f32 x=%.6a rbits=0x%08x (frac32 0x%08x) got=0x%0*x want=0x%0*x",
                      fl_format_name(f), ovf_name(o), y, (unsigned)r, (unsigned)frac32, w, (unsigned)g32, w,
                      (unsigned)want);
            }
        }
    }
    n_sr++;
}

static void test_sr_neighbours(fl_format f)
{
    const fl_format_desc *d = fl_format_get(f);
    uint32_t *codes;
    const size_t n = sweep_codes(f, &codes);
    const size_t step = d->bits <= 8 ? 1 : d->bits == 16 ? 61 : 7;
    sm_state = 0x5A5A0000u + (uint64_t)f;
    for (size_t i = 0; i < n; i += step) {
        const double v = mag_value(f, codes[i]), next = mag_value(f, codes[i] + 1), gap = next - v;
        for (int s = 0; s < 2; s++) {
            const double sg = s ? -1.0 : 1.0;
            check_sr(f, sg * v);
            for (int q = 1; q < 16; q++) /* k/16 of the gap: exact fractions */
                check_sr(f, sg * (v + gap * q / 16));
            check_sr(f, sg * nextafter(v, INFINITY));
            check_sr(f, sg * nextafter(next, 0));
            check_sr(f, sg * (double)nextafterf((float)v, INFINITY));
            check_sr(f, sg * (double)nextafterf((float)next, 0));
            /* a tiny fraction of an ulp above v: frac32 truncates to 2^(32-k), then to 0 */
            for (int k = 20; k <= 44; k += 4)
                check_sr(f, sg * (v + ldexp(gap, -k)));
        }
    }
    free(codes);
    /* Tiny float32 inputs, far below the format's range: frac32 truncates to 0 for the smallest. */
    for (int k = 1; k <= 149; k++) {
        const double t = ldexp(1.0, -k);
        check_sr(f, t);
        check_sr(f, -t * 1.25);
        check_sr(f, t * 1.9999998807907104); /* (2 - 2^-23) * 2^-k */
    }
    static const double sp[] = { 0.0, -0.0, INFINITY, -INFINITY, NAN, -NAN, 1e300, -1e300, 1e-300, 0x1p-1074 };
    for (size_t i = 0; i < FL_ARRAY_LEN(sp); i++)
        check_sr(f, sp[i]);
}

/* ---- stochastic rounding: statistics ----------------------------------------------------------- */

static void sr_mean(fl_format f, double x, int use_f64, uint64_t seed)
{
    const long N = 100000;
    const fl_format_desc *d = fl_format_get(f);
    const uint32_t sb = sbit_of(f);
    if (!use_f64)
        x = (double)(float)x; /* the float32 path sees the float32 nearest x; p is computed for that */
    mpfr_set_d(X, x, MPFR_RNDN);
    const uint32_t rtz = fl_mpfr_encode(f, X, FL_RND_ZERO, FL_OVF_SATURATE, NULL);
    const uint32_t mag = sb ? rtz & (sb - 1u) : rtz;
    CHECK(mag < d->max_mag, "%s sr mean: x=%a must lie below max", fl_format_name(f), x);
    const double lo = mag_value(f, mag) * (x < 0 ? -1 : 1), hi = mag_value(f, mag + 1) * (x < 0 ? -1 : 1);
    const double p = (x - lo) / (hi - lo); /* exact: hi - lo is a power of two */
    CHECK(p > 0 && p < 1, "%s sr mean: x=%a is representable", fl_format_name(f), x);
    sm_state = seed;
    double sum = 0; /* exact: N values of a few bits each */
    for (long i = 0; i < N; i++) {
        const uint32_t r = (uint32_t)(splitmix64() >> 32);
        const uint32_t c = use_f64 ? fl_encode_f64(f, x, FL_RND_SR, FL_OVF_SATURATE, r)
                                   : fl_encode_f32(f, (float)x, FL_RND_SR, FL_OVF_SATURATE, r);
        const double v = fl_decode(f, c);
        CHECK(v == lo || v == hi, "%s sr sat %s x=%a rbits=0x%08x: result %a is neither neighbour %a, %a",
              fl_format_name(f), use_f64 ? "f64" : "f32", x, (unsigned)r, v, lo, hi);
        sum += v;
    }
    const double mean = sum / N;
    const double se = fabs(hi - lo) * sqrt(p * (1 - p) / N);
    const double tol = 5 * se;
    printf("  SR %-5s %s x=%-16a p=%.4f  N=%ld seed=0x%016llx  mean-x=%+.3e  tol (5 SE)=%.3e\n",
           fl_format_name(f), use_f64 ? "f64" : "f32", x, p, N, (unsigned long long)seed, mean - x, tol);
    CHECK(fabs(mean - x) <= tol, "%s sr sat x=%a N=%ld seed=0x%016llx: mean %a differs from x by %.3e > %.3e",
          fl_format_name(f), x, N, (unsigned long long)seed, mean, mean - x, tol);
}

static void test_sr_statistics(void)
{
    const uint64_t seed = 0x00F8F8F8C0FFEE01ull;
    uint64_t s = seed;
    for (int k = 1; k <= 15; k++) /* 1 + k/16 ulp in e4m3 (ulp at 1 is 2^-3) */
        sr_mean(FL_FMT_E4M3, 1 + ldexp(k, -7), 0, s++);
    sr_mean(FL_FMT_E4M3, ldexp(3 + 5.0 / 16, -9), 0, s++);  /* subnormal: between 3 and 4 * 2^-9 */
    sr_mean(FL_FMT_E4M3, -ldexp(1.0 / 3, -9), 1, s++);      /* between 0 and -min_sub, double path */
    sr_mean(FL_FMT_E4M3, 416 + 32 * 11.0 / 16, 0, s++);     /* top binade, below max */
    sr_mean(FL_FMT_E4M3, -(416 + 32 * 3.0 / 16), 0, s++);
    sr_mean(FL_FMT_E5M2, 49152 + 8192 * 0.3, 0, s++);
    sr_mean(FL_FMT_BF16, 1 + ldexp(0.25, -7), 0, s++);
    sr_mean(FL_FMT_FP16, 1 + ldexp(1.0 / 3, -10), 1, s++);
    sr_mean(FL_FMT_E8M0, 1.3, 0, s++);
    sr_mean(FL_FMT_E2M1, 5, 0, s++);
    sr_mean(FL_FMT_E4M3FNUZ, 0.1, 0, s++);
}

/* ---- driver ------------------------------------------------------------------------------------ */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int main(void)
{
    mpfr_init2(X, 64);
    mpfr_init2(R, 64);
    mpfr_init2(W1, 1300);
    mpfr_init2(W2, 1300);
    const double t0 = now();
    for (int f = 0; f < FL_FMT_COUNT; f++)
        test_roundtrip((fl_format)f);
    printf("round trip: every encoding of every format (fp32: 2^18 patterns), 7 modes x 2 policies x 2 paths (%.1f s)\n",
           now() - t0);
    const double t1 = now();
    for (int f = 0; f < FL_FMT_COUNT; f++) {
        test_neighbourhoods((fl_format)f);
        test_specials((fl_format)f);
    }
    printf("neighbourhoods and specials vs MPFR: %ld float32 + %ld double inputs, 4 modes x 2 policies (%.1f s)\n",
           n_f32, n_f64, now() - t1);
    const double t2 = now();
    for (int f = 0; f < FL_FMT_COUNT; f++)
        test_sr_neighbours((fl_format)f);
    printf("SR neighbours: %ld inputs x 2 policies x 6 rbits; %ld inexact inputs with frac32 = 0 (%.1f s)\n", n_sr,
           n_sr_trunc, now() - t2);
    CHECK(n_sr_trunc > 0, "no input exercised frac32's truncation to 0");
    test_sr_statistics();
    mpfr_clears(X, R, W1, W2, (mpfr_ptr)0);
    mpfr_free_cache();
    printf("total %.1f s\n", now() - t0);
    PASS("test_round");
}
