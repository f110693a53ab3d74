/* twins.h — the registry of CPU twins, for `fp8lab ulp --impl NAME` and the accuracy tables.
 *
 * Each entry runs one CPU twin (bit-identical to its CUDA kernel) on arrays of encodings and names the
 * MPFR reference function (reference/ref.h) it approximates, with the reference parameters that make
 * the two compute the same mathematical function:
 *   - coefficients: the kernels use the fp32 roundings of 1/r (a_i = RN32(1/3) for r = 3); ref_params
 *     names those exact values (a1=0x1.555556p-2, ...), so a report measures the kernel's arithmetic, not
 *     the coefficient rounding (<= 2^-25 relative);
 *   - PolyNorm's eps is RN32(1e-6) = 0x1.0c6f7ap-20, named the same way.
 * Derivative entries (derivative != 0) compute the partial derivative w.r.t. input `ref_wrt` (the
 * derivative-th input, 1-based) by running the backward kernel with an upstream gradient of exactly 1
 * (dx = 1 * f'(x): the same bits as the gradient path); row-wise derivatives (PolyNorm) are VJPs and take
 * the upstream gradient dy as their last input (n_inputs counts it), like the reference's row evaluators.
 * FP8 outputs use scale 1 (the value itself, RNE, saturating); FP8 inputs scale_inv 1.
 * The type describes any implementation over arrays of encodings: experiments/ulp/examples.c uses it
 * for the plain-C examples (common shortcuts, not kernels) that `fp8lab ulp --impl NAME` also scores,
 * and experiments/ulp/ulp_impls.h looks up both kinds; this registry and fl_twin_find hold kernels only.
 */
#ifndef FL_TWINS_H
#define FL_TWINS_H

#ifdef __cplusplus
extern "C" {
#endif

#include "fl_format.h"

typedef struct {
    const char *name;       /* e.g. "polyrelu3_bf16", "swiglu_bf16_e4m3", "polynorm3_bwd_bf16" */
    const char *ref_fn;     /* the MPFR reference function it computes (relu, silu, swiglu, ...) */
    const char *ref_params; /* e.g. "order=3,..." -- the reference parameters that match */
    int derivative;         /* 0 forward; else which input it differentiates (1-based; see ref_wrt) */
    const char *ref_wrt;    /* NULL or "x", "g", "u" */
    int n_inputs;           /* 1, 2 (gate, up / x, dy), 3 (gate, up, scale) */
    fl_format in_fmt[3];    /* format of each input's encodings */
    fl_format out_fmt;
    int rowwise;            /* 1: inputs are rows of length row_len (polynorm); `fp8lab ulp --impl NAME
                               --sample ROWS` runs them on seeded rows (experiments/ulp/ULP.md section 6) */
    /* out[i] = encoding; in[k][i] = encodings of input k.  n elements (rowwise: n = rows*row_len). */
    void (*run)(uint32_t *out, const uint32_t *const *in, size_t n, size_t row_len);
    const char *summary;
} fl_twin;

extern const fl_twin fl_twins[];
extern const size_t fl_twin_count;

/* The entry called name, or NULL. */
const fl_twin *fl_twin_find(const char *name);

#ifdef __cplusplus
}
#endif

#endif /* FL_TWINS_H */
