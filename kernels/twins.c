/* twins.c — the CPU-twin registry (twins.h): one line per twin, naming the kernel it runs; adapters
 * from arrays of encodings to the twins of kernels.h; the accuracy table's mode of each entry.  Only
 * kernels: the plain-C examples the ulp command also scores live with it (experiments/ulp/examples.c). */
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

/* ---- the kernels, on arrays of encodings ---------------------------------------------------------- */

/* The kernels.h call of entry t (kernel k): in[] packed into the formats' storage, out[] unpacked. */
static void run_kernel(const fl_twin *t, const fl_twin_kernel *k, uint32_t *out, const uint32_t *const *in, size_t n,
                       size_t row_len)
{
    const fl_format fin = t->in_fmt[0], fout = t->out_fmt;
    const fl_poly_coef c = fl_poly_coef_default(k->order ? k->order : 3);
    const size_t rows = row_len ? n / row_len : 0;
    void *y = xalloc(n * storage_bytes(fout));
    void *x0 = pack(fin, in[0], n);
    void *x1 = NULL, *x2 = NULL, *y2 = NULL;
    switch (k->id) {
    case FL_TWIN_POLYRELU_FWD:
        check_rc(fl_polyrelu_fwd(kout(y, fout), kin(x0, fin), n, &c), "polyrelu_fwd");
        break;
    case FL_TWIN_POLYRELU_BWD:
        x1 = ones(fout, n);
        check_rc(fl_polyrelu_bwd(kout(y, fout), NULL, kin(x0, fin), kin(x1, fout), n, &c), "polyrelu_bwd");
        break;
    case FL_TWIN_POLYNORM_FWD:
        check_rc(fl_polynorm_fwd(kout(y, fout), kin(x0, fin), rows, row_len, &c, 1e-6f), "polynorm_fwd");
        break;
    case FL_TWIN_POLYNORM_BWD:
        x1 = pack(t->in_fmt[1], in[1], n);
        check_rc(fl_polynorm_bwd(kout(y, fout), NULL, kin(x0, fin), kin(x1, t->in_fmt[1]), rows, row_len, &c, 1e-6f),
                 "polynorm_bwd");
        break;
    case FL_TWIN_SWIGLU_FWD:
        x1 = pack(fin, in[1], n);
        check_rc(fl_swiglu_fwd(kout(y, fout), kin(x0, fin), kin(x1, fin), n), "swiglu_fwd");
        break;
    case FL_TWIN_SWIGLU_BWD_G:
    case FL_TWIN_SWIGLU_BWD_U: {
        const int g = k->id == FL_TWIN_SWIGLU_BWD_G;
        x1 = pack(fin, in[1], n);
        x2 = ones(fout, n);
        y2 = xalloc(n * storage_bytes(fout));
        check_rc(fl_swiglu_bwd(kout(g ? y : y2, fout), kout(g ? y2 : y, fout), kin(x0, fin), kin(x1, fin), kin(x2, fout), n),
                 "swiglu_bwd");
        break;
    }
    case FL_TWIN_SMOOTH_FWD: {
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
    case FL_TWIN_SILU:
    case FL_TWIN_SILU_GRAD:
    case FL_TWIN_SIGMOID:
    case FL_TWIN_KERNEL_COUNT:
        abort(); /* element functions: run_entry */
    }
    unpack(out, fout, y, n);
    free(y);
    free(y2);
    free(x0);
    free(x1);
    free(x2);
}

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

static const unary_f32 element_fn[FL_TWIN_KERNEL_COUNT] = {
    [FL_TWIN_SILU] = silu_hd, [FL_TWIN_SILU_GRAD] = silu_grad_hd, [FL_TWIN_SIGMOID] = sigmoid_hd,
};

/* ---- the table ------------------------------------------------------------------------------------- *
 * X(NAME, KERNEL, ORDER, REF, PARAMS, DERIVATIVE, WRT, N_INPUTS, IN, OUT, ROWWISE, SUMMARY): the fl_twin
 * row (twins.h) with the kernel it runs (fl_twin_kernel: FL_TWIN_##KERNEL and the order) in place of
 * its run function, which is generated from it (run_entry).  tests/test_twin_registry.c checks every
 * row against the reference table and against its kernel. */

#define B FL_FMT_BF16
#define E4 FL_FMT_E4M3
#define E5 FL_FMT_E5M2
#define E8 FL_FMT_E8M0
#define F32 FL_FMT_FP32
#define IN1(f) { f, f, f }
#define IN2(f, g) { f, g, g }
#define IN3(f, g, h) { f, g, h }
#define P3 "a1=0x1.555556p-2,a2=0x1.555556p-2,a3=0x1.555556p-2"
#define EPS ",eps=0x1.0c6f7ap-20"

#define FL_TWIN_LIST(X) \
    /* element functions (activations.h) */ \
    X(silu_f32, SILU, 0, "silu", "", 0, NULL, 1, IN1(F32), F32, 0, "fl_silu_f32 in fp32") \
    X(silu_bf16, SILU, 0, "silu", "", 0, NULL, 1, IN1(B), B, 0, "fl_silu_f32, bf16 in/out") \
    X(silu_dx_f32, SILU_GRAD, 0, "silu", "", 1, "x", 1, IN1(F32), F32, 0, "fl_silu_grad_f32 in fp32") \
    X(sigmoid_f32, SIGMOID, 0, "sigmoid", "", 0, NULL, 1, IN1(F32), F32, 0, "fl_sigmoid_f32 in fp32") \
    /* PolyReLU */ \
    X(polyrelu2_bf16, POLYRELU_FWD, 2, "polyrelu", "order=2", 0, NULL, 1, IN1(B), B, 0, "PolyReLU r=2 forward, bf16 -> bf16") \
    X(polyrelu3_bf16, POLYRELU_FWD, 3, "polyrelu", "order=3," P3, 0, NULL, 1, IN1(B), B, 0, "PolyReLU r=3 forward, bf16 -> bf16") \
    X(polyrelu4_bf16, POLYRELU_FWD, 4, "polyrelu", "order=4", 0, NULL, 1, IN1(B), B, 0, "PolyReLU r=4 forward, bf16 -> bf16") \
    X(polyrelu3_bf16_e4m3, POLYRELU_FWD, 3, "polyrelu", "order=3," P3, 0, NULL, 1, IN1(B), E4, 0, \
      "PolyReLU r=3 forward, bf16 -> e4m3 (scale 1, saturating)") \
    X(polyrelu3_e4m3_bf16, POLYRELU_FWD, 3, "polyrelu", "order=3," P3, 0, NULL, 1, IN1(E4), B, 0, "PolyReLU r=3 forward, e4m3 -> bf16") \
    X(polyrelu3_f32, POLYRELU_FWD, 3, "polyrelu", "order=3," P3, 0, NULL, 1, IN1(F32), F32, 0, "PolyReLU r=3 forward in fp32") \
    X(polyrelu2_bwd_bf16, POLYRELU_BWD, 2, "polyrelu", "order=2", 1, "x", 1, IN1(B), B, 0, "PolyReLU r=2 d/dx (backward with dy = 1), bf16") \
    X(polyrelu3_bwd_bf16, POLYRELU_BWD, 3, "polyrelu", "order=3," P3, 1, "x", 1, IN1(B), B, 0, \
      "PolyReLU r=3 d/dx (backward with dy = 1), bf16") \
    X(polyrelu4_bwd_bf16, POLYRELU_BWD, 4, "polyrelu", "order=4", 1, "x", 1, IN1(B), B, 0, "PolyReLU r=4 d/dx (backward with dy = 1), bf16") \
    X(polyrelu3_bwd_e5m2, POLYRELU_BWD, 3, "polyrelu", "order=3," P3, 1, "x", 1, IN1(B), E5, 0, \
      "PolyReLU r=3 d/dx, x bf16, dy e5m2 = 1, dx e5m2") \
    /* PolyNorm */ \
    X(polynorm2_bf16, POLYNORM_FWD, 2, "polynorm", "order=2" EPS, 0, NULL, 1, IN1(B), B, 1, "PolyNorm r=2 forward over rows, bf16 -> bf16") \
    X(polynorm3_bf16, POLYNORM_FWD, 3, "polynorm", "order=3," P3 EPS, 0, NULL, 1, IN1(B), B, 1, \
      "PolyNorm r=3 forward over rows, bf16 -> bf16") \
    X(polynorm4_bf16, POLYNORM_FWD, 4, "polynorm", "order=4" EPS, 0, NULL, 1, IN1(B), B, 1, "PolyNorm r=4 forward over rows, bf16 -> bf16") \
    X(polynorm3_bf16_e4m3, POLYNORM_FWD, 3, "polynorm", "order=3," P3 EPS, 0, NULL, 1, IN1(B), E4, 1, "PolyNorm r=3 forward, bf16 -> e4m3") \
    X(polynorm3_e4m3_bf16, POLYNORM_FWD, 3, "polynorm", "order=3," P3 EPS, 0, NULL, 1, IN1(E4), B, 1, "PolyNorm r=3 forward, e4m3 -> bf16") \
    X(polynorm3_bwd_bf16, POLYNORM_BWD, 3, "polynorm", "order=3," P3 EPS, 1, "x", 2, IN2(B, B), B, 1, \
      "PolyNorm r=3 VJP w.r.t. x (inputs x, dy), bf16") \
    X(polynorm3_bwd_e5m2, POLYNORM_BWD, 3, "polynorm", "order=3," P3 EPS, 1, "x", 2, IN2(B, E5), E5, 1, \
      "PolyNorm r=3 VJP w.r.t. x, x bf16, dy and dx e5m2") \
    /* SwiGLU */ \
    X(swiglu_bf16, SWIGLU_FWD, 0, "swiglu", "", 0, NULL, 2, IN1(B), B, 0, "SwiGLU silu(g) u forward, bf16 -> bf16") \
    X(swiglu_bf16_e4m3, SWIGLU_FWD, 0, "swiglu", "", 0, NULL, 2, IN1(B), E4, 0, "SwiGLU forward, bf16 -> e4m3 (scale 1, saturating)") \
    X(swiglu_e4m3_bf16, SWIGLU_FWD, 0, "swiglu", "", 0, NULL, 2, IN1(E4), B, 0, "SwiGLU forward, e4m3 -> bf16") \
    X(swiglu_f32, SWIGLU_FWD, 0, "swiglu", "", 0, NULL, 2, IN1(F32), F32, 0, "SwiGLU forward in fp32") \
    X(swiglu_bwd_g_bf16, SWIGLU_BWD_G, 0, "swiglu", "", 1, "g", 2, IN1(B), B, 0, "SwiGLU d/dg = u silu'(g) (backward with dy = 1), bf16") \
    X(swiglu_bwd_u_bf16, SWIGLU_BWD_U, 0, "swiglu", "", 2, "u", 2, IN1(B), B, 0, "SwiGLU d/du = silu(g) (backward with dy = 1), bf16") \
    X(swiglu_bwd_g_e5m2, SWIGLU_BWD_G, 0, "swiglu", "", 1, "g", 2, IN1(B), E5, 0, "SwiGLU d/dg, g/u bf16, dy e5m2 = 1, dg e5m2") \
    /* Smooth-SwiGLU (the scale is an input: per element here) */ \
    X(smooth_swiglu_bf16, SMOOTH_FWD, 0, "smooth_swiglu", "", 0, NULL, 3, IN3(B, B, E8), B, 0, \
      "s silu(g) u, bf16 -> bf16 (the pre-cast value)") \
    X(smooth_swiglu_bf16_e4m3, SMOOTH_FWD, 0, "smooth_swiglu", "", 0, NULL, 3, IN3(B, B, E8), E4, 0, \
      "s silu(g) u, bf16 -> e4m3 (the FP8 cast, scale 1)")

/* the entries' positions, TWIN_silu_f32 = 0, ... */
#define TWIN_INDEX(NAME, KERNEL, ORDER, REF, PARAMS, DER, WRT, NIN, IN, OUT, ROWWISE, SUMMARY) TWIN_##NAME,
enum { FL_TWIN_LIST(TWIN_INDEX) TWIN_COUNT };

#define TWIN_KERNEL(NAME, KERNEL, ORDER, REF, PARAMS, DER, WRT, NIN, IN, OUT, ROWWISE, SUMMARY) { FL_TWIN_##KERNEL, ORDER },
static const fl_twin_kernel kernels[TWIN_COUNT] = { FL_TWIN_LIST(TWIN_KERNEL) };

/* Entry i on arrays of encodings: its element function, or its kernel. */
static void run_entry(size_t i, uint32_t *out, const uint32_t *const *in, size_t n, size_t row_len)
{
    const fl_twin *t = &fl_twins[i];
    if (element_fn[kernels[i].id])
        run_unary(out, in[0], n, t->in_fmt[0], t->out_fmt, element_fn[kernels[i].id]);
    else
        run_kernel(t, &kernels[i], out, in, n, row_len);
}

/* One run function per entry (the signature carries no entry pointer). */
#define TWIN_RUN(NAME, KERNEL, ORDER, REF, PARAMS, DER, WRT, NIN, IN, OUT, ROWWISE, SUMMARY)                   \
    static void run_##NAME(uint32_t *out, const uint32_t *const *in, size_t n, size_t row_len)                 \
    {                                                                                                          \
        run_entry(TWIN_##NAME, out, in, n, row_len);                                                           \
    }
FL_TWIN_LIST(TWIN_RUN)

#define TWIN_ROW(NAME, KERNEL, ORDER, REF, PARAMS, DER, WRT, NIN, IN, OUT, ROWWISE, SUMMARY)                   \
    { #NAME, REF, PARAMS, DER, WRT, NIN, IN, OUT, ROWWISE, run_##NAME, SUMMARY },
const fl_twin fl_twins[] = { FL_TWIN_LIST(TWIN_ROW) };

const size_t fl_twin_count = sizeof fl_twins / sizeof fl_twins[0];

const fl_twin *fl_twin_find(const char *name)
{
    for (size_t i = 0; name && i < fl_twin_count; i++)
        if (strcmp(fl_twins[i].name, name) == 0)
            return &fl_twins[i];
    return NULL;
}

const fl_twin_kernel *fl_twin_kernel_of(const fl_twin *t)
{
    return t >= fl_twins && t < fl_twins + fl_twin_count ? &kernels[t - fl_twins] : NULL;
}

const char *fl_twin_kernel_name(fl_twin_kernel_id id)
{
    static const char *const names[] = { "silu", "silu_grad", "sigmoid", "polyrelu_fwd", "polyrelu_bwd", "polynorm_fwd",
                                         "polynorm_bwd", "swiglu_fwd", "swiglu_bwd_g", "swiglu_bwd_u", "smooth_swiglu_fwd" };
    _Static_assert(FL_ARRAY_LEN(names) == FL_TWIN_KERNEL_COUNT, "a name per kernel kind");
    return (unsigned)id < FL_TWIN_KERNEL_COUNT ? names[id] : "?";
}

/* ---- the accuracy table's mode ---------------------------------------------------------------------- */

int fl_twin_space_bits(const fl_twin *t)
{
    int bits = 0;
    for (int k = 0; k < t->n_inputs && k < 3; k++)
        bits += fl_format_get(t->in_fmt[k])->bits;
    return bits;
}

void fl_twin_table_mode(fl_twin_mode *m, const fl_twin *t, int fast)
{
    memset(m, 0, sizeof *m);
    const int bits = fl_twin_space_bits(t);
    int narrow = 1; /* every input of <= 16 bits: no binary32 input */
    for (int k = 0; k < t->n_inputs && k < 3; k++)
        narrow &= fl_format_get(t->in_fmt[k])->bits <= 16;
    if (t->rowwise) {
        m->kind = FL_TWIN_MODE_ROWS;
        m->count = FL_TWIN_TABLE_ROWS;
        m->seed = FL_TWIN_TABLE_SEED;
        m->row_len = FL_TWIN_TABLE_ROW_LEN;
    } else if (bits <= 16 || (bits <= 32 && narrow && fast)) {
        m->kind = FL_TWIN_MODE_EXHAUSTIVE;
        m->count = 1ull << bits;
    } else {
        m->kind = FL_TWIN_MODE_SAMPLE;
        m->count = FL_TWIN_TABLE_SAMPLE;
        m->seed = FL_TWIN_TABLE_SEED;
    }
}

const char *fl_twin_mode_name(fl_twin_mode_kind k)
{
    return k == FL_TWIN_MODE_EXHAUSTIVE ? "exhaustive" : k == FL_TWIN_MODE_SAMPLE ? "sample" : "rows";
}

int fl_twin_mode_args(char *buf, size_t n, const fl_twin_mode *m)
{
    switch (m->kind) {
    case FL_TWIN_MODE_EXHAUSTIVE: return snprintf(buf, n, "--exhaustive");
    case FL_TWIN_MODE_SAMPLE: return snprintf(buf, n, "--sample %llu --seed %llu", (unsigned long long)m->count, (unsigned long long)m->seed);
    case FL_TWIN_MODE_ROWS:
        return snprintf(buf, n, "--sample %llu --row-len %ld --dist normal --seed %llu", (unsigned long long)m->count, m->row_len,
                        (unsigned long long)m->seed);
    }
    return snprintf(buf, n, "?");
}
