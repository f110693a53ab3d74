/* train.c — the training loop of `fp8lab train`, top to bottom.
 *
 *   setup:   data (generated or a text file), recipe (cast sites), model (params in one
 *            allocation, model.h), AdamW state; or all of it from the run folder's checkpoint
 *   loop:    batch(seed, step) -> zero grads -> forward -> backward (grads ACCUMULATE into
 *            m->grads, model.h) -> global grad-norm clip -> lr schedule -> AdamW -> telemetry
 *            -> divergence check -> checkpoint every K steps / on SIGINT, SIGTERM
 *   end:     final checkpoint, summary.json
 *
 * Optimizer: AdamW with decoupled weight decay (Loshchilov & Hutter):
 *   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  p -= lr (m/(1-b1^t) / (sqrt(v/(1-b2^t)) + eps) + wd p)
 * with weight decay on the matrices (embeddings, Linear weights, head), none on gains and
 * activation coefficients.  --fp8-adam stores m in e4m3 and v in e5m2 (per-tensor current scales,
 * RNE, saturating) after every update.
 * Schedule: linear warmup over `warmup` steps to lr, then constant or cosine down to lr_min_frac*lr.
 * Gradient clipping: g *= clip / max(clip, ||g||_2) over all parameters (clip 0: off).
 *
 * Determinism: the batch of step t is a function of (seed, t); every reduction has a fixed order
 * (model.h); the thread count is part of the checkpoint's run state and reused on resume.  A
 * resumed run therefore repeats the uninterrupted run bit for bit: metrics.csv and
 * telemetry.jsonl are truncated to their length at the checkpoint and continue from there.
 */
#include "train.h"

#include "checkpoint.h"
#include "cli/cli.h"
#include "data.h"
#include "telemetry.h"

#include <cblas.h>
#include <errno.h>
#if defined(__SSE__)
#include <immintrin.h>
#endif
#include <math.h>
#include <omp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

_Static_assert(sizeof(fl_train_cfg) == 696, "fl_train_cfg layout (stored in checkpoints)");
_Static_assert(sizeof(fl_train_state) == 160, "fl_train_state layout (stored in checkpoints)");

volatile int fl_train_stop_flag;

enum { CK_CFG = 1, CK_STATE, CK_PARAMS, CK_ADAM_M, CK_ADAM_V, CK_RECIPE };

void fl_train_cfg_default(fl_train_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->model = (fl_model_cfg){ .V = 256, .C = 64, .L = 2, .H = 4, .F = 256, .T = 64, .B = 16,
                               .act = { FL_ACT_SWIGLU, 0 }, .init_std = 0.02f };
    fl_recipe_cfg_default(&c->recipe, FL_RECIPE_BF16);
    c->steps = 1000;
    c->seed = 1;
    c->lr = 1e-3f;
    c->lr_min_frac = 0.1f;
    c->wd = 0.1f;
    c->beta1 = 0.9f;
    c->beta2 = 0.95f;
    c->adam_eps = 1e-8f;
    c->clip = 1.0f;
    c->warmup = 100;
    c->schedule = FL_SCHED_COSINE;
    c->data_kind = FL_DATA_SYNTHETIC;
    c->data_len = 1u << 20;
    c->log_every = 10;
    c->ckpt_every = 500;
    c->div_margin = 1.0f;
    c->div_ema = 0.02f;
    c->div_window = 100;
    c->stop_on_div = 1;
    c->trigger_rate = 0.002f;
    c->trigger_len = 8;
}

const char *fl_train_cfg_check(const fl_train_cfg *c)
{
    const char *why = fl_model_cfg_check(&c->model);
    if (why)
        return why;
    if (c->model.V != 256)
        return "the vocabulary is byte-level: 256";
    if (c->recipe.kind >= FL_RECIPE_COUNT)
        return "unknown recipe";
    if (c->recipe.history < 1 || c->recipe.history > (1u << 20))
        return "--amax-history must be 1..1048576";
    if (c->recipe.margin < -127 || c->recipe.margin > 127)
        return "--margin must be in [-127, 127]";
    if (c->recipe.fast_accum && c->recipe.kind != FL_RECIPE_FP8_DELAYED && c->recipe.kind != FL_RECIPE_FP8_CURRENT)
        return "--fast-accum applies to the per-tensor FP8 recipes (fp8-delayed, fp8-current)";
    if (c->recipe.fp8_start && !fl_recipe_is_fp8((fl_recipe_kind)c->recipe.kind))
        return "--fp8-start applies to the FP8 recipes";
    if (c->recipe.grad_current && c->recipe.kind != FL_RECIPE_FP8_DELAYED)
        return "--grad-scaling current applies to fp8-delayed (the other recipes scale dY as they scale X)";
    if (c->steps < 1 || c->steps > 100000000ull)
        return "--steps must be 1..1e8";
    if (!(c->lr > 0 && c->lr < 10) || !(c->lr_min_frac >= 0 && c->lr_min_frac <= 1))
        return "need 0 < --lr < 10 and 0 <= --lr-min <= 1";
    if (!(c->wd >= 0 && c->wd <= 100) || !(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1))
        return "need 0 <= --wd <= 100 and betas in [0, 1)";
    if (!(c->adam_eps > 0) || !(c->clip >= 0))
        return "need --adam-eps > 0 and --clip >= 0";
    if (c->data_kind == FL_DATA_TRIGGERS && (!(c->trigger_rate > 0 && c->trigger_rate <= 1) || c->trigger_len < 1 || c->trigger_len > 64))
        return "--trigger-rate must be in (0, 1] and --trigger-len in 1..64";
    if (c->data_kind != FL_DATA_TEXT && (c->data_len < (uint64_t)c->model.T + 2 || c->data_len > (1ull << 30)))
        return "--data-len must be between seq + 2 and 2^30";
    if (c->log_every < 1 || c->ckpt_every < 1)
        return "--log-every and --ckpt-every must be >= 1";
    if (!(c->div_margin > 0) || !(c->div_ema > 0 && c->div_ema <= 1) || c->div_window < 1)
        return "need --div-margin > 0, 0 < --div-ema <= 1, --div-window >= 1";
    return NULL;
}

void fl_train_cfg_json(FILE *f, const fl_train_cfg *c)
{
    const fl_model_cfg *m = &c->model;
    const fl_recipe_cfg *r = &c->recipe;
    fprintf(f, "{\n  \"act\": \"%s\", \"recipe\": \"%s\",\n", fl_act_name(m->act), fl_recipe_name((fl_recipe_kind)r->kind));
    fprintf(f, "  \"vocab\": %u, \"width\": %u, \"layers\": %u, \"heads\": %u, \"ffn\": %u, \"seq\": %u, \"batch\": %u, \"init_std\": %.9g,\n",
            m->V, m->C, m->L, m->H, m->F, m->T, m->B, m->init_std);
    fprintf(f, "  \"amax_history\": %u, \"amax_algo\": \"%s\", \"margin\": %d, \"pow2_scales\": %s, \"fp8_overflow\": \"%s\", \"fast_accum\": %s, \"fp8_adam\": %s, \"grad_scaling\": \"%s\", \"fp8_start\": %u,\n",
            r->history, fl_amax_algo_name((fl_amax_algo)r->algo), r->margin, r->pow2 ? "true" : "false",
            r->nosat ? "nan" : "saturate", r->fast_accum ? "true" : "false", r->fp8_adam ? "true" : "false",
            r->grad_current ? "current" : "delayed", r->fp8_start);
    fprintf(f, "  \"steps\": %llu, \"seed\": %llu, \"lr\": %.9g, \"lr_min_frac\": %.9g, \"wd\": %.9g, \"beta1\": %.9g, \"beta2\": %.9g, \"adam_eps\": %.9g, \"clip\": %.9g, \"warmup\": %u, \"schedule\": \"%s\",\n",
            (unsigned long long)c->steps, (unsigned long long)c->seed, c->lr, c->lr_min_frac, c->wd, c->beta1,
            c->beta2, c->adam_eps, c->clip, c->warmup, c->schedule == FL_SCHED_COSINE ? "cosine" : "constant");
    fprintf(f, "  \"data\": \"%s\", \"data_len\": %llu, \"data_hash\": \"%016llx\",\n",
            c->data_kind == FL_DATA_TEXT ? c->data_path : c->data_kind == FL_DATA_TRIGGERS ? "triggers" : "synthetic",
            (unsigned long long)c->data_len,
            (unsigned long long)c->data_hash);
    fprintf(f, "  \"log_every\": %u, \"ckpt_every\": %u, \"div_margin\": %.9g, \"div_ema\": %.9g, \"div_window\": %u, \"stop_on_divergence\": %s\n}\n",
            c->log_every, c->ckpt_every, c->div_margin, c->div_ema, c->div_window, c->stop_on_div ? "true" : "false");
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

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
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

static float lr_at(const fl_train_cfg *c, uint64_t step)
{
    if (step < c->warmup)
        return c->lr * (float)(step + 1) / (float)c->warmup;
    if (c->schedule == FL_SCHED_CONSTANT || c->steps <= c->warmup)
        return c->lr;
    const double p = (double)(step - c->warmup) / (double)(c->steps - c->warmup);
    const double k = c->lr_min_frac + (1.0 - c->lr_min_frac) * 0.5 * (1.0 + cos(3.141592653589793 * p));
    return (float)(c->lr * k);
}

static int decays(int tensor)
{
    return tensor == FL_P_WTE || tensor == FL_P_WPE || tensor == FL_P_WQKV || tensor == FL_P_WPROJ ||
           tensor == FL_P_WFC || tensor == FL_P_WDOWN || tensor == FL_P_WHEAD;
}

/* x[i] = sqrtf(x[i]), i < n.  The compiler keeps sqrtf a scalar call (errno), so the AdamW loop would
   not vectorise; the SSE/AVX square root is IEEE's correctly rounded one, as sqrtf, with the same
   NaN results, so the bits are sqrtf's. */
#define ADAM_BLOCK 256
static void sqrt_block(float *x, size_t n)
{
    size_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(x + i, _mm512_sqrt_ps(_mm512_loadu_ps(x + i)));
#elif defined(__AVX__)
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_sqrt_ps(_mm256_loadu_ps(x + i)));
#elif defined(__SSE__)
    for (; i + 4 <= n; i += 4)
        _mm_storeu_ps(x + i, _mm_sqrt_ps(_mm_loadu_ps(x + i)));
#endif
    for (; i < n; i++)
        x[i] = sqrtf(x[i]);
}

/* FP8 Adam moments: x (n) <- decode(encode(x * s)) / s, per-tensor current scale. */
static void moment_cast(float *x, size_t n, fl_format fmt, uint64_t *sat, uint64_t *ftz)
{
    const float amax = fl_amax_f32(NULL, x, n);
    const float s = fl_scale_from_amax(fmt, amax, 1.0f, 0, 0), si = 1.0f / s;
    const fl_format_desc *d = fl_format_get(fmt);
    uint64_t nf = 0;
    (void)sat;
#pragma omp parallel for schedule(static) reduction(+ : nf)
    for (size_t i = 0; i < n; i++) {
        const uint32_t q = fl_encode_f32_bits(d, fl_f32_bits(x[i] * s), FL_RND_NE, FL_OVF_SATURATE, 0);
        const float y = fl_decode_f32(d, q) * si;
        nf += (y == 0.0f && x[i] != 0.0f);
        x[i] = y;
    }
    *ftz += nf;
}

static int write_text_atomic(const char *path, void (*fn)(FILE *, const void *), const void *arg)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    fn(f, arg);
    const int bad = ferror(f) | fclose(f);
    if (bad || rename(tmp, path)) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

static void cfg_json_cb(FILE *f, const void *a) { fl_train_cfg_json(f, a); }

typedef struct {
    const fl_train_cfg *cfg;
    const fl_train_state *st;
    double steps_per_s;
    uint64_t steps_run;
} summary_arg;

static void summary_cb(FILE *f, const void *a_)
{
    const summary_arg *a = a_;
    const fl_train_state *s = a->st;
    fprintf(f, "{\"act\": \"%s\", \"recipe\": \"%s\", \"steps\": %llu, \"steps_done\": %llu, \"diverged\": %s, \"diverged_step\": ",
            fl_act_name(a->cfg->model.act), fl_recipe_name((fl_recipe_kind)a->cfg->recipe.kind),
            (unsigned long long)a->cfg->steps, (unsigned long long)s->step, s->diverged ? "true" : "false");
    if (s->diverged)
        fprintf(f, "%llu, \"divergence\": \"%s\"", (unsigned long long)s->div_step,
                s->div_reason == 1 ? "non-finite loss" : "loss above running minimum");
    else
        fputs("null", f);
    fputs(", \"final_loss\": ", f);
    if (isfinite(s->last_loss))
        fprintf(f, "%.9g", s->last_loss);
    else
        fputs("null", f);
    fprintf(f, ", \"final_loss_ema\": %.9g, \"alignment_start\": %.9g, \"alignment_end\": %.9g, \"amax_max\": %.9g, \"ffn_in_amax_max\": %.9g",
            isfinite(s->ema) ? s->ema : -1.0, s->align_start, s->align_end, s->act_amax_max, s->in_amax_max);
    fprintf(f, ", \"saturated_total\": %llu, \"clipped_total\": %llu, \"nan_produced_total\": %llu, \"flushed_total\": %llu, \"down_in_saturated_total\": %llu",
            (unsigned long long)s->sat_total, (unsigned long long)s->clip_total, (unsigned long long)s->nanout_total,
            (unsigned long long)s->ftz_total, (unsigned long long)s->down_sat_total);
    fputs(", \"first_saturation_step\": ", f);
    if (s->first_sat_step != UINT64_MAX)
        fprintf(f, "%llu", (unsigned long long)s->first_sat_step);
    else
        fputs("null", f);
    fputs(", \"first_down_in_saturation_step\": ", f);
    if (s->first_down_sat_step != UINT64_MAX)
        fprintf(f, "%llu", (unsigned long long)s->first_down_sat_step);
    else
        fputs("null", f);
    fprintf(f, ", \"steps_per_s\": %.4g, \"steps_this_invocation\": %llu, \"threads\": %u}\n", a->steps_per_s,
            (unsigned long long)a->steps_run, s->threads);
}

/* ---- checkpoint ---------------------------------------------------------------------------------- */

static int save_checkpoint(const char *dir, const fl_train_cfg *cfg, const fl_train_state *st,
                           const fl_model *m, const float *am, const float *av, const fl_recipe *rec)
{
    char path[4096], err[4400];
    path_join(path, sizeof path, dir, "checkpoint.bin");
    const size_t rs = fl_recipe_state_size(rec);
    unsigned char *rb = malloc(rs ? rs : 1);
    if (!rb)
        return -1;
    fl_recipe_state_save(rec, rb);
    const fl_ckpt_section secs[] = {
        { CK_CFG, cfg, sizeof *cfg },
        { CK_STATE, st, sizeof *st },
        { CK_PARAMS, m->params, m->nparams * sizeof(float) },
        { CK_ADAM_M, am, m->nparams * sizeof(float) },
        { CK_ADAM_V, av, m->nparams * sizeof(float) },
        { CK_RECIPE, rb, rs },
    };
    const int rc = fl_ckpt_write(path, secs, (int)FL_ARRAY_LEN(secs), err, sizeof err);
    free(rb);
    if (rc)
        fprintf(stderr, "fp8lab train: %s\n", err);
    return rc;
}

int fl_train_read_cfg(fl_train_cfg *cfg, fl_train_state *st, const char *dir, char *err, size_t errlen)
{
    char path[4096];
    path_join(path, sizeof path, dir, "checkpoint.bin");
    fl_ckpt ck;
    if (fl_ckpt_read(&ck, path, err, errlen))
        return -1;
    const fl_ckpt_section *c = fl_ckpt_find(&ck, CK_CFG), *s = fl_ckpt_find(&ck, CK_STATE);
    if (!c || c->size != sizeof *cfg || !s || s->size != sizeof *st) {
        snprintf(err, errlen, "%s: checkpoint lacks a configuration of this version's layout", path);
        fl_ckpt_free(&ck);
        return -1;
    }
    memcpy(cfg, c->data, sizeof *cfg);
    memcpy(st, s->data, sizeof *st);
    fl_ckpt_free(&ck);
    return 0;
}

/* Restore everything from the checkpoint into the already-built model / recipe / optimizer. */
static int load_checkpoint(const char *dir, const fl_train_cfg *cfg, fl_train_state *st, fl_model *m,
                           float *am, float *av, fl_recipe *rec)
{
    char path[4096], err[4400];
    path_join(path, sizeof path, dir, "checkpoint.bin");
    fl_ckpt ck;
    if (fl_ckpt_read(&ck, path, err, sizeof err)) {
        fprintf(stderr, "fp8lab train: %s\n", err);
        return -1;
    }
    const fl_ckpt_section *sc = fl_ckpt_find(&ck, CK_CFG), *ss = fl_ckpt_find(&ck, CK_STATE),
                          *sp = fl_ckpt_find(&ck, CK_PARAMS), *sm = fl_ckpt_find(&ck, CK_ADAM_M),
                          *sv = fl_ckpt_find(&ck, CK_ADAM_V), *sr = fl_ckpt_find(&ck, CK_RECIPE);
    const size_t pb = m->nparams * sizeof(float);
    const char *why = NULL;
    if (!sc || !ss || !sp || !sm || !sv || !sr)
        why = "a section is missing";
    else if (sc->size != sizeof *cfg || memcmp(sc->data, cfg, sizeof *cfg))
        why = "its configuration does not match this run's";
    else if (ss->size != sizeof *st || sp->size != pb || sm->size != pb || sv->size != pb)
        why = "its tensors have the wrong sizes for this model";
    else
        why = fl_recipe_state_load(rec, sr->data, sr->size);
    if (why) {
        fprintf(stderr, "fp8lab train: %s: checkpoint refused: %s\n", path, why);
        fl_ckpt_free(&ck);
        return -1;
    }
    memcpy(st, ss->data, sizeof *st);
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

int fl_train_run(const fl_train_cfg *cfg_in, const fl_train_opts *opts)
{
    fl_train_cfg cfg = *cfg_in;
    const char *why = fl_train_cfg_check(&cfg);
    if (why) {
        fprintf(stderr, "fp8lab train: %s\n", why);
        return FL_EXIT_USAGE;
    }
    char path[4096], err[4400];
    if (mkdir(opts->dir, 0755) && errno != EEXIST) {
        fprintf(stderr, "fp8lab train: %s: cannot create the run folder: %s\n", opts->dir, strerror(errno));
        return FL_EXIT_FAIL;
    }
    /* data */
    fl_data data;
    if (cfg.data_kind == FL_DATA_TEXT) {
        if (fl_data_load_text(&data, cfg.data_path, (size_t)cfg.model.T + 2, err, sizeof err)) {
            fprintf(stderr, "fp8lab train: %s\n", err);
            return FL_EXIT_FAIL;
        }
    } else if (fl_data_synthetic_ex(&data, cfg.seed, (size_t)cfg.data_len,
                                    cfg.data_kind == FL_DATA_TRIGGERS ? cfg.trigger_rate : 0.0f, cfg.trigger_len)) {
        fprintf(stderr, "fp8lab train: out of memory generating the corpus\n");
        return FL_EXIT_FAIL;
    }
    if (opts->resume && cfg.data_hash != data.hash) {
        fprintf(stderr, "fp8lab train: %s: the data differs from the data this run was trained on (hash %016llx, now %016llx)\n",
                cfg.data_kind == FL_DATA_TEXT ? cfg.data_path : "synthetic corpus",
                (unsigned long long)cfg.data_hash, (unsigned long long)data.hash);
        fl_data_free(&data);
        return FL_EXIT_FAIL;
    }
    cfg.data_hash = data.hash;

    /* recipe and model */
    const int nsites = fl_model_nsites(&cfg.model);
    char *namestore = calloc((size_t)nsites, 40);
    const char **names = calloc((size_t)nsites, sizeof *names);
    uint32_t *roles = calloc((size_t)nsites, sizeof *roles);
    uint8_t *hp = calloc((size_t)nsites, 1);
    fl_recipe rec;
    fl_model m;
    memset(&m, 0, sizeof m);
    int rc = FL_EXIT_FAIL;
    float *am = NULL, *av = NULL;
    uint16_t *batch = NULL;
    FILE *fm = NULL, *ft = NULL;
    fl_model_site_names(&cfg.model, namestore, names, roles, hp);
    if (fl_recipe_init(&rec, &cfg.recipe, nsites, names, roles, hp)) {
        rc = FL_EXIT_USAGE;
        goto out_data;
    }
    if (fl_model_init(&m, &cfg.model, &rec, cfg.seed)) {
        fprintf(stderr, "fp8lab train: out of memory for the model\n");
        goto out;
    }
    am = calloc(m.nparams, sizeof *am);
    av = calloc(m.nparams, sizeof *av);
    batch = malloc((size_t)cfg.model.B * (cfg.model.T + 1) * sizeof *batch);
    if (!am || !av || !batch)
        goto out;

    fl_train_state st;
    memset(&st, 0, sizeof st);
    st.first_sat_step = st.first_down_sat_step = UINT64_MAX;
    st.threads = (uint32_t)(opts->threads > 0 ? opts->threads : omp_get_num_procs());
    if (opts->resume) {
        if (load_checkpoint(opts->dir, &cfg, &st, &m, am, av, &rec))
            goto out;
        if (opts->threads > 0)
            st.threads = (uint32_t)opts->threads;
    } else {
        path_join(path, sizeof path, opts->dir, "checkpoint.bin");
        unlink(path); /* a fresh run replaces what the folder held */
    }
    omp_set_num_threads((int)st.threads);
    openblas_set_num_threads((int)st.threads);

    /* files: config.json (atomic), metrics.csv and telemetry.jsonl (truncated to the checkpoint) */
    path_join(path, sizeof path, opts->dir, "config.json");
    if (write_text_atomic(path, cfg_json_cb, &cfg)) {
        fprintf(stderr, "fp8lab train: %s: cannot write\n", path);
        goto out;
    }
    char pm[4096], pt[4096];
    path_join(pm, sizeof pm, opts->dir, "metrics.csv");
    path_join(pt, sizeof pt, opts->dir, "telemetry.jsonl");
    if (opts->resume) {
        if (truncate(pm, (off_t)st.metrics_off) || truncate(pt, (off_t)st.tele_off)) {
            fprintf(stderr, "fp8lab train: %s: cannot truncate the run's logs to the checkpoint: %s\n", opts->dir, strerror(errno));
            goto out;
        }
        fm = fopen(pm, "a");
        ft = fopen(pt, "a");
    } else {
        fm = fopen(pm, "w");
        ft = fopen(pt, "w");
        if (fm)
            fl_tele_metrics_header(fm);
    }
    if (!fm || !ft) {
        fprintf(stderr, "fp8lab train: %s: cannot open the run's logs\n", opts->dir);
        goto out;
    }

    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    fl_train_stop_flag = 0;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);

    const int tty = !opts->quiet && isatty(2);
    const double t0 = now_s();
    double tlast = t0;
    const uint64_t step0 = st.step;
    fl_step_summary sum;
    int interrupted = 0;
    if (!opts->quiet)
        fprintf(stderr, "fp8lab train: %s %s, seed %llu, %llu steps%s, %u threads -> %s\n", fl_act_name(cfg.model.act),
                fl_recipe_name((fl_recipe_kind)cfg.recipe.kind), (unsigned long long)cfg.seed,
                (unsigned long long)cfg.steps, opts->resume ? " (resumed)" : "", st.threads, opts->dir);

    while (st.step < cfg.steps && !(st.diverged && cfg.stop_on_div)) {
        const uint64_t step = st.step;
        const int tele = step % cfg.log_every == 0 || step + 1 == cfg.steps;
        fl_data_batch(batch, &data, cfg.seed, step, cfg.model.B, cfg.model.T);
        fl_recipe_step_begin(&rec, tele);
        rec.hp_phase = step < cfg.recipe.fp8_start;
        fl_model_zero_grad(&m);
        const float loss = fl_model_forward(&m, batch);
        fl_model_backward(&m);

        /* global gradient norm (fixed order: tensor by tensor, elements in order, in double) */
        double gn2 = 0.0;
        for (size_t i = 0; i < m.nparams; i++)
            gn2 += (double)m.grads[i] * m.grads[i];
        const float gnorm = (float)sqrt(gn2);
        const float gscale = (cfg.clip > 0 && gnorm > cfg.clip) ? cfg.clip / gnorm : 1.0f;

        /* AdamW */
        const float lr = lr_at(&cfg, step);
        const double t = (double)(step + 1);
        const float bc1 = (float)(1.0 - pow(cfg.beta1, t)), bc2 = (float)(1.0 - pow(cfg.beta2, t));
        for (int k = 0; k < FL_P_COUNT; k++) {
            float *p = m.p[k], *g = m.g[k], *mk = am + (p - m.params), *vk = av + (p - m.params);
            const float wd = decays(k) ? cfg.wd : 0.0f;
            const size_t n = m.sizes[k];
            const float b1 = cfg.beta1, b2 = cfg.beta2, eps = cfg.adam_eps;
#pragma omp parallel for schedule(static)
            for (size_t i0 = 0; i0 < n; i0 += ADAM_BLOCK) { /* the update in blocks, around sqrt_block */
                const size_t nb = n - i0 < ADAM_BLOCK ? n - i0 : ADAM_BLOCK;
                float mh[ADAM_BLOCK], sv[ADAM_BLOCK];
                for (size_t j = 0; j < nb; j++) {
                    const size_t i = i0 + j;
                    const float gi = g[i] * gscale;
                    mk[i] = b1 * mk[i] + (1.0f - b1) * gi;
                    vk[i] = b2 * vk[i] + (1.0f - b2) * gi * gi;
                    mh[j] = mk[i] / bc1;
                    sv[j] = vk[i] / bc2;
                }
                sqrt_block(sv, nb);
                for (size_t j = 0; j < nb; j++) {
                    const size_t i = i0 + j;
                    p[i] -= lr * (mh[j] / (sv[j] + eps) + wd * p[i]);
                }
            }
            if (cfg.recipe.fp8_adam && n) {
                moment_cast(mk, n, FL_FMT_E4M3, &st.adam_sat, &st.adam_ftz);
                moment_cast(vk, n, FL_FMT_E5M2, &st.adam_sat, &st.adam_ftz);
            }
        }
        fl_recipe_step_end(&rec);

        /* telemetry */
        fl_tele_summarize(&sum, &m);
        st.ema = step == 0 ? loss : (1.0 - cfg.div_ema) * st.ema + cfg.div_ema * loss;
        fl_tele_metrics_row(fm, step, loss, st.ema, lr, gnorm, &sum);
        if (tele)
            fl_tele_jsonl(ft, step, loss, &m);
        st.last_loss = loss;
        if (sum.act_amax > st.act_amax_max)
            st.act_amax_max = sum.act_amax;
        if (sum.ffn_in_amax > st.in_amax_max)
            st.in_amax_max = sum.ffn_in_amax;
        if (step == 0)
            st.align_start = sum.align.cos_p99;
        if (isfinite(loss)) /* a non-finite step leaves NaN weights behind: keep the last finite value */
            st.align_end = sum.align.cos_p99;
        st.sat_total += sum.sat;
        st.clip_total += sum.clip;
        st.nanout_total += sum.nan_out + sum.inf_out;
        st.ftz_total += sum.ftz;
        st.down_sat_total += sum.down_in_sat;
        if (sum.sat && st.first_sat_step == UINT64_MAX)
            st.first_sat_step = step;
        if (sum.down_in_sat && st.first_down_sat_step == UINT64_MAX)
            st.first_down_sat_step = step;

        /* divergence (train.h) */
        if (!st.diverged) {
            if (!isfinite(loss)) {
                st.diverged = 1;
                st.div_step = step;
                st.div_reason = 1;
            } else {
                if (step == 0 || st.ema < st.ema_min)
                    st.ema_min = st.ema;
                st.above = st.ema > st.ema_min + cfg.div_margin ? st.above + 1 : 0;
                if (st.above >= cfg.div_window) {
                    st.diverged = 1;
                    st.div_step = step + 1 - cfg.div_window;
                    st.div_reason = 2;
                }
            }
        }
        st.step = step + 1;

        const int last = st.step == cfg.steps || (st.diverged && cfg.stop_on_div);
        if (fl_train_stop_flag || last || st.step % cfg.ckpt_every == 0) {
            fflush(fm);
            fflush(ft);
            st.metrics_off = (uint64_t)ftell(fm);
            st.tele_off = (uint64_t)ftell(ft);
            if (save_checkpoint(opts->dir, &cfg, &st, &m, am, av, &rec))
                goto out_sig;
            if (fl_train_stop_flag) {
                interrupted = 1;
                break;
            }
        }
        const double tn = now_s();
        if (tty && (tn - tlast > 0.25 || last)) {
            progress(st.step, cfg.steps, loss, (double)(st.step - step0) / (tn - t0), last);
            tlast = tn;
        }
    }
    const double secs = now_s() - t0;
    const uint64_t ran = st.step - step0;
    summary_arg sa_ = { &cfg, &st, secs > 0 ? (double)ran / secs : 0.0, ran };
    path_join(path, sizeof path, opts->dir, "summary.json");
    if (write_text_atomic(path, summary_cb, &sa_))
        fprintf(stderr, "fp8lab train: %s: cannot write\n", path);
    if (interrupted) {
        fprintf(stderr, "\nfp8lab train: interrupted at step %llu; checkpoint written; continue with: fp8lab train --resume %s\n",
                (unsigned long long)st.step, opts->dir);
        rc = FL_EXIT_FAIL;
    } else {
        if (!opts->quiet) {
            fprintf(stderr, "fp8lab train: %s %s: %llu steps in %.1f s (%.2f steps/s), final loss %.4f%s\n",
                    fl_act_name(cfg.model.act), fl_recipe_name((fl_recipe_kind)cfg.recipe.kind),
                    (unsigned long long)ran, secs, sa_.steps_per_s, st.last_loss,
                    st.diverged ? (st.div_reason == 1 ? ", DIVERGED (non-finite loss)" : ", DIVERGED (loss above running minimum)") : "");
        }
        rc = FL_EXIT_OK;
    }
out_sig:
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
out:
    if (fm)
        fclose(fm);
    if (ft)
        fclose(ft);
    free(am);
    free(av);
    free(batch);
    fl_model_free(&m);
    fl_recipe_free(&rec);
out_data:
    free(namestore);
    free(names);
    free(roles);
    free(hp);
    fl_data_free(&data);
    return rc;
}
