/* plot_runs.h — PNG plots of training runs with gnuplot, runs overlaid: the plots of `fp8lab plot`
 * and of `fp8lab demo`.
 *
 * Reads each run folder's metrics.csv (experiments/train/telemetry.h) and writes into out:
 *   loss.png        loss EMA (and the raw loss, thin) vs step
 *   amax.png        max |activation output| (the SwiGLU output) and max |FFN input| vs step, log y
 *   outlier.png     outlier ratio amax / rms of the activation output vs step, log y
 *   growth.png      activation-output amax vs FFN-input amax (log-log): slope 1 is linear growth
 *   alignment.png   p99 and max over channels of |cos(w_gate_i, w_up_i)|, and the correlation of
 *                   the channel norms, vs step
 *   saturation.png  cumulative saturated elements: all cast sites, and the down projections' input
 * The gnuplot script is kept beside them (plots.gp) so a person can restyle and re-run it; its first
 * line is the command that runs it (paths and the title are its arguments: gnuplot.h).
 */
#ifndef FL_PLOT_RUNS_H
#define FL_PLOT_RUNS_H

/* Plot the nrun run folders runs[] into the folder out (made when missing), with title (NULL: none)
   on every plot.  FL_EXIT_OK, or FL_EXIT_FAIL after a message on stderr ("fp8lab plot: ..."). */
int fl_plot_runs(const char *out, const char *title, int nrun, char **runs);

#endif /* FL_PLOT_RUNS_H */
