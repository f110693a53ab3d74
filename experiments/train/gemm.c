/* gemm.c — the training harness's fixed-order float32 GEMM (see gemm.h).
 *
 * Blocking (the loops of fl_train_gemm, outermost first), none of which changes an element's chain:
 *   GEMM_NC columns of C at a time;
 *   k in runs of at most GEMM_KC: the run's rows of op(B) are copied into panels of NR columns
 *     (32 with AVX-512, else 16; zero-padded), k-major, so that a kernel loads whole vectors from one
 *     small contiguous block.  Between runs the partial sums wait in C, a float stored and loaded
 *     back (exact), and the next run continues the chain from them;
 *   GEMM_MC rows of C at a time; where A's leading dimension is GEMM_FAR floats (2 KiB) or more, the
 *     run's part of A is copied first (in place, A stored (K, M) would put every step or two of k on
 *     another page, and the rows of A stored (M, K) would crowd a few L1 sets);
 *   a panel, and in it blocks of MR rows (12 with AVX-512, 6 with AVX2): the kernel keeps the MR x NR
 *     sums in registers over the run, broadcasting op(A)'s elements.
 * The copies live in a per-thread scratch that grows to the largest call and is kept (as a BLAS
 * keeps its buffers). */
#include "gemm.h"
#include "model_simd.h"

#include "convert.h"
#include "convert_simd.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GEMM_KC: the longest run of k (256 rows of a 32-column panel of op(B) are 32 KiB, L1's share);
   GEMM_NC: the columns of C whose panels one run copies (at most GEMM_KC x GEMM_NC floats);
   GEMM_MC: the rows of C per copy of A (a multiple of both MRs);
   GEMM_FAR: the leading dimension of A from which A is copied. */
enum { GEMM_KC = 256, GEMM_NC = 512, GEMM_MC = 144, GEMM_FAR = 512 };

/* How a chain starts: from +0 (the first run, beta 0: C is not read), from beta C (the first run),
   or from the partial sum in C (a later run). */
enum { INIT_ZERO, INIT_BETA, INIT_C };

/* The scratch of the calling thread: n floats, kept for the next call; NULL when out of memory. */
static float *scratch(size_t n)
{
    static _Thread_local float *buf;
    static _Thread_local size_t len;
    if (n > len) {
        free(buf);
        buf = malloc(n * sizeof *buf);
        len = buf ? n : 0;
    }
    return buf;
}

/* pk[(k - k0) nr + jj] = op(B)[k][j0 + jj] for k0 <= k < k0 + kn, jj < nj; 0.0f for nj <= jj < nr.
   (B stored (N, K) with a vector unit: pack_bt512, pack_bt256.) */
static void pack_b(float *pk, const float *B, size_t ldb, int tb, size_t j0, size_t nj, size_t nr, size_t k0, size_t kn)
{
    for (size_t k = 0; k < kn; k++) {
        float *d = pk + k * nr;
        if (tb)
            for (size_t jj = 0; jj < nj; jj++)
                d[jj] = B[(j0 + jj) * ldb + k0 + k];
        else
            for (size_t jj = 0; jj < nj; jj++)
                d[jj] = B[(k0 + k) * ldb + j0 + jj];
        for (size_t jj = nj; jj < nr; jj++)
            d[jj] = 0.0f;
    }
}

/* pa[r ld + k - k0] = A[(i0 + r) lda + k] for r < m, k0 <= k < k0 + kn: rows of A stored (M, K). */
static void pack_an(float *pa, size_t ld, const float *A, size_t lda, size_t i0, size_t m, size_t k0, size_t kn)
{
    for (size_t r = 0; r < m; r++)
        memcpy(pa + r * ld, A + (i0 + r) * lda + k0, kn * sizeof *pa);
}

/* ---- the plain loops ---------------------------------------------------------------------------- */

enum { NRPLAIN = 16 };

/* C[i][j] for i < M, j < N: the chains over K with op(A)[i][k] = ta ? A[k lda + i] : A[i lda + k]
   and op(B)[k][j] = b[k bk + j bj], started as init says; 16 chains of a row side by side. */
static void gemm_plain(int ta, size_t M, size_t N, size_t K, const float *A, size_t lda, const float *b, size_t bk,
                       size_t bj, int init, float beta, float *C, size_t ldc)
{
    enum { W = NRPLAIN };
    for (size_t i = 0; i < M; i++)
        for (size_t j0 = 0; j0 < N; j0 += W) {
            const size_t w = N - j0 < W ? N - j0 : W;
            float s[W] = { 0.0f }, *c = C + i * ldc + j0;
            for (size_t jj = 0; init != INIT_ZERO && jj < w; jj++)
                s[jj] = init == INIT_C ? c[jj] : beta * c[jj];
            if (w == W && bj == 1) /* a loop of fixed length that the compiler may vectorise */
                for (size_t k = 0; k < K; k++) {
                    const float a = ta ? A[k * lda + i] : A[i * lda + k], *bp = b + k * bk + j0;
                    for (size_t jj = 0; jj < W; jj++)
                        s[jj] = fmaf(a, bp[jj], s[jj]);
                }
            else
                for (size_t k = 0; k < K; k++) {
                    const float a = ta ? A[k * lda + i] : A[i * lda + k], *bp = b + k * bk + j0 * bj;
                    for (size_t jj = 0; jj < w; jj++)
                        s[jj] = fmaf(a, bp[jj * bj], s[jj]);
                }
            for (size_t jj = 0; jj < w; jj++)
                c[jj] = s[jj];
        }
}

#if defined(__x86_64__) && defined(__GNUC__)
#define GEMM_X86 1
#include <immintrin.h>

#define KERNEL static inline __attribute__((always_inline))
#define T512 __attribute__((target("avx512f")))
#define T256 __attribute__((target("avx2,fma")))

/* ---- AVX-512 ------------------------------------------------------------------------------------ */

enum { MR512 = 12, NR512 = 32 };


/* pack_b of B stored (N, K) into a 32-column panel by 16 x 16 blocks transposed in registers; with
   nj <= 16 only the panel's first 16 columns (those the kernel reads). */
T512 static void pack_bt512(float *pk, const float *B, size_t ldb, size_t j0, size_t nj, size_t k0, size_t kn)
{
    for (size_t g = 0; g < nj; g += 16)
        for (size_t k = 0; k < kn; k += 16) {
            const size_t kk = kn - k < 16 ? kn - k : 16;
            const __mmask16 km = (__mmask16)(0xFFFFu >> (16 - kk));
            __m512 v[16];
#pragma GCC unroll 16
            for (size_t r = 0; r < 16; r++)
                v[r] = g + r < nj ? _mm512_maskz_loadu_ps(km, B + (j0 + g + r) * ldb + k0 + k) : _mm512_setzero_ps();
            model_tr16(v);
            for (size_t c = 0; c < kk; c++)
                _mm512_storeu_ps(pk + (k + c) * NR512 + g, v[c]);
        }
}

/* pa[(p kn + k - k0) MR512 + r] = A[k lda + i0 + p MR512 + r] for p MR512 + r < m, k0 <= k < k0 + kn:
   op(A)'s rows of A stored (K, M) in blocks of MR512, each block contiguous over k. */
T512 static void pack_at512(float *pa, const float *A, size_t lda, size_t i0, size_t m, size_t k0, size_t kn)
{
    for (size_t k = 0; k < kn; k++)
        for (size_t p = 0; p < m; p += MR512) {
            const size_t n = m - p < MR512 ? m - p : MR512;
            const __mmask16 msk = (__mmask16)(0xFFFFu >> (16 - n));
            _mm512_mask_storeu_ps(pa + p * kn + k * MR512, msk, _mm512_maskz_loadu_ps(msk, A + (k0 + k) * lda + i0 + p));
        }
}

/* Rows r < mr of C at c, nv vectors of 16 columns (the last one's lanes: last): acc[r][v] holds 16
   chains, started as init says and run over k < K; a(r, k) = ta ? a[k lda + r] : a[r lda + k];
   op(B)'s row k at b + k NR512, nv whole vectors. */
KERNEL T512 void tile512(const int mr, const int nv, const int ta, size_t K, const float *a, size_t lda,
                         const float *b, __mmask16 last, int init, float beta, float *c, size_t ldc)
{
    __m512 acc[MR512][2];
    const __m512 bt = _mm512_set1_ps(beta);
#pragma GCC unroll 16
    for (int r = 0; r < mr; r++)
        for (int v = 0; v < 2; v++) {
            acc[r][v] = _mm512_setzero_ps();
            if (v < nv && init != INIT_ZERO) {
                const __m512 x = _mm512_maskz_loadu_ps(v == nv - 1 ? last : (__mmask16)0xFFFF, c + r * ldc + 16 * v);
                acc[r][v] = init == INIT_C ? x : _mm512_mul_ps(bt, x);
            }
        }
    for (size_t k = 0; k < K; k++) {
        const float *bk = b + k * NR512;
        const __m512 b0 = _mm512_loadu_ps(bk), b1 = nv > 1 ? _mm512_loadu_ps(bk + 16) : b0;
#pragma GCC unroll 16
        for (int r = 0; r < mr; r++) {
            const __m512 x = _mm512_set1_ps(ta ? a[k * lda + r] : a[r * lda + k]);
            acc[r][0] = _mm512_fmadd_ps(x, b0, acc[r][0]);
            if (nv > 1)
                acc[r][1] = _mm512_fmadd_ps(x, b1, acc[r][1]);
        }
    }
#pragma GCC unroll 16
    for (int r = 0; r < mr; r++)
        for (int v = 0; v < nv; v++)
            _mm512_mask_storeu_ps(c + r * ldc + 16 * v, v == nv - 1 ? last : (__mmask16)0xFFFF, acc[r][v]);
}

/* Rows i < M, columns j < nj (<= 32) of C: op(A)'s row block i0 at a + i0 ra (ra = lda, 1 or the
   packed layout's), op(B)'s panel at b. */
T512 static void panel512(int ta, size_t M, size_t nj, size_t K, const float *a, size_t ra, size_t lda,
                          const float *b, int init, float beta, float *C, size_t ldc)
{
    const int nv = nj > 16 ? 2 : 1;
    const __mmask16 last = (__mmask16)(0xFFFFu >> (16 * (size_t)nv - nj));
    for (size_t i0 = 0; i0 < M; i0 += MR512) {
        const int mr = M - i0 < MR512 ? (int)(M - i0) : MR512;
        const float *ai = a + i0 * ra;
        float *c = C + i0 * ldc;
#define T512_CASE(R)                                                                                        \
    case R:                                                                                                 \
        if (ta)                                                                                             \
            nv > 1 ? tile512(R, 2, 1, K, ai, lda, b, last, init, beta, c, ldc)                              \
                   : tile512(R, 1, 1, K, ai, lda, b, last, init, beta, c, ldc);                             \
        else                                                                                                \
            nv > 1 ? tile512(R, 2, 0, K, ai, lda, b, last, init, beta, c, ldc)                              \
                   : tile512(R, 1, 0, K, ai, lda, b, last, init, beta, c, ldc);                             \
        break;
        switch (mr) {
            T512_CASE(1) T512_CASE(2) T512_CASE(3) T512_CASE(4) T512_CASE(5) T512_CASE(6)
            T512_CASE(7) T512_CASE(8) T512_CASE(9) T512_CASE(10) T512_CASE(11) T512_CASE(12)
        }
#undef T512_CASE
    }
}

/* ---- AVX2 --------------------------------------------------------------------------------------- */

enum { MR256 = 6, NR256 = 16 };

/* The 8 x 8 block v transposed in registers. */
KERNEL T256 void tr8(__m256 v[8])
{
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(v[i], v[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(v[i], v[i + 1]);
    }
    for (int g = 0; g < 8; g += 4) {
        u[g] = _mm256_shuffle_ps(t[g], t[g + 2], 0x44);
        u[g + 1] = _mm256_shuffle_ps(t[g], t[g + 2], 0xEE);
        u[g + 2] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0x44);
        u[g + 3] = _mm256_shuffle_ps(t[g + 1], t[g + 3], 0xEE);
    }
    for (int j = 0; j < 4; j++) {
        v[j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x20);
        v[4 + j] = _mm256_permute2f128_ps(u[j], u[4 + j], 0x31);
    }
}

/* Masks of the first n (<= 8) lanes. */
KERNEL T256 __m256i lanes256(size_t n)
{
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* pack_bt512 for 16-column panels, by 8 x 8 blocks. */
T256 static void pack_bt256(float *pk, const float *B, size_t ldb, size_t j0, size_t nj, size_t k0, size_t kn)
{
    for (size_t g = 0; g < nj; g += 8)
        for (size_t k = 0; k < kn; k += 8) {
            const size_t kk = kn - k < 8 ? kn - k : 8;
            const __m256i km = lanes256(kk);
            __m256 v[8];
#pragma GCC unroll 8
            for (size_t r = 0; r < 8; r++)
                v[r] = g + r < nj ? _mm256_maskload_ps(B + (j0 + g + r) * ldb + k0 + k, km) : _mm256_setzero_ps();
            tr8(v);
            for (size_t c = 0; c < kk; c++)
                _mm256_storeu_ps(pk + (k + c) * NR256 + g, v[c]);
        }
}

/* pack_at512 with blocks of MR256 rows. */
T256 static void pack_at256(float *pa, const float *A, size_t lda, size_t i0, size_t m, size_t k0, size_t kn)
{
    for (size_t k = 0; k < kn; k++)
        for (size_t p = 0; p < m; p += MR256) {
            const __m256i msk = lanes256(m - p < MR256 ? m - p : MR256);
            _mm256_maskstore_ps(pa + p * kn + k * MR256, msk, _mm256_maskload_ps(A + (k0 + k) * lda + i0 + p, msk));
        }
}

/* tile512 with 8 columns per vector; last: the last vector's lanes (all ones or zeros). */
KERNEL T256 void tile256(const int mr, const int nv, const int ta, size_t K, const float *a, size_t lda,
                         const float *b, __m256i last, int init, float beta, float *c, size_t ldc)
{
    __m256 acc[MR256][2];
    const __m256 bt = _mm256_set1_ps(beta);
    const __m256i all = _mm256_set1_epi32(-1);
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
        for (int v = 0; v < 2; v++) {
            acc[r][v] = _mm256_setzero_ps();
            if (v < nv && init != INIT_ZERO) {
                const __m256 x = _mm256_maskload_ps(c + r * ldc + 8 * v, v == nv - 1 ? last : all);
                acc[r][v] = init == INIT_C ? x : _mm256_mul_ps(bt, x);
            }
        }
    for (size_t k = 0; k < K; k++) {
        const float *bk = b + k * NR256;
        const __m256 b0 = _mm256_loadu_ps(bk), b1 = nv > 1 ? _mm256_loadu_ps(bk + 8) : b0;
#pragma GCC unroll 8
        for (int r = 0; r < mr; r++) {
            const __m256 x = _mm256_set1_ps(ta ? a[k * lda + r] : a[r * lda + k]);
            acc[r][0] = _mm256_fmadd_ps(x, b0, acc[r][0]);
            if (nv > 1)
                acc[r][1] = _mm256_fmadd_ps(x, b1, acc[r][1]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < mr; r++)
        for (int v = 0; v < nv; v++)
            _mm256_maskstore_ps(c + r * ldc + 8 * v, v == nv - 1 ? last : all, acc[r][v]);
}

T256 static void panel256(int ta, size_t M, size_t nj, size_t K, const float *a, size_t ra, size_t lda,
                          const float *b, int init, float beta, float *C, size_t ldc)
{
    const int nv = nj > 8 ? 2 : 1;
    const __m256i last = lanes256(nj - 8 * (size_t)(nv - 1));
    for (size_t i0 = 0; i0 < M; i0 += MR256) {
        const int mr = M - i0 < MR256 ? (int)(M - i0) : MR256;
        const float *ai = a + i0 * ra;
        float *c = C + i0 * ldc;
#define T256_CASE(R)                                                                                        \
    case R:                                                                                                 \
        if (ta)                                                                                             \
            nv > 1 ? tile256(R, 2, 1, K, ai, lda, b, last, init, beta, c, ldc)                              \
                   : tile256(R, 1, 1, K, ai, lda, b, last, init, beta, c, ldc);                             \
        else                                                                                                \
            nv > 1 ? tile256(R, 2, 0, K, ai, lda, b, last, init, beta, c, ldc)                              \
                   : tile256(R, 1, 0, K, ai, lda, b, last, init, beta, c, ldc);                             \
        break;
        switch (mr) { T256_CASE(1) T256_CASE(2) T256_CASE(3) T256_CASE(4) T256_CASE(5) T256_CASE(6) }
#undef T256_CASE
    }
}

/* AVX2 as fl_cpu_isa detects it does not imply FMA (every AVX2 CPU made has it; an emulator may not). */
static int cpu_has_fma(void)
{
    static int v = -1; /* benign race: every thread computes the same value */
    int f = __atomic_load_n(&v, __ATOMIC_RELAXED);
    if (f < 0) {
        __builtin_cpu_init();
        f = __builtin_cpu_supports("fma") != 0;
        __atomic_store_n(&v, f, __ATOMIC_RELAXED);
    }
    return f;
}
#endif /* x86-64 */

/* ---- the entry point ---------------------------------------------------------------------------- */

void fl_train_gemm(fl_train_gemm_op ta, fl_train_gemm_op tb, size_t M, size_t N, size_t K, const float *A, size_t lda,
                   const float *B, size_t ldb, float beta, float *C, size_t ldc)
{
    if (!M || !N)
        return;
    const int at = ta == FL_TRAIN_GEMM_T, bt = tb == FL_TRAIN_GEMM_T;
    int isa = fl_convert_isa();
#ifdef GEMM_X86
    if (isa >= FL_ISA_AVX2 && !cpu_has_fma())
        isa = FL_ISA_SCALAR;
    const size_t nr = isa >= FL_ISA_AVX512 ? NR512 : isa >= FL_ISA_AVX2 ? NR256 : NRPLAIN;
#else
    isa = FL_ISA_SCALAR;
    const size_t nr = NRPLAIN;
#endif
    const int first = beta == 0.0f ? INIT_ZERO : INIT_BETA;
    const size_t nk = K > GEMM_KC ? (K + GEMM_KC - 1) / GEMM_KC : 1, kc = (K + nk - 1) / nk; /* balanced runs */
    const size_t ncmax = N < GEMM_NC ? (N + nr - 1) / nr * nr : GEMM_NC;
    const int apk = isa != FL_ISA_SCALAR && lda >= GEMM_FAR;
    const size_t lpa = kc + 16; /* pack_an's row length: rows one line apart in L1's sets */
    float *pb = scratch(kc * ncmax + (apk ? GEMM_MC * lpa : 0) + 1); /* op(B)'s panels, then A's copy */
    if (!pb) { /* no memory for the copies: the plain loops over the operands in place (the same bits) */
        gemm_plain(at, M, N, K, A, lda, B, bt ? 1 : ldb, bt ? ldb : 1, first, beta, C, ldc);
        return;
    }
    float *pa = pb + kc * ncmax;
    for (size_t jc = 0; jc < N; jc += GEMM_NC) {
        const size_t nc = N - jc < GEMM_NC ? N - jc : GEMM_NC;
        for (size_t k0 = 0; k0 < K || k0 == 0; k0 += kc) {
            const size_t kn = K - k0 < kc ? K - k0 : kc;
            const int init = k0 ? INIT_C : first;
            for (size_t j = 0; j < nc; j += nr) { /* op(B)'s run, panel by panel */
                float *pk = pb + j * kn;
                const size_t nj = nc - j < nr ? nc - j : nr;
#ifdef GEMM_X86
                if (bt && isa >= FL_ISA_AVX512)
                    pack_bt512(pk, B, ldb, jc + j, nj, k0, kn);
                else if (bt && isa >= FL_ISA_AVX2)
                    pack_bt256(pk, B, ldb, jc + j, nj, k0, kn);
                else
#endif
                    pack_b(pk, B, ldb, bt, jc + j, nj, nr, k0, kn);
            }
            for (size_t ic = 0; ic < M; ic += GEMM_MC) {
                const size_t mc = M - ic < GEMM_MC ? M - ic : GEMM_MC;
                /* op(A)'s rows ic + i, i < mc, over the run: row block i at a + i ra, stride la */
                const float *a = at ? A + k0 * lda + ic : A + ic * lda + k0;
                size_t ra = at ? 1 : lda, la = lda;
#ifdef GEMM_X86
                if (apk && at) {
                    if (isa >= FL_ISA_AVX512)
                        pack_at512(pa, A, lda, ic, mc, k0, kn);
                    else
                        pack_at256(pa, A, lda, ic, mc, k0, kn);
                    a = pa, ra = kn, la = isa >= FL_ISA_AVX512 ? MR512 : MR256;
                } else if (apk) {
                    pack_an(pa, lpa, A, lda, ic, mc, k0, kn);
                    a = pa, ra = la = lpa;
                }
#else
                (void)pa, (void)ra; /* the plain loops read A in place */
#endif
                for (size_t j = 0; j < nc; j += nr) {
                    const size_t nj = nc - j < nr ? nc - j : nr;
                    const float *pk = pb + j * kn;
                    float *c = C + ic * ldc + jc + j;
#ifdef GEMM_X86
                    if (isa >= FL_ISA_AVX512)
                        panel512(at, mc, nj, kn, a, ra, la, pk, init, beta, c, ldc);
                    else if (isa >= FL_ISA_AVX2)
                        panel256(at, mc, nj, kn, a, ra, la, pk, init, beta, c, ldc);
                    else
#endif
                        gemm_plain(at, mc, nj, kn, a, la, pk, nr, 1, init, beta, c, ldc);
                }
            }
            if (!K)
                break;
        }
    }
}
/* fl_train_gemm_tiled (gemm.h).  Every element is one fixed chain of fused multiply-adds over k
   in ascending order (fl_train_gemm, gemm.h) on every instruction set (FP8LAB_ISA) and thread count,
   so a run gives the same bits on AVX-512, AVX2 and plain-C machines.  A BLAS sums in an order of its
   kernels' choosing: OpenBLAS's SkylakeX and Haswell/Zen kernels gave different runs, and the Haswell
   ones changed with the split over threads.  The output is cut into GEMM_TILES tiles along its longer
   side (a multiple of 64 rows or columns, which the kernels' 32- and 16-column panels divide), each
   tile one single-threaded call over the whole K, and the OpenMP threads share the tiles; where an
   element is computed does not change its bits.  Four tiles keep two threads busy and cost one
   thread little (bench_train, TRAINING.md); tests/test_train_folder.c checks that --threads 1 and 2
   and every FP8LAB_ISA level give the same bits. */
enum { GEMM_TILES = 4, GEMM_ALIGN = 64 };

static size_t tile_side(size_t n)
{
    const size_t t = (n + GEMM_TILES - 1) / GEMM_TILES;
    const size_t a = (t + GEMM_ALIGN - 1) / GEMM_ALIGN * GEMM_ALIGN;
    return a < n ? a : n;
}

/* One tile in blocks of kc terms (kc > 0, K > kc): each block's sum one fma chain from +0 (fl_train_gemm),
   added to the accumulator in block order, the accumulator starting at beta C (the first block's chain
   writes C itself when beta is 0).  The products are the same as the one chain's; only the order of the
   additions differs (--gemm-kchunk). */
static void gemm_kblocks(fl_train_gemm_op oa, fl_train_gemm_op ob, size_t m, size_t n, size_t K, size_t kc,
                         const float *a, size_t lda, const float *b, size_t ldb, float beta, float *c, size_t ldc)
{
    float *t = malloc(m * n * sizeof *t);
    if (!t) {
        fprintf(stderr, "fp8lab: out of memory in a GEMM\n");
        exit(1);
    }
    for (size_t k0 = 0; k0 < K; k0 += kc) {
        const size_t kn = K - k0 < kc ? K - k0 : kc;
        const float *ak = oa == FL_TRAIN_GEMM_N ? a + k0 : a + k0 * lda;
        const float *bk = ob == FL_TRAIN_GEMM_N ? b + k0 * ldb : b + k0;
        if (k0 == 0 && beta == 0.0f) {
            fl_train_gemm(oa, ob, m, n, kn, ak, lda, bk, ldb, 0.0f, c, ldc);
            continue;
        }
        fl_train_gemm(oa, ob, m, n, kn, ak, lda, bk, ldb, 0.0f, t, n);
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < n; j++) {
                float *e = c + i * ldc + j;
                *e = (k0 == 0 ? beta * *e : *e) + t[i * n + j];
            }
    }
    free(t);
}

void fl_train_gemm_tiled(size_t kc, fl_train_gemm_op oa, fl_train_gemm_op ob, size_t M, size_t N, size_t K, const float *A,
                         size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc)
{
    if (!M || !N)
        return;
    const size_t tr = M >= N ? tile_side(M) : M, tcw = M >= N ? N : tile_side(N);
    const size_t nr = (M + tr - 1) / tr, nc = (N + tcw - 1) / tcw;
#pragma omp parallel for schedule(static)
    for (size_t t = 0; t < nr * nc; t++) {
        const size_t i0 = (t / nc) * tr, j0 = (t % nc) * tcw;
        const size_t m = M - i0 < tr ? M - i0 : tr, n = N - j0 < tcw ? N - j0 : tcw;
        const float *a = oa == FL_TRAIN_GEMM_N ? A + i0 * lda : A + i0;
        const float *b = ob == FL_TRAIN_GEMM_N ? B + j0 : B + j0 * ldb;
        if (kc && K > kc)
            gemm_kblocks(oa, ob, m, n, K, kc, a, lda, b, ldb, beta, C + i0 * ldc + j0, ldc);
        else
            fl_train_gemm(oa, ob, m, n, K, a, lda, b, ldb, beta, C + i0 * ldc + j0, ldc);
    }
}

