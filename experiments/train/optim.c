/* optim.c — gradient norm, learning-rate schedule and AdamW of the training loop (see optim.h). */
#include "optim.h"

#include "train_step.h"

#include <math.h>

float fl_lr_at(const fl_train_cfg *c, uint64_t step)
{
    if (step < c->warmup)
        return c->lr * (float)(step + 1) / (float)c->warmup;
    if (c->schedule == FL_SCHED_CONSTANT || c->steps <= c->warmup)
        return c->lr;
    const double p = (double)(step - c->warmup) / (double)(c->steps - c->warmup);
    const double k = c->lr_min_frac + (1.0 - c->lr_min_frac) * 0.5 * (1.0 + cos(3.141592653589793 * p));
    return (float)(c->lr * k);
}

float fl_grad_norm(const fl_model *m)
{
    double gn2 = 0.0;
    for (size_t i = 0; i < m->nparams; i++)
        gn2 += (double)m->grads[i] * m->grads[i];
    return (float)sqrt(gn2);
}

int fl_param_decays(int tensor)
{
    return tensor == FL_P_WTE || tensor == FL_P_WPE || tensor == FL_P_WQKV || tensor == FL_P_WPROJ ||
           tensor == FL_P_WFC || tensor == FL_P_WDOWN || tensor == FL_P_WHEAD;
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

void fl_adamw_step(const fl_train_cfg *cfg, fl_model *m, float *am, float *av, uint64_t step, float lr,
                   float gscale, fl_train_state *st)
{
    const double t = (double)(step + 1);
    const float bc1 = (float)(1.0 - pow(cfg->beta1, t)), bc2 = (float)(1.0 - pow(cfg->beta2, t));
    for (int k = 0; k < FL_P_COUNT; k++) {
        float *p = m->p[k], *g = m->g[k], *mk = am + (p - m->params), *vk = av + (p - m->params);
        const float wd = fl_param_decays(k) ? cfg->wd : 0.0f;
        const size_t n = m->sizes[k];
        /* the GPU step's kernel and this harness share the element functions (kernels/train_step.h) */
        const fl_adamw_hp hp = { .b1 = cfg->beta1, .b2 = cfg->beta2, .bc1 = bc1, .bc2 = bc2, .eps = cfg->adam_eps,
                                 .lr = lr, .wd = wd, .gscale = gscale };
        fl_adamw(p, g, mk, vk, n, &hp);
        if (cfg->recipe.fp8_adam && n) {
            moment_cast(mk, n, FL_FMT_E4M3, &st->adam_sat, &st->adam_ftz);
            moment_cast(vk, n, FL_FMT_E5M2, &st->adam_sat, &st->adam_ftz);
        }
    }
}
