/* ulp_workers.h — a validation split across worker processes: a process concern of the ulp command,
 * kept out of the report (numerics/ulp_report.h), which only merges.
 *
 * ulp_mpi.c sets the hook before running the ulp command.  Worker `rank` of `size` judges its
 * contiguous share of the elements (rows stay whole); reduce() then merges every worker's report and
 * its n_stats counters (summed) into rank 0's, which alone prints.  NULL (the default): one process. */
#ifndef FL_ULP_WORKERS_H
#define FL_ULP_WORKERS_H

#include <stdint.h>

#include "ulp_report.h"

typedef struct {
    int rank, size;
    void (*reduce)(fl_ulp_report *r, uint64_t *stats, int n_stats, void *ctx);
    void *ctx;
} fl_ulp_workers;
extern const fl_ulp_workers *fl_ulp_workers_hook;

#endif /* FL_ULP_WORKERS_H */
