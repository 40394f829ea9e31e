/* Byte sources for the importers: file or memory, gzip inflated on the fly so a
 * large trace is never held compressed and decompressed at once. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "trace_internal.h"

int gmx_src_fail(gmx_src_t *s, const char *fmt, ...)
{
	/* Keep the first message: it names where things went wrong first. */
	if (s->err && s->err_len && !s->err[0]) {
		char msg[512];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		/* "FILE:LINE:COL: what" when the message starts with a place, else "FILE: what". */
		int placed = msg[0] >= '0' && msg[0] <= '9';
		snprintf(s->err, s->err_len, "%s:%s%s", s->label, placed ? "" : " ", msg);
		/* One line, whatever the message carried. */
		for (char *p = s->err; *p; p++)
			if (*p == '\n' || *p == '\r')
				*p = ' ';
	}
	return -EINVAL;
}

/* Raw (possibly compressed) bytes: the sniffed prefix first, then the file or memory. */
static long raw_read(gmx_src_t *s, unsigned char *buf, size_t n)
{
	size_t got = 0;
	while (got < n && s->peek_pos < s->peek_len)
		buf[got++] = s->peek[s->peek_pos++];
	if (got == n)
		return (long)got;
	if (s->f) {
		size_t r = fread(buf + got, 1, n - got, s->f);
		if (r == 0 && ferror(s->f)) {
			int e = errno ? errno : EIO;
			gmx_src_fail(s, "byte %llu: read error: %s", (unsigned long long)s->raw_off, strerror(e));
			return -e;
		}
		got += r;
	} else if (s->mem) {
		size_t r = s->mem_len - s->mem_pos;
		if (r > n - got)
			r = n - got;
		memcpy(buf + got, s->mem + s->mem_pos, r);
		s->mem_pos += r;
		got += r;
	}
	return (long)got;
}

int gmx_src_open(gmx_src_t *s, const char *path, const void *mem, size_t len, char *err, size_t err_len)
{
	memset(s, 0, sizeof(*s));
	s->label = path ? path : "(memory)";
	s->err = err;
	s->err_len = err_len;
	if (err && err_len)
		err[0] = 0;
	if (mem || !path) {
		s->mem = mem ? mem : (const unsigned char *)"";
		s->mem_len = mem ? len : 0;
	} else {
		s->f = fopen(path, "rb");
		if (!s->f) {
			int e = errno;
			gmx_src_fail(s, "cannot open: %s", strerror(e));
			return -e;
		}
	}
	/* Sniff the gzip magic (1f 8b) from the content, not the name. */
	long r = 0;
	size_t want = 2;
	while (s->peek_len < want) {
		if (s->f) {
			size_t k = fread(s->peek + s->peek_len, 1, want - s->peek_len, s->f);
			if (!k)
				break;
			r = (long)k;
		} else {
			size_t k = s->mem_len - s->mem_pos;
			if (k > want - s->peek_len)
				k = want - s->peek_len;
			if (!k)
				break;
			memcpy(s->peek + s->peek_len, s->mem + s->mem_pos, k);
			s->mem_pos += k;
			r = (long)k;
		}
		s->peek_len += (size_t)r;
	}
	if (s->f && ferror(s->f)) {
		int e = errno ? errno : EIO;
		gmx_src_fail(s, "byte 0: read error: %s", strerror(e));
		gmx_src_close(s);
		return -e;
	}
	if (s->peek_len == 2 && s->peek[0] == 0x1f && s->peek[1] == 0x8b) {
		s->gz = 1;
		s->in = malloc(GMX_SRC_INBUF);
		if (!s->in || inflateInit2(&s->zs, 15 + 16) != Z_OK) {
			gmx_src_fail(s, "out of memory starting gzip decompression");
			gmx_src_close(s);
			return -ENOMEM;
		}
	}
	return 0;
}

static long src_read_raw(gmx_src_t *s, void *buf, size_t n);

long gmx_src_read(gmx_src_t *s, void *buf, size_t n)
{
	if (s->back_pos < s->back_len) {
		size_t k = s->back_len - s->back_pos;
		if (k > n)
			k = n;
		memcpy(buf, s->back + s->back_pos, k);
		s->back_pos += k;
		return (long)k;
	}
	return src_read_raw(s, buf, n);
}

int gmx_src_head(gmx_src_t *s, size_t n, const unsigned char **head, size_t *len)
{
	free(s->back);
	s->back = malloc(n + 1);
	s->back_len = s->back_pos = 0;
	if (!s->back)
		return -ENOMEM;
	while (s->back_len < n) {
		long r = src_read_raw(s, s->back + s->back_len, n - s->back_len);
		if (r < 0)
			return (int)r;
		if (r == 0)
			break;
		s->back_len += (size_t)r;
	}
	s->back[s->back_len] = 0;
	*head = s->back;
	*len = s->back_len;
	return 0;
}

static long src_read_raw(gmx_src_t *s, void *buf, size_t n)
{
	if (!s->gz) {
		long r = raw_read(s, buf, n);
		if (r > 0) {
			s->raw_off += (uint64_t)r;
			s->out_off += (uint64_t)r;
		}
		return r;
	}
	if (s->gz_done || n == 0)
		return 0;
	s->zs.next_out = buf;
	s->zs.avail_out = (uInt)(n > (1u << 30) ? (1u << 30) : n);
	while (s->zs.avail_out) {
		if (s->zs.avail_in == 0) {
			long r = raw_read(s, s->in, GMX_SRC_INBUF);
			if (r < 0)
				return r;
			if (r == 0) {
				/* Input ended inside a gzip member: the file was cut short. */
				if ((size_t)s->zs.avail_out < n)
					break; /* hand out what we have; the next call reports */
				return gmx_src_fail(s, "byte %llu: gzip stream truncated (the file ends before the "
						    "compressed data does)",
						    (unsigned long long)s->raw_off);
			}
			s->raw_off += (uint64_t)r;
			s->zs.next_in = s->in;
			s->zs.avail_in = (uInt)r;
		}
		int rc = inflate(&s->zs, Z_NO_FLUSH);
		if (rc == Z_STREAM_END) {
			/* Another gzip member may follow (concatenated .gz files are valid). */
			if (s->zs.avail_in == 0) {
				unsigned char probe;
				long r = raw_read(s, &probe, 1);
				if (r < 0)
					return r;
				if (r == 0) {
					s->gz_done = 1;
					break;
				}
				s->raw_off += 1;
				s->in[0] = probe;
				s->zs.next_in = s->in;
				s->zs.avail_in = 1;
			}
			if (inflateReset(&s->zs) != Z_OK)
				return gmx_src_fail(s, "byte %llu: cannot restart gzip decompression",
						    (unsigned long long)(s->raw_off - s->zs.avail_in));
			continue;
		}
		if (rc == Z_BUF_ERROR && s->zs.avail_in == 0)
			continue; /* needs more input */
		if (rc != Z_OK) {
			uint64_t at = s->raw_off - s->zs.avail_in;
			return gmx_src_fail(s, "byte %llu: corrupt gzip data (%s)", (unsigned long long)at,
					    s->zs.msg ? s->zs.msg : "inflate failed");
		}
	}
	size_t got = n - s->zs.avail_out;
	s->out_off += got;
	return (long)got;
}

void gmx_src_close(gmx_src_t *s)
{
	if (s->f)
		fclose(s->f);
	s->f = NULL;
	if (s->gz)
		inflateEnd(&s->zs);
	s->gz = 0;
	free(s->in);
	s->in = NULL;
	free(s->back);
	s->back = NULL;
	s->back_len = s->back_pos = 0;
}

int gmx_src_slurp(gmx_src_t *s, char **text, size_t *len, size_t limit)
{
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap + 1);
	if (!buf)
		return -ENOMEM;
	for (;;) {
		if (n == cap) {
			if (cap >= limit) {
				free(buf);
				return gmx_src_fail(s, "byte %zu: file larger than %zu bytes: not a CSV trace", n, limit);
			}
			char *nb = realloc(buf, cap * 2 + 1);
			if (!nb) {
				free(buf);
				return -ENOMEM;
			}
			buf = nb;
			cap *= 2;
		}
		long r = gmx_src_read(s, buf + n, cap - n);
		if (r < 0) {
			free(buf);
			return (int)r;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	buf[n] = 0;
	*text = buf;
	*len = n;
	return 0;
}

int gmx_grow(void **arr, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return 0;
	size_t nc = *cap ? *cap * 2 : 256;
	while (nc <= n)
		nc *= 2;
	void *p = realloc(*arr, nc * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = nc;
	return 0;
}

static size_t hash64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ull;
	k ^= k >> 33;
	return (size_t)k;
}

static int map_rehash(gmx_u64map_t *m, size_t ncap)
{
	gmx_u64map_t nm = {0};
	nm.keys = malloc(ncap * sizeof(*nm.keys));
	nm.vals = malloc(ncap * sizeof(*nm.vals));
	nm.used = calloc(ncap, 1);
	if (!nm.keys || !nm.vals || !nm.used) {
		gmx_u64map_free(&nm);
		return -ENOMEM;
	}
	nm.cap = ncap;
	for (size_t i = 0; i < m->cap; i++)
		if (m->used[i] == 1)
			gmx_u64map_put(&nm, m->keys[i], m->vals[i]);
	gmx_u64map_free(m);
	*m = nm;
	return 0;
}

int gmx_u64map_put(gmx_u64map_t *m, uint64_t key, uint32_t val)
{
	if ((m->n + 1) * 2 > m->cap) {
		int rc = map_rehash(m, m->cap ? m->cap * 2 : 1024);
		if (rc)
			return rc;
	}
	size_t mask = m->cap - 1, i = hash64(key) & mask, tomb = SIZE_MAX;
	while (m->used[i]) {
		if (m->used[i] == 1 && m->keys[i] == key) {
			m->vals[i] = val;
			return 0;
		}
		if (m->used[i] == 2 && tomb == SIZE_MAX)
			tomb = i;
		i = (i + 1) & mask;
	}
	if (tomb != SIZE_MAX)
		i = tomb;
	m->used[i] = 1;
	m->keys[i] = key;
	m->vals[i] = val;
	m->n++;
	return 0;
}

static size_t map_find(const gmx_u64map_t *m, uint64_t key)
{
	if (!m->cap)
		return SIZE_MAX;
	size_t mask = m->cap - 1, i = hash64(key) & mask;
	while (m->used[i]) {
		if (m->used[i] == 1 && m->keys[i] == key)
			return i;
		i = (i + 1) & mask;
	}
	return SIZE_MAX;
}

int gmx_u64map_get(const gmx_u64map_t *m, uint64_t key, uint32_t *val)
{
	size_t i = map_find(m, key);
	if (i == SIZE_MAX)
		return 0;
	*val = m->vals[i];
	return 1;
}

int gmx_u64map_del(gmx_u64map_t *m, uint64_t key)
{
	size_t i = map_find(m, key);
	if (i == SIZE_MAX)
		return 0;
	/* Tombstone: keeps probe chains intact; n still counts it for the load factor. */
	m->used[i] = 2;
	return 1;
}

void gmx_u64map_free(gmx_u64map_t *m)
{
	free(m->keys);
	free(m->vals);
	free(m->used);
	memset(m, 0, sizeof(*m));
}
