/* plot_runs.c — PNG plots of training runs with gnuplot (see plot_runs.h). */
#include "plot_runs.h"

#include "cli.h"
#include "gnuplot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* Append s to the list *buf as "LENGTH:BYTES" (no quoting: the length says where it ends, whatever
   bytes it holds); the script's decode loop reads it back. */
static int list_add(char **buf, size_t *len, const char *s, size_t n)
{
    char *b = realloc(*buf, *len + n + 32);
    if (!b)
        return -1;
    *buf = b;
    *len += (size_t)sprintf(b + *len, "%zu:", n);
    memcpy(b + *len, s, n);
    *len += n;
    b[*len] = 0;
    return 0;
}

/* A run's label: the folder's name without a trailing slash, '_' shown as '-' ('_' would subscript
   in gnuplot's enhanced text). */
static int add_label(char **buf, size_t *len, const char *dir)
{
    const char *b = base_name(dir);
    const size_t n = strcspn(b, "/");
    char *t = malloc(n + 1);
    if (!t)
        return -1;
    for (size_t k = 0; k < n; k++)
        t[k] = b[k] == '_' ? '-' : b[k];
    const int rc = list_add(buf, len, t, n);
    free(t);
    return rc;
}

/* The script's program text is fixed; paths and titles are its arguments (gnuplot.h):
   ARG1 the output folder, ARG2 the title line, ARG3 the run folders, ARG4 their labels. */
static const char *const script =
    "# ARG1: the output folder; ARG2: a title line ('' for none); ARG3: the run folders and ARG4 their\n"
    "# labels, each list of LENGTH:BYTES entries back to back (no quoting: a name may hold any byte)\n"
    "set encoding default\n" /* strlen and s[i:j] count bytes, as the lengths do */
    "N = 0\ns = ARG3\n"
    "while (strlen(s) > 0) { k = strstrt(s, ':'); s = s[k + int(s[1:k-1]) + 1:*]; N = N + 1 }\n"
    "array F[N]\narray T[N]\ns = ARG3\nt = ARG4\n"
    "do for [i=1:N] {\n"
    "    k = strstrt(s, ':'); n = int(s[1:k-1]); F[i] = s[k+1:k+n].'/metrics.csv'; s = s[k+n+1:*]\n"
    "    k = strstrt(t, ':'); n = int(t[1:k-1]); T[i] = t[k+1:k+n]; t = t[k+n+1:*]\n"
    "}\n"
    "undefine s t k n\n"
    "set terminal pngcairo size 900,560 font ',10'\nset datafile separator ','\n"
    "set datafile missing 'nan'\nset grid\nset key top left\nset xlabel 'step'\n"
    /* columns (telemetry.h): 1 step 2 loss 3 loss_ema 4 lr 5 grad_norm 6 ffn_in_amax 7 act_amax
       8 act_rms 9 align_med 10 align_p99 11 align_max 12 norm_corr 13 down_in_amax 14 down_in_stale
       15 down_in_sat 16 sat 17 clip 18 nan_out 19 inf_out 20 ftz */
    "set output ARG1.'/loss.png'\nset title ARG2.' loss (EMA; raw thin)'\nset ylabel 'cross-entropy (nats)'\n"
    "plot for [i=1:N] F[i] every ::1 using 1:2 with lines lw 0.5 lc i notitle, "
    "for [i=1:N] F[i] every ::1 using 1:3 with lines lw 2 lc i title T[i]\n"
    "set output ARG1.'/amax.png'\nset logscale y\nset title ARG2.' amax: activation output (solid), FFN input (dashed)'\n"
    "set ylabel 'max |x|'\n"
    "plot for [i=1:N] F[i] every ::1 using 1:7 with lines lw 1.5 lc i title T[i].' act out', "
    "for [i=1:N] F[i] every ::1 using 1:6 with lines dt 2 lc i title T[i].' ffn in'\n"
    "set output ARG1.'/outlier.png'\nset title ARG2.' outlier ratio of the activation output'\nset ylabel 'amax / rms'\n"
    "plot for [i=1:N] F[i] every ::1 using 1:($8 > 0 ? $7/$8 : 1/0) with lines lc i title T[i]\n"
    "set output ARG1.'/growth.png'\nset logscale xy\nset title ARG2.' activation-output amax vs FFN-input amax (every step)'\n"
    "set xlabel 'max |FFN input|'\nset ylabel 'max |activation output|'\n"
    "plot for [i=1:N] F[i] every ::1 using 6:7 with points pt 7 ps 0.3 lc i title T[i]\n"
    "unset logscale\nset xlabel 'step'\n"
    "set output ARG1.'/alignment.png'\n"
    "set title ARG2.' gate/up alignment |cos| p99 (solid), max (dotted); norm correlation (dashed)'\n"
    "set ylabel 'value'\nset yrange [-0.2:1.05]\n"
    "plot for [i=1:N] F[i] every ::1 using 1:10 with lines lw 2 lc i title T[i], "
    "for [i=1:N] F[i] every ::1 using 1:11 with lines dt 3 lc i notitle, "
    "for [i=1:N] F[i] every ::1 using 1:12 with lines dt 2 lc i notitle\nset autoscale y\n"
    "set output ARG1.'/saturation.png'\nset logscale y\n"
    "set title ARG2.' cumulative saturated elements: all sites (solid), down-projection input (dashed)'\n"
    "set ylabel 'count + 1'\n"
    "plot for [i=1:N] F[i] every ::1 using 1:(($1==0 ? (s=$16) : (s=s+$16)) + 1) with lines lw 2 lc i title T[i], "
    "for [i=1:N] F[i] every ::1 using 1:(($1==0 ? (d=$15) : (d=d+$15)) + 1) with lines dt 2 lc i notitle\n";

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
    char gp[4200], od[4200], rd[4200];
    if ((size_t)snprintf(gp, sizeof gp, "%s/plots.gp", out) >= sizeof gp || fl_gnuplot_path(od, sizeof od, out)) {
        fprintf(stderr, "fp8lab plot: %s: path too long\n", out);
        return FL_EXIT_FAIL;
    }
    char *dirs = NULL, *labels = NULL;
    size_t nd = 0, nl = 0;
    int bad = 0;
    for (int i = 0; i < nrun && !bad; i++)
        bad = fl_gnuplot_path(rd, sizeof rd, runs[i]) || list_add(&dirs, &nd, rd, strlen(rd)) ||
              add_label(&labels, &nl, runs[i]);
    if (bad || !dirs || !labels) {
        fprintf(stderr, "fp8lab plot: out of memory or a path too long\n");
        free(dirs);
        free(labels);
        return FL_EXIT_FAIL;
    }
    const char *args[4] = { od, title ? title : "", dirs, labels };
    FILE *f = fopen(gp, "w");
    if (f) {
        fl_gnuplot_comment(f, "plot", gp, 4, args);
        fputs(script, f);
    }
    if (!f || fclose(f)) {
        fprintf(stderr, "fp8lab plot: %s: cannot write\n", gp);
        free(dirs);
        free(labels);
        return FL_EXIT_FAIL;
    }
    const int rc = fl_gnuplot_run("plot", gp, 4, args);
    free(dirs);
    free(labels);
    return rc ? FL_EXIT_FAIL : FL_EXIT_OK;
}
