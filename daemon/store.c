/*
 * The profile store: profile_dir/NAME.gmxprof per task name, loaded when a client of that
 * name registers, saved (a snapshot) when its last client leaves.
 *
 * The files hold task names and kernel timings of every user, so the directory is 0700 and
 * each file 0600. A save writes a temporary beside the target, flushes it to disk, renames
 * it over the previous file and flushes the directory, so a crash leaves the old profile or
 * the new one, never a torn one. The store is checked at start: a profile_dir the daemon
 * cannot write stops it with the reason, rather than losing every profile later.
 */
#include "server_internal.h"

#include "kprof_file.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define STORE_DIR_MODE 0700
#define STORE_FILE_MODE 0600

/* The profile file of task `name` under profile_dir, or -1 when the name
 * cannot name a file safely (anything but letters, digits, '.', '_', '-'). */
static int profile_path(const char *name, char *out, size_t len)
{
	if (!name[0] || name[0] == '.' || !SRV.cfg->profile_dir[0])
		return -1;
	for (const char *p = name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		      *p == '.' || *p == '_' || *p == '-'))
			return -1;
	int n = snprintf(out, len, "%s/%s.gmxprof", SRV.cfg->profile_dir, name);
	return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* Makes the files already in the store private (an older gpumuxd wrote them 0644) and
 * removes the temporaries of saves a crash interrupted. */
static void privatise(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	int dfd = dirfd(d);
	for (struct dirent *e; (e = readdir(d));) {
		size_t l = strlen(e->d_name);
		struct stat st;
		int tmp = strstr(e->d_name, ".gmxprof.tmp.") != NULL;
		if ((!tmp && (l < 8 || strcmp(e->d_name + l - 8, ".gmxprof") != 0)) ||
		    fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
		    st.st_uid != geteuid())
			continue;
		if (tmp) {
			if (unlinkat(dfd, e->d_name, 0) == 0)
				gmxd_log("profile store: %s/%s removed (a save that did not finish)", dir,
					 e->d_name);
		} else if ((st.st_mode & 077) && fchmodat(dfd, e->d_name, STORE_FILE_MODE, 0) == 0) {
			gmxd_log("profile store: %s/%s made private (mode 0600)", dir, e->d_name);
		}
	}
	closedir(d);
}

int gmxd__store_open(char *err, size_t err_len)
{
	const char *dir = SRV.cfg->profile_dir;
	char path[sizeof SRV.cfg->profile_dir];
	snprintf(path, sizeof path, "%s", dir);
	/* Its parents as mkdir -p would (0755: they may be shared, like /var/lib/gpumux). */
	for (char *q = path + 1; *q; q++)
		if (*q == '/') {
			*q = 0;
			mkdir(path, 0755);
			*q = '/';
		}
	if (mkdir(dir, STORE_DIR_MODE) != 0 && errno != EEXIST) {
		int e = errno;
		snprintf(err, err_len,
			 "profile_dir %s: cannot create it: %s (create it, or set profile_dir to a "
			 "directory gpumuxd may write)",
			 dir, strerror(e));
		return -e;
	}
	struct stat st;
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
		snprintf(err, err_len, "profile_dir %s: not a directory", dir);
		return -ENOTDIR;
	}
	if (st.st_uid == geteuid() && (st.st_mode & 077) && chmod(dir, STORE_DIR_MODE) == 0)
		gmxd_log("profile store: %s made private (mode 0700)", dir);
	else if (st.st_mode & 077)
		gmxd_log("profile store: %s is not private (mode %04o, owned by uid %d): other users may "
			 "read task names and kernel timings",
			 dir, (unsigned)(st.st_mode & 07777), (int)st.st_uid);
	/* Prove it writable the way a save writes: a file created there and flushed. */
	char probe[sizeof path + 32];
	snprintf(probe, sizeof probe, "%s/.gpumuxd-probe.XXXXXX", dir);
	int fd = mkstemp(probe);
	if (fd < 0 || fsync(fd) != 0) {
		int e = errno;
		if (fd >= 0) {
			close(fd);
			unlink(probe);
		}
		snprintf(err, err_len,
			 "profile_dir %s: cannot write there: %s (set profile_dir to a directory "
			 "gpumuxd may write)",
			 dir, strerror(e));
		return -e;
	}
	close(fd);
	unlink(probe);
	privatise(dir);
	return 0;
}

/* Loads the stored profile of `name` into *p (initialised) when there is one;
 * a missing file is normal (the task is measured first), a bad one is logged. */
void gmxd__store_load(const char *name, gmx_kprof_t *p)
{
	char path[512], err[512];
	if (profile_path(name, path, sizeof path) || access(path, R_OK) != 0)
		return;
	gmx_kprof_t *v = NULL;
	uint32_t n = 0;
	if (gmx_profile_read(path, &v, &n, err, sizeof err)) {
		gmxd_log("profile store: %s (ignored; the task is measured again)", err);
		return;
	}
	for (uint32_t i = 0; i < n; i++)
		if (v[i].task && strcmp(v[i].task, name) == 0) {
			gmx_kprof_free(p);
			*p = v[i];
			memset(&v[i], 0, sizeof v[i]);
			gmxd_log("profile store: loaded %s (%u kernels)", path, p->n);
			break;
		}
	gmx_profile_free(v, n);
}

/* Writes snap to path through a private temporary beside it; 0 or a negative errno with the
 * reason in err. */
static int write_private(const char *path, const gmx_kprof_t *snap, char *err, size_t err_len)
{
	char tmp[600];
	snprintf(tmp, sizeof tmp, "%s.tmp.XXXXXX", path);
	int fd = mkstemp(tmp); /* 0600, O_EXCL: never follows a link someone left there */
	if (fd < 0) {
		int e = errno;
		snprintf(err, err_len, "%s: cannot create a temporary: %s", path, strerror(e));
		return -e;
	}
	FILE *f = fdopen(fd, "w");
	if (!f) {
		int e = errno;
		close(fd);
		unlink(tmp);
		snprintf(err, err_len, "%s: %s", tmp, strerror(e));
		return -e;
	}
	int rc = gmx_profile_print(f, snap, 1);
	if (!rc && (fflush(f) != 0 || fsync(fileno(f)) != 0))
		rc = -(errno ? errno : EIO);
	if (fclose(f) != 0 && !rc)
		rc = -(errno ? errno : EIO);
	if (!rc && rename(tmp, path) != 0)
		rc = -errno;
	if (rc) {
		snprintf(err, err_len, "%s: write failed: %s", path, strerror(-rc));
		unlink(tmp);
		return rc;
	}
	/* The rename itself is durable once the directory is. */
	int dfd = open(SRV.cfg->profile_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) != 0)
		gmxd_log("profile store: %s: flushing the directory: %s", SRV.cfg->profile_dir,
			 strerror(errno));
	if (dfd >= 0)
		close(dfd);
	return 0;
}

/* Writes the profile of `name` to the store, when it has learned anything. */
void gmxd__store_save(const char *name, gmx_kprof_t *p)
{
	char path[512], err[700];
	if (!p->n || profile_path(name, path, sizeof path))
		return;
	/* A snapshot: the store's profile may still be measured by a policy that holds it. */
	gmx_kprof_t snap;
	if (gmx_kprof_snapshot(p, &snap)) {
		gmxd_log("profile store: cannot save %s: out of memory", path);
		return;
	}
	if (write_private(path, &snap, err, sizeof err))
		gmxd_log("profile store: cannot save: %s", err);
	else
		gmxd_log("profile store: saved %s (%u kernels)", path, snap.n);
	gmx_kprof_free(&snap);
}

gmx_kprof_t *gmxd__store_get(const char *name)
{
	int k = -1, lru = -1;
	for (int i = 0; i < GMX_MAX_TASKS && k < 0; i++)
		if (SRV.store[i].used && strcmp(SRV.store[i].name, name) == 0)
			k = i;
	for (int i = 0; i < GMX_MAX_TASKS && k < 0; i++) {
		if (!SRV.store[i].used) {
			k = i;
			break;
		}
		/* In use while a client slot (a departed one with commands still held included)
		 * points at it. */
		int held = 0;
		for (int t = 0; t < GMX_MAX_TASKS && !held; t++)
			held = SRV.cl[t].used && SRV.prof_ptr[t] == &SRV.store[i].prof;
		if (!held && (lru < 0 || SRV.store[i].last_used < SRV.store[lru].last_used))
			lru = i;
	}
	if (k < 0 && lru >= 0) {
		/* Every entry is taken: the least recently used one no client holds goes (saved
		 * first when a save was due). */
		if (SRV.store[lru].dirty)
			gmxd__store_save(SRV.store[lru].name, &SRV.store[lru].prof);
		gmx_kprof_free(&SRV.store[lru].prof);
		SRV.store[lru].used = 0;
		k = lru;
	}
	if (k < 0)
		return NULL;
	if (!SRV.store[k].used) {
		if (gmx_kprof_init(&SRV.store[k].prof, name) != 0)
			return NULL;
		SRV.store[k].used = 1;
		SRV.store[k].saved = SRV.store[k].dirty = 0;
		snprintf(SRV.store[k].name, sizeof SRV.store[k].name, "%s", name);
		gmxd__store_load(name, &SRV.store[k].prof); /* else measured as it runs */
	}
	SRV.store[k].last_used = ++SRV.store_clock;
	return &SRV.store[k].prof;
}

static void store_write(int k, int64_t now)
{
	gmxd__store_save(SRV.store[k].name, &SRV.store[k].prof);
	SRV.store[k].saved = 1;
	SRV.store[k].saved_at = now;
	SRV.store[k].dirty = 0;
}

void gmxd__store_left(const char *name, int64_t now)
{
	for (int k = 0; k < GMX_MAX_TASKS; k++)
		if (SRV.store[k].used && strcmp(SRV.store[k].name, name) == 0) {
			if (SRV.store[k].saved && now - SRV.store[k].saved_at < GMXD_SAVE_INTERVAL_NS)
				SRV.store[k].dirty = 1;
			else
				store_write(k, now);
		}
}

void gmxd__store_tick(int64_t now, int flush_all)
{
	for (int k = 0; k < GMX_MAX_TASKS; k++)
		if (SRV.store[k].used && SRV.store[k].dirty &&
		    (flush_all || now - SRV.store[k].saved_at >= GMXD_SAVE_INTERVAL_NS))
			store_write(k, now);
}
