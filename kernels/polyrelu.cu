// polyrelu.cu — PolyReLU forward and backward kernels (CPU twins: kernels/polyrelu.c).
//
// Forward: the generic elementwise kernel (activations.h) over fl_polyrelu_f32.  Bytes per element:
// in + out (bf16->bf16 4, bf16->e4m3 3, e4m3->bf16 3).
// Backward: dx = dy * PolyReLU'(x), plus the coefficient gradients da_k = sum dy relu(x)^k, which are
// reduced in the tile order of activations.h section 6: each tile of FL_TILE elements is one block's
// unit of work (4 vectors per thread, then the block tree of fl_block_sums for all order + 1 sums at
// once), its partials go to ws, and a second
// single-block kernel reduces the tile partials.  The order depends only on n, never on the grid.
#include "kernels.h"

namespace {

struct op_polyrelu_fwd {
    static constexpr int n_in = 1, n_out = 1;
    struct params {
        fl_poly_coef c;
    };
    static __device__ __forceinline__ void apply(size_t, const float *e, float *o, const params &p)
    {
        o[0] = fl_polyrelu_f32(&p.c, e[0]);
        o[1] = 0.0f;
    }
};

// One tile per iteration of the block loop.  Thread t handles vectors t, t + 256, t + 512, t + 768
// of the tile; the coefficient terms accumulate element by element in that order.
template <class X, class DY, class DX>
__global__ void __launch_bounds__(FL_RED_THREADS, 4) /* 64 registers: 4 blocks per SM keep enough loads in flight */
polyrelu_bwd_kernel(typename DX::storage *__restrict__ dx, float *__restrict__ ws,
                    const typename X::storage *__restrict__ x, const typename DY::storage *__restrict__ dy,
                    const float *x_mul, const float *dy_mul, const float *dx_mul, float *amax, size_t n,
                    size_t ntiles, fl_poly_coef c, int vec_ok)
{
    __shared__ float sh[FL_RED_THREADS / 32];
    __shared__ float shs[(FL_POLY_MAX_ORDER + 1) * FL_RED_WARPS];
    const float mx = x_mul ? *x_mul : 1.0f, md = dy_mul ? *dy_mul : 1.0f, mo = dx_mul ? *dx_mul : 1.0f;
    float am = 0.0f;
    for (size_t tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
        float acc[FL_POLY_MAX_ORDER + 1] = { 0.0f, 0.0f, 0.0f, 0.0f, 0.0f };
        for (int it = 0; it < FL_TILE_ITERS; it++) {
            const size_t v0 = tile * FL_TILE + ((size_t)it * FL_RED_THREADS + threadIdx.x) * FL_VEC;
            if (v0 >= n)
                break;
            if (vec_ok && v0 + FL_VEC <= n) {
                float xv[FL_VEC], g[FL_VEC], d[FL_VEC];
                fl_load_vec<X>(xv, x + v0, mx);
                fl_load_vec<DY>(g, dy + v0, md);
#pragma unroll
                for (int j = 0; j < FL_VEC; j++) {
                    d[j] = g[j] * fl_polyrelu_grad_f32(&c, xv[j]);
                    am = fl_amax_update(am, d[j]);
                    if (ws) {
                        float t[FL_POLY_MAX_ORDER + 1];
                        fl_polyrelu_coef_terms(t, c.order, xv[j], g[j]);
#pragma unroll
                        for (int k = 0; k <= FL_POLY_MAX_ORDER; k++)
                            if (k <= c.order)
                                acc[k] = acc[k] + t[k];
                    }
                }
                fl_store_vec<DX>(dx + v0, d, mo);
            } else {
                for (size_t i = v0; i < v0 + FL_VEC && i < n; i++) {
                    const float xv = X::load(x[i]) * mx, g = DY::load(dy[i]) * md;
                    const float d = g * fl_polyrelu_grad_f32(&c, xv);
                    am = fl_amax_update(am, d);
                    fl_store_one<DX>(dx + i, d, mo);
                    if (ws) {
                        float t[FL_POLY_MAX_ORDER + 1];
                        fl_polyrelu_coef_terms(t, c.order, xv, g);
#pragma unroll
                        for (int k = 0; k <= FL_POLY_MAX_ORDER; k++)
                            if (k <= c.order)
                                acc[k] = acc[k] + t[k];
                    }
                }
            }
        }
        if (ws) {
            fl_block_sums<FL_POLY_MAX_ORDER + 1>(acc, shs); /* one pair of barriers; unused orders sum zeros */
            if (threadIdx.x == 0)
                for (int k = 0; k <= c.order; k++)
                    ws[tile * (c.order + 1) + k] = acc[k];
        }
    }
    fl_block_amax_publish(amax, am, sh);
}

} // namespace

extern "C" int fl_cuda_polyrelu_fwd(fl_kout y, fl_kin x, size_t n, const fl_poly_coef *c, void *stream)
{
    FL_LAUNCH_REQUIRE(c && c->order >= 2 && c->order <= FL_POLY_MAX_ORDER, "order %d", c ? c->order : -1);
    FL_LAUNCH_REQUIRE(x.data && y.data, "NULL data");
    if (n == 0)
        return 0;
    const fl_ew_args a = fl_ew_args_of(n, { x }, { y });
    const op_polyrelu_fwd::params p = { *c };
    if (fl_io_all_f32({ x.fmt, y.fmt }))
        return fl_ew_launch<op_polyrelu_fwd, fl_io_f32, fl_io_none, fl_io_none, fl_io_f32, fl_io_none>(a, p, stream);
    return fl_io_dispatch_fwd(x.fmt, [&](auto xi) {
        return fl_io_dispatch_fwd(y.fmt, [&](auto yi) {
            return fl_ew_launch<op_polyrelu_fwd, decltype(xi), fl_io_none, fl_io_none, decltype(yi), fl_io_none>(
                a, p, stream);
        });
    });
}

extern "C" size_t fl_cuda_polyrelu_ws_floats(size_t n, int order)
{
    return (n + FL_TILE - 1) / FL_TILE * (size_t)(order + 1);
}

extern "C" int fl_cuda_polyrelu_bwd(fl_kout dx, float *da, float *ws, fl_kin x, fl_kin dy, size_t n,
                                    const fl_poly_coef *c, void *stream)
{
    FL_LAUNCH_REQUIRE(c && c->order >= 2 && c->order <= FL_POLY_MAX_ORDER, "order %d", c ? c->order : -1);
    FL_LAUNCH_REQUIRE(x.data && dy.data && dx.data, "NULL data");
    FL_LAUNCH_REQUIRE(!da || ws, "coefficient gradients need a workspace of fl_cuda_polyrelu_ws_floats() floats");
    const size_t ntiles = (n + FL_TILE - 1) / FL_TILE;
    const int vec_ok = fl_io_aligned(x.data) && fl_io_aligned(dy.data) && fl_io_aligned(dx.data);
    const unsigned grid = (unsigned)(ntiles < 65535 ? ntiles : 65535);
    const fl_poly_coef cc = *c;
    // one partial row per tile
    return fl_coef_bwd(da, ws, ntiles, c->order, x.fmt, dy.fmt, dx.fmt, stream, [&](auto xi, auto di, auto oi, float *wsp) {
        using X = decltype(xi);
        using DY = decltype(di);
        using DX = decltype(oi);
        polyrelu_bwd_kernel<X, DY, DX><<<grid, FL_RED_THREADS, 0, (cudaStream_t)stream>>>(
            (typename DX::storage *)dx.data, wsp, (const typename X::storage *)x.data,
            (const typename DY::storage *)dy.data, x.scale_inv, dy.scale_inv, fl_out_mul(dx), dx.amax, n, ntiles,
            cc, vec_ok);
        FL_CUDA_CHECK(cudaGetLastError());
        return 0;
    });
}
