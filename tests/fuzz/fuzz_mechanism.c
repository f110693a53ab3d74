/* fuzz_mechanism.c — libFuzzer harness of `fp8lab mechanism --judge-search DIR`'s reader of its runs'
 * metrics.csv (experiments/train/cmd_mechanism.c, through the command's own entry fl_cmd_mechanism).
 *
 * The search folder is made once: runs.txt lists a SwiGLU run s/ and a GeLU run g/, each with a
 * checkpoint.bin holding a finished 12-step configuration (sections 1 and 2 of train.c: the
 * configuration and the run state, which is all judge_search reads of it).  One input is the two
 * runs' metrics.csv, separated by a line "##" (fuzz.h).  make fuzz runs it (Makefile). */
#include "train/commands.h"
#include "fuzz.h"
#include "train/checkpoint.h"
#include "train/train.h"
#include "train/train_opts.h"

enum { CK_CFG = 1, CK_STATE = 2, STEPS = 12 }; /* train.c's section ids (the file format) */

static void make_run(const char *name, uint32_t act)
{
    char path[512], err[4600];
    fuzz_file(path, sizeof path, name, NULL, 0);
    if (mkdir(path, 0700))
        abort();
    fl_train_cfg cfg;
    fl_train_cfg_default(&cfg);
    cfg.model.C = 4, cfg.model.L = 1, cfg.model.H = 1, cfg.model.T = 2, cfg.model.B = 1;
    cfg.model.act.kind = act;
    cfg.model.F = act == FL_ACT_GELU ? 6 : 4;
    cfg.steps = STEPS;
    fl_train_state st;
    memset(&st, 0, sizeof st);
    st.step = STEPS;
    size_t len = 0;
    char *rec = fl_train_cfg_store(&cfg, &len); /* the configuration record (train_opts.h) */
    const fl_ckpt_section secs[2] = { { CK_CFG, rec, len }, { CK_STATE, &st, sizeof st } };
    snprintf(path, sizeof path, "%s/%s/checkpoint.bin", fuzz_dir(), name);
    if (!rec || fl_ckpt_write(path, secs, 2, err, sizeof err)) {
        fprintf(stderr, "%s\n", rec ? err : "out of memory");
        abort();
    }
    free(rec);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* fl_blas_setup re-executes the program unless these are set (train.h); nothing here calls BLAS */
    setenv("OPENBLAS_CORETYPE", "Prescott", 0);
    setenv("OMP_WAIT_POLICY", "passive", 0);
    if (!freopen("/dev/null", "w", stdout)) /* the judgement's table */
        abort();
    make_run("s", FL_ACT_SWIGLU);
    make_run("g", FL_ACT_GELU);
    char path[512], runs[1200];
    const int n = snprintf(runs, sizeof runs, "%s/s --act swiglu\n%s/g --act gelu\n", fuzz_dir(), fuzz_dir());
    fuzz_file(path, sizeof path, "runs.txt", runs, (size_t)n);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const files[] = { "s/metrics.csv", "g/metrics.csv" };
    char path[512];
    for (int k = 0; k < 2; k++) {
        const uint8_t *p;
        size_t n;
        const int have = fuzz_part(&p, &n, data, size, k);
        fuzz_file(path, sizeof path, files[k], have ? p : NULL, have ? n : 0);
    }
    char *argv[] = { "fp8lab", "mechanism", "--judge-search", (char *)fuzz_dir(), NULL };
    fl_cmd_mechanism(3, argv + 1);
    fflush(stdout);
    return 0;
}
