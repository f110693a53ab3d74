/* fl_io.c — see fl_io.h. */
#include "fl_io.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The folder of path into dir (n bytes): "." for a bare name, "/" for a file in the root.  0, or -1 when
   it does not fit. */
static int dir_of(char *dir, size_t n, const char *path)
{
    const char *slash = strrchr(path, '/');
    const int k = !slash ? snprintf(dir, n, ".") : slash == path ? snprintf(dir, n, "/")
                                                 : snprintf(dir, n, "%.*s", (int)(slash - path), path);
    return k >= 0 && (size_t)k < n ? 0 : -1;
}

/* ---- the temporaries of this process, removed on SIGINT / SIGTERM / SIGHUP ------------------------- */

/* A fixed table, so that the signal handler reads it without locks or allocation: a slot is claimed
   (FREE -> BUSY) by one thread, filled, then published (READY); the handler touches READY slots only,
   and only those of its own process (a forked child inherits the table, not the files). */
#define TMP_SLOTS 32
enum { SLOT_FREE, SLOT_BUSY, SLOT_READY };
static struct {
    atomic_int state;
    pid_t pid;
    char path[PATH_MAX];
} tmp_slots[TMP_SLOTS];

static const int cleanup_signals[] = { SIGINT, SIGTERM, SIGHUP };

/* Async-signal-safe: getpid, unlink, signal and raise only.  The signal is blocked while this runs,
   so the raise takes effect, with the default action, when the handler returns. */
static void on_cleanup_signal(int sig)
{
    const int saved = errno;
    const pid_t me = getpid();
    for (int i = 0; i < TMP_SLOTS; i++)
        if (atomic_load(&tmp_slots[i].state) == SLOT_READY && tmp_slots[i].pid == me)
            unlink(tmp_slots[i].path);
    signal(sig, SIG_DFL);
    raise(sig);
    errno = saved;
}

/* Checked at every call (three sigaction calls beside a mkstemp and an fsync): a program that set a
   handler of its own for a while and then restored the default gets the cleanup back. */
void fl_atomic_signals_install(void)
{
    for (size_t k = 0; k < sizeof cleanup_signals / sizeof *cleanup_signals; k++) {
        struct sigaction old, sa;
        if (sigaction(cleanup_signals[k], NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) ||
            old.sa_handler != SIG_DFL)
            continue; /* the program's own handler, or ignored: left alone */
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_cleanup_signal;
        sigemptyset(&sa.sa_mask);
        sigaction(cleanup_signals[k], &sa, NULL);
    }
}

int fl_atomic_track(const char *tmp)
{
    const size_t n = strlen(tmp);
    if (n >= PATH_MAX)
        return -1;
    for (int i = 0; i < TMP_SLOTS; i++) {
        int expect = SLOT_FREE;
        if (!atomic_compare_exchange_strong(&tmp_slots[i].state, &expect, SLOT_BUSY))
            continue;
        memcpy(tmp_slots[i].path, tmp, n + 1);
        tmp_slots[i].pid = getpid();
        atomic_store(&tmp_slots[i].state, SLOT_READY);
        return 0;
    }
    return -1;
}

void fl_atomic_untrack(const char *tmp)
{
    const pid_t me = getpid();
    for (int i = 0; i < TMP_SLOTS; i++)
        if (atomic_load(&tmp_slots[i].state) == SLOT_READY && tmp_slots[i].pid == me &&
            !strcmp(tmp_slots[i].path, tmp)) {
            atomic_store(&tmp_slots[i].state, SLOT_FREE);
            return;
        }
}

/* ---- stale temporaries: path.tmp.PID.XXXXXX of a process that no longer exists ------------------- */

/* The PID in NAME = BASE.tmp.PID.XXXXXX (6 characters after the last dot, as mkstemp makes them),
   or 0 when name is not a temporary of base. */
static pid_t stale_pid(const char *name, const char *base, size_t blen)
{
    if (strncmp(name, base, blen) || strncmp(name + blen, ".tmp.", 5))
        return 0;
    const char *p = name + blen + 5;
    long long pid = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 10; p++, digits++)
        pid = pid * 10 + (*p - '0');
    if (!digits || pid <= 0 || pid > INT_MAX || *p != '.' || strlen(p + 1) != 6)
        return 0;
    return (pid_t)pid;
}

int fl_atomic_sweep(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char dir[PATH_MAX];
    if (dir_of(dir, sizeof dir, path))
        return 0;
    const size_t blen = strlen(base);
    DIR *d = blen ? opendir(dir) : NULL;
    if (!d)
        return 0;
    const pid_t me = getpid();
    int removed = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const pid_t pid = stale_pid(e->d_name, base, blen);
        if (pid <= 0 || pid == me || kill(pid, 0) == 0 || errno != ESRCH)
            continue; /* not ours to judge, or its writer may still be running */
        char full[PATH_MAX];
        if ((size_t)snprintf(full, sizeof full, "%s/%s", dir, e->d_name) < sizeof full && unlink(full) == 0)
            removed++;
    }
    closedir(d);
    return removed;
}

static int fsync_dir_of(const char *path)
{
    char dir[PATH_MAX];
    if (dir_of(dir, sizeof dir, path))
        return -1;
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
    fl_atomic_signals_install();
    fl_atomic_sweep(path);
    const size_t len = strlen(path) + sizeof ".tmp.." + 20 + 6;
    *tmp = malloc(len);
    if (!*tmp) {
        errno = ENOMEM;
        return -1;
    }
    snprintf(*tmp, len, "%s.tmp.%ld.XXXXXX", path, (long)getpid());
    const mode_t mode = new_file_mode(path);
    const int fd = mkstemp(*tmp);
    if (fd >= 0)
        fl_atomic_track(*tmp); /* a full table: the file is still swept by the next run */
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
        fl_atomic_abort(-1, tmp);
        errno = saved;
        return -1;
    }
    fl_atomic_untrack(tmp); /* after the rename: a signal in between finds no file to remove */
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
        fl_atomic_abort(-1, tmp);
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
    fl_atomic_untrack(tmp);
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
        fl_atomic_abort(-1, tmp);
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
