/*
 * gpumuxd's state and event loop: the listening socket, signals, the policy's timer and every
 * client's socket and eventfd in one epoll set; accepting (admit.c answers); cutting off the
 * unresponsive; sleeping only when every ring is empty. The device the policy drives is in
 * client.c, the memory orders in mem_orders.c.
 */
#include "server_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

gmxd_server_t gmxd__srv;

static FILE *log_file;
static int log_set;

void gmxd_log_to(FILE *f)
{
	log_file = f;
	log_set = 1;
}

void gmxd_log(const char *fmt, ...)
{
	FILE *f = log_set ? log_file : stderr;
	if (!f)
		return;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	fprintf(f, "gpumuxd[%.6f]: %s\n", ts.tv_sec + ts.tv_nsec / 1e9, line);
}

static int64_t monotonic_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int64_t gmxd__now_ns(void)
{
	return SRV.clock ? SRV.clock() : monotonic_ns();
}

static uint64_t ev_data(int type, uint32_t idx)
{
	return ((uint64_t)type << 32) | idx;
}

void gmxd__ep_add(int fd, int type, uint32_t idx)
{
	if (SRV.ep < 0)
		return;
	struct epoll_event e = {.events = EPOLLIN, .data.u64 = ev_data(type, idx)};
	if (epoll_ctl(SRV.ep, EPOLL_CTL_ADD, fd, &e) != 0)
		gmxd_log("epoll_ctl(ADD): %s", strerror(errno));
}

void gmxd__ep_del(int fd)
{
	if (SRV.ep >= 0)
		epoll_ctl(SRV.ep, EPOLL_CTL_DEL, fd, NULL);
}

/* What one task may declare: device plus host memory (RAM and swap), the most managed
 * memory can hold; overflow-checked. */
static uint64_t task_limit(uint64_t device)
{
	struct sysinfo si;
	uint64_t host = UINT64_MAX;
	if (sysinfo(&si) == 0) {
		uint64_t unit = si.mem_unit ? si.mem_unit : 1;
		uint64_t pages = (uint64_t)si.totalram + (uint64_t)si.totalswap;
		host = pages > UINT64_MAX / unit ? UINT64_MAX : pages * unit;
	}
	return host > UINT64_MAX - device ? UINT64_MAX : device + host;
}

/* Connections that may wait for their first message: GMXD_PENDING_MAX, fewer when the
 * descriptor limit (raised to its hard limit first) leaves less beside the clients'. */
static uint32_t pending_budget(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return 16;
	if (rl.rlim_cur < rl.rlim_max) {
		struct rlimit up = {rl.rlim_max, rl.rlim_max};
		if (setrlimit(RLIMIT_NOFILE, &up) == 0)
			rl = up;
	}
	/* Each client holds three descriptors (four while it is welcomed); the loop ~10. */
	uint64_t spare = rl.rlim_cur > 4 * GMX_MAX_TASKS + 32 ? rl.rlim_cur - 4 * GMX_MAX_TASKS - 32 : 0;
	if (spare < 8)
		spare = 8;
	return spare < GMXD_PENDING_MAX ? (uint32_t)spare : GMXD_PENDING_MAX;
}

int gmxd__init(const gmxd_config_t *cfg, int64_t (*clock)(void))
{
	memset(&SRV, 0, sizeof SRV);
	SRV.cfg = cfg;
	SRV.clock = clock;
	SRV.lfd = SRV.sfd = SRV.tfd = SRV.ep = SRV.spare_fd = SRV.http_fd = -1;
	SRV.start_ns = gmxd__now_ns();
	if (getrandom(&SRV.hash_key, sizeof SRV.hash_key, GRND_NONBLOCK) != (ssize_t)sizeof SRV.hash_key)
		SRV.hash_key = (uint64_t)monotonic_ns() * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid();
	SRV.hash_key |= 1;
	SRV.ops = gmx_sched_find(cfg->policy);
	if (!SRV.ops) {
		char names[256];
		gmx_sched_names(names, sizeof names);
		gmxd_log("unknown policy '%s' (this build has %s)", cfg->policy, names);
		return -EINVAL;
	}
	char err[512];
	if (cfg->profile_dir[0] && gmxd__store_open(err, sizeof err) != 0) {
		gmxd_log("%s", err);
		return -EACCES;
	}
	SRV.mem_cap = (uint64_t)cfg->device_memory_mb << 20;
	SRV.pend_max = pending_budget();
	SRV.pend = malloc(SRV.pend_max * sizeof *SRV.pend);
	if (!SRV.pend || gmxd_mem_create(SRV.mem_cap, &SRV.mem) != 0) {
		gmxd_log("out of memory");
		gmxd__fini();
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < SRV.pend_max; i++)
		SRV.pend[i].fd = -1;
	gmxd_mem_set_task_limit(SRV.mem, task_limit(SRV.mem_cap));
	gmxd__mem_policy_init();
	gmx_sched_params_t params;
	gmx_sched_params_default(&params);
	params.slice_ns = cfg->slice_us * 1000LL;
	params.inflight_max = (uint32_t)cfg->inflight;
	params.profiles = SRV.prof_ptr;
	params.n_profiles = GMX_MAX_TASKS;
	params.profile_learn = 1; /* a task with no profile yet is measured as it runs */
	if (gmxd__comb_params(&params) != 0) {
		gmxd_log("out of memory");
		gmxd__fini();
		return -ENOMEM;
	}
	if (gmx_sched_params_check(&params, err, sizeof err) != 0) {
		gmxd_log("%s", err);
		gmxd__fini();
		return -EINVAL;
	}
	gmx_device_t dev = {.ctx = NULL,
			    .now = gmxd__dev_now,
			    .submit = gmxd__dev_submit,
			    .migrate = gmxd__dev_migrate,
			    .set_timer = gmxd__dev_set_timer,
			    .load_ns = gmxd__dev_load_ns,
			    .slice_for = gmxd__dev_slice_for,
			    .lease = gmxd__dev_lease};
	/* No registered policy calls dev.migrate today: the daemon's memory planner serves
	 * oversubscribed clients at each grant (plan_memory). */
	int rc = SRV.ops->create(&params, &dev, &SRV.pol);
	if (rc != 0) {
		gmxd_log("policy %s: create failed: %s", SRV.ops->name, strerror(-rc));
		gmxd__fini();
		return rc;
	}
	return 0;
}

void gmxd__fini(void)
{
	for (int t = 0; t < GMX_MAX_TASKS; t++)
		if (SRV.cl[t].used && !SRV.cl[t].dead)
			gmxd__drop_client(&SRV.cl[t], "daemon stopping");
	for (uint32_t i = 0; SRV.pend && i < SRV.pend_max; i++)
		if (SRV.pend[i].fd >= 0) {
			gmxd__ep_del(SRV.pend[i].fd);
			close(SRV.pend[i].fd);
		}
	free(SRV.pend);
	SRV.pend = NULL;
	if (SRV.pol)
		SRV.ops->destroy(SRV.pol);
	SRV.pol = NULL;
	/* The policy is gone: what it still held of departed clients goes with their slots. */
	for (int t = 0; t < GMX_MAX_TASKS; t++)
		if (SRV.cl[t].used)
			gmxd__free_slot(&SRV.cl[t]);
	gmxd__dcmd_pool_free();
	for (action_t *a = SRV.act_head, *nx; a; a = nx) {
		nx = a->next;
		free(a);
	}
	SRV.act_head = SRV.act_tail = NULL;
	gmxd_mem_destroy(SRV.mem);
	SRV.mem = NULL;
	gmxd__comb_fini();
	gmxd__store_tick(gmxd__now_ns(), 1);
	for (int i = 0; i < GMX_MAX_TASKS; i++)
		if (SRV.store[i].used)
			gmx_kprof_free(&SRV.store[i].prof);
}

void gmxd__timer_fired(void)
{
	SRV.in_policy = 1;
	SRV.ops->on_timer(SRV.pol);
	gmxd__run_deferred();
	SRV.in_policy = 0;
	gmxd__flush_actions();
}

void gmxd__sock_event(uint32_t task)
{
	if (task >= GMX_MAX_TASKS || !SRV.cl[task].used || SRV.cl[task].dead)
		return;
	client_t *c = &SRV.cl[task];
	char b[64];
	ssize_t r = recv(c->fd, b, sizeof b, MSG_DONTWAIT);
	if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
		gmxd__poll_rings(); /* what it said before it went counts */
		if (!c->dead)
			gmxd__drop_client(c, "disconnected");
	} else if (r > 0) {
		SRV.protocol_errors++;
		gmxd__cut(c, "malformed message: data on the control socket after WELCOME");
	}
}

/* A client being cut off reads why: a REFUSED with the reason, the one message the daemon
 * sends on a session's socket after WELCOME (E2BIG: over its memory budget, so that it backs
 * off instead of reconnecting at once). Never waits: a client that does not read loses it. */
static void tell_cut(const client_t *c)
{
	gmx_msg_refused_t r;
	memset(&r, 0, sizeof r);
	gmx_msg_init(&r.h, GMX_MSG_REFUSED, sizeof r);
	r.error = c->cut_error > 0 ? c->cut_error : EPROTO;
	snprintf(r.reason, sizeof r.reason, "%s", c->cut_reason);
	if (send(c->fd, &r, sizeof r, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EPIPE &&
	    errno != ECONNRESET)
		gmxd_log("client %u: the reason for its cut-off was not delivered: %s", c->id,
			 strerror(errno));
}

/* Whether c holds work past the liveness limit at `now` (unresponsive_ms since its last progress). */
static int overdue(const client_t *c, int64_t now, int64_t limit)
{
	return c->used && !c->dead && !c->cut && (c->inflight > 0 || c->evicts > 0) && now - c->last_progress > limit;
}

void gmxd__tick(int64_t now)
{
	int64_t limit = SRV.cfg->unresponsive_ms * 1000000LL;
	/* A client that looks overdue but has said something since the rings were last read (the
	 * loop may have lost the CPU between that read and now, while the client reported a whole
	 * batch) is read first: its completions are its progress. Never inside a policy call. */
	int unread = 0;
	GMXD_FOR_LIVE(t) {
		const client_t *c = &SRV.cl[t];
		if (overdue(c, now, limit) &&
		    __atomic_load_n(&c->region->up.tail, __ATOMIC_ACQUIRE) != __atomic_load_n(&c->region->up.head, __ATOMIC_RELAXED))
			unread = 1;
	}
	if (unread && !SRV.in_policy)
		gmxd__poll_rings();
	GMXD_FOR_LIVE(t) {
		client_t *c = &SRV.cl[t];
		if (overdue(c, now, limit)) {
			char why[128];
			snprintf(why, sizeof why, "unresponsive: no completion for %lld ms",
				 (long long)((now - c->last_progress) / 1000000));
			gmxd__cut(c, why);
		}
		if (c->used && !c->dead && c->cut) {
			SRV.cut_off++;
			tell_cut(c);
			c->st.cutoffs++;
			char why[sizeof c->cut_reason + 16];
			snprintf(why, sizeof why, "cut off: %s", c->cut_reason);
			gmxd__drop_client(c, why);
		}
	}
	gmxd__pending_expire(now);
	gmxd__store_tick(now, 0);
}

int gmxd__check(char *err, size_t err_len)
{
	uint32_t evicts = 0;
	for (uint32_t t = 0; t < GMX_MAX_TASKS; t++) {
		const client_t *c = &SRV.cl[t];
		int live = (SRV.live[t / 64] >> (t % 64)) & 1;
		if (live != (c->used && !c->dead)) {
			snprintf(err, err_len, "slot %u: %s, but %s in the live set", t,
				 c->used ? (c->dead ? "departed" : "in use") : "free", live ? "" : "not");
			return -EFAULT;
		}
		if (!c->used)
			continue;
		uint32_t q = 0, g = 0, o = 0;
		for (int h = 0; h < HASH; h++)
			for (const dcmd_t *d = c->hash[h]; d; d = d->hnext) {
				q += d->state == D_QUEUED;
				g += d->state == D_GRANTED;
				o += d->state == D_ORPHAN;
				if (d->cl != c || d->c.task != t) {
					snprintf(err, err_len,
						 "client %u: command seq %llu filed under another client",
						 c->id, (unsigned long long)d->cseq);
					return -EFAULT;
				}
			}
		if (q != c->queued || g != c->inflight || q + g + o != c->refs || c->leased_now > c->inflight ||
		    c->nlsent > GMXD_LEASES_PENDING ||
		    (c->dead && (q || g || c->nallocs || c->evicts))) {
			snprintf(err, err_len,
				 "client %u%s: %u queued, %u granted, %u orphans; counted %u queued, %u in "
				 "flight, "
				 "%u held",
				 c->id, c->dead ? " (departed)" : "", q, g, o, c->queued, c->inflight,
				 c->refs);
			return -EFAULT;
		}
		for (uint32_t i = 0; i < c->nahead; i++)
			if (c->nahead > GMX_AHEAD_MAX || c->ahead[i]->cseq > c->ahead_last ||
			    (i && c->ahead[i]->cseq <= c->ahead[i - 1]->cseq) ||
			    gmxd__hash_take((client_t *)c, c->ahead[i]->cseq, 0)) {
				snprintf(err, err_len,
					 "client %u: announcement ahead %u of %u (seq %llu) out of order or "
					 "noticed",
					 c->id, i, c->nahead, (unsigned long long)c->ahead[i]->cseq);
				return -EFAULT;
			}
		uint32_t acts = 0;
		for (const action_t *a = SRV.act_head; a; a = a->next)
			acts += a->task == t && a->client_id == c->id;
		if (acts != c->actions) {
			snprintf(err, err_len, "client %u: %u entries in the action queue, counted %u", c->id,
				 acts, c->actions);
			return -EFAULT;
		}
		uint32_t last_lease = c->nlsent ? c->lsent[c->nlsent - 1].inflight : c->l_inflight;
		if (!c->dead && c->oversub && c->evicts && last_lease) {
			snprintf(err, err_len,
				 "client %u: %u evictions of its memory outstanding under a lease of %u",
				 c->id, c->evicts, last_lease);
			return -EFAULT;
		}
		if (!c->dead && c->g_known_inflight != gmxd__known_grants(c)) {
			snprintf(err, err_len, "client %u: %u granted commands in flight under its lease, counted %u",
				 c->id, gmxd__known_grants(c), c->g_known_inflight);
			return -EFAULT;
		}
		if (c->queued + c->inflight > GMXD_CMDS_PER_CLIENT || c->nallocs > GMXD_ALLOCS_PER_CLIENT) {
			snprintf(err, err_len,
				 "client %u holds %u commands, %d allocations: beyond its bounds", c->id,
				 c->queued + c->inflight, c->nallocs);
			return -EFAULT;
		}
		uint64_t bytes = 0;
		for (int i = 0; i < c->nallocs; i++)
			bytes += c->allocs[i].size;
		if (bytes != c->alloc_bytes || (!c->dead && bytes != gmxd_mem_bytes(SRV.mem, t)) ||
		    (c->dead && gmxd_mem_bytes(SRV.mem, t))) {
			snprintf(err, err_len,
				 "client %u: allocations of %llu bytes, counted %llu, planner %llu", c->id,
				 (unsigned long long)bytes, (unsigned long long)c->alloc_bytes,
				 (unsigned long long)gmxd_mem_bytes(SRV.mem, t));
			return -EFAULT;
		}
		evicts += c->evicts;
	}
	for (uint32_t t = 0; t < GMX_MAX_TASKS; t++)
		if (!SRV.cl[t].used && (gmxd_mem_bytes(SRV.mem, t) || gmxd_mem_resident(SRV.mem, t))) {
			snprintf(err, err_len, "task %u has no client but %llu bytes in the planner", t,
				 (unsigned long long)gmxd_mem_bytes(SRV.mem, t));
			return -EFAULT;
		}
	if (evicts != SRV.evicts_outstanding) {
		snprintf(err, err_len, "%u evictions outstanding, clients owe %u", SRV.evicts_outstanding,
			 evicts);
		return -EFAULT;
	}
	uint32_t np = 0;
	for (uint32_t i = 0; i < SRV.pend_max; i++)
		np += SRV.pend[i].fd >= 0;
	if (np != SRV.n_pend) {
		snprintf(err, err_len, "%u connections pending, counted %u", np, SRV.n_pend);
		return -EFAULT;
	}
	uint64_t kinds = 0;
	for (int k = 0; k < GMXD_REF_KINDS; k++)
		kinds += SRV.refusals[k];
	if (kinds != SRV.refused) {
		snprintf(err, err_len, "%llu refusals by kind, %llu in all", (unsigned long long)kinds,
			 (unsigned long long)SRV.refused);
		return -EFAULT;
	}
	return gmxd_mem_check(SRV.mem, err, err_len);
}

/* ---- the loop ---- */

/* Accepts what is waiting (a batch at a time) and hands each connection to admit.c. Out of
 * descriptors, the spare one is given up to refuse the connection with a reason; failing
 * that, listening pauses for 100 ms rather than spin. */
static void accept_some(void)
{
	for (int k = 0; k < GMXD_ACCEPT_BATCH; k++) {
		int fd = accept4(SRV.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
			if (SRV.spare_fd >= 0) {
				close(SRV.spare_fd);
				fd = accept4(SRV.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
				if (fd >= 0)
					gmxd__refuse(fd, NULL, GMXD_REF_RESOURCES, EMFILE,
						     "the daemon is out of file descriptors");
				SRV.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
				if (fd >= 0)
					continue;
			}
			gmxd_log("out of file descriptors: not accepting for 100 ms");
			gmxd__ep_del(SRV.lfd);
			SRV.listen_paused_until = gmxd__now_ns() + 100000000LL;
			return;
		}
		if (fd < 0)
			return;
		struct ucred cr;
		socklen_t cl = sizeof cr;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0) {
			gmxd_log("a connection without credentials (%s); closed", strerror(errno));
			close(fd);
			continue;
		}
		gmxd__admit(fd, &cr);
	}
}

static int setup_socket(void)
{
	const char *dir = SRV.cfg->runtime_dir;
	if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
		int e = -errno;
		gmxd_log("cannot create the runtime directory %s: %s", dir, strerror(errno));
		return e;
	}
	int n = snprintf(SRV.sock_path, sizeof SRV.sock_path, "%s/%s", dir, GMX_SOCKET_NAME);
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (n < 0 || (size_t)n >= sizeof sa.sun_path) {
		gmxd_log("runtime directory %s is too long for a socket path (max %zu)", dir,
			 sizeof sa.sun_path - sizeof GMX_SOCKET_NAME - 1);
		return -ENAMETOOLONG;
	}
	memcpy(sa.sun_path, SRV.sock_path, (size_t)n + 1);
	SRV.lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (SRV.lfd < 0)
		return -errno;
	/* A socket left by a daemon that died: remove it only if nobody answers there. */
	int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof sa) == 0) {
		close(probe);
		gmxd_log("another gpumuxd is listening on %s; stop it first", SRV.sock_path);
		return -EADDRINUSE;
	}
	if (probe >= 0)
		close(probe);
	unlink(SRV.sock_path);
	if (bind(SRV.lfd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
	    listen(SRV.lfd, GMXD_LISTEN_BACKLOG) != 0) {
		int e = -errno;
		gmxd_log("cannot listen on %s: %s", SRV.sock_path, strerror(errno));
		return e;
	}
	/* Everyone may connect; SO_PEERCRED decides who is served. */
	chmod(SRV.sock_path, 0666);
	return 0;
}

/* Announces sleep on every live up ring (deep: any entry wakes the loop, batched ones
 * included); nonzero if one already has entries. */
static int prepare_sleep(int deep)
{
	int busy = 0;
	GMXD_FOR_LIVE(t)
	if (gmx_ring_prepare_sleep_as(&SRV.cl[t].region->up, deep ? GMX_RING_WAIT_ANY : GMX_RING_WAIT_BATCH))
		busy = 1;
	return busy;
}

static void end_sleep(void)
{
	GMXD_FOR_LIVE(t)
	__atomic_store_n(&SRV.cl[t].region->up.waiting, 0, __ATOMIC_RELAXED);
}

static void notify_systemd(void)
{
	const char *ns = getenv("NOTIFY_SOCKET");
	if (!ns || (ns[0] != '/' && ns[0] != '@'))
		return;
	int nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un na = {.sun_family = AF_UNIX};
	size_t l = strlen(ns);
	if (nfd >= 0 && l < sizeof na.sun_path) {
		memcpy(na.sun_path, ns, l);
		if (na.sun_path[0] == '@')
			na.sun_path[0] = 0;
		sendto(nfd, "READY=1", 7, 0, (struct sockaddr *)&na,
		       (socklen_t)(offsetof(struct sockaddr_un, sun_path) + l));
	}
	if (nfd >= 0)
		close(nfd);
}

static void close_loop(void)
{
	gmxd__http_stop();
	if (SRV.sock_path[0])
		unlink(SRV.sock_path);
	int *fds[] = {&SRV.lfd, &SRV.sfd, &SRV.tfd, &SRV.ep, &SRV.spare_fd};
	for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
		if (*fds[i] >= 0) {
			close(*fds[i]);
			*fds[i] = -1;
		}
}

int gmxd_run(const gmxd_config_t *cfg)
{
	int rc = gmxd__init(cfg, NULL);
	if (rc != 0)
		return rc;
	signal(SIGPIPE, SIG_IGN);
	sigset_t ss;
	sigemptyset(&ss);
	sigaddset(&ss, SIGTERM);
	sigaddset(&ss, SIGINT);
	sigaddset(&ss, SIGHUP);
	sigprocmask(SIG_BLOCK, &ss, NULL);
	SRV.sfd = signalfd(-1, &ss, SFD_NONBLOCK | SFD_CLOEXEC);
	SRV.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	SRV.ep = epoll_create1(EPOLL_CLOEXEC);
	SRV.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (SRV.sfd < 0 || SRV.tfd < 0 || SRV.ep < 0) {
		rc = -errno;
		gmxd_log("cannot create the event loop: %s", strerror(errno));
		gmxd__fini();
		close_loop();
		return rc;
	}
	rc = setup_socket();
	if (rc != 0) {
		gmxd__fini();
		SRV.sock_path[0] = 0; /* another daemon's, or none */
		close_loop();
		return rc;
	}
	gmxd__ep_add(SRV.lfd, EV_LISTEN, 0);
	gmxd__ep_add(SRV.sfd, EV_SIGNAL, 0);
	gmxd__ep_add(SRV.tfd, EV_TIMER, 0);
	rc = gmxd__http_start();
	if (rc != 0) {
		gmxd__fini();
		close_loop();
		return rc;
	}
	gmxd_log("listening on %s (policy %s, slice %ld us, %ld in flight per client, device memory %ld MB, "
		 "protocol %u, up to %u connections waiting for their first message)",
		 SRV.sock_path, SRV.ops->name, cfg->slice_us, cfg->inflight, cfg->device_memory_mb,
		 GMX_PROTO_VERSION, SRV.pend_max);
	notify_systemd();

	int64_t spin_ns = cfg->spin_us * 1000LL, idle_since = gmxd__now_ns();
	int pwait2 = 1; /* epoll_pwait2 (ns timeouts): else the timerfd carries the policy's timer */
	/* Timed reads of leased batches: in a row that found none; whether the last sleep ended at
	 * its drain deadline; the interval, doubled while batches are small, halved when large. */
	int quiet_drains = GMXD_QUIET_DRAINS, timed_drain = 0, timed_out = 0;
	int64_t drain_ns = GMXD_LEASE_DRAIN_MS * 1000000LL;
	int64_t drain_used = drain_ns; /* the interval of the last timed read (gmxd__drain_interval) */
	while (!SRV.stop) {
		SRV.loop.iterations++;
		int got = gmxd__poll_rings();
		int64_t now = gmxd__now_ns();
		/* The policy's timer, once what the rings said before it is read. */
		if (SRV.timer_at && SRV.timer_at <= now) {
			SRV.timer_at = 0;
			SRV.loop.timer_fires++;
			gmxd__timer_fired();
		}
		int busy = got > 0;
		if (busy) {
			if (idle_since != now && now - idle_since < spin_ns)
				SRV.loop.spin_hits++; /* the spin found this batch */
			idle_since = now;
		}
		if (SRV.listen_paused_until && now >= SRV.listen_paused_until) {
			SRV.listen_paused_until = 0;
			gmxd__ep_add(SRV.lfd, EV_LISTEN, 0);
		}
		/* Housekeeping (liveness, pending connections, profile saves) every 10 ms while the
		 * loop turns, at once when a client was marked cut. */
		if (SRV.cut_pending || now >= SRV.tick_due) {
			SRV.cut_pending = 0;
			SRV.tick_due = now + GMXD_TICK_NS;
			gmxd__tick(now);
		}
		int64_t timeout = -1; /* ns */
		GMXD_FOR_LIVE(t)
		if (SRV.cl[t].inflight || SRV.cl[t].evicts)
			timeout = 100000000; /* liveness checks while someone holds work */
		if (SRV.n_pend || SRV.listen_paused_until)
			timeout = 100000000;
		/* Leased work is reported in batches that do not wake the loop: read them every
		 * GMXD_LEASE_DRAIN_MS to GMXD_LEASE_DRAIN_MAX_MS while they come (the interval grows while
		 * a read finds fewer than GMXD_DRAIN_BATCH entries: the policy hears each at its own
		 * time whenever it is read, and every wake-up for another reason reads them first). After
		 * GMXD_QUIET_DRAINS such reads in a row found nothing, the loop sleeps deep: the next entry
		 * of any kind wakes it (gmx_ring_push_batched), so an idle leased client costs no wake-ups.
		 */
		if (timed_drain && timed_out && drain_used == drain_ns) {
			if (got < GMXD_DRAIN_BATCH && drain_ns < GMXD_LEASE_DRAIN_MAX_MS * 1000000LL)
				drain_ns *= 2;
			else if (got > 4 * GMXD_DRAIN_BATCH && drain_ns > GMXD_LEASE_DRAIN_MS * 1000000LL)
				drain_ns /= 2;
		}
		if (busy)
			quiet_drains = 0;
		else if (timed_drain)
			quiet_drains++;
		int deep = quiet_drains >= GMXD_QUIET_DRAINS;
		timed_drain = !deep && gmxd__leases_active();
		if (timed_drain) {
			drain_used = gmxd__drain_interval(drain_ns);
			if (timeout < 0 || drain_used < timeout)
				timeout = drain_used;
		}
		if (SRV.timer_at) {
			int64_t left = SRV.timer_at > now ? SRV.timer_at - now : 0;
			if (timeout < 0 || left < timeout)
				timeout = left;
		}
		int hms = gmxd__http_timeout(timeout < 0 ? -1 : (int)((timeout + 999999) / 1000000));
		if (hms >= 0 && (timeout < 0 || hms * 1000000LL < timeout))
			timeout = hms * 1000000LL;
		int sleep_ok = !busy && now - idle_since >= spin_ns && timeout != 0;
		if (!busy && !sleep_ok)
			SRV.loop.spins++;
		int prepared = 0;
		if (sleep_ok) {
			prepared = 1;
			if (prepare_sleep(deep))
				sleep_ok = 0;
		}
		struct epoll_event evs[64];
		int n;
		if (sleep_ok) {
			SRV.loop.sleeps++;
			SRV.loop.deep_sleeps += deep && timeout < 0;
		}
		int64_t wait_ns = sleep_ok ? timeout : 0;
		if (pwait2) {
			struct timespec ts = {wait_ns / 1000000000LL, wait_ns % 1000000000LL};
			n = epoll_pwait2(SRV.ep, evs, 64, wait_ns < 0 ? NULL : &ts, NULL);
			if (n < 0 && errno == ENOSYS) {
				pwait2 = 0;
				n = 0;
			}
		} else {
			if (SRV.timer_at && SRV.timer_at != SRV.timer_armed)
				gmxd__arm_timer(SRV.timer_at);
			n = epoll_wait(SRV.ep, evs, 64, wait_ns < 0 ? -1 : (int)((wait_ns + 999999) / 1000000));
		}
		timed_out = sleep_ok && n == 0 && timeout == drain_used;
		if (prepared)
			end_sleep();
		if (!sleep_ok && !busy && spin_ns)
			SRV.loop.spin_ns += (uint64_t)(gmxd__now_ns() - now);
		for (int i = 0; i < n; i++) {
			int type = (int)(evs[i].data.u64 >> 32);
			uint32_t idx = (uint32_t)evs[i].data.u64;
			uint64_t v;
			switch (type) {
			case EV_LISTEN:
				accept_some();
				break;
			case EV_SIGNAL: {
				struct signalfd_siginfo si;
				if (read(SRV.sfd, &si, sizeof si) == (ssize_t)sizeof si)
					gmxd_log("signal %u: stopping", si.ssi_signo);
				SRV.stop = 1;
				break;
			}
			case EV_TIMER:
				if (read(SRV.tfd, &v, sizeof v) > 0)
					SRV.timer_armed = 0; /* the top of the loop fires the policy's timer */
				break;
			case EV_HTTP:
				gmxd__http_run();
				break;
			case EV_PENDING:
				gmxd__pending_read(idx);
				break;
			case EV_SOCK:
				gmxd__sock_event(idx);
				break;
			case EV_EFD:
				if (idx < GMX_MAX_TASKS && SRV.cl[idx].used && !SRV.cl[idx].dead &&
				    read(SRV.cl[idx].efd_up, &v, sizeof v) < 0 && errno != EAGAIN)
					gmxd_log("client %u: eventfd read: %s", SRV.cl[idx].id,
						 strerror(errno));
				break;
			}
		}
		if (SRV.http_due && gmxd__now_ns() >= SRV.http_due)
			gmxd__http_run(); /* its connections' timeouts */
	}
	gmxd__fini();
	close_loop();
	gmxd_log("stopped");
	return 0;
}
