/* The Kineto importer's second half: the records read by kineto.c become a workload. Buffers
 * come from the memory events (addresses reused across frees map to one buffer when sizes
 * allow), streams from the kernels' stream ids, and each kernel's regions from the
 * working-set rule (docs/traces.md). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "kineto_internal.h"

/* A buffer's life: the buffer index it uses and when it was live. */
typedef struct life {
	uint32_t buffer;
	int64_t alloc_ts, free_ts; /* INT64_MIN: before the trace; INT64_MAX: never freed */
} life_t;

/* Memory events of one host thread in time order, for the working-set rule. */
typedef struct tmem {
	int64_t ts;
	uint32_t life;
	uint8_t is_alloc;
} tmem_t;

typedef struct hop {
	int64_t ts;
	int64_t gts; /* H_GPU: GPU start, so that one call's several kernels (a graph) keep their order */
	uint32_t seq, idx;
	uint8_t type; /* H_GPU, H_SYNC, H_COPYSYNC, H_MEM, H_RECORD, H_WAIT */
} hop_t;
enum { H_GPU, H_SYNC, H_COPYSYNC, H_MEM, H_RECORD, H_WAIT };

static int cmp_hop(const void *a, const void *b)
{
	const hop_t *x = a, *y = b;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	if (x->type != y->type)
		return x->type < y->type ? -1 : 1;
	if (x->gts != y->gts)
		return x->gts < y->gts ? -1 : 1;
	return (x->idx > y->idx) - (x->idx < y->idx);
}

static int cmp_mem(const void *a, const void *b)
{
	const mem_rec_t *x = a, *y = b;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

static int cmp_cpu(const void *a, const void *b)
{
	const cpu_rec_t *x = a, *y = b;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return (y->end > x->end) - (y->end < x->end); /* longer (outer) first */
}

static int cmp_tmem(const void *a, const void *b)
{
	const tmem_t *x = a, *y = b;
	return (x->ts > y->ts) - (x->ts < y->ts);
}

/* Per host thread: its outermost CPU operators and its memory events. */
typedef struct tinfo {
	int64_t tid;
	cpu_rec_t *ops;
	size_t n_ops;
	tmem_t *mem;
	size_t n_mem, cap_mem;
} tinfo_t;

typedef struct build {
	kstate_t *k;
	life_t *life;
	size_t n_life, cap_life;
	uint32_t *mem_life; /* per mem record: its life */
	tinfo_t *th;
	size_t n_th;
	cpu_rec_t *outer;
	gmx_u64map_t th_by_tid;
	uint64_t peak_total;
} build_t;

/* Limits of the working-set rule (docs/traces.md): how many buffers a kernel
 * lists and how many memory events one lookup scans, so a long operator (an
 * optimizer step with thousands of allocations) cannot make import quadratic. */
#define WS_MAX_BUFFERS 16
#define WS_SCAN 64
#define WS_BACK_OPS 8 /* how far back (c) looks for the operator that made the inputs */

static uint64_t reuse_key(const mem_rec_t *m, uint64_t size)
{
	return m->has_addr ? (m->addr * 0x9e3779b97f4a7c15ull) ^ size : size;
}

static int build_buffers(build_t *b)
{
	kstate_t *k = b->k;
	gmx_workload_t *w = k->w;
	gmx_sort(k->mem, k->n_mem, sizeof(*k->mem), cmp_mem);
	b->mem_life = malloc((k->n_mem + 1) * sizeof(*b->mem_life));
	if (!b->mem_life)
		return -ENOMEM;
	gmx_u64map_t live = {0};  /* addr -> life (traces with addresses) */
	gmx_u64map_t reuse = {0}; /* hash(addr,size) -> buffer freed earlier */
	/* Traces without addresses: pair a free with the latest live allocation of
	 * the same size (the caching allocator hands blocks back that way). */
	gmx_u64map_t by_size = {0}; /* size -> head of a stack of lives, via next[] */
	uint32_t *next = NULL;
	uint32_t *bnext = NULL; /* buffer -> next released buffer under the same reuse key */
	int rc = 0;
	int64_t pre_total = -1;
	uint64_t pre_freed = 0;
	next = malloc((k->n_mem + 1) * sizeof(*next));
	bnext = malloc((k->n_mem + 1) * sizeof(*bnext)); /* at most one buffer per event */
	if (!next || !bnext) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < k->n_mem; i++) {
		mem_rec_t *m = &k->mem[i];
		if (m->has_total) {
			if (pre_total < 0)
				pre_total = m->total - m->bytes; /* held before the first event */
			if ((uint64_t)m->total > b->peak_total)
				b->peak_total = (uint64_t)m->total;
		}
		uint64_t size = m->bytes > 0 ? (uint64_t)m->bytes : (uint64_t)(-(m->bytes + 1)) + 1;
		uint32_t li = UINT32_MAX;
		if (m->bytes > 0) {
			uint32_t buf = UINT32_MAX, old;
			uint64_t key = reuse_key(m, size);
			if (m->has_addr && gmx_u64map_get(&live, m->addr, &old))
				b->life[old].free_ts = m->ts; /* freed without an event */
			/* Hand back a released buffer of the same address and size (or the
			 * same size when addresses are not recorded): the caching allocator
			 * reuses its blocks, and so the buffer count stays near the live set. */
			if (gmx_u64map_get(&reuse, key, &buf)) {
				uint32_t nx = bnext[buf];
				if (nx == UINT32_MAX)
					gmx_u64map_del(&reuse, key);
				else if ((rc = gmx_u64map_put(&reuse, key, nx)))
					goto out;
			} else
				buf = UINT32_MAX;
			if (buf == UINT32_MAX) {
				rc = gmx_workload_add_buffer(w, m->has_addr ? m->addr : 0, size, NULL, &buf);
				if (rc)
					goto out;
			}
			if ((rc = gmx_grow((void **)&b->life, &b->cap_life, b->n_life, sizeof(*b->life))))
				goto out;
			li = (uint32_t)b->n_life++;
			b->life[li] = (life_t){.buffer = buf, .alloc_ts = m->ts, .free_ts = INT64_MAX};
			if (m->has_addr) {
				if ((rc = gmx_u64map_put(&live, m->addr, li)))
					goto out;
			} else {
				uint32_t head = UINT32_MAX;
				gmx_u64map_get(&by_size, size, &head);
				next[li] = head;
				if ((rc = gmx_u64map_put(&by_size, size, li)))
					goto out;
			}
		} else {
			uint32_t found = UINT32_MAX;
			if (m->has_addr) {
				if (gmx_u64map_get(&live, m->addr, &found)) {
					gmx_u64map_del(&live, m->addr);
					if (w->buffers[b->life[found].buffer].size != size)
						found = UINT32_MAX; /* size disagrees: treat as unknown */
				}
			} else {
				/* lives are created in order, so next[] only holds indices < n_life */
				if (gmx_u64map_get(&by_size, size, &found) && found != UINT32_MAX) {
					uint32_t nx = next[found];
					if (nx == UINT32_MAX)
						gmx_u64map_del(&by_size, size);
					else if ((rc = gmx_u64map_put(&by_size, size, nx)))
						goto out;
				} else
					found = UINT32_MAX;
			}
			if (found == UINT32_MAX) {
				/* Allocated before the recording began: live from the start. */
				uint32_t buf;
				rc = gmx_workload_add_buffer(w, m->has_addr ? m->addr : 0, size, "pre-existing", &buf);
				if (rc)
					goto out;
				if ((rc = gmx_grow((void **)&b->life, &b->cap_life, b->n_life, sizeof(*b->life))))
					goto out;
				found = (uint32_t)b->n_life++;
				b->life[found] = (life_t){.buffer = buf, .alloc_ts = INT64_MIN, .free_ts = m->ts};
				pre_freed += size;
			} else {
				b->life[found].free_ts = m->ts;
			}
			li = found;
			uint32_t fb = b->life[found].buffer, head = UINT32_MAX;
			uint64_t key = reuse_key(m, w->buffers[fb].size);
			gmx_u64map_get(&reuse, key, &head);
			bnext[fb] = head;
			if ((rc = gmx_u64map_put(&reuse, key, fb)))
				goto out;
		}
		b->mem_life[i] = li;
	}
	/* Memory held before the trace and never freed in it (parameters, optimizer
	 * state): one buffer, live throughout, so footprints and peaks are right. */
	if (pre_total > 0 && (uint64_t)pre_total > pre_freed) {
		uint64_t top = 0x200000000ull;
		for (uint32_t i = 0; i < w->n_buffers; i++)
			if (w->buffers[i].addr + w->buffers[i].size > top)
				top = w->buffers[i].addr + w->buffers[i].size;
		top = (top + (2ull << 20) - 1) & ~((2ull << 20) - 1);
		uint32_t buf;
		rc = gmx_workload_add_buffer(w, top, (uint64_t)pre_total - pre_freed,
					     "held-before-trace", &buf);
	}
out:
	free(next);
	free(bnext);
	gmx_u64map_free(&live);
	gmx_u64map_free(&reuse);
	gmx_u64map_free(&by_size);
	return rc;
}

static tinfo_t *thread_of(build_t *b, int64_t tid)
{
	uint32_t v;
	if (gmx_u64map_get(&b->th_by_tid, (uint64_t)tid, &v))
		return &b->th[v];
	return NULL;
}

static int build_threads(build_t *b)
{
	kstate_t *k = b->k;
	gmx_sort(k->cpu, k->n_cpu, sizeof(*k->cpu), cmp_cpu);
	/* Outermost operators per thread: an op starting inside the previous outer
	 * op's span is nested in it. */
	b->outer = malloc((k->n_cpu + 1) * sizeof(*b->outer));
	b->th = calloc(k->n_cpu + k->n_mem + 1, sizeof(*b->th));
	if (!b->outer || !b->th)
		return -ENOMEM;
	size_t no = 0;
	for (size_t i = 0; i < k->n_cpu; i++) {
		cpu_rec_t *c = &k->cpu[i];
		if (no && b->outer[no - 1].tid == c->tid && c->ts < b->outer[no - 1].end)
			continue;
		b->outer[no++] = *c;
	}
	int rc;
	for (size_t i = 0; i < no; i++) {
		uint32_t v;
		if (!gmx_u64map_get(&b->th_by_tid, (uint64_t)b->outer[i].tid, &v)) {
			v = (uint32_t)b->n_th++;
			b->th[v].tid = b->outer[i].tid;
			b->th[v].ops = &b->outer[i];
			if ((rc = gmx_u64map_put(&b->th_by_tid, (uint64_t)b->outer[i].tid, v)))
				return rc;
		}
		b->th[v].n_ops++;
	}
	for (size_t i = 0; i < k->n_mem; i++) {
		uint32_t v;
		if (!gmx_u64map_get(&b->th_by_tid, (uint64_t)k->mem[i].tid, &v)) {
			v = (uint32_t)b->n_th++;
			b->th[v].tid = k->mem[i].tid;
			if ((rc = gmx_u64map_put(&b->th_by_tid, (uint64_t)k->mem[i].tid, v)))
				return rc;
		}
		tinfo_t *t = &b->th[v];
		if (gmx_grow((void **)&t->mem, &t->cap_mem, t->n_mem, sizeof(*t->mem)))
			return -ENOMEM;
		t->mem[t->n_mem++] = (tmem_t){.ts = k->mem[i].ts, .life = b->mem_life[i],
					      .is_alloc = k->mem[i].bytes > 0};
	}
	for (size_t i = 0; i < b->n_th; i++)
		gmx_sort(b->th[i].mem, b->th[i].n_mem, sizeof(tmem_t), cmp_tmem); /* already sorted: cheap */
	return 0;
}

/* First index in t->mem with ts >= x. */
static size_t mem_lower(const tinfo_t *t, int64_t x)
{
	size_t lo = 0, hi = t->n_mem;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->mem[mid].ts < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Index of the outer op containing x, or SIZE_MAX. */
static size_t op_at(const tinfo_t *t, int64_t x)
{
	size_t lo = 0, hi = t->n_ops;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->ops[mid].ts <= x)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || t->ops[lo - 1].end < x)
		return SIZE_MAX;
	return lo - 1;
}

static int ws_add(build_t *b, uint32_t *got, uint32_t *n, uint32_t life)
{
	uint32_t buf = b->life[life].buffer;
	for (uint32_t i = 0; i < *n; i++)
		if (got[i] == buf)
			return 0;
	got[(*n)++] = buf;
	return gmx_workload_add_region(b->k->w, buf, 0, b->k->w->buffers[buf].size);
}

static int live_at(const life_t *l, int64_t t)
{
	return l->alloc_ts <= t && l->free_ts > t;
}

/* The working-set rule (docs/traces.md): inputs made by the previous operator,
 * inputs this operator releases after the launch, outputs and workspaces it
 * made before the launch. */
static int working_set(build_t *b, int64_t tid, int64_t t)
{
	tinfo_t *th = thread_of(b, tid);
	if (!th || !th->n_ops || !th->n_mem)
		return 0;
	size_t oi = op_at(th, t);
	if (oi == SIZE_MAX)
		return 0;
	const cpu_rec_t *op = &th->ops[oi];
	uint32_t got[WS_MAX_BUFFERS], n = 0;
	int rc;
	/* (c) inputs: what the latest earlier operator that allocated anything
	 * (views and in-place ops allocate nothing) made and is still live */
	for (size_t back = 1; back <= WS_BACK_OPS && back <= oi && n == 0; back++) {
		const cpu_rec_t *prev = &th->ops[oi - back];
		size_t hi = mem_lower(th, prev->end + 1), lo = mem_lower(th, prev->ts);
		for (size_t i = hi, s = 0; i > lo && s < WS_SCAN && n < WS_MAX_BUFFERS / 2; i--, s++) {
			const tmem_t *m = &th->mem[i - 1];
			if (m->is_alloc && live_at(&b->life[m->life], t) && (rc = ws_add(b, got, &n, m->life)))
				return rc;
		}
	}
	/* (b) released by this operator after the launch: it consumed them */
	size_t from = mem_lower(th, t + 1);
	for (size_t i = from, s = 0; i < th->n_mem && th->mem[i].ts <= op->end && s < WS_SCAN && n < WS_MAX_BUFFERS;
	     i++, s++) {
		const tmem_t *m = &th->mem[i];
		if (!m->is_alloc && live_at(&b->life[m->life], t) && (rc = ws_add(b, got, &n, m->life)))
			return rc;
	}
	/* (a) allocated by this operator before the launch and still live */
	size_t hi = mem_lower(th, t + 1), lo = mem_lower(th, op->ts);
	for (size_t i = hi, s = 0; i > lo && s < WS_SCAN && n < WS_MAX_BUFFERS; i--, s++) {
		const tmem_t *m = &th->mem[i - 1];
		if (m->is_alloc && live_at(&b->life[m->life], t) && (rc = ws_add(b, got, &n, m->life)))
			return rc;
	}
	return 0;
}

/* Maps a recorded stream id to the format's 0..32767. */
static int16_t stream_index(gmx_u64map_t *m, int64_t raw, uint32_t *next_free)
{
	if (raw >= 0 && raw <= 30000)
		return (int16_t)raw;
	uint32_t v;
	if (gmx_u64map_get(m, (uint64_t)raw, &v))
		return (int16_t)v;
	v = (*next_free)++;
	if (v > 32767)
		v = 32767;
	gmx_u64map_put(m, (uint64_t)raw, v);
	return (int16_t)v;
}

int gmx__kineto_build(kstate_t *k, gmx_trace_info_t *info)
{
	gmx_workload_t *w = k->w;
	build_t b = {.k = k};
	hop_t *h = NULL;
	size_t nh = 0, caph = 0;
	gmx_u64map_t smap = {0};
	uint32_t next_stream = 30001;
	int32_t *dep_of = NULL;
	uint8_t *done = NULL; /* per GPU record: 2 an event source, |1 once its op is written */
	int rc = build_buffers(&b);
	if (!rc)
		rc = build_threads(&b);
	if (rc)
		goto out;
	/* Host operations in the order the host issued them. */
	for (size_t i = 0; i < k->n_gpu; i++) {
		gpu_rec_t *g = &k->gpu[i];
		uint32_t r;
		int64_t ts = g->ts;
		uint32_t seq = g->seq;
		int joined = g->has_corr && gmx_u64map_get(&k->rt_by_corr, g->corr, &r);
		if (joined)
			ts = k->rt[r].ts, seq = k->rt[r].seq;
		if ((rc = gmx_grow((void **)&h, &caph, nh + 1, sizeof(*h))))
			goto out;
		h[nh++] = (hop_t){.ts = ts, .gts = g->ts, .seq = seq, .idx = (uint32_t)i, .type = H_GPU};
		if (g->kind == G_D2H && (g->pageable_dst || (joined && k->rt[r].sync == S_COPY)))
			h[nh++] = (hop_t){.ts = ts, .seq = seq, .idx = (uint32_t)i, .type = H_COPYSYNC};
	}
	for (size_t i = 0; i < k->n_rt; i++) {
		uint8_t s = k->rt[i].sync;
		if (s != S_STREAM && s != S_DEVICE && s != S_EVENT)
			continue;
		if ((rc = gmx_grow((void **)&h, &caph, nh, sizeof(*h))))
			goto out;
		h[nh++] = (hop_t){.ts = k->rt[i].ts, .seq = k->rt[i].seq, .idx = (uint32_t)i, .type = H_SYNC};
	}
	for (size_t i = 0; i < k->n_mem; i++) {
		if ((rc = gmx_grow((void **)&h, &caph, nh, sizeof(*h))))
			goto out;
		h[nh++] = (hop_t){.ts = k->mem[i].ts, .seq = k->mem[i].seq, .idx = (uint32_t)i, .type = H_MEM};
	}
	/* Waits the trace describes: the record at its cudaEventRecord call, the wait at its
	 * cudaStreamWaitEvent call (each at the sync record's own time when the call is missing). */
	for (size_t i = 0; i < k->n_waits; i++) {
		const wait_rec_t *x = &k->waits[i];
		uint32_t r;
		int64_t ts = x->ts;
		uint32_t seq = x->seq;
		if (gmx_u64map_get(&k->rt_by_corr, x->rec_corr, &r))
			ts = k->rt[r].ts, seq = k->rt[r].seq;
		if ((rc = gmx_grow((void **)&h, &caph, nh + 1, sizeof(*h))))
			goto out;
		h[nh++] = (hop_t){.ts = ts, .seq = seq, .idx = (uint32_t)i, .type = H_RECORD};
		ts = x->ts, seq = x->seq;
		if (gmx_u64map_get(&k->rt_by_corr, x->corr, &r))
			ts = k->rt[r].ts, seq = k->rt[r].seq;
		h[nh++] = (hop_t){.ts = ts, .seq = seq, .idx = (uint32_t)i, .type = H_WAIT};
	}
	gmx_sort(h, nh, sizeof(*h), cmp_hop);
	/* Waits the trace only shows (kineto_deps.c), when it describes none: event n_waits + j
	 * is recorded right after GPU record j and waited for right before each record held by it. */
	if (!k->n_waits && (rc = gmx__kineto_deps(k, &dep_of)))
		goto out;
	done = calloc(k->n_gpu + 1, 1);
	if (!done) {
		rc = -ENOMEM;
		goto out;
	}
	if (dep_of)
		for (size_t i = 0; i < k->n_gpu; i++)
			if (dep_of[i] >= 0)
				done[dep_of[i]] = 2; /* a source: record an event after it */

	/* Corr -> sync stream needs the reverse map rt index -> correlation. */
	uint64_t *rt_corr = calloc(k->n_rt + 1, sizeof(*rt_corr));
	if (!rt_corr) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < b.k->rt_by_corr.cap; i++)
		if (k->rt_by_corr.used[i] == 1)
			rt_corr[k->rt_by_corr.vals[i]] = k->rt_by_corr.keys[i];

	size_t nk = 0;
	for (size_t i = 0; i < k->n_gpu; i++)
		nk += k->gpu[i].kind == G_KERNEL;
	if (info) {
		info->n_kernels = (uint32_t)nk;
		info->launch_ns = malloc((nk + 1) * sizeof(uint64_t));
		info->start_ns = malloc((nk + 1) * sizeof(uint64_t));
		info->end_ns = malloc((nk + 1) * sizeof(uint64_t));
		info->stream = malloc((nk + 1) * sizeof(int16_t));
		if (!info->launch_ns || !info->start_ns || !info->end_ns || !info->stream) {
			free(rt_corr);
			rc = -ENOMEM;
			goto out;
		}
		info->has_timeline = 1;
	}
	int64_t t0 = nh ? h[0].ts : 0, cursor = t0, last = t0;
	size_t ki = 0;
	gmx_u64map_t last_stream = {0}; /* tid -> stream of its last GPU op + 1 */
	for (size_t i = 0; i < nh && !rc; i++) {
		hop_t *x = &h[i];
		gmx_op_t op;
		memset(&op, 0, sizeof(op));
		op.klass = GMX_CLASS_UNKNOWN;
		op.buffer = UINT32_MAX;
		op.think_ns = x->ts > cursor ? (uint64_t)(x->ts - cursor) : 0;
		int64_t issued = x->ts > cursor ? x->ts : cursor;
		if (x->type == H_GPU || x->type == H_COPYSYNC) {
			gpu_rec_t *g = &k->gpu[x->idx];
			int16_t s = stream_index(&smap, g->stream, &next_stream);
			if (x->type == H_COPYSYNC) {
				op.kind = GMX_OP_SYNC;
				op.stream = s;
				op.think_ns = 0;
				rc = gmx_workload_add_op(w, &op, NULL);
				/* The host resumes when its copy call returned (else when the
				 * copy landed). */
				uint32_t r;
				int64_t back = g->ts + g->dur;
				if (g->has_corr && gmx_u64map_get(&k->rt_by_corr, g->corr, &r))
					back = k->rt[r].ts + k->rt[r].dur;
				cursor = back > issued ? back : issued;
				if (cursor > last)
					last = cursor;
				continue;
			}
			if (dep_of && dep_of[x->idx] >= 0 && (done[dep_of[x->idx]] & 1)) {
				gmx_op_t wt = {.kind = GMX_OP_WAIT, .stream = s, .think_ns = op.think_ns,
					       .event = (uint32_t)(k->n_waits + (size_t)dep_of[x->idx]),
					       .buffer = UINT32_MAX, .klass = GMX_CLASS_UNKNOWN};
				if ((rc = gmx_workload_add_op(w, &wt, NULL)))
					break;
				op.think_ns = 0;
			}
			op.stream = s;
			op.duration_ns = (uint64_t)g->dur;
			op.bytes = g->bytes ? g->bytes : 1; /* the format needs a size; 1 when unrecorded */
			uint32_t r;
			int64_t tid = 0;
			int joined = g->has_corr && gmx_u64map_get(&k->rt_by_corr, g->corr, &r);
			if (joined) {
				tid = k->rt[r].tid;
				gmx_u64map_put(&last_stream, (uint64_t)tid, (uint32_t)s + 1);
			}
			switch (g->kind) {
			case G_KERNEL:
				op.kind = GMX_OP_KERNEL;
				op.name = g->name;
				memcpy(op.grid, g->grid, sizeof(op.grid));
				memcpy(op.block, g->block, sizeof(op.block));
				op.shared_mem = g->shm;
				break;
			case G_H2D:
				op.kind = GMX_OP_COPY_H2D;
				break;
			case G_D2H:
				op.kind = GMX_OP_COPY_D2H;
				break;
			case G_D2D:
				op.kind = GMX_OP_COPY_D2D;
				break;
			default:
				op.kind = GMX_OP_MEMSET;
				break;
			}
			if ((rc = gmx_workload_add_op(w, &op, NULL)))
				break;
			if (g->kind == G_KERNEL) {
				if (joined && (rc = working_set(&b, tid, x->ts)))
					break;
				if (info) {
					info->launch_ns[ki] = (uint64_t)(x->ts - t0 > 0 ? x->ts - t0 : 0);
					info->start_ns[ki] = (uint64_t)(g->ts - t0 > 0 ? g->ts - t0 : 0);
					info->end_ns[ki] = info->start_ns[ki] + (uint64_t)g->dur;
					info->stream[ki] = s;
				}
				ki++;
			}
			if (done[x->idx] & 2) {
				gmx_op_t rec = {.kind = GMX_OP_RECORD, .stream = s, .event = (uint32_t)(k->n_waits + x->idx),
						.buffer = UINT32_MAX, .klass = GMX_CLASS_UNKNOWN};
				if ((rc = gmx_workload_add_op(w, &rec, NULL)))
					break;
			}
			done[x->idx] |= 1;
			if (g->ts + g->dur > last)
				last = g->ts + g->dur;
			cursor = issued;
		} else if (x->type == H_RECORD || x->type == H_WAIT) {
			const wait_rec_t *wr = &k->waits[x->idx];
			op.kind = x->type == H_RECORD ? GMX_OP_RECORD : GMX_OP_WAIT;
			op.stream = stream_index(&smap, x->type == H_RECORD ? wr->on_stream : wr->stream, &next_stream);
			op.event = x->idx;
			if ((rc = gmx_workload_add_op(w, &op, NULL)))
				break;
			cursor = issued;
		} else if (x->type == H_SYNC) {
			rt_rec_t *r = &k->rt[x->idx];
			op.kind = GMX_OP_SYNC;
			op.stream = -1;
			uint32_t v;
			if (r->sync == S_STREAM) {
				if (gmx_u64map_get(&k->sync_stream, rt_corr[x->idx], &v))
					op.stream = v ? stream_index(&smap, (int64_t)v - 1, &next_stream) : -1;
				else if (gmx_u64map_get(&last_stream, (uint64_t)r->tid, &v))
					op.stream = (int16_t)(v - 1);
			}
			if ((rc = gmx_workload_add_op(w, &op, NULL)))
				break;
			/* Closed loop: the next think counts from when the host woke up. */
			cursor = r->ts + r->dur > issued ? r->ts + r->dur : issued;
			if (cursor > last)
				last = cursor;
		} else {
			mem_rec_t *m = &k->mem[x->idx];
			uint32_t li = b.mem_life[x->idx];
			op.kind = m->bytes > 0 ? GMX_OP_ALLOC : GMX_OP_FREE;
			op.stream = 0;
			op.buffer = b.life[li].buffer;
			op.bytes = w->buffers[op.buffer].size;
			if ((rc = gmx_workload_add_op(w, &op, NULL)))
				break;
			cursor = issued;
		}
		if (issued > last)
			last = issued;
	}
	gmx_u64map_free(&last_stream);
	free(rt_corr);
	if (!rc && info) {
		info->span_ns = (uint64_t)(last - t0);
		info->memory_events = k->n_mem;
		info->peak_allocated_bytes = b.peak_total;
	}
out:
	free(h);
	free(dep_of);
	free(done);
	gmx_u64map_free(&smap);
	free(b.life);
	free(b.mem_life);
	if (b.th)
		for (size_t i = 0; i < b.n_th; i++)
			free(b.th[i].mem);
	free(b.th);
	free(b.outer);
	gmx_u64map_free(&b.th_by_tid);
	return rc;
}

