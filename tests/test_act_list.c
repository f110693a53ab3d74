/* test_act_list.c — the one list of activations (reference/act_list.h) against the lookups of the
 * subsystems it feeds: the reference table (fl_ref_lookup, each row's defaults), the fast path
 * (fl_fast_lookup and the line of `fp8lab ulp --list` that names the fast functions), the training
 * activations (ffn_act.h: parse, names, gating, smoothing, coefficients) and the polynomial-order
 * study (fl_order_act).  The tables are generated from the list; these checks catch a lookup that
 * disagrees with it and a row whose parts contradict each other (a gated training activation whose
 * reference takes one input, a fast path without a reference, ...). */
#include <stdio.h>
#include <string.h>

#include "act_list.h"
#include "check.h"
#include "polyorder/polyorder.h"
#include "ref.h"
#include "train/ffn_act.h"
#include "ulp/ulp_fast.h"
#include "ulp/ulp_impls.h"

/* Every row with the first element of each part (REF / FAST / TRAIN or NONE). */
#define STR_(x) #x
#define STR(x) STR_(x)
#define LEAD(part) FL_ACT_CALL_(FL_ACT_HEAD_, FL_ACT_UNPAREN_ part, ~)
#define ALL_ROW(M, ID, name, ref, fast, train) { #name, STR(LEAD(ref)), STR(LEAD(fast)), STR(LEAD(train)) },
static const struct {
    const char *name, *ref, *fast, *train;
} rows[] = { FL_ACT_LIST(ALL_ROW, ~) };
#define N_ROWS (sizeof rows / sizeof rows[0])

static int has(const char *part, const char *lead) { return !strcmp(part, lead); }

static void test_rows(void)
{
    int n_ref = 0, n_train = 0;
    for (size_t i = 0; i < N_ROWS; i++) {
        CHECK(has(rows[i].ref, "REF") || has(rows[i].ref, "NONE"), "%s: REF part %s", rows[i].name, rows[i].ref);
        CHECK(has(rows[i].fast, "FAST") || has(rows[i].fast, "NONE"), "%s: FAST part %s", rows[i].name, rows[i].fast);
        CHECK(has(rows[i].train, "TRAIN") || has(rows[i].train, "NONE"), "%s: TRAIN part %s", rows[i].name,
              rows[i].train);
        CHECK(has(rows[i].ref, "REF") || has(rows[i].train, "TRAIN"), "%s: neither a reference nor trained",
              rows[i].name);
        CHECK(has(rows[i].ref, "REF") || has(rows[i].fast, "NONE"), "%s: a fast path needs a reference", rows[i].name);
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(rows[i].name, rows[j].name), "%s: two rows", rows[i].name);
        n_ref += has(rows[i].ref, "REF");
        n_train += has(rows[i].train, "TRAIN");
    }
    CHECK(n_ref == FL_REF_COUNT && n_train == FL_ACT_COUNT, "%d references (%d ids), %d trained (%d kinds)", n_ref,
          FL_REF_COUNT, n_train, FL_ACT_COUNT);
}

/* The reference table in the list's order; every row's defaults apply. */
static void test_reference(void)
{
    int id = 0;
    for (size_t i = 0; i < N_ROWS; i++) {
        if (!has(rows[i].ref, "REF"))
            continue;
        const fl_ref_fn *fn = &fl_ref_table[id++];
        CHECK(!strcmp(fn->name, rows[i].name), "fl_ref_table[%d] is %s, the list says %s", id - 1, fn->name,
              rows[i].name);
        CHECK(fl_ref_lookup(rows[i].name) == fn, "fl_ref_lookup(%s)", rows[i].name);
        CHECK(fn->n_inputs >= 1 && fn->n_inputs <= 3 && fn->evals[0].wrt && !fn->evals[0].wrt[0], "%s: inputs, value",
              fn->name);
        for (int e = 0; e < FL_REF_MAX_EVALS && fn->evals[e].wrt; e++)
            CHECK(fn->rowwise ? fn->evals[e].row && !fn->evals[e].eval : fn->evals[e].eval && !fn->evals[e].row,
                  "%s d/d%s: evaluator kind", fn->name, fn->evals[e].wrt);
        fl_ref_params p;
        fl_ref_params_init(&p, NULL);
        CHECK(!fl_ref_params_apply(&p, fn->defaults), "%s: defaults \"%s\" do not parse", fn->name, fn->defaults);
    }
    CHECK(!fl_ref_lookup("smooth_swiglu_token") && !fl_ref_lookup("nosuch"), "lookup of a name without a reference");
    fl_ref_params p;
    fl_ref_params_init(&p, NULL);
    CHECK(fl_ref_params_apply(&p, "alpha") && fl_ref_params_apply(&p, "alpha=1 nosuch=2") &&
              fl_ref_params_apply(&p, "order=9"),
          "fl_ref_params_apply accepts a bad list");
    CHECK(!fl_ref_params_apply(&p, "alpha=0.5  beta=2") && p.alpha == 0.5 && p.beta == 2, "fl_ref_params_apply");
}

/* fl_fast_lookup finds exactly the rows with a FAST part, with the evaluator for their input count,
   and `fp8lab ulp --list` names exactly those. */
static void test_fast(void)
{
    int n_fast = 0;
    for (size_t i = 0; i < N_ROWS; i++) {
        const fl_fast_fn *f = fl_fast_lookup(rows[i].name);
        CHECK((f == NULL) == has(rows[i].fast, "NONE"), "%s: the list says %s, fl_fast_lookup %s", rows[i].name, rows[i].fast,
              f ? "finds one" : "none");
        if (!f)
            continue;
        n_fast++;
        const fl_ref_fn *fn = fl_ref_lookup(rows[i].name);
        CHECK(!strcmp(f->name, rows[i].name) && (f->eval != NULL) == (fn->n_inputs == 1) &&
                  (f->eval2 != NULL) == (fn->n_inputs == 2) && !fn->rowwise,
              "%s: the fast evaluator does not take the reference's %d inputs", rows[i].name, fn->n_inputs);
    }
    CHECK(!fl_fast_lookup("nosuch"), "fl_fast_lookup(nosuch)");
    FILE *f = tmpfile();
    CHECK(f, "tmpfile");
    fl_ulp_impl_list(f);
    rewind(f);
    char line[1024], *names = NULL;
    while (!names && fgets(line, sizeof line, f))
        if (!strncmp(line, "fast path", 9))
            names = strchr(line, ':');
    fclose(f);
    CHECK(names, "`fp8lab ulp --list` has no fast path line");
    int listed = 0;
    for (char *save = NULL, *t = strtok_r(names + 1, " \n", &save); t; t = strtok_r(NULL, " \n", &save), listed++)
        CHECK(fl_fast_lookup(t), "`fp8lab ulp --list` names %s, which has no fast path in act_list.h", t);
    CHECK(listed == n_fast, "`fp8lab ulp --list` names %d fast functions, act_list.h %d (experiments/ulp/examples.c)",
          listed, n_fast);
}

/* The training activations: names parse back, every variant round-trips, and the columns agree with
   the reference of the same name. */
static void test_training(void)
{
    for (int k = 0; k < FL_ACT_COUNT; k++) {
        const fl_act_info *t = &fl_act_table[k];
        fl_act a;
        CHECK(t->name && !fl_act_parse(&a, t->name) && a.kind == (uint32_t)k && (int)a.order == t->order_default,
              "kind %d: %s does not parse to itself", k, t->name ? t->name : "(no row)");
        CHECK(fl_act_ncoef(a) == (t->order_max ? t->order_default + 1 : 0) && fl_act_ncoef(a) <= FL_ACT_NCOEF,
              "%s: coefficients", t->name);
        CHECK(!fl_act_swiglu(a) || t->gated, "%s: SwiGLU arithmetic on one plane", t->name);
        CHECK(t->smooth == -1 || (fl_act_swiglu(a) && fl_act_smooth_axis(a) == t->smooth && t->smooth <= 1),
              "%s: smoothing %d (the Smooth-SwiGLU cast, axis 0 or 1)", t->name, t->smooth);
        const fl_ref_fn *fn = fl_ref_lookup(t->name);
        if (fn) {
            CHECK((fn->n_inputs >= 2) == t->gated, "%s: gated %d, the reference takes %s", t->name, t->gated, fn->inputs);
            CHECK((fl_ref_find_eval(fn, "a0") != NULL) == (t->order_max > 0), "%s: orders vs coefficients", t->name);
        }
    }
    fl_act v[64];
    const int nv = fl_act_variants(v, 64);
    CHECK(nv >= FL_ACT_COUNT && nv <= 64, "%d variants", nv);
    for (int i = 0; i < nv; i++) {
        fl_act b;
        CHECK(!fl_act_parse(&b, fl_act_name(v[i])) && b.kind == v[i].kind && b.order == v[i].order,
              "variant %d (kind %u order %u): %s does not parse back", i, v[i].kind, v[i].order, fl_act_name(v[i]));
    }
}

/* The order study's activations are the references with polynomial coefficients, in the list's order. */
static void test_order_study(void)
{
    int a = 0;
    for (int id = 0; id < FL_REF_COUNT; id++) {
        if (!fl_ref_find_eval(&fl_ref_table[id], "a0"))
            continue;
        fl_order_act o;
        CHECK(a < FL_ORDER_ACT_COUNT && !strcmp(fl_order_act_name((fl_order_act)a), fl_ref_table[id].name) &&
                  !fl_order_act_parse(&o, fl_ref_table[id].name) && o == (fl_order_act)a,
              "%s: not the order study's activation %d", fl_ref_table[id].name, a);
        a++;
    }
    CHECK(a == FL_ORDER_ACT_COUNT, "%d polynomial references, %d in the order study", a, FL_ORDER_ACT_COUNT);
}

int main(void)
{
    test_rows();
    test_reference();
    test_fast();
    test_training();
    test_order_study();
    printf("act_list: %zu rows, %d reference functions, %d training activations\n", N_ROWS, FL_REF_COUNT,
           FL_ACT_COUNT);
    PASS("test_act_list");
}
