/*
 * The connection to gpumuxd: a thread of its own connects when $GPUMUX_RUNTIME_DIR/gpumuxd.sock
 * accepts, registers (name, priority, oversubscription), replays the managed allocations,
 * sleeps on the socket and the client's eventfd, runs migration orders (cuMemPrefetchAsync on a
 * stream of its own, waited for before any later grant counts), and wakes the dispatcher when
 * grants arrive. With no daemon, or when the daemon dies or the rings desynchronise, every
 * command is released at once (pass-through) and the thread retries every GPUMUX_RECONNECT_MS.
 *
 * Only this thread connects, holding no lock: an attempt that stalls (a daemon that accepts
 * slowly, a full listen backlog) delays nobody's CUDA calls. See daemon_link.h for the locks.
 */
#define _GNU_SOURCE
#include "daemon_link.h"
#include "queue.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#include <x86intrin.h>
#endif

int64_t gmx_dl_now_ms(void)
{
	return gmx_dl_now_ns() / 1000000;
}

int64_t gmx_dl_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ---- the leased path's clock ----
 * A CLOCK_MONOTONIC reading costs ~35 ns through the vDSO under kvm-clock, a good part of a leased
 * launch. With an invariant TSC (x86-64), the TSC scaled by a factor fitted against
 * clock_gettime over the whole run serves instead, re-anchored to clock_gettime at least every
 * GMX_STAMP_REFIT_NS: off by at most the rate's error over that span (well under a
 * microsecond). Elsewhere, clock_gettime. The fast path (a fitted rate, an anchor younger than
 * GMX_STAMP_REFIT_NS) is gmx_dl_stamp_ns in daemon_link.h; the rest is here. The queue lock held
 * (the state is the link's). */
gmx_dl_stamp_t gmx_dl_stamp;

static int64_t stamp_keep(int64_t t)
{
	if (t < gmx_dl_stamp.last)
		return gmx_dl_stamp.last;
	return gmx_dl_stamp.last = t;
}

int64_t gmx_dl_stamp_slow(void)
{
	gmx_dl_stamp_t *g = &gmx_dl_stamp;
#if defined(__x86_64__)
	if (g->state == 0) {
		unsigned a, b, c, d;
		/* CPUID 0x80000007 EDX bit 8: the TSC runs at a constant rate in every state. */
		int inv = __get_cpuid(0x80000007u, &a, &b, &c, &d) && (d & (1u << 8));
		g->state = inv ? 1 : -1;
		if (inv) {
			g->t0 = gmx_dl_now_ns();
			g->c0 = __rdtsc();
			g->ta = g->t0;
			g->ca = g->c0;
		}
		gmx_dl.n_clock++;
		return stamp_keep(g->t0 ? g->t0 : gmx_dl_now_ns());
	}
	if (g->state > 0) { /* (re)anchor, and fit the rate over the whole run once it is long enough */
		int64_t t = gmx_dl_now_ns();
		uint64_t c = __rdtsc();
		gmx_dl.n_clock++;
		if (c > g->c0 && t - g->t0 >= GMX_STAMP_REFIT_NS) {
			/* A rate no factor can hold (a TSC far off its nominal rate) keeps the clock. */
			g->state = gmx_stamp_scale((double)(t - g->t0) / (double)(c - g->c0),
						   GMX_STAMP_REFIT_NS, &g->scale) == 0
				       ? 2
				       : -1;
		} else if (c < g->c0) { /* the TSC went back: start the fit again */
			g->c0 = c;
			g->t0 = t;
			g->state = 1;
		}
		g->ca = c;
		g->ta = t;
		return stamp_keep(t);
	}
#endif
	gmx_dl.n_clock++;
	return stamp_keep(gmx_dl_now_ns());
}

int gmx_dl_stamp_tsc(void)
{
	return gmx_dl_stamp.state > 0;
}

static void wake(int fd)
{
	uint64_t one = 1;
	if (fd >= 0 && write(fd, &one, sizeof one) < 0 && errno != EAGAIN)
		gmx_shim_log("daemon: eventfd write failed: %s", strerror(errno));
}

int gmx_dl_push_up(uint32_t type, uint32_t a, uint64_t seq, uint64_t x, uint64_t y)
{
	if (gmx_dl_run_push() != 0) /* the batched run before it, in order */
		return -1;
	gmx_ring_entry_t e = {.type = type, .a = a, .seq = seq, .x = x, .y = y};
	int w = 0;
	if (gmx_ring_push(&gmx_dl.region->up, &e, &w) != 0)
		return -1;
	if (type == GMX_UP_ALLOC)
		gmx_shim_lease_alloc(&gmx_dl.lease);
	if (gmx_dl.up_room)
		gmx_dl.up_room--;
	gmx_dl.unchecked = 0; /* the push looked at the daemon for the batched entries before it too */
	if (w)
		wake(gmx_dl.efd_up);
	return 0;
}

void gmx_dl_desync_locked(void)
{
	gmx_dl.desync = 1;
	wake(gmx_dl.efd_down); /* the thread sleeps on it: let it start over now */
}

/* Drops the connection and forgets the session; held commands now pass. The queue lock held. */
static void disconnect_locked(const char *why)
{
	if (!gmx_dl.connected && gmx_dl.sock < 0)
		return;
	gmx_shim_log("daemon: disconnected (%s); pass-through until reconnected", why);
	gmx_dl_forget_session();
}

void gmx_dl_forget_session(void)
{
	__atomic_store_n(&gmx_dl.connected, 0, __ATOMIC_RELEASE);
	if (gmx_dl.region)
		munmap(gmx_dl.region, gmx_dl.region_bytes);
	gmx_dl.region = NULL;
	if (gmx_dl.sock >= 0)
		close(gmx_dl.sock);
	if (gmx_dl.efd_up >= 0)
		close(gmx_dl.efd_up);
	if (gmx_dl.efd_down >= 0)
		close(gmx_dl.efd_down);
	gmx_dl.sock = gmx_dl.efd_up = gmx_dl.efd_down = -1;
	gmx_dl.desync = 0;
	gmx_dl_seq_clear();
}

/* Says a refusal on stderr, once per distinct reason (a refusal met at each retry is not
 * repeated), and in the shim's log every time. */
static void say_refused(const gmx_msg_refused_t *r, const char *what)
{
	static char said[sizeof r->reason];
	if (strcmp(said, r->reason) != 0) {
		fprintf(stderr, "gpumux: the daemon %s this process: %s%s\n", what, r->reason,
			r->error == EACCES || r->error == EPROTONOSUPPORT ? ""
			: r->error == E2BIG
			    ? "; running unscheduled (pass-through) until its allocations shrink"
			    : "; running unscheduled (pass-through) until it is served");
		memcpy(said, r->reason, sizeof said);
	}
	gmx_shim_log("daemon: %s: %s", what, r->reason);
}

/* Reads what the daemon sent on a session's socket (it sends nothing after WELCOME but a
 * REFUSED with the reason when it cuts the client off). Returns that REFUSED's positive error,
 * or 0 for a plain hang-up or anything else. */
static int read_cutoff(int sock)
{
	gmx_msg_refused_t r;
	memset(&r, 0, sizeof r);
	ssize_t n = recv(sock, &r, sizeof r, MSG_DONTWAIT);
	if (n < (ssize_t)sizeof r || r.h.magic != GMX_PROTO_MAGIC || r.h.type != GMX_MSG_REFUSED)
		return 0;
	r.reason[sizeof r.reason - 1] = 0;
	say_refused(&r, "cut off");
	return r.error > 0 ? r.error : EPROTO;
}

/* Over its memory budget: no retry until something was freed, or GMX_BUDGET_RETRY_MS passed. */
static void note_budget_refusal(void)
{
	pthread_mutex_lock(&gmx_dl.alloc_lock);
	gmx_dl.refused_bytes = gmx_dl.alloc_bytes ? gmx_dl.alloc_bytes : 1;
	pthread_mutex_unlock(&gmx_dl.alloc_lock);
}

/* connect(2) bounded by the socket's send timeout (a full listen backlog blocks it). */
static int connect_bounded(int s, const struct sockaddr_un *sa)
{
	struct timeval tv = {GMX_CONNECT_TIMEOUT_MS / 1000, (GMX_CONNECT_TIMEOUT_MS % 1000) * 1000};
	if (setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) != 0)
		return -errno;
	if (connect(s, (const struct sockaddr *)sa, sizeof *sa) != 0)
		return errno == EAGAIN || errno == EINPROGRESS ? -ETIMEDOUT : -errno;
	return 0;
}

/* One connection attempt: HELLO, then WELCOME with three descriptors, then the allocation
 * list. Holds no lock but D.alloc_lock during the replay. 0 or a negative errno. */
static int try_connect(void)
{
	static int said_trying; /* "connecting" is logged once per outage */
	int64_t deadline = gmx_dl_now_ms() + GMX_CONNECT_TIMEOUT_MS;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int n = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s", gmx_dl.dir, GMX_SOCKET_NAME);
	if (n < 0 || (size_t)n >= sizeof sa.sun_path)
		return -ENAMETOOLONG;
	if (!said_trying) {
		gmx_shim_log("daemon: connecting to %s", sa.sun_path);
		said_trying = 1;
	}
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	int err = connect_bounded(s, &sa);
	if (err) {
		close(s);
		return err;
	}
	gmx_msg_hello_t h;
	memset(&h, 0, sizeof h);
	gmx_msg_init(&h.h, GMX_MSG_HELLO, sizeof h);
	h.priority = gmx_dl.priority;
	h.flags = gmx_dl.oversub ? GMX_HELLO_OVERSUBSCRIBE : 0;
	h.pid = (int32_t)getpid();
	snprintf(h.name, sizeof h.name, "%s", gmx_dl.name);
	/* A daemon that refuses this process at accept has closed already (EPIPE, ECONNRESET):
	 * its REFUSED is still there to read. */
	if (send(s, &h, sizeof h, MSG_NOSIGNAL) != (ssize_t)sizeof h && errno != EPIPE &&
	    errno != ECONNRESET) {
		int e = -errno;
		close(s);
		return e ? e : -EIO;
	}
	int64_t left = deadline - gmx_dl_now_ms();
	struct pollfd p = {.fd = s, .events = POLLIN};
	if (poll(&p, 1, left > 0 ? (int)left : 0) <= 0) {
		gmx_shim_log("daemon: no reply to HELLO within %d ms", GMX_CONNECT_TIMEOUT_MS);
		close(s);
		return -ETIMEDOUT;
	}
	union {
		gmx_msg_welcome_t w;
		gmx_msg_refused_t r;
		char raw[512];
	} m;
	char cbuf[CMSG_SPACE(3 * sizeof(int))];
	struct iovec iov = {.iov_base = &m, .iov_len = sizeof m};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
	memset(&m, 0, sizeof m);
	ssize_t got = recvmsg(s, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	if (got < 0 && errno == ECONNRESET) /* reported once, ahead of the queued reply */
		got = recvmsg(s, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	int fds[3] = {-1, -1, -1};
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len == CMSG_LEN(3 * sizeof(int)))
			memcpy(fds, CMSG_DATA(c), sizeof fds);
	if (got < (ssize_t)sizeof(gmx_msg_hdr_t) || m.w.h.magic != GMX_PROTO_MAGIC) {
		err = -EPROTO;
	} else if (m.w.h.type == GMX_MSG_REFUSED && got >= (ssize_t)sizeof m.r) {
		m.r.reason[sizeof m.r.reason - 1] = 0;
		say_refused(&m.r, "refused");
		err = m.r.error > 0 ? -m.r.error : -EACCES;
	} else if (m.w.h.type != GMX_MSG_WELCOME || got < (ssize_t)sizeof m.w ||
		   m.w.h.version != GMX_PROTO_VERSION || fds[0] < 0 ||
		   m.w.region_bytes < sizeof(gmx_shm_region_t) || m.w.ring_entries != GMX_RING_ENTRIES) {
		err = -EPROTO;
	}
	void *reg = MAP_FAILED;
	if (!err) {
		/* Populated, as the daemon maps it: a leased launch never takes a fault on a ring. */
		reg = mmap(NULL, m.w.region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fds[0],
			   0);
		if (reg == MAP_FAILED)
			err = -errno;
		else if (((gmx_shm_region_t *)reg)->magic != GMX_PROTO_MAGIC) {
			munmap(reg, m.w.region_bytes);
			err = -EPROTO;
		}
	}
	if (fds[0] >= 0)
		close(fds[0]);
	if (err) {
		if (fds[1] >= 0)
			close(fds[1]);
		if (fds[2] >= 0)
			close(fds[2]);
		close(s);
		return err;
	}
	/* The session exists but is not "connected" yet: commands pass through, and allocations
	 * wait (D.alloc_lock), until the daemon holds the whole allocation list. */
	pthread_mutex_lock(&gmx_dl.alloc_lock);
	gmx_shim_queue_lock();
	gmx_dl.sock = s;
	gmx_dl.efd_up = fds[1];
	gmx_dl.efd_down = fds[2];
	gmx_dl.region = reg;
	gmx_dl.region_bytes = m.w.region_bytes;
	gmx_dl_seq_clear();
	/* The clock's first look (a CPUID, several microseconds in a virtual machine) here rather
	 * than on the first leased launch. */
	if (gmx_dl_stamp.state == 0)
		(void)gmx_dl_stamp_slow();
	gmx_shim_queue_unlock();
	int replayed = gmx_dl.nallocs;
	int rc = gmx_dl_replay_allocs(s);
	gmx_shim_queue_lock();
	if (rc == 0)
		__atomic_store_n(&gmx_dl.connected, 1, __ATOMIC_RELEASE);
	gmx_shim_queue_unlock();
	pthread_mutex_unlock(&gmx_dl.alloc_lock);
	if (rc != 0) {
		int why = read_cutoff(s);
		gmx_shim_queue_lock();
		disconnect_locked(why ? "the daemon cut it off while it replayed its allocations"
				      : "the daemon did not take the allocation list");
		gmx_shim_queue_unlock();
		if (why == E2BIG)
			note_budget_refusal();
		return why == E2BIG ? -E2BIG : -EPIPE;
	}
	said_trying = 0;
	gmx_shim_log("daemon: connected as client %u (policy %s, %d allocations replayed)", m.w.client_id,
		     m.w.policy, replayed);
	return 0;
}

/* Runs one migration order (how: GMX_MIGRATE_*) on the thread's own stream and waits for it. */
static int run_migration(uint64_t ptr, uint64_t len, uint32_t how)
{
	int to_device = how == GMX_MIGRATE_LOAD;
	CUcontext ctx = gmx_dl_alloc_find(ptr, &len);
	if (!ctx)
		return -ENOENT; /* freed meanwhile: nothing to move */
	__typeof__(&cuCtxSetCurrent) setc = GMX_REAL(cuCtxSetCurrent);
	__typeof__(&cuStreamCreate) mk = GMX_REAL(cuStreamCreate);
	__typeof__(&cuMemPrefetchAsync_v2) pf = GMX_REAL(cuMemPrefetchAsync_v2);
	__typeof__(&cuStreamSynchronize) sync = GMX_REAL(cuStreamSynchronize);
	if (!setc || !mk || !pf || !sync || setc(ctx) != CUDA_SUCCESS)
		return -ENOTSUP;
	if (gmx_dl.mig_ctx != ctx) {
		if (mk(&gmx_dl.mig_stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
			return -EIO;
		gmx_dl.mig_ctx = ctx;
	}
	/* An eviction waits until everything the daemon granted this process before it has been
	 * released and has finished, and everything released under a lease has finished: those
	 * kernels may still be queued here or running on the memory that now moves out. (Grants
	 * after the order wait for it: ring order.) An EVICT_NOW's memory is none that the granted
	 * work was predicted to touch (the daemon planned around it), so only leased work, which
	 * carries no prediction, is waited for: the eviction, and the load behind it, then run
	 * while the granted kernel computes. */
	while (!to_device) {
		gmx_shim_queue_lock();
		/* Leased commands too: the daemon revoked the lease before this order (ring order),
		 * so no more go, but those released may run on this memory. */
		unsigned granted = how == GMX_MIGRATE_EVICT_NOW ? 0 : gmx_dl.granted;
		unsigned pending = gmx_dl.connected ? granted + gmx_dl.lease.now : 0;
		gmx_shim_queue_unlock();
		if (!pending)
			break;
		gmx_shim_queue_kick();
		gmx_shim_queue_quiesce();
		struct timespec ts = {0, 50000};
		nanosleep(&ts, NULL);
	}
	CUmemLocation loc = {.type = to_device ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST,
			     .id = 0};
	CUresult r = pf((CUdeviceptr)ptr, (size_t)len, loc, 0, gmx_dl.mig_stream);
	if (r == CUDA_SUCCESS)
		r = sync(gmx_dl.mig_stream);
	gmx_shim_log("daemon: migrate %s ptr=%#llx len=%llu rc=%d", to_device ? "load" : "evict",
		     (unsigned long long)ptr, (unsigned long long)len, (int)r);
	return r == CUDA_SUCCESS ? 0 : -EIO;
}

/* Applies the down ring in order: grants mark their seq, migrations run before anything
 * after them. Returns the number of grants. Takes the queue lock itself. */
static int drain_down(void)
{
	int grants = 0;
	gmx_shim_queue_lock();
	while (gmx_dl.connected) {
		gmx_ring_entry_t e;
		int r = gmx_ring_pop(&gmx_dl.region->down, &e);
		if (r == 0)
			break;
		if (r < 0) {
			disconnect_locked("corrupt ring from the daemon");
			break;
		}
		if (e.type == GMX_DOWN_GRANT) {
			grants += gmx_dl_apply_down(&e);
		} else if (e.type == GMX_DOWN_LEASE) {
			gmx_dl_apply_down(&e);
			grants += gmx_dl.lease.inflight > 0; /* held commands may go under it */
		} else if (e.type == GMX_DOWN_MIGRATE) {
			gmx_dl.migrating = 1;
			gmx_shim_queue_unlock();
			run_migration(e.x, e.y, e.a);
			gmx_shim_queue_lock();
			gmx_dl.migrating = 0;
			if (gmx_dl.connected &&
			    gmx_dl_push_up(GMX_UP_MIG_DONE, e.a == GMX_MIGRATE_LOAD, e.seq, e.x, 0) != 0)
				gmx_dl_desync_locked();
		}
	}
	gmx_shim_queue_unlock();
	return grants;
}

/* Sleeps one retry period. Over its memory budget, the process retries only once its
 * allocations shrank below what was refused, or after a back-off that doubles from
 * GMX_BUDGET_RETRY_MS to GMX_BUDGET_RETRY_MAX_MS (the daemon may have been given more memory). */
static void retry_pause(void)
{
	static int64_t backoff = GMX_BUDGET_RETRY_MS;
	int64_t start = gmx_dl_now_ms();
	for (;;) {
		pthread_mutex_lock(&gmx_dl.alloc_lock);
		int over = gmx_dl.refused_bytes && gmx_dl.alloc_bytes >= gmx_dl.refused_bytes;
		if (!over)
			gmx_dl.refused_bytes = 0;
		pthread_mutex_unlock(&gmx_dl.alloc_lock);
		int64_t left = start + (over ? backoff : gmx_dl.reconnect_ms) - gmx_dl_now_ms();
		if (left <= 0) {
			if (over && backoff < GMX_BUDGET_RETRY_MAX_MS)
				backoff *= 2;
			else if (!over)
				backoff = GMX_BUDGET_RETRY_MS;
			return;
		}
		int64_t step = left < 50 ? left : 50;
		struct timespec ts = {0, (long)step * 1000000L};
		nanosleep(&ts, NULL);
	}
}

/* The first attempt concluded (either way): the caller of gmx_dl_start may go on. */
static void first_attempt_done(void)
{
	pthread_mutex_lock(&gmx_dl.lock);
	gmx_dl.first_done = 1;
	pthread_cond_broadcast(&gmx_dl.first_cv);
	pthread_mutex_unlock(&gmx_dl.lock);
}

static void *conn_main(void *arg)
{
	(void)arg;
	for (;;) {
		if (!__atomic_load_n(&gmx_dl.connected, __ATOMIC_ACQUIRE)) {
			int r = try_connect();
			first_attempt_done();
			if (r == -EACCES || r == -EPROTONOSUPPORT) {
				/* Refused: said once on stderr; retrying would only repeat it. */
				gmx_shim_queue_kick();
				return NULL;
			}
			if (r != 0) {
				gmx_shim_queue_kick(); /* anything held while connected now passes */
				retry_pause();
				continue;
			}
		}
		gmx_shim_queue_lock();
		int sock = gmx_dl.sock, efd = gmx_dl.efd_down, nonempty = 0;
		if (gmx_dl.desync)
			disconnect_locked("a ring was full");
		else if (gmx_dl.region)
			nonempty = gmx_ring_prepare_sleep(&gmx_dl.region->down);
		gmx_shim_queue_unlock();
		if (sock < 0 || efd < 0) {
			gmx_shim_queue_kick();
			continue;
		}
		if (!nonempty) {
			struct pollfd p[2] = {{.fd = sock, .events = POLLIN}, {.fd = efd, .events = POLLIN}};
			int n = poll(p, 2, 1000);
			if (n > 0 && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
				/* The daemon sends nothing on the socket after WELCOME but the reason it
				 * cuts the client off: data or a hang-up both end the session. */
				int why = read_cutoff(sock);
				gmx_shim_queue_lock();
				disconnect_locked("the daemon closed the connection");
				gmx_shim_queue_unlock();
				if (why == E2BIG)
					note_budget_refusal();
				gmx_shim_queue_kick();
				if (why)
					retry_pause(); /* cut off: not at once again */
				continue;
			}
			if (n > 0 && (p[1].revents & POLLIN)) {
				uint64_t v;
				if (read(efd, &v, sizeof v) < 0 && errno != EAGAIN)
					gmx_shim_log("daemon: eventfd read failed: %s", strerror(errno));
			}
		}
		gmx_shim_queue_lock();
		if (gmx_dl.region)
			__atomic_store_n(&gmx_dl.region->down.waiting, 0, __ATOMIC_RELAXED);
		gmx_shim_queue_unlock();
		if (drain_down() > 0)
			gmx_shim_queue_kick();
	}
	return NULL;
}

void gmx_dl_start(void)
{
	if (__atomic_load_n(&gmx_dl.thread_started, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&gmx_dl.lock);
	if (gmx_dl.thread_started) {
		pthread_mutex_unlock(&gmx_dl.lock);
		return;
	}
	pthread_t t;
	pthread_attr_t a;
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &a, conn_main, NULL) == 0) {
		__atomic_store_n(&gmx_dl.thread_started, 1, __ATOMIC_RELEASE);
		/* Only the caller that started the thread waits for its first attempt; callers
		 * meanwhile pass through. The attempt bounds itself; the margin covers scheduling. */
		struct timespec until;
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += GMX_CONNECT_TIMEOUT_MS / 1000 + 1;
		while (!gmx_dl.first_done &&
		       pthread_cond_timedwait(&gmx_dl.first_cv, &gmx_dl.lock, &until) != ETIMEDOUT)
			;
	} else {
		fprintf(stderr, "gpumux shim: cannot start the daemon connection thread; running in "
				"pass-through\n");
		__atomic_store_n(&gmx_dl.thread_started, 1, __ATOMIC_RELEASE); /* do not retry */
	}
	pthread_attr_destroy(&a);
	pthread_mutex_unlock(&gmx_dl.lock);
}
