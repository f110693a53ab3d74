/* telemetry.h — what a training run records, every step and every k steps.
 *
 * metrics.csv (every step), columns:
 *   step, loss, loss_ema, lr, grad_norm,
 *   ffn_in_amax    max over layers of max |FFN input| (after RMSNorm and gain)
 *   act_amax       max over layers of max |activation output| (for SwiGLU: the SwiGLU output, the
 *                  down projection's input before any smoothing)
 *   act_rms        rms of the activation output, the layer with the largest act_amax
 *   align_med, align_p99, align_max   max over layers of the median / p99 / max over channels of
 *                  |cos(w_gate_i, w_up_i)| (SwiGLU family; 0 otherwise)
 *   norm_corr      max over layers of the Pearson correlation of ||w_gate_i|| and ||w_up_i||
 *   down_in_amax   max over layers of the amax entering the down projection's cast (smoothed for
 *                  Smooth-SwiGLU)
 *   down_in_stale  max over layers of amax now / amax its scale came from (delayed scaling: > 1
 *                  means the tensor outgrew its history; 1 for current scaling; 0 without scales)
 *   down_in_sat    saturated elements at the down projections' input casts (all layers)
 *   sat, clip, nan_out, inf_out, ftz   the same counters summed over every cast site
 * telemetry.jsonl (every k steps), one JSON object per line:
 *   {"step", "loss", "sites": [{"name", "fmt", "n", "amax", "rms", "amax_over_rms", "kurtosis",
 *     "saturated", "clipped", "nan_produced", "inf_produced", "flushed", "scale", "staleness"}],
 *    "ffn": [{"layer", "in_amax", "in_rms", "act_amax", "act_rms", "cos_median", "cos_p99",
 *     "cos_max", "norm_corr"}]}
 *   kurtosis = mean x^4 / (mean x^2)^2 (3 for a Gaussian); non-finite numbers are written null.
 *   Written by jansson (fl_tele_json_num, FL_TELE_JSON_FLAGS): `{"a": 1, "b": [...]}` on one line.
 * sites.csv (every step), one row per cast site with a per-tensor FP8 scale (delayed or current):
 *   step, site, amax (entering the cast), amax_from (the amax its scale came from; 0 when none, as
 *   in a BF16 start), staleness (amax / amax_from; 0 when amax_from is 0), saturated (elements),
 *   clip_mass (recipe.h: sum of |x| beyond the largest finite value / sum |x|), underflow (fraction
 *   of nonzero inputs flushed to zero).
 * Numbers are printed with %.9g: the files are byte-identical for bit-identical runs.  In JSON a
 * number whose %.9g has no '.' and no exponent is an integer (jansson would write a real as "448.0"),
 * and jansson writes an exponent without '+' and leading zeros ("1e-5", not %g's "1e-05").
 */
#ifndef FL_TELEMETRY_H
#define FL_TELEMETRY_H

#include "model.h"

#include <stdio.h>

typedef struct {
    float ffn_in_amax, act_amax, act_rms;
    fl_align_stats align; /* max over layers of each field */
    float down_in_amax, down_in_stale;
    uint64_t down_in_sat, sat, clip, nan_out, inf_out, ftz;
    int unmeasured; /* 1: the down-input and cast columns were not measured (written nan) */
} fl_step_summary;

/* Gather the step's summary from the model and the recipe (after forward and backward). */
void fl_tele_summarize(fl_step_summary *s, const fl_model *m);
/* Mark the columns a --device run does not measure (the down projection input's cast statistics, the
   cast counters): metrics.csv writes them nan; the FFN statistics (the GPU step measures them) and the
   alignment (computed from the weights) stay. */
void fl_tele_unmeasured(fl_step_summary *s);
void fl_tele_metrics_header(FILE *f);
void fl_tele_metrics_row(FILE *f, uint64_t step, float loss, double loss_ema, float lr, float gnorm,
                         const fl_step_summary *s);
/* sites.csv's header: under the per-tensor recipes
     step,site,amax,amax_from,staleness,saturated,clip_mass,underflow
   one row per site with a delayed or current scale; under nvfp4 / mxfp4 (recipe.h, fl_cast_stats)
     step,site,amax,saturated,clip_mass,flush_mass,under_mass,underflow,snr,blk_p01,blk_p50,blk_p99
   one row per FP4 site (the forward cast; underflow: the fraction of all its casts' elements flushed
   to zero; snr: ||x|| / ||Q(x) - x||; blk_*: telemetry steps, else nan), then a row "all.gout": the
   snr of all dY casts together, sqrt(sum ||dY||^2 / sum ||Q(dY) - dY||^2), the other fields empty;
   on telemetry steps also a row "all.wgrad": the weight gradient's, sqrt(sum ||dW||^2 /
   sum ||dW_q - dW||^2) over the Linears whose X and dY are FP4 (recipe.h, wgrad_norm2), and with an
   even batch a row "all.wgrad_mean": the same with ||dW||^2 replaced by the two-half estimate of the
   mean gradient's ||E dW||^2 (recipe.h, wgrad_mean2), signed: negative when that estimate was.
   Other recipes: the header only. */
void fl_tele_sites_header(FILE *f, const fl_recipe *r);
/* The sites.csv rows of a step (after forward and backward). */
void fl_tele_sites_rows(FILE *f, uint64_t step, const fl_recipe *r);
void fl_tele_jsonl(FILE *f, uint64_t step, float loss, const fl_model *m);

/* The JSON number of v as "%.*g" (digits <= 9) writes it: an integer when that text has no '.' and
   no exponent, else a real; null when v is not finite.  Dump with FL_TELE_JSON_FLAGS (or at least
   JSON_REAL_PRECISION(9)) to keep the digits.  Every JSON file of a run writes numbers so. */
struct json_t *fl_tele_json_num(double v, int digits);
#define FL_TELE_JSON_FLAGS JSON_REAL_PRECISION(9) /* (jansson.h) no indent: ", " and ": " between */

#endif /* FL_TELEMETRY_H */
