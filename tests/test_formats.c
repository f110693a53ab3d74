/* test_formats.c — the format table (numerics/fl_format.h) row by row against the primary sources: IEEE
 * 754-2019 (fp32, fp16), Google's bfloat16 (TPU docs), Micikevicius et al., "FP8 Formats for Deep
 * Learning" (arXiv:2209.05433: e4m3, e5m2), the OCP Microscaling Formats spec v1.0 (e8m0, e3m2, e2m3,
 * e2m1) and Graphcore's fnuz proposal (Noune et al., arXiv:2206.02915: e4m3fnuz, e5m2fnuz).
 *
 * For every format: storage/exponent/mantissa widths, bias and specials class; the derived numbers
 * of fl_format.c (max finite, min normal, min subnormal, epsilon, the RNE overflow boundary and
 * whether the boundary itself overflows) against constants typed in here from the table; the exact
 * set of NaN and Inf encodings (every one of the 2^bits patterns classified, fl_is_nan/fl_is_inf
 * and fl_decode agreeing); "no -0" (fnuz) and "no zero" (e8m0); the encoder's behaviour exactly at,
 * just below and just above the overflow boundary; the MPFR view of each format (precision p = M + 1,
 * exponent range from the MPFR manual's mpfr_set_emin / mpfr_subnormalize conventions).
 * Names: every format and rounding name and every alias parses back, case-insensitively; near
 * misses are rejected and leave the output untouched; fl_format_names() lists each name once.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "fl_format.h"
#include "fl_round.h"
#include "round_mpfr.h"

/* One row of the format table (the sources above, plus the layout that fl_format.h documents). */
typedef struct {
    fl_format f;
    const char *name;
    int bits, ebits, mbits, bias, specials;
    double max, min_normal, min_sub, rne_boundary;
    int ties_overflow; /* does the boundary value itself round away from max under RNE? */
    uint32_t canonical_nan;
    /* Expected NaN / Inf encodings, as a predicate on the full code. */
    int (*is_nan)(uint32_t c);
    int (*is_inf)(uint32_t c);
} row;

static int none(uint32_t c) { (void)c; return 0; }
static int nan_fp32(uint32_t c) { return (c & 0x7FFFFFFFu) > 0x7F800000u; }
static int inf_fp32(uint32_t c) { return (c & 0x7FFFFFFFu) == 0x7F800000u; }
static int nan_bf16(uint32_t c) { return (c & 0x7FFFu) > 0x7F80u; }
static int inf_bf16(uint32_t c) { return (c & 0x7FFFu) == 0x7F80u; }
static int nan_fp16(uint32_t c) { return (c & 0x7FFFu) > 0x7C00u; }
static int inf_fp16(uint32_t c) { return (c & 0x7FFFu) == 0x7C00u; }
static int nan_e4m3(uint32_t c) { return c == 0x7Fu || c == 0xFFu; } /* S.1111.111 only */
static int nan_e5m2(uint32_t c) { return (c & 0x7Fu) >= 0x7Du; }      /* S.11111.{01,10,11} */
static int inf_e5m2(uint32_t c) { return c == 0x7Cu || c == 0xFCu; }  /* S.11111.00 */
static int nan_e8m0(uint32_t c) { return c == 0xFFu; }
static int nan_fnuz(uint32_t c) { return c == 0x80u; }

#define P2(k) ldexp(1.0, (k))

static const row rows[] = {
    { FL_FMT_FP32, "fp32", 32, 8, 23, 127, FL_SPEC_IEEE, (2 - P2(-23)) * P2(127), P2(-126), P2(-149),
      P2(128) - P2(103), 1, 0x7FFFFFFFu, nan_fp32, inf_fp32 },
    { FL_FMT_BF16, "bf16", 16, 8, 7, 127, FL_SPEC_IEEE, (2 - P2(-7)) * P2(127), P2(-126), P2(-133),
      P2(128) - P2(119), 1, 0x7FFFu, nan_bf16, inf_bf16 },
    { FL_FMT_FP16, "fp16", 16, 5, 10, 15, FL_SPEC_IEEE, 65504, P2(-14), P2(-24), 65520, 1, 0x7FFFu,
      nan_fp16, inf_fp16 },
    { FL_FMT_E4M3, "e4m3", 8, 4, 3, 7, FL_SPEC_FN, 448, P2(-6), P2(-9), 464, 0, 0x7Fu, nan_e4m3, none },
    { FL_FMT_E5M2, "e5m2", 8, 5, 2, 15, FL_SPEC_IEEE, 57344, P2(-14), P2(-16), 61440, 1, 0x7Fu,
      nan_e5m2, inf_e5m2 },
    /* e8m0: no zero, no subnormals, so the smallest value 2^-127 is both "min normal" and "min
       subnormal".  Neighbours of 2^127 are 2^126 and (virtually) 2^128; RNE's tie is 1.5 * 2^127 and
       goes to the even exponent code 0xFE, so the boundary itself does not overflow. */
    { FL_FMT_E8M0, "e8m0", 8, 8, 0, 127, FL_SPEC_E8M0, P2(127), P2(-127), P2(-127), 1.5 * P2(127), 0,
      0xFFu, nan_e8m0, none },
    /* MX element types: no Inf, no NaN.  The "boundary" is max + ulp/2; odd max mantissa, so the tie
       rounds away from max (and then saturates: these formats never overflow). */
    { FL_FMT_E3M2, "e3m2", 6, 3, 2, 3, FL_SPEC_NONE, 28, P2(-2), P2(-4), 30, 1, 0, none, none },
    { FL_FMT_E2M3, "e2m3", 6, 2, 3, 1, FL_SPEC_NONE, 7.5, 1, 0.125, 7.75, 1, 0, none, none },
    { FL_FMT_E2M1, "e2m1", 4, 2, 1, 1, FL_SPEC_NONE, 6, 1, 0.5, 7, 1, 0, none, none },
    { FL_FMT_E4M3FNUZ, "e4m3fnuz", 8, 4, 3, 8, FL_SPEC_FNUZ, 240, P2(-7), P2(-10), 248, 1, 0x80u,
      nan_fnuz, none },
    { FL_FMT_E5M2FNUZ, "e5m2fnuz", 8, 5, 2, 16, FL_SPEC_FNUZ, 57344, P2(-15), P2(-17), 61440, 1, 0x80u,
      nan_fnuz, none },
};
_Static_assert(sizeof rows / sizeof rows[0] == FL_FMT_COUNT, "one row per format");

static const char *const spec_names[] = { "IEEE", "FN", "FNUZ", "NONE", "E8M0" };

static void check_row(const row *r)
{
    const fl_format_desc *d = fl_format_get(r->f);
    const char *n = r->name;
    CHECK(strcmp(fl_format_name(r->f), n) == 0, "format %d is named %s, want %s", (int)r->f,
          fl_format_name(r->f), n);
    CHECK(d->bits == r->bits && d->ebits == r->ebits && d->mbits == r->mbits,
          "%s layout bits/ebits/mbits %d/%d/%d, want %d/%d/%d", n, d->bits, d->ebits, d->mbits, r->bits,
          r->ebits, r->mbits);
    CHECK(d->specials == FL_SPEC_E8M0 ? d->ebits == d->bits : 1 + d->ebits + d->mbits == d->bits,
          "%s: sign + exponent + mantissa != storage width", n);
    CHECK(d->bias == r->bias, "%s bias %d, want %d", n, d->bias, r->bias);
    CHECK(d->specials == r->specials, "%s specials %s, want %s", n, spec_names[d->specials],
          spec_names[r->specials]);
    CHECK(fl_format_max(r->f) == r->max, "%s max %a, want %a", n, fl_format_max(r->f), r->max);
    CHECK(fl_decode(r->f, d->max_mag) == r->max, "%s decode(max_mag 0x%x) = %a, want %a", n,
          (unsigned)d->max_mag, fl_decode(r->f, d->max_mag), r->max);
    CHECK(fl_format_min_normal(r->f) == r->min_normal, "%s min normal %a, want %a", n,
          fl_format_min_normal(r->f), r->min_normal);
    CHECK(fl_format_min_subnormal(r->f) == r->min_sub, "%s min subnormal %a, want %a", n,
          fl_format_min_subnormal(r->f), r->min_sub);
    CHECK(fl_format_epsilon(r->f) == ldexp(1.0, -r->mbits), "%s epsilon %a, want 2^-%d", n,
          fl_format_epsilon(r->f), r->mbits);
    const int sb = fl_format_storage_bits(r->f);
    CHECK(sb == (r->bits <= 8 ? 8 : r->bits), "%s storage bits %d", n, sb);
    int ties = -1;
    const double bnd = fl_format_rne_boundary(r->f, &ties);
    CHECK(bnd == r->rne_boundary, "%s RNE boundary %a, want %a", n, bnd, r->rne_boundary);
    CHECK(ties == r->ties_overflow, "%s boundary ties_overflow %d, want %d", n, ties, r->ties_overflow);
    CHECK(fl_format_rne_boundary(r->f, NULL) == bnd, "%s boundary with NULL ties pointer", n);
    if (r->specials != FL_SPEC_NONE)
        CHECK(d->nan == r->canonical_nan, "%s canonical NaN 0x%x, want 0x%x", n, (unsigned)d->nan,
              (unsigned)r->canonical_nan);

    /* Classify every encoding (fp32: the sign/exponent/top-mantissa patterns, low bits 0 and 1). */
    const uint64_t ncodes = r->bits == 32 ? (1ull << 16) : (1ull << r->bits);
    uint64_t n_nan = 0, n_inf = 0, n_negzero = 0, n_zero = 0;
    for (uint64_t i = 0; i < ncodes * (r->bits == 32 ? 2 : 1); i++) {
        const uint32_t c = r->bits == 32 ? (uint32_t)((i >> 1) << 16 | (i & 1)) : (uint32_t)i;
        const int want_nan = r->is_nan(c), want_inf = r->is_inf(c);
        CHECK(fl_is_nan(d, c) == want_nan, "%s code 0x%x: fl_is_nan %d, want %d", n, (unsigned)c,
              fl_is_nan(d, c), want_nan);
        CHECK(fl_is_inf(d, c) == want_inf, "%s code 0x%x: fl_is_inf %d, want %d", n, (unsigned)c,
              fl_is_inf(d, c), want_inf);
        const float v = fl_decode(r->f, c);
        CHECK((isnan(v) != 0) == want_nan, "%s decode(0x%x) = %a: NaN-ness should be %d", n, (unsigned)c,
              (double)v, want_nan);
        CHECK((isinf(v) != 0) == want_inf, "%s decode(0x%x) = %a: Inf-ness should be %d", n, (unsigned)c,
              (double)v, want_inf);
        if (!want_nan && !want_inf) {
            CHECK(fabs((double)v) <= r->max, "%s decode(0x%x) = %a beyond max", n, (unsigned)c, (double)v);
            CHECK(v == 0 || fabs((double)v) >= r->min_sub, "%s decode(0x%x) = %a below min subnormal", n,
                  (unsigned)c, (double)v);
            if (r->specials == FL_SPEC_E8M0)
                CHECK(v > 0, "e8m0 decode(0x%x) = %a: e8m0 values are positive", (unsigned)c, (double)v);
        }
        n_nan += want_nan;
        n_inf += want_inf;
        n_zero += v == 0;
        n_negzero += v == 0 && signbit(v);
    }
    /* Counts straight from the table: e4m3 has exactly 2 NaNs, e5m2 6 NaNs and 2 Infs, ... */
    static const struct { fl_format f; uint64_t nan, inf; } counts[] = {
        { FL_FMT_BF16, 2 * 127, 2 }, { FL_FMT_FP16, 2 * 1023, 2 }, { FL_FMT_E4M3, 2, 0 },
        { FL_FMT_E5M2, 6, 2 },       { FL_FMT_E8M0, 1, 0 },        { FL_FMT_E3M2, 0, 0 },
        { FL_FMT_E2M3, 0, 0 },       { FL_FMT_E2M1, 0, 0 },        { FL_FMT_E4M3FNUZ, 1, 0 },
        { FL_FMT_E5M2FNUZ, 1, 0 },
    };
    for (size_t k = 0; k < FL_ARRAY_LEN(counts); k++)
        if (counts[k].f == r->f) {
            CHECK(n_nan == counts[k].nan, "%s has %llu NaN encodings, want %llu", n,
                  (unsigned long long)n_nan, (unsigned long long)counts[k].nan);
            CHECK(n_inf == counts[k].inf, "%s has %llu Inf encodings, want %llu", n,
                  (unsigned long long)n_inf, (unsigned long long)counts[k].inf);
        }
    if (r->specials == FL_SPEC_E8M0)
        CHECK(n_zero == 0, "e8m0 has no zero, but %llu codes decode to 0", (unsigned long long)n_zero);
    else if (r->specials == FL_SPEC_FNUZ)
        CHECK(n_zero == 1 && n_negzero == 0, "%s: %llu zeros, %llu negative zeros; want one +0", n,
              (unsigned long long)n_zero, (unsigned long long)n_negzero);
    else
        CHECK(n_negzero == 1, "%s: %llu negative zeros, want 1", n, (unsigned long long)n_negzero);

    /* The encoder at the overflow boundary: below it RNE gives max, above it overflows, at it
       the tie goes by ties_overflow.  "Overflow" under NOSAT: Inf, or the NaN where there is no
       Inf; formats with neither (and SAT) give max. */
    const uint32_t maxc = d->max_mag;
    uint32_t ovf = maxc;
    if (r->specials == FL_SPEC_IEEE)
        ovf = maxc + 1;
    else if (r->specials == FL_SPEC_FN || r->specials == FL_SPEC_FNUZ || r->specials == FL_SPEC_E8M0)
        ovf = d->nan;
    const double below = nextafter(bnd, 0), above = nextafter(bnd, INFINITY);
    CHECK(fl_encode_f64(r->f, below, FL_RND_NE, FL_OVF_NOSATURATE, 0) == maxc,
          "%s rne nosat x=%.13a (just below the boundary) got=0x%x want=0x%x", n, below,
          (unsigned)fl_encode_f64(r->f, below, FL_RND_NE, FL_OVF_NOSATURATE, 0), (unsigned)maxc);
    CHECK(fl_encode_f64(r->f, above, FL_RND_NE, FL_OVF_NOSATURATE, 0) == ovf,
          "%s rne nosat x=%.13a (just above the boundary) got=0x%x want=0x%x", n, above,
          (unsigned)fl_encode_f64(r->f, above, FL_RND_NE, FL_OVF_NOSATURATE, 0), (unsigned)ovf);
    const uint32_t at = fl_encode_f64(r->f, bnd, FL_RND_NE, FL_OVF_NOSATURATE, 0);
    CHECK(at == (r->ties_overflow ? ovf : maxc), "%s rne nosat x=%.13a (the boundary) got=0x%x want=0x%x",
          n, bnd, (unsigned)at, (unsigned)(r->ties_overflow ? ovf : maxc));
    CHECK(fl_encode_f64(r->f, above, FL_RND_NE, FL_OVF_SATURATE, 0) == maxc,
          "%s rne sat x=%.13a got=0x%x want=0x%x", n, above,
          (unsigned)fl_encode_f64(r->f, above, FL_RND_NE, FL_OVF_SATURATE, 0), (unsigned)maxc);
    if (r->specials != FL_SPEC_E8M0) {
        const uint32_t sb1 = 1u << (r->bits - 1);
        /* negative overflow keeps its sign: -Inf (IEEE), -max (saturating-only formats), and in e4m3
           the NaN S.1111.111 = 0xFF (NVIDIA's __NV_NOSAT); fnuz has the one NaN 0x80 */
        const uint32_t nov = r->specials == FL_SPEC_FNUZ ? ovf : (sb1 | ovf);
        CHECK(fl_encode_f64(r->f, -above, FL_RND_NE, FL_OVF_NOSATURATE, 0) == nov,
              "%s rne nosat x=%.13a got=0x%x want=0x%x", n, -above,
              (unsigned)fl_encode_f64(r->f, -above, FL_RND_NE, FL_OVF_NOSATURATE, 0), (unsigned)nov);
        CHECK(fl_encode_f64(r->f, -above, FL_RND_NE, FL_OVF_SATURATE, 0) == (sb1 | maxc),
              "%s rne sat x=%.13a got=0x%x want=0x%x", n, -above,
              (unsigned)fl_encode_f64(r->f, -above, FL_RND_NE, FL_OVF_SATURATE, 0), (unsigned)(sb1 | maxc));
    }
    /* A float32 view of the same boundary where it is a float32 (all but fp32's own). */
    if ((double)(float)bnd == bnd) {
        const uint32_t atf = fl_encode_f32(r->f, (float)bnd, FL_RND_NE, FL_OVF_NOSATURATE, 0);
        CHECK(atf == at, "%s rne nosat f32 x=%a got=0x%x want=0x%x", n, bnd, (unsigned)atf, (unsigned)at);
    }

    /* MPFR's view (bf16, fp16, e5m2, e4m3): p = M + 1, and the exponent range
       in MPFR's convention x = m * 2^e, 0.5 <= m < 1: emin puts min_sub at 0.5 * 2^emin, emax puts
       the top finite binade at [2^(emax-1), 2^emax). */
    mpfr_prec_t p;
    mpfr_exp_t emin, emax;
    fl_mpfr_format_range(r->f, &p, &emin, &emax);
    CHECK(p == r->mbits + 1, "%s MPFR precision %ld, want %d", n, (long)p, r->mbits + 1);
    CHECK(ldexp(0.5, (int)emin) == r->min_sub, "%s MPFR emin %ld: 0.5*2^emin = %a, want min subnormal %a",
          n, (long)emin, ldexp(0.5, (int)emin), r->min_sub);
    CHECK(ldexp(0.5, (int)emax) <= r->max && r->max < ldexp(1.0, (int)emax),
          "%s MPFR emax %ld does not hold max %a in its top binade", n, (long)emax, r->max);
    static const struct { fl_format f; long p, emin, emax; } sec6[] = {
        { FL_FMT_BF16, 8, -132, 128 }, { FL_FMT_FP16, 11, -23, 16 },
        { FL_FMT_E5M2, 3, -15, 16 },   { FL_FMT_E4M3, 4, -8, 9 },
    };
    for (size_t k = 0; k < FL_ARRAY_LEN(sec6); k++)
        if (sec6[k].f == r->f)
            CHECK(p == sec6[k].p && emin == sec6[k].emin && emax == sec6[k].emax,
                  "%s MPFR p/emin/emax %ld/%ld/%ld, want %ld/%ld/%ld (MPFR view)", n, (long)p,
                  (long)emin, (long)emax, sec6[k].p, sec6[k].emin, sec6[k].emax);
    printf("  %-9s bias %3d  max %-14a min normal %-10a min sub %-10a RNE boundary %a (%s)\n", n, d->bias,
           r->max, r->min_normal, r->min_sub, bnd,
           !ties ? "tie -> max" : r->specials == FL_SPEC_NONE ? "tie rounds up, saturates" : "tie overflows");
}

static void check_parse(const char *s, fl_format want)
{
    fl_format got = FL_FMT_COUNT;
    CHECK(fl_format_parse(&got, s) == 0, "fl_format_parse(\"%s\") rejected it", s);
    CHECK(got == want, "fl_format_parse(\"%s\") = %s, want %s", s, fl_format_name(got), fl_format_name(want));
    /* Case-insensitive: the all-uppercase spelling parses to the same format. */
    char up[64];
    size_t i = 0;
    for (; s[i] && i + 1 < sizeof up; i++)
        up[i] = (char)(s[i] >= 'a' && s[i] <= 'z' ? s[i] - 'a' + 'A' : s[i]);
    up[i] = 0;
    got = FL_FMT_COUNT;
    CHECK(fl_format_parse(&got, up) == 0 && got == want, "fl_format_parse(\"%s\") != %s", up,
          fl_format_name(want));
}

static void check_names(void)
{
    /* Every canonical name round-trips, and fl_format_names() lists each exactly once, in order. */
    const char *list = fl_format_names();
    const char *pos = list;
    for (int i = 0; i < FL_FMT_COUNT; i++) {
        const char *nm = fl_format_name((fl_format)i);
        check_parse(nm, (fl_format)i);
        const size_t len = strlen(nm);
        CHECK(strncmp(pos, nm, len) == 0 && (pos[len] == ',' || pos[len] == 0),
              "fl_format_names() = \"%s\": expected \"%s\" at offset %d", list, nm, (int)(pos - list));
        pos += len;
        while (*pos == ',' || *pos == ' ')
            pos++;
    }
    CHECK(*pos == 0, "fl_format_names() has extra entries: \"%s\"", pos);
    CHECK(strcmp(fl_format_name(FL_FMT_COUNT), "?") == 0, "name of an out-of-range format");

    /* Aliases: NumPy/ml_dtypes, PyTorch, safetensors spellings. */
    static const struct { const char *s; fl_format f; } aliases[] = {
        { "float32", FL_FMT_FP32 },         { "f32", FL_FMT_FP32 },
        { "bfloat16", FL_FMT_BF16 },        { "float16", FL_FMT_FP16 },
        { "f16", FL_FMT_FP16 },             { "half", FL_FMT_FP16 },
        { "float8_e4m3fn", FL_FMT_E4M3 },   { "e4m3fn", FL_FMT_E4M3 },
        { "f8_e4m3", FL_FMT_E4M3 },         { "float8_e5m2", FL_FMT_E5M2 },
        { "f8_e5m2", FL_FMT_E5M2 },         { "float8_e8m0fnu", FL_FMT_E8M0 },
        { "float6_e3m2fn", FL_FMT_E3M2 },   { "float6_e2m3fn", FL_FMT_E2M3 },
        { "float4_e2m1fn", FL_FMT_E2M1 },   { "float8_e4m3fnuz", FL_FMT_E4M3FNUZ },
        { "float8_e5m2fnuz", FL_FMT_E5M2FNUZ },
    };
    for (size_t i = 0; i < FL_ARRAY_LEN(aliases); i++)
        check_parse(aliases[i].s, aliases[i].f);

    /* Near misses are rejected and leave *out alone. */
    static const char *const bad[] = { "", "e4m", "e4m3x", "e4m3 ", " e4m3", "fp8", "float8",
                                       "e4m3fnu", "float8_e4m3", "bf", "fp64", "e5m2fn", "int8" };
    for (size_t i = 0; i < FL_ARRAY_LEN(bad); i++) {
        fl_format got = FL_FMT_E2M1;
        CHECK(fl_format_parse(&got, bad[i]) == -1, "fl_format_parse(\"%s\") accepted it", bad[i]);
        CHECK(got == FL_FMT_E2M1, "fl_format_parse(\"%s\") wrote *out on failure", bad[i]);
    }

    /* Rounding modes. */
    static const char *const rnames[FL_RND_COUNT] = { "rne", "rtz", "up", "down", "sr" };
    for (int i = 0; i < FL_RND_COUNT; i++) {
        CHECK(strcmp(fl_rounding_name((fl_rounding)i), rnames[i]) == 0, "rounding %d named %s, want %s", i,
              fl_rounding_name((fl_rounding)i), rnames[i]);
        fl_rounding r = FL_RND_COUNT;
        CHECK(fl_rounding_parse(&r, rnames[i]) == 0 && r == (fl_rounding)i, "fl_rounding_parse(\"%s\")",
              rnames[i]);
    }
    static const struct { const char *s; fl_rounding r; } raliases[] = {
        { "ne", FL_RND_NE },       { "nearest", FL_RND_NE }, { "zero", FL_RND_ZERO },
        { "trunc", FL_RND_ZERO },  { "stochastic", FL_RND_SR }, { "RNE", FL_RND_NE },
        { "Down", FL_RND_DOWN },
    };
    for (size_t i = 0; i < FL_ARRAY_LEN(raliases); i++) {
        fl_rounding r = FL_RND_COUNT;
        CHECK(fl_rounding_parse(&r, raliases[i].s) == 0 && r == raliases[i].r, "fl_rounding_parse(\"%s\")",
              raliases[i].s);
    }
    static const char *const rbad[] = { "", "rn", "rnee", "round", "s" };
    for (size_t i = 0; i < FL_ARRAY_LEN(rbad); i++) {
        fl_rounding r = FL_RND_UP;
        CHECK(fl_rounding_parse(&r, rbad[i]) == -1 && r == FL_RND_UP, "fl_rounding_parse(\"%s\") accepted it",
              rbad[i]);
    }
    CHECK(strcmp(fl_rounding_name(FL_RND_COUNT), "?") == 0, "name of an out-of-range rounding mode");
}

int main(void)
{
    for (size_t i = 0; i < FL_ARRAY_LEN(rows); i++) {
        CHECK(rows[i].f == (fl_format)i, "test table out of enum order at %zu", i);
        check_row(&rows[i]);
    }
    check_names();
    PASS("test_formats");
}
