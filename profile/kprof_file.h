/* The kernel-profile file (docs/fikit.md): profiles saved by task so that a
 * run needs no measuring. Used by the simulator and by gpumuxd. */
#ifndef GMX_KPROF_FILE_H
#define GMX_KPROF_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "gpumux/kprofile.h"

#define GMX_PROFILE_FORMAT_VERSION 1

/* Writes n profiles to f in the file format; 0 or -EIO (a write failed). */
int gmx_profile_print(FILE *f, const gmx_kprof_t *p, uint32_t n);

/* Writes n profiles to `path` as gpumux/outfile.h says (a regular file through a temporary,
 * renamed when complete; a FIFO, device or link written through).
 * 0 or a negative errno with one line in err. */
int gmx_profile_write(const char *path, const gmx_kprof_t *p, uint32_t n, char *err, size_t err_len);

/* Reads a profile file into *out (an array of *n profiles, malloc'd; free with
 * gmx_profile_free). 0, or -EINVAL with "FILE:LINE: what was expected" in err,
 * or another negative errno. */
int gmx_profile_read(const char *path, gmx_kprof_t **out, uint32_t *n, char *err, size_t err_len);

/* Frees an array of n profiles from gmx_profile_read. */
void gmx_profile_free(gmx_kprof_t *p, uint32_t n);

#endif
