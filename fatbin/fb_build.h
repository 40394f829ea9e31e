/* Writing fatbin containers: the inverse of the parser's container layer, for tests,
 * benchmarks and fuzz seeds that need images of a known shape (never linked into the
 * product). The layout is the one docs/fatbin.md describes. */
#ifndef GMX_FB_BUILD_H
#define GMX_FB_BUILD_H

#include <stddef.h>
#include <stdint.h>

#define GMX_FB_CONTAINER_HEADER 16u /* container header bytes */
#define GMX_FB_ENTRY_HEADER 64u	    /* entry header bytes */
#define GMX_FB_FLAG_PTX 0x11u	    /* a PTX entry, 64-bit addresses */
#define GMX_FB_FLAG_ZSTD 0x8000u    /* payload compressed with zstd */
#define GMX_FB_FLAG_LZ4 0x2000u	    /* payload compressed with LZ4 */

/* The payload's size padded to the 8 bytes nvcc aligns entries to. */
size_t gmx_fb_padded(size_t payload_len);

/* Writes the 16-byte container header and the 64-byte header of its one PTX entry (sm_80)
 * into out: the payload of payload_len bytes follows, padded to gmx_fb_padded(payload_len);
 * usize is the uncompressed size, recorded only when flags name a compression. */
void gmx_fb_write_ptx_headers(unsigned char out[GMX_FB_CONTAINER_HEADER + GMX_FB_ENTRY_HEADER],
			      size_t payload_len, size_t usize, uint64_t flags);

#endif
