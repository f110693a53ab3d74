/* bench_cast.c — the cast engine (numerics/cast.h), the training harness's casts, on one thread at
 * every instruction-set level this CPU has, next to memcpy of the same buffer in the same run.
 * GB/s of float32 INPUT (a fake-quantising cast reads and writes 4 bytes per element, as memcpy
 * does), best of 7 (the machines are shared and noisy), 64 MiB:
 *   e4m3 / e5m2   RNE with a per-tensor scale (the X, W and dY casts of fp8-delayed and fp8-current)
 *   e5m2 SR       stochastic rounding with a scale (the dY casts with --grad-sr)
 *   bf16          RNE without scales (every bf16 site)
 *   e4m3 cols     RNE with per-column smoothing (Smooth-SwiGLU's down-projection input)
 *   reference     the element-by-element reference loop (fl_encode_f32_bits + fl_decode_f32), e4m3
 * Data: normal-like values (sum of four uniforms, |x| < 2) times 2^(i mod 7 - 3), cast with the scale 24
 * (|v| < 384: nothing saturates, as under a delayed scale that maps the amax history to 448); many
 * small values land on the subnormal grids.
 * Usage: bench_cast */
#include "cast.h"
#include "convert.h"
#include "convert_simd.h"

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

enum { REPS = 7, NCASE = 6 };

static const char *const case_names[NCASE] = { "e4m3", "e5m2", "e5m2 SR", "bf16", "e4m3 cols", "reference" };

static double run_case(int c, int isa, float *y, const float *x, size_t n, const float *cs, const float *csi)
{
    fl_cast_fmt f = { FL_FMT_E4M3, 0, 0, 0, 0x5EEDull, 0 };
    fl_cast_scales sc = { 1.0f, 1.0f, 24.0f, 1.0f / 24.0f, NULL, NULL, 0 };
    switch (c) {
    case 1: f.fmt = FL_FMT_E5M2; break;
    case 2: f.fmt = FL_FMT_E5M2; f.sr = 1; break;
    case 3: f.fmt = FL_FMT_BF16; sc.s = sc.si = 1.0f; break;
    case 4: sc.cs = cs; sc.csi = csi; break;
    case 5: f.reference = 1; break;
    default: break;
    }
    double best = 1e30;
    const size_t C = 4096;
    for (int r = 0; r < REPS; r++) {
        fl_cast_counts k = { 0 };
        const double t0 = now();
        if (sc.cs) /* rows of 4096 columns, as the harness casts a smoothed tensor */
            for (size_t i = 0; i < n; i += C)
                fl_cast_fq_span_at(isa, y + i, x + i, C, &f, &sc, &k, NULL, NULL);
        else
            fl_cast_fq_span_at(isa, y, x, n, &f, &sc, &k, NULL, NULL);
        const double t = now() - t0;
        best = t < best ? t : best;
    }
    return (double)n * sizeof *x / best / 1e9;
}

int main(void)
{
    const size_t n = (size_t)16 << 20; /* 64 MiB of float32 */
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), *cs = malloc(4096 * sizeof *cs),
          *csi = malloc(4096 * sizeof *csi);
    if (!x || !y || !cs || !csi) {
        fprintf(stderr, "bench_cast: out of memory\n");
        return 1;
    }
    uint64_t st = 42;
    for (size_t i = 0; i < n; i++) {
        double u = 0;
        for (int k = 0; k < 4; k++)
            u += (double)(fl_splitmix64(&st) >> 11) * 0x1p-53 - 0.5;
        x[i] = (float)u * fl_pow2f((int)(i % 7) - 3);
    }
    for (size_t c = 0; c < 4096; c++) {
        cs[c] = fl_pow2f((int)(c % 5) - 2);
        csi[c] = 1.0f / cs[c];
    }
    memcpy(y, x, n * sizeof *x); /* touch */
    double mc = 0;
    for (int r = 0; r < REPS; r++) {
        const double t0 = now();
        memcpy(y, x, n * sizeof *x);
        const double g = (double)n * sizeof *x / (now() - t0) / 1e9;
        mc = g > mc ? g : mc;
    }
    static const int isas[3] = { FL_ISA_SCALAR, FL_ISA_AVX2, FL_ISA_AVX512 };
    printf("bench_cast: fake-quantising casts of 64 MiB float32, 1 thread, GB/s of input (best of %d); CPU %s\n", REPS,
           fl_isa_name(fl_cpu_isa()));
    printf("memcpy 1 thread: %.2f GB/s\n", mc);
    printf("%-10s", "cast");
    for (int l = 0; l < 3; l++)
        if (isas[l] <= fl_convert_isa())
            printf(" %8s %6s", fl_isa_name(isas[l]), "memcpy");
    printf("\n");
    for (int c = 0; c < NCASE; c++) {
        printf("%-10s", case_names[c]);
        for (int l = 0; l < 3; l++)
            if (isas[l] <= fl_convert_isa()) {
                const double g = run_case(c, isas[l], y, x, n, cs, csi);
                printf(" %8.2f %5.0f%%", g, 100.0 * g / mc);
            }
        printf("\n");
    }
    printf("(memcpy: the rate over the 1-thread memcpy of the same 64 MiB, measured at the start of this run)\n");
    free(x);
    free(y);
    free(cs);
    free(csi);
    return 0;
}
