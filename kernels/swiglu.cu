// swiglu.cu — SwiGLU and Smooth-SwiGLU kernels (CPU twins: kernels/swiglu.c).
//
// SwiGLU forward / backward: the generic elementwise kernel of activations.h over fl_swiglu_f32 and
// fl_swiglu_grad_f32.  Bytes per element: forward g + u + y (bf16 6, bf16 -> e4m3 5, e4m3 -> bf16 4);
// backward g + u + dy + dg + du (bf16 10; e5m2 gradients 7).
// Smooth-SwiGLU: one block per token row (R rows of C channels).
//   given scales: one pass over g and u: 5 B/element with bf16 in, e4m3 out;
//   per-token current scales: the same 5 B/element and one h = silu(g) u per element; each thread keeps
//   its h values of the row in registers (up to 4 vectors of 16, C <= 16384) from the row's amax to the
//   cast; longer rows compute h a second time for their columns past 16384;
//   per-channel current scales: a column-amax pass first (reads g and u: +4 B/element and a second h
//   per element: a column's scale needs every row, and registers cannot hold the tensor), then the
//   given-scale pass.
// Amaxes are maxima: exact whatever the order, so any grid gives the twin's bits.
// g < -80 (FL_SILU_TAIL_X): fl_swiglu_f32 / fl_swiglu_grad_f32 form silu(g) u, u silu'(g), dy silu(g)
// before applying e^g's exponent (activations.h section 3), so a large u or dy keeps an underflowing
// silu(g) and u = +-Inf gives -+Inf; the same element functions as the twins, so the same bits.
#include "kernels.h"

namespace {

struct op_swiglu_fwd {
    static constexpr int n_in = 2, n_out = 1;
    struct params {
        int unused;
    };
    static __device__ __forceinline__ void apply(size_t, const float *e, float *o, const params &)
    {
        o[0] = fl_swiglu_f32(e[0], e[1]);
        o[1] = 0.0f;
    }
};

struct op_swiglu_bwd {
    static constexpr int n_in = 3, n_out = 2;
    struct params {
        int unused;
    };
    static __device__ __forceinline__ void apply(size_t, const float *e, float *o, const params &)
    {
        fl_swiglu_grad_f32(&o[0], &o[1], e[0], e[1], e[2]);
    }
};

// Column amax of h = silu(g) u over a stripe of rows: block (bx, by) covers columns
// [bx * 4096, bx * 4096 + 4096) and rows [by * ROWS, by * ROWS + ROWS); thread t owns 16 columns.
constexpr int COLMAX_ROWS = 64;

// Vectors of h a thread of the per-token current-scale kernel keeps in registers at most: 64 floats,
// about half its register budget at two blocks per SM (beyond, the row's remaining vectors recompute h).
constexpr int SMOOTH_KV_MAX = 4;

// h[j] = fl_swiglu_f32 of column j0 + j of the row starting at element rb: 16-byte loads where vec_ok
// and the vector is whole, element loads otherwise (columns at or past C read g = u = 0 and stay out of
// the amax).  Returns a folded with |h| of the columns below C.
template <class G>
__device__ __forceinline__ float smooth_h(float *h, float a, const typename G::storage *__restrict__ g,
                                          const typename G::storage *__restrict__ u, size_t rb, size_t j0,
                                          size_t C, float mg, float mu, int vec_ok)
{
    float gv[FL_VEC], uv[FL_VEC];
    if (vec_ok && j0 + FL_VEC <= C) {
        fl_load_vec<G>(gv, g + rb + j0, mg);
        fl_load_vec<G>(uv, u + rb + j0, mu);
    } else {
#pragma unroll
        for (int j = 0; j < FL_VEC; j++) {
            const bool in = j0 + j < C;
            gv[j] = in ? G::load(g[rb + j0 + j]) * mg : 0.0f;
            uv[j] = in ? G::load(u[rb + j0 + j]) * mu : 0.0f;
        }
    }
#pragma unroll
    for (int j = 0; j < FL_VEC; j++) {
        h[j] = fl_swiglu_f32(gv[j], uv[j]);
        if (j0 + j < C)
            a = fl_amax_update(a, h[j]);
    }
    return a;
}

// Store y = h * s_row for the columns [j0, j0 + FL_VEC) below C (times the output multiplier my);
// returns am folded with |y|.
template <class Y>
__device__ __forceinline__ float smooth_store(typename Y::storage *__restrict__ y, const float *h, float s_row, float am, size_t rb, size_t j0,
                                              size_t C, float my, int vec_ok)
{
    if (vec_ok && j0 + FL_VEC <= C) {
        float o[FL_VEC];
#pragma unroll
        for (int j = 0; j < FL_VEC; j++) {
            o[j] = h[j] * s_row;
            am = fl_amax_update(am, o[j]);
        }
        fl_store_vec<Y>(y + rb + j0, o, my);
    } else {
#pragma unroll
        for (int j = 0; j < FL_VEC; j++)
            if (j0 + j < C) {
                const float o = h[j] * s_row;
                am = fl_amax_update(am, o);
                fl_store_one<Y>(y + rb + j0 + j, o, my);
            }
    }
    return am;
}

// sm_100's ptxas otherwise settles on 64 registers with a spill here; 3 blocks per SM caps it at 85.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
#define SMOOTH_COLMAX_MIN_BLOCKS 3
#else
#define SMOOTH_COLMAX_MIN_BLOCKS 1
#endif

template <class G>
__global__ void __launch_bounds__(FL_RED_THREADS, SMOOTH_COLMAX_MIN_BLOCKS)
smooth_swiglu_colmax_kernel(float *__restrict__ colmax, const typename G::storage *__restrict__ g,
                            const typename G::storage *__restrict__ u, const float *g_mul, const float *u_mul,
                            size_t R, size_t C, int vec_ok)
{
    const float mg = g_mul ? *g_mul : 1.0f, mu = u_mul ? *u_mul : 1.0f;
    const size_t c0 = ((size_t)blockIdx.x * FL_RED_THREADS + threadIdx.x) * FL_VEC;
    if (c0 >= C)
        return;
    float m[FL_VEC];
#pragma unroll
    for (int j = 0; j < FL_VEC; j++)
        m[j] = 0.0f;
    const size_t r0 = (size_t)blockIdx.y * COLMAX_ROWS;
    for (size_t r = r0; r < r0 + COLMAX_ROWS && r < R; r++) {
        const size_t base = r * C + c0;
        if (vec_ok && c0 + FL_VEC <= C) {
            float gv[FL_VEC], uv[FL_VEC];
            fl_load_vec<G>(gv, g + base, mg);
            fl_load_vec<G>(uv, u + base, mu);
#pragma unroll
            for (int j = 0; j < FL_VEC; j++)
                m[j] = fl_amax_update(m[j], fl_swiglu_f32(gv[j], uv[j]));
        } else {
#pragma unroll
            for (int j = 0; j < FL_VEC; j++)
                if (c0 + j < C)
                    m[j] = fl_amax_update(m[j], fl_swiglu_f32(G::load(g[base + j]) * mg, G::load(u[base + j]) * mu));
        }
    }
#pragma unroll
    for (int j = 0; j < FL_VEC; j++)
        if (c0 + j < C)
            fl_atomic_amax(colmax + c0 + j, m[j]);
}

__global__ void smooth_swiglu_scale_kernel(float *s, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        s[i] = fl_smooth_scale_f32(s[i]);
}

// Given scales: one block per row, one pass; s_row = s[row] (per_token) or s[c] per column.
template <class G, class Y>
__global__ void __launch_bounds__(FL_RED_THREADS)
smooth_swiglu_fwd_kernel(typename Y::storage *__restrict__ y, const float *__restrict__ s,
                         const typename G::storage *__restrict__ g, const typename G::storage *__restrict__ u,
                         const float *g_mul, const float *u_mul, const float *y_mul, float *amax, size_t R,
                         size_t C, int per_token, int vec_ok)
{
    __shared__ float sh[FL_RED_THREADS / 32];
    const float mg = g_mul ? *g_mul : 1.0f, mu = u_mul ? *u_mul : 1.0f, my = y_mul ? *y_mul : 1.0f;
    const size_t nvec = (C + FL_VEC - 1) / FL_VEC;
    float am = 0.0f;
    for (size_t row = blockIdx.x; row < R; row += gridDim.x) {
        const size_t rb = row * C;
        const float s_row = per_token ? s[row] : 1.0f;
        for (size_t v = threadIdx.x; v < nvec; v += FL_RED_THREADS) {
            const size_t j0 = v * FL_VEC;
            if (vec_ok && j0 + FL_VEC <= C) {
                float gv[FL_VEC], uv[FL_VEC], o[FL_VEC];
                fl_load_vec<G>(gv, g + rb + j0, mg);
                fl_load_vec<G>(uv, u + rb + j0, mu);
#pragma unroll
                for (int j = 0; j < FL_VEC; j++) {
                    o[j] = fl_swiglu_f32(gv[j], uv[j]) * (per_token ? s_row : s[j0 + j]);
                    am = fl_amax_update(am, o[j]);
                }
                fl_store_vec<Y>(y + rb + j0, o, my);
            } else {
                for (size_t j = j0; j < j0 + FL_VEC && j < C; j++) {
                    const float o = fl_swiglu_f32(G::load(g[rb + j]) * mg, G::load(u[rb + j]) * mu) *
                                    (per_token ? s_row : s[j]);
                    am = fl_amax_update(am, o);
                    fl_store_one<Y>(y + rb + j, o, my);
                }
            }
        }
    }
    fl_block_amax_publish(amax, am, sh);
}

// Per-token current scales: one block per row.  Thread t computes h for its vectors of the row
// (t, t + 256, ..., t + 256 (KV - 1)) once and keeps them in registers through the row's amax and the
// cast, so h is formed once per element as in the given-scale pass.  KV < SMOOTH_KV_MAX: the launcher
// guarantees the row has at most 256 KV vectors.  KV = SMOOTH_KV_MAX: vectors past the first
// 256 SMOOTH_KV_MAX of a row (C > 16384) recompute h in the cast (same element function, same bits).
template <class G, class Y, int KV>
__global__ void __launch_bounds__(FL_RED_THREADS, KV == 1 ? 4 : 2)
smooth_swiglu_fwd_token_kernel(typename Y::storage *__restrict__ y, float *__restrict__ s,
                               const typename G::storage *__restrict__ g, const typename G::storage *__restrict__ u,
                               const float *g_mul, const float *u_mul, const float *y_mul, float *amax, size_t R,
                               size_t C, int vec_ok)
{
    __shared__ float sh[FL_RED_THREADS / 32];
    const float mg = g_mul ? *g_mul : 1.0f, mu = u_mul ? *u_mul : 1.0f, my = y_mul ? *y_mul : 1.0f;
    const size_t nvec = (C + FL_VEC - 1) / FL_VEC;
    float am = 0.0f;
    for (size_t row = blockIdx.x; row < R; row += gridDim.x) {
        const size_t rb = row * C;
        float h[KV][FL_VEC], rm = 0.0f;
#pragma unroll
        for (int k = 0; k < KV; k++) {
            const size_t v = threadIdx.x + (size_t)k * FL_RED_THREADS;
            if (v < nvec)
                rm = smooth_h<G>(h[k], rm, g, u, rb, v * FL_VEC, C, mg, mu, vec_ok);
        }
        if constexpr (KV == SMOOTH_KV_MAX)
            for (size_t v = threadIdx.x + (size_t)KV * FL_RED_THREADS; v < nvec; v += FL_RED_THREADS) {
                float t[FL_VEC];
                rm = smooth_h<G>(t, rm, g, u, rb, v * FL_VEC, C, mg, mu, vec_ok);
            }
        const float s_row = fl_smooth_scale_f32(fl_block_amax(rm, sh));
        if (threadIdx.x == 0)
            s[row] = s_row;
#pragma unroll
        for (int k = 0; k < KV; k++) {
            const size_t v = threadIdx.x + (size_t)k * FL_RED_THREADS;
            if (v < nvec)
                am = smooth_store<Y>(y, h[k], s_row, am, rb, v * FL_VEC, C, my, vec_ok);
        }
        if constexpr (KV == SMOOTH_KV_MAX)
            for (size_t v = threadIdx.x + (size_t)KV * FL_RED_THREADS; v < nvec; v += FL_RED_THREADS) {
                float t[FL_VEC];
                smooth_h<G>(t, 0.0f, g, u, rb, v * FL_VEC, C, mg, mu, vec_ok);
                am = smooth_store<Y>(y, t, s_row, am, rb, v * FL_VEC, C, my, vec_ok);
            }
    }
    fl_block_amax_publish(amax, am, sh);
}

// One block per row: dh = dv * s_k, then the SwiGLU backward.
template <class G, class DV, class DX>
__global__ void __launch_bounds__(FL_RED_THREADS)
smooth_swiglu_bwd_kernel(typename DX::storage *__restrict__ dg, typename DX::storage *__restrict__ du,
                         const typename G::storage *__restrict__ g, const typename G::storage *__restrict__ u,
                         const typename DV::storage *__restrict__ dv, const float *__restrict__ s,
                         const float *g_mul, const float *u_mul, const float *dv_mul, const float *dg_mul,
                         const float *du_mul, float *amax_g, float *amax_u, size_t R, size_t C, int per_token,
                         int vec_ok)
{
    __shared__ float sh[FL_RED_THREADS / 32];
    const float mg = g_mul ? *g_mul : 1.0f, mu = u_mul ? *u_mul : 1.0f, md = dv_mul ? *dv_mul : 1.0f;
    const float og = dg_mul ? *dg_mul : 1.0f, ou = du_mul ? *du_mul : 1.0f;
    const size_t nvec = (C + FL_VEC - 1) / FL_VEC;
    float ag = 0.0f, au = 0.0f;
    for (size_t row = blockIdx.x; row < R; row += gridDim.x) {
        const size_t rb = row * C;
        const float s_row = per_token ? s[row] : 1.0f;
        for (size_t v = threadIdx.x; v < nvec; v += FL_RED_THREADS) {
            const size_t j0 = v * FL_VEC;
            if (vec_ok && j0 + FL_VEC <= C) {
                float gv[FL_VEC], uv[FL_VEC], dh[FL_VEC], a[FL_VEC], b[FL_VEC];
                fl_load_vec<G>(gv, g + rb + j0, mg);
                fl_load_vec<G>(uv, u + rb + j0, mu);
                fl_load_vec<DV>(dh, dv + rb + j0, md);
#pragma unroll
                for (int j = 0; j < FL_VEC; j++) {
                    fl_swiglu_grad_f32(&a[j], &b[j], gv[j], uv[j], dh[j] * (per_token ? s_row : s[j0 + j]));
                    ag = fl_amax_update(ag, a[j]);
                    au = fl_amax_update(au, b[j]);
                }
                fl_store_vec<DX>(dg + rb + j0, a, og);
                fl_store_vec<DX>(du + rb + j0, b, ou);
            } else {
                for (size_t j = j0; j < j0 + FL_VEC && j < C; j++) {
                    float a, b;
                    fl_swiglu_grad_f32(&a, &b, G::load(g[rb + j]) * mg, G::load(u[rb + j]) * mu,
                                       (DV::load(dv[rb + j]) * md) * (per_token ? s_row : s[j]));
                    ag = fl_amax_update(ag, a);
                    au = fl_amax_update(au, b);
                    fl_store_one<DX>(dg + rb + j, a, og);
                    fl_store_one<DX>(du + rb + j, b, ou);
                }
            }
        }
    }
    fl_block_amax_publish(amax_g, ag, sh);
    fl_block_amax_publish(amax_u, au, sh);
}

} // namespace

extern "C" int fl_cuda_swiglu_fwd(fl_kout y, fl_kin g, fl_kin u, size_t n, void *stream)
{
    FL_LAUNCH_REQUIRE(g.data && u.data && y.data, "NULL data");
    FL_LAUNCH_REQUIRE(g.fmt == u.fmt, "gate and up must share a format (%d, %d)", (int)g.fmt, (int)u.fmt);
    if (n == 0)
        return 0;
    const fl_ew_args a = fl_ew_args_of(n, { g, u }, { y });
    return fl_io_dispatch_fwd(g.fmt, [&](auto gi) {
        return fl_io_dispatch_fwd(y.fmt, [&](auto yi) {
            using G = decltype(gi);
            return fl_ew_launch<op_swiglu_fwd, G, G, fl_io_none, decltype(yi), fl_io_none>(a, { 0 }, stream);
        });
    });
}

extern "C" int fl_cuda_swiglu_bwd(fl_kout dg, fl_kout du, fl_kin g, fl_kin u, fl_kin dy, size_t n, void *stream)
{
    FL_LAUNCH_REQUIRE(g.data && u.data && dy.data && dg.data && du.data, "NULL data");
    FL_LAUNCH_REQUIRE(g.fmt == u.fmt, "gate and up must share a format (%d, %d)", (int)g.fmt, (int)u.fmt);
    FL_LAUNCH_REQUIRE(dg.fmt == du.fmt, "dgate and dup must share a format (%d, %d)", (int)dg.fmt, (int)du.fmt);
    if (n == 0)
        return 0;
    const fl_ew_args a = fl_ew_args_of(n, { g, u, dy }, { dg, du });
    return fl_io_dispatch_fwd(g.fmt, [&](auto gi) {
        return fl_io_dispatch_grad(dy.fmt, [&](auto di) {
            return fl_io_dispatch_grad(dg.fmt, [&](auto oi) {
                using G = decltype(gi);
                using O = decltype(oi);
                return fl_ew_launch<op_swiglu_bwd, G, G, decltype(di), O, O>(a, { 0 }, stream);
            });
        });
    });
}

extern "C" int fl_cuda_smooth_swiglu_fwd(fl_kout y, float *s, fl_kin g, fl_kin u, size_t R, size_t C,
                                         fl_smooth_axis axis, int compute, void *stream)
{
    FL_LAUNCH_REQUIRE(g.data && u.data && y.data && s, "NULL data");
    FL_LAUNCH_REQUIRE(g.fmt == u.fmt, "gate and up must share a format (%d, %d)", (int)g.fmt, (int)u.fmt);
    FL_LAUNCH_REQUIRE(axis == FL_SMOOTH_CHANNEL || axis == FL_SMOOTH_TOKEN, "axis %d", (int)axis);
    if (R == 0 || C == 0)
        return 0;
    cudaStream_t st = (cudaStream_t)stream;
    const int vec_ok = C % FL_VEC == 0 && fl_io_aligned(g.data) && fl_io_aligned(u.data) && fl_io_aligned(y.data);
    const int per_token = axis == FL_SMOOTH_TOKEN;
    const size_t nvec = (C + FL_VEC - 1) / FL_VEC;
    return fl_io_dispatch_fwd(g.fmt, [&](auto gi) {
        using G = decltype(gi);
        if (compute && !per_token) {
            FL_CUDA_CHECK(cudaMemsetAsync(s, 0, C * sizeof(float), st));
            const size_t cb = (C + (size_t)FL_RED_THREADS * FL_VEC - 1) / ((size_t)FL_RED_THREADS * FL_VEC);
            const size_t rb = (R + COLMAX_ROWS - 1) / COLMAX_ROWS;
            FL_LAUNCH_REQUIRE(cb < (1u << 31) && rb < 65536, "shape (%zu, %zu) too large for the column-amax grid", R, C);
            smooth_swiglu_colmax_kernel<G><<<dim3((unsigned)cb, (unsigned)rb), FL_RED_THREADS, 0, st>>>(
                s, (const typename G::storage *)g.data, (const typename G::storage *)u.data, g.scale_inv,
                u.scale_inv, R, C, vec_ok);
            FL_CUDA_CHECK(cudaGetLastError());
            smooth_swiglu_scale_kernel<<<fl_grid_for(C), FL_RED_THREADS, 0, st>>>(s, C);
            FL_CUDA_CHECK(cudaGetLastError());
        }
        return fl_io_dispatch_fwd(y.fmt, [&](auto yi) {
            using Y = decltype(yi);
            typename Y::storage *yp = (typename Y::storage *)y.data;
            const typename G::storage *gp = (const typename G::storage *)g.data, *up = (const typename G::storage *)u.data;
            const unsigned grid = fl_row_grid(R);
            if (!(compute && per_token))
                smooth_swiglu_fwd_kernel<G, Y><<<grid, FL_RED_THREADS, 0, st>>>(
                    yp, s, gp, up, g.scale_inv, u.scale_inv, fl_out_mul(y), y.amax, R, C, per_token, vec_ok);
            else if (nvec <= FL_RED_THREADS)
                smooth_swiglu_fwd_token_kernel<G, Y, 1><<<grid, FL_RED_THREADS, 0, st>>>(
                    yp, s, gp, up, g.scale_inv, u.scale_inv, fl_out_mul(y), y.amax, R, C, vec_ok);
            else if (nvec <= 2 * FL_RED_THREADS)
                smooth_swiglu_fwd_token_kernel<G, Y, 2><<<grid, FL_RED_THREADS, 0, st>>>(
                    yp, s, gp, up, g.scale_inv, u.scale_inv, fl_out_mul(y), y.amax, R, C, vec_ok);
            else
                smooth_swiglu_fwd_token_kernel<G, Y, SMOOTH_KV_MAX><<<grid, FL_RED_THREADS, 0, st>>>(
                    yp, s, gp, up, g.scale_inv, u.scale_inv, fl_out_mul(y), y.amax, R, C, vec_ok);
            FL_CUDA_CHECK(cudaGetLastError());
            return 0;
        });
    });
}

extern "C" int fl_cuda_smooth_swiglu_bwd(fl_kout dg, fl_kout du, fl_kin g, fl_kin u, fl_kin dv, const float *s,
                                         size_t R, size_t C, fl_smooth_axis axis, void *stream)
{
    FL_LAUNCH_REQUIRE(g.data && u.data && dv.data && dg.data && du.data && s, "NULL data");
    FL_LAUNCH_REQUIRE(g.fmt == u.fmt, "gate and up must share a format (%d, %d)", (int)g.fmt, (int)u.fmt);
    FL_LAUNCH_REQUIRE(dg.fmt == du.fmt, "dgate and dup must share a format (%d, %d)", (int)dg.fmt, (int)du.fmt);
    FL_LAUNCH_REQUIRE(axis == FL_SMOOTH_CHANNEL || axis == FL_SMOOTH_TOKEN, "axis %d", (int)axis);
    if (R == 0 || C == 0)
        return 0;
    const int vec_ok = C % FL_VEC == 0 && fl_io_aligned(g.data) && fl_io_aligned(u.data) &&
                       fl_io_aligned(dv.data) && fl_io_aligned(dg.data) && fl_io_aligned(du.data);
    return fl_io_dispatch_fwd(g.fmt, [&](auto gi) {
        return fl_io_dispatch_grad(dv.fmt, [&](auto di) {
            return fl_io_dispatch_grad(dg.fmt, [&](auto oi) {
                using G = decltype(gi);
                using DV = decltype(di);
                using DX = decltype(oi);
                smooth_swiglu_bwd_kernel<G, DV, DX><<<fl_row_grid(R), FL_RED_THREADS, 0, (cudaStream_t)stream>>>(
                    (typename DX::storage *)dg.data, (typename DX::storage *)du.data,
                    (const typename G::storage *)g.data, (const typename G::storage *)u.data,
                    (const typename DV::storage *)dv.data, s, g.scale_inv, u.scale_inv, dv.scale_inv,
                    fl_out_mul(dg), fl_out_mul(du), dg.amax, du.amax, R, C, axis == FL_SMOOTH_TOKEN, vec_ok);
                FL_CUDA_CHECK(cudaGetLastError());
                return 0;
            });
        });
    });
}
