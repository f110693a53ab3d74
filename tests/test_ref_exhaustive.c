/* test_ref_exhaustive.c — every input of the small formats through the MPFR activation reference.
 *
 *   unary functions: all 65536 bf16 inputs -> bf16 and all 65536 fp16 inputs -> fp16;
 *   two-input gates: every e4m3 x e4m3 pair -> e4m3 (saturating) and every e5m2 x e5m2 pair -> e5m2
 *   (IEEE overflow);  smooth_swiglu: every e4m3 pair with s = 2^-3 (a power-of-two scale).
 * The rounding mode cycles through rne, rtz, up, down with the input index.  Each result must
 *   - come out of the Ziv loop (no give-up),
 *   - equal a second evaluation whose Ziv loop starts 24 bits higher,
 *   - be NaN exactly when the definition says (a NaN input; 0 * Inf in a gate; log1p below -1),
 *   - lie in the function's range (sigmoid in [0, 1], tanh and erf in [-1, 1], relu/relu2/softplus
 *     >= 0, exp >= +0, expm1 >= -1).
 * Every derivative evaluator: all bf16 inputs (unary) or all e4m3 pairs (gates), into bf16, the same
 * checks except the range.
 * OpenMP over inputs; set FL_REF_QUICK=1 to test every 7th input only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "ref.h"
#include "round_mpfr.h"

static const fl_rounding rnds[4] = { FL_RND_NE, FL_RND_ZERO, FL_RND_UP, FL_RND_DOWN };

static int range_ok(const char *name, mpfr_srcptr y)
{
    if (mpfr_nan_p(y))
        return 1;
    if (!strcmp(name, "sigmoid"))
        return mpfr_cmp_ui(y, 0) >= 0 && mpfr_cmp_ui(y, 1) <= 0;
    if (!strcmp(name, "tanh") || !strcmp(name, "erf"))
        return mpfr_cmp_si(y, -1) >= 0 && mpfr_cmp_ui(y, 1) <= 0;
    if (!strcmp(name, "expm1"))
        return mpfr_cmp_si(y, -1) >= 0;
    if (!strcmp(name, "exp"))
        return mpfr_sgn(y) >= 0 && !mpfr_signbit(y);
    if (!strcmp(name, "relu") || !strcmp(name, "relu2") || !strcmp(name, "softplus"))
        return mpfr_sgn(y) >= 0;
    return 1;
}

/* Returns the number of failures (prints the first few). */
static long sweep(const fl_ref_fn *fn, int e, fl_format in_fmt, fl_format out_fmt, fl_overflow ovf, int step)
{
    const int n_in = fn->n_inputs;
    const uint32_t ncodes = 1u << fl_format_get(in_fmt)->bits;
    const uint64_t total = n_in == 1 ? ncodes : (uint64_t)ncodes * ncodes;
    long fails = 0;
    fl_ref_params p;
    fl_ref_params_init(&p, fn);
    const fl_ref_eval_fn ev = fn->evals[e].eval;
#pragma omp parallel reduction(+ : fails)
    {
        mpfr_t x[3], y;
        for (int i = 0; i < 3; i++)
            mpfr_init2(x[i], 64);
        mpfr_init2(y, 64);
        mpfr_set_d(x[2], 0.125, MPFR_RNDN);
        mpfr_srcptr xs[3] = { x[0], x[1], x[2] };
#pragma omp for schedule(dynamic, 512)
        for (uint64_t idx = 0; idx < total; idx += (uint64_t)step) {
            const uint32_t a = (uint32_t)(idx % ncodes), b = (uint32_t)(idx / ncodes);
            fl_mpfr_decode(x[0], in_fmt, a);
            if (n_in > 1)
                fl_mpfr_decode(x[1], in_fmt, b);
            const fl_rounding r = rnds[(a + b) & 3];
            uint32_t c0 = 0, c1 = 0;
            int rc0 = fl_ref_round_wp(&c0, out_fmt, r, ovf, ev, xs, &p, 0);
            int rc1 = fl_ref_round_wp(&c1, out_fmt, r, ovf, ev, xs, &p, 24);
            fl_mpfr_decode(y, out_fmt, c0);
            /* log1p: NaN below its domain x >= -1 */
            int nan_in = mpfr_nan_p(x[0]) || (n_in > 1 && mpfr_nan_p(x[1])) ||
                         (!strcmp(fn->name, "log1p") && mpfr_cmp_si(x[0], -1) < 0);
            int inf_in = mpfr_inf_p(x[0]) || (n_in > 1 && mpfr_inf_p(x[1]));
            int nan_ok = mpfr_nan_p(y) ? (nan_in || (n_in > 1 && inf_in) ||
                                          (ovf == FL_OVF_NOSATURATE && fl_format_get(out_fmt)->specials != FL_SPEC_IEEE))
                                       : !nan_in;
            int ok = rc0 == 0 && rc1 == 0 && c0 == c1 && nan_ok && (e > 0 || range_ok(fn->name, y));
            if (!ok) {
                fails++;
                if (fails <= 3) {
#pragma omp critical
                    fprintf(stderr, "FAIL %s wrt '%s' %s->%s %s x=0x%x%s0x%x got=0x%x at +24 bits: 0x%x rc=%d,%d\n",
                            fn->name, fn->evals[e].wrt, fl_format_name(in_fmt), fl_format_name(out_fmt), fl_rounding_name(r), a,
                            n_in > 1 ? " u=" : " ", b, c0, c1, rc0, rc1);
                }
            }
        }
        for (int i = 0; i < 3; i++)
            mpfr_clear(x[i]);
        mpfr_clear(y);
        mpfr_free_cache2(MPFR_FREE_LOCAL_CACHE);
    }
    return fails;
}

int main(void)
{
    const int step = getenv("FL_REF_QUICK") ? 7 : 1;
    struct timespec t0, t1;
    for (int id = 0; id < FL_REF_COUNT; id++) {
        const fl_ref_fn *fn = &fl_ref_table[id];
        if (fn->rowwise)
            continue;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        long f = 0;
        if (fn->n_inputs == 1) {
            f += sweep(fn, 0, FL_FMT_BF16, FL_FMT_BF16, FL_OVF_NOSATURATE, step);
            f += sweep(fn, 0, FL_FMT_FP16, FL_FMT_FP16, FL_OVF_NOSATURATE, step);
        } else {
            f += sweep(fn, 0, FL_FMT_E4M3, FL_FMT_E4M3, FL_OVF_SATURATE, step);
            f += sweep(fn, 0, FL_FMT_E5M2, FL_FMT_E5M2, FL_OVF_NOSATURATE, step);
        }
        /* every derivative: bf16 inputs (unary) or e4m3 pairs (gates), into bf16 */
        for (int e = 1; e < FL_REF_MAX_EVALS && fn->evals[e].wrt; e++)
            f += sweep(fn, e, fn->n_inputs == 1 ? FL_FMT_BF16 : FL_FMT_E4M3, FL_FMT_BF16, FL_OVF_NOSATURATE, step);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        CHECK(f == 0, "%s: %ld failures", fn->name, f);
        fl_checks_run++;
        printf("%-14s ok  (%.1f s)\n", fn->name, (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
        fflush(stdout);
    }
    mpfr_free_cache();
    PASS("test_ref_exhaustive");
}
