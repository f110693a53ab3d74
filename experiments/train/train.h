/* train.h — the training run: configuration, the loop (train.c), the summary it leaves behind.
 *
 * A run folder holds
 *   config.json      the configuration, for people: one key per option of the table (train_opts.h),
 *                    written by jansson; a path that is not UTF-8 gets U+FFFD where its bad bytes
 *                    were (fl_json.h), a u64 above 2^63 - 1 (a seed) is a string of its digits
 *   metrics.csv      one row per step (columns: see telemetry.h)
 *   telemetry.jsonl  per-cast-site and per-FFN statistics every --log-every steps
 *   sites.csv        per step, each cast site with a per-tensor FP8 scale: amax, staleness,
 *                    saturation, clip mass, underflow (telemetry.h)
 *   checkpoint.bin   the latest checkpoint (checkpoint.h), every --ckpt-every steps, at the end,
 *                    and on SIGINT / SIGTERM; its configuration is a versioned key=value record
 *                    (train_opts.h), the run state (fl_train_state) and the tensors are raw
 *   summary.json     the outcome (divergence, final loss, alignment, amax, saturation, steps/s)
 *   channels.csv, records.csv   with --chan-every: per-channel telemetry of every FFN's down
 *                    projection input (channels.h)
 *   checkpoint-STEP.bin   with --keep-ckpt: the checkpoint after STEP steps, kept
 *   intervention.csv a fork with --decorrelate: the channels changed (layer, channel, align before
 *                    and after, the norm kept)
 *
 * A fork (--fork FILE) starts from another run's checkpoint FILE at its step k: the parameters, the
 * AdamW moments, the run counters and the record maxima are the parent's; the recipe's amax
 * histories too when the recipe is the parent's, else they start empty.  Its configuration is the
 * parent's with the flags given applied on top (the model's shapes, the seed and the data must stay:
 * the fork reads the batches k, k+1, ... the parent would have read, and --grad-sr's streams are
 * keyed by the same seed and step), and records fork_from, fork_step and the parent's CRC.  Its
 * logs start at step k.
 *
 * Divergence criterion (written once here, used by train and demo):
 *   the run has diverged at step t when
 *     (a) the loss of step t is not finite (NaN or Inf), or
 *     (b) the exponential moving average of the loss (weight div_ema per step, default 0.02 ~ a
 *         50-step window) has stayed above its running minimum by more than div_margin nats
 *         (default 1.0) for div_window consecutive steps (default 100); t is the first of them.
 *   With stop_on_div the run ends at the step the divergence is declared.
 */
#ifndef FL_TRAIN_H
#define FL_TRAIN_H

#include "data.h"
#include "model.h"
#include "recipe.h"

#include <stdint.h>

enum { FL_SCHED_CONSTANT, FL_SCHED_COSINE };
/* --device: the harness (cpu), the GPU step's code on the host with the kernels' twins (twins,
   gstep.h), the GPU step on a CUDA device (cuda: not built into fp8lab yet). */
enum { FL_DEVICE_CPU, FL_DEVICE_TWINS, FL_DEVICE_CUDA };
enum { FL_DATA_SYNTHETIC, FL_DATA_TEXT, FL_DATA_TRIGGERS, FL_DATA_FORTUNES, FL_DATA_SHARDS };
#define FL_KEEP_MAX 16

/* Every field fixed-width, no padding holes (configurations are compared with memcmp).  Each field
   that is part of the configuration has a row in the option table (train_opts.h), which gives its
   flag, key, default and range; checkpoints store it as text, so the layout may change. */
typedef struct {
    fl_model_cfg model;    /* 7 u32 + act (2 u32) + float = 40 bytes */
    fl_recipe_cfg recipe;  /* 12 u32 + the site overrides (256 bytes) */
    uint64_t steps, seed;
    float lr, lr_min_frac, wd, beta1, beta2, adam_eps, clip;
    uint32_t warmup, schedule;
    uint32_t data_kind;
    uint64_t data_len;     /* synthetic corpus length */
    uint64_t data_hash;    /* FNV-1a of the corpus (filled at start) */
    char data_path[512];
    uint32_t log_every, ckpt_every;
    float div_margin, div_ema;
    uint32_t div_window, stop_on_div;
    float trigger_rate;    /* FL_DATA_TRIGGERS: probability of a trigger event per sentence (data.h) */
    uint32_t trigger_len;  /* FL_DATA_TRIGGERS: payload tokens after the trigger token */
    /* the mechanism experiments (channels.h; TRAINING.md, "The mechanism") */
    uint32_t chan_every;   /* channels.csv every K steps, records.csv every record; 0: neither */
    uint32_t bos;          /* 1: token 256 (V = 257) opens every sequence (data.h) */
    uint32_t decor_mode;   /* a fork: FL_DECOR_* applied to the parent's weights before the first step */
    uint32_t decor_k;      /* a fork: channels per layer decorrelated */
    uint32_t keep_n;
    uint32_t vocab_req;    /* --vocab (shards): 0 = the largest token + 1, resolved into model.V at start */
    uint64_t keep[FL_KEEP_MAX]; /* after these steps, checkpoint-STEP.bin is kept beside checkpoint.bin */
    uint64_t fork_step;    /* a fork: the step of the parent's checkpoint it starts from; else 0 */
    uint32_t fork_crc;     /* a fork: CRC-32 of the parent checkpoint's payload (checkpoint.h) */
    uint32_t gemm_kchunk;  /* 0: each GEMM sum is one fma chain over K; k: chains over blocks of k, added in order
                              (a summation-order perturbation: TRAINING.md, "How far a GPU run may differ") */
    uint32_t attn_kchunk;  /* 0: the attention's own loops; k: its products as GEMMs, sums in blocks of k (the
                              same perturbation for the attention: TRAINING.md, the envelope's stage 3) */
    uint32_t device;       /* FL_DEVICE_* */
    uint32_t fp8_gemm;     /* --fp8-gemm: the GPU step's Linears multiply FP8 codes (gstep.h, fl_gstep_set_fp8_gemm) */
    uint32_t accum;        /* micro-batches per step (gradient accumulation): batches step accum + a, a < accum,
                              each's gradient of its mean loss summed, then scaled by 1 / accum in the update */
    char fork_from[512];   /* a fork: the parent checkpoint's path as given; "" otherwise */
} fl_train_cfg;

/* The update's gradient scale after cfg->accum micro-batches whose gradients were summed (norm_sum: the
   sum's 2-norm): returns the mean gradient's norm, norm_sum / accum (in double, rounded once; norm_sum
   itself for one micro-batch), and *gscale = the clip's factor for it (clip / norm above cfg->clip, else
   1) divided by accum, the one multiplication AdamW applies to each gradient.  The harness and the GPU
   step both use it. */
float fl_train_accum_scale(const fl_train_cfg *cfg, float norm_sum, float *gscale);

/* The defaults of the option table (train_opts.h); every byte outside the fields zero. */
void fl_train_cfg_default(fl_train_cfg *c);
/* The demo's model and optimiser (TRAINING.md: why each choice), shared by demo and mechanism: the
   defaults with C 64, L 2, H 4, F 256, T 64, B 16; lr 3e-3 constant after 100 warm-up steps, wd 1
   (tau = 333 steps); seed 1; the recipe bf16. */
void fl_train_demo_preset(fl_train_cfg *c);

/* Options of one invocation (not part of the run's identity). */
typedef struct {
    const char *dir;
    int threads;      /* OpenMP threads (speed only: the bits do not depend on it); 0 = the
                         checkpoint's on resume, else all cores */
    int quiet;        /* no progress bar / summary line */
    int resume;
    int overwrite;    /* a fresh run may replace the run files of the folder (--overwrite) */
} fl_train_opts;

/* The step at which the weight-decay clock t/tau = sum_{s < step} lr_s * wd first reaches x (the
   decay of AdamW multiplies a weight by prod (1 - lr_s wd) ~ exp(-t/tau)); cfg->steps + 1 when it
   does not within the run, 0 for x <= 0. */
uint64_t fl_train_tau_step(const fl_train_cfg *cfg, double x);
/* t/tau after `step` steps. */
double fl_train_tau_at(const fl_train_cfg *cfg, uint64_t step);

/* The persistent counters of a run (checkpointed). */
typedef struct {
    uint64_t step;          /* steps completed */
    double ema, ema_min;
    uint32_t above, diverged;
    uint64_t div_step;      /* first step of the divergence (valid when diverged) */
    uint32_t div_reason;    /* 1 non-finite loss, 2 loss above running minimum */
    uint32_t threads;
    uint64_t sat_total, clip_total, nanout_total, ftz_total, down_sat_total;
    uint64_t first_sat_step, first_down_sat_step; /* UINT64_MAX: none yet */
    uint64_t metrics_off, tele_off;                /* file lengths at this checkpoint */
    float act_amax_max, in_amax_max, align_start, align_end, last_loss, pad_;
    uint64_t adam_sat, adam_ftz;
    uint64_t sites_off;                            /* sites.csv's length at this checkpoint */
    uint64_t chan_off, rec_off;                    /* channels.csv's and records.csv's lengths */
    float rec_max[64];                             /* per layer, the running max of the down
                                                      projection input's amax (records.csv) */
} fl_train_state;

/* Read the configuration and run state stored in a checkpoint file (for --fork): 0, or -1 with a
   message naming the file. */
int fl_train_read_ckpt_cfg(fl_train_cfg *cfg, fl_train_state *st, uint32_t *crc, const char *path, char *err, size_t errlen);

/* The configuration of a fork from the checkpoint file path, before any flag is applied: the
   parent's (also in *parent when not NULL) without its kept steps or intervention, recording
   fork_from = path, fork_step and fork_crc.  0, or -1 with a message naming the file. */
int fl_train_fork_cfg(fl_train_cfg *fork, fl_train_cfg *parent, const char *path, char *err, size_t errlen);

/* Whether a and b train on the same data (kind, path, length, trigger events, hash). */
int fl_train_same_data(const fl_train_cfg *a, const fl_train_cfg *b);

/* What a fork (configuration c) may not change from its parent p: the model's shapes (an activation
   with the same weight shapes may replace the parent's), the seed, the data.  NULL, or what differs. */
const char *fl_train_fork_mismatch(const fl_train_cfg *p, const fl_train_cfg *c);

/* The run's corpus, as the run reads it (generated, the text file, or fortunes): 0, or -1 with a
   message naming the file. */
int fl_train_open_data(fl_data *d, const fl_train_cfg *cfg, char *err, size_t errlen);
/* The batch of step `step` (B, T+1 tokens), as the run reads it (with --bos or not). */
/* --data shards: the vocabulary of cfg from the shards d when --vocab left it 0 (their largest token
   + 1), and every token below it.  NULL, or why not (naming the pattern).  Other data: NULL. */
const char *fl_train_resolve_vocab(fl_train_cfg *cfg, const fl_data *d);
void fl_train_batch(uint16_t *out, const fl_data *d, const fl_train_cfg *cfg, uint64_t step);

/* Run (or resume) a training run in opts->dir.  Returns a CLI exit status (cli.h). */
int fl_train_run(const fl_train_cfg *cfg, const fl_train_opts *opts);

/* Read a run folder's checkpoint config (for `train --resume`): 0, or -1 with message. */
int fl_train_read_cfg(fl_train_cfg *cfg, fl_train_state *st, const char *dir, char *err, size_t errlen);

/* Check a configuration: every field's value one its flag can give (train_opts.h), and the
   conditions between fields.  NULL if fine, else what is wrong (for exit 2). */
const char *fl_train_cfg_check(const fl_train_cfg *c);

/* Write config.json's JSON of cfg to f (indented, one trailing newline): 0, or -1 when it could not
   be written. */
int fl_train_cfg_json(FILE *f, const fl_train_cfg *c);

/* Apply one CLI flag to c, as the option table says (train_opts.h; train, demo and mechanism): 0
   done (*used = 1 when val was consumed), 1 not a flag of the configuration, 2 bad value (message
   printed, "fp8lab CMD: ..."). */
int fl_train_parse_flag(fl_train_cfg *c, const char *cmd, const char *flag, const char *val, int *used);

/* The `fp8lab train` flags that give configuration c (--out, --threads and --quiet not included),
   in table order (train_opts.h): every option with a value, except those marked FL_OPT_ECHO_SET
   at their default, and each bool flag that changes its default; space-separated, a value quoted
   for a POSIX shell where it has a byte that needs it (fl_cli_sh_quote), into buf (size n).  0, or
   -1 when it did not fit (buf truncated). */
int fl_train_cfg_args(char *buf, size_t n, const fl_train_cfg *c);

/* Set up OpenBLAS's environment and re-execute this program when something had to change (argv:
   main's full argv, NULL-terminated); returns when nothing was done (or exec failed).
   - OpenBLAS picks its kernels from the CPU model at load time; on virtual CPUs that report no
     model (as here) it falls back to the "Prescott" SSE3 kernels, 5-7x slower than the AVX-512
     ones.  When OPENBLAS_CORETYPE is unset and the fallback was taken, set it from the CPU's
     features (avx512f: SkylakeX, avx2: Haswell).
   - The build links the OpenMP OpenBLAS where it is installed (Makefile).  When the pthreads one
     was loaded instead and OMP_WAIT_POLICY is unset, set it to passive: OpenMP threads spinning
     between the harness's parallel loops otherwise take the cores from OpenBLAS's own threads
     (2 threads ran at half the speed of one). */
void fl_blas_setup(char **argv);

/* Set by SIGINT/SIGTERM handlers installed by fl_train_run. */
extern volatile int fl_train_stop_flag;

#endif /* FL_TRAIN_H */
