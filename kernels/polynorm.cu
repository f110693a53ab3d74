// polynorm.cu — PolyNorm forward and backward kernels (CPU twins: kernels/polynorm.c).
//
// One block of FL_RED_THREADS threads per row (a token's hidden vector of H elements; blocks loop over
// rows with a grid stride).  Pass 1 reduces the row (forward: S_i = sum u_i^2; backward: also
// D_i = sum dy u_i) in the fixed order of activations.h section 6; pass 2 re-reads the row -- from L1
// or L2: a block's row is at most a few tens of KiB -- and writes the output.  DRAM traffic is one
// read of each input and one write: forward 4 B/element (bf16 -> bf16), backward 6 B/element.
// The backward's coefficient gradients: each row's partials go to ws (R x (order + 1)), reduced by a
// single-block kernel in the order of fl_partials_sum_order.
#include "kernels.h"

namespace {

template <class X, class Y>
__global__ void __launch_bounds__(FL_RED_THREADS)
polynorm_fwd_kernel(typename Y::storage *__restrict__ y, const typename X::storage *__restrict__ x,
                    const float *x_mul, const float *y_mul, float *amax, size_t R, size_t H,
                    fl_poly_coef c, float eps, int vec_ok)
{
    __shared__ float sh[FL_RED_THREADS / 32];
    const float mx = x_mul ? *x_mul : 1.0f, my = y_mul ? *y_mul : 1.0f;
    const size_t nvec = (H + FL_VEC - 1) / FL_VEC;
    float am = 0.0f;
    for (size_t row = blockIdx.x; row < R; row += gridDim.x) {
        const typename X::storage *xr = x + row * H;
        typename Y::storage *yr = y + row * H;
        float S[FL_POLY_MAX_ORDER + 1] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
        for (size_t v = threadIdx.x; v < nvec; v += FL_RED_THREADS) {
            const size_t j0 = v * FL_VEC;
            if (vec_ok && j0 + FL_VEC <= H) {
                float xv[FL_VEC];
                fl_load_vec<X>(xv, xr + j0, mx);
#pragma unroll
                for (int j = 0; j < FL_VEC; j++)
                    fl_polynorm_fwd_accum(S, c.order, xv[j]);
            } else {
                for (size_t j = j0; j < j0 + FL_VEC && j < H; j++)
                    fl_polynorm_fwd_accum(S, c.order, X::load(xr[j]) * mx);
            }
        }
#pragma unroll
        for (int i = 1; i <= FL_POLY_MAX_ORDER; i++)
            if (i <= c.order)
                S[i] = fl_block_sum(S[i], sh);
        float cr[FL_POLY_MAX_ORDER + 1] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
        fl_polynorm_fwd_consts(cr, S, &c, (float)H, eps);
        for (size_t v = threadIdx.x; v < nvec; v += FL_RED_THREADS) {
            const size_t j0 = v * FL_VEC;
            if (vec_ok && j0 + FL_VEC <= H) {
                float xv[FL_VEC], o[FL_VEC];
                fl_load_vec<X>(xv, xr + j0, mx);
#pragma unroll
                for (int j = 0; j < FL_VEC; j++) {
                    o[j] = fl_polynorm_out_f32(cr, c.a[0], c.order, xv[j]);
                    am = fl_amax_update(am, o[j]);
                }
                fl_store_vec<Y>(yr + j0, o, my);
            } else {
                for (size_t j = j0; j < j0 + FL_VEC && j < H; j++) {
                    const float o = fl_polynorm_out_f32(cr, c.a[0], c.order, X::load(xr[j]) * mx);
                    am = fl_amax_update(am, o);
                    fl_store_one<Y>(yr + j, o, my);
                }
            }
        }
    }
    fl_block_amax_publish(amax, am, sh);
}

template <class X, class DY, class DX>
__global__ void __launch_bounds__(FL_RED_THREADS)
polynorm_bwd_kernel(typename DX::storage *__restrict__ dx, float *__restrict__ ws,
                    const typename X::storage *__restrict__ x, const typename DY::storage *__restrict__ dy,
                    const float *x_mul, const float *dy_mul, const float *dx_mul, float *amax, size_t R,
                    size_t H, fl_poly_coef c, float eps, int vec_ok)
{
    __shared__ float sh[FL_RED_THREADS / 32];
    const float mx = x_mul ? *x_mul : 1.0f, md = dy_mul ? *dy_mul : 1.0f, mo = dx_mul ? *dx_mul : 1.0f;
    const size_t nvec = (H + FL_VEC - 1) / FL_VEC;
    float am = 0.0f;
    for (size_t row = blockIdx.x; row < R; row += gridDim.x) {
        const typename X::storage *xr = x + row * H;
        const typename DY::storage *dr = dy + row * H;
        typename DX::storage *outr = dx + row * H;
        float S[FL_POLY_MAX_ORDER + 1] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
        float D[FL_POLY_MAX_ORDER + 1] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
        for (size_t v = threadIdx.x; v < nvec; v += FL_RED_THREADS) {
            const size_t j0 = v * FL_VEC;
            if (vec_ok && j0 + FL_VEC <= H) {
                float xv[FL_VEC], g[FL_VEC];
                fl_load_vec<X>(xv, xr + j0, mx);
                fl_load_vec<DY>(g, dr + j0, md);
#pragma unroll
                for (int j = 0; j < FL_VEC; j++)
                    fl_polynorm_bwd_accum(S, D, c.order, xv[j], g[j]);
            } else {
                for (size_t j = j0; j < j0 + FL_VEC && j < H; j++)
                    fl_polynorm_bwd_accum(S, D, c.order, X::load(xr[j]) * mx, DY::load(dr[j]) * md);
            }
        }
#pragma unroll
        for (int i = 0; i <= FL_POLY_MAX_ORDER; i++)
            if (i <= c.order) {
                if (i > 0)
                    S[i] = fl_block_sum(S[i], sh);
                D[i] = fl_block_sum(D[i], sh);
            }
        float r[FL_POLY_MAX_ORDER + 1] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
        float w[FL_POLY_MAX_ORDER + 1] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
        float b[FL_POLY_MAX_ORDER + 1] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
        float pa[FL_POLY_MAX_ORDER + 1] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
        fl_polynorm_bwd_consts(r, w, b, pa, S, D, &c, (float)H, eps);
        if (ws && threadIdx.x == 0) {
#pragma unroll
            for (int k = 0; k <= FL_POLY_MAX_ORDER; k++)
                if (k <= c.order)
                    ws[row * (c.order + 1) + k] = pa[k];
        }
        for (size_t v = threadIdx.x; v < nvec; v += FL_RED_THREADS) {
            const size_t j0 = v * FL_VEC;
            if (vec_ok && j0 + FL_VEC <= H) {
                float xv[FL_VEC], g[FL_VEC], o[FL_VEC];
                fl_load_vec<X>(xv, xr + j0, mx);
                fl_load_vec<DY>(g, dr + j0, md);
#pragma unroll
                for (int j = 0; j < FL_VEC; j++) {
                    o[j] = fl_polynorm_grad_f32(r, w, b, c.order, xv[j], g[j]);
                    am = fl_amax_update(am, o[j]);
                }
                fl_store_vec<DX>(outr + j0, o, mo);
            } else {
                for (size_t j = j0; j < j0 + FL_VEC && j < H; j++) {
                    const float o = fl_polynorm_grad_f32(r, w, b, c.order, X::load(xr[j]) * mx, DY::load(dr[j]) * md);
                    am = fl_amax_update(am, o);
                    fl_store_one<DX>(outr + j, o, mo);
                }
            }
        }
    }
    fl_block_amax_publish(amax, am, sh);
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
    return fl_io_dispatch_fwd(x.fmt, [&](auto xi) {
        return fl_io_dispatch_fwd(y.fmt, [&](auto yi) {
            using X = decltype(xi);
            using Y = decltype(yi);
            polynorm_fwd_kernel<X, Y><<<fl_row_grid(R), FL_RED_THREADS, 0, (cudaStream_t)stream>>>(
                (typename Y::storage *)y.data, (const typename X::storage *)x.data, x.scale_inv, fl_out_mul(y),
                y.amax, R, H, cc, eps, vec_ok);
            FL_CUDA_CHECK(cudaGetLastError());
            return 0;
        });
    });
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
        polynorm_bwd_kernel<X, DY, DX><<<fl_row_grid(R), FL_RED_THREADS, 0, (cudaStream_t)stream>>>(
            (typename DX::storage *)dx.data, wsp, (const typename X::storage *)x.data,
            (const typename DY::storage *)dy.data, x.scale_inv, dy.scale_inv, fl_out_mul(dx), dx.amax, R, H, cc,
            eps, vec_ok);
        FL_CUDA_CHECK(cudaGetLastError());
        return 0;
    });
}
