/* test_kernels_gemm.c — the FP8 GEMM CPU twin and the fast-accumulation model (kernels/gemm_fp8.c).
 *
 *   - fp32 D (sequential and OpenBLAS accumulation) against an exact double computation within the
 *     derived bound (K + 2) u S' + 3 u |v| (gemm_fp8.h), e4m3 x e4m3 and e5m2 x e4m3, with beta C
 *   - bf16 / e4m3 D = RNE (saturating for FP8) of the fp32 epilogue value, amax before d_scale
 *   - the fast-accumulation model on constructed cases with hand-derived results, then its error
 *     growth against K (zero-mean and positive data; promotion every 128 vs never), within its bound
 * Fixed-seed LCG inputs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "fl_round.h"
#include "gemm_fp8.h"

static const double U = 1.0 / 16777216.0;

static uint64_t lcg = 0x853C49E6748FEA9Bull;
static double rnd(void)
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(lcg >> 11) / 9007199254740992.0;
}

/* A random finite FP8 code of roughly normal magnitude. */
static uint8_t rnd_code(fl_format f, double sigma)
{
    const double g = (rnd() + rnd() + rnd() - 1.5) * 2.0 * sigma;
    return (uint8_t)fl_encode_f64(f, g, FL_RND_NE, FL_OVF_SATURATE, 0);
}

static void test_gemm(fl_format fa, fl_format fb, fl_gemm_acc acc)
{
    const size_t M = 37, N = 29, K = 300, lda = 304, ldb = 320, ldd = 40;
    uint8_t *A = calloc(lda * M, 1), *B = calloc(ldb * N, 1);
    for (size_t m = 0; m < M; m++)
        for (size_t k = 0; k < K; k++)
            A[m * lda + k] = rnd_code(fa, 2.0);
    for (size_t n = 0; n < N; n++)
        for (size_t k = 0; k < K; k++)
            B[n * ldb + k] = rnd_code(fb, 2.0);
    float C[40 * 29], D[40 * 29];
    for (size_t i = 0; i < FL_ARRAY_LEN(C); i++)
        C[i] = (float)(rnd() - 0.5);
    const float as = 0.125f, bs = 3.0f;
    float amax = -1;
    fl_gemm_fp8 g = { M, N, K, fa, fb, A, lda, B, ldb, FL_FMT_FP32, D, ldd, C, ldd, 0.5f, 0.25f, &as, &bs, NULL, &amax, 0 };
    CHECK(fl_gemm_fp8_cpu(&g, acc, NULL) == 0, "rc");
    double worst = 0;
    float want_amax = 0;
    for (size_t n = 0; n < N; n++)
        for (size_t m = 0; m < M; m++) {
            double s = 0, sa = 0;
            for (size_t k = 0; k < K; k++) {
                const double p = (double)fl_decode(fa, A[m * lda + k]) * fl_decode(fb, B[n * ldb + k]);
                s += p;
                sa += fabs(p);
            }
            const double f = 0.5 * 0.125 * 3.0;
            const double v = f * s + 0.25 * C[n * ldd + m];
            const double bound = (K + 2) * U * f * sa + 3 * U * fabs(v) + 2 * U * 0.25 * fabs(C[n * ldd + m]);
            const float d = D[n * ldd + m];
            CHECK(fabs(d - v) <= bound, "FAIL gemm %s x %s acc=%d m=%zu n=%zu got=%a want=%a bound=%g", fl_format_name(fa),
                  fl_format_name(fb), (int)acc, m, n, d, v, bound);
            worst = fmax(worst, fabs(d - v) / (U * f * sa));
            want_amax = fmaxf(want_amax, fabsf(d));
        }
    CHECK(amax == want_amax, "amax");
    printf("  gemm %s x %s (%s accumulation): max |err| %.2f u S' (bound K + 2 = %zu)\n", fl_format_name(fa), fl_format_name(fb),
           acc == FL_GEMM_ACC_SGEMM ? "OpenBLAS" : "sequential", worst, K + 2);

    /* bf16 and e4m3 D from the same epilogue value */
    uint16_t Db[40 * 29];
    uint8_t De[40 * 29];
    const float ds = 0.01f;
    float amax_e = -1;
    fl_gemm_fp8 gb = g, ge = g;
    uint16_t Cb[40 * 29];
    for (size_t i = 0; i < FL_ARRAY_LEN(C); i++) {
        Cb[i] = (uint16_t)fl_encode_f32(FL_FMT_BF16, C[i], FL_RND_NE, FL_OVF_NOSATURATE, 0);
        C[i] = fl_decode(FL_FMT_BF16, Cb[i]);
    }
    CHECK(fl_gemm_fp8_cpu(&g, acc, NULL) == 0, "rc"); /* fp32 D with the bf16-exact C */
    gb.d_fmt = FL_FMT_BF16, gb.d = Db, gb.c = Cb, gb.amax_d = NULL;
    ge.d_fmt = FL_FMT_E4M3, ge.d = De, ge.c = Cb, ge.d_scale = &ds, ge.amax_d = &amax_e;
    CHECK(fl_gemm_fp8_cpu(&gb, acc, NULL) == 0 && fl_gemm_fp8_cpu(&ge, acc, NULL) == 0, "rc");
    for (size_t n = 0; n < N; n++)
        for (size_t m = 0; m < M; m++) {
            const float v = D[n * ldd + m];
            CHECK(Db[n * ldd + m] == fl_encode_f32(FL_FMT_BF16, v, FL_RND_NE, FL_OVF_NOSATURATE, 0), "bf16 D");
            CHECK(De[n * ldd + m] == fl_encode_f32(FL_FMT_E4M3, v * ds, FL_RND_NE, FL_OVF_SATURATE, 0), "e4m3 D");
        }
    CHECK(amax_e == amax, "amax before d_scale");
    free(A);
    free(B);
}

static void test_fast_accum_constructed(void)
{
    enum { K = 4096 };
    static float a[K], b[K];
    /* one product of 2^14 then 4095 products of 0.5: on the 14-bit grid of 2^14 (step 2) every 0.5
       truncates to 0 */
    a[0] = 128.0f, b[0] = 128.0f;
    for (int k = 1; k < K; k++)
        a[k] = 1.0f, b[k] = 0.5f;
    const double exact = 16384.0 + 4095 * 0.5;
    const float never = fl_fast_accum_dot(a, b, K, &FL_FAST_ACCUM_HOPPER);
    const float promoted = fl_fast_accum_dot(a, b, K, &FL_FAST_ACCUM_PROMOTED);
    /* never promoted: 16384.  Promoted every 128: the first chunk loses its 127 halves, each later
       chunk sums 128 halves = 64 exactly and is added to the fp32 total: 16384 + 31 * 64. */
    CHECK(never == 16384.0f, "fast accum, no promotion: got %a", never);
    CHECK(promoted == 16384.0f + 31 * 64.0f, "fast accum, promotion: got %a", promoted);
    printf("  constructed K=4096: exact %.1f, fast accumulation %.1f (rel err %.2f%%), promoted every 128 %.1f (%.2f%%)\n",
           exact, never, 100 * fabs(never - exact) / exact, promoted, 100 * fabs(promoted - exact) / exact);
    /* one group by hand: T = 0, products 1 and 2^-14 and -(1 + 2^-13): E = 0, grid 2^-13; 2^-14 -> 0 */
    float x[3] = { 1.0f, 0x1p-14f, -1.0f - 0x1p-13f }, y[3] = { 1.0f, 1.0f, 1.0f };
    CHECK(fl_fast_accum_dot(x, y, 3, NULL) == -0x1p-13f, "one group");
    /* truncation is toward zero for negative terms: -3 * 2^-14 -> -2^-13 on the 2^-13 grid */
    float x2[2] = { 1.0f, -3 * 0x1p-14f };
    CHECK(fl_fast_accum_dot(x2, y, 2, NULL) == 1.0f - 0x1p-13f, "toward zero");
    /* NaN propagates */
    float x3[2] = { 1.0f, NAN };
    CHECK(isnan(fl_fast_accum_dot(x3, y, 2, NULL)), "NaN");
    /* bits = 24: the grid of 1 is 2^-23, so 2^-23 stays and 2^-24 goes */
    const fl_fast_accum_model wide = { 32, 24, 0 };
    float x4[3] = { 1.0f, 0x1p-23f, 0x1p-24f };
    CHECK(fl_fast_accum_dot(x4, y, 3, &wide) == 1.0f + 0x1p-23f, "wide grid");
}

static void test_fast_accum_growth(void)
{
    printf("  fast-accumulation model, relative error |emu - exact| / |exact|, median (max) over 64 dot products of "
           "e4m3 data:\n      K   zero-mean, never   zero-mean, N_C=128   positive, never   positive, N_C=128\n");
    enum { T = 64, KMAX = 16384 };
    float *a = malloc(KMAX * sizeof *a), *b = malloc(KMAX * sizeof *b);
    for (size_t K = 256; K <= KMAX; K *= 4) {
        double med[4], mx[4];
        for (int mode = 0; mode < 4; mode++) {
            double errs[T];
            for (int t = 0; t < T; t++) {
                double exact = 0, sabs = 0;
                for (size_t k = 0; k < K; k++) {
                    const double ga = mode < 2 ? rnd() - 0.5 : rnd(), gb = rnd() - (mode < 2 ? 0.5 : 0.0);
                    a[k] = fl_decode(FL_FMT_E4M3, fl_encode_f64(FL_FMT_E4M3, ga * 4, FL_RND_NE, FL_OVF_SATURATE, 0));
                    b[k] = fl_decode(FL_FMT_E4M3, fl_encode_f64(FL_FMT_E4M3, gb * 4, FL_RND_NE, FL_OVF_SATURATE, 0));
                    exact += (double)a[k] * b[k];
                    sabs += fabs((double)a[k] * b[k]);
                }
                const fl_fast_accum_model *m = (mode & 1) ? &FL_FAST_ACCUM_PROMOTED : &FL_FAST_ACCUM_HOPPER;
                const double e = fabs(fl_fast_accum_dot(a, b, K, m) - exact);
                CHECK(e <= fl_fast_accum_bound(K, sabs, m), "FAIL fast accum bound K=%zu", K);
                errs[t] = e / fabs(exact);
            }
            /* sort for the median */
            for (int i = 1; i < T; i++)
                for (int j = i; j > 0 && errs[j] < errs[j - 1]; j--) {
                    const double tmp = errs[j];
                    errs[j] = errs[j - 1];
                    errs[j - 1] = tmp;
                }
            med[mode] = errs[T / 2];
            mx[mode] = errs[T - 1];
        }
        printf("  %6zu  %7.4f%% (%7.3f%%)   %7.4f%% (%7.3f%%)   %7.4f%% (%6.3f%%)   %7.4f%% (%6.3f%%)\n", K, 100 * med[0],
               100 * mx[0], 100 * med[1], 100 * mx[1], 100 * med[2], 100 * mx[2], 100 * med[3], 100 * mx[3]);
        if (K >= 4096)
            CHECK(med[3] < med[2] && med[1] <= med[0] * 1.5, "promotion helps at K=%zu", K);
    }
    free(a);
    free(b);
}

int main(void)
{
    test_gemm(FL_FMT_E4M3, FL_FMT_E4M3, FL_GEMM_ACC_SEQ);
    test_gemm(FL_FMT_E4M3, FL_FMT_E4M3, FL_GEMM_ACC_SGEMM);
    test_gemm(FL_FMT_E5M2, FL_FMT_E4M3, FL_GEMM_ACC_SGEMM);
    test_gemm(FL_FMT_E4M3, FL_FMT_E5M2, FL_GEMM_ACC_SEQ);
    uint8_t z[16] = { 0 };
    float d[1];
    fl_gemm_fp8 bad = { 1, 1, 16, FL_FMT_E5M2, FL_FMT_E5M2, z, 16, z, 16, FL_FMT_FP32, d, 1, NULL, 0, 1.0f, 0.0f, NULL, NULL, NULL, NULL, 0 };
    fflush(stdout);
    fprintf(stderr, "  (an expected error message follows)\n");
    CHECK(fl_gemm_fp8_cpu(&bad, FL_GEMM_ACC_SEQ, NULL) == -1, "e5m2 x e5m2 is rejected");
    test_fast_accum_constructed();
    test_fast_accum_growth();
    PASS("test_kernels_gemm");
}
