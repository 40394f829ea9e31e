/*
 * An ELF cubin: its kernels and their parameter layouts.
 *
 * A kernel is a function symbol whose st_other has STO_CUDA_ENTRY (0x10). Its attributes are
 * in the section `.nv.info.<kernel>`: records of (format, attribute, value), where the format
 * says how long the value is: 1 none, 2 a byte, 3 a 16-bit half (each of these takes 4 bytes
 * in all), 4 a 16-bit size followed by that many bytes. The ones read here:
 *   0x0a EIATTR_PARAM_CBANK      u32 symbol, u16 offset in the constant bank, u16 size (bytes)
 *   0x19 EIATTR_CBANK_PARAM_SIZE u16 size
 *   0x17 EIATTR_KPARAM_INFO      u32 index, u16 ordinal, u16 offset, u32 flags (size in bits 18..31)
 *   0x45 EIATTR_KPARAM_INFO_V2   u32 index, u16 ordinal, u16 offset, u32 size (nvcc 13 uses it
 *                                when the buffer exceeds 4 KiB)
 * Facts read from nvcc 13.0's cubins (docs/fatbin.md gives examples); attribute names as the
 * CUDA toolkit's cuobjdump prints them.
 */
#include "fb_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define EM_CUDA 190
#define SHT_SYMTAB 2
#define SHT_NOBITS 8
#define STT_FUNC 2
#define STO_CUDA_ENTRY 0x10
#define SHN_XINDEX 0xffff
#define EHDR_SIZE 64u
#define SHDR_SIZE 64u
#define SYM_SIZE 24u

#define EIATTR_PARAM_CBANK 0x0a
#define EIATTR_KPARAM_INFO 0x17
#define EIATTR_CBANK_PARAM_SIZE 0x19
#define EIATTR_KPARAM_INFO_V2 0x45

typedef struct {
	const uint8_t *p;
	size_t n;
	uint64_t shoff;
	size_t shentsize, shnum, shstrndx;
	const char *where;
	char *err;
	size_t err_len;
} elf_t;

typedef struct {
	uint32_t name, type, link;
	uint64_t off, size;
} shdr_t;

static const uint8_t *shdr_at(const elf_t *e, size_t i)
{
	return e->p + e->shoff + i * e->shentsize;
}

static shdr_t shdr(const elf_t *e, size_t i)
{
	const uint8_t *s = shdr_at(e, i);
	return (shdr_t){.name = gmx_fb__u32(s),
			.type = gmx_fb__u32(s + 4),
			.off = gmx_fb__u64(s + 0x18),
			.size = gmx_fb__u64(s + 0x20),
			.link = gmx_fb__u32(s + 0x28)};
}

/* The bytes of section i, checked against the image. */
static int section(const elf_t *e, size_t i, const uint8_t **data, size_t *len)
{
	if (i >= e->shnum)
		return gmx_fb__err(e->err, e->err_len, -EINVAL,
				   "%s: section index %zu out of range (%zu sections)", e->where, i,
				   e->shnum);
	shdr_t s = shdr(e, i);
	if (s.type == SHT_NOBITS) {
		*data = e->p;
		*len = 0;
		return 0;
	}
	if (!gmx_fb__fits(s.off, s.size, e->n))
		return gmx_fb__err(
		    e->err, e->err_len, -EINVAL,
		    "%s: section %zu (offset %#llx, %llu bytes) runs past the image (%zu bytes)", e->where, i,
		    (unsigned long long)s.off, (unsigned long long)s.size, e->n);
	*data = e->p + s.off;
	*len = (size_t)s.size;
	return 0;
}

/* The NUL-terminated string at off in a string table, or NULL. */
static const char *str_at(const uint8_t *tab, size_t len, uint64_t off)
{
	if (off >= len || !memchr(tab + off, '\0', len - (size_t)off))
		return NULL;
	return (const char *)tab + off;
}

static int read_header(elf_t *e)
{
	const uint8_t *p = e->p;
	if (e->n < EHDR_SIZE)
		return gmx_fb__err(e->err, e->err_len, -EINVAL, "%s: %zu bytes, an ELF header takes %u",
				   e->where, e->n, EHDR_SIZE);
	if (p[4] != 2 || p[5] != 1)
		return gmx_fb__err(e->err, e->err_len, -EINVAL,
				   "%s: ELF class %u / data %u; a cubin is 64-bit little-endian", e->where,
				   p[4], p[5]);
	if (gmx_fb__u16(p + 18) != EM_CUDA)
		return gmx_fb__err(e->err, e->err_len, -EINVAL,
				   "%s: ELF for machine %u, not a CUDA cubin (%u)", e->where,
				   gmx_fb__u16(p + 18), EM_CUDA);
	e->shoff = gmx_fb__u64(p + 0x28);
	e->shentsize = gmx_fb__u16(p + 0x3a);
	e->shnum = gmx_fb__u16(p + 0x3c);
	e->shstrndx = gmx_fb__u16(p + 0x3e);
	if (e->shoff == 0) {
		e->shnum = 0;
		return 0;
	}
	if (e->shentsize < SHDR_SIZE || !gmx_fb__fits(e->shoff, e->shentsize, e->n))
		return gmx_fb__err(e->err, e->err_len, -EINVAL,
				   "%s: section headers (offset %#llx, entry size %zu) outside the image",
				   e->where, (unsigned long long)e->shoff, e->shentsize);
	/* Extended numbering: the real counts live in section 0. */
	if (e->shnum == 0) {
		uint64_t real = gmx_fb__u64(shdr_at(e, 0) + 0x20);
		e->shnum = real > e->n ? e->n : (size_t)real; /* bounded again just below */
	}
	if (e->shstrndx == SHN_XINDEX)
		e->shstrndx = gmx_fb__u32(shdr_at(e, 0) + 0x28);
	if (e->shnum > (e->n - e->shoff) / e->shentsize)
		return gmx_fb__err(
		    e->err, e->err_len, -EINVAL,
		    "%s: %zu section headers of %zu bytes at %#llx run past the image (%zu bytes)", e->where,
		    e->shnum, e->shentsize, (unsigned long long)e->shoff, e->n);
	return 0;
}

size_t gmx_fb__elf_extent(const uint8_t *p, size_t bound)
{
	if (bound < EHDR_SIZE || p[4] != 2 || p[5] != 1)
		return 0;
	uint64_t end = EHDR_SIZE;
	uint64_t phoff = gmx_fb__u64(p + 0x20), shoff = gmx_fb__u64(p + 0x28);
	uint64_t phentsize = gmx_fb__u16(p + 0x36), phnum = gmx_fb__u16(p + 0x38);
	uint64_t shentsize = gmx_fb__u16(p + 0x3a), shnum = gmx_fb__u16(p + 0x3c);
	const uint64_t limit = GMX_FB_ENTRY_MAX;
	if (phoff > limit || shoff > limit)
		return 0;
	if (phoff && phoff + phentsize * phnum > end)
		end = phoff + phentsize * phnum;
	if (shoff) {
		if (shentsize < SHDR_SIZE)
			return 0;
		if (shnum == 0) {
			if (!gmx_fb__fits(shoff, SHDR_SIZE, bound))
				return 0;
			shnum = gmx_fb__u64(p + shoff + 0x20);
		}
		if (shnum > limit / SHDR_SIZE)
			return 0;
		if (shoff + shentsize * shnum > end)
			end = shoff + shentsize * shnum;
		if (end > bound)
			return 0; /* the section headers themselves lie beyond what may be read */
		for (uint64_t i = 0; i < shnum; i++) {
			const uint8_t *s = p + shoff + i * shentsize;
			uint64_t off = gmx_fb__u64(s + 0x18), size = gmx_fb__u64(s + 0x20);
			if (gmx_fb__u32(s + 4) == SHT_NOBITS)
				continue;
			if (off > limit || size > limit)
				return 0;
			if (off + size > end)
				end = off + size;
		}
	}
	return end <= limit && end <= bound ? (size_t)end : 0;
}

typedef struct {
	uint32_t ordinal, offset, size;
} rawparam_t;

static int cmp_ordinal(const void *a, const void *b)
{
	const rawparam_t *x = a, *y = b;
	return (x->ordinal > y->ordinal) - (x->ordinal < y->ordinal);
}

/* Reads one kernel's .nv.info records and adds it to fb. */
static int kernel_info(gmx_fatbin_t *fb, const elf_t *e, const char *name, const uint8_t *q, size_t len)
{
	rawparam_t *raw = NULL;
	size_t n = 0, cap = 0;
	uint32_t cbank = UINT32_MAX, cbank_size = UINT32_MAX;
	int rc = 0;
	size_t off = 0;
	while (off < len) {
		if (len - off < 4) {
			if (len - off == 2 && q[off] == 1)
				break; /* a value-less record without padding at the very end */
			rc = gmx_fb__err(e->err, e->err_len, -EINVAL,
					 "%s: .nv.info.%s: truncated record at offset %#zx", e->where, name,
					 off);
			goto out;
		}
		uint8_t fmt = q[off], attr = q[off + 1];
		const uint8_t *v = q + off + 2;
		size_t vlen = 2;
		if (fmt == 4) {
			vlen = gmx_fb__u16(q + off + 2);
			v = q + off + 4;
			if (vlen > len - off - 4) {
				rc = gmx_fb__err(
				    e->err, e->err_len, -EINVAL,
				    "%s: .nv.info.%s: record at offset %#zx claims %zu bytes, %zu left",
				    e->where, name, off, vlen, len - off - 4);
				goto out;
			}
			off += 4 + vlen;
		} else if (fmt >= 1 && fmt <= 3) {
			off += 4;
		} else {
			rc = gmx_fb__err(e->err, e->err_len, -EINVAL,
					 "%s: .nv.info.%s: unknown record format %u at offset %#zx", e->where,
					 name, fmt, off);
			goto out;
		}
		if (attr == EIATTR_PARAM_CBANK && fmt == 4 && vlen >= 8) {
			cbank = gmx_fb__u16(v + 6);
		} else if (attr == EIATTR_CBANK_PARAM_SIZE && fmt == 3) {
			cbank_size = gmx_fb__u16(v);
		} else if ((attr == EIATTR_KPARAM_INFO || attr == EIATTR_KPARAM_INFO_V2) && fmt == 4 &&
			   vlen >= 12) {
			if (n == GMX_FB_PARAMS_MAX) {
				rc = gmx_fb__err(e->err, e->err_len, -EINVAL,
						 "%s: .nv.info.%s: more than %u parameters", e->where, name,
						 GMX_FB_PARAMS_MAX);
				goto out;
			}
			if (n == cap) {
				cap = cap ? cap * 2 : 16;
				rawparam_t *r = realloc(raw, cap * sizeof *r);
				if (!r) {
					rc = -ENOMEM;
					goto out;
				}
				raw = r;
			}
			uint32_t w = gmx_fb__u32(v + 8);
			raw[n++] = (rawparam_t){.ordinal = gmx_fb__u16(v + 4),
						.offset = gmx_fb__u16(v + 6),
						.size = attr == EIATTR_KPARAM_INFO ? w >> 18 : w};
		}
	}
	if (n)
		qsort(raw, n, sizeof *raw, cmp_ordinal);
	uint32_t bytes = cbank != UINT32_MAX ? cbank : cbank_size;
	uint32_t end = 0;
	for (size_t i = 0; i < n; i++) {
		if (raw[i].ordinal != i) {
			rc = gmx_fb__err(e->err, e->err_len, -EINVAL,
					 "%s: .nv.info.%s: parameter ordinals are not 0..%zu (ordinal %u %s)",
					 e->where, name, n - 1, raw[i].ordinal,
					 raw[i].ordinal < i ? "repeats" : "skips one");
			goto out;
		}
		if (raw[i].size == 0 || raw[i].size > GMX_FB_PARAM_BYTES_MAX ||
		    raw[i].offset + raw[i].size > GMX_FB_PARAM_BYTES_MAX) {
			rc = gmx_fb__err(e->err, e->err_len, -EINVAL,
					 "%s: .nv.info.%s: parameter %zu has size %u at offset %u", e->where,
					 name, i, raw[i].size, raw[i].offset);
			goto out;
		}
		if (raw[i].offset + raw[i].size > end)
			end = raw[i].offset + raw[i].size;
	}
	if (bytes == UINT32_MAX)
		bytes = end;
	if (end > bytes) {
		rc = gmx_fb__err(e->err, e->err_len, -EINVAL,
				 "%s: .nv.info.%s: parameters end at byte %u, beyond the %u-byte buffer",
				 e->where, name, end, bytes);
		goto out;
	}
	gmx_kparam_t *kp = NULL;
	if (n && !(kp = malloc(n * sizeof *kp))) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		kp[i] = (gmx_kparam_t){.offset = raw[i].offset, .size = raw[i].size};
	rc = gmx_fb__add(fb, name, strlen(name), kp, (uint32_t)n, bytes, GMX_FB_FROM_ELF);
	free(kp);
out:
	free(raw);
	return rc;
}

int gmx_fb__elf(gmx_fatbin_t *fb, const uint8_t *p, size_t n, const char *where, char *err, size_t err_len)
{
	elf_t e = {.p = p, .n = n, .where = where, .err = err, .err_len = err_len};
	int rc = read_header(&e);
	if (rc || e.shnum == 0)
		return rc;
	const uint8_t *shstr;
	size_t shstr_len;
	if ((rc = section(&e, e.shstrndx, &shstr, &shstr_len)))
		return rc;

	/* The entry points, by name, from the symbol table (a set of their own). */
	gmx_fatbin_t *entries = gmx_fb__new();
	if (!entries)
		return gmx_fb__err(err, err_len, -ENOMEM, "%s: out of memory", where);
	int have_symtab = 0;
	for (size_t i = 0; i < e.shnum && !rc; i++) {
		shdr_t s = shdr(&e, i);
		if (s.type != SHT_SYMTAB)
			continue;
		have_symtab = 1;
		const uint8_t *sym, *str;
		size_t sym_len, str_len;
		if ((rc = section(&e, i, &sym, &sym_len)) || (rc = section(&e, s.link, &str, &str_len)))
			break;
		for (size_t k = 0; k + SYM_SIZE <= sym_len; k += SYM_SIZE) {
			uint8_t info = sym[k + 4], other = sym[k + 5];
			if ((info & 0xf) != STT_FUNC || !(other & STO_CUDA_ENTRY))
				continue;
			const char *nm = str_at(str, str_len, gmx_fb__u32(sym + k));
			if (!nm || !*nm) {
				rc = gmx_fb__err(err, err_len, -EINVAL,
						 "%s: kernel symbol %zu has a bad name offset", where,
						 k / SYM_SIZE);
				break;
			}
			rc = gmx_fb__add(entries, nm, strlen(nm), NULL, 0, 0, GMX_FB_FROM_ELF);
		}
	}
	size_t nent = gmx_fatbin_count(entries);
	uint8_t *seen = rc ? NULL : calloc(nent ? nent : 1, 1);
	if (!rc && !seen)
		rc = -ENOMEM;

	/* Each kernel's .nv.info.<name>. */
	static const char prefix[] = ".nv.info.";
	const size_t plen = sizeof prefix - 1;
	for (size_t i = 0; i < e.shnum && !rc; i++) {
		shdr_t s = shdr(&e, i);
		const char *sn = str_at(shstr, shstr_len, s.name);
		if (!sn || strncmp(sn, prefix, plen) != 0 || !sn[plen])
			continue;
		const char *kn = sn + plen;
		if (have_symtab) {
			const gmx_kernel_info_t *k = gmx_fatbin_find(entries, kn);
			if (!k)
				continue; /* a device function's attributes */
			seen[k - gmx_fatbin_kernel(entries, 0)] = 1;
		}
		const uint8_t *q;
		size_t qlen;
		if (!(rc = section(&e, i, &q, &qlen)))
			rc = kernel_info(fb, &e, kn, q, qlen);
	}
	/* Entry points without attributes take no parameters. */
	for (size_t i = 0; i < nent && !rc; i++)
		if (!seen[i]) {
			const char *nm = gmx_fatbin_kernel(entries, i)->name;
			rc = gmx_fb__add(fb, nm, strlen(nm), NULL, 0, 0, GMX_FB_FROM_ELF);
		}
	free(seen);
	gmx_fatbin_free(entries);
	if (rc == -ENOMEM)
		gmx_fb__msg(err, err_len, "%s: out of memory", where);
	return rc;
}
