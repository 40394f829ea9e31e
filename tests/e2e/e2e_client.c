/*
 * A driver-API client for the end-to-end tests: launches a fixed sequence of kernels and
 * writes when it launched each one, so the tests can match its launches with the stand-in's
 * execution log.
 *   e2e_client --out FILE --kernels NAME:US[,NAME:US...] --count N [--gap-us G]
 *              [--sync-every K] [--sync-with stream|event|ctx] [--alloc-mb M [--touch-mb T [--windows W]]]
 *              [--start-when FILE] [--end-when FILE] [--pause-at I --resume-when FILE]
 *              [--record-every K] [--hold-ms MS] [--allocs N] [--fork CHILD_OUT] [--linger-when FILE]
 *              [--hostile bad-hello|bad-ring|stall|huge-alloc|status-len|hello-nonul|silent:N|crowd:N]
 * Kernel i is kernels[i % n]; with --gap-us the client synchronises after each kernel and
 * sleeps G µs (a high-priority request stream with idle gaps); otherwise it synchronises
 * every K kernels (a saturating batch job), and at the end: with cuStreamSynchronize, or with
 * --sync-with event an event recorded on the stream and cuEventSynchronize, or with ctx
 * cuCtxSynchronize. --alloc-mb allocates M MB with cuMemAlloc and
 * passes it to every kernel; with --touch-mb kernel i touches only T MB of it, from window
 * i % W (kernels declared "p@2,i32,u64": the pointer, the index, the bytes touched).
 * --start-when: after its allocation and one event record (which connects it to gpumuxd), write
 * "ready" and wait (up to 20 s) until FILE exists, so that several clients launch together.
 * --pause-at I --resume-when FILE: after kernel I-1, synchronise, write "paused" and wait (up
 * to 20 s) until FILE exists, so that a test can act at that point however slow the machine.
 * --allocs N makes N more allocations of 64 KiB before connecting and frees them after the
 * kernels ("freed N"). --end-when: before exiting, write "waiting" and wait until FILE exists.
 * --fork: after --start-when, fork; the child writes to CHILD_OUT, starts CUDA over with 1 MB of
 * its own (if --alloc-mb) and runs the same kernels; the parent waits for it before exiting.
 * --record-every K records an event after every K kernels (never waited for). --hostile talks
 * garbage to gpumuxd (no CUDA at all): silent:N opens N connections that say nothing for
 * --hold-ms (default 6000) and reports how the daemon answered; crowd:N sends N HELLOs at once
 * and counts the replies (WELCOME, REFUSED with their reasons, none), holding what it was
 * given for --hold-ms; status-len and hello-nonul send one malformed first message and print
 * the reply; huge-alloc registers and announces an allocation no machine holds.
 * --linger-when: once every kernel completed, write "idle" and stay connected, memory held,
 * until FILE exists (up to 60 s).
 * Output lines: "pid=P", "launch i=I name=K t_ns=T" (CLOCK_MONOTONIC before the call, the line
 * written after it), "idle",
 * "done".
 * --quiet 1 (a launch-rate run) writes no launch lines but "rate launches=N ns=T batch_ns=M
 * cpu_ns=C sleeps=S" before "done": M is the median time of one batch of --sync-every launches
 * and its synchronisation, which a run preempted now and then by other work on the machine hardly
 * moves; T is the time from the first launch to the end of the final synchronisation, C and S
 * the process's CPU time (all its threads) and voluntary context switches in that time (not its
 * waits for --start-when and --end-when files, which poll every millisecond).
 * --for-ms MS stops launching once MS ms have passed since the first launch (checked every 8
 * launches; --count stays the upper bound), so a rate run lasts as long whatever the rate.
 * --until FILE stops launching once FILE exists (checked every 8 launches). --verify 1 fills the
 * --alloc-mb buffer with a pattern (cuMemcpyHtoD) before the kernels and reads it back after them
 * (cuMemcpyDtoH): "verified M MB after N kernels", or exit 1 naming the first byte that differs.
 * --nice N runs the launches N nice levels lower (every thread of the process), from the first
 * launch to the last one's synchronisation, and goes back afterwards where the system lets it
 * (root): its setup and --verify's read-back are not starved by a loaded machine.
 * --idle-thread 1 starts one thread that only sleeps, before anything else: a process with a
 * second thread pays glibc's atomic mutexes (a single-threaded one takes them with plain stores),
 * as every process through the interposer and on the real driver does; the launch-rate bench's
 * like-for-like reference.
 */
#define _GNU_SOURCE
#include <cuda.h>

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gmx_proto.h"

#define CU(call)                                                                                             \
	do {                                                                                                 \
		CUresult r_ = (call);                                                                        \
		if (r_ != CUDA_SUCCESS) {                                                                    \
			fprintf(stderr, "e2e_client: %s:%d: %s returned %d\n", __FILE__, __LINE__, #call,    \
				(int)r_);                                                                    \
			exit(1);                                                                             \
		}                                                                                            \
	} while (0)

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int connect_daemon(void)
{
	const char *dir = getenv("GPUMUX_RUNTIME_DIR");
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s", dir ? dir : GMX_RUNTIME_DIR_DEFAULT,
		 GMX_SOCKET_NAME);
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s >= 0 && connect(s, (struct sockaddr *)&sa, sizeof sa) != 0) {
		close(s);
		s = -1;
	}
	return s;
}

static void hello_init(gmx_msg_hello_t *h, const char *name, int prio, uint32_t flags)
{
	memset(h, 0, sizeof *h);
	gmx_msg_init(&h->h, GMX_MSG_HELLO, sizeof *h);
	h->priority = prio;
	h->flags = flags;
	h->pid = getpid();
	snprintf(h->name, sizeof h->name, "%s", name);
}

/* Reads one reply (waiting up to ms): 'W' WELCOME (its descriptors closed), 'R' REFUSED (reason
 * and error copied), 'S' STATUS, '-' closed without a reply, '?' anything else or nothing. */
static int reply(int s, int ms, char *reason, size_t len, int *error)
{
	struct pollfd p = {.fd = s, .events = POLLIN};
	if (poll(&p, 1, ms) <= 0)
		return '?';
	static char b[GMX_CTRL_MAX];
	char cbuf[CMSG_SPACE(3 * sizeof(int))];
	struct iovec iov = {.iov_base = b, .iov_len = sizeof b};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
	ssize_t n = recvmsg(s, &mh, MSG_CMSG_CLOEXEC);
	if (n < 0 && errno == ECONNRESET)
		n = recvmsg(s, &mh, MSG_CMSG_CLOEXEC);
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
			for (size_t k = 0; k < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); k++)
				close(((int *)CMSG_DATA(c))[k]);
	if (n <= 0)
		return '-';
	const gmx_msg_hdr_t *h = (const gmx_msg_hdr_t *)b;
	if (n < (ssize_t)sizeof *h || h->magic != GMX_PROTO_MAGIC)
		return '?';
	if (h->type == GMX_MSG_REFUSED && n >= (ssize_t)sizeof(gmx_msg_refused_t)) {
		const gmx_msg_refused_t *r = (const gmx_msg_refused_t *)b;
		snprintf(reason, len, "%.*s", (int)sizeof r->reason, r->reason);
		*error = r->error;
		return 'R';
	}
	return h->type == GMX_MSG_WELCOME ? 'W' : h->type == GMX_MSG_STATUS ? 'S' : '?';
}

/* N connections that say nothing for hold_ms; then how the daemon answered them. */
static int silent(int n, long hold_ms)
{
	int *s = malloc((size_t)n * sizeof *s), opened = 0;
	for (int i = 0; s && i < n; i++)
		if ((s[opened] = connect_daemon()) >= 0)
			opened++;
	printf("silent: %d of %d connections open\n", opened, n);
	fflush(stdout);
	struct timespec ts = {hold_ms / 1000, (hold_ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
	int refused = 0, closed = 0, open = 0;
	char reason[256] = "", last[256] = "";
	for (int i = 0; i < opened; i++) {
		int e = 0, r = reply(s[i], 0, reason, sizeof reason, &e);
		refused += r == 'R';
		closed += r == '-';
		open += r == '?';
		if (r == 'R')
			snprintf(last, sizeof last, "%s", reason);
		close(s[i]);
	}
	printf("silent: %d refused, %d closed without a reply, %d still open; reason: %s\n", refused, closed,
	       open, last);
	free(s);
	return 0;
}

/* N HELLOs at once: every connection first, then every HELLO, then every reply. */
static int crowd(int n, long hold_ms)
{
	int *s = malloc((size_t)n * sizeof *s);
	if (!s)
		return 1;
	for (int i = 0; i < n; i++)
		s[i] = connect_daemon();
	gmx_msg_hello_t h;
	for (int i = 0; i < n; i++) {
		char name[32];
		snprintf(name, sizeof name, "crowd%d", i);
		hello_init(&h, name, 5, 0);
		if (s[i] >= 0)
			send(s[i], &h, sizeof h, MSG_NOSIGNAL);
	}
	int w = 0, r = 0, none = 0, failed = 0;
	char reasons[8][256];
	int nreason = 0, count[8] = {0};
	for (int i = 0; i < n; i++) {
		char reason[256];
		int e = 0, k = s[i] >= 0 ? reply(s[i], 10000, reason, sizeof reason, &e) : 'x';
		if (k == 'W') {
			w++;
			continue; /* held open: the daemon serves it */
		}
		if (k == 'R') {
			r++;
			int j = 0;
			while (j < nreason && strcmp(reasons[j], reason) != 0)
				j++;
			if (j == nreason && nreason < 8)
				snprintf(reasons[nreason++], sizeof reasons[0], "%s", reason);
			if (j < 8)
				count[j]++;
		} else if (k == 'x') {
			failed++;
		} else {
			none++;
		}
		if (s[i] >= 0)
			close(s[i]);
		s[i] = -1;
	}
	printf("crowd: %d connections: %d welcomed, %d refused, %d without a reply, %d could not connect\n",
	       n, w, r, none, failed);
	for (int j = 0; j < nreason; j++)
		printf("crowd: refused x%d: %s\n", count[j], reasons[j]);
	printf("held\n");
	fflush(stdout);
	struct timespec ts = {hold_ms / 1000, (hold_ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
	for (int i = 0; i < n; i++)
		if (s[i] >= 0)
			close(s[i]);
	free(s);
	return 0;
}

/* Speaks to gpumuxd like a broken or hostile client would; returns 0 once it was cut off. */
static int hostile(const char *how, long hold_ms)
{
	if (strncmp(how, "silent:", 7) == 0)
		return silent(atoi(how + 7), hold_ms);
	if (strncmp(how, "crowd:", 6) == 0)
		return crowd(atoi(how + 6), hold_ms);
	int s = connect_daemon();
	if (s < 0) {
		perror("e2e_client: connect");
		return 1;
	}
	if (strcmp(how, "status-len") == 0 || strcmp(how, "hello-nonul") == 0) {
		gmx_msg_hello_t h;
		size_t len = sizeof h;
		if (how[0] == 's') { /* a STATUS_REQ header claiming a body of 0xFFFFFFF0 bytes */
			gmx_msg_init(&h.h, GMX_MSG_STATUS_REQ, sizeof h.h);
			h.h.length = 0xFFFFFFF0u;
			len = sizeof h.h;
		} else {
			hello_init(&h, "", 5, 0);
			memset(h.name, 'A', sizeof h.name);
		}
		send(s, &h, len, MSG_NOSIGNAL);
		char reason[256] = "";
		int e = 0, k = reply(s, 5000, reason, sizeof reason, &e);
		if (k == 'R')
			printf("reply: REFUSED error %d: %s\n", e, reason);
		else
			printf("reply: %s\n", k == 'S'	 ? "STATUS"
					      : k == 'W' ? "WELCOME"
					      : k == '-' ? "closed"
							 : "none");
		return 0;
	}
	if (strcmp(how, "bad-hello") == 0) {
		char junk[40];
		memset(junk, 0xA5, sizeof junk);
		send(s, junk, sizeof junk, 0);
	} else {
		gmx_msg_hello_t h;
		hello_init(&h, strcmp(how, "stall") == 0 ? "stall" : "hostile", 3,
			   strcmp(how, "huge-alloc") == 0 ? GMX_HELLO_OVERSUBSCRIBE : 0);
		send(s, &h, sizeof h, 0);
		gmx_msg_welcome_t w;
		char cbuf[CMSG_SPACE(3 * sizeof(int))];
		struct iovec iov = {.iov_base = &w, .iov_len = sizeof w};
		struct msghdr mh = {
		    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
		if (recvmsg(s, &mh, 0) != (ssize_t)sizeof w || w.h.type != GMX_MSG_WELCOME) {
			fprintf(stderr, "e2e_client: no WELCOME\n");
			return 1;
		}
		int fds[3];
		memcpy(fds, CMSG_DATA(CMSG_FIRSTHDR(&mh)), sizeof fds);
		gmx_shm_region_t *r =
		    mmap(NULL, w.region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
		if (r == MAP_FAILED)
			return 1;
		int wake;
		uint64_t one = 1;
		if (strcmp(how, "stall") == 0) {
			/* A launch notice, then silence once it is granted: never a completion, never
			 * another read. */
			gmx_ring_entry_t e = {.type = GMX_UP_NOTICE, .a = 0, .seq = 1, .x = 42};
			gmx_ring_push(&r->up, &e, &wake);
			if (write(fds[1], &one, sizeof one) < 0)
				perror("e2e_client: eventfd");
			int granted = 0;
			for (int t = 0; t < 5000 && !granted; t++) {
				granted = __atomic_load_n(&r->down.tail, __ATOMIC_ACQUIRE) !=
					  __atomic_load_n(&r->down.head, __ATOMIC_RELAXED);
				struct timespec ms = {0, 1000000};
				nanosleep(&ms, NULL);
			}
			if (!granted) {
				fprintf(stderr, "e2e_client: the stalling client was never granted\n");
				return 1;
			}
			printf("granted; now silent\n");
			fflush(stdout);
		} else if (strcmp(how, "huge-alloc") == 0) {
			/* 4 EiB of managed memory: more than any device and host hold. */
			gmx_ring_entry_t e = {.type = GMX_UP_ALLOC, .x = 1ull << 40, .y = 1ull << 62};
			gmx_ring_push(&r->up, &e, &wake);
			if (write(fds[1], &one, sizeof one) < 0)
				perror("e2e_client: eventfd");
		} else {
			/* An entry type that does not exist, then an impossible tail. */
			gmx_ring_entry_t e = {.type = 999, .seq = 1};
			gmx_ring_push(&r->up, &e, &wake);
			if (write(fds[1], &one, sizeof one) < 0)
				perror("e2e_client: eventfd");
			__atomic_store_n(&r->up.tail, r->up.head + 5000, __ATOMIC_RELEASE);
		}
	}
	/* The daemon must close the connection. */
	char b[512];
	for (;;) {
		ssize_t n = recv(s, b, sizeof b, 0);
		if (n == 0 || (n < 0 && errno != EINTR)) {
			printf("closed by the daemon\n");
			return 0;
		}
		if (n > 0 && ((gmx_msg_hdr_t *)b)->type == GMX_MSG_REFUSED) {
			printf("refused: %s\n", ((gmx_msg_refused_t *)b)->reason);
		}
	}
}

static int cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;
	return (x > y) - (x < y);
}

/* The median of n values (sorted in place); 0 when there are none. */
static long long median_ll(long long *v, size_t n)
{
	if (!v || n == 0)
		return 0;
	qsort(v, n, sizeof *v, cmp_ll);
	return v[n / 2];
}

/* The process's CPU time (every thread, ns) and voluntary context switches (sleeps) so far. */
static void usage_now(long long *cpu_ns, long *sleeps)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	*cpu_ns = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
		  (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
	*sleeps = ru.ru_nvcsw;
}

/* Waits until path exists: 0, or -1 (said) after 20 s. */
static int wait_for(const char *path)
{
	for (int t = 0; access(path, F_OK) != 0; t++) {
		if (t == 20000) {
			fprintf(stderr, "e2e_client: %s did not appear within 20 s\n", path);
			return -1;
		}
		struct timespec ms = {0, 1000000};
		nanosleep(&ms, NULL);
	}
	return 0;
}

/* A context, the module, its functions and a stream of this process. */
static void cuda_setup(const char *module, int nk, char names[][32], CUfunction *fn, CUstream *st)
{
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod;
	CU(cuInit(0));
	CU(cuDeviceGet(&dev, 0));
	CU(cuDevicePrimaryCtxRetain(&ctx, dev));
	CU(cuCtxSetCurrent(ctx));
	CU(cuModuleLoadData(&mod, module));
	for (int k = 0; k < nk; k++)
		CU(cuModuleGetFunction(&fn[k], mod, names[k]));
	CU(cuStreamCreate(st, CU_STREAM_NON_BLOCKING));
}

/* --sync-with: how the launches are synchronised (every --sync-every, and at the end). */
enum { SYNC_STREAM, SYNC_EVENT, SYNC_CTX };

/* Waits until everything launched onto st completed, the way --sync-with asks. */
static void sync_launches(CUstream st, int how)
{
	if (how == SYNC_CTX) {
		CU(cuCtxSynchronize());
	} else if (how == SYNC_EVENT) {
		CUevent ev;
		CU(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
		CU(cuEventRecord(ev, st));
		CU(cuEventSynchronize(ev));
		CU(cuEventDestroy(ev));
	} else {
		CU(cuStreamSynchronize(st));
	}
}

/* --idle-thread: sleeps until the process exits. */
static void *idle_thread(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

/* Sets every thread of the process to nice level n (Linux nice is per thread); failures are
 * ignored (going back to a lower level needs privilege). */
static void renice_all(int n)
{
	DIR *d = opendir("/proc/self/task");
	if (!d) {
		(void)setpriority(PRIO_PROCESS, 0, n);
		return;
	}
	for (struct dirent *e; (e = readdir(d));)
		if (e->d_name[0] != '.')
			(void)setpriority(PRIO_PROCESS, (id_t)atoi(e->d_name), n);
	closedir(d);
}

int main(int argc, char **argv)
{
	const char *out = NULL, *kernels = "k:100", *how = NULL, *start_when = NULL, *end_when = NULL,
		   *fork_out = NULL, *resume_when = NULL, *linger_when = NULL, *until_file = NULL;
	long count = 10, gap_us = -1, sync_every = 8, alloc_mb = 0, touch_mb = 0, windows = 1,
	     record_every = 0, hold_ms = 6000, allocs = 0, pause_at = -1, quiet = 0, for_ms = 0, verify = 0,
	     nice_by = 0, idle = 0;
	int sync_with = SYNC_STREAM;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--out"))
			out = argv[i + 1];
		else if (!strcmp(argv[i], "--kernels"))
			kernels = argv[i + 1];
		else if (!strcmp(argv[i], "--count"))
			count = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--gap-us"))
			gap_us = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--sync-every"))
			sync_every = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--alloc-mb"))
			alloc_mb = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--touch-mb"))
			touch_mb = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--record-every"))
			record_every = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--windows"))
			windows = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--start-when"))
			start_when = argv[i + 1];
		else if (!strcmp(argv[i], "--end-when"))
			end_when = argv[i + 1];
		else if (!strcmp(argv[i], "--allocs"))
			allocs = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--fork"))
			fork_out = argv[i + 1];
		else if (!strcmp(argv[i], "--linger-when"))
			linger_when = argv[i + 1];
		else if (!strcmp(argv[i], "--pause-at"))
			pause_at = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--resume-when"))
			resume_when = argv[i + 1];
		else if (!strcmp(argv[i], "--hostile"))
			how = argv[i + 1];
		else if (!strcmp(argv[i], "--hold-ms"))
			hold_ms = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--quiet"))
			quiet = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--sync-with")) {
			const char *w = argv[i + 1];
			sync_with = !strcmp(w, "stream")  ? SYNC_STREAM
				    : !strcmp(w, "event") ? SYNC_EVENT
				    : !strcmp(w, "ctx")	  ? SYNC_CTX
							  : -1;
			if (sync_with < 0) {
				fprintf(stderr, "e2e_client: --sync-with %s: expected stream, event or ctx\n",
					w);
				return 2;
			}
		} else if (!strcmp(argv[i], "--for-ms"))
			for_ms = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--verify"))
			verify = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--nice"))
			nice_by = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--until"))
			until_file = argv[i + 1];
		else if (!strcmp(argv[i], "--idle-thread"))
			idle = atol(argv[i + 1]);
		else {
			fprintf(stderr, "e2e_client: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	if (how)
		return hostile(how, hold_ms);
	pthread_t idler;
	int err = idle ? pthread_create(&idler, NULL, idle_thread, NULL) : 0;
	if (err) {
		fprintf(stderr, "e2e_client: --idle-thread: %s\n", strerror(err));
		return 1;
	}
	if ((pause_at >= 0) != (resume_when != NULL)) {
		fprintf(stderr, "e2e_client: --pause-at and --resume-when go together\n");
		return 2;
	}
	FILE *log = out ? fopen(out, "w") : stdout;
	if (!log) {
		perror(out);
		return 1;
	}
	setvbuf(log, NULL, _IOLBF, 0);
	fprintf(log, "pid=%d\n", (int)getpid());
	/* Module text: one kernel per name, parameters (pointer, index). */
	char module[4096] = "", names[16][32];
	int nk = 0;
	char tmp[1024];
	snprintf(tmp, sizeof tmp, "%s", kernels);
	for (char *save, *t = strtok_r(tmp, ",", &save); t && nk < 16; t = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(t, ':');
		if (!colon)
			return 2;
		*colon = 0;
		snprintf(names[nk], sizeof names[nk], "%s", t);
		size_t l = strlen(module);
		snprintf(module + l, sizeof module - l, "kernel %s %s %s\n", t, colon + 1,
			 touch_mb > 0 ? "p@2,i32,u64" : "p,i32");
		nk++;
	}
	CUfunction fn[16];
	CUstream st;
	cuda_setup(module, nk, names, fn, &st);
	CUdeviceptr buf = 0;
	if (alloc_mb > 0) {
		CUresult r = cuMemAlloc(&buf, (size_t)alloc_mb << 20);
		if (r != CUDA_SUCCESS) {
			fprintf(stderr, "e2e_client: cuMemAlloc(%ld MB) returned %d\n", alloc_mb, (int)r);
			return 1;
		}
	}
	if (touch_mb > 0 && (windows < 1 || touch_mb * windows > alloc_mb)) {
		fprintf(stderr, "e2e_client: --touch-mb x --windows exceeds --alloc-mb\n");
		return 2;
	}
	uint32_t *pattern = NULL;
	if (verify && buf) { /* a pattern written now, read back after the kernels */
		pattern = malloc((size_t)alloc_mb << 20);
		if (!pattern)
			return 1;
		uint32_t seed = (uint32_t)getpid();
		for (size_t w = 0; w < ((size_t)alloc_mb << 18); w++)
			pattern[w] = (uint32_t)(w * 2654435761u) ^ seed;
		CU(cuMemcpyHtoD(buf, pattern, (size_t)alloc_mb << 20));
	}
	CUdeviceptr *small = allocs > 0 ? calloc((size_t)allocs, sizeof *small) : NULL;
	for (long i = 0; small && i < allocs; i++)
		CU(cuMemAlloc(&small[i], 64u << 10));
	if (start_when) {
		/* An event record reaches the daemon (the interposer connects at its first queued
		 * command) without touching memory; then wait for the others. */
		CUevent ev;
		CU(cuEventCreate(&ev, CU_EVENT_DEFAULT));
		CU(cuEventRecord(ev, st));
		CU(cuEventSynchronize(ev));
		CU(cuEventDestroy(ev));
		fprintf(log, "ready\n");
		if (wait_for(start_when) != 0)
			return 1;
	}
	pid_t child = -1;
	if (fork_out) {
		/* The child starts CUDA over (nothing of the parent's survives fork), with 1 MB of
		 * memory of its own when the parent has some, and runs the same kernels. */
		fflush(log);
		child = fork();
		if (child < 0) {
			perror("e2e_client: fork");
			return 1;
		}
		if (child == 0) {
			log = fopen(fork_out, "w");
			if (!log)
				_exit(1);
			setvbuf(log, NULL, _IOLBF, 0);
			fprintf(log, "pid=%d\n", (int)getpid());
			cuda_setup(module, nk, names, fn, &st);
			buf = 0;
			if (alloc_mb > 0)
				CU(cuMemAlloc(&buf, 1u << 20));
			touch_mb = 0;
			allocs = 0;
			free(pattern);
			pattern = NULL;
			pause_at = -1;
		}
	}
	int base_nice = getpriority(PRIO_PROCESS, 0);
	if (nice_by)
		renice_all(base_nice + (int)nice_by);
	long long t_first = now_ns(), cpu_first, cpu_last;
	long sleeps_first, sleeps_last;
	usage_now(&cpu_first, &sleeps_first);
	long launched = 0;
	/* Batch times (quiet runs): one per synchronisation every sync_every launches. */
	size_t nbatch = 0, capbatch = quiet && sync_every > 0 ? 1u << 20 : 0;
	long long *batch = capbatch ? malloc(capbatch * sizeof *batch) : NULL, t_batch = t_first;
	for (long i = 0; i < count; i++, launched++) {
		if (for_ms > 0 && (i & 7) == 0 && now_ns() - t_first >= for_ms * 1000000LL)
			break;
		if (until_file && (i & 7) == 0 && access(until_file, F_OK) == 0)
			break;
		if (i == pause_at) {
			CU(cuStreamSynchronize(st));
			fprintf(log, "paused\n");
			if (wait_for(resume_when) != 0)
				return 1;
		}
		int k = (int)(i % nk), idx = (int)i;
		CUdeviceptr at = buf + (CUdeviceptr)((i % windows) * touch_mb) * (1u << 20);
		unsigned long long touch = (unsigned long long)touch_mb << 20;
		void *args[] = {&at, &idx, &touch};
		/* The clock before the call, its line after: the write is not part of the request. */
		long long t_call = quiet ? 0 : now_ns();
		CU(cuLaunchKernel(fn[k], 1, 1, 1, 32, 1, 1, 0, st, args, NULL));
		if (!quiet)
			fprintf(log, "launch i=%ld name=%s t_ns=%lld\n", i, names[k], t_call);
		if (record_every > 0 && (i + 1) % record_every == 0) {
			CUevent ev;
			CU(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
			CU(cuEventRecord(ev, st));
			CU(cuEventDestroy(ev)); /* the driver keeps a destroyed event's pending record */
		}
		if (gap_us >= 0) {
			CU(cuStreamSynchronize(st));
			struct timespec ts = {gap_us / 1000000, (gap_us % 1000000) * 1000};
			nanosleep(&ts, NULL);
		} else if (sync_every > 0 && (i + 1) % sync_every == 0) {
			sync_launches(st, sync_with);
			if (batch && nbatch < capbatch) {
				long long t = now_ns();
				batch[nbatch++] = t - t_batch;
				t_batch = t;
			}
		}
	}
	sync_launches(st, sync_with);
	long long t_last = now_ns();
	usage_now(&cpu_last, &sleeps_last);
	if (nice_by)
		renice_all(base_nice); /* fails unless allowed (root): then it stays niced */
	if (pattern) {
		uint32_t *back = malloc((size_t)alloc_mb << 20);
		if (!back)
			return 1;
		CU(cuMemcpyDtoH(back, buf, (size_t)alloc_mb << 20));
		for (size_t w = 0; w < ((size_t)alloc_mb << 18); w++)
			if (back[w] != pattern[w]) {
				fprintf(log, "corrupt at byte %zu: %#x, expected %#x\n", w * 4, back[w],
					pattern[w]);
				fprintf(stderr, "e2e_client: the buffer read back differs at byte %zu\n",
					w * 4);
				return 1;
			}
		fprintf(log, "verified %ld MB after %ld kernels\n", alloc_mb, launched);
		free(back);
		free(pattern);
	}
	for (long i = 0; small && i < allocs; i++)
		CU(cuMemFree(small[i]));
	if (allocs > 0)
		fprintf(log, "freed %ld\n", allocs);
	if (end_when) {
		fprintf(log, "waiting\n");
		if (wait_for(end_when) != 0)
			return 1;
	}
	if (linger_when) { /* idle and still connected, memory held, until FILE exists (60 s at most) */
		fprintf(log, "idle\n");
		for (int t = 0; access(linger_when, F_OK) != 0 && t < 60000; t++) {
			struct timespec ms = {0, 1000000};
			nanosleep(&ms, NULL);
		}
	}
	if (buf)
		CU(cuMemFree(buf));
	if (quiet)
		fprintf(log, "rate launches=%ld ns=%lld batch_ns=%lld cpu_ns=%lld sleeps=%ld\n", launched,
			t_last - t_first, median_ll(batch, nbatch), cpu_last - cpu_first,
			sleeps_last - sleeps_first);
	free(batch);
	fprintf(log, "done\n");
	if (child == 0) {
		fclose(log);
		_exit(0); /* the parent's exit handlers are the parent's */
	}
	if (child > 0) {
		int status = 0;
		if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "e2e_client: the forked child failed (status %#x)\n", status);
			return 1;
		}
	}
	return 0;
}
