/* Timeline order and the backward-walk eviction planner. See gpumux/mplan.h. */
#include "gpumux/mplan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

uint32_t gmx_timeline_order(const int *priority, const uint8_t *runnable, uint32_t n_tasks, uint32_t next,
			    uint32_t *out)
{
	uint32_t n = 0;
	if (next < n_tasks)
		out[n++] = next;
	/* Level by level, each in round-robin order starting after `next`: the
	 * order the timeslice scheduler reaches them when all stay runnable. */
	for (int level = 0; level < 10; level++)
		for (uint32_t k = 1; k <= n_tasks; k++) {
			uint32_t t = (next + k) % n_tasks;
			if (t != next && runnable[t] && priority[t] == level)
				out[n++] = t;
		}
	return n;
}

/* A resident unit's place in the eviction order: full-width fields, so no rank, position or
 * unit is ever truncated (a slice may list more than 2^24 units). */
typedef struct evict_key {
	uint32_t rank; /* first slice needing the unit; GMX_MPLAN_NONE (the largest) when none */
	uint32_t pos;  /* its first position within that slice (0 when none) */
	uint32_t unit;
} evict_key_t;

struct gmx_mplan {
	uint32_t n_units;
	uint32_t *rank;  /* first slice needing the unit */
	uint32_t *pos;   /* first position of the unit within that slice */
	evict_key_t *key; /* sort scratch */
	uint32_t *seen;  /* dedupe of the load list, by generation */
	uint32_t gen;
	uint32_t cap_key;
};

int gmx_mplan_create(uint32_t n_units, gmx_mplan_t **out)
{
	gmx_mplan_t *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->n_units = n_units;
	p->rank = malloc(((size_t)n_units + 1) * sizeof(uint32_t));
	p->pos = malloc(((size_t)n_units + 1) * sizeof(uint32_t));
	p->seen = calloc((size_t)n_units + 1, sizeof(uint32_t));
	if (!p->rank || !p->pos || !p->seen) {
		gmx_mplan_destroy(p);
		return -ENOMEM;
	}
	memset(p->rank, 0xff, ((size_t)n_units + 1) * sizeof(uint32_t));
	*out = p;
	return 0;
}

void gmx_mplan_destroy(gmx_mplan_t *p)
{
	if (!p)
		return;
	free(p->rank);
	free(p->pos);
	free(p->key);
	free(p->seen);
	free(p);
}

uint32_t gmx_mplan_rank(const gmx_mplan_t *p, uint32_t u)
{
	return u < p->n_units ? p->rank[u] : GMX_MPLAN_NONE;
}

/* Eviction order: furthest rank first (none before any), then within a slice the unit needed
 * last first, then by unit for a total order. */
static int cmp_evict(const void *a, const void *b)
{
	const evict_key_t *x = a, *y = b;
	if (x->rank != y->rank)
		return x->rank < y->rank ? 1 : -1;
	if (x->pos != y->pos)
		return x->pos < y->pos ? 1 : -1;
	return (x->unit < y->unit) - (x->unit > y->unit);
}

int gmx_mplan_switch(gmx_mplan_t *p, const gmx_mplan_timeline_t *tl, const uint32_t *resident, uint32_t n_resident,
		     const uint8_t *is_resident, uint32_t *evict, uint32_t *load, uint32_t *n_load, uint32_t *n_keep)
{
	*n_load = *n_keep = 0;
	for (uint32_t i = 0; i < n_resident; i++)
		if (resident[i] >= p->n_units)
			return -EINVAL;
	for (uint32_t i = 0; i < tl->first[tl->n_slices]; i++)
		if (tl->need[i] >= p->n_units)
			return -EINVAL;
	/* Forget the previous plan's ranks (only units it could have touched). */
	for (uint32_t i = 0; i < n_resident; i++)
		p->rank[resident[i]] = GMX_MPLAN_NONE;
	for (uint32_t i = 0; i < tl->first[tl->n_slices]; i++)
		p->rank[tl->need[i]] = GMX_MPLAN_NONE;
	/* Walk the timeline backwards (slices and positions): the last write is
	 * the earliest slice that needs a unit and its first use within it. */
	for (uint32_t s = tl->n_slices; s-- > 0;)
		for (uint32_t i = tl->first[s + 1]; i-- > tl->first[s];) {
			p->rank[tl->need[i]] = s;
			p->pos[tl->need[i]] = i - tl->first[s];
		}
	if (n_resident > p->cap_key) {
		evict_key_t *k = realloc(p->key, (size_t)n_resident * sizeof(*k));
		if (!k)
			return -ENOMEM;
		p->key = k;
		p->cap_key = n_resident;
	}
	for (uint32_t i = 0; i < n_resident; i++) {
		uint32_t u = resident[i];
		p->key[i] = (evict_key_t){p->rank[u], p->rank[u] == GMX_MPLAN_NONE ? 0 : p->pos[u], u};
		if (p->rank[u] == 0)
			(*n_keep)++;
	}
	if (n_resident) /* key is NULL until the first resident unit */
		qsort(p->key, n_resident, sizeof(*p->key), cmp_evict);
	for (uint32_t i = 0; i < n_resident; i++)
		evict[i] = p->key[i].unit;
	if (tl->n_slices) {
		if (++p->gen == 0) {
			memset(p->seen, 0, (size_t)p->n_units * sizeof(uint32_t));
			p->gen = 1;
		}
		for (uint32_t i = tl->first[0]; i < tl->first[1]; i++) {
			uint32_t u = tl->need[i];
			if (p->seen[u] == p->gen)
				continue;
			p->seen[u] = p->gen;
			if (!is_resident[u])
				load[(*n_load)++] = u;
		}
	}
	return 0;
}
