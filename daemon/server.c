/*
 * gpumuxd's event loop: the listening socket, signals, the policy's timer and every client's
 * socket and eventfd in one epoll set; registering clients (credentials, shared region,
 * WELCOME); cutting off the unresponsive; sleeping only when every ring is empty. The device
 * the policy drives is in client.c, the memory orders in mem_orders.c.
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
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

gmxd_server_t gmxd__srv;

void gmxd_log(const char *fmt, ...)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	char line[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	fprintf(stderr, "gpumuxd[%.6f]: %s\n", ts.tv_sec + ts.tv_nsec / 1e9, line);
}

int64_t gmxd__now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static uint64_t ev_data(int type, uint32_t idx)
{
	return ((uint64_t)type << 32) | idx;
}

void gmxd__ep_add(int fd, int type, uint32_t idx)
{
	struct epoll_event e = {.events = EPOLLIN, .data.u64 = ev_data(type, idx)};
	if (epoll_ctl(SRV.ep, EPOLL_CTL_ADD, fd, &e) != 0)
		gmxd_log("epoll_ctl(ADD): %s", strerror(errno));
}

void gmxd__ep_del(int fd)
{
	epoll_ctl(SRV.ep, EPOLL_CTL_DEL, fd, NULL);
}

/* ---- the device the policy drives ---- */

/* Is the peer allowed? root, the daemon's own user, allow_users, or a member of allow_group. */
static int peer_allowed(const struct ucred *cr)
{
	if (cr->uid == 0 || cr->uid == geteuid())
		return 1;
	for (int i = 0; i < SRV.cfg->n_allow_uid; i++)
		if (SRV.cfg->allow_uid[i] == cr->uid)
			return 1;
	for (int i = 0; i < SRV.cfg->n_allow_gid; i++) {
		if (SRV.cfg->allow_gid[i] == cr->gid)
			return 1;
		/* Supplementary groups, as the kernel knows them for that process. */
		char path[64], line[4096];
		snprintf(path, sizeof path, "/proc/%d/status", (int)cr->pid);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		int ok = 0;
		while (!ok && fgets(line, sizeof line, f))
			if (strncmp(line, "Groups:", 7) == 0) {
				char *p = line + 7, *end;
				for (long g; (g = strtol(p, &end, 10)), end != p; p = end)
					if ((gid_t)g == SRV.cfg->allow_gid[i])
						ok = 1;
			}
		fclose(f);
		if (ok)
			return 1;
	}
	return 0;
}

static void send_refused(int fd, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void send_refused(int fd, int err, const char *fmt, ...)
{
	gmx_msg_refused_t r;
	memset(&r, 0, sizeof r);
	gmx_msg_init(&r.h, GMX_MSG_REFUSED, sizeof r);
	r.error = err;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r.reason, sizeof r.reason, fmt, ap);
	va_end(ap);
	if (send(fd, &r, sizeof r, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		gmxd_log("refusal not delivered: %s", strerror(errno));
	gmxd_log("refused a connection: %s", r.reason);
}

static void welcome(int fd, const struct ucred *cr, const gmx_msg_hello_t *h)
{
	int task = -1, live = 0;
	for (int t = 0; t < GMX_MAX_TASKS; t++) {
		if (SRV.cl[t].used && !SRV.cl[t].dead)
			live++;
		if (!SRV.cl[t].used && task < 0)
			task = t;
	}
	if (task < 0 || live >= SRV.cfg->max_clients) {
		SRV.refused++;
		send_refused(fd, EBUSY, "the daemon serves %ld clients already (max_clients)",
			     SRV.cfg->max_clients);
		close(fd);
		return;
	}
	int mfd = memfd_create("gpumux-client", MFD_CLOEXEC);
	int eu = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), ed = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	void *reg = MAP_FAILED;
	if (mfd >= 0 && ftruncate(mfd, sizeof(gmx_shm_region_t)) == 0)
		reg = mmap(NULL, sizeof(gmx_shm_region_t), PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	if (mfd < 0 || eu < 0 || ed < 0 || reg == MAP_FAILED) {
		gmxd_log("cannot set up a client's shared region: %s", strerror(errno));
		send_refused(fd, ENOMEM, "the daemon could not set up shared memory");
		if (reg != MAP_FAILED)
			munmap(reg, sizeof(gmx_shm_region_t));
		if (mfd >= 0)
			close(mfd);
		if (eu >= 0)
			close(eu);
		if (ed >= 0)
			close(ed);
		close(fd);
		return;
	}
	client_t *c = &SRV.cl[task];
	memset(c, 0, sizeof *c);
	c->used = 1;
	c->id = ++SRV.next_id;
	c->task = (uint32_t)task;
	c->fd = fd;
	c->efd_up = eu;
	c->efd_down = ed;
	c->region = reg;
	c->region->magic = GMX_PROTO_MAGIC;
	c->region->version = GMX_PROTO_VERSION;
	c->region->client_id = c->id;
	c->pid = cr->pid;
	c->uid = cr->uid;
	memcpy(c->name, h->name, sizeof c->name);
	c->priority = h->priority;
	c->oversub = (h->flags & GMX_HELLO_OVERSUBSCRIBE) || SRV.cfg->oversubscribe_default;
	c->connected_ns = c->last_progress = gmxd__now_ns();

	gmx_msg_welcome_t w;
	memset(&w, 0, sizeof w);
	gmx_msg_init(&w.h, GMX_MSG_WELCOME, sizeof w);
	w.client_id = c->id;
	w.ring_entries = GMX_RING_ENTRIES;
	w.region_bytes = sizeof(gmx_shm_region_t);
	w.slice_ns = SRV.cfg->slice_us * 1000;
	snprintf(w.policy, sizeof w.policy, "%s", SRV.ops->name);
	int fds[3] = {mfd, eu, ed};
	char cbuf[CMSG_SPACE(sizeof fds)];
	memset(cbuf, 0, sizeof cbuf);
	struct iovec iov = {.iov_base = &w, .iov_len = sizeof w};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
	struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof fds);
	memcpy(CMSG_DATA(cm), fds, sizeof fds);
	ssize_t sent = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	close(mfd);
	if (sent != (ssize_t)sizeof w) {
		c->dead = 1; /* never registered with the policy */
		close(fd);
		close(eu);
		close(ed);
		munmap(reg, sizeof(gmx_shm_region_t));
		memset(c, 0, sizeof *c);
		return;
	}
	SRV.prof_ptr[c->task] = NULL;
	if (SRV.ops->flags & GMX_POLICY_PROFILES) {
		int k = -1;
		for (int i = 0; i < GMX_MAX_TASKS && k < 0; i++)
			if (SRV.store[i].used && strcmp(SRV.store[i].name, c->name) == 0)
				k = i;
		for (int i = 0; i < GMX_MAX_TASKS && k < 0; i++)
			if (!SRV.store[i].used && gmx_kprof_init(&SRV.store[i].prof, c->name) == 0) {
				SRV.store[i].used = 1;
				memcpy(SRV.store[i].name, c->name, sizeof SRV.store[i].name);
				gmxd__store_load(c->name, &SRV.store[i].prof); /* else measured as it runs */
				k = i;
			}
		if (k >= 0)
			SRV.prof_ptr[c->task] = &SRV.store[k].prof;
	}
	SRV.ops->task_add(SRV.pol, c->task, c->priority);
	gmxd__ep_add(fd, EV_SOCK, c->task);
	gmxd__ep_add(eu, EV_EFD, c->task);
	gmxd_log("client %u: pid %d uid %d name '%s' priority %d%s (task %u)", c->id, (int)c->pid,
		 (int)c->uid, c->name, c->priority, c->oversub ? " oversubscribed" : "", c->task);
}

/* The first message of a connection: HELLO or STATUS_REQ, checked field by field. */
static void pending_read(int idx)
{
	pending_t *p = &SRV.pend[idx];
	int fd = p->fd;
	p->fd = -1;
	gmxd__ep_del(fd);
	union {
		gmx_msg_hello_t h;
		char raw[512];
	} m;
	ssize_t n = recv(fd, &m, sizeof m, MSG_DONTWAIT);
	struct ucred cr;
	socklen_t cl = sizeof cr;
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0) {
		close(fd);
		return;
	}
	if (n < (ssize_t)sizeof(gmx_msg_hdr_t) || m.h.h.magic != GMX_PROTO_MAGIC) {
		SRV.protocol_errors++;
		gmxd_log("pid %d: malformed first message (%zd bytes); closed", (int)cr.pid, n);
		close(fd);
		return;
	}
	if (m.h.h.version != GMX_PROTO_VERSION) {
		SRV.refused++;
		send_refused(fd, EPROTONOSUPPORT, "protocol version %u; this gpumuxd speaks version %u",
			     m.h.h.version, GMX_PROTO_VERSION);
		close(fd);
		return;
	}
	if (!peer_allowed(&cr)) {
		SRV.refused++;
		send_refused(fd, EACCES,
			     "uid %d (gid %d) is not allowed by gpumuxd's allow_users/"
			     "allow_group",
			     (int)cr.uid, (int)cr.gid);
		close(fd);
		return;
	}
	if (m.h.h.type == GMX_MSG_STATUS_REQ && n == (ssize_t)sizeof(gmx_msg_hdr_t)) {
		gmxd__status_reply(fd);
		close(fd);
		return;
	}
	if (m.h.h.type != GMX_MSG_HELLO || n != (ssize_t)sizeof m.h ||
	    m.h.h.length != sizeof m.h - sizeof m.h.h || m.h.priority < 0 ||
	    m.h.priority >= GMX_PRIORITY_LEVELS || memchr(m.h.name, 0, sizeof m.h.name) == NULL) {
		SRV.protocol_errors++;
		send_refused(fd, EPROTO, "malformed HELLO (type %u, %zd bytes, priority %d)", m.h.h.type, n,
			     m.h.priority);
		close(fd);
		return;
	}
	for (char *q = m.h.name; *q; q++)
		if ((unsigned char)*q < 0x20 || (unsigned char)*q > 0x7e)
			*q = '_';
	welcome(fd, &cr, &m.h);
}

static void accept_all(void)
{
	for (;;) {
		int fd = accept4(SRV.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		int i = 0;
		while (i < PENDING_MAX && SRV.pend[i].fd >= 0)
			i++;
		if (i == PENDING_MAX) {
			gmxd_log("too many connections waiting for their first message; closed one");
			close(fd);
			continue;
		}
		SRV.pend[i].fd = fd;
		SRV.pend[i].since = gmxd__now_ns();
		gmxd__ep_add(fd, EV_PENDING, (uint32_t)i);
	}
}

/* ---- status ---- */

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
	if (bind(SRV.lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(SRV.lfd, 64) != 0) {
		int e = -errno;
		gmxd_log("cannot listen on %s: %s", SRV.sock_path, strerror(errno));
		return e;
	}
	/* Everyone may connect; SO_PEERCRED decides who is served. */
	chmod(SRV.sock_path, 0666);
	return 0;
}

static void check_liveness(int64_t now)
{
	int64_t limit = SRV.cfg->unresponsive_ms * 1000000LL;
	for (int t = 0; t < GMX_MAX_TASKS; t++) {
		client_t *c = &SRV.cl[t];
		if (c->used && !c->dead && !c->cut && (c->inflight > 0 || c->evicts > 0) &&
		    now - c->last_progress > limit) {
			char why[128];
			snprintf(why, sizeof why, "unresponsive: no completion for %lld ms",
				 (long long)((now - c->last_progress) / 1000000));
			gmxd__cut(c, why);
		}
		if (c->used && !c->dead && c->cut) {
			SRV.cut_off++;
			char why[160];
			snprintf(why, sizeof why, "cut off: %.140s", c->cut_reason);
			gmxd__drop_client(c, why);
		}
	}
	for (int i = 0; i < PENDING_MAX; i++)
		if (SRV.pend[i].fd >= 0 && now - SRV.pend[i].since > PENDING_TIMEOUT_NS) {
			gmxd_log("a connection sent nothing for 2 s; closed");
			gmxd__ep_del(SRV.pend[i].fd);
			close(SRV.pend[i].fd);
			SRV.pend[i].fd = -1;
		}
}

/* Announces sleep on every up ring; nonzero if one already has entries. */
static int prepare_sleep(void)
{
	int busy = 0;
	for (int t = 0; t < GMX_MAX_TASKS; t++)
		if (SRV.cl[t].used && !SRV.cl[t].dead && gmx_ring_prepare_sleep(&SRV.cl[t].region->up))
			busy = 1;
	return busy;
}

static void end_sleep(void)
{
	for (int t = 0; t < GMX_MAX_TASKS; t++)
		if (SRV.cl[t].used && !SRV.cl[t].dead)
			__atomic_store_n(&SRV.cl[t].region->up.waiting, 0, __ATOMIC_RELAXED);
}

int gmxd_run(const gmxd_config_t *cfg)
{
	memset(&SRV, 0, sizeof SRV);
	SRV.cfg = cfg;
	SRV.lfd = SRV.sfd = SRV.tfd = SRV.ep = -1;
	for (int i = 0; i < PENDING_MAX; i++)
		SRV.pend[i].fd = -1;
	SRV.start_ns = gmxd__now_ns();
	SRV.mem_cap = (uint64_t)cfg->device_memory_mb << 20;
	if (gmxd_mem_create(SRV.mem_cap, &SRV.mem) != 0) {
		gmxd_log("out of memory");
		return -ENOMEM;
	}
	SRV.ops = gmx_sched_find(cfg->policy);
	if (!SRV.ops) {
		char names[256];
		gmx_sched_names(names, sizeof names);
		gmxd_log("unknown policy '%s' (this build has %s)", cfg->policy, names);
		return -EINVAL;
	}
	gmx_sched_params_t params;
	gmx_sched_params_default(&params);
	params.slice_ns = cfg->slice_us * 1000LL;
	params.inflight_max = (uint32_t)cfg->inflight;
	params.profiles = SRV.prof_ptr;
	params.n_profiles = GMX_MAX_TASKS;
	params.profile_learn = 1; /* a task with no profile yet is measured as it runs */
	char err[256];
	if (gmx_sched_params_check(&params, err, sizeof err) != 0) {
		gmxd_log("%s", err);
		return -EINVAL;
	}
	gmx_device_t dev = {.ctx = NULL,
			    .now = gmxd__dev_now,
			    .submit = gmxd__dev_submit,
			    .migrate = gmxd__dev_migrate,
			    .set_timer = gmxd__dev_set_timer};
	/* No registered policy calls dev.migrate today: the daemon's memory planner serves
	 * oversubscribed clients at each grant (plan_memory). */
	int rc = SRV.ops->create(&params, &dev, &SRV.pol);
	if (rc != 0) {
		gmxd_log("policy %s: create failed: %s", SRV.ops->name, strerror(-rc));
		return rc;
	}
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
	if (SRV.sfd < 0 || SRV.tfd < 0 || SRV.ep < 0) {
		gmxd_log("cannot create the event loop: %s", strerror(errno));
		return -errno;
	}
	rc = setup_socket();
	if (rc != 0)
		return rc;
	gmxd__ep_add(SRV.lfd, EV_LISTEN, 0);
	gmxd__ep_add(SRV.sfd, EV_SIGNAL, 0);
	gmxd__ep_add(SRV.tfd, EV_TIMER, 0);
	gmxd_log("listening on %s (policy %s, slice %ld us, %ld in flight per client, device "
		 "memory %ld MB, protocol %u)",
		 SRV.sock_path, SRV.ops->name, cfg->slice_us, cfg->inflight, cfg->device_memory_mb,
		 GMX_PROTO_VERSION);
	/* systemd Type=notify, when started by it. */
	const char *ns = getenv("NOTIFY_SOCKET");
	if (ns && (ns[0] == '/' || ns[0] == '@')) {
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

	int64_t spin_ns = cfg->spin_us * 1000LL, idle_since = gmxd__now_ns();
	while (!SRV.stop) {
		int busy = gmxd__poll_rings() > 0;
		int64_t now = gmxd__now_ns();
		if (busy)
			idle_since = now;
		int timeout = -1;
		for (int t = 0; t < GMX_MAX_TASKS; t++)
			if (SRV.cl[t].used && !SRV.cl[t].dead && (SRV.cl[t].inflight || SRV.cl[t].evicts))
				timeout = 100; /* liveness checks while someone holds work */
		for (int i = 0; i < PENDING_MAX; i++)
			if (SRV.pend[i].fd >= 0)
				timeout = 100;
		int sleep_ok = !busy && now - idle_since >= spin_ns;
		if (sleep_ok && prepare_sleep())
			sleep_ok = 0;
		struct epoll_event evs[64];
		int n = epoll_wait(SRV.ep, evs, 64, sleep_ok ? timeout : 0);
		end_sleep();
		for (int i = 0; i < n; i++) {
			int type = (int)(evs[i].data.u64 >> 32);
			uint32_t idx = (uint32_t)evs[i].data.u64;
			uint64_t v;
			switch (type) {
			case EV_LISTEN:
				accept_all();
				break;
			case EV_SIGNAL: {
				struct signalfd_siginfo si;
				if (read(SRV.sfd, &si, sizeof si) == (ssize_t)sizeof si)
					gmxd_log("signal %u: stopping", si.ssi_signo);
				SRV.stop = 1;
				break;
			}
			case EV_TIMER:
				if (read(SRV.tfd, &v, sizeof v) > 0) {
					SRV.in_policy = 1;
					SRV.ops->on_timer(SRV.pol);
					gmxd__run_deferred();
					SRV.in_policy = 0;
					gmxd__flush_actions();
				}
				break;
			case EV_PENDING:
				if (idx < PENDING_MAX && SRV.pend[idx].fd >= 0)
					pending_read((int)idx);
				break;
			case EV_SOCK:
				if (idx < GMX_MAX_TASKS && SRV.cl[idx].used && !SRV.cl[idx].dead) {
					char b[64];
					ssize_t r = recv(SRV.cl[idx].fd, b, sizeof b, MSG_DONTWAIT);
					if (r == 0 || (r < 0 && errno != EAGAIN)) {
						gmxd__poll_rings(); /* what it said before it went counts */
						gmxd__drop_client(&SRV.cl[idx], "disconnected");
					} else if (r > 0) {
						SRV.protocol_errors++;
						gmxd__cut(
						    &SRV.cl[idx],
						    "malformed message: data on the control socket after "
						    "WELCOME");
					}
				}
				break;
			case EV_EFD:
				if (idx < GMX_MAX_TASKS && SRV.cl[idx].used && !SRV.cl[idx].dead &&
				    read(SRV.cl[idx].efd_up, &v, sizeof v) < 0 && errno != EAGAIN)
					gmxd_log("client %u: eventfd read: %s", SRV.cl[idx].id,
						 strerror(errno));
				break;
			}
		}
		check_liveness(gmxd__now_ns());
	}
	for (int t = 0; t < GMX_MAX_TASKS; t++)
		if (SRV.cl[t].used && !SRV.cl[t].dead)
			gmxd__drop_client(&SRV.cl[t], "daemon stopping");
	unlink(SRV.sock_path);
	close(SRV.lfd);
	SRV.ops->destroy(SRV.pol);
	gmxd_mem_destroy(SRV.mem);
	SRV.mem = NULL;
	for (int i = 0; i < GMX_MAX_TASKS; i++)
		if (SRV.store[i].used)
			gmx_kprof_free(&SRV.store[i].prof);
	gmxd_log("stopped");
	return 0;
}
