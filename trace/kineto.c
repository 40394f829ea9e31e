/* PyTorch profiler / Kineto Chrome-trace importer.
 *
 * The file is one JSON object whose "traceEvents" array can hold hundreds of
 * thousands of events. Building one jansson tree for all of it costs seconds
 * and hundreds of MB, so the outer object and array are framed here (string
 * and bracket aware, nothing more) and each event is parsed by jansson on its
 * own with json_loadb, straight from the decompression window. jansson still
 * checks every parsed byte; its error positions are mapped back to the file's
 * line and column.
 */
#define _GNU_SOURCE /* memmem */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trace_internal.h"

/* ---- the framing window ------------------------------------------------ */

typedef struct jwin {
	gmx_src_t *s;
	char *d;
	size_t cap, pos, len;
	int eof;
	int err;            /* negative errno once reading failed */
	uint64_t line, col; /* of d[pos], 1-based */
} jwin_t;

/* Reads more input after the unconsumed bytes; grows the window when full. */
static int win_fill(jwin_t *w)
{
	if (w->eof)
		return 0;
	if (w->pos) {
		memmove(w->d, w->d + w->pos, w->len - w->pos);
		w->len -= w->pos;
		w->pos = 0;
	}
	if (w->len == w->cap) {
		size_t nc = w->cap ? w->cap * 2 : (1u << 20);
		char *nd = realloc(w->d, nc);
		if (!nd)
			return -ENOMEM;
		w->d = nd;
		w->cap = nc;
	}
	long r = gmx_src_read(w->s, w->d + w->len, w->cap - w->len);
	if (r < 0)
		return (int)r;
	if (r == 0)
		w->eof = 1;
	w->len += (size_t)r;
	return (int)(r > 0);
}

/* Moves past n bytes, keeping line and column. */
static void win_advance(jwin_t *w, size_t n)
{
	const char *p = w->d + w->pos, *end = p + n;
	for (;;) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		if (!nl)
			break;
		w->line++;
		w->col = 1;
		p = nl + 1;
	}
	w->col += (uint64_t)(end - p);
	w->pos += n;
}

/* Skips whitespace; returns the next byte, -1 at the end, or -2 on a read
 * error (w->err holds it). */
static int win_peek(jwin_t *w)
{
	for (;;) {
		while (w->pos < w->len) {
			char c = w->d[w->pos];
			if (c == ' ' || c == '\t' || c == '\r')
				w->col++, w->pos++;
			else if (c == '\n')
				w->line++, w->col = 1, w->pos++;
			else
				return (unsigned char)c;
		}
		int r = win_fill(w);
		if (r < 0) {
			w->err = r;
			return -2;
		}
		if (r == 0 && w->pos >= w->len)
			return -1;
	}
}

static int win_fail(jwin_t *w, const char *what)
{
	return gmx_src_fail(w->s, "%" PRIu64 ":%" PRIu64 ": %s", w->line, w->col, what);
}

/* Finds the extent of the JSON value at pos (structure only; jansson checks the
 * rest). On success *n is its length in bytes from pos. Strings are skipped
 * with memchr: event bodies are mostly kernel names. */
static int win_frame(jwin_t *w, size_t *n)
{
	size_t i = 0;
	int depth = 0, in_str = 0;
	char c0 = w->d[w->pos];
	int scalar = !(c0 == '{' || c0 == '[' || c0 == '"');
	for (;;) {
		const char *base = w->d + w->pos;
		size_t avail = w->len - w->pos;
		while (i < avail) {
			if (in_str) {
				const char *q = memchr(base + i, '"', avail - i);
				if (!q) {
					i = avail;
					break;
				}
				size_t at = (size_t)(q - base), bs = 0;
				while (at - bs > 0 && base[at - bs - 1] == '\\')
					bs++;
				i = at + 1;
				if (bs % 2)
					continue; /* an escaped quote */
				in_str = 0;
				if (depth == 0) {
					*n = i;
					return 0;
				}
				continue;
			}
			char c = base[i];
			if (scalar) {
				if (c == ',' || c == ']' || c == '}' || c == ' ' || c == '\n' || c == '\t' || c == '\r') {
					*n = i;
					return 0;
				}
				i++;
				continue;
			}
			i++;
			if (c == '"')
				in_str = 1;
			else if (c == '{' || c == '[')
				depth++;
			else if (c == '}' || c == ']') {
				if (--depth == 0) {
					*n = i;
					return 0;
				}
			}
		}
		int r = win_fill(w);
		if (r < 0)
			return r;
		if (r == 0) {
			if (scalar && i) {
				*n = i;
				return 0;
			}
			return gmx_src_fail(w->s, "%" PRIu64 ":%" PRIu64 ": input ends inside the value that starts here "
						  "(file truncated?)",
					    w->line, w->col);
		}
	}
}

/* Parses the framed value with jansson; on error reports the absolute place. */
static json_t *win_parse(jwin_t *w, size_t n, int *rc)
{
	json_error_t e;
	json_t *j = json_loadb(w->d + w->pos, n, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
	if (j)
		return j;
	/* Map the byte position inside the value to the file's line and column. */
	size_t at = e.position > 0 ? (size_t)e.position - 1 : 0;
	if (at > n)
		at = n;
	uint64_t line = w->line, col = w->col;
	for (size_t i = 0; i < at; i++) {
		if (w->d[w->pos + i] == '\n')
			line++, col = 1;
		else
			col++;
	}
	*rc = gmx_src_fail(w->s, "%" PRIu64 ":%" PRIu64 ": invalid JSON: %s", line, col, e.text);
	return NULL;
}

/* ---- what the events say ------------------------------------------------ */

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
	gmx_u64map_t rt_by_corr;   /* correlation -> rt index */
	gmx_u64map_t sync_stream;  /* correlation -> stream + 1 (cuda_sync events) */
	gmx_u64map_t name_by_hash; /* kernel name hash -> name index */
	char device[16];
	uint32_t seq;
} kstate_t;

static uint64_t fnv1a(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

/* Timestamps are clamped to +-2^61 ns (73 years) so that sums and differences
 * of two of them never overflow, whatever a file claims. */
#define TS_LIMIT (INT64_C(1) << 61)

/* Microseconds (integer or real) to nanoseconds, clamped. */
static int64_t us_to_ns(const json_t *v)
{
	if (json_is_integer(v)) {
		json_int_t x = json_integer_value(v);
		if (x > TS_LIMIT / 1000)
			return TS_LIMIT;
		if (x < -TS_LIMIT / 1000)
			return -TS_LIMIT;
		return (int64_t)x * 1000;
	}
	if (json_is_real(v)) {
		double d = json_real_value(v) * 1000.0;
		if (d != d)
			return 0;
		if (d > (double)TS_LIMIT)
			return TS_LIMIT;
		if (d < -(double)TS_LIMIT)
			return -TS_LIMIT;
		return (int64_t)llround(d);
	}
	return 0;
}

static int64_t int_of(const json_t *v, int64_t dflt)
{
	if (json_is_integer(v))
		return (int64_t)json_integer_value(v);
	if (json_is_real(v)) {
		double d = json_real_value(v);
		return (d > -9.2e18 && d < 9.2e18) ? (int64_t)d : dflt;
	}
	if (json_is_string(v)) {
		const char *s = json_string_value(v);
		char *end;
		long long x = strtoll(s, &end, 10);
		if (end != s && *end == 0)
			return x;
		return (int64_t)(fnv1a(s, strlen(s)) >> 1);
	}
	return dflt;
}

static int intern_clean(kstate_t *k, const char *name, uint32_t *idx)
{
	size_t n = strlen(name);
	uint64_t h = fnv1a(name, n);
	uint32_t v;
	/* A 64-bit hash collision between two kernel names is not a practical
	 * concern; confirm anyway so a collision cannot merge names silently. */
	if (gmx_u64map_get(&k->name_by_hash, h, &v) && !strcmp(k->w->names[v], name)) {
		*idx = v;
		return 0;
	}
	int rc = gmx_workload_intern_name(k->w, name, &v);
	if (rc)
		return rc;
	*idx = v;
	return gmx_u64map_put(&k->name_by_hash, h, v);
}

/* Sizes are clamped to +-2^62 bytes so that differences never overflow. */
static int64_t clamp62(int64_t x)
{
	const int64_t lim = INT64_C(1) << 62;
	return x > lim ? lim : x < -lim ? -lim : x;
}

/* "stream 7" (older kineto) or 7. */
static int64_t stream_of(const json_t *args, const json_t *tid)
{
	const json_t *s = json_object_get(args, "stream");
	if (json_is_integer(s))
		return (int64_t)json_integer_value(s);
	if (json_is_string(tid)) {
		const char *t = json_string_value(tid);
		if (!strncmp(t, "stream ", 7))
			return strtoll(t + 7, NULL, 10);
	}
	return int_of(tid, 0);
}

static void dims(const json_t *a, uint32_t out[3])
{
	for (int i = 0; i < 3; i++) {
		const json_t *v = json_array_get(a, (size_t)i);
		int64_t x = json_is_integer(v) ? (int64_t)json_integer_value(v) : 1;
		out[i] = (x >= 0 && x <= UINT32_MAX) ? (uint32_t)x : 1;
	}
}

static int intern(kstate_t *k, const char *name, uint32_t *idx)
{
	char *clean = NULL;
	if (!*name)
		name = "(unnamed)";
	else if (strpbrk(name, "\n\r")) {
		/* A name is one line in the native format. */
		if (!(clean = strdup(name)))
			return -ENOMEM;
		for (char *p = clean; *p; p++)
			if (*p == '\n' || *p == '\r')
				*p = ' ';
		name = clean;
	}
	int rc = intern_clean(k, name, idx);
	free(clean);
	return rc;
}

static uint8_t sync_kind(const char *name)
{
	if (!strcmp(name, "cudaStreamSynchronize") || !strcmp(name, "cuStreamSynchronize"))
		return S_STREAM;
	if (!strcmp(name, "cudaDeviceSynchronize") || !strcmp(name, "cuCtxSynchronize"))
		return S_DEVICE;
	if (!strcmp(name, "cudaEventSynchronize") || !strcmp(name, "cuEventSynchronize"))
		return S_EVENT;
	/* Synchronous copies: cudaMemcpy, cudaMemcpy2D, cuMemcpyDtoH_v2, ... (not *Async). */
	if ((!strncmp(name, "cudaMemcpy", 10) || !strncmp(name, "cuMemcpy", 8)) && !strstr(name, "Async"))
		return S_COPY;
	return S_NONE;
}

static void device_from(kstate_t *k, const json_t *props)
{
	const json_t *first = json_array_get(props, 0);
	const char *n = json_string_value(json_object_get(first, "name"));
	if (!n)
		return;
	static const struct {
		const char *pat, *preset;
	} map[] = {{"V100", "v100"}, {"A100", "a100"}, {"H100", "h100"}, {"H200", "h200"},
		   {"RTX 5080", "rtx5080"}, {"RTX 3080", "rtx3080"}};
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (strstr(n, map[i].pat)) {
			snprintf(k->device, sizeof(k->device), "%s", map[i].preset);
			return;
		}
}

#define PUSH(arr, n, cap)                                                                         \
	do {                                                                                      \
		if (gmx_grow((void **)&(arr), &(cap), (n), sizeof(*(arr))))                           \
			return -ENOMEM;                                                           \
	} while (0)

static int on_event(kstate_t *k, const json_t *ev)
{
	if (!json_is_object(ev))
		return 1; /* caller reports */
	const char *cat = json_string_value(json_object_get(ev, "cat"));
	const char *name = json_string_value(json_object_get(ev, "name"));
	const json_t *args = json_object_get(ev, "args");
	k->seq++;
	if (!cat)
		cat = "";
	if (!name)
		name = "";
	if (!strcmp(cat, "kernel") || !strcmp(cat, "Kernel") || !strcmp(cat, "gpu_memcpy") ||
	    !strcmp(cat, "Memcpy") || !strcmp(cat, "gpu_memset") || !strcmp(cat, "Memset")) {
		PUSH(k->gpu, k->n_gpu, k->cap_gpu);
		gpu_rec_t *g = &k->gpu[k->n_gpu];
		memset(g, 0, sizeof(*g));
		g->ts = us_to_ns(json_object_get(ev, "ts"));
		g->dur = us_to_ns(json_object_get(ev, "dur"));
		if (g->dur < 0)
			g->dur = 0;
		g->stream = stream_of(args, json_object_get(ev, "tid"));
		const json_t *c = json_object_get(args, "correlation");
		g->has_corr = json_is_integer(c);
		g->corr = g->has_corr ? (uint64_t)json_integer_value(c) : 0;
		g->seq = k->seq;
		g->bytes = (uint64_t)int_of(json_object_get(args, "bytes"), 0);
		if (cat[0] == 'k' || cat[0] == 'K') {
			g->kind = G_KERNEL;
			dims(json_object_get(args, "grid"), g->grid);
			dims(json_object_get(args, "block"), g->block);
			int64_t shm = int_of(json_object_get(args, "shared memory"), 0);
			g->shm = (shm >= 0 && shm <= UINT32_MAX) ? (uint32_t)shm : 0;
			int rc = intern(k, name, &g->name);
			if (rc)
				return rc;
		} else if (strstr(cat, "emset")) {
			g->kind = G_MEMSET;
		} else if (strstr(name, "HtoD")) {
			g->kind = G_H2D;
		} else if (strstr(name, "DtoH")) {
			g->kind = G_D2H;
			/* A copy into pageable host memory returns only when done. */
			g->pageable_dst = strstr(name, "-> Pageable") != NULL;
		} else {
			g->kind = G_D2D; /* DtoD, PtoP: device-side only */
		}
		k->n_gpu++;
		return 0;
	}
	if (!strcmp(cat, "cuda_runtime") || !strcmp(cat, "Runtime") || !strcmp(cat, "cuda_driver")) {
		const json_t *c = json_object_get(args, "correlation");
		if (!json_is_integer(c))
			return 0;
		PUSH(k->rt, k->n_rt, k->cap_rt);
		rt_rec_t *r = &k->rt[k->n_rt];
		r->ts = us_to_ns(json_object_get(ev, "ts"));
		r->dur = us_to_ns(json_object_get(ev, "dur"));
		if (r->dur < 0)
			r->dur = 0;
		r->tid = int_of(json_object_get(ev, "tid"), 0);
		r->seq = k->seq;
		r->sync = sync_kind(name);
		int rc = gmx_u64map_put(&k->rt_by_corr, (uint64_t)json_integer_value(c), (uint32_t)k->n_rt);
		if (rc)
			return rc;
		k->n_rt++;
		return 0;
	}
	if (!strcmp(cat, "cuda_sync")) {
		const json_t *c = json_object_get(args, "correlation");
		const json_t *s = json_object_get(args, "stream");
		if (json_is_integer(c) && json_is_integer(s)) {
			int64_t st = (int64_t)json_integer_value(s);
			/* 0xffffffff (-1) means the whole context. */
			uint32_t v = (st < 0 || st >= 0xffffffffll) ? 0 : (uint32_t)(st + 1);
			return gmx_u64map_put(&k->sync_stream, (uint64_t)json_integer_value(c), v);
		}
		return 0;
	}
	if (!strcmp(name, "[memory]")) {
		const json_t *dt = json_object_get(args, "Device Type");
		/* Device Type 1 is CUDA; 0 is host memory, which the GPU never holds. */
		if (!json_is_integer(dt) || json_integer_value(dt) != 1)
			return 0;
		PUSH(k->mem, k->n_mem, k->cap_mem);
		mem_rec_t *m = &k->mem[k->n_mem];
		memset(m, 0, sizeof(*m));
		m->ts = us_to_ns(json_object_get(ev, "ts"));
		m->tid = int_of(json_object_get(ev, "tid"), 0);
		m->bytes = clamp62(int_of(json_object_get(args, "Bytes"), 0));
		const json_t *a = json_object_get(args, "Addr");
		m->has_addr = json_is_integer(a);
		m->addr = m->has_addr ? (uint64_t)json_integer_value(a) : 0;
		const json_t *t = json_object_get(args, "Total Allocated");
		m->has_total = json_is_integer(t);
		m->total = m->has_total ? clamp62((int64_t)json_integer_value(t)) : 0;
		m->seq = k->seq;
		if (m->bytes != 0)
			k->n_mem++;
		return 0;
	}
	/* Only ATen operators delimit the working-set rule's "operator": the
	 * wrappers above them (modules, autograd nodes, optimizer steps) span
	 * many kernels and would lump their buffers together. */
	if ((!strcmp(cat, "cpu_op") || !strcmp(cat, "Operator")) && !strncmp(name, "aten::", 6)) {
		PUSH(k->cpu, k->n_cpu, k->cap_cpu);
		cpu_rec_t *c = &k->cpu[k->n_cpu++];
		c->ts = us_to_ns(json_object_get(ev, "ts"));
		int64_t d = us_to_ns(json_object_get(ev, "dur"));
		c->end = c->ts + (d > 0 ? d : 0);
		c->tid = int_of(json_object_get(ev, "tid"), 0);
		return 0;
	}
	return 0;
}

/* The string value of `key` among the first bytes of an event, or NULL. */
static const char *peek_str(const char *p, size_t lim, const char *key, size_t klen, size_t *vlen)
{
	const char *c = memmem(p, lim, key, klen), *end = p + lim;
	if (!c)
		return NULL;
	const char *q = c + klen;
	while (q < end && (*q == ' ' || *q == ':' || *q == '\n' || *q == '\t' || *q == '\r'))
		q++;
	if (q >= end || *q != '"')
		return NULL;
	const char *e = memchr(q + 1, '"', (size_t)(end - q - 1));
	if (!e)
		return NULL;
	*vlen = (size_t)(e - q - 1);
	return q + 1;
}

static int is_one_of(const char *v, size_t n, const char *const *set)
{
	for (; *set; set++)
		if (strlen(*set) == n && !memcmp(v, *set, n))
			return 1;
	return 0;
}

/* Events that carry nothing the workload needs, recognised from their first
 * bytes so jansson never parses them: flow arrows, Python frames, annotations,
 * and runtime calls that neither launch, copy nor wait for the host. They are
 * a good half of a large trace. Their brackets and strings are still checked
 * by the framing. */
static int skippable(const char *p, size_t n)
{
	static const char *const cats[] = {"ac2g", "async", "python_function", "user_annotation", "flow", NULL};
	static const char *const calls[] = {"cudaEventQuery", "cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags",
					    "cudaOccupancyMaxActiveBlocksPerMultiprocessor", "cudaStreamIsCapturing",
					    "cudaStreamWaitEvent", "cudaEventRecord", "cudaGetDevice", "cudaSetDevice",
					    "cudaGetLastError", "cudaPeekAtLastError", "cudaFuncGetAttributes",
					    "cudaDeviceGetAttribute", "cudaPointerGetAttributes", "cudaFuncSetAttribute",
					    "cudaStreamGetPriority", "cudaEventCreateWithFlags", "cudaEventDestroy", NULL};
	size_t lim = n < 200 ? n : 200, cl, nl;
	const char *cat = peek_str(p, lim, "\"cat\"", 5, &cl);
	if (!cat)
		return 0;
	if (is_one_of(cat, cl, cats))
		return 1;
	if ((cl == 12 && !memcmp(cat, "cuda_runtime", 12)) || (cl == 7 && !memcmp(cat, "Runtime", 7))) {
		const char *name = peek_str(p, lim, "\"name\"", 6, &nl);
		return name && is_one_of(name, nl, calls);
	}
	return 0;
}

static int parse_events(jwin_t *w, kstate_t *k)
{
	/* At '[' */
	win_advance(w, 1);
	int c = win_peek(w);
	if (c == ']') {
		win_advance(w, 1);
		return 0;
	}
	for (;;) {
		if (c < -1)
			return w->err;
		if (c == -1)
			return win_fail(w, "input ends inside \"traceEvents\" (file truncated?)");
		if (c != '{')
			return win_fail(w, "expected an event object in \"traceEvents\"");
		size_t n;
		int rc = win_frame(w, &n);
		if (rc)
			return rc;
		if (!skippable(w->d + w->pos, n)) {
			json_t *ev = win_parse(w, n, &rc);
			if (!ev)
				return rc;
			rc = on_event(k, ev);
			json_decref(ev);
			if (rc < 0)
			{
				if (rc == -ENOMEM)
					gmx_src_fail(w->s, "out of memory reading events");
				return rc;
			}
		}
		win_advance(w, n);
		c = win_peek(w);
		if (c == ',') {
			win_advance(w, 1);
			c = win_peek(w);
			continue;
		}
		if (c == ']') {
			win_advance(w, 1);
			return 0;
		}
		if (c == -1)
			return win_fail(w, "input ends inside \"traceEvents\" (file truncated?)");
		if (c < -1)
			return w->err;
		return win_fail(w, "expected ',' or ']' after an event");
	}
}

static int parse_top(jwin_t *w, kstate_t *k)
{
	int c = win_peek(w);
	if (c < -1)
		return w->err;
	if (c != '{')
		return win_fail(w, "expected a JSON object holding \"traceEvents\"");
	win_advance(w, 1);
	int have_events = 0;
	c = win_peek(w);
	if (c == '}') {
		win_advance(w, 1);
		goto done;
	}
	for (;;) {
		if (c < -1)
			return w->err;
		if (c == -1)
			return win_fail(w, "input ends inside the top-level object (file truncated?)");
		if (c != '"')
			return win_fail(w, "expected a member name");
		size_t n;
		int rc = win_frame(w, &n);
		if (rc)
			return rc;
		int is_events = n == 13 && !memcmp(w->d + w->pos, "\"traceEvents\"", 13);
		int is_props = n == 18 && !memcmp(w->d + w->pos, "\"deviceProperties\"", 18);
		win_advance(w, n);
		c = win_peek(w);
		if (c != ':')
			return c < -1 ? w->err : win_fail(w, "expected ':' after a member name");
		win_advance(w, 1);
		c = win_peek(w);
		if (c < -1)
			return w->err;
		if (c == -1)
			return win_fail(w, "input ends before a member value (file truncated?)");
		if (is_events && c == '[') {
			rc = parse_events(w, k);
			if (rc)
				return rc;
			have_events = 1;
		} else {
			if (is_events)
				return win_fail(w, "\"traceEvents\" is not an array");
			rc = win_frame(w, &n);
			if (rc)
				return rc;
			json_t *v = win_parse(w, n, &rc);
			if (!v)
				return rc;
			if (is_props)
				device_from(k, v);
			json_decref(v);
			win_advance(w, n);
		}
		c = win_peek(w);
		if (c == ',') {
			win_advance(w, 1);
			c = win_peek(w);
			continue;
		}
		if (c == '}') {
			win_advance(w, 1);
			break;
		}
		if (c == -1)
			return win_fail(w, "input ends inside the top-level object (file truncated?)");
		if (c < -1)
			return w->err;
		return win_fail(w, "expected ',' or '}' in the top-level object");
	}
done:
	c = win_peek(w);
	if (c < -1)
		return w->err;
	if (c != -1)
		return win_fail(w, "unexpected data after the JSON object");
	if (!have_events)
		return gmx_src_fail(w->s, "%" PRIu64 ":%" PRIu64
					  ": JSON object has no \"traceEvents\" array: not a PyTorch profiler trace",
				    w->line, w->col);
	return 0;
}

/* ---- building the workload ----------------------------------------------- */

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
	uint32_t seq, idx;
	uint8_t type; /* H_GPU, H_SYNC, H_COPYSYNC, H_MEM */
} hop_t;
enum { H_GPU, H_SYNC, H_COPYSYNC, H_MEM };

static int cmp_hop(const void *a, const void *b)
{
	const hop_t *x = a, *y = b;
	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	return (x->type > y->type) - (x->type < y->type);
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

static int build_workload(kstate_t *k, gmx_trace_info_t *info)
{
	gmx_workload_t *w = k->w;
	build_t b = {.k = k};
	hop_t *h = NULL;
	size_t nh = 0, caph = 0;
	gmx_u64map_t smap = {0};
	uint32_t next_stream = 30001;
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
		h[nh++] = (hop_t){.ts = ts, .seq = seq, .idx = (uint32_t)i, .type = H_GPU};
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
	gmx_sort(h, nh, sizeof(*h), cmp_hop);

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
			default: /* memset, and device-to-device copies (no record of their own) */
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
			if (g->ts + g->dur > last)
				last = g->ts + g->dur;
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

int gmx_trace_kineto_read(gmx_src_t *s, gmx_workload_t *w, gmx_trace_info_t *info)
{
	jwin_t win = {.s = s, .line = 1, .col = 1};
	kstate_t k = {.w = w};
	int rc = parse_top(&win, &k);
	free(win.d);
	win.d = NULL;
	if (!rc && k.n_gpu == 0)
		rc = gmx_src_fail(s, "%" PRIu64 ":%" PRIu64 ": no kernel, copy or memset events in \"traceEvents\": "
				     "nothing to replay (was the trace recorded with CUDA activities?)",
				  win.line, win.col);
	if (!rc) {
		if (k.device[0])
			rc = gmx_workload_set_str(&w->device, k.device);
		if (!rc)
			rc = gmx_workload_set_str(&w->unit, "trace");
		if (!rc)
			rc = build_workload(&k, info);
		if (rc == -ENOMEM)
			gmx_src_fail(s, "out of memory building the workload");
		else if (rc)
			gmx_src_fail(s, "cannot build the workload (%s)", strerror(-rc));
	}
	free(k.gpu);
	free(k.rt);
	free(k.mem);
	free(k.cpu);
	gmx_u64map_free(&k.rt_by_corr);
	gmx_u64map_free(&k.sync_stream);
	gmx_u64map_free(&k.name_by_hash);
	return rc;
}
