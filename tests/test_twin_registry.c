/* test_twin_registry.c — every row of the CPU-twin registry (kernels/twins.h) against the reference
 * table and against the kernel it names:
 *   - its reference function exists (fl_ref_lookup) and so does its derivative (fl_ref_find_eval,
 *     w.r.t. the derivative-th input the function names); row-wise, inputs and the evaluator agree;
 *     its reference parameters parse (fl_ref_params_set);
 *   - its kernel (fl_twin_kernel_of) is the one the row describes: reference function, derivative,
 *     inputs and row-wise of the kernel kind (kind_facts below), the order of the parameters, the
 *     coefficients the kernel uses (RN32(1/r)) equal to the parameters' exactly, PolyNorm's eps
 *     RN32(1e-6) likewise, gate and up in one format, Smooth-SwiGLU's scale an e8m0 power of two;
 *   - its accuracy-table mode (fl_twin_table_mode) keeps the rules of twins.h;
 *   - `fp8lab ulp --list --json` ($FP8LAB, else build/fp8lab) lists every row once, as the registry has it.
 * The row checker must also reject broken copies of rows (a function or derivative the reference does
 * not have, a wrong order, coefficients the kernel does not use, a kernel of another kind, ...). */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "cli_test.h"
#include "kernels.h"
#include "ref.h"
#include "twins.h"
#include "ulp/ulp_fast.h"
#include "ulp/ulp_impls.h"

/* What each kernel kind computes, as the reference names it. */
static const struct {
    const char *ref;
    int derivative;
    const char *wrt;
    int n_inputs;
    int rowwise;
    int ordered; /* takes a PolyReLU / PolyNorm order */
} kind_facts[FL_TWIN_KERNEL_COUNT] = {
    [FL_TWIN_SILU] = { "silu", 0, NULL, 1, 0, 0 },
    [FL_TWIN_SILU_GRAD] = { "silu", 1, "x", 1, 0, 0 },
    [FL_TWIN_SIGMOID] = { "sigmoid", 0, NULL, 1, 0, 0 },
    [FL_TWIN_POLYRELU_FWD] = { "polyrelu", 0, NULL, 1, 0, 1 },
    [FL_TWIN_POLYRELU_BWD] = { "polyrelu", 1, "x", 1, 0, 1 },
    [FL_TWIN_POLYNORM_FWD] = { "polynorm", 0, NULL, 1, 1, 1 },
    [FL_TWIN_POLYNORM_BWD] = { "polynorm", 1, "x", 2, 1, 1 }, /* the VJP: x, dy */
    [FL_TWIN_SWIGLU_FWD] = { "swiglu", 0, NULL, 2, 0, 0 },
    [FL_TWIN_SWIGLU_BWD_G] = { "swiglu", 1, "g", 2, 0, 0 },
    [FL_TWIN_SWIGLU_BWD_U] = { "swiglu", 2, "u", 2, 0, 0 },
    [FL_TWIN_SMOOTH_FWD] = { "smooth_swiglu", 0, NULL, 3, 0, 0 },
};

static char why[512];

/* The row's problem (in why), or NULL when it is consistent. */
static const char *fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    return why;
}

/* The k-th (1-based) name of a comma-separated list, into out. */
static void nth_name(char *out, size_t n, const char *list, int k)
{
    out[0] = 0;
    for (int i = 1; list && i <= k; i++) {
        const char *end = strchr(list, ',');
        const size_t len = end ? (size_t)(end - list) : strlen(list);
        if (i == k)
            snprintf(out, n, "%.*s", (int)len, list);
        list = end ? end + 1 : NULL;
    }
}

static const char *row_problem(const fl_twin *t, const fl_twin_kernel *k)
{
    /* the reference side */
    const fl_ref_fn *fn = fl_ref_lookup(t->ref_fn);
    if (!fn)
        return fail("reference function '%s' is not in the reference table", t->ref_fn);
    if ((t->derivative == 0) != (t->ref_wrt == NULL))
        return fail("derivative %d with wrt %s", t->derivative, t->ref_wrt ? t->ref_wrt : "NULL");
    const fl_ref_evaluator *ev = fl_ref_find_eval(fn, t->derivative ? t->ref_wrt : "");
    if (!ev)
        return fail("%s has no derivative w.r.t. '%s' in the reference table", t->ref_fn, t->ref_wrt);
    if (t->derivative) {
        char name[32];
        nth_name(name, sizeof name, fn->inputs, t->derivative);
        if (strcmp(name, t->ref_wrt))
            return fail("input %d of %s is '%s', not '%s'", t->derivative, t->ref_fn, name, t->ref_wrt);
    }
    if (t->rowwise != fn->rowwise)
        return fail("row-wise %d, %s %d", t->rowwise, t->ref_fn, fn->rowwise);
    if (t->n_inputs != ev->n_inputs)
        return fail("%d inputs, the evaluator reads %d", t->n_inputs, ev->n_inputs);
    fl_ref_params p;
    fl_ref_params_init(&p, fn);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", t->ref_params);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        if (eq)
            *eq = 0;
        if (!eq || fl_ref_params_set(&p, tok, eq + 1))
            return fail("parameter '%s' does not parse for %s", tok, t->ref_fn);
    }
    /* the formats */
    for (int i = 0; i < t->n_inputs; i++)
        if ((unsigned)t->in_fmt[i] >= FL_FMT_COUNT || (t->in_fmt[i] == FL_FMT_E8M0) != (i == 2 && k && k->id == FL_TWIN_SMOOTH_FWD))
            return fail("input %d has format %d", i + 1, (int)t->in_fmt[i]);
    if ((unsigned)t->out_fmt >= FL_FMT_COUNT || t->out_fmt == FL_FMT_E8M0)
        return fail("output format %d", (int)t->out_fmt);
    /* the kernel */
    if (!k || (unsigned)k->id >= FL_TWIN_KERNEL_COUNT)
        return fail("no kernel");
    const char *kn = fl_twin_kernel_name(k->id);
    if (strcmp(kind_facts[k->id].ref, t->ref_fn) || kind_facts[k->id].derivative != t->derivative ||
        (t->ref_wrt && strcmp(kind_facts[k->id].wrt, t->ref_wrt)) || kind_facts[k->id].n_inputs != t->n_inputs ||
        kind_facts[k->id].rowwise != t->rowwise)
        return fail("kernel %s computes something else", kn);
    if (t->n_inputs >= 2 && !t->rowwise && t->in_fmt[1] != t->in_fmt[0])
        return fail("gate and up in %s and %s (the kernel takes one format)", fl_format_name(t->in_fmt[0]),
                    fl_format_name(t->in_fmt[1]));
    if (!kind_facts[k->id].ordered)
        return k->order ? fail("kernel %s takes no order (%d)", kn, k->order) : NULL;
    if (k->order < 2 || k->order > FL_POLY_MAX_ORDER || p.order != k->order)
        return fail("kernel order %d, parameters order %d", k->order, p.order);
    /* the reference computes the kernel's function: its coefficients (a_0 = 0, a_i = RN32(1/r)), exactly */
    const fl_poly_coef c = fl_poly_coef_default(k->order);
    for (int i = 0; i <= k->order; i++) {
        const int given = (p.a_set >> i) & 1;
        if (given ? p.a[i] != (double)c.a[i] : i == 0 ? c.a[0] != 0.0f : (double)c.a[i] * k->order != 1.0)
            return fail("a%d: the kernel's %a, the reference's %s", i, (double)c.a[i], given ? "given value differs" : "1/order");
    }
    if (fn->rowwise && p.eps != (double)1e-6f)
        return fail("eps %a, the kernel's %a", p.eps, (double)1e-6f);
    return NULL;
}

static void test_rows(void)
{
    CHECK(fl_twin_count > 0, "an empty registry");
    for (size_t i = 0; i < fl_twin_count; i++) {
        const fl_twin *t = &fl_twins[i];
        const char *bad = row_problem(t, fl_twin_kernel_of(t));
        CHECK(!bad, "FAIL %s: %s", t->name, bad);
    }
    for (size_t i = 0; i < fl_ulp_example_count; i++)
        CHECK(fl_twin_kernel_of(&fl_ulp_examples[i]) == NULL, "example %s has a kernel", fl_ulp_examples[i].name);
    printf("  %zu registry rows consistent with the reference table and their kernels\n", fl_twin_count);
}

/* Broken copies of rows: each must be rejected. */
static void test_checker(void)
{
    const fl_twin *g = fl_twin_find("swiglu_bwd_g_bf16"), *r = fl_twin_find("polyrelu3_bf16"), *n = fl_twin_find("polynorm3_bf16"),
                  *s = fl_twin_find("smooth_swiglu_bf16");
    CHECK(g && r && n && s, "the rows the checker test starts from");
    const fl_twin_kernel *kg = fl_twin_kernel_of(g), *kr = fl_twin_kernel_of(r), *kn = fl_twin_kernel_of(n);
    const fl_twin_kernel k_fwd = { FL_TWIN_SWIGLU_FWD, 0 }, k_r2 = { FL_TWIN_POLYRELU_FWD, 2 };
    struct {
        fl_twin t;
        const fl_twin_kernel *k;
        const char *what;
    } bad[] = {
        { *g, kg, "an unknown function" },  { *g, kg, "an unknown derivative" }, { *g, kg, "wrt without derivative" },
        { *g, kg, "the wrong input's name" }, { *g, &k_fwd, "a forward kernel" }, { *g, NULL, "no kernel" },
        { *r, kr, "a_i = 1/3 exactly" },      { *r, &k_r2, "order 2 kernel" },  { *r, kr, "a bad parameter" },
        { *n, kn, "eps 1e-6 exactly" },       { *s, fl_twin_kernel_of(s), "a bf16 scale" },
        { *g, kg, "gate and up apart" },      { *n, kn, "not row-wise" },
    };
    bad[0].t.ref_fn = "no_such_function";
    bad[1].t.ref_wrt = "s";
    bad[2].t.derivative = 0;
    bad[3].t.derivative = 2;
    bad[6].t.ref_params = "order=3";
    bad[8].t.ref_params = "order=3,no_such_param=1";
    bad[9].t.ref_params = "order=3,a1=0x1.555556p-2,a2=0x1.555556p-2,a3=0x1.555556p-2,eps=1e-6";
    bad[10].t.in_fmt[2] = FL_FMT_BF16;
    bad[11].t.in_fmt[1] = FL_FMT_E4M3;
    bad[12].t.rowwise = 0;
    for (size_t i = 0; i < FL_ARRAY_LEN(bad); i++) {
        const char *p = row_problem(&bad[i].t, bad[i].k);
        CHECK(p, "the checker took a row with %s", bad[i].what);
        printf("  rejected, %-22s %s\n", bad[i].what, p);
    }
}

static void test_modes(void)
{
    for (size_t i = 0; i < fl_twin_count; i++) {
        const fl_twin *t = &fl_twins[i];
        const int bits = fl_twin_space_bits(t);
        int narrow = 1;
        for (int k = 0; k < t->n_inputs; k++)
            narrow &= fl_format_get(t->in_fmt[k])->bits <= 16;
        for (int fast = 0; fast <= 1; fast++) {
            fl_twin_mode m;
            fl_twin_table_mode(&m, t, fast);
            char args[128];
            CHECK(fl_twin_mode_args(args, sizeof args, &m) > 0 && strstr(args, "--"), "%s: mode arguments", t->name);
            if (t->rowwise) {
                CHECK(m.kind == FL_TWIN_MODE_ROWS && m.count > 0 && m.row_len > 0, "%s: seeded rows", t->name);
                continue;
            }
            CHECK(m.kind != FL_TWIN_MODE_ROWS, "%s: rows for an elementwise twin", t->name);
            if (bits <= 16) /* one input of <= 16 bits, e4m3 pairs: always every input */
                CHECK(m.kind == FL_TWIN_MODE_EXHAUSTIVE, "%s: %d input bits not exhaustive", t->name, bits);
            if (m.kind == FL_TWIN_MODE_EXHAUSTIVE)
                CHECK(m.count == 1ull << bits && (bits <= 16 || (fast && narrow && bits <= 32)),
                      "%s (fast path %d): exhaustive over 2^%d inputs", t->name, fast, bits);
            else
                CHECK(bits > 16 && m.count > 0 && m.count < 1ull << (bits < 63 ? bits : 63), "%s: a sample of %llu from 2^%d",
                      t->name, (unsigned long long)m.count, bits);
        }
    }
    /* the one exhaustive 2^32 case: bf16 pairs with the fast path (the SwiGLU forward), sampled without it */
    fl_twin_mode m0, m1;
    fl_twin_table_mode(&m0, fl_twin_find("swiglu_bf16"), 0);
    fl_twin_table_mode(&m1, fl_twin_find("swiglu_bf16"), 1);
    CHECK(m0.kind == FL_TWIN_MODE_SAMPLE && m1.kind == FL_TWIN_MODE_EXHAUSTIVE && m1.count == 1ull << 32, "swiglu_bf16 modes");
    printf("  table modes follow the input formats\n");
}

static const char *jstr(json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "";
}

/* `fp8lab ulp --list --json` lists the registry as it is. */
static void test_listing(void)
{
    char out[] = "/tmp/fl_twin_registry_XXXXXX";
    const int fd = mkstemp(out);
    CHECK(fd >= 0, "mkstemp");
    close(fd);
    const char *args[] = { "ulp", "--list", "--json", NULL };
    CHECK(run_out(out, "/dev/null", args) == 0, "fp8lab ulp --list --json failed");
    json_error_t e;
    json_t *root = json_load_file(out, 0, &e);
    CHECK(root, "the listing is not JSON: %s (line %d)", e.text, e.line);
    json_t *twins = json_object_get(root, "twins"), *examples = json_object_get(root, "examples");
    CHECK(json_array_size(twins) == fl_twin_count, "%zu twins listed, %zu in the registry", json_array_size(twins), fl_twin_count);
    CHECK(json_array_size(examples) == fl_ulp_example_count, "examples listed");
    for (size_t i = 0; i < fl_twin_count; i++) {
        const fl_twin *t = &fl_twins[i];
        const fl_twin_kernel *k = fl_twin_kernel_of(t);
        json_t *o = json_array_get(twins, i), *ins = json_object_get(o, "input_formats"), *kj = json_object_get(o, "kernel");
        CHECK(!strcmp(jstr(o, "name"), t->name) && !strcmp(jstr(o, "ref_fn"), t->ref_fn) &&
                  !strcmp(jstr(o, "output_format"), fl_format_name(t->out_fmt)) &&
                  json_is_true(json_object_get(o, "rowwise")) == (t->rowwise != 0),
              "listing row %zu (%s) is not registry row %s", i, jstr(o, "name"), t->name);
        CHECK(json_array_size(ins) == (size_t)t->n_inputs, "%s: inputs", t->name);
        for (int j = 0; j < t->n_inputs; j++)
            CHECK(!strcmp(json_string_value(json_array_get(ins, j)), fl_format_name(t->in_fmt[j])), "%s: input %d", t->name, j);
        CHECK(!strcmp(jstr(kj, "name"), fl_twin_kernel_name(k->id)) &&
                  json_integer_value(json_object_get(kj, "order")) == k->order,
              "%s: kernel", t->name);
        /* the mode, from the listing's fast path; which exists only where ulp_fast.h has the function */
        const int fast = json_is_true(json_object_get(o, "fast_path"));
        CHECK(!fast || fl_fast_lookup(t->ref_fn), "%s: a fast path ulp_fast.h does not have", t->name);
        fl_twin_mode m;
        fl_twin_table_mode(&m, t, fast);
        char want[128], got[128] = "";
        fl_twin_mode_args(want, sizeof want, &m);
        json_t *ma = json_object_get(o, "mode_args");
        for (size_t j = 0; j < json_array_size(ma); j++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%s", j ? " " : "", json_string_value(json_array_get(ma, j)));
        CHECK(!strcmp(got, want) && !strcmp(jstr(o, "mode"), fl_twin_mode_name(m.kind)), "%s: mode '%s', want '%s'", t->name, got,
              want);
    }
    CHECK(json_is_true(json_object_get(json_array_get(twins, fl_twin_find("swiglu_bf16") - fl_twins), "fast_path")),
          "swiglu_bf16 is judged by the fast path");
    for (size_t i = 0; i < fl_ulp_example_count; i++)
        CHECK(json_is_null(json_object_get(json_array_get(examples, i), "kernel")), "example %zu has a kernel", i);
    json_decref(root);
    unlink(out);
    printf("  fp8lab ulp --list --json lists the %zu twins as the registry has them\n", fl_twin_count);
}

int main(void)
{
    test_rows();
    test_checker();
    test_modes();
    cli = getenv("FP8LAB") ? getenv("FP8LAB") : "build/fp8lab";
    if (access(cli, X_OK) != 0)
        SKIP("no CLI binary at %s (the registry checks above passed)", cli);
    test_listing();
    PASS("test_twin_registry");
}
