/* gpumuxd configuration: defaults, bounds and the INI file ([daemon] section, inih). */
#include "daemon.h"

#include "gpumux/numparse.h"
#include "gpumux/sched.h"

#include <errno.h>
#include <grp.h>
#include <ini.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void gmxd_config_default(gmxd_config_t *c)
{
	memset(c, 0, sizeof *c);
	const char *dir = getenv("GPUMUX_RUNTIME_DIR");
	snprintf(c->runtime_dir, sizeof c->runtime_dir, "%s", dir && *dir ? dir : GMX_RUNTIME_DIR_DEFAULT);
	snprintf(c->policy, sizeof c->policy, "timeslice");
	c->slice_us = GMXD_SLICE_US_DEFAULT;
	c->inflight = GMXD_INFLIGHT_DEFAULT;
	c->max_clients = GMXD_MAX_CLIENTS_DEFAULT;
	c->unresponsive_ms = GMXD_UNRESPONSIVE_MS_DEFAULT;
	c->device_memory_mb = GMXD_DEVICE_MEMORY_MB_DEFAULT;
	c->spin_us = GMXD_SPIN_US_DEFAULT;
	c->link_mb_s = GMXD_LINK_MB_S_DEFAULT;
	c->piece_us = GMXD_PIECE_US_DEFAULT;
	snprintf(c->profile_dir, sizeof c->profile_dir, "/var/lib/gpumux/profiles");
}

static int parse_long(const char *v, long lo, long hi, long *out)
{
	uint64_t x;
	if (lo < 0 || gmx_parse_uint(v, (uint64_t)lo, (uint64_t)hi, &x))
		return -EINVAL;
	*out = (long)x;
	return 0;
}

int gmxd_config_allow(gmxd_config_t *c, const char *list, int users, char *err, size_t err_len)
{
	char buf[1024];
	snprintf(buf, sizeof buf, "%s", list);
	char *save = NULL;
	for (char *t = strtok_r(buf, ", \t", &save); t; t = strtok_r(NULL, ", \t", &save)) {
		long id;
		int numeric = parse_long(t, 0, 0x7fffffff, &id) == 0;
		if (users) {
			if (c->n_allow_uid >= GMXD_ALLOW_MAX) {
				snprintf(err, err_len, "allow_users: more than %d entries", GMXD_ALLOW_MAX);
				return -E2BIG;
			}
			if (!numeric) {
				struct passwd *pw = getpwnam(t);
				if (!pw) {
					snprintf(err, err_len, "allow_users: no user named '%s'", t);
					return -ENOENT;
				}
				id = (long)pw->pw_uid;
			}
			c->allow_uid[c->n_allow_uid++] = (uid_t)id;
		} else {
			if (c->n_allow_gid >= GMXD_ALLOW_MAX) {
				snprintf(err, err_len, "allow_group: more than %d entries", GMXD_ALLOW_MAX);
				return -E2BIG;
			}
			if (!numeric) {
				struct group *gr = getgrnam(t);
				if (!gr) {
					snprintf(err, err_len, "allow_group: no group named '%s'", t);
					return -ENOENT;
				}
				id = (long)gr->gr_gid;
			}
			c->allow_gid[c->n_allow_gid++] = (gid_t)id;
		}
	}
	return 0;
}

typedef struct {
	gmxd_config_t *c;
	char *err;
	size_t err_len;
	int rc;
} load_ctx_t;

/* One key of a [task NAME] section (docs/daemon.md, the gpumux policy): 1 or 0 (stop, the
 * reason in ctx). */
static int on_task_key(load_ctx_t *x, const char *task, const char *name, const char *value)
{
	gmxd_config_t *c = x->c;
	size_t n = strlen(task);
	if (n == 0 || n >= GMX_NAME_MAX) {
		snprintf(x->err, x->err_len, "[task %s]: expected a task name of 1 to %d characters", task,
			 GMX_NAME_MAX - 1);
		x->rc = -EINVAL;
		return 0;
	}
	int k = 0;
	while (k < c->n_task && strcmp(c->task[k].name, task) != 0)
		k++;
	if (k == c->n_task) {
		if (c->n_task >= GMXD_TASK_CFG_MAX) {
			snprintf(x->err, x->err_len, "[task %s]: more than %d task sections", task, GMXD_TASK_CFG_MAX);
			x->rc = -E2BIG;
			return 0;
		}
		memset(&c->task[k], 0, sizeof c->task[k]);
		memcpy(c->task[k].name, task, n + 1);
		c->n_task++;
	}
	struct gmxd_task_cfg *t = &c->task[k];
	/* One arrival process per task: the gap predictor takes a period or a Poisson rate. */
	int period = strcmp(name, "arrival_period_us") == 0, rate = strcmp(name, "arrival_rate_per_s") == 0;
	if ((period && t->arrival_rate_per_s > 0) || (rate && t->arrival_period_us > 0)) {
		snprintf(x->err, x->err_len,
			 "[task %s]: %s given beside %s (expected one arrival process: a period or a "
			 "Poisson rate)",
			 task, name, period ? "arrival_rate_per_s" : "arrival_period_us");
		x->rc = -EINVAL;
		return 0;
	}
	if (rate) {
		if (gmx_parse_real(value, GMXD_RATE_PER_S_MIN, GMXD_RATE_PER_S_MAX, &t->arrival_rate_per_s)) {
			snprintf(x->err, x->err_len,
				 "%s = %s: expected a decimal number of requests per second in [%g, %g]", name,
				 value, GMXD_RATE_PER_S_MIN, GMXD_RATE_PER_S_MAX);
			x->rc = -EINVAL;
			return 0;
		}
		return 1;
	}
	long lo, hi, *dst;
	if (strcmp(name, "latency_target_ms") == 0)
		lo = 1, hi = GMXD_TARGET_MS_MAX, dst = &t->latency_target_ms;
	else if (period)
		lo = GMXD_PERIOD_US_MIN, hi = GMXD_PERIOD_US_MAX, dst = &t->arrival_period_us;
	else {
		snprintf(x->err, x->err_len,
			 "[task %s]: unknown key '%s' (expected latency_target_ms, arrival_period_us or "
			 "arrival_rate_per_s)",
			 task, name);
		x->rc = -EINVAL;
		return 0;
	}
	if (parse_long(value, lo, hi, dst)) {
		snprintf(x->err, x->err_len, "%s = %s: expected an integer in [%ld, %ld]", name, value, lo, hi);
		x->rc = -EINVAL;
		return 0;
	}
	return 1;
}

/* inih handler: one key; returns 0 (stop) on the first error, with the reason in ctx. */
static int on_key(void *user, const char *section, const char *name, const char *value)
{
	load_ctx_t *x = user;
	gmxd_config_t *c = x->c;
	if (strncasecmp(section, "task ", 5) == 0)
		return on_task_key(x, section + 5 + strspn(section + 5, " \t"), name, value);
	if (strcasecmp(section, "daemon") != 0) {
		snprintf(x->err, x->err_len, "unknown section [%s] (expected [daemon] or [task NAME])", section);
		x->rc = -EINVAL;
		return 0;
	}
	static const struct {
		const char *key;
		size_t off;
		long lo, hi;
	} nums[] = {
	    {"slice_us", offsetof(gmxd_config_t, slice_us), GMXD_SLICE_US_MIN, GMXD_SLICE_US_MAX},
	    {"inflight", offsetof(gmxd_config_t, inflight), GMXD_INFLIGHT_MIN, GMXD_INFLIGHT_MAX},
	    {"max_clients", offsetof(gmxd_config_t, max_clients), 1, GMXD_MAX_CLIENTS_MAX},
	    {"max_clients_per_user", offsetof(gmxd_config_t, max_clients_per_user), 0, GMXD_MAX_CLIENTS_MAX},
	    {"unresponsive_ms", offsetof(gmxd_config_t, unresponsive_ms), GMXD_UNRESPONSIVE_MS_MIN,
	     GMXD_UNRESPONSIVE_MS_MAX},
	    {"device_memory_mb", offsetof(gmxd_config_t, device_memory_mb), 1, GMXD_DEVICE_MEMORY_MB_MAX},
	    {"spin_us", offsetof(gmxd_config_t, spin_us), 0, GMXD_SPIN_US_MAX},
	    {"link_mb_s", offsetof(gmxd_config_t, link_mb_s), 1, GMXD_LINK_MB_S_MAX},
	    {"piece_us", offsetof(gmxd_config_t, piece_us), GMXD_PIECE_US_MIN, GMXD_PIECE_US_MAX},
	};
	for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
		if (strcmp(name, nums[i].key) == 0) {
			if (parse_long(value, nums[i].lo, nums[i].hi, (long *)((char *)c + nums[i].off))) {
				snprintf(x->err, x->err_len, "%s = %s: expected an integer in [%ld, %ld]",
					 name, value, nums[i].lo, nums[i].hi);
				x->rc = -EINVAL;
				return 0;
			}
			return 1;
		}
	size_t n = strlen(value);
	if (strcmp(name, "runtime_dir") == 0 || strcmp(name, "profile_dir") == 0 ||
	    strcmp(name, "policy") == 0) {
		char *dst = name[0] == 'r' ? c->runtime_dir : name[1] == 'r' ? c->profile_dir : c->policy;
		size_t cap = name[0] == 'r'   ? sizeof c->runtime_dir
			     : name[1] == 'r' ? sizeof c->profile_dir
					      : sizeof c->policy;
		if (n == 0 || n >= cap) {
			snprintf(x->err, x->err_len, "%s: expected 1 to %zu characters", name, cap - 1);
			x->rc = -EINVAL;
			return 0;
		}
		if (dst == c->policy && !gmx_sched_find(value)) {
			char names[128];
			gmx_sched_names(names, sizeof names);
			snprintf(x->err, x->err_len, "policy = %s: unknown policy (expected %s)", value, names);
			x->rc = -EINVAL;
			return 0;
		}
		memcpy(dst, value, n + 1);
		return 1;
	}
	if (strcmp(name, "allow_users") == 0 || strcmp(name, "allow_group") == 0) {
		x->rc = gmxd_config_allow(c, value, name[6] == 'u', x->err, x->err_len);
		return x->rc == 0;
	}
	if (strcmp(name, "metrics_listen") == 0) {
		if (n >= sizeof c->metrics_listen) {
			snprintf(x->err, x->err_len, "metrics_listen: expected at most %zu characters",
				 sizeof c->metrics_listen - 1);
			x->rc = -EINVAL;
			return 0;
		}
		/* "off" or nothing: no endpoint */
		snprintf(c->metrics_listen, sizeof c->metrics_listen, "%s", strcmp(value, "off") ? value : "");
		return 1;
	}
	if (strcmp(name, "oversubscribe") == 0) {
		if (strcmp(value, "true") && strcmp(value, "false") && strcmp(value, "1") &&
		    strcmp(value, "0")) {
			snprintf(x->err, x->err_len, "oversubscribe = %s: expected true or false", value);
			x->rc = -EINVAL;
			return 0;
		}
		c->oversubscribe_default = value[0] == 't' || value[0] == '1';
		return 1;
	}
	snprintf(x->err, x->err_len, "unknown key '%s'", name);
	x->rc = -EINVAL;
	return 0;
}

int gmxd_config_load(gmxd_config_t *c, const char *path, char *err, size_t err_len)
{
	char why[256] = "";
	load_ctx_t x = {c, why, sizeof why, 0};
	int line = ini_parse(path, on_key, &x);
	if (line == -1) {
		snprintf(err, err_len, "%s: cannot open: %s", path, strerror(errno));
		return -ENOENT;
	}
	if (line != 0) {
		snprintf(err, err_len, "%s:%d: %s", path, line, why[0] ? why : "syntax error");
		return x.rc ? x.rc : -EINVAL;
	}
	return 0;
}
