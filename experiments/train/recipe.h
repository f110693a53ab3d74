/* recipe.h — precision recipes of the training harness: where tensors are cast, how they are
 * scaled, and what every cast did (telemetry).
 *
 * The harness trains in float32 and *emulates* low precision by fake quantisation at each cast
 * site: x -> decode(encode(x * s)) * s_inv, with the exact encoders of numerics/fl_round.h.  A
 * product of two decoded FP8 (or bf16) numbers is exact in float32, so a float32 GEMM of decoded
 * operands with float32 accumulation computes what an FP8 tensor-core GEMM with fp32 accumulation
 * computes, up to the order of the fp32 additions.
 *
 * Cast sites.  Every Linear layer Y (N, M) = X (N, K) . W (M, K)^T has three, as in
 * TransformerEngine (TE):  "in" (X, forward), "w" (W, forward) and "gout" (dY, backward).  The
 * backward GEMMs reuse the quantized forward operands:  dX = Q(dY) . Q(W),  dW = Q(dY)^T . Q(X),
 * except where a recipe casts a backward copy of an operand (fl_recipe_needs_bwd_copy): the
 * column-wise tiles of fp8-block and mxfp8 (X and dY), the e5m2 copies of paper-gaudi2 (X and W).
 *
 * Recipes (--recipe):
 *   fp32          no casts.
 *   bf16          X, W, dY rounded to bf16 (RNE; overflow -> Inf, IEEE), fp32 accumulation.
 *   fp8-delayed   TE DelayedScaling, format HYBRID: X, W e4m3; dY e5m2; one per-tensor scale per
 *                 site from that site's amax history (fl_delayed: history length, max or
 *                 most_recent, margin, optional power-of-two scales).  The scale used at step t
 *                 comes from amaxes of steps < t.
 *   fp8-current   TE Float8CurrentScaling: same formats, per-tensor scale from the tensor itself.
 *   fp8-block     TE Float8BlockScaling / DeepSeek-V3: e4m3 everywhere; 1x128 tiles along the
 *                 contraction dimension for X and dY, 128x128 blocks for W, power-of-two fp32 scales
 *                 from each tile's current amax.  The wgrad GEMM contracts over tokens, so X and dY
 *                 are quantized a second time in 128x1 tiles for it (as TE/DeepSeek do).
 *   mxfp8         OCP MX: e4m3 elements, 1x32 blocks along the contraction dimension (32x1 for the
 *                 wgrad copies), e8m0 scales with TE's round-up rule (FL_MX_CEIL).
 *   paper-gaudi2  the recipe of Fishman et al.'s released code (experimental/fp8_linear.py of their
 *                 Megatron-DeepSpeed fork, run on Intel Gaudi2), with its settings fixed
 *                 (fl_recipe_paper_gaudi2):
 *                 - X and W cast to Gaudi2's e4m3, an IEEE-style e4m3 whose largest finite value is
 *                   240 (S.1110.111; S.1111.000 is Inf, the rest of that binade NaN): the same grid
 *                   as OCP e4m3 up to 240, saturating at 240 (FL_DESC_E4M3_GAUDI2).  The scale is
 *                   2^floor(log2(240 / amax)), so amax maps into (120, 240];
 *                 - the backward GEMMs take e5m2 copies of X and W, cast from the same tensors with
 *                   the scale 2^floor(log2(57344 / amax)) of the same amax (their cast_to_fp8_hybrid
 *                   makes both copies at once), round-to-nearest and saturating:
 *                   dX = Q5(dY) . Q5(W),  dW = Q5(dY)^T . Q5(X);
 *                 - dY cast to e5m2 with stochastic rounding, scale 2^floor(log2(57344 / amax));
 *                 - amax: the maximum over the previous global batch (their history holds one amax
 *                   per micro-batch and the scales change once per global batch).  A step of this
 *                   harness is one global batch (one forward and one backward over B x T tokens, no
 *                   gradient accumulation), so that is the amax of the previous step: a delayed
 *                   history of 1, "max", margin 0, and scale 1 before the first amax, as theirs.
 *                 Saturating casts, the head in bf16 and the site overrides as under fp8-delayed.
 *   nvfp4         NVIDIA's NVFP4 pretraining recipe (arXiv 2509.25149; TE's NVFP4BlockScaling): e2m1
 *                 elements everywhere, blocks of 16 along the GEMM's contraction dimension with e4m3
 *                 scales under one float32 scale per tensor from its current amax
 *                 (fl_nvfp4_fake_quantize_tiles).  Weights in 16x16 tiles (one quantised W serves the
 *                 forward and the dgrad GEMM; --fp4-w1d: 1x16 blocks, with a 16x1 copy for dgrad).  The
 *                 wgrad GEMM contracts over tokens: X and dY are quantised a second time in 16x1
 *                 blocks, optionally after a random Hadamard transform of 16 tokens (--rht, both
 *                 operands, fl_rht16; not where one of the two is kept in bf16 by --site).  Options: Four Over Six block scales (--four-over-six),
 *                 stochastically rounded dY (--grad-sr, both copies), and of the wgrad copy of X
 *                 (--update-sr).
 *   mxfp4         OCP MXFP4: e2m1 elements, 1x32 blocks along the contraction dimension (32x1 for the
 *                 wgrad copies of X and dY, and for the dgrad copy of W), e8m0 scales with TE's
 *                 round-up rule; --grad-sr, --update-sr as under nvfp4.
 *                 Under both, --site PATTERN=bf16 keeps sites in bf16 (e.g. the last layers, as
 *                 NVIDIA's recipe keeps about 15% of the linear layers).
 * The output head always runs in bf16 under the FP8 recipes (TE practice: the LM head is not an
 * FP8 GEMM); attention scores/softmax, norms, activations and the loss are float32 everywhere.
 *
 * Overflow: FP8 casts saturate by default (TE, __NV_SATFINITE).  --fp8-overflow nan selects the
 * non-saturating cast of ml_dtypes and of PyTorch eager up to 2.11 (e4m3 overflow -> NaN, e5m2 -> Inf;
 * torch 2.15's e4m3fn cast saturates: numerics/CONVERT.md's peers table);
 * it applies to every FP8 cast of the run alike.
 *
 * Smooth-SwiGLU (Fishman et al. 2025): before the down-projection's input cast the SwiGLU output h
 * is multiplied by a power-of-two scale per channel (the paper) or per token (their released code),
 * s = 2^-ceil(log2 amax) of that channel / token (current, no gradient through s), and the result
 * is divided by s after the cast:  X^ = Q(h . s) / s.  Powers of two make the scaling exact, so in
 * fp32/bf16 smooth_swiglu is bit-identical to swiglu; under FP8 every channel enters the cast
 * with amax in [0.5, 1].
 *
 * Statistics per site and step (fl_cast_stats, filled by every cast):  counts of elements,
 * saturated (|x * s| > max finite, or +-Inf input), clipped (beyond the RNE overflow boundary),
 * NaN/Inf produced from a finite input (non-saturating casts), NaN inputs, flushed to zero;
 * the amax of x, and on telemetry steps sum x^2 and x^4 (for rms and kurtosis, in double, with a
 * fixed chunking so the result does not depend on the thread count); the scale and the amax it
 * came from (staleness = amax now / amax the scale came from).
 */
#ifndef FL_RECIPE_H
#define FL_RECIPE_H

#include "cast.h"
#include "scaling.h"

#include <stdint.h>
#include <stdio.h>

/* Room for the per-site overrides of a recipe (--site flags joined by ';'), terminator included. */
#define FL_SITE_SPEC_MAX 256

typedef enum {
    FL_RECIPE_FP32,
    FL_RECIPE_BF16,
    FL_RECIPE_FP8_DELAYED,
    FL_RECIPE_FP8_CURRENT,
    FL_RECIPE_FP8_BLOCK,
    FL_RECIPE_MXFP8,
    FL_RECIPE_PAPER_GAUDI2, /* appended: the values above are stored in version-5 checkpoints */
    FL_RECIPE_NVFP4,
    FL_RECIPE_MXFP4,
    FL_RECIPE_COUNT
} fl_recipe_kind;

const char *fl_recipe_name(fl_recipe_kind r);          /* as on the CLI: "fp8-delayed" ... */
int fl_recipe_parse(fl_recipe_kind *out, const char *s); /* 0, or -1 if unknown */
int fl_recipe_is_fp8(fl_recipe_kind r); /* every recipe from fp8-delayed on: FP8 and FP4 (the head in bf16) */
int fl_recipe_is_fp4(fl_recipe_kind r); /* nvfp4, mxfp4 */
/* The FP8 recipes whose casts the GPU step runs (gstep.h, fl_recipe_dev_cast_begin): fp8-delayed,
   fp8-current, paper-gaudi2. */
int fl_recipe_dev_fp8(fl_recipe_kind r);
/* The recipes with per-tensor FP8 scales (fp8-delayed, fp8-current, paper-gaudi2): the ones that take
   site overrides and stochastically rounded gradients. */
int fl_recipe_per_tensor(fl_recipe_kind r);

/* Gaudi2's e4m3 (paper-gaudi2) is FL_DESC_E4M3_GAUDI2 of numerics/cast.h. */

/* The recipe's options (stored in checkpoints: fixed-width fields). */
typedef struct {
    uint32_t kind;         /* fl_recipe_kind */
    uint32_t history;      /* amax history length (delayed) */
    uint32_t algo;         /* fl_amax_algo (delayed) */
    int32_t margin;        /* delayed and current: scale / 2^margin */
    uint32_t pow2;         /* power-of-two per-tensor scales */
    uint32_t nosat;        /* 1: non-saturating FP8 casts (NaN/Inf on overflow) */
    uint32_t fast_accum;   /* 1: Hopper fast accumulation in forward FP8 GEMMs (needs the twin) */
    uint32_t fp8_adam;     /* 1: Adam m1 in e4m3, m2 in e5m2 (per-tensor current scales) */
    uint32_t grad_current; /* fp8-delayed only, 1: dY scaled from the current tensor, X and W delayed (a per-role
                              recipe, as torchao's float8 training allowed; not a TE DelayedScaling option) */
    uint32_t fp8_start;    /* FP8 recipes: steps before this one cast to bf16 instead, while the delayed
                              histories record their amaxes (a BF16 start, as when FP8 continues from a BF16 run) */
    uint32_t grad_sr;      /* 1: the e5m2 gradient casts (dY) round stochastically (fp8-delayed, fp8-current);
                              under nvfp4 / mxfp4 the e2m1 casts of dY, both copies */
    uint32_t update_sr;    /* nvfp4 / mxfp4, 1: the wgrad GEMM's copy of X rounds stochastically too */
    uint32_t four_over_six; /* nvfp4, 1: Four Over Six block scales (fl_nvfp4_fake_quantize) */
    uint32_t fp4_w1d;      /* nvfp4, 1: weights in 1x16 blocks (and a 16x1 copy for dgrad), not 16x16 tiles */
    uint32_t rht;          /* nvfp4 / mxfp4, 1: random Hadamard transform of the wgrad copies of X and dY */
    uint32_t mx_floor;     /* mxfp8 / mxfp4, 1: the OCP MX scale rule 2^(floor(log2 amax) - emax) (may clip), not
                              TE's round-up rule (never clips) */
    char sites[FL_SITE_SPEC_MAX]; /* per-site overrides "PATTERN=MODE;..." (fl_recipe_sites_check), "" none */
} fl_recipe_cfg;

void fl_recipe_cfg_default(fl_recipe_cfg *c, fl_recipe_kind kind);
/* The paper's stack (Fishman et al., ICLR 2025, and their released code; TRAINING.md) on TE's
   formats: fp8-delayed, the amax of the previous step (history 1, "max"), margin 0, power-of-two
   scales, saturating casts, e5m2 dY with stochastic rounding, FP8 from step fp8_start.  The other
   fields (site overrides, fp8_adam, fast_accum, grad_current) are left as they are. */
void fl_recipe_paper(fl_recipe_cfg *c, uint32_t fp8_start);
/* paper-gaudi2 with the settings it fixes: history 1, "max", margin 0, power-of-two scales,
   saturating casts, stochastically rounded e5m2 dY, no fast accumulation, dY delayed.  fp8_start,
   fp8_adam and the site overrides are left as they are (they are not part of the recipe).  `train
   --recipe paper-gaudi2` applies this. */
void fl_recipe_paper_gaudi2(fl_recipe_cfg *c);
/* NULL, or which fixed setting of paper-gaudi2 c changes (c->kind must be paper-gaudi2). */
const char *fl_recipe_paper_gaudi2_check(const fl_recipe_cfg *c);

/* Per-site overrides (--site PATTERN=MODE, repeatable; cfg.sites holds them joined by ';').
 * PATTERN is a site name or an fnmatch(3) pattern over the names ("L0.down.in", "*.down.in",
 * "L1.*.gout"); MODE is
 *   bf16      the site casts to bf16, unscaled (e.g. the paper's "SwiGLU output in BF16" ablation)
 *   current   per-tensor scale from the tensor itself (TE Float8CurrentScaling at this site only)
 *   delayed   per-tensor scale from the site's amax history (TE DelayedScaling at this site only)
 * Overrides apply in order (a later one wins).  A pattern that names no site, a bad mode, an
 * override under a recipe without per-tensor FP8 scales (fp32, bf16, fp8-block, mxfp8) and an
 * override of the head's sites (bf16 under every FP8 recipe) are errors.
 * Returns NULL, or what is wrong (in err, at most errlen bytes). */
const char *fl_recipe_sites_check(const fl_recipe_cfg *cfg, int nsites, const char *const *names,
                                  const uint8_t *hp_mask, char *err, size_t errlen);
/* Append "PATTERN=MODE" to cfg->sites: 0, or -1 when it does not fit or has no '='. */
int fl_recipe_sites_add(fl_recipe_cfg *cfg, const char *spec);

typedef enum { FL_ROLE_IN, FL_ROLE_W, FL_ROLE_GOUT, FL_ROLE_COUNT } fl_site_role;

/* Counters of one cast, or of all casts of a site in one step (summed). */
typedef struct {
    uint64_t n, sat, clip, nan_out, inf_out, nan_in, ftz;
    double clip_mass;  /* per-tensor scales, a cast with saturated elements: sum of |x| beyond the largest
                          finite value (in x's units; all of |x| where the cast gave NaN/Inf) over sum |x|,
                          finite x only; 0 without saturation; NaN for block / MX scales of FP8 recipes.
                          FP4 recipes: sum of |x| beyond its block's largest value (6 block units) */
    /* FP4 recipes, the forward cast (x: the tensor as the cast sees it, smoothed where smoothing applies): */
    double flush_mass; /* sum |x| of the finite x != 0 that became 0 in a block whose scale is not 0 (below
                          half the smallest step of a scale set by a larger element of the block), over sum |x| */
    double under_mass; /* sum |x| of the finite x != 0 in blocks whose scale itself is 0 (NVFP4: the e4m3
                          block scale underflows under the tensor scale), over sum |x| */
    double norm2, err2; /* sum x^2 and sum (Q(x) - x)^2 over the finite x: sqrt(norm2 / err2) is the signal
                           to quantisation noise ratio; for dY the quantity of FP4 All the Way's sqrt(3)
                           threshold (gradient norm over quantisation noise norm) */
    float blk_q[3];    /* telemetry steps: the 1st, 50th and 99th percentile of the block amaxes over the
                          tensor's amax (blocks: 1x16 / 1x32 row segments, 16x16 tiles of 2D weights);
                          NaN otherwise */
    float amax;        /* max |x| over non-NaN elements */
    double sum2, sum4; /* sum x^2, x^4 (telemetry steps only, else 0) */
    uint64_t nmom;     /* elements in sum2/sum4 */
} fl_cast_stats;

/* One cast site. */
typedef struct {
    char name[40];       /* "L0.down.in" */
    uint32_t role;       /* fl_site_role */
    uint32_t fmt;        /* fl_format of the cast (FL_FMT_FP32: no cast) */
    fl_scaling scaling;  /* none, delayed, tensor (current), 1x128 (weights 128x128), mx32 */
    fl_delayed *dl;      /* delayed-scaling state (scaling == FL_SCALING_DELAYED), else NULL */
    uint32_t gaudi2;     /* 1: an X or W site of paper-gaudi2 in FP8: its cast is Gaudi2's e4m3 (max 240,
                            scales from 240) and the backward GEMMs read its e5m2 copy */
    fl_delayed *dl_bwd;  /* gaudi2 and delayed: the e5m2 copy's state, fed the same amaxes as dl */
    fl_cast_stats st;    /* this step: the forward cast's and the backward copy's counts (amax, clip
                            mass and moments: the forward cast's) */
    uint32_t rht;        /* FP4, --rht: the wgrad copy goes through the Hadamard transform; only where the
                            other input of the wgrad GEMM (X for dY, dY for X: the same Linear's in and gout
                            sites) is an FP4 site as well, since M^T M = I needs the transform on both */
    float scale;         /* the per-tensor scale used this step (block/mx: 1) */
    float scale_bwd;     /* gaudi2 and delayed: the e5m2 copy's scale this step */
    float amax_from;     /* the amax that scale was computed from (staleness denominator) */
    float amax_pend;     /* defer: the largest amax of this step's casts so far, for the history at step end */
    uint32_t pend;       /* defer: amax_pend holds a value */
    uint64_t tot_sat, tot_clip, tot_nan_out, tot_inf_out, tot_ftz; /* over the run */
} fl_site;

/* All the sites of a model and the recipe's options. */
typedef struct {
    fl_recipe_cfg cfg;
    int nsites;
    fl_site *sites;
    int moments;   /* 1: this step is a telemetry step; casts accumulate sum2/sum4 */
    int slow_cast; /* 1: the cast engine's reference loop (fl_cast_fmt.reference; tests compare the two) */
    int hp_phase;  /* 1: this step casts every FP8 site to bf16 (cfg.fp8_start); delayed sites record amax */
    double wgrad_norm2, wgrad_err2; /* FP4 recipes, telemetry steps: sum over the Linears whose X and dY are FP4
                                       of ||dW||^2 and ||dW_q - dW||^2, dW from the unquantised dY and X, dW_q
                                       from the copies the wgrad GEMM read (model.c); 0 otherwise */
    double wgrad_mean2; /* the same Linears: an unbiased estimate of ||E dW||^2, the squared norm of the mean
                           gradient without the batch's sampling noise, from two halves of the batch */
    int wgrad_halves;   /* wgrad_mean2 was measured (an even batch) */
    uint64_t step;    /* the step being computed (the stochastic-rounding streams are functions of it) */
    uint64_t sr_seed; /* the seed of the stochastic-rounding streams (the run's seed) */
    int defer;        /* 1 (several micro-batches a step, --accum): a delayed site's history takes one amax per
                         step, the largest of its casts in the step, at fl_recipe_step_end; its scale stays the
                         same within the step (the authors' stack: the previous global batch's micro-batch
                         amaxes).  0: each forward cast records its amax as it happens */
} fl_recipe;

/* Allocate `nsites` sites named by names[i] with roles roles[i]; `hp_mask[i]` set marks a site
   that stays in bf16 under the FP8 recipes (the output head).  Returns 0, or -1 (message on
   stderr) for a bad option. */
int fl_recipe_init(fl_recipe *r, const fl_recipe_cfg *cfg, int nsites, const char *const *names,
                   const uint32_t *roles, const uint8_t *hp_mask);
void fl_recipe_free(fl_recipe *r);
/* Zero every site's per-step statistics; moments: collect sum2/sum4 this step. */
void fl_recipe_step_begin(fl_recipe *r, int moments);
/* Add the step's counts to the run totals (and, with defer, record the step's amaxes). */
void fl_recipe_step_end(fl_recipe *r);

/* Smoothing of a cast's input (Smooth-SwiGLU); NULL for none. */
typedef struct {
    int axis;             /* 0: per column (channel), 1: per row (token) */
    float *s, *s_inv;     /* scratch (C) or (R), filled by the cast */
} fl_smooth;

/* y (R, C) = fake-quantized x (R, C) at `site`: the forward cast (transposed = 0: tiles run along C,
   the contraction dimension of a row-major operand), or the backward copy of the same tensor
   (transposed = 1, where fl_recipe_needs_bwd_copy: tiles along columns for block / MX wgrad, the
   e5m2 copy of paper-gaudi2), cast after the forward cast of the same step.  y may be x on a step
   without moments (r->moments = 0; the moment sums read x after the cast): each element is read
   before it is written.  Statistics go to the site (only the forward casts record amax into a
   delayed history: call with record = 1 once per step). */
void fl_recipe_cast(fl_recipe *r, int site, float *y, const float *x, size_t R, size_t C,
                    int transposed, int record, fl_smooth *sm);

/* The stochastic-rounding stream of a site's dY cast this step (cfg.grad_sr): element i of the cast
   (row-major index) rounds with fl_sr_bits(key, i) as fl_encode_f32_bits's FL_RND_SR does. */
uint64_t fl_recipe_sr_key(const fl_recipe *r, int site);
/* FP4 recipes: the wgrad copy (transposed = 1) of a site draws from the key fl_recipe_sr_key(r, site) ^
   FL_RECIPE_SR_COPY, its element (i, j) of the transposed (C, R) layout at index i * R + j. */
#define FL_RECIPE_SR_COPY 0x7472616E73706F73ull

/* Whether the backward GEMMs read a copy of site `site`'s tensor cast for them (fl_recipe_cast with
   transposed = 1) instead of the forward cast: column-wise tiles for the wgrad GEMM of the X and dY
   sites of fp8-block and mxfp8; the e5m2 copies of the X and W sites of paper-gaudi2. */
int fl_recipe_needs_bwd_copy(const fl_recipe *r, int site);

/* The GPU step's casts (experiments/train/gstep.c), whose pass over the data runs on the device
   (kernels/train_step.h, fl_cast_fq): the recipe's part of fl_recipe_cast, for per-tensor sites.
   fl_recipe_dev_check: NULL when every site has such a path (fp32, bf16, FP8 with delayed or current
   per-tensor scaling, paper-gaudi2's delayed casts, no fast accumulation), else why not.
   fl_recipe_dev_cast_begin: the format, rounding and stream (*cf) and the scale and its inverse of
   site's forward cast this step, as fl_recipe_cast takes them (the bf16 start included); amax is the
   tensor's max |x| over its non-NaN elements, read for current scaling only.  0, or -1 for a site
   without such a cast (fp32, block / MX scales).
   fl_recipe_dev_cast_end: that cast's counts and amax (n elements, cast with scale s and *cf) into the
   site's statistics as fl_recipe_cast records them, and into the delayed history when record (once a
   step).  1 when the cast saturated: its clip mass is then NaN until fl_recipe_dev_clip_mass makes the
   harness's pass over x (R rows of C, as the cast saw them: scale s, *cf, the smoothing's scales on the
   host, sm NULL for none); else 0.  No moments. */
const char *fl_recipe_dev_check(const fl_recipe *r);
/* paper-gaudi2's backward copies on the device: fl_recipe_dev_copy_begin gives the e5m2 copy's format and
   scale (the one the site's forward cast read this step; bf16 unscaled in the bf16 start), -1 for a site
   without one; fl_recipe_dev_copy_end adds the copy's counts to the site's, as fl_recipe_cast does for
   transposed = 1. */
int fl_recipe_dev_copy_begin(fl_recipe *r, int site, fl_cast_fmt *cf, float *s, float *s_inv);
void fl_recipe_dev_copy_end(fl_recipe *r, int site, const fl_cast_counts *k, size_t n);
int fl_recipe_dev_cast_begin(fl_recipe *r, int site, float amax, fl_cast_fmt *cf, float *s, float *s_inv);
int fl_recipe_dev_cast_end(fl_recipe *r, int site, const fl_cast_counts *k, float amax, size_t n, float s,
                           const fl_cast_fmt *cf, int record);
/* A smoothed cast's scales in host memory: per row (rs, rsi) or per column (cs, csi), NULL where none. */
typedef struct {
    const float *rs, *rsi, *cs, *csi;
} fl_cast_smooth_host;
void fl_recipe_dev_clip_mass(fl_recipe *r, int site, const float *x, size_t R, size_t C, float s, const fl_cast_fmt *cf,
                             const fl_cast_smooth_host *sm);

/* Serialised state of the delayed-scaling histories and run totals (for checkpoints; a site's dl_bwd
   follows its dl). */
size_t fl_recipe_state_size(const fl_recipe *r);
void fl_recipe_state_save(const fl_recipe *r, unsigned char *buf);
/* Returns NULL on success, else a description of what is wrong. */
const char *fl_recipe_state_load(fl_recipe *r, const unsigned char *buf, size_t n);

/* The moments a telemetry step's cast collects, per row (exported for tests): fl_cast_row_moments
   with one row per scale s[i]. */
void fl_recipe_row_moments(double *rm, const float *x, size_t R, size_t C, const float *rs, const float *s);

/* The amax the current delayed scale came from (history max, or the most recent amax). */
float fl_recipe_delayed_amax_from(const fl_delayed *d);

#endif /* FL_RECIPE_H */
