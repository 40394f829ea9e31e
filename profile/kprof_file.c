/* The kernel-profile file: writer and strict reader.
 *
 * File (text, one record per line, '#' comments; docs/fikit.md):
 *   gmxprof 1
 *   task NAME units U entries N
 *   k ID PREV n C dur Q0 .. Q32 gap Q0 .. Q32 [name SYMBOL]   (N lines)
 *   end
 * repeated per task. ID and PREV are 16 hex digits (PREV 0: every context),
 * the quantiles are ns at q = i / 32, non-decreasing.
 */
#include "kprof_file.h"

#include "gpumux/outfile.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define LINE_MAX_BYTES 8192

static void put_dist(FILE *f, const char *key, const gmx_kdist_t *d)
{
	fprintf(f, " %s", key);
	for (int i = 0; i < GMX_KPROF_QPTS; i++)
		fprintf(f, " %" PRId64, d->q[i]);
}

int gmx_profile_print(FILE *f, const gmx_kprof_t *p, uint32_t n)
{
	fprintf(f, "# gpumux kernel profile (docs/fikit.md): per task, per kernel ID [after PREV],\n"
		   "# duration and following idle gap in ns at quantiles 0, 1/32, ..., 1\n"
		   "gmxprof %d\n", GMX_PROFILE_FORMAT_VERSION);
	for (uint32_t t = 0; t < n; t++) {
		fprintf(f, "task %s units %" PRIu64 " entries %u\n", p[t].task, p[t].units, p[t].n);
		for (uint32_t i = 0; i < p[t].n; i++) {
			const gmx_kprof_entry_t *e = &p[t].e[i];
			fprintf(f, "k %016" PRIx64 " %016" PRIx64 " n %" PRIu64, e->id, e->prev, e->n);
			put_dist(f, "dur", &e->dur);
			put_dist(f, "gap", &e->gap);
			if (e->name) {
				fputs(" name ", f);
				for (const char *c = e->name; *c; c++) /* one line per entry */
					fputc(*c == '\n' || *c == '\r' ? ' ' : *c, f);
			}
			fputc('\n', f);
		}
		fputs("end\n", f);
	}
	return ferror(f) ? -EIO : 0;
}

int gmx_profile_write(const char *path, const gmx_kprof_t *p, uint32_t n, char *err, size_t err_len)
{
	gmx_outfile_t o;
	int rc = gmx_outfile_open(&o, path, err, err_len);
	if (rc)
		return rc;
	gmx_profile_print(o.f, p, n);
	return gmx_outfile_commit(&o, err, err_len);
}

void gmx_profile_free(gmx_kprof_t *p, uint32_t n)
{
	for (uint32_t i = 0; p && i < n; i++)
		gmx_kprof_free(&p[i]);
	free(p);
}

typedef struct reader {
	const char *path;
	int line;
	char *err;
	size_t err_len;
} reader_t;

static int bad(reader_t *r, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(r->err, r->err_len, "%s:%d: %s", r->path, r->line, msg);
	return -EINVAL;
}

/* Next whitespace-separated token from *s, or NULL. */
static char *token(char **s)
{
	char *p = *s;
	while (*p == ' ' || *p == '\t')
		p++;
	if (!*p)
		return NULL;
	char *start = p;
	while (*p && *p != ' ' && *p != '\t')
		p++;
	if (*p)
		*p++ = 0;
	*s = p;
	return start;
}

static int parse_u64(const char *t, int base, uint64_t *out)
{
	if (!t || !*t || *t == '-' || *t == '+')
		return -1;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(t, &end, base);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

static int parse_dist(reader_t *r, char **s, const char *key, gmx_kdist_t *d)
{
	char *t = token(s);
	if (!t || strcmp(t, key))
		return bad(r, "expected '%s' and %d quantiles", key, GMX_KPROF_QPTS);
	for (int i = 0; i < GMX_KPROF_QPTS; i++) {
		uint64_t v;
		t = token(s);
		if (parse_u64(t, 10, &v) || v > INT64_MAX)
			return bad(r, "%s quantile %d: expected a non-negative integer (ns), got '%s'", key, i,
				   t ? t : "end of line");
		d->q[i] = (int64_t)v;
		if (i && d->q[i] < d->q[i - 1])
			return bad(r, "%s quantiles must not decrease (%" PRId64 " after %" PRId64 ")", key, d->q[i],
				   d->q[i - 1]);
	}
	return 0;
}

/* One "k ..." line into e (name points into the line). */
static int parse_entry(reader_t *r, char *s, gmx_kprof_entry_t *e)
{
	memset(e, 0, sizeof(*e));
	char *t = token(&s);
	if (!t || strcmp(t, "k"))
		return bad(r, "expected an entry 'k ID PREV n COUNT dur ... gap ...' or 'end'");
	t = token(&s);
	if (!t || strlen(t) != 16 || parse_u64(t, 16, &e->id) || !e->id)
		return bad(r, "kernel ID: expected 16 hex digits, not zero, got '%s'", t ? t : "end of line");
	t = token(&s);
	if (!t || strlen(t) != 16 || parse_u64(t, 16, &e->prev))
		return bad(r, "previous kernel ID: expected 16 hex digits, got '%s'", t ? t : "end of line");
	t = token(&s);
	if (!t || strcmp(t, "n"))
		return bad(r, "expected 'n COUNT' after the IDs");
	t = token(&s);
	if (parse_u64(t, 10, &e->n) || !e->n)
		return bad(r, "count: expected a positive integer, got '%s'", t ? t : "end of line");
	int rc = parse_dist(r, &s, "dur", &e->dur);
	if (!rc)
		rc = parse_dist(r, &s, "gap", &e->gap);
	if (rc)
		return rc;
	while (*s == ' ' || *s == '\t')
		s++;
	if (!*s)
		return 0;
	if (strncmp(s, "name ", 5) || !s[5])
		return bad(r, "unexpected '%.40s' at the end of the entry (expected 'name SYMBOL' or nothing)", s);
	e->name = s + 5;
	return 0;
}

int gmx_profile_read(const char *path, gmx_kprof_t **out, uint32_t *n_out, char *err, size_t err_len)
{
	*out = NULL;
	*n_out = 0;
	reader_t r = {path, 0, err, err_len};
	FILE *f = fopen(path, "r");
	if (!f) {
		int rc = -errno;
		snprintf(err, err_len, "%s: cannot open: %s", path, strerror(errno));
		return rc;
	}
	char *line = malloc(LINE_MAX_BYTES);
	gmx_kprof_t *v = NULL;
	uint32_t n = 0, cap = 0;
	int rc = line ? 0 : -ENOMEM;
	int state = 0; /* 0: header expected, 1: task or EOF, 2: entries */
	uint64_t left = 0;
	while (!rc && fgets(line, LINE_MAX_BYTES, f)) {
		r.line++;
		size_t len = strlen(line);
		if (len == LINE_MAX_BYTES - 1 && line[len - 1] != '\n') {
			rc = bad(&r, "line longer than %d bytes", LINE_MAX_BYTES - 2);
			break;
		}
		while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = 0;
		char *s = line;
		while (*s == ' ' || *s == '\t')
			s++;
		if (!*s || *s == '#')
			continue;
		if (state == 0) {
			char *t = token(&s), *ver = token(&s);
			if (!t || strcmp(t, "gmxprof"))
				rc = bad(&r, "not a gpumux kernel profile (expected 'gmxprof %d' first)",
					 GMX_PROFILE_FORMAT_VERSION);
			else if (!ver || strcmp(ver, "1") || token(&s))
				rc = bad(&r, "unsupported profile version '%s' (this gpumux reads %d)", ver ? ver : "",
					 GMX_PROFILE_FORMAT_VERSION);
			state = 1;
		} else if (state == 1) {
			char *t = token(&s), *name = token(&s), *ku = token(&s), *u = token(&s), *ke = token(&s),
			     *en = token(&s);
			uint64_t units, entries;
			if (!t || strcmp(t, "task") || !name) {
				rc = bad(&r, "expected 'task NAME units U entries N'");
				break;
			}
			if (!ku || strcmp(ku, "units") || parse_u64(u, 10, &units) || !ke || strcmp(ke, "entries") ||
			    parse_u64(en, 10, &entries) || entries > UINT32_MAX || token(&s)) {
				rc = bad(&r, "task '%s': expected 'units U entries N' after the name", name);
				break;
			}
			for (uint32_t i = 0; i < n; i++)
				if (!strcmp(v[i].task, name)) {
					rc = bad(&r, "task '%s' appears twice", name);
					break;
				}
			if (rc)
				break;
			if (n == cap) {
				uint32_t nc = cap ? 2 * cap : 4;
				gmx_kprof_t *nv = realloc(v, nc * sizeof(*nv));
				if (!nv) {
					rc = -ENOMEM;
					break;
				}
				v = nv;
				cap = nc;
			}
			if ((rc = gmx_kprof_init(&v[n], name)))
				break;
			v[n].units = units;
			n++;
			left = entries;
			state = 2;
		} else if (left == 0) {
			if (strcmp(s, "end"))
				rc = bad(&r, "task '%s': expected 'end' after its %u entries", v[n - 1].task, v[n - 1].n);
			state = 1;
		} else {
			if (!strncmp(s, "end", 3) && (!s[3] || s[3] == ' ')) {
				rc = bad(&r, "task '%s': 'end' after %u entries, the task line announced %" PRIu64,
					 v[n - 1].task, v[n - 1].n, v[n - 1].n + left);
				break;
			}
			gmx_kprof_entry_t e;
			if ((rc = parse_entry(&r, s, &e)))
				break;
			rc = gmx_kprof_put(&v[n - 1], &e);
			if (rc == -EEXIST)
				rc = bad(&r, "kernel %016" PRIx64 " after %016" PRIx64 " appears twice", e.id, e.prev);
			else if (rc == -EINVAL)
				rc = bad(&r, "invalid entry");
			left--;
		}
	}
	if (!rc && ferror(f)) {
		snprintf(err, err_len, "%s: read error", path);
		rc = -EIO;
	}
	if (!rc && state == 0)
		rc = bad(&r, "empty file: not a gpumux kernel profile");
	if (!rc && state == 2)
		rc = bad(&r, "task '%s': the file ends before its 'end' (%" PRIu64 " entries missing)", v[n - 1].task,
			 left);
	if (rc == -ENOMEM)
		snprintf(err, err_len, "%s: out of memory", path);
	fclose(f);
	free(line);
	if (rc) {
		gmx_profile_free(v, n);
		return rc;
	}
	*out = v;
	*n_out = n;
	return 0;
}
