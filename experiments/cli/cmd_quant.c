/* cmd_quant.c — `fp8lab quant`: what happens to a tensor when it is cast to each low-precision
 * format under each scaling scheme: the fraction saturated (and clipped past the RNE overflow
 * boundary), flushed to zero, and the relative error.  On a user's tensor, or on a synthetic
 * activation tensor with the heavy tails and outlier channels seen in LLMs ("massive
 * activations", Sun et al. 2024), generated from a printed seed.
 */
#include "cli.h"
#include "npy.h"
#include "scaling.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const help =
    "usage: fp8lab quant [--input X.npy] [--rows R --cols C] [--seed S] [--json]\n"
    "\n"
    "Casts a 2-D float tensor (rows = tokens, cols = channels) to e4m3, e5m2, bf16, fp16 and the MX\n"
    "formats under each scaling scheme (none, per-tensor current scaling, per-row, 1x128 tiles, MX 1x32\n"
    "e8m0 with the OCP floor rule and TE's round-up rule) and reports, for each, the fraction of\n"
    "elements saturated (|x*scale| > max), clipped (beyond the RNE overflow boundary), flushed to zero\n"
    "(x != 0 stored as 0), and the relative error ||x - dequant(quant(x))|| / ||x||.\n"
    "  --input X.npy   float32/float64 tensor; 1-D is one row, N-D is flattened to (prod(shape[:-1]), last)\n"
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
    const char *name;
    fl_block block;
    int mx;
    fl_mx_rule rule;
} scheme;

int fl_cmd_quant(int argc, char **argv)
{
    const char *cmd = "quant", *input = NULL;
    unsigned long long rows = 1024, cols = 1024, seed = 20261121;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const int has = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            return FL_EXIT_OK;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--input")) {
            if (!has)
                return fl_cli_usage_error(cmd, "--input needs a .npy file");
            input = argv[++i];
        } else if (!strcmp(a, "--rows") || !strcmp(a, "--cols") || !strcmp(a, "--seed")) {
            unsigned long long *dst = a[2] == 'r' ? &rows : a[2] == 'c' ? &cols : &seed;
            if (!has || fl_cli_parse_u64(dst, argv[++i]) || (dst != &seed && (*dst == 0 || *dst > (1u << 16))))
                return fl_cli_usage_error(cmd, "%s needs %s", a, dst == &seed ? "a non-negative integer" : "an integer in 1..65536");
        } else {
            return fl_cli_usage_error(cmd, "unknown argument '%s'", a);
        }
    }

    float *x = NULL;
    size_t R = rows, C = cols;
    if (input) {
        fl_array arr;
        char err[512];
        if (fl_npy_read(&arr, input, err, sizeof err)) {
            fprintf(stderr, "fp8lab quant: %s\n", err);
            return FL_EXIT_FAIL;
        }
        if ((arr.dtype != FL_DT_F32 && arr.dtype != FL_DT_F64) || arr.count == 0) {
            fprintf(stderr, "fp8lab quant: %s: need a non-empty float32 or float64 array, got %s with %zu elements\n",
                    input, fl_dtype_name(arr.dtype), arr.count);
            fl_array_free(&arr);
            return FL_EXIT_FAIL;
        }
        C = arr.ndim == 0 ? 1 : (size_t)arr.shape[arr.ndim - 1];
        R = arr.count / C;
        x = malloc(arr.count * sizeof *x);
        if (!x) {
            fl_array_free(&arr);
            fprintf(stderr, "fp8lab quant: out of memory\n");
            return FL_EXIT_FAIL;
        }
        size_t bad = 0;
        for (size_t i = 0; i < arr.count; i++) {
            x[i] = arr.dtype == FL_DT_F32 ? ((float *)arr.data)[i] : (float)((double *)arr.data)[i];
            bad += !isfinite(x[i]);
        }
        fl_array_free(&arr);
        if (bad) {
            fprintf(stderr, "fp8lab quant: %s: %zu elements are NaN or Inf (or overflow float32); the study needs finite data\n",
                    input, bad);
            free(x);
            return FL_EXIT_FAIL;
        }
    } else {
        x = malloc(R * C * sizeof *x);
        if (!x)
            return FL_EXIT_FAIL;
        synthesize(x, R, C, seed);
    }

    size_t nan_count;
    const float amax = fl_amax_f32(&nan_count, x, R * C);
    double ss = 0;
    for (size_t i = 0; i < R * C; i++)
        ss += (double)x[i] * x[i];
    const double rms = sqrt(ss / (double)(R * C));

    const fl_format fmts[] = { FL_FMT_E4M3, FL_FMT_E5M2, FL_FMT_BF16, FL_FMT_FP16, FL_FMT_E2M1, FL_FMT_E3M2 };
    const scheme schemes[] = {
        { "none", FL_BLOCK_TENSOR, 0, FL_MX_FLOOR },      { "tensor", FL_BLOCK_TENSOR, 0, FL_MX_FLOOR },
        { "row", FL_BLOCK_ROW, 0, FL_MX_FLOOR },          { "1x128", FL_BLOCK_1X128, 0, FL_MX_FLOOR },
        { "mx32-floor", FL_BLOCK_MX, 1, FL_MX_FLOOR },    { "mx32-ceil", FL_BLOCK_MX, 1, FL_MX_CEIL },
    };
    uint8_t *q = malloc(R * C * 2);
    float *back = malloc(R * C * sizeof *back);
    float *amaxb = malloc(R * C * sizeof *amaxb), *scale = malloc(R * C * sizeof *scale), *sinv = malloc(R * C * sizeof *sinv);
    uint8_t *mxs = malloc(R * ((C + 31) / 32));
    if (!q || !back || !amaxb || !scale || !sinv || !mxs)
        return FL_EXIT_FAIL;

    json_t *results = json_array();
    if (!json) {
        printf("fp8lab quant: %s, %zu x %zu, amax %.6g, rms %.6g, amax/rms %.1f\n",
               input ? input : "synthetic activations", R, C, amax, rms, amax / rms);
        if (!input)
            printf("  (synthetic: Student-t(3) bulk, 4 outlier channels x200 on 2%% of tokens, token 0 x1000; seed %llu)\n", seed);
        printf("  %-6s %-11s %11s %11s %11s %12s\n", "format", "scaling", "saturated", "clipped", "flushed", "rel.error");
    }
    for (size_t fi = 0; fi < sizeof fmts / sizeof fmts[0]; fi++) {
        const fl_format f = fmts[fi];
        for (size_t si = 0; si < sizeof schemes / sizeof schemes[0]; si++) {
            const scheme *sc = &schemes[si];
            const int wide = fl_format_get(f)->bits > 8;
            if (wide && si > 1)
                continue; /* 16-bit formats: no scaling and per-tensor only */
            if (sc->mx && wide)
                continue;
            fl_quant_stats st;
            memset(&st, 0, sizeof st);
            if (sc->mx) {
                fl_mx_quantize(mxs, q, &st, x, R, C, f, sc->rule);
                fl_mx_dequantize(back, mxs, q, R, C, f);
            } else if (wide) {
                /* 16-bit: plain (optionally scaled) conversion; scaling = tensor-wise multiply. */
                const float s = si == 0 ? 1.0f : fl_scale_from_amax(f, amax, 1.0f, 0, 0);
                const fl_format_desc *d = fl_format_get(f);
                const double max = fl_format_max(f);
                for (size_t i = 0; i < R * C; i++) {
                    const float v = x[i] * s;
                    const uint32_t c = fl_encode_f32_bits(d, fl_f32_bits(v), FL_RND_NE, FL_OVF_NOSATURATE, 0);
                    const float y = fl_decode_f32(d, c);
                    st.n++;
                    st.n_sat += fabs(v) > max;
                    st.n_clip += isinf(y);
                    st.n_ftz += v != 0 && y == 0;
                    back[i] = y / s;
                }
            } else {
                size_t nr, nc;
                fl_block_grid(&nr, &nc, sc->block, R, C);
                if (si == 0) {
                    for (size_t i = 0; i < nr * nc; i++)
                        scale[i] = 1.0f;
                } else {
                    size_t nn;
                    fl_amax_blocks(amaxb, &nn, x, R, C, sc->block);
                    fl_scale_blocks(scale, amaxb, nr * nc, f, 0, 0.0f);
                }
                fl_scale_invert(sinv, scale, nr * nc);
                fl_quantize(q, &st, x, R, C, scale, sc->block, f);
                fl_dequantize(back, q, R, C, sinv, sc->block, f);
            }
            double num = 0;
            for (size_t i = 0; i < R * C; i++) {
                const double e = (double)back[i] - x[i];
                num += e * e;
            }
            const double rel = sqrt(num / ss);
            const double n = (double)(R * C);
            if (json) {
                json_t *o = json_object();
                json_object_set_new(o, "format", json_string(fl_format_name(f)));
                json_object_set_new(o, "scaling", json_string(sc->name));
                json_object_set_new(o, "saturated", json_integer((json_int_t)st.n_sat));
                json_object_set_new(o, "clipped", json_integer((json_int_t)st.n_clip));
                json_object_set_new(o, "flushed_to_zero", json_integer((json_int_t)st.n_ftz));
                json_object_set_new(o, "relative_error", json_real(rel));
                json_array_append_new(results, o);
            } else {
                printf("  %-6s %-11s %10.4f%% %10.4f%% %10.4f%% %12.3e\n", fl_format_name(f), sc->name, 100 * st.n_sat / n,
                       100 * st.n_clip / n, 100 * st.n_ftz / n, rel);
            }
        }
    }
    if (json) {
        json_t *root = json_object();
        json_object_set_new(root, "source", json_string(input ? input : "synthetic"));
        if (!input)
            json_object_set_new(root, "seed", json_integer((json_int_t)seed));
        json_object_set_new(root, "rows", json_integer((json_int_t)R));
        json_object_set_new(root, "cols", json_integer((json_int_t)C));
        json_object_set_new(root, "amax", json_real(amax));
        json_object_set_new(root, "rms", json_real(rms));
        json_object_set_new(root, "results", results);
        char *s = json_dumps(root, JSON_INDENT(2) | JSON_REAL_PRECISION(9));
        puts(s);
        free(s);
        json_decref(root);
    } else {
        json_decref(results);
        printf("saturated: |x*scale| > max (stored as max); clipped: beyond the RNE overflow boundary (error > 1/2 ulp; 16-bit: Inf)\n");
    }
    free(x);
    free(q);
    free(back);
    free(amaxb);
    free(scale);
    free(sinv);
    free(mxs);
    return FL_EXIT_OK;
}
