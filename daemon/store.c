/*
 * The profile store: profile_dir/NAME.gmxprof per task name, loaded when a client of that
 * name registers, saved (a snapshot) when its last client leaves.
 */
#include "server_internal.h"

#include "kprof_file.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* Writes the profile of `name` to the store, when it has learned anything. */
void gmxd__store_save(const char *name, gmx_kprof_t *p)
{
	char path[512], err[512];
	if (!p->n || profile_path(name, path, sizeof path))
		return;
	/* Create the store's folders on first use (mkdir -p). */
	char dir[512];
	snprintf(dir, sizeof dir, "%s", SRV.cfg->profile_dir);
	for (char *q = dir + 1; *q; q++)
		if (*q == '/') {
			*q = 0;
			mkdir(dir, 0755);
			*q = '/';
		}
	mkdir(dir, 0755);
	/* A snapshot: the store's profile may still be measured by a policy that holds it. */
	gmx_kprof_t snap;
	if (gmx_kprof_snapshot(p, &snap)) {
		gmxd_log("profile store: cannot save %s: out of memory", path);
		return;
	}
	if (gmx_profile_write(path, &snap, 1, err, sizeof err))
		gmxd_log("profile store: cannot save: %s", err);
	else
		gmxd_log("profile store: saved %s (%u kernels)", path, snap.n);
	gmx_kprof_free(&snap);
}
