/* fl_format.c — names of formats and rounding modes, and the numbers derived from a descriptor. */
#include "fl_format.h"
#include "fl_round.h"

#include <assert.h>
#include <math.h>
#include <string.h>

static const char *const format_names[] = {
    "fp32", "bf16", "fp16", "e4m3", "e5m2", "e8m0", "e3m2", "e2m3", "e2m1", "e4m3fnuz", "e5m2fnuz",
};
static_assert(FL_ARRAY_LEN(format_names) == FL_FMT_COUNT, "format_names out of step with fl_format");

/* Another spelling of a name: the enum value it stands for. */
typedef struct {
    const char *alias;
    int value;
} name_alias;

/* Other spellings users type: NumPy/ml_dtypes, PyTorch and safetensors names. */
static const name_alias format_aliases[] = {
    { "float32", FL_FMT_FP32 },        { "f32", FL_FMT_FP32 },
    { "bfloat16", FL_FMT_BF16 },       { "float16", FL_FMT_FP16 },      { "f16", FL_FMT_FP16 },
    { "half", FL_FMT_FP16 },           { "float8_e4m3fn", FL_FMT_E4M3 }, { "e4m3fn", FL_FMT_E4M3 },
    { "f8_e4m3", FL_FMT_E4M3 },        { "float8_e5m2", FL_FMT_E5M2 },  { "f8_e5m2", FL_FMT_E5M2 },
    { "float8_e8m0fnu", FL_FMT_E8M0 }, { "float6_e3m2fn", FL_FMT_E3M2 }, { "float6_e2m3fn", FL_FMT_E2M3 },
    { "float4_e2m1fn", FL_FMT_E2M1 },  { "float8_e4m3fnuz", FL_FMT_E4M3FNUZ },
    { "float8_e5m2fnuz", FL_FMT_E5M2FNUZ },
};

static const char *const rounding_names[] = { "rne", "rtz", "up", "down", "sr" };
static_assert(FL_ARRAY_LEN(rounding_names) == FL_RND_COUNT, "rounding_names out of step with fl_rounding");

const char *fl_format_name(fl_format f) { return (unsigned)f < FL_FMT_COUNT ? format_names[f] : "?"; }
const char *fl_rounding_name(fl_rounding r) { return (unsigned)r < FL_RND_COUNT ? rounding_names[r] : "?"; }

/* The enum value of name (case-insensitive): its index in names[0..n), else its alias's value; -1 for
   neither. */
static int parse_name(const char *name, const char *const *names, int n, const name_alias *aliases,
                      size_t n_aliases)
{
    for (int i = 0; i < n; i++)
        if (strcasecmp(name, names[i]) == 0)
            return i;
    for (size_t i = 0; i < n_aliases; i++)
        if (strcasecmp(name, aliases[i].alias) == 0)
            return aliases[i].value;
    return -1;
}

int fl_format_parse(fl_format *out, const char *name)
{
    const int v = parse_name(name, format_names, FL_FMT_COUNT, format_aliases, FL_ARRAY_LEN(format_aliases));
    if (v < 0)
        return -1;
    *out = (fl_format)v;
    return 0;
}

int fl_rounding_parse(fl_rounding *out, const char *name)
{
    static const name_alias aliases[] = {
        { "ne", FL_RND_NE }, { "nearest", FL_RND_NE }, { "zero", FL_RND_ZERO }, { "trunc", FL_RND_ZERO },
        { "stochastic", FL_RND_SR },
    };
    const int v = parse_name(name, rounding_names, FL_RND_COUNT, aliases, FL_ARRAY_LEN(aliases));
    if (v < 0)
        return -1;
    *out = (fl_rounding)v;
    return 0;
}

const char *fl_format_names(void)
{
    return "fp32, bf16, fp16, e4m3, e5m2, e8m0, e3m2, e2m3, e2m1, e4m3fnuz, e5m2fnuz";
}

int fl_format_storage_bits(fl_format f)
{
    const int b = fl_format_get(f)->bits;
    return b <= 8 ? 8 : b;
}

double fl_format_max(fl_format f) { return fl_decode(f, fl_format_get(f)->max_mag); }

double fl_format_min_normal(fl_format f)
{
    const fl_format_desc *d = fl_format_get(f);
    return d->specials == FL_SPEC_E8M0 ? fl_decode(f, 0) : fl_decode(f, 1u << d->mbits);
}

double fl_format_min_subnormal(fl_format f)
{
    const fl_format_desc *d = fl_format_get(f);
    return d->specials == FL_SPEC_E8M0 ? fl_decode(f, 0) : fl_decode(f, 1);
}

double fl_format_epsilon(fl_format f) { return ldexp(1.0, -fl_format_get(f)->mbits); }

double fl_format_rne_boundary(fl_format f, int *ties_overflow)
{
    const fl_format_desc *d = fl_format_get(f);
    const double max = fl_format_max(f);
    int e;
    frexp(max, &e); /* max = m * 2^e, m in [0.5, 1): its binade is [2^(e-1), 2^e) */
    const double half_ulp = ldexp(1.0, e - 1 - d->mbits - 1);
    if (ties_overflow) {
        /* The tie goes to max when max's code is even (for E8M0, M = 0: the exponent code). */
        *ties_overflow = (d->max_mag & 1u) != 0;
    }
    return max + half_ulp;
}
