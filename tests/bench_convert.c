/* bench_convert.c — float32 -> e4m3 / e5m2 / bf16 / fp16 conversion throughput next to memcpy of the
 * same buffer and next to the peers (PyTorch's copy_ into a preallocated tensor, ml_dtypes' astype),
 * all measured in one run.  GB/s of float32 INPUT, best of 9 (the machines are shared and noisy):
 *   - fp8lab on the instruction set it picks at run time, on 1 and 2 threads, and on the plain
 *     loops (FP8LAB_ISA=scalar: what a CPU without AVX2 runs);
 *   - the peers from tests/bench_convert_peers.py, run by $PYTHON (default python3) when it has
 *     torch or ml_dtypes; otherwise the table says they were skipped and why;
 *   - `fp8lab convert` of a 256 MiB .npy on 1 and 2 threads next to `cp` of the same file;
 *   - the decodes e4m3 / e5m2 / bf16 / fp16 -> float32 (fl_convert_to_f32), GB/s of float32 OUTPUT,
 *     single thread, on every instruction-set level up to the one in force, in the same rounds as
 *     the peers' decodes (torch copy_ into a float32 tensor and .to(torch.float32); ml_dtypes astype).
 * Data: uniform in [-0.5, 0.5) scaled by 2^(i mod 13) (many binades, some beyond e4m3's max); the
 * decodes read that data's RNE encodings.
 * Usage: bench_convert [decode]   (decode: only the decode table) */
#include "convert.h"
#include "convert_simd.h"

#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

enum { REPS = 9, NFMT = 4 };
static const fl_format fmts[NFMT] = { FL_FMT_E4M3, FL_FMT_E5M2, FL_FMT_BF16, FL_FMT_FP16 };

/* Peer rates parsed from bench_convert_peers.py --machine: [peer][format + 1], index 0 the copy. */
typedef struct {
    char name[128];
    double gbps[1 + NFMT];
    int sat[1 + NFMT]; /* whether the peer's cast saturates (probed by the script) */
    double dec[NFMT];    /* decode into float32: torch copy_ into a float32 tensor, ml_dtypes astype */
    double dec_to[NFMT]; /* torch only: .to(torch.float32), allocating */
    int have;
} peer;

/* which: "--encode" (float32 -> formats) or "--decode" (formats -> float32) */
static void run_peers(peer *p, int np, char *why, size_t why_len, const char *which)
{
    const char *py = getenv("PYTHON") ? getenv("PYTHON") : "python3";
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s tests/bench_convert_peers.py --machine %s 2>&1", py, which);
    FILE *f = popen(cmd, "r");
    snprintf(why, why_len, "%.64s could not be run", py);
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char who[32], ver[64], what[16], sat[8] = "";
        double g;
        if (!strncmp(line, "skipped: ", 9)) {
            line[strcspn(line, "\n")] = 0;
            snprintf(why, why_len, "%.64s: %.400s", py, line + 9);
        } else if (sscanf(line, "peer %31s %63s %15s %lf %7s", who, ver, what, &g, sat) >= 4) {
            const int k = !strcmp(who, "torch") ? 0 : 1;
            if (k >= np)
                continue;
            snprintf(p[k].name, sizeof p[k].name, "%s %s", who, ver);
            p[k].have = 1;
            for (int j = 0; j <= NFMT; j++) {
                char dec[32], dec_to[32];
                if (j) {
                    snprintf(dec, sizeof dec, "%s-f32", fl_format_name(fmts[j - 1]));
                    snprintf(dec_to, sizeof dec_to, "%s-f32to", fl_format_name(fmts[j - 1]));
                    if (!strcmp(what, dec))
                        p[k].dec[j - 1] = g;
                    if (!strcmp(what, dec_to))
                        p[k].dec_to[j - 1] = g;
                }
                if (!strcmp(what, j ? fl_format_name(fmts[j - 1]) : "copy")) {
                    p[k].gbps[j] = g;
                    p[k].sat[j] = !strcmp(sat, "sat");
                }
            }
        }
    }
    pclose(f);
}

/* Buffers on transparent huge pages where the kernel offers them (madvise mode): numpy asks for them
   for every array of 4 MiB or more, so the peers' tensors (torch.from_numpy) have them too, and the
   rates compare the same kind of memory. */
static void *big_alloc(size_t bytes)
{
    const size_t huge = (size_t)2 << 20;
    void *p = aligned_alloc(huge, (bytes + huge - 1) / huge * huge);
    if (p)
        madvise(p, bytes, MADV_HUGEPAGE);
    return p;
}

/* Best-of-REPS rate, GB/s of input, of fl_convert_from_f32 on `threads`. */
static double rate(void *dst, fl_format to, const float *src, size_t n, fl_rounding mode, fl_overflow ovf, int threads)
{
    omp_set_num_threads(threads);
    double best = 1e30;
    for (int r = 0; r < REPS; r++) {
        const double t = now();
        fl_convert_from_f32(dst, to, src, n, mode, ovf, 42, 0);
        const double dt = now() - t;
        best = dt < best ? dt : best;
    }
    return (double)n * 4 / best * 1e-9;
}

/* Best-of-REPS rate, GB/s of float32 output, of fl_convert_to_f32 on instruction-set level isa. */
static double dec_rate(float *dst, fl_format from, const void *codes, size_t n, int isa)
{
    fl_convert_set_isa(isa);
    double best = 1e30;
    for (int r = 0; r < REPS; r++) {
        const double t = now();
        fl_convert_to_f32(dst, from, codes, n);
        const double dt = now() - t;
        best = dt < best ? dt : best;
    }
    return (double)n * 4 / best * 1e-9;
}

/* Keeps each peer's better rate of two runs. */
static void peers_merge(peer *p, const peer *again, int np)
{
    for (int k = 0; k < np; k++) {
        if (again[k].have && !p[k].have) {
            memcpy(p[k].name, again[k].name, sizeof p[k].name);
            p[k].have = 1;
        }
        for (int j = 0; j <= NFMT; j++)
            if (again[k].gbps[j] > p[k].gbps[j]) {
                p[k].gbps[j] = again[k].gbps[j];
                p[k].sat[j] = again[k].sat[j];
            }
        for (int j = 0; j < NFMT; j++) {
            p[k].dec[j] = fmax(p[k].dec[j], again[k].dec[j]);
            p[k].dec_to[j] = fmax(p[k].dec_to[j], again[k].dec_to[j]);
        }
    }
}

static void fmt_rate(char *buf, size_t len, double g) { g > 0 ? snprintf(buf, len, "%.2f", g) : snprintf(buf, len, "-"); }
static void fmt_ratio(char *buf, size_t len, double a, double b)
{
    a > 0 && b > 0 ? snprintf(buf, len, "%.2fx", a / b) : snprintf(buf, len, "-");
}

/* The decode table: fl_convert_to_f32 of src's RNE encodings in each format, every level up to the
   one in force, single thread, interleaved with the peers in two rounds (each rate the better). */
static void decode_bench(const float *src, size_t n, uint8_t *codes, float *out, double mc1)
{
    const int isa = fl_convert_isa(), top = isa < FL_ISA_AVX512 ? isa : FL_ISA_AVX512;
    double rates[NFMT][FL_ISA_AVX512 + 1] = { { 0 } }; /* [format][scalar, avx2, avx512] */
    peer peers[2], again[2];
    memset(peers, 0, sizeof peers);
    char why[600];
    omp_set_num_threads(1);
    for (int round = 0; round < 2; round++) {
        memset(again, 0, sizeof again);
        run_peers(again, 2, why, sizeof why, "--decode");
        peers_merge(peers, again, 2);
        for (int f = 0; f < NFMT; f++) {
            const fl_overflow ovf = fl_format_storage_bytes(fmts[f]) == 1 ? FL_OVF_SATURATE : FL_OVF_NOSATURATE;
            fl_convert_from_f32(codes, fmts[f], src, n, FL_RND_NE, ovf, 0, 0);
            for (int l = FL_ISA_SCALAR; l <= top; l++)
                rates[f][l] = fmax(rates[f][l], dec_rate(out, fmts[f], codes, n, l));
        }
    }
    fl_convert_set_isa(isa);
    printf("decode: %zu codes -> float32 (%zu MiB out), best of %d, GB/s of float32 OUTPUT, 1 thread; CPU %s, levels up to %s\n",
           n, n * 4 >> 20, REPS, fl_isa_name(fl_cpu_isa()), fl_isa_name(top));
    if (!peers[0].have && !peers[1].have)
        printf("peers skipped: %s\n", why);
    for (int k = 0; k < 2; k++)
        if (peers[k].have)
            printf("peer %s%s\n", peers[k].name,
                   k == 0 ? ": copy_ into a preallocated float32 tensor, and .to(torch.float32) (allocates)" : ": astype(float32) (allocates)");
    printf("\n%-10s %7s %7s %7s %7s | %7s %7s %7s | %9s %9s %9s %9s\n", "decode", "scalar", "avx2", "avx512", "memcpy",
           "trch cp", "trch to", "ml_dtyp", "avx2/cp", "avx512/cp", "top/to", "top/ml");
    for (int f = 0; f < NFMT; f++) {
        const double *r = rates[f];
        const double best = r[top];
        char c[10][16], name[32];
        fmt_rate(c[0], 16, r[FL_ISA_SCALAR]);
        fmt_rate(c[1], 16, top >= FL_ISA_AVX2 ? r[FL_ISA_AVX2] : 0);
        fmt_rate(c[2], 16, top >= FL_ISA_AVX512 ? r[FL_ISA_AVX512] : 0);
        fmt_rate(c[3], 16, peers[0].dec[f]);
        fmt_rate(c[4], 16, peers[0].dec_to[f]);
        fmt_rate(c[5], 16, peers[1].dec[f]);
        fmt_ratio(c[6], 16, top >= FL_ISA_AVX2 ? r[FL_ISA_AVX2] : 0, peers[0].dec[f]);
        fmt_ratio(c[7], 16, top >= FL_ISA_AVX512 ? r[FL_ISA_AVX512] : 0, peers[0].dec[f]);
        fmt_ratio(c[8], 16, best, peers[0].dec_to[f]);
        fmt_ratio(c[9], 16, best, peers[1].dec[f]);
        snprintf(name, sizeof name, "%s->f32", fl_format_name(fmts[f]));
        printf("%-10s %7s %7s %7s %6.0f%% | %7s %7s %7s | %9s %9s %9s %9s\n", name, c[0], c[1], c[2],
               mc1 > 0 ? 100 * best / mc1 : 0.0, c[3], c[4], c[5], c[6], c[7], c[8], c[9]);
    }
    printf("(top: the highest level measured; memcpy: top's rate over the 1-thread memcpy rate of the same 64 MiB;\n"
           " cp: torch copy_, to: torch .to(torch.float32), ml: ml_dtypes astype; two rounds of (peers, fp8lab),\n"
           " each rate the better of the two)\n\n");
}

static double memcpy_rate(float *dst, const float *src, size_t n, int threads)
{
    double best = 1e30;
    for (int r = 0; r < REPS; r++) {
        const double t = now();
#pragma omp parallel num_threads(threads)
        {
            const size_t per = (n + (size_t)omp_get_num_threads() - 1) / (size_t)omp_get_num_threads();
            const size_t lo = per * (size_t)omp_get_thread_num(), hi = lo + per < n ? lo + per : n;
            if (lo < hi)
                memcpy(dst + lo, src + lo, (hi - lo) * sizeof *src);
        }
        const double dt = now() - t;
        best = dt < best ? dt : best;
    }
    return (double)n * 4 / best * 1e-9;
}

/* `fp8lab convert` of a 256 MiB float32 .npy, 1 and 2 threads, next to cp: best of 3 each. */
static int cli_bench(const float *src, size_t n)
{
    const char *cli = getenv("FP8LAB") ? getenv("FP8LAB") : "build/fp8lab";
    char dir[] = "/tmp/fp8lab-bench-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char in[128];
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
    if (fclose(fp))
        return 1;
    char cmds[3][512];
    snprintf(cmds[0], sizeof cmds[0], "cp %s %s/copy.npy", in, dir);
    for (int t = 1; t <= 2; t++)
        snprintf(cmds[t], sizeof cmds[t], "%s convert --threads %d --to e4m3 %s %s/out.npy", cli, t, in, dir);
    double best[3] = { 1e30, 1e30, 1e30 };
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) {
            const double t = now();
            if (system(cmds[c]))
                return 1;
            const double dt = now() - t;
            best[c] = dt < best[c] ? dt : best[c];
        }
    printf("256 MiB .npy: cp %.3f s; fp8lab convert --to e4m3: 1 thread %.3f s (%.2fx cp), 2 threads %.3f s (%.2fx cp)\n",
           best[0], best[1], best[1] / best[0], best[2], best[2] / best[0]);
    char cleanup[256];
    snprintf(cleanup, sizeof cleanup, "rm -rf %s", dir);
    return system(cleanup) != 0;
}

int main(int argc, char **argv)
{
    const int decode_only = argc > 1 && !strcmp(argv[1], "decode");
    const size_t n = (size_t)64 << 20 >> 2; /* 64 MiB of float32: far beyond the caches */
    float *src = big_alloc(n * sizeof *src);
    float *copy = big_alloc(n * sizeof *copy);
    uint8_t *dst = big_alloc(n * 4);
    if (!src || !copy || !dst)
        return 1;
    uint64_t s = 0x1234567ull;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const double u = (double)(s >> 11) / 9007199254740992.0;
        src[i] = (float)((u - 0.5) * (1 << (i % 13)));
    }
    memset(copy, 1, n * sizeof *copy);
    memset(dst, 1, n * 4);

    if (decode_only) {
        decode_bench(src, n, dst, copy, memcpy_rate(copy, src, n, 1));
        free(src);
        free(copy);
        free(dst);
        return 0;
    }
    /* the peers run before and after fp8lab's rows, and keep their better rate of the two */
    peer peers[2], again[2];
    memset(peers, 0, sizeof peers);
    memset(again, 0, sizeof again);
    char why[600];
    run_peers(peers, 2, why, sizeof why, "--encode");

    const double mc1 = memcpy_rate(copy, src, n, 1), mc2 = memcpy_rate(copy, src, n, 2);
    const int isa = fl_convert_isa();
    /* Two rounds, each the peers then fp8lab; every rate is the best of its two rounds (the host is
       shared: a round can lose a core or its memory bandwidth for seconds) */
    double rates[NFMT][2][2][3] = { 0 }; /* [format][sr][sat][1 thread, 2 threads, scalar loops] */
    for (int round = 0; round < 2; round++) {
        if (round)
            run_peers(again, 2, why, sizeof why, "--encode");
        for (int f = 0; f < NFMT; f++)
            for (int sr = 0; sr < 2; sr++)
                for (int sat = 0; sat < 2; sat++) {
                    const fl_rounding mode = sr ? FL_RND_SR : FL_RND_NE;
                    const fl_overflow ovf = sat ? FL_OVF_SATURATE : FL_OVF_NOSATURATE;
                    double *r = rates[f][sr][sat];
                    r[0] = fmax(r[0], rate(dst, fmts[f], src, n, mode, ovf, 1));
                    r[1] = fmax(r[1], rate(dst, fmts[f], src, n, mode, ovf, 2));
                    fl_convert_set_isa(FL_ISA_SCALAR);
                    r[2] = fmax(r[2], rate(dst, fmts[f], src, n, mode, ovf, 1));
                    fl_convert_set_isa(isa);
                }
    }
    peers_merge(peers, again, 2);

    printf("bench_convert: %zu float32 (%zu MiB), best of %d, GB/s of float32 input; CPU %s, conversions on %s\n", n,
           n * 4 >> 20, REPS, fl_isa_name(fl_cpu_isa()), fl_isa_name(isa));
    printf("memcpy: 1 thread %.2f GB/s, 2 threads %.2f GB/s\n", mc1, mc2);
    for (int k = 0; k < 2; k++)
        if (peers[k].have)
            printf("peer %s: float32 copy %.2f GB/s%s\n", peers[k].name, peers[k].gbps[0],
                   k == 0 ? " (copy_ into a preallocated tensor, 1 thread)" : " (np.copyto)");
    if (!peers[0].have && !peers[1].have)
        printf("peers skipped: %s\n", why);
    printf("\n%-22s %8s %7s %8s %6s %8s | %8s %8s %8s\n", "conversion", "fp8lab", "memcpy", "2 thr", "scale", "scalar",
           "torch", "fp8/trch", "ml_dtyp");
    for (int f = 0; f < NFMT; f++)
        for (int sr = 0; sr < 2; sr++)
            for (int sat = 1; sat >= 0; sat--) {
                const double *r = rates[f][sr][sat];
                char name[64], tp[16] = "-", ratio[16] = "-", ml[16] = "-";
                snprintf(name, sizeof name, "f32->%s %s %s", fl_format_name(fmts[f]), sr ? "sr" : "rne", sat ? "sat" : "nosat");
                /* each peer's round-to-nearest-even cast sits beside fp8lab's of the same overflow policy */
                if (!sr && peers[0].have && peers[0].gbps[1 + f] > 0 && peers[0].sat[1 + f] == sat) {
                    snprintf(tp, sizeof tp, "%.2f", peers[0].gbps[1 + f]);
                    snprintf(ratio, sizeof ratio, "%.2fx", r[0] / peers[0].gbps[1 + f]);
                }
                if (!sr && peers[1].have && peers[1].gbps[1 + f] > 0 && peers[1].sat[1 + f] == sat)
                    snprintf(ml, sizeof ml, "%.2f", peers[1].gbps[1 + f]);
                printf("%-22s %8.2f %6.0f%% %8.2f %5.2fx %8.2f | %8s %8s %8s\n", name, r[0], 100 * r[0] / mc1, r[1],
                       r[1] / r[0], r[2], tp, ratio, ml);
            }
    printf("(fp8lab: 1 thread; memcpy: fp8lab's rate over the 1-thread memcpy rate; 2 thr: 2 threads; scale: 2 thr / 1;\n"
           " scalar: FP8LAB_ISA=scalar, 1 thread; two rounds of (peers, fp8lab), each rate the best of its two;\n"
           " a peer's cast sits on the row of its overflow policy, probed: torch 2.15's e4m3 saturates)\n\n");
    decode_bench(src, n, dst, copy, mc1);
    free(copy);
    free(dst);
    const int rc = cli_bench(src, n);
    free(src);
    return rc;
}
