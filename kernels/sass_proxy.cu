/* sass_proxy.cu — one tiny kernel per element function of activations.h, for the static cost proxy
 * (`make sass-proxy`, kernels/sass_proxy.sh; not part of libfp8lab_cuda.a).
 *
 * Every kernel has the same frame: thread i < n loads element i of NI fp32 inputs, applies one element
 * function and stores NO fp32 outputs; a kernel is named fl_sp_<function>_i<NI>o<NO>.
 * fl_sp_copy_i<NI>o<NO> is the frame alone (output k = input 0; the other inputs are kept alive by an
 * empty asm, which emits nothing), so
 *     instructions(element function) = instructions(kernel) - instructions(copy kernel of its NI, NO).
 * Per-row or per-tensor constants (coefficients, PolyNorm's row factors, running sums) are kernel
 * parameters: they live in the constant bank, as in the real kernels, and cannot be folded.
 * extern "C" keeps the SASS names readable without a demangler. */
#include "activations.h"

namespace {

struct sp_args {
    const float *x[3]; /* (n) each; NI of them are read */
    float *y[9];       /* (n) each; NO of them are written */
    int n;
};

struct sp_params {
    fl_poly_coef c; /* PolyReLU coefficients / PolyNorm's a */
    float k[3][FL_POLY_MAX_ORDER + 1]; /* PolyNorm row constants: cr / rinv, w, b; accum start values */
};

template <int NI> __device__ __forceinline__ void sp_load(float *e, const sp_args &a, int i)
{
#pragma unroll
    for (int k = 0; k < NI; k++)
        e[k] = a.x[k][i];
}

template <int NO> __device__ __forceinline__ void sp_store(const sp_args &a, int i, const float *o)
{
#pragma unroll
    for (int k = 0; k < NO; k++)
        a.y[k][i] = o[k];
}

} // namespace

/* FL_SP(name, NI, NO, body...): the body reads e[0..NI), the parameters p, and writes o[0..NO). */
#define FL_SP(name, NI, NO, ...)                                                                         \
    extern "C" __global__ void __launch_bounds__(FL_RED_THREADS)                                        \
        fl_sp_##name##_i##NI##o##NO(sp_args a, sp_params p)                                              \
    {                                                                                                    \
        const int i = blockIdx.x * blockDim.x + threadIdx.x;                                             \
        if (i >= a.n)                                                                                    \
            return;                                                                                      \
        float e[NI], o[NO];                                                                              \
        sp_load<NI>(e, a, i);                                                                            \
        (void)p;                                                                                         \
        __VA_ARGS__;                                                                                            \
        sp_store<NO>(a, i, o);                                                                           \
    }

/* The frames: output k = input 0; the other inputs kept live. */
#define FL_SP_COPY(NI, NO)                                                                               \
    FL_SP(copy, NI, NO, {                                                                    \
        for (int k = 1; k < NI; k++)                                                                     \
            asm volatile("" ::"f"(e[k]));                                                                \
        for (int k = 0; k < NO; k++)                                                                     \
            o[k] = e[0];                                                                                 \
    })
FL_SP_COPY(1, 1)
FL_SP_COPY(2, 1)
FL_SP_COPY(1, 2)
FL_SP_COPY(2, 3)
FL_SP_COPY(2, 4)
FL_SP_COPY(2, 5)
FL_SP_COPY(3, 2)
FL_SP_COPY(1, 3)
FL_SP_COPY(1, 4)
FL_SP_COPY(2, 7)
FL_SP_COPY(2, 9)

/* section 1-3: exp, sigmoid, SiLU, SwiGLU, amax */
FL_SP(expf_hd, 1, 1, o[0] = fl_expf_hd(e[0]))
FL_SP(sigmoid_f32, 1, 1, o[0] = fl_sigmoid_f32(e[0]))
FL_SP(silu_f32, 1, 1, o[0] = fl_silu_f32(e[0]))
FL_SP(silu_grad_f32, 1, 1, o[0] = fl_silu_grad_f32(e[0]))
FL_SP(swiglu_f32, 2, 1, o[0] = fl_swiglu_f32(e[0], e[1]))
FL_SP(swiglu_grad_f32, 3, 2, fl_swiglu_grad_f32(&o[0], &o[1], e[0], e[1], e[2]))
FL_SP(amax_update, 2, 1, o[0] = fl_amax_update(e[0], e[1]))

/* section 4: PolyReLU and PolyNorm, orders 2..4 (the order is a compile-time constant, as in the
   kernels, which are instantiated per order) */
#define FL_SP_POLY(R, R1, R2) /* R1 = R + 1, R2 = 2 R + 1 */                                                                               \
    FL_SP(polyrelu_f32_r##R, 1, 1, {                                                                     \
        fl_poly_coef c = p.c;                                                                            \
        c.order = R;                                                                                     \
        o[0] = fl_polyrelu_f32(&c, e[0]);                                                                \
    })                                                                                                   \
    FL_SP(polyrelu_grad_f32_r##R, 1, 1, {                                                                \
        fl_poly_coef c = p.c;                                                                            \
        c.order = R;                                                                                     \
        o[0] = fl_polyrelu_grad_f32(&c, e[0]);                                                           \
    })                                                                                                   \
    FL_SP(polyrelu_coef_terms_r##R, 2, R1, fl_polyrelu_coef_terms(o, R, e[0], e[1]))                 \
    FL_SP(polynorm_out_f32_r##R, 1, 1, o[0] = fl_polynorm_out_f32(p.k[0], p.c.a[0], R, e[0]))           \
    FL_SP(polynorm_grad_f32_r##R, 2, 1, o[0] = fl_polynorm_grad_f32(p.k[0], p.k[1], p.k[2], R, e[0], e[1])) \
    FL_SP(polynorm_fwd_accum_r##R, 1, R, {                                                               \
        float S[FL_POLY_MAX_ORDER + 1];                                                                  \
        for (int k = 0; k <= FL_POLY_MAX_ORDER; k++)                                                     \
            S[k] = p.k[0][k];                                                                            \
        fl_polynorm_fwd_accum(S, R, e[0]);                                                               \
        for (int k = 0; k < R; k++)                                                                      \
            o[k] = S[k + 1];                                                                             \
    })                                                                                                   \
    FL_SP(polynorm_bwd_accum_r##R, 2, R2, {                                                       \
        float S[FL_POLY_MAX_ORDER + 1], D[FL_POLY_MAX_ORDER + 1];                                        \
        for (int k = 0; k <= FL_POLY_MAX_ORDER; k++) {                                                   \
            S[k] = p.k[0][k];                                                                            \
            D[k] = p.k[1][k];                                                                            \
        }                                                                                                \
        fl_polynorm_bwd_accum(S, D, R, e[0], e[1]);                                                      \
        for (int k = 0; k <= R; k++)                                                                     \
            o[k] = D[k];                                                                                 \
        for (int k = 0; k < R; k++)                                                                      \
            o[R + 1 + k] = S[k + 1];                                                                     \
    })
FL_SP_POLY(2, 3, 5)
FL_SP_POLY(3, 4, 7)
FL_SP_POLY(4, 5, 9)
