/* cast_elem.h — one element of the cast engine's cast (cast.h), FL_HD: the reference loop of
 * numerics/cast.c and the GPU step's FP8 cast kernel (kernels/train_step.cu) both call it, so their
 * codes and counts are the same by construction.
 *
 * v = xv * s (already formed by the caller, in float32); the code is fl_encode_f32_bits(v) in the
 * cast's rounding (RNE, or SR drawing rbits) and overflow; *flags gets the counts of cast.h's
 * fl_cast_counts for this element:
 *   FL_CE_NAN_IN   xv is NaN (and nothing else is counted)
 *   FL_CE_SAT      |v| above the largest finite value fmax (Inf included)
 *   FL_CE_CLIP     of those, under SR every one, under RNE beyond the RNE overflow boundary `bound`
 *                  (at it where ties_ovf: the tie overflows)
 *   FL_CE_NAN_OUT  the code decodes to NaN (a non-saturating e4m3 overflow)
 *   FL_CE_INF_OUT  it decodes to +-Inf from a finite v
 *   FL_CE_FTZ      it decodes to zero from a nonzero v (SR) / xv (RNE)
 */
#ifndef FL_CAST_ELEM_H
#define FL_CAST_ELEM_H

#include "fl_round.h"

enum { FL_CE_NAN_IN = 1, FL_CE_SAT = 2, FL_CE_CLIP = 4, FL_CE_NAN_OUT = 8, FL_CE_INF_OUT = 16, FL_CE_FTZ = 32 };

FL_HD uint32_t fl_cast_elem(const fl_format_desc *d, float xv, float v, int sr, uint32_t rbits, fl_overflow ovf,
                            float fmax, float bound, int ties_ovf, uint32_t *flags)
{
    const uint32_t code = fl_encode_f32_bits(d, fl_f32_bits(v), sr ? FL_RND_SR : FL_RND_NE, ovf, rbits);
    if (xv != xv) {
        *flags = FL_CE_NAN_IN;
        return code;
    }
    const float dq = fl_decode_f32(d, code);
    const float av = fl_f32_from_bits(fl_f32_bits(v) & 0x7FFFFFFFu);
    const int v_inf = (fl_f32_bits(v) & 0x7FFFFFFFu) == 0x7F800000u, dq_inf = (fl_f32_bits(dq) & 0x7FFFFFFFu) == 0x7F800000u;
    uint32_t fl = 0;
    if (av > fmax) { /* includes +-Inf inputs */
        fl |= FL_CE_SAT;
        if (sr || av > bound || (ties_ovf && av == bound))
            fl |= FL_CE_CLIP;
    }
    if (dq != dq)
        fl |= FL_CE_NAN_OUT;
    else if (dq_inf && !v_inf)
        fl |= FL_CE_INF_OUT;
    else if (dq == 0.0f && (sr ? v != 0.0f : xv != 0.0f))
        fl |= FL_CE_FTZ;
    *flags = fl;
    return code;
}

#endif /* FL_CAST_ELEM_H */
