/* gpumux trace import: turns recorded GPU timelines (PyTorch profiler / Kineto
 * Chrome traces, Orion per-operator CSV, Vidur operator-time CSV) into a native
 * workload (include/gpumux/workload.h), and summarises traces and workloads.
 *
 * The source format is detected from the content, never from the file name.
 * Every failure fills `err` with one line "FILE:LINE:COLUMN: what" or
 * "FILE: byte N: what" and returns a negative errno; the workload is then freed.
 * docs/traces.md describes the formats, the mapping and its limits.
 */
#ifndef GMX_TRACE_H
#define GMX_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gpumux/workload.h"

typedef enum gmx_trace_format {
	GMX_TRACE_AUTO = 0, /* detect from content */
	GMX_TRACE_KINETO,   /* PyTorch profiler / Kineto Chrome trace JSON, plain or gzip */
	GMX_TRACE_ORION,    /* Orion per-operator CSV */
	GMX_TRACE_VIDUR,    /* Vidur operator-time CSV */
	GMX_TRACE_NATIVE,   /* the native .gmxw text format */
	GMX_TRACE_UNKNOWN
} gmx_trace_format_t;

/* Import options. Zero-initialised options mean: detect, Vidur 512 tokens. */
typedef struct gmx_trace_opts {
	gmx_trace_format_t format; /* GMX_TRACE_AUTO to detect */
	uint32_t tokens;	   /* Vidur: tokens of the step (0 = 512) */
	const char *device;	   /* Vidur: "a100"/"h100" when the path does not say; may be NULL */
	int pack;		   /* 1: a trace that records allocations (Kineto/HTA) comes out packed
				      (gmx_trace_pack); 0: one buffer per recorded tensor */
} gmx_trace_opts_t;

/* What the source recorded beyond the workload: the GPU timeline of its kernels
 * (relative ns, first host operation = 0), for statistics that need the
 * recorded times rather than a replay estimate. Arrays have n_kernels entries,
 * in workload kernel order. has_timeline = 0 for CSV sources. */
typedef struct gmx_trace_info {
	gmx_trace_format_t format;
	int has_timeline;
	uint32_t n_kernels;
	uint64_t *launch_ns; /* host launch time */
	uint64_t *start_ns;  /* GPU start */
	uint64_t *end_ns;    /* GPU end */
	int16_t *stream;
	uint64_t span_ns;	       /* first host op to last GPU/host activity */
	uint64_t memory_events;	       /* GPU allocate/free events read */
	uint64_t peak_allocated_bytes; /* from the trace's own totals when recorded, else 0 */
} gmx_trace_info_t;

/* Summary of one workload (and its recorded timeline when known). */
typedef struct gmx_trace_stats {
	uint64_t kernels, copies, memsets, syncs, allocations, frees;
	uint32_t n_streams;
	int16_t stream_id[64]; /* first 64 streams, ascending */
	uint64_t stream_kernels[64];
	uint32_t tasks;
	double span_s;
	int span_recorded; /* 1: from recorded timestamps; 0: replay estimate */
	uint64_t peak_allocated_bytes;
	uint64_t footprint_bytes;
	uint64_t packed_bytes; /* the allocations as the caching allocator packs them: its segments' bytes */
	uint64_t memory_events;
	double host_interval_us[3]; /* p50, p90, p99 */
	double gap_us[3];	    /* p50, p90, p99 */
	uint64_t kernels_with_regions;
} gmx_trace_stats_t;

/* Name of a format ("kineto", "orion", ...). */
const char *gmx_trace_format_name(gmx_trace_format_t f);

/* Parses "auto|kineto|orion|vidur|native"; returns GMX_TRACE_UNKNOWN otherwise. */
gmx_trace_format_t gmx_trace_format_parse(const char *s);

/* Detects the format of `len` leading bytes of a file (gzip is decompressed by
 * the caller first; see gmx_trace_import). Returns GMX_TRACE_UNKNOWN if none fits. */
gmx_trace_format_t gmx_trace_detect(const void *head, size_t len);

/* Imports the trace at `path` into *w (initialised here) and, when info is not
 * NULL, its recorded timeline (free with gmx_trace_info_free). 0 or a negative
 * errno with one line in err. */
int gmx_trace_import(const char *path, const gmx_trace_opts_t *opts, gmx_workload_t *w,
		     gmx_trace_info_t *info, char *err, size_t err_len);

/* Same as gmx_trace_import from memory (`label` names it in errors); used by the
 * fuzzers and the tests. gzip content is decompressed as it is read. */
int gmx_trace_import_mem(const void *data, size_t len, const char *label, const gmx_trace_opts_t *opts,
			 gmx_workload_t *w, gmx_trace_info_t *info, char *err, size_t err_len);

/* Rewrites *w's buffers as the caching allocator packs them (include/gpumux/devalloc.h):
 * the buffers live from the start, then every ALLOC and FREE in op order, go through
 * the allocator; each kernel region (and copy or memset buffer) moves onto the segment
 * block its buffer held at that op; the segments become the buffers (one per
 * cudaMalloc); the ALLOC/FREE ops go, their host time carried to the next op (to a
 * final sync after the last). Kernels and bytes touched are unchanged. 0 or -ENOMEM
 * with one line in err (the workload is then half rewritten: free it). */
int gmx_trace_pack(gmx_workload_t *w, char *err, size_t err_len);

/* Frees the arrays of an info; safe on a zeroed one. */
void gmx_trace_info_free(gmx_trace_info_t *info);

/* Computes statistics of *w; uses info's recorded timeline when it has one,
 * otherwise estimates times by replaying think and durations with no contention
 * and no launch latency. 0 or -ENOMEM. */
int gmx_trace_stats(const gmx_workload_t *w, const gmx_trace_info_t *info, gmx_trace_stats_t *st);

/* Prints statistics as text or as one JSON object (keys in docs/traces.md). */
void gmx_trace_stats_print(const gmx_trace_stats_t *st, const char *label, int json, FILE *out);

/* Writes *w to `path` atomically (temporary beside it + rename; removed on
 * failure). Uses the workload writer when it is built in. 0 or negative errno. */
int gmx_trace_write(const gmx_workload_t *w, const char *path, char *err, size_t err_len);

#endif
