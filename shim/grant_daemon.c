/*
 * The "daemon" grant policy: queue heads are released when gpumuxd grants them.
 *
 * For each command that heads its queue the shim's may_release() pushes a launch notice into
 * the shared "up" ring (once per command) and says "hold" until a grant for its seq arrives in
 * the "down" ring; completions go back up the ring. No system call is made on that path unless
 * the other side sleeps (see daemon/gmx_proto.h).
 *
 * A helper thread owns the connection: it connects when $GPUMUX_RUNTIME_DIR/gpumuxd.sock
 * accepts, registers (name, priority, oversubscription), sleeps on the socket and the
 * client's eventfd, runs migration orders (cuMemPrefetchAsync on a stream of its own, waited
 * for before any later grant counts), and wakes the dispatcher when grants arrive. With no
 * daemon, or when the daemon dies or the rings desynchronise, every command is released at
 * once (pass-through) and the thread retries the connection every GPUMUX_RECONNECT_MS.
 *
 * With GPUMUX_OVERSUBSCRIBE=1, cuMemAlloc becomes cuMemAllocManaged and each allocation is
 * reported to the daemon, whose memory planner sends the migration orders. With
 * GPUMUX_TEMPLATES naming a templates file, each launch's predicted working set (wset.c)
 * precedes its notice, so the planner moves what the kernel touches, not whole allocations.
 *
 * Locking: d.lock guards the connection, the region and the seq table. Lock order: the
 * queue lock (held by the shim around may_release/completed) before d.lock. The thread never
 * holds d.lock while it calls into the queue (gmx_shim_queue_kick) or waits on the GPU.
 */
#define _GNU_SOURCE
#include "queue.h"
#include "shim_internal.h"
#include "wset.h"

#include "gmx_proto.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* Tunables: default and bounds in one place. */
#define GMX_RECONNECT_MS_DEFAULT 250 /* retry period while no daemon answers */
#define GMX_RECONNECT_MS_MIN 10
#define GMX_RECONNECT_MS_MAX 60000
#define GMX_HELLO_TIMEOUT_MS 2000 /* a daemon that accepts but never answers is given up */
#define SEQ_TABLE 8192		  /* tracked seqs (held heads plus in-flight), power of two */
#define ALLOC_MAX 4096		  /* managed allocations reported to the daemon */

enum { ST_FREE = 0, ST_NOTICED, ST_GRANTED, ST_TOMB };

typedef struct {
	uint64_t seq;
	int state;
} seq_slot_t;

typedef struct {
	CUdeviceptr ptr;
	size_t size;
	CUcontext ctx;
} alloc_rec_t;

static struct {
	pthread_mutex_t lock;
	int connected; /* atomic read on the fast path */
	int thread_started;
	int sock, efd_up, efd_down;
	gmx_shm_region_t *region;
	size_t region_bytes;
	int desync;    /* a push failed where it must not: reconnect */
	int migrating; /* the thread runs an order: later grants wait for it */
	seq_slot_t tbl[SEQ_TABLE];
	unsigned used;	  /* slots not FREE (tombstones included) */
	unsigned granted; /* slots GRANTED: granted by the daemon, not yet completed */
	char dir[4096], name[GMX_NAME_MAX];
	int priority, oversub;
	long reconnect_ms;
	alloc_rec_t allocs[ALLOC_MAX];
	int nallocs;
	CUcontext mig_ctx;
	CUstream mig_stream;
} d = {.lock = PTHREAD_MUTEX_INITIALIZER, .sock = -1, .efd_up = -1, .efd_down = -1};

_Static_assert(GMX_CMD_COPY == GMX_PROTO_KIND_COPY && GMX_CMD_MEMSET == GMX_PROTO_KIND_MEMSET &&
		   GMX_CMD_KIND_COUNT == GMX_CMD_KIND_COUNT_PROTO,
	       "gmx_proto.h's command kinds follow gmx_grant.h");

static int grant_may_release(void *self, const gmx_shim_cmd_t *cmd);
static void grant_completed(void *self, uint64_t seq);
static void grant_host_wait(void *self);

static const gmx_grant_ops_t g_daemon = {"daemon",	 0, grant_may_release, NULL, NULL, grant_completed,
					 grant_host_wait};

/* ---- seq table (open addressing; d.lock held) ---- */

static size_t seq_hash(uint64_t s)
{
	return (size_t)((s * 0x9E3779B97F4A7C15ull) >> 40) & (SEQ_TABLE - 1);
}

static seq_slot_t *seq_find(uint64_t s)
{
	for (size_t i = seq_hash(s), n = 0; n < SEQ_TABLE; i = (i + 1) & (SEQ_TABLE - 1), n++) {
		if (d.tbl[i].state == ST_FREE)
			return NULL;
		if (d.tbl[i].state != ST_TOMB && d.tbl[i].seq == s)
			return &d.tbl[i];
	}
	return NULL;
}

static void seq_clear(void)
{
	memset(d.tbl, 0, sizeof d.tbl);
	d.used = 0;
	d.granted = 0;
}

static seq_slot_t *seq_insert(uint64_t s)
{
	if (d.used >= SEQ_TABLE / 2) { /* rebuild without tombstones */
		static seq_slot_t old[SEQ_TABLE];
		memcpy(old, d.tbl, sizeof old);
		seq_clear();
		for (size_t i = 0; i < SEQ_TABLE; i++)
			if (old[i].state == ST_NOTICED || old[i].state == ST_GRANTED) {
				seq_slot_t *n = seq_insert(old[i].seq);
				n->state = old[i].state;
				d.granted += n->state == ST_GRANTED;
			}
		if (d.used >= SEQ_TABLE / 2)
			return NULL; /* really full: the caller holds the command and retries */
	}
	size_t i = seq_hash(s);
	while (d.tbl[i].state == ST_NOTICED || d.tbl[i].state == ST_GRANTED)
		i = (i + 1) & (SEQ_TABLE - 1);
	if (d.tbl[i].state == ST_FREE)
		d.used++;
	d.tbl[i].seq = s;
	d.tbl[i].state = ST_NOTICED;
	return &d.tbl[i];
}

/* ---- connection ---- */

static void wake(int fd)
{
	uint64_t one = 1;
	if (fd >= 0 && write(fd, &one, sizeof one) < 0 && errno != EAGAIN)
		gmx_shim_log("daemon: eventfd write failed: %s", strerror(errno));
}

/* Pushes to the up ring; d.lock held and connected. 0 or -1 (full). */
static int push_up(uint32_t type, uint32_t a, uint64_t seq, uint64_t x, uint64_t y)
{
	gmx_ring_entry_t e = {.type = type, .a = a, .seq = seq, .x = x, .y = y};
	int w = 0;
	if (gmx_ring_push(&d.region->up, &e, &w) != 0)
		return -1;
	if (w)
		wake(d.efd_up);
	return 0;
}

/* Drops the connection and forgets the session; held commands now pass. d.lock held. */
static void disconnect_locked(const char *why)
{
	if (!d.connected && d.sock < 0)
		return;
	gmx_shim_log("daemon: disconnected (%s); pass-through until reconnected", why);
	__atomic_store_n(&d.connected, 0, __ATOMIC_RELEASE);
	if (d.region)
		munmap(d.region, d.region_bytes);
	d.region = NULL;
	if (d.sock >= 0)
		close(d.sock);
	if (d.efd_up >= 0)
		close(d.efd_up);
	if (d.efd_down >= 0)
		close(d.efd_down);
	d.sock = d.efd_up = d.efd_down = -1;
	d.desync = 0;
	seq_clear();
}

/* One connection attempt: HELLO, then WELCOME with three descriptors. 0 or a negative errno. */
static int try_connect(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int n = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s", d.dir, GMX_SOCKET_NAME);
	if (n < 0 || (size_t)n >= sizeof sa.sun_path)
		return -ENAMETOOLONG;
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	if (connect(s, (struct sockaddr *)&sa, sizeof sa) != 0) {
		int e = -errno;
		close(s);
		return e;
	}
	gmx_msg_hello_t h;
	memset(&h, 0, sizeof h);
	gmx_msg_init(&h.h, GMX_MSG_HELLO, sizeof h);
	h.priority = d.priority;
	h.flags = d.oversub ? GMX_HELLO_OVERSUBSCRIBE : 0;
	h.pid = (int32_t)getpid();
	snprintf(h.name, sizeof h.name, "%s", d.name);
	/* A daemon that refuses this process at accept has closed already (EPIPE, ECONNRESET):
	 * its REFUSED is still there to read. */
	if (send(s, &h, sizeof h, MSG_NOSIGNAL) != (ssize_t)sizeof h && errno != EPIPE &&
	    errno != ECONNRESET) {
		int e = -errno;
		close(s);
		return e ? e : -EIO;
	}
	struct pollfd p = {.fd = s, .events = POLLIN};
	if (poll(&p, 1, GMX_HELLO_TIMEOUT_MS) <= 0) {
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
	ssize_t got = recvmsg(s, &mh, MSG_CMSG_CLOEXEC);
	if (got < 0 && errno == ECONNRESET) /* reported once, ahead of the queued reply */
		got = recvmsg(s, &mh, MSG_CMSG_CLOEXEC);
	int fds[3] = {-1, -1, -1};
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len == CMSG_LEN(3 * sizeof(int)))
			memcpy(fds, CMSG_DATA(c), sizeof fds);
	int err = 0;
	if (got < (ssize_t)sizeof(gmx_msg_hdr_t) || m.w.h.magic != GMX_PROTO_MAGIC) {
		err = -EPROTO;
	} else if (m.w.h.type == GMX_MSG_REFUSED && got >= (ssize_t)sizeof m.r) {
		m.r.reason[sizeof m.r.reason - 1] = 0;
		static char said[sizeof m.r.reason]; /* a refusal met at each retry is said once */
		if (strcmp(said, m.r.reason) != 0) {
			fprintf(stderr, "gpumux: the daemon refused this process: %s%s\n", m.r.reason,
				m.r.error == EACCES || m.r.error == EPROTONOSUPPORT
				    ? ""
				    : "; running unscheduled (pass-through) until it is served");
			memcpy(said, m.r.reason, sizeof said);
		}
		gmx_shim_log("daemon: refused: %s", m.r.reason);
		err = m.r.error > 0 ? -m.r.error : -EACCES;
	} else if (m.w.h.type != GMX_MSG_WELCOME || got < (ssize_t)sizeof m.w ||
		   m.w.h.version != GMX_PROTO_VERSION || fds[0] < 0 ||
		   m.w.region_bytes < sizeof(gmx_shm_region_t) || m.w.ring_entries != GMX_RING_ENTRIES) {
		err = -EPROTO;
	}
	void *reg = MAP_FAILED;
	if (!err) {
		reg = mmap(NULL, m.w.region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
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
	pthread_mutex_lock(&d.lock);
	d.sock = s;
	d.efd_up = fds[1];
	d.efd_down = fds[2];
	d.region = reg;
	d.region_bytes = m.w.region_bytes;
	seq_clear();
	/* The daemon learns this session's managed allocations before any notice. */
	for (int i = 0; i < d.nallocs; i++)
		push_up(GMX_UP_ALLOC, 0, 0, d.allocs[i].ptr, d.allocs[i].size);
	__atomic_store_n(&d.connected, 1, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&d.lock);
	gmx_shim_log("daemon: connected as client %u (policy %s)", m.w.client_id, m.w.policy);
	return 0;
}

/* Runs one migration order on the thread's own stream and waits for it. */
static int run_migration(uint64_t ptr, uint64_t len, int to_device)
{
	CUcontext ctx = NULL;
	pthread_mutex_lock(&d.lock);
	for (int i = 0; i < d.nallocs; i++)
		if (d.allocs[i].ptr <= ptr && ptr < d.allocs[i].ptr + d.allocs[i].size) {
			ctx = d.allocs[i].ctx;
			if (len > d.allocs[i].ptr + d.allocs[i].size - ptr)
				len = d.allocs[i].ptr + d.allocs[i].size - ptr;
			break;
		}
	pthread_mutex_unlock(&d.lock);
	if (!ctx)
		return -ENOENT; /* freed meanwhile: nothing to move */
	__typeof__(&cuCtxSetCurrent) setc = GMX_REAL(cuCtxSetCurrent);
	__typeof__(&cuStreamCreate) mk = GMX_REAL(cuStreamCreate);
	__typeof__(&cuMemPrefetchAsync_v2) pf = GMX_REAL(cuMemPrefetchAsync_v2);
	__typeof__(&cuStreamSynchronize) sync = GMX_REAL(cuStreamSynchronize);
	if (!setc || !mk || !pf || !sync || setc(ctx) != CUDA_SUCCESS)
		return -ENOTSUP;
	if (d.mig_ctx != ctx) {
		if (mk(&d.mig_stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS)
			return -EIO;
		d.mig_ctx = ctx;
	}
	/* An eviction waits until everything the daemon granted this process before it has been
	 * released and has finished: those kernels may still be queued here or running on the
	 * memory that now moves out. (Grants after the order wait for it: ring order.) */
	while (!to_device) {
		pthread_mutex_lock(&d.lock);
		unsigned pending = d.connected ? d.granted : 0;
		pthread_mutex_unlock(&d.lock);
		if (!pending)
			break;
		gmx_shim_queue_kick();
		gmx_shim_queue_quiesce();
		struct timespec ts = {0, 50000};
		nanosleep(&ts, NULL);
	}
	CUmemLocation loc = {.type = to_device ? CU_MEM_LOCATION_TYPE_DEVICE : CU_MEM_LOCATION_TYPE_HOST,
			     .id = 0};
	CUresult r = pf((CUdeviceptr)ptr, (size_t)len, loc, 0, d.mig_stream);
	if (r == CUDA_SUCCESS)
		r = sync(d.mig_stream);
	gmx_shim_log("daemon: migrate %s ptr=%#llx len=%llu rc=%d", to_device ? "load" : "evict",
		     (unsigned long long)ptr, (unsigned long long)len, (int)r);
	return r == CUDA_SUCCESS ? 0 : -EIO;
}

/* Applies the down ring in order: grants mark their seq, migrations run before anything
 * after them. Returns the number of grants. Takes d.lock itself. */
static int drain_down(void)
{
	int grants = 0;
	pthread_mutex_lock(&d.lock);
	while (d.connected) {
		gmx_ring_entry_t e;
		int r = gmx_ring_pop(&d.region->down, &e);
		if (r == 0)
			break;
		if (r < 0) {
			disconnect_locked("corrupt ring from the daemon");
			break;
		}
		if (e.type == GMX_DOWN_GRANT) {
			seq_slot_t *s = seq_find(e.seq);
			if (s && s->state == ST_NOTICED) {
				s->state = ST_GRANTED;
				d.granted++;
				grants++;
			}
		} else if (e.type == GMX_DOWN_MIGRATE) {
			d.migrating = 1;
			pthread_mutex_unlock(&d.lock);
			run_migration(e.x, e.y, e.a != 0);
			pthread_mutex_lock(&d.lock);
			d.migrating = 0;
			if (d.connected && push_up(GMX_UP_MIG_DONE, e.a, e.seq, e.x, 0) != 0)
				d.desync = 1;
		}
	}
	pthread_mutex_unlock(&d.lock);
	return grants;
}

static void *conn_main(void *arg)
{
	(void)arg;
	for (;;) {
		if (!__atomic_load_n(&d.connected, __ATOMIC_ACQUIRE)) {
			int r = try_connect();
			if (r == -EACCES || r == -EPROTONOSUPPORT) {
				/* Refused: said once on stderr; retrying would only repeat it. */
				gmx_shim_queue_kick();
				return NULL;
			}
			if (r != 0) {
				gmx_shim_queue_kick(); /* anything held while connected now passes */
				struct timespec ts = {d.reconnect_ms / 1000,
						      (d.reconnect_ms % 1000) * 1000000L};
				nanosleep(&ts, NULL);
				continue;
			}
		}
		pthread_mutex_lock(&d.lock);
		int sock = d.sock, efd = d.efd_down, nonempty = 0;
		if (d.desync)
			disconnect_locked("a ring was full");
		else if (d.region)
			nonempty = gmx_ring_prepare_sleep(&d.region->down);
		pthread_mutex_unlock(&d.lock);
		if (sock < 0 || efd < 0) {
			gmx_shim_queue_kick();
			continue;
		}
		if (!nonempty) {
			struct pollfd p[2] = {{.fd = sock, .events = POLLIN}, {.fd = efd, .events = POLLIN}};
			int n = poll(p, 2, 1000);
			if (n > 0 && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
				/* The daemon sends nothing on the socket after WELCOME: data or a hang-up
				 * both end the session. */
				pthread_mutex_lock(&d.lock);
				disconnect_locked("the daemon closed the connection");
				pthread_mutex_unlock(&d.lock);
				gmx_shim_queue_kick();
				continue;
			}
			if (n > 0 && (p[1].revents & POLLIN)) {
				uint64_t v;
				if (read(efd, &v, sizeof v) < 0 && errno != EAGAIN)
					gmx_shim_log("daemon: eventfd read failed: %s", strerror(errno));
			}
		}
		pthread_mutex_lock(&d.lock);
		if (d.region)
			__atomic_store_n(&d.region->down.waiting, 0, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&d.lock);
		if (drain_down() > 0)
			gmx_shim_queue_kick();
	}
	return NULL;
}

/* Starts the connection thread once; called with the queue lock held. */
static void ensure_thread(void)
{
	if (__atomic_load_n(&d.thread_started, __ATOMIC_ACQUIRE))
		return;
	/* One attempt in the caller, so that a process started under a running daemon is
	 * scheduled from its first command on; later attempts are the thread's. */
	if (!__atomic_load_n(&d.connected, __ATOMIC_ACQUIRE))
		try_connect();
	pthread_mutex_lock(&d.lock);
	if (!d.thread_started) {
		pthread_t t;
		pthread_attr_t a;
		pthread_attr_init(&a);
		pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &a, conn_main, NULL) == 0)
			__atomic_store_n(&d.thread_started, 1, __ATOMIC_RELEASE);
		else
			fprintf(stderr, "gpumux shim: cannot start the daemon connection thread; running "
					"in pass-through\n");
		pthread_attr_destroy(&a);
	}
	pthread_mutex_unlock(&d.lock);
}

/* ---- the grant policy ---- */

static int grant_may_release(void *self, const gmx_shim_cmd_t *cmd)
{
	(void)self;
	ensure_thread();
	if (!__atomic_load_n(&d.connected, __ATOMIC_ACQUIRE))
		return 1; /* pass-through while no daemon */
	int ok = 0;
	pthread_mutex_lock(&d.lock);
	if (!d.connected) {
		ok = 1;
	} else {
		seq_slot_t *s = seq_find(cmd->seq);
		if (!s) {
			uint64_t kid = 0;
			if (cmd->name) { /* FNV-1a over name and shape: the kernel's identity */
				kid = 1469598103934665603ull;
				for (const char *p = cmd->name; *p; p++)
					kid = (kid ^ (unsigned char)*p) * 1099511628211ull;
				for (int i = 0; i < 3; i++)
					kid = ((kid ^ cmd->grid[i]) * 1099511628211ull ^ cmd->block[i]) *
					      1099511628211ull;
				kid = (kid ^ cmd->shared_mem) * 1099511628211ull;
			}
			/* An oversubscribed client's predicted working set goes first, so the daemon
			 * has it when the notice may be granted at once. */
			gmx_tpl_range_t ws[GMX_RANGES_MAX];
			uint32_t nws = 0;
			if (d.oversub && cmd->kind <= GMX_CMD_LAUNCH_COOP)
				gmx_shim_wset_predict(cmd, ws, &nws);
			s = seq_insert(cmd->seq);
			if (s && gmx_ring_space(&d.region->up) < nws + 1) {
				s->state = ST_TOMB; /* ring full: notice again at the next look */
				s = NULL;
			}
			for (uint32_t i = 0; s && i < nws; i++)
				push_up(GMX_UP_RANGE, 0, cmd->seq, ws[i].addr, ws[i].length);
			if (s &&
			    push_up(GMX_UP_NOTICE, (uint32_t)cmd->kind, cmd->seq, kid, cmd->bytes) != 0) {
				s->state = ST_TOMB;
				s = NULL;
			}
		} else if (s->state == ST_GRANTED) {
			ok = 1;
		}
		if (!ok) {
			/* Grants the thread has not applied yet count now (a migration order stops us:
			 * only the thread runs those). */
			gmx_ring_t *r = &d.region->down;
			while (!d.migrating) {
				uint32_t h = __atomic_load_n(&r->head, __ATOMIC_RELAXED);
				uint32_t t = __atomic_load_n(&r->tail, __ATOMIC_ACQUIRE);
				if (h == t || t - h > GMX_RING_ENTRIES ||
				    r->e[h & (GMX_RING_ENTRIES - 1)].type != GMX_DOWN_GRANT)
					break;
				gmx_ring_entry_t e;
				if (gmx_ring_pop(r, &e) != 1)
					break;
				seq_slot_t *g = seq_find(e.seq);
				if (g && g->state == ST_NOTICED) {
					g->state = ST_GRANTED;
					d.granted++;
				}
			}
			s = seq_find(cmd->seq);
			ok = s && s->state == ST_GRANTED;
		}
	}
	pthread_mutex_unlock(&d.lock);
	return ok;
}

static void grant_completed(void *self, uint64_t seq)
{
	(void)self;
	if (!__atomic_load_n(&d.connected, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&d.lock);
	seq_slot_t *s = d.connected ? seq_find(seq) : NULL;
	if (s && s->state == ST_GRANTED) {
		s->state = ST_TOMB;
		d.granted--;
		if (push_up(GMX_UP_COMPLETE, 0, seq, 0, 0) != 0)
			d.desync = 1; /* a lost completion would stall the daemon's view: start over */
	}
	pthread_mutex_unlock(&d.lock);
}

/* A hint for the policy (fikit marks the next kernel as following a synchronisation). It
 * never wakes the daemon: the work being waited for completes later, and the daemon reads
 * the hint, in ring order, before that completion. Lost when the ring is full, which costs
 * nothing but the hint. */
static void grant_host_wait(void *self)
{
	(void)self;
	if (!__atomic_load_n(&d.connected, __ATOMIC_ACQUIRE))
		return;
	pthread_mutex_lock(&d.lock);
	if (d.connected) {
		gmx_ring_entry_t e = {.type = GMX_UP_HOST_WAIT};
		gmx_ring_push_quiet(&d.region->up, &e);
	}
	pthread_mutex_unlock(&d.lock);
}

/* ---- managed allocations (GPUMUX_OVERSUBSCRIBE=1) ---- */

GMX_EXPORT CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	if (!d.oversub || gmx_shim_policy != &g_daemon) {
		GMX_REAL_OR_RETURN(fn, cuMemAlloc_v2);
		return fn(dptr, bytesize);
	}
	GMX_REAL_OR_RETURN(fn, cuMemAllocManaged);
	CUresult r = fn(dptr, bytesize, CU_MEM_ATTACH_GLOBAL);
	if (r != CUDA_SUCCESS)
		return r;
	CUcontext ctx = NULL;
	__typeof__(&cuCtxGetCurrent) getc = GMX_REAL(cuCtxGetCurrent);
	if (getc)
		getc(&ctx);
	pthread_mutex_lock(&d.lock);
	if (d.nallocs < ALLOC_MAX) {
		d.allocs[d.nallocs++] = (alloc_rec_t){*dptr, bytesize, ctx};
		if (d.connected && push_up(GMX_UP_ALLOC, 0, 0, *dptr, bytesize) != 0)
			d.desync = 1;
	}
	pthread_mutex_unlock(&d.lock);
	gmx_shim_log("alloc managed ptr=%#llx size=%zu", (unsigned long long)*dptr, bytesize);
	return CUDA_SUCCESS;
}

GMX_EXPORT CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
	GMX_REAL_OR_RETURN(fn, cuMemFree_v2);
	if (d.oversub) {
		pthread_mutex_lock(&d.lock);
		for (int i = 0; i < d.nallocs; i++)
			if (d.allocs[i].ptr == dptr) {
				d.allocs[i] = d.allocs[--d.nallocs];
				if (d.connected && push_up(GMX_UP_FREE, 0, 0, dptr, 0) != 0)
					d.desync = 1;
				break;
			}
		pthread_mutex_unlock(&d.lock);
	}
	return fn(dptr);
}

/* ---- set-up ---- */

/* A forked child starts without a session and without the thread (it has only one thread),
 * and must not touch the parent's connection. */
static void atfork_child(void)
{
	pthread_mutex_init(&d.lock, NULL);
	if (d.region)
		munmap(d.region, d.region_bytes);
	if (d.sock >= 0)
		close(d.sock);
	if (d.efd_up >= 0)
		close(d.efd_up);
	if (d.efd_down >= 0)
		close(d.efd_down);
	d.region = NULL;
	d.sock = d.efd_up = d.efd_down = -1;
	d.connected = 0;
	d.thread_started = 0;
	d.desync = 0;
	d.migrating = 0;
	d.mig_ctx = NULL;
	seq_clear();
}

const gmx_grant_ops_t *gmx_grant_daemon(void)
{
	const char *dir = getenv("GPUMUX_RUNTIME_DIR");
	snprintf(d.dir, sizeof d.dir, "%s", dir && *dir ? dir : GMX_RUNTIME_DIR_DEFAULT);
	const char *name = getenv("GPUMUX_NAME");
	if (!name || !*name) {
		static char comm[64];
		FILE *f = fopen("/proc/self/comm", "r");
		if (f && fgets(comm, sizeof comm, f))
			comm[strcspn(comm, "\n")] = 0;
		if (f)
			fclose(f);
		name = comm[0] ? comm : "task";
	}
	snprintf(d.name, sizeof d.name, "%s", name);
	const char *pr = getenv("GPUMUX_PRIORITY");
	d.priority = 5;
	if (pr && *pr) {
		char *end;
		long v = strtol(pr, &end, 10);
		if (*end || v < 0 || v > 9)
			fprintf(stderr, "gpumux shim: GPUMUX_PRIORITY=%s is not 0..9; using 5\n", pr);
		else
			d.priority = (int)v;
	}
	const char *os = getenv("GPUMUX_OVERSUBSCRIBE");
	d.oversub = os && strcmp(os, "1") == 0;
	d.reconnect_ms = GMX_RECONNECT_MS_DEFAULT;
	const char *rc = getenv("GPUMUX_RECONNECT_MS");
	if (rc && *rc) {
		char *end;
		long v = strtol(rc, &end, 10);
		if (*end || v < GMX_RECONNECT_MS_MIN || v > GMX_RECONNECT_MS_MAX)
			fprintf(stderr,
				"gpumux shim: GPUMUX_RECONNECT_MS=%s is out of range [%d, %d]; "
				"using %d\n",
				rc, GMX_RECONNECT_MS_MIN, GMX_RECONNECT_MS_MAX, GMX_RECONNECT_MS_DEFAULT);
		else
			d.reconnect_ms = v;
	}
	const char *tpl = getenv("GPUMUX_TEMPLATES");
	if (d.oversub && tpl && *tpl)
		gmx_shim_wset_load(tpl);
	pthread_atfork(NULL, NULL, atfork_child);
	return &g_daemon;
}
