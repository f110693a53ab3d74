/* cmd_quant.c — `fp8lab quant`: what happens to a tensor when it is cast to each low-precision
 * format under each scaling scheme: the fraction saturated (and clipped past the RNE overflow
 * boundary), flushed to zero, and the relative error.  On a user's tensor, or on a synthetic
 * activation tensor with the heavy tails and outlier channels seen in LLMs ("massive
 * activations", Sun et al. 2024), generated from a printed seed.
 */
#include "commands.h"
#include "common/cli.h"
#include "fl_json.h"
#include "fl_tensor.h"
#include "npy.h"
#include "scaling.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const help =
    "usage: fp8lab quant [--input X.npy|X.safetensors] [--rows R --cols C] [--seed S] [--json]\n"
    "\n"
    "Casts a 2-D float tensor (rows = tokens, cols = channels) to e4m3, e5m2, bf16, fp16 and the MX\n"
    "formats under each scaling scheme (none, per-tensor current scaling, per-row, 1x128 tiles, MX 1x32\n"
    "e8m0 with the OCP floor rule and TE's round-up rule; for e2m1 also NVFP4: 1x16 blocks with e4m3\n"
    "scales under a float32 tensor scale 6*448/amax, and NVFP4 with Four Over Six's choice per block of\n"
    "the map to 6 or to 4, whichever has the smaller squared error) and reports, for each, the fraction of\n"
    "elements saturated (|x*scale| > max), clipped (beyond the RNE overflow boundary), flushed to zero\n"
    "(x != 0 stored as 0), and the relative error ||x - dequant(quant(x))|| / ||x||.\n"
    "  --input X.npy   float16/32/64 .npy or a .safetensors file's first floating tensor (fl_tensor.h); 1-D is\n"
    "                  one row, N-D is flattened to (prod(shape[:-1]), last)\n"
    "  --rows, --cols  size of the synthetic tensor (default 1024 x 1024)\n"
    "  --seed S        seed of the synthetic tensor (default 20261121)\n"
    "  --json          one JSON object {\"source\", \"rows\", \"cols\", \"amax\", \"rms\", \"results\": [...]}\n"
    "The synthetic tensor: Student-t (3 dof) bulk, 4 outlier channels scaled x200 on 2% of the tokens, and\n"
    "one token whose activations are x1000 (an attention-sink-like token).\n";


static double rng_uniform(uint64_t *s) { return fl_open01(fl_splitmix64(s)); }

static double rng_normal(uint64_t *s)
{
    return sqrt(-2.0 * log(rng_uniform(s))) * cos(6.283185307179586 * rng_uniform(s));
}

static void synthesize(float *x, size_t R, size_t C, uint64_t seed)
{
    uint64_t s = seed;
    for (size_t i = 0; i < R * C; i++) {
        /* Student-t with 3 degrees of freedom: N / sqrt(chi2_3 / 3) */
        const double n = rng_normal(&s), a = rng_normal(&s), b = rng_normal(&s), c = rng_normal(&s);
        x[i] = (float)(n / sqrt((a * a + b * b + c * c) / 3.0));
    }
    const size_t outlier_ch[4] = { 7 % C, 100 % C, 333 % C, 901 % C };
    for (size_t r = 0; r < R; r++)
        if (rng_uniform(&s) < 0.02)
            for (int k = 0; k < 4; k++)
                x[r * C + outlier_ch[k]] *= 200.0f;
    for (size_t c = 0; c < C; c++)
        x[c] *= 1000.0f; /* token 0 */
}

typedef struct {
    const char *name; /* the scheme's fl_scaling_name, with MX's scale rule */
    fl_scaling scaling;
    fl_mx_rule rule; /* FL_SCALING_MX32 only */
    int nvfp4;       /* NVFP4: 1x16 blocks, e4m3 block scales, a float32 tensor scale (e2m1 only); 2: Four Over Six */
} scheme;

/* The schemes, in the table's order; 16-bit formats take none and tensor only. */
static const scheme schemes[] = {
    { "none", FL_SCALING_NONE, FL_MX_FLOOR, 0 },        { "tensor", FL_SCALING_TENSOR, FL_MX_FLOOR, 0 },
    { "row", FL_SCALING_ROW, FL_MX_FLOOR, 0 },          { "1x128", FL_SCALING_1X128, FL_MX_FLOOR, 0 },
    { "mx32-floor", FL_SCALING_MX32, FL_MX_FLOOR, 0 }, { "mx32-ceil", FL_SCALING_MX32, FL_MX_CEIL, 0 },
    { "nvfp4", FL_SCALING_NONE, FL_MX_FLOOR, 1 },         { "nvfp4-4/6", FL_SCALING_NONE, FL_MX_FLOOR, 2 },
};
static const fl_format quant_formats[] = { FL_FMT_E4M3, FL_FMT_E5M2, FL_FMT_BF16, FL_FMT_FP16, FL_FMT_E2M1, FL_FMT_E3M2 };

typedef struct {
    const char *input;
    unsigned long long rows, cols, seed;
    int json;
} quant_opts;

/* Returns -1 to go on, else the exit status. */
static int parse_quant_opts(quant_opts *o, int argc, char **argv)
{
    static const char *const cmd = "quant";
    *o = (quant_opts){ NULL, 1024, 1024, 20261121, 0 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const int has = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            return FL_EXIT_OK;
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "--input")) {
            if (!has)
                return fl_cli_usage_error(cmd, "--input needs a .npy or .safetensors file");
            o->input = argv[++i];
        } else if (!strcmp(a, "--rows") || !strcmp(a, "--cols") || !strcmp(a, "--seed")) {
            const int is_seed = !strcmp(a, "--seed");
            unsigned long long *dst = is_seed ? &o->seed : !strcmp(a, "--rows") ? &o->rows : &o->cols;
            if (!has || fl_cli_parse_u64(dst, argv[++i]) || (!is_seed && (*dst == 0 || *dst > (1u << 16))))
                return fl_cli_usage_error(cmd, "%s needs %s", a, is_seed ? "a non-negative integer" : "an integer in 1..65536");
        } else {
            return fl_cli_usage_error(cmd, "unknown argument '%s'", a);
        }
    }
    return -1;
}

/* Scratch of one quantization run over an (R, C) tensor. */
typedef struct {
    uint8_t *mxs;
    float *back, *amaxb, *scale, *sinv;
} quant_bufs;

static void quant_bufs_free(quant_bufs *b)
{
    free(b->mxs), free(b->back), free(b->amaxb), free(b->scale), free(b->sinv);
}

static int quant_bufs_alloc(quant_bufs *b, size_t R, size_t C)
{
    b->back = malloc(R * C * sizeof *b->back);
    b->amaxb = malloc(R * C * sizeof *b->amaxb);
    b->scale = malloc(R * C * sizeof *b->scale);
    b->sinv = malloc(R * C * sizeof *b->sinv);
    b->mxs = malloc(R * ((C + 31) / 32));
    if (b->back && b->amaxb && b->scale && b->sinv && b->mxs)
        return 0;
    quant_bufs_free(b);
    return -1;
}

/* Quantize x to f under scheme sc and back into b->back; the counts in *st. */
static void quant_run(fl_quant_stats *st, quant_bufs *b, const float *x, size_t R, size_t C, fl_format f,
                      const scheme *sc, float amax)
{
    memset(st, 0, sizeof *st);
    if (sc->nvfp4) {
        /* NVFP4 on the cast engine (scaling.h), RNE, the tensor scale from the tensor's amax */
        const int f46 = sc->nvfp4 == 2;
        fl_nvfp4_fake_quantize(b->back, NULL, st, x, R, C, fl_nvfp4_global_scale(amax, f46), f46, 0, 0);
    } else if (sc->scaling == FL_SCALING_MX32) {
        /* on the cast engine (scaling.h): fl_mx_quantize + fl_mx_dequantize's values and counts */
        fl_mx_fake_quantize(b->back, b->mxs, st, x, R, C, f, sc->rule);
    } else if (fl_format_get(f)->bits > 8) {
        /* 16-bit: plain (optionally scaled) conversion; scaling = tensor-wise multiply. */
        const float s = sc->scaling == FL_SCALING_NONE ? 1.0f : fl_scale_from_amax(f, amax, 1.0f, 0, 0);
        const fl_format_desc *d = fl_format_get(f);
        const double max = fl_format_max(f);
        for (size_t i = 0; i < R * C; i++) {
            const float v = x[i] * s;
            const uint32_t c = fl_encode_f32_bits(d, fl_f32_bits(v), FL_RND_NE, FL_OVF_NOSATURATE, 0);
            const float y = fl_decode_f32(d, c);
            st->n++;
            st->n_sat += fabs(v) > max;
            st->n_clip += isinf(y);
            st->n_ftz += v != 0 && y == 0;
            b->back[i] = y / s;
        }
    } else {
        size_t nr, nc;
        const fl_block blk = fl_scaling_block(sc->scaling);
        fl_block_grid(&nr, &nc, blk, R, C);
        if (sc->scaling == FL_SCALING_NONE) {
            for (size_t i = 0; i < nr * nc; i++)
                b->scale[i] = 1.0f;
        } else {
            size_t nn;
            fl_amax_blocks(b->amaxb, &nn, x, R, C, blk);
            fl_scale_blocks(b->scale, b->amaxb, nr * nc, f, 0, 0.0f);
        }
        fl_scale_invert(b->sinv, b->scale, nr * nc);
        /* on the cast engine (scaling.h): fl_quantize + fl_dequantize's values and counts */
        fl_fake_quantize(b->back, st, x, R, C, b->scale, b->sinv, blk, f);
    }
}

/* One row of the table, as text or into the JSON array. */
static void emit_quant_row(const quant_opts *o, json_t *results, fl_format f, const scheme *sc, const fl_quant_stats *st,
                           double rel, double n)
{
    if (!o->json) {
        printf("  %-6s %-11s %10.4f%% %10.4f%% %10.4f%% %12.3e\n", fl_format_name(f), sc->name, 100 * st->n_sat / n,
               100 * st->n_clip / n, 100 * st->n_ftz / n, rel);
        return;
    }
    json_t *j = json_object();
    json_object_set_new(j, "format", json_string(fl_format_name(f)));
    json_object_set_new(j, "scaling", json_string(sc->name));
    json_object_set_new(j, "saturated", json_integer((json_int_t)st->n_sat));
    json_object_set_new(j, "clipped", json_integer((json_int_t)st->n_clip));
    json_object_set_new(j, "flushed_to_zero", json_integer((json_int_t)st->n_ftz));
    json_object_set_new(j, "relative_error", json_real(rel));
    json_array_append_new(results, j);
}

static void emit_quant_head(const quant_opts *o, size_t R, size_t C, float amax, double rms)
{
    if (o->json)
        return;
    printf("fp8lab quant: %s, %zu x %zu, amax %.6g, rms %.6g, amax/rms %.1f\n", o->input ? o->input : "synthetic activations",
           R, C, amax, rms, amax / rms);
    if (!o->input)
        printf("  (synthetic: Student-t(3) bulk, 4 outlier channels x200 on 2%% of tokens, token 0 x1000; seed %llu)\n", o->seed);
    printf("  %-6s %-11s %11s %11s %11s %12s\n", "format", "scaling", "saturated", "clipped", "flushed", "rel.error");
}

static void emit_quant_tail(const quant_opts *o, json_t *results, size_t R, size_t C, float amax, double rms)
{
    if (!o->json) {
        json_decref(results);
        printf("saturated: |x*scale| > max (stored as max); clipped: beyond the RNE overflow boundary (error > 1/2 ulp; 16-bit: Inf)\n");
        return;
    }
    json_t *root = json_object();
    json_object_set_new(root, "source", fl_json_string(o->input ? o->input : "synthetic")); /* any bytes: fl_json.h */
    if (!o->input)
        json_object_set_new(root, "seed", json_integer((json_int_t)o->seed));
    json_object_set_new(root, "rows", json_integer((json_int_t)R));
    json_object_set_new(root, "cols", json_integer((json_int_t)C));
    json_object_set_new(root, "amax", json_real(amax));
    json_object_set_new(root, "rms", json_real(rms));
    json_object_set_new(root, "results", results);
    fl_cli_json_print(root, 9);
}

/* The tensor: --input, or the synthetic one.  NULL after a message. */
static float *quant_tensor(const quant_opts *o, size_t *R, size_t *C)
{
    float *x = NULL;
    if (o->input) {
        char err[1024];
        if (fl_tensor_load_f32(&x, R, C, o->input, NULL, 1, err, sizeof err))
            fprintf(stderr, "fp8lab quant: %s\n", err);
        return x;
    }
    *R = o->rows, *C = o->cols;
    if (!(x = malloc(*R * *C * sizeof *x)))
        fprintf(stderr, "fp8lab quant: out of memory\n");
    else
        synthesize(x, *R, *C, o->seed);
    return x;
}

int fl_cmd_quant(int argc, char **argv)
{
    quant_opts o;
    const int prc = parse_quant_opts(&o, argc, argv);
    if (prc >= 0)
        return prc;
    size_t R, C, nan_count;
    float *x = quant_tensor(&o, &R, &C);
    quant_bufs b = { 0 };
    if (!x || quant_bufs_alloc(&b, R, C)) {
        free(x);
        return FL_EXIT_FAIL;
    }
    const float amax = fl_amax_f32(&nan_count, x, R * C);
    double ss = 0;
    for (size_t i = 0; i < R * C; i++)
        ss += (double)x[i] * x[i];
    const double rms = sqrt(ss / (double)(R * C));
    json_t *results = json_array();
    emit_quant_head(&o, R, C, amax, rms);
    for (size_t fi = 0; fi < FL_ARRAY_LEN(quant_formats); fi++)
        for (size_t si = 0; si < FL_ARRAY_LEN(schemes); si++) {
            const fl_format f = quant_formats[fi];
            if (fl_format_get(f)->bits > 8 && schemes[si].scaling > FL_SCALING_TENSOR)
                continue; /* 16-bit formats: no scaling and per-tensor only */
            if (schemes[si].nvfp4 && f != FL_FMT_E2M1)
                continue; /* NVFP4 is e2m1's */
            fl_quant_stats st;
            quant_run(&st, &b, x, R, C, f, &schemes[si], amax);
            double num = 0;
            for (size_t i = 0; i < R * C; i++) {
                const double e = (double)b.back[i] - x[i];
                num += e * e;
            }
            emit_quant_row(&o, results, f, &schemes[si], &st, sqrt(num / ss), (double)(R * C));
        }
    emit_quant_tail(&o, results, R, C, amax, rms);
    free(x);
    quant_bufs_free(&b);
    return FL_EXIT_OK;
}
