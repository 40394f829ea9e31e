/* The working-set templates file (docs/msched.md): templates learned once and
 * shipped, written by `gpumux profile templates`, checked by `gpumux run
 * --templates` and read by the interposer (shim/wset.c). */
#ifndef GMX_TPL_FILE_H
#define GMX_TPL_FILE_H

#include <stddef.h>

#include "gpumux/template.h"

/* Writes set to path as gpumux/outfile.h says (a regular file through a temporary, renamed
 * when complete; a FIFO, device or link written through). 0 or a negative errno with one
 * line in err. */
int gmx_templates_write(const char *path, const gmx_tpl_set_t *set, char *err, size_t err_len);

/* Reads path into *set (emptied first). 0, or -EINVAL with "FILE: line N:
 * what was expected" in err, or another negative errno. */
int gmx_templates_read(const char *path, gmx_tpl_set_t *set, char *err, size_t err_len);

/* Checks that path is a valid templates file. 0 or as gmx_templates_read. */
int gmx_templates_check(const char *path, char *err, size_t err_len);

#endif
