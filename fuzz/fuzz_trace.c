/* libFuzzer target for the trace importers. GMX_FUZZ_FORMAT picks the
 * importer (GMX_TRACE_AUTO exercises detection and all of them). Every input
 * must either import into a workload that validates, or fail with one line
 * naming the input; nothing may crash, leak or read out of bounds. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

#ifndef GMX_FUZZ_FORMAT
#define GMX_FUZZ_FORMAT GMX_TRACE_AUTO
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* inputs of odd length also go through the allocator's packing (gmx_trace_pack) */
	gmx_trace_opts_t o = {.format = GMX_FUZZ_FORMAT, .tokens = 64, .device = "a100", .pack = (int)(size & 1)};
	gmx_workload_t w;
	gmx_trace_info_t info;
	char err[512];
	int rc = gmx_trace_import_mem(data, size, "fuzz-input", &o, &w, &info, err, sizeof(err));
	if (rc) {
		/* The contract: one line that names the input. */
		if (strncmp(err, "fuzz-input", 10) != 0 || strchr(err, '\n'))
			abort();
		return 0;
	}
	char msg[256];
	if (gmx_workload_validate(&w, msg, sizeof(msg)))
		abort();
	gmx_trace_stats_t st;
	if (gmx_trace_stats(&w, &info, &st) == 0) {
		FILE *null = fopen("/dev/null", "w");
		if (null) {
			gmx_trace_stats_print(&st, "fuzz", 1, null);
			fclose(null);
		}
	}
	gmx_trace_info_free(&info);
	gmx_workload_free(&w);
	return 0;
}
