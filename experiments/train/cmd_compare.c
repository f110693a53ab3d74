/* cmd_compare.c — `fp8lab compare REF TEST --envelope DIR...`: whether a run's loss stays within the
 * summation-order envelope of a reference run (verdict.h, fl_loss_envelope).  The judgement is
 * verdict.c's; this file reads the runs, prints, and sets the exit status. */
#include "commands.h"
#include "common/cli.h"
#include "runcsv.h"
#include "verdict.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const help =
    "usage: fp8lab compare REF TEST --envelope DIR [--envelope DIR ...] [--bound window|running] [--factor F]\n"
    "                      [--floor-ulps U] [--json]\n"
    "\n"
    "Whether run TEST follows run REF as closely as a change of summation order allows.  REF, TEST and\n"
    "every DIR are folders of 'fp8lab train'; each DIR is REF's configuration rerun with another order\n"
    "of its sums (e.g. --gemm-kchunk K --attn-kchunk K, K = 16, 64, 256).  On the steps that every run logged\n"
    "(metrics.csv; --log-every 1 for all of them):\n"
    "  e_t      the largest |loss_DIR - loss_REF| over the DIRs and the steps up to t\n"
    "  bound    F * max(e_last, U ulps of REF's float32 loss): one bound for the whole window, e_last the\n"
    "           envelope's largest finite value (--bound\n"
    "           window, the default), or F * max(e_t, U ulps) at each step t (--bound running)\n"
    "  AGREE         |loss_TEST - loss_REF| <= bound_t at every step\n"
    "  DISAGREE      some step outside its bound (the first and the worst are named)\n"
    "  UNDETERMINED  none outside, but a DIR or REF has a non-finite loss, so some bound is unknown\n"
    "A key of config.json in which TEST or a DIR differs from REF (gemm_kchunk, attn_kchunk aside) is listed: a\n"
    "different seed or recipe is a negative control, not a change of order.\n"
    "  --bound MODE    window (default) or running (TRAINING.md: the running bound under-covered the\n"
    "                  early steps of FP8 runs)\n"
    "  --factor F      the bound's factor over the envelope (default 4; TRAINING.md derives it)\n"
    "  --floor-ulps U  the smallest envelope, in float32 ulps of the loss (default 4)\n"
    "  --json          the report as JSON\n"
    "Exit status: 0 AGREE, 3 DISAGREE, 4 UNDETERMINED, 1 a missing or malformed run file (named),\n"
    "2 bad usage.\n";

enum { MAX_ENV = 16 };

typedef struct {
    const char *dir;
    long n;
    long *step;
    double *loss;
    json_t *cfg;
} run_t;

static void run_free(run_t *r)
{
    free(r->step);
    free(r->loss);
    json_decref(r->cfg);
}

/* metrics.csv's step and loss columns and config.json of the run in r->dir. */
static int run_load(run_t *r, char *err, size_t errn)
{
    if (fl_csv_series(r->dir, "metrics.csv", "loss", NULL, NULL, &r->step, &r->loss, &r->n, err, errn))
        return -1;
    char p[4200];
    json_error_t je;
    snprintf(p, sizeof p, "%s/config.json", r->dir);
    r->cfg = json_load_file(p, 0, &je);
    if (!json_is_object(r->cfg)) {
        snprintf(err, errn, "%s: %s", p, r->cfg ? "not a JSON object" : je.text);
        return -1;
    }
    return 0;
}

/* The summation-order options, which an envelope rerun changes on purpose. */
static int order_key(const char *key) { return !strcmp(key, "gemm_kchunk") || !strcmp(key, "attn_kchunk"); }

/* The keys of config.json whose values differ between a and b (the order options aside), comma-separated
   into buf. */
static void cfg_diff(char *buf, size_t n, json_t *a, json_t *b)
{
    const char *key;
    json_t *v;
    size_t len = 0;
    buf[0] = 0;
    json_object_foreach(a, key, v) {
        if (order_key(key) || json_equal(v, json_object_get(b, key)))
            continue;
        len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%s%s", len ? ", " : "", key);
        if (len >= n)
            return;
    }
    json_object_foreach(b, key, v) {
        if (!order_key(key) && !json_object_get(a, key))
            len += (size_t)snprintf(buf + len, len < n ? n - len : 0, "%s%s", len ? ", " : "", key);
        if (len >= n)
            return;
    }
}

static int parse_pos(double *v, const char *s) { return fl_cli_parse_double(v, s) || !(*v > 0.0) || !isfinite(*v); }

int fl_cmd_compare(int argc, char **argv)
{
    const char *pos[2] = { NULL, NULL }, *env[MAX_ENV];
    int npos = 0, nenv = 0, json = 0, mode = FL_BOUND_WINDOW;
    double factor = 4.0, floor_ulps = 4.0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            return FL_EXIT_OK;
        }
        if (!strcmp(a, "--json"))
            json = 1;
        else if (!strcmp(a, "--envelope") || !strcmp(a, "--factor") || !strcmp(a, "--floor-ulps") ||
                 !strcmp(a, "--bound")) {
            if (i + 1 >= argc)
                return fl_cli_usage_error("compare", "%s needs a value", a);
            const char *v = argv[++i];
            if (!strcmp(a, "--bound")) {
                if (strcmp(v, "window") && strcmp(v, "running"))
                    return fl_cli_usage_error("compare", "--bound: '%s' is not window or running", v);
                mode = strcmp(v, "window") ? FL_BOUND_RUNNING : FL_BOUND_WINDOW;
            } else if (!strcmp(a, "--envelope")) {
                if (nenv == MAX_ENV)
                    return fl_cli_usage_error("compare", "at most %d --envelope runs", MAX_ENV);
                env[nenv++] = v;
            } else if (parse_pos(!strcmp(a, "--factor") ? &factor : &floor_ulps, v))
                return fl_cli_usage_error("compare", "%s: '%s' is not a finite number > 0", a, v);
        } else if (a[0] == '-' && a[1])
            return fl_cli_usage_error("compare", "unknown option '%s' (see 'fp8lab compare --help')", a);
        else if (npos == 2)
            return fl_cli_usage_error("compare", "one REF and one TEST run, not '%s' too", a);
        else
            pos[npos++] = a;
    }
    if (npos < 2)
        return fl_cli_usage_error("compare", "need REF and TEST run folders (see 'fp8lab compare --help')");
    if (!nenv)
        return fl_cli_usage_error("compare", "need at least one --envelope run (REF rerun with --gemm-kchunk K)");

    run_t runs[2 + MAX_ENV];
    memset(runs, 0, sizeof runs);
    const int nr = 2 + nenv;
    runs[0].dir = pos[0];
    runs[1].dir = pos[1];
    for (int k = 0; k < nenv; k++)
        runs[2 + k].dir = env[k];
    int rc = FL_EXIT_FAIL;
    char err[4600];
    long n = LONG_MAX;
    for (int k = 0; k < nr; k++) {
        if (run_load(&runs[k], err, sizeof err)) {
            fprintf(stderr, "fp8lab compare: %s\n", err);
            goto done;
        }
        n = runs[k].n < n ? runs[k].n : n;
    }
    /* the common prefix: every run must have logged the same steps */
    for (int k = 1; k < nr; k++)
        for (long t = 0; t < n; t++)
            if (runs[k].step[t] != runs[0].step[t]) {
                fprintf(stderr, "fp8lab compare: %s/metrics.csv: data row %ld is step %ld, %s's is step %ld\n",
                        runs[k].dir, t + 1, runs[k].step[t], runs[0].dir, runs[0].step[t]);
                goto done;
            }

    const double *pert[MAX_ENV];
    for (int k = 0; k < nenv; k++)
        pert[k] = runs[2 + k].loss;
    double *bound = malloc((size_t)n * sizeof *bound);
    if (!bound) {
        fprintf(stderr, "fp8lab compare: out of memory\n");
        goto done;
    }
    fl_envelope_result res;
    const int v = fl_loss_envelope(&res, bound, runs[0].loss, runs[1].loss, pert, nenv, n, factor, floor_ulps, mode);
    if (v < 0) {
        fprintf(stderr, "fp8lab compare: out of memory\n");
        free(bound);
        goto done;
    }
    char diffs[2 + MAX_ENV][512];
    for (int k = 1; k < nr; k++)
        cfg_diff(diffs[k], sizeof diffs[k], runs[0].cfg, runs[k].cfg);
    const long ws = res.worst_step, fb = res.first_bad;
    if (json) {
        json_t *o = json_object(), *envs = json_array();
        json_object_set_new(o, "ref", json_string(runs[0].dir));
        json_object_set_new(o, "test", json_string(runs[1].dir));
        for (int k = 0; k < nenv; k++) {
            json_t *e = json_object();
            json_object_set_new(e, "dir", json_string(env[k]));
            json_object_set_new(e, "config_differs", json_string(diffs[2 + k]));
            json_array_append_new(envs, e);
        }
        json_object_set_new(o, "envelope", envs);
        json_object_set_new(o, "test_config_differs", json_string(diffs[1]));
        json_object_set_new(o, "steps", json_integer(n));
        json_t *lens = json_array();
        for (int k = 0; k < nr; k++)
            json_array_append_new(lens, json_integer(runs[k].n));
        json_object_set_new(o, "steps_logged", lens); /* REF, TEST, then the envelope runs */
        json_object_set_new(o, "bound", json_string(mode == FL_BOUND_WINDOW ? "window" : "running"));
        json_object_set_new(o, "factor", json_real(factor));
        json_object_set_new(o, "floor_ulps", json_real(floor_ulps));
        json_object_set_new(o, "envelope_first", isfinite(res.env_first) ? json_real(res.env_first) : json_null());
        json_object_set_new(o, "envelope_last", isfinite(res.env_last) ? json_real(res.env_last) : json_null());
        json_object_set_new(o, "worst_step", ws >= 0 ? json_integer(runs[0].step[ws]) : json_null());
        json_object_set_new(o, "worst_ratio", ws >= 0 && isfinite(res.worst_ratio) ? json_real(res.worst_ratio) : json_null());
        json_object_set_new(o, "first_outside", fb >= 0 ? json_integer(runs[0].step[fb]) : json_null());
        json_object_set_new(o, "unbounded_from",
                            res.unbounded_from >= 0 ? json_integer(runs[0].step[res.unbounded_from]) : json_null());
        json_object_set_new(o, "verdict", json_string(fl_envelope_name(v)));
        fl_cli_json_print(o, 9);
    } else {
        printf("REF %s, TEST %s: %ld logged steps (%ld to %ld), %d envelope run%s\n", runs[0].dir, runs[1].dir, n,
               runs[0].step[0], runs[0].step[n - 1], nenv, nenv == 1 ? "" : "s");
        for (int k = 1; k < nr; k++)
            if (diffs[k][0])
                printf("  note: %s's configuration differs from REF's in: %s\n", runs[k].dir, diffs[k]);
        for (int k = 0; k < nr; k++)
            if (runs[k].n > n)
                printf("  note: %s logged %ld steps; only the first %ld, which every run has, are compared\n",
                       runs[k].dir, runs[k].n, n);
        if (isfinite(res.env_first))
            printf("  envelope %.3g at step %ld .. %.3g at the last bounded step; bound = %g x max(%s, %g ulp)\n",
                   res.env_first, runs[0].step[0], res.env_last, factor, mode == FL_BOUND_WINDOW ? "e_last" : "e_t",
                   floor_ulps);
        if (ws >= 0)
            printf("  largest |TEST - REF| / bound: %.3g at step %ld (TEST %a, REF %a, bound %.3g)\n", res.worst_ratio,
                   runs[0].step[ws], (double)(float)runs[1].loss[ws], (double)(float)runs[0].loss[ws], bound[ws]);
        if (fb >= 0)
            printf("  first step outside the bound: %ld (|TEST - REF| = %.3g > %.3g)\n", runs[0].step[fb],
                   fabs(runs[1].loss[fb] - runs[0].loss[fb]), bound[fb]);
        if (res.unbounded_from >= 0)
            printf("  no bound from step %ld: a non-finite loss in REF or an envelope run\n",
                   runs[0].step[res.unbounded_from]);
        printf("%s\n", fl_envelope_name(v));
    }
    free(bound);
    rc = v == 0 ? FL_EXIT_OK : v == 1 ? FL_EXIT_GATE : FL_EXIT_INCONCLUSIVE;
done:
    for (int k = 0; k < nr; k++)
        run_free(&runs[k]);
    return rc;
}
