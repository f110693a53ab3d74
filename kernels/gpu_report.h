/* gpu_report.h — the host side of `make gpu-bench` / `make gpu-check` (tests/gpu_bench.cu): the
 * bandwidth and roofline arithmetic, the results file and the Markdown tables.  Plain C with no CUDA
 * in it, so that it is unit-tested on machines without a device (tests/test_gpu_report.c).
 *
 * Peak memory bandwidth.  cudaDeviceGetAttribute gives the memory clock (cudaDevAttrMemoryClockRate,
 * kHz) and the bus width (cudaDevAttrGlobalMemoryBusWidth, bits); HBM and GDDR move data on both
 * clock edges, so
 *     peak bytes/s = clock_kHz * 1e3 * 2 * bus_bits / 8.
 * (An H100 SXM reports 2619 MHz and 5120 bits: 3.35 TB/s, NVIDIA's datasheet figure.)  The practical
 * ceiling is a plain copy kernel of the same size, timed in the same run: a kernel's "of copy" is
 * copy_ms / kernel_ms for the same number of bytes moved.
 */
#ifndef FL_GPU_REPORT_H
#define FL_GPU_REPORT_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Goals (kernels/README.md): elementwise kernels at >= 85% of the copy kernel's bandwidth; the FP8
   GEMM >= 1.6x cuBLASLt BF16 at 8192^3. */
#define FL_GPU_GOAL_OF_COPY 0.85
#define FL_GPU_GOAL_FP8_OVER_BF16 1.6

double fl_gpu_peak_bw(double mem_clock_khz, int bus_bits); /* bytes/s */
double fl_gpu_gbps(double bytes, double ms);               /* 1e9 bytes/s; 0 when ms <= 0 */
double fl_gpu_tflops(double m, double n, double k, double ms); /* 2mnk / t in 1e12/s; 0 when ms <= 0 */
/* The median of v[0..n) (sorts v in place); NaN for n == 0.  Even n: mean of the middle two. */
double fl_gpu_median(double *v, size_t n);

typedef struct {
    char name[256];
    int cc_major, cc_minor;
    int driver_version, runtime_version; /* cudaDriverGetVersion / cudaRuntimeGetVersion: 13000 = 13.0 */
    double mem_clock_khz;
    int bus_bits;
    int sm_count;
} fl_gpu_info;

/* One bandwidth-bound kernel run: elems elements moving bytes_per_elem bytes each (README's table);
   ms is the median kernel time, copy_ms the copy kernel's for the same bytes. */
typedef struct {
    char family[32], pass[16], variant[64];
    double elems, bytes_per_elem, ms, copy_ms;
} fl_gpu_bw_row;

/* One GEMM: D (M, N) = A (M, K) B (K, N); kind "fp8" or "bf16"; fast: FP8 fast accumulation. */
typedef struct {
    char kind[8];
    size_t m, n, k;
    int fast;
    double ms;
} fl_gpu_gemm_row;

/* Time of variant over base (e.g. Smooth-SwiGLU over SwiGLU, same shape and formats). */
typedef struct {
    char what[96];
    double base_ms, ms;
} fl_gpu_overhead;

typedef struct {
    fl_gpu_info dev;
    char date[32]; /* UTC, ISO 8601 */
    fl_gpu_bw_row *bw;
    size_t n_bw;
    fl_gpu_gemm_row *gemm;
    size_t n_gemm;
    fl_gpu_overhead *over;
    size_t n_over;
} fl_gpu_bench;

/* The ratio FP8 time / BF16 time turned into a speed-up for the GEMM row g: the BF16 row with the
   same shape, or 0 when there is none. */
double fl_gpu_gemm_speedup(const fl_gpu_bench *b, const fl_gpu_gemm_row *g);

/* Results file: one JSON object (device, peak, every row with its derived figures, the goals and
   whether they are met).  Written atomically (temporary file, fsync, rename).  Returns 0, or -1 with
   err naming the path. */
int fl_gpu_bench_write_json(const fl_gpu_bench *b, const char *path, char *err, size_t errlen);

/* The Markdown tables for kernels/README.md: bandwidth, GEMM, overheads. */
void fl_gpu_bench_markdown(const fl_gpu_bench *b, FILE *f);

/* The device ULP table: one Markdown row per `fp8lab ulp --json` report (outputs, correctly rounded,
   faithful, max ulp, worst input in hex, class mismatches).  fl_gpu_ulp_markdown_head prints the
   header; fl_gpu_ulp_markdown_row returns -1 (printing nothing) for a report missing a field. */
void fl_gpu_ulp_markdown_head(FILE *f);
int fl_gpu_ulp_markdown_row(FILE *f, const char *name, const char *ulp_json_text);

/* gpu-check's one results file: OUTDIR/gpu-check.json = { "gpu_test": {"exit_status": rc},
   "bench": <OUTDIR/bench.json>, "ulp": { NAME: <OUTDIR/ulp_NAME.json>, ... } } and OUTDIR/gpu-check.md
   (the bench tables and the ULP table), both written atomically.  A missing or malformed input file
   is an error naming it (nothing written).  Returns 0 or -1. */
int fl_gpu_check_assemble(const char *outdir, int gpu_test_rc, const char *const *names, size_t n_names,
                          char *err, size_t errlen);

/* A sweep run without judging (gpu_bench sweep --no-judge): per twin, the inputs run and the outputs
   that differ from the CPU twin's, bit for bit.  No accuracy is claimed. */
typedef struct {
    char name[64];
    unsigned long long inputs;
    char coverage[64];  /* "all", or which chunks of the pairs ran */
    unsigned long long mismatches;
    int twin;           /* 1: the CPU twin ran in the device's place (--twin, the CPU test of the pipeline) */
} fl_gpu_cmp_row;

/* OUTDIR/sweep-compare.json = { "judged": false, "jobs": [ {name, inputs, coverage, mismatches, runner} ] },
   written atomically.  Returns 0 or -1. */
int fl_gpu_sweep_compare_write(const char *path, const fl_gpu_cmp_row *rows, size_t n, char *err, size_t errlen);

/* gpu-check's results without judging: OUTDIR/gpu-check.json = { "gpu_test": {"exit_status": rc},
   "bench": <bench.json>, "sweep": <sweep-compare.json> } (no "ulp") and OUTDIR/gpu-check.md (the bench
   tables, then the comparison table and a line saying that the sweep was not judged).  Errors as
   fl_gpu_check_assemble. */
int fl_gpu_check_assemble_compared(const char *outdir, int gpu_test_rc, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

#endif /* FL_GPU_REPORT_H */
