/* Writing fatbin container headers (fb_build.h). */
#include "fb_build.h"

#include <string.h>

#include "gpumux/fatbin.h"

size_t gmx_fb_padded(size_t payload_len)
{
	return (payload_len + 7) & ~(size_t)7;
}

void gmx_fb_write_ptx_headers(unsigned char out[GMX_FB_CONTAINER_HEADER + GMX_FB_ENTRY_HEADER],
			      size_t payload_len, size_t usize, uint64_t flags)
{
	int compressed = (flags & (GMX_FB_FLAG_ZSTD | GMX_FB_FLAG_LZ4)) != 0;
	size_t padded = gmx_fb_padded(payload_len);
	uint32_t magic = GMX_FATBIN_MAGIC, ehs = GMX_FB_ENTRY_HEADER, arch = 80;
	uint32_t csize = compressed ? (uint32_t)payload_len : 0;
	uint16_t version = 1, hs = GMX_FB_CONTAINER_HEADER, kind = 1, ever = 0x101;
	uint64_t body = GMX_FB_ENTRY_HEADER + padded, psize = padded, us = compressed ? usize : 0;
	memset(out, 0, GMX_FB_CONTAINER_HEADER + GMX_FB_ENTRY_HEADER);
	memcpy(out, &magic, 4);
	memcpy(out + 4, &version, 2);
	memcpy(out + 6, &hs, 2);
	memcpy(out + 8, &body, 8);
	unsigned char *e = out + GMX_FB_CONTAINER_HEADER;
	memcpy(e, &kind, 2);
	memcpy(e + 2, &ever, 2);
	memcpy(e + 4, &ehs, 4);
	memcpy(e + 8, &psize, 8);
	memcpy(e + 16, &csize, 4);
	memcpy(e + 28, &arch, 4);
	memcpy(e + 40, &flags, 8);
	memcpy(e + 56, &us, 8);
}
