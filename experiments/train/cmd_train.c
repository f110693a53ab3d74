/* cmd_train.c — `fp8lab train`: parse the flags into a configuration (the option table, train_opts.h) and
 * run it (train.c). */
#include "commands.h"
#include "gstep.h"
#pragma weak fl_gstep_cuda_open /* build/fp8lab-cuda only (gstep_cuda.c) */
#include "gpu_plan.h"
#include "common/cli.h"
#include "train.h"
#include "train_opts.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const help_head =
    "usage: fp8lab train --act ACT --recipe RECIPE --steps N --seed S --out DIR [options]\n"
    "       fp8lab train --resume DIR [--threads N] [--quiet]\n"
    "       fp8lab train --fork CHECKPOINT --out DIR [options changing the recipe, --act, --wd, ...]\n"
    "       fp8lab train --device cuda --plan [--preset 124m|350m] [--ranks N] [--zero1]\n"
    "                    [--device-mem GIB] [options]\n"
    "\n"
    "--preset 124m|350m: the question at GPU scale (12 layers x 768 / 24 x 1024, SwiGLU F 2048 / 2752,\n"
    "GeLU and ReLU parameter-matched, seq 1024, micro-batches of 16 / 8, --accum 32 / 64 of them per step\n"
    "(524,288 tokens), lr 6e-4 / 3e-4, wd 0.1, cosine; any other flag overrides it).  --device cuda --plan:\n"
    "the GPU training step's buffers, bytes, peak memory and launches, computed on the host; --ranks and\n"
    "--zero1 for a data-parallel split, --device-mem whether the peak fits (exit 3 when it does not).  --device cuda without --plan: the GPU step (build/fp8lab-cuda, from make cuda;\n"
    "fp32, bf16, fp8-delayed, fp8-current, paper-gaudi2; FP8LAB_GSTEP_PROFILE=1: its time by part;\n"
    "FP8LAB_GSTEP_TRACE=1: each device operation named before it runs, the device drained after it); --device\n"
    "twins: the same step's code on the CPU with the kernels' twins.\n"
    "Judge either against the harness with 'fp8lab compare'.\n"
    "\n"
    "Trains a small decoder-only transformer (byte-level, RMSNorm pre-norm, causal attention, an FFN\n"
    "with the chosen activation) with AdamW, emulating the chosen precision recipe at every Linear\n"
    "layer's casts.  Writes DIR/metrics.csv (every step), DIR/sites.csv (every step, each FP8 site's\n"
    "staleness, saturation, clip mass, underflow; each FP4 site's clip, flush and underflow mass, snr\n"
    "and block amax percentiles), DIR/telemetry.jsonl (per cast site, every\n"
    "--log-every steps), DIR/checkpoint.bin (every --ckpt-every steps, at the end, on SIGINT/SIGTERM),\n"
    "DIR/config.json and DIR/summary.json.  --resume continues a run bit-identically.\n"
    "\n";
/* here: the options, from the option table (train_opts.h) */
static const char *const help_tail =
    "Divergence: a non-finite loss, or the loss EMA above its running minimum by more than --div-margin\n"
    "for --div-window consecutive steps.  Exit status 0 also for a diverged run; 1 when interrupted or\n"
    "a file cannot be read or written; 2 when a flag, the folder (in use, holding a run) or a fork is refused.\n";

static void print_help(FILE *f)
{
    fputs(help_head, f);
    fl_train_opts_help(f);
    fputs(help_tail, f);
}

/* The GPU step's flags (gpu_plan.h): only --plan uses them today. */
typedef struct {
    const char *preset;
    int plan, cuda, zero1;
    uint32_t ranks;
    double device_gib;
} gpu_args;

enum { GO_ON = -1 };

/* Every flag of argv into cfg, opts and g (the run's folder flags, the GPU flags, the option table).
   GO_ON, or the exit status after a message. */
static int parse_flags(fl_train_cfg *cfg, fl_train_opts *opts, gpu_args *g, int argc, char **argv, int resume)
{
    const char *cmd = "train";
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        unsigned long long x;
        if (!strcmp(f, "--resume") || !strcmp(f, "--fork")) {
            i++;
            continue;
        }
        if (!strcmp(f, "--out")) {
            if (!v)
                return fl_cli_usage_error(cmd, "--out needs a folder");
            if (resume)
                return fl_cli_usage_error(cmd, "--out and --resume exclude each other (--resume continues in its own folder)");
            opts->dir = v;
            i++;
            continue;
        }
        if (!strcmp(f, "--threads")) {
            if (!v || fl_cli_parse_u64(&x, v) || x < 1 || x > 256)
                return fl_cli_usage_error(cmd, "--threads needs a count 1..256");
            opts->threads = (int)x;
            i++;
            continue;
        }
        if (!strcmp(f, "--quiet")) {
            opts->quiet = 1;
            continue;
        }
        if (!strcmp(f, "--overwrite")) {
            if (resume)
                return fl_cli_usage_error(cmd, "--overwrite and --resume exclude each other (a resume continues the run)");
            opts->overwrite = 1;
            continue;
        }
        if (!strcmp(f, "--plan") || !strcmp(f, "--zero1")) {
            *(f[2] == 'p' ? &g->plan : &g->zero1) = 1;
            continue;
        }
        if (!strcmp(f, "--preset")) {
            if (!v)
                return fl_cli_usage_error(cmd, "%s needs a value", f);
            g->preset = v;
            i++;
            continue;
        }
        if (!strcmp(f, "--ranks")) {
            if (!v || fl_cli_parse_u64(&x, v) || x < 1 || x > 65536)
                return fl_cli_usage_error(cmd, "%s needs a count 1..65536", f);
            g->ranks = (uint32_t)x;
            i++;
            continue;
        }
        if (!strcmp(f, "--device-mem")) {
            char *e = NULL;
            const double d = v ? strtod(v, &e) : 0.0;
            if (!v || e == v || *e || !(d > 0.0 && d < 1e6))
                return fl_cli_usage_error(cmd, "--device-mem needs GiB, a number in (0, 1e6)");
            g->device_gib = d;
            i++;
            continue;
        }
        int used = 0;
        const int r = fl_train_parse_flag(cfg, cmd, f, v, &used);
        if (r == 2)
            return FL_EXIT_USAGE;
        if (r == 1)
            return fl_cli_usage_error(cmd, "unknown option '%s'", f);
        i += used;
    }
    if ((g->ranks > 1 || g->zero1 || g->device_gib > 0) && !g->plan)
        return fl_cli_usage_error(cmd, "--ranks, --zero1 and --device-mem apply to --plan (the harness and the GPU step run "
                                  "on one device)");
    return GO_ON;
}

int fl_cmd_train(int argc, char **argv)
{
    const char *cmd = "train";
    fl_blas_setup(argv - 1); /* argv is main's argv + 1 (experiments/cli/fp8lab.c) */
    fl_train_cfg cfg;
    fl_train_cfg_default(&cfg);
    fl_train_opts opts = { 0 };
    const char *resume = NULL, *fork = NULL;
    fl_train_cfg parent;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            print_help(stdout);
            return FL_EXIT_OK;
        }
        if (!strcmp(argv[i], "--resume") || !strcmp(argv[i], "--fork")) {
            if (i + 1 >= argc)
                return fl_cli_usage_error(cmd, "%s needs a %s", argv[i], argv[i][2] == 'r' ? "run folder" : "checkpoint file");
            if (argv[i][2] == 'r')
                resume = argv[++i];
            else
                fork = argv[++i];
        }
    }
    if (resume && fork)
        return fl_cli_usage_error(cmd, "--resume and --fork exclude each other (a fork resumes with --resume DIR)");
    if (fork) { /* the parent's configuration, the flags on top of it */
        char err[4600];
        if (strlen(fork) >= sizeof cfg.fork_from)
            return fl_cli_usage_error(cmd, "--fork: path too long");
        if (fl_train_fork_cfg(&cfg, &parent, fork, err, sizeof err)) {
            fprintf(stderr, "fp8lab train: %s\n", err);
            return FL_EXIT_FAIL;
        }
    }
    fl_train_cfg ck;
    if (resume) {
        fl_train_state st;
        char err[4600];
        if (fl_train_read_cfg(&ck, &st, resume, err, sizeof err)) {
            fprintf(stderr, "fp8lab train: %s\n", err);
            return FL_EXIT_FAIL;
        }
        cfg = ck;
        opts.resume = 1;
        opts.dir = resume;
    }
    gpu_args g = { .ranks = 1 };
    int rc = parse_flags(&cfg, &opts, &g, argc, argv, resume != NULL);
    if (rc != GO_ON)
        return rc;
    if (g.preset) { /* the preset under the flags: parse them again on top of it, for the activation they give */
        if (resume || fork)
            return fl_cli_usage_error(cmd, "--preset starts a new run (a resume or fork keeps its parent's shapes)");
        const fl_act act = cfg.model.act;
        fl_train_cfg_default(&cfg);
        if (fl_train_preset(&cfg, g.preset, act))
            return fl_cli_usage_error(cmd, "unknown --preset '%s' (%s)", g.preset, FL_PRESET_NAMES);
        if ((rc = parse_flags(&cfg, &opts, &g, argc, argv, 0)) != GO_ON)
            return rc;
    }
    g.cuda = cfg.device == FL_DEVICE_CUDA;
    if (g.cuda && !g.plan && !fl_gstep_cuda_open)
        return fl_cli_usage_error(cmd, "--device cuda: this fp8lab has no CUDA step (build/fp8lab-cuda has it: make "
                                  "cuda); --plan prints its memory and launches, and --device twins runs its code on "
                                  "the CPU");
    if (g.plan) { /* the step as planned, FP8 recipes included: the device's limits of today do not apply */
        fl_train_cfg pc = cfg;
        pc.device = FL_DEVICE_CPU;
        const char *why = fl_train_cfg_check(&pc);
        if (why)
            return fl_cli_usage_error(cmd, "%s", why);
        fl_gpu_plan plan;
        char err[512];
        if (fl_gpu_plan_build(&plan, &cfg, cfg.accum, g.ranks, g.zero1, err, sizeof err))
            return fl_cli_usage_error(cmd, "--plan: %s", err);
        const uint64_t dev = (uint64_t)(g.device_gib * 1073741824.0);
        fl_gpu_plan_print(stdout, &plan, &cfg, dev);
        return dev && plan.peak > dev ? FL_EXIT_GATE : FL_EXIT_OK; /* 3: does not fit in --device-mem */
    }
    if (!opts.dir)
        return fl_cli_usage_error(cmd, "--out DIR is required (or --resume DIR)");
    if (resume && memcmp(&cfg, &ck, sizeof cfg)) {
        const fl_train_opt *o = fl_train_cfg_diff(&cfg, &ck, 0);
        fprintf(stderr, "fp8lab train: %s/checkpoint.bin: checkpoint refused: %s differs from the run's configuration "
                        "(resume takes the configuration from the checkpoint; start a new run with --out for a different one)\n",
                resume, o ? fl_train_opt_name(o) : "an option");
        return FL_EXIT_FAIL;
    }
    const char *why = fl_train_cfg_check(&cfg);
    if (why)
        return fl_cli_usage_error(cmd, "%s", why);
    if (fork && (why = fl_train_fork_mismatch(&parent, &cfg)) != NULL)
        return fl_cli_usage_error(cmd, "a fork cannot change %s", why);
    return fl_train_run(&cfg, &opts);
}
