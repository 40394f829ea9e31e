/*
 * bench_fatbin: how long the fatbin parser takes on large images, the size of a big library's
 * device code (cuBLAS, cuDNN and PyTorch ship fatbins of 100 MB and more).
 *
 * Images, each built in memory to about SIZE MB:
 *   ptx        containers of plain PTX, 64 kernels each, every kernel name distinct, each kernel
 *              with a body of about 1.5 KB of instructions (what the parser skips)
 *   ptx_zstd   the same PTX entries, zstd-compressed (nvcc's default since CUDA 12.4 for PTX);
 *              the "unpacked" column gives the PTX text the parser reads after inflating
 *   nvcc       nvcc's own multi-architecture fatbin of tests/fatbin/kernels.cu (cubins for
 *              sm_80 and sm_90 plus PTX) repeated back to back (only when nvcc built it)
 * Each image is parsed REPS times (gmx_fatbin_parse, exact length); the table gives the median
 * and the worst of the parse's CPU time (the parse is single-threaded and CPU-bound, so CPU
 * time does not count the waits of a shared machine) and the median wall time beside it, and
 * the rate. The last line is one JSON object.
 *
 * Usage: bench_fatbin [SIZE_MB [REPS]]   (default 100 MB, 5 repetitions)
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <zstd.h>

#include "fb_build.h"
#include "gpumux/fatbin.h"

typedef struct {
	unsigned char *p;
	size_t n, cap;
	size_t payload; /* bytes of the entries once decompressed */
} buf_t;

static double now_s(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Appends n bytes; 0, or -1 when out of memory. */
static int put(buf_t *b, const void *p, size_t n)
{
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 1 << 20;
		while (cap < b->n + n)
			cap *= 2;
		unsigned char *q = realloc(b->p, cap);
		if (!q)
			return -1;
		b->p = q;
		b->cap = cap;
	}
	memcpy(b->p + b->n, p, n);
	b->n += n;
	return 0;
}

/* One container holding one PTX entry (compressed with zstd when z); layout as nvcc writes it:
 * a 16-byte container header, a 64-byte entry header, the payload padded to 8 bytes. */
static int put_container(buf_t *b, const char *ptx, size_t len, int z)
{
	static unsigned char zb[1 << 20];
	const void *payload = ptx;
	size_t plen = len;
	uint64_t flags = GMX_FB_FLAG_PTX, usize = 0;
	if (z) {
		size_t r = ZSTD_compress(zb, sizeof zb, ptx, len, 1);
		if (ZSTD_isError(r))
			return -1;
		payload = zb;
		plen = r;
		flags = GMX_FB_FLAG_PTX | GMX_FB_FLAG_ZSTD;
		usize = len;
	}
	size_t padded = gmx_fb_padded(plen);
	unsigned char h[GMX_FB_CONTAINER_HEADER + GMX_FB_ENTRY_HEADER];
	gmx_fb_write_ptx_headers(h, plen, usize, flags);
	static const unsigned char zero[8];
	b->payload += len;
	if (put(b, h, sizeof h) || put(b, payload, plen) || put(b, zero, padded - plen))
		return -1;
	return 0;
}

/* PTX of 64 kernels with distinct names, mixed parameter lists and bodies of ~1.5 KB. */
static size_t make_ptx(char *t, size_t cap, unsigned base)
{
	size_t len = (size_t)snprintf(t, cap, ".version 8.0\n.target sm_80\n.address_size 64\n");
	for (unsigned i = 0; i < 64 && len + 4096 < cap; i++) {
		len += (size_t)snprintf(t + len, cap - len,
					".visible .entry k%u_%u(\n\t.param .u64 .ptr .global .align 8 a,\n"
					"\t.param .u32 n,\n\t.param .align 8 .b8 s[24],\n\t.param .f64 x\n)\n"
					"{\n\t.reg .b64 %%rd<%u>;\n\tld.param.u64 %%rd1, [a];\n",
					base, i, 8 + i % 5);
		/* Constants as varied as real code's, so that zstd compresses it about as well. */
		static uint32_t lcg = 12345;
		for (unsigned j = 0; j < 40; j++) {
			lcg = lcg * 1664525u + 1013904223u;
			len += (size_t)snprintf(t + len, cap - len, "\tadd.s64 %%rd%u, %%rd%u, %u;\n",
						(j + i) % 7 + 1, j % 7 + 1, lcg >> 8);
		}
		len += (size_t)snprintf(t + len, cap - len, "\tret;\n}\n");
	}
	return len + 1; /* with its NUL */
}

static int build_ptx(buf_t *b, size_t target, int z)
{
	static char t[64 << 10];
	for (unsigned c = 0; b->n < target; c++) {
		size_t len = make_ptx(t, sizeof t, c);
		if (put_container(b, t, len, z))
			return -1;
	}
	return 0;
}

static int build_nvcc(buf_t *b, size_t target, const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	buf_t one = {0};
	unsigned char chunk[1 << 16];
	size_t r;
	while ((r = fread(chunk, 1, sizeof chunk, f)) > 0)
		if (put(&one, chunk, r)) {
			fclose(f);
			free(one.p);
			return -1;
		}
	fclose(f);
	int rc = one.n ? 0 : -1;
	while (rc == 0 && b->n < target)
		rc = put(b, one.p, one.n);
	b->payload = b->n; /* not unpacked here: as stored */
	free(one.p);
	return rc;
}

typedef struct {
	const char *name;
	size_t bytes, payload, kernels;
	double median_s, worst_s, wall_s; /* CPU time (median, worst), wall time (median) */
} result_t;

static int measure(const char *name, const buf_t *b, int reps, result_t *out)
{
	double *t = calloc((size_t)reps, sizeof *t), *w = calloc((size_t)reps, sizeof *w);
	if (!t || !w) {
		free(t);
		free(w);
		return -1;
	}
	size_t kernels = 0;
	for (int i = 0; i < reps; i++) {
		gmx_fatbin_t *fb = NULL;
		char err[256];
		double w0 = now_s(CLOCK_MONOTONIC), t0 = now_s(CLOCK_THREAD_CPUTIME_ID);
		int rc = gmx_fatbin_parse(b->p, b->n, &fb, err, sizeof err);
		t[i] = now_s(CLOCK_THREAD_CPUTIME_ID) - t0;
		w[i] = now_s(CLOCK_MONOTONIC) - w0;
		if (rc) {
			fprintf(stderr, "bench_fatbin: %s: %s\n", name, err);
			free(t);
			free(w);
			return -1;
		}
		kernels = gmx_fatbin_count(fb);
		gmx_fatbin_free(fb);
	}
	qsort(t, (size_t)reps, sizeof *t, cmp_double);
	qsort(w, (size_t)reps, sizeof *w, cmp_double);
	*out = (result_t){name, b->n, b->payload, kernels, t[reps / 2], t[reps - 1], w[reps / 2]};
	free(t);
	free(w);
	return 0;
}

int main(int argc, char **argv)
{
	long mb = argc > 1 ? strtol(argv[1], NULL, 10) : 100;
	int reps = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 5;
	if (mb < 1 || mb > 4096 || reps < 1 || reps > 1000) {
		fprintf(stderr, "usage: bench_fatbin [SIZE_MB (1..4096) [REPS (1..1000)]]\n");
		return 2;
	}
	size_t target = (size_t)mb << 20;
	result_t res[3];
	int n = 0;
	buf_t b = {0};
	if (build_ptx(&b, target, 0) || measure("ptx", &b, reps, &res[n++]))
		return 1;
	b.n = b.payload = 0;
	if (build_ptx(&b, target, 1) || measure("ptx_zstd", &b, reps, &res[n++]))
		return 1;
	b.n = b.payload = 0;
	if (build_nvcc(&b, target, GMX_NVCC_FATBIN) == 0) {
		if (measure("nvcc", &b, reps, &res[n++]))
			return 1;
	} else
		fprintf(stderr,
			"bench_fatbin: %s not readable (built without nvcc?): the nvcc row is skipped\n",
			GMX_NVCC_FATBIN);
	free(b.p);
	printf("fatbin parse, %d repetitions per image\n", reps);
	printf("%-10s %8s %10s %10s %12s %12s %12s %8s\n", "image", "MB", "unpacked", "kernels",
	       "cpu_median_s", "cpu_worst_s", "wall_median_s", "MB/s");
	for (int i = 0; i < n; i++)
		printf("%-10s %8.1f %10.1f %10zu %12.3f %12.3f %12.3f %8.0f\n", res[i].name,
		       (double)res[i].bytes / (1 << 20), (double)res[i].payload / (1 << 20), res[i].kernels,
		       res[i].median_s, res[i].worst_s, res[i].wall_s,
		       (double)res[i].bytes / (1 << 20) / res[i].median_s);
	printf("{\"bench\":\"fatbin_parse\",\"reps\":%d", reps);
	for (int i = 0; i < n; i++)
		printf(",\"%s\":{\"bytes\":%zu,\"unpacked_bytes\":%zu,\"kernels\":%zu,\"cpu_median_s\":%.4f,"
		       "\"cpu_worst_s\":%.4f,"
		       "\"wall_median_s\":%.4f}",
		       res[i].name, res[i].bytes, res[i].payload, res[i].kernels, res[i].median_s,
		       res[i].worst_s, res[i].wall_s);
	printf("}\n");
	return 0;
}
