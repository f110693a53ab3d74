/* bench_train.c — training throughput of the harness next to the OpenBLAS sgemm FLOP rate measured
 * in the same run, and the rate of the harness's own GEMM (fl_train_gemm, experiments/train/gemm.h).
 *
 * For each configuration (the demo's model, and a wider one where GEMMs dominate) and recipe
 * (fp32, bf16, fp8-delayed) it runs `steps` training steps through fl_train_run (everything a real
 * step does: casts, twins, attention, AdamW, telemetry) and reports steps/s and the model's GEMM
 * FLOP rate:  FLOPs/step = 3 * (2 N sum_linears K M + 2 * 2 B H (T (T+1) / 2) hs)  (forward + 2x
 * backward; causal attention counted on its lower triangle).  The sgemm rate is measured on the
 * model's largest Linear shape (N x 2F x C) with the same thread count, for 0.25 s right before and
 * right after each training run; the run's ratio is its model rate over the mean of those two (the
 * host is shared: the sgemm rate alone moves by 10-20% from minute to minute, so a reference taken
 * once per table would be measured under other conditions than most runs).  The harness sums its
 * GEMMs in one fixed order (gemm.h), not with OpenBLAS; the last column is that GEMM's rate on the same
 * shape, its rows split in four tiles among the threads as model.c splits them, measured right after
 * the first bracket.  Each configuration runs `repeats` times; the table gives the medians and the
 * range of the ratio.
 * Usage: bench_train [steps (default 60)] [threads (default 1)] [repeats (default 3)]
 */
#include "train/gemm.h"
#include "train/train.h"

#include <cblas.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double sgemm_rate(int M, int N, int K, double secs)
{
    float *a = malloc((size_t)M * K * sizeof *a), *b = malloc((size_t)N * K * sizeof *b), *c = malloc((size_t)M * N * sizeof *c);
    for (size_t i = 0; i < (size_t)M * K; i++)
        a[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < (size_t)N * K; i++)
        b[i] = (float)(i % 5) * 0.1f;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f, c, N); /* warm */
    int it = 0;
    const double t0 = now();
    double t;
    do {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f, c, N);
        it++;
        t = now() - t0;
    } while (t < secs);
    free(a);
    free(b);
    free(c);
    return 2.0 * M * N * K * it / t;
}

/* sgemm_rate's product through fl_train_gemm, rows in four tiles shared by `threads` OpenMP threads. */
static double gemm_rate(int M, int N, int K, int threads, double secs)
{
    float *a = malloc((size_t)M * K * sizeof *a), *b = malloc((size_t)N * K * sizeof *b), *c = malloc((size_t)M * N * sizeof *c);
    for (size_t i = 0; i < (size_t)M * K; i++)
        a[i] = (float)(i % 7) * 0.1f;
    for (size_t i = 0; i < (size_t)N * K; i++)
        b[i] = (float)(i % 5) * 0.1f;
    const int rows = (M + 3) / 4;
    int it = -1; /* the first call warms */
    double t0 = 0.0, t;
    do {
        if (it == 0)
            t0 = now();
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int q = 0; q < 4; q++) {
            const int i0 = q * rows, m = M - i0 < rows ? M - i0 : rows;
            if (m > 0)
                fl_train_gemm(FL_TRAIN_GEMM_N, FL_TRAIN_GEMM_T, (size_t)m, (size_t)N, (size_t)K, a + (size_t)i0 * K, (size_t)K,
                              b, (size_t)K, 0.0f, c + (size_t)i0 * N, (size_t)N);
        }
        it++;
        t = now() - t0;
    } while (it < 1 || t < secs);
    free(a);
    free(b);
    free(c);
    return 2.0 * M * N * K * it / t;
}

static int cmp_double(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double step_flops(const fl_model_cfg *m)
{
    const double N = (double)m->B * m->T, C = m->C, F = m->F, G = fl_act_gated(m->act) ? 2 : 1;
    const double lin = m->L * (3 * C * C + C * C + G * F * C + F * C) + (double)m->V * C;
    const double att = m->L * 2.0 * 2.0 * m->B * (double)m->T * (m->T + 1) / 2.0 * C;
    return 3.0 * (2.0 * N * lin + att);
}

int main(int argc, char **argv)
{
    fl_blas_setup(argv);
    const int steps = argc > 1 ? atoi(argv[1]) : 60;
    const int threads = argc > 2 ? atoi(argv[2]) : 1;
    const int reps = argc > 3 ? atoi(argv[3]) : 3;
    if (steps < 1 || threads < 1 || reps < 1 || reps > 64) {
        fprintf(stderr, "usage: bench_train [steps >= 1] [threads >= 1] [repeats 1..64]\n");
        return 2;
    }
    openblas_set_num_threads(threads);
    char base[256];
    snprintf(base, sizeof base, "/tmp/fp8lab_bench_train_%d", (int)getpid());
    if (mkdir(base, 0755)) {
        fprintf(stderr, "bench_train: cannot create %s\n", base);
        return 1;
    }
    const int par = openblas_get_parallel();
    printf("bench_train: %d steps per run, %d thread(s), %d repeats; OpenBLAS core %s, %s threading\n", steps,
           threads, reps, openblas_get_corename(), par == 2 ? "OpenMP" : par == 1 ? "pthreads" : "no");
    printf("%-24s %-12s %9s %12s %12s %7s %15s %12s\n", "model", "recipe", "steps/s", "model GF/s", "sgemm GF/s", "ratio",
           "ratio range", "gemm GF/s");
    const struct {
        const char *name;
        uint32_t C, F, T, B;
    } models[2] = { { "demo C64 F256 T64 B16", 64, 256, 64, 16 }, { "wide C256 F1024 T64 B16", 256, 1024, 64, 16 } };
    const fl_recipe_kind recs[3] = { FL_RECIPE_FP32, FL_RECIPE_BF16, FL_RECIPE_FP8_DELAYED };
    for (int mi = 0; mi < 2; mi++) {
        fl_train_cfg c;
        fl_train_cfg_default(&c);
        c.model.C = models[mi].C;
        c.model.F = models[mi].F;
        c.model.T = models[mi].T;
        c.model.B = models[mi].B;
        c.model.H = 4;
        c.model.L = 2;
        c.steps = (uint64_t)steps;
        c.data_len = 1 << 16;
        c.log_every = 10;
        c.ckpt_every = 1000000;
        const int N = (int)(c.model.B * c.model.T);
        for (int r = 0; r < 3; r++) {
            c.recipe.kind = recs[r];
            double sps[64], ref[64], ratio[64], own[64];
            for (int k = 0; k < reps; k++) {
                char dir[512], p[600];
                snprintf(dir, sizeof dir, "%s/%d-%d-%d", base, mi, r, k);
                openblas_set_num_threads(threads); /* the reference on `threads` threads */
                const double before = sgemm_rate(N, 2 * (int)c.model.F, (int)c.model.C, 0.25);
                own[k] = gemm_rate(N, 2 * (int)c.model.F, (int)c.model.C, threads, 0.25);
                fl_train_opts o = { dir, threads, 1, 0, 1 };
                if (fl_train_run(&c, &o)) {
                    fprintf(stderr, "bench_train: run failed\n");
                    return 1;
                }
                openblas_set_num_threads(threads);
                const double after = sgemm_rate(N, 2 * (int)c.model.F, (int)c.model.C, 0.25);
                snprintf(p, sizeof p, "%s/summary.json", dir);
                json_error_t e;
                json_t *j = json_load_file(p, 0, &e);
                sps[k] = j ? json_number_value(json_object_get(j, "steps_per_s")) : 0;
                json_decref(j);
                if (!(sps[k] > 0)) {
                    fprintf(stderr, "bench_train: %s: no steps_per_s\n", p);
                    return 1;
                }
                ref[k] = 0.5 * (before + after);
                ratio[k] = sps[k] * step_flops(&c.model) / ref[k];
            }
            const double s_med = median(sps, reps), ref_med = median(ref, reps), r_med = median(ratio, reps);
            const double own_med = median(own, reps);
            char range[64];
            snprintf(range, sizeof range, "%.1f-%.1f%%", 100.0 * ratio[0], 100.0 * ratio[reps - 1]); /* sorted */
            printf("%-24s %-12s %9.2f %12.2f %12.2f %6.1f%% %15s %12.2f\n", models[mi].name, fl_recipe_name(recs[r]),
                   s_med, s_med * step_flops(&c.model) / 1e9, ref_med / 1e9, 100.0 * r_med, range, own_med / 1e9);
            fflush(stdout);
        }
    }
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    return system(cmd) ? 1 : 0;
}
