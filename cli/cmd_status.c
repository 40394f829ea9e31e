/* gpumux status: what gpumuxd is doing (clients, queues, memory, grant latency). */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../daemon/gmx_proto.h"
#include "commands.h"

#define STATUS_TIMEOUT_MS 2000 /* a daemon that does not answer by then is reported as such */

int gmx_status_fetch(const char *dir, char *buf, size_t len, char *err, size_t err_len)
{
	char path[128];
	int s = gmx_daemon_ask(dir, GMX_MSG_STATUS_REQ, path, sizeof path, err, err_len);
	if (s < 0)
		return s;
	static char m[GMX_CTRL_MAX];
	ssize_t got = gmx_daemon_recv(s, path, m, sizeof m, STATUS_TIMEOUT_MS, err, err_len);
	close(s);
	if (got < 0)
		return (int)got;
	const gmx_msg_hdr_t *r = (const gmx_msg_hdr_t *)m;
	if (r->type != GMX_MSG_STATUS || memchr(m + sizeof *r, 0, (size_t)got - sizeof *r) == NULL) {
		snprintf(err, err_len, "gpumuxd on %s sent an unexpected reply (type %u)", path, r->type);
		return -EPROTO;
	}
	snprintf(buf, len, "%s", m + sizeof *r);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gpumux status [--json] [--runtime-dir DIR]\n"
		"  Shows gpumuxd's policy, its clients (priority, queued and in-flight commands,\n"
		"  memory allocated and resident) and recent launch-notice-to-grant latency.\n"
		"  --json             the daemon's snapshot as one JSON object\n"
		"  --runtime-dir DIR  where gpumuxd's socket is (default $GPUMUX_RUNTIME_DIR or %s)\n",
		GMX_RUNTIME_DIR_DEFAULT);
}

static double num(json_t *o, const char *k)
{
	return json_number_value(json_object_get(o, k));
}

int gmx_cmd_status(int argc, char **argv)
{
	static const struct option opts[] = {{"json", no_argument, 0, 'j'},
					     {"runtime-dir", required_argument, 0, 'r'},
					     {"help", no_argument, 0, 'h'},
					     {0, 0, 0, 0}};
	int as_json = 0, o;
	const char *dir = getenv("GPUMUX_RUNTIME_DIR");
	if (!dir || !*dir)
		dir = GMX_RUNTIME_DIR_DEFAULT;
	optind = 1;
	while ((o = getopt_long(argc, argv, "jr:h", opts, NULL)) != -1) {
		switch (o) {
		case 'j':
			as_json = 1;
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
	if (optind != argc) {
		fprintf(stderr, "gpumux status: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	static char buf[GMX_CTRL_MAX];
	char err[512];
	if (gmx_status_fetch(dir, buf, sizeof buf, err, sizeof err) != 0) {
		fprintf(stderr, "gpumux status: %s\n", err);
		return 1;
	}
	if (as_json) {
		printf("%s\n", buf);
		return 0;
	}
	json_error_t je;
	json_t *root = json_loads(buf, 0, &je);
	if (!root) {
		fprintf(stderr, "gpumux status: the daemon's reply is not JSON (%s)\n", je.text);
		return 1;
	}
	printf("gpumuxd pid %d, policy %s, slice %.3f ms, up %.1f s, socket %s\n", (int)num(root, "pid"),
	       json_string_value(json_object_get(root, "policy")), num(root, "slice_us") / 1e3,
	       num(root, "uptime_s"), json_string_value(json_object_get(root, "socket")));
	printf("device memory %.0f MiB, resident %.1f MiB; %.0f grants, %.0f refused, %.0f cut off\n",
	       num(root, "device_memory_bytes") / 1048576.0, num(root, "resident_bytes") / 1048576.0,
	       num(root, "grants"), num(root, "refused"), num(root, "cut_off"));
	json_t *mig = json_object_get(root, "migration");
	if (num(mig, "plans") > 0)
		printf("memory plans %.0f: %.1f MiB loaded, %.1f MiB evicted, %.1f MiB left to demand "
		       "paging\n",
		       num(mig, "plans"), num(mig, "loaded_bytes") / 1048576.0,
		       num(mig, "evicted_bytes") / 1048576.0, num(mig, "demand_paged_bytes") / 1048576.0);
	json_t *hl = json_object_get(root, "hp_grant_latency_us");
	printf("recent high-priority (0-2) notice-to-grant latency: p50 %.1f us, p99 %.1f us "
	       "(%.0f samples)\n",
	       num(hl, "p50"), num(hl, "p99"), num(hl, "samples"));
	json_t *cl = json_object_get(root, "clients");
	printf("%-4s %-8s %-6s %-16s %3s %6s %8s %10s %11s %11s %9s %9s\n", "ID", "PID", "UID", "NAME", "PRI",
	       "QUEUED", "INFLIGHT", "GRANTS", "ALLOC_MiB", "RESID_MiB", "LAT_P50us", "LAT_P99us");
	size_t i;
	json_t *c;
	json_array_foreach(cl, i, c)
	{
		json_t *lat = json_object_get(c, "grant_latency_us");
		printf("%-4.0f %-8.0f %-6.0f %-16.16s %3.0f %6.0f %8.0f %10.0f %11.1f %11.1f %9.1f %9.1f\n",
		       num(c, "id"), num(c, "pid"), num(c, "uid"),
		       json_string_value(json_object_get(c, "name")), num(c, "priority"), num(c, "queued"),
		       num(c, "inflight"), num(c, "grants"), num(c, "allocated_bytes") / 1048576.0,
		       num(c, "resident_bytes") / 1048576.0, num(lat, "p50"), num(lat, "p99"));
	}
	if (json_array_size(cl) == 0)
		printf("(no clients)\n");
	json_decref(root);
	return 0;
}
