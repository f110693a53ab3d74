/* fp8lab.c — main() of the fp8lab CLI: dispatch to a subcommand. */
#include "commands.h"
#include "common/cli.h"
#include "polyorder/commands.h"
#include "train/commands.h"
#include "ulp/commands.h"

#include <string.h>

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} commands[] = {
    { "formats", fl_cmd_formats, "table of every number format (bits, bias, range, specials)" },
    { "convert", fl_cmd_convert, "convert a .npy array into a format (rounding, saturation)" },
    { "ulp", fl_cmd_ulp, "validate a kernel's outputs against the MPFR reference (ulp errors, exact)" },
    { "train", fl_cmd_train, "train a small transformer under a precision recipe (telemetry, checkpoints)" },
    { "plot", fl_cmd_plot, "PNG plots of training runs (loss, amax, alignment, saturation), overlaid" },
    { "demo", fl_cmd_demo, "the FP8 SwiGLU instability reproduction (bf16 / fp8 SwiGLU / fp8 Smooth-SwiGLU)" },
    { "attribute", fl_cmd_attribute, "per-channel attribution of a run's down-projection outliers (alignment, records, lead/lag, slope)" },
    { "mechanism", fl_cmd_mechanism, "the SwiGLU outlier chain link by link: late FP8 forks, interventions, weight-decay dose-response" },
    { "compare", fl_cmd_compare, "whether a run follows a reference within the envelope of summation-order reruns" },
    { "quant", fl_cmd_quant, "saturation / flush-to-zero / error of a tensor under each format and scaling" },
    { "ref", fl_cmd_ref, "MPFR reference: activations and derivatives, correctly rounded into a format" },
    { "order", fl_cmd_order, "safe polynomial order of PolyReLU / PolyNorm per format, scaling and strategy" },
};

static void usage(FILE *out)
{
    fprintf(out, "usage: fp8lab COMMAND [ARGS...]\n\n"
                 "fp8lab — low-precision numerics and FP8 stability lab.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'fp8lab COMMAND --help' describes each command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return FL_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return FL_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "fp8lab: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return FL_EXIT_USAGE;
}
