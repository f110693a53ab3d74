/* test_attrib.c — the attribution analysis of `fp8lab attribute` (experiments/train/attrib.h).
 *
 *  1. Statistics: Spearman rho is 1 on a monotone pair, -1 reversed, the hand-computed 3/sqrt(10)
 *     and 8/9 with ties, NaN on a constant input or n < 3; the OLS slope of y = 2x + 3 and y = x - 5
 *     on integers is exact (2, 1; R^2 1), NaN without spread or below 3 points; top-k by key skips
 *     NaN and breaks ties by index.
 *  2. A synthetic gated run (swiglu, L = 2, F = 100, 40 logged steps every 10) written here: amax is
 *     monotone in align at every step (rho = 1) and reversed in wnorm (rho = -1); the two top-aligned
 *     channels grow as amax = c gate_max^2 (slope 2 within 1e-9), the others as c gate_max (slope 1);
 *     every record is set by the rank-0 channel (fractions 1, concentration 1); ln max amax follows
 *     the top-2% mean align two logged intervals later (best lag +2); one non-finite row is excluded
 *     and counted; --from-tau 0.01505 with constant lr * wd = 1e-4 starts at step 151.
 *  3. A gelu run (not gated): alignment results NaN / JSON null with a "why", slope 1 within 1e-9
 *     for amax = c gate_max (a channel whose ln gate_max spreads less than 0.05 has none),
 *     rho(wnorm, amax) still 1.
 *  4. Malformed channels.csv (a bad number, a missing column, steps going back, a short block):
 *     -1 and a message naming the file (and line).
 *  5. The CLI entry: --json prints JSON that parses back with the same numbers; an unknown flag and
 *     a missing folder exit 2, a folder without channels.csv exits 1, --from-tau beyond the run 2.
 * The run folders live under a mkdtemp directory in /tmp, removed at the end.
 */
#include "check.h"
#include "train/commands.h"
#include "train/attrib.h"

#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char base[] = "/tmp/fp8lab-attrib-XXXXXX";

static void check_stats(void)
{
    const double x[5] = { 1, 2, 3, 4, 5 }, y[5] = { 1, 8, 27, 64, 125 }, yr[5] = { 9, 7, 5, 3, 1 };
    CHECK(fabs(fl_spearman(x, y, 5) - 1.0) < 1e-15, "monotone: %a", fl_spearman(x, y, 5));
    CHECK(fabs(fl_spearman(x, yr, 5) + 1.0) < 1e-15, "reversed: %a", fl_spearman(x, yr, 5));
    /* ties: ranks x {1, 2.5, 2.5, 4}, y {1, 3, 2, 4}: sxy 4.5, sxx 4.5, syy 5 -> 3/sqrt(10) */
    const double tx[4] = { 1, 2, 2, 3 }, ty[4] = { 1, 3, 2, 4 };
    CHECK(fabs(fl_spearman(tx, ty, 4) - 3.0 / sqrt(10.0)) < 1e-15, "ties: %a", fl_spearman(tx, ty, 4));
    /* ties in both: ranks {1.5, 1.5, 3, 4} and {2, 1, 3.5, 3.5}: sxy 4, sxx = syy = 4.5 -> 8/9 */
    const double ux[4] = { 1, 1, 2, 3 }, uy[4] = { 2, 1, 3, 3 };
    CHECK(fabs(fl_spearman(ux, uy, 4) - 8.0 / 9.0) < 1e-15, "ties in both: %a", fl_spearman(ux, uy, 4));
    const double c[5] = { 2, 2, 2, 2, 2 };
    CHECK(isnan(fl_spearman(c, y, 5)) && isnan(fl_spearman(y, c, 5)), "constant input must give NaN");
    CHECK(isnan(fl_spearman(x, y, 2)), "n = 2 must give NaN");
    CHECK(fabs(fl_pearson(x, x, 5) - 1.0) < 1e-15 && isnan(fl_pearson(x, c, 5)), "pearson");

    double sx[10], s2[10], s1[10], r2;
    for (int i = 0; i < 10; i++) {
        sx[i] = i;
        s2[i] = 2.0 * i + 3.0;
        s1[i] = i - 5.0;
    }
    double b = fl_ols_slope(&r2, sx, s2, 10);
    CHECK(b == 2.0 && r2 == 1.0, "slope of 2x+3: %a r2 %a", b, r2);
    b = fl_ols_slope(&r2, sx, s1, 10);
    CHECK(b == 1.0 && r2 == 1.0, "slope of x-5: %a r2 %a", b, r2);
    CHECK(isnan(fl_ols_slope(&r2, c, y, 5)) && isnan(r2), "no spread must give NaN");
    CHECK(isnan(fl_ols_slope(NULL, sx, s2, 2)), "2 points must give NaN");

    const double key[6] = { 0.5, NAN, 0.9, 0.5, 0.9, 0.1 };
    int idx[6];
    const int n = fl_attrib_top(idx, key, 6, 4);
    CHECK(n == 4 && idx[0] == 2 && idx[1] == 4 && idx[2] == 0 && idx[3] == 3, "top: %d: %d %d %d %d", n, idx[0],
          idx[1], idx[2], idx[3]);
    CHECK(fl_attrib_top(idx, key, 6, 9) == 5, "top of 5 finite");
    printf("  statistics: spearman (ties), pearson, OLS slope, top-k\n");
}

/* ---- synthetic run folders ---- */

enum { RUN_OK, RUN_BADNUM, RUN_NOCOL, RUN_BACKSTEP, RUN_SHORT };
enum { AL = 2, AF = 100, AS = 40, AK = 10 }; /* run A: layers, channels, logged steps, interval */
enum { BF = 50, BS = 12, BK = 5 };           /* run B (gelu, one layer) */

static FILE *open_in(const char *dir, const char *name)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    CHECK(f, "cannot write %s", p);
    return f;
}

static void mkrun(char *dir, size_t n, const char *name)
{
    snprintf(dir, n, "%s/%s", base, name);
    CHECK(mkdir(dir, 0755) == 0, "mkdir %s", dir);
}

static void put_common(const char *dir, const char *act, int L, int F, long last_step)
{
    FILE *f = open_in(dir, "config.json");
    fprintf(f, "{\"act\": \"%s\", \"recipe\": \"bf16\", \"layers\": %d, \"ffn\": %d, \"lr\": 0.001, \"wd\": 0.1}\n", act, L, F);
    CHECK(fclose(f) == 0, "config.json");
    f = open_in(dir, "metrics.csv");
    fprintf(f, "step,loss,loss_ema,lr,grad_norm\n");
    for (long s = 0; s <= last_step; s++)
        fprintf(f, "%ld,%.9g,%.9g,0.001,1\n", s, 3.0 - s * 1e-3, 3.0);
    CHECK(fclose(f) == 0, "metrics.csv");
}

/* The top-2% mean align of run A's logged step t is aa[t + 2]; its max amax follows aa[t]. */
static double aa[AS + 2];

static void make_aa(void)
{
    uint64_t st = 0x9e3779b97f4a7c15ull;
    for (int j = 0; j < AS + 2; j++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        aa[j] = 0.8 + 0.05 * (2.0 * (double)(st >> 11) / 9007199254740992.0 - 1.0);
    }
}

/* Run A (see the header), with one fault injected into channels.csv per mode. */
static void write_run_a(const char *dir, int mode)
{
    put_common(dir, "swiglu", AL, AF, (AS - 1) * AK);
    FILE *f = open_in(dir, "channels.csv");
    fprintf(f, mode == RUN_NOCOL ? "step,layer,channel,amax,align,wnorm,up_max\n"
                                 : "step,layer,channel,amax,align,wnorm,gate_max,up_max\n");
    long row = 0;
    for (int t = 0; t < AS; t++) {
        const long step = mode == RUN_BACKSTEP && t == 3 ? 15 : (long)t * AK;
        const double G = round(200.0 * exp(8.0 * (aa[t] - 0.8))); /* integer: c G^2 prints exactly */
        for (int l = 0; l < AL; l++) {
            const double cl = 0.25 * (l + 1);
            for (int i = 0; i < AF; i++, row++) {
                if (mode == RUN_SHORT && t == 5 && l == 1 && i == 7)
                    continue;
                double al, g, am;
                if (i < 2) { /* the two top-aligned channels: quadratic, growing with G */
                    al = aa[t + 2] + (i ? -0.01 : 0.01);
                    g = G - i;
                    am = cl * g * g;
                } else { /* the rest: linear, below both */
                    al = 0.1 + 0.5 * i / AF;
                    g = i * (1 + t % 2);
                    am = cl * g;
                }
                if (mode == RUN_BADNUM && row == 5)
                    fprintf(f, "%ld,%d,%d,1.5x,%.9g,%.9g,%.9g,%.9g\n", step, l, i, al, 2.0 - al, g, g);
                else if (mode == RUN_NOCOL)
                    fprintf(f, "%ld,%d,%d,%.9g,%.9g,%.9g,%.9g\n", step, l, i, am, al, 2.0 - al, g);
                else if (t == 3 && l == 0 && i == 50) /* a pathological row: excluded, counted */
                    fprintf(f, "%ld,%d,%d,%.9g,%.9g,inf,%.9g,%.9g\n", step, l, i, am, al, g, g);
                else
                    fprintf(f, "%ld,%d,%d,%.9g,%.9g,%.9g,%.9g,%.9g\n", step, l, i, am, al, 2.0 - al, g, g);
            }
        }
    }
    CHECK(fclose(f) == 0, "channels.csv");
    f = open_in(dir, "records.csv");
    fprintf(f, "step,layer,amax,prev_max,channel,align,align_rank,wnorm,gate_max,up_max,q50,q90,q99\n");
    static const long rs[5] = { 5, 50, 120, 200, 333 };
    for (int k = 0; k < 5; k++)
        for (int l = 0; l < AL; l++)
            fprintf(f, "%ld,%d,%d,%d,0,0.85,0,1.15,100,100,1,2,3\n", rs[k], l, 1000 * (k + 1), 1000 * k);
    CHECK(fclose(f) == 0, "records.csv");
}

/* Run B: gelu, align 0, amax = 0.5 gate_max (slope 1), wnorm increasing with amax; channel 0 has too
   little spread of gate_max for a slope. */
static void write_run_b(const char *dir)
{
    put_common(dir, "gelu", 1, BF, (BS - 1) * BK);
    FILE *f = open_in(dir, "channels.csv");
    fprintf(f, "step,layer,channel,amax,align,wnorm,gate_max,up_max\n");
    for (int t = 0; t < BS; t++)
        for (int i = 0; i < BF; i++) {
            /* channel 0: the smallest, its ln gate_max spread (0.011) below 0.05, so it has no slope */
            const double g = i ? (i + 1) * (1 + t % 3) : 0.01 * (1 + 0.001 * t), wn = i ? i + 1 : 0.5;
            fprintf(f, "%d,0,%d,%.9g,0,%.9g,%.9g,0\n", t * BK, i, 0.5 * g, wn, g);
        }
    CHECK(fclose(f) == 0, "channels.csv");
    f = open_in(dir, "records.csv");
    fprintf(f, "step,layer,amax,prev_max,channel,align,align_rank,wnorm,gate_max,up_max,q50,q90,q99\n");
    for (int k = 0; k < 3; k++)
        fprintf(f, "%d,0,%d,%d,%d,0,0,50,1,0,1,2,3\n", 7 * k, 10 * (k + 1), 10 * k, BF - 1);
    CHECK(fclose(f) == 0, "records.csv");
}

static void check_run_a(const char *dir)
{
    char err[1024];
    fl_attrib_run run;
    CHECK(fl_attrib_load(&run, dir, err, sizeof err) == 0, "load run A: %s", err);
    CHECK(run.gated && run.L == AL && run.F == AF && run.S == AS && run.nrec == 5 * AL && run.ch_excluded == 1,
          "run A: gated %d L %d F %d S %ld records %ld excluded %ld", run.gated, run.L, run.F, run.S, run.nrec,
          run.ch_excluded);
    fl_attrib_result res;
    const fl_attrib_window all = { -1, -1, NAN };
    CHECK(fl_attrib_analyse(&res, &run, &all, err, sizeof err) == 0, "analyse: %s", err);
    CHECK(res.from == 0 && res.to == (AS - 1) * AK && res.i0 == 0 && res.i1 == AS - 1 && res.interval == AK &&
              res.k1 == 1 && res.k2 == 2 && res.excluded == 1,
          "window %ld..%ld [%ld, %ld] every %ld, k %d %d, excluded %ld", res.from, res.to, res.i0, res.i1, res.interval,
          res.k1, res.k2, res.excluded);
    const fl_attrib_stats *st[AL + 1] = { &res.layer[0], &res.layer[1], &res.pooled };
    for (int k = 0; k <= AL; k++) {
        const fl_attrib_stats *o = st[k];
        CHECK(fabs(o->rho_align.median - 1) < 1e-12 && fabs(o->rho_align.last - 1) < 1e-12 && o->rho_align.nsteps == AS * (k == AL ? AL : 1),
              "stats %d: rho(align, amax) median %a last %a over %ld", k, o->rho_align.median, o->rho_align.last,
              o->rho_align.nsteps);
        CHECK(fabs(o->rho_wnorm.median + 1) < 1e-12 && fabs(o->rho_wnorm.last + 1) < 1e-12,
              "stats %d: rho(wnorm, amax) median %a last %a", k, o->rho_wnorm.median, o->rho_wnorm.last);
        CHECK(o->nrec == 5 * (k == AL ? AL : 1) && o->frac_top1 == 1.0 && o->frac_top2 == 1.0 && o->conc == 1.0 &&
                  o->p_top2 < 1e-8,
              "stats %d: records %ld top1 %g top2 %g conc %g p %g", k, o->nrec, o->frac_top1, o->frac_top2, o->conc, o->p_top2);
        CHECK(fabs(o->slope_top - 2.0) < 1e-9 && o->nslope_top == 2 * (k == AL ? AL : 1),
              "stats %d: top-2%% slope %.17g over %ld", k, o->slope_top, o->nslope_top);
        CHECK(fabs(o->slope_all - 1.0) < 1e-9 && o->nslope_all == AF * (k == AL ? AL : 1),
              "stats %d: all-channel slope %.17g over %ld", k, o->slope_all, o->nslope_all);
        CHECK(o->best_lag == 2 && o->best_corr > 0.99 && fabs(o->corr0) < 0.5,
              "stats %d: best lag %d r %g, lag 0 r %g", k, o->best_lag, o->best_corr, o->corr0);
    }
    CHECK(res.layer[0].top_channel == 0 && res.layer[0].pairs0 == AS - 1, "top channel %d pairs %ld",
          res.layer[0].top_channel, res.layer[0].pairs0);
    CHECK(fabs(res.chance1 - 0.01) < 1e-15 && fabs(res.chance2 - 0.02) < 1e-15, "chance %g %g", res.chance1, res.chance2);
    CHECK(strstr(res.conclusion, "ARE concentrated") && strstr(res.conclusion, "lead amax"), "conclusion: %s", res.conclusion);
    fl_attrib_result_free(&res);

    /* --from-tau: t/tau(step) = step * lr * wd = step * 1e-4: 0.01505 -> step 151, first logged 160 */
    const fl_attrib_window tw = { -1, -1, 0.01505 };
    CHECK(fl_attrib_analyse(&res, &run, &tw, err, sizeof err) == 0, "from-tau: %s", err);
    CHECK(res.from == 151 && run.lstep[res.i0] == 160 && fabs(res.tau_from - 0.0151) < 1e-12 && res.pooled.nrec == 2 * AL,
          "from-tau 0.01505: from %ld first logged %ld tau %.17g records %ld", res.from, run.lstep[res.i0], res.tau_from,
          res.pooled.nrec);
    fl_attrib_result_free(&res);
    const fl_attrib_window far = { -1, -1, 5.0 }, empty = { 391, 395, NAN }, sub = { 100, 199, NAN };
    CHECK(fl_attrib_analyse(&res, &run, &far, err, sizeof err) == -1 && strstr(err, "t/tau"), "tau beyond the run: %s", err);
    CHECK(fl_attrib_analyse(&res, &run, &empty, err, sizeof err) == -1 && strstr(err, "no logged step"), "empty: %s", err);
    CHECK(fl_attrib_analyse(&res, &run, &sub, err, sizeof err) == 0 && run.lstep[res.i0] == 100 &&
              run.lstep[res.i1] == 190 && res.pooled.nrec == 1 * AL,
          "window 100..199: %ld..%ld records %ld", run.lstep[res.i0], run.lstep[res.i1], res.pooled.nrec);
    fl_attrib_result_free(&res);
    /* a slope needs 5 points: 5 logged steps give one per channel, 4 none */
    const fl_attrib_window five = { 100, 140, NAN }, four = { 100, 130, NAN };
    CHECK(fl_attrib_analyse(&res, &run, &five, err, sizeof err) == 0 && res.pooled.nslope_all == AF * AL &&
              fabs(res.pooled.slope_top - 2.0) < 1e-9,
          "5 logged steps: %ld slopes, top %g", res.pooled.nslope_all, res.pooled.slope_top);
    fl_attrib_result_free(&res);
    CHECK(fl_attrib_analyse(&res, &run, &four, err, sizeof err) == 0 && res.pooled.nslope_all == 0 &&
              isnan(res.pooled.slope_all),
          "4 logged steps: %ld slopes", res.pooled.nslope_all);
    fl_attrib_result_free(&res);
    fl_attrib_free(&run);
    printf("  run A (swiglu): rho +1 / -1, records in rank 0 (fraction 1), slopes 2 and 1, best lag +2, from-tau -> step 151\n");
}

static void check_run_b(const char *dir)
{
    char err[1024];
    fl_attrib_run run;
    CHECK(fl_attrib_load(&run, dir, err, sizeof err) == 0, "load run B: %s", err);
    CHECK(!run.gated && !strcmp(run.act, "gelu"), "gelu: gated %d act %s", run.gated, run.act);
    fl_attrib_result res;
    const fl_attrib_window all = { -1, -1, NAN };
    CHECK(fl_attrib_analyse(&res, &run, &all, err, sizeof err) == 0, "analyse: %s", err);
    const fl_attrib_stats *o = &res.pooled;
    CHECK(isnan(o->rho_align.median) && isnan(o->rho_align.last) && o->rho_align.nsteps == 0, "gelu rho(align) not null");
    CHECK(isnan(o->frac_top1) && isnan(o->frac_top2) && isnan(o->p_top2) && o->nrec == 3 && o->conc == 1.0,
          "gelu records: %g %g n %ld conc %g", o->frac_top1, o->frac_top2, o->nrec, o->conc);
    CHECK(isnan(o->slope_top) && o->nslope_top == 0 && fabs(o->slope_all - 1.0) < 1e-9 && o->nslope_all == BF - 1,
          "gelu slopes: top %g (%ld) all %.17g (%ld)", o->slope_top, o->nslope_top, o->slope_all, o->nslope_all);
    CHECK(isnan(o->best_corr) && fabs(o->rho_wnorm.median - 1.0) < 1e-12, "gelu lead/lag %g, rho(wnorm) %g", o->best_corr,
          o->rho_wnorm.median);
    json_t *j = fl_attrib_json(&res, &run, dir);
    json_t *ra = json_object_get(json_object_get(j, "pooled"), "rho_align_amax");
    json_t *rec = json_object_get(json_object_get(json_array_get(json_object_get(j, "per_layer"), 0), "records"), "frac_top2pct");
    CHECK(json_is_null(json_object_get(ra, "median")) && json_is_string(json_object_get(ra, "why")) && json_is_null(rec),
          "gelu JSON: alignment results must be null with a why");
    /* a NaN would have been no value at all (json_real(NAN) is NULL): every key is there, as null */
    json_t *sl = json_object_get(json_object_get(j, "pooled"), "slope");
    CHECK(json_object_size(sl) == 6 && json_is_null(json_object_get(sl, "top2pct_median")) &&
              json_is_real(json_object_get(sl, "all_median")),
          "gelu JSON: slope object");
    json_decref(j);
    fl_attrib_result_free(&res);
    fl_attrib_free(&run);
    printf("  run B (gelu): alignment null, slope 1, rho(wnorm, amax) +1\n");
}

static void check_malformed(void)
{
    static const struct {
        int mode;
        const char *name, *want;
    } cases[] = {
        { RUN_BADNUM, "badnum", "channels.csv:7: column 'amax': bad number '1.5x'" },
        { RUN_NOCOL, "nocol", "channels.csv:1: header lacks the column 'gate_max'" },
        { RUN_BACKSTEP, "backstep", "steps not increasing: step 15 after step 20" },
        { RUN_SHORT, "short", "step 60 begins before step 50 has its L*F = 200 rows (it has 199)" },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char dir[128], err[1024] = "";
        mkrun(dir, sizeof dir, cases[k].name);
        write_run_a(dir, cases[k].mode);
        fl_attrib_run run;
        CHECK(fl_attrib_load(&run, dir, err, sizeof err) == -1, "%s: loaded", cases[k].name);
        CHECK(strstr(err, "channels.csv") && strstr(err, cases[k].want), "%s: message '%s' lacks '%s'", cases[k].name,
              err, cases[k].want);
        CHECK(run.ch[0] == NULL && run.S == 0, "%s: not freed", cases[k].name);
    }
    printf("  malformed channels.csv: bad number, missing column, steps back, short block\n");
}

/* fl_cmd_attribute with stdout into out (or /dev/null) and stderr into /dev/null. */
static int cli(const char *out, char **argv)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    fflush(stdout);
    fflush(stderr);
    const int so = dup(1), se = dup(2);
    const int fo = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open("/dev/null", O_WRONLY);
    CHECK(so >= 0 && se >= 0 && fo >= 0 && fe >= 0, "redirect");
    dup2(fo, 1);
    dup2(fe, 2);
    const int rc = fl_cmd_attribute(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, 1);
    dup2(se, 2);
    close(so), close(se), close(fo), close(fe);
    return rc;
}

static void check_cli(const char *dir_a)
{
    char out[128], nochan[128];
    snprintf(out, sizeof out, "%s/out.json", base);
    char *js[] = { "attribute", (char *)dir_a, "--json", NULL };
    CHECK(cli(out, js) == 0, "attribute --json: nonzero exit");
    json_error_t je;
    json_t *j = json_load_file(out, 0, &je);
    CHECK(j, "attribute --json: not JSON: %s", je.text);
    json_t *p = json_object_get(j, "pooled");
    CHECK(json_real_value(json_object_get(json_object_get(p, "records"), "frac_top2pct")) == 1.0 &&
              json_integer_value(json_object_get(json_object_get(p, "lead_lag"), "best_lag")) == 2 &&
              json_array_size(json_object_get(j, "per_layer")) == AL &&
              json_array_size(json_object_get(json_object_get(p, "lead_lag"), "corr_by_lag")) == FL_ATTRIB_NLAG &&
              json_is_string(json_object_get(j, "conclusion")),
          "attribute --json: fields");
    json_decref(j);
    char *txt[] = { "attribute", (char *)dir_a, "--from", "100", "--to", "300", NULL };
    CHECK(cli(NULL, txt) == 0, "attribute (text) --from --to");
    char *bogus[] = { "attribute", (char *)dir_a, "--bogus", NULL };
    CHECK(cli(NULL, bogus) == 2, "unknown flag must exit 2");
    char *missing[] = { "attribute", "/nonexistent/fp8lab-run", NULL };
    CHECK(cli(NULL, missing) == 2, "a missing folder must exit 2");
    char *tau[] = { "attribute", (char *)dir_a, "--from-tau", "5", NULL };
    CHECK(cli(NULL, tau) == 2, "--from-tau beyond the run must exit 2");
    char *both[] = { "attribute", (char *)dir_a, "--from-tau", "0.01", "--from", "3", NULL };
    CHECK(cli(NULL, both) == 2, "--from with --from-tau must exit 2");
    mkrun(nochan, sizeof nochan, "nochan");
    put_common(nochan, "swiglu", 1, 10, 10);
    char *nc[] = { "attribute", nochan, NULL };
    CHECK(cli(NULL, nc) == 1, "a folder without channels.csv must exit 1");
    printf("  CLI: --json parses back; exits 2 (unknown flag, missing folder, bad window), 1 (no channels.csv)\n");
}

int main(void)
{
    CHECK(mkdtemp(base), "mkdtemp");
    check_stats();
    make_aa();
    char a[128], b[128];
    mkrun(a, sizeof a, "a");
    write_run_a(a, RUN_OK);
    check_run_a(a);
    mkrun(b, sizeof b, "b");
    write_run_b(b);
    check_run_b(b);
    check_malformed();
    check_cli(a);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    CHECK(system(cmd) == 0, "cleanup");
    PASS("test_attrib");
}
