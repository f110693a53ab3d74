/* fuzz_checkpoint.c — libFuzzer harness of the training checkpoint reader (experiments/train/checkpoint.c)
 * and of the configuration a fork or resume takes from it (fl_train_fork_cfg, train.c).
 *
 * One input is one checkpoint.bin.  It is read as it is, which mostly exercises the header checks; then
 * again with the header's payload length and CRC-32 set to what the bytes hold, so that mutations get
 * past the checksum to the section table.  When that reads, every section is touched, fl_ckpt_find is
 * asked for each id, and fl_train_fork_cfg reads the stored configuration (its key=value record,
 * fl_train_cfg_load: checkpoint.dict holds the record's keys); a configuration that passes
 * fl_train_cfg_check is turned into train flags and config.json, as a fork does.  make fuzz runs it. */
#include "fuzz.h"
#include "train/checkpoint.h"
#include "train/train.h"

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    devnull = fopen("/dev/null", "w");
    return 0;
}

static void read_one(const char *path, int deep)
{
    char err[4600];
    fl_ckpt ck;
    err[0] = 0;
    if (fl_ckpt_read(&ck, path, err, sizeof err)) {
        if (ck.buf || !err[0])
            abort(); /* a failure frees and says why */
        return;
    }
    if (ck.nsec < 0 || ck.nsec > 32)
        abort();
    for (int i = 0; i < ck.nsec; i++) {
        fuzz_touch(ck.secs[i].data, (size_t)ck.secs[i].size);
        if (!fl_ckpt_find(&ck, ck.secs[i].id))
            abort();
    }
    fl_ckpt_free(&ck);
    if (!deep)
        return;
    fl_train_cfg fork, parent;
    if (fl_train_fork_cfg(&fork, &parent, path, err, sizeof err))
        return;
    if (fl_train_cfg_check(&parent) == NULL) {
        char args[16384];
        fl_train_cfg_args(args, sizeof args, &parent);
        fl_train_cfg_json(devnull, &parent);
        fl_train_fork_mismatch(&parent, &fork);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[512];
    read_one(fuzz_file(path, sizeof path, "checkpoint.bin", data, size), 0);
    if (size < 32)
        return 0;
    unsigned char *b = malloc(size);
    memcpy(b, data, size);
    const uint64_t payload = size - 32;
    const uint32_t crc = fl_crc32(0, b + 32, size - 32);
    memcpy(b + 16, &payload, 8);
    memcpy(b + 24, &crc, 4);
    read_one(fuzz_file(path, sizeof path, "checkpoint.bin", b, size), 1);
    free(b);
    return 0;
}
