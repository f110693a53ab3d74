/* test_scaling.c — numerics/scaling.c: amax, TE's amax -> scale rule, delayed scaling, block
 * grids, MX e8m0 scales, quantize / dequantize.
 *
 * Exact checks throughout (bits of scales, codes, counters), against values derived by hand in
 * the comments and against independent double-precision models:
 *   - floor(log2 x) and the 24-bit significand from bits, at and next to every power of two;
 *   - the scale rule at chosen amax (448, 1, 7, 3, 0, -0, NaN, +-Inf, negative, subnormal, the
 *     overflow threshold), with margins; a sweep of amax bit patterns against a model that divides
 *     in double (one correct rounding: 53 >= 2*24 + 2), against TE's Python form
 *     (fmt_max / amax) / 2^margin wherever that is a normal float below FLT_MAX, and, for power-of-two
 *     scales, that amax * s <= fmt_max * 2^-margin and amax * 2s > it (the largest such power);
 *   - delayed scaling, L = 4, a scripted amax sequence with a zero, a NaN and an Inf, scale used at
 *     every step derived by hand for "max" and "most_recent" (stale by one step), the history
 *     window, checkpoint save / restore bit for bit, validation of corrupted states; L = 1024
 *     remembers a spike for exactly 1024 records;
 *   - block grids and per-block amax / scale / codes for 1x128 tiles and 128x128 blocks with
 *     partial edges, against brute force;
 *   - MX: floor vs ceil codes and the element code and saturation / clip counts for block amaxes at
 *     and around powers of two and the format max, for e4m3 and e2m1; zero, NaN and Inf blocks;
 *     partial blocks; the ceil rule against TE's float32 form amax * RN(1/fmt_max) for every
 *     element format over a sweep; the floor rule against frexp;
 *   - round trips: |dequantize(quantize(x)) - x| <= half an ulp of the element format at x*s,
 *     divided by s, for every non-saturated element (exact for power-of-two and MX scales; with a
 *     stated float32 allowance otherwise), and the counters against brute force.
 * Random inputs come from a fixed, printed seed.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fl_round.h"
#include "scaling.h"

static const uint64_t SEED = 0x5CA1AB1E2024ull;

static float F(uint32_t u) { return fl_f32_from_bits(u); }
static uint32_t U(float x) { return fl_f32_bits(x); }

/* splitmix64 */
static uint64_t rng_state;
static uint64_t rng_next(void) { return fl_splitmix64(&rng_state); }
/* uniform in [-1, 1) with 24 random bits */
static float rng_unit(void) { return (float)((int32_t)(rng_next() >> 40) - (1 << 23)) * 0x1p-23f; }

/* CHECK_BITS(got, want, context format, ...): the two floats must have the same bits. */
#define CHECK_BITS(got, want, ...)                                                                 \
    do {                                                                                           \
        const float got_ = (got), want_ = (want);                                                  \
        fl_checks_run++;                                                                           \
        if (U(got_) != U(want_)) {                                                                 \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, ": got %a (0x%08x) want %a (0x%08x)\n", (double)got_, U(got_),         \
                    (double)want_, U(want_));                                                      \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static const fl_format ELEMS[] = { FL_FMT_E4M3, FL_FMT_E5M2, FL_FMT_E3M2, FL_FMT_E2M3, FL_FMT_E2M1,
                                   FL_FMT_E4M3FNUZ, FL_FMT_E5M2FNUZ };

/* ---------------------------------------------------------------- bit helpers */

static void test_bit_helpers(void)
{
    for (int k = -149; k <= 127; k++) {
        const float p = ldexpf(1.0f, k);
        CHECK(fl_floor_log2_f32_bits(U(p)) == k, "floor_log2(%a) = %d", (double)p, fl_floor_log2_f32_bits(U(p)));
        CHECK(fl_floor_log2_f32_bits(U(-p)) == k, "floor_log2(%a)", (double)-p);
        CHECK(fl_sig24_f32_bits(U(p)) == 0x800000u, "sig24(%a) = 0x%x", (double)p, fl_sig24_f32_bits(U(p)));
        const float below = nextafterf(p, 0.0f); /* largest float under 2^k: floor_log2 = k - 1 */
        if (below != 0.0f) {
            int e;
            frexp((double)below, &e);
            CHECK(fl_floor_log2_f32_bits(U(below)) == e - 1, "floor_log2(%a) = %d want %d", (double)below,
                  fl_floor_log2_f32_bits(U(below)), e - 1);
            const double sig = ldexp((double)below, 23 - (e - 1));
            CHECK(fl_sig24_f32_bits(U(below)) == (uint32_t)sig, "sig24(%a) = 0x%x", (double)below,
                  fl_sig24_f32_bits(U(below)));
            CHECK_BITS(fl_pow2_down_f32(below), ldexpf(1.0f, e - 1), "pow2_down x=%a", (double)below);
        }
        CHECK_BITS(fl_pow2_down_f32(p), p, "pow2_down x=%a", (double)p);
        if (k < 127 && k > -148) /* 1.5 * 2^k is a float */
            CHECK_BITS(fl_pow2_down_f32(p * 1.5f), p, "pow2_down x=%a", (double)(p * 1.5f));
    }
    CHECK(fl_floor_log2_f32_bits(0x7F7FFFFFu) == 127, "floor_log2(FLT_MAX)");
    CHECK_BITS(fl_pow2_down_f32(FLT_MAX), 0x1p127f, "pow2_down(FLT_MAX)");
    /* Non-positive or non-finite: unchanged. */
    CHECK_BITS(fl_pow2_down_f32(0.0f), 0.0f, "pow2_down(0)");
    CHECK_BITS(fl_pow2_down_f32(-3.0f), -3.0f, "pow2_down(-3)");
    CHECK_BITS(fl_pow2_down_f32(INFINITY), INFINITY, "pow2_down(inf)");
    /* fmaxf semantics */
    CHECK_BITS(fl_fmax_f32(NAN, 2.0f), 2.0f, "fmax(nan, 2)");
    CHECK_BITS(fl_fmax_f32(2.0f, NAN), 2.0f, "fmax(2, nan)");
    CHECK(isnan(fl_fmax_f32(NAN, NAN)), "fmax(nan, nan)");
    CHECK_BITS(fl_fmax_f32(INFINITY, 2.0f), INFINITY, "fmax(inf, 2)");
    /* emax of the element formats (the exponent of the largest binade). */
    CHECK(fl_mx_emax(FL_FMT_E4M3) == 8 && fl_mx_emax(FL_FMT_E5M2) == 15 && fl_mx_emax(FL_FMT_E2M1) == 2 &&
              fl_mx_emax(FL_FMT_E3M2) == 4 && fl_mx_emax(FL_FMT_E2M3) == 2,
          "emax e4m3 %d e5m2 %d e2m1 %d e3m2 %d e2m3 %d", fl_mx_emax(FL_FMT_E4M3), fl_mx_emax(FL_FMT_E5M2),
          fl_mx_emax(FL_FMT_E2M1), fl_mx_emax(FL_FMT_E3M2), fl_mx_emax(FL_FMT_E2M3));
}

/* ---------------------------------------------------------------- amax -> scale */

/* Independent model: the exact quotient fmt_max 2^-margin / amax, in double, rounded once to
   float (double rounding through binary64 is innocuous for a quotient of floats: 53 >= 2*24 + 2),
   the FLT_MAX clamp, pow2 via frexp. */
static float scale_model(double fmt_max, float amax, float prev, int margin, int pow2)
{
    float sf = prev;
    if (isfinite(amax) && amax > 0.0f)
        sf = (float)(ldexp(fmt_max, -margin) / (double)amax);
    if (isinf(sf))
        sf = FLT_MAX;
    if (pow2 && sf > 0.0f && isfinite(sf)) {
        int e;
        frexp((double)sf, &e);
        sf = ldexpf(1.0f, e - 1);
    }
    return sf;
}

static void test_scale_from_amax(void)
{
    const fl_format e4 = FL_FMT_E4M3;
    const float prev = 10.5f;
    /* Hand-derived: 448/448 = 1; 448/1; 448/7 = 64; 448/3 = 149.333... = 1.0010101...b * 2^7
       -> mantissa 0010101 0101 0101 0101 0101|0101... rounds down: 0x43155555. */
    CHECK_BITS(fl_scale_from_amax(e4, 448.0f, prev, 0, 0), 1.0f, "e4m3 amax 448");
    CHECK_BITS(fl_scale_from_amax(e4, 1.0f, prev, 0, 0), 448.0f, "e4m3 amax 1");
    CHECK_BITS(fl_scale_from_amax(e4, 7.0f, prev, 0, 0), 64.0f, "e4m3 amax 7");
    CHECK_BITS(fl_scale_from_amax(e4, 3.0f, prev, 0, 0), F(0x43155555u), "e4m3 amax 3");
    CHECK_BITS(fl_scale_from_amax(FL_FMT_E5M2, 57344.0f, prev, 0, 0), 1.0f, "e5m2 amax 57344");
    CHECK_BITS(fl_scale_from_amax(FL_FMT_E5M2, 7.0f, prev, 0, 0), 8192.0f, "e5m2 amax 7");
    /* margin divides by 2^margin: 0x43155555 / 2 = 0x42955555 */
    CHECK_BITS(fl_scale_from_amax(e4, 3.0f, prev, 1, 0), F(0x42955555u), "e4m3 amax 3 margin 1");
    CHECK_BITS(fl_scale_from_amax(e4, 448.0f, prev, 2, 0), 0.25f, "e4m3 amax 448 margin 2");
    CHECK_BITS(fl_scale_from_amax(e4, 448.0f, prev, -1, 0), 2.0f, "e4m3 amax 448 margin -1");
    /* Nothing to learn: the previous scale. */
    CHECK_BITS(fl_scale_from_amax(e4, 0.0f, prev, 0, 0), prev, "amax 0");
    CHECK_BITS(fl_scale_from_amax(e4, -0.0f, prev, 0, 0), prev, "amax -0");
    CHECK_BITS(fl_scale_from_amax(e4, NAN, prev, 0, 0), prev, "amax NaN");
    CHECK_BITS(fl_scale_from_amax(e4, INFINITY, prev, 0, 0), prev, "amax Inf");
    CHECK_BITS(fl_scale_from_amax(e4, -INFINITY, prev, 0, 0), prev, "amax -Inf");
    CHECK_BITS(fl_scale_from_amax(e4, -2.0f, prev, 0, 0), prev, "amax -2");
    /* Subnormal amax: 448 / amax overflows -> FLT_MAX; pow2 -> 2^127. */
    CHECK_BITS(fl_scale_from_amax(e4, 0x1p-149f, prev, 0, 0), FLT_MAX, "amax 2^-149");
    CHECK_BITS(fl_scale_from_amax(e4, 0x1p-126f, prev, 0, 0), FLT_MAX, "amax 2^-126");
    CHECK_BITS(fl_scale_from_amax(e4, 0x1p-149f, prev, 0, 1), 0x1p127f, "amax 2^-149 pow2");
    CHECK_BITS(fl_scale_from_amax(e4, 0x1p-149f, prev, 3, 0), FLT_MAX, "amax 2^-149 margin 3");
    /* Where TE's two forms part: 448 / 2^-121 = 1.75 * 2^129 overflows, 56 / 2^-121 does not.
       The fused form keeps the margin (1.75 * 2^126); the Python form would give FLT_MAX. */
    CHECK_BITS(fl_scale_from_amax(e4, 0x1p-121f, prev, 3, 0), 0x1.cp126f, "amax 2^-121 margin 3");
    CHECK_BITS(fl_scale_from_amax(e4, 0x1p-121f, prev, 0, 0), FLT_MAX, "amax 2^-121 margin 0");
    /* The overflow threshold: smallest amax whose quotient is finite. */
    {
        float a = (float)(448.0 / (double)FLT_MAX);
        while (isinf(448.0f / a))
            a = nextafterf(a, INFINITY);
        while (!isinf(448.0f / nextafterf(a, 0.0f)))
            a = nextafterf(a, 0.0f);
        CHECK(isfinite(448.0f / a) && isinf(448.0f / nextafterf(a, 0.0f)), "threshold search a=%a", (double)a);
        CHECK_BITS(fl_scale_from_amax(e4, a, prev, 0, 0), 448.0f / a, "threshold amax %a", (double)a);
        CHECK_BITS(fl_scale_from_amax(e4, nextafterf(a, 0.0f), prev, 0, 0), FLT_MAX, "below threshold");
    }
    /* Pow2: 448/3 = 149.3 -> 128; 448/448 -> 1; 448/449 -> 0.5; e5m2 margin 1, amax 1000:
       57.344 / 2 = 28.672 -> 16. */
    CHECK_BITS(fl_scale_from_amax(e4, 3.0f, prev, 0, 1), 128.0f, "pow2 amax 3");
    CHECK_BITS(fl_scale_from_amax(e4, 448.0f, prev, 0, 1), 1.0f, "pow2 amax 448");
    CHECK_BITS(fl_scale_from_amax(e4, 449.0f, prev, 0, 1), 0.5f, "pow2 amax 449");
    CHECK_BITS(fl_scale_from_amax(FL_FMT_E5M2, 1000.0f, prev, 1, 1), 16.0f, "pow2 e5m2 amax 1000 margin 1");
    /* Pow2 at amax = fmt_max * 2^-j exactly and one float either side, every j in range. */
    for (int j = -100; j <= 100; j++) {
        const float a = ldexpf(448.0f, -j);
        CHECK_BITS(fl_scale_from_amax(e4, a, prev, 0, 1), ldexpf(1.0f, j), "pow2 at 448*2^%d", -j);
        CHECK_BITS(fl_scale_from_amax(e4, nextafterf(a, INFINITY), prev, 0, 1), ldexpf(1.0f, j - 1),
                   "pow2 above 448*2^%d", -j);
        CHECK_BITS(fl_scale_from_amax(e4, nextafterf(a, 0.0f), prev, 0, 1), ldexpf(1.0f, j), "pow2 below 448*2^%d", -j);
    }

    /* Sweep: amax bit patterns over every exponent, formats, margins, pow2. */
    rng_state = SEED;
    const fl_format fmts[] = { FL_FMT_E4M3, FL_FMT_E5M2, FL_FMT_E2M1, FL_FMT_E2M3, FL_FMT_E3M2, FL_FMT_E4M3FNUZ };
    const int margins[] = { 0, 1, 3, -2 };
    long n_python_same = 0;
    for (size_t fi = 0; fi < FL_ARRAY_LEN(fmts); fi++) {
        const double fmax = fl_format_max(fmts[fi]);
        for (size_t mi = 0; mi < FL_ARRAY_LEN(margins); mi++) {
            const int m = margins[mi];
            for (int it = 0; it < 20000; it++) {
                const uint32_t ua = (uint32_t)(rng_next() >> 32) & 0x7F7FFFFFu; /* finite, >= 0 */
                const float a = F(ua);
                for (int pow2 = 0; pow2 <= 1; pow2++) {
                    const float s = fl_scale_from_amax(fmts[fi], a, prev, m, pow2);
                    const float want = scale_model(fmax, a, prev, m, pow2);
                    CHECK_BITS(s, want, "%s amax=%a margin=%d pow2=%d", fl_format_name(fmts[fi]), (double)a, m, pow2);
                    if (!pow2 && a > 0.0f) {
                        /* TE's Python form (fmt_max / amax) / 2^margin: same bits wherever it is a
                           normal float below FLT_MAX. */
                        const float py = ((float)fmax / a) / ldexpf(1.0f, m);
                        if (py >= FLT_MIN && py < FLT_MAX) {
                            CHECK_BITS(s, py, "Python form %s amax=%a margin=%d", fl_format_name(fmts[fi]), (double)a, m);
                            n_python_same++;
                        }
                    }
                    if (pow2 && a > 0.0f) {
                        /* Largest power of two keeping amax * s within fmt_max * 2^-margin (exact in double). */
                        const double lim = ldexp(fmax, -m);
                        CHECK((double)a * s <= lim, "pow2 overshoots: %s amax=%a s=%a margin=%d",
                              fl_format_name(fmts[fi]), (double)a, (double)s, m);
                        if (s < 0x1p127f && s > 0.0f)
                            CHECK((double)a * 2.0 * s > lim, "pow2 not largest: %s amax=%a s=%a margin=%d",
                                  fl_format_name(fmts[fi]), (double)a, (double)s, m);
                    }
                }
            }
        }
    }
    CHECK(n_python_same > 100000, "Python-form comparisons: only %ld", n_python_same);

    /* Current / block scaling: amax_eps floors the amax; zero / NaN / Inf blocks get scale 1. */
    {
        const float amax[] = { 0.0f, NAN, INFINITY, 448.0f, 1e-30f, 3.0f };
        float s[6];
        fl_scale_blocks(s, amax, 6, e4, 0, 0.0f);
        CHECK_BITS(s[0], 1.0f, "block scale amax 0");
        CHECK_BITS(s[1], 1.0f, "block scale amax NaN");
        CHECK_BITS(s[2], 1.0f, "block scale amax Inf");
        CHECK_BITS(s[3], 1.0f, "block scale amax 448");
        CHECK_BITS(s[4], 448.0f / 1e-30f, "block scale amax 1e-30");
        CHECK_BITS(s[5], F(0x43155555u), "block scale amax 3");
        fl_scale_blocks(s, amax, 6, e4, 1, 1e-3f);
        CHECK_BITS(s[0], 0x1p18f, "eps: 448/1e-3 = 448000 -> 2^18");
        CHECK_BITS(s[1], 1.0f, "eps: NaN stays NaN -> 1");
        CHECK_BITS(s[4], 0x1p18f, "eps floors 1e-30");
        CHECK_BITS(s[5], 128.0f, "eps pow2 amax 3");
        float inv[6];
        fl_scale_invert(inv, s, 6);
        for (int i = 0; i < 6; i++)
            CHECK_BITS(inv[i], 1.0f / s[i], "scale_inv %d", i);
    }
}

/* ---------------------------------------------------------------- amax */

static void test_amax(void)
{
    size_t nan = 99;
    CHECK(fl_amax_f32(&nan, NULL, 0) == 0.0f && nan == 0, "empty amax");
    const float x[] = { 1.0f, -3.5f, NAN, 2.0f, -NAN, -0.0f };
    CHECK_BITS(fl_amax_f32(&nan, x, 6), 3.5f, "amax ignores NaN");
    CHECK(nan == 2, "nan_count %zu want 2", nan);
    const float y[] = { NAN, NAN };
    CHECK_BITS(fl_amax_f32(&nan, y, 2), 0.0f, "all-NaN amax");
    CHECK(nan == 2, "all-NaN count %zu", nan);
    const float z[] = { 1.0f, -INFINITY, NAN };
    CHECK_BITS(fl_amax_f32(NULL, z, 3), INFINITY, "amax with -Inf");
    const float w[] = { -0x1p-149f, 0x1p-140f, -0.0f };
    CHECK_BITS(fl_amax_f32(NULL, w, 3), 0x1p-140f, "subnormal amax");
}

/* ---------------------------------------------------------------- delayed scaling */

/* The script: amax recorded after each step, and the scale used at each step (before its
   record).  e4m3: 448/56 = 8, 448/224 = 2, 448/14 = 32, 448/28 = 16, 448/112 = 4, 448/7 = 64.
     step  record  "max" window (L=4) after record        max-scale   most_recent-scale
      1     56     56                                     1 (init)    1
      2     224    56 224                                 8           8
      3     0      (skipped: no roll, scale kept)         2           2
      4     14     56 224 14                              2           2
      5     NaN    56 224 14 NaN   (NaN ignored by max)   2           32
      6     28     224 14 NaN 28                          2           32  (NaN kept 32)
      7     112    14 NaN 28 112                          2           16
      8     14     NaN 28 112 14                          4           4
      9     Inf    28 112 14 Inf   (Inf: keep)            4           32
     10     14     112 14 Inf 14                          4           32  (Inf kept 32)
     11     7      14 Inf 14 7                            4           32
     12     7      Inf 14 7 7                             4           64
     13     7      14 7 7 7                               4           64
     14     7      7 7 7 7                                32          64
     15     -                                             64          64             */
static const float SCRIPT_AMAX[14] = { 56, 224, 0, 14, NAN, 28, 112, 14, INFINITY, 14, 7, 7, 7, 7 };
static const float SCRIPT_MAX[15] = { 1, 8, 2, 2, 2, 2, 2, 4, 4, 4, 4, 4, 4, 32, 64 };
static const float SCRIPT_RECENT[15] = { 1, 8, 2, 2, 32, 32, 16, 4, 32, 32, 32, 64, 64, 64, 64 };

static fl_delayed *delayed_new(uint32_t len, fl_amax_algo algo, int margin, fl_format fmt, int pow2)
{
    fl_delayed *s = malloc(fl_delayed_size(len));
    CHECK(s, "out of memory");
    CHECK(fl_delayed_init(s, len, algo, margin, fmt, pow2) == 0, "fl_delayed_init len=%u", len);
    return s;
}

static void test_delayed(void)
{
    for (int algo = 0; algo < FL_AMAX_ALGO_COUNT; algo++) {
        const float *want = algo == FL_AMAX_MAX ? SCRIPT_MAX : SCRIPT_RECENT;
        fl_delayed *s = delayed_new(4, (fl_amax_algo)algo, 0, FL_FMT_E4M3, 0);
        CHECK(fl_delayed_check(s, fl_delayed_size(4)) == NULL, "fresh state invalid");
        fl_delayed *saved = NULL;
        for (int t = 0; t < 15; t++) {
            CHECK_BITS(fl_delayed_scale(s), want[t], "%s step %d", fl_amax_algo_name((fl_amax_algo)algo), t + 1);
            CHECK_BITS(fl_delayed_scale_inv(s), 1.0f / want[t], "%s step %d scale_inv",
                       fl_amax_algo_name((fl_amax_algo)algo), t + 1);
            if (t == 14)
                break;
            if (t == 5) { /* checkpoint mid-run: a byte copy */
                saved = malloc(fl_delayed_size(4));
                CHECK(saved, "out of memory");
                memcpy(saved, s, fl_delayed_size(4));
            }
            fl_delayed_record(s, SCRIPT_AMAX[t]);
            CHECK(s->steps == (uint64_t)t + 1, "steps %llu", (unsigned long long)s->steps);
        }
        /* Window after the script: 7 7 7 7. */
        float h[4];
        fl_delayed_history(h, s);
        for (int i = 0; i < 4; i++)
            CHECK_BITS(h[i], 7.0f, "history[%d]", i);
        /* Resume from the checkpoint: the same records give the same state, byte for byte. */
        CHECK(fl_delayed_check(saved, fl_delayed_size(4)) == NULL, "checkpoint invalid: %s",
              fl_delayed_check(saved, fl_delayed_size(4)));
        for (int t = 5; t < 14; t++)
            fl_delayed_record(saved, SCRIPT_AMAX[t]);
        CHECK(memcmp(saved, s, fl_delayed_size(4)) == 0, "resumed state differs from the uninterrupted one");
        free(saved);
        free(s);
    }

    /* The history window mid-script ("max", after step 6): oldest first 224 14 NaN 28. */
    {
        fl_delayed *s = delayed_new(4, FL_AMAX_MAX, 0, FL_FMT_E4M3, 0);
        float h[4];
        fl_delayed_history(h, s);
        for (int i = 0; i < 4; i++)
            CHECK_BITS(h[i], 0.0f, "fresh history[%d]", i);
        fl_delayed_record(s, 56);
        fl_delayed_history(h, s);
        CHECK(U(h[0]) == 0 && U(h[1]) == 0 && U(h[2]) == 0 && h[3] == 56.0f, "history after one record");
        for (int t = 1; t < 6; t++)
            fl_delayed_record(s, SCRIPT_AMAX[t]);
        fl_delayed_history(h, s);
        CHECK(h[0] == 224.0f && h[1] == 14.0f && isnan(h[2]) && h[3] == 28.0f,
              "history after 6 steps: %a %a %a %a", (double)h[0], (double)h[1], (double)h[2], (double)h[3]);
        free(s);
    }

    /* margin and pow2: e5m2, margin 1, pow2: amax 1000 -> 16; then 57344 -> 0.5. */
    {
        fl_delayed *s = delayed_new(8, FL_AMAX_MOST_RECENT, 1, FL_FMT_E5M2, 1);
        fl_delayed_record(s, 1000.0f);
        CHECK_BITS(fl_delayed_scale(s), 16.0f, "e5m2 margin 1 pow2 amax 1000");
        fl_delayed_record(s, 57344.0f);
        CHECK_BITS(fl_delayed_scale(s), 0.5f, "e5m2 margin 1 pow2 amax 57344");
        /* Tiny amax: the scale saturates at FLT_MAX -> 2^127 under pow2. */
        fl_delayed_record(s, 0x1p-149f);
        CHECK_BITS(fl_delayed_scale(s), 0x1p127f, "tiny amax pow2");
        CHECK_BITS(fl_delayed_scale_inv(s), 0x1p-127f, "tiny amax pow2 inv");
        free(s);
    }

    /* TE's default length: a spike stays in the window for exactly L = 1024 records. */
    {
        fl_delayed *s = delayed_new(1024, FL_AMAX_MAX, 0, FL_FMT_E4M3, 0);
        fl_delayed_record(s, 448.0f);
        for (int t = 0; t < 1023; t++) {
            fl_delayed_record(s, 7.0f);
            CHECK_BITS(fl_delayed_scale(s), 1.0f, "spike forgotten early, after %d records", t + 2);
        }
        fl_delayed_record(s, 7.0f);
        CHECK_BITS(fl_delayed_scale(s), 64.0f, "spike still remembered after 1025 records");
        free(s);
    }

    /* Validation. */
    {
        fl_delayed *s = delayed_new(4, FL_AMAX_MAX, 0, FL_FMT_E4M3, 0);
        CHECK(fl_delayed_init(s, 0, FL_AMAX_MAX, 0, FL_FMT_E4M3, 0) == -1, "len 0 accepted");
        CHECK(fl_delayed_init(s, 4, FL_AMAX_ALGO_COUNT, 0, FL_FMT_E4M3, 0) == -1, "bad algo accepted");
        CHECK(fl_delayed_init(s, 4, FL_AMAX_MAX, 0, FL_FMT_E8M0, 0) == -1, "e8m0 accepted");
        CHECK(fl_delayed_init(s, 4, FL_AMAX_MAX, 0, FL_FMT_BF16, 0) == -1, "bf16 accepted");
        CHECK(fl_delayed_init(s, 4, FL_AMAX_MAX, 128, FL_FMT_E4M3, 0) == -1, "margin 128 accepted");
        CHECK(fl_delayed_init(s, 4, FL_AMAX_MAX, 0, FL_FMT_E4M3, 0) == 0, "re-init");
        const size_t n = fl_delayed_size(4);
        CHECK(n == 48 + 16, "size %zu", n);
        CHECK(fl_delayed_check(s, n - 4) != NULL, "short blob accepted");
        CHECK(fl_delayed_check(s, 20) != NULL, "truncated header accepted");
        s->magic ^= 1;
        CHECK(fl_delayed_check(s, n) != NULL, "bad magic accepted");
        s->magic ^= 1;
        s->head = 4;
        CHECK(fl_delayed_check(s, n) != NULL, "head out of range accepted");
        s->head = 0;
        s->scale = 2.0f; /* scale_inv still 1 */
        CHECK(fl_delayed_check(s, n) != NULL, "scale_inv mismatch accepted");
        s->scale_inv = 0.5f;
        CHECK(fl_delayed_check(s, n) == NULL, "consistent edit rejected: %s", fl_delayed_check(s, n));
        s->version = 2;
        CHECK(fl_delayed_check(s, n) != NULL, "bad version accepted");
        free(s);
    }
}

/* ---------------------------------------------------------------- grids, per-block amax/scale/codes */

static void test_blocks(void)
{
    /* the grid of a blocking over (rows, cols): (block rows, block columns) */
    const struct {
        fl_block b;
        size_t rows, cols, nr, nc;
    } grids[] = {
        { FL_BLOCK_1X128, 130, 300, 130, 3 }, { FL_BLOCK_128X128, 130, 300, 2, 3 },
        { FL_BLOCK_ROW, 130, 300, 130, 1 },   { FL_BLOCK_TENSOR, 130, 300, 1, 1 },
        { FL_BLOCK_MX, 130, 300, 130, 10 },   { FL_BLOCK_128X128, 128, 128, 1, 1 },
        { FL_BLOCK_1X128, 0, 129, 0, 2 },
    };
    size_t nr, nc;
    for (size_t k = 0; k < FL_ARRAY_LEN(grids); k++) {
        fl_block_grid(&nr, &nc, grids[k].b, grids[k].rows, grids[k].cols);
        CHECK(nr == grids[k].nr && nc == grids[k].nc, "%zux%zu grid of (%zu, %zu): (%zu, %zu), want (%zu, %zu)",
              grids[k].b.rows, grids[k].b.cols, grids[k].rows, grids[k].cols, nr, nc, grids[k].nr, grids[k].nc);
    }

    const size_t R = 130, C = 300;
    float *x = malloc(R * C * sizeof(float));
    uint8_t *q = malloc(R * C);
    float *y = malloc(R * C * sizeof(float));
    CHECK(x && q && y, "out of memory");
    rng_state = SEED ^ 1;
    /* Magnitudes differ per (row, column-tile) and per 128x128 block, so a wrong index shows. */
    for (size_t i = 0; i < R; i++)
        for (size_t j = 0; j < C; j++)
            x[i * C + j] = rng_unit() * ldexpf(1.0f, (int)((i * 7 + (j / 128) * 3 + (i / 128) * 5) % 23) - 11);
    x[5 * C + 299] = NAN; /* in the partial last tile */
    x[129 * C + 0] = -INFINITY;

    const fl_block blockings[] = { FL_BLOCK_TENSOR, FL_BLOCK_ROW, FL_BLOCK_1X128, FL_BLOCK_128X128 };
    for (size_t bi = 0; bi < FL_ARRAY_LEN(blockings); bi++) {
        const fl_block b = blockings[bi];
        fl_block_grid(&nr, &nc, b, R, C);
        float *amax = malloc(nr * nc * sizeof(float));
        float *want = calloc(nr * nc, sizeof(float));
        float *scale = malloc(nr * nc * sizeof(float));
        float *inv = malloc(nr * nc * sizeof(float));
        CHECK(amax && want && scale && inv, "out of memory");
        /* Brute force: for every block, scan its rectangle. */
        for (size_t r = 0; r < nr; r++)
            for (size_t c = 0; c < nc; c++) {
                const size_t i0 = b.rows ? r * b.rows : 0, i1 = b.rows ? (i0 + b.rows < R ? i0 + b.rows : R) : R;
                const size_t j0 = b.cols ? c * b.cols : 0, j1 = b.cols ? (j0 + b.cols < C ? j0 + b.cols : C) : C;
                double m = 0.0;
                for (size_t i = i0; i < i1; i++)
                    for (size_t j = j0; j < j1; j++)
                        if (!isnan(x[i * C + j]) && fabs((double)x[i * C + j]) > m)
                            m = fabs((double)x[i * C + j]);
                want[r * nc + c] = (float)m;
            }
        size_t nan = 0;
        fl_amax_blocks(amax, &nan, x, R, C, b);
        CHECK(nan == 1, "block amax nan count %zu", nan);
        for (size_t k = 0; k < nr * nc; k++)
            CHECK_BITS(amax[k], want[k], "blocking (%zu,%zu) amax[%zu]", b.rows, b.cols, k);
        for (int pow2 = 0; pow2 <= 1; pow2++) {
            fl_scale_blocks(scale, amax, nr * nc, FL_FMT_E4M3, pow2, 0.0f);
            fl_scale_invert(inv, scale, nr * nc);
            for (size_t k = 0; k < nr * nc; k++)
                CHECK_BITS(scale[k], fl_scale_from_amax(FL_FMT_E4M3, amax[k], 1.0f, 0, pow2), "scale[%zu]", k);
            fl_quant_stats st = { 0 };
            fl_quantize(q, &st, x, R, C, scale, b, FL_FMT_E4M3);
            fl_dequantize(y, q, R, C, inv, b, FL_FMT_E4M3);
            for (size_t i = 0; i < R; i++)
                for (size_t j = 0; j < C; j++) {
                    const size_t k = (b.rows ? i / b.rows : 0) * nc + (b.cols ? j / b.cols : 0);
                    const uint32_t wq = fl_encode_f32(FL_FMT_E4M3, x[i * C + j] * scale[k], FL_RND_NE, FL_OVF_SATURATE, 0);
                    CHECK(q[i * C + j] == wq, "blocking (%zu,%zu) x[%zu][%zu]=%a scale=%a got=0x%02x want=0x%02x",
                          b.rows, b.cols, i, j, (double)x[i * C + j], (double)scale[k], q[i * C + j], wq);
                    const float wy = fl_decode(FL_FMT_E4M3, wq) * inv[k];
                    CHECK(U(y[i * C + j]) == U(wy), "dequant x[%zu][%zu] got=%a want=%a", i, j,
                          (double)y[i * C + j], (double)wy);
                }
            /* The Inf (block amax Inf -> scale 1) saturates; the NaN stays NaN. */
            CHECK(st.n == R * C && st.n_nan == 1 && st.n_sat >= 1 && st.n_clip >= 1,
                  "counters n=%zu nan=%zu sat=%zu clip=%zu", st.n, st.n_nan, st.n_sat, st.n_clip);
            CHECK(q[129 * C] == 0xFE && q[5 * C + 299] == 0x7F, "Inf -> 0x%02x, NaN -> 0x%02x", q[129 * C], q[5 * C + 299]);
        }
        free(amax);
        free(want);
        free(scale);
        free(inv);
    }
    free(x);
    free(q);
    free(y);
}

/* ---------------------------------------------------------------- round trips */

/* Half an ulp of fmt at |y| (the ulp of y's binade, never below the subnormal spacing). */
static double half_ulp(fl_format fmt, double y)
{
    const fl_format_desc *d = fl_format_get(fmt);
    const int emin = 1 - d->bias;
    int e = emin;
    if (y != 0.0) {
        frexp(fabs(y), &e);
        e -= 1;
        if (e < emin)
            e = emin;
    }
    return ldexp(1.0, e - d->mbits - 1);
}

/* Counters recomputed by brute force from x, the scaled value y and the code. */
static void brute_count(fl_quant_stats *st, fl_format fmt, float x, float y, uint32_t q)
{
    int ties;
    const double bnd = fl_format_rne_boundary(fmt, &ties);
    st->n++;
    if (isnan(y)) {
        st->n_nan++;
    } else if (fabs((double)y) > fl_format_max(fmt)) {
        st->n_sat++;
        st->n_clip += fabs((double)y) > bnd || (fabs((double)y) == bnd && ties);
    } else if (x != 0.0f && fl_decode(fmt, q) == 0.0f) {
        st->n_ftz++;
    }
}

static int stats_equal(const fl_quant_stats *a, const fl_quant_stats *b)
{
    return a->n == b->n && a->n_nan == b->n_nan && a->n_sat == b->n_sat && a->n_clip == b->n_clip &&
           a->n_ftz == b->n_ftz;
}

static void test_round_trip(void)
{
    const size_t R = 37, C = 300; /* partial 1x128 tile (44) and MX block (12) at the row end */
    float *x = malloc(R * C * sizeof(float)), *y = malloc(R * C * sizeof(float));
    uint8_t *q = malloc(R * C);
    CHECK(x && y && q, "out of memory");
    rng_state = SEED ^ 2;
    for (size_t k = 0; k < R * C; k++) /* wide dynamic range within a row: 2^-20 .. 2^10 */
        x[k] = rng_unit() * ldexpf(1.0f, (int)(rng_next() % 31) - 20);
    x[3] = 0.0f;
    x[4] = -0.0f;

    for (size_t fi = 0; fi < FL_ARRAY_LEN(ELEMS); fi++) {
        const fl_format fmt = ELEMS[fi];
        const double fmax = fl_format_max(fmt);
        /* Float scales, 1x128 tiles. */
        size_t nr, nc;
        fl_block_grid(&nr, &nc, FL_BLOCK_1X128, R, C);
        float *amax = malloc(nr * nc * sizeof(float)), *scale = malloc(nr * nc * sizeof(float)),
              *inv = malloc(nr * nc * sizeof(float));
        CHECK(amax && scale && inv, "out of memory");
        fl_amax_blocks(amax, NULL, x, R, C, FL_BLOCK_1X128);
        for (int pow2 = 0; pow2 <= 1; pow2++) {
            fl_scale_blocks(scale, amax, nr * nc, fmt, pow2, 0.0f);
            fl_scale_invert(inv, scale, nr * nc);
            fl_quant_stats st = { 0 }, bf = { 0 };
            fl_quantize(q, &st, x, R, C, scale, FL_BLOCK_1X128, fmt);
            fl_dequantize(y, q, R, C, inv, FL_BLOCK_1X128, fmt);
            size_t checked = 0;
            for (size_t i = 0; i < R; i++)
                for (size_t j = 0; j < C; j++) {
                    const size_t k = i * C + j;
                    const float s = scale[i * nc + j / 128];
                    const float ys = x[k] * s;
                    brute_count(&bf, fmt, x[k], ys, q[k]);
                    if (fabs((double)ys) > fmax)
                        continue; /* saturated: not bounded by half an ulp */
                    const double err = fabs((double)y[k] - (double)x[k]);
                    /* pow2: exact products, so the only error is the element rounding.
                       Otherwise y = x s (1+d1), q = y + e, |e| <= hu, deq = q inv (1+d3),
                       inv = (1/s)(1+d2), |di| <= 2^-24:  |deq - x| <= |x| 3.0000001 2^-24 +
                       (hu/s)(1+2^-23)  <=  |x| 2^-22 + (hu/s)(1+2^-22). */
                    const double hu = half_ulp(fmt, (double)ys) / (double)s;
                    const double bound = pow2 ? hu : hu * (1.0 + 0x1p-22) + fabs((double)x[k]) * 0x1p-22;
                    CHECK(err <= bound, "%s pow2=%d x=%a s=%a q=0x%02x deq=%a err=%a bound=%a", fl_format_name(fmt),
                          pow2, (double)x[k], (double)s, q[k], (double)y[k], err, bound);
                    checked++;
                }
            CHECK(checked >= R * C - nr * nc, "%s: only %zu of %zu elements bounded", fl_format_name(fmt), checked, R * C);
            CHECK(stats_equal(&st, &bf), "%s pow2=%d counters n=%zu/%zu nan=%zu/%zu sat=%zu/%zu clip=%zu/%zu ftz=%zu/%zu",
                  fl_format_name(fmt), pow2, st.n, bf.n, st.n_nan, bf.n_nan, st.n_sat, bf.n_sat, st.n_clip, bf.n_clip,
                  st.n_ftz, bf.n_ftz);
            CHECK(st.n_clip == 0, "%s: scales from amax clipped %zu elements", fl_format_name(fmt), st.n_clip);
            CHECK(st.n_ftz > 0, "%s: the wide range should flush some elements", fl_format_name(fmt));
        }
        free(amax);
        free(scale);
        free(inv);

        /* MX, both rules. */
        const size_t nb = (C + 31) / 32;
        uint8_t *sc = malloc(R * nb);
        CHECK(sc, "out of memory");
        for (int rule = 0; rule < FL_MX_RULE_COUNT; rule++) {
            fl_quant_stats st = { 0 }, bf = { 0 };
            fl_mx_quantize(sc, q, &st, x, R, C, fmt, (fl_mx_rule)rule);
            fl_mx_dequantize(y, sc, q, R, C, fmt);
            for (size_t i = 0; i < R; i++)
                for (size_t j = 0; j < C; j++) {
                    const size_t k = i * C + j;
                    const uint32_t code = sc[i * nb + j / 32];
                    /* Each code is the rule applied to its own block's amax. */
                    if (j % 32 == 0) {
                        const size_t n = C - j < 32 ? C - j : 32;
                        const float a = fl_amax_f32(NULL, x + k, n);
                        CHECK(code == fl_mx_scale_code(fmt, a, (fl_mx_rule)rule), "MX code row %zu block %zu", i, j / 32);
                    }
                    const float X = ldexpf(1.0f, (int)code - 127);
                    const float ys = x[k] / X; /* exact: a power of two, no underflow at these sizes */
                    brute_count(&bf, fmt, x[k], ys, q[k]);
                    if (fabs((double)ys) > fmax)
                        continue;
                    const double err = fabs((double)y[k] - (double)x[k]);
                    const double bound = half_ulp(fmt, (double)ys) * (double)X;
                    CHECK(err <= bound, "MX %s %s x=%a X=%a q=0x%02x deq=%a err=%a bound=%a", fl_format_name(fmt),
                          fl_mx_rule_name((fl_mx_rule)rule), (double)x[k], (double)X, q[k], (double)y[k], err, bound);
                }
            CHECK(stats_equal(&st, &bf), "MX %s %s counters n=%zu/%zu sat=%zu/%zu clip=%zu/%zu ftz=%zu/%zu",
                  fl_format_name(fmt), fl_mx_rule_name((fl_mx_rule)rule), st.n, bf.n, st.n_sat, bf.n_sat, st.n_clip,
                  bf.n_clip, st.n_ftz, bf.n_ftz);
            if (rule == FL_MX_CEIL)
                CHECK(st.n_sat == 0, "MX ceil %s saturated %zu", fl_format_name(fmt), st.n_sat);
        }
        free(sc);
    }
    free(x);
    free(y);
    free(q);
}

/* ---------------------------------------------------------------- MX rules */

typedef struct {
    float amax;
    uint8_t floor_code, ceil_code;
    uint8_t floor_q, ceil_q; /* code of the amax element */
    int floor_sat, floor_clip;
} mx_case;

/* One block: x[0] = amax, the rest a ramp below it (the ramp never sets the block max). */
static void check_mx_case(fl_format fmt, const mx_case *c)
{
    float x[32], y[32];
    x[0] = c->amax;
    for (int i = 1; i < 32; i++)
        x[i] = c->amax * (float)(32 - i) * (i % 2 ? -0.015625f : 0.015625f);
    for (int rule = 0; rule < FL_MX_RULE_COUNT; rule++) {
        uint8_t code, q[32];
        fl_quant_stats st = { 0 };
        fl_mx_quantize_block(&code, q, &st, x, 32, fmt, (fl_mx_rule)rule);
        const uint8_t wcode = rule == FL_MX_FLOOR ? c->floor_code : c->ceil_code;
        const uint8_t wq = rule == FL_MX_FLOOR ? c->floor_q : c->ceil_q;
        CHECK(code == wcode, "%s %s amax=%a code=0x%02x want 0x%02x", fl_format_name(fmt),
              fl_mx_rule_name((fl_mx_rule)rule), (double)c->amax, code, wcode);
        CHECK(q[0] == wq, "%s %s amax=%a q=0x%02x want 0x%02x", fl_format_name(fmt),
              fl_mx_rule_name((fl_mx_rule)rule), (double)c->amax, q[0], wq);
        const int wsat = rule == FL_MX_FLOOR ? c->floor_sat : 0, wclip = rule == FL_MX_FLOOR ? c->floor_clip : 0;
        CHECK(st.n == 32 && (int)st.n_sat == wsat && (int)st.n_clip == wclip && st.n_nan == 0,
              "%s %s amax=%a sat=%zu clip=%zu want %d %d", fl_format_name(fmt), fl_mx_rule_name((fl_mx_rule)rule),
              (double)c->amax, st.n_sat, st.n_clip, wsat, wclip);
        fl_mx_dequantize_block(y, code, q, 32, fmt);
        CHECK_BITS(y[0], fl_decode(fmt, wq) * ldexpf(1.0f, (int)wcode - 127), "%s %s amax=%a dequant",
                   fl_format_name(fmt), fl_mx_rule_name((fl_mx_rule)rule), (double)c->amax);
    }
}

/* TE's float32 form of the ceil rule: e8m0 = exponent of amax * RN(1/fmt_max), plus one if any
   mantissa bit is set (written here from the description in scaling.h, for normal products). */
static uint32_t te_ceil_code(float amax, double fmt_max)
{
    const float rcp = (float)(1.0 / fmt_max);
    const uint32_t v = U(amax * rcp);
    return (v >> 23) + ((v & 0x7FFFFFu) != 0);
}

static void test_mx_rules(void)
{
    const float below256 = nextafterf(256.0f, 0.0f), below512 = nextafterf(512.0f, 0.0f);
    /* e4m3: emax 8, max 448 = 1.75 * 2^8 = 0x7E; 256 = 0x78; RNE boundary 464 (tie to 448).
       floor: code = floor(log2 amax) - 8 + 127; ceil: + 1 when amax's significand > 1.75. */
    const mx_case e4[] = {
        { 256.0f, 127, 127, 0x78, 0x78, 0, 0 },
        { 448.0f, 127, 127, 0x7E, 0x7E, 0, 0 },
        { 449.0f, 127, 128, 0x7E, 0x76, 1, 0 },        /* ceil: 224.5 -> 224 = 1.75 * 2^7 = 0x76 */
        { 464.0f, 127, 128, 0x7E, 0x76, 1, 0 },        /* floor: the tie 464 -> 448: saturated, not
                                                          clipped; ceil: 232, tie -> 224 (m even) */
        { nextafterf(464.0f, 1e9f), 127, 128, 0x7E, 0x77, 1, 1 }, /* ceil: 232.00002 -> 240 */
        { 480.0f, 127, 128, 0x7E, 0x77, 1, 1 },        /* ceil: 240 = 1.875 * 2^7 = 0x77 */
        { below512, 127, 128, 0x7E, 0x78, 1, 1 },      /* ceil: 255.99998 -> 256 */
        { 512.0f, 128, 128, 0x78, 0x78, 0, 0 },
        { below256, 126, 127, 0x7E, 0x78, 1, 1 },      /* floor: 511.99997 clips */
        { 1.0f, 119, 119, 0x78, 0x78, 0, 0 },
        { 1.75f, 119, 119, 0x7E, 0x7E, 0, 0 },
        { nextafterf(1.75f, 2.0f), 119, 120, 0x7E, 0x76, 1, 0 }, /* floor: 448.00003 -> 448;
                                                                    ceil: 224.00002 -> 224 */
    };
    for (size_t i = 0; i < FL_ARRAY_LEN(e4); i++)
        check_mx_case(FL_FMT_E4M3, &e4[i]);
    /* e2m1: emax 2, max 6 = 1.5 * 2^2 = 0x7; codes 0..7 = 0, .5, 1, 1.5, 2, 3, 4, 6; boundary 7 and
       the tie overflows (6's mantissa is odd). */
    const mx_case e2[] = {
        { 4.0f, 127, 127, 0x6, 0x6, 0, 0 },
        { 6.0f, 127, 127, 0x7, 0x7, 0, 0 },
        { 6.5f, 127, 128, 0x7, 0x5, 1, 0 },  /* ceil: 3.25 -> 3 */
        { 7.0f, 127, 128, 0x7, 0x6, 1, 1 },  /* floor: 7 is the tie, clips; ceil: 3.5 tie -> 4 */
        { 7.5f, 127, 128, 0x7, 0x6, 1, 1 },  /* ceil: 3.75 -> 4 */
        { 8.0f, 128, 128, 0x6, 0x6, 0, 0 },
        { 3.0f, 126, 126, 0x7, 0x7, 0, 0 },
        { 3.5f, 126, 127, 0x7, 0x6, 1, 1 },  /* floor: 7 clips; ceil: 3.5 -> 4 */
        { 1.0f, 125, 125, 0x6, 0x6, 0, 0 },
    };
    for (size_t i = 0; i < FL_ARRAY_LEN(e2); i++)
        check_mx_case(FL_FMT_E2M1, &e2[i]);

    /* Tiny blocks: the code clamps at 0x00 (2^-127) for both rules. */
    CHECK(fl_mx_scale_code(FL_FMT_E4M3, 0x1p-140f, FL_MX_FLOOR) == 0 &&
              fl_mx_scale_code(FL_FMT_E4M3, 0x1p-140f, FL_MX_CEIL) == 0, "tiny amax code");
    CHECK(fl_mx_scale_code(FL_FMT_E4M3, 0x1p-119f, FL_MX_FLOOR) == 0 &&
              fl_mx_scale_code(FL_FMT_E4M3, 0x1p-118f, FL_MX_FLOOR) == 1, "floor code at 2^-119, 2^-118");
    /* Largest amax: FLT_MAX = 1.99.. * 2^127.  e4m3 floor 127-8+127 = 246, ceil 247 (1.99 > 1.75);
       e2m1 floor 127-2+127 = 252, ceil 253: the top code 0xFE is never needed by a finite amax. */
    CHECK(fl_mx_scale_code(FL_FMT_E4M3, FLT_MAX, FL_MX_FLOOR) == 246 &&
              fl_mx_scale_code(FL_FMT_E4M3, FLT_MAX, FL_MX_CEIL) == 247, "FLT_MAX codes e4m3");
    CHECK(fl_mx_scale_code(FL_FMT_E2M1, FLT_MAX, FL_MX_FLOOR) == 252 &&
              fl_mx_scale_code(FL_FMT_E2M1, FLT_MAX, FL_MX_CEIL) == 253, "FLT_MAX codes e2m1");
    CHECK(fl_mx_scale_code(FL_FMT_E4M3, NAN, FL_MX_CEIL) == 0xFF && fl_mx_scale_code(FL_FMT_E4M3, INFINITY, FL_MX_FLOOR) == 0xFF &&
              fl_mx_scale_code(FL_FMT_E4M3, INFINITY, FL_MX_CEIL) == 0xFE && fl_mx_scale_code(FL_FMT_E4M3, 0.0f, FL_MX_CEIL) == 0,
          "special amax codes");

    /* Zero block: 0x00 for both rules, signed zeros kept, nothing counted but n. */
    for (int rule = 0; rule < FL_MX_RULE_COUNT; rule++) {
        float x[32] = { 0 }, y[32];
        x[7] = -0.0f;
        uint8_t code, q[32];
        fl_quant_stats st = { 0 };
        fl_mx_quantize_block(&code, q, &st, x, 32, FL_FMT_E4M3, (fl_mx_rule)rule);
        CHECK(code == 0x00 && q[0] == 0x00 && q[7] == 0x80, "zero block code 0x%02x q0 0x%02x q7 0x%02x", code, q[0], q[7]);
        CHECK(st.n == 32 && st.n_nan + st.n_sat + st.n_clip + st.n_ftz == 0, "zero block counters");
        fl_mx_dequantize_block(y, code, q, 32, FL_FMT_E4M3);
        CHECK(U(y[0]) == 0 && U(y[7]) == 0x80000000u, "zero block dequant");
    }
    /* NaN in a block. */
    {
        float x[32], y[32];
        for (int i = 0; i < 32; i++)
            x[i] = (float)(i + 1);
        x[3] = NAN;
        uint8_t code, q[32];
        fl_quant_stats st = { 0 };
        fl_mx_quantize_block(&code, q, &st, x, 32, FL_FMT_E4M3, FL_MX_FLOOR);
        CHECK(code == 0xFF && st.n_nan == 1 && st.n == 32, "floor NaN block: code 0x%02x nan %zu", code, st.n_nan);
        fl_mx_dequantize_block(y, code, q, 32, FL_FMT_E4M3);
        for (int i = 0; i < 32; i++)
            CHECK(isnan(y[i]), "floor NaN block decodes to NaN at %d: %a", i, (double)y[i]);
        st = (fl_quant_stats){ 0 };
        fl_mx_quantize_block(&code, q, &st, x, 32, FL_FMT_E4M3, FL_MX_CEIL);
        /* amax 32 (NaN ignored): 32/2^k <= 448 -> k = -3 (256), code 124; NaN element 0x7F. */
        CHECK(code == 124 && q[3] == 0x7F && st.n_nan == 1, "ceil NaN block e4m3: code %u q3 0x%02x", code, q[3]);
        CHECK(q[31] == 0x78, "ceil NaN block: 32 * 2^3 = 256 -> 0x%02x", q[31]);
        fl_mx_quantize_block(&code, q, NULL, x, 32, FL_FMT_E2M1, FL_MX_CEIL);
        CHECK(code == 0xFF, "ceil NaN block e2m1 (no NaN encoding): code 0x%02x", code);
    }
    /* Inf in a block. */
    {
        float x[32];
        for (int i = 0; i < 32; i++)
            x[i] = 1.0f;
        x[9] = -INFINITY;
        uint8_t code, q[32];
        fl_quant_stats st = { 0 };
        fl_mx_quantize_block(&code, q, &st, x, 32, FL_FMT_E4M3, FL_MX_FLOOR);
        CHECK(code == 0xFF, "floor Inf block code 0x%02x", code);
        st = (fl_quant_stats){ 0 };
        fl_mx_quantize_block(&code, q, &st, x, 32, FL_FMT_E4M3, FL_MX_CEIL);
        /* TE: 0xFE, the Inf saturates to -448, the ones (1 * 2^-127) flush to zero. */
        CHECK(code == 0xFE && q[9] == 0xFE && q[0] == 0x00, "ceil Inf block code 0x%02x q9 0x%02x q0 0x%02x", code, q[9], q[0]);
        CHECK(st.n_sat == 1 && st.n_clip == 1 && st.n_ftz == 31, "ceil Inf block counters sat %zu clip %zu ftz %zu",
              st.n_sat, st.n_clip, st.n_ftz);
    }
    /* Partial blocks: C = 40 gives blocks of 32 and 8; each code sees only its own elements. */
    {
        float x[2 * 40];
        for (int k = 0; k < 80; k++)
            x[k] = 1.0f;
        x[35] = 100.0f;       /* row 0, block 1 (elements 32..39) */
        x[40 + 31] = 0.001f;  /* row 1, block 0: amax 1 */
        uint8_t sc[2 * 2], q[80];
        fl_mx_quantize(sc, q, NULL, x, 2, 40, FL_FMT_E4M3, FL_MX_FLOOR);
        /* 1 -> 119; 100 = 1.5625 * 2^6 -> 6 - 8 + 127 = 125 */
        CHECK(sc[0] == 119 && sc[1] == 125 && sc[2] == 119 && sc[3] == 119, "partial MX codes %u %u %u %u", sc[0], sc[1],
              sc[2], sc[3]);
    }

    /* The ceil rule against TE's float32 form, and the floor rule against frexp, for every
       element format: at fmt_max * 2^j and its neighbours, and over random bit patterns. */
    rng_state = SEED ^ 3;
    for (size_t fi = 0; fi < FL_ARRAY_LEN(ELEMS); fi++) {
        const fl_format fmt = ELEMS[fi];
        const double fmax = fl_format_max(fmt);
        const int emax = fl_mx_emax(fmt);
        long n = 0;
        for (int it = 0; it < 200000 + 3 * 250; it++) {
            float a;
            if (it < 3 * 250) {
                const float p = ldexpf((float)fmax, it / 3 - 125);
                a = it % 3 == 0 ? p : it % 3 == 1 ? nextafterf(p, 0.0f) : nextafterf(p, INFINITY);
            } else {
                a = F((uint32_t)(rng_next() >> 33) & 0x7F7FFFFFu);
            }
            if (!(a > 0.0f) || isinf(a))
                continue;
            const uint32_t ceil_code = fl_mx_scale_code(fmt, a, FL_MX_CEIL);
            const uint32_t floor_code = fl_mx_scale_code(fmt, a, FL_MX_FLOOR);
            int e;
            frexp((double)a, &e);
            int wf = e - 1 - emax + 127;
            wf = wf < 0 ? 0 : wf > 254 ? 254 : wf;
            CHECK(floor_code == (uint32_t)wf, "%s floor amax=%a code=%u want %d", fl_format_name(fmt), (double)a,
                  floor_code, wf);
            /* The defining property: amax / X <= fmt_max, and X / 2 would not do (unless clamped). */
            const double X = ldexp(1.0, (int)ceil_code - 127);
            CHECK((double)a / X <= fmax, "%s ceil amax=%a code=%u clips", fl_format_name(fmt),
                  (double)a, ceil_code);
            CHECK(ceil_code == 0 || (double)a / (X / 2) > fmax, "%s ceil amax=%a code=%u not smallest",
                  fl_format_name(fmt), (double)a, ceil_code);
            const float v = a * (float)(1.0 / fmax);
            if (v >= FLT_MIN && v < 0x1p127f) {
                CHECK(ceil_code == te_ceil_code(a, fmax), "%s ceil amax=%a code=%u TE-form %u", fl_format_name(fmt),
                      (double)a, ceil_code, te_ceil_code(a, fmax));
                n++;
            }
        }
        CHECK(n > 100000, "%s: only %ld TE-form comparisons", fl_format_name(fmt), n);
    }
}

/* ---------------------------------------------------------------- names */

static void test_names(void)
{
    fl_mx_rule r;
    fl_amax_algo a;
    CHECK(fl_mx_rule_parse(&r, "ceil") == 0 && r == FL_MX_CEIL && fl_mx_rule_parse(&r, "round") == -1, "mx rule parse");
    CHECK(strcmp(fl_mx_rule_name(FL_MX_FLOOR), "floor") == 0, "mx rule name");
    CHECK(fl_amax_algo_parse(&a, "most_recent") == 0 && a == FL_AMAX_MOST_RECENT && fl_amax_algo_parse(&a, "mean") == -1,
          "amax algo parse");
    CHECK(strcmp(fl_amax_algo_name(FL_AMAX_MAX), "max") == 0, "amax algo name");
}

/* The one vocabulary of scaling schemes: names and blockings. */
static void test_scaling_vocabulary(void)
{
    static const char *const want[FL_SCALING_COUNT] = { "none", "delayed", "tensor", "row", "1x128", "mx32", "nvfp4" };
    for (int s = 0; s < FL_SCALING_COUNT; s++)
        CHECK(!strcmp(fl_scaling_name((fl_scaling)s), want[s]), "name of scaling %d: %s", s, fl_scaling_name((fl_scaling)s));
    CHECK(!strcmp(fl_scaling_name(FL_SCALING_COUNT), "?"), "out of range");
    const fl_block r = fl_scaling_block(FL_SCALING_ROW), t = fl_scaling_block(FL_SCALING_1X128), m = fl_scaling_block(FL_SCALING_MX32),
                   n = fl_scaling_block(FL_SCALING_TENSOR);
    CHECK(r.rows == FL_BLOCK_ROW.rows && r.cols == FL_BLOCK_ROW.cols && t.cols == 128 && m.cols == FL_MX_BLOCK && n.rows == 0 && n.cols == 0,
          "blockings");
}

int main(void)
{
    test_scaling_vocabulary();
    printf("test_scaling: seed 0x%llx\n", (unsigned long long)SEED);
    test_bit_helpers();
    test_scale_from_amax();
    test_amax();
    test_delayed();
    test_blocks();
    test_mx_rules();
    test_round_trip();
    test_names();
    PASS("test_scaling");
}
