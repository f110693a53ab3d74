/* checkpoint.c — atomic, checksummed checkpoint files (see checkpoint.h); written through the
 * project's one atomic writer, fl_write_atomic (fl_io.h). */
#include "checkpoint.h"

#include "fl_io.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char magic[8] = { 'F', 'P', '8', 'L', 'C', 'K', 'P', 'T' };

uint32_t fl_crc32(uint32_t crc, const void *data, size_t n)
{
    static uint32_t table[256];
    static int ready;
    if (!ready) { /* first call happens before any thread exists (checkpoint writes are serial) */
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    const unsigned char *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++)
        crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

typedef struct {
    const unsigned char *hdr;
    const fl_ckpt_section *secs;
    int nsec;
} ckpt_fill_ctx;

/* fl_write_atomic's fill: the header, then per section its 16-byte head and its bytes. */
static int ckpt_fill(FILE *f, void *ctx_)
{
    const ckpt_fill_ctx *c = ctx_;
    if (fwrite(c->hdr, 1, 32, f) != 32)
        return -1;
    for (int i = 0; i < c->nsec; i++) {
        const fl_ckpt_section *s = &c->secs[i];
        const uint32_t sh[4] = { s->id, 0, (uint32_t)s->size, (uint32_t)(s->size >> 32) };
        if (fwrite(sh, sizeof sh, 1, f) != 1 || (s->size && fwrite(s->data, 1, s->size, f) != s->size))
            return -1;
    }
    return 0;
}

int fl_ckpt_write(const char *path, const fl_ckpt_section *secs, int nsec, char *err, size_t errlen)
{
    uint64_t payload = 0;
    uint32_t crc = 0;
    for (int i = 0; i < nsec; i++) {
        const uint32_t sh[4] = { secs[i].id, 0, (uint32_t)secs[i].size, (uint32_t)(secs[i].size >> 32) };
        crc = fl_crc32(crc, sh, sizeof sh);
        crc = fl_crc32(crc, secs[i].data, secs[i].size);
        payload += sizeof sh + secs[i].size;
    }
    unsigned char hdr[32] = { 0 };
    memcpy(hdr, magic, 8);
    const uint32_t ver = FL_CKPT_VERSION, ns = (uint32_t)nsec;
    memcpy(hdr + 8, &ver, 4);
    memcpy(hdr + 12, &ns, 4);
    memcpy(hdr + 16, &payload, 8);
    memcpy(hdr + 24, &crc, 4);
    ckpt_fill_ctx ctx = { hdr, secs, nsec };
    return fl_write_atomic(path, ckpt_fill, &ctx, err, errlen);
}

int fl_ckpt_read(fl_ckpt *ck, const char *path, char *err, size_t errlen)
{
    memset(ck, 0, sizeof *ck);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open checkpoint: %s", path, strerror(errno));
        return -1;
    }
    fseek(f, 0, SEEK_END);
    const long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (sz < 32) {
        fclose(f);
        snprintf(err, errlen, "%s: not a checkpoint (truncated: %ld bytes)", path, sz);
        return -1;
    }
    ck->buf = malloc((size_t)sz);
    if (!ck->buf || fread(ck->buf, 1, (size_t)sz, f) != (size_t)sz) {
        fclose(f);
        fl_ckpt_free(ck);
        snprintf(err, errlen, "%s: read error", path);
        return -1;
    }
    fclose(f);
    ck->size = (size_t)sz;
    uint32_t ver, ns, crc;
    uint64_t payload;
    memcpy(&ver, ck->buf + 8, 4);
    memcpy(&ns, ck->buf + 12, 4);
    memcpy(&payload, ck->buf + 16, 8);
    memcpy(&crc, ck->buf + 24, 4);
    const char *why = NULL;
    char vwhy[96];
    if (memcmp(ck->buf, magic, 8))
        why = "bad magic: not an fp8lab checkpoint";
    else if (ver != FL_CKPT_VERSION && ver != FL_CKPT_VERSION_V5) {
        snprintf(vwhy, sizeof vwhy, "unsupported checkpoint version %u (this build reads versions %u and %u)", ver,
                 FL_CKPT_VERSION_V5, FL_CKPT_VERSION);
        why = vwhy;
    }
    else if (payload != (uint64_t)sz - 32)
        why = "size does not match its header (truncated or appended to)";
    else if (ns > 32)
        why = "too many sections";
    else if (fl_crc32(0, ck->buf + 32, (size_t)payload) != crc)
        why = "checksum mismatch (the file is corrupt)";
    ck->crc = crc;
    ck->version = ver;
    size_t off = 32;
    for (uint32_t i = 0; !why && i < ns; i++) {
        uint32_t sh[4];
        if (off + sizeof sh > ck->size) {
            why = "section table overruns the file";
            break;
        }
        memcpy(sh, ck->buf + off, sizeof sh);
        off += sizeof sh;
        const uint64_t s = (uint64_t)sh[2] | ((uint64_t)sh[3] << 32);
        if (s > ck->size - off) {
            why = "section overruns the file";
            break;
        }
        ck->secs[i].id = sh[0];
        ck->secs[i].data = ck->buf + off;
        ck->secs[i].size = s;
        off += (size_t)s;
    }
    if (why) {
        snprintf(err, errlen, "%s: %s; delete the run folder and train again (or resume from an intact copy)", path, why);
        fl_ckpt_free(ck);
        return -1;
    }
    ck->nsec = (int)ns;
    return 0;
}

const fl_ckpt_section *fl_ckpt_find(const fl_ckpt *ck, uint32_t id)
{
    for (int i = 0; i < ck->nsec; i++)
        if (ck->secs[i].id == id)
            return &ck->secs[i];
    return NULL;
}

void fl_ckpt_free(fl_ckpt *ck)
{
    free(ck->buf);
    memset(ck, 0, sizeof *ck);
}
