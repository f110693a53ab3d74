/* attrib.h — per-channel attribution of a run's down-projection outliers (`fp8lab attribute`).
 *
 * Which FFN channels set a layer's down-projection-input amax, and does that follow the alignment
 * |cos(w_gate_i, w_up_i)| of their gate and up weights?  Input: a run folder of `fp8lab train`
 * (channels.h describes the CSVs):
 *   config.json    act, wd, ffn (F channels per layer), layers (L)
 *   metrics.csv    step, lr (found by header name; the other columns are not read)
 *   channels.csv   step,layer,channel,amax,align,wnorm,gate_max,up_max: every logged step, all L*F
 *                  rows of a step consecutive, steps increasing
 *   records.csv    step,layer,amax,prev_max,channel,align,align_rank,...: a layer's new all-time amax
 * Columns are found by name; a malformed file (a bad number in any column, a row with another field
 * count than the header, a last line without its newline, a missing column, a short or duplicate
 * block, steps going back, a channels.csv too small for config.json's sizes) is refused with
 * "PATH[:LINE]: what".  A row with a non-finite number (a pathological run) is excluded and
 * counted, never an error.
 *
 * The analysis runs over a window of steps [from, to], inclusive; its logged steps are the
 * channels.csv steps inside it, the last of them "the last logged step".  The window may start at a
 * weight-decay timescale: t/tau(step) = sum over metrics.csv rows s < step of lr_s * wd, and
 * from_tau = X starts it at the first metrics step with t/tau >= X.
 * k1 = ceil(0.01 F), k2 = ceil(0.02 F) (the top-1% and top-2% channels).  Ranking by a key takes
 * finite values only, largest first, ties by the lower channel index (as records.csv's align_rank).
 * Per layer, and pooled over layers:
 *   rho        Spearman rho over the layer's channels between align and amax (and wnorm and amax)
 *              at each logged step: the median over steps and the value at the last logged step.
 *              Pooled: the median over every (layer, step) value; "last" the median over layers.
 *   records    the records.csv rows in the window: how many, the fraction with align_rank < k1 and
 *              < k2, what chance gives (k1/F, k2/F), the one-sided binomial p of at least that many
 *              in the top k2 by chance, and the fraction set by the channel with the largest amax at
 *              the last logged step (concentration; pooled: each record against its own layer's).
 *   lead/lag   a(t) = mean align of the top-k2 channels by align at logged step t, m(t) = ln of the
 *              max over channels of amax; da(t) = a(t+1) - a(t), dm likewise.  corr(lag) = Pearson
 *              of da(t) with dm(t + lag) over the t where both exist (>= 5 pairs, else NaN), lag in
 *              [-FL_ATTRIB_MAXLAG, FL_ATTRIB_MAXLAG] logged intervals.
 *              SIGN: lag > 0 means amax moves lag intervals AFTER alignment (alignment leads);
 *              lag < 0 means amax moves first.  The best lag has the largest corr (ties: the
 *              smaller |lag|, then the positive one).  Pooled: corr(lag) averaged over the layers
 *              where it is finite.
 *   slope      per channel, the OLS slope of ln amax_i on ln gate_max_i over the logged steps (points
 *              with a zero or non-finite value skipped; >= 5 points and a spread of ln gate_max of at
 *              least 0.05, else no slope): the median over the top-k2 channels by align at the last
 *              logged step, and over all channels, with counts.  An aligned SwiGLU channel
 *              (u_i ~ g_i) predicts ~2, GeLU ~1.
 * For non-gated activations (align is 0 everywhere) the alignment quantities are NaN (JSON null,
 * with a "why"); rho(wnorm, amax), concentration and the all-channel slope are still reported.
 * Every reduction runs in one fixed order: the results are deterministic.
 */
#ifndef FL_ATTRIB_H
#define FL_ATTRIB_H

#include <stddef.h>

#define FL_ATTRIB_MAXLAG 8
#define FL_ATTRIB_NLAG (2 * FL_ATTRIB_MAXLAG + 1)

/* Spearman rank correlation of x and y (finite values; ties get their average rank).  NaN when
   n < 3, when either input is constant or holds a non-finite value. */
double fl_spearman(const double *x, const double *y, size_t n);
/* Pearson correlation.  NaN when n < 2, or either input is constant or non-finite. */
double fl_pearson(const double *x, const double *y, size_t n);
/* OLS slope of y on x, and its R^2 into *r2 (may be NULL; NaN when y is constant).  NaN when n < 3
   or x has no spread. */
double fl_ols_slope(double *r2, const double *x, const double *y, size_t n);
/* The indices of the k largest finite key[0..F-1] (ties: lower index first) into idx; returns how
   many (fewer than k when fewer are finite). */
int fl_attrib_top(int *idx, const double *key, int F, int k);

/* The per-channel quantities of channels.csv, in its column order. */
enum { FL_CH_AMAX, FL_CH_ALIGN, FL_CH_WNORM, FL_CH_GATE, FL_CH_UP, FL_CH_COUNT };

typedef struct {
    long step;
    int layer, channel;
    double amax, align_rank;
} fl_attrib_record;

typedef struct {
    char act[32];
    int gated; /* the SwiGLU family (ffn_act.h) */
    double wd;
    int L, F;
    long nmetric;             /* metrics.csv rows */
    long *mstep;              /* (nmetric) their steps */
    double *tau;              /* (nmetric + 1) t/tau before each row; tau[nmetric]: after the last */
    long S;                   /* logged steps of channels.csv */
    long *lstep;              /* (S) */
    double *ch[FL_CH_COUNT];  /* each (S, L, F); an excluded (non-finite) row is NaN in all five */
    long ch_excluded;         /* rows excluded */
    long nrec;                /* records.csv rows kept */
    fl_attrib_record *rec;    /* (nrec), steps non-decreasing */
    long rec_excluded;
} fl_attrib_run;

/* The F values of quantity q (FL_CH_*) of layer l at logged step index s. */
static inline const double *fl_attrib_row(const fl_attrib_run *r, int q, long s, int l)
{
    return r->ch[q] + ((size_t)s * (size_t)r->L + (size_t)l) * (size_t)r->F;
}

/* Read the run folder dir.  0, or -1 with "PATH[:LINE]: what" in err (errn bytes). */
int fl_attrib_load(fl_attrib_run *run, const char *dir, char *err, size_t errn);
void fl_attrib_free(fl_attrib_run *run);
/* t/tau before step (see above). */
double fl_attrib_tau(const fl_attrib_run *run, long step);

typedef struct {
    long from, to;   /* inclusive; from < 0: step 0, to < 0: the run's last step */
    double from_tau; /* NaN, or X: from = the first step with t/tau >= X (from is then ignored) */
} fl_attrib_window;

typedef struct {
    double median, last; /* NaN when undefined */
    long nsteps;         /* steps with a finite rho */
} fl_attrib_rho;

typedef struct {
    fl_attrib_rho rho_align, rho_wnorm;
    long nrec, nrec_top1, nrec_top2, nrec_conc;
    double frac_top1, frac_top2, p_top2, conc; /* frac_*, p_top2 NaN for non-gated acts or no record */
    int top_channel;                           /* largest amax at the last logged step; -1 pooled/none */
    double corr[FL_ATTRIB_NLAG];               /* corr(lag), lag = index - FL_ATTRIB_MAXLAG */
    long pairs0;                               /* pairs at lag 0 */
    int best_lag;
    double best_corr, corr0;
    double slope_top, slope_all, r2_all; /* medians */
    long nslope_top, nslope_all;
} fl_attrib_stats;

typedef struct {
    long from, to;         /* the window (resolved) */
    double from_tau;       /* as asked (NaN when not) */
    double tau_from, tau_to;
    long i0, i1;           /* its logged step indices, inclusive */
    long interval;         /* the steps between logged steps when uniform, else 0 */
    int k1, k2;
    double chance1, chance2;
    long excluded;         /* excluded channels.csv rows in the window */
    int L;
    fl_attrib_stats *layer; /* (L) */
    fl_attrib_stats pooled;
    char conclusion[640];  /* one line, computed from the numbers */
} fl_attrib_result;

/* Analyse run over window w.  0, or -1 with the reason in err (the window holds no logged step,
   from > to, t/tau never reaches from_tau). */
int fl_attrib_analyse(fl_attrib_result *res, const fl_attrib_run *run, const fl_attrib_window *w, char *err,
                      size_t errn);
void fl_attrib_result_free(fl_attrib_result *res);

/* The results as JSON (jansson; non-finite numbers null).  Fields: run, act, gated, layers, ffn, wd,
   window {from, to, from_tau, tau_from, tau_to, logged_steps, first_logged, last_logged,
   interval_steps}, top1pct_channels, top2pct_channels, excluded {channel_rows_window,
   channel_rows_total, record_rows}, per_layer [stats + "layer"], pooled (stats), notes, conclusion.
   stats: rho_align_amax {median, last, steps}, rho_wnorm_amax {...}, records {n, frac_top1pct,
   frac_top2pct, chance_top1pct, chance_top2pct, p_top2pct, top_amax_channel, concentration},
   lead_lag {best_lag, best_corr, corr_lag0, pairs_lag0, corr_by_lag [lag -8..8]},
   slope {top2pct_median, top2pct_channels, all_median, all_channels, all_r2_median}; an object
   whose numbers are null for a non-gated act carries "why". */
struct json_t;
struct json_t *fl_attrib_json(const fl_attrib_result *res, const fl_attrib_run *run, const char *dir);

/* The two plots of `attribute --plot` into the folder out (made if missing): out/align_vs_amax.png
   (align vs amax per channel at the window's last logged step) and out/amax_vs_proj.png (ln amax vs
   ln gate_max over time, top-2% aligned channels), beside their data and the script attrib.gp.
   Returns an exit status (FL_EXIT_OK, or FL_EXIT_FAIL after a message on stderr). */
int fl_attrib_plot(const char *out, const fl_attrib_run *run, const fl_attrib_result *res);
/* Load the run folder dir and analyse the window w into *run and *res, as `fp8lab attribute` does:
   FL_EXIT_OK (free both after), or an exit status after a message on stderr ("fp8lab attribute:
   ..."; 1 an unreadable run, 2 a window it lacks), nothing to free. */
int fl_attrib_open(fl_attrib_run *run, fl_attrib_result *res, const char *dir, const fl_attrib_window *w);
/* Load the run folder dir, analyse the window w and plot into out: `fp8lab attribute dir --plot out`
   without its report.  An exit status, as the command's (1 unreadable run, 2 a window it lacks). */
int fl_attrib_plot_run(const char *dir, const fl_attrib_window *w, const char *out);

#endif /* FL_ATTRIB_H */
