/* cmd_demo.c — `fp8lab demo`: the FP8 SwiGLU instability reproduction.
 *
 * One configuration, one seed, three runs (experiments/train/TRAINING.md explains the choices):
 *   swiglu        bf16           the control
 *   swiglu        fp8-delayed    delayed per-tensor scaling of X and W (history 1024, max, margin 0),
 *                                 non-saturating casts, dY scaled from the current tensor, FP8 from
 *                                 step 200 (the levers are explained in TRAINING.md)
 *   smooth_swiglu fp8-delayed    the same FP8 recipe with per-channel smoothing of the SwiGLU output
 * The runs are independent processes (one thread each: three runs on a small machine finish
 * sooner side by side than one after another with all threads).  Afterwards the demo reads each
 * run's summary.json and metrics.csv -- measured telemetry only -- and checks the required outcome:
 *   the SwiGLU FP8 run diverges (train.h's criterion), the BF16 control and the Smooth-SwiGLU FP8
 *   run do not, and Smooth-SwiGLU's final loss is within 5% of BF16's;
 * and reports the causal chain: gate/up alignment at the start and end, the growth of the SwiGLU
 * output's amax against its input's (log-log slope), the first saturation at the down
 * projection's input cast, the largest staleness of its delayed scale (amax now / the amax the
 * scale came from: what a cast must survive) and the divergence step.  The readable summary is
 * printed and written to OUT/summary.txt.  Exit status 0 when the outcome holds, 3
 * (a failed gate) when it does not: the numbers are printed either way.
 */
#include "cli/cli.h"
#include "train.h"

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
    "usage: fp8lab demo [--out DIR] [--json FILE] [--long] [--sequential] [train options]\n"
    "\n"
    "Reproduces the FP8 SwiGLU instability (Fishman et al., ICLR 2025) on a CPU: from one seed and one\n"
    "configuration it trains SwiGLU in bf16, SwiGLU in fp8-delayed and Smooth-SwiGLU in the same FP8\n"
    "recipe, then reports from the measured telemetry whether SwiGLU/FP8 diverged while the others\n"
    "did not, and the causal chain (alignment, amax growth, saturation before divergence).\n"
    "  --out DIR      run folders, plots and demo.json go here (default demo-out)\n"
    "  --json FILE    also write {\"runs\": [{act, recipe, diverged, diverged_step, final_loss,\n"
    "                 alignment_start, alignment_end, amax_max, saturated_total}, ...]} to FILE\n"
    "  --long         the same experiment for hours (more steps; same configuration otherwise)\n"
    "  --sequential   run the three trainings one after another with all threads\n"
    "  train options  any 'fp8lab train' option changes all three runs alike (ablations), e.g.\n"
    "                 --wd 0, --margin 1, --amax-history 16, --data triggers, --seed 2, --steps N;\n"
    "                 TransformerEngine's DelayedScaling defaults (saturating casts, dY delayed, FP8 from\n"
    "                 step 0): --fp8-overflow saturate --grad-scaling delayed --fp8-start 0\n"
    "                 --recipe R replaces fp8-delayed in the two FP8 runs (fp8-current, fp8-block, mxfp8)\n"
    "Exit status: 0 the outcome was reproduced, 3 it was not (numbers printed either way).\n";

/* The demo's configuration (TRAINING.md: why each lever). */
static void demo_preset(fl_train_cfg *c, int lng)
{
    fl_train_cfg_default(c);
    c->model.C = 64;
    c->model.L = 2;
    c->model.H = 4;
    c->model.F = 256;
    c->model.T = 64;
    c->model.B = 16;
    c->lr = 3e-3f;
    c->wd = 1.0f;
    c->schedule = FL_SCHED_CONSTANT;
    c->warmup = 100;
    c->steps = lng ? 40000 : 2000;
    c->seed = 1;
    c->recipe.kind = FL_RECIPE_FP8_DELAYED;
    c->recipe.history = 1024;
    c->recipe.algo = FL_AMAX_MAX;
    c->recipe.margin = 0;
    /* the three recipe levers (TRAINING.md, "The reproduction"): casts that overflow to NaN/Inf as
       PyTorch eager's and ml_dtypes' do; dY scaled from the current tensor (the e5m2 gradients jump
       x2-7 over any history during the loss drop and would kill both FP8 runs first); and the first
       200 steps in bf16 while the amax histories fill (the early batch-to-batch noise of every tensor
       exceeds the 3.6% headroom of a margin-0 e4m3 cast) */
    c->recipe.nosat = 1;
    c->recipe.grad_current = 1;
    c->recipe.fp8_start = 200;
    c->log_every = 20;
    c->ckpt_every = lng ? 2000 : 1000000;
}

/* Path buffers.  A run folder is OUT/NAME, a file in it OUT/NAME/FILE, a file of the demo OUT/FILE;
   OUT comes from --out.  A path the kernel accepts is at most PATH_MAX (4096) bytes, so every
   usable one fits PATH_MAX plus the run name, the file name (metrics.csv, summary.json: under
   32 bytes each) and their slashes; a longer OUT is truncated by snprintf and fails to open, as
   it would unshortened. */
enum {
    DEMO_NAME_MAX = 32,                           /* a run's folder name (runs[]), a file's name */
    DEMO_DIR_MAX = PATH_MAX + DEMO_NAME_MAX,      /* OUT/NAME */
    DEMO_FILE_MAX = DEMO_DIR_MAX + DEMO_NAME_MAX, /* OUT/NAME/FILE and OUT/FILE */
};

typedef struct {
    const char *name; /* folder, shorter than DEMO_NAME_MAX */
    fl_act act;
    int fp8;
} demo_run;

static const demo_run runs[3] = {
    { "swiglu-bf16", { FL_ACT_SWIGLU, 0 }, 0 },
    { "swiglu-fp8", { FL_ACT_SWIGLU, 0 }, 1 },
    { "smooth_swiglu-fp8", { FL_ACT_SMOOTH_SWIGLU, 0 }, 1 },
};

typedef struct {
    json_t *sum;   /* summary.json */
    double slope;  /* log-log slope of act_amax vs ffn_in_amax */
    double in_growth, act_growth; /* amax end / start (first and last 5% of steps, medians) */
    uint64_t sat_before_div;      /* saturated elements at down.in before the divergence step */
    double stale_max;             /* max over steps of down.in amax / the amax its scale came from */
    long stale_step;              /* the step where it was reached */
    long nrows;
} demo_result;

static int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, long n)
{
    if (n <= 0)
        return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}

/* Read metrics.csv: the amax-growth statistics (finite rows only, before any divergence). */
static int analyse_metrics(demo_result *r, const char *dir, long div_step)
{
    char p[DEMO_FILE_MAX];
    snprintf(p, sizeof p, "%s/metrics.csv", dir);
    FILE *f = fopen(p, "r");
    if (!f)
        return -1;
    char line[2048];
    long cap = 1024, n = 0;
    double *xin = malloc((size_t)cap * sizeof *xin), *xact = malloc((size_t)cap * sizeof *xact);
    if (!fgets(line, sizeof line, f)) { /* header */
        fclose(f);
        free(xin);
        free(xact);
        return -1;
    }
    r->sat_before_div = 0;
    r->stale_max = 0.0;
    r->stale_step = -1;
    while (fgets(line, sizeof line, f)) {
        double v[20];
        int k = 0;
        char *s = line;
        while (k < 20) {
            v[k++] = strtod(s, &s);
            if (*s != ',')
                break;
            s++;
        }
        if (k < 15)
            continue;
        const long step = (long)v[0];
        if (div_step >= 0 && step > div_step)
            break;
        /* the divergence step's casts happened before its loss: their staleness is the cause, counted */
        if (v[13] > r->stale_max) {
            r->stale_max = v[13];
            r->stale_step = step;
        }
        if (div_step >= 0 && step == div_step)
            break;
        r->sat_before_div += (uint64_t)v[14];
        if (!(v[5] > 0) || !(v[6] > 0) || !isfinite(v[5]) || !isfinite(v[6]))
            continue;
        if (n == cap) {
            cap *= 2;
            xin = realloc(xin, (size_t)cap * sizeof *xin);
            xact = realloc(xact, (size_t)cap * sizeof *xact);
        }
        xin[n] = log(v[5]);
        xact[n] = log(v[6]);
        n++;
    }
    fclose(f);
    r->nrows = n;
    /* least-squares slope of log act vs log in */
    double mx = 0, my = 0;
    for (long i = 0; i < n; i++) {
        mx += xin[i];
        my += xact[i];
    }
    mx /= (double)(n ? n : 1);
    my /= (double)(n ? n : 1);
    double sxy = 0, sxx = 0;
    for (long i = 0; i < n; i++) {
        sxy += (xin[i] - mx) * (xact[i] - my);
        sxx += (xin[i] - mx) * (xin[i] - mx);
    }
    r->slope = sxx > 0 ? sxy / sxx : NAN;
    const long w = n / 20 > 0 ? n / 20 : 1;
    if (n >= 2 * w) {
        double *t = malloc((size_t)w * sizeof *t);
        for (long i = 0; i < w; i++) t[i] = xin[i];
        const double in0 = median(t, w);
        for (long i = 0; i < w; i++) t[i] = xin[n - w + i];
        const double in1 = median(t, w);
        for (long i = 0; i < w; i++) t[i] = xact[i];
        const double a0 = median(t, w);
        for (long i = 0; i < w; i++) t[i] = xact[n - w + i];
        const double a1 = median(t, w);
        free(t);
        r->in_growth = exp(in1 - in0);
        r->act_growth = exp(a1 - a0);
    } else {
        r->in_growth = r->act_growth = NAN;
    }
    free(xin);
    free(xact);
    return 0;
}

/* The readable summary goes to stdout and to OUT/summary.txt. */
static FILE *summary_file;

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

/* A number member of a summary.json object, NaN when absent or not a number. */
static double json_get_number(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* A JSON number, or null where it is not finite (JSON has no NaN or Inf). */
static json_t *json_number_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

/* What the command line asked for, and the three runs' configurations and folders. */
typedef struct {
    const char *out, *json_path;
    int sequential, threads;
    fl_train_cfg base;
    fl_train_cfg cfgs[3];
    char dirs[3][DEMO_DIR_MAX];
} demo_setup;

enum { DEMO_GO_ON = -1 }; /* demo_parse: no exit status yet, run the demo */

/* Parse the command line into d: DEMO_GO_ON, or the exit status (--help, a usage error). */
static int demo_parse(demo_setup *d, int argc, char **argv)
{
    const char *cmd = "demo";
    int lng = 0;
    d->out = "demo-out";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(help, stdout);
            return FL_EXIT_OK;
        }
        if (!strcmp(argv[i], "--long"))
            lng = 1;
    }
    demo_preset(&d->base, lng);
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "--long"))
            continue;
        if (!strcmp(f, "--sequential")) {
            d->sequential = 1;
            continue;
        }
        if (!strcmp(f, "--out") || !strcmp(f, "--json") || !strcmp(f, "--threads")) {
            if (!v)
                return fl_cli_usage_error(cmd, "%s needs a value", f);
            if (!strcmp(f, "--out"))
                d->out = v;
            else if (!strcmp(f, "--json"))
                d->json_path = v;
            else {
                unsigned long long x;
                if (fl_cli_parse_u64(&x, v) || x < 1 || x > 256)
                    return fl_cli_usage_error(cmd, "--threads needs a count 1..256");
                d->threads = (int)x;
            }
            i++;
            continue;
        }
        if (!strcmp(f, "--act") || !strcmp(f, "--out") || !strcmp(f, "--resume"))
            return fl_cli_usage_error(cmd, "%s is fixed by the demo", f);
        int used = 0;
        const int r = fl_train_parse_flag(&d->base, cmd, f, v, &used);
        if (r == 2)
            return FL_EXIT_USAGE;
        if (r == 1)
            return fl_cli_usage_error(cmd, "unknown option '%s'", f);
        i += used;
    }
    if (!fl_recipe_is_fp8((fl_recipe_kind)d->base.recipe.kind))
        return fl_cli_usage_error(cmd, "--recipe must be an FP8 recipe (it replaces fp8-delayed in the FP8 runs)");
    if (d->base.recipe.kind != FL_RECIPE_FP8_DELAYED)
        d->base.recipe.grad_current = 0; /* the preset's per-role dY scaling is fp8-delayed's option */
    const char *why = fl_train_cfg_check(&d->base);
    if (why)
        return fl_cli_usage_error(cmd, "%s", why);
    return DEMO_GO_ON;
}

/* The three runs: base with the run's activation; the control in bf16 without the FP8 options. */
static void demo_configure(demo_setup *d)
{
    for (int k = 0; k < 3; k++) {
        d->cfgs[k] = d->base;
        d->cfgs[k].model.act = runs[k].act;
        if (!runs[k].fp8) {
            d->cfgs[k].recipe.kind = FL_RECIPE_BF16;
            d->cfgs[k].recipe.grad_current = 0; /* options of the FP8 recipes */
            d->cfgs[k].recipe.fp8_start = 0;
        }
        snprintf(d->dirs[k], sizeof d->dirs[k], "%s/%s", d->out, runs[k].name);
    }
}

static void demo_announce(const demo_setup *d)
{
    const fl_train_cfg *b = &d->base;
    say("fp8lab demo: seed %llu, %llu steps, d_model %u, %u layers, ffn %u, seq %u, batch %u, lr %g constant, "
           "wd %g, %s (history %u, %s, margin %d, %s casts%s; FP8 from step %u)\n",
           (unsigned long long)b->seed, (unsigned long long)b->steps, b->model.C, b->model.L, b->model.F,
           b->model.T, b->model.B, b->lr, b->wd, fl_recipe_name((fl_recipe_kind)b->recipe.kind),
           b->recipe.history, fl_amax_algo_name((fl_amax_algo)b->recipe.algo), b->recipe.margin,
           b->recipe.nosat ? "non-saturating (overflow -> NaN/Inf)" : "saturating",
           b->recipe.grad_current ? "; dY scaled from the current tensor" : "", b->recipe.fp8_start);
    say("  runs: swiglu/bf16, swiglu/%s, smooth_swiglu/%s -> %s/\n", fl_recipe_name((fl_recipe_kind)b->recipe.kind),
           fl_recipe_name((fl_recipe_kind)b->recipe.kind), d->out);
    fflush(stdout);
}

/* One progress line on stderr: the rows of each run's metrics.csv so far. */
static void demo_progress(const demo_setup *d)
{
    fprintf(stderr, "\r  progress:");
    for (int k = 0; k < 3; k++) {
        char p[DEMO_FILE_MAX];
        snprintf(p, sizeof p, "%s/metrics.csv", d->dirs[k]);
        FILE *f = fopen(p, "r");
        long rows = -1;
        if (f) {
            int c;
            while ((c = getc(f)) != EOF)
                rows += c == '\n';
            fclose(f);
        }
        fprintf(stderr, "  %s %ld/%llu", runs[k].name, rows < 0 ? 0 : rows, (unsigned long long)d->base.steps);
    }
    fflush(stderr);
}

/* The three runs as child processes, side by side (one thread each unless --threads).  Every child
   that was started is waited for, also when a later fork fails: those are asked to stop (SIGTERM:
   a checkpoint, then a clean exit, train.h) so that none is left running or unreaped.  Returns 0
   when all three exited with status 0, 1 when one did not, -1 when a fork failed (message printed). */
static int demo_train_forked(const demo_setup *d)
{
    pid_t pid[3];
    int started = 0, failed = 0;
    for (; started < 3; started++) {
        fflush(NULL);
        pid[started] = fork();
        if (pid[started] < 0) {
            fprintf(stderr, "fp8lab demo: fork failed: %s\n", strerror(errno));
            for (int k = 0; k < started; k++)
                kill(pid[k], SIGTERM);
            failed = -1;
            break;
        }
        if (pid[started] == 0) {
            fl_train_opts o = { d->dirs[started], d->threads ? d->threads : 1, 1, 0 };
            _exit(fl_train_run(&d->cfgs[started], &o));
        }
    }
    const int tty = !failed && isatty(2);
    int left = started;
    while (left) {
        int st;
        const pid_t w = waitpid(-1, &st, tty ? WNOHANG : 0);
        if (w > 0) {
            left--;
            if ((!WIFEXITED(st) || WEXITSTATUS(st) != 0) && !failed)
                failed = 1;
            continue;
        }
        if (w < 0)
            break;
        demo_progress(d);
        sleep(2);
    }
    if (tty)
        fputc('\n', stderr);
    return failed;
}

/* Train the three runs; *wall is the wall time they took.  Returns 0 when all three succeeded, 1
   when one failed, -1 when they could not be started. */
static int demo_train(const demo_setup *d, double *wall)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int failed = 0;
    if (d->sequential) {
        for (int k = 0; k < 3; k++) {
            fl_train_opts o = { d->dirs[k], d->threads, 0, 0 };
            if (fl_train_run(&d->cfgs[k], &o) != FL_EXIT_OK)
                failed = 1;
        }
    } else {
        failed = demo_train_forked(d);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *wall = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return failed;
}

/* Read back each run's summary.json and analyse its metrics.csv.  Returns 0, or -1 (message
   printed; the summaries read so far are released). */
static int demo_read_results(const demo_setup *d, demo_result res[3])
{
    memset(res, 0, 3 * sizeof *res);
    for (int k = 0; k < 3; k++) {
        char p[DEMO_FILE_MAX];
        snprintf(p, sizeof p, "%s/summary.json", d->dirs[k]);
        json_error_t je;
        res[k].sum = json_load_file(p, 0, &je);
        if (!res[k].sum) {
            fprintf(stderr, "fp8lab demo: %s: %s\n", p, je.text);
            for (int j = 0; j < k; j++)
                json_decref(res[j].sum);
            return -1;
        }
        const long ds = json_is_true(json_object_get(res[k].sum, "diverged"))
                            ? (long)json_get_number(res[k].sum, "diverged_step") : -1;
        analyse_metrics(&res[k], d->dirs[k], ds);
    }
    return 0;
}

/* The per-run record of demo.json. */
static json_t *demo_run_json(const demo_setup *d, int k, const demo_result *r)
{
    json_t *s = r->sum;
    const int dv = json_is_true(json_object_get(s, "diverged"));
    json_t *o = json_object();
    json_object_set_new(o, "act", json_string(fl_act_name(d->cfgs[k].model.act)));
    json_object_set_new(o, "recipe", json_string(fl_recipe_name((fl_recipe_kind)d->cfgs[k].recipe.kind)));
    json_object_set_new(o, "diverged", json_boolean(dv));
    json_object_set_new(o, "diverged_step", dv ? json_integer((json_int_t)json_get_number(s, "diverged_step")) : json_null());
    json_object_set_new(o, "final_loss", json_number_or_null(json_get_number(s, "final_loss")));
    json_object_set_new(o, "alignment_start", json_number_or_null(json_get_number(s, "alignment_start")));
    json_object_set_new(o, "alignment_end", json_number_or_null(json_get_number(s, "alignment_end")));
    json_object_set_new(o, "amax_max", json_number_or_null(json_get_number(s, "amax_max")));
    json_object_set_new(o, "saturated_total", json_integer((json_int_t)json_get_number(s, "saturated_total")));
    json_object_set_new(o, "down_in_saturated_total", json_integer((json_int_t)json_get_number(s, "down_in_saturated_total")));
    json_object_set_new(o, "down_in_saturated_before_divergence", json_integer((json_int_t)r->sat_before_div));
    json_object_set_new(o, "first_down_in_saturation_step", json_incref(json_object_get(s, "first_down_in_saturation_step")));
    json_object_set_new(o, "nan_produced_total", json_integer((json_int_t)json_get_number(s, "nan_produced_total")));
    json_object_set_new(o, "amax_loglog_slope", json_number_or_null(r->slope));
    json_object_set_new(o, "down_in_staleness_max", json_number_or_null(r->stale_max));
    json_object_set_new(o, "ffn_in_amax_growth", json_number_or_null(r->in_growth));
    json_object_set_new(o, "act_amax_growth", json_number_or_null(r->act_growth));
    json_object_set_new(o, "steps_done", json_incref(json_object_get(s, "steps_done")));
    json_object_set_new(o, "steps_per_s", json_incref(json_object_get(s, "steps_per_s")));
    json_object_set_new(o, "dir", json_string(d->dirs[k]));
    return o;
}

/* The table of the three runs (say) and their demo.json records (returned array). */
static json_t *demo_table(const demo_setup *d, const demo_result res[3])
{
    json_t *jr = json_array();
    say("\n%-14s %-12s %-9s %-8s %-10s %-9s %-9s %-9s %-7s %-10s %-10s\n", "act", "recipe", "diverged", "at step",
           "final loss", "align 0", "align end", "amax max", "slope", "sat(down)", "sat(all)");
    for (int k = 0; k < 3; k++) {
        json_t *s = res[k].sum;
        const int dv = json_is_true(json_object_get(s, "diverged"));
        json_array_append_new(jr, demo_run_json(d, k, &res[k]));
        char at[32] = "-";
        if (dv)
            snprintf(at, sizeof at, "%lld", (long long)json_get_number(s, "diverged_step"));
        say("%-14s %-12s %-9s %-8s %-10.4f %-9.3f %-9.3f %-9.4g %-7.2f %-10lld %-10lld\n", fl_act_name(d->cfgs[k].model.act),
               fl_recipe_name((fl_recipe_kind)d->cfgs[k].recipe.kind), dv ? "YES" : "no", at, json_get_number(s, "final_loss"),
               json_get_number(s, "alignment_start"), json_get_number(s, "alignment_end"), json_get_number(s, "amax_max"), res[k].slope,
               (long long)json_get_number(s, "down_in_saturated_total"), (long long)json_get_number(s, "saturated_total"));
    }
    return jr;
}

/* The required outcome and the causal chain (say).  Returns whether the outcome holds; *rel is
   Smooth-SwiGLU's final loss relative to BF16's, *la the load averages at the end. */
static int demo_verdict(const demo_setup *d, const demo_result res[3], double wall, double *rel, double la[3])
{
    const int d_bf = json_is_true(json_object_get(res[0].sum, "diverged"));
    const int d_sw = json_is_true(json_object_get(res[1].sum, "diverged"));
    const int d_sm = json_is_true(json_object_get(res[2].sum, "diverged"));
    const double l_bf = json_get_number(res[0].sum, "final_loss"), l_sm = json_get_number(res[2].sum, "final_loss");
    *rel = fabs(l_sm - l_bf) / l_bf;
    const int ok = d_sw && !d_bf && !d_sm && isfinite(*rel) && *rel <= 0.05;
    say("\n  SwiGLU/FP8 %s", d_sw ? "diverged" : "did NOT diverge");
    if (d_sw)
        say(" at step %lld (%s)", (long long)json_get_number(res[1].sum, "diverged_step"),
               json_string_value(json_object_get(res[1].sum, "divergence")));
    say("; BF16 control %s; Smooth-SwiGLU/FP8 %s; Smooth vs BF16 final loss %+.2f%%\n",
           d_bf ? "DIVERGED" : "stable", d_sm ? "DIVERGED" : "stable", 100.0 * (l_sm - l_bf) / l_bf);
    char *first_sat = json_is_integer(json_object_get(res[1].sum, "first_down_in_saturation_step"))
                          ? json_dumps(json_object_get(res[1].sum, "first_down_in_saturation_step"), JSON_ENCODE_ANY)
                          : strdup("none");
    say("  chain (SwiGLU/FP8): alignment |cos| p99 %.3f -> %.3f; SwiGLU-output amax grew x%.3g while its input's grew x%.3g "
           "(log-log slope %.2f); %llu saturated down-projection inputs %s, the first at step %s\n",
           json_get_number(res[1].sum, "alignment_start"), json_get_number(res[1].sum, "alignment_end"), res[1].act_growth, res[1].in_growth,
           res[1].slope, (unsigned long long)res[1].sat_before_div, d_sw ? "before the divergence" : "in the run",
           first_sat);
    if (d_sw)
        say("  the same chain in the BF16 control, whole run: alignment |cos| p99 %.3f -> %.3f; SwiGLU-output amax "
            "grew x%.3g while its input's grew x%.3g\n",
            json_get_number(res[0].sum, "alignment_start"), json_get_number(res[0].sum, "alignment_end"), res[0].act_growth,
            res[0].in_growth);
    free(first_sat);
    const int margin = d->base.recipe.margin;
    say("  staleness (SwiGLU/FP8): the down-projection input outgrew the amax its delayed scale came from by at most "
        "x%.3g (step %ld); with margin %d a saturating cast clips above x%g, a non-saturating one gives NaN/Inf "
        "above x%.3g\n",
        res[1].stale_max, res[1].stale_step, margin, ldexp(1.0, margin), ldexp(464.0 / 448.0, margin));
    la[0] = la[1] = la[2] = -1;
    if (getloadavg(la, 3) < 0)
        la[0] = la[1] = la[2] = -1;
    say("  outcome: %s   (%.0f s wall, load average %.2f %.2f %.2f at the end; plots in %s/*.png; %s casts)\n",
        ok ? "REPRODUCED" : "NOT reproduced", wall, la[0], la[1], la[2], d->out,
        d->base.recipe.nosat ? "non-saturating" : "saturating");
    return ok;
}

/* OUT/demo.json, and --json FILE: 0, or -1 (message printed). */
static int demo_write_json(const demo_setup *d, json_t *jr, int ok, double rel, double wall, double load)
{
    json_t *doc = json_object();
    json_object_set_new(doc, "runs", jr);
    json_object_set_new(doc, "reproduced", json_boolean(ok));
    json_object_set_new(doc, "smooth_vs_bf16_final_loss_rel", json_number_or_null(rel));
    json_object_set_new(doc, "wall_s", json_real(wall));
    json_object_set_new(doc, "load_average_end", json_real(load));
    json_object_set_new(doc, "divergence_criterion",
                        json_string("non-finite loss, or loss EMA above its running minimum by more than div_margin nats "
                                    "for div_window consecutive steps (experiments/train/train.h)"));
    char jp[DEMO_FILE_MAX];
    snprintf(jp, sizeof jp, "%s/demo.json", d->out);
    int jerr = json_dump_file(doc, jp, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
    if (d->json_path)
        jerr |= json_dump_file(doc, d->json_path, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
    json_decref(doc);
    if (jerr) {
        fprintf(stderr, "fp8lab demo: cannot write %s\n", d->json_path ? d->json_path : jp);
        return -1;
    }
    return 0;
}

static void close_summary_file(void)
{
    if (summary_file) {
        fclose(summary_file);
        summary_file = NULL;
    }
}

int fl_cmd_demo(int argc, char **argv)
{
    fl_blas_setup(argv - 1);
    demo_setup d;
    memset(&d, 0, sizeof d);
    const int prc0 = demo_parse(&d, argc, argv);
    if (prc0 != DEMO_GO_ON)
        return prc0;
    if (mkdir(d.out, 0755) && errno != EEXIST) {
        fprintf(stderr, "fp8lab demo: %s: cannot create: %s\n", d.out, strerror(errno));
        return FL_EXIT_FAIL;
    }
    char sp[DEMO_FILE_MAX];
    snprintf(sp, sizeof sp, "%s/summary.txt", d.out);
    summary_file = fopen(sp, "w");
    demo_configure(&d);
    demo_announce(&d);

    double wall;
    demo_result res[3];
    const int failed = demo_train(&d, &wall);
    if (failed) {
        if (failed > 0)
            fprintf(stderr, "fp8lab demo: a training run failed (see the messages above)\n");
        close_summary_file();
        return FL_EXIT_FAIL;
    }
    if (demo_read_results(&d, res)) {
        close_summary_file();
        return FL_EXIT_FAIL;
    }
    char *plot_runs[3] = { d.dirs[0], d.dirs[1], d.dirs[2] };
    char title[256];
    snprintf(title, sizeof title, "demo seed %llu:", (unsigned long long)d.base.seed);
    const int prc = fl_plot_runs(d.out, title, 3, plot_runs);

    json_t *jr = demo_table(&d, res);
    double rel, la[3];
    const int ok = demo_verdict(&d, res, wall, &rel, la);
    close_summary_file();
    const int jerr = demo_write_json(&d, jr, ok, rel, wall, la[0]);
    for (int k = 0; k < 3; k++)
        json_decref(res[k].sum);
    if (jerr)
        return FL_EXIT_FAIL;
    if (prc != FL_EXIT_OK)
        return prc;
    return ok ? FL_EXIT_OK : FL_EXIT_GATE;
}
