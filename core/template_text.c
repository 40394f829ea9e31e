/* The templates profile text format (docs/msched.md#profile-file): writing a
 * set and reading one back, with errors that name the line. Core does no I/O:
 * the callers read and write the files. */
#include "gpumux/template.h"
#include "template_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const dim_names[6] = {"gx", "gy", "gz", "bx", "by", "bz"};

void gmx_tpl_feature_name(uint32_t n_args, uint16_t f, char *buf, size_t len)
{
	if (f >= 3 * n_args)
		snprintf(buf, len, "%s", f - 3 * n_args < 6 ? dim_names[f - 3 * n_args] : "?");
	else
		snprintf(buf, len, "a%u%s", f / 3u, f % 3 == 1 ? ".lo" : f % 3 == 2 ? ".hi" : "");
}

typedef struct sbuf {
	char *s;
	size_t n, cap;
	int oom;
} sbuf_t;

static void put(sbuf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(sbuf_t *b, const char *fmt, ...)
{
	if (b->oom)
		return;
	for (;;) {
		va_list ap;
		va_start(ap, fmt);
		int k = vsnprintf(b->s + b->n, b->cap - b->n, fmt, ap);
		va_end(ap);
		if (k < 0) {
			b->oom = 1;
			return;
		}
		if ((size_t)k < b->cap - b->n) {
			b->n += (size_t)k;
			return;
		}
		size_t ncap = 2 * b->cap + (size_t)k + 64;
		char *p = realloc(b->s, ncap);
		if (!p) {
			b->oom = 1;
			return;
		}
		b->s = p;
		b->cap = ncap;
	}
}

static void put_formula(sbuf_t *b, uint32_t n_args, const gmx_tpl_formula_t *f)
{
	put(b, "%llu/%llu", (unsigned long long)f->num, (unsigned long long)f->den);
	for (uint32_t i = 0; i < f->n_factors; i++) {
		char nm[16];
		gmx_tpl_feature_name(n_args, f->factor[i], nm, sizeof(nm));
		put(b, "*%s", nm);
	}
}

int gmx_tpl_format(const gmx_tpl_set_t *set, char **text)
{
	static const char *const kinds[] = {"other", "T1", "T2", "T3"};
	sbuf_t b = {.s = malloc(256), .cap = 256};
	if (!b.s)
		return -ENOMEM;
	b.s[0] = 0;
	put(&b, "gpumux-templates 1\n");
	for (uint32_t i = 0; i < set->n; i++) {
		const gmx_tpl_t *t = &set->t[i];
		put(&b, "kernel %u ", t->n_args);
		for (uint32_t j = 0; j < t->n_args; j++)
			put(&b, "%s%u", j ? "," : "", t->arg_size[j]);
		put(&b, "%s %s %s\n", t->n_args ? "" : "-", kinds[t->kind & 3], t->name);
		for (uint32_t k = 0; k < t->n_terms; k++) {
			const gmx_tpl_term_t *m = &t->term[k];
			put(&b, "term a%u ", m->ptr_arg);
			if (!m->strided) {
				put(&b, "length=");
				put_formula(&b, t->n_args, &m->length);
			} else {
				put(&b, "count=");
				put_formula(&b, t->n_args, &m->count);
				put(&b, " stride=");
				put_formula(&b, t->n_args, &m->stride);
				put(&b, " chunk=");
				put_formula(&b, t->n_args, &m->chunk);
			}
			put(&b, "\n");
		}
		put(&b, "end\n");
	}
	if (b.oom) {
		free(b.s);
		return -ENOMEM;
	}
	*text = b.s;
	return 0;
}

static int parse_feature(const char **p, uint32_t n_args, uint16_t *f)
{
	const char *s = *p;
	for (int d = 0; d < 6; d++)
		if (!strncmp(s, dim_names[d], 2)) {
			*f = (uint16_t)(3 * n_args + (uint32_t)d);
			*p = s + 2;
			return 0;
		}
	if (*s != 'a')
		return -1;
	char *end;
	unsigned long a = strtoul(s + 1, &end, 10);
	if (end == s + 1 || a >= n_args)
		return -1;
	uint32_t sub = 0;
	if (!strncmp(end, ".lo", 3))
		sub = 1, end += 3;
	else if (!strncmp(end, ".hi", 3))
		sub = 2, end += 3;
	*f = (uint16_t)(3 * a + sub);
	*p = end;
	return 0;
}

static int parse_formula(const char **p, uint32_t n_args, gmx_tpl_formula_t *f)
{
	char *end;
	memset(f, 0, sizeof(*f));
	f->num = strtoull(*p, &end, 10);
	if (end == *p || *end != '/')
		return -1;
	const char *s = end + 1;
	f->den = strtoull(s, &end, 10);
	if (end == s || !f->den)
		return -1;
	s = end;
	while (*s == '*') {
		s++;
		if (f->n_factors == GMX_TPL_MAX_FACTORS || parse_feature(&s, n_args, &f->factor[f->n_factors]))
			return -1;
		f->n_factors++;
	}
	*p = s;
	return 0;
}

static int parse_fail(char *err, size_t len, unsigned line, const char *what)
{
	snprintf(err, len, "line %u: %s", line, what);
	return -EINVAL;
}

int gmx_tpl_parse(const char *text, gmx_tpl_set_t *set, char *err, size_t err_len)
{
	memset(set, 0, sizeof(*set));
	unsigned line = 0;
	gmx_tpl_t *cur = NULL;
	int rc = 0;
	for (const char *s = text; *s && !rc;) {
		const char *eol = strchr(s, '\n');
		size_t len = eol ? (size_t)(eol - s) : strlen(s);
		char buf[4096];
		line++;
		if (len >= sizeof(buf)) {
			rc = parse_fail(err, err_len, line, "line longer than 4095 characters");
			break;
		}
		memcpy(buf, s, len);
		buf[len] = 0;
		s = eol ? eol + 1 : s + len;
		if (line == 1) {
			if (strcmp(buf, "gpumux-templates 1"))
				rc = parse_fail(err, err_len, line, "expected the header 'gpumux-templates 1'");
			continue;
		}
		if (!buf[0] || buf[0] == '#')
			continue;
		if (!strncmp(buf, "kernel ", 7)) {
			if (cur) {
				rc = parse_fail(err, err_len, line, "expected 'end' before the next kernel");
				break;
			}
			gmx_tpl_t *t = gmx_tpl__set_add(set);
			if (!t) {
				rc = -ENOMEM;
				break;
			}
			memset(t, 0, sizeof(*t));
			char *p = buf + 7, *end;
			unsigned long na = strtoul(p, &end, 10);
			if (end == p || *end != ' ' || na > GMX_TPL_MAX_ARGS) {
				rc = parse_fail(err, err_len, line, "expected 'kernel N_ARGS SIZES KIND NAME' (N_ARGS <= 64)");
				break;
			}
			t->n_args = (uint32_t)na;
			p = end + 1;
			if (!na) {
				if (*p != '-') {
					rc = parse_fail(err, err_len, line, "expected '-' for a kernel without arguments");
					break;
				}
				p++;
			}
			for (uint32_t j = 0; j < na && !rc; j++) {
				unsigned long sz = strtoul(p, &end, 10);
				if ((sz != 4 && sz != 8) || (j + 1 < na ? *end != ',' : *end != ' '))
					rc = parse_fail(err, err_len, line, "argument sizes are 4 or 8, comma-separated");
				t->arg_size[j] = (uint8_t)sz;
				p = end + (j + 1 < na);
			}
			if (rc)
				break;
			if (*p != ' ' || p[1] != 'T' || p[2] < '1' || p[2] > '3' || p[3] != ' ' || !p[4]) {
				rc = parse_fail(err, err_len, line, "expected the kind T1, T2 or T3 and a name");
				break;
			}
			t->kind = (uint8_t)(p[2] - '0');
			t->name = strdup(p + 4);
			if (!t->name) {
				rc = -ENOMEM;
				break;
			}
			set->n++;
			cur = t;
		} else if (!strncmp(buf, "term a", 6)) {
			if (!cur || cur->n_terms == GMX_TPL_MAX_TERMS) {
				rc = parse_fail(err, err_len, line, "a term outside a kernel, or more than 64 terms");
				break;
			}
			gmx_tpl_term_t *m = &cur->term[cur->n_terms];
			memset(m, 0, sizeof(*m));
			char *end;
			unsigned long a = strtoul(buf + 6, &end, 10);
			if (end == buf + 6 || a >= cur->n_args || cur->arg_size[a] != 8 || *end != ' ') {
				rc = parse_fail(err, err_len, line, "expected 'term aN' with N an 8-byte argument");
				break;
			}
			m->ptr_arg = (uint16_t)a;
			const char *p = end + 1;
			if (!strncmp(p, "length=", 7)) {
				p += 7;
				if (parse_formula(&p, cur->n_args, &m->length) || *p)
					rc = parse_fail(err, err_len, line, "expected length=NUM/DEN[*FEATURE...]");
			} else if (!strncmp(p, "count=", 6)) {
				m->strided = 1;
				p += 6;
				if (parse_formula(&p, cur->n_args, &m->count) || strncmp(p, " stride=", 8))
					rc = parse_fail(err, err_len, line, "expected count=F stride=F chunk=F");
				p += 8;
				if (!rc && (parse_formula(&p, cur->n_args, &m->stride) || strncmp(p, " chunk=", 7)))
					rc = parse_fail(err, err_len, line, "expected count=F stride=F chunk=F");
				p += 7;
				if (!rc && (parse_formula(&p, cur->n_args, &m->chunk) || *p))
					rc = parse_fail(err, err_len, line, "expected count=F stride=F chunk=F");
			} else {
				rc = parse_fail(err, err_len, line, "expected length= or count= after the argument");
			}
			cur->n_terms++;
		} else if (!strcmp(buf, "end")) {
			if (!cur)
				rc = parse_fail(err, err_len, line, "'end' outside a kernel");
			cur = NULL;
		} else {
			rc = parse_fail(err, err_len, line, "expected 'kernel', 'term', 'end', '#' or a blank line");
		}
	}
	if (!rc && line == 0)
		rc = parse_fail(err, err_len, 1, "empty profile: expected the header 'gpumux-templates 1'");
	if (!rc && cur)
		rc = parse_fail(err, err_len, line, "the last kernel has no 'end'");
	if (rc) {
		gmx_tpl_set_free(set);
		return rc;
	}
	if (set->n)
		qsort(set->t, set->n, sizeof(*set->t), gmx_tpl__cmp_by_name);
	for (uint32_t i = 1; i < set->n; i++)
		if (!strcmp(set->t[i].name, set->t[i - 1].name)) {
			snprintf(err, err_len, "kernel '%s' appears twice", set->t[i].name);
			gmx_tpl_set_free(set);
			return -EINVAL;
		}
	return 0;
}
