/* cmd_ulp.c — `fp8lab ulp`: validate a kernel's outputs against the MPFR reference, exactly.
 *
 * Two sources of outputs: arrays written by anything (--inputs/--outputs, .npy or .safetensors), or
 * one of fp8lab's own implementations swept over its input space (--impl with --exhaustive, --range
 * or --sample).  Every output is judged exactly (experiments/ulp/ULP.md): the correctly rounded
 * encoding, the class of the exact value, and the error in ulps of the exact value's binade, rounded
 * to nearest on the 2^-20 grid.  Judging first tries the fast path (ulp_fast.h: a proven
 * double-double enclosure, for silu/sigmoid/tanh/gelu/gelu_tanh with binary32-representable inputs)
 * and asks MPFR only when the enclosure does not decide; --mpfr-only asks MPFR always.  Both give
 * the same report, bit for bit.  The per-thread reports merge exactly (ulp_report.h), so the report
 * does not depend on the thread count, the chunking, or how --range shards are merged (--merge).
 */
#include "cli/cli.h"
#include "fl_round.h"
#include "npy.h"
#include "ref.h"
#include "round_mpfr.h"
#include "safetensors.h"
#include "ulp_fast.h"
#include "ulp_report.h"
#if __has_include("twins.h")
#include "twins.h"
#endif

#include <jansson.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const help =
    "usage: fp8lab ulp FN --format FMT --inputs X [--inputs U ...] --outputs Y [options]\n"
    "       fp8lab ulp [FN] [--format FMT] --impl NAME (--exhaustive | --range LO:HI | --sample N [--seed S])\n"
    "       fp8lab ulp [FN] --impl ROWWISE (--sample ROWS | --range LO:HI) [--seed S] [--row-len H] [--dist D]\n"
    "       fp8lab ulp --merge A.json B.json ... [--json] [--max-ulp T]\n"
    "       fp8lab ulp --list\n"
    "\n"
    "Validates outputs of FN (a reference function: silu, gelu, gelu_tanh, sigmoid, tanh, swiglu, ...)\n"
    "in format FMT against the exact, MPFR-certified values.  Error in ulps = |y - f(x)| / ulp(f(x)),\n"
    "f(x) exact, ulp of its binade in FMT (Zimmermann et al.), reported to the nearest 2^-20 ulp.\n"
    "\n"
    "Arrays (elementwise: same element count; row-wise functions: same shape, rows on the last axis):\n"
    "  --inputs FILE     one per input of FN, in order (x; or g,u for swiglu ...): .npy (float32,\n"
    "                    float16, float64, or uint8/uint16/uint32 bit patterns with --input-format) or\n"
    "                    .safetensors (F32, F16, BF16, F8_E4M3, F8_E5M2, F64 tensors)\n"
    "  --outputs FILE    the outputs: float arrays holding values exactly representable in FMT, bit\n"
    "                    patterns of FMT (--output-format FMT), or a safetensors tensor of FMT's dtype\n"
    "  --tensor NAME     the tensor of the preceding safetensors --inputs/--outputs file (optional when\n"
    "                    the file holds one tensor)\n"
    "  --input-format F  the inputs are bit patterns of F;  --output-format F: the outputs are (= FMT)\n"
    "  --range LO:HI     only elements LO <= i < HI (shards of a big file)\n"
    "  --index-base B    the arrays hold elements B, B+1, ... of a larger set written in pieces: indices\n"
    "                    and shards are reported from B, so that the pieces' reports --merge\n"
    "Built-in implementations (--list shows them):\n"
    "  --impl NAME       FN and FMT default to the implementation's; inputs are every encoding of its\n"
    "                    input format (pairs for two inputs of <= 16 bits), indexed by their bit patterns\n"
    "  --exhaustive      all of them;  --range LO:HI  indices LO <= i < HI (hex or decimal; for sharding)\n"
    "  --sample N        N indices drawn uniformly (counter-based generator, --seed S, default 0)\n"
    "Row-wise implementations (polynorm*): seeded rows of H elements, every output judged against the\n"
    "MPFR row reference (~H MPFR operations per output: a row of 4096 takes ~20-40 s of one core):\n"
    "  --sample ROWS     rows 0 .. ROWS-1 of the stream fixed by --seed S (default 0), --row-len, --dist;\n"
    "                    --range LO:HI  rows LO .. HI-1 of it (shards; --range R:R+1 re-checks row R)\n"
    "  --row-len H       elements per row (default 4096, a hidden size; 1 .. 2^24-1)\n"
    "  --dist D          normal: x ~ N(0,1); heavy: Student-t (3 d.o.f.), x100 in ~1/512 of the columns\n"
    "                    (outlier channels, the same in every row); cancel: 1/8 of the columns placed\n"
    "                    where the row's terms a_i x^i / D_i cancel most, two columns tuned to put\n"
    "                    the row's zero on a representable x (VJPs: dy placed where dx nearly cancels).\n"
    "                    Values rounded (RNE) to the input format; dy ~ N(0,1) otherwise.\n"
    "                    Generator: experiments/ulp/ULP.md section 6.  Default normal.\n"
    "  --save PREFIX     also write the rows judged: PREFIXx.npy, PREFIXdy.npy (VJPs), PREFIXy.npy, bit\n"
    "                    patterns (uint8/uint16) of shape (rows, H), for --inputs/--outputs elsewhere\n"
    "Options:\n"
    "  --param NAME=V    a parameter of FN (alpha, beta, order, a0..a4, eps, tau)\n"
    "  --wrt NAME        the outputs are the partial derivative of FN w.r.t. input NAME (x; g or u\n"
    "                    for swiglu): e.g. a backward kernel run with an upstream gradient of 1\n"
    "  --saturate / --no-saturate   overflow policy of the reference (default: saturate for 8-bit and\n"
    "                    narrower FMT, IEEE overflow for fp32/bf16/fp16)\n"
    "  --max-ulp T       gate: exit 3 if the largest error exceeds T or any output's class (NaN, Inf,\n"
    "                    saturation) differs from the reference's\n"
    "  --json            one JSON object on stdout (merge shards with --merge)\n"
    "  --mpfr-only       no fast path: MPFR for every output (same report, much slower)\n"
    "  --threads N       OpenMP threads (default: OMP_NUM_THREADS or all cores)\n"
    "  --no-progress     no progress bar (it is shown on a terminal for long runs)\n"
    "Exit status: 0 done (gate passed), 1 failure (unreadable input), 2 bad usage, 3 gate failed.\n";

/* ---- inputs and outputs as bit patterns --------------------------------------------------------- */

#define KIND_F64 (-1) /* binary64 values; otherwise an fl_format whose encodings the bits are */

typedef struct {
    const char *path;
    const char *tensor;  /* safetensors: the tensor's name, or NULL */
    int is_st;
    fl_npy_reader *npy;
    fl_array hdr;
    fl_st_file *st;
    const fl_st_tensor *t;
    uint64_t pos;        /* elements handed out */
    uint64_t count;
    int ndim;
    int64_t shape[FL_NPY_MAXDIM];
    int kind;            /* KIND_F64 or an fl_format */
    int value_dtype;     /* npy: 1 if the array holds values (float32/16/64) rather than bit patterns */
    void *buf;
} source;

static int open_source(source *s, const char *cmd, int pattern_fmt, char *err, size_t errlen)
{
    const size_t n = strlen(s->path);
    s->is_st = n > 12 && !strcmp(s->path + n - 12, ".safetensors");
    if (s->is_st) {
        s->st = fl_st_open(s->path, err, errlen);
        if (!s->st)
            return -1;
        if (!s->tensor) {
            if (fl_st_count(s->st) != 1) {
                snprintf(err, errlen, "%s: holds %zu tensors; name one with --tensor NAME", s->path, fl_st_count(s->st));
                return -1;
            }
            s->t = fl_st_tensor_at(s->st, 0);
        } else if (!(s->t = fl_st_find(s->st, s->tensor))) {
            snprintf(err, errlen, "%s: no tensor named '%s'", s->path, s->tensor);
            return -1;
        }
        const int f = fl_st_format(s->t->dtype);
        if (f < 0 && s->t->dtype != FL_ST_F64) {
            snprintf(err, errlen, "%s: tensor '%s' has dtype %s; %s reads F32, F16, BF16, F8_E4M3, F8_E5M2, F64",
                     s->path, s->t->name, fl_st_dtype_name(s->t->dtype), cmd);
            return -1;
        }
        s->kind = f < 0 ? KIND_F64 : f;
        s->count = s->t->count;
        s->ndim = s->t->ndim;
        memcpy(s->shape, s->t->shape, sizeof s->shape);
        return 0;
    }
    s->npy = fl_npy_reader_open(s->path, &s->hdr, err, errlen);
    if (!s->npy)
        return -1;
    s->count = s->hdr.count;
    s->ndim = s->hdr.ndim;
    memcpy(s->shape, s->hdr.shape, sizeof s->shape);
    const fl_dtype dt = s->hdr.dtype;
    if (pattern_fmt >= 0 && (dt == FL_DT_U8 || dt == FL_DT_U16 || dt == FL_DT_U32)) {
        const int bits = fl_format_storage_bits((fl_format)pattern_fmt);
        if ((int)fl_dtype_size(dt) * 8 != bits) {
            snprintf(err, errlen, "%s: dtype %s cannot hold %s bit patterns (expected uint%d)", s->path,
                     fl_dtype_name(dt), fl_format_name((fl_format)pattern_fmt), bits);
            return -1;
        }
        s->kind = pattern_fmt;
        return 0;
    }
    if (dt == FL_DT_F32 || dt == FL_DT_F16 || dt == FL_DT_F64) {
        s->kind = dt == FL_DT_F32 ? FL_FMT_FP32 : dt == FL_DT_F16 ? FL_FMT_FP16 : KIND_F64;
        s->value_dtype = 1;
        return 0;
    }
    snprintf(err, errlen, "%s: dtype %s holds neither float values nor bit patterns of the format (--input-format /"
             " --output-format name it)", s->path, fl_dtype_name(dt));
    return -1;
}

/* Reads n elements as 64-bit patterns of s->kind.  0 or -1 with err. */
static int read_source(source *s, uint64_t *bits, size_t n, char *err, size_t errlen)
{
    if (s->is_st) {
        const size_t es = fl_st_dtype_size(s->t->dtype);
        const unsigned char *p = (const unsigned char *)s->t->data + s->pos * es;
        for (size_t i = 0; i < n; i++) {
            uint64_t v = 0;
            for (size_t b = 0; b < es; b++)
                v |= (uint64_t)p[i * es + b] << (8 * b); /* little-endian */
            bits[i] = v;
        }
        s->pos += n;
        return 0;
    }
    const size_t es = fl_dtype_size(s->hdr.dtype);
    if (!s->buf)
        s->buf = malloc(((size_t)1 << 20) * 8);
    size_t done = 0;
    while (done < n) {
        const size_t want = n - done < ((size_t)1 << 20) ? n - done : ((size_t)1 << 20);
        const long long got = fl_npy_reader_read(s->npy, s->buf, want, err, errlen);
        if (got <= 0) {
            if (got == 0)
                snprintf(err, errlen, "%s: fewer elements than its header promises", s->path);
            return -1;
        }
        for (size_t i = 0; i < (size_t)got; i++) {
            const unsigned char *p = (const unsigned char *)s->buf + i * es;
            bits[done + i] = es == 1 ? *p : es == 2 ? *(const uint16_t *)p : es == 4 ? *(const uint32_t *)p
                                                                                     : *(const uint64_t *)p;
        }
        done += (size_t)got;
    }
    s->pos += n;
    return 0;
}

static void close_source(source *s)
{
    if (s->npy)
        fl_npy_reader_close(s->npy);
    fl_st_close(s->st);
    free(s->buf);
}

/* The value of input bits of a kind, as a double (exact). */
static double bits_value(int kind, uint64_t b)
{
    return kind == KIND_F64 ? fl_f64_from_bits(b) : (double)fl_decode(kind, (uint32_t)b);
}

static const char *kind_name(int kind) { return kind == KIND_F64 ? "f64" : fl_format_name((fl_format)kind); }

/* ---- built-in implementations ------------------------------------------------------------------- */

typedef void (*impl_run)(uint32_t *out, const uint32_t *const *in, size_t n);

typedef void (*twin_run)(uint32_t *out, const uint32_t *const *in, size_t n, size_t row_len);

typedef struct {
    const char *name;
    const char *fn;        /* reference function */
    int n_inputs;
    fl_format in_fmt[3];
    fl_format out_fmt;
    impl_run run;          /* the examples below */
    const char *what;
    const char *params;    /* kernel twins: reference parameters "name=value,..." */
    const char *wrt;       /* kernel twins: derivative w.r.t. this input, or NULL */
    int rowwise;
    twin_run trun;         /* kernel twins */
} impl_desc;

static float as_f(uint32_t b) { return fl_f32_from_bits(b); }

#define DEFINE_F32_IMPL(NAME, EXPR)                                                                 \
    static void NAME(uint32_t *out, const uint32_t *const *in, size_t n)                            \
    {                                                                                               \
        for (size_t i = 0; i < n; i++) {                                                            \
            const float x = as_f(in[0][i]);                                                         \
            out[i] = fl_f32_bits(EXPR);                                                             \
        }                                                                                           \
    }

DEFINE_F32_IMPL(run_sigmoid_f32, 1.0f / (1.0f + expf(-x)))
DEFINE_F32_IMPL(run_tanhf_f32, tanhf(x))
DEFINE_F32_IMPL(run_gelu_erff_f32, 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)))

static float gelu_tanh_f(float x) { return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x))); }
static float silu_f(float x) { return x / (1.0f + expf(-x)); }
DEFINE_F32_IMPL(run_gelu_tanh_f32, gelu_tanh_f(x))

/* Narrow formats: the float computation on the decoded input, rounded once (RNE) into the output
   format, saturating for 8-bit outputs (TransformerEngine's cast), IEEE overflow for bf16. */
#define DEFINE_NARROW_IMPL(NAME, F, IN, OUT)                                                        \
    static void NAME(uint32_t *out, const uint32_t *const *in, size_t n)                            \
    {                                                                                               \
        const fl_overflow ovf = fl_format_get(OUT)->bits <= 8 ? FL_OVF_SATURATE : FL_OVF_NOSATURATE; \
        for (size_t i = 0; i < n; i++)                                                              \
            out[i] = fl_encode_f32(OUT, F(fl_decode(IN, in[0][i])), FL_RND_NE, ovf, 0);             \
    }

DEFINE_NARROW_IMPL(run_silu_f32_e4m3, silu_f, FL_FMT_FP32, FL_FMT_E4M3)
DEFINE_NARROW_IMPL(run_silu_f32_e5m2, silu_f, FL_FMT_FP32, FL_FMT_E5M2)
DEFINE_NARROW_IMPL(run_gelu_tanh_f32_e4m3, gelu_tanh_f, FL_FMT_FP32, FL_FMT_E4M3)
DEFINE_NARROW_IMPL(run_gelu_tanh_as_gelu_f32_e4m3, gelu_tanh_f, FL_FMT_FP32, FL_FMT_E4M3)


static const impl_desc impls[] = {
    { "sigmoid_f32_naive", "sigmoid", 1, { FL_FMT_FP32 }, FL_FMT_FP32, run_sigmoid_f32, "1 / (1 + expf(-x))", NULL, NULL, 0, NULL },
    { "tanhf_f32", "tanh", 1, { FL_FMT_FP32 }, FL_FMT_FP32, run_tanhf_f32, "glibc tanhf", NULL, NULL, 0, NULL },
    { "gelu_erff_f32", "gelu", 1, { FL_FMT_FP32 }, FL_FMT_FP32, run_gelu_erff_f32,
      "0.5 x (1 + erff(x / sqrt 2)), glibc erff", NULL, NULL, 0, NULL },
    { "gelu_tanh_f32", "gelu_tanh", 1, { FL_FMT_FP32 }, FL_FMT_FP32, run_gelu_tanh_f32,
      "0.5 x (1 + tanhf(sqrt(2/pi) (x + 0.044715 x^3))) in float", NULL, NULL, 0, NULL },
    { "gelu_tanh_as_gelu_f32", "gelu", 1, { FL_FMT_FP32 }, FL_FMT_FP32, run_gelu_tanh_f32,
      "the tanh approximation judged against exact GELU", NULL, NULL, 0, NULL },
    { "silu_f32_e4m3", "silu", 1, { FL_FMT_FP32 }, FL_FMT_E4M3, run_silu_f32_e4m3,
      "float silu, rounded to e4m3 (saturating)", NULL, NULL, 0, NULL },
    { "silu_f32_e5m2", "silu", 1, { FL_FMT_FP32 }, FL_FMT_E5M2, run_silu_f32_e5m2,
      "float silu, rounded to e5m2 (saturating)", NULL, NULL, 0, NULL },
    { "gelu_tanh_f32_e4m3", "gelu_tanh", 1, { FL_FMT_FP32 }, FL_FMT_E4M3, run_gelu_tanh_f32_e4m3,
      "float gelu_tanh, rounded to e4m3", NULL, NULL, 0, NULL },
    { "gelu_tanh_as_gelu_f32_e4m3", "gelu", 1, { FL_FMT_FP32 }, FL_FMT_E4M3, run_gelu_tanh_as_gelu_f32_e4m3,
      "float gelu_tanh rounded to e4m3, judged against exact GELU", NULL, NULL, 0, NULL },
};

/* The kernels' CPU twins (kernels/twins.h) first, then the examples above. */
static const impl_desc *impl_lookup(const char *name)
{
#if __has_include("twins.h")
    static impl_desc tw;
    const fl_twin *t = fl_twin_find(name);
    if (t) {
        memset(&tw, 0, sizeof tw);
        tw.name = t->name;
        tw.fn = t->ref_fn;
        tw.n_inputs = t->n_inputs;
        for (int k = 0; k < t->n_inputs && k < 3; k++)
            tw.in_fmt[k] = t->in_fmt[k];
        tw.out_fmt = t->out_fmt;
        tw.what = t->summary;
        tw.params = t->ref_params;
        tw.wrt = t->derivative ? t->ref_wrt : NULL;
        tw.rowwise = t->rowwise;
        tw.trun = t->run;
        return &tw;
    }
#endif
    for (size_t i = 0; i < FL_ARRAY_LEN(impls); i++)
        if (!strcmp(impls[i].name, name))
            return &impls[i];
    return NULL;
}

/* ---- the job ------------------------------------------------------------------------------------- */

typedef struct {
    const fl_ref_fn *fn;
    const fl_ref_evaluator *ev;
    fl_ref_params params;
    int n_inputs;
    int in_kind[FL_ULP_MAX_INPUTS];
    fl_format fmt;
    fl_overflow ovf;
    const fl_fast_fn *fast; /* NULL: MPFR only */
    fl_fast_fmt ff;
    long row_len;           /* row-wise functions */
} job;

/* Per-thread state. */
typedef struct {
    mpfr_t x[FL_ULP_MAX_INPUTS], a, lo, hi, t, yv, f;
    mpfr_t *rows[FL_ULP_MAX_INPUTS]; /* row-wise: one row per input */
    long rows_len;
    fl_ulp_report rep;
    uint64_t n_fast, n_mpfr, n_fail;
    char pad[64];
} tctx;

static void tctx_init(tctx *c, const job *j)
{
    memset(c, 0, sizeof *c);
    for (int k = 0; k < FL_ULP_MAX_INPUTS; k++)
        mpfr_init2(c->x[k], 64);
    mpfr_inits2(128, c->a, c->lo, c->hi, c->f, (mpfr_ptr)0);
    mpfr_init2(c->t, 256);
    mpfr_init2(c->yv, 64);
    fl_ulp_report_init(&c->rep);
    if (j->row_len > 0) {
        c->rows_len = j->row_len;
        for (int k = 0; k < j->n_inputs; k++) {
            c->rows[k] = malloc((size_t)j->row_len * sizeof(mpfr_t));
            for (long i = 0; i < j->row_len; i++)
                mpfr_init2(c->rows[k][i], 64);
        }
    }
}

static void tctx_clear(tctx *c, const job *j)
{
    for (int k = 0; k < FL_ULP_MAX_INPUTS; k++)
        mpfr_clear(c->x[k]);
    mpfr_clears(c->a, c->lo, c->hi, c->t, c->yv, c->f, (mpfr_ptr)0);
    for (int k = 0; k < j->n_inputs && c->rows[k]; k++) {
        for (long i = 0; i < c->rows_len; i++)
            mpfr_clear(c->rows[k][i]);
        free(c->rows[k]);
    }
}

static void set_input(mpfr_ptr x, int kind, uint64_t b)
{
    if (kind == KIND_F64)
        mpfr_set_d(x, fl_f64_from_bits(b), MPFR_RNDN);
    else
        mpfr_set_flt(x, fl_decode((fl_format)kind, (uint32_t)b), MPFR_RNDN);
}

/* ---- the exact (MPFR) judge ---------------------------------------------------------------------- */

/* The reported error |y - v| / 2^ulp_exp on the grid (ulp_report.h), exactly: |y - v| rounded toward
   zero at 256 bits with its inexact flag, scaled by a power of two, then rounded to nearest with the
   flag deciding the would-be ties (below 2^53 units), or via round-to-odd (above). */
static double rep_mpfr(tctx *c, mpfr_srcptr y, mpfr_srcptr v, long ulp_exp)
{
    mpfr_ptr t = c->t;
    int inex = mpfr_sub(t, y, v, MPFR_RNDZ);
    mpfr_abs(t, t, MPFR_RNDN);
    if (mpfr_zero_p(t) && !inex)
        return 0;
    mpfr_mul_2si(t, t, FL_ULP_GRID_BITS - ulp_exp, MPFR_RNDN); /* exact */
    double units;
    if (mpfr_cmp_d(t, 0x1p53) < 0) {
        mpfr_t n;
        mpfr_init2(n, 256);
        mpfr_floor(n, t);
        const double nd = mpfr_get_d(n, MPFR_RNDN);
        mpfr_sub(n, t, n, MPFR_RNDN); /* the fraction, exact */
        const int cmp = mpfr_cmp_d(n, 0.5);
        mpfr_clear(n);
        if (cmp > 0 || (cmp == 0 && inex))
            units = nd + 1;
        else if (cmp < 0)
            units = nd;
        else
            units = fmod(nd, 2) == 0 ? nd : nd + 1;
    } else {
        if (inex && mpfr_min_prec(t) < mpfr_get_prec(t))
            mpfr_nextabove(t); /* round to odd: the exact value lies above t */
        units = mpfr_get_d(t, MPFR_RNDN);
    }
    return ldexp(units, -FL_ULP_GRID_BITS);
}

/* ulp exponent of v's binade in the format (v exact, may be 0). */
static long ulp_exp_of(const fl_format_desc *d, mpfr_srcptr v)
{
    const long emin = 1 - d->bias;
    long e = emin;
    if (!mpfr_zero_p(v)) {
        e = (long)mpfr_get_exp(v) - 1;
        if (e < emin)
            e = emin;
    }
    return e - d->mbits;
}

typedef struct {
    uint32_t code;
    int sat;
    long ue;
    double rep;
} endpoint_facts;

static void facts_at(endpoint_facts *r, tctx *c, const job *j, mpfr_srcptr v, int y_fin, double B, int ties)
{
    const fl_format_desc *d = fl_format_get(j->fmt);
    r->code = fl_mpfr_encode(j->fmt, v, FL_RND_NE, j->ovf, NULL);
    r->sat = 0;
    if ((r->code & ((1u << (d->bits - 1)) - 1)) == d->max_mag && !fl_is_nan(d, r->code)) {
        mpfr_t b;
        mpfr_init2(b, 64);
        mpfr_set_d(b, B, MPFR_RNDN);
        const int cmp = mpfr_cmpabs(v, b);
        r->sat = cmp > 0 || (cmp == 0 && ties);
        mpfr_clear(b);
    }
    r->ue = ulp_exp_of(d, v);
    r->rep = y_fin ? rep_mpfr(c, c->yv, v, r->ue) : 0;
}

/* Judges output y from the evaluator at increasing precision (Ziv): the facts are taken at both ends
   of the evaluator's error interval and accepted when they agree (each is monotone in f on either
   side of y; when y lies inside the interval the error must be 0 at both ends).  0, or -1 if no
   precision up to FL_REF_MAX_PREC decided (never expected). */
static int judge_mpfr(fl_ulp_verdict *v, tctx *c, const job *j, mpfr_srcptr const *x, mpfr_srcptr const *const *rows,
                      long row_j, uint32_t y)
{
    const fl_format_desc *d = fl_format_get(j->fmt);
    const int y_fin = !fl_is_nan(d, y) && !fl_is_inf(d, y);
    if (y_fin)
        mpfr_set_flt(c->yv, fl_decode(j->fmt, y), MPFR_RNDN);
    int ties;
    const double B = fl_format_rne_boundary(j->fmt, &ties);
    fl_ulp_facts f = { FL_FCLASS_FINITE, 0, 0, 0 };
    for (mpfr_prec_t wp = 128; wp <= FL_REF_MAX_PREC; wp *= 2) {
        mpfr_set_prec(c->a, wp);
        const int k = rows ? j->ev->row(c->a, rows, j->row_len, row_j, &j->params, wp)
                           : j->ev->eval(c->a, x, &j->params, wp);
        if (mpfr_nan_p(c->a)) {
            f.fclass = FL_FCLASS_NAN;
            fl_ulp_verdict_from_facts(v, &f, j->fmt, j->ovf, y);
            return 0;
        }
        if (mpfr_inf_p(c->a)) {
            f.fclass = mpfr_sgn(c->a) > 0 ? FL_FCLASS_PINF : FL_FCLASS_NINF;
            fl_ulp_verdict_from_facts(v, &f, j->fmt, j->ovf, y);
            return 0;
        }
        endpoint_facts lo, hi;
        if (k == FL_REF_SURE) {
            facts_at(&lo, c, j, c->a, y_fin, B, ties);
            hi = lo;
        } else {
            if (mpfr_zero_p(c->a))
                continue;
            const mpfr_prec_t p = (mpfr_get_prec(c->a) > wp ? mpfr_get_prec(c->a) : wp) + (k > 0 ? k : 0) + 4;
            mpfr_set_prec(c->lo, p);
            mpfr_set_prec(c->hi, p);
            mpfr_set_prec(c->f, 8);
            /* the evaluator's bound: 2^k ulp_wp(a), ulp_wp(a) = 2^(EXP(a) - wp) */
            mpfr_set_ui_2exp(c->f, 1, (mpfr_exp_t)(mpfr_get_exp(c->a) - (mpfr_exp_t)wp + k), MPFR_RNDN);
            mpfr_sub(c->lo, c->a, c->f, MPFR_RNDN); /* exact at precision p */
            mpfr_add(c->hi, c->a, c->f, MPFR_RNDN);
            facts_at(&lo, c, j, c->lo, y_fin, B, ties);
            facts_at(&hi, c, j, c->hi, y_fin, B, ties);
            if (y_fin && mpfr_cmp(c->lo, c->yv) < 0 && mpfr_cmp(c->yv, c->hi) < 0 && (lo.rep != 0 || hi.rep != 0))
                continue;
        }
        if (lo.code != hi.code || lo.sat != hi.sat || lo.ue != hi.ue || lo.rep != hi.rep)
            continue;
        f.ref = lo.code;
        f.sat = lo.sat;
        f.rep = lo.rep;
        fl_ulp_verdict_from_facts(v, &f, j->fmt, j->ovf, y);
        return 0;
    }
    return -1;
}

/* Judges one elementwise output and adds it to the thread's report. */
static void judge_add(tctx *c, const job *j, const uint64_t *in, uint32_t y, uint64_t index, int mpfr_only)
{
    fl_ulp_verdict v;
    int done = 0;
    if (j->fast && !mpfr_only) {
        float xf[2];
        int ok = 1;
        for (int k = 0; k < j->n_inputs && k < 2; k++) {
            if (j->in_kind[k] == FL_FMT_FP32) {
                xf[k] = fl_f32_from_bits((uint32_t)in[k]);
                continue;
            }
            const double xv = bits_value(j->in_kind[k], in[k]);
            xf[k] = (float)xv;
            ok &= (double)xf[k] == xv || isnan(xv); /* binary32 inputs only */
        }
        if (ok) {
            fl_encl e;
            const int st = j->fast->eval ? j->fast->eval(&e, xf[0]) : j->fast->eval2(&e, xf[0], xf[1]);
            done = fl_fast_judge(&v, st, &e, &j->ff, y);
        }
    }
    if (done) {
        c->n_fast++;
    } else {
        for (int k = 0; k < j->n_inputs; k++)
            set_input(c->x[k], j->in_kind[k], in[k]);
        mpfr_srcptr xs[FL_ULP_MAX_INPUTS] = { c->x[0], c->x[1], c->x[2], c->x[3] };
        if (judge_mpfr(&v, c, j, xs, NULL, 0, y) != 0) {
            c->n_fail++;
            return;
        }
        c->n_mpfr++;
    }
    fl_ulp_case cs = { index, { 0 }, y, v.ref, v.ulp, v.cr, v.special };
    for (int k = 0; k < j->n_inputs; k++)
        cs.in[k] = in[k];
    fl_ulp_report_add(&c->rep, &cs);
}

/* ---- progress ------------------------------------------------------------------------------------- */

typedef struct {
    int on;
    uint64_t total;
    uint64_t done; /* atomically updated */
    double t0, last;
} progress;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void progress_tick(progress *p, uint64_t n)
{
    if (!p->on)
        return;
    const uint64_t done = __atomic_add_fetch(&p->done, n, __ATOMIC_RELAXED);
    if (omp_get_thread_num() != 0)
        return;
    const double t = now_s();
    if (t - p->last < 0.5 && done < p->total)
        return;
    p->last = t;
    const double frac = (double)done / (double)p->total, el = t - p->t0;
    const double eta = frac > 0 ? el * (1 - frac) / frac : 0;
    char bar[41];
    const int w = (int)(frac * 40);
    for (int i = 0; i < 40; i++)
        bar[i] = i < w ? '#' : '.';
    bar[40] = 0;
    fprintf(stderr, "\r[%s] %5.1f%%  %llu/%llu  elapsed %.0fs  ETA %.0fs ", bar, 100 * frac,
            (unsigned long long)done, (unsigned long long)p->total, el, eta);
}

static void progress_end(progress *p)
{
    if (p->on)
        fputs("\r\033[K", stderr);
}

/* ---- JSON ------------------------------------------------------------------------------------------- */

static json_t *json_num_or_str(double v)
{
    if (isnan(v))
        return json_string("nan");
    if (isinf(v))
        return json_string(v > 0 ? "inf" : "-inf");
    return json_real(v);
}

static json_t *json_value(int kind, uint64_t b)
{
    json_t *o = json_object();
    char s[64];
    const int hexw = kind == KIND_F64 ? 16 : (fl_format_storage_bits((fl_format)kind) + 3) / 4;
    snprintf(s, sizeof s, "0x%0*llx", hexw, (unsigned long long)b);
    json_object_set_new(o, "hex", json_string(s));
    const double v = bits_value(kind, b);
    json_object_set_new(o, "decimal", json_num_or_str(v));
    snprintf(s, sizeof s, "%a", v);
    json_object_set_new(o, "hexfloat", json_string(s));
    return o;
}

typedef struct {
    const char *fn_name;
    fl_format fmt;
    fl_overflow ovf;
    int n_inputs;
    int in_kind[FL_ULP_MAX_INPUTS];
    const char *source; /* "impl NAME" or the outputs' path */
    char params[256];
    uint64_t lo, hi;    /* elements judged: [lo, hi) (one shard) */
    json_t *shards;     /* merged reports: their [lo, hi) list */
    long row_len;       /* row-wise: the row length (worst cases name row and column); else 0 */
} meta;

static json_t *report_json(const fl_ulp_report *r, const meta *m)
{
    json_t *o = json_object();
    json_object_set_new(o, "function", json_string(m->fn_name));
    json_object_set_new(o, "format", json_string(fl_format_name(m->fmt)));
    json_object_set_new(o, "overflow", json_string(m->ovf == FL_OVF_SATURATE ? "saturate" : "no-saturate"));
    json_t *ins = json_array();
    for (int k = 0; k < m->n_inputs; k++)
        json_array_append_new(ins, json_string(kind_name(m->in_kind[k])));
    json_object_set_new(o, "input_formats", ins);
    json_object_set_new(o, "source", json_string(m->source));
    json_object_set_new(o, "params", json_string(m->params));
    if (m->shards) {
        json_object_set(o, "shards", m->shards);
    } else {
        json_t *sh = json_array(), *one = json_array();
        json_array_append_new(one, json_integer((json_int_t)m->lo));
        json_array_append_new(one, json_integer((json_int_t)m->hi));
        json_array_append_new(sh, one);
        json_object_set_new(o, "shards", sh);
    }
    if (m->row_len > 0)
        json_object_set_new(o, "row_len", json_integer((json_int_t)m->row_len));
    json_object_set_new(o, "count", json_integer((json_int_t)r->count));
    json_object_set_new(o, "correctly_rounded", json_integer((json_int_t)r->correctly_rounded));
    json_object_set_new(o, "faithful", json_integer((json_int_t)r->faithful));
    json_object_set_new(o, "mismatched_special", json_integer((json_int_t)r->mismatched_special));
    json_object_set_new(o, "infinite_errors", json_integer((json_int_t)r->infinite));
    json_object_set_new(o, "max_ulp", json_real(r->max_ulp));
    json_object_set_new(o, "mean_ulp", json_real(fl_ulp_report_mean(r)));
    char sum[160];
    fl_ulp_sum_to_string(sum, sizeof sum, r->sum);
    json_object_set_new(o, "sum_ulp_units", json_string(sum));
    json_object_set_new(o, "grid_bits", json_integer(FL_ULP_GRID_BITS));
    json_t *h = json_object();
    for (int b = 0; b < FL_ULP_HIST_COUNT; b++)
        json_object_set_new(h, fl_ulp_hist_label((fl_ulp_hist)b), json_integer((json_int_t)r->hist[b]));
    json_object_set_new(o, "histogram", h);
    json_t *w = json_array();
    for (int i = 0; i < r->n_worst; i++) {
        const fl_ulp_case *c = &r->worst[i];
        json_t *e = json_object();
        json_object_set_new(e, "index", json_integer((json_int_t)c->index));
        if (m->row_len > 0) {
            json_object_set_new(e, "row", json_integer((json_int_t)(c->index / (uint64_t)m->row_len)));
            json_object_set_new(e, "column", json_integer((json_int_t)(c->index % (uint64_t)m->row_len)));
        }
        json_t *in = json_array();
        for (int k = 0; k < m->n_inputs; k++)
            json_array_append_new(in, json_value(m->in_kind[k], c->in[k]));
        json_object_set_new(e, "inputs", in);
        json_object_set_new(e, "output", json_value(m->fmt, c->out));
        json_object_set_new(e, "reference", json_value(m->fmt, c->ref));
        json_object_set_new(e, "ulp", json_num_or_str(c->ulp));
        json_object_set_new(e, "correctly_rounded", json_boolean(c->cr));
        json_object_set_new(e, "mismatched_special", json_boolean(c->special));
        json_array_append_new(w, e);
    }
    json_object_set_new(o, "worst", w);
    return o;
}

static int parse_hex(uint64_t *out, json_t *v)
{
    json_t *h = json_object_get(v, "hex");
    if (!json_is_string(h))
        return -1;
    char *end;
    *out = strtoull(json_string_value(h), &end, 16);
    return *end ? -1 : 0;
}

/* A report back from JSON (the fields report_json writes).  0, or -1 with err. */
static int report_from_json(fl_ulp_report *r, const json_t *o, int n_inputs, char *err, size_t errlen)
{
    fl_ulp_report_init(r);
#define GETU(field, key)                                                                            \
    do {                                                                                            \
        json_t *v_ = json_object_get(o, key);                                                       \
        if (!json_is_integer(v_) || json_integer_value(v_) < 0) {                                   \
            snprintf(err, errlen, "missing or bad '%s'", key);                                      \
            return -1;                                                                              \
        }                                                                                           \
        r->field = (uint64_t)json_integer_value(v_);                                                \
    } while (0)
    GETU(count, "count");
    GETU(correctly_rounded, "correctly_rounded");
    GETU(faithful, "faithful");
    GETU(mismatched_special, "mismatched_special");
    GETU(infinite, "infinite_errors");
#undef GETU
    json_t *mx = json_object_get(o, "max_ulp");
    json_t *sum = json_object_get(o, "sum_ulp_units");
    json_t *h = json_object_get(o, "histogram");
    json_t *w = json_object_get(o, "worst");
    json_t *g = json_object_get(o, "grid_bits");
    if (!json_is_number(mx) || !json_is_string(sum) || !json_is_object(h) || !json_is_array(w) ||
        !json_is_integer(g) || json_integer_value(g) != FL_ULP_GRID_BITS) {
        snprintf(err, errlen, "missing or bad max_ulp, sum_ulp_units, histogram, worst or grid_bits");
        return -1;
    }
    r->max_ulp = json_number_value(mx);
    if (fl_ulp_sum_from_string(r->sum, json_string_value(sum))) {
        snprintf(err, errlen, "bad sum_ulp_units");
        return -1;
    }
    for (int b = 0; b < FL_ULP_HIST_COUNT; b++) {
        json_t *v = json_object_get(h, fl_ulp_hist_label((fl_ulp_hist)b));
        if (!json_is_integer(v)) {
            snprintf(err, errlen, "histogram lacks '%s'", fl_ulp_hist_label((fl_ulp_hist)b));
            return -1;
        }
        r->hist[b] = (uint64_t)json_integer_value(v);
    }
    if (json_array_size(w) > FL_ULP_WORST) {
        snprintf(err, errlen, "more than %d worst cases", FL_ULP_WORST);
        return -1;
    }
    for (size_t i = 0; i < json_array_size(w); i++) {
        json_t *e = json_array_get(w, i);
        fl_ulp_case c;
        memset(&c, 0, sizeof c);
        json_t *idx = json_object_get(e, "index"), *in = json_object_get(e, "inputs"), *u = json_object_get(e, "ulp");
        uint64_t out, ref;
        if (!json_is_integer(idx) || !json_is_array(in) || (int)json_array_size(in) != n_inputs ||
            parse_hex(&out, json_object_get(e, "output")) || parse_hex(&ref, json_object_get(e, "reference"))) {
            snprintf(err, errlen, "bad worst case %zu", i);
            return -1;
        }
        c.index = (uint64_t)json_integer_value(idx);
        for (int k = 0; k < n_inputs; k++)
            if (parse_hex(&c.in[k], json_array_get(in, (size_t)k))) {
                snprintf(err, errlen, "bad input of worst case %zu", i);
                return -1;
            }
        c.out = (uint32_t)out;
        c.ref = (uint32_t)ref;
        c.ulp = json_is_string(u) && !strcmp(json_string_value(u), "inf") ? INFINITY : json_number_value(u);
        c.cr = json_is_true(json_object_get(e, "correctly_rounded"));
        c.special = json_is_true(json_object_get(e, "mismatched_special"));
        r->worst[r->n_worst++] = c;
    }
    return 0;
}

/* ---- text report -------------------------------------------------------------------------------- */

static void print_value(FILE *out, int kind, uint64_t b)
{
    const double v = bits_value(kind, b);
    const int hexw = kind == KIND_F64 ? 16 : (fl_format_storage_bits((fl_format)kind) + 3) / 4;
    fprintf(out, "%a (0x%0*llx)", v, hexw, (unsigned long long)b);
}

static void print_report(FILE *out, const fl_ulp_report *r, const meta *m, const char *recheck, double T, int gated)
{
    fprintf(out, "fp8lab ulp: %s%s%s%s, inputs", m->fn_name, *m->params ? " (" : "", m->params, *m->params ? ")" : "");
    for (int k = 0; k < m->n_inputs; k++)
        fprintf(out, " %s", kind_name(m->in_kind[k]));
    fprintf(out, " -> %s (RNE, %s), %s\n", fl_format_name(m->fmt),
            m->ovf == FL_OVF_SATURATE ? "saturating" : "IEEE overflow", m->source);
    const double n = r->count ? (double)r->count : 1;
    fprintf(out, "  outputs judged        %llu\n", (unsigned long long)r->count);
    fprintf(out, "  correctly rounded     %llu (%.4f%%)\n", (unsigned long long)r->correctly_rounded,
            100 * (double)r->correctly_rounded / n);
    fprintf(out, "  faithful (<= 1 ulp)   %llu (%.4f%%)\n", (unsigned long long)r->faithful, 100 * (double)r->faithful / n);
    fprintf(out, "  mismatched specials   %llu   (infinite errors %llu)\n", (unsigned long long)r->mismatched_special,
            (unsigned long long)r->infinite);
    fprintf(out, "  max error             %.6f ulp    mean %.6g ulp\n", r->max_ulp, fl_ulp_report_mean(r));
    fprintf(out, "  histogram            ");
    for (int b = 0; b < FL_ULP_HIST_COUNT; b++)
        fprintf(out, " %s: %llu", fl_ulp_hist_label((fl_ulp_hist)b), (unsigned long long)r->hist[b]);
    fputc('\n', out);
    if (r->n_worst && (r->worst[0].ulp > 0 || !r->worst[0].cr)) {
        fprintf(out, "  worst cases (error desc, index asc):\n");
        for (int i = 0; i < r->n_worst; i++) {
            const fl_ulp_case *c = &r->worst[i];
            if (c->ulp == 0 && c->cr)
                break;
            if (m->row_len > 0)
                fprintf(out, "    #%-2d row %-7llu col %-6llu ", i + 1, (unsigned long long)(c->index / (uint64_t)m->row_len),
                        (unsigned long long)(c->index % (uint64_t)m->row_len));
            else
                fprintf(out, "    #%-2d index %-11llu ", i + 1, (unsigned long long)c->index);
            for (int k = 0; k < m->n_inputs; k++) {
                fprintf(out, "%s=", m->n_inputs == 1 ? "x" : m->row_len > 0 ? (k == 0 ? "x" : "dy")
                                  : k == 0 ? "x0" : k == 1 ? "x1" : k == 2 ? "x2" : "x3");
                print_value(out, m->in_kind[k], c->in[k]);
                fputc(' ', out);
            }
            fprintf(out, "y=");
            print_value(out, m->fmt, c->out);
            fprintf(out, " ref=");
            print_value(out, m->fmt, c->ref);
            if (isinf(c->ulp))
                fprintf(out, "  (inf ulp%s)\n", c->special ? ", class mismatch" : "");
            else
                fprintf(out, "  (%.6f ulp%s)\n", c->ulp, c->special ? ", class mismatch" : "");
        }
        if (recheck && r->worst[0].ulp > 0)
            fprintf(out, "  re-check the worst:   %s\n", recheck);
    }
    if (gated)
        fprintf(out, "  gate --max-ulp %g:   %s\n", T,
                (r->max_ulp > T || r->mismatched_special) ? "FAILED" : "passed");
}

/* The report on stdout: JSON (with the gate's verdict when gated) or text. */
static void emit_report(const fl_ulp_report *r, const meta *m, const char *recheck, double T, int gated, int json)
{
    if (!json) {
        print_report(stdout, r, m, recheck, T, gated);
        return;
    }
    json_t *o = report_json(r, m);
    if (gated)
        json_object_set_new(o, "gate", json_string(r->max_ulp > T || r->mismatched_special ? "failed" : "passed"));
    json_dumpf(o, stdout, JSON_INDENT(1));
    fputc('\n', stdout);
    json_decref(o);
}

/* ---- the sweeps ----------------------------------------------------------------------------------- */

static uint64_t sample_index(uint64_t seed, uint64_t i, uint64_t space)
{
    const uint64_t z = fl_mix64(seed + (i + 1) * FL_GOLDEN64);
    return space ? (uint64_t)(((unsigned __int128)z * space) >> 64) : z;
}

#define CHUNK 4096

typedef struct {
    const impl_desc *impl;
    uint64_t lo, hi;   /* element numbers [lo, hi) */
    int sample;        /* element i -> index sample_index(seed, i, space) */
    uint64_t seed, space;
    int in_bits[3];
} sweep;

/* The inputs of elements e0 .. e0 + m - 1: index = in[0] in[1] ... as a mixed-radix number, the last
   input lowest (for a sample, the index is drawn from the element number). */
static void fill_inputs(uint32_t *const in[3], uint64_t *idx, const sweep *s, uint64_t e0, size_t m)
{
    const int ni = s->impl->n_inputs;
    if (ni == 1 && !s->sample && s->in_bits[0] == 32) { /* a binary32 sweep: the index is the input */
        for (size_t i = 0; i < m; i++) {
            idx[i] = e0 + i;
            in[0][i] = (uint32_t)(e0 + i);
        }
        return;
    }
    for (size_t i = 0; i < m; i++) {
        const uint64_t id = s->sample ? sample_index(s->seed, e0 + i, s->space) : e0 + i;
        idx[i] = id;
        uint64_t rest = id;
        for (int k = ni - 1; k >= 0; k--) {
            in[k][i] = (uint32_t)(rest & (s->in_bits[k] >= 64 ? ~0ull : (1ull << s->in_bits[k]) - 1));
            rest = s->in_bits[k] >= 64 ? 0 : rest >> s->in_bits[k];
        }
    }
}

/* The counts of a batch of judged outputs whose errors are finite and below 2^40 (the common case of
   fl_ulp_report_add: the sum fits one limb), kept in registers and folded into the report once per
   chunk.  Cases enter the worst list through fl_ulp_report_offer_worst, built only when their error
   reaches the list's last entry; every other case goes through fl_ulp_report_add.  The report is the
   one fl_ulp_report_add would build case by case (its fields are sums and a top-10 under a total
   order, so the order of additions does not matter). */
typedef struct {
    uint64_t count, cr, faithful, special, sum; /* sum < 4096 * 2^60: no overflow within a chunk */
    uint64_t hist[FL_ULP_HIST_COUNT];
    double max;
} batch;

static void batch_fold(fl_ulp_report *r, const batch *b)
{
    r->count += b->count;
    r->correctly_rounded += b->cr;
    r->faithful += b->faithful;
    r->mismatched_special += b->special;
    for (int i = 0; i < FL_ULP_HIST_COUNT; i++)
        r->hist[i] += b->hist[i];
    if (b->max > r->max_ulp)
        r->max_ulp = b->max;
    uint64_t add = b->sum;
    for (int i = 0; i < FL_ULP_SUM_LIMBS && add; i++) {
        const uint64_t t = r->sum[i] + add;
        add = t < add;
        r->sum[i] = t;
    }
}

/* The value of an input encoding as binary32 (every fl_format is a subset of binary32). */
static inline float input_f32(int kind, uint32_t b)
{
    return kind == FL_FMT_FP32 ? fl_f32_from_bits(b) : fl_decode((fl_format)kind, b);
}

/* One chunk of a sweep on the fast path (one or two inputs, fl_format encodings): judge_add's work
   without a case record per output. */
static void fast_chunk(tctx *c, const job *j, uint32_t *const in[3], const uint32_t *out, size_t m,
                       const uint64_t *idx, uint64_t e0, int sample)
{
    batch b;
    memset(&b, 0, sizeof b);
    const fl_fast_eval eval = j->fast->eval;
    const fl_fast_eval2 eval2 = j->fast->eval2;
    const int k0 = j->in_kind[0], k1 = j->in_kind[1];
    fl_ulp_report *r = &c->rep;
    for (size_t i = 0; i < m; i++) {
        fl_encl e;
        fl_ulp_verdict v;
        const uint32_t x0 = in[0][i], x1 = eval ? 0 : in[1][i];
        const int st = eval ? eval(&e, input_f32(k0, x0)) : eval2(&e, input_f32(k0, x0), input_f32(k1, x1));
        const uint64_t index = sample ? e0 + i : idx[i];
        if (!fl_fast_judge(&v, st, &e, &j->ff, out[i])) {
            const uint64_t bits[3] = { x0, x1, 0 };
            judge_add(c, j, bits, out[i], index, 1);
            continue;
        }
        c->n_fast++;
        const double u = v.ulp;
        if (!(u < 0x1p40)) { /* +Inf or huge: the general accumulator */
            const fl_ulp_case cs = { index, { x0, x1 }, out[i], v.ref, u, v.cr, v.special };
            fl_ulp_report_add(r, &cs);
            continue;
        }
        b.count++;
        b.cr += v.cr != 0;
        b.special += v.special != 0;
        b.hist[fl_ulp_hist_bucket(u)]++;
        b.faithful += u <= 1;
        b.max = u > b.max ? u : b.max;
        b.sum += (uint64_t)(u * 0x1p20); /* exact: a grid value below 2^40 */
        if (r->n_worst < FL_ULP_WORST || u >= r->worst[FL_ULP_WORST - 1].ulp) {
            const fl_ulp_case cs = { index, { x0, x1 }, out[i], v.ref, u, v.cr, v.special };
            fl_ulp_report_offer_worst(r, &cs);
        }
    }
    batch_fold(r, &b);
}

static void run_sweep(tctx *ctxs, const job *j, const sweep *s, progress *pg, int mpfr_only)
{
    /* the fast loop: a fast function of the implementation's inputs (one, or two for a gate) */
    int fast_loop = j->fast && !mpfr_only && s->impl->n_inputs == j->n_inputs &&
                    (j->fast->eval ? j->n_inputs == 1 : j->n_inputs == 2);
    for (int k = 0; k < j->n_inputs; k++)
        fast_loop &= j->in_kind[k] >= 0 && j->in_kind[k] != FL_FMT_E8M0;
    const uint64_t n = s->hi - s->lo;
    const uint64_t nchunks = (n + CHUNK - 1) / CHUNK;
#pragma omp parallel
    {
        tctx *c = &ctxs[omp_get_thread_num()];
        uint32_t *in[3] = { malloc(CHUNK * 4), malloc(CHUNK * 4), malloc(CHUNK * 4) };
        uint32_t *out = malloc(CHUNK * 4);
        uint64_t *idx = malloc(CHUNK * 8);
        const int ni = s->impl->n_inputs;
#pragma omp for schedule(dynamic, 1)
        for (uint64_t ch = 0; ch < nchunks; ch++) {
            const uint64_t e0 = s->lo + ch * CHUNK;
            const size_t m = (size_t)(e0 + CHUNK <= s->hi ? CHUNK : s->hi - e0);
            fill_inputs(in, idx, s, e0, m);
            if (s->impl->trun)
                s->impl->trun(out, (const uint32_t *const *)in, m, 0);
            else
                s->impl->run(out, (const uint32_t *const *)in, m);
            if (fast_loop) {
                fast_chunk(c, j, in, out, m, idx, e0, s->sample);
                progress_tick(pg, m);
                continue;
            }
            for (size_t i = 0; i < m; i++) {
                uint64_t bits[3] = { 0, 0, 0 };
                for (int k = 0; k < ni; k++)
                    bits[k] = in[k][i];
                judge_add(c, j, bits, out[i], s->sample ? e0 + i : idx[i], mpfr_only);
            }
            progress_tick(pg, m);
        }
        free(in[0]);
        free(in[1]);
        free(in[2]);
        free(out);
        free(idx);
    }
}

/* ---- row-wise sweeps: seeded rows ------------------------------------------------------------------
 *
 * A row-wise twin (PolyNorm) is run on rows generated from (seed, distribution, row length, row
 * number) alone, so that any row can be regenerated on its own (--range R:R+1 re-checks row R) and
 * the report does not depend on threads, blocks or ranks.  Every random number is the splitmix64
 * finalizer chained over (seed, stream, row, column, draw); uniforms are (top 53 bits + 1/2) 2^-53;
 * normals are Box-Muller (libm log, cos, sqrt) on draws 2k, 2k+1.  Values are rounded once (RNE) into
 * the input's format, saturating for 8-bit formats.  Distributions (experiments/ulp/ULP.md section 6):
 *   normal  x = N(0,1);  dy = N(0,1) for a VJP
 *   heavy   x = Student-t with 3 degrees of freedom, N0 / sqrt((N1^2 + N2^2 + N3^2) / 3), times 100 in
 *           the outlier channels: column c is one when bits(seed, channel stream, 0, c, 0) % 512 == 0
 *           (the same columns in every row, ~8 of 4096);  dy = N(0,1)
 *   cancel  forward: x = N(0,1), then every column with plant bits % 8 == 0 is set to
 *           x* (1 + (2U - 1) 2^-6), x* < 0 the point where the row's terms a_i x^i / D_i cancel most
 *           (the least |sum| / sum|.| over x = -2^(-6 + k/256), k = 0..3584), D_i from the row as it
 *           stands; four rounds (planting moves the D_i); then two tuning columns (the first two
 *           unplanted) are set so that the row's zero lands on a representable b near x* (below);
 *           VJP: x = N(0,1), dy = N(0,1), then in the planted columns dy_k = the value that makes
 *           dx_k = 0 given the row's P_i = sum_j dy_j x_j^i (three rounds); then dy of one tuning
 *           column brings dx of the first planted column nearest 0 (below). */

typedef enum { DIST_NORMAL, DIST_HEAVY, DIST_CANCEL, DIST_COUNT } row_dist;
static const char *const dist_names[DIST_COUNT] = { "normal", "heavy", "cancel" };

enum { RG_X = 1, RG_DY = 2, RG_CHANNEL = 3, RG_PLANT = 4 };

#define RG_DEFAULT_ROW_LEN 4096
#define RG_BLOCK_ROWS 64

typedef struct {
    row_dist dist;
    uint64_t seed;
    long H;
    int n_inputs;            /* 1: x; 2: x, dy (a VJP) */
    fl_format fmt[2];
    const fl_ref_params *p;  /* order, coefficients, eps: the reference's */
} rowgen;

static uint64_t rg_mix(uint64_t z) { return fl_mix64(z + FL_GOLDEN64); }

static uint64_t rg_bits(uint64_t seed, uint64_t stream, uint64_t row, uint64_t col, uint64_t draw)
{
    uint64_t h = rg_mix(seed);
    h = rg_mix(h ^ stream);
    h = rg_mix(h ^ row);
    h = rg_mix(h ^ col);
    return rg_mix(h ^ draw);
}

static double rg_unif(uint64_t seed, uint64_t stream, uint64_t row, uint64_t col, uint64_t draw)
{
    return fl_open01(rg_bits(seed, stream, row, col, draw));
}

static double rg_normal(uint64_t seed, uint64_t stream, uint64_t row, uint64_t col, uint64_t k)
{
    const double u1 = rg_unif(seed, stream, row, col, 2 * k), u2 = rg_unif(seed, stream, row, col, 2 * k + 1);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static uint32_t rg_encode(fl_format f, double v)
{
    return fl_encode_f64(f, v, FL_RND_NE, fl_format_get(f)->bits <= 8 ? FL_OVF_SATURATE : FL_OVF_NOSATURATE, 0);
}

static double rg_coef(const fl_ref_params *p, int i)
{
    return p->a_set >> i & 1 ? p->a[i] : i == 0 ? 0.0 : 1.0 / p->order;
}

static int rg_planted(const rowgen *g, uint64_t row, long c) { return (rg_bits(g->seed, RG_PLANT, row, (uint64_t)c, 0) & 7) == 0; }

/* D_i = sqrt(mean(x^(2i)) + eps), i = 1..order, in double from the row's encodings */
static void rg_norms(double *D, const rowgen *g, const uint32_t *x)
{
    const int r = g->p->order;
    double S[5] = { 0 };
    for (long c = 0; c < g->H; c++) {
        const double v = fl_decode(g->fmt[0], x[c]);
        double pw = 1;
        for (int i = 1; i <= r; i++) {
            pw *= v;
            S[i] += pw * pw;
        }
    }
    for (int i = 1; i <= r; i++)
        D[i] = sqrt(S[i] / (double)g->H + g->p->eps);
}

static double rg_cancel_point(const rowgen *g, const double *D)
{
    const int r = g->p->order;
    double best = INFINITY, bx = -1;
    for (int k = 0; k <= 14 * 256; k++) {
        const double x = -exp2(-6.0 + k / 256.0);
        const double a0 = rg_coef(g->p, 0);
        double s = a0, m = fabs(a0), xi = 1;
        for (int i = 1; i <= r; i++) {
            xi *= x;
            const double t = rg_coef(g->p, i) * xi / D[i];
            s += t;
            m += fabs(t);
        }
        if (m > 0 && fabs(s) / m < best) {
            best = fabs(s) / m;
            bx = x;
        }
    }
    return bx;
}

/* Row number `row`: x[0..H) and, for a VJP, dy[0..H). */
static void rg_row(const rowgen *g, uint64_t row, uint32_t *x, uint32_t *dy)
{
    const long H = g->H;
    const int r = g->p->order;
    for (long c = 0; c < H; c++) {
        double v = rg_normal(g->seed, RG_X, row, (uint64_t)c, 0);
        if (g->dist == DIST_HEAVY) {
            const double n1 = rg_normal(g->seed, RG_X, row, (uint64_t)c, 1);
            const double n2 = rg_normal(g->seed, RG_X, row, (uint64_t)c, 2);
            const double n3 = rg_normal(g->seed, RG_X, row, (uint64_t)c, 3);
            v /= sqrt((n1 * n1 + n2 * n2 + n3 * n3) / 3.0);
            if (rg_bits(g->seed, RG_CHANNEL, 0, (uint64_t)c, 0) % 512 == 0)
                v *= 100.0;
        }
        x[c] = rg_encode(g->fmt[0], v);
    }
    double D[5] = { 0 };
    if (g->dist == DIST_CANCEL && g->n_inputs == 1)
        for (int round = 0; round < 4; round++) {
            rg_norms(D, g, x);
            const double xs = rg_cancel_point(g, D);
            for (long c = 0; c < H; c++)
                if (rg_planted(g, row, c))
                    x[c] = rg_encode(g->fmt[0], xs * (1.0 + (2.0 * rg_unif(g->seed, RG_PLANT, row, (uint64_t)c, 1) - 1.0) * 0x1p-6));
        }
    if (g->dist == DIST_CANCEL && g->n_inputs == 1) {
        /* tuning: the first two unplanted columns, one after the other, take the value of the input
           format in [-4, 4] that brings the output nearest 0 (relative to its terms) at b, b one of the
           five values of the input format nearest x* (the first column chooses b too): the row's zero
           moves onto b, so the planted elements equal to b cancel to ~2^-20 of their terms or better */
        rg_norms(D, g, x);
        const uint32_t c0 = rg_encode(g->fmt[0], rg_cancel_point(g, D));
        const uint32_t ncodes = 1u << fl_format_storage_bits(g->fmt[0]);
        double b = fl_decode(g->fmt[0], c0);
        for (long c = 0, tuned = 0; c < H && tuned < 2; c++) {
            if (rg_planted(g, row, c))
                continue;
            double S[5] = { 0 };
            for (long q = 0; q < H; q++) {
                const double v = q == c ? 0.0 : fl_decode(g->fmt[0], x[q]);
                double pw = 1;
                for (int i = 1; i <= r; i++) {
                    pw *= v;
                    S[i] += pw * pw;
                }
            }
            double best = INFINITY, best_b = b;
            for (int db = tuned ? 0 : -2; db <= (tuned ? 0 : 2); db++) {
                const double bb = tuned ? b : fl_decode(g->fmt[0], c0 + (uint32_t)db);
                if (!(bb < 0))
                    continue;
                for (uint32_t code = 0; code < ncodes; code++) {
                    const double v = fl_decode(g->fmt[0], code);
                    if (!(fabs(v) <= 4.0))
                        continue;
                    double y = rg_coef(g->p, 0), m = fabs(y), pw = 1, bi = 1;
                    for (int i = 1; i <= r; i++) {
                        pw *= v;
                        bi *= bb;
                        const double t = rg_coef(g->p, i) * bi / sqrt((S[i] + pw * pw) / (double)H + g->p->eps);
                        y += t;
                        m += fabs(t);
                    }
                    if (fabs(y) / m < best) {
                        best = fabs(y) / m;
                        best_b = bb;
                        x[c] = code;
                    }
                }
            }
            b = best_b;
            tuned++;
        }
    }
    if (g->n_inputs < 2)
        return;
    for (long c = 0; c < H; c++)
        dy[c] = rg_encode(g->fmt[1], rg_normal(g->seed, RG_DY, row, (uint64_t)c, 0));
    if (g->dist != DIST_CANCEL)
        return;
    rg_norms(D, g, x);
    for (int round = 0; round < 3; round++) {
        double P[5] = { 0 };
        for (long c = 0; c < H; c++) {
            const double xv = fl_decode(g->fmt[0], x[c]), d = fl_decode(g->fmt[1], dy[c]);
            double pw = 1;
            for (int i = 1; i <= r; i++) {
                pw *= xv;
                P[i] += d * pw;
            }
        }
        for (long c = 0; c < H; c++) {
            if (!rg_planted(g, row, c))
                continue;
            const double xv = fl_decode(g->fmt[0], x[c]);
            double num = 0, den = 0, pw = 1; /* pw = x^(i-1) */
            for (int i = 1; i <= r; i++) {
                const double a = rg_coef(g->p, i) * i;
                den += a * pw / D[i];
                num += a * pw * pw * xv * P[i] / ((double)H * D[i] * D[i] * D[i]);
                pw *= xv;
            }
            const double q = num / den;
            if (den != 0 && isfinite(q))
                dy[c] = rg_encode(g->fmt[1], q);
        }
    }
    /* tuning: the first planted column k, and the first unplanted column t with |x_t| >= 1: dy_t takes
       the value of dy's format in [-4, 4] that brings dx_k nearest 0 (dx_k is affine in dy_t) */
    long k = 0, t = 0;
    while (k < H && !rg_planted(g, row, k))
        k++;
    while (t < H && (rg_planted(g, row, t) || !(fabs(fl_decode(g->fmt[0], x[t])) >= 1.0)))
        t++;
    if (k == H || t == H)
        return;
    double P[5] = { 0 };
    for (long c = 0; c < H; c++) {
        if (c == t)
            continue;
        const double xv = fl_decode(g->fmt[0], x[c]), d = fl_decode(g->fmt[1], dy[c]);
        double pw = 1;
        for (int i = 1; i <= r; i++) {
            pw *= xv;
            P[i] += d * pw;
        }
    }
    const double xk = fl_decode(g->fmt[0], x[k]), xt = fl_decode(g->fmt[0], x[t]), dk = fl_decode(g->fmt[1], dy[k]);
    const uint32_t ncodes = 1u << fl_format_storage_bits(g->fmt[1]);
    double best = INFINITY;
    for (uint32_t code = 0; code < ncodes; code++) {
        const double v = fl_decode(g->fmt[1], code);
        if (!(fabs(v) <= 4.0))
            continue;
        double dx = 0, pk = 1, pt = 1; /* pk = xk^(i-1), pt = xt^i */
        for (int i = 1; i <= r; i++) {
            pt *= xt;
            const double a = rg_coef(g->p, i) * i;
            dx += a * pk * dk / D[i] - a * pk * pk * xk * (P[i] + v * pt) / ((double)H * D[i] * D[i] * D[i]);
            pk *= xk;
        }
        if (fabs(dx) < best) {
            best = fabs(dx);
            dy[t] = code;
        }
    }
}

typedef struct {
    fl_npy_writer *w[3]; /* x, dy, y: bit patterns, shape (rows, H) */
    char path[3][1100];
} row_save;

/* Rows lo/H .. hi/H of the seeded stream through the twin, every output judged with MPFR.  Blocks of
   RG_BLOCK_ROWS rows: generated and run one row per iteration, then judged element by element
   (threads load the row they need into their MPFR copy).  0, or -1 with err (--save). */
static int run_rows(tctx *ctxs, const job *j, const sweep *s, const rowgen *g, progress *pg, row_save *sv,
                    char *err, size_t errlen)
{
    const long H = j->row_len;
    const int ni = s->impl->n_inputs;
    const uint64_t r_lo = s->lo / (uint64_t)H, r_hi = s->hi / (uint64_t)H;
    const size_t blk = (size_t)RG_BLOCK_ROWS * (size_t)H;
    uint32_t *in[3] = { malloc(blk * 4), malloc(blk * 4), NULL };
    uint32_t *out = malloc(blk * 4);
    void *pack = malloc(blk * 4);
    int rc = 0;
    for (uint64_t b0 = r_lo; b0 < r_hi && rc == 0; b0 += RG_BLOCK_ROWS) {
        const uint64_t nr = r_hi - b0 < RG_BLOCK_ROWS ? r_hi - b0 : RG_BLOCK_ROWS;
#pragma omp parallel for schedule(dynamic, 1)
        for (uint64_t r = 0; r < nr; r++) {
            uint32_t *x = in[0] + r * (uint64_t)H, *dy = in[1] + r * (uint64_t)H;
            rg_row(g, b0 + r, x, dy);
            const uint32_t *rin[3] = { x, dy, NULL };
            s->impl->trun(out + r * (uint64_t)H, rin, (size_t)H, (size_t)H);
        }
        const uint64_t n = nr * (uint64_t)H;
#pragma omp parallel
        {
            tctx *c = &ctxs[omp_get_thread_num()];
            mpfr_srcptr *rowp[FL_ULP_MAX_INPUTS] = { NULL };
            for (int k = 0; k < ni; k++) {
                rowp[k] = malloc((size_t)H * sizeof(mpfr_srcptr));
                for (long e = 0; e < H; e++)
                    rowp[k][e] = c->rows[k][e];
            }
            uint64_t loaded = UINT64_MAX;
#pragma omp for schedule(dynamic, 16)
            for (uint64_t i = 0; i < n; i++) {
                const uint64_t r = i / (uint64_t)H;
                const long e = (long)(i % (uint64_t)H);
                if (r != loaded) {
                    for (int k = 0; k < ni; k++)
                        for (long q = 0; q < H; q++)
                            set_input(c->rows[k][q], j->in_kind[k], in[k][r * (uint64_t)H + (uint64_t)q]);
                    loaded = r;
                }
                fl_ulp_verdict v;
                if (judge_mpfr(&v, c, j, NULL, (mpfr_srcptr const *const *)rowp, e, out[i]) != 0) {
                    c->n_fail++;
                    continue;
                }
                c->n_mpfr++;
                fl_ulp_case cs = { b0 * (uint64_t)H + i, { 0 }, out[i], v.ref, v.ulp, v.cr, v.special };
                for (int k = 0; k < ni; k++)
                    cs.in[k] = in[k][i];
                fl_ulp_report_add(&c->rep, &cs);
                progress_tick(pg, 1);
            }
            for (int k = 0; k < ni; k++)
                free(rowp[k]);
        }
        for (int f = 0; sv && f < 3 && rc == 0; f++) {
            if (!sv->w[f])
                continue;
            const uint32_t *src = f == 2 ? out : in[f];
            const fl_format fm = f == 2 ? j->fmt : (fl_format)j->in_kind[f];
            for (uint64_t i = 0; i < n; i++)
                if (fl_format_storage_bits(fm) <= 8)
                    ((uint8_t *)pack)[i] = (uint8_t)src[i];
                else if (fl_format_storage_bits(fm) <= 16)
                    ((uint16_t *)pack)[i] = (uint16_t)src[i];
                else
                    ((uint32_t *)pack)[i] = src[i];
            rc = fl_npy_writer_write(sv->w[f], pack, (size_t)n, err, errlen) ? -1 : 0;
        }
    }
    free(in[0]);
    free(in[1]);
    free(out);
    free(pack);
    return rc;
}

/* External arrays: chunks read in order by one thread, judged by all. */
static int run_arrays(tctx *ctxs, const job *j, source *ins, source *outs, uint64_t lo, uint64_t hi, progress *pg,
                      int mpfr_only, char *err, size_t errlen)
{
    const size_t chunk_elems = j->row_len > 0 ? (size_t)j->row_len * (size_t)(((1 << 18) + j->row_len - 1) / j->row_len)
                                             : (size_t)1 << 18;
    uint64_t *inb[FL_ULP_MAX_INPUTS];
    for (int k = 0; k < j->n_inputs; k++)
        inb[k] = malloc(chunk_elems * 8);
    uint64_t *outb = malloc(chunk_elems * 8);
    uint32_t *y = malloc(chunk_elems * 4);
    int rc = 0;
    const fl_format_desc *d = fl_format_get(j->fmt);
    /* skip to lo */
    for (uint64_t pos = 0; pos < lo && rc == 0;) {
        const size_t m = (size_t)(lo - pos < chunk_elems ? lo - pos : chunk_elems);
        for (int k = 0; k < j->n_inputs && rc == 0; k++)
            rc = read_source(&ins[k], inb[k], m, err, errlen);
        if (rc == 0)
            rc = read_source(outs, outb, m, err, errlen);
        pos += m;
    }
    for (uint64_t pos = lo; pos < hi && rc == 0;) {
        const size_t m = (size_t)(hi - pos < chunk_elems ? hi - pos : chunk_elems);
        for (int k = 0; k < j->n_inputs && rc == 0; k++)
            rc = read_source(&ins[k], inb[k], m, err, errlen);
        if (rc == 0)
            rc = read_source(outs, outb, m, err, errlen);
        if (rc)
            break;
        /* outputs to encodings of fmt */
        for (size_t i = 0; i < m && rc == 0; i++) {
            if (outs->kind == (int)j->fmt) {
                y[i] = (uint32_t)outb[i];
                continue;
            }
            const double v = bits_value(outs->kind, outb[i]);
            uint32_t code;
            if (isnan(v))
                code = fl_encode_nan_(d);
            else
                code = fl_encode_f64(j->fmt, v, FL_RND_NE, FL_OVF_NOSATURATE, 0);
            const double back = bits_value(j->fmt, code);
            if (!(isnan(v) && isnan(back)) && !(back == v && signbit(back) == signbit(v))) {
                snprintf(err, errlen, "%s: element %llu is %a, not a %s value (wrong --format?)", outs->path,
                         (unsigned long long)(pos + i), v, fl_format_name(j->fmt));
                rc = -1;
            }
            y[i] = code;
        }
        if (rc)
            break;
        if (j->row_len <= 0) {
#pragma omp parallel for schedule(dynamic, 1024)
            for (size_t i = 0; i < m; i++) {
                tctx *c = &ctxs[omp_get_thread_num()];
                uint64_t b[FL_ULP_MAX_INPUTS] = { 0 };
                for (int k = 0; k < j->n_inputs; k++)
                    b[k] = inb[k][i];
                judge_add(c, j, b, y[i], pos + i, mpfr_only);
            }
        } else {
            const long L = j->row_len;
            const size_t nrows = m / (size_t)L;
#pragma omp parallel for schedule(dynamic, 1)
            for (size_t rw = 0; rw < nrows; rw++) {
                tctx *c = &ctxs[omp_get_thread_num()];
                for (int k = 0; k < j->n_inputs; k++)
                    for (long e = 0; e < L; e++)
                        set_input(c->rows[k][e], j->in_kind[k], inb[k][rw * (size_t)L + (size_t)e]);
                mpfr_srcptr *rowp[FL_ULP_MAX_INPUTS];
                mpfr_srcptr rowv[FL_ULP_MAX_INPUTS][1];
                (void)rowv;
                for (int k = 0; k < j->n_inputs; k++) {
                    rowp[k] = malloc((size_t)L * sizeof(mpfr_srcptr));
                    for (long e = 0; e < L; e++)
                        rowp[k][e] = c->rows[k][e];
                }
                for (long e = 0; e < L; e++) {
                    const size_t i = rw * (size_t)L + (size_t)e;
                    fl_ulp_verdict v;
                    if (judge_mpfr(&v, c, j, NULL, (mpfr_srcptr const *const *)rowp, e, y[i]) != 0) {
                        c->n_fail++;
                        continue;
                    }
                    c->n_mpfr++;
                    fl_ulp_case cs = { pos + i, { 0 }, y[i], v.ref, v.ulp, v.cr, v.special };
                    for (int k = 0; k < j->n_inputs; k++)
                        cs.in[k] = inb[k][i];
                    fl_ulp_report_add(&c->rep, &cs);
                }
                for (int k = 0; k < j->n_inputs; k++)
                    free(rowp[k]);
            }
        }
        progress_tick(pg, m);
        pos += m;
    }
    for (int k = 0; k < j->n_inputs; k++)
        free(inb[k]);
    free(outb);
    free(y);
    return rc;
}

/* ---- merge ------------------------------------------------------------------------------------------ */

static int cmd_merge(int argc, char **argv, int first, int json, int gated, double T)
{
    const char *cmd = "ulp";
    fl_ulp_report total;
    fl_ulp_report_init(&total);
    json_t *head = NULL, *shards = json_array();
    int n_inputs = 0;
    int rc = FL_EXIT_OK;
    for (int i = first; i < argc && rc == FL_EXIT_OK; i++) {
        if (argv[i][0] == '-')
            continue;
        json_error_t je;
        json_t *o = json_load_file(argv[i], 0, &je);
        char err[256];
        if (!o || !json_is_object(o)) {
            fprintf(stderr, "fp8lab %s: %s: not a JSON report (%s)\n", cmd, argv[i], o ? "not an object" : je.text);
            json_decref(o);
            rc = FL_EXIT_FAIL;
            break;
        }
        if (!head) {
            head = o;
            n_inputs = (int)json_array_size(json_object_get(o, "input_formats"));
        } else {
            static const char *const same[] = { "function", "format", "overflow", "input_formats", "source", "params" };
            for (size_t k = 0; k < FL_ARRAY_LEN(same); k++)
                if (!json_equal(json_object_get(head, same[k]), json_object_get(o, same[k]))) {
                    fprintf(stderr, "fp8lab %s: %s: '%s' differs from the first report's; not shards of one run\n", cmd,
                            argv[i], same[k]);
                    rc = FL_EXIT_FAIL;
                }
        }
        fl_ulp_report r;
        if (rc == FL_EXIT_OK && report_from_json(&r, o, n_inputs, err, sizeof err)) {
            fprintf(stderr, "fp8lab %s: %s: %s\n", cmd, argv[i], err);
            rc = FL_EXIT_FAIL;
        }
        json_t *sh = json_object_get(o, "shards");
        for (size_t k = 0; rc == FL_EXIT_OK && k < json_array_size(sh); k++) {
            json_t *a = json_array_get(sh, k);
            const json_int_t lo = json_integer_value(json_array_get(a, 0)), hi = json_integer_value(json_array_get(a, 1));
            for (size_t q = 0; q < json_array_size(shards); q++) {
                json_t *b = json_array_get(shards, q);
                const json_int_t l2 = json_integer_value(json_array_get(b, 0)), h2 = json_integer_value(json_array_get(b, 1));
                if (lo < h2 && l2 < hi) {
                    fprintf(stderr, "fp8lab %s: %s: shard [%lld, %lld) overlaps [%lld, %lld) of an earlier report\n", cmd,
                            argv[i], (long long)lo, (long long)hi, (long long)l2, (long long)h2);
                    rc = FL_EXIT_FAIL;
                }
            }
            json_array_append(shards, a);
        }
        if (rc == FL_EXIT_OK)
            fl_ulp_report_merge(&total, &r);
        if (o != head)
            json_decref(o);
    }
    if (!head) {
        json_decref(shards);
        return rc == FL_EXIT_OK ? fl_cli_usage_error(cmd, "--merge needs report files") : rc;
    }
    if (rc == FL_EXIT_OK) {
        meta m;
        memset(&m, 0, sizeof m);
        m.fn_name = json_string_value(json_object_get(head, "function"));
        fl_format_parse(&m.fmt, json_string_value(json_object_get(head, "format")));
        m.ovf = !strcmp(json_string_value(json_object_get(head, "overflow")), "saturate") ? FL_OVF_SATURATE
                                                                                          : FL_OVF_NOSATURATE;
        m.n_inputs = n_inputs;
        for (int k = 0; k < n_inputs && k < FL_ULP_MAX_INPUTS; k++) {
            const char *s = json_string_value(json_array_get(json_object_get(head, "input_formats"), (size_t)k));
            fl_format f;
            m.in_kind[k] = s && !strcmp(s, "f64") ? KIND_F64 : s && !fl_format_parse(&f, s) ? (int)f : FL_FMT_FP32;
        }
        m.source = json_string_value(json_object_get(head, "source"));
        snprintf(m.params, sizeof m.params, "%s", json_string_value(json_object_get(head, "params")));
        m.shards = shards;
        json_t *rl = json_object_get(head, "row_len");
        m.row_len = json_is_integer(rl) && json_integer_value(rl) > 0 ? (long)json_integer_value(rl) : 0;
        emit_report(&total, &m, NULL, T, gated, json);
        if (gated && (total.max_ulp > T || total.mismatched_special))
            rc = FL_EXIT_GATE;
    }
    json_decref(head);
    json_decref(shards);
    return rc;
}

/* ---- main ------------------------------------------------------------------------------------------- */

static int parse_range(uint64_t *lo, uint64_t *hi, const char *s)
{
    const char *colon = strchr(s, ':');
    if (!colon)
        return -1;
    char a[64];
    const size_t la = (size_t)(colon - s);
    if (la == 0 || la >= sizeof a)
        return -1;
    memcpy(a, s, la);
    a[la] = 0;
    unsigned long long x, y;
    if (fl_cli_parse_u64(&x, a) || fl_cli_parse_u64(&y, colon + 1) || y < x)
        return -1;
    *lo = x;
    *hi = y;
    return 0;
}

int fl_cmd_ulp(int argc, char **argv)
{
    const char *cmd = "ulp";
    const char *fn_name = NULL, *impl_name = NULL;
    int fmt = -1, in_pat = -1, out_pat = -1, ovf_set = 0, json = 0, mpfr_only = 0, exhaustive = 0, merge = 0;
    int no_progress = 0, gated = 0, range_set = 0, list = 0, threads = 0;
    fl_overflow ovf = FL_OVF_SATURATE;
    double T = 0;
    uint64_t lo = 0, hi = 0, nsample = 0, seed = 0;
    int sample_set = 0;
    source ins[FL_ULP_MAX_INPUTS], outs;
    memset(ins, 0, sizeof ins);
    memset(&outs, 0, sizeof outs);
    int n_ins = 0, have_out = 0;
    source *last_file = NULL;
    const char *param_args[16];
    int n_params = 0;
    long row_len_arg = 0;    /* --row-len */
    int dist = -1;           /* --dist */
    const char *save_prefix = NULL, *wrt_arg = NULL;
    unsigned long long index_base = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const int has = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            return FL_EXIT_OK;
        } else if (!strcmp(a, "--merge")) {
            merge = i;
            break;
        } else if (!strcmp(a, "--list")) {
            list = 1;
        } else if (!strcmp(a, "--format") || !strcmp(a, "--input-format") || !strcmp(a, "--output-format")) {
            fl_format f;
            if (!has || fl_format_parse(&f, argv[i + 1]))
                return fl_cli_usage_error(cmd, "%s needs a format name (formats: %s)", a, fl_format_names());
            i++;
            if (f == FL_FMT_E8M0)
                return fl_cli_usage_error(cmd, "e8m0 (a scale format) is not supported by %s", a);
            if (a[2] == 'f')
                fmt = f;
            else if (a[2] == 'i')
                in_pat = f;
            else
                out_pat = f;
        } else if (!strcmp(a, "--inputs") || !strcmp(a, "--outputs")) {
            if (!has)
                return fl_cli_usage_error(cmd, "%s needs a file", a);
            if (a[2] == 'i') {
                if (n_ins == FL_ULP_MAX_INPUTS)
                    return fl_cli_usage_error(cmd, "at most %d --inputs", FL_ULP_MAX_INPUTS);
                last_file = &ins[n_ins++];
            } else {
                if (have_out)
                    return fl_cli_usage_error(cmd, "--outputs given twice");
                have_out = 1;
                last_file = &outs;
            }
            last_file->path = argv[++i];
        } else if (!strcmp(a, "--tensor")) {
            if (!has || !last_file)
                return fl_cli_usage_error(cmd, "--tensor NAME follows the --inputs/--outputs file it names a tensor of");
            last_file->tensor = argv[++i];
        } else if (!strcmp(a, "--impl")) {
            if (!has)
                return fl_cli_usage_error(cmd, "--impl needs a name (see --list)");
            impl_name = argv[++i];
        } else if (!strcmp(a, "--exhaustive")) {
            exhaustive = 1;
        } else if (!strcmp(a, "--range")) {
            if (!has || parse_range(&lo, &hi, argv[i + 1]))
                return fl_cli_usage_error(cmd, "--range needs LO:HI with LO <= HI%s%s%s", has ? " (got '" : "",
                                          has ? argv[i + 1] : "", has ? "')" : "");
            i++;
            range_set = 1;
        } else if (!strcmp(a, "--sample") || !strcmp(a, "--seed") || !strcmp(a, "--threads")) {
            unsigned long long v;
            if (!has || fl_cli_parse_u64(&v, argv[i + 1]))
                return fl_cli_usage_error(cmd, "%s needs a non-negative integer", a);
            i++;
            if (a[3] == 'a') {
                nsample = v;
                sample_set = 1;
            } else if (a[3] == 'e') {
                seed = v;
            } else {
                threads = (int)v;
            }
        } else if (!strcmp(a, "--row-len")) {
            unsigned long long v;
            if (!has || fl_cli_parse_u64(&v, argv[i + 1]) || v == 0 || v >= (1ull << 24))
                return fl_cli_usage_error(cmd, "--row-len needs a row length 1 .. 2^24 - 1");
            i++;
            row_len_arg = (long)v;
        } else if (!strcmp(a, "--dist")) {
            dist = -1;
            for (int d = 0; has && d < DIST_COUNT; d++)
                if (!strcmp(argv[i + 1], dist_names[d]))
                    dist = d;
            if (dist < 0)
                return fl_cli_usage_error(cmd, "--dist needs normal, heavy or cancel");
            i++;
        } else if (!strcmp(a, "--save")) {
            if (!has)
                return fl_cli_usage_error(cmd, "--save needs a file prefix");
            save_prefix = argv[++i];
        } else if (!strcmp(a, "--index-base")) {
            if (!has || fl_cli_parse_u64(&index_base, argv[i + 1]))
                return fl_cli_usage_error(cmd, "--index-base needs a non-negative integer");
            i++;
        } else if (!strcmp(a, "--wrt")) {
            if (!has)
                return fl_cli_usage_error(cmd, "--wrt needs an input name (x, g, u)");
            wrt_arg = argv[++i];
        } else if (!strcmp(a, "--param")) {
            if (!has || !strchr(argv[i + 1], '=') || n_params == 16)
                return fl_cli_usage_error(cmd, "--param needs NAME=VALUE");
            param_args[n_params++] = argv[++i];
        } else if (!strcmp(a, "--saturate") || !strcmp(a, "--no-saturate")) {
            ovf = a[2] == 's' ? FL_OVF_SATURATE : FL_OVF_NOSATURATE;
            ovf_set = 1;
        } else if (!strcmp(a, "--max-ulp")) {
            if (!has || fl_cli_parse_double(&T, argv[i + 1]) || !(T >= 0))
                return fl_cli_usage_error(cmd, "--max-ulp needs a non-negative number");
            i++;
            gated = 1;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--mpfr-only")) {
            mpfr_only = 1;
        } else if (!strcmp(a, "--no-progress")) {
            no_progress = 1;
        } else if (a[0] == '-' && a[1]) {
            return fl_cli_usage_error(cmd, "unknown option '%s'", a);
        } else {
            if (fn_name)
                return fl_cli_usage_error(cmd, "unexpected argument '%s' (FN is '%s')", a, fn_name);
            fn_name = a;
        }
    }
    if (list) {
#if __has_include("twins.h")
        printf("the kernels' CPU twins (kernels/twins.h):\n");
        for (size_t i = 0; i < fl_twin_count; i++)
            printf("  %-28s %-13s %s -> %s   %s\n", fl_twins[i].name, fl_twins[i].ref_fn,
                   fl_format_name(fl_twins[i].in_fmt[0]), fl_format_name(fl_twins[i].out_fmt), fl_twins[i].summary);
#endif
        printf("plain C examples (--impl NAME):\n");
        for (size_t i = 0; i < FL_ARRAY_LEN(impls); i++) {
            printf("  %-28s %-13s %s -> %s   %s\n", impls[i].name, impls[i].fn, fl_format_name(impls[i].in_fmt[0]),
                   fl_format_name(impls[i].out_fmt), impls[i].what);
        }
        printf("fast path (double-double, proven bounds): silu sigmoid tanh gelu gelu_tanh swiglu\n");
        return FL_EXIT_OK;
    }
    if (merge) {
        /* options before --merge apply; the files follow it */
        for (int i = merge + 1; i < argc; i++) {
            if (!strcmp(argv[i], "--json"))
                json = 1;
            else if (!strcmp(argv[i], "--max-ulp")) {
                if (i + 1 >= argc || fl_cli_parse_double(&T, argv[i + 1]) || !(T >= 0))
                    return fl_cli_usage_error(cmd, "--max-ulp needs a non-negative number");
                gated = 1;
                argv[i + 1] = (char *)"-";
                i++;
            } else if (argv[i][0] == '-' && argv[i][1])
                return fl_cli_usage_error(cmd, "unknown option '%s' after --merge", argv[i]);
        }
        return cmd_merge(argc, argv, merge + 1, json, gated, T);
    }

    /* the implementation, function and formats */
    const impl_desc *impl = NULL;
    if (impl_name) {
        impl = impl_lookup(impl_name);
        if (!impl)
            return fl_cli_usage_error(cmd, "unknown implementation '%s' (see --list)", impl_name);
        if (n_ins || have_out)
            return fl_cli_usage_error(cmd, "--impl and --inputs/--outputs exclude each other");
        if (wrt_arg)
            return fl_cli_usage_error(cmd, "--wrt goes with --inputs/--outputs (an implementation names its own)");
        if (index_base)
            return fl_cli_usage_error(cmd, "--index-base goes with --inputs/--outputs");
        if (!fn_name)
            fn_name = impl->fn;
        else if (strcmp(fn_name, impl->fn))
            return fl_cli_usage_error(cmd, "implementation '%s' computes %s, not %s", impl->name, impl->fn, fn_name);
        if (fmt < 0)
            fmt = impl->out_fmt;
        else if (fmt != (int)impl->out_fmt)
            return fl_cli_usage_error(cmd, "implementation '%s' writes %s, not %s", impl->name,
                                      fl_format_name(impl->out_fmt), fl_format_name((fl_format)fmt));
        if (exhaustive + range_set + sample_set != 1)
            return fl_cli_usage_error(cmd, "--impl needs exactly one of --exhaustive, --range LO:HI, --sample N");
    } else {
        if (!n_ins || !have_out)
            return fl_cli_usage_error(cmd, "give --inputs and --outputs arrays, or --impl NAME (see --help)");
        if (exhaustive || sample_set)
            return fl_cli_usage_error(cmd, "--exhaustive and --sample go with --impl; for arrays use --range");
    }
    if (!fn_name)
        return fl_cli_usage_error(cmd, "which function? (FN, e.g. silu)");
    if (out_pat >= 0 && fmt >= 0 && out_pat != fmt)
        return fl_cli_usage_error(cmd, "--output-format %s differs from --format %s", fl_format_name((fl_format)out_pat),
                                  fl_format_name((fl_format)fmt));
    if (fmt < 0)
        fmt = out_pat;
    if (fmt < 0)
        return fl_cli_usage_error(cmd, "--format FMT (the outputs' format) is required");
    job j;
    memset(&j, 0, sizeof j);
    j.fn = fl_ref_lookup(fn_name);
    if (!j.fn)
        return fl_cli_usage_error(cmd, "unknown function '%s'", fn_name);
    const char *wrt = impl ? impl->wrt : wrt_arg;
    j.ev = fl_ref_find_eval(j.fn, wrt ? wrt : "");
    if (!j.ev)
        return fl_cli_usage_error(cmd, "%s has no derivative w.r.t. '%s'", fn_name, wrt);
    j.fmt = (fl_format)fmt;
    j.n_inputs = j.fn->n_inputs;
    fl_ref_params_init(&j.params, j.fn);
    char params_str[256] = "";
    if (impl && impl->params && *impl->params) {
        /* the twin's own reference parameters first ("name=value,..."); --param may override */
        char buf[256];
        snprintf(buf, sizeof buf, "%s", impl->params);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            char *eq = strchr(tok, '=');
            if (!eq)
                continue;
            *eq = 0;
            if (fl_ref_params_set(&j.params, tok, eq + 1))
                return fl_cli_usage_error(cmd, "implementation '%s' names a bad parameter '%s'", impl->name, tok);
            *eq = '=';
        }
        snprintf(params_str, sizeof params_str, "%s", impl->params);
    }
    for (int p = 0; p < n_params; p++) {
        char name[64];
        const char *eq = strchr(param_args[p], '=');
        snprintf(name, sizeof name, "%.*s", (int)(eq - param_args[p]), param_args[p]);
        if (fl_ref_params_set(&j.params, name, eq + 1))
            return fl_cli_usage_error(cmd, "bad parameter '%s' (%s takes: %s)", param_args[p], fn_name,
                                      *j.fn->params ? j.fn->params : "none");
        snprintf(params_str + strlen(params_str), sizeof params_str - strlen(params_str), "%s%s",
                 *params_str ? "," : "", param_args[p]);
    }
    if (wrt)
        snprintf(params_str + strlen(params_str), sizeof params_str - strlen(params_str), "%sd/d%s",
                 *params_str ? "," : "", wrt);
    j.ovf = ovf_set ? ovf : fl_format_get(j.fmt)->bits <= 8 ? FL_OVF_SATURATE : FL_OVF_NOSATURATE;
    j.fast = !*params_str && !j.fn->rowwise ? fl_fast_lookup(fn_name) : NULL;
    if (j.fast && (j.fast->eval ? 1 : 2) != j.fn->n_inputs)
        j.fast = NULL;
    fl_fast_fmt_init(&j.ff, j.fmt, j.ovf);
    if (threads > 0)
        omp_set_num_threads(threads);

    char err[512];
    sweep sw;
    memset(&sw, 0, sizeof sw);
    char source_desc[600];
    char recheck[1024] = "";
    if (impl) {
        if (!j.fn->rowwise != !impl->rowwise || (impl->rowwise && !impl->trun))
            return fl_cli_usage_error(cmd, "implementation '%s' is %s, %s is not", impl->name,
                                      impl->rowwise ? "row-wise" : "elementwise", fn_name);
        j.n_inputs = impl->n_inputs; /* a derivative's evaluator may read more inputs than the value's */
        if (impl->n_inputs != j.ev->n_inputs && impl->n_inputs != j.fn->n_inputs)
            return fl_cli_usage_error(cmd, "implementation '%s' takes %d inputs, %s %d", impl->name, impl->n_inputs,
                                      fn_name, j.n_inputs);
    }
    if (!(impl && impl->rowwise) && (row_len_arg || dist >= 0 || save_prefix))
        return fl_cli_usage_error(cmd, "--row-len, --dist and --save go with --impl of a row-wise implementation");
    rowgen rg;
    memset(&rg, 0, sizeof rg);
    row_save rsave;
    memset(&rsave, 0, sizeof rsave);
    if (impl && impl->rowwise) {
        /* rows of the seeded stream: --sample ROWS is rows 0..ROWS-1, --range LO:HI rows LO..HI-1 */
        if (exhaustive)
            return fl_cli_usage_error(cmd, "row-wise implementations take --sample ROWS or --range LO:HI (rows), not --exhaustive");
        j.row_len = row_len_arg ? row_len_arg : RG_DEFAULT_ROW_LEN;
        const uint64_t r_lo = range_set ? lo : 0, r_hi = range_set ? hi : nsample;
        if (r_hi > (UINT64_MAX >> 1) / (uint64_t)j.row_len)
            return fl_cli_usage_error(cmd, "too many rows");
        for (int k = 0; k < j.n_inputs; k++)
            j.in_kind[k] = impl->in_fmt[k];
        rg.dist = dist < 0 ? DIST_NORMAL : (row_dist)dist;
        rg.seed = seed;
        rg.H = j.row_len;
        rg.n_inputs = j.n_inputs;
        rg.fmt[0] = impl->in_fmt[0];
        rg.fmt[1] = impl->in_fmt[j.n_inputs > 1 ? 1 : 0];
        rg.p = &j.params;
        sw.impl = impl;
        sw.lo = r_lo * (uint64_t)j.row_len;
        sw.hi = r_hi * (uint64_t)j.row_len;
        snprintf(source_desc, sizeof source_desc, "impl %s, rows of %ld, dist %s, seed %llu", impl->name, j.row_len,
                 dist_names[rg.dist], (unsigned long long)seed);
        if (save_prefix && fl_ulp_workers_hook && fl_ulp_workers_hook->size > 1)
            return fl_cli_usage_error(cmd, "--save writes from one process (not under MPI)");
        if (save_prefix) {
            const char *what[3] = { "x", "dy", "y" };
            for (int f = 0; f < 3; f++) {
                if (f == 1 && j.n_inputs < 2)
                    continue;
                const fl_format fm = f == 2 ? j.fmt : impl->in_fmt[f];
                fl_array hdr;
                memset(&hdr, 0, sizeof hdr);
                const int sb = fl_format_storage_bits(fm);
                hdr.dtype = sb <= 8 ? FL_DT_U8 : sb <= 16 ? FL_DT_U16 : FL_DT_U32;
                hdr.ndim = 2;
                hdr.shape[0] = (int64_t)(r_hi - r_lo);
                hdr.shape[1] = j.row_len;
                snprintf(rsave.path[f], sizeof rsave.path[f], "%s%s.npy", save_prefix, what[f]);
                rsave.w[f] = fl_npy_writer_open(rsave.path[f], &hdr, err, sizeof err);
                if (!rsave.w[f]) {
                    fprintf(stderr, "fp8lab %s: %s\n", cmd, err);
                    for (int q = 0; q < f; q++)
                        fl_npy_writer_abort(rsave.w[q]);
                    return FL_EXIT_FAIL;
                }
            }
        }
    } else if (impl) {
        int total_bits = 0;
        for (int k = 0; k < j.n_inputs; k++) {
            j.in_kind[k] = impl->in_fmt[k];
            sw.in_bits[k] = fl_format_storage_bits(impl->in_fmt[k]);
            total_bits += sw.in_bits[k];
        }
        if (j.n_inputs > 1 && total_bits > 32 && !sample_set && !range_set)
            return fl_cli_usage_error(cmd, "%d input bits: too many for --exhaustive (pairs of <= 16-bit inputs only); use --sample or --range", total_bits);
        const uint64_t space = total_bits >= 64 ? 0 : 1ull << total_bits;
        sw.impl = impl;
        sw.space = space;
        if (exhaustive) {
            sw.lo = 0;
            sw.hi = space;
        } else if (range_set) {
            if (hi > space)
                return fl_cli_usage_error(cmd, "--range beyond the %d-bit input space (0x%llx)", total_bits,
                                          (unsigned long long)space);
            sw.lo = lo;
            sw.hi = hi;
        } else {
            sw.sample = 1;
            sw.seed = seed;
            sw.lo = 0;
            sw.hi = nsample;
        }
        if (sw.sample)
            snprintf(source_desc, sizeof source_desc, "impl %s, sample %llu seed %llu", impl->name,
                     (unsigned long long)nsample, (unsigned long long)seed);
        else
            snprintf(source_desc, sizeof source_desc, "impl %s", impl->name);
    } else {
        for (int k = 0; k < n_ins; k++)
            if (open_source(&ins[k], cmd, in_pat, err, sizeof err)) {
                fprintf(stderr, "fp8lab %s: %s\n", cmd, err);
                for (int q = 0; q <= k; q++)
                    close_source(&ins[q]);
                return FL_EXIT_FAIL;
            }
        /* uint8/uint16/uint32 outputs are bit patterns of FMT unless --output-format says otherwise */
        if (open_source(&outs, cmd, out_pat >= 0 ? out_pat : fmt, err, sizeof err)) {
            fprintf(stderr, "fp8lab %s: %s\n", cmd, err);
            for (int q = 0; q < n_ins; q++)
                close_source(&ins[q]);
            close_source(&outs);
            return FL_EXIT_FAIL;
        }
        int bad = 0;
        if (n_ins != j.n_inputs) {
            fl_cli_usage_error(cmd, "%s takes %d input%s (%s), got %d --inputs", fn_name, j.n_inputs,
                               j.n_inputs > 1 ? "s" : "", j.fn->inputs, n_ins);
            bad = FL_EXIT_USAGE;
        }
        for (int k = 0; k < n_ins && !bad; k++) {
            j.in_kind[k] = ins[k].kind;
            if (ins[k].count != outs.count) {
                fprintf(stderr, "fp8lab %s: %s has %llu elements but %s has %llu\n", cmd, ins[k].path,
                        (unsigned long long)ins[k].count, outs.path, (unsigned long long)outs.count);
                bad = FL_EXIT_FAIL;
            }
        }
        if (!bad && j.fn->rowwise) {
            if (outs.ndim < 1 || outs.shape[outs.ndim - 1] <= 0) {
                fprintf(stderr, "fp8lab %s: %s: a row-wise function needs rows (an array of rank >= 1)\n", cmd,
                        outs.path);
                bad = FL_EXIT_FAIL;
            } else {
                j.row_len = (long)outs.shape[outs.ndim - 1];
            }
        }
        if (!bad && range_set && (hi > outs.count || (j.row_len > 0 && (lo % (uint64_t)j.row_len || hi % (uint64_t)j.row_len)))) {
            fl_cli_usage_error(cmd, "--range %llu:%llu outside the %llu elements%s", (unsigned long long)lo,
                               (unsigned long long)hi, (unsigned long long)outs.count,
                               j.row_len > 0 ? " or not on row boundaries" : "");
            bad = FL_EXIT_USAGE;
        }
        if (bad) {
            for (int q = 0; q < n_ins; q++)
                close_source(&ins[q]);
            close_source(&outs);
            return bad;
        }
        if (!range_set) {
            lo = 0;
            hi = outs.count;
        }
        snprintf(source_desc, sizeof source_desc, "outputs %s", outs.path);
    }

    /* workers (MPI): this process's share */
    const fl_ulp_workers *wk = fl_ulp_workers_hook;
    uint64_t *plo = impl ? &sw.lo : &lo, *phi = impl ? &sw.hi : &hi;
    const uint64_t all_lo = *plo, all_hi = *phi;
    if (wk && wk->size > 1) {
        const uint64_t n = all_hi - all_lo;
        uint64_t unit = j.row_len > 0 ? (uint64_t)j.row_len : 1;
        const uint64_t units = n / unit;
        *plo = all_lo + units * (uint64_t)wk->rank / (uint64_t)wk->size * unit;
        *phi = wk->rank == wk->size - 1 ? all_hi : all_lo + units * (uint64_t)(wk->rank + 1) / (uint64_t)wk->size * unit;
    }

    const int nthreads = omp_get_max_threads();
    tctx *ctxs = aligned_alloc(64, ((size_t)nthreads * sizeof(tctx) + 63) / 64 * 64);
    for (int t = 0; t < nthreads; t++)
        tctx_init(&ctxs[t], &j);
    progress pg = { 0, *phi - *plo, 0, now_s(), 0 };
    /* row-wise outputs cost ~row_len MPFR operations each: a bar from one row of 4096 on */
    pg.on = !no_progress && isatty(2) && pg.total >= (j.row_len > 0 && impl ? (uint64_t)1 << 12 : (uint64_t)1 << 22) &&
            (!wk || wk->rank == 0);
    const double t0 = now_s();
    int rc = FL_EXIT_OK;
    if (impl && impl->rowwise) {
        if (run_rows(ctxs, &j, &sw, &rg, &pg, save_prefix ? &rsave : NULL, err, sizeof err)) {
            fprintf(stderr, "fp8lab %s: %s\n", cmd, err);
            rc = FL_EXIT_FAIL;
        }
        for (int f = 0; f < 3; f++) {
            if (!rsave.w[f])
                continue;
            if (rc != FL_EXIT_OK) {
                fl_npy_writer_abort(rsave.w[f]);
            } else if (fl_npy_writer_commit(rsave.w[f], err, sizeof err)) {
                fprintf(stderr, "fp8lab %s: %s\n", cmd, err);
                rc = FL_EXIT_FAIL;
            }
            rsave.w[f] = NULL;
        }
    } else if (impl)
        run_sweep(ctxs, &j, &sw, &pg, mpfr_only);
    else if (run_arrays(ctxs, &j, ins, &outs, lo, hi, &pg, mpfr_only, err, sizeof err)) {
        fprintf(stderr, "fp8lab %s: %s\n", cmd, err);
        rc = FL_EXIT_FAIL;
    }
    progress_end(&pg);
    const double secs = now_s() - t0;
    fl_ulp_report total;
    fl_ulp_report_init(&total);
    uint64_t stats[3] = { 0, 0, 0 }; /* fast, mpfr, failed */
    for (int t = 0; t < nthreads; t++) {
        fl_ulp_report_merge(&total, &ctxs[t].rep);
        stats[0] += ctxs[t].n_fast;
        stats[1] += ctxs[t].n_mpfr;
        stats[2] += ctxs[t].n_fail;
        tctx_clear(&ctxs[t], &j);
    }
    free(ctxs);
    if (wk && wk->size > 1) {
        wk->reduce(&total, stats, 3, wk->ctx);
        *plo = all_lo;
        *phi = all_hi;
        if (wk->rank != 0) {
            if (!impl) {
                for (int q = 0; q < n_ins; q++)
                    close_source(&ins[q]);
                close_source(&outs);
            }
            return rc;
        }
    }
    if (rc == FL_EXIT_OK && stats[2]) {
        fprintf(stderr, "fp8lab %s: MPFR could not decide %llu outputs (no precision up to %ld bits sufficed)\n", cmd,
                (unsigned long long)stats[2], (long)FL_REF_MAX_PREC);
        rc = FL_EXIT_FAIL;
    }
    if (rc == FL_EXIT_OK) {
        meta m;
        memset(&m, 0, sizeof m);
        m.fn_name = fn_name;
        m.fmt = j.fmt;
        m.ovf = j.ovf;
        m.n_inputs = j.n_inputs;
        memcpy(m.in_kind, j.in_kind, sizeof m.in_kind);
        m.source = source_desc;
        snprintf(m.params, sizeof m.params, "%s", params_str);
        m.lo = impl ? sw.lo : lo;
        m.hi = impl ? sw.hi : hi;
        m.row_len = j.row_len;
        if (total.n_worst && total.worst[0].ulp > 0) {
            const fl_ulp_case *w = &total.worst[0];
            int k = snprintf(recheck, sizeof recheck, "fp8lab ulp %s --format %s", fn_name, fl_format_name(j.fmt));
            for (int p = 0; p < n_params; p++)
                k += snprintf(recheck + k, sizeof recheck - (size_t)k, " --param %s", param_args[p]);
            if (impl && impl->rowwise) {
                const unsigned long long row = w->index / (uint64_t)j.row_len;
                snprintf(recheck + k, sizeof recheck - (size_t)k, " --impl %s --row-len %ld --dist %s --seed %llu --range %llu:%llu",
                         impl->name, j.row_len, dist_names[rg.dist], (unsigned long long)seed, row, row + 1);
            } else if (impl) {
                uint64_t id = 0;
                for (int q = 0; q < j.n_inputs; q++)
                    id = (sw.in_bits[q] >= 64 ? 0 : id << sw.in_bits[q]) | w->in[q];
                snprintf(recheck + k, sizeof recheck - (size_t)k, " --impl %s --range 0x%llx:0x%llx", impl->name,
                         (unsigned long long)id, (unsigned long long)id + 1);
            } else {
                for (int q = 0; q < n_ins; q++)
                    k += snprintf(recheck + k, sizeof recheck - (size_t)k, " --inputs %s", ins[q].path);
                snprintf(recheck + k, sizeof recheck - (size_t)k, " --outputs %s --range %llu:%llu", outs.path,
                         (unsigned long long)w->index, (unsigned long long)w->index + 1);
            }
        }
        if (index_base) { /* after the recheck line, which names the file's own element */
            m.lo += index_base, m.hi += index_base;
            for (int q = 0; q < total.n_worst; q++)
                total.worst[q].index += index_base;
        }
        emit_report(&total, &m, recheck, T, gated, json);
        /* how the run went (not part of the report, which is the same whichever judge decided) */
        fprintf(json ? stderr : stdout,
                "  run: %.2f s, %d thread%s%s; %llu outputs decided by the fast path, %llu by MPFR%s\n", secs, nthreads,
                nthreads > 1 ? "s" : "", wk && wk->size > 1 ? " per process" : "", (unsigned long long)stats[0],
                (unsigned long long)stats[1], mpfr_only ? " (--mpfr-only)" : "");
        if (gated && (total.max_ulp > T || total.mismatched_special))
            rc = FL_EXIT_GATE;
    }
    if (!impl) {
        for (int q = 0; q < n_ins; q++)
            close_source(&ins[q]);
        close_source(&outs);
    }
    return rc;
}
