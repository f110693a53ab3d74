/* ulp_judge.c — the judge of `fp8lab ulp`: one output against the exact value, by the fast path
 * (ulp_fast.h) when its enclosure decides, else by MPFR at increasing precision (cmd_ulp_internal.h). */
#include "cmd_ulp_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- per-thread state ------------------------------------------------------------------------------ */

void ulp_tctx_init(ulp_tctx *c, const ulp_job *j)
{
    memset(c, 0, sizeof *c);
    for (int k = 0; k < FL_MAX_INPUTS; k++)
        mpfr_init2(c->x[k], 64);
    mpfr_inits2(128, c->a, c->lo, c->hi, c->f, (mpfr_ptr)0);
    mpfr_init2(c->t, 256);
    mpfr_init2(c->yv, 64);
    fl_ulp_report_init(&c->rep);
    if (j->row_len > 0) {
        c->rows_len = j->row_len;
        for (int k = 0; k < j->n_inputs; k++) {
            c->rows[k] = malloc((size_t)j->row_len * sizeof(mpfr_t));
            for (long i = 0; i < j->row_len; i++)
                mpfr_init2(c->rows[k][i], 64);
        }
    }
}

void ulp_tctx_clear(ulp_tctx *c, const ulp_job *j)
{
    for (int k = 0; k < FL_MAX_INPUTS; k++)
        mpfr_clear(c->x[k]);
    mpfr_clears(c->a, c->lo, c->hi, c->t, c->yv, c->f, (mpfr_ptr)0);
    for (int k = 0; k < j->n_inputs && c->rows[k]; k++) {
        for (long i = 0; i < c->rows_len; i++)
            mpfr_clear(c->rows[k][i]);
        free(c->rows[k]);
    }
}

void ulp_set_input(mpfr_ptr x, int kind, uint64_t b)
{
    if (kind == KIND_F64)
        mpfr_set_d(x, fl_f64_from_bits(b), MPFR_RNDN);
    else
        mpfr_set_flt(x, fl_decode((fl_format)kind, (uint32_t)b), MPFR_RNDN);
}

/* ---- the exact (MPFR) judge ---------------------------------------------------------------------- */

/* The reported error |y - v| / 2^ulp_exp on the grid (ulp_report.h), exactly: |y - v| rounded toward
   zero at 256 bits with its inexact flag, scaled by a power of two, then rounded to nearest with the
   flag deciding the would-be ties (below 2^53 units), or via round-to-odd (above).  *above: the
   reported error is a bucket edge and the exact one lies above it (t < the edge puts the exact error
   below it too: t is 256 bits and the edge a short number; t equal to the edge is the exact error
   when the subtraction was exact, else the exact error is above). */
static double rep_mpfr(ulp_tctx *c, mpfr_srcptr y, mpfr_srcptr v, long ulp_exp, int *above)
{
    mpfr_ptr t = c->t;
    *above = 0;
    int inex = mpfr_sub(t, y, v, MPFR_RNDZ);
    mpfr_abs(t, t, MPFR_RNDN);
    if (mpfr_zero_p(t) && !inex)
        return 0;
    mpfr_mul_2si(t, t, FL_ULP_GRID_BITS - ulp_exp, MPFR_RNDN); /* exact */
    double units;
    if (mpfr_cmp_d(t, 0x1p53) < 0) {
        mpfr_t n;
        mpfr_init2(n, 256);
        mpfr_floor(n, t);
        const double nd = mpfr_get_d(n, MPFR_RNDN);
        mpfr_sub(n, t, n, MPFR_RNDN); /* the fraction, exact */
        const int cmp = mpfr_cmp_d(n, 0.5);
        mpfr_clear(n);
        if (cmp > 0 || (cmp == 0 && inex))
            units = nd + 1;
        else if (cmp < 0)
            units = nd;
        else
            units = fmod(nd, 2) == 0 ? nd : nd + 1;
    } else {
        if (inex && mpfr_min_prec(t) < mpfr_get_prec(t))
            mpfr_nextabove(t); /* round to odd: the exact value lies above t */
        units = mpfr_get_d(t, MPFR_RNDN);
    }
    const double rep = ldexp(units, -FL_ULP_GRID_BITS);
    if (fl_ulp_hist_edge(rep)) {
        const int cmp = mpfr_cmp_d(t, units);
        *above = cmp > 0 || (cmp == 0 && inex);
    }
    return rep;
}

/* ulp exponent of v's binade in the format (v exact, may be 0). */
static long ulp_exp_of(const fl_format_desc *d, mpfr_srcptr v)
{
    const long emin = 1 - d->bias;
    long e = emin;
    if (!mpfr_zero_p(v)) {
        e = (long)mpfr_get_exp(v) - 1;
        if (e < emin)
            e = emin;
    }
    return e - d->mbits;
}

typedef struct {
    uint32_t code;
    int sat;
    long ue;
    double rep;
    int above;
} endpoint_facts;

static void facts_at(endpoint_facts *r, ulp_tctx *c, const ulp_job *j, mpfr_srcptr v, int y_fin, double B, int ties)
{
    const fl_format_desc *d = fl_format_get(j->fmt);
    r->code = fl_mpfr_encode(j->fmt, v, FL_RND_NE, j->ovf, NULL);
    r->sat = 0;
    if ((r->code & ((1u << (d->bits - 1)) - 1)) == d->max_mag && !fl_is_nan(d, r->code)) {
        mpfr_t b;
        mpfr_init2(b, 64);
        mpfr_set_d(b, B, MPFR_RNDN);
        const int cmp = mpfr_cmpabs(v, b);
        r->sat = cmp > 0 || (cmp == 0 && ties);
        mpfr_clear(b);
    }
    r->ue = ulp_exp_of(d, v);
    r->above = 0;
    r->rep = y_fin ? rep_mpfr(c, c->yv, v, r->ue, &r->above) : 0;
}

/* Judges output y from the evaluator at increasing precision (Ziv): the facts are taken at both ends
   of the evaluator's error interval and accepted when they agree (each is monotone in f on either
   side of y; when y lies inside the interval the error must be 0 at both ends).  0, or -1 if no
   precision up to FL_REF_MAX_PREC decided (never expected). */
int ulp_judge_mpfr(fl_ulp_verdict *v, ulp_tctx *c, const ulp_job *j, mpfr_srcptr const *x,
                   mpfr_srcptr const *const *rows, long row_j, uint32_t y)
{
    const fl_format_desc *d = fl_format_get(j->fmt);
    const int y_fin = !fl_is_nan(d, y) && !fl_is_inf(d, y);
    if (y_fin)
        mpfr_set_flt(c->yv, fl_decode(j->fmt, y), MPFR_RNDN);
    int ties;
    const double B = fl_format_rne_boundary(j->fmt, &ties);
    fl_ulp_facts f = { FL_FCLASS_FINITE, 0, 0, 0, 0 };
    for (mpfr_prec_t wp = 128; wp <= FL_REF_MAX_PREC; wp *= 2) {
        mpfr_set_prec(c->a, wp);
        const int k = rows ? j->ev->row(c->a, rows, j->row_len, row_j, &j->params, wp)
                           : j->ev->eval(c->a, x, &j->params, wp);
        if (mpfr_nan_p(c->a)) {
            f.fclass = FL_FCLASS_NAN;
            fl_ulp_verdict_from_facts(v, &f, j->fmt, j->ovf, y);
            return 0;
        }
        if (mpfr_inf_p(c->a)) {
            f.fclass = mpfr_sgn(c->a) > 0 ? FL_FCLASS_PINF : FL_FCLASS_NINF;
            fl_ulp_verdict_from_facts(v, &f, j->fmt, j->ovf, y);
            return 0;
        }
        endpoint_facts lo, hi;
        if (k == FL_REF_SURE) {
            facts_at(&lo, c, j, c->a, y_fin, B, ties);
            hi = lo;
        } else {
            if (mpfr_zero_p(c->a))
                continue;
            const mpfr_prec_t p = (mpfr_get_prec(c->a) > wp ? mpfr_get_prec(c->a) : wp) + (k > 0 ? k : 0) + 4;
            mpfr_set_prec(c->lo, p);
            mpfr_set_prec(c->hi, p);
            mpfr_set_prec(c->f, 8);
            /* the evaluator's bound: 2^k ulp_wp(a), ulp_wp(a) = 2^(EXP(a) - wp) */
            mpfr_set_ui_2exp(c->f, 1, (mpfr_exp_t)(mpfr_get_exp(c->a) - (mpfr_exp_t)wp + k), MPFR_RNDN);
            mpfr_sub(c->lo, c->a, c->f, MPFR_RNDN); /* exact at precision p */
            mpfr_add(c->hi, c->a, c->f, MPFR_RNDN);
            facts_at(&lo, c, j, c->lo, y_fin, B, ties);
            facts_at(&hi, c, j, c->hi, y_fin, B, ties);
            if (y_fin && mpfr_cmp(c->lo, c->yv) < 0 && mpfr_cmp(c->yv, c->hi) < 0 && (lo.rep != 0 || hi.rep != 0))
                continue;
        }
        if (lo.code != hi.code || lo.sat != hi.sat || lo.ue != hi.ue || lo.rep != hi.rep || lo.above != hi.above)
            continue;
        f.ref = lo.code;
        f.sat = lo.sat;
        f.rep = lo.rep;
        f.above = lo.above;
        fl_ulp_verdict_from_facts(v, &f, j->fmt, j->ovf, y);
        return 0;
    }
    return -1;
}

/* Judges one elementwise output and adds it to the thread's report. */
void ulp_judge_add(ulp_tctx *c, const ulp_job *j, const uint64_t *in, uint32_t y, uint64_t index, int mpfr_only)
{
    fl_ulp_verdict v;
    int done = 0;
    if (j->fast && !mpfr_only) {
        float xf[2];
        int ok = 1;
        for (int k = 0; k < j->n_inputs && k < 2; k++) {
            if (j->in_kind[k] == FL_FMT_FP32) {
                xf[k] = fl_f32_from_bits((uint32_t)in[k]);
                continue;
            }
            const double xv = ulp_bits_value(j->in_kind[k], in[k]);
            xf[k] = (float)xv;
            ok &= (double)xf[k] == xv || isnan(xv); /* binary32 inputs only */
        }
        if (ok) {
            fl_encl e;
            const int st = j->fast->eval ? j->fast->eval(&e, xf[0]) : j->fast->eval2(&e, xf[0], xf[1]);
            done = fl_fast_judge(&v, st, &e, &j->ff, y);
        }
    }
    if (done) {
        c->n_fast++;
    } else {
        for (int k = 0; k < j->n_inputs; k++)
            ulp_set_input(c->x[k], j->in_kind[k], in[k]);
        mpfr_srcptr xs[FL_MAX_INPUTS] = { c->x[0], c->x[1], c->x[2], c->x[3] };
        if (ulp_judge_mpfr(&v, c, j, xs, NULL, 0, y) != 0) {
            c->n_fail++;
            return;
        }
        c->n_mpfr++;
    }
    fl_ulp_case cs = ulp_case_of(&v, index, y);
    for (int k = 0; k < j->n_inputs; k++)
        cs.in[k] = in[k];
    fl_ulp_report_add(&c->rep, &cs);
}
