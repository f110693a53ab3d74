/* model.c — forward and backward of the harness's transformer (see model.h). */
#include "model.h"
#include "train_step.h"

#include "convert.h" /* fl_format_storage_bytes */
#include "gemm.h"
#include "gemm_fp8.h"
#include "model_simd.h"

#include <math.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- configuration ----------------------------------------------------------------------------- */

static uint32_t gdim(const fl_model_cfg *c) { return fl_act_gated(c->act) ? 2u : 1u; }

size_t fl_model_param_sizes(const fl_model_cfg *cfg, size_t sizes[FL_P_COUNT])
{
    const size_t V = cfg->V, C = cfg->C, L = cfg->L, F = cfg->F, T = cfg->T, G = gdim(cfg);
    sizes[FL_P_WTE] = V * C;
    sizes[FL_P_WPE] = T * C;
    sizes[FL_P_LN1] = L * C;
    sizes[FL_P_WQKV] = L * 3 * C * C;
    sizes[FL_P_WPROJ] = L * C * C;
    sizes[FL_P_LN2] = L * C;
    sizes[FL_P_WFC] = L * G * F * C;
    sizes[FL_P_WDOWN] = L * C * F;
    sizes[FL_P_ACOEF] = L * FL_ACT_NCOEF;
    sizes[FL_P_LNF] = C;
    sizes[FL_P_WHEAD] = V * C;
    size_t n = 0;
    for (int i = 0; i < FL_P_COUNT; i++)
        n += sizes[i];
    return n;
}

const char *fl_model_cfg_check(const fl_model_cfg *c)
{
    if (c->V < 2 || c->V > 65536)
        return "vocabulary size must be in [2, 65536]";
    if (c->C < 4 || c->C > 4096 || c->L < 1 || c->L > FL_MODEL_MAX_L || c->H < 1 || c->C % c->H)
        return "need 4 <= width <= 4096, 1 <= layers <= 64, heads dividing the width";
    if (c->F < 1 || c->F > FL_MODEL_MAX_F || c->T < 2 || c->T > 4096 || c->B < 1 || c->B > 4096)
        return "need 1 <= ffn <= 65536, 2 <= seq <= 4096, 1 <= batch <= 4096";
    if ((size_t)c->B * c->T > (1u << 20))
        return "batch * seq must be at most 2^20 tokens";
    if (c->act.kind >= FL_ACT_COUNT)
        return "unknown activation";
    const fl_act_info *a = &fl_act_table[c->act.kind];
    if (fl_act_ncoef(c->act) && (c->act.order < (uint32_t)a->order_min || c->act.order > (uint32_t)a->order_max))
        return "polynomial order outside the activation's range (fp8lab train --help)";
    return NULL;
}

int fl_model_nsites(const fl_model_cfg *cfg) { return (int)(cfg->L * FL_LIN_COUNT * 3 + 3); }

void fl_model_site_names(const fl_model_cfg *cfg, char *store, const char **names, uint32_t *roles,
                         uint8_t *hp)
{
    static const char *const lin[FL_LIN_COUNT] = { "qkv", "proj", "fc", "down" };
    static const char *const role[3] = { "in", "w", "gout" };
    const int n = fl_model_nsites(cfg);
    for (int s = 0; s < n; s++) {
        char *nm = store + 40 * (size_t)s;
        const int r = s % 3, k = s / 3;
        if (k == (int)(cfg->L * FL_LIN_COUNT))
            snprintf(nm, 40, "head.%s", role[r]);
        else
            snprintf(nm, 40, "L%d.%s.%s", k / FL_LIN_COUNT, lin[k % FL_LIN_COUNT], role[r]);
        names[s] = nm;
        roles[s] = (uint32_t)r;
        hp[s] = k == (int)(cfg->L * FL_LIN_COUNT);
    }
}

/* ---- init -------------------------------------------------------------------------------------- */


static double unif(uint64_t *s) { return fl_open01(fl_splitmix64(s)); }

static void fill_normal(float *x, size_t n, float std, uint64_t *s)
{
    for (size_t i = 0; i < n; i++) { /* Box-Muller, draws in a fixed order (u1 then u2) */
        const double u1 = unif(s), u2 = unif(s);
        x[i] = (float)(std * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
    }
}

static void *xcalloc(size_t n, size_t sz, int *fail)
{
    void *p = calloc(n ? n : 1, sz);
    if (!p)
        *fail = 1;
    return p;
}

static void expf_check(void);

int fl_model_init(fl_model *m, const fl_model_cfg *cfg, fl_recipe *rec, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    expf_check();
    if (fl_model_cfg_check(cfg))
        return -1;
    m->cfg = *cfg;
    m->rec = rec;
    const size_t V = cfg->V, C = cfg->C, L = cfg->L, F = cfg->F, T = cfg->T, B = cfg->B, H = cfg->H;
    const size_t G = gdim(cfg), N = B * T;
    m->nparams = fl_model_param_sizes(cfg, m->sizes);
    int fail = 0;
    m->params = xcalloc(m->nparams, sizeof(float), &fail);
    m->grads = xcalloc(m->nparams, sizeof(float), &fail);
    if (fail)
        return -1;
    size_t off = 0;
    for (int i = 0; i < FL_P_COUNT; i++) {
        m->p[i] = m->params + off;
        m->g[i] = m->grads + off;
        off += m->sizes[i];
    }
    /* init: one seeded stream, tensors in storage order */
    uint64_t s = seed ^ 0x5EEDF00DCAFEBABEull;
    const float std = cfg->init_std, std_out = cfg->init_std / sqrtf(2.0f * (float)L);
    fill_normal(m->p[FL_P_WTE], m->sizes[FL_P_WTE], std, &s);
    fill_normal(m->p[FL_P_WPE], m->sizes[FL_P_WPE], std, &s);
    fill_normal(m->p[FL_P_WQKV], m->sizes[FL_P_WQKV], std, &s);
    fill_normal(m->p[FL_P_WPROJ], m->sizes[FL_P_WPROJ], std_out, &s);
    fill_normal(m->p[FL_P_WFC], m->sizes[FL_P_WFC], std, &s);
    fill_normal(m->p[FL_P_WDOWN], m->sizes[FL_P_WDOWN], std_out, &s);
    fill_normal(m->p[FL_P_WHEAD], m->sizes[FL_P_WHEAD], std, &s);
    for (size_t i = 0; i < L * C; i++)
        m->p[FL_P_LN1][i] = m->p[FL_P_LN2][i] = 1.0f;
    for (size_t i = 0; i < C; i++)
        m->p[FL_P_LNF][i] = 1.0f;
    for (size_t l = 0; l < L; l++)
        fl_act_coef_init(m->p[FL_P_ACOEF] + l * FL_ACT_NCOEF, cfg->act);

    m->tok = xcalloc(N, sizeof(int), &fail);
    m->tgt = xcalloc(N, sizeof(int), &fail);
    m->resid = xcalloc((L + 1) * N * C, sizeof(float), &fail);
    m->r2 = xcalloc(L * N * C, sizeof(float), &fail);
    m->ln1 = xcalloc(L * N * C, sizeof(float), &fail);
    m->rstd1 = xcalloc(L * N, sizeof(float), &fail);
    m->qkv = xcalloc(L * N * 3 * C, sizeof(float), &fail);
    m->att = xcalloc(L * B * H * T * T, sizeof(float), &fail);
    m->atty = xcalloc(L * N * C, sizeof(float), &fail);
    m->ln2 = xcalloc(L * N * C, sizeof(float), &fail);
    m->rstd2 = xcalloc(L * N, sizeof(float), &fail);
    m->pre = xcalloc(L * N * G * F, sizeof(float), &fail);
    m->h = xcalloc(L * N * F, sizeof(float), &fail);
    m->chan_amax = xcalloc(L * F, sizeof(float), &fail);
    m->chan_gmax = xcalloc(L * F, sizeof(float), &fail);
    m->chan_umax = xcalloc(L * F, sizeof(float), &fail);
    m->lnf = xcalloc(N * C, sizeof(float), &fail);
    m->rstdf = xcalloc(N, sizeof(float), &fail);
    m->logits = xcalloc(N * V, sizeof(float), &fail);
    m->tokloss = xcalloc(N, sizeof(double), &fail);
    m->smooth_s = xcalloc(N > F ? N : F, sizeof(float), &fail);
    m->smooth_si = xcalloc(N > F ? N : F, sizeof(float), &fail);
    m->dres = xcalloc(N * C, sizeof(float), &fail);
    m->dln = xcalloc(N * C, sizeof(float), &fail);
    m->datty = xcalloc(N * C, sizeof(float), &fail);
    m->dqkv = xcalloc(N * 3 * C, sizeof(float), &fail);
    m->dpre = xcalloc(N * G * F, sizeof(float), &fail);
    m->dh = xcalloc(N * F, sizeof(float), &fail);
    size_t gmax = 3 * C;
    if (G * F > gmax)
        gmax = G * F;
    if (V > gmax)
        gmax = V;
    m->gq = xcalloc(N * gmax, sizeof(float), &fail);
    m->gqt = xcalloc(N * gmax, sizeof(float), &fail);
    /* quantized operand buffers per Linear */
    for (size_t l = 0; l <= L; l++) {
        const int nlin = l < L ? FL_LIN_COUNT : 1;
        for (int k = 0; k < nlin; k++) {
            const size_t K = (l < L && k == FL_LIN_DOWN) ? F : C;
            const size_t M = l == L ? V : k == FL_LIN_QKV ? 3 * C : k == FL_LIN_FC ? G * F : C;
            fl_lin_q *q = &m->lq[l * FL_LIN_COUNT + (size_t)k];
            q->xq = xcalloc(N * K, sizeof(float), &fail);
            q->xqt = xcalloc(N * K, sizeof(float), &fail);
            q->wq = xcalloc(M * K, sizeof(float), &fail);
            q->wqt = xcalloc(M * K, sizeof(float), &fail);
        }
    }
    return fail ? -1 : 0;
}

void fl_model_free(fl_model *m)
{
    void *bufs[] = { m->params, m->grads, m->tok, m->tgt, m->resid, m->r2, m->ln1, m->rstd1, m->qkv,
                     m->att, m->atty, m->ln2, m->rstd2, m->pre, m->h, m->chan_amax, m->chan_gmax, m->chan_umax, m->lnf, m->rstdf,
                     m->logits, m->tokloss, m->smooth_s, m->smooth_si, m->dres, m->dln, m->datty,
                     m->dqkv, m->dpre, m->dh, m->gq, m->gqt };
    for (size_t i = 0; i < FL_ARRAY_LEN(bufs); i++)
        free(bufs[i]);
    for (size_t i = 0; i < FL_ARRAY_LEN(m->lq); i++) {
        free(m->lq[i].xq);
        free(m->lq[i].xqt);
        free(m->lq[i].wq);
        free(m->lq[i].wqt);
    }
    memset(m, 0, sizeof *m);
}

void fl_model_zero_grad(fl_model *m) { memset(m->grads, 0, m->nparams * sizeof(float)); }

int fl_model_chan_want(fl_model *m, size_t l, float act_amax)
{
    m->chan_record[l] = act_amax > m->chan_rec_max[l];
    if (m->chan_record[l]) {
        m->chan_prev_max[l] = m->chan_rec_max[l];
        m->chan_rec_max[l] = act_amax;
    }
    m->chan_have[l] = m->chan_record[l] || m->chan_on == 2;
    return m->chan_have[l];
}

void fl_chan_colmax(float *am, float *gm, float *um, const float *h, const float *g, const float *u, size_t N, size_t F)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < F; i++) {
        float a = 0.0f, b = 0.0f, c = 0.0f;
        for (size_t n = 0; n < N; n++) {
            const float x = fabsf(h[n * F + i]), y = fabsf(g[n * F + i]), z = u ? fabsf(u[n * F + i]) : 0.0f;
            a = (x > a || x != x) && a == a ? x : a;
            b = (y > b || y != y) && b == b ? y : b;
            c = (z > c || z != z) && c == c ? z : c;
        }
        am[i] = a;
        gm[i] = b;
        um[i] = c;
    }
}

/* Per-channel maxima of layer l's activation output h (N, F) and its FC output pre (G, N, F) when
   the layer is wanted this step or sets an amax record (model.h, chan_on). */
static void chan_capture(fl_model *m, size_t l, const float *h, const float *pre)
{
    const size_t N = (size_t)m->cfg.B * m->cfg.T, F = m->cfg.F, G = gdim(&m->cfg);
    if (fl_model_chan_want(m, l, m->ffn[l].act_amax))
        fl_chan_colmax(m->chan_amax + l * F, m->chan_gmax + l * F, m->chan_umax + l * F, h, pre,
                       G == 2 ? pre + N * F : NULL, N, F);
}

/* ---- Linear: Y (N, M) = X (N, K) . W (M, K)^T through the recipe's casts ------------------------- */

static int lin_index(const fl_model *m, int l, int k)
{
    (void)m;
    return fl_lin_index((size_t)l, k);
}
static int lin_site(const fl_model *m, int li, int role)
{
    (void)m;
    return fl_lin_site(li, role);
}

/* Whether a cast at site si may write over its input: on steps without telemetry moments (the
   moment sums read the input after the cast), without smoothing, column-wise copies (they are cast
   from the input afterwards) or fast accumulation (it re-encodes the input).  The values are those
   of the cast into a separate buffer; the cast reads each element before it writes it. */
static int cast_in_place(const fl_model *m, int si, const fl_smooth *sm)
{
    const fl_recipe *r = m->rec;
    return !r->moments && !sm && !r->cfg.fast_accum && !fl_recipe_needs_bwd_copy(r, si);
}

/* Y (P, N, M/P) = X . W^T in P planes (P = 2 for the gated FFN's [gate; up] weight, else 1):
   plane p is X . W[p*M/P : (p+1)*M/P]^T.  X may be overwritten by its cast (cast_in_place): the
   callers read it no more, and the backward reads the cast. */
static void lin_forward(fl_model *m, int li, float *Y, float *X, const float *W, size_t K,
                        size_t M, fl_smooth *sm, size_t P)
{
    const size_t N = (size_t)m->cfg.B * m->cfg.T, Mp = M / P;
    fl_lin_q *q = &m->lq[li];
    fl_recipe *r = m->rec;
    const int si = lin_site(m, li, FL_ROLE_IN), sw = lin_site(m, li, FL_ROLE_W);
    q->xs = q->xts = X;
    q->ws = q->wbs = W;
    q->x = X;
    if (r->sites[si].fmt != FL_FMT_FP32) {
        float *xq = cast_in_place(m, si, sm) ? X : q->xq;
        fl_recipe_cast(r, si, xq, X, N, K, 0, 1, sm);
        q->xs = q->xts = xq;
        if (fl_recipe_needs_bwd_copy(r, si)) {
            fl_recipe_cast(r, si, q->xqt, X, N, K, 1, 0, sm);
            q->xts = q->xqt;
        }
    }
    if (r->sites[sw].fmt != FL_FMT_FP32) {
        fl_recipe_cast(r, sw, q->wq, W, M, K, 0, 1, NULL);
        q->ws = q->wbs = q->wq;
        if (fl_recipe_needs_bwd_copy(r, sw)) {
            fl_recipe_cast(r, sw, q->wqt, W, M, K, 1, 0, NULL);
            q->wbs = q->wqt;
        }
    }
    const fl_site *sx = &r->sites[si], *sw_ = &r->sites[sw];
    if (r->cfg.fast_accum && !r->hp_phase && !sm && (sx->scaling == FL_SCALING_DELAYED || sx->scaling == FL_SCALING_TENSOR) &&
        (sw_->scaling == FL_SCALING_DELAYED || sw_->scaling == FL_SCALING_TENSOR) &&
        fl_format_storage_bytes((fl_format)sx->fmt) == 1 && fl_format_storage_bytes((fl_format)sw_->fmt) == 1) {
        /* Hopper fast accumulation: the FP8 GEMM twin on the codes the casts produced (re-encoded
           from x * scale, the same operation the cast did), per-tensor scales as dequant factors. */
        uint8_t *qx = malloc(N * K), *qw = malloc(M * K);
        const int nosat = (int)r->cfg.nosat;
        fl_cast_encode_span(qx, X, N * K, sx->scale, (fl_format)sx->fmt, nosat);
        fl_cast_encode_span(qw, W, M * K, sw_->scale, (fl_format)sw_->fmt, nosat);
        const float xsi = 1.0f / sx->scale, wsi = 1.0f / sw_->scale;
        for (size_t p = 0; p < P; p++) {
            const fl_gemm_fp8 g = { .m = Mp, .n = N, .k = K, .a_fmt = (fl_format)sw_->fmt, .b_fmt = (fl_format)sx->fmt,
                                    .a = qw + p * Mp * K, .lda = K, .b = qx, .ldb = K, .d_fmt = FL_FMT_FP32,
                                    .d = Y + p * N * Mp, .ldd = Mp, .alpha = 1.0f, .beta = 0.0f,
                                    .a_scale = &wsi, .b_scale = &xsi };
            const fl_fast_accum_model fa = FL_FAST_ACCUM_HOPPER;
            fl_gemm_fp8_cpu(&g, FL_GEMM_ACC_FAST_EMU, &fa);
        }
        free(qx);
        free(qw);
        return;
    }
    for (size_t p = 0; p < P; p++)
        fl_train_gemm_tiled(m->gemm_kchunk, FL_TRAIN_GEMM_N, FL_TRAIN_GEMM_T, N, Mp, K, q->xs, K, q->ws + p * Mp * K, K, 0.0f, Y + p * N * Mp, Mp);
}

/* FP4 recipes, telemetry steps: the weight gradient's quantisation noise.  The wgrad GEMM once on the
   quantised copies the backward used (gt, q->xts) and once on the unquantised dY and X, and ||dW||^2 and
   ||dW_q - dW||^2 added to the recipe's wgrad_norm2 / wgrad_err2 (recipe.h), for every Linear whose X
   and dY sites are both FP4.  With an even batch, once more on the first half of the sequences (h): the
   two halves are independent samples of the same mean gradient G, each with mean G / 2, so
   4 h . (dW - h) estimates ||G||^2 without the sampling noise (wgrad_mean2; it can be negative).  The
   sums run over the elements in order (three extra GEMMs per Linear on these steps only). */
static void wgrad_noise(fl_model *m, int li, const float *dY, const float *gt, size_t K, size_t M, size_t P)
{
    fl_recipe *r = m->rec;
    const fl_lin_q *q = &m->lq[li];
    const int si = lin_site(m, li, FL_ROLE_IN), sg = lin_site(m, li, FL_ROLE_GOUT);
    if (!r->moments || r->hp_phase || r->sites[si].fmt != FL_FMT_E2M1 || r->sites[sg].fmt != FL_FMT_E2M1)
        return;
    const size_t N = (size_t)m->cfg.B * m->cfg.T, Mp = M / P;
    const int halves = m->cfg.B % 2 == 0;
    float *a = malloc(Mp * K * sizeof *a), *b = malloc(Mp * K * sizeof *b), *h = malloc(Mp * K * sizeof *h);
    if (!a || !b || !h) {
        free(a);
        free(b);
        free(h);
        return;
    }
    double n2 = 0.0, e2 = 0.0, c2 = 0.0;
    for (size_t p = 0; p < P; p++) {
        fl_train_gemm_tiled(m->gemm_kchunk, FL_TRAIN_GEMM_T, FL_TRAIN_GEMM_N, Mp, K, N, gt + p * N * Mp, Mp, q->xts, K, 0.0f, a, K);
        fl_train_gemm_tiled(m->gemm_kchunk, FL_TRAIN_GEMM_T, FL_TRAIN_GEMM_N, Mp, K, N, dY + p * N * Mp, Mp, q->x, K, 0.0f, b, K);
        if (halves) /* rows b * T + t: the first N / 2 rows are the first B / 2 sequences */
            fl_train_gemm_tiled(m->gemm_kchunk, FL_TRAIN_GEMM_T, FL_TRAIN_GEMM_N, Mp, K, N / 2, dY + p * N * Mp, Mp, q->x, K, 0.0f, h, K);
        for (size_t i = 0; i < Mp * K; i++) {
            const double d = (double)a[i] - b[i];
            n2 += (double)b[i] * b[i];
            e2 += d * d;
            if (halves)
                c2 += (double)h[i] * ((double)b[i] - h[i]);
        }
    }
    r->wgrad_norm2 += n2;
    r->wgrad_err2 += e2;
    r->wgrad_mean2 += 4.0 * c2;
    r->wgrad_halves |= halves;
    free(a);
    free(b);
    free(h);
}

/* dX (N, K) = sum_p dY_p . W_p (overwritten), dW_p (M/P, K) += dY_p^T . X;  dY (P, N, M/P).
   dy_free: the caller reads dY no more, so its cast may overwrite it (cast_in_place). */
static void lin_backward(fl_model *m, int li, float *dX, float *dW, float *dY, size_t K, size_t M,
                         size_t P, int dy_free)
{
    const size_t N = (size_t)m->cfg.B * m->cfg.T, Mp = M / P;
    const fl_lin_q *q = &m->lq[li];
    fl_recipe *r = m->rec;
    const int sg = lin_site(m, li, FL_ROLE_GOUT);
    const float *g = dY, *gt = dY;
    if (r->sites[sg].fmt != FL_FMT_FP32) {
        float *gq = dy_free && cast_in_place(m, sg, NULL) ? dY : m->gq;
        fl_recipe_cast(r, sg, gq, dY, P * N, Mp, 0, 1, NULL);
        g = gt = gq;
        if (fl_recipe_needs_bwd_copy(r, sg)) {
            fl_recipe_cast(r, sg, m->gqt, dY, P * N, Mp, 1, 0, NULL);
            gt = m->gqt;
        }
    }
    for (size_t p = 0; p < P; p++) {
        if (dX)
            fl_train_gemm_tiled(m->gemm_kchunk, FL_TRAIN_GEMM_N, FL_TRAIN_GEMM_N, N, K, Mp, g + p * N * Mp, Mp, q->wbs + p * Mp * K, K,
                        p ? 1.0f : 0.0f, dX, K);
        fl_train_gemm_tiled(m->gemm_kchunk, FL_TRAIN_GEMM_T, FL_TRAIN_GEMM_N, Mp, K, N, gt + p * N * Mp, Mp, q->xts, K, 1.0f, dW + p * Mp * K, K);
    }
    wgrad_noise(m, li, dY, gt, K, M, P);
}

/* ---- RMSNorm ------------------------------------------------------------------------------------ */

/* The per-row sums (sum of squares, and dy . gain . x in the backward) run over c in order from
   0.0f, the gain gradient's over the rows in order (kernels/train_step.h: the element functions and
   the order, shared with the GPU step's kernels).  With AVX-512 (AVX2) a block of 16 (8) rows runs
   side by side, one row per lane: each square block of (rows, columns) is transposed in registers and
   the sum takes one vector add per column (rmsnorm_simd.c, chosen at run time); otherwise the twins of
   the CUDA kernels (kernels/train_step.c) run, with the same bits. */
static void rms_forward(float *y, float *rstd, const float *x, const float *gain, size_t N, size_t C)
{
    if (!model_rms_forward_simd(y, rstd, x, gain, N, C))
        fl_rmsnorm_fwd(y, rstd, x, gain, N, C, RMS_EPS);
}

/* dx (N, C) += (or = when accumulate is 0) the input gradient; dgain (C) += the gain gradient. */
static void rms_backward(float *dx, float *dgain, const float *dy, const float *x, const float *rstd,
                         const float *gain, size_t N, size_t C, int accumulate)
{
    if (!model_rms_backward_simd(dx, dgain, dy, x, rstd, gain, N, C, accumulate))
        fl_rmsnorm_bwd(dx, dgain, dy, x, rstd, gain, N, C, accumulate);
}

/* ---- expf, vectorised ---------------------------------------------------------------------------- */

/* The softmaxes call expf(x - max) for every score and logit.  glibc (2.28 and later) computes expf
   on x86-64 CPUs with FMA and AVX2 as __expf_fma, sysdeps/ieee754/flt-32/e_expf.c compiled with FMA
   contraction: k = round(x 32/ln2), r = x 32/ln2 - k (fused), 2^(k/32) from a 32-entry table, a cubic
   in r, all in double, one rounding to float at the end.  expf_main is that main path with the same
   constants and the same fused operations, written to be vectorised (fma() is exact wherever it
   runs).  Arguments outside glibc's main path, |x| >= 88 (the top 12 bits of |x| above 0x42a:
   overflow, underflow, Inf, NaN), still go to expf.  On the main path it returns expf's bits: all
   2,237,661,184 float32 inputs there were checked against glibc 2.36, the scalar, the AVX-512 and
   the AVX2 version (vexp.c).  expf_sub uses it only where glibc would use __expf_fma (x86-64 with
   FMA and AVX2) and where a sampled check at model init agrees with the libm in use; otherwise it calls expf. */
/* T[i] = the bits of RN(2^(i/32)) minus i << 47, so that T[k & 31] + (k << 47) is 2^(k/32) for any k
   (the exponent field takes k >> 5); the same numbers as glibc's table, computed here by MPFR. */
uint64_t model_expf_tab[32]; /* shared with vexp.c (model_simd.h) */
static pthread_once_t expf_tab_once = PTHREAD_ONCE_INIT;

static void expf_tab_init(void) { fl_expf_table(model_expf_tab); }

/* glibc's main path (kernels/train_step.h: the GPU step's cross-entropy computes the same) */
static inline float expf_main(float x) { return fl_expf_glibc_main(x, model_expf_tab); }

static inline int expf_special(float x) { return ((fl_f32_bits(x) >> 20) & 0x7FFu) > 0x42Au; }

static int expf_state; /* 0: not checked yet, 1: expf_main agrees with expf, 2: it does not (atomic) */

/* Called by fl_model_init; the first call decides (concurrent first calls decide alike). */
static void expf_check(void)
{
    pthread_once(&expf_tab_once, expf_tab_init);
    if (__atomic_load_n(&expf_state, __ATOMIC_ACQUIRE))
        return;
#if defined(__x86_64__)
    __builtin_cpu_init();
    int ok = __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
#else
    int ok = 0;
#endif
    for (uint64_t i = 0; ok && i < (1ull << 32); i += 65521) { /* about 65k patterns, every binade */
        const float x = fl_f32_from_bits((uint32_t)i);
        ok = expf_special(x) || fl_f32_bits(expf_main(x)) == fl_f32_bits(expf(x));
    }
    __atomic_store_n(&expf_state, ok ? 1 : 2, __ATOMIC_RELEASE);
}

/* y[i] = expf(x[i] - m), i < n; y may be x. */
static void expf_sub(float *y, const float *x, float m, size_t n)
{
    size_t i = 0;
    if (__atomic_load_n(&expf_state, __ATOMIC_RELAXED) == 1 && model_expf_sub_simd(y, x, m, n))
        return;
    if (__atomic_load_n(&expf_state, __ATOMIC_RELAXED) == 1)
        for (; i + 16 <= n; i += 16) {
            float a[16];
            int sp = 0;
            for (size_t l = 0; l < 16; l++) {
                a[l] = x[i + l] - m;
                sp |= expf_special(a[l]);
            }
            if (sp)
                for (size_t l = 0; l < 16; l++)
                    y[i + l] = expf(a[l]);
            else
                for (size_t l = 0; l < 16; l++)
                    y[i + l] = expf_main(a[l]);
        }
    for (; i < n; i++)
        y[i] = expf(x[i] - m);
}

void fl_model_expf_span(float *y, const float *x, size_t n)
{
    expf_check();
    expf_sub(y, x, 0.0f, n);
}

long fl_model_expf_mismatches(uint64_t lo, uint64_t hi, uint64_t stride)
{
    expf_check();
    if (__atomic_load_n(&expf_state, __ATOMIC_ACQUIRE) != 1)
        return -1;
    long bad = 0;
    float x[37], y[37];
    uint64_t b = lo;
    while (b < hi) {
        /* 37 at a time: two full vector blocks and a masked tail */
        int n = 0;
        for (; n < 37 && b < hi; n++, b += stride)
            x[n] = fl_f32_from_bits((uint32_t)b);
        expf_sub(y, x, 0.0f, (size_t)n);
        for (int i = 0; i < n; i++) {
            const float e = expf(x[i]);
            bad += !(isnan(e) && isnan(y[i])) && fl_f32_bits(e) != fl_f32_bits(y[i]);
        }
    }
    return bad;
}

/* ---- attention ------------------------------------------------------------------------------------ */

/* Every sum below has the order of the plain loops
 *     s_tj  = sum_d q_t[d] k_j[d]               (d ascending, from 0.0f)
 *     p_t   = softmax_j<=t (s_t * scale)         (sum over j ascending)
 *     o_t   = sum_j<=t p_tj v_j                  (j ascending, from 0.0f)
 * and of their backward (dq_t: j ascending; dk_j, dv_j: t ascending), so the bits are those of the
 * loops; only the loop nests differ.  Rows (for dk and dv, columns) go in groups of AT_R (the last
 * few one at a time) whose sums run side by side, so that enough independent chains of additions
 * hide their latency; the score sums also take two blocks of AT_KB keys at once, and the value sums
 * keep one head's channels in registers (the head size is a compile-time constant for the common
 * sizes: attn_*_head are inlined with hs = 16, 32, 64).  With AVX-512 or AVX2 (chosen at run time,
 * attention_simd.c) the row sums (softmax, p.dP) take 16 rows at a time, one a lane, over tiles
 * transposed in registers; in builds for AVX-512 the softmax maxima come from the score registers.
 * The helpers take the group size R as an argument that is a constant after inlining; row r of a group sits at base + r * stride. */
#define AT_KB 16
#define AT_R 4

/* A block of AT_KB floats is AT_NV vectors of the build's width (GCC vector extensions): one with
   AVX-512, two with AVX, four otherwise.  A vector type wider than the build's registers would be
   lowered through memory.  Each lane is its own sum, so the width changes no bit.  Builds for
   AVX-512 take two key blocks at a time in the score sums (4 R accumulators of the 32 registers);
   the others one (the 16 registers of AVX2 hold 2 R). */
#if defined(__AVX512F__)
#define AT_VL 16
#define AT_TWO 1
#elif defined(__AVX__)
#define AT_VL 8
#define AT_TWO 0
#else
#define AT_VL 4
#define AT_TWO 0
#endif
#define AT_NV (AT_KB / AT_VL)

typedef float at_v __attribute__((vector_size(AT_VL * sizeof(float)), aligned(4)));

#define AT_LOAD(p) (*(const at_v *)(p))
#define AT_STORE(p, v) (*(at_v *)(p) = (v))

/* Stores the first n - j0 lanes (at most AT_KB) of the block a at s + j0; nothing when n <= j0. */
static inline __attribute__((always_inline)) void attn_store(float *s, const at_v *a, size_t j0, size_t n)
{
    if (j0 + AT_KB <= n)
        for (int k = 0; k < AT_NV; k++)
            AT_STORE(s + j0 + AT_VL * k, a[k]);
    else if (j0 < n)
#if defined(__AVX512F__)
        model_store_lanes(s + j0, (__m512)a[0], n - j0);
#else
        for (size_t jj = 0; j0 + jj < n; jj++)
            s[j0 + jj] = a[jj / AT_VL][jj % AT_VL];
#endif
}

/* For r < R: s_r[j] (j < n0 + r) = sum_d q_r[d] kt[d][j] (s_r = s + r ss, q_r = q + r qs), d in order
   from 0.0f, times scale (skipped when 1), over the transposed keys kt (hs, Tp), Tp >= n0 + R - 1
   rounded up to AT_KB (the padding is read, never stored).  The rows share the loads of kt; two key
   blocks at a time give 2 R chains.  With AVX-512 and mx not NULL, also mx[r] = max_j s_r[j] (as
   attn_max, from the registers: no reload of the just stored, partly masked, blocks). */
static inline __attribute__((always_inline)) void attn_scores(int R, float *s, size_t ss, const float *q, size_t qs,
                                                              size_t n0, const float *kt, size_t hs, size_t Tp,
                                                              float scale, float *mx)
{
    const size_t nmax = n0 + R - 1;
    size_t j0 = 0;
#if defined(__AVX512F__)
    __m512 m[AT_R];
    for (int r = 0; r < R; r++)
        m[r] = _mm512_set1_ps(-INFINITY);
#else
    (void)mx;
#endif
#if AT_TWO
    for (; j0 + AT_KB < nmax; j0 += 2 * AT_KB) { /* blocks j0 and j0 + AT_KB, both below Tp */
        at_v a[AT_R][2];
        for (int r = 0; r < R; r++)
            a[r][0] = a[r][1] = (at_v){ 0 };
        for (size_t d = 0; d < hs; d++) {
            const at_v k0 = AT_LOAD(kt + d * Tp + j0), k1 = AT_LOAD(kt + d * Tp + j0 + AT_KB);
            for (int r = 0; r < R; r++) {
                a[r][0] += q[r * qs + d] * k0;
                a[r][1] += q[r * qs + d] * k1;
            }
        }
        for (int r = 0; r < R; r++) {
            if (scale != 1.0f) {
                a[r][0] = a[r][0] * scale;
                a[r][1] = a[r][1] * scale;
            }
            attn_store(s + r * ss, &a[r][0], j0, n0 + r);
            attn_store(s + r * ss, &a[r][1], j0 + AT_KB, n0 + r);
#if defined(__AVX512F__)
            if (mx) {
                m[r] = model_attn_maxacc(m[r], (__m512)a[r][0], j0, n0 + r);
                m[r] = model_attn_maxacc(m[r], (__m512)a[r][1], j0 + AT_KB, n0 + r);
            }
#endif
        }
    }
#endif
    for (; j0 < nmax; j0 += AT_KB) { /* one block at a time (with AT_TWO: one last block) */
        at_v a[AT_R][AT_NV];
        for (int r = 0; r < R; r++)
            for (int k = 0; k < AT_NV; k++)
                a[r][k] = (at_v){ 0 };
        for (size_t d = 0; d < hs; d++)
            for (int k = 0; k < AT_NV; k++) {
                const at_v k0 = AT_LOAD(kt + d * Tp + j0 + AT_VL * k);
                for (int r = 0; r < R; r++)
                    a[r][k] += q[r * qs + d] * k0;
            }
        for (int r = 0; r < R; r++) {
            if (scale != 1.0f)
                for (int k = 0; k < AT_NV; k++)
                    a[r][k] = a[r][k] * scale;
            attn_store(s + r * ss, a[r], j0, n0 + r);
#if defined(__AVX512F__)
            if (mx)
                m[r] = model_attn_maxacc(m[r], (__m512)a[r][0], j0, n0 + r);
#endif
        }
    }
#if defined(__AVX512F__)
    if (mx)
        for (int r = 0; r < R; r++)
            mx[r] = _mm512_reduce_max_ps(m[r]);
#endif
}

/* For r < R: y_r[d] (d < hs) = sum_{lo0 + r dlo <= i < hi0 + r dhi} w_r[i ws] x_i[d] (y_r = y + r ys,
   w_r = w + r wr, x_i = x + i xs), each sum in i order from 0.0f; dlo, dhi are 0 or 1.  The rows run
   side by side where their ranges overlap.  Channels go in 16-float vectors (GCC vector extensions,
   IEEE per lane; no contraction under -ffp-contract=off) when hs is a multiple of 16 up to 64, else
   in chunks of 16 scalars. */
static inline __attribute__((always_inline)) void attn_wsum(int R, float *y, size_t ys, const float *w, size_t wr,
                                                            size_t ws, const float *x, size_t xs, size_t lo0,
                                                            size_t dlo, size_t hi0, size_t dhi, size_t hs)
{
    const size_t clo = lo0 + (R - 1) * dlo, chi = hi0 > clo ? hi0 : clo, ihi = hi0 + (R - 1) * dhi;
    if (hs % 16 || hs > 64) {
        for (size_t d0 = 0; d0 < hs; d0 += 16) {
            const size_t m = hs - d0 < 16 ? hs - d0 : 16;
            float a[AT_R][16] = { { 0 } };
            for (size_t i = lo0; i < ihi; i++)
                for (int r = 0; r < R; r++)
                    if (i >= lo0 + r * dlo && i < hi0 + r * dhi)
                        for (size_t dd = 0; dd < m; dd++)
                            a[r][dd] += w[r * wr + i * ws] * x[i * xs + d0 + dd];
            for (int r = 0; r < R; r++)
                for (size_t dd = 0; dd < m; dd++)
                    y[r * ys + d0 + dd] = a[r][dd];
        }
        return;
    }
    const size_t nv = hs / AT_VL;
    at_v a[AT_R][64 / AT_VL];
    for (int r = 0; r < R; r++)
        for (size_t k = 0; k < nv; k++)
            a[r][k] = (at_v){ 0 };
    for (size_t i = lo0; i < clo; i++) /* rows that start early */
        for (int r = 0; r < R; r++)
            if (i >= lo0 + r * dlo)
                for (size_t k = 0; k < nv; k++)
                    a[r][k] += w[r * wr + i * ws] * AT_LOAD(x + i * xs + AT_VL * k);
    for (size_t i = clo; i < chi; i++) /* every row */
        for (size_t k = 0; k < nv; k++) {
            const at_v xv = AT_LOAD(x + i * xs + AT_VL * k);
            for (int r = 0; r < R; r++)
                a[r][k] += w[r * wr + i * ws] * xv;
        }
    for (size_t i = chi; i < ihi; i++) /* rows that end late */
        for (int r = 0; r < R; r++)
            if (i < hi0 + r * dhi)
                for (size_t k = 0; k < nv; k++)
                    a[r][k] += w[r * wr + i * ws] * AT_LOAD(x + i * xs + AT_VL * k);
    for (int r = 0; r < R; r++)
        for (size_t k = 0; k < nv; k++)
            AT_STORE(y + r * ys + AT_VL * k, a[r][k]);
}

/* One head's keys (or values), rows of stride C3 from src, transposed into kt (hs, Tp), zero padded.
   With AVX-512 or AVX2, blocks of 16 rows by 16 channels go through registers (attention_simd.c). */
static void attn_transpose(float *kt, const float *src, size_t T, size_t Tp, size_t C3, size_t hs)
{
    size_t jv = 0, dv = 0; /* rows below jv and channels below dv done */
    if (hs >= 16 && T >= 16 && model_attn_transpose_simd(kt, src, T / 16 * 16, hs / 16 * 16, Tp, C3)) {
        jv = T / 16 * 16;
        dv = hs / 16 * 16;
    }
    for (size_t d = 0; d < hs; d++) {
        for (size_t j = d < dv ? jv : 0; j < T; j++)
            kt[d * Tp + j] = src[j * C3 + d];
        for (size_t j = T; j < Tp; j++)
            kt[d * Tp + j] = 0.0f;
    }
}

/* The maximum of s[0..n): lane maxima, then their maximum (a tree).  Only the value matters (NaN
   skipped as in the sequential "if (s > mx)"; max_ps(x, m) is x > m ? x : m); the sign of a zero
   maximum does not change s - mx. */
static inline float attn_max(const float *s, size_t n)
{
#if defined(__AVX512F__)
    return model_attn_max(s, n);
#else
    size_t j = 0;
    float lm[AT_KB];
    for (size_t l = 0; l < AT_KB; l++)
        lm[l] = -INFINITY;
    for (; j + AT_KB <= n; j += AT_KB)
        for (size_t l = 0; l < AT_KB; l++)
            lm[l] = s[j + l] > lm[l] ? s[j + l] : lm[l];
    for (size_t l = 0; j + l < n; l++)
        lm[l] = s[j + l] > lm[l] ? s[j + l] : lm[l];
    for (size_t w = AT_KB / 2; w > 0; w /= 2) /* none is NaN */
        for (size_t l = 0; l < w; l++)
            lm[l] = lm[l + w] > lm[l] ? lm[l + w] : lm[l];
    return lm[0];
#endif
}

/* For r < R: sum[r] = sum_{j < n0 + r} a_r[j] b_r[j] (a_r = a + r as, b_r = b + r bs; b NULL: the plain
   sum of a_r), j in order from 0.0f, the R chains side by side. */
static inline __attribute__((always_inline)) void attn_rowsums(int R, float *sum, const float *a, size_t as,
                                                               const float *b, size_t bs, size_t n0)
{
    for (int r = 0; r < R; r++)
        sum[r] = 0.0f;
    size_t j = 0;
    for (; j < n0; j++)
        for (int r = 0; r < R; r++)
            sum[r] += b ? a[r * as + j] * b[r * bs + j] : a[r * as + j];
    for (; j < n0 + R - 1; j++)
        for (int r = 0; r < R; r++)
            if (j < n0 + r)
                sum[r] += b ? a[r * as + j] * b[r * bs + j] : a[r * as + j];
}

/* Rows t0 .. t0 + R - 1 of one head, first half: the scores, then p_tj = expf(s_tj - max_j s_tj) into
   P (row t: t + 1 entries, j > t stay 0, the buffer is zeroed at init), from the queries and the
   transposed keys kt. */
static inline __attribute__((always_inline)) void attn_fwd_exp(int R, size_t t0, float *Pbh, const float *qkv,
                                                               const float *kt, size_t T, size_t Tp, size_t C,
                                                               size_t hs, float scale)
{
    float *p = Pbh + t0 * T;
    float mx[AT_R];
#if defined(__AVX512F__)
    attn_scores(R, p, T, qkv + t0 * 3 * C, 3 * C, t0 + 1, kt, hs, Tp, scale, mx);
#else
    attn_scores(R, p, T, qkv + t0 * 3 * C, 3 * C, t0 + 1, kt, hs, Tp, scale, NULL);
    for (int r = 0; r < R; r++)
        mx[r] = attn_max(p + r * T, t0 + 1 + r);
#endif
    for (int r = 0; r < R; r++)
        expf_sub(p + r * T, p + r * T, mx[r], t0 + 1 + r);
}

/* Second half: p_t /= sum[t - t0] (the row sums), outputs o_t = sum_j p_tj v_j. */
static inline __attribute__((always_inline)) void attn_fwd_out(int R, size_t t0, float *out, float *Pbh,
                                                               const float *sum, const float *qkv, size_t T,
                                                               size_t C, size_t hs)
{
    float *p = Pbh + t0 * T;
    for (int r = 0; r < R; r++) {
        const float inv = 1.0f / sum[r];
        for (size_t j = 0; j < t0 + 1 + r; j++)
            p[r * T + j] *= inv;
    }
    attn_wsum(R, out + t0 * C, C, p, T, 1, qkv + 2 * C, 3 * C, 0, 0, t0 + 1, 1, hs);
}

/* kt: scratch of hs * Tp floats (the transposed keys).  With AVX-512 or AVX2, rows go 16 at a time
   (four groups of AT_R) so that the row sums run in vector lanes (model_attn_rowsums16_simd). */
static inline __attribute__((always_inline)) void attn_fwd_head(float *out, float *Pbh, const float *qkv, float *kt,
                                                                size_t T, size_t Tp, size_t C, size_t hs, float scale)
{
    attn_transpose(kt, qkv + C, T, Tp, 3 * C, hs);
    size_t t0 = 0;
    float sum[16];
    if (model_simd_isa() != FL_ISA_SCALAR)
        for (; t0 + 16 <= T; t0 += 16) {
            for (size_t g = 0; g < 16; g += AT_R)
                attn_fwd_exp(AT_R, t0 + g, Pbh, qkv, kt, T, Tp, C, hs, scale);
            model_attn_rowsums16_simd(sum, Pbh + t0 * T, NULL, T, t0 + 1);
            for (size_t g = 0; g < 16; g += AT_R)
                attn_fwd_out(AT_R, t0 + g, out, Pbh, sum + g, qkv, T, C, hs);
        }
    for (; t0 + AT_R <= T; t0 += AT_R) {
        attn_fwd_exp(AT_R, t0, Pbh, qkv, kt, T, Tp, C, hs, scale);
        attn_rowsums(AT_R, sum, Pbh + t0 * T, T, NULL, 0, t0 + 1);
        attn_fwd_out(AT_R, t0, out, Pbh, sum, qkv, T, C, hs);
    }
    for (; t0 < T; t0++) {
        attn_fwd_exp(1, t0, Pbh, qkv, kt, T, Tp, C, hs, scale);
        attn_rowsums(1, sum, Pbh + t0 * T, T, NULL, 0, t0 + 1);
        attn_fwd_out(1, t0, out, Pbh, sum, qkv, T, C, hs);
    }
}

static void attn_forward(float *out, float *P, const float *qkv, size_t B, size_t T, size_t C, size_t H)
{
    const size_t hs = C / H, Tp = (T + AT_KB - 1) / AT_KB * AT_KB;
    const float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for schedule(static) collapse(2)
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            float *Pbh = P + (b * H + h) * T * T;
            float *kt = malloc(hs * Tp * sizeof *kt); /* (hs, Tp) keys of this head, transposed */
            float *o = out + b * T * C + h * hs;
            const float *x = qkv + b * T * 3 * C + h * hs;
            switch (hs) {
            case 16: attn_fwd_head(o, Pbh, x, kt, T, Tp, C, 16, scale); break;
            case 32: attn_fwd_head(o, Pbh, x, kt, T, Tp, C, 32, scale); break;
            case 64: attn_fwd_head(o, Pbh, x, kt, T, Tp, C, 64, scale); break;
            default: attn_fwd_head(o, Pbh, x, kt, T, Tp, C, hs, scale); break;
            }
            free(kt);
        }
}

/* Rows t0 .. t0 + R - 1 of one head's backward, first half: dP_t = (go_t . v_j)_j into ds (T, T). */
static inline __attribute__((always_inline)) void attn_bwd_dp(int R, size_t t0, const float *dout, const float *vt,
                                                              float *ds, size_t T, size_t Tp, size_t C, size_t hs)
{
    attn_scores(R, ds + t0 * T, T, dout + t0 * C, C, t0 + 1, vt, hs, Tp, 1.0f, NULL);
}

/* Second half: ds_t = p_t (dP_t - dot[t - t0]) scale (dot: the p_t . dP_t), dq_t = sum_j ds_tj k_j. */
static inline __attribute__((always_inline)) void attn_bwd_dq(int R, size_t t0, float *dqkv, const float *Pbh,
                                                              const float *dot, const float *qkv, float *ds,
                                                              size_t T, size_t C, size_t hs, float scale)
{
    const size_t C3 = 3 * C;
    float *d = ds + t0 * T;
    const float *p = Pbh + t0 * T;
    for (int r = 0; r < R; r++)
        for (size_t j = 0; j < t0 + 1 + r; j++)
            d[r * T + j] = p[r * T + j] * (d[r * T + j] - dot[r]) * scale;
    attn_wsum(R, dqkv + t0 * C3, C3, d, T, 1, qkv + C, C3, 0, 0, t0 + 1, 1, hs);
}

/* Columns j0 .. j0 + R - 1: dk_j = sum_t ds_tj q_t, dv_j = sum_t p_tj go_t, t = j .. T-1 ascending.
   For hs = 16 (one vector a sum) the dk and dv sums run side by side (2 R chains). */
static inline __attribute__((always_inline)) void attn_bwd_cols(int R, size_t j0, float *dqkv, const float *dout,
                                                                const float *Pbh, const float *qkv, const float *ds,
                                                                size_t T, size_t C, size_t hs)
{
    const size_t C3 = 3 * C;
    if (hs == 16) {
        at_v ak[AT_R][AT_NV], av[AT_R][AT_NV];
        for (int r = 0; r < R; r++)
            for (int k = 0; k < AT_NV; k++)
                ak[r][k] = av[r][k] = (at_v){ 0 };
        for (size_t t = j0; t < T; t++)
            for (int k = 0; k < AT_NV; k++) {
                const at_v q = AT_LOAD(qkv + t * C3 + AT_VL * k), g = AT_LOAD(dout + t * C + AT_VL * k);
                if (t >= j0 + R - 1) /* every column */
                    for (int r = 0; r < R; r++) {
                        ak[r][k] += ds[t * T + j0 + r] * q;
                        av[r][k] += Pbh[t * T + j0 + r] * g;
                    }
                else /* columns j <= t */
                    for (int r = 0; r < R; r++)
                        if (t >= j0 + r) {
                            ak[r][k] += ds[t * T + j0 + r] * q;
                            av[r][k] += Pbh[t * T + j0 + r] * g;
                        }
            }
        for (int r = 0; r < R; r++)
            for (int k = 0; k < AT_NV; k++) {
                AT_STORE(dqkv + (j0 + r) * C3 + C + AT_VL * k, ak[r][k]);
                AT_STORE(dqkv + (j0 + r) * C3 + 2 * C + AT_VL * k, av[r][k]);
            }
        return;
    }
    attn_wsum(R, dqkv + j0 * C3 + C, C3, ds + j0, 1, T, qkv, C3, j0, 1, T, 0, hs);
    attn_wsum(R, dqkv + j0 * C3 + 2 * C, C3, Pbh + j0, 1, T, dout, C, j0, 1, T, 0, hs);
}

/* One head of the backward pass: rows, then columns, AT_R at a time (the last few one at a time; with
   AVX-512 or AVX2 rows go 16 at a time, four groups of AT_R, for the vector row sums).
   vt: scratch of hs * Tp floats (the transposed values); ds: of T * T (the score gradients, j <= t). */
static inline __attribute__((always_inline)) void attn_bwd_head(float *dqkv, const float *dout, const float *Pbh,
                                                                const float *qkv, float *vt, float *ds, size_t T,
                                                                size_t Tp, size_t C, size_t hs, float scale)
{
    attn_transpose(vt, qkv + 2 * C, T, Tp, 3 * C, hs);
    size_t t0 = 0;
    float dot[16];
    if (model_simd_isa() != FL_ISA_SCALAR)
        for (; t0 + 16 <= T; t0 += 16) {
            for (size_t g = 0; g < 16; g += AT_R)
                attn_bwd_dp(AT_R, t0 + g, dout, vt, ds, T, Tp, C, hs);
            model_attn_rowsums16_simd(dot, Pbh + t0 * T, ds + t0 * T, T, t0 + 1);
            for (size_t g = 0; g < 16; g += AT_R)
                attn_bwd_dq(AT_R, t0 + g, dqkv, Pbh, dot + g, qkv, ds, T, C, hs, scale);
        }
    for (; t0 + AT_R <= T; t0 += AT_R) {
        attn_bwd_dp(AT_R, t0, dout, vt, ds, T, Tp, C, hs);
        attn_rowsums(AT_R, dot, Pbh + t0 * T, T, ds + t0 * T, T, t0 + 1);
        attn_bwd_dq(AT_R, t0, dqkv, Pbh, dot, qkv, ds, T, C, hs, scale);
    }
    for (; t0 < T; t0++) {
        attn_bwd_dp(1, t0, dout, vt, ds, T, Tp, C, hs);
        attn_rowsums(1, dot, Pbh + t0 * T, T, ds + t0 * T, T, t0 + 1);
        attn_bwd_dq(1, t0, dqkv, Pbh, dot, qkv, ds, T, C, hs, scale);
    }
    size_t j0 = 0;
    for (; j0 + AT_R <= T; j0 += AT_R)
        attn_bwd_cols(AT_R, j0, dqkv, dout, Pbh, qkv, ds, T, C, hs);
    for (; j0 < T; j0++)
        attn_bwd_cols(1, j0, dqkv, dout, Pbh, qkv, ds, T, C, hs);
}

/* dqkv (N, 3C) overwritten from dout (N, C). */
static void attn_backward(float *dqkv, const float *dout, const float *P, const float *qkv, size_t B,
                          size_t T, size_t C, size_t H)
{
    const size_t hs = C / H, Tp = (T + AT_KB - 1) / AT_KB * AT_KB;
    const float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for schedule(static) collapse(2)
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            const float *Pbh = P + (b * H + h) * T * T;
            float *vt = malloc(hs * Tp * sizeof *vt); /* (hs, Tp) values of this head, transposed */
            float *ds = malloc(T * T * sizeof *ds);   /* (T, T) score gradients, j <= t */
            float *dq = dqkv + b * T * 3 * C + h * hs;
            const float *go = dout + b * T * C + h * hs, *x = qkv + b * T * 3 * C + h * hs;
            switch (hs) {
            case 16: attn_bwd_head(dq, go, Pbh, x, vt, ds, T, Tp, C, 16, scale); break;
            case 32: attn_bwd_head(dq, go, Pbh, x, vt, ds, T, Tp, C, 32, scale); break;
            case 64: attn_bwd_head(dq, go, Pbh, x, vt, ds, T, Tp, C, 64, scale); break;
            default: attn_bwd_head(dq, go, Pbh, x, vt, ds, T, Tp, C, hs, scale); break;
            }
            free(ds);
            free(vt);
        }
}

/* ---- the attention as GEMMs: the envelope's perturbation of its order (--attn-kchunk) ------------------ *
 * The same attention with its six products computed by fl_train_gemm_tiled, every sum cut into blocks of
 * kc terms (gemm.h), as a GPU's cuBLAS attention computes them in an order of its own: S = Q K^T and
 * O = P V; dP = dO V^T, dQ = dS K, dK = dS^T Q, dV = P^T dO.  The softmax is the harness's: the scaled
 * scores of keys j <= t, their maximum, expf_sub, the float row sum in key order, the normalisation;
 * dS = P (dP - sum_j P dP) scale with that sum in key order.  P and dS hold 0 for j > t, so the GEMMs
 * add zeros there. */
static void attn_softmax_rows(float *Pbh, size_t T, float scale)
{
    for (size_t t = 0; t < T; t++) {
        float *p = Pbh + t * T;
        for (size_t j = 0; j <= t; j++)
            p[j] *= scale;
        expf_sub(p, p, attn_max(p, t + 1), t + 1);
        float sum = 0.0f;
        for (size_t j = 0; j <= t; j++)
            sum += p[j];
        const float inv = 1.0f / sum;
        for (size_t j = 0; j <= t; j++)
            p[j] *= inv;
        for (size_t j = t + 1; j < T; j++)
            p[j] = 0.0f;
    }
}

static void attn_forward_gemm(float *out, float *P, const float *qkv, size_t B, size_t T, size_t C, size_t H, size_t kc)
{
    const size_t hs = C / H, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for schedule(static) collapse(2)
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            float *Pbh = P + (b * H + h) * T * T;
            const float *q = qkv + b * T * C3 + h * hs;
            fl_train_gemm_tiled(kc, FL_TRAIN_GEMM_N, FL_TRAIN_GEMM_T, T, T, hs, q, C3, q + C, C3, 0.0f, Pbh, T);
            attn_softmax_rows(Pbh, T, scale);
            fl_train_gemm_tiled(kc, FL_TRAIN_GEMM_N, FL_TRAIN_GEMM_N, T, hs, T, Pbh, T, q + 2 * C, C3, 0.0f,
                                out + b * T * C + h * hs, C);
        }
}

static void attn_backward_gemm(float *dqkv, const float *dout, const float *P, const float *qkv, size_t B, size_t T,
                               size_t C, size_t H, size_t kc)
{
    const size_t hs = C / H, C3 = 3 * C;
    const float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for schedule(static) collapse(2)
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            const float *Pbh = P + (b * H + h) * T * T, *q = qkv + b * T * C3 + h * hs, *go = dout + b * T * C + h * hs;
            float *dq = dqkv + b * T * C3 + h * hs;
            float *ds = malloc(T * T * sizeof *ds);
            if (!ds)
                abort(); /* out of memory in the middle of a step: stop rather than give partial gradients */
            fl_train_gemm_tiled(kc, FL_TRAIN_GEMM_N, FL_TRAIN_GEMM_T, T, T, hs, go, C, q + 2 * C, C3, 0.0f, ds, T);
            for (size_t t = 0; t < T; t++) {
                const float *p = Pbh + t * T;
                float *d = ds + t * T, dot = 0.0f;
                for (size_t j = 0; j <= t; j++)
                    dot += p[j] * d[j];
                for (size_t j = 0; j <= t; j++)
                    d[j] = p[j] * (d[j] - dot) * scale;
                for (size_t j = t + 1; j < T; j++)
                    d[j] = 0.0f;
            }
            fl_train_gemm_tiled(kc, FL_TRAIN_GEMM_N, FL_TRAIN_GEMM_N, T, hs, T, ds, T, q + C, C3, 0.0f, dq, C3);
            fl_train_gemm_tiled(kc, FL_TRAIN_GEMM_T, FL_TRAIN_GEMM_N, T, hs, T, ds, T, q, C3, 0.0f, dq + C, C3);
            fl_train_gemm_tiled(kc, FL_TRAIN_GEMM_T, FL_TRAIN_GEMM_N, T, hs, T, Pbh, T, go, C, 0.0f, dq + 2 * C, C3);
            free(ds);
        }
}

/* ---- amax / rms of a buffer (telemetry of the FFN) -------------------------------------------------- */

/* amax: the maximum of the bit patterns of |x| over the non-NaN elements, which is the value of the
   sequential "if (|x| > am) am = |x|" from 0 (non-negative floats order like their bit patterns)
   and vectorises.  rms (only when rms is not NULL): per-row sums of squares in double, each over c
   in order, then summed in row order.  With AVX-512 (AVX2) one pass computes both: blocks of 16 (8)
   rows run side by side, one row per lane (square blocks transposed in registers, one add per
   column in each half; rmsnorm_simd.c); otherwise groups of RB rows run side by side. */
void fl_model_amax_rms(float *amax, float *rms, const float *x, size_t R, size_t C)
{
    const size_t n = R * C;
    uint32_t amb = 0;
    if (rms && model_amax_rms_simd(amax, rms, x, R, C))
        return;
    const int nt = omp_get_max_threads();
#pragma omp parallel for schedule(static) reduction(max : amb)
    for (int ch = 0; ch < nt; ch++) { /* contiguous chunks, one per thread */
        const size_t i0 = n * (size_t)ch / (size_t)nt, i1 = n * (size_t)(ch + 1) / (size_t)nt;
        uint32_t mb = 0;
        for (size_t i = i0; i < i1; i++) {
            const uint32_t b = fl_f32_bits(x[i]) & 0x7FFFFFFFu;
            const uint32_t v = b & (0u - (uint32_t)(b <= 0x7F800000u)); /* NaN patterns count as 0 */
            mb = v > mb ? v : mb;
        }
        amb = mb > amb ? mb : amb;
    }
    *amax = fl_f32_from_bits(amb);
    if (!rms)
        return;
    double *rs = malloc((R ? R : 1) * sizeof *rs);
    enum { RB = 8 };
#pragma omp parallel for schedule(static)
    for (size_t i0 = 0; i0 < R; i0 += RB) {
        const size_t nr = R - i0 < RB ? R - i0 : RB;
        double s[RB];
        for (size_t r = 0; r < RB; r++)
            s[r] = 0.0;
        if (nr == RB) {
            for (size_t c = 0; c < C; c++)
                for (size_t r = 0; r < RB; r++) {
                    const float a = fabsf(x[(i0 + r) * C + c]);
                    s[r] += (double)a * a;
                }
        } else {
            for (size_t r = 0; r < nr; r++)
                for (size_t c = 0; c < C; c++) {
                    const float a = fabsf(x[(i0 + r) * C + c]);
                    s[r] += (double)a * a;
                }
        }
        for (size_t r = 0; r < nr; r++)
            rs[i0 + r] = s[r];
    }
    double tot = 0.0;
    for (size_t i = 0; i < R; i++)
        tot += rs[i];
    free(rs);
    *rms = (float)sqrt(tot / (double)(n > 0 ? n : 1));
}

/* ---- forward ------------------------------------------------------------------------------------- */

float fl_model_forward(fl_model *m, const uint16_t *tokens)
{
    const fl_model_cfg *c = &m->cfg;
    const size_t V = c->V, C = c->C, L = c->L, F = c->F, T = c->T, B = c->B, H = c->H;
    const size_t G = gdim(c), N = B * T;
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < T; t++) {
            m->tok[b * T + t] = tokens[b * (T + 1) + t];
            m->tgt[b * T + t] = tokens[b * (T + 1) + t + 1];
        }
    /* embeddings */
    fl_embed_fwd(m->resid, m->tok, m->p[FL_P_WTE], m->p[FL_P_WPE], N, T, C); /* kernels/train_step.h */
    for (size_t l = 0; l < L; l++) {
        const float *x = m->resid + l * N * C;
        float *ln1 = m->ln1 + l * N * C, *qkv = m->qkv + l * N * 3 * C, *atty = m->atty + l * N * C;
        float *r2 = m->r2 + l * N * C, *ln2 = m->ln2 + l * N * C, *pre = m->pre + l * N * G * F;
        float *h = m->h + l * N * F, *xo = m->resid + (l + 1) * N * C;
        rms_forward(ln1, m->rstd1 + l * N, x, m->p[FL_P_LN1] + l * C, N, C);
        lin_forward(m, lin_index(m, (int)l, FL_LIN_QKV), qkv, ln1, m->p[FL_P_WQKV] + l * 3 * C * C, C, 3 * C, NULL, 1);
        if (m->attn_kchunk)
            attn_forward_gemm(atty, m->att + l * B * H * T * T, qkv, B, T, C, H, m->attn_kchunk);
        else
            attn_forward(atty, m->att + l * B * H * T * T, qkv, B, T, C, H);
        lin_forward(m, lin_index(m, (int)l, FL_LIN_PROJ), r2, atty, m->p[FL_P_WPROJ] + l * C * C, C, C, NULL, 1);
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < N * C; i++)
            r2[i] += x[i];
        rms_forward(ln2, m->rstd2 + l * N, r2, m->p[FL_P_LN2] + l * C, N, C);
        fl_ffn_fwd_stats *fs = &m->ffn[l];
        /* in_rms is read only by the telemetry lines (fl_tele_jsonl), written on telemetry steps;
           both before the FC's cast, which may overwrite ln2 */
        fl_model_amax_rms(&fs->in_amax, m->rec->moments ? &fs->in_rms : NULL, ln2, N, C);
        lin_forward(m, lin_index(m, (int)l, FL_LIN_FC), pre, ln2, m->p[FL_P_WFC] + l * G * F * C, C, G * F, NULL, G);
        fl_act_forward(h, pre, N, F, c->act, m->p[FL_P_ACOEF] + l * FL_ACT_NCOEF);
        fl_model_amax_rms(&fs->act_amax, &fs->act_rms, h, N, F);
        if (m->chan_on)
            chan_capture(m, l, h, pre);
        fl_smooth sm = { fl_act_smooth_axis(c->act), m->smooth_s, m->smooth_si };
        fl_smooth *smp = sm.axis >= 0 ? &sm : NULL;
        lin_forward(m, lin_index(m, (int)l, FL_LIN_DOWN), xo, h, m->p[FL_P_WDOWN] + l * C * F, F, C, smp, 1);
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < N * C; i++)
            xo[i] += r2[i];
    }
    rms_forward(m->lnf, m->rstdf, m->resid + L * N * C, m->p[FL_P_LNF], N, C);
    lin_forward(m, (int)(L * FL_LIN_COUNT), m->logits, m->lnf, m->p[FL_P_WHEAD], C, V, NULL, 1);
    /* softmax cross-entropy, probabilities in place; rows in pairs, whose sums (each over v in
       order) run side by side */
#pragma omp parallel for schedule(static)
    for (size_t i0 = 0; i0 < N; i0 += 2) {
        const size_t nr = N - i0 < 2 ? 1 : 2;
        double sum[2] = { 0.0, 0.0 };
        for (size_t r = 0; r < nr; r++) {
            /* the maximum by value (attn_max): the sequential "z > mx or mx is NaN" from z[0] gives
               the same value whenever a logit is not NaN, and when all are, z - mx is z's own NaN */
            float *z = m->logits + (i0 + r) * V;
            expf_sub(z, z, attn_max(z, V), V);
        }
        const float *z0 = m->logits + i0 * V, *z1 = m->logits + (i0 + nr - 1) * V;
        if (nr == 2)
            for (size_t v = 0; v < V; v++) {
                sum[0] += z0[v];
                sum[1] += z1[v];
            }
        else
            for (size_t v = 0; v < V; v++)
                sum[0] += z0[v];
        for (size_t r = 0; r < nr; r++) {
            const size_t i = i0 + r;
            float *z = m->logits + i * V;
            const float inv = (float)(1.0 / sum[r]);
            const float zt = z[m->tgt[i]];
            for (size_t v = 0; v < V; v++)
                z[v] *= inv;
            m->tokloss[i] = -(log((double)zt) - log(sum[r]));
        }
    }
    double tot = 0.0;
    for (size_t i = 0; i < N; i++)
        tot += m->tokloss[i];
    m->loss = (float)(tot / (double)N);
    return m->loss;
}

/* ---- backward ------------------------------------------------------------------------------------ */

void fl_model_backward(fl_model *m)
{
    const fl_model_cfg *c = &m->cfg;
    const size_t V = c->V, C = c->C, L = c->L, F = c->F, T = c->T, B = c->B, H = c->H;
    const size_t G = gdim(c), N = B * T;
    /* dlogits = (p - onehot) / N, in place */
    const float invN = 1.0f / (float)N;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < N; i++) {
        float *z = m->logits + i * V;
        z[m->tgt[i]] -= 1.0f;
        for (size_t v = 0; v < V; v++)
            z[v] *= invN;
    }
    lin_backward(m, (int)(L * FL_LIN_COUNT), m->dln, m->g[FL_P_WHEAD], m->logits, C, V, 1, 1);
    rms_backward(m->dres, m->g[FL_P_LNF], m->dln, m->resid + L * N * C, m->rstdf, m->p[FL_P_LNF], N, C, 0);
    for (size_t l = L; l-- > 0;) {
        const float *x = m->resid + l * N * C;
        /* down */
        lin_backward(m, lin_index(m, (int)l, FL_LIN_DOWN), m->dh, m->g[FL_P_WDOWN] + l * C * F, m->dres, F, C, 1, 0);
        fl_act_backward(m->dpre, m->g[FL_P_ACOEF] + l * FL_ACT_NCOEF, m->dh, m->pre + l * N * G * F, N, F, c->act, m->p[FL_P_ACOEF] + l * FL_ACT_NCOEF);
        lin_backward(m, lin_index(m, (int)l, FL_LIN_FC), m->dln, m->g[FL_P_WFC] + l * G * F * C, m->dpre, C, G * F, G, 1);
        rms_backward(m->dres, m->g[FL_P_LN2] + l * C, m->dln, m->r2 + l * N * C, m->rstd2 + l * N,
                     m->p[FL_P_LN2] + l * C, N, C, 1);
        /* attention */
        lin_backward(m, lin_index(m, (int)l, FL_LIN_PROJ), m->datty, m->g[FL_P_WPROJ] + l * C * C, m->dres, C, C, 1, 0);
        if (m->attn_kchunk)
            attn_backward_gemm(m->dqkv, m->datty, m->att + l * B * H * T * T, m->qkv + l * N * 3 * C, B, T, C, H,
                               m->attn_kchunk);
        else
            attn_backward(m->dqkv, m->datty, m->att + l * B * H * T * T, m->qkv + l * N * 3 * C, B, T, C, H);
        lin_backward(m, lin_index(m, (int)l, FL_LIN_QKV), m->dln, m->g[FL_P_WQKV] + l * 3 * C * C, m->dqkv, C, 3 * C, 1, 1);
        rms_backward(m->dres, m->g[FL_P_LN1] + l * C, m->dln, x, m->rstd1 + l * N, m->p[FL_P_LN1] + l * C, N, C, 1);
    }
    /* embeddings: deterministic scatter-add, each element's sum over tokens i in order
       (kernels/train_step.h, the GPU step's order too) */
    fl_embed_bwd(m->g[FL_P_WTE], m->g[FL_P_WPE], m->dres, m->tok, N, T, C);
}

/* ---- alignment telemetry ------------------------------------------------------------------------- */

static int cmp_float(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

const double *fl_model_ffn_wsums(const fl_model *m, uint32_t l, double *buf)
{
    const size_t C = m->cfg.C, F = m->cfg.F;
    const int gated = fl_act_gated(m->cfg.act);
    if (m->ffn_wsums)
        return m->ffn_wsums + 3 * (size_t)l * F;
    fl_ffn_wsums(buf, m->p[FL_P_WFC] + (size_t)l * (gated ? 2 : 1) * F * C, 1, F, C, gated);
    return buf;
}

void fl_model_align(fl_align_stats *out, const fl_model *m, uint32_t l)
{
    memset(out, 0, sizeof *out);
    if (!fl_act_gated(m->cfg.act))
        return;
    const size_t F = m->cfg.F;
    float *cs = malloc(F * sizeof *cs);
    double *ng = malloc(F * sizeof *ng), *nu = malloc(F * sizeof *nu), *buf = malloc(3 * F * sizeof *buf);
    if (!cs || !ng || !nu || !buf) {
        free(cs), free(ng), free(nu), free(buf);
        return;
    }
    const double *ws = fl_model_ffn_wsums(m, l, buf);
    for (size_t i = 0; i < F; i++) {
        const double gg = ws[3 * i], uu = ws[3 * i + 1], gu = ws[3 * i + 2];
        ng[i] = sqrt(gg);
        nu[i] = sqrt(uu);
        cs[i] = (gg > 0 && uu > 0) ? (float)fabs(gu / (ng[i] * nu[i])) : 0.0f;
    }
    qsort(cs, F, sizeof *cs, cmp_float);
    out->cos_med = cs[F / 2];
    out->cos_p99 = cs[(size_t)floor(0.99 * (double)(F - 1))];
    out->cos_max = cs[F - 1];
    double mg = 0, mu = 0;
    for (size_t i = 0; i < F; i++) {
        mg += ng[i];
        mu += nu[i];
    }
    mg /= (double)F;
    mu /= (double)F;
    double sgu = 0, sgg = 0, suu = 0;
    for (size_t i = 0; i < F; i++) {
        sgu += (ng[i] - mg) * (nu[i] - mu);
        sgg += (ng[i] - mg) * (ng[i] - mg);
        suu += (nu[i] - mu) * (nu[i] - mu);
    }
    out->norm_corr = (sgg > 0 && suu > 0) ? (float)(sgu / sqrt(sgg * suu)) : 0.0f;
    free(cs), free(ng), free(nu), free(buf);
}
