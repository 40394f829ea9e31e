/* The gpumux subcommands. Each takes argv from its own name on and returns the
 * process exit status (0 success, 1 failure, 2 usage error). */
#ifndef GMX_CLI_COMMANDS_H
#define GMX_CLI_COMMANDS_H

#include <stddef.h>

int gmx_cmd_sim(int argc, char **argv);
int gmx_cmd_gen(int argc, char **argv);
int gmx_cmd_trace(int argc, char **argv);
int gmx_cmd_bench(int argc, char **argv);
int gmx_cmd_profile(int argc, char **argv);
int gmx_cmd_run(int argc, char **argv);
int gmx_cmd_status(int argc, char **argv);

/* Asks gpumuxd under `dir` for its status (JSON, NUL-terminated, into buf). 0, or a negative
 * errno with a message in err (-ENOENT/-ECONNREFUSED: no daemon; -EACCES: refused). */
int gmx_status_fetch(const char *dir, char *buf, size_t len, char *err, size_t err_len);

#endif
