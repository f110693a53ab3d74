/* fl_io.c — see fl_io.h. */
#include "fl_io.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
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

/* A new file gets the mode of the file it replaces, else what open(2) would give (0666 & ~umask):
   mkstemp's 0600 would make every result private. */
static mode_t new_file_mode(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
        return st.st_mode & 0777;
    const mode_t mask = umask(0);
    umask(mask);
    return 0666 & ~mask;
}

int fl_atomic_open(const char *path, char **tmp)
{
    const size_t len = strlen(path);
    *tmp = malloc(len + sizeof ".tmp.XXXXXX");
    if (!*tmp) {
        errno = ENOMEM;
        return -1;
    }
    memcpy(*tmp, path, len);
    memcpy(*tmp + len, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");
    const mode_t mode = new_file_mode(path);
    const int fd = mkstemp(*tmp);
    if (fd >= 0 && fchmod(fd, mode) == 0)
        return fd;
    const int saved = errno;
    if (fd >= 0)
        fl_atomic_abort(fd, *tmp);
    free(*tmp);
    *tmp = NULL;
    errno = saved;
    return -1;
}

/* Rename tmp onto path and make the rename durable; on failure remove tmp (*what = "rename"). */
static int publish(const char *tmp, const char *path, const char **what)
{
    if (rename(tmp, path) != 0) {
        const int saved = errno;
        *what = "rename";
        unlink(tmp);
        errno = saved;
        return -1;
    }
    fsync_dir_of(path); /* best effort: the rename is durable once the directory is */
    return 0;
}

int fl_atomic_commit(int fd, const char *tmp, const char *path, const char **what)
{
    *what = fsync(fd) != 0 ? "fsync" : NULL;
    if (close(fd) != 0 && !*what)
        *what = "close";
    if (*what) {
        const int saved = errno;
        unlink(tmp);
        errno = saved;
        return -1;
    }
    return publish(tmp, path, what);
}

void fl_atomic_abort(int fd, const char *tmp)
{
    if (fd >= 0)
        close(fd);
    unlink(tmp);
}

int fl_write_atomic(const char *path, fl_fill_fn fill, void *ctx, char *err, size_t errlen)
{
    char *tmp;
    const int fd = fl_atomic_open(path, &tmp);
    if (fd < 0) {
        snprintf(err, errlen, "%s: cannot create a temporary file beside it: %s", path, strerror(errno));
        return -1;
    }
    FILE *f = fdopen(fd, "w");
    if (!f) {
        snprintf(err, errlen, "%s: cannot open the temporary file: %s (nothing written)", path, strerror(errno));
        fl_atomic_abort(fd, tmp);
        free(tmp);
        return -1;
    }
    const char *why = fill(f, ctx) != 0 ? "writing its contents failed" : NULL;
    int saved = 0;
    if (!why && (fflush(f) != 0 || ferror(f)))
        saved = errno, why = "write";
    if (!why && fsync(fileno(f)) != 0)
        saved = errno, why = "fsync";
    if (fclose(f) != 0 && !why)
        saved = errno, why = "close";
    if (why)
        unlink(tmp);
    else if (publish(tmp, path, &why) != 0)
        saved = errno;
    free(tmp);
    if (why) {
        if (saved)
            snprintf(err, errlen, "%s: %s of the temporary file failed: %s (nothing written)", path, why, strerror(saved));
        else
            snprintf(err, errlen, "%s: %s (nothing written)", path, why);
        return -1;
    }
    return 0;
}
