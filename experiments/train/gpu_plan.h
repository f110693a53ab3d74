/* gpu_plan.h — the memory and launch plan of one GPU training step of `fp8lab train` (TRAINING.md,
 * "The GPU step"), computed on the host: `fp8lab train --device cuda --plan` prints it, so that
 * a preset can be sized for a device before any GPU is at hand.
 *
 * The step it plans (one device; gradient accumulation over `accum` micro-batches of B x T tokens):
 *   - persistent: fp32 master parameters, fp32 gradients (accumulated), AdamW m and v (fp32), bf16
 *     copies of the GEMM weights; under the FP8 recipes e4m3 copies of the layers' Linear weights in
 *     both K-major layouts cuBLASLt's TN FP8 GEMM needs (forward and dgrad), and the delayed-scaling
 *     histories;
 *   - saved for the backward, per layer and micro-batch: the fp32 residual inputs of both RMSNorms and
 *     their 1/rms, every GEMM input (bf16, or under FP8 e4m3 in both layouts: row-wise for the forward,
 *     column-wise for wgrad), q/k/v, the attention probabilities (bf16, B x H x T x T), the FFN's
 *     pre-activation; at the top the final RMSNorm's input and the logits (bf16; the fused
 *     cross-entropy writes dlogits over them);
 *   - transient in the backward: the residual gradient (fp32, two buffers), dP of one layer's
 *     attention, the FFN's largest gradients (and their FP8 copies), cuBLASLt's workspace.
 * Launches: one per kernel or GEMM of the forward and backward of a micro-batch, and the optimizer's
 * once per step (TRAINING.md lists them).  Peak memory = persistent + saved + transient.
 * A data-parallel split over R ranks keeps the persistent bytes per rank (gradient all-reduce) or
 * divides the AdamW state and the fp32 master by R (ZeRO-1); fl_gpu_plan_build takes the rank count.
 */
#ifndef FL_GPU_PLAN_H
#define FL_GPU_PLAN_H

#include "train.h"

#include <stdint.h>
#include <stdio.h>

enum { FL_PLAN_PERSISTENT, FL_PLAN_SAVED, FL_PLAN_TRANSIENT };
#define FL_PLAN_MAX_BUFS 40
#define FL_PLAN_CUBLASLT_WORKSPACE ((uint64_t)32 << 20) /* bytes */

typedef struct {
    const char *name, *what;
    int kind;       /* FL_PLAN_* */
    uint64_t bytes; /* for the whole model (saved: all layers of one micro-batch) */
} fl_plan_buf;

typedef struct {
    fl_plan_buf buf[FL_PLAN_MAX_BUFS];
    int nbuf;
    uint64_t params, params_gemm;            /* parameters; those read by GEMMs (Linear weights, head) */
    uint64_t bytes[3];                       /* per FL_PLAN_* kind */
    uint64_t peak;                           /* the sum */
    uint32_t accum, ranks, zero1;            /* micro-batches per step; data-parallel ranks; ZeRO-1 */
    uint64_t tokens_micro, tokens_step;      /* B T; accum B T ranks */
    uint32_t launch_fwd, launch_bwd, launch_opt; /* per micro-batch (fwd, bwd) and per step (optimizer) */
    uint64_t launch_step;                    /* accum (fwd + bwd) + opt */
    double flops_token;                      /* model FLOPs per token of a training step (6 N_gemm + attention) */
} fl_gpu_plan;

/* The plan of cfg (its model shapes, batch and recipe; V the vocabulary) with accum micro-batches per
   step on each of ranks ranks (zero1: the AdamW state and fp32 master sharded).  0, or -1 with why in
   err (a shape the step does not take: V = 0, accum or ranks = 0). */
int fl_gpu_plan_build(fl_gpu_plan *p, const fl_train_cfg *cfg, uint32_t accum, uint32_t ranks, int zero1, char *err,
                      size_t errlen);
/* The table: one line per buffer, the totals, the launches; device_bytes > 0: whether the peak fits. */
void fl_gpu_plan_print(FILE *f, const fl_gpu_plan *p, const fl_train_cfg *cfg, uint64_t device_bytes);

/* Presets of the question at GPU scale (TRAINING.md, "Presets"): "124m" (12 layers, width 768, 12 heads,
   SwiGLU F 2048, GeLU/ReLU 3072) and "350m" (24 layers, width 1024, 16 heads, SwiGLU F 2752, GeLU/ReLU
   4128), sequence 1024, micro-batches of 16 / 8 sequences, accum 32 / 64 of them to a global batch of
   524,288 tokens; AdamW lr 6e-4 / 3e-4, wd 0.1, 700 warm-up steps, cosine to 10%.  Applied to cfg for
   the activation act (F parameter-matched).  0, or -1 for an unknown name. */
int fl_train_preset(fl_train_cfg *cfg, const char *name, fl_act act);
#define FL_PRESET_NAMES "124m, 350m"

#endif /* FL_GPU_PLAN_H */
