/* Format detection and the import entry points. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "trace_internal.h"

#ifdef GMX_HAVE_WORKLOAD_IO
#include "gpumux/workload_io.h"
#endif

#define ORION_HEADER "Name,Profile,Memory_footprint,SM_usage,Duration"
#define HEAD_BYTES 4096 /* enough for every header we recognise */

const char *gmx_trace_format_name(gmx_trace_format_t f)
{
	switch (f) {
	case GMX_TRACE_AUTO:
		return "auto";
	case GMX_TRACE_KINETO:
		return "kineto";
	case GMX_TRACE_ORION:
		return "orion";
	case GMX_TRACE_VIDUR:
		return "vidur";
	case GMX_TRACE_NATIVE:
		return "native";
	default:
		return "unknown";
	}
}

gmx_trace_format_t gmx_trace_format_parse(const char *s)
{
	for (int f = GMX_TRACE_AUTO; f < GMX_TRACE_UNKNOWN; f++)
		if (!strcmp(s, gmx_trace_format_name((gmx_trace_format_t)f)))
			return (gmx_trace_format_t)f;
	return GMX_TRACE_UNKNOWN;
}

gmx_trace_format_t gmx_trace_detect(const void *head, size_t len)
{
	const char *p = head, *end = p + len;
	if (len >= 3 && !memcmp(p, "\xef\xbb\xbf", 3))
		p += 3; /* UTF-8 byte order mark */
	const char *q = p;
	while (q < end && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n'))
		q++;
	if (q < end && *q == '{')
		return GMX_TRACE_KINETO;
	size_t hl = strlen(ORION_HEADER);
	if ((size_t)(end - p) >= hl && !memcmp(p, ORION_HEADER, hl))
		return GMX_TRACE_ORION;
	if (gmx_trace_vidur_header(p, (size_t)(end - p)))
		return GMX_TRACE_VIDUR;
	/* Native: comments, then the "gpumux-workload" header line. */
	while (q < end && *q == '#') {
		const char *nl = memchr(q, '\n', (size_t)(end - q));
		if (!nl)
			return GMX_TRACE_UNKNOWN;
		q = nl + 1;
		while (q < end && (*q == ' ' || *q == '\t' || *q == '\r' || *q == '\n'))
			q++;
	}
	if ((size_t)(end - q) >= 15 && !memcmp(q, "gpumux-workload", 15))
		return GMX_TRACE_NATIVE;
	return GMX_TRACE_UNKNOWN;
}

/* Says what a file we cannot read looks like, so the message helps. */
static int refuse(gmx_src_t *s, const unsigned char *h, size_t n)
{
	if (n == 0)
		return gmx_src_fail(s, "byte 0: file is empty: not a trace");
	if (n >= 8 && !memcmp(h, "\x89PNG\r\n\x1a\n", 8))
		return gmx_src_fail(s, "byte 0: this is a PNG image, not a trace");
	size_t i = 0;
	while (i < n && (h[i] == ' ' || h[i] == '\t' || h[i] == '\r' || h[i] == '\n'))
		i++;
	if (i < n && h[i] == '[')
		return gmx_src_fail(s, "byte %zu: JSON array at the top level: a PyTorch profiler trace is an "
				       "object with \"traceEvents\"",
				    i);
	char hex[3 * 8 + 1] = "";
	for (size_t k = 0; k < n && k < 8; k++)
		snprintf(hex + 3 * k, sizeof(hex) - 3 * k, "%02x ", h[k]);
	hex[strlen(hex) ? strlen(hex) - 1 : 0] = 0;
	return gmx_src_fail(s, "byte 0: unrecognised content (starts with %s): expected a PyTorch profiler "
			       "JSON trace (plain or gzip), an Orion or Vidur CSV, or a gpumux workload",
			    hex);
}

static int import_src(gmx_src_t *s, const char *path, const gmx_trace_opts_t *opts, gmx_workload_t *w,
		      gmx_trace_info_t *info)
{
	const unsigned char *head;
	size_t n;
	int rc = gmx_src_head(s, HEAD_BYTES, &head, &n);
	if (rc)
		return rc == -ENOMEM ? (gmx_src_fail(s, "out of memory"), rc) : rc;
	gmx_trace_format_t f = opts ? opts->format : GMX_TRACE_AUTO;
	gmx_trace_format_t seen = gmx_trace_detect(head, n);
	if (f == GMX_TRACE_AUTO)
		f = seen;
	if (info)
		info->format = f;
	switch (f) {
	case GMX_TRACE_KINETO:
		rc = gmx_trace_kineto_read(s, w, info);
		/* the one format whose buffers are the allocator's tensors (Orion has none;
		 * Vidur's are whole weights and caches laid out by the model) */
		if (!rc && opts && opts->pack) {
			char msg[128];
			if ((rc = gmx_trace_pack(w, msg, sizeof(msg))))
				gmx_src_fail(s, "%s", msg);
		}
		return rc;
	case GMX_TRACE_ORION:
		return gmx_trace_orion_read(s, w, info);
	case GMX_TRACE_VIDUR:
		return gmx_trace_vidur_read(s, path, opts, w, info);
	case GMX_TRACE_NATIVE:
#ifdef GMX_HAVE_WORKLOAD_IO
		if (path && !s->gz) {
			gmx_workload_free(w);
			rc = gmx_workload_read(path, w, s->err, s->err_len);
			if (rc && gmx_workload_init(w, NULL))
				return -ENOMEM;
			return rc;
		}
		return gmx_src_fail(s, "byte 0: gpumux workloads are read from plain files only");
#else
		return gmx_src_fail(s, "byte 0: this build has no workload reader (workload/ is missing)");
#endif
	default:
		return refuse(s, head, n);
	}
}

static int finish(gmx_src_t *s, const char *path, int rc, gmx_workload_t *w, gmx_trace_info_t *info)
{
	if (!rc && w->name && !strcmp(w->name, "workload") && path) {
		/* Name the workload after the file: the base name without extensions. */
		const char *b = strrchr(path, '/');
		b = b ? b + 1 : path;
		char name[128];
		snprintf(name, sizeof(name), "%s", b);
		char *dot = strchr(name, '.');
		if (dot && dot != name)
			*dot = 0;
		for (char *x = name; *x; x++)
			if (!((*x >= 'a' && *x <= 'z') || (*x >= 'A' && *x <= 'Z') || (*x >= '0' && *x <= '9') ||
			      *x == '-' || *x == '_' || *x == '.'))
				*x = '_'; /* the name is one word in the native format */
		if (!name[0])
			snprintf(name, sizeof(name), "trace");
		rc = gmx_workload_set_str(&w->name, name);
	}
	if (!rc) {
		char msg[256];
		if (gmx_workload_validate(w, msg, sizeof(msg)))
			rc = gmx_src_fail(s, "internal error: imported workload is inconsistent: %s", msg);
	}
	gmx_src_close(s);
	if (rc) {
		if (s->err && s->err_len && !s->err[0])
			gmx_src_fail(s, "import failed: %s", strerror(rc < 0 ? -rc : rc));
		gmx_workload_free(w);
		gmx_trace_info_free(info);
	}
	return rc;
}

int gmx_trace_import(const char *path, const gmx_trace_opts_t *opts, gmx_workload_t *w, gmx_trace_info_t *info,
		     char *err, size_t err_len)
{
	gmx_src_t s;
	if (info)
		memset(info, 0, sizeof(*info));
	int rc = gmx_workload_init(w, NULL);
	if (rc)
		return rc;
	rc = gmx_src_open(&s, path, NULL, 0, err, err_len);
	if (rc) {
		gmx_workload_free(w);
		return rc;
	}
	rc = import_src(&s, path, opts, w, info);
	return finish(&s, path, rc, w, info);
}

int gmx_trace_import_mem(const void *data, size_t len, const char *label, const gmx_trace_opts_t *opts,
			 gmx_workload_t *w, gmx_trace_info_t *info, char *err, size_t err_len)
{
	gmx_src_t s;
	if (info)
		memset(info, 0, sizeof(*info));
	int rc = gmx_workload_init(w, NULL);
	if (rc)
		return rc;
	rc = gmx_src_open(&s, label ? label : "(memory)", data ? data : "", len, err, err_len);
	if (rc) {
		gmx_workload_free(w);
		return rc;
	}
	gmx_trace_opts_t o = opts ? *opts : (gmx_trace_opts_t){0};
	if (o.format == GMX_TRACE_NATIVE)
		o.format = GMX_TRACE_UNKNOWN;
	rc = import_src(&s, NULL, &o, w, info);
	return finish(&s, NULL, rc, w, info);
}

void gmx_trace_info_free(gmx_trace_info_t *info)
{
	if (!info)
		return;
	free(info->launch_ns);
	free(info->start_ns);
	free(info->end_ns);
	free(info->stream);
	gmx_trace_format_t f = info->format;
	memset(info, 0, sizeof(*info));
	info->format = f;
}
