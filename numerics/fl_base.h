/* fl_base.h — the few definitions every fp8lab file shares.
 *
 * FL_HD marks a function that is compiled both as host C and as CUDA device code: the element
 * functions, conversions and decodes that the kernels and their CPU twins share.  Nothing under
 * FL_HD may call libm or allocate; it is integer and IEEE-754 arithmetic only, so the same source
 * gives the same bits on the CPU and on the GPU (both compiled without fast-math).
 */
#ifndef FL_BASE_H
#define FL_BASE_H

#include <stdint.h>
#include <stddef.h>

#if defined(__CUDACC__)
#define FL_HD static inline __host__ __device__
#else
#define FL_HD static inline
#endif

#define FL_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* The project's two size limits, each defined once: the highest order of the polynomial activations
   (PolyCom's PolyReLU / PolyNorm use r = 2..4; Zhuo et al., ICLR 2025) and the most inputs any function
   takes (swiglu / smooth_swiglu, and a VJP's upstream gradient). */
#define FL_POLY_MAX_ORDER 4
#define FL_MAX_INPUTS 4

/* The splitmix64 finaliser (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
   OOPSLA 2014): a bijection of 64-bit words that mixes every input bit into every output bit.  Every
   generator of the project is built on it: counter-based streams fl_mix64(seed + (i + 1) * golden),
   and the sequential generator fl_splitmix64 below. */
#define FL_GOLDEN64 0x9E3779B97F4A7C15ull
FL_HD uint64_t fl_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* splitmix64: advance the state by the golden gamma, return the mixed state. */
FL_HD uint64_t fl_splitmix64(uint64_t *state) { return fl_mix64(*state += FL_GOLDEN64); }

/* A uniform double in (0, 1) from the top 53 bits of z (never 0 or 1: safe under log). */
FL_HD double fl_open01(uint64_t z) { return ((double)(z >> 11) + 0.5) * 0x1p-53; }

/* Reinterpret bits without aliasing problems (memcpy is not available in device code):
   fl_f32_bits, fl_f32_from_bits, fl_f64_bits, fl_f64_from_bits. */
#define FL_BIT_CAST(NAME, TO, FROM)                                                                \
    FL_HD TO NAME(FROM x)                                                                          \
    {                                                                                              \
        union { FROM from; TO to; } v;                                                             \
        v.from = x;                                                                                \
        return v.to;                                                                               \
    }
FL_BIT_CAST(fl_f32_bits, uint32_t, float)
FL_BIT_CAST(fl_f32_from_bits, float, uint32_t)
FL_BIT_CAST(fl_f64_bits, uint64_t, double)
FL_BIT_CAST(fl_f64_from_bits, double, uint64_t)
#undef FL_BIT_CAST

#endif /* FL_BASE_H */
