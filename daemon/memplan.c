/*
 * gpumuxd's memory planner (see memplan.h): its books, the allocations and residency of each
 * task and their checks. What a slice needs is walked in memplan_walk.c; one switch is
 * planned in memplan_plan.c; the shared layout is memplan_internal.h.
 */
#include "memplan_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gmxd_mem_create(uint64_t cap, gmxd_mem_t **out)
{
	if (cap == 0)
		return -EINVAL;
	gmxd_mem_t *m = calloc(1, sizeof *m);
	if (!m)
		return -ENOMEM;
	m->cap = cap;
	m->task_limit = GMXD_MEM_TASK_BYTES_MAX;
	uint64_t units = cap / CHUNK < (1ull << 32) ? cap / CHUNK : (1ull << 32);
	m->budget = GMXD_MEM_BUDGET_BASE + 2 * units;
	*out = m;
	return 0;
}

void gmxd_mem_destroy(gmxd_mem_t *m)
{
	if (!m)
		return;
	for (uint32_t t = 0; t < GMX_MAX_TASKS; t++)
		gmxd_mem_drop(m, t);
	free(m->rl);
	free(m);
}

void gmxd_mem_set_task_limit(gmxd_mem_t *m, uint64_t bytes)
{
	m->task_limit = bytes < GMXD_MEM_TASK_BYTES_MAX ? bytes : GMXD_MEM_TASK_BYTES_MAX;
}

uint64_t gmxd_mem_task_limit(const gmxd_mem_t *m)
{
	return m->task_limit;
}

uint64_t gmxd_mem_budget(const gmxd_mem_t *m)
{
	return m->budget;
}

void gmxd_mem_set_protect(gmxd_mem_t *m, int on)
{
	m->protect = on;
}

void gmxd_mem_set_priority(gmxd_mem_t *m, uint32_t task, int prio)
{
	if (task < GMX_MAX_TASKS)
		m->prio[task] = prio;
}

void gmxd_mem_set_piece(gmxd_mem_t *m, uint64_t bytes)
{
	m->piece = bytes && bytes < CHUNK ? CHUNK : bytes / CHUNK * CHUNK;
}

int gmxd__mem_grow(void **v, uint32_t n, uint32_t *cap, size_t elem, uint32_t first)
{
	if (n < *cap)
		return 0;
	uint32_t nc = *cap ? *cap * 2 : first;
	void *nv = realloc(*v, (size_t)nc * elem);
	if (!nv)
		return -ENOMEM;
	*v = nv;
	*cap = nc;
	return 0;
}

/* Resident bytes of an allocation: whole chunks, the last one perhaps shorter. */
static uint64_t rec_resident(const malloc_rec_t *a)
{
	uint64_t b = (uint64_t)a->n_res * CHUNK;
	if (a->n_res && gmxd__mem_bit(a, a->n_chunks - 1))
		b -= CHUNK - gmxd__mem_chunk_len(a, a->n_chunks - 1);
	return b;
}

/* The 2 MiB-aligned chunks of ptr..ptr+size that neither neighbour covers. The driver packs
 * small allocations into shared 2 MiB blocks (include/gpumux/devalloc.h), so their addresses
 * share a chunk; allocations never overlap, so only the neighbours in address order can
 * share the first or the last chunk. */
static uint64_t unshared_chunks(uint64_t ptr, uint64_t size, const malloc_rec_t *prev,
				const malloc_rec_t *next)
{
	uint64_t first = ptr / CHUNK, last = (ptr + size - 1) / CHUNK;
	int lo = prev && (prev->ptr + prev->size - 1) / CHUNK == first;
	int hi = next && next->ptr / CHUNK == last;
	if (first == last)
		return lo || hi ? 0 : 1;
	return last - first + 1 - (uint64_t)lo - (uint64_t)hi;
}

/* Chunks allocation i of tm holds alone. */
static uint64_t own_chunks(const task_mem_t *tm, uint32_t i)
{
	return unshared_chunks(tm->a[i].ptr, tm->a[i].size, i ? &tm->a[i - 1] : NULL,
			       i + 1 < tm->n ? &tm->a[i + 1] : NULL);
}

uint32_t gmxd__mem_first_after(const task_mem_t *tm, uint64_t addr)
{
	uint32_t lo = 0, hi = tm->n;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (tm->a[mid].ptr + tm->a[mid].size <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The allocation of tm starting at ptr, or NULL. */
malloc_rec_t *gmxd__mem_find(const task_mem_t *tm, uint64_t ptr, uint32_t *idx)
{
	uint32_t i = gmxd__mem_first_after(tm, ptr);
	if (i >= tm->n || tm->a[i].ptr != ptr)
		return NULL;
	if (idx)
		*idx = i;
	return &tm->a[i];
}

int gmxd_mem_alloc(gmxd_mem_t *m, uint32_t task, uint64_t ptr, uint64_t size)
{
	if (task >= GMX_MAX_TASKS || size == 0 || ptr + size < ptr)
		return -EINVAL;
	task_mem_t *tm = &m->t[task];
	/* Overflow-checked: bytes <= task_limit always holds. */
	if (size > m->task_limit - tm->bytes || tm->n >= GMXD_MEM_ALLOCS_MAX)
		return -E2BIG;
	uint32_t i = gmxd__mem_first_after(tm, ptr);
	if (i < tm->n && tm->a[i].ptr < ptr + size)
		return -EINVAL; /* overlaps an allocation of the task */
	/* What the device holds for it: whole 2 MiB chunks, one shared by small allocations
	 * counted once (include/gpumux/devalloc.h). */
	uint64_t own = unshared_chunks(ptr, size, i ? &tm->a[i - 1] : NULL, i < tm->n ? &tm->a[i] : NULL);
	uint64_t limit_ch = m->task_limit / CHUNK;
	if (tm->chunks > limit_ch || own > limit_ch - tm->chunks)
		return -E2BIG;
	if (gmxd__mem_grow((void **)&tm->a, tm->n, &tm->cap, sizeof *tm->a, 16))
		return -ENOMEM;
	uint64_t nch = (size + CHUNK - 1) / CHUNK; /* < 2^29: size <= GMXD_MEM_TASK_BYTES_MAX */
	uint64_t *bits = calloc((size_t)((nch + 63) / 64), sizeof *bits);
	if (!bits)
		return -ENOMEM;
	memmove(&tm->a[i + 1], &tm->a[i], (size_t)(tm->n - i) * sizeof *tm->a);
	tm->a[i] = (malloc_rec_t){.ptr = ptr, .size = size, .n_chunks = (uint32_t)nch, .bits = bits};
	tm->n++;
	tm->bytes += size;
	tm->chunks += own;
	return 0;
}

static void forget(gmxd_mem_t *m, task_mem_t *tm, uint32_t i)
{
	malloc_rec_t *a = &tm->a[i];
	uint64_t r = rec_resident(a);
	tm->resident -= r;
	m->resident -= r;
	tm->bytes -= a->size;
	free(a->bits);
}

int gmxd_mem_free(gmxd_mem_t *m, uint32_t task, uint64_t ptr)
{
	if (task >= GMX_MAX_TASKS)
		return -ENOENT;
	task_mem_t *tm = &m->t[task];
	uint32_t i;
	if (!gmxd__mem_find(tm, ptr, &i))
		return -ENOENT;
	tm->chunks -= own_chunks(tm, i);
	forget(m, tm, i);
	memmove(&tm->a[i], &tm->a[i + 1], (size_t)(tm->n - i - 1) * sizeof *tm->a);
	tm->n--;
	return 0;
}

void gmxd_mem_drop(gmxd_mem_t *m, uint32_t task)
{
	if (task >= GMX_MAX_TASKS)
		return;
	task_mem_t *tm = &m->t[task];
	for (uint32_t i = 0; i < tm->n; i++)
		forget(m, tm, i);
	free(tm->a);
	memset(tm, 0, sizeof *tm);
}

uint64_t gmxd_mem_bytes(const gmxd_mem_t *m, uint32_t task)
{
	return task < GMX_MAX_TASKS ? m->t[task].bytes : 0;
}

uint64_t gmxd_mem_resident(const gmxd_mem_t *m, uint32_t task)
{
	return task < GMX_MAX_TASKS ? m->t[task].resident : m->resident;
}

uint64_t gmxd_mem_footprint(const gmxd_mem_t *m, uint32_t task)
{
	return task < GMX_MAX_TASKS ? m->t[task].chunks * CHUNK : 0;
}

int gmxd_mem_check(const gmxd_mem_t *m, char *err, size_t err_len)
{
	uint64_t all = 0, listed = 0;
	for (uint32_t t = 0; t < GMX_MAX_TASKS; t++) {
		const task_mem_t *tm = &m->t[t];
		uint64_t bytes = 0, res = 0, chunks = 0, last = UINT64_MAX;
		for (uint32_t i = 0; i < tm->n; i++) {
			const malloc_rec_t *a = &tm->a[i];
			if (i && tm->a[i - 1].ptr + tm->a[i - 1].size > a->ptr) {
				snprintf(err, err_len,
					 "task %u: allocations %u and %u overlap or are unsorted", t, i - 1,
					 i);
				return -EFAULT;
			}
			uint32_t pop = 0;
			for (uint32_t w = 0; w < (a->n_chunks + 63) / 64; w++)
				pop += (uint32_t)__builtin_popcountll(a->bits[w]);
			if (pop != a->n_res || a->n_chunks != (a->size + CHUNK - 1) / CHUNK) {
				snprintf(err, err_len,
					 "task %u allocation %u: %u chunks resident, %u counted", t, i, pop,
					 a->n_res);
				return -EFAULT;
			}
			bytes += a->size;
			res += rec_resident(a);
			uint64_t c0 = a->ptr / CHUNK, c1 = (a->ptr + a->size - 1) / CHUNK;
			chunks += c1 - c0 + 1 - (c0 == last);
			last = c1;
		}
		if (bytes != tm->bytes || res != tm->resident || bytes > m->task_limit ||
		    chunks != tm->chunks) {
			snprintf(err, err_len,
				 "task %u: %llu bytes (%llu counted), %llu resident (%llu counted), %llu "
				 "chunks (%llu counted)",
				 t, (unsigned long long)bytes, (unsigned long long)tm->bytes,
				 (unsigned long long)res, (unsigned long long)tm->resident,
				 (unsigned long long)chunks, (unsigned long long)tm->chunks);
			return -EFAULT;
		}
		all += res;
		for (uint32_t i = 0; i < tm->n; i++)
			listed += tm->a[i].n_res;
	}
	if (all != m->resident || m->resident > m->cap) {
		snprintf(err, err_len, "%llu bytes resident, %llu counted, device %llu",
			 (unsigned long long)all, (unsigned long long)m->resident,
			 (unsigned long long)m->cap);
		return -EFAULT;
	}
	/* Every resident chunk has an entry in the resident list (stale ones may remain). */
	uint64_t valid = 0;
	for (uint32_t i = 0; i < m->n_rl; i++) {
		const rchunk_t *e = &m->rl[i];
		const malloc_rec_t *a =
		    e->task < GMX_MAX_TASKS ? gmxd__mem_find(&m->t[e->task], e->aptr, NULL) : NULL;
		if (a && e->chunk < a->n_chunks && gmxd__mem_bit(a, e->chunk))
			valid++;
	}
	if (valid < listed) {
		snprintf(err, err_len, "%llu resident chunks, %llu in the resident list",
			 (unsigned long long)listed, (unsigned long long)valid);
		return -EFAULT;
	}
	return 0;
}
