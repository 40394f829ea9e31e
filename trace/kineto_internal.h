/* The Kineto importer's internals, shared by its two halves: kineto.c reads the events into
 * records (kstate_t); kineto_build.c turns the records into a workload, with the working-set
 * rule of docs/traces.md. */
#ifndef GMX_TRACE_KINETO_INTERNAL_H
#define GMX_TRACE_KINETO_INTERNAL_H

#include "trace_internal.h"

/* What the events say, one record per event of interest. */

enum { G_KERNEL, G_H2D, G_D2H, G_D2D, G_MEMSET };
enum { S_NONE, S_STREAM, S_DEVICE, S_EVENT, S_COPY };

typedef struct gpu_rec {
	int64_t ts, dur, stream;
	uint64_t corr, bytes;
	uint32_t name, seq;
	uint32_t grid[3], block[3], shm;
	uint8_t kind, has_corr, pageable_dst;
} gpu_rec_t;

typedef struct rt_rec {
	int64_t ts, dur, tid;
	uint32_t seq;
	uint8_t sync;
} rt_rec_t;

typedef struct mem_rec {
	int64_t ts, tid, bytes, total;
	uint64_t addr;
	uint32_t seq;
	uint8_t has_addr, has_total;
} mem_rec_t;

typedef struct cpu_rec {
	int64_t ts, end, tid;
} cpu_rec_t;

/* A recorded cross-stream wait (cuda_sync "Stream Wait Event"): stream waits for the event
 * recorded on on_stream by the cudaEventRecord call with correlation rec_corr. */
typedef struct wait_rec {
	int64_t ts, stream, on_stream;
	uint64_t corr, rec_corr;
	uint32_t seq;
} wait_rec_t;

typedef struct kstate {
	gmx_workload_t *w;
	gpu_rec_t *gpu;
	size_t n_gpu, cap_gpu;
	rt_rec_t *rt;
	size_t n_rt, cap_rt;
	mem_rec_t *mem;
	size_t n_mem, cap_mem;
	cpu_rec_t *cpu;
	size_t n_cpu, cap_cpu;
	wait_rec_t *waits;
	size_t n_waits, cap_waits;
	gmx_u64map_t rt_by_corr;   /* correlation -> rt index */
	gmx_u64map_t sync_stream;  /* correlation -> stream + 1 (cuda_sync events) */
	gmx_u64map_t name_by_hash; /* kernel name hash -> name index */
	char device[16];
	uint32_t seq;
} kstate_t;

/* Builds kstate's workload (buffers, streams, kernels, copies, syncs, working sets) from
 * the records, filling info. 0, -ENOMEM or -EINVAL. */
int gmx__kineto_build(kstate_t *k, gmx_trace_info_t *info);

/* Dependencies the timeline shows (kineto_deps.c): for each GPU record, the index of the
 * record on another stream it waited for, or -1, in *dep_of (k->n_gpu entries, freed by the
 * caller). 0 or -ENOMEM. */
int gmx__kineto_deps(const kstate_t *k, int32_t **dep_of);

#endif
