/* mech.c — measures of the mechanism experiments (mech.h). */
#include "mech.h"

#include <math.h>
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
