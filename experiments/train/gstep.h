/* gstep.h — the GPU training step, written once against a table of device operations.
 *
 * The step trains the harness's model (model.h: pre-norm RMSNorm, causal attention, an FFN with any
 * --act, untied head, AdamW) with its tensors in a device's memory, and calls the device only through
 * fl_gstep_ops: memory, a strided-batched GEMM, and the row and element kernels of kernels/train_step.h
 * and kernels/kernels.h.  Two tables implement it:
 *   - fl_gstep_host (gstep_host.c): host memory, the kernels' CPU twins and the harness's fixed-order
 *     GEMM (gemm.h).  It runs everywhere, so the step's orchestration — which buffer each operation
 *     reads and writes, in what order, with what shapes and strides — is tested in `make test` against
 *     the harness (tests/test_gstep.c);
 *   - the CUDA table (gstep_cuda.c, in build/fp8lab-cuda): the kernels' launchers and cuBLASLt.  It is
 *     compiled in CI; on an H200 its runs agreed with the harness (kernels/gpu-results/2026-11-27-h200-train/).
 * The step's order of operations is the harness's (model.c, fl_model_forward / fl_model_backward), and
 * so are its element functions.  Its sums are the harness's except in two places: the attention, whose
 * four GEMMs per head run through ops->gemm here and through the harness's own loops there, and the
 * gradient norm (fl_sumsq's blocked order, which a device can run, against the harness's sequential
 * sum).  The host table's loss therefore differs from the harness's by roundings, judged like a GPU
 * run's (verdict.h, fl_loss_envelope; TRAINING.md, "How far a GPU run may differ").
 *
 * Recipes: fp32 (no casts), bf16 (X, W and dY of every Linear rounded to bf16, RNE, overflow to Inf,
 * the harness's bf16 recipe; bf16 GEMMs), and fp8-delayed / fp8-current / paper-gaudi2 (its e5m2 backward
 * copies of X and W) with per-tensor scales: every
 * Linear's X, W and dY fake-quantised on the device (fl_cast_fq) with the scale the harness's recipe
 * state gives (fl_recipe_dev_cast_begin), and the GEMMs in fp32 on those values, as the harness's (FP8
 * products are exact in fp32: the values of an FP8 GEMM with fp32 accumulation, not yet its speed).
 * Telemetry: the loss, the gradient norm, each layer's FFN statistics (the input's amax, the activation's
 * amax and rms: the harness's bits, fl_amax_rms); under the FP8 recipes the casts' counts, amaxes and
 * scales per site (no clip mass, no moments).
 */
#ifndef FL_GSTEP_H
#define FL_GSTEP_H

#include "model.h"
#include "train.h"
#include "recipe.h"     /* fl_recipe, its device casts */
#include "train_step.h" /* fl_adamw_hp */
#include "gemm_fp8.h"   /* fl_gemm_fp8 */

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

typedef fl_gemm_rm fl_gstep_gemm; /* kernels/train_step.h */

/* The device operations.  Pointers are the device's; every call returns 0, or -1 after printing why.
   The kernels' semantics are their twins' (kernels/train_step.h, kernels/kernels.h, experiments/train
   ffn_act.h for act_fwd / act_bwd). */
typedef struct {
    const char *name;
    void *(*alloc)(void *ctx, size_t bytes); /* zeroed; NULL on failure */
    void (*release)(void *ctx, void *p);
    int (*put)(void *ctx, void *dst, const void *src, size_t bytes); /* host to device */
    int (*get)(void *ctx, void *dst, const void *src, size_t bytes); /* device to host */
    int (*copy)(void *ctx, void *dst, const void *src, size_t bytes); /* device to device */
    int (*zero)(void *ctx, void *p, size_t bytes);
    int (*sync)(void *ctx); /* waits for the work so far (the profile's clock) */
    int (*gemm)(void *ctx, const fl_gstep_gemm *g);
    int (*to_bf16)(void *ctx, uint16_t *dst, const float *src, size_t n); /* RNE, overflow to Inf */
    /* y = the fake-quantised x (fl_cast_fq: scale s, inverse si, format, rounding and stream f, element i
       drawing at off + i); its counts into *k and its amax into *amax (host results: the call waits) */
    int (*cast_fq)(void *ctx, float *y, const float *x, size_t n, float s, float si, const fl_cast_fmt *f,
                   uint64_t off, const fl_cast_smooth *sm, fl_cast_counts *k, float *amax);
    /* Smooth-SwiGLU's scales of the (R, C) x per column (axis 0) or row (axis 1) into sc, sc_inv, and the
       smoothed tensor's amax (fl_smooth_scales; the amax a host result) */
    int (*smooth)(void *ctx, float *sc, float *sc_inv, const float *x, size_t R, size_t C, int axis, float *amax);
    int (*add)(void *ctx, float *y, const float *x, size_t n);            /* y += x */
    int (*sumsq)(void *ctx, double *out, const float *x, size_t n);      /* fl_sumsq's order */
    int (*amax_rms)(void *ctx, float *amax, float *rms, const float *x, size_t R, size_t C); /* host results */
    int (*embed_fwd)(void *ctx, float *x, const int *tok, const float *wte, const float *wpe, size_t N, size_t T,
                     size_t C);
    int (*embed_bwd)(void *ctx, float *gwte, float *gwpe, const float *dx, const int *tok, const int *toks,
                     const int *starts, const int *rows, size_t ntok, size_t N, size_t T, size_t C);
    int (*rms_fwd)(void *ctx, float *y, float *rstd, const float *x, const float *gain, size_t N, size_t C, float eps);
    int (*rms_bwd)(void *ctx, float *dx, float *dgain, const float *dy, const float *x, const float *rstd,
                   const float *gain, size_t N, size_t C, int accumulate);
    int (*heads)(void *ctx, float *dst, const float *src, size_t B, size_t T, size_t H, size_t hs, size_t ld,
                 int to_heads); /* fl_heads_copy */
    int (*softmax_fwd)(void *ctx, float *P, const float *S, size_t R, size_t T, float scale);
    int (*softmax_bwd)(void *ctx, float *dS, const float *P, const float *dP, size_t R, size_t T, float scale);
    int (*act_fwd)(void *ctx, float *h, const float *pre, size_t N, size_t F, fl_act act, const float *coef);
    int (*act_bwd)(void *ctx, float *dpre, float *dcoef, const float *dh, const float *pre, size_t N, size_t F,
                   fl_act act, const float *coef);
    int (*xent_fwd)(void *ctx, float *z, double *tokloss, const int *tgt, size_t N, size_t V);
    int (*xent_bwd)(void *ctx, float *z, const int *tgt, size_t N, size_t V);
    int (*adamw)(void *ctx, float *p, const float *g, float *m, float *v, size_t n, const fl_adamw_hp *h);
    /* --chan-every: fl_chan_colmax of h, pre's gate and up planes (u: the second plane when gated, else none)
       into host arrays am, gm, um (F each) */
    int (*chan_max)(void *ctx, float *am, float *gm, float *um, const float *h, const float *pre, size_t N, size_t F,
                    int gated);
    /* fl_ffn_wsums of the FFN's first weights W (L, G F, C) into the host array out (3 L F doubles) */
    int (*ffn_wsums)(void *ctx, double *out, const float *W, size_t L, size_t F, size_t C, int gated);
    /* --fp8-gemm: x's FP8 codes (fl_cast_fp8: scale s, format f, element i drawing at off + i; counts and
       amax host results as cast_fq's), a byte transpose dst (C, R) = src (R, C)^T, and the FP8 GEMM of
       gemm_fp8.h with fp32 D (a_scale, b_scale: host pointers to the dequantisation factors; the host table
       accumulates with FL_GEMM_ACC_SEQ, the device's is cuBLASLt's) */
    int (*cast8)(void *ctx, uint8_t *y, const float *x, size_t n, float s, const fl_cast_fmt *f, uint64_t off,
                 fl_cast_counts *k, float *amax);
    int (*tr8)(void *ctx, uint8_t *dst, const uint8_t *src, size_t R, size_t C);
    int (*gemm8)(void *ctx, const fl_gemm_fp8 *g);
} fl_gstep_ops;

extern const fl_gstep_ops fl_gstep_host;

/* The CUDA table (gstep_cuda.c; linked into build/fp8lab-cuda only, make cuda): the operations and their
   context (cuBLASLt's handle and workspace, scratch) for a run of activation act (every activation has
   its kernels), or NULL after a message (no device, no memory). */
const fl_gstep_ops *fl_gstep_cuda_open(void **ctx, fl_act act);
void fl_gstep_cuda_close(void *ctx);

/* Where a step's time goes (FP8LAB_GSTEP_PROFILE=1 in fp8lab train): each operation's wall time with the
   device drained before and after it, summed by part.  The drains serialise host and device, so the parts
   add up to more than an unprofiled step takes; the bits do not change (tests/test_gstep.c). */
typedef enum {
    FL_GP_ZERO,     /* the gradients zeroed */
    FL_GP_COPY,     /* tokens, targets and the embedding index to the device, the losses back */
    FL_GP_HOST,     /* the step's host arithmetic: tokens unpacked, the embedding index, the loss's sum */
    FL_GP_CAST,     /* bf16 copies of the weights (once a step), of GEMM inputs and output gradients; under FP8
                       the fake-quantising casts, the current scales' amaxes and the smoothing scales */
    FL_GP_LIN_GEMM, /* the Linears' GEMMs */
    FL_GP_ATT_GEMM, /* the attention's GEMMs */
    FL_GP_SOFTMAX,  /* the attention's causal softmax, forward and backward */
    FL_GP_HEADS,    /* the attention's copies between token rows and per-head matrices (fl_heads_copy) */
    FL_GP_EMBED,
    FL_GP_RMS,
    FL_GP_ACT,      /* the FFN's activation, forward and backward */
    FL_GP_STATS,    /* the FFN's amax and rms, the FFN weights' sums (their values wait for the device) */
    FL_GP_ADD,      /* the residual adds */
    FL_GP_XENT,
    FL_GP_NORM,     /* the gradient norm's sum of squares */
    FL_GP_ADAMW,
    FL_GP_PARAMS,   /* weights back to the host (at checkpoints) */
    FL_GP_COUNT
} fl_gstep_part;

typedef struct {
    double secs[FL_GP_COUNT];
    uint64_t calls[FL_GP_COUNT];
    uint64_t steps;
} fl_gstep_prof;

/* The table of p: per part the calls and milliseconds per step and the share of the parts' sum, to f. */
void fl_gstep_prof_print(FILE *f, const fl_gstep_prof *p, const char *device);

/* The forward casts of one Linear under an FP8 recipe (format, rounding, scale): the backward casts X
   and W again with them, giving the values the forward's GEMM read (the harness keeps those values), or,
   under paper-gaudi2, casts their e5m2 copies with the copies' scales of the forward's step. */
typedef struct {
    fl_cast_fmt xf, wf;
    float xs, xsi, ws, wsi;
    int xq, wq; /* 0: the site is fp32 (no cast) */
    /* paper-gaudi2: the backward GEMMs read e5m2 copies of X and W instead (fl_recipe_dev_copy_begin) */
    fl_cast_fmt xcf, wcf;
    float xcs, xcsi, wcs, wcsi;
    int xc, wc; /* 1: the copy, else the forward cast again */
    int g8;     /* --fp8-gemm: this Linear's GEMMs read the codes (fl_gstep.x8 ...), else fp32 on the values */
} fl_gstep_lin;

/* A model on a device: parameters, gradients, AdamW moments, the forward's saved tensors, scratch. */
typedef struct {
    const fl_gstep_ops *ops;
    void *ctx;
    fl_model_cfg cfg;
    int bf16; /* the bf16 recipe: X, W, dY of every Linear cast to bf16 */
    int fp8;  /* fp8-delayed, fp8-current, paper-gaudi2: every Linear's casts through rec's sites (fl_gstep_set_recipe) */
    fl_recipe *rec;                            /* the host's recipe state (scales, histories, statistics) */
    float *xf, *wf, *gf;                       /* fp8: the fake-quantised X, W and dY of the Linear at hand */
    float *sm_s, *sm_si;                       /* fp8, smooth_swiglu: the down projection's smoothing scales */
    fl_gstep_lin lin[FL_MODEL_MAX_L * FL_LIN_COUNT + 1];
    size_t sizes[FL_P_COUNT], nparams;
    /* device: the tensors in model.h's order, each starting at a multiple of FL_GSTEP_ALIGN elements
       (off[k]; the gaps are zero), so that every GEMM operand is 16-byte aligned in fp32 and bf16 */
    size_t off[FL_P_COUNT], ntot;
    float *params, *grads, *am, *av;
    float *p[FL_P_COUNT], *g[FL_P_COUNT];
    uint16_t *wq;                    /* bf16 copies of the parameters, at the same offsets */
    int *tok, *tgt;                  /* (N) */
    int *etoks, *estarts, *erows;    /* fl_embed_index's arrays */
    float *resid, *r2, *ln1, *rstd1, *qkv, *att, *atty, *ln2, *rstd2, *pre, *h, *lnf, *rstdf, *logits;
    double *tokloss;
    float *dres, *dln, *datty, *dqkv, *dpre, *dh, *dp, *ds;
    float *hq, *hk, *hv, *ho, *hdq, *hdk, *hdv; /* the attention's per-head matrices (B H, T, hs): Q, K, V, the output
                                                 (forward) or its gradient (backward), dQ, dK, dV */
    uint16_t *xq, *gq; /* bf16 copies of a GEMM input and of an output gradient */
    uint16_t *wbq;     /* FP8 recipes: a Linear's weight as bf16 (with xq, gq: fl_gstep_set_recipe, power-of-two
                          scales) */
    int bfq;           /* FP8 recipes with power-of-two scales: a GEMM whose operands are FP8 values exact in bf16
                          reads bf16 copies of them (the same values; tensor-core GEMMs on a device) */
    int bfq_off;       /* set before fl_gstep_set_recipe: never (FP8LAB_GSTEP_BF16_EXACT=0; fp32 GEMMs throughout) */
    fl_ffn_fwd_stats ffn[FL_MODEL_MAX_L]; /* the last forward's FFN statistics (in_rms not computed: NaN) */
    /* host */
    int *htok, *htgt, *hetoks, *hestarts, *herows;
    double *htokloss;
    float loss;
    size_t bytes; /* device memory the step's tensors take (its allocations, summed) */
    fl_gstep_prof *prof; /* NULL, or where the step's time is summed (set after fl_gstep_init) */
    int trace;           /* FP8LAB_GSTEP_TRACE=1: each operation named on stderr, the device drained after it */
    float *mq;           /* --fp8-adam: a moment's fake-quantised copy (the largest tensor's size; allocated at
                            the first update that needs it) */
    uint64_t adam_ftz;   /* --fp8-adam: the moments' elements flushed to zero by their casts, summed (optim.c) */
    /* --fp8-gemm (fl_gstep_set_fp8_gemm): the codes of a Linear's X, W, dY and their transposes */
    int fp8_gemm;
    uint8_t *x8, *w8, *g8, *xt8, *wt8, *gt8;
    fl_model *chan;      /* NULL, or the host model whose per-channel telemetry the forward fills as the harness's
                            does (chan_on, fl_model_chan_want, the maxima by chan_max; set after fl_gstep_init) */
    /* host: fl_ffn_wsums of the FFN's first weights (3 L F doubles each), of the weights after the last update
       (or the upload) in wsums[wcur], of the weights before it in wsums[!wcur]: the alignment telemetry reads
       these instead of the weights (fl_model.ffn_wsums), which stay on the device between checkpoints */
    double *wsums[2];
    int wcur;
} fl_gstep;

enum { FL_GSTEP_ALIGN = 64 };

/* Allocate the step's tensors for model configuration mc on the device of ops (zeroed).  recipe:
   FL_RECIPE_FP32, FL_RECIPE_BF16, or FL_RECIPE_FP8_DELAYED / _FP8_CURRENT / _PAPER_GAUDI2, whose casts go
   through the recipe state given by fl_gstep_set_recipe before the first step (smooth_swiglu's smoothed
   casts of the down projection's input included).  0, or -1 after printing why (an unsupported recipe, out of device memory). */
int fl_gstep_init(fl_gstep *s, const fl_gstep_ops *ops, void *ctx, const fl_model_cfg *mc, int recipe);
/* --fp8-gemm after fl_gstep_set_recipe (fp8-delayed, fp8-current): the Linears whose X and W sites are e4m3,
   whose dY site is e5m2, whose input is not smoothed and whose dimensions are multiples of 16 (cuBLASLt's
   FP8 layouts) multiply the codes in FP8 GEMMs (forward, dgrad and wgrad, the backward on transposed
   copies); the others keep the fp32 GEMMs on the fake-quantised values.  The values multiplied are the
   same; the products are summed in the FP8 GEMM's order and scaled once at the end.  0, or -1 (no memory
   for the codes, said why). */
int fl_gstep_set_fp8_gemm(fl_gstep *s);
/* The parameters (nparams floats, model.h's order: a harness model's, so both start from the same
   weights, or a checkpoint's) and AdamW's moments (the same layout; NULL: zero) to the device. */
int fl_gstep_upload(fl_gstep *s, const float *params, const float *am, const float *av);
void fl_gstep_free(fl_gstep *s);
/* The FP8 recipes' state: the harness's fl_recipe for the same model (its sites FL_SITE(l, lin, role)),
   whose scales, delayed histories and per-step statistics the step's casts read and write as the
   harness's do (fl_recipe_dev_cast_begin / _end), so sites.csv, metrics.csv's cast counts and
   checkpoints come from it.  The caller brackets each step with fl_recipe_step_begin(rec, 0) and
   fl_recipe_step_end and sets rec->step and rec->hp_phase as train.c does.  0, or -1 after printing why
   (a site without a device path: fl_recipe_dev_check). */
int fl_gstep_set_recipe(fl_gstep *s, fl_recipe *rec);

/* One training step on cfg->accum micro-batches of tokens (B, T + 1) one after another, as train.c's: zero
   the gradients, forward and backward of each (their gradients add up), the global gradient norm of their
   mean (*gnorm), clipping by cfg->clip, AdamW at fl_lr_at(cfg, step) (fl_train_accum_scale).  The loss
   (the micro-batches' mean) into *loss.  0 or -1. */
int fl_gstep_step(fl_gstep *s, const fl_train_cfg *cfg, const uint16_t *tokens, uint64_t step, float *loss,
                  float *gnorm);

/* The parameters, or the last step's gradients, back on the host (nparams floats, model.h's order). */
int fl_gstep_params(const fl_gstep *s, float *out);
/* The FFN weight sums (fl_ffn_wsums, 3 L F doubles) of the weights after the last step's update (before = 0;
   after the upload when no step has run) or of those its forward read (before = 1: the update's inputs). */
const double *fl_gstep_wsums(const fl_gstep *s, int before);
int fl_gstep_grads(const fl_gstep *s, float *out);
/* AdamW's moments back on the host (for a checkpoint). */
int fl_gstep_get_moments(const fl_gstep *s, float *am, float *av);

#endif /* FL_GSTEP_H */
