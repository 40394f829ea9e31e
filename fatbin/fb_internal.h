/* Internal interface of the fatbin parser: the kernel set under construction and the
 * bounds-checked readers the container, ELF and PTX parsers share. */
#ifndef GMX_FB_INTERNAL_H
#define GMX_FB_INTERNAL_H

#include "gpumux/fatbin.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Bounds on what an image may claim; anything larger is refused as corrupt. */
#ifndef GMX_FB_ENTRY_MAX
#define GMX_FB_ENTRY_MAX ((size_t)1 << 30) /* one decompressed entry: 1 GiB */
#endif
#define GMX_FB_PARAMS_MAX 32768u      /* parameters of one kernel */
#define GMX_FB_PARAM_BYTES_MAX 65535u /* a kernel's parameter buffer (CUDA 12.1: 32764) */
#define GMX_FB_NAME_MAX 65536u	      /* one mangled name */
#define GMX_FB_DEPTH_MAX 4	      /* images nested in images (wrapper > fatbin > ...) */

/* Where a kernel's layout came from: a cubin's attributes win over a PTX declaration. */
enum { GMX_FB_FROM_PTX = 1, GMX_FB_FROM_ELF = 2 };

/* Fills err (when given) with the formatted message. */
void gmx_fb__msg(char *err, size_t err_len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Writes the message and evaluates to rc; a macro so that callers (and static analysis) see
 * which code each error path returns. */
#define gmx_fb__err(err, err_len, rc, ...) (gmx_fb__msg((err), (err_len), __VA_ARGS__), (rc))

/* An empty set, or NULL when out of memory. */
gmx_fatbin_t *gmx_fb__new(void);

/* Adds (or, from a better source, replaces) one kernel. The name is copied. 0 or -ENOMEM. */
int gmx_fb__add(gmx_fatbin_t *fb, const char *name, size_t name_len, const gmx_kparam_t *params,
		uint32_t n_params, uint32_t param_bytes, int source);

/* Parses one ELF cubin of exactly n readable bytes into fb; `where` names it in messages. */
int gmx_fb__elf(gmx_fatbin_t *fb, const uint8_t *p, size_t n, const char *where, char *err, size_t err_len);

/* The extent of an ELF cubin read from its headers, or 0 when they are corrupt or any header
 * lies beyond `bound` readable bytes (SIZE_MAX: no bound known). */
size_t gmx_fb__elf_extent(const uint8_t *p, size_t bound);

/* Parses PTX text of at most n bytes (it ends at the first NUL) into fb. */
int gmx_fb__ptx(gmx_fatbin_t *fb, const char *p, size_t n, const char *where, char *err, size_t err_len);

static inline uint16_t gmx_fb__u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (unsigned)p[1] << 8);
}

static inline uint32_t gmx_fb__u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t gmx_fb__u64(const uint8_t *p)
{
	return (uint64_t)gmx_fb__u32(p) | (uint64_t)gmx_fb__u32(p + 4) << 32;
}

/* Nonzero when [off, off + len) lies within n bytes (no overflow). */
static inline int gmx_fb__fits(uint64_t off, uint64_t len, uint64_t n)
{
	return off <= n && len <= n - off;
}

#endif
