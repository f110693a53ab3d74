/* ulp_progress.c — the progress bar of long `fp8lab ulp` runs (on stderr, a terminal only). */
#include "cmd_ulp_internal.h"

#include <omp.h>
#include <stdio.h>
#include <time.h>

/* ---- progress ------------------------------------------------------------------------------------- */

double ulp_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void ulp_progress_tick(ulp_progress *p, uint64_t n)
{
    if (!p->on)
        return;
    const uint64_t done = __atomic_add_fetch(&p->done, n, __ATOMIC_RELAXED);
    if (omp_get_thread_num() != 0)
        return;
    const double t = ulp_now_s();
    if (t - p->last < 0.5 && done < p->total)
        return;
    p->last = t;
    const double frac = (double)done / (double)p->total, el = t - p->t0;
    const double eta = frac > 0 ? el * (1 - frac) / frac : 0;
    char bar[41];
    const int w = (int)(frac * 40);
    for (int i = 0; i < 40; i++)
        bar[i] = i < w ? '#' : '.';
    bar[40] = 0;
    fprintf(stderr, "\r[%s] %5.1f%%  %llu/%llu  elapsed %.0fs  ETA %.0fs ", bar, 100 * frac,
            (unsigned long long)done, (unsigned long long)p->total, el, eta);
}

void ulp_progress_end(ulp_progress *p)
{
    if (p->on)
        fputs("\r\033[K", stderr);
}
