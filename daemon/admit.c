/*
 * Connections to gpumuxd, from accept to WELCOME or REFUSED.
 *
 * The peer's credentials are known at accept (SO_PEERCRED, as at connect): a peer that may
 * not be served is refused there and closed, so another user's connections never occupy
 * anything. An allowed peer's first message is usually there already and is answered at
 * once; otherwise the connection waits, within a budget per uid (root and the daemon's own
 * user draw on a reserve nobody else may take), for at most GMXD_PENDING_TIMEOUT_NS. Every
 * refusal is a REFUSED message with the reason, and is counted by kind.
 */
#include "server_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

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

/* Root and the daemon's own user: they draw on the reserve and have no per-uid budget. */
static int privileged(uid_t uid)
{
	return uid == 0 || uid == geteuid();
}

long gmxd__clients_reserved(void)
{
	long r = SRV.cfg->max_clients / 4;
	return r < GMXD_CLIENTS_RESERVE ? r : GMXD_CLIENTS_RESERVE;
}

long gmxd__clients_per_user(void)
{
	if (SRV.cfg->max_clients_per_user)
		return SRV.cfg->max_clients_per_user;
	return (SRV.cfg->max_clients + 1) / 2;
}

/* Closes fd after reading what the peer already sent: closing with unread data would make
 * the peer's next read fail (ECONNRESET) before it reaches the reply. */
static void drain_close(int fd)
{
	char b[512];
	for (int i = 0; i < 4 && recv(fd, b, sizeof b, MSG_DONTWAIT) > 0; i++)
		;
	close(fd);
}

void gmxd__refuse(int fd, const struct ucred *cr, int kind, int error, const char *fmt, ...)
{
	gmx_msg_refused_t r;
	memset(&r, 0, sizeof r);
	gmx_msg_init(&r.h, GMX_MSG_REFUSED, sizeof r);
	r.error = error;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r.reason, sizeof r.reason, fmt, ap);
	va_end(ap);
	SRV.refused++;
	if (kind >= 0 && kind < GMXD_REF_KINDS)
		SRV.refusals[kind]++;
	gmxd__metrics_refusal(cr, kind);
	if (send(fd, &r, sizeof r, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		gmxd_log("refusal not delivered: %s", strerror(errno));
	gmxd_log("refused a connection: %s", r.reason);
	drain_close(fd);
}

/* The container c runs in, from /proc/PID/cgroup ("" outside one, or when unreadable). */
static void read_container(client_t *c)
{
	char path[64], text[4096];
	snprintf(path, sizeof path, "/proc/%d/cgroup", (int)c->pid);
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
	if (f)
		fclose(f);
	text[n] = 0;
	gmxd_container_id(text, c->container, sizeof c->container);
}

/* Registers the peer as a client: a shared region, two eventfds, a policy task, WELCOME. */
static void welcome(int fd, const struct ucred *cr, const gmx_msg_hello_t *h)
{
	int task = -1, live = 0, mine = 0, others = 0;
	for (int t = 0; t < GMX_MAX_TASKS; t++) {
		const client_t *o = &SRV.cl[t];
		if (o->used && !o->dead) {
			live++;
			mine += o->uid == cr->uid;
			others += !privileged(o->uid);
		}
		if (!o->used && task < 0)
			task = t;
	}
	long per_user = gmxd__clients_per_user(), open_to_all = SRV.cfg->max_clients - gmxd__clients_reserved();
	if (task < 0 || live >= SRV.cfg->max_clients) {
		gmxd__refuse(fd, cr, GMXD_REF_BUSY, EBUSY,
			     "the daemon serves %d clients already (max_clients %ld)", live,
			     SRV.cfg->max_clients);
		return;
	}
	if (!privileged(cr->uid) && mine >= per_user) {
		gmxd__refuse(fd, cr, GMXD_REF_BUSY, EBUSY,
			     "uid %d has %d clients already (max_clients_per_user %ld)", (int)cr->uid, mine,
			     per_user);
		return;
	}
	if (!privileged(cr->uid) && others >= open_to_all) {
		gmxd__refuse(fd, cr, GMXD_REF_BUSY, EBUSY,
			     "the daemon serves %d clients already; the last %ld of max_clients %ld are kept "
			     "for root and gpumuxd's user",
			     live, gmxd__clients_reserved(), SRV.cfg->max_clients);
		return;
	}
	int mfd = memfd_create("gpumux-client", MFD_CLOEXEC);
	int eu = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC), ed = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	void *reg = MAP_FAILED;
	/* Populated now: the loop reads every page of the rings as they wrap, and a first touch there
	 * (a page fault per 4 KiB, a trap into the kernel each) would land in its reads. */
	if (mfd >= 0 && ftruncate(mfd, sizeof(gmx_shm_region_t)) == 0)
		reg = mmap(NULL, sizeof(gmx_shm_region_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, mfd, 0);
	if (mfd < 0 || eu < 0 || ed < 0 || reg == MAP_FAILED) {
		gmxd_log("cannot set up a client's shared region: %s", strerror(errno));
		if (reg != MAP_FAILED)
			munmap(reg, sizeof(gmx_shm_region_t));
		if (mfd >= 0)
			close(mfd);
		if (eu >= 0)
			close(eu);
		if (ed >= 0)
			close(ed);
		gmxd__refuse(fd, cr, GMXD_REF_RESOURCES, ENOMEM, "the daemon could not set up shared memory");
		return;
	}
	client_t *c = &SRV.cl[task];
	memset(c, 0, sizeof *c);
	c->id = SRV.next_id + 1;
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
	read_container(c);
	gmxd__metrics_join(c);
	SRV.prof_ptr[c->task] = NULL;
	if (SRV.ops->flags & GMX_POLICY_PROFILES)
		SRV.prof_ptr[c->task] = gmxd__store_get(c->name); /* NULL: not measured */
	gmxd_mem_set_priority(SRV.mem, c->task, c->priority);
	gmxd__comb_task_added(c);
	int rc = SRV.ops->task_add(SRV.pol, c->task, c->priority);
	if (rc != 0) {
		close(mfd);
		close(eu);
		close(ed);
		munmap(reg, sizeof(gmx_shm_region_t));
		memset(c, 0, sizeof *c);
		gmxd_log("policy %s: task_add: %s", SRV.ops->name, strerror(-rc));
		gmxd__refuse(fd, cr, GMXD_REF_RESOURCES, rc == -ENOMEM ? ENOMEM : EBUSY,
			     "the policy could not take a new task: %s", strerror(-rc));
		return;
	}
	c->used = 1;
	gmxd__live(c, 1);
	SRV.next_id++;

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
	gmxd_log("client %u: pid %d uid %d name '%s' priority %d%s (task %u)", c->id, (int)c->pid,
		 (int)c->uid, c->name, c->priority, c->oversub ? " oversubscribed" : "", c->task);
	if (sent != (ssize_t)sizeof w) {
		gmxd__drop_client(c, "WELCOME not delivered");
		return;
	}
	gmxd__ep_add(fd, EV_SOCK, c->task);
	gmxd__ep_add(eu, EV_EFD, c->task);
}

void gmxd__first_message(int fd, const struct ucred *cr, const void *msg, size_t held, ssize_t n)
{
	if (n <= 0) { /* hung up (or failed) before saying anything: nobody to answer */
		close(fd);
		return;
	}
	gmx_msg_hello_t m;
	memset(&m, 0, sizeof m);
	memcpy(&m, msg, held < sizeof m ? held : sizeof m);
	const char *what = m.h.type == GMX_MSG_HELLO	    ? "HELLO"
			   : m.h.type == GMX_MSG_STATUS_REQ ? "STATUS_REQ"
			   : m.h.type == GMX_MSG_METRICS_REQ ? "METRICS_REQ"
							    : NULL;
	char why[160] = "";
	if ((size_t)n < sizeof m.h)
		snprintf(why, sizeof why, "%zd bytes, shorter than the %zu-byte header", n, sizeof m.h);
	else if (m.h.magic != GMX_PROTO_MAGIC)
		snprintf(why, sizeof why, "magic %#x, expected %#x", m.h.magic, GMX_PROTO_MAGIC);
	if (why[0]) {
		SRV.protocol_errors++;
		gmxd_log("pid %d uid %d: malformed first message (%s)", (int)cr->pid, (int)cr->uid, why);
		gmxd__refuse(fd, cr, GMXD_REF_MALFORMED, EPROTO, "malformed first message: %s", why);
		return;
	}
	if (m.h.version != GMX_PROTO_VERSION) {
		gmxd__refuse(fd, cr, GMXD_REF_VERSION, EPROTONOSUPPORT,
			     "protocol version %u; this gpumuxd speaks version %u", m.h.version,
			     GMX_PROTO_VERSION);
		return;
	}
	if (!what)
		snprintf(why, sizeof why, "message type %u, expected HELLO (%d), STATUS_REQ (%d) or METRICS_REQ (%d)",
			 m.h.type, GMX_MSG_HELLO, GMX_MSG_STATUS_REQ, GMX_MSG_METRICS_REQ);
	else if ((uint64_t)m.h.length != (uint64_t)n - sizeof m.h)
		snprintf(why, sizeof why, "the header says %u bytes follow, %zd did", m.h.length,
			 n - (ssize_t)sizeof m.h);
	else if (m.h.reserved != 0)
		snprintf(why, sizeof why, "reserved header field is %u, expected 0", m.h.reserved);
	else if ((m.h.type == GMX_MSG_STATUS_REQ || m.h.type == GMX_MSG_METRICS_REQ) && n != (ssize_t)sizeof m.h)
		snprintf(why, sizeof why, "%zd bytes; it has no body", n);
	else if (m.h.type == GMX_MSG_HELLO && n != (ssize_t)sizeof m)
		snprintf(why, sizeof why, "%zd bytes, expected %zu", n, sizeof m);
	else if (m.h.type == GMX_MSG_HELLO && (m.priority < 0 || m.priority >= GMX_PRIORITY_LEVELS))
		snprintf(why, sizeof why, "priority %d, expected 0 (highest) to %d", m.priority,
			 GMX_PRIORITY_LEVELS - 1);
	else if (m.h.type == GMX_MSG_HELLO && (m.flags & ~GMX_HELLO_OVERSUBSCRIBE))
		snprintf(why, sizeof why, "unknown flags %#x", m.flags & ~GMX_HELLO_OVERSUBSCRIBE);
	else if (m.h.type == GMX_MSG_HELLO && memchr(m.name, 0, sizeof m.name) == NULL)
		snprintf(why, sizeof why, "the name is not NUL-terminated within %d bytes", GMX_NAME_MAX);
	else if (m.h.type == GMX_MSG_HELLO && m.name[0] == 0)
		snprintf(why, sizeof why, "the name is empty");
	if (why[0]) {
		SRV.protocol_errors++;
		gmxd_log("pid %d uid %d: malformed first message (%s)", (int)cr->pid, (int)cr->uid, why);
		gmxd__refuse(fd, cr, GMXD_REF_MALFORMED, EPROTO, "malformed %s: %s",
			     what ? what : "first message", why);
		return;
	}
	/* The books as of the request: leased batches the loop would read up to GMXD_LEASE_IDLE_DRAIN_MS
	 * later count first. */
	if (m.h.type == GMX_MSG_STATUS_REQ || m.h.type == GMX_MSG_METRICS_REQ)
		gmxd__poll_rings();
	if (m.h.type == GMX_MSG_STATUS_REQ) {
		gmxd__status_reply(fd);
		drain_close(fd);
		return;
	}
	if (m.h.type == GMX_MSG_METRICS_REQ) {
		gmxd__metrics_reply(fd);
		drain_close(fd);
		return;
	}
	for (char *q = m.name; *q; q++)
		if ((unsigned char)*q < 0x20 || (unsigned char)*q > 0x7e)
			*q = '_';
	welcome(fd, cr, &m);
}

/* Reads fd's first message if it is there: 1 when answered (fd taken), 0 when nothing came
 * yet. */
static int try_first(int fd, const struct ucred *cr)
{
	union {
		gmx_msg_hello_t h;
		char raw[512];
	} m;
	/* MSG_TRUNC: the message's real length, even beyond the buffer. */
	ssize_t n = recv(fd, &m, sizeof m, MSG_DONTWAIT | MSG_TRUNC);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
		return 0;
	gmxd__first_message(fd, cr, &m, n > 0 ? ((size_t)n < sizeof m ? (size_t)n : sizeof m) : 0, n);
	return 1;
}

void gmxd__admit(int fd, const struct ucred *cr)
{
	if (!peer_allowed(cr)) {
		gmxd__refuse(fd, cr, GMXD_REF_NOT_ALLOWED, EACCES,
			     "uid %d (gid %d) is not allowed by gpumuxd's allow_users/allow_group",
			     (int)cr->uid, (int)cr->gid);
		return;
	}
	if (try_first(fd, cr))
		return;
	uint32_t mine = 0, slot = SRV.pend_max;
	for (uint32_t i = 0; i < SRV.pend_max; i++) {
		if (SRV.pend[i].fd >= 0)
			mine += SRV.pend[i].cr.uid == cr->uid;
		else if (slot == SRV.pend_max)
			slot = i;
	}
	uint32_t open_to_all = SRV.pend_max > GMXD_PENDING_RESERVE ? SRV.pend_max - GMXD_PENDING_RESERVE : 0;
	if (!privileged(cr->uid) && mine >= GMXD_PENDING_PER_UID) {
		gmxd__refuse(fd, cr, GMXD_REF_BUSY, EBUSY,
			     "uid %d has %u connections that have not said HELLO yet (at most %d per user)",
			     (int)cr->uid, mine, GMXD_PENDING_PER_UID);
		return;
	}
	if (slot == SRV.pend_max || (!privileged(cr->uid) && SRV.n_pend >= open_to_all)) {
		gmxd__refuse(fd, cr, GMXD_REF_BUSY, EBUSY,
			     "%u connections are waiting for their first message already", SRV.n_pend);
		return;
	}
	SRV.pend[slot] = (pending_t){.fd = fd, .since = gmxd__now_ns(), .cr = *cr};
	SRV.n_pend++;
	gmxd__ep_add(fd, EV_PENDING, slot);
}

void gmxd__pending_read(uint32_t idx)
{
	if (idx >= SRV.pend_max || SRV.pend[idx].fd < 0)
		return;
	pending_t p = SRV.pend[idx];
	gmxd__ep_del(p.fd);
	SRV.pend[idx].fd = -1;
	SRV.n_pend--;
	if (try_first(p.fd, &p.cr))
		return;
	SRV.pend[idx] = p; /* woken for nothing: keep waiting */
	SRV.n_pend++;
	gmxd__ep_add(p.fd, EV_PENDING, idx);
}

void gmxd__pending_expire(int64_t now)
{
	for (uint32_t i = 0; i < SRV.pend_max; i++)
		if (SRV.pend[i].fd >= 0 && now - SRV.pend[i].since > GMXD_PENDING_TIMEOUT_NS) {
			int fd = SRV.pend[i].fd;
			struct ucred cr_ = SRV.pend[i].cr;
			gmxd__ep_del(fd);
			SRV.pend[i].fd = -1;
			SRV.n_pend--;
			gmxd__refuse(fd, &cr_, GMXD_REF_TIMEOUT, ETIMEDOUT,
				     "nothing was said within %lld ms of connecting",
				     GMXD_PENDING_TIMEOUT_NS / 1000000);
		}
}
