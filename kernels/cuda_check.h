/* cuda_check.h — the checking macros every CUDA launcher uses: a failing CUDA or cuBLAS call
 * prints its status, file, line and the statement itself, and the launcher returns -1. */
#ifndef FL_CUDA_CHECK_H
#define FL_CUDA_CHECK_H

#include <cuda_runtime.h>
#include <stdio.h>

#define FL_CUDA_CHECK(call)                                                                        \
    do {                                                                                           \
        cudaError_t err_ = (call);                                                                 \
        if (err_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorString(err_), __FILE__,  \
                    __LINE__, #call);                                                              \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

/* A launcher's precondition, for the launchers' own macros: when cond is false, print file, line, who
   (a "name: " prefix, or ""), text (the caller's #cond: the condition as written) and the printf-style
   message, and return -1. */
#define FL_REQUIRE(who, cond, text, ...)                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: %sprecondition failed: %s: ", __FILE__, __LINE__, who, text); \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

#define FL_CUBLAS_CHECK(call)                                                                      \
    do {                                                                                           \
        cublasStatus_t st_ = (call);                                                               \
        if (st_ != CUBLAS_STATUS_SUCCESS) {                                                        \
            fprintf(stderr, "cuBLAS error %s (%d) at %s:%d: %s\n", cublasLtGetStatusString(st_),   \
                    (int)st_, __FILE__, __LINE__, #call);                                          \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

#endif /* FL_CUDA_CHECK_H */
