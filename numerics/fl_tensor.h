/* fl_tensor.h — the one way a command reads a tensor of real data as float32 (R, C).
 *
 * Rows are every leading dimension, C the last one (a 1-D array is one row, a 0-d array 1 x 1): for
 * activations, rows = tokens and C = the hidden size.  Accepted:
 *   .safetensors  F32, F16, BF16, F8_E4M3, F8_E5M2 (decoded exactly) and F64 (rounded to float32);
 *                 `tensor` names one, else the file's first floating-point tensor is taken;
 *   .npy          float16, float32, float64, C order.
 * require_finite: refuse data with NaN or Inf (or float64 values that overflow float32), with the
 * count in the message.  Returns 0 with *x malloc'd (R * C floats), or -1 with *x NULL and err holding
 * one line that names the file ("x.npy: need a non-empty float16/32/64 array, got int32 ..."). */
#ifndef FL_TENSOR_H
#define FL_TENSOR_H

#include <stddef.h>

int fl_tensor_load_f32(float **x, size_t *R, size_t *C, const char *path, const char *tensor, int require_finite,
                       char *err, size_t errlen);

#endif /* FL_TENSOR_H */
