/* The simulated GPU: a deterministic discrete-event simulation of one device
 * shared by several tasks, driving a core scheduling policy through the
 * device seam (include/gpumux/sched.h). */
#ifndef GMX_SIM_SIM_H
#define GMX_SIM_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "gpumux/sched.h"
#include "gpumux/workload.h"
#include "preset.h"

/* Units: memory sizes are reported in GiB (2^30 bytes), as nvidia-smi, the presets and
 * capacity_gb count them; rates are GB/s (10^9 bytes per second), as link speeds are quoted. */
#define GMX_GIB 1073741824.0

typedef enum gmx_mem_mode {
	GMX_MEM_INMEM = 0,	   /* infinite device memory: the reference */
	GMX_MEM_UM,		   /* CUDA unified memory, demand paging */
	GMX_MEM_IDEAL,		   /* the memory limit (timeline: a proven bound, sim/limit.c; else Belady) */
	GMX_MEM_MSCHED,		   /* proactive memory scheduling (sim/msched.c, sim/msched_belady.c) */
	GMX_MEM_MSCHED_WHOLEALLOC, /* ablations of msched-switch: whole-allocation prediction */
	GMX_MEM_MSCHED_SERIAL,	   /* no evict/load overlap */
	GMX_MEM_MSCHED_FIFO,	   /* the driver's eviction order */
	GMX_MEM_GPUMUX,		   /* msched with priority in every decision (docs/combined.md) */
	GMX_MEM_MSCHED_SWITCH,	   /* msched with its former switch-time planner (sim/msched.c) */
	GMX_MEM_MODE_COUNT
} gmx_mem_mode_t;
#define GMX_MEM_MODE_NAMES "inmem, um, ideal, msched, msched-wholealloc, msched-serial, msched-fifo, gpumux, msched-switch"

typedef enum gmx_arrival_kind {
	GMX_ARRIVAL_CLOSED = 0, /* next unit as soon as the previous one ends */
	GMX_ARRIVAL_POISSON,	/* open loop, exponential inter-arrival times */
	GMX_ARRIVAL_TRACE	/* open loop, inter-arrival times from a list */
} gmx_arrival_kind_t;

typedef struct gmx_sim_task {
	char *name;
	int priority;	/* 0 (highest) .. 9 */
	uint64_t units; /* units to run; 0 = until the run ends */
	gmx_arrival_kind_t arrival;
	double rate_per_s; /* poisson */
	double *gaps_s;	   /* trace: inter-arrival times, repeated */
	uint32_t n_gaps;
	gmx_workload_t *workload; /* owned by the scenario */
	double latency_target_s;  /* msched's slice rule keeps a rotation within it; 0 = none */
} gmx_sim_task_t;

/* Span kinds beyond the commands' (gmx_op_kind_t) in a recorded timeline: what happened to a
 * task besides its commands running. */
#define GMX_SPAN_WAIT 16    /* a command issued by the host, not yet started on its engine */
#define GMX_SPAN_STALL 17   /* a kernel on the engine waiting for a fault batch (demand paging) */
#define GMX_SPAN_MIG_IN 18  /* its memory migrated to the device (bytes at link speed from start) */
#define GMX_SPAN_MIG_OUT 19 /* its memory evicted to the host (likewise) */

/* One executed command, when a run records its timeline. */
typedef struct gmx_sim_span {
	uint32_t task, op; /* op index within the unit */
	uint64_t unit;
	int16_t stream;
	uint8_t kind; /* gmx_op_kind_t, or GMX_SPAN_* */
	int64_t start_ns, end_ns;
} gmx_sim_span_t;

/* A growable record of executed commands (owned by the caller; free spans). */
typedef struct gmx_sim_timeline {
	gmx_sim_span_t *spans;
	uint64_t n, cap;
	uint64_t limit; /* stop recording after this many (0 = no limit) */
	int64_t until_ns; /* record nothing that starts later (0 = no bound) */
} gmx_sim_timeline_t;

typedef struct gmx_sim_config {
	const gmx_preset_t *device;
	uint64_t capacity_bytes; /* device memory for user data (preset less reservation) */
	gmx_mem_mode_t mem;
	const gmx_policy_ops_t *policy;
	gmx_sched_params_t sched;
	int64_t duration_ns; /* measured, after the warm-up */
	int64_t warmup_ns;   /* run first and not measured (0: measure from the start) */
	uint64_t seed;
	gmx_sim_task_t *tasks;
	uint32_t n_tasks;
	gmx_sim_timeline_t *timeline;	     /* when not NULL, every executed command is appended */
	const struct gmx_tpl_set *templates; /* msched: working-set profile; NULL learns from the workloads */
	int mem_slice_auto; /* msched modes: pick each switch's slice by the rule (sim/msched.h); sched.slice_ns
			       is then the longest slice */
	int mem_forgo_turns; /* msched: forgo the turns the link cannot feed (gmx_msched_forgo_turns) */
	/* When not NULL, called now and then with the share of the run's simulated time done
	 * (0 to 1), so that a front end can show progress; it must not touch the run. */
	void (*progress)(void *ctx, double done);
	void *progress_ctx;
} gmx_sim_config_t;

/* A task's figures over the measured window (after the warm-up), except jct_s. */
typedef struct gmx_task_result {
	const char *name;
	int priority;
	uint64_t units;	 /* completed */
	double progress; /* units completed plus the finished fraction of the current one */
	double throughput_per_s;
	double jct_s; /* time from the start of the run to finish `units`, < 0 when not applicable */
	double lat_p50_s, lat_p95_s, lat_p99_s; /* of units completed in the window; < 0 when none */
	double active_s;			/* time the task was in the measured window */
	double gpu_s;		/* its kernels' time on the execution engine (stalls on faults included) */
	double stall_s;		/* of gpu_s, waiting for fault batches (um, msched fallback) */
	uint64_t faults;	/* fault batches its kernels raised */
	uint64_t fault_entries; /* distinct 4 KB pages in them */
	uint64_t h2d_bytes;	/* migrated into its memory (um, msched) */
	uint64_t d2h_bytes;	/* of its memory, evicted to the host (um, msched) */
} gmx_task_result_t;

/* What the msched modes report (zero elsewhere). */
typedef struct gmx_sim_msched_stats {
	int valid;
	double false_negative_pct;  /* touched 4 KB pages not predicted, % of touched */
	double false_positive_pct;  /* predicted pages not touched, % of predicted */
	uint64_t launches[4];	    /* kernel launches per unit by template kind: other, T1, T2, T3 */
	uint64_t switches;	    /* planned context switches */
	uint64_t planned_in_bytes;  /* loaded at switches */
	uint64_t forgone_turns;	    /* turns whose pages waited behind the next turns' (msched) */
	uint64_t topup_in_bytes;    /* loaded just before a kernel (beyond its slice's plan) */
	uint64_t prefetch_in_bytes; /* loaded for the slice after next, during the coming turn */
	uint64_t ahead_in_bytes;    /* of those, for an LP window beyond the next (--mem gpumux, the
				     * combined policy's rule 6); not in the JSON report */
	uint64_t predicted_missing; /* predicted pages absent when a kernel started (fallback) */
	int slice_auto;		    /* slices picked by the rule */
	double slice_mean_ms, slice_min_ms, slice_max_ms; /* of the slices given out */
} gmx_sim_msched_stats_t;

/* A run's figures. Counters and traffic cover the measured window only (the
 * warm-up is subtracted); the prediction percentages cover the whole run. */
typedef struct gmx_sim_result {
	double sim_time_s; /* simulated, warm-up included */
	double warmup_s;   /* not measured */
	gmx_task_result_t tasks[GMX_MAX_TASKS];
	uint32_t n_tasks;
	uint64_t capacity_bytes, footprint_bytes;
	uint64_t faults;	/* serviced fault batches (um) */
	uint64_t fault_entries; /* distinct 4 KB pages that faulted (um) */
	uint64_t throttles;
	uint64_t h2d_bytes, d2h_bytes;
	uint64_t kernels; /* commands executed */
	uint64_t events;
	gmx_sim_msched_stats_t msched;
	/* ideal under timeline: the limit (docs/simulator.md); limit_valid 0 elsewhere */
	int limit_valid;
	double limit_bound;	   /* on the mean share of same-schedule inmem */
	uint32_t limit_rotations;  /* rotations per block that gave it; 0: compute alone */
	double limit_block_rate;   /* the blocks' share per unit of time */
	double limit_edges;	   /* what the window's edges and host-paced tasks add */
	double limit_rotation_bound, limit_reuse_bound; /* the two bounds whose least it is */
} gmx_sim_result_t;

/* Runs the simulation. 0, or a negative errno with one line in err. */
int gmx_sim_run(const gmx_sim_config_t *cfg, gmx_sim_result_t *res, char *err, size_t err_len);

/* Name of a memory mode, and back: -1 when unknown. */
const char *gmx_mem_mode_name(gmx_mem_mode_t m);
int gmx_mem_mode_parse(const char *name);

#endif
