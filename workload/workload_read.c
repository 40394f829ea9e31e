/* Reader of the native workload format (docs/workload-format.md; the writer
 * is workload_write.c).
 *
 * The reader is strict: any line it cannot take exactly as specified stops
 * the read with one "PATH:LINE: what was expected" message and no workload.
 * It is a single pass over the file with amortised O(1) appends, so its cost
 * is linear in the file size (traces run to millions of lines). */
#include "gpumux/workload_io.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GMX_DEFAULT_FIRST_ADDR 0x200000000ull /* docs/workload-format.md: first default address */
#define GMX_DEFAULT_ADDR_ALIGN (2ull << 20)  /* default addresses follow on 2 MiB chunks */
#define GMX_STREAM_MAX 32767                 /* streams fit the op's int16_t */

struct reader {
	const char *label;
	unsigned long line;
	char *err;
	size_t err_len;
	gmx_workload_t *w;
	int have_header;
	int have_name, have_device, have_unit;
	unsigned long end_line; /* the line of the 'end' record; 0 before it */
};

static int fail(struct reader *r, const char *fmt, ...)
{
	char what[768];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (r->err && r->err_len)
		snprintf(r->err, r->err_len, "%s:%lu: %s", r->label, r->line, what);
	return -EINVAL;
}

/* Parses an unsigned decimal or 0x-hex number spanning exactly [s, s+len).
 * Returns 0, -ERANGE (overflow) or -EINVAL (not a number). Stricter than
 * strtoull: no sign, no spaces, no trailing characters. */
static int parse_u64(const char *s, size_t len, uint64_t *out)
{
	uint64_t v = 0;
	if (len == 0)
		return -EINVAL;
	if (len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		for (size_t i = 2; i < len; i++) {
			unsigned d;
			char c = s[i];
			if (c >= '0' && c <= '9')
				d = (unsigned)(c - '0');
			else if (c >= 'a' && c <= 'f')
				d = (unsigned)(c - 'a' + 10);
			else if (c >= 'A' && c <= 'F')
				d = (unsigned)(c - 'A' + 10);
			else
				return -EINVAL;
			if (v >> 60)
				return -ERANGE;
			v = (v << 4) | d;
		}
	} else {
		for (size_t i = 0; i < len; i++) {
			char c = s[i];
			if (c < '0' || c > '9')
				return -EINVAL;
			unsigned d = (unsigned)(c - '0');
			if (v > (UINT64_MAX - d) / 10)
				return -ERANGE;
			v = v * 10 + d;
		}
	}
	*out = v;
	return 0;
}

/* A key=value field of a record line. */
struct field {
	const char *key;
	size_t key_len;
	const char *val;
	size_t val_len;
};

#define MAX_FIELDS 16

static int key_is(const struct field *f, const char *key)
{
	return strlen(key) == f->key_len && memcmp(f->key, key, f->key_len) == 0;
}

/* Reads a number field; `what` names it in the message. */
static int num(struct reader *r, const char *kw, const struct field *f, uint64_t max, uint64_t *out)
{
	int rc = parse_u64(f->val, f->val_len, out);
	if (rc == -EINVAL && f->val_len && f->val[0] == '-')
		return fail(r, "%s: %.*s must not be negative, got '%.*s'", kw, (int)f->key_len, f->key,
			    (int)f->val_len, f->val);
	if (rc == -EINVAL)
		return fail(r, "%s: bad number '%.*s' for %.*s (expected decimal or 0x hexadecimal)", kw,
			    (int)f->val_len, f->val, (int)f->key_len, f->key);
	if (rc == -ERANGE || *out > max)
		return fail(r, "%s: %.*s=%.*s is out of range (at most %llu)", kw, (int)f->key_len, f->key,
			    (int)f->val_len, f->val, (unsigned long long)max);
	return 0;
}

/* A positive size. */
static int size_num(struct reader *r, const char *kw, const struct field *f, uint64_t *out)
{
	int rc = num(r, kw, f, UINT64_MAX, out);
	if (rc)
		return rc;
	if (*out == 0)
		return fail(r, "%s: %.*s must be greater than 0", kw, (int)f->key_len, f->key);
	return 0;
}

/* Splits the fields after the keyword; rejects unknown and repeated keys. */
static int split_fields(struct reader *r, const char *kw, char *p, const char *const *keys,
			struct field *fields, int *n_fields)
{
	int n = 0;
	unsigned seen = 0;
	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (!*p)
			break;
		char *start = p;
		while (*p && *p != ' ' && *p != '\t')
			p++;
		char *eq = memchr(start, '=', (size_t)(p - start));
		if (!eq || eq == start)
			return fail(r, "%s: expected key=value, got '%.*s'", kw, (int)(p - start), start);
		struct field f = {start, (size_t)(eq - start), eq + 1, (size_t)(p - eq - 1)};
		int k = -1;
		for (int i = 0; keys[i]; i++)
			if (key_is(&f, keys[i])) {
				k = i;
				break;
			}
		if (k < 0) {
			char expected[256] = "";
			size_t used = 0;
			for (int i = 0; keys[i]; i++)
				used += (size_t)snprintf(expected + used, sizeof(expected) - used, "%s%s",
							 i ? ", " : "", keys[i]);
			return fail(r, "%s: unknown key '%.*s' (expected %s)", kw, (int)f.key_len, f.key, expected);
		}
		if (seen & (1u << k))
			return fail(r, "%s: key '%s' given twice", kw, keys[k]);
		seen |= 1u << k;
		if (f.val_len == 0)
			return fail(r, "%s: key '%s' has no value", kw, keys[k]);
		fields[n++] = f;
	}
	*n_fields = n;
	return 0;
}

static const struct field *find(const struct field *fields, int n, const char *key)
{
	for (int i = 0; i < n; i++)
		if (key_is(&fields[i], key))
			return &fields[i];
	return NULL;
}

static int need(struct reader *r, const char *kw, const struct field *fields, int n, const char *key,
		const struct field **out)
{
	*out = find(fields, n, key);
	if (!*out)
		return fail(r, "%s: missing key '%s'", kw, key);
	return 0;
}

/* Parses "X,Y,Z" into three 32-bit numbers. */
static int triple(struct reader *r, const char *kw, const struct field *f, uint32_t out[3])
{
	const char *s = f->val, *end = f->val + f->val_len;
	for (int i = 0; i < 3; i++) {
		const char *c = memchr(s, ',', (size_t)(end - s));
		const char *e = (i < 2) ? c : end;
		if (!e || (i == 2 && c))
			return fail(r, "%s: %.*s must be three numbers X,Y,Z, got '%.*s'", kw, (int)f->key_len,
				    f->key, (int)f->val_len, f->val);
		uint64_t v;
		int rc = parse_u64(s, (size_t)(e - s), &v);
		if (rc || v > UINT32_MAX)
			return fail(r, "%s: %.*s must be three numbers X,Y,Z below 2^32, got '%.*s'", kw,
				    (int)f->key_len, f->key, (int)f->val_len, f->val);
		out[i] = (uint32_t)v;
		s = e + 1;
	}
	return 0;
}

static int think_dur(struct reader *r, const char *kw, const struct field *fields, int n, gmx_op_t *op)
{
	const struct field *f = find(fields, n, "think");
	if (f && num(r, kw, f, UINT64_MAX, &op->think_ns))
		return -EINVAL;
	f = find(fields, n, "dur");
	if (f && num(r, kw, f, UINT64_MAX, &op->duration_ns))
		return -EINVAL;
	return 0;
}

static int stream_field(struct reader *r, const char *kw, const struct field *fields, int n, int allow_all,
			gmx_op_t *op)
{
	const struct field *f;
	if (need(r, kw, fields, n, "s", &f))
		return -EINVAL;
	if (allow_all && f->val_len == 3 && memcmp(f->val, "all", 3) == 0) {
		op->stream = -1;
		return 0;
	}
	uint64_t v;
	if (num(r, kw, f, GMX_STREAM_MAX, &v))
		return -EINVAL;
	op->stream = (int16_t)v;
	return 0;
}

static int buf_field(struct reader *r, const char *kw, const struct field *f, uint32_t *out)
{
	uint64_t v;
	if (num(r, kw, f, UINT32_MAX, &v))
		return -EINVAL;
	if (v >= r->w->n_buffers)
		return fail(r, "%s: buffer %llu is not defined (%u buffers so far)", kw, (unsigned long long)v,
			    r->w->n_buffers);
	*out = (uint32_t)v;
	return 0;
}

static int oom(struct reader *r)
{
	fail(r, "out of memory");
	return -ENOMEM;
}

/* Rest-of-line string fields: name, device, unit. */
static int rest_string(struct reader *r, const char *kw, char *rest, char **field, int *seen)
{
	while (*rest == ' ' || *rest == '\t')
		rest++;
	size_t len = strlen(rest);
	while (len && (rest[len - 1] == ' ' || rest[len - 1] == '\t'))
		rest[--len] = '\0';
	if (!len)
		return fail(r, "%s: expected a value after '%s'", kw, kw);
	if (*seen)
		return fail(r, "%s given twice", kw);
	*seen = 1;
	if (gmx_workload_set_str(field, rest))
		return oom(r);
	return 0;
}

static int rec_buffer(struct reader *r, char *rest)
{
	static const char *const keys[] = {"id", "size", "addr", "name", NULL};
	struct field fs[MAX_FIELDS];
	int n;
	const struct field *f;
	gmx_workload_t *w = r->w;
	if (split_fields(r, "buffer", rest, keys, fs, &n))
		return -EINVAL;
	uint64_t id, size, addr = 0;
	if (need(r, "buffer", fs, n, "id", &f) || num(r, "buffer", f, UINT32_MAX - 1, &id))
		return -EINVAL;
	if (id != w->n_buffers)
		return fail(r, "buffer: id %llu out of order (expected id=%u)", (unsigned long long)id, w->n_buffers);
	if (need(r, "buffer", fs, n, "size", &f) || size_num(r, "buffer", f, &size))
		return -EINVAL;
	if ((f = find(fs, n, "addr"))) {
		if (num(r, "buffer", f, UINT64_MAX, &addr))
			return -EINVAL;
		if (addr == 0)
			return fail(r, "buffer: addr must not be 0 (omit it for the default address)");
	} else {
		addr = GMX_DEFAULT_FIRST_ADDR;
		if (w->n_buffers) {
			const gmx_buffer_t *last = &w->buffers[w->n_buffers - 1];
			uint64_t end = last->addr + last->size;
			if (end > UINT64_MAX - GMX_DEFAULT_ADDR_ALIGN)
				return fail(r, "buffer: no default address after buffer %u; give addr=", w->n_buffers - 1);
			addr = (end + GMX_DEFAULT_ADDR_ALIGN - 1) & ~(GMX_DEFAULT_ADDR_ALIGN - 1);
		}
	}
	if (addr + size < addr)
		return fail(r, "buffer: addr 0x%llx + size 0x%llx passes the end of the address space",
			    (unsigned long long)addr, (unsigned long long)size);
	char *name = NULL;
	if ((f = find(fs, n, "name"))) {
		name = strndup(f->val, f->val_len);
		if (!name)
			return oom(r);
	}
	int rc = gmx_workload_add_buffer(w, addr, size, name, NULL);
	free(name);
	return rc ? oom(r) : 0;
}

static int rec_kname(struct reader *r, char *rest)
{
	gmx_workload_t *w = r->w;
	char *p = rest;
	while (*p == ' ')
		p++;
	char *num_start = p;
	while (*p && *p != ' ')
		p++;
	uint64_t id;
	int rc = parse_u64(num_start, (size_t)(p - num_start), &id);
	if (rc)
		return fail(r, "kname: expected 'kname N NAME' with N a number, got '%.*s'", (int)(p - num_start),
			    num_start);
	if (id != w->n_names)
		return fail(r, "kname: name id %llu out of order (expected %u)", (unsigned long long)id, w->n_names);
	if (*p != ' ' || p[1] == '\0')
		return fail(r, "kname: expected a kernel name after 'kname %llu'", (unsigned long long)id);
	p++;
	if (w->n_names == w->cap_names) {
		uint32_t ncap = w->cap_names ? w->cap_names * 2 : 16;
		char **names = realloc(w->names, (size_t)ncap * sizeof(*names));
		if (!names)
			return oom(r);
		w->names = names;
		w->cap_names = ncap;
	}
	char *copy = strdup(p);
	if (!copy)
		return oom(r);
	w->names[w->n_names++] = copy;
	return 0;
}

static int parse_args(struct reader *r, const struct field *f)
{
	const char *s = f->val, *end = f->val + f->val_len;
	while (s < end) {
		const char *e = memchr(s, ',', (size_t)(end - s));
		if (!e)
			e = end;
		const char *colon = memchr(s, ':', (size_t)(e - s));
		int size = 0, ptr = 0;
		if (colon) {
			size_t tl = (size_t)(colon - s);
			if (tl == 1 && s[0] == 'p')
				size = 8, ptr = 1;
			else if (tl == 2 && s[0] == 'i' && s[1] == '4')
				size = 4;
			else if (tl == 2 && s[0] == 'i' && s[1] == '8')
				size = 8;
		}
		uint64_t v;
		if (!size || parse_u64(colon + 1, (size_t)(e - colon - 1), &v))
			return fail(r, "kernel: bad argument '%.*s' (expected p:ADDR, i4:VALUE or i8:VALUE)", (int)(e - s), s);
		if (size == 4 && v > UINT32_MAX)
			return fail(r, "kernel: argument '%.*s' does not fit in 4 bytes", (int)(e - s), s);
		if (gmx_workload_add_arg(r->w, v, ptr, size))
			return oom(r);
		if (e == end)
			break;
		s = e + 1;
		if (s == end)
			return fail(r, "kernel: args end with a comma");
	}
	return 0;
}

static int parse_touch(struct reader *r, const struct field *f)
{
	gmx_workload_t *w = r->w;
	const char *s = f->val, *end = f->val + f->val_len;
	unsigned idx = 0;
	while (s < end) {
		const char *e = memchr(s, ',', (size_t)(end - s));
		if (!e)
			e = end;
		const char *plus = memchr(s, '+', (size_t)(e - s));
		const char *colon = plus ? memchr(plus, ':', (size_t)(e - plus)) : NULL;
		uint64_t b, off, len;
		if (!colon || parse_u64(s, (size_t)(plus - s), &b) || parse_u64(plus + 1, (size_t)(colon - plus - 1), &off) ||
		    parse_u64(colon + 1, (size_t)(e - colon - 1), &len))
			return fail(r, "kernel: bad touch region '%.*s' (expected BUF+OFFSET:LENGTH)", (int)(e - s), s);
		if (b >= w->n_buffers)
			return fail(r, "kernel: touch region %u '%.*s' names buffer %llu, not defined (%u buffers)", idx,
				    (int)(e - s), s, (unsigned long long)b, w->n_buffers);
		if (len == 0)
			return fail(r, "kernel: touch region %u '%.*s' has length 0 (must be > 0)", idx, (int)(e - s), s);
		uint64_t size = w->buffers[b].size;
		if (off >= size || len > size - off)
			return fail(r, "touch region %u+0x%llx:0x%llx ends past buffer %u (size 0x%llx)", (unsigned)b,
				    (unsigned long long)off, (unsigned long long)len, (unsigned)b, (unsigned long long)size);
		if (gmx_workload_add_region(w, (uint32_t)b, off, len))
			return oom(r);
		idx++;
		if (e == end)
			break;
		s = e + 1;
		if (s == end)
			return fail(r, "kernel: touch ends with a comma");
	}
	return 0;
}

static int rec_kernel(struct reader *r, char *rest)
{
	static const char *const keys[] = {"s",   "think", "dur",   "name", "grid", "block",
					   "shm", "sm",    "class", "args", "touch", NULL};
	struct field fs[MAX_FIELDS];
	int n;
	const struct field *f;
	gmx_workload_t *w = r->w;
	if (split_fields(r, "kernel", rest, keys, fs, &n))
		return -EINVAL;
	gmx_op_t op = {.kind = GMX_OP_KERNEL, .klass = GMX_CLASS_UNKNOWN, .buffer = UINT32_MAX,
		       .grid = {1, 1, 1}, .block = {1, 1, 1}};
	if (stream_field(r, "kernel", fs, n, 0, &op) || think_dur(r, "kernel", fs, n, &op))
		return -EINVAL;
	if (!find(fs, n, "dur"))
		return fail(r, "kernel: missing key 'dur'");
	uint64_t v;
	if (need(r, "kernel", fs, n, "name", &f) || num(r, "kernel", f, UINT32_MAX, &v))
		return -EINVAL;
	if (v >= w->n_names)
		return fail(r, "kernel: name %llu is not defined by a kname line (%u names so far)", (unsigned long long)v,
			    w->n_names);
	op.name = (uint32_t)v;
	if ((f = find(fs, n, "grid")) && triple(r, "kernel", f, op.grid))
		return -EINVAL;
	if ((f = find(fs, n, "block")) && triple(r, "kernel", f, op.block))
		return -EINVAL;
	if ((f = find(fs, n, "shm"))) {
		if (num(r, "kernel", f, UINT32_MAX, &v))
			return -EINVAL;
		op.shared_mem = (uint32_t)v;
	}
	if ((f = find(fs, n, "sm"))) {
		if (num(r, "kernel", f, UINT32_MAX, &v))
			return -EINVAL;
		op.sm_demand = (uint32_t)v;
	}
	if ((f = find(fs, n, "class"))) {
		if (key_is(&(struct field){f->val, f->val_len, 0, 0}, "compute"))
			op.klass = GMX_CLASS_COMPUTE;
		else if (key_is(&(struct field){f->val, f->val_len, 0, 0}, "memory"))
			op.klass = GMX_CLASS_MEMORY;
		else if (key_is(&(struct field){f->val, f->val_len, 0, 0}, "unknown"))
			op.klass = GMX_CLASS_UNKNOWN;
		else
			return fail(r, "kernel: class '%.*s' (expected compute, memory or unknown)", (int)f->val_len, f->val);
	}
	if (gmx_workload_add_op(w, &op, NULL))
		return oom(r);
	if ((f = find(fs, n, "args")) && parse_args(r, f))
		return -EINVAL;
	if ((f = find(fs, n, "touch")) && parse_touch(r, f))
		return -EINVAL;
	return 0;
}

static int rec_copy(struct reader *r, const char *kw, gmx_op_kind_t kind, char *rest)
{
	static const char *const keys[] = {"s", "think", "bytes", "buf", "dur", NULL};
	struct field fs[MAX_FIELDS];
	int n;
	const struct field *f;
	if (split_fields(r, kw, rest, keys, fs, &n))
		return -EINVAL;
	gmx_op_t op = {.kind = (uint8_t)kind, .buffer = UINT32_MAX};
	if (stream_field(r, kw, fs, n, 0, &op) || think_dur(r, kw, fs, n, &op))
		return -EINVAL;
	if (need(r, kw, fs, n, "bytes", &f) || size_num(r, kw, f, &op.bytes))
		return -EINVAL;
	if ((f = find(fs, n, "buf"))) {
		if (buf_field(r, kw, f, &op.buffer))
			return -EINVAL;
		if (op.bytes > r->w->buffers[op.buffer].size)
			return fail(r, "%s: bytes=0x%llx exceeds buffer %u (size 0x%llx)", kw, (unsigned long long)op.bytes,
				    op.buffer, (unsigned long long)r->w->buffers[op.buffer].size);
	}
	return gmx_workload_add_op(r->w, &op, NULL) ? oom(r) : 0;
}

static int rec_sync(struct reader *r, char *rest)
{
	static const char *const keys[] = {"s", "think", NULL};
	struct field fs[MAX_FIELDS];
	int n;
	if (split_fields(r, "sync", rest, keys, fs, &n))
		return -EINVAL;
	gmx_op_t op = {.kind = GMX_OP_SYNC, .buffer = UINT32_MAX};
	if (stream_field(r, "sync", fs, n, 1, &op) || think_dur(r, "sync", fs, n, &op))
		return -EINVAL;
	return gmx_workload_add_op(r->w, &op, NULL) ? oom(r) : 0;
}

/* record s=S event=E [think=T], wait s=S event=E [think=T] */
static int rec_event(struct reader *r, const char *kw, gmx_op_kind_t kind, char *rest)
{
	static const char *const keys[] = {"s", "event", "think", NULL};
	struct field fs[MAX_FIELDS];
	int n;
	const struct field *f;
	uint64_t v;
	if (split_fields(r, kw, rest, keys, fs, &n))
		return -EINVAL;
	gmx_op_t op = {.kind = (uint8_t)kind, .buffer = UINT32_MAX};
	if (stream_field(r, kw, fs, n, 0, &op) || think_dur(r, kw, fs, n, &op))
		return -EINVAL;
	if (need(r, kw, fs, n, "event", &f) || num(r, kw, f, UINT32_MAX, &v))
		return -EINVAL;
	op.event = (uint32_t)v;
	return gmx_workload_add_op(r->w, &op, NULL) ? oom(r) : 0;
}

static int rec_alloc(struct reader *r, const char *kw, gmx_op_kind_t kind, char *rest)
{
	static const char *const keys[] = {"buf", "think", NULL};
	struct field fs[MAX_FIELDS];
	int n;
	const struct field *f;
	if (split_fields(r, kw, rest, keys, fs, &n))
		return -EINVAL;
	gmx_op_t op = {.kind = (uint8_t)kind};
	if (need(r, kw, fs, n, "buf", &f) || buf_field(r, kw, f, &op.buffer) || think_dur(r, kw, fs, n, &op))
		return -EINVAL;
	op.bytes = r->w->buffers[op.buffer].size;
	return gmx_workload_add_op(r->w, &op, NULL) ? oom(r) : 0;
}

/* end buffers=B knames=K ops=N: the last record; its counts must match what was read, so
 * a file cut at a line boundary (no 'end') or missing lines (counts differ) is refused. */
static int rec_end(struct reader *r, char *rest)
{
	static const char *const keys[] = {"buffers", "knames", "ops", NULL};
	const uint32_t have[3] = {r->w->n_buffers, r->w->n_names, r->w->n_ops};
	struct field fs[MAX_FIELDS];
	int n;
	if (split_fields(r, "end", rest, keys, fs, &n))
		return -EINVAL;
	for (int i = 0; i < 3; i++) {
		const struct field *f;
		uint64_t v;
		if (need(r, "end", fs, n, keys[i], &f) || num(r, "end", f, UINT32_MAX, &v))
			return -EINVAL;
		if (v != have[i])
			return fail(r, "end: %s=%llu but the file holds %u: lines are missing or were added", keys[i],
				    (unsigned long long)v, have[i]);
	}
	r->end_line = r->line;
	return 0;
}

static int header(struct reader *r, char *line)
{
	const char *magic = "gpumux-workload";
	size_t ml = strlen(magic);
	if (strncmp(line, magic, ml) != 0 || (line[ml] != ' ' && line[ml] != '\t'))
		return fail(r, "missing header: expected 'gpumux-workload %d' as the first line", GMX_WORKLOAD_FORMAT_VERSION);
	char *p = line + ml;
	while (*p == ' ' || *p == '\t')
		p++;
	size_t len = strlen(p);
	while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
		len--;
	uint64_t v;
	if (parse_u64(p, len, &v))
		return fail(r, "header: expected 'gpumux-workload %d', got version '%.*s'", GMX_WORKLOAD_FORMAT_VERSION,
			    (int)len, p);
	if (v == 1)
		return fail(r, "format version 1 has no end record, so a file cut short cannot be told from a whole "
			       "one: regenerate it with this gpumux (gpumux gen, gpumux trace import; version %d)",
			    GMX_WORKLOAD_FORMAT_VERSION);
	if (v != GMX_WORKLOAD_FORMAT_VERSION)
		return fail(r, "unsupported format version %llu (this reader reads version %d)", (unsigned long long)v,
			    GMX_WORKLOAD_FORMAT_VERSION);
	r->have_header = 1;
	return 0;
}

/* One line without its newline. */
static int line(struct reader *r, char *s, size_t len)
{
	if (memchr(s, '\0', len))
		return fail(r, "line holds a NUL byte (not a text file?)");
	if (len && s[len - 1] == '\r')
		s[--len] = '\0';
	char *p = s;
	while (*p == ' ' || *p == '\t')
		p++;
	/* "kname" keeps '#' in its name; every other line loses its comment. */
	int is_kname = strncmp(p, "kname", 5) == 0 && (p[5] == ' ' || p[5] == '\t' || p[5] == '\0');
	if (!is_kname) {
		char *hash = strchr(p, '#');
		if (hash)
			*hash = '\0';
	}
	if (!*p || (!is_kname && strspn(p, " \t") == strlen(p)))
		return 0;
	if (!r->have_header)
		return header(r, p);
	if (r->end_line)
		return fail(r, "a record after 'end' (line %lu): 'end' is the last record", r->end_line);
	char *kw = p;
	while (*p && *p != ' ' && *p != '\t')
		p++;
	size_t kl = (size_t)(p - kw);
	char *rest = p;
	if (*p)
		*p++ = '\0', rest = p;
#define KW(s) (kl == sizeof(s) - 1 && memcmp(kw, s, kl) == 0)
	if (KW("kernel"))
		return rec_kernel(r, rest);
	if (KW("kname")) {
		if (!*rest)
			return fail(r, "kname: expected 'kname N NAME'");
		return rec_kname(r, rest);
	}
	if (KW("buffer"))
		return rec_buffer(r, rest);
	if (KW("sync"))
		return rec_sync(r, rest);
	if (KW("h2d"))
		return rec_copy(r, "h2d", GMX_OP_COPY_H2D, rest);
	if (KW("d2h"))
		return rec_copy(r, "d2h", GMX_OP_COPY_D2H, rest);
	if (KW("memset"))
		return rec_copy(r, "memset", GMX_OP_MEMSET, rest);
	if (KW("d2d"))
		return rec_copy(r, "d2d", GMX_OP_COPY_D2D, rest);
	if (KW("record"))
		return rec_event(r, "record", GMX_OP_RECORD, rest);
	if (KW("wait"))
		return rec_event(r, "wait", GMX_OP_WAIT, rest);
	if (KW("alloc"))
		return rec_alloc(r, "alloc", GMX_OP_ALLOC, rest);
	if (KW("free"))
		return rec_alloc(r, "free", GMX_OP_FREE, rest);
	if (KW("name"))
		return rest_string(r, "name", rest, &r->w->name, &r->have_name);
	if (KW("device"))
		return rest_string(r, "device", rest, &r->w->device, &r->have_device);
	if (KW("unit"))
		return rest_string(r, "unit", rest, &r->w->unit, &r->have_unit);
	if (KW("end"))
		return rec_end(r, rest);
	if (KW("gpumux-workload"))
		return fail(r, "header given twice");
#undef KW
	return fail(r, "unknown keyword '%s' (expected name, device, unit, buffer, kname, kernel, h2d, d2h, d2d, "
		       "memset, sync, record, wait, alloc, free, end)",
		    kw);
}

int gmx_workload_read_stream(FILE *in, const char *label, gmx_workload_t *w, char *err, size_t err_len)
{
	struct reader r = {.label = label ? label : "<stream>", .err = err, .err_len = err_len, .w = w};
	if (err && err_len)
		err[0] = '\0';
	int rc = gmx_workload_init(w, NULL);
	if (rc) {
		fail(&r, "out of memory");
		return rc;
	}
	char *buf = NULL;
	size_t cap = 0;
	ssize_t got;
	errno = 0;
	while ((got = getline(&buf, &cap, in)) >= 0) {
		r.line++;
		size_t len = (size_t)got;
		if (len && buf[len - 1] == '\n')
			buf[--len] = '\0';
		else if (!feof(in) || len) {
			/* Every line the writer produces ends in a newline: one that does not
			 * is the tail of a file cut short. */
			rc = fail(&r, "truncated line (no newline at the end of the file): '%.40s'", buf);
			break;
		}
		rc = line(&r, buf, len);
		if (rc)
			break;
	}
	if (!rc && ferror(in)) {
		r.line++;
		rc = fail(&r, "read error: %s", strerror(errno ? errno : EIO));
		rc = -EIO;
	}
	free(buf);
	if (!rc && !r.have_header) {
		r.line = r.line ? r.line : 1;
		rc = fail(&r, "missing header: expected 'gpumux-workload %d' (file is empty)", GMX_WORKLOAD_FORMAT_VERSION);
	}
	if (!rc && !r.end_line)
		rc = fail(&r, "no 'end' record after the last line: the file was cut short (a whole file ends with "
			      "'end buffers=B knames=K ops=N'); write it again");
	if (!rc) {
		char why[256];
		if (gmx_workload_validate(w, why, sizeof(why)))
			rc = fail(&r, "inconsistent workload: %s", why);
	}
	if (rc)
		gmx_workload_free(w);
	return rc;
}

int gmx_workload_read(const char *path, gmx_workload_t *w, char *err, size_t err_len)
{
	FILE *in = fopen(path, "r");
	if (!in) {
		int e = errno;
		if (err && err_len)
			snprintf(err, err_len, "%s:0: cannot open: %s", path, strerror(e));
		memset(w, 0, sizeof(*w));
		return -e;
	}
	/* A large stdio buffer: traces reach hundreds of megabytes. */
	setvbuf(in, NULL, _IOFBF, 1 << 20);
	int rc = gmx_workload_read_stream(in, path, w, err, err_len);
	fclose(in);
	return rc;
}
