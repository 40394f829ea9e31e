/* gpumux metrics: gpumuxd's Prometheus text exposition, read from its socket. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../daemon/gmx_proto.h"
#include "commands.h"

#define METRICS_TIMEOUT_MS 2000	     /* per message of the reply */
#define METRICS_MAX_BYTES (4u << 20) /* a reply longer than this is not gpumuxd's */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gpumux metrics [--runtime-dir DIR]\n"
		"  Prints gpumuxd's metrics in the Prometheus text format 0.0.4: the same text its\n"
		"  HTTP endpoint (metrics_listen) serves at /metrics. Families: docs/metrics.md.\n"
		"  --runtime-dir DIR  where gpumuxd's socket is (default $GPUMUX_RUNTIME_DIR or %s)\n",
		GMX_RUNTIME_DIR_DEFAULT);
}

/* Reads the METRICS chunks from s to stdout; 0, or 1 with the reason on stderr. */
static int copy_reply(int s, const char *path)
{
	static char m[GMX_CTRL_MAX];
	char err[512];
	size_t total = 0;
	for (;;) {
		ssize_t got = gmx_daemon_recv(s, path, m, sizeof m, METRICS_TIMEOUT_MS, err, sizeof err);
		if (got < 0) {
			fprintf(stderr, "gpumux metrics: %s%s\n", err,
				total ? " (the daemon may lack room in its send buffer: see docs/metrics.md)"
				      : "");
			return 1;
		}
		const gmx_msg_metrics_t *r = (const gmx_msg_metrics_t *)m;
		if (r->h.type != GMX_MSG_METRICS || (size_t)got < sizeof *r) {
			fprintf(stderr, "gpumux metrics: gpumuxd on %s sent an unexpected reply (type %u)\n",
				path, r->h.type);
			return 1;
		}
		size_t n = (size_t)got - sizeof *r;
		total += n;
		if (total > METRICS_MAX_BYTES) {
			fprintf(stderr, "gpumux metrics: the reply exceeds %u bytes\n", METRICS_MAX_BYTES);
			return 1;
		}
		if (fwrite(m + sizeof *r, 1, n, stdout) != n) {
			fprintf(stderr, "gpumux metrics: cannot write: %s\n", strerror(errno));
			return 1;
		}
		if (r->flags & GMX_METRICS_LAST)
			return fflush(stdout) == 0 ? 0 : 1;
	}
}

int gmx_cmd_metrics(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"runtime-dir", required_argument, 0, 'r'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
	const char *dir = getenv("GPUMUX_RUNTIME_DIR");
	if (!dir || !*dir)
		dir = GMX_RUNTIME_DIR_DEFAULT;
	int o;
	optind = 1;
	while ((o = getopt_long(argc, argv, "r:h", opts, NULL)) != -1) {
		switch (o) {
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
	if (optind != argc) {
		fprintf(stderr, "gpumux metrics: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	char path[128], err[512];
	int s = gmx_daemon_ask(dir, GMX_MSG_METRICS_REQ, path, sizeof path, err, sizeof err);
	if (s < 0) {
		fprintf(stderr, "gpumux metrics: %s\n", err);
		return 1;
	}
	int rc = copy_reply(s, path);
	close(s);
	return rc;
}
