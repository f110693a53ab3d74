/* test_demo_continue.c — `fp8lab demo --continue`: an interrupted demo picks up where it stopped, with
 * the same bits, and refuses a checkpoint made under other flags; `--preset` and `--device` are checked
 * before any run.
 *
 *  1. A: a tiny demo (1 seed, 60 steps, checkpoints every 20) run through.
 *  2. B: the same, killed (SIGKILL, its whole process group) once one run has a checkpoint, then run
 *     again with --continue: the same exit status as A, and every run's metrics.csv, sites.csv and
 *     checkpoint.bin and the demo's loss_gap.csv byte-identical to A's.
 *  3. --continue with another --lr over B's folders: exit 1, the refusal naming --lr.
 *  4. --preset: unknown names, --fp4 with it, and no token shards are refused with exit 2; --device cuda
 *     in a build without the CUDA step too. */
#include "check.h"
#include "cli_test.h"


static char tmpdir[64];

#define TINY "--width 16 --layers 1 --heads 2 --ffn 32 --seq 16 --batch 4 --data-len 20000 --steps 60 --seeds 1 " \
             "--ckpt-every 20 --jobs 2"
#define TINY_ARGS "--width", "16", "--layers", "1", "--heads", "2", "--ffn", "32", "--seq", "16", "--batch", "4", \
                  "--data-len", "20000", "--steps", "60", "--seeds", "1", "--ckpt-every", "20", "--jobs", "2"

static const char *arms[] = { "swiglu-bf16", "gelu-bf16", "relu-bf16", "swiglu-fp8", "smooth_swiglu-fp8",
                              "swiglu-fp8-down_bf16", "gelu-fp8", "relu-fp8", "swiglu-fp8-down_current" };

static int file_same(const char *x, const char *y)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", x, y);
    return system(cmd) == 0;
}

int main(void)
{
    cli_init();
    snprintf(tmpdir, sizeof tmpdir, "/tmp/fl_democ_XXXXXX");
    CHECK(mkdtemp(tmpdir), "mkdtemp");
    static char out[1 << 16];
    char args[1024];

    /* 1. uninterrupted */
    snprintf(args, sizeof args, "demo " TINY " --out %s/a", tmpdir);
    const int rca = run_sh(out, sizeof out, args);
    CHECK(rca == 0 || rca == 3 || rca == 4, "the tiny demo ran (exit %d): %s", rca, out);

    /* 2. killed once a run has a checkpoint, then --continue */
    char bdir[128], blog[160], ck[200];
    snprintf(bdir, sizeof bdir, "%s/b", tmpdir);
    snprintf(blog, sizeof blog, "%s/b.log", tmpdir);
    snprintf(ck, sizeof ck, "%s/swiglu-fp8-s1/checkpoint.bin", bdir);
    const char *bargs[] = { "demo", TINY_ARGS, "--out", bdir, NULL };
    const int st = spawn_killed_when(blog, bargs, ck);
    CHECK(WIFSIGNALED(st), "the demo was killed mid-way (it had finished: make the runs longer)");
    snprintf(args, sizeof args, "demo " TINY " --out %s/b --continue", tmpdir);
    const int rcb = run_sh(out, sizeof out, args);
    CHECK(rcb == rca, "the continued demo exits as the uninterrupted one (%d vs %d): %s", rcb, rca, out);
    CHECK(strstr(out, "resuming ") && strstr(out, "swiglu-fp8-s1 from its checkpoint at step"),
          "the killed run was resumed from its checkpoint, not restarted: %s", out);
    int compared = 0;
    static const char *files[] = { "metrics.csv", "sites.csv", "checkpoint.bin" };
    for (size_t k = 0; k < sizeof arms / sizeof arms[0]; k++)
        for (size_t j = 0; j < 3; j++) {
            const char *f = files[j];
            char x[400], y[400];
            snprintf(x, sizeof x, "%s/a/%s-s1/%s", tmpdir, arms[k], f);
            snprintf(y, sizeof y, "%s/b/%s-s1/%s", tmpdir, arms[k], f);
            CHECK(file_same(x, y), "%s and %s differ", x, y);
            compared++;
        }
    char x[400], y[400], cmd[512];
    snprintf(x, sizeof x, "%s/a/loss_gap.csv", tmpdir);
    snprintf(y, sizeof y, "%s/b/loss_gap.csv", tmpdir);
    CHECK(file_same(x, y), "%s and %s differ", x, y);
    printf("  killed mid-way and continued: %d run files and loss_gap.csv byte-identical to the uninterrupted demo's\n",
           compared);

    /* 3. a checkpoint from other flags is refused, naming the option */
    snprintf(args, sizeof args, "demo " TINY " --lr 0.01 --out %s/b --continue", tmpdir);
    CHECK(run_sh(out, sizeof out, args) == 1 && strstr(out, "checkpoint refused") && strstr(out, "--lr differs"),
          "--continue over another demo's checkpoints: exit 1 naming --lr: %s", out);

    /* 4. refused before any run */
    const char *bad[] = { "demo --preset 7b --data shards:x", "demo --preset 124m --fp4 --data shards:x",
                          "demo --preset 124m", "demo --preset", "demo --device cuda --steps 5" };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        snprintf(args, sizeof args, "%s --out %s/c%zu", bad[k], tmpdir, k);
        const int rc = run_sh(out, sizeof out, args);
        snprintf(x, sizeof x, "%s/c%zu", tmpdir, k);
        CHECK(rc == 2 && access(x, F_OK) != 0, "'%s': exit 2 and no folder (exit %d): %s", bad[k], rc, out);
    }
    printf("  --continue over other flags refused naming --lr; 5 bad --preset / --device usages exit 2\n");
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    CHECK(system(cmd) == 0, "cleanup");
    PASS("test_demo_continue");
}
