/* train_step.h — kernels of the training step beside the activation kernels (the GPU training step is
 * built from them): element functions written once (FL_HD, activations.h's rules: IEEE basic operations,
 * no contraction) for the CUDA kernel and its CPU twin, and both entry points.
 *
 * AdamW, decoupled weight decay (Loshchilov & Hutter), one element i of a parameter tensor:
 *     g  = grad_i * gscale                    (the global-norm clip's factor, 1 without clipping)
 *     m  = b1 m + (1 - b1) g                  v = b2 v + ((1 - b2) g) g
 *     mh = m / bc1                            sv = v / bc2          (bc = 1 - beta^t, from the host)
 *     p  = p - lr (mh / (sqrt(sv) + eps) + wd p)
 * each operation rounded once to float32, in this order.  The CPU harness's optimizer
 * (experiments/train/optim.c) is the twin itself, so a GPU step's update is the harness's bit for bit
 * (tests/test_train_kernels.c on the host; tests/test_gpu_twins.cu on a device).
 *
 * RMSNorm over rows of C channels (token t's hidden vector), gain g, eps (the harness: 1e-5):
 *     ss = sum_c x_c^2                     in order c = 0, 1, ..., C - 1 from +0 (float32)
 *     r  = 1 / sqrt(ss / C + eps)          y_c = (x_c r) g_c
 *   backward, dy the output's gradient:
 *     d  = sum_c (dy_c g_c) x_c            in order from +0
 *     k  = (((r r) r) d) / C               dx_c = ((r dy_c) g_c) - k x_c
 *     dg_c += sum_t (dy_tc x_tc) r_t       over the rows t in order from +0, then added to dg_c
 * These are the harness's sums and formulas (experiments/train/model.c, rms_forward / rms_backward,
 * whose vector paths equal its scalar one bit for bit), so the twins and kernels give its bits.
 */
#ifndef FL_TRAIN_STEP_H
#define FL_TRAIN_STEP_H

#include "activations.h"
#ifdef __cplusplus
extern "C" {
#endif
#include "cast.h"
#ifdef __cplusplus
}
#endif
#include "cast_elem.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    float b1, b2;   /* the moments' decay rates */
    float bc1, bc2; /* 1 - b1^t, 1 - b2^t at step t (1-based) */
    float eps, lr, wd;
    float gscale;   /* the gradient's factor (global-norm clipping), 1 for none */
} fl_adamw_hp;

/* The moments of one element: m and v updated in place; returns sv = v / bc2 and *mh = m / bc1. */
FL_HD float fl_adamw_moments(float *m, float *v, float grad, const fl_adamw_hp *h, float *mh)
{
    const float g = grad * h->gscale;
    *m = h->b1 * *m + (1.0f - h->b1) * g;
    *v = h->b2 * *v + (1.0f - h->b2) * g * g;
    *mh = fl_divf(*m, h->bc1);
    return fl_divf(*v, h->bc2);
}

/* The updated parameter from its moments: s = sqrt(sv). */
FL_HD float fl_adamw_param(float p, float mh, float s, const fl_adamw_hp *h)
{
    return p - h->lr * (fl_divf(mh, s + h->eps) + h->wd * p);
}

/* RMSNorm's element functions (the sums' terms are x*x, (dy*g)*x and (dy*x)*r, added in order). */
FL_HD float fl_rms_r(float ss, float C, float eps) { return fl_divf(1.0f, fl_sqrtf(fl_divf(ss, C) + eps)); }
FL_HD float fl_rms_y(float x, float r, float g) { return x * r * g; }
FL_HD float fl_rms_k(float r, float d, float C) { return fl_divf(r * r * r * d, C); }
FL_HD float fl_rms_dx(float r, float dy, float g, float k, float x) { return r * dy * g - k * x; }

/* RMSNorm forward: y (N, C) and rstd (N) from x (N, C) and gain (C).  Backward: dx (N, C) = the input
   gradient (accumulate: added to dx), dgain (C) += the gain's.  Twins (host) and launchers (device
   pointers; the backward's ws: N floats of device scratch, for the rows' k).  0, or -1 after printing
   why. */
int fl_rmsnorm_fwd(float *y, float *rstd, const float *x, const float *gain, size_t N, size_t C, float eps);
int fl_rmsnorm_bwd(float *dx, float *dgain, const float *dy, const float *x, const float *rstd, const float *gain,
                   size_t N, size_t C, int accumulate);
int fl_cuda_rmsnorm_fwd(float *y, float *rstd, const float *x, const float *gain, size_t N, size_t C, float eps,
                        void *stream);
int fl_cuda_rmsnorm_bwd(float *dx, float *dgain, const float *dy, const float *x, const float *rstd, const float *gain,
                        size_t N, size_t C, int accumulate, float *ws, void *stream);

/* The FP8 cast of a GEMM input (per-tensor scale s): codes[i] = the cast engine's code of x[i] * s
   (cast.h: e4m3 / e5m2 / Gaudi2's e4m3, RNE or SR drawing fl_sr_bits(f->key, off + i), saturating
   unless f->nosat), *amax = max(*amax, max |x_i|) over the non-NaN x_i (the caller zeroes it:
   TransformerEngine's amax-out pattern), k += the counts of fl_cast_counts.  One element through
   fl_cast_elem (numerics/cast_elem.h), as the engine's reference loop, so the twin's codes and counts
   are the engine's (tests/test_train_kernels.c against fl_cast_fq_span and fl_cast_encode_span).
   The launcher takes device pointers: counts[6] as unsigned long long in fl_cast_counts' order (sat,
   clip, nan_out, inf_out, nan_in, ftz), added to. */
int fl_cast_fp8(uint8_t *codes, float *amax, fl_cast_counts *k, const float *x, size_t n, float s, const fl_cast_fmt *f,
                uint64_t off);
int fl_cuda_cast_fp8(uint8_t *codes, float *amax, unsigned long long *counts, const float *x, size_t n, float s,
                     const fl_cast_fmt *f, uint64_t off, void *stream);

/* The same cast writing the harness's fake-quantised values instead of codes (the GPU step's FP8
   recipes): y[i] = decode(code) * si, the value cast.c's reference loop gives for one span with scale s
   and inverse si and no smoothing (fl_cast_fq_span's).  Formats e4m3, e5m2 (Gaudi2's e4m3 included) and
   bf16 (an FP8 recipe's bf16 sites and its bf16 start, scale 1).  amax and counts as fl_cast_fp8's; y may
   be x in the twin, not in the launcher (its kernel reads x and writes y as restricted pointers). */
int fl_cast_fq(float *y, float *amax, fl_cast_counts *k, const float *x, size_t n, float s, float si,
               const fl_cast_fmt *f, uint64_t off);
int fl_cuda_cast_fq(float *y, float *amax, unsigned long long *counts, const float *x, size_t n, float s, float si,
                    const fl_cast_fmt *f, uint64_t off, void *stream);

/* Smooth-SwiGLU's smoothing of a cast (recipe.c's fl_smooth): element i of the (R, C) tensor, row i / C and
   column i % C, enters the cast as xv = x * rs[row] (rs NULL: x * 1), then xv * cs[col] (cs NULL: as is), and
   leaves it as decode(code) * si * rsi[row] (rsi NULL: * 1), then * csi[col] -- cast.c's reference loop,
   operation for operation.  The amax and the counts are of xv. */
typedef struct {
    const float *rs, *rsi, *cs, *csi;
    size_t C;
} fl_cast_smooth;
FL_HD float fl_smooth_in(const fl_cast_smooth *m, float x, size_t i)
{
    float xv = x * (m->rs ? m->rs[i / m->C] : 1.0f);
    if (m->cs)
        xv = xv * m->cs[i % m->C];
    return xv;
}
FL_HD float fl_smooth_out(const fl_cast_smooth *m, float q, size_t i)
{
    float out = q * (m->rsi ? m->rsi[i / m->C] : 1.0f);
    if (m->csi)
        out = out * m->csi[i % m->C];
    return out;
}
/* fl_cast_fq of the smoothed tensor (twin and launcher; the launcher's sm holds device pointers). */
int fl_cast_fq_smooth(float *y, float *amax, fl_cast_counts *k, const float *x, size_t n, float s, float si,
                      const fl_cast_fmt *f, uint64_t off, const fl_cast_smooth *sm);
int fl_cuda_cast_fq_smooth(float *y, float *amax, unsigned long long *counts, const float *x, size_t n, float s,
                           float si, const fl_cast_fmt *f, uint64_t off, const fl_cast_smooth *sm, void *stream);
/* The smoothing scales of the (R, C) tensor x per column (axis 0: sc, sc_inv of C) or per row (axis 1: of
   R), as recipe.c's smooth_scales: fl_smooth_scale_f32 of the line's max |x| (fl_fmax_f32: NaN loses) and
   1 / it.  Returns the amax of the smoothed tensor, max |x s| over the non-NaN x (what a current scale is
   computed from).  The launcher: device sc, sc_inv, ws (a scratch of R + C + 1 unsigned); the amax to the
   host (it waits). */
float fl_smooth_scales(float *sc, float *sc_inv, const float *x, size_t R, size_t C, int axis);
int fl_cuda_smooth_scales(float *sc, float *sc_inv, float *amax, const float *x, size_t R, size_t C, int axis,
                          unsigned *ws, void *stream);

/* Token and position embeddings, N = B T rows of C channels, token i at position i % T:
     forward   x[i][k] = wte[tok[i]][k] + wpe[i % T][k]
     backward  gwte[v][k] += dx[i][k] over the rows i with tok[i] = v, in increasing i (from the
               value gwte holds); gwpe[t][k] += dx[i][k] over the rows i with i % T = t, in increasing i.
   The harness's order (experiments/train/model.c calls the twins).  On the device the token rows'
   sums need each token's rows in order: fl_embed_index (host) sorts the rows by token, stably, into
   rows[] with starts[j], starts[j + 1] the rows of token toks[j], j < *ntok; the launcher takes
   those three arrays in device memory (ntok + 1 starts).  Tokens must be below V. */
int fl_embed_fwd(float *x, const int *tok, const float *wte, const float *wpe, size_t N, size_t T, size_t C);
int fl_embed_bwd(float *gwte, float *gwpe, const float *dx, const int *tok, size_t N, size_t T, size_t C);
int fl_embed_index(int *toks, int *starts, int *rows, size_t *ntok, const int *tok, size_t N, uint32_t V);
int fl_cuda_embed_fwd(float *x, const int *tok, const float *wte, const float *wpe, size_t N, size_t T, size_t C,
                      void *stream);
int fl_cuda_embed_bwd(float *gwte, float *gwpe, const float *dx, const int *toks, const int *starts, const int *rows,
                      size_t ntok, size_t N, size_t T, size_t C, void *stream);

/* ---- softmax cross-entropy of the head ----------------------------------------------------------
 * expf as glibc computes it on x86-64 with FMA (sysdeps/ieee754/flt-32/e_expf.c, __expf_fma): k =
 * round(x 32/ln2), r = x 32/ln2 - k fused, 2^(k/32) from a 32-entry table, a cubic in r, in double with
 * fused multiply-adds, one rounding to float; NaN gives x + x, -Inf 0, x > 0x1.62e42ep6 +Inf, x <
 * -0x1.9fe368p6 +0, every other x the main path.  The harness's softmaxes use the same (model.c,
 * expf_main, where a check at init finds the libm agreeing), so the twin's exp is the harness's.
 * tab: fl_expf_table's 32 entries (the bits of RN(2^(i/32)) minus i << 47, from MPFR). */
/* The main path alone (every x where glibc takes it: |x| < 88, and -0x1.9fe368p6 <= x <= 0x1.62e42ep6). */
FL_HD float fl_expf_glibc_main(float x, const uint64_t *tab)
{
    const double inv = 0x1.71547652b82fep+5, shift = 0x1.8p52; /* 32/ln2; 1.5 * 2^52 rounds to an integer */
    const double c0 = 0x1.c6af84b912394p-20, c1 = 0x1.ebfce50fac4f3p-13, c2 = 0x1.62e42ff0c52d6p-6;
    const double xd = (double)x, kds = fl_fma_d(inv, xd, shift);
    uint64_t ki;
    memcpy(&ki, &kds, sizeof ki);
    const double kd = kds - shift, r = fl_fma_d(inv, xd, -kd);
    const uint64_t sb = tab[ki & 31] + (ki << 47);
    double sc;
    memcpy(&sc, &sb, sizeof sc);
    const double z = fl_fma_d(c0, r, c1), r2 = r * r, y0 = fl_fma_d(c2, r, 1.0);
    return (float)(fl_fma_d(z, r2, y0) * sc);
}

FL_HD float fl_expf_glibc(float x, const uint64_t *tab)
{
    const uint32_t ax = fl_f32_bits(x) & 0x7FFFFFFFu;
    if ((ax >> 20) >= 0x42Bu) { /* |x| >= 88: glibc's special cases, then its main path */
        if (fl_f32_bits(x) == 0xFF800000u)
            return 0.0f;
        if (ax >= 0x7F800000u)
            return x + x;
        if (x > 0x1.62e42ep6f)
            return fl_f32_from_bits(0x7F800000u);
        if (x < -0x1.9fe368p6f)
            return 0.0f;
    }
    return fl_expf_glibc_main(x, tab);
}

/* The table of fl_expf_glibc (host, MPFR). */
void fl_expf_table(uint64_t tab[32]);

/* The head's softmax cross-entropy over N rows of V logits z, in place, as the harness computes it:
   m = max_v z_v (by value, NaN ignored), e_v = fl_expf_glibc(z_v - m), S = sum_v e_v in double in
   order from 0, z_v = e_v * (float)(1 / S), tokloss[i] = -(log((double)e_tgt) - log(S)).  Backward,
   in place: z_tgt -= 1, then every z_v *= 1 / (float)N (the mean over the rows).  On the device log is
   CUDA's double log, within 1 ulp of glibc's: the loss may differ in its last bits, the probabilities
   and gradients not. */
int fl_xent_fwd(float *z, double *tokloss, const int *tgt, size_t N, size_t V, const uint64_t *tab);
int fl_xent_bwd(float *z, const int *tgt, size_t N, size_t V);
int fl_cuda_xent_fwd(float *z, double *tokloss, const int *tgt, size_t N, size_t V, const uint64_t *tab_host,
                     void *stream);
int fl_cuda_xent_bwd(float *z, const int *tgt, size_t N, size_t V, void *stream);

/* ---- the causal attention's softmax --------------------------------------------------------------
 * Rows of R = B H T scores (row t of a head: t % T), each T long, keys j <= t % T valid:
 *   forward   s_j = S_tj * scale (skipped when scale is 1), m = max_j s_j, e_j = fl_expf_glibc(s_j - m),
 *             sum = sum_j e_j in float in order from +0, P_tj = e_j * (1 / sum), P_tj = 0 for j > t % T
 *   backward  d = sum_j P_tj dP_tj in float in order from +0, dS_tj = P_tj (dP_tj - d) scale (j <= t % T),
 *             dS_tj = 0 beyond
 * The harness's attention (experiments/train/model.c, "Every sum below has the order of the plain
 * loops") computes the same from its own scores; the GPU step forms S = Q K^T and dP = dO V^T with
 * cuBLAS (other bits than the harness's sequential dot products) and these kernels on them. */
int fl_attn_softmax_fwd(float *P, const float *S, size_t R, size_t T, float scale, const uint64_t *tab);
int fl_attn_softmax_bwd(float *dS, const float *P, const float *dP, size_t R, size_t T, float scale);
int fl_cuda_attn_softmax_fwd(float *P, const float *S, size_t R, size_t T, float scale, const uint64_t *tab_host,
                             void *stream);
int fl_cuda_attn_softmax_bwd(float *dS, const float *P, const float *dP, size_t R, size_t T, float scale, void *stream);

/* ---- the step's GEMMs, sums, adds and memory --------------------------------------------------------
 * C = op(A) op(B) + beta C for `batch` problems, row-major: op(A) (M, K) is A stored (M, K) with lda
 * (ta 0) or its transpose stored (K, M) (ta 1); op(B) (K, N) likewise; problem i reads A + i sa, B + i sb
 * (in elements of their format) and writes C + i sc.  A and B: both float32 or both bf16 (uint16 codes);
 * C float32; beta 0: C is not read.  On the device: cuBLASLt, fp32 accumulation (CUBLAS_COMPUTE_32F: no
 * TF32), its own order of sums (the step's bound against the harness: experiments/train/TRAINING.md,
 * "How far a GPU run may differ"); on the host the GPU step uses the harness's fixed-order GEMM. */
typedef struct {
    int ta, tb;
    size_t M, N, K;
    const void *A;
    fl_format afmt;
    size_t lda, sa;
    const void *B;
    fl_format bfmt;
    size_t ldb, sb;
    float beta;
    float *C;
    size_t ldc, sc;
    size_t batch;
} fl_gemm_rm;

/* lt: a cublasLtHandle_t (fl_cuda_lt_new); ws: a device workspace of ws_bytes. */
int fl_cuda_gemm_rm(const fl_gemm_rm *g, void *lt, void *ws, size_t ws_bytes, void *stream);
/* The same with a cache of plans (fl_cuda_gemm_plans_new): a problem's cuBLASLt descriptors and the
   algorithm its heuristic picked, kept by everything they depend on (transposes, format, shapes, leading
   dimensions, batch and strides, the operands' alignments, the workspace), so that a step's repeated
   problems skip the descriptors and the heuristic.  The algorithm is the one an uncached call picks: the
   same bits (tests/test_gpu_twins.cu).  plans NULL: fl_cuda_gemm_rm.  Up to 512 problems are kept; a
   further one is planned at each call. */
int fl_cuda_gemm_rm_cached(const fl_gemm_rm *g, void *plans, void *lt, void *ws, size_t ws_bytes, void *stream);
void *fl_cuda_gemm_plans_new(void); /* NULL when out of memory */
int fl_cuda_gemm_plans_count(const void *plans); /* the problems kept */
void fl_cuda_gemm_plans_free(void *plans);
void *fl_cuda_lt_new(void);
void fl_cuda_lt_free(void *lt);

/* The sum of x_i^2 (the gradient norm's square) in double, in one order on both sides:
     chunks of FL_SUMSQ_CHUNK elements; in chunk c, lane t < FL_SUMSQ_LANES adds (double)x_i * x_i from +0
     over i = c FL_SUMSQ_CHUNK + t + FL_SUMSQ_LANES j, j = 0, 1, ... (in order, i < n); the lanes are summed
     pairwise, lane t += lane t + s for s = FL_SUMSQ_LANES / 2, ..., 2, 1; the chunks' sums are added
     in chunk order from +0.
   Each square is exact in double; the additions are the only roundings.  fl_sumsq (host) and
   fl_cuda_sumsq (one block per chunk, then one thread; ws: fl_sumsq_chunks(n) doubles of device
   memory; *out is a host pointer, the call waits for the result) give the same bits. */
enum { FL_SUMSQ_LANES = 256, FL_SUMSQ_CHUNK = 8192 };
static inline size_t fl_sumsq_chunks(size_t n) { return (n + FL_SUMSQ_CHUNK - 1) / FL_SUMSQ_CHUNK; }
double fl_sumsq(const float *x, size_t n);
int fl_cuda_sumsq(double *out, const float *x, size_t n, double *ws, void *stream);

/* The FFN's telemetry (the harness's amax_rms, experiments/train/model.c): over R rows of C,
     amax = the largest bit pattern of |x_i| over the non-NaN x_i (0 when all are NaN), as a float;
     rms  = (float)sqrt(T / (R C)), T = the rows' sums of (double)|x|^2, each over c in order from +0,
            added in row order from +0 (rms may be NULL: not computed).
   fl_amax_rms (host, the reference loops) and fl_cuda_amax_rms (a thread per row for the sums, one
   thread for the total; ws: R + 1 doubles of device memory; amax and rms host pointers, the call waits)
   give the harness's bits. */
int fl_amax_rms(float *amax, float *rms, const float *x, size_t R, size_t C);
int fl_cuda_amax_rms(float *amax, float *rms, const float *x, size_t R, size_t C, double *ws, void *stream);

/* y_i += x_i (the residual adds); relu forward and backward as the harness's (ffn_act.c): h = fl_relu_f32(x),
   dx = x > 0 ? dy : 0. */
int fl_cuda_add_f32(float *y, const float *x, size_t n, void *stream);
int fl_cuda_relu_fwd(float *h, const float *x, size_t n, void *stream);
/* SwiGLU on float32 planes (the training step's activations are float32; kernels.h's launchers take bf16
   and FP8): h = fl_swiglu_f32(g, u), and (dg, du) = fl_swiglu_grad_f32(g, u, dh), one element per thread:
   the element functions of fl_swiglu_fwd / fl_swiglu_bwd with float32 views, so the same bits. */
int fl_cuda_swiglu_f32_fwd(float *h, const float *g, const float *u, size_t n, void *stream);
int fl_cuda_swiglu_f32_bwd(float *dg, float *du, const float *g, const float *u, const float *dh, size_t n, void *stream);
int fl_cuda_relu_bwd(float *dx, const float *x, const float *dy, size_t n, void *stream);
/* dst (C, R) = src (R, C)^T of bytes (FP8 codes: the transposed copies the FP8 GEMMs' backward reads):
   exact, the twin a plain loop; the launcher 32 x 32 tiles through shared memory. */
void fl_transpose_u8(uint8_t *dst, const uint8_t *src, size_t R, size_t C);
int fl_cuda_transpose_u8(uint8_t *dst, const uint8_t *src, size_t R, size_t C, void *stream);
/* GELU on float32 planes, as the harness's (ffn_act.c): h = fl_gelu_f32(x) and dx = dy * fl_gelu_grad_f32(x,
   fl_expf_glibc(-0.5f * x * x)) (kernels/erff.h: erf correctly rounded; the harness's expf is the libm's,
   which model.c checks against fl_expf_glibc); tab_host: fl_expf_table's 32 entries (host memory). */
int fl_cuda_gelu_fwd(float *h, const float *x, size_t n, void *stream);
int fl_cuda_gelu_bwd(float *dx, const float *x, const float *dy, size_t n, const uint64_t *tab_host, void *stream);

/* The per-channel telemetry's maxima (experiments/train/model.h, fl_chan_colmax) on the device: per channel
   i < F of the (N, F) h, g and u (u NULL: 0) the largest |.| over the rows, as the largest bit pattern of
   |x| (atomicMax on the bits of the blocks' maxima: the order does not matter), into host arrays am, gm,
   um.  Equal to fl_chan_colmax for every column without NaN; a column with a NaN gives a NaN (another
   payload than the harness's first one; printed alike).  ws: 3 F unsigned of device memory.  The call
   waits. */
int fl_cuda_chan_colmax(float *am, float *gm, float *um, const float *h, const float *g, const float *u, size_t N,
                        size_t F, unsigned *ws, void *stream);

/* Device memory for the GPU step (experiments/train/gstep_cuda.c): zeroed allocations (NULL after a
   message on failure), synchronous copies and fills; 0 or -1. */
int fl_cuda_device_count(void); /* 0 where there is none (or no driver) */
void *fl_cuda_dev_alloc(size_t bytes);
void fl_cuda_dev_free(void *p);
int fl_cuda_dev_put(void *dst, const void *src, size_t bytes);
int fl_cuda_dev_get(void *dst, const void *src, size_t bytes);
int fl_cuda_dev_zero(void *p, size_t bytes);
int fl_cuda_dev_copy(void *dst, const void *src, size_t bytes); /* device to device */
int fl_cuda_dev_sync(void); /* waits for the device's work so far; 0, or -1 after a message */

/* The attention's head layout: the heads of B sequences of T tokens, H heads of hs values each, between
   the token-major rows of the QKV projection's output (or of the attention output and its gradient), row
   (b T + t) of ld floats holding head h at columns h hs ..., and one (T, hs) matrix per (sequence, head),
   in order b H + h:
       to_heads = 1:  dst[((b H + h) T + t) hs + d] = src[(b T + t) ld + h hs + d]
       to_heads = 0:  dst[(b T + t) ld + h hs + d] = src[((b H + h) T + t) hs + d]
   A copy (the same bits), so that the attention's GEMMs run as one batch of B H instead of one of H per
   sequence.  The twin (host) and the launcher (device pointers).  0, or -1 after printing why. */
int fl_heads_copy(float *dst, const float *src, size_t B, size_t T, size_t H, size_t hs, size_t ld, int to_heads);
int fl_cuda_heads_copy(float *dst, const float *src, size_t B, size_t T, size_t H, size_t hs, size_t ld, int to_heads,
                       void *stream);

/* The FFN weights' sums behind the gate/up alignment telemetry (experiments/train/model.c, fl_model_align;
   channels.c, fl_chan_weights).  W is the (L, G F, C) stack of the FFN's first weights (G = 2 gated: channel
   i's gate row i and up row F + i of its layer; G = 1: row i).  For each of the L F rows r (layer r / F,
   channel r % F), in double from +0 in order k = 0, 1, ..., C - 1 (every product of two floats is exact in
   double, so a fused multiply-add gives the same bits):
       out[3 r] = sum_k g_k^2,   out[3 r + 1] = sum_k u_k^2,   out[3 r + 2] = sum_k g_k u_k   (0, 0 ungated)
   The twin (host) and the launcher (device pointers, out: 3 L F doubles).  0, or -1 after printing why. */
int fl_ffn_wsums(double *out, const float *W, size_t L, size_t F, size_t C, int gated);
int fl_cuda_ffn_wsums(double *out, const float *W, size_t L, size_t F, size_t C, int gated, void *stream);

/* Blocks of 256 threads for a grid-stride loop over n items (the step's elementwise kernels, train_step.cu
   and step_ops.cu): one item per thread, capped at 4 x 65535 blocks. */
static inline unsigned fl_step_grid(size_t n)
{
    const size_t b = (n + 255) / 256;
    return (unsigned)(b < 65535 * 4 ? (b ? b : 1) : 65535 * 4);
}

/* AdamW over n elements: p, m, v updated in place from g.  The CPU twin (kernels/train_step.c: OpenMP
   blocks, the square roots vectorised, correctly rounded like sqrtf) and the CUDA launcher (device
   pointers; stream a cudaStream_t or NULL).  0, or -1 after printing why. */
int fl_adamw(float *p, const float *g, float *m, float *v, size_t n, const fl_adamw_hp *h);
int fl_cuda_adamw(float *p, const float *g, float *m, float *v, size_t n, const fl_adamw_hp *h, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* FL_TRAIN_STEP_H */
