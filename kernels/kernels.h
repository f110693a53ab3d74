/* kernels.h — the activation kernels' public API: CPU twins (libfp8lab.a) and CUDA launchers
 * (libfp8lab_cuda.a, built by `make cuda`).
 *
 * Every kernel exists twice with the same signature: fl_<family>_<pass>() runs on the CPU (host
 * pointers), fl_cuda_<family>_<pass>() launches on the GPU (device pointers, a cudaStream_t passed as
 * void *).  Both evaluate the element functions of activations.h in the same order, so their outputs
 * are equal bit for bit (tests/test_gpu_twins.cu).  Design, byte counts and accuracy: kernels/README.md.
 *
 * Tensors.  An input is a view {data, fmt, scale_inv}: element i has the value
 *     x_i = decode(data[i]) * scale_inv            (scale_inv NULL: 1; fp32 arithmetic)
 * and an output {data, fmt, scale, amax}: the fp32 result v_i is stored as
 *     bf16 / fp32:  encode(v_i)                    RNE, not saturating (bf16 overflow -> Inf)
 *     e4m3 / e5m2:  encode(v_i * scale)            RNE, saturating, NaN -> 0x7F (TransformerEngine's
 *                                                  cast; the hardware cvt.rn.satfinite)
 * and, when amax is not NULL, *amax = max(*amax, max_i |v_i|) over the non-NaN v_i (before the
 * scale; the caller zeroes it: TE's amax-out pattern).  Pointers to scales and amax are host
 * pointers for the CPU twins and device pointers for the launchers.
 * Formats: inputs bf16, fp16, fp32, e4m3, e5m2; outputs bf16, fp32, e4m3, e5m2 on the CPU.  The CUDA
 * launchers instantiate the combinations of the issue (see each launcher) and reject the others.
 * Storage: one uint16 per bf16/fp16, one uint8 per fp8, one float per fp32 element.
 *
 * Shapes.  Elementwise kernels: n elements.  Row-wise kernels (PolyNorm, per-token Smooth-SwiGLU):
 * (R, H) row-major, a row is one token's hidden vector.  SwiGLU: gate and up are separate tensors
 * of the same shape (R, C) (C = channels).
 *
 * Return value: 0, or -1 after printing why (bad shape, unsupported format, misaligned pointer, a
 * failed CUDA call with its file and line).
 */
#ifndef FL_KERNELS_H
#define FL_KERNELS_H

#include "activations.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    const void *data;
    fl_format fmt;
    const float *scale_inv; /* NULL: 1 */
} fl_kin;

typedef struct {
    void *data;
    fl_format fmt;
    const float *scale; /* FP8 outputs only; NULL: 1 */
    float *amax;        /* NULL: not computed */
} fl_kout;

/* The paper's coefficients for an order: a_0 = 0, a_i = RN32(1/order). */
fl_poly_coef fl_poly_coef_default(int order);

/* ---- PolyReLU (elementwise, n) ------------------------------------------------------------------ */

/* y = PolyReLU(x). */
int fl_polyrelu_fwd(fl_kout y, fl_kin x, size_t n, const fl_poly_coef *c);
/* dx = dy * PolyReLU'(x); da (order + 1 floats, may be NULL) = sum_i dy_i relu(x_i)^k, k = 0..order,
   reduced in the tiled fixed order of activations.h section 6. */
int fl_polyrelu_bwd(fl_kout dx, float *da, fl_kin x, fl_kin dy, size_t n, const fl_poly_coef *c);

/* ---- PolyNorm (row-wise, (R, H)) ----------------------------------------------------------------- */

int fl_polynorm_fwd(fl_kout y, fl_kin x, size_t R, size_t H, const fl_poly_coef *c, float eps);
/* dx (R, H); da (order + 1, may be NULL): da_0 = sum dy, da_i = sum_rows r_i D_i (activations.h);
   the R per-row partials are reduced like the tile partials of section 6. */
int fl_polynorm_bwd(fl_kout dx, float *da, fl_kin x, fl_kin dy, size_t R, size_t H,
                    const fl_poly_coef *c, float eps);

/* ---- SwiGLU (elementwise, n) --------------------------------------------------------------------- */

int fl_swiglu_fwd(fl_kout y, fl_kin g, fl_kin u, size_t n);
int fl_swiglu_bwd(fl_kout dg, fl_kout du, fl_kin g, fl_kin u, fl_kin dy, size_t n);

/* ---- Smooth-SwiGLU ((R, C): R tokens, C channels) ------------------------------------------------ *
 * v = s_k * silu(g) * u with s_k the smoothing scale of the element's channel (FL_SMOOTH_CHANNEL, s has
 * C entries: the paper) or token (FL_SMOOTH_TOKEN, s has R entries: the authors' released code), then
 * stored through y (typically e4m3 with the per-tensor FP8 scale and amax).  compute = 1: s is computed
 * from this tensor (current scaling): s_k = fl_smooth_scale_f32(amax over the channel / token of
 * |silu(g) u|), a power of two, and written to s; compute = 0: s is given.
 * Undoing it after the down projection y = W h:  per-token s_t scales row t of the GEMM input, so the
 * GEMM output row t is multiplied by 1/s_t; per-channel s_c scales column c of the GEMM's K
 * dimension, so it is undone on the weight instead (W[:, c] / s_c, which folds into the weights at
 * inference).  Both are exact (powers of two).  No gradient flows into s.
 * Backward: from dv, the gradient w.r.t. v (the smoothed tensor, e.g. the dgrad GEMM output taken with
 * the unsmoothed weight), dh = dv * s_k, then the SwiGLU backward. */
typedef enum { FL_SMOOTH_CHANNEL, FL_SMOOTH_TOKEN, FL_SMOOTH_AXIS_COUNT } fl_smooth_axis;

const char *fl_smooth_axis_name(fl_smooth_axis a); /* "channel", "token" */

int fl_smooth_swiglu_fwd(fl_kout y, float *s, fl_kin g, fl_kin u, size_t R, size_t C,
                         fl_smooth_axis axis, int compute);
int fl_smooth_swiglu_bwd(fl_kout dg, fl_kout du, fl_kin g, fl_kin u, fl_kin dv, const float *s,
                         size_t R, size_t C, fl_smooth_axis axis);

/* ---- the fixed-order sums, as used by the twins (exposed for the tests) -------------------------- */

/* Sum of the n terms term(i, ctx) in the block order of activations.h section 6 (one block of
   FL_RED_THREADS threads, vectors of FL_VEC). */
float fl_block_sum_order(size_t n, float (*term)(size_t i, const void *ctx), const void *ctx);
/* Sum of p[0..n) in the order of a final reduction block (thread t adds p[t], p[t + 256], ...). */
float fl_partials_sum_order(const float *p, size_t n, size_t stride);

/* ---- host helpers shared by the twins --------------------------------------------------------- */
#if !defined(__CUDACC__)
static inline float fl_kin_scale_(const fl_kin *v) { return v->scale_inv ? *v->scale_inv : 1.0f; }

/* Element i of an input view as fp32 (decode is exact, then one multiplication by scale_inv). */
static inline float fl_kin_get(const fl_kin *v, float mul, size_t i)
{
    static const fl_format_desc bf16 = FL_DESC_BF16, e4m3 = FL_DESC_E4M3, e5m2 = FL_DESC_E5M2,
                                fp16 = FL_DESC_FP16;
    float x;
    switch (v->fmt) {
    case FL_FMT_BF16: x = fl_decode_f32(&bf16, ((const uint16_t *)v->data)[i]); break;
    case FL_FMT_FP16: x = fl_decode_f32(&fp16, ((const uint16_t *)v->data)[i]); break;
    case FL_FMT_E4M3: x = fl_decode_f32(&e4m3, ((const uint8_t *)v->data)[i]); break;
    case FL_FMT_E5M2: x = fl_decode_f32(&e5m2, ((const uint8_t *)v->data)[i]); break;
    default:          x = ((const float *)v->data)[i]; break;
    }
    return x * mul;
}

static inline int fl_kin_ok(const fl_kin *v)
{
    return v->data && (v->fmt == FL_FMT_BF16 || v->fmt == FL_FMT_FP16 || v->fmt == FL_FMT_FP32 ||
                       v->fmt == FL_FMT_E4M3 || v->fmt == FL_FMT_E5M2);
}

static inline int fl_kout_ok(const fl_kout *v)
{
    return v->data && (v->fmt == FL_FMT_BF16 || v->fmt == FL_FMT_FP32 || v->fmt == FL_FMT_E4M3 ||
                       v->fmt == FL_FMT_E5M2);
}

/* The multiplier applied before the encode: the FP8 scale, else 1. */
static inline float fl_kout_mul(const fl_kout *v)
{
    return (v->fmt == FL_FMT_E4M3 || v->fmt == FL_FMT_E5M2) && v->scale ? *v->scale : 1.0f;
}

/* Store v (fp32) as element i: encode(v * mul), see the header comment. */
static inline void fl_kout_put(const fl_kout *o, float mul, size_t i, float v)
{
    static const fl_format_desc bf16 = FL_DESC_BF16, e4m3 = FL_DESC_E4M3, e5m2 = FL_DESC_E5M2;
    const uint32_t b = fl_f32_bits(v * mul);
    switch (o->fmt) {
    case FL_FMT_BF16:
        ((uint16_t *)o->data)[i] = (uint16_t)fl_encode_f32_bits(&bf16, b, FL_RND_NE, FL_OVF_NOSATURATE, 0);
        break;
    case FL_FMT_E4M3:
        ((uint8_t *)o->data)[i] = (uint8_t)fl_encode_f32_bits(&e4m3, b, FL_RND_NE, FL_OVF_SATURATE, 0);
        break;
    case FL_FMT_E5M2:
        ((uint8_t *)o->data)[i] = (uint8_t)fl_encode_f32_bits(&e5m2, b, FL_RND_NE, FL_OVF_SATURATE, 0);
        break;
    default:
        ((float *)o->data)[i] = v * mul;
        break;
    }
}

/* Fold a local amax into the output's (NaN-free, >= 0). */
static inline void fl_kout_amax(const fl_kout *o, float local)
{
    if (o->amax)
        *o->amax = fl_amax_update(*o->amax, local);
}

static inline int fl_poly_coef_ok(const fl_poly_coef *c)
{
    return c && c->order >= 2 && c->order <= FL_POLY_MAX_ORDER;
}
#endif

/* ---- CUDA launchers (device pointers; stream is a cudaStream_t) ----------------------------------
 * Preconditions checked: formats supported by the instantiations, n / H within range, data pointers
 * 16-byte aligned (elementwise kernels take any alignment and fall back to scalar accesses;
 * the vector path needs every pointer aligned).  Workspace-free: coefficient gradients use
 * a device buffer `ws` of fl_cuda_*_ws_floats(...) floats.  Available only in libfp8lab_cuda.a. */
int fl_cuda_polyrelu_fwd(fl_kout y, fl_kin x, size_t n, const fl_poly_coef *c, void *stream);
size_t fl_cuda_polyrelu_ws_floats(size_t n, int order);
int fl_cuda_polyrelu_bwd(fl_kout dx, float *da, float *ws, fl_kin x, fl_kin dy, size_t n,
                         const fl_poly_coef *c, void *stream);
int fl_cuda_polynorm_fwd(fl_kout y, fl_kin x, size_t R, size_t H, const fl_poly_coef *c, float eps,
                         void *stream);
size_t fl_cuda_polynorm_ws_floats(size_t R, int order);
int fl_cuda_polynorm_bwd(fl_kout dx, float *da, float *ws, fl_kin x, fl_kin dy, size_t R, size_t H,
                         const fl_poly_coef *c, float eps, void *stream);
int fl_cuda_swiglu_fwd(fl_kout y, fl_kin g, fl_kin u, size_t n, void *stream);
int fl_cuda_swiglu_bwd(fl_kout dg, fl_kout du, fl_kin g, fl_kin u, fl_kin dy, size_t n, void *stream);
/* s: device array (C or R floats). */
int fl_cuda_smooth_swiglu_fwd(fl_kout y, float *s, fl_kin g, fl_kin u, size_t R, size_t C,
                              fl_smooth_axis axis, int compute, void *stream);
int fl_cuda_smooth_swiglu_bwd(fl_kout dg, fl_kout du, fl_kin g, fl_kin u, fl_kin dv, const float *s,
                              size_t R, size_t C, fl_smooth_axis axis, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* FL_KERNELS_H */
