/* fl_io.h — the one atomic file writer of the project.
 *
 * fl_write_atomic(path, fill, ctx): fill(f, ctx) writes the contents to a temporary file beside path
 * (path.tmp.XXXXXX), which is flushed, fsync'ed, renamed onto path, and the directory is fsync'ed, so
 * that a reader (or a resumed run after a crash) sees either the old file or the whole new one, never
 * half of it.  On any failure (fill returning nonzero, a full disk, a bad directory) the temporary
 * file is removed, path is untouched, and err holds one line naming path.  Returns 0 or -1.
 */
#ifndef FL_IO_H
#define FL_IO_H

#include <stddef.h>
#include <stdio.h>

typedef int (*fl_fill_fn)(FILE *f, void *ctx); /* 0 on success */

int fl_write_atomic(const char *path, fl_fill_fn fill, void *ctx, char *err, size_t errlen);

/* The same steps for a writer that produces its file in pieces (numerics/npy.c's streaming writer):
 *   fl_atomic_open    creates path.tmp.XXXXXX with the mode path has (else 0666 & ~umask); returns its
 *                     descriptor and the name in *tmp (malloc'd), or -1 with errno set;
 *   fl_atomic_commit  fsync, close, rename onto path, fsync the directory; 0, or -1 with errno set,
 *                     *what naming the step ("fsync", "close", "rename") and the temporary removed;
 *   fl_atomic_abort   closes (fd >= 0) and removes the temporary. */
int fl_atomic_open(const char *path, char **tmp);
int fl_atomic_commit(int fd, const char *tmp, const char *path, const char **what);
void fl_atomic_abort(int fd, const char *tmp);

#endif /* FL_IO_H */
