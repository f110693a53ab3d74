/* mech.c — measures of the mechanism experiments (mech.h). */
#include "mech.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long fl_tau_row(const double *tau, long n, double x)
{
    for (long t = 0; t < n; t++)
        if (tau[t] >= x)
            return t;
    return n;
}

double fl_max_range(const double *v, long a, long b)
{
    double m = NAN;
    for (long t = a < 0 ? 0 : a; t < b; t++)
        if (isfinite(v[t]) && !(v[t] <= m))
            m = v[t];
    return m;
}

static int cmp_d(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double fl_median_range(const double *v, long a, long b)
{
    if (a < 0)
        a = 0;
    if (b <= a)
        return NAN;
    double *w = malloc((size_t)(b - a) * sizeof *w);
    long k = 0;
    if (!w)
        return NAN;
    for (long t = a; t < b; t++)
        if (isfinite(v[t]))
            w[k++] = v[t];
    double m = NAN;
    if (k) {
        qsort(w, (size_t)k, sizeof *w, cmp_d);
        m = k % 2 ? w[k / 2] : 0.5 * (w[k / 2 - 1] + w[k / 2]);
    }
    free(w);
    return m;
}

void fl_late_measure(fl_late *o, const double *amax, const double *tau, long n)
{
    memset(o, 0, sizeof *o);
    const long r1 = fl_tau_row(tau, n, 1.0), r2 = fl_tau_row(tau, n, 2.0);
    o->early_max = fl_max_range(amax, r1, r2);
    o->late_max = fl_max_range(amax, r2, n);
    o->growth = o->late_max / o->early_max;
    o->jump = NAN;
    o->jump_at = -1;
    for (long t = r2 > 0 ? r2 : 1; t < n; t++) {
        const double a = amax[t - 1], b = amax[t];
        if (!(isfinite(a) && isfinite(b) && a > 0 && b > 0))
            continue;
        if (o->jump_at < 0 || b / a > o->jump) {
            o->jump = b / a;
            o->jump_at = t;
        }
    }
}

int fl_late_any(const fl_late *x)
{
    return (isfinite(x->growth) && x->growth >= FL_LATE_FACTOR) || (isfinite(x->jump) && x->jump >= FL_LATE_FACTOR);
}

int fl_late_regime(const fl_late *swiglu, const fl_late *gelu)
{
    return fl_late_any(swiglu) && !fl_late_any(gelu);
}

void fl_precondition_judge(fl_precondition *p, const fl_late *sw, const fl_late *ge, int n, double tau_end)
{
    memset(p, 0, sizeof *p);
    p->seeds = n;
    p->tau_end = tau_end;
    double *v = malloc(4 * (size_t)(n > 0 ? n : 1) * sizeof *v);
    double med[4] = { NAN, NAN, NAN, NAN };
    for (int k = 0; v && k < 4; k++) { /* SwiGLU growth, jump; GeLU growth, jump */
        for (int i = 0; i < n; i++) {
            const fl_late *l = k < 2 ? &sw[i] : &ge[i];
            v[i] = k % 2 ? l->jump : l->growth;
        }
        med[k] = fl_median_range(v, 0, n);
    }
    free(v);
    p->swiglu_growth = med[0], p->swiglu_jump = med[1], p->gelu_growth = med[2], p->gelu_jump = med[3];
    fl_late ms, mg;
    memset(&ms, 0, sizeof ms);
    memset(&mg, 0, sizeof mg);
    ms.growth = med[0], ms.jump = med[1], mg.growth = med[2], mg.jump = med[3];
    p->measured = isfinite(med[0]) && isfinite(med[1]) && isfinite(med[2]) && isfinite(med[3]);
    p->present = p->measured && fl_late_regime(&ms, &mg);
    if (p->measured)
        snprintf(p->text, sizeof p->text,
                 "down-projection input amax in BF16, late growth / late jump after 2 tau, median of %d seed%s: SwiGLU "
                 "%.3g / %.3g, GeLU %.3g / %.3g; present when SwiGLU's growth or jump >= %g and GeLU's both < %g",
                 n, n == 1 ? "" : "s", med[0], med[1], med[2], med[3], FL_LATE_FACTOR, FL_LATE_FACTOR);
    else
        snprintf(p->text, sizeof p->text,
                 "not measured: the late growth needs steps at 1 <= t/tau < 2 and t/tau >= 2 in the BF16 references of "
                 "SwiGLU and GeLU; the runs end at t/tau = %.2f", tau_end);
}

int fl_p1_alignment(double a1, double a8, double end_wd1, double end_wd0)
{
    return a8 > a1 && end_wd1 > end_wd0;
}

int fl_p2_attribution(int out[4], double frac_top2, double chance2, double rho_median, double slope_top,
                      double gelu_slope_all, int best_lag)
{
    out[0] = frac_top2 >= 5.0 * chance2;
    out[1] = rho_median > 0.3;
    out[2] = slope_top >= 1.5 && slope_top <= 2.5 && gelu_slope_all >= 0.5 && gelu_slope_all <= 1.5;
    out[3] = best_lag > 0;
    return out[0] && out[1] && out[2] && out[3];
}

int fl_p3_forks(int out[2], const int *gelu, const double *tau, const int *failed, int n)
{
    out[0] = out[1] = 0;
    for (int i = 0; i < n; i++) {
        if (failed[i] && !gelu[i] && tau[i] >= 4.0)
            out[0] = 1;
        if (failed[i] && gelu[i])
            out[1] = 1;
    }
    return out[0] && !out[1];
}

int fl_p4_interventions(int out[3], double top_ratio, int top_fp8_failed, double random_ratio, double align_growth_wd0,
                        double align_growth_wd1, double amax_growth_wd0, double amax_growth_wd1)
{
    out[0] = top_ratio <= 0.5 && !top_fp8_failed;
    out[1] = random_ratio >= 0.8;
    out[2] = align_growth_wd0 <= 0.5 * align_growth_wd1 && amax_growth_wd0 <= 0.5 * amax_growth_wd1;
    return out[0] && out[1] && out[2];
}

int fl_p5_dose(const double fin[4])
{
    return fin[0] < fin[1] && fin[1] < fin[2] && fin[2] < fin[3] && fin[0] <= 0.5 * fin[3];
}
