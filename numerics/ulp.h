/* ulp.h — units in the last place, distances between encodings, errors in ulps.
 *
 * Convention (Zimmermann et al., "Accuracy of mathematical functions"): the ulp of a real v in a
 * format with M mantissa bits is 2^(e - M) where 2^e <= |v| < 2^(e+1), but never below the
 * subnormal ulp 2^(emin - M) (emin = 1 - bias, the smallest normal exponent).  The ulp is taken
 * from the EXACT value's binade, also when the exact value lies beyond the format's max
 * (the binade continues upward), so an output saturated to max shows a finite error.
 */
#ifndef FL_ULP_H
#define FL_ULP_H

#include "fl_format.h"

/* ulp(v) in f for a real v (finite); NaN for NaN/Inf. */
double fl_ulp(fl_format f, double v);

/* Ordered integer of an encoding: ..., -2, -1, 0 (+0 and -0), 1, 2, ... so that the difference of
 * two ordinals is the number of representable steps between them (Inf, where it exists, is one
 * step beyond max).  Not defined for NaN encodings (check fl_is_nan first). */
int64_t fl_ordinal(fl_format f, uint32_t code);

/* Signed distance in representable steps from a to b (b - a).  NaN is a class of its own: returns
 * 0 and sets *dist when neither is NaN; returns -1 (and *dist = 0) when exactly one is NaN, 1 when
 * both are NaN (equal as a class). */
int fl_ulp_distance(int64_t *dist, fl_format f, uint32_t a, uint32_t b);

/* Error of an encoding against an exact value, in ulps of the exact value: |dec(code) - v| / ulp(v).
 * 0 when both are the same infinity; +Inf when exactly one side is infinite; NaN when either is
 * NaN.  Computed in double: exact for every format up to fp16/bf16 precision when v is a double
 * (the difference of two doubles within a few binades is exact, and the division is by a power
 * of two); callers that hold an MPFR exact value use the reference's version. */
double fl_ulp_error(fl_format f, uint32_t code, double v);

#endif /* FL_ULP_H */
