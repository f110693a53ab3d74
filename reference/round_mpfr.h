/* round_mpfr.h — MPFR's view of every fl_format: rounding an exact value into a format's encoding.
 *
 * This is the independent side of every rounding test and the last step of every reference
 * function: a value is rounded once, by MPFR, at the format's precision p = M + 1 inside its
 * exponent range with subnormals emulated by mpfr_subnormalize, then the overflow policy and the
 * special encodings of fl_round.h's documentation are applied.  The encoding is assembled from
 * MPFR's exponent and significand directly, not through fl_round.h.
 */
#ifndef FL_ROUND_MPFR_H
#define FL_ROUND_MPFR_H

#include <mpfr.h>
#include "fl_format.h"

/* The format as MPFR sees it: precision, and the exponent range in MPFR's convention
   (x = m * 2^e, 0.5 <= m < 1) such that subnormals come out of mpfr_subnormalize.
   E.g. bf16: p 8, emin -132, emax 128; e4m3: p 4, emin -8, emax 9 (its top binade is partly NaN,
   which the overflow step handles). */
void fl_mpfr_format_range(fl_format f, mpfr_prec_t *p, mpfr_exp_t *emin, mpfr_exp_t *emax);

mpfr_rnd_t fl_mpfr_rnd(fl_rounding r); /* FL_RND_SR has no MPFR equivalent: returns MPFR_RNDN */

/* Round x (any precision, taken as exact) into f.  rnd must not be FL_RND_SR.
   If inexact is non-NULL it receives the sign of (rounded - x) as MPFR reports it (0 if exact),
   before the overflow policy is applied. */
uint32_t fl_mpfr_encode(fl_format f, mpfr_srcptr x, fl_rounding rnd, fl_overflow ovf, int *inexact);

/* The exact value of an encoding (NaN for NaN encodings).  out needs at least 24 bits. */
void fl_mpfr_decode(mpfr_ptr out, fl_format f, uint32_t code);

#endif /* FL_ROUND_MPFR_H */
