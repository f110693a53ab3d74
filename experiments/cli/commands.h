/* commands.h — the commands of experiments/cli/ (the small ones), for fp8lab.c's table.
 *
 * Each is `int fl_cmd_NAME(int argc, char **argv)` in cmd_NAME.c, argv[0] the command's name, its
 * exit status one of experiments/common/cli.h's FL_EXIT_*.  The other subsystems declare theirs in
 * their own commands.h (ulp/, train/, polyorder/).
 */
#ifndef FL_CLI_COMMANDS_H
#define FL_CLI_COMMANDS_H

int fl_cmd_formats(int argc, char **argv);
int fl_cmd_convert(int argc, char **argv);
int fl_cmd_quant(int argc, char **argv);
int fl_cmd_ref(int argc, char **argv);
int fl_cmd_plot(int argc, char **argv);

#endif /* FL_CLI_COMMANDS_H */
