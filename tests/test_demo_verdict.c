/* test_demo_verdict.c — the demo's failure measure and verdict (verdict.h) on synthetic arm
 * results, and the train_args it records.
 *
 *  1. fl_loss_gap_series equals the EMA recurrence recomputed here, bit for bit, and stops at a
 *     non-finite loss or the end of the reference.  fl_arm_judge: a run matching its reference does not fail; a non-finite loss fails at its
 *     step; a gap of 6% fails at the first step of a 100-step window (found by an independent
 *     recomputation), a 4% gap does not; an excursion above 5% for L steps fails a window of L, not of L + 1; a diverged run fails at its
 *     divergence step; a run that stopped early fails where it stopped; a BF16 arm (no reference)
 *     is judged by (a) and (c) only.
 *  2. fl_demo_verdict: REPRODUCED only when the subject fails in a majority and no control does;
 *     every failing condition named (subject in no majority, each control in a majority, with its
 *     seeds); informational arms never decide; 1 of 2 is not a majority.
 *  3. fl_train_cfg_args: the arguments parse back (fl_train_parse_flag) into the same configuration,
 *     bit for bit, for every demo-like arm (site overrides, --grad-sr, --pow2, nan overflow, ...).
 */
#include "check.h"
#include "train/train.h"
#include "train/verdict.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { T = 1000 };

static void ramp(double *v, double base) /* a decreasing loss curve with some wiggle */
{
    for (int t = 0; t < T; t++)
        v[t] = base + 2.0 * exp(-t / 150.0) + 0.01 * sin(t * 0.7);
}

/* The first step of the first 100-step run of gap > thr, recomputed independently. */
static long first_window(const double *a, const double *r, int n, double thr)
{
    double ea = a[0], er = r[0];
    int run = 0;
    for (int t = 0; t < n; t++) {
        if (t) {
            ea = 0.98 * ea + 0.02 * a[t];
            er = 0.98 * er + 0.02 * r[t];
        }
        run = (ea - er) / er > thr ? run + 1 : 0;
        if (run == 100)
            return t - 99;
    }
    return -1;
}

static void check_judge(void)
{
    static double ref[T], a[T];
    ramp(ref, 3.0);
    fl_arm_failure f;
    memcpy(a, ref, sizeof a);
    fl_arm_judge(&f, a, T, T, 0, -1, ref, T, FL_GAP_EMA, FL_GAP_THRESHOLD, FL_GAP_WINDOW);
    CHECK(!f.failed && f.reason == FL_FAIL_NONE && f.step == -1 && f.gap_max == 0.0 && f.gap_final == 0.0,
          "identical run: failed %d gap %g", f.failed, f.gap_max);

    a[417] = NAN;
    fl_arm_judge(&f, a, T, T, 0, -1, ref, T, FL_GAP_EMA, FL_GAP_THRESHOLD, FL_GAP_WINDOW);
    CHECK(f.failed && f.reason == FL_FAIL_NONFINITE && f.step == 417, "NaN at 417: reason %d step %ld", f.reason, f.step);
    a[417] = INFINITY;
    fl_arm_judge(&f, a, T, T, 0, -1, NULL, 0, FL_GAP_EMA, FL_GAP_THRESHOLD, FL_GAP_WINDOW);
    CHECK(f.failed && f.reason == FL_FAIL_NONFINITE && f.step == 417, "Inf at 417 without reference");

    for (int t = 0; t < T; t++) /* 6% above from step 500 on */
        a[t] = ref[t] * (t >= 500 ? 1.06 : 1.0);
    fl_arm_judge(&f, a, T, T, 0, -1, ref, T, FL_GAP_EMA, FL_GAP_THRESHOLD, FL_GAP_WINDOW);
    const long want = first_window(a, ref, T, 0.05);
    CHECK(want > 500 && f.failed && f.reason == FL_FAIL_GAP && f.step == want, "6%% gap: step %ld, want %ld", f.step, want);
    CHECK(fabs(f.gap_final - 0.06) < 1e-3, "final gap %g", f.gap_final);
    {
        static double gap[T];
        CHECK(fl_loss_gap_series(gap, a, T, ref, T, FL_GAP_EMA) == T, "series length");
        double ea = a[0], er = ref[0];
        for (int t = 0; t < T; t++) { /* the same recurrence, written here again */
            if (t) {
                ea = 0.98 * ea + 0.02 * a[t];
                er = 0.98 * er + 0.02 * ref[t];
            }
            CHECK(gap[t] == (ea - er) / er, "gap series step %d: %a, want %a", t, gap[t], (ea - er) / er);
        }
        a[700] = NAN;
        CHECK(fl_loss_gap_series(gap, a, T, ref, 650, FL_GAP_EMA) == 650 && isnan(gap[650]) && isnan(gap[T - 1]),
              "series cut by the shorter reference");
        CHECK(fl_loss_gap_series(gap, a, T, ref, T, FL_GAP_EMA) == 700 && isnan(gap[700]) && !isnan(gap[699]),
              "series cut at the non-finite loss");
        a[700] = ref[700] * 1.06;
    }

    for (int t = 0; t < T; t++) /* 4%: below the threshold */
        a[t] = ref[t] * (t >= 500 ? 1.04 : 1.0);
    fl_arm_judge(&f, a, T, T, 0, -1, ref, T, FL_GAP_EMA, FL_GAP_THRESHOLD, FL_GAP_WINDOW);
    CHECK(!f.failed && f.gap_max < 0.05 && f.gap_max > 0.039, "4%% gap failed (max %g)", f.gap_max);

    /* a bounded excursion: 8% from step 400 to 600; the gap stays above 5% for L steps (recomputed
       here): a window of L fails at the run's first step, a window of L + 1 does not */
    for (int t = 0; t < T; t++)
        a[t] = ref[t] * (t >= 400 && t < 600 ? 1.08 : 1.0);
    int run = 0, L = 0, start = -1;
    {
        double ea = a[0], er = ref[0];
        for (int t = 0; t < T; t++) {
            if (t) {
                ea = 0.98 * ea + 0.02 * a[t];
                er = 0.98 * er + 0.02 * ref[t];
            }
            run = (ea - er) / er > 0.05 ? run + 1 : 0;
            if (run > L) {
                L = run;
                start = t + 1 - run;
            }
        }
    }
    CHECK(L > 100 && L < 300, "excursion length %d", L);
    fl_arm_judge(&f, a, T, T, 0, -1, ref, T, FL_GAP_EMA, FL_GAP_THRESHOLD, L);
    CHECK(f.failed && f.reason == FL_FAIL_GAP && f.step == start, "window %d: failed %d at %ld, want %d", L, f.failed, f.step, start);
    fl_arm_judge(&f, a, T, T, 0, -1, ref, T, FL_GAP_EMA, FL_GAP_THRESHOLD, L + 1);
    CHECK(!f.failed && f.gap_max > 0.05, "window %d: failed %d (max %g)", L + 1, f.failed, f.gap_max);

    memcpy(a, ref, sizeof a);
    fl_arm_judge(&f, a, 700, T, 1, 580, ref, T, FL_GAP_EMA, FL_GAP_THRESHOLD, FL_GAP_WINDOW);
    CHECK(f.failed && f.reason == FL_FAIL_DIVERGED && f.step == 580, "diverged: reason %d step %ld", f.reason, f.step);
    fl_arm_judge(&f, a, 700, T, 0, -1, NULL, 0, FL_GAP_EMA, FL_GAP_THRESHOLD, FL_GAP_WINDOW);
    CHECK(f.failed && f.reason == FL_FAIL_STOPPED && f.step == 700, "stopped: reason %d step %ld", f.reason, f.step);
    fl_arm_judge(&f, a, T, T, 0, -1, NULL, 0, FL_GAP_EMA, FL_GAP_THRESHOLD, FL_GAP_WINDOW);
    CHECK(!f.failed && isnan(f.gap_max), "BF16 arm without reference");
    printf("  arm judgement: identical, NaN, Inf, 6%% (fails at step %ld), 4%%, windows L and L+1, diverged, stopped, BF16\n", want);
}

static void expect(const fl_arm_outcome *a, int n, int reproduced, const char *const *phrases, const char *what)
{
    fl_verdict v;
    fl_demo_verdict(&v, a, n);
    CHECK(v.reproduced == reproduced, "%s: reproduced %d (%s)", what, v.reproduced, v.text);
    CHECK(!strncmp(v.text, reproduced ? "REPRODUCED" : "NOT REPRODUCED", reproduced ? 10 : 14), "%s: text '%s'", what, v.text);
    for (int k = 0; phrases && phrases[k]; k++)
        CHECK(strstr(v.text, phrases[k]), "%s: '%s' lacks '%s'", what, v.text, phrases[k]);
}

static void check_verdict(void)
{
    static const char *const names[] = { "swiglu/bf16", "swiglu/fp8", "smooth/fp8", "down_bf16/fp8", "gelu/fp8", "relu/fp8", "current/fp8" };
    static const int roles[] = { FL_ARM_CONTROL, FL_ARM_SUBJECT, FL_ARM_CONTROL, FL_ARM_CONTROL, FL_ARM_CONTROL, FL_ARM_CONTROL, FL_ARM_INFO };
    enum { A = 7, S = 3 };
    fl_arm_outcome o[A * S];
    /* fail[a] is a bit mask over the 3 seeds */
    const int base[A] = { 0, 7, 0, 0, 0, 0, 7 };
    int fail[A];
#define SET()                                                                                      \
    for (int s = 0; s < S; s++)                                                                    \
        for (int a = 0; a < A; a++)                                                                \
            o[s * A + a] = (fl_arm_outcome){ names[a], roles[a], (uint64_t)s + 1, (fail[a] >> s) & 1 };
    memcpy(fail, base, sizeof fail);
    SET();
    expect(o, A * S, 1, (const char *const[]){ "swiglu/fp8 failed in 3 of 3 seeds", NULL }, "the reproduction");
    fail[1] = 5; /* seeds 1 and 3: still a majority */
    fail[2] = 2; /* a control in one seed: not a majority */
    SET();
    expect(o, A * S, 1, NULL, "subject 2/3, a control 1/3");
    fail[1] = 1; /* 1 of 3 */
    SET();
    expect(o, A * S, 0, (const char *const[]){ "swiglu/fp8 failed in 1 of 3 seeds (1), not a majority", NULL }, "subject 1/3");
    fail[1] = 0;
    SET();
    expect(o, A * S, 0, (const char *const[]){ "swiglu/fp8 failed in 0 of 3 seeds, not a majority", NULL }, "subject 0/3");
    for (int c = 0; c < A; c++) { /* every control in turn fails in seeds 2 and 3 */
        if (roles[c] != FL_ARM_CONTROL)
            continue;
        memcpy(fail, base, sizeof fail);
        fail[c] = 6;
        SET();
        char want[64];
        snprintf(want, sizeof want, "control %s failed in 2 of 3 seeds (2, 3)", names[c]);
        expect(o, A * S, 0, (const char *const[]){ want, NULL }, names[c]);
    }
    memcpy(fail, base, sizeof fail);
    fail[1] = 0;
    fail[5] = 7;
    SET();
    expect(o, A * S, 0, (const char *const[]){ "swiglu/fp8 failed in 0 of 3", "control relu/fp8 failed in 3 of 3 seeds (1, 2, 3)", NULL },
           "two conditions");
    memcpy(fail, base, sizeof fail);
    fail[6] = 0; /* the informational arm decides nothing either way */
    SET();
    expect(o, A * S, 1, NULL, "info arm stable");
    /* two seeds: 1 of 2 is not a majority */
    memcpy(fail, base, sizeof fail);
    fail[1] = 1;
    for (int s = 0; s < 2; s++)
        for (int a = 0; a < A; a++)
            o[s * A + a] = (fl_arm_outcome){ names[a], roles[a], (uint64_t)s + 1, (fail[a] >> s) & 1 };
    expect(o, 2 * A, 0, (const char *const[]){ "1 of 2 seeds", NULL }, "1 of 2");
    /* no subject */
    for (int k = 0; k < A * S; k++)
        o[k].role = FL_ARM_CONTROL;
    expect(o, A * S, 0, (const char *const[]){ "0 subject arms", NULL }, "no subject");
#undef SET
    printf("  verdict: reproduced, subject 1/3 and 0/3, each of 5 controls failing, two conditions, info arm, 1 of 2, no subject\n");
}

static void check_args(void)
{
    static const char *const sites[] = { "", "*.down.in=bf16", "L0.down.in=current" };
    for (int k = 0; k < 12; k++) {
        fl_train_cfg c;
        fl_train_cfg_default(&c);
        c.model.act.kind = (uint32_t)(k % 3 == 0 ? FL_ACT_SWIGLU : k % 3 == 1 ? FL_ACT_GELU : FL_ACT_SMOOTH_SWIGLU);
        c.model.F = 384;
        c.recipe.kind = k & 1 ? FL_RECIPE_FP8_DELAYED : FL_RECIPE_FP8_CURRENT;
        c.recipe.history = 1;
        c.recipe.pow2 = 1;
        c.recipe.grad_sr = (uint32_t)(k >> 1 & 1);
        c.recipe.nosat = (uint32_t)(k >> 2 & 1);
        c.recipe.fp8_start = k == 5 ? 200 : 0;
        c.lr = 3e-3f;
        c.wd = 1.0f;
        c.seed = 1000 + (uint64_t)k;
        c.stop_on_div = k != 7;
        if (sites[k % 3][0])
            CHECK(!fl_recipe_sites_add(&c.recipe, sites[k % 3]), "site");
        char buf[4096], work[4096];
        CHECK(!fl_train_cfg_args(buf, sizeof buf, &c), "args fit");
        /* split like a shell: words, single quotes removed */
        memcpy(work, buf, sizeof buf);
        char *argv[256];
        int argc = 0;
        for (char *p = work; *p;) {
            while (*p == ' ')
                p++;
            if (!*p)
                break;
            char *w = p, *o = p;
            while (*p && *p != ' ') {
                if (*p == '\'') {
                    for (p++; *p && *p != '\''; p++)
                        *o++ = *p;
                    p += *p == '\'';
                } else if (*p == '\\' && p[1]) { /* '\'' : an escaped quote between quoted parts */
                    *o++ = p[1];
                    p += 2;
                } else {
                    *o++ = *p++;
                }
            }
            const int end = !*p;
            *o = 0;
            argv[argc++] = w;
            if (end)
                break;
            p++;
        }
        fl_train_cfg d;
        fl_train_cfg_default(&d);
        for (int i = 0; i < argc; i++) {
            int used = 0;
            CHECK(fl_train_parse_flag(&d, "test", argv[i], i + 1 < argc ? argv[i + 1] : NULL, &used) == 0, "flag %s", argv[i]);
            i += used;
        }
        CHECK(!memcmp(&c, &d, sizeof c), "arm %d: '%s' does not parse back to the same configuration", k, buf);
    }
    printf("  train_args parse back to the same configuration (12 arms)\n");
}

int main(void)
{
    check_judge();
    check_verdict();
    check_args();
    PASS("test_demo_verdict");
}
