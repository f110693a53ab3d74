/* fl_libm.h — float formulas written with glibc's libm the way frameworks write them, which `fp8lab ulp`
 * judges against MPFR (experiments/ulp/examples.c).  Not FL_HD: libm is host-only.  (The training
 * harness's GELU is fl_gelu_f32 of kernels/erff.h, on a correctly rounded erff of fp8lab's own.) */
#ifndef FL_LIBM_H
#define FL_LIBM_H

#include <math.h>

/* GELU with erf: 0.5 x (1 + erf(x / sqrt 2)), in float with glibc erff (PyTorch's approximate='none'). */
static inline float fl_gelu_erff(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }

#endif /* FL_LIBM_H */
