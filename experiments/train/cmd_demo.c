/* cmd_demo.c — `fp8lab demo`: the FP8 SwiGLU instability experiment, with its controls and a
 * verdict computed from measured data (verdict.h).
 *
 * Arms, under one recipe, one model size, the same data and batches per seed (TRAINING.md, "The
 * demo"): the subject SwiGLU/FP8; the controls SwiGLU/BF16, Smooth-SwiGLU/FP8, SwiGLU/FP8 with the
 * down projection's input kept in bf16 (--site '*.down.in=bf16'), GeLU/FP8 and ReLU/FP8 with
 * F = 1.5 x SwiGLU's F (parameter-matched) and their BF16 references; and, reported but not
 * judged, SwiGLU/FP8 with current per-tensor scaling at the down projection's input only.  Each
 * FP8 arm is judged against the BF16 arm of its activation (Smooth-SwiGLU's is SwiGLU's: the two
 * are bit-identical in bf16).
 *
 * The default recipe is the paper's as their released code runs it (Fishman et al., ICLR 2025):
 * paper-gaudi2 (recipe.h), saturating casts to Gaudi2's e4m3 (max 240) with power-of-two scales
 * 2^floor(log2(240 / amax)), e5m2 copies of X and W for the backward GEMMs, the amax of the previous
 * step (one optimizer step = one global batch here), e5m2 gradients with stochastic rounding, FP8
 * from step 0.  `--recipe fp8-delayed` keeps every one of these settings on TE's formats (e4m3 max
 * 448, the backward reusing the forward casts); any other `fp8lab train` recipe flag changes every
 * FP8 arm alike, and the demo then lists how the recipe deviates from the paper's.
 *
 * The verdict (verdict.h) also needs the paper's cause: the precondition, measured on the BF16
 * references' down-projection input amax (fl_precondition_judge, mech.h).
 *
 * Runs are child processes, one thread each, --jobs at a time.  Exit status 0 for REPRODUCED,
 * 3 for NOT REPRODUCED, 4 for INCONCLUSIVE (the precondition was not produced; the numbers are
 * printed either way), 2 for bad flags, 1 when a run failed to run.
 */
#include "commands.h"
#include "common/cli.h"
#include "common/plot_runs.h"
#include "fl_io.h"
#include "fl_json.h"
#include "gpu_plan.h"
#include "gstep.h"
#include "mech.h"
#include "optim.h"
#include "rundir.h"
#include "train.h"
#include "train_opts.h"
#include "verdict.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *const help =
    "usage: fp8lab demo [--fp4] [--out DIR] [--json FILE] [--seeds N] [--jobs N] [--long] [--continue] [train options]\n"
    "       fp8lab demo --preset 124m|350m --data shards:GLOB --device cuda [--continue] ...   (build/fp8lab-cuda)\n"
    "\n"
    "The FP8 SwiGLU instability experiment (Fishman et al., ICLR 2025) on a CPU.  Arms, each over\n"
    "the same seeds, data and batches:\n"
    "  swiglu/bf16, gelu/bf16, relu/bf16                 BF16 references (GeLU/ReLU: F = 1.5 x SwiGLU's)\n"
    "  swiglu/fp8                                        the subject\n"
    "  smooth_swiglu/fp8, swiglu/fp8+down.in=bf16,       controls\n"
    "  gelu/fp8, relu/fp8\n"
    "  swiglu/fp8+down.in=current                        reported, not judged\n"
    "Recipe (the paper's, as its released code runs it on Gaudi2): --recipe paper-gaudi2, e4m3 with\n"
    "Gaudi2's largest value 240 and power-of-two scales 2^floor(log2(240 / amax)), e5m2 copies of X and\n"
    "W for the backward GEMMs, the previous step's amax (one step is one global batch here), e5m2\n"
    "gradients with stochastic rounding, saturating casts, FP8 from step 0.  --recipe fp8-delayed: the\n"
    "same settings on TE's formats (e4m3 max 448, the backward reusing the forward casts).\n"
    "An FP8 arm fails on a non-finite loss, on its own divergence (train.h), or when its loss EMA\n"
    "stays more than 5% above its BF16 reference's for 100 consecutive steps (verdict.h).\n"
    "Precondition (the paper's cause): in the BF16 references, the down-projection input amax grows\n"
    "late (after 2 tau, tau = 1/(lr wd)) by >= 10x, or jumps >= 10x in a step, for SwiGLU and for GeLU\n"
    "neither (medians over seeds).\n"
    "REPRODUCED: the precondition is present, swiglu/fp8 fails in a majority of seeds and no control\n"
    "fails in a majority of seeds.  NOT REPRODUCED: a control fails in a majority of seeds, or the\n"
    "precondition is present and swiglu/fp8 does not fail in a majority.  INCONCLUSIVE: no control\n"
    "fails in a majority and the precondition was not produced.\n"
    "  --out DIR      run folders (ARM-sSEED), summary.txt, demo.json, loss_gap.csv (the failure\n"
    "                 measure per step, a column per FP8 run) and plots (default demo-out)\n"
    "  --json FILE    also write demo.json to FILE: every arm x seed (act, seed, recipe, overflow,\n"
    "                 site overrides, train_args, failed, failed_step, final_loss, loss_gap,\n"
    "                 clip_mass, staleness quantiles, alignment start/end, late growth and jump) and\n"
    "                 the verdict with the precondition's numbers\n"
    "  --seeds N      seeds --seed .. --seed + N - 1 (default 3; --long: 6)\n"
    "  --jobs N       runs at a time, one thread each (default: the cores online)\n"
    "  --long         6000 steps and 6 seeds instead of 1500 and 3\n"
    "  --continue     run folders in --out that hold a checkpoint resume (their configuration must be\n"
    "                 this demo's; a finished run is kept as it is), the others start: an interrupted\n"
    "                 demo picks up where it stopped, with the same bits\n"
    "  --preset P     the same experiment at the 124m or 350m preset's scale (TRAINING.md, \"The demo at\n"
    "                 the 124M and 350M presets\"): its model and lr, 16 or 8 x 1024 tokens a step, 4000\n"
    "                 steps, wd 2 or 4 (t/tau 4.38 at the end), checkpoints every 250 steps; needs --data\n"
    "                 shards:GLOB; with --device cuda (build/fp8lab-cuda) one run at a time unless --jobs\n"
    "  --fp4          the same question at 4 bits (TRAINING.md, \"The FP4 experiment\"): the arms */fp4\n"
    "                 under NVIDIA's NVFP4 recipe (--recipe nvfp4 --grad-sr --rht: e2m1 in 1x16 blocks,\n"
    "                 e4m3 block scales, 16x16 weight tiles, Hadamard transform of the wgrad inputs),\n"
    "                 plus swiglu/fp4+last=bf16 and swiglu/fp4-rht (reported, not judged); 1000 steps;\n"
    "                 predictions F2-F4 printed as held or failed\n"
    "  --sqrt3        with --fp4: FP4 All the Way's sqrt(3) threshold (TRAINING.md, \"The sqrt(3)\n"
    "                 threshold\"): swiglu and gelu, bf16 and fp4, 3000 steps; the weight gradient's\n"
    "                 signal-to-noise ratio of the batch and of the mean gradient against the loss\n"
    "                 gap; predictions S1-S3 printed as held or failed\n"
    "  train options  any 'fp8lab train' option changes every arm alike (the recipe options the FP8\n"
    "                 arms), e.g. --steps N --seed S --ffn F (SwiGLU's; GeLU/ReLU get 1.5 F) --wd 0\n"
    "                 --fp8-start 200 --site 'L0.fc.in=current'; the settings paper-gaudi2 fixes change\n"
    "                 with --recipe fp8-delayed (--recipe fp8-delayed --amax-history 16 --fp8-overflow nan)\n"
    "Exit status: 0 REPRODUCED, 3 NOT REPRODUCED, 4 INCONCLUSIVE (numbers printed either way), 2 bad\n"
    "flags, 1 a run failed to run.\n";

/* The demo's model and optimiser (TRAINING.md: why each choice) and the paper's recipe. */
static void demo_preset(fl_train_cfg *c, int lng)
{
    fl_train_demo_preset(c);
    c->steps = lng ? 6000 : 1500;
    fl_recipe_paper_gaudi2(&c->recipe);
    c->log_every = 50;
    c->ckpt_every = lng ? 2000 : 1000000;
}

/* The demo at a preset's scale (TRAINING.md, "The demo at the 124M and 350M presets"): the preset's model
   (SwiGLU's F; GeLU and ReLU get 1.5 F as everywhere in the demo) and learning rate, one micro-batch of
   its B x 1024 tokens per step, constant after the preset's 700 warm-up steps as the CPU demo's is, and
   4000 steps with the weight decay that ends them at t/tau = 4.38 (wd 2 at 124m, lr 6e-4; wd 4 at 350m,
   lr 3e-4), the CPU demo's 4.35; a checkpoint every 250 steps (--continue).  -1 for an unknown name. */
static int demo_scale(fl_train_cfg *c, const char *name)
{
    const fl_act sw = { FL_ACT_SWIGLU, 0 };
    if (fl_train_preset(c, name, sw))
        return -1;
    c->accum = 1;
    c->schedule = FL_SCHED_CONSTANT;
    c->steps = 4000;
    c->wd = (float)(4.38 / ((double)c->lr * (double)(c->steps - c->warmup / 2)));
    c->wd = roundf(c->wd); /* 2 and 4 */
    c->ckpt_every = 250;
    c->log_every = 10;
    return 0;
}

/* One arm: activation, FFN width in halves of SwiGLU's F, quantised (the demo's FP8 or FP4 recipe) or
   BF16, its own site override (FP4_LAST: the last layer's sites in bf16), the Hadamard transform off,
   its role in the verdict and its BF16 reference (an index into the arms). */
typedef struct {
    const char *name, *dir;
    fl_act_kind act;
    unsigned f_halves;
    int fp8;
    const char *site;
    int no_rht;
    int role, ref;
} demo_arm;

#define FP4_LAST "LAST"

static const demo_arm arms_fp8[] = {
    { "swiglu/bf16", "swiglu-bf16", FL_ACT_SWIGLU, 2, 0, NULL, 0, FL_ARM_CONTROL, -1 },
    { "gelu/bf16", "gelu-bf16", FL_ACT_GELU, 3, 0, NULL, 0, FL_ARM_CONTROL, -1 },
    { "relu/bf16", "relu-bf16", FL_ACT_RELU, 3, 0, NULL, 0, FL_ARM_CONTROL, -1 },
    { "swiglu/fp8", "swiglu-fp8", FL_ACT_SWIGLU, 2, 1, NULL, 0, FL_ARM_SUBJECT, 0 },
    { "smooth_swiglu/fp8", "smooth_swiglu-fp8", FL_ACT_SMOOTH_SWIGLU, 2, 1, NULL, 0, FL_ARM_CONTROL, 0 },
    { "swiglu/fp8+down.in=bf16", "swiglu-fp8-down_bf16", FL_ACT_SWIGLU, 2, 1, "*.down.in=bf16", 0, FL_ARM_CONTROL, 0 },
    { "gelu/fp8", "gelu-fp8", FL_ACT_GELU, 3, 1, NULL, 0, FL_ARM_CONTROL, 1 },
    { "relu/fp8", "relu-fp8", FL_ACT_RELU, 3, 1, NULL, 0, FL_ARM_CONTROL, 2 },
    { "swiglu/fp8+down.in=current", "swiglu-fp8-down_current", FL_ACT_SWIGLU, 2, 1, "*.down.in=current", 0, FL_ARM_INFO, 0 },
};

/* `demo --fp4` (TRAINING.md, "The FP4 experiment"): the same references and judged arms at 4 bits, and
   two informational arms: the last layer in bf16 (as NVIDIA's recipe keeps some layers), and no
   Hadamard transform. */
static const demo_arm arms_fp4[] = {
    { "swiglu/bf16", "swiglu-bf16", FL_ACT_SWIGLU, 2, 0, NULL, 0, FL_ARM_CONTROL, -1 },
    { "gelu/bf16", "gelu-bf16", FL_ACT_GELU, 3, 0, NULL, 0, FL_ARM_CONTROL, -1 },
    { "relu/bf16", "relu-bf16", FL_ACT_RELU, 3, 0, NULL, 0, FL_ARM_CONTROL, -1 },
    { "swiglu/fp4", "swiglu-fp4", FL_ACT_SWIGLU, 2, 1, NULL, 0, FL_ARM_SUBJECT, 0 },
    { "smooth_swiglu/fp4", "smooth_swiglu-fp4", FL_ACT_SMOOTH_SWIGLU, 2, 1, NULL, 0, FL_ARM_CONTROL, 0 },
    { "swiglu/fp4+down.in=bf16", "swiglu-fp4-down_bf16", FL_ACT_SWIGLU, 2, 1, "*.down.in=bf16", 0, FL_ARM_CONTROL, 0 },
    { "gelu/fp4", "gelu-fp4", FL_ACT_GELU, 3, 1, NULL, 0, FL_ARM_CONTROL, 1 },
    { "relu/fp4", "relu-fp4", FL_ACT_RELU, 3, 1, NULL, 0, FL_ARM_CONTROL, 2 },
    { "swiglu/fp4+last=bf16", "swiglu-fp4-last_bf16", FL_ACT_SWIGLU, 2, 1, FP4_LAST, 0, FL_ARM_INFO, 0 },
    { "swiglu/fp4-rht", "swiglu-fp4-no_rht", FL_ACT_SWIGLU, 2, 1, NULL, 1, FL_ARM_INFO, 0 },
};
/* the arm indices F2-F4 read (the same in both tables where they exist) */
enum { ARM_SW_BF16, ARM_GE_BF16, ARM_RE_BF16, ARM_SW_Q, ARM_SM_Q, ARM_SW_DOWN_BF16, ARM_GE_Q, ARM_RE_Q };

/* `demo --fp4 --sqrt3` (TRAINING.md, "The sqrt(3) threshold"): the BF16 references and FP4 arms of
   SwiGLU and GeLU, longer. */
static const demo_arm arms_sqrt3[] = {
    { "swiglu/bf16", "swiglu-bf16", FL_ACT_SWIGLU, 2, 0, NULL, 0, FL_ARM_CONTROL, -1 },
    { "gelu/bf16", "gelu-bf16", FL_ACT_GELU, 3, 0, NULL, 0, FL_ARM_CONTROL, -1 },
    { "swiglu/fp4", "swiglu-fp4", FL_ACT_SWIGLU, 2, 1, NULL, 0, FL_ARM_SUBJECT, 0 },
    { "gelu/fp4", "gelu-fp4", FL_ACT_GELU, 3, 1, NULL, 0, FL_ARM_CONTROL, 1 },
};

/* the table of this demo: arms_fp8, arms_fp4 with --fp4, arms_sqrt3 with --fp4 --sqrt3 */
static const demo_arm *arms = arms_fp8;
static int narm = (int)(sizeof arms_fp8 / sizeof arms_fp8[0]);
enum { MAX_ARMS = 10, MAX_SEEDS = 64, DIR_MAX = PATH_MAX + 64 };
_Static_assert(sizeof arms_fp8 / sizeof arms_fp8[0] <= MAX_ARMS && sizeof arms_fp4 / sizeof arms_fp4[0] <= MAX_ARMS,
               "MAX_ARMS");

/* One run (arm x seed): its configuration, folder and what was measured. */
typedef struct {
    int arm;
    uint64_t seed;
    fl_train_cfg cfg;
    char dir[DIR_MAX];
    json_t *sum;        /* summary.json */
    double *loss;       /* metrics.csv's loss per step */
    double *act_amax;   /* metrics.csv's act_amax per step (the down projections' input, max over layers) */
    long nloss;
    fl_late late;       /* late growth and jump of act_amax (mech.h) */
    fl_arm_failure fail;
    /* sites.csv: the down projections' inputs (all layers) and all sites */
    double stale_p50, stale_p99, stale_max, stale_all_max;
    double clip_down_max, clip_down_mean, clip_all_max, underflow_mean;
    uint64_t sat_down, sat_all;
    /* sites.csv of an FP4 run (telemetry.h): means over steps and layers at the down projections'
       inputs, and the smallest all.gout snr */
    double flush_down_mean, under_down_mean, snr_gout_min;
    /* and its telemetry rows all.wgrad, all.wgrad_mean (telemetry.h): step and value, nwg of them */
    double *wg, *wgm;
    long *wg_step, nwg;
} demo_run;

typedef struct {
    const char *out, *json_path;
    int jobs, nseeds, fp4, sqrt3, cont;
    const char *preset;
    fl_train_cfg base;
    demo_run *runs;
    int nruns;
} demo_setup;

#pragma weak fl_gstep_cuda_open /* build/fp8lab-cuda only (gstep_cuda.c) */

static FILE *summary_file;

/* The readable summary: stdout and OUT/summary.txt. */
__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    if (summary_file) {
        va_start(ap, fmt);
        vfprintf(summary_file, fmt, ap);
        va_end(ap);
    }
}

enum { DEMO_GO_ON = -1 };

static int demo_parse(demo_setup *d, int argc, char **argv)
{
    const char *cmd = "demo";
    int lng = 0, jobs_given = 0;
    d->out = "demo-out";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(help, stdout);
            return FL_EXIT_OK;
        }
        lng |= !strcmp(argv[i], "--long");
        d->fp4 |= !strcmp(argv[i], "--fp4");
        d->sqrt3 |= !strcmp(argv[i], "--sqrt3");
        d->cont |= !strcmp(argv[i], "--continue");
        if (!strcmp(argv[i], "--preset")) {
            if (i + 1 >= argc)
                return fl_cli_usage_error(cmd, "--preset needs a value (124m or 350m)");
            d->preset = argv[++i];
        }
    }
    if (d->sqrt3 && !d->fp4)
        return fl_cli_usage_error(cmd, "--sqrt3 is an FP4 experiment: give --fp4 --sqrt3");
    demo_preset(&d->base, lng);
    if (d->preset && (d->fp4 || lng))
        return fl_cli_usage_error(cmd, "--preset runs the FP8 demo at that scale; --fp4 and --long are CPU-scale variants");
    if (d->preset && demo_scale(&d->base, d->preset))
        return fl_cli_usage_error(cmd, "--preset: unknown preset '%s' (124m or 350m)", d->preset);
    if (d->fp4) { /* NVIDIA's NVFP4 recipe (TRAINING.md, "The FP4 experiment"), 1000 steps */
        arms = arms_fp4;
        narm = (int)(sizeof arms_fp4 / sizeof arms_fp4[0]);
        fl_recipe_cfg_default(&d->base.recipe, FL_RECIPE_NVFP4);
        d->base.recipe.grad_sr = 1;
        d->base.recipe.rht = 1;
        d->base.steps = lng ? 6000 : 1000;
        if (d->sqrt3) {
            arms = arms_sqrt3;
            narm = (int)(sizeof arms_sqrt3 / sizeof arms_sqrt3[0]);
            d->base.steps = lng ? 6000 : 3000;
        }
    }
    d->nseeds = lng ? 6 : 3;
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    d->jobs = cores > 0 ? (int)cores : 1;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "--long") || !strcmp(f, "--fp4") || !strcmp(f, "--sqrt3") || !strcmp(f, "--continue"))
            continue;
        if (!strcmp(f, "--preset")) {
            i++;
            continue;
        }
        if (!strcmp(f, "--out") || !strcmp(f, "--json") || !strcmp(f, "--seeds") || !strcmp(f, "--jobs")) {
            if (!v)
                return fl_cli_usage_error(cmd, "%s needs a value", f);
            unsigned long long x = 0;
            if (!strcmp(f, "--out"))
                d->out = v;
            else if (!strcmp(f, "--json"))
                d->json_path = v;
            else if (fl_cli_parse_u64(&x, v) || x < 1 || x > (!strcmp(f, "--seeds") ? MAX_SEEDS : 256))
                return fl_cli_usage_error(cmd, "%s needs a count 1..%d", f, !strcmp(f, "--seeds") ? MAX_SEEDS : 256);
            else if (!strcmp(f, "--seeds"))
                d->nseeds = (int)x;
            else
                d->jobs = (int)x, jobs_given = 1;
            i++;
            continue;
        }
        if (!strcmp(f, "--act") || !strcmp(f, "--resume") || !strcmp(f, "--threads"))
            return fl_cli_usage_error(cmd, "%s is fixed by the demo (its arms set the activations; one thread per run, "
                                      "--jobs runs at a time)", f);
        int used = 0;
        const int r = fl_train_parse_flag(&d->base, cmd, f, v, &used);
        if (r == 2)
            return FL_EXIT_USAGE;
        if (r == 1)
            return fl_cli_usage_error(cmd, "unknown option '%s'", f);
        i += used;
    }
    if (d->fp4 && !fl_recipe_is_fp4((fl_recipe_kind)d->base.recipe.kind))
        return fl_cli_usage_error(cmd, "--fp4 takes --recipe nvfp4 (the default) or mxfp4");
    if (!d->fp4 && !fl_recipe_per_tensor((fl_recipe_kind)d->base.recipe.kind))
        return fl_cli_usage_error(cmd, "--recipe must be paper-gaudi2, fp8-delayed or fp8-current (the arms' site "
                                  "overrides need per-tensor scales), or nvfp4 / mxfp4 with --fp4");
    if (d->base.model.F % 2)
        return fl_cli_usage_error(cmd, "--ffn must be even (GeLU/ReLU get 1.5 x F)");
    if (d->preset && d->base.data_kind != FL_DATA_SHARDS)
        return fl_cli_usage_error(cmd, "--preset %s trains on token shards: give --data shards:GLOB (llm.c's format, e.g. "
                                  "FineWeb's GPT-2 shards)", d->preset);
    if (d->base.device == FL_DEVICE_CUDA && !fl_gstep_cuda_open)
        return fl_cli_usage_error(cmd, "--device cuda: this fp8lab has no CUDA step (build/fp8lab-cuda has it: make cuda)");
    if (d->base.device == FL_DEVICE_CUDA && !jobs_given)
        d->jobs = 1; /* one device: one run at a time */
    return DEMO_GO_ON;
}

/* The runs, arm-major within a seed; every configuration checked (exit 2 before any training). */
static int demo_configure(demo_setup *d)
{
    d->nruns = narm * d->nseeds;
    d->runs = calloc((size_t)d->nruns, sizeof *d->runs);
    if (!d->runs)
        return FL_EXIT_FAIL;
    for (int s = 0; s < d->nseeds; s++)
        for (int a = 0; a < narm; a++) {
            demo_run *r = &d->runs[s * narm + a];
            r->arm = a;
            r->seed = d->base.seed + (uint64_t)s;
            r->cfg = d->base;
            r->cfg.seed = r->seed;
            r->cfg.model.act.kind = arms[a].act;
            r->cfg.model.act.order = 0;
            r->cfg.model.F = d->base.model.F / 2 * arms[a].f_halves;
            char last[32];
            snprintf(last, sizeof last, "L%u.*=bf16", d->base.model.L - 1);
            const char *site = arms[a].site && !strcmp(arms[a].site, FP4_LAST) ? last : arms[a].site;
            if (!arms[a].fp8) {
                fl_recipe_cfg_default(&r->cfg.recipe, FL_RECIPE_BF16);
            } else if (site && fl_recipe_sites_add(&r->cfg.recipe, site)) {
                return fl_cli_usage_error("demo", "the --site overrides leave no room for the arm's own (%s)", site);
            }
            if (arms[a].fp8 && arms[a].no_rht)
                r->cfg.recipe.rht = 0;
            const char *why = fl_train_cfg_check(&r->cfg);
            if (why)
                return fl_cli_usage_error("demo", "%s: %s", arms[a].name, why);
            snprintf(r->dir, sizeof r->dir, "%s/%s-s%llu", d->out, arms[a].dir, (unsigned long long)r->seed);
        }
    return DEMO_GO_ON;
}

/* How the FP8 arms' recipe deviates from the paper's, or (fp4) the FP4 arms' from NVIDIA's NVFP4
   recipe (into buf, "" when it does not). */
static void recipe_deviations(char *buf, size_t n, const fl_recipe_cfg *r, int fp4)
{
    fl_train_cfg p;
    demo_preset(&p, 0);
    const fl_recipe_cfg *q = &p.recipe;
    buf[0] = 0;
#define DEV(cond, ...)                                                                     \
    do {                                                                                   \
        if (cond) {                                                                        \
            const size_t w = strlen(buf);                                                  \
            snprintf(buf + w, n - w, "%s", w ? "; " : "");                                 \
            const size_t w2 = strlen(buf);                                                 \
            snprintf(buf + w2, n - w2, __VA_ARGS__);                                       \
        }                                                                                  \
    } while (0)
    if (fp4) {
        DEV(r->kind != FL_RECIPE_NVFP4, "recipe %s (OCP MXFP4: 1x32 blocks, e8m0 scales)", fl_recipe_name((fl_recipe_kind)r->kind));
        DEV(!r->grad_sr, "round-to-nearest gradients");
        DEV(!r->rht, "no Hadamard transform of the wgrad inputs");
        DEV(r->update_sr, "stochastically rounded wgrad copy of X");
        DEV(r->four_over_six, "Four Over Six block scales");
        DEV(r->fp4_w1d, "weights in 1x16 blocks");
        DEV(r->mx_floor, "the OCP MX scale rule (floor)");
        DEV(r->fp8_start, "FP4 from step %u", r->fp8_start);
        DEV(r->fp8_adam, "FP8 Adam moments");
        DEV(r->sites[0], "site overrides %s", r->sites);
        return;
    }
    DEV(r->kind != q->kind, "recipe %s%s", fl_recipe_name((fl_recipe_kind)r->kind),
        r->kind == FL_RECIPE_FP8_DELAYED ? " (TE's e4m3 with max 448; the backward GEMMs reuse the forward e4m3 casts)"
        : r->kind == FL_RECIPE_FP8_CURRENT ? " (TE's formats, scales from the current tensors)" : "");
    DEV(r->nosat != q->nosat, "non-saturating casts (overflow -> NaN/Inf)");
    DEV(r->pow2 != q->pow2, "scales not rounded to powers of two");
    DEV(r->history != q->history || r->algo != q->algo, "amax history %u (%s)", r->history,
        fl_amax_algo_name((fl_amax_algo)r->algo));
    DEV(r->margin != q->margin, "margin %d", r->margin);
    DEV(r->grad_sr != q->grad_sr, "round-to-nearest gradients");
    DEV(r->grad_current, "dY scaled from the current tensor");
    DEV(r->fp8_start != q->fp8_start, "FP8 from step %u", r->fp8_start);
    DEV(r->fp8_adam, "FP8 Adam moments");
    DEV(r->fast_accum, "fast accumulation");
    DEV(r->sites[0], "site overrides %s", r->sites);
#undef DEV
}

static void demo_announce(const demo_setup *d, const char *dev)
{
    const fl_train_cfg *b = &d->base;
    const fl_recipe_cfg *r = &b->recipe;
    say("fp8lab demo: seeds %llu..%llu, %llu steps, d_model %u, %u layers, ffn %u (GeLU/ReLU %u), seq %u, batch %u, "
        "lr %g %s, wd %g\n",
        (unsigned long long)b->seed, (unsigned long long)(b->seed + (uint64_t)d->nseeds - 1), (unsigned long long)b->steps,
        b->model.C, b->model.L, b->model.F, b->model.F / 2 * 3, b->model.T, b->model.B, b->lr,
        b->schedule == FL_SCHED_COSINE ? "cosine" : "constant", b->wd);
    if (d->fp4) {
        say("  FP4 recipe: %s (e2m1, %s), dY %s, %s the wgrad inputs%s%s%s\n", fl_recipe_name((fl_recipe_kind)r->kind),
            r->kind == FL_RECIPE_NVFP4 ? "1x16 blocks with e4m3 scales under 2688 / amax per tensor, weights in 16x16 tiles"
                                       : "1x32 blocks with e8m0 scales",
            r->grad_sr ? "stochastically rounded" : "round-to-nearest",
            r->rht ? "random Hadamard transform of 16 tokens on" : "no Hadamard transform of",
            r->four_over_six ? ", Four Over Six" : "", r->sites[0] ? ", sites " : "", r->sites);
        if (dev[0])
            say("  the recipe DEVIATES from NVIDIA's NVFP4 recipe: %s.  The verdict below holds for this recipe only.\n", dev);
        else
            say("  the recipe is NVIDIA's NVFP4 recipe (TRAINING.md, \"The FP4 experiment\"), every layer in FP4.\n");
    } else {
        say("  FP8 recipe: %s, %s casts, %s scales, amax history %u (%s), margin %d, dY e5m2 %s, FP8 from step %u%s%s\n",
            fl_recipe_name((fl_recipe_kind)r->kind), r->nosat ? "non-saturating" : "saturating",
            r->pow2 ? "power-of-two" : "exact", r->history, fl_amax_algo_name((fl_amax_algo)r->algo), r->margin,
            r->grad_sr ? "stochastically rounded" : "round-to-nearest", r->fp8_start, r->sites[0] ? ", sites " : "",
            r->sites);
        if (r->kind == FL_RECIPE_PAPER_GAUDI2)
            say("  paper-gaudi2: X and W in Gaudi2's e4m3 (largest value 240, scales 2^floor(log2(240 / amax))); the "
                "backward GEMMs read e5m2 copies of X and W\n");
        if (dev[0])
            say("  the recipe DEVIATES from the paper's: %s.  The verdict below holds for this recipe only.\n", dev);
        else
            say("  the recipe is the paper's stack (TRAINING.md, \"The demo\").\n");
    }
    say("  failure: non-finite loss, divergence (train.h), or loss EMA > %.0f%% above the BF16 reference's for %d "
        "consecutive steps (EMA weight %g)\n",
        100.0 * FL_GAP_THRESHOLD, FL_GAP_WINDOW, FL_GAP_EMA);
    const double tau_end = fl_train_tau_at(b, b->steps);
    say("  precondition: the BF16 references' down-projection input amax grows or jumps >= %gx after 2 tau for SwiGLU, "
        "for GeLU neither (medians over seeds); the runs end at t/tau = %.2f%s\n",
        FL_LATE_FACTOR, tau_end, tau_end < 2 ? ": too short to measure it (no REPRODUCED possible)" : "");
    say("  %d arms x %d seeds = %d runs, %d at a time -> %s/\n", narm, d->nseeds, d->nruns, d->jobs, d->out);
    fflush(stdout);
}

/* Rows of a run's metrics.csv so far (progress), 0 when it has none yet. */
static long metrics_rows(const char *dir)
{
    char p[DIR_MAX + 32];
    snprintf(p, sizeof p, "%s/metrics.csv", dir);
    FILE *f = fopen(p, "r");
    long rows = -1;
    if (f) {
        int c;
        while ((c = getc(f)) != EOF)
            rows += c == '\n';
        fclose(f);
    }
    return rows < 0 ? 0 : rows;
}

/* dir/checkpoint.bin exists */
static int run_has_checkpoint(const char *dir)
{
    char p[DIR_MAX + 32];
    snprintf(p, sizeof p, "%s/checkpoint.bin", dir);
    return access(p, F_OK) == 0;
}

/* One run, in its child process: a fresh run into the demo's own folder, or with --continue, where the
   folder holds a checkpoint, its resume (a finished run's is a no-op).  The checkpoint's configuration
   must be this demo's up to what the run resolved from its data (the data's hash, the shards'
   vocabulary); else the run is refused, naming the first option that differs.  The exit status. */
static int run_child(const demo_setup *d, const demo_run *r)
{
    fl_train_opts o = { r->dir, 1, 1, 0, 1 };
    if (!d->cont || !run_has_checkpoint(r->dir))
        return fl_train_run(&r->cfg, &o);
    fl_train_cfg ck, want = r->cfg;
    fl_train_state st;
    char err[4600];
    if (fl_train_read_cfg(&ck, &st, r->dir, err, sizeof err)) {
        fprintf(stderr, "fp8lab demo: %s\n", err);
        return FL_EXIT_FAIL;
    }
    want.data_hash = ck.data_hash;
    if (!want.model.V)
        want.model.V = ck.model.V;
    if (memcmp(&want, &ck, sizeof want)) {
        const fl_train_opt *x = fl_train_cfg_diff(&want, &ck, 0);
        fprintf(stderr, "fp8lab demo: %s/checkpoint.bin: checkpoint refused: %s differs from this demo's configuration "
                        "(--continue resumes the demo that wrote it)\n", r->dir, x ? fl_train_opt_name(x) : "an option");
        return FL_EXIT_FAIL;
    }
    if (st.step < ck.steps)
        fprintf(stderr, "fp8lab demo: resuming %s from its checkpoint at step %llu\n", r->dir, (unsigned long long)st.step);
    o.resume = 1;
    o.overwrite = 0;
    return fl_train_run(&ck, &o);
}

/* Run every configuration as a child process, --jobs at a time, the quantised arms first (a step of
   theirs costs more: started first, they do not leave a core idle at the end).  Returns 0 when all
   exited with status 0, 1 when one did not, -1 when a fork failed (the started ones are stopped and
   reaped). */
static int demo_train(const demo_setup *d, double *wall)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid_t *pid = calloc((size_t)d->nruns, sizeof *pid);
    int *order = calloc((size_t)d->nruns, sizeof *order), no = 0;
    for (int pass = 1; order && pass >= 0; pass--)
        for (int k = 0; k < d->nruns; k++)
            if (arms[d->runs[k].arm].fp8 == pass)
                order[no++] = k;
    if (!pid || !order) {
        free(pid);
        free(order);
        return -1;
    }
    int next = 0, running = 0, done = 0, failed = 0;
    const int tty = isatty(2);
    while (done < d->nruns) {
        while (!failed && running < d->jobs && next < d->nruns) {
            fflush(NULL);
            const pid_t p = fork();
            if (p < 0) {
                fprintf(stderr, "fp8lab demo: fork failed: %s\n", strerror(errno));
                failed = -1;
                for (int k = 0; k < next; k++)
                    if (pid[k] > 0)
                        kill(pid[k], SIGTERM);
                break;
            }
            if (p == 0)
                _exit(run_child(d, &d->runs[order[next]]));
            pid[next++] = p;
            running++;
        }
        if (!running)
            break;
        int st;
        const pid_t w = waitpid(-1, &st, tty ? WNOHANG : 0);
        if (w > 0) {
            for (int k = 0; k < next; k++)
                if (pid[k] == w)
                    pid[k] = 0;
            running--;
            done++;
            if ((!WIFEXITED(st) || WEXITSTATUS(st) != 0) && !failed)
                failed = 1;
            continue;
        }
        if (w < 0)
            break;
        long rows = 0;
        for (int k = 0; k < next; k++)
            rows += pid[k] ? metrics_rows(d->runs[order[k]].dir) : (long)d->runs[order[k]].cfg.steps;
        fprintf(stderr, "\r  progress: %d of %d runs done, %d running, %.0f%% of all steps", done, d->nruns, running,
                100.0 * (double)rows / ((double)d->nruns * (double)d->base.steps));
        fflush(stderr);
        sleep(2);
    }
    if (tty)
        fputc('\n', stderr);
    free(pid);
    free(order);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *wall = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return failed;
}

static int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile (nearest rank) of v[0..n), sorted in place; NaN for n = 0. */
static double quantile(double *v, long n, double q)
{
    if (n <= 0)
        return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    long k = (long)ceil(q * (double)n) - 1;
    return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

/* A CSV field as a number ("nan", "inf" included). */
static double field(char **s)
{
    char *e;
    const double v = strtod(*s, &e);
    *s = *e == ',' ? e + 1 : e;
    return v;
}

/* Open the run's CSV file `name` (path into p) past its header line; NULL (message printed) when it
   cannot be read. */
static FILE *open_csv(const demo_run *r, const char *name, char *p, size_t pn, char *line, size_t ln)
{
    snprintf(p, pn, "%s/%s", r->dir, name);
    FILE *f = fopen(p, "r");
    if (!f || !fgets(line, (int)ln, f)) {
        fprintf(stderr, "fp8lab demo: %s: cannot read\n", p);
        if (f)
            fclose(f);
        return NULL;
    }
    return f;
}

/* metrics.csv: the loss and the act_amax of every step (telemetry.h: columns 1 and 6).  0, or -1
   (message printed). */
static int read_losses(demo_run *r)
{
    char p[DIR_MAX + 32], line[4096];
    FILE *f = open_csv(r, "metrics.csv", p, sizeof p, line, sizeof line);
    if (!f)
        return -1;
    r->loss = malloc(((size_t)r->cfg.steps + 1) * sizeof *r->loss);
    r->act_amax = malloc(((size_t)r->cfg.steps + 1) * sizeof *r->act_amax);
    r->nloss = 0;
    while (r->loss && r->act_amax && fgets(line, sizeof line, f) && r->nloss < (long)r->cfg.steps) {
        char *s = line;
        const double step = field(&s);
        if (step != (double)r->nloss) {
            fprintf(stderr, "fp8lab demo: %s: row %ld is step %g\n", p, r->nloss + 1, step);
            fclose(f);
            return -1;
        }
        r->loss[r->nloss] = field(&s);
        for (int k = 2; k < 6; k++) /* loss_ema, lr, grad_norm, ffn_in_amax */
            field(&s);
        r->act_amax[r->nloss++] = field(&s);
    }
    fclose(f);
    return r->loss && r->act_amax ? 0 : -1;
}

/* The late growth and jump of the run's act_amax (mech.h), on the weight-decay clock of its
   configuration: t/tau of step t is the sum of lr * wd over the steps before it. */
static void late_of(demo_run *r)
{
    double *tau = malloc(((size_t)r->nloss + 1) * sizeof *tau);
    if (!tau) {
        r->late = (fl_late){ NAN, NAN, NAN, NAN, -1 };
        return;
    }
    double t = 0.0;
    for (long i = 0; i < r->nloss; i++) {
        tau[i] = t;
        t += (double)fl_lr_at(&r->cfg, (uint64_t)i) * (double)r->cfg.wd;
    }
    fl_late_measure(&r->late, r->act_amax, tau, r->nloss);
    free(tau);
}

/* sites.csv: staleness quantiles and clip mass at the down projections' inputs, the largest over all
   sites, the mean underflow.  Staleness counts steps whose scale came from an amax (amax_from > 0). */
static int read_sites_fp4(demo_run *r, FILE *f, char *line, size_t ln);

static int read_sites(demo_run *r)
{
    char p[DIR_MAX + 32], line[512];
    r->stale_p50 = r->stale_p99 = r->stale_max = r->stale_all_max = NAN;
    r->clip_down_max = r->clip_down_mean = r->clip_all_max = r->underflow_mean = NAN;
    r->flush_down_mean = r->under_down_mean = r->snr_gout_min = NAN;
    FILE *f = open_csv(r, "sites.csv", p, sizeof p, line, sizeof line);
    if (!f)
        return -1;
    if (fl_recipe_is_fp4((fl_recipe_kind)r->cfg.recipe.kind))
        return read_sites_fp4(r, f, line, sizeof line);
    long cap = 4096, ns = 0, nd = 0, nall = 0;
    double *st = malloc((size_t)cap * sizeof *st), clip_sum = 0.0, uf_sum = 0.0;
    double smax = 0.0, sall = 0.0, cmax = 0.0, call = 0.0;
    while (st && fgets(line, sizeof line, f)) {
        char *s = line;
        field(&s);
        char *comma = strchr(s, ',');
        if (!comma)
            continue;
        *comma = 0;
        const int down = strlen(s) >= 8 && !strcmp(s + strlen(s) - 8, ".down.in");
        s = comma + 1;
        field(&s); /* amax */
        const double from = field(&s), stale = field(&s), sat = field(&s), clip = field(&s), uf = field(&s);
        nall++;
        uf_sum += uf;
        r->sat_all += (uint64_t)sat;
        if (from > 0 && stale > sall)
            sall = stale;
        if (clip > call)
            call = clip;
        if (!down)
            continue;
        nd++;
        r->sat_down += (uint64_t)sat;
        clip_sum += clip;
        if (clip > cmax)
            cmax = clip;
        if (from > 0) {
            if (ns == cap) {
                cap *= 2;
                double *t = realloc(st, (size_t)cap * sizeof *st);
                if (!t)
                    break;
                st = t;
            }
            st[ns++] = stale;
            if (stale > smax)
                smax = stale;
        }
    }
    fclose(f);
    if (!st)
        return -1;
    if (ns) {
        r->stale_p99 = quantile(st, ns, 0.99);
        r->stale_p50 = quantile(st, ns, 0.50);
        r->stale_max = smax;
    }
    if (nd) {
        r->clip_down_max = cmax;
        r->clip_down_mean = clip_sum / (double)nd;
    }
    if (nall) {
        r->stale_all_max = sall;
        r->clip_all_max = call;
        r->underflow_mean = uf_sum / (double)nall;
    }
    free(st);
    return 0;
}

/* sites.csv of an FP4 run (telemetry.h): at the down projections' inputs the means of the flush,
   underflow and clip masses and the largest clip mass, over all sites the largest clip mass and the
   mean underflow fraction, and the smallest all.gout snr.  Closes f. */
static int read_sites_fp4(demo_run *r, FILE *f, char *line, size_t ln)
{
    long nd = 0, nall = 0;
    double fl = 0, un = 0, cl = 0, cmax = 0, call = 0, uf_sum = 0, snr_min = INFINITY;
    const long cap = (long)(r->cfg.steps / r->cfg.log_every) + 2;
    r->wg = malloc((size_t)cap * sizeof *r->wg);
    r->wgm = malloc((size_t)cap * sizeof *r->wgm);
    r->wg_step = malloc((size_t)cap * sizeof *r->wg_step);
    r->nwg = 0;
    if (!r->wg || !r->wgm || !r->wg_step) {
        fclose(f);
        return -1;
    }
    while (fgets(line, (int)ln, f)) {
        char *s = line;
        const double step = field(&s);
        char *comma = strchr(s, ',');
        if (!comma)
            continue;
        *comma = 0;
        const int down = strlen(s) >= 8 && !strcmp(s + strlen(s) - 8, ".down.in"), gout = !strcmp(s, "all.gout");
        const int wg = !strcmp(s, "all.wgrad"), wgm = !strcmp(s, "all.wgrad_mean");
        s = comma + 1;
        if (gout || wg || wgm) { /* step,all.gout,,,,,,,snr,,, */
            for (int k = 0; k < 6; k++)
                s = strchr(s, ',') ? strchr(s, ',') + 1 : s;
            const double v = field(&s);
            if (gout && v < snr_min)
                snr_min = v;
            if (wg && r->nwg < cap) { /* all.wgrad_mean follows its step's all.wgrad */
                r->wg_step[r->nwg] = (long)step;
                r->wg[r->nwg] = v;
                r->wgm[r->nwg++] = NAN;
            } else if (wgm && r->nwg > 0 && r->wg_step[r->nwg - 1] == (long)step) {
                r->wgm[r->nwg - 1] = v;
            }
            continue;
        }
        field(&s); /* amax */
        const double sat = field(&s), clip = field(&s), flush = field(&s), under = field(&s), uf = field(&s);
        nall++;
        uf_sum += uf;
        r->sat_all += (uint64_t)sat;
        call = clip > call ? clip : call;
        if (!down)
            continue;
        nd++;
        r->sat_down += (uint64_t)sat;
        fl += flush;
        un += under;
        cl += clip;
        cmax = clip > cmax ? clip : cmax;
    }
    fclose(f);
    if (nd) {
        r->flush_down_mean = fl / (double)nd;
        r->under_down_mean = un / (double)nd;
        r->clip_down_mean = cl / (double)nd;
        r->clip_down_max = cmax;
    }
    if (nall) {
        r->clip_all_max = call;
        r->underflow_mean = uf_sum / (double)nall;
    }
    r->snr_gout_min = isinf(snr_min) ? NAN : snr_min;
    return 0;
}

static double jnum(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static json_t *jnum_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* Read every run back and judge it against its reference.  0, or -1 (message printed). */
static int demo_analyse(demo_setup *d)
{
    for (int k = 0; k < d->nruns; k++) {
        demo_run *r = &d->runs[k];
        char p[DIR_MAX + 32];
        snprintf(p, sizeof p, "%s/summary.json", r->dir);
        json_error_t je;
        r->sum = json_load_file(p, 0, &je);
        if (!r->sum) {
            fprintf(stderr, "fp8lab demo: %s: %s\n", p, je.text);
            return -1;
        }
        if (read_losses(r) || read_sites(r))
            return -1;
        late_of(r);
    }
    for (int k = 0; k < d->nruns; k++) {
        demo_run *r = &d->runs[k];
        const int ref = arms[r->arm].ref;
        const demo_run *rr = ref >= 0 ? &d->runs[k - r->arm + ref] : NULL;
        const int dv = json_is_true(json_object_get(r->sum, "diverged"));
        fl_arm_judge(&r->fail, r->loss, r->nloss, (long)r->cfg.steps, dv, dv ? (long)jnum(r->sum, "diverged_step") : -1,
                     rr ? rr->loss : NULL, rr ? rr->nloss : 0, FL_GAP_EMA, FL_GAP_THRESHOLD, FL_GAP_WINDOW);
    }
    return 0;
}

static void demo_table(const demo_setup *d)
{
    say("\n%-27s %-4s %-6s %-6s %-16s %-8s %-8s %-8s %-9s %-24s %s\n", "arm", "seed", "failed", "step", "reason",
        "loss", "gap end", "gap max", "clip dn", d->fp4 ? "flush/under dn, snr dY min" : "staleness dn p50/p99/max",
        "align |cos| p99 0 -> end");
    for (int k = 0; k < d->nruns; k++) {
        const demo_run *r = &d->runs[k];
        char step[24] = "-", st[64] = "-", gap[2][16] = { "-", "-" };
        if (r->fail.failed)
            snprintf(step, sizeof step, "%ld", r->fail.step);
        if (isfinite(r->fail.gap_max)) {
            snprintf(gap[0], sizeof gap[0], "%+.4f", r->fail.gap_final);
            snprintf(gap[1], sizeof gap[1], "%+.4f", r->fail.gap_max);
        }
        if (isfinite(r->stale_max))
            snprintf(st, sizeof st, "%.3f/%.3f/%.3f", r->stale_p50, r->stale_p99, r->stale_max);
        if (isfinite(r->flush_down_mean))
            snprintf(st, sizeof st, "%.3g/%.3g, %.3g", r->flush_down_mean, r->under_down_mean, r->snr_gout_min);
        char clip[16] = "-", align[32] = "-";
        if (isfinite(r->clip_down_max))
            snprintf(clip, sizeof clip, "%.3g", r->clip_down_max);
        if (fl_act_gated(r->cfg.model.act))
            snprintf(align, sizeof align, "%.3f -> %.3f", jnum(r->sum, "alignment_start"), jnum(r->sum, "alignment_end"));
        say("%-27s %-4llu %-6s %-6s %-16s %-8.4f %-8s %-8s %-9s %-24s %s\n", arms[r->arm].name, (unsigned long long)r->seed,
            r->fail.failed ? "YES" : "no", step, r->fail.failed ? fl_fail_reason_name(r->fail.reason) : "-",
            jnum(r->sum, "final_loss"), gap[0], gap[1], clip, st, align);
    }
    say("\n");
    for (int a = 0; a < narm; a++) {
        int fails = 0;
        for (int s = 0; s < d->nseeds; s++)
            fails += d->runs[s * narm + a].fail.failed;
        say("  %-27s %-8s failed in %d of %d seeds\n", arms[a].name,
            arms[a].role == FL_ARM_SUBJECT ? "subject" : arms[a].role == FL_ARM_CONTROL ? "control" : "info", fails,
            d->nseeds);
    }
}

static json_t *demo_run_json(const demo_run *r)
{
    const fl_recipe_cfg *rc = &r->cfg.recipe;
    json_t *o = json_object();
    char args[4096];
    fl_train_cfg_args(args, sizeof args, &r->cfg);
    json_object_set_new(o, "arm", json_string(arms[r->arm].name));
    json_object_set_new(o, "role", json_string(arms[r->arm].role == FL_ARM_SUBJECT ? "subject"
                                               : arms[r->arm].role == FL_ARM_CONTROL ? "control" : "info"));
    json_object_set_new(o, "act", json_string(fl_act_name(r->cfg.model.act)));
    json_object_set_new(o, "ffn", json_integer(r->cfg.model.F));
    json_object_set_new(o, "seed", json_integer((json_int_t)r->seed));
    json_object_set_new(o, "recipe", json_string(fl_recipe_name((fl_recipe_kind)rc->kind)));
    json_object_set_new(o, "overflow", json_string(rc->kind == FL_RECIPE_BF16 ? "ieee (bf16)" : rc->nosat ? "nan" : "saturate"));
    json_object_set_new(o, "pow2_scales", json_boolean(rc->pow2));
    json_object_set_new(o, "amax_history", json_integer(rc->history));
    json_object_set_new(o, "grad_sr", json_boolean(rc->grad_sr));
    json_object_set_new(o, "fp8_start", json_integer(rc->fp8_start));
    json_object_set_new(o, "site_overrides", fl_json_string(rc->sites));
    json_object_set_new(o, "train_args", fl_json_string(args));
    json_object_set_new(o, "dir", fl_json_string(r->dir));
    json_object_set_new(o, "failed", json_boolean(r->fail.failed));
    json_object_set_new(o, "failed_step", r->fail.failed ? json_integer(r->fail.step) : json_null());
    json_object_set_new(o, "fail_reason", json_string(fl_fail_reason_name(r->fail.reason)));
    json_object_set_new(o, "final_loss", jnum_or_null(jnum(r->sum, "final_loss")));
    json_object_set_new(o, "steps_done", json_integer((json_int_t)r->nloss));
    json_object_set_new(o, "loss_gap", jnum_or_null(r->fail.gap_final));
    json_object_set_new(o, "loss_gap_max", jnum_or_null(r->fail.gap_max));
    json_t *cm = json_object();
    json_object_set_new(cm, "down_in_max", jnum_or_null(r->clip_down_max));
    json_object_set_new(cm, "down_in_mean", jnum_or_null(r->clip_down_mean));
    json_object_set_new(cm, "all_sites_max", jnum_or_null(r->clip_all_max));
    json_object_set_new(o, "clip_mass", cm);
    json_t *sq = json_object();
    json_object_set_new(sq, "down_in_p50", jnum_or_null(r->stale_p50));
    json_object_set_new(sq, "down_in_p99", jnum_or_null(r->stale_p99));
    json_object_set_new(sq, "down_in_max", jnum_or_null(r->stale_max));
    json_object_set_new(sq, "all_sites_max", jnum_or_null(r->stale_all_max));
    json_object_set_new(o, "staleness", sq);
    json_object_set_new(o, "saturated_down_in", json_integer((json_int_t)r->sat_down));
    json_object_set_new(o, "saturated_all", json_integer((json_int_t)r->sat_all));
    json_object_set_new(o, "underflow_mean", jnum_or_null(r->underflow_mean));
    if (fl_recipe_is_fp4((fl_recipe_kind)rc->kind)) {
        json_t *b = json_object();
        json_object_set_new(b, "flush_mass_down_in_mean", jnum_or_null(r->flush_down_mean));
        json_object_set_new(b, "under_mass_down_in_mean", jnum_or_null(r->under_down_mean));
        json_object_set_new(b, "snr_gout_min", jnum_or_null(r->snr_gout_min));
        json_object_set_new(b, "rht", json_boolean(rc->rht));
        json_object_set_new(b, "four_over_six", json_boolean(rc->four_over_six));
        json_object_set_new(o, "fp4", b);
    }
    const int gated = fl_act_gated(r->cfg.model.act); /* gate/up alignment exists for the gated FFNs only */
    json_object_set_new(o, "alignment_start", gated ? jnum_or_null(jnum(r->sum, "alignment_start")) : json_null());
    json_object_set_new(o, "alignment_end", gated ? jnum_or_null(jnum(r->sum, "alignment_end")) : json_null());
    json_object_set_new(o, "late_growth", jnum_or_null(r->late.growth));
    json_object_set_new(o, "late_jump", jnum_or_null(r->late.jump));
    return o;
}

/* The precondition (verdict.h) from every seed's BF16 references of SwiGLU and GeLU. */
static void demo_precondition(fl_precondition *p, const demo_setup *d)
{
    int isw = -1, ige = -1;
    for (int a = 0; a < narm; a++)
        if (!arms[a].fp8 && arms[a].act == FL_ACT_SWIGLU)
            isw = a;
        else if (!arms[a].fp8 && arms[a].act == FL_ACT_GELU)
            ige = a;
    fl_late *sw = calloc((size_t)d->nseeds, sizeof *sw), *ge = calloc((size_t)d->nseeds, sizeof *ge);
    for (int s = 0; sw && ge && s < d->nseeds; s++) {
        sw[s] = d->runs[s * narm + isw].late;
        ge[s] = d->runs[s * narm + ige].late;
    }
    fl_precondition_judge(p, sw, ge, sw && ge ? d->nseeds : 0, fl_train_tau_at(&d->base, d->base.steps));
    free(sw);
    free(ge);
}

static json_t *precondition_json(const fl_precondition *p, const demo_setup *d)
{
    json_t *o = json_object(), *seeds = json_array();
    json_object_set_new(o, "measured", json_boolean(p->measured));
    json_object_set_new(o, "present", json_boolean(p->present));
    json_object_set_new(o, "swiglu_bf16_late_growth", jnum_or_null(p->swiglu_growth));
    json_object_set_new(o, "swiglu_bf16_late_jump", jnum_or_null(p->swiglu_jump));
    json_object_set_new(o, "gelu_bf16_late_growth", jnum_or_null(p->gelu_growth));
    json_object_set_new(o, "gelu_bf16_late_jump", jnum_or_null(p->gelu_jump));
    json_object_set_new(o, "seeds", json_integer(p->seeds));
    json_object_set_new(o, "tau_end", jnum_or_null(p->tau_end));
    json_object_set_new(o, "factor", json_real(FL_LATE_FACTOR));
    json_object_set_new(o, "text", json_string(p->text));
    json_object_set_new(o, "present_when",
                        json_string("in the BF16 references, the medians over seeds of the down-projection input "
                                    "amax's late growth (max over t/tau >= 2 / max over 1 <= t/tau < 2) or late jump "
                                    "(largest step-to-step ratio over t/tau >= 2) reach factor for swiglu/bf16, and "
                                    "neither reaches it for gelu/bf16"));
    for (int k = 0; k < d->nruns; k++) { /* the per-seed values behind the medians */
        const demo_run *r = &d->runs[k];
        if (arms[r->arm].fp8 || (arms[r->arm].act != FL_ACT_SWIGLU && arms[r->arm].act != FL_ACT_GELU))
            continue;
        json_t *e = json_object();
        json_object_set_new(e, "arm", json_string(arms[r->arm].name));
        json_object_set_new(e, "seed", json_integer((json_int_t)r->seed));
        json_object_set_new(e, "late_growth", jnum_or_null(r->late.growth));
        json_object_set_new(e, "late_jump", jnum_or_null(r->late.jump));
        json_array_append_new(seeds, e);
    }
    json_object_set_new(o, "runs", seeds);
    return o;
}

/* The FP4 demo's predictions F2-F4 (TRAINING.md, "The FP4 experiment"; verdict.h) and the medians
   over seeds behind them. */
typedef struct {
    int f2, f3, f4;
    double gap_sw, gap_ge, gap_re, flush_sw, flush_ge, flush_sm, snr_min;
} fp4_preds;

static void fp4_predictions(fp4_preds *p, const demo_setup *d)
{
    const int n = d->nseeds;
    double gs[MAX_SEEDS], gg[MAX_SEEDS], gr[MAX_SEEDS], fs[MAX_SEEDS], fg[MAX_SEEDS], fm[MAX_SEEDS];
    double snr[MAX_SEEDS * MAX_ARMS];
    int ns = 0;
    p->snr_min = INFINITY;
    for (int s = 0; s < n; s++) {
        const demo_run *r = &d->runs[s * narm];
        gs[s] = r[ARM_SW_Q].fail.gap_final;
        gg[s] = r[ARM_GE_Q].fail.gap_final;
        gr[s] = r[ARM_RE_Q].fail.gap_final;
        fs[s] = r[ARM_SW_Q].flush_down_mean;
        fg[s] = r[ARM_GE_Q].flush_down_mean;
        fm[s] = r[ARM_SM_Q].flush_down_mean;
        for (int a = 0; a < narm; a++)
            if (arms[a].fp8) {
                snr[ns++] = r[a].snr_gout_min;
                if (r[a].snr_gout_min < p->snr_min)
                    p->snr_min = r[a].snr_gout_min;
            }
    }
    p->f2 = fl_pred_f2(gs, gg, gr, n);
    p->f3 = fl_pred_f3(fs, fg, fm, n);
    p->f4 = fl_pred_f4(snr, ns, sqrt(3.0));
    p->gap_sw = fl_median_range(gs, 0, n), p->gap_ge = fl_median_range(gg, 0, n), p->gap_re = fl_median_range(gr, 0, n);
    p->flush_sw = fl_median_range(fs, 0, n), p->flush_ge = fl_median_range(fg, 0, n), p->flush_sm = fl_median_range(fm, 0, n);
}

static void fp4_predictions_say(const fp4_preds *p)
{
    say("  predictions (TRAINING.md, written before the first run; they do not change the verdict):\n");
    say("    F2 SwiGLU's final loss gap the largest: medians swiglu %+.4f, gelu %+.4f, relu %+.4f: %s\n", p->gap_sw,
        p->gap_ge, p->gap_re, fl_pred_name(p->f2));
    say("    F3 down-input flush mass swiglu > gelu and smooth_swiglu < swiglu: medians %.4g, %.4g, %.4g: %s\n",
        p->flush_sw, p->flush_ge, p->flush_sm, fl_pred_name(p->f3));
    say("    F4 every FP4 run's smallest dY snr above sqrt(3): smallest %.3g: %s\n", p->snr_min, fl_pred_name(p->f4));
}

static json_t *fp4_predictions_json(const fp4_preds *p)
{
    json_t *o = json_object();
    json_object_set_new(o, "F2_swiglu_gap_largest", json_string(fl_pred_name(p->f2)));
    json_object_set_new(o, "F3_flush_swiglu_gt_gelu_and_smooth_lt_swiglu", json_string(fl_pred_name(p->f3)));
    json_object_set_new(o, "F4_snr_above_sqrt3", json_string(fl_pred_name(p->f4)));
    json_object_set_new(o, "gap_median_swiglu", jnum_or_null(p->gap_sw));
    json_object_set_new(o, "gap_median_gelu", jnum_or_null(p->gap_ge));
    json_object_set_new(o, "gap_median_relu", jnum_or_null(p->gap_re));
    json_object_set_new(o, "flush_median_swiglu", jnum_or_null(p->flush_sw));
    json_object_set_new(o, "flush_median_gelu", jnum_or_null(p->flush_ge));
    json_object_set_new(o, "flush_median_smooth_swiglu", jnum_or_null(p->flush_sm));
    json_object_set_new(o, "snr_gout_min", jnum_or_null(p->snr_min));
    return o;
}

/* `--sqrt3`: per FP4 run the smallest windowed ratio of the batch gradient (all.wgrad) and of the
   mean gradient (all.wgrad_mean), the mean gradient's first crossing of sqrt(3), the loss gap there
   and at the end; S1-S3 over the runs (verdict.h). */
enum { SQ_MAX = MAX_SEEDS * MAX_ARMS };
typedef struct {
    int n, s1, s2, s3;
    int run[SQ_MAX];
    double rmin_batch[SQ_MAX], rmin_mean[SQ_MAX], gap_cross[SQ_MAX], gap_end[SQ_MAX], opening[SQ_MAX];
    long cross[SQ_MAX], cross_step[SQ_MAX];
} sqrt3_preds;

static void sqrt3_predictions(sqrt3_preds *p, const demo_setup *d)
{
    const double thr = sqrt(3.0);
    memset(p, 0, sizeof *p);
    for (int k = 0; k < d->nruns && p->n < SQ_MAX; k++) {
        const demo_run *r = &d->runs[k];
        const int ref = arms[r->arm].ref;
        if (ref < 0)
            continue;
        const demo_run *rr = &d->runs[k - r->arm + ref];
        const int i = p->n++;
        p->run[i] = k;
        fl_ratio_cross(r->wg, r->nwg, FL_SQRT3_WINDOW, thr, &p->rmin_batch[i]);
        p->cross[i] = fl_ratio_cross(r->wgm, r->nwg, FL_SQRT3_WINDOW, thr, &p->rmin_mean[i]);
        p->cross_step[i] = p->cross[i] >= 0 ? r->wg_step[p->cross[i]] : -1;
        p->gap_cross[i] = p->gap_end[i] = p->opening[i] = NAN;
        double *gap = r->nloss > 0 ? malloc((size_t)r->nloss * sizeof *gap) : NULL;
        if (gap) {
            const long m = fl_loss_gap_series(gap, r->loss, r->nloss, rr->loss, rr->nloss, FL_GAP_EMA);
            p->opening[i] = fl_gap_opening(gap, m, p->cross_step[i]);
            if (m > 0)
                p->gap_end[i] = gap[m - 1];
            if (p->cross_step[i] >= 0 && p->cross_step[i] < m)
                p->gap_cross[i] = gap[p->cross_step[i]];
            free(gap);
        }
    }
    p->s1 = fl_pred_s1(p->rmin_batch, p->n, thr);
    p->s2 = fl_pred_s2(p->cross, p->n);
    p->s3 = fl_pred_s3(p->opening, p->n, FL_SQRT3_OPEN);
}

static void sqrt3_predictions_say(const sqrt3_preds *p, const demo_setup *d)
{
    say("\n  the weight gradient's signal-to-noise ratio (trailing means of %d telemetry points) against sqrt(3):\n",
        FL_SQRT3_WINDOW);
    say("  %-20s %-4s %-13s %-13s %-10s %-10s %-10s %s\n", "arm", "seed", "batch: min", "mean: min", "crosses at",
        "gap there", "gap end", "opening");
    for (int i = 0; i < p->n; i++) {
        const demo_run *r = &d->runs[p->run[i]];
        char at[24] = "-";
        if (p->cross_step[i] >= 0)
            snprintf(at, sizeof at, "%ld", p->cross_step[i]);
        say("  %-20s %-4llu %-13.3f %-13.3f %-10s %-+10.4f %-+10.4f %+.4f\n", arms[r->arm].name,
            (unsigned long long)r->seed, p->rmin_batch[i], p->rmin_mean[i], at, p->gap_cross[i], p->gap_end[i],
            p->opening[i]);
    }
    say("  predictions (TRAINING.md, \"The sqrt(3) threshold\", written before the first run):\n");
    say("    S1 the batch gradient's ratio stays >= sqrt(3) in every FP4 run: %s\n", fl_pred_name(p->s1));
    say("    S2 the mean gradient's ratio falls below sqrt(3) in every FP4 run: %s\n", fl_pred_name(p->s2));
    say("    S3 no FP4 run's loss gap opens by >= %.1f points from that crossing to the end: %s%s\n",
        100.0 * FL_SQRT3_OPEN, fl_pred_name(p->s3),
        p->s3 < 0 ? " (no crossing: FP4 All the Way's threshold not tested)" : "");
}

static json_t *sqrt3_predictions_json(const sqrt3_preds *p, const demo_setup *d)
{
    json_t *o = json_object(), *runs = json_array();
    json_object_set_new(o, "S1_batch_ratio_stays_above_sqrt3", json_string(fl_pred_name(p->s1)));
    json_object_set_new(o, "S2_mean_ratio_crosses_sqrt3", json_string(fl_pred_name(p->s2)));
    json_object_set_new(o, "S3_gap_does_not_open_after_crossing", json_string(fl_pred_name(p->s3)));
    json_object_set_new(o, "window_points", json_integer(FL_SQRT3_WINDOW));
    json_object_set_new(o, "opening_threshold", json_real(FL_SQRT3_OPEN));
    for (int i = 0; i < p->n; i++) {
        const demo_run *r = &d->runs[p->run[i]];
        json_t *e = json_object();
        json_object_set_new(e, "arm", json_string(arms[r->arm].name));
        json_object_set_new(e, "seed", json_integer((json_int_t)r->seed));
        json_object_set_new(e, "batch_ratio_min", jnum_or_null(p->rmin_batch[i]));
        json_object_set_new(e, "mean_ratio_min", jnum_or_null(p->rmin_mean[i]));
        json_object_set_new(e, "cross_step", p->cross_step[i] >= 0 ? json_integer(p->cross_step[i]) : json_null());
        json_object_set_new(e, "gap_at_cross", jnum_or_null(p->gap_cross[i]));
        json_object_set_new(e, "gap_end", jnum_or_null(p->gap_end[i]));
        json_object_set_new(e, "opening", jnum_or_null(p->opening[i]));
        json_array_append_new(runs, e);
    }
    json_object_set_new(o, "runs", runs);
    return o;
}

typedef struct {
    const demo_setup *d;
    const fl_verdict *v;
    const fl_precondition *pre;
    const char *dev;
    double wall;
    const fp4_preds *fp4; /* NULL for the FP8 demo and --sqrt3 */
    const sqrt3_preds *sq; /* --sqrt3 */
} demo_doc;

static int fill_doc(FILE *f, void *ctx)
{
    const demo_doc *c = ctx;
    json_t *doc = json_object(), *runs = json_array(), *crit = json_object(), *verdict = json_object();
    for (int k = 0; k < c->d->nruns; k++)
        json_array_append_new(runs, demo_run_json(&c->d->runs[k]));
    json_object_set_new(crit, "gap_ema", json_real(FL_GAP_EMA));
    json_object_set_new(crit, "gap_threshold", json_real(FL_GAP_THRESHOLD));
    json_object_set_new(crit, "gap_window", json_integer(FL_GAP_WINDOW));
    json_object_set_new(crit, "arm_failure",
                        json_string("non-finite loss, the run's divergence (train.h), or (FP8 arms) the relative gap of "
                                    "the loss EMA against the BF16 reference above gap_threshold for gap_window "
                                    "consecutive steps, or stopped early"));
    json_object_set_new(crit, "reproduced_when",
                        json_string("the precondition is present, the subject swiglu/fp8 fails in a majority of seeds "
                                    "and no control arm fails in a majority of seeds (swiglu/fp8+down.in=current is "
                                    "reported, not judged)"));
    json_object_set_new(crit, "not_reproduced_when",
                        json_string("a control arm fails in a majority of seeds, or the precondition is present and "
                                    "swiglu/fp8 does not fail in a majority of seeds"));
    json_object_set_new(crit, "inconclusive_when",
                        json_string("no control arm fails in a majority of seeds and the precondition is absent or not "
                                    "measured, whether swiglu/fp8 fails or not (exit status 4)"));
    json_object_set_new(verdict, "outcome", json_string(fl_verdict_name(c->v->outcome)));
    json_object_set_new(verdict, "reproduced", json_boolean(c->v->reproduced));
    json_object_set_new(verdict, "text", json_string(c->v->text));
    json_object_set_new(verdict, "precondition", precondition_json(c->pre, c->d));
    json_object_set_new(verdict, "criteria", crit);
    json_object_set_new(doc, "verdict", verdict);
    json_object_set_new(doc, "recipe_deviations", fl_json_string(c->dev));
    json_object_set_new(doc, "precision", json_string(c->d->fp4 ? "fp4" : "fp8"));
    if (c->fp4)
        json_object_set_new(doc, "fp4_predictions", fp4_predictions_json(c->fp4));
    if (c->sq)
        json_object_set_new(doc, "sqrt3_predictions", sqrt3_predictions_json(c->sq, c->d));
    json_object_set_new(doc, "seeds", json_integer(c->d->nseeds));
    json_object_set_new(doc, "steps", json_integer((json_int_t)c->d->base.steps));
    json_object_set_new(doc, "wall_s", json_real(c->wall));
    json_object_set_new(doc, "runs", runs);
    const int rc = json_dumpf(doc, f, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
    fputc('\n', f);
    json_decref(doc);
    return rc;
}

/* OUT/loss_gap.csv: step, then the loss-gap series of every FP8 run (verdict.h: the relative gap of
   its loss EMA to its BF16 reference's), a column "ARM-sSEED" each; nan where a run has no gap. */
static int fill_gap_csv(FILE *f, void *ctx)
{
    const demo_setup *d = ctx;
    const long steps = (long)d->base.steps;
    double *g = calloc((size_t)d->nruns * (size_t)steps, sizeof *g);
    if (!g)
        return -1;
    fputs("step", f);
    for (int k = 0; k < d->nruns; k++) {
        const demo_run *r = &d->runs[k];
        const int ref = arms[r->arm].ref;
        if (ref < 0)
            continue;
        const demo_run *rr = &d->runs[k - r->arm + ref];
        double *gk = g + (size_t)k * (size_t)steps;
        for (long t = 0; t < steps; t++)
            gk[t] = NAN;
        fl_loss_gap_series(gk, r->loss, r->nloss, rr->loss, rr->nloss, FL_GAP_EMA);
        fprintf(f, ",%s-s%llu", arms[r->arm].dir, (unsigned long long)r->seed);
    }
    fputc('\n', f);
    for (long t = 0; t < steps; t++) {
        fprintf(f, "%ld", t);
        for (int k = 0; k < d->nruns; k++)
            if (arms[d->runs[k].arm].ref >= 0) {
                const double v = g[(size_t)k * (size_t)steps + (size_t)t];
                if (isfinite(v))
                    fprintf(f, ",%.9g", v);
                else
                    fputs(",nan", f);
            }
        fputc('\n', f);
    }
    free(g);
    return ferror(f) ? -1 : 0;
}

static void demo_free(demo_setup *d)
{
    for (int k = 0; k < d->nruns; k++) {
        json_decref(d->runs[k].sum);
        free(d->runs[k].loss);
        free(d->runs[k].act_amax);
        free(d->runs[k].wg);
        free(d->runs[k].wgm);
        free(d->runs[k].wg_step);
    }
    free(d->runs);
    if (summary_file)
        fclose(summary_file);
    summary_file = NULL;
}

int fl_cmd_demo(int argc, char **argv)
{
    fl_blas_setup(argv - 1);
    demo_setup d;
    memset(&d, 0, sizeof d);
    int rc = demo_parse(&d, argc, argv);
    if (rc == DEMO_GO_ON)
        rc = demo_configure(&d);
    if (rc != DEMO_GO_ON) {
        demo_free(&d);
        return rc;
    }
    fl_rundir folder; /* locked until the command ends: one demo per folder at a time */
    const int lrc = fl_rundir_acquire(&folder, d.out, "demo");
    if (lrc) {
        demo_free(&d);
        return lrc;
    }
    char sp[DIR_MAX + 32], dev[1024];
    snprintf(sp, sizeof sp, "%s/summary.txt", d.out);
    summary_file = fopen(sp, "w");
    recipe_deviations(dev, sizeof dev, &d.base.recipe, d.fp4);
    demo_announce(&d, dev);
    double wall;
    if (demo_train(&d, &wall)) {
        fprintf(stderr, "fp8lab demo: a training run failed to run (see the messages above)\n");
        demo_free(&d);
        return FL_EXIT_FAIL;
    }
    if (demo_analyse(&d)) {
        demo_free(&d);
        return FL_EXIT_FAIL;
    }
    /* plots: the first seed's arms */
    char *plot_runs[MAX_ARMS];
    for (int a = 0; a < narm; a++)
        plot_runs[a] = d.runs[a].dir;
    char title[128];
    snprintf(title, sizeof title, "demo seed %llu:", (unsigned long long)d.base.seed);
    const int prc = fl_plot_runs(d.out, title, narm, plot_runs);

    demo_table(&d);
    fl_arm_outcome *oc = calloc((size_t)d.nruns, sizeof *oc);
    for (int k = 0; k < d.nruns && oc; k++)
        oc[k] = (fl_arm_outcome){ arms[d.runs[k].arm].name, arms[d.runs[k].arm].role, d.runs[k].seed, d.runs[k].fail.failed };
    fl_precondition pre;
    demo_precondition(&pre, &d);
    say("  precondition: %s%s\n", pre.present ? "PRESENT: " : pre.measured ? "ABSENT: " : "", pre.text);
    fl_verdict v = { 0, FL_VERDICT_NOT_REPRODUCED, "NOT REPRODUCED: out of memory" };
    if (oc)
        fl_demo_verdict(&v, oc, d.nruns, &pre);
    free(oc);
    double la[3] = { -1, -1, -1 };
    if (getloadavg(la, 3) < 0)
        la[0] = -1;
    char plots[DIR_MAX + 64];
    if (prc == FL_EXIT_OK)
        snprintf(plots, sizeof plots, "plots of seed %llu in %s/*.png", (unsigned long long)d.base.seed, d.out);
    else
        snprintf(plots, sizeof plots, "no plots: gnuplot failed, above");
    say("\n  verdict: %s\n  (%.0f s wall for %d runs, %d at a time; load average %.2f at the end; %s)\n", v.text, wall,
        d.nruns, d.jobs, la[0], plots);
    fp4_preds fp;
    static sqrt3_preds sq;
    if (d.sqrt3) {
        sqrt3_predictions(&sq, &d);
        sqrt3_predictions_say(&sq, &d);
    } else if (d.fp4) {
        fp4_predictions(&fp, &d);
        fp4_predictions_say(&fp);
    }
    demo_doc doc = { &d, &v, &pre, dev, wall, d.fp4 && !d.sqrt3 ? &fp : NULL, d.sqrt3 ? &sq : NULL };
    char jp[DIR_MAX + 32], err[4400];
    snprintf(jp, sizeof jp, "%s/demo.json", d.out);
    int jerr = fl_write_atomic(jp, fill_doc, &doc, err, sizeof err);
    if (!jerr && d.json_path)
        jerr = fl_write_atomic(d.json_path, fill_doc, &doc, err, sizeof err);
    if (!jerr) {
        snprintf(jp, sizeof jp, "%s/loss_gap.csv", d.out);
        jerr = fl_write_atomic(jp, fill_gap_csv, &d, err, sizeof err);
    }
    if (jerr)
        fprintf(stderr, "fp8lab demo: %s\n", err);
    demo_free(&d);
    if (jerr)
        return FL_EXIT_FAIL;
    if (prc != FL_EXIT_OK)
        return prc;
    return fl_verdict_exit(&v);
}
