/* cmd_mechanism.c — `fp8lab mechanism`: the paper's causal chain measured link by link (TRAINING.md,
 * "The mechanism"): BF16 trajectories with per-channel telemetry and kept checkpoints, FP8 forks
 * at 1, 2, 4, 8 weight-decay timescales, interventions at the 2-tau fork (decorrelation of the
 * most aligned / random channels, weight decay off), the weight-decay dose-response; and
 * `--judge-search DIR`, the late-regime criterion over the lever search's folders
 * (mechanism_search.sh).
 *
 * Runs are child processes (one thread each, --jobs at a time), each a `train` run folder under
 * OUT; a fork starts when its parent has finished.  Rerunning the command after an interruption
 * (SIGINT, SIGTERM, SIGKILL) skips finished runs, resumes interrupted ones from their checkpoints
 * and starts the rest: the outputs are those of an uninterrupted run.
 */
#include "attrib.h"
#include "channels.h"
#include "commands.h"
#include "common/cli.h"
#include "common/gnuplot.h"
#include "fl_io.h"
#include "fl_json.h"
#include "mech.h"
#include "rundir.h"
#include "train.h"
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
    "usage: fp8lab mechanism [--out DIR] [--jobs N] [--horizon-tau X] [--decor-k K] [train options]\n"
    "       fp8lab mechanism --judge-search DIR\n"
    "\n"
    "The FP8 SwiGLU instability's causal chain (Fishman et al., ICLR 2025), measured link by link on\n"
    "the demo's model (lr 3e-3 constant after 100 warm-up steps, wd 1: tau = 1/(lr wd) = 333 steps):\n"
    "  trajectories  BF16 SwiGLU and parameter-matched GeLU (F x 1.5) to --horizon-tau (16), with\n"
    "                per-channel telemetry (channels.csv, records.csv) and checkpoints kept at 1 2 4 8 tau;\n"
    "                SwiGLU also at wd 0, 0.1, 0.3 (the dose-response)\n"
    "  forks         FP8 under the paper's recipe from each kept checkpoint, judged against the BF16\n"
    "                continuation (verdict.h's measure)\n"
    "  interventions at the 2-tau fork, BF16 and FP8: the K most aligned channels decorrelated, K random\n"
    "                channels decorrelated, weight decay off\n"
    "Then the predictions of TRAINING.md are judged from the measured data, with the attribution\n"
    "(attrib.h) of the SwiGLU and GeLU trajectories, and plotted.  Resumable: run it again.\n"
    "\n"
    "  --out DIR         output folder (default mechanism-out)\n"
    "  --jobs N          runs at a time, one thread each (default: the cores online)\n"
    "  --horizon-tau X   length of the trajectories in weight-decay timescales (16)\n"
    "  --decor-k K       channels per layer the interventions change (default: 2% of F, at least 1)\n"
    "  train options     change every run alike: the levers of the late-regime search, e.g. --bos\n"
    "                    --data fortunes --width 128 --layers 4 --ffn 512 (SwiGLU's F) --seed S\n"
    "  --judge-search DIR  the late-regime criterion (P0) over mechanism_search.sh's folders\n"
    "P3 (the FP8 forks fail) needs the paper's cause: when P0 (the late regime, the demo's precondition)\n"
    "did not hold, P3 is INCONCLUSIVE, not FAILED.\n"
    "Outputs: OUT/mechanism.json, summary.txt, dose.csv, staleness.csv, *.png.  Exit status 0 when every prediction\n"
    "held, 3 when one failed, 4 when none failed and one was inconclusive (the numbers are printed either way),\n"
    "2 bad flags, 1 a run failed.\n";

enum { MAX_RUNS = 32, DIR_MAX = PATH_MAX + 64 };
static const double fork_taus[] = { 1, 2, 4, 8 };
enum { NFORK = 4, INTERVENE_FORK = 1 /* index into fork_taus: 2 tau */ };

/* One run: what it is, how it is made, what was measured. */
typedef struct {
    char name[64];
    int gelu;       /* GeLU with 1.5 F, else SwiGLU */
    float wd;
    int fp8;        /* the paper's recipe from the step after the fork */
    int parent;     /* index of the run it forks from, -1 for a trajectory */
    int fork;       /* index into fork_taus */
    int decor;      /* FL_DECOR_* */
    int keep;       /* keeps checkpoints at fork_taus */
    int ref;        /* an FP8 run: its BF16 reference (the run with the same change in BF16) */
    fl_train_cfg cfg;
    char dir[DIR_MAX];
    int state;      /* 0 waiting, 1 running, 2 done */
    pid_t pid;
    /* metrics.csv */
    long n;
    double *step, *loss, *lr, *amax, *align, *tau1;
    int diverged;
    long div_step;
    fl_arm_failure fail;
    fl_late late;
    /* sites.csv: the down projections' inputs, per step the max over layers */
    double stale_p50, stale_p99, stale_max, clip_max;
    double *stale;  /* per step from the first sites.csv row */
    long nstale;
} mrun;

typedef struct {
    const char *out;
    int jobs;
    double horizon_tau;
    unsigned decor_k;
    fl_train_cfg base;
    uint64_t keep[NFORK];
    mrun runs[MAX_RUNS];
    int nruns;
    FILE *summary;
} mech;

__attribute__((format(printf, 2, 3))) static void say(mech *m, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    if (m->summary) {
        va_start(ap, fmt);
        vfprintf(m->summary, fmt, ap);
        va_end(ap);
    }
}

/* The demo's model and optimiser in BF16, with per-channel telemetry. */
static void mech_preset(fl_train_cfg *c)
{
    fl_train_demo_preset(c);
    c->log_every = 100;
    c->ckpt_every = 500;
    c->chan_every = 50;
}

static int add_run(mech *m, const char *name, int gelu, float wd, int fp8, int parent, int fork, int decor, int keep)
{
    mrun *r = &m->runs[m->nruns];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    r->gelu = gelu;
    r->wd = wd;
    r->fp8 = fp8;
    r->parent = parent;
    r->fork = fork;
    r->decor = decor;
    r->keep = keep;
    r->ref = parent;
    snprintf(r->dir, sizeof r->dir, "%s/%s", m->out, name);
    return m->nruns++;
}

/* The runs of the experiment. */
static void mech_plan(mech *m)
{
    const int sw = add_run(m, "swiglu-bf16", 0, 1.0f, 0, -1, 0, 0, 1);
    const int ge = add_run(m, "gelu-bf16", 1, 1.0f, 0, -1, 0, 0, 1);
    add_run(m, "swiglu-bf16-wd0", 0, 0.0f, 0, -1, 0, 0, 0);
    add_run(m, "swiglu-bf16-wd0.1", 0, 0.1f, 0, -1, 0, 0, 0);
    add_run(m, "swiglu-bf16-wd0.3", 0, 0.3f, 0, -1, 0, 0, 0);
    char name[64];
    for (int k = 0; k < NFORK; k++) {
        snprintf(name, sizeof name, "swiglu-fp8-at%gtau", fork_taus[k]);
        add_run(m, name, 0, 1.0f, 1, sw, k, 0, 0);
        snprintf(name, sizeof name, "gelu-fp8-at%gtau", fork_taus[k]);
        add_run(m, name, 1, 1.0f, 1, ge, k, 0, 0);
    }
    static const char *const iv[3] = { "decor-top", "decor-random", "wd0" };
    int bf[3];
    for (int fp8 = 0; fp8 < 2; fp8++)
        for (int j = 0; j < 3; j++) {
            snprintf(name, sizeof name, "swiglu-%s-at2tau-%s", fp8 ? "fp8" : "bf16", iv[j]);
            const int i = add_run(m, name, 0, j == 2 ? 0.0f : 1.0f, fp8, sw, INTERVENE_FORK,
                                  j == 0 ? FL_DECOR_TOP : j == 1 ? FL_DECOR_RANDOM : FL_DECOR_NONE, 0);
            if (fp8)
                m->runs[i].ref = bf[j];
            else
                bf[j] = i;
        }
}

static int find_run(const mech *m, const char *name)
{
    for (int i = 0; i < m->nruns; i++)
        if (!strcmp(m->runs[i].name, name))
            return i;
    return -1;
}

/* An FP8 fork without intervention (the runs of P3 and of the staleness plot). */
static int plain_fork(const mrun *r) { return r->fp8 && !r->decor && r->wd == 1.0f; }

/* The dose-response runs, in the order of wd. */
static const char *const dose_runs[4] = { "swiglu-bf16-wd0", "swiglu-bf16-wd0.1", "swiglu-bf16-wd0.3", "swiglu-bf16" };
static const double dose_wd[4] = { 0, 0.1, 0.3, 1 };

/* The parameter-matched GeLU of a SwiGLU configuration: F x 1.5. */
static void gelu_of(fl_train_cfg *c, const fl_train_cfg *swiglu)
{
    *c = *swiglu;
    c->model.act = (fl_act){ FL_ACT_GELU, 0 };
    c->model.F = swiglu->model.F * 3 / 2;
}

static void mrun_free(mrun *r)
{
    free(r->step), free(r->loss), free(r->lr), free(r->amax), free(r->align), free(r->tau1), free(r->stale);
    r->step = r->loss = r->lr = r->amax = r->align = r->tau1 = r->stale = NULL;
}

static int cmp_dbl(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of w[0..n-1], sorted ascending: element floor(q (n - 1)). */
static double quantile_sorted(const double *w, long n, double q) { return w[(long)floor(q * (double)(n - 1))]; }

/* The configuration of a trajectory (from the base), or of a fork (from its parent's kept
   checkpoint, as `train --fork` makes it).  0, or -1 with a message. */
static int run_config(mech *m, mrun *r)
{
    fl_train_cfg *c = &r->cfg;
    if (r->parent < 0) {
        if (r->gelu)
            gelu_of(c, &m->base);
        else
            *c = m->base;
        c->wd = r->wd;
        if (r->keep) {
            c->keep_n = NFORK;
            memcpy(c->keep, m->keep, sizeof m->keep);
        }
        return 0;
    }
    const mrun *p = &m->runs[r->parent];
    char path[DIR_MAX + 64], err[4600];
    snprintf(path, sizeof path, "%s/checkpoint-%llu.bin", p->dir, (unsigned long long)m->keep[r->fork]);
    if (fl_train_fork_cfg(c, NULL, path, err, sizeof err)) {
        fprintf(stderr, "fp8lab mechanism: %s\n", err);
        return -1;
    }
    c->wd = r->wd;
    c->decor_mode = (uint32_t)r->decor;
    c->decor_k = r->decor ? m->decor_k : 0;
    if (r->fp8)
        fl_recipe_paper(&c->recipe, (uint32_t)c->fork_step + 1);
    return 0;
}

/* What the folder holds: 2 finished, 1 a checkpoint to resume, 0 nothing; -1 a run of another
   configuration (message printed). */
static int run_on_disk(mrun *r)
{
    char cp[DIR_MAX + 32], err[4600];
    snprintf(cp, sizeof cp, "%s/checkpoint.bin", r->dir);
    if (access(cp, F_OK))
        return 0;
    fl_train_cfg c;
    fl_train_state st;
    if (fl_train_read_cfg(&c, &st, r->dir, err, sizeof err)) {
        fprintf(stderr, "fp8lab mechanism: %s\n", err);
        return -1;
    }
    r->cfg.data_hash = c.data_hash; /* filled in by the run from its data (checked there on resume) */
    if (memcmp(&c, &r->cfg, sizeof c)) {
        fprintf(stderr, "fp8lab mechanism: %s holds a run of another configuration (other train options?): "
                        "remove it or choose another --out\n", r->dir);
        return -1;
    }
    return st.step >= c.steps || (st.diverged && c.stop_on_div) ? 2 : 1;
}

/* Every run, parents before their forks, --jobs at a time.  0, or -1. */
static int mech_train(mech *m, double *wall)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int done = 0, running = 0, failed = 0;
    const int tty = isatty(2);
    while (done < m->nruns && !failed) {
        for (int i = 0; i < m->nruns && running < m->jobs && !failed; i++) {
            mrun *r = &m->runs[i];
            if (r->state != 0 || (r->parent >= 0 && m->runs[r->parent].state != 2))
                continue;
            if (run_config(m, r)) {
                failed = 1;
                break;
            }
            const int disk = run_on_disk(r);
            if (disk < 0) {
                failed = 1;
                break;
            }
            if (disk == 2) {
                r->state = 2;
                done++;
                continue;
            }
            if (disk == 1)
                fprintf(stderr, "  resuming %s from its checkpoint\n", r->name);
            fflush(NULL);
            const pid_t p = fork();
            if (p < 0) {
                fprintf(stderr, "fp8lab mechanism: fork failed: %s\n", strerror(errno));
                failed = 1;
                break;
            }
            if (p == 0) {
                fl_train_opts o = { r->dir, 1, 1, disk == 1, 1 }; /* the mechanism's own folders */
                _exit(fl_train_run(&r->cfg, &o));
            }
            r->pid = p;
            r->state = 1;
            running++;
        }
        if (!running)
            break;
        int st;
        const pid_t w = waitpid(-1, &st, tty ? WNOHANG : 0);
        if (w > 0) {
            for (int i = 0; i < m->nruns; i++)
                if (m->runs[i].state == 1 && m->runs[i].pid == w) {
                    m->runs[i].state = 2;
                    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
                        fprintf(stderr, "fp8lab mechanism: run %s failed\n", m->runs[i].name);
                        failed = 1;
                    }
                }
            running--;
            done++;
            continue;
        }
        if (w < 0)
            break;
        fprintf(stderr, "\r  progress: %d of %d runs done, %d running", done, m->nruns, running);
        fflush(stderr);
        sleep(2);
    }
    /* after a failure: the running ones checkpoint and stop (SIGTERM), and are reaped */
    for (int i = 0; i < m->nruns; i++)
        if (m->runs[i].state == 1)
            kill(m->runs[i].pid, SIGTERM);
    for (; running > 0 && waitpid(-1, NULL, 0) > 0; running--)
        ;
    if (tty)
        fputc('\n', stderr);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *wall = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return failed ? -1 : 0;
}

/* ---- reading the runs --------------------------------------------------------------------------- */

/* metrics.csv's columns step, loss, lr, act_amax, align_p99 (telemetry.h), and the wd-1 clock
   tau1 = sum of lr over the steps before (the run's own t/tau is tau1 * wd; for a fork the
   parent's steps before the fork count, from its checkpoint's learning rates: the same schedule). */
static int read_metrics(mrun *r)
{
    char p[DIR_MAX + 32], line[4096];
    snprintf(p, sizeof p, "%s/metrics.csv", r->dir);
    FILE *f = fopen(p, "r");
    if (!f || !fgets(line, sizeof line, f)) {
        fprintf(stderr, "fp8lab mechanism: %s: cannot read\n", p);
        if (f)
            fclose(f);
        return -1;
    }
    const long cap = (long)r->cfg.steps + 1;
    double **cols[] = { &r->step, &r->loss, &r->lr, &r->amax, &r->align, &r->tau1 };
    for (size_t k = 0; k < FL_ARRAY_LEN(cols); k++)
        *cols[k] = calloc((size_t)cap, sizeof(double));
    if (!r->tau1) {
        fclose(f);
        return -1;
    }
    r->n = 0;
    while (r->n < cap && fgets(line, sizeof line, f)) {
        double v[20];
        char *s = line;
        int k = 0;
        for (; k < 20 && *s; k++) {
            v[k] = strtod(s, &s);
            if (*s == ',')
                s++;
        }
        if (k < 10) {
            fprintf(stderr, "fp8lab mechanism: %s: a short row (row %ld)\n", p, r->n + 2);
            fclose(f);
            return -1;
        }
        if (!(v[0] >= 0 && v[0] <= (double)r->cfg.steps && v[0] == floor(v[0])) ||
            (r->n && v[0] != r->step[r->n - 1] + 1)) { /* a step the run cannot have logged (-1, nan, 1e18) */
            fprintf(stderr, "fp8lab mechanism: %s: row %ld: step %g is not the run's next step\n", p, r->n + 2, v[0]);
            fclose(f);
            return -1;
        }
        r->step[r->n] = v[0];
        r->loss[r->n] = v[1];
        r->lr[r->n] = v[3];
        r->amax[r->n] = v[6];
        r->align[r->n] = v[9];
        r->n++;
    }
    fclose(f);
    /* the clock: the steps before the first row (a fork) from the configuration's schedule */
    double t = 0.0;
    const uint64_t s0 = r->n ? (uint64_t)r->step[0] : 0;
    fl_train_cfg c1 = r->cfg;
    c1.wd = 1.0f;
    t = fl_train_tau_at(&c1, s0);
    for (long i = 0; i < r->n; i++) {
        r->tau1[i] = t;
        t += (double)(float)r->lr[i];
    }
    fl_train_cfg c;
    fl_train_state st;
    char err[4600];
    if (fl_train_read_cfg(&c, &st, r->dir, err, sizeof err)) {
        fprintf(stderr, "fp8lab mechanism: %s\n", err);
        return -1;
    }
    r->diverged = (int)st.diverged;
    r->div_step = (long)st.div_step;
    return 0;
}

/* sites.csv of an FP8 run: per step the largest staleness and clip mass over the down projections'
   inputs; their distribution over steps. */
static int read_sites(mrun *r)
{
    char p[DIR_MAX + 32], line[512];
    snprintf(p, sizeof p, "%s/sites.csv", r->dir);
    FILE *f = fopen(p, "r");
    if (!f || !fgets(line, sizeof line, f)) {
        if (f)
            fclose(f);
        fprintf(stderr, "fp8lab mechanism: %s: cannot read\n", p);
        return -1;
    }
    const long cap = (long)r->cfg.steps + 1;
    double *st = calloc((size_t)cap, sizeof *st);
    long n = 0, cur = -1;
    r->clip_max = 0;
    while (st && fgets(line, sizeof line, f)) {
        char site[64];
        double step, amax, from, stale, sat, clip, uf;
        if (sscanf(line, "%lf,%63[^,],%lf,%lf,%lf,%lf,%lf,%lf", &step, site, &amax, &from, &stale, &sat, &clip, &uf) != 8)
            continue;
        if (!strstr(site, ".down.in"))
            continue;
        if ((long)step != cur) {
            if (n == cap)
                break;
            cur = (long)step;
            st[n++] = 0;
        }
        if (stale > st[n - 1])
            st[n - 1] = stale;
        if (clip > r->clip_max)
            r->clip_max = clip;
    }
    fclose(f);
    r->stale_p50 = fl_median_range(st, 0, n);
    r->stale_max = fl_max_range(st, 0, n);
    r->stale_p99 = NAN;
    double *w = st && n ? malloc((size_t)n * sizeof *w) : NULL;
    if (w) { /* on a sorted copy */
        memcpy(w, st, (size_t)n * sizeof *w);
        qsort(w, (size_t)n, sizeof *w, cmp_dbl);
        r->stale_p99 = quantile_sorted(w, n, 0.99);
        free(w);
    }
    r->stale = st;
    r->nstale = n;
    return 0;
}

/* The row of a run at a given step, or -1. */
static long row_of(const mrun *r, double step)
{
    const long i = (long)(step - (r->n ? r->step[0] : 0));
    return i >= 0 && i < r->n && r->step[i] == step ? i : -1;
}

static int mech_read(mech *m)
{
    for (int i = 0; i < m->nruns; i++) {
        mrun *r = &m->runs[i];
        if (read_metrics(r) || (r->fp8 && read_sites(r)))
            return -1;
        fl_late_measure(&r->late, r->amax, r->tau1, r->n);
    }
    /* failures of the FP8 forks against their parents' BF16 continuation */
    for (int i = 0; i < m->nruns; i++) {
        mrun *r = &m->runs[i];
        if (!r->fp8)
            continue;
        const int ref = r->ref;
        const mrun *p = &m->runs[ref];
        const long off = row_of(p, r->n ? r->step[0] : -1);
        const long k0 = (long)r->cfg.fork_step;
        fl_arm_judge(&r->fail, r->loss, r->n, (long)r->cfg.steps - k0, r->diverged, r->div_step - k0,
                     off >= 0 ? p->loss + off : NULL, off >= 0 ? p->n - off : 0, FL_GAP_EMA, FL_GAP_THRESHOLD,
                     FL_GAP_WINDOW);
    }
    return 0;
}

static void mech_free(mech *m)
{
    for (int i = 0; i < m->nruns; i++)
        mrun_free(&m->runs[i]);
    if (m->summary)
        fclose(m->summary);
}

/* ---- the predictions -------------------------------------------------------------------------- */

static json_t *jnum(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static const char *held(int h) { return h ? "HELD" : "FAILED"; }

static double at_tau(const mrun *r, const double *v, double x)
{
    const long i = fl_tau_row(r->tau1, r->n, x);
    return i < r->n ? v[i] : NAN;
}

/* The median of v over the last 10% of a run's rows. */
static double final_value(const mrun *r, const double *v)
{
    return fl_median_range(v, r->n - (r->n + 9) / 10, r->n);
}

typedef struct {
    int ok[6];        /* P0..P5 held */
    int inconclusive[6]; /* P3: not judged, the precondition (P0) absent */
    fl_precondition pre; /* P0 as the precondition of P3 */
    json_t *doc;      /* mechanism.json */
} mech_verdict;

static const char *judged(const mech_verdict *v, int k) { return v->inconclusive[k] ? "INCONCLUSIVE" : held(v->ok[k]); }

static json_t *late_json(const fl_late *l)
{
    json_t *o = json_object();
    json_object_set_new(o, "early_max", jnum(l->early_max));
    json_object_set_new(o, "late_max", jnum(l->late_max));
    json_object_set_new(o, "growth", jnum(l->growth));
    json_object_set_new(o, "jump", jnum(l->jump));
    return o;
}

static void judge_p0(mech *m, mech_verdict *v, const mrun *sw, const mrun *ge)
{
    fl_precondition_judge(&v->pre, &sw->late, &ge->late, 1, sw->n ? sw->tau1[sw->n - 1] + sw->lr[sw->n - 1] : 0);
    v->ok[0] = v->pre.present; /* fl_late_regime of the one trajectory of each */
    say(m, "  P0 late regime (growth or jump >= %g for SwiGLU, not for GeLU): %s\n", FL_LATE_FACTOR, held(v->ok[0]));
    say(m, "     SwiGLU: late growth %.3g, late jump %.3g;  GeLU: late growth %.3g, late jump %.3g\n", sw->late.growth,
        sw->late.jump, ge->late.growth, ge->late.jump);
    json_t *o = json_object();
    json_object_set_new(o, "held", json_boolean(v->ok[0]));
    json_object_set_new(o, "swiglu", late_json(&sw->late));
    json_object_set_new(o, "gelu", late_json(&ge->late));
    json_object_set_new(v->doc, "P0_late_regime", o);
}

static void judge_p1(mech *m, mech_verdict *v, const mrun *sw, const mrun *w0)
{
    const double a1 = at_tau(sw, sw->align, 1), a8 = at_tau(sw, sw->align, 8);
    const double e1 = final_value(sw, sw->align), e0 = final_value(w0, w0->align);
    v->ok[1] = fl_p1_alignment(a1, a8, e1, e0);
    say(m, "  P1 alignment p99 rises 1 -> 8 tau and ends above wd 0's: %s (%.3f -> %.3f; end %.3f vs wd 0 %.3f)\n",
        held(v->ok[1]), a1, a8, e1, e0);
    json_t *o = json_object();
    json_object_set_new(o, "held", json_boolean(v->ok[1]));
    json_object_set_new(o, "align_p99_1tau", jnum(a1));
    json_object_set_new(o, "align_p99_8tau", jnum(a8));
    json_object_set_new(o, "align_p99_end_wd1", jnum(e1));
    json_object_set_new(o, "align_p99_end_wd0", jnum(e0));
    json_object_set_new(v->doc, "P1_alignment", o);
}

/* Attribution of a trajectory over t/tau >= 2 (attrib.h).  0, or -1 (message printed). */
static int attribute(fl_attrib_result *res, fl_attrib_run *run, const mrun *r)
{
    char err[4600];
    memset(res, 0, sizeof *res);
    if (fl_attrib_load(run, r->dir, err, sizeof err)) {
        fprintf(stderr, "fp8lab mechanism: %s\n", err);
        return -1;
    }
    const fl_attrib_window w = { -1, -1, 2.0 };
    if (fl_attrib_analyse(res, run, &w, err, sizeof err)) {
        fprintf(stderr, "fp8lab mechanism: %s: %s\n", r->dir, err);
        fl_attrib_free(run);
        return -1;
    }
    return 0;
}

static void judge_p2(mech *m, mech_verdict *v, const mrun *sw, const mrun *ge)
{
    fl_attrib_result rs, rg;
    fl_attrib_run as, ag;
    if (attribute(&rs, &as, sw)) {
        json_object_set_new(v->doc, "P2_attribution", json_string("not measured: the attribution failed"));
        return;
    }
    if (attribute(&rg, &ag, ge)) {
        fl_attrib_result_free(&rs);
        fl_attrib_free(&as);
        json_object_set_new(v->doc, "P2_attribution", json_string("not measured: the attribution failed"));
        return;
    }
    const fl_attrib_stats *s = &rs.pooled, *g = &rg.pooled;
    int part[4];
    v->ok[2] = fl_p2_attribution(part, s->frac_top2, rs.chance2, s->rho_align.median, s->slope_top, g->slope_all, s->best_lag);
    const int rec = part[0], rho = part[1], slope = part[2], lead = part[3];
    say(m, "  P2 attribution over t/tau >= 2: %s\n", held(v->ok[2]));
    say(m, "     records by the top 2%% aligned: %ld of %ld = %.3f (chance %.3f, needed >= %.3f): %s\n", s->nrec_top2, s->nrec,
        s->frac_top2, rs.chance2, 5.0 * rs.chance2, held(rec));
    say(m, "     Spearman rho(align, amax), median over logged steps: %.3f (needed > 0.3): %s\n", s->rho_align.median, held(rho));
    say(m, "     log-log slope amax_i vs max|g_i|: SwiGLU top 2%% %.3f (needed 1.5..2.5), GeLU all %.3f (0.5..1.5): %s\n",
        s->slope_top, g->slope_all, held(slope));
    say(m, "     lead/lag: best lag %+d (corr %.3f; positive: alignment leads): %s\n", s->best_lag, s->best_corr, held(lead));
    json_t *o = json_object();
    json_object_set_new(o, "held", json_boolean(v->ok[2]));
    json_object_set_new(o, "records_top2_held", json_boolean(rec));
    json_object_set_new(o, "rho_held", json_boolean(rho));
    json_object_set_new(o, "slope_held", json_boolean(slope));
    json_object_set_new(o, "lead_held", json_boolean(lead));
    json_object_set_new(o, "swiglu", fl_attrib_json(&rs, &as, sw->dir));
    json_object_set_new(o, "gelu", fl_attrib_json(&rg, &ag, ge->dir));
    json_object_set_new(v->doc, "P2_attribution", o);
    fl_attrib_result_free(&rs);
    fl_attrib_result_free(&rg);
    fl_attrib_free(&as);
    fl_attrib_free(&ag);
}

static json_t *fork_json(const mrun *r)
{
    json_t *o = json_object();
    json_object_set_new(o, "run", json_string(r->name));
    json_object_set_new(o, "fork_step", json_integer((json_int_t)r->cfg.fork_step));
    json_object_set_new(o, "failed", json_boolean(r->fail.failed));
    json_object_set_new(o, "reason", json_string(fl_fail_reason_name(r->fail.reason)));
    json_object_set_new(o, "fail_step", r->fail.step >= 0 ? json_integer(r->fail.step + (json_int_t)r->cfg.fork_step) : json_null());
    json_object_set_new(o, "gap_max", jnum(r->fail.gap_max));
    json_object_set_new(o, "gap_final", jnum(r->fail.gap_final));
    json_object_set_new(o, "down_in_staleness_p50", jnum(r->stale_p50));
    json_object_set_new(o, "down_in_staleness_p99", jnum(r->stale_p99));
    json_object_set_new(o, "down_in_staleness_max", jnum(r->stale_max));
    json_object_set_new(o, "down_in_clip_mass_max", jnum(r->clip_max));
    json_object_set_new(o, "act_amax_max", jnum(fl_max_range(r->amax, 0, r->n)));
    return o;
}

static void judge_p3(mech *m, mech_verdict *v)
{
    int gelu[MAX_RUNS], failed[MAX_RUNS], n = 0;
    double tau[MAX_RUNS];
    json_t *arr = json_array();
    say(m, "  P3 FP8 forks (paper's recipe) against the BF16 continuation:\n");
    say(m, "     %-22s %6s %-8s %9s %9s %9s %10s\n", "fork", "step", "failed", "gap max", "stale p99", "stale max", "clip max");
    for (int i = 0; i < m->nruns; i++) {
        const mrun *r = &m->runs[i];
        if (!plain_fork(r))
            continue;
        say(m, "     %-22s %6llu %-8s %+8.2f%% %9.3f %9.3f %10.3g\n", r->name, (unsigned long long)r->cfg.fork_step,
            r->fail.failed ? fl_fail_reason_name(r->fail.reason) : "no", 100 * r->fail.gap_max, r->stale_p99, r->stale_max,
            r->clip_max);
        gelu[n] = r->gelu;
        tau[n] = fork_taus[r->fork];
        failed[n++] = r->fail.failed;
        json_array_append_new(arr, fork_json(r));
    }
    int part[2];
    v->ok[3] = fl_p3_forks(part, gelu, tau, failed, n);
    /* the consequence is judged only with its cause present: without the late regime, no failure refutes
       nothing and a failure is not the paper's mechanism */
    v->inconclusive[3] = !v->pre.present;
    if (v->inconclusive[3])
        v->ok[3] = 0;
    say(m, "     a SwiGLU fork at 4 or 8 tau failed: %s; a GeLU fork failed: %s -> %s%s\n", part[0] ? "yes" : "no",
        part[1] ? "yes" : "no", judged(v, 3), v->inconclusive[3] ? " (precondition not produced: P0 did not hold)" : "");
    json_t *o = json_object();
    json_object_set_new(o, "held", json_boolean(v->ok[3]));
    json_object_set_new(o, "outcome", json_string(judged(v, 3)));
    json_object_set_new(o, "precondition_present", json_boolean(v->pre.present));
    json_object_set_new(o, "precondition", json_string(v->pre.text));
    json_object_set_new(o, "forks", arr);
    json_object_set_new(v->doc, "P3_fp8_forks", o);
}

/* The largest amax of run r over the steps [from, end): the late half of a fork's steps. */
static double max_from(const mrun *r, double from)
{
    const long i = row_of(r, from);
    return i < 0 ? NAN : fl_max_range(r->amax, i, r->n);
}

static void judge_p4(mech *m, mech_verdict *v)
{
    const mrun *p = &m->runs[find_run(m, "swiglu-bf16")];
    const mrun *top = &m->runs[find_run(m, "swiglu-bf16-at2tau-decor-top")];
    const mrun *rnd = &m->runs[find_run(m, "swiglu-bf16-at2tau-decor-random")];
    const mrun *wd0 = &m->runs[find_run(m, "swiglu-bf16-at2tau-wd0")];
    const mrun *ftop = &m->runs[find_run(m, "swiglu-fp8-at2tau-decor-top")];
    const double k = (double)top->cfg.fork_step, late = k + floor(((double)p->cfg.steps - k) / 2);
    const double base = max_from(p, late);
    const double r_top = max_from(top, late) / base, r_rnd = max_from(rnd, late) / base;
    const long pk = row_of(p, k);
    const double a_fork = pk >= 0 ? p->align[pk] : NAN, amax_fork = pk >= 0 ? p->amax[pk] : NAN;
    const double g_align_p = final_value(p, p->align) - a_fork, g_align_w = final_value(wd0, wd0->align) - a_fork;
    const double g_amax_p = final_value(p, p->amax) / amax_fork - 1, g_amax_w = final_value(wd0, wd0->amax) / amax_fork - 1;
    int part[3];
    v->ok[4] = fl_p4_interventions(part, r_top, ftop->fail.failed, r_rnd, g_align_w, g_align_p, g_amax_w, g_amax_p);
    const int h_top = part[0], h_rnd = part[1], h_wd = part[2];
    say(m, "  P4 interventions at the 2-tau fork (step %.0f; K = %u channels per layer): %s\n", k, m->decor_k, held(v->ok[4]));
    say(m, "     decorrelate the top-K aligned: max amax over steps %.0f.. %.3gx the unchanged run's (needed <= 0.5), FP8 arm %s: %s\n",
        late, r_top, ftop->fail.failed ? "failed" : "did not fail", held(h_top));
    say(m, "     decorrelate K random: %.3gx (needed >= 0.8): %s\n", r_rnd, held(h_rnd));
    say(m, "     wd off: alignment p99 growth %.3f vs %.3f with wd, amax growth %+.3g vs %+.3g (needed <= half): %s\n",
        g_align_w, g_align_p, g_amax_w, g_amax_p, held(h_wd));
    json_t *o = json_object();
    json_object_set_new(o, "held", json_boolean(v->ok[4]));
    json_object_set_new(o, "fork_step", json_integer((json_int_t)k));
    json_object_set_new(o, "k", json_integer(m->decor_k));
    json_object_set_new(o, "late_from_step", json_integer((json_int_t)late));
    json_object_set_new(o, "top_amax_ratio", jnum(r_top));
    json_object_set_new(o, "random_amax_ratio", jnum(r_rnd));
    json_object_set_new(o, "wd0_align_growth", jnum(g_align_w));
    json_object_set_new(o, "wd1_align_growth", jnum(g_align_p));
    json_object_set_new(o, "wd0_amax_growth", jnum(g_amax_w));
    json_object_set_new(o, "wd1_amax_growth", jnum(g_amax_p));
    json_t *arr = json_array();
    for (int i = 0; i < m->nruns; i++)
        if (m->runs[i].fp8 && !plain_fork(&m->runs[i]))
            json_array_append_new(arr, fork_json(&m->runs[i]));
    json_object_set_new(o, "fp8_arms", arr);
    json_object_set_new(v->doc, "P4_interventions", o);
}

static void judge_p5(mech *m, mech_verdict *v)
{
    double fin[4];
    json_t *arr = json_array();
    for (int k = 0; k < 4; k++) {
        const mrun *r = &m->runs[find_run(m, dose_runs[k])];
        fin[k] = final_value(r, r->amax);
        json_t *o = json_object();
        json_object_set_new(o, "wd", json_real(dose_wd[k]));
        json_object_set_new(o, "final_act_amax", jnum(fin[k]));
        json_object_set_new(o, "final_align_p99", jnum(final_value(r, r->align)));
        json_object_set_new(o, "t_over_tau_end", json_real(r->n ? (r->tau1[r->n - 1] + r->lr[r->n - 1]) * dose_wd[k] : 0));
        json_array_append_new(arr, o);
    }
    v->ok[5] = fl_p5_dose(fin);
    say(m, "  P5 dose-response, final act_amax (median of the last 10%% of steps) at wd 0 / 0.1 / 0.3 / 1: "
           "%.3g / %.3g / %.3g / %.3g: %s\n", fin[0], fin[1], fin[2], fin[3], held(v->ok[5]));
    json_t *o = json_object();
    json_object_set_new(o, "held", json_boolean(v->ok[5]));
    json_object_set_new(o, "runs", arr);
    json_object_set_new(v->doc, "P5_dose_response", o);
}

/* ---- outputs ------------------------------------------------------------------------------------ */

/* dose.csv: per step of the wd-1 clock, the four dose runs' act_amax and alignment p99. */
static int fill_dose(FILE *f, void *ctx)
{
    const mech *m = ctx;
    const mrun *r[4];
    for (int k = 0; k < 4; k++)
        r[k] = &m->runs[find_run(m, dose_runs[k])];
    fputs("step,lr_sum,amax_wd0,amax_wd0.1,amax_wd0.3,amax_wd1,align_wd0,align_wd0.1,align_wd0.3,align_wd1\n", f);
    for (long i = 0; i < r[3]->n; i++) {
        fprintf(f, "%.0f,%.9g", r[3]->step[i], r[3]->tau1[i]);
        for (int k = 0; k < 4; k++)
            fprintf(f, ",%.9g", i < r[k]->n ? r[k]->amax[i] : NAN);
        for (int k = 0; k < 4; k++)
            fprintf(f, ",%.9g", i < r[k]->n ? r[k]->align[i] : NAN);
        fputc('\n', f);
    }
    return 0;
}

/* staleness.csv: per FP8 fork (arm = its index among them, 1-based, in mechanism.gp's order) and
   window of STALE_WIN steps, the quantiles over the window's steps of the down projections' input
   staleness (per step the max over layers). */
enum { STALE_WIN = 100 };

static int fill_stale(FILE *f, void *ctx)
{
    const mech *m = ctx;
    fputs("arm,name,step,p50,p90,p99,max\n", f);
    int arm = 0;
    double w[STALE_WIN];
    for (int i = 0; i < m->nruns; i++) {
        const mrun *r = &m->runs[i];
        if (!plain_fork(r))
            continue;
        arm++;
        for (long a = 0; a < r->nstale; a += STALE_WIN) {
            long n = 0;
            for (long t = a; t < a + STALE_WIN && t < r->nstale; t++)
                if (r->stale[t] > 0)
                    w[n++] = r->stale[t];
            if (!n)
                continue;
            qsort(w, (size_t)n, sizeof *w, cmp_dbl);
            fprintf(f, "%d,%s,%llu,%.9g,%.9g,%.9g,%.9g\n", arm, r->name, (unsigned long long)r->cfg.fork_step + (unsigned long long)a,
                    quantile_sorted(w, n, 0.5), quantile_sorted(w, n, 0.9), quantile_sorted(w, n, 0.99), w[n - 1]);
        }
    }
    return 0;
}

static int fill_json(FILE *f, void *ctx)
{
    char *s = json_dumps((json_t *)ctx, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
    if (!s)
        return -1;
    fprintf(f, "%s\n", s);
    free(s);
    return 0;
}

/* The plots (gnuplot): dose-response, interventions, staleness per FP8 arm; alignment vs amax per
   channel comes from `fp8lab attribute --plot`. */
static int mech_plots(const mech *m)
{
    char gp[DIR_MAX + 32], od[DIR_MAX + 32];
    snprintf(gp, sizeof gp, "%s/mechanism.gp", m->out);
    if (fl_gnuplot_path(od, sizeof od, m->out))
        return -1;
    FILE *f = fopen(gp, "w");
    if (!f)
        return -1;
    /* the output folder reaches gnuplot as its argument ARG1 (gnuplot.h); every run folder is ARG1/NAME */
    const char *o = od;
    fl_gnuplot_comment(f, "mechanism", gp, 1, &o);
    fprintf(f, "set terminal pngcairo size 900,560 font ',10'\nset datafile separator ','\nset datafile missing 'nan'\n"
               "set grid\nset key top left\n");
    fprintf(f, "set output ARG1.'/dose.png'\nset logscale y\nset title 'weight-decay dose-response: SwiGLU output amax (BF16)'\n"
               "set xlabel 'sum of lr over steps (t/tau at wd 1; multiply by wd for the run own t/tau)'\nset ylabel 'act amax'\n"
               "plot for [k=0:3] ARG1.'/dose.csv' every ::1 using 2:(column(3+k)) with lines lw 1.5 title "
               "word('wd=0 wd=0.1 wd=0.3 wd=1', k+1)\nunset logscale y\n");
    fprintf(f, "set output ARG1.'/dose_tau.png'\nset logscale xy\nset format x '%%g'\nset title 'weight-decay dose-response against each run''s own t/tau (wd > 0)'\n"
               "set xlabel 't/tau = wd x sum of lr'\nset ylabel 'act amax'\n"
               "plot for [k=1:3] ARG1.'/dose.csv' every ::1 using ($2 * word('0.1 0.3 1', k)):(column(3+k)) with lines lw 1.5 lc k+1 title "
               "word('wd=0.1 wd=0.3 wd=1', k)\nunset logscale\nset format x\n");
    fprintf(f, "set output ARG1.'/dose_align.png'\nset title 'weight-decay dose-response: alignment p99'\nset ylabel '|cos| p99'\n"
               "plot for [k=0:3] ARG1.'/dose.csv' every ::1 using 2:(column(7+k)) with lines lw 1.5 title "
               "word('wd=0 wd=0.1 wd=0.3 wd=1', k+1)\n");
    const double k = (double)m->keep[INTERVENE_FORK];
    fprintf(f, "set output ARG1.'/interventions.png'\nset logscale y\nset title 'interventions at the 2-tau fork (step %.0f): act amax'\n"
               "set xlabel 'step'\nset ylabel 'act amax'\nset key top left\n", k);
    fprintf(f, "plot ARG1.'/swiglu-bf16/metrics.csv' every ::1 using ($1 >= %.0f ? $1 : 1/0):7 with lines lw 2 lc rgb 'black' title 'unchanged (BF16)'",
            k);
    static const char *const iv[] = { "decor-top", "decor-random", "wd0" };
    for (int j = 0; j < 3; j++)
        for (int fp8 = 0; fp8 < 2; fp8++)
            fprintf(f, ", ARG1.'/swiglu-%s-at2tau-%s/metrics.csv' every ::1 using 1:7 with lines %s lc %d title '%s %s'",
                    fp8 ? "fp8" : "bf16", iv[j], fp8 ? "dt 2" : "lw 1.5", j + 1, iv[j], fp8 ? "FP8" : "BF16");
    fprintf(f, "\nunset logscale y\n");
    fprintf(f, "set output ARG1.'/staleness.png'\nset logscale y\nset key top right\n"
               "set title \"FP8 forks: down-projection input staleness (amax / the amax of its scale)\\nper %d steps: p99 (solid), median (dashed), max (points)\"\n"
               "set ylabel 'staleness'\nplot ", (int)STALE_WIN);
    int c = 0;
    for (int i = 0; i < m->nruns; i++) {
        const mrun *r = &m->runs[i];
        if (!plain_fork(r))
            continue;
        c++;
        fprintf(f, "%sARG1.'/staleness.csv' every ::1 using ($1 == %d ? $3 : 1/0):6 with lines lw 1.5 lc %d title '%s', "
                   "'' every ::1 using ($1 == %d ? $3 : 1/0):4 with lines dt 2 lc %d notitle, "
                   "'' every ::1 using ($1 == %d ? $3 : 1/0):7 with points pt 7 ps 0.4 lc %d notitle",
                c > 1 ? ", " : "", c, c, r->name, c, c, c, c);
    }
    fprintf(f, "\n");
    if (fclose(f))
        return -1;
    if (fl_gnuplot_run("mechanism", gp, 1, &o))
        return -1;
    /* per-channel alignment against amax: the attribution's plots of the SwiGLU and GeLU trajectories */
    for (int g = 0; g < 2; g++) {
        const mrun *r = &m->runs[find_run(m, g ? "gelu-bf16" : "swiglu-bf16")];
        char pd[DIR_MAX + 32];
        snprintf(pd, sizeof pd, "%s/attribution-%s", o, g ? "gelu" : "swiglu");
        const fl_attrib_window w = { -1, -1, 2.0 }; /* attribute --from-tau 2 */
        const int rc = fl_attrib_plot_run(r->dir, &w, pd);
        if (rc)
            return -1;
    }
    return 0;
}

/* ---- the lever search's judgement --------------------------------------------------------------- */

/* Whether the file at path ends in a newline (a log cut inside its last line does not). */
static int ends_in_newline(const char *path)
{
    FILE *f = fopen(path, "rb");
    int c = EOF;
    if (f && fseek(f, -1, SEEK_END) == 0)
        c = fgetc(f);
    if (f)
        fclose(f);
    return c == '\n';
}

/* One run of the search, listed at lp:lineno: its configuration (from its own checkpoint, as written
   by train beside config.json), its metrics and late-regime measures.  0, or -1 with the reason
   printed. */
static int search_run(mrun *r, const char *dir, const char *lp, long lineno)
{
    mrun_free(r);
    memset(r, 0, sizeof *r);
    if ((size_t)snprintf(r->dir, sizeof r->dir, "%s", dir) >= sizeof r->dir) {
        fprintf(stderr, "fp8lab mechanism: %s:%ld: folder name too long\n", lp, lineno);
        return -1;
    }
    fl_train_state st;
    char err[4600], mp[DIR_MAX + 32];
    const int unread = fl_train_read_cfg(&r->cfg, &st, r->dir, err, sizeof err);
    if (unread || st.step < r->cfg.steps) {
        printf("  %-30s not finished (%s)\n", r->dir, unread ? err : "steps left");
        return -1;
    }
    if (read_metrics(r))
        return -1;
    snprintf(mp, sizeof mp, "%s/metrics.csv", r->dir);
    const long want = (long)(r->cfg.steps - r->cfg.fork_step); /* one row per step */
    if (r->n != want || !ends_in_newline(mp)) {
        fprintf(stderr, "fp8lab mechanism: %s: %s (%ld data rows for the run's %ld steps): the log is damaged\n", mp,
                !r->n ? "no data rows" : r->n < want ? "cut short" : r->n > want ? "more rows than steps"
                                                                               : "the last line has no newline",
                r->n, want);
        return -1;
    }
    fl_late_measure(&r->late, r->amax, r->tau1, r->n);
    return 0;
}

/* The lever search's runs.txt lists its runs in pairs, a SwiGLU run and its parameter-matched GeLU
   (F x 1.5), one "DIR train-flags" line each.  Which is which is read from each run's own
   configuration, never from the order of the lines. */
static int judge_search(const char *dir)
{
    char lp[DIR_MAX];
    snprintf(lp, sizeof lp, "%s/runs.txt", dir);
    FILE *f = fopen(lp, "r");
    if (!f) {
        fprintf(stderr, "fp8lab mechanism: %s: cannot open (made by experiments/train/mechanism_search.sh)\n", lp);
        return FL_EXIT_FAIL;
    }
    printf("late-regime search (P0: late growth or late jump >= %g for SwiGLU, not for GeLU) in %s\n", FL_LATE_FACTOR, dir);
    printf("  %-30s %10s %10s %10s %10s  %s\n", "lever", "SwiGLU gr.", "SwiGLU jmp", "GeLU gr.", "GeLU jmp", "P0");
    int found = 0, rc = FL_EXIT_OK, have = 0, ok[2] = { 0, 0 };
    long lineno = 0, judged = 0, first = 0;
    static mrun pair[2]; /* zeroed: mrun_free is safe on it */
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        line[strcspn(line, "\r\n")] = 0;
        if (line[strspn(line, " \t")] == 0)
            continue;
        line[strcspn(line, " \t")] = 0; /* the folder; the train flags follow */
        if (!have)
            first = lineno;
        ok[have] = !search_run(&pair[have], line, lp, lineno);
        if (++have < 2)
            continue;
        have = 0;
        if (!ok[0] || !ok[1]) {
            rc = FL_EXIT_FAIL;
            continue;
        }
        const int g0 = fl_act_gated(pair[0].cfg.model.act), g1 = fl_act_gated(pair[1].cfg.model.act);
        const int e0 = pair[0].cfg.model.act.kind == FL_ACT_GELU, e1 = pair[1].cfg.model.act.kind == FL_ACT_GELU;
        if (!((g0 && e1) || (g1 && e0))) {
            fprintf(stderr, "fp8lab mechanism: %s:%ld-%ld: %s (act %s) and %s (act %s) are not a SwiGLU / GeLU pair\n", lp,
                    first, lineno, pair[0].dir, fl_act_name(pair[0].cfg.model.act), pair[1].dir,
                    fl_act_name(pair[1].cfg.model.act));
            rc = FL_EXIT_FAIL;
            continue;
        }
        const mrun *sw = g0 ? &pair[0] : &pair[1], *ge = g0 ? &pair[1] : &pair[0];
        fl_train_cfg m;
        gelu_of(&m, &sw->cfg);
        if (memcmp(&m.model, &ge->cfg.model, sizeof m.model) || m.seed != ge->cfg.seed || m.bos != ge->cfg.bos ||
            m.steps != ge->cfg.steps || !fl_train_same_data(&m, &ge->cfg)) {
            fprintf(stderr, "fp8lab mechanism: %s:%ld-%ld: %s is not the parameter-matched GeLU (F x 1.5, the same "
                            "model, seed, data and steps) of %s\n", lp, first, lineno, ge->dir, sw->dir);
            rc = FL_EXIT_FAIL;
            continue;
        }
        const int reg = fl_late_regime(&sw->late, &ge->late);
        found |= reg;
        judged++;
        const char *b = strrchr(sw->dir, '/');
        printf("  %-30s %10.3g %10.3g %10.3g %10.3g  %s\n", b ? b + 1 : sw->dir, sw->late.growth, sw->late.jump,
               ge->late.growth, ge->late.jump, reg ? "LATE REGIME" : "no");
    }
    free(line);
    fclose(f);
    mrun_free(&pair[0]);
    mrun_free(&pair[1]);
    if (have) {
        fprintf(stderr, "fp8lab mechanism: %s:%ld: the last run has no pair (the runs come in SwiGLU / GeLU pairs)\n", lp,
                first);
        rc = FL_EXIT_FAIL;
    }
    if (!judged) {
        fprintf(stderr, "fp8lab mechanism: %s: no pair of runs was judged%s\n", lp, lineno ? "" : " (the file is empty)");
        return FL_EXIT_FAIL;
    }
    printf("  %s\n", found ? "a configuration in the late regime was found" : "no lever gave the late regime");
    return rc;
}

/* ---- the command -------------------------------------------------------------------------------- */

static int mech_parse(mech *m, int argc, char **argv, const char **judge)
{
    mech_preset(&m->base);
    m->out = "mechanism-out";
    m->jobs = (int)sysconf(_SC_NPROCESSORS_ONLN);
    if (m->jobs < 1)
        m->jobs = 1;
    m->horizon_tau = 16;
    int kset = 0;
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(f, "-h") || !strcmp(f, "--help")) {
            fputs(help, stdout);
            return FL_EXIT_OK;
        }
        unsigned long long x;
        double d;
        if (!strcmp(f, "--out") || !strcmp(f, "--judge-search")) {
            if (!v)
                return fl_cli_usage_error("mechanism", "%s needs a folder", f);
            *(f[2] == 'o' ? &m->out : judge) = v;
            i++;
        } else if (!strcmp(f, "--jobs")) {
            if (!v || fl_cli_parse_u64(&x, v) || x < 1 || x > 256)
                return fl_cli_usage_error("mechanism", "--jobs needs a count 1..256");
            m->jobs = (int)x;
            i++;
        } else if (!strcmp(f, "--horizon-tau")) {
            if (!v || fl_cli_parse_double(&d, v) || !(d >= 9 && d <= 1000))
                return fl_cli_usage_error("mechanism", "--horizon-tau needs a number 9..1000 (the last fork is at 8 tau)");
            m->horizon_tau = d;
            i++;
        } else if (!strcmp(f, "--decor-k")) {
            if (!v || fl_cli_parse_u64(&x, v) || x < 1 || x > 65536)
                return fl_cli_usage_error("mechanism", "--decor-k needs a count >= 1");
            m->decor_k = (unsigned)x;
            kset = 1;
            i++;
        } else if (!strcmp(f, "--act") || !strcmp(f, "--recipe") || !strcmp(f, "--resume") || !strcmp(f, "--fork") ||
                   !strcmp(f, "--wd") || !strcmp(f, "--decorrelate") || !strcmp(f, "--keep-ckpt") || !strcmp(f, "--steps")) {
            return fl_cli_usage_error("mechanism", "%s is set by the experiment for each run (see --help)", f);
        } else {
            int used = 0;
            const int r = fl_train_parse_flag(&m->base, "mechanism", f, v, &used);
            if (r == 2)
                return FL_EXIT_USAGE;
            if (r == 1)
                return fl_cli_usage_error("mechanism", "unknown option '%s'", f);
            i += used;
        }
    }
    if (*judge)
        return -1;
    fl_train_cfg c1 = m->base;
    c1.steps = 100000000ull;
    m->base.steps = fl_train_tau_step(&c1, m->horizon_tau);
    for (int k = 0; k < NFORK; k++)
        m->keep[k] = fl_train_tau_step(&m->base, fork_taus[k]);
    if (!kset)
        m->decor_k = (m->base.model.F + 49) / 50;
    if (m->decor_k > m->base.model.F)
        return fl_cli_usage_error("mechanism", "--decor-k exceeds --ffn");
    if (!m->base.chan_every)
        return fl_cli_usage_error("mechanism", "--chan-every must be >= 1 here (the attribution reads channels.csv)");
    fl_train_cfg g;
    gelu_of(&g, &m->base);
    const char *why = fl_train_cfg_check(&m->base);
    if (!why)
        why = fl_train_cfg_check(&g);
    if (why)
        return fl_cli_usage_error("mechanism", "%s", why);
    return -1;
}

int fl_cmd_mechanism(int argc, char **argv)
{
    fl_blas_setup(argv - 1);
    static mech m;
    memset(&m, 0, sizeof m);
    const char *judge = NULL;
    int rc = mech_parse(&m, argc, argv, &judge);
    if (rc >= 0)
        return rc;
    if (judge)
        return judge_search(judge);
    mech_plan(&m);
    fl_rundir folder; /* locked until the command ends: one mechanism per folder at a time */
    const int lrc = fl_rundir_acquire(&folder, m.out, "mechanism");
    if (lrc)
        return lrc;
    char sp[DIR_MAX + 32], args[8192];
    fl_train_cfg_args(args, sizeof args, &m.base);
    printf("fp8lab mechanism: %d runs, %d at a time -> %s/\n  base (SwiGLU trajectory): %s\n"
           "  horizon %g tau = %llu steps; forks at 1 2 4 8 tau = steps %llu %llu %llu %llu; K = %u\n",
           m.nruns, m.jobs, m.out, args, m.horizon_tau, (unsigned long long)m.base.steps, (unsigned long long)m.keep[0],
           (unsigned long long)m.keep[1], (unsigned long long)m.keep[2], (unsigned long long)m.keep[3], m.decor_k);
    fflush(stdout);
    double wall;
    if (mech_train(&m, &wall)) {
        fprintf(stderr, "fp8lab mechanism: a run failed or was interrupted; run the same command again to resume\n");
        return FL_EXIT_FAIL;
    }
    if (mech_read(&m)) {
        mech_free(&m);
        return FL_EXIT_FAIL;
    }
    snprintf(sp, sizeof sp, "%s/summary.txt", m.out);
    m.summary = fopen(sp, "w");
    say(&m, "\nfp8lab mechanism: %.0f s for %d runs -> %s\n", wall, m.nruns, m.out);
    mech_verdict v;
    memset(&v, 0, sizeof v);
    v.doc = json_object();
    json_object_set_new(v.doc, "base_args", fl_json_string(args));
    json_object_set_new(v.doc, "horizon_tau", json_real(m.horizon_tau));
    json_object_set_new(v.doc, "steps", json_integer((json_int_t)m.base.steps));
    json_object_set_new(v.doc, "wall_s", json_real(wall));
    const mrun *sw = &m.runs[find_run(&m, "swiglu-bf16")], *ge = &m.runs[find_run(&m, "gelu-bf16")];
    judge_p0(&m, &v, sw, ge);
    judge_p1(&m, &v, sw, &m.runs[find_run(&m, "swiglu-bf16-wd0")]);
    judge_p2(&m, &v, sw, ge);
    judge_p3(&m, &v);
    judge_p4(&m, &v);
    judge_p5(&m, &v);
    int all = 1, failed = 0;
    for (int k = 0; k < 6; k++) {
        all &= v.ok[k];
        failed |= !v.ok[k] && !v.inconclusive[k];
    }
    say(&m, "  predictions held: P0 %s, P1 %s, P2 %s, P3 %s, P4 %s, P5 %s\n", judged(&v, 0), judged(&v, 1), judged(&v, 2),
        judged(&v, 3), judged(&v, 4), judged(&v, 5));
    char p[DIR_MAX + 32], err[4600];
    snprintf(p, sizeof p, "%s/mechanism.json", m.out);
    int werr = fl_write_atomic(p, fill_json, v.doc, err, sizeof err);
    if (!werr) {
        snprintf(p, sizeof p, "%s/dose.csv", m.out);
        werr = fl_write_atomic(p, fill_dose, &m, err, sizeof err);
    }
    if (!werr) {
        snprintf(p, sizeof p, "%s/staleness.csv", m.out);
        werr = fl_write_atomic(p, fill_stale, &m, err, sizeof err);
    }
    if (werr)
        fprintf(stderr, "fp8lab mechanism: %s\n", err);
    json_decref(v.doc);
    const int prc = werr ? -1 : mech_plots(&m);
    if (!prc)
        say(&m, "  plots: %s/{dose,dose_tau,dose_align,interventions,staleness}.png, %s/attribution-{swiglu,gelu}/\n", m.out, m.out);
    mech_free(&m);
    if (werr || prc)
        return FL_EXIT_FAIL;
    return all ? FL_EXIT_OK : failed ? FL_EXIT_GATE : FL_EXIT_INCONCLUSIVE;
}
