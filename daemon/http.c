/*
 * The HTTP metrics endpoint (metrics_listen): GET /metrics answers the Prometheus text that
 * `gpumux metrics` prints. libmicrohttpd runs without a thread of its own, in its epoll mode:
 * its epoll descriptor sits in the loop's, and MHD_run serves what is ready without blocking,
 * so a slow or hostile scraper never holds up scheduling. Bounded: GMXD_HTTP_CONNECTIONS
 * connections (GMXD_HTTP_PER_IP per address), GMXD_HTTP_MEMORY bytes of request each,
 * GMXD_HTTP_TIMEOUT_S seconds of inactivity; methods other than GET/HEAD and request bodies
 * are refused.
 */
#include "server_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char text[GMXD_METRICS_MAX];

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *type, const char *body,
			     size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	enum MHD_Result ok = MHD_queue_response(conn, status, r);
	MHD_destroy_response(r);
	return ok;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
				  const char *version, const char *upload, size_t *upload_size, void **state)
{
	(void)cls;
	(void)version;
	(void)upload;
	static const char plain[] = "text/plain; charset=utf-8";
	if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0) {
		static const char m[] = "only GET and HEAD\n";
		return reply(conn, MHD_HTTP_METHOD_NOT_ALLOWED, plain, m, sizeof m - 1);
	}
	if (*state == NULL) { /* headers only so far: answer once they are complete */
		*state = (void *)1;
		return MHD_YES;
	}
	if (*upload_size) { /* a GET with a body: not ours to read */
		static const char m[] = "a request body is not accepted\n";
		*upload_size = 0;
		return reply(conn, MHD_HTTP_CONTENT_TOO_LARGE, plain, m, sizeof m - 1);
	}
	if (strcmp(url, "/metrics") == 0) {
		size_t len = gmxd__metrics_render(text, sizeof text, gmxd__now_ns());
		return reply(conn, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", text, len);
	}
	if (strcmp(url, "/") == 0) {
		static const char m[] = "gpumuxd: metrics at /metrics (Prometheus text format 0.0.4)\n";
		return reply(conn, MHD_HTTP_OK, plain, m, sizeof m - 1);
	}
	static const char m[] = "not found: gpumuxd serves /metrics\n";
	return reply(conn, MHD_HTTP_NOT_FOUND, plain, m, sizeof m - 1);
}

/* Parses HOST:PORT (a numeric IPv4 address, or [IPv6]) into *sa; 0, or -EINVAL with the
 * reason in err. */
static int parse_listen(const char *s, struct sockaddr_storage *sa, socklen_t *sl, char *err, size_t err_len)
{
	char host[64];
	const char *colon = strrchr(s, ':');
	memset(sa, 0, sizeof *sa);
	if (!colon || colon == s) {
		snprintf(err, err_len,
			 "metrics_listen = %s: expected HOST:PORT, e.g. 127.0.0.1:9400 or [::1]:9400", s);
		return -EINVAL;
	}
	char *end;
	long port = strtol(colon + 1, &end, 10);
	if (!colon[1] || *end || port < 0 || port > 65535) {
		snprintf(err, err_len, "metrics_listen = %s: port '%s' is not 0..65535", s, colon + 1);
		return -EINVAL;
	}
	size_t hl = (size_t)(colon - s);
	int v6 = s[0] == '[';
	if (v6 && (hl < 3 || s[hl - 1] != ']')) {
		snprintf(err, err_len, "metrics_listen = %s: an IPv6 address goes in brackets, [::1]:9400",
			 s);
		return -EINVAL;
	}
	if (hl - 2 * v6 >= sizeof host) {
		snprintf(err, err_len, "metrics_listen = %s: the address is too long", s);
		return -EINVAL;
	}
	memcpy(host, s + v6, hl - 2 * v6);
	host[hl - 2 * v6] = 0;
	if (v6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)sa;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons((uint16_t)port);
		*sl = sizeof *a;
		if (inet_pton(AF_INET6, host, &a->sin6_addr) == 1)
			return 0;
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)sa;
		a->sin_family = AF_INET;
		a->sin_port = htons((uint16_t)port);
		*sl = sizeof *a;
		if (inet_pton(AF_INET, host, &a->sin_addr) == 1)
			return 0;
	}
	snprintf(err, err_len, "metrics_listen = %s: '%s' is not a numeric IP%s address", s, host,
		 v6 ? "v6" : "v4");
	return -EINVAL;
}

int gmxd__http_start(void)
{
	const char *spec = SRV.cfg->metrics_listen;
	SRV.http = NULL;
	SRV.http_fd = -1;
	SRV.metrics_url[0] = 0;
	if (!spec[0])
		return 0;
	struct sockaddr_storage sa;
	socklen_t sl;
	char err[256];
	if (parse_listen(spec, &sa, &sl, err, sizeof err) != 0) {
		gmxd_log("%s", err);
		return -EINVAL;
	}
	int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd >= 0)
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sl) != 0 || listen(fd, 64) != 0) {
		int e = errno;
		gmxd_log("metrics_listen = %s: cannot listen there: %s", spec, strerror(e));
		if (fd >= 0)
			close(fd);
		return -e;
	}
	struct sockaddr_storage got;
	socklen_t gl = sizeof got;
	char host[INET6_ADDRSTRLEN] = "?";
	unsigned port = 0;
	if (getsockname(fd, (struct sockaddr *)&got, &gl) == 0) {
		if (got.ss_family == AF_INET6) {
			inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&got)->sin6_addr, host, sizeof host);
			port = ntohs(((struct sockaddr_in6 *)&got)->sin6_port);
		} else {
			inet_ntop(AF_INET, &((struct sockaddr_in *)&got)->sin_addr, host, sizeof host);
			port = ntohs(((struct sockaddr_in *)&got)->sin_port);
		}
	}
	struct MHD_Daemon *d = MHD_start_daemon(
	    MHD_USE_EPOLL | (got.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0), 0, NULL, NULL, on_request, NULL,
	    MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, (unsigned)GMXD_HTTP_CONNECTIONS,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)GMXD_HTTP_PER_IP, MHD_OPTION_CONNECTION_TIMEOUT,
	    (unsigned)GMXD_HTTP_TIMEOUT_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)GMXD_HTTP_MEMORY,
	    MHD_OPTION_END);
	const union MHD_DaemonInfo *info = d ? MHD_get_daemon_info(d, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
	if (!d || !info || info->epoll_fd < 0) {
		gmxd_log("metrics_listen = %s: libmicrohttpd could not start (epoll mode)", spec);
		if (d)
			MHD_stop_daemon(d);
		close(fd);
		return -EIO;
	}
	SRV.http = d;
	SRV.http_fd = info->epoll_fd;
	gmxd__ep_add(SRV.http_fd, EV_HTTP, 0);
	snprintf(SRV.metrics_url, sizeof SRV.metrics_url, "http://%s%s%s:%u/metrics",
		 got.ss_family == AF_INET6 ? "[" : "", host, got.ss_family == AF_INET6 ? "]" : "", port);
	gmxd_log("metrics on %s", SRV.metrics_url);
	gmxd__http_run();
	return 0;
}

void gmxd__http_run(void)
{
	if (!SRV.http)
		return;
	MHD_run(SRV.http);
	MHD_UNSIGNED_LONG_LONG ms;
	SRV.http_due = MHD_get_timeout(SRV.http, &ms) == MHD_YES ? gmxd__now_ns() + (int64_t)ms * 1000000 : 0;
}

int gmxd__http_timeout(int cap)
{
	if (!SRV.http || !SRV.http_due)
		return cap;
	int64_t left = (SRV.http_due - gmxd__now_ns() + 999999) / 1000000;
	if (left < 0)
		left = 0;
	return cap < 0 || left < cap ? (int)left : cap;
}

void gmxd__http_stop(void)
{
	if (!SRV.http)
		return;
	gmxd__ep_del(SRV.http_fd);
	MHD_stop_daemon(SRV.http); /* closes the listening socket it was given, too */
	SRV.http = NULL;
	SRV.http_fd = -1;
}
