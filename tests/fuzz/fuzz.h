/* fuzz.h — what the libFuzzer harnesses of tests/fuzz/ share: the fuzzer's bytes as files.
 *
 * The readers under test take a path (or a folder), so each input is written to a file in a folder
 * of this process's own, made once under $FP8LAB_FUZZ_TMP (tests/fuzz/run.sh sets it and removes it
 * afterwards, also after a crash), else /dev/shm (tmpfs), $TMPDIR or /tmp, and removed at exit.  A harness that reads several files splits its input at FUZZ_SEP lines: part k is
 * the k-th file, a missing part is a missing file.
 */
#ifndef FL_FUZZ_H
#define FL_FUZZ_H

#include <fcntl.h>
#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The separator of the parts of a multi-file input: a line "##" (no CSV or JSON line starts so). */
#define FUZZ_SEP "\n##\n"

static char fuzz_dir_path[256];

static int fuzz_rm(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p);
}

static void fuzz_dir_remove(void)
{
    nftw(fuzz_dir_path, fuzz_rm, 8, FTW_DEPTH | FTW_PHYS);
}

/* This process's scratch folder (made on the first call). */
static const char *fuzz_dir(void)
{
    if (fuzz_dir_path[0])
        return fuzz_dir_path;
    struct stat sb;
    const char *base = getenv("FP8LAB_FUZZ_TMP");
    if (!base)
        base = stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) && access("/dev/shm", W_OK) == 0 ? "/dev/shm"
               : getenv("TMPDIR")                                                               ? getenv("TMPDIR")
                                                                                                : "/tmp";
    snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/fp8lab-fuzz-XXXXXX", base);
    if (!mkdtemp(fuzz_dir_path)) {
        perror(fuzz_dir_path);
        abort();
    }
    atexit(fuzz_dir_remove);
    return fuzz_dir_path;
}

/* Write n bytes to fuzz_dir()/name (replacing it; name may be in a subfolder made earlier); data NULL
   removes the file.  The file's path. */
static const char *fuzz_file(char *path, size_t pathn, const char *name, const void *data, size_t n)
{
    snprintf(path, pathn, "%s/%s", fuzz_dir(), name);
    unlink(path);
    if (!data)
        return path;
    const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || (n && write(fd, data, n) != (ssize_t)n)) {
        perror(path);
        abort();
    }
    close(fd);
    return path;
}

/* The k-th part of data (parts separated by FUZZ_SEP) in *part, *partn; 0 when there are fewer parts. */
static int fuzz_part(const uint8_t **part, size_t *partn, const uint8_t *data, size_t size, int k)
{
    const size_t sl = sizeof FUZZ_SEP - 1;
    const uint8_t *p = data, *end = data + size;
    for (int i = 0;; i++) {
        const uint8_t *q = memmem(p, (size_t)(end - p), FUZZ_SEP, sl);
        if (i == k) {
            *part = p;
            *partn = (size_t)((q ? q : end) - p);
            return 1;
        }
        if (!q)
            return 0;
        p = q + sl;
    }
}

/* Touch every byte of a buffer the reader handed out, so that AddressSanitizer sees a bad extent. */
static unsigned fuzz_touch(const void *p, size_t n)
{
    const volatile unsigned char *b = p;
    unsigned s = 0;
    for (size_t i = 0; i < n; i++)
        s += b[i];
    return s;
}

#endif /* FL_FUZZ_H */
