/* gpumux cdi: a Container Device Interface spec (kind gpumux.io/gpu) that puts a container's
 * CUDA programs under the host's gpumuxd, as `gpumux run` does for a process; and a check of
 * a spec against the CDI schema. docs/containers.md. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../daemon/gmx_proto.h"
#include "commands.h"

#define CDI_VERSION "0.5.0" /* mounts with options and type: every runtime with CDI reads it */
#define CDI_KIND "gpumux.io/gpu"
#define CTR_SHIM_DIR "/usr/local/gpumux/lib" /* where the interposer appears in the container */
#define CTR_RUNTIME_DIR GMX_RUNTIME_DIR_DEFAULT
/* What NVIDIA's CUDA images set: kept after the interposer when the spec sets the variable. */
#define CTR_LD_DEFAULT "/usr/local/nvidia/lib:/usr/local/nvidia/lib64"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: gpumux cdi generate [--output FILE] [--runtime-dir DIR] [--shim-dir DIR]\n"
		"                           [--ld-library-path PATHS] [--preload FILE]\n"
		"       gpumux cdi validate FILE\n"
		"  generate: writes a CDI spec (kind " CDI_KIND ") that mounts the interposer at\n"
		"  " CTR_SHIM_DIR " and gpumuxd's socket directory at " CTR_RUNTIME_DIR ", and sets\n"
		"  the environment `gpumux run` sets. Devices: " CDI_KIND "=p0 .. p9 (the priority,\n"
		"  0 highest) and =default (priority 5). Install it as /etc/cdi/gpumux.json.\n"
		"  --output FILE           write there (atomically) instead of standard output\n"
		"  --runtime-dir DIR       the host's socket directory (default $GPUMUX_RUNTIME_DIR or %s)\n"
		"  --shim-dir DIR          the host directory holding gpumux's libcuda.so.1 (default: the\n"
		"                          one `gpumux run` uses)\n"
		"  --ld-library-path P     appended to LD_LIBRARY_PATH in the container (default\n"
		"                          " CTR_LD_DEFAULT ")\n"
		"  --preload FILE          also write FILE (one line naming the interposer) and mount it\n"
		"                          read-only as /etc/ld.so.preload: for images that reset\n"
		"                          LD_LIBRARY_PATH (every process of the container loads it)\n"
		"  validate: checks FILE against the CDI schema; prints what is wrong.\n",
		GMX_RUNTIME_DIR_DEFAULT);
}

static json_t *mount(const char *host, const char *ctr, const char *mode)
{
	return json_pack("{s:s, s:s, s:s, s:[s, s, s, s]}", "hostPath", host, "containerPath", ctr, "type",
			 "bind", "options", mode, "nosuid", "nodev", "rbind");
}

/* The spec for the host's shim directory, socket directory and options. */
static json_t *spec_build(const char *shim, const char *rdir, const char *ld_extra, const char *preload)
{
	char ld[PATH_MAX + 64];
	snprintf(ld, sizeof ld, "LD_LIBRARY_PATH=%s%s%s", CTR_SHIM_DIR, *ld_extra ? ":" : "", ld_extra);
	json_t *mounts =
	    json_pack("[o, o]", mount(shim, CTR_SHIM_DIR, "ro"), mount(rdir, CTR_RUNTIME_DIR, "rw"));
	if (preload)
		json_array_append_new(mounts, mount(preload, "/etc/ld.so.preload", "ro"));
	json_t *devs = json_array();
	for (int p = -1; p <= 9; p++) {
		char name[16], env[32];
		snprintf(name, sizeof name, p < 0 ? "default" : "p%d", p);
		snprintf(env, sizeof env, "GPUMUX_PRIORITY=%d", p < 0 ? 5 : p);
		json_array_append_new(
		    devs, json_pack("{s:s, s:{s:[s]}}", "name", name, "containerEdits", "env", env));
	}
	return json_pack("{s:s, s:s, s:o, s:{s:[s, s, s], s:o}}", "cdiVersion", CDI_VERSION, "kind", CDI_KIND,
			 "devices", devs, "containerEdits", "env", ld, "GPUMUX_SHIM_POLICY=daemon",
			 "GPUMUX_RUNTIME_DIR=" CTR_RUNTIME_DIR, "mounts", mounts);
}

/* Writes text to path through a temporary file renamed over it; 0 or 1 with the reason. */
static int write_atomic(const char *path, const char *text, const char *what)
{
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
	FILE *f = fopen(tmp, "w");
	int ok = f && fputs(text, f) >= 0;
	ok = f && fclose(f) == 0 && ok;
	if (!ok || rename(tmp, path) != 0) {
		fprintf(stderr, "gpumux cdi generate: cannot write %s %s: %s\n", what, path, strerror(errno));
		unlink(tmp);
		return 1;
	}
	return 0;
}

static int generate(int argc, char **argv)
{
	static const struct option opts[] = {{"output", required_argument, 0, 'o'},
					     {"runtime-dir", required_argument, 0, 'r'},
					     {"shim-dir", required_argument, 0, 's'},
					     {"ld-library-path", required_argument, 0, 'l'},
					     {"preload", required_argument, 0, 'p'},
					     {"help", no_argument, 0, 'h'},
					     {0, 0, 0, 0}};
	const char *out = NULL, *rdir = getenv("GPUMUX_RUNTIME_DIR"), *shim_opt = NULL, *ld = CTR_LD_DEFAULT,
		   *preload = NULL;
	if (!rdir || !*rdir)
		rdir = GMX_RUNTIME_DIR_DEFAULT;
	int o;
	optind = 1;
	while ((o = getopt_long(argc, argv, "o:r:s:l:p:h", opts, NULL)) != -1) {
		switch (o) {
		case 'o':
			out = optarg;
			break;
		case 'r':
			rdir = optarg;
			break;
		case 's':
			shim_opt = optarg;
			break;
		case 'l':
			ld = optarg;
			break;
		case 'p':
			preload = optarg;
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
		fprintf(stderr, "gpumux cdi generate: unexpected argument '%s'\n", argv[optind]);
		return 2;
	}
	char shim[PATH_MAX], rabs[PATH_MAX], pabs[PATH_MAX];
	if (shim_opt) {
		char probe[PATH_MAX + 16];
		snprintf(probe, sizeof probe, "%s/libcuda.so.1", shim_opt);
		if (!realpath(shim_opt, shim) || access(probe, R_OK) != 0) {
			fprintf(stderr, "gpumux cdi generate: --shim-dir %s holds no libcuda.so.1\n",
				shim_opt);
			return 1;
		}
	} else if (gmx_find_shim(shim, sizeof shim) != 0) {
		fprintf(stderr,
			"gpumux cdi generate: cannot find gpumux's libcuda.so.1 (install gpumux, or give "
			"--shim-dir or GPUMUX_SHIM_DIR)\n");
		return 1;
	}
	/* The socket directory need not exist yet (gpumuxd creates it): absolute is enough. */
	if (rdir[0] != '/' && !realpath(rdir, rabs)) {
		fprintf(stderr, "gpumux cdi generate: --runtime-dir %s: %s\n", rdir, strerror(errno));
		return 1;
	}
	if (rdir[0] != '/')
		rdir = rabs;
	if (preload) {
		char line[PATH_MAX];
		snprintf(line, sizeof line, "%s/libcuda.so.1\n", CTR_SHIM_DIR);
		if (write_atomic(preload, line, "the preload file"))
			return 1;
		if (!realpath(preload, pabs)) {
			fprintf(stderr, "gpumux cdi generate: %s: %s\n", preload, strerror(errno));
			return 1;
		}
		preload = pabs;
	}
	json_t *spec = spec_build(shim, rdir, ld, preload);
	char err[256];
	if (!spec || gmx_cdi_validate(spec, err, sizeof err) != 0) {
		fprintf(stderr, "gpumux cdi generate: the spec does not validate: %s\n",
			spec ? err : "out of memory");
		json_decref(spec);
		return 1;
	}
	char *text = json_dumps(spec, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(spec);
	if (!text)
		return 1;
	size_t n = strlen(text);
	int rc = 0;
	if (out && strcmp(out, "-") != 0) {
		char *nl = malloc(n + 2);
		if (!nl) {
			free(text);
			return 1;
		}
		memcpy(nl, text, n);
		memcpy(nl + n, "\n", 2);
		rc = write_atomic(out, nl, "the spec");
		free(nl);
	} else {
		rc = printf("%s\n", text) < 0;
	}
	free(text);
	return rc;
}

static int validate(int argc, char **argv)
{
	if (argc != 2 || argv[1][0] == '-') {
		if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
			usage(stdout);
			return 0;
		}
		usage(stderr);
		return 2;
	}
	json_error_t je;
	json_t *spec = json_load_file(argv[1], 0, &je);
	if (!spec) {
		fprintf(stderr, "gpumux cdi validate: %s:%d:%d: %s\n", argv[1], je.line, je.column, je.text);
		return 1;
	}
	char err[256];
	int rc = gmx_cdi_validate(spec, err, sizeof err);
	json_decref(spec);
	if (rc) {
		fprintf(stderr, "gpumux cdi validate: %s: %s\n", argv[1], err);
		return 1;
	}
	printf("%s: a valid CDI spec\n", argv[1]);
	return 0;
}

int gmx_cmd_cdi(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "generate"))
		return generate(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "validate"))
		return validate(argc - 1, argv + 1);
	if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
		usage(stdout);
		return 0;
	}
	usage(stderr);
	return 2;
}
