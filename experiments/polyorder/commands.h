/* commands.h — the command of experiments/polyorder/: `fp8lab order` (cmd_order.c).  argv[0] is the
 * command's name; the exit status is one of experiments/common/cli.h's FL_EXIT_*.
 */
#ifndef FL_POLYORDER_COMMANDS_H
#define FL_POLYORDER_COMMANDS_H

int fl_cmd_order(int argc, char **argv);

#endif /* FL_POLYORDER_COMMANDS_H */
