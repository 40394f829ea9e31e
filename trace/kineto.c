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

#include "kineto_internal.h"

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
		const json_t *on = json_object_get(args, "wait_on_stream");
		const json_t *rc = json_object_get(args, "wait_on_cuda_event_record_corr_id");
		if (!strcmp(name, "Stream Wait Event")) {
			if (!json_is_integer(c) || !json_is_integer(s) || !json_is_integer(on) || !json_is_integer(rc))
				return 0;
			PUSH(k->waits, k->n_waits, k->cap_waits);
			k->waits[k->n_waits++] = (wait_rec_t){.ts = us_to_ns(json_object_get(ev, "ts")),
							      .stream = (int64_t)json_integer_value(s),
							      .on_stream = (int64_t)json_integer_value(on),
							      .corr = (uint64_t)json_integer_value(c),
							      .rec_corr = (uint64_t)json_integer_value(rc),
							      .seq = k->seq};
			return 0;
		}
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
					    "cudaGetDevice", "cudaSetDevice",
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
			rc = gmx__kineto_build(&k, info);
		if (rc == -ENOMEM)
			gmx_src_fail(s, "out of memory building the workload");
		else if (rc)
			gmx_src_fail(s, "cannot build the workload (%s)", strerror(-rc));
	}
	free(k.gpu);
	free(k.rt);
	free(k.mem);
	free(k.cpu);
	free(k.waits);
	gmx_u64map_free(&k.rt_by_corr);
	gmx_u64map_free(&k.sync_stream);
	gmx_u64map_free(&k.name_by_hash);
	return rc;
}
