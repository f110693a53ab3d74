/* verdict.h — the demo's failure measure and verdict, as pure functions of measured data (tested
 * by tests/test_demo_verdict.c on synthetic arm results).
 *
 * Failure of an arm (stated before any run; experiments/train/TRAINING.md, "The demo's verdict"):
 *   (a) a non-finite loss at any step, or the run's own divergence (train.h's criterion, which ends
 *       the run: the summary says diverged);
 *   (b) an FP8 arm only: the loss gap against its BF16 reference arm (same activation, seed, data
 *       and batches) stays above FL_GAP_THRESHOLD for FL_GAP_WINDOW consecutive steps.  The gap of
 *       step t is (E_arm(t) - E_ref(t)) / E_ref(t), E the exponential moving average of the loss
 *       with weight FL_GAP_EMA per step (E(0) = loss(0));
 *   (c) the run stopped before its planned steps without (a) (it cannot be compared to the end).
 * The failure step is the non-finite step, the first step of the window, or the step where the
 * run stopped.
 *
 * The precondition (the paper's cause; TRAINING.md, "Prediction and criterion: the precondition"):
 * SwiGLU's down-projection input grows late into outliers that GeLU's does not, measured in the BF16
 * references (fl_precondition_judge, mech.h): present when the medians over seeds of SwiGLU/BF16's
 * late growth or late jump reach FL_LATE_FACTOR and neither of GeLU/BF16's does.
 *
 * Verdict, in this order:
 *   - a control arm fails in a majority of its seeds: "NOT REPRODUCED" (the failure is not
 *     SwiGLU's), with every condition that failed and its seeds;
 *   - the precondition is absent or not measured: "INCONCLUSIVE: precondition not produced (...)",
 *     whether or not the subject failed (a failure without the cause is not the paper's mechanism;
 *     no failure without the cause refutes nothing);
 *   - the subject arm (SwiGLU/FP8) fails in a majority of its seeds: "REPRODUCED";
 *   - otherwise "NOT REPRODUCED" (the cause was there and the consequence was not).
 * Informational arms (current scaling at the down projection's input) are reported, not judged.
 * The demo exits 0, 3 and FL_EXIT_INCONCLUSIVE for the three.
 */
#ifndef FL_VERDICT_H
#define FL_VERDICT_H

#include <stddef.h>
#include <stdint.h>

#define FL_GAP_EMA 0.02       /* ~ a 50-step window, as the divergence EMA of train.h */
#define FL_GAP_THRESHOLD 0.05 /* 5% above the BF16 reference's loss */
#define FL_GAP_WINDOW 100     /* consecutive steps */

enum { FL_FAIL_NONE, FL_FAIL_NONFINITE, FL_FAIL_DIVERGED, FL_FAIL_GAP, FL_FAIL_STOPPED };
const char *fl_fail_reason_name(int reason); /* "none", "non-finite loss", ... */

typedef struct {
    int failed, reason; /* FL_FAIL_* */
    long step;          /* the failure step, -1 when none */
    double gap_final;   /* the gap at the last step both runs have (NaN when there is none) */
    double gap_max;     /* the largest gap over those steps */
} fl_arm_failure;

/* The gap series of an FP8 arm against its reference: gap[t] = (E_arm(t) - E_ref(t)) / E_ref(t) for
   t = 0 .. m-1, m the number of leading steps where both losses are finite (at most min(n, nref)),
   NaN from m to n-1 (gap has room for n values).  Returns m. */
long fl_loss_gap_series(double *gap, const double *loss, long n, const double *ref, long nref, double ema);

/* Judge one arm.  loss: its per-step losses (n of them, steps 0..n-1), planned: the steps it was
   to run, diverged/div_step: its summary's divergence (train.h); ref: the BF16 reference's losses
   (nref of them), NULL for a BF16 arm (then only (a) and (c) apply). */
void fl_arm_judge(fl_arm_failure *f, const double *loss, long n, long planned, int diverged, long div_step,
                  const double *ref, long nref, double ema, double threshold, long window);

enum { FL_ARM_SUBJECT, FL_ARM_CONTROL, FL_ARM_INFO };

/* The exit status of an INCONCLUSIVE verdict (common/cli.h: 0 REPRODUCED / every prediction held,
   1 a run failed to run, 2 bad flags, 3 NOT REPRODUCED / a prediction failed). */
enum { FL_EXIT_INCONCLUSIVE = 4 };

/* The precondition as measured (fl_precondition_judge, mech.h): medians over seeds of the late growth
   and late jump of the down projection's input amax in the BF16 references. */
typedef struct {
    int seeds;                     /* seeds with both BF16 references read */
    int measured;                  /* SwiGLU's and GeLU's medians are finite (the runs reach 2 tau) */
    int present;                   /* measured and in the late regime (mech.h, fl_late_regime) */
    double swiglu_growth, swiglu_jump, gelu_growth, gelu_jump; /* medians; NaN when not measured */
    double tau_end;                /* t/tau at the end of the runs */
    char text[320];                /* the numbers and the criterion, for the verdict's text */
} fl_precondition;

typedef struct {
    const char *arm; /* "swiglu/fp8" ...: results with the same name are one arm's seeds */
    int role;        /* FL_ARM_* */
    uint64_t seed;
    int failed;
} fl_arm_outcome;

enum { FL_VERDICT_REPRODUCED, FL_VERDICT_NOT_REPRODUCED, FL_VERDICT_INCONCLUSIVE };
const char *fl_verdict_name(int outcome); /* "REPRODUCED", "NOT REPRODUCED", "INCONCLUSIVE" */

typedef struct {
    int reproduced;  /* outcome == FL_VERDICT_REPRODUCED */
    int outcome;     /* FL_VERDICT_* */
    char text[1400]; /* "REPRODUCED: ...", "NOT REPRODUCED: <conditions, seeds>", "INCONCLUSIVE: ..." */
} fl_verdict;

/* The verdict over n results (any order) and the precondition (NULL: not measured). */
void fl_demo_verdict(fl_verdict *v, const fl_arm_outcome *a, int n, const fl_precondition *pre);
/* Its exit status: 0, FL_EXIT_GATE (3) or FL_EXIT_INCONCLUSIVE (4). */
int fl_verdict_exit(const fl_verdict *v);

/* The FP4 demo's predictions F2-F4 (TRAINING.md, "The FP4 experiment"), from per-seed values (n
   each; non-finite values are left out of the medians).  Each returns 1 held, 0 failed, -1 not
   measured (a side without a finite value).
   F2: median(sw) > median(ge) and median(sw) > median(re)  (final loss gaps);
   F3: median(sw) > median(ge) and median(sm) < median(sw)  (mean flush mass at the down input);
   F4: every non-NaN v[i] > thr, at least one                (the smallest dY snr of each run; +Inf:
                                                              no quantisation error). */
int fl_pred_f2(const double *sw, const double *ge, const double *re, int n);
int fl_pred_f3(const double *sw, const double *ge, const double *sm, int n);
int fl_pred_f4(const double *v, int n, double thr);
const char *fl_pred_name(int held); /* "held", "FAILED", "not measured" */

/* `demo --fp4 --sqrt3` (TRAINING.md, "The sqrt(3) threshold"): FP4 All the Way's threshold on the
   weight gradient's signal-to-noise ratio, judged on the telemetry rows all.wgrad (the batch's
   gradient) and all.wgrad_mean (the mean gradient, signed; telemetry.h).
   The ratio at telemetry point i is sqrt(max(0, mean of sgn(v_j) v_j^2 over j = i - w + 1 .. i)), a
   trailing window of w points (NaN points left out; i >= w - 1).  fl_ratio_cross returns the first i
   where it is below thr, -1 when none; *rmin gets the smallest windowed ratio (NaN without a window).
   fl_gap_opening: gap[n - 1] - gap[t] (the loss gap, fl_loss_gap_series), NaN when t is not in
   0 .. n - 1 or either value is not finite.
   S1: every non-NaN rmin[i] >= thr, at least one (the batch gradient's ratio never crosses);
   S2: every cross[i] >= 0, n >= 1 (the mean gradient's ratio crosses in every run);
   S3: no finite opening[i] >= open, at least one finite (the gap does not open after the crossing).
   Each returns 1 held, 0 failed, -1 not measured. */
#define FL_SQRT3_WINDOW 10   /* telemetry points (500 steps at the demo's --log-every 50) */
#define FL_SQRT3_OPEN 0.005  /* the gap opens: +0.5 percentage points from the crossing to the end */
long fl_ratio_cross(const double *v, long n, int w, double thr, double *rmin);
double fl_gap_opening(const double *gap, long n, long t);
int fl_pred_s1(const double *rmin, int n, double thr);
int fl_pred_s2(const long *cross, int n);
int fl_pred_s3(const double *opening, int n, double open);

/* ---- a run against the harness: the summation-order envelope (fp8lab compare) --------------------
 * Two implementations of the same step that differ only in the order of their floating-point sums (a
 * GPU's tensor-core GEMMs and the harness's fixed fma chains, gemm.h) give losses that drift apart as
 * training amplifies the first rounding differences.  How far they may drift is measured, not assumed:
 * the reference run is repeated with its GEMM sums cut into blocks of k terms (--gemm-kchunk k, the
 * same products added in another order), and the spread of those reruns bounds the run under test:
 *   e_t     = max over the perturbed runs p and the steps s <= t of |loss_p(s) - loss_ref(s)|
 *             (a running maximum: the drift grows, and one step's difference may pass through 0)
 *   bound_t = factor * max(e_t, floor_ulps * ulp(loss_ref(t)))      ulp of float32, the loss's type
 * (FL_BOUND_RUNNING), or one bound for the whole window (FL_BOUND_WINDOW, the default of fp8lab compare):
 *   bound   = factor * max(e_w, floor_ulps * ulp(loss_ref(t)))
 * with e_w the envelope's largest finite value (its value at the last step before it is not finite).
 * Step t agrees when |loss_test(t) - loss_ref(t)| <= bound_t.  Where a perturbed run or the reference is
 * not finite, e_t is not finite from there on: those steps are undetermined (the reference is not
 * reproducible under a change of order), never counted as agreeing; the steps before them are judged.  TRAINING.md ("How far a GPU run may differ") derives the factor and the floor. */
typedef struct {
    long n;              /* steps compared */
    long first_bad;      /* the first step outside the bound, -1 when none */
    long unbounded_from; /* the first step whose envelope is not finite, -1 when none */
    long worst_step;     /* the step of the largest |test - ref| / bound (bounded steps), -1 when n = 0 */
    double worst_ratio;
    double env_first, env_last; /* e_t at the first and the last bounded step */
} fl_envelope_result;

enum { FL_BOUND_WINDOW, FL_BOUND_RUNNING };

/* ref, test: n losses; pert: np perturbed runs of n losses each; bound (may be NULL): bound_t out (NaN
   where undetermined).  Returns 0 AGREE, 1 DISAGREE (a bounded step outside), 2 UNDETERMINED (no step
   outside, some step unbounded or np == 0), -1 out of memory. */
int fl_loss_envelope(fl_envelope_result *r, double *bound, const double *ref, const double *test,
                     const double *const *pert, int np, long n, double factor, double floor_ulps, int mode);
const char *fl_envelope_name(int verdict); /* "AGREE", "DISAGREE", "UNDETERMINED" */

#endif /* FL_VERDICT_H */
