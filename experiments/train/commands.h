/* commands.h — the commands of experiments/train/, each `int fl_cmd_NAME(int argc, char **argv)` in
 * cmd_NAME.c, argv[0] the command's name, its exit status one of experiments/common/cli.h's FL_EXIT_*.
 */
#ifndef FL_TRAIN_COMMANDS_H
#define FL_TRAIN_COMMANDS_H

int fl_cmd_train(int argc, char **argv);
int fl_cmd_demo(int argc, char **argv);
int fl_cmd_attribute(int argc, char **argv);
int fl_cmd_mechanism(int argc, char **argv);
int fl_cmd_compare(int argc, char **argv);

#endif /* FL_TRAIN_COMMANDS_H */
