/* gpumux trace: import recorded GPU traces into native workloads, and print
 * statistics of traces and workloads. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "gpumux/numparse.h"
#include "trace.h"

static void usage_trace(FILE *out)
{
	fprintf(out, "usage: gpumux trace import SRC -o OUT [--format F] [--tokens N] [--device D] [--tensors]\n"
		     "       gpumux trace stats FILE [--json] [--format F] [--tokens N] [--device D]\n"
		     "\n"
		     "  import  convert a recorded trace into a gpumux workload file (.gmxw)\n"
		     "  stats   kernels, streams, span, allocations and timing percentiles\n"
		     "\n"
		     "`gpumux trace import --help` and `gpumux trace stats --help` say more.\n");
}

static void usage_import(FILE *out)
{
	fprintf(out,
		"usage: gpumux trace import SRC -o OUT [--format auto|kineto|orion|vidur] [--tokens N] [--device D]\n"
		"                           [--tensors]\n"
		"\n"
		"Reads SRC and writes one workload unit to OUT in the native format: the whole recorded\n"
		"timeline (kineto), one request or iteration (orion), one model step (vidur).\n"
		"The format of SRC is detected from its content (gzip is decompressed):\n"
		"  kineto  PyTorch profiler / Kineto Chrome trace JSON (.json or .json.gz)\n"
		"  orion   Orion per-operator CSV (Name,Profile,Memory_footprint,SM_usage,Duration)\n"
		"  vidur   Vidur operator-time CSV: a Llama-2-7B step of --tokens N tokens (default 512)\n"
		"\n"
		"  -o, --output OUT   file to write; a regular file is written to a temporary and\n"
		"                     renamed, so a failed import leaves no OUT behind; a FIFO or\n"
		"                     character device is written through, a symbolic link through\n"
		"                     to its file; a directory is refused\n"
		"  --format F         skip detection and read SRC as F\n"
		"  --tokens N         vidur: tokens in the step (1..4096)\n"
		"  --device D         vidur: a100 or h100 when SRC's path does not name it\n"
		"  --tensors          kineto: one buffer per recorded tensor, with its alloc and free;\n"
		"                     by default the tensors are packed as PyTorch's caching allocator\n"
		"                     packs them and the buffers are its segments (what the device holds)\n"
		"\n"
		"On bad input prints one line FILE:LINE:COLUMN: or FILE: byte N: with the reason and\n"
		"exits 1. See docs/traces.md.\n");
}

static void usage_stats(FILE *out)
{
	fprintf(out,
		"usage: gpumux trace stats FILE [--json] [--format auto|kineto|orion|vidur|native] [--tokens N]\n"
		"\n"
		"FILE is a gpumux workload (.gmxw) or any trace `gpumux trace import` reads. Prints the\n"
		"kernels, kernels per stream, tasks, span, copies, syncs, allocations, peak allocated\n"
		"bytes, and p50/p90/p99 of the host interval between kernel launches and of the idle\n"
		"gap between consecutive kernels of a stream.\n"
		"For a source trace the span and percentiles are the recorded ones; for a workload file\n"
		"they are estimated by replaying think times and durations with no contention and no\n"
		"launch latency (span_source says which).\n"
		"\n"
		"  --json   one JSON object: kernels, streams {stream: kernels}, tasks, span_s,\n"
		"           allocations, peak_allocated_bytes, packed_bytes (the allocations in the\n"
		"           caching allocator's segments), host_interval_us {p50,p90,p99},\n"
		"           gap_us {p50,p90,p99}, and more (docs/traces.md)\n");
}

/* Parses the options shared by both subcommands. Returns 0, or 2 on a usage error. */
static int parse_common(int argc, char **argv, int *i, gmx_trace_opts_t *o)
{
	const char *a = argv[*i];
	if (!strcmp(a, "--format") || !strcmp(a, "--tokens") || !strcmp(a, "--device")) {
		if (*i + 1 >= argc) {
			fprintf(stderr, "gpumux trace: %s needs a value\n", a);
			return 2;
		}
		const char *v = argv[++*i];
		if (!strcmp(a, "--format")) {
			o->format = gmx_trace_format_parse(v);
			if (o->format == GMX_TRACE_UNKNOWN) {
				fprintf(stderr, "gpumux trace: unknown format '%s' (auto, kineto, orion, vidur, native)\n", v);
				return 2;
			}
		} else if (!strcmp(a, "--tokens")) {
			uint64_t n;
			if (gmx_parse_uint(v, 1, 1000000, &n)) {
				fprintf(stderr, "gpumux trace: --tokens wants an integer in [1, 1000000], got '%s'\n", v);
				return 2;
			}
			o->tokens = (uint32_t)n;
		} else {
			if (strcmp(v, "a100") && strcmp(v, "h100")) {
				fprintf(stderr, "gpumux trace: --device wants a100 or h100, got '%s'\n", v);
				return 2;
			}
			o->device = v;
		}
		return 0;
	}
	fprintf(stderr, "gpumux trace: unknown option '%s' (try --help)\n", a);
	return 2;
}

static int cmd_import(int argc, char **argv)
{
	gmx_trace_opts_t o = {.pack = 1};
	const char *src = NULL, *out = NULL;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage_import(stdout);
			return 0;
		}
		if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "gpumux trace import: -o needs a file name\n");
				return 2;
			}
			out = argv[++i];
		} else if (!strcmp(a, "--tensors")) {
			o.pack = 0;
		} else if (a[0] == '-' && a[1]) {
			int rc = parse_common(argc, argv, &i, &o);
			if (rc)
				return rc;
		} else if (!src) {
			src = a;
		} else {
			fprintf(stderr, "gpumux trace import: more than one source ('%s' and '%s')\n", src, a);
			return 2;
		}
	}
	if (!src || !out) {
		usage_import(stderr);
		return 2;
	}
	if (o.format == GMX_TRACE_NATIVE) {
		fprintf(stderr, "gpumux trace import: %s: already a workload; nothing to import\n", src);
		return 2;
	}
	gmx_workload_t w;
	char err[512];
	int rc = gmx_trace_import(src, &o, &w, NULL, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "gpumux trace import: %s\n", err);
		return 1;
	}
	rc = gmx_trace_write(&w, out, err, sizeof(err));
	gmx_workload_free(&w);
	if (rc) {
		fprintf(stderr, "gpumux trace import: %s\n", err);
		return 1;
	}
	return 0;
}

static int cmd_stats(int argc, char **argv)
{
	gmx_trace_opts_t o = {0};
	const char *file = NULL;
	int json = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage_stats(stdout);
			return 0;
		}
		if (!strcmp(a, "--json")) {
			json = 1;
		} else if (a[0] == '-' && a[1]) {
			int rc = parse_common(argc, argv, &i, &o);
			if (rc)
				return rc;
		} else if (!file) {
			file = a;
		} else {
			fprintf(stderr, "gpumux trace stats: more than one file ('%s' and '%s')\n", file, a);
			return 2;
		}
	}
	if (!file) {
		usage_stats(stderr);
		return 2;
	}
	gmx_workload_t w;
	gmx_trace_info_t info;
	char err[512];
	int rc = gmx_trace_import(file, &o, &w, &info, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "gpumux trace stats: %s\n", err);
		return 1;
	}
	gmx_trace_stats_t st;
	rc = gmx_trace_stats(&w, &info, &st);
	if (!rc)
		gmx_trace_stats_print(&st, file, json, stdout);
	else
		fprintf(stderr, "gpumux trace stats: %s: out of memory\n", file);
	gmx_trace_info_free(&info);
	gmx_workload_free(&w);
	return rc ? 1 : 0;
}

int gmx_cmd_trace(int argc, char **argv)
{
	if (argc < 2) {
		usage_trace(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage_trace(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "import"))
		return cmd_import(argc - 1, argv + 1);
	if (!strcmp(argv[1], "stats"))
		return cmd_stats(argc - 1, argv + 1);
	fprintf(stderr, "gpumux trace: unknown subcommand '%s' (import, stats)\n", argv[1]);
	return 2;
}
