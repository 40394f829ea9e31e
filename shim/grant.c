/*
 * Built-in grant policies. The daemon's policy plugs into the same table later.
 *   passthrough  no software queue; the shim is transparent (the default)
 *   queue        every command is queued and granted at once (nothing tracked in flight)
 *   hold         a test policy: commands are held while GPUMUX_SHIM_HOLD_FILE exists
 */
#include "shim_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int grant_always(void *self, const gmx_shim_cmd_t *cmd)
{
	(void)self;
	(void)cmd;
	return 1;
}

static char g_hold_path[4096];

/* Held while the file exists: a test (or an operator) creates and removes it. */
static int grant_unless_file(void *self, const gmx_shim_cmd_t *cmd)
{
	struct stat st;
	(void)self;
	(void)cmd;
	return stat(g_hold_path, &st) != 0;
}

static const gmx_grant_ops_t g_passthrough = {"passthrough", 1, grant_always, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
static const gmx_grant_ops_t g_queue = {"queue", 0, grant_always, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
static const gmx_grant_ops_t g_hold = {"hold", 0, grant_unless_file, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};

int gmx_grant_never_holds(const gmx_grant_ops_t *p)
{
	return p == &g_queue;
}

const gmx_grant_ops_t *gmx_grant_from_env(void)
{
	const char *p = getenv("GPUMUX_SHIM_POLICY");
	if (!p || !*p || strcmp(p, "passthrough") == 0)
		return &g_passthrough;
	if (strcmp(p, "queue") == 0)
		return &g_queue;
	if (strcmp(p, "daemon") == 0)
		return gmx_grant_daemon();
	if (strcmp(p, "hold") == 0) {
		const char *f = getenv("GPUMUX_SHIM_HOLD_FILE");
		if (f && *f) {
			snprintf(g_hold_path, sizeof g_hold_path, "%s", f);
			return &g_hold;
		}
		fprintf(stderr, "gpumux shim: GPUMUX_SHIM_POLICY=hold needs GPUMUX_SHIM_HOLD_FILE (a path "
				"whose existence holds the work); using queue\n");
		return &g_queue;
	}
	fprintf(stderr,
		"gpumux shim: unknown GPUMUX_SHIM_POLICY=%s (expected passthrough, queue, "
		"hold or daemon); using passthrough\n",
		p);
	return &g_passthrough;
}
