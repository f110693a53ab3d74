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
   pointers).  0, or -1 after printing why. */
int fl_rmsnorm_fwd(float *y, float *rstd, const float *x, const float *gain, size_t N, size_t C, float eps);
int fl_rmsnorm_bwd(float *dx, float *dgain, const float *dy, const float *x, const float *rstd, const float *gain,
                   size_t N, size_t C, int accumulate);
int fl_cuda_rmsnorm_fwd(float *y, float *rstd, const float *x, const float *gain, size_t N, size_t C, float eps,
                        void *stream);
int fl_cuda_rmsnorm_bwd(float *dx, float *dgain, const float *dy, const float *x, const float *rstd, const float *gain,
                        size_t N, size_t C, int accumulate, void *stream);

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

/* AdamW over n elements: p, m, v updated in place from g.  The CPU twin (kernels/train_step.c: OpenMP
   blocks, the square roots vectorised, correctly rounded like sqrtf) and the CUDA launcher (device
   pointers; stream a cudaStream_t or NULL).  0, or -1 after printing why. */
int fl_adamw(float *p, const float *g, float *m, float *v, size_t n, const fl_adamw_hp *h);
int fl_cuda_adamw(float *p, const float *g, float *m, float *v, size_t n, const fl_adamw_hp *h, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* FL_TRAIN_STEP_H */
