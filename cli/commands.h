/* The gpumux subcommands. Each takes argv from its own name on and returns the
 * process exit status (0 success, 1 failure, 2 usage error). */
#ifndef GMX_CLI_COMMANDS_H
#define GMX_CLI_COMMANDS_H

#include <stddef.h>
#include <sys/types.h>

int gmx_cmd_sim(int argc, char **argv);
int gmx_cmd_gen(int argc, char **argv);
int gmx_cmd_trace(int argc, char **argv);
int gmx_cmd_bench(int argc, char **argv);
int gmx_cmd_profile(int argc, char **argv);
int gmx_cmd_run(int argc, char **argv);
int gmx_cmd_status(int argc, char **argv);
int gmx_cmd_metrics(int argc, char **argv);
int gmx_cmd_cdi(int argc, char **argv);


/* Asks gpumuxd under `dir` for its status (JSON, NUL-terminated, into buf). 0, or a negative
 * errno with a message in err (-ENOENT/-ECONNREFUSED: no daemon; -EACCES: refused). */
int gmx_status_fetch(const char *dir, char *buf, size_t len, char *err, size_t err_len);

/* The directory holding the interposer (libcuda.so.1) into out: $GPUMUX_SHIM_DIR, shim/ beside
 * the binary in a build tree, or the installed library directory (../lib/gpumux, ../lib64/gpumux,
 * ...). 0 or -ENOENT. */
int gmx_find_shim(char *out, size_t len);

struct json_t;

/* Checks a CDI spec against the CDI schema (cdiVersion, kind, devices, containerEdits: types,
 * required fields, names, absolute paths, KEY=VALUE env); 0, or -EINVAL with the JSON path and
 * what was expected in err. */
int gmx_cdi_validate(const struct json_t *spec, char *err, size_t err_len);

/* Connects to gpumuxd under `dir` and sends a request of `type` (a GMX_MSG_*_REQ, no body);
 * the socket's path goes to path. The socket, or a negative errno with a message in err. */
int gmx_daemon_ask(const char *dir, unsigned type, char *path, size_t path_len, char *err, size_t err_len);

/* Reads one reply message from s into m (cap bytes) within timeout_ms: its length, checked
 * (header, magic, length); a REFUSED becomes its negative errno with the reason in err; so do
 * a timeout, a hang-up and a malformed message. */
ssize_t gmx_daemon_recv(int s, const char *path, void *m, size_t cap, int timeout_ms, char *err, size_t err_len);

#endif
