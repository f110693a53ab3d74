/* cmd_plot.c — `fp8lab plot DIR...`: PNG plots of training runs with gnuplot, runs overlaid, into
 * --out (default: the first DIR).  The plots and their script are experiments/common/plot_runs.h's
 * (`fp8lab demo` draws its runs with them too); this file parses the arguments.
 */
#include "commands.h"

#include "common/cli.h"
#include "common/plot_runs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const help =
    "usage: fp8lab plot [--out DIR] RUN_DIR...\n"
    "\n"
    "Renders PNG plots (gnuplot, pngcairo) of one or more training runs, overlaid: loss.png, amax.png,\n"
    "outlier.png, growth.png, alignment.png, saturation.png, and the script plots.gp that made them.\n"
    "  --out DIR   where the plots go (default: the first RUN_DIR)\n"
    "  --title T   a title line on every plot\n"
    "Each RUN_DIR must hold a metrics.csv written by 'fp8lab train'.\n";

int fl_cmd_plot(int argc, char **argv)
{
    const char *out = NULL, *title = NULL;
    char **runs = calloc((size_t)argc + 1, sizeof *runs);
    int n = 0;
    if (!runs)
        return FL_EXIT_FAIL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(help, stdout);
            free(runs);
            return FL_EXIT_OK;
        } else if (!strcmp(argv[i], "--out") || !strcmp(argv[i], "--title")) {
            if (i + 1 >= argc) {
                free(runs);
                return fl_cli_usage_error("plot", "%s needs a value", argv[i]);
            }
            if (!strcmp(argv[i], "--out"))
                out = argv[++i];
            else
                title = argv[++i];
        } else if (argv[i][0] == '-') {
            free(runs);
            return fl_cli_usage_error("plot", "unknown option '%s'", argv[i]);
        } else {
            runs[n++] = argv[i];
        }
    }
    if (!n) {
        free(runs);
        return fl_cli_usage_error("plot", "no run folder given");
    }
    const int rc = fl_plot_runs(out ? out : runs[0], title, n, runs);
    free(runs);
    return rc;
}
