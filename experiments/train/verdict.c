/* verdict.c — the demo's failure measure and verdict (see verdict.h). */
#include "verdict.h"

#include "mech.h" /* fl_median_range */

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *fl_fail_reason_name(int reason)
{
    static const char *const names[] = { "none", "non-finite loss", "diverged (train.h)", "loss gap", "stopped early" };
    return reason >= 0 && reason <= FL_FAIL_STOPPED ? names[reason] : "?";
}

long fl_loss_gap_series(double *gap, const double *loss, long n, const double *ref, long nref, double ema)
{
    double ea = 0.0, er = 0.0;
    long t = 0;
    for (; t < n && t < nref && isfinite(loss[t]) && isfinite(ref[t]); t++) {
        ea = t ? (1.0 - ema) * ea + ema * loss[t] : loss[t];
        er = t ? (1.0 - ema) * er + ema * ref[t] : ref[t];
        gap[t] = (ea - er) / er;
    }
    for (long k = t; k < n; k++)
        gap[k] = NAN;
    return t;
}

void fl_arm_judge(fl_arm_failure *f, const double *loss, long n, long planned, int diverged, long div_step,
                  const double *ref, long nref, double ema, double threshold, long window)
{
    f->failed = 0;
    f->reason = FL_FAIL_NONE;
    f->step = -1;
    f->gap_final = f->gap_max = NAN;
    for (long t = 0; t < n; t++)
        if (!isfinite(loss[t])) {
            f->failed = 1;
            f->reason = FL_FAIL_NONFINITE;
            f->step = t;
            break;
        }
    if (ref && n > 0) {
        double *gap = malloc((size_t)n * sizeof *gap);
        const long m = gap ? fl_loss_gap_series(gap, loss, n, ref, nref, ema) : 0;
        long above = 0;
        for (long t = 0; t < m; t++) {
            const double g = gap[t];
            f->gap_final = g;
            if (!(g <= f->gap_max))
                f->gap_max = g;
            above = g > threshold ? above + 1 : 0;
            if (above >= window && !f->failed) {
                f->failed = 1;
                f->reason = FL_FAIL_GAP;
                f->step = t + 1 - window;
            }
        }
        free(gap);
    }
    if (f->failed)
        return;
    if (diverged) {
        f->failed = 1;
        f->reason = FL_FAIL_DIVERGED;
        f->step = div_step;
    } else if (n < planned) {
        f->failed = 1;
        f->reason = FL_FAIL_STOPPED;
        f->step = n;
    }
}

__attribute__((format(printf, 3, 4))) static void addf(char *buf, size_t cap, const char *fmt, ...)
{
    const size_t w = strlen(buf);
    if (w + 1 >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + w, cap - w, fmt, ap);
    va_end(ap);
}

/* One arm's tally: runs, failures and the failing seeds (text). */
typedef struct {
    int runs, fails;
    char seeds[256];
} tally;

static void arm_tally(tally *t, const fl_arm_outcome *a, int n, const char *arm)
{
    memset(t, 0, sizeof *t);
    for (int i = 0; i < n; i++) {
        if (strcmp(a[i].arm, arm))
            continue;
        t->runs++;
        if (a[i].failed) {
            addf(t->seeds, sizeof t->seeds, "%s%llu", t->fails ? ", " : "", (unsigned long long)a[i].seed);
            t->fails++;
        }
    }
}

const char *fl_verdict_name(int outcome)
{
    static const char *const names[] = { "REPRODUCED", "NOT REPRODUCED", "INCONCLUSIVE" };
    return outcome >= 0 && outcome <= FL_VERDICT_INCONCLUSIVE ? names[outcome] : "?";
}

int fl_verdict_exit(const fl_verdict *v)
{
    return v->outcome == FL_VERDICT_REPRODUCED ? 0 : v->outcome == FL_VERDICT_INCONCLUSIVE ? FL_EXIT_INCONCLUSIVE : 3;
}

void fl_demo_verdict(fl_verdict *v, const fl_arm_outcome *a, int n, const fl_precondition *pre)
{
    char bad[900] = "", subj[300] = ""; /* room in v->text for the prefixes and the precondition */
    int subjects = 0, subject_fails = 0, controls_ok = 1;
    for (int i = 0; i < n; i++) {
        int first = 1; /* the first result of its arm: the arm is judged once */
        for (int j = 0; j < i; j++)
            first &= strcmp(a[j].arm, a[i].arm) != 0;
        if (!first || a[i].role == FL_ARM_INFO)
            continue;
        tally t;
        arm_tally(&t, a, n, a[i].arm);
        const int majority = 2 * t.fails > t.runs;
        if (a[i].role == FL_ARM_SUBJECT) {
            subjects++;
            subject_fails = majority;
            snprintf(subj, sizeof subj, "%s failed in %d of %d seeds%s%s%s%s", a[i].arm, t.fails, t.runs,
                     t.fails ? " (" : "", t.seeds, t.fails ? ")" : "", majority ? "" : ", not a majority");
        } else if (majority) {
            controls_ok = 0;
            addf(bad, sizeof bad, "%scontrol %s failed in %d of %d seeds (%s)", bad[0] ? "; " : "", a[i].arm, t.fails,
                 t.runs, t.seeds);
        }
    }
    v->reproduced = 0;
    v->outcome = FL_VERDICT_NOT_REPRODUCED;
    if (subjects != 1) {
        snprintf(v->text, sizeof v->text, "NOT REPRODUCED: %d subject arms (need exactly one)", subjects);
        return;
    }
    const char *pt = pre ? pre->text : "not measured";
    if (!controls_ok) {
        snprintf(v->text, sizeof v->text, "NOT REPRODUCED: %s%s%s", subject_fails ? "" : subj, subject_fails ? "" : "; ",
                 bad);
    } else if (!pre || !pre->present) {
        v->outcome = FL_VERDICT_INCONCLUSIVE;
        if (subject_fails)
            snprintf(v->text, sizeof v->text,
                     "INCONCLUSIVE: precondition not produced (%s); %s and no control in a majority of seeds, a failure "
                     "without the paper's cause", pt, subj);
        else
            snprintf(v->text, sizeof v->text, "INCONCLUSIVE: precondition not produced (%s); %s", pt, subj);
    } else if (subject_fails) {
        v->outcome = FL_VERDICT_REPRODUCED;
        v->reproduced = 1;
        snprintf(v->text, sizeof v->text, "REPRODUCED: %s; no control failed in a majority of seeds; precondition "
                 "present (%s)", subj, pt);
    } else {
        snprintf(v->text, sizeof v->text, "NOT REPRODUCED: %s; precondition present (%s)", subj, pt);
    }
}

/* ---- the FP4 demo's predictions ------------------------------------------------------------------ */

int fl_pred_f2(const double *sw, const double *ge, const double *re, int n)
{
    const double s = fl_median_range(sw, 0, n), g = fl_median_range(ge, 0, n), r = fl_median_range(re, 0, n);
    if (isnan(s) || isnan(g) || isnan(r))
        return -1;
    return s > g && s > r;
}

int fl_pred_f3(const double *sw, const double *ge, const double *sm, int n)
{
    const double s = fl_median_range(sw, 0, n), g = fl_median_range(ge, 0, n), m = fl_median_range(sm, 0, n);
    if (isnan(s) || isnan(g) || isnan(m))
        return -1;
    return s > g && m < s;
}

int fl_pred_f4(const double *v, int n, double thr)
{
    int finite = 0;
    for (int i = 0; i < n; i++)
        if (!isnan(v[i])) { /* +Inf: a run whose dY casts were exact */
            finite++;
            if (!(v[i] > thr))
                return 0;
        }
    return finite ? 1 : -1;
}

const char *fl_pred_name(int held) { return held > 0 ? "held" : held == 0 ? "FAILED" : "not measured"; }

/* ---- the sqrt(3) threshold ---------------------------------------------------------------------- */

long fl_ratio_cross(const double *v, long n, int w, double thr, double *rmin)
{
    long cross = -1;
    *rmin = NAN;
    for (long i = w - 1; w > 0 && i < n; i++) {
        double sum = 0.0;
        int k = 0;
        for (long j = i - w + 1; j <= i; j++)
            if (!isnan(v[j])) {
                sum += copysign(v[j] * v[j], v[j]);
                k++;
            }
        if (!k)
            continue;
        const double r = sqrt(fmax(0.0, sum / k));
        if (isnan(*rmin) || r < *rmin)
            *rmin = r;
        if (cross < 0 && r < thr)
            cross = i;
    }
    return cross;
}

double fl_gap_opening(const double *gap, long n, long t)
{
    if (t < 0 || t >= n || !isfinite(gap[t]) || !isfinite(gap[n - 1]))
        return NAN;
    return gap[n - 1] - gap[t];
}

int fl_pred_s1(const double *rmin, int n, double thr)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!isnan(rmin[i])) {
            k++;
            if (rmin[i] < thr)
                return 0;
        }
    return k ? 1 : -1;
}

int fl_pred_s2(const long *cross, int n)
{
    for (int i = 0; i < n; i++)
        if (cross[i] < 0)
            return 0;
    return n ? 1 : -1;
}

int fl_pred_s3(const double *opening, int n, double open)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        if (isfinite(opening[i])) {
            k++;
            if (opening[i] >= open)
                return 0;
        }
    return k ? 1 : -1;
}

/* ---- the summation-order envelope ------------------------------------------------------------------ */

/* The spacing of float32 numbers at |x| (the ulp of the float32 nearest x); NaN for a non-finite x. */
static double ulp_f32(double x)
{
    if (!isfinite(x))
        return NAN;
    const float f = fabsf((float)x);
    return (double)nextafterf(f, INFINITY) - (double)f;
}

/* e_t, the running maximum over the perturbed runs of |pert - ref| (INFINITY from the first non-finite
   one on), into e[0 .. n-1]. */
static void envelope_of(double *e, const double *ref, const double *const *pert, int np, long n)
{
    double m = 0.0;
    for (long t = 0; t < n; t++) {
        for (int p = 0; p < np && isfinite(m); p++) {
            const double d = fabs(pert[p][t] - ref[t]);
            m = isfinite(d) ? fmax(m, d) : INFINITY;
        }
        if (!isfinite(ref[t]))
            m = INFINITY;
        e[t] = m;
    }
}

int fl_loss_envelope(fl_envelope_result *r, double *bound, const double *ref, const double *test,
                     const double *const *pert, int np, long n, double factor, double floor_ulps, int mode)
{
    *r = (fl_envelope_result){ n, -1, -1, -1, 0.0, NAN, NAN };
    double *e = malloc((size_t)(n > 0 ? n : 1) * sizeof *e);
    if (!e)
        return -1;
    envelope_of(e, ref, pert, np, n);
    long fin = n; /* the steps before the envelope's first non-finite value; the window is theirs */
    while (fin > 0 && !isfinite(e[fin - 1]))
        fin--;
    for (long t = 0; t < n; t++) {
        const double et = !isfinite(e[t]) ? INFINITY : mode == FL_BOUND_WINDOW ? e[fin - 1] : e[t];
        const double b = factor * fmax(et, floor_ulps * ulp_f32(ref[t]));
        if (bound)
            bound[t] = isfinite(b) ? b : NAN;
        if (!isfinite(b) || np == 0) {
            if (r->unbounded_from < 0)
                r->unbounded_from = t;
            continue;
        }
        r->env_first = isnan(r->env_first) ? et : r->env_first;
        r->env_last = et;
        const double d = fabs(test[t] - ref[t]);
        const double ratio = isfinite(d) ? d / b : INFINITY; /* (ref is finite here: e would not be) */
        if (r->worst_step < 0 || ratio > r->worst_ratio) {
            r->worst_step = t;
            r->worst_ratio = ratio;
        }
        if (ratio > 1.0 && r->first_bad < 0)
            r->first_bad = t;
    }
    free(e);
    return r->first_bad >= 0 ? 1 : r->unbounded_from >= 0 || np == 0 ? 2 : 0;
}

const char *fl_envelope_name(int verdict)
{
    return verdict == 0 ? "AGREE" : verdict == 1 ? "DISAGREE" : "UNDETERMINED";
}
