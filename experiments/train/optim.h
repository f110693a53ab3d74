/* optim.h — the optimizer step of the training loop (train.c): gradient norm, learning-rate
 * schedule, AdamW.
 *
 * Optimizer: AdamW with decoupled weight decay (Loshchilov & Hutter):
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  p -= lr (m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps) + wd p)
 * with weight decay on the matrices (embeddings, Linear weights, head), none on gains and
 * activation coefficients.  --fp8-adam stores m in e4m3 and v in e5m2 (per-tensor current scales,
 * RNE, saturating) after every update.
 * Schedule: linear warmup over `warmup` steps to lr, then constant or cosine down to lr_min_frac*lr.
 * Gradient clipping: g *= clip / max(clip, ||g||_2) over all parameters (clip 0: off).
 */
#ifndef FL_OPTIM_H
#define FL_OPTIM_H

#include "model.h"
#include "train.h"

#include <stdint.h>

/* The learning rate of step (0-based) under c's warmup and schedule. */
float fl_lr_at(const fl_train_cfg *c, uint64_t step);

/* Whether weight decay applies to parameter tensor `tensor` (model.h's FL_P_*): the embeddings, the
   Linear weights and the head; not the gains or the activation coefficients. */
int fl_param_decays(int tensor);
/* ||grads||_2 over all parameters, in double, in a fixed order (tensor by tensor, elements in
   order), so that it is the same at any thread count. */
float fl_grad_norm(const fl_model *m);

/* One AdamW update of m's parameters from m's gradients times gscale (the clipping factor) at
   learning rate lr; am, av (m->nparams each) are the first and second moments, laid out as
   m->params.  step is 0-based (bias correction uses step + 1).  With --fp8-adam the FP8 moment
   casts count into st->adam_sat, st->adam_ftz. */
void fl_adamw_step(const fl_train_cfg *cfg, fl_model *m, float *am, float *av, uint64_t step, float lr,
                   float gscale, fl_train_state *st);

#endif /* FL_OPTIM_H */
