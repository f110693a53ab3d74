/* cuda_test.h — what the CUDA test and benchmark programs share on top of check.h: a failing CUDA
 * runtime or cuBLAS call prints its status, file, line and the statement, and the program exits 1
 * (kernels/cuda_check.h is the launchers' version, which returns -1 instead). */
#ifndef FL_CUDA_TEST_H
#define FL_CUDA_TEST_H

#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        CHECK(e_ == cudaSuccess, "CUDA %s: %s", cudaGetErrorString(e_), #call);                    \
    } while (0)

#define LT(call)                                                                                   \
    do {                                                                                           \
        int s_ = (int)(call);                                                                      \
        CHECK(s_ == 0, "cuBLAS status %d: %s", s_, #call);                                         \
    } while (0)

#endif /* FL_CUDA_TEST_H */
