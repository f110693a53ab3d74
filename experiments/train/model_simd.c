/* model_simd.c — the instruction set of model_simd.h's bodies, chosen at run time. */
#include "model_simd.h"

#include "convert.h"

int model_simd_isa(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    static int fma = -1; /* benign race: every thread computes the same value */
    int isa = fl_convert_isa(), f = __atomic_load_n(&fma, __ATOMIC_RELAXED);
    if (isa >= FL_ISA_AVX2 && f < 0) {
        __builtin_cpu_init();
        f = __builtin_cpu_supports("fma") != 0;
        __atomic_store_n(&fma, f, __ATOMIC_RELAXED);
    }
    /* AVX2 as fl_cpu_isa detects it does not imply FMA (every AVX2 CPU made has it; an emulator may not) */
    return isa >= FL_ISA_AVX2 && !f ? FL_ISA_SCALAR : isa >= FL_ISA_AVX512 ? FL_ISA_AVX512 : isa;
#else
    return FL_ISA_SCALAR;
#endif
}
