/* gpu_report.c — see gpu_report.h. */
#include "gpu_report.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fl_io.h"

double fl_gpu_peak_bw(double mem_clock_khz, int bus_bits)
{
    return mem_clock_khz * 1e3 * 2.0 * (double)bus_bits / 8.0;
}

double fl_gpu_gbps(double bytes, double ms) { return ms > 0 ? bytes / (ms * 1e-3) / 1e9 : 0.0; }

double fl_gpu_tflops(double m, double n, double k, double ms)
{
    return ms > 0 ? 2.0 * m * n * k / (ms * 1e-3) / 1e12 : 0.0;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double fl_gpu_median(double *v, size_t n)
{
    if (n == 0)
        return NAN;
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double fl_gpu_gemm_speedup(const fl_gpu_bench *b, const fl_gpu_gemm_row *g)
{
    for (size_t i = 0; i < b->n_gemm; i++) {
        const fl_gpu_gemm_row *r = &b->gemm[i];
        if (!strcmp(r->kind, "bf16") && r->m == g->m && r->n == g->n && r->k == g->k && g->ms > 0)
            return r->ms / g->ms;
    }
    return 0.0;
}

/* Derived figures of a bandwidth row. */
static double bw_bytes(const fl_gpu_bw_row *r) { return r->elems * r->bytes_per_elem; }
static double bw_of_copy(const fl_gpu_bw_row *r) { return r->ms > 0 ? r->copy_ms / r->ms : 0.0; }

static json_t *bench_json(const fl_gpu_bench *b)
{
    const double peak = fl_gpu_peak_bw(b->dev.mem_clock_khz, b->dev.bus_bits);
    json_t *root = json_object(), *dev = json_object(), *bw = json_array(), *gemm = json_array(),
           *over = json_array(), *goals = json_object();
    json_object_set_new(dev, "name", json_string(b->dev.name));
    char cc[16];
    snprintf(cc, sizeof cc, "sm_%d%d", b->dev.cc_major, b->dev.cc_minor);
    json_object_set_new(dev, "compute_capability", json_string(cc));
    json_object_set_new(dev, "driver_version", json_integer(b->dev.driver_version));
    json_object_set_new(dev, "runtime_version", json_integer(b->dev.runtime_version));
    json_object_set_new(dev, "sm_count", json_integer(b->dev.sm_count));
    json_object_set_new(dev, "memory_clock_khz", json_real(b->dev.mem_clock_khz));
    json_object_set_new(dev, "bus_width_bits", json_integer(b->dev.bus_bits));
    json_object_set_new(dev, "peak_bandwidth_gbps", json_real(peak / 1e9));
    json_object_set_new(dev, "peak_source", json_string("cudaDevAttrMemoryClockRate x 2 x cudaDevAttrGlobalMemoryBusWidth / 8"));
    json_object_set_new(root, "date", json_string(b->date));
    json_object_set_new(root, "device", dev);
    int all_bw = 1;
    for (size_t i = 0; i < b->n_bw; i++) {
        const fl_gpu_bw_row *r = &b->bw[i];
        json_t *o = json_object();
        json_object_set_new(o, "family", json_string(r->family));
        json_object_set_new(o, "pass", json_string(r->pass));
        json_object_set_new(o, "variant", json_string(r->variant));
        json_object_set_new(o, "elements", json_real(r->elems));
        json_object_set_new(o, "bytes_per_element", json_real(r->bytes_per_elem));
        json_object_set_new(o, "median_ms", json_real(r->ms));
        json_object_set_new(o, "gbps", json_real(fl_gpu_gbps(bw_bytes(r), r->ms)));
        json_object_set_new(o, "of_peak", json_real(peak > 0 ? fl_gpu_gbps(bw_bytes(r), r->ms) * 1e9 / peak : 0.0));
        json_object_set_new(o, "copy_ms", json_real(r->copy_ms));
        json_object_set_new(o, "of_copy", json_real(bw_of_copy(r)));
        const int met = bw_of_copy(r) >= FL_GPU_GOAL_OF_COPY;
        all_bw &= met;
        json_object_set_new(o, "goal_met", json_boolean(met));
        json_array_append_new(bw, o);
    }
    int gemm_goal = -1; /* -1: no 8192^3 pair measured */
    for (size_t i = 0; i < b->n_gemm; i++) {
        const fl_gpu_gemm_row *r = &b->gemm[i];
        json_t *o = json_object();
        json_object_set_new(o, "kind", json_string(r->kind));
        json_object_set_new(o, "m", json_integer((json_int_t)r->m));
        json_object_set_new(o, "n", json_integer((json_int_t)r->n));
        json_object_set_new(o, "k", json_integer((json_int_t)r->k));
        json_object_set_new(o, "fast_accum", json_boolean(r->fast));
        json_object_set_new(o, "median_ms", json_real(r->ms));
        json_object_set_new(o, "tflops", json_real(fl_gpu_tflops((double)r->m, (double)r->n, (double)r->k, r->ms)));
        if (!strcmp(r->kind, "fp8")) {
            const double s = fl_gpu_gemm_speedup(b, r);
            json_object_set_new(o, "speedup_over_bf16", json_real(s));
            if (r->m == 8192 && r->n == 8192 && r->k == 8192 && s > 0)
                gemm_goal = (gemm_goal != 0) && s >= FL_GPU_GOAL_FP8_OVER_BF16 ? 1 : 0;
        }
        json_array_append_new(gemm, o);
    }
    for (size_t i = 0; i < b->n_over; i++) {
        const fl_gpu_overhead *r = &b->over[i];
        json_t *o = json_object();
        json_object_set_new(o, "what", json_string(r->what));
        json_object_set_new(o, "base_ms", json_real(r->base_ms));
        json_object_set_new(o, "ms", json_real(r->ms));
        json_object_set_new(o, "overhead", json_real(r->base_ms > 0 ? r->ms / r->base_ms - 1.0 : 0.0));
        json_array_append_new(over, o);
    }
    json_object_set_new(goals, "elementwise_of_copy", json_real(FL_GPU_GOAL_OF_COPY));
    json_object_set_new(goals, "elementwise_all_met", json_boolean(b->n_bw > 0 && all_bw));
    json_object_set_new(goals, "fp8_over_bf16_at_8192", json_real(FL_GPU_GOAL_FP8_OVER_BF16));
    json_object_set_new(goals, "fp8_gemm_met", gemm_goal < 0 ? json_null() : json_boolean(gemm_goal));
    json_object_set_new(root, "bandwidth", bw);
    json_object_set_new(root, "gemm", gemm);
    json_object_set_new(root, "overheads", over);
    json_object_set_new(root, "goals", goals);
    return root;
}

static int fill_json(FILE *f, void *ctx)
{
    return json_dumpf((json_t *)ctx, f, JSON_INDENT(1) | JSON_REAL_PRECISION(17)) || fputc('\n', f) == EOF;
}

int fl_gpu_bench_write_json(const fl_gpu_bench *b, const char *path, char *err, size_t errlen)
{
    json_t *root = bench_json(b);
    const int rc = fl_write_atomic(path, fill_json, root, err, errlen);
    json_decref(root);
    return rc;
}

void fl_gpu_bench_markdown(const fl_gpu_bench *b, FILE *f)
{
    const double peak = fl_gpu_peak_bw(b->dev.mem_clock_khz, b->dev.bus_bits);
    fprintf(f, "Measured %s on %s (sm_%d%d, %d SMs), driver %d.%d, CUDA runtime %d.%d.  Peak %.0f GB/s "
               "(memory clock %.0f MHz x 2 x %d-bit bus).\n\n",
            b->date, b->dev.name, b->dev.cc_major, b->dev.cc_minor, b->dev.sm_count, b->dev.driver_version / 1000,
            b->dev.driver_version % 1000 / 10, b->dev.runtime_version / 1000, b->dev.runtime_version % 1000 / 10,
            peak / 1e9, b->dev.mem_clock_khz / 1e3, b->dev.bus_bits);
    if (b->n_bw) {
        fprintf(f, "| kernel | pass | variant | elements | B/elem | median ms | GB/s | of peak | of copy | goal (%.0f%% of copy) |\n",
                100 * FL_GPU_GOAL_OF_COPY);
        fprintf(f, "|---|---|---|---:|---:|---:|---:|---:|---:|---|\n");
        for (size_t i = 0; i < b->n_bw; i++) {
            const fl_gpu_bw_row *r = &b->bw[i];
            const double g = fl_gpu_gbps(bw_bytes(r), r->ms);
            fprintf(f, "| %s | %s | %s | %.0f | %g | %.4f | %.0f | %.1f%% | %.1f%% | %s |\n", r->family, r->pass, r->variant,
                    r->elems, r->bytes_per_elem, r->ms, g, peak > 0 ? 100 * g * 1e9 / peak : 0.0, 100 * bw_of_copy(r),
                    bw_of_copy(r) >= FL_GPU_GOAL_OF_COPY ? "met" : "**missed**");
        }
        fputc('\n', f);
    }
    if (b->n_gemm) {
        fprintf(f, "| GEMM | M | N | K | fast accum | median ms | TFLOPS | FP8 / BF16 speed |\n");
        fprintf(f, "|---|---:|---:|---:|---|---:|---:|---:|\n");
        for (size_t i = 0; i < b->n_gemm; i++) {
            const fl_gpu_gemm_row *r = &b->gemm[i];
            const int fp8 = !strcmp(r->kind, "fp8");
            const double s = fp8 ? fl_gpu_gemm_speedup(b, r) : 0.0;
            char sp[32] = "";
            if (fp8 && s > 0)
                snprintf(sp, sizeof sp, "%.2fx", s);
            fprintf(f, "| %s | %zu | %zu | %zu | %s | %.4f | %.1f | %s |\n", fp8 ? "cuBLASLt FP8 e4m3 x e4m3 -> bf16" : "cuBLASLt BF16 -> bf16",
                    r->m, r->n, r->k, fp8 ? (r->fast ? "on" : "off") : "-", r->ms,
                    fl_gpu_tflops((double)r->m, (double)r->n, (double)r->k, r->ms), sp);
        }
        fputc('\n', f);
    }
    if (b->n_over) {
        fprintf(f, "| overhead | base ms | ms | overhead |\n|---|---:|---:|---:|\n");
        for (size_t i = 0; i < b->n_over; i++) {
            const fl_gpu_overhead *r = &b->over[i];
            fprintf(f, "| %s | %.4f | %.4f | %+.1f%% |\n", r->what, r->base_ms, r->ms,
                    r->base_ms > 0 ? 100 * (r->ms / r->base_ms - 1.0) : 0.0);
        }
        fputc('\n', f);
    }
}

/* ---- the device ULP table and the one results file ---------------------------------------------- */

void fl_gpu_ulp_markdown_head(FILE *f)
{
    fprintf(f, "| kernel (as run on the device) | function | outputs | correctly rounded | faithful | max ulp | "
               "worst input -> output (correct) | class mismatches |\n");
    fprintf(f, "|---|---|---:|---:|---:|---:|---|---:|\n");
}

static const char *hexf(const json_t *v)
{
    const char *s = json_string_value(json_object_get(v, "hexfloat"));
    return s ? s : "?";
}

static int ulp_row(FILE *f, const char *name, const json_t *r)
{
    const json_t *cnt = json_object_get(r, "count"), *cr = json_object_get(r, "correctly_rounded"),
                 *fa = json_object_get(r, "faithful"), *mu = json_object_get(r, "max_ulp"),
                 *ms = json_object_get(r, "mismatched_special"), *fnj = json_object_get(r, "function"),
                 *worst = json_object_get(r, "worst");
    if (!json_is_integer(cnt) || !json_is_integer(cr) || !json_is_integer(fa) || !json_is_number(mu) ||
        !json_is_integer(ms) || !json_is_string(fnj) || json_integer_value(cnt) <= 0)
        return -1;
    if (!f)
        return 0; /* validation only */
    const double n = (double)json_integer_value(cnt);
    char w[256] = "-";
    const json_t *w0 = json_array_get(worst, 0);
    if (w0) {
        int o = 0;
        const json_t *ins = json_object_get(w0, "inputs");
        for (size_t k = 0; k < json_array_size(ins) && o < 200; k++)
            o += snprintf(w + o, sizeof w - (size_t)o, "%s%s", k ? ", " : "", hexf(json_array_get(ins, k)));
        snprintf(w + o, sizeof w - (size_t)o, " -> %s (%s)", hexf(json_object_get(w0, "output")),
                 hexf(json_object_get(w0, "reference")));
    }
    fprintf(f, "| `%s` | %s | %.0f | %.4f%% | %.4f%% | %.6g | %s | %lld |\n", name, json_string_value(fnj), n,
            100.0 * (double)json_integer_value(cr) / n, 100.0 * (double)json_integer_value(fa) / n,
            json_number_value(mu), w, (long long)json_integer_value(ms));
    return 0;
}

int fl_gpu_ulp_markdown_row(FILE *f, const char *name, const char *ulp_json_text)
{
    json_error_t je;
    json_t *r = json_loads(ulp_json_text, 0, &je);
    if (!r)
        return -1;
    const int rc = ulp_row(f, name, r);
    json_decref(r);
    return rc;
}

/* gpu-check.md: bench.md as gpu-bench wrote it, then the device ULP table. */
typedef struct {
    const char *bench_md;
    json_t *ulp; /* NAME -> report */
    const char *const *names;
    size_t n;
} check_md;

static int fill_check_md(FILE *f, void *p)
{
    const check_md *m = p;
    fputs(m->bench_md, f);
    fl_gpu_ulp_markdown_head(f);
    for (size_t i = 0; i < m->n; i++)
        if (ulp_row(f, m->names[i], json_object_get(m->ulp, m->names[i])))
            return -1;
    return 0;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (len + 1 == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb)
                free(buf);
            buf = nb;
        }
    }
    fclose(f);
    if (buf)
        buf[len] = 0;
    return buf;
}

/* The part of gpu-check.json both assemblies share: root.gpu_test.exit_status and root.bench (OUTDIR/bench.json);
   *bench_md gets OUTDIR/bench.md (the caller frees it).  -1 with err on a missing or malformed file. */
static int assemble_head(json_t *root, char **bench_md, const char *outdir, int gpu_test_rc, char *err, size_t errlen)
{
    char path[4096];
    json_error_t je;
    json_t *t = json_object();
    json_object_set_new(t, "exit_status", json_integer(gpu_test_rc));
    json_object_set_new(root, "gpu_test", t);
    snprintf(path, sizeof path, "%s/bench.json", outdir);
    json_t *bench = json_load_file(path, 0, &je);
    if (!bench) {
        snprintf(err, errlen, "%s: %s (line %d)", path, je.text, je.line);
        return -1;
    }
    json_object_set_new(root, "bench", bench);
    snprintf(path, sizeof path, "%s/bench.md", outdir);
    if (!(*bench_md = slurp(path))) {
        snprintf(err, errlen, "%s: cannot read it", path);
        return -1;
    }
    return 0;
}

/* The part both assemblies end with: OUTDIR/gpu-check.md from fill_md(md), then OUTDIR/gpu-check.json
   from root, each written atomically. */
static int assemble_write(const char *outdir, fl_fill_fn fill_md, void *md, json_t *root, char *err,
                          size_t errlen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/gpu-check.md", outdir);
    if (fl_write_atomic(path, fill_md, md, err, errlen))
        return -1;
    snprintf(path, sizeof path, "%s/gpu-check.json", outdir);
    return fl_write_atomic(path, fill_json, root, err, errlen) ? -1 : 0;
}

int fl_gpu_check_assemble(const char *outdir, int gpu_test_rc, const char *const *names, size_t n_names, char *err,
                          size_t errlen)
{
    char path[4096];
    json_error_t je;
    int rc = -1;
    json_t *root = json_object(), *ulp = json_object();
    char *bench_md = NULL;
    if (assemble_head(root, &bench_md, outdir, gpu_test_rc, err, errlen))
        goto out;
    for (size_t i = 0; i < n_names; i++) {
        snprintf(path, sizeof path, "%s/ulp_%s.json", outdir, names[i]);
        json_t *r = json_load_file(path, 0, &je);
        if (!r) {
            snprintf(err, errlen, "%s: %s (line %d)", path, je.text, je.line);
            goto out;
        }
        json_object_set_new(ulp, names[i], r);
        if (ulp_row(NULL, names[i], r)) {
            snprintf(err, errlen, "%s: not an `fp8lab ulp --json` report (a field is missing)", path);
            goto out;
        }
    }
    json_object_set(root, "ulp", ulp);
    check_md m = { bench_md, ulp, names, n_names };
    rc = assemble_write(outdir, fill_check_md, &m, root, err, errlen);
out:
    free(bench_md);
    json_decref(ulp);
    json_decref(root);
    return rc;
}

int fl_gpu_sweep_compare_write(const char *path, const fl_gpu_cmp_row *rows, size_t n, char *err, size_t errlen)
{
    json_t *root = json_object(), *jobs = json_array();
    json_object_set_new(root, "judged", json_false());
    for (size_t i = 0; i < n; i++) {
        json_t *r = json_object();
        json_object_set_new(r, "name", json_string(rows[i].name));
        json_object_set_new(r, "inputs", json_integer((json_int_t)rows[i].inputs));
        json_object_set_new(r, "coverage", json_string(rows[i].coverage));
        json_object_set_new(r, "mismatches", json_integer((json_int_t)rows[i].mismatches));
        json_object_set_new(r, "runner", json_string(rows[i].twin ? "CPU twin" : "device"));
        json_array_append_new(jobs, r);
    }
    json_object_set_new(root, "jobs", jobs);
    const int rc = fl_write_atomic(path, fill_json, root, err, errlen);
    json_decref(root);
    return rc;
}

/* gpu-check.md without judging: bench.md, then one row per twin of the comparison. */
typedef struct {
    const char *bench_md;
    const json_t *jobs;
} compared_md;

static int fill_compared_md(FILE *f, void *p)
{
    const compared_md *m = p;
    fputs(m->bench_md, f);
    fprintf(f, "Device sweep compared with the CPU twins bit for bit and **not judged** against MPFR "
               "(GPU_CHECK_JUDGE=0): no accuracy is claimed here; the twins' accuracy is `make twin-table`'s.\n\n");
    fprintf(f, "| kernel (as run) | runner | inputs | coverage | outputs differing from the twin |\n");
    fprintf(f, "|---|---|---:|---|---:|\n");
    for (size_t i = 0; i < json_array_size(m->jobs); i++) {
        const json_t *r = json_array_get(m->jobs, i);
        fprintf(f, "| `%s` | %s | %lld | %s | %lld |\n", json_string_value(json_object_get(r, "name")),
                json_string_value(json_object_get(r, "runner")), (long long)json_integer_value(json_object_get(r, "inputs")),
                json_string_value(json_object_get(r, "coverage")),
                (long long)json_integer_value(json_object_get(r, "mismatches")));
    }
    return 0;
}

int fl_gpu_check_assemble_compared(const char *outdir, int gpu_test_rc, char *err, size_t errlen)
{
    char path[4096];
    json_error_t je;
    int rc = -1;
    json_t *root = json_object();
    char *bench_md = NULL;
    if (assemble_head(root, &bench_md, outdir, gpu_test_rc, err, errlen))
        goto out;
    snprintf(path, sizeof path, "%s/sweep-compare.json", outdir);
    json_t *sw = json_load_file(path, 0, &je);
    if (!sw) {
        snprintf(err, errlen, "%s: %s (line %d)", path, je.text, je.line);
        goto out;
    }
    json_object_set_new(root, "sweep", sw);
    const json_t *jobs = json_object_get(sw, "jobs");
    int ok = json_is_false(json_object_get(sw, "judged")) && json_is_array(jobs);
    for (size_t i = 0; ok && i < json_array_size(jobs); i++) {
        const json_t *r = json_array_get(jobs, i);
        ok = json_is_string(json_object_get(r, "name")) && json_is_integer(json_object_get(r, "inputs")) &&
             json_is_string(json_object_get(r, "coverage")) && json_is_integer(json_object_get(r, "mismatches")) &&
             json_is_string(json_object_get(r, "runner"));
    }
    if (!ok) {
        snprintf(err, errlen, "%s: not a `gpu_bench sweep --no-judge` report (a field is missing)", path);
        goto out;
    }
    compared_md m = { bench_md, jobs };
    rc = assemble_write(outdir, fill_compared_md, &m, root, err, errlen);
out:
    free(bench_md);
    json_decref(root);
    return rc;
}
