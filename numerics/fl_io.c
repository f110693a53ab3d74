/* fl_io.c — see fl_io.h. */
#include "fl_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fsync_dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    char dir[4096];
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == path)
        snprintf(dir, sizeof dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int fl_write_atomic(const char *path, fl_fill_fn fill, void *ctx, char *err, size_t errlen)
{
    size_t len = strlen(path);
    char *tmp = malloc(len + 16);
    if (!tmp) {
        snprintf(err, errlen, "%s: out of memory", path);
        return -1;
    }
    memcpy(tmp, path, len);
    memcpy(tmp + len, ".tmp.XXXXXX", 12);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot create a temporary file beside it: %s", path, strerror(errno));
        free(tmp);
        return -1;
    }
    FILE *f = fdopen(fd, "w");
    const char *why = NULL;
    int saved = 0;
    if (!f) {
        saved = errno, why = "cannot open the temporary file";
        close(fd);
    } else {
        if (fill(f, ctx) != 0)
            why = "writing its contents failed";
        else if (fflush(f) != 0 || ferror(f))
            saved = errno, why = "write failed";
        else if (fsync(fileno(f)) != 0)
            saved = errno, why = "fsync failed";
        if (fclose(f) != 0 && !why)
            saved = errno, why = "close failed";
    }
    if (!why && rename(tmp, path) != 0)
        saved = errno, why = "cannot rename the temporary file onto it";
    if (why) {
        unlink(tmp);
        if (saved)
            snprintf(err, errlen, "%s: %s: %s (nothing written)", path, why, strerror(saved));
        else
            snprintf(err, errlen, "%s: %s (nothing written)", path, why);
        free(tmp);
        return -1;
    }
    free(tmp);
    fsync_dir_of(path); /* best effort: the rename is durable once the directory is */
    return 0;
}
