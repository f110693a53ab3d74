/* gstep_host.c — fl_gstep_host: the GPU step's device operations on the host (gstep.h).  Memory is
   malloc's; the kernels are their CPU twins (kernels/train_step.h, the harness's ffn_act.h); the GEMM is
   the harness's fixed-order GEMM (gemm.h), bf16 operands decoded exactly first.  ctx is unused. */
#include "gstep.h"

#include "convert.h"
#include "ffn_act.h"
#include "gemm.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t exp_tab[32];
static pthread_once_t exp_once = PTHREAD_ONCE_INIT;
static void exp_init(void) { fl_expf_table(exp_tab); }
static const uint64_t *tab(void)
{
    pthread_once(&exp_once, exp_init);
    return exp_tab;
}

static void *h_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    return calloc(1, bytes);
}
static void h_release(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}
static int h_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    if (bytes)
        memcpy(dst, src, bytes);
    return 0;
}
static int h_zero(void *ctx, void *p, size_t bytes)
{
    (void)ctx;
    memset(p, 0, bytes);
    return 0;
}

/* A GEMM operand as float32: itself, or its span (rows - 1) * ld + cols decoded from bf16 into *tmp. */
static const float *as_f32(const void *x, fl_format f, size_t rows, size_t cols, size_t ld, float **tmp)
{
    if (f == FL_FMT_FP32)
        return x;
    const size_t n = rows ? (rows - 1) * ld + cols : 0;
    *tmp = malloc((n ? n : 1) * sizeof **tmp);
    if (*tmp)
        fl_convert_to_f32(*tmp, FL_FMT_BF16, x, n);
    return *tmp;
}

static size_t esize(fl_format f) { return f == FL_FMT_BF16 ? 2 : 4; }

static int h_gemm(void *ctx, const fl_gstep_gemm *g)
{
    (void)ctx;
    if ((g->afmt != FL_FMT_FP32 && g->afmt != FL_FMT_BF16) || (g->bfmt != FL_FMT_FP32 && g->bfmt != FL_FMT_BF16)) {
        fprintf(stderr, "fl_gstep_host: a GEMM operand format other than fp32 and bf16\n");
        return -1;
    }
    for (size_t i = 0; i < g->batch; i++) {
        float *ta = NULL, *tb = NULL;
        const char *A = (const char *)g->A + i * g->sa * esize(g->afmt), *B = (const char *)g->B + i * g->sb * esize(g->bfmt);
        const float *a = as_f32(A, g->afmt, g->ta ? g->K : g->M, g->ta ? g->M : g->K, g->lda, &ta);
        const float *b = as_f32(B, g->bfmt, g->tb ? g->N : g->K, g->tb ? g->K : g->N, g->ldb, &tb);
        if (!a || !b) {
            free(ta);
            free(tb);
            fprintf(stderr, "fl_gstep_host: out of memory in a GEMM\n");
            return -1;
        }
        fl_train_gemm_tiled(0, g->ta ? FL_TRAIN_GEMM_T : FL_TRAIN_GEMM_N, g->tb ? FL_TRAIN_GEMM_T : FL_TRAIN_GEMM_N, g->M,
                            g->N, g->K, a, g->lda, b, g->ldb, g->beta, g->C + i * g->sc, g->ldc);
        free(ta);
        free(tb);
    }
    return 0;
}

static int h_to_bf16(void *ctx, uint16_t *dst, const float *src, size_t n)
{
    (void)ctx;
    fl_convert_from_f32(dst, FL_FMT_BF16, src, n, FL_RND_NE, FL_OVF_NOSATURATE, 0, 0);
    return 0;
}

static int h_add(void *ctx, float *y, const float *x, size_t n)
{
    (void)ctx;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++)
        y[i] += x[i];
    return 0;
}

static int h_sumsq(void *ctx, double *out, const float *x, size_t n)
{
    (void)ctx;
    *out = fl_sumsq(x, n);
    return 0;
}

static int h_amax_rms(void *ctx, float *amax, float *rms, const float *x, size_t R, size_t C)
{
    (void)ctx;
    fl_model_amax_rms(amax, rms, x, R, C); /* the harness's own: fl_amax_rms's bits, vectorised */
    return 0;
}

static int h_embed_fwd(void *ctx, float *x, const int *tok, const float *wte, const float *wpe, size_t N, size_t T,
                       size_t C)
{
    (void)ctx;
    return fl_embed_fwd(x, tok, wte, wpe, N, T, C);
}

static int h_embed_bwd(void *ctx, float *gwte, float *gwpe, const float *dx, const int *tok, const int *toks,
                       const int *starts, const int *rows, size_t ntok, size_t N, size_t T, size_t C)
{
    (void)ctx, (void)toks, (void)starts, (void)rows, (void)ntok; /* the twin takes the tokens themselves */
    return fl_embed_bwd(gwte, gwpe, dx, tok, N, T, C);
}

static int h_rms_fwd(void *ctx, float *y, float *rstd, const float *x, const float *gain, size_t N, size_t C, float eps)
{
    (void)ctx;
    return fl_rmsnorm_fwd(y, rstd, x, gain, N, C, eps);
}

static int h_rms_bwd(void *ctx, float *dx, float *dgain, const float *dy, const float *x, const float *rstd,
                     const float *gain, size_t N, size_t C, int accumulate)
{
    (void)ctx;
    return fl_rmsnorm_bwd(dx, dgain, dy, x, rstd, gain, N, C, accumulate);
}

static int h_heads(void *ctx, float *dst, const float *src, size_t B, size_t T, size_t H, size_t hs, size_t ld,
                   int to_heads)
{
    (void)ctx;
    return fl_heads_copy(dst, src, B, T, H, hs, ld, to_heads);
}

static int h_ffn_wsums(void *ctx, double *out, const float *W, size_t L, size_t F, size_t C, int gated)
{
    (void)ctx;
    return fl_ffn_wsums(out, W, L, F, C, gated);
}

static int h_softmax_fwd(void *ctx, float *P, const float *S, size_t R, size_t T, float scale)
{
    (void)ctx;
    return fl_attn_softmax_fwd(P, S, R, T, scale, tab());
}

static int h_softmax_bwd(void *ctx, float *dS, const float *P, const float *dP, size_t R, size_t T, float scale)
{
    (void)ctx;
    return fl_attn_softmax_bwd(dS, P, dP, R, T, scale);
}

static int h_act_fwd(void *ctx, float *h, const float *pre, size_t N, size_t F, fl_act act, const float *coef)
{
    (void)ctx;
    fl_act_forward(h, pre, N, F, act, coef);
    return 0;
}

static int h_act_bwd(void *ctx, float *dpre, float *dcoef, const float *dh, const float *pre, size_t N, size_t F,
                     fl_act act, const float *coef)
{
    (void)ctx;
    fl_act_backward(dpre, dcoef, dh, pre, N, F, act, coef);
    return 0;
}

static int h_xent_fwd(void *ctx, float *z, double *tokloss, const int *tgt, size_t N, size_t V)
{
    (void)ctx;
    return fl_xent_fwd(z, tokloss, tgt, N, V, tab());
}

static int h_xent_bwd(void *ctx, float *z, const int *tgt, size_t N, size_t V)
{
    (void)ctx;
    return fl_xent_bwd(z, tgt, N, V);
}

static int h_adamw(void *ctx, float *p, const float *g, float *m, float *v, size_t n, const fl_adamw_hp *h)
{
    (void)ctx;
    return fl_adamw(p, g, m, v, n, h);
}

static int h_chan_max(void *ctx, float *am, float *gm, float *um, const float *h, const float *pre, size_t N, size_t F,
                      int gated)
{
    (void)ctx;
    fl_chan_colmax(am, gm, um, h, pre, gated ? pre + N * F : NULL, N, F);
    return 0;
}

static int h_cast8(void *ctx, uint8_t *y, const float *x, size_t n, float s, const fl_cast_fmt *f, uint64_t off,
                   fl_cast_counts *k, float *amax)
{
    (void)ctx;
    return fl_cast_fp8(y, amax, k, x, n, s, f, off);
}
static int h_tr8(void *ctx, uint8_t *dst, const uint8_t *src, size_t R, size_t C)
{
    (void)ctx;
    fl_transpose_u8(dst, src, R, C);
    return 0;
}
static int h_gemm8(void *ctx, const fl_gemm_fp8 *g)
{
    (void)ctx;
    return fl_gemm_fp8_cpu(g, FL_GEMM_ACC_SEQ, NULL);
}

static int h_cast_fq(void *ctx, float *y, const float *x, size_t n, float sc, float si, const fl_cast_fmt *f,
                     uint64_t off, const fl_cast_smooth *sm, fl_cast_counts *k, float *amax)
{
    (void)ctx;
    memset(k, 0, sizeof *k);
    *amax = 0.0f;
    return sm ? fl_cast_fq_smooth(y, amax, k, x, n, sc, si, f, off, sm) : fl_cast_fq(y, amax, k, x, n, sc, si, f, off);
}

static int h_smooth(void *ctx, float *sc, float *sc_inv, const float *x, size_t R, size_t C, int axis, float *amax)
{
    (void)ctx;
    *amax = fl_smooth_scales(sc, sc_inv, x, R, C, axis);
    return 0;
}

static int h_sync(void *ctx)
{
    (void)ctx;
    return 0;
}

const fl_gstep_ops fl_gstep_host = {
    .name = "host (the kernels' CPU twins)",
    .alloc = h_alloc,
    .release = h_release,
    .put = h_copy,
    .get = h_copy,
    .copy = h_copy,
    .zero = h_zero,
    .sync = h_sync,
    .gemm = h_gemm,
    .to_bf16 = h_to_bf16,
    .cast_fq = h_cast_fq,
    .smooth = h_smooth,
    .add = h_add,
    .sumsq = h_sumsq,
    .amax_rms = h_amax_rms,
    .embed_fwd = h_embed_fwd,
    .embed_bwd = h_embed_bwd,
    .rms_fwd = h_rms_fwd,
    .rms_bwd = h_rms_bwd,
    .ffn_wsums = h_ffn_wsums,
    .heads = h_heads,
    .softmax_fwd = h_softmax_fwd,
    .softmax_bwd = h_softmax_bwd,
    .act_fwd = h_act_fwd,
    .act_bwd = h_act_bwd,
    .xent_fwd = h_xent_fwd,
    .xent_bwd = h_xent_bwd,
    .adamw = h_adamw,
    .chan_max = h_chan_max,
    .cast8 = h_cast8,
    .tr8 = h_tr8,
    .gemm8 = h_gemm8,
};
