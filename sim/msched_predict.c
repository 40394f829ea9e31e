/* msched's working-set prediction from templates (or whole allocations) and its accuracy
 * against the regions kernels really touch. See msched.h and docs/msched.md. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "msched.h"
#include "msched_predict.h"

/* A launch as the profiler records it. ranges must hold op->region_count. */
static void launch_of(const gmx_workload_t *w, const gmx_op_t *op, gmx_tpl_range_t *ranges,
		      gmx_tpl_launch_t *x)
{
	for (uint32_t r = 0; r < op->region_count; r++) {
		const gmx_region_t *g = &w->regions[op->region_first + r];
		ranges[r] = (gmx_tpl_range_t){w->buffers[g->buffer].addr + g->offset, g->length};
	}
	*x = (gmx_tpl_launch_t){.name = w->names[op->name],
				.args = &w->args[op->arg_first],
				.n_args = op->arg_count,
				.ranges = ranges,
				.n_ranges = op->region_count};
	memcpy(x->grid, op->grid, sizeof(op->grid));
	memcpy(x->block, op->block, sizeof(op->block));
}

int gmx_msched_learn_many(const gmx_workload_t *const *w, uint32_t n, gmx_tpl_set_t *set)
{
	gmx_tpl_learner_t *l;
	int rc = gmx_tpl_learner_create(&l);
	if (rc)
		return rc;
	gmx_tpl_range_t *ranges = NULL;
	uint32_t cap = 0;
	for (uint32_t k = 0; k < n && !rc; k++)
		for (uint32_t i = 0; i < w[k]->n_ops && !rc; i++) {
			const gmx_op_t *op = &w[k]->ops[i];
			if (op->kind != GMX_OP_KERNEL || !op->region_count)
				continue;
			if (op->region_count > cap) {
				gmx_tpl_range_t *p = realloc(ranges, op->region_count * sizeof(*p));
				if (!p) {
					rc = -ENOMEM;
					break;
				}
				ranges = p;
				cap = op->region_count;
			}
			gmx_tpl_launch_t x;
			launch_of(w[k], op, ranges, &x);
			rc = gmx_tpl_learn(l, &x);
			if (rc == -EINVAL)
				rc =
				    0; /* more arguments than a template holds: that kernel stays uncovered */
		}
	free(ranges);
	if (!rc)
		rc = gmx_tpl_learner_finish(l, set);
	gmx_tpl_learner_destroy(l);
	return rc;
}

int gmx_msched_learn(const gmx_workload_t *w, gmx_tpl_set_t *set)
{
	return gmx_msched_learn_many(&w, 1, set);
}

/* A launch no template covers: the whole allocations its pointer arguments
 * point into are the prediction, as on a real GPU (DESIGN.md, "Memory on a
 * real GPU"); whatever they miss goes through demand paging. Counted as
 * "other" (no template). */
static int predict_whole_args(const gmx_workload_t *w, const gmx_op_t *op, emit_fn emit, void *ctx)
{
	for (uint32_t a = 0; a < op->arg_count; a++) {
		const gmx_arg_t *g = &w->args[op->arg_first + a];
		if (!g->is_pointer)
			continue;
		int64_t b = gmx_workload_find_buffer(w, g->value);
		if (b < 0)
			continue;
		int dup = 0; /* the same allocation through two arguments: once */
		for (uint32_t k = 0; k < a && !dup; k++) {
			const gmx_arg_t *h = &w->args[op->arg_first + k];
			dup = h->is_pointer && gmx_workload_find_buffer(w, h->value) == b;
		}
		if (dup)
			continue;
		int rc = emit(ctx, (uint32_t)b, 0, w->buffers[b].size);
		if (rc)
			return rc;
	}
	return GMX_TPL_OTHER;
}

int gmx_msched__predict_op(const gmx_tpl_set_t *set, const gmx_workload_t *w, const gmx_op_t *op,
			   int wholealloc, emit_fn emit, void *ctx)
{
	if (op->kind == GMX_OP_MEMSET || op->kind == GMX_OP_COPY_H2D || op->kind == GMX_OP_COPY_D2H) {
		/* Copies and memsets: the extent is in the API call itself. */
		if (op->buffer >= w->n_buffers)
			return GMX_TPL_OTHER;
		uint64_t len =
		    op->bytes < w->buffers[op->buffer].size ? op->bytes : w->buffers[op->buffer].size;
		int rc = emit(ctx, op->buffer, 0, wholealloc ? w->buffers[op->buffer].size : len);
		return rc ? rc : GMX_TPL_T2;
	}
	const gmx_tpl_t *t = op->kind == GMX_OP_KERNEL ? gmx_tpl_find(set, w->names[op->name]) : NULL;
	if (!t)
		return op->kind == GMX_OP_KERNEL ? predict_whole_args(w, op, emit, ctx) : GMX_TPL_OTHER;
	gmx_tpl_range_t small[64], *out = small;
	uint32_t n;
	int rc = gmx_tpl_predict(t, &w->args[op->arg_first], op->arg_count, op->grid, op->block, out, 64, &n);
	if (rc == -ENOSPC) {
		out = malloc(n * sizeof(*out));
		if (!out)
			return -ENOMEM;
		rc = gmx_tpl_predict(t, &w->args[op->arg_first], op->arg_count, op->grid, op->block, out, n,
				     &n);
	}
	if (rc) {
		if (out != small)
			free(out);
		return predict_whole_args(w, op, emit, ctx);
	}
	int64_t last_buf = -1;
	for (uint32_t i = 0; i < n && !rc; i++) {
		uint64_t a = out[i].addr, end = out[i].addr + out[i].length;
		while (a < end && !rc) {
			int64_t b = gmx_workload_find_buffer(w, a);
			if (b < 0) {
				/* Past a buffer's end (page rounding): skip to the next buffer. */
				uint64_t nxt = UINT64_MAX;
				for (uint32_t k = 0; k < w->n_buffers; k++)
					if (w->buffers[k].addr > a && w->buffers[k].addr < nxt)
						nxt = w->buffers[k].addr;
				a = nxt;
				continue;
			}
			const gmx_buffer_t *B = &w->buffers[b];
			uint64_t off = a - B->addr, stop = end < B->addr + B->size ? end - B->addr : B->size;
			if (wholealloc) {
				if (b != last_buf)
					rc = emit(ctx, (uint32_t)b, 0, B->size);
				last_buf = b;
			} else {
				rc = emit(ctx, (uint32_t)b, off, stop - off);
			}
			a = B->addr + stop;
		}
	}
	if (out != small)
		free(out);
	return rc ? rc : t->kind;
}

/* ---- accuracy ---------------------------------------------------------------- */

typedef struct ivl {
	uint64_t lo, hi; /* pages [lo, hi) in a buffer-local space: buffer << 40 | page */
} ivl_t;

typedef struct ivl_list {
	ivl_t *v;
	uint32_t n, cap;
} ivl_list_t;

static int ivl_push(ivl_list_t *l, uint64_t lo, uint64_t hi)
{
	if (l->n == l->cap) {
		uint32_t ncap = l->cap ? 2 * l->cap : 256;
		ivl_t *p = realloc(l->v, ncap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		l->v = p;
		l->cap = ncap;
	}
	l->v[l->n++] = (ivl_t){lo, hi};
	return 0;
}

static int emit_ivl(void *vctx, uint32_t buf, uint64_t off, uint64_t len)
{
	uint64_t base = (uint64_t)buf << 40;
	return ivl_push(vctx, base + (off >> 12), base + ((off + len + 4095) >> 12));
}

static int cmp_ivl(const void *a, const void *b)
{
	const ivl_t *x = a, *y = b;
	return (x->lo > y->lo) - (x->lo < y->lo);
}

/* Sorts and merges in place; returns total pages. */
static uint64_t ivl_norm(ivl_list_t *l)
{
	if (!l->n)
		return 0;
	qsort(l->v, l->n, sizeof(ivl_t), cmp_ivl);
	uint32_t k = 0;
	for (uint32_t i = 1; i < l->n; i++) {
		if (l->v[i].lo <= l->v[k].hi) {
			if (l->v[i].hi > l->v[k].hi)
				l->v[k].hi = l->v[i].hi;
		} else {
			l->v[++k] = l->v[i];
		}
	}
	l->n = k + 1;
	uint64_t s = 0;
	for (uint32_t i = 0; i < l->n; i++)
		s += l->v[i].hi - l->v[i].lo;
	return s;
}

static uint64_t ivl_common(const ivl_list_t *a, const ivl_list_t *b)
{
	uint64_t s = 0;
	uint32_t i = 0, j = 0;
	while (i < a->n && j < b->n) {
		uint64_t lo = a->v[i].lo > b->v[j].lo ? a->v[i].lo : b->v[j].lo;
		uint64_t hi = a->v[i].hi < b->v[j].hi ? a->v[i].hi : b->v[j].hi;
		if (hi > lo)
			s += hi - lo;
		if (a->v[i].hi < b->v[j].hi)
			i++;
		else
			j++;
	}
	return s;
}

/* Adds one workload's per-unit accuracy under set to the counters. */
int gmx_msched__accuracy_add(const gmx_tpl_set_t *set, const gmx_workload_t *w, int wholealloc,
			     uint64_t *touched, uint64_t *predicted, uint64_t *hit, uint64_t *launches)
{
	ivl_list_t tr = {0}, pr = {0};
	int rc = 0;
	for (uint32_t i = 0; i < w->n_ops && !rc; i++) {
		const gmx_op_t *op = &w->ops[i];
		if (op->kind == GMX_OP_SYNC || op->kind == GMX_OP_ALLOC || op->kind == GMX_OP_FREE ||
		    !op->region_count)
			continue;
		tr.n = pr.n = 0;
		for (uint32_t r = 0; r < op->region_count && !rc; r++) {
			const gmx_region_t *g = &w->regions[op->region_first + r];
			rc = emit_ivl(&tr, g->buffer, g->offset, g->length);
		}
		int kind = gmx_msched__predict_op(set, w, op, wholealloc, emit_ivl, &pr);
		if (kind < 0 || rc) {
			rc = rc ? rc : kind;
			break;
		}
		if (op->kind == GMX_OP_KERNEL)
			launches[kind]++;
		*touched += ivl_norm(&tr);
		*predicted += ivl_norm(&pr);
		*hit += ivl_common(&tr, &pr);
	}
	free(tr.v);
	free(pr.v);
	return rc;
}

void gmx_msched__accuracy_pct(uint64_t touched, uint64_t predicted, uint64_t hit, gmx_sim_msched_stats_t *out)
{
	out->false_negative_pct = touched ? 100.0 * (double)(touched - hit) / (double)touched : 0;
	out->false_positive_pct = predicted ? 100.0 * (double)(predicted - hit) / (double)predicted : 0;
}

int gmx_msched_accuracy_many(const gmx_workload_t *const *learn, uint32_t n_learn,
			     const gmx_workload_t *apply, int wholealloc, gmx_sim_msched_stats_t *out)
{
	memset(out, 0, sizeof(*out));
	gmx_tpl_set_t set;
	int rc = gmx_msched_learn_many(learn, n_learn, &set);
	if (rc)
		return rc;
	uint64_t touched = 0, predicted = 0, hit = 0;
	rc = gmx_msched__accuracy_add(&set, apply, wholealloc, &touched, &predicted, &hit, out->launches);
	gmx_tpl_set_free(&set);
	gmx_msched__accuracy_pct(touched, predicted, hit, out);
	out->valid = !rc;
	return rc;
}

int gmx_msched_accuracy(const gmx_workload_t *learn, const gmx_workload_t *apply, int wholealloc,
			gmx_sim_msched_stats_t *out)
{
	return gmx_msched_accuracy_many(&learn, 1, apply, wholealloc, out);
}
