/*
 * PTX text: each `.entry NAME ( .param ... , ... )` and its parameter layout.
 *
 * A kernel parameter is `.param [.align N] .TYPE [pointer attributes] NAME[[COUNT]]`; it is
 * placed at the next multiple of its alignment (N, else the size of TYPE), as the parameter
 * buffer of cuLaunchKernel lays it out (PTX ISA, "Kernel Function Parameters"). Attributes
 * after the type (`.ptr .global .align 16`) describe the pointee and do not move the
 * parameter. Comments and string literals are skipped.
 */
#include "fb_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct {
	const char *p, *end;
	const char *tok; /* current token */
	size_t len;
} lex_t;

static int is_ident(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
	       c == '$' || c == '%';
}

/* Advances to the next token: a directive (.name), an identifier or number, or one character.
 * Returns 0 at the end of the text. */
static int next(lex_t *l)
{
	const char *p = l->p;
	for (;;) {
		while (p < l->end &&
		       (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' || *p == '\v'))
			p++;
		if (l->end - p >= 2 && p[0] == '/' && p[1] == '/') {
			while (p < l->end && *p != '\n')
				p++;
		} else if (l->end - p >= 2 && p[0] == '/' && p[1] == '*') {
			p += 2;
			while (l->end - p >= 2 && !(p[0] == '*' && p[1] == '/'))
				p++;
			p = l->end - p >= 2 ? p + 2 : l->end;
		} else if (p < l->end && *p == '"') {
			p++;
			while (p < l->end && *p != '"' && *p != '\n')
				p += (*p == '\\' && l->end - p >= 2) ? 2 : 1;
			if (p < l->end)
				p++;
		} else {
			break;
		}
	}
	if (p >= l->end) {
		l->p = l->tok = l->end;
		l->len = 0;
		return 0;
	}
	const char *s = p;
	if (*p == '.' || is_ident(*p)) {
		p++;
		while (p < l->end && is_ident(*p))
			p++;
	} else {
		p++;
	}
	l->tok = s;
	l->len = (size_t)(p - s);
	l->p = p;
	return 1;
}

static int is(const lex_t *l, const char *s)
{
	size_t n = strlen(s);
	return l->len == n && memcmp(l->tok, s, n) == 0;
}

/* Size in bytes of a parameter type directive, or 0 if it is not one. */
static uint32_t type_size(const lex_t *l)
{
	static const struct {
		const char *name;
		uint32_t size;
	} types[] = {
	    {".b8", 1},	   {".u8", 1},	   {".s8", 1},	       {".b16", 2},	{".u16", 2}, {".s16", 2},
	    {".f16", 2},   {".bf16", 2},   {".b32", 4},	       {".u32", 4},	{".s32", 4}, {".f32", 4},
	    {".f16x2", 4}, {".bf16x2", 4}, {".b64", 8},	       {".u64", 8},	{".s64", 8}, {".f64", 8},
	    {".b128", 16}, {".texref", 8}, {".samplerref", 8}, {".surfref", 8},
	};
	for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
		if (is(l, types[i].name))
			return types[i].size;
	return 0;
}

/* A decimal or hex number token, bounded by max; -1 if it is not one. */
static long long number(const lex_t *l, long long max)
{
	if (l->len == 0 || l->len > 20 || !(l->tok[0] >= '0' && l->tok[0] <= '9'))
		return -1;
	char buf[24];
	memcpy(buf, l->tok, l->len);
	buf[l->len] = '\0';
	char *end;
	unsigned long long v = strtoull(buf, &end, 0);
	if (*end == 'U' || *end == 'u')
		end++;
	return *end || v > (unsigned long long)max ? -1 : (long long)v;
}

/* Parses the parameter list after `.entry NAME (`; adds the kernel. */
static int entry_params(gmx_fatbin_t *fb, lex_t *l, const char *name, size_t name_len, const char *where,
			char *err, size_t err_len)
{
	gmx_kparam_t *kp = NULL;
	size_t n = 0, cap = 0;
	uint32_t offset = 0;
	int rc = 0;
#define FAIL(...)                                                                                            \
	do {                                                                                                 \
		rc = gmx_fb__err(err, err_len, -EINVAL, __VA_ARGS__);                                        \
		goto out;                                                                                    \
	} while (0)
	if (!next(l))
		FAIL("%s: .entry %.*s: the text ends in its parameter list", where, (int)name_len, name);
	while (!is(l, ")")) {
		if (!is(l, ".param"))
			FAIL("%s: .entry %.*s: parameter %zu: expected .param, found '%.*s'", where,
			     (int)name_len, name, n, (int)(l->len > 40 ? 40 : l->len), l->tok);
		uint32_t align = 0, size = 0;
		int have_type = 0;
		for (;;) {
			if (!next(l))
				FAIL("%s: .entry %.*s: the text ends in parameter %zu", where, (int)name_len,
				     name, n);
			if (is(l, ".align") && !have_type) {
				long long a;
				if (!next(l) || (a = number(l, 4096)) <= 0 || (a & (a - 1)))
					FAIL("%s: .entry %.*s: parameter %zu: .align needs a power of two up "
					     "to 4096",
					     where, (int)name_len, name, n);
				align = (uint32_t)a;
			} else if (!have_type && type_size(l)) {
				size = type_size(l);
				have_type = 1;
			} else if (l->tok[0] == '.') {
				/* state space, .ptr and the pointee's .align: skip the directive and a number
				 */
				if (is(l, ".align") && (!next(l) || number(l, 1 << 30) < 0))
					FAIL("%s: .entry %.*s: parameter %zu: .align without a number", where,
					     (int)name_len, name, n);
			} else if (is_ident(l->tok[0])) {
				break; /* the parameter's name */
			} else {
				FAIL("%s: .entry %.*s: parameter %zu: unexpected '%.*s'", where,
				     (int)name_len, name, n, (int)l->len, l->tok);
			}
		}
		if (!have_type)
			FAIL("%s: .entry %.*s: parameter %zu has no type PTX allows for a parameter", where,
			     (int)name_len, name, n);
		uint64_t count = 1;
		if (!next(l))
			FAIL("%s: .entry %.*s: the text ends after parameter %zu", where, (int)name_len, name,
			     n);
		while (is(l, "[")) {
			long long c;
			if (!next(l) || (c = number(l, GMX_FB_PARAM_BYTES_MAX)) <= 0 || !next(l) ||
			    !is(l, "]"))
				FAIL("%s: .entry %.*s: parameter %zu: bad array size", where, (int)name_len,
				     name, n);
			count *= (uint64_t)c;
			if (count > GMX_FB_PARAM_BYTES_MAX)
				FAIL("%s: .entry %.*s: parameter %zu is larger than %u bytes", where,
				     (int)name_len, name, n, GMX_FB_PARAM_BYTES_MAX);
			if (!next(l))
				FAIL("%s: .entry %.*s: the text ends after parameter %zu", where,
				     (int)name_len, name, n);
		}
		if (!align)
			align = size;
		uint64_t off = ((uint64_t)offset + align - 1) / align * align;
		uint64_t bytes = size * count;
		if (off + bytes > GMX_FB_PARAM_BYTES_MAX)
			FAIL("%s: .entry %.*s: parameters exceed %u bytes", where, (int)name_len, name,
			     GMX_FB_PARAM_BYTES_MAX);
		if (n == GMX_FB_PARAMS_MAX)
			FAIL("%s: .entry %.*s: more than %u parameters", where, (int)name_len, name,
			     GMX_FB_PARAMS_MAX);
		if (n == cap) {
			cap = cap ? cap * 2 : 16;
			gmx_kparam_t *k = realloc(kp, cap * sizeof *k);
			if (!k) {
				rc = -ENOMEM;
				goto out;
			}
			kp = k;
		}
		kp[n++] = (gmx_kparam_t){.offset = (uint32_t)off, .size = (uint32_t)bytes};
		offset = (uint32_t)(off + bytes);
		if (is(l, ",")) {
			if (!next(l))
				FAIL("%s: .entry %.*s: the text ends in its parameter list", where,
				     (int)name_len, name);
		} else if (!is(l, ")")) {
			FAIL("%s: .entry %.*s: after parameter %zu: expected ',' or ')', found '%.*s'", where,
			     (int)name_len, name, n - 1, (int)(l->len > 40 ? 40 : l->len), l->tok);
		}
	}
#undef FAIL
	rc = gmx_fb__add(fb, name, name_len, kp, (uint32_t)n, offset, GMX_FB_FROM_PTX);
out:
	free(kp);
	return rc;
}

/* Skips a body whose "{" was the last token, to just after its matching "}" (or the end): most
 * of a PTX text is bodies, and nothing in them declares an entry, so they are scanned for
 * braces, comments and strings only, without tokens. */
static void skip_body(lex_t *l)
{
	const char *p = l->p, *end = l->end;
	size_t depth = 1;
	while (p < end && depth) {
		const char *q = p;
		while (q < end && *q != '{' && *q != '}' && *q != '/' && *q != '"')
			q++;
		if (q >= end) {
			p = end;
			break;
		}
		if (*q == '{') {
			depth++;
			p = q + 1;
		} else if (*q == '}') {
			depth--;
			p = q + 1;
		} else if (*q == '"') {
			q++;
			while (q < end && *q != '"' && *q != '\n')
				q += (*q == '\\' && end - q >= 2) ? 2 : 1;
			p = q < end ? q + 1 : end;
		} else if (end - q >= 2 && q[1] == '/') {
			const char *nl = memchr(q, '\n', (size_t)(end - q));
			p = nl ? nl + 1 : end;
		} else if (end - q >= 2 && q[1] == '*') {
			q += 2;
			while (end - q >= 2 && !(q[0] == '*' && q[1] == '/'))
				q++;
			p = end - q >= 2 ? q + 2 : end;
		} else {
			p = q + 1;
		}
	}
	l->p = p;
}

int gmx_fb__ptx(gmx_fatbin_t *fb, const char *p, size_t n, const char *where, char *err, size_t err_len)
{
	lex_t l = {.p = p, .end = p + strnlen(p, n)};
	while (next(&l)) {
		if (l.len == 1 && l.tok[0] == '{') {
			skip_body(&l);
			continue;
		}
		if (!is(&l, ".entry"))
			continue;
		if (!next(&l) || !is_ident(l.tok[0]) || (l.tok[0] >= '0' && l.tok[0] <= '9'))
			return gmx_fb__err(err, err_len, -EINVAL, "%s: .entry without a kernel name", where);
		const char *name = l.tok;
		size_t name_len = l.len;
		if (name_len > GMX_FB_NAME_MAX)
			return gmx_fb__err(err, err_len, -EINVAL, "%s: a kernel name longer than %u bytes",
					   where, GMX_FB_NAME_MAX);
		if (!next(&l))
			return gmx_fb__err(err, err_len, -EINVAL, "%s: the text ends after .entry %.*s",
					   where, (int)name_len, name);
		int rc = is(&l, "(") ? entry_params(fb, &l, name, name_len, where, err, err_len)
				     : gmx_fb__add(fb, name, name_len, NULL, 0, 0, GMX_FB_FROM_PTX);
		if (rc == -ENOMEM)
			return gmx_fb__err(err, err_len, rc, "%s: out of memory", where);
		if (rc)
			return rc;
	}
	return 0;
}
