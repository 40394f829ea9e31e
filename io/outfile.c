/* Output files: atomic replacement of regular files, write-through to FIFOs and character
 * devices and through symbolic links, refusal of the rest (include/gpumux/outfile.h). */
#include "gpumux/outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *kind_of(mode_t m)
{
	return S_ISDIR(m)    ? "a directory"
	       : S_ISBLK(m)  ? "a block device"
	       : S_ISSOCK(m) ? "a socket"
			     : "not a regular file, FIFO or character device";
}

/* A temporary beside target (same file system, so rename is atomic) with the mode bits (and,
 * where allowed, the owner) of `old`, or 0666 less the umask when old is NULL. */
static int open_temporary(gmx_outfile_t *o, const char *path, const struct stat *old, char *err, size_t err_len)
{
	mode_t mode;
	if (old) {
		mode = old->st_mode & 07777;
	} else {
		mode_t mask = umask(0);
		umask(mask);
		mode = 0666 & ~mask;
	}
	size_t n = strlen(o->target) + 16;
	o->tmp = malloc(n);
	if (!o->tmp) {
		snprintf(err, err_len, "%s: out of memory", path);
		return -ENOMEM;
	}
	snprintf(o->tmp, n, "%s.tmp.XXXXXX", o->target);
	int fd = mkstemp(o->tmp); /* O_EXCL: never follows what someone left at that name */
	if (fd < 0) {
		int e = errno;
		snprintf(err, err_len, "%s: cannot create a temporary beside it: %s", path, strerror(e));
		free(o->tmp);
		o->tmp = NULL;
		return -e;
	}
	/* A replaced file keeps its owner when we may give it (root replacing a user's file). */
	if (old && (old->st_uid != geteuid() || old->st_gid != getegid()) && fchown(fd, old->st_uid, old->st_gid) != 0 &&
	    errno != EPERM) {
		int e = errno;
		close(fd);
		unlink(o->tmp);
		snprintf(err, err_len, "%s: %s", path, strerror(e));
		free(o->tmp);
		o->tmp = NULL;
		return -e;
	}
	if (fchmod(fd, mode) != 0 || !(o->f = fdopen(fd, "w"))) {
		int e = errno;
		close(fd);
		unlink(o->tmp);
		snprintf(err, err_len, "%s: %s", path, strerror(e));
		free(o->tmp);
		o->tmp = NULL;
		return -e;
	}
	setvbuf(o->f, NULL, _IOFBF, 1 << 20);
	return 0;
}

/* Opens an existing FIFO or character device for writing, checking it is still the one
 * lstat/stat saw (dev, ino). */
static int open_through(gmx_outfile_t *o, const char *path, const struct stat *seen, char *err, size_t err_len)
{
	int fd = open(o->target, O_WRONLY | O_NOCTTY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) != 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		snprintf(err, err_len, "%s: cannot open for writing: %s", path, strerror(e));
		return -e;
	}
	if (st.st_dev != seen->st_dev || st.st_ino != seen->st_ino) {
		close(fd);
		snprintf(err, err_len, "%s: changed while being opened; not written", path);
		return -EAGAIN;
	}
	if (!(o->f = fdopen(fd, "w"))) {
		int e = errno;
		close(fd);
		snprintf(err, err_len, "%s: %s", path, strerror(e));
		return -e;
	}
	return 0;
}

int gmx_outfile_open(gmx_outfile_t *o, const char *path, char *err, size_t err_len)
{
	memset(o, 0, sizeof(*o));
	if (!strcmp(path, "-")) {
		o->f = stdout;
		o->is_stdout = 1;
		return 0;
	}
	struct stat st;
	int exists = lstat(path, &st) == 0;
	if (!exists && errno != ENOENT) {
		int e = errno;
		snprintf(err, err_len, "%s: %s", path, strerror(e));
		return -e;
	}
	if (exists && S_ISLNK(st.st_mode)) {
		/* Written through: the data goes where the link points; the link stays. */
		o->target = realpath(path, NULL);
		if (!o->target || stat(o->target, &st) != 0) {
			int e = errno;
			snprintf(err, err_len, "%s: a symbolic link to %s (-o writes through a link only to a file that exists; give the target's path)",
				 path, e == ENOENT ? "nothing" : strerror(e));
			free(o->target);
			o->target = NULL;
			return -e;
		}
		if (S_ISLNK(st.st_mode)) { /* realpath resolved every link; a new one appeared since */
			snprintf(err, err_len, "%s: changed while being opened; not written", path);
			free(o->target);
			o->target = NULL;
			return -EAGAIN;
		}
	} else {
		o->target = strdup(path);
	}
	if (!o->target) {
		snprintf(err, err_len, "%s: out of memory", path);
		return -ENOMEM;
	}
	int rc;
	if (!exists) {
		rc = open_temporary(o, path, NULL, err, err_len);
	} else if (S_ISREG(st.st_mode)) {
		rc = open_temporary(o, path, &st, err, err_len);
	} else if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode)) {
		rc = open_through(o, path, &st, err, err_len);
	} else {
		snprintf(err, err_len, "%s: is %s; -o writes regular files (replaced whole), FIFOs and character devices (written through)",
			 path, kind_of(st.st_mode));
		rc = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
	}
	if (rc) {
		free(o->target);
		o->target = NULL;
	}
	return rc;
}

/* Makes the rename durable: fsync of the directory holding target (best effort where the file
 * system cannot). */
static int sync_dir(const char *target)
{
	char *copy = strdup(target);
	if (!copy)
		return -ENOMEM;
	int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(copy);
	if (fd < 0)
		return -errno;
	int rc = fsync(fd) != 0 && errno != EINVAL && errno != EROFS ? -errno : 0;
	close(fd);
	return rc;
}

static void release(gmx_outfile_t *o)
{
	free(o->target);
	free(o->tmp);
	memset(o, 0, sizeof(*o));
}

int gmx_outfile_commit(gmx_outfile_t *o, char *err, size_t err_len)
{
	int rc = 0;
	const char *name = o->target ? o->target : "standard output";
	errno = 0;
	if (fflush(o->f) != 0 || ferror(o->f))
		rc = -(errno ? errno : EIO);
	if (!rc && o->tmp && fsync(fileno(o->f)) != 0)
		rc = -errno;
	if (!o->is_stdout && fclose(o->f) != 0 && !rc)
		rc = -(errno ? errno : EIO);
	o->f = NULL;
	if (rc) {
		snprintf(err, err_len, "%s: write failed: %s", name, strerror(-rc));
	} else if (o->tmp) {
		if (rename(o->tmp, o->target) != 0) {
			rc = -errno;
			snprintf(err, err_len, "%s: cannot rename %s into place: %s", name, o->tmp, strerror(-rc));
		} else if ((rc = sync_dir(o->target)) != 0) {
			snprintf(err, err_len, "%s: written, but its directory could not be flushed to disk: %s", name,
				 strerror(-rc));
		}
	}
	if (rc && o->tmp)
		unlink(o->tmp);
	release(o);
	return rc;
}

void gmx_outfile_abort(gmx_outfile_t *o)
{
	if (o->f && !o->is_stdout)
		fclose(o->f);
	if (o->tmp)
		unlink(o->tmp);
	release(o);
}
