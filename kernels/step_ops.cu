// step_ops.cu — what the GPU training step needs beside its kernels (kernels/train_step.h): the
// row-major strided-batched GEMM on cuBLASLt, the gradient norm's fixed-order sum (twin: fl_sumsq in
// kernels/train_step.c), the residual add, relu, and device memory.
#include "train_step.h"
#include "cuda_check.h"
#include "lt_call.h"
#include "row_tile.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

// The per-channel maxima: a thread per (column, block of CHAN_ROWS rows), the largest |x| bit pattern of its
// rows (NaN patterns above Inf's), then atomicMax into the column's slot: the maximum of the maxima, in any
// order.  Three planes (h, g, u) at once; u NULL leaves its slots 0.
constexpr size_t CHAN_ROWS = 256;

__global__ void __launch_bounds__(256) chan_colmax_kernel(unsigned *__restrict__ out, const float *__restrict__ h,
                                                          const float *__restrict__ g, const float *__restrict__ u,
                                                          size_t N, size_t F)
{
    const size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x, r0 = blockIdx.y * CHAN_ROWS;
    if (i >= F)
        return;
    unsigned a = 0, b = 0, c = 0;
    for (size_t n = r0; n < N && n < r0 + CHAN_ROWS; n++) {
        a = max(a, __float_as_uint(h[n * F + i]) & 0x7FFFFFFFu);
        b = max(b, __float_as_uint(g[n * F + i]) & 0x7FFFFFFFu);
        if (u)
            c = max(c, __float_as_uint(u[n * F + i]) & 0x7FFFFFFFu);
    }
    atomicMax(out + i, a);
    atomicMax(out + F + i, b);
    if (u)
        atomicMax(out + 2 * F + i, c);
}

// Byte transpose in 32 x 32 tiles: coalesced reads of src's rows, coalesced writes of dst's rows.
__global__ void __launch_bounds__(256) transpose_u8_kernel(uint8_t *__restrict__ dst, const uint8_t *__restrict__ src,
                                                           size_t R, size_t C)
{
    __shared__ uint8_t tile[32][33];
    const size_t c0 = blockIdx.x * (size_t)32, r0 = blockIdx.y * (size_t)32;
    for (unsigned k = threadIdx.y; k < 32; k += 8) {
        const size_t r = r0 + k, c = c0 + threadIdx.x;
        if (r < R && c < C)
            tile[k][threadIdx.x] = src[r * C + c];
    }
    __syncthreads();
    for (unsigned k = threadIdx.y; k < 32; k += 8) {
        const size_t c = c0 + k, r = r0 + threadIdx.x;
        if (r < R && c < C)
            dst[c * R + r] = tile[threadIdx.x][k];
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

// amax as fl_amax_rms: the largest bit pattern of |x| over the non-NaN elements (no order to keep): a
// warp's maximum, the block's from its warps' through shared memory, then one atomicMax per block into
// *mb, which starts at 0.  AMAX_BLOCKS caps the grid, so that the atomics on one address stay few.
enum { AMAX_BLOCKS = 1024 };
__global__ void __launch_bounds__(256) amax_kernel(unsigned *__restrict__ mb, const float *__restrict__ x, size_t n)
{
    __shared__ unsigned wm[8];
    unsigned m = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const unsigned b = fl_f32_bits(x[i]) & 0x7FFFFFFFu;
        m = b <= 0x7F800000u && b > m ? b : m;
    }
    for (int o = 16; o > 0; o /= 2) {
        const unsigned v = __shfl_down_sync(0xFFFFFFFFu, m, o);
        m = v > m ? v : m;
    }
    if ((threadIdx.x & 31) == 0)
        wm[threadIdx.x / 32] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < 8; w++)
            m = wm[w] > m ? wm[w] : m;
        if (m)
            atomicMax(mb, m);
    }
}

// rms as fl_amax_rms: each row's sum over c in order, then the rows' sums in row order.  A warp takes 32
// rows: tiles of 32 x 32 read coalesced into shared memory, lane j adding row j's values in order
// (row_tile.h, as RMSNorm's forward in train_step.cu).
enum { SQ_WARPS = 8 };
__global__ void __launch_bounds__(SQ_WARPS * 32) row_sq_kernel(double *__restrict__ rs, const float *__restrict__ x,
                                                              size_t R, size_t C)
{
    __shared__ float tile[SQ_WARPS][32][33];
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    const size_t r0 = ((size_t)blockIdx.x * SQ_WARPS + w) * 32;
    if (r0 >= R)
        return;
    const double s = fl_row_sum_tiled(tile[w], x, r0, R, C, lane, 0.0, [](double acc, float v) {
        const double a = (double)fabsf(v);
        return __dadd_rn(acc, __dmul_rn(a, a));
    });
    if (r0 + lane < R)
        rs[r0 + lane] = s;
}

// The rows' sums added in order by one thread, read ahead by the block into shared memory.
__global__ void __launch_bounds__(256) rms_total_kernel(float *__restrict__ out, const double *__restrict__ rs, size_t R,
                                                        size_t n)
{
    __shared__ double buf[256];
    double t = 0.0;
    for (size_t r0 = 0; r0 < R; r0 += 256) {
        buf[threadIdx.x] = r0 + threadIdx.x < R ? rs[r0 + threadIdx.x] : 0.0;
        __syncthreads();
        if (threadIdx.x == 0) {
            const size_t m = R - r0 < 256 ? R - r0 : 256;
            for (size_t j = 0; j < m; j++)
                t = __dadd_rn(t, buf[j]);
        }
        __syncthreads();
    }
    if (threadIdx.x == 0)
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

} // namespace

// Row-major C (M, N) = op(A) op(B) is column-major C^T (N, M) = op(B)^T op(A)^T: cuBLASLt's A is our B
// and its B is our A.  A row-major matrix stored (r, c) with ld is the column-major (c, r) with ld.

// What picks a plan: everything the descriptors and the heuristic see.  Built zeroed (memcmp compares it).
struct rm_key { // no padding bytes (memcmp compares every byte): size_t fields, then 4 uint32
    size_t ta, tb, fmt;
    size_t M, N, K, lda, ldb, ldc, sa, sb, sc, batch, wsb;
    uint32_t al[4];
};
static_assert(sizeof(rm_key) == 14 * sizeof(size_t) + 4 * sizeof(uint32_t), "rm_key has padding");

// One problem's descriptors and the heuristic's algorithm for them.
struct rm_plan {
    rm_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t a, b, c, d;
    cublasLtMatmulAlgo_t algo;
};

enum { RM_PLANS_MAX = 512 };

struct fl_gemm_plans {
    rm_plan v[RM_PLANS_MAX];
    int n;
};

namespace {

// The plan for key k into *pl (descriptors owned by the caller on success), through lt's handle.
int rm_plan_make(rm_plan *pl, const rm_key &k, cublasLtHandle_t handle)
{
    cudaDataType_t t;
    rm_type(&t, (fl_format)(int)k.fmt);
    fl::lt_call lt;
    lt.handle = handle;
    FL_CUBLAS_CHECK(cublasLtMatmulDescCreate(&lt.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t opa = k.tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = k.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    FL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    FL_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(lt.op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    // cuBLASLt's A: our B stored (K, N) [tb 0] or (N, K) [tb 1]; its B: our A stored (M, K) or (K, M)
    if (layout(&lt.a, t, k.tb ? k.K : k.N, k.tb ? k.N : k.K, k.ldb, k.batch, k.sb) ||
        layout(&lt.b, t, k.ta ? k.M : k.K, k.ta ? k.K : k.M, k.lda, k.batch, k.sa) ||
        layout(&lt.c, CUDA_R_32F, k.N, k.M, k.ldc, k.batch, k.sc) ||
        layout(&lt.d, CUDA_R_32F, k.N, k.M, k.ldc, k.batch, k.sc))
        return -1;
    cublasLtMatmulHeuristicResult_t heur;
    if (lt.pick(k.wsb, k.al, &heur, "fl_cuda_gemm_rm"))
        return -1;
    *pl = rm_plan{ k, lt.op, lt.a, lt.b, lt.c, lt.d, heur.algo };
    lt.op = nullptr; // now the plan's
    lt.a = lt.b = lt.c = lt.d = nullptr;
    return 0;
}

void rm_plan_free(rm_plan *pl)
{
    for (cublasLtMatrixLayout_t l : { pl->d, pl->c, pl->b, pl->a })
        if (l)
            cublasLtMatrixLayoutDestroy(l);
    if (pl->op)
        cublasLtMatmulDescDestroy(pl->op);
}

} // namespace

extern "C" int fl_cuda_gemm_rm_cached(const fl_gemm_rm *g, void *plans, void *lt_handle, void *ws, size_t ws_bytes,
                                      void *stream)
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
    rm_key k;
    memset(&k, 0, sizeof k);
    k.ta = g->ta != 0;
    k.tb = g->tb != 0;
    k.fmt = (size_t)g->afmt;
    k.M = g->M, k.N = g->N, k.K = g->K, k.lda = g->lda, k.ldb = g->ldb, k.ldc = g->ldc;
    k.sa = g->sa, k.sb = g->sb, k.sc = g->sc, k.batch = g->batch;
    k.wsb = ws ? ws_bytes : 0;
    // cuBLASLt assumes 256-byte aligned matrices unless told otherwise; the step's views (a head's columns,
    // a plane of the gated FFN) are aligned less
    const size_t es = g->afmt == FL_FMT_BF16 ? 2 : 4;
    k.al[0] = fl::align_of(g->B, g->ldb * es, g->sb * es, g->batch);
    k.al[1] = fl::align_of(g->A, g->lda * es, g->sa * es, g->batch);
    k.al[2] = k.al[3] = fl::align_of(g->C, g->ldc * sizeof(float), g->sc * sizeof(float), g->batch);
    fl_gemm_plans *ps = (fl_gemm_plans *)plans;
    rm_plan one = {}, *pl = nullptr;
    for (int i = 0; ps && i < ps->n && !pl; i++)
        if (!memcmp(&ps->v[i].key, &k, sizeof k))
            pl = &ps->v[i];
    const bool keep = !pl && ps && ps->n < RM_PLANS_MAX; // a full cache plans each further problem anew
    if (!pl) {
        pl = keep ? &ps->v[ps->n] : &one;
        if (rm_plan_make(pl, k, (cublasLtHandle_t)lt_handle))
            return -1;
        if (keep)
            ps->n++;
    }
    const float alpha = 1.0f;
    const cublasStatus_t st = cublasLtMatmul((cublasLtHandle_t)lt_handle, pl->op, &alpha, g->B, pl->a, g->A, pl->b,
                                             &g->beta, g->C, pl->c, g->C, pl->d, &pl->algo, ws, k.wsb,
                                             (cudaStream_t)stream);
    if (pl == &one)
        rm_plan_free(&one);
    if (st != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "fl_cuda_gemm_rm: cublasLtMatmul: %s\n", cublasLtGetStatusString(st));
        return -1;
    }
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int fl_cuda_gemm_rm(const fl_gemm_rm *g, void *lt_handle, void *ws, size_t ws_bytes, void *stream)
{
    return fl_cuda_gemm_rm_cached(g, nullptr, lt_handle, ws, ws_bytes, stream);
}

extern "C" void *fl_cuda_gemm_plans_new(void) { return calloc(1, sizeof(fl_gemm_plans)); }

extern "C" int fl_cuda_gemm_plans_count(const void *plans) { return plans ? ((const fl_gemm_plans *)plans)->n : 0; }

extern "C" void fl_cuda_gemm_plans_free(void *plans)
{
    fl_gemm_plans *ps = (fl_gemm_plans *)plans;
    for (int i = 0; ps && i < ps->n; i++)
        rm_plan_free(&ps->v[i]);
    free(ps);
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
    if (R != 0 && C != 0) {
        const unsigned blocks = fl_step_grid(R * C) < (unsigned)AMAX_BLOCKS ? fl_step_grid(R * C) : (unsigned)AMAX_BLOCKS;
        amax_kernel<<<blocks, 256, 0, st>>>(mb, x, R * C);
    }
    FL_CUDA_CHECK(cudaGetLastError());
    float *dr = (float *)(mb + 1);
    if (rms) {
        if (R)
            row_sq_kernel<<<(unsigned)((R + SQ_WARPS * 32 - 1) / (SQ_WARPS * 32)), SQ_WARPS * 32, 0, st>>>(ws, x, R, C);
        rms_total_kernel<<<1, 256, 0, st>>>(dr, ws, R, R * C);
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

extern "C" int fl_cuda_chan_colmax(float *am, float *gm, float *um, const float *h, const float *g, const float *u,
                                   size_t N, size_t F, unsigned *ws, void *stream)
{
    if (!F)
        return 0;
    const cudaStream_t st = (cudaStream_t)stream;
    FL_CUDA_CHECK(cudaMemsetAsync(ws, 0, 3 * F * sizeof *ws, st));
    const size_t yb = (N + CHAN_ROWS - 1) / CHAN_ROWS;
    FL_REQUIRE("fl_cuda_chan_colmax: ", yb <= 65535, "yb <= 65535", "%zu rows: at most %zu", N, (size_t)65535 * CHAN_ROWS);
    if (N) {
        const dim3 grid((unsigned)((F + 255) / 256), (unsigned)yb);
        chan_colmax_kernel<<<grid, 256, 0, st>>>(ws, h, g, u, N, F);
        FL_CUDA_CHECK(cudaGetLastError());
    }
    float *dst[3] = { am, gm, um };
    for (int k = 0; k < 3; k++)
        FL_CUDA_CHECK(cudaMemcpyAsync(dst[k], ws + k * F, F * sizeof *ws, cudaMemcpyDeviceToHost, st));
    FL_CUDA_CHECK(cudaStreamSynchronize(st));
    return 0;
}

extern "C" int fl_cuda_transpose_u8(uint8_t *dst, const uint8_t *src, size_t R, size_t C, void *stream)
{
    if (!R || !C)
        return 0;
    FL_REQUIRE("fl_cuda_transpose_u8: ", (R + 31) / 32 <= 65535, "(R + 31) / 32 <= 65535", "%zu rows", R);
    const dim3 grid((unsigned)((C + 31) / 32), (unsigned)((R + 31) / 32)), block(32, 8);
    transpose_u8_kernel<<<grid, block, 0, (cudaStream_t)stream>>>(dst, src, R, C);
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

extern "C" int fl_cuda_dev_sync(void)
{
    FL_CUDA_CHECK(cudaDeviceSynchronize());
    return 0;
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

extern "C" int fl_cuda_dev_copy(void *dst, const void *src, size_t bytes)
{
    FL_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
    return 0;
}

extern "C" int fl_cuda_dev_zero(void *p, size_t bytes)
{
    FL_CUDA_CHECK(cudaMemset(p, 0, bytes));
    return 0;
}
