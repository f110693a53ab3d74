/* fl_io.h — the one atomic file writer of the project.
 *
 * fl_write_atomic(path, fill, ctx): fill(f, ctx) writes the contents to a temporary file beside path
 * (path.tmp.PID.XXXXXX, made by fl_atomic_open below), which is flushed, fsync'ed, renamed onto path,
 * and the directory is fsync'ed, so that a reader (or a resumed run after a crash) sees either the old
 * file or the whole new one, never half of it.  On any failure (fill returning nonzero, a full disk, a
 * bad directory) the temporary file is removed, path is untouched, and err holds one line naming path.
 * Returns 0 or -1.
 */
#ifndef FL_IO_H
#define FL_IO_H

#include <stddef.h>
#include <stdio.h>

typedef int (*fl_fill_fn)(FILE *f, void *ctx); /* 0 on success */

int fl_write_atomic(const char *path, fl_fill_fn fill, void *ctx, char *err, size_t errlen);

/* The same steps for a writer that produces its file in pieces (numerics/npy.c's streaming writer):
 *   fl_atomic_open    creates path.tmp.PID.XXXXXX (PID: this process) with the mode path has (else
 *                     0666 & ~umask); returns its descriptor and the name in *tmp (malloc'd), or -1
 *                     with errno set.  It first sweeps path's stale temporaries (fl_atomic_sweep) and
 *                     registers the new one for removal on a signal (below);
 *   fl_atomic_commit  fsync, close, rename onto path, fsync the directory; 0, or -1 with errno set,
 *                     *what naming the step ("fsync", "close", "rename") and the temporary removed;
 *   fl_atomic_abort   closes (fd >= 0) and removes the temporary. */
int fl_atomic_open(const char *path, char **tmp);
int fl_atomic_commit(int fd, const char *tmp, const char *path, const char **what);
void fl_atomic_abort(int fd, const char *tmp);

/* No temporary is left behind by a process that stops on a signal or is killed.
 *   Signals: the first fl_atomic_open installs a handler for SIGINT, SIGTERM and SIGHUP, each one whose
 *     action is still the default (a program's own handler, such as train's checkpoint-and-stop, or
 *     SIG_IGN, is left alone: such a program stops through its own commit/abort path).  The handler
 *     removes this process's registered temporaries (unlink: async-signal-safe; a fixed table of 32,
 *     no locks), restores the default action and raises the signal again, so that the process ends as
 *     it would have and its parent sees the signal.  fl_atomic_signals_install does this by itself
 *     (every call: a signal whose action became the default again gets the handler back).
 *   Registration: fl_atomic_open registers its temporary, fl_atomic_commit / fl_atomic_abort (and
 *     fl_write_atomic) unregister it.  fl_atomic_track / fl_atomic_untrack do the same for a temporary
 *     made another way (track: 0, or -1 when the table is full or the path too long: the file is then
 *     only swept by a later run).
 *   Sweep: fl_atomic_sweep(path) removes path.tmp.PID.XXXXXX files beside path whose process PID no
 *     longer exists (kill(PID, 0) fails with ESRCH: a writer killed by SIGKILL, or a crash) and
 *     returns how many; those of a live process (another writer of the same path), of this process,
 *     and the older path.tmp.XXXXXX names without a PID are kept.  PIDs are this machine's: a
 *     directory shared with another machine or PID namespace may hold a live writer's temporary that
 *     looks stale here.  fl_atomic_open sweeps its path; a program that resumes from a file may call
 *     it at start. */
void fl_atomic_signals_install(void);
int fl_atomic_track(const char *tmp);
void fl_atomic_untrack(const char *tmp);
int fl_atomic_sweep(const char *path);

#endif /* FL_IO_H */
