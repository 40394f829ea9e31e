/* Orion per-operator CSV importer: `Name,Profile,Memory_footprint,SM_usage,Duration`,
 * one row per operation of one request or training iteration, in launch order.
 * Kernel names can hold unquoted commas, so each row is split from the right on
 * its last four commas. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "trace_internal.h"

#define ORION_HEADER "Name,Profile,Memory_footprint,SM_usage,Duration"
#define ORION_MAX_BYTES (64u << 20) /* the largest shipped profile is 270 KB */

/* Parses a decimal integer field [p, end); 0 on success. */
static int field_int(const char *p, const char *end, long long lo, long long hi, long long *out)
{
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	while (end > p && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r'))
		end--;
	if (p == end || end - p > 20)
		return -1;
	char tmp[24];
	memcpy(tmp, p, (size_t)(end - p));
	tmp[end - p] = 0;
	char *e;
	errno = 0;
	long long v = strtoll(tmp, &e, 10);
	if (*e || errno || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

int gmx_trace_orion_read(gmx_src_t *s, gmx_workload_t *w, gmx_trace_info_t *info)
{
	char *text;
	size_t len;
	int rc = gmx_src_slurp(s, &text, &len, ORION_MAX_BYTES);
	if (rc)
		return rc;
	if (memchr(text, 0, len)) {
		size_t at = (size_t)((char *)memchr(text, 0, len) - text);
		free(text);
		return gmx_src_fail(s, "byte %zu: NUL byte in a CSV file", at);
	}
	size_t hl = strlen(ORION_HEADER);
	if (len < hl || memcmp(text, ORION_HEADER, hl) || (text[hl] != '\n' && text[hl] != '\r' && text[hl] != 0)) {
		free(text);
		return gmx_src_fail(s, "1:1: expected the Orion header '%s'", ORION_HEADER);
	}
	if ((rc = gmx_workload_set_str(&w->unit, "trace")) || (rc = gmx_workload_set_str(&w->device, "v100")))
		goto out;
	char *line = strchr(text, '\n');
	unsigned long lineno = 1;
	uint32_t rows = 0;
	while (line && *++line) {
		lineno++;
		char *eol = strchr(line, '\n');
		char *end = eol ? eol : text + len;
		char *q = end;
		while (q > line && (q[-1] == '\r' || q[-1] == ' '))
			q--;
		if (q == line) { /* blank line */
			line = eol;
			continue;
		}
		/* The last four commas, from the right. */
		char *c[4];
		char *p = q;
		for (int i = 3; i >= 0; i--) {
			while (p > line && p[-1] != ',')
				p--;
			if (p == line) {
				rc = gmx_src_fail(s, "%lu:1: expected 5 comma-separated fields (Name,Profile,"
						     "Memory_footprint,SM_usage,Duration)",
						  lineno);
				goto out;
			}
			c[i] = --p;
		}
		long long prof, mem, sm, dur;
		const char *what = NULL;
		char *at = NULL;
		if (field_int(c[0] + 1, c[1], -1, 1, &prof))
			what = "Profile must be -1, 0 or 1", at = c[0] + 1;
		else if (field_int(c[1] + 1, c[2], 0, INT64_MAX, &mem))
			what = "Memory_footprint must be a non-negative integer", at = c[1] + 1;
		else if (field_int(c[2] + 1, c[3], 0, UINT32_MAX, &sm))
			what = "SM_usage must be a non-negative integer", at = c[2] + 1;
		else if (field_int(c[3] + 1, q, 0, INT64_MAX, &dur))
			what = "Duration must be a non-negative integer (ns)", at = c[3] + 1;
		if (what) {
			rc = gmx_src_fail(s, "%lu:%ld: %s", lineno, (long)(at - line) + 1, what);
			goto out;
		}
		if (c[0] == line) {
			rc = gmx_src_fail(s, "%lu:1: empty operation name", lineno);
			goto out;
		}
		*c[0] = 0;
		for (char *x = line; *x; x++)
			if (*x == '\r')
				*x = ' '; /* a name is one line in the native format */
		uint32_t name;
		if ((rc = gmx_workload_intern_name(w, line, &name)))
			goto out;
		gmx_op_t op;
		memset(&op, 0, sizeof(op));
		op.kind = GMX_OP_KERNEL;
		op.klass = (int8_t)prof;
		op.stream = 0;
		op.name = name;
		op.think_ns = rows ? GMX_TRACE_LAUNCH_OVERHEAD_NS : 0;
		op.duration_ns = (uint64_t)dur;
		op.sm_demand = (uint32_t)sm;
		op.buffer = UINT32_MAX;
		op.grid[0] = op.grid[1] = op.grid[2] = 1;
		op.block[0] = op.block[1] = op.block[2] = 1;
		if ((rc = gmx_workload_add_op(w, &op, NULL)))
			goto out;
		rows++;
		line = eol;
	}
	if (!rows) {
		rc = gmx_src_fail(s, "%lu:1: no operations after the header", lineno + 1);
		goto out;
	}
	/* A request or iteration ends when the host has its results. */
	gmx_op_t sync;
	memset(&sync, 0, sizeof(sync));
	sync.kind = GMX_OP_SYNC;
	sync.stream = 0;
	sync.buffer = UINT32_MAX;
	rc = gmx_workload_add_op(w, &sync, NULL);
	if (info)
		info->format = GMX_TRACE_ORION;
out:
	if (rc == -ENOMEM)
		gmx_src_fail(s, "out of memory");
	free(text);
	return rc;
}
