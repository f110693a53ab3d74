/* attrib_plot.c — the attribution's plots (attrib.h, fl_attrib_plot): the data files, the gnuplot
 * script attrib.gp, and gnuplot run without a shell into *.part files renamed on success.  Used by
 * `fp8lab attribute --plot` and by `fp8lab mechanism` for its trajectories. */
#include "attrib.h"
#include "common/cli.h"
#include "common/gnuplot.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { P_DATA1, P_DATA2, P_GP, P_PNG1, P_PNG2, P_PART1, P_PART2, P_COUNT };
static const char *const plot_names[] = { "attrib_align_amax.csv", "attrib_top_traj.csv", "attrib.gp",
                                          "align_vs_amax.png", "amax_vs_proj.png", "align_vs_amax.png.part",
                                          "amax_vs_proj.png.part" };
_Static_assert(sizeof plot_names / sizeof *plot_names == P_COUNT, "plot_names out of step with P_*");

/* The points of the two plots, as written to their data files. */
typedef struct {
    long n1, n2;   /* points of align_vs_amax and of amax_vs_proj */
    double b1, b2; /* sums over amax_vs_proj's points of ln amax - ln gate_max and of ln amax - 2 ln
                      gate_max: their means place its guide lines */
} plot_points;

/* (i) every channel at the last logged step s1; amax > 0 only (log axis).  The rows written. */
static long plot_write_channels(FILE *d1, const fl_attrib_run *run, long s1)
{
    long n1 = 0;
    fprintf(d1, "# layer,channel,align,amax,wnorm at step %ld\n", run->lstep[s1]);
    for (int l = 0; l < run->L; l++) {
        const double *al = fl_attrib_row(run, FL_CH_ALIGN, s1, l), *am = fl_attrib_row(run, FL_CH_AMAX, s1, l),
                     *wn = fl_attrib_row(run, FL_CH_WNORM, s1, l);
        for (int i = 0; i < run->F; i++)
            if (am[i] > 0.0 && isfinite(am[i]) && isfinite(al[i])) {
                fprintf(d1, "%d,%d,%.9g,%.9g,%.9g\n", l, i, al[i], am[i], wn[i]);
                n1++;
            }
    }
    return n1;
}

/* (ii) the top-2% channels by align (by amax when not gated) at the last logged step, over the
   window; one block per channel.  idx: (F) scratch. */
static void plot_write_top(FILE *d2, plot_points *pts, const fl_attrib_run *run, const fl_attrib_result *res, int *idx)
{
    fprintf(d2, "# layer,channel,step,ln_gate_max,ln_amax\n");
    for (int l = 0; l < run->L; l++) {
        const int k = fl_attrib_top(idx, fl_attrib_row(run, run->gated ? FL_CH_ALIGN : FL_CH_AMAX, res->i1, l),
                                    run->F, res->k2);
        for (int j = 0; j < k; j++) {
            for (long s = res->i0; s <= res->i1; s++) {
                const double g = fl_attrib_row(run, FL_CH_GATE, s, l)[idx[j]], a = fl_attrib_row(run, FL_CH_AMAX, s, l)[idx[j]];
                if (!(g > 0.0) || !(a > 0.0) || !isfinite(g) || !isfinite(a))
                    continue;
                fprintf(d2, "%d,%d,%ld,%.9g,%.9g\n", l, idx[j], run->lstep[s], log(g), log(a));
                pts->b1 += log(a) - log(g);
                pts->b2 += log(a) - 2.0 * log(g);
                pts->n2++;
            }
            fprintf(d2, "\n");
        }
    }
}

/* The two data files, p[P_DATA1] and p[P_DATA2], in the folder out.  FL_EXIT_OK, or FL_EXIT_FAIL after
   the message. */
static int plot_write_data(plot_points *pts, char p[P_COUNT][4200], const char *out, const fl_attrib_run *run,
                           const fl_attrib_result *res)
{
    FILE *d1 = fopen(p[P_DATA1], "w"), *d2 = fopen(p[P_DATA2], "w");
    int *idx = malloc((size_t)run->F * sizeof *idx);
    if (!d1 || !d2 || !idx) {
        fprintf(stderr, "fp8lab attribute: %s: cannot write\n", !d1 ? p[P_DATA1] : p[P_DATA2]);
        if (d1)
            fclose(d1);
        if (d2)
            fclose(d2);
        free(idx);
        return FL_EXIT_FAIL;
    }
    pts->n1 = plot_write_channels(d1, run, res->i1);
    plot_write_top(d2, pts, run, res, idx);
    free(idx);
    if (fclose(d1) | fclose(d2)) {
        fprintf(stderr, "fp8lab attribute: %s: cannot write\n", out);
        return FL_EXIT_FAIL;
    }
    return FL_EXIT_OK;
}

/* The script p[P_GP]: each plot that has points.  Paths reach gnuplot as its arguments (gnuplot.h):
   ARG1 and ARG3 the PNGs (.part), ARG2 and ARG4 their data, written into q for args.  FL_EXIT_OK, or
   FL_EXIT_FAIL after the message. */
static int plot_write_script(char p[P_COUNT][4200], char q[4][4200], const char *args[4], const char *out,
                             const plot_points *pts, const fl_attrib_run *run, const fl_attrib_result *res)
{
    static const int qk[4] = { P_PART1, P_DATA1, P_PART2, P_DATA2 };
    FILE *f = fopen(p[P_GP], "w");
    if (!f) {
        fprintf(stderr, "fp8lab attribute: %s: cannot write\n", p[P_GP]);
        return FL_EXIT_FAIL;
    }
    for (int k = 0; k < 4; k++) {
        if (fl_gnuplot_path(q[k], sizeof q[k], p[qk[k]])) {
            fclose(f);
            fprintf(stderr, "fp8lab attribute: %s: path too long\n", out);
            return FL_EXIT_FAIL;
        }
        args[k] = q[k];
    }
    fl_gnuplot_comment(f, "attribute", p[P_GP], 4, args);
    fprintf(f, "# (it writes the .part files, which the command renames)\n"
               "set terminal pngcairo noenhanced size 900,560 font ',10'\nset datafile separator ','\nset grid\n"
               "set key top left\nL = %d\n",
            run->L);
    if (pts->n1)
        fprintf(f, "set output ARG1\nset logscale y\nset title 'per-channel amax of the down-projection input vs %s at step %ld'\n"
                   "set xlabel '%s'\nset ylabel 'amax (max over tokens |h_i|)'\n"
                   "plot for [l=0:L-1] ARG2 using %d:($1 == l ? $4 : 1/0) with points pt 7 ps 0.5 lc l+1 "
                   "title sprintf('layer %%d', l)\nunset logscale\n",
                run->gated ? "gate/up alignment" : "weight norm (not gated: align is 0)", run->lstep[res->i1],
                run->gated ? "align = |cos(w_gate_i, w_up_i)|" : "wnorm = ||w_fc_i||", run->gated ? 3 : 5);
    else
        fprintf(stderr, "fp8lab attribute: no channel with a positive finite amax at step %ld: %s not written\n",
                run->lstep[res->i1], plot_names[P_PNG1]);
    if (pts->n2)
        fprintf(f, "set output ARG3\nset title 'ln amax vs ln gate_max over steps %ld..%ld, top-%d channels by %s per layer'\n"
                   "set xlabel 'ln max |g_i| (gate projection)'\nset ylabel 'ln amax_i'\n"
                   "plot for [l=0:L-1] ARG4 using 4:($1 == l ? $5 : 1/0) with points pt 7 ps 0.5 lc l+1 "
                   "title sprintf('layer %%d', l), "
                   "2*x + %.9g dt 2 lc rgb 'black' title 'slope 2', x + %.9g dt 3 lc rgb 'gray40' title 'slope 1'\n",
                run->lstep[res->i0], run->lstep[res->i1], res->k2, run->gated ? "align" : "amax",
                pts->b2 / (double)pts->n2, pts->b1 / (double)pts->n2);
    else
        fprintf(stderr, "fp8lab attribute: no top channel with positive amax and gate_max: %s not written\n",
                plot_names[P_PNG2]);
    fprintf(f, "unset output\n");
    if (fclose(f)) {
        fprintf(stderr, "fp8lab attribute: %s: cannot write\n", p[P_GP]);
        return FL_EXIT_FAIL;
    }
    return FL_EXIT_OK;
}

/* gnuplot runs the script into the .part files; no half-written PNG: the finished ones are renamed,
   the rest removed. */
static int plot_render(char p[P_COUNT][4200], const char *const args[4], const plot_points *pts)
{
    int rc = fl_gnuplot_run("attribute", p[P_GP], 4, args) ? FL_EXIT_FAIL : FL_EXIT_OK;
    for (int k = 0; k < 2; k++) {
        if (!(k ? pts->n2 : pts->n1))
            continue;
        if (rc == FL_EXIT_OK && rename(p[P_PART1 + k], p[P_PNG1 + k])) {
            fprintf(stderr, "fp8lab attribute: %s: cannot rename: %s\n", p[P_PART1 + k], strerror(errno));
            rc = FL_EXIT_FAIL;
        }
        if (rc != FL_EXIT_OK)
            unlink(p[P_PART1 + k]);
    }
    return rc;
}

/* The data files and script, then gnuplot into *.part files, renamed on success. */
int fl_attrib_plot(const char *out, const fl_attrib_run *run, const fl_attrib_result *res)
{
    char p[P_COUNT][4200];
    for (int k = 0; k < P_COUNT; k++)
        if ((size_t)snprintf(p[k], sizeof p[k], "%s/%s", out, plot_names[k]) >= sizeof p[k]) {
            fprintf(stderr, "fp8lab attribute: %s: path too long\n", out);
            return FL_EXIT_FAIL;
        }
    if (mkdir(out, 0755) && errno != EEXIST) {
        fprintf(stderr, "fp8lab attribute: %s: cannot create: %s\n", out, strerror(errno));
        return FL_EXIT_FAIL;
    }
    plot_points pts = { 0, 0, 0.0, 0.0 };
    char q[4][4200];
    const char *args[4];
    if (plot_write_data(&pts, p, out, run, res) != FL_EXIT_OK ||
        plot_write_script(p, q, args, out, &pts, run, res) != FL_EXIT_OK)
        return FL_EXIT_FAIL;
    return plot_render(p, args, &pts);
}

int fl_attrib_open(fl_attrib_run *run, fl_attrib_result *res, const char *dir, const fl_attrib_window *w)
{
    char err[4608];
    if (fl_attrib_load(run, dir, err, sizeof err)) {
        fprintf(stderr, "fp8lab attribute: %s\n", err);
        return FL_EXIT_FAIL;
    }
    if (fl_attrib_analyse(res, run, w, err, sizeof err)) {
        fl_attrib_free(run);
        return fl_cli_usage_error("attribute", "%s", err);
    }
    return FL_EXIT_OK;
}

int fl_attrib_plot_run(const char *dir, const fl_attrib_window *w, const char *out)
{
    fl_attrib_run run;
    fl_attrib_result res;
    int rc = fl_attrib_open(&run, &res, dir, w);
    if (rc != FL_EXIT_OK)
        return rc;
    rc = fl_attrib_plot(out, &run, &res);
    fl_attrib_result_free(&res);
    fl_attrib_free(&run);
    return rc;
}
