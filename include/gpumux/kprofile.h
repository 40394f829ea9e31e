/* Kernel identity and kernel profiles (FIKIT-style priority scheduling).
 *
 * A kernel's identity is a hash of its symbol name, grid, block and dynamic
 * shared memory: the same launch of the same code gets the same ID in every
 * run. A task's profile maps each ID to the distribution of its duration and
 * of the idle gap that follows it, learnt in a measurement phase. Where an
 * ID's duration or gap varies, the profile also keeps one distribution per
 * context (the ID of the kernel launched just before it), which tells apart,
 * for example, the last kernel of a request (followed by the wait for the next
 * request) from the same kernel in the middle of one.
 *
 * Pure: no I/O, no clock. The file format and its reader and writer are in
 * sim/profile_io.c (docs/fikit.md).
 */
#ifndef GPUMUX_KPROFILE_H
#define GPUMUX_KPROFILE_H

#include <stddef.h>
#include <stdint.h>

#define GMX_KPROF_QPTS 33      /* quantile points per distribution: q = i / 32, i = 0..32 */
#define GMX_KPROF_SAMPLES 256  /* samples kept per entry while measuring (reservoir) */
#define GMX_KPROF_NAME_MAX 512 /* longest kernel name kept (bytes, with the terminator) */

/* The context of a kernel that completed while its host was waiting for it
 * and left the task with nothing queued: the end of a request or a step,
 * whose gap is the wait for the next one, unlike the same kernel mid-unit. */
#define GMX_KPROF_AFTER_SYNC(prev) ((prev) ^ 0x8000000000000000ull)

/* One distribution, summarised by its quantiles at i / 32 (non-decreasing), in ns. */
typedef struct gmx_kdist {
	int64_t q[GMX_KPROF_QPTS];
} gmx_kdist_t;

/* The profile of one kernel ID, for all contexts (prev == 0) or after `prev`. */
typedef struct gmx_kprof_entry {
	uint64_t id, prev;
	uint64_t n;	 /* observations */
	gmx_kdist_t dur; /* duration */
	gmx_kdist_t gap; /* idle time after it until the task's next command is ready */
	char *name;	 /* symbol name, or NULL */
	/* measuring only: the reservoir, summarised by gmx_kprof_finish */
	int64_t *dur_s, *gap_s;
	uint32_t n_s;
} gmx_kprof_entry_t;

/* A task's kernel profile: entries in first-seen order, indexed by an
 * open-addressing table keyed by (id, prev). */
struct gmx_kprof {
	char *task;
	uint64_t units; /* units measured (informational) */
	gmx_kprof_entry_t *e;
	uint32_t n, cap_e;    /* entries used, allocated */
	uint32_t *slot;	      /* entry index + 1, 0 empty */
	uint32_t cap;	      /* slots (a power of two) */
	uint32_t max_entries; /* 0: no bound; else observations of new (id, prev) keys past it are
			       * refused (-ENOSPC) while known keys keep learning */
	/* The entry last observed without and with a context (prev), + 1 (0: none): a task's kernels
	 * repeat, so most lookups are of these and skip the table. Checked before use: never stale. */
	uint32_t memo[2];
};
typedef struct gmx_kprof gmx_kprof_t;

/* The kernel ID of a launch: 64-bit FNV-1a over the name and the launch
 * geometry; never 0 (0 means "unknown" in gmx_cmd_t). name may be NULL. */
uint64_t gmx_kernel_id(const char *name, const uint32_t grid[3], const uint32_t block[3],
		       uint32_t shared_mem);

/* Initialises an empty profile for task `task` (copied). 0 or -ENOMEM. */
int gmx_kprof_init(gmx_kprof_t *p, const char *task);

/* Frees everything the profile owns; safe on a zeroed profile. */
void gmx_kprof_free(gmx_kprof_t *p);

/* Records one observation of kernel `id` launched after `prev` (0: none):
 * it ran `dur_ns` and the task then left the GPU idle for `gap_ns`. name may
 * be NULL. 0, -EINVAL (id 0 or a negative time), -ENOSPC (a new key past p->max_entries) or
 * -ENOMEM. */
int gmx_kprof_observe(gmx_kprof_t *p, uint64_t id, uint64_t prev, int64_t dur_ns, int64_t gap_ns,
		      const char *name);

/* Summarises the samples into quantiles and drops the per-context entries of
 * IDs whose duration and gap do not vary (they add nothing). Idempotent. */
void gmx_kprof_finish(gmx_kprof_t *p);

/* Initialises *dst with src summarised as gmx_kprof_finish would, leaving src
 * untouched (it may still be measuring). 0, -EINVAL or -ENOMEM (*dst freed). */
int gmx_kprof_snapshot(const gmx_kprof_t *src, gmx_kprof_t *dst);

/* Adds a summarised entry (a loaded profile): copies e (name included).
 * 0, -EEXIST (the key is already there), -EINVAL (id 0, n 0, quantiles not
 * non-decreasing or negative) or -ENOMEM. */
int gmx_kprof_put(gmx_kprof_t *p, const gmx_kprof_entry_t *e);

/* The entry for (id, prev), or NULL. */
const gmx_kprof_entry_t *gmx_kprof_find(const gmx_kprof_t *p, uint64_t id, uint64_t prev);

/* The entry that predicts kernel `id` after `prev`: the per-context one when
 * there is one, else the ID's own, else NULL. */
const gmx_kprof_entry_t *gmx_kprof_lookup(const gmx_kprof_t *p, uint64_t id, uint64_t prev);

/* The q-quantile (0..1) of a distribution, interpolated between its points. */
int64_t gmx_kdist_quantile(const gmx_kdist_t *d, double q);

/* The gap still to come after `elapsed_ns` of it have passed, at quantile q of
 * the gap's distribution given that it is longer than elapsed_ns; 0 when
 * elapsed_ns is beyond every gap seen. */
int64_t gmx_kdist_remaining(const gmx_kdist_t *d, int64_t elapsed_ns, double q);

/* Calls fn for every entry, in the order they were first seen or put. */
void gmx_kprof_each(const gmx_kprof_t *p, void (*fn)(const gmx_kprof_entry_t *e, void *arg), void *arg);

#endif
