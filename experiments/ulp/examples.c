/* examples.c — the plain-C examples `fp8lab ulp --impl NAME` scores next to the kernels' twins: how
 * common float shortcuts for activations (glibc expf, tanhf, erff) measure against the exact
 * functions, libm's own binary32 building blocks (expf, expm1f, erff, log1pf, tanhf) against the
 * elementary references, fp8lab's own erff and the GELU on it (kernels/erff.h, which also runs on a
 * device), and the registry lookup over both (ulp_impls.h). */
#include "erff.h"
#include "fl_libm.h"
#include "ulp_impls.h"

#include <math.h>
#include <string.h>

#include "fl_round.h"

/* ---- the formulas, each written once ------------------------------------------------------------- */

static float silu_naive(float x) { return x / (1.0f + expf(-x)); }
static float sigmoid_naive(float x) { return 1.0f / (1.0f + expf(-x)); }
static float sigmoid_via_tanhf(float x) { return 0.5f + 0.5f * tanhf(x * 0.5f); }
static float tanh_glibc(float x) { return tanhf(x); }
static float exp_glibc(float x) { return expf(x); }
static float expm1_glibc(float x) { return expm1f(x); }
static float erf_glibc(float x) { return erff(x); }
static float log1p_glibc(float x) { return log1pf(x); }
static float gelu_tanh(float x)
{
    const float k = 0.7978845608028654f; /* sqrt(2 / pi) */
    return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
}

/* ---- running them on encodings ------------------------------------------------------------------- */

typedef float (*unary_f32)(float);

/* binary32 in and out: the result's bits as the float computation leaves them. */
static void run_binary32(uint32_t *out, const uint32_t *in, size_t n, unary_f32 f)
{
    for (size_t i = 0; i < n; i++)
        out[i] = fl_f32_bits(f(fl_f32_from_bits(in[i])));
}

/* Narrow formats: the float computation on the decoded input, rounded once (RNE) into the output
   format, saturating for 8-bit outputs (TransformerEngine's cast), IEEE overflow otherwise. */
static void run_rounded(uint32_t *out, const uint32_t *in, size_t n, fl_format fin, fl_format fout, unary_f32 f)
{
    const fl_format_desc *di = fl_format_get(fin), *dout = fl_format_get(fout);
    const fl_overflow ovf = dout->bits <= 8 ? FL_OVF_SATURATE : FL_OVF_NOSATURATE;
    for (size_t i = 0; i < n; i++)
        out[i] = fl_encode_f32_bits(dout, fl_f32_bits(f(fl_decode_f32(di, in[i]))), FL_RND_NE, ovf, 0);
}

/* One run function per entry (the registry's signature carries no entry pointer). */
#define BINARY32_RUN(fn, F)                                                                        \
    static void fn(uint32_t *out, const uint32_t *const *in, size_t n, size_t row_len)             \
    {                                                                                              \
        (void)row_len;                                                                             \
        run_binary32(out, in[0], n, F);                                                            \
    }
#define ROUNDED_RUN(fn, FIN, FOUT, F)                                                              \
    static void fn(uint32_t *out, const uint32_t *const *in, size_t n, size_t row_len)             \
    {                                                                                              \
        (void)row_len;                                                                             \
        run_rounded(out, in[0], n, FIN, FOUT, F);                                                  \
    }

#define B FL_FMT_BF16
#define E4 FL_FMT_E4M3
#define E5 FL_FMT_E5M2
#define F32 FL_FMT_FP32

ROUNDED_RUN(run_silu_f32_naive, F32, F32, silu_naive)
ROUNDED_RUN(run_gelu_tanh_as_gelu_bf16, B, B, gelu_tanh)
ROUNDED_RUN(run_sigmoid_via_tanhf_f32, F32, F32, sigmoid_via_tanhf)
BINARY32_RUN(run_sigmoid_f32_naive, sigmoid_naive)
BINARY32_RUN(run_tanhf_f32, tanh_glibc)
BINARY32_RUN(run_expf_f32, exp_glibc)
BINARY32_RUN(run_expm1f_f32, expm1_glibc)
BINARY32_RUN(run_erff_f32, erf_glibc)
BINARY32_RUN(run_log1pf_f32, log1p_glibc)
BINARY32_RUN(run_gelu_erff_f32, fl_gelu_erff)
BINARY32_RUN(run_erf_fp8lab_f32, fl_erff)
BINARY32_RUN(run_gelu_fp8lab_f32, fl_gelu_f32)
BINARY32_RUN(run_gelu_tanh_f32, gelu_tanh)
ROUNDED_RUN(run_silu_f32_e4m3, F32, E4, silu_naive)
ROUNDED_RUN(run_silu_f32_e5m2, F32, E5, silu_naive)
ROUNDED_RUN(run_gelu_tanh_f32_e4m3, F32, E4, gelu_tanh)

/* ---- the table ----------------------------------------------------------------------------------- */

#define IN1(f) { f, f, f }

/* The first LISTED_WITH_TWINS entries are listed under the kernels' twins by `ulp --list` (they were
   scored in the twins' published table); the rest under "plain C examples". */
#define LISTED_WITH_TWINS 3

const fl_twin fl_ulp_examples[] = {
    { "silu_f32_naive", "silu", "", 0, NULL, 1, IN1(F32), F32, 0, run_silu_f32_naive, "x / (1 + expf(-x)) with glibc expf, fp32" },
    { "gelu_tanh_as_gelu_bf16", "gelu", "", 0, NULL, 1, IN1(B), B, 0, run_gelu_tanh_as_gelu_bf16, "the tanh approximation (fp32, glibc tanhf) scored against exact gelu, bf16" },
    { "sigmoid_via_tanhf_f32", "sigmoid", "", 0, NULL, 1, IN1(F32), F32, 0, run_sigmoid_via_tanhf_f32, "0.5 + 0.5 tanhf(x/2) with glibc tanhf, fp32" },
    { "sigmoid_f32_naive", "sigmoid", "", 0, NULL, 1, IN1(F32), F32, 0, run_sigmoid_f32_naive, "1 / (1 + expf(-x))" },
    { "tanhf_f32", "tanh", "", 0, NULL, 1, IN1(F32), F32, 0, run_tanhf_f32, "glibc tanhf" },
    { "expf_f32", "exp", "", 0, NULL, 1, IN1(F32), F32, 0, run_expf_f32, "glibc expf" },
    { "expm1f_f32", "expm1", "", 0, NULL, 1, IN1(F32), F32, 0, run_expm1f_f32, "glibc expm1f" },
    { "erff_f32", "erf", "", 0, NULL, 1, IN1(F32), F32, 0, run_erff_f32, "glibc erff" },
    { "log1pf_f32", "log1p", "", 0, NULL, 1, IN1(F32), F32, 0, run_log1pf_f32, "glibc log1pf" },
    { "gelu_erff_f32", "gelu", "", 0, NULL, 1, IN1(F32), F32, 0, run_gelu_erff_f32, "0.5 x (1 + erff(x / sqrt 2)), glibc erff" },
    { "erf_fp8lab_f32", "erf", "", 0, NULL, 1, IN1(F32), F32, 0, run_erf_fp8lab_f32,
      "fl_erff (kernels/erff.h), correctly rounded: the GELU of the harness and of the GPU step" },
    { "gelu_fp8lab_f32", "gelu", "", 0, NULL, 1, IN1(F32), F32, 0, run_gelu_fp8lab_f32,
      "0.5 x (1 + fl_erff(x / sqrt 2)): the harness's and the GPU step's GELU" },
    { "gelu_tanh_f32", "gelu_tanh", "", 0, NULL, 1, IN1(F32), F32, 0, run_gelu_tanh_f32,
      "0.5 x (1 + tanhf(sqrt(2/pi) (x + 0.044715 x^3))) in float" },
    { "gelu_tanh_as_gelu_f32", "gelu", "", 0, NULL, 1, IN1(F32), F32, 0, run_gelu_tanh_f32,
      "the tanh approximation judged against exact GELU" },
    { "silu_f32_e4m3", "silu", "", 0, NULL, 1, IN1(F32), E4, 0, run_silu_f32_e4m3, "float silu, rounded to e4m3 (saturating)" },
    { "silu_f32_e5m2", "silu", "", 0, NULL, 1, IN1(F32), E5, 0, run_silu_f32_e5m2, "float silu, rounded to e5m2 (saturating)" },
    { "gelu_tanh_f32_e4m3", "gelu_tanh", "", 0, NULL, 1, IN1(F32), E4, 0, run_gelu_tanh_f32_e4m3, "float gelu_tanh, rounded to e4m3" },
    { "gelu_tanh_as_gelu_f32_e4m3", "gelu", "", 0, NULL, 1, IN1(F32), E4, 0, run_gelu_tanh_f32_e4m3,
      "float gelu_tanh rounded to e4m3, judged against exact GELU" },
};

const size_t fl_ulp_example_count = FL_ARRAY_LEN(fl_ulp_examples);

/* ---- the registry -------------------------------------------------------------------------------- */

const fl_twin *fl_ulp_impl_find(const char *name)
{
    const fl_twin *t = fl_twin_find(name);
    for (size_t i = 0; !t && name && i < fl_ulp_example_count; i++)
        if (!strcmp(fl_ulp_examples[i].name, name))
            t = &fl_ulp_examples[i];
    return t;
}

static void list_entry(FILE *out, const fl_twin *t)
{
    fprintf(out, "  %-28s %-13s %s -> %s   %s\n", t->name, t->ref_fn, fl_format_name(t->in_fmt[0]),
            fl_format_name(t->out_fmt), t->summary);
}

void fl_ulp_impl_list(FILE *out)
{
    fprintf(out, "the kernels' CPU twins (kernels/twins.h):\n");
    for (size_t i = 0; i < fl_twin_count; i++)
        list_entry(out, &fl_twins[i]);
    for (size_t i = 0; i < LISTED_WITH_TWINS; i++)
        list_entry(out, &fl_ulp_examples[i]);
    fprintf(out, "plain C examples (--impl NAME):\n");
    for (size_t i = LISTED_WITH_TWINS; i < fl_ulp_example_count; i++)
        list_entry(out, &fl_ulp_examples[i]);
    fprintf(out, "fast path (double-double, proven bounds): silu sigmoid tanh gelu gelu_tanh swiglu\n");
}
