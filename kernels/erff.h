/* erff.h — fl_erff: erf correctly rounded to float32, the same bits on the CPU and on a GPU (FL_HD),
 * and the exact GELU built on it, with its derivative.
 *
 * Why our own: glibc's erff is not correctly rounded before glibc 2.41 (2.36 rounds 5.9% of the floats
 * in [0, 4) the wrong way, at most 0.97 ulp: tests/test_erff.c, experiments/ulp/ULP.md) and CUDA's erff
 * is another function again,
 * so a GeLU run's bits depended on the machine's C library and no device kernel could be its twin.
 * A correctly rounded erff has one answer per input: the same as glibc 2.41 and later, whose erff is
 * CORE-MATH's correctly rounded one (glibc 2.41 NEWS), and as any other correctly rounded erf.
 *
 * Algorithm (after the LLVM libc design, "correctly rounded erff", D153683, there with 32 pieces of
 * 1/8): a = |x|; a >= 4 gives 1 (erf(4) = 1 - 1.5e-8 rounds to 1), NaN gives x + x.  Otherwise
 * i = floor(4a) and, in double with fused multiply-adds (Horner),
 *     piece 0   erf(a) = a * P0(a^2)               (a^2 exact in double: a has 24 bits)
 *     piece i   erf(a) = Pi(a - (2i+1)/8)           (the subtraction is exact)
 * with degree-11 polynomials on 16 pieces (kernels/erff_table.h, from kernels/gen_erff_table.py:
 * Chebyshev interpolation with mpmath, relative error of the rounded coefficients below 2^-53.6;
 * coefficient-major, so that the harness's AVX-512 path fetches a coefficient of 8 lanes' pieces with
 * one two-register permute: experiments/train/erf_simd.c, the same operations in the same order).  The
 * double is rounded once to float (RNE, subnormals included) and the sign put back: erf is odd.
 *
 * Correct rounding is checked, not assumed: tests/test_erff.c (in make test, about 24 s on two cores)
 * runs every float in [0, 4), measures the double's relative error against the libm's erfl (64-bit
 * significand: at most 2^-51.97 over all of them) and judges with MPFR every input whose double lies
 * within 2^-40 (relative) of a rounding boundary (23,908 inputs) and every 4096th other one: none is
 * misrounded, so no input needs an exception.  The harness's vector span (experiments/train/erf_simd.c)
 * is compared with fl_erff on every float32 at each vector level.
 *
 * On a GPU the table sits in global memory (__device__), read through the cache; the work is eleven
 * double fused multiply-adds an element, cheap on an H100/H200 (FP64 at half the FP32 rate) and slow on
 * parts with little FP64 (sm_89: 1/64). */
#ifndef FL_ERFF_H
#define FL_ERFF_H

#include "activations.h"
#include "erff_table.h"

#if defined(__CUDACC__)
static __device__ const double fl_erff_tab_dev[FL_ERFF_NC * FL_ERFF_NP] = FL_ERFF_COEFS;
#endif
static const double fl_erff_tab_host[FL_ERFF_NC * FL_ERFF_NP] __attribute__((unused, aligned(64))) = FL_ERFF_COEFS;

/* erf(a) in double for 0 <= a < 4 (a float), before fl_erff's rounding. */
FL_HD double fl_erf_abs_d(float a)
{
#if defined(__CUDA_ARCH__)
    const double *tab = fl_erff_tab_dev;
#else
    const double *tab = fl_erff_tab_host;
#endif
    const int i = (int)(a * 4.0f); /* exact: a * 4 is a float */
    const double ad = (double)a;
    const double v = i ? ad - (double)(2 * i + 1) * 0.125 : ad * ad;
    double q = tab[i];
    for (int k = 1; k < FL_ERFF_NC; k++)
        q = fl_fma_d(q, v, tab[k * FL_ERFF_NP + i]);
    return i ? q : q * ad;
}

/* erf(x) correctly rounded to float (round to nearest even), every float x. */
FL_HD float fl_erff(float x)
{
    const uint32_t sign = fl_f32_bits(x) & 0x80000000u;
    const float a = fl_absf(x);
    if (!(a < 4.0f))
        return fl_isnanf(x) ? x + x : fl_f32_from_bits(sign | 0x3F800000u);
    return fl_f32_from_bits(sign | fl_f32_bits((float)fl_erf_abs_d(a)));
}

/* The exact GELU in float, as PyTorch's approximate='none' writes it: 0.5 x (1 + erf(x / sqrt 2)), each
   operation rounded to float; erf is fl_erff.  Its derivative given e = e^(-x^2/2) in float:
   0.5 (1 + erf(x / sqrt 2)) + x e / sqrt(2 pi), the harness's formula (the caller computes e with the
   libm's expf or its twin fl_expf_glibc).  The _of_erf forms take erf(x / sqrt 2) computed elsewhere
   (the harness's vector span, erf_simd.c). */
#define FL_GELU_RSQRT2 0.70710678118654752f /* RN(1/sqrt 2) */
#define FL_GELU_RSQRT2PI 0.39894228040143268f /* RN(1/sqrt(2 pi)) */
FL_HD float fl_gelu_of_erf(float x, float erf_t) { return 0.5f * x * (1.0f + erf_t); }
FL_HD float fl_gelu_grad_of_erf(float x, float erf_t, float e) { return 0.5f * (1.0f + erf_t) + x * FL_GELU_RSQRT2PI * e; }
FL_HD float fl_gelu_f32(float x) { return fl_gelu_of_erf(x, fl_erff(x * FL_GELU_RSQRT2)); }
FL_HD float fl_gelu_grad_f32(float x, float e) { return fl_gelu_grad_of_erf(x, fl_erff(x * FL_GELU_RSQRT2), e); }

#endif
