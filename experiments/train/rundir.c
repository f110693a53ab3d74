/* rundir.c — see rundir.h. */
#include "rundir.h"

#include "common/cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* The files `fp8lab train` writes in its folder (train.c, channels.c). */
static const char *const run_files[] = {
    "config.json", "summary.json", "metrics.csv", "telemetry.jsonl", "sites.csv",
    "channels.csv", "records.csv", "intervention.csv", "checkpoint.bin",
};

/* "checkpoint-S.bin", S decimal: a kept checkpoint; its length in *len. */
static int kept_checkpoint(const char *name, size_t *len)
{
    if (strncmp(name, "checkpoint-", 11))
        return 0;
    size_t i = 11;
    while (name[i] >= '0' && name[i] <= '9')
        i++;
    if (i == 11 || strncmp(name + i, ".bin", 4))
        return 0;
    *len = i + 4;
    return 1;
}

/* Whether name is a run file (1), a temporary file of one ("NAME.tmp.*", 2), or neither (0). */
static int run_name(const char *name)
{
    size_t len = 0;
    int hit = kept_checkpoint(name, &len);
    for (size_t k = 0; !hit && k < sizeof run_files / sizeof *run_files; k++) {
        len = strlen(run_files[k]);
        hit = !strncmp(name, run_files[k], len);
    }
    if (!hit)
        return 0;
    if (name[len] == 0)
        return 1;
    return strncmp(name + len, ".tmp.", 5) ? 0 : 2;
}

int fl_rundir_path_ok(const char *dir) { return strlen(dir) + 1 + FL_RUNDIR_NAME_MAX < 4096; }

int fl_rundir_acquire(fl_rundir *d, const char *dir, const char *cmd)
{
    d->fd = -1;
    d->created = 0;
    if (mkdir(dir, 0755) == 0)
        d->created = 1;
    else if (errno != EEXIST) {
        fprintf(stderr, "fp8lab %s: %s: cannot create the folder: %s\n", cmd, dir, strerror(errno));
        return FL_EXIT_FAIL;
    }
    d->fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d->fd < 0) {
        fprintf(stderr, "fp8lab %s: %s: cannot open the folder: %s\n", cmd, dir, strerror(errno));
        return FL_EXIT_FAIL;
    }
    if (flock(d->fd, LOCK_EX | LOCK_NB) != 0) {
        const int e = errno;
        close(d->fd);
        d->fd = -1;
        if (e == EWOULDBLOCK) {
            fprintf(stderr, "fp8lab %s: %s: another fp8lab process is writing this folder (it is locked); "
                            "wait for it or choose another folder\n", cmd, dir);
            return FL_EXIT_USAGE;
        }
        fprintf(stderr, "fp8lab %s: %s: cannot lock the folder: %s\n", cmd, dir, strerror(e));
        return FL_EXIT_FAIL;
    }
    return 0;
}

void fl_rundir_release(fl_rundir *d, const char *dir, int remove_if_created)
{
    if (d->fd >= 0) {
        if (remove_if_created && d->created)
            rmdir(dir); /* fails, as it should, when the folder is not empty */
        close(d->fd);
    }
    d->fd = -1;
}

const char *fl_rundir_run_file(const char *dir)
{
    static _Thread_local char found[256];
    char p[4096 + 32];
    struct stat sb;
    for (size_t k = 0; k < sizeof run_files / sizeof *run_files; k++) { /* the list's order: config.json first */
        snprintf(p, sizeof p, "%s/%s", dir, run_files[k]);
        if (lstat(p, &sb) == 0)
            return run_files[k];
    }
    DIR *dd = opendir(dir);
    if (!dd)
        return NULL;
    const char *r = NULL;
    for (struct dirent *e; !r && (e = readdir(dd)) != NULL;)
        if (run_name(e->d_name) == 1) {
            snprintf(found, sizeof found, "%s", e->d_name);
            r = found;
        }
    closedir(dd);
    return r;
}

/* Remove the run files (which = 1: and their temporaries; which = 2: the temporaries only). */
static int remove_names(const char *dir, int which, int *count, char *err, size_t errlen)
{
    DIR *dd = opendir(dir);
    if (!dd) {
        snprintf(err, errlen, "%s: cannot read the folder: %s", dir, strerror(errno));
        return -1;
    }
    int rc = 0;
    for (struct dirent *e; rc == 0 && (e = readdir(dd)) != NULL;) {
        const int k = run_name(e->d_name);
        if (!k || (which == 2 && k != 2))
            continue;
        char p[4096 + 256];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (unlink(p) != 0 && errno != ENOENT) {
            snprintf(err, errlen, "%s: cannot remove it: %s", p, strerror(errno));
            rc = -1;
        } else if (count)
            ++*count;
    }
    closedir(dd);
    return rc;
}

int fl_rundir_clear(const char *dir, char *err, size_t errlen) { return remove_names(dir, 1, NULL, err, errlen); }

int fl_rundir_sweep_temps(const char *dir)
{
    char err[4400];
    int n = 0;
    remove_names(dir, 2, &n, err, sizeof err);
    return n;
}

/* Whether the folder of path is dir (by device and inode). */
static int same_folder(const char *dir, const char *path)
{
    char *copy = strdup(path);
    if (!copy)
        return 0;
    struct stat a, b;
    const int in = stat(dirname(copy), &a) == 0 && stat(dir, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
    free(copy);
    return in;
}

int fl_rundir_contains(const char *dir, const char *path)
{
    if (same_folder(dir, path))
        return 1;
    char *real = realpath(path, NULL); /* a link elsewhere to a file in dir */
    const int in = real && same_folder(dir, real);
    free(real);
    return in;
}
