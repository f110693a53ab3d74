/* attrib.c — per-channel attribution of down-projection outliers (attrib.h). */
#include "attrib.h"
#include "ffn_act.h"
#include "model.h"
#include "fl_json.h"
#include "runcsv.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>

static int fail(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (err && n)
        vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- statistics ---- */

typedef struct {
    double v;
    int i;
} keyed;

static int keyed_up(const void *a, const void *b) /* value ascending, then index */
{
    const keyed *p = a, *q = b;
    return p->v < q->v ? -1 : p->v > q->v ? 1 : (p->i > q->i) - (p->i < q->i);
}

static int keyed_down(const void *a, const void *b) /* value descending, then index ascending */
{
    const keyed *p = a, *q = b;
    return p->v > q->v ? -1 : p->v < q->v ? 1 : (p->i > q->i) - (p->i < q->i);
}

static int dbl_up(const void *a, const void *b)
{
    const double p = *(const double *)a, q = *(const double *)b;
    return (p > q) - (p < q);
}

static int all_finite(const double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

static int constant(const double *x, size_t n)
{
    for (size_t i = 1; i < n; i++)
        if (x[i] != x[0])
            return 0;
    return 1;
}

/* Median of v[0..n-1] (sorted in place); NaN when n == 0. */
static double median(double *v, size_t n)
{
    if (!n)
        return NAN;
    qsort(v, n, sizeof *v, dbl_up);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Sums of squared and crossed deviations from the means, in index order. */
static void comoments(double *sxx, double *syy, double *sxy, const double *x, const double *y, size_t n)
{
    double mx = 0.0, my = 0.0;
    for (size_t i = 0; i < n; i++) {
        mx += x[i];
        my += y[i];
    }
    mx /= (double)n;
    my /= (double)n;
    double xx = 0.0, yy = 0.0, xy = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double dx = x[i] - mx, dy = y[i] - my;
        xx += dx * dx;
        yy += dy * dy;
        xy += dx * dy;
    }
    *sxx = xx;
    *syy = yy;
    *sxy = xy;
}

double fl_pearson(const double *x, const double *y, size_t n)
{
    if (n < 2 || !all_finite(x, n) || !all_finite(y, n) || constant(x, n) || constant(y, n))
        return NAN;
    double sxx, syy, sxy;
    comoments(&sxx, &syy, &sxy, x, y, n);
    if (!(sxx > 0.0) || !(syy > 0.0))
        return NAN;
    const double r = sxy / sqrt(sxx * syy);
    return r > 1.0 ? 1.0 : r < -1.0 ? -1.0 : r; /* rounding can step past +-1 */
}

/* Ranks 1..n of x into r, ties sharing their average rank.  0, or -1 out of memory. */
static int ranks(double *r, const double *x, size_t n)
{
    keyed *k = malloc(n * sizeof *k);
    if (!k)
        return -1;
    for (size_t i = 0; i < n; i++)
        k[i] = (keyed){ x[i], (int)i };
    qsort(k, n, sizeof *k, keyed_up);
    for (size_t a = 0; a < n;) {
        size_t b = a + 1;
        while (b < n && k[b].v == k[a].v)
            b++;
        const double avg = 0.5 * (double)(a + 1 + b); /* mean of the ranks a+1 .. b */
        for (size_t j = a; j < b; j++)
            r[k[j].i] = avg;
        a = b;
    }
    free(k);
    return 0;
}

double fl_spearman(const double *x, const double *y, size_t n)
{
    if (n < 3 || n > INT_MAX || !all_finite(x, n) || !all_finite(y, n))
        return NAN;
    double *r = malloc(2 * n * sizeof *r);
    double rho = NAN;
    if (r && !ranks(r, x, n) && !ranks(r + n, y, n))
        rho = fl_pearson(r, r + n, n);
    free(r);
    return rho;
}

double fl_ols_slope(double *r2, const double *x, const double *y, size_t n)
{
    if (r2)
        *r2 = NAN;
    if (n < 3 || !all_finite(x, n) || !all_finite(y, n) || constant(x, n))
        return NAN;
    double sxx, syy, sxy;
    comoments(&sxx, &syy, &sxy, x, y, n);
    if (!(sxx > 0.0))
        return NAN;
    if (r2 && syy > 0.0)
        *r2 = sxy * sxy / (sxx * syy);
    return sxy / sxx;
}

int fl_attrib_top(int *idx, const double *key, int F, int k)
{
    keyed *t = malloc((size_t)(F > 0 ? F : 1) * sizeof *t);
    int n = 0;
    if (!t)
        return 0;
    for (int i = 0; i < F; i++)
        if (isfinite(key[i]))
            t[n++] = (keyed){ key[i], i };
    qsort(t, (size_t)n, sizeof *t, keyed_down);
    if (n > k)
        n = k;
    for (int i = 0; i < n; i++)
        idx[i] = t[i].i;
    free(t);
    return n;
}

/* P(X >= k) for X ~ Binomial(n, p), summed term by term from j = k up (log-space terms). */
static double binom_tail(long k, long n, double p)
{
    if (k <= 0)
        return 1.0;
    if (k > n)
        return 0.0;
    if (p >= 1.0)
        return 1.0;
    if (p <= 0.0)
        return 0.0;
    double s = 0.0;
    for (long j = k; j <= n; j++)
        s += exp(lgamma((double)n + 1) - lgamma((double)j + 1) - lgamma((double)(n - j) + 1) + (double)j * log(p) +
                 (double)(n - j) * log1p(-p));
    return s > 1.0 ? 1.0 : s;
}

/* ---- CSV reading ---- */


/* ---- loading ---- */

static int load_config(fl_attrib_run *r, const char *dir, char *err, size_t errn)
{
    char p[4200];
    if ((size_t)snprintf(p, sizeof p, "%s/config.json", dir) >= sizeof p)
        return fail(err, errn, "%s/config.json: path too long", dir);
    json_error_t je;
    json_t *o = json_load_file(p, 0, &je);
    if (!o)
        return je.line > 0 ? fail(err, errn, "%s:%d: %s", p, je.line, je.text) : fail(err, errn, "%s: %s", p, je.text);
    int rc = 0;
    const json_t *act = json_object_get(o, "act"), *wd = json_object_get(o, "wd");
    const json_t *ffn = json_object_get(o, "ffn"), *layers = json_object_get(o, "layers");
    fl_act a;
    if (!json_is_object(o) || !json_is_string(act))
        rc = fail(err, errn, "%s: no string \"act\"", p);
    else if (fl_act_parse(&a, json_string_value(act)))
        rc = fail(err, errn, "%s: unknown act '%s'", p, json_string_value(act));
    else if (!json_is_number(wd) || !(json_number_value(wd) >= 0.0) || !isfinite(json_number_value(wd)))
        rc = fail(err, errn, "%s: \"wd\" is not a finite non-negative number", p);
    else if (!json_is_integer(ffn) || json_integer_value(ffn) < 1 || json_integer_value(ffn) > FL_MODEL_MAX_F) /* what train accepts */
        rc = fail(err, errn, "%s: \"ffn\" is not an integer in [1, %d]", p, FL_MODEL_MAX_F);
    else if (!json_is_integer(layers) || json_integer_value(layers) < 1 || json_integer_value(layers) > FL_MODEL_MAX_L)
        rc = fail(err, errn, "%s: \"layers\" is not an integer in [1, %d]", p, FL_MODEL_MAX_L);
    else {
        snprintf(r->act, sizeof r->act, "%s", fl_act_name(a));
        r->gated = fl_act_gated(a);
        r->wd = json_number_value(wd);
        r->F = (int)json_integer_value(ffn);
        r->L = (int)json_integer_value(layers);
    }
    json_decref(o);
    return rc;
}

static int finite_nonneg(double v) { return isfinite(v) && v >= 0.0; }

/* metrics.csv: step and lr, steps increasing; tau[] accumulates lr * wd in row order. */
static int load_metrics(fl_attrib_run *r, const char *dir, char *err, size_t errn)
{
    double *lr;
    if (fl_csv_series(dir, "metrics.csv", "lr", finite_nonneg, "a finite non-negative number", &r->mstep, &lr,
                      &r->nmetric, err, errn)) {
        free(lr);
        return -1;
    }
    r->tau = malloc(((size_t)r->nmetric + 1) * sizeof *r->tau);
    if (!r->tau) {
        free(lr);
        return fail(err, errn, "%s/metrics.csv: out of memory", dir);
    }
    double acc = 0.0;
    for (long i = 0; i < r->nmetric; i++) {
        r->tau[i] = acc;
        acc += lr[i] * r->wd;
    }
    r->tau[r->nmetric] = acc;
    free(lr);
    return 0;
}

/* channels.csv: blocks of L*F rows per logged step.  The shortest row, "0,0,0,0,0,0,0,0\n", has 16
   bytes. */
enum { CH_ROW_MIN = 16 };

/* The logged steps channels.csv (open in c) can hold, from its size: config.json's L and F are checked
   against the file before anything is allocated.  0 with the reason in err when it cannot hold one. */
static size_t channels_max_steps(const fl_attrib_run *r, const fl_csv *c, size_t LF, char *err, size_t errn)
{
    struct stat sb;
    if (fstat(fileno(c->f), &sb) || !S_ISREG(sb.st_mode)) {
        fail(err, errn, "%s: not a regular file", c->path);
        return 0;
    }
    const size_t max_steps = (size_t)sb.st_size / (LF * CH_ROW_MIN);
    if (!max_steps)
        fail(err, errn, "%s: %lld bytes cannot hold one logged step of L*F = %d*%d = %zu rows (at least %d bytes "
             "each): config.json's \"layers\" and \"ffn\" do not describe this run", c->path, (long long)sb.st_size,
             r->L, r->F, LF, CH_ROW_MIN);
    return max_steps;
}

/* Room for more logged steps: r->lstep and the channel planes grown to *cap steps, at most max_steps. */
static int channels_grow(fl_attrib_run *r, long *cap, size_t max_steps, size_t LF, const fl_csv *c, long step,
                         char *err, size_t errn)
{
    if ((size_t)*cap >= max_steps) /* only when the file grows while it is read */
        return fail(err, errn, "%s:%ld: more logged steps than its size held when opened (is it being written?)",
                    c->path, c->lineno);
    *cap = *cap ? 2 * *cap : 64;
    if ((size_t)*cap > max_steps)
        *cap = (long)max_steps;
    long *ls = realloc(r->lstep, (size_t)*cap * sizeof *ls);
    if (ls)
        r->lstep = ls;
    int ok = ls != NULL;
    for (int q = 0; q < FL_CH_COUNT; q++) {
        double *p = ok ? realloc(r->ch[q], (size_t)*cap * LF * sizeof *p) : NULL;
        if (p)
            r->ch[q] = p;
        ok &= p != NULL;
    }
    if (!ok)
        return fail(err, errn, "%s: out of memory at step %ld", c->path, step);
    return 0;
}

/* Logged step `step` begins at the current row: after the previous step's L*F rows (have of them were
   read), in increasing order; its rows NaN until read. */
static int channels_step_begin(fl_attrib_run *r, long *cap, size_t max_steps, size_t LF, size_t have,
                               const fl_csv *c, long step, char *err, size_t errn)
{
    if (r->S && step < r->lstep[r->S - 1])
        return fail(err, errn, "%s:%ld: steps not increasing: step %ld after step %ld", c->path, c->lineno, step,
                    r->lstep[r->S - 1]);
    if (r->S && have != LF)
        return fail(err, errn, "%s:%ld: step %ld begins before step %ld has its L*F = %zu rows (it has %zu)", c->path,
                    c->lineno, step, r->lstep[r->S - 1], LF, have);
    if (r->S == *cap && channels_grow(r, cap, max_steps, LF, c, step, err, errn))
        return -1;
    for (int q = 0; q < FL_CH_COUNT; q++)
        for (size_t k = 0; k < LF; k++)
            r->ch[q][(size_t)r->S * LF + k] = NAN;
    r->lstep[r->S++] = step;
    return 0;
}

static int load_channels(fl_attrib_run *r, const char *dir, char *err, size_t errn)
{
    static const char *const cols[] = { "step", "layer", "channel", "amax", "align", "wnorm", "gate_max", "up_max" };
    const size_t LF = (size_t)r->L * (size_t)r->F;
    fl_csv c;
    int col[8], rc;
    long cap = 0;
    size_t have = 0; /* rows of the current step */
    unsigned char *seen = NULL;
    if (fl_csv_open(&c, dir, "channels.csv", err, errn))
        return -1;
    if (fl_csv_need(&c, cols, col, 8))
        goto bad;
    const size_t max_steps = channels_max_steps(r, &c, LF, err, errn);
    if (!max_steps)
        goto bad;
    if (!(seen = calloc(LF, 1))) {
        fail(err, errn, "%s: out of memory", c.path);
        goto bad;
    }
    while ((rc = fl_csv_row(&c)) > 0) {
        long step, l, i;
        double v[FL_CH_COUNT];
        int finite = 1;
        if (fl_csv_int(&c, col[0], 0, LONG_MAX, &step) || fl_csv_int(&c, col[1], 0, r->L - 1, &l) ||
            fl_csv_int(&c, col[2], 0, r->F - 1, &i))
            goto bad;
        for (int q = 0; q < FL_CH_COUNT; q++) {
            if (fl_csv_num(&c, col[3 + q], &v[q]))
                goto bad;
            finite &= isfinite(v[q]) != 0;
        }
        if (!r->S || step != r->lstep[r->S - 1]) { /* a new logged step */
            if (channels_step_begin(r, &cap, max_steps, LF, have, &c, step, err, errn))
                goto bad;
            memset(seen, 0, LF);
            have = 0;
        }
        const size_t at = (size_t)l * (size_t)r->F + (size_t)i;
        if (seen[at]) {
            fail(err, errn, "%s:%ld: a second row for step %ld layer %ld channel %ld", c.path, c.lineno, step, l, i);
            goto bad;
        }
        seen[at] = 1;
        have++;
        if (!finite) { /* excluded: stays NaN in all five */
            r->ch_excluded++;
            continue;
        }
        for (int q = 0; q < FL_CH_COUNT; q++)
            r->ch[q][(size_t)(r->S - 1) * LF + at] = v[q];
    }
    if (rc < 0)
        goto bad;
    if (!r->S) {
        fail(err, errn, "%s: no data rows", c.path);
        goto bad;
    }
    if (have != LF) {
        fail(err, errn, "%s:%ld: the last step %ld has %zu of its L*F = %zu rows (truncated?)", c.path, c.lineno,
             r->lstep[r->S - 1], have, LF);
        goto bad;
    }
    free(seen);
    fl_csv_close(&c);
    return 0;
bad:
    free(seen);
    fl_csv_close(&c);
    return -1;
}

/* records.csv: steps non-decreasing; a row with a non-finite amax (or align_rank, gated) is excluded. */
static int load_records(fl_attrib_run *r, const char *dir, char *err, size_t errn)
{
    static const char *const cols[] = { "step", "layer", "channel", "amax", "align_rank" };
    fl_csv c;
    int col[5], rc;
    long cap = 0, last = -1;
    if (fl_csv_open(&c, dir, "records.csv", err, errn))
        return -1;
    if (fl_csv_need(&c, cols, col, 5))
        goto bad;
    while ((rc = fl_csv_row(&c)) > 0) {
        fl_attrib_record e;
        long step, l, i;
        if (fl_csv_int(&c, col[0], 0, LONG_MAX, &step) || fl_csv_int(&c, col[1], 0, r->L - 1, &l) ||
            fl_csv_int(&c, col[2], 0, r->F - 1, &i) || fl_csv_num(&c, col[3], &e.amax) || fl_csv_num(&c, col[4], &e.align_rank))
            goto bad;
        if (step < last) {
            fail(err, errn, "%s:%ld: steps going back: step %ld after step %ld", c.path, c.lineno, step, last);
            goto bad;
        }
        last = step;
        if (!isfinite(e.amax) || (r->gated && !isfinite(e.align_rank))) {
            r->rec_excluded++;
            continue;
        }
        if (r->gated && (e.align_rank < 0 || e.align_rank >= r->F || e.align_rank != floor(e.align_rank))) {
            fail(err, errn, "%s:%ld: align_rank %s is not a rank in [0, %d)", c.path, c.lineno, c.fld[col[4]], r->F);
            goto bad;
        }
        if (r->nrec == cap) {
            cap = cap ? 2 * cap : 256;
            fl_attrib_record *p = realloc(r->rec, (size_t)cap * sizeof *p);
            if (!p) {
                fail(err, errn, "%s: out of memory", c.path);
                goto bad;
            }
            r->rec = p;
        }
        e.step = step;
        e.layer = (int)l;
        e.channel = (int)i;
        r->rec[r->nrec++] = e;
    }
    if (rc < 0)
        goto bad;
    fl_csv_close(&c);
    return 0;
bad:
    fl_csv_close(&c);
    return -1;
}

int fl_attrib_load(fl_attrib_run *run, const char *dir, char *err, size_t errn)
{
    memset(run, 0, sizeof *run);
    if (load_config(run, dir, err, errn) || load_metrics(run, dir, err, errn) || load_channels(run, dir, err, errn) ||
        load_records(run, dir, err, errn)) {
        fl_attrib_free(run);
        return -1;
    }
    return 0;
}

void fl_attrib_free(fl_attrib_run *run)
{
    free(run->mstep);
    free(run->tau);
    free(run->lstep);
    for (int q = 0; q < FL_CH_COUNT; q++)
        free(run->ch[q]);
    free(run->rec);
    memset(run, 0, sizeof *run);
}

double fl_attrib_tau(const fl_attrib_run *run, long step)
{
    long i = 0;
    while (i < run->nmetric && run->mstep[i] < step)
        i++;
    return run->tau ? run->tau[i] : NAN;
}

/* ---- analysis ---- */

static void rho_stats(fl_attrib_rho *o, double *vals, long n, double last)
{
    long k = 0;
    for (long j = 0; j < n; j++)
        if (isfinite(vals[j]))
            vals[k++] = vals[j];
    o->nsteps = k;
    o->median = median(vals, (size_t)k);
    o->last = last;
}

/* Spearman of quantity q against amax over layer l's finite channels at logged step s. */
static double rho_at(const fl_attrib_run *r, int q, long s, int l, double *x, double *y)
{
    const double *a = fl_attrib_row(r, q, s, l), *m = fl_attrib_row(r, FL_CH_AMAX, s, l);
    size_t n = 0;
    for (int i = 0; i < r->F; i++)
        if (isfinite(a[i]) && isfinite(m[i])) {
            x[n] = a[i];
            y[n++] = m[i];
        }
    return fl_spearman(x, y, n);
}

/* corr(lag) of da(t) with dm(t + lag), t over [0, nd); pairs at lag 0 into *pairs0. */
static void lag_curve(double *corr, long *pairs0, const double *da, const double *dm, long nd, double *x, double *y)
{
    for (int j = 0; j < FL_ATTRIB_NLAG; j++) {
        const int lag = j - FL_ATTRIB_MAXLAG;
        size_t n = 0;
        for (long t = 0; t < nd; t++)
            if (t + lag >= 0 && t + lag < nd && isfinite(da[t]) && isfinite(dm[t + lag])) {
                x[n] = da[t];
                y[n++] = dm[t + lag];
            }
        corr[j] = n >= 5 ? fl_pearson(x, y, n) : NAN;
        if (lag == 0)
            *pairs0 = (long)n;
    }
}

/* The best lag of a curve: the largest finite corr, lags visited 0, +1, -1, +2, -2, ... */
static void lag_best(fl_attrib_stats *o)
{
    o->best_lag = 0;
    o->best_corr = NAN;
    for (int d = 0; d <= FL_ATTRIB_MAXLAG; d++)
        for (int sgn = 1; sgn >= (d ? -1 : 1); sgn -= 2) {
            const double c = o->corr[FL_ATTRIB_MAXLAG + sgn * d];
            if (isfinite(c) && !(c <= o->best_corr)) {
                o->best_corr = c;
                o->best_lag = sgn * d;
            }
        }
    o->corr0 = o->corr[FL_ATTRIB_MAXLAG];
}

static void records_stats(fl_attrib_stats *o, long n, long n1, long n2, long nc, const fl_attrib_result *res, int gated)
{
    o->nrec = n;
    o->nrec_top1 = n1;
    o->nrec_top2 = n2;
    o->nrec_conc = nc;
    o->frac_top1 = gated && n ? (double)n1 / (double)n : NAN;
    o->frac_top2 = gated && n ? (double)n2 / (double)n : NAN;
    o->p_top2 = gated && n ? binom_tail(n2, n, res->chance2) : NAN;
    o->conc = n ? (double)nc / (double)n : NAN;
}

/* Scratch of the analysis: arrays sized by F, the window's steps nw and the layer count. */
typedef struct {
    double *x, *y;          /* (max(F, nw)) */
    int *idx;               /* (F) */
    double *va, *vw;        /* (nw) rho per step */
    double *pa, *pw, *la, *lw; /* (L*nw) pooled rho values, (L) last values */
    double *a, *m, *da, *dm;   /* (nw) lead/lag series */
    double *slope, *r2;     /* (F) per channel */
    double *st, *sa, *sr;   /* (L*F) pooled slopes: top, all, r2 */
} scratch;

static void scratch_free(scratch *w)
{
    void *p[] = { w->x, w->y, w->idx, w->va, w->vw, w->pa, w->pw, w->la, w->lw, w->a, w->m, w->da, w->dm,
                  w->slope, w->r2, w->st, w->sa, w->sr };
    for (size_t k = 0; k < sizeof p / sizeof p[0]; k++)
        free(p[k]);
}

static int scratch_alloc(scratch *w, size_t F, size_t nw, size_t L)
{
    const size_t n = F > nw ? F : nw, d = sizeof(double);
    memset(w, 0, sizeof *w);
    w->x = malloc(n * d), w->y = malloc(n * d), w->idx = malloc(F * sizeof(int));
    w->va = malloc(nw * d), w->vw = malloc(nw * d);
    w->pa = malloc(L * nw * d), w->pw = malloc(L * nw * d), w->la = malloc(L * d), w->lw = malloc(L * d);
    w->a = malloc(nw * d), w->m = malloc(nw * d), w->da = malloc(nw * d), w->dm = malloc(nw * d);
    w->slope = malloc(F * d), w->r2 = malloc(F * d);
    w->st = malloc(L * F * d), w->sa = malloc(L * F * d), w->sr = malloc(L * F * d);
    return w->x && w->y && w->idx && w->va && w->vw && w->pa && w->pw && w->la && w->lw && w->a && w->m && w->da &&
                   w->dm && w->slope && w->r2 && w->st && w->sa && w->sr
               ? 0
               : -1;
}

static const char *slope_word(double s)
{
    return !isfinite(s) ? "undefined" : fabs(s - 2.0) <= 0.3 ? "quadratic" : fabs(s - 1.0) <= 0.3 ? "linear" : "neither 1 nor 2";
}

static void conclude(fl_attrib_result *res, const fl_attrib_run *run)
{
    const fl_attrib_stats *p = &res->pooled;
    char *b = res->conclusion;
    const size_t n = sizeof res->conclusion;
    size_t w = 0;
#define ADD(...) (w += (size_t)snprintf(b + (w < n ? w : n - 1), w < n ? n - w : 1, __VA_ARGS__))
    if (!run->gated) {
        ADD("act %s is not gated, so there is no alignment attribution; ", run->act);
        if (p->nrec)
            ADD("%ld records, %.0f%% set by their layer's top-amax channel; ", p->nrec, 100.0 * p->conc);
        else
            ADD("no records in the window; ");
        ADD("slope of ln amax on ln gate_max, all channels: median %.3g (%s)", p->slope_all, slope_word(p->slope_all));
        return;
    }
    if (!p->nrec)
        ADD("no records in the window; ");
    else
        ADD("records %s concentrated in the top-2%% aligned channels above chance: %ld of %ld (%.1f%%) vs %.1f%% by "
            "chance (binomial p %.2g); %.0f%% set by their layer's top-amax channel; ",
            p->frac_top2 > res->chance2 && p->p_top2 < 0.01 ? "ARE" : "are NOT", p->nrec_top2, p->nrec,
            100.0 * p->frac_top2, 100.0 * res->chance2, p->p_top2, 100.0 * p->conc);
    if (isfinite(p->best_corr))
        ADD("alignment changes %s (best lag %+d logged intervals, r %.2f; lag 0 r %.2f); ",
            p->best_lag > 0 ? "lead amax changes" : p->best_lag < 0 ? "follow amax changes" : "move with amax changes",
            p->best_lag, p->best_corr, p->corr0);
    else
        ADD("lead/lag undefined (too few logged steps); ");
    ADD("slope of ln amax on ln gate_max, top-2%% aligned: median %.3g (%s), all channels %.3g", p->slope_top,
        slope_word(p->slope_top), p->slope_all);
#undef ADD
}

/* The window: from .. to (from_tau resolved; to < 0 the run's last step in any file) and its logged
   steps i0 .. i1 with their interval.  0, or -1 with the reason in err. */
static int window_resolve(fl_attrib_result *res, const fl_attrib_run *run, const fl_attrib_window *win, char *err,
                          size_t errn)
{
    long from = win->from < 0 ? 0 : win->from, to = win->to;
    if (!isnan(win->from_tau)) {
        long i = 0;
        while (i < run->nmetric && !(run->tau[i] >= win->from_tau))
            i++;
        if (i == run->nmetric)
            return fail(err, errn, "t/tau never reaches %g: it is %.6g after the last metrics step %ld", win->from_tau,
                        run->tau[run->nmetric], run->mstep[run->nmetric - 1]);
        from = run->mstep[i];
    }
    if (to < 0) { /* the run's last step in any file */
        to = run->lstep[run->S - 1];
        if (run->mstep[run->nmetric - 1] > to)
            to = run->mstep[run->nmetric - 1];
        if (run->nrec && run->rec[run->nrec - 1].step > to)
            to = run->rec[run->nrec - 1].step;
    }
    if (from > to)
        return fail(err, errn, "empty window: from %ld > to %ld", from, to);
    long i0 = 0, i1 = run->S - 1;
    while (i0 < run->S && run->lstep[i0] < from)
        i0++;
    while (i1 >= 0 && run->lstep[i1] > to)
        i1--;
    if (i0 > i1)
        return fail(err, errn, "the window [%ld, %ld] holds no logged step (channels.csv logs steps %ld .. %ld)", from,
                    to, run->lstep[0], run->lstep[run->S - 1]);
    res->from = from;
    res->to = to;
    res->tau_from = fl_attrib_tau(run, from);
    res->tau_to = fl_attrib_tau(run, to);
    res->i0 = i0;
    res->i1 = i1;
    res->interval = i1 > i0 ? run->lstep[i0 + 1] - run->lstep[i0] : 0;
    for (long s = i0 + 1; s <= i1; s++)
        if (run->lstep[s] - run->lstep[s - 1] != res->interval)
            res->interval = 0;
    return 0;
}

/* The pooled statistics' inputs, gathered layer by layer; the values themselves are in the scratch's
   pooled arrays. */
typedef struct {
    long np, nla, nlw;           /* rho values in pa, pw; last values in la, lw */
    long n, n1, n2, nc;          /* records: all, top-1% and top-2% aligned, set by the top-amax channel */
    long pairs0;                 /* lead/lag pairs at lag 0 */
    double csum[FL_ATTRIB_NLAG]; /* the finite lag correlations: sum and count per lag */
    int ccount[FL_ATTRIB_NLAG];
    long nst, nsa, nsr;          /* slopes in st, sa; R^2 in sr */
} pool;

/* a. Layer l's rank correlations at each logged step of the window. */
static void layer_rho(fl_attrib_stats *o, scratch *w, pool *p, const fl_attrib_run *run, const fl_attrib_result *res,
                      int l)
{
    const long i0 = res->i0, nw = res->i1 - res->i0 + 1;
    for (long s = i0; s <= res->i1; s++) {
        w->va[s - i0] = run->gated ? rho_at(run, FL_CH_ALIGN, s, l, w->x, w->y) : NAN;
        w->vw[s - i0] = rho_at(run, FL_CH_WNORM, s, l, w->x, w->y);
        w->pa[p->np] = w->va[s - i0];
        w->pw[p->np++] = w->vw[s - i0];
    }
    const double last_a = w->va[nw - 1], last_w = w->vw[nw - 1];
    if (isfinite(last_a))
        w->la[p->nla++] = last_a;
    if (isfinite(last_w))
        w->lw[p->nlw++] = last_w;
    rho_stats(&o->rho_align, w->va, nw, last_a);
    rho_stats(&o->rho_wnorm, w->vw, nw, last_w);
}

/* b. Layer l's records in the window, against the top-amax channel at the last logged step. */
static void layer_records(fl_attrib_stats *o, scratch *w, pool *p, const fl_attrib_run *run,
                          const fl_attrib_result *res, int l)
{
    o->top_channel = fl_attrib_top(w->idx, fl_attrib_row(run, FL_CH_AMAX, res->i1, l), run->F, 1) ? w->idx[0] : -1;
    long n = 0, n1 = 0, n2 = 0, nc = 0;
    for (long k = 0; k < run->nrec; k++) {
        const fl_attrib_record *e = &run->rec[k];
        if (e->layer != l || e->step < res->from || e->step > res->to)
            continue;
        n++;
        n1 += e->align_rank < res->k1;
        n2 += e->align_rank < res->k2;
        nc += e->channel == o->top_channel;
    }
    records_stats(o, n, n1, n2, nc, res, run->gated);
    p->n += n, p->n1 += n1, p->n2 += n2, p->nc += nc;
}

/* c. Lead/lag of layer l's top-k2 mean alignment and its log max amax, from one logged step to the
   next. */
static void layer_lead_lag(fl_attrib_stats *o, scratch *w, pool *p, const fl_attrib_run *run,
                           const fl_attrib_result *res, int l)
{
    const int F = run->F;
    const long i0 = res->i0, nw = res->i1 - res->i0 + 1;
    for (long s = i0; s <= res->i1; s++) {
        const double *al = fl_attrib_row(run, FL_CH_ALIGN, s, l), *am = fl_attrib_row(run, FL_CH_AMAX, s, l);
        const int k = run->gated ? fl_attrib_top(w->idx, al, F, res->k2) : 0;
        double sum = 0.0, mx = -1.0;
        for (int j = 0; j < k; j++)
            sum += al[w->idx[j]];
        for (int i = 0; i < F; i++)
            if (isfinite(am[i]) && am[i] > mx)
                mx = am[i];
        w->a[s - i0] = k ? sum / k : NAN;
        w->m[s - i0] = mx > 0.0 ? log(mx) : NAN;
    }
    for (long t = 0; t + 1 < nw; t++) {
        w->da[t] = w->a[t + 1] - w->a[t];
        w->dm[t] = w->m[t + 1] - w->m[t];
    }
    lag_curve(o->corr, &o->pairs0, w->da, w->dm, nw - 1, w->x, w->y);
    lag_best(o);
    p->pairs0 += o->pairs0;
    for (int j = 0; j < FL_ATTRIB_NLAG; j++)
        if (isfinite(o->corr[j])) {
            p->csum[j] += o->corr[j];
            p->ccount[j]++;
        }
}

/* Channel i of layer l: the OLS slope of ln amax on ln gate_max over the window's logged steps (their
   R^2 into *r2); NaN with fewer than 5 points or ln gate_max spanning less than 0.05.  x, y: scratch. */
static double channel_slope(double *r2, const fl_attrib_run *run, const fl_attrib_result *res, int l, int i, double *x,
                            double *y)
{
    size_t k = 0;
    double lo = INFINITY, hi = -INFINITY;
    for (long s = res->i0; s <= res->i1; s++) {
        const double g = fl_attrib_row(run, FL_CH_GATE, s, l)[i], a = fl_attrib_row(run, FL_CH_AMAX, s, l)[i];
        if (!(g > 0.0) || !(a > 0.0) || !isfinite(g) || !isfinite(a))
            continue;
        x[k] = log(g);
        y[k++] = log(a);
        lo = fmin(lo, x[k - 1]);
        hi = fmax(hi, x[k - 1]);
    }
    *r2 = NAN;
    return k >= 5 && hi - lo >= 0.05 ? fl_ols_slope(r2, x, y, k) : NAN;
}

/* d. Layer l's per-channel slopes of ln amax on ln gate_max: medians over the top-k2 aligned channels
   (at the last logged step) and over all. */
static void layer_slopes(fl_attrib_stats *o, scratch *w, pool *p, const fl_attrib_run *run,
                         const fl_attrib_result *res, int l)
{
    const int F = run->F;
    for (int i = 0; i < F; i++)
        w->slope[i] = channel_slope(&w->r2[i], run, res, l, i, w->x, w->y);
    long nt = 0, na = 0, nr = 0;
    const int k = run->gated ? fl_attrib_top(w->idx, fl_attrib_row(run, FL_CH_ALIGN, res->i1, l), F, res->k2) : 0;
    for (int j = 0; j < k; j++)
        if (isfinite(w->slope[w->idx[j]]))
            w->st[p->nst + nt++] = w->slope[w->idx[j]];
    for (int i = 0; i < F; i++) {
        if (isfinite(w->slope[i]))
            w->sa[p->nsa + na++] = w->slope[i];
        if (isfinite(w->r2[i]))
            w->sr[p->nsr + nr++] = w->r2[i];
    }
    o->nslope_top = nt;
    o->nslope_all = na;
    /* the medians sort a copy: the pooled arrays keep every layer's values */
    memcpy(w->x, w->st + p->nst, (size_t)nt * sizeof *w->x);
    o->slope_top = median(w->x, (size_t)nt);
    memcpy(w->x, w->sa + p->nsa, (size_t)na * sizeof *w->x);
    o->slope_all = median(w->x, (size_t)na);
    memcpy(w->x, w->sr + p->nsr, (size_t)nr * sizeof *w->x);
    o->r2_all = median(w->x, (size_t)nr);
    p->nst += nt;
    p->nsa += na;
    p->nsr += nr;
}

/* The statistics pooled over the layers. */
static void pooled_stats(fl_attrib_stats *P, const pool *p, scratch *w, const fl_attrib_result *res, int gated)
{
    rho_stats(&P->rho_align, w->pa, p->np, median(w->la, (size_t)p->nla));
    rho_stats(&P->rho_wnorm, w->pw, p->np, median(w->lw, (size_t)p->nlw));
    records_stats(P, p->n, p->n1, p->n2, p->nc, res, gated);
    P->top_channel = -1;
    P->pairs0 = p->pairs0;
    for (int j = 0; j < FL_ATTRIB_NLAG; j++)
        P->corr[j] = p->ccount[j] ? p->csum[j] / p->ccount[j] : NAN;
    lag_best(P);
    P->nslope_top = p->nst;
    P->nslope_all = p->nsa;
    P->slope_top = median(w->st, (size_t)p->nst);
    P->slope_all = median(w->sa, (size_t)p->nsa);
    P->r2_all = median(w->sr, (size_t)p->nsr);
}

int fl_attrib_analyse(fl_attrib_result *res, const fl_attrib_run *run, const fl_attrib_window *win, char *err,
                      size_t errn)
{
    memset(res, 0, sizeof *res);
    const int L = run->L, F = run->F;
    res->from_tau = win->from_tau;
    if (window_resolve(res, run, win, err, errn))
        return -1;
    const long nw = res->i1 - res->i0 + 1;
    res->k1 = (F + 99) / 100; /* ceil(0.01 F), in integers: 0.01 * F can round up past an integer */
    res->k2 = (2 * F + 99) / 100;
    res->chance1 = (double)res->k1 / F;
    res->chance2 = (double)res->k2 / F;
    res->L = L;
    for (long s = res->i0; s <= res->i1; s++)
        for (int l = 0; l < L; l++) {
            const double *m = fl_attrib_row(run, FL_CH_AMAX, s, l);
            for (int i = 0; i < F; i++)
                res->excluded += isnan(m[i]);
        }
    scratch w = { 0 }; /* freed whole even when res->layer's allocation fails first */
    res->layer = calloc((size_t)L, sizeof *res->layer);
    if (!res->layer || scratch_alloc(&w, (size_t)F, (size_t)nw, (size_t)L)) {
        scratch_free(&w);
        fl_attrib_result_free(res);
        return fail(err, errn, "out of memory");
    }
    pool p;
    memset(&p, 0, sizeof p);
    for (int l = 0; l < L; l++) {
        layer_rho(&res->layer[l], &w, &p, run, res, l);
        layer_records(&res->layer[l], &w, &p, run, res, l);
        layer_lead_lag(&res->layer[l], &w, &p, run, res, l);
        layer_slopes(&res->layer[l], &w, &p, run, res, l);
    }
    pooled_stats(&res->pooled, &p, &w, res, run->gated);
    scratch_free(&w);
    conclude(res, run);
    return 0;
}

void fl_attrib_result_free(fl_attrib_result *res)
{
    free(res->layer);
    res->layer = NULL;
}

/* ---- JSON ---- */

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *stats_json(const fl_attrib_stats *o, const fl_attrib_result *res, const fl_attrib_run *run, int layer)
{
    static const char *const why = "the activation is not gated: align is 0 for every channel";
    json_t *j = json_object();
    if (layer >= 0)
        json_object_set_new(j, "layer", json_integer(layer));
    const fl_attrib_rho *rh[2] = { &o->rho_align, &o->rho_wnorm };
    for (int k = 0; k < 2; k++) {
        json_t *r = json_object();
        json_object_set_new(r, "median", num(rh[k]->median));
        json_object_set_new(r, "last", num(rh[k]->last));
        json_object_set_new(r, "steps", json_integer(rh[k]->nsteps));
        if (!k && !run->gated)
            json_object_set_new(r, "why", json_string(why));
        json_object_set_new(j, k ? "rho_wnorm_amax" : "rho_align_amax", r);
    }
    json_t *r = json_object();
    json_object_set_new(r, "n", json_integer(o->nrec));
    json_object_set_new(r, "frac_top1pct", num(o->frac_top1));
    json_object_set_new(r, "frac_top2pct", num(o->frac_top2));
    json_object_set_new(r, "chance_top1pct", num(res->chance1));
    json_object_set_new(r, "chance_top2pct", num(res->chance2));
    json_object_set_new(r, "p_top2pct", num(o->p_top2));
    json_object_set_new(r, "top_amax_channel", o->top_channel >= 0 ? json_integer(o->top_channel) : json_null());
    json_object_set_new(r, "concentration", num(o->conc));
    if (!run->gated)
        json_object_set_new(r, "why", json_string(why));
    json_object_set_new(j, "records", r);
    r = json_object();
    json_object_set_new(r, "best_lag", isfinite(o->best_corr) ? json_integer(o->best_lag) : json_null());
    json_object_set_new(r, "best_corr", num(o->best_corr));
    json_object_set_new(r, "corr_lag0", num(o->corr0));
    json_object_set_new(r, "pairs_lag0", json_integer(o->pairs0));
    json_t *c = json_array();
    for (int k = 0; k < FL_ATTRIB_NLAG; k++)
        json_array_append_new(c, num(o->corr[k]));
    json_object_set_new(r, "corr_by_lag", c);
    if (!run->gated)
        json_object_set_new(r, "why", json_string(why));
    json_object_set_new(j, "lead_lag", r);
    r = json_object();
    json_object_set_new(r, "top2pct_median", num(o->slope_top));
    json_object_set_new(r, "top2pct_channels", json_integer(o->nslope_top));
    json_object_set_new(r, "all_median", num(o->slope_all));
    json_object_set_new(r, "all_channels", json_integer(o->nslope_all));
    json_object_set_new(r, "all_r2_median", num(o->r2_all));
    if (!run->gated)
        json_object_set_new(r, "why", json_string(why));
    json_object_set_new(j, "slope", r);
    return j;
}

json_t *fl_attrib_json(const fl_attrib_result *res, const fl_attrib_run *run, const char *dir)
{
    json_t *j = json_object(), *w = json_object(), *x = json_object(), *layers = json_array(), *notes = json_array();
    json_object_set_new(j, "run", fl_json_string(dir)); /* any bytes: fl_json.h */
    json_object_set_new(j, "act", json_string(run->act));
    json_object_set_new(j, "gated", json_boolean(run->gated));
    json_object_set_new(j, "layers", json_integer(run->L));
    json_object_set_new(j, "ffn", json_integer(run->F));
    json_object_set_new(j, "wd", num(run->wd));
    json_object_set_new(w, "from", json_integer(res->from));
    json_object_set_new(w, "to", json_integer(res->to));
    json_object_set_new(w, "from_tau", num(res->from_tau));
    json_object_set_new(w, "tau_from", num(res->tau_from));
    json_object_set_new(w, "tau_to", num(res->tau_to));
    json_object_set_new(w, "logged_steps", json_integer(res->i1 - res->i0 + 1));
    json_object_set_new(w, "first_logged", json_integer(run->lstep[res->i0]));
    json_object_set_new(w, "last_logged", json_integer(run->lstep[res->i1]));
    json_object_set_new(w, "interval_steps", res->interval ? json_integer(res->interval) : json_null());
    json_object_set_new(j, "window", w);
    json_object_set_new(j, "top1pct_channels", json_integer(res->k1));
    json_object_set_new(j, "top2pct_channels", json_integer(res->k2));
    json_object_set_new(x, "channel_rows_window", json_integer(res->excluded));
    json_object_set_new(x, "channel_rows_total", json_integer(run->ch_excluded));
    json_object_set_new(x, "record_rows", json_integer(run->rec_excluded));
    json_object_set_new(j, "excluded", x);
    for (int l = 0; l < res->L; l++)
        json_array_append_new(layers, stats_json(&res->layer[l], res, run, l));
    json_object_set_new(j, "per_layer", layers);
    json_object_set_new(j, "pooled", stats_json(&res->pooled, res, run, -1));
    if (!run->gated)
        json_array_append_new(notes, json_string("alignment results are null: the activation is not gated (align is 0 "
                                                 "for every channel); wnorm, concentration and the all-channel slope "
                                                 "still apply"));
    json_array_append_new(notes, json_string("lead/lag: lag > 0 means amax changes follow alignment changes by lag "
                                             "logged intervals"));
    json_object_set_new(j, "notes", notes);
    json_object_set_new(j, "conclusion", json_string(res->conclusion));
    return j;
}
