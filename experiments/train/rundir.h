/* rundir.h — a run folder as one process's own: created or reused, locked while the process writes
 * it, and the files a training run writes (so that a fresh run removes exactly those, never a file
 * it does not know).
 *
 * The lock is flock(2) on the folder itself, held until fl_rundir_release or the process ends (a
 * killed process releases it too): two processes never write one folder at the same time, and a
 * temporary file left in a folder whose lock this process holds belongs to no live writer.
 */
#ifndef FL_RUNDIR_H
#define FL_RUNDIR_H

#include <stddef.h>

typedef struct {
    int fd;      /* the locked folder, -1 when none */
    int created; /* fl_rundir_acquire made the folder */
} fl_rundir;

/* The longest name a run writes inside its folder ("checkpoint-<20 digits>.bin.tmp.<pid>.XXXXXX"),
   so that a folder path is refused up front rather than at the first checkpoint. */
#define FL_RUNDIR_NAME_MAX 64
/* Whether a folder path leaves room for every file of a run in a 4096-byte path. */
int fl_rundir_path_ok(const char *dir);

/* Create dir (where missing) and lock it.  0; or, with "fp8lab CMD: DIR: why" on stderr, the exit
   status: FL_EXIT_USAGE when another process holds the folder, FL_EXIT_FAIL when it cannot be made
   or opened. */
int fl_rundir_acquire(fl_rundir *d, const char *dir, const char *cmd);

/* Unlock; with remove_if_created, remove the folder again when this process made it and it is still
   empty (a refused run leaves no folder behind). */
void fl_rundir_release(fl_rundir *d, const char *dir, int remove_if_created);

/* The first file of a training run that dir holds (config.json, checkpoint.bin, metrics.csv, ...),
   or NULL when it holds none. */
const char *fl_rundir_run_file(const char *dir);

/* Remove the files a training run writes (its logs, config, summary, checkpoints, kept checkpoints
   and their temporary files) and nothing else.  0, or -1 with the file named in err. */
int fl_rundir_clear(const char *dir, char *err, size_t errlen);

/* Remove the temporary files of the run's atomic writes ("checkpoint.bin.tmp.*" and the like): with
   the folder locked by this process, no writer of them is alive.  Returns how many were removed. */
int fl_rundir_sweep_temps(const char *dir);

/* Whether the file at path lies in the folder dir: its folder is dir (device and inode), directly or
   after resolving symbolic links. */
int fl_rundir_contains(const char *dir, const char *path);

#endif /* FL_RUNDIR_H */
