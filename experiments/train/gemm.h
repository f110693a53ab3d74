/* gemm.h — the training harness's float32 GEMM, in one summation order on every CPU.
 *
 *   C (M, N) = op(A) op(B) + beta C, row-major, op(A) (M, K) and op(B) (K, N).
 *   op(A) is A stored (M, K) with lda >= K (FL_TRAIN_GEMM_N), or the transpose of A stored (K, M)
 *   with lda >= M (FL_TRAIN_GEMM_T); op(B) likewise, B stored (K, N) or (N, K).
 *
 * Every element of C, whatever the instruction set, blocking or thread count:
 *   s = beta == 0 ? +0.0f : beta * C[i][j];     (beta 0: C is not read, it may hold anything;
 *                                                 beta 1: s starts at C exactly)
 *   for k = 0, 1, ..., K-1 (ascending):  s = fmaf(op(A)[i][k], op(B)[k][j], s);
 *   C[i][j] = s
 * The vector kernels run this chain for 16 (AVX-512) or 8 (AVX2) elements of a row of C side by
 * side, one fused multiply-add per element and k; a sum over k is never reordered, vectorised or cut
 * into partial sums added later.  So every path gives the bits of the plain fmaf loop
 * (tests/test_train_gemm.c compares them byte for byte at every level the machine has), unlike a
 * BLAS, whose kernels sum in an order that depends on the CPU (OpenBLAS's SkylakeX and Haswell kernels
 * differ).  One exception: where two different NaNs meet in one fma, x86 returns the one in the
 * instruction's first source, and which operand that is is the compiler's choice; a NaN result is a
 * NaN on every path, its payload may differ.
 *
 * The instruction set is fl_convert_isa()'s (convert.h: the CPU's best, capped by FP8LAB_ISA or
 * fl_convert_set_isa): AVX-512 and AVX2 (with FMA) kernels built with GCC's target attributes, else
 * plain fmaf loops.  Single-threaded: a caller splits C among its threads (model.c: sgemm_tiled).
 */
#ifndef FL_TRAIN_GEMM_H
#define FL_TRAIN_GEMM_H

#include <stddef.h>

typedef enum { FL_TRAIN_GEMM_N, FL_TRAIN_GEMM_T } fl_train_gemm_op;

void fl_train_gemm(fl_train_gemm_op ta, fl_train_gemm_op tb, size_t M, size_t N, size_t K, const float *A, size_t lda,
                   const float *B, size_t ldb, float beta, float *C, size_t ldc);

/* The same product on the OpenMP threads: C cut into tiles along its longer side (gemm.c), each tile one
   fl_train_gemm call, so the bits do not depend on the thread count.  kc > 0 (--gemm-kchunk): every sum
   over K > kc cut into blocks of kc terms, each block one fma chain from +0, added to the accumulator
   (beta C) in block order; the same products in another order of additions. */
void fl_train_gemm_tiled(size_t kc, fl_train_gemm_op ta, fl_train_gemm_op tb, size_t M, size_t N, size_t K,
                         const float *A, size_t lda, const float *B, size_t ldb, float beta, float *C, size_t ldc);

#endif /* FL_TRAIN_GEMM_H */
