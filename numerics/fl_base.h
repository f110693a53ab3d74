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

/* Reinterpret bits without aliasing problems (memcpy is not available in device code). */
FL_HD uint32_t fl_f32_bits(float x)
{
    union { float f; uint32_t u; } v;
    v.f = x;
    return v.u;
}

FL_HD float fl_f32_from_bits(uint32_t u)
{
    union { float f; uint32_t u; } v;
    v.u = u;
    return v.f;
}

FL_HD uint64_t fl_f64_bits(double x)
{
    union { double f; uint64_t u; } v;
    v.f = x;
    return v.u;
}

FL_HD double fl_f64_from_bits(uint64_t u)
{
    union { double f; uint64_t u; } v;
    v.u = u;
    return v.f;
}

#endif /* FL_BASE_H */
