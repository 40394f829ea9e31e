/* Internals shared by the importers: a byte source that decompresses gzip as it
 * is read, error formatting, and small containers. Not installed. */
#ifndef GMX_TRACE_INTERNAL_H
#define GMX_TRACE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <zlib.h>

#include "trace.h"

#define GMX_SRC_INBUF (1u << 16)

/* A sequential byte source: a file or a memory block, gzip or plain. */
typedef struct gmx_src {
	const char *label; /* the file name used in every message */
	FILE *f;
	const unsigned char *mem;
	size_t mem_len, mem_pos;
	int gz;        /* content is gzip: inflate as we read */
	int gz_done;   /* the last gzip member ended and no input is left */
	z_stream zs;
	unsigned char *in;   /* compressed input buffer */
	uint64_t raw_off;    /* raw bytes read from the file so far */
	uint64_t out_off;    /* decompressed bytes handed out so far */
	unsigned char peek[8];
	size_t peek_len, peek_pos; /* raw bytes read to sniff gzip, handed back first */
	unsigned char *back; /* decompressed bytes read ahead for detection, served first */
	size_t back_len, back_pos;
	char *err;
	size_t err_len;
} gmx_src_t;

/* Opens a source over a file (mem == NULL) or a memory block. 0 or negative errno. */
int gmx_src_open(gmx_src_t *s, const char *path, const void *mem, size_t len, char *err, size_t err_len);

/* Reads up to n decompressed bytes. Returns the count, 0 at a clean end, or a
 * negative errno with the message set (truncated or corrupt gzip, I/O error). */
long gmx_src_read(gmx_src_t *s, void *buf, size_t n);

/* Reads up to n leading decompressed bytes into a buffer that later reads
 * return again; *head points at them. 0 or negative errno. */
int gmx_src_head(gmx_src_t *s, size_t n, const unsigned char **head, size_t *len);

/* Closes the file (if any) and frees the inflater. */
void gmx_src_close(gmx_src_t *s);

/* Formats one error line into s->err; returns -EINVAL for convenience. */
int gmx_src_fail(gmx_src_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The importers. Each reads the whole source and builds *w (already initialised). */
int gmx_trace_kineto_read(gmx_src_t *s, gmx_workload_t *w, gmx_trace_info_t *info);
int gmx_trace_orion_read(gmx_src_t *s, gmx_workload_t *w, gmx_trace_info_t *info);
int gmx_trace_vidur_header(const char *p, size_t n);
int gmx_trace_vidur_read(gmx_src_t *s, const char *path, const gmx_trace_opts_t *o, gmx_workload_t *w,
			 gmx_trace_info_t *info);

/* Sets live[b] (n_buffers bytes) for each buffer live from the start: no ALLOC
 * or FREE names it, or the first that does is a FREE. */
void gmx_trace__live_at_start(const gmx_workload_t *w, uint8_t *live);

/* Bytes of the segments the caching allocator creates for the buffers live from
 * the start (index order) and then every ALLOC and FREE in op order, as
 * gmx_trace_pack places them. 0 or -ENOMEM. */
int gmx_trace__packed_reserved(const gmx_workload_t *w, uint64_t *out);

/* Reads the whole remaining source as text (CSV sources are small). 0 or negative. */
int gmx_src_slurp(gmx_src_t *s, char **text, size_t *len, size_t limit);

/* Open-addressing hash map from a 64-bit key to a 32-bit value. */
typedef struct gmx_u64map {
	uint64_t *keys;
	uint32_t *vals;
	uint8_t *used;
	size_t cap, n;
} gmx_u64map_t;

int gmx_u64map_put(gmx_u64map_t *m, uint64_t key, uint32_t val);
/* Returns 1 and the value when found, else 0. */
int gmx_u64map_get(const gmx_u64map_t *m, uint64_t key, uint32_t *val);
int gmx_u64map_del(gmx_u64map_t *m, uint64_t key);
void gmx_u64map_free(gmx_u64map_t *m);

#include <stdlib.h>
/* qsort that accepts an empty (possibly NULL) array. */
static inline void gmx_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(base, n, size, cmp);
}

/* Growable array helper: ensures room for one more element. 0 or -ENOMEM. */
int gmx_grow(void **arr, size_t *cap, size_t n, size_t elem);

/* Launch overhead the CSV importers put between launches (host think), ns.
 * traces/README.md measures 6-13 us launch-to-start on an idle GPU and advises
 * 2-10 us of overhead for Orion; 5 us sits in the middle. */
#define GMX_TRACE_LAUNCH_OVERHEAD_NS 5000ull

#endif
