/* model.c — forward and backward of the harness's transformer (see model.h). */
#include "model.h"

#include "gemm_fp8.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RMS_EPS 1e-5f

/* ---- configuration ----------------------------------------------------------------------------- */

static uint32_t gdim(const fl_model_cfg *c) { return fl_act_gated(c->act) ? 2u : 1u; }

const char *fl_model_cfg_check(const fl_model_cfg *c)
{
    if (c->V < 2 || c->V > 65536)
        return "vocabulary size must be in [2, 65536]";
    if (c->C < 4 || c->C > 4096 || c->L < 1 || c->L > 64 || c->H < 1 || c->C % c->H)
        return "need 4 <= width <= 4096, 1 <= layers <= 64, heads dividing the width";
    if (c->F < 1 || c->F > 65536 || c->T < 2 || c->T > 4096 || c->B < 1 || c->B > 4096)
        return "need 1 <= ffn <= 65536, 2 <= seq <= 4096, 1 <= batch <= 4096";
    if ((size_t)c->B * c->T > (1u << 20))
        return "batch * seq must be at most 2^20 tokens";
    if (c->act.kind >= FL_ACT_COUNT)
        return "unknown activation";
    if (fl_act_ncoef(c->act) && (c->act.order < 2 || c->act.order > 4))
        return "polynomial order must be 2..4";
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

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double unif(uint64_t *s) { return ((double)(splitmix(s) >> 11) + 0.5) * 0x1p-53; }

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

int fl_model_init(fl_model *m, const fl_model_cfg *cfg, fl_recipe *rec, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    if (fl_model_cfg_check(cfg))
        return -1;
    m->cfg = *cfg;
    m->rec = rec;
    const size_t V = cfg->V, C = cfg->C, L = cfg->L, F = cfg->F, T = cfg->T, B = cfg->B, H = cfg->H;
    const size_t G = gdim(cfg), N = B * T;
    m->sizes[FL_P_WTE] = V * C;
    m->sizes[FL_P_WPE] = T * C;
    m->sizes[FL_P_LN1] = L * C;
    m->sizes[FL_P_WQKV] = L * 3 * C * C;
    m->sizes[FL_P_WPROJ] = L * C * C;
    m->sizes[FL_P_LN2] = L * C;
    m->sizes[FL_P_WFC] = L * G * F * C;
    m->sizes[FL_P_WDOWN] = L * C * F;
    m->sizes[FL_P_ACOEF] = L * FL_ACT_NCOEF;
    m->sizes[FL_P_LNF] = C;
    m->sizes[FL_P_WHEAD] = V * C;
    for (int i = 0; i < FL_P_COUNT; i++)
        m->nparams += m->sizes[i];
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
        }
    }
    return fail ? -1 : 0;
}

void fl_model_free(fl_model *m)
{
    void *bufs[] = { m->params, m->grads, m->tok, m->tgt, m->resid, m->r2, m->ln1, m->rstd1, m->qkv,
                     m->att, m->atty, m->ln2, m->rstd2, m->pre, m->h, m->lnf, m->rstdf,
                     m->logits, m->tokloss, m->smooth_s, m->smooth_si, m->dres, m->dln, m->datty,
                     m->dqkv, m->dpre, m->dh, m->gq, m->gqt };
    for (size_t i = 0; i < FL_ARRAY_LEN(bufs); i++)
        free(bufs[i]);
    for (size_t i = 0; i < FL_ARRAY_LEN(m->lq); i++) {
        free(m->lq[i].xq);
        free(m->lq[i].xqt);
        free(m->lq[i].wq);
    }
    memset(m, 0, sizeof *m);
}

void fl_model_zero_grad(fl_model *m) { memset(m->grads, 0, m->nparams * sizeof(float)); }

/* ---- Linear: Y (N, M) = X (N, K) . W (M, K)^T through the recipe's casts ------------------------- */

static int lin_index(const fl_model *m, int l, int k)
{
    (void)m;
    return l * FL_LIN_COUNT + k;
}
static int lin_site(const fl_model *m, int li, int role)
{
    (void)m;
    return li * 3 + role;
}

/* Y (P, N, M/P) = X . W^T in P planes (P = 2 for the gated FFN's [gate; up] weight, else 1):
   plane p is X . W[p*M/P : (p+1)*M/P]^T. */
static void lin_forward(fl_model *m, int li, float *Y, const float *X, const float *W, size_t K,
                        size_t M, fl_smooth *sm, size_t P)
{
    const size_t N = (size_t)m->cfg.B * m->cfg.T, Mp = M / P;
    fl_lin_q *q = &m->lq[li];
    fl_recipe *r = m->rec;
    const int si = lin_site(m, li, FL_ROLE_IN), sw = lin_site(m, li, FL_ROLE_W);
    q->xs = q->xts = X;
    q->ws = W;
    if (r->sites[si].fmt != FL_FMT_FP32) {
        fl_recipe_cast(r, si, q->xq, X, N, K, 0, 1, sm);
        q->xs = q->xts = q->xq;
        if (fl_recipe_needs_colwise(r, si)) {
            fl_recipe_cast(r, si, q->xqt, X, N, K, 1, 0, sm);
            q->xts = q->xqt;
        }
    }
    if (r->sites[sw].fmt != FL_FMT_FP32) {
        fl_recipe_cast(r, sw, q->wq, W, M, K, 0, 1, NULL);
        q->ws = q->wq;
    }
    const fl_site *sx = &r->sites[si], *sw_ = &r->sites[sw];
    if (r->cfg.fast_accum && !r->hp_phase && !sm && (sx->scaling == 1 || sx->scaling == 2) && (sw_->scaling == 1 || sw_->scaling == 2)) {
        /* Hopper fast accumulation: the FP8 GEMM twin on the codes the casts produced (re-encoded
           from x * scale, the same operation the cast did), per-tensor scales as dequant factors. */
        uint8_t *qx = malloc(N * K), *qw = malloc(M * K);
        const int nosat = (int)r->cfg.nosat;
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < N * K; i++)
            qx[i] = (uint8_t)fl_recipe_encode((fl_format)sx->fmt, X[i] * sx->scale, nosat);
        for (size_t i = 0; i < M * K; i++)
            qw[i] = (uint8_t)fl_recipe_encode((fl_format)sw_->fmt, W[i] * sw_->scale, nosat);
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
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, (int)Mp, (int)K, 1.0f, q->xs, (int)K,
                    q->ws + p * Mp * K, (int)K, 0.0f, Y + p * N * Mp, (int)Mp);
}

/* dX (N, K) = sum_p dY_p . W_p (overwritten), dW_p (M/P, K) += dY_p^T . X;  dY (P, N, M/P). */
static void lin_backward(fl_model *m, int li, float *dX, float *dW, const float *dY, size_t K, size_t M,
                         size_t P)
{
    const size_t N = (size_t)m->cfg.B * m->cfg.T, Mp = M / P;
    const fl_lin_q *q = &m->lq[li];
    fl_recipe *r = m->rec;
    const int sg = lin_site(m, li, FL_ROLE_GOUT);
    const float *g = dY, *gt = dY;
    if (r->sites[sg].fmt != FL_FMT_FP32) {
        fl_recipe_cast(r, sg, m->gq, dY, P * N, Mp, 0, 1, NULL);
        g = gt = m->gq;
        if (fl_recipe_needs_colwise(r, sg)) {
            fl_recipe_cast(r, sg, m->gqt, dY, P * N, Mp, 1, 0, NULL);
            gt = m->gqt;
        }
    }
    for (size_t p = 0; p < P; p++) {
        if (dX)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, (int)K, (int)Mp, 1.0f, g + p * N * Mp,
                        (int)Mp, q->ws + p * Mp * K, (int)K, p ? 1.0f : 0.0f, dX, (int)K);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)Mp, (int)K, (int)N, 1.0f, gt + p * N * Mp,
                    (int)Mp, q->xts, (int)K, 1.0f, dW + p * Mp * K, (int)K);
    }
}

/* ---- RMSNorm ------------------------------------------------------------------------------------ */

static void rms_forward(float *y, float *rstd, const float *x, const float *gain, size_t N, size_t C)
{
#pragma omp parallel for schedule(static)
    for (size_t t = 0; t < N; t++) {
        const float *xr = x + t * C;
        float ss = 0.0f;
        for (size_t c = 0; c < C; c++)
            ss += xr[c] * xr[c];
        const float r = 1.0f / sqrtf(ss / (float)C + RMS_EPS);
        rstd[t] = r;
        for (size_t c = 0; c < C; c++)
            y[t * C + c] = xr[c] * r * gain[c];
    }
}

/* dx (N, C) += (or = when accumulate is 0) the input gradient; dgain (C) += the gain gradient. */
static void rms_backward(float *dx, float *dgain, const float *dy, const float *x, const float *rstd,
                         const float *gain, size_t N, size_t C, int accumulate)
{
#pragma omp parallel for schedule(static)
    for (size_t t = 0; t < N; t++) {
        const float *xr = x + t * C, *dyr = dy + t * C;
        const float r = rstd[t];
        float dot = 0.0f;
        for (size_t c = 0; c < C; c++)
            dot += dyr[c] * gain[c] * xr[c];
        const float k = r * r * r * dot / (float)C;
        for (size_t c = 0; c < C; c++) {
            const float v = r * dyr[c] * gain[c] - k * xr[c];
            dx[t * C + c] = accumulate ? dx[t * C + c] + v : v;
        }
    }
#pragma omp parallel for schedule(static)
    for (size_t c = 0; c < C; c++) {
        float s = 0.0f;
        for (size_t t = 0; t < N; t++)
            s += dy[t * C + c] * x[t * C + c] * rstd[t];
        dgain[c] += s;
    }
}

/* ---- attention ------------------------------------------------------------------------------------ */

/* The score dot products s_j = sum_d q[d] k_j[d] run sequentially in d for every key j, as a
   scalar loop would, but over a transposed copy kt (hs, T) so that the loop over j is the inner,
   vectorised one: the same operations in the same order, so the same bits. */
static void attn_scores(float *s, const float *q, const float *kt, size_t hs, size_t T, size_t n)
{
    for (size_t j = 0; j < n; j++)
        s[j] = 0.0f;
    for (size_t d = 0; d < hs; d++) {
        const float qd = q[d];
        const float *kd = kt + d * T;
        for (size_t j = 0; j < n; j++)
            s[j] += qd * kd[j];
    }
}

static void attn_forward(float *out, float *P, const float *qkv, size_t B, size_t T, size_t C, size_t H)
{
    const size_t hs = C / H;
    const float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for schedule(static) collapse(2)
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            float *Pbh = P + (b * H + h) * T * T;
            float *kt = malloc(hs * T * sizeof *kt); /* (hs, T) keys of this head, transposed */
            for (size_t j = 0; j < T; j++)
                for (size_t d = 0; d < hs; d++)
                    kt[d * T + j] = qkv[(b * T + j) * 3 * C + C + h * hs + d];
            for (size_t t = 0; t < T; t++) {
                const float *q = qkv + (b * T + t) * 3 * C + h * hs;
                float *pr = Pbh + t * T;
                attn_scores(pr, q, kt, hs, T, t + 1);
                float mx = -INFINITY;
                for (size_t j = 0; j <= t; j++) {
                    const float sj = pr[j] * scale;
                    pr[j] = sj;
                    if (sj > mx)
                        mx = sj;
                }
                float sum = 0.0f;
                for (size_t j = 0; j <= t; j++) {
                    pr[j] = expf(pr[j] - mx);
                    sum += pr[j];
                }
                const float inv = 1.0f / sum;
                for (size_t j = 0; j <= t; j++)
                    pr[j] *= inv;
                for (size_t j = t + 1; j < T; j++)
                    pr[j] = 0.0f;
                float *o = out + (b * T + t) * C + h * hs;
                for (size_t d = 0; d < hs; d++)
                    o[d] = 0.0f;
                for (size_t j = 0; j <= t; j++) {
                    const float *v = qkv + (b * T + j) * 3 * C + 2 * C + h * hs;
                    for (size_t d = 0; d < hs; d++)
                        o[d] += pr[j] * v[d];
                }
            }
            free(kt);
        }
}

/* dqkv (N, 3C) overwritten from dout (N, C). */
static void attn_backward(float *dqkv, const float *dout, const float *P, const float *qkv, size_t B,
                          size_t T, size_t C, size_t H)
{
    const size_t hs = C / H;
    const float scale = 1.0f / sqrtf((float)hs);
#pragma omp parallel for schedule(static) collapse(2)
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            const float *Pbh = P + (b * H + h) * T * T;
            float *dP = malloc(T * sizeof *dP);
            float *vt = malloc(hs * T * sizeof *vt); /* (hs, T) values of this head, transposed */
            for (size_t j = 0; j < T; j++)
                for (size_t d = 0; d < hs; d++)
                    vt[d * T + j] = qkv[(b * T + j) * 3 * C + 2 * C + h * hs + d];
            for (size_t t = 0; t < T; t++)
                for (size_t d = 0; d < hs; d++)
                    dqkv[(b * T + t) * 3 * C + h * hs + d] = dqkv[(b * T + t) * 3 * C + C + h * hs + d] =
                        dqkv[(b * T + t) * 3 * C + 2 * C + h * hs + d] = 0.0f;
            for (size_t t = 0; t < T; t++) {
                const float *pr = Pbh + t * T;
                const float *go = dout + (b * T + t) * C + h * hs;
                attn_scores(dP, go, vt, hs, T, t + 1); /* dP_j = sum_d go[d] v_j[d], d in order */
                float dot = 0.0f;
                for (size_t j = 0; j <= t; j++) {
                    float *dv = dqkv + (b * T + j) * 3 * C + 2 * C + h * hs;
                    for (size_t d = 0; d < hs; d++)
                        dv[d] += pr[j] * go[d];
                    dot += pr[j] * dP[j];
                }
                const float *q = qkv + (b * T + t) * 3 * C + h * hs;
                float *dq = dqkv + (b * T + t) * 3 * C + h * hs;
                for (size_t j = 0; j <= t; j++) {
                    const float ds = pr[j] * (dP[j] - dot) * scale;
                    const float *k = qkv + (b * T + j) * 3 * C + C + h * hs;
                    float *dk = dqkv + (b * T + j) * 3 * C + C + h * hs;
                    for (size_t d = 0; d < hs; d++) {
                        dq[d] += ds * k[d];
                        dk[d] += ds * q[d];
                    }
                }
            }
            free(vt);
            free(dP);
        }
}

/* ---- amax / rms of a buffer (telemetry of the FFN) -------------------------------------------------- */

static void amax_rms(float *amax, float *rms, const float *x, size_t R, size_t C)
{
    float am = 0.0f;
    double *rs = malloc((R ? R : 1) * sizeof *rs);
#pragma omp parallel for schedule(static) reduction(max : am)
    for (size_t i = 0; i < R; i++) {
        double s = 0.0;
        for (size_t c = 0; c < C; c++) {
            const float a = fabsf(x[i * C + c]);
            if (a > am)
                am = a;
            s += (double)a * a;
        }
        rs[i] = s;
    }
    double tot = 0.0;
    for (size_t i = 0; i < R; i++)
        tot += rs[i];
    free(rs);
    *amax = am;
    *rms = (float)sqrt(tot / (double)((R * C) > 0 ? R * C : 1));
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
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < N; i++) {
        const float *e = m->p[FL_P_WTE] + (size_t)m->tok[i] * C, *pe = m->p[FL_P_WPE] + (i % T) * C;
        for (size_t k = 0; k < C; k++)
            m->resid[i * C + k] = e[k] + pe[k];
    }
    for (size_t l = 0; l < L; l++) {
        const float *x = m->resid + l * N * C;
        float *ln1 = m->ln1 + l * N * C, *qkv = m->qkv + l * N * 3 * C, *atty = m->atty + l * N * C;
        float *r2 = m->r2 + l * N * C, *ln2 = m->ln2 + l * N * C, *pre = m->pre + l * N * G * F;
        float *h = m->h + l * N * F, *xo = m->resid + (l + 1) * N * C;
        rms_forward(ln1, m->rstd1 + l * N, x, m->p[FL_P_LN1] + l * C, N, C);
        lin_forward(m, lin_index(m, (int)l, FL_LIN_QKV), qkv, ln1, m->p[FL_P_WQKV] + l * 3 * C * C, C, 3 * C, NULL, 1);
        attn_forward(atty, m->att + l * B * H * T * T, qkv, B, T, C, H);
        lin_forward(m, lin_index(m, (int)l, FL_LIN_PROJ), r2, atty, m->p[FL_P_WPROJ] + l * C * C, C, C, NULL, 1);
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < N * C; i++)
            r2[i] += x[i];
        rms_forward(ln2, m->rstd2 + l * N, r2, m->p[FL_P_LN2] + l * C, N, C);
        lin_forward(m, lin_index(m, (int)l, FL_LIN_FC), pre, ln2, m->p[FL_P_WFC] + l * G * F * C, C, G * F, NULL, G);
        fl_act_forward(h, pre, N, F, c->act, m->p[FL_P_ACOEF] + l * FL_ACT_NCOEF);
        fl_ffn_fwd_stats *fs = &m->ffn[l];
        amax_rms(&fs->in_amax, &fs->in_rms, ln2, N, C);
        amax_rms(&fs->act_amax, &fs->act_rms, h, N, F);
        fl_smooth sm = { 0, m->smooth_s, m->smooth_si }, *smp = NULL;
        if (c->act.kind == FL_ACT_SMOOTH_SWIGLU || c->act.kind == FL_ACT_SMOOTH_SWIGLU_TOKEN) {
            sm.axis = c->act.kind == FL_ACT_SMOOTH_SWIGLU_TOKEN;
            smp = &sm;
        }
        lin_forward(m, lin_index(m, (int)l, FL_LIN_DOWN), xo, h, m->p[FL_P_WDOWN] + l * C * F, F, C, smp, 1);
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < N * C; i++)
            xo[i] += r2[i];
    }
    rms_forward(m->lnf, m->rstdf, m->resid + L * N * C, m->p[FL_P_LNF], N, C);
    lin_forward(m, (int)(L * FL_LIN_COUNT), m->logits, m->lnf, m->p[FL_P_WHEAD], C, V, NULL, 1);
    /* softmax cross-entropy, probabilities in place */
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < N; i++) {
        float *z = m->logits + i * V;
        float mx = z[0];
        for (size_t v = 1; v < V; v++)
            if (z[v] > mx || mx != mx)
                mx = z[v];
        double sum = 0.0;
        for (size_t v = 0; v < V; v++) {
            z[v] = expf(z[v] - mx);
            sum += z[v];
        }
        const float inv = (float)(1.0 / sum);
        const float zt = z[m->tgt[i]];
        for (size_t v = 0; v < V; v++)
            z[v] *= inv;
        m->tokloss[i] = -(log((double)zt) - log(sum));
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
    lin_backward(m, (int)(L * FL_LIN_COUNT), m->dln, m->g[FL_P_WHEAD], m->logits, C, V, 1);
    rms_backward(m->dres, m->g[FL_P_LNF], m->dln, m->resid + L * N * C, m->rstdf, m->p[FL_P_LNF], N, C, 0);
    for (size_t l = L; l-- > 0;) {
        const float *x = m->resid + l * N * C;
        /* down */
        lin_backward(m, lin_index(m, (int)l, FL_LIN_DOWN), m->dh, m->g[FL_P_WDOWN] + l * C * F, m->dres, F, C, 1);
        fl_act_backward(m->dpre, m->g[FL_P_ACOEF] + l * FL_ACT_NCOEF, m->dh, m->pre + l * N * G * F, N, F, c->act, m->p[FL_P_ACOEF] + l * FL_ACT_NCOEF);
        lin_backward(m, lin_index(m, (int)l, FL_LIN_FC), m->dln, m->g[FL_P_WFC] + l * G * F * C, m->dpre, C, G * F, G);
        rms_backward(m->dres, m->g[FL_P_LN2] + l * C, m->dln, m->r2 + l * N * C, m->rstd2 + l * N,
                     m->p[FL_P_LN2] + l * C, N, C, 1);
        /* attention */
        lin_backward(m, lin_index(m, (int)l, FL_LIN_PROJ), m->datty, m->g[FL_P_WPROJ] + l * C * C, m->dres, C, C, 1);
        attn_backward(m->dqkv, m->datty, m->att + l * B * H * T * T, m->qkv + l * N * 3 * C, B, T, C, H);
        lin_backward(m, lin_index(m, (int)l, FL_LIN_QKV), m->dln, m->g[FL_P_WQKV] + l * 3 * C * C, m->dqkv, C, 3 * C, 1);
        rms_backward(m->dres, m->g[FL_P_LN1] + l * C, m->dln, x, m->rstd1 + l * N, m->p[FL_P_LN1] + l * C, N, C, 1);
    }
    /* embeddings: loop over channels, tokens in order (deterministic scatter-add) */
    float *gwte = m->g[FL_P_WTE], *gwpe = m->g[FL_P_WPE];
#pragma omp parallel for schedule(static)
    for (size_t k = 0; k < C; k++)
        for (size_t i = 0; i < N; i++) {
            gwte[(size_t)m->tok[i] * C + k] += m->dres[i * C + k];
            gwpe[(i % T) * C + k] += m->dres[i * C + k];
        }
}

/* ---- alignment telemetry ------------------------------------------------------------------------- */

static int cmp_float(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

void fl_model_align(fl_align_stats *out, const fl_model *m, uint32_t l)
{
    memset(out, 0, sizeof *out);
    if (!fl_act_gated(m->cfg.act))
        return;
    const size_t C = m->cfg.C, F = m->cfg.F;
    const float *W = m->p[FL_P_WFC] + (size_t)l * 2 * F * C;
    float *cs = malloc(F * sizeof *cs);
    double *ng = malloc(F * sizeof *ng), *nu = malloc(F * sizeof *nu);
    for (size_t i = 0; i < F; i++) {
        const float *g = W + i * C, *u = W + (F + i) * C;
        double gg = 0, uu = 0, gu = 0;
        for (size_t k = 0; k < C; k++) {
            gg += (double)g[k] * g[k];
            uu += (double)u[k] * u[k];
            gu += (double)g[k] * u[k];
        }
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
    free(cs);
    free(ng);
    free(nu);
}
