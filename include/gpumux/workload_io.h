/* Reading and writing the native workload format (docs/workload-format.md). */
#ifndef GPUMUX_WORKLOAD_IO_H
#define GPUMUX_WORKLOAD_IO_H

#include <stdio.h>

#include "gpumux/workload.h"

/* Reads a workload file into *w (initialised here). On error returns -EINVAL
 * (bad content), -ENOENT/-EACCES/... (open) or -ENOMEM, frees *w, and writes
 * one line "PATH:LINE: what was expected" into err. */
int gmx_workload_read(const char *path, gmx_workload_t *w, char *err, size_t err_len);

/* Same as gmx_workload_read, from an open stream; `label` names it in errors. */
int gmx_workload_read_stream(FILE *in, const char *label, gmx_workload_t *w, char *err, size_t err_len);

/* Writes *w to `path` as gpumux/outfile.h says: a regular file atomically (a temporary
 * beside it, renamed on success, removed on failure: no partial file is ever left), a
 * FIFO or character device through, a symbolic link through to its target, "-" to
 * standard output. 0 or a negative errno with err set; -EINVAL (nothing written) when a
 * field could not read back unchanged. */
int gmx_workload_write(const gmx_workload_t *w, const char *path, char *err, size_t err_len);

/* Writes *w to an open stream. 0, -EINVAL (nothing written: inconsistent, or a
 * string that could not read back unchanged) or -EIO. */
int gmx_workload_write_stream(const gmx_workload_t *w, FILE *out);

#endif
