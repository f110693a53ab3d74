/* bench_kernels.c — throughput of every CPU twin (single thread, bf16 unless named), next to memcpy
 * of the same number of bytes in the same run.  GB/s counts the bytes the kernel moves (inputs read +
 * outputs written, as in kernels/README.md's table); "% memcpy" compares with memcpy moving as many
 * bytes (read + write).  Best of several repetitions (the machines are shared and noisy).  Also the
 * FP8 GEMM twin (GFLOP/s, OpenBLAS accumulation and the fast-accumulation model). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gemm_fp8.h"
#include "kernels.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

enum { N = 1 << 22, H = 8192, REPS = 5 };

static uint16_t *bufs[6];
static uint8_t *fp8[3];
static double memcpy_gbs;

static void report(const char *name, double bytes_per_elem, double best)
{
    const double gbs = bytes_per_elem * N / best * 1e-9;
    printf("  %-34s %5.1f B/elem  %8.2f GB/s  %6.1f Melem/s  %5.1f%% of memcpy\n", name, bytes_per_elem, gbs, N / best * 1e-6,
           100.0 * gbs / memcpy_gbs);
}

#define BENCH(name, bpe, call)                                                                     \
    do {                                                                                           \
        double best = 1e30;                                                                        \
        for (int r_ = 0; r_ < REPS; r_++) {                                                        \
            double t_ = now();                                                                     \
            if (call)                                                                              \
                return 1;                                                                          \
            t_ = now() - t_;                                                                       \
            best = t_ < best ? t_ : best;                                                          \
        }                                                                                          \
        report(name, bpe, best);                                                                   \
    } while (0)

int main(void)
{
    for (int i = 0; i < 6; i++) {
        bufs[i] = malloc((size_t)N * 2);
        if (!bufs[i])
            return 1;
    }
    for (int i = 0; i < 3; i++)
        fp8[i] = malloc(N);
    uint64_t s = 42;
    for (size_t i = 0; i < N; i++)
        for (int b = 0; b < 3; b++) {
            s = s * 6364136223846793005ull + 1442695040888963407ull;
            const float v = (float)(((double)(s >> 11) / 9007199254740992.0 - 0.5) * 6.0);
            bufs[b][i] = (uint16_t)fl_encode_f32(FL_FMT_BF16, v, FL_RND_NE, FL_OVF_NOSATURATE, 0);
            fp8[b][i] = (uint8_t)fl_encode_f32(FL_FMT_E4M3, v, FL_RND_NE, FL_OVF_SATURATE, 0);
        }
    /* memcpy moving 6 B/elem-worth (the SwiGLU forward's traffic), as read + write GB/s */
    double best_copy = 1e30;
    for (int r = 0; r < REPS; r++) {
        double t = now();
        memcpy(bufs[3], bufs[0], (size_t)N * 2);
        memcpy(bufs[4], bufs[1], (size_t)N * 2);
        memcpy(bufs[5], bufs[2], (size_t)N * 2);
        t = now() - t;
        best_copy = t < best_copy ? t : best_copy;
    }
    memcpy_gbs = 2.0 * 6.0 * N / best_copy * 1e-9;
    printf("bench_kernels: %d elements, single thread, best of %d\n", N, REPS);
    printf("  %-34s %5.1f B/elem  %8.2f GB/s (read + write)\n", "memcpy", 12.0, memcpy_gbs);

    const fl_kin x = { bufs[0], FL_FMT_BF16, NULL }, u = { bufs[1], FL_FMT_BF16, NULL }, dy = { bufs[2], FL_FMT_BF16, NULL };
    const fl_kin x8 = { fp8[0], FL_FMT_E4M3, NULL }, u8 = { fp8[1], FL_FMT_E4M3, NULL };
    const fl_kout y = { bufs[3], FL_FMT_BF16, NULL, NULL }, y2 = { bufs[4], FL_FMT_BF16, NULL, NULL };
    float amax = 0.0f, scale = 2.0f;
    const fl_kout y8 = { fp8[2], FL_FMT_E4M3, &scale, &amax };
    const fl_poly_coef c3 = fl_poly_coef_default(3);
    float da[5];

    BENCH("polyrelu3 fwd bf16", 4, fl_polyrelu_fwd(y, x, N, &c3));
    BENCH("polyrelu3 fwd bf16 -> e4m3", 3, fl_polyrelu_fwd(y8, x, N, &c3));
    BENCH("polyrelu3 fwd e4m3 -> bf16", 3, fl_polyrelu_fwd(y, x8, N, &c3));
    BENCH("polyrelu3 bwd bf16 (+ coef grads)", 6, fl_polyrelu_bwd(y2, da, x, dy, N, &c3));
    BENCH("polynorm3 fwd bf16 (H=8192)", 4, fl_polynorm_fwd(y, x, N / H, H, &c3, 1e-6f));
    BENCH("polynorm3 fwd bf16 -> e4m3", 3, fl_polynorm_fwd(y8, x, N / H, H, &c3, 1e-6f));
    BENCH("polynorm3 bwd bf16 (+ coef grads)", 6, fl_polynorm_bwd(y2, da, x, dy, N / H, H, &c3, 1e-6f));
    BENCH("swiglu fwd bf16", 6, fl_swiglu_fwd(y, x, u, N));
    BENCH("swiglu fwd bf16 -> e4m3", 5, fl_swiglu_fwd(y8, x, u, N));
    BENCH("swiglu fwd e4m3 -> bf16", 4, fl_swiglu_fwd(y, x8, u8, N));
    BENCH("swiglu bwd bf16", 10, fl_swiglu_bwd(y, y2, x, u, dy, N));
    static float sc[N / H > H ? N / H : H];
    BENCH("smooth-swiglu per-token -> e4m3", 5, fl_smooth_swiglu_fwd(y8, sc, x, u, N / H, H, FL_SMOOTH_TOKEN, 1));
    BENCH("smooth-swiglu per-channel -> e4m3", 9, fl_smooth_swiglu_fwd(y8, sc, x, u, N / H, H, FL_SMOOTH_CHANNEL, 1));

    /* FP8 GEMM twin: M = N = K = 512 */
    const size_t G = 512;
    float *d = malloc(G * G * sizeof *d);
    fl_gemm_fp8 g = { G, G, G, FL_FMT_E4M3, FL_FMT_E4M3, fp8[0], G, fp8[1], G, FL_FMT_FP32, d, G, NULL, 0, 1.0f, 0.0f,
                      NULL, NULL, NULL, NULL, 0 };
    const char *names[] = { "OpenBLAS sgemm", "sequential", "fast-accum model" };
    for (int acc = 0; acc < FL_GEMM_ACC_COUNT; acc++) {
        double bt = 1e30;
        for (int r = 0; r < 3; r++) {
            double t = now();
            if (fl_gemm_fp8_cpu(&g, (fl_gemm_acc)acc, NULL))
                return 1;
            t = now() - t;
            bt = t < bt ? t : bt;
        }
        printf("  gemm e4m3 512^3 twin, %-18s %8.2f GFLOP/s\n", names[acc], 2.0 * G * G * G / bt * 1e-9);
    }
    free(d);
    for (int i = 0; i < 6; i++)
        free(bufs[i]);
    for (int i = 0; i < 3; i++)
        free(fp8[i]);
    return 0;
}
