/* ulp_mpi.c — main() of build/fp8lab-mpi (`make ulp-mpi`, built with mpicc): `fp8lab ulp` with one
 * sweep spread over MPI ranks.
 *
 *     mpirun -np 4 build/fp8lab-mpi ulp silu --impl silu_f32_naive --exhaustive --json
 *
 * Every rank runs the ulp command with the same arguments; cmd_ulp.c splits the elements into `size`
 * contiguous shares (rows stay whole) and each rank judges its own, with OpenMP inside the rank
 * (set OMP_NUM_THREADS to cores per rank).  The reports are then gathered to rank 0 and merged there
 * in rank order; the merge is exact and order-independent (ulp_report.h), so the printed report is
 * bit for bit the one-process report.  Only rank 0 prints.  The exit status is every rank's
 * (mpirun returns the first non-zero one).
 *
 * Compiled only with -DFL_MPI_BUILD: the library build (plain cc, no mpi.h) sees an empty file.
 */
#ifdef FL_MPI_BUILD
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "ulp_workers.h"

/* Gather every rank's report and counters to rank 0 and merge them there. */
static void mpi_reduce(fl_ulp_report *r, uint64_t *stats, int n_stats, void *ctx)
{
    (void)ctx;
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const size_t one = sizeof *r + (size_t)n_stats * sizeof *stats;
    unsigned char *mine = malloc(one);
    memcpy(mine, r, sizeof *r);
    memcpy(mine + sizeof *r, stats, (size_t)n_stats * sizeof *stats);
    unsigned char *all = rank == 0 ? malloc(one * (size_t)size) : NULL;
    MPI_Gather(mine, (int)one, MPI_BYTE, all, (int)one, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        fl_ulp_report total;
        fl_ulp_report_init(&total);
        for (int k = 0; k < n_stats; k++)
            stats[k] = 0;
        for (int q = 0; q < size; q++) {
            fl_ulp_report part;
            memcpy(&part, all + (size_t)q * one, sizeof part);
            fl_ulp_report_merge(&total, &part);
            for (int k = 0; k < n_stats; k++) {
                uint64_t s;
                memcpy(&s, all + (size_t)q * one + sizeof part + (size_t)k * sizeof s, sizeof s);
                stats[k] += s;
            }
        }
        *r = total;
    }
    free(mine);
    free(all);
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    static fl_ulp_workers w;
    w.rank = rank;
    w.size = size;
    w.reduce = mpi_reduce;
    fl_ulp_workers_hook = &w;
    /* "fp8lab-mpi ulp ARGS" or "fp8lab-mpi ARGS" */
    int rc;
    if (argc >= 2 && !strcmp(argv[1], "ulp"))
        rc = fl_cmd_ulp(argc - 1, argv + 1);
    else {
        argv[0] = (char *)"ulp";
        rc = fl_cmd_ulp(argc, argv);
    }
    fflush(stdout);
    MPI_Finalize();
    return rc;
}
#else
typedef int fl_ulp_mpi_not_built; /* ISO C wants a declaration in every file */
#endif
