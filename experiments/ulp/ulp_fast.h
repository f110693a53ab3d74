/* ulp_fast.h — the fast path of `fp8lab ulp`: enclosures of f(x) in double-double arithmetic, and the
 * exact judgement of an output from an enclosure.
 *
 * For a binary32 input x, an evaluator returns an enclosure  f(x) in [c - r, c + r]  with the centre
 * c = ch + cl a double-double and the radius r a double, PROVEN from error bounds written next to each
 * evaluator and derived in experiments/ulp/ULP.md (double-word arithmetic after Joldes, Muller and
 * Popescu, and our own exp/expm1/Phi kernels with tables computed by MPFR at start-up).
 *
 * The judge decides from the enclosure everything a report needs: the correctly rounded encoding
 * (RNE, with the overflow policy), the class of the exact value (saturated or not), the ulp of its
 * binade and the reported error of the output (ulp_report.h: rounded to nearest onto the 2^-20 grid).
 * A decision is taken only when it is the same for every real in the enclosure (each quantity is a
 * monotone function of f on either side of y, so testing the ends suffices); otherwise the judge says
 * "undecided" and the caller asks MPFR.  Since an enclosure contains f(x), a decided judgement is the
 * exact one: the fast path and `--mpfr-only` give identical reports.
 *
 * Proxy enclosures.  Where f(x) is too close to 0 or to 1 for binary64 (|f| < 2^-180, or
 * 1 - 2^-149 < f < 1), an evaluator may return a point standing in for f: no decision boundary of any
 * output format lies in (0, 2^-180) or (1 - 2^-149, 1) (ULP.md, "proxies"), so every decision at the
 * proxy is the decision at f.
 */
#ifndef FL_ULP_FAST_H
#define FL_ULP_FAST_H

#include <stdint.h>

#include "fl_format.h"

typedef struct {
    double ch, cl; /* centre c = ch + cl */
    double r;      /* radius >= 0 */
    int side;      /* 0: f in [c - r, c + r];  -1: f in [c - r, c), strictly below c;
                      +1: f in (c, c + r], strictly above c (tails such as silu(x) < x) */
} fl_encl;

/* Return values of an evaluator. */
enum {
    FL_FAST_UNSURE = 0, /* no enclosure here (e.g. x = +-Inf): ask MPFR */
    FL_FAST_OK = 1,     /* *e encloses f(x) (or is a proxy, see above) */
    FL_FAST_NAN = 2     /* f(x) is NaN (x is NaN) */
};

typedef int (*fl_fast_eval)(fl_encl *e, float x);
typedef int (*fl_fast_eval2)(fl_encl *e, float g, float u); /* two-input gates h(g) u */

typedef struct {
    const char *name;    /* the reference function's name (reference/ref.h) */
    fl_fast_eval eval;   /* one input */
    fl_fast_eval2 eval2; /* two inputs (eval NULL) */
} fl_fast_fn;

/* Builds the shared tables (MPFR, once).  Idempotent; fl_fast_lookup calls it. */
void fl_fast_init(void);
/* The fast path of a reference function with default parameters, or NULL: the rows of
   reference/act_list.h with a FAST part (gelu, gelu_tanh, sigmoid, tanh, silu, swiglu).  Builds the
   tables the function needs: call it before threads evaluate. */
const fl_fast_fn *fl_fast_lookup(const char *name);

/* ---- the judgement --------------------------------------------------------------------------- */

/* What a report needs to know about one output. */
typedef struct {
    uint32_t ref;  /* correctly rounded encoding */
    double ulp;    /* reported error (ulp_report.h), +Inf for a special mismatch */
    int cr;        /* output == ref (NaN == NaN) */
    int special;   /* class mismatch */
    int hist;      /* the exact error's bucket (fl_ulp_hist, ulp_report.h) */
} fl_ulp_verdict;

/* Facts about f(x), decided exactly by one of the judges. */
enum { FL_FCLASS_FINITE, FL_FCLASS_NAN, FL_FCLASS_PINF, FL_FCLASS_NINF };
typedef struct {
    int fclass;   /* FL_FCLASS_* */
    uint32_t ref; /* finite f: the correctly rounded encoding */
    int sat;      /* finite f with ref = +-max: |f| lies beyond the RNE overflow boundary */
    double rep;   /* finite f and finite output: the reported error */
    int above;    /* rep a bucket edge (fl_ulp_hist_edge): the exact error lies above it */
} fl_ulp_facts;

/* The verdict from the facts (the one place the report's semantics live; ULP.md):
 *   NaN f:     ref = the format's NaN; cr and same class iff y is NaN; error 0 or +Inf.
 *   +-Inf f:   ref = the encoding of +-Inf under ovf; cr iff y == ref; error 0 or +Inf.
 *   finite f:  cr iff y == ref (or both NaN); the class of ref is NaN / Inf (overflow without
 *              saturation), saturated (sat) or finite, and y must match it: NaN for NaN, the same
 *              encoding for Inf and saturated, any finite y for finite.  The error is 0 when y == ref
 *              is an overflow (Inf, NaN or saturated to max: the class is what counts there), else
 *              rep when y is finite, else +Inf. */
void fl_ulp_verdict_from_facts(fl_ulp_verdict *v, const fl_ulp_facts *f, fl_format fmt, fl_overflow ovf,
                               uint32_t y);

/* The output format's numbers the judge needs, computed once. */
typedef struct {
    fl_format fmt;
    fl_overflow ovf;
    const fl_format_desc *d;
    double B;        /* RNE overflow boundary */
    int ties;        /* the boundary itself overflows */
    int saturating;  /* overflow gives +-max */
    int emin;        /* smallest normal exponent */
    uint32_t sbit;
} fl_fast_fmt;

void fl_fast_fmt_init(fl_fast_fmt *ff, fl_format fmt, fl_overflow ovf);

/* Judge output y (an encoding of the format) from an enclosure (status = an evaluator's return
   value).  Returns 1 with *v set when decided, 0 when MPFR must decide.  Not for e8m0. */
int fl_fast_judge(fl_ulp_verdict *v, int status, const fl_encl *e, const fl_fast_fmt *ff, uint32_t y);

/* fl_fast_judge is a shortcut for the common case (a finite output, an enclosure well inside the
   rounding set of a finite code below the largest) followed by the general judge; for tests, the two
   parts alone (where both decide, they must agree; the shortcut must never decide what the general
   judge leaves undecided). */
int fl_fast_judge_general(fl_ulp_verdict *v, int status, const fl_encl *e, const fl_fast_fmt *ff, uint32_t y);
int fl_fast_judge_common(fl_ulp_verdict *v, int status, const fl_encl *e, const fl_fast_fmt *ff, uint32_t y);

/* The reported error of output value y against f in the enclosure, for an ulp of 2^ulp_exp over the
   whole enclosure (the judge's last step; exported for tests): 1 and *rep when decided, else 0.  When
   *rep is a bucket edge (fl_ulp_hist_edge) the side of the exact error is decided too (*above; an
   exact error equal to the edge is not above it); *above is 0 elsewhere. */
int fl_fast_rep(double *rep, int *above, const fl_encl *e, int ulp_exp, double y);

#endif /* FL_ULP_FAST_H */
