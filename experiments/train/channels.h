/* channels.h — per-channel telemetry of every FFN's down-projection input, and the decorrelation
 * intervention of the mechanism experiments (experiments/train/TRAINING.md, "The mechanism").
 *
 * The down projection's input of layer l is h = act(fc(x)) (N, F): for SwiGLU h_i = silu(g_i) u_i
 * with g_i = w_gate,i . x and u_i = w_up,i . x.  Per channel i the files carry
 *   amax      max over the step's tokens of |h_i| (before Smooth-SwiGLU's smoothing and any cast)
 *   align     |cos(w_gate,i, w_up,i)| (gated activations; 0 for the others)
 *   wnorm     ||w_gate,i|| ||w_up,i|| (gated), ||w_fc,i|| (the others)
 *   gate_max  max over tokens |g_i| (the input projection; the FC output of non-gated activations)
 *   up_max    max over tokens |u_i| (0 for non-gated activations)
 * computed from the forward's tensors and the weights that forward used (before the step's update).
 *
 * channels.csv, every --chan-every steps, one row per (layer, channel):
 *   step,layer,channel,amax,align,wnorm,gate_max,up_max
 * records.csv, one row whenever a layer's amax (max over channels) exceeds its running maximum over
 * all earlier steps of the trajectory (a fork inherits its parent's maxima):
 *   step,layer,amax,prev_max,channel,align,align_rank,wnorm,gate_max,up_max,q50,q90,q99
 *   channel: the channel that set the record (the lowest index on ties); align_rank: its rank by
 *   align in the layer (0 = most aligned; ties by index); q50/q90/q99: quantiles over the channels
 *   of the per-channel amax (sorted ascending, element floor(q (F - 1))).
 * Numbers are printed with %.9g: bit-identical runs write byte-identical files.  numpy reads both
 * with np.genfromtxt(path, delimiter=",", names=True).
 */
#ifndef FL_CHANNELS_H
#define FL_CHANNELS_H

#include "model.h"

#include <stdint.h>
#include <stdio.h>

void fl_chan_headers(FILE *fc, FILE *fr);

/* The step's rows: channels.csv rows of every layer when periodic (the forward ran with
   chan_on == 2), records.csv rows of the layers that set a record.  After the forward, before the
   optimizer changes the weights. */
void fl_chan_rows(FILE *fc, FILE *fr, uint64_t step, const fl_model *m, int periodic);

/* Per-channel align and wnorm of layer l (F values each; align 0 for non-gated activations). */
void fl_chan_weights(float *align, float *wnorm, const fl_model *m, uint32_t l);

/* The decorrelation intervention: which channels. */
enum { FL_DECOR_NONE, FL_DECOR_TOP, FL_DECOR_RANDOM };
const char *fl_decor_name(int mode); /* "none", "top", "random" */

/* The k channels of layer l (gated activations) that mode picks, in idx (ascending): FL_DECOR_TOP the
   k most aligned (ties by index), FL_DECOR_RANDOM k distinct channels drawn from seed. */
void fl_chan_pick(uint32_t *idx, const fl_model *m, uint32_t l, uint32_t k, int mode, uint64_t seed);

/* Replace w_up,i of layer l by a random vector (drawn from seed) of the same norm orthogonal to
   w_gate,i: Gram-Schmidt twice in double, rounded to float.  The channel's rows of the AdamW
   moments am, av (laid out as the parameters; may be NULL) are zeroed, so the optimizer does not
   push the old direction back in.  Returns |cos| after the change. */
double fl_chan_decorrelate(fl_model *m, float *am, float *av, uint32_t l, uint32_t i, uint64_t seed);

#endif /* FL_CHANNELS_H */
