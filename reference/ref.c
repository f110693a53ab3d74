/* ref.c — the registry of reference functions (names, definitions, parameters, evaluators), the Ziv
 * driver and the tail helpers (see ref.h). */
#include "ref.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "round_mpfr.h"

/* The evaluators of every row of act_list.h, declared from its shape (they live in reference/NAME.c or
   the family's file): a missing one fails at link time, a misnamed one at compile time. */
#define PROTO_EVAL(f) int fl_ref_eval_##f(mpfr_ptr, mpfr_srcptr const *, const fl_ref_params *, mpfr_prec_t);
#define PROTO_ROW(f) \
    int fl_ref_row_##f(mpfr_ptr, mpfr_srcptr const *const *, long, long, const fl_ref_params *, mpfr_prec_t);
#define PROTO(wrt, f, kind, n) PROTO_##kind(f)
#define PROTOS(ID, name, shape, ...) FL_ACT_SHAPE_##shape(name, PROTO)
FL_ACT_REFS(PROTOS)

#define ENTRY_EVAL(wrt, f, n) { wrt, fl_ref_eval_##f, NULL, n },
#define ENTRY_ROW(wrt, f, n) { wrt, NULL, fl_ref_row_##f, n },
#define ENTRY(wrt, f, kind, n) ENTRY_##kind(wrt, f, n)
#define ROW_OF(ID, name, shape, gold_dx, definition, params, defaults)                                     \
    [FL_REF_##ID] = { #name, FL_ACT_NIN_##shape, FL_ACT_ROWWISE_##shape, FL_ACT_INPUTS_##shape, definition, \
                      params, defaults, { FL_ACT_SHAPE_##shape(name, ENTRY) { NULL, NULL, NULL, 0 } } },

const fl_ref_fn fl_ref_table[FL_REF_COUNT] = { FL_ACT_REFS(ROW_OF) };
static_assert(sizeof fl_ref_table / sizeof fl_ref_table[0] == FL_REF_COUNT, "one row per fl_ref_id");

const fl_ref_fn *fl_ref_lookup(const char *name)
{
    for (int i = 0; i < FL_REF_COUNT; i++)
        if (fl_ref_table[i].name && !strcmp(fl_ref_table[i].name, name))
            return &fl_ref_table[i];
    return NULL;
}

const fl_ref_evaluator *fl_ref_find_eval(const fl_ref_fn *fn, const char *wrt)
{
    if (!wrt)
        wrt = "";
    for (int i = 0; i < FL_REF_MAX_EVALS && fn->evals[i].wrt; i++)
        if (!strcmp(fn->evals[i].wrt, wrt))
            return &fn->evals[i];
    return NULL;
}

void fl_ref_params_init(fl_ref_params *p, const fl_ref_fn *fn)
{
    memset(p, 0, sizeof *p);
    p->alpha = 0.01;
    p->beta = 1.0;
    p->eps = 1e-6;
    p->order = 3;
    if (fn && fl_ref_params_apply(p, fn->defaults)) { /* a bug in act_list.h: tests/test_act_list.c */
        fprintf(stderr, "fp8lab: bad defaults \"%s\" of %s in reference/act_list.h\n", fn->defaults, fn->name);
        abort();
    }
}

int fl_ref_params_apply(fl_ref_params *p, const char *list)
{
    char buf[256];
    if (snprintf(buf, sizeof buf, "%s", list) >= (int)sizeof buf)
        return -1;
    for (char *save = NULL, *tok = strtok_r(buf, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            return -1;
        *eq = 0;
        if (fl_ref_params_set(p, tok, eq + 1))
            return -1;
    }
    return 0;
}

int fl_ref_params_set(fl_ref_params *p, const char *name, const char *value)
{
    char *end;
    double v = strtod(value, &end);
    if (!*value || *end)
        return -1;
    if (!strcmp(name, "alpha")) {
        p->alpha = v;
        p->alpha_set = 1;
    } else if (!strcmp(name, "beta")) {
        p->beta = v;
    } else if (!strcmp(name, "eps")) {
        if (!(v >= 0))
            return -1;
        p->eps = v;
    } else if (!strcmp(name, "tau")) {
        p->tau = v;
        p->tau_set = 1;
    } else if (!strcmp(name, "order")) {
        if (v != 1 && v != 2 && v != 3 && v != 4)
            return -1;
        p->order = (int)v;
    } else if (name[0] == 'a' && name[1] >= '0' && name[1] <= '4' && !name[2]) {
        p->a[name[1] - '0'] = v;
        p->a_set |= 1u << (name[1] - '0');
    } else {
        return -1;
    }
    return 0;
}

/* ---- the Ziv driver ------------------------------------------------------------------------- */

int fl_ref_near(mpfr_ptr y, mpfr_srcptr c, int dir)
{
    mpfr_t d;
    mpfr_init2(d, mpfr_get_prec(c));
    mpfr_set(d, c, MPFR_RNDN); /* c may alias an input; copy before changing y's precision */
    mpfr_set_prec(y, mpfr_get_prec(c) + 310);
    mpfr_set(y, d, MPFR_RNDN);
    mpfr_mul_2si(d, d, -300, MPFR_RNDN);
    if (dir > 0)
        mpfr_add(y, y, d, MPFR_RNDN); /* exact: the precision spans both */
    else
        mpfr_sub(y, y, d, MPFR_RNDN);
    mpfr_clear(d);
    return FL_REF_SURE;
}

int fl_ref_tiny(mpfr_ptr y, int negative)
{
    mpfr_set_si_2exp(y, negative ? -1 : 1, -(1L << 20), MPFR_RNDN);
    return FL_REF_SURE;
}

int fl_ref_huge(mpfr_ptr y, int negative)
{
    mpfr_set_si_2exp(y, negative ? -1 : 1, 1L << 20, MPFR_RNDN);
    return FL_REF_SURE;
}

int fl_ref_near_unit(mpfr_ptr y, int sign, int dir)
{
    MPFR_DECL_INIT(one, 2); /* automatic: no clear */
    mpfr_set_si(one, sign, MPFR_RNDN);
    return fl_ref_near(y, one, dir);
}

int fl_ref_nan(mpfr_ptr y)
{
    mpfr_set_nan(y);
    return FL_REF_SURE;
}

int fl_ref_chain_err(int n)
{
    int k = 0;
    while ((1 << k) < 2 * (n + 1))
        k++;
    return k;
}

double fl_ref_log2abs(mpfr_srcptr x)
{
    if (!mpfr_number_p(x) || mpfr_zero_p(x))
        return mpfr_zero_p(x) ? -HUGE_VAL : HUGE_VAL;
    long e;
    double m = mpfr_get_d_2exp(&e, x, MPFR_RNDN);
    return log2(fabs(m)) + (double)e;
}

/* The Ziv loop shared by both drivers: evaluate at wp, stop when the result is sure or can be
   rounded to `bits` (target precision + 1 for RNE, per MPFR's idiom with MPFR_RNDZ). */
typedef struct {
    fl_ref_eval_fn ev;
    fl_ref_row_fn row;
    mpfr_srcptr const *x;
    mpfr_srcptr const *const *rows;
    long n, j;
    const fl_ref_params *p;
} ziv_job;

static int ziv(mpfr_ptr y, const ziv_job *job, mpfr_prec_t target, int rne, mpfr_prec_t extra)
{
    /* Inputs carry at most 64 bits (binary64 or a decoded format): starting at 64 + 32 bits makes
       copies, negations and small-integer multiples of an input exact inside the evaluators. */
    const mpfr_prec_t wp0 = (target > 64 ? target : 64) + 32 + extra;
    for (mpfr_prec_t wp = wp0; wp <= FL_REF_MAX_PREC; wp *= 2) {
        mpfr_set_prec(y, wp);
        int k = job->ev ? job->ev(y, job->x, job->p, wp)
                        : job->row(y, job->rows, job->n, job->j, job->p, wp);
        if (k == FL_REF_SURE)
            return 0;
        if (!mpfr_regular_p(y))
            continue; /* an approximate zero says nothing: raise the precision */
        if (mpfr_can_round(y, mpfr_get_prec(y) - k, MPFR_RNDN, MPFR_RNDZ, target + rne))
            return 0;
    }
    return -1;
}

static int round_job(uint32_t *out, fl_format f, fl_rounding rnd, fl_overflow ovf, const ziv_job *job,
                     mpfr_prec_t extra)
{
    mpfr_prec_t p;
    mpfr_exp_t emin, emax;
    fl_mpfr_format_range(f, &p, &emin, &emax);
    mpfr_t y;
    mpfr_init2(y, p + 32);
    /* For a subnormal result the format keeps fewer than p bits; every boundary of the shorter
       precision is also one of precision p, so deciding the rounding at p bits decides it there. */
    int rc = ziv(y, job, p, rnd == FL_RND_NE || rnd == FL_RND_SR, extra);
    if (rc == 0)
        *out = fl_mpfr_encode(f, y, rnd, ovf, NULL);
    else
        *out = fl_format_get(f)->nan;
    mpfr_clear(y);
    return rc;
}

int fl_ref_round_wp(uint32_t *out, fl_format f, fl_rounding rnd, fl_overflow ovf, fl_ref_eval_fn ev,
                    mpfr_srcptr const *x, const fl_ref_params *p, mpfr_prec_t extra)
{
    ziv_job job = { ev, NULL, x, NULL, 0, 0, p };
    return round_job(out, f, rnd, ovf, &job, extra);
}

int fl_ref_round(uint32_t *out, fl_format f, fl_rounding rnd, fl_overflow ovf, fl_ref_eval_fn ev,
                 mpfr_srcptr const *x, const fl_ref_params *p)
{
    return fl_ref_round_wp(out, f, rnd, ovf, ev, x, p, 0);
}

int fl_ref_round_row(uint32_t *out, fl_format f, fl_rounding rnd, fl_overflow ovf, fl_ref_row_fn ev,
                     mpfr_srcptr const *const *x, long n, long j, const fl_ref_params *p,
                     mpfr_prec_t extra)
{
    ziv_job job = { NULL, ev, NULL, x, n, j, p };
    return round_job(out, f, rnd, ovf, &job, extra);
}

static int value_job(mpfr_ptr out, const ziv_job *job)
{
    mpfr_t y;
    mpfr_init2(y, mpfr_get_prec(out) + 32);
    int rc = ziv(y, job, mpfr_get_prec(out), 1, 0);
    if (rc == 0)
        mpfr_set(out, y, MPFR_RNDN);
    else
        mpfr_set_nan(out);
    mpfr_clear(y);
    return rc;
}

int fl_ref_value(mpfr_ptr y, fl_ref_eval_fn ev, mpfr_srcptr const *x, const fl_ref_params *p)
{
    ziv_job job = { ev, NULL, x, NULL, 0, 0, p };
    return value_job(y, &job);
}

int fl_ref_value_row(mpfr_ptr y, fl_ref_row_fn ev, mpfr_srcptr const *const *x, long n, long j,
                     const fl_ref_params *p)
{
    ziv_job job = { NULL, ev, NULL, x, n, j, p };
    return value_job(y, &job);
}
