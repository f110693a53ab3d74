/* checkpoint.h — the training harness's checkpoint file: sections of bytes behind a header with a
 * magic number, a version and a CRC-32 of everything after the header; written to a temporary
 * file in the same folder, fsync'd, then renamed over the old one (a reader sees the old file or
 * the new one, never half of one).
 *
 * Layout (host byte order; a byte-swapped file fails the magic check):
 *   header (32 bytes): magic "FP8LCKPT", u32 version, u32 section count, u64 payload bytes,
 *                      u32 CRC-32 (IEEE 802.3, reflected 0xEDB88320) of the payload, u32 0
 *   payload: per section  u32 id, u32 0, u64 size, size bytes
 * The checkpoint holds no timestamps or paths of the moment: two runs that reach the same state
 * write the same bytes.
 */
#ifndef FL_CHECKPOINT_H
#define FL_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#define FL_CKPT_VERSION_V5 5u /* still read: train_cfg_v5.c converts its configuration */
#define FL_CKPT_VERSION 6u /* 2: fl_train_cfg gained trigger_rate, trigger_len; 3: recipe grad_current;
                              4: recipe grad_sr and site overrides, state sites_off;
                              5: per-channel telemetry, BOS, kept checkpoints, forks (cfg), the
                                 channel logs' lengths and record maxima (state);
                              6: the configuration as a versioned key=value record (train_opts.h)
                                 instead of the struct's bytes: a new option no longer needs a new
                                 version (the record's own format number covers its syntax) */

typedef struct {
    uint32_t id;
    const void *data;
    uint64_t size;
} fl_ckpt_section;

uint32_t fl_crc32(uint32_t crc, const void *data, size_t n);

/* Write the sections to path atomically.  Returns 0, or -1 with a message in err. */
int fl_ckpt_write(const char *path, const fl_ckpt_section *secs, int nsec, char *err, size_t errlen);

/* A loaded checkpoint: the whole file, checked. */
typedef struct {
    unsigned char *buf;
    size_t size;
    int nsec;
    uint32_t crc;     /* the header's CRC-32 of the payload */
    uint32_t version; /* FL_CKPT_VERSION, or FL_CKPT_VERSION_V5 (its configuration a raw struct) */
    fl_ckpt_section secs[32];
} fl_ckpt;

/* Read and verify path (magic, version, sizes, CRC).  Returns 0, or -1 with a message in err
   naming the file and what is wrong. */
int fl_ckpt_read(fl_ckpt *ck, const char *path, char *err, size_t errlen);
/* The section with this id, or NULL. */
const fl_ckpt_section *fl_ckpt_find(const fl_ckpt *ck, uint32_t id);
void fl_ckpt_free(fl_ckpt *ck);

#endif /* FL_CHECKPOINT_H */
