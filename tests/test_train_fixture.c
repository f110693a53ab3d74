/* test_train_fixture.c — the committed checkpoints tests/fixtures/train_ckpt/ (checkpoint version 6:
 * configuration record format 1, experiments/train/train_opts.h) and tests/fixtures/train_ckpt_v5/
 * (version 5, the configuration as the raw struct of that version, written by the fp8lab before the
 * record), each made by train_ckpt/make.sh from args.txt: step 10 of a 40-step run, with its logs up
 * to that step.  Through the CLI; run from the repository root.  1, 2 and 4 run on both, 3 on the
 * version-6 one, 5 on the version-5 one:
 *
 *  1. It loads: fl_train_read_cfg gives the configuration that args.txt's flags give (with the data's
 *     hash), at step 10.
 *  2. It resumes bit for bit: a copy resumed to step 40 in one go (run A, which keeps
 *     checkpoint-25.bin), and A's folder resumed again from its checkpoint-25.bin (run B): B ends
 *     with A's metrics.csv, sites.csv, telemetry.jsonl and checkpoint.bin.  Both are made here: the
 *     fixtures' logs were made by builds whose GEMMs summed in OpenBLAS's order, so nothing is
 *     compared with numbers made elsewhere.
 *  3. A record from before an option existed resumes: the fixture without its chan_every line (the
 *     option's default) ends with A's files.  A key this build does not know, and a newer record
 *     format, are refused: exit 1, the message names the file and says what, the folder's files are
 *     untouched; a fork of such a file makes no folder.
 *  4. It forks: `train --fork FIXTURE --out F` changing nothing continues A's rows from step 10; a
 *     fork changing the recipe runs and its config.json records fork_from and fork_step 10; a fork
 *     changing --width exits 2 and makes no folder.
 *  5. The version-5 configuration section, damaged (a path without its NUL, 17 kept steps, cut short),
 *     is refused by fl_train_cfg_load_v5.
 */
#include "check.h"
#include "cli_test.h"
#include "train/checkpoint.h"
#include "train/train.h"
#include "train/train_opts.h"

#include <jansson.h>
#include <sys/stat.h>

static const char *FIXTURE; /* the fixture under test */
static char tmp[200];         /* its scratch folder */

/* fmt with a, in one of 8 buffers used in turn: a path for the next few calls. */
static const char *P(const char *fmt, const char *a)
{
    static char buf[8][1024];
    static int k;
    char arg[1024];
    k = (k + 1) % 8;
    snprintf(arg, sizeof arg, "%s", a);
    CHECK(snprintf(buf[k], sizeof buf[k], fmt, arg) < (int)sizeof buf[k], "path too long");
    return buf[k];
}

static int exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0;
}

static void sh(const char *fmt, const char *a, const char *b)
{
    char cmd[3000];
    snprintf(cmd, sizeof cmd, fmt, a, b);
    CHECK(!system(cmd), "%s", cmd);
}

/* 1. */
static void loads(void)
{
    size_t n;
    char *args = slurp(P("%s/args.txt", FIXTURE), &n), err[4600];
    CHECK(args, "%s/args.txt: run the test from the repository root", FIXTURE);
    fl_train_cfg want, got;
    fl_train_state st;
    fl_train_cfg_default(&want);
    char *w[64];
    int nw = 0;
    for (char *t = strtok(args, " \n"); t && nw < 64; t = strtok(NULL, " \n"))
        w[nw++] = t;
    for (int i = 0; i < nw; i++) {
        int used = 0;
        CHECK(fl_train_parse_flag(&want, "test", w[i], i + 1 < nw ? w[i + 1] : NULL, &used) == 0, "args.txt: %s", w[i]);
        i += used;
    }
    fl_data d;
    CHECK(!fl_train_open_data(&d, &want, err, sizeof err), "%s", err);
    want.data_hash = d.hash;
    fl_data_free(&d);
    CHECK(!fl_train_read_cfg(&got, &st, FIXTURE, err, sizeof err), "%s", err);
    CHECK(!memcmp(&got, &want, sizeof got), "the fixture's configuration is not args.txt's");
    CHECK(st.step == 10, "the fixture is at step %llu, not 10", (unsigned long long)st.step);
    free(args);
    printf("  %s loads: args.txt's configuration at step 10\n", FIXTURE);
}

static void resume(const char *dir)
{
    const char *a[] = { "train", "--resume", dir, "--threads", "1", "--quiet", NULL };
    CHECK(run(P("%s/err", tmp), a) == 0, "resume %s", dir);
}

static void same_run(const char *a, const char *b)
{
    static const char *const files[] = { "metrics.csv", "sites.csv", "telemetry.jsonl", "checkpoint.bin" };
    for (int k = 0; k < 4; k++) {
        char fa[1100], fb[1100];
        snprintf(fa, sizeof fa, "%s/%s", a, files[k]);
        snprintf(fb, sizeof fb, "%s/%s", b, files[k]);
        same_file(fa, fb);
    }
}

/* 2. */
static void resumes(void)
{
    const char *A = P("%s/A", tmp), *B = P("%s/B", tmp);
    sh("cp -r '%s' '%s'", FIXTURE, A);
    resume(A);
    CHECK(exists(P("%s/checkpoint-25.bin", A)), "A keeps checkpoint-25.bin");
    sh("cp -r '%s' '%s'", A, B);
    sh("cp '%s/checkpoint-25.bin' '%s/checkpoint.bin'", B, B);
    resume(B);
    same_run(A, B);
    printf("  resumed 10 -> 40 in one go, and again from its step 25: the same logs and checkpoint\n");
}

/* The fixture copied to dir with its configuration record changed by edit (a sed script over the
   record's lines). */
static void edited_copy(const char *dir, const char *edit)
{
    char err[4600], path[1100], in[1100], out[1100];
    sh("cp -r '%s' '%s'", FIXTURE, dir);
    snprintf(path, sizeof path, "%s/checkpoint.bin", dir);
    fl_ckpt ck;
    CHECK(!fl_ckpt_read(&ck, path, err, sizeof err), "%s", err);
    const fl_ckpt_section *c = fl_ckpt_find(&ck, 1); /* the configuration (train.c's section ids) */
    CHECK(c, "no configuration section");
    snprintf(in, sizeof in, "%s/record", dir);
    snprintf(out, sizeof out, "%s/record.new", dir);
    FILE *f = fopen(in, "wb");
    CHECK(f && fwrite(c->data, 1, c->size, f) == c->size && !fclose(f), "%s", in);
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "sed '%s' '%s' > '%s'", edit, in, out);
    CHECK(!system(cmd), "%s", cmd);
    size_t n;
    char *rec = slurp(out, &n);
    CHECK(rec, "%s", out);
    fl_ckpt_section secs[32];
    for (int i = 0; i < ck.nsec; i++)
        secs[i] = ck.secs[i].id == 1 ? (fl_ckpt_section){ 1, rec, n } : ck.secs[i];
    CHECK(!fl_ckpt_write(path, secs, ck.nsec, err, sizeof err), "%s", err);
    fl_ckpt_free(&ck);
    free(rec);
    CHECK(!remove(in) && !remove(out), "cleanup");
}

/* 3. */
static void records(void)
{
    char A[300], old[300], e[300], d[300], ck[400], never[300];
    snprintf(A, sizeof A, "%s/A", tmp);
    snprintf(old, sizeof old, "%s/old", tmp);
    snprintf(e, sizeof e, "%s/err", tmp);
    snprintf(d, sizeof d, "%s/bad", tmp);
    snprintf(ck, sizeof ck, "%s/checkpoint.bin", d);
    snprintf(never, sizeof never, "%s/never", tmp);
    edited_copy(old, "/^chan_every=/d");
    resume(old);
    same_run(A, old);
    static const struct {
        const char *name, *edit, *says;
    } bad[] = { { "unknown", "$a\\\nfrobnicate=1", "unknown key 'frobnicate'" },
                { "newer", "s/^fp8lab-train-config 1$/fp8lab-train-config 9/", "newer" } };
    for (int k = 0; k < 2; k++) {
        sh("rm -rf '%s'%s", d, "");
        edited_copy(d, bad[k].edit);
        const char *a[] = { "train", "--resume", d, "--quiet", NULL };
        CHECK(run(e, a) == 1, "%s: resume must exit 1", bad[k].name);
        CHECK(contains(e, ck) && contains(e, bad[k].says), "%s: the message must name %s and say '%s'", bad[k].name, ck,
              bad[k].says);
        same_file(P("%s/metrics.csv", d), P("%s/metrics.csv", FIXTURE));
        same_file(P("%s/sites.csv", d), P("%s/sites.csv", FIXTURE));
        same_file(P("%s/telemetry.jsonl", d), P("%s/telemetry.jsonl", FIXTURE));
        CHECK(!exists(P("%s/config.json", d)) && !exists(P("%s/summary.json", d)), "%s: nothing written", bad[k].name);
        const char *f[] = { "train", "--fork", ck, "--out", never, "--quiet", NULL };
        CHECK(run(e, f) == 1 && !exists(never), "%s: a fork of it exits 1 and makes no folder", bad[k].name);
    }
    printf("  a record without a newer option's key resumes to the same bytes; an unknown key and a newer format "
           "are refused, the folder untouched\n");
}

/* The lines of file from the first one of step `from` on (after the header). */
static char *rows_from(const char *file, long from, size_t *n)
{
    size_t len;
    char *t = slurp(file, &len);
    CHECK(t, "%s", file);
    char *p = strchr(t, '\n');
    CHECK(p, "%s: no header", file);
    for (p++; *p && strtol(p, NULL, 10) < from; p = strchr(p, '\n') + 1)
        ;
    *n = len - (size_t)(p - t);
    memmove(t, p, *n + 1);
    return t;
}

/* 4. */
static void forks(void)
{
    const char *A = P("%s/A", tmp), *F = P("%s/F", tmp), *G = P("%s/G", tmp), *H = P("%s/H", tmp), *e = P("%s/err", tmp);
    const char *ck = P("%s/checkpoint.bin", FIXTURE);
    const char *f[] = { "train", "--fork", ck, "--out", F, "--threads", "1", "--quiet", NULL };
    CHECK(run(e, f) == 0, "fork F");
    static const char *const files[] = { "metrics.csv", "sites.csv" };
    for (int k = 0; k < 2; k++) {
        size_t na, nf;
        char pa[1100], pf[1100];
        snprintf(pa, sizeof pa, "%s/%s", A, files[k]);
        snprintf(pf, sizeof pf, "%s/%s", F, files[k]);
        char *ra = rows_from(pa, 10, &na), *rf = rows_from(pf, 10, &nf);
        CHECK(na > 0 && na == nf && !memcmp(ra, rf, na), "%s: the fork's rows from step 10 are not the resumed run's", pf);
        free(ra);
        free(rf);
    }
    const char *g[] = { "train", "--fork", ck, "--recipe", "fp8-current", "--out", G, "--threads", "1", "--quiet", NULL };
    CHECK(run(e, g) == 0, "fork G (fp8-current)");
    json_error_t je;
    json_t *cj = json_load_file(P("%s/config.json", G), 0, &je);
    CHECK(cj, "%s", je.text);
    CHECK(json_integer_value(json_object_get(cj, "fork_step")) == 10 &&
              !strcmp(json_string_value(json_object_get(cj, "fork_from")), ck) &&
              !strcmp(json_string_value(json_object_get(cj, "recipe")), "fp8-current"),
          "G's config.json records the fork");
    json_decref(cj);
    const char *h[] = { "train", "--fork", ck, "--width", "16", "--out", H, "--quiet", NULL };
    CHECK(run(e, h) == 2 && !exists(H) && contains(e, "--width"), "a fork changing --width: exit 2, no folder");
    printf("  forks: unchanged it continues the resumed run's rows; fp8-current runs and records its parent; --width refused\n");
}

/* 5. (version 5) Its configuration section, damaged, is refused by the checks a record passes: a path
   without its NUL, more kept steps than 16, a section of the wrong length.  The offsets are those of
   version 5's frozen layout (train_cfg_v5.c). */
static void v5_damaged(void)
{
    enum { V5_SIZE = 1640, V5_DATA_PATH = 416, V5_KEEP_N = 976, V5_FORK_FROM = 1128 };
    fl_ckpt ck;
    char err[4600];
    CHECK(!fl_ckpt_read(&ck, P("%s/checkpoint.bin", FIXTURE), err, sizeof err), "%s", err);
    const fl_ckpt_section *s = fl_ckpt_find(&ck, 1); /* the configuration (train.c's CK_CFG) */
    CHECK(ck.version == FL_CKPT_VERSION_V5 && s && s->size == V5_SIZE, "a version-5 configuration section");
    unsigned char raw[V5_SIZE];
    fl_train_cfg c;
    memcpy(raw, s->data, sizeof raw);
    CHECK(!fl_train_cfg_load_v5(&c, raw, sizeof raw, err, sizeof err), "the intact section loads: %s", err);
    memset(raw + V5_DATA_PATH, 'a', 512); /* (the fixture's data is synthetic: a stray path is refused too) */
    CHECK(fl_train_cfg_load_v5(&c, raw, sizeof raw, err, sizeof err) && strstr(err, "--data"), "a data path "
          "without its NUL is refused (%s)", err);
    memcpy(raw, s->data, sizeof raw);
    memset(raw + V5_FORK_FROM, 'b', 512);
    CHECK(fl_train_cfg_load_v5(&c, raw, sizeof raw, err, sizeof err) && strstr(err, "--fork"), "a fork path "
          "without its NUL is refused (%s)", err);
    memcpy(raw, s->data, sizeof raw);
    const uint32_t k17 = 17;
    memcpy(raw + V5_KEEP_N, &k17, 4);
    CHECK(fl_train_cfg_load_v5(&c, raw, sizeof raw, err, sizeof err) && strstr(err, "--keep-ckpt"), "17 kept steps "
          "are refused (%s)", err);
    CHECK(fl_train_cfg_load_v5(&c, s->data, V5_SIZE - 8, err, sizeof err), "a short section is refused");
    fl_ckpt_free(&ck);
    printf("  its configuration damaged (paths without a NUL, 17 kept steps, cut short) is refused\n");
}

int main(void)
{
    static const char *const fixtures[] = { "tests/fixtures/train_ckpt", "tests/fixtures/train_ckpt_v5" };
    cli_init();
    char top[160];
    snprintf(top, sizeof top, "/tmp/fp8lab_test_fixture_%d", (int)getpid());
    CHECK(!mkdir(top, 0755), "mkdir %s", top);
    for (int k = 0; k < 2; k++) {
        FIXTURE = fixtures[k];
        snprintf(tmp, sizeof tmp, "%s/%d", top, k);
        CHECK(!mkdir(tmp, 0755), "mkdir %s", tmp);
        loads();
        resumes();
        if (k == 0)
            records();
        else
            v5_damaged();
        forks();
    }
    sh("rm -rf '%s'%s", top, "");
    PASS("test_train_fixture");
}
