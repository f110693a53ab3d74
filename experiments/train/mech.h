/* mech.h — the measures and judgements of the mechanism experiments (TRAINING.md, "The
 * mechanism"), as pure functions of measured series (tested by tests/test_mech.c).
 *
 * Series are per step, indexed from the run's first logged step; tau[t] is the weight-decay clock
 * t/tau of that step (train.h, fl_train_tau_at).
 */
#ifndef FL_MECH_H
#define FL_MECH_H

#include <stddef.h>

#define FL_LATE_FACTOR 10.0 /* P0: the late growth or jump that counts as the late regime */

typedef struct {
    double early_max;  /* max amax over 1 <= tau < 2 (NaN when no step falls there) */
    double late_max;   /* max amax over tau >= 2 */
    double growth;     /* late_max / early_max */
    double jump;       /* max over tau >= 2 of amax[t] / amax[t-1] (consecutive rows) */
    long jump_at;      /* the row of that jump, -1 when none */
} fl_late;

/* The late growth and late jump of an amax series (n rows).  Non-finite or non-positive amax rows are
   skipped (a jump needs both rows finite and positive). */
void fl_late_measure(fl_late *o, const double *amax, const double *tau, long n);

/* P0: SwiGLU in the late regime and GeLU not (growth or jump >= FL_LATE_FACTOR). */
int fl_late_regime(const fl_late *swiglu, const fl_late *gelu);
int fl_late_any(const fl_late *x);

/* The first row with tau[row] >= x, or n when none. */
long fl_tau_row(const double *tau, long n, double x);

/* The maximum of v over rows [a, b) ignoring non-finite values; NaN when none. */
double fl_max_range(const double *v, long a, long b);
/* The median of v over rows [a, b) ignoring non-finite values; NaN when none. */
double fl_median_range(const double *v, long a, long b);

#endif /* FL_MECH_H */
