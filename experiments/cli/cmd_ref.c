/* cmd_ref.c — `fp8lab ref`: the MPFR reference (reference/ref.h) on .npy arrays or on values given on
 * the command line.  Every output element is the correctly rounded encoding of the exact result. */
#include "cli.h"
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

int fl_cmd_ref(int argc, char **argv)
{
    const char *cmd = "ref";
    const char *fname = NULL, *wrt = NULL;
    fl_format fmt = FL_FMT_FP32, in_fmt = FL_FMT_FP32;
    int have_fmt = 0, have_in_fmt = 0, deriv = 0, print = 0, sat = -1, digits = 40;
    fl_rounding rnd = FL_RND_NE;
    const char *params[64];
    int nparams = 0;
    char *files[8];
    int nfiles = 0;
    char **vals = NULL;
    int nvals = 0;
    vals = calloc((size_t)argc + 1, sizeof *vals);
    int rc = FL_EXIT_OK;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const int has_val = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            free(vals);
            return FL_EXIT_OK;
        } else if (!strcmp(a, "--list")) {
            list_functions();
            free(vals);
            return FL_EXIT_OK;
        } else if (!strcmp(a, "--format") || !strcmp(a, "--input-format")) {
            fl_format *dst = a[2] == 'f' ? &fmt : &in_fmt;
            if (!has_val || fl_format_parse(dst, argv[++i])) {
                free(vals);
                return fl_cli_usage_error(cmd, "%s needs a format (%s)", a, fl_format_names());
            }
            *(a[2] == 'f' ? &have_fmt : &have_in_fmt) = 1;
        } else if (!strcmp(a, "--round")) {
            if (!has_val || fl_rounding_parse(&rnd, argv[++i]) || rnd == FL_RND_SR) {
                free(vals);
                return fl_cli_usage_error(cmd, "--round takes rne, rtz, up or down");
            }
        } else if (!strcmp(a, "--saturate") || !strcmp(a, "--no-saturate")) {
            sat = a[2] == 's';
        } else if (!strcmp(a, "--param")) {
            if (!has_val || nparams == 64) {
                free(vals);
                return fl_cli_usage_error(cmd, "--param needs NAME=VALUE");
            }
            params[nparams++] = argv[++i];
        } else if (!strcmp(a, "--derivative")) {
            deriv = 1;
        } else if (!strcmp(a, "--wrt")) {
            if (!has_val) {
                free(vals);
                return fl_cli_usage_error(cmd, "--wrt needs a name");
            }
            wrt = argv[++i];
            deriv = 1;
        } else if (!strcmp(a, "--print")) {
            print = 1;
        } else if (!strcmp(a, "--digits")) {
            unsigned long long d;
            if (!has_val || fl_cli_parse_u64(&d, argv[++i]) || d < 1 || d > 10000) {
                free(vals);
                return fl_cli_usage_error(cmd, "--digits takes 1..10000");
            }
            digits = (int)d;
        } else if (a[0] == '-' && a[1] == '-') {
            free(vals);
            return fl_cli_usage_error(cmd, "unknown option '%s'", a);
        } else if (!fname) {
            fname = a;
        } else {
            vals[nvals++] = argv[i];
            if (nfiles < 8)
                files[nfiles++] = argv[i];
        }
    }
    if (!fname) {
        free(vals);
        return fl_cli_usage_error(cmd, "missing function name (fp8lab ref --list)");
    }
    const fl_ref_fn *fn = fl_ref_lookup(fname);
    if (!fn) {
        free(vals);
        return fl_cli_usage_error(cmd, "unknown function '%s' (fp8lab ref --list)", fname);
    }
    fl_ref_params p;
    fl_ref_params_init(&p, fn);
    for (int i = 0; i < nparams; i++) {
        char name[32];
        const char *eq = strchr(params[i], '=');
        if (!eq || eq - params[i] >= (long)sizeof name) {
            free(vals);
            return fl_cli_usage_error(cmd, "--param takes NAME=VALUE, got '%s'", params[i]);
        }
        memcpy(name, params[i], (size_t)(eq - params[i]));
        name[eq - params[i]] = 0;
        if (fl_ref_params_set(&p, name, eq + 1)) {
            free(vals);
            return fl_cli_usage_error(cmd, "bad parameter '%s' (names: alpha beta order=1..4 a0..a4 eps tau)",
                                      params[i]);
        }
    }
    if (deriv && !wrt) {
        static char first[8];
        size_t l = strcspn(fn->inputs, ",");
        memcpy(first, fn->inputs, l);
        first[l] = 0;
        wrt = first;
    }
    const fl_ref_evaluator *ev = fl_ref_find_eval(fn, deriv ? wrt : "");
    if (!ev) {
        free(vals);
        return fl_cli_usage_error(cmd, "%s has no derivative with respect to '%s'", fn->name, wrt);
    }
    if (print) {
        if (!nvals) {
            free(vals);
            return fl_cli_usage_error(cmd, "--print needs values");
        }
        rc = print_values(fn, ev, &p, digits, nvals, vals);
        free(vals);
        mpfr_free_cache();
        return rc;
    }
    free(vals);
    if (!have_fmt)
        return fl_cli_usage_error(cmd, "--format FMT is required");
    const int n_in = ev->n_inputs;
    if (nfiles != n_in + 1)
        return fl_cli_usage_error(cmd, "%s%s%s takes %d input file(s) and OUT.npy, got %d file(s)", fn->name,
                                  deriv ? " --wrt " : "", deriv ? wrt : "", n_in, nfiles);
    if (sat < 0)
        sat = fl_format_storage_bits(fmt) <= 8;
    const fl_overflow ovf = sat ? FL_OVF_SATURATE : FL_OVF_NOSATURATE;

    fl_array in[4];
    memset(in, 0, sizeof in);
    char err[512];
    for (int i = 0; i < n_in; i++) {
        if (fl_npy_read(&in[i], files[i], err, sizeof err)) {
            fprintf(stderr, "fp8lab ref: %s\n", err);
            rc = FL_EXIT_FAIL;
            goto out;
        }
        int ok = have_in_fmt ? (in[i].dtype == FL_DT_U8 || in[i].dtype == FL_DT_U16 || in[i].dtype == FL_DT_U32 ||
                                in[i].dtype == FL_DT_F32 || in[i].dtype == FL_DT_F16)
                             : (in[i].dtype == FL_DT_F32 || in[i].dtype == FL_DT_F64 || in[i].dtype == FL_DT_F16);
        if (!ok) {
            fprintf(stderr, "fp8lab ref: %s: dtype %s not accepted%s\n", files[i], fl_dtype_name(in[i].dtype),
                    have_in_fmt ? " for --input-format" : " (float32/float64/float16, or --input-format FMT)");
            rc = FL_EXIT_FAIL;
            goto out;
        }
    }
    size_t cols = 1;
    int smode = 0;
    for (int i = 1; i < n_in; i++) {
        if (fn->n_inputs == 3 && i == 2) {
            smode = scale_mode(&in[2], &in[0], &cols);
            if (smode < 0) {
                fprintf(stderr, "fp8lab ref: %s: %zu scales fit neither the elements, the channels nor the rows "
                                "of %s\n", files[2], in[2].count, files[0]);
                rc = FL_EXIT_FAIL;
                goto out;
            }
            continue;
        }
        if (in[i].count != in[0].count || in[i].ndim != in[0].ndim ||
            memcmp(in[i].shape, in[0].shape, sizeof in[0].shape)) {
            fprintf(stderr, "fp8lab ref: %s and %s differ in shape\n", files[0], files[i]);
            rc = FL_EXIT_FAIL;
            goto out;
        }
    }
    fl_array out = in[0];
    const int ob = fl_format_storage_bits(fmt);
    out.dtype = fmt == FL_FMT_FP32 ? FL_DT_F32 : fmt == FL_FMT_FP16 ? FL_DT_F16 : ob == 16 ? FL_DT_U16 : FL_DT_U8;
    out.data = calloc(out.count ? out.count : 1, fl_dtype_size(out.dtype));
    if (!out.data) {
        fprintf(stderr, "fp8lab ref: out of memory\n");
        rc = FL_EXIT_FAIL;
        goto out;
    }
    long failures = 0;
    if (!fn->rowwise) {
#pragma omp parallel reduction(+ : failures)
        {
            mpfr_t x[3];
            for (int k = 0; k < 3; k++)
                mpfr_init2(x[k], 64);
            mpfr_srcptr xs[3] = { x[0], x[1], x[2] };
#pragma omp for schedule(dynamic, 256)
            for (size_t i = 0; i < in[0].count; i++) {
                for (int k = 0; k < n_in; k++) {
                    size_t ik = i;
                    if (k == 2)
                        ik = smode == 0 ? i : smode == 1 ? i % cols : i / cols;
                    load(x[k], &in[k], ik, have_in_fmt, in_fmt);
                }
                uint32_t c;
                failures += fl_ref_round(&c, fmt, rnd, ovf, ev->eval, xs, &p) != 0;
                store(&out, i, c);
            }
            for (int k = 0; k < 3; k++)
                mpfr_clear(x[k]);
            mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
        }
    } else {
        const long n = in[0].ndim ? (long)in[0].shape[in[0].ndim - 1] : 1;
        const long rows = n ? (long)(in[0].count / (size_t)n) : 0;
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
                for (int k = 0; k < n_in; k++)
                    for (long j = 0; j < n; j++)
                        load(x[k * n + j], &in[k], (size_t)(r * n + j), have_in_fmt, in_fmt);
                for (long j = 0; j < n; j++) {
                    uint32_t c;
                    failures += fl_ref_round_row(&c, fmt, rnd, ovf, ev->row, rp, n, j, &p, 0) != 0;
                    store(&out, (size_t)(r * n + j), c);
                }
            }
            for (long k = 0; k < n_in * n; k++)
                mpfr_clear(x[k]);
            free(x);
            free(xp);
            mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
        }
    }
    if (failures)
        fprintf(stderr, "fp8lab ref: warning: %ld element(s) could not be rounded (Ziv loop gave up); "
                        "they hold the format's NaN\n", failures);
    if (fl_npy_write(files[n_in], &out, err, sizeof err)) {
        fprintf(stderr, "fp8lab ref: %s\n", err);
        rc = FL_EXIT_FAIL;
    } else if (failures) {
        rc = FL_EXIT_FAIL;
    }
    free(out.data);
out:
    for (int i = 0; i < 4; i++)
        fl_array_free(&in[i]);
    mpfr_free_cache();
    return rc;
}
