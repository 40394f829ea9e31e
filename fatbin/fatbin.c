/*
 * The fatbin container and the kernel set.
 *
 * An image is recognised by its first word: the wrapper nvcc registers (0x466243B1: magic,
 * version, pointer to the fatbin), the fatbin container (0xBA55ED50), an ELF cubin, or PTX
 * text. A container is a 16-byte header (magic, version 1, header size, size of what follows)
 * and entries back to back: each a header of at least 64 bytes (kind 1 PTX, 2 ELF; header size;
 * payload size; compressed size; SM architecture; flags; uncompressed size) and its payload,
 * compressed with zstd (flag 0x8000) or LZ4 (flag 0x2000) or not at all. Layout facts were read
 * from nvcc 13.0's own output (docs/fatbin.md); they match the descriptions of the format in
 * n-eiling/cuda-fatbin-decompression and GrigoryEvko/nvopen-tools (fatbin/FORMAT_SPECIFICATION.md).
 *
 * Every length in an image is checked against the bytes known readable before it is used.
 */
#include "fb_internal.h"

#include <errno.h>
#include <lz4.h>
#include <stdio.h>
#include <stdlib.h>
#include <zstd.h>

#define ENTRY_HDR_MIN 64u
#define FLAG_LZ4 0x2000u
#define FLAG_ZSTD 0x8000u

struct gmx_fatbin {
	gmx_kernel_info_t *k;
	uint8_t *src; /* GMX_FB_FROM_* of each kernel */
	size_t n, cap;
	uint32_t *slot; /* open addressing: kernel index + 1, 0 empty */
	size_t nslot;	/* a power of two, at least twice n */
	size_t image_size;
};

void gmx_fb__msg(char *err, size_t err_len, const char *fmt, ...)
{
	if (err && err_len) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(err, err_len, fmt, ap);
		va_end(ap);
	}
}

static uint64_t name_hash(const char *s, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	/* FNV-1a's low bits follow the last bytes closely (k1_0, k1_1, ...): fold the high half in,
	 * since the table takes the low bits. */
	return h ^ (h >> 29) ^ (h >> 43);
}

/* The slot holding name, or the empty slot where it would go. */
static size_t slot_of(const gmx_fatbin_t *fb, const char *name, size_t len)
{
	size_t mask = fb->nslot - 1, i = (size_t)name_hash(name, len) & mask;
	while (fb->slot[i]) {
		const char *other = fb->k[fb->slot[i] - 1].name;
		if (strncmp(other, name, len) == 0 && other[len] == '\0')
			return i;
		i = (i + 1) & mask;
	}
	return i;
}

static int grow(gmx_fatbin_t *fb)
{
	if (fb->n == fb->cap) {
		size_t cap = fb->cap ? fb->cap * 2 : 16;
		gmx_kernel_info_t *k = realloc(fb->k, cap * sizeof *k);
		if (!k)
			return -ENOMEM;
		fb->k = k;
		uint8_t *src = realloc(fb->src, cap);
		if (!src)
			return -ENOMEM;
		fb->src = src;
		fb->cap = cap;
	}
	if (2 * (fb->n + 1) > fb->nslot) {
		size_t nslot = fb->nslot ? fb->nslot * 2 : 32;
		uint32_t *slot = calloc(nslot, sizeof *slot);
		if (!slot)
			return -ENOMEM;
		free(fb->slot);
		fb->slot = slot;
		fb->nslot = nslot;
		for (size_t i = 0; i < fb->n; i++)
			fb->slot[slot_of(fb, fb->k[i].name, strlen(fb->k[i].name))] = (uint32_t)(i + 1);
	}
	return 0;
}

int gmx_fb__add(gmx_fatbin_t *fb, const char *name, size_t name_len, const gmx_kparam_t *params,
		uint32_t n_params, uint32_t param_bytes, int source)
{
	gmx_kparam_t *copy = NULL;
	if (n_params) {
		copy = malloc(n_params * sizeof *copy);
		if (!copy)
			return -ENOMEM;
		memcpy(copy, params, n_params * sizeof *copy);
	}
	size_t s = fb->nslot ? slot_of(fb, name, name_len) : 0;
	if (fb->nslot && fb->slot[s]) {
		size_t i = fb->slot[s] - 1;
		if (fb->src[i] >= source) { /* the same kernel of another architecture: first wins */
			free(copy);
			return 0;
		}
		free((void *)fb->k[i].params);
		fb->k[i].params = copy;
		fb->k[i].n_params = n_params;
		fb->k[i].param_bytes = param_bytes;
		fb->src[i] = (uint8_t)source;
		return 0;
	}
	char *nm = malloc(name_len + 1);
	if (!nm || grow(fb) != 0) {
		free(nm);
		free(copy);
		return -ENOMEM;
	}
	memcpy(nm, name, name_len);
	nm[name_len] = '\0';
	fb->k[fb->n] =
	    (gmx_kernel_info_t){.name = nm, .n_params = n_params, .params = copy, .param_bytes = param_bytes};
	fb->src[fb->n] = (uint8_t)source;
	fb->n++;
	fb->slot[slot_of(fb, nm, name_len)] = (uint32_t)fb->n;
	return 0;
}

/* Decompresses one entry's payload into a new buffer of exactly `usize` bytes. */
static int inflate(const uint8_t *p, size_t csize, uint64_t usize, uint64_t flags, uint8_t **out,
		   const char *where, char *err, size_t err_len)
{
	if (usize == 0 || usize > GMX_FB_ENTRY_MAX)
		return gmx_fb__err(err, err_len, -EINVAL,
				   "%s: uncompressed size %llu is out of range (1..%zu bytes)", where,
				   (unsigned long long)usize, (size_t)GMX_FB_ENTRY_MAX);
	uint8_t *buf = malloc((size_t)usize);
	if (!buf)
		return gmx_fb__err(err, err_len, -ENOMEM, "%s: out of memory for %llu bytes", where,
				   (unsigned long long)usize);
	if (flags & FLAG_ZSTD) {
		unsigned long long fs = ZSTD_getFrameContentSize(p, csize);
		if (fs != ZSTD_CONTENTSIZE_UNKNOWN && fs != usize) {
			free(buf);
			return gmx_fb__err(err, err_len, -EINVAL,
					   "%s: zstd frame holds %llu bytes, the entry header says %llu",
					   where, fs == ZSTD_CONTENTSIZE_ERROR ? 0ull : fs,
					   (unsigned long long)usize);
		}
		size_t r = ZSTD_decompress(buf, (size_t)usize, p, csize);
		if (ZSTD_isError(r) || r != usize) {
			free(buf);
			return gmx_fb__err(err, err_len, -EINVAL, "%s: corrupt zstd payload (%s)", where,
					   ZSTD_isError(r) ? ZSTD_getErrorName(r) : "short output");
		}
	} else {
		if (csize > (size_t)LZ4_MAX_INPUT_SIZE || usize > (uint64_t)INT32_MAX) {
			free(buf);
			return gmx_fb__err(err, err_len, -EINVAL, "%s: LZ4 payload too large", where);
		}
		int r = LZ4_decompress_safe((const char *)p, (char *)buf, (int)csize, (int)usize);
		if (r < 0 || (uint64_t)r != usize) {
			free(buf);
			return gmx_fb__err(err, err_len, -EINVAL,
					   "%s: corrupt LZ4 payload (%d bytes out of %llu expected)", where,
					   r, (unsigned long long)usize);
		}
	}
	*out = buf;
	return 0;
}

static int parse_image(gmx_fatbin_t *fb, const uint8_t *p, size_t n, int exact, int depth, char *err,
		       size_t err_len);

/* One container entry at p (n bytes up to the container's end); *used gets its extent. */
static int parse_entry(gmx_fatbin_t *fb, const uint8_t *p, size_t n, size_t index, size_t at, size_t *used,
		       char *err, size_t err_len)
{
	char where[96];
	snprintf(where, sizeof where, "fatbin entry %zu at offset %#zx", index, at);
	if (n < ENTRY_HDR_MIN)
		return gmx_fb__err(err, err_len, -EINVAL, "%s: %zu bytes left, an entry header takes %u",
				   where, n, ENTRY_HDR_MIN);
	uint16_t kind = gmx_fb__u16(p);
	uint32_t hsize = gmx_fb__u32(p + 4);
	uint64_t psize = gmx_fb__u64(p + 8);
	uint32_t csize = gmx_fb__u32(p + 16);
	uint64_t flags = gmx_fb__u64(p + 40);
	uint64_t usize = gmx_fb__u64(p + 56);
	if (hsize < ENTRY_HDR_MIN || hsize > n)
		return gmx_fb__err(err, err_len, -EINVAL,
				   "%s: header size %u is out of range (%u..%zu bytes)", where, hsize,
				   ENTRY_HDR_MIN, n);
	if (!gmx_fb__fits(hsize, psize, n))
		return gmx_fb__err(err, err_len, -EINVAL,
				   "%s: payload of %llu bytes runs past the container's end (%zu bytes left)",
				   where, (unsigned long long)psize, n - hsize);
	*used = hsize + (size_t)psize;
	const uint8_t *data = p + hsize;
	size_t dlen = (size_t)psize;
	uint8_t *plain = NULL;
	if ((flags & FLAG_ZSTD) && (flags & FLAG_LZ4))
		return gmx_fb__err(err, err_len, -EINVAL, "%s: flags %#llx claim both zstd and LZ4", where,
				   (unsigned long long)flags);
	if (flags & (FLAG_ZSTD | FLAG_LZ4)) {
		if (csize == 0 || csize > psize)
			return gmx_fb__err(err, err_len, -EINVAL,
					   "%s: compressed size %u is out of range (1..%llu bytes)", where,
					   csize, (unsigned long long)psize);
		int rc = inflate(data, csize, usize, flags, &plain, where, err, err_len);
		if (rc)
			return rc;
		data = plain;
		dlen = (size_t)usize;
	}
	int rc = 0;
	if (dlen >= 4 && memcmp(data, "\177ELF", 4) == 0)
		rc = gmx_fb__elf(fb, data, dlen, where, err, err_len);
	else if (kind == 1)
		rc = gmx_fb__ptx(fb, (const char *)data, dlen, where, err, err_len);
	else if (kind == 2)
		rc = gmx_fb__err(err, err_len, -EINVAL, "%s: an ELF entry whose payload is not ELF", where);
	/* other kinds (none seen in nvcc's output) hold no kernels we can read: skipped */
	free(plain);
	return rc;
}

/* Containers back to back in exactly n bytes. */
static int parse_containers(gmx_fatbin_t *fb, const uint8_t *p, size_t n, char *err, size_t err_len)
{
	size_t off = 0, index = 0;
	while (n - off >= 16 && gmx_fb__u32(p + off) == GMX_FATBIN_MAGIC) {
		uint16_t version = gmx_fb__u16(p + off + 4), hsize = gmx_fb__u16(p + off + 6);
		uint64_t fsize = gmx_fb__u64(p + off + 8);
		if (version != 1)
			return gmx_fb__err(err, err_len, -EINVAL,
					   "fatbin at offset %#zx: version %u, expected 1", off, version);
		if (hsize < 16 || !gmx_fb__fits((uint64_t)off + hsize, fsize, n))
			return gmx_fb__err(
			    err, err_len, -EINVAL,
			    "fatbin at offset %#zx: header size %u and body of %llu bytes run past "
			    "the image (%zu bytes)",
			    off, hsize, (unsigned long long)fsize, n);
		size_t e = off + hsize, end = e + (size_t)fsize;
		while (e < end) {
			size_t used = 0;
			int rc = parse_entry(fb, p + e, end - e, index++, e, &used, err, err_len);
			if (rc)
				return rc;
			e += used;
		}
		off = end;
	}
	if (off == 0)
		return gmx_fb__err(err, err_len, -EINVAL, "fatbin: truncated header (%zu bytes)", n);
	return 0;
}

/* Text that PTX could be: no control characters but white space, and a .version directive. */
static int looks_like_ptx(const char *p, size_t n)
{
	size_t len = strnlen(p, n);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)p[i];
		if (c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v')
			return 0;
	}
	for (size_t i = 0; i + 8 <= len; i++)
		if (p[i] == '.' && memcmp(p + i, ".version", 8) == 0)
			return 1;
	return 0;
}

/* An image at p. With `exact`, n is its length; otherwise n bounds the bytes that may be read
 * (SIZE_MAX: none known) and the image's extent comes from its own headers. */
static int parse_image(gmx_fatbin_t *fb, const uint8_t *p, size_t n, int exact, int depth, char *err,
		       size_t err_len)
{
	if (depth > GMX_FB_DEPTH_MAX)
		return gmx_fb__err(err, err_len, -EINVAL, "image: wrappers nested deeper than %d",
				   GMX_FB_DEPTH_MAX);
	if (n < 4)
		return gmx_fb__err(err, err_len, -EINVAL, "image: %zu bytes is too short for any module", n);
	uint32_t magic = gmx_fb__u32(p);
	if (magic == GMX_FATBIN_WRAPPER_MAGIC) {
		if (n < 16)
			return gmx_fb__err(err, err_len, -EINVAL, "fatbin wrapper: %zu bytes, expected 16",
					   n);
		uint32_t version = gmx_fb__u32(p + 4);
		uintptr_t data = (uintptr_t)gmx_fb__u64(p + 8);
		if (version != 1 && version != 2)
			return gmx_fb__err(err, err_len, -EINVAL,
					   "fatbin wrapper: version %u, expected 1 or 2", version);
		if (!data)
			return gmx_fb__err(err, err_len, -EINVAL, "fatbin wrapper: NULL fatbin pointer");
		/* The fatbin's own header gives its length, whatever followed the wrapper. */
		if (n == SIZE_MAX)
			return parse_image(fb, (const uint8_t *)data, SIZE_MAX, 0, depth + 1, err, err_len);
		/* Only the bytes given are known readable: the fatbin must lie among them. */
		uintptr_t base = (uintptr_t)p;
		if (data < base || data - base >= n)
			return gmx_fb__err(
			    err, err_len, -EINVAL,
			    "fatbin wrapper: its fatbin pointer lies outside the %zu bytes given", n);
		return parse_image(fb, (const uint8_t *)data, n - (data - base), 0, depth + 1, err, err_len);
	}
	if (magic == GMX_FATBIN_MAGIC) {
		if (!exact) { /* one container, as long as its header says */
			if (n < 16)
				return gmx_fb__err(err, err_len, -EINVAL,
						   "fatbin: truncated header (%zu bytes readable)", n);
			uint16_t hsize = gmx_fb__u16(p + 6);
			uint64_t fsize = gmx_fb__u64(p + 8);
			if (hsize < 16 || fsize > GMX_FB_ENTRY_MAX * (uint64_t)64)
				return gmx_fb__err(err, err_len, -EINVAL,
						   "fatbin: header size %u / body size %llu out of range",
						   hsize, (unsigned long long)fsize);
			if (!gmx_fb__fits(hsize, fsize, n))
				return gmx_fb__err(err, err_len, -EINVAL,
						   "fatbin: header size %u and body of %llu bytes run past "
						   "the %zu readable bytes",
						   hsize, (unsigned long long)fsize, n);
			n = hsize + (size_t)fsize;
		}
		fb->image_size = n;
		return parse_containers(fb, p, n, err, err_len);
	}
	if (memcmp(p, "\177ELF", 4) == 0) {
		if (!exact) {
			n = gmx_fb__elf_extent(p, n);
			if (n == 0)
				return gmx_fb__err(err, err_len, -EINVAL,
						   "cubin: corrupt ELF header, or headers beyond the "
						   "readable bytes");
		}
		fb->image_size = n;
		return gmx_fb__elf(fb, p, n, "cubin", err, err_len);
	}
	if (!exact) {
		size_t len = strnlen((const char *)p, n);
		if (len == n)
			return gmx_fb__err(err, err_len, -EINVAL,
					   "image: not a fatbin (magic %#x) or ELF, and no NUL-terminated "
					   "text within the %zu readable bytes",
					   magic, n);
		n = len + 1;
	}
	if (!looks_like_ptx((const char *)p, n))
		return gmx_fb__err(err, err_len, -EINVAL,
				   "image: not a fatbin (magic %#x), an ELF cubin or PTX text (no .version)",
				   magic);
	fb->image_size = n;
	return gmx_fb__ptx(fb, (const char *)p, n, "PTX", err, err_len);
}

gmx_fatbin_t *gmx_fb__new(void)
{
	return calloc(1, sizeof(gmx_fatbin_t));
}

static int parse_top(const void *image, size_t len, int exact, gmx_fatbin_t **out, char *err, size_t err_len)
{
	if (err && err_len)
		err[0] = '\0';
	if (!out)
		return gmx_fb__err(err, err_len, -EINVAL, "gmx_fatbin_parse: no place for the result");
	*out = NULL;
	if (!image)
		return gmx_fb__err(err, err_len, -EINVAL, "image: NULL");
	gmx_fatbin_t *fb = gmx_fb__new();
	if (!fb)
		return gmx_fb__err(err, err_len, -ENOMEM, "out of memory");
	int rc = parse_image(fb, image, len, exact, 0, err, err_len);
	if (rc == -ENOMEM && err && err_len && !err[0])
		gmx_fb__msg(err, err_len, "out of memory");
	if (rc) {
		gmx_fatbin_free(fb);
		return rc;
	}
	*out = fb;
	return 0;
}

int gmx_fatbin_parse(const void *image, size_t len, gmx_fatbin_t **out, char *err, size_t err_len)
{
	return parse_top(image, len, len != SIZE_MAX, out, err, err_len);
}

int gmx_fatbin_parse_within(const void *image, size_t readable, gmx_fatbin_t **out, char *err, size_t err_len)
{
	return parse_top(image, readable, 0, out, err, err_len);
}

size_t gmx_fatbin_count(const gmx_fatbin_t *fb)
{
	return fb ? fb->n : 0;
}

const gmx_kernel_info_t *gmx_fatbin_kernel(const gmx_fatbin_t *fb, size_t i)
{
	return fb && i < fb->n ? &fb->k[i] : NULL;
}

const gmx_kernel_info_t *gmx_fatbin_find(const gmx_fatbin_t *fb, const char *name)
{
	if (!fb || !name || !fb->nslot)
		return NULL;
	size_t s = slot_of(fb, name, strlen(name));
	return fb->slot[s] ? &fb->k[fb->slot[s] - 1] : NULL;
}

size_t gmx_fatbin_image_size(const gmx_fatbin_t *fb)
{
	return fb ? fb->image_size : 0;
}

void gmx_fatbin_free(gmx_fatbin_t *fb)
{
	if (!fb)
		return;
	for (size_t i = 0; i < fb->n; i++) {
		free((void *)fb->k[i].name);
		free((void *)fb->k[i].params);
	}
	free(fb->k);
	free(fb->src);
	free(fb->slot);
	free(fb);
}
