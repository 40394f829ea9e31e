/* The decisions of the combined policy (`gpumux`: priority scheduling and
 * proactive memory as one policy, docs/combined.md), as pure functions so
 * that the simulator and gpumuxd take them alike and tests check each one.
 *
 * Priorities are 0 (highest) to 9. "HP" is the best priority among the tasks
 * still running; everything below is "LP".
 */
#ifndef GPUMUX_COMBINED_H
#define GPUMUX_COMBINED_H

#include <stdint.h>

/* Migrations are cut into pieces of at most this many bytes: 64 MiB take 2.1 ms at
 * the RTX 5080's 31.75 GB/s per direction, about one GPU time slice, so an HP
 * arrival waits at most that for the link. */
#define GMX_COMB_PIECE_BYTES_DEFAULT (64ull << 20)
/* The smallest piece: one 2 MiB chunk (the driver's allocation granule). */
#define GMX_COMB_PIECE_BYTES_MIN (2ull << 20)

/* Whether a resident page of a task at priority victim_prio may be evicted to
 * make room for work of priority for_prio: never a better priority's pages
 * (the HP working set is never evicted for LP work). */
int gmx_comb_may_evict(int victim_prio, int for_prio);

/* Order of eviction among the allowed victims: lower first. A worse priority
 * than the requester's goes before the requester's own level (LP pages are
 * evicted first, as TGS does), then by the planner's rank within a level
 * (rank: the first coming slice that needs the page, larger = later;
 * UINT32_MAX = none). */
uint64_t gmx_comb_evict_key(int victim_prio, int for_prio, uint32_t rank);

/* Whether an LP command may start in an HP gap: its predicted run plus the
 * time to make its pages resident (load_ns, from the device's memory model;
 * 0 when they are) plus switch_ns in and out fits within gap_ns. gap_ns < 0:
 * unknown (not admitted); INT64_MAX: no HP work expected (admitted). */
int gmx_comb_admit(int64_t gap_ns, int64_t run_ns, int64_t load_ns, int64_t switch_ns);

/* Nanoseconds to move `bytes` at link_gbps (GB/s, 10^9 bytes per second), rounded up. */
int64_t gmx_comb_link_ns(uint64_t bytes, double link_gbps);

/* Whether an LP task's windows after the next one may be prefetched early (rule 6): only when
 * the link has time to spare, i.e. moves least_bytes (what the windows must move at the least:
 * their chunks beyond the room HP leaves) in less than half of gpu_ns (their GPU time). */
int gmx_comb_prefetch_ahead(uint64_t least_bytes, int64_t gpu_ns, double link_gbps);

/* One coming command of an LP task, as gmx_comb_prefetch_cmds sees it. */
typedef struct gmx_comb_coming {
	uint64_t fresh_bytes;	/* bytes of the chunks it touches that no command before it touches */
	uint64_t missing_bytes; /* of those, the bytes not resident */
	int64_t run_ns;		/* its predicted GPU time; <= 0: unknown, taken as 0 */
} gmx_comb_coming_t;

/* The most windows gmx_comb_prefetch_cmds looks at; commands past them wait for a later call. */
#define GMX_COMB_AHEAD_WINDOWS_MAX 256u

/* Rule 6 for a planner that sees an LP task's coming commands one by one (gpumuxd): how many of
 * the n coming commands c (in launch order) to prefetch now, while the current ones (cur_bytes of
 * distinct chunks, cur_ns of GPU time) compute. The commands are cut into windows of a quarter of
 * room_bytes (the room the better priorities leave the task; a command larger than that is a
 * window alone). The window after the current one is always taken; each window after it only
 * when the link has time to spare over them all (gmx_comb_prefetch_ahead over their distinct
 * bytes beyond room_bytes and their GPU time, the current ones included), when the link must
 * start it within the current GPU time for every window from it on to be in by its start
 * (Forestall's latest start, walking the windows backwards), and while the current ones and the
 * windows taken fit room_bytes together. Returns the commands taken (whole windows); *next_cmds
 * (may be NULL) gets those of the first window. */
uint32_t gmx_comb_prefetch_cmds(const gmx_comb_coming_t *c, uint32_t n, uint64_t cur_bytes, int64_t cur_ns,
				uint64_t room_bytes, double link_gbps, uint32_t *next_cmds);

/* The piece size for a wait bound: the largest whole number of 2 MiB chunks
 * that crosses the link within max_wait_ns (at least one chunk). */
uint64_t gmx_comb_piece_bytes(double link_gbps, int64_t max_wait_ns);

/* When a migration of priority `prio` asked at `now` may start on a link whose
 * current piece ends at piece_end and whose queued work ends at backlog_end:
 * HP work (prio <= hp_level) goes after the piece in flight only (it waits at
 * most one piece), LP work after the whole backlog. */
int64_t gmx_comb_migration_start(int prio, int hp_level, int64_t now, int64_t piece_end, int64_t backlog_end);

/* The LP slice for a turn, from the latency targets: the tightest target over
 * the LP tasks divided by their number (a rotation fits it), clamped to
 * [lo_ns, hi_ns]; no target (all <= 0): hi_ns. */
int64_t gmx_comb_lp_slice(const int64_t *target_ns, uint32_t n_lp, int64_t lo_ns, int64_t hi_ns);

/* msched's slice rule (docs/msched.md#the-slice), for the simulator's planner and gpumuxd
 * alike: a turn is the shortest slice whose switch migration takes at most
 * GMX_COMB_MIGRATION_SHARE of it, in [GMX_COMB_SLICE_NS_MIN, cap_ns] (cap_ns: from the latency
 * targets, gmx_comb_lp_slice; the target wins when the two disagree). */
#define GMX_COMB_SLICE_NS_MIN 2000000LL	   /* 2 ms: the GPU's own slice */
#define GMX_COMB_SLICE_NS_MAX 2000000000LL /* 2 s */
#define GMX_COMB_MIGRATION_SHARE 0.10

/* The slice by the rule above. migration_s(ctx, horizon_ns): seconds the switch's migration
 * takes when the turn lasts horizon_ns (what the work of that horizon misses, over the link);
 * it depends on the horizon, so it is asked over cap_ns, then once more over the slice that
 * estimate asks for. cap_ns below GMX_COMB_SLICE_NS_MIN counts as that. */
int64_t gmx_comb_slice_rule(int64_t cap_ns, double (*migration_s)(void *ctx, int64_t horizon_ns), void *ctx);

/* What is known of an HP task's arrivals before any of its idle gaps has been seen (a
 * scenario's arrival process, a service's declared period, a trace of its inter-arrival
 * times), to seed the gap predictor. All zero: nothing known. */
typedef struct gmx_comb_arrivals {
	double rate_per_s;		/* Poisson arrivals at this mean rate; 0: not Poisson */
	const int64_t *interarrival_ns; /* else these inter-arrival times (one value: periodic), not owned */
	uint32_t n_interarrival;
	int64_t busy_ns; /* the HP task's busy time per arrival (its unit's kernels, from its
			  * profile); 0 unknown (taken as 0: a longer gap predicted) */
} gmx_comb_arrivals_t;

/* The predicted rest of an HP idle gap idle_ns into it, at quantile q (0..1, lower = more
 * conservative), from its arrivals alone: Poisson arrivals are memoryless, so the rest is the
 * q-quantile of an exponential whatever has passed, -ln(1 - q) / rate; with inter-arrival times,
 * the q-quantile of the gaps they leave (each less busy_ns) among those longer than idle_ns,
 * less idle_ns. INT64_MAX: idle longer than every such gap (open); -1: nothing known. */
int64_t gmx_comb_gap_prior(const gmx_comb_arrivals_t *a, int64_t idle_ns, double q);

#endif
