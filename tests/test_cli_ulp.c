/* test_cli_ulp.c — `fp8lab ulp` end to end, through the CLI binary ($FP8LAB, else build/fp8lab):
 *   planted faults: correctly rounded outputs (MPFR) with a few perturbed by known amounts (+-k ulps,
 *     NaN, Inf, a broken saturation) are found exactly: counts, the worst list's order and indices,
 *     and the errors, which must equal the exact ones (MPFR at 256 bits) to the 2^-20 grid;
 *   safetensors inputs and outputs (BF16 tensors chosen by --tensor), and a malformed file;
 *   --range shards merged with --merge (in either order) equal the whole range; overlaps are refused;
 *   --mpfr-only gives the same JSON as the fast path on ranges of every fast function;
 *   exit statuses 0, 1, 2 and 3 (the --max-ulp gate);
 *   row-wise twins on seeded rows (--impl polynorm*, --sample ROWS, --row-len, --dist): reports identical
 *     under OMP_NUM_THREADS=1 and 2 and under mpirun -np 2, worst cases naming row and column, the
 *     printed re-check command reproducing the worst case, row shards merging to the whole, --save'd rows
 *     judged as arrays giving the same report, and the generator being the one ULP.md documents;
 *   the registry of --impl names (ulp_impls.h): kernel twins and examples, each found, names unique. */
#include "check.h"
#include "dir_test.h"
#include "npy_test.h"
#include "twins.h"
#include "ulp/ulp_impls.h"
#include "fl_round.h"
#include "npy.h"
#include "ref.h"
#include "ulp.h"

#include <jansson.h>
#include <math.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];
static const char *cli;

/* Runs the CLI with args (env: variable assignments before it, or ""); stdout into dir/out.json;
   returns the exit status. */
static int run_env(const char *env, const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s %s ulp %s >%s/out.json 2>%s/err.txt", env, cli, args, dir, dir);
    const int st = system(cmd);
    CHECK(st != -1 && WIFEXITED(st), "could not run: %s", cmd);
    return WEXITSTATUS(st);
}

static int run(const char *args) { return run_env("", args); }

static json_t *load_out(void) { return dir_json(dir, "out.json"); }

static char *slurp(const char *name) { return dir_slurp(dir, name); }

static long long geti(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    CHECK(json_is_integer(v), "no integer '%s' in the report", k);
    return json_integer_value(v);
}

static void write_npy(const char *name, fl_dtype dt, const void *data, size_t n)
{
    char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    put_npy(p, dt, 0, (int64_t)n, data);
}

/* The exact error of output code y against f(x) (MPFR, 256 bits), in ulps of f's binade. */
static double exact_err(const char *fn, fl_format fmt, float x, uint32_t y)
{
    const fl_ref_fn *rf = fl_ref_lookup(fn);
    fl_ref_params p;
    fl_ref_params_init(&p, rf);
    mpfr_t xv, f, d;
    mpfr_inits2(256, xv, f, d, (mpfr_ptr)0);
    mpfr_set_flt(xv, x, MPFR_RNDN);
    mpfr_srcptr xs[1] = { xv };
    CHECK(fl_ref_value(f, fl_ref_find_eval(rf, "")->eval, xs, &p) == 0, "no reference");
    const double u = fl_ulp(fmt, mpfr_get_d(f, MPFR_RNDN));
    mpfr_set_flt(d, fl_decode(fmt, y), MPFR_RNDN);
    mpfr_sub(d, d, f, MPFR_RNDN);
    const double e = fabs(mpfr_get_d(d, MPFR_RNDN)) / u;
    mpfr_clears(xv, f, d, (mpfr_ptr)0);
    return e;
}

static uint32_t ref_code(const char *fn, fl_format fmt, fl_overflow ovf, float x)
{
    const fl_ref_fn *rf = fl_ref_lookup(fn);
    fl_ref_params p;
    fl_ref_params_init(&p, rf);
    mpfr_t xv;
    mpfr_init2(xv, 64);
    mpfr_set_flt(xv, x, MPFR_RNDN);
    mpfr_srcptr xs[1] = { xv };
    uint32_t c;
    CHECK(fl_ref_round(&c, fmt, FL_RND_NE, ovf, fl_ref_find_eval(rf, "")->eval, xs, &p) == 0, "no reference");
    mpfr_clear(xv);
    return c;
}

/* code moved by k representable steps (same sign side; the tests stay away from zero and max) */
static uint32_t step(uint32_t c, int k, fl_format fmt)
{
    const uint32_t sbit = 1u << (fl_format_get(fmt)->bits - 1);
    const int neg = (c & sbit) != 0;
    const int64_t mag = (int64_t)(c & (sbit - 1)) + (neg ? -k : k);
    return (neg ? sbit : 0) | (uint32_t)mag;
}

static json_t *worst_at(json_t *o, size_t i)
{
    json_t *w = json_object_get(o, "worst");
    CHECK(json_is_array(w) && i < json_array_size(w), "no worst[%zu]", i);
    return json_array_get(w, i);
}

static double worst_ulp(json_t *o, size_t i)
{
    json_t *u = json_object_get(worst_at(o, i), "ulp");
    if (json_is_string(u)) {
        CHECK(!strcmp(json_string_value(u), "inf"), "ulp string '%s'", json_string_value(u));
        return INFINITY;
    }
    return json_number_value(u);
}

static void test_planted_fp32(void)
{
    enum { N = 3000 };
    static float x[N];
    static uint32_t y[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)((i - N / 2) * 0.0137 + 0.001 * (i % 7)); /* [-20.5, 20.5], away from binade edges */
        y[i] = ref_code("silu", FL_FMT_FP32, FL_OVF_NOSATURATE, x[i]);
    }
    /* plants: index -> perturbation */
    const struct { int i, k; } steps[] = { { 17, 1 }, { 100, -3 }, { 555, 40 }, { 1800, 2 }, { 2999, -1 } };
    for (size_t s = 0; s < FL_ARRAY_LEN(steps); s++)
        y[steps[s].i] = step(y[steps[s].i], steps[s].k, FL_FMT_FP32);
    y[1200] = 0x7FC00000u; /* NaN */
    y[1500] = 0x7F800000u; /* +Inf */
    write_npy("x.npy", FL_DT_F32, x, N);
    write_npy("y.npy", FL_DT_F32, y, N);
    char args[512];
    snprintf(args, sizeof args, "silu --format fp32 --inputs %s/x.npy --outputs %s/y.npy --json", dir, dir);
    CHECK(run(args) == 0, "planted fp32: exit status: %s", slurp("err.txt"));
    json_t *o = load_out();
    CHECK(geti(o, "count") == N, "count");
    CHECK(geti(o, "correctly_rounded") == N - 7, "correctly_rounded %lld", geti(o, "correctly_rounded"));
    CHECK(geti(o, "mismatched_special") == 2, "mismatched_special %lld", geti(o, "mismatched_special"));
    CHECK(geti(o, "infinite_errors") == 2, "infinite_errors");
    /* the class mismatches: the two specials by index; worst: the steps by their exact errors, descending */
    json_t *mm = json_object_get(o, "class_mismatches");
    CHECK(json_array_size(mm) == 2, "class_mismatches holds %zu", json_array_size(mm));
    for (size_t i = 0; i < 2; i++) {
        json_t *w = json_array_get(mm, i);
        CHECK(json_integer_value(json_object_get(w, "index")) == (i ? 1500 : 1200), "class_mismatches[%zu] is index %lld",
              i, (long long)json_integer_value(json_object_get(w, "index")));
        json_t *u = json_object_get(w, "ulp");
        CHECK(json_is_string(u) && !strcmp(json_string_value(u), "inf") &&
                  json_is_true(json_object_get(w, "mismatched_special")),
              "class_mismatches[%zu] not inf/special", i);
    }
    int order[5];
    double exact[5];
    for (size_t s = 0; s < FL_ARRAY_LEN(steps); s++) {
        order[s] = steps[s].i;
        exact[s] = exact_err("silu", FL_FMT_FP32, x[steps[s].i], y[steps[s].i]);
    }
    for (int a = 0; a < 5; a++)
        for (int b = a + 1; b < 5; b++)
            if (exact[b] > exact[a]) {
                const double t = exact[a];
                exact[a] = exact[b];
                exact[b] = t;
                const int ti = order[a];
                order[a] = order[b];
                order[b] = ti;
            }
    for (size_t i = 0; i < FL_ARRAY_LEN(order); i++) {
        json_t *w = worst_at(o, i);
        CHECK(json_integer_value(json_object_get(w, "index")) == order[i], "worst[%zu] is index %lld, want %d", i,
              (long long)json_integer_value(json_object_get(w, "index")), order[i]);
        const double got = worst_ulp(o, i);
        CHECK(fabs(got - exact[i]) <= 0x1p-21 * (1 + 1e-9), "index %d: reported %.9f ulp, exact %.9f", order[i], got,
              exact[i]);
        CHECK(!json_is_true(json_object_get(w, "correctly_rounded")), "index %d flagged correctly rounded", order[i]);
    }
    CHECK(worst_ulp(o, 5) <= 0.5, "the rest are correctly rounded: worst[5] = %g", worst_ulp(o, 5));
    const double max = json_number_value(json_object_get(o, "max_ulp"));
    CHECK(max == worst_ulp(o, 0), "max_ulp %g is the largest finite error, worst[0]", max);
    json_decref(o);
    /* the gate: exit 3 above the bound or on any special mismatch */
    snprintf(args, sizeof args, "silu --format fp32 --inputs %s/x.npy --outputs %s/y.npy --max-ulp 100", dir, dir);
    CHECK(run(args) == 3, "gate must fail on the NaN/Inf outputs");
    CHECK(strstr(slurp("out.json"), "FAILED"), "text report names the gate");
}

static void test_planted_e4m3(void)
{
    /* saturating e4m3: f > 464 saturates to 448 (0x7E) */
    enum { N = 600 };
    static float x[N];
    static uint8_t y[N];
    for (int i = 0; i < N; i++) {
        x[i] = i < 500 ? (float)((i - 250) * 0.0371 + 0.003) : (float)(470 + i); /* the last 100 saturate */
        y[i] = (uint8_t)ref_code("silu", FL_FMT_E4M3, FL_OVF_SATURATE, x[i]);
    }
    CHECK(y[550] == 0x7E && y[120] != 0x7E, "setup: saturation where expected");
    y[550] = 0x7D;                     /* 416 where the reference saturates: class mismatch, finite error */
    y[560] = 0x7F;                     /* NaN */
    y[300] = (uint8_t)step(y[300], 1, FL_FMT_E4M3);
    write_npy("x8.npy", FL_DT_F32, x, N);
    write_npy("y8.npy", FL_DT_U8, y, N);
    char args[512];
    snprintf(args, sizeof args, "silu --format e4m3 --inputs %s/x8.npy --outputs %s/y8.npy --output-format e4m3 --json",
             dir, dir);
    CHECK(run(args) == 0, "planted e4m3: %s", slurp("err.txt"));
    json_t *o = load_out();
    CHECK(!strcmp(json_string_value(json_object_get(o, "overflow")), "saturate"), "e4m3 saturates by default");
    CHECK(geti(o, "correctly_rounded") == N - 3, "correctly_rounded %lld", geti(o, "correctly_rounded"));
    CHECK(geti(o, "mismatched_special") == 2, "mismatched_special %lld (broken saturation + NaN)",
          geti(o, "mismatched_special"));
    CHECK(geti(o, "infinite_errors") == 1, "one infinite error (the NaN)");
    /* the class mismatches: the NaN (infinite error) first, then the broken saturation (finite error) */
    json_t *mm = json_object_get(o, "class_mismatches");
    CHECK(json_array_size(mm) == 2 && json_integer_value(json_object_get(json_array_get(mm, 0), "index")) == 560 &&
              json_integer_value(json_object_get(json_array_get(mm, 1), "index")) == 550,
          "class_mismatches: the NaN, then the broken saturation");
    /* 416 against silu(1020) ~ 1020: |416 - f| / ulp(f) with ulp 64 in [512, 1024); the largest finite
       error, so the first of the worst list as well */
    const double want = exact_err("silu", FL_FMT_E4M3, x[550], 0x7D);
    json_t *w0 = worst_at(o, 0);
    CHECK(json_integer_value(json_object_get(w0, "index")) == 550 && json_is_true(json_object_get(w0, "mismatched_special")),
          "broken saturation first among the finite errors");
    CHECK(fabs(worst_ulp(o, 0) - want) <= 0x1p-21 * (1 + 1e-9), "saturation error %.9f vs %.9f", worst_ulp(o, 0), want);
    CHECK(json_number_value(json_object_get(o, "max_ulp")) == worst_ulp(o, 0), "max_ulp is worst[0]'s");
    CHECK(json_integer_value(json_object_get(worst_at(o, 1), "index")) == 300, "the +1 step second");
    const double want3 = exact_err("silu", FL_FMT_E4M3, x[300], y[300]);
    CHECK(fabs(worst_ulp(o, 1) - want3) <= 0x1p-21 * (1 + 1e-9), "step error %.9f vs %.9f", worst_ulp(o, 1), want3);
    json_decref(o);
}

/* The largest finite error keeps its input whatever the class mismatches: 11 NaN outputs and one
   output of about 1.76e6 ulp (the report's max_ulp) must name that output's input in worst[0], in text
   and JSON; and the tanhf reproducer of 1 + 2.48e-9 ulp is not faithful. */
static void test_hidden_finite_worst(void)
{
    enum { N = 64 };
    static float x[N], y[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)(i - 20) * 0.25f + 0.125f;
        y[i] = fl_f32_from_bits(ref_code("silu", FL_FMT_FP32, FL_OVF_NOSATURATE, x[i]));
    }
    for (int i = 0; i < 11; i++)
        y[40 + i] = NAN;
    y[9] = fl_f32_from_bits(fl_f32_bits(y[9]) + 1756149); /* about 1.76e6 steps away, one binade */
    write_npy("xh.npy", FL_DT_F32, x, N);
    write_npy("yh.npy", FL_DT_F32, y, N);
    char args[512];
    snprintf(args, sizeof args, "silu --format fp32 --inputs %s/xh.npy --outputs %s/yh.npy --json", dir, dir);
    CHECK(run(args) == 0, "hidden worst: %s", slurp("err.txt"));
    json_t *o = load_out();
    const double max = json_number_value(json_object_get(o, "max_ulp"));
    CHECK(max > 1e6 && geti(o, "infinite_errors") == 11, "max_ulp %g, infinite %lld", max, geti(o, "infinite_errors"));
    CHECK(geti(worst_at(o, 0), "index") == 9 && worst_ulp(o, 0) == max, "worst[0] is index %lld (%g), want 9 (%g)",
          geti(worst_at(o, 0), "index"), worst_ulp(o, 0), max);
    CHECK(json_array_size(json_object_get(o, "class_mismatches")) == 10, "10 of the 11 class mismatches listed");
    json_decref(o);
    snprintf(args, sizeof args, "silu --format fp32 --inputs %s/xh.npy --outputs %s/yh.npy", dir, dir);
    CHECK(run(args) == 0, "hidden worst (text): %s", slurp("err.txt"));
    char want[64];
    snprintf(want, sizeof want, "#1  index 9 ");
    const char *txt = slurp("out.json"); /* run() sends stdout there, text or not */
    const char *fin = strstr(txt, "worst finite errors");
    CHECK(fin && strstr(fin, want) && strstr(txt, "class mismatches (10 of 11"), "the text names index 9 first: %s", txt);
    /* tanhf at 0x33000001: exact error 1 + 2.48e-9 ulp, reported 1.000000, not faithful */
    CHECK(run("--impl tanhf_f32 --range 0x33000001:0x33000002 --json") == 0, "tanhf reproducer: %s", slurp("err.txt"));
    o = load_out();
    CHECK(geti(o, "faithful") == 0 && worst_ulp(o, 0) == 1.0 &&
              !strcmp(json_string_value(json_object_get(worst_at(o, 0), "bucket")), "<=2"),
          "tanhf 0x33000001: faithful %lld, error %g", geti(o, "faithful"), worst_ulp(o, 0));
    json_decref(o);
    CHECK(run("--impl tanhf_f32 --range 0x33000001:0x33000002 --json --mpfr-only") == 0, "tanhf reproducer (MPFR)");
    o = load_out();
    CHECK(geti(o, "faithful") == 0, "tanhf 0x33000001 by MPFR: faithful %lld", geti(o, "faithful"));
    json_decref(o);
}

/* A safetensors file: tensors (name, dtype, data), little-endian, in the order given. */
static void write_safetensors(const char *name, int n, const char *const *names, const char *const *dtypes,
                              const void *const *data, const size_t *bytes, const size_t *counts, size_t trunc)
{
    char header[2048];
    int k = snprintf(header, sizeof header, "{\"__metadata__\":{\"format\":\"pt\"}");
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        k += snprintf(header + k, sizeof header - (size_t)k, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[%zu],\"data_offsets\":[%zu,%zu]}",
                      names[i], dtypes[i], counts[i], off, off + bytes[i]);
        off += bytes[i];
    }
    k += snprintf(header + k, sizeof header - (size_t)k, "}");
    while (k % 8)
        header[k++] = ' ';
    char p[128];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    uint8_t len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (uint8_t)((uint64_t)k >> (8 * i));
    fwrite(len, 1, 8, f);
    fwrite(header, 1, (size_t)k, f);
    size_t written = 0;
    for (int i = 0; i < n; i++) {
        size_t b = bytes[i];
        if (trunc && written + b > off - trunc)
            b = off - trunc > written ? off - trunc - written : 0;
        fwrite(data[i], 1, b, f);
        written += b;
    }
    fclose(f);
}

static void test_safetensors(void)
{
    enum { N = 1024 };
    static uint16_t xb[N], yb[N];
    static int64_t ids[3] = { 1, 2, 3 };
    for (int i = 0; i < N; i++) {
        xb[i] = (uint16_t)fl_encode_f32(FL_FMT_BF16, (float)(i - N / 2) / 37.0f, FL_RND_NE, FL_OVF_NOSATURATE, 0);
        yb[i] = (uint16_t)ref_code("silu", FL_FMT_BF16, FL_OVF_NOSATURATE, fl_decode(FL_FMT_BF16, xb[i]));
    }
    yb[77] = (uint16_t)step(yb[77], 2, FL_FMT_BF16);
    const char *names[] = { "act.x", "act.y", "ids" };
    const char *dtypes[] = { "BF16", "BF16", "I64" };
    const void *data[] = { xb, yb, ids };
    const size_t bytes[] = { sizeof xb, sizeof yb, sizeof ids }, counts[] = { N, N, 3 };
    write_safetensors("t.safetensors", 3, names, dtypes, data, bytes, counts, 0);
    char args[512];
    snprintf(args, sizeof args,
             "silu --format bf16 --inputs %s/t.safetensors --tensor act.x --outputs %s/t.safetensors --tensor act.y --json",
             dir, dir);
    CHECK(run(args) == 0, "safetensors: %s", slurp("err.txt"));
    json_t *o = load_out();
    CHECK(geti(o, "count") == N && geti(o, "correctly_rounded") == N - 1, "safetensors counts");
    CHECK(json_integer_value(json_object_get(worst_at(o, 0), "index")) == 77, "safetensors worst index");
    json_t *in0 = json_array_get(json_object_get(worst_at(o, 0), "inputs"), 0);
    char hex[16];
    snprintf(hex, sizeof hex, "0x%04x", xb[77]);
    CHECK(!strcmp(json_string_value(json_object_get(in0, "hex")), hex), "input hex %s, want %s",
          json_string_value(json_object_get(in0, "hex")), hex);
    json_decref(o);
    /* a tensor of an unsupported dtype, a missing tensor, an ambiguous file, a truncated file */
    snprintf(args, sizeof args, "silu --format bf16 --inputs %s/t.safetensors --tensor ids --outputs %s/t.safetensors --tensor act.y",
             dir, dir);
    CHECK(run(args) == 1 && strstr(slurp("err.txt"), "I64"), "I64 tensor refused: %s", slurp("err.txt"));
    snprintf(args, sizeof args, "silu --format bf16 --inputs %s/t.safetensors --tensor nope --outputs %s/t.safetensors --tensor act.y",
             dir, dir);
    CHECK(run(args) == 1 && strstr(slurp("err.txt"), "nope"), "missing tensor named: %s", slurp("err.txt"));
    snprintf(args, sizeof args, "silu --format bf16 --inputs %s/t.safetensors --outputs %s/t.safetensors --tensor act.y",
             dir, dir);
    CHECK(run(args) == 1 && strstr(slurp("err.txt"), "--tensor"), "ambiguous file: %s", slurp("err.txt"));
    write_safetensors("bad.safetensors", 3, names, dtypes, data, bytes, counts, 10);
    snprintf(args, sizeof args, "silu --format bf16 --inputs %s/bad.safetensors --tensor act.x --outputs %s/t.safetensors --tensor act.y",
             dir, dir);
    CHECK(run(args) == 1 && strstr(slurp("err.txt"), "bad.safetensors"), "truncated file named: %s", slurp("err.txt"));
}

static char *json_text(void)
{
    static char buf[3][1 << 16];
    static int k;
    char *b = buf[k++ % 3];
    strcpy(b, slurp("out.json"));
    return b;
}

/* Equal reports, ignoring the shard list. */
static void same_report(json_t *a, json_t *b, const char *what)
{
    static const char *const keys[] = { "function", "format", "count", "correctly_rounded", "faithful",
                                        "mismatched_special", "infinite_errors", "max_ulp", "mean_ulp",
                                        "sum_ulp_units", "histogram", "worst", "class_mismatches" };
    for (size_t i = 0; i < FL_ARRAY_LEN(keys); i++)
        CHECK(json_equal(json_object_get(a, keys[i]), json_object_get(b, keys[i])), "%s: '%s' differs", what, keys[i]);
}

static void test_shards(void)
{
    char args[512];
    const char *impl = "--impl silu_f32_naive";
    snprintf(args, sizeof args, "%s --range 0x3f7f0000:0x3f820000 --json", impl);
    CHECK(run(args) == 0, "whole");
    json_t *whole = load_out();
    snprintf(args, sizeof args, "%s --range 0x3f7f0000:0x3f80a000 --json > %s/s1.json; %s ulp %s --range 0x3f80a000:0x3f820000 --json",
             impl, dir, cli, impl); /* the second command of the line needs its own "ulp" */
    CHECK(run(args) == 0, "shards");
    char s2[128];
    snprintf(s2, sizeof s2, "%s/s2.json", dir);
    rename(strcat(strcpy(args, dir), "/out.json"), s2);
    snprintf(args, sizeof args, "--merge %s/s2.json %s/s1.json --json", dir, dir);
    CHECK(run(args) == 0, "merge: %s", slurp("err.txt"));
    json_t *m = load_out();
    same_report(whole, m, "merged shards vs whole");
    CHECK(json_array_size(json_object_get(m, "shards")) == 2, "merged report lists its shards");
    json_decref(m);
    snprintf(args, sizeof args, "--merge %s/s1.json %s/s2.json --json", dir, dir);
    CHECK(run(args) == 0, "merge 2");
    m = load_out();
    same_report(whole, m, "merged shards (other order) vs whole");
    json_decref(m);
    snprintf(args, sizeof args, "--merge %s/s1.json %s/s1.json", dir, dir);
    CHECK(run(args) == 1 && strstr(slurp("err.txt"), "overlaps"), "overlapping shards refused");
    json_decref(whole);
}

/* Arrays written in pieces (--index-base) with a derivative (--wrt): the outputs of the twin
   swiglu_bwd_g_bf16 (d/dg silu(g) u, run with dy = 1) for the pairs 0x3f7f0000 .. 0x3f82ffff in the
   `--impl` indexing (g = index >> 16, u = index & 0xffff), split into two files, judged and merged, give
   the --impl report of the same range. */
static void test_pieces_wrt(void)
{
    const fl_twin *tw = fl_twin_find("swiglu_bwd_g_bf16");
    CHECK(tw, "twin swiglu_bwd_g_bf16");
#define PIECES_N 0x40000
    const uint64_t lo = 0x3f7f0000, mid = 0x3f81a000, hi = lo + PIECES_N;
    static uint32_t g[PIECES_N], u[PIECES_N], y[PIECES_N];
    static uint16_t g16[PIECES_N], u16[PIECES_N], y16[PIECES_N];
    for (uint64_t i = lo; i < hi; i++)
        g[i - lo] = (uint32_t)(i >> 16), u[i - lo] = (uint32_t)(i & 0xffff);
    const uint32_t *in[3] = { g, u, NULL };
    tw->run(y, in, hi - lo, 0);
    for (size_t i = 0; i < hi - lo; i++)
        g16[i] = (uint16_t)g[i], u16[i] = (uint16_t)u[i], y16[i] = (uint16_t)y[i];
    char args[1024];
    snprintf(args, sizeof args, "--impl swiglu_bwd_g_bf16 --range 0x%llx:0x%llx --json", (unsigned long long)lo, (unsigned long long)hi);
    CHECK(run(args) == 0, "impl: %s", slurp("err.txt"));
    json_t *whole = load_out();
    const uint64_t cut[3] = { lo, mid, hi };
    for (int p = 0; p < 2; p++) {
        const size_t o = cut[p] - lo, n = cut[p + 1] - cut[p];
        write_npy("pg.npy", FL_DT_U16, g16 + o, n);
        write_npy("pu.npy", FL_DT_U16, u16 + o, n);
        write_npy("py.npy", FL_DT_U16, y16 + o, n);
        snprintf(args, sizeof args, "swiglu --format bf16 --inputs %s/pg.npy --input-format bf16 --inputs %s/pu.npy "
                 "--input-format bf16 --outputs %s/py.npy --output-format bf16 --wrt g --index-base %llu --json",
                 dir, dir, dir, (unsigned long long)cut[p]);
        CHECK(run(args) == 0, "piece %d: %s", p, slurp("err.txt"));
        char to[128], from[128];
        snprintf(from, sizeof from, "%s/out.json", dir);
        snprintf(to, sizeof to, "%s/piece%d.json", dir, p);
        CHECK(rename(from, to) == 0, "rename");
    }
    snprintf(args, sizeof args, "--merge %s/piece0.json %s/piece1.json --json", dir, dir);
    CHECK(run(args) == 0, "merge pieces: %s", slurp("err.txt"));
    json_t *m = load_out();
    same_report(whole, m, "pieces with --wrt g --index-base vs --impl");
    CHECK(!strcmp(json_string_value(json_object_get(m, "params")), json_string_value(json_object_get(whole, "params"))),
          "params %s vs %s", json_string_value(json_object_get(m, "params")), json_string_value(json_object_get(whole, "params")));
    json_decref(m);
    json_decref(whole);
    /* bad uses */
    CHECK(run("--impl swiglu_bf16 --range 0:16 --wrt g") == 2 && strstr(slurp("err.txt"), "--wrt"), "--wrt with --impl");
    CHECK(run("--impl swiglu_bf16 --range 0:16 --index-base 5") == 2 && strstr(slurp("err.txt"), "--index-base"), "--index-base with --impl");
    snprintf(args, sizeof args, "swiglu --format bf16 --inputs %s/pg.npy --input-format bf16 --inputs %s/pu.npy --input-format bf16 "
             "--outputs %s/py.npy --output-format bf16 --wrt q", dir, dir, dir);
    CHECK(run(args) == 2 && strstr(slurp("err.txt"), "no derivative"), "unknown --wrt input: %s", slurp("err.txt"));
}

static void test_mpfr_only(void)
{
    static const char *const impls[] = { "silu_f32_naive", "sigmoid_via_tanhf_f32", "tanhf_f32", "gelu_erff_f32",
                                         "gelu_tanh_f32", "silu_f32_e4m3", "swiglu_bf16" };
    /* around 1, around -6, tiny, large, NaN/Inf */
    static const char *const ranges[] = { "0x3f7ffe00:0x3f800200", "0xc0bfff00:0xc0c00100", "0x33ffff00:0x34000100",
                                          "0x42ffff00:0x43000100", "0x7f7fff80:0x7f800080" };
    char args[512];
    for (size_t i = 0; i < FL_ARRAY_LEN(impls); i++)
        for (size_t r = 0; r < FL_ARRAY_LEN(ranges); r++) {
            snprintf(args, sizeof args, "--impl %s --range %s --json", impls[i], ranges[r]);
            CHECK(run(args) == 0, "fast %s", args);
            const char *a = json_text();
            snprintf(args, sizeof args, "--impl %s --range %s --json --mpfr-only", impls[i], ranges[r]);
            CHECK(run(args) == 0, "mpfr %s", args);
            const char *b = json_text();
            CHECK(!strcmp(a, b), "--mpfr-only differs from the fast path: %s", args);
        }
    /* uniform samples over every binary32 input (indices of the sample, not the inputs, in the report) */
    for (size_t i = 0; i < 4; i++) {
        snprintf(args, sizeof args, "--impl %s --sample 4000 --seed 5 --json", impls[i]);
        CHECK(run(args) == 0, "fast %s", args);
        const char *a = json_text();
        snprintf(args, sizeof args, "--impl %s --sample 4000 --seed 5 --json --mpfr-only", impls[i]);
        CHECK(run(args) == 0, "mpfr %s", args);
        CHECK(!strcmp(a, json_text()), "--mpfr-only differs from the fast path: %s", args);
    }
}

/* ---- row-wise twins on seeded rows ------------------------------------------------------------- */

/* The generator as experiments/ulp/ULP.md section 6 defines it (the normal distribution). */
static uint64_t g_mix(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double g_unif(uint64_t seed, uint64_t stream, uint64_t row, uint64_t col, uint64_t draw)
{
    const uint64_t h = g_mix(g_mix(g_mix(g_mix(g_mix(seed) ^ stream) ^ row) ^ col) ^ draw);
    return ((double)(h >> 11) + 0.5) * 0x1p-53;
}

static double g_normal(uint64_t seed, uint64_t stream, uint64_t row, uint64_t col)
{
    return sqrt(-2.0 * log(g_unif(seed, stream, row, col, 0))) * cos(6.283185307179586 * g_unif(seed, stream, row, col, 1));
}

static fl_array read_npy(const char *name)
{
    char p[128], err[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    fl_array a;
    CHECK(fl_npy_read(&a, p, err, sizeof err) == 0, "%s", err);
    return a;
}

#define PN3 "--param a1=0x1.555556p-2 --param a2=0x1.555556p-2 --param a3=0x1.555556p-2 --param eps=0x1.0c6f7ap-20"

static void test_rowwise(void)
{
    static const struct { const char *impl, *dist; int vjp; } cases[] = {
        { "polynorm3_bf16", "normal", 0 }, { "polynorm2_bf16", "cancel", 0 }, { "polynorm4_bf16", "cancel", 0 },
        { "polynorm3_bf16_e4m3", "heavy", 0 }, { "polynorm3_e4m3_bf16", "heavy", 0 },
        { "polynorm3_bwd_bf16", "cancel", 1 }, { "polynorm3_bwd_e5m2", "heavy", 1 },
    };
    enum { ROWS = 6, H = 96 };
    char args[1024];
    for (size_t i = 0; i < FL_ARRAY_LEN(cases); i++) {
        snprintf(args, sizeof args, "--impl %s --sample %d --row-len %d --seed 11 --dist %s --json", cases[i].impl, ROWS, H,
                 cases[i].dist);
        CHECK(run_env("OMP_NUM_THREADS=1", args) == 0, "%s: %s", args, slurp("err.txt"));
        const char *one = json_text();
        CHECK(run_env("OMP_NUM_THREADS=2", args) == 0, "%s: %s", args, slurp("err.txt"));
        CHECK(!strcmp(one, json_text()), "%s: the report differs between 1 and 2 threads", args);
        json_t *o = load_out();
        CHECK(geti(o, "count") == ROWS * H && geti(o, "row_len") == H, "%s: count %lld", args, geti(o, "count"));
        CHECK(json_array_size(json_object_get(o, "input_formats")) == (size_t)(1 + cases[i].vjp), "%s: inputs", args);
        json_t *w = json_object_get(o, "worst");
        CHECK(json_array_size(w) == 10, "%s: 10 worst cases", args);
        for (size_t k = 0; k < json_array_size(w); k++) {
            json_t *e = json_array_get(w, k);
            const long long idx = geti(e, "index"), r = geti(e, "row"), c = geti(e, "column");
            CHECK(r >= 0 && r < ROWS && c >= 0 && c < H && idx == r * H + c, "%s: worst %zu: index %lld, row %lld, column %lld",
                  args, k, idx, r, c);
        }
        json_decref(o);
    }
    printf("row-wise: %zu twins x distributions, reports identical with 1 and 2 threads\n", FL_ARRAY_LEN(cases));

    /* the text report's re-check command reproduces the worst case (row H, one row) */
    snprintf(args, sizeof args, "--impl polynorm2_bf16 --sample %d --row-len %d --seed 5 --dist cancel", ROWS, H);
    CHECK(run(args) == 0, "text report");
    const char *mark = "re-check the worst:   fp8lab ulp ";
    const char *rc = strstr(slurp("out.json"), mark);
    CHECK(rc, "no re-check line: %s", slurp("out.json"));
    rc += strlen(mark);
    char again[512];
    snprintf(again, sizeof again, "%.*s --json", (int)strcspn(rc, "\n"), rc);
    CHECK(strstr(again, "--seed 5") && strstr(again, "--dist cancel") && strstr(again, "--row-len 96"), "re-check: %s", again);
    snprintf(args, sizeof args, "--impl polynorm2_bf16 --sample %d --row-len %d --seed 5 --dist cancel --json", ROWS, H);
    CHECK(run(args) == 0, "json");
    json_t *whole = load_out();
    CHECK(run(again) == 0, "re-check %s: %s", again, slurp("err.txt"));
    json_t *re = load_out();
    CHECK(geti(re, "count") == H, "re-check judges one row");
    CHECK(json_equal(worst_at(whole, 0), worst_at(re, 0)), "re-check (%s) does not reproduce the worst case", again);
    json_decref(re);

    /* row shards --range 0:2 and 2:6 merge to --sample 6 */
    snprintf(args, sizeof args, "--impl polynorm2_bf16 --range 0:2 --row-len %d --seed 5 --dist cancel --json > %s/r1.json; "
             "%s ulp --impl polynorm2_bf16 --range 2:%d --row-len %d --seed 5 --dist cancel --json",
             H, dir, cli, ROWS, H); /* the second command's stdout is run's out.json */
    CHECK(run(args) == 0, "row shards");
    char p1[128], p2[128];
    snprintf(p1, sizeof p1, "%s/out.json", dir);
    snprintf(p2, sizeof p2, "%s/r2.json", dir);
    CHECK(rename(p1, p2) == 0, "rename");
    snprintf(args, sizeof args, "--merge %s/r2.json %s/r1.json --json", dir, dir);
    CHECK(run(args) == 0, "merge row shards: %s", slurp("err.txt"));
    json_t *m = load_out();
    same_report(whole, m, "merged row shards vs whole");
    CHECK(geti(m, "row_len") == H, "merged report keeps row_len");
    json_decref(m);
    json_decref(whole);

    /* --save: the rows judged as arrays give the same report; the normal generator is the documented one */
    snprintf(args, sizeof args, "--impl polynorm3_bf16 --sample 3 --row-len %d --seed 9 --dist normal --json --save %s/s_", H, dir);
    CHECK(run(args) == 0, "--save: %s", slurp("err.txt"));
    json_t *imp = load_out();
    snprintf(args, sizeof args, "polynorm --format bf16 " PN3 " --input-format bf16 --inputs %s/s_x.npy --outputs %s/s_y.npy --json",
             dir, dir);
    CHECK(run(args) == 0, "arrays: %s", slurp("err.txt"));
    json_t *arr = load_out();
    same_report(imp, arr, "--save'd rows judged as arrays vs --impl");
    json_decref(imp);
    json_decref(arr);
    fl_array x = read_npy("s_x.npy");
    CHECK(x.dtype == FL_DT_U16 && x.ndim == 2 && x.shape[0] == 3 && x.shape[1] == H, "saved x: shape");
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < H; c++) {
            const uint32_t want = fl_encode_f64(FL_FMT_BF16, g_normal(9, 1, (uint64_t)r, (uint64_t)c), FL_RND_NE, FL_OVF_NOSATURATE, 0);
            const uint16_t got = ((const uint16_t *)x.data)[r * H + c];
            CHECK(got == want, "row %d col %d: x 0x%04x, the documented generator gives 0x%04x", r, c, got, want);
        }
    fl_array_free(&x);
    fl_array dy = read_npy("s_y.npy");
    CHECK(dy.count == 3 * H, "saved y");
    fl_array_free(&dy);

    /* cancel (r = 2): every row holds elements whose output is ~0 against its terms (double) */
    enum { HC = 512 }; /* rows long enough for the tuning columns' resolution */
    snprintf(args, sizeof args, "--impl polynorm2_bf16 --sample 4 --row-len %d --seed 3 --dist cancel --json --save %s/c_", HC, dir);
    CHECK(run(args) == 0, "cancel --save: %s", slurp("err.txt"));
    fl_array cx = read_npy("c_x.npy");
    for (int r = 0; r < 4; r++) {
        double S1 = 0, S2 = 0, best = INFINITY;
        for (int c = 0; c < HC; c++) {
            const double v = fl_decode(FL_FMT_BF16, ((const uint16_t *)cx.data)[r * HC + c]);
            S1 += v * v;
            S2 += v * v * v * v;
        }
        const double D1 = sqrt(S1 / HC + 0x1.0c6f7ap-20), D2 = sqrt(S2 / HC + 0x1.0c6f7ap-20);
        int near = 0;
        for (int c = 0; c < HC; c++) {
            const double v = fl_decode(FL_FMT_BF16, ((const uint16_t *)cx.data)[r * HC + c]);
            const double t1 = v / D1, t2 = v * v / D2, q = fabs(t1 + t2) / (fabs(t1) + fabs(t2));
            best = q < best ? q : best;
            near += v < 0 && q < 0x1p-5;
        }
        CHECK(best < 0x1p-16 && near >= HC / 32, "cancel row %d: least |y| / sum|terms| %g, %d elements below 2^-5", r, best, near);
    }
    fl_array_free(&cx);

    /* usage */
    CHECK(run("--impl polynorm3_bf16 --exhaustive") == 2, "row-wise --exhaustive refused");
    CHECK(run("--impl polynorm3_bf16 --sample 1 --dist bogus") == 2, "bad --dist");
    CHECK(run("--impl polynorm3_bf16 --sample 1 --row-len 0") == 2, "--row-len 0");
    CHECK(run("--impl silu_bf16 --exhaustive --dist heavy") == 2, "--dist with an elementwise implementation");
    CHECK(run("silu --impl polynorm3_bf16 --sample 1") == 2, "function mismatch");
}

/* build/fp8lab-mpi (make ulp-mpi) under mpirun -np 2 prints the one-process report. */
static void test_mpi(void)
{
    char mpi[256], cmd[1024];
    snprintf(mpi, sizeof mpi, "%s", cli);
    char *slash = strrchr(mpi, '/');
    snprintf(slash ? slash + 1 : mpi, sizeof mpi - (size_t)(slash ? slash + 1 - mpi : 0), "fp8lab-mpi");
    if (access(mpi, X_OK) != 0 || system("command -v mpirun >/dev/null 2>&1") != 0) {
        printf("note: %s or mpirun missing: MPI check skipped (make ulp-mpi)\n", mpi);
        return;
    }
    /* elementwise, then row-wise (each rank judges whole rows of the seeded stream) */
    static const char *const cases[2] = { "--impl silu_f32_naive --range 0x3f7f0000:0x3f830000 --json",
                                          "--impl polynorm3_bwd_bf16 --sample 5 --row-len 64 --seed 2 --dist cancel --json" };
    for (int k = 0; k < 2; k++) {
        CHECK(run(cases[k]) == 0, "one process: %s", cases[k]);
        const char *one = json_text();
        snprintf(cmd, sizeof cmd,
                 "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 mpirun --oversubscribe -np 2 "
                 "%s ulp %s >%s/out.json 2>%s/err.txt",
                 mpi, cases[k], dir, dir);
        const int st = system(cmd);
        CHECK(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "mpirun -np 2 failed (%s): %s", cases[k], slurp("err.txt"));
        CHECK(!strcmp(one, json_text()), "the 2-rank report differs from the one-process report: %s", cases[k]);
    }
    printf("mpirun -np 2: report identical to one process (elementwise and row-wise)\n");
}

static void test_exit_codes(void)
{
    CHECK(run("--impl silu_f32_naive --range 0x3f000000:0x3f001000 --max-ulp 0.5") == 3, "gate 0.5 fails");
    CHECK(run("--impl silu_f32_naive --range 0x3f000000:0x3f001000 --max-ulp 4") == 0, "gate 4 passes");
    CHECK(run("--impl silu_f32_naive --range 0x3f000000:0x3f001000 --bogus") == 2, "unknown option");
    CHECK(run("--impl nope --exhaustive") == 2, "unknown impl");
    CHECK(run("--impl silu_f32_naive") == 2, "no sweep given");
    CHECK(run("silu --inputs a.npy --outputs b.npy") == 2, "no --format");
    CHECK(run("silu --format fp32 --inputs /nonexistent/a.npy --outputs /nonexistent/b.npy") == 1, "missing file");
    CHECK(strstr(slurp("err.txt"), "/nonexistent/a.npy"), "message names the file");
    CHECK(run("--impl gelu_tanh_as_gelu_bf16 --exhaustive") == 0, "bf16 exhaustive runs");
    CHECK(strstr(slurp("out.json"), "re-check the worst:   fp8lab ulp gelu --format bf16 --impl gelu_tanh_as_gelu_bf16 --range"),
          "text report gives the re-check command");
    /* a row-wise function judges rows: inputs (2, 3) against outputs (3, 2) are refused, not read as
       rows of 2 */
    {
        static const float v[6] = { 0.5f, -1, 2, 0.25f, 3, -2 };
        char p[128], err[256];
        for (int t = 0; t < 2; t++) {
            fl_array a;
            memset(&a, 0, sizeof a);
            a.dtype = FL_DT_F32;
            a.ndim = 2;
            a.shape[0] = t ? 3 : 2;
            a.shape[1] = t ? 2 : 3;
            a.count = 6;
            a.data = (void *)v;
            snprintf(p, sizeof p, "%s/%s", dir, t ? "rows_y.npy" : "rows_x.npy");
            CHECK(fl_npy_write(p, &a, err, sizeof err) == 0, "%s", err);
        }
        char args[512];
        snprintf(args, sizeof args, "softmax --format fp32 --inputs %s/rows_x.npy --outputs %s/rows_y.npy", dir, dir);
        CHECK(run(args) == 1 && strstr(slurp("err.txt"), "has shape (2, 3) but") && strstr(slurp("err.txt"), "(3, 2)"),
              "row-wise shapes differ: %s", slurp("err.txt"));
    }
}

/* ---- the registry of implementations ------------------------------------------------------------ */

static void test_registry(void)
{
    for (size_t i = 0; i < fl_twin_count; i++)
        CHECK(fl_ulp_impl_find(fl_twins[i].name) == &fl_twins[i], "find twin %s", fl_twins[i].name);
    CHECK(fl_ulp_example_count >= 12, "examples");
    for (size_t i = 0; i < fl_ulp_example_count; i++) {
        const fl_twin *e = &fl_ulp_examples[i];
        CHECK(fl_ulp_impl_find(e->name) == e, "find example %s", e->name);
        CHECK(fl_twin_find(e->name) == NULL, "example %s among the kernel twins", e->name);
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(fl_ulp_examples[j].name, e->name) != 0, "duplicate %s", e->name);
        CHECK(e->n_inputs == 1 && e->run && e->ref_fn && e->ref_params && e->summary && !e->derivative && !e->ref_wrt &&
                  !e->rowwise, "example %s", e->name);
        /* one input, run through the registry's signature: 1 -> the function near 1, finite */
        const uint32_t one = fl_encode_f64(e->in_fmt[0], 1.0, FL_RND_NE, FL_OVF_SATURATE, 0);
        const uint32_t *in[3] = { &one, NULL, NULL };
        uint32_t y;
        e->run(&y, in, 1, 0);
        CHECK(!fl_is_nan(fl_format_get(e->out_fmt), y), "example %s: NaN at 1", e->name);
    }
    CHECK(fl_ulp_impl_find("no_such_impl") == NULL && fl_ulp_impl_find(NULL) == NULL, "find unknown");
    printf("registry: %zu kernel twins and %zu examples, names unique\n", fl_twin_count, fl_ulp_example_count);
}

int main(void)
{
    test_registry();
    cli = getenv("FP8LAB") ? getenv("FP8LAB") : "build/fp8lab";
    if (access(cli, X_OK) != 0)
        SKIP("no CLI binary at %s", cli);
    dir_make(dir, sizeof dir, "/tmp/fl_cmd_ulp_XXXXXX");
    test_planted_fp32();
    test_planted_e4m3();
    test_hidden_finite_worst();
    test_safetensors();
    test_shards();
    test_pieces_wrt();
    test_mpfr_only();
    test_rowwise();
    test_mpi();
    test_exit_codes();
    dir_remove(dir);
    PASS("test_cli_ulp");
}
