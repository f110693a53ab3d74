/* test_train_grad.c — the harness's backward pass against finite differences, for every activation.
 *
 * The activations come from fl_act_table (ffn_act.h: the TRAIN parts of reference/act_list.h), every
 * row at every order, so a new one is tested by adding its row to the list.
 * A tiny model (V 16, C 8, L 2, H 2, F 8, T 5, B 2) in the fp32 recipe.  For every parameter
 * tensor (embeddings, RMSNorm gains, qkv, proj, fc, down, activation coefficients, head) and a few
 * entries of each, the analytic gradient from fl_model_backward is compared with the central
 * difference (L(p + h) - L(p - h)) / 2h, h = 1e-3 (weights initialised with std 0.5 so that the
 * gradients are O(1e-2 .. 1)).
 * Tolerance |fd - g| <= 2e-2 |g| + 4e-4.  Why: the loss is a float32 computation whose rounding
 * error is a few ulps of L ~ 3 (|dL| ~ 4 * 2^-24 * 3 ~ 7e-7 per evaluation), so the difference
 * quotient carries ~2 * 7e-7 / 2e-3 = 7e-4 worst case, ~2e-4 typical; truncation error is
 * h^2/6 |L'''| ~ 1e-7.  The relative term covers the kinks of ReLU-family activations crossed by
 * the +-h perturbation.  A wrong backward (missing term, wrong index) gives errors of O(|g|).
 * Every entry is checked; the test fails on the first violation, printing it in hex floats.
 * Then gradient accumulation (--accum): two forward and backward passes without zeroing give the two
 * batches' gradients summed, within 1e-5 per tensor (relative 2-norm).
 */
#include "check.h"
#include "model_test.h"
#include "train/model.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

static float loss_at(fl_model *m, const uint16_t *tok) { return fl_model_forward(m, tok); }

static void check_act(const char *name)
{
    fl_model_cfg cfg = { .V = 16, .C = 8, .L = 2, .H = 2, .F = 8, .T = 5, .B = 2, .init_std = 0.5f };
    CHECK(!fl_act_parse(&cfg.act, name), "parse %s", name);
    test_model tm;
    test_model_init(&tm, &cfg, FL_RECIPE_FP32, 7);
    /* perturb the gains and coefficients away from their init so their gradients are generic */
    for (size_t i = 0; i < tm.m.sizes[FL_P_LN1]; i++) {
        tm.m.p[FL_P_LN1][i] += 0.1f * (float)((i * 7) % 5) - 0.2f;
        tm.m.p[FL_P_LN2][i] += 0.1f * (float)((i * 3) % 5) - 0.2f;
    }
    for (size_t i = 0; i < tm.m.sizes[FL_P_ACOEF]; i++)
        tm.m.p[FL_P_ACOEF][i] += 0.05f * (float)(i % 3);
    uint16_t tok[2 * 6];
    for (int i = 0; i < 12; i++)
        tok[i] = (uint16_t)((i * 5 + 3) % 16);
    fl_recipe_step_begin(&tm.rec, 0);
    fl_model_zero_grad(&tm.m);
    loss_at(&tm.m, tok);
    fl_model_backward(&tm.m);
    const float h = 1e-3f;
    int checked = 0;
    for (int t = 0; t < FL_P_COUNT; t++) {
        if (t == FL_P_ACOEF && !fl_act_ncoef(cfg.act))
            continue;
        const size_t n = tm.m.sizes[t];
        const size_t stride = n > 12 ? n / 12 + 1 : 1;
        for (size_t i = 0; i < n; i += stride) {
            if (t == FL_P_ACOEF && (i % FL_ACT_NCOEF) >= (size_t)fl_act_ncoef(cfg.act))
                continue;
            float *p = &tm.m.p[t][i];
            const float p0 = *p, g = tm.m.g[t][i];
            *p = p0 + h;
            const float lp = loss_at(&tm.m, tok);
            *p = p0 - h;
            const float lm = loss_at(&tm.m, tok);
            *p = p0;
            const double fd = ((double)lp - (double)lm) / (2.0 * h);
            CHECK(fabs(fd - g) <= 2e-2 * fabs(g) + 4e-4,
                  "%s tensor %d index %zu: analytic %a (%g) finite difference %a (%g)", name, t, i, g, g, fd, fd);
            checked++;
        }
    }
    CHECK(checked > 80, "%s: only %d entries checked", name, checked);

    /* gradient accumulation (--accum): a second forward and backward add their gradients to the first's;
       per tensor within 1e-5 (relative 2-norm) of the two batches' gradients summed (the same terms, the
       additions in another order; a backward that overwrote would be off by O(1)) */
    uint16_t tok2[2 * 6];
    for (int i = 0; i < 12; i++)
        tok2[i] = (uint16_t)((i * 7 + 1) % 16);
    const size_t np = tm.m.nparams;
    float *g0 = malloc(np * sizeof *g0), *g1 = malloc(np * sizeof *g1);
    CHECK(g0 && g1, "memory");
    const uint16_t *tb[2] = { tok, tok2 };
    for (int b = 0; b < 2; b++) {
        fl_model_zero_grad(&tm.m);
        loss_at(&tm.m, tb[b]);
        fl_model_backward(&tm.m);
        memcpy(b ? g1 : g0, tm.m.grads, np * sizeof *g0);
    }
    fl_model_zero_grad(&tm.m);
    for (int b = 0; b < 2; b++) {
        loss_at(&tm.m, tb[b]);
        fl_model_backward(&tm.m);
    }
    size_t off = 0;
    for (int t = 0; t < FL_P_COUNT; off += tm.m.sizes[t++]) {
        double d2 = 0.0, n2 = 0.0;
        for (size_t i = off; i < off + tm.m.sizes[t]; i++) {
            const double want = (double)g0[i] + g1[i];
            d2 += (tm.m.grads[i] - want) * (tm.m.grads[i] - want);
            n2 += want * want;
        }
        CHECK(d2 <= 1e-10 * n2, "%s tensor %d: two backward passes add up to %g (relative) off the sum of their gradients",
              name, t, n2 > 0 ? sqrt(d2 / n2) : sqrt(d2));
    }
    free(g0);
    free(g1);
    test_model_free(&tm);
}

int main(void)
{
    /* One thread: the tiny model's thousands of forward passes are all OpenMP barriers and no work;
       on a loaded machine two spinning threads made this test take minutes instead of a second. */
    omp_set_num_threads(1);
    /* every training activation of reference/act_list.h at every order it takes */
    fl_act acts[64];
    const int nact = fl_act_variants(acts, 64);
    CHECK(nact >= FL_ACT_COUNT && nact <= 64, "%d activation variants", nact);
    for (int i = 0; i < nact; i++)
        check_act(fl_act_name(acts[i]));
    PASS("test_train_grad");
}
