/* cmd_plot.c — `fp8lab plot DIR...`: PNG plots of training runs with gnuplot, runs overlaid.
 *
 * Reads each run folder's metrics.csv (telemetry.h) and writes into --out (default: the first DIR):
 *   loss.png        loss EMA (and the raw loss, thin) vs step
 *   amax.png        max |activation output| (the SwiGLU output) and max |FFN input| vs step, log y
 *   outlier.png     outlier ratio amax / rms of the activation output vs step, log y
 *   growth.png      activation-output amax vs FFN-input amax (log-log): slope 1 is linear growth
 *   alignment.png   p99 and max over channels of |cos(w_gate_i, w_up_i)|, and the correlation of
 *                   the channel norms, vs step
 *   saturation.png  cumulative saturated elements: all cast sites, and the down projections' input
 * The gnuplot script is kept beside them (plots.gp) so a person can restyle and re-run it.
 */
#include "cli.h"

#include <errno.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const help =
    "usage: fp8lab plot [--out DIR] RUN_DIR...\n"
    "\n"
    "Renders PNG plots (gnuplot, pngcairo) of one or more training runs, overlaid: loss.png, amax.png,\n"
    "outlier.png, growth.png, alignment.png, saturation.png, and the script plots.gp that made them.\n"
    "  --out DIR   where the plots go (default: the first RUN_DIR)\n"
    "  --title T   a title line on every plot\n"
    "Each RUN_DIR must hold a metrics.csv written by 'fp8lab train'.\n";

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    while (s && s[1] == 0 && s > p) { /* trailing slash */
        const char *t = s - 1;
        while (t > p && *t != '/')
            t--;
        return *t == '/' ? t + 1 : t;
    }
    return s ? s + 1 : p;
}

static void put_label(FILE *f, const char *dir)
{
    /* the folder name, without a trailing slash, quoted for gnuplot */
    const char *b = base_name(dir);
    fputc('"', f);
    for (const char *c = b; *c && *c != '/'; c++)
        if (*c != '"' && *c != '_')
            fputc(*c, f);
        else
            fputc(*c == '_' ? '-' : '\'', f);
    fputc('"', f);
}

int fl_plot_runs(const char *out, const char *title, int nrun, char **runs)
{
    for (int i = 0; i < nrun; i++) {
        char p[4200];
        snprintf(p, sizeof p, "%s/metrics.csv", runs[i]);
        if (access(p, R_OK)) {
            fprintf(stderr, "fp8lab plot: %s: no readable metrics.csv (is it a run folder of 'fp8lab train'?)\n", runs[i]);
            return FL_EXIT_FAIL;
        }
    }
    if (mkdir(out, 0755) && errno != EEXIST) {
        fprintf(stderr, "fp8lab plot: %s: cannot create: %s\n", out, strerror(errno));
        return FL_EXIT_FAIL;
    }
    char gp[4200];
    snprintf(gp, sizeof gp, "%s/plots.gp", out);
    FILE *f = fopen(gp, "w");
    if (!f) {
        fprintf(stderr, "fp8lab plot: %s: cannot write\n", gp);
        return FL_EXIT_FAIL;
    }
    fprintf(f, "# written by fp8lab plot; run with: gnuplot %s\n", gp);
    fprintf(f, "set terminal pngcairo size 900,560 font ',10'\nset datafile separator ','\n"
               "set datafile missing 'nan'\nset grid\nset key top left\nset xlabel 'step'\n");
    fprintf(f, "array F[%d]\narray T[%d]\n", nrun, nrun);
    for (int i = 0; i < nrun; i++) {
        fprintf(f, "F[%d] = \"%s/metrics.csv\"\nT[%d] = ", i + 1, runs[i], i + 1);
        put_label(f, runs[i]);
        fputc('\n', f);
    }
    const char *tt = title ? title : "";
    fprintf(f, "N = %d\n", nrun);
    /* columns (telemetry.h): 1 step 2 loss 3 loss_ema 4 lr 5 grad_norm 6 ffn_in_amax 7 act_amax
       8 act_rms 9 align_med 10 align_p99 11 align_max 12 norm_corr 13 down_in_amax 14 down_in_stale
       15 down_in_sat 16 sat 17 clip 18 nan_out 19 inf_out 20 ftz */
    fprintf(f, "set output '%s/loss.png'\nset title \"%s loss (EMA; raw thin)\"\nset ylabel 'cross-entropy (nats)'\n"
               "plot for [i=1:N] F[i] every ::1 using 1:2 with lines lw 0.5 lc i notitle, "
               "for [i=1:N] F[i] every ::1 using 1:3 with lines lw 2 lc i title T[i]\n", out, tt);
    fprintf(f, "set output '%s/amax.png'\nset logscale y\nset title \"%s amax: activation output (solid), FFN input (dashed)\"\n"
               "set ylabel 'max |x|'\n"
               "plot for [i=1:N] F[i] every ::1 using 1:7 with lines lw 1.5 lc i title T[i].' act out', "
               "for [i=1:N] F[i] every ::1 using 1:6 with lines dt 2 lc i title T[i].' ffn in'\n", out, tt);
    fprintf(f, "set output '%s/outlier.png'\nset title \"%s outlier ratio of the activation output\"\nset ylabel 'amax / rms'\n"
               "plot for [i=1:N] F[i] every ::1 using 1:($8 > 0 ? $7/$8 : 1/0) with lines lc i title T[i]\n", out, tt);
    fprintf(f, "set output '%s/growth.png'\nset logscale xy\nset title \"%s activation-output amax vs FFN-input amax (every step)\"\n"
               "set xlabel 'max |FFN input|'\nset ylabel 'max |activation output|'\n"
               "plot for [i=1:N] F[i] every ::1 using 6:7 with points pt 7 ps 0.3 lc i title T[i]\n"
               "unset logscale\nset xlabel 'step'\n", out, tt);
    fprintf(f, "set output '%s/alignment.png'\nset title \"%s gate/up alignment |cos| p99 (solid), max (dotted); norm correlation (dashed)\"\n"
               "set ylabel 'value'\nset yrange [-0.2:1.05]\n"
               "plot for [i=1:N] F[i] every ::1 using 1:10 with lines lw 2 lc i title T[i], "
               "for [i=1:N] F[i] every ::1 using 1:11 with lines dt 3 lc i notitle, "
               "for [i=1:N] F[i] every ::1 using 1:12 with lines dt 2 lc i notitle\nset autoscale y\n", out, tt);
    fprintf(f, "set output '%s/saturation.png'\nset logscale y\nset title \"%s cumulative saturated elements: all sites (solid), down-projection input (dashed)\"\n"
               "set ylabel 'count + 1'\n"
               "plot for [i=1:N] F[i] every ::1 using 1:(($1==0 ? (s=$16) : (s=s+$16)) + 1) with lines lw 2 lc i title T[i], "
               "for [i=1:N] F[i] every ::1 using 1:(($1==0 ? (d=$15) : (d=d+$15)) + 1) with lines dt 2 lc i notitle\n", out, tt);
    fclose(f);
    char cmd[8600];
    snprintf(cmd, sizeof cmd, "gnuplot '%s' 2>&1", gp);
    FILE *p = popen(cmd, "r");
    if (!p) {
        fprintf(stderr, "fp8lab plot: cannot run gnuplot\n");
        return FL_EXIT_FAIL;
    }
    char line[512];
    int noisy = 0;
    while (fgets(line, sizeof line, p))
        if (!strstr(line, "warning") && !strstr(line, "Warning")) { /* empty log-scale ranges etc. */
            if (!noisy++)
                fprintf(stderr, "fp8lab plot: gnuplot says:\n");
            fputs(line, stderr);
        }
    const int st = pclose(p);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) == 127) {
        fprintf(stderr, "fp8lab plot: gnuplot not found (install gnuplot-nox: .ci/deps.sh)\n");
        return FL_EXIT_FAIL;
    }
    if (WEXITSTATUS(st)) {
        fprintf(stderr, "fp8lab plot: gnuplot failed on %s\n", gp);
        return FL_EXIT_FAIL;
    }
    return FL_EXIT_OK;
}

int fl_cmd_plot(int argc, char **argv)
{
    const char *out = NULL, *title = NULL;
    char **runs = calloc((size_t)argc + 1, sizeof *runs);
    int n = 0;
    if (!runs)
        return FL_EXIT_FAIL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(help, stdout);
            free(runs);
            return FL_EXIT_OK;
        } else if (!strcmp(argv[i], "--out") || !strcmp(argv[i], "--title")) {
            if (i + 1 >= argc) {
                free(runs);
                return fl_cli_usage_error("plot", "%s needs a value", argv[i]);
            }
            if (!strcmp(argv[i], "--out"))
                out = argv[++i];
            else
                title = argv[++i];
        } else if (argv[i][0] == '-') {
            free(runs);
            return fl_cli_usage_error("plot", "unknown option '%s'", argv[i]);
        } else {
            runs[n++] = argv[i];
        }
    }
    if (!n) {
        free(runs);
        return fl_cli_usage_error("plot", "no run folder given");
    }
    const int rc = fl_plot_runs(out ? out : runs[0], title, n, runs);
    free(runs);
    return rc;
}
