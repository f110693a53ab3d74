/* ffn_act.h — the FFN activations of the training harness, forward and backward, on float32 rows.
 *
 * A thin interface between the model (experiments/train/model.c) and the activation arithmetic: SwiGLU,
 * PolyReLU and PolyNorm run through the kernels' CPU twins (kernels/kernels.h, fp32 views), so the
 * harness computes what the CUDA kernels compute, bit for bit; the elementwise twins are called
 * on one contiguous chunk per thread (no reduction is split, so the bits do not depend on the
 * thread count); the coefficient gradients of PolyReLU / PolyNorm come from one twin call each
 * (their fixed reduction order).  ReLU and GELU (no twin) are plain loops here.
 *
 * Layout: pre (G, N, F) is the output of the FFN's first Linear for N tokens; G = 2 for the gated
 * activations (plane 0 the gate, plane 1 the up projection: h = silu(gate) * up), G = 1 otherwise.
 * h (N, F) is the activation output, the input of the down projection.
 *
 *   relu          h = max(x, 0)
 *   gelu          h = x/2 (1 + erf(x / sqrt 2))  (exact GELU, fl_erff: erf correctly rounded)
 *   swiglu        h = silu(g) u
 *   smooth_swiglu, smooth_swiglu_token:  the same arithmetic as swiglu; the smoothing happens at
 *                 the FP8 cast of h (experiments/train/recipe.h), per channel (paper) or per token (code)
 *   polyrelu      h = sum_{i=0..r} a_i relu(x)^i                        (r = 2..4)
 *   polynorm      h = a_0 + sum_{i=1..r} a_i x^i / sqrt(mean_row(x^2i) + 1e-6)  (r = 2..4)
 * a: one coefficient vector per layer (trainable), initialised a_0 = 0, a_i = 1/r (PolyCom).
 *
 * Backward writes dpre (overwrites) and ADDS the coefficient gradients to dcoef.
 */
#ifndef FL_FFN_ACT_H
#define FL_FFN_ACT_H

#include <stddef.h>
#include <stdint.h>

#include "act_list.h"
#include "activations.h" /* fl_poly_coef */

/* FL_ACT_<ID> for the rows of reference/act_list.h with a TRAIN part, valued by the list's kind column
   (stored in checkpoints; ffn_act.c checks that the values are 0 .. FL_ACT_COUNT-1, each once).
   FL_ACT_SMOOTH_SWIGLU smooths per channel (the paper), FL_ACT_SMOOTH_SWIGLU_TOKEN per token (the
   released code). */
typedef enum {
#define FL_ACT_KIND_(ID, name, kind, ...) FL_ACT_##ID = kind,
    FL_ACT_TRAINS(FL_ACT_KIND_)
#undef FL_ACT_KIND_
#define FL_ACT_ONE_(...) +1
    FL_ACT_COUNT = 0 FL_ACT_TRAINS(FL_ACT_ONE_)
#undef FL_ACT_ONE_
} fl_act_kind;

typedef struct {
    uint32_t kind;  /* fl_act_kind */
    uint32_t order; /* r for polyrelu / polynorm (2..4), else 0 */
} fl_act;

#define FL_ACT_NCOEF 5 /* a_0 .. a_4 */

/* The activations, one row per fl_act_kind (ffn_act.c, from the TRAIN parts of reference/act_list.h):
   what `fp8lab train --help`, --act's parser and error message, and tests/test_train_grad.c read.
   A new activation is a row of the list, with a forward/backward pair in ffn_act.c (its impl column)
   unless it shares one. */
typedef struct {
    const char *name;      /* CLI name; with an order range, followed by one digit (polyrelu3) */
    const char *note;      /* shown after the name in the help, in parentheses, or NULL */
    int gated;             /* two planes in pre (gate, up): the SwiGLU family */
    int order_min, order_max, order_default; /* orders r of the polynomial ones; 0 0 0 otherwise */
    int smooth;            /* -1: h is cast as is; else Smooth-SwiGLU's axis (fl_smooth.axis: 0 channel, 1 token) */
} fl_act_info;

extern const fl_act_info fl_act_table[FL_ACT_COUNT];

/* How row k is written on the command line: "relu", "polyrelu[2-4]" (an order range), and with
   notes "smooth_swiglu (per channel)".  Into buf (n bytes, NUL-terminated); returns buf. */
char *fl_act_spelling(char *buf, size_t n, int k, int notes);
/* Every activation with every order it takes (relu, ..., polyrelu2, polyrelu3, ...), in table
   order, into out (at most max); returns how many there are. */
int fl_act_variants(fl_act *out, int max);

/* Parse "relu", "gelu", "swiglu", "smooth_swiglu", "smooth_swiglu_token", "polyrelu", "polyrelu2".."4",
   "polynorm", "polynorm2".."4" (no digit: order 3).  0, or -1 if unknown. */
int fl_act_parse(fl_act *out, const char *s);
/* The CLI name ("polynorm3" for orders). */
const char *fl_act_name(fl_act a);
int fl_act_gated(fl_act a);     /* 1 for the SwiGLU family */
int fl_act_swiglu(fl_act a);    /* 1 for the SwiGLU arithmetic (swiglu / smooth_swiglu(_token)) */
int fl_act_ncoef(fl_act a);     /* trainable coefficients (r+1 for poly, else 0) */
int fl_act_smooth_axis(fl_act a); /* -1, or the fl_smooth axis of h's FP8 cast (fl_act_info.smooth) */
void fl_act_coef_init(float *a, fl_act act);

/* PolyReLU's and PolyNorm's coefficients a_0 .. a_r of act from coef (the rest 0), and PolyNorm's
   epsilon, for the harness and the GPU step. */
fl_poly_coef fl_act_poly(const float *coef, fl_act act);
#define FL_ACT_POLYNORM_EPS 1e-6f

void fl_act_forward(float *h, const float *pre, size_t N, size_t F, fl_act act, const float *coef);
void fl_act_backward(float *dpre, float *dcoef, const float *dh, const float *pre, size_t N, size_t F,
                     fl_act act, const float *coef);

#endif /* FL_FFN_ACT_H */
