/* train.c — the training loop of `fp8lab train`, top to bottom.
 *
 *   setup:   data (generated or a text file), recipe (cast sites), model (params in one
 *            allocation, model.h), AdamW state; or all of it from the run folder's checkpoint
 *   loop:    batch(seed, step) -> zero grads -> forward -> backward (grads ACCUMULATE into
 *            m->grads, model.h) -> global grad-norm clip -> lr schedule -> AdamW -> telemetry
 *            -> divergence check -> checkpoint every K steps / on SIGINT, SIGTERM
 *   end:     final checkpoint, summary.json
 *
 * Optimizer (AdamW), schedule and gradient clipping: optim.h.
 *
 * Determinism: the batch of step t is a function of (seed, t); every reduction has a fixed order
 * that does not depend on the thread count (model.h; the GEMMs run on a fixed tile grid, model.c).
 * A resumed run therefore repeats the uninterrupted run bit for bit, on any --threads:
 * metrics.csv and telemetry.jsonl are truncated to their length at the checkpoint and continue
 * from there.
 *
 * The run folder (rundir.h) is locked while the run writes it.  Everything that can refuse a run
 * (flags, data, a fork's parent) is checked before the folder is made or touched; a fresh run into
 * a folder that holds another run is refused unless --overwrite says to replace it.
 */
#include "train.h"

#include "channels.h"
#include "checkpoint.h"
#include "common/cli.h"
#include "data.h"
#include "fl_io.h"
#include "gstep.h"
/* The CUDA table exists in build/fp8lab-cuda only (gstep_cuda.c); here a weak reference, NULL elsewhere. */
#pragma weak fl_gstep_cuda_open
#pragma weak fl_gstep_cuda_close
#include "optim.h"
#include "rundir.h"
#include "telemetry.h"
#include "train_opts.h"

#include <cblas.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

_Static_assert(sizeof(fl_train_state) == 440, "fl_train_state layout (stored in checkpoints)");

volatile int fl_train_stop_flag;

enum { CK_CFG = 1, CK_STATE, CK_PARAMS, CK_ADAM_M, CK_ADAM_V, CK_RECIPE };

void fl_train_demo_preset(fl_train_cfg *c)
{
    fl_train_cfg_default(c);
    c->model.C = 64;
    c->model.L = 2;
    c->model.H = 4;
    c->model.F = 256;
    c->model.T = 64;
    c->model.B = 16;
    c->lr = 3e-3f;
    c->wd = 1.0f;
    c->schedule = FL_SCHED_CONSTANT;
    c->warmup = 100;
    c->seed = 1;
}

/* The per-field checks come from the option table (train_opts.h); these are the ones between fields. */
const char *fl_train_cfg_check(const fl_train_cfg *c)
{
    static _Thread_local char err[FL_SITE_SPEC_MAX + 1200];
    const char *why = fl_train_cfg_check_fields(c, err, sizeof err);
    const int shards = c->data_kind == FL_DATA_SHARDS;
    fl_model_cfg mc = c->model;
    if (shards && !mc.V)
        mc.V = 2; /* the shards' vocabulary is read with them (fl_train_resolve_vocab); the other shapes here */
    if (!why)
        why = fl_model_cfg_check(&mc);
    if (why)
        return why;
    if (!shards && c->vocab_req)
        return "--vocab applies to --data shards:GLOB (the byte corpora have 256 tokens, 257 with --bos)";
    if (!shards && c->model.V != 256 + c->bos)
        return "the vocabulary is byte-level: 256 tokens, 257 with --bos";
    if (shards && c->bos)
        return "--bos applies to the byte corpora (the shards' documents begin with their own end-of-text token)";
    if (shards && c->vocab_req && c->model.V != c->vocab_req)
        return "the vocabulary differs from --vocab";
    if (c->recipe.fast_accum && c->recipe.kind != FL_RECIPE_FP8_DELAYED && c->recipe.kind != FL_RECIPE_FP8_CURRENT)
        return "--fast-accum applies to the per-tensor FP8 recipes (fp8-delayed, fp8-current)";
    if (c->recipe.fp8_start && !fl_recipe_is_fp8((fl_recipe_kind)c->recipe.kind))
        return "--fp8-start applies to the FP8 recipes";
    if (c->recipe.grad_current && c->recipe.kind != FL_RECIPE_FP8_DELAYED)
        return "--grad-scaling current applies to fp8-delayed (the other recipes scale dY as they scale X)";
    if (c->recipe.kind == FL_RECIPE_PAPER_GAUDI2 && (why = fl_recipe_paper_gaudi2_check(&c->recipe)))
        return why;
    const int fp4 = fl_recipe_is_fp4((fl_recipe_kind)c->recipe.kind);
    if ((c->recipe.update_sr || c->recipe.rht) && !fp4)
        return "--update-sr and --rht apply to the FP4 recipes (nvfp4, mxfp4)";
    if ((c->recipe.four_over_six || c->recipe.fp4_w1d) && c->recipe.kind != FL_RECIPE_NVFP4)
        return "--four-over-six and --fp4-w1d apply to nvfp4";
    if (c->recipe.grad_sr && !fp4 && !fl_recipe_per_tensor((fl_recipe_kind)c->recipe.kind))
        return "--grad-sr needs fp8-delayed, fp8-current, paper-gaudi2, nvfp4 or mxfp4";
    if (c->recipe.rht && ((uint64_t)c->model.B * c->model.T) % FL_RHT_SIZE)
        return "--rht transforms groups of 16 tokens: batch x seq must be a multiple of 16";
    if (c->recipe.rht && fl_act_smooth_axis(c->model.act) == 1)
        return "--rht mixes 16 tokens, and a per-token smoothing scale (smooth_swiglu_token) cannot be undone after it: "
               "use smooth_swiglu (per channel) or no --rht";
    if (c->fp8_gemm && c->device == FL_DEVICE_CPU)
        return "--fp8-gemm is the GPU step's (--device twins / cuda; the harness's FP8 GEMM emulation is --fast-accum)";
    if (c->device != FL_DEVICE_CPU) {
        const int fp8 = fl_recipe_dev_fp8((fl_recipe_kind)c->recipe.kind);
        if (c->recipe.kind != FL_RECIPE_FP32 && c->recipe.kind != FL_RECIPE_BF16 && !fp8)
            return "--device twins / cuda: the GPU step runs the fp32, bf16, fp8-delayed, fp8-current and paper-gaudi2 "
                   "recipes (block, MX and FP4 casts on the device are not built yet)";
        if (fp8 && c->recipe.fast_accum)
            return "--device twins / cuda: no --fast-accum (the GPU step has no FP8 GEMM emulation)";
        if (c->fp8_gemm && c->recipe.kind != FL_RECIPE_FP8_DELAYED && c->recipe.kind != FL_RECIPE_FP8_CURRENT)
            return "--fp8-gemm applies to fp8-delayed and fp8-current (paper-gaudi2's backward multiplies e5m2 by e5m2, "
                   "which cuBLASLt's FP8 GEMM does not)";
        if (c->gemm_kchunk || c->attn_kchunk)
            return "--device twins / cuda: no --gemm-kchunk or --attn-kchunk (the harness's perturbations of its own "
                   "summation orders)";
    }
    if (c->accum > 1 && (c->chan_every || fl_recipe_is_fp4((fl_recipe_kind)c->recipe.kind)))
        return "--accum above 1 takes no --chan-every and no FP4 recipe (their per-step records are of one batch)";
    if (c->data_kind == FL_DATA_TRIGGERS && !(c->trigger_rate > 0))
        return "--data triggers needs a --trigger-rate in (0, 1]";
    if (c->data_kind != FL_DATA_TEXT && c->data_len < (uint64_t)c->model.T + 2)
        return "--data-len must be between seq + 2 and 2^30";
    for (uint32_t k = 0; k < c->keep_n; k++)
        if (c->keep[k] > c->steps)
            return "--keep-ckpt steps must be in 1..--steps";
    if (c->fork_from[0] && c->fork_step >= c->steps)
        return "a fork must run past its parent's step: --steps must exceed the checkpoint's step";
    if (c->decor_k && !c->fork_from[0])
        return "--decorrelate is an intervention at a fork: it needs --fork";
    if (c->decor_k && !fl_act_gated(c->model.act))
        return "--decorrelate changes w_up: it needs a gated activation (swiglu family)";
    if (c->decor_k > c->model.F)
        return "--decorrelate K must not exceed --ffn";
    /* the overrides against this model's site names */
    const int ns = fl_model_nsites(&c->model);
    char *store = calloc((size_t)ns, 40);
    const char **names = calloc((size_t)ns, sizeof *names);
    uint32_t *roles = calloc((size_t)ns, sizeof *roles);
    uint8_t *hp = calloc((size_t)ns, 1);
    const char *why_sites = "out of memory";
    if (store && names && roles && hp) {
        fl_model_site_names(&c->model, store, names, roles, hp);
        why_sites = fl_recipe_sites_check(&c->recipe, ns, names, hp, err, sizeof err);
    }
    free(store);
    free(names);
    free(roles);
    free(hp);
    return why_sites;
}

double fl_train_tau_at(const fl_train_cfg *cfg, uint64_t step)
{
    double t = 0.0;
    for (uint64_t s = 0; s < step; s++)
        t += (double)fl_lr_at(cfg, s) * (double)cfg->wd;
    return t;
}

uint64_t fl_train_tau_step(const fl_train_cfg *cfg, double x)
{
    double t = 0.0;
    for (uint64_t s = 0; s <= cfg->steps; s++) {
        if (t >= x)
            return s;
        if (s < cfg->steps)
            t += (double)fl_lr_at(cfg, s) * (double)cfg->wd;
    }
    return cfg->steps + 1;
}

void fl_blas_setup(char **argv)
{
    int changed = 0;
    if (!getenv("OPENBLAS_CORETYPE") && !strcmp(openblas_get_corename(), "Prescott")) {
        __builtin_cpu_init();
        const char *core = __builtin_cpu_supports("avx512f") ? "SkylakeX"
                         : __builtin_cpu_supports("avx2")    ? "Haswell"
                                                             : NULL;
        if (core) {
            setenv("OPENBLAS_CORETYPE", core, 1);
            changed = 1;
        }
    }
    if (openblas_get_parallel() == 1 && !getenv("OMP_WAIT_POLICY")) {
        setenv("OMP_WAIT_POLICY", "passive", 1);
        changed = 1;
    }
    if (!changed)
        return;
    fflush(NULL);
    execv("/proc/self/exe", argv);
}

/* ---- small helpers ------------------------------------------------------------------------------ */

static double monotonic_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

float fl_train_accum_scale(const fl_train_cfg *cfg, float norm_sum, float *gscale)
{
    const float gn = cfg->accum > 1 ? (float)((double)norm_sum / cfg->accum) : norm_sum;
    const float clip = (cfg->clip > 0 && gn > cfg->clip) ? cfg->clip / gn : 1.0f;
    *gscale = cfg->accum > 1 ? clip / (float)cfg->accum : clip;
    return gn;
}

static void path_join(char *out, size_t n, const char *dir, const char *name)
{
    snprintf(out, n, "%s/%s", dir, name);
}

static void on_signal(int sig)
{
    (void)sig;
    fl_train_stop_flag = 1;
}

static int cfg_json_fill(FILE *f, void *cfg) { return fl_train_cfg_json(f, cfg); }

typedef struct {
    const fl_train_cfg *cfg;
    const fl_train_state *st;
    double steps_per_s;
    double first_step_s, after_first; /* the first step's seconds; steps/s of the later ones (NAN: none) */
    uint64_t steps_run;
    uint64_t device_bytes; /* --device: the GPU step's tensors (gstep.h) */
} summary_arg;

static json_t *step_or_null(uint64_t step) { return step != UINT64_MAX ? json_integer((json_int_t)step) : json_null(); }

/* summary.json: one line, the numbers as telemetry.h writes them. */
static int summary_fill(FILE *f, void *a_)
{
    const summary_arg *a = a_;
    const fl_train_state *s = a->st;
    json_t *o = json_object();
    json_object_set_new(o, "act", json_string(fl_act_name(a->cfg->model.act)));
    json_object_set_new(o, "recipe", json_string(fl_recipe_name((fl_recipe_kind)a->cfg->recipe.kind)));
    json_object_set_new(o, "steps", json_integer((json_int_t)a->cfg->steps));
    json_object_set_new(o, "steps_done", json_integer((json_int_t)s->step));
    json_object_set_new(o, "diverged", json_boolean(s->diverged));
    json_object_set_new(o, "diverged_step", step_or_null(s->diverged ? s->div_step : UINT64_MAX));
    if (s->diverged)
        json_object_set_new(o, "divergence", json_string(s->div_reason == 1 ? "non-finite loss" : "loss above running minimum"));
    json_object_set_new(o, "final_loss", fl_tele_json_num(s->last_loss, 9));
    json_object_set_new(o, "final_loss_ema", fl_tele_json_num(isfinite(s->ema) ? s->ema : -1.0, 9));
    json_object_set_new(o, "alignment_start", fl_tele_json_num(s->align_start, 9));
    json_object_set_new(o, "alignment_end", fl_tele_json_num(s->align_end, 9));
    json_object_set_new(o, "amax_max", fl_tele_json_num(s->act_amax_max, 9));
    json_object_set_new(o, "ffn_in_amax_max", fl_tele_json_num(s->in_amax_max, 9));
    json_object_set_new(o, "saturated_total", json_integer((json_int_t)s->sat_total));
    json_object_set_new(o, "clipped_total", json_integer((json_int_t)s->clip_total));
    json_object_set_new(o, "nan_produced_total", json_integer((json_int_t)s->nanout_total));
    json_object_set_new(o, "flushed_total", json_integer((json_int_t)s->ftz_total));
    json_object_set_new(o, "down_in_saturated_total", json_integer((json_int_t)s->down_sat_total));
    json_object_set_new(o, "first_saturation_step", step_or_null(s->first_sat_step));
    json_object_set_new(o, "first_down_in_saturation_step", step_or_null(s->first_down_sat_step));
    json_object_set_new(o, "steps_per_s", fl_tele_json_num(a->steps_per_s, 4));
    json_object_set_new(o, "first_step_s", a->steps_run ? fl_tele_json_num(a->first_step_s, 4) : json_null());
    json_object_set_new(o, "steps_per_s_after_first", isfinite(a->after_first) ? fl_tele_json_num(a->after_first, 4) : json_null());
    json_object_set_new(o, "steps_this_invocation", json_integer((json_int_t)a->steps_run));
    json_object_set_new(o, "threads", json_integer(s->threads));
    if (a->cfg->device != FL_DEVICE_CPU) {
        static const char *const unmeasured[] = { "saturated_total", "clipped_total",
                                                  "nan_produced_total", "flushed_total", "down_in_saturated_total",
                                                  "first_saturation_step", "first_down_in_saturation_step" };
        /* the GPU step counts casts under the FP8 recipes only (metrics.csv: nan) */
        const int counted = fl_recipe_dev_fp8((fl_recipe_kind)a->cfg->recipe.kind);
        for (size_t i = 0; !counted && i < FL_ARRAY_LEN(unmeasured); i++)
            json_object_set_new(o, unmeasured[i], json_null());
        json_object_set_new(o, "device", json_string(a->cfg->device == FL_DEVICE_TWINS ? "twins" : "cuda"));
        json_object_set_new(o, "device_tensor_bytes", json_integer((json_int_t)a->device_bytes));
    }
    const int rc = json_dumpf(o, f, FL_TELE_JSON_FLAGS) || fputc('\n', f) == EOF ? -1 : 0;
    json_decref(o);
    return rc;
}

/* ---- checkpoint ---------------------------------------------------------------------------------- */

static int save_checkpoint(const char *dir, const char *name, const fl_train_cfg *cfg, const fl_train_state *st,
                           const fl_model *m, const float *am, const float *av, const fl_recipe *rec)
{
    char path[4096], err[4400];
    path_join(path, sizeof path, dir, name);
    const size_t rs = fl_recipe_state_size(rec);
    size_t cs = 0;
    unsigned char *rb = malloc(rs ? rs : 1);
    char *cb = fl_train_cfg_store(cfg, &cs);
    if (!rb || !cb) {
        free(rb);
        free(cb);
        fprintf(stderr, "fp8lab train: out of memory writing %s\n", path);
        return -1;
    }
    fl_recipe_state_save(rec, rb);
    const fl_ckpt_section secs[] = {
        { CK_CFG, cb, cs },
        { CK_STATE, st, sizeof *st },
        { CK_PARAMS, m->params, m->nparams * sizeof(float) },
        { CK_ADAM_M, am, m->nparams * sizeof(float) },
        { CK_ADAM_V, av, m->nparams * sizeof(float) },
        { CK_RECIPE, rb, rs },
    };
    const int rc = fl_ckpt_write(path, secs, (int)FL_ARRAY_LEN(secs), err, sizeof err);
    free(rb);
    free(cb);
    if (rc)
        fprintf(stderr, "fp8lab train: %s\n", err);
    return rc;
}

int fl_train_read_cfg(fl_train_cfg *cfg, fl_train_state *st, const char *dir, char *err, size_t errlen)
{
    char path[4096];
    path_join(path, sizeof path, dir, "checkpoint.bin");
    uint32_t crc;
    return fl_train_read_ckpt_cfg(cfg, st, &crc, path, err, errlen);
}

/* The configuration record of a read checkpoint (train_opts.h) into cfg: 0, or -1 with a message
   naming the file. */
static int ckpt_cfg(fl_train_cfg *cfg, const fl_ckpt *ck, const char *path, char *err, size_t errlen)
{
    const fl_ckpt_section *c = fl_ckpt_find(ck, CK_CFG);
    char why[600];
    if (!c) {
        snprintf(err, errlen, "%s: checkpoint refused: it has no configuration section", path);
        return -1;
    }
    const int v5 = ck->version == FL_CKPT_VERSION_V5;
    if ((v5 ? fl_train_cfg_load_v5 : fl_train_cfg_load)(cfg, c->data, (size_t)c->size, why, sizeof why)) {
        snprintf(err, errlen, "%s: checkpoint refused: its configuration: %s", path, why);
        return -1;
    }
    return 0;
}

int fl_train_read_ckpt_cfg(fl_train_cfg *cfg, fl_train_state *st, uint32_t *crc, const char *path, char *err, size_t errlen)
{
    fl_ckpt ck;
    if (fl_ckpt_read(&ck, path, err, errlen))
        return -1;
    const fl_ckpt_section *s = fl_ckpt_find(&ck, CK_STATE);
    if (ckpt_cfg(cfg, &ck, path, err, errlen) || !s || s->size != sizeof *st) {
        if (s && s->size != sizeof *st)
            snprintf(err, errlen, "%s: checkpoint refused: its run state has %llu bytes, not %zu", path,
                     (unsigned long long)s->size, sizeof *st);
        else if (!s)
            snprintf(err, errlen, "%s: checkpoint refused: it has no run state section", path);
        fl_ckpt_free(&ck);
        return -1;
    }
    memcpy(st, s->data, sizeof *st);
    *crc = ck.crc;
    fl_ckpt_free(&ck);
    return 0;
}

const char *fl_train_fork_mismatch(const fl_train_cfg *p, const fl_train_cfg *c)
{
    static _Thread_local char why[200];
    if (fl_act_gated(p->model.act) != fl_act_gated(c->model.act))
        return "--act (the fork's activation must have the parent's weight shapes: gated for gated)";
    const fl_train_opt *o = fl_train_cfg_diff(p, c, FL_OPT_FIXED);
    if (!o)
        return NULL;
    snprintf(why, sizeof why, "%s (a fork keeps its parent's model shapes, seed and data: it continues the parent's "
                              "batches and streams)", fl_train_opt_name(o));
    return why;
}

int fl_train_same_data(const fl_train_cfg *a, const fl_train_cfg *b)
{
    return a->data_kind == b->data_kind && !memcmp(a->data_path, b->data_path, sizeof a->data_path) &&
           a->data_len == b->data_len && a->data_hash == b->data_hash && a->trigger_rate == b->trigger_rate &&
           a->trigger_len == b->trigger_len;
}

int fl_train_fork_cfg(fl_train_cfg *fork, fl_train_cfg *parent, const char *path, char *err, size_t errlen)
{
    fl_train_state st;
    uint32_t crc;
    if (strlen(path) >= sizeof fork->fork_from) {
        snprintf(err, errlen, "%s: path too long for a fork's record (at most %zu bytes)", path, sizeof fork->fork_from - 1);
        return -1;
    }
    if (fl_train_read_ckpt_cfg(fork, &st, &crc, path, err, errlen))
        return -1;
    if (parent)
        *parent = *fork;
    fork->keep_n = 0;
    memset(fork->keep, 0, sizeof fork->keep);
    fork->decor_mode = fork->decor_k = 0;
    memset(fork->fork_from, 0, sizeof fork->fork_from);
    memcpy(fork->fork_from, path, strlen(path));
    fork->fork_step = st.step;
    fork->fork_crc = crc;
    return 0;
}

/* Restore everything from the checkpoint at path into the already-built model / recipe / optimizer:
   a resume (fork == 0: the configuration must be the run's) or a fork (fork_mismatch; the recipe's
   state only when the recipe is the parent's). */
static int load_checkpoint(const char *path, int fork, const fl_train_cfg *cfg, fl_train_state *st, fl_model *m,
                           float *am, float *av, fl_recipe *rec)
{
    char err[4400];
    fl_ckpt ck;
    if (fl_ckpt_read(&ck, path, err, sizeof err)) {
        fprintf(stderr, "fp8lab train: %s\n", err);
        return -1;
    }
    fl_train_cfg pc; /* the checkpoint's configuration */
    if (ckpt_cfg(&pc, &ck, path, err, sizeof err)) {
        fprintf(stderr, "fp8lab train: %s\n", err);
        fl_ckpt_free(&ck);
        return -1;
    }
    const fl_ckpt_section *ss = fl_ckpt_find(&ck, CK_STATE), *sp = fl_ckpt_find(&ck, CK_PARAMS),
                          *sm = fl_ckpt_find(&ck, CK_ADAM_M), *sv = fl_ckpt_find(&ck, CK_ADAM_V),
                          *sr = fl_ckpt_find(&ck, CK_RECIPE);
    const size_t pb = m->nparams * sizeof(float);
    const char *why = NULL;
    char diff[160];
    if (!ss || !sp || !sm || !sv || !sr)
        why = "a section is missing";
    else if (!fork && memcmp(&pc, cfg, sizeof *cfg)) {
        const fl_train_opt *o = fl_train_cfg_diff(cfg, &pc, 0);
        snprintf(diff, sizeof diff, "its configuration does not match this run's (%s differs)",
                 o ? fl_train_opt_name(o) : "an option");
        why = diff;
    }
    else if (ss->size != sizeof *st || sp->size != pb || sm->size != pb || sv->size != pb)
        why = "its tensors have the wrong sizes for this model";
    else if (fork && (why = fl_train_fork_mismatch(&pc, cfg)) != NULL)
        ;
    else if (fork && ck.crc != cfg->fork_crc)
        why = "it changed since the fork's configuration was made (CRC)";
    else if (!fork || !memcmp(&pc.recipe, &cfg->recipe, sizeof cfg->recipe))
        why = fl_recipe_state_load(rec, sr->data, sr->size);
    if (why) {
        fprintf(stderr, "fp8lab train: %s: checkpoint refused: %s\n", path, why);
        fl_ckpt_free(&ck);
        return -1;
    }
    memcpy(st, ss->data, sizeof *st);
    if (fork && st->step != cfg->fork_step)
        why = "its step is not the fork's step";
    if (why) {
        fprintf(stderr, "fp8lab train: %s: checkpoint refused: %s\n", path, why);
        fl_ckpt_free(&ck);
        return -1;
    }
    memcpy(m->params, sp->data, pb);
    memcpy(am, sm->data, pb);
    memcpy(av, sv->data, pb);
    fl_ckpt_free(&ck);
    return 0;
}

/* ---- progress ------------------------------------------------------------------------------------ */

static void progress(uint64_t step, uint64_t total, float loss, double rate, int final)
{
    char bar[31];
    const int w = (int)(30.0 * (double)step / (double)(total ? total : 1));
    for (int i = 0; i < 30; i++)
        bar[i] = i < w ? '#' : '.';
    bar[30] = 0;
    const double eta = rate > 0 ? (double)(total - step) / rate : 0;
    fprintf(stderr, "\r[%s] %llu/%llu loss %.4f  %.1f steps/s  ETA %dm%02ds ", bar, (unsigned long long)step,
            (unsigned long long)total, loss, rate, (int)eta / 60, (int)eta % 60);
    if (final)
        fputc('\n', stderr);
}

/* ---- the run ------------------------------------------------------------------------------------- */

/* Everything one invocation holds: set up by run_setup, stepped by run_loop, released by run_free. */
typedef struct {
    fl_train_cfg cfg;
    const fl_train_opts *opts;
    fl_data data;
    char *namestore;       /* cast-site names (fl_model_site_names) */
    const char **names;
    uint32_t *roles;
    uint8_t *hp;
    fl_recipe rec;
    int rec_ready;         /* rec initialised: rec and m are freed */
    fl_model m;
    float *am, *av;        /* AdamW moments, laid out as m.params */
    uint16_t *batch;
    FILE *fm, *ft, *fs;    /* metrics.csv, telemetry.jsonl, sites.csv */
    FILE *fc, *fr;         /* channels.csv, records.csv (with --chan-every) */
    fl_train_state st;
    fl_rundir folder;      /* the locked run folder */
    double t0, tlast;      /* progress: start of this invocation, last progress line */
    double first_s, rest_s; /* this invocation's first step, and its later steps, in seconds (no checkpoints) */
    uint64_t rest_n;
    fl_gstep_prof prof;    /* FP8LAB_GSTEP_PROFILE=1 with --device: where the step's time goes (gstep.h) */
    uint64_t step0;        /* st.step at the start of this invocation */
    fl_gstep gs;           /* --device twins / cuda: the GPU step (gstep.h); m, am, av mirror its tensors */
    int gs_ready;
    const fl_gstep_ops *gs_ops; /* the device's table, and its context (cuda) */
    void *gs_ctx;
} train_run;

int fl_train_open_data(fl_data *d, const fl_train_cfg *cfg, char *err, size_t errlen)
{
    if (cfg->data_kind == FL_DATA_TEXT)
        return fl_data_load_text(d, cfg->data_path, (size_t)cfg->model.T + 2, err, errlen);
    if (cfg->data_kind == FL_DATA_FORTUNES)
        return fl_data_fortunes(d, err, errlen);
    if (cfg->data_kind == FL_DATA_SHARDS)
        return fl_data_load_shards(d, cfg->data_path, (size_t)cfg->model.T + 2, err, errlen);
    if (fl_data_synthetic_ex(d, cfg->seed, (size_t)cfg->data_len, cfg->data_kind == FL_DATA_TRIGGERS ? cfg->trigger_rate : 0.0f,
                             cfg->trigger_len)) {
        snprintf(err, errlen, "out of memory generating the corpus");
        return -1;
    }
    return 0;
}

void fl_train_batch(uint16_t *out, const fl_data *d, const fl_train_cfg *cfg, uint64_t step)
{
    if (cfg->bos)
        fl_data_batch_bos(out, d, cfg->seed, step, cfg->model.B, cfg->model.T, 256);
    else
        fl_data_batch(out, d, cfg->seed, step, cfg->model.B, cfg->model.T);
}

const char *fl_train_resolve_vocab(fl_train_cfg *cfg, const fl_data *d)
{
    static _Thread_local char err[700];
    if (cfg->data_kind != FL_DATA_SHARDS)
        return NULL;
    if (!cfg->model.V)
        cfg->model.V = d->V < 2 ? 2 : d->V;
    if (d->V > cfg->model.V) {
        snprintf(err, sizeof err, "shards:%s: token %u is not below the vocabulary %u (%s); give --vocab %u or more",
                 cfg->data_path, d->V - 1, cfg->model.V, cfg->vocab_req ? "--vocab" : "the checkpoint's", d->V);
        return err;
    }
    return NULL;
}

/* The corpus (generated, the text file or the shards), checked against the checkpoint's on resume;
   the shards' vocabulary resolved. */
static int run_open_data(train_run *r)
{
    fl_train_cfg *cfg = &r->cfg;
    char err[4400];
    const int shards = cfg->data_kind == FL_DATA_SHARDS;
    if (fl_train_open_data(&r->data, cfg, err, sizeof err)) {
        fprintf(stderr, "fp8lab train: %s\n", err);
        return shards ? FL_EXIT_USAGE : FL_EXIT_FAIL;
    }
    const char *why = fl_train_resolve_vocab(cfg, &r->data);
    if (why) {
        fprintf(stderr, "fp8lab train: %s\n", why);
        return FL_EXIT_USAGE;
    }
    if ((r->opts->resume || cfg->fork_from[0]) && cfg->data_hash != r->data.hash) {
        fprintf(stderr, "fp8lab train: %s: the data differs from the data this run was trained on (hash %016llx, now %016llx)\n",
                cfg->data_kind == FL_DATA_TEXT || shards ? cfg->data_path : "synthetic corpus",
                (unsigned long long)cfg->data_hash, (unsigned long long)r->data.hash);
        return FL_EXIT_FAIL;
    }
    cfg->data_hash = r->data.hash;
    return FL_EXIT_OK;
}

/* The recipe (one cast site per model site), the model, the optimizer state and the batch buffer. */
static int run_build(train_run *r)
{
    const fl_train_cfg *cfg = &r->cfg;
    const int nsites = fl_model_nsites(&cfg->model);
    r->namestore = calloc((size_t)nsites, 40);
    r->names = calloc((size_t)nsites, sizeof *r->names);
    r->roles = calloc((size_t)nsites, sizeof *r->roles);
    r->hp = calloc((size_t)nsites, 1);
    fl_model_site_names(&cfg->model, r->namestore, r->names, r->roles, r->hp);
    if (fl_recipe_init(&r->rec, &cfg->recipe, nsites, r->names, r->roles, r->hp))
        return FL_EXIT_USAGE;
    r->rec_ready = 1;
    r->rec.sr_seed = cfg->seed;
    r->rec.defer = cfg->accum > 1; /* one amax per step into the delayed histories: the micro-batches' largest */
    if (fl_model_init(&r->m, &cfg->model, &r->rec, cfg->seed)) {
        fprintf(stderr, "fp8lab train: out of memory for the model\n");
        return FL_EXIT_FAIL;
    }
    r->m.gemm_kchunk = cfg->gemm_kchunk;
    r->m.attn_kchunk = cfg->attn_kchunk;
    r->am = calloc(r->m.nparams, sizeof *r->am);
    r->av = calloc(r->m.nparams, sizeof *r->av);
    r->batch = malloc((size_t)cfg->accum * cfg->model.B * (cfg->model.T + 1) * sizeof *r->batch);
    return r->am && r->av && r->batch ? FL_EXIT_OK : FL_EXIT_FAIL;
}

/* The fork's intervention: decorrelate decor_k channels of every layer (channels.h), written to
   intervention.csv. */
static int run_decorrelate(train_run *r)
{
    const fl_train_cfg *cfg = &r->cfg;
    const uint32_t F = cfg->model.F, k = cfg->decor_k;
    const uint64_t seed = cfg->seed ^ 0xDEC0DE11ull ^ cfg->fork_step;
    char path[4096];
    path_join(path, sizeof path, r->opts->dir, "intervention.csv");
    FILE *f = fopen(path, "w");
    uint32_t *idx = malloc(k * sizeof *idx);
    float *align = malloc(F * sizeof *align), *wnorm = malloc(F * sizeof *wnorm);
    int rc = f && idx && align && wnorm ? 0 : -1;
    if (!rc)
        fprintf(f, "layer,channel,mode,align_before,align_after,wnorm_before,wnorm_after\n");
    float *a0 = malloc(k * sizeof *a0), *n0 = malloc(k * sizeof *n0);
    if (!a0 || !n0)
        rc = -1;
    for (uint32_t l = 0; !rc && l < cfg->model.L; l++) {
        fl_chan_weights(align, wnorm, &r->m, l);
        fl_chan_pick(idx, &r->m, l, k, (int)cfg->decor_mode, seed);
        for (uint32_t j = 0; j < k; j++) {
            a0[j] = align[idx[j]];
            n0[j] = wnorm[idx[j]];
            fl_chan_decorrelate(&r->m, r->am, r->av, l, idx[j], seed);
        }
        fl_chan_weights(align, wnorm, &r->m, l);
        for (uint32_t j = 0; j < k; j++)
            fprintf(f, "%u,%u,%s,%.9g,%.9g,%.9g,%.9g\n", l, idx[j], fl_decor_name((int)cfg->decor_mode), a0[j],
                    align[idx[j]], n0[j], wnorm[idx[j]]);
    }
    free(a0), free(n0);
    free(idx), free(align), free(wnorm);
    if (f && fclose(f))
        rc = -1;
    if (rc)
        fprintf(stderr, "fp8lab train: %s: cannot write the intervention's record\n", path);
    return rc;
}

/* The run state before the folder is touched: fresh, or a fork's parent's (read from its file).  The
   thread count is --threads, else all cores (a resume takes the checkpoint's in run_claim_folder). */
static int run_restore(train_run *r)
{
    const fl_train_opts *opts = r->opts;
    fl_train_state *st = &r->st;
    memset(st, 0, sizeof *st);
    st->first_sat_step = st->first_down_sat_step = UINT64_MAX;
    st->threads = (uint32_t)(opts->threads > 0 ? opts->threads : omp_get_num_procs());
    if (!opts->resume && r->cfg.fork_from[0]) {
        const uint32_t threads = st->threads;
        if (load_checkpoint(r->cfg.fork_from, 1, &r->cfg, st, &r->m, r->am, r->av, &r->rec))
            return FL_EXIT_FAIL;
        st->threads = threads;
        st->metrics_off = st->tele_off = st->sites_off = st->chan_off = st->rec_off = 0;
    }
    return FL_EXIT_OK;
}

/* The locked folder: a resume reads its checkpoint; a fresh run or fork finds it free of another
   run's files (or, with --overwrite, removes them).  Temporary files of killed writers are swept. */
static int run_claim_folder(train_run *r)
{
    const fl_train_opts *opts = r->opts;
    int rc = fl_rundir_acquire(&r->folder, opts->dir, "train");
    if (rc)
        return rc;
    const int swept = fl_rundir_sweep_temps(opts->dir);
    if (swept && !opts->quiet)
        fprintf(stderr, "fp8lab train: %s: removed %d temporary file%s of an interrupted write\n", opts->dir, swept,
                swept > 1 ? "s" : "");
    char path[4096], err[4400];
    path_join(path, sizeof path, opts->dir, "checkpoint.bin");
    if (opts->resume) {
        fl_train_state *st = &r->st;
        if (load_checkpoint(path, 0, &r->cfg, st, &r->m, r->am, r->av, &r->rec))
            return FL_EXIT_FAIL;
        if (opts->threads > 0)
            st->threads = (uint32_t)opts->threads;
        return FL_EXIT_OK;
    }
    const char *held = fl_rundir_run_file(opts->dir);
    if (held && !opts->overwrite) {
        fprintf(stderr, "fp8lab train: %s holds a run already (%s): continue it with --resume %s, replace it with "
                        "--overwrite, or choose another --out\n", opts->dir, held, opts->dir);
        return FL_EXIT_USAGE;
    }
    if (held && fl_rundir_clear(opts->dir, err, sizeof err)) {
        fprintf(stderr, "fp8lab train: %s\n", err);
        return FL_EXIT_FAIL;
    }
    if (r->cfg.decor_k && run_decorrelate(r))
        return FL_EXIT_FAIL;
    return FL_EXIT_OK;
}

/* A log at least as long as the checkpoint recorded: truncate it there.  A shorter one was cut or
   replaced after the checkpoint, and the run cannot continue it bit for bit. */
static int truncate_log(const char *path, uint64_t off, uint64_t step)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "fp8lab train: %s: cannot resume: the log is missing: %s\n", path, strerror(errno));
        return -1;
    }
    if ((uint64_t)sb.st_size < off) {
        fprintf(stderr, "fp8lab train: %s: cannot resume: the log has %llu bytes, fewer than the %llu the checkpoint "
                        "recorded at step %llu (it was cut or replaced); start the run again with --overwrite\n",
                path, (unsigned long long)sb.st_size, (unsigned long long)off, (unsigned long long)step);
        return -1;
    }
    if (truncate(path, (off_t)off) != 0) {
        fprintf(stderr, "fp8lab train: %s: cannot truncate the log to the checkpoint: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* config.json (atomic), metrics.csv and telemetry.jsonl (truncated to the checkpoint on resume). */
static int run_open_files(train_run *r)
{
    const fl_train_opts *opts = r->opts;
    char path[4096], err[4400];
    char pm[4096], pt[4096], ps[4096], pc[4096], pr[4096];
    path_join(pm, sizeof pm, opts->dir, "metrics.csv");
    path_join(pt, sizeof pt, opts->dir, "telemetry.jsonl");
    path_join(ps, sizeof ps, opts->dir, "sites.csv");
    path_join(pc, sizeof pc, opts->dir, "channels.csv");
    path_join(pr, sizeof pr, opts->dir, "records.csv");
    const int chan = r->cfg.chan_every > 0;
    const fl_train_state *st = &r->st;
    if (opts->resume &&
        (truncate_log(pm, st->metrics_off, st->step) || truncate_log(pt, st->tele_off, st->step) ||
         truncate_log(ps, st->sites_off, st->step) ||
         (chan && (truncate_log(pc, st->chan_off, st->step) || truncate_log(pr, st->rec_off, st->step)))))
        return FL_EXIT_FAIL;
    path_join(path, sizeof path, opts->dir, "config.json");
    if (fl_write_atomic(path, cfg_json_fill, &r->cfg, err, sizeof err)) {
        fprintf(stderr, "fp8lab train: %s\n", err);
        return FL_EXIT_FAIL;
    }
    const char *mode = opts->resume ? "a" : "w";
    r->fm = fopen(pm, mode);
    r->ft = fopen(pt, mode);
    r->fs = fopen(ps, mode);
    if (chan) {
        r->fc = fopen(pc, mode);
        r->fr = fopen(pr, mode);
    }
    if (!opts->resume) {
        if (r->fm)
            fl_tele_metrics_header(r->fm);
        if (r->fs)
            fl_tele_sites_header(r->fs, &r->rec);
        if (chan && r->fc && r->fr)
            fl_chan_headers(r->fc, r->fr);
    }
    if (!r->fm || !r->ft || !r->fs || (chan && (!r->fc || !r->fr))) {
        fprintf(stderr, "fp8lab train: %s: cannot open the run's logs\n", opts->dir);
        return FL_EXIT_FAIL;
    }
    return FL_EXIT_OK;
}

/* Whether the environment variable name is set to exactly val (the GPU step's switches). */
static int env_is(const char *name, const char *val)
{
    const char *v = getenv(name);
    return v && !strcmp(v, val);
}

/* FP8LAB_GSTEP_TRACE=1: the GPU step's phases on stderr as they begin (gstep.c traces its operations) */
static void gs_trace(const char *what, long long step)
{
    static int on = -1; /* read once: the environment does not change during a run */
    if (on < 0)
        on = env_is("FP8LAB_GSTEP_TRACE", "1");
    if (on)
        fprintf(stderr, "gstep trace: %s %lld\n", what, step);
}

/* Data, model and a fork's parent first (nothing written), then the folder, then the logs.  A run
   refused before its folder holds anything leaves no folder behind. */
static int run_setup(train_run *r)
{
    int rc = run_open_data(r);
    if (rc == FL_EXIT_OK)
        rc = run_build(r);
    if (rc == FL_EXIT_OK)
        rc = run_restore(r);
    if (rc == FL_EXIT_OK && r->cfg.device != FL_DEVICE_CPU) { /* the device and its memory, before the folder is touched */
        if (r->cfg.device == FL_DEVICE_TWINS)
            r->gs_ops = &fl_gstep_host;
        else if (!fl_gstep_cuda_open) {
            fprintf(stderr, "fp8lab train: --device cuda: this fp8lab has no CUDA step (build/fp8lab-cuda has it: make cuda)\n");
            rc = FL_EXIT_USAGE;
        } else if (gs_trace("open the device", -1), !(r->gs_ops = fl_gstep_cuda_open(&r->gs_ctx, r->cfg.model.act)))
            rc = FL_EXIT_USAGE; /* no device (said why): refused before any work */
        if (rc == FL_EXIT_OK && (gs_trace("init", -1), fl_gstep_init(&r->gs, r->gs_ops, r->gs_ctx, &r->cfg.model, (int)r->cfg.recipe.kind)))
            rc = FL_EXIT_USAGE; /* the step's tensors do not fit (or a recipe it does not run): said why, nothing done */
        if (rc == FL_EXIT_OK && r->gs.fp8) {
            r->gs.bfq_off = env_is("FP8LAB_GSTEP_BF16_EXACT", "0"); /* fp32 GEMMs on the FP8 values throughout */
            if (fl_gstep_set_recipe(&r->gs, &r->rec) || (r->cfg.fp8_gemm && fl_gstep_set_fp8_gemm(&r->gs))) {
                fl_gstep_free(&r->gs); /* the FP8 recipes' state; --fp8-gemm's codes */
                rc = FL_EXIT_FAIL;
            }
        }
        r->gs_ready = rc == FL_EXIT_OK;
        if (r->gs_ready && env_is("FP8LAB_GSTEP_PROFILE", "1"))
            r->gs.prof = &r->prof;
        r->gs.trace = r->gs_ready && env_is("FP8LAB_GSTEP_TRACE", "1");
    }
    if (rc != FL_EXIT_OK)
        return rc;
    rc = run_claim_folder(r);
    if (rc == FL_EXIT_OK && r->gs_ready && (gs_trace("upload", -1), fl_gstep_upload(&r->gs, r->m.params, r->am, r->av))) /* the restored state */
        rc = FL_EXIT_FAIL;
    if (rc == FL_EXIT_OK)
        rc = run_open_files(r);
    if (rc == FL_EXIT_OK) {
        memcpy(r->m.chan_rec_max, r->st.rec_max, sizeof r->st.rec_max);
        r->m.chan_on = r->cfg.chan_every ? 1 : 0;
        omp_set_num_threads((int)r->st.threads); /* the GEMMs too: their tiles (model.c) */
    }
    return rc;
}

static void run_free(train_run *r)
{
    if (r->fm)
        fclose(r->fm);
    if (r->ft)
        fclose(r->ft);
    if (r->fs)
        fclose(r->fs);
    if (r->fc)
        fclose(r->fc);
    if (r->fr)
        fclose(r->fr);
    r->m.ffn_wsums = NULL; /* (the GPU step's sums go with it) */
    if (r->gs_ready)
        fl_gstep_free(&r->gs);
    if (r->gs_ctx)
        fl_gstep_cuda_close(r->gs_ctx);
    free(r->am);
    free(r->av);
    free(r->batch);
    if (r->rec_ready) {
        fl_model_free(&r->m);
        fl_recipe_free(&r->rec);
    }
    free(r->namestore);
    free(r->names);
    free(r->roles);
    free(r->hp);
    fl_data_free(&r->data);
    fl_rundir_release(&r->folder, r->opts->dir, 1);
}

/* One optimisation step on the batch of step st.step: forward, backward, global-norm clip, AdamW.
   Returns the loss; *lr and *gnorm are the step's learning rate and gradient norm. */
static float train_step(train_run *r, int tele, float *lr, float *gnorm)
{
    const fl_train_cfg *cfg = &r->cfg;
    const uint64_t step = r->st.step;
    const uint32_t A = cfg->accum; /* micro-batch a of the step is batch step A + a */
    const size_t bt = (size_t)cfg->model.B * (cfg->model.T + 1);
    for (uint32_t a = 0; a < A; a++)
        fl_train_batch(r->batch + a * bt, &r->data, cfg, step * A + a);
    if (r->gs_ready) { /* --device twins / cuda: the GPU step; the alignment telemetry reads the sums of its FFN
                          weights (fl_gstep_wsums), all weights and the moments come back at each checkpoint */
        float loss;
        *lr = fl_lr_at(cfg, step);
        fl_recipe_step_begin(&r->rec, 0); /* the device's casts measure no moments */
        r->rec.hp_phase = step < cfg->recipe.fp8_start; /* (rec.step: gstep.c sets it per micro-batch) */
        const int chan_rows = cfg->chan_every && step % cfg->chan_every == 0;
        if (cfg->chan_every) { /* the forward fills the host model's per-channel telemetry (fl_gstep.chan) */
            r->m.chan_on = chan_rows ? 2 : 1;
            r->gs.chan = &r->m;
        }
        gs_trace("step", (long long)step);
        if (fl_gstep_step(&r->gs, cfg, r->batch, step, &loss, gnorm)) {
            fprintf(stderr, "fp8lab train: the GPU step failed at step %llu (%s); the last checkpoint stands\n",
                    (unsigned long long)step, r->gs.ops->name);
            exit(FL_EXIT_FAIL);
        }
        memcpy(r->m.ffn, r->gs.ffn, sizeof r->m.ffn);
        r->st.adam_ftz += r->gs.adam_ftz; /* --fp8-adam: the moments' casts (optim.c counts the harness's) */
        r->gs.adam_ftz = 0;
        if (cfg->chan_every) { /* with the sums of the weights the forward read, as the harness's */
            r->m.ffn_wsums = fl_gstep_wsums(&r->gs, 1);
            fl_chan_rows(r->fc, r->fr, step, &r->m, chan_rows);
        }
        r->m.ffn_wsums = fl_gstep_wsums(&r->gs, 0); /* the metrics' alignment: after the update */
        fl_recipe_step_end(&r->rec);
        return loss;
    }
    const int chan_rows = cfg->chan_every && step % cfg->chan_every == 0;
    if (cfg->chan_every)
        r->m.chan_on = chan_rows ? 2 : 1;
    fl_recipe_step_begin(&r->rec, tele);
    r->rec.hp_phase = step < cfg->recipe.fp8_start;
    fl_model_zero_grad(&r->m);
    /* the micro-batches' gradients (of each one's mean loss) add up in the parameters' gradients; the
       loss is their losses' mean, the gradient norm the sum's over A, the update scales by 1 / A (with
       the clip, one multiplication: fl_train_accum_scale) */
    float loss = 0.0f;
    double lsum = 0.0;
    for (uint32_t a = 0; a < A; a++) {
        r->rec.step = step * A + a; /* the stochastic-rounding streams of micro-batch a */
        loss = fl_model_forward(&r->m, r->batch + a * bt);
        fl_model_backward(&r->m);
        lsum += loss;
    }
    if (A > 1)
        loss = (float)(lsum / A);
    if (cfg->chan_every) /* the weights the forward used: before the update */
        fl_chan_rows(r->fc, r->fr, step, &r->m, chan_rows);
    float gscale;
    *gnorm = fl_train_accum_scale(cfg, fl_grad_norm(&r->m), &gscale);
    *lr = fl_lr_at(cfg, step);
    fl_adamw_step(cfg, &r->m, r->am, r->av, step, *lr, gscale, &r->st);
    fl_recipe_step_end(&r->rec);
    return loss;
}

/* Telemetry of the step: the metrics row, the jsonl record on telemetry steps, the run's totals. */
static void record_step(train_run *r, uint64_t step, int tele, float loss, float lr, float gnorm)
{
    const fl_train_cfg *cfg = &r->cfg;
    fl_train_state *st = &r->st;
    fl_step_summary sum;
    fl_tele_summarize(&sum, &r->m);
    if (r->gs_ready && !r->gs.fp8) /* the GPU step's bf16 casts count nothing; the FFN statistics are its, the
                                      weights the host's copy; under FP8 its casts count into r->rec */
        fl_tele_unmeasured(&sum);
    st->ema = step == 0 ? loss : (1.0 - cfg->div_ema) * st->ema + cfg->div_ema * loss;
    fl_tele_metrics_row(r->fm, step, loss, st->ema, lr, gnorm, &sum);
    if (!r->gs_ready || r->gs.fp8)
        fl_tele_sites_rows(r->fs, step, &r->rec);
    if (!r->gs_ready && tele)
        fl_tele_jsonl(r->ft, step, loss, &r->m);
    st->last_loss = loss;
    if (sum.act_amax > st->act_amax_max)
        st->act_amax_max = sum.act_amax;
    if (sum.ffn_in_amax > st->in_amax_max)
        st->in_amax_max = sum.ffn_in_amax;
    if (step == 0)
        st->align_start = sum.align.cos_p99;
    if (isfinite(loss)) /* a non-finite step leaves NaN weights behind: keep the last finite value */
        st->align_end = sum.align.cos_p99;
    st->sat_total += sum.sat;
    st->clip_total += sum.clip;
    st->nanout_total += sum.nan_out + sum.inf_out;
    st->ftz_total += sum.ftz;
    st->down_sat_total += sum.down_in_sat;
    if (sum.sat && st->first_sat_step == UINT64_MAX)
        st->first_sat_step = step;
    if (sum.down_in_sat && st->first_down_sat_step == UINT64_MAX)
        st->first_down_sat_step = step;
}

/* The divergence criterion of train.h, after the loss and its EMA of step are recorded. */
static void check_divergence(fl_train_state *st, const fl_train_cfg *cfg, uint64_t step, float loss)
{
    if (st->diverged)
        return;
    if (!isfinite(loss)) {
        st->diverged = 1;
        st->div_step = step;
        st->div_reason = 1;
        return;
    }
    if (step == 0 || st->ema < st->ema_min)
        st->ema_min = st->ema;
    st->above = st->ema > st->ema_min + cfg->div_margin ? st->above + 1 : 0;
    if (st->above >= cfg->div_window) {
        st->diverged = 1;
        st->div_step = step + 1 - cfg->div_window;
        st->div_reason = 2;
    }
}

/* The checkpoint records the logs' lengths, so that a resume truncates them to this step. */
static int checkpoint_now(train_run *r)
{
    if (r->gs_ready && (fl_gstep_params(&r->gs, r->m.params) || fl_gstep_get_moments(&r->gs, r->am, r->av)))
        return -1;
    fflush(r->fm);
    fflush(r->ft);
    fflush(r->fs);
    r->st.metrics_off = (uint64_t)ftell(r->fm);
    r->st.tele_off = (uint64_t)ftell(r->ft);
    r->st.sites_off = (uint64_t)ftell(r->fs);
    if (r->fc) {
        fflush(r->fc);
        fflush(r->fr);
        r->st.chan_off = (uint64_t)ftell(r->fc);
        r->st.rec_off = (uint64_t)ftell(r->fr);
    }
    memcpy(r->st.rec_max, r->m.chan_rec_max, sizeof r->st.rec_max);
    /* a kept copy first: a run killed between the two writes resumes from the older checkpoint.bin
       and writes the kept one again (the same bytes), never past a kept step without its copy */
    for (uint32_t k = 0; k < r->cfg.keep_n; k++)
        if (r->cfg.keep[k] == r->st.step) {
            char name[64];
            snprintf(name, sizeof name, "checkpoint-%llu.bin", (unsigned long long)r->st.step);
            if (save_checkpoint(r->opts->dir, name, &r->cfg, &r->st, &r->m, r->am, r->av, &r->rec))
                return -1;
            break;
        }
    return save_checkpoint(r->opts->dir, "checkpoint.bin", &r->cfg, &r->st, &r->m, r->am, r->av, &r->rec);
}

/* The steps.  Returns 0 when the run ended (all steps, or divergence with stop_on_div), 1 when a
   signal stopped it after its checkpoint, -1 when a checkpoint could not be written. */
static int run_loop(train_run *r)
{
    const fl_train_cfg *cfg = &r->cfg;
    fl_train_state *st = &r->st;
    const int tty = !r->opts->quiet && isatty(2);
    while (st->step < cfg->steps && !(st->diverged && cfg->stop_on_div)) {
        const uint64_t step = st->step;
        const int tele = step % cfg->log_every == 0 || step + 1 == cfg->steps;
        float lr, gnorm;
        const double ts = monotonic_seconds();
        const float loss = train_step(r, tele, &lr, &gnorm);
        record_step(r, step, tele, loss, lr, gnorm);
        const double dt = monotonic_seconds() - ts;
        if (step == r->step0)
            r->first_s = dt;
        else {
            r->rest_s += dt;
            r->rest_n++;
        }
        check_divergence(st, cfg, step, loss);
        st->step = step + 1;

        const int last = st->step == cfg->steps || (st->diverged && cfg->stop_on_div);
        int keep = 0;
        for (uint32_t k = 0; k < cfg->keep_n; k++)
            keep |= cfg->keep[k] == st->step;
        if (fl_train_stop_flag || last || keep || st->step % cfg->ckpt_every == 0) {
            if (checkpoint_now(r))
                return -1;
            if (fl_train_stop_flag)
                return 1;
        }
        const double tn = monotonic_seconds();
        if (tty && (tn - r->tlast > 0.25 || last)) {
            progress(st->step, cfg->steps, loss, (double)(st->step - r->step0) / (tn - r->t0), last);
            r->tlast = tn;
        }
    }
    return 0;
}

/* summary.json and the closing line; the exit status of the run. */
static int run_finish(train_run *r, int interrupted)
{
    const fl_train_cfg *cfg = &r->cfg;
    const fl_train_state *st = &r->st;
    const double secs = monotonic_seconds() - r->t0;
    const uint64_t ran = st->step - r->step0;
    summary_arg sa = { cfg, st, secs > 0 ? (double)ran / secs : 0.0, r->first_s,
                       r->rest_n && r->rest_s > 0 ? (double)r->rest_n / r->rest_s : NAN, ran, r->gs_ready ? r->gs.bytes : 0 };
    if (r->gs.prof)
        fl_gstep_prof_print(stderr, r->gs.prof, r->gs_ops->name);
    char path[4096], err[4400];
    path_join(path, sizeof path, r->opts->dir, "summary.json");
    if (fl_write_atomic(path, summary_fill, &sa, err, sizeof err))
        fprintf(stderr, "fp8lab train: %s\n", err);
    if (interrupted) {
        fprintf(stderr, "\nfp8lab train: interrupted at step %llu; checkpoint written; continue with: fp8lab train --resume %s\n",
                (unsigned long long)st->step, r->opts->dir);
        return FL_EXIT_FAIL;
    }
    if (!r->opts->quiet) {
        fprintf(stderr, "fp8lab train: %s %s: %llu steps in %.1f s (%.2f steps/s), final loss %.4f%s\n",
                fl_act_name(cfg->model.act), fl_recipe_name((fl_recipe_kind)cfg->recipe.kind),
                (unsigned long long)ran, secs, sa.steps_per_s, st->last_loss,
                st->diverged ? (st->div_reason == 1 ? ", DIVERGED (non-finite loss)" : ", DIVERGED (loss above running minimum)") : "");
    }
    return FL_EXIT_OK;
}

/* The steps between SIGINT/SIGTERM handlers that ask for a checkpoint and a clean stop. */
static int run_train(train_run *r)
{
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    fl_train_stop_flag = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);

    r->t0 = r->tlast = monotonic_seconds();
    r->step0 = r->st.step;
    if (!r->opts->quiet)
        fprintf(stderr, "fp8lab train: %s %s, seed %llu, %llu steps%s, %u threads -> %s\n", fl_act_name(r->cfg.model.act),
                fl_recipe_name((fl_recipe_kind)r->cfg.recipe.kind), (unsigned long long)r->cfg.seed,
                (unsigned long long)r->cfg.steps, r->opts->resume ? " (resumed)" : "", r->st.threads, r->opts->dir);
    const int ended = run_loop(r);
    const int rc = ended < 0 ? FL_EXIT_FAIL : run_finish(r, ended == 1);

    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    return rc;
}

int fl_train_run(const fl_train_cfg *cfg_in, const fl_train_opts *opts)
{
    const char *why = fl_train_cfg_check(cfg_in);
    if (why) {
        fprintf(stderr, "fp8lab train: %s\n", why);
        return FL_EXIT_USAGE;
    }
    if (!fl_rundir_path_ok(opts->dir)) {
        fprintf(stderr, "fp8lab train: the run folder's path is too long (%zu bytes; at most %d): %.80s...\n",
                strlen(opts->dir), 4096 - 2 - FL_RUNDIR_NAME_MAX, opts->dir);
        return FL_EXIT_USAGE;
    }
    if (!opts->resume && cfg_in->fork_from[0] && fl_rundir_contains(opts->dir, cfg_in->fork_from)) {
        fprintf(stderr, "fp8lab train: --fork %s lies in the run folder %s: a fork writes a folder of its own "
                        "(its parent's files stay as they are); choose another --out\n", cfg_in->fork_from, opts->dir);
        return FL_EXIT_USAGE;
    }
    train_run r;
    memset(&r, 0, sizeof r);
    r.cfg = *cfg_in;
    r.opts = opts;
    r.folder.fd = -1;
    int rc = run_setup(&r);
    if (rc == FL_EXIT_OK)
        rc = run_train(&r);
    run_free(&r);
    return rc;
}
