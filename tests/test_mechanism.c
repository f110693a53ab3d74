/* test_mechanism.c — the tools of the mechanism experiments (TRAINING.md, "The mechanism").
 *
 *  1. Per-channel telemetry (channels.h) against a direct recomputation on a small SwiGLU and GeLU
 *     model (fp32 recipe): the FC output in double from the FFN input and the weights, h from it,
 *     per-channel maxima of |h|, |gate|, |up|, |cos(w_gate, w_up)| and the norms, within 1e-5
 *     relative; the channels.csv rows print those values; a record is set when, and only when, the
 *     amax exceeds the running maximum; records.csv names the channel with the largest amax, its
 *     alignment rank and the quantiles.
 *  2. Decorrelation: |cos(w_gate,i, w_up,i)| < 1e-6 after, ||w_up,i|| kept to 1e-6 relative, the
 *     channel's AdamW moment rows zeroed, every other weight untouched; top-K picks the K largest
 *     alignments, random-K K distinct channels, the same for the same seed.
 *  3. The weight-decay clock: fl_train_tau_step is the first step where fl_train_tau_at reaches x;
 *     the demo's schedule gives 383 steps for 1 tau.  mech.h: late growth and jump of constructed
 *     series, the late-regime rule, NaN rows skipped.
 *  4. Through the CLI: a fork at step 20 of a run under the paper's recipe (stochastic rounding
 *     keyed by seed and step) with no change continues it exactly: metrics.csv, sites.csv,
 *     channels.csv and records.csv rows from step 20 are byte-identical to the parent's, and
 *     config.json records the origin.  A fork that changes the seed or the width, or decorrelates a
 *     GeLU, exits 2 before writing its folder.  --decorrelate top:2 writes intervention.csv.
 *  5. `fp8lab mechanism` on a tiny model, killed with SIGKILL (the process group) once a trajectory
 *     is mid-way, and run again: that trajectory is resumed from its checkpoint, and the runs'
 *     metrics.csv and channels.csv and dose.csv end byte-identical to an uninterrupted run's.
 * Needs the CLI for 4 and 5: $FP8LAB (tests/run.sh sets it), default build/fp8lab.
 */
#include "check.h"
#include "model_test.h"
#include "cli_test.h"
#include "train/channels.h"
#include "train/mech.h"
#include "train/train.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>

static char tmpdir[256];

/* ---- 1. per-channel telemetry ---------------------------------------------------------------- */

typedef test_model small_model;

static void small_init(small_model *s, const char *act, uint32_t F)
{
    fl_model_cfg cfg = { .V = 32, .C = 12, .L = 2, .H = 2, .F = F, .T = 9, .B = 3, .init_std = 0.3f };
    CHECK(!fl_act_parse(&cfg.act, act), "parse %s", act);
    test_model_init(s, &cfg, FL_RECIPE_FP32, 11);
}

static int close_rel(double a, double b, double tol) { return fabs(a - b) <= tol * fmax(fabs(b), 1e-30); }

static void check_channels(const char *act)
{
    small_model s;
    const uint32_t F = 20;
    small_init(&s, act, F);
    fl_model *m = &s.m;
    const size_t C = m->cfg.C, N = (size_t)m->cfg.B * m->cfg.T;
    const int gated = fl_act_gated(m->cfg.act);
    uint16_t tok[3 * 10];
    for (int i = 0; i < 30; i++)
        tok[i] = (uint16_t)((i * 7 + 3) % 32);
    fl_recipe_step_begin(&s.rec, 0);
    m->chan_on = 2;
    fl_model_forward(m, tok);
    fl_recipe_step_end(&s.rec);
    for (uint32_t l = 0; l < m->cfg.L; l++) {
        CHECK(m->chan_have[l] && m->chan_record[l], "%s layer %u: the first step is captured and a record", act, l);
        const float *x = m->ln2 + l * N * C, *W = m->p[FL_P_WFC] + (size_t)l * (gated ? 2 : 1) * F * C;
        float align[64], wnorm[64];
        fl_chan_weights(align, wnorm, m, l);
        double amax_all = 0;
        for (size_t i = 0; i < F; i++) {
            double am = 0, gm = 0, um = 0, gg = 0, uu = 0, gu = 0;
            for (size_t k = 0; k < C; k++) {
                gg += (double)W[i * C + k] * W[i * C + k];
                if (gated) {
                    uu += (double)W[(F + i) * C + k] * W[(F + i) * C + k];
                    gu += (double)W[i * C + k] * W[(F + i) * C + k];
                }
            }
            for (size_t n = 0; n < N; n++) {
                double g = 0, u = 0;
                for (size_t k = 0; k < C; k++) {
                    g += (double)x[n * C + k] * W[i * C + k];
                    if (gated)
                        u += (double)x[n * C + k] * W[(F + i) * C + k];
                }
                const double h = gated ? g / (1 + exp(-g)) * u : 0.5 * g * (1 + erf(g / sqrt(2.0)));
                am = fmax(am, fabs(h));
                gm = fmax(gm, fabs(g));
                um = fmax(um, fabs(u));
            }
            amax_all = fmax(amax_all, am);
            const size_t j = l * F + i;
            CHECK(close_rel(m->chan_amax[j], am, 1e-5), "%s L%u ch %zu: amax %.9g, recomputed %.9g", act, l, i, m->chan_amax[j], am);
            CHECK(close_rel(m->chan_gmax[j], gm, 1e-5), "%s L%u ch %zu: gate max %.9g vs %.9g", act, l, i, m->chan_gmax[j], gm);
            CHECK(gated ? close_rel(m->chan_umax[j], um, 1e-5) : m->chan_umax[j] == 0.0f, "%s L%u ch %zu: up max", act, l, i);
            const double al = gated ? fabs(gu) / sqrt(gg * uu) : 0.0, wn = gated ? sqrt(gg) * sqrt(uu) : sqrt(gg);
            CHECK(fabs(align[i] - al) <= 1e-6 && close_rel(wnorm[i], wn, 1e-6), "%s L%u ch %zu: align %.9g vs %.9g, wnorm %.9g vs %.9g",
                  act, l, i, align[i], al, wnorm[i], wn);
        }
        CHECK(close_rel(m->ffn[l].act_amax, amax_all, 1e-5), "%s L%u: the layer amax is the channels' max", act, l);
    }
    /* the rows it prints: channels.csv parses back to the captured values; records.csv names the
       channel with the largest amax */
    char pc[300], pr[300];
    snprintf(pc, sizeof pc, "%s/ch-%s.csv", tmpdir, act);
    snprintf(pr, sizeof pr, "%s/rec-%s.csv", tmpdir, act);
    FILE *fc = fopen(pc, "w"), *fr = fopen(pr, "w");
    CHECK(fc && fr, "open");
    fl_chan_headers(fc, fr);
    fl_chan_rows(fc, fr, 7, m, 1);
    fclose(fc);
    fclose(fr);
    fc = fopen(pc, "r");
    char line[512];
    CHECK(fgets(line, sizeof line, fc) && !strcmp(line, "step,layer,channel,amax,align,wnorm,gate_max,up_max\n"), "header");
    for (uint32_t l = 0; l < m->cfg.L; l++)
        for (uint32_t i = 0; i < F; i++) {
            unsigned long long st;
            unsigned ll, ii;
            float a, al, wn, g, u;
            CHECK(fgets(line, sizeof line, fc) && sscanf(line, "%llu,%u,%u,%g,%g,%g,%g,%g", &st, &ll, &ii, &a, &al, &wn, &g, &u) == 8,
                  "row %u %u", l, i);
            CHECK(st == 7 && ll == l && ii == i && a == m->chan_amax[l * F + i] && g == m->chan_gmax[l * F + i], "row %u %u values", l, i);
        }
    CHECK(!fgets(line, sizeof line, fc), "no extra channel rows");
    fclose(fc);
    fr = fopen(pr, "r");
    CHECK(fgets(line, sizeof line, fr), "records header");
    for (uint32_t l = 0; l < m->cfg.L; l++) {
        unsigned long long st;
        unsigned ll, ch, rank;
        float amax, prev, al;
        CHECK(fgets(line, sizeof line, fr) && sscanf(line, "%llu,%u,%g,%g,%u,%g,%u", &st, &ll, &amax, &prev, &ch, &al, &rank) == 7, "record row");
        size_t arg = 0;
        for (size_t i = 1; i < F; i++)
            if (m->chan_amax[l * F + i] > m->chan_amax[l * F + arg])
                arg = i;
        float align[64], wnorm[64];
        fl_chan_weights(align, wnorm, m, l);
        unsigned above = 0;
        for (size_t i = 0; i < F; i++)
            above += align[i] > align[arg] || (align[i] == align[arg] && i < arg);
        CHECK(ll == l && ch == arg && amax == m->ffn[l].act_amax && prev == 0.0f && rank == above,
              "%s record of layer %u: channel %u (want %zu), rank %u (want %u)", act, l, ch, arg, rank, above);
    }
    fclose(fr);
    /* the same batch again: no record (equal, not greater); scaled inputs: a record */
    fl_recipe_step_begin(&s.rec, 0);
    m->chan_on = 1;
    fl_model_forward(m, tok);
    fl_recipe_step_end(&s.rec);
    for (uint32_t l = 0; l < m->cfg.L; l++)
        CHECK(!m->chan_record[l] && !m->chan_have[l], "%s layer %u: an equal amax is no record", act, l);
    for (size_t i = 0; i < m->sizes[FL_P_LN2]; i++)
        m->p[FL_P_LN2][i] *= 1.5f;
    fl_recipe_step_begin(&s.rec, 0);
    fl_model_forward(m, tok);
    fl_recipe_step_end(&s.rec);
    for (uint32_t l = 0; l < m->cfg.L; l++)
        CHECK(!m->chan_record[l] || m->chan_have[l], "%s layer %u: a record is captured", act, l);
    CHECK(m->chan_record[m->cfg.L - 1] || m->chan_record[0], "%s: larger inputs set a record", act);
    test_model_free(&s);
}

/* ---- 2. decorrelation --------------------------------------------------------------------------- */

static void check_decorrelate(void)
{
    small_model s;
    const uint32_t F = 24;
    small_init(&s, "swiglu", F);
    fl_model *m = &s.m;
    const size_t C = m->cfg.C;
    float *am = malloc(m->nparams * sizeof *am), *av = malloc(m->nparams * sizeof *av);
    float *before = malloc(m->nparams * sizeof *before);
    CHECK(am && av && before, "alloc");
    for (size_t i = 0; i < m->nparams; i++)
        am[i] = av[i] = 0.25f;
    /* make some channels aligned: w_up = 0.9 w_gate + noise */
    for (uint32_t i = 0; i < F; i += 5) {
        float *g = m->p[FL_P_WFC] + (size_t)i * C, *u = g + F * C;
        for (size_t k = 0; k < C; k++)
            u[k] = 0.9f * g[k] + 0.01f * u[k];
    }
    float align[64], wnorm[64];
    fl_chan_weights(align, wnorm, m, 0);
    uint32_t top[4], r1[4], r2[4], r3[4];
    fl_chan_pick(top, m, 0, 4, FL_DECOR_TOP, 5);
    for (int j = 0; j < 4; j++) /* the 4 largest alignments: nothing outside beats one inside */
        for (uint32_t i = 0; i < F; i++) {
            int in = 0;
            for (int q = 0; q < 4; q++)
                in |= top[q] == i;
            CHECK(in || align[i] <= align[top[j]], "top-4 pick: channel %u (%.6f) beats picked %u (%.6f)", i, align[i], top[j], align[top[j]]);
        }
    fl_chan_pick(r1, m, 0, 4, FL_DECOR_RANDOM, 5);
    fl_chan_pick(r2, m, 0, 4, FL_DECOR_RANDOM, 5);
    fl_chan_pick(r3, m, 0, 4, FL_DECOR_RANDOM, 6);
    CHECK(!memcmp(r1, r2, sizeof r1) && memcmp(r1, r3, sizeof r1), "random picks: the same for a seed, another for another seed");
    for (int j = 0; j < 3; j++)
        CHECK(r1[j] < r1[j + 1] && r1[3] < F, "random picks distinct and ascending");
    memcpy(before, m->params, m->nparams * sizeof *before);
    for (int j = 0; j < 4; j++) {
        const uint32_t i = top[j];
        const double c = fl_chan_decorrelate(m, am, av, 0, i, 99);
        const float *g = m->p[FL_P_WFC] + (size_t)i * C, *u = g + F * C;
        double gu = 0, gg = 0, uu = 0, uu0 = 0;
        for (size_t k = 0; k < C; k++) {
            gu += (double)g[k] * u[k];
            gg += (double)g[k] * g[k];
            uu += (double)u[k] * u[k];
            uu0 += (double)before[u - m->params + k] * before[u - m->params + k];
        }
        CHECK(fabs(gu) / sqrt(gg * uu) < 1e-6 && c < 1e-6, "channel %u: |cos| after %.3g (returned %.3g)", i, fabs(gu) / sqrt(gg * uu), c);
        CHECK(fabs(sqrt(uu) / sqrt(uu0) - 1) < 1e-6, "channel %u: norm %.9g, before %.9g", i, sqrt(uu), sqrt(uu0));
        const size_t off = (size_t)(u - m->params);
        for (size_t k = 0; k < C; k++)
            CHECK(am[off + k] == 0.0f && av[off + k] == 0.0f, "channel %u: its moments are zeroed", i);
    }
    size_t changed = 0, mom = 0;
    for (size_t i = 0; i < m->nparams; i++) {
        changed += m->params[i] != before[i];
        mom += am[i] != 0.25f;
    }
    CHECK(changed <= 4 * C && mom == 4 * C, "only the 4 up rows changed (%zu weights, %zu moments)", changed, mom);
    free(am), free(av), free(before);
    test_model_free(&s);
}

/* ---- 3. the clock and mech.h ------------------------------------------------------------------- */

static void check_clock(void)
{
    fl_train_cfg c;
    fl_train_cfg_default(&c);
    c.lr = 3e-3f;
    c.wd = 1.0f;
    c.schedule = FL_SCHED_CONSTANT;
    c.warmup = 100;
    c.steps = 20000;
    CHECK(fl_train_tau_step(&c, 1.0) == 383, "1 tau of the demo's schedule: %llu steps", (unsigned long long)fl_train_tau_step(&c, 1.0));
    for (double x = 0.5; x < 40; x *= 1.7) {
        const uint64_t s = fl_train_tau_step(&c, x);
        CHECK(fl_train_tau_at(&c, s) >= x && fl_train_tau_at(&c, s - 1) < x, "tau_step(%g) = %llu is the first step", x, (unsigned long long)s);
    }
    c.wd = 0.0f;
    CHECK(fl_train_tau_step(&c, 1.0) == c.steps + 1, "wd 0 never reaches 1 tau");

    enum { N = 400 };
    double amax[N], tau[N];
    for (int t = 0; t < N; t++) {
        tau[t] = 0.01 * t;
        amax[t] = t < 200 ? 1.0 + 0.001 * t : 2.0;
    }
    amax[300] = 30.0;
    amax[250] = NAN;
    fl_late l;
    fl_late_measure(&l, amax, tau, N);
    CHECK(l.early_max == 1.0 + 0.001 * 199 && l.late_max == 30.0, "early %.9g, late %.9g", l.early_max, l.late_max);
    CHECK(fabs(l.growth - 30.0 / 1.199) < 1e-12 && l.jump == 15.0 && l.jump_at == 300, "growth %.9g, jump %.9g at %ld", l.growth, l.jump, l.jump_at);
    fl_late g = l;
    g.growth = 9.9;
    g.jump = 9.9;
    CHECK(fl_late_any(&l) && !fl_late_any(&g) && fl_late_regime(&l, &g) && !fl_late_regime(&g, &l) && !fl_late_regime(&l, &l), "the rule");
    amax[300] = 2.0;
    fl_late_measure(&l, amax, tau, N);
    CHECK(!fl_late_any(&l) && fabs(l.jump - 2.0 / 1.199) < 1e-12, "no late regime without the spike (jump %.9g)", l.jump);
    CHECK(fl_tau_row(tau, N, 2.0) == 200 && fl_tau_row(tau, N, 9.0) == N, "tau rows");
    CHECK(fl_median_range(amax, 0, 3) == 1.001 && isnan(fl_median_range(amax, 250, 251)), "median");

    /* the decision rules, at their boundaries and with NaN */
    CHECK(fl_p1_alignment(0.6, 0.7, 0.7, 0.69) && !fl_p1_alignment(0.7, 0.7, 0.7, 0.6) && !fl_p1_alignment(0.6, 0.7, 0.6, 0.6) &&
          !fl_p1_alignment(NAN, 0.7, 0.7, 0.6), "P1");
    int p2[4];
    CHECK(fl_p2_attribution(p2, 0.1, 0.02, 0.31, 2.0, 1.0, 1), "P2 held");
    CHECK(!fl_p2_attribution(p2, 0.099, 0.02, 0.31, 2.0, 1.0, 1) && !p2[0] && p2[1] && p2[2] && p2[3], "P2 records at 4.95x chance");
    CHECK(!fl_p2_attribution(p2, 0.1, 0.02, 0.3, 2.0, 1.0, 1) && !p2[1], "P2 rho 0.3 is not > 0.3");
    CHECK(fl_p2_attribution(p2, 0.1, 0.02, 0.5, 2.5, 0.5, 1) && !fl_p2_attribution(p2, 0.1, 0.02, 0.5, 2.51, 1.0, 1) &&
          !fl_p2_attribution(p2, 0.1, 0.02, 0.5, 2.0, 1.51, 1) && !fl_p2_attribution(p2, 0.1, 0.02, 0.5, 2.0, 1.0, 0) &&
          !fl_p2_attribution(p2, NAN, 0.02, 0.5, 2.0, 1.0, 1) && !p2[0], "P2 slope bounds, lag 0, NaN");
    const int ge[4] = { 0, 1, 0, 1 }, f1[4] = { 0, 0, 1, 0 }, f2[4] = { 1, 0, 0, 0 }, f3[4] = { 0, 1, 1, 0 };
    const double ta[4] = { 2, 2, 4, 4 };
    int p3[2];
    CHECK(fl_p3_forks(p3, ge, ta, f1, 4) && p3[0] && !p3[1], "P3: a late SwiGLU fork fails, no GeLU fork");
    CHECK(!fl_p3_forks(p3, ge, ta, f2, 4) && !p3[0] && !p3[1], "P3: only an early SwiGLU fork fails");
    CHECK(!fl_p3_forks(p3, ge, ta, f3, 4) && p3[0] && p3[1], "P3: a GeLU fork fails too");
    int p4[3];
    CHECK(fl_p4_interventions(p4, 0.5, 0, 0.8, 0.05, 0.1, 1.0, 2.0), "P4 at its boundaries");
    CHECK(!fl_p4_interventions(p4, 0.5, 1, 0.8, 0.05, 0.1, 1.0, 2.0) && !p4[0] && p4[1] && p4[2], "P4 the FP8 top arm failed");
    CHECK(!fl_p4_interventions(p4, 0.4, 0, 0.79, 0.05, 0.1, 1.0, 2.0) && !p4[1], "P4 random below 0.8");
    CHECK(!fl_p4_interventions(p4, 0.4, 0, 0.9, 0.051, 0.1, 1.0, 2.0) && !p4[2] &&
          !fl_p4_interventions(p4, 0.4, 0, 0.9, 0.05, 0.1, 1.01, 2.0) && !p4[2], "P4 wd off not halving");
    const double d1[4] = { 1, 2, 3, 4 }, d2[4] = { 2.1, 3, 3.5, 4 }, d3[4] = { 1, 3, 2, 4 };
    CHECK(fl_p5_dose(d1) && !fl_p5_dose(d2) && !fl_p5_dose(d3), "P5");
}

/* ---- 4. forks through the CLI ------------------------------------------------------------------ */

#define TINY "--width", "16", "--layers", "2", "--heads", "2", "--ffn", "32", "--seq", "16", "--batch", "4", \
             "--data-len", "20000", "--log-every", "7", "--threads", "1", "--quiet"
#define PAPER "--recipe", "fp8-delayed", "--pow2", "--amax-history", "1", "--grad-sr"

/* The rows of a CSV file from those with first field >= step (header dropped), as one string. */
static char *rows_from(const char *path, long step)
{
    size_t n;
    char *t = slurp(path, &n);
    CHECK(t, "read %s", path);
    char *out = calloc(n + 1, 1), *w = out;
    const char *p = strchr(t, '\n');
    p = p ? p + 1 : t + n;
    while (*p) {
        const char *e = strchr(p, '\n');
        const size_t len = e ? (size_t)(e - p + 1) : strlen(p);
        if (atol(p) >= step) {
            memcpy(w, p, len);
            w += len;
        }
        p += len;
    }
    free(t);
    return out;
}

static void same_rows(const char *parent, const char *fork, const char *file, long step)
{
    char a[400], b[400];
    snprintf(a, sizeof a, "%s/%s", parent, file);
    snprintf(b, sizeof b, "%s/%s", fork, file);
    char *x = rows_from(a, step), *y = rows_from(b, 0);
    CHECK(strlen(y) > 0 && !strcmp(x, y), "%s: the fork's rows differ from the parent's from step %ld (%zu vs %zu bytes)", file,
          step, strlen(y), strlen(x));
    free(x);
    free(y);
}

static void check_fork(void)
{
    char p[300], f[300], ck[340], err[340], bad[300];
    snprintf(p, sizeof p, "%s/parent", tmpdir);
    snprintf(f, sizeof f, "%s/fork", tmpdir);
    snprintf(ck, sizeof ck, "%s/checkpoint-20.bin", p);
    snprintf(err, sizeof err, "%s/err.txt", tmpdir);
    snprintf(bad, sizeof bad, "%s/bad-fork", tmpdir);
    const char *pa[] = { "train", "--act", "swiglu", "--steps", "40", "--seed", "3", PAPER, TINY, "--chan-every", "5",
                         "--keep-ckpt", "20,30", "--out", p, NULL };
    CHECK(run(err, pa) == 0, "parent run");
    const char *fa[] = { "train", "--fork", ck, "--out", f, "--quiet", NULL };
    CHECK(run(err, fa) == 0, "fork run");
    const char *files[] = { "metrics.csv", "sites.csv", "channels.csv", "records.csv" };
    for (int k = 0; k < 4; k++)
        same_rows(p, f, files[k], 20);
    char cj[340];
    snprintf(cj, sizeof cj, "%s/config.json", f);
    CHECK(contains(cj, "\"fork_step\": 20") && contains(cj, "checkpoint-20.bin"), "config.json records the fork");
    /* refused before the folder exists: another seed, another width, decorrelating a GeLU */
    const char *b1[] = { "train", "--fork", ck, "--seed", "4", "--out", bad, NULL };
    const char *b2[] = { "train", "--fork", ck, "--width", "32", "--out", bad, NULL };
    const char *b3[] = { "train", "--fork", ck, "--steps", "20", "--out", bad, NULL };
    const char *b4[] = { "train", "--act", "gelu", "--fork", ck, "--decorrelate", "top:2", "--out", bad, NULL };
    const char *b5[] = { "train", "--fork", ck, "--decorrelate", "best:2", "--out", bad, NULL };
    const char *const *bads[] = { b1, b2, b3, b4, b5 };
    for (int k = 0; k < 5; k++) {
        const int rc = run(err, bads[k]);
        struct stat sb;
        CHECK(rc == 2 && stat(bad, &sb) != 0, "bad fork %d: exit %d (want 2), folder %s", k + 1, rc, stat(bad, &sb) ? "absent" : "made");
    }
    /* an intervention */
    char d[300], iv[340];
    snprintf(d, sizeof d, "%s/decor", tmpdir);
    snprintf(iv, sizeof iv, "%s/intervention.csv", d);
    const char *da[] = { "train", "--fork", ck, "--decorrelate", "top:2", "--out", d, "--quiet", NULL };
    CHECK(run(err, da) == 0, "decorrelated fork");
    size_t n;
    char *t = slurp(iv, &n);
    int lines = 0;
    for (size_t i = 0; t && i < n; i++)
        lines += t[i] == '\n';
    CHECK(t && lines == 1 + 2 * 2 && strstr(t, ",top,"), "intervention.csv: 2 channels x 2 layers");
    free(t);
}

/* ---- 5. the mechanism command resumes after SIGKILL --------------------------------------------- */

#define MTINY "mechanism", "--width", "16", "--layers", "1", "--heads", "2", "--ffn", "32", "--seq", "16", "--batch", "4", \
              "--data-len", "20000", "--lr", "0.03", "--horizon-tau", "9", "--chan-every", "10", "--jobs", "2", "--ckpt-every", "50"

static void check_mechanism_resume(void)
{
    char a[300], b[300], err[340];
    snprintf(a, sizeof a, "%s/mech-a", tmpdir);
    snprintf(b, sizeof b, "%s/mech-b", tmpdir);
    snprintf(err, sizeof err, "%s/mech-err.txt", tmpdir);
    const char *aa[] = { MTINY, "--out", a, NULL };
    const int rca = run(err, aa);
    CHECK(rca == 0 || rca == 3, "mechanism ran (exit %d)", rca);
    /* B: killed (the whole process group, children too) at a third of A's time, then run again */
    const char *ba[] = { MTINY, "--out", b, NULL };
    /* killed as soon as the second trajectory has its first checkpoint (it is then mid-way) */
    char ck[400];
    snprintf(ck, sizeof ck, "%s/gelu-bf16/checkpoint.bin", b);
    spawn_killed_when(err, ba, ck);
    const int rcb = run(err, ba);
    CHECK(rcb == rca, "the resumed mechanism exits as the uninterrupted one (%d vs %d)", rcb, rca);
    CHECK(contains(err, "resuming gelu-bf16 from its checkpoint"), "the killed trajectory was resumed, not restarted");
    const char *runs[] = { "swiglu-bf16", "gelu-bf16", "swiglu-bf16-wd0", "swiglu-fp8-at2tau", "gelu-fp8-at8tau",
                           "swiglu-fp8-at2tau-decor-top", "swiglu-bf16-at2tau-wd0" };
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        char x[400], y[400];
        snprintf(x, sizeof x, "%s/%s/metrics.csv", a, runs[k]);
        snprintf(y, sizeof y, "%s/%s/metrics.csv", b, runs[k]);
        same_file(x, y);
        snprintf(x, sizeof x, "%s/%s/channels.csv", a, runs[k]);
        snprintf(y, sizeof y, "%s/%s/channels.csv", b, runs[k]);
        same_file(x, y);
    }
    char x[400], y[400];
    snprintf(x, sizeof x, "%s/dose.csv", a);
    snprintf(y, sizeof y, "%s/dose.csv", b);
    same_file(x, y);
}

/* ---- 6. the mechanism on the GPU step's code (--device twins) ---------------------------------- */

/* The whole experiment (trajectories, forks at the tau marks, the interventions, the dose-response, the
   attribution) with every run on --device twins: it completes, with the CPU run's verdict lines, every run
   folder recording the device and holding channels.csv. */
static void check_mechanism_device(void)
{
    char a[400], t[300], err[340];
    snprintf(t, sizeof t, "%s/mech-t", tmpdir);
    snprintf(err, sizeof err, "%s/mech-t.txt", tmpdir);
    const char *ta[] = { MTINY, "--device", "twins", "--out", t, NULL };
    const int rc = run(err, ta);
    CHECK(rc == 0 || rc == 3, "mechanism --device twins ran (exit %d; %s)", rc, err);
    CHECK(contains(err, "predictions held:") && contains(err, "P4 interventions"), "its summary");
    const char *runs[] = { "swiglu-bf16", "gelu-bf16", "swiglu-fp8-at2tau", "swiglu-fp8-at2tau-decor-top",
                           "swiglu-bf16-at2tau-wd0" };
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        char p[400];
        snprintf(p, sizeof p, "%s/%s/config.json", t, runs[k]);
        CHECK(contains(p, "\"device\": \"twins\""), "%s runs on the device", p);
        snprintf(p, sizeof p, "%s/%s/channels.csv", t, runs[k]);
        CHECK(access(p, F_OK) == 0, "%s", p);
    }
    snprintf(a, sizeof a, "%s/attribution-swiglu/attrib_top_traj.csv", t);
    CHECK(access(a, F_OK) == 0, "the attribution of the device runs: %s", a);
    printf("  mechanism --device twins: every trajectory, fork and intervention on the GPU step's code, with its "
           "summary and attribution\n");
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/fl_mech_XXXXXX");
    CHECK(mkdtemp(tmpdir), "mkdtemp");
    check_channels("swiglu");
    check_channels("gelu");
    check_decorrelate();
    check_clock();
    cli = getenv("FP8LAB");
    if (!cli)
        cli = "build/fp8lab";
    if (access(cli, X_OK))
        SKIP("no CLI binary at %s (set FP8LAB); the in-process checks passed", cli);
    check_fork();
    check_mechanism_resume();
    check_mechanism_device();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    CHECK(!system(cmd), "cleanup");
    PASS("test_mechanism");
}
