/* twins.h — the registry of CPU twins, for `fp8lab ulp --impl NAME`, the accuracy table and the GPU checks.
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
 *
 * Every registry entry also says which kernel it mirrors (fl_twin_kernel_of): the CPU run function and
 * the device runner (fl_cuda_twin_run, kernels/twins.cu) are both driven by it, so the GPU tests and the
 * device sweep loop over fl_twins instead of keeping their own lists.  How `make twin-table` measures an
 * entry (fl_twin_table_mode) follows from its formats.  A new twin is one line in kernels/twins.c.
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

/* ---- the kernel an entry mirrors ------------------------------------------------------------------
 * The kernels.h call (or, for the element functions, the activations.h function alone) and the
 * PolyReLU / PolyNorm order; the formats are the entry's: data input in_fmt[0] (gate and up share it),
 * output out_fmt; a derivative's upstream gradient of exactly 1 has the output's format, a VJP's dy is
 * input 2 (in_fmt[1]).
 * Adding a kind means a case in twins.c's run_kernel and in twins.cu's device runner (which
 * static_asserts FL_TWIN_KERNEL_COUNT so that it cannot be forgotten). */
typedef enum {
    FL_TWIN_SILU,         /* fl_silu_f32 alone (the element function; no kernel of its own) */
    FL_TWIN_SILU_GRAD,    /* fl_silu_grad_f32 alone */
    FL_TWIN_SIGMOID,      /* fl_sigmoid_f32 alone */
    FL_TWIN_POLYRELU_FWD, /* fl_polyrelu_fwd */
    FL_TWIN_POLYRELU_BWD, /* fl_polyrelu_bwd, dy = 1, no coefficient gradients */
    FL_TWIN_POLYNORM_FWD, /* fl_polynorm_fwd, eps 1e-6f */
    FL_TWIN_POLYNORM_BWD, /* fl_polynorm_bwd (the VJP: dy is input 2), eps 1e-6f */
    FL_TWIN_SWIGLU_FWD,   /* fl_swiglu_fwd */
    FL_TWIN_SWIGLU_BWD_G, /* fl_swiglu_bwd's dg, dy = 1 */
    FL_TWIN_SWIGLU_BWD_U, /* fl_swiglu_bwd's du, dy = 1 */
    FL_TWIN_SMOOTH_FWD,   /* fl_smooth_swiglu_fwd: n tokens of one channel, given per-token scales
                             (input 3, e8m0: a power of two) */
    FL_TWIN_KERNEL_COUNT
} fl_twin_kernel_id;

typedef struct {
    fl_twin_kernel_id id;
    int order; /* PolyReLU / PolyNorm: r (2..4); else 0 */
} fl_twin_kernel;

/* The kernel of a registry entry; NULL for anything else (the plain-C examples). */
const fl_twin_kernel *fl_twin_kernel_of(const fl_twin *t);
/* "silu", "polyrelu_fwd", ... ("?" out of range). */
const char *fl_twin_kernel_name(fl_twin_kernel_id id);

/* ---- how the accuracy table measures an entry (`make twin-table`, experiments/ulp/twin_table.sh) ----
 * Exhaustive where the input space allows: at most 2^16 inputs (any single input of <= 16 bits, e4m3
 * pairs), or 2^32 pairs of <= 16-bit inputs where `fp8lab ulp` judges them by its fast path (the caller
 * says so: fast, from experiments/ulp; the SwiGLU forward).  Otherwise a fixed-seed sample of
 * FL_TWIN_TABLE_SAMPLE inputs drawn uniformly from the whole input space (binary32 inputs, derivatives of
 * pairs, the three inputs of Smooth-SwiGLU), and row-wise entries FL_TWIN_TABLE_ROWS seeded rows of
 * FL_TWIN_TABLE_ROW_LEN elements (x ~ N(0, 1), ULP.md section 6). */
#define FL_TWIN_TABLE_SAMPLE (1u << 20)
#define FL_TWIN_TABLE_SEED 1
#define FL_TWIN_TABLE_ROWS 64
#define FL_TWIN_TABLE_ROW_LEN 4096

typedef enum { FL_TWIN_MODE_EXHAUSTIVE, FL_TWIN_MODE_SAMPLE, FL_TWIN_MODE_ROWS } fl_twin_mode_kind;

typedef struct {
    fl_twin_mode_kind kind;
    uint64_t count; /* inputs (exhaustive: the whole space; sample: drawn) or rows */
    uint64_t seed;  /* sample and rows */
    long row_len;   /* rows */
} fl_twin_mode;

/* Bits of the input space: the sum of the inputs' format widths (row-wise entries: of one element). */
int fl_twin_space_bits(const fl_twin *t);
/* The table's mode for t; fast: `fp8lab ulp` decides t's outputs by its fast path. */
void fl_twin_table_mode(fl_twin_mode *m, const fl_twin *t, int fast);
/* "exhaustive", "sample", "rows". */
const char *fl_twin_mode_name(fl_twin_mode_kind k);
/* The mode as `fp8lab ulp --impl NAME` arguments, space-separated ("--exhaustive", "--sample 1048576
   --seed 1", ...).  Returns snprintf's count. */
int fl_twin_mode_args(char *buf, size_t n, const fl_twin_mode *m);

/* ---- the device side (kernels/twins.cu, in libfp8lab_cuda.a only) ---------------------------------
 * Runs on the GPU the kernel that registry entry t mirrors, on the same host arrays of encodings as
 * t->run (out[i], in[k][i], n elements; row-wise: rows of row_len), with the device arrays starting
 * offset elements into their allocations (1: not 16-byte aligned, the kernels' element-wise path).
 * Element functions, and fp32 data (the launchers instantiate bf16 / e4m3 / e5m2), run through the
 * runner's own kernel over the same FL_HD functions.  Returns 0, or -1 after printing why (not a
 * registry entry, a kernel kind without a device runner, a failed launch or CUDA call). */
int fl_cuda_twin_run(const fl_twin *t, uint32_t *out, const uint32_t *const *in, size_t n, size_t row_len,
                     size_t offset);

#ifdef __cplusplus
}
#endif

#endif /* FL_TWINS_H */
