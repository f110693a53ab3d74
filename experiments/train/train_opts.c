/* train_opts.c — the table of `fp8lab train`'s options and everything it drives (train_opts.h). */
#include "train_opts.h"

#include "channels.h"
#include "common/cli.h"
#include "fl_base.h"
#include "fl_json.h"
#include "telemetry.h"

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ---- the names of enum values and of the custom rows ------------------------------------------- */

static const char *amax_algo_name(unsigned k) { return k < FL_AMAX_ALGO_COUNT ? fl_amax_algo_name((fl_amax_algo)k) : NULL; }
static const char *device_name(unsigned k)
{
    static const char *const names[] = { [FL_DEVICE_CPU] = "cpu", [FL_DEVICE_TWINS] = "twins", [FL_DEVICE_CUDA] = "cuda" };
    return k < FL_ARRAY_LEN(names) ? names[k] : NULL;
}

static const char *schedule_name(unsigned k)
{
    static const char *const names[] = { [FL_SCHED_CONSTANT] = "constant", [FL_SCHED_COSINE] = "cosine" };
    return k < FL_ARRAY_LEN(names) ? names[k] : NULL;
}
static const char *overflow_name(unsigned k) { return k == 0 ? "saturate" : k == 1 ? "nan" : NULL; }    /* recipe.nosat */
static const char *grad_scaling_name(unsigned k) { return k == 0 ? "delayed" : k == 1 ? "current" : NULL; } /* .grad_current */

static const char *const data_names[] = { [FL_DATA_SYNTHETIC] = "synthetic", [FL_DATA_TEXT] = NULL,
                                          [FL_DATA_TRIGGERS] = "triggers", [FL_DATA_FORTUNES] = "fortunes",
                                          [FL_DATA_SHARDS] = NULL };
#define SHARDS_PREFIX "shards:"

/* The activations as --act takes them (fl_act_spelling), one space apart; with their notes, the
   spaces inside an item written '\x1f' (the help keeps an item on one line). */
static void act_list(char *buf, size_t n, int notes)
{
    size_t w = 0;
    buf[0] = 0;
    for (int k = 0; k < FL_ACT_COUNT && w < n; k++) {
        char item[96];
        fl_act_spelling(item, sizeof item, k, notes);
        for (char *p = item; *p; p++)
            *p = *p == ' ' ? '\x1f' : *p;
        w += (size_t)snprintf(buf + w, n - w, "%s%s", k ? " " : "", item);
    }
}

static void act_values(char *buf, size_t n) { act_list(buf, n, 1); }

static const char *act_parse(fl_train_cfg *c, const char *v, int stored)
{
    static _Thread_local char hint[600];
    fl_act a;
    (void)stored;
    if (fl_act_parse(&a, v)) {
        const int k = snprintf(hint, sizeof hint, "one of ");
        act_list(hint + k, sizeof hint - (size_t)k, 0);
        return hint;
    }
    c->model.act = a;
    return NULL;
}

static void act_format(char *buf, size_t n, const fl_train_cfg *c) { snprintf(buf, n, "%s", fl_act_name(c->model.act)); }

/* --recipe: a recipe's name.  The flag `--recipe paper-gaudi2` also sets the settings that recipe fixes
   (fl_recipe_paper_gaudi2: --amax-history 1 --amax-algo max --margin 0 --pow2 --fp8-overflow saturate
   --grad-sr); a record holds them as they are. */
static void recipe_values(char *buf, size_t n)
{
    size_t w = 0;
    buf[0] = 0;
    for (int k = 0; k < FL_RECIPE_COUNT && w < n; k++)
        w += (size_t)snprintf(buf + w, n - w, "%s%s", k ? " " : "", fl_recipe_name((fl_recipe_kind)k));
}

static const char *recipe_parse(fl_train_cfg *c, const char *v, int stored)
{
    static _Thread_local char hint[200];
    fl_recipe_kind k;
    if (fl_recipe_parse(&k, v)) {
        const int w = snprintf(hint, sizeof hint, "one of ");
        recipe_values(hint + w, sizeof hint - (size_t)w);
        return hint;
    }
    c->recipe.kind = (uint32_t)k;
    if (!stored && k == FL_RECIPE_PAPER_GAUDI2)
        fl_recipe_paper_gaudi2(&c->recipe);
    return NULL;
}

static void recipe_format(char *buf, size_t n, const fl_train_cfg *c)
{
    snprintf(buf, n, "%s", fl_recipe_name((fl_recipe_kind)c->recipe.kind));
}

/* --site appends one override; the record holds them all, ';' between. */
static const char *sites_parse(fl_train_cfg *c, const char *v, int stored)
{
    static _Thread_local char hint[160];
    snprintf(hint, sizeof hint, "PATTERN=bf16|current|delayed; all --site values together at most %d bytes",
             FL_SITE_SPEC_MAX - 1);
    if (!stored)
        return fl_recipe_sites_add(&c->recipe, v) ? hint : NULL;
    memset(c->recipe.sites, 0, sizeof c->recipe.sites);
    for (const char *p = v; *p;) {
        char one[FL_SITE_SPEC_MAX];
        const size_t k = strcspn(p, ";");
        if (k >= sizeof one)
            return hint;
        memcpy(one, p, k);
        one[k] = 0;
        if (fl_recipe_sites_add(&c->recipe, one))
            return hint;
        p += k + (p[k] == ';');
        if (p[-1] == ';' && !*p)
            return hint; /* a trailing ';' */
    }
    return NULL;
}

static void sites_format(char *buf, size_t n, const fl_train_cfg *c)
{
    snprintf(buf, n, "%.*s", (int)strnlen(c->recipe.sites, sizeof c->recipe.sites), c->recipe.sites);
}

/* --data: a generated corpus by name, shards:GLOB (llm.c's token shards), else a text file's path. */
static const char *data_parse(fl_train_cfg *c, const char *v, int stored)
{
    (void)stored;
    uint32_t kind = FL_DATA_TEXT;
    for (uint32_t k = 0; k < FL_ARRAY_LEN(data_names); k++)
        if (data_names[k] && !strcmp(v, data_names[k]))
            kind = k;
    const size_t np = strlen(SHARDS_PREFIX);
    if (kind == FL_DATA_TEXT && !strncmp(v, SHARDS_PREFIX, np)) {
        kind = FL_DATA_SHARDS;
        v += np;
        if (!*v)
            return "shards:GLOB needs a pattern, e.g. 'shards:fineweb_train_*.bin'";
    }
    if ((kind == FL_DATA_TEXT || kind == FL_DATA_SHARDS) && strlen(v) >= sizeof c->data_path)
        return "synthetic, triggers, fortunes, shards:GLOB, or a text file's path, a path or pattern of at most 511 bytes";
    c->data_kind = kind;
    memset(c->data_path, 0, sizeof c->data_path);
    if (kind == FL_DATA_TEXT || kind == FL_DATA_SHARDS)
        memcpy(c->data_path, v, strlen(v));
    return NULL;
}

static void data_format(char *buf, size_t n, const fl_train_cfg *c)
{
    if (c->data_kind == FL_DATA_TEXT || c->data_kind == FL_DATA_SHARDS)
        snprintf(buf, n, "%s%.*s", c->data_kind == FL_DATA_SHARDS ? SHARDS_PREFIX : "",
                 (int)strnlen(c->data_path, sizeof c->data_path), c->data_path);
    else
        snprintf(buf, n, "%s", c->data_kind < FL_ARRAY_LEN(data_names) ? data_names[c->data_kind] : "?");
}

/* --keep-ckpt S1,S2,..: at most FL_KEEP_MAX steps >= 1; the record writes "" for none. */
static const char *keep_parse(fl_train_cfg *c, const char *v, int stored)
{
    static const char hint[] = "steps >= 1, ',' between, at most 16";
    _Static_assert(FL_KEEP_MAX == 16, "the hint's count");
    c->keep_n = 0;
    memset(c->keep, 0, sizeof c->keep);
    if (stored && !*v)
        return NULL;
    for (const char *p = v; *p;) {
        char num[32];
        const size_t k = strcspn(p, ",");
        unsigned long long x;
        if (k == 0 || k >= sizeof num || c->keep_n == FL_KEEP_MAX)
            return hint;
        memcpy(num, p, k);
        num[k] = 0;
        if (fl_cli_parse_u64(&x, num) || x < 1)
            return hint;
        c->keep[c->keep_n++] = x;
        p += k + (p[k] == ',');
    }
    return c->keep_n ? NULL : hint;
}

static void keep_format(char *buf, size_t n, const fl_train_cfg *c)
{
    size_t w = 0;
    buf[0] = 0;
    for (uint32_t k = 0; k < c->keep_n && k < FL_KEEP_MAX && w < n; k++)
        w += (size_t)snprintf(buf + w, n - w, "%s%llu", k ? "," : "", (unsigned long long)c->keep[k]);
}

static void keep_json(json_t *obj, const char *key, const fl_train_cfg *c)
{
    json_t *a = json_array();
    for (uint32_t k = 0; k < c->keep_n && k < FL_KEEP_MAX; k++)
        json_array_append_new(a, json_integer((json_int_t)c->keep[k]));
    json_object_set_new(obj, key, a);
}

/* --decorrelate top:K|random:K (none: no intervention). */
static const char *decor_parse(fl_train_cfg *c, const char *v, int stored)
{
    static const char hint[] = "top:K or random:K with 1 <= K <= 65536";
    const char *colon = strchr(v, ':');
    unsigned long long x;
    (void)stored;
    if (!strcmp(v, "none")) {
        c->decor_mode = FL_DECOR_NONE;
        c->decor_k = 0;
        return NULL;
    }
    if (!colon || fl_cli_parse_u64(&x, colon + 1) || x < 1 || x > 65536)
        return hint;
    if (colon - v == 3 && !strncmp(v, "top", 3))
        c->decor_mode = FL_DECOR_TOP;
    else if (colon - v == 6 && !strncmp(v, "random", 6))
        c->decor_mode = FL_DECOR_RANDOM;
    else
        return hint;
    c->decor_k = (uint32_t)x;
    return NULL;
}

static void decor_format(char *buf, size_t n, const fl_train_cfg *c)
{
    if (c->decor_mode == FL_DECOR_NONE)
        snprintf(buf, n, "none");
    else
        snprintf(buf, n, "%s:%u", fl_decor_name((int)c->decor_mode), c->decor_k);
}

static void decor_json(json_t *obj, const char *key, const fl_train_cfg *c)
{
    json_object_set_new(obj, key, json_string(fl_decor_name((int)c->decor_mode)));
    json_object_set_new(obj, "decorrelate_k", json_integer(c->decor_k));
}

static const fl_opt_ops act_ops = { act_parse, act_format, NULL, act_values, 0 };
static const fl_opt_ops recipe_ops = { recipe_parse, recipe_format, NULL, recipe_values, 0 };
static const fl_opt_ops sites_ops = { sites_parse, sites_format, NULL, NULL, 1 };
static const fl_opt_ops data_ops = { data_parse, data_format, NULL, NULL, 0 };
static const fl_opt_ops keep_ops = { keep_parse, keep_format, keep_json, NULL, 0 };
static const fl_opt_ops decor_ops = { decor_parse, decor_format, decor_json, NULL, 0 };

/* ---- the table ---------------------------------------------------------------------------------- */

#define AT(f) .offset = offsetof(fl_train_cfg, f), .size = sizeof(((fl_train_cfg *)0)->f)
#define U32(lo_, hi_) .type = FL_OPT_U32, .lo = lo_, .hi = hi_
#define U64(lo_, hi_) .type = FL_OPT_U64, .lo = lo_, .hi = hi_
#define F32(lo_, hi_) .type = FL_OPT_F32, .lo = lo_, .hi = hi_
#define ENUM(f) .type = FL_OPT_ENUM, .names = f
#define CUSTOM(o) .type = FL_OPT_CUSTOM, .ops = &o
#define BOOL .type = FL_OPT_BOOL
#define OPEN (FL_OPT_LO_OPEN | FL_OPT_HI_OPEN)
#define NOLIMIT 0x1p64 /* no upper bound for a u64 */

const fl_train_opt fl_train_opt_table[] = {
    { .flag = "--act", .key = "act", CUSTOM(act_ops), AT(model.act), .def = "swiglu", .arg = "ACT",
      .help = "%V (default %D; poly order 3 without a digit)" },
    { .flag = "--recipe", .key = "recipe", CUSTOM(recipe_ops), AT(recipe.kind), .def = "bf16", .arg = "R",
      .help = "%V (default %D; paper-gaudi2: the paper's released recipe on Gaudi2, e4m3 max 240, e5m2 copies of X "
              "and W for the backward, the amax of the previous step; it sets and fixes --amax-history 1 "
              "--amax-algo max --margin 0 --pow2 --grad-sr, saturating)" },
    { .flag = "--steps", .key = "steps", U64(1, 1e8), AT(steps), .def = "1000", .arg = "N", .help = "training steps (%D)" },
    { .flag = "--seed", .key = "seed", U64(0, NOLIMIT), AT(seed), .def = "1", .attr = FL_OPT_FIXED, .arg = "S",
      .help = "seed of init, data, batches (%D)" },
    { .flag = "--out", .type = FL_OPT_RUN, .arg = "DIR",
      .help = "run folder (required unless --resume); refused when it holds another run" },
    { .flag = "--overwrite", .type = FL_OPT_RUN,
      .help = "let a fresh run replace the run files of --out (not a fork's parent's folder)" },

    { .key = "vocab", U32(0, 65536), AT(model.V), .def = "256", .attr = FL_OPT_FIXED }, /* 256 + --bos, or the shards' */
    { .flag = "--width", .key = "width", U32(4, 4096), AT(model.C), .def = "64", .attr = FL_OPT_FIXED, .group = "model",
      .arg = "C", .help = "(%D)" },
    { .flag = "--layers", .key = "layers", U32(1, FL_MODEL_MAX_L), AT(model.L), .def = "2", .attr = FL_OPT_FIXED,
      .group = "model", .arg = "L", .help = "(%D)" },
    { .flag = "--heads", .key = "heads", U32(1, 4096), AT(model.H), .def = "4", .attr = FL_OPT_FIXED, .group = "model",
      .arg = "H", .help = "(%D)" },
    { .flag = "--ffn", .key = "ffn", U32(1, FL_MODEL_MAX_F), AT(model.F), .def = "256", .attr = FL_OPT_FIXED,
      .group = "model", .arg = "F", .help = "(%D)" },
    { .flag = "--seq", .key = "seq", U32(2, 4096), AT(model.T), .def = "64", .attr = FL_OPT_FIXED, .group = "model",
      .arg = "T", .help = "(%D)" },
    { .flag = "--batch", .key = "batch", U32(1, 4096), AT(model.B), .def = "16", .attr = FL_OPT_FIXED, .group = "model",
      .arg = "B", .help = "(%D)" },
    { .flag = "--accum", .key = "accum", U32(1, 4096), AT(accum), .def = "1", .attr = FL_OPT_FIXED, .group = "model",
      .arg = "N", .help = "micro-batches of --batch sequences per step, their gradients averaged (%D; the presets' "
                          "make 524,288 tokens)" },
    { .flag = "--init-std", .key = "init_std", F32(0, 10), AT(model.init_std), .def = "0.02", .attr = FL_OPT_FIXED | OPEN,
      .group = "model", .arg = "X", .help = "(%D)" },

    { .flag = "--lr", .key = "lr", F32(0, 10), AT(lr), .def = "1e-3", .attr = OPEN, .group = "optim", .arg = "X",
      .help = "(%D)" },
    { .flag = "--lr-min", .key = "lr_min_frac", F32(0, 1), AT(lr_min_frac), .def = "0.1", .group = "optim", .arg = "FRAC",
      .help = "(%D of lr)" },
    { .flag = "--schedule", .key = "schedule", ENUM(schedule_name), AT(schedule), .def = "cosine", .group = "optim" },
    { .flag = "--warmup", .key = "warmup", U32(0, 1e8), AT(warmup), .def = "100", .group = "optim", .arg = "N",
      .help = "(%D)" },
    { .flag = "--wd", .key = "wd", F32(0, 100), AT(wd), .def = "0.1", .attr = FL_OPT_NEWLINE, .group = "optim", .arg = "X", .help = "(%D, decoupled)" },
    { .flag = "--beta1", .key = "beta1", F32(0, 1), AT(beta1), .def = "0.9", .attr = FL_OPT_HI_OPEN, .group = "optim",
      .arg = "X", .help = "(%D)" },
    { .flag = "--beta2", .key = "beta2", F32(0, 1), AT(beta2), .def = "0.95", .attr = FL_OPT_HI_OPEN, .group = "optim",
      .arg = "X", .help = "(%D)" },
    { .flag = "--adam-eps", .key = "adam_eps", F32(0, 1), AT(adam_eps), .def = "1e-8", .attr = FL_OPT_LO_OPEN,
      .group = "optim", .arg = "X", .help = "(%D)" },
    { .flag = "--clip", .key = "clip", F32(0, FLT_MAX), AT(clip), .def = "1.0", .group = "optim", .arg = "X",
      .help = "(%D;\x1f" "0\x1foff)" }, /* \x1f: a space the help does not break at */

    { .flag = "--amax-history", .key = "amax_history", U32(1, 1u << 20), AT(recipe.history), .def = "1024",
      .group = "recipe", .arg = "N", .help = "(%D)" },
    { .flag = "--amax-algo", .key = "amax_algo", ENUM(amax_algo_name), AT(recipe.algo), .def = "max", .group = "recipe" },
    { .flag = "--margin", .key = "margin", .type = FL_OPT_I32, .lo = -127, .hi = 127, AT(recipe.margin), .def = "0",
      .group = "recipe", .arg = "M", .help = "(%D)" },
    { .flag = "--fp8-overflow", .key = "fp8_overflow", ENUM(overflow_name), AT(recipe.nosat), .def = "saturate",
      .group = "recipe", .help = "(saturate = TE, torch >= 2.12 for e4m3; nan = ml_dtypes, torch <= 2.11)" },
    { .flag = "--pow2", .flag_off = "--no-pow2", .key = "pow2_scales", BOOL, AT(recipe.pow2), .def = "0",
      .group = "recipe", .help = "(power-of-two scales)" },
    { .flag = "--fp8-adam", .key = "fp8_adam", BOOL, AT(recipe.fp8_adam), .def = "0", .attr = FL_OPT_NEWLINE,
      .group = "recipe",
      .help = "(Adam m1 e4m3, m2 e5m2)" },
    { .flag = "--fast-accum", .key = "fast_accum", BOOL, AT(recipe.fast_accum), .def = "0", .group = "recipe",
      .help = "(needs the FP8 GEMM twin)" },
    { .flag = "--gemm-kchunk", .key = "gemm_kchunk", U32(0, 65536), AT(gemm_kchunk), .def = "0",
      .attr = FL_OPT_ECHO_SET | FL_OPT_NEWLINE, .group = "recipe", .arg = "K",
      .help = "(%D: every GEMM element one fused multiply-add chain over the whole sum; K: chains over blocks of K "
              "terms added in order, as a tensor-core GEMM accumulates its k-tiles; another summation order with the "
              "same products, to measure how far a run may drift from a GPU's: fp8lab compare)" },
    { .flag = "--attn-kchunk", .key = "attn_kchunk", U32(0, 65536), AT(attn_kchunk), .def = "0",
      .attr = FL_OPT_ECHO_SET | FL_OPT_NEWLINE, .group = "recipe", .arg = "K",
      .help = "(%D: the attention's own loops; K: the attention's products (QK^T, PV and the four of its backward) as "
              "GEMMs with their sums in blocks of K, the softmax unchanged; with --gemm-kchunk K, the envelope's "
              "perturbation of the attention's order, where a GPU's cuBLAS attention departs from the harness)" },
    { .flag = "--fp8-gemm", .key = "fp8_gemm", BOOL, AT(fp8_gemm), .def = "0", .attr = FL_OPT_ECHO_SET | FL_OPT_NEWLINE,
      .group = "recipe",
      .help = "(--device twins / cuda under fp8-delayed or fp8-current: the Linears' forward, dgrad and wgrad GEMMs "
              "multiply the e4m3 / e5m2 codes, cuBLASLt's FP8 GEMM on a device and its twin on the CPU, instead of fp32 "
              "GEMMs on the fake-quantised values: the same values, summed in the FP8 GEMM's order; a Linear with another "
              "format at a site, a smoothed input or a dimension that is not a multiple of 16 keeps the fp32 GEMM)" },
    { .flag = "--device", .key = "device", ENUM(device_name), AT(device), .def = "cpu",
      .attr = FL_OPT_ECHO_SET | FL_OPT_NEWLINE, .group = "recipe",
      .help = "(cpu: the harness; twins: the GPU step's code (gstep.h) run on the CPU with the kernels' twins, fp32 "
              "and bf16 recipes, the loss, gradient norm and FFN statistics measured, not the cast counters; cuda: the "
              "same step on a GPU, in build/fp8lab-cuda (make cuda))" },
    { .flag = "--grad-scaling", .key = "grad_scaling", ENUM(grad_scaling_name), AT(recipe.grad_current), .def = "delayed",
      .attr = FL_OPT_ECHO_SET | FL_OPT_NEWLINE, .group = "recipe",
      .help = "(fp8-delayed: dY's scale from its history (TE) or from the tensor itself, X and W staying delayed: a "
              "per-role recipe as torchao's float8 allowed)" },
    { .flag = "--fp8-start", .key = "fp8_start", U32(0, 1e8), AT(recipe.fp8_start), .def = "0",
      .attr = FL_OPT_ECHO_SET | FL_OPT_NEWLINE, .group = "recipe", .arg = "N",
      .help = "(%D: the first N steps cast to bf16 while the delayed amax histories record, as when FP8 training "
              "continues from a BF16 run)" },
    { .flag = "--grad-sr", .flag_off = "--no-grad-sr", .key = "grad_sr", BOOL, AT(recipe.grad_sr), .def = "0",
      .attr = FL_OPT_NEWLINE, .group = "recipe",
      .help = "(dY casts round stochastically: e5m2 under fp8-*, e2m1 under nvfp4 / mxfp4; streams from --seed, step, "
              "site, element)\n"
              "--no-pow2, --no-grad-sr: switch those off again (the demo's recipe has them on)" },
    { .flag = "--update-sr", .key = "update_sr", BOOL, AT(recipe.update_sr), .def = "0", .attr = FL_OPT_NEWLINE,
      .group = "recipe", .help = "(nvfp4 / mxfp4: the wgrad GEMM's copy of X rounds stochastically too)" },
    { .flag = "--rht", .flag_off = "--no-rht", .key = "rht", BOOL, AT(recipe.rht), .def = "0", .group = "recipe",
      .help = "(nvfp4 / mxfp4: random Hadamard transform of 16 tokens on the wgrad copies of X and dY; --no-rht: off, "
              "as the FP4 demo has it on)" },
    { .flag = "--four-over-six", .key = "four_over_six", BOOL, AT(recipe.four_over_six), .def = "0",
      .attr = FL_OPT_NEWLINE, .group = "recipe", .help = "(nvfp4: each block scaled to 6 or to 4, the smaller error)" },
    { .flag = "--mx-floor", .key = "mx_floor", BOOL, AT(recipe.mx_floor), .def = "0", .group = "recipe",
      .help = "(mxfp8 / mxfp4: the OCP MX scale 2^(floor(log2 amax) - emax), which may clip, instead of TE's rule rounding "
              "the exponent up)" },
    { .flag = "--fp4-w1d", .key = "fp4_w1d", BOOL, AT(recipe.fp4_w1d), .def = "0", .group = "recipe",
      .help = "(nvfp4: weights in 1x16 blocks, not 16x16 tiles)" },
    { .flag = "--site", .key = "sites", CUSTOM(sites_ops), AT(recipe.sites), .def = "", .attr = FL_OPT_ECHO_SET,
      .group = "sites", .arg = "PATTERN=bf16|current|delayed",
      .help = "(repeatable, a later one wins; fp8-delayed/current; nvfp4/mxfp4 take bf16): the cast sites a name or fnmatch pattern names, "
              "kept in bf16 or scaled per tensor from the current tensor / the site's amax history.  Sites: "
              "L<l>.<lin>.<role>, l = 0..layers-1, lin = qkv proj fc down, role = in (X) w (W) gout (dY); head.* "
              "stays bf16.\nE.g. --site L0.down.in=bf16, or --site '*.down.in=current' for every FFN's down input" },

    { .flag = "--data", .key = "data", CUSTOM(data_ops), AT(data_kind), .def = "synthetic", .attr = FL_OPT_FIXED,
      .group = "data", .arg = "synthetic|triggers|fortunes|shards:GLOB|FILE",
      .help = "(a text file; bytes are tokens; fortunes: the English text of Debian's package fortunes, pinned by "
              "checksum; shards:GLOB: token shards in llm.c's format, e.g. FineWeb's or TinyStories', read in the "
              "pattern's sorted order)" },
    { .flag = "--vocab", .key = "vocab_arg", U32(0, 65536), AT(vocab_req), .def = "0", .attr = FL_OPT_FIXED,
      .group = "data", .arg = "N",
      .help = "(shards: the vocabulary, %D = the shards' largest token + 1; config.json records the one used)" },
    { .flag = "--data-len", .key = "data_len", U64(0, 1 << 30), AT(data_len), .def = "1048576", .attr = FL_OPT_FIXED,
      .group = "data", .arg = "N", .help = "(generated length, %D)" },
    { .key = "data_hash", .type = FL_OPT_HEX, AT(data_hash), .def = "0", .attr = FL_OPT_FIXED }, /* filled at start */
    { .flag = "--trigger-rate", .key = "trigger_rate", F32(0, 1), AT(trigger_rate), .def = "0.002",
      .attr = FL_OPT_FIXED | FL_OPT_ECHO_SET | FL_OPT_NEWLINE, .group = "data", .arg = "P", .help = "(%D)" },
    { .flag = "--trigger-len", .key = "trigger_len", U32(1, 64), AT(trigger_len), .def = "8",
      .attr = FL_OPT_FIXED | FL_OPT_ECHO_SET, .group = "data", .arg = "N",
      .help = "(%D): rare trigger events of --data triggers (data.h)" },

    { .flag = "--log-every", .key = "log_every", U32(1, 1e8), AT(log_every), .def = "10", .group = "logs", .arg = "K",
      .help = "(%D)" },
    { .flag = "--ckpt-every", .key = "ckpt_every", U32(1, 1e8), AT(ckpt_every), .def = "500", .group = "logs", .arg = "K",
      .help = "(%D)" },

    { .flag = "--div-margin", .key = "div_margin", F32(0, FLT_MAX), AT(div_margin), .def = "1.0", .attr = FL_OPT_LO_OPEN,
      .group = "diverge", .arg = "NATS", .help = "(%D)" },
    { .flag = "--div-window", .key = "div_window", U32(1, 1e8), AT(div_window), .def = "100", .group = "diverge",
      .arg = "STEPS", .help = "(%D)" },
    { .flag = "--div-ema", .key = "div_ema", F32(0, 1), AT(div_ema), .def = "0.02", .attr = FL_OPT_LO_OPEN,
      .group = "diverge", .arg = "W", .help = "(%D)" },
    { .flag = NULL, .flag_off = "--no-stop-on-divergence", .key = "stop_on_divergence", BOOL, AT(stop_on_div),
      .def = "1", .group = "diverge" },

    { .flag = "--bos", .key = "bos", BOOL, AT(bos), .def = "0", .attr = FL_OPT_FIXED | FL_OPT_NEWLINE, .group = "data",
      .help = ": token 256 opens every sequence (a place for an attention sink)" },
    { .flag = "--chan-every", .key = "chan_every", U32(0, 1e8), AT(chan_every), .def = "0",
      .attr = FL_OPT_ECHO_SET | FL_OPT_NEWLINE, .group = "logs", .arg = "K",
      .help = ": per-channel telemetry of every FFN's down-projection input: channels.csv every K steps, records.csv "
              "at every amax record (which channel, its alignment, ...)" },
    { .flag = "--keep-ckpt", .key = "keep_ckpt", CUSTOM(keep_ops), AT(keep_n), .def = "", .attr = FL_OPT_ECHO_SET,
      .group = "logs", .arg = "S1,S2,..", .help = "(keep checkpoint-S.bin, <= 16)" },
    { .flag = "--fork", .key = "fork_from", .type = FL_OPT_PATH, AT(fork_from), .def = "", .attr = FL_OPT_ECHO_SET,
      .group = "fork", .arg = "FILE",
      .help = ": start from another run's checkpoint (checkpoint.bin or checkpoint-S.bin) at its step, with its "
              "configuration, the flags given on top (not the shapes, seed or data): the same batches and streams "
              "from there." },
    { .key = "fork_step", U64(0, 1e8), AT(fork_step), .def = "0" },
    { .key = "fork_crc", .type = FL_OPT_HEX, AT(fork_crc), .def = "0" },
    { .flag = "--decorrelate", .key = "decorrelate", CUSTOM(decor_ops), AT(decor_mode), .def = "none",
      .attr = FL_OPT_ECHO_SET, .group = "fork", .arg = "top:K|random:K",
      .help = "replaces w_up of the K most aligned (or K random) channels per layer by a random vector of the same "
              "norm orthogonal to w_gate before the first step (intervention.csv)" },

    { .flag = "--threads", .type = FL_OPT_RUN, .group = "run", .arg = "N",
      .help = "(default: all cores; a resume keeps the run's)" },
    { .flag = "--quiet", .type = FL_OPT_RUN, .group = "run",
      .help = ".  The bits do not depend on the thread count.  A run folder is locked while a process writes it." },
};
const int fl_train_opt_count = (int)FL_ARRAY_LEN(fl_train_opt_table);
#define NOPT ((int)FL_ARRAY_LEN(fl_train_opt_table))

/* ---- one value: its text, its parser, its JSON -------------------------------------------------- */

static void *opt_field(fl_train_cfg *c, const fl_train_opt *o) { return (char *)c + o->offset; }
static const void *opt_cfield(const fl_train_cfg *c, const fl_train_opt *o) { return (const char *)c + o->offset; }

/* What a good value of o looks like, into buf (n bytes); returns buf. */
static const char *opt_hint(const fl_train_opt *o, char *buf, size_t n)
{
    const int lo_open = !!(o->attr & FL_OPT_LO_OPEN), hi_open = !!(o->attr & FL_OPT_HI_OPEN);
    size_t w = 0;
    buf[0] = 0;
    switch (o->type) {
    case FL_OPT_U32:
    case FL_OPT_U64:
    case FL_OPT_I32:
        if (o->hi >= NOLIMIT)
            snprintf(buf, n, "an integer >= %.0f", o->lo);
        else
            snprintf(buf, n, "an integer in [%.0f, %.0f]", o->lo, o->hi);
        break;
    case FL_OPT_F32:
        if (o->hi >= FLT_MAX)
            snprintf(buf, n, "a finite number %s %g", lo_open ? ">" : ">=", o->lo);
        else
            snprintf(buf, n, "a number in %c%g, %g%c", lo_open ? '(' : '[', o->lo, o->hi, hi_open ? ')' : ']');
        break;
    case FL_OPT_ENUM:
        w = (size_t)snprintf(buf, n, "one of");
        for (unsigned k = 0; o->names(k) && w < n; k++)
            w += (size_t)snprintf(buf + w, n - w, " %s", o->names(k));
        break;
    case FL_OPT_BOOL:
        snprintf(buf, n, "0 or 1");
        break;
    case FL_OPT_PATH:
        snprintf(buf, n, "a path of 1 to %zu bytes", o->size - 1);
        break;
    case FL_OPT_HEX:
        snprintf(buf, n, "1 to %zu hex digits", 2 * o->size);
        break;
    default:
        break;
    }
    return buf;
}

static int in_range(const fl_train_opt *o, double x)
{
    const int lo_ok = o->attr & FL_OPT_LO_OPEN ? x > o->lo : x >= o->lo;
    const int hi_ok = o->attr & FL_OPT_HI_OPEN ? x < o->hi : x <= o->hi;
    return lo_ok && hi_ok;
}

/* A hex number of 1 to 2 * size digits into *x. */
static int parse_hex(uint64_t *x, const char *v, size_t size)
{
    const size_t k = strspn(v, "0123456789abcdefABCDEF");
    if (k < 1 || k > 2 * size || v[k])
        return -1;
    *x = strtoull(v, NULL, 16);
    return 0;
}

/* Apply the text v to o's field of c (stored: v comes from a record, else from the flag).  NULL, or
   what a good value looks like (in hint, n bytes, or a custom row's own text). */
static const char *opt_parse(const fl_train_opt *o, fl_train_cfg *c, const char *v, int stored, char *hint, size_t n)
{
    void *p = opt_field(c, o);
    unsigned long long u;
    uint64_t h;
    double x;
    switch (o->type) {
    case FL_OPT_U32:
    case FL_OPT_U64:
        if (fl_cli_parse_u64(&u, v) || !in_range(o, (double)u))
            return opt_hint(o, hint, n);
        if (o->type == FL_OPT_U32)
            *(uint32_t *)p = (uint32_t)u;
        else
            *(uint64_t *)p = u;
        return NULL;
    case FL_OPT_I32:
        if (fl_cli_parse_double(&x, v) || !in_range(o, x) || x != floor(x))
            return opt_hint(o, hint, n);
        *(int32_t *)p = (int32_t)x;
        return NULL;
    case FL_OPT_F32: /* no inf or nan, and none by overflow (1e300) */
        if (fl_cli_parse_double(&x, v) || !isfinite((float)x) || !in_range(o, (float)x))
            return opt_hint(o, hint, n);
        *(float *)p = (float)x;
        return NULL;
    case FL_OPT_ENUM:
        for (unsigned k = 0; o->names(k); k++)
            if (!strcmp(v, o->names(k))) {
                *(uint32_t *)p = k;
                return NULL;
            }
        return opt_hint(o, hint, n);
    case FL_OPT_BOOL:
        if (strcmp(v, "0") && strcmp(v, "1"))
            return opt_hint(o, hint, n);
        *(uint32_t *)p = v[0] == '1';
        return NULL;
    case FL_OPT_PATH:
        if (strlen(v) >= o->size || (!stored && !*v))
            return opt_hint(o, hint, n);
        memset(p, 0, o->size);
        memcpy(p, v, strlen(v));
        return NULL;
    case FL_OPT_HEX:
        if (parse_hex(&h, v, o->size))
            return opt_hint(o, hint, n);
        if (o->size == 4)
            *(uint32_t *)p = (uint32_t)h;
        else
            *(uint64_t *)p = h;
        return NULL;
    case FL_OPT_CUSTOM:
        return o->ops->parse(c, v, stored);
    default:
        return "not an option of the configuration";
    }
}

/* The canonical text of o's value in c, into buf (n bytes); returns buf. */
static const char *opt_format(const fl_train_opt *o, const fl_train_cfg *c, char *buf, size_t n)
{
    const void *p = opt_cfield(c, o);
    const char *name;
    buf[0] = 0;
    switch (o->type) {
    case FL_OPT_U32:
    case FL_OPT_BOOL:
        snprintf(buf, n, "%u", *(const uint32_t *)p);
        break;
    case FL_OPT_U64:
        snprintf(buf, n, "%llu", (unsigned long long)*(const uint64_t *)p);
        break;
    case FL_OPT_I32:
        snprintf(buf, n, "%d", *(const int32_t *)p);
        break;
    case FL_OPT_F32: /* 9 significant digits give every float back */
        snprintf(buf, n, "%.9g", *(const float *)p);
        break;
    case FL_OPT_ENUM:
        name = o->names(*(const uint32_t *)p);
        snprintf(buf, n, "%s", name ? name : "?");
        break;
    case FL_OPT_PATH:
        snprintf(buf, n, "%.*s", (int)strnlen(p, o->size), (const char *)p);
        break;
    case FL_OPT_HEX:
        if (o->size == 4)
            snprintf(buf, n, "%08x", *(const uint32_t *)p);
        else
            snprintf(buf, n, "%016llx", (unsigned long long)*(const uint64_t *)p);
        break;
    case FL_OPT_CUSTOM:
        o->ops->format(buf, n, c);
        break;
    default:
        break;
    }
    return buf;
}

/* Values up to 511-byte paths; a longer text is a value no flag gives. */
enum { VAL_MAX = 1024 };

/* Set o's key in obj: numbers as numbers, names and paths as strings, an unset path null. */
static void opt_json(json_t *obj, const fl_train_opt *o, const fl_train_cfg *c)
{
    const void *p = opt_cfield(c, o);
    char v[VAL_MAX];
    json_t *j;
    opt_format(o, c, v, sizeof v);
    switch (o->type) {
    case FL_OPT_U32:
        j = json_integer(*(const uint32_t *)p);
        break;
    case FL_OPT_U64: /* beyond json_int_t (a seed): the exact digits as a string */
        j = *(const uint64_t *)p <= INT64_MAX ? json_integer((json_int_t) * (const uint64_t *)p) : json_string(v);
        break;
    case FL_OPT_I32:
        j = json_integer(*(const int32_t *)p);
        break;
    case FL_OPT_F32:
        j = fl_tele_json_num(*(const float *)p, 9);
        break;
    case FL_OPT_BOOL:
        j = json_boolean(*(const uint32_t *)p);
        break;
    case FL_OPT_PATH:
        j = v[0] ? fl_json_string(v) : json_null();
        break;
    case FL_OPT_CUSTOM:
        if (o->ops->json) {
            o->ops->json(obj, o->key, c);
            return;
        }
        j = fl_json_string(v);
        break;
    default: /* names, hex */
        j = fl_json_string(v);
        break;
    }
    json_object_set_new(obj, o->key, j);
}

/* ---- lookups, defaults, checks, comparisons ----------------------------------------------------- */

const fl_train_opt *fl_train_opt_find(const char *flag)
{
    for (int i = 0; i < NOPT; i++) {
        const fl_train_opt *o = &fl_train_opt_table[i];
        if ((o->flag && !strcmp(flag, o->flag)) || (o->flag_off && !strcmp(flag, o->flag_off)))
            return o;
    }
    return NULL;
}

const char *fl_train_opt_name(const fl_train_opt *o) { return o->flag ? o->flag : o->flag_off ? o->flag_off : o->key; }

static const fl_train_opt *opt_by_key(const char *key, size_t n)
{
    for (int i = 0; i < NOPT; i++) {
        const char *k = fl_train_opt_table[i].key;
        if (k && strlen(k) == n && !memcmp(k, key, n))
            return &fl_train_opt_table[i];
    }
    return NULL;
}

void fl_train_cfg_default(fl_train_cfg *c)
{
    char hint[600];
    memset(c, 0, sizeof *c);
    for (int i = 0; i < NOPT; i++)
        if (fl_train_opt_table[i].key) /* tests/test_train_opts.c: every default parses */
            opt_parse(&fl_train_opt_table[i], c, fl_train_opt_table[i].def, 1, hint, sizeof hint);
}

/* s (len bytes) as the record writes a value (escaped), cut at about n - 4 bytes with "...", into out. */
static void escape_for_message(char *out, size_t n, const char *s, size_t len)
{
    size_t w = 0;
    for (size_t i = 0; i < len && w + 8 < n; i++) {
        const unsigned char b = (unsigned char)s[i];
        if (b == '\\')
            w += (size_t)snprintf(out + w, n - w, "\\\\");
        else if (b < 0x20 || b == 0x7f)
            w += (size_t)snprintf(out + w, n - w, "\\x%02x", b);
        else
            out[w++] = (char)b;
        if (i + 1 < len && w + 8 >= n)
            w += (size_t)snprintf(out + w, n - w, "...");
    }
    out[w < n ? w : n - 1] = 0;
}

const char *fl_train_cfg_check_fields(const fl_train_cfg *c, char *buf, size_t n)
{
    fl_train_cfg t = *c;
    for (int i = 0; i < NOPT; i++) {
        const fl_train_opt *o = &fl_train_opt_table[i];
        if (!o->key)
            continue;
        char v[VAL_MAX], hint[600], shown[160];
        opt_format(o, c, v, sizeof v);
        const char *why = opt_parse(o, &t, v, 1, hint, sizeof hint);
        if (!why && !memcmp(&t, c, sizeof t))
            continue;
        escape_for_message(shown, sizeof shown, v, strlen(v));
        snprintf(buf, n, "bad value for %s: '%s' (%s)", fl_train_opt_name(o), shown,
                 why ? why : "not the value its text gives back");
        return buf;
    }
    return NULL;
}

const fl_train_opt *fl_train_cfg_diff(const fl_train_cfg *a, const fl_train_cfg *b, unsigned mask)
{
    for (int i = 0; i < NOPT; i++) {
        const fl_train_opt *o = &fl_train_opt_table[i];
        char va[VAL_MAX], vb[VAL_MAX];
        if (o->key && (o->attr & mask) == mask && strcmp(opt_format(o, a, va, sizeof va), opt_format(o, b, vb, sizeof vb)))
            return o;
    }
    return NULL;
}

int fl_train_parse_flag(fl_train_cfg *c, const char *cmd, const char *flag, const char *val, int *used)
{
    const fl_train_opt *o = fl_train_opt_find(flag);
    *used = 0;
    if (!o || !o->key)
        return 1; /* not a flag of the configuration (--out, --threads, ... are the command's) */
    if (o->type == FL_OPT_BOOL) {
        *(uint32_t *)opt_field(c, o) = !(o->flag_off && !strcmp(flag, o->flag_off));
    } else {
        char hint[600];
        *used = 1;
        if (!val)
            return fl_cli_usage_error(cmd, "%s needs a value", flag), 2;
        const char *why = opt_parse(o, c, val, 0, hint, sizeof hint);
        if (why)
            return fl_cli_usage_error(cmd, "bad value for %s: '%s' (%s)", flag, val, why), 2;
    }
    /* the vocabulary: bytes (token 256 opens the sequences with --bos), or the shards' (0 until the run
       reads them, fl_train_resolve_vocab) */
    c->model.V = c->data_kind == FL_DATA_SHARDS ? c->vocab_req : 256 + c->bos;
    return 0;
}

/* ---- a growing text buffer ---------------------------------------------------------------------- */

typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        const size_t cap = 2 * (b->len + n + 1) + 256;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

__attribute__((format(printf, 2, 3))) static void sb_printf(sbuf *b, const char *fmt, ...)
{
    char tmp[VAL_MAX + 64];
    va_list ap;
    va_start(ap, fmt);
    const int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (k > 0)
        sb_put(b, tmp, (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1);
}

/* ---- train_args: the flags that give a configuration -------------------------------------------- */

/* " FLAG VALUE", the value quoted for a POSIX shell (fl_cli_sh_quote) unless every byte is safe bare. */
static void echo_flag(sbuf *b, const char *flag, const char *v, size_t n)
{
    static const char safe[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_@%+=:,./-";
    sb_printf(b, " %s ", flag);
    if (n && strspn(v, safe) >= n) {
        sb_put(b, v, n);
        return;
    }
    char q[4 * VAL_MAX + 3];
    const size_t k = fl_cli_sh_quote(q, sizeof q, v, n);
    sb_put(b, q, k < sizeof q ? k : sizeof q - 1);
}

int fl_train_cfg_args(char *buf, size_t n, const fl_train_cfg *c)
{
    sbuf b = { 0 };
    fl_train_cfg d;
    fl_train_cfg_default(&d);
    for (int i = 0; i < NOPT; i++) {
        const fl_train_opt *o = &fl_train_opt_table[i];
        char v[VAL_MAX], dv[VAL_MAX];
        if (!o->key || (!o->flag && !o->flag_off))
            continue;
        const int at_default = !strcmp(opt_format(o, c, v, sizeof v), opt_format(o, &d, dv, sizeof dv));
        if (o->type == FL_OPT_BOOL) {
            const char *f = v[0] == '1' ? o->flag : o->flag_off;
            if (!at_default && f)
                sb_printf(&b, " %s", f);
        } else if (!at_default || !(o->attr & FL_OPT_ECHO_SET)) {
            for (const char *p = v; o->ops && o->ops->repeat && *p;) { /* once per item */
                const size_t k = strcspn(p, ";");
                echo_flag(&b, o->flag, p, k);
                p += k + (p[k] == ';');
            }
            if (!o->ops || !o->ops->repeat)
                echo_flag(&b, o->flag, v, strlen(v));
        }
    }
    const int fits = !b.oom && b.len && b.len - 1 < n;
    if (n)
        snprintf(buf, n, "%s", b.p && b.len ? b.p + 1 : "");
    free(b.p);
    return fits ? 0 : -1;
}

/* ---- --help ------------------------------------------------------------------------------------- */

/* Columns: the leading block's descriptions start at HELP_COL, a group's continued lines at
   HELP_GROUP_COL; lines break before HELP_WIDTH columns. */
enum { HELP_COL = 21, HELP_GROUP_COL = 9, HELP_WIDTH = 100 };

/* Print text from column *col on, breaking lines at spaces before HELP_WIDTH (and at each '\n'),
   continued lines starting at column indent; '\x1f' prints as a space that does not break. */
static void help_wrap(FILE *f, const char *text, int indent, int *col)
{
    for (const char *p = text; *p;) {
        if (*p == '\n') {
            *col = fprintf(f, "\n%*s", indent, "") - 1;
            p += 1 + strspn(p + 1, " ");
            continue;
        }
        size_t sp = strspn(p, " ");
        const char *word = p + sp;
        const size_t wl = strcspn(word, " \n");
        p = word + wl;
        if (!wl)
            continue;
        if (*col > indent && *col + (int)(sp + wl) > HELP_WIDTH) {
            *col = fprintf(f, "\n%*s", indent, "") - 1;
            sp = 0;
        } else if (*col <= indent) {
            sp = 0;
        }
        fprintf(f, "%*s", (int)sp, "");
        for (size_t i = 0; i < wl; i++)
            fputc(word[i] == '\x1f' ? ' ' : word[i], f);
        *col += (int)(sp + wl);
    }
}

/* The flag a row shows in the help (a bool: the one that changes its default) and its placeholder
   (an enum without one: its names, the default first). */
static void help_flag_arg(sbuf *b, const fl_train_opt *o)
{
    const char *flag = o->type == FL_OPT_BOOL && o->def[0] == '1' ? o->flag_off : o->flag;
    sb_printf(b, "%s", flag);
    if (o->arg) {
        sb_printf(b, " %s", o->arg);
    } else if (o->type == FL_OPT_ENUM) {
        sb_printf(b, " %s", o->def);
        for (unsigned k = 0; o->names(k); k++)
            if (strcmp(o->names(k), o->def))
                sb_printf(b, "|%s", o->names(k));
    }
}

/* The row's help with %D (the default) and %V (the values, one space apart) filled in. */
static void help_text(sbuf *b, const fl_train_opt *o)
{
    for (const char *p = o->help ? o->help : ""; *p; p++) {
        char v[600];
        v[0] = 0;
        if (p[0] == '%' && p[1] == 'D')
            snprintf(v, sizeof v, "%s", o->def);
        else if (p[0] == '%' && p[1] == 'V' && o->type == FL_OPT_CUSTOM && o->ops->values)
            o->ops->values(v, sizeof v);
        else if (p[0] == '%' && p[1] == 'V' && o->type == FL_OPT_ENUM)
            for (unsigned k = 0, w = 0; o->names(k) && w < sizeof v; k++)
                w += (unsigned)snprintf(v + w, sizeof v - w, "%s%s", k ? " " : "", o->names(k));
        else {
            sb_put(b, p, 1);
            continue;
        }
        sb_printf(b, "%s", v);
        p++;
    }
}

/* One group's paragraph, "name:" and its options wrapped: every row of the group, in table order (the table orders the rows as the train_args
   echo gives them, so a group's rows need not stand together). */
static void help_group(FILE *f, const char *group)
{
    sbuf b = { 0 };
    for (int i = 0; i < NOPT; i++) {
        const fl_train_opt *o = &fl_train_opt_table[i];
        if ((!o->flag && !o->flag_off) || !o->group || strcmp(o->group, group))
            continue;
        if (b.len)
            sb_printf(&b, "%s", o->attr & FL_OPT_NEWLINE ? "\n" : b.p[b.len - 1] == '.' ? "  " : " ");
        help_flag_arg(&b, o);
        if (o->help && o->help[0] && !strchr(":.,", o->help[0]))
            sb_put(&b, " ", 1);
        help_text(&b, o);
    }
    char name[16];
    snprintf(name, sizeof name, "%s:", group);
    int col = fprintf(f, "%-*s", HELP_GROUP_COL, name);
    help_wrap(f, b.p ? b.p : "", HELP_GROUP_COL, &col);
    fputc('\n', f);
    free(b.p);
}

/* Whether row i is the first of its group. */
static int group_first(int i)
{
    for (int k = 0; k < i; k++)
        if (fl_train_opt_table[k].group && !strcmp(fl_train_opt_table[k].group, fl_train_opt_table[i].group) &&
            (fl_train_opt_table[k].flag || fl_train_opt_table[k].flag_off))
            return 0;
    return 1;
}

void fl_train_opts_help(FILE *f)
{
    for (int i = 0; i < NOPT; i++) {
        const fl_train_opt *o = &fl_train_opt_table[i];
        if (!o->flag && !o->flag_off)
            continue;
        if (o->group) { /* the group's paragraph, where its first row stands */
            if (group_first(i))
                help_group(f, o->group);
            continue;
        }
        sbuf b = { 0 }, t = { 0 };
        help_flag_arg(&b, o);
        help_text(&t, o);
        int col = fprintf(f, "  %-*s", HELP_COL - 2, b.p);
        help_wrap(f, t.p ? t.p : "", HELP_COL, &col);
        fputc('\n', f);
        free(b.p);
        free(t.p);
    }
}

/* ---- config.json -------------------------------------------------------------------------------- */

json_t *fl_train_cfg_json_obj(const fl_train_cfg *c)
{
    json_t *obj = json_object();
    for (int i = 0; obj && i < NOPT; i++)
        if (fl_train_opt_table[i].key)
            opt_json(obj, &fl_train_opt_table[i], c);
    return obj;
}

int fl_train_cfg_json(FILE *f, const fl_train_cfg *c)
{
    json_t *obj = fl_train_cfg_json_obj(c);
    const int rc = obj && !json_dumpf(obj, f, JSON_INDENT(2) | JSON_REAL_PRECISION(9)) && fputc('\n', f) != EOF ? 0 : -1;
    json_decref(obj);
    return rc;
}

/* ---- the configuration record of a checkpoint --------------------------------------------------- */

static const char rec_magic[] = "fp8lab-train-config ";

char *fl_train_cfg_store(const fl_train_cfg *c, size_t *len)
{
    sbuf b = { 0 };
    sb_printf(&b, "%s%d\n", rec_magic, FL_TRAIN_CFG_FORMAT);
    for (int i = 0; i < NOPT; i++) {
        const fl_train_opt *o = &fl_train_opt_table[i];
        char v[VAL_MAX];
        if (!o->key)
            continue;
        sb_printf(&b, "%s=", o->key);
        opt_format(o, c, v, sizeof v);
        for (const char *p = v; *p; p++) {
            const unsigned char x = (unsigned char)*p;
            if (x == '\\')
                sb_put(&b, "\\\\", 2);
            else if (x == '\n')
                sb_put(&b, "\\n", 2);
            else if (x < 0x20 || x == 0x7f)
                sb_printf(&b, "\\x%02x", x);
            else
                sb_put(&b, p, 1);
        }
        sb_put(&b, "\n", 1);
    }
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    *len = b.len;
    return b.p;
}

static int hexval(int ch) { return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1; }

/* A record's value (s, n bytes, escaped) into out (cap bytes): 0, or -1 when an escape is bad, a
   byte should have been escaped, or it does not fit. */
static int unescape(char *out, size_t cap, const char *s, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char x = (unsigned char)s[i];
        if (x < 0x20 || x == 0x7f)
            return -1;
        if (x == '\\') {
            if (i + 1 < n && (s[i + 1] == '\\' || s[i + 1] == 'n')) {
                x = s[i + 1] == 'n' ? '\n' : '\\';
                i++;
            } else if (i + 3 < n && s[i + 1] == 'x' && hexval(s[i + 2]) >= 0 && hexval(s[i + 3]) >= 0) {
                x = (unsigned char)(16 * hexval(s[i + 2]) + hexval(s[i + 3]));
                if (!x || (x >= 0x20 && x != 0x7f))
                    return -1; /* NUL, or a byte written bare */
                i += 3;
            } else {
                return -1;
            }
        }
        if (w + 1 >= cap)
            return -1;
        out[w++] = (char)x;
    }
    out[w] = 0;
    return 0;
}

/* The record's first line: 0 with its format in *format, or -1. */
static int record_header(const char *s, size_t len, size_t *next, long *format)
{
    const size_t m = sizeof rec_magic - 1;
    const char *nl = memchr(s, '\n', len);
    if (!nl || (size_t)(nl - s) <= m || memcmp(s, rec_magic, m) || (size_t)(nl - s) - m > 6)
        return -1;
    *format = 0;
    for (const char *p = s + m; p < nl; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        *format = 10 * *format + (*p - '0');
    }
    *next = (size_t)(nl - s) + 1;
    return 0;
}

/* One "key=value" line (s, n bytes, without its newline) into c; seen[] marks the keys read.  0, or
   -1 with what is wrong in err. */
static int record_line(fl_train_cfg *c, unsigned char *seen, const char *s, size_t n, char *err, size_t errn)
{
    char shown[160], v[VAL_MAX], hint[600];
    const char *eq = memchr(s, '=', n);
    if (!eq) {
        escape_for_message(shown, sizeof shown, s, n);
        snprintf(err, errn, "a line without '=': '%s'", shown);
        return -1;
    }
    const fl_train_opt *o = opt_by_key(s, (size_t)(eq - s));
    escape_for_message(shown, sizeof shown, s, (size_t)(eq - s));
    if (!o) {
        snprintf(err, errn, "unknown key '%s' (an option of a newer fp8lab? this build knows the options of train --help)",
                 shown);
        return -1;
    }
    if (seen[o - fl_train_opt_table]++) {
        snprintf(err, errn, "key '%s' given twice", shown);
        return -1;
    }
    const char *val = eq + 1;
    const size_t vn = n - (size_t)(val - s);
    if (unescape(v, sizeof v, val, vn)) {
        escape_for_message(shown, sizeof shown, val, vn);
        snprintf(err, errn, "%s: a malformed value '%s' (bad escape, bare control byte, or too long)", o->key, shown);
        return -1;
    }
    const char *why = opt_parse(o, c, v, 1, hint, sizeof hint);
    if (why) {
        escape_for_message(shown, sizeof shown, v, strlen(v));
        snprintf(err, errn, "%s: bad value '%s' (%s)", o->key, shown, why);
        return -1;
    }
    return 0;
}

int fl_train_cfg_load(fl_train_cfg *c, const void *rec, size_t len, char *err, size_t n)
{
    const char *s = rec;
    unsigned char seen[NOPT];
    size_t at;
    long format;
    memset(seen, 0, sizeof seen);
    fl_train_cfg_default(c);
    if (memchr(s, 0, len)) {
        snprintf(err, n, "a NUL byte in the configuration record");
        return -1;
    }
    if (record_header(s, len, &at, &format)) {
        snprintf(err, n, "the configuration record does not start with '%s%d'", rec_magic, FL_TRAIN_CFG_FORMAT);
        return -1;
    }
    if (format < 1 || format > FL_TRAIN_CFG_FORMAT) {
        snprintf(err, n, "configuration record format %ld, this build reads 1 to %d%s", format, FL_TRAIN_CFG_FORMAT,
                 format > FL_TRAIN_CFG_FORMAT ? " (written by a newer fp8lab)" : "");
        return -1;
    }
    while (at < len) {
        const char *nl = memchr(s + at, '\n', len - at);
        if (!nl) {
            snprintf(err, n, "the configuration record's last line has no newline (cut short?)");
            return -1;
        }
        if (record_line(c, seen, s + at, (size_t)(nl - (s + at)), err, n))
            return -1;
        at = (size_t)(nl - s) + 1;
    }
    const char *why = fl_train_cfg_check(c);
    if (why) {
        snprintf(err, n, "the configuration is not one train accepts: %s", why);
        return -1;
    }
    return 0;
}
