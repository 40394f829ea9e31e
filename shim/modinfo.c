/*
 * Kernel identity from the code a program loads (see modinfo.h).
 *
 * A driver before CUDA 12.4 cannot name a kernel or describe its parameters (cuFuncGetName
 * came in 12.3, cuFuncGetParamInfo in 12.4), and without a layout the interposer cannot copy
 * a launch's parameters to queue it. The image the program hands the driver says the same:
 * it is parsed here at load time (outside any lock), and the handles the driver then hands out
 * for its kernels are mapped to the parsed entries.
 *
 * Locking: one mutex guards the handle table; the driver is never called with it held. It
 * nests inside the queue lock (cmd.c looks kernels up with the queue lock held).
 */
#define _GNU_SOURCE
#include "modinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define BUCKETS 4096
#define FILE_MAX ((size_t)1 << 30) /* a module file the interposer reads itself */
#define MESSAGES_MAX 5		   /* parse failures reported on stderr per process */

typedef struct image {
	gmx_fatbin_t *fb;
	int refs;
} image_t;

/* A module or library (k == NULL), or a function or kernel handle of one of its kernels. */
typedef struct entry {
	struct entry *next;
	const void *h;
	image_t *img;
	const gmx_kernel_info_t *k;
} entry_t;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static entry_t *g_tbl[BUCKETS];
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static gmx_kinfo_mode_t g_mode;
static int g_learning;
static unsigned long g_unidentified, g_agree, g_differ, g_absent, g_messages;
static int g_unidentified_said;

static size_t bucket(const void *h)
{
	uintptr_t x = (uintptr_t)h;
	x ^= x >> 17;
	x *= 0x9E3779B97F4A7C15ull;
	return (size_t)(x >> 40) & (BUCKETS - 1);
}

void gmx_shim_modinfo_atfork_prepare(void)
{
	pthread_mutex_lock(&g_lock);
}

void gmx_shim_modinfo_atfork_parent(void)
{
	pthread_mutex_unlock(&g_lock);
}

/* The parent's driver handles mean nothing in the child; its images stay allocated. The
 * forking thread holds the lock (prepare), so the table is whole and the lock is released. */
void gmx_shim_modinfo_atfork_child(void)
{
	memset(g_tbl, 0, sizeof g_tbl);
	g_unidentified = g_agree = g_differ = g_absent = 0;
	g_unidentified_said = 0;
	pthread_mutex_unlock(&g_lock);
}

static void init_once(void)
{
	gmx_shim_load();
	const char *m = getenv("GPUMUX_SHIM_KERNEL_INFO");
	g_mode = GMX_KINFO_DRIVER;
	if (m && strcmp(m, "image") == 0)
		g_mode = GMX_KINFO_IMAGE;
	else if (m && strcmp(m, "verify") == 0)
		g_mode = GMX_KINFO_VERIFY;
	else if (m && *m && strcmp(m, "driver") != 0)
		fprintf(stderr,
			"gpumux shim: unknown GPUMUX_SHIM_KERNEL_INFO=%s (expected driver, image or verify); "
			"using driver\n",
			m);
	int driver_knows = GMX_REAL(cuFuncGetName) && GMX_REAL(cuFuncGetParamInfo);
	g_learning = !gmx_shim_policy->passthrough && (g_mode != GMX_KINFO_DRIVER || !driver_knows);
	if (g_learning)
		gmx_shim_log("kernel-info source=%s (driver %s cuFuncGetName/cuFuncGetParamInfo)",
			     g_mode == GMX_KINFO_VERIFY			  ? "driver, verified against images"
			     : driver_knows && g_mode == GMX_KINFO_DRIVER ? "driver"
									  : "images",
			     driver_knows ? "has" : "lacks");
}

gmx_kinfo_mode_t gmx_shim_kinfo_mode(void)
{
	pthread_once(&g_once, init_once);
	return g_mode;
}

int gmx_shim_modinfo_learning(void)
{
	pthread_once(&g_once, init_once);
	return g_learning;
}

/* Bytes readable from p on: the readable mappings of /proc/self/maps that start at p's and
 * follow it without a gap. 0 when p is not in a readable mapping. */
static size_t readable_extent(const void *p)
{
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return 0;
	uintptr_t a = (uintptr_t)p, end = 0;
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		unsigned long s, e;
		char perms[8];
		if (sscanf(line, "%lx-%lx %7s", &s, &e, perms) != 3)
			continue;
		if (end == 0) {
			if (a >= s && a < e && perms[0] == 'r')
				end = e;
		} else if (s == end && perms[0] == 'r') {
			end = e;
		} else if (s >= end) {
			break;
		}
	}
	free(line);
	fclose(f);
	return end ? (size_t)(end - a) : 0;
}

static void refused(const char *who, const char *why)
{
	gmx_shim_log("kernel-info %s: image not read: %s", who, why);
	if (__atomic_fetch_add(&g_messages, 1, __ATOMIC_RELAXED) < MESSAGES_MAX)
		fprintf(stderr,
			"gpumux shim: %s: cannot read the kernels of this image (%s); launches of them go to "
			"the driver unscheduled\n",
			who, why);
}

static gmx_fatbin_t *parse(const void *p, size_t n, const char *who)
{
	gmx_fatbin_t *fb = NULL;
	char err[256];
	if (gmx_fatbin_parse_within(p, n, &fb, err, sizeof err) != 0) {
		refused(who, err);
		return NULL;
	}
	gmx_shim_log("kernel-info %s: %zu kernels from a %zu-byte image", who, gmx_fatbin_count(fb),
		     gmx_fatbin_image_size(fb));
	return fb;
}

gmx_fatbin_t *gmx_shim_modinfo_parse_mem(const void *image, const char *who)
{
	if (!image || !gmx_shim_modinfo_learning())
		return NULL;
	size_t n = readable_extent(image);
	if (n < 4) {
		refused(who, "the image pointer is not readable memory");
		return NULL;
	}
	uint32_t magic;
	memcpy(&magic, image, 4);
	if (magic == GMX_FATBIN_WRAPPER_MAGIC && n >= 16) {
		/* The wrapper points at the fatbin, which lies in another section: bound it there. */
		const void *data;
		memcpy(&data, (const char *)image + 8, sizeof data);
		size_t dn = data ? readable_extent(data) : 0;
		if (dn < 16) {
			refused(who, "the fatbin wrapper points outside readable memory");
			return NULL;
		}
		return parse(data, dn, who);
	}
	return parse(image, n, who);
}

gmx_fatbin_t *gmx_shim_modinfo_parse_file(const char *path, const char *who)
{
	if (!path || !gmx_shim_modinfo_learning())
		return NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0 || st.st_size < 0 || (size_t)st.st_size > FILE_MAX) {
		if (fd >= 0)
			close(fd);
		return NULL; /* the driver reports a missing or unreadable file itself */
	}
	size_t n = (size_t)st.st_size, got = 0;
	char *buf = malloc(n + 1);
	while (buf && got < n) {
		ssize_t r = read(fd, buf + got, n - got);
		if (r <= 0) {
			if (r < 0 && errno == EINTR)
				continue;
			break;
		}
		got += (size_t)r;
	}
	close(fd);
	gmx_fatbin_t *fb = NULL;
	if (!buf)
		refused(who, "out of memory");
	else if (got != n)
		refused(who, "short read");
	else {
		buf[n] = '\0'; /* PTX text ends there */
		fb = parse(buf, n + 1, who);
	}
	free(buf);
	return fb;
}

static void unref(image_t *img)
{
	if (img && --img->refs == 0) {
		gmx_fatbin_free(img->fb);
		free(img);
	}
}

/* Removes h's entry, if any. Lock held. */
static void drop(const void *h)
{
	for (entry_t **pp = &g_tbl[bucket(h)]; *pp; pp = &(*pp)->next)
		if ((*pp)->h == h) {
			entry_t *e = *pp;
			*pp = e->next;
			unref(e->img);
			free(e);
			return;
		}
}

static entry_t *find(const void *h)
{
	for (entry_t *e = g_tbl[bucket(h)]; e; e = e->next)
		if (e->h == h)
			return e;
	return NULL;
}

/* Maps h to (img, k), replacing what h meant before (a handle the driver reused). Lock held. */
static void put(const void *h, image_t *img, const gmx_kernel_info_t *k)
{
	drop(h);
	entry_t *e = malloc(sizeof *e);
	if (!e)
		return; /* the kernel stays unidentified: counted at launch */
	img->refs++;
	*e = (entry_t){.next = g_tbl[bucket(h)], .h = h, .img = img, .k = k};
	g_tbl[bucket(h)] = e;
}

void gmx_shim_modinfo_loaded(CUresult r, void *handle, gmx_fatbin_t *fb)
{
	if (!fb)
		return;
	image_t *img = r == CUDA_SUCCESS && handle ? malloc(sizeof *img) : NULL;
	if (!img) {
		gmx_fatbin_free(fb);
		return;
	}
	*img = (image_t){.fb = fb, .refs = 1};
	pthread_mutex_lock(&g_lock);
	put(handle, img, NULL);
	unref(img); /* the entry holds it now */
	pthread_mutex_unlock(&g_lock);
}

void gmx_shim_modinfo_alias(void *handle, void *owner)
{
	pthread_mutex_lock(&g_lock);
	entry_t *o = find(owner);
	if (o && !o->k && handle != owner)
		put(handle, o->img, NULL);
	pthread_mutex_unlock(&g_lock);
}

void gmx_shim_modinfo_function(void *fn, void *owner, const char *name)
{
	if (!fn || !name)
		return;
	pthread_mutex_lock(&g_lock);
	entry_t *o = find(owner);
	const gmx_kernel_info_t *k = o && !o->k ? gmx_fatbin_find(o->img->fb, name) : NULL;
	if (k)
		put(fn, o->img, k);
	else
		drop(fn);
	pthread_mutex_unlock(&g_lock);
}

void gmx_shim_modinfo_same_kernel(void *fn, void *kernel)
{
	pthread_mutex_lock(&g_lock);
	entry_t *k = find(kernel);
	if (k && k->k && fn != kernel)
		put(fn, k->img, k->k);
	pthread_mutex_unlock(&g_lock);
}

const gmx_kernel_info_t *gmx_shim_modinfo_lookup(const void *fn)
{
	pthread_mutex_lock(&g_lock);
	entry_t *e = find(fn);
	const gmx_kernel_info_t *k = e ? e->k : NULL;
	pthread_mutex_unlock(&g_lock);
	return k;
}

void gmx_shim_modinfo_unloaded(void *handle)
{
	pthread_mutex_lock(&g_lock);
	entry_t *m = find(handle);
	image_t *img = m && !m->k ? m->img : NULL;
	if (img) { /* every handle of this image goes: functions, kernels, a library's module */
		img->refs++;
		for (size_t b = 0; b < BUCKETS; b++)
			for (entry_t **pp = &g_tbl[b]; *pp;) {
				entry_t *e = *pp;
				if (e->img == img) {
					*pp = e->next;
					unref(e->img);
					free(e);
				} else {
					pp = &e->next;
				}
			}
		unref(img);
	}
	pthread_mutex_unlock(&g_lock);
}

void gmx_shim_modinfo_unidentified(const void *fn, const char *name)
{
	__atomic_add_fetch(&g_unidentified, 1, __ATOMIC_RELAXED);
	if (__atomic_exchange_n(&g_unidentified_said, 1, __ATOMIC_RELAXED))
		return;
	fprintf(stderr,
		"gpumux shim: the parameters of kernel %s (handle %p) are unknown (%s): its launches go to "
		"the driver unscheduled (counted; reported at exit)\n",
		name, fn,
		GMX_REAL(cuFuncGetParamInfo)
		    ? "the driver could not describe them"
		    : "the driver has no cuFuncGetParamInfo and the kernel's image was not "
		      "seen or not readable");
	gmx_shim_log("kernel-info unidentified kernel=%s handle=%p: launches go to the driver unscheduled",
		     name, fn);
}

int gmx_shim_modinfo_verify(const void *fn, const char *name, size_t n, const size_t *off, const size_t *size)
{
	pthread_mutex_lock(&g_lock);
	entry_t *e = find(fn);
	int rc = -1;
	char why[160] = "";
	if (e && e->k) {
		const gmx_kernel_info_t *k = e->k;
		rc = 1;
		if (!name || strcmp(name, k->name) != 0)
			snprintf(why, sizeof why, "name %s, image says %s", name ? name : "(none)", k->name);
		else if (n != k->n_params)
			snprintf(why, sizeof why, "%zu parameters, image says %u", n, k->n_params);
		for (size_t i = 0; !why[0] && i < n; i++)
			if (off[i] != k->params[i].offset || size[i] != k->params[i].size)
				snprintf(why, sizeof why, "parameter %zu at %zu:%zu, image says %u:%u", i,
					 off[i], size[i], k->params[i].offset, k->params[i].size);
		if (why[0])
			rc = 0;
	}
	if (rc == 1)
		g_agree++;
	else if (rc == 0)
		g_differ++;
	else
		g_absent++;
	pthread_mutex_unlock(&g_lock);
	if (rc == 0) {
		fprintf(stderr, "gpumux shim: kernel %s: the driver and the image differ: %s\n",
			name ? name : "?", why);
		gmx_shim_log("kernel-info verify kernel=%s differs: %s", name ? name : "?", why);
	}
	return rc;
}

/* ---- the runtime's private module loads (cudart 11.x) ---- */

/* CUDART_INTERFACE {6BD5FB6C-5BF4-E74A-8987-D93912FD9DF9}: word 0 is the table's size in
 * bytes; slots 1, 6 and 8 load a module from the fatbin nvcc registered (slot layout as read
 * from vosen/ZLUDA dark_api/src/lib.rs; cudart 11.8 uses slot 6 at a kernel's first launch). */
static const unsigned char cudart_interface_id[16] = {0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a,
						      0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9};
#define TABLE_SLOTS_MAX 64

typedef CUresult (*load1_t)(CUmodule *, const void *);
typedef CUresult (*load6_t)(CUmodule *, const void *, void *, void *, unsigned);
typedef CUresult (*load8_t)(const void *, CUmodule *, void *, void *, unsigned);

static const void *g_orig_table;
static void *g_table[TABLE_SLOTS_MAX];
static load1_t g_load1;
static load6_t g_load6;
static load8_t g_load8;

static CUresult load1(CUmodule *mod, const void *fatbin)
{
	gmx_fatbin_t *fb = gmx_shim_modinfo_parse_mem(fatbin, "CUDART_INTERFACE[1]");
	CUmodule before = mod ? *mod : NULL;
	CUresult r = g_load1(mod, fatbin);
	/* This slot's result is not known to be a CUresult: a new handle means it loaded. */
	gmx_shim_modinfo_loaded(mod && *mod && *mod != before ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN,
				mod ? *mod : NULL, fb);
	return r;
}

static CUresult load6(CUmodule *mod, const void *fatbin, void *a3, void *a4, unsigned a5)
{
	gmx_fatbin_t *fb = gmx_shim_modinfo_parse_mem(fatbin, "CUDART_INTERFACE[6]");
	CUresult r = g_load6(mod, fatbin, a3, a4, a5);
	gmx_shim_modinfo_loaded(r, mod ? *mod : NULL, fb);
	return r;
}

static CUresult load8(const void *fatbin, CUmodule *mod, void *a3, void *a4, unsigned a5)
{
	gmx_fatbin_t *fb = gmx_shim_modinfo_parse_mem(fatbin, "CUDART_INTERFACE[8]");
	CUresult r = g_load8(fatbin, mod, a3, a4, a5);
	gmx_shim_modinfo_loaded(r, mod ? *mod : NULL, fb);
	return r;
}

const void *gmx_shim_modinfo_cudart_table(void)
{
	pthread_mutex_lock(&g_lock);
	const void *t = g_orig_table ? (const void *)g_table : NULL;
	pthread_mutex_unlock(&g_lock);
	return t;
}

int gmx_shim_table_copy(const void *table, const void **orig, void **copy, size_t max_slots, const char *name)
{
	if (*orig == table)
		return 1;
	size_t bytes;
	memcpy(&bytes, table, sizeof bytes);
	size_t slots = bytes / sizeof(void *);
	if (*orig || bytes % sizeof(void *) || slots < 2 || slots > max_slots) {
		gmx_shim_log("kernel-info %s table of %zu bytes not wrapped", name, bytes);
		return -1;
	}
	memcpy(copy, table, bytes);
	*orig = table;
	return 0;
}

const void *gmx_shim_modinfo_export_table(const void *table, const CUuuid *id)
{
	if (!table || !id || memcmp(id->bytes, cudart_interface_id, 16) != 0 || !gmx_shim_modinfo_learning())
		return table;
	pthread_mutex_lock(&g_lock);
	int r = gmx_shim_table_copy(table, &g_orig_table, g_table, TABLE_SLOTS_MAX, "CUDART_INTERFACE");
	size_t slots = r >= 0 ? *(const size_t *)table / sizeof(void *) : 0;
	if (r == 0) {
		if (g_table[1]) {
			g_load1 = (load1_t)g_table[1];
			g_table[1] = (void *)&load1;
		}
		if (slots > 6 && g_table[6]) {
			g_load6 = (load6_t)g_table[6];
			g_table[6] = (void *)&load6;
		}
		if (slots > 8 && g_table[8]) {
			g_load8 = (load8_t)g_table[8];
			g_table[8] = (void *)&load8;
		}
	}
	pthread_mutex_unlock(&g_lock);
	return r >= 0 ? (const void *)g_table : table;
}

/* What could not be identified or checked is reported when the process ends. */
__attribute__((destructor)) static void report(void)
{
	if (g_unidentified) {
		fprintf(stderr,
			"gpumux shim: %lu launches of unidentified kernels went to the driver unscheduled\n",
			g_unidentified);
		gmx_shim_log("kernel-info unidentified launches=%lu", g_unidentified);
	}
	if (g_mode == GMX_KINFO_VERIFY && g_learning) {
		fprintf(
		    stderr,
		    "gpumux shim: kernel layouts, driver against images: %lu agree, %lu differ, %lu not in "
		    "any image\n",
		    g_agree, g_differ, g_absent);
		gmx_shim_log("kernel-info verify agree=%lu differ=%lu absent=%lu", g_agree, g_differ,
			     g_absent);
	}
}
