// convert.cu — float32 -> FP8/BF16 conversion kernels.
//
// The element function is fl_round.h's fl_encode_f32_bits, the same source the CPU conversions
// (numerics/convert.c) run, so a kernel's output is bit-identical to fl_convert_from_f32 by
// construction.  The format descriptor is a compile-time constant (FL_DESC_*), so the generic
// routine folds into straight-line integer code.  Stochastic rounding draws its bits from
// fl_round.h's fl_sr_bits stream (same seed, same element index -> same bits as the CPU).
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>

#include <type_traits>

extern "C" {
#include "fl_round.h"
}
#include "cuda_check.h"

// Storage of a format's codes: one byte for the FP8 formats, two for bf16 / fp16.
template <int FMT> using fl_code_t = typename std::conditional<FMT == FL_FMT_E4M3 || FMT == FL_FMT_E5M2, uint8_t, uint16_t>::type;

template <int FMT>
__global__ void fl_convert_f32_kernel(fl_code_t<FMT> *__restrict__ dst, const float *__restrict__ src, size_t n,
                                      int mode, int ovf, uint64_t seed, uint64_t offset)
{
    const fl_format_desc d = FMT == FL_FMT_E4M3 ? (fl_format_desc)FL_DESC_E4M3
                           : FMT == FL_FMT_E5M2 ? (fl_format_desc)FL_DESC_E5M2
                           : FMT == FL_FMT_BF16 ? (fl_format_desc)FL_DESC_BF16
                                                : (fl_format_desc)FL_DESC_FP16;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const uint32_t r = mode == FL_RND_SR ? fl_sr_bits(seed, offset + i) : 0u;
        dst[i] = (fl_code_t<FMT>)fl_encode_f32_bits(&d, __float_as_uint(src[i]), (fl_rounding)mode, (fl_overflow)ovf, r);
    }
}

template <int FMT>
static int fl_convert_launch(void *dst, const float *src, size_t n, int mode, int ovf, uint64_t seed, uint64_t offset,
                             cudaStream_t stream)
{
    const int threads = 256;
    const int blocks = (int)((n + threads - 1) / threads < 65535 ? (n + threads - 1) / threads : 65535);
    fl_convert_f32_kernel<FMT><<<blocks, threads, 0, stream>>>((fl_code_t<FMT> *)dst, src, n, mode, ovf, seed, offset);
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}

// Launcher: device pointers; returns 0, or -1 after printing the failing call.
extern "C" int fl_cuda_convert_from_f32(void *dst, int to, const float *src, size_t n, int mode, int ovf,
                                        uint64_t seed, uint64_t offset, cudaStream_t stream)
{
    if (n == 0)
        return 0;
    switch (to) {
    case FL_FMT_E4M3: return fl_convert_launch<FL_FMT_E4M3>(dst, src, n, mode, ovf, seed, offset, stream);
    case FL_FMT_E5M2: return fl_convert_launch<FL_FMT_E5M2>(dst, src, n, mode, ovf, seed, offset, stream);
    case FL_FMT_BF16: return fl_convert_launch<FL_FMT_BF16>(dst, src, n, mode, ovf, seed, offset, stream);
    case FL_FMT_FP16: return fl_convert_launch<FL_FMT_FP16>(dst, src, n, mode, ovf, seed, offset, stream);
    default:
        fprintf(stderr, "fl_cuda_convert_from_f32: format %d has no kernel\n", to);
        return -1;
    }
}
