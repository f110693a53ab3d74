// lt_call.h — what cuBLASLt hands out for one matmul call, released in the destructor on every path
// (C++ only: kernels/gemm_fp8.cu, kernels/step_ops.cu).
#ifndef FL_LT_CALL_H
#define FL_LT_CALL_H

#include <cublasLt.h>
#include <initializer_list>

namespace fl {

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
};

} // namespace fl

#endif // FL_LT_CALL_H
