// swiglu.cu — SwiGLU and Smooth-SwiGLU kernels (CPU twins: kernels/swiglu.c).
//
// SwiGLU forward / backward: the generic elementwise kernel of activations.h over fl_swiglu_f32 and
// fl_swiglu_grad_f32.  Bytes per element: forward g + u + y (bf16 6, bf16 -> e4m3 5, e4m3 -> bf16 4);
// backward g + u + dy + dg + du (bf16 10; e5m2 gradients 7).
// Smooth-SwiGLU: one block per token row (R rows of C channels).
//   given scales, or per-token current scales: one pass over g and u (per-token current scaling reduces
//   the row's amax first and re-reads the row from L1/L2): 5 B/element with bf16 in, e4m3 out;
//   per-channel current scales: a column-amax pass first (reads g and u: +4 B/element), then the same.
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

template <class G>
__global__ void __launch_bounds__(FL_RED_THREADS)
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

// One block per row.  token_compute: reduce the row's amax of h first, s_row = fl_smooth_scale_f32
// of it (written to s[row]); otherwise s_row = s[row] (token) or s[c] per element (channel).
template <class G, class Y>
__global__ void __launch_bounds__(FL_RED_THREADS)
smooth_swiglu_fwd_kernel(typename Y::storage *__restrict__ y, float *__restrict__ s,
                         const typename G::storage *__restrict__ g, const typename G::storage *__restrict__ u,
                         const float *g_mul, const float *u_mul, const float *y_mul, float *amax, size_t R,
                         size_t C, int per_token, int token_compute, int vec_ok)
{
    __shared__ float sh[FL_RED_THREADS / 32];
    const float mg = g_mul ? *g_mul : 1.0f, mu = u_mul ? *u_mul : 1.0f, my = y_mul ? *y_mul : 1.0f;
    const size_t nvec = (C + FL_VEC - 1) / FL_VEC;
    float am = 0.0f;
    for (size_t row = blockIdx.x; row < R; row += gridDim.x) {
        const size_t rb = row * C;
        float s_row = 1.0f;
        if (per_token && token_compute) {
            float rm = 0.0f;
            for (size_t v = threadIdx.x; v < nvec; v += FL_RED_THREADS) {
                const size_t j0 = v * FL_VEC;
                if (vec_ok && j0 + FL_VEC <= C) {
                    float gv[FL_VEC], uv[FL_VEC];
                    fl_load_vec<G>(gv, g + rb + j0, mg);
                    fl_load_vec<G>(uv, u + rb + j0, mu);
#pragma unroll
                    for (int j = 0; j < FL_VEC; j++)
                        rm = fl_amax_update(rm, fl_swiglu_f32(gv[j], uv[j]));
                } else {
                    for (size_t j = j0; j < j0 + FL_VEC && j < C; j++)
                        rm = fl_amax_update(rm, fl_swiglu_f32(G::load(g[rb + j]) * mg, G::load(u[rb + j]) * mu));
                }
            }
            s_row = fl_smooth_scale_f32(fl_block_amax(rm, sh));
            if (threadIdx.x == 0)
                s[row] = s_row;
        } else if (per_token) {
            s_row = s[row];
        }
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
            smooth_swiglu_fwd_kernel<G, Y><<<fl_row_grid(R), FL_RED_THREADS, 0, st>>>(
                (typename Y::storage *)y.data, s, (const typename G::storage *)g.data,
                (const typename G::storage *)u.data, g.scale_inv, u.scale_inv, fl_out_mul(y), y.amax, R, C,
                per_token, compute && per_token, vec_ok);
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
