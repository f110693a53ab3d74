/* data.c — embedded corpus generator, text loader, batches (see data.h). */
#include "data.h"
#include "fl_base.h"

#include <errno.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


typedef struct {
    uint64_t s;
} rng;

static uint64_t rng_u64(rng *r) { return fl_splitmix64(&r->s); }
static double rng_unif(rng *r) { return (double)(rng_u64(r) >> 11) * 0x1p-53; }

static uint64_t fnv1a(const uint16_t *t, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ (t[i] & 0xFF)) * 0x100000001b3ull;
        h = (h ^ (t[i] >> 8)) * 0x100000001b3ull;
    }
    return h;
}

#define SYN_V 256
#define SYN_SUCC 4

int fl_data_synthetic(fl_data *d, uint64_t seed, size_t n) { return fl_data_synthetic_ex(d, seed, n, 0.0f, 0); }

int fl_data_synthetic_ex(fl_data *d, uint64_t seed, size_t n, float trigger_rate, uint32_t trigger_len)
{
    memset(d, 0, sizeof *d);
    d->tok = malloc((n ? n : 1) * sizeof *d->tok);
    if (!d->tok)
        return -1;
    d->n = n;
    d->V = SYN_V;
    rng r = { seed ^ 0xD47A5EEDull };
    /* With triggers, token SYN_V-1 is the trigger and never drawn otherwise: the grammar and the
       Zipf draws use 1..Vb-1.  Without triggers Vb = SYN_V and the stream is the original one. */
    const int trig = trigger_rate > 0.0f && trigger_len > 0;
    const int Vb = trig ? SYN_V - 1 : SYN_V;
    rng rt = { seed ^ 0x7216CE85ull }; /* trigger decisions and payload: their own stream */
    uint16_t payload[64];
    for (uint32_t k = 0; k < trigger_len && k < 64; k++)
        payload[k] = (uint16_t)(1 + rng_u64(&rt) % (uint64_t)(Vb - 1));
    /* Zipf cumulative over tokens 1..V-1 (token 0 is the separator), in a seeded random order */
    double cdf[SYN_V];
    uint16_t perm[SYN_V];
    for (int i = 0; i < SYN_V; i++)
        perm[i] = (uint16_t)i;
    for (int i = Vb - 1; i > 1; i--) {
        const int j = 1 + (int)(rng_u64(&r) % (uint64_t)i);
        const uint16_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    double z = 0.0;
    for (int k = 1; k < Vb; k++) {
        z += pow((double)k, -1.1);
        cdf[k] = z;
    }
    uint16_t succ[SYN_V][SYN_SUCC];
    for (int a = 0; a < SYN_V; a++)
        for (int k = 0; k < SYN_SUCC; k++)
            succ[a][k] = (uint16_t)(1 + rng_u64(&r) % (uint64_t)(Vb - 1));
    size_t i = 0;
    uint16_t prev = 0;
    while (i < n) {
        /* a trigger event: the trigger token, the fixed payload, a separator */
        if (trig && rng_unif(&rt) < (double)trigger_rate) {
            if (i < n)
                d->tok[i++] = (uint16_t)(SYN_V - 1);
            for (uint32_t k = 0; k < trigger_len && i < n; k++)
                d->tok[i++] = payload[k];
            if (i < n)
                d->tok[i++] = 0;
            continue;
        }
        /* a sentence: maybe a copy of an earlier span, else grammar + Zipf draws */
        if (i > 64 && rng_unif(&r) < 0.1) {
            const size_t len = 16 + (size_t)(rng_u64(&r) % 49);
            const size_t back = len + (size_t)(rng_u64(&r) % 64);
            if (back <= i)
                for (size_t k = 0; k < len && i < n; k++, i++)
                    d->tok[i] = d->tok[i - back];
        }
        do {
            if (i >= n)
                break;
            uint16_t t;
            if (prev != 0 && rng_unif(&r) < 0.75) {
                t = succ[prev][rng_u64(&r) % SYN_SUCC];
            } else {
                const double u = rng_unif(&r) * z;
                int lo = 1, hi = Vb - 1;
                while (lo < hi) {
                    const int mid = (lo + hi) / 2;
                    if (cdf[mid] < u)
                        lo = mid + 1;
                    else
                        hi = mid;
                }
                t = perm[lo];
            }
            d->tok[i++] = t;
            prev = t;
        } while (rng_unif(&r) > 1.0 / 12.0);
        if (i < n)
            d->tok[i++] = 0;
        prev = 0;
    }
    d->hash = fnv1a(d->tok, n);
    return 0;
}

/* d: the n bytes as tokens (V = 256) and their hash.  0, or -1 out of memory. */
static int bytes_to_tokens(fl_data *d, const unsigned char *buf, size_t n)
{
    d->tok = malloc((n ? n : 1) * sizeof *d->tok);
    if (!d->tok)
        return -1;
    for (size_t i = 0; i < n; i++)
        d->tok[i] = buf[i];
    d->n = n;
    d->V = 256;
    d->hash = fnv1a(d->tok, n);
    return 0;
}

int fl_data_load_text(fl_data *d, const char *path, size_t min_len, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    size_t k;
    while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            unsigned char *nb = cap < ((size_t)1 << 31) ? realloc(buf, cap * 2) : NULL;
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
    }
    const int rerr = ferror(f);
    fclose(f);
    if (!buf || rerr) {
        free(buf);
        snprintf(err, errlen, "%s: read error or file too large", path);
        return -1;
    }
    if (n < min_len) {
        free(buf);
        snprintf(err, errlen, "%s: only %zu bytes; a text data file needs at least %zu (seq + 1)", path, n, min_len);
        return -1;
    }
    if (memchr(buf, 0, n)) {
        const size_t at = (size_t)((unsigned char *)memchr(buf, 0, n) - buf);
        free(buf);
        snprintf(err, errlen, "%s: not a text file (NUL byte at offset %zu)", path, at);
        return -1;
    }
    const int rc = bytes_to_tokens(d, buf, n);
    free(buf);
    if (rc)
        snprintf(err, errlen, "%s: out of memory", path);
    return rc;
}

static const char *const fortunes_files[] = {
    "art", "ascii-art", "computers", "cookie", "debian", "definitions", "disclaimer", "drugs", "education",
    "ethnic", "food", "fortunes", "goedel", "humorists", "kids", "knghtbrd", "law", "linux", "linuxcookie",
    "literature", "love", "magic", "medicine", "men-women", "miscellaneous", "news", "paradoxum", "people",
    "perl", "pets", "platitudes", "politics", "pratchett", "riddles", "science", "songs-poems", "sports",
    "startrek", "tao", "translate-me", "wisdom", "work", "zippy",
};
#define FORTUNES_HASH 0x3416035945014e6dull /* FNV-1a of the concatenation (fnv1a over 16-bit tokens) */

int fl_data_fortunes(fl_data *d, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    /* one byte of room beyond the pinned length: a longer text shows as n == FL_FORTUNES_LEN + 1 */
    const size_t cap = (size_t)FL_FORTUNES_LEN + 1;
    unsigned char *buf = malloc(cap);
    size_t n = 0;
    if (!buf) {
        snprintf(err, errlen, "fortunes: out of memory");
        return -1;
    }
    for (size_t k = 0; k < FL_ARRAY_LEN(fortunes_files) && n < cap; k++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", FL_FORTUNES_DIR, fortunes_files[k]);
        FILE *f = fopen(path, "rb");
        if (!f) {
            snprintf(err, errlen, "%s: cannot open: %s (the text of --data fortunes comes from the Debian package "
                                  "'fortunes': apt-get install fortunes, or run .ci/deps.sh as root)", path, strerror(errno));
            free(buf);
            return -1;
        }
        n += fread(buf + n, 1, cap - n, f);
        fclose(f);
    }
    const int rc = bytes_to_tokens(d, buf, n);
    free(buf);
    if (rc) {
        snprintf(err, errlen, "fortunes: out of memory");
        return -1;
    }
    if (n != FL_FORTUNES_LEN || d->hash != FORTUNES_HASH) {
        snprintf(err, errlen, "%s: the fortune files are not the pinned text (%s%zu bytes, FNV-1a %016llx; expected %u bytes, "
                              "%016llx: Debian 12's fortunes 1:1.99.1-7.3)", FL_FORTUNES_DIR,
                 n > FL_FORTUNES_LEN ? "more than " : "", n > FL_FORTUNES_LEN ? (size_t)FL_FORTUNES_LEN : n,
                 (unsigned long long)(n > FL_FORTUNES_LEN ? 0 : d->hash), FL_FORTUNES_LEN, (unsigned long long)FORTUNES_HASH);
        fl_data_free(d);
        return -1;
    }
    return 0;
}

/* One shard appended to d (tok grown to hold it).  0, or -1 with the message. */
static int shard_append(fl_data *d, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    unsigned char h[FL_SHARD_HEADER_BYTES];
    int32_t hd[3];
    int rc = -1;
    if (fread(h, 1, sizeof h, f) != sizeof h) {
        snprintf(err, errlen, "%s: shorter than a token shard's %d-byte header", path, FL_SHARD_HEADER_BYTES);
        goto out;
    }
    for (int k = 0; k < 3; k++) /* little-endian, as the writers' numpy int32 */
        hd[k] = (int32_t)((uint32_t)h[4 * k] | (uint32_t)h[4 * k + 1] << 8 | (uint32_t)h[4 * k + 2] << 16 |
                          (uint32_t)h[4 * k + 3] << 24);
    if (hd[0] != FL_SHARD_MAGIC) {
        snprintf(err, errlen, "%s: not a token shard (magic %d, expected %d: llm.c's format)", path, hd[0], FL_SHARD_MAGIC);
        goto out;
    }
    if (hd[1] != FL_SHARD_VERSION) {
        snprintf(err, errlen, "%s: shard version %d; only version %d (uint16 tokens) is read%s", path, hd[1],
                 FL_SHARD_VERSION, hd[1] == 2 ? " (version 2 holds uint32 tokens)" : "");
        goto out;
    }
    if (fseeko(f, 0, SEEK_END) != 0) {
        snprintf(err, errlen, "%s: cannot seek: %s", path, strerror(errno));
        goto out;
    }
    const off_t size = ftello(f);
    const uint64_t want = (uint64_t)FL_SHARD_HEADER_BYTES + 2 * (uint64_t)(uint32_t)hd[2];
    if (hd[2] <= 0 || size < 0 || (uint64_t)size != want) {
        snprintf(err, errlen, "%s: the header counts %d tokens (%llu bytes with the header) but the file holds %lld bytes",
                 path, hd[2], (unsigned long long)want, (long long)size);
        goto out;
    }
    const size_t n = (size_t)hd[2];
    if (d->n + n > FL_SHARD_MAX_TOKENS) {
        snprintf(err, errlen, "%s: the shards hold more than %zu tokens in all (they are read into memory)", path,
                 FL_SHARD_MAX_TOKENS);
        goto out;
    }
    uint16_t *t = realloc(d->tok, (d->n + n) * sizeof *t);
    if (!t) {
        snprintf(err, errlen, "%s: out of memory for %zu tokens", path, d->n + n);
        goto out;
    }
    d->tok = t;
    unsigned char *b = (unsigned char *)(t + d->n);
    if (fseeko(f, FL_SHARD_HEADER_BYTES, SEEK_SET) != 0 || fread(b, 2, n, f) != n) {
        snprintf(err, errlen, "%s: read error", path);
        goto out;
    }
    for (size_t i = 0; i < n; i++) { /* little-endian uint16, on any host */
        const uint16_t v = (uint16_t)(b[2 * i] | b[2 * i + 1] << 8);
        t[d->n + i] = v;
        if (v >= d->V)
            d->V = (uint32_t)v + 1;
    }
    d->n += n;
    rc = 0;
out:
    fclose(f);
    return rc;
}

int fl_data_load_shards(fl_data *d, const char *pattern, size_t min_len, char *err, size_t errlen)
{
    memset(d, 0, sizeof *d);
    glob_t g;
    const int gr = glob(pattern, GLOB_ERR, NULL, &g);
    if (gr) {
        snprintf(err, errlen, "shards:%s: %s", pattern,
                 gr == GLOB_NOMATCH ? "no file matches" : gr == GLOB_NOSPACE ? "out of memory" : "cannot read a folder");
        if (gr != GLOB_NOMATCH)
            globfree(&g);
        return -1;
    }
    int rc = 0;
    for (size_t k = 0; k < g.gl_pathc && !rc; k++)
        rc = shard_append(d, g.gl_pathv[k], err, errlen);
    if (!rc && d->n < min_len) {
        snprintf(err, errlen, "shards:%s: %zu tokens in %zu files; the run needs at least %zu (seq + 2)", pattern, d->n,
                 g.gl_pathc, min_len);
        rc = -1;
    }
    globfree(&g);
    if (rc) {
        fl_data_free(d);
        return -1;
    }
    d->hash = fnv1a(d->tok, d->n);
    return 0;
}

void fl_data_free(fl_data *d)
{
    free(d->tok);
    memset(d, 0, sizeof *d);
}

/* The offset of row b of step `step` in a corpus of n tokens, for rows of len tokens. */
static size_t batch_offset(size_t n, size_t len, uint64_t seed, uint64_t step, size_t b)
{
    const uint64_t u = fl_mix64(fl_mix64(seed ^ 0xBA7C4ull) + step * 0x9E3779B97F4A7C15ull + b * 0xD1B54A32D192ED03ull);
    return (size_t)(u % (n - len + 1));
}

void fl_data_batch_bos(uint16_t *out, const fl_data *d, uint64_t seed, uint64_t step, size_t B, size_t T, uint16_t bos)
{
    for (size_t b = 0; b < B; b++) {
        out[b * (T + 1)] = bos;
        memcpy(out + b * (T + 1) + 1, d->tok + batch_offset(d->n, T, seed, step, b), T * sizeof *out);
    }
}

void fl_data_batch(uint16_t *out, const fl_data *d, uint64_t seed, uint64_t step, size_t B, size_t T)
{
    for (size_t b = 0; b < B; b++)
        memcpy(out + b * (T + 1), d->tok + batch_offset(d->n, T + 1, seed, step, b), (T + 1) * sizeof *out);
}
