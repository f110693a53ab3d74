/* model.h — the decoder-only transformer of the training harness, forward and backward.
 *
 * Dimension letters (defined once, used in every shape comment):
 *   V vocabulary, C model width, L layers, H heads (hs = C/H), F FFN hidden width, G = 2 for the
 *   gated (SwiGLU) activations else 1, T sequence length, B batch, N = B*T tokens.
 *
 * Architecture (pre-norm, no biases, Llama-like):
 *   x = wte[tok] + wpe[pos]
 *   per layer:  x += proj(attn(qkv(rms(x) * ln1)))          causal softmax attention, H heads
 *               x += down(act(fc(rms(x) * ln2)))            act: relu | gelu | swiglu family | poly
 *   logits = head(rms(x) * lnf);  loss = mean cross-entropy of the next token.
 * rms(x) = x / sqrt(mean(x^2) + 1e-5).  The four Linear layers of each block and the head go
 * through the recipe's cast sites (recipe.h); everything else is float32.
 *
 * Gradients: fl_model_backward ADDS the parameter gradients of the current batch to m->grads (zero
 * them with fl_model_zero_grad before a step); activation gradients are scratch, overwritten.
 * Every reduction has one fixed order (per-row partials summed in row order, or a loop over an
 * output index that sums its inputs sequentially; the GEMMs: gemm.h), so a step gives the same bits
 * every time it is run, on any thread count and instruction set (FP8LAB_ISA).
 */
#ifndef FL_MODEL_H
#define FL_MODEL_H

#include "ffn_act.h"
#include "recipe.h"

#include <stddef.h>
#include <stdint.h>

/* The largest --layers and --ffn (fl_model_cfg_check); the per-layer arrays below hold FL_MODEL_MAX_L. */
enum { FL_MODEL_MAX_L = 64, FL_MODEL_MAX_F = 65536 };

typedef struct {
    uint32_t V, C, L, H, F, T, B;
    fl_act act;
    float init_std; /* std of the weight init (0.02); proj/down use init_std / sqrt(2L) */
} fl_model_cfg;

/* Parameter tensors, in storage order. */
enum {
    FL_P_WTE,   /* (V, C) */
    FL_P_WPE,   /* (T, C) */
    FL_P_LN1,   /* (L, C) */
    FL_P_WQKV,  /* (L, 3*C, C) */
    FL_P_WPROJ, /* (L, C, C) */
    FL_P_LN2,   /* (L, C) */
    FL_P_WFC,   /* (L, G*F, C): rows [0, F) gate, [F, 2F) up for the gated activations */
    FL_P_WDOWN, /* (L, C, F) */
    FL_P_ACOEF, /* (L, FL_ACT_NCOEF) activation coefficients (poly); unused otherwise */
    FL_P_LNF,   /* (C) */
    FL_P_WHEAD, /* (V, C) */
    FL_P_COUNT
};

/* The Linear layers of a block, and the cast sites: site = (l * FL_LIN_COUNT + lin) * 3 + role;
   the head's three sites come last. */
enum { FL_LIN_QKV, FL_LIN_PROJ, FL_LIN_FC, FL_LIN_DOWN, FL_LIN_COUNT };
#define FL_SITE(l, lin, role) (((l) * FL_LIN_COUNT + (lin)) * 3 + (role))
#define FL_SITE_HEAD(L, role) ((L) * FL_LIN_COUNT * 3 + (role))
/* The same by Linear: Linear lin of layer l is number l FL_LIN_COUNT + lin (the head: L FL_LIN_COUNT), and
   its sites are that number times 3 plus the role (model.c and the GPU step, gstep.c). */
static inline int fl_lin_index(size_t l, int lin) { return (int)(l * FL_LIN_COUNT) + lin; }
static inline int fl_lin_site(int li, int role) { return li * 3 + role; }

/* The quantized operands a Linear saves for its backward. */
/* The elements of each parameter tensor of a model (storage order), into sizes; returns their sum. */
size_t fl_model_param_sizes(const fl_model_cfg *cfg, size_t sizes[FL_P_COUNT]);

typedef struct {
    float *xq;  /* (N, K) input as the forward GEMM saw it */
    float *xqt; /* (N, K) backward copy for wgrad (fl_recipe_needs_bwd_copy: block/MX columns, paper-gaudi2 e5m2) */
    float *wq;  /* (M, K) weight as the forward GEMM sees it */
    float *wqt; /* (M, K) backward copy for dgrad (paper-gaudi2: e5m2) */
    const float *xs, *xts, *ws, *wbs; /* the forward's X and W, wgrad's X, dgrad's W (may be the fp32 originals) */
    const float *x;   /* the forward's X before its cast (intact on telemetry steps: no cast in place) */
} fl_lin_q;

/* Per-layer FFN statistics of the last forward (telemetry). */
typedef struct {
    float in_amax;   /* max |FFN input| = max |rms(x) * ln2| */
    float in_rms;
    float act_amax;  /* max |act output| (the SwiGLU output, input of down) */
    float act_rms;
} fl_ffn_fwd_stats;

typedef struct {
    fl_model_cfg cfg;
    size_t sizes[FL_P_COUNT];   /* elements per tensor */
    size_t nparams;
    float *params;              /* one allocation, tensors in enum order */
    float *grads;               /* same layout */
    float *p[FL_P_COUNT];       /* pointer tables into params / grads */
    float *g[FL_P_COUNT];
    fl_recipe *rec;             /* the recipe (owned by the caller) */
    uint32_t gemm_kchunk;       /* 0: one fma chain per GEMM element (gemm.h); k: chains over blocks of k terms,
                                   added in order (--gemm-kchunk; set after fl_model_init) */
    uint32_t attn_kchunk;       /* 0: the attention's own loops; k: the attention's products as GEMMs with sums in
                                   blocks of k (--attn-kchunk; set after fl_model_init) */

    /* forward activations (kept for backward) */
    int *tok;      /* (N) inputs */
    int *tgt;      /* (N) targets */
    float *resid;  /* (L+1, N, C) residual stream at each layer's input, and the final one */
    float *r2;     /* (L, N, C) after attention */
    float *ln1;    /* (L, N, C) */
    float *rstd1;  /* (L, N) */
    float *qkv;    /* (L, N, 3*C) */
    float *att;    /* (L, B, H, T, T) softmax probabilities */
    float *atty;   /* (L, N, C) attention output (proj input) */
    float *ln2;    /* (L, N, C) */
    float *rstd2;  /* (L, N) */
    float *pre;    /* (L, G, N, F) fc output: G planes (gate, up) */
    float *h;      /* (L, N, F) activation output */
    float *lnf;    /* (N, C) */
    float *rstdf;  /* (N) */
    float *logits; /* (N, V) softmax probabilities after forward */
    double *tokloss; /* (N) */
    fl_lin_q lq[FL_MODEL_MAX_L * FL_LIN_COUNT + 1]; /* per Linear; [L * FL_LIN_COUNT] is the head */
    float *smooth_s, *smooth_si;        /* (max(N, F)) Smooth-SwiGLU scales */
    fl_ffn_fwd_stats ffn[FL_MODEL_MAX_L];
    /* Per-channel statistics of every FFN's down-projection input (channels.h), captured by the
       forward before the down projection's cast (which may overwrite h):
         chan_on 0: never (the default); 1: for the layers whose act_amax sets a record (exceeds
         chan_rec_max[l], which the forward then raises); 2: as 1, and every layer this step.
       chan_have[l] says layer l was captured this step, chan_record[l] that it set a record. */
    float *chan_amax;            /* (L, F) max over tokens |h_i| */
    float *chan_gmax, *chan_umax; /* (L, F) max over tokens |gate_i| (the FC output of non-gated
                                    activations) and |up_i| (0 for them) */
    int chan_on;
    float chan_rec_max[FL_MODEL_MAX_L], chan_prev_max[FL_MODEL_MAX_L]; /* the running maxima; the one a record beat */
    uint8_t chan_have[FL_MODEL_MAX_L], chan_record[FL_MODEL_MAX_L];
    /* NULL: the alignment telemetry sums the host's FFN weights (fl_model_ffn_wsums); else the GPU step's
       sums of its weights (3 L F doubles, fl_ffn_wsums' layout), the host's copy being a checkpoint's */
    const double *ffn_wsums;

    /* backward scratch */
    float *dres;  /* (N, C) */
    float *dln;   /* (N, C) */
    float *datty; /* (N, C) */
    float *dqkv;  /* (N, 3*C) */
    float *dpre;  /* (G, N, F) */
    float *dh;    /* (N, F) */
    float *gq, *gqt; /* (N, max(3C, G*F, V)) quantized output gradients */
    float loss;
} fl_model;

/* Allocate a model (params initialised from seed).  rec: an initialised recipe with
   fl_model_nsites(cfg) sites (see fl_model_site_names).  Returns 0 or -1. */
int fl_model_init(fl_model *m, const fl_model_cfg *cfg, fl_recipe *rec, uint64_t seed);
void fl_model_free(fl_model *m);

/* The softmaxes' exp (model.c: glibc's __expf_fma main path, vectorised, bit for bit, where the libm
   in use agrees with it on a sample at init; expf itself otherwise).  For tests: the number of
   float32 inputs x = lo, lo + stride, ... < hi whose result's bits differ from expf's (NaN results
   count as equal), or -1 when the vectorised path is not in use here (then there is nothing to
   compare: expf is what runs). */
long fl_model_expf_mismatches(uint64_t lo, uint64_t hi, uint64_t stride);
/* The per-channel telemetry (chan_on): whether layer l is captured this step, its act_amax setting a
   record (the running maximum raised) or the step being periodic; sets chan_record[l], chan_have[l].
   fl_chan_colmax: per channel i < F of the (N, F) h, gate g and up u (NULL: 0), the max over tokens of
   |.|, in token order; the first NaN sticks, so a channel with a NaN reports NaN. */
int fl_model_chan_want(fl_model *m, size_t l, float act_amax);
void fl_chan_colmax(float *am, float *gm, float *um, const float *h, const float *g, const float *u, size_t N, size_t F);
/* y[i] = expf(x[i]), i < n, with the libm's bits: the softmaxes' vector path where it agrees with the
   libm (as above), the libm's expf otherwise; y may be x (ffn_act.c's GELU backward). */
void fl_model_expf_span(float *y, const float *x, size_t n);
/* The FFN's telemetry of a buffer (R rows of C): amax and, when rms is not NULL, the rms, vectorised and
   threaded with the bits of the reference loops fl_amax_rms (kernels/train_step.h). */
void fl_model_amax_rms(float *amax, float *rms, const float *x, size_t R, size_t C);
/* Check a configuration: NULL if fine, else what is wrong. */
const char *fl_model_cfg_check(const fl_model_cfg *cfg);

int fl_model_nsites(const fl_model_cfg *cfg);
/* Names ("L0.qkv.in", ...), roles and the bf16-under-FP8 mask of every site; names point into
   `store` (nsites * 40 bytes). */
void fl_model_site_names(const fl_model_cfg *cfg, char *store, const char **names, uint32_t *roles,
                         uint8_t *hp);

/* Forward on tokens (B, T+1) (inputs tokens[:, :T], targets tokens[:, 1:]): returns the mean loss. */
float fl_model_forward(fl_model *m, const uint16_t *tokens);
void fl_model_zero_grad(fl_model *m);
void fl_model_backward(fl_model *m);

/* Layer l's FFN weight sums (kernels/train_step.h, fl_ffn_wsums: 3 F doubles, channel i's gate and up
   sums of squares and their dot product): m->ffn_wsums' where set, else computed from the host's weights
   into buf (3 F doubles).  Returns where they are. */
const double *fl_model_ffn_wsums(const fl_model *m, uint32_t l, double *buf);

/* SwiGLU alignment of layer l (gated activations only): |cos(w_gate_i, w_up_i)| over the F
   channels (median, p99, max) and the Pearson correlation of the channel norms. */
typedef struct {
    float cos_med, cos_p99, cos_max, norm_corr;
} fl_align_stats;
void fl_model_align(fl_align_stats *out, const fl_model *m, uint32_t l);

#endif /* FL_MODEL_H */
