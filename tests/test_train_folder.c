/* test_train_folder.c — a run folder is its run's own: what `fp8lab train` may delete, overwrite,
 * lock, resume and read, attacked as a careless or hostile user would.  Each check is a reproducer
 * that failed before the folder rules (rundir.h) and the fixed GEMM tile grid (model.c):
 *
 *  1. A fork into its parent's folder (with or without --overwrite) is refused with exit 2 and the
 *     parent's files stay byte-identical (it used to delete the parent's checkpoint, then fail).
 *  2. A fresh run into a folder holding a run is refused (exit 2, files intact); --overwrite removes
 *     the run's files (kept checkpoints included) and nothing else.
 *  3. Two processes on one folder: the second gets exit 2 naming the lock (both used to succeed).
 *  4. --threads 1 and --threads 2, FP8LAB_ISA default, avx2 and scalar, and OPENBLAS_CORETYPE Haswell
 *     and SkylakeX give byte-identical metrics.csv, sites.csv and parameters (OpenBLAS's Haswell
 *     kernels used to differ from step 0, across thread counts and from the SkylakeX ones), and a
 *     1-thread run resumed with --threads 2 ends byte-identical to the uninterrupted run.
 *  5. `order --run` rebuilds the run's own batch for --data fortunes, --data triggers and --bos
 *     runs: its dump equals a forward computed here from the checkpoint on the batch that the data
 *     functions give (it used to rebuild the synthetic corpus and exit 0).
 *  6. --resume with a metrics.csv cut below the checkpoint's record exits 1 and leaves the file as it
 *     was (it used to pad it with NUL bytes).
 *  7. Non-finite numbers (--clip inf, --adam-eps inf, --div-margin 1e300, --lr nan) exit 2; refused
 *     forks (a changed seed, a damaged parent) leave no folder; a fork's refusal is not garbled
 *     ("a fork cannot change --keep-ckpt steps ...").
 *  8. A --out path too long for the run's files is refused before any step.
 *  9. A temporary checkpoint file of a killed writer is removed by the next run of the folder.
 * 10. train_args (fl_train_cfg_args, demo.json) quote a --data path holding ' and spaces for sh: run
 *     through sh, they train the same run (config.json, metrics.csv identical); demo.json keeps
 *     train_args and dir under an --out that is not UTF-8 (jansson used to drop the keys).
 * Needs the CLI: $FP8LAB (tests/run.sh sets it), default build/fp8lab.
 */
#include "check.h"
#include "cli_test.h"

#include "train/checkpoint.h"
#include "train/data.h"
#include "train/model.h"
#include "train/train.h"
#include "npy.h"

#include <dirent.h>
#include <jansson.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char tmp[256];

#define TINY "--width", "16", "--layers", "1", "--heads", "2", "--ffn", "32", "--seq", "8", "--batch", "2", \
             "--data-len", "4096", "--quiet"

/* A formatted path, kept until free_paths at the end of the test. */
static char *paths[4096];
static int npaths;

static const char *P(const char *fmt, ...)
{
    char b[4200];
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(b, sizeof b, fmt, ap);
    va_end(ap);
    CHECK(n > 0 && (size_t)n < sizeof b, "path too long");
    CHECK(npaths < (int)(sizeof paths / sizeof *paths), "too many paths");
    char *r = strdup(b);
    CHECK(r, "out of memory");
    return paths[npaths++] = r;
}

static void free_paths(void)
{
    while (npaths)
        free(paths[--npaths]);
}

static int exists(const char *p)
{
    struct stat sb;
    return lstat(p, &sb) == 0;
}

static void copy_file(const char *from, const char *to)
{
    size_t n;
    char *b = slurp(from, &n);
    CHECK(b, "read %s", from);
    FILE *f = fopen(to, "wb");
    CHECK(f && fwrite(b, 1, n, f) == n && fclose(f) == 0, "write %s", to);
    free(b);
}

static int run_env(const char *errfile, const char *env, const char *val, const char *const *args)
{
    if (env)
        setenv(env, val, 1);
    const int rc = run(errfile, args);
    if (env)
        unsetenv(env);
    return rc;
}

/* 1. */
static void fork_into_parent(void)
{
    const char *p = P("%s/p", tmp), *e = P("%s/err", tmp);
    const char *a[] = { "train", TINY, "--steps", "20", "--out", p, NULL };
    CHECK(run(e, a) == 0, "parent run");
    copy_file(P("%s/checkpoint.bin", p), P("%s/ck.orig", tmp));
    copy_file(P("%s/metrics.csv", p), P("%s/m.orig", tmp));
    const char *ck = P("%s/checkpoint.bin", p);
    const char *f1[] = { "train", "--fork", ck, "--steps", "30", "--out", p, NULL };
    const char *f2[] = { "train", "--fork", ck, "--steps", "30", "--out", p, "--overwrite", NULL };
    const char *f3[] = { "train", "--fork", P("%s/./p/../p/checkpoint.bin", tmp), "--steps", "30", "--out", p, "--overwrite", NULL };
    const char *const *forks[] = { f1, f2, f3 };
    for (int k = 0; k < 3; k++) {
        CHECK(run(e, forks[k]) == 2, "fork %d into its parent's folder: exit 2", k);
        CHECK(contains(e, "a fork writes a folder of its own"), "fork %d: the message", k);
        same_file(P("%s/checkpoint.bin", p), P("%s/ck.orig", tmp));
        same_file(P("%s/metrics.csv", p), P("%s/m.orig", tmp));
    }
    printf("  a fork into its parent's folder: exit 2, the parent byte-identical (3 spellings)\n");
}

/* 2. */
static void fresh_over_run(void)
{
    const char *p = P("%s/q", tmp), *e = P("%s/err", tmp);
    const char *a[] = { "train", TINY, "--steps", "20", "--keep-ckpt", "10", "--out", p, NULL };
    CHECK(run(e, a) == 0, "run");
    FILE *f = fopen(P("%s/notes.txt", p), "w");
    CHECK(f && fputs("mine\n", f) >= 0 && fclose(f) == 0, "notes");
    copy_file(P("%s/checkpoint.bin", p), P("%s/q.orig", tmp));
    const char *b[] = { "train", TINY, "--steps", "5", "--out", p, NULL };
    CHECK(run(e, b) == 2, "a fresh run into a run's folder: exit 2");
    CHECK(contains(e, "holds a run already") && contains(e, "--overwrite"), "the message says what to do");
    same_file(P("%s/checkpoint.bin", p), P("%s/q.orig", tmp));
    CHECK(exists(P("%s/checkpoint-10.bin", p)), "kept checkpoint intact");
    const char *c[] = { "train", TINY, "--steps", "5", "--out", p, "--overwrite", NULL };
    CHECK(run(e, c) == 0, "--overwrite");
    CHECK(!exists(P("%s/checkpoint-10.bin", p)), "--overwrite removes the old run's kept checkpoint");
    CHECK(exists(P("%s/notes.txt", p)), "--overwrite keeps a file that is not the run's");
    printf("  a fresh run into a run's folder: exit 2; --overwrite replaces the run's files only\n");
}

/* 3. */
static void two_writers(void)
{
    const char *p = P("%s/w", tmp), *e1 = P("%s/err1", tmp), *e2 = P("%s/err2", tmp);
    const char *a[] = { "train", TINY, "--steps", "100000000", "--out", p, NULL };
    const pid_t first = spawn(e1, a);
    const char *m = P("%s/metrics.csv", p);
    for (int i = 0; i < 2000 && !exists(m); i++)
        usleep(10000);
    CHECK(exists(m), "the first run started");
    const char *b[] = { "train", TINY, "--steps", "20", "--out", p, "--overwrite", NULL };
    CHECK(run(e2, b) == 2, "a second writer of a locked folder: exit 2");
    CHECK(contains(e2, "locked"), "the message names the lock");
    kill(first, SIGTERM); /* it checkpoints and exits 1, releasing the folder */
    int st;
    CHECK(waitpid(first, &st, 0) == first && WIFEXITED(st) && WEXITSTATUS(st) == 1, "SIGTERM: exit 1 after the checkpoint");
    /* the folder is free again: a resume takes it (and is stopped again) */
    const char *d[] = { "train", "--resume", p, "--quiet", "--threads", "1", NULL };
    const pid_t again = spawn(e2, d);
    usleep(300000);
    kill(again, SIGTERM);
    CHECK(waitpid(again, &st, 0) == again && WIFEXITED(st) && WEXITSTATUS(st) <= 1, "resume after the lock is released");
    CHECK(!contains(e2, "locked"), "the resume was not refused");
    printf("  two writers of one folder: the second gets exit 2 (locked)\n");
}

/* The parameters and Adam moments of two checkpoints are byte-identical. */
static void same_params(const char *a, const char *b)
{
    fl_ckpt x, y;
    char err[4400];
    CHECK(!fl_ckpt_read(&x, a, err, sizeof err) && !fl_ckpt_read(&y, b, err, sizeof err), "%s", err);
    for (uint32_t id = 3; id <= 5; id++) {
        const fl_ckpt_section *s = fl_ckpt_find(&x, id), *t = fl_ckpt_find(&y, id);
        CHECK(s && t && s->size == t->size && !memcmp(s->data, t->data, s->size), "%s and %s: section %u differs", a, b, id);
    }
    fl_ckpt_free(&x);
    fl_ckpt_free(&y);
}

/* 4. */
static void thread_counts(void)
{
    const char *e = P("%s/err", tmp);
    /* FP8LAB_ISA caps the instruction set of the harness's GEMM and casts; OPENBLAS_CORETYPE picks
       OpenBLAS's kernels (the harness used to sum its GEMMs with them); avx2 with Haswell is what an
       AVX2 machine runs.  Every run of a recipe gives the bits of its first. */
    static const struct {
        const char *recipe, *isa, *core, *threads;
    } runs[] = { { "bf16", NULL, NULL, "1" },           { "bf16", NULL, NULL, "2" },
                 { "bf16", NULL, "Haswell", "1" },      { "bf16", NULL, "SkylakeX", "1" },
                 { "bf16", "avx2", "Haswell", "1" },    { "bf16", "avx2", "Haswell", "2" },
                 { "bf16", "scalar", NULL, "1" },       { "fp8-delayed", NULL, NULL, "1" },
                 { "fp8-delayed", NULL, NULL, "2" },    { "fp8-delayed", "avx2", "Haswell", "1" },
                 { "fp8-delayed", "scalar", NULL, "1" } };
    const char *d0 = NULL;
    for (size_t k = 0; k < sizeof runs / sizeof *runs; k++) {
        const char *d = P("%s/t%zu", tmp, k);
        const char *a[] = { "train", "--steps", "3", "--recipe", runs[k].recipe, "--threads", runs[k].threads, "--quiet", "--out", d, NULL };
        if (runs[k].isa)
            setenv("FP8LAB_ISA", runs[k].isa, 1);
        CHECK(run_env(e, runs[k].core ? "OPENBLAS_CORETYPE" : NULL, runs[k].core, a) == 0, "%s: run", d);
        unsetenv("FP8LAB_ISA");
        if (!k || strcmp(runs[k].recipe, runs[k - 1].recipe)) {
            d0 = d;
            continue;
        }
        same_file(P("%s/metrics.csv", d0), P("%s/metrics.csv", d));
        same_file(P("%s/sites.csv", d0), P("%s/sites.csv", d));
        same_params(P("%s/checkpoint.bin", d0), P("%s/checkpoint.bin", d)); /* the state differs: its thread count */
    }
    /* resume a 1-thread run on 2 threads from its step-20 checkpoint (Haswell kernels) */
    const char *u = P("%s/uninterrupted", tmp), *r = P("%s/resumed", tmp);
    const char *a[] = { "train", "--steps", "30", "--threads", "1", "--quiet", "--width", "32", "--out", u, NULL };
    const char *b[] = { "train", "--steps", "30", "--threads", "1", "--quiet", "--width", "32", "--keep-ckpt", "20", "--out", r, NULL };
    CHECK(run_env(e, "OPENBLAS_CORETYPE", "Haswell", a) == 0, "uninterrupted");
    CHECK(run_env(e, "OPENBLAS_CORETYPE", "Haswell", b) == 0, "to be resumed");
    copy_file(P("%s/checkpoint-20.bin", r), P("%s/checkpoint.bin", r));
    const char *c[] = { "train", "--resume", r, "--threads", "2", "--quiet", NULL };
    CHECK(run_env(e, "OPENBLAS_CORETYPE", "Haswell", c) == 0, "resume on 2 threads");
    same_file(P("%s/metrics.csv", u), P("%s/metrics.csv", r));
    same_file(P("%s/sites.csv", u), P("%s/sites.csv", r));
    printf("  --threads 1 and 2, FP8LAB_ISA default, avx2, scalar, OpenBLAS's Haswell and SkylakeX kernels (bf16, fp8-delayed): "
           "the same bits; resumed on 2 threads: identical\n");
}

/* 5: the forward of the run's checkpoint on the batch the data functions give. */
static void order_run_data(void)
{
    const char *e = P("%s/err", tmp);
    static const char *const kinds[][3] = { { "--data", "fortunes", NULL }, { "--data", "triggers", NULL }, { "--bos", NULL, NULL } };
    for (int k = 0; k < 3; k++) {
        const char *d = P("%s/o%d", tmp, k), *x = P("%s/o%d.npy", tmp, k);
        const char *a[24] = { "train", "--width", "16", "--layers", "2", "--heads", "2", "--ffn", "32", "--seq", "16",
                              "--batch", "2", "--steps", "7", "--quiet", "--out", d, NULL };
        int n = 18;
        for (int j = 0; j < 2 && kinds[k][j]; j++)
            a[n++] = kinds[k][j];
        a[n] = NULL;
        CHECK(run(e, a) == 0, "train %s", kinds[k][0]);
        const char *o[] = { "order", "--run", d, "--dump", x, NULL };
        CHECK(run(e, o) == 0, "order --run on a %s %s run", kinds[k][0], kinds[k][1] ? kinds[k][1] : "");
        fl_array got;
        char err[4400];
        CHECK(!fl_npy_read(&got, x, err, sizeof err), "%s", err);
        /* the expected pre-activations */
        fl_train_cfg cfg;
        fl_train_state st;
        CHECK(!fl_train_read_cfg(&cfg, &st, d, err, sizeof err), "%s", err);
        fl_data data;
        int rc;
        if (k == 0)
            rc = fl_data_fortunes(&data, err, sizeof err);
        else if (k == 1)
            rc = fl_data_synthetic_ex(&data, cfg.seed, cfg.data_len, cfg.trigger_rate, cfg.trigger_len);
        else
            rc = fl_data_synthetic(&data, cfg.seed, cfg.data_len);
        CHECK(!rc, "data %d", k);
        const size_t B = cfg.model.B, T = cfg.model.T, N = B * T, F = cfg.model.F, L = cfg.model.L;
        uint16_t *batch = malloc(B * (T + 1) * sizeof *batch);
        if (k == 2)
            fl_data_batch_bos(batch, &data, cfg.seed, st.step, B, T, 256);
        else
            fl_data_batch(batch, &data, cfg.seed, st.step, B, T);
        cfg.recipe.kind = FL_RECIPE_FP32;
        const int ns = fl_model_nsites(&cfg.model);
        char *store = calloc((size_t)ns, 40);
        const char **names = calloc((size_t)ns, sizeof *names);
        uint32_t *roles = calloc((size_t)ns, sizeof *roles);
        uint8_t *hp = calloc((size_t)ns, 1);
        fl_model_site_names(&cfg.model, store, names, roles, hp);
        fl_recipe rec;
        CHECK(!fl_recipe_init(&rec, &cfg.recipe, ns, names, roles, hp), "recipe");
        fl_model m;
        CHECK(!fl_model_init(&m, &cfg.model, &rec, cfg.seed), "model");
        fl_ckpt ck;
        CHECK(!fl_ckpt_read(&ck, P("%s/checkpoint.bin", d), err, sizeof err), "%s", err);
        const fl_ckpt_section *sp = fl_ckpt_find(&ck, 3);
        CHECK(sp && sp->size == m.nparams * sizeof(float), "params");
        memcpy(m.params, sp->data, sp->size);
        fl_model_forward(&m, batch);
        CHECK(got.count == L * N * F && got.dtype == FL_DT_F32, "dump size %zu", got.count);
        const size_t G = fl_act_gated(cfg.model.act) ? 2 : 1;
        size_t diff = 0;
        for (size_t l = 0; l < L; l++)
            diff += memcmp((const float *)got.data + l * N * F, m.pre + l * G * N * F, N * F * sizeof(float)) != 0;
        CHECK(diff == 0, "order --run of a %s %s run: %zu of %zu layers differ from the run's own batch", kinds[k][0],
              kinds[k][1] ? kinds[k][1] : "", diff, L);
        fl_ckpt_free(&ck);
        fl_model_free(&m);
        fl_recipe_free(&rec);
        free(store), free(names), free(roles), free(hp), free(batch);
        fl_data_free(&data);
        fl_array_free(&got);
    }
    printf("  order --run: the run's own batch for --data fortunes, --data triggers and --bos runs\n");
}

/* 6. */
static void resume_short_log(void)
{
    const char *d = P("%s/s", tmp), *e = P("%s/err", tmp), *m = P("%s/s/metrics.csv", tmp);
    const char *a[] = { "train", TINY, "--steps", "60", "--ckpt-every", "30", "--out", d, NULL };
    CHECK(run(e, a) == 0, "run");
    CHECK(truncate(m, 300) == 0, "cut");
    copy_file(m, P("%s/s.cut", tmp));
    const char *b[] = { "train", "--resume", d, "--quiet", NULL };
    CHECK(run(e, b) == 1, "resume over a cut log: exit 1");
    CHECK(contains(e, "metrics.csv") && contains(e, "fewer than"), "the message names the log");
    same_file(m, P("%s/s.cut", tmp));
    printf("  --resume with a cut metrics.csv: exit 1, the log untouched (no NUL padding)\n");
}

/* 7. */
static void refusals(void)
{
    const char *e = P("%s/err", tmp), *bad = P("%s/never", tmp);
    static const char *const nonfinite[][2] = { { "--clip", "inf" }, { "--adam-eps", "inf" }, { "--div-margin", "1e300" },
                                                { "--lr", "nan" }, { "--init-std", "inf" } };
    for (int k = 0; k < 5; k++) {
        const char *a[] = { "train", TINY, "--steps", "5", nonfinite[k][0], nonfinite[k][1], "--out", bad, NULL };
        CHECK(run(e, a) == 2, "%s %s: exit 2", nonfinite[k][0], nonfinite[k][1]);
        CHECK(!exists(bad), "%s %s: no folder", nonfinite[k][0], nonfinite[k][1]);
    }
    const char *p = P("%s/parent", tmp);
    const char *a[] = { "train", TINY, "--steps", "20", "--out", p, NULL };
    CHECK(run(e, a) == 0, "parent");
    const char *ck = P("%s/checkpoint.bin", p);
    const char *f1[] = { "train", "--fork", ck, "--seed", "4", "--steps", "30", "--out", bad, NULL };
    CHECK(run(e, f1) == 2 && !exists(bad), "a fork changing the seed: exit 2, no folder");
    const char *f2[] = { "train", "--fork", ck, "--steps", "30", "--keep-ckpt", "999", "--out", bad, NULL };
    CHECK(run(e, f2) == 2 && !exists(bad), "a fork with a bad --keep-ckpt: exit 2, no folder");
    CHECK(!contains(e, "a fork cannot change --keep-ckpt") && contains(e, "--keep-ckpt steps must be in"),
          "the refusal is not garbled");
    const char *dmg = P("%s/damaged.bin", tmp);
    copy_file(ck, dmg);
    FILE *f = fopen(dmg, "r+b");
    CHECK(f && fseek(f, 100, SEEK_SET) == 0 && fputc(0x5A ^ 0xFF, f) != EOF && fclose(f) == 0, "damage");
    const char *f3[] = { "train", "--fork", dmg, "--steps", "30", "--out", bad, NULL };
    CHECK(run(e, f3) == 1 && !exists(bad), "a fork of a damaged checkpoint: exit 1, no folder");
    CHECK(contains(e, "damaged.bin"), "the message names the file");
    printf("  non-finite numbers exit 2; refused forks leave no folder; messages not garbled\n");
}

/* 8. */
static void long_path(void)
{
    char dir[4200];
    int n = snprintf(dir, sizeof dir, "%s/", tmp);
    while (n < 4072)
        dir[n++] = 'x';
    dir[n] = 0;
    const char *e = P("%s/err", tmp);
    const char *a[] = { "train", TINY, "--steps", "600", "--out", dir, NULL };
    const time_t t0 = time(NULL);
    CHECK(run(e, a) == 2, "a 4072-byte --out: exit 2");
    CHECK(time(NULL) - t0 < 30 && contains(e, "too long"), "refused up front, the message says why");
    printf("  a 4072-byte --out is refused up front\n");
}

/* 9. */
static void stale_temps(void)
{
    const char *d = P("%s/k", tmp), *e = P("%s/err", tmp);
    const char *a[] = { "train", TINY, "--steps", "20", "--ckpt-every", "10", "--out", d, NULL };
    CHECK(run(e, a) == 0, "run");
    const char *t1 = P("%s/checkpoint.bin.tmp.AbC123", d), *t2 = P("%s/config.json.tmp.777.zzzzzz", d);
    const char *mine = P("%s/data.tmp.keep", d);
    const char *const made[] = { t1, t2, mine };
    for (int k = 0; k < 3; k++) {
        FILE *f = fopen(made[k], "w");
        CHECK(f && fputs("partial", f) >= 0 && fclose(f) == 0, "temp");
    }
    const char *c[] = { "train", "--resume", d, "--quiet", NULL };
    CHECK(run(e, c) == 0, "resume of a finished run");
    CHECK(!exists(t1) && !exists(t2), "stale temporary files of the run removed");
    CHECK(exists(mine), "a file that is not the run's stays");
    printf("  temporary files of a killed writer are swept by the next run of the folder\n");
}

/* 10. */
static void train_args_sh(void)
{
    const char *txt = P("%s/it's a b.txt", tmp), *e = P("%s/err", tmp);
    FILE *f = fopen(txt, "w");
    CHECK(f, "text");
    for (int i = 0; i < 200; i++)
        fprintf(f, "line %d of a text with 'quotes' and \"double quotes\" and $HOME `x`\n", i);
    CHECK(fclose(f) == 0, "close");
    const char *d1 = P("%s/args1", tmp), *d2 = P("%s/args2", tmp);
    const char *a[] = { "train", TINY, "--steps", "3", "--data", txt, "--site", "L0.down.in=bf16", "--recipe",
                        "fp8-delayed", "--out", d1, NULL };
    CHECK(run(e, a) == 0, "train on a file named with a quote");
    fl_train_cfg cfg;
    fl_train_state st;
    char err[4400], args[8192], cmd[12000];
    CHECK(!fl_train_read_cfg(&cfg, &st, d1, err, sizeof err), "%s", err);
    CHECK(!fl_train_cfg_args(args, sizeof args, &cfg), "args fit");
    snprintf(cmd, sizeof cmd, "'%s' train %s --quiet --out '%s' > '%s' 2>&1", cli, args, d2, e);
    CHECK(system(cmd) == 0, "sh ran: %s", cmd);
    same_file(P("%s/config.json", d1), P("%s/config.json", d2));
    same_file(P("%s/metrics.csv", d1), P("%s/metrics.csv", d2));
    /* demo.json: every run keeps train_args and dir under a folder name that is not UTF-8 (0xE9), and
       the first run's train_args, run through sh, give that run's metrics */
    const char *out = P("%s/demo\xe9", tmp), *js = P("%s/demo.json", tmp), *d3 = P("%s/args3", tmp);
    const char *dm[] = { "demo", "--seeds", "1", "--steps", "30", "--width", "16", "--layers", "1", "--heads", "2",
                         "--ffn", "32", "--seq", "8", "--batch", "2", "--data", txt, "--out", out, "--json", js, NULL };
    const int drc = run(e, dm);
    CHECK(drc == 0 || drc == 3 || drc == 4, "tiny demo: exit %d", drc);
    json_error_t je;
    json_t *doc = json_load_file(js, 0, &je);
    CHECK(doc, "%s: %s", js, je.text);
    json_t *runs = json_object_get(doc, "runs");
    CHECK(json_is_array(runs) && json_array_size(runs) == 9, "9 runs");
    for (size_t k = 0; k < 9; k++) {
        json_t *r = json_array_get(runs, k);
        CHECK(json_is_string(json_object_get(r, "train_args")) && json_is_string(json_object_get(r, "dir")),
              "run %zu keeps train_args and dir", k);
    }
    const char *a0 = json_string_value(json_object_get(json_array_get(runs, 0), "train_args"));
    snprintf(cmd, sizeof cmd, "'%s' train %s --quiet --out '%s' > '%s' 2>&1", cli, a0, d3, e);
    CHECK(system(cmd) == 0, "sh ran demo.json's train_args: %s", cmd);
    const char *arm0 = json_string_value(json_object_get(json_array_get(runs, 0), "arm"));
    char arm[64];
    snprintf(arm, sizeof arm, "%s", arm0);
    for (char *c = arm; *c; c++)
        *c = *c == '/' ? '-' : *c;
    same_file(P("%s/%s-s1/metrics.csv", out, arm), P("%s/metrics.csv", d3));
    json_decref(doc);
    printf("  train_args with a quoted --data path run through sh (train and demo.json): the same run; demo.json "
           "keeps its keys under a non-UTF-8 folder\n");
}

int main(int argc, char **argv)
{
    cli = getenv("FP8LAB") ? getenv("FP8LAB") : "build/fp8lab";
    snprintf(tmp, sizeof tmp, "/tmp/fl_train_folder_XXXXXX");
    CHECK(mkdtemp(tmp), "mkdtemp");
    static const struct {
        const char *name;
        void (*fn)(void);
    } parts[] = { { "fork", fork_into_parent }, { "fresh", fresh_over_run }, { "lock", two_writers },
                  { "threads", thread_counts }, { "order", order_run_data }, { "resume", resume_short_log },
                  { "refusals", refusals }, { "longpath", long_path }, { "temps", stale_temps },
                  { "args", train_args_sh } };
    for (size_t k = 0; k < sizeof parts / sizeof *parts; k++) /* test_train_folder [PART]: one part only */
        if (argc < 2 || !strcmp(argv[1], parts[k].name))
            parts[k].fn();
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    CHECK(system(cmd) == 0, "clean up");
    free_paths();
    PASS("test_train_folder");
}
