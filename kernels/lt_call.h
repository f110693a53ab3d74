// lt_call.h — what cuBLASLt hands out for one matmul call, released in the destructor on every path
// (C++ only: kernels/gemm_fp8.cu, kernels/step_ops.cu).
#ifndef FL_LT_CALL_H
#define FL_LT_CALL_H

#include <cublasLt.h>
#include <initializer_list>
#include <stdint.h>
#include <stdio.h>

#include "cuda_check.h" /* FL_CUBLAS_CHECK */

namespace fl {
// The alignment cuBLASLt may assume for a matrix: the largest power of two up to 256 dividing its address,
// its leading dimension in bytes (every column starts at such an offset) and, with more than one problem,
// its batch stride in bytes.  cuBLASLt assumes 256 unless the heuristic is told less (pick's align); an
// algorithm picked for 256 may refuse a matrix aligned less at the matmul (CUBLAS_STATUS_NOT_SUPPORTED).
inline uint32_t align_of(const void *p, size_t ld_bytes, size_t stride_bytes, size_t batch)
{
    uintptr_t a = (uintptr_t)p | 256u | (uintptr_t)ld_bytes;
    if (batch > 1)
        a |= (uintptr_t)stride_bytes;
    return (uint32_t)(a & (~a + 1)); // the lowest set bit
}


// Everything cublasLt hands out for one call, released in the destructor.
struct lt_call {
    cublasLtHandle_t handle = nullptr;
    bool own_handle = false;
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    ~lt_call()
    {
        if (pref)
            cublasLtMatmulPreferenceDestroy(pref);
        for (cublasLtMatrixLayout_t l : { d, c, b, a })
            if (l)
                cublasLtMatrixLayoutDestroy(l);
        if (op)
            cublasLtMatmulDescDestroy(op);
        if (own_handle && handle)
            cublasLtDestroy(handle);
    }

    // cuBLASLt's first algorithm for the descriptors within ws bytes of workspace, into *heur; align (A, B,
    // C, D in bytes, or nullptr: cuBLASLt's default of 256) is the operands' guaranteed alignment.  0, or
    // -1 after a message naming who.
    int pick(size_t ws, const uint32_t *align, cublasLtMatmulHeuristicResult_t *heur, const char *who)
    {
        FL_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
        FL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
        static const cublasLtMatmulPreferenceAttributes_t al[4] = {
            CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
            CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES
        };
        for (int k = 0; align && k < 4; k++)
            FL_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, al[k], &align[k], sizeof align[k]));
        *heur = {};
        int found = 0;
        FL_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle, op, a, b, c, d, pref, 1, heur, &found));
        if (found == 0) {
            fprintf(stderr, "%s: cuBLASLt has no algorithm for this problem\n", who);
            return -1;
        }
        return 0;
    }
};

} // namespace fl

#endif // FL_LT_CALL_H
