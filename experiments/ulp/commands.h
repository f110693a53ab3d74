/* commands.h — the command of experiments/ulp/: `fp8lab ulp` (cmd_ulp.c; the MPI build's main() in
 * ulp_mpi.c runs it too).  argv[0] is the command's name; the exit status is one of
 * experiments/common/cli.h's FL_EXIT_*.
 */
#ifndef FL_ULP_COMMANDS_H
#define FL_ULP_COMMANDS_H

int fl_cmd_ulp(int argc, char **argv);

#endif /* FL_ULP_COMMANDS_H */
