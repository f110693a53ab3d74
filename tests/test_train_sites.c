/* test_train_sites.c — per-site overrides, stochastic rounding of the gradients, the clip mass.
 *
 *  1. --site overrides change exactly the named sites: under fp8-delayed, a recipe with
 *     "*.down.in=bf16" (then "L0.down.in=current", then both, the later winning) casts the same
 *     tensors at every site of a two-layer model; the overridden sites change format/scaling as
 *     asked and every other site's output bits, counters and scales equal the plain recipe's.
 *     Bad overrides are refused with a message: no such site, bad mode, the head's sites, a recipe
 *     without per-tensor scales, --grad-sr under fp8-block.
 *  2. Stochastic rounding of e5m2 gradients: the cast equals the project's one rounding routine
 *     (fl_encode_f32_bits, FL_RND_SR, numerics/fl_round.h) element by element on 2^16 values across
 *     the range and on 2^16 in the normal range (the vector lanes' case), saturating and not.  Seed 7, step 3: reproducible (the same bits twice, with
 *     1 and 2 threads), different for another step or seed; unbiased: for N = 2^20 - 1 copies of
 *     one value, in the normal range (v = 1.1 * 2^15: neighbours 32768 and 40960, P(up) = 0.4) and on
 *     the subnormal grid (v = 0.6432 * 2^-16), |mean - x| <= 5 standard errors
 *     (sqrt(p(1-p)/N) grid steps), while round-to-nearest misses it by more than 500 of them.
 *  3. Clip mass: a delayed site whose tensor grows x1.02 and x4 after its scale was set reports
 *     sum(|x| - 448/s) / sum |x| over the saturated elements, computed here in double; with
 *     non-saturating casts the elements beyond 464 (NaN) lose all of |x|.
 */
#include "check.h"
#include "train/model.h"
#include "train/recipe.h"
#include "train/train.h"
#include "fl_round.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

static uint32_t fbits(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

/* The sites of the demo's two-layer model. */
typedef struct {
    fl_model_cfg m;
    int n;
    char store[40 * 64];
    const char *names[64];
    uint32_t roles[64];
    uint8_t hp[64];
} model_sites;

static void sites_of(model_sites *s)
{
    fl_train_cfg c;
    fl_train_cfg_default(&c);
    s->m = c.model;
    s->m.L = 2;
    s->n = fl_model_nsites(&s->m);
    fl_model_site_names(&s->m, s->store, s->names, s->roles, s->hp);
}

/* Two steps of casts at every site (step 0 sets the delayed scales), outputs of step 1 in y[site]. */
enum { R = 32, C = 48 };
static void cast_all(fl_recipe *r, float y[][R * C], int n)
{
    static float x[R * C];
    for (int step = 0; step < 2; step++) {
        fl_recipe_step_begin(r, 1);
        r->step = (uint64_t)step;
        for (int s = 0; s < n; s++) {
            for (int i = 0; i < R * C; i++) /* a different tensor per site, growing x1.5 at step 1 */
                x[i] = (float)((int)((i * 7919u + (unsigned)s * 104729u) % 2001u) - 1000) / 200.0f * (step ? 1.5f : 1.0f);
            fl_recipe_cast(r, s, y[s], x, R, C, 0, 1, NULL);
        }
        fl_recipe_step_end(r);
    }
}

static int matches(const char *pat, const char *name) /* the tests' own matcher: '*' = a layer or a role */
{
    if (!strcmp(pat, "*.down.in"))
        return strlen(name) > 8 && !strcmp(name + strlen(name) - 8, ".down.in");
    return !strcmp(pat, name);
}

static void check_overrides(void)
{
    model_sites ms;
    sites_of(&ms);
    static float y0[64][R * C], y1[64][R * C];
    fl_recipe_cfg c;
    fl_recipe_cfg_default(&c, FL_RECIPE_FP8_DELAYED);
    fl_recipe base;
    CHECK(!fl_recipe_init(&base, &c, ms.n, ms.names, ms.roles, ms.hp), "init");
    cast_all(&base, y0, ms.n);
    static const char *const specs[3][2] = { { "*.down.in=bf16", NULL },
                                              { "L0.down.in=current", NULL },
                                              { "*.down.in=bf16", "L0.down.in=current" } };
    for (int t = 0; t < 3; t++) {
        fl_recipe_cfg o = c;
        for (int k = 0; k < 2 && specs[t][k]; k++)
            CHECK(!fl_recipe_sites_add(&o, specs[t][k]), "add %s", specs[t][k]);
        fl_recipe r;
        CHECK(!fl_recipe_init(&r, &o, ms.n, ms.names, ms.roles, ms.hp), "init %s", o.sites);
        cast_all(&r, y1, ms.n);
        int changed = 0;
        for (int s = 0; s < ms.n; s++) {
            int mode = 0; /* 0 untouched, 1 bf16, 2 current: the last matching override */
            for (int k = 0; k < 2 && specs[t][k]; k++)
                if (matches(strncmp(specs[t][k], "*", 1) ? "L0.down.in" : "*.down.in", ms.names[s]))
                    mode = strstr(specs[t][k], "bf16") ? 1 : 2;
            const fl_site *a = &base.sites[s], *b = &r.sites[s];
            if (mode == 0) {
                CHECK(a->fmt == b->fmt && a->scaling == b->scaling, "%s: %s changed an untouched site", o.sites, ms.names[s]);
                CHECK(!memcmp(y0[s], y1[s], sizeof y0[s]), "%s: %s: output bits differ", o.sites, ms.names[s]);
                CHECK(a->scale == b->scale && a->tot_sat == b->tot_sat && a->st.amax == b->st.amax && a->st.ftz == b->st.ftz,
                      "%s: %s: scale or counters differ", o.sites, ms.names[s]);
            } else if (mode == 1) {
                CHECK(b->fmt == FL_FMT_BF16 && b->scaling == FL_SCALING_NONE, "%s: %s not bf16", o.sites, ms.names[s]);
                for (int i = 0; i < R * C; i++)
                    CHECK((fbits(y1[s][i]) & 0xFFFFu) == 0, "%s: %s element %d not a bf16 value: %a", o.sites, ms.names[s], i, y1[s][i]);
                changed++;
            } else {
                CHECK(b->fmt == FL_FMT_E4M3 && b->scaling == FL_SCALING_TENSOR, "%s: %s not current e4m3", o.sites, ms.names[s]);
                CHECK(b->st.sat == 0 && b->st.clip_mass == 0.0, "%s: a current scale saturated", o.sites);
                CHECK(a->st.sat > 0, "the delayed site should saturate on the x1.5 step (the test's premise)");
                changed++;
            }
        }
        CHECK(changed == (t == 1 ? 1 : 2), "%s: %d sites changed", o.sites, changed);
        fl_recipe_free(&r);
    }
    fl_recipe_free(&base);

    /* refusals */
    static const struct {
        uint32_t kind, sr;
        const char *spec, *want;
    } bad[] = {
        { FL_RECIPE_FP8_DELAYED, 0, "L2.down.in=bf16", "no cast site" },
        { FL_RECIPE_FP8_DELAYED, 0, "*.down.out=bf16", "no cast site" },
        { FL_RECIPE_FP8_DELAYED, 0, "L0.down.in=fp8", "unknown mode" },
        { FL_RECIPE_FP8_DELAYED, 0, "head.in=current", "stays in bf16" },
        { FL_RECIPE_BF16, 0, "L0.down.in=bf16", "need fp8-delayed or fp8-current" },
        { FL_RECIPE_FP8_BLOCK, 0, "L0.down.in=current", "need fp8-delayed or fp8-current" },
        { FL_RECIPE_FP8_BLOCK, 1, "", "--grad-sr needs" },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        fl_recipe_cfg b;
        fl_recipe_cfg_default(&b, (fl_recipe_kind)bad[k].kind);
        b.grad_sr = bad[k].sr;
        if (bad[k].spec[0])
            CHECK(!fl_recipe_sites_add(&b, bad[k].spec), "add %s", bad[k].spec);
        char err[512];
        const char *why = fl_recipe_sites_check(&b, ms.n, ms.names, ms.hp, err, sizeof err);
        CHECK(why && strstr(why, bad[k].want), "'%s' under %s: got '%s', want '%s'", bad[k].spec,
              fl_recipe_name((fl_recipe_kind)bad[k].kind), why ? why : "(accepted)", bad[k].want);
    }
    fl_recipe_cfg b;
    fl_recipe_cfg_default(&b, FL_RECIPE_FP8_DELAYED);
    CHECK(fl_recipe_sites_add(&b, "L0.down.in") && fl_recipe_sites_add(&b, "a=b;c=d") && fl_recipe_sites_add(&b, "x\"=bf16"),
          "malformed --site values must be refused");
    printf("  --site overrides change exactly the named sites (3 override sets, %d sites); 7 refusals\n", ms.n);
}

/* A recipe of one e5m2 dY site with power-of-two scales, stochastic rounding (sr) or not. */
static void gout_recipe(fl_recipe *r, fl_recipe_kind kind, int sr, int nosat, uint64_t seed)
{
    fl_recipe_cfg c;
    fl_recipe_cfg_default(&c, kind);
    c.pow2 = 1;
    c.grad_sr = (uint32_t)sr;
    c.nosat = (uint32_t)nosat;
    const char *names[1] = { "a.gout" };
    const uint32_t roles[1] = { FL_ROLE_GOUT };
    CHECK(!fl_recipe_init(r, &c, 1, names, roles, NULL), "init");
    r->sr_seed = seed;
}

/* One cast at that site under fp8-current (the scale from the tensor's amax) at `step`. */
static void sr_cast(float *y, const float *x, size_t n, uint64_t seed, uint64_t step, int sr, int threads)
{
    fl_recipe r;
    gout_recipe(&r, FL_RECIPE_FP8_CURRENT, sr, 0, seed);
    omp_set_num_threads(threads);
    fl_recipe_step_begin(&r, 0);
    r.step = step;
    fl_recipe_cast(&r, 0, y, x, n / 1024, 1024, 0, 1, NULL);
    omp_set_num_threads(2);
    fl_recipe_free(&r);
}

/* The SR cast equals fl_encode_f32_bits's FL_RND_SR with fl_sr_bits(key, i), element by element, on
   values across e5m2's range: subnormal grid, normals, the overflow band, zeros, both signs. */
static void check_sr_matches_encoder(void)
{
    enum { N = 1 << 16 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    uint64_t st = 12345;
    for (int t = 0; t < 4; t++) {
        const int nosat = t & 1, normal = t >> 1;
        x[0] = 1.0f; /* scale 2^15 */
        for (int i = 1; i < N; i++) {
            /* mixed: |x| * 2^15 from 2^-25 to 2^17 (subnormal grid, normals, overflow; zeros); normal:
               from 2^-13 to 2^15 and zeros only, the vector lanes' common case */
            const double u = fl_open01(fl_splitmix64(&st));
            const double e = normal ? -28.0 + 28.0 * fl_open01(fl_splitmix64(&st)) : -40.0 + 41.0 * fl_open01(fl_splitmix64(&st));
            x[i] = (float)((i & 1 ? -1 : 1) * (1.0 + u) * pow(2.0, e));
            if (i % 997 == 0)
                x[i] = 0.0f;
        }
        fl_recipe r;
        gout_recipe(&r, FL_RECIPE_FP8_DELAYED, 1, nosat, 99); /* a delayed scale: the tensor can outgrow it */
        fl_recipe_step_begin(&r, 0);
        fl_recipe_cast(&r, 0, y, x, 1, 1, 0, 1, NULL); /* step 0 records amax 1: scale 2^15 from step 1 */
        fl_recipe_step_end(&r);
        fl_recipe_step_begin(&r, 0);
        r.step = 5;
        fl_recipe_cast(&r, 0, y, x, N / 256, 256, 0, 1, NULL);
        const float s = r.sites[0].scale, si = 1.0f / s;
        CHECK(s == 32768.0f, "scale %a", s);
        const uint64_t key = fl_recipe_sr_key(&r, 0);
        long sat = 0;
        for (int i = 0; i < N; i++) {
            const uint32_t code = fl_encode_f32_bits(fl_format_get(FL_FMT_E5M2), fbits(x[i] * s), FL_RND_SR,
                                                     nosat ? FL_OVF_NOSATURATE : FL_OVF_SATURATE, fl_sr_bits(key, i));
            const float want = fl_decode(FL_FMT_E5M2, code) * si;
            CHECK(fbits(y[i]) == fbits(want), "nosat %d element %d: x %a -> %a, encoder %a (code 0x%02x)", nosat, i, x[i], y[i],
                  want, code);
            sat += fabsf(x[i] * s) > 57344.0f;
        }
        CHECK((normal || sat > 0) && r.sites[0].st.sat == (uint64_t)sat, "saturated %llu, counted here %ld",
              (unsigned long long)r.sites[0].st.sat, sat);
        fl_recipe_free(&r);
    }
    free(x);
    free(y);
    printf("  SR e5m2 cast equals fl_encode_f32_bits(FL_RND_SR, fl_sr_bits(key, i)) on 2 x %d values (mixed range; "
           "normal range and zeros), both overflow modes\n", N);
}

static void check_sr(void)
{
    enum { N = 1 << 20 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y), *y2 = malloc(N * sizeof *y2);
    /* x[0] = 1 sets the scale 2^15 (57344 / 1 rounded down to a power of two); the others are the value */
    static const struct {
        float v, lo, hi; /* the value and its e5m2 neighbours, all after scaling by 2^15 */
    } cases[2] = { { 1.1f * 32768.0f, 32768.0f, 40960.0f }, { 0.6432f * 0x1p-16f, 0.0f, 0x1p-16f } };
    for (int t = 0; t < 2; t++) {
        const float xv = cases[t].v / 32768.0f;
        x[0] = 1.0f;
        for (int i = 1; i < N; i++)
            x[i] = xv;
        sr_cast(y, x, N, 7, 3, 1, 1);
        sr_cast(y2, x, N, 7, 3, 1, 2);
        CHECK(!memcmp(y, y2, N * sizeof *y), "case %d: SR bits depend on the thread count", t);
        sr_cast(y2, x, N, 7, 3, 1, 1);
        CHECK(!memcmp(y, y2, N * sizeof *y), "case %d: SR not reproducible", t);
        sr_cast(y2, x, N, 7, 4, 1, 1);
        CHECK(memcmp(y, y2, N * sizeof *y), "case %d: another step gave the same bits", t);
        sr_cast(y2, x, N, 8, 3, 1, 1);
        CHECK(memcmp(y, y2, N * sizeof *y), "case %d: another seed gave the same bits", t);
        const double lo = cases[t].lo / 32768.0, hi = cases[t].hi / 32768.0, step = hi - lo;
        const double p = ((double)xv - lo) / step;
        double sum = 0.0;
        long bad = 0;
        for (int i = 1; i < N; i++) {
            sum += y[i];
            bad += (double)y[i] != lo && (double)y[i] != hi;
        }
        CHECK(bad == 0, "case %d: %ld outputs are not a neighbour of %a", t, bad, xv);
        const double mean = sum / (N - 1), se = sqrt(p * (1 - p) / (N - 1)) * step;
        CHECK(fabs(mean - xv) <= 5 * se, "case %d: SR mean %.9g vs x %.9g (%.2f standard errors; p %.4f)", t, mean, (double)xv,
              fabs(mean - xv) / se, p);
        sr_cast(y2, x, N, 7, 3, 0, 1);
        const double rne = (double)y2[1];
        CHECK(fabs(rne - xv) > 500 * se, "case %d: round-to-nearest should be biased here (%a vs %a)", t, rne, xv);
        printf("  SR e5m2 case %d: mean - x = %.2f standard errors (N %d, P(up) %.4f); RNE off by %.0f\n", t,
               (mean - xv) / se, N - 1, p, fabs(rne - xv) / se);
    }
    free(x);
    free(y);
    free(y2);
}

static void check_clip_mass(void)
{
    enum { N = 512 };
    float x0[N], x1[N], y[N];
    for (int i = 0; i < N; i++) {
        x0[i] = (float)(i % 64 - 32) / 4.0f; /* amax 8 */
        x1[i] = x0[i] * (i % 3 ? 1.0f : i % 2 ? 4.0f : 1.02f); /* x4: beyond 464; x1.02: in (448, 464] */
    }
    for (int nosat = 0; nosat < 2; nosat++) {
        fl_recipe_cfg c;
        fl_recipe_cfg_default(&c, FL_RECIPE_FP8_DELAYED);
        c.nosat = (uint32_t)nosat;
        const char *names[1] = { "a.in" };
        const uint32_t roles[1] = { FL_ROLE_IN };
        fl_recipe r;
        CHECK(!fl_recipe_init(&r, &c, 1, names, roles, NULL), "init");
        for (int step = 0; step < 3; step++) {
            fl_recipe_step_begin(&r, 0);
            fl_recipe_cast(&r, 0, y, step < 2 ? x0 : x1, 16, N / 16, 0, 1, NULL);
            if (step < 2)
                CHECK(r.sites[0].st.clip_mass == 0.0, "step %d: clip mass %g without saturation", step, r.sites[0].st.clip_mass);
            fl_recipe_step_end(&r);
        }
        /* the expectation in double: beyond 448 the excess is lost (rounded or saturated to 448); a
           non-saturating cast turns |v| > 464 into NaN, which loses all of |x| */
        const double s = r.sites[0].scale;
        double num = 0, den = 0;
        int band = 0, nan = 0;
        for (int i = 0; i < N; i++) {
            const double v = fabs(x1[i]) * s;
            den += fabs(x1[i]);
            if (nosat && v > 464.0) {
                num += fabs(x1[i]);
                nan++;
            } else if (v > 448.0) {
                num += fabs(x1[i]) - 448.0 / s;
                band += v <= 464.0;
            }
        }
        CHECK(band > 0 && num > 0, "the x1.02 and x4 elements must saturate (premise)");
        CHECK(!nosat || (uint64_t)nan == r.sites[0].st.nan_out, "NaN produced %llu, expected %d",
              (unsigned long long)r.sites[0].st.nan_out, nan);
        CHECK(fabs(r.sites[0].st.clip_mass - num / den) <= 1e-12, "nosat %d: clip mass %.17g, want %.17g", nosat,
              r.sites[0].st.clip_mass, num / den);
        fl_recipe_free(&r);
        printf("  clip mass of a saturating delayed cast (%s): %.6f (sum of excess / sum |x|)\n",
               nosat ? "non-saturating: NaN loses all of |x|" : "saturating", num / den);
    }
}

int main(void)
{
    check_overrides();
    check_sr_matches_encoder();
    check_sr();
    check_clip_mass();
    PASS("test_train_sites");
}
