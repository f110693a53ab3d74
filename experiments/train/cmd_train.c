/* cmd_train.c — `fp8lab train`: parse the flags into a configuration (the option table, train_opts.h) and
 * run it (train.c). */
#include "commands.h"
#include "common/cli.h"
#include "train.h"
#include "train_opts.h"

#include <stdio.h>
#include <string.h>

static const char *const help_head =
    "usage: fp8lab train --act ACT --recipe RECIPE --steps N --seed S --out DIR [options]\n"
    "       fp8lab train --resume DIR [--threads N] [--quiet]\n"
    "       fp8lab train --fork CHECKPOINT --out DIR [options changing the recipe, --act, --wd, ...]\n"
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
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "--resume") || !strcmp(f, "--fork")) {
            i++;
            continue;
        }
        if (!strcmp(f, "--out")) {
            if (!v)
                return fl_cli_usage_error(cmd, "--out needs a folder");
            if (resume)
                return fl_cli_usage_error(cmd, "--out and --resume exclude each other (--resume continues in its own folder)");
            opts.dir = v;
            i++;
            continue;
        }
        if (!strcmp(f, "--threads")) {
            unsigned long long x;
            if (!v || fl_cli_parse_u64(&x, v) || x < 1 || x > 256)
                return fl_cli_usage_error(cmd, "--threads needs a count 1..256");
            opts.threads = (int)x;
            i++;
            continue;
        }
        if (!strcmp(f, "--quiet")) {
            opts.quiet = 1;
            continue;
        }
        if (!strcmp(f, "--overwrite")) {
            if (resume)
                return fl_cli_usage_error(cmd, "--overwrite and --resume exclude each other (a resume continues the run)");
            opts.overwrite = 1;
            continue;
        }
        int used = 0;
        const int r = fl_train_parse_flag(&cfg, cmd, f, v, &used);
        if (r == 2)
            return FL_EXIT_USAGE;
        if (r == 1)
            return fl_cli_usage_error(cmd, "unknown option '%s'", f);
        i += used;
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
