/* cmd_order.c — `fp8lab order`: the safe polynomial order of PolyReLU / PolyNorm for a format, a
 * scaling scheme and an implementation strategy (experiments/polyorder/polyorder.h, experiments/polyorder/ORDER.md). */
#include "train/checkpoint.h"
#include "commands.h"
#include "common/cli.h"
#include "fl_json.h"
#include "train/data.h"
#include "train/model.h"
#include "npy.h"
#include "polyorder.h"
#include "fl_tensor.h"
#include "train/train.h"

#include <jansson.h>
#include <math.h>
#include <stddef.h>
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
static json_t *json_num_or_tag(double v)
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
    if (fl_train_open_data(&data, &cfg, err, sizeof err)) {
        fprintf(stderr, "fp8lab order: %s: cannot rebuild the run's data: %s\n", dir, err);
        fl_ckpt_free(&ck);
        return FL_EXIT_FAIL;
    }
    if (data.hash != cfg.data_hash) {
        fprintf(stderr, "fp8lab order: %s: the run's data changed since it was trained (hash %016llx, now %016llx)\n", dir,
                (unsigned long long)cfg.data_hash, (unsigned long long)data.hash);
        fl_data_free(&data);
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
    fl_train_batch(batch, &data, &cfg, st.step);
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
    if (fl_tensor_load_f32(x, R, C, path, tensor, 1, err, sizeof err)) {
        fprintf(stderr, "fp8lab order: %s\n", err);
        return FL_EXIT_FAIL;
    }
    return 0;
}

/* ---- arguments ------------------------------------------------------------------------------------ */

typedef struct {
    const char *input, *tensor, *run_dir, *dump;
    sel acts, orders, fmts, strats;
    double amax_levels[MAX_SEL];
    int n_amax, json;
    double range, max_flush;
    unsigned long long sample_rows, seed;
    fl_order_cfg base;
} order_opts;

static const char *const cmd = "order";

static void order_opts_init(order_opts *o)
{
    memset(o, 0, sizeof *o);
    o->acts = (sel){ 2, { FL_ORDER_POLYRELU, FL_ORDER_POLYNORM } };
    o->orders = (sel){ 3, { 2, 3, 4 } };
    o->fmts = (sel){ 7, { FL_FMT_BF16, FL_FMT_FP16, FL_FMT_E4M3, FL_FMT_E5M2, FL_FMT_E3M2, FL_FMT_E2M3, FL_FMT_E2M1 } };
    o->strats = (sel){ 2, { FL_ORDER_FUSED, FL_ORDER_NAIVE } };
    const double amax[] = { 4, 16, 64, 448 };
    memcpy(o->amax_levels, amax, sizeof amax);
    o->n_amax = 4;
    o->range = 16, o->max_flush = 0.01;
    o->sample_rows = 8, o->seed = 1;
    fl_order_cfg_init(&o->base, FL_ORDER_POLYRELU, 3);
}

static int parse_amax(order_opts *o, const char *v)
{
    char buf[256];
    if (strlen(v) >= sizeof buf)
        return fl_cli_usage_error(cmd, "--amax: list too long");
    strcpy(buf, v);
    o->n_amax = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        double d;
        if (o->n_amax == MAX_SEL || fl_cli_parse_double(&d, tok) || !(d > 0) || !isfinite(d))
            return fl_cli_usage_error(cmd, "--amax takes positive numbers separated by commas, got '%s'", v);
        o->amax_levels[o->n_amax++] = d;
    }
    return o->n_amax ? 0 : fl_cli_usage_error(cmd, "--amax takes positive numbers separated by commas");
}

/* Flags with a number: where it goes and what it accepts. */
typedef enum { NUM_U_1_2P24, NUM_U, NUM_NONNEG, NUM_POS } num_kind;
typedef struct {
    const char *flag;
    num_kind kind;
    size_t off; /* offset of the double / unsigned long long / long in order_opts */
} num_flag;

#define OFF(f) offsetof(order_opts, f)
static const num_flag num_flags[] = {
    { "--row-len", NUM_U_1_2P24, OFF(base.n) },       { "--sample-rows", NUM_U_1_2P24, OFF(sample_rows) },
    { "--seed", NUM_U, OFF(seed) },                   { "--bulk", NUM_NONNEG, OFF(base.bulk) },
    { "--eps", NUM_NONNEG, OFF(base.eps) },           { "--range", NUM_POS, OFF(range) },
    { "--max-flush", NUM_NONNEG, OFF(max_flush) },
};
#undef OFF

static int parse_num_flag(order_opts *o, const num_flag *f, const char *v)
{
    char *dst = (char *)o + f->off;
    if (f->kind == NUM_U_1_2P24 || f->kind == NUM_U) {
        unsigned long long u;
        if (fl_cli_parse_u64(&u, v) || (f->kind == NUM_U_1_2P24 && (u < 1 || u > (1u << 24))))
            return fl_cli_usage_error(cmd, "%s needs %s", f->flag,
                                      f->kind == NUM_U ? "a non-negative integer" : "an integer in 1..16777216");
        if (!strcmp(f->flag, "--row-len"))
            *(long *)dst = (long)u;
        else
            *(unsigned long long *)dst = u;
        return 0;
    }
    double d;
    if (fl_cli_parse_double(&d, v) || !isfinite(d) || d < 0 || (f->kind == NUM_POS && d == 0))
        return fl_cli_usage_error(cmd, "%s needs a %s number", f->flag, f->kind == NUM_POS ? "positive" : "non-negative");
    *(double *)dst = d;
    return 0;
}

/* --a0 .. --a4: the index, or -1. */
static int coef_flag(const char *a)
{
    return !strncmp(a, "--a", 3) && a[3] >= '0' && a[3] <= '0' + FL_POLY_MAX_ORDER && !a[4] ? a[3] - '0' : -1;
}

static int parse_value_flag(order_opts *o, const char *a, const char *v)
{
    for (size_t k = 0; k < FL_ARRAY_LEN(num_flags); k++)
        if (!strcmp(a, num_flags[k].flag))
            return parse_num_flag(o, &num_flags[k], v);
    const int ci = coef_flag(a);
    if (ci >= 0) {
        double d;
        if (fl_cli_parse_double(&d, v) || !isfinite(d))
            return fl_cli_usage_error(cmd, "%s needs a finite number", a);
        o->base.a[ci] = d;
        o->base.a_set |= 1u << ci;
        return 0;
    }
    if (!strcmp(a, "--act"))
        return parse_list(&o->acts, v, one_act) ? fl_cli_usage_error(cmd, "--act takes polyrelu and/or polynorm, got '%s'", v) : 0;
    if (!strcmp(a, "--order"))
        return parse_list(&o->orders, v, one_order) ? fl_cli_usage_error(cmd, "--order takes orders 2..4 (e.g. 2,3,4), got '%s'", v) : 0;
    if (!strcmp(a, "--format"))
        return parse_list(&o->fmts, v, one_format)
                   ? fl_cli_usage_error(cmd, "--format takes bf16, fp16, e4m3, e5m2, e3m2, e2m3, e2m1, got '%s'", v)
                   : 0;
    if (!strcmp(a, "--strategy"))
        return parse_list(&o->strats, v, one_strategy) ? fl_cli_usage_error(cmd, "--strategy takes fused and/or naive, got '%s'", v) : 0;
    if (!strcmp(a, "--pow"))
        return fl_order_pow_parse(&o->base.pow, v) ? fl_cli_usage_error(cmd, "--pow takes pow or mul, got '%s'", v) : 0;
    if (!strcmp(a, "--amax"))
        return parse_amax(o, v);
    const char **str = !strcmp(a, "--input") ? &o->input : !strcmp(a, "--tensor") ? &o->tensor
                       : !strcmp(a, "--run") ? &o->run_dir : !strcmp(a, "--dump") ? &o->dump : NULL;
    if (!str)
        return fl_cli_usage_error(cmd, "unknown argument '%s'", a);
    *str = v;
    return 0;
}

static int is_value_flag(const char *a)
{
    static const char *const flags[] = { "--act", "--order", "--format", "--strategy", "--pow", "--amax",
                                         "--input", "--tensor", "--run", "--dump" };
    for (size_t i = 0; i < FL_ARRAY_LEN(flags); i++)
        if (!strcmp(a, flags[i]))
            return 1;
    for (size_t i = 0; i < FL_ARRAY_LEN(num_flags); i++)
        if (!strcmp(a, num_flags[i].flag))
            return 1;
    return coef_flag(a) >= 0;
}

/* Returns -1 to go on, else the exit status (help printed, or a usage error). */
static int parse_order_opts(order_opts *o, int argc, char **argv)
{
    order_opts_init(o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            return FL_EXIT_OK;
        }
        if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "--no-ulp")) {
            o->range = 0;
        } else if (!is_value_flag(a)) {
            return fl_cli_usage_error(cmd, "unknown argument '%s'", a);
        } else if (i + 1 >= argc) {
            return fl_cli_usage_error(cmd, "%s needs a value", a);
        } else {
            const int rc = parse_value_flag(o, a, argv[++i]);
            if (rc)
                return rc;
        }
    }
    if (o->tensor && !o->input)
        return fl_cli_usage_error(cmd, "--tensor needs --input FILE.safetensors");
    if (o->input && o->run_dir)
        return fl_cli_usage_error(cmd, "--input and --run are alternatives");
    if (o->dump && !o->input && !o->run_dir)
        return fl_cli_usage_error(cmd, "--dump needs --input or --run");
    return -1;
}

static json_t *config_json(const order_opts *o)
{
    json_t *config = json_object(), *coef = json_object();
    json_object_set_new(config, "row_len", json_integer(o->base.n));
    json_object_set_new(config, "bulk", json_real(o->base.bulk));
    json_object_set_new(config, "eps", json_real(o->base.eps));
    json_object_set_new(config, "pow", json_string(fl_order_pow_name(o->base.pow)));
    for (int i = 0; i <= FL_POLY_MAX_ORDER; i++)
        if (o->base.a_set >> i & 1) {
            char k[4] = { 'a', (char)('0' + i), 0, 0 };
            json_object_set_new(coef, k, json_real(o->base.a[i]));
        }
    json_object_set_new(config, "coefficients",
                        json_object_size(coef) ? coef : (json_decref(coef), json_string("default: a0 = 0, a_i = 1/r")));
    return config;
}

/* ---- the analytic map ------------------------------------------------------------------------------ */

/* One entry per (act, format, strategy, order), orders innermost: a group of o->orders.n consecutive
   entries is one (act, format, strategy). */
static fl_order_entry *compute_map(const order_opts *o, size_t *n_out)
{
    const size_t no = (size_t)o->orders.n, n = (size_t)o->acts.n * o->fmts.n * o->strats.n * no;
    fl_order_entry *ent = calloc(n, sizeof *ent);
    if (!ent)
        return NULL;
#pragma omp parallel for schedule(dynamic)
    for (long j = 0; j < (long)n; j++) {
        const size_t g = (size_t)j / no, si = g % o->strats.n, fi = g / o->strats.n % o->fmts.n,
                     ai = g / o->strats.n / o->fmts.n;
        fl_order_cfg c = o->base;
        c.act = (fl_order_act)o->acts.v[ai];
        c.order = o->orders.v[(size_t)j % no];
        fl_order_entry_compute(&ent[j], &c, (fl_format)o->fmts.v[fi], (fl_order_strategy)o->strats.v[si], o->range);
    }
    *n_out = n;
    return ent;
}

static void emit_map_entry(const order_opts *o, const fl_order_entry *e, json_t *arr)
{
    if (o->json) {
        json_t *j = json_object();
        json_object_set_new(j, "act", json_string(fl_order_act_name(e->act)));
        json_object_set_new(j, "order", json_integer(e->order));
        json_object_set_new(j, "format", json_string(fl_format_name(e->fmt)));
        json_object_set_new(j, "strategy", json_string(fl_order_strategy_name(e->strategy)));
        json_object_set_new(j, "overflow_threshold", json_num_or_tag(e->overflow_threshold));
        json_object_set_new(j, "overflow_inclusive", json_boolean(e->overflow_inclusive));
        json_object_set_new(j, "overflow_cause", e->overflow_cause ? json_string(e->overflow_cause) : json_null());
        json_object_set_new(j, "overflow_input", json_num_or_tag(e->overflow_input));
        json_object_set_new(j, "fused_fp32_threshold", json_num_or_tag(e->fused_fp32_threshold));
        json_object_set_new(j, "underflow_threshold", json_num_or_tag(e->underflow_threshold));
        json_object_set_new(j, "underflow_input", json_num_or_tag(e->underflow_input));
        json_object_set_new(j, "output_bound", json_num_or_tag(e->output_bound));
        json_object_set_new(j, "small_row_nonfinite_below", json_num_or_tag(e->small_row_nonfinite));
        if (o->range > 0) {
            json_object_set_new(j, "ulp_range", json_real(e->ulp_range));
            json_object_set_new(j, "ulp_inputs", json_integer(e->ulp_inputs));
            json_object_set_new(j, "ulp_overflowed", json_integer(e->ulp_overflowed));
            json_object_set_new(j, "ulp_nonfinite", json_integer(e->ulp_nonfinite));
            json_object_set_new(j, "ulp_silent_max", json_real(e->ulp_silent_max));
            json_object_set_new(j, "ulp_correctly_rounded", json_integer(e->ulp_correct));
            json_object_set_new(j, "ulp_max", json_real(e->ulp_max));
            json_object_set_new(j, "ulp_max_at", json_num_or_tag(e->ulp_max_x));
        }
        json_array_append_new(arr, j);
        return;
    }
    char t1[32], t2[32], t3[32], t4[32], t5[32], t6[32], t7[32];
    /* ">T": overflow strictly above T (the tie at T rounds down) */
    t1[0] = '>';
    fmt_num(t1 + 1, sizeof t1 - 1, e->overflow_threshold);
    const char *thr = !e->overflow_inclusive && isfinite(e->overflow_threshold) ? t1 : t1 + 1;
    fmt_num(t2, sizeof t2, e->overflow_input);
    fmt_num(t3, sizeof t3, e->fused_fp32_threshold);
    fmt_num(t4, sizeof t4, e->underflow_threshold);
    fmt_num(t5, sizeof t5, e->output_bound);
    if (o->range > 0)
        snprintf(t6, sizeof t6, "%.3g", e->ulp_max);
    else
        snprintf(t6, sizeof t6, "-");
    snprintf(t7, sizeof t7, "%ld/%ld", e->ulp_overflowed, e->ulp_nonfinite);
    printf("%-8s %-5s %-5s %d %12s %-22s %10s %10s %11s %10s %9s %9s\n", fl_order_act_name(e->act), fl_format_name(e->fmt),
           fl_order_strategy_name(e->strategy), e->order, thr, e->overflow_cause ? e->overflow_cause : "-", t2, t3, t4, t5,
           t6, t7);
}

/* The recommendation of one group: the highest safe order at each amax level. */
static void emit_map_group(const order_opts *o, const fl_order_entry *grp, size_t n, json_t *rec)
{
    json_t *j = o->json ? json_object() : NULL, *lv = o->json ? json_array() : NULL;
    if (!o->json)
        printf("%-8s %-5s %-5s", fl_order_act_name(grp->act), fl_format_name(grp->fmt), fl_order_strategy_name(grp->strategy));
    for (int k = 0; k < o->n_amax; k++) {
        const int best = fl_order_highest_safe_map(grp, n, o->amax_levels[k]);
        if (o->json) {
            json_t *l = json_object();
            json_object_set_new(l, "amax", json_real(o->amax_levels[k]));
            json_object_set_new(l, "highest_safe_order", best ? json_integer(best) : json_null());
            json_array_append_new(lv, l);
        } else {
            printf(" %9s", best ? (char[2]){ (char)('0' + best), 0 } : "none");
        }
    }
    if (!o->json) {
        printf("\n");
        return;
    }
    json_object_set_new(j, "act", json_string(fl_order_act_name(grp->act)));
    json_object_set_new(j, "format", json_string(fl_format_name(grp->fmt)));
    json_object_set_new(j, "strategy", json_string(fl_order_strategy_name(grp->strategy)));
    json_object_set_new(j, "scaling", json_string("none"));
    json_object_set_new(j, "levels", lv);
    json_array_append_new(rec, j);
}

static int run_map(const order_opts *o, json_t *root, json_t *config)
{
    json_object_set_new(config, "ulp_range", json_real(o->range));
    size_t n;
    fl_order_entry *ent = compute_map(o, &n);
    if (!ent)
        return FL_EXIT_FAIL;
    json_t *arr = json_array(), *rec = json_array();
    if (!o->json)
        printf("%-8s %-5s %-5s %1s %12s %-22s %10s %10s %11s %10s %9s %9s\n", "act", "fmt", "strat", "r", "overflow at",
               "first to overflow", "1st input", "fp32 kern", "underflow<=", "out bound", "ulp max", "ovf/nan");
    for (size_t j = 0; j < n; j++)
        emit_map_entry(o, &ent[j], arr);
    if (!o->json) {
        printf("\nhighest order without overflow for pre-activations with |x| <= amax (unscaled):\n%-8s %-5s %-5s", "act", "fmt", "strat");
        for (int k = 0; k < o->n_amax; k++)
            printf(" %9.4g", o->amax_levels[k]);
        printf("\n");
    }
    for (size_t g = 0; g < n; g += (size_t)o->orders.n)
        emit_map_group(o, &ent[g], (size_t)o->orders.n, rec);
    if (!o->json)
        printf("\nThresholds are for |x|; PolyReLU's negative side is 0.  PolyNorm: outlier row of n = %ld elements "
               "(bulk %.3g), eps %.3g; 'out bound' = sup |output| = |a0| + sqrt(n) sum |a_i|.\n"
               "Scaled casts cannot overflow; their cost is flushing: see experiments/polyorder/ORDER.md and --input.\n",
               o->base.n, o->base.bulk, o->base.eps);
    json_object_set_new(root, "entries", arr);
    json_object_set_new(root, "recommendation", rec);
    free(ent);
    return FL_EXIT_OK;
}

/* ---- a real tensor ---------------------------------------------------------------------------------- */

/* Every (act, format, scaling, strategy, order) that applies, orders innermost: a group of o->orders.n
   consecutive results is one (act, format, scaling, strategy).  NULL: out of memory. */
static fl_order_tensor_result *compute_tensor(const order_opts *o, const float *x, size_t R, size_t C, size_t *n_out)
{
    typedef struct {
        int act, order, fmt, strat;
        fl_scaling sc;
    } job;
    const size_t most = (size_t)o->acts.n * o->fmts.n * FL_SCALING_COUNT * o->strats.n * o->orders.n;
    fl_order_tensor_result *out = calloc(most, sizeof *out);
    job *jobs = malloc(most * sizeof *jobs);
    if (!out || !jobs) {
        free(out), free(jobs);
        return NULL;
    }
    size_t nj = 0;
    for (int ai = 0; ai < o->acts.n; ai++)
        for (int fi = 0; fi < o->fmts.n; fi++)
            for (int sc = 0; sc < FL_SCALING_COUNT; sc++)
                for (int si = 0; si < o->strats.n; si++)
                    for (int oi = 0; oi < o->orders.n; oi++)
                        if (fl_order_scale_applies((fl_format)o->fmts.v[fi], (fl_scaling)sc))
                            jobs[nj++] = (job){ o->acts.v[ai], o->orders.v[oi], o->fmts.v[fi], o->strats.v[si], (fl_scaling)sc };
    int failed = 0;
#pragma omp parallel for schedule(dynamic) reduction(| : failed)
    for (long j = 0; j < (long)nj; j++) {
        fl_order_cfg c = o->base;
        c.act = (fl_order_act)jobs[j].act;
        c.order = jobs[j].order;
        failed |= fl_order_tensor_study(&out[j], &c, (fl_format)jobs[j].fmt, (fl_order_strategy)jobs[j].strat, jobs[j].sc,
                                        x, R, C, (size_t)o->sample_rows, o->seed) != 0;
    }
    free(jobs);
    if (failed) {
        free(out);
        return NULL;
    }
    *n_out = nj;
    return out;
}

static void emit_tensor_result(const order_opts *o, const fl_order_tensor_result *t, json_t *res)
{
    const int safe = fl_order_tensor_safe(t, o->max_flush);
    if (!o->json) {
        printf("%-8s %-5s %-6s %-5s %d %9.4f%% %9.4f%% %9.4f%% %7zu %9.3g %9.3g %9.3g%s\n", fl_order_act_name(t->act),
               fl_format_name(t->fmt), fl_scaling_name(t->scale), fl_order_strategy_name(t->strategy), t->order,
               100 * t->frac_overflow, 100 * t->frac_clipped, 100 * t->frac_flushed, t->ulp_n, t->ulp_p50, t->ulp_p99,
               t->ulp_max, safe ? "" : "  unsafe");
        return;
    }
    json_t *j = json_object();
    json_object_set_new(j, "act", json_string(fl_order_act_name(t->act)));
    json_object_set_new(j, "order", json_integer(t->order));
    json_object_set_new(j, "format", json_string(fl_format_name(t->fmt)));
    json_object_set_new(j, "strategy", json_string(fl_order_strategy_name(t->strategy)));
    json_object_set_new(j, "scaling", json_string(fl_scaling_name(t->scale)));
    json_object_set_new(j, "elements", json_integer((json_int_t)t->n));
    json_object_set_new(j, "frac_overflow", json_real(t->frac_overflow));
    json_object_set_new(j, "frac_clipped", json_real(t->frac_clipped));
    json_object_set_new(j, "frac_flushed", json_real(t->frac_flushed));
    json_object_set_new(j, "ulp_samples", json_integer((json_int_t)t->ulp_n));
    json_object_set_new(j, "ulp_p50", json_num_or_tag(t->ulp_n ? t->ulp_p50 : NAN));
    json_object_set_new(j, "ulp_p99", json_num_or_tag(t->ulp_n ? t->ulp_p99 : NAN));
    json_object_set_new(j, "ulp_max", json_num_or_tag(t->ulp_n ? t->ulp_max : NAN));
    json_object_set_new(j, "safe", json_boolean(safe));
    json_array_append_new(res, j);
}

static void emit_tensor_group(const order_opts *o, const fl_order_tensor_result *grp, size_t n, json_t *rec)
{
    const int best = fl_order_highest_safe_tensor(grp, n, o->max_flush);
    if (!o->json) {
        char b[16];
        snprintf(b, sizeof b, "%d", best);
        printf("  %-8s %-5s %-6s %-5s  %s\n", fl_order_act_name(grp->act), fl_format_name(grp->fmt),
               fl_scaling_name(grp->scale), fl_order_strategy_name(grp->strategy), best ? b : "none");
        return;
    }
    json_t *j = json_object();
    json_object_set_new(j, "act", json_string(fl_order_act_name(grp->act)));
    json_object_set_new(j, "format", json_string(fl_format_name(grp->fmt)));
    json_object_set_new(j, "scaling", json_string(fl_scaling_name(grp->scale)));
    json_object_set_new(j, "strategy", json_string(fl_order_strategy_name(grp->strategy)));
    json_object_set_new(j, "highest_safe_order", best ? json_integer(best) : json_null());
    json_array_append_new(rec, j);
}

static int run_tensor(const order_opts *o, json_t *root, json_t *config)
{
    float *x;
    size_t R, C;
    int rc = o->input ? load_input(&x, &R, &C, o->input, o->tensor) : load_run(&x, &R, &C, o->run_dir);
    if (rc)
        return rc;
    if (o->dump) {
        char err[1024];
        fl_array arr = { FL_DT_F32, 2, { (int64_t)R, (int64_t)C }, R * C, 0, x };
        if (fl_npy_write(o->dump, &arr, err, sizeof err)) {
            fprintf(stderr, "fp8lab order: %s\n", err);
            free(x);
            return FL_EXIT_FAIL;
        }
    }
    const char *name = o->input ? o->input : o->run_dir;
    double amax = 0, ss = 0;
    for (size_t i = 0; i < R * C; i++) {
        amax = fmax(amax, fabs((double)x[i]));
        ss += (double)x[i] * x[i];
    }
    const unsigned long long sampled = R < o->sample_rows ? (unsigned long long)R : o->sample_rows;
    if (!o->json)
        printf("fp8lab order: %s: %zu rows x %zu (row length n = %zu), amax %.6g, rms %.6g; ulp errors on %llu sampled rows (seed %llu)\n",
               name, R, C, C, amax, sqrt(ss / (double)(R * C)), sampled, o->seed);
    json_object_set_new(config, "sample_rows", json_integer((json_int_t)sampled));
    json_object_set_new(config, "seed", json_integer((json_int_t)o->seed));
    json_object_set_new(config, "max_flush", json_real(o->max_flush));
    json_object_set_new(root, "input", fl_json_string(name)); /* a path: any bytes (fl_json.h) */
    json_object_set_new(root, "rows", json_integer((json_int_t)R));
    json_object_set_new(root, "cols", json_integer((json_int_t)C));
    json_object_set_new(root, "amax", json_real(amax));
    size_t n;
    fl_order_tensor_result *out = compute_tensor(o, x, R, C, &n);
    free(x);
    if (!out) {
        fprintf(stderr, "fp8lab order: out of memory\n");
        return FL_EXIT_FAIL;
    }
    json_t *res = json_array(), *rec = json_array();
    if (!o->json)
        printf("\n%-8s %-5s %-6s %-5s %1s %10s %10s %10s %7s %9s %9s %9s\n", "act", "fmt", "scale", "strat", "r",
               "overflow", "clipped", "flushed", "ulp n", "ulp p50", "ulp p99", "ulp max");
    for (size_t j = 0; j < n; j++)
        emit_tensor_result(o, &out[j], res);
    if (!o->json)
        printf("\nrecommendation (highest order with no overflow, nothing clipped, <= %.3g%% flushed):\n", 100 * o->max_flush);
    for (size_t g = 0; g < n; g += (size_t)o->orders.n)
        emit_tensor_group(o, &out[g], (size_t)o->orders.n, rec);
    json_object_set_new(root, "results", res);
    json_object_set_new(root, "recommendation", rec);
    free(out);
    return FL_EXIT_OK;
}

int fl_cmd_order(int argc, char **argv)
{
    order_opts o;
    const int prc = parse_order_opts(&o, argc, argv);
    if (prc >= 0)
        return prc;
    json_t *root = json_object(), *config = config_json(&o);
    const int rc = o.input || o.run_dir ? run_tensor(&o, root, config) : run_map(&o, root, config);
    json_object_set_new(root, "config", config);
    if (rc == FL_EXIT_OK && o.json)
        fl_cli_json_print(root, 17);
    else
        json_decref(root);
    return rc;
}
