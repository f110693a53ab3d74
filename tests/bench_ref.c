/* bench_ref.c — correctly rounded evaluations per second of every reference function (values and
 * derivatives) into fp32 and bf16, round to nearest even, single-threaded.
 *
 * Inputs: 4096 float32 values (fixed LCG seed 0x5eed) spread as activations are, |x| up to 16 with a
 * few beyond 100; gates take pairs, smooth_swiglu a scale 0.5; row-wise functions rows of 64 (so one
 * "evaluation" is one output element, whose cost includes the row sums: O(n) per element).
 * Each figure is the best of 3 passes (the machines are shared).  FL_BENCH_N=... changes the count. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ref.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(void)
{
    const char *env = getenv("FL_BENCH_N");
    const long n = env ? atol(env) : 4096;
    const long row = 64;
    float *v = malloc((size_t)(n + 2 * row) * sizeof *v);
    uint64_t s = 0x5eed;
    for (long i = 0; i < n + 2 * row; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const double u = (double)(s >> 11) / 9007199254740992.0;
        v[i] = (float)((u - 0.5) * (i % 61 == 0 ? 400.0 : 32.0));
    }
    mpfr_t x[3];
    mpfr_t *r = malloc((size_t)(2 * row) * sizeof *r);
    mpfr_srcptr *rp = malloc((size_t)(2 * row) * sizeof *rp);
    for (int k = 0; k < 3; k++)
        mpfr_init2(x[k], 64);
    for (long k = 0; k < 2 * row; k++) {
        mpfr_init2(r[k], 64);
        mpfr_set_flt(r[k], v[n + k], MPFR_RNDN); /* rows: x, then dy */
        rp[k] = r[k];
    }
    mpfr_srcptr xs[3] = { x[0], x[1], x[2] };
    mpfr_srcptr const *rows[2] = { rp, rp + row };
    printf("%-14s %-6s %14s %14s   (correctly rounded evaluations per second, 1 thread)\n", "function", "wrt",
           "fp32", "bf16");
    unsigned sink = 0;
    for (int id = 0; id < FL_REF_COUNT; id++) {
        const fl_ref_fn *fn = &fl_ref_table[id];
        fl_ref_params p;
        fl_ref_params_init(&p, fn);
        for (int e = 0; e < FL_REF_MAX_EVALS && fn->evals[e].wrt; e++) {
            double rate[2];
            const fl_format fmts[2] = { FL_FMT_FP32, FL_FMT_BF16 };
            for (int f = 0; f < 2; f++) {
                double best = 1e30;
                const long m = fn->rowwise ? n / 8 : n; /* row elements cost O(row) each */
                for (int rep = 0; rep < 3; rep++) {
                    double t = now();
                    for (long i = 0; i < m; i++) {
                        uint32_t c = 0;
                        if (fn->rowwise) {
                            fl_ref_round_row(&c, fmts[f], FL_RND_NE, FL_OVF_NOSATURATE, fn->evals[e].row, rows, row,
                                             i % row, &p, 0);
                        } else {
                            mpfr_set_flt(x[0], v[i], MPFR_RNDN);
                            mpfr_set_flt(x[1], v[(i * 7 + 1) % n], MPFR_RNDN);
                            mpfr_set_d(x[2], 0.5, MPFR_RNDN);
                            fl_ref_round(&c, fmts[f], FL_RND_NE, FL_OVF_NOSATURATE, fn->evals[e].eval, xs, &p);
                        }
                        sink += c;
                    }
                    t = now() - t;
                    if (t < best)
                        best = t;
                }
                rate[f] = (double)m / best;
            }
            printf("%-14s %-6s %14.0f %14.0f\n", fn->name, fn->evals[e].wrt[0] ? fn->evals[e].wrt : "-", rate[0],
                   rate[1]);
            fflush(stdout);
        }
    }
    for (int k = 0; k < 3; k++)
        mpfr_clear(x[k]);
    for (long k = 0; k < 2 * row; k++)
        mpfr_clear(r[k]);
    free(r);
    free(rp);
    free(v);
    mpfr_free_cache();
    return sink == 0xFFFFFFFFu; /* keep the work */
}
