/* gpumuxd: the scheduler daemon (one per GPU). See man/gpumuxd.8 and docs/daemon.md. */
#define _GNU_SOURCE
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
	char names[256];
	gmx_sched_names(names, sizeof names);
	fprintf(f,
		"usage: gpumuxd [--foreground] [--config FILE] [--runtime-dir DIR] [--policy NAME]\n"
		"               [--allow-users LIST] [--allow-group LIST] [--metrics-listen HOST:PORT]\n"
		"  --foreground       stay attached to the terminal (systemd runs it so)\n"
		"  --config FILE      INI file with a [daemon] section (see gpumuxd(8))\n"
		"  --runtime-dir DIR  socket directory (default $GPUMUX_RUNTIME_DIR or %s)\n"
		"  --policy NAME      scheduling policy: %s (default timeslice)\n"
		"  --allow-users L    user names or uids allowed besides root and the daemon's user\n"
		"  --allow-group L    group names or gids whose members are allowed\n"
		"  --metrics-listen A serve Prometheus metrics over HTTP on A (e.g. 127.0.0.1:9400;\n"
		"                     off: none, the default)\n"
		"Command-line options override the file.\n",
		GMX_RUNTIME_DIR_DEFAULT, names);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {{"foreground", no_argument, 0, 'f'},
					     {"config", required_argument, 0, 'c'},
					     {"runtime-dir", required_argument, 0, 'r'},
					     {"policy", required_argument, 0, 'p'},
					     {"allow-users", required_argument, 0, 'u'},
					     {"allow-group", required_argument, 0, 'g'},
					     {"metrics-listen", required_argument, 0, 'm'},
					     {"help", no_argument, 0, 'h'},
					     {"version", no_argument, 0, 'V'},
					     {0, 0, 0, 0}};
	gmxd_config_t cfg;
	gmxd_config_default(&cfg);
	int fg = 0;
	const char *config = NULL, *rdir = NULL, *policy = NULL, *users = NULL, *groups = NULL, *mlisten = NULL;
	int o;
	while ((o = getopt_long(argc, argv, "fc:r:p:u:g:m:hV", opts, NULL)) != -1) {
		switch (o) {
		case 'f':
			fg = 1;
			break;
		case 'c':
			config = optarg;
			break;
		case 'r':
			rdir = optarg;
			break;
		case 'p':
			policy = optarg;
			break;
		case 'u':
			users = optarg;
			break;
		case 'g':
			groups = optarg;
			break;
		case 'm':
			mlisten = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("gpumuxd %s (protocol %u)\n", GMX_VERSION, GMX_PROTO_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		fprintf(stderr, "gpumuxd: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	char err[512];
	if (config && gmxd_config_load(&cfg, config, err, sizeof err) != 0) {
		fprintf(stderr, "gpumuxd: %s\n", err);
		return 2;
	}
	if (rdir)
		snprintf(cfg.runtime_dir, sizeof cfg.runtime_dir, "%s", rdir);
	if (policy)
		snprintf(cfg.policy, sizeof cfg.policy, "%s", policy);
	if (mlisten)
		snprintf(cfg.metrics_listen, sizeof cfg.metrics_listen, "%s", strcmp(mlisten, "off") ? mlisten : "");
	if ((users && gmxd_config_allow(&cfg, users, 1, err, sizeof err) != 0) ||
	    (groups && gmxd_config_allow(&cfg, groups, 0, err, sizeof err) != 0)) {
		fprintf(stderr, "gpumuxd: %s\n", err);
		return 2;
	}
	if (!fg) {
		pid_t p = fork();
		if (p < 0) {
			perror("gpumuxd: fork");
			return 1;
		}
		if (p > 0)
			return 0;
		setsid();
		int nul = open("/dev/null", O_RDWR);
		if (nul >= 0) {
			dup2(nul, 0);
			dup2(nul, 1);
			close(nul);
		}
	}
	return gmxd_run(&cfg) == 0 ? 0 : 1;
}
