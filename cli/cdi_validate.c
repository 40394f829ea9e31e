/* A CDI spec checked against the Container Device Interface schema (schema.json, defs.json of
 * cncf-tags/container-device-interface) and the rules its runtimes enforce on names and paths. */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "commands.h"

static int bad(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* Only these keys in o; 0 or the first other one through *what. */
static int only_keys(const json_t *o, const char *const *keys, const char **what)
{
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)o, k, v)
	{
		int ok = 0;
		for (const char *const *p = keys; *p && !ok; p++)
			ok = !strcmp(k, *p);
		if (!ok) {
			*what = k;
			return -1;
		}
	}
	return 0;
}

/* A device name: alphanumeric at both ends, [A-Za-z0-9_.:-] between. */
static int name_ok(const char *s)
{
	size_t n = strlen(s);
	if (!n || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("_.:-", s[i]))
			return 0;
	return 1;
}

/* kind = VENDOR/CLASS: VENDOR dot-separated labels of [a-z0-9-] (alphanumeric ends), CLASS a
 * name of [A-Za-z0-9_.-] with alphanumeric ends. */
static int kind_ok(const char *s)
{
	const char *slash = strchr(s, '/');
	if (!slash || slash == s || strchr(slash + 1, '/') || strlen(slash + 1) > 63)
		return 0;
	for (const char *p = s, *label = s; p <= slash; p++) {
		if (p == slash || *p == '.') {
			if (p == label || !isalnum((unsigned char)label[0]) || !isalnum((unsigned char)p[-1]))
				return 0;
			label = p + 1;
		} else if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '-')) {
			return 0;
		}
	}
	const char *c = slash + 1;
	size_t n = strlen(c);
	if (!n || !isalnum((unsigned char)c[0]) || !isalnum((unsigned char)c[n - 1]))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)c[i]) && !strchr("_.-", c[i]))
			return 0;
	return 1;
}

static int strings(const json_t *a, const char *at, char *err, size_t len)
{
	if (!json_is_array(a))
		return bad(err, len, "%s: expected an array of strings", at);
	size_t i;
	json_t *v;
	json_array_foreach((json_t *)a, i, v) if (!json_is_string(v)) return bad(
	    err, len, "%s[%zu]: expected a string", at, i);
	return 0;
}

static int abs_path(const json_t *o, const char *key, int required, const char *at, char *err, size_t len)
{
	json_t *v = json_object_get(o, key);
	if (!v)
		return required ? bad(err, len, "%s: %s is required", at, key) : 0;
	if (!json_is_string(v) || json_string_value(v)[0] != '/')
		return bad(err, len, "%s.%s: expected an absolute path", at, key);
	return 0;
}

static int annotations(const json_t *a, const char *at, char *err, size_t len)
{
	if (!a)
		return 0;
	if (!json_is_object(a))
		return bad(err, len, "%s.annotations: expected an object of strings", at);
	const char *k;
	json_t *v;
	json_object_foreach((json_t *)a, k, v) if (!json_is_string(v) || !*k) return bad(
	    err, len, "%s.annotations.%s: expected a string under a non-empty key", at, k);
	return 0;
}

/* One containerEdits object; nonempty: it must edit something (a device's must). */
static int edits(const json_t *e, const char *at, int nonempty, char *err, size_t len)
{
	static const char *const keys[] = {"env",      "deviceNodes",	 "mounts", "hooks",
					   "intelRdt", "additionalGids", NULL};
	const char *what;
	char sub[160];
	size_t i;
	json_t *v;
	if (!json_is_object(e))
		return bad(err, len, "%s: expected an object", at);
	if (only_keys(e, keys, &what))
		return bad(err, len, "%s: unknown key '%s'", at, what);
	if (nonempty && json_object_size(e) == 0)
		return bad(err, len, "%s: a device must edit something (env, deviceNodes, mounts, hooks)",
			   at);
	json_t *env = json_object_get(e, "env");
	snprintf(sub, sizeof sub, "%s.env", at);
	if (env && strings(env, sub, err, len))
		return -EINVAL;
	json_array_foreach(env, i, v)
	{
		const char *s = json_string_value(v), *eq = strchr(s, '=');
		if (!eq || eq == s)
			return bad(err, len, "%s[%zu] = \"%s\": expected NAME=VALUE", sub, i, s);
	}
	json_t *mounts = json_object_get(e, "mounts");
	if (mounts && !json_is_array(mounts))
		return bad(err, len, "%s.mounts: expected an array", at);
	json_array_foreach(mounts, i, v)
	{
		static const char *const mkeys[] = {"hostPath", "containerPath", "options", "type", NULL};
		snprintf(sub, sizeof sub, "%s.mounts[%zu]", at, i);
		if (!json_is_object(v))
			return bad(err, len, "%s: expected an object", sub);
		if (only_keys(v, mkeys, &what))
			return bad(err, len, "%s: unknown key '%s'", sub, what);
		json_t *hp = json_object_get(v, "hostPath"), *o = json_object_get(v, "options"),
		       *t = json_object_get(v, "type");
		if (!json_is_string(hp) || !json_string_value(hp)[0])
			return bad(err, len, "%s.hostPath: expected a path", sub);
		if (abs_path(v, "containerPath", 1, sub, err, len))
			return -EINVAL;
		if (o && strings(o, sub, err, len))
			return -EINVAL;
		if (t && !json_is_string(t))
			return bad(err, len, "%s.type: expected a string", sub);
	}
	json_t *nodes = json_object_get(e, "deviceNodes");
	if (nodes && !json_is_array(nodes))
		return bad(err, len, "%s.deviceNodes: expected an array", at);
	json_array_foreach(nodes, i, v)
	{
		snprintf(sub, sizeof sub, "%s.deviceNodes[%zu]", at, i);
		if (!json_is_object(v) || abs_path(v, "path", 1, sub, err, len) ||
		    abs_path(v, "hostPath", 0, sub, err, len))
			return json_is_object(v) ? -EINVAL : bad(err, len, "%s: expected an object", sub);
	}
	json_t *hooks = json_object_get(e, "hooks");
	if (hooks && !json_is_array(hooks))
		return bad(err, len, "%s.hooks: expected an array", at);
	json_array_foreach(hooks, i, v)
	{
		static const char *const names[] = {"prestart",	      "createRuntime", "createContainer",
						    "startContainer", "poststart",     "poststop"};
		snprintf(sub, sizeof sub, "%s.hooks[%zu]", at, i);
		const char *hn = json_string_value(json_object_get(v, "hookName"));
		int known = 0;
		for (size_t k = 0; hn && k < sizeof names / sizeof names[0]; k++)
			known |= !strcmp(hn, names[k]);
		if (!known)
			return bad(err, len,
				   "%s.hookName: expected one of prestart, createRuntime, createContainer, "
				   "startContainer, poststart, poststop",
				   sub);
		if (abs_path(v, "path", 1, sub, err, len))
			return -EINVAL;
	}
	return 0;
}

int gmx_cdi_validate(const json_t *spec, char *err, size_t len)
{
	static const char *const keys[] = {"cdiVersion", "kind",	   "annotations",
					   "devices",	 "containerEdits", NULL};
	static const char *const versions[] = {"0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0"};
	const char *what;
	if (!json_is_object(spec))
		return bad(err, len, "the spec: expected a JSON object");
	if (only_keys(spec, keys, &what))
		return bad(err, len, "the spec: unknown key '%s'", what);
	const char *ver = json_string_value(json_object_get(spec, "cdiVersion"));
	int known = 0;
	for (size_t i = 0; ver && i < sizeof versions / sizeof versions[0]; i++)
		known |= !strcmp(ver, versions[i]);
	if (!known)
		return bad(err, len, "cdiVersion: expected one of 0.3.0 .. 0.8.0, 1.0.0");
	const char *kind = json_string_value(json_object_get(spec, "kind"));
	if (!kind || !kind_ok(kind))
		return bad(err, len, "kind: expected VENDOR/CLASS such as vendor.com/device");
	if (annotations(json_object_get(spec, "annotations"), "the spec", err, len))
		return -EINVAL;
	json_t *devs = json_object_get(spec, "devices");
	if (!json_is_array(devs) || json_array_size(devs) == 0)
		return bad(err, len, "devices: expected an array of at least one device");
	size_t i;
	json_t *d;
	json_array_foreach(devs, i, d)
	{
		static const char *const dkeys[] = {"name", "annotations", "containerEdits", NULL};
		char at[64];
		snprintf(at, sizeof at, "devices[%zu]", i);
		if (!json_is_object(d))
			return bad(err, len, "%s: expected an object", at);
		if (only_keys(d, dkeys, &what))
			return bad(err, len, "%s: unknown key '%s'", at, what);
		const char *name = json_string_value(json_object_get(d, "name"));
		if (!name || !name_ok(name))
			return bad(err, len,
				   "%s.name: expected letters, digits and _.:- with a letter or digit at "
				   "each end",
				   at);
		for (size_t j = 0; j < i; j++)
			if (!strcmp(name,
				    json_string_value(json_object_get(json_array_get(devs, j), "name"))))
				return bad(err, len, "%s.name: '%s' names two devices", at, name);
		json_t *e = json_object_get(d, "containerEdits");
		if (!e)
			return bad(err, len, "%s: containerEdits is required", at);
		if (annotations(json_object_get(d, "annotations"), at, err, len))
			return -EINVAL;
		snprintf(at, sizeof at, "devices[%zu].containerEdits", i);
		if (edits(e, at, 1, err, len))
			return -EINVAL;
	}
	json_t *top = json_object_get(spec, "containerEdits");
	return top ? edits(top, "containerEdits", 0, err, len) : 0;
}
