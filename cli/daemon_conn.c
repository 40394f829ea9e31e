/* Requests to gpumuxd on its socket (STATUS_REQ, METRICS_REQ): connect, ask, read replies. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../daemon/gmx_proto.h"
#include "commands.h"

int gmx_daemon_ask(const char *dir, unsigned type, char *path, size_t path_len, char *err, size_t err_len)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int n = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s", dir, GMX_SOCKET_NAME);
	snprintf(path, path_len, "%s", sa.sun_path);
	if (n < 0 || (size_t)n >= sizeof sa.sun_path) {
		snprintf(err, err_len, "runtime directory %s is too long for a socket path", dir);
		return -ENAMETOOLONG;
	}
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0) {
		snprintf(err, err_len, "socket: %s", strerror(errno));
		return -errno;
	}
	if (connect(s, (struct sockaddr *)&sa, sizeof sa) != 0) {
		int e = errno;
		snprintf(err, err_len,
			 "no gpumuxd listening on %s (%s); start it with `gpumuxd` or "
			 "set GPUMUX_RUNTIME_DIR",
			 sa.sun_path, strerror(e));
		close(s);
		return -e;
	}
	gmx_msg_hdr_t h;
	gmx_msg_init(&h, (uint16_t)type, sizeof h);
	/* A daemon that refuses this peer at accept has closed already (EPIPE, ECONNRESET):
	 * its REFUSED is still there to read. */
	if (send(s, &h, sizeof h, MSG_NOSIGNAL) != (ssize_t)sizeof h && errno != EPIPE &&
	    errno != ECONNRESET) {
		int e = errno;
		snprintf(err, err_len, "cannot talk to gpumuxd on %s: %s", sa.sun_path, strerror(e));
		close(s);
		return -e;
	}
	return s;
}

ssize_t gmx_daemon_recv(int s, const char *path, void *m, size_t cap, int timeout_ms, char *err,
			size_t err_len)
{
	struct pollfd p = {.fd = s, .events = POLLIN};
	if (poll(&p, 1, timeout_ms) <= 0) {
		snprintf(err, err_len, "gpumuxd on %s did not answer within %d ms", path, timeout_ms);
		return -ETIMEDOUT;
	}
	ssize_t got = recv(s, m, cap, MSG_TRUNC);
	if (got < 0 && errno == ECONNRESET) /* reported once, ahead of the queued reply */
		got = recv(s, m, cap, MSG_TRUNC);
	if (got == 0) {
		snprintf(err, err_len, "gpumuxd on %s closed the connection before its reply ended", path);
		return -EPIPE;
	}
	const gmx_msg_hdr_t *r = (const gmx_msg_hdr_t *)m;
	if (got < (ssize_t)sizeof *r || (size_t)got > cap || r->magic != GMX_PROTO_MAGIC ||
	    r->length != (size_t)got - sizeof *r) {
		snprintf(err, err_len, "gpumuxd on %s sent a malformed reply (%zd bytes)", path, got);
		return -EPROTO;
	}
	if (r->type == GMX_MSG_REFUSED && got >= (ssize_t)sizeof(gmx_msg_refused_t)) {
		const gmx_msg_refused_t *f = (const gmx_msg_refused_t *)m;
		snprintf(err, err_len, "gpumuxd refused: %.*s", (int)sizeof f->reason, f->reason);
		return f->error > 0 ? -f->error : -EACCES;
	}
	return got;
}
