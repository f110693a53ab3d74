/* data.h — training data of the harness: an embedded deterministic corpus generator and a
 * loader for any user-supplied text file (byte-level tokens).
 *
 * The generated corpus ("synthetic", the default; nothing to download) is a token stream over
 * V = 256 with the statistics that make language-model activations heavy-tailed:
 *   - Zipfian unigram frequencies (exponent 1.1): a handful of tokens are very frequent;
 *   - local grammar: every token has 4 preferred successors (a sparse random bigram table, taken
 *     with probability 0.75);
 *   - a separator token 0 ends "sentences" of geometric length (mean 12);
 *   - long repeats: with probability 0.1 at a sentence start, a span of 16..64 earlier tokens is
 *     copied verbatim (induction / copying patterns).
 * It is a pure function of (seed, length): the same seed gives the same corpus on every machine.
 *
 * Batches: sequence b of step t starts at an offset drawn from a counter-based generator keyed
 * by (seed, t, b), so the data cursor is the step number itself: a resumed run reads exactly the
 * batches the uninterrupted run read.
 */
#ifndef FL_DATA_H
#define FL_DATA_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint16_t *tok;  /* (n) tokens in [0, V) */
    size_t n;
    uint32_t V;
    uint64_t hash;  /* FNV-1a of the tokens: identifies the corpus in checkpoints */
} fl_data;

/* The generated corpus of n tokens.  Returns 0, or -1 out of memory. */
int fl_data_synthetic(fl_data *d, uint64_t seed, size_t n);
/* The same corpus with rare trigger events ("triggers"): before each sentence, with probability
   trigger_rate, a trigger event is emitted instead: the trigger token V-1 (which occurs nowhere
   else), a fixed seeded payload of trigger_len tokens, a separator.  Structured data, nothing
   planted in the model: a rare pattern the model learns to answer strongly.  trigger_rate 0 gives
   exactly fl_data_synthetic. */
int fl_data_synthetic_ex(fl_data *d, uint64_t seed, size_t n, float trigger_rate, uint32_t trigger_len);
/* A text file as bytes.  Returns 0, or -1 with a message in err naming the file: unreadable,
   shorter than min_len bytes, or binary (contains a NUL byte). */
int fl_data_load_text(fl_data *d, const char *path, size_t min_len, char *err, size_t errlen);
/* Real English text from a Debian package: the fortune cookie files of `fortunes` (fortune-mod,
   Debian 12's 1:1.99.1-7.3, installed by .ci/deps.sh), FL_FORTUNES_FILES in that order from
   FL_FORTUNES_DIR, concatenated as bytes (2,576,674 of them).  The concatenation is pinned by its
   FNV-1a hash FL_FORTUNES_HASH: another version of the package is refused, not silently used.
   Returns 0, or -1 with a message in err (the package missing, a file unreadable, the hash). */
#define FL_FORTUNES_DIR "/usr/share/games/fortunes"
#define FL_FORTUNES_LEN 2576674u
int fl_data_fortunes(fl_data *d, char *err, size_t errlen);
/* Token shards as llm.c's data scripts write them (the scripts in dev/data: FineWeb, TinyStories): a header of
   256 little-endian int32 (magic FL_SHARD_MAGIC, version FL_SHARD_VERSION, the token count), then that
   many uint16 tokens.  Every file that `pattern` matches (glob(3), in its sorted order; at most
   FL_SHARD_MAX_TOKENS tokens in all) is read into memory and the files are concatenated (each
   document of those corpora begins with its end-of-text token, so a window crossing a shard boundary
   crosses a document boundary).  d->V is the largest token + 1.  Returns 0, or -1 with a message in
   err naming the file: no match, unreadable, a bad magic or version, a count the file's size does not
   hold, fewer than min_len tokens in all. */
#define FL_SHARD_MAGIC 20240520
#define FL_SHARD_VERSION 1
#define FL_SHARD_HEADER_BYTES 1024
#define FL_SHARD_MAX_TOKENS ((size_t)1 << 33)
int fl_data_load_shards(fl_data *d, const char *pattern, size_t min_len, char *err, size_t errlen);
void fl_data_free(fl_data *d);
/* The batch with a BOS token: every row (T+1 tokens) is bos followed by T corpus tokens, drawn as
   fl_data_batch draws them (one offset per row from (seed, step, b)). */
void fl_data_batch_bos(uint16_t *out, const fl_data *d, uint64_t seed, uint64_t step, size_t B, size_t T, uint16_t bos);
/* out (B, T+1): the token windows of step `step`. */
void fl_data_batch(uint16_t *out, const fl_data *d, uint64_t seed, uint64_t step, size_t B, size_t T);

#endif /* FL_DATA_H */
