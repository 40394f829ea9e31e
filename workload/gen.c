/* Generator registry, parameter parsing and the builder helpers. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_internal.h"
#include "gpumux/numparse.h"

static const struct gen_kind *const kinds[] = {
	&gen_llm_decode, &gen_vector_add, &gen_matmul, &gen_dwt2d, &gen_hotspot, &gen_cfd, &gen_nn, &gen_reef, &gen_cnn,
};
#define N_KINDS (sizeof(kinds) / sizeof(kinds[0]))

static const struct gen_kind *lookup(const char *kind)
{
	for (size_t i = 0; kind && i < N_KINDS; i++)
		if (!strcmp(kinds[i]->kind, kind))
			return kinds[i];
	return NULL;
}

int gmx_gen_exists(const char *kind)
{
	return lookup(kind) != NULL;
}

int gen_fail(struct gen_ctx *g, const char *fmt, ...)
{
	char what[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (g->err && g->err_len)
		snprintf(g->err, g->err_len, "%s: %s", g->k ? g->k->kind : "gen", what);
	if (!g->rc)
		g->rc = -EINVAL;
	return -EINVAL;
}

static int param_index(const struct gen_kind *k, const char *key)
{
	for (int i = 0; k->params[i].key; i++)
		if (!strcmp(k->params[i].key, key))
			return i;
	return -1;
}

uint64_t gen_u(const struct gen_ctx *g, const char *key)
{
	int i = param_index(g->k, key);
	return i < 0 ? 0 : g->u[i];
}

const char *gen_s(const struct gen_ctx *g, const char *key)
{
	int i = param_index(g->k, key);
	return i < 0 ? NULL : g->s[i];
}

int gen_given(const struct gen_ctx *g, const char *key)
{
	int i = param_index(g->k, key);
	return i >= 0 && g->given[i];
}

int gen_parse_size(const char *s, uint64_t *out)
{
	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return -EINVAL;
	char *end;
	errno = 0;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		unsigned long long v = strtoull(s, &end, 16);
		if (errno || end == s + 2 || *end)
			return -EINVAL;
		*out = v;
		return 0;
	}
	/* Integers are read exactly; a fraction only makes sense with a suffix. */
	unsigned long long whole = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	double frac = 0;
	if (*end == '.') {
		char *fend;
		double f = strtod(end, &fend);
		if (fend == end + 1)
			return -EINVAL;
		frac = f;
		end = fend;
	}
	uint64_t mult = 1;
	switch (*end) {
	case 'K': case 'k': mult = 1ull << 10; end++; break;
	case 'M': case 'm': mult = 1ull << 20; end++; break;
	case 'G': case 'g': mult = 1ull << 30; end++; break;
	case 'T': case 't': mult = 1ull << 40; end++; break;
	default: break;
	}
	if (mult > 1 && (!strcmp(end, "iB") || !strcmp(end, "B")))
		end += strlen(end);
	if (*end || (frac != 0 && mult == 1))
		return -EINVAL;
	if (whole > UINT64_MAX / mult)
		return -EINVAL;
	uint64_t v = whole * mult + (uint64_t)llround(frac * (double)mult);
	*out = v;
	return 0;
}

static void expected_keys(const struct gen_kind *k, char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = '\0';
	for (int i = 0; k->params[i].key && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s", i ? ", " : "", k->params[i].key);
}

static int enum_ok(const char *choices, const char *v)
{
	size_t vl = strlen(v);
	for (const char *c = choices; c && *c;) {
		const char *e = strchr(c, ',');
		size_t cl = e ? (size_t)(e - c) : strlen(c);
		if (cl == vl && !strncmp(c, v, vl))
			return 1;
		c = e ? e + 1 : NULL;
	}
	return 0;
}

/* Stores one value (user's or default) into slot i after checking it. */
static int set_value(struct gen_ctx *g, int i, const char *value, int from_user)
{
	const struct gen_pspec *p = &g->k->params[i];
	g->s[i] = value;
	if (!value)
		return 0;
	uint64_t v = 0;
	switch (p->type) {
	case GEN_UINT:
	case GEN_SIZE: {
		int rc;
		if (p->type == GEN_SIZE) {
			rc = gen_parse_size(value, &v);
		} else {
			rc = gmx_parse_uint(value, 0, UINT64_MAX, &v);
		}
		if (rc)
			return gen_fail(g, "%s=%s is not %s", p->key, value,
					p->type == GEN_SIZE ? "a size (bytes, optionally with K, M, G or T: 512M, 8.5G)"
							    : "a non-negative integer");
		if (v < p->min || v > p->max)
			return gen_fail(g, "%s=%s is out of range (expected %llu..%llu)", p->key, value,
					(unsigned long long)p->min, (unsigned long long)p->max);
		break;
	}
	case GEN_ENUM:
		if (!enum_ok(p->choices, value))
			return gen_fail(g, "%s=%s is not one of %s", p->key, value, p->choices);
		break;
	case GEN_STR:
		if (!*value)
			return gen_fail(g, "%s is empty", p->key);
		break;
	}
	g->u[i] = v;
	g->given[i] = from_user;
	return 0;
}

int gen_defaults(struct gen_ctx *g, const struct gen_kind *k)
{
	g->k = k;
	for (int i = 0; k->params[i].key; i++)
		if (set_value(g, i, k->params[i].def, 0))
			return g->rc;
	return 0;
}

int gmx_gen_build(const char *kind, const gmx_param_t *params, size_t n_params, const char *base_dir,
		  gmx_workload_t *out, char *err, size_t err_len)
{
	struct gen_ctx g = {.base_dir = base_dir, .w = out, .err = err, .err_len = err_len};
	if (err && err_len)
		err[0] = '\0';
	memset(out, 0, sizeof(*out));
	g.k = lookup(kind);
	if (!g.k) {
		char list[256];
		size_t used = 0;
		list[0] = '\0';
		for (size_t i = 0; i < N_KINDS; i++)
			used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "", kinds[i]->kind);
		if (err && err_len)
			snprintf(err, err_len, "unknown generator '%s' (expected one of %s)", kind ? kind : "", list);
		return -EINVAL;
	}
	if (gen_defaults(&g, g.k))
		return g.rc; /* a bad built-in default: caught by the tests */
	for (size_t j = 0; j < n_params; j++) {
		int i = params[j].key ? param_index(g.k, params[j].key) : -1;
		if (i < 0) {
			char keys[256];
			expected_keys(g.k, keys, sizeof(keys));
			return gen_fail(&g, "unknown parameter '%s' (expected %s)", params[j].key ? params[j].key : "",
					keys);
		}
		for (size_t m = 0; m < j; m++)
			if (!strcmp(params[m].key, params[j].key))
				return gen_fail(&g, "parameter '%s' given twice", params[j].key);
		if (!params[j].value)
			return gen_fail(&g, "parameter '%s' has no value", params[j].key);
		if (set_value(&g, i, params[j].value, 1))
			return g.rc;
	}
	if (gmx_workload_init(out, g.k->kind))
		return -ENOMEM;
	int rc = g.k->build(&g);
	if (!rc)
		rc = g.rc;
	if (!rc) {
		char why[256];
		if (gmx_workload_validate(out, why, sizeof(why)))
			rc = gen_fail(&g, "internal error: generated workload is inconsistent: %s", why);
	}
	if (rc) {
		if (rc == -ENOMEM && err && err_len && !err[0])
			snprintf(err, err_len, "%s: out of memory", kind);
		gmx_workload_free(out);
	}
	return rc;
}

void gmx_gen_describe(FILE *out)
{
	for (size_t i = 0; i < N_KINDS; i++) {
		const struct gen_kind *k = kinds[i];
		fprintf(out, "%s\n    %s\n", k->kind, k->summary);
		for (int j = 0; k->params[j].key; j++) {
			const struct gen_pspec *p = &k->params[j];
			char kv[64];
			snprintf(kv, sizeof(kv), "%s=%s", p->key, p->def ? p->def : "");
			fprintf(out, "    %-24s %s", kv, p->help);
			if (p->type == GEN_ENUM)
				fprintf(out, " (one of %s)", p->choices);
			else if (p->type == GEN_UINT || p->type == GEN_SIZE)
				fprintf(out, " [%llu..%llu]", (unsigned long long)p->min, (unsigned long long)p->max);
			fputc('\n', out);
		}
		fputc('\n', out);
	}
}

/* ---- Builder ------------------------------------------------------------- */

static void note(struct gen_ctx *g, int rc)
{
	if (rc && !g->rc) {
		g->rc = rc;
		if (g->err && g->err_len && rc != -ENOMEM)
			snprintf(g->err, g->err_len, "%s: internal error building the workload (%d)", g->k->kind, rc);
	}
}

uint32_t gen_buffer(struct gen_ctx *g, uint64_t size, const char *name)
{
	uint32_t idx = 0;
	if (!g->rc)
		note(g, gmx_workload_add_buffer(g->w, 0, size, name, &idx));
	return idx;
}

uint64_t gen_addr(const struct gen_ctx *g, uint32_t buf, uint64_t offset)
{
	return buf < g->w->n_buffers ? g->w->buffers[buf].addr + offset : 0;
}

void gen_kernel(struct gen_ctx *g, const char *name, uint64_t think_ns, int8_t klass, uint32_t gx, uint32_t gy,
		uint32_t gz, uint32_t bx, uint32_t by, uint32_t bz, uint32_t shm)
{
	if (g->rc)
		return;
	gmx_op_t op = {.kind = GMX_OP_KERNEL, .klass = klass, .stream = 0, .think_ns = think_ns,
		       .grid = {gx, gy, gz}, .block = {bx, by, bz}, .shared_mem = shm, .buffer = UINT32_MAX};
	note(g, gmx_workload_intern_name(g->w, name, &op.name));
	if (!g->rc)
		note(g, gmx_workload_add_op(g->w, &op, NULL));
}

void gen_arg_ptr(struct gen_ctx *g, uint32_t buf, uint64_t offset)
{
	if (!g->rc)
		note(g, gmx_workload_add_arg(g->w, gen_addr(g, buf, offset), 1, 8));
}

void gen_arg_i4(struct gen_ctx *g, uint64_t v)
{
	if (!g->rc && v > UINT32_MAX)
		gen_fail(g, "internal error: 4-byte argument %llu overflows", (unsigned long long)v);
	if (!g->rc)
		note(g, gmx_workload_add_arg(g->w, v, 0, 4));
}

void gen_arg_i8(struct gen_ctx *g, uint64_t v)
{
	if (!g->rc)
		note(g, gmx_workload_add_arg(g->w, v, 0, 8));
}

void gen_touch(struct gen_ctx *g, uint32_t buf, uint64_t offset, uint64_t length)
{
	if (!g->rc)
		note(g, gmx_workload_add_region(g->w, buf, offset, length));
}

uint64_t gen_last_bytes(const struct gen_ctx *g)
{
	const gmx_workload_t *w = g->w;
	if (!w->n_ops)
		return 0;
	const gmx_op_t *o = &w->ops[w->n_ops - 1];
	uint64_t total = 0;
	for (uint32_t i = 0; i < o->region_count; i++)
		total += w->regions[o->region_first + i].length;
	return total;
}

void gen_dur(struct gen_ctx *g, uint64_t ns)
{
	if (!g->rc && g->w->n_ops)
		g->w->ops[g->w->n_ops - 1].duration_ns = ns;
}

void gen_copy(struct gen_ctx *g, gmx_op_kind_t kind, uint32_t buf, uint64_t bytes, uint64_t think_ns)
{
	if (g->rc)
		return;
	gmx_op_t op = {.kind = (uint8_t)kind, .stream = 0, .think_ns = think_ns, .bytes = bytes, .buffer = buf};
	note(g, gmx_workload_add_op(g->w, &op, NULL));
}

void gen_sync(struct gen_ctx *g, uint64_t think_ns)
{
	if (g->rc)
		return;
	gmx_op_t op = {.kind = GMX_OP_SYNC, .stream = 0, .think_ns = think_ns, .buffer = UINT32_MAX};
	note(g, gmx_workload_add_op(g->w, &op, NULL));
}

uint32_t gen_f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

uint64_t gen_membound_ns(uint64_t bytes, double bw)
{
	return GMX_KERNEL_MIN_NS + (uint64_t)llround((double)bytes * 1e9 / bw);
}
