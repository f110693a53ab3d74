/* cmd_train.c — `fp8lab train`: parse the flags into a configuration and run it (train.c). */
#include "channels.h"
#include "cli/cli.h"
#include "train.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const help_head =
    "usage: fp8lab train --act ACT --recipe RECIPE --steps N --seed S --out DIR [options]\n"
    "       fp8lab train --resume DIR [--threads N] [--quiet]\n"
    "       fp8lab train --fork CHECKPOINT --out DIR [options changing the recipe, --act, --wd, ...]\n"
    "\n"
    "Trains a small decoder-only transformer (byte-level, RMSNorm pre-norm, causal attention, an FFN\n"
    "with the chosen activation) with AdamW, emulating the chosen precision recipe at every Linear\n"
    "layer's casts.  Writes DIR/metrics.csv (every step), DIR/sites.csv (every step, each FP8 site's\n"
    "staleness, saturation, clip mass, underflow), DIR/telemetry.jsonl (per cast site, every\n"
    "--log-every steps), DIR/checkpoint.bin (every --ckpt-every steps, at the end, on SIGINT/SIGTERM),\n"
    "DIR/config.json and DIR/summary.json.  --resume continues a run bit-identically.\n"
    "\n";
/* here: --act's list, from the activation table (print_help) */
static const char *const help_tail =
    "  --recipe R         fp32 bf16 fp8-delayed fp8-current fp8-block mxfp8 (default bf16)\n"
    "  --steps N          training steps (1000)            --seed S   seed of init, data, batches (1)\n"
    "  --out DIR          run folder (required unless --resume); refused when it holds another run\n"
    "  --overwrite        let a fresh run replace the run files of --out (not a fork's parent's folder)\n"
    "model:   --width C (64) --layers L (2) --heads H (4) --ffn F (256) --seq T (64) --batch B (16)\n"
    "         --init-std X (0.02)\n"
    "optim:   --lr X (1e-3) --lr-min FRAC (0.1 of lr) --schedule cosine|constant --warmup N (100)\n"
    "         --wd X (0.1, decoupled) --beta1 X (0.9) --beta2 X (0.95) --adam-eps X (1e-8) --clip X (1.0; 0 off)\n"
    "recipe:  --amax-history N (1024) --amax-algo max|most_recent --margin M (0) --pow2 (power-of-two\n"
    "         scales) --fp8-overflow saturate|nan (saturate = TE; nan = PyTorch eager <= 2.11 / ml_dtypes)\n"
    "         --fp8-adam (Adam m1 e4m3, m2 e5m2) --fast-accum (needs the FP8 GEMM twin)\n"
    "         --grad-scaling delayed|current (fp8-delayed: dY's scale from its history (TE) or from the\n"
    "         tensor itself, X and W staying delayed: a per-role recipe as torchao's float8 allowed)\n"
    "         --fp8-start N (0: the first N steps cast to bf16 while the delayed amax histories record,\n"
    "         as when FP8 training continues from a BF16 run)\n"
    "         --grad-sr (e5m2 dY casts round stochastically; streams from --seed, step, site, element)\n"
    "         --no-pow2, --no-grad-sr: switch those off again (the demo's recipe has them on)\n"
    "sites:   --site PATTERN=bf16|current|delayed (repeatable, a later one wins; fp8-delayed/current):\n"
    "         the cast sites a name or fnmatch pattern names, kept in bf16 or scaled per tensor from the\n"
    "         current tensor / the site's amax history.  Sites: L<l>.<lin>.<role>, l = 0..layers-1,\n"
    "         lin = qkv proj fc down, role = in (X) w (W) gout (dY); head.* stays bf16.\n"
    "         E.g. --site L0.down.in=bf16, or --site '*.down.in=current' for every FFN's down input\n"
    "data:    --data synthetic|triggers|fortunes|FILE (a text file; bytes are tokens) --data-len N (generated\n"
    "         length, 2^20); fortunes: the English text of Debian's package fortunes, pinned by checksum\n"
    "         --bos: token 256 opens every sequence (a place for an attention sink)\n"
    "         --trigger-rate P (0.002) --trigger-len N (8): rare trigger events of --data triggers (data.h)\n"
    "logs:    --log-every K (10) --ckpt-every K (500) --keep-ckpt S1,S2,.. (keep checkpoint-S.bin, <= 16)\n"
    "         --chan-every K: per-channel telemetry of every FFN's down-projection input: channels.csv\n"
    "         every K steps, records.csv at every amax record (which channel, its alignment, ...)\n"
    "fork:    --fork FILE: start from another run's checkpoint (checkpoint.bin or checkpoint-S.bin) at its\n"
    "         step, with its configuration, the flags given on top (not the shapes, seed or data): the\n"
    "         same batches and streams from there.  --decorrelate top:K|random:K replaces w_up of the K\n"
    "         most aligned (or K random) channels per layer by a random vector of the same norm\n"
    "         orthogonal to w_gate before the first step (intervention.csv)\n"
    "diverge: --div-margin NATS (1.0) --div-window STEPS (100) --div-ema W (0.02) --no-stop-on-divergence\n"
    "run:     --threads N (default: all cores; a resume keeps the run's) --quiet.  The bits do not depend\n"
    "         on the thread count.  A run folder is locked while a process writes it.\n"
    "Divergence: a non-finite loss, or the loss EMA above its running minimum by more than --div-margin\n"
    "for --div-window consecutive steps.  Exit status 0 also for a diverged run; 1 when interrupted or\n"
    "a file cannot be read or written; 2 when a flag, the folder (in use, holding a run) or a fork is refused.\n";

/* The help's columns: option descriptions start at HELP_DESC_COL; a generated list wraps before
   HELP_WIDTH columns (the widest hand-written lines of the help). */
enum { HELP_DESC_COL = 21, HELP_WIDTH = 100 };

/* --act's help lines: the activations of fl_act_table (ffn_act.h) with their notes, then the
   default, wrapped under the description column. */
static void print_act_help(FILE *f)
{
    static const char tail[] = "(default swiglu; poly order 3 without a digit)";
    int col = fprintf(f, "  %-*s", HELP_DESC_COL - 2, "--act ACT");
    for (int k = 0; k <= FL_ACT_COUNT; k++) {
        char item[96];
        if (k < FL_ACT_COUNT)
            fl_act_spelling(item, sizeof item, k, 1);
        else
            snprintf(item, sizeof item, "%s", tail);
        const int len = (int)strlen(item);
        if (k > 0 && col + 1 + len > HELP_WIDTH)
            col = fprintf(f, "\n%*s", HELP_DESC_COL, "") - 1;
        else if (k > 0)
            col += fprintf(f, " ");
        col += fprintf(f, "%s", item);
    }
    fputc('\n', f);
}

static void print_help(FILE *f)
{
    fputs(help_head, f);
    print_act_help(f);
    fputs(help_tail, f);
}

/* The activations' CLI spellings without notes, space-separated (--act's error message). */
static char *act_list(char *buf, size_t n)
{
    size_t w = 0;
    buf[0] = 0;
    for (int k = 0; k < FL_ACT_COUNT && w < n; k++) {
        char item[64];
        w += (size_t)snprintf(buf + w, n - w, "%s%s", k ? " " : "", fl_act_spelling(item, sizeof item, k, 0));
    }
    return buf;
}

static int pu32(uint32_t *o, const char *v, unsigned long long lo, unsigned long long hi)
{
    unsigned long long x;
    if (fl_cli_parse_u64(&x, v) || x < lo || x > hi)
        return -1;
    *o = (uint32_t)x;
    return 0;
}

static int pf(float *o, const char *v)
{
    double x;
    if (fl_cli_parse_double(&x, v) || !isfinite((float)x)) /* no inf or nan, and none by overflow (1e300) */
        return -1;
    *o = (float)x;
    return 0;
}

int fl_train_parse_flag(fl_train_cfg *c, const char *cmd, const char *flag, const char *val, int *used)
{
    *used = 1;
    fl_model_cfg *m = &c->model;
    fl_recipe_cfg *r = &c->recipe;
#define NEED()                                                                                     \
    do {                                                                                           \
        if (!val)                                                                                  \
            return fl_cli_usage_error(cmd, "%s needs a value", flag), 2;                           \
    } while (0)
#define BAD() return fl_cli_usage_error(cmd, "bad value for %s: '%s'", flag, val), 2
    if (!strcmp(flag, "--act")) {
        NEED();
        fl_act a;
        char list[512];
        if (fl_act_parse(&a, val))
            return fl_cli_usage_error(cmd, "unknown activation '%s' (%s)", val, act_list(list, sizeof list)), 2;
        m->act = a;
    } else if (!strcmp(flag, "--recipe")) {
        NEED();
        fl_recipe_kind k;
        if (fl_recipe_parse(&k, val))
            return fl_cli_usage_error(cmd, "unknown recipe '%s' (fp32 bf16 fp8-delayed fp8-current fp8-block mxfp8)", val), 2;
        r->kind = k;
    } else if (!strcmp(flag, "--steps")) {
        NEED();
        unsigned long long x;
        if (fl_cli_parse_u64(&x, val) || x < 1 || x > 100000000ull)
            BAD();
        c->steps = x;
    } else if (!strcmp(flag, "--seed")) {
        NEED();
        unsigned long long x;
        if (fl_cli_parse_u64(&x, val))
            BAD();
        c->seed = x;
    } else if (!strcmp(flag, "--width")) {
        NEED();
        if (pu32(&m->C, val, 4, 4096)) BAD();
    } else if (!strcmp(flag, "--layers")) {
        NEED();
        if (pu32(&m->L, val, 1, 64)) BAD();
    } else if (!strcmp(flag, "--heads")) {
        NEED();
        if (pu32(&m->H, val, 1, 4096)) BAD();
    } else if (!strcmp(flag, "--ffn")) {
        NEED();
        if (pu32(&m->F, val, 1, 65536)) BAD();
    } else if (!strcmp(flag, "--seq")) {
        NEED();
        if (pu32(&m->T, val, 2, 4096)) BAD();
    } else if (!strcmp(flag, "--batch")) {
        NEED();
        if (pu32(&m->B, val, 1, 4096)) BAD();
    } else if (!strcmp(flag, "--init-std")) {
        NEED();
        if (pf(&m->init_std, val) || !(m->init_std > 0 && m->init_std < 10)) BAD();
    } else if (!strcmp(flag, "--lr")) {
        NEED();
        if (pf(&c->lr, val)) BAD();
    } else if (!strcmp(flag, "--lr-min")) {
        NEED();
        if (pf(&c->lr_min_frac, val)) BAD();
    } else if (!strcmp(flag, "--schedule")) {
        NEED();
        if (!strcmp(val, "cosine")) c->schedule = FL_SCHED_COSINE;
        else if (!strcmp(val, "constant")) c->schedule = FL_SCHED_CONSTANT;
        else BAD();
    } else if (!strcmp(flag, "--warmup")) {
        NEED();
        if (pu32(&c->warmup, val, 0, 100000000)) BAD();
    } else if (!strcmp(flag, "--wd")) {
        NEED();
        if (pf(&c->wd, val)) BAD();
    } else if (!strcmp(flag, "--beta1")) {
        NEED();
        if (pf(&c->beta1, val)) BAD();
    } else if (!strcmp(flag, "--beta2")) {
        NEED();
        if (pf(&c->beta2, val)) BAD();
    } else if (!strcmp(flag, "--adam-eps")) {
        NEED();
        if (pf(&c->adam_eps, val)) BAD();
    } else if (!strcmp(flag, "--clip")) {
        NEED();
        if (pf(&c->clip, val)) BAD();
    } else if (!strcmp(flag, "--amax-history")) {
        NEED();
        if (pu32(&r->history, val, 1, 1u << 20)) BAD();
    } else if (!strcmp(flag, "--amax-algo")) {
        NEED();
        fl_amax_algo a;
        if (fl_amax_algo_parse(&a, val)) BAD();
        r->algo = a;
    } else if (!strcmp(flag, "--margin")) {
        NEED();
        double x;
        if (fl_cli_parse_double(&x, val) || x != (int)x || x < -127 || x > 127) BAD();
        r->margin = (int32_t)x;
    } else if (!strcmp(flag, "--fp8-start")) {
        NEED();
        if (pu32(&r->fp8_start, val, 0, 100000000)) BAD();
    } else if (!strcmp(flag, "--grad-scaling")) {
        NEED();
        if (!strcmp(val, "delayed")) r->grad_current = 0;
        else if (!strcmp(val, "current")) r->grad_current = 1;
        else BAD();
    } else if (!strcmp(flag, "--site")) {
        NEED();
        if (fl_recipe_sites_add(r, val))
            return fl_cli_usage_error(cmd, "bad value for --site: '%s' (PATTERN=bf16|current|delayed; all --site "
                                      "values together at most %d bytes)", val, FL_SITE_SPEC_MAX - 1), 2;
    } else if (!strcmp(flag, "--fp8-overflow")) {
        NEED();
        if (!strcmp(val, "saturate")) r->nosat = 0;
        else if (!strcmp(val, "nan")) r->nosat = 1;
        else BAD();
    } else if (!strcmp(flag, "--chan-every")) {
        NEED();
        if (pu32(&c->chan_every, val, 0, 100000000)) BAD();
    } else if (!strcmp(flag, "--keep-ckpt")) {
        NEED();
        c->keep_n = 0;
        for (const char *p = val; *p;) {
            char num[32];
            const size_t k = strcspn(p, ",");
            unsigned long long x;
            if (k == 0 || k >= sizeof num || c->keep_n == FL_KEEP_MAX)
                BAD();
            memcpy(num, p, k);
            num[k] = 0;
            if (fl_cli_parse_u64(&x, num) || x < 1)
                BAD();
            c->keep[c->keep_n++] = x;
            p += k + (p[k] == ',');
        }
        if (!c->keep_n) BAD();
    } else if (!strcmp(flag, "--fork")) {
        NEED();
        if (strlen(val) >= sizeof c->fork_from || !*val) BAD();
        memset(c->fork_from, 0, sizeof c->fork_from);
        memcpy(c->fork_from, val, strlen(val));
    } else if (!strcmp(flag, "--decorrelate")) {
        NEED();
        const char *colon = strchr(val, ':');
        unsigned long long x;
        if (!colon || fl_cli_parse_u64(&x, colon + 1) || x < 1 || x > 65536) BAD();
        if (colon - val == 3 && !strncmp(val, "top", 3)) c->decor_mode = FL_DECOR_TOP;
        else if (colon - val == 6 && !strncmp(val, "random", 6)) c->decor_mode = FL_DECOR_RANDOM;
        else BAD();
        c->decor_k = (uint32_t)x;
    } else if (!strcmp(flag, "--data")) {
        NEED();
        if (!strcmp(val, "fortunes")) {
            c->data_kind = FL_DATA_FORTUNES;
            memset(c->data_path, 0, sizeof c->data_path);
        } else if (!strcmp(val, "synthetic") || !strcmp(val, "triggers")) {
            c->data_kind = !strcmp(val, "synthetic") ? FL_DATA_SYNTHETIC : FL_DATA_TRIGGERS;
            memset(c->data_path, 0, sizeof c->data_path);
        } else {
            if (strlen(val) >= sizeof c->data_path)
                BAD();
            c->data_kind = FL_DATA_TEXT;
            memset(c->data_path, 0, sizeof c->data_path);
            memcpy(c->data_path, val, strlen(val));
        }
    } else if (!strcmp(flag, "--data-len")) {
        NEED();
        unsigned long long x;
        if (fl_cli_parse_u64(&x, val) || x > (1ull << 30)) BAD();
        c->data_len = x;
    } else if (!strcmp(flag, "--trigger-rate")) {
        NEED();
        if (pf(&c->trigger_rate, val)) BAD();
    } else if (!strcmp(flag, "--trigger-len")) {
        NEED();
        if (pu32(&c->trigger_len, val, 1, 64)) BAD();
    } else if (!strcmp(flag, "--log-every")) {
        NEED();
        if (pu32(&c->log_every, val, 1, 100000000)) BAD();
    } else if (!strcmp(flag, "--ckpt-every")) {
        NEED();
        if (pu32(&c->ckpt_every, val, 1, 100000000)) BAD();
    } else if (!strcmp(flag, "--div-margin")) {
        NEED();
        if (pf(&c->div_margin, val)) BAD();
    } else if (!strcmp(flag, "--div-window")) {
        NEED();
        if (pu32(&c->div_window, val, 1, 100000000)) BAD();
    } else if (!strcmp(flag, "--div-ema")) {
        NEED();
        if (pf(&c->div_ema, val)) BAD();
    } else {
        *used = 0;
        if (!strcmp(flag, "--pow2")) r->pow2 = 1;
        else if (!strcmp(flag, "--fp8-adam")) r->fp8_adam = 1;
        else if (!strcmp(flag, "--grad-sr")) r->grad_sr = 1;
        else if (!strcmp(flag, "--no-grad-sr")) r->grad_sr = 0;
        else if (!strcmp(flag, "--no-pow2")) r->pow2 = 0;
        else if (!strcmp(flag, "--fast-accum")) r->fast_accum = 1;
        else if (!strcmp(flag, "--no-stop-on-divergence")) c->stop_on_div = 0;
        else if (!strcmp(flag, "--bos")) c->bos = 1, m->V = 257;
        else return 1;
    }
#undef NEED
#undef BAD
    return 0;
}

/* Append printf output to buf (size n, used *w), tracking overflow in *w > n - 1. */
__attribute__((format(printf, 4, 5))) static void addf(char *buf, size_t n, size_t *w, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const int k = *w < n ? vsnprintf(buf + *w, n - *w, fmt, ap) : 0;
    va_end(ap);
    *w += k > 0 ? (size_t)k : 0;
}

/* Append " FLAG V" with V (k bytes) quoted for sh (fl_cli_sh_quote). */
static void addq(char *buf, size_t n, size_t *w, const char *flag, const char *v, size_t k)
{
    addf(buf, n, w, " %s ", flag);
    *w += fl_cli_sh_quote(*w < n ? buf + *w : NULL, *w < n ? n - *w : 0, v, k);
}

int fl_train_cfg_args(char *buf, size_t n, const fl_train_cfg *c)
{
    const fl_model_cfg *m = &c->model;
    const fl_recipe_cfg *r = &c->recipe;
    size_t w = 0;
    if (n)
        buf[0] = 0;
    addf(buf, n, &w, "--act %s --recipe %s --steps %llu --seed %llu", fl_act_name(m->act),
         fl_recipe_name((fl_recipe_kind)r->kind), (unsigned long long)c->steps, (unsigned long long)c->seed);
    addf(buf, n, &w, " --width %u --layers %u --heads %u --ffn %u --seq %u --batch %u --init-std %.9g", m->C, m->L, m->H,
         m->F, m->T, m->B, m->init_std);
    addf(buf, n, &w, " --lr %.9g --lr-min %.9g --schedule %s --warmup %u --wd %.9g --beta1 %.9g --beta2 %.9g --adam-eps %.9g --clip %.9g",
         c->lr, c->lr_min_frac, c->schedule == FL_SCHED_COSINE ? "cosine" : "constant", c->warmup, c->wd, c->beta1,
         c->beta2, c->adam_eps, c->clip);
    addf(buf, n, &w, " --amax-history %u --amax-algo %s --margin %d --fp8-overflow %s", r->history,
         fl_amax_algo_name((fl_amax_algo)r->algo), r->margin, r->nosat ? "nan" : "saturate");
    if (r->pow2) addf(buf, n, &w, " --pow2");
    if (r->fp8_adam) addf(buf, n, &w, " --fp8-adam");
    if (r->fast_accum) addf(buf, n, &w, " --fast-accum");
    if (r->grad_current) addf(buf, n, &w, " --grad-scaling current");
    if (r->fp8_start) addf(buf, n, &w, " --fp8-start %u", r->fp8_start);
    if (r->grad_sr) addf(buf, n, &w, " --grad-sr");
    for (const char *p = r->sites; *p;) {
        const size_t k = strcspn(p, ";");
        addq(buf, n, &w, "--site", p, k);
        p += k + (p[k] == ';');
    }
    if (c->data_kind == FL_DATA_TEXT)
        addq(buf, n, &w, "--data", c->data_path, strlen(c->data_path));
    else if (c->data_kind == FL_DATA_FORTUNES)
        addf(buf, n, &w, " --data fortunes");
    else
        addf(buf, n, &w, " --data %s --data-len %llu", c->data_kind == FL_DATA_TRIGGERS ? "triggers" : "synthetic",
             (unsigned long long)c->data_len);
    if ((c->data_kind == FL_DATA_TEXT || c->data_kind == FL_DATA_FORTUNES) && c->data_len != (1u << 20))
        addf(buf, n, &w, " --data-len %llu", (unsigned long long)c->data_len); /* unused by text, but part of the
                                                                                   configuration a resume compares */
    if (c->data_kind == FL_DATA_TRIGGERS)
        addf(buf, n, &w, " --trigger-rate %.9g --trigger-len %u", c->trigger_rate, c->trigger_len);
    addf(buf, n, &w, " --log-every %u --ckpt-every %u --div-margin %.9g --div-window %u --div-ema %.9g", c->log_every,
         c->ckpt_every, c->div_margin, c->div_window, c->div_ema);
    if (!c->stop_on_div) addf(buf, n, &w, " --no-stop-on-divergence");
    if (c->bos) addf(buf, n, &w, " --bos");
    if (c->chan_every) addf(buf, n, &w, " --chan-every %u", c->chan_every);
    for (uint32_t k = 0; k < c->keep_n; k++)
        addf(buf, n, &w, "%s%llu", k ? "," : " --keep-ckpt ", (unsigned long long)c->keep[k]);
    if (c->fork_from[0]) addq(buf, n, &w, "--fork", c->fork_from, strlen(c->fork_from));
    if (c->decor_k) addf(buf, n, &w, " --decorrelate %s:%u", fl_decor_name((int)c->decor_mode), c->decor_k);
    return w < n ? 0 : -1;
}

/* The first field where two configurations differ, for the mismatch message. */
static const char *cfg_diff(const fl_train_cfg *a, const fl_train_cfg *b)
{
    if (memcmp(&a->model.act, &b->model.act, sizeof a->model.act)) return "--act";
    if (memcmp(&a->model, &b->model, sizeof a->model)) return "a model flag (--width/--layers/--heads/--ffn/--seq/--batch/--init-std)";
    if (memcmp(&a->recipe, &b->recipe, sizeof a->recipe)) return "a recipe flag (--recipe/--amax-*/--margin/--pow2/--fp8-*/--grad-*/--site)";
    if (a->steps != b->steps) return "--steps";
    if (a->seed != b->seed) return "--seed";
    if (!fl_train_same_data(a, b))
        return "--data";
    return "an optimizer, logging or divergence flag";
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
        fprintf(stderr, "fp8lab train: %s/checkpoint.bin: checkpoint refused: %s differs from the run's configuration "
                        "(resume takes the configuration from the checkpoint; start a new run with --out for a different one)\n",
                resume, cfg_diff(&cfg, &ck));
        return FL_EXIT_FAIL;
    }
    const char *why = fl_train_cfg_check(&cfg);
    if (why)
        return fl_cli_usage_error(cmd, "%s", why);
    if (fork && (why = fl_train_fork_mismatch(&parent, &cfg)) != NULL)
        return fl_cli_usage_error(cmd, "a fork cannot change %s", why);
    return fl_train_run(&cfg, &opts);
}
