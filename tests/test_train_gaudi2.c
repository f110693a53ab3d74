/* test_train_gaudi2.c — the recipe paper-gaudi2 (experiments/train/recipe.h): the paper's recipe as
 * its authors' released code runs it on Gaudi2.
 *
 *  1. The flag: `--recipe paper-gaudi2` gives the settings the recipe fixes (history 1, max, margin 0,
 *     power-of-two scales, saturating, stochastically rounded dY) and passes fl_train_cfg_check; each
 *     of them changed afterwards is refused, with a message naming fp8-delayed; `--recipe
 *     fp8-delayed` after it keeps them.  The configuration record and train_args give the
 *     configuration back, bit for bit.
 *  2. The casts of an X site at step 1, after an amax A = 1.5 at step 0, on every float32 whose low
 *     16 bits are 0x0000, 0x7FFF, 0x8000 or 0xFFFF (2^18 values, both signs, subnormals, Inf, NaN):
 *     the forward cast is fl_encode_f32_bits into FL_DESC_E4M3_GAUDI2 (the generic encoder, RNE,
 *     saturating) of x * s4, decoded and divided by s4 = 2^floor(log2(240 / A)) = 128; the backward
 *     copy is the same with e5m2 and s5 = 2^floor(log2(57344 / A)) = 32768, round-to-nearest.  The
 *     site's scale, backward scale and amax_from, and its saturated / clipped / flushed counts (both
 *     casts) equal the ones counted here.  Spot values: 247.9 -> 240, 248 -> 240 (clipped), 448 ->
 *     240, 232 -> 224.
 *  3. A tiny run's sites.csv (through the CLI), every row: the scale came from the previous step's
 *     amax (amax_from at step t is the amax at t - 1: one step is one global batch); the clip mass is
 *     positive exactly when amax * s4 > 240 (the forward cast saturated, s4 from amax_from and 240);
 *     saturated > 0 exactly when that or amax * s5 > 57344 (the e5m2 copy saturated).  The run has
 *     rows where only the e5m2 copy saturates, and rows where 240 and TE's 448 disagree, so both
 *     checks can fail.
 *  4. The model's backward operands (one layer, SwiGLU, two steps): the down projection's wgrad copy
 *     of X and dgrad copy of W are the e5m2 casts of h and W_down with the site's backward scale;
 *     and <dX, X5> = <dW, W5> (both are sum G X5 W5 over the output gradient G), which holds for
 *     the e5m2 copies and not for the forward e4m3 casts in either place.
 *  5. Checkpoint and resume: config.json and the checkpoint's record say paper-gaudi2 with its
 *     settings; a run resumed from its step-15 checkpoint ends byte-identical to the run in one go
 *     (metrics.csv, sites.csv, telemetry.jsonl, checkpoint.bin); a version-5 checkpoint (the
 *     committed fixture) forks into paper-gaudi2.
 * Needs the CLI for 3 and 5: $FP8LAB (tests/run.sh sets it), default build/fp8lab; run from the
 * repository root (the fixture).
 */
#include "check.h"
#include "model_test.h"
#include "cli_test.h"
#include "dir_test.h"
#include "train/model.h"
#include "train/recipe.h"
#include "train/train.h"
#include "train/train_opts.h"
#include "fl_round.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

#include <stdarg.h>

static char tmp[256];

/* fmt with a, in one of 8 buffers used in turn: a path for the next few calls. */
static const char *P2(const char *fmt, const char *a)
{
    static char buf[8][1024];
    static int k;
    k = (k + 1) % 8;
    CHECK(snprintf(buf[k], sizeof buf[k], fmt, a) < (int)sizeof buf[k], "path too long");
    return buf[k];
}

__attribute__((format(printf, 1, 2))) static void sh(const char *fmt, ...)
{
    char cmd[3000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    CHECK(!system(cmd), "%s", cmd);
}

static int same_float(float a, float b)
{
    return (a != a && b != b) || (a == b && signbit(a) == signbit(b));
}

/* 2^floor(log2(max / a)) for finite a > 0, in double (exact). */
static double pow2_scale(double max, double a)
{
    return a > 0 ? exp2(floor(log2(max / a))) : 1.0;
}

/* ---- 1. the flag ---------------------------------------------------------------------------------- */

static void flags(void)
{
    fl_train_cfg c, d;
    int used;
    fl_train_cfg_default(&c);
    CHECK(fl_train_parse_flag(&c, "test", "--recipe", "paper-gaudi2", &used) == 0 && used == 1, "--recipe paper-gaudi2");
    const fl_recipe_cfg *r = &c.recipe;
    CHECK(r->kind == FL_RECIPE_PAPER_GAUDI2 && r->history == 1 && r->algo == FL_AMAX_MAX && r->margin == 0 && r->pow2 == 1 &&
              r->nosat == 0 && r->grad_sr == 1 && r->grad_current == 0 && r->fast_accum == 0,
          "the fixed settings: history %u algo %u margin %d pow2 %u nosat %u sr %u", r->history, r->algo, r->margin, r->pow2,
          r->nosat, r->grad_sr);
    CHECK(fl_train_cfg_check(&c) == NULL, "paper-gaudi2 refused: %s", fl_train_cfg_check(&c));
    static const char *const change[][2] = { { "--amax-history", "2" }, { "--amax-algo", "most_recent" },
                                             { "--margin", "1" },       { "--no-pow2", NULL },
                                             { "--fp8-overflow", "nan" }, { "--no-grad-sr", NULL },
                                             { "--grad-scaling", "current" }, { "--fast-accum", NULL } };
    for (size_t k = 0; k < sizeof change / sizeof change[0]; k++) {
        d = c;
        CHECK(fl_train_parse_flag(&d, "test", change[k][0], change[k][1], &used) == 0, "%s", change[k][0]);
        const char *why = fl_train_cfg_check(&d);
        CHECK(why && (strstr(why, "fp8-delayed") || strstr(why, "fast-accum")), "%s %s after paper-gaudi2: %s",
              change[k][0], change[k][1] ? change[k][1] : "", why ? why : "accepted");
        CHECK(fl_train_parse_flag(&d, "test", "--recipe", "fp8-delayed", &used) == 0 && d.recipe.kind == FL_RECIPE_FP8_DELAYED,
              "fp8-delayed");
        if (k < 6)
            CHECK(fl_train_cfg_check(&d) == NULL, "fp8-delayed with %s: %s", change[k][0], fl_train_cfg_check(&d));
    }
    d = c; /* fp8-delayed after paper-gaudi2 keeps the settings: today's demo recipe on TE's formats */
    CHECK(fl_train_parse_flag(&d, "test", "--recipe", "fp8-delayed", &used) == 0, "fp8-delayed");
    fl_recipe_cfg p = d.recipe;
    fl_recipe_paper(&p, 0);
    CHECK(!memcmp(&p, &d.recipe, sizeof p), "--recipe fp8-delayed after paper-gaudi2 is fl_recipe_paper");
    /* the record and train_args give it back (with site overrides and a BF16 start) */
    CHECK(fl_train_parse_flag(&c, "test", "--site", "*.down.in=bf16", &used) == 0, "site");
    CHECK(fl_train_parse_flag(&c, "test", "--fp8-start", "3", &used) == 0, "fp8-start");
    CHECK(fl_train_cfg_check(&c) == NULL, "with overrides: %s", fl_train_cfg_check(&c));
    size_t len;
    char err[2000], args[8192];
    char *rec = fl_train_cfg_store(&c, &len);
    CHECK(rec && !fl_train_cfg_load(&d, rec, len, err, sizeof err), "load: %s", err);
    CHECK(!memcmp(&c, &d, sizeof c), "the record does not give the configuration back");
    CHECK(strstr(rec, "\nrecipe=paper-gaudi2\n") && strstr(rec, "\namax_history=1\n"), "record: %s", rec);
    free(rec);
    CHECK(!fl_train_cfg_args(args, sizeof args, &c), "args");
    fl_train_cfg_default(&d);
    char *w[64], *save = NULL;
    int nw = 0;
    for (char *t = strtok_r(args, " ", &save); t && nw < 64; t = strtok_r(NULL, " ", &save))
        w[nw++] = t[0] == '\'' ? (t[strlen(t) - 1] = 0, t + 1) : t; /* '*.down.in=bf16' */
    for (int i = 0; i < nw; i++) {
        CHECK(fl_train_parse_flag(&d, "test", w[i], i + 1 < nw ? w[i + 1] : NULL, &used) == 0, "word %s", w[i]);
        i += used;
    }
    CHECK(!memcmp(&c, &d, sizeof c), "train_args do not give the configuration back");
    printf("  --recipe paper-gaudi2: its fixed settings, each change refused, fp8-delayed after it keeps them; "
           "record and train_args round trips\n");
}

/* ---- 2. the casts, enumerated --------------------------------------------------------------------- */

static void casts(void)
{
    static const fl_format_desc g = FL_DESC_E4M3_GAUDI2, e5 = FL_DESC_E5M2;
    CHECK(fl_decode_f32(&g, 0x77u) == 240.0f && fl_is_inf(&g, 0x78u) && fl_is_nan(&g, 0x79u), "the descriptor");
    const size_t n = (size_t)1 << 18, C = 1024, R = n / C;
    float *x = malloc(n * sizeof *x), *y4 = malloc(n * sizeof *x), *y5 = malloc(n * sizeof *x);
    static const uint32_t low[4] = { 0x0000u, 0x7FFFu, 0x8000u, 0xFFFFu };
    for (size_t i = 0; i < n; i++)
        x[i] = fl_f32_from_bits((uint32_t)((i >> 2) << 16) | low[i & 3]);
    const char *names[1] = { "L0.fc.in" };
    const uint32_t roles[1] = { FL_ROLE_IN };
    fl_recipe_cfg c;
    fl_recipe_cfg_default(&c, FL_RECIPE_PAPER_GAUDI2);
    for (int slow = 0; slow < 2; slow++) {
        fl_recipe r;
        CHECK(!fl_recipe_init(&r, &c, 1, names, roles, NULL), "init");
        r.slow_cast = slow;
        CHECK(r.sites[0].gaudi2 && r.sites[0].dl && r.sites[0].dl_bwd && fl_recipe_needs_bwd_copy(&r, 0), "a Gaudi2 site");
        const float a0 = 1.5f;
        float one = a0, out;
        fl_recipe_step_begin(&r, 0); /* step 0: the amax A */
        fl_recipe_cast(&r, 0, &out, &one, 1, 1, 0, 1, NULL);
        fl_recipe_step_end(&r);
        fl_recipe_step_begin(&r, 0);
        r.step = 1;
        fl_recipe_cast(&r, 0, y4, x, R, C, 0, 1, NULL);
        fl_recipe_cast(&r, 0, y5, x, R, C, 1, 0, NULL);
        const float s4 = (float)pow2_scale(240, a0), s5 = (float)pow2_scale(57344, a0);
        const fl_site *st = &r.sites[0];
        CHECK(s4 == 128.0f && s5 == 32768.0f && st->scale == s4 && st->scale_bwd == s5 && st->amax_from == a0,
              "scales %a %a amax_from %a", st->scale, st->scale_bwd, st->amax_from);
        uint64_t sat = 0, clip = 0, ftz = 0, nan_in = 0;
        for (size_t i = 0; i < n; i++) {
            const float v4 = x[i] * s4, v5 = x[i] * s5;
            const float w4 = fl_decode_f32(&g, fl_encode_f32_bits(&g, fl_f32_bits(v4), FL_RND_NE, FL_OVF_SATURATE, 0)) *
                             (1.0f / s4);
            const float w5 = fl_decode_f32(&e5, fl_encode_f32_bits(&e5, fl_f32_bits(v5), FL_RND_NE, FL_OVF_SATURATE, 0)) *
                             (1.0f / s5);
            CHECK(same_float(y4[i], w4), "slow %d forward x=%a (0x%08x): got %a want %a", slow, x[i], fl_f32_bits(x[i]), y4[i], w4);
            CHECK(same_float(y5[i], w5), "slow %d e5m2 copy x=%a (0x%08x): got %a want %a", slow, x[i], fl_f32_bits(x[i]), y5[i],
                  w5);
            if (x[i] != x[i]) {
                nan_in += 2;
                continue;
            }
            sat += (fabsf(v4) > 240.0f) + (fabsf(v5) > 57344.0f);
            clip += (fabsf(v4) >= 248.0f) + (fabsf(v5) >= 61440.0f);
            ftz += (x[i] != 0 && w4 == 0) + (x[i] != 0 && w5 == 0);
        }
        CHECK(st->st.sat == sat && st->st.clip == clip && st->st.ftz == ftz && st->st.nan_in == nan_in && st->st.n == 2 * n,
              "slow %d counters: sat %llu/%llu clip %llu/%llu ftz %llu/%llu nan %llu/%llu", slow,
              (unsigned long long)st->st.sat, (unsigned long long)sat, (unsigned long long)st->st.clip,
              (unsigned long long)clip, (unsigned long long)st->st.ftz, (unsigned long long)ftz,
              (unsigned long long)st->st.nan_in, (unsigned long long)nan_in);
        /* spot values at scale 128: 240 is the largest, 248 a tie that overflows (saturates), 448 is
           beyond it (TE's e4m3 would keep 448), 232 a tie between 224 and 240 (to 224, even) */
        static const float in[5] = { 247.9f, 248.0f, 448.0f, 232.0f, -1000.0f }, want[5] = { 240, 240, 240, 224, -240 };
        float xs[5], ys[5];
        for (int k = 0; k < 5; k++)
            xs[k] = in[k] / s4;
        fl_recipe_cast(&r, 0, ys, xs, 1, 5, 0, 0, NULL);
        for (int k = 0; k < 5; k++)
            CHECK(ys[k] * s4 == want[k], "slow %d: %g -> %g, want %g", slow, (double)in[k], (double)(ys[k] * s4), (double)want[k]);
        fl_recipe_free(&r);
    }
    free(x);
    free(y4);
    free(y5);
    printf("  casts: 2^18 patterns through the forward (Gaudi2 e4m3, scale 128) and backward (e5m2, 32768) casts "
           "equal the generic encoder, fast and reference loops; counters and scales\n");
}

/* ---- 3. a tiny run's sites.csv -------------------------------------------------------------------- */

#define TINY "--width", "16", "--layers", "1", "--heads", "2", "--ffn", "32", "--seq", "16", "--batch", "4", \
             "--data-len", "4096", "--lr", "1e-2", "--warmup", "2", "--threads", "1", "--quiet"

static void sites_csv(void)
{
    char dir[400], path[500];
    snprintf(dir, sizeof dir, "%s/run", tmp);
    const char *a[] = { "train", "--recipe", "paper-gaudi2", TINY, "--steps", "60", "--out", dir, NULL };
    CHECK(run(P2("%s/log", tmp), a) == 0, "the tiny run");
    snprintf(path, sizeof path, "%s/sites.csv", dir);
    FILE *f = fopen(path, "r");
    CHECK(f, "%s", path);
    char line[512];
    CHECK(fgets(line, sizeof line, f) && !strcmp(line, "step,site,amax,amax_from,staleness,saturated,clip_mass,underflow\n"),
          "header");
    enum { NS = 16 };
    char names[NS][40];
    double prev[NS];
    int ns = 0;
    long rows = 0, fwd_sat = 0, copy_only = 0, disagree = 0, gout_sat = 0;
    while (fgets(line, sizeof line, f)) {
        long step;
        char site[40];
        double amax, from, stale, sat, clip, uf;
        CHECK(sscanf(line, "%ld,%39[^,],%lf,%lf,%lf,%lf,%lf,%lf", &step, site, &amax, &from, &stale, &sat, &clip, &uf) == 8,
              "row %s", line);
        int k = 0;
        while (k < ns && strcmp(names[k], site))
            k++;
        if (k == ns) {
            CHECK(ns < NS && step == 0, "site %s first at step %ld", site, step);
            snprintf(names[ns++], sizeof names[0], "%s", site);
        }
        /* the amax of the previous global batch, i.e. of the previous step */
        CHECK(step == 0 ? from == 0 : from == prev[k], "%s step %ld: amax_from %.9g, the previous step's amax %.9g", site,
              step, from, step ? prev[k] : 0.0);
        prev[k] = amax;
        const int gout = strstr(site, ".gout") != NULL;
        const double s5 = pow2_scale(57344, from);
        if (gout) {
            CHECK((sat > 0) == (amax * s5 > 57344), "%s step %ld: saturated %g, amax %.9g x %g", site, step, sat, amax, s5);
            gout_sat += sat > 0;
        } else {
            const double s4 = pow2_scale(240, from), s448 = pow2_scale(448, from);
            const int f4 = amax * s4 > 240, f5 = amax * s5 > 57344;
            CHECK((clip > 0) == f4, "%s step %ld: clip mass %g, amax %.9g x %g against 240", site, step, clip, amax, s4);
            CHECK((sat > 0) == (f4 || f5), "%s step %ld: saturated %g, forward %d e5m2 copy %d", site, step, sat, f4, f5);
            fwd_sat += f4;
            copy_only += f5 && !f4;
            disagree += f4 != (amax * s448 > 448);
        }
        rows++;
    }
    fclose(f);
    CHECK(ns == 12 && rows == 60 * 12, "%d sites, %ld rows", ns, rows);
    CHECK(fwd_sat > 0 && copy_only > 0 && disagree > 0 && gout_sat > 0,
          "the run must exercise each check: forward saturations %ld, e5m2-copy-only %ld, 240 vs 448 disagreements %ld, "
          "dY saturations %ld", fwd_sat, copy_only, disagree, gout_sat);
    printf("  sites.csv (%ld rows): scales from the previous step's amax, clip mass at 240, saturation of the forward "
           "cast or the e5m2 copy (%ld forward, %ld copy only, %ld rows where 240 and 448 disagree)\n",
           rows, fwd_sat, copy_only, disagree);
}

/* ---- 4. the model's backward operands ------------------------------------------------------------- */

static double dot(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += (double)a[i] * (double)b[i];
    return s;
}

static double dot_abs(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += fabs((double)a[i] * (double)b[i]);
    return s;
}

static void model_operands(void)
{
    fl_model_cfg cfg = { .V = 256, .C = 16, .L = 1, .H = 2, .F = 32, .T = 8, .B = 4, .init_std = 0.1f };
    CHECK(!fl_act_parse(&cfg.act, "swiglu"), "act");
    test_model tm;
    test_model_init(&tm, &cfg, FL_RECIPE_PAPER_GAUDI2, 11);
    const size_t N = (size_t)cfg.B * cfg.T, C = cfg.C, F = cfg.F;
    uint16_t tok[4 * 9];
    for (int i = 0; i < 36; i++)
        tok[i] = (uint16_t)((i * 37 + 11) % 256);
    for (uint64_t step = 0; step < 2; step++) { /* step 1 scales from step 0's amaxes */
        fl_recipe_step_begin(&tm.rec, 0);
        tm.rec.step = step;
        fl_model_zero_grad(&tm.m);
        fl_model_forward(&tm.m, tok);
        fl_model_backward(&tm.m);
        fl_recipe_step_end(&tm.rec);
    }
    const fl_lin_q *q = &tm.m.lq[FL_LIN_DOWN];
    const fl_site *sx = &tm.rec.sites[FL_SITE(0, FL_LIN_DOWN, FL_ROLE_IN)], *sw = &tm.rec.sites[FL_SITE(0, FL_LIN_DOWN, FL_ROLE_W)];
    CHECK(q->xts == q->xqt && q->wbs == q->wqt && q->xs == q->xq && q->ws == q->wq, "the backward reads the copies");
    static const fl_format_desc e5 = FL_DESC_E5M2;
    const float *W = tm.m.p[FL_P_WDOWN], *h = tm.m.h;
    for (size_t i = 0; i < N * F; i++) {
        const float want = fl_decode_f32(&e5, fl_encode_f32_bits(&e5, fl_f32_bits(h[i] * sx->scale_bwd), FL_RND_NE,
                                                                 FL_OVF_SATURATE, 0)) * (1.0f / sx->scale_bwd);
        CHECK(same_float(q->xqt[i], want), "X copy %zu: %a want %a", i, q->xqt[i], want);
    }
    for (size_t i = 0; i < C * F; i++) {
        const float want = fl_decode_f32(&e5, fl_encode_f32_bits(&e5, fl_f32_bits(W[i] * sw->scale_bwd), FL_RND_NE,
                                                                 FL_OVF_SATURATE, 0)) * (1.0f / sw->scale_bwd);
        CHECK(same_float(q->wqt[i], want), "W copy %zu: %a want %a", i, q->wqt[i], want);
    }
    /* dX = G . W5 (m.dh: the down projection's dgrad, the only layer), dW = G^T . X5: <dX, X5> = <dW, W5> */
    const float *dW = tm.m.g[FL_P_WDOWN], *dX = tm.m.dh;
    const double tol = 1e-5 * (dot_abs(dX, q->xqt, N * F) + dot_abs(dW, q->wqt, C * F));
    const double both = fabs(dot(dX, q->xqt, N * F) - dot(dW, q->wqt, C * F));
    const double fwd_x = fabs(dot(dX, q->xq, N * F) - dot(dW, q->wqt, C * F));
    const double fwd_w = fabs(dot(dX, q->xqt, N * F) - dot(dW, q->wq, C * F));
    CHECK(both <= tol, "<dX, X5> - <dW, W5> = %g (tolerance %g)", both, tol);
    CHECK(fwd_x > 10 * tol && fwd_w > 10 * tol, "the identity must fail with the forward casts: %g, %g (tolerance %g)", fwd_x,
          fwd_w, tol);
    test_model_free(&tm);
    printf("  model: the down projection's backward reads the e5m2 copies of h and W (identity off by %.2g, %.2g and "
           "%.2g with a forward cast in its place)\n", both, fwd_x, fwd_w);
}

/* ---- 5. checkpoint and resume --------------------------------------------------------------------- */

static void resume_and_fork(void)
{
    char A[400], B[400];
    snprintf(A, sizeof A, "%s/A", tmp);
    snprintf(B, sizeof B, "%s/B", tmp);
    const char *a[] = { "train", "--recipe", "paper-gaudi2", "--act", "smooth_swiglu", TINY, "--steps", "30", "--keep-ckpt",
                        "15", "--site", "L0.down.in=current", "--out", A, NULL };
    CHECK(run(P2("%s/log", tmp), a) == 0, "run A");
    json_error_t je;
    json_t *cj = json_load_file(P2("%s/config.json", A), 0, &je);
    CHECK(cj && !strcmp(json_string_value(json_object_get(cj, "recipe")), "paper-gaudi2") &&
              json_integer_value(json_object_get(cj, "amax_history")) == 1 && json_is_true(json_object_get(cj, "pow2_scales")) &&
              json_is_true(json_object_get(cj, "grad_sr")),
          "config.json");
    json_decref(cj);
    fl_train_cfg c;
    fl_train_state st;
    char err[4600];
    CHECK(!fl_train_read_cfg(&c, &st, A, err, sizeof err), "%s", err);
    CHECK(c.recipe.kind == FL_RECIPE_PAPER_GAUDI2 && c.recipe.history == 1 && c.recipe.pow2 && st.step == 30,
          "the checkpoint's configuration");
    sh("cp -r '%s' '%s' && cp '%s/checkpoint-15.bin' '%s/checkpoint.bin'", A, B, B, B);
    const char *b[] = { "train", "--resume", B, "--quiet", NULL };
    CHECK(run(P2("%s/log", tmp), b) == 0, "resume B");
    static const char *const files[] = { "metrics.csv", "sites.csv", "telemetry.jsonl", "checkpoint.bin" };
    for (int k = 0; k < 4; k++) {
        char fa[600], fb[600];
        snprintf(fa, sizeof fa, "%s/%s", A, files[k]);
        snprintf(fb, sizeof fb, "%s/%s", B, files[k]);
        same_file(fa, fb);
    }
    /* a version-5 checkpoint (fp8-delayed, history 4) forks into paper-gaudi2 */
    const char *f[] = { "train", "--fork", "tests/fixtures/train_ckpt_v5/checkpoint.bin", "--recipe", "paper-gaudi2",
                        "--out", P2("%s/F", tmp), "--threads", "1", "--quiet", NULL };
    CHECK(run(P2("%s/log", tmp), f) == 0, "the fork of the version-5 fixture");
    cj = json_load_file(P2("%s/F/config.json", tmp), 0, &je);
    CHECK(cj && !strcmp(json_string_value(json_object_get(cj, "recipe")), "paper-gaudi2") &&
              json_integer_value(json_object_get(cj, "amax_history")) == 1 && json_integer_value(json_object_get(cj, "fork_step")) == 10,
          "the fork's config.json");
    json_decref(cj);
    printf("  config.json and the checkpoint's record; resumed from step 15, the same bytes; a version-5 checkpoint forks "
           "into paper-gaudi2\n");
}

int main(void)
{
    cli_init();
    dir_make(tmp, sizeof tmp, "/tmp/fp8lab_test_gaudi2_XXXXXX");
    flags();
    casts();
    sites_csv();
    model_operands();
    resume_and_fork();
    dir_remove(tmp);
    PASS("test_train_gaudi2");
}
