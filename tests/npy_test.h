/* npy_test.h — writing a test's input arrays as .npy files.  Include after check.h. */
#ifndef FL_NPY_TEST_H
#define FL_NPY_TEST_H

#include "npy.h"

#include <stdint.h>
#include <string.h>

/* A (rows, cols) array of dtype dt at path (rows 0: a 1-d array of cols elements). */
static void put_npy(const char *path, fl_dtype dt, int64_t rows, int64_t cols, const void *data)
{
    char err[4400];
    fl_array a;
    memset(&a, 0, sizeof a);
    a.dtype = dt;
    a.ndim = rows ? 2 : 1;
    a.shape[0] = rows ? rows : cols;
    a.shape[1] = rows ? cols : 0;
    a.count = (size_t)(rows ? rows : 1) * (size_t)cols;
    a.data = (void *)data;
    CHECK(fl_npy_write(path, &a, err, sizeof err) == 0, "%s", err);
}

#endif /* FL_NPY_TEST_H */
