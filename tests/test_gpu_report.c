/* test_gpu_report.c — the host side of make gpu-bench / gpu-check (kernels/gpu_report.c) on the CPU:
 * bandwidth and roofline arithmetic, the median, the results file writer (atomic, round trip through
 * jansson), the Markdown tables, and the assembly of gpu-check.json from the per-kernel reports, with its
 * errors on a missing or malformed report.  Also the one atomic writer (numerics/fl_io.c). */
#include <jansson.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "fl_io.h"
#include "gpu_report.h"

static char dir[] = "/tmp/fl_gpu_report_XXXXXX";

static void put(const char *name, const char *text)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    CHECK(f && fputs(text, f) >= 0 && fclose(f) == 0, "write %s", p);
}

static int exists(const char *name)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

static int fail_fill(FILE *f, void *ctx)
{
    (void)ctx;
    fputs("half", f);
    return -1;
}

static int ok_fill(FILE *f, void *ctx) { return fputs((const char *)ctx, f) < 0; }

static const char *k_ulp =
    "{\"function\": \"swiglu\", \"count\": 4, \"correctly_rounded\": 3, \"faithful\": 4, \"mismatched_special\": 0,"
    " \"max_ulp\": 0.75, \"worst\": [{\"inputs\": [{\"hexfloat\": \"0x1p+0\"}, {\"hexfloat\": \"-0x1.8p-3\"}],"
    " \"output\": {\"hexfloat\": \"0x1.2p-2\"}, \"reference\": {\"hexfloat\": \"0x1.4p-2\"}}]}";

int main(void)
{
    /* an H100 SXM: 2619 MHz, 5120-bit HBM3 -> 3.352 TB/s (NVIDIA's 3.35 TB/s) */
    CHECK(fabs(fl_gpu_peak_bw(2619000.0, 5120) - 3.35232e12) < 1e6, "H100 peak %g", fl_gpu_peak_bw(2619000.0, 5120));
    CHECK(fl_gpu_gbps(1e9, 1.0) == 1000.0, "1 GB in 1 ms = 1000 GB/s");
    CHECK(fl_gpu_gbps(1e9, 0.0) == 0.0, "no time, no rate");
    CHECK(fabs(fl_gpu_tflops(8192, 8192, 8192, 1.0) - 1099.511627776) < 1e-6, "8192^3 in 1 ms");
    double v[] = { 5, 1, 4, 2, 3 }, w[] = { 4, 1, 3, 2 };
    CHECK(fl_gpu_median(v, 5) == 3.0 && fl_gpu_median(w, 4) == 2.5 && isnan(fl_gpu_median(w, 0)), "median");

    CHECK(mkdtemp(dir), "mkdtemp");
    char err[1024], path[512];
    /* the atomic writer: a failing fill leaves nothing behind and names the path */
    snprintf(path, sizeof path, "%s/a.txt", dir);
    CHECK(fl_write_atomic(path, fail_fill, NULL, err, sizeof err) == -1 && strstr(err, path) && !exists("a.txt"),
          "failed fill: %s", err);
    CHECK(fl_write_atomic(path, ok_fill, "whole", err, sizeof err) == 0 && exists("a.txt"), "ok fill");
    CHECK(fl_write_atomic("/nonexistent-dir/x.json", ok_fill, "x", err, sizeof err) == -1 &&
              strstr(err, "/nonexistent-dir/x.json"),
          "bad directory: %s", err);

    /* a bench: one bandwidth row at exactly 85% of copy (met), one below, GEMMs with the 8192^3 pair */
    fl_gpu_bw_row bw[2] = { { "SwiGLU", "fwd", "bf16 -> bf16", 1e9, 6, 2.0, 1.7 }, { "PolyNorm", "fwd", "r=3", 1e9, 4, 2.0, 1.0 } };
    fl_gpu_gemm_row gm[3] = { { "fp8", 8192, 8192, 8192, 0, 0.75 }, { "bf16", 8192, 8192, 8192, 0, 1.5 }, { "fp8", 64, 64, 64, 1, 0.01 } };
    fl_gpu_overhead ov[1] = { { "smooth over swiglu", 1.0, 1.25 } };
    fl_gpu_bench b;
    memset(&b, 0, sizeof b);
    snprintf(b.dev.name, sizeof b.dev.name, "Test GPU");
    b.dev.cc_major = 9, b.dev.driver_version = 13000, b.dev.runtime_version = 13000, b.dev.mem_clock_khz = 2619000, b.dev.bus_bits = 5120;
    snprintf(b.date, sizeof b.date, "2026-11-25T00:00:00Z");
    b.bw = bw, b.n_bw = 2, b.gemm = gm, b.n_gemm = 3, b.over = ov, b.n_over = 1;
    CHECK(fl_gpu_gemm_speedup(&b, &gm[0]) == 2.0 && fl_gpu_gemm_speedup(&b, &gm[2]) == 0.0, "speed-up");
    snprintf(path, sizeof path, "%s/bench.json", dir);
    CHECK(fl_gpu_bench_write_json(&b, path, err, sizeof err) == 0, "%s", err);
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    CHECK(j, "bench.json parses: %s", je.text);
    json_t *r0 = json_array_get(json_object_get(j, "bandwidth"), 0), *r1 = json_array_get(json_object_get(j, "bandwidth"), 1);
    CHECK(fabs(json_real_value(json_object_get(r0, "gbps")) - 3000.0) < 1e-9, "6 GB in 2 ms = 3000 GB/s");
    CHECK(fabs(json_real_value(json_object_get(r0, "of_copy")) - 0.85) < 1e-12 && json_is_true(json_object_get(r0, "goal_met")), "85%% of copy is met");
    CHECK(json_is_false(json_object_get(r1, "goal_met")), "50%% of copy is missed");
    CHECK(fabs(json_real_value(json_object_get(r0, "of_peak")) - 3000e9 / fl_gpu_peak_bw(2619000, 5120)) < 1e-12, "of peak");
    json_t *g = json_object_get(j, "goals");
    CHECK(json_is_false(json_object_get(g, "elementwise_all_met")) && json_is_true(json_object_get(g, "fp8_gemm_met")), "goals");
    CHECK(fabs(json_real_value(json_object_get(json_array_get(json_object_get(j, "overheads"), 0), "overhead")) - 0.25) < 1e-12, "overhead");
    json_decref(j);

    /* the Markdown tables */
    char *md = NULL;
    size_t mdlen = 0;
    FILE *mf = open_memstream(&md, &mdlen);
    fl_gpu_bench_markdown(&b, mf);
    fclose(mf);
    CHECK(strstr(md, "| SwiGLU | fwd | bf16 -> bf16 | 1000000000 | 6 | 2.0000 | 3000 |") && strstr(md, "| 85.0% | met |") &&
              strstr(md, "**missed**") && strstr(md, "| 2.00x |") && strstr(md, "+25.0%") && strstr(md, "driver 13.0"),
          "markdown:\n%s", md);
    free(md);
    mf = open_memstream(&md, &mdlen);
    CHECK(fl_gpu_ulp_markdown_row(mf, "swiglu_bf16", k_ulp) == 0, "ulp row");
    CHECK(fl_gpu_ulp_markdown_row(mf, "bad", "{\"count\": 4}") == -1, "a report missing fields is refused");
    fclose(mf);
    CHECK(!strcmp(md, "| `swiglu_bf16` | swiglu | 4 | 75.0000% | 100.0000% | 0.75 | 0x1p+0, -0x1.8p-3 -> 0x1.2p-2 (0x1.4p-2) | 0 |\n"),
          "ulp row: %s", md);
    free(md);

    /* assembly: bench.json + bench.md + every ulp_NAME.json -> gpu-check.json / .md; errors name the file */
    const char *names[] = { "swiglu_bf16", "polyrelu3_bf16" };
    put("bench.md", "BENCH TABLES\n");
    put("ulp_swiglu_bf16.json", k_ulp);
    CHECK(fl_gpu_check_assemble(dir, 0, names, 2, err, sizeof err) == -1 && strstr(err, "ulp_polyrelu3_bf16.json") &&
              !exists("gpu-check.json"),
          "missing report: %s", err);
    put("ulp_polyrelu3_bf16.json", "{\"function\": \"polyrelu\"}");
    CHECK(fl_gpu_check_assemble(dir, 0, names, 2, err, sizeof err) == -1 && strstr(err, "ulp_polyrelu3_bf16.json") &&
              strstr(err, "not an") && !exists("gpu-check.json"),
          "malformed report: %s", err);
    put("ulp_polyrelu3_bf16.json", "{\"function\": ");
    CHECK(fl_gpu_check_assemble(dir, 0, names, 2, err, sizeof err) == -1 && strstr(err, "ulp_polyrelu3_bf16.json"), "bad JSON: %s", err);
    put("ulp_polyrelu3_bf16.json", k_ulp);
    CHECK(fl_gpu_check_assemble(dir, 3, names, 2, err, sizeof err) == 0, "%s", err);
    snprintf(path, sizeof path, "%s/gpu-check.json", dir);
    j = json_load_file(path, 0, &je);
    CHECK(j && json_integer_value(json_object_get(json_object_get(j, "gpu_test"), "exit_status")) == 3 &&
              json_integer_value(json_object_get(json_object_get(json_object_get(j, "ulp"), "polyrelu3_bf16"), "count")) == 4 &&
              json_is_object(json_object_get(json_object_get(j, "bench"), "device")),
          "gpu-check.json holds gpu-test's status, the bench and the reports");
    json_decref(j);

    /* a sweep compared with the twins and not judged: its report, then gpu-check without an accuracy table */
    snprintf(path, sizeof path, "%s/sweep-compare.json", dir);
    CHECK(fl_gpu_check_assemble_compared(dir, 0, err, sizeof err) == -1 && strstr(err, "sweep-compare.json"), "missing: %s", err);
    put("sweep-compare.json", "{\"judged\": true, \"jobs\": []}");
    CHECK(fl_gpu_check_assemble_compared(dir, 0, err, sizeof err) == -1 && strstr(err, "not a"), "a judged report is refused: %s", err);
    fl_gpu_cmp_row cr[2] = { { "silu_bf16", 65536, "all", 0, 0 }, { "swiglu_bf16", 1ull << 32, "all", 2, 0 } };
    CHECK(fl_gpu_sweep_compare_write(path, cr, 2, err, sizeof err) == 0, "%s", err);
    CHECK(fl_gpu_check_assemble_compared(dir, 1, err, sizeof err) == 0, "%s", err);
    snprintf(path, sizeof path, "%s/gpu-check.json", dir);
    j = json_load_file(path, 0, &je);
    json_t *sj = json_array_get(json_object_get(json_object_get(j, "sweep"), "jobs"), 1);
    CHECK(j && !json_object_get(j, "ulp") && json_is_false(json_object_get(json_object_get(j, "sweep"), "judged")) &&
              json_integer_value(json_object_get(sj, "inputs")) == 1ll << 32 && json_integer_value(json_object_get(sj, "mismatches")) == 2 &&
              json_integer_value(json_object_get(json_object_get(j, "gpu_test"), "exit_status")) == 1,
          "gpu-check.json: the comparison, no ulp reports");
    json_decref(j);
    snprintf(path, sizeof path, "%s/gpu-check.md", dir);
    FILE *cf = fopen(path, "r");
    char gmd[4096] = "";
    CHECK(cf && fread(gmd, 1, sizeof gmd - 1, cf) > 0, "read gpu-check.md");
    fclose(cf);
    CHECK(strstr(gmd, "BENCH TABLES") && strstr(gmd, "not judged") && strstr(gmd, "| `swiglu_bf16` | device | 4294967296 | all | 2 |") &&
              !strstr(gmd, "correctly rounded"),
          "gpu-check.md without judging:\n%s", gmd);

    /* tidy */
    const char *files[] = { "a.txt", "bench.json", "bench.md", "ulp_swiglu_bf16.json", "ulp_polyrelu3_bf16.json", "gpu-check.json", "gpu-check.md",
                            "sweep-compare.json" };
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
    PASS("test_gpu_report");
}
