/* twins.c — the CPU-twin registry (twins.h): adapters from arrays of encodings to the twins of
 * kernels.h.  Only kernels: the plain-C examples the ulp command also scores live with it
 * (experiments/ulp/examples.c). */
#include "twins.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"

/* ---- encodings <-> storage ---------------------------------------------------------------------- */

static size_t storage_bytes(fl_format f)
{
    return f == FL_FMT_FP32 ? 4 : (f == FL_FMT_BF16 || f == FL_FMT_FP16) ? 2 : 1;
}

static void *xalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "fp8lab twins: out of memory (%zu bytes)\n", bytes);
        abort();
    }
    return p;
}

static void *pack(fl_format f, const uint32_t *codes, size_t n)
{
    void *p = xalloc(n * storage_bytes(f));
    for (size_t i = 0; i < n; i++)
        switch (storage_bytes(f)) {
        case 4: ((uint32_t *)p)[i] = codes[i]; break;
        case 2: ((uint16_t *)p)[i] = (uint16_t)codes[i]; break;
        default: ((uint8_t *)p)[i] = (uint8_t)codes[i]; break;
        }
    return p;
}

static void unpack(uint32_t *out, fl_format f, const void *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        switch (storage_bytes(f)) {
        case 4: out[i] = ((const uint32_t *)p)[i]; break;
        case 2: out[i] = ((const uint16_t *)p)[i]; break;
        default: out[i] = ((const uint8_t *)p)[i]; break;
        }
}

/* An upstream gradient of exactly 1, n elements of format f. */
static void *ones(fl_format f, size_t n)
{
    const uint32_t one = fl_encode_f32(f, 1.0f, FL_RND_NE, FL_OVF_SATURATE, 0);
    void *p = xalloc(n * storage_bytes(f));
    for (size_t i = 0; i < n; i++)
        switch (storage_bytes(f)) {
        case 4: ((uint32_t *)p)[i] = one; break;
        case 2: ((uint16_t *)p)[i] = (uint16_t)one; break;
        default: ((uint8_t *)p)[i] = (uint8_t)one; break;
        }
    return p;
}

static fl_kin kin(const void *p, fl_format f) { return (fl_kin){ p, f, NULL }; }
static fl_kout kout(void *p, fl_format f) { return (fl_kout){ p, f, NULL, NULL }; }

static void check_rc(int rc, const char *who)
{
    if (rc) {
        fprintf(stderr, "fp8lab twins: %s failed\n", who);
        abort();
    }
}

/* ---- generic adapters ---------------------------------------------------------------------------- */

typedef enum { K_POLYRELU_FWD, K_POLYRELU_BWD, K_POLYNORM_FWD, K_POLYNORM_BWD, K_SWIGLU_FWD,
               K_SWIGLU_BWD_G, K_SWIGLU_BWD_U, K_SMOOTH_FWD } kind;

static void run_kernel(kind k, int order, fl_format fin, fl_format fgrad, fl_format fout, uint32_t *out,
                       const uint32_t *const *in, size_t n, size_t row_len)
{
    const fl_poly_coef c = fl_poly_coef_default(order ? order : 3);
    void *y = xalloc(n * storage_bytes(fout));
    void *x0 = pack(fin, in[0], n);
    void *x1 = NULL, *x2 = NULL, *y2 = NULL;
    switch (k) {
    case K_POLYRELU_FWD:
        check_rc(fl_polyrelu_fwd(kout(y, fout), kin(x0, fin), n, &c), "polyrelu_fwd");
        break;
    case K_POLYRELU_BWD:
        x1 = ones(fgrad, n);
        check_rc(fl_polyrelu_bwd(kout(y, fout), NULL, kin(x0, fin), kin(x1, fgrad), n, &c), "polyrelu_bwd");
        break;
    case K_POLYNORM_FWD:
        check_rc(fl_polynorm_fwd(kout(y, fout), kin(x0, fin), row_len ? n / row_len : 0, row_len, &c, 1e-6f), "polynorm_fwd");
        break;
    case K_POLYNORM_BWD:
        x1 = pack(fgrad, in[1], n);
        check_rc(fl_polynorm_bwd(kout(y, fout), NULL, kin(x0, fin), kin(x1, fgrad), row_len ? n / row_len : 0,
                                 row_len, &c, 1e-6f), "polynorm_bwd");
        break;
    case K_SWIGLU_FWD:
        x1 = pack(fin, in[1], n);
        check_rc(fl_swiglu_fwd(kout(y, fout), kin(x0, fin), kin(x1, fin), n), "swiglu_fwd");
        break;
    case K_SWIGLU_BWD_G:
    case K_SWIGLU_BWD_U:
        x1 = pack(fin, in[1], n);
        x2 = ones(fgrad, n);
        y2 = xalloc(n * storage_bytes(fout));
        check_rc(fl_swiglu_bwd(kout(k == K_SWIGLU_BWD_G ? y : y2, fout), kout(k == K_SWIGLU_BWD_G ? y2 : y, fout),
                               kin(x0, fin), kin(x1, fin), kin(x2, fgrad), n), "swiglu_bwd");
        break;
    case K_SMOOTH_FWD: {
        /* Per-element scale: n tokens of one channel, per-token scales given.  The kernel's scales are
           powers of two (fl_smooth_scale_f32), so the third input is an e8m0 code: 2^(E-127). */
        x1 = pack(fin, in[1], n);
        float *s = xalloc(n * sizeof *s);
        for (size_t i = 0; i < n; i++)
            s[i] = fl_decode(FL_FMT_E8M0, in[2][i]);
        check_rc(fl_smooth_swiglu_fwd(kout(y, fout), s, kin(x0, fin), kin(x1, fin), n, 1, FL_SMOOTH_TOKEN, 0),
                 "smooth_swiglu_fwd");
        free(s);
        break;
    }
    }
    unpack(out, fout, y, n);
    free(y);
    free(y2);
    free(x0);
    free(x1);
    free(x2);
}

#define B FL_FMT_BF16
#define E4 FL_FMT_E4M3
#define E5 FL_FMT_E5M2
#define F32 FL_FMT_FP32

/* One run function per registry entry (the signature carries no entry pointer). */
#define TWIN_RUN(fn, K, ORDER, FIN, FGRAD, FOUT)                                                   \
    static void fn(uint32_t *out, const uint32_t *const *in, size_t n, size_t row_len)             \
    {                                                                                              \
        run_kernel(K, ORDER, FIN, FGRAD, FOUT, out, in, n, row_len);                               \
    }

TWIN_RUN(run_polyrelu2_bf16, K_POLYRELU_FWD, 2, B, B, B)
TWIN_RUN(run_polyrelu3_bf16, K_POLYRELU_FWD, 3, B, B, B)
TWIN_RUN(run_polyrelu4_bf16, K_POLYRELU_FWD, 4, B, B, B)
TWIN_RUN(run_polyrelu3_bf16_e4m3, K_POLYRELU_FWD, 3, B, B, E4)
TWIN_RUN(run_polyrelu3_e4m3_bf16, K_POLYRELU_FWD, 3, E4, B, B)
TWIN_RUN(run_polyrelu3_f32, K_POLYRELU_FWD, 3, F32, F32, F32)
TWIN_RUN(run_polyrelu2_bwd_bf16, K_POLYRELU_BWD, 2, B, B, B)
TWIN_RUN(run_polyrelu3_bwd_bf16, K_POLYRELU_BWD, 3, B, B, B)
TWIN_RUN(run_polyrelu4_bwd_bf16, K_POLYRELU_BWD, 4, B, B, B)
TWIN_RUN(run_polyrelu3_bwd_e5m2, K_POLYRELU_BWD, 3, B, E5, E5)
TWIN_RUN(run_polynorm2_bf16, K_POLYNORM_FWD, 2, B, B, B)
TWIN_RUN(run_polynorm3_bf16, K_POLYNORM_FWD, 3, B, B, B)
TWIN_RUN(run_polynorm4_bf16, K_POLYNORM_FWD, 4, B, B, B)
TWIN_RUN(run_polynorm3_bf16_e4m3, K_POLYNORM_FWD, 3, B, B, E4)
TWIN_RUN(run_polynorm3_e4m3_bf16, K_POLYNORM_FWD, 3, E4, B, B)
TWIN_RUN(run_polynorm3_bwd_bf16, K_POLYNORM_BWD, 3, B, B, B)
TWIN_RUN(run_polynorm3_bwd_e5m2, K_POLYNORM_BWD, 3, B, E5, E5)
TWIN_RUN(run_swiglu_bf16, K_SWIGLU_FWD, 0, B, B, B)
TWIN_RUN(run_swiglu_bf16_e4m3, K_SWIGLU_FWD, 0, B, B, E4)
TWIN_RUN(run_swiglu_e4m3_bf16, K_SWIGLU_FWD, 0, E4, B, B)
TWIN_RUN(run_swiglu_f32, K_SWIGLU_FWD, 0, F32, F32, F32)
TWIN_RUN(run_swiglu_bwd_g_bf16, K_SWIGLU_BWD_G, 0, B, B, B)
TWIN_RUN(run_swiglu_bwd_u_bf16, K_SWIGLU_BWD_U, 0, B, B, B)
TWIN_RUN(run_swiglu_bwd_g_e5m2, K_SWIGLU_BWD_G, 0, B, E5, E5)
TWIN_RUN(run_smooth_swiglu_bf16, K_SMOOTH_FWD, 0, B, B, B)
TWIN_RUN(run_smooth_swiglu_bf16_e4m3, K_SMOOTH_FWD, 0, B, B, E4)

/* ---- element functions alone ---------------------------------------------------------------------- */

typedef float (*unary_f32)(float);

static void run_unary(uint32_t *out, const uint32_t *in, size_t n, fl_format fin, fl_format fout, unary_f32 f)
{
    const fl_format_desc *di = fl_format_get(fin), *dout = fl_format_get(fout);
    for (size_t i = 0; i < n; i++)
        out[i] = fl_encode_f32_bits(dout, fl_f32_bits(f(fl_decode_f32(di, in[i]))), FL_RND_NE, FL_OVF_NOSATURATE, 0);
}

static float silu_hd(float x) { return fl_silu_f32(x); }
static float silu_grad_hd(float x) { return fl_silu_grad_f32(x); }
static float sigmoid_hd(float x) { return fl_sigmoid_f32(x); }

#define UNARY_RUN(fn, FIN, FOUT, F)                                                                \
    static void fn(uint32_t *out, const uint32_t *const *in, size_t n, size_t row_len)             \
    {                                                                                              \
        (void)row_len;                                                                             \
        run_unary(out, in[0], n, FIN, FOUT, F);                                                    \
    }

UNARY_RUN(run_silu_f32, F32, F32, silu_hd)
UNARY_RUN(run_silu_bf16, B, B, silu_hd)
UNARY_RUN(run_silu_dx_f32, F32, F32, silu_grad_hd)
UNARY_RUN(run_sigmoid_f32, F32, F32, sigmoid_hd)

/* ---- the table ------------------------------------------------------------------------------------- */

#define P3 "a1=0x1.555556p-2,a2=0x1.555556p-2,a3=0x1.555556p-2"
#define EPS ",eps=0x1.0c6f7ap-20"
#define IN1(f) { f, f, f }
#define IN2(f, g) { f, g, g }

const fl_twin fl_twins[] = {
    /* element functions (activations.h) */
    { "silu_f32", "silu", "", 0, NULL, 1, IN1(F32), F32, 0, run_silu_f32, "fl_silu_f32 in fp32" },
    { "silu_bf16", "silu", "", 0, NULL, 1, IN1(B), B, 0, run_silu_bf16, "fl_silu_f32, bf16 in/out" },
    { "silu_dx_f32", "silu", "", 1, "x", 1, IN1(F32), F32, 0, run_silu_dx_f32, "fl_silu_grad_f32 in fp32" },
    { "sigmoid_f32", "sigmoid", "", 0, NULL, 1, IN1(F32), F32, 0, run_sigmoid_f32, "fl_sigmoid_f32 in fp32" },
    /* PolyReLU */
    { "polyrelu2_bf16", "polyrelu", "order=2", 0, NULL, 1, IN1(B), B, 0, run_polyrelu2_bf16, "PolyReLU r=2 forward, bf16 -> bf16" },
    { "polyrelu3_bf16", "polyrelu", "order=3," P3, 0, NULL, 1, IN1(B), B, 0, run_polyrelu3_bf16, "PolyReLU r=3 forward, bf16 -> bf16" },
    { "polyrelu4_bf16", "polyrelu", "order=4", 0, NULL, 1, IN1(B), B, 0, run_polyrelu4_bf16, "PolyReLU r=4 forward, bf16 -> bf16" },
    { "polyrelu3_bf16_e4m3", "polyrelu", "order=3," P3, 0, NULL, 1, IN1(B), E4, 0, run_polyrelu3_bf16_e4m3, "PolyReLU r=3 forward, bf16 -> e4m3 (scale 1, saturating)" },
    { "polyrelu3_e4m3_bf16", "polyrelu", "order=3," P3, 0, NULL, 1, IN1(E4), B, 0, run_polyrelu3_e4m3_bf16, "PolyReLU r=3 forward, e4m3 -> bf16" },
    { "polyrelu3_f32", "polyrelu", "order=3," P3, 0, NULL, 1, IN1(F32), F32, 0, run_polyrelu3_f32, "PolyReLU r=3 forward in fp32" },
    { "polyrelu2_bwd_bf16", "polyrelu", "order=2", 1, "x", 1, IN1(B), B, 0, run_polyrelu2_bwd_bf16, "PolyReLU r=2 d/dx (backward with dy = 1), bf16" },
    { "polyrelu3_bwd_bf16", "polyrelu", "order=3," P3, 1, "x", 1, IN1(B), B, 0, run_polyrelu3_bwd_bf16, "PolyReLU r=3 d/dx (backward with dy = 1), bf16" },
    { "polyrelu4_bwd_bf16", "polyrelu", "order=4", 1, "x", 1, IN1(B), B, 0, run_polyrelu4_bwd_bf16, "PolyReLU r=4 d/dx (backward with dy = 1), bf16" },
    { "polyrelu3_bwd_e5m2", "polyrelu", "order=3," P3, 1, "x", 1, IN1(B), E5, 0, run_polyrelu3_bwd_e5m2, "PolyReLU r=3 d/dx, x bf16, dy e5m2 = 1, dx e5m2" },
    /* PolyNorm */
    { "polynorm2_bf16", "polynorm", "order=2" EPS, 0, NULL, 1, IN1(B), B, 1, run_polynorm2_bf16, "PolyNorm r=2 forward over rows, bf16 -> bf16" },
    { "polynorm3_bf16", "polynorm", "order=3," P3 EPS, 0, NULL, 1, IN1(B), B, 1, run_polynorm3_bf16, "PolyNorm r=3 forward over rows, bf16 -> bf16" },
    { "polynorm4_bf16", "polynorm", "order=4" EPS, 0, NULL, 1, IN1(B), B, 1, run_polynorm4_bf16, "PolyNorm r=4 forward over rows, bf16 -> bf16" },
    { "polynorm3_bf16_e4m3", "polynorm", "order=3," P3 EPS, 0, NULL, 1, IN1(B), E4, 1, run_polynorm3_bf16_e4m3, "PolyNorm r=3 forward, bf16 -> e4m3" },
    { "polynorm3_e4m3_bf16", "polynorm", "order=3," P3 EPS, 0, NULL, 1, IN1(E4), B, 1, run_polynorm3_e4m3_bf16, "PolyNorm r=3 forward, e4m3 -> bf16" },
    { "polynorm3_bwd_bf16", "polynorm", "order=3," P3 EPS, 1, "x", 2, IN2(B, B), B, 1, run_polynorm3_bwd_bf16, "PolyNorm r=3 VJP w.r.t. x (inputs x, dy), bf16" },
    { "polynorm3_bwd_e5m2", "polynorm", "order=3," P3 EPS, 1, "x", 2, IN2(B, E5), E5, 1, run_polynorm3_bwd_e5m2, "PolyNorm r=3 VJP w.r.t. x, x bf16, dy and dx e5m2" },
    /* SwiGLU */
    { "swiglu_bf16", "swiglu", "", 0, NULL, 2, IN1(B), B, 0, run_swiglu_bf16, "SwiGLU silu(g) u forward, bf16 -> bf16" },
    { "swiglu_bf16_e4m3", "swiglu", "", 0, NULL, 2, IN1(B), E4, 0, run_swiglu_bf16_e4m3, "SwiGLU forward, bf16 -> e4m3 (scale 1, saturating)" },
    { "swiglu_e4m3_bf16", "swiglu", "", 0, NULL, 2, IN1(E4), B, 0, run_swiglu_e4m3_bf16, "SwiGLU forward, e4m3 -> bf16" },
    { "swiglu_f32", "swiglu", "", 0, NULL, 2, IN1(F32), F32, 0, run_swiglu_f32, "SwiGLU forward in fp32" },
    { "swiglu_bwd_g_bf16", "swiglu", "", 1, "g", 2, IN1(B), B, 0, run_swiglu_bwd_g_bf16, "SwiGLU d/dg = u silu'(g) (backward with dy = 1), bf16" },
    { "swiglu_bwd_u_bf16", "swiglu", "", 2, "u", 2, IN1(B), B, 0, run_swiglu_bwd_u_bf16, "SwiGLU d/du = silu(g) (backward with dy = 1), bf16" },
    { "swiglu_bwd_g_e5m2", "swiglu", "", 1, "g", 2, IN1(B), E5, 0, run_swiglu_bwd_g_e5m2, "SwiGLU d/dg, g/u bf16, dy e5m2 = 1, dg e5m2" },
    /* Smooth-SwiGLU (the scale is an input: per element here) */
    { "smooth_swiglu_bf16", "smooth_swiglu", "", 0, NULL, 3, { B, B, FL_FMT_E8M0 }, B, 0, run_smooth_swiglu_bf16, "s silu(g) u, bf16 -> bf16 (the pre-cast value)" },
    { "smooth_swiglu_bf16_e4m3", "smooth_swiglu", "", 0, NULL, 3, { B, B, FL_FMT_E8M0 }, E4, 0, run_smooth_swiglu_bf16_e4m3, "s silu(g) u, bf16 -> e4m3 (the FP8 cast, scale 1)" },
};

const size_t fl_twin_count = sizeof fl_twins / sizeof fl_twins[0];

const fl_twin *fl_twin_find(const char *name)
{
    for (size_t i = 0; name && i < fl_twin_count; i++)
        if (strcmp(fl_twins[i].name, name) == 0)
            return &fl_twins[i];
    return NULL;
}
