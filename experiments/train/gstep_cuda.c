/* gstep_cuda.c — the GPU step's device operations on a CUDA device (gstep.h): the launchers of
 * libfp8lab_cuda.a (kernels/train_step.h: train_step.cu and step_ops.cu) and cuBLASLt.  Every
 * kernel is its host twin's bit for bit (tests/test_gpu_twins.cu), except the GEMMs (cuBLASLt's order of
 * sums) and the head's log (CUDA's); the step's bound against the harness covers those (TRAINING.md,
 * "How far a GPU run may differ").  Not in the CPU build's fp8lab: this object is linked into
 * build/fp8lab-cuda only (make cuda), which train.c finds through the weak reference to
 * fl_gstep_cuda_open.  Activations, all on float32 kernels with the harness's bits: the SwiGLU family
 * and relu (step_ops.cu), GeLU (train_step.cu, on fl_erff), PolyReLU and PolyNorm (kernels.h's launchers).
 * Operations run on the default stream; the host waits where it reads a result (get, sumsq). */
#include "gstep.h"
#include "kernels.h"


#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* kernels/convert.cu (its stream is a cudaStream_t) */
int fl_cuda_convert_from_f32(void *dst, int to, const float *src, size_t n, int mode, int ovf, uint64_t seed,
                             uint64_t offset, void *stream);

enum { LT_WORKSPACE = 32u << 20 }; /* cuBLASLt's workspace, as gpu_plan.c counts it */

typedef struct {
    void *lt, *ws;
    void *plans;    /* fl_cuda_gemm_rm_cached's plans; NULL under FP8LAB_GEMM_PLANS=0 */
    unsigned long long *cast; /* fl_cuda_cast_fq's counts (6) and amax (1 slot) */
    double *sq;     /* fl_cuda_sumsq's chunk sums, fl_cuda_amax_rms's row sums */
    size_t sq_n;
    uint64_t tab[32];
    float *sc8; /* --fp8-gemm: the GEMM's two dequantisation factors on the device */
} cuda_ctx;

static void *c_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    return fl_cuda_dev_alloc(bytes);
}
static void c_release(void *ctx, void *p)
{
    (void)ctx;
    fl_cuda_dev_free(p);
}
static int c_put(void *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    return bytes ? fl_cuda_dev_put(dst, src, bytes) : 0;
}
static int c_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    return bytes ? fl_cuda_dev_copy(dst, src, bytes) : 0;
}
static int c_get(void *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    return bytes ? fl_cuda_dev_get(dst, src, bytes) : 0;
}
static int c_zero(void *ctx, void *p, size_t bytes)
{
    (void)ctx;
    return fl_cuda_dev_zero(p, bytes);
}
static int c_gemm(void *ctx, const fl_gstep_gemm *g)
{
    cuda_ctx *c = ctx;
    return fl_cuda_gemm_rm_cached(g, c->plans, c->lt, c->ws, LT_WORKSPACE, NULL);
}
static int c_sync(void *ctx)
{
    (void)ctx;
    return fl_cuda_dev_sync();
}
static int c_to_bf16(void *ctx, uint16_t *dst, const float *src, size_t n)
{
    (void)ctx;
    return fl_cuda_convert_from_f32(dst, FL_FMT_BF16, src, n, FL_RND_NE, FL_OVF_NOSATURATE, 0, 0, NULL);
}
/* The cast's counts (6 unsigned long long) and amax (its bits) in the context's device scratch, zeroed
   before the launch and read back after it. */
/* The cast's counts and amax read back from the scratch its launch wrote (launched: the launch's status). */
static int cast_result(cuda_ctx *c, int launched, fl_cast_counts *k, float *amax)
{
    unsigned long long h[7];
    if (launched || fl_cuda_dev_get(h, c->cast, sizeof h))
        return -1;
    const fl_cast_counts kk = { h[0], h[1], h[2], h[3], h[4], h[5] };
    *k = kk;
    memcpy(amax, &h[6], sizeof *amax); /* the amax's bits, in the first 4 bytes of the last slot */
    return 0;
}
static int c_cast_fq(void *ctx, float *y, const float *x, size_t n, float sc, float si, const fl_cast_fmt *f,
                     uint64_t off, const fl_cast_smooth *sm, fl_cast_counts *k, float *amax)
{
    cuda_ctx *c = ctx;
    float *am = (float *)(c->cast + 6);
    if (fl_cuda_dev_zero(c->cast, 7 * sizeof *c->cast))
        return -1;
    return cast_result(c,
                       sm ? fl_cuda_cast_fq_smooth(y, am, c->cast, x, n, sc, si, f, off, sm, NULL)
                          : fl_cuda_cast_fq(y, am, c->cast, x, n, sc, si, f, off, NULL),
                       k, amax);
}
static int c_add(void *ctx, float *y, const float *x, size_t n)
{
    (void)ctx;
    return fl_cuda_add_f32(y, x, n, NULL);
}
/* The double scratch for k values. */
static int scratch(cuda_ctx *c, size_t k)
{
    if (k > c->sq_n) {
        fl_cuda_dev_free(c->sq);
        c->sq = fl_cuda_dev_alloc(k * sizeof(double));
        c->sq_n = c->sq ? k : 0;
        if (!c->sq)
            return -1;
    }
    return 0;
}
static int c_sumsq(void *ctx, double *out, const float *x, size_t n)
{
    cuda_ctx *c = ctx;
    return scratch(c, fl_sumsq_chunks(n)) ? -1 : fl_cuda_sumsq(out, x, n, c->sq, NULL);
}
static int c_amax_rms(void *ctx, float *amax, float *rms, const float *x, size_t R, size_t C)
{
    cuda_ctx *c = ctx;
    return scratch(c, R + 1) ? -1 : fl_cuda_amax_rms(amax, rms, x, R, C, c->sq, NULL);
}
static int c_heads(void *ctx, float *dst, const float *src, size_t B, size_t T, size_t H, size_t hs, size_t ld,
                   int to_heads)
{
    (void)ctx;
    return fl_cuda_heads_copy(dst, src, B, T, H, hs, ld, to_heads, NULL);
}
static int c_ffn_wsums(void *ctx, double *out, const float *W, size_t L, size_t F, size_t C, int gated)
{
    cuda_ctx *c = ctx; /* the sums in the scratch, then to the host */
    const size_t n = 3 * L * F;
    if (scratch(c, n) || fl_cuda_ffn_wsums(c->sq, W, L, F, C, gated, NULL))
        return -1;
    return n ? fl_cuda_dev_get(out, c->sq, n * sizeof *out) : 0;
}
static int c_smooth(void *ctx, float *sc, float *sc_inv, const float *x, size_t R, size_t C, int axis, float *amax)
{
    cuda_ctx *c = ctx; /* the unsigned scratch (R + C + 1 of them) in the double one */
    return scratch(c, (R + C + 1) / 2 + 1) ? -1 : fl_cuda_smooth_scales(sc, sc_inv, amax, x, R, C, axis, (unsigned *)c->sq, NULL);
}
static int c_embed_fwd(void *ctx, float *x, const int *tok, const float *wte, const float *wpe, size_t N, size_t T,
                       size_t C)
{
    (void)ctx;
    return fl_cuda_embed_fwd(x, tok, wte, wpe, N, T, C, NULL);
}
static int c_embed_bwd(void *ctx, float *gwte, float *gwpe, const float *dx, const int *tok, const int *toks,
                       const int *starts, const int *rows, size_t ntok, size_t N, size_t T, size_t C)
{
    (void)ctx, (void)tok;
    return fl_cuda_embed_bwd(gwte, gwpe, dx, toks, starts, rows, ntok, N, T, C, NULL);
}
static int c_rms_fwd(void *ctx, float *y, float *rstd, const float *x, const float *gain, size_t N, size_t C, float eps)
{
    (void)ctx;
    return fl_cuda_rmsnorm_fwd(y, rstd, x, gain, N, C, eps, NULL);
}
static int c_rms_bwd(void *ctx, float *dx, float *dgain, const float *dy, const float *x, const float *rstd,
                     const float *gain, size_t N, size_t C, int accumulate)
{
    cuda_ctx *c = ctx; /* the rows' k in the scratch: N floats */
    return scratch(c, N / 2 + 1) ? -1 : fl_cuda_rmsnorm_bwd(dx, dgain, dy, x, rstd, gain, N, C, accumulate, (float *)c->sq, NULL);
}
static int c_softmax_fwd(void *ctx, float *P, const float *S, size_t R, size_t T, float scale)
{
    cuda_ctx *c = ctx;
    return fl_cuda_attn_softmax_fwd(P, S, R, T, scale, c->tab, NULL);
}
static int c_softmax_bwd(void *ctx, float *dS, const float *P, const float *dP, size_t R, size_t T, float scale)
{
    (void)ctx;
    return fl_cuda_attn_softmax_bwd(dS, P, dP, R, T, scale, NULL);
}

/* The activations' float32 kernels: the SwiGLU family (the smoothed ones compute SwiGLU; their
   smoothing is at the FP8 cast), relu and gelu (step_ops.cu, train_step.cu), and PolyReLU and PolyNorm
   (kernels.h's launchers with float32 views: their fl_io_f32 instantiations).  The polynomials'
   coefficients are parameters on the device: each call reads them to the host (r + 1 floats, a wait),
   as the launchers take them by value. */
static int poly_coef(fl_poly_coef *pc, const float *coef, fl_act act)
{
    float a[FL_ACT_NCOEF];
    if (fl_cuda_dev_get(a, coef, (size_t)fl_act_ncoef(act) * sizeof *a))
        return -1;
    *pc = fl_act_poly(a, act);
    return 0;
}
static fl_kin kin32(const float *p) { return (fl_kin){ p, FL_FMT_FP32, NULL }; }
static fl_kout kout32(float *p) { return (fl_kout){ p, FL_FMT_FP32, NULL, NULL }; }

static int c_act_fwd(void *ctx, float *h, const float *pre, size_t N, size_t F, fl_act act, const float *coef)
{
    (void)ctx;
    const size_t n = N * F;
    if (fl_act_swiglu(act))
        return fl_cuda_swiglu_f32_fwd(h, pre, pre + n, n, NULL);
    if (act.kind == FL_ACT_RELU)
        return fl_cuda_relu_fwd(h, pre, n, NULL);
    if (act.kind == FL_ACT_GELU)
        return fl_cuda_gelu_fwd(h, pre, n, NULL);
    fl_poly_coef pc;
    if (poly_coef(&pc, coef, act))
        return -1;
    if (act.kind == FL_ACT_POLYRELU)
        return fl_cuda_polyrelu_fwd(kout32(h), kin32(pre), n, &pc, NULL);
    if (act.kind == FL_ACT_POLYNORM)
        return fl_cuda_polynorm_fwd(kout32(h), kin32(pre), N, F, &pc, FL_ACT_POLYNORM_EPS, NULL);
    fprintf(stderr, "fp8lab: --device cuda has no float32 %s kernel\n", fl_act_name(act));
    return -1;
}

static int c_act_bwd(void *ctx, float *dpre, float *dcoef, const float *dh, const float *pre, size_t N, size_t F,
                     fl_act act, const float *coef)
{
    cuda_ctx *c = ctx;
    const size_t n = N * F;
    if (fl_act_swiglu(act))
        return fl_cuda_swiglu_f32_bwd(dpre, dpre + n, pre, pre + n, dh, n, NULL);
    if (act.kind == FL_ACT_RELU)
        return fl_cuda_relu_bwd(dpre, pre, dh, n, NULL);
    if (act.kind == FL_ACT_GELU)
        return fl_cuda_gelu_bwd(dpre, pre, dh, n, c->tab, NULL);
    if (act.kind != FL_ACT_POLYRELU && act.kind != FL_ACT_POLYNORM) {
        fprintf(stderr, "fp8lab: --device cuda has no float32 %s kernel\n", fl_act_name(act));
        return -1;
    }
    /* the harness's: da from one call over all N x F (its fixed order), then dcoef += da */
    const int nc = fl_act_ncoef(act), pn = act.kind == FL_ACT_POLYNORM;
    const size_t nws = pn ? fl_cuda_polynorm_ws_floats(N, (int)act.order) : fl_cuda_polyrelu_ws_floats(n, (int)act.order);
    fl_poly_coef pc;
    if (poly_coef(&pc, coef, act) || scratch(c, (FL_ACT_NCOEF + nws + 1) / 2 + 1))
        return -1;
    float *da = (float *)c->sq, *ws = da + FL_ACT_NCOEF;
    if (pn ? fl_cuda_polynorm_bwd(kout32(dpre), da, ws, kin32(pre), kin32(dh), N, F, &pc, FL_ACT_POLYNORM_EPS, NULL)
           : fl_cuda_polyrelu_bwd(kout32(dpre), da, ws, kin32(pre), kin32(dh), n, &pc, NULL))
        return -1;
    return fl_cuda_add_f32(dcoef, da, (size_t)nc, NULL);
}

static int c_xent_fwd(void *ctx, float *z, double *tokloss, const int *tgt, size_t N, size_t V)
{
    cuda_ctx *c = ctx;
    return fl_cuda_xent_fwd(z, tokloss, tgt, N, V, c->tab, NULL);
}
static int c_xent_bwd(void *ctx, float *z, const int *tgt, size_t N, size_t V)
{
    (void)ctx;
    return fl_cuda_xent_bwd(z, tgt, N, V, NULL);
}
static int c_adamw(void *ctx, float *p, const float *g, float *m, float *v, size_t n, const fl_adamw_hp *h)
{
    (void)ctx;
    return fl_cuda_adamw(p, g, m, v, n, h, NULL);
}

/* The per-channel maxima (the unsigned scratch: 3 F of them in the double one) */
static int c_chan_max(void *ctx, float *am, float *gm, float *um, const float *h, const float *pre, size_t N, size_t F,
                      int gated)
{
    cuda_ctx *c = ctx;
    return scratch(c, (3 * F + 1) / 2 + 1) ? -1
                                           : fl_cuda_chan_colmax(am, gm, um, h, pre, gated ? pre + N * F : NULL, N, F,
                                                                 (unsigned *)c->sq, NULL);
}

/* --fp8-gemm: the codes (fl_cuda_cast_fp8, its counts and amax in the cast's scratch), their transposes, and
   cuBLASLt's FP8 GEMM with the factors copied to the device */
static int c_cast8(void *ctx, uint8_t *y, const float *x, size_t n, float sc, const fl_cast_fmt *f, uint64_t off,
                   fl_cast_counts *k, float *amax)
{
    cuda_ctx *c = ctx;
    if (fl_cuda_dev_zero(c->cast, 7 * sizeof *c->cast))
        return -1;
    return cast_result(c, fl_cuda_cast_fp8(y, (float *)(c->cast + 6), c->cast, x, n, sc, f, off, NULL), k, amax);
}
static int c_tr8(void *ctx, uint8_t *dst, const uint8_t *src, size_t R, size_t C)
{
    (void)ctx;
    return fl_cuda_transpose_u8(dst, src, R, C, NULL);
}
static int c_gemm8(void *ctx, const fl_gemm_fp8 *g)
{
    cuda_ctx *c = ctx;
    const float f[2] = { g->a_scale ? *g->a_scale : 1.0f, g->b_scale ? *g->b_scale : 1.0f };
    /* one slot for every GEMM: fl_cuda_dev_put is a synchronous cudaMemcpy on the default stream, which
       waits for the previous GEMM (also on it) to have read the slot */
    if (fl_cuda_dev_put(c->sc8, f, sizeof f))
        return -1;
    fl_gemm_fp8 d = *g;
    d.a_scale = c->sc8;
    d.b_scale = c->sc8 + 1;
    return fl_cuda_gemm_fp8(&d, c->lt, c->ws, LT_WORKSPACE, NULL);
}

static const fl_gstep_ops cuda_ops = {
    .name = "cuda",
    .alloc = c_alloc,
    .release = c_release,
    .put = c_put,
    .copy = c_copy,
    .get = c_get,
    .zero = c_zero,
    .sync = c_sync,
    .gemm = c_gemm,
    .to_bf16 = c_to_bf16,
    .cast_fq = c_cast_fq,
    .smooth = c_smooth,
    .add = c_add,
    .sumsq = c_sumsq,
    .amax_rms = c_amax_rms,
    .embed_fwd = c_embed_fwd,
    .embed_bwd = c_embed_bwd,
    .rms_fwd = c_rms_fwd,
    .rms_bwd = c_rms_bwd,
    .ffn_wsums = c_ffn_wsums,
    .heads = c_heads,
    .softmax_fwd = c_softmax_fwd,
    .softmax_bwd = c_softmax_bwd,
    .act_fwd = c_act_fwd,
    .act_bwd = c_act_bwd,
    .xent_fwd = c_xent_fwd,
    .xent_bwd = c_xent_bwd,
    .adamw = c_adamw,
    .chan_max = c_chan_max,
    .cast8 = c_cast8,
    .tr8 = c_tr8,
    .gemm8 = c_gemm8,
};

const fl_gstep_ops *fl_gstep_cuda_open(void **ctx, fl_act act)
{
    *ctx = NULL;
    (void)act; /* every activation has its float32 kernels */
    if (!fl_cuda_device_count()) {
        fprintf(stderr, "fp8lab: --device cuda: no CUDA device here (--device twins runs the step's code on the CPU)\n");
        return NULL;
    }
    cuda_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    fl_expf_table(c->tab);
    c->lt = fl_cuda_lt_new();
    c->ws = c->lt ? fl_cuda_dev_alloc(LT_WORKSPACE) : NULL;
    c->cast = c->ws ? fl_cuda_dev_alloc(7 * sizeof *c->cast) : NULL;
    c->sc8 = c->cast ? fl_cuda_dev_alloc(2 * sizeof *c->sc8) : NULL;
    const char *pe = getenv("FP8LAB_GEMM_PLANS"); /* "0": every GEMM planned at its call (the cache's A/B) */
    c->plans = pe && !strcmp(pe, "0") ? NULL : fl_cuda_gemm_plans_new();
    if (!c->ws || !c->cast || !c->sc8 || (!c->plans && !(pe && !strcmp(pe, "0")))) {
        fl_gstep_cuda_close(c);
        return NULL;
    }
    *ctx = c;
    return &cuda_ops;
}

void fl_gstep_cuda_close(void *ctx)
{
    cuda_ctx *c = ctx;
    if (!c)
        return;
    fl_cuda_dev_free(c->ws);
    fl_cuda_dev_free(c->sq);
    fl_cuda_gemm_plans_free(c->plans);
    fl_cuda_dev_free(c->cast);
    fl_cuda_dev_free(c->sc8);
    fl_cuda_lt_free(c->lt);
    free(c);
}
