/* A client's container id, from the text of /proc/PID/cgroup (no I/O here: tests feed text). */
#include <ctype.h>
#include <stddef.h>
#include <string.h>

/* A byte that may be part of an id-bearing word: hex digits are alphanumeric. */
static int word_char(char ch)
{
	return isalnum((unsigned char)ch) != 0;
}

int gmxd_container_id(const char *cgroup, char *out, size_t len)
{
	const char *best = NULL;
	if (len)
		out[0] = 0;
	if (!cgroup || len < 65)
		return 0;
	/* Runtimes name a container's cgroup with its 64-hex-digit id between separators
	 * ('/', '-', '.', ':', end of line): docker-ID.scope, cri-containerd-ID.scope,
	 * crio-ID.scope, libpod-ID.scope, /docker/ID, /kubepods/burstable/podUID/ID. A run of
	 * alphanumerics of any other length is not an id. The last one wins: the innermost. */
	for (const char *p = cgroup; *p;) {
		if (!word_char(*p)) {
			p++;
			continue;
		}
		const char *w = p;
		int hex = 1;
		while (*p && word_char(*p)) {
			hex &= isxdigit((unsigned char)*p) && !isupper((unsigned char)*p);
			p++;
		}
		/* libpod-conmon-ID.scope is podman's monitor, not the container */
		if (hex && p - w == 64 && !(w - cgroup >= 7 && strncmp(w - 7, "conmon-", 7) == 0))
			best = w;
	}
	if (!best)
		return 0;
	memcpy(out, best, 64);
	out[64] = 0;
	return 1;
}
