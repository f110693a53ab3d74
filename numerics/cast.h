/* cast.h — the cast engine: the training harness's scaled casts, fused, at every instruction set.
 *
 * One cast of a span of float32 x, element c:
 *   xv = x[c] * rs * cs[c]            the tensor entering the cast (row and column smoothing)
 *   v  = xv * s                       scaled by the block's (or tensor's) scale
 *   q  = decode(round(v))             round-to-nearest-even, or stochastic rounding drawing
 *                                     fl_sr_bits(key, off + c); saturating or not
 *   y[c] = q * si * rsi * csi[c]      written dequantised (fake quantisation), or the code itself
 *                                     (fl_cast_encode_span, on the conversion kernels of convert.h)
 * and counts over the span: the amax of xv (non-NaN), saturated, clipped, non-finite outputs,
 * NaN inputs, and nonzero inputs rounded to zero; optionally the moments sum xv^2, xv^4.  The
 * products run in that order, each rounded to float32 (the build has no contraction); a product
 * with a scale of exactly 1 is skipped, which changes no bit.
 *
 * The formats with fused kernels are e4m3, e5m2, bf16 and Gaudi2's e4m3 (fl_cast_fmt.gaudi2); the
 * results are those of fl_encode_f32_bits and fl_decode_f32 (numerics/fl_round.h), which the
 * reference loop (fl_cast_fmt.reference) calls element by element.  The kernels run at the
 * instruction set fl_convert_isa() gives (scalar, AVX2, AVX-512; FP8LAB_ISA caps it), chosen at run
 * time as numerics/convert.c's are: a vector whose lanes are all in the common case (finite,
 * within the largest finite value; for SR also not below the smallest normal unless zero) takes
 * the vector body, any other vector goes lane by lane through the scalar element code.  Every
 * level gives the same bits and counts (tests/test_cast.c: all 2^32 inputs for RNE at every level
 * the machine has).
 */
#ifndef FL_CAST_H
#define FL_CAST_H

#include "fl_format.h"

#include <stddef.h>
#include <stdint.h>

/* Gaudi2's e4m3 (Intel Gaudi2 FP8 E4M3): IEEE-style, bias 7, largest finite 0x77 = 2^7 x 1.875 =
   240, 0x78 Inf, 0x79..0x7F NaN.  Below 240 its values are OCP e4m3's; RNE overflows at 248, a tie
   between 240 and 256.  Cast saturating. */
#define FL_DESC_E4M3_GAUDI2 { 8, 4, 3, 7, FL_SPEC_IEEE, 0x77u, 0x7Fu }
#define FL_GAUDI2_E4M3_MAX 240.0f

/* Counts of one or more casts (integers: the sum does not depend on the order or threads). */
typedef struct {
    uint64_t sat;     /* |v| above the largest finite value, Inf included, NaN not */
    uint64_t clip;    /* of those, beyond the RNE overflow boundary (at it where the tie overflows);
                         under SR every saturated element */
    uint64_t nan_out; /* e4m3: NaN produced from a non-NaN v (overflow without saturation, Inf) */
    uint64_t inf_out; /* e5m2 / bf16: Inf produced from a finite v */
    uint64_t nan_in;  /* NaN inputs */
    uint64_t ftz;     /* nonzero inputs that rounded to zero */
} fl_cast_counts;

void fl_cast_counts_add(fl_cast_counts *a, const fl_cast_counts *b);
/* One element's counts (the FL_CE_* flags of cast_elem.h) added to k. */
void fl_cast_counts_flags(fl_cast_counts *k, uint32_t flags);

/* reduction(fl_cnt_add : k) in an OpenMP loop sums fl_cast_counts over the threads. */
#ifdef _OPENMP
#pragma omp declare reduction(fl_cnt_add : fl_cast_counts : fl_cast_counts_add(&omp_out, &omp_in)) \
    initializer(omp_priv = (fl_cast_counts){ 0, 0, 0, 0, 0, 0 })
#endif

/* What a cast rounds to. */
typedef struct fl_cast_fmt {
    fl_format fmt;  /* e4m3, e5m2, bf16 (fused kernels); any other format: the reference loop */
    int gaudi2;     /* fmt e4m3, cast as Gaudi2's e4m3 (FL_DESC_E4M3_GAUDI2), saturating */
    int nosat;      /* overflow to the format's NaN / Inf instead of its largest value; bf16 always
                       overflows to Inf, as the casts to bf16 of the frameworks do */
    int sr;         /* stochastic rounding from the stream key (else RNE) */
    uint64_t key;
    int reference;  /* 1: the element-by-element reference loop (tests compare the two) */
} fl_cast_fmt;

/* The scales of one span. */
typedef struct {
    float rs, rsi;          /* row smoothing and its inverse (1, 1 for none) */
    float s, si;            /* the block's scale and its inverse */
    const float *cs, *csi;  /* column smoothing of the span's elements and inverses, or NULL */
    uint64_t off;           /* SR: the index of x[0] in its stream */
} fl_cast_scales;

/* Fake-quantise x[0..n) into y (y may be x: each element is read before it is written), adding
   to k.  m2, m4 non-NULL: add the moments sum (double) xv^2 and its square over the elements whose
   v is not NaN, in index order, after the cast (so not with y == x).  Returns the amax of xv. */
float fl_cast_fq_span(float *y, const float *x, size_t n, const fl_cast_fmt *f, const fl_cast_scales *sc,
                      fl_cast_counts *k, double *m2, double *m4);

/* The loop fl_cast_fq_span runs for f->fmt == e2m1 (not f->reference) at every level, called
   directly (no moments, no dispatch): NVFP4 casts blocks of 16 elements. */
float fl_cast_fq_e2m1(float *y, const float *x, size_t n, const fl_cast_fmt *f, const fl_cast_scales *sc,
                      fl_cast_counts *k);

/* The same at instruction set isa (FL_ISA_*; capped by the CPU's own) instead of fl_convert_isa(). */
float fl_cast_fq_span_at(int isa, float *y, const float *x, size_t n, const fl_cast_fmt *f, const fl_cast_scales *sc,
                         fl_cast_counts *k, double *m2, double *m4);

/* codes[c] = encoding of x[c] * s (the product in float32; RNE, saturating unless nosat; bf16 always
   overflows to Inf) in fmt's storage (one byte for e4m3/e5m2, two for bf16; fl_convert_from_f32's
   layout).  The encoding is fl_convert_from_f32's: the products, a stack buffer at a time, go
   through the same conversion kernels as `fp8lab convert`, at the same instruction set.  Large
   spans run on the OpenMP threads outside a parallel region; the codes do not depend on them. */
void fl_cast_encode_span(void *codes, const float *x, size_t n, float s, fl_format fmt, int nosat);

/* The largest finite value of the cast's format (240 for Gaudi2's e4m3). */
float fl_cast_fmax(const fl_cast_fmt *f);

/* What fl_cast_elem (cast_elem.h) needs for the cast f: its format's descriptor (Gaudi2's e4m3 where
   f->gaudi2), the overflow mode (bf16 and non-saturating casts overflow), the largest finite value,
   the RNE overflow boundary and whether its tie overflows. */
typedef struct {
    fl_format_desc d;
    fl_overflow ovf;
    float fmax, bound;
    int ties_ovf;
} fl_cast_limits;
void fl_cast_limits_of(fl_cast_limits *l, const fl_cast_fmt *f);

/* The clip-mass sums of a span cast with sc (si unused): over the finite x[c], den += |x[c]| and
   num += the part of |x[c]| the cast loses to saturation, in x's units: (|v| - fmax) / s * csi[c]
   * rsi beyond the largest finite value fmax; all of |x[c]| where a non-saturating cast produces
   NaN / Inf (|v| beyond the RNE overflow boundary, or at it when the tie overflows).  In double,
   in index order; v = x[c] * rs * cs[c] * s in float32 as the cast forms it. */
void fl_cast_clip_mass(const float *x, size_t n, const fl_cast_fmt *f, const fl_cast_scales *sc, double *num,
                       double *den);

/* max |x[c]| over the non-NaN elements of x[0..n) (0 for none), at the dispatched level. */
float fl_cast_amax(const float *x, size_t n);

/* Per-row moments: rm[2i], rm[2i+1] = sum over c ascending of d2 = (double) xv^2 and of d2^2,
   xv = x[i][c] * rs[i] (rs NULL: 1), over the elements whose xv * s[i / br] is not NaN.  Eight
   rows at a time run in the lanes of one vector at AVX-512: the sums of the sequential loop, bit
   for bit.  Rows run on the OpenMP threads. */
void fl_cast_row_moments(double *rm, const float *x, size_t R, size_t C, const float *rs, const float *s, size_t br);

#endif /* FL_CAST_H */
