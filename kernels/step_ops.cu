// step_ops.cu — what the GPU training step needs beside its kernels (kernels/train_step.h): the
// row-major strided-batched GEMM on cuBLASLt, the gradient norm's fixed-order sum (twin: fl_sumsq in
// kernels/train_step.c), the residual add, relu, and device memory.
#include "train_step.h"
#include "cuda_check.h"
#include "lt_call.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define FL_RM_REQUIRE(cond, ...) FL_REQUIRE("fl_cuda_gemm_rm: ", cond, #cond, __VA_ARGS__)

namespace {

__global__ void __launch_bounds__(256) add_kernel(float *__restrict__ y, const float *__restrict__ x, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = y[i] + x[i];
}

__global__ void __launch_bounds__(256) relu_fwd_kernel(float *__restrict__ h, const float *__restrict__ x, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        h[i] = fl_relu_f32(x[i]);
}

__global__ void __launch_bounds__(256) relu_bwd_kernel(float *__restrict__ dx, const float *__restrict__ x,
                                                       const float *__restrict__ dy, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dx[i] = x[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void __launch_bounds__(256) swiglu_f32_fwd_kernel(float *__restrict__ h, const float *__restrict__ g,
                                                             const float *__restrict__ u, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        h[i] = fl_swiglu_f32(g[i], u[i]);
}

__global__ void __launch_bounds__(256) swiglu_f32_bwd_kernel(float *__restrict__ dg, float *__restrict__ du,
                                                             const float *__restrict__ g, const float *__restrict__ u,
                                                             const float *__restrict__ dh, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float a, b;
        fl_swiglu_grad_f32(&a, &b, g[i], u[i], dh[i]);
        dg[i] = a;
        du[i] = b;
    }
}

// One block of FL_SUMSQ_LANES threads per chunk: lane t's sequential sum, then the pairwise tree of
// fl_sumsq (train_step.h) in shared memory.
__global__ void __launch_bounds__(FL_SUMSQ_LANES) sumsq_chunk_kernel(double *__restrict__ part,
                                                                    const float *__restrict__ x, size_t n)
{
    __shared__ double lane[FL_SUMSQ_LANES];
    const size_t c0 = (size_t)blockIdx.x * FL_SUMSQ_CHUNK, c1 = n - c0 < FL_SUMSQ_CHUNK ? n : c0 + FL_SUMSQ_CHUNK;
    double a = 0.0;
    for (size_t i = c0 + threadIdx.x; i < c1; i += FL_SUMSQ_LANES)
        a = __dadd_rn(a, __dmul_rn((double)x[i], (double)x[i]));
    lane[threadIdx.x] = a;
    __syncthreads();
    for (unsigned s = FL_SUMSQ_LANES / 2; s > 0; s /= 2) {
        if (threadIdx.x < s)
            lane[threadIdx.x] = __dadd_rn(lane[threadIdx.x], lane[threadIdx.x + s]);
        __syncthreads();
    }
    if (threadIdx.x == 0)
        part[blockIdx.x] = lane[0];
}

__global__ void sumsq_total_kernel(double *__restrict__ part, size_t chunks)
{
    double t = 0.0;
    for (size_t c = 0; c < chunks; c++)
        t = __dadd_rn(t, part[c]);
    part[0] = t;
}

// amax as fl_amax_rms: the largest bit pattern of |x| over the non-NaN elements (a warp's maximum, then
// one atomicMax per warp into *mb, which starts at 0).
__global__ void __launch_bounds__(256) amax_kernel(unsigned *__restrict__ mb, const float *__restrict__ x, size_t n)
{
    unsigned m = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const unsigned b = fl_f32_bits(x[i]) & 0x7FFFFFFFu;
        m = b <= 0x7F800000u && b > m ? b : m;
    }
    for (int o = 16; o > 0; o /= 2) {
        const unsigned v = __shfl_down_sync(0xFFFFFFFFu, m, o);
        m = v > m ? v : m;
    }
    if ((threadIdx.x & 31) == 0 && m)
        atomicMax(mb, m);
}

// rms as fl_amax_rms: a thread per row, its sum over c in order; then one thread adds the rows in order.
__global__ void __launch_bounds__(256) row_sq_kernel(double *__restrict__ rs, const float *__restrict__ x, size_t R,
                                                     size_t C)
{
    for (size_t r = blockIdx.x * (size_t)blockDim.x + threadIdx.x; r < R; r += (size_t)gridDim.x * blockDim.x) {
        double s = 0.0;
        for (size_t c = 0; c < C; c++) {
            const double a = (double)fabsf(x[r * C + c]);
            s = __dadd_rn(s, __dmul_rn(a, a));
        }
        rs[r] = s;
    }
}

__global__ void rms_total_kernel(float *__restrict__ out, const double *__restrict__ rs, size_t R, size_t n)
{
    double t = 0.0;
    for (size_t r = 0; r < R; r++)
        t = __dadd_rn(t, rs[r]);
    *out = (float)__dsqrt_rn(__ddiv_rn(t, (double)(n > 0 ? n : 1)));
}

bool rm_type(cudaDataType_t *t, fl_format f)
{
    if (f == FL_FMT_FP32)
        *t = CUDA_R_32F;
    else if (f == FL_FMT_BF16)
        *t = CUDA_R_16BF;
    else
        return false;
    return true;
}

// A matrix layout with its batch: rows x cols column-major with ld, `batch` of them `stride` apart.
int layout(cublasLtMatrixLayout_t *l, cudaDataType_t t, size_t rows, size_t cols, size_t ld, size_t batch,
           size_t stride)
{
    FL_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(l, t, rows, cols, (int64_t)ld));
    const int32_t bc = (int32_t)batch;
    const int64_t st = (int64_t)stride;
    FL_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc));
    FL_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &st, sizeof st));
    return 0;
}

// The alignment cuBLASLt may assume for a matrix: the largest power of two up to 256 dividing its address,
// its leading dimension in bytes (every column starts at such an offset) and, with more than one problem,
// its batch stride in bytes.
uint32_t align_of(const void *p, size_t ld_bytes, size_t stride_bytes, size_t batch)
{
    uintptr_t a = (uintptr_t)p | 256u | (uintptr_t)ld_bytes;
    if (batch > 1)
        a |= (uintptr_t)stride_bytes;
    return (uint32_t)(a & (~a + 1)); // the lowest set bit
}

} // namespace

// Row-major C (M, N) = op(A) op(B) is column-major C^T (N, M) = op(B)^T op(A)^T: cuBLASLt's A is our B
// and its B is our A.  A row-major matrix stored (r, c) with ld is the column-major (c, r) with ld.
extern "C" int fl_cuda_gemm_rm(const fl_gemm_rm *g, void *lt_handle, void *ws, size_t ws_bytes, void *stream)
{
    FL_RM_REQUIRE(g && g->A && g->B && g->C && lt_handle, "NULL operand or handle");
    if (!g->M || !g->N || !g->batch)
        return 0;
    FL_RM_REQUIRE(g->M <= INT32_MAX && g->N <= INT32_MAX && g->K <= INT32_MAX && g->batch <= INT32_MAX,
                  "shape beyond int32");
    cudaDataType_t ta, tb;
    FL_RM_REQUIRE(g->afmt == g->bfmt && rm_type(&ta, g->afmt) && rm_type(&tb, g->bfmt),
                  "A and B both fp32 or both bf16 (got %d, %d)", (int)g->afmt, (int)g->bfmt);
    FL_RM_REQUIRE(g->lda >= (g->ta ? g->M : g->K) && g->ldb >= (g->tb ? g->K : g->N) && g->ldc >= g->N,
                  "leading dimensions");
    fl::lt_call lt;
    lt.handle = (cublasLtHandle_t)lt_handle;
    FL_CUBLAS_CHECK(cublasLtMatmulDescCreate(&lt.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t opa = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    FL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    FL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    // cuBLASLt's A: our B stored (K, N) [tb 0] or (N, K) [tb 1]; its B: our A stored (M, K) or (K, M)
    if (layout(&lt.a, tb, g->tb ? g->K : g->N, g->tb ? g->N : g->K, g->ldb, g->batch, g->sb) ||
        layout(&lt.b, ta, g->ta ? g->M : g->K, g->ta ? g->K : g->M, g->lda, g->batch, g->sa) ||
        layout(&lt.c, CUDA_R_32F, g->N, g->M, g->ldc, g->batch, g->sc) ||
        layout(&lt.d, CUDA_R_32F, g->N, g->M, g->ldc, g->batch, g->sc))
        return -1;
    const size_t wsb = ws ? ws_bytes : 0;
    // cuBLASLt assumes 256-byte aligned matrices unless told otherwise; the step's views (a head's columns,
    // a plane of the gated FFN) are aligned less
    const size_t es = g->afmt == FL_FMT_BF16 ? 2 : 4;
    const uint32_t al[4] = { align_of(g->B, g->ldb * es, g->sb * es, g->batch),
                             align_of(g->A, g->lda * es, g->sa * es, g->batch),
                             align_of(g->C, g->ldc * sizeof(float), g->sc * sizeof(float), g->batch),
                             align_of(g->C, g->ldc * sizeof(float), g->sc * sizeof(float), g->batch) };
    cublasLtMatmulHeuristicResult_t heur;
    if (lt.pick(wsb, al, &heur, "fl_cuda_gemm_rm"))
        return -1;
    const float alpha = 1.0f;
    FL_CUBLAS_CHECK(cublasLtMatmul(lt.handle, lt.op, &alpha, g->B, lt.a, g->A, lt.b, &g->beta, g->C, lt.c, g->C, lt.d,
                                   &heur.algo, ws, wsb, (cudaStream_t)stream));
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" void *fl_cuda_lt_new(void)
{
    cublasLtHandle_t h = nullptr;
    const cublasStatus_t st = cublasLtCreate(&h);
    if (st != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "fl_cuda_lt_new: cublasLtCreate: %s\n", cublasLtGetStatusString(st));
        return nullptr;
    }
    return h;
}

extern "C" void fl_cuda_lt_free(void *lt)
{
    if (lt)
        cublasLtDestroy((cublasLtHandle_t)lt);
}

extern "C" int fl_cuda_sumsq(double *out, const float *x, size_t n, double *ws, void *stream)
{
    *out = 0.0;
    const size_t chunks = fl_sumsq_chunks(n);
    if (!chunks)
        return 0;
    if (!x || !ws || chunks > 0x7FFFFFFFu) {
        fprintf(stderr, "fl_cuda_sumsq: a NULL pointer or too many elements (%zu)\n", n);
        return -1;
    }
    sumsq_chunk_kernel<<<(unsigned)chunks, FL_SUMSQ_LANES, 0, (cudaStream_t)stream>>>(ws, x, n);
    FL_CUDA_CHECK(cudaGetLastError());
    sumsq_total_kernel<<<1, 1, 0, (cudaStream_t)stream>>>(ws, chunks);
    FL_CUDA_CHECK(cudaGetLastError());
    FL_CUDA_CHECK(cudaMemcpyAsync(out, ws, sizeof *out, cudaMemcpyDeviceToHost, (cudaStream_t)stream));
    FL_CUDA_CHECK(cudaStreamSynchronize((cudaStream_t)stream));
    return 0;
}

extern "C" int fl_cuda_amax_rms(float *amax, float *rms, const float *x, size_t R, size_t C, double *ws, void *stream)
{
    if (!x || !ws || !amax) {
        fprintf(stderr, "fl_cuda_amax_rms: a NULL pointer\n");
        return -1;
    }
    const cudaStream_t st = (cudaStream_t)stream;
    unsigned *mb = (unsigned *)(ws + R); // after the row sums
    FL_CUDA_CHECK(cudaMemsetAsync(mb, 0, sizeof *mb, st));
    if (R * C)
        amax_kernel<<<fl_step_grid(R * C), 256, 0, st>>>(mb, x, R * C);
    FL_CUDA_CHECK(cudaGetLastError());
    float *dr = (float *)(mb + 1);
    if (rms) {
        if (R)
            row_sq_kernel<<<fl_step_grid(R), 256, 0, st>>>(ws, x, R, C);
        rms_total_kernel<<<1, 1, 0, st>>>(dr, ws, R, R * C);
        FL_CUDA_CHECK(cudaGetLastError());
    }
    unsigned back[2];
    FL_CUDA_CHECK(cudaMemcpyAsync(back, mb, rms ? 2 * sizeof *back : sizeof *back, cudaMemcpyDeviceToHost, st));
    FL_CUDA_CHECK(cudaStreamSynchronize(st));
    *amax = fl_f32_from_bits(back[0]);
    if (rms)
        memcpy(rms, &back[1], sizeof *rms);
    return 0;
}

extern "C" int fl_cuda_add_f32(float *y, const float *x, size_t n, void *stream)
{
    if (!n)
        return 0;
    add_kernel<<<fl_step_grid(n), 256, 0, (cudaStream_t)stream>>>(y, x, n);
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int fl_cuda_relu_fwd(float *h, const float *x, size_t n, void *stream)
{
    if (!n)
        return 0;
    relu_fwd_kernel<<<fl_step_grid(n), 256, 0, (cudaStream_t)stream>>>(h, x, n);
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int fl_cuda_swiglu_f32_fwd(float *h, const float *g, const float *u, size_t n, void *stream)
{
    if (!n)
        return 0;
    swiglu_f32_fwd_kernel<<<fl_step_grid(n), 256, 0, (cudaStream_t)stream>>>(h, g, u, n);
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int fl_cuda_swiglu_f32_bwd(float *dg, float *du, const float *g, const float *u, const float *dh, size_t n,
                                      void *stream)
{
    if (!n)
        return 0;
    swiglu_f32_bwd_kernel<<<fl_step_grid(n), 256, 0, (cudaStream_t)stream>>>(dg, du, g, u, dh, n);
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int fl_cuda_relu_bwd(float *dx, const float *x, const float *dy, size_t n, void *stream)
{
    if (!n)
        return 0;
    relu_bwd_kernel<<<fl_step_grid(n), 256, 0, (cudaStream_t)stream>>>(dx, x, dy, n);
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int fl_cuda_device_count(void)
{
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

extern "C" void *fl_cuda_dev_alloc(size_t bytes)
{
    void *p = nullptr;
    cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
    if (e == cudaSuccess)
        e = cudaMemset(p, 0, bytes ? bytes : 1);
    if (e != cudaSuccess) {
        fprintf(stderr, "fl_cuda_dev_alloc: %zu bytes: %s\n", bytes, cudaGetErrorString(e));
        if (p)
            cudaFree(p);
        return nullptr;
    }
    return p;
}

extern "C" void fl_cuda_dev_free(void *p) { cudaFree(p); }

extern "C" int fl_cuda_dev_put(void *dst, const void *src, size_t bytes)
{
    FL_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    return 0;
}

extern "C" int fl_cuda_dev_get(void *dst, const void *src, size_t bytes)
{
    FL_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
    return 0;
}

extern "C" int fl_cuda_dev_zero(void *p, size_t bytes)
{
    FL_CUDA_CHECK(cudaMemset(p, 0, bytes));
    return 0;
}
