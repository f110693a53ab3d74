// row_tile.h — per-row sums in the twins' order on the device (CUDA only: kernels/train_step.cu,
// kernels/step_ops.cu).  A warp owns 32 rows; it reads 32 x 32 tiles of them coalesced into shared
// memory (a padded row of 33 against bank conflicts), and lane j adds row j's values in column order.
#ifndef FL_ROW_TILE_H
#define FL_ROW_TILE_H

#ifdef __CUDACC__
#include <stddef.h>

// acc, then acc = add(acc, x[r][c]) for c = 0, 1, ..., C - 1 in order, for row r = r0 + lane of the
// row-major (R, C) x (lanes past R get their sum over zeros).  t: the warp's tile; all 32 lanes call it.
template <typename Acc, typename Add>
__device__ inline Acc fl_row_sum_tiled(float (*t)[33], const float *__restrict__ x, size_t r0, size_t R, size_t C,
                                       int lane, Acc acc, Add add)
{
    for (size_t c0 = 0; c0 < C; c0 += 32) {
        for (int j = 0; j < 32; j++)
            t[j][lane] = r0 + j < R && c0 + lane < C ? x[(r0 + j) * C + c0 + lane] : 0.0f;
        __syncwarp();
        for (int c = 0; c < 32 && c0 + c < C; c++)
            acc = add(acc, t[lane][c]);
        __syncwarp();
    }
    return acc;
}
#endif

#endif // FL_ROW_TILE_H
