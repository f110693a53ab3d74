/* test_ref.c — the MPFR activation reference (reference/ref.h):
 *   1. golden values from mpmath (tests/golden/NAME.txt, made by tests/golden/gen_golden.py), bit for bit
 *      in float32 and bfloat16, round to nearest even, toward zero and up, IEEE overflow; the folder
 *      holds a file for every function of reference/act_list.h and nothing else;
 *   2. special inputs (NaN, +-Inf, +-0) against the documented limits;
 *   3. self-check: results do not change when the Ziv loop starts 20 bits higher (every format, the four
 *      deterministic rounding modes);
 *   4. identities: sigma(x) + sigma(-x) = 1, tanh odd, every derivative against a central finite
 *      difference at 320 bits, softmax rows sum to 1, polynorm of a constant row with eps = 0, row VJPs
 *      against finite differences;
 *   5. the CLI (fl_cmd_ref) on small .npy files against the library.
 * Golden files are read from $FL_GOLDEN_DIR or tests/golden (run from the repository root). */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "cli/commands.h"
#include "common/cli.h"
#include "npy.h"
#include "ref.h"
#include "round_mpfr.h"

static const char *golden_dir(void)
{
    const char *d = getenv("FL_GOLDEN_DIR");
    return d ? d : "tests/golden";
}

static void set_f32bits(mpfr_ptr x, uint32_t b)
{
    mpfr_set_d(x, (double)fl_f32_from_bits(b), MPFR_RNDN);
}

/* Encode fn(x...) (value evaluator) in format f, RNE, no saturation. */
static uint32_t enc(const fl_ref_evaluator *ev, fl_format f, fl_rounding rnd, mpfr_srcptr const *x,
                    const fl_ref_params *p)
{
    uint32_t out;
    int rc = fl_ref_round(&out, f, rnd, FL_OVF_NOSATURATE, ev->eval, x, p);
    CHECK(rc == 0, "Ziv loop gave up");
    return out;
}

/* ---- 1. golden ------------------------------------------------------------------------------------ */

/* Which derivatives have golden values: the gold_dx column of reference/act_list.h. */
#define GOLD_DX(ID, name, shape, gold_dx, ...) [FL_REF_##ID] = gold_dx,
static const int gold_dx[FL_REF_COUNT] = { FL_ACT_REFS(GOLD_DX) };

/* The golden folder against the list: NAME.txt for every function, NAME_dx.txt exactly where gold_dx
   is 1 (unary functions only), and no other .txt but hard_inputs.txt (gen_golden.py's hard cases). */
static void test_golden_files(void)
{
    DIR *d = opendir(golden_dir());
    CHECK(d, "cannot open the folder %s", golden_dir());
    char seen[FL_REF_COUNT][2] = { { 0 } };
    for (const struct dirent *e; (e = readdir(d));) {
        char base[256];
        const size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".txt") || !strcmp(e->d_name, "hard_inputs.txt") ||
            len - 4 >= sizeof base)
            continue;
        snprintf(base, sizeof base, "%.*s", (int)(len - 4), e->d_name);
        const size_t bl = strlen(base);
        const int dx = bl > 3 && !strcmp(base + bl - 3, "_dx");
        base[dx ? bl - 3 : bl] = 0;
        const fl_ref_fn *fn = fl_ref_lookup(base);
        CHECK(fn, "%s/%s: %s is no function of reference/act_list.h (a stale golden file?)", golden_dir(),
              e->d_name, base);
        CHECK(!dx || gold_dx[fn - fl_ref_table], "%s/%s exists but act_list.h gives %s gold_dx 0", golden_dir(),
              e->d_name, base);
        seen[fn - fl_ref_table][dx] = 1;
    }
    closedir(d);
    for (int id = 0; id < FL_REF_COUNT; id++) {
        const fl_ref_fn *fn = &fl_ref_table[id];
        CHECK(seen[id][0], "no golden values for %s: add it to tests/golden/gen_golden.py and regenerate", fn->name);
        CHECK(!gold_dx[id] || (fn->n_inputs == 1 && !fn->rowwise), "%s: gold_dx is for unary functions", fn->name);
        CHECK(!gold_dx[id] || seen[id][1], "%s: gold_dx 1 but no %s/%s_dx.txt (tests/golden/gen_golden.py)", fn->name,
              golden_dir(), fn->name);
    }
}

/* wrt "": NAME.txt; wrt "x": NAME_dx.txt (the rows of reference/act_list.h with gold_dx 1) */
static int golden_elementwise(const fl_ref_fn *fn, const char *wrt)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s%s.txt", golden_dir(), fn->name, wrt[0] ? "_dx" : "");
    FILE *in = fopen(path, "r");
    CHECK(in, "cannot open %s (regenerate: python3 tests/golden/gen_golden.py)", path);
    fl_ref_params p;
    fl_ref_params_init(&p, fn);
    const fl_ref_evaluator *ev = fl_ref_find_eval(fn, wrt);
    char line[4096];
    int count = 0;
    mpfr_t x[3];
    for (int i = 0; i < 3; i++)
        mpfr_init2(x[i], 64);
    mpfr_srcptr xs[3] = { x[0], x[1], x[2] };
    while (fgets(line, sizeof line, in)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        unsigned v[9];
        int n = fn->n_inputs;
        int got = sscanf(line, "%x %x %x %x %x %x %x %x %x", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                         &v[7], &v[8]);
        CHECK(got >= n + 2, "%s: bad line '%s'", path, line);
        for (int i = 0; i < n; i++)
            set_f32bits(x[i], v[i]);
        uint32_t e32 = enc(ev, FL_FMT_FP32, FL_RND_NE, xs, &p);
        uint32_t e16 = enc(ev, FL_FMT_BF16, FL_RND_NE, xs, &p);
        CHECK(e32 == v[n], "FAIL %s%s fp32 rne x=%a%s got=0x%08x want=0x%08x", fn->name, wrt[0] ? "'" : "",
              (double)fl_f32_from_bits(v[0]), n > 1 ? " (+more inputs)" : "", e32, v[n]);
        CHECK(e16 == v[n + 1], "FAIL %s%s bf16 rne x=%a got=0x%04x want=0x%04x", fn->name, wrt[0] ? "'" : "",
              (double)fl_f32_from_bits(v[0]), e16, v[n + 1]);
        if (got >= n + 6) { /* directed modes: toward zero, up */
            const fl_rounding dm[2] = { FL_RND_ZERO, FL_RND_UP };
            for (int m = 0; m < 2; m++) {
                uint32_t d32 = enc(ev, FL_FMT_FP32, dm[m], xs, &p), d16 = enc(ev, FL_FMT_BF16, dm[m], xs, &p);
                CHECK(d32 == v[n + 2 + 2 * m] && d16 == v[n + 3 + 2 * m],
                      "FAIL %s%s %s x=%a: fp32 got=0x%08x want=0x%08x, bf16 got=0x%04x want=0x%04x", fn->name,
                      wrt[0] ? "'" : "", fl_rounding_name(dm[m]), (double)fl_f32_from_bits(v[0]), d32,
                      v[n + 2 + 2 * m], d16, v[n + 3 + 2 * m]);
            }
        }
        count++;
    }
    fclose(in);
    for (int i = 0; i < 3; i++)
        mpfr_clear(x[i]);
    return count;
}

static int golden_rowwise(const fl_ref_fn *fn)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.txt", golden_dir(), fn->name);
    FILE *in = fopen(path, "r");
    CHECK(in, "cannot open %s (regenerate: python3 tests/golden/gen_golden.py)", path);
    fl_ref_params p;
    fl_ref_params_init(&p, fn);
    const fl_ref_evaluator *ev = fl_ref_find_eval(fn, "");
    char line[8192];
    int count = 0;
    while (fgets(line, sizeof line, in)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        char *s = line, *end;
        long n = strtol(s, &end, 10);
        CHECK(n > 0 && n <= 64, "%s: bad row length", path);
        s = end;
        unsigned vals[3 * 64];
        for (long i = 0; i < 3 * n; i++) {
            vals[i] = (unsigned)strtoul(s, &end, 16);
            CHECK(end != s, "%s: short line", path);
            s = end;
        }
        mpfr_t x[64];
        mpfr_srcptr xp[64];
        for (long i = 0; i < n; i++) {
            mpfr_init2(x[i], 64);
            set_f32bits(x[i], vals[i]);
            xp[i] = x[i];
        }
        mpfr_srcptr const *rows[1] = { xp };
        for (long j = 0; j < n; j++) {
            uint32_t e32, e16;
            CHECK(fl_ref_round_row(&e32, FL_FMT_FP32, FL_RND_NE, FL_OVF_NOSATURATE, ev->row, rows, n, j, &p, 0) == 0,
                  "Ziv");
            CHECK(fl_ref_round_row(&e16, FL_FMT_BF16, FL_RND_NE, FL_OVF_NOSATURATE, ev->row, rows, n, j, &p, 0) == 0,
                  "Ziv");
            CHECK(e32 == vals[n + j], "FAIL %s fp32 row n=%ld j=%ld x0=%a got=0x%08x want=0x%08x", fn->name, n, j,
                  (double)fl_f32_from_bits(vals[0]), e32, vals[n + j]);
            CHECK(e16 == vals[2 * n + j], "FAIL %s bf16 row n=%ld j=%ld x0=%a got=0x%04x want=0x%04x", fn->name, n,
                  j, (double)fl_f32_from_bits(vals[0]), e16, vals[2 * n + j]);
        }
        for (long i = 0; i < n; i++)
            mpfr_clear(x[i]);
        count++;
    }
    fclose(in);
    return count;
}

/* ---- 2. specials ---------------------------------------------------------------------------------- */

typedef struct {
    const char *fn;
    uint32_t x[3];
    uint32_t want; /* fp32 encoding */
} special_case;

#define PINF 0x7F800000u
#define NINF 0xFF800000u
#define QNAN 0x7FC00000u
#define CNAN 0x7FFFFFFFu /* the canonical NaN an fp32 encode produces */
#define NZ 0x80000000u
#define ONE 0x3F800000u
#define HALF 0x3F000000u

static const special_case specials[] = {
    { "relu", { NZ }, 0 }, { "relu", { NINF }, 0 }, { "relu", { PINF }, PINF }, { "relu", { QNAN }, CNAN },
    { "relu2", { NINF }, 0 }, { "relu2", { PINF }, PINF },
    { "leaky_relu", { NZ }, NZ }, { "leaky_relu", { NINF }, NINF },
    { "elu", { NINF }, 0xBF800000u }, { "elu", { NZ }, NZ }, { "elu", { PINF }, PINF },
    { "selu", { NZ }, NZ }, { "selu", { PINF }, PINF },
    { "gelu", { NINF }, NZ }, { "gelu", { PINF }, PINF }, { "gelu", { NZ }, NZ }, { "gelu", { QNAN }, CNAN },
    { "gelu_tanh", { NINF }, NZ }, { "gelu_tanh", { PINF }, PINF }, { "gelu_tanh", { NZ }, NZ },
    { "sigmoid", { NINF }, 0 }, { "sigmoid", { PINF }, ONE }, { "sigmoid", { NZ }, HALF }, { "sigmoid", { 0 }, HALF },
    { "tanh", { NINF }, 0xBF800000u }, { "tanh", { PINF }, ONE }, { "tanh", { NZ }, NZ },
    { "silu", { NINF }, NZ }, { "silu", { PINF }, PINF }, { "silu", { NZ }, NZ },
    { "swish", { NINF }, NZ }, { "mish", { NINF }, NZ }, { "mish", { PINF }, PINF }, { "mish", { NZ }, NZ },
    { "softplus", { NINF }, 0 }, { "softplus", { PINF }, PINF }, { "softplus", { QNAN }, CNAN },
    { "polyrelu", { NINF }, 0 }, { "polyrelu", { PINF }, PINF }, { "polyrelu", { 0x3F800000u }, ONE },
    { "glu", { PINF, 0x40400000u }, 0x40400000u }, { "glu", { NINF, 0x40400000u }, 0 },
    { "glu", { NINF, 0xC0400000u }, NZ }, { "glu", { NINF, PINF }, CNAN }, { "glu", { 0, 0x40400000u }, 0x3FC00000u },
    { "bilinear", { 0, PINF }, CNAN }, { "bilinear", { NZ, 0x40400000u }, NZ },
    { "reglu", { NINF, 0x40400000u }, 0 }, { "reglu", { 0xBF800000u, 0xC0400000u }, NZ },
    { "geglu", { PINF, 0xC0400000u }, NINF }, { "geglu", { NINF, 0x40400000u }, NZ }, { "geglu", { 0, PINF }, CNAN },
    { "swiglu", { PINF, 0x40400000u }, PINF }, { "swiglu", { NINF, 0x40400000u }, NZ },
    { "swiglu", { QNAN, 0 }, CNAN }, { "swiglu", { 0x3F800000u, NZ }, NZ },
    { "smooth_swiglu", { PINF, 0x40400000u, 0x3F000000u }, PINF }, { "smooth_swiglu", { 0x3F800000u, PINF, 0 }, CNAN },
};

static void test_specials(void)
{
    mpfr_t x[3];
    for (int i = 0; i < 3; i++)
        mpfr_init2(x[i], 64);
    mpfr_srcptr xs[3] = { x[0], x[1], x[2] };
    for (size_t c = 0; c < FL_ARRAY_LEN(specials); c++) {
        const fl_ref_fn *fn = fl_ref_lookup(specials[c].fn);
        CHECK(fn, "no function %s", specials[c].fn);
        fl_ref_params p;
        fl_ref_params_init(&p, fn);
        for (int i = 0; i < fn->n_inputs; i++)
            set_f32bits(x[i], specials[c].x[i]);
        uint32_t got = enc(fl_ref_find_eval(fn, ""), FL_FMT_FP32, FL_RND_NE, xs, &p);
        CHECK(got == specials[c].want, "FAIL special %s x=0x%08x,0x%08x got=0x%08x want=0x%08x", fn->name,
              specials[c].x[0], specials[c].x[1], got, specials[c].want);
    }
    for (int i = 0; i < 3; i++)
        mpfr_clear(x[i]);
}


/* Tail stand-ins (fl_ref_near / fl_ref_tiny) in the directed modes, against values worked out by hand:
   the exact result lies just inside (c, next value toward the tail), so RZ/RD/RU pick the neighbours. */
typedef struct {
    const char *fn;
    double x;
    fl_rounding r;
    uint32_t want; /* fp32 */
} tail_case;

static const tail_case tails[] = {
    { "sigmoid", 200.0, FL_RND_DOWN, 0x3F7FFFFFu },   /* 1 - e^-200: below 1 */
    { "sigmoid", 200.0, FL_RND_UP, 0x3F800000u },
    { "sigmoid", 200.0, FL_RND_NE, 0x3F800000u },
    { "sigmoid", -200.0, FL_RND_UP, 0x00000001u },    /* e^-200 > 0: up to the smallest subnormal */
    { "sigmoid", -200.0, FL_RND_ZERO, 0x00000000u },
    { "tanh", 0x1p-130, FL_RND_ZERO, 0x0007FFFFu },   /* x (1 - x^2/3): just below x = 2^-130 = 0x80000 */
    { "tanh", 0x1p-130, FL_RND_UP, 0x00080000u },
    { "tanh", -300.0, FL_RND_DOWN, 0xBF800000u },     /* -1 + tiny */
    { "tanh", -300.0, FL_RND_UP, 0xBF7FFFFFu },
    { "gelu", 25.0, FL_RND_DOWN, 0x41C7FFFFu },       /* 25 (1 - Phi(-25)) */
    { "gelu", 25.0, FL_RND_NE, 0x41C80000u },
    { "gelu", -50.0, FL_RND_DOWN, 0x80000001u },      /* tiny negative */
    { "gelu", -50.0, FL_RND_UP, 0x80000000u },
    { "silu", 300.0, FL_RND_ZERO, 0x4395FFFFu },      /* 300 sigma(300) < 300 */
    { "softplus", 300.0, FL_RND_UP, 0x43960001u },    /* 300 + log1p(e^-300) > 300 */
    { "softplus", 300.0, FL_RND_DOWN, 0x43960000u },
    { "softplus", -300.0, FL_RND_UP, 0x00000001u },
    { "mish", 150.0, FL_RND_ZERO, 0x4315FFFFu },
    { "elu", -200.0, FL_RND_UP, 0xBF7FFFFFu },        /* -(1 - e^-200) > -1 */
    { "elu", -200.0, FL_RND_DOWN, 0xBF800000u },
    { "gelu_tanh", 30.0, FL_RND_DOWN, 0x41EFFFFFu },
};

static void test_tails(void)
{
    mpfr_t x;
    mpfr_init2(x, 64);
    mpfr_srcptr xs[1] = { x };
    for (size_t c = 0; c < FL_ARRAY_LEN(tails); c++) {
        const fl_ref_fn *fn = fl_ref_lookup(tails[c].fn);
        fl_ref_params p;
        fl_ref_params_init(&p, fn);
        mpfr_set_d(x, tails[c].x, MPFR_RNDN);
        uint32_t got = enc(fl_ref_find_eval(fn, ""), FL_FMT_FP32, tails[c].r, xs, &p);
        CHECK(got == tails[c].want, "FAIL tail %s %s x=%a got=0x%08x want=0x%08x", fn->name,
              fl_rounding_name(tails[c].r), tails[c].x, got, tails[c].want);
    }
    mpfr_clear(x);
}

/* ---- 3. self-check: +20 bits -------------------------------------------------------------------- */

static const double sample[] = { 0x1p-140, -0x1p-130, 1e-20, -3e-9, 0.001, -0.09, 0.3, -0.7, 1.0, -1.0,
                                 1.2784645, -1.2784645, 1.9, -2.5, 4.75, -6.1, 11.0, -13.5, 19.99, -21.0,
                                 39.0, -41.0, 90.0, -95.0, 170.0, -170.0, 1e4, -3e5, 3e38, -3e38 };

static void test_selfcheck(void)
{
    const fl_format fmts[] = { FL_FMT_FP32, FL_FMT_BF16, FL_FMT_FP16, FL_FMT_E4M3, FL_FMT_E5M2 };
    const fl_rounding rnds[] = { FL_RND_NE, FL_RND_ZERO, FL_RND_UP, FL_RND_DOWN };
    mpfr_t x[3];
    for (int i = 0; i < 3; i++)
        mpfr_init2(x[i], 64);
    mpfr_srcptr xs[3] = { x[0], x[1], x[2] };
    for (int id = 0; id < FL_REF_COUNT; id++) {
        const fl_ref_fn *fn = &fl_ref_table[id];
        if (fn->rowwise)
            continue;
        fl_ref_params p;
        fl_ref_params_init(&p, fn);
        for (int e = 0; e < FL_REF_MAX_EVALS && fn->evals[e].wrt; e++) {
            for (size_t a = 0; a < FL_ARRAY_LEN(sample); a++) {
                mpfr_set_d(x[0], sample[a], MPFR_RNDN);
                mpfr_set_d(x[1], sample[(a * 7 + 3) % FL_ARRAY_LEN(sample)] / 3.0, MPFR_RNDN);
                mpfr_set_d(x[2], 0.75, MPFR_RNDN);
                for (size_t f = 0; f < FL_ARRAY_LEN(fmts); f++)
                    for (size_t r = 0; r < FL_ARRAY_LEN(rnds); r++) {
                        uint32_t c0, c1;
                        int rc0 = fl_ref_round_wp(&c0, fmts[f], rnds[r], FL_OVF_NOSATURATE, fn->evals[e].eval, xs, &p, 0);
                        int rc1 = fl_ref_round_wp(&c1, fmts[f], rnds[r], FL_OVF_NOSATURATE, fn->evals[e].eval, xs, &p, 20);
                        CHECK(rc0 == 0 && rc1 == 0, "Ziv gave up: %s wrt '%s' x=%a", fn->name, fn->evals[e].wrt,
                              sample[a]);
                        CHECK(c0 == c1, "FAIL +20 bits %s wrt '%s' %s %s x=%a got=0x%x at +20: 0x%x", fn->name,
                              fn->evals[e].wrt, fl_format_name(fmts[f]), fl_rounding_name(rnds[r]), sample[a], c0, c1);
                    }
            }
        }
    }
    for (int i = 0; i < 3; i++)
        mpfr_clear(x[i]);
}


/* row-wise: values, coefficient derivatives and VJPs of small rows built from the sample values */
static void test_selfcheck_rows(void)
{
    const fl_format fmts[] = { FL_FMT_FP32, FL_FMT_BF16, FL_FMT_E4M3 };
    const fl_rounding rnds[] = { FL_RND_NE, FL_RND_ZERO, FL_RND_UP, FL_RND_DOWN };
    enum { MAXN = 6 };
    mpfr_t x[MAXN], dy[MAXN];
    mpfr_srcptr xp[MAXN], dp[MAXN];
    for (int i = 0; i < MAXN; i++) {
        mpfr_inits2(64, x[i], dy[i], (mpfr_ptr)0);
        xp[i] = x[i];
        dp[i] = dy[i];
    }
    mpfr_srcptr const *rows[2] = { xp, dp };
    for (int id = 0; id < FL_REF_COUNT; id++) {
        const fl_ref_fn *fn = &fl_ref_table[id];
        if (!fn->rowwise)
            continue;
        fl_ref_params p;
        fl_ref_params_init(&p, fn);
        for (int e = 0; e < FL_REF_MAX_EVALS && fn->evals[e].wrt; e++)
            for (int t = 0; t < 24; t++) {
                const long n = 1 + t % MAXN;
                for (long i = 0; i < n; i++) {
                    double v = sample[(size_t)(t * 5 + i * 3) % 20]; /* |v| <= 21: finite rows */
                    mpfr_set_d(x[i], t % 4 == 3 ? 0.75 : v, MPFR_RNDN); /* some constant rows */
                    mpfr_set_d(dy[i], sample[(size_t)(t + i * 7) % 18], MPFR_RNDN);
                }
                for (long j = 0; j < n; j++)
                    for (size_t f = 0; f < FL_ARRAY_LEN(fmts); f++)
                        for (size_t r = 0; r < FL_ARRAY_LEN(rnds); r++) {
                            uint32_t c0, c1;
                            int rc0 = fl_ref_round_row(&c0, fmts[f], rnds[r], FL_OVF_NOSATURATE, fn->evals[e].row, rows,
                                                       n, j, &p, 0);
                            int rc1 = fl_ref_round_row(&c1, fmts[f], rnds[r], FL_OVF_NOSATURATE, fn->evals[e].row, rows,
                                                       n, j, &p, 20);
                            CHECK(rc0 == 0 && rc1 == 0 && c0 == c1,
                                  "FAIL +20 bits %s wrt '%s' %s %s row %d n=%ld j=%ld: 0x%x vs 0x%x (rc %d %d)", fn->name,
                                  fn->evals[e].wrt, fl_format_name(fmts[f]), fl_rounding_name(rnds[r]), t, n, j, c0, c1,
                                  rc0, rc1);
                        }
            }
    }
    for (int i = 0; i < MAXN; i++)
        mpfr_clears(x[i], dy[i], (mpfr_ptr)0);
}

/* ---- 4. identities -------------------------------------------------------------------------------- */

#define HP 320

static void value_hp(mpfr_ptr y, const fl_ref_fn *fn, const char *wrt, mpfr_srcptr const *x, const fl_ref_params *p)
{
    const fl_ref_evaluator *ev = fl_ref_find_eval(fn, wrt);
    CHECK(ev, "%s has no derivative wrt %s", fn->name, wrt);
    CHECK(fl_ref_value(y, ev->eval, x, p) == 0, "Ziv gave up in %s", fn->name);
}

static void test_sigmoid_identity(void)
{
    const fl_ref_fn *fn = fl_ref_lookup("sigmoid");
    fl_ref_params p;
    fl_ref_params_init(&p, fn);
    mpfr_t x, nx, a, b;
    mpfr_inits2(HP, a, b, (mpfr_ptr)0);
    mpfr_inits2(64, x, nx, (mpfr_ptr)0);
    for (size_t i = 0; i < FL_ARRAY_LEN(sample); i++) {
        if (fabs(sample[i]) > 150)
            continue;
        mpfr_set_d(x, sample[i], MPFR_RNDN);
        mpfr_neg(nx, x, MPFR_RNDN);
        mpfr_srcptr in1[1] = { x }, in2[1] = { nx };
        value_hp(a, fn, "", in1, &p);
        value_hp(b, fn, "", in2, &p);
        mpfr_add(a, a, b, MPFR_RNDN);
        mpfr_sub_ui(a, a, 1, MPFR_RNDN);
        CHECK(mpfr_zero_p(a) || mpfr_get_exp(a) < -HP + 3, "sigma(x)+sigma(-x) != 1 at x=%a", sample[i]);
        /* tanh is odd */
        const fl_ref_fn *th = fl_ref_lookup("tanh");
        value_hp(a, th, "", in1, &p);
        value_hp(b, th, "", in2, &p);
        CHECK(mpfr_cmp(a, b) == 0 ? mpfr_zero_p(a) : mpfr_cmpabs(a, b) == 0, "tanh not odd at %a", sample[i]);
    }
    mpfr_clears(x, nx, a, b, (mpfr_ptr)0);
}

/* every elementwise derivative against (f(x+h) - f(x-h)) / 2h, h = 2^-48, at 320 bits:
   |error| <= h^2 |f'''| / 6 + rounding, far below the 2^-60 tolerance (relative to max(1, |f'|)). */
static void test_derivatives_fd(void)
{
    static const double pts[] = { -7.25, -3.0, -1.5, -0.8125, -0.25, 0.125, 0.375, 0.9, 1.75, 2.5, 5.0 };
    for (int id = 0; id < FL_REF_COUNT; id++) {
        const fl_ref_fn *fn = &fl_ref_table[id];
        if (fn->rowwise)
            continue;
        fl_ref_params p;
        fl_ref_params_init(&p, fn);
        if (!strcmp(fn->name, "polyrelu"))
            p.order = 4;
        for (int e = 1; e < FL_REF_MAX_EVALS && fn->evals[e].wrt; e++) {
            const char *w = fn->evals[e].wrt;
            int which = -1; /* the input varied, or a coefficient */
            const char *names = fn->inputs;
            for (int i = 0, pos = 0; names[pos]; i++) {
                if (!strncmp(names + pos, w, strlen(w)) && (names[pos + strlen(w)] == ',' || !names[pos + strlen(w)]))
                    which = i;
                while (names[pos] && names[pos] != ',')
                    pos++;
                if (names[pos] == ',')
                    pos++;
            }
            for (size_t a = 0; a < FL_ARRAY_LEN(pts); a++) {
                mpfr_t x[3], xh[3], d, fp, fm;
                mpfr_inits2(64, x[0], x[1], x[2], (mpfr_ptr)0);
                mpfr_inits2(HP, d, fp, fm, (mpfr_ptr)0);
                mpfr_set_d(x[0], pts[a], MPFR_RNDN);
                mpfr_set_d(x[1], pts[(a + 4) % FL_ARRAY_LEN(pts)], MPFR_RNDN);
                mpfr_set_d(x[2], 1.5, MPFR_RNDN);
                mpfr_srcptr xs[3] = { x[0], x[1], x[2] };
                value_hp(d, fn, w, xs, &p);
                /* f(x+h), f(x-h) */
                for (int sgn = -1; sgn <= 1; sgn += 2) {
                    fl_ref_params q = p;
                    mpfr_inits2(64, xh[0], xh[1], xh[2], (mpfr_ptr)0);
                    for (int i = 0; i < 3; i++)
                        mpfr_set(xh[i], x[i], MPFR_RNDN);
                    const double h = 0x1p-48;
                    if (which >= 0) {
                        mpfr_set_prec(xh[which], 128);
                        mpfr_set(xh[which], x[which], MPFR_RNDN);
                        mpfr_add_d(xh[which], xh[which], sgn * h, MPFR_RNDN);
                    } else if (!strcmp(w, "alpha")) {
                        q.alpha += sgn * 0x1p-30; /* exact in binary64 */
                    } else if (w[0] == 'a') {
                        int i = w[1] - '0';
                        /* set every coefficient explicitly to the defaults' double value, then perturb */
                        for (int k = 0; k <= 4; k++)
                            if (!(q.a_set >> k & 1)) {
                                q.a[k] = k == 0 ? 0.0 : 0.25;
                                q.a_set |= 1u << k;
                            }
                        q.a[i] += sgn * 0x1p-30;
                    } else {
                        mpfr_clears(xh[0], xh[1], xh[2], (mpfr_ptr)0);
                        continue;
                    }
                    mpfr_srcptr xhs[3] = { xh[0], xh[1], xh[2] };
                    value_hp(sgn < 0 ? fm : fp, fn, "", xhs, &q);
                    mpfr_clears(xh[0], xh[1], xh[2], (mpfr_ptr)0);
                }
                int coef = which < 0;
                mpfr_sub(fp, fp, fm, MPFR_RNDN);
                mpfr_mul_2si(fp, fp, coef ? 29 : 47, MPFR_RNDN); /* / 2h */
                /* the coefficient FD for polyrelu a_i with p.order 4 and coefficients all 0.25 differs from the
                   default-coefficient derivative only through which a's are used: d/da_i does not depend on a */
                mpfr_sub(fp, fp, d, MPFR_RNDN);
                double tol = coef ? 0x1p-25 : 0x1p-60;
                double mag = fmax(1.0, fabs(mpfr_get_d(d, MPFR_RNDN)));
                /* relu-type kinks are not differentiable at 0; the points avoid 0 */
                CHECK(fabs(mpfr_get_d(fp, MPFR_RNDN)) <= tol * mag,
                      "FAIL derivative %s wrt %s at x=%a (other=%a): fd - analytic = %a", fn->name, w, pts[a],
                      mpfr_get_d(x[1], MPFR_RNDN), mpfr_get_d(fp, MPFR_RNDN));
                mpfr_clears(x[0], x[1], x[2], d, fp, fm, (mpfr_ptr)0);
            }
        }
    }
}

static void row_value(mpfr_ptr y, const fl_ref_fn *fn, const char *wrt, mpfr_srcptr const *const *rows, long n,
                      long j, const fl_ref_params *p)
{
    const fl_ref_evaluator *ev = fl_ref_find_eval(fn, wrt);
    CHECK(ev && ev->row, "no row evaluator %s/%s", fn->name, wrt);
    CHECK(fl_ref_value_row(y, ev->row, rows, n, j, p) == 0, "Ziv gave up in %s/%s", fn->name, wrt);
}

static void test_rows(void)
{
    enum { N = 5 };
    static const double xv[N] = { 0.5, -1.25, 2.0, 0.75, -0.375 }, dyv[N] = { 1.0, -0.5, 0.25, 2.0, -1.5 };
    mpfr_t x[N], dy[N], xh[N], y, s, fp, fm;
    mpfr_srcptr xp[N], dyp[N], xhp[N];
    for (int i = 0; i < N; i++) {
        mpfr_inits2(64, x[i], dy[i], (mpfr_ptr)0);
        mpfr_init2(xh[i], 128);
        mpfr_set_d(x[i], xv[i], MPFR_RNDN);
        mpfr_set_d(dy[i], dyv[i], MPFR_RNDN);
        xp[i] = x[i];
        dyp[i] = dy[i];
        xhp[i] = xh[i];
    }
    mpfr_inits2(HP, y, s, fp, fm, (mpfr_ptr)0);
    mpfr_srcptr const *rows[2] = { xp, dyp };
    /* softmax sums to 1 */
    const fl_ref_fn *sm = fl_ref_lookup("softmax");
    fl_ref_params p;
    fl_ref_params_init(&p, sm);
    mpfr_set_zero(s, 1);
    for (int j = 0; j < N; j++) {
        row_value(y, sm, "", rows, N, j, &p);
        mpfr_add(s, s, y, MPFR_RNDN);
    }
    mpfr_sub_ui(s, s, 1, MPFR_RNDN);
    CHECK(mpfr_zero_p(s) || mpfr_get_exp(s) < -HP + 5, "softmax row does not sum to 1");
    /* softmax of a constant row of 4 is exactly 1/4 in every format and mode */
    {
        mpfr_t c[4];
        mpfr_srcptr cp[4];
        for (int i = 0; i < 4; i++) {
            mpfr_init2(c[i], 64);
            mpfr_set_d(c[i], -3.5, MPFR_RNDN);
            cp[i] = c[i];
        }
        mpfr_srcptr const *cr[1] = { cp };
        uint32_t e;
        CHECK(fl_ref_round_row(&e, FL_FMT_E4M3, FL_RND_UP, FL_OVF_SATURATE, sm->evals[0].row, cr, 4, 2, &p, 0) == 0 &&
                  e == 0x28, "softmax constant row: got 0x%x want 0x28 (0.25 in e4m3)", e);
        /* polynorm of a constant row, eps = 0: a0 + sum a_i sign(c)^i = 1 (c > 0), -1/3 (c < 0) */
        const fl_ref_fn *pn = fl_ref_lookup("polynorm");
        fl_ref_params q;
        fl_ref_params_init(&q, pn);
        q.eps = 0;
        CHECK(fl_ref_round_row(&e, FL_FMT_FP32, FL_RND_NE, FL_OVF_SATURATE, pn->evals[0].row, cr, 4, 1, &q, 0) == 0 &&
                  e == 0xBEAAAAABu, "polynorm constant negative row: got 0x%x want -1/3 = 0xbeaaaaab", e);
        for (int i = 0; i < 4; i++)
            mpfr_set_d(c[i], 2.25, MPFR_RNDN);
        CHECK(fl_ref_round_row(&e, FL_FMT_BF16, FL_RND_DOWN, FL_OVF_SATURATE, pn->evals[0].row, cr, 4, 0, &q, 0) == 0 &&
                  e == 0x3F80, "polynorm constant positive row: got 0x%x want 1.0 = 0x3f80", e);
        for (int i = 0; i < 4; i++)
            mpfr_clear(c[i]);
    }
    /* VJPs against finite differences of sum_j dy_j y_j */
    const char *names[] = { "softmax", "polynorm", "pattention" };
    for (size_t f = 0; f < FL_ARRAY_LEN(names); f++) {
        const fl_ref_fn *fn = fl_ref_lookup(names[f]);
        fl_ref_params_init(&p, fn);
        for (int k = 0; k < N; k++) {
            mpfr_t g;
            mpfr_init2(g, HP);
            row_value(g, fn, "x", rows, N, k, &p);
            for (int sgn = -1; sgn <= 1; sgn += 2) {
                for (int i = 0; i < N; i++)
                    mpfr_set(xh[i], x[i], MPFR_RNDN);
                mpfr_add_d(xh[k], xh[k], sgn * 0x1p-48, MPFR_RNDN);
                mpfr_srcptr const *hr[1] = { xhp };
                mpfr_ptr acc = sgn < 0 ? fm : fp;
                mpfr_set_zero(acc, 1);
                for (int j = 0; j < N; j++) {
                    row_value(y, fn, "", hr, N, j, &p);
                    mpfr_mul(y, y, dy[j], MPFR_RNDN);
                    mpfr_add(acc, acc, y, MPFR_RNDN);
                }
            }
            mpfr_sub(fp, fp, fm, MPFR_RNDN);
            mpfr_mul_2si(fp, fp, 47, MPFR_RNDN);
            mpfr_sub(fp, fp, g, MPFR_RNDN);
            CHECK(fabs(mpfr_get_d(fp, MPFR_RNDN)) < 0x1p-60 * fmax(1.0, fabs(mpfr_get_d(g, MPFR_RNDN))),
                  "FAIL %s VJP element %d: fd - analytic = %a (analytic %a)", names[f], k, mpfr_get_d(fp, MPFR_RNDN),
                  mpfr_get_d(g, MPFR_RNDN));
            mpfr_clear(g);
        }
    }
    /* The PolyNorm reference caches a row's sums per thread (reference/polynorm.c): a changed row must
       not reuse them.  The VJP is linear in dy and scaling by 2 is exact in every operation, so
       vjp(x, 2 dy) = 2 vjp(x, dy) exactly, and the forward changes with x; both back again give the
       first values. */
    {
        const fl_ref_fn *pn = fl_ref_lookup("polynorm");
        fl_ref_params_init(&p, pn);
        mpfr_t g1, g2, v1, v2;
        mpfr_inits2(HP, g1, g2, v1, v2, (mpfr_ptr)0);
        for (int j = 0; j < N; j++) {
            row_value(g1, pn, "x", rows, N, j, &p);
            row_value(v1, pn, "", rows, N, j, &p);
            for (int i = 0; i < N; i++)
                mpfr_mul_2si(dy[i], dy[i], 1, MPFR_RNDN);
            row_value(g2, pn, "x", rows, N, j, &p);
            for (int i = 0; i < N; i++)
                mpfr_mul_2si(dy[i], dy[i], -1, MPFR_RNDN);
            mpfr_mul_2si(g2, g2, -1, MPFR_RNDN);
            CHECK(mpfr_equal_p(g1, g2), "polynorm VJP element %d: vjp(x, 2dy)/2 = %a != vjp(x, dy) = %a (stale row sums?)", j,
                  mpfr_get_d(g2, MPFR_RNDN), mpfr_get_d(g1, MPFR_RNDN));
            mpfr_mul_2si(x[(j + 1) % N], x[(j + 1) % N], 1, MPFR_RNDN); /* moves the norms D_i */
            row_value(v2, pn, "", rows, N, j, &p);
            CHECK(!mpfr_equal_p(v1, v2), "polynorm element %d: unchanged after x[%d] doubled (stale row sums?)", j,
                  (j + 1) % N);
            mpfr_mul_2si(x[(j + 1) % N], x[(j + 1) % N], -1, MPFR_RNDN);
            row_value(v2, pn, "", rows, N, j, &p);
            row_value(g2, pn, "x", rows, N, j, &p);
            CHECK(mpfr_equal_p(v1, v2) && mpfr_equal_p(g1, g2), "polynorm element %d: the row restored gives other values", j);
        }
        mpfr_clears(g1, g2, v1, v2, (mpfr_ptr)0);
    }
    for (int i = 0; i < N; i++)
        mpfr_clears(x[i], dy[i], xh[i], (mpfr_ptr)0);
    mpfr_clears(y, s, fp, fm, (mpfr_ptr)0);
}


/* ---- 5. the CLI ----------------------------------------------------------------------------------- */

static void write_f32(const char *path, int ndim, const int64_t *shape, const float *v)
{
    fl_array a;
    memset(&a, 0, sizeof a);
    a.dtype = FL_DT_F32;
    a.ndim = ndim;
    a.count = 1;
    for (int i = 0; i < ndim; i++) {
        a.shape[i] = shape[i];
        a.count *= (size_t)shape[i];
    }
    a.data = (void *)v;
    char err[256];
    CHECK(fl_npy_write(path, &a, err, sizeof err) == 0, "%s", err);
}

static int run_cli(const char *line)
{
    char buf[2048], *argv[32];
    int argc = 0;
    snprintf(buf, sizeof buf, "%s", line);
    for (char *t = strtok(buf, " "); t && argc < 31; t = strtok(NULL, " "))
        argv[argc++] = t;
    argv[argc] = NULL;
    return fl_cmd_ref(argc, argv);
}

static void test_cli(void)
{
    char dir[] = "/tmp/fl_test_ref_XXXXXX";
    CHECK(mkdtemp(dir), "mkdtemp");
    char px[300], pg[300], pu[300], ps[300], pd[300], py[300], line[1600];
    snprintf(px, sizeof px, "%s/x.npy", dir);
    snprintf(pg, sizeof pg, "%s/g.npy", dir);
    snprintf(pu, sizeof pu, "%s/u.npy", dir);
    snprintf(ps, sizeof ps, "%s/s.npy", dir);
    snprintf(pd, sizeof pd, "%s/dy.npy", dir);
    snprintf(py, sizeof py, "%s/y.npy", dir);
    const float xv[6] = { -3.5f, -0.25f, 0.0f, 0.7f, 2.0f, 500.0f }, uv[6] = { 1, -2, 3, 0.5f, -0.125f, 4 };
    const float sv[3] = { 0.5f, 0.25f, 2.0f }, dyv[6] = { 1, 0.5f, -1, 2, 0, -0.5f };
    const int64_t sh[2] = { 2, 3 }, sh1[1] = { 3 };
    write_f32(px, 2, sh, xv);
    write_f32(pg, 2, sh, xv);
    write_f32(pu, 2, sh, uv);
    write_f32(ps, 1, sh1, sv);
    write_f32(pd, 2, sh, dyv);
    struct {
        const char *args, *fn, *wrt;
        fl_format f;
        fl_rounding r;
        fl_overflow o;
        int mode; /* 0 x; 1 g,u; 2 g,u,s per channel; 3 row-wise; 4 row VJP */
    } cases[] = {
        { "--format e4m3 --param order=3", "polyrelu", "", FL_FMT_E4M3, FL_RND_NE, FL_OVF_SATURATE, 0 },
        { "--format bf16 --round up", "silu", "", FL_FMT_BF16, FL_RND_UP, FL_OVF_NOSATURATE, 0 },
        { "--format fp16 --derivative", "gelu", "x", FL_FMT_FP16, FL_RND_NE, FL_OVF_NOSATURATE, 0 },
        { "--format e5m2 --no-saturate", "swiglu", "", FL_FMT_E5M2, FL_RND_NE, FL_OVF_NOSATURATE, 1 },
        { "--format e4m3 --derivative --wrt u", "geglu", "u", FL_FMT_E4M3, FL_RND_NE, FL_OVF_SATURATE, 1 },
        { "--format e4m3", "smooth_swiglu", "", FL_FMT_E4M3, FL_RND_NE, FL_OVF_SATURATE, 2 },
        { "--format fp32", "softmax", "", FL_FMT_FP32, FL_RND_NE, FL_OVF_NOSATURATE, 3 },
        { "--format bf16 --param eps=0.001", "polynorm", "", FL_FMT_BF16, FL_RND_NE, FL_OVF_NOSATURATE, 3 },
        { "--format fp32 --derivative", "softmax", "x", FL_FMT_FP32, FL_RND_NE, FL_OVF_NOSATURATE, 4 },
    };
    for (size_t c = 0; c < FL_ARRAY_LEN(cases); c++) {
        const int m = cases[c].mode;
        snprintf(line, sizeof line, "ref %s %s %s %s %s %s", cases[c].fn, cases[c].args, m == 1 || m == 2 ? pg : px,
                 m == 1 || m == 2 ? pu : m == 4 ? pd : "", m == 2 ? ps : "", py);
        CHECK(run_cli(line) == 0, "CLI failed: %s", line);
        fl_array y;
        char err[256];
        CHECK(fl_npy_read(&y, py, err, sizeof err) == 0, "%s", err);
        CHECK(y.count == 6 && y.ndim == 2, "CLI output shape: %s", line);
        const fl_ref_fn *fn = fl_ref_lookup(cases[c].fn);
        fl_ref_params p;
        fl_ref_params_init(&p, fn);
        if (strstr(cases[c].args, "eps="))
            p.eps = 0.001;
        const fl_ref_evaluator *ev = fl_ref_find_eval(fn, cases[c].wrt);
        mpfr_t x[6], u[6], s, dyy[6];
        mpfr_srcptr xp[6], dp[6];
        for (int i = 0; i < 6; i++) {
            mpfr_inits2(64, x[i], u[i], dyy[i], (mpfr_ptr)0);
            mpfr_set_flt(x[i], xv[i], MPFR_RNDN);
            mpfr_set_flt(u[i], uv[i], MPFR_RNDN);
            mpfr_set_flt(dyy[i], dyv[i], MPFR_RNDN);
            xp[i] = x[i];
            dp[i] = dyy[i];
        }
        mpfr_init2(s, 64);
        for (int i = 0; i < 6; i++) {
            uint32_t want;
            if (m >= 3) {
                mpfr_srcptr const *rows[2] = { xp + (i / 3) * 3, dp + (i / 3) * 3 };
                CHECK(fl_ref_round_row(&want, cases[c].f, cases[c].r, cases[c].o, ev->row, rows, 3, i % 3, &p, 0) == 0,
                      "Ziv");
            } else {
                mpfr_set_flt(s, sv[i % 3], MPFR_RNDN);
                mpfr_srcptr in[3] = { x[i], u[i], s };
                CHECK(fl_ref_round(&want, cases[c].f, cases[c].r, cases[c].o, ev->eval, in, &p) == 0, "Ziv");
            }
            uint32_t got = y.dtype == FL_DT_U8 ? ((uint8_t *)y.data)[i]
                         : fl_dtype_size(y.dtype) == 2 ? ((uint16_t *)y.data)[i] : ((uint32_t *)y.data)[i];
            CHECK(got == want, "FAIL CLI '%s' element %d: got 0x%x want 0x%x", line, i, got, want);
        }
        for (int i = 0; i < 6; i++)
            mpfr_clears(x[i], u[i], dyy[i], (mpfr_ptr)0);
        mpfr_clear(s);
        fl_array_free(&y);
    }
    /* usage errors exit 2 */
    snprintf(line, sizeof line, "ref nosuchfn --format bf16 %s %s", px, py);
    CHECK(run_cli(line) == FL_EXIT_USAGE, "unknown function must be a usage error");
    snprintf(line, sizeof line, "ref silu --format bf16 --param gamma=1 %s %s", px, py);
    CHECK(run_cli(line) == FL_EXIT_USAGE, "unknown parameter must be a usage error");
    snprintf(line, sizeof line, "ref swiglu --format bf16 %s %s", px, py);
    CHECK(run_cli(line) == FL_EXIT_USAGE, "missing input must be a usage error");
    remove(px); remove(pg); remove(pu); remove(ps); remove(pd); remove(py);
    rmdir(dir);
}

int main(void)
{
    int total = 0;
    test_golden_files();
    for (int id = 0; id < FL_REF_COUNT; id++) {
        const fl_ref_fn *fn = &fl_ref_table[id];
        CHECK(fl_ref_lookup(fn->name) == fn, "lookup %s", fn->name);
        CHECK(fn->evals[0].wrt && !fn->evals[0].wrt[0], "%s: evals[0] must be the value", fn->name);
        total += fn->rowwise ? golden_rowwise(fn)
                             : golden_elementwise(fn, "") + (gold_dx[id] ? golden_elementwise(fn, "x") : 0);
    }
    printf("golden: %d lines bit-exact in fp32 and bf16\n", total);
    test_specials();
    test_tails();
    test_selfcheck();
    test_selfcheck_rows();
    test_sigmoid_identity();
    test_derivatives_fd();
    test_rows();
    test_cli();
    mpfr_free_cache();
    PASS("test_ref");
}
