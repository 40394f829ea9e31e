/* include/gpumux/fatbin.h — kernel names and parameter layouts from the code a program loads.
 *
 * Pure parsing over memory: no CUDA, no I/O, no globals; built as a static library `gmx_fatbin`
 * (top-level folder fatbin/, compiled with -fPIC so the interposer and the stand-in .so link it).
 *
 * A driver older than CUDA 12.4 has no cuFuncGetName / cuFuncGetParamInfo; the same facts are
 * in the image the program hands the driver: the fatbin container's ELF cubins record each
 * kernel's parameters in `.nv.info.<kernel>` (EIATTR_KPARAM_INFO, EIATTR_PARAM_CBANK), and a
 * PTX entry declares them in its `.entry` list. The format is described in docs/fatbin.md.
 */
#ifndef GPUMUX_FATBIN_H
#define GPUMUX_FATBIN_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
	uint32_t offset;
	uint32_t size;
} gmx_kparam_t; /* one parameter, bytes */

typedef struct {
	const char *name; /* mangled symbol name, NUL-terminated, owned by the set */
	uint32_t n_params;
	const gmx_kparam_t *params; /* in ordinal order */
	uint32_t param_bytes;	    /* size of the whole parameter buffer */
} gmx_kernel_info_t;

typedef struct gmx_fatbin gmx_fatbin_t;

/* Magic numbers of the images the driver accepts (little-endian 32-bit words). */
#define GMX_FATBIN_WRAPPER_MAGIC 0x466243B1u /* __fatBinC_Wrapper_t, what nvcc registers */
#define GMX_FATBIN_MAGIC 0xBA55ED50u	     /* the fatbin container */

/* Parses a module image as the driver receives it: a fatbin wrapper (magic 0x466243B1), a
 * fatbin (0xBA55ED50), an ELF cubin, or PTX text (NUL-terminated). `len` is the bytes known
 * readable, or SIZE_MAX when only a pointer is known (cuModuleLoadData): the extent then comes
 * from the headers. 0 on success; negative errno with a message in err on a corrupt image. */
int gmx_fatbin_parse(const void *image, size_t len, gmx_fatbin_t **out, char *err, size_t err_len);

/* As gmx_fatbin_parse for an image known only by its address, where at most `readable` bytes
 * from it may be read (e.g. the rest of its memory mapping): the extent comes from the image's
 * own headers (one fatbin container, the ELF's headers, the PTX text's NUL) and must lie within
 * `readable`; nothing past that extent is read. */
int gmx_fatbin_parse_within(const void *image, size_t readable, gmx_fatbin_t **out, char *err,
			    size_t err_len);

/* Number of kernels in the set. */
size_t gmx_fatbin_count(const gmx_fatbin_t *fb);

/* The i-th kernel (0 <= i < count), or NULL past the end. */
const gmx_kernel_info_t *gmx_fatbin_kernel(const gmx_fatbin_t *fb, size_t i);

/* The kernel of that mangled name, or NULL. */
const gmx_kernel_info_t *gmx_fatbin_find(const gmx_fatbin_t *fb, const char *name);

/* Frees the set (NULL is fine); every pointer it handed out becomes invalid. */
void gmx_fatbin_free(gmx_fatbin_t *fb);

/* Bytes of the image the parser read its extent as (for a wrapper: the fatbin it points to). */
size_t gmx_fatbin_image_size(const gmx_fatbin_t *fb);

#endif
