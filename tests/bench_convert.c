/* bench_convert.c — float32 -> e4m3 / e5m2 / bf16 / fp16 conversion throughput, single-threaded,
 * next to memcpy of the same input buffer in the same run.  Reports GB/s of INPUT bytes and the
 * ratio to memcpy; best of several repetitions (the machines are shared and noisy). */
#include "convert.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

int main(void)
{
    const size_t n = (size_t)64 << 20 >> 2; /* 64 MiB of float32: far beyond the caches */
    const int reps = 7;
    float *src = malloc(n * sizeof *src);
    float *copy = malloc(n * sizeof *copy);
    uint8_t *dst = malloc(n * 4);
    if (!src || !copy || !dst)
        return 1;
    /* Activations-like data: normal values over many binades, some beyond e4m3's max. */
    uint64_t s = 0x1234567ull;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const double u = (double)(s >> 11) / 9007199254740992.0;
        src[i] = (float)((u - 0.5) * (1 << (i % 13)));
    }
    memset(copy, 1, n * sizeof *copy);
    memset(dst, 1, n * 4);

    const double bytes = (double)n * sizeof(float);
    double best_copy = 1e30;
    for (int r = 0; r < reps; r++) {
        double t = now();
        memcpy(copy, src, n * sizeof *src);
        t = now() - t;
        if (t < best_copy)
            best_copy = t;
    }
    printf("bench_convert: %zu float32 (%.0f MiB), single thread, best of %d\n", n, bytes / (1 << 20), reps);
    printf("  %-22s %8.2f GB/s\n", "memcpy", bytes / best_copy * 1e-9);
    const fl_format fmts[] = { FL_FMT_E4M3, FL_FMT_E5M2, FL_FMT_BF16, FL_FMT_FP16 };
    const fl_overflow ovfs[] = { FL_OVF_SATURATE, FL_OVF_NOSATURATE };
    for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++)
        for (int o = 0; o < 2; o++) {
            double best = 1e30;
            for (int r = 0; r < reps; r++) {
                double t = now();
                fl_convert_from_f32(dst, fmts[f], src, n, FL_RND_NE, ovfs[o], 0, 0);
                t = now() - t;
                if (t < best)
                    best = t;
            }
            char name[64];
            snprintf(name, sizeof name, "f32->%s rne %s", fl_format_name(fmts[f]), o ? "nosat" : "sat");
            printf("  %-22s %8.2f GB/s  %5.1f%% of memcpy\n", name, bytes / best * 1e-9, 100 * best_copy / best);
        }
    /* The generic path (stochastic rounding) for comparison. */
    double best = 1e30;
    for (int r = 0; r < 3; r++) {
        double t = now();
        fl_convert_from_f32(dst, FL_FMT_E4M3, src, n, FL_RND_SR, FL_OVF_SATURATE, 42, 0);
        t = now() - t;
        if (t < best)
            best = t;
    }
    printf("  %-22s %8.2f GB/s  %5.1f%% of memcpy\n", "f32->e4m3 sr sat", bytes / best * 1e-9, 100 * best_copy / best);
    free(copy);
    free(dst);

    /* End to end: `fp8lab convert --to e4m3` of a 256 MiB float32 .npy next to `cp` of the same
       file, both as child processes, best of 3 (goal: convert <= 1.5x cp). */
    const char *cli = getenv("FP8LAB") ? getenv("FP8LAB") : "build/fp8lab";
    char dir[] = "/tmp/fp8lab-bench-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char in[128], cmd_cp[512], cmd_cv[512];
    snprintf(in, sizeof in, "%s/in.npy", dir);
    FILE *fp = fopen(in, "wb");
    if (!fp)
        return 1;
    const size_t big = (size_t)256 << 20 >> 2;
    char header[128];
    int hl = snprintf(header, sizeof header, "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu,), }", big);
    while ((10 + hl + 1) % 64)
        header[hl++] = ' ';
    header[hl++] = '\n';
    const unsigned char pre[10] = { 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hl & 0xff), (unsigned char)(hl >> 8) };
    fwrite(pre, 1, 10, fp);
    fwrite(header, 1, (size_t)hl, fp);
    for (size_t done = 0; done < big; done += n)
        fwrite(src, sizeof *src, big - done < n ? big - done : n, fp);
    fclose(fp);
    snprintf(cmd_cp, sizeof cmd_cp, "cp %s %s/copy.npy", in, dir);
    snprintf(cmd_cv, sizeof cmd_cv, "%s convert --to e4m3 %s %s/out.npy", cli, in, dir);
    double best_cp = 1e30, best_cv = 1e30;
    for (int r = 0; r < 3; r++) {
        double t = now();
        if (system(cmd_cp))
            return 1;
        t = now() - t;
        best_cp = t < best_cp ? t : best_cp;
        t = now();
        if (system(cmd_cv))
            return 1;
        t = now() - t;
        best_cv = t < best_cv ? t : best_cv;
    }
    printf("  256 MiB .npy: cp %.3f s, fp8lab convert --to e4m3 %.3f s: %.2fx cp (goal <= 1.5x)\n", best_cp,
           best_cv, best_cv / best_cp);
    char cleanup[256];
    snprintf(cleanup, sizeof cleanup, "rm -rf %s", dir);
    if (system(cleanup))
        return 1;
    free(src);
    return 0;
}
