/*
 * The memory planner's books, shared by its parts (memplan.h is the interface):
 * memplan.c keeps allocations and residency, memplan_walk.c walks what a slice needs within
 * a budget, memplan_plan.c plans one switch. Allocations are kept sorted by address per task,
 * so a predicted range finds its allocations by binary search; each keeps a bitmap of its
 * resident chunks. A list of the resident chunks (compacted at each plan) lets a plan start
 * from what the device holds without walking what was merely declared.
 */
#ifndef GMXD_MEMPLAN_INTERNAL_H
#define GMXD_MEMPLAN_INTERNAL_H

#include "memplan.h"

#include "gmx_proto.h"

#include <stddef.h>
#include <stdint.h>

#define CHUNK GMX_MIG_CHUNK

typedef struct {
	uint64_t ptr, size;
	uint32_t n_chunks, n_res;
	uint64_t *bits; /* resident chunks */
} malloc_rec_t;

typedef struct {
	malloc_rec_t *a;
	uint32_t n, cap;
	uint64_t bytes, resident;
	uint64_t chunks; /* 2 MiB-aligned chunks the allocations cover, each counted once */
} task_mem_t;

/* A chunk loaded by a plan; stale once evicted or freed, dropped at the next plan. */
typedef struct {
	uint64_t aptr;
	uint32_t task, chunk;
} rchunk_t;

struct gmxd_mem {
	uint64_t cap, resident, task_limit, budget;
	uint64_t piece; /* most bytes per order; 0: no limit */
	int protect;	/* priorities in every plan (gmxd_mem_set_protect) */
	int prio[GMX_MAX_TASKS];
	task_mem_t t[GMX_MAX_TASKS];
	rchunk_t *rl;
	uint32_t n_rl, cap_rl;
};

/* Makes room for one more element in *v (n used of *cap): doubles, from `first`. 0 or
 * -ENOMEM. */
int gmxd__mem_grow(void **v, uint32_t n, uint32_t *cap, size_t elem, uint32_t first);

/* Whether chunk c of a is resident. */
static inline int gmxd__mem_bit(const malloc_rec_t *a, uint32_t c)
{
	return (int)((a->bits[c >> 6] >> (c & 63)) & 1);
}

/* Bytes of chunk c of a (the last one may be shorter). */
static inline uint64_t gmxd__mem_chunk_len(const malloc_rec_t *a, uint32_t c)
{
	uint64_t off = (uint64_t)c * CHUNK;
	return a->size - off < CHUNK ? a->size - off : CHUNK;
}

/* Index of the first allocation of tm that ends after addr. */
uint32_t gmxd__mem_first_after(const task_mem_t *tm, uint64_t addr);

/* The allocation of tm starting at ptr (its index in *idx when idx is set), or NULL. */
malloc_rec_t *gmxd__mem_find(const task_mem_t *tm, uint64_t ptr, uint32_t *idx);

/* ---- walking what a slice needs, within a budget (memplan_walk.c) ---- */

enum { WALK_DONE = 0, WALK_BUDGET = 1, WALK_MISSING = 2 };

typedef struct walk {
	uint64_t left; /* budget left */
	/* called for each chunk reached (resident only, unless all), in access order; nonzero
	 * stops the walk with that value. NULL: resident chunks are skipped too. */
	int (*fn)(struct walk *w, uint32_t task, uint32_t idx, const malloc_rec_t *a, uint32_t c);
	int all;		  /* hand missing chunks to fn too (else skipped a word at a time) */
	int stop_on_missing;	  /* stop (WALK_MISSING) at the first missing chunk skipped */
	uint64_t skipped_missing; /* bytes of missing chunks skipped */
} walk_t;


/* Walks what slice s needs, in access order (repeats possible): WALK_DONE, WALK_BUDGET,
 * WALK_MISSING, or what w->fn returned. */
int gmxd__mem_walk_slice(const gmxd_mem_t *m, const gmxd_mem_slice_t *s, walk_t *w);

#endif
