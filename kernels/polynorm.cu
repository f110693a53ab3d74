// polynorm.cu — PolyNorm forward and backward kernels (CPU twins: kernels/polynorm.c).
//
// One block of FL_RED_THREADS threads per row (a token's hidden vector of H elements; blocks loop over
// rows with a grid stride).  Pass 1 reduces the row (forward: S_i = sum u_i^2; backward: also
// D_i = sum dy u_i) in the fixed order of activations.h section 6; all of a row's sums go through one
// block reduction (fl_block_sums: one pair of barriers for the 2 to 9 values).  Pass 2 writes:
//   - KEEP (rows of at most FL_RED_THREADS vectors, H <= 4096): each thread owns at most one vector and
//     keeps its raw 16-byte words in registers from pass 1 to pass 2, where it decodes them again --
//     one pass over memory;
//   - longer rows: pass 2 re-reads the row (from L1 or L2: a block's row is a few tens of KiB).  Keeping
//     2 or more vectors per thread would take 8 to 32 more registers in every launch of the kernel.
// DRAM traffic is one read of each input and one write: forward 4 B/element (bf16 -> bf16), backward
// 6 B/element.  The order and KEEP are template parameters (the launchers dispatch them), so the
// per-element code has no branches on the order.
// The backward's coefficient gradients: each row's partials go to ws (R x (order + 1)), reduced by a
// single-block kernel in the order of fl_partials_sum_order.
//
// Why the bits equal the CPU twin's:
//   - Thread t visits vectors t, t + 256, ... ascending and adds each vector's elements ascending into
//     running sums that start at +0, through fl_polynorm_{fwd,bwd}_accum; a kept vector is the same
//     16-byte words decoded by the same exact IO::load times the same multiplier as fl_load_vec, so
//     both passes see the values the twin's fl_kin_get gives.  Threads without a vector contribute +0.
//   - fl_block_sums reduces each value exactly as fl_block_sum does: the warp butterfly
//     v = v + shfl_xor(v, off), off = 16, 8, 4, 2, 1; lane 0 of warp k stores warp sum k; the 8 warp
//     sums of a value sit in 8 consecutive lanes 8g + i (i = warp) and combine by
//     w = w + shfl_xor(w, off), off = 4, 2, 1 -- an xor below 8 stays inside the group, so lane 8g + i
//     performs lane i's additions of fl_block_sum on the same operands in the same order -- and every
//     thread takes lane 8g's result (fl_block_sum: lane 0's).  Sharing the barriers between values
//     adds, removes or reorders no addition.  Both are fl_tree_sum's tree (section 6).
//   - ORDER equals c.order (the launchers dispatch on it), so the element and per-row functions get
//     the same arguments; --fmad=false and no fast-math, so folding the order contracts nothing.
#include "kernels.h"

#include <type_traits>

namespace {

static_assert(FL_RED_WARPS == 8, "fl_block_sums packs the warp sums of 32 / 8 values per warp");
static_assert(FL_POLY_MAX_ORDER == 4, "the launchers dispatch orders 2, 3, 4");

// Resident blocks per SM the kernels are compiled for (__launch_bounds__): register caps of 32
// (forward) and 48 (backward; 64 on sm_100) per thread, the lowest without spills for every format; a block waits
// on its row's loads and on the block reduction, so more resident rows keep more loads in flight.
// SMs of 1536 threads (sm_86, sm_87, sm_89, sm_12x) hold 6 blocks of 256: a cap of 40 registers.
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ == 860 || __CUDA_ARCH__ == 870 || __CUDA_ARCH__ == 890 || __CUDA_ARCH__ >= 1200)
constexpr int PN_FWD_MIN_BLOCKS = 6;
#else
constexpr int PN_FWD_MIN_BLOCKS = 8;
#endif
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
constexpr int PN_BWD_MIN_BLOCKS = 4; /* sm_100: the amax update takes more registers (activations.h) */
#else
constexpr int PN_BWD_MIN_BLOCKS = 5;
#endif

// A vector of FL_VEC elements as loaded: its 16-byte words, decoded on use (fl_load_vec in two steps).
template <class IO> struct pn_raw {
    uint4 w[fl_vec<IO>::words];
};

template <class IO> __device__ __forceinline__ void pn_load_raw(pn_raw<IO> &r, const typename IO::storage *p)
{
    const uint4 *q = reinterpret_cast<const uint4 *>(p);
#pragma unroll
    for (int w = 0; w < fl_vec<IO>::words; w++)
        r.w[w] = __ldg(q + w);
}

template <class IO> __device__ __forceinline__ void pn_decode(float *f, const pn_raw<IO> &r, float mul)
{
    constexpr int per = 16 / (int)sizeof(typename IO::storage);
#pragma unroll
    for (int w = 0; w < fl_vec<IO>::words; w++) {
        const typename IO::storage *s = reinterpret_cast<const typename IO::storage *>(&r.w[w]);
#pragma unroll
        for (int j = 0; j < per; j++)
            f[w * per + j] = IO::load(s[j]) * mul;
    }
}

// ---- forward ------------------------------------------------------------------------------------

// Pass 1 over the elements j0 .. min(j0 + FL_VEC, H) - 1 of a row, element by element (tails, unaligned).
template <class X, int ORDER>
__device__ __forceinline__ void pn_fwd_accum_one(float *S, const typename X::storage *xr, unsigned j0, unsigned H, float mx)
{
    for (unsigned j = j0; j < j0 + FL_VEC && j < H; j++)
        fl_polynorm_fwd_accum(S, ORDER, X::load(xr[j]) * mx);
}

template <class X, class Y, int ORDER>
__device__ __forceinline__ void pn_fwd_out_one(typename Y::storage *yr, const typename X::storage *xr, unsigned j0,
                                               unsigned H, const float *cr, float a0, float mx, float my, float &am)
{
    for (unsigned j = j0; j < j0 + FL_VEC && j < H; j++) {
        const float o = fl_polynorm_out_f32(cr, a0, ORDER, X::load(xr[j]) * mx);
        am = fl_amax_update(am, o);
        fl_store_one<Y>(yr + j, o, my);
    }
}

template <class Y, int ORDER>
__device__ __forceinline__ void pn_fwd_out_vec(typename Y::storage *p, const float *xv, const float *cr, float a0,
                                               float my, float &am)
{
    float o[FL_VEC];
#pragma unroll
    for (int j = 0; j < FL_VEC; j++) {
        o[j] = fl_polynorm_out_f32(cr, a0, ORDER, xv[j]);
        am = fl_amax_update(am, o[j]);
    }
    fl_store_vec<Y>(p, o, my);
}

template <class X, class Y, int ORDER, bool KEEP>
__global__ void __launch_bounds__(FL_RED_THREADS, PN_FWD_MIN_BLOCKS)
polynorm_fwd_kernel(typename Y::storage *__restrict__ y, const typename X::storage *__restrict__ x,
                    const float *x_mul, const float *y_mul, float *amax, size_t R, size_t H,
                    fl_poly_coef c, float eps, int vec_ok)
{
    __shared__ float sh[ORDER * FL_RED_WARPS];
    const float mx = x_mul ? *x_mul : 1.0f, my = y_mul ? *y_mul : 1.0f;
    const unsigned h = (unsigned)H; /* < 2^24 (the launchers' precondition): 32-bit indices in a row */
    const unsigned nvec = (h + FL_VEC - 1) / FL_VEC;
    const unsigned t = threadIdx.x;
    float am = 0.0f;
    for (size_t row = blockIdx.x; row < R; row += gridDim.x) {
        const typename X::storage *xr = x + row * H;
        typename Y::storage *yr = y + row * H;
        float S[FL_POLY_MAX_ORDER + 1] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
        pn_raw<X> xk; /* keep: the thread's vector t (when t < nvec and it is a full aligned vector) */
        if constexpr (KEEP) {
            if (t < nvec) {
                if (vec_ok && t * FL_VEC + FL_VEC <= h) {
                    float xv[FL_VEC];
                    pn_load_raw<X>(xk, xr + t * FL_VEC);
                    pn_decode<X>(xv, xk, mx);
#pragma unroll
                    for (int j = 0; j < FL_VEC; j++)
                        fl_polynorm_fwd_accum(S, ORDER, xv[j]);
                } else {
                    pn_fwd_accum_one<X, ORDER>(S, xr, t * FL_VEC, h, mx);
                }
            }
        } else {
            for (unsigned v = t; v < nvec; v += FL_RED_THREADS) {
                const unsigned j0 = v * FL_VEC;
                if (vec_ok && j0 + FL_VEC <= h) {
                    float xv[FL_VEC];
                    fl_load_vec<X>(xv, xr + j0, mx);
#pragma unroll
                    for (int j = 0; j < FL_VEC; j++)
                        fl_polynorm_fwd_accum(S, ORDER, xv[j]);
                } else {
                    pn_fwd_accum_one<X, ORDER>(S, xr, j0, h, mx);
                }
            }
        }
        fl_block_sums<ORDER>(S + 1, sh);
        float cr[FL_POLY_MAX_ORDER + 1] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
        fl_polynorm_fwd_consts(cr, S, &c, (float)H, eps);
        if constexpr (KEEP) {
            if (t < nvec) {
                if (vec_ok && t * FL_VEC + FL_VEC <= h) {
                    float xv[FL_VEC];
                    pn_decode<X>(xv, xk, mx);
                    pn_fwd_out_vec<Y, ORDER>(yr + t * FL_VEC, xv, cr, c.a[0], my, am);
                } else {
                    pn_fwd_out_one<X, Y, ORDER>(yr, xr, t * FL_VEC, h, cr, c.a[0], mx, my, am);
                }
            }
        } else {
            for (unsigned v = t; v < nvec; v += FL_RED_THREADS) {
                const unsigned j0 = v * FL_VEC;
                if (vec_ok && j0 + FL_VEC <= h) {
                    float xv[FL_VEC];
                    fl_load_vec<X>(xv, xr + j0, mx);
                    pn_fwd_out_vec<Y, ORDER>(yr + j0, xv, cr, c.a[0], my, am);
                } else {
                    pn_fwd_out_one<X, Y, ORDER>(yr, xr, j0, h, cr, c.a[0], mx, my, am);
                }
            }
        }
    }
    fl_block_amax_publish(amax, am, sh);
}

// ---- backward -----------------------------------------------------------------------------------

template <class X, class DY, int ORDER>
__device__ __forceinline__ void pn_bwd_accum_one(float *S, float *D, const typename X::storage *xr,
                                                 const typename DY::storage *dr, unsigned j0, unsigned H, float mx, float md)
{
    for (unsigned j = j0; j < j0 + FL_VEC && j < H; j++)
        fl_polynorm_bwd_accum(S, D, ORDER, X::load(xr[j]) * mx, DY::load(dr[j]) * md);
}

template <int ORDER>
__device__ __forceinline__ void pn_bwd_accum_vec(float *S, float *D, const float *xv, const float *g)
{
#pragma unroll
    for (int j = 0; j < FL_VEC; j++)
        fl_polynorm_bwd_accum(S, D, ORDER, xv[j], g[j]);
}

template <class X, class DY, class DX, int ORDER>
__device__ __forceinline__ void pn_bwd_out_one(typename DX::storage *outr, const typename X::storage *xr,
                                               const typename DY::storage *dr, unsigned j0, unsigned H, const float *r,
                                               const float *w, const float *b, float mx, float md, float mo, float &am)
{
    for (unsigned j = j0; j < j0 + FL_VEC && j < H; j++) {
        const float o = fl_polynorm_grad_f32(r, w, b, ORDER, X::load(xr[j]) * mx, DY::load(dr[j]) * md);
        am = fl_amax_update(am, o);
        fl_store_one<DX>(outr + j, o, mo);
    }
}

template <class DX, int ORDER>
__device__ __forceinline__ void pn_bwd_out_vec(typename DX::storage *p, const float *xv, const float *g, const float *r,
                                               const float *w, const float *b, float mo, float &am)
{
    float o[FL_VEC];
#pragma unroll
    for (int j = 0; j < FL_VEC; j++) {
        o[j] = fl_polynorm_grad_f32(r, w, b, ORDER, xv[j], g[j]);
        am = fl_amax_update(am, o[j]);
    }
    fl_store_vec<DX>(p, o, mo);
}

template <class X, class DY, class DX, int ORDER, bool KEEP>
__global__ void __launch_bounds__(FL_RED_THREADS, PN_BWD_MIN_BLOCKS)
polynorm_bwd_kernel(typename DX::storage *__restrict__ dx, float *__restrict__ ws,
                    const typename X::storage *__restrict__ x, const typename DY::storage *__restrict__ dy,
                    const float *x_mul, const float *dy_mul, const float *dx_mul, float *amax, size_t R,
                    size_t H, fl_poly_coef c, float eps, int vec_ok)
{
    constexpr int NV = 2 * ORDER + 1; /* D_0, S_1, D_1, ..., S_ORDER, D_ORDER */
    __shared__ float sh[NV * FL_RED_WARPS];
    c.order = ORDER; /* the launcher's c->order: lets the per-row functions fold it */
    const float mx = x_mul ? *x_mul : 1.0f, md = dy_mul ? *dy_mul : 1.0f, mo = dx_mul ? *dx_mul : 1.0f;
    const unsigned h = (unsigned)H; /* < 2^24 (the launchers' precondition): 32-bit indices in a row */
    const unsigned nvec = (h + FL_VEC - 1) / FL_VEC;
    const unsigned t = threadIdx.x;
    float am = 0.0f;
    for (size_t row = blockIdx.x; row < R; row += gridDim.x) {
        const typename X::storage *xr = x + row * H;
        const typename DY::storage *dr = dy + row * H;
        typename DX::storage *outr = dx + row * H;
        float S[FL_POLY_MAX_ORDER + 1] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
        float D[FL_POLY_MAX_ORDER + 1] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
        pn_raw<X> xk; /* keep: the thread's vectors t of x and dy (full aligned vectors only) */
        pn_raw<DY> gk;
        if constexpr (KEEP) {
            if (t < nvec) {
                if (vec_ok && t * FL_VEC + FL_VEC <= h) {
                    float xv[FL_VEC], g[FL_VEC];
                    pn_load_raw<X>(xk, xr + t * FL_VEC);
                    pn_load_raw<DY>(gk, dr + t * FL_VEC);
                    pn_decode<X>(xv, xk, mx);
                    pn_decode<DY>(g, gk, md);
                    pn_bwd_accum_vec<ORDER>(S, D, xv, g);
                } else {
                    pn_bwd_accum_one<X, DY, ORDER>(S, D, xr, dr, t * FL_VEC, h, mx, md);
                }
            }
        } else {
            for (unsigned v = t; v < nvec; v += FL_RED_THREADS) {
                const unsigned j0 = v * FL_VEC;
                if (vec_ok && j0 + FL_VEC <= h) {
                    float xv[FL_VEC], g[FL_VEC];
                    fl_load_vec<X>(xv, xr + j0, mx);
                    fl_load_vec<DY>(g, dr + j0, md);
                    pn_bwd_accum_vec<ORDER>(S, D, xv, g);
                } else {
                    pn_bwd_accum_one<X, DY, ORDER>(S, D, xr, dr, j0, h, mx, md);
                }
            }
        }
        float sums[NV];
        sums[0] = D[0];
#pragma unroll
        for (int i = 1; i <= ORDER; i++) {
            sums[2 * i - 1] = S[i];
            sums[2 * i] = D[i];
        }
        fl_block_sums<NV>(sums, sh);
        D[0] = sums[0];
#pragma unroll
        for (int i = 1; i <= ORDER; i++) {
            S[i] = sums[2 * i - 1];
            D[i] = sums[2 * i];
        }
        float r[FL_POLY_MAX_ORDER + 1] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
        float w[FL_POLY_MAX_ORDER + 1] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
        float b[FL_POLY_MAX_ORDER + 1] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
        float pa[FL_POLY_MAX_ORDER + 1] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
        fl_polynorm_bwd_consts(r, w, b, pa, S, D, &c, (float)H, eps);
        if (ws && threadIdx.x == 0) {
#pragma unroll
            for (int k = 0; k <= ORDER; k++)
                ws[row * (ORDER + 1) + k] = pa[k];
        }
        if constexpr (KEEP) {
            if (t < nvec) {
                if (vec_ok && t * FL_VEC + FL_VEC <= h) {
                    float xv[FL_VEC], g[FL_VEC];
                    pn_decode<X>(xv, xk, mx);
                    pn_decode<DY>(g, gk, md);
                    pn_bwd_out_vec<DX, ORDER>(outr + t * FL_VEC, xv, g, r, w, b, mo, am);
                } else {
                    pn_bwd_out_one<X, DY, DX, ORDER>(outr, xr, dr, t * FL_VEC, h, r, w, b, mx, md, mo, am);
                }
            }
        } else {
            for (unsigned v = t; v < nvec; v += FL_RED_THREADS) {
                const unsigned j0 = v * FL_VEC;
                if (vec_ok && j0 + FL_VEC <= h) {
                    float xv[FL_VEC], g[FL_VEC];
                    fl_load_vec<X>(xv, xr + j0, mx);
                    fl_load_vec<DY>(g, dr + j0, md);
                    pn_bwd_out_vec<DX, ORDER>(outr + j0, xv, g, r, w, b, mo, am);
                } else {
                    pn_bwd_out_one<X, DY, DX, ORDER>(outr, xr, dr, j0, h, r, w, b, mx, md, mo, am);
                }
            }
        }
    }
    fl_block_amax_publish(amax, am, sh);
}

// fn(order, keep) with both as std::integral_constant: order = 2, 3, 4; keep: the row has at most
// FL_RED_THREADS vectors (one per thread, kept in registers between the passes).  CAN_KEEP false (float32
// operands, whose kept words would take 16 or 32 registers more than the caps allow): never keep.
template <bool CAN_KEEP, class F> static int pn_dispatch(int order, size_t H, F fn)
{
    const bool keep = CAN_KEEP && (H + FL_VEC - 1) / FL_VEC <= FL_RED_THREADS;
    auto k = [&](auto o) {
        if constexpr (CAN_KEEP)
            return keep ? fn(o, std::integral_constant<bool, true>()) : fn(o, std::integral_constant<bool, false>());
        else
            return fn(o, std::integral_constant<bool, false>());
    };
    switch (order) {
    case 2: return k(std::integral_constant<int, 2>());
    case 3: return k(std::integral_constant<int, 3>());
    case 4: return k(std::integral_constant<int, 4>());
    default: return -1; /* refused by the launchers' preconditions */
    }
}

} // namespace

extern "C" int fl_cuda_polynorm_fwd(fl_kout y, fl_kin x, size_t R, size_t H, const fl_poly_coef *c,
                                    float eps, void *stream)
{
    FL_LAUNCH_REQUIRE(c && c->order >= 2 && c->order <= FL_POLY_MAX_ORDER, "order %d", c ? c->order : -1);
    FL_LAUNCH_REQUIRE(x.data && y.data, "NULL data");
    FL_LAUNCH_REQUIRE(H > 0 && H < (1u << 24), "row length H = %zu (float(H) must be exact)", H);
    if (R == 0)
        return 0;
    // The reduction order does not depend on alignment; only the access width does.
    const int vec_ok = H % FL_VEC == 0 && fl_io_aligned(x.data) && fl_io_aligned(y.data);
    const fl_poly_coef cc = *c;
    auto launch = [&](auto xi, auto yi) {
        using X = decltype(xi);
        using Y = decltype(yi);
        return pn_dispatch<sizeof(typename X::storage) < 4>(cc.order, H, [&](auto oi, auto keep) {
            constexpr int order = decltype(oi)::value;
            polynorm_fwd_kernel<X, Y, order, decltype(keep)::value><<<fl_row_grid(R), FL_RED_THREADS, 0, (cudaStream_t)stream>>>(
                (typename Y::storage *)y.data, (const typename X::storage *)x.data, x.scale_inv, fl_out_mul(y), y.amax, R,
                H, cc, eps, vec_ok);
            FL_CUDA_CHECK(cudaGetLastError());
            return 0;
        });
    };
    if (fl_io_all_f32({ x.fmt, y.fmt }))
        return launch(fl_io_f32(), fl_io_f32());
    return fl_io_dispatch_fwd(x.fmt, [&](auto xi) { return fl_io_dispatch_fwd(y.fmt, [&](auto yi) { return launch(xi, yi); }); });
}

extern "C" size_t fl_cuda_polynorm_ws_floats(size_t R, int order) { return R * (size_t)(order + 1); }

extern "C" int fl_cuda_polynorm_bwd(fl_kout dx, float *da, float *ws, fl_kin x, fl_kin dy, size_t R,
                                    size_t H, const fl_poly_coef *c, float eps, void *stream)
{
    FL_LAUNCH_REQUIRE(c && c->order >= 2 && c->order <= FL_POLY_MAX_ORDER, "order %d", c ? c->order : -1);
    FL_LAUNCH_REQUIRE(x.data && dy.data && dx.data, "NULL data");
    FL_LAUNCH_REQUIRE(H > 0 && H < (1u << 24), "row length H = %zu (float(H) must be exact)", H);
    FL_LAUNCH_REQUIRE(!da || ws, "coefficient gradients need a workspace of fl_cuda_polynorm_ws_floats() floats");
    const int vec_ok = H % FL_VEC == 0 && fl_io_aligned(x.data) && fl_io_aligned(dy.data) && fl_io_aligned(dx.data);
    const fl_poly_coef cc = *c;
    // one partial row per row of x
    return fl_coef_bwd(da, ws, R, c->order, x.fmt, dy.fmt, dx.fmt, stream, [&](auto xi, auto di, auto oi, float *wsp) {
        using X = decltype(xi);
        using DY = decltype(di);
        using DX = decltype(oi);
        return pn_dispatch<sizeof(typename X::storage) < 4>(cc.order, H, [&](auto ri, auto keep) {
            constexpr int order = decltype(ri)::value;
            polynorm_bwd_kernel<X, DY, DX, order, decltype(keep)::value>
                <<<fl_row_grid(R), FL_RED_THREADS, 0, (cudaStream_t)stream>>>(
                (typename DX::storage *)dx.data, wsp, (const typename X::storage *)x.data,
                (const typename DY::storage *)dy.data, x.scale_inv, dy.scale_inv, fl_out_mul(dx), dx.amax, R, H, cc,
                eps, vec_ok);
            FL_CUDA_CHECK(cudaGetLastError());
            return 0;
        });
    });
}
