/* test_train_shards.c — `--data shards:GLOB`: token shards in llm.c's format (a 256 x int32 header:
 * magic 20240520, version 1, the token count; then uint16 tokens).
 *
 *  1. fl_data_load_shards reads the files a pattern matches in sorted order, concatenated, token for
 *     token, with V = the largest token + 1 and the hash of the concatenation.
 *  2. A bad magic, a version-2 shard, a count the file does not hold, a short header, no match and too
 *     few tokens are refused, the message naming the file (or the pattern).
 *  3. Through the CLI: a run on shards records data "shards:PATTERN" and vocab = the largest token + 1
 *     in config.json; --vocab N uses N; --vocab below a token, a bad shard, --vocab with a byte corpus
 *     and --bos with shards exit 2 before the run folder exists; a run resumed from a kept checkpoint
 *     ends byte-identical to the uninterrupted one.
 * Needs the CLI: $FP8LAB (tests/run.sh sets it), default build/fp8lab.
 */
#include "check.h"
#include "cli_test.h"
#include "dir_test.h"
#include "train/data.h"

#include "fl_base.h"

#include <stdarg.h>
#include <stdint.h>
#include <sys/stat.h>

static char tmp[256];

/* A shard at path: header (magic, version, count_in_header) and n tokens t (little-endian). */
static void write_shard(const char *path, int32_t magic, int32_t version, int32_t count, const uint16_t *t, size_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f, "create %s", path);
    unsigned char h[FL_SHARD_HEADER_BYTES] = { 0 };
    const int32_t hd[3] = { magic, version, count };
    for (int k = 0; k < 3; k++)
        for (int b = 0; b < 4; b++)
            h[4 * k + b] = (unsigned char)((uint32_t)hd[k] >> (8 * b));
    CHECK(fwrite(h, 1, sizeof h, f) == sizeof h, "write");
    for (size_t i = 0; i < n; i++) {
        const unsigned char b[2] = { (unsigned char)(t[i] & 0xff), (unsigned char)(t[i] >> 8) };
        CHECK(fwrite(b, 1, 2, f) == 2, "write");
    }
    fclose(f);
}

enum { NA = 3000, NB = 2000 };
static uint16_t ta[NA], tb[NB];

static void make_tokens(void)
{
    uint64_t s = 12345;
    for (size_t i = 0; i < NA; i++)
        ta[i] = (uint16_t)(fl_splitmix64(&s) % 290);
    for (size_t i = 0; i < NB; i++)
        tb[i] = (uint16_t)(fl_splitmix64(&s) % 250);
    tb[NB / 2] = 299; /* the largest token, in the second file */
}

static void check_loader(void)
{
    write_shard(P("%s/good/s_001.bin", tmp), FL_SHARD_MAGIC, 1, NB, tb, NB);
    write_shard(P("%s/good/s_000.bin", tmp), FL_SHARD_MAGIC, 1, NA, ta, NA); /* written second, sorted first */
    fl_data d;
    char err[4400];
    CHECK(fl_data_load_shards(&d, P("%s/good/s_*.bin", tmp), 66, err, sizeof err) == 0, "load: %s", err);
    CHECK(d.n == NA + NB && d.V == 300, "n %zu V %u (want %d, 300)", d.n, d.V, NA + NB);
    CHECK(!memcmp(d.tok, ta, sizeof ta) && !memcmp(d.tok + NA, tb, sizeof tb), "the tokens, in sorted file order");
    const uint64_t h = d.hash;
    fl_data_free(&d);
    CHECK(fl_data_load_shards(&d, P("%s/good/s_00[0-1].bin", tmp), 66, err, sizeof err) == 0 && d.hash == h,
          "the same files by another pattern: the same hash");
    fl_data_free(&d);
    unsigned amax = 0;
    for (size_t i = 0; i < NA; i++)
        amax = ta[i] > amax ? ta[i] : amax;
    CHECK(fl_data_load_shards(&d, P("%s/good/s_000.bin", tmp), 66, err, sizeof err) == 0 && d.n == NA && d.hash != h &&
              d.V == amax + 1,
          "one file: its tokens, another hash");
    fl_data_free(&d);

    static const struct {
        int32_t magic, version, count;
        size_t n;
        const char *why;
    } bad[] = {
        { 20240521, 1, 100, 100, "not a token shard" },
        { FL_SHARD_MAGIC, 2, 100, 100, "version 2" },
        { FL_SHARD_MAGIC, 1, 101, 100, "counts 101 tokens" },
        { FL_SHARD_MAGIC, 1, 0, 0, "counts 0 tokens" },
        { FL_SHARD_MAGIC, 1, -5, 100, "counts -5 tokens" },
    };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        const char *p = P("%s/bad/b%zu.bin", tmp, k);
        write_shard(p, bad[k].magic, bad[k].version, bad[k].count, ta, bad[k].n);
        CHECK(fl_data_load_shards(&d, p, 66, err, sizeof err) == -1, "bad shard %zu accepted", k);
        CHECK(strstr(err, p) && strstr(err, bad[k].why), "bad shard %zu: '%s' must name %s and say '%s'", k, err, p,
              bad[k].why);
        CHECK(!d.tok && !d.n, "bad shard %zu: nothing kept", k);
    }
    FILE *f = fopen(P("%s/bad/short.bin", tmp), "wb");
    CHECK(f && fwrite("abc", 1, 3, f) == 3, "short");
    fclose(f);
    CHECK(fl_data_load_shards(&d, P("%s/bad/short.bin", tmp), 66, err, sizeof err) == -1 && strstr(err, "header"),
          "a short file: %s", err);
    CHECK(fl_data_load_shards(&d, P("%s/none_*.bin", tmp), 66, err, sizeof err) == -1 && strstr(err, "no file matches"),
          "no match: %s", err);
    CHECK(fl_data_load_shards(&d, P("%s/good/s_*.bin", tmp), NA + NB + 1, err, sizeof err) == -1 &&
              strstr(err, "at least"),
          "too few tokens: %s", err);
    printf("  loader: sorted concatenation, V = largest + 1, the hash; bad magic, version, count, header, no match, "
           "too short refused naming the file\n");
}

#define TINY "--width", "16", "--layers", "1", "--heads", "2", "--ffn", "32", "--seq", "16", "--batch", "4", \
             "--log-every", "3", "--threads", "1", "--quiet"

static void check_cli(void)
{
    char e[1024], data[1024], bad_dir[1024]; /* (P's buffers are reused) */
    snprintf(e, sizeof e, "%s/err.txt", tmp);
    snprintf(data, sizeof data, "shards:%s/good/s_*.bin", tmp);
    snprintf(bad_dir, sizeof bad_dir, "%s/never", tmp);
    char u[1024], r[1024];
    snprintf(u, sizeof u, "%s/u", tmp);
    snprintf(r, sizeof r, "%s/r", tmp);
    const char *a[] = { "train", "--data", data, "--steps", "12", TINY, "--out", u, NULL };
    CHECK(run(e, a) == 0, "a run on shards");
    json_t *c = dir_json(u, "config.json");
    CHECK(json_integer_value(json_object_get(c, "vocab")) == 300, "config.json vocab: the largest token + 1");
    CHECK(!strcmp(json_string_value(json_object_get(c, "data")), data), "config.json data: %s",
          json_string_value(json_object_get(c, "data")));
    json_decref(c);

    /* resume from step 6: byte-identical */
    const char *b[] = { "train", "--data", data, "--steps", "12", TINY, "--keep-ckpt", "6", "--out", r, NULL };
    CHECK(run(e, b) == 0, "the run to resume");
    CHECK(!system(P("cp '%s/checkpoint-6.bin' '%s/checkpoint.bin'", r, r)), "cp");
    const char *rs[] = { "train", "--resume", r, "--quiet", NULL };
    CHECK(run(e, rs) == 0, "resume");
    same_file(P("%s/metrics.csv", u), P("%s/metrics.csv", r));
    same_file(P("%s/telemetry.jsonl", u), P("%s/telemetry.jsonl", r)); /* (checkpoint.bin records --keep-ckpt) */

    const char *v[] = { "train", "--data", data, "--vocab", "512", "--steps", "2", TINY, "--out", P("%s/v", tmp), NULL };
    CHECK(run(e, v) == 0, "--vocab 512");
    c = dir_json(P("%s/v", tmp), "config.json");
    CHECK(json_integer_value(json_object_get(c, "vocab")) == 512, "config.json vocab: --vocab");
    json_decref(c);

    char dbad[1024];
    snprintf(dbad, sizeof dbad, "shards:%s/bad/b0.bin", tmp);
    const char *b1[] = { "train", "--data", data, "--vocab", "299", TINY, "--out", bad_dir, NULL };
    const char *b2[] = { "train", "--data", dbad, TINY, "--out", bad_dir, NULL };
    const char *b3[] = { "train", "--data", "synthetic", "--vocab", "300", TINY, "--out", bad_dir, NULL };
    const char *b4[] = { "train", "--data", data, "--bos", TINY, "--out", bad_dir, NULL };
    const char *b5[] = { "train", "--data", "shards:", TINY, "--out", bad_dir, NULL };
    const char *const *bad[] = { b1, b2, b3, b4, b5 };
    const char *want[] = { "token 299 is not below the vocabulary 299", "not a token shard", "--vocab applies", "--bos",
                           "needs a pattern" };
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        CHECK(run(e, bad[k]) == 2, "bad %zu: exit 2", k);
        CHECK(contains(e, want[k]), "bad %zu: the message must say '%s'", k, want[k]);
        struct stat sb;
        CHECK(stat(bad_dir, &sb) != 0, "bad %zu: the run folder was created", k);
    }
    printf("  CLI: config.json vocab and data, --vocab, resume byte-identical, bad shards and flags exit 2 before "
           "the run folder\n");
}

int main(void)
{
    cli_init();
    dir_make(tmp, sizeof tmp, "/tmp/fl_shards_XXXXXX");
    CHECK(!mkdir(P("%s/good", tmp), 0755) && !mkdir(P("%s/bad", tmp), 0755), "mkdir");
    make_tokens();
    check_loader();
    check_cli();
    CHECK(!system(P("rm -rf '%s'", tmp)), "rm");
    PASS("test_train_shards");
}
