// train_step.cu — the training-step kernels (CPU twins: kernels/train_step.c; element functions and
// their contract: kernels/train_step.h).
//
// AdamW: one thread per element in a grid-stride loop, each element through the same two element
// functions as the twin; 16 bytes read and 12 written per element (p, g, m, v in; p, m, v out).
#include "train_step.h"
#include "cuda_check.h"

#include <cuda_runtime.h>
#include <stdio.h>

namespace {

__global__ void __launch_bounds__(256) adamw_kernel(float *__restrict__ p, const float *__restrict__ g,
                                                    float *__restrict__ m, float *__restrict__ v, size_t n,
                                                    fl_adamw_hp h)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float mi = m[i], vi = v[i], mh;
        const float sv = fl_adamw_moments(&mi, &vi, g[i], &h, &mh);
        p[i] = fl_adamw_param(p[i], mh, fl_sqrtf(sv), &h);
        m[i] = mi;
        v[i] = vi;
    }
}

} // namespace

extern "C" int fl_cuda_adamw(float *p, const float *g, float *m, float *v, size_t n, const fl_adamw_hp *h, void *stream)
{
    if (!n)
        return 0;
    if (!p || !g || !m || !v || !h) {
        fprintf(stderr, "fl_cuda_adamw: a NULL pointer\n");
        return -1;
    }
    const size_t blocks = (n + 255) / 256;
    adamw_kernel<<<(unsigned)(blocks < 65535 * 4 ? blocks : 65535 * 4), 256, 0, (cudaStream_t)stream>>>(p, g, m, v, n, *h);
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}
