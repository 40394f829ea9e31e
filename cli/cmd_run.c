/* gpumux run: starts a program with the interposer first on LD_LIBRARY_PATH, registered with
 * gpumuxd under a name and a priority. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../daemon/gmx_proto.h"
#include "commands.h"
#include "gpumux/numparse.h"
#include "gpumux/sched.h"
#include "tpl_file.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gpumux run [--priority N] [--name NAME] [--oversubscribe [--templates FILE]]\n"
		"                  [--runtime-dir DIR] -- COMMAND [ARGS...]\n"
		"  Runs COMMAND unchanged with gpumux's libcuda.so.1 first on LD_LIBRARY_PATH; its\n"
		"  GPU work is scheduled by gpumuxd (pass-through while no daemon runs).\n"
		"  --priority N       0 (highest) to 9 (default 5)\n"
		"  --name NAME        task name: the key of its kernel profiles (default: COMMAND)\n"
		"  --oversubscribe    allocations become managed memory that gpumuxd migrates\n"
		"  --templates FILE   working-set templates (gpumux profile templates): gpumuxd\n"
		"                     migrates what each kernel is predicted to touch, not whole\n"
		"                     allocations\n"
		"  --runtime-dir DIR  where gpumuxd's socket is (default $GPUMUX_RUNTIME_DIR or %s)\n"
		"  GPUMUX_SHIM_DIR overrides where the interposer is looked for.\n",
		GMX_RUNTIME_DIR_DEFAULT);
}

/* The directory holding the interposer: $GPUMUX_SHIM_DIR, next to the binary in a build tree
 * (shim/), or the installed library directory (../lib, ../lib64, ...: gpumux/). */
static int find_shim(char *out, size_t len)
{
	const char *env = getenv("GPUMUX_SHIM_DIR");
	struct stat st;
	char p[PATH_MAX];
	if (env && *env) {
		snprintf(p, sizeof p, "%s/libcuda.so.1", env);
		if (stat(p, &st) != 0)
			return -ENOENT;
		snprintf(out, len, "%s", env);
		return 0;
	}
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0)
		return -ENOENT;
	exe[n] = 0;
	char *dir = dirname(exe);
	static const char *const rel[] = {"shim", "../lib/gpumux", "../lib64/gpumux",
					  "../lib/x86_64-linux-gnu/gpumux",
					  "../lib/aarch64-linux-gnu/gpumux"};
	for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
		snprintf(p, sizeof p, "%s/%s/libcuda.so.1", dir, rel[i]);
		if (stat(p, &st) == 0) {
			char real[PATH_MAX];
			snprintf(p, sizeof p, "%s/%s", dir, rel[i]);
			snprintf(out, len, "%s", realpath(p, real) ? real : p);
			return 0;
		}
	}
	return -ENOENT;
}

/* Says so when the daemon has no room for one more client: the program would run
 * unscheduled until one leaves (the interposer keeps asking). */
static void warn_if_full(const char *status, const char *prog)
{
	json_t *root = json_loads(status, 0, NULL);
	if (!root)
		return;
	json_int_t n = json_integer_value(json_object_get(root, "n_clients"));
	json_int_t max = json_integer_value(json_object_get(root, "max_clients"));
	json_int_t per = json_integer_value(json_object_get(root, "max_clients_per_user"));
	json_int_t mine = 0;
	size_t i;
	json_t *c;
	json_array_foreach(json_object_get(root, "clients"), i, c) mine +=
	    json_integer_value(json_object_get(c, "uid")) == (json_int_t)getuid();
	if (max > 0 && n >= max)
		fprintf(
		    stderr,
		    "gpumux run: warning: gpumuxd serves %lld clients already (max_clients %lld); %s runs in "
		    "pass-through until one leaves\n",
		    (long long)n, (long long)max, prog);
	else if (getuid() != 0 && per > 0 && mine >= per)
		fprintf(stderr,
			"gpumux run: warning: uid %d has %lld clients already (max_clients_per_user %lld); "
			"%s runs "
			"in pass-through until one leaves\n",
			(int)getuid(), (long long)mine, (long long)per, prog);
	json_decref(root);
}

int gmx_cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {{"priority", required_argument, 0, 'p'},
					     {"name", required_argument, 0, 'n'},
					     {"oversubscribe", no_argument, 0, 'o'},
					     {"templates", required_argument, 0, 't'},
					     {"runtime-dir", required_argument, 0, 'r'},
					     {"help", no_argument, 0, 'h'},
					     {0, 0, 0, 0}};
	long prio = 5;
	const char *name = NULL, *dir = getenv("GPUMUX_RUNTIME_DIR"), *tpl = NULL;
	int oversub = 0, o;
	if (!dir || !*dir)
		dir = GMX_RUNTIME_DIR_DEFAULT;
	optind = 1;
	/* '+': stop at the first non-option, so COMMAND's own options are left alone. */
	while ((o = getopt_long(argc, argv, "+p:n:ot:r:h", opts, NULL)) != -1) {
		switch (o) {
		case 'p': {
			uint64_t v;
			if (gmx_parse_uint(optarg, 0, GMX_PRIORITY_LEVELS - 1, &v)) {
				fprintf(stderr, "gpumux run: --priority %s: expected 0 (highest) to 9\n",
					optarg);
				return 2;
			}
			prio = (long)v;
			break;
		}
		case 'n':
			if (!*optarg || strlen(optarg) >= GMX_NAME_MAX) {
				fprintf(stderr, "gpumux run: --name: expected 1 to %d characters\n",
					GMX_NAME_MAX - 1);
				return 2;
			}
			name = optarg;
			break;
		case 'o':
			oversub = 1;
			break;
		case 't':
			tpl = optarg;
			break;
		case 'r':
			dir = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		fprintf(stderr, "gpumux run: no command given\n");
		usage(stderr);
		return 2;
	}
	char **cmd = argv + optind;
	char tpl_abs[PATH_MAX];
	if (tpl) {
		if (!oversub) {
			fprintf(stderr, "gpumux run: --templates needs --oversubscribe (templates say what "
					"to migrate)\n");
			return 2;
		}
		/* Refuse a bad file now, with its line, rather than run without predictions. */
		char terr[512];
		if (gmx_templates_check(tpl, terr, sizeof terr) != 0) {
			fprintf(stderr, "gpumux run: --templates %s\n", terr);
			return 1;
		}
		if (!realpath(tpl, tpl_abs)) {
			fprintf(stderr, "gpumux run: --templates %s: %s\n", tpl, strerror(errno));
			return 1;
		}
	}
	char shim[PATH_MAX];
	if (find_shim(shim, sizeof shim) != 0) {
		fprintf(stderr, "gpumux run: the interposer libcuda.so.1 was not found (looked in "
				"$GPUMUX_SHIM_DIR, <bindir>/shim and <bindir>/../lib*/gpumux); set "
				"GPUMUX_SHIM_DIR to its directory\n");
		return 1;
	}
	/* Ask the daemon first, so a user it will not serve hears it now, plainly. */
	static char st[GMX_CTRL_MAX];
	char err[512];
	int rc = gmx_status_fetch(dir, st, sizeof st, err, sizeof err);
	if (rc == -EACCES || rc == -EPROTONOSUPPORT) {
		fprintf(stderr, "gpumux run: %s\n", err);
		return 1;
	}
	if (rc == -ENOENT || rc == -ECONNREFUSED)
		fprintf(stderr, "gpumux run: warning: %s; %s runs in pass-through until gpumuxd starts\n",
			err, cmd[0]);
	else if (rc != 0)
		fprintf(stderr, "gpumux run: warning: %s; %s runs in pass-through until gpumuxd serves it\n",
			err, cmd[0]);
	else
		warn_if_full(st, cmd[0]);
	const char *old = getenv("LD_LIBRARY_PATH");
	size_t need = strlen(shim) + (old ? strlen(old) : 0) + 2;
	char *ld = malloc(need);
	if (!ld) {
		fprintf(stderr, "gpumux run: out of memory\n");
		return 1;
	}
	snprintf(ld, need, "%s%s%s", shim, old && *old ? ":" : "", old && *old ? old : "");
	char pr[8];
	snprintf(pr, sizeof pr, "%ld", prio);
	char base[GMX_NAME_MAX];
	if (!name) {
		const char *b = strrchr(cmd[0], '/');
		snprintf(base, sizeof base, "%s", b ? b + 1 : cmd[0]);
		name = base;
	}
	if (setenv("LD_LIBRARY_PATH", ld, 1) || setenv("GPUMUX_SHIM_POLICY", "daemon", 1) ||
	    setenv("GPUMUX_RUNTIME_DIR", dir, 1) || setenv("GPUMUX_PRIORITY", pr, 1) ||
	    setenv("GPUMUX_NAME", name, 1) ||
	    (oversub ? setenv("GPUMUX_OVERSUBSCRIBE", "1", 1) : unsetenv("GPUMUX_OVERSUBSCRIBE")) ||
	    (tpl ? setenv("GPUMUX_TEMPLATES", tpl_abs, 1) : unsetenv("GPUMUX_TEMPLATES"))) {
		fprintf(stderr, "gpumux run: cannot set the environment: %s\n", strerror(errno));
		return 1;
	}
	free(ld);
	execvp(cmd[0], cmd);
	fprintf(stderr, "gpumux run: cannot run %s: %s\n", cmd[0], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}
