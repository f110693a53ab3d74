/* test_order.c — the safe-order map (experiments/polyorder/polyorder.h, `fp8lab order`):
 *   closed forms: a single power x^r overflows at B^(1/r) (naive, every format; fused, as a real);
 *     PolyReLU_2 fused at (sqrt(1 + 8B) - 1)/2; PolyNorm_3 naive fp16 at 65520^(1/6) ~ 6.35 (fp16's overflow boundary 65520, IEEE 754);
 *     PolyNorm_4 fused at the fp32 boundary of the row sum, (B32 - (n-1))^(1/8) ~ 65536;
 *   threshold +- one ulp of the input format: the strategy emulation (naive) and the MPFR reference
 *     (fused: the correctly rounded output overflows at the first input, not at the one before);
 *   the PolyNorm row model against reference/polynorm.c's row function on explicit rows;
 *   the fp32 kernel's threshold against the MPFR one; underflow thresholds; the naive small-row hazard;
 *   the ulp sweep's bounds; the CLI: JSON schema, --input on a crafted .npy, exit statuses 1 and 2. */
#include "check.h"
#include "cli_test.h"

#include "npy.h"
#include "polyorder/polyorder.h"
#include "ref.h"
#include "round_mpfr.h"

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <mpfr.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The F value one code below / above a positive value v of F. */
static double f_pred(fl_format f, double v) { return fl_decode(f, fl_encode_f64(f, v, FL_RND_NE, FL_OVF_SATURATE, 0) - 1); }
static double f_succ(fl_format f, double v) { return fl_decode(f, fl_encode_f64(f, v, FL_RND_NE, FL_OVF_SATURATE, 0) + 1); }

/* v^k compared with c exactly: sign of v^k - c. */
static int cmp_pow(double v, int k, double c)
{
    mpfr_t t;
    mpfr_init2(t, 53 * 8 + 8);
    mpfr_set_d(t, v, MPFR_RNDN);
    mpfr_pow_ui(t, t, (unsigned long)k, MPFR_RNDN); /* exact */
    const int s = mpfr_cmp_d(t, c);
    mpfr_clear(t);
    return s;
}

static int overflows(fl_format f, double v, int k)
{
    int ties;
    const double B = fl_format_rne_boundary(f, &ties);
    const int s = cmp_pow(v, k, B);
    return s > 0 || (s == 0 && ties);
}

static int is_nonfinite_code(fl_format f, uint32_t c)
{
    const fl_format_desc *d = fl_format_get(f);
    return fl_is_nan(d, c) || fl_is_inf(d, c);
}

static void single_power_cfg(fl_order_cfg *c, int r)
{
    fl_order_cfg_init(c, FL_ORDER_POLYRELU, r);
    for (int i = 0; i <= r; i++) {
        c->a[i] = i == r ? 1.0 : 0.0;
        c->a_set |= 1u << i;
    }
}

static void test_single_power(void)
{
    const fl_format fmts[] = { FL_FMT_BF16, FL_FMT_FP16, FL_FMT_E4M3, FL_FMT_E5M2, FL_FMT_E3M2, FL_FMT_E2M3, FL_FMT_E2M1 };
    for (size_t fi = 0; fi < sizeof fmts / sizeof *fmts; fi++) {
        const fl_format f = fmts[fi];
        int ties;
        const double B = fl_format_rne_boundary(f, &ties);
        for (int r = 2; r <= 4; r++) {
            fl_order_cfg c;
            single_power_cfg(&c, r);
            fl_order_entry e;
            /* naive, torch.pow: the first input v* is the smallest F value with v^r beyond B, i.e.
               B^(1/r) rounded up into F (closed form through mpfr_rootn_ui) */
            fl_order_entry_compute(&e, &c, f, FL_ORDER_NAIVE, 0);
            mpfr_t root;
            mpfr_init2(root, 200);
            mpfr_set_d(root, B, MPFR_RNDN);
            mpfr_rootn_ui(root, root, (unsigned long)r, MPFR_RNDN);
            double want = fl_decode(f, fl_mpfr_encode(f, root, FL_RND_UP, FL_OVF_SATURATE, NULL));
            if (!overflows(f, want, r))
                want = f_succ(f, want);
            CHECK(fabs(mpfr_get_d(root, MPFR_RNDN) - pow(B, 1.0 / r)) < 1e-12 * pow(B, 1.0 / r), "rootn");
            mpfr_clear(root);
            if (want <= fl_format_max(f)) {
                CHECK(e.overflow_input == want, "FAIL %s naive x^%d: first input %a, closed form %a", fl_format_name(f), r,
                      e.overflow_input, want);
                /* the lower powers are materialised too (x**i for every i of the sum): in a coarse format
                   x^(r-1) may overflow at the same first input, and is named first */
                CHECK(e.overflow_cause && (!strcmp(e.overflow_cause, r == 2 ? "x^2" : r == 3 ? "x^3" : "x^4") ||
                                           (e.overflow_cause[0] == 'x' && overflows(f, want, e.overflow_cause[2] - '0'))),
                      "%s naive x^%d: cause %s", fl_format_name(f), r, e.overflow_cause ? e.overflow_cause : "none");
                /* threshold +- one ulp through the emulation */
                double y;
                CHECK(fl_order_naive_eval(&y, &c, f, want, 0) != NULL, "%s x^%d at %a must overflow", fl_format_name(f), r, want);
                CHECK(fl_order_naive_eval(&y, &c, f, f_pred(f, want), 0) == NULL, "%s x^%d at %a must not overflow",
                      fl_format_name(f), r, f_pred(f, want));
                /* the real threshold is the rounding boundary below v* */
                const double mid = f_pred(f, want) + (want - f_pred(f, want)) / 2;
                CHECK(e.overflow_threshold == mid, "%s x^%d: threshold %a, want midpoint %a", fl_format_name(f), r,
                      e.overflow_threshold, mid);
                /* x*x*x written out: the first input moves by at most two codes, and the +-1 ulp property holds */
                fl_order_cfg cm = c;
                cm.pow = FL_ORDER_POW_MUL;
                fl_order_entry em;
                fl_order_entry_compute(&em, &cm, f, FL_ORDER_NAIVE, 0);
                const int64_t d = (int64_t)fl_encode_f64(f, em.overflow_input, FL_RND_NE, FL_OVF_SATURATE, 0) -
                                  (int64_t)fl_encode_f64(f, want, FL_RND_NE, FL_OVF_SATURATE, 0);
                CHECK(d >= -2 && d <= 2, "%s x^%d mul: first input %a vs pow %a", fl_format_name(f), r, em.overflow_input, want);
                CHECK(fl_order_naive_eval(&y, &cm, f, em.overflow_input, 0) != NULL &&
                          fl_order_naive_eval(&y, &cm, f, f_pred(f, em.overflow_input), 0) == NULL,
                      "%s x^%d mul: +-1 ulp", fl_format_name(f), r);
            }
            /* fused: the real threshold B^(1/r), to one binary64 ulp */
            fl_order_entry_compute(&e, &c, f, FL_ORDER_FUSED, 0);
            const double t = e.overflow_threshold;
            CHECK(isfinite(t) && overflows(f, t, r) && !overflows(f, nextafter(t, 0), r),
                  "%s fused x^%d: threshold %a is not B^(1/r) = %a", fl_format_name(f), r, t, pow(B, 1.0 / r));
            CHECK(e.overflow_cause && !strcmp(e.overflow_cause, "output"), "fused cause");
        }
    }
}

static void test_closed_forms(void)
{
    /* PolyReLU_2 fused, default coefficients: (x + x^2)/2 = B at x = (sqrt(1 + 8B) - 1)/2 */
    const fl_format fmts[] = { FL_FMT_FP16, FL_FMT_E4M3, FL_FMT_E5M2 };
    for (size_t fi = 0; fi < 3; fi++) {
        fl_order_cfg c;
        fl_order_cfg_init(&c, FL_ORDER_POLYRELU, 2);
        fl_order_entry e;
        fl_order_entry_compute(&e, &c, fmts[fi], FL_ORDER_FUSED, 0);
        const double B = fl_format_rne_boundary(fmts[fi], NULL);
        const double want = (sqrt(1 + 8 * B) - 1) / 2;
        CHECK(fabs(e.overflow_threshold - want) <= 4 * DBL_EPSILON * want, "%s polyrelu2 fused %a want %a",
              fl_format_name(fmts[fi]), e.overflow_threshold, want);
        CHECK(fabs(e.fused_fp32_threshold - want) <= 8 * FLT_EPSILON * want, "%s polyrelu2 fp32 kernel %a want %a",
              fl_format_name(fmts[fi]), e.fused_fp32_threshold, want);
    }
    /* PolyNorm_3 naive fp16: (x^3)^2 overflows just above 65520^(1/6) = 6.3496 (65520: IEEE 754 binary16's RNE overflow boundary) */
    fl_order_cfg c;
    fl_order_cfg_init(&c, FL_ORDER_POLYNORM, 3);
    fl_order_entry e;
    fl_order_entry_compute(&e, &c, FL_FMT_FP16, FL_ORDER_NAIVE, 0);
    const double c6 = pow(65520.0, 1.0 / 6);
    CHECK(e.overflow_cause && !strcmp(e.overflow_cause, "(x^3)^2"), "polynorm3 fp16 naive cause %s",
          e.overflow_cause ? e.overflow_cause : "none");
    CHECK(e.overflow_input >= c6 && e.overflow_input <= c6 + 2 * 0x1p-8, "polynorm3 fp16 naive first input %a vs %a",
          e.overflow_input, c6);
    double y;
    CHECK(fl_order_naive_eval(&y, &c, FL_FMT_FP16, e.overflow_input, 0) != NULL && isfinite(y),
          "the overflow of (x^3)^2 is an intermediate: sqrt(Inf) = Inf makes N(x^3) = 0, the output stays finite");
    CHECK(fl_order_naive_eval(&y, &c, FL_FMT_FP16, f_pred(FL_FMT_FP16, e.overflow_input), 0) == NULL, "pred");
    /* by hand, as eager fp16 computes it: p3 = RN(x^3), then RN(p3^2) */
    {
        const double v = e.overflow_input, pv = f_pred(FL_FMT_FP16, v);
        const double p3 = fl_decode(FL_FMT_FP16, fl_encode_f64(FL_FMT_FP16, v * v * v, FL_RND_NE, FL_OVF_NOSATURATE, 0));
        const double q3 = fl_decode(FL_FMT_FP16, fl_encode_f64(FL_FMT_FP16, pv * pv * pv, FL_RND_NE, FL_OVF_NOSATURATE, 0));
        CHECK(p3 * p3 >= 65520 && q3 * q3 < 65520, "by hand: %a %a", p3, q3);
    }
    /* PolyNorm_4 fused: the fp32 row sum x^8 + (n-1) overflows at (B32 - (n-1))^(1/8) ~ 65536 */
    fl_order_cfg_init(&c, FL_ORDER_POLYNORM, 4);
    c.n = 64;
    fl_order_entry_compute(&e, &c, FL_FMT_E4M3, FL_ORDER_FUSED, 0);
    const double B32 = fl_format_rne_boundary(FL_FMT_FP32, NULL);
    CHECK(e.overflow_cause && !strcmp(e.overflow_cause, "fp32 row sum of x^8"), "polynorm4 fused cause");
    CHECK(cmp_pow(e.overflow_threshold, 8, B32 - 63) >= 0 && cmp_pow(nextafter(e.overflow_threshold, 0), 8, B32 - 63) < 0,
          "polynorm4 fused threshold %a", e.overflow_threshold);
    CHECK(fabs(e.overflow_threshold - 65536) < 1e-3, "~65536");
    CHECK(isnan(e.overflow_input), "no e4m3 input reaches it");
    CHECK(e.output_bound == 8.0, "output bound sqrt(64) * (4 * 1/4) = 8, got %g", e.output_bound);
    CHECK(fabs(e.fused_fp32_threshold - e.overflow_threshold) <= 2 * 0x1p-8, "fp32 kernel %a vs %a",
          e.fused_fp32_threshold, e.overflow_threshold);
}

/* Fused thresholds against the MPFR reference at the first overflowing input and one ulp below it. */
static void test_reference_pm_ulp(void)
{
    const fl_format fmts[] = { FL_FMT_BF16, FL_FMT_FP16, FL_FMT_E4M3, FL_FMT_E5M2 };
    for (size_t fi = 0; fi < 4; fi++)
        for (int r = 2; r <= 4; r++) {
            const fl_format f = fmts[fi];
            fl_order_cfg c;
            fl_order_cfg_init(&c, FL_ORDER_POLYRELU, r);
            fl_order_entry e;
            fl_order_entry_compute(&e, &c, f, FL_ORDER_FUSED, 0);
            const double v = e.overflow_input, pv = f_pred(f, v);
            uint32_t a, b;
            CHECK(fl_order_ref(&a, &c, f, v) == 0 && fl_order_ref(&b, &c, f, pv) == 0, "ref");
            CHECK(is_nonfinite_code(f, a) && !is_nonfinite_code(f, b),
                  "FAIL %s polyrelu%d fused: ref(%a) = 0x%x, ref(%a) = 0x%x", fl_format_name(f), r, v, a, pv, b);
            CHECK(pv < e.overflow_threshold && e.overflow_threshold <= v, "threshold between the two inputs");
            /* the fp32 kernel agrees with the exact threshold to a few fp32 ulps */
            CHECK(fabs(e.fused_fp32_threshold - e.overflow_threshold) <= 4 * FLT_EPSILON * e.overflow_threshold,
                  "%s polyrelu%d kernel %a vs exact %a", fl_format_name(f), r, e.fused_fp32_threshold, e.overflow_threshold);
        }
    /* PolyNorm's output is bounded by sqrt(n) sum a_i: it overflows e2m1 (boundary 7) but never e4m3 */
    fl_order_cfg c;
    fl_order_cfg_init(&c, FL_ORDER_POLYNORM, 3);
    c.n = 256; /* bound 16 */
    fl_order_entry e;
    fl_order_entry_compute(&e, &c, FL_FMT_E2M1, FL_ORDER_FUSED, 0);
    CHECK(e.overflow_cause && !strcmp(e.overflow_cause, "output") && e.overflow_threshold < 8, "e2m1 polynorm output");
    CHECK(fl_order_fused_overflow(&c, FL_FMT_E2M1, e.overflow_threshold) &&
              !fl_order_fused_overflow(&c, FL_FMT_E2M1, nextafter(e.overflow_threshold, 0)),
          "e2m1 polynorm threshold +- one ulp");
    fl_order_entry_compute(&e, &c, FL_FMT_E4M3, FL_ORDER_FUSED, 0);
    CHECK(e.overflow_cause && strcmp(e.overflow_cause, "output"), "e4m3 polynorm: output cannot overflow");
}

/* The closed-form outlier row against the library's row reference on explicit rows of 8. */
static void test_row_model(void)
{
    const fl_ref_fn *fn = fl_ref_lookup("polynorm");
    CHECK(fn, "polynorm reference");
    const fl_format fmts[] = { FL_FMT_BF16, FL_FMT_FP16, FL_FMT_E4M3, FL_FMT_E5M2 };
    const double probes[] = { 0x1p-20, -0.3, 0.75, 1.0, -2.5, 3.0, 7.0, -19.0, 300.0, 4096.5 };
    const double bulks[] = { 1.0, 0.125 };
    long checks = 0;
    for (int r = 2; r <= 4; r++)
        for (size_t bi = 0; bi < 2; bi++) {
            fl_order_cfg c;
            fl_order_cfg_init(&c, FL_ORDER_POLYNORM, r);
            c.n = 8;
            c.bulk = bulks[bi];
            fl_ref_params p;
            fl_ref_params_init(&p, fn);
            p.order = r;
            mpfr_t xm[8];
            mpfr_ptr xp[8];
            for (int k = 0; k < 8; k++) {
                mpfr_init2(xm[k], 64);
                mpfr_set_d(xm[k], bulks[bi], MPFR_RNDN);
                xp[k] = xm[k];
            }
            mpfr_srcptr const *rows[1] = { (mpfr_srcptr const *)xp };
            for (size_t pi = 0; pi < sizeof probes / sizeof *probes; pi++) {
                mpfr_set_d(xm[0], probes[pi], MPFR_RNDN);
                for (size_t fi = 0; fi < 4; fi++) {
                    uint32_t a, b;
                    CHECK(fl_order_ref(&a, &c, fmts[fi], probes[pi]) == 0, "row model");
                    CHECK(fl_ref_round_row(&b, fmts[fi], FL_RND_NE, FL_OVF_NOSATURATE, fn->evals[0].row, rows, 8, 0, &p, 0) == 0,
                          "library row");
                    CHECK(a == b, "FAIL polynorm%d %s row [%a, %g x7]: model 0x%x, reference/polynorm.c 0x%x", r,
                          fl_format_name(fmts[fi]), probes[pi], bulks[bi], a, b);
                    checks++;
                }
            }
            for (int k = 0; k < 8; k++)
                mpfr_clear(xm[k]);
        }
    CHECK(checks == 3 * 2 * 10 * 4, "count");
}

static void test_underflow_and_small_rows(void)
{
    fl_order_cfg c;
    fl_order_cfg_init(&c, FL_ORDER_POLYRELU, 2);
    fl_order_entry e;
    /* naive: x = 2^-24 gives a1 x = 2^-25, a tie that rounds to 0; 2^-23 gives 2^-24 */
    fl_order_entry_compute(&e, &c, FL_FMT_FP16, FL_ORDER_NAIVE, 0);
    CHECK(e.underflow_input == 0x1p-24 && e.underflow_threshold == 0x1.8p-24, "fp16 naive underflow %a %a",
          e.underflow_input, e.underflow_threshold);
    /* fused: the correctly rounded output is 0 at the last flushed input and not at the next */
    const fl_format fmts[] = { FL_FMT_FP16, FL_FMT_E4M3, FL_FMT_E5M2, FL_FMT_BF16 };
    for (size_t fi = 0; fi < 4; fi++) {
        const fl_format f = fmts[fi];
        const uint32_t sm = (1u << (fl_format_get(f)->bits - 1)) - 1;
        fl_order_entry_compute(&e, &c, f, FL_ORDER_FUSED, 0);
        uint32_t a, b;
        if (isnan(e.underflow_input)) { /* not even the smallest subnormal input flushes */
            const double ms = fl_format_min_subnormal(f);
            fl_order_ref(&b, &c, f, ms);
            CHECK(e.underflow_threshold < ms && (b & sm) != 0, "%s fused: threshold %a, ref(minsub) 0x%x", fl_format_name(f),
                  e.underflow_threshold, b);
            continue;
        }
        fl_order_ref(&a, &c, f, e.underflow_input);
        fl_order_ref(&b, &c, f, f_succ(f, e.underflow_input));
        CHECK((a & sm) == 0 && (b & sm) != 0, "%s fused underflow at %a: 0x%x 0x%x", fl_format_name(f), e.underflow_input, a, b);
        CHECK(e.underflow_input <= e.underflow_threshold && e.underflow_threshold < f_succ(f, e.underflow_input), "between");
    }
    /* naive PolyNorm on a constant small row: e4m3 and e5m2 flush both mean((x^r)^2) and eps = 1e-6,
       so the denominator is 0 and the output Inf/NaN; fp16 and bf16 keep eps */
    fl_order_cfg_init(&c, FL_ORDER_POLYNORM, 3);
    c.n = 64;
    double y;
    CHECK(fl_order_naive_eval(&y, &c, FL_FMT_E4M3, 0.25, 1) && !isfinite(y), "e4m3 small row must be non-finite");
    CHECK(fl_order_naive_eval(&y, &c, FL_FMT_E5M2, 0.125, 1) && !isfinite(y), "e5m2 small row must be non-finite");
    CHECK(!fl_order_naive_eval(&y, &c, FL_FMT_FP16, 0.125, 1) && isfinite(y) && y > 0, "fp16 small row is finite");
    CHECK(!fl_order_naive_eval(&y, &c, FL_FMT_BF16, 0x1p-20, 1) && isfinite(y), "bf16 small row is finite");
    fl_order_entry_compute(&e, &c, FL_FMT_E4M3, FL_ORDER_NAIVE, 0);
    CHECK(e.small_row_nonfinite >= 0.25 && e.small_row_nonfinite < 0.5, "e4m3 small-row level %a", e.small_row_nonfinite);
    fl_order_entry_compute(&e, &c, FL_FMT_BF16, FL_ORDER_NAIVE, 0);
    CHECK(isnan(e.small_row_nonfinite), "bf16 has no small-row hazard");
}

static void test_ulp_sweep(void)
{
    fl_order_cfg c;
    fl_order_cfg_init(&c, FL_ORDER_POLYRELU, 3);
    fl_order_entry e;
    /* fused: fp32 inside (relative error <= 4.01u32), one rounding into e4m3: within 0.5 + 2^-17 ulp */
    fl_order_entry_compute(&e, &c, FL_FMT_E4M3, FL_ORDER_FUSED, 16);
    CHECK(e.ulp_max <= 0.5 + 0x1p-17, "fused e4m3 polyrelu3 worst %.6g ulp at %a", e.ulp_max, e.ulp_max_x);
    CHECK(e.ulp_nonfinite == 6 && e.ulp_overflowed == 6, "fused e4m3: inputs 11..16 overflow (threshold 10.81), got %ld",
          e.ulp_nonfinite);
    CHECK(e.ulp_inputs == 2 * 88 + 1, "every e4m3 encoding in [-16, 16]: %ld", e.ulp_inputs);
    fl_order_entry_compute(&e, &c, FL_FMT_E4M3, FL_ORDER_NAIVE, 16);
    CHECK(e.ulp_nonfinite == 9 && e.ulp_overflowed == 9, "naive e4m3: inputs 8..16 overflow (threshold 7.75), got %ld",
          e.ulp_nonfinite);
    /* naive e5m2 PolyNorm_3: (x^3)^2 overflows for |x| > 6.5, sqrt(Inf) = Inf and N(x^3) = x^3/Inf = 0: the
       output stays finite but loses its x^3 term -- silently */
    fl_order_cfg_init(&c, FL_ORDER_POLYNORM, 3);
    c.n = 64;
    fl_order_entry_compute(&e, &c, FL_FMT_E5M2, FL_ORDER_NAIVE, 16);
    CHECK(e.ulp_overflowed > e.ulp_nonfinite && e.ulp_silent_max > 1, "silent overflow: %ld %ld %g", e.ulp_overflowed,
          e.ulp_nonfinite, e.ulp_silent_max);
    CHECK(e.ulp_max > 0.5, "naive rounds several times: worst %.4g", e.ulp_max);
}

static void test_cli(void)
{
    static char out[1 << 20];
    CHECK(run_sh(out, sizeof out, "order --act polyrelu,polynorm --order 3 --format e4m3,fp16 --row-len 64 --no-ulp --json") == 0,
          "order --json: %s", out);
    json_error_t jerr;
    json_t *root = json_loads(out, 0, &jerr);
    CHECK(root, "order --json is not JSON: %s", jerr.text);
    json_t *ents = json_object_get(root, "entries");
    CHECK(json_is_array(ents) && json_array_size(ents) == 2 * 2 * 2, "8 entries");
    int seen_naive_fp16_pn = 0;
    for (size_t i = 0; i < json_array_size(ents); i++) {
        json_t *o = json_array_get(ents, i);
        const char *act = json_string_value(json_object_get(o, "act"));
        const char *fmt = json_string_value(json_object_get(o, "format"));
        const char *st = json_string_value(json_object_get(o, "strategy"));
        CHECK(act && (!strcmp(act, "polyrelu") || !strcmp(act, "polynorm")), "act name");
        CHECK(fmt && (!strcmp(fmt, fl_format_name(FL_FMT_E4M3)) || !strcmp(fmt, fl_format_name(FL_FMT_FP16))), "format name");
        CHECK(st && (!strcmp(st, "fused") || !strcmp(st, "naive")), "strategy name");
        CHECK(json_integer_value(json_object_get(o, "order")) == 3, "order");
        json_t *ot = json_object_get(o, "overflow_threshold"), *ut = json_object_get(o, "underflow_threshold");
        CHECK(json_is_number(ot) || json_is_string(ot), "overflow_threshold");
        CHECK(json_is_number(ut) || json_is_null(ut), "underflow_threshold");
        if (!strcmp(act, "polynorm") && !strcmp(fmt, "fp16") && !strcmp(st, "naive")) {
            seen_naive_fp16_pn = 1;
            CHECK(fabs(json_number_value(ot) - 6.35) < 0.01, "fp16 naive polynorm3 threshold %g", json_number_value(ot));
        }
    }
    CHECK(seen_naive_fp16_pn, "fp16 naive polynorm entry");
    CHECK(json_is_array(json_object_get(root, "recommendation")), "recommendation");
    json_decref(root);

    /* --input on a crafted tensor (2, 64): one element 300 (overflows e4m3 unscaled at order 2), one 20 */
    char dir[] = "/tmp/fp8lab-order-XXXXXX", path[256], args[1024];
    CHECK(mkdtemp(dir), "mkdtemp");
    snprintf(path, sizeof path, "%s/acts.npy", dir);
    float x[128];
    for (int i = 0; i < 64; i++) {
        x[i] = 0.5f;
        x[64 + i] = -1.0f + (float)i / 32.0f;
    }
    x[0] = 300.0f;
    x[69] = 20.0f;
    fl_array a = { FL_DT_F32, 2, { 2, 64 }, 128, 0, x };
    char err[512];
    CHECK(fl_npy_write(path, &a, err, sizeof err) == 0, "write: %s", err);
    snprintf(args, sizeof args, "order --input %s --act polyrelu --order 2 --format e4m3 --json", path);
    CHECK(run_sh(out, sizeof out, args) == 0, "order --input: %s", out);
    root = json_loads(out, 0, &jerr);
    CHECK(root, "order --input --json is not JSON: %s", jerr.text);
    json_t *res = json_object_get(root, "results");
    CHECK(json_array_size(res) == 2 * 5, "2 strategies x 5 scalings, got %zu", json_array_size(res));
    for (size_t i = 0; i < json_array_size(res); i++) {
        json_t *o = json_array_get(res, i);
        const char *sc = json_string_value(json_object_get(o, "scaling"));
        const double fo = json_number_value(json_object_get(o, "frac_overflow"));
        const double fs = json_number_value(json_object_get(o, "frac_clipped"));
        if (!strcmp(sc, "none"))
            CHECK(fo == 1.0 / 128 && fs == 0, "unscaled: exactly the element 300 overflows: %g", fo);
        else
            CHECK(fo == 0, "%s: a scaled cast never overflows", sc);
        CHECK(json_integer_value(json_object_get(o, "ulp_samples")) > 0, "ulp samples");
        if (!strcmp(sc, "tensor") && !strcmp(json_string_value(json_object_get(o, "strategy")), "fused"))
            CHECK(fs == 0 && json_number_value(json_object_get(o, "ulp_max")) <= 0.5 + 1e-6,
                  "fused per-tensor: outputs within 1/2 ulp (+ fp32's error): %s", json_dumps(o, 0));
    }
    json_decref(root);
    /* NVFP4 on e2m1: +-1 everywhere except row 1's second block of 16, at 2^-20.  The fused PolyReLU_2
       outputs there are about 2^-20 of the tensor's amax (the linear term), which puts that block's e4m3
       scale (about 2^-20 x 448, below half e4m3's smallest subnormal 2^-9) at 0: its 16 outputs flush to
       zero -- flushed, not clipped -- while every other block keeps a scale (no other flush: the
       negative inputs' outputs are PolyReLU's exact zeros, which do not count) */
    {
        float z[128];
        for (int i = 0; i < 128; i++)
            z[i] = (i & 1) ? -1.0f : 1.0f;
        for (int i = 64 + 16; i < 64 + 32; i++)
            z[i] = 0x1p-20f;
        fl_array az = { FL_DT_F32, 2, { 2, 64 }, 128, 0, z };
        CHECK(fl_npy_write(path, &az, err, sizeof err) == 0, "write: %s", err);
        snprintf(args, sizeof args, "order --input %s --act polyrelu --order 2 --format e2m1 --json", path);
        CHECK(run_sh(out, sizeof out, args) == 0, "order --input e2m1: %s", out);
        root = json_loads(out, 0, &jerr);
        CHECK(root, "order --input e2m1 --json is not JSON: %s", jerr.text);
        res = json_object_get(root, "results");
        int seen = 0;
        for (size_t i = 0; i < json_array_size(res); i++) {
            json_t *o = json_array_get(res, i);
            if (strcmp(json_string_value(json_object_get(o, "scaling")), "nvfp4") ||
                strcmp(json_string_value(json_object_get(o, "strategy")), "fused"))
                continue;
            seen++;
            const double fs = json_number_value(json_object_get(o, "frac_clipped"));
            const double ff = json_number_value(json_object_get(o, "frac_flushed"));
            CHECK(fs == 0 && ff == 16.0 / 128, "nvfp4 fused: clipped %g (want 0), flushed %g (want 16/128)", fs, ff);
        }
        CHECK(seen == 1, "one nvfp4 fused row for e2m1, got %d", seen);
        json_decref(root);
    }
    /* PolyNorm_3 in fp16: a 7 in row 0 makes (x^3)^2 = 117649 overflow, the row's mean is Inf and the
       whole row is hit (64 of 128 elements); fused computes the same row in fp32 without overflow */
    x[0] = 7.0f;
    x[69] = 0.25f;
    CHECK(fl_npy_write(path, &a, err, sizeof err) == 0, "write: %s", err);
    snprintf(args, sizeof args, "order --input %s --act polynorm --order 3 --format fp16 --json", path);
    CHECK(run_sh(out, sizeof out, args) == 0, "order --input polynorm: %s", out);
    root = json_loads(out, 0, &jerr);
    CHECK(root, "not JSON: %s", jerr.text);
    res = json_object_get(root, "results");
    CHECK(json_array_size(res) == 2, "fp16: unscaled only, 2 strategies");
    for (size_t i = 0; i < 2; i++) {
        json_t *o = json_array_get(res, i);
        const int naive = !strcmp(json_string_value(json_object_get(o, "strategy")), "naive");
        const double fo = json_number_value(json_object_get(o, "frac_overflow"));
        CHECK(fo == (naive ? 0.5 : 0.0), "polynorm3 fp16 %s: frac_overflow %g", naive ? "naive" : "fused", fo);
        if (!naive)
            CHECK(json_number_value(json_object_get(o, "ulp_max")) <= 0.5 + 1e-6, "fused polynorm: <= 1/2 ulp + fp32");
    }
    json_decref(root);
    /* the same tensor in a .safetensors file (little-endian host assumed, as the format is) */
    {
        snprintf(path, sizeof path, "%s/acts.safetensors", dir);
        const char *hdr = "{\"pre\":{\"dtype\":\"F32\",\"shape\":[2,64],\"data_offsets\":[0,512]}}";
        const uint64_t hl = strlen(hdr);
        FILE *fs = fopen(path, "wb");
        CHECK(fs && fwrite(&hl, 8, 1, fs) == 1 && fwrite(hdr, 1, hl, fs) == hl && fwrite(x, 4, 128, fs) == 128 &&
                  fclose(fs) == 0,
              "write %s", path);
        snprintf(args, sizeof args, "order --input %s --tensor pre --act polynorm --order 3 --format fp16 --json", path);
        CHECK(run_sh(out, sizeof out, args) == 0, "order --input safetensors: %s", out);
        root = json_loads(out, 0, &jerr);
        CHECK(root && json_integer_value(json_object_get(root, "rows")) == 2 &&
                  json_integer_value(json_object_get(root, "cols")) == 64,
              "safetensors shape");
        res = json_object_get(root, "results");
        for (size_t i = 0; i < json_array_size(res); i++) {
            json_t *o = json_array_get(res, i);
            const int naive = !strcmp(json_string_value(json_object_get(o, "strategy")), "naive");
            CHECK(json_number_value(json_object_get(o, "frac_overflow")) == (naive ? 0.5 : 0.0), "safetensors = npy");
        }
        json_decref(root);
        snprintf(args, sizeof args, "order --input %s --tensor missing", path);
        CHECK(run_sh(out, sizeof out, args) == 1 && strstr(out, path) && strstr(out, "missing"), "missing tensor: %s", out);
    }

    /* --run: the pre-activations of a (tiny) training run, dumped with --dump */
    snprintf(args, sizeof args,
             "train --act polynorm3 --recipe bf16 --steps 2 --seed 1 --out %s/run --width 16 --layers 1 --heads 2 "
             "--ffn 32 --seq 8 --batch 2 --data-len 4096 --quiet --threads 1",
             dir);
    if (run_sh(out, sizeof out, args) != 0) {
        printf("note: 'fp8lab %s' failed, --run not checked: %s\n", args, out);
    } else {
        snprintf(args, sizeof args, "order --run %s/run --act polynorm --order 3 --format fp16 --dump %s/pre.npy --json", dir, dir);
        CHECK(run_sh(out, sizeof out, args) == 0, "order --run: %s", out);
        root = json_loads(out, 0, &jerr);
        CHECK(root && json_integer_value(json_object_get(root, "rows")) == 16 &&
                  json_integer_value(json_object_get(root, "cols")) == 32,
              "--run: (L * B * T, F) = (16, 32): %s", out);
        json_decref(root);
        snprintf(path, sizeof path, "%s/pre.npy", dir);
        fl_array pre;
        CHECK(fl_npy_read(&pre, path, err, sizeof err) == 0 && pre.dtype == FL_DT_F32 && pre.ndim == 2 &&
                  pre.shape[0] == 16 && pre.shape[1] == 32,
              "--dump: %s", err);
        for (size_t i = 0; i < pre.count; i++)
            CHECK(isfinite(((float *)pre.data)[i]), "finite pre-activations");
        fl_array_free(&pre);
    }
    CHECK(run_sh(out, sizeof out, "order --run /nonexistent/run") == 1 && strstr(out, "/nonexistent/run"), "--run missing: %s", out);
    CHECK(run_sh(out, sizeof out, "order --dump x.npy") == 2, "--dump without input: %s", out);

    /* bad input: exit 1 naming the file */
    snprintf(path, sizeof path, "%s/junk.npy", dir);
    FILE *fj = fopen(path, "w");
    CHECK(fj && fputs("not a numpy file", fj) >= 0 && fclose(fj) == 0, "junk");
    snprintf(args, sizeof args, "order --input %s", path);
    CHECK(run_sh(out, sizeof out, args) == 1 && strstr(out, path), "junk input: %s", out);
    CHECK(run_sh(out, sizeof out, "order --input /nonexistent/acts.npy") == 1 && strstr(out, "/nonexistent/acts.npy"),
          "missing input: %s", out);
    CHECK(run_sh(out, sizeof out, "order --input /nonexistent/acts.safetensors --tensor h") == 1 &&
              strstr(out, "/nonexistent/acts.safetensors"),
          "missing safetensors: %s", out);
    /* bad flags: exit 2 */
    CHECK(run_sh(out, sizeof out, "order --order 5") == 2 && strstr(out, "--order"), "--order 5: %s", out);
    CHECK(run_sh(out, sizeof out, "order --format fp32") == 2 && strstr(out, "--format"), "--format fp32: %s", out);
    CHECK(run_sh(out, sizeof out, "order --strategy eager") == 2, "--strategy eager: %s", out);
    CHECK(run_sh(out, sizeof out, "order --act") == 2, "--act without a value: %s", out);
    CHECK(run_sh(out, sizeof out, "order --tensor x") == 2, "--tensor without --input: %s", out);
    CHECK(run_sh(out, sizeof out, "order --bogus") == 2 && strstr(out, "--bogus"), "--bogus: %s", out);
    snprintf(args, sizeof args, "rm -rf %s", dir);
    CHECK(system(args) == 0, "cleanup");
}

/* The verdicts: the highest safe order of a group, for the map (overflow threshold vs amax, with the
   tie rule) and for a tensor study (no overflow, nothing clipped, flushed <= max_flush). */
static void test_verdicts(void)
{
    fl_order_entry e[3];
    memset(e, 0, sizeof e);
    for (int i = 0; i < 3; i++)
        e[i].order = i + 2;
    e[0].overflow_threshold = 100, e[1].overflow_threshold = 16, e[2].overflow_threshold = 16;
    e[2].overflow_inclusive = 1; /* the tie at 16 overflows for order 4, not for order 3 */
    CHECK(fl_order_highest_safe_map(e, 3, 15) == 4 && fl_order_highest_safe_map(e, 3, 16) == 3 &&
              fl_order_highest_safe_map(e, 3, 50) == 2 && fl_order_highest_safe_map(e, 3, 100) == 2 && fl_order_highest_safe_map(e, 3, 101) == 0,
          "map verdicts");
    fl_order_tensor_result t[3];
    memset(t, 0, sizeof t);
    for (int i = 0; i < 3; i++)
        t[i].order = i + 2;
    t[1].frac_flushed = 0.01, t[2].frac_clipped = 1e-9;
    CHECK(fl_order_highest_safe_tensor(t, 3, 0.01) == 3 && fl_order_highest_safe_tensor(t, 3, 0.009) == 2, "tensor verdicts");
    t[0].frac_overflow = 1e-6;
    CHECK(fl_order_highest_safe_tensor(t, 1, 1.0) == 0 && !fl_order_tensor_safe(&t[0], 1.0), "an overflow is never safe");
}

int main(void)
{
    test_verdicts();
    cli = getenv("FP8LAB") ? getenv("FP8LAB") : "build/fp8lab";
    test_single_power();
    test_closed_forms();
    test_reference_pm_ulp();
    test_row_model();
    test_underflow_and_small_rows();
    test_ulp_sweep();
    if (access(cli, X_OK) == 0)
        test_cli();
    else
        printf("note: CLI %s not built; CLI checks skipped\n", cli);
    PASS("test_order");
}
