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
 */
#ifndef FL_TRAIN_STEP_H
#define FL_TRAIN_STEP_H

#include "activations.h"

#include <stddef.h>

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

/* AdamW over n elements: p, m, v updated in place from g.  The CPU twin (kernels/train_step.c: OpenMP
   blocks, the square roots vectorised, correctly rounded like sqrtf) and the CUDA launcher (device
   pointers; stream a cudaStream_t or NULL).  0, or -1 after printing why. */
int fl_adamw(float *p, const float *g, float *m, float *v, size_t n, const fl_adamw_hp *h);
int fl_cuda_adamw(float *p, const float *g, float *m, float *v, size_t n, const fl_adamw_hp *h, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* FL_TRAIN_STEP_H */
