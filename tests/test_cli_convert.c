/* test_cli_convert.c — `fp8lab convert` end to end: outputs bit for bit, dtypes and shapes,
 * double inputs rounded once, stochastic rounding reproducible, and every malformed input and bad
 * flag answered with the right exit status, a message naming the input, and no output left behind.
 * The CLI is $FP8LAB (tests/run.sh sets it), else build/fp8lab. */
#include "check.h"
#include "convert.h"
#include "fl_round.h"
#include "npy.h"

#include <dirent.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[64];
static const char *cli;

static void path_in(char *out, size_t n, const char *name) { snprintf(out, n, "%s/%s", dir, name); }

static void write_bytes(const char *name, const void *p, size_t len)
{
    char path[256];
    path_in(path, sizeof path, name);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(p, 1, len, f) == len && fclose(f) == 0, "cannot write %s", path);
}

/* A .npy version 1.0 file with the given header dict and payload. */
static void write_npy_raw(const char *name, const char *dict, const void *data, size_t len)
{
    unsigned char buf[4096];
    size_t hl = strlen(dict);
    char header[1024];
    memcpy(header, dict, hl);
    while ((10 + hl + 1) % 64)
        header[hl++] = ' ';
    header[hl++] = '\n';
    const unsigned char pre[10] = { 0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)hl, 0 };
    memcpy(buf, pre, 10);
    memcpy(buf + 10, header, hl);
    CHECK(10 + hl + len <= sizeof buf, "test file too big");
    if (len)
        memcpy(buf + 10 + hl, data, len);
    write_bytes(name, buf, 10 + hl + len);
}

/* Run the CLI with args (a shell fragment); return its exit status, stderr in err. */
static int run(char *err, size_t errlen, const char *args)
{
    char cmd[2048], errpath[256];
    path_in(errpath, sizeof errpath, "stderr.txt");
    snprintf(cmd, sizeof cmd, "%s %s >/dev/null 2>%s", cli, args, errpath);
    const int st = system(cmd);
    CHECK(st != -1 && WIFEXITED(st), "could not run: %s", cmd);
    FILE *f = fopen(errpath, "r");
    size_t n = f ? fread(err, 1, errlen - 1, f) : 0;
    err[n] = 0;
    if (f)
        fclose(f);
    unlink(errpath);
    return WEXITSTATUS(st);
}

static int exists(const char *name)
{
    char path[256];
    struct stat sb;
    path_in(path, sizeof path, name);
    return stat(path, &sb) == 0;
}

/* No file whose name contains ".tmp" remains in the directory. */
static int no_temporaries(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int ok = 1;
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".tmp"))
            ok = 0;
    closedir(d);
    return ok;
}

static void load(fl_array *a, const char *name)
{
    char path[256], err[512];
    path_in(path, sizeof path, name);
    CHECK(fl_npy_read(a, path, err, sizeof err) == 0, "cannot read back %s: %s", path, err);
}

/* Expect failure with status `want`, a message containing `phrase` (and the file name when given),
   and no output file. */
static void expect_fail(int want, const char *args, const char *phrase, const char *file)
{
    char err[4096];
    const int rc = run(err, sizeof err, args);
    CHECK(rc == want, "'fp8lab %s' exited %d, want %d; stderr: %s", args, rc, want, err);
    CHECK(strstr(err, phrase), "'fp8lab %s': message lacks '%s': %s", args, phrase, err);
    CHECK(!file || strstr(err, file), "'fp8lab %s': message does not name %s: %s", args, file, err);
    CHECK(!exists("out.npy"), "'fp8lab %s' left out.npy behind", args);
    CHECK(no_temporaries(), "'fp8lab %s' left a temporary file behind", args);
}

int main(void)
{
    cli = getenv("FP8LAB") ? getenv("FP8LAB") : "build/fp8lab";
    CHECK(access(cli, X_OK) == 0, "CLI %s not built", cli);
    snprintf(dir, sizeof dir, "/tmp/fp8lab-cli-XXXXXX");
    CHECK(mkdtemp(dir), "mkdtemp");
    char args[1024], err[4096];

    /* 1. float32 input, every target: output equals fl_encode_f32 element for element. */
    const float xs[12] = { 1.0f, 448.0f, 464.0f, 465.0f, -1e9f, 1e-3f, 0x1p-10f, 3 * 0x1p-11f, -0.0f, 57344.0f, 61440.0f, 0.3f };
    write_npy_raw("x.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }", xs, sizeof xs);
    for (int f = 0; f < FL_FMT_COUNT; f++) {
        for (int sat = 0; sat < 2; sat++) {
            snprintf(args, sizeof args, "convert --to %s %s %s/x.npy %s/out.npy", fl_format_name(f),
                     sat ? "--saturate" : "--no-saturate", dir, dir);
            CHECK(run(err, sizeof err, args) == 0, "'fp8lab %s' failed: %s", args, err);
            fl_array a;
            load(&a, "out.npy");
            CHECK(a.ndim == 2 && a.shape[0] == 3 && a.shape[1] == 4 && a.count == 12, "%s: shape not kept", args);
            const fl_dtype want = f == FL_FMT_FP32 ? FL_DT_F32 : f == FL_FMT_FP16 ? FL_DT_F16
                                : fl_format_storage_bytes(f) == 1 ? FL_DT_U8 : FL_DT_U16;
            CHECK(a.dtype == want, "%s: dtype %s, want %s", args, fl_dtype_name(a.dtype), fl_dtype_name(want));
            for (int i = 0; i < 12; i++) {
                const uint32_t w = fl_encode_f32(f, xs[i], FL_RND_NE, sat ? FL_OVF_SATURATE : FL_OVF_NOSATURATE, 0);
                const size_t b = fl_format_storage_bytes(f);
                const uint32_t got = b == 1 ? ((uint8_t *)a.data)[i] : b == 2 ? ((uint16_t *)a.data)[i] : ((uint32_t *)a.data)[i];
                CHECK(got == w, "FAIL %s x=%a got=0x%x want=0x%x", args, (double)xs[i], got, w);
            }
            fl_array_free(&a);
            char p[256];
            path_in(p, sizeof p, "out.npy");
            unlink(p);
        }
    }

    /* 2. Default overflow policy: 8-bit targets saturate, 16-bit ones do not. */
    snprintf(args, sizeof args, "convert --to e4m3 %s/x.npy %s/out.npy", dir, dir);
    CHECK(run(err, sizeof err, args) == 0, "%s: %s", args, err);
    fl_array a;
    load(&a, "out.npy");
    CHECK(((uint8_t *)a.data)[4] == 0xFE, "e4m3 default should saturate -1e9 to 0xfe, got 0x%x", ((uint8_t *)a.data)[4]);
    fl_array_free(&a);
    snprintf(args, sizeof args, "convert --to fp16 %s/x.npy %s/y.npy", dir, dir);
    CHECK(run(err, sizeof err, args) == 0, "%s: %s", args, err);
    load(&a, "y.npy");
    CHECK(((uint16_t *)a.data)[4] == 0xFC00, "fp16 default should give -Inf for -1e9, got 0x%x", ((uint16_t *)a.data)[4]);
    fl_array_free(&a);

    /* 3. float64 input is rounded once: 1 + 2^-4 + 2^-30 lies above the e4m3 midpoint between 1 and
          1.125, so it rounds up (0x39); through float32 it would become the tie 1 + 2^-4 and round
          to even, 1.0 (0x38). */
    const double xd[2] = { 1.0 + 0x1p-4 + 0x1p-30, -(1.0 + 0x1p-4 + 0x1p-30) };
    write_npy_raw("xd.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", xd, sizeof xd);
    char p_out[256];
    path_in(p_out, sizeof p_out, "out.npy");
    unlink(p_out);
    snprintf(args, sizeof args, "convert --to e4m3 %s/xd.npy %s/out.npy", dir, dir);
    CHECK(run(err, sizeof err, args) == 0, "%s: %s", args, err);
    load(&a, "out.npy");
    CHECK(((uint8_t *)a.data)[0] == 0x39 && ((uint8_t *)a.data)[1] == 0xB9,
          "FAIL e4m3 from double x=%a got=0x%x want=0x39 (double rounding?)", xd[0], ((uint8_t *)a.data)[0]);
    fl_array_free(&a);
    unlink(p_out);

    /* 4. --from: e4m3 encodings (uint8) to bf16 and fp32 decode exactly. */
    uint8_t codes[256];
    for (int i = 0; i < 256; i++)
        codes[i] = (uint8_t)i;
    write_npy_raw("codes.npy", "{'descr': '|u1', 'fortran_order': False, 'shape': (256,), }", codes, sizeof codes);
    snprintf(args, sizeof args, "convert --from e4m3 --to fp32 %s/codes.npy %s/out.npy", dir, dir);
    CHECK(run(err, sizeof err, args) == 0, "%s: %s", args, err);
    load(&a, "out.npy");
    for (int i = 0; i < 256; i++) {
        const float want = fl_decode(FL_FMT_E4M3, (uint32_t)i), got = ((float *)a.data)[i];
        CHECK(fl_f32_bits(want) == fl_f32_bits(got) || (want != want && got != got),
              "FAIL --from e4m3 code=0x%02x got=%a want=%a", i, (double)got, (double)want);
    }
    fl_array_free(&a);
    unlink(p_out);

    /* 5. Stochastic rounding: reproducible for a seed, and the seed matters. */
    float many[600];
    for (int i = 0; i < 600; i++)
        many[i] = 1.0f + (float)(i % 7) * 0x1p-6f;
    write_npy_raw("sr.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (600,), }", many, sizeof many);
    uint8_t sr[3][600];
    const int seeds[3] = { 7, 7, 8 };
    for (int k = 0; k < 3; k++) {
        snprintf(args, sizeof args, "convert --to e4m3 --round sr --seed %d %s/sr.npy %s/out.npy", seeds[k], dir, dir);
        CHECK(run(err, sizeof err, args) == 0, "%s: %s", args, err);
        load(&a, "out.npy");
        memcpy(sr[k], a.data, 600);
        for (int i = 0; i < 600; i++) {
            const uint32_t lo = fl_encode_f32(FL_FMT_E4M3, many[i], FL_RND_ZERO, FL_OVF_SATURATE, 0);
            CHECK(sr[k][i] == lo || sr[k][i] == lo + 1, "FAIL sr x=%a got=0x%x not a neighbour of 0x%x", (double)many[i], sr[k][i], lo);
            CHECK(sr[k][i] == fl_encode_f32(FL_FMT_E4M3, many[i], FL_RND_SR, FL_OVF_SATURATE, fl_sr_bits((uint64_t)seeds[k], (uint64_t)i)),
                  "FAIL sr element %d differs from fl_sr_bits stream", i);
        }
        fl_array_free(&a);
        unlink(p_out);
    }
    CHECK(memcmp(sr[0], sr[1], 600) == 0, "sr with the same seed differs");
    CHECK(memcmp(sr[0], sr[2], 600) != 0, "sr with different seeds gives identical output");

    /* 5b. The output does not depend on the threads or the instruction set: 2^20 + 3 elements (the
       conversion splits from 2^18 on) of random bit patterns, NaN/Inf/subnormal included, by RNE
       and SR into bf16, e5m2 and e4m3 on 1 and 2 threads and with FP8LAB_ISA=scalar. */
    {
        fl_array big = { .dtype = FL_DT_U32, .ndim = 1, .count = ((size_t)1 << 20) + 3 };
        big.shape[0] = (int64_t)big.count;
        big.data = malloc(big.count * 4);
        CHECK(big.data, "out of memory");
        uint64_t st = 11;
        for (size_t i = 0; i < big.count; i++)
            ((uint32_t *)big.data)[i] = (uint32_t)fl_splitmix64(&st);
        char p_big[256];
        path_in(p_big, sizeof p_big, "big.npy");
        CHECK(fl_npy_write(p_big, &big, err, sizeof err) == 0, "%s", err);
        fl_array_free(&big);
        const char *cases[] = { "--to bf16", "--to e5m2 --round sr --seed 5", "--to e4m3 --no-saturate",
                                "--to e4m3 --round sr --seed 6 --no-saturate" };
        const char *how[] = { "--threads 1", "--threads 2", "--threads 2", "--threads 1" };
        const char *env[] = { "", "", "FP8LAB_ISA=scalar ", "FP8LAB_ISA=avx2 " };
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            fl_array first = { 0 };
            for (int k = 0; k < 4; k++) {
                char full[2048];
                snprintf(full, sizeof full, "env %s%s convert --from fp32 %s %s %s %s/out.npy", env[k], cli, cases[c],
                         how[k], p_big, dir);
                const int st2 = system(full);
                CHECK(st2 != -1 && WIFEXITED(st2) && WEXITSTATUS(st2) == 0, "%s failed", full);
                fl_array a2;
                load(&a2, "out.npy");
                if (k == 0)
                    first = a2;
                else {
                    CHECK(a2.count == first.count && memcmp(a2.data, first.data, a2.count * fl_dtype_size(a2.dtype)) == 0,
                          "convert %s: %s%s gives other bits than --threads 1", cases[c], env[k], how[k]);
                    fl_array_free(&a2);
                }
            }
            fl_array_free(&first);
        }
        unlink(p_big);
        unlink(p_out);
    }

    /* 6. Malformed inputs: exit 1, message names the file, nothing left behind. */
    const float two[2] = { 1, 2 };
    static const char badmagic[] = "\x93NUMPZ\x01\x00\x10\x00{}      ";
    write_bytes("badmagic.npy", badmagic, sizeof badmagic - 1);
    write_npy_raw("trunc.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (100,), }", two, sizeof two);
    write_npy_raw("trail.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", two, sizeof two);
    write_npy_raw("badhdr.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, }", two, sizeof two);
    write_npy_raw("huge.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", two, sizeof two);
    write_npy_raw("cplx.npy", "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", two, sizeof two);
    write_npy_raw("int32.npy", "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", two, sizeof two);
    write_bytes("empty.npy", "", 0);
    const struct { const char *file, *phrase; } bad[] = {
        { "badmagic.npy", "magic" }, { "trunc.npy", "truncated" }, { "trail.npy", "trailing" },
        { "badhdr.npy", "badhdr.npy" }, { "huge.npy", "overflow" }, { "cplx.npy", "unsupported dtype" },
        { "int32.npy", "not a float array" }, { "empty.npy", "empty.npy" }, { "missing.npy", "missing.npy" },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "convert --to e4m3 %s/%s %s/out.npy", dir, bad[i].file, dir);
        expect_fail(1, args, bad[i].phrase, bad[i].file);
    }
    /* --from with a dtype that cannot hold the encodings */
    snprintf(args, sizeof args, "convert --from bf16 --to fp32 %s/codes.npy %s/out.npy", dir, dir);
    expect_fail(1, args, "cannot hold bf16", "codes.npy");
    /* An existing output is left untouched by a failed conversion. */
    write_bytes("keep.npy", "KEEP", 4);
    snprintf(args, sizeof args, "convert --to e4m3 %s/trunc.npy %s/keep.npy", dir, dir);
    CHECK(run(err, sizeof err, args) == 1, "%s should fail", args);
    {
        char p[256], buf[8] = { 0 };
        path_in(p, sizeof p, "keep.npy");
        FILE *f = fopen(p, "rb");
        CHECK(f && fread(buf, 1, 8, f) == 4 && !memcmp(buf, "KEEP", 4), "failed conversion touched keep.npy");
        fclose(f);
    }
    CHECK(no_temporaries(), "temporary left after failed conversion onto an existing file");

    /* 7. Bad usage: exit 2 with a message naming the problem. */
    const struct { const char *args, *phrase; } usage[] = {
        { "convert --to e9m9 IN out.npy", "unknown format 'e9m9'" },
        { "convert --to e4m3 --round nearest-odd IN out.npy", "--round" },
        { "convert --to e4m3 --seed -4 IN out.npy", "--seed" },
        { "convert --to e4m3 --bogus IN out.npy", "unknown option '--bogus'" },
        { "convert IN out.npy", "--to FMT is required" },
        { "convert --to e4m3 IN", "expected IN.npy OUT.npy" },
        { "convert --to", "--to needs" },
        { "convert --to e4m3 --threads 0 IN out.npy", "--threads needs an integer from 1 to 1024" },
    };
    for (size_t i = 0; i < sizeof usage / sizeof usage[0]; i++) {
        char full[512], in[256];
        path_in(in, sizeof in, "x.npy");
        snprintf(full, sizeof full, "%s", usage[i].args);
        char *at = strstr(full, "IN");
        if (at) {
            char tail[256];
            snprintf(tail, sizeof tail, "%s", at + 2);
            snprintf(at, sizeof full - (size_t)(at - full), "%s%s", in, tail);
        }
        expect_fail(2, full, usage[i].phrase, NULL);
    }
    CHECK(run(err, sizeof err, "convert --help") == 0, "convert --help should exit 0");
    CHECK(run(err, sizeof err, "nosuchcommand") == 2 && strstr(err, "unknown command"), "unknown command: %s", err);

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
    PASS("test_cli_convert");
}
