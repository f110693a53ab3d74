/* ulp_fast.c — double-double enclosures of silu, sigmoid, tanh, gelu and gelu_tanh for binary32 inputs,
 * and the exact judge (see ulp_fast.h; the error analysis is experiments/ulp/ULP.md).
 *
 * Notation: u = 2^-53.  "dd" is a double-word number h + l.  Every error bound below is a relative
 * bound on the value the comment names, and each evaluator's radius is its bound times a safety
 * factor of at least 16.  Nothing here depends on the compiler fusing operations (the tree builds
 * with -ffp-contract=off; fma() is called explicitly where an exact product error is needed).
 */
#include "ulp_fast.h"

#include <math.h>
#include <mpfr.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "act_list.h"
#include "fl_round.h"
#include "ulp_report.h"

/* ---- double-word arithmetic (Dekker, Knuth; bounds from Joldes-Muller-Popescu 2017) ---------- */

typedef struct {
    double h, l;
} dd;

/* s + e = a + b exactly (Knuth). */
static inline dd two_sum(double a, double b)
{
    const double s = a + b;
    const double bb = s - a;
    return (dd){ s, (a - (s - bb)) + (b - bb) };
}

/* s + e = a + b exactly when |a| >= |b| or a = 0 (Dekker). */
static inline dd fast_two_sum(double a, double b)
{
    const double s = a + b;
    return (dd){ s, b - (s - a) };
}

/* p + e = a * b exactly (no underflow: exponents of a*b above -969). */
static inline dd two_prod(double a, double b)
{
    const double p = a * b;
    return (dd){ p, fma(a, b, -p) };
}

/* dd + double: relative error <= 2u^2 (JMP Algorithm 4, DWPlusFP). */
static inline dd dd_add_d(dd x, double y)
{
    const dd s = two_sum(x.h, y);
    return fast_two_sum(s.h, s.l + x.l);
}

/* dd + dd, both of the same sign here: relative error <= 3u^2 + 13u^3 (JMP Algorithm 6). */
static inline dd dd_add(dd x, dd y)
{
    const dd s = two_sum(x.h, y.h);
    const dd t = two_sum(x.l, y.l);
    const dd v = fast_two_sum(s.h, s.l + t.h);
    return fast_two_sum(v.h, t.l + v.l);
}

/* dd * double: relative error <= 2u^2 (JMP Algorithm 9 without the 3u^2 variant's extra step). */
static inline dd dd_mul_d(dd x, double y)
{
    const dd p = two_prod(x.h, y);
    return fast_two_sum(p.h, fma(x.l, y, p.l));
}

/* dd * dd: relative error <= 5u^2 (JMP Algorithm 12, DWTimesDW3, with FMA). */
static inline dd dd_mul(dd x, dd y)
{
    const dd p = two_prod(x.h, y.h);
    const double t = fma(x.h, y.l, x.l * y.h);
    return fast_two_sum(p.h, p.l + t);
}

/* dd / dd: q = x/y.  th = RN(xh/yh); the remainder xh - th*yh is exact (fma); the low part is
   (rem + xl - th*yl) / yh.  Relative error <= 6u^2 (ULP.md: one rounding of the remainder sum
   (u * u|x|), one of th*yl + xl (2u^2), one of the division (u^2), and yl/yh dropped from the divisor
   of the low part (u^2)). */
static inline dd dd_div(dd x, dd y)
{
    const double th = x.h / y.h;
    const double rem = fma(-th, y.h, x.h);
    const double num = rem + fma(-th, y.l, x.l);
    return fast_two_sum(th, num / y.h);
}

/* 2^m for -1022 <= m <= 1023 */
static inline double pow2i(int m) { return fl_f64_from_bits((uint64_t)(m + 1023) << 52); }

/* ---- constants and tables, computed by MPFR once -------------------------------------------- */

#define EXP_BITS 10
#define EXP_N (1 << EXP_BITS)
static double T_hi[EXP_N], T_lo[EXP_N]; /* 2^(j/1024) = T_hi + T_lo within 2^-106 relative */
static double L1, L2, L3;               /* ln2/1024 = L1 + L2 + L3 + (< 2^-146); L1 has 32 bits */
static double INV_L;                    /* 1024/ln2, rounded */
static dd C_SQRT2PI_INV;                /* 1/sqrt(2 pi) within 2^-106 */
static dd C_SQRT_2_OVER_PI;             /* sqrt(2/pi) */
static dd C_GELU_A;                     /* 0.044715 (the exact decimal, rounded to dd) */
static int tables_ready;
static void mills_init(void); /* gelu's Taylor nodes, below */

/* hi + lo = v rounded to two doubles (hi = RN(v), lo = RN(v - hi)). */
static void mpfr_to_dd(double *hi, double *lo, mpfr_srcptr v)
{
    mpfr_t t;
    mpfr_init2(t, mpfr_get_prec(v));
    *hi = mpfr_get_d(v, MPFR_RNDN);
    mpfr_sub_d(t, v, *hi, MPFR_RNDN);
    *lo = mpfr_get_d(t, MPFR_RNDN);
    mpfr_clear(t);
}

void fl_fast_init(void)
{
    if (__atomic_load_n(&tables_ready, __ATOMIC_ACQUIRE))
        return;
#pragma omp critical(fl_fast_init)
    if (!tables_ready) {
        mpfr_t v, w;
        mpfr_inits2(256, v, w, (mpfr_ptr)0);
        for (int j = 0; j < EXP_N; j++) {
            mpfr_set_si_2exp(v, j, -EXP_BITS, MPFR_RNDN);
            mpfr_exp2(v, v, MPFR_RNDN);
            mpfr_to_dd(&T_hi[j], &T_lo[j], v);
        }
        mpfr_const_log2(v, MPFR_RNDN);
        mpfr_div_2ui(v, v, EXP_BITS, MPFR_RNDN); /* ln2 / 1024 */
        mpfr_set(w, v, MPFR_RNDN);
        mpfr_prec_round(w, 32, MPFR_RNDN);
        L1 = mpfr_get_d(w, MPFR_RNDN);
        mpfr_sub_d(v, v, L1, MPFR_RNDN);
        L2 = mpfr_get_d(v, MPFR_RNDN);
        mpfr_sub_d(v, v, L2, MPFR_RNDN);
        L3 = mpfr_get_d(v, MPFR_RNDN);
        mpfr_const_log2(v, MPFR_RNDN);
        mpfr_ui_div(v, EXP_N, v, MPFR_RNDN);
        INV_L = mpfr_get_d(v, MPFR_RNDN);
        mpfr_const_pi(v, MPFR_RNDN);
        mpfr_mul_2ui(v, v, 1, MPFR_RNDN);
        mpfr_rec_sqrt(v, v, MPFR_RNDN);
        mpfr_to_dd(&C_SQRT2PI_INV.h, &C_SQRT2PI_INV.l, v);
        mpfr_const_pi(v, MPFR_RNDN);
        mpfr_ui_div(v, 2, v, MPFR_RNDN);
        mpfr_sqrt(v, v, MPFR_RNDN);
        mpfr_to_dd(&C_SQRT_2_OVER_PI.h, &C_SQRT_2_OVER_PI.l, v);
        mpfr_set_str(v, "0.044715", 10, MPFR_RNDN);
        mpfr_to_dd(&C_GELU_A.h, &C_GELU_A.l, v);
        mpfr_clears(v, w, (mpfr_ptr)0);
        __atomic_store_n(&tables_ready, 1, __ATOMIC_RELEASE);
    }
}

/* ---- exp and expm1 in double-double ------------------------------------------------------------ */

/* Argument reduction t = k ln2/1024 + r, |r| <= 2^-11.52, and e^r - 1 = P(r) (ULP.md, "exp"):
   r = (th - k L1) - k L2 + tl - k L3: th - k L1 is exact (Sterbenz; k L1 exact as |k| < 2^21 and L1
   has 32 bits), k L2 is split exactly by two_prod, the rest is rounded in a part below 2^-62, so
   |r computed - r exact| <= 2^-110.  P(r) = r + r^2/2 + r^3/6 + ... + r^7/5040: truncation
   <= |r|^8/8! e^|r| < 2^-107; r and r^2/2 in dd, r^3/6 + ... (below 2^-37.1) in double with at most
   6u relative error: |P error| < 2^-87.5 absolute. */
typedef struct {
    int k;
    dd P;
} exp_red;

static inline exp_red exp_reduce(double th, double tl)
{
    const double kd = rint(th * INV_L);
    const double r1 = th - kd * L1; /* exact */
    const dd p = two_prod(kd, L2);
    const dd s = two_sum(r1, -p.h);
    const double rl0 = ((s.l - p.l) + tl) - kd * L3;
    const dd r = two_sum(s.h, rl0);
    const double rh = r.h;
    dd r2 = two_prod(rh, rh);
    r2.l += 2 * rh * r.l;
    double q = fma(rh, 1.0 / 5040, 1.0 / 720);
    q = fma(rh, q, 1.0 / 120);
    q = fma(rh, q, 1.0 / 24);
    q = fma(rh, q, 1.0 / 6);
    const double H = r2.h * rh * q;
    const dd a = fast_two_sum(rh, 0.5 * r2.h);
    const dd b = fast_two_sum(a.h, H);
    const double lo = a.l + b.l + r.l + 0.5 * r2.l;
    return (exp_red){ (int)kd, fast_two_sum(b.h, lo) };
}

/* e^(th + tl), -600 <= th <= 600, |tl| <= 2^-40 |th|: relative error < 2^-87 (ULP.md). */
static dd exp_dd(double th, double tl)
{
    const exp_red e = exp_reduce(th, tl);
    const int j = e.k & (EXP_N - 1), m = e.k >> EXP_BITS; /* k = 1024 m + j, 0 <= j < 1024 */
    const double Th = T_hi[j], Tl = T_lo[j];
    const dd u = two_prod(Th, e.P.h);
    const double lo = u.l + Tl + Th * e.P.l + Tl * e.P.h;
    const dd v = fast_two_sum(Th, u.h);
    const dd res = fast_two_sum(v.h, v.l + lo);
    const double s = pow2i(m);
    return (dd){ res.h * s, res.l * s };
}

/* e^z - 1 for 0 < z <= 1.2: relative error < 2^-75 (ULP.md, "expm1": with k < 1024 the result is
   (T - 1) + T P with T - 1 >= 2^(1/1024) - 1 unless k = 0, when it is P itself; the absolute error
   2^-87.5 of P is at most 2^-75 relative to e^z - 1 >= |r|... >= 2^-12.5 or to P ~ r). */
static dd expm1_dd(double z)
{
    const exp_red e = exp_reduce(z, 0);
    if (e.k == 0)
        return e.P;
    if (e.k >= EXP_N) {
        const dd x = exp_dd(z, 0);
        return dd_add_d(x, -1.0);
    }
    const double Th = T_hi[e.k], Tl = T_lo[e.k];
    const dd tp = dd_mul((dd){ Th, Tl }, e.P);
    const dd tm1 = fast_two_sum(Th - 1.0, Tl); /* Th - 1 exact (Sterbenz) */
    return dd_add(tm1, tp);
}

/* ---- evaluators --------------------------------------------------------------------------------- */

#define TINY 0x1p-30      /* below: series enclosures */
/* Proxies and absolute slacks are normal doubles: arithmetic on subnormal operands takes a
   microcode assist on x86 (~100 cycles), which would dominate the judge's cost. */
#define PROXY_TINY 0x1p-900
#define ABS_SLACK 0x1p-1020 /* >= any absolute rounding error in the subnormal range (2^-1075) */

static inline int set_encl(fl_encl *e, double ch, double cl, double r)
{
    e->ch = ch;
    e->cl = cl;
    e->r = r;
    e->side = 0;
    return FL_FAST_OK;
}

/* f in [c - r, c) (side -1) or (c, c + r] (side +1) */
static inline int set_side(fl_encl *e, double ch, double cl, double r, int side)
{
    set_encl(e, ch, cl, r);
    e->side = side;
    return FL_FAST_OK;
}

/* centre dd v, radius rel * |v| (rounded up by the factor (1 + 2^-50)) */
static inline int set_rel(fl_encl *e, dd v, double rel)
{
    return set_encl(e, v.h, v.l, fabs(v.h) * rel * (1 + 0x1p-50));
}

/* The status for a NaN or infinite x: NaN in, NaN out; +-Inf is left to MPFR. */
static inline int nonfinite(double x) { return isnan(x) ? FL_FAST_NAN : FL_FAST_UNSURE; }

/* The cases shared by the self-gated f = x h(x) with h -> 1 at +Inf and f -> -0 at -Inf (silu, gelu,
   gelu_tanh): NaN, +-Inf; x >= hi, where f lies in [x(1 - rel), x) (one-sided); x <= lo, where |f| is
   below every format's half subnormal (the proxy -2^-900).  Returns the status with *e set, or -1 for
   the other x. */
static int gated_tails(fl_encl *e, double x, double hi, double rel, double lo)
{
    if (!isfinite(x))
        return nonfinite(x);
    if (x >= hi)
        return set_side(e, x, 0, x * rel * (1 + 0x1p-50), -1);
    if (x <= lo)
        return set_encl(e, -PROXY_TINY, 0, 0);
    return -1;
}

/* silu(x) = x / (1 + e^-x).
   |x| < 2^-30: sigma(x) = 1/2 + tanh(x/2)/2 and t - t^3/3 <= tanh t <= t (t >= 0) give
     x sigma(x) in [x/2 + x^2/4 - x^4/48, x/2 + x^2/4]; x^2/4 is exact (x has 24 bits).
   x >= 64: 0 < 1 - sigma(x) < e^-64 < 2^-92.3: f in [x(1 - 2^-92), x), one-sided.
   x <= -140: |f| < |x| e^x <= 140 e^-140 < 2^-194: proxy -2^-900.
   Otherwise x > 0: x / (1 + E), E = e^-x; x < 0: x E / (1 + E), E = e^x.  Error: 2 eps_exp (E in the
   numerator and the denominator) + 2u^2 + 2u^2 + 6u^2 < 2^-85.9; radius 2^-81. */
static int fast_silu(fl_encl *e, float xf)
{
    const double x = xf, ax = fabs(x);
    if (ax < TINY) /* includes +-0: exact +-0 */
        return set_encl(e, 0.5 * x, 0.25 * x * x, ax * ax * ax * ax * (1.0 / 48) * (1 + 0x1p-50));
    const int st = gated_tails(e, x, 64, 0x1p-92, -140);
    if (st >= 0)
        return st;
    if (x > 0) {
        const dd E = exp_dd(-x, 0);
        const dd D = dd_add_d(E, 1.0);
        return set_rel(e, dd_div((dd){ x, 0 }, D), 0x1p-81);
    }
    const dd E = exp_dd(x, 0);
    const dd D = dd_add_d(E, 1.0);
    return set_rel(e, dd_div(dd_mul_d(E, x), D), 0x1p-81);
}

/* sigmoid(x) = 1 / (1 + e^-x).
   |x| < 2^-30: sigma(x) in 1/2 + x/4 - sign(x) [0, |x|^3/48] (tanh bounds as in silu).
   x >= 104: 1 - sigma(x) < e^-104 < 2^-150: proxy 1 - 2^-900.
   x <= -125: sigma(x) < e^-125 < 2^-180: proxy 2^-900.
   37 <= x < 104: within 2^-81 of 1 the relative radius would contain 1 (a binade edge) and leave
     the output to MPFR; instead 1 - sigma(x) = E - E^2/(1 + E) in [E(1 - 2^-53), E] with E = e^-x,
     and Eh = RN(exp_dd(-x)) is within E 2^-52.9 of E: centre (1, -Eh), radius Eh 2^-50.
   Otherwise 1/(1 + E) or E/(1 + E): < 2^-85.9 as silu; radius 2^-81. */
static int fast_sigmoid(fl_encl *e, float xf)
{
    const double x = xf;
    if (!isfinite(x))
        return nonfinite(x);
    const double ax = fabs(x);
    if (ax < TINY)
        return set_encl(e, 0.5, 0.25 * x, ax * ax * ax * (1.0 / 48) * (1 + 0x1p-50));
    if (x >= 104)
        return set_encl(e, 1.0, -PROXY_TINY, 0);
    if (x <= -125)
        return set_encl(e, PROXY_TINY, 0, 0);
    if (x >= 37) { /* 1 - sigma(x) = E/(1 + E) in [E - E^2, E], E = e^-x < 2^-53.3 (see above) */
        const double Eh = exp_dd(-x, 0).h;
        return set_encl(e, 1.0, -Eh, Eh * 0x1p-50);
    }
    if (x > 0) {
        const dd E = exp_dd(-x, 0);
        return set_rel(e, dd_div((dd){ 1.0, 0 }, dd_add_d(E, 1.0)), 0x1p-81);
    }
    const dd E = exp_dd(x, 0);
    return set_rel(e, dd_div(E, dd_add_d(E, 1.0)), 0x1p-81);
}

/* tanh(x), odd; a = |x|.
   a < 2^-20: a - a^3/3 <= tanh a <= a - a^3/3 + 2a^5/15 (ULP.md: both differences have derivatives
     of one sign); centre (a, -a^3/3), the rounding of a^3/3 (3 roundings) and 2a^5/15 in the radius,
     plus 2^-1070 for a subnormal a^5.
   2^-20 <= a < 0.55: E = expm1(2a) (2a exact), tanh = E / (E + 2): 2 * 2^-75 + 8u^2; radius 2^-70.
   0.55 <= a < 53: E = e^-2a, tanh = (1 - E) / (1 + E), E <= e^-1.1 < 1/3 so 1 - E >= 2/3 and its
     relative error is <= eps_exp E/(1-E) + 2u^2 <= eps_exp/2: total < 2^-85; radius 2^-81.
   19 <= a < 53: as sigmoid's tail (a 2^-81 radius would contain 1): 1 - tanh a = 2E/(1 + E) in
     [2E(1 - E), 2E] with E = e^-2a < 2^-54.8; centre sg (1, -2 RN(exp_dd(-2a))), radius 2^-50 2E.
   a >= 53: 1 - tanh a < 2 e^-106 < 2^-151: proxy 1 - 2^-900. */
static int fast_tanh(fl_encl *e, float xf)
{
    const double x = xf;
    if (!isfinite(x))
        return nonfinite(x);
    const double a = fabs(x), sg = x < 0 ? -1.0 : 1.0;
    dd v;
    double rel;
    if (a < 0x1p-20) {
        const double a3 = a * a * a;
        const double r = a3 * a * a * (2.0 / 15) * (1 + 0x1p-50) + a3 * 0x1p-52 + ABS_SLACK;
        return set_encl(e, x, -sg * (a3 / 3), a == 0 ? 0 : r);
    } else if (a < 0.55) {
        const dd E = expm1_dd(2 * a);
        v = dd_div(E, dd_add_d(E, 2.0));
        rel = 0x1p-70;
    } else if (a < 19) {
        const dd E = exp_dd(-2 * a, 0);
        v = dd_div(dd_add_d((dd){ -E.h, -E.l }, 1.0), dd_add_d(E, 1.0));
        rel = 0x1p-81;
    } else if (a < 53) { /* 1 - tanh a = 2E/(1 + E) in [2E(1 - 2^-54), 2E], E = e^-2a (above) */
        const double E2 = 2 * exp_dd(-2 * a, 0).h;
        return set_encl(e, sg, -sg * E2, E2 * 0x1p-50);
    } else {
        return set_encl(e, sg, -sg * PROXY_TINY, 0);
    }
    return set_rel(e, (dd){ sg * v.h, sg * v.l }, rel);
}

/* gelu_tanh(x) = x / (1 + e^-2z), z = sqrt(2/pi) x (1 + 0.044715 x^2).
   |x| < 2^-30: f = x/2 + (x/2) tanh z with |tanh z - z| <= |z|^3/3 and (x/2) z = (c/2) x^2 (1 + a x^2):
     centre (x/2, RN(c/2 x^2)), radius x^2 2^-51 (rounding, c's representation) + 0.11 x^4
     (c a/2 < 0.018 for the x^4 term, c^3 (1 + a x^2)^3 / 6 < 0.085 for the tanh remainder).
   x >= 10: 2z >= 87.3, 0 < e^-2z < 2^-125: f in [x(1 - 2^-125), x), one-sided.
   x <= -12: 2z <= -142.4, |f| <= |x| e^2z < 2^-201: proxy -2^-900.
   Otherwise t = -2z in dd (x^2 exact; a x^2, 1 + ., * c, * -2x: 2u^2 + 2^-106 + 2u^2 + 5u^2 + 2^-106
   + 2u^2 < 2^-100 relative, |t| <= 143: < 2^-92.8 absolute), E = e^t (2^-87 + 2^-92.8), x / (1 + E)
   (2u^2 + 6u^2): < 2^-86.9; radius 2^-81. */
static int fast_gelu_tanh(fl_encl *e, float xf)
{
    const double x = xf, x2 = x * x; /* exact */
    if (fabs(x) < TINY)
        return set_encl(e, 0.5 * x, 0.5 * C_SQRT_2_OVER_PI.h * x2, (x2 * 0x1p-51 + 0.11 * x2 * x2) * (1 + 0x1p-50));
    const int st = gated_tails(e, x, 10, 0x1p-125, -12);
    if (st >= 0)
        return st;
    const dd w = dd_mul_d(C_GELU_A, x2);
    const dd q = dd_add_d(w, 1.0);
    const dd s = dd_mul(q, C_SQRT_2_OVER_PI);
    const dd t = dd_mul_d(s, -2 * x);
    const dd E = exp_dd(t.h, t.l);
    return set_rel(e, dd_div((dd){ x, 0 }, dd_add_d(E, 1.0)), 0x1p-81);
}

/* ---- gelu(x) = x Phi(x) -------------------------------------------------------------------------- */

/* Phi(x) for |x| < 3 by Taylor expansion about the nearest node a0 = k/64, |k| <= 192, h = x - a0
   (exact: x and a0 are multiples of ulp(x) or x = h for k = 0; |h| <= 1/128).
     Phi(a0 + h) = c0 + sum_{n>=1} cn h^n,  c0 = Phi(a0),  cn = phi(a0) g(n-1) / n,
   where gm are the Taylor coefficients of phi(a0 + h)/phi(a0) = e^(-a0 h - h^2/2): g0 = 1, g1 = -a0,
   (m+1) g(m+1) = -a0 gm - g(m-1).  At start-up MPFR computes Gm = m! gm EXACTLY (G(m+1) = -a0 Gm
   - m G(m-1) on dyadic numbers; every operation's ternary value is checked to be 0 at 256 bits), then at
   128 bits phi(a0) (3 roundings), cn = phi(a0) G(n-1)/n! (2 more) and c0 = erfc(|a0|/sqrt2)/2 for
   a0 <= 0 or 1 - erfc(a0/sqrt2)/2 for a0 > 0 (the rounded argument moves erfc by at most 10x its own
   relative error for |a0|/sqrt2 <= 2.13): every cn within 2^-123 relative.  Stored: c0..c6 as dd
   (within 2^-105.9 of cn), c7..c12 as doubles.
   Error bound PHI_ERR[k] (absolute, computed at |h| = 1/128, which bounds every smaller |h| since each
   term below is increasing in |h|), with S = sum_{n<=12} |cn| 2^-7n and Sd = its part n >= 7:
     truncation: for m >= |a0| (every m >= 3), |g(m+1)| <= (|a0| + 1)/(m+1) max(|gm|, |g(m-1)|) <= that
       max, so |gm| <= M = max(|g11|, |g12|) for all m >= 11, and
       sum_{n>=13} |cn| h^n <= phi(a0) M h^13 / (13 (1 - h));
     Horner in double on c7..c12 (6 coefficient roundings, 5 fma roundings, each <= u times a partial
       sum of the |cn| h^(n-7)): <= 6.01 u Sd < 2^-50 Sd (times h^7, which Sd includes);
     Horner in dd on c0..c6: 7 steps P h + cn (dd_horner_step, absolute error <= 7.02 u^2 (|P h| + |cn|)
       with |P h| + |cn| <= a partial sum of the |cm| h^(m-n) times (1 + 2^-48)), plus the stored dd
       coefficients' 2^-105.9 = 1.07 u^2: (7 * 7.03 u^2 + 1.07 u^2) S = 50.3 u^2 S < 2^-100 S.
   PHI_ERR = 1.01 (2^-100 S + 2^-50 Sd + truncation), rounded up.  Over all nodes PHI_ERR < 2^-99.7
   Phi(a0) (measured once; it only says how tight the enclosure is, the bound is PHI_ERR itself), and
   Phi(x) >= (1 - 2^-5) Phi(a0) on |h| <= 1/128 (phi/Phi <= 3.3 for a0 >= -3), so < 2^-99.6 Phi(x). */
#define PHI_HALF 192 /* nodes k = -192 .. 192 */
#define PHI_NODES (2 * PHI_HALF + 1)
#define PHI_DD 7
#define PHI_DEG 12
static dd PHI_C[PHI_NODES][PHI_DD];
static double PHI_D[PHI_NODES][PHI_DEG + 1 - PHI_DD];
static double PHI_ERR[PHI_NODES];

static void phi_nodes_init(void)
{
    mpfr_t a0, t, E, ph, C, c, acc, S, Sd, T1, T2, G[PHI_DEG + 1];
    mpfr_inits2(128, a0, t, E, ph, C, c, acc, S, Sd, (mpfr_ptr)0);
    mpfr_inits2(256, T1, T2, (mpfr_ptr)0);
    for (int m = 0; m <= PHI_DEG; m++)
        mpfr_init2(G[m], 256);
    mpfr_const_pi(C, MPFR_RNDN);
    mpfr_mul_2ui(C, C, 1, MPFR_RNDN);
    mpfr_rec_sqrt(C, C, MPFR_RNDN); /* 1/sqrt(2 pi) */
    unsigned long fact[PHI_DEG + 1];
    fact[0] = 1;
    for (int n = 1; n <= PHI_DEG; n++)
        fact[n] = fact[n - 1] * (unsigned long)n;
    int inexact = 0;
    for (int k = 0; k <= PHI_HALF; k++) {
        mpfr_set_si_2exp(a0, k, -6, MPFR_RNDN);
        mpfr_sqrt_ui(t, 2, MPFR_RNDN);
        mpfr_div(t, a0, t, MPFR_RNDN);
        mpfr_erfc(E, t, MPFR_RNDN);
        mpfr_div_2ui(E, E, 1, MPFR_RNDN); /* Phi(-a0) */
        mpfr_sqr(t, a0, MPFR_RNDN);       /* exact */
        mpfr_div_2ui(t, t, 1, MPFR_RNDN);
        mpfr_neg(t, t, MPFR_RNDN);
        mpfr_exp(ph, t, MPFR_RNDN);
        mpfr_mul(ph, ph, C, MPFR_RNDN); /* phi(a0) = phi(-a0) */
        for (int s = 1; s >= -1; s -= 2) {
            if (k == 0 && s < 0)
                break;
            const int i = PHI_HALF + s * k;
            if (s > 0)
                mpfr_ui_sub(c, 1, E, MPFR_RNDN);
            else
                mpfr_set(c, E, MPFR_RNDN);
            mpfr_to_dd(&PHI_C[i][0].h, &PHI_C[i][0].l, c);
            mpfr_abs(S, c, MPFR_RNDU);
            mpfr_set_ui(Sd, 0, MPFR_RNDN);
            /* G(m) for the node s a0 */
            mpfr_set_ui(G[0], 1, MPFR_RNDN);
            inexact |= mpfr_mul_si(G[1], a0, -s, MPFR_RNDN);
            for (int m = 1; m < PHI_DEG; m++) {
                inexact |= mpfr_mul(T1, a0, G[m], MPFR_RNDN);
                if (s > 0)
                    mpfr_neg(T1, T1, MPFR_RNDN);
                inexact |= mpfr_mul_ui(T2, G[m - 1], (unsigned long)m, MPFR_RNDN);
                inexact |= mpfr_sub(G[m + 1], T1, T2, MPFR_RNDN);
            }
            for (int n = 1; n <= PHI_DEG; n++) {
                mpfr_div_ui(c, G[n - 1], fact[n], MPFR_RNDN);
                mpfr_mul(c, c, ph, MPFR_RNDN);
                if (n < PHI_DD)
                    mpfr_to_dd(&PHI_C[i][n].h, &PHI_C[i][n].l, c);
                else
                    PHI_D[i][n - PHI_DD] = mpfr_get_d(c, MPFR_RNDN);
                mpfr_abs(acc, c, MPFR_RNDU);
                mpfr_mul_2si(acc, acc, -7 * n, MPFR_RNDU); /* |cn| 2^-7n: exact */
                mpfr_add(S, S, acc, MPFR_RNDU);
                if (n >= PHI_DD)
                    mpfr_add(Sd, Sd, acc, MPFR_RNDU);
            }
            /* truncation: phi(a0) max(|g11|, |g12|) 2^-91 / 13 * 128/127 */
            mpfr_abs(acc, G[PHI_DEG - 1], MPFR_RNDU);
            mpfr_div_ui(acc, acc, fact[PHI_DEG - 1], MPFR_RNDU);
            mpfr_abs(t, G[PHI_DEG], MPFR_RNDU);
            mpfr_div_ui(t, t, fact[PHI_DEG], MPFR_RNDU);
            mpfr_max(acc, acc, t, MPFR_RNDU);
            mpfr_mul(acc, acc, ph, MPFR_RNDU);
            mpfr_mul_2si(acc, acc, -7 * (PHI_DEG + 1), MPFR_RNDU);
            mpfr_mul_ui(acc, acc, 128, MPFR_RNDU);
            mpfr_div_ui(acc, acc, 127UL * (PHI_DEG + 1), MPFR_RNDU);
            /* 1.01 (2^-100 S + 2^-50 Sd + truncation) */
            mpfr_mul_2si(S, S, -100, MPFR_RNDU);
            mpfr_mul_2si(Sd, Sd, -50, MPFR_RNDU);
            mpfr_add(acc, acc, S, MPFR_RNDU);
            mpfr_add(acc, acc, Sd, MPFR_RNDU);
            mpfr_mul_d(acc, acc, 1.01, MPFR_RNDU);
            PHI_ERR[i] = mpfr_get_d(acc, MPFR_RNDU);
        }
    }
    if (inexact) { /* cannot happen (the Gm have < 200 significant bits); never trust a rounded table */
        fprintf(stderr, "ulp_fast: the Phi Taylor table is not exact\n");
        abort();
    }
    for (int m = 0; m <= PHI_DEG; m++)
        mpfr_clear(G[m]);
    mpfr_clears(a0, t, E, ph, C, c, acc, S, Sd, T1, T2, (mpfr_ptr)0);
}

/* One step of Horner's rule in dd, P h + c, for |P.l| <= u|P.h| and |c.l| <= u|c.h|: the product's high
   part split exactly (two_prod), its low part and c.l added in double, the highs summed exactly
   (two_sum), the sum renormalised exactly (two_sum).  Three roundings: u|P.l h + e0| <= 2u^2 |P.h h|,
   u|e + c.l| <= u^2 (2|P.h h| + |c.h|) and u|sl + v| <= u^2 (3|P.h h| + 2|c.h|) (all to first order):
   absolute error <= 7.02 u^2 (|P| |h| + |c|), for any signs. */
static inline dd dd_horner_step(dd P, double h, dd c)
{
    const dd p = two_prod(P.h, h);
    const double e = fma(P.l, h, p.l);
    const dd s = two_sum(p.h, c.h);
    return two_sum(s.h, s.l + (e + c.l));
}

/* Phi(x) for |x| < 3 (x a binary32 value) within *err (absolute; see above). */
static inline dd phi_taylor(double x, double *err)
{
    const int k = (int)rint(x * 64); /* x * 64 exact */
    const double h = x - k * 0x1p-6; /* exact */
    const double *cd = PHI_D[k + PHI_HALF];
    const dd *cc = PHI_C[k + PHI_HALF];
    double p = cd[PHI_DEG - PHI_DD];
    for (int n = PHI_DEG - PHI_DD - 1; n >= 0; n--)
        p = fma(p, h, cd[n]);
    dd P = dd_horner_step((dd){ p, 0 }, h, cc[PHI_DD - 1]);
    for (int n = PHI_DD - 2; n >= 0; n--)
        P = dd_horner_step(P, h, cc[n]);
    *err = PHI_ERR[k + PHI_HALF];
    return P;
}

/* Mills' ratio R(a) = (1 - Phi(a)) / phi(a) for 3 <= a <= 16 by Taylor expansion about the nearest
   node a0 = 3 + k/64 (|h| = |a - a0| <= 1/128).  R' = aR - 1, so R^(n+1) = a R^(n) + n R^(n-1) and
   the Taylor coefficients obey c1 = a0 c0 - 1, c(n+1) = (a0 cn + c(n-1)) / (n+1): computed at start-up
   by MPFR at 192 bits from c0 = R(a0) (mills_chain_step: within 2^-302, rounded to 192 bits), stored
   c0..c5 as dd and c6..c13 as doubles.  The same recurrence bounds the tail:
   |c(n+1)| <= (a0+1)/(n+1) max(|cn|,|c(n-1)|),
   so from n = 40 >= 2(a0+1) on the coefficients do not grow and sum_{n>40} |cn| h^n <= m40 h^41/(1-h);
   sum_{n=14..40} |cn| h^n is summed exactly.  Each node also stores the rounding bound: 2^-104 of the
   dd terms and 2^-48 of the double terms (coefficient rounding plus at most 16 roundings of Horner's
   rule in double), at |h| = 1/128.  R_ERR[k] holds truncation + rounding. */
#define R_NODES (13 * 64 + 1)
#define R_DD 6
#define R_DEG 13
static dd R_C[R_NODES][R_DD];
static double R_D[R_NODES][R_DEG + 1 - R_DD];
static double R_ERR[R_NODES];

/* R(a0) at every node, without an erfc per node (MPFR's erfc costs ~0.3 ms at these arguments: it
   was 90% of gelu's start-up).  One erfc at a0 = 16, then downward steps of d = 1/64:
     R(b) = w R(b + d) + J,   w = e^(-b d - d^2/2),   J = int_0^d e^(-b s - s^2/2) ds
   (split int_b^inf e^(-t^2/2) dt at b + d).  J = sum_n gn(b) d^(n+1)/(n+1) with gn the Taylor
   coefficients of e^(-b s - s^2/2): g0 = 1, g1 = -b, (m+1) g(m+1) = -b gm - g(m-1); Gn = n! gn is
   computed EXACTLY (dyadic, 640 bits, ternary values checked) and each term Gn / (n+1)! 2^-6(n+1) is
   rounded once at 320 bits.  Errors (absolute; everything at 320 bits, u' = 2^-320):
     truncation after n = 56: for m >= b the recurrence gives |g(m+1)| <= max(|gm|, |g(m-1)|), so the
       rest is <= max(|g55|, |g56|) d^58 / (58 (1 - d)); computed at run time, checked < 2^-330;
     the terms and the 57 additions: <= 114 u' sum |tn| <= 114 u' d e^(b d + d^2/2) < 2^-318.6 (the |gn|
       are majorised by the coefficients of e^(b s + s^2/2));
     w (exact argument, correctly rounded exp), w R and the final sum: <= 3 u' R(3) < 2^-320 (R(3) < 0.31);
   so each step adds < 2^-318 and the error already present is multiplied by w < 1: after 832 steps
   < 2^-308, plus the start R(16) = sqrt(pi/2) e^128 erfc(16/sqrt2) (relative 2^-310: erfc's condition
   number at 11.3 is < 2^8) < 2^-314.  R >= R(16) > 1/17: every R(a0) within 2^-302 relative, below
   the 192-bit rounding that follows (the former erfc per node at 192 bits gave ~2^-184).  As a guard
   against a slip, the chained R(3) is compared with erfc at the end (abort beyond 2^-290). */
#define CHAIN_PREC 320
#define CHAIN_N 56
static void mills_chain_start(mpfr_ptr R, double a0)
{
    mpfr_t t, u;
    mpfr_inits2(CHAIN_PREC + 64, t, u, (mpfr_ptr)0);
    mpfr_set_d(t, a0, MPFR_RNDN);
    mpfr_sqrt_ui(u, 2, MPFR_RNDN);
    mpfr_div(u, t, u, MPFR_RNDN);
    mpfr_erfc(R, u, MPFR_RNDN);
    mpfr_sqr(u, t, MPFR_RNDN);
    mpfr_div_2ui(u, u, 1, MPFR_RNDN);
    mpfr_exp(u, u, MPFR_RNDN);
    mpfr_mul(R, R, u, MPFR_RNDN);
    mpfr_const_pi(u, MPFR_RNDN);
    mpfr_div_2ui(u, u, 1, MPFR_RNDN);
    mpfr_sqrt(u, u, MPFR_RNDN);
    mpfr_mul(R, R, u, MPFR_RNDN);
    mpfr_clears(t, u, (mpfr_ptr)0);
}

/* R <- R(b) from R = R(b + 1/64), b = 3 + kb/64; returns nonzero when an exactness or truncation check
   fails. */
static int mills_chain_step(mpfr_ptr R, int kb, mpfr_t *F /* F[n] = (n+1)! */)
{
    mpfr_t b, G0, G1, G2, T, J, t, w;
    mpfr_inits2(640, b, G0, G1, G2, T, (mpfr_ptr)0);
    mpfr_inits2(CHAIN_PREC, J, t, w, (mpfr_ptr)0);
    int bad = 0;
    mpfr_set_si_2exp(b, 3 * 64 + kb, -6, MPFR_RNDN);
    mpfr_set_ui(G0, 1, MPFR_RNDN);
    mpfr_neg(G1, b, MPFR_RNDN);
    mpfr_set_ui_2exp(J, 1, -6, MPFR_RNDN); /* n = 0: G0 / 1! d */
    for (int n = 1; n <= CHAIN_N; n++) {
        if (n >= 2) { /* G(n) = -b G(n-1) - (n-1) G(n-2) */
            bad |= mpfr_mul(T, b, G1, MPFR_RNDN) != 0;
            bad |= mpfr_mul_ui(G2, G0, (unsigned long)(n - 1), MPFR_RNDN) != 0;
            bad |= mpfr_add(G2, G2, T, MPFR_RNDN) != 0;
            mpfr_neg(G2, G2, MPFR_RNDN);
            mpfr_swap(G0, G1);
            mpfr_swap(G1, G2); /* G1 = G(n), G0 = G(n-1) */
        }
        mpfr_div(t, G1, F[n], MPFR_RNDN);
        mpfr_mul_2si(t, t, -6 * (n + 1), MPFR_RNDN);
        mpfr_add(J, J, t, MPFR_RNDN);
    }
    /* truncation: max(|g55|, |g56|) d^58 / (58 (1 - d)) < 2^-330, with gn = Gn (n+1) / (n+1)! */
    mpfr_abs(G0, G0, MPFR_RNDN); /* exact; G0, G1 are not used after this */
    mpfr_abs(G1, G1, MPFR_RNDN);
    mpfr_div(t, G0, F[CHAIN_N - 1], MPFR_RNDU);
    mpfr_mul_ui(t, t, CHAIN_N, MPFR_RNDU);
    mpfr_div(w, G1, F[CHAIN_N], MPFR_RNDU);
    mpfr_mul_ui(w, w, CHAIN_N + 1, MPFR_RNDU);
    mpfr_max(t, t, w, MPFR_RNDU);
    mpfr_mul_2si(t, t, -6 * (CHAIN_N + 2), MPFR_RNDU);
    mpfr_mul_ui(t, t, 64, MPFR_RNDU);
    mpfr_div_ui(t, t, 63UL * (CHAIN_N + 2), MPFR_RNDU);
    bad |= mpfr_cmp_ui_2exp(t, 1, -330) >= 0;
    /* w = e^(-b d - d^2/2), exact argument */
    mpfr_mul_2si(T, b, -6, MPFR_RNDN);
    mpfr_add_d(T, T, 0x1p-13, MPFR_RNDN);
    mpfr_neg(T, T, MPFR_RNDN);
    mpfr_exp(w, T, MPFR_RNDN);
    mpfr_mul(R, R, w, MPFR_RNDN);
    mpfr_add(R, R, J, MPFR_RNDN);
    mpfr_clears(b, G0, G1, G2, T, J, t, w, (mpfr_ptr)0);
    return bad;
}

static void mills_init(void)
{
    mpfr_t c[42], a0, t, h, acc;
    for (int n = 0; n < 42; n++)
        mpfr_init2(c[n], 192);
    mpfr_inits2(192, a0, t, h, acc, (mpfr_ptr)0);
    mpfr_set_ui_2exp(h, 1, -7, MPFR_RNDN);
    /* c0 = R(a0) by the downward chain from a0 = 16 (mills_chain_step) */
    mpfr_t Rk, F[CHAIN_N + 1];
    mpfr_init2(Rk, CHAIN_PREC);
    for (int n = 0; n <= CHAIN_N; n++) {
        mpfr_init2(F[n], 640);
        mpfr_fac_ui(F[n], (unsigned long)(n + 1), MPFR_RNDN); /* exact: 57! < 2^257 */
    }
    mills_chain_start(Rk, 16.0);
    int bad = 0;
    for (int k = R_NODES - 1; k >= 0; k--) {
        if (k < R_NODES - 1)
            bad |= mills_chain_step(Rk, k, F);
        mpfr_set_si_2exp(a0, 3 * 64 + k, -6, MPFR_RNDN);
        mpfr_set(c[0], Rk, MPFR_RNDN);
        mpfr_mul(c[1], a0, c[0], MPFR_RNDN);
        mpfr_sub_ui(c[1], c[1], 1, MPFR_RNDN);
        for (int n = 1; n < 41; n++) {
            mpfr_mul(c[n + 1], a0, c[n], MPFR_RNDN);
            mpfr_add(c[n + 1], c[n + 1], c[n - 1], MPFR_RNDN);
            mpfr_div_ui(c[n + 1], c[n + 1], (unsigned long)(n + 1), MPFR_RNDN);
        }
        for (int n = 0; n < R_DD; n++)
            mpfr_to_dd(&R_C[k][n].h, &R_C[k][n].l, c[n]);
        for (int n = R_DD; n <= R_DEG; n++)
            R_D[k][n - R_DD] = mpfr_get_d(c[n], MPFR_RNDN);
        /* error bound at |h| = 1/128 */
        double err = 0;
        for (int n = 0; n <= 41; n++) {
            mpfr_abs(acc, c[n], MPFR_RNDU);
            mpfr_mul_2si(acc, acc, -7 * n, MPFR_RNDU); /* |cn| h^n, h = 2^-7: exact */
            const double term = mpfr_get_d(acc, MPFR_RNDU);
            if (n < R_DD)
                err += term * 0x1p-104;
            else if (n <= R_DEG)
                err += term * 0x1p-48;
            else if (n <= 40)
                err += term;
        }
        /* m40 h^41 / (1 - h) */
        mpfr_abs(acc, c[40], MPFR_RNDU);
        mpfr_abs(t, c[39], MPFR_RNDU);
        mpfr_max(acc, acc, t, MPFR_RNDU);
        mpfr_mul_2si(acc, acc, -7 * 41, MPFR_RNDU);
        err += mpfr_get_d(acc, MPFR_RNDU) * 1.01;
        R_ERR[k] = err * 1.01;
    }
    /* the guard: the chain's R(3) against erfc */
    mpfr_t R3;
    mpfr_init2(R3, CHAIN_PREC);
    mills_chain_start(R3, 3.0);
    mpfr_sub(R3, R3, Rk, MPFR_RNDN);
    if (bad || (!mpfr_zero_p(R3) && mpfr_get_exp(R3) > -290)) {
        fprintf(stderr, "ulp_fast: the Mills-ratio chain failed its check\n");
        abort();
    }
    mpfr_clears(R3, Rk, (mpfr_ptr)0);
    for (int n = 0; n <= CHAIN_N; n++)
        mpfr_clear(F[n]);
    for (int n = 0; n < 42; n++)
        mpfr_clear(c[n]);
    mpfr_clears(a0, t, h, acc, (mpfr_ptr)0);
}

/* R(a) for 3 <= a <= 16 (a a binary32 value): *err bounds the absolute error beyond the dd
   arithmetic of Horner's rule on the dd part (6 steps of 2u^2 + 3u^2 + 2u^2 relative: < 2^-97 R). */
static dd mills(double a, double *err)
{
    const int k = (int)rint((a - 3) * 64);
    const double h = a - (3 + k * 0x1p-6); /* exact */
    const double *cd = R_D[k];
    double p = cd[R_DEG - R_DD];
    for (int n = R_DEG - R_DD - 1; n >= 0; n--)
        p = fma(p, h, cd[n]);
    dd P = dd_add(two_prod(p, h), R_C[k][R_DD - 1]);
    for (int n = R_DD - 2; n >= 0; n--)
        P = dd_add(dd_mul_d(P, h), R_C[k][n]);
    *err = R_ERR[k] + P.h * 0x1p-96;
    return P;
}

/* gelu.
   |x| < 2^-30: Phi(x) - 1/2 = phi0 (x - x^3/6 + x^5/40 - ...) alternates with decreasing terms, so
     f = x Phi(x) in x/2 + phi0 x^2 - [0, phi0 x^4/6]: centre (x/2, RN(phi0 x^2)), radius x^2 2^-51
     + 0.07 x^4.
   x >= 9: 0 < 1 - Phi(x) < phi(x)/x < 2^-62.9: f in [x(1 - 2^-62), x), one-sided.
   x <= -16: |f| = |x| (1 - Phi(|x|)) < phi(16) < 2^-186: proxy -2^-900.
   2^-30 <= |x| < 3: Phi(x) from its Taylor expansion about the nearest node k/64 (phi_taylor, absolute
     error <= PHI_ERR[k] < 2^-99.6 Phi(x)); f = x Phi, one dd * double (2u^2 < 2^-104 |f|): radius
     16 PHI_ERR |x| + 2^-100 |f| (no exp, no cancellation: Phi(x) > Phi(-3) is evaluated directly).
   |x| >= 3: 1 - Phi(|x|) = phi(x) R(|x|), R from its Taylor expansion (mills); Phi(x) = 1 - that for
     x > 0 (absolute error relative to Phi <= 2^-86 * 2^-9.5), or that itself for x < 0. */
static int fast_gelu(fl_encl *e, float xf)
{
    const double x = xf, a = fabs(x);
    if (a < TINY) {
        const double x2 = x * x;
        return set_encl(e, 0.5 * x, C_SQRT2PI_INV.h * x2, (x2 * 0x1p-51 + 0.07 * x2 * x2) * (1 + 0x1p-50));
    }
    const int st = gated_tails(e, x, 9, 0x1p-62, -16);
    if (st >= 0)
        return st;
    dd Phi;
    double abserr; /* absolute error bound on Phi */
    if (a < 3) {
        Phi = phi_taylor(x, &abserr);
    } else {
        /* phi(a) = phi0 e^(-a^2/2): a^2 exact, e^ within 2^-87, times phi0 (2^-106 + 5u^2) */
        const dd ex = exp_dd(-0.5 * a * a, 0);
        const dd ph = dd_mul(ex, C_SQRT2PI_INV);
        double rerr;
        const dd R = mills(a, &rerr);
        const dd Q = dd_mul(ph, R);
        abserr = Q.h * 0x1p-86 + ph.h * rerr * 1.01;
        Phi = x > 0 ? dd_add_d((dd){ -Q.h, -Q.l }, 1.0) : Q;
    }
    /* f = x Phi: one dd * double (2u^2); final radius with a factor 16 on the bounds above */
    const dd f = dd_mul_d(Phi, x);
    return set_encl(e, f.h, f.l, (16 * abserr * a + fabs(f.h) * 0x1p-100) * (1 + 0x1p-50));
}

/* swiglu(g, u) = silu(g) u.  The silu enclosure times u (exact double): the centre's product split
   exactly by two_prod, r |u|, plus 2^-1070 for products near the subnormal range.  silu's proxy for g <= -140 does not
   survive a product (|u| may be 2^128), so there silu is evaluated honestly (e^g >= e^-600 is a
   normal double): g E / (1 + E), 2^-81 as in silu.  Below g = -600, |silu(g)| < 600 e^-600 < 2^-856
   and |u| < 2^129 give |f| < 2^-727: the tiny proxy with f's sign.  Zeros are exact (IEEE signs, as
   the reference's products). */
static int fast_swiglu(fl_encl *e, float gf, float uf)
{
    const double g = gf, u = uf;
    if (isnan(g) || isnan(u))
        return FL_FAST_NAN;
    if (isinf(g) || isinf(u))
        return FL_FAST_UNSURE;
    if (g == 0 || u == 0) /* silu(+-0) = +-0, and silu(g) has g's sign */
        return set_encl(e, (g < 0 || (g == 0 && signbit(g)) ? -1.0 : 1.0) * 0.0 * u, 0, 0);
    fl_encl s;
    if (g <= -600)
        return set_encl(e, (u > 0 ? -1 : 1) * PROXY_TINY, 0, 0);
    if (g <= -140) {
        const dd E = exp_dd(g, 0);
        set_rel(&s, dd_div(dd_mul_d(E, g), dd_add_d(E, 1.0)), 0x1p-81);
    } else {
        fast_silu(&s, gf); /* an honest enclosure for -140 < g */
    }
    if (s.side) { /* silu's tail: c = g exactly, so g u is exact in dd and the side follows u's sign */
        const dd p = two_prod(g, u);
        return set_side(e, p.h, p.l, s.r * fabs(u) * (1 + 0x1p-50), u > 0 ? s.side : -s.side);
    }
    /* (ch + cl) u exactly as p.h + lo.h + lo.l + q.l; the last two go into the radius, so a short
       product (bf16: 16 bits) keeps silu's tiny correction cl u exactly */
    const dd p = two_prod(s.ch, u), q = two_prod(s.cl, u);
    const dd lo = two_sum(p.l, q.h);
    const dd c = fast_two_sum(p.h, lo.h);
    return set_encl(e, c.h, c.l, (s.r * fabs(u) + fabs(lo.l) + fabs(q.l)) * (1 + 0x1p-50) + ABS_SLACK);
}

/* The rows of reference/act_list.h with a fast path, in the list's order: a row naming an evaluator
   that is not defined above does not compile. */
#define FAST_ROW(ID, name, eval, eval2) { #name, eval, eval2 },
static const fl_fast_fn fast_fns[] = { FL_ACT_FASTS(FAST_ROW) };

static int mills_ready;

const fl_fast_fn *fl_fast_lookup(const char *name)
{
    for (size_t i = 0; i < FL_ARRAY_LEN(fast_fns); i++)
        if (!strcmp(fast_fns[i].name, name)) {
            fl_fast_init();
            if (fast_fns[i].eval == fast_gelu && !__atomic_load_n(&mills_ready, __ATOMIC_ACQUIRE)) {
#pragma omp critical(fl_fast_init)
                if (!mills_ready) {
                    phi_nodes_init();
                    mills_init();
                    __atomic_store_n(&mills_ready, 1, __ATOMIC_RELEASE);
                }
            }
            return &fast_fns[i];
        }
    return NULL;
}

/* ---- the judge ------------------------------------------------------------------------------------ */

/* The exact sign of (a + b) + (c + d) (doubles, finite), or 0 when the rounded evaluation cannot
   tell.  a + b is the pair that may cancel (a centre and a boundary): it is summed exactly first. */
static inline int sure_sign4(double a, double b, double c, double d)
{
    const dd s = two_sum(a, b);
    const double t = c + d;
    const double t2 = s.l + t;
    const double g = s.h + t2;
    /* each of the three roundings errs by at most u times its result, or 2^-1075 when subnormal */
    const double bound = (fabs(t) + fabs(t2) + fabs(g)) * 0x1p-52 + ABS_SLACK;
    return g > bound ? 1 : g < -bound ? -1 : 0;
}

static inline double dec(const fl_format_desc *d, uint32_t c) { return (double)fl_decode_f32(d, c); }

void fl_ulp_verdict_from_facts(fl_ulp_verdict *v, const fl_ulp_facts *f, fl_format fmt, fl_overflow ovf,
                               uint32_t y)
{
    const fl_format_desc *d = fl_format_get(fmt);
    const int y_nan = fl_is_nan(d, y), y_inf = fl_is_inf(d, y);
    const int y_fin = !y_nan && !y_inf;
    uint32_t ref;
    int same;
    switch (f->fclass) {
    case FL_FCLASS_NAN:
        ref = fl_encode_nan_(d);
        break;
    case FL_FCLASS_PINF:
    case FL_FCLASS_NINF:
        ref = fl_encode_inf_(d, f->fclass == FL_FCLASS_NINF, ovf);
        break;
    default:
        ref = f->ref;
    }
    const int ref_nan = fl_is_nan(d, ref);
    v->ref = ref;
    v->cr = y == ref || (y_nan && ref_nan);
    if (f->fclass != FL_FCLASS_FINITE) {
        v->special = !v->cr;
        v->ulp = v->cr ? 0 : INFINITY;
        v->hist = v->cr ? FL_ULP_HIST_0 : FL_ULP_HIST_MORE;
        return;
    }
    if (ref_nan)
        same = y_nan;
    else if (fl_is_inf(d, ref) || f->sat)
        same = y == ref;
    else
        same = y_fin;
    v->special = !same;
    /* an output matching a saturated reference is right, as one matching an overflow to Inf is:
       its error is 0, not the distance from max to the exact value */
    if (f->sat && v->cr)
        v->ulp = 0;
    else
        v->ulp = y_fin ? f->rep : v->cr ? 0 : INFINITY;
    v->hist = fl_ulp_hist_bucket(v->ulp, y_fin && !(f->sat && v->cr) && f->above);
}

void fl_fast_fmt_init(fl_fast_fmt *ff, fl_format fmt, fl_overflow ovf)
{
    ff->fmt = fmt;
    ff->ovf = ovf;
    ff->d = fl_format_get(fmt);
    ff->B = fl_format_rne_boundary(fmt, &ff->ties);
    ff->saturating = ovf == FL_OVF_SATURATE || ff->d->specials == FL_SPEC_NONE;
    ff->emin = 1 - ff->d->bias;
    ff->sbit = 1u << (ff->d->bits - 1);
}

/* The RNE rounding set of code q: the reals that encode to q lie in [blo, bhi] (ties at the ends go
   either way; the judge wants strict inequalities).  +-INFINITY for an unbounded side. */
static void code_bounds(double *blo, double *bhi, const fl_fast_fmt *ff, uint32_t q, double sign_hint)
{
    const fl_format_desc *d = ff->d;
    const double B = ff->B;
    if (fl_is_nan(d, q) || fl_is_inf(d, q)) { /* overflow without saturation */
        const int neg = fl_is_inf(d, q) ? (q & ff->sbit) != 0 : sign_hint < 0;
        *blo = neg ? -INFINITY : B;
        *bhi = neg ? -B : INFINITY;
        return;
    }
    const int neg = (q & ff->sbit) != 0; /* FNUZ: 0x80 is the NaN, handled above */
    const uint32_t mag = q & (ff->sbit - 1);
    if (mag == 0 && d->specials != FL_SPEC_FNUZ) {
        /* +0 holds [0, min/2], -0 holds [-min/2, 0) */
        *blo = neg ? -0.5 * dec(d, 1) : 0;
        *bhi = neg ? 0 : 0.5 * dec(d, 1);
        return;
    }
    const double v = dec(d, mag);
    const double up = mag == d->max_mag ? (ff->saturating ? INFINITY : B) : 0.5 * (v + dec(d, mag + 1));
    const double down = mag == 0 ? -0.5 * dec(d, 1) : 0.5 * (v + dec(d, mag - 1));
    *blo = neg ? -up : down;
    *bhi = neg ? -down : up;
}

/* a + b > 0 for a centre part a, with |rest| <= s: first a cheap test with a factor 2 of slack
   (fl(a) errs by at most u |a|), then the exact sign. */
static inline int surely_above(double ch, double cl, double r, double b, double s)
{
    const double g = ch - b;
    if (g > 2 * s)
        return 1;
    return sure_sign4(ch, -b, cl, -r) > 0;
}

/* ch + cl >= b, exactly (0 when it cannot tell). */
static inline int surely_at_least(double ch, double cl, double b)
{
    const dd s1 = two_sum(ch, -b);
    const dd s2 = two_sum(s1.l, cl);
    const dd s3 = two_sum(s1.h, s2.h);
    if (s2.l == 0 && s3.l == 0) /* the sum was exact */
        return s3.h >= 0;
    return sure_sign4(ch, -b, cl, 0) > 0;
}

/* Every f in the enclosure lies above b (strictly). */
static inline int encl_above(const fl_encl *e, double b, double s)
{
    if (e->side > 0)
        return surely_at_least(e->ch, e->cl, b); /* f > c >= b */
    return surely_above(e->ch, e->cl, e->r, b, s);
}

/* Every f in the enclosure lies below b (strictly). */
static inline int encl_below(const fl_encl *e, double b, double s)
{
    if (e->side < 0)
        return surely_at_least(-e->ch, -e->cl, -b); /* f < c <= b */
    return surely_above(-e->ch, -e->cl, e->r, -b, s);
}

static inline int exponent_of(double a) /* a > 0 normal */
{
    return (int)((fl_f64_bits(a) >> 52) & 0x7FF) - 1023;
}

/* At a bucket edge the closed hull may not tell on which side the exact error lies, when the
   enclosure's centre is itself exactly an edge away from y (a short product such as g u / 2 on a
   rounding midpoint, with f a hair below it).  A one-sided enclosure (f strictly on the side `side` of
   its centre c, within r) does: with D = Y - C exactly +-q and f = C + delta, the error
   |D - delta| = q - sign(D) delta lies above q iff delta and D have opposite signs.  Scaled values
   (units of 2^-GRID ulp): Y, C = c sc, q; 1 and *above when it decides.  A point enclosure (f = c
   exactly) decides too: the error is the edge itself, not above it. */
static inline int edge_side_one_sided(int *above, const fl_encl *e0, double sc, double Y, double q)
{
    if (!e0 || e0->cl != 0 || (!e0->side && e0->r != 0))
        return 0;
    const double C = e0->ch * sc;
    if (C != 0 && fabs(C) < 0x1p-1000) /* keep every quantity normal: the sums below are exact */
        return 0;
    const dd D = two_sum(Y, -C);
    if (D.l != 0 || fabs(D.h) != q || !(e0->r * sc < q))
        return 0;
    *above = e0->side && (D.h > 0) != (e0->side > 0);
    return 1;
}

/* e: the closed enclosure the error is taken over; e0: the evaluator's own (one-sided) enclosure, or
   NULL. */
static inline int rep_core(double *rep, int *above, const fl_encl *e, const fl_encl *e0, int ulp_exp, double y)
{
    /* Units: 2^-GRID ulp.  Scale by 2^k, k = GRID - ulp_exp in [-84, 170]: exact (no overflow; the
       only quantities that may become subnormal are absorbed by the 2^-1070 terms). */
    const double sc = pow2i(FL_ULP_GRID_BITS - ulp_exp);
    const double Y = y * sc, Ch = e->ch * sc, Cl = e->cl * sc;
    const double R = e->r * sc * (1 + 0x1p-50) + ABS_SLACK;
    const dd d = two_sum(Y, -Ch);
    const double t = d.l - Cl;
    dd E = two_sum(d.h, t);
    const double Rerr = R + fabs(t) * 0x1p-52 + ABS_SLACK;
    if (E.h < 0 || (E.h == 0 && E.l < 0)) {
        E.h = -E.h;
        E.l = -E.l;
    }
    double q, h;
    if (E.h < 0x1p53) {
        q = rint(E.h);
        /* E.h a half-integer: the low part says which way the exact value lies */
        if (E.h - q == 0.5 && E.l > 0)
            q += 1;
        else if (E.h - q == -0.5 && E.l < 0)
            q -= 1;
        h = 0.5;
    } else {
        q = E.h;
        const int ex = exponent_of(q);
        const double ulpq = pow2i(ex - 52);
        h = (q == pow2i(ex)) ? ulpq / 4 : ulpq / 2;
    }
    const double a = E.h - q; /* exact */
    /* |a + E.l| + Rerr < h, cheaply first (the sum errs by at most 2u of its terms), then exactly */
    const double m = fabs(a) + fabs(E.l) + Rerr;
    if (m * (1 + 0x1p-50) < h || (sure_sign4(h, -a, -E.l, -Rerr) > 0 && sure_sign4(h, a, E.l, -Rerr) > 0)) {
        *rep = q * 0x1p-20;
        *above = 0;
        if (!fl_ulp_hist_edge(*rep))
            return 1;
        /* a bucket edge: the exact error is q + (a + E.l) within Rerr; its side must be sure (an exact
           error at the edge itself is left to MPFR, which sees equality) */
        if (sure_sign4(a, E.l, -Rerr, 0) > 0) {
            *above = 1;
            return 1;
        }
        return sure_sign4(a, E.l, Rerr, 0) < 0 || edge_side_one_sided(above, e0, sc, Y, q);
    }
    return 0;
}

int fl_fast_rep(double *rep, int *above, const fl_encl *e, int ulp_exp, double y)
{
    return rep_core(rep, above, e, NULL, ulp_exp, y);
}

/* The closed two-sided hull of an enclosure: itself, or, for a one-sided one ([c - r, c) or (c, c + r]),
   the centre moved by r/2 toward f with radius r/2 (rounded up, plus the dd sum's error). */
static inline fl_encl closed_hull(const fl_encl *e)
{
    if (!e->side)
        return *e;
    const dd c2 = dd_add_d((dd){ e->ch, e->cl }, e->side * 0.5 * e->r);
    return (fl_encl){ c2.h, c2.l, 0.5 * e->r * (1 + 0x1p-50) + fabs(c2.h) * 0x1p-104, 0 };
}

/* The common case, decided in a few operations (the general judge below dominated exhaustive sweeps,
   at about a third of their time).  A one-sided enclosure is first replaced by its closed hull (as the
   general judge does for the error); every test below is then a sufficient condition on the hull, so
   a decision taken here is the exact one, and anything else is left to the general judge (which
   decides the same way where both decide: tests/test_ulp_fast.c compares them in every format).
   With a = |ch|, the magnitude side of the enclosure, and S = (|a - q| + |cl| + r)(1 + 2^-50) (the
   factor covers the two roundings of the sum):
   - normal candidate: q = RNE(a) at the format's precision, by rounding a's binary64 encoding at bit
     52 - M (ties to even; a carry moves the exponent, as it should); a - q is exact (Sterbenz).
     With h = ulp(q)/2 = 2^(e - M - 1) and q below the largest finite value (no overflow, no
     saturation to decide):
       q's mantissa non-zero, or q = 2^emin (the subnormal spacing below equals the ulp above):
         S < h puts |f| in (q - h, q + h), q's rounding set and binade: ulp 2^(e - M);
       q = 2^e, e > emin: the rounding set is (q - h/2, q + h); with the exact sign of |f| - q
         (sure_sign4): |f| >= q and S < h: ulp 2^(e - M);  |f| < q and S < h/2: ulp 2^(e - 1 - M);
   - subnormal or zero candidate (q < 2^emin): k = rint(a / Q), Q = 2^(emin - M) the subnormal
     quantum (a / Q, cl / Q, r / Q are exact scalings, a / Q - k is exact); S / Q < 1/2 puts |f| in
     ((k - 1/2) Q, (k + 1/2) Q): code k, ulp Q.  For k = 0 the zero's sign is ch's, so |cl| + r < a
     (with the same factor) is required too (f != 0 and of ch's sign); FNUZ formats (one zero) are
     left to the general judge.
   The output y must be finite (else: general judge); its error is rep_core's on the hull. */
static inline int judge_common(fl_ulp_verdict *v, const fl_encl *e0, const fl_fast_fmt *ff, uint32_t y)
{
    const fl_format_desc *d = ff->d;
    const fl_encl hull = closed_hull(e0);
    const fl_encl *e = &hull;
    const int M = d->mbits, sh = 52 - M;
    const double a = fabs(e->ch);
    const double rest = fabs(e->cl) + e->r;
    const uint64_t b = fl_f64_bits(a);
    const uint64_t bq = (b + ((1ull << (sh - 1)) - 1) + ((b >> sh) & 1)) & ~((1ull << sh) - 1);
    const int ex = (int)(bq >> 52) - 1023;
    const int64_t field = (int64_t)ex + d->bias;
    uint64_t mag;
    int ulp_exp;
    if (field >= 1) {
        const uint64_t mant = (bq >> sh) & ((1ull << M) - 1);
        mag = ((uint64_t)field << M) | mant;
        if (mag >= d->max_mag)
            return 0;
        const double dev = a - fl_f64_from_bits(bq); /* exact */
        const double h = pow2i(ex - M - 1);
        const double S = (fabs(dev) + rest) * (1 + 0x1p-50);
        ulp_exp = ex - M;
        if (mant != 0 || field == 1) {
            if (!(S < h))
                return 0;
        } else {
            const double cla = e->ch < 0 ? -e->cl : e->cl; /* the low part along |f| */
            if (S < h && sure_sign4(dev, cla, -e->r, 0) > 0) {
                /* |f| > q: q's binade */
            } else if (S < 0.5 * h && sure_sign4(dev, cla, e->r, 0) < 0) {
                ulp_exp = ex - 1 - M; /* |f| < q: the binade below */
            } else {
                return 0;
            }
        }
    } else {
        ulp_exp = 1 - d->bias - M;
        const double Qi = pow2i(-ulp_exp); /* 1/Q */
        const double sq = a * Qi;
        const double k = rint(sq);
        const double S = (fabs(sq - k) + rest * Qi) * (1 + 0x1p-50);
        if (!(S < 0.5))
            return 0;
        if (k == 0 && (d->specials == FL_SPEC_FNUZ || !(rest * (1 + 0x1p-50) < a)))
            return 0;
        mag = (uint64_t)k;
    }
    double yd;
    if (d->bits == 32) {
        if ((y & 0x7F800000u) == 0x7F800000u)
            return 0;
        yd = fl_f32_from_bits(y);
    } else {
        if (fl_is_nan(d, y) || fl_is_inf(d, y))
            return 0;
        yd = dec(d, y);
    }
    double rep;
    int above;
    if (!rep_core(&rep, &above, e, e0, ulp_exp, yd))
        return 0;
    const uint32_t q = (uint32_t)mag | (e->ch < 0 ? ff->sbit : 0);
    v->ref = q;
    v->cr = y == q;
    v->special = 0;
    v->ulp = rep;
    v->hist = fl_ulp_hist_bucket(rep, above);
    return 1;
}

static int judge_general(fl_ulp_verdict *v, int status, const fl_encl *e, const fl_fast_fmt *ff, uint32_t y);

int fl_fast_judge(fl_ulp_verdict *v, int status, const fl_encl *e, const fl_fast_fmt *ff, uint32_t y)
{
    if (status == FL_FAST_OK && judge_common(v, e, ff, y))
        return 1;
    return judge_general(v, status, e, ff, y);
}

int fl_fast_judge_general(fl_ulp_verdict *v, int status, const fl_encl *e, const fl_fast_fmt *ff, uint32_t y)
{
    return judge_general(v, status, e, ff, y);
}

int fl_fast_judge_common(fl_ulp_verdict *v, int status, const fl_encl *e, const fl_fast_fmt *ff, uint32_t y)
{
    return status == FL_FAST_OK && judge_common(v, e, ff, y);
}

static int judge_general(fl_ulp_verdict *v, int status, const fl_encl *e, const fl_fast_fmt *ff, uint32_t y)
{
    fl_ulp_facts f = { FL_FCLASS_FINITE, 0, 0, 0, 0 };
    if (status == FL_FAST_NAN) {
        f.fclass = FL_FCLASS_NAN;
        fl_ulp_verdict_from_facts(v, &f, ff->fmt, ff->ovf, y);
        return 1;
    }
    if (status != FL_FAST_OK)
        return 0;
    const fl_format_desc *d = ff->d;
    const double ch = e->ch, cl = e->cl;
    const int exact = e->side == 0 && cl == 0 && e->r == 0;
    const double s = fabs(cl) + e->r; /* the centre's low part and the radius */
    /* the direction in which f lies from ch when the two may sit on one boundary */
    const double lean = e->side ? e->side : cl;
    /* 1. the correctly rounded encoding: the enclosure inside q's rounding set.  The candidate is
       RNE(ch); when ch itself sits on a rounding boundary (a short product such as g u / 2, or the x
       of a tail, is often a midpoint) f's side is `lean`'s, so the second candidate rounds the next
       double from ch that way. */
    uint32_t q = 0;
    for (int attempt = 0;; attempt++) {
        const double cc = attempt == 0 ? ch : nextafter(ch, lean > 0 ? INFINITY : -INFINITY);
        q = d->bits == 32 ? fl_f32_bits((float)cc) /* RNE, IEEE overflow, as the format's */
                          : fl_encode_f64_bits(d, fl_f64_bits(cc), FL_RND_NE, ff->ovf, 0);
        if (d->bits == 32 && ff->saturating && (q & 0x7FFFFFFFu) == 0x7F800000u)
            return 0; /* fp32 with saturation: rare, MPFR decides */
        if (exact && ch == 0)
            break;
        double blo, bhi;
        code_bounds(&blo, &bhi, ff, q, ch);
        if ((blo == -INFINITY || encl_above(e, blo, s)) && (bhi == INFINITY || encl_below(e, bhi, s)))
            break;
        if (attempt == 1 || lean == 0)
            return 0;
    }
    f.ref = q;
    /* 2. saturation: the exact value beyond the overflow boundary */
    if ((q & (ff->sbit - 1)) == d->max_mag && !fl_is_nan(d, q)) {
        const double B = ch < 0 ? -ff->B : ff->B;
        const int beyond_up = encl_above(e, B, s), below_up = encl_below(e, B, s);
        if (!beyond_up && !below_up)
            return 0;
        f.sat = ch < 0 ? below_up : beyond_up;
    }
    /* 3. the error of a finite output: the ulp of f's binade, then the error itself (not needed for an
       output that matches a saturated reference: its error is 0 by definition) */
    if (!fl_is_nan(d, y) && !fl_is_inf(d, y) && !(f.sat && y == q)) {
        int ulp_exp;
        if (exact && ch == 0) {
            ulp_exp = ff->emin - d->mbits;
        } else {
            const double sg = ch < 0 ? -1 : 1;
            const double ah = sg * ch;
            if (ah == 0)
                return 0;
            const int eb0 = exponent_of(ah); /* ah is a normal double in every enclosure here */
            int found = 0;
            /* f in binade eb: sg f >= 2^eb (above, or the enclosure is the point) and sg f < 2^(eb+1);
               when ch is a power of two, f may lie in the binade below */
            for (int eb = eb0; eb >= eb0 - 1 && !found; eb--) {
                if (eb < ff->emin) {
                    found = sg > 0 ? encl_below(e, pow2i(ff->emin), s) : encl_above(e, -pow2i(ff->emin), s);
                    ulp_exp = ff->emin - d->mbits;
                } else {
                    const double lo = sg * pow2i(eb), hi = sg * pow2i(eb + 1);
                    if (exact)
                        found = eb == eb0;
                    else
                        found = sg > 0 ? encl_above(e, lo, s) && encl_below(e, hi, s)
                                       : encl_below(e, lo, s) && encl_above(e, hi, s);
                    ulp_exp = eb - d->mbits;
                }
                if (ah != pow2i(eb0))
                    break;
            }
            if (!found)
                return 0;
        }
        const fl_encl hull = closed_hull(e); /* for the error */
        if (!rep_core(&f.rep, &f.above, &hull, e, ulp_exp, dec(d, y)))
            return 0;
    }
    fl_ulp_verdict_from_facts(v, &f, ff->fmt, ff->ovf, y);
    return 1;
}
