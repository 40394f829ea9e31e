/* gpumux gen: build a generated workload and write it in the native format. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "gpumux/gen.h"
#include "gpumux/workload_io.h"

static void gen_usage(FILE *out)
{
	fprintf(out,
		"usage: gpumux gen KIND [KEY=VALUE ...] -o OUT.gmxw\n"
		"       gpumux gen KIND [KEY=VALUE ...] --summary\n"
		"       gpumux gen --list\n"
		"\n"
		"Builds one unit of a generated workload (a decode step, an iteration, a request)\n"
		"and writes it in the native workload format (docs/workload-format.md).\n"
		"\n"
		"  -o FILE      write the workload to FILE ('-' = standard output): a regular file is\n"
		"               replaced atomically, a FIFO or character device written through,\n"
		"               a symbolic link written through to its file; a directory is refused\n"
		"  --summary    print only the summary line, write nothing\n"
		"  -q           do not print the summary line\n"
		"  --list       list every generator with its parameters, defaults and bounds\n"
		"  -h, --help   this help\n"
		"\n"
		"Unless -q, a summary goes to standard error: kernels, footprint, and the GPU time of\n"
		"one unit on the reference device. Relative paths in parameters (reef graph=)\n"
		"resolve against the current directory. Generators are described in docs/generators.md.\n"
		"\n"
		"Exit status: 0 written, 1 the workload could not be built or written (bad parameter\n"
		"value, missing input file, I/O error), 2 usage error (unknown option or generator,\n"
		"an argument that is not KEY=VALUE, no -o).\n");
}

static void summary(FILE *out, const char *kind, const gmx_workload_t *w)
{
	uint32_t kernels = 0;
	for (uint32_t i = 0; i < w->n_ops; i++)
		kernels += w->ops[i].kind == GMX_OP_KERNEL;
	uint64_t fp = gmx_workload_footprint(w);
	fprintf(out, "%s: %u ops (%u kernels), %u buffers, footprint %llu bytes (%.3f GiB), GPU time %.3f ms per %s on %s\n",
		kind, w->n_ops, kernels, w->n_buffers, (unsigned long long)fp, (double)fp / (double)(1ull << 30),
		(double)gmx_workload_gpu_ns(w) / 1e6, w->unit ? w->unit : "unit", w->device ? w->device : "(no device)");
}

int gmx_cmd_gen(int argc, char **argv)
{
	const char *kind = NULL, *out_path = NULL;
	int quiet = 0, summary_only = 0;
	gmx_param_t *params = calloc((size_t)(argc > 0 ? argc : 1), sizeof(*params));
	size_t n_params = 0;
	if (!params) {
		fprintf(stderr, "gpumux gen: out of memory\n");
		return 1;
	}
	int status = 2;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			gen_usage(stdout);
			status = 0;
			goto done;
		} else if (!strcmp(a, "--list")) {
			gmx_gen_describe(stdout);
			status = 0;
			goto done;
		} else if (!strcmp(a, "-o")) {
			if (i + 1 >= argc) {
				fprintf(stderr, "gpumux gen: -o needs a file name\n");
				goto done;
			}
			out_path = argv[++i];
		} else if (!strcmp(a, "-q")) {
			quiet = 1;
		} else if (!strcmp(a, "--summary")) {
			summary_only = 1;
		} else if (a[0] == '-' && a[1] != '\0') {
			fprintf(stderr, "gpumux gen: unknown option '%s' (try gpumux gen --help)\n", a);
			goto done;
		} else if (!kind) {
			kind = a;
		} else {
			char *eq = strchr(a, '=');
			if (!eq || eq == a) {
				fprintf(stderr, "gpumux gen: expected KEY=VALUE, got '%s'\n", a);
				goto done;
			}
			*eq = '\0';
			params[n_params].key = a;
			params[n_params].value = eq + 1;
			n_params++;
		}
	}
	if (!kind) {
		fprintf(stderr, "gpumux gen: no generator given (gpumux gen --list shows them)\n");
		gen_usage(stderr);
		goto done;
	}
	if (!gmx_gen_exists(kind)) {
		fprintf(stderr, "gpumux gen: unknown generator '%s' (gpumux gen --list shows them)\n", kind);
		goto done;
	}
	if (!out_path && !summary_only) {
		fprintf(stderr, "gpumux gen: no output file: give -o FILE (or --summary)\n");
		goto done;
	}
	gmx_workload_t w;
	char err[1024];
	int rc = gmx_gen_build(kind, params, n_params, NULL, &w, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "gpumux gen: %s\n", err[0] ? err : strerror(-rc));
		status = 1;
		goto done;
	}
	status = 0;
	if (!summary_only) {
		rc = gmx_workload_write(&w, out_path, err, sizeof(err));
		if (rc) {
			fprintf(stderr, "gpumux gen: %s\n", err);
			status = 1;
		}
	}
	if (!status && (!quiet || summary_only))
		summary(stderr, kind, &w);
	gmx_workload_free(&w);
done:
	free(params);
	return status;
}
