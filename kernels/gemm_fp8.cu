// gemm_fp8.cu — the cuBLASLt FP8 GEMM wrapper (CPU twin: kernels/gemm_fp8.c; semantics and layout in
// gemm_fp8.h).  One call = descriptors, heuristic, matmul, all checked; descriptors are released on
// every path (RAII).  The GEMM is compute-bound and cuBLASLt's own; nothing here touches the data.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <initializer_list>
#include <stdint.h>
#include <stdio.h>

#include "cuda_check.h"
#include "lt_call.h"
#include "gemm_fp8.h"

#define FL_GEMM_REQUIRE(cond, ...) FL_REQUIRE("fl_cuda_gemm_fp8: ", cond, #cond, __VA_ARGS__)

// The matmul's status; on an error also the problem it refused, so that the message alone reproduces it.
#define FL_GEMM_LT_CHECK(call)                                                                             \
    do {                                                                                                   \
        const cublasStatus_t st_ = (call);                                                                 \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                                                \
            fprintf(stderr, "fl_cuda_gemm_fp8: cublasLtMatmul: %s (%d): M %zu N %zu K %zu, A %s lda %zu, B %s ldb %zu, " \
                            "D %s ldd %zu, C %s, beta %g, alignment A/B/C/D %u/%u/%u/%u bytes, fast_accum %d\n",   \
                    cublasLtGetStatusString(st_), (int)st_, g->m, g->n, g->k, fl_format_name(g->a_fmt), g->lda,  \
                    fl_format_name(g->b_fmt), g->ldb, fl_format_name(g->d_fmt), g->ldd,                       \
                    g->c ? "given" : "none", (double)g->beta, al[0], al[1], al[2], al[3], g->fast_accum);       \
            return -1;                                                                                     \
        }                                                                                                  \
    } while (0)

namespace {


bool cuda_type(cudaDataType_t *t, fl_format f)
{
    switch (f) {
    case FL_FMT_E4M3: *t = CUDA_R_8F_E4M3; return true;
    case FL_FMT_E5M2: *t = CUDA_R_8F_E5M2; return true;
    case FL_FMT_BF16: *t = CUDA_R_16BF; return true;
    case FL_FMT_FP32: *t = CUDA_R_32F; return true;
    default: return false;
    }
}

bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

} // namespace

extern "C" int fl_cuda_gemm_fp8(const fl_gemm_fp8 *g, void *lt_handle, void *workspace, size_t ws_bytes, void *stream)
{
    FL_GEMM_REQUIRE(g && g->a && g->b && g->d, "NULL operand");
    FL_GEMM_REQUIRE(g->m > 0 && g->n > 0 && g->k > 0, "empty shape (%zu, %zu, %zu)", g->m, g->n, g->k);
    FL_GEMM_REQUIRE(g->m <= INT32_MAX && g->n <= INT32_MAX && g->k <= INT32_MAX, "shape beyond int32");
    FL_GEMM_REQUIRE((g->a_fmt == FL_FMT_E4M3 || g->a_fmt == FL_FMT_E5M2) &&
                        (g->b_fmt == FL_FMT_E4M3 || g->b_fmt == FL_FMT_E5M2) &&
                        !(g->a_fmt == FL_FMT_E5M2 && g->b_fmt == FL_FMT_E5M2),
                    "A/B types %d x %d (e4m3 x e4m3, e5m2 x e4m3, e4m3 x e5m2)", (int)g->a_fmt, (int)g->b_fmt);
    FL_GEMM_REQUIRE(g->d_fmt == FL_FMT_FP32 || g->d_fmt == FL_FMT_BF16 || g->d_fmt == FL_FMT_E4M3 ||
                        g->d_fmt == FL_FMT_E5M2,
                    "D type %d", (int)g->d_fmt);
    FL_GEMM_REQUIRE(g->lda >= g->k && g->ldb >= g->k && g->ldd >= g->m, "leading dimensions");
    FL_GEMM_REQUIRE(g->lda % 16 == 0 && g->ldb % 16 == 0, "lda, ldb multiples of 16 (FP8 rows of 16 bytes)");
    FL_GEMM_REQUIRE(aligned16(g->a) && aligned16(g->b) && aligned16(g->d) && (!g->c || aligned16(g->c)),
                    "16-byte aligned A, B, C, D");
    FL_GEMM_REQUIRE(g->beta == 0.0f || (g->c && g->ldc >= g->m), "beta != 0 needs C with ldc >= M");
    // cuBLASLt 13.0 on an H100 answered CUBLAS_STATUS_INVALID_VALUE from the heuristic for AMAX_D or
    // D_SCALE with an fp32 or bf16 D (measured 2026-11-25); both exist for an FP8 D only.
    const bool d_fp8 = g->d_fmt == FL_FMT_E4M3 || g->d_fmt == FL_FMT_E5M2;
    FL_GEMM_REQUIRE(d_fp8 || !g->amax_d, "amax_d needs an FP8 D (cuBLASLt computes amax_D for FP8 outputs only)");

    fl::lt_call lt;
    if (lt_handle) {
        lt.handle = (cublasLtHandle_t)lt_handle;
    } else {
        FL_CUBLAS_CHECK(cublasLtCreate(&lt.handle));
        lt.own_handle = true;
    }
    cudaDataType_t ta = CUDA_R_8F_E4M3, tb = CUDA_R_8F_E4M3, td = CUDA_R_32F, tc; // the formats were checked above
    if (!cuda_type(&ta, g->a_fmt) || !cuda_type(&tb, g->b_fmt) || !cuda_type(&td, g->d_fmt))
        return -1; // (lt's destructor releases its handle)
    tc = g->d_fmt == FL_FMT_FP32 ? CUDA_R_32F : CUDA_R_16BF; // C is bf16 whenever D is bf16 or FP8

    FL_CUBLAS_CHECK(cublasLtMatmulDescCreate(&lt.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t opT = CUBLAS_OP_T, opN = CUBLAS_OP_N; // the TN layout Hopper/Ada FP8 requires
    FL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_TRANSA, &opT, sizeof opT));
    FL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_TRANSB, &opN, sizeof opN));
    if (g->a_scale)
        FL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &g->a_scale, sizeof g->a_scale));
    if (g->b_scale)
        FL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &g->b_scale, sizeof g->b_scale));
    if (g->d_scale && d_fp8)
        FL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_D_SCALE_POINTER, &g->d_scale, sizeof g->d_scale));
    if (g->amax_d)
        FL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, &g->amax_d, sizeof g->amax_d));
    const int8_t fast = g->fast_accum ? 1 : 0;
    FL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));

    // A stored (K, M), B stored (K, N), C/D (M, N), all column-major.
    FL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lt.a, ta, g->k, g->m, (int64_t)g->lda));
    FL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lt.b, tb, g->k, g->n, (int64_t)g->ldb));
    FL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lt.c, tc, g->m, g->n, (int64_t)(g->c ? g->ldc : g->ldd)));
    FL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lt.d, td, g->m, g->n, (int64_t)g->ldd));

    const size_t ws = workspace ? ws_bytes : 0;
    // With beta = 0 C is not read; for an FP8 D, whose C type (bf16) differs from D's, it stays NULL.
    const void *cptr = g->c ? g->c : (tc == td ? g->d : nullptr);
    // the operands' alignment as it is (at least 16: checked above), not cuBLASLt's default of 256
    const size_t db = (size_t)fl_format_get(g->d_fmt)->bits / 8, cb = tc == CUDA_R_32F ? 4 : 2;
    const uint32_t al[4] = { fl::align_of(g->a, g->lda, 0, 1), fl::align_of(g->b, g->ldb, 0, 1),
                             cptr ? fl::align_of(cptr, (g->c ? g->ldc : g->ldd) * cb, 0, 1) : 256u,
                             fl::align_of(g->d, g->ldd * db, 0, 1) };
    cublasLtMatmulHeuristicResult_t heur;
    if (lt.pick(ws, al, &heur, "fl_cuda_gemm_fp8"))
        return -1;
    FL_GEMM_LT_CHECK(cublasLtMatmul(lt.handle, lt.op, &g->alpha, g->a, lt.a, g->b, lt.b, &g->beta, cptr, lt.c, g->d,
                                   lt.d, &heur.algo, workspace, ws, (cudaStream_t)stream));
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}
