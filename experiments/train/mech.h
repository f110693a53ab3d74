/* mech.h — the measures and judgements of the mechanism experiments (TRAINING.md, "The
 * mechanism"), as pure functions of measured series (tested by tests/test_mech.c).
 *
 * Series are per step, indexed from the run's first logged step; tau[t] is the weight-decay clock
 * t/tau of that step (train.h, fl_train_tau_at).
 */
#ifndef FL_MECH_H
#define FL_MECH_H

#include "verdict.h"

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

/* The precondition of the demo's verdict and of the mechanism's P3 (verdict.h; TRAINING.md, "Prediction
   and criterion: the precondition"): the late regime (fl_late_regime) of the medians over n seeds of
   the BF16 references' late measures, SwiGLU's (sw) and GeLU's (ge), each measured with
   fl_late_measure; NaN growths or jumps are left out of the medians.  tau_end: t/tau at the runs' end,
   for the text. */
void fl_precondition_judge(fl_precondition *p, const fl_late *sw, const fl_late *ge, int n, double tau_end);

/* The first row with tau[row] >= x, or n when none. */
long fl_tau_row(const double *tau, long n, double x);

/* The maximum of v over rows [a, b) ignoring non-finite values; NaN when none. */
double fl_max_range(const double *v, long a, long b);
/* The median of v over rows [a, b) ignoring non-finite values; NaN when none. */
double fl_median_range(const double *v, long a, long b);

/* The decision rules of the predictions (TRAINING.md, "Predictions, written before the runs"), on
   the measured numbers; NaN inputs make a rule fail.
   P1: alignment p99 at 8 tau above 1 tau's, and wd 1's final above wd 0's. */
int fl_p1_alignment(double a1, double a8, double end_wd1, double end_wd0);

/* P2, the four parts (flags out[0..3]: records, rho, slope, lead); returns all four held.
   records: frac_top2 >= 5 x chance2; rho: median rho(align, amax) > 0.3; slope: SwiGLU's top-2%
   median in [1.5, 2.5] and GeLU's all-channel median in [0.5, 1.5]; lead: best lag > 0. */
int fl_p2_attribution(int out[4], double frac_top2, double chance2, double rho_median, double slope_top,
                      double gelu_slope_all, int best_lag);

/* P3 over n FP8 forks without intervention: gelu[i] (else SwiGLU), tau[i] (the fork's t/tau),
   failed[i].  out[0]: a SwiGLU fork at tau >= 4 failed; out[1]: a GeLU fork failed.  Held (returns
   1) when out[0] and not out[1]. */
int fl_p3_forks(int out[2], const int *gelu, const double *tau, const int *failed, int n);

/* P4 (flags out[0..2]: top, random, wd); returns all three held.  top: top_ratio <= 0.5 and its FP8
   arm did not fail; random: random_ratio >= 0.8; wd: the wd-0 growths of alignment and amax at most
   half of the wd-1 ones. */
int fl_p4_interventions(int out[3], double top_ratio, int top_fp8_failed, double random_ratio, double align_growth_wd0,
                        double align_growth_wd1, double amax_growth_wd0, double amax_growth_wd1);

/* P5: final amax strictly increasing over wd 0, 0.1, 0.3, 1 (fin[0..3]) and fin[0] <= 0.5 fin[3]. */
int fl_p5_dose(const double fin[4]);

#endif /* FL_MECH_H */
