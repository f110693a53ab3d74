/* test_train_gemm.c — fl_train_gemm (experiments/train/gemm.h) gives the bits of the plain loop
 *     s = beta == 0 ? +0.0f : beta * C[i][j]; for k ascending: s = fmaf(op(A)[i][k], op(B)[k][j], s);
 *     C[i][j] = s
 * byte for byte (memcmp), at every instruction-set level this machine has (capped one after the other
 * with fl_convert_set_isa, the cap FP8LAB_ISA sets for a process):
 *  1. all four transposes, M, N, K in {1, 3, 17, 63, 65, 130} (across the 12- and 6-row blocks and the
 *     32- and 16-column panels, with tails), beta 0, 1 and 0.75, leading dimensions wider than the
 *     matrices; beta 0 does not read C (it holds NaN), and nothing outside C's M x N changes;
 *  2. K = 0 (C = beta C), the shapes of the demo model's GEMMs (1024 rows; 172, 257 columns), and
 *     shapes across gemm.c's blocking (several runs of k, row and column blocks, A copied first);
 *  3. NaN and Inf in A, B and C propagate as the loop propagates them, Inf * 0 included.
 * The data are random with exponents over 2^-8 .. 2^8, so that another order of the sum gives other
 * bits: the test checks that descending k changes some elements (it could not tell orders apart
 * otherwise).  Seeds are fixed (splitmix64 from 1).
 */
#include "check.h"

#include "convert.h"
#include "convert_simd.h"
#include "train/gemm.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

static uint64_t rng = 1;

static uint64_t next(void)
{
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* a random float in +-[1, 2) * 2^(-8 .. 8) */
static float rnd(void)
{
    const uint64_t r = next();
    return ldexpf((r & 1 ? -1.0f : 1.0f) * (1.0f + (float)((r >> 1) & 0xFFFFFF) * 0x1p-24f), (int)((r >> 32) % 17) - 8);
}

static void fill(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = rnd();
}

/* the definition, with the order of k given by desc (0: ascending, gemm.h's) */
static void gemm_ref(int ta, int tb, size_t M, size_t N, size_t K, const float *A, size_t lda, const float *B,
                     size_t ldb, float beta, float *C, size_t ldc, int desc)
{
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            float s = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
            for (size_t q = 0; q < K; q++) {
                const size_t k = desc ? K - 1 - q : q;
                s = fmaf(ta ? A[k * lda + i] : A[i * lda + k], tb ? B[j * ldb + k] : B[k * ldb + j], s);
            }
            C[i * ldc + j] = s;
        }
}

static int levels[FL_ISA_COUNT], nlevels;

/* The levels fl_convert_set_isa can put in force here, each once. */
static void find_levels(void)
{
    for (int cap = FL_ISA_SCALAR; cap < FL_ISA_COUNT; cap++) {
        const int v = fl_convert_set_isa(cap);
        if (!nlevels || levels[nlevels - 1] != v)
            levels[nlevels++] = v;
    }
    fl_convert_set_isa(-1);
}

static const char *op(int t) { return t ? "T" : "N"; }

/* One GEMM at every level against the reference; A, B, C0 as given (C0 holds ldc-wide rows). */
static void check_gemm(int ta, int tb, size_t M, size_t N, size_t K, const float *A, size_t lda, const float *B,
                       size_t ldb, float beta, const float *C0, size_t ldc)
{
    const size_t nc = M * ldc;
    float *want = malloc(nc * sizeof *want + 1), *got = malloc(nc * sizeof *got + 1);
    CHECK(want && got, "out of memory");
    memcpy(want, C0, nc * sizeof *want);
    gemm_ref(ta, tb, M, N, K, A, lda, B, ldb, beta, want, ldc, 0);
    for (int l = 0; l < nlevels; l++) {
        fl_convert_set_isa(levels[l]);
        memcpy(got, C0, nc * sizeof *got);
        fl_train_gemm(ta ? FL_TRAIN_GEMM_T : FL_TRAIN_GEMM_N, tb ? FL_TRAIN_GEMM_T : FL_TRAIN_GEMM_N, M, N, K, A, lda, B,
                      ldb, beta, got, ldc);
        if (memcmp(got, want, nc * sizeof *got)) {
            size_t e = 0;
            while (!memcmp(got + e, want + e, sizeof *got))
                e++;
            uint32_t g, w;
            memcpy(&g, got + e, 4);
            memcpy(&w, want + e, 4);
            CHECK(0, "%s %s%s M=%zu N=%zu K=%zu lda=%zu ldb=%zu ldc=%zu beta=%a: C[%zu][%zu] got=%a (0x%08x) want=%a (0x%08x)",
                  fl_isa_name(levels[l]), op(ta), op(tb), M, N, K, lda, ldb, ldc, (double)beta, e / ldc, e % ldc,
                  (double)got[e], g, (double)want[e], w);
        }
    }
    fl_convert_set_isa(-1);
    free(want);
    free(got);
}

/* Random A, B, C for the shape, padded leading dimensions (pad extra columns), then check_gemm.
   Returns the number of elements of C that descending k changes (beta 0). */
static size_t random_case(int ta, int tb, size_t M, size_t N, size_t K, size_t pad, float beta)
{
    const size_t lda = (ta ? M : K) + pad, ldb = (tb ? K : N) + pad, ldc = N + pad;
    const size_t na = (ta ? K : M) * lda, nb = (tb ? N : K) * ldb, nc = M * ldc;
    float *A = malloc(na * sizeof *A + 1), *B = malloc(nb * sizeof *B + 1), *C = malloc(nc * sizeof *C + 1);
    CHECK(A && B && C, "out of memory");
    fill(A, na);
    fill(B, nb);
    fill(C, nc);
    if (beta == 0.0f) /* not read: NaN in C must not show */
        for (size_t i = 0; i < M; i++)
            for (size_t j = 0; j < N; j++)
                C[i * ldc + j] = NAN;
    check_gemm(ta, tb, M, N, K, A, lda, B, ldb, beta, C, ldc);
    size_t changed = 0;
    if (beta == 0.0f && K > 2 && M * N * K < 1000000) {
        float *x = malloc(nc * sizeof *x + 1), *y = malloc(nc * sizeof *y + 1);
        CHECK(x && y, "out of memory");
        gemm_ref(ta, tb, M, N, K, A, lda, B, ldb, 0.0f, x, ldc, 0);
        gemm_ref(ta, tb, M, N, K, A, lda, B, ldb, 0.0f, y, ldc, 1);
        for (size_t i = 0; i < M; i++)
            changed += memcmp(x + i * ldc, y + i * ldc, N * sizeof *x) != 0;
        free(x);
        free(y);
    }
    free(A);
    free(B);
    free(C);
    return changed;
}

/* 1. */
static void shapes(void)
{
    static const size_t dims[] = { 1, 3, 17, 63, 65, 130 };
    static const float betas[] = { 0.0f, 1.0f, 0.75f };
    const size_t nd = sizeof dims / sizeof *dims;
    size_t cases = 0, changed = 0;
    for (int t = 0; t < 4; t++)
        for (size_t a = 0; a < nd; a++)
            for (size_t b = 0; b < nd; b++)
                for (size_t c = 0; c < nd; c++)
                    for (int be = 0; be < 3; be++) {
                        changed += random_case(t >> 1, t & 1, dims[a], dims[b], dims[c], (a + b + c + (size_t)be) % 3 * 5, betas[be]);
                        cases++;
                    }
    CHECK(changed > 0, "descending k gave the bits of ascending k in every case: the data cannot tell orders apart");
    printf("  %zu GEMMs (4 transposes x 216 shapes x 3 betas) at each level: identical to the loop; "
           "descending k changes %zu rows\n", cases, changed);
}

/* 2. */
static void edges_and_model(void)
{
    for (int t = 0; t < 4; t++) {
        random_case(t >> 1, t & 1, 5, 33, 0, 0, 0.0f); /* K = 0: C = +0 */
        random_case(t >> 1, t & 1, 5, 33, 0, 2, 1.0f); /* K = 0: C unchanged */
    }
    /* the demo model (C 64, swiglu F 172, vocabulary 257, N = 1024 tokens): forward X W^T, backward
       dY W and dY^T X */
    static const struct {
        int ta, tb;
        size_t M, N, K;
        float beta;
    } sh[] = { { 0, 1, 1024, 192, 64, 0 }, { 0, 1, 1024, 172, 64, 0 }, { 0, 1, 1024, 257, 64, 0 },
               { 0, 1, 1024, 64, 172, 0 }, { 0, 0, 1024, 64, 257, 0 }, { 0, 0, 1024, 64, 172, 1 },
               { 1, 0, 257, 64, 1024, 1 }, { 1, 0, 172, 64, 1024, 1 }, { 1, 0, 64, 172, 1024, 1 },
               { 1, 1, 100, 70, 300, 1 } };
    for (size_t s = 0; s < sizeof sh / sizeof *sh; s++)
        random_case(sh[s].ta, sh[s].tb, sh[s].M, sh[s].N, sh[s].K, 0, sh[s].beta);
    /* across gemm.c's blocks: runs of k (256: partial sums in C between runs), 144-row and 512-column
       blocks, and A copied first (a stride over k of 512 floats or more) */
    for (int t = 0; t < 4; t++) {
        random_case(t >> 1, t & 1, 145, 513, 513, 0, 1.0f);
        random_case(t >> 1, t & 1, 150, 40, 300, 520, 0.0f);
        random_case(t >> 1, t & 1, 13, 530, 1000, 3, 0.75f);
        random_case(t >> 1, t & 1, 289, 17, 257, 600, 1.0f);
    }
    printf("  K = 0, the demo model's shapes (1024 tokens, 172 and 257 columns) and shapes across the blocking: "
           "identical\n");
}

/* 3. */
static void specials(void)
{
    const size_t M = 19, N = 37, K = 23;
    for (int t = 0; t < 4; t++)
        for (int be = 0; be < 2; be++) {
            const int ta = t >> 1, tb = t & 1;
            const size_t lda = ta ? M : K, ldb = tb ? K : N;
            float A[M * K], B[K * N], C[M * N];
            fill(A, M * K);
            fill(B, K * N);
            fill(C, M * N);
            /* op(A) row 2: a NaN at k 5; row 4: +Inf at k 0 (with op(B)[0][7] = 0: Inf * 0); op(B) column
               9: -Inf at k 3, column 11: +Inf at k 3 and -Inf at k 8 (with op(A)[0][3] = op(A)[0][8] = 1:
               Inf - Inf); C[6][*] NaN but in column 11, C[7][1] Inf.  Two NaNs never meet in one fma:
               which one x86 keeps depends on the operands' places in the instruction, which is the
               compiler's choice, not the order of the sum. */
            A[ta ? 5 * lda + 2 : 2 * lda + 5] = NAN;
            A[ta ? 0 * lda + 4 : 4 * lda + 0] = INFINITY;
            A[ta ? 3 * lda + 0 : 0 * lda + 3] = 1.0f;
            A[ta ? 8 * lda + 0 : 0 * lda + 8] = 1.0f;
            B[tb ? 7 * ldb + 0 : 0 * ldb + 7] = 0.0f;
            B[tb ? 9 * ldb + 3 : 3 * ldb + 9] = -INFINITY;
            B[tb ? 11 * ldb + 3 : 3 * ldb + 11] = INFINITY;
            B[tb ? 11 * ldb + 8 : 8 * ldb + 11] = -INFINITY;
            for (size_t j = 0; j < N; j++)
                C[6 * N + j] = j == 11 ? C[6 * N + j] : NAN;
            C[7 * N + 1] = INFINITY;
            check_gemm(ta, tb, M, N, K, A, lda, B, ldb, be ? 1.0f : 0.0f, C, N);
            float want[M * N];
            memcpy(want, C, sizeof want);
            gemm_ref(ta, tb, M, N, K, A, lda, B, ldb, be ? 1.0f : 0.0f, want, N, 0);
            CHECK(isnan(want[2 * N + 0]) && isnan(want[4 * N + 7]) && isinf(want[0 * N + 9]) && isnan(want[0 * N + 11]),
                  "the special values reach C as intended");
            CHECK(be ? isnan(want[6 * N + 0]) && isinf(want[7 * N + 1]) : !isnan(want[6 * N + 0]),
                  "beta %d: C's NaN row is %s", be, be ? "read" : "not read");
        }
    printf("  NaN, Inf, Inf * 0, Inf - Inf in A, B and C: the loop's bits\n");
}

int main(void)
{
    find_levels();
    printf("test_train_gemm: levels");
    for (int l = 0; l < nlevels; l++)
        printf(" %s", fl_isa_name(levels[l]));
    printf("\n");
    CHECK(nlevels >= 1 && levels[0] == FL_ISA_SCALAR, "the plain loops are among the levels");
    shapes();
    edges_and_model();
    specials();
    PASS("test_train_gemm");
}
