/* cmd_ref.c — `fp8lab ref`: the MPFR reference (reference/ref.h) on .npy arrays or on values given on
 * the command line.  Every output element is the correctly rounded encoding of the exact result. */
#include "commands.h"
#include "common/cli.h"
#include "npy.h"
#include "ref.h"
#include "round_mpfr.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const help =
    "usage: fp8lab ref FN --format FMT [--round rne|rtz|up|down] [--saturate|--no-saturate]\n"
    "                     [--param NAME=VALUE]... [--derivative [--wrt NAME]] [--input-format FMT]\n"
    "                     IN.npy [IN2.npy [IN3.npy]] OUT.npy\n"
    "       fp8lab ref FN --print [--digits N] [--param NAME=VALUE]... [--derivative [--wrt NAME]] VALUES...\n"
    "       fp8lab ref --list\n"
    "\n"
    "Evaluates FN exactly (MPFR, Ziv loop) and rounds each result once into FMT.\n"
    "  inputs         float32, float64 or float16 .npy; with --input-format FMT, encodings of FMT\n"
    "                 (uint8 for 8-bit formats, uint16 for bf16, float16/uint16 for fp16, float32/uint32\n"
    "                 for fp32).  Two-input gates take G.npy U.npy; smooth_swiglu G U S, where S has the\n"
    "                 shape of G (elementwise), the length of the last axis (per channel) or one value\n"
    "                 per row (per token: shape (..., 1) or the number of rows).\n"
    "  OUT.npy        as `fp8lab convert`: float32 for fp32, float16 for fp16, uint16 for bf16, uint8\n"
    "                 for 8-bit and narrower formats.\n"
    "  --param        alpha, beta, order (1..4), a0..a4, eps, tau; see --list for each function's.\n"
    "  --derivative   the derivative instead of the value; --wrt x|g|u|s|alpha|a0..a4 (default: the\n"
    "                 first input).  Row-wise functions (polynorm, softmax, pattention) give the\n"
    "                 vector-Jacobian product with an upstream gradient: IN.npy DY.npy OUT.npy.\n"
    "  --saturate     overflow gives +-max (default for 8-bit and narrower); --no-saturate IEEE\n"
    "                 (default for fp32/bf16/fp16).\n"
    "  --print        print the exact value (decimal, --digits, default 40, and hex) of FN at each\n"
    "                 VALUE (groups of 2 or 3 for gates; one row for row-wise functions), with its\n"
    "                 fp32 and bf16 encodings.\n";

static void list_functions(void)
{
    for (int i = 0; i < FL_REF_COUNT; i++) {
        const fl_ref_fn *fn = &fl_ref_table[i];
        printf("%-14s (%s)%s\n    %s\n", fn->name, fn->inputs, fn->rowwise ? "  row-wise over the last axis" : "",
               fn->definition);
        if (fn->params[0])
            printf("    parameters: %s\n", fn->params);
        printf("    derivatives (--wrt):");
        for (int e = 1; e < FL_REF_MAX_EVALS && fn->evals[e].wrt; e++)
            printf(" %s", fn->evals[e].wrt);
        if (!fn->evals[1].wrt)
            printf(" none (value only)");
        printf("%s\n", fn->rowwise ? "  (vector-Jacobian product with DY.npy for x)" : "");
    }
}

/* element i of an input array as an exact mpfr value */
static int load(mpfr_ptr x, const fl_array *a, size_t i, int have_fmt, fl_format fmt)
{
    if (have_fmt) {
        uint32_t c;
        switch (a->dtype) {
        case FL_DT_U8: c = ((const uint8_t *)a->data)[i]; break;
        case FL_DT_U16:
        case FL_DT_F16: c = ((const uint16_t *)a->data)[i]; break;
        case FL_DT_U32:
        case FL_DT_F32: c = ((const uint32_t *)a->data)[i]; break;
        default: return -1;
        }
        fl_mpfr_decode(x, fmt, c);
        return 0;
    }
    switch (a->dtype) {
    case FL_DT_F32: mpfr_set_flt(x, ((const float *)a->data)[i], MPFR_RNDN); return 0;
    case FL_DT_F64: mpfr_set_d(x, ((const double *)a->data)[i], MPFR_RNDN); return 0;
    case FL_DT_F16: fl_mpfr_decode(x, FL_FMT_FP16, ((const uint16_t *)a->data)[i]); return 0;
    default: return -1;
    }
}

static void store(fl_array *o, size_t i, uint32_t c)
{
    switch (fl_dtype_size(o->dtype)) {
    case 1: ((uint8_t *)o->data)[i] = (uint8_t)c; break;
    case 2: ((uint16_t *)o->data)[i] = (uint16_t)c; break;
    default: ((uint32_t *)o->data)[i] = c; break;
    }
}

static int print_values(const fl_ref_fn *fn, const fl_ref_evaluator *ev, const fl_ref_params *p, int digits,
                        int nv, char **vals)
{
    const mpfr_prec_t prec = (mpfr_prec_t)ceil(digits * 3.3219280948873622) + 2;
    const int k = ev->n_inputs;
    for (int i = 0; i < nv; i++) {
        double d;
        if (fl_cli_parse_double(&d, vals[i]))
            return fl_cli_usage_error("ref", "bad value '%s'", vals[i]);
    }
    if (fn->rowwise && k > 1)
        return fl_cli_usage_error("ref", "--print does not take an upstream gradient; use .npy files");
    if (!fn->rowwise && nv % k)
        return fl_cli_usage_error("ref", "%s takes %d values per evaluation (%s)", fn->name, k, fn->inputs);
    mpfr_t y;
    mpfr_init2(y, prec);
    if (fn->rowwise) {
        mpfr_t *x = calloc((size_t)nv, sizeof *x);
        mpfr_srcptr *xp = calloc((size_t)nv, sizeof *xp);
        for (int i = 0; i < nv; i++) {
            double d = 0;
            mpfr_init2(x[i], 64);
            fl_cli_parse_double(&d, vals[i]); /* checked above */
            mpfr_set_d(x[i], d, MPFR_RNDN);
            xp[i] = x[i];
        }
        mpfr_srcptr const *rows[1] = { xp };
        for (long j = 0; j < nv; j++) {
            uint32_t e32 = 0, e16 = 0;
            fl_ref_value_row(y, ev->row, rows, nv, j, p);
            fl_ref_round_row(&e32, FL_FMT_FP32, FL_RND_NE, FL_OVF_NOSATURATE, ev->row, rows, nv, j, p, 0);
            fl_ref_round_row(&e16, FL_FMT_BF16, FL_RND_NE, FL_OVF_NOSATURATE, ev->row, rows, nv, j, p, 0);
            mpfr_printf("%s%s%s%s(row)[%ld] = %.*Rg = %Ra  fp32 0x%08x bf16 0x%04x\n", ev->wrt[0] ? "d/d" : "",
                        ev->wrt[0] ? ev->wrt : "", ev->wrt[0] ? " " : "", fn->name, j, digits, y, y, e32, e16);
        }
        for (int i = 0; i < nv; i++)
            mpfr_clear(x[i]);
        free(x);
        free(xp);
        mpfr_clear(y);
        return FL_EXIT_OK;
    }
    mpfr_t x[3];
    for (int i = 0; i < 3; i++)
        mpfr_init2(x[i], 64);
    mpfr_srcptr xs[3] = { x[0], x[1], x[2] };
    for (int v = 0; v < nv; v += k) {
        for (int i = 0; i < k; i++) {
            double d = 0;
            fl_cli_parse_double(&d, vals[v + i]); /* checked above */
            mpfr_set_d(x[i], d, MPFR_RNDN);
        }
        uint32_t e32 = 0, e16 = 0;
        fl_ref_value(y, ev->eval, xs, p);
        fl_ref_round(&e32, FL_FMT_FP32, FL_RND_NE, FL_OVF_NOSATURATE, ev->eval, xs, p);
        fl_ref_round(&e16, FL_FMT_BF16, FL_RND_NE, FL_OVF_NOSATURATE, ev->eval, xs, p);
        if (ev->wrt[0])
            printf("d/d%s ", ev->wrt);
        printf("%s(", fn->name);
        for (int i = 0; i < k; i++)
            printf("%s%s", i ? ", " : "", vals[v + i]);
        mpfr_printf(") = %.*Rg = %Ra  fp32 0x%08x bf16 0x%04x\n", digits, y, y, e32, e16);
    }
    for (int i = 0; i < 3; i++)
        mpfr_clear(x[i]);
    mpfr_clear(y);
    return FL_EXIT_OK;
}

/* index of the scale for element i of smooth_swiglu: elementwise, per channel or per token */
static int scale_mode(const fl_array *s, const fl_array *g, size_t *cols)
{
    size_t c = g->ndim ? (size_t)g->shape[g->ndim - 1] : 1;
    *cols = c;
    if (s->count == g->count)
        return 0;
    if (s->ndim >= 2 && s->shape[s->ndim - 1] == 1 && c && s->count == g->count / c)
        return 2;
    if (s->count == c)
        return 1;
    if (c && s->count == g->count / c)
        return 2;
    return -1;
}

typedef struct {
    const char *fname, *wrt;
    fl_format fmt, in_fmt;
    int have_fmt, have_in_fmt, deriv, print, sat, digits;
    fl_rounding rnd;
    const char *params[64];
    int nparams;
    char **vals; /* the positional arguments after FN: values (--print) or files */
    int nvals;
    char first_input[8]; /* --derivative without --wrt: FN's first input */
} ref_opts;

static const char *const ref_cmd = "ref";

/* Returns -1 to go on, else the exit status (help, --list, or a usage error). */
static int parse_ref_opts(ref_opts *o, int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const int has_val = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            return FL_EXIT_OK;
        } else if (!strcmp(a, "--list")) {
            list_functions();
            return FL_EXIT_OK;
        } else if (!strcmp(a, "--format") || !strcmp(a, "--input-format")) {
            const int out = !strcmp(a, "--format");
            if (!has_val || fl_format_parse(out ? &o->fmt : &o->in_fmt, argv[++i]))
                return fl_cli_usage_error(ref_cmd, "%s needs a format (%s)", a, fl_format_names());
            *(out ? &o->have_fmt : &o->have_in_fmt) = 1;
        } else if (!strcmp(a, "--round")) {
            if (!has_val || fl_rounding_parse(&o->rnd, argv[++i]) || o->rnd == FL_RND_SR)
                return fl_cli_usage_error(ref_cmd, "--round takes rne, rtz, up or down");
        } else if (!strcmp(a, "--saturate") || !strcmp(a, "--no-saturate")) {
            o->sat = !strcmp(a, "--saturate");
        } else if (!strcmp(a, "--param")) {
            if (!has_val || o->nparams == 64)
                return fl_cli_usage_error(ref_cmd, "--param needs NAME=VALUE");
            o->params[o->nparams++] = argv[++i];
        } else if (!strcmp(a, "--derivative")) {
            o->deriv = 1;
        } else if (!strcmp(a, "--wrt")) {
            if (!has_val)
                return fl_cli_usage_error(ref_cmd, "--wrt needs a name");
            o->wrt = argv[++i];
            o->deriv = 1;
        } else if (!strcmp(a, "--print")) {
            o->print = 1;
        } else if (!strcmp(a, "--digits")) {
            unsigned long long d;
            if (!has_val || fl_cli_parse_u64(&d, argv[++i]) || d < 1 || d > 10000)
                return fl_cli_usage_error(ref_cmd, "--digits takes 1..10000");
            o->digits = (int)d;
        } else if (a[0] == '-' && a[1] == '-') {
            return fl_cli_usage_error(ref_cmd, "unknown option '%s'", a);
        } else if (!o->fname) {
            o->fname = a;
        } else {
            o->vals[o->nvals++] = argv[i];
        }
    }
    return o->fname ? -1 : fl_cli_usage_error(ref_cmd, "missing function name (fp8lab ref --list)");
}

/* FN, its parameters and the evaluator (the value or a derivative).  Returns -1 to go on. */
static int resolve_ref(ref_opts *o, const fl_ref_fn **fn, fl_ref_params *p, const fl_ref_evaluator **ev)
{
    if (!(*fn = fl_ref_lookup(o->fname)))
        return fl_cli_usage_error(ref_cmd, "unknown function '%s' (fp8lab ref --list)", o->fname);
    fl_ref_params_init(p, *fn);
    for (int i = 0; i < o->nparams; i++) {
        char name[32];
        const char *eq = strchr(o->params[i], '=');
        if (!eq || eq - o->params[i] >= (long)sizeof name)
            return fl_cli_usage_error(ref_cmd, "--param takes NAME=VALUE, got '%s'", o->params[i]);
        memcpy(name, o->params[i], (size_t)(eq - o->params[i]));
        name[eq - o->params[i]] = 0;
        if (fl_ref_params_set(p, name, eq + 1))
            return fl_cli_usage_error(ref_cmd, "bad parameter '%s' (names: alpha beta order=1..4 a0..a4 eps tau)", o->params[i]);
    }
    if (o->deriv && !o->wrt) {
        const size_t l = strcspn((*fn)->inputs, ",");
        snprintf(o->first_input, sizeof o->first_input, "%.*s", (int)l, (*fn)->inputs);
        o->wrt = o->first_input;
    }
    if (!(*ev = fl_ref_find_eval(*fn, o->deriv ? o->wrt : "")))
        return fl_cli_usage_error(ref_cmd, "%s has no derivative with respect to '%s'", (*fn)->name, o->wrt);
    return -1;
}

/* Reads the n_in input arrays and checks their dtypes and shapes (smooth_swiglu's scales: *smode,
   *cols as scale_mode).  Returns 0, or FL_EXIT_FAIL after a message naming the file. */
static int read_ref_inputs(fl_array *in, int n_in, const ref_opts *o, const fl_ref_fn *fn, int *smode, size_t *cols)
{
    char err[512];
    char *const *files = o->vals;
    for (int i = 0; i < n_in; i++) {
        if (fl_npy_read(&in[i], files[i], err, sizeof err)) {
            fprintf(stderr, "fp8lab ref: %s\n", err);
            return FL_EXIT_FAIL;
        }
        const fl_dtype t = in[i].dtype;
        const int ok = o->have_in_fmt ? (t == FL_DT_U8 || t == FL_DT_U16 || t == FL_DT_U32 || t == FL_DT_F32 || t == FL_DT_F16)
                                      : (t == FL_DT_F32 || t == FL_DT_F64 || t == FL_DT_F16);
        if (!ok) {
            fprintf(stderr, "fp8lab ref: %s: dtype %s not accepted%s\n", files[i], fl_dtype_name(t),
                    o->have_in_fmt ? " for --input-format" : " (float32/float64/float16, or --input-format FMT)");
            return FL_EXIT_FAIL;
        }
    }
    *cols = 1, *smode = 0;
    for (int i = 1; i < n_in; i++) {
        if (fn->n_inputs == 3 && i == 2) {
            if ((*smode = scale_mode(&in[2], &in[0], cols)) < 0) {
                fprintf(stderr, "fp8lab ref: %s: %zu scales fit neither the elements, the channels nor the rows "
                                "of %s\n", files[2], in[2].count, files[0]);
                return FL_EXIT_FAIL;
            }
            continue;
        }
        if (in[i].count != in[0].count || in[i].ndim != in[0].ndim || memcmp(in[i].shape, in[0].shape, sizeof in[0].shape)) {
            fprintf(stderr, "fp8lab ref: %s and %s differ in shape\n", files[0], files[i]);
            return FL_EXIT_FAIL;
        }
    }
    return 0;
}

typedef struct {
    const fl_array *in;
    int n_in, smode, have_in_fmt;
    size_t cols;
    fl_format in_fmt, fmt;
    fl_rounding rnd;
    fl_overflow ovf;
    const fl_ref_evaluator *ev;
    const fl_ref_params *p;
} ref_job;

/* Every element, correctly rounded into out; returns the number the Ziv loop gave up on. */
static long eval_elementwise(const ref_job *j, fl_array *out)
{
    long failures = 0;
#pragma omp parallel reduction(+ : failures)
    {
        mpfr_t x[3];
        for (int k = 0; k < 3; k++)
            mpfr_init2(x[k], 64);
        mpfr_srcptr xs[3] = { x[0], x[1], x[2] };
#pragma omp for schedule(dynamic, 256)
        for (size_t i = 0; i < j->in[0].count; i++) {
            for (int k = 0; k < j->n_in; k++) {
                size_t ik = i;
                if (k == 2)
                    ik = j->smode == 0 ? i : j->smode == 1 ? i % j->cols : i / j->cols;
                load(x[k], &j->in[k], ik, j->have_in_fmt, j->in_fmt);
            }
            uint32_t c;
            failures += fl_ref_round(&c, j->fmt, j->rnd, j->ovf, j->ev->eval, xs, j->p) != 0;
            store(out, i, c);
        }
        for (int k = 0; k < 3; k++)
            mpfr_clear(x[k]);
        mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
    }
    return failures;
}

/* Row-wise functions: rows are the last axis. */
static long eval_rowwise(const ref_job *j, fl_array *out)
{
    const fl_array *in = j->in;
    const long n = in[0].ndim ? (long)in[0].shape[in[0].ndim - 1] : 1, n_in = j->n_in;
    const long rows = n ? (long)(in[0].count / (size_t)n) : 0;
    long failures = 0;
#pragma omp parallel reduction(+ : failures)
    {
        mpfr_t *x = malloc((size_t)(n_in * n + 1) * sizeof *x);
        mpfr_srcptr *xp = malloc((size_t)(n_in * n + 1) * sizeof *xp);
        for (long k = 0; k < n_in * n; k++) {
            mpfr_init2(x[k], 64);
            xp[k] = x[k];
        }
        mpfr_srcptr const *rp[2] = { xp, xp + n };
#pragma omp for schedule(dynamic, 1)
        for (long r = 0; r < rows; r++) {
            for (long k = 0; k < n_in; k++)
                for (long c = 0; c < n; c++)
                    load(x[k * n + c], &in[k], (size_t)(r * n + c), j->have_in_fmt, j->in_fmt);
            for (long c = 0; c < n; c++) {
                uint32_t code;
                failures += fl_ref_round_row(&code, j->fmt, j->rnd, j->ovf, j->ev->row, rp, n, c, j->p, 0) != 0;
                store(out, (size_t)(r * n + c), code);
            }
        }
        for (long k = 0; k < n_in * n; k++)
            mpfr_clear(x[k]);
        free(x);
        free(xp);
        mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
    }
    return failures;
}

/* Arrays in, OUT.npy out. */
static int run_ref_arrays(const ref_opts *o, const fl_ref_fn *fn, const fl_ref_evaluator *ev, const fl_ref_params *p)
{
    if (!o->have_fmt)
        return fl_cli_usage_error(ref_cmd, "--format FMT is required");
    const int n_in = ev->n_inputs, nfiles = o->nvals < 8 ? o->nvals : 8;
    if (nfiles != n_in + 1)
        return fl_cli_usage_error(ref_cmd, "%s%s%s takes %d input file(s) and OUT.npy, got %d file(s)", fn->name,
                                  o->deriv ? " --wrt " : "", o->deriv ? o->wrt : "", n_in, nfiles);
    const int sat = o->sat >= 0 ? o->sat : fl_format_storage_bits(o->fmt) <= 8;
    fl_array in[4];
    memset(in, 0, sizeof in);
    ref_job j = { in, n_in, 0, o->have_in_fmt, 1, o->in_fmt, o->fmt, o->rnd, sat ? FL_OVF_SATURATE : FL_OVF_NOSATURATE, ev, p };
    int rc = read_ref_inputs(in, n_in, o, fn, &j.smode, &j.cols);
    if (rc == 0) {
        fl_array out = in[0];
        const int ob = fl_format_storage_bits(o->fmt);
        out.dtype = o->fmt == FL_FMT_FP32 ? FL_DT_F32 : o->fmt == FL_FMT_FP16 ? FL_DT_F16 : ob == 16 ? FL_DT_U16 : FL_DT_U8;
        out.data = calloc(out.count ? out.count : 1, fl_dtype_size(out.dtype));
        if (!out.data) {
            fprintf(stderr, "fp8lab ref: out of memory\n");
            rc = FL_EXIT_FAIL;
        } else {
            const long failures = fn->rowwise ? eval_rowwise(&j, &out) : eval_elementwise(&j, &out);
            char err[512];
            if (failures)
                fprintf(stderr, "fp8lab ref: warning: %ld element(s) could not be rounded (Ziv loop gave up); "
                                "they hold the format's NaN\n", failures);
            if (fl_npy_write(o->vals[n_in], &out, err, sizeof err)) {
                fprintf(stderr, "fp8lab ref: %s\n", err);
                rc = FL_EXIT_FAIL;
            } else if (failures) {
                rc = FL_EXIT_FAIL;
            }
            free(out.data);
        }
    }
    for (int i = 0; i < 4; i++)
        fl_array_free(&in[i]);
    return rc;
}

int fl_cmd_ref(int argc, char **argv)
{
    ref_opts o;
    memset(&o, 0, sizeof o);
    o.fmt = o.in_fmt = FL_FMT_FP32, o.sat = -1, o.digits = 40, o.rnd = FL_RND_NE;
    if (!(o.vals = calloc((size_t)argc + 1, sizeof *o.vals)))
        return FL_EXIT_FAIL;
    const fl_ref_fn *fn = NULL;
    const fl_ref_evaluator *ev = NULL;
    fl_ref_params p;
    int rc = parse_ref_opts(&o, argc, argv);
    if (rc < 0)
        rc = resolve_ref(&o, &fn, &p, &ev);
    if (rc < 0 && o.print)
        rc = o.nvals ? print_values(fn, ev, &p, o.digits, o.nvals, o.vals)
                     : fl_cli_usage_error(ref_cmd, "--print needs values");
    else if (rc < 0)
        rc = run_ref_arrays(&o, fn, ev, &p);
    free(o.vals);
    mpfr_free_cache();
    return rc;
}
