/* gstep.c — the GPU training step over a table of device operations (gstep.h).  Each function names the
   harness function (model.c) whose order of operations it follows. */
#include "gstep.h"

#include "optim.h" /* fl_lr_at, fl_param_decays */
#include "recipe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TRY(call)                                                                                          \
    do {                                                                                                   \
        if (call)                                                                                          \
            return -1;                                                                                     \
    } while (0)

/* The profile's clock (gstep.h, fl_gstep_prof): NaN when off (or the drain failed), else the time after
   draining the device. */
static double prof_begin(const fl_gstep *s)
{
    if (!s->prof || s->ops->sync(s->ctx))
        return NAN; /* (a failed drain: nothing is added) */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void prof_end(const fl_gstep *s, fl_gstep_part k, double t0)
{
    if (!s->prof || isnan(t0))
        return;
    const double t1 = prof_begin(s);
    if (isnan(t1))
        return;
    s->prof->secs[k] += t1 - t0;
    s->prof->calls[k]++;
}

/* FP8LAB_GSTEP_TRACE=1 (s->trace): each operation's source line on stderr before it runs, and the device
   drained after it, so that the last line printed names the operation that failed or never returned. */
static int trace_after(const fl_gstep *s, int line)
{
    if (s->ops->sync(s->ctx)) {
        fprintf(stderr, "gstep trace: line %d: the device failed while draining after it\n", line);
        return -1;
    }
    return 0;
}

/* call (an operation returning 0 or -1) in part k of the profile. */
#define OP(k, call)                                                                                        \
    do {                                                                                                   \
        if (s->trace)                                                                                      \
            fprintf(stderr, "gstep trace: line %d: %s\n", __LINE__, #call);                                \
        const double t0_ = prof_begin(s);                                                                  \
        if (call)                                                                                          \
            return -1;                                                                                     \
        if (s->trace && trace_after(s, __LINE__))                                                          \
            return -1;                                                                                     \
        prof_end(s, (k), t0_);                                                                             \
    } while (0)

static size_t gdim(const fl_gstep *s) { return fl_act_gated(s->cfg.act) ? 2u : 1u; }
static size_t ntok(const fl_gstep *s) { return (size_t)s->cfg.B * s->cfg.T; }

static void *dalloc(fl_gstep *s, size_t bytes, int *fail)
{
    void *p = s->ops->alloc(s->ctx, bytes ? bytes : 1);
    if (!p)
        *fail = 1;
    s->bytes += bytes;
    return p;
}

/* Element i of a GEMM operand of format f. */
static const void *at(const void *base, fl_format f, size_t i)
{
    return f == FL_FMT_BF16 ? (const void *)((const uint16_t *)base + i) : (const void *)((const float *)base + i);
}

static int gemm(fl_gstep *s, fl_gstep_part k, int ta, int tb, size_t M, size_t N, size_t K, const void *A, fl_format af, size_t lda,
                size_t sa, const void *B, fl_format bf, size_t ldb, size_t sb, float beta, float *C, size_t ldc,
                size_t sc, size_t batch)
{
    const fl_gstep_gemm g = { ta, tb, M, N, K, A, af, lda, sa, B, bf, ldb, sb, beta, C, ldc, sc, batch };
    OP(k, s->ops->gemm(s->ctx, &g));
    return 0;
}

/* The largest Linear's input width (K), output width (M: qkv, the FFN's planes, the head) and weight (M K):
   the sizes of the buffers one Linear at a time uses. */
static void lin_maxima(const fl_gstep *s, size_t *kmax, size_t *gmax, size_t *wmax)
{
    const size_t C = s->cfg.C, F = s->cfg.F, V = s->cfg.V, G = gdim(s);
    *kmax = C > F ? C : F;
    *gmax = 3 * C > G * F ? 3 * C : G * F;
    *gmax = *gmax > V ? *gmax : V;
    *wmax = 3 * C * C > G * F * C ? 3 * C * C : G * F * C;
    *wmax = *wmax > V * C ? *wmax : V * C;
}

/* The bf16 operand copies of the Linears' inputs and output gradients (under the bf16 recipe), and of a
   weight (wbq, for the exact FP8 values under power-of-two scales). */
static void alloc_bf16_operands(fl_gstep *s, int with_w, int *fail)
{
    const size_t N = ntok(s);
    size_t kmax, gmax, wmax;
    lin_maxima(s, &kmax, &gmax, &wmax);
    s->xq = dalloc(s, N * kmax * sizeof(uint16_t), fail);
    s->gq = dalloc(s, N * gmax * sizeof(uint16_t), fail);
    if (with_w)
        s->wbq = dalloc(s, wmax * sizeof(uint16_t), fail);
}

int fl_gstep_init(fl_gstep *s, const fl_gstep_ops *ops, void *ctx, const fl_model_cfg *mc, int recipe)
{
    memset(s, 0, sizeof *s);
    s->ops = ops;
    s->ctx = ctx;
    s->cfg = *mc;
    s->fp8 = fl_recipe_dev_fp8((fl_recipe_kind)recipe);
    if (recipe != FL_RECIPE_FP32 && recipe != FL_RECIPE_BF16 && !s->fp8) {
        fprintf(stderr, "fp8lab: the GPU step runs the fp32, bf16, fp8-delayed, fp8-current and paper-gaudi2 recipes, "
                        "not %s (yet)\n",
                fl_recipe_name((fl_recipe_kind)recipe));
        return -1;
    }
    s->bf16 = recipe == FL_RECIPE_BF16;

    const fl_model_cfg *c = &s->cfg;
    const size_t V = c->V, C = c->C, L = c->L, F = c->F, T = c->T, B = c->B, H = c->H, G = gdim(s), N = B * T;
    s->nparams = fl_model_param_sizes(c, s->sizes);
    for (int k = 0; k < FL_P_COUNT; k++) {
        s->off[k] = s->ntot;
        s->ntot += (s->sizes[k] + FL_GSTEP_ALIGN - 1) / FL_GSTEP_ALIGN * FL_GSTEP_ALIGN;
    }
    int fail = 0;
    const size_t P4 = s->ntot * sizeof(float);
    s->params = dalloc(s, P4, &fail);
    s->grads = dalloc(s, P4, &fail);
    s->am = dalloc(s, P4, &fail);
    s->av = dalloc(s, P4, &fail);
    if (s->bf16) /* the bf16 recipe's copies: the weights, a GEMM input, an output gradient */
        s->wq = dalloc(s, s->ntot * sizeof(uint16_t), &fail);
    s->tok = dalloc(s, N * sizeof(int), &fail);
    s->tgt = dalloc(s, N * sizeof(int), &fail);
    s->etoks = dalloc(s, N * sizeof(int), &fail);
    s->estarts = dalloc(s, (N + 1) * sizeof(int), &fail);
    s->erows = dalloc(s, N * sizeof(int), &fail);
    const size_t f4 = sizeof(float);
    s->resid = dalloc(s, (L + 1) * N * C * f4, &fail);
    s->r2 = dalloc(s, L * N * C * f4, &fail);
    s->ln1 = dalloc(s, L * N * C * f4, &fail);
    s->rstd1 = dalloc(s, L * N * f4, &fail);
    s->qkv = dalloc(s, L * N * 3 * C * f4, &fail);
    s->att = dalloc(s, L * B * H * T * T * f4, &fail);
    s->atty = dalloc(s, L * N * C * f4, &fail);
    s->ln2 = dalloc(s, L * N * C * f4, &fail);
    s->rstd2 = dalloc(s, L * N * f4, &fail);
    s->pre = dalloc(s, L * G * N * F * f4, &fail);
    s->h = dalloc(s, L * N * F * f4, &fail);
    s->lnf = dalloc(s, N * C * f4, &fail);
    s->rstdf = dalloc(s, N * f4, &fail);
    s->logits = dalloc(s, N * V * f4, &fail);
    s->tokloss = dalloc(s, N * sizeof(double), &fail);
    s->dres = dalloc(s, N * C * f4, &fail);
    s->dln = dalloc(s, N * C * f4, &fail);
    s->datty = dalloc(s, N * C * f4, &fail);
    s->dqkv = dalloc(s, N * 3 * C * f4, &fail);
    s->dpre = dalloc(s, G * N * F * f4, &fail);
    s->dh = dalloc(s, N * F * f4, &fail);
    s->dp = dalloc(s, B * H * T * T * f4, &fail);
    s->ds = dalloc(s, B * H * T * T * f4, &fail);
    float **heads[] = { &s->hq, &s->hk, &s->hv, &s->ho, &s->hdq, &s->hdk, &s->hdv };
    for (size_t i = 0; i < sizeof heads / sizeof heads[0]; i++)
        *heads[i] = dalloc(s, N * C * f4, &fail);
    size_t kmax, gmax, wmax;
    lin_maxima(s, &kmax, &gmax, &wmax);
    if (s->bf16)
        alloc_bf16_operands(s, 0, &fail);
    if (s->fp8) {
        s->xf = dalloc(s, N * kmax * f4, &fail);
        s->wf = dalloc(s, wmax * f4, &fail);
        s->gf = dalloc(s, N * gmax * f4, &fail);
        if (fl_act_smooth_axis(mc->act) >= 0) { /* per channel (F) or per token (N) */
            s->sm_s = dalloc(s, (N > F ? N : F) * f4, &fail);
            s->sm_si = dalloc(s, (N > F ? N : F) * f4, &fail);
        }
    }
    s->htok = calloc(N, sizeof(int));
    s->htgt = calloc(N, sizeof(int));
    s->wsums[0] = calloc(3 * (size_t)L * F, sizeof(double));
    s->wsums[1] = calloc(3 * (size_t)L * F, sizeof(double));
    s->hetoks = calloc(N, sizeof(int));
    s->hestarts = calloc(N + 1, sizeof(int));
    s->herows = calloc(N, sizeof(int));
    s->htokloss = calloc(N, sizeof(double));
    if (fail || !s->htok || !s->htgt || !s->hetoks || !s->hestarts || !s->herows || !s->htokloss || !s->wsums[0] ||
        !s->wsums[1]) {
        fprintf(stderr, "fp8lab: the GPU step's tensors, %.2f GiB, do not fit in the memory of %s: fewer sequences per "
                        "micro-batch (--batch) with more --accum, or a smaller model\n",
                (double)s->bytes / 1073741824.0, ops->name);
        fl_gstep_free(s);
        return -1;
    }
    for (int k = 0; k < FL_P_COUNT; k++) {
        s->p[k] = s->params + s->off[k];
        s->g[k] = s->grads + s->off[k];
    }
    return 0;
}

/* Tensor k of a host array in model.h's packed layout (host: the array's start) to or from a device array at
   the step's offsets. */
static int one_tensor(const fl_gstep *s, int k, float *dev, const float *host_in, float *host_out)
{
    size_t h = 0;
    for (int j = 0; j < k; j++)
        h += s->sizes[j];
    const size_t b = s->sizes[k] * sizeof(float);
    return host_in ? s->ops->put(s->ctx, dev + s->off[k], host_in + h, b)
                   : s->ops->get(s->ctx, host_out + h, dev + s->off[k], b);
}

/* Each tensor of a host array to or from a device array (one_tensor). */
static int per_tensor(const fl_gstep *s, float *dev, const float *host_in, float *host_out)
{
    for (int k = 0; k < FL_P_COUNT; k++)
        TRY(one_tensor(s, k, dev, host_in, host_out));
    return 0;
}

/* The FFN weight sums of the parameters as they are now into wsums[wcur ^ 1], which becomes wsums[wcur]. */
static int weight_sums(fl_gstep *s)
{
    const fl_model_cfg *c = &s->cfg;
    s->wcur ^= 1;
    OP(FL_GP_STATS, s->ops->ffn_wsums(s->ctx, s->wsums[s->wcur], s->p[FL_P_WFC], c->L, c->F, c->C, fl_act_gated(c->act)));
    return 0;
}

const double *fl_gstep_wsums(const fl_gstep *s, int before) { return s->wsums[before ? !s->wcur : s->wcur]; }

int fl_gstep_upload(fl_gstep *s, const float *params, const float *am, const float *av)
{
    TRY(per_tensor(s, s->params, params, NULL));
    if (am)
        TRY(per_tensor(s, s->am, am, NULL));
    if (av)
        TRY(per_tensor(s, s->av, av, NULL));
    return weight_sums(s);
}

void fl_gstep_free(fl_gstep *s)
{
    if (!s->ops)
        return;
    void *dev[] = { s->params, s->grads, s->am, s->av, s->wq, s->tok, s->tgt, s->etoks, s->estarts, s->erows,
                    s->resid, s->r2, s->ln1, s->rstd1, s->qkv, s->att, s->atty, s->ln2, s->rstd2, s->pre, s->h,
                    s->lnf, s->rstdf, s->logits, s->tokloss, s->dres, s->dln, s->datty, s->dqkv, s->dpre, s->dh,
                    s->dp, s->ds, s->xq, s->gq, s->xf, s->wf, s->gf, s->sm_s, s->sm_si, s->x8, s->xt8, s->w8,
                    s->wt8, s->g8, s->gt8, s->mq, s->wbq, s->hq, s->hk, s->hv, s->ho, s->hdq, s->hdk, s->hdv };
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (dev[i])
            s->ops->release(s->ctx, dev[i]);
    free(s->htok);
    free(s->htgt);
    free(s->hetoks);
    free(s->hestarts);
    free(s->herows);
    free(s->htokloss);
    free(s->wsums[0]);
    free(s->wsums[1]);
    memset(s, 0, sizeof *s);
}

int fl_gstep_params(const fl_gstep *s, float *out)
{
    OP(FL_GP_PARAMS, per_tensor(s, s->params, NULL, out));
    return 0;
}

int fl_gstep_grads(const fl_gstep *s, float *out) { return per_tensor(s, s->grads, NULL, out); }

int fl_gstep_get_moments(const fl_gstep *s, float *am, float *av)
{
    return per_tensor(s, s->am, NULL, am) || per_tensor(s, s->av, NULL, av) ? -1 : 0;
}

/* ---- Linear ------------------------------------------------------------------------------------------ */

/* The operand of a GEMM: x itself (fp32), or its bf16 copy into q (the bf16 recipe). */
static int operand(fl_gstep *s, const void **op, fl_format *f, uint16_t *q, const float *x, size_t n)
{
    *op = x;
    *f = FL_FMT_FP32;
    if (!s->bf16)
        return 0;
    OP(FL_GP_CAST, s->ops->to_bf16(s->ctx, q, x, n));
    *op = q;
    *f = FL_FMT_BF16;
    return 0;
}

/* The weight W (a pointer into the parameters) as the GEMMs read it: itself, or its bf16 copy. */
static const void *weight(const fl_gstep *s, const float *W)
{
    return s->bf16 ? (const void *)(s->wq + (W - s->params)) : (const void *)W; /* the same offsets */
}

int fl_gstep_set_recipe(fl_gstep *s, fl_recipe *rec)
{
    const char *why = fl_recipe_dev_check(rec);
    if (why) {
        fprintf(stderr, "fp8lab: the GPU step: %s\n", why);
        return -1;
    }
    s->rec = rec;
    if (s->fp8 && rec->cfg.pow2 && !s->bfq_off && !s->bfq) { /* bf16 copies of the exact FP8 values */
        int fail = 0;
        alloc_bf16_operands(s, 1, &fail);
        if (fail) {
            fprintf(stderr, "fp8lab: the GPU step: no memory for the bf16 copies of the FP8 values (%.2f GiB in all)\n",
                    (double)s->bytes / 1073741824.0);
            return -1;
        }
        s->bfq = 1;
    }
    return 0;
}

/* Whether the values of a cast with format and rounding *cf and inverse scale si (decode(code) * si, and
   no smoothing) are all exact in bf16: bf16 itself unscaled (the bf16 start), or an FP8 format with a
   power-of-two si under which the format's smallest step stays at or above bf16's (2^-133) and its largest
   value below bf16's.  An FP8 value has at most 4 significant bits, bf16 8. */
static int bf16_exact(const fl_cast_fmt *cf, float si)
{
    if (cf->fmt == FL_FMT_BF16)
        return si == 1.0f;
    if (cf->fmt != FL_FMT_E4M3 && cf->fmt != FL_FMT_E5M2)
        return 0;
    const uint32_t b = fl_f32_bits(si), e = (b >> 23) & 0xFFu;
    if ((b & 0x807FFFFFu) || e == 0 || e == 0xFFu) /* a positive normal power of two */
        return 0;
    static const fl_format_desc g2 = FL_DESC_E4M3_GAUDI2;
    const fl_format_desc *d = cf->gaudi2 ? &g2 : fl_format_get(cf->fmt);
    const int p = (int)e - 127, step = 1 - d->bias - d->mbits; /* si = 2^p; the format's smallest step 2^step */
    return step + p >= -133 && (double)fl_cast_fmax(cf) * ldexp(1.0, p) <= 0x1.fep127;
}

/* The clip mass of site si's cast of x (n elements, scale sc, *cf, smoothing sm) that saturated: x and the
   smoothing's scales copied to the host and the harness's pass over them (fl_recipe_dev_clip_mass), so the
   figure is the harness's for the same tensor.  Only casts that saturated pay for it. */
static int clip_mass_of(fl_gstep *s, int si, const float *x, size_t n, const fl_cast_smooth *sm, float sc, const fl_cast_fmt *cf)
{
    const double t0 = prof_begin(s);
    const size_t C = sm && sm->C ? sm->C : (n ? n : 1), R = n / C;
    float *hx = malloc((n ? n : 1) * sizeof *hx), *rs = NULL, *rsi = NULL, *cs = NULL, *csi = NULL;
    int fail = !hx || s->ops->get(s->ctx, hx, x, n * sizeof *hx);
    if (!fail && sm && sm->rs) {
        rs = malloc(2 * (R ? R : 1) * sizeof *rs);
        rsi = rs ? rs + R : NULL;
        fail = !rs || s->ops->get(s->ctx, rs, sm->rs, R * sizeof *rs) || s->ops->get(s->ctx, rsi, sm->rsi, R * sizeof *rsi);
    }
    if (!fail && sm && sm->cs) {
        cs = malloc(2 * C * sizeof *cs);
        csi = cs ? cs + C : NULL;
        fail = !cs || s->ops->get(s->ctx, cs, sm->cs, C * sizeof *cs) || s->ops->get(s->ctx, csi, sm->csi, C * sizeof *csi);
    }
    if (!fail) {
        const fl_cast_smooth_host hs = { rs, rsi, cs, csi };
        fl_recipe_dev_clip_mass(s->rec, si, hx, R, C, sc, cf, sm ? &hs : NULL);
    }
    free(hx);
    free(rs);
    free(cs);
    prof_end(s, FL_GP_HOST, t0);
    return fail ? -1 : 0;
}

/* The fake-quantised copy of x (n elements) at site si into y, as fl_recipe_cast's forward cast: the
   current scale from x's amax where the site needs it, the counts and amax into the site's statistics
   and its delayed history.  *op: y, or x itself where the site is fp32; the cast's parameters into
   *cf, *sc, *si_out, *q for a later recast. */
static int cast_site(fl_gstep *s, int si, float *y, const float *x, size_t n, const fl_cast_smooth *sm, float sm_amax,
                     const float **op, fl_cast_fmt *cf, float *sc, float *sinv, int *q, uint8_t *codes)
{
    fl_recipe *r = s->rec;
    const fl_site *st = &r->sites[si];
    *op = x;
    *q = st->fmt != FL_FMT_FP32;
    if (!*q)
        return 0;
    float amax = sm_amax; /* smoothed: the smoothed tensor's, from its scales */
    if (!sm && st->scaling == FL_SCALING_TENSOR && !(r->hp_phase && st->fmt != FL_FMT_BF16))
        OP(FL_GP_CAST, s->ops->amax_rms(s->ctx, &amax, NULL, x, 1, n));
    if (fl_recipe_dev_cast_begin(r, si, amax, cf, sc, sinv)) {
        fprintf(stderr, "fp8lab: the GPU step: site %s has no device cast\n", st->name);
        return -1;
    }
    fl_cast_counts k = { 0 };
    float am = 0.0f;
    if (codes) /* --fp8-gemm: the codes themselves (never smoothed) */
        OP(FL_GP_CAST, s->ops->cast8(s->ctx, codes, x, n, *sc, cf, 0, &k, &am));
    else
        OP(FL_GP_CAST, s->ops->cast_fq(s->ctx, y, x, n, *sc, *sinv, cf, 0, sm, &k, &am));
    if (fl_recipe_dev_cast_end(r, si, &k, am, n, *sc, cf, 1) && clip_mass_of(s, si, x, n, sm, *sc, cf))
        return -1;
    *op = y;
    return 0;
}

/* x cast again into y for the backward GEMMs (site si, whose forward cast gave q): with the parameters of
   its forward cast (the same values; nothing recorded), or its e5m2 copy (copy: paper-gaudi2; its counts
   into the site's, fl_recipe_dev_copy_end). */
static int recast(fl_gstep *s, int si, float *y, const float *x, size_t n, const fl_cast_fmt *cf, float sc, float sinv,
                  int q, int copy, const fl_cast_smooth *sm, const float **op, uint8_t *codes)
{
    *op = x;
    if (!q)
        return 0;
    fl_cast_counts k = { 0 };
    float am = 0.0f;
    if (codes)
        OP(FL_GP_CAST, s->ops->cast8(s->ctx, codes, x, n, sc, cf, 0, &k, &am));
    else
        OP(FL_GP_CAST, s->ops->cast_fq(s->ctx, y, x, n, sc, sinv, cf, 0, sm, &k, &am));
    if (copy)
        fl_recipe_dev_copy_end(s->rec, si, &k, n);
    *op = y;
    return 0;
}

/* Smooth-SwiGLU under an FP8 recipe (model.c passes its fl_smooth to the down projection's input cast):
   the smoothing of X (N, K) at Linear li into *sm and the smoothed tensor's amax into *amax; NULL where
   the Linear's input is not smoothed.  The backward computes it again from the same X: the same scales. */
static const fl_cast_smooth *smoothing(fl_gstep *s, int li, const float *X, size_t K, fl_cast_smooth *sm, float *amax,
                                       int *fail)
{
    const int axis = fl_act_smooth_axis(s->cfg.act);
    *fail = 0;
    if (!s->fp8 || axis < 0 || li % FL_LIN_COUNT != FL_LIN_DOWN) /* (the head, L FL_LIN_COUNT, is no down) */
        return NULL;
    const size_t N = ntok(s);
    const double t0 = prof_begin(s);
    if (s->ops->smooth(s->ctx, s->sm_s, s->sm_si, X, N, K, axis, amax)) {
        *fail = 1;
        return NULL;
    }
    prof_end(s, FL_GP_CAST, t0);
    const fl_cast_smooth m = { axis ? s->sm_s : NULL, axis ? s->sm_si : NULL, axis ? NULL : s->sm_s,
                               axis ? NULL : s->sm_si, K };
    *sm = m;
    return sm;
}

/* ---- --fp8-gemm: the Linears' GEMMs on the codes ---------------------------------------------------- */

/* Linear li multiplies codes: --fp8-gemm, past the bf16 start, X and W sites e4m3 and dY e5m2 (TE's formats;
   a --site override elsewhere keeps the fp32 GEMM), and N, K, M/P multiples of 16 (cuBLASLt's FP8 leading
   dimensions: the forward's K, dgrad's M/P, wgrad's N). */
static int fp8_gemm_ok(const fl_gstep *s, int li, size_t K, size_t Mp)
{
    if (!s->fp8_gemm || s->rec->hp_phase)
        return 0;
    const fl_site *st = s->rec->sites;
    const fl_site *x = &st[fl_lin_site(li, FL_ROLE_IN)], *w = &st[fl_lin_site(li, FL_ROLE_W)],
                  *g = &st[fl_lin_site(li, FL_ROLE_GOUT)];
    return x->fmt == FL_FMT_E4M3 && w->fmt == FL_FMT_E4M3 && g->fmt == FL_FMT_E5M2 && !x->gaudi2 && !w->gaudi2 &&
           ntok(s) % 16 == 0 && K % 16 == 0 && Mp % 16 == 0;
}

/* D (m, n) column-major, ldd = (alpha as bs) A^T B + beta D, A (k, m) and B (k, n) column-major codes
   (gemm_fp8.h), fp32 D. */
static int gemm8(fl_gstep *s, size_t m, size_t n, size_t k, fl_format af, const uint8_t *a, size_t lda, float as,
                 fl_format bf, const uint8_t *b, size_t ldb, float bs, float *d, size_t ldd, float beta)
{
    fl_gemm_fp8 g;
    memset(&g, 0, sizeof g);
    g.m = m, g.n = n, g.k = k;
    g.a_fmt = af, g.a = a, g.lda = lda;
    g.b_fmt = bf, g.b = b, g.ldb = ldb;
    g.d_fmt = FL_FMT_FP32, g.d = d, g.ldd = ldd;
    g.c = beta != 0.0f ? d : NULL, g.ldc = ldd;
    g.alpha = 1.0f, g.beta = beta;
    g.a_scale = &as, g.b_scale = &bs;
    OP(FL_GP_LIN_GEMM, s->ops->gemm8(s->ctx, &g));
    return 0;
}

/* The backward GEMMs on the codes (s->x8, w8, g8 hold X's, W's and dY's: lin_bwd):
   dX^T (K, N) (+)= W_p^T's codes (K, Mp) as A (Mp, K) . dY_p's (N, Mp) as B (Mp, N), planes added in order;
   dW_p^T (K, Mp) += X^T's codes (K, N) as A (N, K) . dY_p^T's (Mp, N) as B (N, Mp). */
static int lin_bwd8(fl_gstep *s, const fl_gstep_lin *q, float *dX, float *dW, fl_format gfmt, float gsi, size_t K, size_t Mp,
                    size_t P)
{
    const size_t N = ntok(s);
    OP(FL_GP_CAST, s->ops->tr8(s->ctx, s->xt8, s->x8, N, K));
    for (size_t p = 0; p < P; p++) {
        OP(FL_GP_CAST, s->ops->tr8(s->ctx, s->wt8, s->w8 + p * Mp * K, Mp, K));
        OP(FL_GP_CAST, s->ops->tr8(s->ctx, s->gt8, s->g8 + p * N * Mp, N, Mp));
        TRY(gemm8(s, K, N, Mp, q->wf.fmt, s->wt8, Mp, q->wsi, gfmt, s->g8 + p * N * Mp, Mp, gsi, dX, K, p ? 1.0f : 0.0f));
        TRY(gemm8(s, K, Mp, N, q->xf.fmt, s->xt8, N, q->xsi, gfmt, s->gt8, N, gsi, dW + p * Mp * K, K, 1.0f));
    }
    return 0;
}

int fl_gstep_set_fp8_gemm(fl_gstep *s)
{
    if (!s->fp8 || !s->rec || (s->rec->cfg.kind != FL_RECIPE_FP8_DELAYED && s->rec->cfg.kind != FL_RECIPE_FP8_CURRENT)) {
        fprintf(stderr, "fp8lab: the GPU step: --fp8-gemm needs fp8-delayed or fp8-current\n");
        return -1;
    }
    const size_t N = ntok(s);
    size_t kmax, gmax, wmax;
    lin_maxima(s, &kmax, &gmax, &wmax);
    int fail = 0;
    s->x8 = dalloc(s, N * kmax, &fail);
    s->xt8 = dalloc(s, N * kmax, &fail);
    s->w8 = dalloc(s, wmax, &fail);
    s->wt8 = dalloc(s, wmax, &fail);
    s->g8 = dalloc(s, N * gmax, &fail);
    s->gt8 = dalloc(s, N * gmax, &fail);
    if (fail) {
        fprintf(stderr, "fp8lab: the GPU step: no device memory for --fp8-gemm's codes (%.2f GiB in all)\n",
                (double)s->bytes / 1073741824.0);
        return -1;
    }
    s->fp8_gemm = 1;
    return 0;
}

/* Y (P, N, M/P) = X (N, K) . W (M, K)^T in P planes (model.c, lin_forward); li: the Linear's index
   (l FL_LIN_COUNT + lin, the head L FL_LIN_COUNT), whose sites are li * 3 + role. */
static int lin_fwd(fl_gstep *s, int li, float *Y, const float *X, const float *W, size_t K, size_t M, size_t P)
{
    const size_t N = ntok(s), Mp = M / P;
    const void *x, *w = weight(s, W);
    fl_format xf, wf = s->bf16 ? FL_FMT_BF16 : FL_FMT_FP32;
    if (s->fp8) {
        fl_gstep_lin *q = &s->lin[li];
        const float *xo, *wo;
        fl_cast_smooth smb;
        float sam = 0.0f;
        int fail;
        const fl_cast_smooth *sm = smoothing(s, li, X, K, &smb, &sam, &fail);
        if (fail)
            return -1;
        q->g8 = !sm && fp8_gemm_ok(s, li, K, Mp);
        TRY(cast_site(s, fl_lin_site(li, FL_ROLE_IN), s->xf, X, N * K, sm, sam, &xo, &q->xf, &q->xs, &q->xsi, &q->xq,
                      q->g8 ? s->x8 : NULL));
        TRY(cast_site(s, fl_lin_site(li, FL_ROLE_W), s->wf, W, M * K, NULL, 0.0f, &wo, &q->wf, &q->ws, &q->wsi, &q->wq,
                      q->g8 ? s->w8 : NULL));
        q->xc = q->xq && !fl_recipe_dev_copy_begin(s->rec, fl_lin_site(li, FL_ROLE_IN), &q->xcf, &q->xcs, &q->xcsi);
        q->wc = q->wq && !fl_recipe_dev_copy_begin(s->rec, fl_lin_site(li, FL_ROLE_W), &q->wcf, &q->wcs, &q->wcsi);
        if (q->g8) { /* Y_p^T (Mp, N) = W_p (Mp, K) X^T: A = W_p's codes, B = X's, both K-contiguous */
            for (size_t p = 0; p < P; p++)
                TRY(gemm8(s, Mp, N, K, q->wf.fmt, s->w8 + p * Mp * K, K, q->wsi, q->xf.fmt, s->x8, K, q->xsi, Y + p * N * Mp,
                          Mp, 0.0f));
            return 0;
        }
        x = xo, w = wo, xf = FL_FMT_FP32;
        if (s->bfq && !sm && q->xq && q->wq && bf16_exact(&q->xf, q->xsi) && bf16_exact(&q->wf, q->wsi)) {
            OP(FL_GP_CAST, s->ops->to_bf16(s->ctx, s->xq, xo, N * K));
            OP(FL_GP_CAST, s->ops->to_bf16(s->ctx, s->wbq, wo, M * K));
            x = s->xq, w = s->wbq, xf = wf = FL_FMT_BF16;
        }
    } else {
        TRY(operand(s, &x, &xf, s->xq, X, N * K));
    }
    for (size_t p = 0; p < P; p++)
        TRY(gemm(s, FL_GP_LIN_GEMM, 0, 1, N, Mp, K, x, xf, K, 0, at(w, wf, p * Mp * K), wf, K, 0, 0.0f, Y + p * N * Mp, Mp,
                 0, 1));
    return 0;
}

/* The backward GEMMs of a Linear: dX (N, K) = sum_p dY_p . W_p, planes added in order, with dY as ga (format
   gaf); dW_p (Mp, K) += dY_p^T . X with dY as gb (gbf): the same values in either format. */
static int lin_bwd_gemms(fl_gstep *s, float *dX, float *dW, const void *ga, fl_format gaf, const void *gb, fl_format gbf,
                         const void *w, fl_format wf, const void *x, fl_format xf, size_t K, size_t Mp, size_t P)
{
    const size_t N = ntok(s);
    for (size_t p = 0; p < P; p++) {
        TRY(gemm(s, FL_GP_LIN_GEMM, 0, 0, N, K, Mp, at(ga, gaf, p * N * Mp), gaf, Mp, 0, at(w, wf, p * Mp * K), wf, K, 0,
                 p ? 1.0f : 0.0f, dX, K, 0, 1));
        TRY(gemm(s, FL_GP_LIN_GEMM, 1, 0, Mp, K, N, at(gb, gbf, p * N * Mp), gbf, Mp, 0, x, xf, K, 0, 1.0f, dW + p * Mp * K,
                 K, 0, 1));
    }
    return 0;
}

/* dX (N, K) = sum_p dY_p . W_p (overwritten), dW_p (M/P, K) += dY_p^T . X, dY (P, N, M/P) (model.c,
   lin_backward).  X (and under FP8 W) is cast again where the forward cast it: the same values. */
static int lin_bwd(fl_gstep *s, int li, float *dX, float *dW, const float *dY, const float *X, const float *W,
                   size_t K, size_t M, size_t P)
{
    const size_t N = ntok(s), Mp = M / P;
    const void *g, *x, *w = weight(s, W);
    fl_format gf, xf, wf = s->bf16 ? FL_FMT_BF16 : FL_FMT_FP32;
    if (s->fp8) {
        const fl_gstep_lin *q = &s->lin[li];
        const float *go, *xo, *wo;
        fl_cast_fmt cf;
        float sc, sinv;
        int gq;
        TRY(cast_site(s, fl_lin_site(li, FL_ROLE_GOUT), s->gf, dY, P * N * Mp, NULL, 0.0f, &go, &cf, &sc, &sinv, &gq,
                      q->g8 ? s->g8 : NULL));
        fl_cast_smooth smb;
        float sam;
        int fail;
        const fl_cast_smooth *sm = q->xq ? smoothing(s, li, X, K, &smb, &sam, &fail) : NULL;
        if (q->xq && fail)
            return -1;
        const int xs = fl_lin_site(li, FL_ROLE_IN), ws = fl_lin_site(li, FL_ROLE_W);
        TRY(q->xc ? recast(s, xs, s->xf, X, N * K, &q->xcf, q->xcs, q->xcsi, 1, 1, sm, &xo, NULL)
                  : recast(s, xs, s->xf, X, N * K, &q->xf, q->xs, q->xsi, q->xq, 0, sm, &xo, q->g8 ? s->x8 : NULL));
        TRY(q->wc ? recast(s, ws, s->wf, W, M * K, &q->wcf, q->wcs, q->wcsi, 1, 1, NULL, &wo, NULL)
                  : recast(s, ws, s->wf, W, M * K, &q->wf, q->ws, q->wsi, q->wq, 0, NULL, &wo, q->g8 ? s->w8 : NULL));
        if (q->g8)
            return lin_bwd8(s, q, dX, dW, cf.fmt, sinv, K, Mp, P);
        g = go, x = xo, w = wo, gf = xf = FL_FMT_FP32;
        if (s->bfq && gq && bf16_exact(&cf, sinv)) { /* per GEMM: dX reads dY and W, dW reads dY and X */
            const int xe = !sm && (q->xc ? bf16_exact(&q->xcf, q->xcsi) : q->xq && bf16_exact(&q->xf, q->xsi));
            const int we = q->wc ? bf16_exact(&q->wcf, q->wcsi) : q->wq && bf16_exact(&q->wf, q->wsi);
            if (xe || we)
                OP(FL_GP_CAST, s->ops->to_bf16(s->ctx, s->gq, go, P * N * Mp));
            if (we) {
                OP(FL_GP_CAST, s->ops->to_bf16(s->ctx, s->wbq, wo, M * K));
                w = s->wbq, wf = FL_FMT_BF16;
            }
            if (xe) {
                OP(FL_GP_CAST, s->ops->to_bf16(s->ctx, s->xq, xo, N * K));
                x = s->xq, xf = FL_FMT_BF16;
            }
            /* dY as each GEMM reads it: in bf16 where its other operand is */
            const void *g_dx = we ? (const void *)s->gq : go, *g_dw = xe ? (const void *)s->gq : go;
            const fl_format gf_dx = we ? FL_FMT_BF16 : FL_FMT_FP32, gf_dw = xe ? FL_FMT_BF16 : FL_FMT_FP32;
            return lin_bwd_gemms(s, dX, dW, g_dx, gf_dx, g_dw, gf_dw, w, wf, x, xf, K, Mp, P);
        }
    } else {
        TRY(operand(s, &g, &gf, s->gq, dY, P * N * Mp));
        TRY(operand(s, &x, &xf, s->xq, X, N * K));
    }
    return lin_bwd_gemms(s, dX, dW, g, gf, g, gf, w, wf, x, xf, K, Mp, P);
}

/* ---- attention: the B H heads as one batch of GEMMs ------------------------------------------------------- */

/* Q, K and V of qkv (N, 3 C) as per-head matrices (B H, T, hs) into s->hq, hk, hv. */
static int heads_of_qkv(fl_gstep *s, const float *qkv)
{
    const size_t B = s->cfg.B, T = s->cfg.T, C = s->cfg.C, H = s->cfg.H, hs = C / H;
    float *const dst[3] = { s->hq, s->hk, s->hv };
    for (int k = 0; k < 3; k++)
        OP(FL_GP_HEADS, s->ops->heads(s->ctx, dst[k], qkv + k * C, B, T, H, hs, 3 * C, 1));
    return 0;
}

/* out (N, C) and P (B, H, T, T) from qkv (N, 3 C): S = Q K^T, P = softmax(S / sqrt(hs)) causal, out = P V
   (model.c, attn_forward computes the same with its own loops; each element of a GEMM is one chain over
   k on the host, whatever the layout). */
static int attn_fwd(fl_gstep *s, float *out, float *P, const float *qkv)
{
    const size_t B = s->cfg.B, T = s->cfg.T, C = s->cfg.C, H = s->cfg.H, hs = C / H, TT = T * T, Th = T * hs;
    const fl_format f = FL_FMT_FP32;
    TRY(heads_of_qkv(s, qkv));
    TRY(gemm(s, FL_GP_ATT_GEMM, 0, 1, T, T, hs, s->hq, f, hs, Th, s->hk, f, hs, Th, 0.0f, s->ds, T, TT, B * H));
    OP(FL_GP_SOFTMAX, s->ops->softmax_fwd(s->ctx, P, s->ds, B * H * T, T, 1.0f / sqrtf((float)hs)));
    TRY(gemm(s, FL_GP_ATT_GEMM, 0, 0, T, hs, T, P, f, T, TT, s->hv, f, hs, Th, 0.0f, s->ho, hs, Th, B * H));
    OP(FL_GP_HEADS, s->ops->heads(s->ctx, out, s->ho, B, T, H, hs, C, 0));
    return 0;
}

/* dqkv (N, 3 C) from dout (N, C), P and qkv: dP = dO V^T, dV = P^T dO, dS = softmax'(P, dP), dQ = dS K,
   dK = dS^T Q (model.c, attn_backward). */
static int attn_bwd(fl_gstep *s, float *dqkv, const float *dout, const float *P, const float *qkv)
{
    const size_t B = s->cfg.B, T = s->cfg.T, C = s->cfg.C, H = s->cfg.H, hs = C / H, TT = T * T, Th = T * hs;
    const fl_format f = FL_FMT_FP32;
    TRY(heads_of_qkv(s, qkv));
    OP(FL_GP_HEADS, s->ops->heads(s->ctx, s->ho, dout, B, T, H, hs, C, 1));
    TRY(gemm(s, FL_GP_ATT_GEMM, 0, 1, T, T, hs, s->ho, f, hs, Th, s->hv, f, hs, Th, 0.0f, s->dp, T, TT, B * H));
    TRY(gemm(s, FL_GP_ATT_GEMM, 1, 0, T, hs, T, P, f, T, TT, s->ho, f, hs, Th, 0.0f, s->hdv, hs, Th, B * H));
    OP(FL_GP_SOFTMAX, s->ops->softmax_bwd(s->ctx, s->ds, P, s->dp, B * H * T, T, 1.0f / sqrtf((float)hs)));
    TRY(gemm(s, FL_GP_ATT_GEMM, 0, 0, T, hs, T, s->ds, f, T, TT, s->hk, f, hs, Th, 0.0f, s->hdq, hs, Th, B * H));
    TRY(gemm(s, FL_GP_ATT_GEMM, 1, 0, T, hs, T, s->ds, f, T, TT, s->hq, f, hs, Th, 0.0f, s->hdk, hs, Th, B * H));
    const float *const src[3] = { s->hdq, s->hdk, s->hdv };
    for (int k = 0; k < 3; k++)
        OP(FL_GP_HEADS, s->ops->heads(s->ctx, dqkv + k * C, src[k], B, T, H, hs, 3 * C, 0));
    return 0;
}

/* ---- forward, backward, update ------------------------------------------------------------------------ */

static const float rms_eps = 1e-5f; /* model.h: rms(x) = x / sqrt(mean(x^2) + 1e-5) */

/* model.c, fl_model_forward. */
static int forward(fl_gstep *s, const uint16_t *tokens, float *loss)
{
    const fl_gstep_ops *o = s->ops;
    void *cx = s->ctx;
    const fl_model_cfg *c = &s->cfg;
    const size_t V = c->V, C = c->C, L = c->L, F = c->F, T = c->T, B = c->B, H = c->H, G = gdim(s), N = B * T;
    const double th = prof_begin(s);
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++) {
            s->htok[b * T + t] = tokens[b * (T + 1) + t];
            s->htgt[b * T + t] = tokens[b * (T + 1) + t + 1];
        }
    prof_end(s, FL_GP_HOST, th);
    OP(FL_GP_COPY, o->put(cx, s->tok, s->htok, N * sizeof(int)));
    OP(FL_GP_COPY, o->put(cx, s->tgt, s->htgt, N * sizeof(int)));
    OP(FL_GP_EMBED, o->embed_fwd(cx, s->resid, s->tok, s->p[FL_P_WTE], s->p[FL_P_WPE], N, T, C));
    for (size_t l = 0; l < L; l++) {
        const float *x = s->resid + l * N * C;
        float *ln1 = s->ln1 + l * N * C, *qkv = s->qkv + l * N * 3 * C, *atty = s->atty + l * N * C;
        float *r2 = s->r2 + l * N * C, *ln2 = s->ln2 + l * N * C, *pre = s->pre + l * N * G * F;
        float *h = s->h + l * N * F, *xo = s->resid + (l + 1) * N * C;
        OP(FL_GP_RMS, o->rms_fwd(cx, ln1, s->rstd1 + l * N, x, s->p[FL_P_LN1] + l * C, N, C, rms_eps));
        TRY(lin_fwd(s, fl_lin_index(l, FL_LIN_QKV), qkv, ln1, s->p[FL_P_WQKV] + l * 3 * C * C, C, 3 * C, 1));
        TRY(attn_fwd(s, atty, s->att + l * B * H * T * T, qkv));
        TRY(lin_fwd(s, fl_lin_index(l, FL_LIN_PROJ), r2, atty, s->p[FL_P_WPROJ] + l * C * C, C, C, 1));
        OP(FL_GP_ADD, o->add(cx, r2, x, N * C));
        OP(FL_GP_RMS, o->rms_fwd(cx, ln2, s->rstd2 + l * N, r2, s->p[FL_P_LN2] + l * C, N, C, rms_eps));
        fl_ffn_fwd_stats *fs = &s->ffn[l];
        fs->in_rms = NAN;
        OP(FL_GP_STATS, o->amax_rms(cx, &fs->in_amax, NULL, ln2, N, C));
        TRY(lin_fwd(s, fl_lin_index(l, FL_LIN_FC), pre, ln2, s->p[FL_P_WFC] + l * G * F * C, C, G * F, G));
        OP(FL_GP_ACT, o->act_fwd(cx, h, pre, N, F, c->act, s->p[FL_P_ACOEF] + l * FL_ACT_NCOEF));
        OP(FL_GP_STATS, o->amax_rms(cx, &fs->act_amax, &fs->act_rms, h, N, F));
        fl_model *cm = s->chan;
        if (cm && cm->chan_on && fl_model_chan_want(cm, l, fs->act_amax))
            OP(FL_GP_STATS, o->chan_max(cx, cm->chan_amax + l * F, cm->chan_gmax + l * F, cm->chan_umax + l * F, h, pre, N,
                                        F, G == 2));
        TRY(lin_fwd(s, fl_lin_index(l, FL_LIN_DOWN), xo, h, s->p[FL_P_WDOWN] + l * C * F, F, C, 1));
        OP(FL_GP_ADD, o->add(cx, xo, r2, N * C));
    }
    OP(FL_GP_RMS, o->rms_fwd(cx, s->lnf, s->rstdf, s->resid + L * N * C, s->p[FL_P_LNF], N, C, rms_eps));
    TRY(lin_fwd(s, fl_lin_index(L, 0), s->logits, s->lnf, s->p[FL_P_WHEAD], C, V, 1));
    OP(FL_GP_XENT, o->xent_fwd(cx, s->logits, s->tokloss, s->tgt, N, V));
    OP(FL_GP_COPY, o->get(cx, s->htokloss, s->tokloss, N * sizeof(double)));
    const double tl = prof_begin(s);
    double tot = 0.0;
    for (size_t i = 0; i < N; i++)
        tot += s->htokloss[i];
    *loss = s->loss = (float)(tot / (double)N);
    prof_end(s, FL_GP_HOST, tl);
    return 0;
}

/* model.c, fl_model_backward (the gradients are zeroed before). */
static int backward(fl_gstep *s)
{
    const fl_gstep_ops *o = s->ops;
    void *cx = s->ctx;
    const fl_model_cfg *c = &s->cfg;
    const size_t V = c->V, C = c->C, L = c->L, F = c->F, T = c->T, B = c->B, H = c->H, G = gdim(s), N = B * T;
    OP(FL_GP_XENT, o->xent_bwd(cx, s->logits, s->tgt, N, V));
    TRY(lin_bwd(s, fl_lin_index(L, 0), s->dln, s->g[FL_P_WHEAD], s->logits, s->lnf, s->p[FL_P_WHEAD], C, V, 1));
    OP(FL_GP_RMS, o->rms_bwd(cx, s->dres, s->g[FL_P_LNF], s->dln, s->resid + L * N * C, s->rstdf, s->p[FL_P_LNF], N, C, 0));
    for (size_t l = L; l-- > 0;) {
        const float *x = s->resid + l * N * C;
        TRY(lin_bwd(s, fl_lin_index(l, FL_LIN_DOWN), s->dh, s->g[FL_P_WDOWN] + l * C * F, s->dres, s->h + l * N * F, s->p[FL_P_WDOWN] + l * C * F, F,
                    C, 1));
        OP(FL_GP_ACT, o->act_bwd(cx, s->dpre, s->g[FL_P_ACOEF] + l * FL_ACT_NCOEF, s->dh, s->pre + l * N * G * F, N, F, c->act,
                       s->p[FL_P_ACOEF] + l * FL_ACT_NCOEF));
        TRY(lin_bwd(s, fl_lin_index(l, FL_LIN_FC), s->dln, s->g[FL_P_WFC] + l * G * F * C, s->dpre, s->ln2 + l * N * C, s->p[FL_P_WFC] + l * G * F * C,
                    C, G * F, G));
        OP(FL_GP_RMS, o->rms_bwd(cx, s->dres, s->g[FL_P_LN2] + l * C, s->dln, s->r2 + l * N * C, s->rstd2 + l * N,
                       s->p[FL_P_LN2] + l * C, N, C, 1));
        TRY(lin_bwd(s, fl_lin_index(l, FL_LIN_PROJ), s->datty, s->g[FL_P_WPROJ] + l * C * C, s->dres, s->atty + l * N * C, s->p[FL_P_WPROJ] + l * C * C,
                    C, C, 1));
        TRY(attn_bwd(s, s->dqkv, s->datty, s->att + l * B * H * T * T, s->qkv + l * N * 3 * C));
        TRY(lin_bwd(s, fl_lin_index(l, FL_LIN_QKV), s->dln, s->g[FL_P_WQKV] + l * 3 * C * C, s->dqkv, s->ln1 + l * N * C,
                    s->p[FL_P_WQKV] + l * 3 * C * C, C, 3 * C, 1));
        OP(FL_GP_RMS, o->rms_bwd(cx, s->dres, s->g[FL_P_LN1] + l * C, s->dln, x, s->rstd1 + l * N, s->p[FL_P_LN1] + l * C, N, C,
                       1));
    }
    size_t nt = 0;
    OP(FL_GP_HOST, fl_embed_index(s->hetoks, s->hestarts, s->herows, &nt, s->htok, N, c->V));
    OP(FL_GP_COPY, o->put(cx, s->etoks, s->hetoks, nt * sizeof(int)));
    OP(FL_GP_COPY, o->put(cx, s->estarts, s->hestarts, (nt + 1) * sizeof(int)));
    OP(FL_GP_COPY, o->put(cx, s->erows, s->herows, N * sizeof(int)));
    OP(FL_GP_EMBED, o->embed_bwd(cx, s->g[FL_P_WTE], s->g[FL_P_WPE], s->dres, s->tok, s->etoks, s->estarts, s->erows, nt,
                                 N, T, C));
    return 0;
}

/* --fp8-adam: the moment x (n) <- decode(encode(x s)) / s in fmt, s the per-tensor current scale of its amax,
   RNE, saturating; the elements flushed to zero into s->adam_ftz (optim.c, moment_cast).  The device's
   cast writes into s->mq (fl_cast_fq is not in place), copied back. */
static int moment_cast(fl_gstep *s, float *x, size_t n, fl_format fmt)
{
    if (!s->mq) {
        size_t most = 0;
        for (int k = 0; k < FL_P_COUNT; k++)
            most = s->sizes[k] > most ? s->sizes[k] : most;
        s->mq = s->ops->alloc(s->ctx, most * sizeof *s->mq);
        if (!s->mq)
            return -1;
        s->bytes += most * sizeof *s->mq;
    }
    float amax = 0.0f, am = 0.0f;
    OP(FL_GP_ADAMW, s->ops->amax_rms(s->ctx, &amax, NULL, x, 1, n));
    const float sc = fl_scale_from_amax(fmt, amax, 1.0f, 0, 0), si = 1.0f / sc;
    const fl_cast_fmt cf = { fmt, 0, 0, 0, 0, 0 };
    fl_cast_counts k = { 0, 0, 0, 0, 0, 0 };
    OP(FL_GP_ADAMW, s->ops->cast_fq(s->ctx, s->mq, x, n, sc, si, &cf, 0, NULL, &k, &am));
    OP(FL_GP_ADAMW, s->ops->copy(s->ctx, x, s->mq, n * sizeof *x));
    s->adam_ftz += k.ftz;
    return 0;
}

/* train.c's step: the gradient norm, clipping and the micro-batches' mean (fl_train_accum_scale), AdamW
   (optim.c, fl_adamw_step). */
static int update(fl_gstep *s, const fl_train_cfg *cfg, uint64_t step, float *gnorm)
{
    double gn2 = 0.0;
    OP(FL_GP_NORM, s->ops->sumsq(s->ctx, &gn2, s->grads, s->ntot)); /* (the gaps are zero) */
    float gscale;
    *gnorm = fl_train_accum_scale(cfg, (float)sqrt(gn2), &gscale);
    const float lr = fl_lr_at(cfg, step);
    const double t = (double)(step + 1);
    const float bc1 = (float)(1.0 - pow(cfg->beta1, t)), bc2 = (float)(1.0 - pow(cfg->beta2, t));
    for (int k = 0; k < FL_P_COUNT; k++) {
        const size_t off = s->off[k];
        const fl_adamw_hp hp = { .b1 = cfg->beta1, .b2 = cfg->beta2, .bc1 = bc1, .bc2 = bc2, .eps = cfg->adam_eps,
                                 .lr = lr, .wd = fl_param_decays(k) ? cfg->wd : 0.0f, .gscale = gscale };
        OP(FL_GP_ADAMW, s->ops->adamw(s->ctx, s->p[k], s->g[k], s->am + off, s->av + off, s->sizes[k], &hp));
        if (cfg->recipe.fp8_adam && s->sizes[k]) {
            TRY(moment_cast(s, s->am + off, s->sizes[k], FL_FMT_E4M3));
            TRY(moment_cast(s, s->av + off, s->sizes[k], FL_FMT_E5M2));
        }
    }
    return 0;
}

int fl_gstep_step(fl_gstep *s, const fl_train_cfg *cfg, const uint16_t *tokens, uint64_t step, float *loss,
                  float *gnorm)
{
    if (s->fp8 && !s->rec) {
        fprintf(stderr, "fp8lab: the GPU step under an FP8 recipe needs its recipe state (fl_gstep_set_recipe)\n");
        return -1;
    }
    OP(FL_GP_ZERO, s->ops->zero(s->ctx, s->grads, s->ntot * sizeof(float)));
    if (s->prof)
        s->prof->steps++;
    if (s->bf16) /* the weights' bf16 copies, once per step (the harness casts each W at its Linear: the same values) */
        OP(FL_GP_CAST, s->ops->to_bf16(s->ctx, s->wq, s->params, s->ntot));
    /* train.c's micro-batches: batch a at tokens + a B (T + 1), its stochastic-rounding streams step A + a;
       the gradients add up, the loss is the mean */
    const uint32_t A = cfg->accum > 1 ? cfg->accum : 1;
    const size_t bt = (size_t)s->cfg.B * (s->cfg.T + 1);
    double lsum = 0.0;
    for (uint32_t a = 0; a < A; a++) {
        if (s->rec)
            s->rec->step = step * A + a;
        TRY(forward(s, tokens + a * bt, loss));
        TRY(backward(s));
        lsum += *loss;
    }
    if (A > 1)
        *loss = s->loss = (float)(lsum / A);
    TRY(update(s, cfg, step, gnorm));
    return weight_sums(s);
}

void fl_gstep_prof_print(FILE *f, const fl_gstep_prof *p, const char *device)
{
    static const char *const name[FL_GP_COUNT] = {
        [FL_GP_ZERO] = "gradients zeroed", [FL_GP_COPY] = "host <-> device copies", [FL_GP_HOST] = "host arithmetic",
        [FL_GP_CAST] = "casts (bf16, FP8)", [FL_GP_LIN_GEMM] = "Linear GEMMs", [FL_GP_ATT_GEMM] = "attention GEMMs",
        [FL_GP_SOFTMAX] = "attention softmax", [FL_GP_HEADS] = "attention head layout",
        [FL_GP_EMBED] = "embeddings", [FL_GP_RMS] = "RMSNorm",
        [FL_GP_ACT] = "FFN activation", [FL_GP_STATS] = "FFN amax / rms", [FL_GP_ADD] = "residual adds",
        [FL_GP_XENT] = "cross-entropy", [FL_GP_NORM] = "gradient norm", [FL_GP_ADAMW] = "AdamW",
        [FL_GP_PARAMS] = "weights to the host",
    };
    double tot = 0.0;
    for (int k = 0; k < FL_GP_COUNT; k++)
        tot += p->secs[k];
    const double st = p->steps ? (double)p->steps : 1.0;
    fprintf(f, "GPU step profile (%s; %llu steps; the device drained around every operation):\n", device,
            (unsigned long long)p->steps);
    fprintf(f, "  %-24s %12s %12s %8s\n", "part", "calls/step", "ms/step", "share");
    for (int k = 0; k < FL_GP_COUNT; k++)
        fprintf(f, "  %-24s %12.1f %12.3f %7.1f%%\n", name[k], (double)p->calls[k] / st, 1e3 * p->secs[k] / st,
                tot > 0 ? 100.0 * p->secs[k] / tot : 0.0);
    fprintf(f, "  %-24s %12s %12.3f\n", "sum", "", 1e3 * tot / st);
}
