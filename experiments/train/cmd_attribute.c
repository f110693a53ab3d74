/* cmd_attribute.c — `fp8lab attribute RUN_DIR`: per-channel attribution of a run's down-projection
 * outliers (alignment, records, lead/lag, slope), as text, JSON or PNG plots.  The analysis is
 * attrib.h's; this file parses the arguments, prints, and drives gnuplot for --plot. */
#include "attrib.h"
#include "commands.h"
#include "common/cli.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *const help =
    "usage: fp8lab attribute RUN_DIR [--from STEP] [--to STEP] [--from-tau X] [--json] [--plot OUT_DIR]\n"
    "\n"
    "Per-channel attribution of a training run's down-projection-input outliers: which channels set\n"
    "each layer's amax records, and whether that follows the alignment |cos(w_gate_i, w_up_i)| of the\n"
    "channel's gate and up weights.  Reads RUN_DIR/config.json, metrics.csv, channels.csv and\n"
    "records.csv (written by 'fp8lab train').  Per layer and pooled over layers:\n"
    "  rho       Spearman rho over the channels of align vs amax (and wnorm vs amax) at each logged\n"
    "            step: the median over the window and the value at its last logged step\n"
    "  records   the amax records in the window: the fraction set by the top-1% / top-2% channels by\n"
    "            align (beside what chance gives, and a binomial p), and by the top-amax channel\n"
    "  lead/lag  correlation of the changes of the top-2% mean align with those of ln(max amax), lag\n"
    "            -8..8 logged intervals; lag > 0: alignment changes come first\n"
    "  slope     per channel, the OLS slope of ln amax on ln gate_max (aligned SwiGLU ~2, GeLU ~1):\n"
    "            median over the top-2% aligned channels and over all\n"
    "Alignment results are null for non-gated activations (gelu, relu, ...).\n"
    "  --from STEP    window start, inclusive (default 0)\n"
    "  --to STEP      window end, inclusive (default the run's last step)\n"
    "  --from-tau X   start at the first step where t/tau = sum over s < step of lr_s * wd reaches X\n"
    "                 (weight-decay timescales; not with --from)\n"
    "  --json         print the results as JSON instead of text\n"
    "  --plot DIR     also write DIR/align_vs_amax.png (align vs amax per channel at the last logged\n"
    "                 step) and DIR/amax_vs_proj.png (ln amax vs ln gate_max over time, top-2% aligned\n"
    "                 channels), beside their data and the gnuplot script attrib.gp\n"
    "Exit status: 0 ok, 1 a missing or malformed input file (named in the message), 2 bad usage.\n";

/* A number for the text report: "n/a" when non-finite (ring of buffers: several per printf). */
static const char *fv(const char *fmt, double v)
{
    static char ring[16][32];
    static int k;
    char *b = ring[k++ % 16];
    if (isfinite(v))
        snprintf(b, sizeof ring[0], fmt, v);
    else
        snprintf(b, sizeof ring[0], "n/a");
    return b;
}

static void print_stats(const char *name, const fl_attrib_stats *o, const fl_attrib_result *res, int gated)
{
    printf("%s:\n", name);
    if (gated)
        printf("  rho(align, amax)  median %s, last %s (%ld steps)\n", fv("%+.3f", o->rho_align.median),
               fv("%+.3f", o->rho_align.last), o->rho_align.nsteps);
    printf("  rho(wnorm, amax)  median %s, last %s (%ld steps)\n", fv("%+.3f", o->rho_wnorm.median),
           fv("%+.3f", o->rho_wnorm.last), o->rho_wnorm.nsteps);
    char top[48] = "their layer's top-amax channel";
    if (o->top_channel >= 0)
        snprintf(top, sizeof top, "the top-amax channel (%d)", o->top_channel);
    if (gated)
        printf("  records %ld: top-1%% aligned %s (chance %s), top-2%% aligned %s (chance %s, binomial p %s); "
               "set by %s %s\n",
               o->nrec, fv("%.1f%%", 100.0 * o->frac_top1), fv("%.1f%%", 100.0 * res->chance1),
               fv("%.1f%%", 100.0 * o->frac_top2), fv("%.1f%%", 100.0 * res->chance2), fv("%.2g", o->p_top2), top,
               fv("%.1f%%", 100.0 * o->conc));
    else
        printf("  records %ld; set by %s %s\n", o->nrec, top, fv("%.1f%%", 100.0 * o->conc));
    if (gated)
        printf("  lead/lag: best lag %s (r %s), lag 0 r %s (%ld pairs)\n",
               isfinite(o->best_corr) ? fv("%+.0f", o->best_lag) : "n/a", fv("%+.3f", o->best_corr),
               fv("%+.3f", o->corr0), o->pairs0);
    if (gated)
        printf("  slope d ln amax / d ln gate_max: top-2%% aligned median %s (%ld ch), all median %s (%ld ch, R^2 %s)\n",
               fv("%.3f", o->slope_top), o->nslope_top, fv("%.3f", o->slope_all), o->nslope_all, fv("%.3f", o->r2_all));
    else
        printf("  slope d ln amax / d ln gate_max: all median %s (%ld ch, R^2 %s)\n", fv("%.3f", o->slope_all),
               o->nslope_all, fv("%.3f", o->r2_all));
}

static void print_report(const char *dir, const fl_attrib_run *run, const fl_attrib_result *res)
{
    printf("run %s: act %s (%s), L = %d layers x F = %d channels, wd %g\n", dir, run->act,
           run->gated ? "gated" : "not gated", run->L, run->F, run->wd);
    printf("window: steps %ld .. %ld (t/tau %s .. %s); %ld logged steps %ld .. %ld", res->from, res->to,
           fv("%.4g", res->tau_from), fv("%.4g", res->tau_to), res->i1 - res->i0 + 1, run->lstep[res->i0],
           run->lstep[res->i1]);
    if (res->interval)
        printf(", every %ld", res->interval);
    printf("\ntop-1%% = %d, top-2%% = %d channels per layer; non-finite rows excluded: %ld of channels.csv in the "
           "window (%ld in all), %ld of records.csv\n",
           res->k1, res->k2, res->excluded, run->ch_excluded, run->rec_excluded);
    if (!run->gated)
        printf("(%s is not gated: align is 0 for every channel, so the alignment results are undefined)\n", run->act);
    for (int l = 0; l < res->L; l++) {
        char name[32];
        snprintf(name, sizeof name, "layer %d", l);
        print_stats(name, &res->layer[l], res, run->gated);
    }
    print_stats("pooled over layers", &res->pooled, res, run->gated);
    printf("conclusion: %s\n", res->conclusion);
}

int fl_cmd_attribute(int argc, char **argv)
{
    const char *dir = NULL, *plot_dir = NULL;
    int json = 0, have_from = 0;
    fl_attrib_window w = { -1, -1, NAN };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            return FL_EXIT_OK;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--from") || !strcmp(a, "--to") || !strcmp(a, "--from-tau") || !strcmp(a, "--plot")) {
            if (i + 1 >= argc)
                return fl_cli_usage_error("attribute", "%s needs a value", a);
            const char *v = argv[++i];
            unsigned long long u;
            if (!strcmp(a, "--plot"))
                plot_dir = v;
            else if (!strcmp(a, "--from-tau")) {
                if (fl_cli_parse_double(&w.from_tau, v) || !isfinite(w.from_tau) || w.from_tau < 0.0)
                    return fl_cli_usage_error("attribute", "--from-tau '%s': not a finite number >= 0", v);
            } else if (fl_cli_parse_u64(&u, v) || u > LONG_MAX)
                return fl_cli_usage_error("attribute", "%s '%s': not a step (an integer >= 0)", a, v);
            else if (!strcmp(a, "--from")) {
                w.from = (long)u;
                have_from = 1;
            } else
                w.to = (long)u;
        } else if (a[0] == '-') {
            return fl_cli_usage_error("attribute", "unknown option '%s'", a);
        } else if (dir) {
            return fl_cli_usage_error("attribute", "one RUN_DIR only ('%s' and '%s')", dir, a);
        } else {
            dir = a;
        }
    }
    if (!dir)
        return fl_cli_usage_error("attribute", "no RUN_DIR given");
    if (have_from && !isnan(w.from_tau))
        return fl_cli_usage_error("attribute", "--from and --from-tau both set the window's start: give one");
    struct stat sb;
    if (stat(dir, &sb) || !S_ISDIR(sb.st_mode))
        return fl_cli_usage_error("attribute", "RUN_DIR '%s' is not a folder", dir);
    fl_attrib_run run;
    fl_attrib_result res;
    int rc = fl_attrib_open(&run, &res, dir, &w);
    if (rc != FL_EXIT_OK)
        return rc;
    rc = plot_dir ? fl_attrib_plot(plot_dir, &run, &res) : FL_EXIT_OK;
    if (rc == FL_EXIT_OK) {
        if (json)
            fl_cli_json_print(fl_attrib_json(&res, &run, dir), 6);
        else
            print_report(dir, &run, &res);
    }
    fl_attrib_result_free(&res);
    fl_attrib_free(&run);
    return rc;
}
