/* cmd_convert.c — `fp8lab convert`: elementwise conversion of a .npy array into a format.
 *
 * The file is streamed in chunks (read, convert, write), so memory stays small and the cost stays
 * close to copying the file.  Output goes to a temporary file renamed onto OUT only on success.
 */
#include "commands.h"
#include "common/cli.h"
#include "convert.h"
#include "fl_round.h"
#include "npy.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

static const char *const help =
    "usage: fp8lab convert --to FMT [--from FMT] [--round rne|rtz|up|down|sr] [--seed N]\n"
    "                      [--saturate|--no-saturate] [--stats] [--threads N] IN.npy OUT.npy\n"
    "\n"
    "Converts every element of IN.npy into FMT and writes OUT.npy with the same shape (and order).\n"
    "  IN.npy     float32, float64 or float16, either endianness; or, with --from FMT, encodings of\n"
    "             FMT stored as uint8 (8-bit and narrower formats), uint16 (bf16; fp16 also as\n"
    "             float16) or uint32/float32 (fp32).  float64 input is rounded once, directly.\n"
    "  OUT.npy    float32 for --to fp32, float16 for --to fp16, otherwise the encodings: uint16 for\n"
    "             bf16, uint8 for 8-bit and narrower formats (e2m1/e3m2/e2m3 in the low bits).\n"
    "  --to FMT       target format: fp32 bf16 fp16 e4m3 e5m2 e8m0 e3m2 e2m3 e2m1 e4m3fnuz e5m2fnuz\n"
    "  --round MODE   rne (default), rtz, up, down, or sr (stochastic: 32 random bits per element\n"
    "                 from a counter-based generator seeded by --seed, default 0; reproducible)\n"
    "  --saturate     overflow and +-Inf give +-max (the default for 8-bit and narrower targets,\n"
    "                 as NVIDIA's __NV_SATFINITE and the hardware cvt.rn.satfinite)\n"
    "  --no-saturate  IEEE overflow: Inf where the format has one, else NaN (the default for\n"
    "                 fp32/bf16/fp16, as __float2bfloat16_rn); e3m2/e2m3/e2m1 always saturate\n"
    "  --stats        print counts of NaN, overflowed/saturated and flushed-to-zero elements\n"
    "  --threads N    OpenMP threads for the conversion (default: OMP_NUM_THREADS or all cores);\n"
    "                 the output's bits do not depend on it\n"
    "The float32 conversions into e4m3/e5m2/bf16/fp16, and the decoding of 8- and 16-bit formats to\n"
    "float32, run on the CPU's vector instructions (AVX2, AVX-512, AVX512_BF16), chosen at run time;\n"
    "FP8LAB_ISA=scalar|avx2|avx512 caps the choice.\n"
    "NaN inputs become the format's canonical NaN (NVIDIA's choice: e4m3/e5m2 0x7f, bf16/fp16 0x7fff).\n";

typedef struct {
    unsigned long long nan_in, inf_in, overflow, flushed;
} convert_stats;

static void stats_update(convert_stats *st, fl_format to, const float *x, const void *codes, size_t n)
{
    const double max = fl_format_max(to);
    const fl_format_desc *d = fl_format_get(to);
    for (size_t i = 0; i < n; i++) {
        const float v = x[i];
        if (isnan(v)) {
            st->nan_in++;
            continue;
        }
        if (isinf(v)) {
            st->inf_in++;
            continue;
        }
        const uint32_t c = fl_format_storage_bytes(to) == 1 ? ((const uint8_t *)codes)[i]
                         : fl_format_storage_bytes(to) == 2 ? ((const uint16_t *)codes)[i]
                                                            : ((const uint32_t *)codes)[i];
        const float y = fl_decode_f32(d, c);
        if (fabs(v) > max)
            st->overflow++;
        else if (v != 0 && y == 0)
            st->flushed++;
    }
}

/* The dtype an encoding of f is stored as, and whether a given input dtype may carry it. */
static fl_dtype storage_dtype(fl_format f)
{
    if (f == FL_FMT_FP32)
        return FL_DT_F32;
    if (f == FL_FMT_FP16)
        return FL_DT_F16;
    return fl_format_storage_bytes(f) == 1 ? FL_DT_U8 : FL_DT_U16;
}

static int accepts_encoding(fl_format f, fl_dtype t)
{
    if (f == FL_FMT_FP32)
        return t == FL_DT_F32 || t == FL_DT_U32;
    if (f == FL_FMT_FP16)
        return t == FL_DT_F16 || t == FL_DT_U16;
    return t == storage_dtype(f);
}

/* The command line. */
typedef struct {
    fl_format to, from; /* FL_FMT_COUNT: not given */
    fl_rounding mode;
    fl_overflow ovf;
    int ovf_set, stats, help;
    unsigned long long seed;
    const char *paths[2]; /* IN.npy OUT.npy */
    int npaths;
} convert_opts;

/* argv into o (--threads takes effect at once): FL_EXIT_OK or a usage error.  --help prints the help
   and ends the parse with o->help set. */
static int parse_args(convert_opts *o, int argc, char **argv)
{
    const char *cmd = "convert";
    *o = (convert_opts){ .to = FL_FMT_COUNT, .from = FL_FMT_COUNT, .mode = FL_RND_NE, .ovf = FL_OVF_SATURATE };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const int has_val = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(help, stdout);
            o->help = 1;
            return FL_EXIT_OK;
        } else if (!strcmp(a, "--to") || !strcmp(a, "--from")) {
            if (!has_val)
                return fl_cli_usage_error(cmd, "%s needs a format name", a);
            fl_format *dst = a[2] == 't' ? &o->to : &o->from;
            if (fl_format_parse(dst, argv[++i]))
                return fl_cli_usage_error(cmd, "unknown format '%s' for %s (formats: %s)", argv[i], a,
                                          fl_format_names());
        } else if (!strcmp(a, "--round")) {
            if (!has_val || fl_rounding_parse(&o->mode, argv[++i]))
                return fl_cli_usage_error(cmd, "--round needs one of rne, rtz, up, down, sr%s%s%s",
                                          has_val ? " (got '" : "", has_val ? argv[i] : "", has_val ? "')" : "");
        } else if (!strcmp(a, "--seed")) {
            if (!has_val || fl_cli_parse_u64(&o->seed, argv[++i]))
                return fl_cli_usage_error(cmd, "--seed needs a non-negative integer%s%s%s", has_val ? " (got '" : "",
                                          has_val ? argv[i] : "", has_val ? "')" : "");
        } else if (!strcmp(a, "--saturate") || !strcmp(a, "--no-saturate")) {
            o->ovf = a[2] == 's' ? FL_OVF_SATURATE : FL_OVF_NOSATURATE;
            o->ovf_set = 1;
        } else if (!strcmp(a, "--stats")) {
            o->stats = 1;
        } else if (!strcmp(a, "--threads")) {
            unsigned long long t = 0;
            if (!has_val || fl_cli_parse_u64(&t, argv[++i]) || t < 1 || t > 1024)
                return fl_cli_usage_error(cmd, "--threads needs an integer from 1 to 1024%s%s%s", has_val ? " (got '" : "",
                                          has_val ? argv[i] : "", has_val ? "')" : "");
            omp_set_num_threads((int)t);
        } else if (a[0] == '-' && a[1] != '\0') {
            return fl_cli_usage_error(cmd, "unknown option '%s'", a);
        } else {
            if (o->npaths == 2)
                return fl_cli_usage_error(cmd, "too many arguments: '%s' (expected IN.npy OUT.npy)", a);
            o->paths[o->npaths++] = a;
        }
    }
    if (o->to == FL_FMT_COUNT)
        return fl_cli_usage_error(cmd, "--to FMT is required (formats: %s)", fl_format_names());
    if (o->npaths != 2)
        return fl_cli_usage_error(cmd, "expected IN.npy OUT.npy");
    if (!o->ovf_set)
        o->ovf = fl_format_get(o->to)->bits <= 8 ? FL_OVF_SATURATE : FL_OVF_NOSATURATE;
    return FL_EXIT_OK;
}

/* IN's dtype t: with --from, one that holds its encodings; else a float dtype.  0, or -1 after the
   message. */
static int check_input_dtype(const convert_opts *o, fl_dtype t)
{
    if (o->from != FL_FMT_COUNT) {
        if (!accepts_encoding(o->from, t)) {
            fprintf(stderr, "fp8lab convert: %s: dtype %s cannot hold %s encodings (expected %s)\n", o->paths[0],
                    fl_dtype_name(t), fl_format_name(o->from), fl_dtype_name(storage_dtype(o->from)));
            return -1;
        }
    } else if (t != FL_DT_F32 && t != FL_DT_F64 && t != FL_DT_F16) {
        fprintf(stderr, "fp8lab convert: %s: dtype %s is not a float array; pass --from FMT if it holds encodings\n",
                o->paths[0], fl_dtype_name(t));
        return -1;
    }
    return 0;
}

/* Reads r (elements of dtype in_dt), converts and writes w, one chunk at a time: the element count
   into *done, the --stats counts into *st.  FL_EXIT_OK, or FL_EXIT_FAIL after the message. */
static int convert_stream(fl_npy_reader *r, fl_npy_writer *w, const convert_opts *o, fl_dtype in_dt, uint64_t *done,
                          convert_stats *st)
{
    /* What the input means: doubles are rounded directly; everything else is first decoded,
       exactly, to float32. */
    const fl_format in_fmt = o->from != FL_FMT_COUNT ? o->from : in_dt == FL_DT_F16 ? FL_FMT_FP16 : FL_FMT_FP32;
    const int in_f64 = o->from == FL_FMT_COUNT && in_dt == FL_DT_F64;
    const size_t chunk = (size_t)1 << 20;
    void *in = malloc(chunk * 8);
    float *f32 = malloc(chunk * sizeof *f32);
    void *out = malloc(chunk * 4);
    char err[512];
    int rc = FL_EXIT_OK;
    if (!in || !f32 || !out) {
        fprintf(stderr, "fp8lab convert: out of memory\n");
        rc = FL_EXIT_FAIL;
    }
    while (rc == FL_EXIT_OK) {
        const long long got = fl_npy_reader_read(r, in, chunk, err, sizeof err);
        if (got < 0) {
            fprintf(stderr, "fp8lab convert: %s\n", err);
            rc = FL_EXIT_FAIL;
            break;
        }
        if (got == 0)
            break;
        const size_t n = (size_t)got;
        const float *x = in;
        if (in_f64) {
            fl_convert_from_f64(out, o->to, in, n, o->mode, o->ovf, o->seed, *done);
            if (o->stats)
                for (size_t i = 0; i < n; i++)
                    f32[i] = (float)((const double *)in)[i]; /* only for counting */
        } else {
            if (in_fmt != FL_FMT_FP32 || in_dt == FL_DT_U32) {
                fl_convert_to_f32(f32, in_fmt, in, n);
                x = f32;
            }
            fl_convert_from_f32(out, o->to, x, n, o->mode, o->ovf, o->seed, *done);
        }
        if (o->stats)
            stats_update(st, o->to, in_f64 ? f32 : x, out, n);
        if (fl_npy_writer_write(w, out, n, err, sizeof err)) {
            fprintf(stderr, "fp8lab convert: %s\n", err);
            rc = FL_EXIT_FAIL;
        }
        *done += n;
    }
    free(in);
    free(f32);
    free(out);
    return rc;
}

int fl_cmd_convert(int argc, char **argv)
{
    convert_opts o;
    int rc = parse_args(&o, argc, argv);
    if (rc != FL_EXIT_OK || o.help)
        return rc;

    char err[512];
    fl_array hdr;
    fl_npy_reader *r = fl_npy_reader_open(o.paths[0], &hdr, err, sizeof err);
    if (!r) {
        fprintf(stderr, "fp8lab convert: %s\n", err);
        return FL_EXIT_FAIL;
    }
    if (check_input_dtype(&o, hdr.dtype)) {
        fl_npy_reader_close(r);
        return FL_EXIT_FAIL;
    }
    fl_array out_hdr = hdr;
    out_hdr.dtype = storage_dtype(o.to);
    fl_npy_writer *w = fl_npy_writer_open(o.paths[1], &out_hdr, err, sizeof err);
    if (!w) {
        fprintf(stderr, "fp8lab convert: %s\n", err);
        fl_npy_reader_close(r);
        return FL_EXIT_FAIL;
    }

    convert_stats st = { 0, 0, 0, 0 };
    uint64_t done = 0;
    rc = convert_stream(r, w, &o, hdr.dtype, &done, &st);
    fl_npy_reader_close(r);
    if (rc != FL_EXIT_OK) {
        fl_npy_writer_abort(w);
        return rc;
    }
    if (fl_npy_writer_commit(w, err, sizeof err)) {
        fprintf(stderr, "fp8lab convert: %s\n", err);
        return FL_EXIT_FAIL;
    }
    if (o.stats)
        fprintf(stderr,
                "fp8lab convert: %llu elements to %s (%s, %s): %llu NaN in, %llu Inf in, %llu beyond max "
                "(|x| > %.9g), %llu flushed to zero\n",
                (unsigned long long)done, fl_format_name(o.to), fl_rounding_name(o.mode),
                o.ovf == FL_OVF_SATURATE ? "saturate" : "no-saturate", st.nan_in, st.inf_in, st.overflow,
                fl_format_max(o.to), st.flushed);
    return FL_EXIT_OK;
}
