/* test_train_recipes.c — the harness's casts, recipes and telemetry files.
 *
 *  1. The telemetry moments (fl_recipe_row_moments: 8 rows in vector lanes at AVX-512) equal the
 *     sequential double sums row by row, at every instruction set of the cast engine.
 *  2. A recipe's casts through the cast engine's kernels (numerics/cast.h; tests/test_cast.c checks
 *     them on every input) equal its reference loop (slow_cast) bit for bit (NaN compared as a
 *     class) with identical counters and moments, for every recipe, both overflow modes, on a
 *     tensor with normals, subnormals, zeros, overflows, Inf and NaN.
 *  3. Smooth-SwiGLU: the cast of the down projection's input under fp8-delayed, per channel and per
 *     token, equals the kernels' fused twin fl_smooth_swiglu_fwd (e4m3 with the same scale).
 *  4. Every recipe trains 6 steps (fl_train_run, a tiny model) with a finite loss, and its files are
 *     well-formed: metrics.csv (header + one row per step, 20 columns), telemetry.jsonl (each line
 *     a JSON object with the per-site and per-FFN fields), config.json and summary.json.
 */
#include "check.h"
#include "convert.h"
#include "convert_simd.h"
#include "train/data.h"
#include "kernels.h"
#include "train/model.h"
#include "train/train.h"

#include <jansson.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int same_float(float a, float b)
{
    return (a != a && b != b) || fl_f32_bits(a) == fl_f32_bits(b);
}

/* A test tensor (R, C) exercising every path. */
static void fill(float *x, size_t n)
{
    uint64_t s = 12345;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const uint32_t r = (uint32_t)(s >> 33);
        float v = (float)((int)(r % 2001) - 1000) * 0x1p-7f * fl_pow2f((int)(r >> 20) % 24 - 12);
        switch (i % 97) {
        case 0: v = 0.0f; break;
        case 1: v = -0.0f; break;
        case 2: v = 1e-30f; break;
        case 3: v = 1e6f; break;
        case 4: v = -7e4f; break;
        case 5: v = INFINITY; break;
        case 6: v = -INFINITY; break;
        case 7: v = NAN; break;
        default: break;
        }
        x[i] = v;
    }
}

/* fl_recipe_row_moments against the sequential double loop, bit for bit, row by row: values with
   full 24-bit significands over a few binades (their squares and fourth powers overflow a double's
   53 bits once summed, so a changed order shows in some rows), NaN in places (skipped), row scales
   rs and scales s with a NaN-making product (Inf * 0) in one row, and shapes whose rows and columns
   are not multiples of 8. */
static void check_row_moments(void)
{
    static const size_t shapes[4][2] = { { 1000, 75 }, { 37, 8 }, { 9, 3 }, { 64, 256 } };
    uint64_t st = 99;
    long rows = 0;
    for (int sh = 0; sh < 4; sh++) {
        const size_t R = shapes[sh][0], C = shapes[sh][1];
        float *x = malloc(R * C * sizeof *x), *rs = malloc(R * sizeof *rs), *s = malloc(R * sizeof *s);
        double *rm = malloc(2 * R * sizeof *rm);
        for (size_t i = 0; i < R * C; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            const uint32_t r = (uint32_t)(st >> 33);
            x[i] = ((r & 1) ? -1.0f : 1.0f) * (1.0f + (float)(r >> 9 & 0x7FFFFF) * 0x1p-23f) * fl_pow2f((int)(r % 13) - 6);
            if (i % 53 == 7)
                x[i] = NAN;
        }
        for (size_t i = 0; i < R; i++) {
            rs[i] = fl_pow2f((int)(i % 5) - 2);
            s[i] = i == 3 ? 0.0f : 448.0f / (float)(i + 1);
        }
        if (R > 3 && C > 1)
            x[3 * C + 1] = INFINITY; /* Inf * 0 = NaN: skipped in row 3 */
        static const int isas[3] = { FL_ISA_SCALAR, FL_ISA_AVX2, FL_ISA_AVX512 };
        for (int lvl = 0; lvl < 6; lvl++) {
            const int withrs = lvl & 1, isa = isas[lvl >> 1];
            if (isa > fl_cpu_isa())
                continue;
            fl_convert_set_isa(isa); /* the cast engine's level (numerics/cast.h) */
            fl_recipe_row_moments(rm, x, R, C, withrs ? rs : NULL, s);
            for (size_t i = 0; i < R; i++) {
                double s2 = 0.0, s4 = 0.0;
                for (size_t c = 0; c < C; c++) {
                    const float xv = x[i * C + c] * (withrs ? rs[i] : 1.0f);
                    if (isnan(xv * s[i]))
                        continue;
                    const double d2 = (double)xv * xv;
                    s2 += d2;
                    s4 += d2 * d2;
                }
                CHECK(rm[2 * i] == s2 && rm[2 * i + 1] == s4, "row moments %zux%zu rs=%d row %zu: %a %a, want %a %a", R, C,
                      withrs, i, rm[2 * i], rm[2 * i + 1], s2, s4);
                rows++;
            }
        }
        free(x);
        free(rs);
        free(s);
        free(rm);
    }
    fl_convert_set_isa(-1);
    printf("  row moments equal the sequential double sums in %ld rows (every level of the cast engine)\n", rows);
}

static void check_cast_paths(void)
{
    const size_t R = 130, C = 200;
    float *x = malloc(R * C * sizeof *x), *y1 = malloc(R * C * sizeof *x), *y2 = malloc(R * C * sizeof *x);
    fill(x, R * C);
    const char *names[3] = { "in", "w", "gout" };
    const uint32_t roles[3] = { FL_ROLE_IN, FL_ROLE_W, FL_ROLE_GOUT };
    for (int k = 0; k < FL_RECIPE_COUNT; k++)
        for (int nosat = 0; nosat < 2; nosat++)
            for (int site = 0; site < 3; site++)
                for (int tr = 0; tr < 2; tr++) {
                    fl_recipe_cfg c;
                    fl_recipe_cfg_default(&c, (fl_recipe_kind)k);
                    c.nosat = (uint32_t)nosat;
                    c.history = 4;
                    fl_recipe a, b;
                    CHECK(!fl_recipe_init(&a, &c, 3, names, roles, NULL) && !fl_recipe_init(&b, &c, 3, names, roles, NULL), "init");
                    b.slow_cast = 1;
                    for (int step = 0; step < 2; step++) { /* step 1 uses a delayed scale from step 0 */
                        fl_recipe_step_begin(&a, 1);
                        fl_recipe_step_begin(&b, 1);
                        fl_recipe_cast(&a, site, y1, x, R, C, tr, 1, NULL);
                        fl_recipe_cast(&b, site, y2, x, R, C, tr, 1, NULL);
                        for (size_t i = 0; i < R * C; i++)
                            CHECK(same_float(y1[i], y2[i]), "%s nosat=%d site %d tr %d step %d: x=%a fast %a ref %a",
                                  fl_recipe_name((fl_recipe_kind)k), nosat, site, tr, step, x[i], y1[i], y2[i]);
                        const fl_cast_stats *p = &a.sites[site].st, *q = &b.sites[site].st;
                        CHECK(p->n == q->n && p->sat == q->sat && p->clip == q->clip && p->nan_out == q->nan_out &&
                                  p->inf_out == q->inf_out && p->nan_in == q->nan_in && p->ftz == q->ftz &&
                                  same_float(p->amax, q->amax) && p->sum2 == q->sum2 && p->sum4 == q->sum4,
                              "%s nosat=%d site %d: counters differ (sat %llu/%llu nan %llu/%llu inf %llu/%llu ftz %llu/%llu)",
                              fl_recipe_name((fl_recipe_kind)k), nosat, site, (unsigned long long)p->sat,
                              (unsigned long long)q->sat, (unsigned long long)p->nan_out, (unsigned long long)q->nan_out,
                              (unsigned long long)p->inf_out, (unsigned long long)q->inf_out,
                              (unsigned long long)p->ftz, (unsigned long long)q->ftz);
                        if (k != FL_RECIPE_FP32)
                            CHECK(p->nan_in == (R * C + 96) / 97 * (tr ? 2 : 1) || p->nan_in > 0, "NaN inputs counted");
                    }
                    fl_recipe_free(&a);
                    fl_recipe_free(&b);
                }
    free(x);
    free(y1);
    free(y2);
    printf("  fast and reference fake-quantisation loops agree for every recipe and overflow mode\n");
}

/* The recipe's Smooth-SwiGLU cast equals the kernels' fused Smooth-SwiGLU e4m3 output. */
static void check_smooth_twin(void)
{
    const size_t R = 64, Cc = 96;
    float *g = malloc(R * Cc * sizeof *g), *u = malloc(R * Cc * sizeof *u), *h = malloc(R * Cc * sizeof *h);
    float *y = malloc(R * Cc * sizeof *y), *s = malloc((R > Cc ? R : Cc) * sizeof *s), *si = malloc((R > Cc ? R : Cc) * sizeof *s);
    float *ts = malloc((R > Cc ? R : Cc) * sizeof *ts);
    uint8_t *q = malloc(R * Cc);
    for (size_t i = 0; i < R * Cc; i++) {
        g[i] = (float)((int)(i * 37 % 101) - 50) / 9.0f;
        u[i] = (float)((int)(i * 53 % 89) - 44) / 7.0f * (i % 96 == 5 ? 40.0f : 1.0f); /* an outlier channel */
    }
    fl_swiglu_fwd((fl_kout){ h, FL_FMT_FP32, NULL, NULL }, (fl_kin){ g, FL_FMT_FP32, NULL },
                  (fl_kin){ u, FL_FMT_FP32, NULL }, R * Cc);
    for (int axis = 0; axis < 2; axis++) {
        fl_recipe_cfg c;
        fl_recipe_cfg_default(&c, FL_RECIPE_FP8_DELAYED);
        const char *names[1] = { "down.in" };
        const uint32_t roles[1] = { FL_ROLE_IN };
        fl_recipe r;
        CHECK(!fl_recipe_init(&r, &c, 1, names, roles, NULL), "init");
        fl_recipe_step_begin(&r, 0);
        fl_recipe_cast(&r, 0, y, h, R, Cc, 0, 1, NULL); /* step 0: learn the amax (scale 1) */
        fl_recipe_step_begin(&r, 0);
        const float scale = fl_delayed_scale(r.sites[0].dl), scale_inv = fl_delayed_scale_inv(r.sites[0].dl);
        fl_smooth sm = { axis, s, si };
        fl_recipe_cast(&r, 0, y, h, R, Cc, 0, 1, &sm);
        float amax = 0.0f;
        CHECK(!fl_smooth_swiglu_fwd((fl_kout){ q, FL_FMT_E4M3, &scale, &amax }, ts, (fl_kin){ g, FL_FMT_FP32, NULL },
                                    (fl_kin){ u, FL_FMT_FP32, NULL }, R, Cc,
                                    axis ? FL_SMOOTH_TOKEN : FL_SMOOTH_CHANNEL, 1), "twin");
        for (size_t i = 0; i < R * Cc; i++) {
            const size_t k = axis ? i / Cc : i % Cc;
            CHECK(ts[k] == s[k], "axis %d: smoothing scale %zu: twin %a recipe %a", axis, k, ts[k], s[k]);
            const float want = fl_decode(FL_FMT_E4M3, q[i]) * scale_inv / ts[k];
            CHECK(same_float(y[i], want), "axis %d element %zu: recipe %a twin %a", axis, i, y[i], want);
        }
        fl_recipe_free(&r);
    }
    free(g); free(u); free(h); free(y); free(s); free(si); free(ts); free(q);
    printf("  Smooth-SwiGLU casts (channel, token) equal the kernels' fused twin\n");
}

/* --grad-scaling current: under fp8-delayed, dY sites take their scale from the tensor itself while X
   and W keep their delayed scales.  A tensor that grows x4 between two steps is clipped at a delayed
   site and not at a current one. */
static void check_grad_scaling(void)
{
    enum { N = 256 };
    float x0[N], x1[N], y[N];
    for (int i = 0; i < N; i++) {
        x0[i] = (float)(i % 17 - 8) / 8.0f;
        x1[i] = 4.0f * x0[i];
    }
    for (int gc = 0; gc < 2; gc++) {
        fl_recipe_cfg c;
        fl_recipe_cfg_default(&c, FL_RECIPE_FP8_DELAYED);
        c.grad_current = (uint32_t)gc;
        const char *names[3] = { "a.in", "a.w", "a.gout" };
        const uint32_t roles[3] = { FL_ROLE_IN, FL_ROLE_W, FL_ROLE_GOUT };
        fl_recipe r;
        CHECK(!fl_recipe_init(&r, &c, 3, names, roles, NULL), "init");
        for (int step = 0; step < 3; step++) {
            fl_recipe_step_begin(&r, 0);
            for (int k = 0; k < 3; k++)
                fl_recipe_cast(&r, k, y, step < 2 ? x0 : x1, 16, 16, 0, 1, NULL);
            if (step < 2)
                fl_recipe_step_end(&r);
        }
        CHECK(r.sites[0].st.clip > 0 && r.sites[1].st.clip > 0, "grad_current %d: delayed X/W sites must clip the x4 tensor", gc);
        if (gc) {
            CHECK(r.sites[2].st.clip == 0 && r.sites[2].st.inf_out == 0, "current dY site clipped");
            CHECK(r.sites[2].scale == fl_scale_from_amax(FL_FMT_E5M2, 4.0f, 1.0f, 0, 0), "current dY scale %a", r.sites[2].scale);
        } else {
            CHECK(r.sites[2].st.clip > 0, "delayed dY site did not clip the x4 tensor");
        }
        fl_recipe_free(&r);
    }
    printf("  --grad-scaling current: dY scaled from the tensor, X and W delayed\n");
}

static json_t *load_json(const char *path)
{
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    CHECK(j, "%s: %s (line %d)", path, e.text, e.line);
    return j;
}

static void check_runs(void)
{
    char base[256];
    snprintf(base, sizeof base, "/tmp/fp8lab_test_recipes_%d", (int)getpid());
    CHECK(!mkdir(base, 0755), "mkdir");
    static const char *const acts[] = { "swiglu", "smooth_swiglu", "relu", "polynorm3" };
    for (int k = 0; k < FL_RECIPE_COUNT; k++)
        for (int a = 0; a < 4; a++) {
            if (a >= 2 && k != FL_RECIPE_FP8_DELAYED && k != FL_RECIPE_BF16)
                continue;
            fl_train_cfg c;
            fl_train_cfg_default(&c);
            c.model.C = 16; c.model.L = 1; c.model.H = 2; c.model.F = 32; c.model.T = 16; c.model.B = 4;
            CHECK(!fl_act_parse(&c.model.act, acts[a]), "act");
            c.recipe.kind = (uint32_t)k;
            if (k == FL_RECIPE_PAPER_GAUDI2) /* with the settings it fixes, as --recipe paper-gaudi2 gives them */
                fl_recipe_paper_gaudi2(&c.recipe);
            c.recipe.fp8_adam = k == FL_RECIPE_FP8_CURRENT;
            c.steps = 6;
            c.data_len = 5000;
            c.log_every = 2;
            char dir[512], p[600];
            snprintf(dir, sizeof dir, "%s/%s-%s", base, acts[a], fl_recipe_name((fl_recipe_kind)k));
            fl_train_opts o = { dir, 1, 1, 0, 1 };
            CHECK(fl_train_run(&c, &o) == 0, "%s: run failed", dir);
            snprintf(p, sizeof p, "%s/metrics.csv", dir);
            FILE *f = fopen(p, "r");
            CHECK(f, "%s", p);
            char line[4096];
            CHECK(fgets(line, sizeof line, f) && !strncmp(line, "step,loss,", 10), "%s: header", p);
            int rows = 0;
            while (fgets(line, sizeof line, f)) {
                int commas = 0;
                for (char *q = line; *q; q++)
                    commas += *q == ',';
                CHECK(commas == 19, "%s: row %d has %d columns", p, rows, commas + 1);
                const double loss = strtod(strchr(line, ',') + 1, NULL);
                CHECK(isfinite(loss) && loss > 0 && loss < 10, "%s: row %d loss %g", p, rows, loss);
                rows++;
            }
            fclose(f);
            CHECK(rows == 6, "%s: %d rows", p, rows);
            snprintf(p, sizeof p, "%s/telemetry.jsonl", dir);
            f = fopen(p, "r");
            CHECK(f, "%s", p);
            int lines = 0;
            while (fgets(line, sizeof line * 0 + sizeof line, f)) {
                /* lines can be long: read the whole line */
                size_t cap = 1 << 16, len = strlen(line);
                char *buf = malloc(cap);
                memcpy(buf, line, len + 1);
                while (len && buf[len - 1] != '\n' && fgets(buf + len, (int)(cap - len), f))
                    len = strlen(buf);
                json_error_t e;
                json_t *j = json_loads(buf, 0, &e);
                CHECK(j, "%s line %d: %s", p, lines + 1, e.text);
                CHECK(json_is_integer(json_object_get(j, "step")) && json_is_array(json_object_get(j, "ffn")), "%s: fields", p);
                json_t *sites = json_object_get(j, "sites");
                CHECK(json_is_array(sites), "%s: sites", p);
                if (k != FL_RECIPE_FP32) {
                    CHECK(json_array_size(sites) == 15, "%s: %zu sites", p, json_array_size(sites));
                    static const char *const keys[] = { "name", "fmt", "n", "amax", "rms", "amax_over_rms", "kurtosis",
                                                        "saturated", "clipped", "nan_produced", "inf_produced", "flushed",
                                                        "scale", "staleness" };
                    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
                        CHECK(json_object_get(json_array_get(sites, 0), keys[i]), "%s: site field %s", p, keys[i]);
                }
                json_decref(j);
                free(buf);
                lines++;
            }
            fclose(f);
            CHECK(lines == 4, "%s: %d telemetry lines (steps 0, 2, 4, 5)", p, lines);
            snprintf(p, sizeof p, "%s/summary.json", dir);
            json_t *s = load_json(p);
            CHECK(json_is_false(json_object_get(s, "diverged")) && json_is_number(json_object_get(s, "final_loss")), "%s", p);
            json_decref(s);
            snprintf(p, sizeof p, "%s/config.json", dir);
            json_decref(load_json(p));
        }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    CHECK(!system(cmd), "cleanup");
    printf("  every recipe trains with a finite loss; metrics.csv, telemetry.jsonl, config.json, summary.json well-formed\n");
}

/* The trigger corpus: rate 0 is the plain corpus; with triggers the token V-1 occurs only as a
   trigger, followed by the same payload (a verbatim copy may cut an event short, so >= 90%). */
static void check_trigger_data(void)
{
    fl_data a, b, t;
    CHECK(fl_data_synthetic(&a, 5, 200000) == 0 && fl_data_synthetic_ex(&b, 5, 200000, 0.0f, 8) == 0, "alloc");
    CHECK(a.hash == b.hash && !memcmp(a.tok, b.tok, a.n * sizeof *a.tok), "FAIL trigger rate 0 changed the corpus");
    CHECK(fl_data_synthetic_ex(&t, 5, 200000, 0.01f, 8) == 0, "alloc");
    size_t first = 0, count = 0, same = 0;
    for (size_t i = 0; i + 9 < t.n; i++) {
        if (t.tok[i] != t.V - 1)
            continue;
        if (!count++)
            first = i;
        same += !memcmp(t.tok + i + 1, t.tok + first + 1, 8 * sizeof *t.tok) && t.tok[i + 9] == 0;
    }
    /* ~200000 / 13 sentences, 1% of them triggers: ~150 events (plus copies) */
    CHECK(count >= 75 && count <= 400, "FAIL %zu trigger tokens in 200000 (expected ~150)", count);
    CHECK(same * 100 >= count * 90, "FAIL only %zu of %zu trigger tokens are followed by the payload", same, count);
    fl_data_free(&a);
    fl_data_free(&b);
    fl_data_free(&t);
    printf("  trigger corpus: rate 0 is the plain corpus; %zu trigger events, %zu followed by the payload\n", count, same);
}

int main(void)
{
    check_trigger_data();
    check_row_moments();
    check_cast_paths();
    check_smooth_twin();
    check_grad_scaling();
    check_runs();
    PASS("test_train_recipes");
}
