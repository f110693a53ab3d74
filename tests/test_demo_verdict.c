/* test_demo_verdict.c — the demo's failure measure and verdict (verdict.h) on synthetic arm
 * results, and the train_args it records.
 *
 *  1. fl_loss_gap_series equals the EMA recurrence recomputed here, bit for bit, and stops at a
 *     non-finite loss or the end of the reference.  fl_arm_judge: a run matching its reference does not fail; a non-finite loss fails at its
 *     step; a gap of 6% fails at the first step of a 100-step window (found by an independent
 *     recomputation), a 4% gap does not; an excursion above 5% for L steps fails a window of L, not of L + 1; a diverged run fails at its
 *     divergence step; a run that stopped early fails where it stopped; a BF16 arm (no reference)
 *     is judged by (a) and (c) only.
 *  2. fl_demo_verdict with the precondition present: REPRODUCED only when the subject fails in a
 *     majority and no control fails in a majority; every failing condition named (subject in no
 *     majority, each control in a majority, with its seeds); informational arms never decide; 1 of 2
 *     is not a majority.
 *  3. The precondition (fl_precondition_judge, mech.h): the medians over seeds of the late growth and
 *     jump; present when SwiGLU's growth or jump reaches 10 and GeLU's neither (9.99 does not, 10
 *     does; GeLU at 10 makes it absent; a NaN seed is left out of the median; all NaN: not measured),
 *     and from series through fl_late_measure.  The verdict against it: absent and no failure ->
 *     INCONCLUSIVE with the numbers; present and the subject failing -> REPRODUCED; present and no
 *     failure -> NOT REPRODUCED; absent and the subject failing alone -> INCONCLUSIVE ("a failure
 *     without the paper's cause"); a failing control -> NOT REPRODUCED whatever the precondition;
 *     not measured -> INCONCLUSIVE; exit statuses 0, 3, 4.
 *  4. fl_train_cfg_args: the arguments parse back (fl_train_parse_flag) into the same configuration,
 *     bit for bit, for every demo-like arm (site overrides, --grad-sr, --pow2, nan overflow,
 *     paper-gaudi2, ...).
 */
#include "check.h"
#include "train/mech.h"
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

/* A precondition as fl_precondition_judge makes it from one seed's late measures. */
static fl_precondition precondition(double sw_growth, double sw_jump, double ge_growth, double ge_jump)
{
    const fl_late sw = { 1, 1, sw_growth, sw_jump, 0 }, ge = { 1, 1, ge_growth, ge_jump, 0 };
    fl_precondition p;
    fl_precondition_judge(&p, &sw, &ge, 1, 6.0);
    return p;
}

static fl_precondition present;

static void expect_pre(const fl_arm_outcome *a, int n, const fl_precondition *pre, int outcome,
                       const char *const *phrases, const char *what)
{
    fl_verdict v;
    fl_demo_verdict(&v, a, n, pre);
    const char *name = fl_verdict_name(outcome);
    CHECK(v.outcome == outcome && v.reproduced == (outcome == FL_VERDICT_REPRODUCED), "%s: outcome %d (%s)", what,
          v.outcome, v.text);
    CHECK(!strncmp(v.text, name, strlen(name)) && v.text[strlen(name)] == ':', "%s: text '%s'", what, v.text);
    CHECK(fl_verdict_exit(&v) == (outcome == FL_VERDICT_REPRODUCED ? 0 : outcome == FL_VERDICT_INCONCLUSIVE ? 4 : 3),
          "%s: exit %d", what, fl_verdict_exit(&v));
    for (int k = 0; phrases && phrases[k]; k++)
        CHECK(strstr(v.text, phrases[k]), "%s: '%s' lacks '%s'", what, v.text, phrases[k]);
}

static void expect(const fl_arm_outcome *a, int n, int reproduced, const char *const *phrases, const char *what)
{
    expect_pre(a, n, &present, reproduced ? FL_VERDICT_REPRODUCED : FL_VERDICT_NOT_REPRODUCED, phrases, what);
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

/* 3. */
static void check_precondition(void)
{
    /* the rule on medians */
    fl_precondition p = precondition(12, 1.2, 2, 1.1);
    CHECK(p.measured && p.present && p.swiglu_growth == 12 && p.gelu_jump == 1.1, "growth 12 vs 2");
    CHECK(strstr(p.text, "SwiGLU 12 / 1.2, GeLU 2 / 1.1") && strstr(p.text, ">= 10"), "text: %s", p.text);
    CHECK(precondition(1.5, 10, 1, 1).present, "a jump of 10");
    CHECK(!precondition(9.99, 9.99, 1, 1).present, "9.99 is not the late regime");
    CHECK(precondition(10, 1, 9.99, 9.99).present, "GeLU at 9.99");
    CHECK(!precondition(50, 50, 10, 1).present && !precondition(50, 50, 1, 10).present, "GeLU at 10: not SwiGLU's");
    p = precondition(NAN, NAN, 2, 2);
    CHECK(!p.measured && !p.present && strstr(p.text, "not measured") && strstr(p.text, "t/tau = 6.00"), "NaN: %s", p.text);
    {
        const fl_late sw[3] = { { 1, 1, 11, 1, 0 }, { 1, 1, NAN, NAN, -1 }, { 1, 1, 13, 1.5, 0 } };
        const fl_late ge[3] = { { 1, 1, 2, 1, 0 }, { 1, 1, 3, 1, 0 }, { 1, 1, 40, 1, 0 } };
        fl_precondition_judge(&p, sw, ge, 3, 4.0);
        CHECK(p.measured && p.present && p.swiglu_growth == 12 && p.gelu_growth == 3 && p.seeds == 3,
              "medians over seeds, NaN left out: %g %g", p.swiglu_growth, p.gelu_growth);
        const fl_late sw2[3] = { { 1, 1, 11, 1, 0 }, { 1, 1, 2, 1, 0 }, { 1, 1, 3, 1.5, 0 } };
        fl_precondition_judge(&p, sw2, ge, 3, 4.0);
        CHECK(p.measured && !p.present && p.swiglu_growth == 3, "one seed of three in the regime: median %g", p.swiglu_growth);
    }
    /* from series: amax flat until t/tau = 2, then x15 (SwiGLU) and x3 (GeLU); tau = t / 100 */
    {
        enum { NS = 600 };
        static double tau[NS], as[NS], ag[NS];
        for (int t = 0; t < NS; t++) {
            tau[t] = t / 100.0;
            as[t] = t < 300 ? 1.0 + 0.001 * (t % 7) : 15.0;
            ag[t] = t < 300 ? 2.0 : 6.0;
        }
        fl_late ls, lg;
        fl_late_measure(&ls, as, tau, NS);
        fl_late_measure(&lg, ag, tau, NS);
        fl_precondition_judge(&p, &ls, &lg, 1, 6.0);
        CHECK(p.present && fabs(p.swiglu_growth - 15 / 1.006) < 1e-12 && p.gelu_growth == 3, "series: %s", p.text);
        fl_late_measure(&ls, as, tau, 150); /* ends at t/tau 1.5: no late window */
        fl_precondition_judge(&p, &ls, &lg, 1, 1.5);
        CHECK(!p.measured && !p.present, "a run ending before 2 tau: %s", p.text);
    }
    /* the verdict against the precondition: 3 seeds, the arms of check_verdict */
    static const char *const names[] = { "swiglu/fp8", "smooth/fp8", "gelu/fp8", "current/fp8" };
    static const int roles[] = { FL_ARM_SUBJECT, FL_ARM_CONTROL, FL_ARM_CONTROL, FL_ARM_INFO };
    fl_arm_outcome o[12];
    const fl_precondition absent = precondition(2.02, 1.10, 1.62, 1.08), unmeasured = precondition(NAN, 1, 1, 1);
#define SET(s0, s1, s2) /* failure masks over the 3 seeds of the subject, smooth, gelu */                   \
    for (int s = 0; s < 3; s++)                                                                          \
        for (int a = 0; a < 4; a++)                                                                      \
            o[s * 4 + a] = (fl_arm_outcome){ names[a], roles[a], (uint64_t)s + 1,                          \
                                             ((a == 0 ? (s0) : a == 1 ? (s1) : a == 2 ? (s2) : 7) >> s) & 1 };
    SET(0, 0, 0);
    expect_pre(o, 12, &absent, FL_VERDICT_INCONCLUSIVE,
               (const char *const[]){ "INCONCLUSIVE: precondition not produced (", "SwiGLU 2.02 / 1.1, GeLU 1.62 / 1.08",
                                      "swiglu/fp8 failed in 0 of 3 seeds", NULL },
               "absent, no failure");
    expect_pre(o, 12, &unmeasured, FL_VERDICT_INCONCLUSIVE, (const char *const[]){ "(not measured", NULL }, "not measured");
    expect_pre(o, 12, NULL, FL_VERDICT_INCONCLUSIVE, (const char *const[]){ "(not measured)", NULL }, "no precondition");
    expect_pre(o, 12, &present, FL_VERDICT_NOT_REPRODUCED,
               (const char *const[]){ "swiglu/fp8 failed in 0 of 3 seeds, not a majority", "precondition present", NULL },
               "present, no failure");
    SET(7, 0, 1);
    expect_pre(o, 12, &present, FL_VERDICT_REPRODUCED,
               (const char *const[]){ "swiglu/fp8 failed in 3 of 3 seeds (1, 2, 3)", "precondition present (", NULL },
               "present, the subject fails as predicted");
    expect_pre(o, 12, &absent, FL_VERDICT_INCONCLUSIVE,
               (const char *const[]){ "swiglu/fp8 failed in 3 of 3 seeds", "without the paper's cause", NULL },
               "absent, the subject fails alone");
    SET(7, 0, 3);
    expect_pre(o, 12, &absent, FL_VERDICT_NOT_REPRODUCED, (const char *const[]){ "control gelu/fp8 failed in 2 of 3", NULL },
               "absent, a control fails");
    expect_pre(o, 12, &present, FL_VERDICT_NOT_REPRODUCED, (const char *const[]){ "control gelu/fp8 failed in 2 of 3", NULL },
               "present, a control fails");
#undef SET
    printf("  precondition: the late regime on medians over seeds (10, 9.99, GeLU at 10, NaN seeds, not measured), from "
           "series; verdicts INCONCLUSIVE / REPRODUCED / NOT REPRODUCED against it, exit 4 / 0 / 3\n");
}

static void check_args(void)
{
    static const char *const sites[] = { "", "*.down.in=bf16", "L0.down.in=current" };
    for (int k = 0; k < 15; k++) {
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
        if (k >= 12) /* the demo's default recipe, with the settings it fixes */
            fl_recipe_paper_gaudi2(&c.recipe);
        if (sites[k % 3][0])
            CHECK(!fl_recipe_sites_add(&c.recipe, sites[k % 3]), "site");
        CHECK(fl_train_cfg_check(&c) == NULL, "arm %d: %s", k, fl_train_cfg_check(&c));
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
    printf("  train_args parse back to the same configuration (15 arms)\n");
}

/* The FP4 demo's predictions F2-F4: each condition alone flips the result; NaN seeds are left out. */
static void check_fp4_predictions(void)
{
    const double sw[3] = { 0.03, 0.02, NAN }, ge[3] = { 0.01, 0.015, 0.04 }, re[3] = { 0.01, 0.012, 0.011 };
    CHECK(fl_pred_f2(sw, ge, re, 3) == 1, "F2 held: medians 0.025 > 0.015, 0.011");
    const double ge_hi[3] = { 0.03, 0.026, 0.001 }, re_hi[3] = { 0.025, 0.03, 0.04 };
    CHECK(fl_pred_f2(sw, ge_hi, re, 3) == 0 && fl_pred_f2(sw, ge, re_hi, 3) == 0, "F2 fails on either control");
    const double nan3[3] = { NAN, NAN, NAN };
    CHECK(fl_pred_f2(nan3, ge, re, 3) == -1, "F2 not measured");
    const double sm[3] = { 0.01, 0.02, 0.0 }, sm_hi[3] = { 0.05, 0.04, 0.03 };
    CHECK(fl_pred_f3(sw, ge, sm, 3) == 1 && fl_pred_f3(sw, ge, sm_hi, 3) == 0 && fl_pred_f3(sw, ge_hi, sm, 3) == 0,
          "F3: both conditions");
    CHECK(fl_pred_f3(sw, ge, nan3, 3) == -1, "F3 not measured");
    const double snr[4] = { 4.0, 2.0, INFINITY, NAN }, low[3] = { 4.0, 1.7, 9.0 };
    CHECK(fl_pred_f4(snr, 4, sqrt(3.0)) == 1 && fl_pred_f4(low, 3, sqrt(3.0)) == 0 && fl_pred_f4(nan3, 3, 1.0) == -1,
          "F4: every run above the threshold");
    CHECK(!strcmp(fl_pred_name(1), "held") && !strcmp(fl_pred_name(0), "FAILED"), "names");
    printf("  FP4 predictions F2-F4: held, failed and not measured as defined\n");
}

/* The sqrt(3) experiment: the trailing window of signed squares, the first crossing, the gap's
   opening and S1-S3, each condition flipping the result. */
static void check_sqrt3_predictions(void)
{
    const double thr = sqrt(3.0);
    /* windows of 2: sqrt(mean(9, 4)) = 2.55, sqrt(mean(4, 1)) = 1.58 < thr at index 2 */
    const double v[4] = { 3.0, 2.0, 1.0, 1.0 };
    double rmin;
    CHECK(fl_ratio_cross(v, 4, 2, thr, &rmin) == 2 && fabs(rmin - 1.0) < 1e-15, "first crossing at 2, smallest 1");
    CHECK(fl_ratio_cross(v, 4, 1, 0.5, &rmin) == -1 && rmin == 1.0, "no crossing below 0.5");
    /* signed values: a negative estimate pulls the window down; all negative clamps to 0 */
    const double sg[3] = { 2.0, -2.0, -1.0 };
    CHECK(fl_ratio_cross(sg, 3, 2, thr, &rmin) == 1 && rmin == 0.0, "signed window: mean(4, -4) = 0 crosses");
    const double nn[3] = { NAN, 3.0, NAN };
    CHECK(fl_ratio_cross(nn, 3, 2, thr, &rmin) == -1 && rmin == 3.0, "NaN points left out of the window");
    CHECK(fl_ratio_cross(nn, 1, 2, thr, &rmin) == -1 && isnan(rmin), "no full window: NaN");
    const double gap[4] = { 0.0, 0.001, 0.004, 0.008 };
    CHECK(fabs(fl_gap_opening(gap, 4, 1) - 0.007) < 1e-15 && isnan(fl_gap_opening(gap, 4, -1)) &&
          isnan(fl_gap_opening(gap, 4, 4)), "opening from the crossing to the end");
    const double rm[3] = { 4.0, 2.0, NAN }, rm_lo[2] = { 4.0, 1.7 }, nan2[2] = { NAN, NAN };
    CHECK(fl_pred_s1(rm, 3, thr) == 1 && fl_pred_s1(rm_lo, 2, thr) == 0 && fl_pred_s1(nan2, 2, thr) == -1, "S1");
    const long cr[2] = { 3, 0 }, cr_no[2] = { 3, -1 };
    CHECK(fl_pred_s2(cr, 2) == 1 && fl_pred_s2(cr_no, 2) == 0 && fl_pred_s2(cr, 0) == -1, "S2");
    const double op[3] = { 0.001, NAN, -0.002 }, op_hi[2] = { 0.001, 0.005 };
    CHECK(fl_pred_s3(op, 3, FL_SQRT3_OPEN) == 1 && fl_pred_s3(op_hi, 2, FL_SQRT3_OPEN) == 0 &&
          fl_pred_s3(nan2, 2, FL_SQRT3_OPEN) == -1, "S3: an opening of exactly +0.5 points counts");
    printf("  sqrt(3) predictions S1-S3: windows, crossings, openings as defined\n");
}

/* fl_loss_envelope: the running and the window bound by hand, the floor, non-finite losses, no envelope. */
static void check_envelope(void)
{
    /* ref 4.0 (float32 ulp 2^-21 = 4.77e-7); two perturbed runs; factor 2, floor 1 ulp */
    const double u = 0x1p-21;
    const double ref[5] = { 4.0, 4.0, 4.0, 4.0, 4.0 };
    const double p1[5] = { 4.0, 4.0 + 1e-5, 4.0, 4.0 - 3e-5, 4.0 };
    const double p2[5] = { 4.0, 4.0 - 2e-5, 4.0, 4.0, 4.0 };
    const double *pert[2] = { p1, p2 };
    /* e = 0, 2e-5, 2e-5, 3e-5, 3e-5; running bound 2u, 4e-5, 4e-5, 6e-5, 6e-5; window 6e-5 everywhere */
    const double t_ok[5] = { 4.0 + u, 4.0 - 3.9e-5, 4.0, 4.0 + 5.9e-5, 4.0 };
    fl_envelope_result r;
    double b[5];
    CHECK(fl_loss_envelope(&r, b, ref, t_ok, pert, 2, 5, 2.0, 1.0, FL_BOUND_RUNNING) == 0, "running: AGREE");
    CHECK(b[0] == 2 * u && fabs(b[1] - 4e-5) < 1e-15 && fabs(b[4] - 6e-5) < 1e-15, "running bounds %a %a %a", b[0], b[1], b[4]);
    CHECK(r.env_first == 0.0 && fabs(r.env_last - 3e-5) < 1e-15 && r.worst_step == 3, "running: e and worst step %ld",
          r.worst_step);
    const double t_early[5] = { 4.0 + 3 * u, 4.0, 4.0, 4.0, 4.0 };
    CHECK(fl_loss_envelope(&r, b, ref, t_early, pert, 2, 5, 2.0, 1.0, FL_BOUND_RUNNING) == 1 && r.first_bad == 0,
          "running: 3 ulp at step 0 is outside 2 x 1 ulp");
    CHECK(fl_loss_envelope(&r, b, ref, t_early, pert, 2, 5, 2.0, 1.0, FL_BOUND_WINDOW) == 0 && fabs(b[0] - 6e-5) < 1e-15,
          "window: the same run agrees under the window's 6e-5");
    const double t_late[5] = { 4.0, 4.0, 4.0, 4.0, 4.0 + 6.1e-5 };
    CHECK(fl_loss_envelope(&r, b, ref, t_late, pert, 2, 5, 2.0, 1.0, FL_BOUND_WINDOW) == 1 && r.first_bad == 4 &&
              r.worst_step == 4 && fabs(r.worst_ratio - 6.1 / 6.0) < 1e-6,
          "window: 6.1e-5 at the last step is outside (ratio %g)", r.worst_ratio);
    /* non-finite: a NaN reference or envelope leaves the steps from there unbounded */
    const double rn[3] = { 4.0, NAN, NAN }, tn[3] = { 4.0, NAN, NAN }, q[3] = { 4.0, 4.0, 4.0 };
    const double *pq[1] = { q };
    CHECK(fl_loss_envelope(&r, b, rn, tn, pq, 1, 3, 2.0, 1.0, FL_BOUND_RUNNING) == 2 && r.unbounded_from == 1 &&
              isnan(b[1]),
          "a NaN reference: undetermined from step 1 (%ld)", r.unbounded_from);
    const double qn[3] = { 4.0, 4.0, INFINITY }, ti[3] = { 4.0, 4.0, 5.0 }, r3[3] = { 4.0, 4.0, 4.0 };
    const double *pqn[1] = { qn };
    CHECK(fl_loss_envelope(&r, b, r3, ti, pqn, 1, 3, 2.0, 1.0, FL_BOUND_RUNNING) == 2 && r.unbounded_from == 2 &&
              r.first_bad < 0,
          "an envelope Inf: step 2 undetermined, not agreeing or disagreeing");
    CHECK(fl_loss_envelope(&r, b, r3, ti, pqn, 1, 3, 2.0, 1.0, FL_BOUND_WINDOW) == 2 && r.unbounded_from == 2 &&
              r.first_bad < 0 && b[0] == 2.0 * 0x1p-21,
          "window: the steps before an envelope Inf judged under their own window (floor: %a)", b[0]);
    const double t0[3] = { 4.5, 4.0, 4.0 };
    CHECK(fl_loss_envelope(&r, b, r3, t0, pqn, 1, 3, 2.0, 1.0, FL_BOUND_WINDOW) == 1 && r.first_bad == 0,
          "window: a step outside before the envelope's Inf disagrees");
    const double tnan[3] = { 4.0, NAN, 4.0 };
    CHECK(fl_loss_envelope(&r, b, r3, tnan, pq, 1, 3, 2.0, 1.0, FL_BOUND_RUNNING) == 1 && r.first_bad == 1,
          "a NaN test loss beside a finite reference disagrees");
    CHECK(fl_loss_envelope(&r, b, r3, r3, pq, 0, 3, 2.0, 1.0, FL_BOUND_WINDOW) == 2, "no envelope run: undetermined");
    CHECK(!strcmp(fl_envelope_name(0), "AGREE") && !strcmp(fl_envelope_name(1), "DISAGREE") &&
              !strcmp(fl_envelope_name(2), "UNDETERMINED"),
          "names");
    printf("  envelope: running and window bounds by hand, the floor, NaN/Inf references, tests and envelopes\n");
}

int main(void)
{
    check_envelope();
    check_fp4_predictions();
    check_sqrt3_predictions();
    present = precondition(12, 1.5, 2, 1.2);
    CHECK(present.present, "the present precondition");
    check_judge();
    check_verdict();
    check_precondition();
    check_args();
    PASS("test_demo_verdict");
}
