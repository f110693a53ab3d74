/* round_mpfr.c — see round_mpfr.h. */
#include "round_mpfr.h"

#include <gmp.h>

void fl_mpfr_format_range(fl_format f, mpfr_prec_t *p, mpfr_exp_t *emin, mpfr_exp_t *emax)
{
    const fl_format_desc *d = fl_format_get(f);
    const int top_biased = (1 << d->ebits) - 1 - (d->specials == FL_SPEC_IEEE); /* largest finite E */
    *p = d->mbits + 1;
    if (d->specials == FL_SPEC_E8M0) {
        *emin = -127 + 1; /* 2^-127 = 0.5 * 2^-126 */
        *emax = 127 + 1;
        return;
    }
    /* smallest subnormal 2^(1 - bias - M) = 0.5 * 2^(2 - bias - M) */
    *emin = 2 - d->bias - d->mbits;
    /* largest binade [2^(top-bias), 2^(top-bias+1)) */
    *emax = top_biased - d->bias + 1;
}

mpfr_rnd_t fl_mpfr_rnd(fl_rounding r)
{
    switch (r) {
    case FL_RND_ZERO: return MPFR_RNDZ;
    case FL_RND_UP:   return MPFR_RNDU;
    case FL_RND_DOWN: return MPFR_RNDD;
    default:          return MPFR_RNDN;
    }
}

/* Magnitude encoding of a nonzero finite value y already representable in f (normal or subnormal). */
static uint32_t encode_exact(fl_format f, mpfr_srcptr y)
{
    const fl_format_desc *d = fl_format_get(f);
    const mpfr_exp_t e = mpfr_get_exp(y) - 1; /* |y| in [2^e, 2^(e+1)) */
    mpz_t z;
    mpz_init(z);
    if (d->specials == FL_SPEC_E8M0) {
        mpz_clear(z);
        return (uint32_t)(e + 127);
    }
    const long emin_normal = 1 - d->bias;
    /* y = z * 2^(lsb exponent): the lsb exponent of the binade, or of the subnormal range */
    const long lsb = (e >= emin_normal ? (long)e : emin_normal) - d->mbits;
    mpfr_t t;
    mpfr_init2(t, mpfr_get_prec(y));
    mpfr_abs(t, y, MPFR_RNDN);
    mpfr_mul_2si(t, t, -lsb, MPFR_RNDN); /* exact: an integer < 2^(M+1) */
    mpfr_get_z(z, t, MPFR_RNDN);
    const uint32_t m = (uint32_t)mpz_get_ui(z);
    mpfr_clear(t);
    mpz_clear(z);
    if (e < emin_normal)
        return m; /* subnormal: E = 0, m < 2^M */
    return ((uint32_t)(e + d->bias) << d->mbits) | (m & ((1u << d->mbits) - 1u));
}

uint32_t fl_mpfr_encode(fl_format f, mpfr_srcptr x, fl_rounding rnd, fl_overflow ovf, int *inexact)
{
    const fl_format_desc *d = fl_format_get(f);
    const uint32_t sbit = d->specials == FL_SPEC_E8M0 ? 0 : 1u << (d->bits - 1);
    const int neg = mpfr_signbit(x) != 0;
    const uint32_t sign = neg ? sbit : 0;
    if (inexact)
        *inexact = 0;

    if (mpfr_nan_p(x))
        return d->specials == FL_SPEC_NONE ? d->max_mag : d->nan;
    if (d->specials == FL_SPEC_E8M0 && neg && !mpfr_zero_p(x))
        return 0xFF;
    if (mpfr_inf_p(x)) {
        if (ovf == FL_OVF_SATURATE || d->specials == FL_SPEC_NONE)
            return sign | d->max_mag;
        if (d->specials == FL_SPEC_IEEE)
            return sign | (d->max_mag + 1);
        if (d->specials == FL_SPEC_FN)
            return sign | d->nan; /* e4m3: NaN of the input's sign, as NVIDIA's __NV_NOSAT */
        return d->specials == FL_SPEC_E8M0 ? 0xFF : d->nan;
    }
    if (mpfr_zero_p(x))
        return d->specials == FL_SPEC_FNUZ || d->specials == FL_SPEC_E8M0 ? 0 : sign;

    mpfr_prec_t p;
    mpfr_exp_t emin, emax;
    fl_mpfr_format_range(f, &p, &emin, &emax);
    const mpfr_rnd_t r = fl_mpfr_rnd(rnd);
    const mpfr_exp_t old_emin = mpfr_get_emin(), old_emax = mpfr_get_emax();
    mpfr_t y;
    mpfr_init2(y, p);
    mpfr_set_emin(emin);
    mpfr_set_emax(emax);
    /* E8M0 has precision 1, where MPFR's round-to-nearest breaks a tie (|x| = 1.5 * 2^k) away from
       zero: both neighbours have significand 1, so MPFR's "even" rule cannot apply.  fl_round.h
       documents ties to the even exponent code, so such a tie is decided here by a directed mode.
       (x > 0: negative E8M0 inputs returned above.) */
    mpfr_rnd_t rset = r;
    if (d->specials == FL_SPEC_E8M0 && r == MPFR_RNDN && mpfr_min_prec(x) == 2) {
        const long lower_code = (long)mpfr_get_exp(x) - 1 + 127; /* x = 0.11b * 2^E: 2^(E-1), 2^E */
        rset = (lower_code & 1) == 0 ? MPFR_RNDZ : MPFR_RNDU;
    }
    int inex = mpfr_set(y, x, rset);
    inex = mpfr_check_range(y, inex, rset);
    if (d->specials != FL_SPEC_E8M0)
        inex = mpfr_subnormalize(y, inex, r);
    mpfr_set_emin(old_emin);
    mpfr_set_emax(old_emax);
    if (inexact)
        *inexact = inex;

    uint32_t code;
    if (d->specials == FL_SPEC_E8M0) {
        /* No zero: underflow (to 0 or below 2^-127) clamps to 0x00. */
        if (mpfr_zero_p(y))
            code = 0;
        else if (mpfr_inf_p(y))
            code = ovf == FL_OVF_SATURATE || r == MPFR_RNDZ || r == MPFR_RNDD ? 0xFE : 0xFF;
        else
            code = encode_exact(f, y);
        mpfr_clear(y);
        return code;
    }

    /* Overflow: Inf from MPFR, or a value beyond max inside the top binade (e4m3, fnuz). */
    mpfr_t max;
    mpfr_init2(max, 64);
    fl_mpfr_decode(max, f, d->max_mag);
    const int over = mpfr_inf_p(y) || mpfr_cmpabs(y, max) > 0;
    mpfr_clear(max);
    if (over) {
        const int toward_zero = r == MPFR_RNDZ || (r == MPFR_RNDU && neg) || (r == MPFR_RNDD && !neg);
        if (ovf == FL_OVF_SATURATE || toward_zero || d->specials == FL_SPEC_NONE)
            code = sign | d->max_mag;
        else if (d->specials == FL_SPEC_IEEE)
            code = sign | (d->max_mag + 1);
        else if (d->specials == FL_SPEC_FN)
            code = sign | d->nan;
        else
            code = d->nan;
    } else if (mpfr_zero_p(y)) {
        code = d->specials == FL_SPEC_FNUZ ? 0 : sign;
    } else {
        code = sign | encode_exact(f, y);
    }
    mpfr_clear(y);
    return code;
}

void fl_mpfr_decode(mpfr_ptr out, fl_format f, uint32_t code)
{
    const fl_format_desc *d = fl_format_get(f);
    if (d->specials == FL_SPEC_E8M0) {
        if (code == 0xFF)
            mpfr_set_nan(out);
        else
            mpfr_set_si_2exp(out, 1, (long)code - 127, MPFR_RNDN);
        return;
    }
    const uint32_t sbit = 1u << (d->bits - 1);
    const uint32_t mag = code & (sbit - 1);
    const int neg = (code & sbit) != 0;
    const uint32_t E = mag >> d->mbits, m = mag & ((1u << d->mbits) - 1);
    const int is_nan = (d->specials == FL_SPEC_IEEE && E == (1u << d->ebits) - 1 && m != 0) ||
                       (d->specials == FL_SPEC_FN && mag > d->max_mag) ||
                       (d->specials == FL_SPEC_FNUZ && code == d->nan);
    if (is_nan) {
        mpfr_set_nan(out);
        return;
    }
    if (d->specials == FL_SPEC_IEEE && E == (1u << d->ebits) - 1) {
        mpfr_set_inf(out, neg ? -1 : 1);
        return;
    }
    /* value = (E ? 2^M + m : m) * 2^(max(E,1) - bias - M) */
    const long sig = (long)(E ? (1u << d->mbits) + m : m);
    const long ex = (long)(E ? E : 1) - d->bias - d->mbits;
    mpfr_set_si_2exp(out, neg ? -sig : sig, ex, MPFR_RNDN);
    if (sig == 0 && neg)
        mpfr_neg(out, out, MPFR_RNDN); /* -0 */
}
