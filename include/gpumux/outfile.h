/* Output files (-o FILE of gpumux gen, trace import, profile record, profile templates).
 *
 * What is at the path decides how it is written:
 *   missing or a regular file  a temporary beside it, flushed to disk, renamed over it: a
 *                              reader sees the old file or the whole new one, never a part;
 *                              a replaced file keeps its permission bits (and its
 *                              owner and group where allowed: as root)
 *   a symbolic link            written through to the file it points to (by the rules here);
 *                              the link stays; a link to nothing is refused
 *   a FIFO, a character device written through (opened and written, never replaced)
 *   "-"                        standard output
 *   a directory, anything else refused, with the reason
 */
#ifndef GPUMUX_OUTFILE_H
#define GPUMUX_OUTFILE_H

#include <stddef.h>
#include <stdio.h>

typedef struct gmx_outfile {
	FILE *f;      /* write the content here */
	char *target; /* where it lands: the path, or the file a symbolic link points to */
	char *tmp;    /* the temporary renamed over target on commit; NULL when written through */
	int is_stdout;
} gmx_outfile_t;

/* Opens PATH for writing by the rules above. 0, or a negative errno with "PATH: reason" in err. */
int gmx_outfile_open(gmx_outfile_t *o, const char *path, char *err, size_t err_len);

/* Flushes and finishes the file (fsync and rename for a temporary). 0, or a negative errno with
 * the reason in err; on failure nothing replaced the target. Always releases o. */
int gmx_outfile_commit(gmx_outfile_t *o, char *err, size_t err_len);

/* Drops what was written (removes the temporary; a FIFO or device keeps what went through).
 * Releases o. */
void gmx_outfile_abort(gmx_outfile_t *o);

#endif
