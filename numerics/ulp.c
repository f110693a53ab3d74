/* ulp.c — see ulp.h. */
#include "ulp.h"
#include "fl_round.h"

#include <math.h>

double fl_ulp(fl_format f, double v)
{
    const fl_format_desc *d = fl_format_get(f);
    if (!isfinite(v))
        return NAN;
    const int emin = d->specials == FL_SPEC_E8M0 ? -127 : 1 - d->bias;
    int e = emin;
    if (v != 0) {
        frexp(v, &e); /* |v| = m * 2^e with m in [0.5, 1): binade exponent e - 1 */
        e -= 1;
        if (e < emin)
            e = emin;
    }
    return ldexp(1.0, e - d->mbits);
}

int64_t fl_ordinal(fl_format f, uint32_t code)
{
    const fl_format_desc *d = fl_format_get(f);
    if (d->specials == FL_SPEC_E8M0)
        return (int64_t)code;
    const uint32_t sbit = 1u << (d->bits - 1);
    const int64_t mag = (int64_t)(code & (sbit - 1));
    return (code & sbit) ? -mag : mag;
}

int fl_ulp_distance(int64_t *dist, fl_format f, uint32_t a, uint32_t b)
{
    const fl_format_desc *d = fl_format_get(f);
    const int na = fl_is_nan(d, a), nb = fl_is_nan(d, b);
    *dist = 0;
    if (na || nb)
        return na && nb ? 1 : -1;
    *dist = fl_ordinal(f, b) - fl_ordinal(f, a);
    return 0;
}

double fl_ulp_error(fl_format f, uint32_t code, double v)
{
    const double y = fl_decode(f, code);
    if (isnan(y) || isnan(v))
        return NAN;
    if (isinf(y) || isinf(v))
        return y == v ? 0.0 : INFINITY;
    return fabs(y - v) / fl_ulp(f, v);
}
