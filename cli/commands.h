/* The gpumux subcommands. Each takes argv from its own name on and returns the
 * process exit status (0 success, 1 failure, 2 usage error). */
#ifndef GMX_CLI_COMMANDS_H
#define GMX_CLI_COMMANDS_H

int gmx_cmd_sim(int argc, char **argv);
int gmx_cmd_gen(int argc, char **argv);
int gmx_cmd_trace(int argc, char **argv);
int gmx_cmd_bench(int argc, char **argv);

#endif
