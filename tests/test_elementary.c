/* test_elementary.c — the elementary references exp, expm1, log1p, erf (reference/exp.c, log1p.c,
 * erf.c) through the public API, and glibc's binary32 expf judged by `fp8lab ulp`:
 *   1. hand-checkable points in fp32, in the rounding modes where a wrong tail or a lost exactness shows
 *      (exp(0) = 1 exactly, expm1 of tiny x just beside x, log1p(-1) = -Inf, erf(+-Inf) = +-1, NaN in
 *      -> NaN, overflow and underflow of exp), the expected encodings worked out in the comments;
 *   2. the value at 53 bits (fl_ref_value) against glibc's double exp/expm1/log1p/erf on 2000 seeded
 *      points each: an independent implementation, within 2 ulps;
 *   3. the CLI (FP8LAB, else build/fp8lab): `ulp --impl expf_f32` on two ranges of 2^14 inputs (results
 *      near 1.6, and subnormal results) passes the gate --max-ulp 1 and judges every input; the same
 *      outputs as arrays pass it too, fail it (exit 3) with one output moved by 2 ulps, and fail it when
 *      judged against expm1 instead of exp. */
#include "check.h"
#include "dir_test.h"
#include "npy_test.h"
#include "fl_format.h"
#include "ref.h"

#include <jansson.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- 1. hand-checkable points ------------------------------------------------------------------- */

typedef struct {
    const char *fn;
    double x;
    fl_rounding r;
    fl_overflow o;
    uint32_t want; /* fp32 encoding */
} point;

#define RNE FL_RND_NE
#define RZ FL_RND_ZERO
#define UP FL_RND_UP
#define DN FL_RND_DOWN
#define IEEE FL_OVF_NOSATURATE
#define SAT FL_OVF_SATURATE

static const point points[] = {
    /* exp(+-0) = 1 exactly: 0x3f800000 in every mode (an inexact 1 would move in RZ/DN or UP) */
    { "exp", 0.0, RNE, IEEE, 0x3F800000u }, { "exp", 0.0, RZ, IEEE, 0x3F800000u },
    { "exp", 0.0, UP, IEEE, 0x3F800000u },  { "exp", -0.0, DN, IEEE, 0x3F800000u },
    /* exp(1) = e = 2.718281828...; fp32 neighbours 0x402df854 = 2.71828174..., 0x402df855 = 2.71828198... */
    { "exp", 1.0, RNE, IEEE, 0x402DF854u }, { "exp", 1.0, UP, IEEE, 0x402DF855u },
    /* exp(2^-30) = 1 + 2^-30 + ...: between 1 and 1 + 2^-23; exp(-2^-30) just below 1 (ulp 2^-24 there) */
    { "exp", 0x1p-30, RNE, IEEE, 0x3F800000u }, { "exp", 0x1p-30, UP, IEEE, 0x3F800001u },
    { "exp", -0x1p-30, DN, IEEE, 0x3F7FFFFFu }, { "exp", -0x1p-30, RZ, IEEE, 0x3F7FFFFFu },
    /* the tail 0 < |x| < 2^-201: exp(2^-250) just above 1, exp(-2^-250) just below */
    { "exp", 0x1p-250, UP, IEEE, 0x3F800001u }, { "exp", 0x1p-250, RZ, IEEE, 0x3F800000u },
    { "exp", -0x1p-250, DN, IEEE, 0x3F7FFFFFu }, { "exp", -0x1p-250, UP, IEEE, 0x3F800000u },
    /* overflow: e^100 > 2^144: Inf (IEEE, RNE and UP), max 0x7f7fffff (RZ, or saturating); the same for
       the huge tail x > 2^24 */
    { "exp", 100.0, RNE, IEEE, 0x7F800000u }, { "exp", 100.0, RZ, IEEE, 0x7F7FFFFFu },
    { "exp", 100.0, RNE, SAT, 0x7F7FFFFFu },  { "exp", 1e30, UP, IEEE, 0x7F800000u },
    { "exp", 1e30, DN, IEEE, 0x7F7FFFFFu },
    /* underflow: e^-104 < 2^-150 (half the smallest subnormal): +0 (RNE), 2^-149 (UP); the tiny tail too */
    { "exp", -104.0, RNE, IEEE, 0x00000000u }, { "exp", -104.0, UP, IEEE, 0x00000001u },
    { "exp", -1e30, UP, IEEE, 0x00000001u },   { "exp", -1e30, RZ, IEEE, 0x00000000u },
    { "exp", INFINITY, RZ, IEEE, 0x7F800000u }, /* exact Inf: no overflow, Inf even toward zero */
    { "exp", -INFINITY, UP, IEEE, 0x00000000u },
    /* expm1(x) = x + x^2/2 + ...: for x = 2^-30 just above x (0x30800000); for x = -2^-30 just inside
       |x|, i.e. in the binade below, whose next number toward zero is 2^-30 - 2^-54 (0x307fffff) */
    { "expm1", 0x1p-30, RNE, IEEE, 0x30800000u }, { "expm1", 0x1p-30, UP, IEEE, 0x30800001u },
    { "expm1", 0x1p-30, RZ, IEEE, 0x30800000u },  { "expm1", -0x1p-30, RNE, IEEE, 0xB0800000u },
    { "expm1", -0x1p-30, RZ, IEEE, 0xB07FFFFFu }, { "expm1", -0x1p-30, DN, IEEE, 0xB0800000u },
    /* a subnormal x = 2^-140 (0x200 * 2^-149): expm1 = x (1 + 2^-141 + ...) */
    { "expm1", 0x1p-140, RNE, IEEE, 0x00000200u }, { "expm1", 0x1p-140, UP, IEEE, 0x00000201u },
    /* the tiny tail: expm1(+-2^-250) has x's sign and |.| < 2^-150 */
    { "expm1", 0x1p-250, UP, IEEE, 0x00000001u },  { "expm1", -0x1p-250, DN, IEEE, 0x80000001u },
    { "expm1", -0x1p-250, UP, IEEE, 0x80000000u },
    /* +-0 keep their sign; -Inf gives -1 exactly; x < -160 lies just above -1 (RZ: 0xbf7fffff) */
    { "expm1", -0.0, RNE, IEEE, 0x80000000u },     { "expm1", -INFINITY, RZ, IEEE, 0xBF800000u },
    { "expm1", -200.0, RZ, IEEE, 0xBF7FFFFFu },    { "expm1", -200.0, DN, IEEE, 0xBF800000u },
    { "expm1", 1e30, RNE, IEEE, 0x7F800000u },
    /* log1p(-1) = -Inf exactly (also toward zero: no overflow to -max); below -1: NaN (canonical 0x7fffffff) */
    { "log1p", -1.0, RNE, IEEE, 0xFF800000u },     { "log1p", -1.0, RZ, IEEE, 0xFF800000u },
    { "log1p", -1.5, RNE, IEEE, 0x7FFFFFFFu },     { "log1p", -INFINITY, RNE, IEEE, 0x7FFFFFFFu },
    { "log1p", INFINITY, RZ, IEEE, 0x7F800000u },  { "log1p", -0.0, RNE, IEEE, 0x80000000u },
    /* log1p(1) = ln 2 = 0.693147180...; fp32 0x3f317218 = 0.69314718246... (the nearest, above) */
    { "log1p", 1.0, RNE, IEEE, 0x3F317218u },      { "log1p", 1.0, RZ, IEEE, 0x3F317217u },
    /* log1p(x) = x - x^2/2 + ...: for x = 2^-30 just below x; for x = -2^-30 just beyond |x| */
    { "log1p", 0x1p-30, RZ, IEEE, 0x307FFFFFu },   { "log1p", 0x1p-30, UP, IEEE, 0x30800000u },
    { "log1p", -0x1p-30, DN, IEEE, 0xB0800001u },  { "log1p", -0x1p-30, RZ, IEEE, 0xB0800000u },
    /* the tiny tail: log1p(2^-250) in (0, 2^-250) */
    { "log1p", 0x1p-250, UP, IEEE, 0x00000001u },  { "log1p", 0x1p-250, RNE, IEEE, 0x00000000u },
    /* erf(+-Inf) = +-1 exactly; erf(+-20) strictly inside (1 - erfc(20), erfc(20) < e^-400) */
    { "erf", INFINITY, RNE, IEEE, 0x3F800000u },   { "erf", INFINITY, RZ, IEEE, 0x3F800000u },
    { "erf", -INFINITY, UP, IEEE, 0xBF800000u },   { "erf", 20.0, RZ, IEEE, 0x3F7FFFFFu },
    { "erf", 20.0, RNE, IEEE, 0x3F800000u },       { "erf", -20.0, UP, IEEE, 0xBF7FFFFFu },
    { "erf", -0.0, RNE, IEEE, 0x80000000u },
    /* erf(x) = (2/sqrt pi) x (1 - x^2/3 ...): at x = 2^-149 the value 1.128 * 2^-149 rounds to 2^-149 */
    { "erf", 0x1p-149, RNE, IEEE, 0x00000001u },   { "erf", 0x1p-149, UP, IEEE, 0x00000002u },
    /* NaN in -> NaN out, for every one */
    { "exp", NAN, RNE, IEEE, 0x7FFFFFFFu },        { "expm1", NAN, RNE, IEEE, 0x7FFFFFFFu },
    { "log1p", NAN, RNE, IEEE, 0x7FFFFFFFu },      { "erf", NAN, RNE, IEEE, 0x7FFFFFFFu },
};

static void test_points(void)
{
    mpfr_t x;
    mpfr_init2(x, 64);
    mpfr_srcptr xs[1] = { x };
    for (size_t i = 0; i < FL_ARRAY_LEN(points); i++) {
        const point *c = &points[i];
        const fl_ref_fn *fn = fl_ref_lookup(c->fn);
        CHECK(fn && fn->n_inputs == 1 && !fn->rowwise && !fn->evals[1].wrt, "%s: a value-only unary reference", c->fn);
        fl_ref_params p;
        fl_ref_params_init(&p, fn);
        mpfr_set_d(x, c->x, MPFR_RNDN);
        uint32_t got;
        CHECK(fl_ref_round(&got, FL_FMT_FP32, c->r, c->o, fn->evals[0].eval, xs, &p) == 0, "Ziv gave up: %s x=%a",
              c->fn, c->x);
        CHECK(got == c->want, "FAIL %s %s%s x=%a got=0x%08x want=0x%08x", c->fn, fl_rounding_name(c->r),
              c->o == SAT ? " saturating" : "", c->x, got, c->want);
    }
    mpfr_clear(x);
    printf("  %zu hand-checked points in fp32\n", FL_ARRAY_LEN(points));
}

/* ---- 2. against glibc's double functions -------------------------------------------------------- */

static uint64_t lcg_state = 20261127; /* the seed */

static double uniform(double lo, double hi)
{
    lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
    return lo + (hi - lo) * (double)(lcg_state >> 11) * 0x1p-53;
}

static void test_libm(void)
{
    static const struct {
        const char *fn;
        double (*libm)(double);
        double lo, hi;
    } fns[] = { { "exp", exp, -700, 700 }, { "expm1", expm1, -40, 700 }, { "log1p", log1p, -1, 1e6 },
                { "erf", erf, -6, 6 } };
    mpfr_t x, y;
    mpfr_inits2(53, x, y, (mpfr_ptr)0);
    mpfr_srcptr xs[1] = { x };
    for (size_t f = 0; f < FL_ARRAY_LEN(fns); f++) {
        const fl_ref_fn *fn = fl_ref_lookup(fns[f].fn);
        fl_ref_params p;
        fl_ref_params_init(&p, fn);
        double worst = 0;
        for (int i = 0; i < 2000; i++) {
            /* half the points near 0 (|x| < 2^-10 .. 1), where expm1, log1p and erf differ most from a
               naive formula */
            double v = i % 2 ? uniform(fns[f].lo, fns[f].hi) : ldexp(uniform(-1, 1), -(i % 40));
            if (v <= -1 && !strcmp(fns[f].fn, "log1p"))
                v = -0.5;
            mpfr_set_d(x, v, MPFR_RNDN);
            CHECK(fl_ref_value(y, fn->evals[0].eval, xs, &p) == 0, "Ziv gave up: %s x=%a", fns[f].fn, v);
            const double ref = mpfr_get_d(y, MPFR_RNDN), lib = fns[f].libm(v);
            if (ref == 0 && lib == 0)
                continue;
            /* the ulp of the reference's binade at 53 bits, never below binary64's subnormal quantum */
            const double ulp = ldexp(1.0, (ilogb(ref) > -1022 ? ilogb(ref) : -1022) - 52);
            const double err = fabs(ref - lib) / ulp;
            CHECK(err <= 2.0, "FAIL %s(%a): reference %a, libm %a: %.3g ulp apart", fns[f].fn, v, ref, lib, err);
            worst = fmax(worst, err);
        }
        printf("  %s: 2000 points within %.3g ulp of glibc's double %s\n", fns[f].fn, worst, fns[f].fn);
    }
    mpfr_clears(x, y, (mpfr_ptr)0);
}

/* ---- 3. fp8lab ulp on glibc's expf -------------------------------------------------------------- */

static char dir[64];
static const char *cli;

/* `cli ulp args`, stdout into dir/out.json; the exit status. */
static int run_ulp(const char *args)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s ulp %s --no-progress --threads 1 >%s/out.json 2>%s/err.txt", cli, args, dir, dir);
    const int st = system(cmd);
    CHECK(st != -1 && WIFEXITED(st), "could not run: %s", cmd);
    return WEXITSTATUS(st);
}

static double report_number(const char *key)
{
    json_t *o = dir_json(dir, "out.json");
    json_t *v = json_object_get(o, key);
    CHECK(json_is_number(v), "the report has no number '%s'", key);
    const double d = json_number_value(v);
    json_decref(o);
    return d;
}

static void test_ulp_expf(void)
{
    enum { N = 1 << 14 };
    static const uint32_t starts[2] = { 0x3F000000u,   /* x in [0.5, 0.508): e^x near 1.65 */
                                        0xC2B00000u }; /* x in [-88.03, -88): e^x subnormal, ~2^-127 */
    char args[512];
    for (int s = 0; s < 2; s++) {
        snprintf(args, sizeof args, "--impl expf_f32 --range 0x%08x:0x%08x --max-ulp 1 --json", starts[s], starts[s] + N);
        const int rc = run_ulp(args);
        const double count = report_number("count"), max = report_number("max_ulp");
        CHECK(rc == 0 && count == N && max >= 0 && max <= 1.0,
              "ulp %s: exit %d, %g outputs judged, max %g ulp (glibc's expf should be within 1 ulp)", args, rc, count, max);
        printf("  ulp --impl expf_f32 on 2^14 inputs from 0x%08x: max %.6f ulp\n", starts[s], max);
    }
    /* the same outputs as arrays: pass; one moved by 2 ulps: exit 3 with an error near 2 ulps; judged as
       expm1: exit 3 */
    static float x[N], y[N];
    for (uint32_t i = 0; i < N; i++) {
        const uint32_t b = starts[0] + i;
        memcpy(&x[i], &b, 4);
        y[i] = expf(x[i]);
    }
    char px[128], py[128];
    snprintf(px, sizeof px, "%s/x.npy", dir);
    snprintf(py, sizeof py, "%s/y.npy", dir);
    put_npy(px, FL_DT_F32, 0, N, x);
    put_npy(py, FL_DT_F32, 0, N, y);
    snprintf(args, sizeof args, "exp --format fp32 --inputs %s --outputs %s --max-ulp 1 --json", px, py);
    CHECK(run_ulp(args) == 0 && report_number("max_ulp") <= 1.0, "arrays: glibc's expf outputs fail the gate");
    uint32_t b;
    memcpy(&b, &y[1000], 4);
    b += 2;
    memcpy(&y[1000], &b, 4);
    put_npy(py, FL_DT_F32, 0, N, y);
    const int rc = run_ulp(args);
    const double max = report_number("max_ulp");
    CHECK(rc == 3 && max >= 1.5 && max <= 2.5, "arrays with one output 2 ulps off: exit %d, max %g ulp (want 3, 1.5..2.5)",
          rc, max);
    snprintf(args, sizeof args, "expm1 --format fp32 --inputs %s --outputs %s --max-ulp 1 --json", px, py);
    CHECK(run_ulp(args) == 3 && report_number("max_ulp") > 1e5, "expf's outputs judged against expm1 pass the gate");
    printf("  the gate fails on an output moved by 2 ulps (max %.4f ulp) and against expm1\n", max);
}

int main(void)
{
    test_points();
    test_libm();
    cli = getenv("FP8LAB");
    if (!cli || !*cli)
        cli = "build/fp8lab";
    if (access(cli, X_OK) != 0)
        SKIP("no CLI binary at %s (the reference checks above passed)", cli);
    dir_make(dir, sizeof dir, "/tmp/fl_test_elementary_XXXXXX");
    test_ulp_expf();
    dir_remove(dir);
    mpfr_free_cache();
    PASS("test_elementary");
}
