/* gpu_plan.c — the GPU training step's memory and launch plan, and the presets (gpu_plan.h). */
#include "gpu_plan.h"

#include "model.h"

#include <string.h>

static void add(fl_gpu_plan *p, const char *name, int kind, uint64_t bytes, const char *what)
{
    if (p->nbuf < FL_PLAN_MAX_BUFS)
        p->buf[p->nbuf++] = (fl_plan_buf){ name, what, kind, bytes };
    p->bytes[kind] += bytes;
    p->peak += bytes;
}

/* Launches per layer and at the model's ends (TRAINING.md, "The GPU step"). */
enum {
    FWD_LAYER = 12,  /* rmsnorm, qkv, QK^T, causal softmax, PV, proj, residual add, rmsnorm, fc, act, down, add */
    FWD_CAST = 3,    /* FP8: the casts of the rmsnorm outputs and the attention output (act casts its own) */
    FWD_ENDS = 4,    /* embedding, final rmsnorm, head, fused cross-entropy */
    BWD_LAYER = 16,  /* down, fc, proj, qkv dgrad + wgrad (8), act bwd, 2 rmsnorm bwd, attention: dV, dP,
                        softmax bwd, dQ, dK (5) */
    BWD_CAST = 4,    /* FP8: each Linear's dY cast (both layouts in one kernel) */
    BWD_ENDS = 4,    /* head dgrad + wgrad, final rmsnorm bwd, embedding scatter-add */
    OPT = 4,         /* zero the gradients, grad-norm partials and total, AdamW over the flat buffers */
    OPT_DELAYED = 1, /* delayed scaling: every site's history and scale in one kernel */
};

int fl_gpu_plan_build(fl_gpu_plan *p, const fl_train_cfg *cfg, uint32_t accum, uint32_t ranks, int zero1, char *err,
                      size_t errlen)
{
    memset(p, 0, sizeof *p);
    const fl_model_cfg *m = &cfg->model;
    const fl_recipe_kind rk = (fl_recipe_kind)cfg->recipe.kind;
    if (!m->V) {
        snprintf(err, errlen, "the plan needs the vocabulary: give --vocab N (the shards' is read when a run starts)");
        return -1;
    }
    if (!accum || !ranks) {
        snprintf(err, errlen, "--accum and --ranks must be at least 1");
        return -1;
    }
    if (rk != FL_RECIPE_BF16 && !fl_recipe_per_tensor(rk)) {
        snprintf(err, errlen, "the GPU step takes the recipes bf16, fp8-delayed, fp8-current and paper-gaudi2 (not %s)",
                 fl_recipe_name(rk));
        return -1;
    }
    const int fp8 = rk != FL_RECIPE_BF16, delayed = rk == FL_RECIPE_FP8_DELAYED || rk == FL_RECIPE_PAPER_GAUDI2;
    size_t sz[FL_P_COUNT];
    const uint64_t P = fl_model_param_sizes(m, sz);
    const uint64_t Plin = sz[FL_P_WQKV] + sz[FL_P_WPROJ] + sz[FL_P_WFC] + sz[FL_P_WDOWN];
    const uint64_t V = m->V, C = m->C, L = m->L, F = m->F, T = m->T, B = m->B, H = m->H;
    const uint64_t G = fl_act_gated(m->act) ? 2 : 1, N = B * T, shard = zero1 ? ranks : 1;
    p->params = P;
    p->params_gemm = Plin + sz[FL_P_WHEAD];
    p->accum = accum;
    p->ranks = ranks;
    p->zero1 = zero1 != 0;
    p->tokens_micro = N;
    p->tokens_step = N * accum * ranks;

    add(p, "parameters fp32", FL_PLAN_PERSISTENT, 4 * P / shard, zero1 ? "the master copy, this rank's shard" : "the master copy");
    add(p, "gradients fp32", FL_PLAN_PERSISTENT, 4 * P, "accumulated over the micro-batches");
    add(p, "AdamW m, v fp32", FL_PLAN_PERSISTENT, 8 * P / shard, zero1 ? "this rank's shard" : "");
    add(p, "GEMM weights bf16", FL_PLAN_PERSISTENT, 2 * p->params_gemm, "the Linears and the head");
    if (fp8) {
        add(p, "Linear weights e4m3", FL_PLAN_PERSISTENT, 2 * Plin, "K-major for the forward and for dgrad");
        const uint64_t sites = L * FL_LIN_COUNT * 3;
        add(p, "scaling state", FL_PLAN_PERSISTENT, sites * 4 * (delayed ? 2 + (uint64_t)cfg->recipe.history : 2),
            delayed ? "per site: scale, amax, amax history" : "per site: scale, amax");
    }
    /* saved for the backward, one micro-batch, all layers */
    add(p, "residual inputs fp32", FL_PLAN_SAVED, 2 * L * N * C * 4, "the inputs of both RMSNorms");
    add(p, "RMSNorm 1/rms fp32", FL_PLAN_SAVED, 2 * L * N * 4, "");
    add(p, fp8 ? "GEMM inputs e4m3 x2" : "GEMM inputs bf16", FL_PLAN_SAVED, 2 * L * N * (3 * C + F),
        fp8 ? "qkv, proj, fc, down inputs, row- and column-wise" : "qkv, proj, fc, down inputs");
    add(p, "q, k, v bf16", FL_PLAN_SAVED, 2 * L * N * 3 * C, "");
    add(p, "attention probabilities bf16", FL_PLAN_SAVED, 2 * L * B * H * T * T, "B x H x T x T per layer");
    add(p, "FFN pre-activation bf16", FL_PLAN_SAVED, 2 * L * N * G * F, G == 2 ? "gate and up" : "");
    add(p, "final RMSNorm in fp32 + 1/rms", FL_PLAN_SAVED, N * C * 4 + N * 4, "");
    add(p, "final RMSNorm out bf16", FL_PLAN_SAVED, 2 * N * C, "the head's input");
    add(p, "logits / dlogits bf16", FL_PLAN_SAVED, 2 * N * V, "the fused cross-entropy writes dlogits over them");
    add(p, "tokens, targets int32", FL_PLAN_SAVED, 2 * N * 4, "");
    /* transient in the backward */
    add(p, "residual gradient fp32 x2", FL_PLAN_TRANSIENT, 2 * N * C * 4, "");
    add(p, "dP bf16", FL_PLAN_TRANSIENT, 2 * B * H * T * T, "one layer's attention");
    add(p, "FFN gradients bf16", FL_PLAN_TRANSIENT, 2 * N * (G * F + F), "one layer: d pre-activation, d act");
    if (fp8) {
        const uint64_t widest = G * F > 3 * C ? G * F : 3 * C;
        add(p, "dY e5m2 x2", FL_PLAN_TRANSIENT, 2 * N * widest, "the widest Linear's dY, both layouts");
    }
    add(p, "cuBLASLt workspace", FL_PLAN_TRANSIENT, FL_PLAN_CUBLASLT_WORKSPACE, "");

    p->launch_fwd = FWD_ENDS + (uint32_t)L * (FWD_LAYER + (fp8 ? FWD_CAST : 0));
    p->launch_bwd = BWD_ENDS + (uint32_t)L * (BWD_LAYER + (fp8 ? BWD_CAST : 0));
    p->launch_opt = OPT + (delayed ? OPT_DELAYED : 0);
    p->launch_step = (uint64_t)accum * (p->launch_fwd + p->launch_bwd) + p->launch_opt;
    /* 6 flops per GEMM parameter and token (forward 2, backward 4), and the attention's two GEMMs,
       2 T C each per token and layer forward, counted over the full T x T square (PaLM's convention) */
    p->flops_token = 6.0 * (double)p->params_gemm + 12.0 * (double)L * (double)C * (double)T;
    return 0;
}

static void human(char *b, size_t n, uint64_t bytes)
{
    if (bytes >= (uint64_t)1 << 30)
        snprintf(b, n, "%.2f GiB", (double)bytes / (double)(1u << 30));
    else if (bytes >= (uint64_t)1 << 20)
        snprintf(b, n, "%.1f MiB", (double)bytes / (double)(1u << 20));
    else
        snprintf(b, n, "%.1f KiB", (double)bytes / 1024.0);
}

void fl_gpu_plan_print(FILE *f, const fl_gpu_plan *p, const fl_train_cfg *cfg, uint64_t device_bytes)
{
    static const char *const kinds[] = { "persistent", "saved", "transient" };
    const fl_model_cfg *m = &cfg->model;
    fprintf(f, "GPU step plan (host arithmetic; no device was used):\n");
    fprintf(f, "  model: %u layers, width %u, %u heads, ffn %u (%s), seq %u, vocab %u: %.1fM parameters (%.1fM in GEMMs)\n",
            m->L, m->C, m->H, m->F, fl_act_name(m->act), m->T, m->V, (double)p->params / 1e6, (double)p->params_gemm / 1e6);
    fprintf(f, "  batch: %u x %u tokens per micro-batch, %u micro-batches per step on %u rank%s%s: %llu tokens per step\n",
            m->B, m->T, p->accum, p->ranks, p->ranks == 1 ? "" : "s", p->zero1 ? " (ZeRO-1)" : "",
            (unsigned long long)p->tokens_step);
    fprintf(f, "  recipe: %s\n\n  %-32s %-11s %14s  %s\n", fl_recipe_name((fl_recipe_kind)cfg->recipe.kind), "buffer",
            "kind", "bytes", "");
    for (int i = 0; i < p->nbuf; i++) {
        char h[32];
        human(h, sizeof h, p->buf[i].bytes);
        fprintf(f, "  %-32s %-11s %14llu  %s%s%s\n", p->buf[i].name, kinds[p->buf[i].kind],
                (unsigned long long)p->buf[i].bytes, h, p->buf[i].what[0] ? "; " : "", p->buf[i].what);
    }
    char a[32], b[32], c[32], d[32];
    human(a, sizeof a, p->bytes[FL_PLAN_PERSISTENT]);
    human(b, sizeof b, p->bytes[FL_PLAN_SAVED]);
    human(c, sizeof c, p->bytes[FL_PLAN_TRANSIENT]);
    human(d, sizeof d, p->peak);
    fprintf(f, "\n  persistent %s + saved %s + transient %s = peak %s (%llu bytes)\n", a, b, c, d,
            (unsigned long long)p->peak);
    if (device_bytes) {
        char e[32];
        human(e, sizeof e, device_bytes);
        fprintf(f, "  device memory %s: %s\n", e,
                p->peak <= device_bytes ? "fits" : "DOES NOT FIT (fewer sequences per micro-batch and more --accum)");
    }
    fprintf(f, "  launches: %u forward + %u backward per micro-batch, %u optimizer per step: %llu per step\n",
            p->launch_fwd, p->launch_bwd, p->launch_opt, (unsigned long long)p->launch_step);
    fprintf(f, "  model FLOPs: %.3g per token (6 x GEMM parameters + 12 L C T), %.3g per step\n", p->flops_token,
            p->flops_token * (double)p->tokens_step);
}

int fl_train_preset(fl_train_cfg *cfg, const char *name, fl_act act)
{
    static const struct {
        const char *name;
        uint32_t L, C, H, F_gated, F_plain, T, B, accum;
        float lr;
    } presets[] = {
        { "124m", 12, 768, 12, 2048, 3072, 1024, 16, 32, 6e-4f },
        { "350m", 24, 1024, 16, 2752, 4128, 1024, 8, 64, 3e-4f },
    };
    for (size_t k = 0; k < sizeof presets / sizeof *presets; k++) {
        if (strcmp(name, presets[k].name))
            continue;
        fl_model_cfg *m = &cfg->model;
        m->L = presets[k].L;
        m->C = presets[k].C;
        m->H = presets[k].H;
        m->F = fl_act_gated(act) ? presets[k].F_gated : presets[k].F_plain;
        m->T = presets[k].T;
        m->B = presets[k].B;
        cfg->lr = presets[k].lr;
        cfg->lr_min_frac = 0.1f;
        cfg->wd = 0.1f;
        cfg->warmup = 700;
        cfg->schedule = FL_SCHED_COSINE;
        cfg->accum = presets[k].accum;
        return 0;
    }
    return -1;
}
