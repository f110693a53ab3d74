/* gemm_fp8.h — FP8 GEMM: a cuBLASLt wrapper (gemm_fp8.cu) and its CPU twin (gemm_fp8.c), with an
 * opt-in emulation of Hopper's limited-precision "fast accumulation".
 *
 * Layout (cuBLAS column-major terms; the "TN" layout that FP8 on sm_89 / sm_90 requires):
 *   A  (K, M) column-major, lda >= K: column m of A is row m of op(A) = A^T, contiguous in k
 *   B  (K, N) column-major, ldb >= K: column n of B is contiguous in k
 *   D  (M, N) column-major, ldd >= M;  C likewise (ldc >= M)
 * In row-major words: A is an (M, K) activation / weight matrix, B an (N, K) one, and D^T = B A^T;
 * every dot product runs over contiguous K.
 *
 * Semantics (cuBLASLt's: the cuBLAS documentation, "cublasLtMatmul" and its FP8 attributes
 * CUBLASLT_MATMUL_DESC_{A,B,D}_SCALE_POINTER and AMAX_D_POINTER; TransformerEngine's FP8 GEMM uses it
 * this way):
 *   acc[m, n] = sum_k a(k, m) b(k, n)                     exact products, fp32 accumulation
 *   v[m, n]   = (alpha * a_scale * b_scale) * acc + beta * C[m, n]     (fp32)
 *   amax_D    = max |v|  (before d_scale)
 *   D         = encode(v * d_scale)  for FP8 D (RNE, saturating), encode(v) for bf16 (RNE), v for fp32
 * a_scale, b_scale are dequantization factors (TransformerEngine's scale_inv); NULL means 1.
 * Types: A, B e4m3 x e4m3 (forward), e5m2 x e4m3 or e4m3 x e5m2 (backward: dgrad / wgrad with e5m2
 * gradients; e5m2 x e5m2 is not supported by cuBLASLt); D fp32 (C fp32), bf16 or e4m3 (C bf16).
 *
 * The twin's accumulation (fl_gemm_acc):
 *   FL_GEMM_ACC_SGEMM     decoded fp32 matrices through OpenBLAS sgemm.  Products of decoded FP8 values
 *                         are exact in fp32 (at most 4 x 4 significant bits, exponents within
 *                         [-25, 30]), so fma(a, b, s) = RN(s + ab): only the additions round, in
 *                         OpenBLAS's (blocked) order.
 *   FL_GEMM_ACC_SEQ       a plain sequential fp32 loop over k (deterministic everywhere).
 *   FL_GEMM_ACC_FAST_EMU  fl_fast_accum_dot (below) for every dot product.
 * Bound between any two fp32-accumulating implementations (cuBLASLt without fast accumulation, the
 * twin): each computes sum_k p_k with |err| <= (K - 1) u sum |p_k| (first order, any order of
 * additions), u = 2^-24; the epilogue adds <= 3 roundings (u |v| each).  So for fp32 D
 *   |D_gpu - D_twin| <= fl_gemm_fp32_bound(K, S, |v|) = 2 ((K + 2) u S' + 3 u |v|),
 *   S' = |alpha a_scale b_scale| sum_k |a b|,
 * and for bf16 / e4m3 D add one ulp of the output format at |v| (the two sides may round a value near a
 * midpoint to different neighbours).
 *
 * Fast-accumulation model (fl_fast_accum_dot; DeepSeek-V3 §3.3: "about 14 bits", promotion every
 * N_C = 128 elements fixes it).  The tensor core's accumulator T starts at 0.  For each group of
 * `group` = 32 consecutive products p_k: let E = max floor(log2 |t|) over the nonzero terms t of
 * {T, p_k...}; every term is truncated toward zero to a multiple of 2^(E - bits + 1) (bits = 14: the
 * largest keeps 14 significant bits), the truncated terms are added exactly, and T is that sum (exact
 * in fp32 for bits <= 18: 33 terms below 2^(E+1) on a 2^(E-13) grid need < 20 bits).  Every `promote`
 * products (a multiple of group; 0 = never, the cuBLASLt FAST_ACCUM behaviour) the accumulator is
 * promoted: total = RN32(total + T), T = 0; at the end total = RN32(total + T).  Non-finite products
 * make the result the plain fp32 sum (NaN / Inf propagate).  This is an error model of our own,
 * bit-exact to this description; it is not claimed to match the hardware bit for bit.
 */
#ifndef FL_GEMM_FP8_H
#define FL_GEMM_FP8_H

#ifdef __cplusplus
extern "C" {
#endif

#include "fl_format.h"

typedef enum {
    FL_GEMM_ACC_SGEMM,
    FL_GEMM_ACC_SEQ,
    FL_GEMM_ACC_FAST_EMU,
    FL_GEMM_ACC_COUNT
} fl_gemm_acc;

typedef struct {
    int group;   /* products per tensor-core alignment group (32) */
    int bits;    /* significant bits kept relative to the group's largest exponent (14) */
    int promote; /* promote to fp32 every `promote` products, a multiple of group; 0 = never */
} fl_fast_accum_model;

#define FL_FAST_ACCUM_HOPPER ((fl_fast_accum_model){ 32, 14, 0 })     /* cuBLASLt FAST_ACCUM = 1 */
#define FL_FAST_ACCUM_PROMOTED ((fl_fast_accum_model){ 32, 14, 128 }) /* DeepSeek-V3's N_C = 128 */

typedef struct {
    size_t m, n, k;
    fl_format a_fmt, b_fmt; /* e4m3 / e5m2, not both e5m2 */
    const uint8_t *a;       /* (K, M) column-major */
    size_t lda;
    const uint8_t *b;       /* (K, N) column-major */
    size_t ldb;
    fl_format d_fmt;        /* fp32, bf16 or e4m3 */
    void *d;                /* (M, N) column-major: float, uint16 (bf16) or uint8 */
    size_t ldd;
    const void *c;          /* (M, N), float for fp32 D, uint16 bf16 otherwise; NULL when beta = 0 */
    size_t ldc;
    float alpha, beta;
    const float *a_scale, *b_scale; /* dequantization factors, NULL = 1 */
    const float *d_scale;           /* FP8 D only, NULL = 1 */
    float *amax_d;                  /* NULL: not computed; else set to max |v|.  The GPU wrapper
                                       takes it for an FP8 D only (cuBLASLt's restriction); the
                                       CPU twin computes it for any D */
    int fast_accum;                 /* GPU: CUBLASLT_MATMUL_DESC_FAST_ACCUM */
} fl_gemm_fp8;

/* The CPU twin.  acc selects the accumulation (model: for FL_GEMM_ACC_FAST_EMU; NULL = Hopper's).
   Returns 0, or -1 for unsupported types / bad shapes. */
int fl_gemm_fp8_cpu(const fl_gemm_fp8 *g, fl_gemm_acc acc, const fl_fast_accum_model *model);

/* One dot product sum_k a[k] b[k] of fp32 values whose products are exact, under the model. */
float fl_fast_accum_dot(const float *a, const float *b, size_t K, const fl_fast_accum_model *model);

/* The fp32-accumulation bound of the header comment: sum_abs = S', v = the result's magnitude. */
static inline double fl_gemm_fp32_bound(size_t K, double sum_abs, double v)
{
    const double u = 1.0 / 16777216.0;
    return 2.0 * ((double)(K + 2) * u * sum_abs + 3.0 * u * v);
}

/* A bound for the fast-accumulation model against exact arithmetic: a group truncates at most
   group + 1 terms, each by less than its grid step 2^(E - bits + 1), and 2^E <= max |term| <= sum |p|
   (truncation toward zero never grows a magnitude), so
       |err| <= ceil(K / group) (group + 1) 2^(1 - bits) sum |p|  +  (K / promote + 1) u sum |p|. */
double fl_fast_accum_bound(size_t K, double sum_abs, const fl_fast_accum_model *model);

/* cuBLASLt wrapper (libfp8lab_cuda.a).  Device pointers; lt_handle: a cublasLtHandle_t (NULL: one is
   created and destroyed per call); workspace (may be NULL) of ws_bytes; stream: a cudaStream_t.
   Checks: K and M, N > 0, lda >= K, ldb >= K, ldd >= M, A/B/C/D 16-byte aligned, lda/ldb multiples
   of 16 (bytes of FP8), types as above.  Every cuBLASLt / CUDA call is checked (file, line, call). */
int fl_cuda_gemm_fp8(const fl_gemm_fp8 *g, void *lt_handle, void *workspace, size_t ws_bytes, void *stream);

#ifdef __cplusplus
}
#endif

#endif /* FL_GEMM_FP8_H */
