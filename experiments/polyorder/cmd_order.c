/* cmd_order.c — `fp8lab order`: the safe polynomial order of PolyReLU / PolyNorm for a format, a
 * scaling scheme and an implementation strategy (experiments/polyorder/polyorder.h, experiments/polyorder/ORDER.md). */
#include "train/checkpoint.h"
#include "cli/cli.h"
#include "train/data.h"
#include "train/model.h"
#include "npy.h"
#include "polyorder.h"
#include "safetensors.h"
#include "train/train.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const help =
    "usage: fp8lab order [--act polyrelu,polynorm] [--order 2,3,4] [--format LIST] [--strategy fused,naive]\n"
    "                    [--a0 X .. --a4 X] [--row-len N] [--bulk B] [--eps E] [--pow pow|mul]\n"
    "                    [--range R | --no-ulp] [--amax A,..] [--json]\n"
    "       fp8lab order --input X.npy|X.safetensors [--tensor NAME] [--sample-rows K] [--seed S]\n"
    "                    [--max-flush F] [--dump P.npy] [same selection flags] [--json]\n"
    "       fp8lab order --run DIR [--dump P.npy] [...]   pre-activations of a training run\n"
    "\n"
    "Analytic map (no --input): for each activation, order, format and strategy, computed with MPFR:\n"
    "  overflow threshold   the smallest positive real input at which an intermediate or the output exceeds\n"
    "                       the format's round-to-nearest overflow boundary (e4m3 464, fp16 65520, ...), and\n"
    "                       what overflows first; the first input encoding of the format that overflows\n"
    "  underflow threshold  the largest input below which every output is flushed to zero\n"
    "  ulp error            worst error in ulps (of the exact value) over every encoding of the format in\n"
    "                       [-R, R] (default R = 16), against the correctly rounded MPFR value\n"
    "Strategies:  fused  fp32 inside, the output rounded once (fp8lab's kernels)\n"
    "             naive  every intermediate stored in the format, as an eager framework does\n"
    "                    (x^i = torch.pow: one rounding; --pow mul: x*x*x, a rounding per product)\n"
    "PolyNorm row model: one probe element x and N-1 elements at level B (--row-len N = 4096, --bulk B = 1).\n"
    "Coefficients: a0 = 0, a_i = 1/r unless given (--a1 0.5 ...).\n"
    "--amax A,..   pre-activation amax levels of the recommendation table (default 4,16,64,448)\n"
    "\n"
    "Real tensors (--input): rows = tokens, last dimension = hidden; 1-D is one row.  For each scaling\n"
    "(none, per-tensor, per-row, 1x128, MX 1x32 e8m0 with TE's round-up rule; 16-bit formats unscaled), the\n"
    "fractions of elements that overflowed (Inf/NaN), were clipped (a scaled cast beyond the overflow\n"
    "boundary, saturated with an error above 1/2 ulp), or were flushed to zero,\n"
    "and ulp-error percentiles of the output against the MPFR reference on --sample-rows rows (default 8,\n"
    "drawn with --seed, default 1).  An order is safe when nothing overflowed or was clipped and at most\n"
    "--max-flush (default 0.01) of the outputs were flushed.\n"
    "  --tensor NAME   the tensor of a .safetensors file (default: its only / first floating tensor)\n"
    "  --run DIR       a run folder of 'fp8lab train': its checkpoint's weights, one fp32 forward on the batch\n"
    "                  the run trains on next; the tensor is every layer's FFN pre-activation (the fc output;\n"
    "                  the gate plane for gated activations), (L * B * T, F)\n"
    "  --dump P.npy    also write the studied tensor (float32) to P.npy\n"
    "\n"
    "Formats: bf16 fp16 e4m3 e5m2 e3m2 e2m3 e2m1 (default: all of them).  --json: one JSON object\n"
    "{\"entries\": [{\"act\", \"order\", \"format\", \"strategy\", \"overflow_threshold\", ...}], ...}.\n"
    "Exit: 0 ok, 1 bad input file, 2 bad usage.\n";

#define MAX_SEL 16

typedef struct {
    int n;
    int v[MAX_SEL];
} sel;

/* Parse a comma-separated list through `one`; returns 0 or -1. */
static int parse_list(sel *out, const char *s, int (*one)(int *, const char *))
{
    char buf[256];
    if (strlen(s) >= sizeof buf || !*s)
        return -1;
    strcpy(buf, s);
    out->n = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (out->n == MAX_SEL || one(&out->v[out->n], tok))
            return -1;
        int dup = 0; /* a repeated name counts once (the job tables are sized for distinct values) */
        for (int k = 0; k < out->n; k++)
            dup |= out->v[k] == out->v[out->n];
        out->n += !dup;
    }
    return out->n ? 0 : -1;
}

static int one_act(int *v, const char *s)
{
    fl_order_act a;
    if (fl_order_act_parse(&a, s))
        return -1;
    *v = (int)a;
    return 0;
}

static int one_strategy(int *v, const char *s)
{
    fl_order_strategy a;
    if (fl_order_strategy_parse(&a, s))
        return -1;
    *v = (int)a;
    return 0;
}

static int one_order(int *v, const char *s)
{
    if (strlen(s) != 1 || s[0] < '2' || s[0] > '4')
        return -1;
    *v = s[0] - '0';
    return 0;
}

static int one_format(int *v, const char *s)
{
    fl_format f;
    if (fl_format_parse(&f, s))
        return -1;
    if (f != FL_FMT_BF16 && f != FL_FMT_FP16 && f != FL_FMT_E4M3 && f != FL_FMT_E5M2 && f != FL_FMT_E3M2 &&
        f != FL_FMT_E2M3 && f != FL_FMT_E2M1)
        return -1;
    *v = (int)f;
    return 0;
}

/* A JSON number, or null when not finite (JSON has no Inf/NaN); +Inf is written as the string
   "inf" where it means "none up to fp32's range". */
static json_t *jnum(double v)
{
    if (isnan(v))
        return json_null();
    if (isinf(v))
        return json_string(v > 0 ? "inf" : "-inf");
    return json_real(v);
}

static void fmt_num(char *b, size_t n, double v)
{
    if (isnan(v))
        snprintf(b, n, "-");
    else if (isinf(v))
        snprintf(b, n, "none");
    else
        snprintf(b, n, "%.6g", v);
}

/* The FFN pre-activations of a training run: the weights of DIR/checkpoint.bin (section 3 holds the
   parameters, as experiments/train/train.c writes them; the configuration comes through fl_train_read_cfg),
   one forward in fp32 (the recipe's casts left out: the fp32 master weights' pre-activations) on the
   batch of step `st.step` (the next one the run would train on).  x (L * N, F): layer-major. */
static int load_run(float **x, size_t *R, size_t *C, const char *dir)
{
    char err[4600], path[4200];
    fl_train_cfg cfg;
    fl_train_state st;
    *x = NULL;
    if (fl_train_read_cfg(&cfg, &st, dir, err, sizeof err)) {
        fprintf(stderr, "fp8lab order: %s\n", err);
        return FL_EXIT_FAIL;
    }
    snprintf(path, sizeof path, "%s/checkpoint.bin", dir);
    fl_ckpt ck;
    if (fl_ckpt_read(&ck, path, err, sizeof err)) {
        fprintf(stderr, "fp8lab order: %s\n", err);
        return FL_EXIT_FAIL;
    }
    fl_data data;
    if (cfg.data_kind == FL_DATA_TEXT ? fl_data_load_text(&data, cfg.data_path, (size_t)cfg.model.T + 2, err, sizeof err)
                                      : fl_data_synthetic(&data, cfg.seed, (size_t)cfg.data_len)) {
        fprintf(stderr, "fp8lab order: %s: cannot rebuild the run's data: %s\n", dir,
                cfg.data_kind == FL_DATA_TEXT ? err : "out of memory");
        fl_ckpt_free(&ck);
        return FL_EXIT_FAIL;
    }
    cfg.recipe.kind = FL_RECIPE_FP32;
    const int nsites = fl_model_nsites(&cfg.model);
    char *store = calloc((size_t)nsites, 40);
    const char **names = calloc((size_t)nsites, sizeof *names);
    uint32_t *roles = calloc((size_t)nsites, sizeof *roles);
    uint8_t *hp = calloc((size_t)nsites, 1);
    const size_t B = cfg.model.B, T = cfg.model.T, L = cfg.model.L, F = cfg.model.F, N = B * T;
    const size_t G = fl_act_gated(cfg.model.act) ? 2 : 1;
    uint16_t *batch = malloc(B * (T + 1) * sizeof *batch);
    fl_recipe rec;
    fl_model m;
    memset(&m, 0, sizeof m);
    int rc = FL_EXIT_FAIL, rec_ok = 0;
    if (!store || !names || !roles || !hp || !batch)
        goto out;
    fl_model_site_names(&cfg.model, store, names, roles, hp);
    if (fl_recipe_init(&rec, &cfg.recipe, nsites, names, roles, hp))
        goto out;
    rec_ok = 1;
    if (fl_model_init(&m, &cfg.model, &rec, cfg.seed))
        goto out;
    const fl_ckpt_section *sp = fl_ckpt_find(&ck, 3); /* CK_PARAMS */
    if (!sp || sp->size != m.nparams * sizeof(float)) {
        fprintf(stderr, "fp8lab order: %s: no parameter section of %zu floats (a checkpoint of another layout?)\n", path,
                m.nparams);
        goto out;
    }
    memcpy(m.params, sp->data, sp->size);
    fl_data_batch(batch, &data, cfg.seed, st.step, B, T);
    fl_model_forward(&m, batch);
    *x = malloc(L * N * F * sizeof **x);
    if (!*x)
        goto out;
    for (size_t l = 0; l < L; l++)
        memcpy(*x + l * N * F, m.pre + l * G * N * F, N * F * sizeof **x);
    *R = L * N;
    *C = F;
    rc = 0;
out:
    if (rc && !*x)
        fprintf(stderr, "fp8lab order: %s: cannot rebuild the model\n", dir);
    fl_model_free(&m);
    if (rec_ok)
        fl_recipe_free(&rec);
    fl_data_free(&data);
    fl_ckpt_free(&ck);
    free(store), free(names), free(roles), free(hp), free(batch);
    return rc;
}

/* Read the tensor: float32 (R, C) in *x.  Returns 0, or FL_EXIT_FAIL after a message naming the file. */
static int load_input(float **x, size_t *R, size_t *C, const char *path, const char *tensor)
{
    char err[1024];
    const size_t len = strlen(path);
    *x = NULL;
    if (len > 12 && !strcmp(path + len - 12, ".safetensors")) {
        fl_st_file *sf = fl_st_open(path, err, sizeof err);
        if (!sf) {
            fprintf(stderr, "fp8lab order: %s\n", err);
            return FL_EXIT_FAIL;
        }
        const fl_st_tensor *t = NULL;
        if (tensor) {
            t = fl_st_find(sf, tensor);
            if (!t) {
                fprintf(stderr, "fp8lab order: %s: no tensor named '%s'\n", path, tensor);
                fl_st_close(sf);
                return FL_EXIT_FAIL;
            }
        } else {
            for (size_t i = 0; i < fl_st_count(sf) && !t; i++) {
                const fl_st_tensor *c = fl_st_tensor_at(sf, i);
                if (c->dtype == FL_ST_F64 || fl_st_format(c->dtype) >= 0)
                    t = c;
            }
            if (!t) {
                fprintf(stderr, "fp8lab order: %s: no floating-point tensor in the file\n", path);
                fl_st_close(sf);
                return FL_EXIT_FAIL;
            }
        }
        const int fmt = fl_st_format(t->dtype);
        if ((t->dtype != FL_ST_F64 && fmt < 0) || t->count == 0) {
            fprintf(stderr, "fp8lab order: %s: tensor '%s' is %s with %llu elements; need a non-empty floating tensor\n",
                    path, t->name, fl_st_dtype_name(t->dtype), (unsigned long long)t->count);
            fl_st_close(sf);
            return FL_EXIT_FAIL;
        }
        *C = t->ndim == 0 ? 1 : (size_t)t->shape[t->ndim - 1];
        *R = (size_t)t->count / *C;
        *x = malloc((size_t)t->count * sizeof **x);
        if (!*x) {
            fl_st_close(sf);
            fprintf(stderr, "fp8lab order: out of memory\n");
            return FL_EXIT_FAIL;
        }
        const unsigned char *b = t->data;
        for (size_t i = 0; i < t->count; i++) {
            if (t->dtype == FL_ST_F64) {
                double d;
                memcpy(&d, b + 8 * i, 8);
                (*x)[i] = (float)d;
            } else {
                const int w = fl_format_storage_bits((fl_format)fmt) / 8;
                uint32_t code = 0;
                memcpy(&code, b + (size_t)w * i, (size_t)w); /* little-endian host */
                (*x)[i] = fl_decode((fl_format)fmt, code);
            }
        }
        fl_st_close(sf);
    } else {
        fl_array arr;
        if (fl_npy_read(&arr, path, err, sizeof err)) {
            fprintf(stderr, "fp8lab order: %s\n", err);
            return FL_EXIT_FAIL;
        }
        if ((arr.dtype != FL_DT_F32 && arr.dtype != FL_DT_F64 && arr.dtype != FL_DT_F16) || arr.count == 0) {
            fprintf(stderr, "fp8lab order: %s: need a non-empty float16/32/64 array, got %s with %zu elements\n", path,
                    fl_dtype_name(arr.dtype), arr.count);
            fl_array_free(&arr);
            return FL_EXIT_FAIL;
        }
        if (arr.fortran_order && arr.ndim > 1) {
            fprintf(stderr, "fp8lab order: %s: Fortran-order arrays are not supported (rows must be contiguous)\n", path);
            fl_array_free(&arr);
            return FL_EXIT_FAIL;
        }
        *C = arr.ndim == 0 ? 1 : (size_t)arr.shape[arr.ndim - 1];
        *R = arr.count / *C;
        *x = malloc(arr.count * sizeof **x);
        if (!*x) {
            fl_array_free(&arr);
            fprintf(stderr, "fp8lab order: out of memory\n");
            return FL_EXIT_FAIL;
        }
        for (size_t i = 0; i < arr.count; i++)
            (*x)[i] = arr.dtype == FL_DT_F32   ? ((float *)arr.data)[i]
                      : arr.dtype == FL_DT_F64 ? (float)((double *)arr.data)[i]
                                               : fl_decode(FL_FMT_FP16, ((uint16_t *)arr.data)[i]);
        fl_array_free(&arr);
    }
    size_t bad = 0;
    for (size_t i = 0; i < *R * *C; i++)
        bad += !isfinite((*x)[i]);
    if (bad) {
        fprintf(stderr, "fp8lab order: %s: %zu elements are NaN or Inf (or overflow float32); the study needs finite data\n",
                path, bad);
        free(*x);
        *x = NULL;
        return FL_EXIT_FAIL;
    }
    return 0;
}

static int is_value_flag(const char *a)
{
    static const char *const flags[] = { "--act", "--order", "--format", "--strategy", "--pow", "--row-len",
                                         "--sample-rows", "--seed", "--bulk", "--eps", "--range", "--max-flush",
                                         "--amax", "--input", "--tensor", "--run", "--dump", "--a0", "--a1", "--a2", "--a3", "--a4" };
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++)
        if (!strcmp(a, flags[i]))
            return 1;
    return 0;
}

int fl_cmd_order(int argc, char **argv)
{
    const char *cmd = "order", *input = NULL, *tensor = NULL, *run_dir = NULL, *dump = NULL;
    sel acts = { 2, { FL_ORDER_POLYRELU, FL_ORDER_POLYNORM } };
    sel orders = { 3, { 2, 3, 4 } };
    sel fmts = { 7, { FL_FMT_BF16, FL_FMT_FP16, FL_FMT_E4M3, FL_FMT_E5M2, FL_FMT_E3M2, FL_FMT_E2M3, FL_FMT_E2M1 } };
    sel strats = { 2, { FL_ORDER_FUSED, FL_ORDER_NAIVE } };
    double amax_levels[MAX_SEL] = { 4, 16, 64, 448 };
    int n_amax = 4, json = 0;
    double range = 16, max_flush = 0.01;
    unsigned long long sample_rows = 8, seed = 1;
    fl_order_cfg base;
    fl_order_cfg_init(&base, FL_ORDER_POLYRELU, 3);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const int has = i + 1 < argc;
        const char *v = has ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            return FL_EXIT_OK;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--no-ulp")) {
            range = 0;
        } else if (!has && is_value_flag(a)) {
            return fl_cli_usage_error(cmd, "%s needs a value", a);
        } else if (!strcmp(a, "--act")) {
            if (parse_list(&acts, v, one_act))
                return fl_cli_usage_error(cmd, "--act takes polyrelu and/or polynorm, got '%s'", v);
            i++;
        } else if (!strcmp(a, "--order")) {
            if (parse_list(&orders, v, one_order))
                return fl_cli_usage_error(cmd, "--order takes orders 2..4 (e.g. 2,3,4), got '%s'", v);
            i++;
        } else if (!strcmp(a, "--format")) {
            if (parse_list(&fmts, v, one_format))
                return fl_cli_usage_error(cmd, "--format takes bf16, fp16, e4m3, e5m2, e3m2, e2m3, e2m1, got '%s'", v);
            i++;
        } else if (!strcmp(a, "--strategy")) {
            if (parse_list(&strats, v, one_strategy))
                return fl_cli_usage_error(cmd, "--strategy takes fused and/or naive, got '%s'", v);
            i++;
        } else if (!strcmp(a, "--pow")) {
            if (fl_order_pow_parse(&base.pow, v))
                return fl_cli_usage_error(cmd, "--pow takes pow or mul, got '%s'", v);
            i++;
        } else if (a[0] == '-' && a[1] == '-' && a[2] == 'a' && a[3] >= '0' && a[3] <= '4' && !a[4]) {
            double d;
            if (fl_cli_parse_double(&d, v) || !isfinite(d))
                return fl_cli_usage_error(cmd, "%s needs a finite number", a);
            base.a[a[3] - '0'] = d;
            base.a_set |= 1u << (a[3] - '0');
            i++;
        } else if (!strcmp(a, "--row-len") || !strcmp(a, "--sample-rows") || !strcmp(a, "--seed")) {
            unsigned long long u;
            if (fl_cli_parse_u64(&u, v) || (a[2] != 's' || a[3] != 'e' ? (u < 1 || u > (1u << 24)) : 0))
                return fl_cli_usage_error(cmd, "%s needs %s", a, a[3] == 'e' ? "a non-negative integer" : "an integer in 1..16777216");
            if (a[2] == 'r')
                base.n = (long)u;
            else if (a[3] == 'a')
                sample_rows = u;
            else
                seed = u;
            i++;
        } else if (!strcmp(a, "--bulk") || !strcmp(a, "--eps") || !strcmp(a, "--range") || !strcmp(a, "--max-flush")) {
            double d;
            if (fl_cli_parse_double(&d, v) || !isfinite(d) || d < 0 || (a[2] == 'r' && d == 0))
                return fl_cli_usage_error(cmd, "%s needs a %s number", a, a[2] == 'r' ? "positive" : "non-negative");
            if (a[2] == 'b')
                base.bulk = d;
            else if (a[2] == 'e')
                base.eps = d;
            else if (a[2] == 'r')
                range = d;
            else
                max_flush = d;
            i++;
        } else if (!strcmp(a, "--amax")) {
            char buf[256];
            if (strlen(v) >= sizeof buf)
                return fl_cli_usage_error(cmd, "--amax: list too long");
            strcpy(buf, v);
            n_amax = 0;
            for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
                double d;
                if (n_amax == MAX_SEL || fl_cli_parse_double(&d, tok) || !(d > 0) || !isfinite(d))
                    return fl_cli_usage_error(cmd, "--amax takes positive numbers separated by commas, got '%s'", v);
                amax_levels[n_amax++] = d;
            }
            if (!n_amax)
                return fl_cli_usage_error(cmd, "--amax takes positive numbers separated by commas");
            i++;
        } else if (!strcmp(a, "--input")) {
            input = v;
            i++;
        } else if (!strcmp(a, "--tensor")) {
            tensor = v;
            i++;
        } else if (!strcmp(a, "--run")) {
            run_dir = v;
            i++;
        } else if (!strcmp(a, "--dump")) {
            dump = v;
            i++;
        } else {
            return fl_cli_usage_error(cmd, "unknown argument '%s'", a);
        }
    }
    if (tensor && !input)
        return fl_cli_usage_error(cmd, "--tensor needs --input FILE.safetensors");
    if (input && run_dir)
        return fl_cli_usage_error(cmd, "--input and --run are alternatives");
    if (dump && !input && !run_dir)
        return fl_cli_usage_error(cmd, "--dump needs --input or --run");

    json_t *root = json_object();
    json_t *config = json_object();
    json_object_set_new(config, "row_len", json_integer(base.n));
    json_object_set_new(config, "bulk", json_real(base.bulk));
    json_object_set_new(config, "eps", json_real(base.eps));
    json_object_set_new(config, "pow", json_string(fl_order_pow_name(base.pow)));
    json_t *coef = json_object();
    for (int i = 0; i <= FL_ORDER_MAX; i++)
        if (base.a_set >> i & 1) {
            char k[4] = { 'a', (char)('0' + i), 0, 0 };
            json_object_set_new(coef, k, json_real(base.a[i]));
        }
    json_object_set_new(config, "coefficients", json_object_size(coef) ? coef : (json_decref(coef), json_string("default: a0 = 0, a_i = 1/r")));

    if (input || run_dir) {
        float *x;
        size_t R, C;
        const int rc = input ? load_input(&x, &R, &C, input, tensor) : load_run(&x, &R, &C, run_dir);
        if (rc) {
            json_decref(config);
            json_decref(root);
            return rc;
        }
        if (dump) {
            char err[1024];
            fl_array arr = { FL_DT_F32, 2, { (int64_t)R, (int64_t)C }, R * C, 0, x };
            if (fl_npy_write(dump, &arr, err, sizeof err)) {
                fprintf(stderr, "fp8lab order: %s\n", err);
                free(x);
                json_decref(config);
                json_decref(root);
                return FL_EXIT_FAIL;
            }
        }
        if (!input)
            input = run_dir;
        double amax = 0, ss = 0;
        for (size_t i = 0; i < R * C; i++) {
            amax = fmax(amax, fabs((double)x[i]));
            ss += (double)x[i] * x[i];
        }
        if (!json)
            printf("fp8lab order: %s: %zu rows x %zu (row length n = %zu), amax %.6g, rms %.6g; ulp errors on %llu sampled rows (seed %llu)\n",
                   input, R, C, C, amax, sqrt(ss / (double)(R * C)), R < sample_rows ? (unsigned long long)R : sample_rows, seed);
        json_object_set_new(config, "sample_rows", json_integer((json_int_t)(R < sample_rows ? R : sample_rows)));
        json_object_set_new(config, "seed", json_integer((json_int_t)seed));
        json_object_set_new(config, "max_flush", json_real(max_flush));
        json_object_set_new(root, "input", json_string(input));
        json_object_set_new(root, "rows", json_integer((json_int_t)R));
        json_object_set_new(root, "cols", json_integer((json_int_t)C));
        json_object_set_new(root, "amax", json_real(amax));
        json_t *res = json_array(), *rec = json_array();
        /* jobs: every combination */
        typedef struct { int act, order, fmt, strat, scale; } job;
        job *jobs = malloc(sizeof(job) * 2 * 3 * 7 * 2 * FL_ORDER_SCALE_COUNT);
        int nj = 0;
        for (int ai = 0; ai < acts.n; ai++)
            for (int fi = 0; fi < fmts.n; fi++)
                for (int sc = 0; sc < FL_ORDER_SCALE_COUNT; sc++)
                    for (int si = 0; si < strats.n; si++)
                        for (int oi = 0; oi < orders.n; oi++)
                            if (fl_order_scale_applies((fl_format)fmts.v[fi], (fl_order_scale)sc))
                                jobs[nj++] = (job){ acts.v[ai], orders.v[oi], fmts.v[fi], strats.v[si], sc };
        fl_order_tensor_result *out = calloc((size_t)nj, sizeof *out);
        int failed = 0;
#pragma omp parallel for schedule(dynamic) reduction(| : failed)
        for (int j = 0; j < nj; j++) {
            fl_order_cfg c = base;
            c.act = (fl_order_act)jobs[j].act;
            c.order = jobs[j].order;
            failed |= fl_order_tensor_study(&out[j], &c, (fl_format)jobs[j].fmt, (fl_order_strategy)jobs[j].strat,
                                            (fl_order_scale)jobs[j].scale, x, R, C, (size_t)sample_rows, seed) != 0;
        }
        if (failed) {
            fprintf(stderr, "fp8lab order: out of memory\n");
            free(out), free(jobs), free(x);
            json_decref(res), json_decref(rec), json_decref(config), json_decref(root);
            return FL_EXIT_FAIL;
        }
        if (!json)
            printf("\n%-8s %-5s %-6s %-5s %1s %10s %10s %10s %7s %9s %9s %9s\n", "act", "fmt", "scale", "strat", "r",
                   "overflow", "clipped", "flushed", "ulp n", "ulp p50", "ulp p99", "ulp max");
        for (int j = 0; j < nj; j++) {
            const fl_order_tensor_result *t = &out[j];
            const int safe = t->frac_overflow == 0 && t->frac_clipped == 0 && t->frac_flushed <= max_flush;
            if (json) {
                json_t *o = json_object();
                json_object_set_new(o, "act", json_string(fl_order_act_name(t->act)));
                json_object_set_new(o, "order", json_integer(t->order));
                json_object_set_new(o, "format", json_string(fl_format_name(t->fmt)));
                json_object_set_new(o, "strategy", json_string(fl_order_strategy_name(t->strategy)));
                json_object_set_new(o, "scaling", json_string(fl_order_scale_name(t->scale)));
                json_object_set_new(o, "elements", json_integer((json_int_t)t->n));
                json_object_set_new(o, "frac_overflow", json_real(t->frac_overflow));
                json_object_set_new(o, "frac_clipped", json_real(t->frac_clipped));
                json_object_set_new(o, "frac_flushed", json_real(t->frac_flushed));
                json_object_set_new(o, "ulp_samples", json_integer((json_int_t)t->ulp_n));
                json_object_set_new(o, "ulp_p50", jnum(t->ulp_n ? t->ulp_p50 : NAN));
                json_object_set_new(o, "ulp_p99", jnum(t->ulp_n ? t->ulp_p99 : NAN));
                json_object_set_new(o, "ulp_max", jnum(t->ulp_n ? t->ulp_max : NAN));
                json_object_set_new(o, "safe", json_boolean(safe));
                json_array_append_new(res, o);
            } else {
                printf("%-8s %-5s %-6s %-5s %d %9.4f%% %9.4f%% %9.4f%% %7zu %9.3g %9.3g %9.3g%s\n", fl_order_act_name(t->act),
                       fl_format_name(t->fmt), fl_order_scale_name(t->scale), fl_order_strategy_name(t->strategy), t->order,
                       100 * t->frac_overflow, 100 * t->frac_clipped, 100 * t->frac_flushed, t->ulp_n, t->ulp_p50,
                       t->ulp_p99, t->ulp_max, safe ? "" : "  unsafe");
            }
        }
        /* recommendation: per (act, format, scaling, strategy) the highest safe order */
        if (!json)
            printf("\nrecommendation (highest order with no overflow, nothing clipped, <= %.3g%% flushed):\n", 100 * max_flush);
        for (int j = 0; j < nj; j++) {
            const fl_order_tensor_result *t = &out[j];
            if (j + 1 < nj && jobs[j + 1].act == jobs[j].act && jobs[j + 1].fmt == jobs[j].fmt &&
                jobs[j + 1].scale == jobs[j].scale && jobs[j + 1].strat == jobs[j].strat)
                continue; /* the last order of a group closes it */
            int best = 0;
            for (int k = j; k >= 0 && jobs[k].act == jobs[j].act && jobs[k].fmt == jobs[j].fmt &&
                            jobs[k].scale == jobs[j].scale && jobs[k].strat == jobs[j].strat;
                 k--) {
                const fl_order_tensor_result *u = &out[k];
                if (u->frac_overflow == 0 && u->frac_clipped == 0 && u->frac_flushed <= max_flush && u->order > best)
                    best = u->order;
            }
            if (json) {
                json_t *o = json_object();
                json_object_set_new(o, "act", json_string(fl_order_act_name(t->act)));
                json_object_set_new(o, "format", json_string(fl_format_name(t->fmt)));
                json_object_set_new(o, "scaling", json_string(fl_order_scale_name(t->scale)));
                json_object_set_new(o, "strategy", json_string(fl_order_strategy_name(t->strategy)));
                json_object_set_new(o, "highest_safe_order", best ? json_integer(best) : json_null());
                json_array_append_new(rec, o);
            } else {
                char b[16];
                snprintf(b, sizeof b, "%d", best);
                printf("  %-8s %-5s %-6s %-5s  %s\n", fl_order_act_name(t->act), fl_format_name(t->fmt),
                       fl_order_scale_name(t->scale), fl_order_strategy_name(t->strategy), best ? b : "none");
            }
        }
        json_object_set_new(root, "results", res);
        json_object_set_new(root, "recommendation", rec);
        free(out);
        free(jobs);
        free(x);
    } else {
        json_object_set_new(config, "ulp_range", json_real(range));
        typedef struct { int act, order, fmt, strat; } job;
        job jobs[2 * 3 * 7 * 2];
        int nj = 0;
        for (int ai = 0; ai < acts.n; ai++)
            for (int fi = 0; fi < fmts.n; fi++)
                for (int si = 0; si < strats.n; si++)
                    for (int oi = 0; oi < orders.n; oi++)
                        jobs[nj++] = (job){ acts.v[ai], orders.v[oi], fmts.v[fi], strats.v[si] };
        fl_order_entry *ent = calloc((size_t)nj, sizeof *ent);
        if (!ent) {
            json_decref(config), json_decref(root);
            return FL_EXIT_FAIL;
        }
#pragma omp parallel for schedule(dynamic)
        for (int j = 0; j < nj; j++) {
            fl_order_cfg c = base;
            c.act = (fl_order_act)jobs[j].act;
            c.order = jobs[j].order;
            fl_order_entry_compute(&ent[j], &c, (fl_format)jobs[j].fmt, (fl_order_strategy)jobs[j].strat, range);
        }
        json_t *arr = json_array(), *rec = json_array();
        if (!json)
            printf("%-8s %-5s %-5s %1s %12s %-22s %10s %10s %11s %10s %9s %9s\n", "act", "fmt", "strat", "r", "overflow at",
                   "first to overflow", "1st input", "fp32 kern", "underflow<=", "out bound", "ulp max", "ovf/nan");
        for (int j = 0; j < nj; j++) {
            const fl_order_entry *e = &ent[j];
            if (json) {
                json_t *o = json_object();
                json_object_set_new(o, "act", json_string(fl_order_act_name(e->act)));
                json_object_set_new(o, "order", json_integer(e->order));
                json_object_set_new(o, "format", json_string(fl_format_name(e->fmt)));
                json_object_set_new(o, "strategy", json_string(fl_order_strategy_name(e->strategy)));
                json_object_set_new(o, "overflow_threshold", jnum(e->overflow_threshold));
                json_object_set_new(o, "overflow_inclusive", json_boolean(e->overflow_inclusive));
                json_object_set_new(o, "overflow_cause", e->overflow_cause ? json_string(e->overflow_cause) : json_null());
                json_object_set_new(o, "overflow_input", jnum(e->overflow_input));
                json_object_set_new(o, "fused_fp32_threshold", jnum(e->fused_fp32_threshold));
                json_object_set_new(o, "underflow_threshold", jnum(e->underflow_threshold));
                json_object_set_new(o, "underflow_input", jnum(e->underflow_input));
                json_object_set_new(o, "output_bound", jnum(e->output_bound));
                json_object_set_new(o, "small_row_nonfinite_below", jnum(e->small_row_nonfinite));
                if (range > 0) {
                    json_object_set_new(o, "ulp_range", json_real(e->ulp_range));
                    json_object_set_new(o, "ulp_inputs", json_integer(e->ulp_inputs));
                    json_object_set_new(o, "ulp_overflowed", json_integer(e->ulp_overflowed));
                    json_object_set_new(o, "ulp_nonfinite", json_integer(e->ulp_nonfinite));
                    json_object_set_new(o, "ulp_silent_max", json_real(e->ulp_silent_max));
                    json_object_set_new(o, "ulp_correctly_rounded", json_integer(e->ulp_correct));
                    json_object_set_new(o, "ulp_max", json_real(e->ulp_max));
                    json_object_set_new(o, "ulp_max_at", jnum(e->ulp_max_x));
                }
                json_array_append_new(arr, o);
            } else {
                char t1[32], t2[32], t3[32], t4[32], t5[32], t6[32];
                /* ">T": overflow strictly above T (the tie at T rounds down) */
                t1[0] = '>';
                fmt_num(t1 + 1, sizeof t1 - 1, e->overflow_threshold);
                const char *thr = !e->overflow_inclusive && isfinite(e->overflow_threshold) ? t1 : t1 + 1;
                fmt_num(t2, sizeof t2, e->overflow_input);
                fmt_num(t3, sizeof t3, e->fused_fp32_threshold);
                fmt_num(t4, sizeof t4, e->underflow_threshold);
                fmt_num(t5, sizeof t5, e->output_bound);
                if (range > 0)
                    snprintf(t6, sizeof t6, "%.3g", e->ulp_max);
                else
                    snprintf(t6, sizeof t6, "-");
                char t7[32];
                snprintf(t7, sizeof t7, "%ld/%ld", e->ulp_overflowed, e->ulp_nonfinite);
                printf("%-8s %-5s %-5s %d %12s %-22s %10s %10s %11s %10s %9s %9s\n", fl_order_act_name(e->act),
                       fl_format_name(e->fmt), fl_order_strategy_name(e->strategy), e->order, thr,
                       e->overflow_cause ? e->overflow_cause : "-", t2, t3, t4, t5, t6, t7);
            }
        }
        /* recommendation: highest order whose overflow threshold exceeds each amax level */
        if (!json) {
            printf("\nhighest order without overflow for pre-activations with |x| <= amax (unscaled):\n%-8s %-5s %-5s", "act", "fmt", "strat");
            for (int k = 0; k < n_amax; k++)
                printf(" %9.4g", amax_levels[k]);
            printf("\n");
        }
        for (int j = 0; j < nj; j++) {
            if (j + 1 < nj && jobs[j + 1].act == jobs[j].act && jobs[j + 1].fmt == jobs[j].fmt &&
                jobs[j + 1].strat == jobs[j].strat)
                continue;
            json_t *o = json ? json_object() : NULL, *lv = json ? json_array() : NULL;
            if (!json)
                printf("%-8s %-5s %-5s", fl_order_act_name(ent[j].act), fl_format_name(ent[j].fmt),
                       fl_order_strategy_name(ent[j].strategy));
            for (int k = 0; k < n_amax; k++) {
                int best = 0;
                for (int q = j; q >= 0 && jobs[q].act == jobs[j].act && jobs[q].fmt == jobs[j].fmt &&
                                jobs[q].strat == jobs[j].strat;
                     q--) {
                    const fl_order_entry *e = &ent[q];
                    const int ok = amax_levels[k] < e->overflow_threshold ||
                                   (amax_levels[k] == e->overflow_threshold && !e->overflow_inclusive);
                    if (ok && e->order > best)
                        best = e->order;
                }
                if (json) {
                    json_t *l = json_object();
                    json_object_set_new(l, "amax", json_real(amax_levels[k]));
                    json_object_set_new(l, "highest_safe_order", best ? json_integer(best) : json_null());
                    json_array_append_new(lv, l);
                } else {
                    printf(" %9s", best ? (char[2]){ (char)('0' + best), 0 } : "none");
                }
            }
            if (json) {
                json_object_set_new(o, "act", json_string(fl_order_act_name(ent[j].act)));
                json_object_set_new(o, "format", json_string(fl_format_name(ent[j].fmt)));
                json_object_set_new(o, "strategy", json_string(fl_order_strategy_name(ent[j].strategy)));
                json_object_set_new(o, "scaling", json_string("none"));
                json_object_set_new(o, "levels", lv);
                json_array_append_new(rec, o);
            } else {
                printf("\n");
            }
        }
        if (!json)
            printf("\nThresholds are for |x|; PolyReLU's negative side is 0.  PolyNorm: outlier row of n = %ld elements "
                   "(bulk %.3g), eps %.3g; 'out bound' = sup |output| = |a0| + sqrt(n) sum |a_i|.\n"
                   "Scaled casts cannot overflow; their cost is flushing: see experiments/polyorder/ORDER.md and --input.\n",
                   base.n, base.bulk, base.eps);
        json_object_set_new(root, "entries", arr);
        json_object_set_new(root, "recommendation", rec);
        free(ent);
    }
    json_object_set_new(root, "config", config);
    if (json) {
        char *s = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
        puts(s);
        free(s);
    }
    json_decref(root);
    return FL_EXIT_OK;
}
