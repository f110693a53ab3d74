// train_step.cu — the training-step kernels (CPU twins: kernels/train_step.c; element functions and
// their contract: kernels/train_step.h).
//
// RMSNorm: see the kernels' comment below.
// Softmax cross-entropy: a warp per row (below).
// FP8 cast: one element per thread iteration through fl_cast_elem (numerics/cast_elem.h); 4 bytes read,
// 1 written per element, counts and amax by warp reductions and atomics.
// GELU: one element per thread, fl_gelu_f32 / fl_gelu_grad_f32 (kernels/erff.h) with fl_expf_glibc.
// AdamW: one thread per element in a grid-stride loop, each element through the same two element
// functions as the twin; 16 bytes read and 12 written per element (p, g, m, v in; p, m, v out).
#include "train_step.h"
#include "cuda_check.h"
#include "erff.h"
#include "row_tile.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

namespace {

__global__ void __launch_bounds__(256) adamw_kernel(float *__restrict__ p, const float *__restrict__ g,
                                                    float *__restrict__ m, float *__restrict__ v, size_t n,
                                                    fl_adamw_hp h)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float mi = m[i], vi = v[i], mh;
        const float sv = fl_adamw_moments(&mi, &vi, g[i], &h, &mh);
        p[i] = fl_adamw_param(p[i], mh, fl_sqrtf(sv), &h);
        m[i] = mi;
        v[i] = vi;
    }
}

// RMSNorm, in two launches each way.  The row sums: a warp per 32 rows stages 32 x 32 tiles (32 rows, 32
// channels) in shared memory with coalesced loads; lane j then adds row j's 32 values to its sum in
// channel order, so each row's sum runs over c = 0, 1, ..., as the twin's.  The outputs: an element
// kernel over every row and channel (rms_rows_kernel below), which has the whole device's parallelism;
// writing them from the sums' warps (N / 32 warps in all, a load's latency per element) was the slow part.
constexpr int RMS_WARPS = 4; // the backward's two tiles: 4 x 2 x 32 x 33 floats = 33.8 KB of shared memory

__global__ void __launch_bounds__(RMS_WARPS * 32) rms_fwd_sums_kernel(float *__restrict__ rstd,
                                                                        const float *__restrict__ x, size_t N,
                                                                        size_t C, float eps)
{
    __shared__ float tile[RMS_WARPS][32][33];
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    const size_t r0 = ((size_t)blockIdx.x * RMS_WARPS + w) * 32;
    if (r0 >= N)
        return;
    const float ss = fl_row_sum_tiled(tile[w], x, r0, N, C, lane, 0.0f, [](float s, float v) { return s + v * v; });
    if (r0 + lane < N)
        rstd[r0 + lane] = fl_rms_r(ss, (float)C, eps);
}

// The backward's row sums d = sum_c (dy_c g_c) x_c, and k = fl_rms_k(r, d, C) into k[row].
__global__ void __launch_bounds__(RMS_WARPS * 32) rms_bwd_sums_kernel(float *__restrict__ k,
                                                                        const float *__restrict__ dy,
                                                                        const float *__restrict__ x,
                                                                        const float *__restrict__ rstd,
                                                                        const float *__restrict__ gain, size_t N,
                                                                        size_t C)
{
    __shared__ float tdy[RMS_WARPS][32][33], tx[RMS_WARPS][32][33];
    __shared__ float tg[RMS_WARPS][32];
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    const size_t r0 = ((size_t)blockIdx.x * RMS_WARPS + w) * 32;
    if (r0 >= N)
        return;
    float d = 0.0f;
    for (size_t c0 = 0; c0 < C; c0 += 32) {
        for (int j = 0; j < 32; j++) {
            const int ok = r0 + j < N && c0 + lane < C;
            tdy[w][j][lane] = ok ? dy[(r0 + j) * C + c0 + lane] : 0.0f;
            tx[w][j][lane] = ok ? x[(r0 + j) * C + c0 + lane] : 0.0f;
        }
        tg[w][lane] = c0 + lane < C ? gain[c0 + lane] : 0.0f;
        __syncwarp();
        for (int c = 0; c < 32 && c0 + c < C; c++)
            d += tdy[w][lane][c] * tg[w][c] * tx[w][lane][c];
        __syncwarp();
    }
    if (r0 + lane < N)
        k[r0 + lane] = fl_rms_k(rstd[r0 + lane], d, (float)C);
}

// The outputs, element by element: rows by blockIdx.y (grid-stride), V consecutive channels per thread
// (V = 4: 16-byte loads and stores, where C % 4 == 0 and every pointer is 16-byte aligned).
//   forward  (k == NULL): y = fl_rms_y(x, r, g)
//   backward (k != NULL): dx = fl_rms_dx(r, dy, g, k, x), added to dx under accumulate
template <int V>
__global__ void __launch_bounds__(256) rms_rows_kernel(float *__restrict__ out, const float *__restrict__ dy,
                                                       const float *__restrict__ x, const float *__restrict__ rstd,
                                                       const float *__restrict__ k, const float *__restrict__ gain,
                                                       size_t N, size_t C, int accumulate)
{
    const size_t cv = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) * V;
    if (cv >= C)
        return;
    float g[V];
    for (int e = 0; e < V; e++)
        g[e] = gain[cv + e];
    for (size_t row = blockIdx.y; row < N; row += gridDim.y) {
        const size_t i = row * C + cv;
        const float r = rstd[row];
        float xv[V], o[V];
        if (V == 4)
            *(float4 *)xv = *(const float4 *)(x + i);
        else
            xv[0] = x[i];
        if (!k) {
            for (int e = 0; e < V; e++)
                o[e] = fl_rms_y(xv[e], r, g[e]);
        } else {
            const float kr = k[row];
            float dv[V], prev[V];
            if (V == 4) {
                *(float4 *)dv = *(const float4 *)(dy + i);
                if (accumulate)
                    *(float4 *)prev = *(const float4 *)(out + i);
            } else {
                dv[0] = dy[i];
                if (accumulate)
                    prev[0] = out[i];
            }
            for (int e = 0; e < V; e++) {
                const float v = fl_rms_dx(r, dv[e], g[e], kr, xv[e]);
                o[e] = accumulate ? prev[e] + v : v;
            }
        }
        if (V == 4)
            *(float4 *)(out + i) = *(const float4 *)o;
        else
            out[i] = o[0];
    }
}

// One launch of rms_rows_kernel: blocks of up to 256 threads across a row's C / V groups, and rows on
// blockIdx.y (at most 65535; more rows are taken grid-stride).
int launch_rms_rows(float *out, const float *dy, const float *x, const float *rstd, const float *k, const float *gain,
                    size_t N, size_t C, int accumulate, cudaStream_t st)
{
    const uintptr_t al = (uintptr_t)out | (uintptr_t)x | (uintptr_t)gain | (uintptr_t)(dy ? dy : x);
    const int v4 = C % 4 == 0 && al % 16 == 0;
    const size_t groups = v4 ? C / 4 : C;
    const size_t threads = groups < 256 ? (groups + 31) / 32 * 32 : 256;
    const size_t bx = (groups + threads - 1) / threads;
    if (bx > 0x7FFFFFFFu) {
        fprintf(stderr, "RMSNorm: %zu channels is too many\n", C);
        return -1;
    }
    const dim3 grid((unsigned)bx, (unsigned)(N < 65535 ? N : 65535));
    if (v4)
        rms_rows_kernel<4><<<grid, (unsigned)threads, 0, st>>>(out, dy, x, rstd, k, gain, N, C, accumulate);
    else
        rms_rows_kernel<1><<<grid, (unsigned)threads, 0, st>>>(out, dy, x, rstd, k, gain, N, C, accumulate);
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}

// The head layout copy (fl_heads_copy): a block per token row (grid-stride over rows), its threads over the
// row's H hs values: coalesced on the token-major side, runs of hs floats on the other.
__global__ void __launch_bounds__(256) heads_copy_kernel(float *__restrict__ dst, const float *__restrict__ src,
                                                         size_t BT, size_t T, unsigned H, unsigned hs, size_t ld,
                                                         int to_heads)
{
    for (size_t r = blockIdx.x; r < BT; r += gridDim.x) {
        const size_t b = r / T, t = r % T;
        for (unsigned c = threadIdx.x; c < H * hs; c += blockDim.x) {
            const unsigned h = c / hs, d = c % hs;
            const size_t hi = ((b * H + h) * T + t) * hs + d, ti = r * ld + c;
            if (to_heads)
                dst[hi] = src[ti];
            else
                dst[ti] = src[hi];
        }
    }
}

// The FFN weights' sums (fl_ffn_wsums): a warp per 32 rows, as the RMSNorm sums: 32 x 32 tiles of the gate
// rows and of the up rows in shared memory, lane j adding row j's products in channel order in double.
__global__ void __launch_bounds__(RMS_WARPS * 32) ffn_wsums_kernel(double *__restrict__ out,
                                                                     const float *__restrict__ W, size_t R, size_t F,
                                                                     size_t C, int gated)
{
    __shared__ float tg[RMS_WARPS][32][33], tu[RMS_WARPS][32][33];
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    const size_t r0 = ((size_t)blockIdx.x * RMS_WARPS + w) * 32, G = gated ? 2 : 1;
    if (r0 >= R)
        return;
    const size_t rl = r0 + lane < R ? r0 + lane : r0;
    const unsigned long long own = ((rl / F) * G * F + rl % F) * C; // lane's row: its gate row's offset
    double gg = 0.0, uu = 0.0, gu = 0.0;
    for (size_t c0 = 0; c0 < C; c0 += 32) {
        for (int j = 0; j < 32; j++) {
            const size_t o = (size_t)__shfl_sync(0xFFFFFFFFu, own, j) + c0 + lane;
            const int ok = r0 + j < R && c0 + lane < C;
            tg[w][j][lane] = ok ? W[o] : 0.0f;
            tu[w][j][lane] = ok && gated ? W[o + F * C] : 0.0f;
        }
        __syncwarp();
        for (int c = 0; c < 32 && c0 + c < C; c++) {
            const double a = tg[w][lane][c], b = tu[w][lane][c];
            gg += a * a;
            uu += b * b;
            gu += a * b;
        }
        __syncwarp();
    }
    if (r0 + lane < R) {
        out[3 * (r0 + lane)] = gg;
        out[3 * (r0 + lane) + 1] = gated ? uu : 0.0;
        out[3 * (r0 + lane) + 2] = gated ? gu : 0.0;
    }
}

// The gain's gradient: channel c's terms dy x rstd added over the rows in order, as the twin.  A block takes
// 32 channels: its 8 warps read tiles of DG_ROWS rows (coalesced across the channels) into shared memory,
// each term computed as the twin computes it, and warp 0's lane j adds channel j's terms in row order.
enum { DG_ROWS = 256 };
__global__ void __launch_bounds__(256) rms_dgain_kernel(float *__restrict__ dgain, const float *__restrict__ dy,
                                                        const float *__restrict__ x, const float *__restrict__ rstd,
                                                        size_t N, size_t C)
{
    __shared__ float tile[DG_ROWS][33];
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    const size_t c = blockIdx.x * (size_t)32 + lane;
    float s = 0.0f;
    for (size_t t0 = 0; t0 < N; t0 += DG_ROWS) {
        for (int j = w; j < DG_ROWS; j += 8) {
            const size_t t = t0 + j;
            tile[j][lane] = t < N && c < C ? dy[t * C + c] * x[t * C + c] * rstd[t] : 0.0f;
        }
        __syncthreads();
        if (w == 0) {
            const size_t m = N - t0 < DG_ROWS ? N - t0 : DG_ROWS;
            for (size_t j = 0; j < m; j++)
                s += tile[j][lane];
        }
        __syncthreads();
    }
    if (w == 0 && c < C)
        dgain[c] += s;
}

// The FP8 cast: a grid-stride loop over at most CAST_BLOCKS blocks, each element through fl_cast_elem as
// in the twin; the counts and the amax are integers and a maximum, summed per block and added with one
// atomic each per block (no order to keep).
enum { CAST_BLOCKS = 1024 };

template <bool FQ>
__global__ void __launch_bounds__(256) cast_fp8_kernel(uint8_t *__restrict__ codes, float *__restrict__ y,
                                                       unsigned *__restrict__ amax_bits,
                                                       unsigned long long *__restrict__ counts,
                                                       const float *__restrict__ x, size_t n, float s, float si,
                                                       fl_cast_limits l, int sr, uint64_t key, uint64_t off,
                                                       fl_cast_smooth sm, int smooth)
{
    unsigned c[6] = { 0, 0, 0, 0, 0, 0 }, am = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t fl;
        const float xi = smooth ? fl_smooth_in(&sm, x[i], i) : x[i];
        const uint32_t code = fl_cast_elem(&l.d, xi, xi * s, sr, sr ? fl_sr_bits(key, off + i) : 0u, l.ovf, l.fmax,
                                           l.bound, l.ties_ovf, &fl);
        if (FQ)
            y[i] = smooth ? fl_smooth_out(&sm, fl_decode_f32(&l.d, code) * si, i) : fl_decode_f32(&l.d, code) * si;
        else
            codes[i] = (uint8_t)code;
        c[0] += (fl & FL_CE_SAT) != 0;
        c[1] += (fl & FL_CE_CLIP) != 0;
        c[2] += (fl & FL_CE_NAN_OUT) != 0;
        c[3] += (fl & FL_CE_INF_OUT) != 0;
        c[4] += (fl & FL_CE_NAN_IN) != 0;
        c[5] += (fl & FL_CE_FTZ) != 0;
        const unsigned a = __float_as_uint(xi) & 0x7FFFFFFFu;
        if (!(fl & FL_CE_NAN_IN) && a > am)
            am = a;
    }
    // the block's counts and amax (warps, then the block's 8 warps through shared memory), then one
    // atomic each per block: with the grid capped at CAST_BLOCKS, few atomics on the 7 addresses
    __shared__ unsigned wc[8][7];
    const int w = threadIdx.x / 32;
    for (int k = 0; k < 6; k++) {
        const unsigned v = __reduce_add_sync(0xFFFFFFFFu, c[k]);
        if (threadIdx.x % 32 == 0)
            wc[w][k] = v;
    }
    const unsigned m = __reduce_max_sync(0xFFFFFFFFu, am);
    if (threadIdx.x % 32 == 0)
        wc[w][6] = m;
    __syncthreads();
    if (threadIdx.x < 7) {
        const int k = threadIdx.x;
        unsigned long long t = 0;
        unsigned mx = 0;
        for (int j = 0; j < 8; j++) {
            t += wc[j][k];
            mx = wc[j][k] > mx ? wc[j][k] : mx;
        }
        if (k < 6 && t)
            atomicAdd(&counts[k], t);
        if (k == 6 && mx)
            atomicMax(amax_bits, mx);
    }
}

// Smooth-SwiGLU's scales (fl_smooth_scales): the lines' max |x| as bits (non-NaN: ordered as floats),
// gathered with atomicMax (no order to keep).  Columns: a block takes 32 columns and COLMAX_ROWS rows, its
// 8 warps striding the rows, lane j column j; rows: a warp per row.
enum { COLMAX_ROWS = 256 };
__global__ void __launch_bounds__(256) col_max_kernel(unsigned *__restrict__ mb, const float *__restrict__ x, size_t R,
                                                      size_t C)
{
    __shared__ unsigned wm[8][32];
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    const size_t c = blockIdx.x * (size_t)32 + lane, r0 = blockIdx.y * (size_t)COLMAX_ROWS;
    unsigned m = 0;
    for (size_t r = r0 + w; c < C && r < R && r < r0 + COLMAX_ROWS; r += 8) {
        const unsigned b = __float_as_uint(x[r * C + c]) & 0x7FFFFFFFu;
        m = b <= 0x7F800000u && b > m ? b : m;
    }
    wm[w][lane] = m;
    __syncthreads();
    if (w == 0 && c < C) {
        for (int j = 1; j < 8; j++)
            m = wm[j][lane] > m ? wm[j][lane] : m;
        if (m)
            atomicMax(&mb[c], m);
    }
}

__global__ void __launch_bounds__(256) row_max_kernel(unsigned *__restrict__ mb, const float *__restrict__ x, size_t R,
                                                      size_t C)
{
    const size_t r = blockIdx.x * (size_t)8 + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= R)
        return;
    unsigned m = 0;
    for (size_t c = lane; c < C; c += 32) {
        const unsigned b = __float_as_uint(x[r * C + c]) & 0x7FFFFFFFu;
        m = b <= 0x7F800000u && b > m ? b : m;
    }
    m = __reduce_max_sync(0xFFFFFFFFu, m);
    if (lane == 0)
        mb[r] = m;
}

// From the lines' amax bits: the scales and inverses, and the smoothed tensor's amax into mb[m] (each line's
// amax times its scale, the largest of them: the largest |x s|, as multiplying by s > 0 keeps the order).
__global__ void __launch_bounds__(256) smooth_finish_kernel(float *__restrict__ sc, float *__restrict__ sc_inv,
                                                            unsigned *__restrict__ mb, size_t m)
{
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < m; j += (size_t)gridDim.x * blockDim.x) {
        const float a = __uint_as_float(mb[j]), s = fl_smooth_scale_f32(a);
        sc[j] = s;
        sc_inv[j] = 1.0f / s;
        const unsigned p = __float_as_uint(a * s);
        if (p)
            atomicMax(&mb[m], p);
    }
}

unsigned cast_blocks(size_t n) { return fl_step_grid(n) < (unsigned)CAST_BLOCKS ? fl_step_grid(n) : (unsigned)CAST_BLOCKS; }

// Embeddings: the forward a thread per element; the backward a thread per (token, channel) walking
// the token's rows in increasing order (fl_embed_index), and per (position, channel) walking the
// batch's rows of that position in order -- each sum in the twin's order, coalesced across channels.
__global__ void __launch_bounds__(256) embed_fwd_kernel(float *__restrict__ x, const int *__restrict__ tok,
                                                        const float *__restrict__ wte, const float *__restrict__ wpe,
                                                        size_t N, size_t T, size_t C)
{
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < N * C; e += (size_t)gridDim.x * blockDim.x) {
        const size_t i = e / C, k = e % C;
        x[e] = wte[(size_t)tok[i] * C + k] + wpe[(i % T) * C + k];
    }
}

__global__ void __launch_bounds__(256) embed_bwd_wte_kernel(float *__restrict__ gwte, const float *__restrict__ dx,
                                                            const int *__restrict__ toks, const int *__restrict__ starts,
                                                            const int *__restrict__ rows, size_t ntok, size_t C)
{
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < ntok * C; e += (size_t)gridDim.x * blockDim.x) {
        const size_t j = e / C, k = e % C;
        float g = gwte[(size_t)toks[j] * C + k];
        for (int r = starts[j]; r < starts[j + 1]; r++)
            g += dx[(size_t)rows[r] * C + k];
        gwte[(size_t)toks[j] * C + k] = g;
    }
}

__global__ void __launch_bounds__(256) embed_bwd_wpe_kernel(float *__restrict__ gwpe, const float *__restrict__ dx,
                                                            size_t N, size_t T, size_t C)
{
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < T * C; e += (size_t)gridDim.x * blockDim.x) {
        const size_t t = e / C, k = e % C;
        float g = gwpe[e];
        for (size_t i = t; i < N; i += T)
            g += dx[i * C + k];
        gwpe[e] = g;
    }
}

// Softmax cross-entropy: a warp per row.  The maximum by value (NaN ignored: any order gives it); the
// exponentials 32 at a time, staged in shared memory, lane 0 adding them to the double sum in index
// order (the twin's order); the normalisation; lane 0 the token's loss.
struct expf_tab {
    uint64_t t[32];
};

// fl_expf_table's 32 entries (host memory) as a kernel parameter.
static expf_tab expf_tab_of(const uint64_t *tab_host)
{
    expf_tab t;
    memcpy(t.t, tab_host, sizeof t.t);
    return t;
}

// GELU on the step's float32 activations: h = fl_gelu_f32(x); dx = dy * fl_gelu_grad_f32(x, e), e =
// fl_expf_glibc(-0.5 x * x), the harness's gelu_bwd with its expf (ffn_act.c).
__global__ void __launch_bounds__(256) gelu_fwd_kernel(float *__restrict__ h, const float *__restrict__ x, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        h[i] = fl_gelu_f32(x[i]);
}

__global__ void __launch_bounds__(256) gelu_bwd_kernel(float *__restrict__ dx, const float *__restrict__ x,
                                                       const float *__restrict__ dy, size_t n, expf_tab tab)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float xi = x[i];
        dx[i] = dy[i] * fl_gelu_grad_f32(xi, fl_expf_glibc(-0.5f * xi * xi, tab.t));
    }
}

constexpr int XENT_WARPS = 8;

// A row's maximum by value over the warp's lanes (xor shuffles; a NaN never wins a comparison).
__device__ inline float warp_max(float m)
{
    for (int o = 16; o > 0; o /= 2) {
        const float u = __shfl_xor_sync(0xFFFFFFFFu, m, o);
        m = u > m ? u : m;
    }
    return m;
}

// Lane 0 adds the chunk's min(32, left) values t[0], t[1], ... to acc in order (the rows' sums in key order;
// the caller brackets it with __syncwarp).
template <typename Acc> __device__ inline void lane0_add(Acc &acc, const float *t, size_t left, int lane)
{
    if (lane == 0)
        for (size_t c = 0; c < 32 && c < left; c++)
            acc += t[c];
}

__global__ void __launch_bounds__(XENT_WARPS * 32) xent_fwd_kernel(float *__restrict__ z, double *__restrict__ tokloss,
                                                                     const int *__restrict__ tgt, size_t N, size_t V,
                                                                     expf_tab tab)
{
    __shared__ float tile[XENT_WARPS][32];
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    const size_t i = (size_t)blockIdx.x * XENT_WARPS + w;
    if (i >= N)
        return;
    float *zr = z + i * V;
    float m = -INFINITY;
    for (size_t v = lane; v < V; v += 32)
        m = zr[v] > m ? zr[v] : m;
    m = warp_max(m);
    double sum = 0.0;
    for (size_t v0 = 0; v0 < V; v0 += 32) {
        const size_t v = v0 + lane;
        float e = 0.0f;
        if (v < V) {
            e = fl_expf_glibc(zr[v] - m, tab.t);
            zr[v] = e;
        }
        tile[w][lane] = e;
        __syncwarp();
        lane0_add(sum, tile[w], V - v0, lane);
        __syncwarp();
    }
    sum = __shfl_sync(0xFFFFFFFFu, sum, 0);
    const float inv = (float)(1.0 / sum), zt = zr[tgt[i]];
    __syncwarp();
    for (size_t v = lane; v < V; v += 32)
        zr[v] *= inv;
    if (lane == 0)
        tokloss[i] = -(log((double)zt) - log(sum));
}

__global__ void __launch_bounds__(256) xent_bwd_kernel(float *__restrict__ z, const int *__restrict__ tgt, size_t N,
                                                       size_t V, float invN)
{
    for (size_t e = blockIdx.x * (size_t)blockDim.x + threadIdx.x; e < N * V; e += (size_t)gridDim.x * blockDim.x) {
        const size_t i = e / V, v = e % V;
        const float d = (size_t)tgt[i] == v ? z[e] - 1.0f : z[e];
        z[e] = d * invN;
    }
}

// The causal softmax: a warp per row, as the cross-entropy: the maximum by value, the exponentials (and in
// the backward the products p dP) 32 at a time, lane 0 adding them in key order in float.  ROW (rows of
// T <= SMX_T keys, every preset): the warp keeps its row in shared memory -- the scores, then their
// exponentials; or P and dP -- so that S is read once and P written once.  Longer rows stage the scores
// and exponentials in P's row itself and read P and dP twice.  The same operations in the same order
// either way, so the same bits.  (Kept in registers instead, 32 values per lane, ptxas spilled around the
// exponential's call.)
constexpr int SMX_T = 1024, SMX_BWD_WARPS = 4; // the backward's two rows: 4 x 2 x 4 KB of shared memory

template <bool ROW>
__global__ void __launch_bounds__(XENT_WARPS * 32) attn_softmax_fwd_kernel(float *__restrict__ P,
                                                                             const float *__restrict__ S, size_t R,
                                                                             size_t T, float scale, expf_tab tab)
{
    __shared__ float row[ROW ? XENT_WARPS : 1][ROW ? SMX_T : 1];
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    const size_t i = (size_t)blockIdx.x * XENT_WARPS + w;
    if (i >= R)
        return;
    const size_t n = i % T + 1;
    const float *s = S + i * T;
    float *p = P + i * T, *v = ROW ? row[w] : p, m = -INFINITY;
    for (size_t j = lane; j < n; j += 32) {
        v[j] = scale != 1.0f ? s[j] * scale : s[j];
        m = v[j] > m ? v[j] : m;
    }
    m = warp_max(m);
    float sum = 0.0f;
    for (size_t j0 = 0; j0 < n; j0 += 32) {
        const size_t j = j0 + lane;
        if (j < n)
            v[j] = fl_expf_glibc(v[j] - m, tab.t);
        __syncwarp(); // (orders the lanes' writes before lane 0's reads, shared or global)
        lane0_add(sum, v + j0, n - j0, lane);
        __syncwarp();
    }
    const float inv = 1.0f / __shfl_sync(0xFFFFFFFFu, sum, 0);
    for (size_t j = lane; j < T; j += 32)
        p[j] = j < n ? v[j] * inv : 0.0f;
}

template <bool ROW>
__global__ void __launch_bounds__((ROW ? SMX_BWD_WARPS : XENT_WARPS) * 32) attn_softmax_bwd_kernel(
    float *__restrict__ dS, const float *__restrict__ P, const float *__restrict__ dP, size_t R, size_t T, float scale)
{
    constexpr int W = ROW ? SMX_BWD_WARPS : XENT_WARPS;
    __shared__ float rp[ROW ? W : 1][ROW ? SMX_T : 1], rd[ROW ? W : 1][ROW ? SMX_T : 1], tile[W][32];
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    const size_t i = (size_t)blockIdx.x * W + w;
    if (i >= R)
        return;
    const size_t n = i % T + 1;
    const float *p = P + i * T, *dp = dP + i * T;
    const float *pv = ROW ? rp[w] : p, *dv = ROW ? rd[w] : dp;
    float d = 0.0f;
    for (size_t j0 = 0; j0 < n; j0 += 32) {
        const size_t j = j0 + lane;
        float t = 0.0f;
        if (j < n) {
            const float a = p[j], b = dp[j];
            if (ROW)
                rp[w][j] = a, rd[w][j] = b;
            t = a * b;
        }
        tile[w][lane] = t;
        __syncwarp();
        lane0_add(d, tile[w], n - j0, lane);
        __syncwarp();
    }
    d = __shfl_sync(0xFFFFFFFFu, d, 0);
    for (size_t j = lane; j < T; j += 32)
        dS[i * T + j] = j < n ? pv[j] * (dv[j] - d) * scale : 0.0f;
}

// Blocks of XENT_WARPS rows (a warp per row) for R rows into *blocks; -1 with a message when there are
// more than a grid takes.
int warp_row_blocks(const char *who, size_t R, unsigned *blocks)
{
    const size_t b = (R + XENT_WARPS - 1) / XENT_WARPS;
    if (b > 0x7FFFFFFFu) {
        fprintf(stderr, "%s: %zu rows is too many\n", who, R);
        return -1;
    }
    *blocks = (unsigned)b;
    return 0;
}

unsigned rms_blocks(size_t N) { return (unsigned)((N + RMS_WARPS * 32 - 1) / (RMS_WARPS * 32)); }

} // namespace

extern "C" int fl_cuda_rmsnorm_fwd(float *y, float *rstd, const float *x, const float *gain, size_t N, size_t C, float eps,
                                   void *stream)
{
    if (!N || !C)
        return 0;
    if (N > (size_t)RMS_WARPS * 32 * 0x7FFFFFFFu) {
        fprintf(stderr, "fl_cuda_rmsnorm_fwd: %zu rows is too many\n", N);
        return -1;
    }
    rms_fwd_sums_kernel<<<rms_blocks(N), RMS_WARPS * 32, 0, (cudaStream_t)stream>>>(rstd, x, N, C, eps);
    FL_CUDA_CHECK(cudaGetLastError());
    return launch_rms_rows(y, nullptr, x, rstd, nullptr, gain, N, C, 0, (cudaStream_t)stream);
}

extern "C" int fl_cuda_rmsnorm_bwd(float *dx, float *dgain, const float *dy, const float *x, const float *rstd,
                                   const float *gain, size_t N, size_t C, int accumulate, float *ws, void *stream)
{
    if (!N || !C)
        return 0;
    if (N > (size_t)RMS_WARPS * 32 * 0x7FFFFFFFu) {
        fprintf(stderr, "fl_cuda_rmsnorm_bwd: %zu rows is too many\n", N);
        return -1;
    }
    rms_bwd_sums_kernel<<<rms_blocks(N), RMS_WARPS * 32, 0, (cudaStream_t)stream>>>(ws, dy, x, rstd, gain, N, C);
    FL_CUDA_CHECK(cudaGetLastError());
    if (launch_rms_rows(dx, dy, x, rstd, ws, gain, N, C, accumulate, (cudaStream_t)stream))
        return -1;
    rms_dgain_kernel<<<(unsigned)((C + 31) / 32), 256, 0, (cudaStream_t)stream>>>(dgain, dy, x, rstd, N, C);
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int fl_cuda_heads_copy(float *dst, const float *src, size_t B, size_t T, size_t H, size_t hs, size_t ld,
                                  int to_heads, void *stream)
{
    if (H * hs > ld || H * hs > 0xFFFFFFFFu) {
        fprintf(stderr, "fl_cuda_heads_copy: %zu heads of %zu do not fit in rows of %zu\n", H, hs, ld);
        return -1;
    }
    const size_t BT = B * T;
    if (!BT || !H || !hs)
        return 0;
    heads_copy_kernel<<<(unsigned)(BT < 65535u * 16 ? BT : 65535u * 16), 256, 0, (cudaStream_t)stream>>>(
        dst, src, BT, T, (unsigned)H, (unsigned)hs, ld, to_heads);
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int fl_cuda_ffn_wsums(double *out, const float *W, size_t L, size_t F, size_t C, int gated, void *stream)
{
    const size_t R = L * F;
    if (!R)
        return 0;
    if (R > (size_t)RMS_WARPS * 32 * 0x7FFFFFFFu) {
        fprintf(stderr, "fl_cuda_ffn_wsums: %zu rows is too many\n", R);
        return -1;
    }
    if (!C)
        return cudaMemsetAsync(out, 0, 3 * R * sizeof *out, (cudaStream_t)stream) == cudaSuccess ? 0 : -1;
    ffn_wsums_kernel<<<rms_blocks(R), RMS_WARPS * 32, 0, (cudaStream_t)stream>>>(out, W, R, F, C, gated);
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}

// fl_cuda_cast_fp8 (codes) and fl_cuda_cast_fq / _smooth (y): one launch of cast_fp8_kernel.
static int launch_cast(const char *who, uint8_t *codes, float *y, float *amax, unsigned long long *counts,
                       const float *x, size_t n, float s, float si, const fl_cast_fmt *f, uint64_t off,
                       const fl_cast_smooth *sm, void *stream)
{
    if (f->fmt != FL_FMT_E4M3 && f->fmt != FL_FMT_E5M2 && (codes || f->fmt != FL_FMT_BF16)) {
        fprintf(stderr, "%s: not %s\n", who, codes ? "an FP8 format" : "e4m3, e5m2 or bf16");
        return -1;
    }
    if (!n)
        return 0;
    fl_cast_limits l;
    fl_cast_limits_of(&l, f);
    const fl_cast_smooth none = { nullptr, nullptr, nullptr, nullptr, 1 };
    if (codes)
        cast_fp8_kernel<false><<<cast_blocks(n), 256, 0, (cudaStream_t)stream>>>(
            codes, nullptr, (unsigned *)amax, counts, x, n, s, 1.0f, l, f->sr, f->key, off, none, 0);
    else
        cast_fp8_kernel<true><<<cast_blocks(n), 256, 0, (cudaStream_t)stream>>>(
            nullptr, y, (unsigned *)amax, counts, x, n, s, si, l, f->sr, f->key, off, sm ? *sm : none, sm != nullptr);
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int fl_cuda_cast_fp8(uint8_t *codes, float *amax, unsigned long long *counts, const float *x, size_t n,
                                float s, const fl_cast_fmt *f, uint64_t off, void *stream)
{
    return launch_cast("fl_cuda_cast_fp8", codes, nullptr, amax, counts, x, n, s, 1.0f, f, off, nullptr, stream);
}

extern "C" int fl_cuda_cast_fq(float *y, float *amax, unsigned long long *counts, const float *x, size_t n, float s,
                               float si, const fl_cast_fmt *f, uint64_t off, void *stream)
{
    return launch_cast("fl_cuda_cast_fq", nullptr, y, amax, counts, x, n, s, si, f, off, nullptr, stream);
}

extern "C" int fl_cuda_cast_fq_smooth(float *y, float *amax, unsigned long long *counts, const float *x, size_t n,
                                      float s, float si, const fl_cast_fmt *f, uint64_t off, const fl_cast_smooth *sm,
                                      void *stream)
{
    if (!sm || !sm->C) {
        fprintf(stderr, "fl_cuda_cast_fq_smooth: no smoothing given\n");
        return -1;
    }
    return launch_cast("fl_cuda_cast_fq_smooth", nullptr, y, amax, counts, x, n, s, si, f, off, sm, stream);
}

extern "C" int fl_cuda_smooth_scales(float *sc, float *sc_inv, float *amax, const float *x, size_t R, size_t C, int axis,
                                     unsigned *ws, void *stream)
{
    const cudaStream_t st = (cudaStream_t)stream;
    const size_t m = axis ? R : C;
    FL_CUDA_CHECK(cudaMemsetAsync(ws, 0, (m + 1) * sizeof *ws, st));
    if (R && C) {
        if (axis)
            row_max_kernel<<<(unsigned)((R + 7) / 8), 256, 0, st>>>(ws, x, R, C);
        else
            col_max_kernel<<<dim3((unsigned)((C + 31) / 32), (unsigned)((R + COLMAX_ROWS - 1) / COLMAX_ROWS)), 256, 0,
                             st>>>(ws, x, R, C);
        FL_CUDA_CHECK(cudaGetLastError());
    }
    if (m) {
        smooth_finish_kernel<<<fl_step_grid(m), 256, 0, st>>>(sc, sc_inv, ws, m);
        FL_CUDA_CHECK(cudaGetLastError());
    }
    unsigned back;
    FL_CUDA_CHECK(cudaMemcpyAsync(&back, ws + m, sizeof back, cudaMemcpyDeviceToHost, st));
    FL_CUDA_CHECK(cudaStreamSynchronize(st));
    *amax = fl_f32_from_bits(back);
    return 0;
}

extern "C" int fl_cuda_embed_fwd(float *x, const int *tok, const float *wte, const float *wpe, size_t N, size_t T,
                                 size_t C, void *stream)
{
    if (!N || !C)
        return 0;
    embed_fwd_kernel<<<fl_step_grid(N * C), 256, 0, (cudaStream_t)stream>>>(x, tok, wte, wpe, N, T, C);
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int fl_cuda_embed_bwd(float *gwte, float *gwpe, const float *dx, const int *toks, const int *starts,
                                 const int *rows, size_t ntok, size_t N, size_t T, size_t C, void *stream)
{
    if (!N || !C)
        return 0;
    embed_bwd_wte_kernel<<<fl_step_grid(ntok * C), 256, 0, (cudaStream_t)stream>>>(gwte, dx, toks, starts, rows, ntok, C);
    FL_CUDA_CHECK(cudaGetLastError());
    embed_bwd_wpe_kernel<<<fl_step_grid(T * C), 256, 0, (cudaStream_t)stream>>>(gwpe, dx, N, T, C);
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int fl_cuda_xent_fwd(float *z, double *tokloss, const int *tgt, size_t N, size_t V, const uint64_t *tab_host,
                                void *stream)
{
    if (!N || !V)
        return 0;
    const expf_tab t = expf_tab_of(tab_host);
    unsigned blocks;
    if (warp_row_blocks("fl_cuda_xent_fwd", N, &blocks))
        return -1;
    xent_fwd_kernel<<<blocks, XENT_WARPS * 32, 0, (cudaStream_t)stream>>>(z, tokloss, tgt, N, V, t);
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int fl_cuda_gelu_fwd(float *h, const float *x, size_t n, void *stream)
{
    if (!n)
        return 0;
    gelu_fwd_kernel<<<fl_step_grid(n), 256, 0, (cudaStream_t)stream>>>(h, x, n);
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int fl_cuda_gelu_bwd(float *dx, const float *x, const float *dy, size_t n, const uint64_t *tab_host, void *stream)
{
    if (!n)
        return 0;
    const expf_tab t = expf_tab_of(tab_host);
    gelu_bwd_kernel<<<fl_step_grid(n), 256, 0, (cudaStream_t)stream>>>(dx, x, dy, n, t);
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int fl_cuda_xent_bwd(float *z, const int *tgt, size_t N, size_t V, void *stream)
{
    if (!N || !V)
        return 0;
    xent_bwd_kernel<<<fl_step_grid(N * V), 256, 0, (cudaStream_t)stream>>>(z, tgt, N, V, 1.0f / (float)N);
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int fl_cuda_attn_softmax_fwd(float *P, const float *S, size_t R, size_t T, float scale,
                                        const uint64_t *tab_host, void *stream)
{
    if (!R || !T)
        return 0;
    const expf_tab t = expf_tab_of(tab_host);
    unsigned blocks;
    if (warp_row_blocks("fl_cuda_attn_softmax_fwd", R, &blocks))
        return -1;
    if (T <= SMX_T)
        attn_softmax_fwd_kernel<true><<<blocks, XENT_WARPS * 32, 0, (cudaStream_t)stream>>>(P, S, R, T, scale, t);
    else
        attn_softmax_fwd_kernel<false><<<blocks, XENT_WARPS * 32, 0, (cudaStream_t)stream>>>(P, S, R, T, scale, t);
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int fl_cuda_attn_softmax_bwd(float *dS, const float *P, const float *dP, size_t R, size_t T, float scale,
                                        void *stream)
{
    if (!R || !T)
        return 0;
    unsigned blocks;
    if (warp_row_blocks("fl_cuda_attn_softmax_bwd", R, &blocks))
        return -1;
    if (T <= SMX_T)
        attn_softmax_bwd_kernel<true><<<(unsigned)((R + SMX_BWD_WARPS - 1) / SMX_BWD_WARPS), SMX_BWD_WARPS * 32, 0,
                                        (cudaStream_t)stream>>>(dS, P, dP, R, T, scale);
    else
        attn_softmax_bwd_kernel<false><<<blocks, XENT_WARPS * 32, 0, (cudaStream_t)stream>>>(dS, P, dP, R, T, scale);
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}

extern "C" int fl_cuda_adamw(float *p, const float *g, float *m, float *v, size_t n, const fl_adamw_hp *h, void *stream)
{
    if (!n)
        return 0;
    if (!p || !g || !m || !v || !h) {
        fprintf(stderr, "fl_cuda_adamw: a NULL pointer\n");
        return -1;
    }
    adamw_kernel<<<fl_step_grid(n), 256, 0, (cudaStream_t)stream>>>(p, g, m, v, n, *h);
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}
