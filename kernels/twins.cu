// twins.cu — the device side of the CPU-twin registry (twins.h): fl_cuda_twin_run runs on the GPU the
// kernel that a registry entry mirrors, on the entry's own arrays of encodings, so that the GPU tests
// (tests/test_gpu_twins.cu) and the device sweep (tests/gpu_bench.cu) compare every entry with its CPU
// twin from the registry alone, with no list of their own.
//
// The kernels run through their launchers (kernels.h) with the twins' settings (twins.c): scales 1, an
// upstream gradient of exactly 1, no coefficient gradients, eps 1e-6f, per-token given scales for
// Smooth-SwiGLU.  The element functions alone, and fp32 data (the launchers instantiate bf16 / e4m3 /
// e5m2 only), run through element_kernel: the same FL_HD functions, decode and encode as the CPU twin's
// loops, one element per thread.
#include "twins.h" // first: fl_format.h's declarations get C linkage

#include <string.h>
#include <vector>

#include "kernels.h"

namespace {

// Every kind is a case of fl_cuda_twin_run below: adding a kind to twins.h stops this file compiling
// until its device runner is written (and this count raised).
static_assert(FL_TWIN_KERNEL_COUNT == 11, "a new twin kernel kind needs its case in fl_cuda_twin_run");

size_t storage_bytes(fl_format f)
{
    return f == FL_FMT_FP32 ? 4 : (f == FL_FMT_BF16 || f == FL_FMT_FP16) ? 2 : 1;
}

// A device array: n elements of format f starting `offset` elements into the allocation.
struct darray {
    void *base = nullptr;
    size_t at = 0;
    darray() = default;
    darray(const darray &) = delete;
    darray &operator=(const darray &) = delete;
    ~darray()
    {
        if (base)
            cudaFree(base);
    }
    void *p() const { return base ? (char *)base + at : nullptr; }
};

// Allocates a and fills it with the encodings codes[0..n) (NULL: n copies of code).
int upload(darray &a, fl_format f, size_t n, size_t offset, const uint32_t *codes, uint32_t code)
{
    const size_t b = storage_bytes(f);
    a.at = offset * b;
    FL_CUDA_CHECK(cudaMalloc(&a.base, n * b + a.at + 16));
    std::vector<uint8_t> h(n * b);
    for (size_t i = 0; i < n; i++)
        memcpy(&h[i * b], codes ? &codes[i] : &code, b); // little-endian: the code's low bytes
    FL_CUDA_CHECK(cudaMemcpy(a.p(), h.data(), n * b, cudaMemcpyHostToDevice));
    return 0;
}

int download(uint32_t *out, const darray &a, fl_format f, size_t n)
{
    const size_t b = storage_bytes(f);
    std::vector<uint8_t> h(n * b);
    FL_CUDA_CHECK(cudaMemcpy(h.data(), a.p(), n * b, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) {
        uint32_t v = 0;
        memcpy(&v, &h[i * b], b);
        out[i] = v;
    }
    return 0;
}

__device__ uint32_t load_code(const void *p, int bytes, size_t i)
{
    return bytes == 4 ? ((const uint32_t *)p)[i] : bytes == 2 ? ((const uint16_t *)p)[i] : ((const uint8_t *)p)[i];
}

__device__ void store_code(void *p, int bytes, size_t i, uint32_t c)
{
    if (bytes == 4)
        ((uint32_t *)p)[i] = c;
    else if (bytes == 2)
        ((uint16_t *)p)[i] = (uint16_t)c;
    else
        ((uint8_t *)p)[i] = (uint8_t)c;
}

// The CPU twins' element loops on the device.  Element functions alone (twins.c run_unary): the value
// encoded RNE without saturation.  PolyReLU / SwiGLU forward on fp32 data (kernels.h fl_kin_get /
// fl_kout_put): inputs times scale_inv 1, the value times scale 1, stored as it is.
__global__ void element_kernel(void *y, const void *x0, const void *x1, size_t n, fl_twin_kernel_id id, fl_poly_coef c,
                               fl_format_desc di, fl_format_desc dout)
{
    const int bi = di.bits / 8, bo = dout.bits / 8;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float a = fl_decode_f32(&di, load_code(x0, bi, i));
        float v = 0.0f;
        int raw = 1;
        switch (id) {
        case FL_TWIN_SILU: v = fl_silu_f32(a), raw = 0; break;
        case FL_TWIN_SILU_GRAD: v = fl_silu_grad_f32(a), raw = 0; break;
        case FL_TWIN_SIGMOID: v = fl_sigmoid_f32(a), raw = 0; break;
        case FL_TWIN_POLYRELU_FWD: v = fl_polyrelu_f32(&c, a * 1.0f) * 1.0f; break;
        case FL_TWIN_SWIGLU_FWD: v = fl_swiglu_f32(a * 1.0f, fl_decode_f32(&di, load_code(x1, bi, i)) * 1.0f) * 1.0f; break;
        default: break; // run_element takes only the kinds above
        }
        store_code(y, bo, i, raw ? fl_f32_bits(v) : fl_encode_f32_bits(&dout, fl_f32_bits(v), FL_RND_NE, FL_OVF_NOSATURATE, 0));
    }
}

int run_element(const darray &y, const darray &x0, const darray *x1, size_t n, fl_twin_kernel_id id, const fl_poly_coef &c,
                fl_format fin, fl_format fout)
{
    const size_t blocks = (n + 255) / 256;
    element_kernel<<<(unsigned)(blocks < 65535 ? blocks : 65535), 256>>>(y.p(), x0.p(), x1 ? x1->p() : nullptr, n, id, c,
                                                                         *fl_format_get(fin), *fl_format_get(fout));
    FL_CUDA_CHECK(cudaGetLastError());
    return 0;
}

fl_kin kin(const darray &a, fl_format f) { return fl_kin{ a.p(), f, nullptr }; }
fl_kout kout(const darray &a, fl_format f) { return fl_kout{ a.p(), f, nullptr, nullptr }; }

} // namespace

extern "C" int fl_cuda_twin_run(const fl_twin *t, uint32_t *out, const uint32_t *const *in, size_t n, size_t row_len,
                                size_t offset)
{
    const fl_twin_kernel *k = fl_twin_kernel_of(t);
    FL_LAUNCH_REQUIRE(k, "'%s' is not an entry of the twin registry (kernels/twins.c)", t->name);
    FL_LAUNCH_REQUIRE(!t->rowwise || (row_len && n % row_len == 0), "%s: rows of %zu for %zu elements", t->name, row_len, n);
    if (n == 0)
        return 0;
    const fl_format fin = t->in_fmt[0], fout = t->out_fmt;
    const int f32 = fin == FL_FMT_FP32 && fout == FL_FMT_FP32;
    const fl_poly_coef c = fl_poly_coef_default(k->order ? k->order : 3);
    const size_t rows = row_len ? n / row_len : 0;
    darray x0, x1, x2, y, y2;
    if (upload(x0, fin, n, offset, in[0], 0) || upload(y, fout, n, offset, nullptr, 0))
        return -1;
    const uint32_t one = fl_encode_f32(fout, 1.0f, FL_RND_NE, FL_OVF_SATURATE, 0); // a derivative's dy
    int rc = -1;
    switch (k->id) {
    case FL_TWIN_SILU:
    case FL_TWIN_SILU_GRAD:
    case FL_TWIN_SIGMOID:
        rc = run_element(y, x0, nullptr, n, k->id, c, fin, fout);
        break;
    case FL_TWIN_POLYRELU_FWD:
        rc = f32 ? run_element(y, x0, nullptr, n, k->id, c, fin, fout)
                 : fl_cuda_polyrelu_fwd(kout(y, fout), kin(x0, fin), n, &c, nullptr);
        break;
    case FL_TWIN_POLYRELU_BWD:
        rc = upload(x1, fout, n, offset, nullptr, one) ||
             fl_cuda_polyrelu_bwd(kout(y, fout), nullptr, nullptr, kin(x0, fin), kin(x1, fout), n, &c, nullptr);
        break;
    case FL_TWIN_POLYNORM_FWD:
        rc = fl_cuda_polynorm_fwd(kout(y, fout), kin(x0, fin), rows, row_len, &c, 1e-6f, nullptr);
        break;
    case FL_TWIN_POLYNORM_BWD:
        rc = upload(x1, t->in_fmt[1], n, offset, in[1], 0) ||
             fl_cuda_polynorm_bwd(kout(y, fout), nullptr, nullptr, kin(x0, fin), kin(x1, t->in_fmt[1]), rows, row_len, &c, 1e-6f,
                                  nullptr);
        break;
    case FL_TWIN_SWIGLU_FWD:
        rc = upload(x1, fin, n, offset, in[1], 0) ||
             (f32 ? run_element(y, x0, &x1, n, k->id, c, fin, fout)
                  : fl_cuda_swiglu_fwd(kout(y, fout), kin(x0, fin), kin(x1, fin), n, nullptr));
        break;
    case FL_TWIN_SWIGLU_BWD_G:
    case FL_TWIN_SWIGLU_BWD_U: {
        const int g = k->id == FL_TWIN_SWIGLU_BWD_G;
        rc = upload(x1, fin, n, offset, in[1], 0) || upload(x2, fout, n, offset, nullptr, one) ||
             upload(y2, fout, n, offset, nullptr, 0) ||
             fl_cuda_swiglu_bwd(kout(g ? y : y2, fout), kout(g ? y2 : y, fout), kin(x0, fin), kin(x1, fin), kin(x2, fout), n,
                                nullptr);
        break;
    }
    case FL_TWIN_SMOOTH_FWD: {
        // n tokens of one channel with given per-token scales: input 3, e8m0 codes (powers of two)
        std::vector<uint32_t> s(n);
        for (size_t i = 0; i < n; i++)
            s[i] = fl_f32_bits(fl_decode(FL_FMT_E8M0, in[2][i]));
        rc = upload(x1, fin, n, offset, in[1], 0) || upload(x2, FL_FMT_FP32, n, 0, s.data(), 0) ||
             fl_cuda_smooth_swiglu_fwd(kout(y, fout), (float *)x2.p(), kin(x0, fin), kin(x1, fin), n, 1, FL_SMOOTH_TOKEN, 0,
                                       nullptr);
        break;
    }
    case FL_TWIN_KERNEL_COUNT:
        break;
    }
    if (rc) {
        fprintf(stderr, "fl_cuda_twin_run: %s (%s) did not run on the device\n", t->name, fl_twin_kernel_name(k->id));
        return -1;
    }
    FL_CUDA_CHECK(cudaDeviceSynchronize());
    return download(out, y, fout, n);
}
