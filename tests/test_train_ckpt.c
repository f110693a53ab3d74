/* test_train_ckpt.c — checkpoints and resume of `fp8lab train`, through the CLI binary.
 *
 *  1. A run killed with SIGKILL mid-way (after its first checkpoint) and resumed with --resume ends
 *     with metrics.csv, telemetry.jsonl, sites.csv and checkpoint.bin byte-identical to an
 *     uninterrupted run (the paper's recipe: --grad-sr stochastic rounding, --pow2, history 1, and a
 *     --site override).
 *  2. The same after SIGTERM (the run checkpoints at the step it was in and exits 1).
 *  3. A corrupt checkpoint (one byte flipped) and a truncated one are refused: exit 1, the message
 *     names the file.
 *  4. A mismatched resume (--act differs from the checkpoint's) is refused: exit 1.
 *  5. Bad flags exit 2 (train and demo: a --site naming no site, a bad mode, --grad-sr or --site
 *     under a recipe without per-tensor scales, --act for the demo) before creating the run folder;
 *     a malformed text data file (a NUL byte) exits 1 naming the file.
 * Needs the CLI: $FP8LAB (tests/run.sh sets it), default build/fp8lab.  A tiny model keeps it fast.
 */
#include "check.h"
#include "cli_test.h"

#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char tmpdir[256];

/* the paper's recipe with a per-site override: stochastic rounding and sites.csv resume too */
#define RECIPE "--recipe", "fp8-delayed", "--pow2", "--amax-history", "1", "--grad-sr", "--site", "L0.down.in=current"
#define TINY "--width", "16", "--layers", "1", "--heads", "2", "--ffn", "32", "--seq", "16", "--batch", "4", \
             "--data-len", "20000", "--log-every", "7", "--threads", "1", "--quiet"


static long rows(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    long r = 0;
    int c;
    while ((c = getc(f)) != EOF)
        r += c == '\n';
    fclose(f);
    return r;
}

static void path(char *out, const char *a, const char *b)
{
    CHECK(snprintf(out, 1024, "%s/%s", a, b) < 1024, "path too long");
}

/* Interrupt a run with sig once it has a checkpoint and at least min_rows metrics rows, resume it,
   compare with the reference run. */
static void kill_and_resume(const char *ref, const char *name, int sig, const char *act)
{
    char dir[1024], err[1024], ck[1024], mc[1024];
    path(dir, tmpdir, name);
    path(err, tmpdir, "err.txt");
    path(ck, dir, "checkpoint.bin");
    path(mc, dir, "metrics.csv");
    const char *args[] = { "train", "--act", act, RECIPE, "--steps", "600", "--seed", "3",
                           "--ckpt-every", "50", "--out", dir, TINY, NULL };
    const pid_t p = spawn(err, args);
    struct timespec ts = { 0, 1000000 };
    int st, done = 0;
    for (int i = 0; i < 60000; i++) { /* up to ~60 s */
        if (waitpid(p, &st, WNOHANG) == p) {
            done = 1;
            break;
        }
        if (access(ck, R_OK) == 0 && rows(mc) > 120)
            break;
        nanosleep(&ts, NULL);
    }
    CHECK(!done, "%s: the run finished before it could be interrupted (make it longer)", name);
    kill(p, sig);
    CHECK(waitpid(p, &st, 0) == p, "waitpid");
    if (sig == SIGKILL)
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "%s: not killed", name);
    else
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1, "%s: SIGTERM should exit 1 after a checkpoint (status %d)", name, st);
    const long at = rows(mc);
    CHECK(at < 601, "%s: interrupted too late", name);
    const char *res[] = { "train", "--resume", dir, "--quiet", NULL };
    CHECK(run(err, res) == 0, "%s: resume failed", name);
    char a[1024], b[1024];
    static const char *const files[] = { "metrics.csv", "telemetry.jsonl", "sites.csv", "checkpoint.bin" };
    for (int k = 0; k < 4; k++) {
        path(a, ref, files[k]);
        path(b, dir, files[k]);
        same_file(a, b);
    }
    printf("  %s: interrupted at %ld rows by signal %d, resumed: identical to the uninterrupted run\n", name, at, sig);
}

int main(void)
{
    cli = getenv("FP8LAB");
    if (!cli)
        cli = "build/fp8lab";
    if (access(cli, X_OK))
        SKIP("no CLI binary at %s (set FP8LAB)", cli);
    snprintf(tmpdir, sizeof tmpdir, "/tmp/fp8lab_test_ckpt_%d", (int)getpid());
    CHECK(!mkdir(tmpdir, 0755), "mkdir %s", tmpdir);
    char ref[1024], err[1024];
    path(ref, tmpdir, "ref");
    path(err, tmpdir, "err.txt");

    /* 1, 2: reference run, then interrupted + resumed runs */
    const char *args[] = { "train", "--act", "swiglu", RECIPE, "--steps", "600", "--seed", "3",
                           "--ckpt-every", "50", "--out", ref, TINY, NULL };
    CHECK(run(err, args) == 0, "reference run failed");
    char mc[1024];
    path(mc, ref, "metrics.csv");
    CHECK(rows(mc) == 601, "metrics.csv has %ld lines, want 601", rows(mc));
    kill_and_resume(ref, "killed", SIGKILL, "swiglu");
    kill_and_resume(ref, "termed", SIGTERM, "swiglu");

    /* 3: corrupt and truncated checkpoints */
    char bad[1024], ck[1024], cmd[2048];
    path(bad, tmpdir, "bad");
    path(ck, bad, "checkpoint.bin");
    CHECK(snprintf(cmd, sizeof cmd, "cp -r '%s' '%s'", ref, bad) < (int)sizeof cmd, "path too long");
    CHECK(!system(cmd), "cp");
    FILE *f = fopen(ck, "r+b");
    CHECK(f, "open %s", ck);
    fseek(f, 1000, SEEK_SET);
    const int c = getc(f);
    fseek(f, 1000, SEEK_SET);
    putc(c ^ 0x10, f);
    fclose(f);
    const char *res[] = { "train", "--resume", bad, "--quiet", NULL };
    CHECK(run(err, res) == 1, "a corrupt checkpoint must exit 1");
    CHECK(contains(err, ck) && contains(err, "checksum"), "the message must name %s and the checksum", ck);
    CHECK(!truncate(ck, 100), "truncate");
    CHECK(run(err, res) == 1, "a truncated checkpoint must exit 1");
    CHECK(contains(err, ck), "the message must name %s", ck);

    /* 4: mismatched resume */
    const char *mis[] = { "train", "--resume", ref, "--act", "relu", "--quiet", NULL };
    CHECK(run(err, mis) == 1, "a mismatched resume must exit 1");
    CHECK(contains(err, "refused") && contains(err, "--act"), "the mismatch message must say what differs");

    /* 5: bad flags and bad data */
    const char *b1[] = { "train", "--act", "swish9", "--out", bad, NULL };
    CHECK(run(err, b1) == 2, "unknown activation: exit 2");
    const char *b2[] = { "train", "--steps", "-3", "--out", bad, NULL };
    CHECK(run(err, b2) == 2, "negative steps: exit 2");
    const char *b3[] = { "train", "--bogus", NULL };
    CHECK(run(err, b3) == 2, "unknown flag: exit 2");
    static const struct {
        const char *args[12], *msg;
    } sb[] = {
        { { "train", "--site", "L7.down.in=bf16", "--recipe", "fp8-delayed", "--out", NULL }, "no cast site" },
        { { "train", "--site", "L0.down.in=fp4", "--recipe", "fp8-delayed", "--out", NULL }, "unknown mode" },
        { { "train", "--site", "L0.down.in", "--recipe", "fp8-delayed", "--out", NULL }, "PATTERN=" },
        { { "train", "--site", "L0.down.in=bf16", "--recipe", "bf16", "--out", NULL }, "need fp8-delayed or fp8-current" },
        { { "train", "--grad-sr", "--recipe", "mxfp8", "--out", NULL }, "--grad-sr needs" },
        { { "demo", "--site", "*.down.out=bf16", "--out", NULL }, "no cast site" },
        { { "demo", "--act", "relu", "--out", NULL }, "fixed by the demo" },
        { { "demo", "--recipe", "mxfp8", "--out", NULL }, "fp8-delayed or fp8-current" },
        { { "demo", "--sqrt3", "--out", NULL }, "give --fp4 --sqrt3" },
    };
    char fresh[1024];
    path(fresh, tmpdir, "never");
    for (size_t k = 0; k < sizeof sb / sizeof sb[0]; k++) {
        const char *a[16];
        int n = 0;
        for (; sb[k].args[n]; n++)
            a[n] = sb[k].args[n];
        a[n++] = fresh;
        a[n] = NULL;
        CHECK(run(err, a) == 2, "%s %s %s: exit 2", a[0], a[1], a[2]);
        CHECK(contains(err, sb[k].msg), "%s %s %s: the message must say '%s'", a[0], a[1], a[2], sb[k].msg);
        CHECK(access(fresh, F_OK) != 0, "%s %s %s: %s was created before the flags were checked", a[0], a[1], a[2], fresh);
    }
    char data[1024];
    path(data, tmpdir, "binary.txt");
    f = fopen(data, "wb");
    CHECK(f, "open");
    for (int i = 0; i < 5000; i++)
        putc(i == 2500 ? 0 : 'a' + i % 26, f);
    fclose(f);
    const char *b4[] = { "train", "--data", data, "--steps", "2", "--out", bad, TINY, NULL };
    CHECK(run(err, b4) == 1, "a binary data file must exit 1");
    CHECK(contains(err, data), "the message must name %s", data);
    const char *b5[] = { "train", "--data", "/nonexistent/file.txt", "--steps", "2", "--out", bad, TINY, NULL };
    CHECK(run(err, b5) == 1, "a missing data file must exit 1");

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    CHECK(!system(cmd), "cleanup");
    PASS("test_train_ckpt");
}
