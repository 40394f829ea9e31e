/* Trace and workload statistics, and writing imported workloads. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpumux/devalloc.h"
#include "trace_internal.h"

#ifdef GMX_HAVE_WORKLOAD_IO
#include "gpumux/workload_io.h"
#endif

/* Saturating addition: a hostile file's think times must not overflow. */
static int64_t sat_add(int64_t a, uint64_t b)
{
	if (b > (uint64_t)(INT64_MAX - a))
		return INT64_MAX;
	return a + (int64_t)b;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* Nearest-rank percentiles of v[0..n) in microseconds (v is sorted here). */
static void pcts(uint64_t *v, size_t n, double out[3])
{
	static const double q[3] = {0.50, 0.90, 0.99};
	out[0] = out[1] = out[2] = 0;
	if (!n)
		return;
	gmx_sort(v, n, sizeof(*v), cmp_u64);
	for (int i = 0; i < 3; i++) {
		size_t rank = (size_t)(q[i] * (double)n + 0.999999);
		if (rank < 1)
			rank = 1;
		if (rank > n)
			rank = n;
		out[i] = (double)v[rank - 1] / 1000.0;
	}
}

static int count_stream(gmx_trace_stats_t *st, int16_t s)
{
	uint32_t i = 0;
	while (i < st->n_streams && st->stream_id[i] < s)
		i++;
	if (i < st->n_streams && st->stream_id[i] == s) {
		st->stream_kernels[i]++;
		return 0;
	}
	if (st->n_streams == 64)
		return 0; /* more than 64 streams: the rest are counted in "kernels" only */
	memmove(&st->stream_id[i + 1], &st->stream_id[i], (st->n_streams - i) * sizeof(st->stream_id[0]));
	memmove(&st->stream_kernels[i + 1], &st->stream_kernels[i],
		(st->n_streams - i) * sizeof(st->stream_kernels[0]));
	st->stream_id[i] = s;
	st->stream_kernels[i] = 1;
	st->n_streams++;
	return 0;
}

/* What the device holds for the workload's buffers. A workload that records
 * allocations (ALLOC/FREE ops: a trace imported tensor by tensor) is replayed
 * through PyTorch's caching allocator (gmx_trace__packed_reserved); one that
 * records none lays out its device allocations itself (generators, packed
 * imports): each buffer is one cudaMalloc, packed as the driver packs them
 * (gmx_devalloc_chunks). 0 or -ENOMEM. */
static int packed_bytes(const gmx_workload_t *w, uint64_t *out)
{
	int records = 0;
	for (uint32_t i = 0; i < w->n_ops && !records; i++)
		records = w->ops[i].kind == GMX_OP_ALLOC || w->ops[i].kind == GMX_OP_FREE;
	if (records)
		return gmx_trace__packed_reserved(w, out);
	uint64_t *sizes = malloc((w->n_buffers + 1) * sizeof(*sizes));
	if (!sizes)
		return -ENOMEM;
	for (uint32_t b = 0; b < w->n_buffers; b++)
		sizes[b] = w->buffers[b].size;
	*out = gmx_devalloc_chunks(sizes, w->n_buffers) * GMX_DEVALLOC_ROUND_LARGE;
	free(sizes);
	return 0;
}

int gmx_trace_stats(const gmx_workload_t *w, const gmx_trace_info_t *info, gmx_trace_stats_t *st)
{
	memset(st, 0, sizeof(*st));
	st->tasks = 1; /* a workload file is one task's unit of work */
	uint64_t *intervals = malloc((w->n_ops + 1) * sizeof(uint64_t));
	uint64_t *gaps = malloc((w->n_ops + 1) * sizeof(uint64_t));
	uint8_t *live = calloc(w->n_buffers + 1, 1);
	if (!intervals || !gaps || !live) {
		free(intervals);
		free(gaps);
		free(live);
		return -ENOMEM;
	}
	size_t ni = 0, ng = 0;
	/* Buffers whose first operation is not an ALLOC are live from the start. */
	gmx_trace__live_at_start(w, live);
	uint64_t cur = 0;
	for (uint32_t b = 0; b < w->n_buffers; b++)
		if (live[b])
			cur += w->buffers[b].size;
	st->peak_allocated_bytes = cur;
	st->footprint_bytes = gmx_workload_footprint(w);
	if (packed_bytes(w, &st->packed_bytes)) {
		free(intervals);
		free(gaps);
		free(live);
		return -ENOMEM;
	}

	/* Replay estimate: one host thread issuing after think; each stream runs
	 * its operations in order as soon as they are issued and it is free. */
	int64_t host = 0, end_all = 0;
	int64_t stream_free[64] = {0};
	int16_t sid[64];
	uint32_t ns = 0;
	int64_t last_launch = -1;
	for (uint32_t i = 0; i < w->n_ops; i++) {
		const gmx_op_t *o = &w->ops[i];
		host = sat_add(host, o->think_ns);
		uint32_t si = 0;
		if (o->kind != GMX_OP_SYNC || o->stream >= 0) {
			while (si < ns && sid[si] != o->stream)
				si++;
			if (si == ns && ns < 64) {
				sid[ns] = o->stream;
				stream_free[ns++] = -1;
			}
			if (si == 64)
				si = 63;
		}
		switch (o->kind) {
		case GMX_OP_KERNEL:
		case GMX_OP_COPY_H2D:
		case GMX_OP_COPY_D2H:
		case GMX_OP_COPY_D2D:
		case GMX_OP_MEMSET: {
			int64_t start = host > stream_free[si] ? host : stream_free[si];
			if (o->kind == GMX_OP_KERNEL) {
				st->kernels++;
				count_stream(st, o->stream);
				if (o->region_count)
					st->kernels_with_regions++;
				if (last_launch >= 0)
					intervals[ni++] = (uint64_t)(host - last_launch);
				last_launch = host;
				if (stream_free[si] >= 0)
					gaps[ng++] = (uint64_t)(start - stream_free[si]);
			} else if (o->kind == GMX_OP_MEMSET)
				st->memsets++;
			else
				st->copies++;
			stream_free[si] = sat_add(start, o->duration_ns);
			if (stream_free[si] > end_all)
				end_all = stream_free[si];
			break;
		}
		case GMX_OP_SYNC:
			st->syncs++;
			if (o->stream < 0) {
				for (uint32_t k = 0; k < ns; k++)
					if (stream_free[k] > host)
						host = stream_free[k];
			} else if (stream_free[si] > host)
				host = stream_free[si];
			break;
		case GMX_OP_ALLOC:
			st->allocations++;
			if (o->buffer < w->n_buffers && !live[o->buffer]) {
				live[o->buffer] = 1;
				cur += w->buffers[o->buffer].size;
			}
			break;
		case GMX_OP_FREE:
			st->frees++;
			if (o->buffer < w->n_buffers && live[o->buffer]) {
				live[o->buffer] = 0;
				cur -= w->buffers[o->buffer].size;
			}
			break;
		default:
			break;
		}
		if (cur > st->peak_allocated_bytes)
			st->peak_allocated_bytes = cur;
		if (host > end_all)
			end_all = host;
	}
	st->memory_events = st->allocations + st->frees;
	st->span_s = (double)end_all / 1e9;
	if (info && info->has_timeline && info->n_kernels == st->kernels) {
		/* The recorded times replace the estimate. */
		st->span_recorded = 1;
		st->span_s = (double)info->span_ns / 1e9;
		ni = ng = 0;
		for (uint32_t i = 1; i < info->n_kernels; i++)
			intervals[ni++] = info->launch_ns[i] >= info->launch_ns[i - 1]
					      ? info->launch_ns[i] - info->launch_ns[i - 1]
					      : 0;
		/* Same-stream gaps in GPU start order per stream (kernels of one stream
		 * do not overlap, so end order is start order). */
		int64_t prev_end[64];
		int16_t ps[64];
		uint32_t np = 0;
		for (uint32_t i = 0; i < info->n_kernels; i++) {
			uint32_t k = 0;
			while (k < np && ps[k] != info->stream[i])
				k++;
			if (k == np) {
				if (np == 64)
					continue;
				ps[np] = info->stream[i];
				prev_end[np++] = -1;
			}
			if (prev_end[k] >= 0)
				gaps[ng++] = (int64_t)info->start_ns[i] > prev_end[k]
						 ? info->start_ns[i] - (uint64_t)prev_end[k]
						 : 0;
			prev_end[k] = (int64_t)info->end_ns[i];
		}
		if (info->peak_allocated_bytes)
			st->peak_allocated_bytes = info->peak_allocated_bytes;
	}
	pcts(intervals, ni, st->host_interval_us);
	pcts(gaps, ng, st->gap_us);
	free(intervals);
	free(gaps);
	free(live);
	return 0;
}

static void json_str(FILE *out, const char *s)
{
	fputc('"', out);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(out, "\\%c", c);
		else if (c < 0x20)
			fprintf(out, "\\u%04x", c);
		else
			fputc(c, out);
	}
	fputc('"', out);
}

void gmx_trace_stats_print(const gmx_trace_stats_t *st, const char *label, int json, FILE *out)
{
	if (json) {
		fprintf(out, "{\"file\":");
		json_str(out, label);
		fprintf(out, ",\"kernels\":%llu,\"streams\":{", (unsigned long long)st->kernels);
		for (uint32_t i = 0; i < st->n_streams; i++)
			fprintf(out, "%s\"%d\":%llu", i ? "," : "", st->stream_id[i],
				(unsigned long long)st->stream_kernels[i]);
		fprintf(
		    out,
		    "},\"tasks\":%u,\"span_s\":%.6f,\"span_source\":\"%s\",\"copies\":%llu,\"memsets\":%llu,"
		    "\"syncs\":%llu,\"allocations\":%llu,\"frees\":%llu,\"memory_events\":%llu,"
		    "\"peak_allocated_bytes\":%llu,\"footprint_bytes\":%llu,\"packed_bytes\":%llu,"
		    "\"kernels_with_regions\":%llu,"
		    "\"host_interval_us\":{\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f},"
		    "\"gap_us\":{\"p50\":%.3f,\"p90\":%.3f,\"p99\":%.3f}}\n",
		    st->tasks, st->span_s, st->span_recorded ? "recorded" : "estimated",
		    (unsigned long long)st->copies, (unsigned long long)st->memsets,
		    (unsigned long long)st->syncs, (unsigned long long)st->allocations,
		    (unsigned long long)st->frees, (unsigned long long)st->memory_events,
		    (unsigned long long)st->peak_allocated_bytes, (unsigned long long)st->footprint_bytes,
		    (unsigned long long)st->packed_bytes, (unsigned long long)st->kernels_with_regions,
		    st->host_interval_us[0], st->host_interval_us[1], st->host_interval_us[2], st->gap_us[0],
		    st->gap_us[1], st->gap_us[2]);
		return;
	}
	fprintf(out, "%s\n", label ? label : "");
	fprintf(out, "  kernels            %llu (%llu with a working set)\n", (unsigned long long)st->kernels,
		(unsigned long long)st->kernels_with_regions);
	fprintf(out, "  streams            %u:", st->n_streams);
	for (uint32_t i = 0; i < st->n_streams; i++)
		fprintf(out, " %d=%llu", st->stream_id[i], (unsigned long long)st->stream_kernels[i]);
	fprintf(out, "\n  tasks              %u\n", st->tasks);
	fprintf(out, "  span               %.6f s (%s)\n", st->span_s,
		st->span_recorded ? "recorded" : "estimated: think + durations, no contention");
	fprintf(out, "  copies / memsets   %llu / %llu\n", (unsigned long long)st->copies,
		(unsigned long long)st->memsets);
	fprintf(out, "  syncs              %llu\n", (unsigned long long)st->syncs);
	fprintf(out, "  allocations/frees  %llu / %llu\n", (unsigned long long)st->allocations,
		(unsigned long long)st->frees);
	fprintf(out, "  peak allocated     %llu bytes (%.2f GiB)\n",
		(unsigned long long)st->peak_allocated_bytes,
		(double)st->peak_allocated_bytes / (1024.0 * 1024 * 1024));
	fprintf(out, "  packed             %llu bytes (%.2f GiB): the caching allocator's segments\n",
		(unsigned long long)st->packed_bytes, (double)st->packed_bytes / (1024.0 * 1024 * 1024));
	fprintf(out, "  host interval us   p50 %.3f  p90 %.3f  p99 %.3f\n", st->host_interval_us[0],
		st->host_interval_us[1], st->host_interval_us[2]);
	fprintf(out, "  same-stream gap us p50 %.3f  p90 %.3f  p99 %.3f\n", st->gap_us[0], st->gap_us[1],
		st->gap_us[2]);
}

int gmx_trace_write(const gmx_workload_t *w, const char *path, char *err, size_t err_len)
{
#ifdef GMX_HAVE_WORKLOAD_IO
	return gmx_workload_write(w, path, err, err_len);
#else
	(void)w;
	snprintf(err, err_len, "%s: this build has no workload writer (workload/ is missing)", path);
	return -ENOSYS;
#endif
}
