/*
 * libFuzzer target: gpumuxd's whole message handling, driven without a loop.
 *
 * Each input is a script of operations on one daemon (daemon/server_internal.h's seam: the
 * daemon takes connected descriptors and credentials, and a clock of ours): connections from
 * allowed, unprivileged and disallowed uids saying HELLO (well-formed or not), STATUS_REQ,
 * garbage or nothing; ring entries of every type with chosen fields (NOTICE, RANGE, COMPLETE,
 * ALLOC, FREE, MIG_DONE, HOST_WAIT, unknown types), corrupt ring indices, data on the socket
 * after WELCOME, hang-ups, the clock moving (slices, liveness cut-offs, handshake timeouts),
 * the policy's timer, and a client that answers its grants and migration orders as the
 * interposer does. The policy and the tunables come from the first bytes.
 *
 * After every operation the daemon's books must balance (gmxd__check: commands against
 * counts, allocations against the planner, evictions, pending connections, refusals,
 * gmxd_mem_check). Every STATUS reply must be one JSON object. At the end every client hangs
 * up: no client slot, planned byte, queued action or pending connection may remain, the
 * daemon must hold no descriptor it did not before, and (LeakSanitizer) no memory.
 */
#include "server_internal.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAXC 80 /* connections the harness keeps (welcomed or pending) */

typedef struct {
	int fd; /* our end; -1 unused */
	int welcomed;
	uint32_t id;
	gmx_shm_region_t *r;
	int efd_up, efd_down;
	uint64_t next_seq;
	uint32_t lease, leased;	   /* the lease acknowledged (bound), leased commands in flight */
	uint64_t last_leased;	   /* the last seq released under a lease */
	uint64_t lseq[8];	   /* leased commands in flight */
	uint64_t al_ptr[16], al_size[16]; /* allocations announced (as the client believes) */
	int nal, al_next;
} conn_t;

static conn_t conns[MAXC];
static int64_t clock_ns;
static const uint8_t *in;
static size_t in_len, in_off;

static int64_t fake_clock(void)
{
	return clock_ns;
}

static uint8_t u8(void)
{
	return in_off < in_len ? in[in_off++] : 0;
}

static uint16_t u16(void)
{
	return (uint16_t)(u8() | (u8() << 8));
}

static uint64_t u64(void)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)u8() << (8 * i);
	return v;
}

static void die(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz_daemon: %s: %s\n", what, detail);
	abort();
}

static void check_books(const char *after)
{
	char err[512];
	if (gmxd__check(err, sizeof err) != 0) {
		char m[700];
		snprintf(m, sizeof m, "after %s: %s", after, err);
		die("books do not balance", m);
	}
}

static long open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	long n = 0;
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory itself */
}

/* The task index of welcomed connection c, or -1 once the daemon dropped it. */
static int task_of(const conn_t *c)
{
	for (int t = 0; t < GMX_MAX_TASKS; t++)
		if (SRV.cl[t].used && !SRV.cl[t].dead && SRV.cl[t].id == c->id)
			return t;
	return -1;
}

static void conn_close(conn_t *c)
{
	if (c->fd < 0)
		return;
	if (c->welcomed) {
		munmap(c->r, sizeof(gmx_shm_region_t));
		close(c->efd_up);
		close(c->efd_down);
	}
	close(c->fd);
	memset(c, 0, sizeof *c);
	c->fd = -1;
}

/* Reads what the daemon sent on c (WELCOME with descriptors, REFUSED, STATUS). */
static void conn_read(conn_t *c)
{
	static char b[GMX_CTRL_MAX + 1];
	for (;;) {
		char cbuf[CMSG_SPACE(3 * sizeof(int))];
		struct iovec iov = {.iov_base = b, .iov_len = GMX_CTRL_MAX};
		struct msghdr mh = {
		    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
		ssize_t n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n <= 0)
			return;
		int fds[3] = {-1, -1, -1}, nfd = 0;
		for (struct cmsghdr *m = CMSG_FIRSTHDR(&mh); m; m = CMSG_NXTHDR(&mh, m))
			if (m->cmsg_level == SOL_SOCKET && m->cmsg_type == SCM_RIGHTS) {
				nfd = (int)((m->cmsg_len - CMSG_LEN(0)) / sizeof(int));
				memcpy(fds, CMSG_DATA(m), (size_t)(nfd < 3 ? nfd : 3) * sizeof(int));
			}
		const gmx_msg_hdr_t *h = (const gmx_msg_hdr_t *)b;
		if (n < (ssize_t)sizeof *h || h->magic != GMX_PROTO_MAGIC || h->length != (uint32_t)n - sizeof *h)
			die("reply", "a message whose header does not match its length");
		if (h->type == GMX_MSG_WELCOME) {
			if (n != (ssize_t)sizeof(gmx_msg_welcome_t) || nfd != 3 || c->welcomed)
				die("reply", "a WELCOME without its three descriptors");
			const gmx_msg_welcome_t *w = (const gmx_msg_welcome_t *)b;
			c->r = mmap(NULL, sizeof(gmx_shm_region_t), PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
			close(fds[0]);
			if (c->r == MAP_FAILED)
				die("mmap", strerror(errno));
			c->efd_up = fds[1];
			c->efd_down = fds[2];
			c->id = w->client_id;
			c->welcomed = 1;
			c->next_seq = 1;
			c->lease = c->leased = 0;
			c->last_leased = 0;
			continue;
		}
		for (int i = 0; i < nfd && i < 3; i++)
			close(fds[i]);
		if (nfd)
			die("reply", "descriptors with something else than a WELCOME");
		if (h->type == GMX_MSG_STATUS) {
			if (b[n - 1] != 0)
				die("STATUS", "not NUL-terminated");
			json_error_t je;
			json_t *j = json_loads(b + sizeof *h, 0, &je);
			if (!j || !json_is_object(j))
				die("STATUS is not one JSON object", je.text);
			json_decref(j);
		} else if (h->type == GMX_MSG_REFUSED) {
			const gmx_msg_refused_t *r = (const gmx_msg_refused_t *)b;
			if (n != (ssize_t)sizeof *r || !memchr(r->reason, 0, sizeof r->reason) || !r->reason[0] ||
			    r->error <= 0)
				die("REFUSED", "no reason or no error");
		} else {
			die("reply", "an unknown message type");
		}
	}
}

static conn_t *free_conn(void)
{
	for (int i = 0; i < MAXC; i++)
		if (conns[i].fd < 0)
			return &conns[i];
	return NULL;
}

static conn_t *pick(int welcomed)
{
	uint8_t k = u8();
	for (int i = 0; i < MAXC; i++) {
		conn_t *c = &conns[(k + i) % MAXC];
		if (c->fd >= 0 && c->welcomed == welcomed)
			return c;
	}
	return NULL;
}

static const struct ucred creds[4] = {{.pid = 1, .uid = 0, .gid = 0},
				      {.pid = 2, .uid = 1000, .gid = 1000},
				      {.pid = 3, .uid = 1001, .gid = 1001},
				      {.pid = 4, .uid = 2000, .gid = 2000}}; /* not allowed */

/* A first message, well-formed or broken in one way; its length in *len (0: say nothing). */
static void first_message(char *buf, size_t *len)
{
	gmx_msg_hello_t h;
	memset(&h, 0, sizeof h);
	gmx_msg_init(&h.h, GMX_MSG_HELLO, sizeof h);
	h.priority = u8() % 10;
	h.flags = u8() & 1 ? GMX_HELLO_OVERSUBSCRIBE : 0;
	h.pid = 42;
	uint8_t nm = u8();
	snprintf(h.name, sizeof h.name, "t%d", nm % 8);
	*len = sizeof h;
	uint8_t how = u8();
	switch (how % 24) {
	case 0:
		h.h.magic ^= u8() | 1;
		break;
	case 1:
		h.h.version = u8();
		break;
	case 2:
		h.h.length = (uint32_t)u64();
		break;
	case 3:
		memset(h.name, 'A', sizeof h.name);
		break;
	case 4:
		h.name[0] = 0;
		break;
	case 5:
		h.priority = (int8_t)u8();
		break;
	case 6:
		h.flags = (uint32_t)u64();
		break;
	case 7:
		*len = u8() % sizeof h;
		break;
	case 8:
		gmx_msg_init(&h.h, GMX_MSG_STATUS_REQ, sizeof h.h);
		*len = sizeof h.h;
		break;
	case 9:
		gmx_msg_init(&h.h, GMX_MSG_STATUS_REQ, sizeof h.h);
		h.h.length = (uint32_t)u64();
		*len = sizeof h.h + (u8() & 1 ? 16 : 0);
		break;
	case 10:
		h.h.type = u8();
		break;
	case 11:
		h.h.reserved = u8() | 1;
		break;
	case 12:
		*len = 0; /* silent: pending */
		break;
	case 13:
		for (size_t i = 0; i < sizeof h.name; i++)
			h.name[i] = (char)u8();
		h.name[sizeof h.name - 1] = 0;
		break;
	default:
		break;
	}
	memcpy(buf, &h, sizeof h);
	if (how % 24 == 14) { /* longer than any first message */
		memset(buf + sizeof h, 0x5a, 512);
		*len = sizeof h + 512;
	}
}

static void op_connect(void)
{
	conn_t *c = free_conn();
	const struct ucred *cr = &creds[u8() % 4];
	char buf[sizeof(gmx_msg_hello_t) + 512];
	size_t len;
	first_message(buf, &len);
	if (!c)
		return;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
		die("socketpair", strerror(errno));
	if (len && send(sv[0], buf, len, MSG_NOSIGNAL) != (ssize_t)len)
		die("send", strerror(errno));
	c->fd = sv[0];
	gmxd__admit(sv[1], cr); /* takes sv[1] */
	conn_read(c);
}

/* A silent connection speaks now (or hangs up) and the daemon is told it is readable. */
static void op_pending_speak(void)
{
	char buf[sizeof(gmx_msg_hello_t) + 512];
	size_t len;
	first_message(buf, &len);
	uint8_t hang = u8() & 3;
	conn_t *c = pick(0);
	if (!c)
		return;
	if (hang == 0) {
		shutdown(c->fd, SHUT_WR);
	} else if (len && send(c->fd, buf, len, MSG_NOSIGNAL) != (ssize_t)len) {
		conn_close(c); /* the daemon closed it already */
		return;
	}
	for (uint32_t i = 0; i < SRV.pend_max; i++)
		if (SRV.pend[i].fd >= 0)
			gmxd__pending_read(i); /* also woken for nothing: it must keep waiting */
	conn_read(c);
}

static void push_up(conn_t *c, const gmx_ring_entry_t *e)
{
	int wake;
	if (gmx_ring_push(&c->r->up, e, &wake) != 0)
		gmxd__poll_rings();
}

/* An address or a size: structured most of the time, raw otherwise. */
static uint64_t addr(void)
{
	uint8_t m = u8();
	if (m & 0x80)
		return u64();
	return ((uint64_t)(m & 0xf) << 32) + ((uint64_t)u8() << 21) + (m & 0x40 ? (uint64_t)u16() : 0);
}

static uint64_t size(void)
{
	uint8_t m = u8();
	if (m & 0x80)
		return u64();
	return ((uint64_t)u8() + (m & 0x40 ? 0 : 1)) << (m % 34);
}

static void op_push(void)
{
	conn_t *c = pick(1);
	uint8_t t = u8();
	gmx_ring_entry_t e = {.type = t % 11u, .a = u8() % 11u};
	uint8_t sq = u8();
	e.seq = sq & 0x80 ? u64() : (sq & 0x7f);
	e.x = addr();
	e.y = size();
	if (t >= 0xf0)
		e.type = t; /* unknown types */
	if (e.type == 0)
		e.type = GMX_UP_NOTICE;
	if (!c)
		return;
	push_up(c, &e);
	gmxd__poll_rings();
}

/* A well-behaved burst: ranges and notices of new seqs. */
static void op_notices(void)
{
	conn_t *c = pick(1);
	uint8_t n = u8() % 40, nr = u8() % 4, kind = u8() % 9;
	uint64_t base = addr(), len = size();
	if (!c)
		return;
	for (uint8_t i = 0; i < n; i++) {
		for (uint8_t k = 0; k < nr; k++) {
			gmx_ring_entry_t r = {.type = GMX_UP_RANGE, .seq = c->next_seq, .x = base + k * len, .y = len};
			push_up(c, &r);
		}
		gmx_ring_entry_t e = {.type = GMX_UP_NOTICE, .a = kind, .seq = c->next_seq++, .x = 7 + i % 3};
		push_up(c, &e);
	}
	gmxd__poll_rings();
}

/* The client applies its down ring as the interposer does: completes grants (or not) and
 * acknowledges migration orders (or not). */
static void op_drain(void)
{
	conn_t *c = pick(1);
	uint8_t mode = u8();
	if (!c)
		return;
	gmx_ring_entry_t e;
	int k = 0;
	while (gmx_ring_pop(&c->r->down, &e) == 1 && k++ < 4096) {
		gmx_ring_entry_t up = {0};
		if (e.type == GMX_DOWN_GRANT && !(mode & 1))
			up = (gmx_ring_entry_t){.type = GMX_UP_COMPLETE, .seq = e.seq};
		else if (e.type == GMX_DOWN_MIGRATE && !(mode & 2))
			up = (gmx_ring_entry_t){.type = GMX_UP_MIG_DONE, .a = e.a, .seq = e.seq, .x = e.x};
		else if (e.type == GMX_DOWN_LEASE && !(mode & 8)) {
			up = (gmx_ring_entry_t){.type = GMX_UP_LEASE_ACK, .seq = e.seq, .x = c->last_leased};
			c->lease = e.a;
		} else if (e.type != GMX_DOWN_GRANT && e.type != GMX_DOWN_MIGRATE && e.type != GMX_DOWN_LEASE)
			die("down ring", "an entry of unknown type");
		if (up.type)
			push_up(c, &up);
		if (mode & 4)
			gmxd__poll_rings();
	}
	gmxd__poll_rings();
}

/* A well-behaved client under its lease: releases within the bound (as its book says), then
 * completes some of them; with the high bit, one release too many (it is cut off). */
static void op_leased(void)
{
	conn_t *c = pick(1);
	uint8_t n = u8(), done = u8();
	if (!c)
		return;
	for (uint8_t i = 0; i < (n & 7); i++) {
		if (c->leased >= c->lease && !(n & 0x80))
			break;
		gmx_ring_entry_t e = {.type = GMX_UP_RELEASED, .a = 0, .seq = c->next_seq, .x = 9, .y = (uint64_t)clock_ns};
		push_up(c, &e);
		c->last_leased = c->next_seq;
		if (c->leased < 8)
			c->lseq[c->leased++] = c->next_seq;
		c->next_seq++;
	}
	while (c->leased && done--) {
		gmx_ring_entry_t e = {.type = GMX_UP_COMPLETE, .seq = c->lseq[--c->leased], .y = (uint64_t)clock_ns};
		push_up(c, &e);
	}
	gmxd__poll_rings();
}

/* An allocation of a size the planner can plan for, at an address of its own. */
static void op_alloc(void)
{
	conn_t *c = pick(1);
	uint8_t mb = u8(), extra = u8();
	if (!c || c->nal >= 16)
		return;
	uint64_t size = ((uint64_t)(mb % 96) << 20) + (extra & 1 ? (uint64_t)extra << 10 : 0);
	uint64_t ptr = 0x7f0000000000ull + ((uint64_t)c->al_next++ << 30);
	gmx_ring_entry_t e = {.type = GMX_UP_ALLOC, .x = ptr, .y = size};
	push_up(c, &e);
	c->al_ptr[c->nal] = ptr;
	c->al_size[c->nal++] = size;
	gmxd__poll_rings();
}

/* Frees one allocation the client announced. */
static void op_free(void)
{
	conn_t *c = pick(1);
	uint8_t k = u8();
	if (!c || !c->nal)
		return;
	int i = k % c->nal;
	gmx_ring_entry_t e = {.type = GMX_UP_FREE, .x = c->al_ptr[i]};
	push_up(c, &e);
	c->al_ptr[i] = c->al_ptr[c->nal - 1];
	c->al_size[i] = c->al_size[--c->nal];
	gmxd__poll_rings();
}

/* Commands whose predicted ranges lie in the client's allocations. */
static void op_predicted(void)
{
	conn_t *c = pick(1);
	uint8_t n = 1 + u8() % 16, nr = u8() % 5, off = u8(), len = u8();
	if (!c)
		return;
	for (uint8_t i = 0; i < n; i++) {
		for (uint8_t k = 0; c->nal && k < nr; k++) {
			int a = (off + k + i) % c->nal;
			uint64_t o = c->al_size[a] ? ((uint64_t)off << 20) % c->al_size[a] : 0;
			uint64_t l = ((uint64_t)len + 1) << 18;
			gmx_ring_entry_t r = {.type = GMX_UP_RANGE, .seq = c->next_seq, .x = c->al_ptr[a] + o, .y = l};
			push_up(c, &r);
		}
		gmx_ring_entry_t e = {.type = GMX_UP_NOTICE, .a = (uint32_t)(i % 3), .seq = c->next_seq++, .x = 3 + i % 5};
		push_up(c, &e);
	}
	gmxd__poll_rings();
}

static void op_hangup(void)
{
	conn_t *c = pick(u8() & 1);
	if (!c)
		return;
	int t = c->welcomed ? task_of(c) : -1;
	conn_close(c);
	if (t >= 0)
		gmxd__sock_event((uint32_t)t);
	for (uint32_t i = 0; i < SRV.pend_max; i++)
		if (SRV.pend[i].fd >= 0)
			gmxd__pending_read(i);
}

static void op_sockdata(void)
{
	conn_t *c = pick(1);
	uint8_t n = u8();
	if (!c)
		return;
	char b[256];
	memset(b, n, sizeof b);
	send(c->fd, b, (size_t)n + 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	int t = task_of(c);
	if (t >= 0)
		gmxd__sock_event((uint32_t)t);
}

static void op_corrupt(void)
{
	conn_t *c = pick(1);
	uint8_t what = u8();
	uint32_t v = u16();
	if (!c)
		return;
	if (what & 1)
		__atomic_store_n(&c->r->up.tail, c->r->up.head + v, __ATOMIC_RELEASE);
	else
		__atomic_store_n(&c->r->down.head, c->r->down.head + v, __ATOMIC_RELEASE);
	gmxd__poll_rings();
}

static void op_time(void)
{
	uint8_t scale = u8();
	uint16_t v = u16();
	clock_ns += (int64_t)v * (scale & 1 ? 1000000 : 1000); /* up to 65 s or 65 ms */
	gmxd__tick(clock_ns);
	if (SRV.timer_at && SRV.timer_at <= clock_ns) {
		SRV.timer_at = 0;
		gmxd__timer_fired();
	}
}

static void op_status(void)
{
	conn_t *c = free_conn();
	const struct ucred *cr = &creds[u8() % 4];
	if (!c)
		return;
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
		die("socketpair", strerror(errno));
	gmx_msg_hdr_t h;
	gmx_msg_init(&h, GMX_MSG_STATUS_REQ, sizeof h);
	send(sv[0], &h, sizeof h, MSG_NOSIGNAL);
	c->fd = sv[0];
	gmxd__admit(sv[1], cr);
	conn_read(c);
	conn_close(c);
}

static void setup(gmxd_config_t *cfg)
{
	static const char *pol[] = {"timeslice", "fikit", "mps", "streamprio", "timeline", "exclusive"};
	gmxd_config_default(cfg);
	uint8_t p = u8(), t = u8();
	snprintf(cfg->policy, sizeof cfg->policy, "%s", pol[p % 6]);
	if (!gmx_sched_find(cfg->policy))
		snprintf(cfg->policy, sizeof cfg->policy, "timeslice");
	cfg->profile_dir[0] = 0; /* no store: nothing on disk */
	cfg->slice_us = 10 + (t & 0x3f) * 100;
	cfg->inflight = 1 + (t >> 6);
	cfg->max_clients = 1 + u8() % GMXD_MAX_CLIENTS_MAX;
	cfg->max_clients_per_user = u8() % 4;
	cfg->unresponsive_ms = 100 + u8() * 10;
	cfg->device_memory_mb = 1 + u8();
	cfg->oversubscribe_default = u8() == 0xff;
	cfg->allow_uid[0] = 1000;
	cfg->allow_uid[1] = 1001;
	cfg->n_allow_uid = 2;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	signal(SIGPIPE, SIG_IGN);
	gmxd_log_to(NULL);
	for (int i = 0; i < MAXC; i++)
		conns[i].fd = -1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size_)
{
	in = data;
	in_len = size_;
	in_off = 0;
	clock_ns = 1000000000LL;
	long fds_before = open_fds();
	gmxd_config_t cfg;
	setup(&cfg);
	if (gmxd__init(&cfg, fake_clock) != 0)
		die("gmxd__init", cfg.policy);
	check_books("init");
	static const char *names[] = {"connect", "push", "notices", "drain",	"hangup", "sockdata", "corrupt",
				      "time",	 "status", "pending", "alloc", "free",	 "predicted", "leased"};
	for (int ops = 0; in_off < in_len && ops < 4096; ops++) {
		uint8_t op = u8() % 14;
		switch (op) {
		case 0:
			op_connect();
			break;
		case 1:
			op_push();
			break;
		case 2:
			op_notices();
			break;
		case 3:
			op_drain();
			break;
		case 4:
			op_hangup();
			break;
		case 5:
			op_sockdata();
			break;
		case 6:
			op_corrupt();
			break;
		case 7:
			op_time();
			break;
		case 8:
			op_status();
			break;
		case 9:
			op_pending_speak();
			break;
		case 10:
			op_alloc();
			break;
		case 11:
			op_free();
			break;
		case 12:
			op_predicted();
			break;
		case 13:
			op_leased();
			break;
		}
		check_books(names[op]);
	}
	/* Everybody leaves: hang-ups, then time for the silent connections to be refused. */
	for (int i = 0; i < MAXC; i++) {
		conn_t *c = &conns[i];
		int t = c->fd >= 0 && c->welcomed ? task_of(c) : -1;
		conn_close(c);
		if (t >= 0)
			gmxd__sock_event((uint32_t)t);
	}
	clock_ns += GMXD_PENDING_TIMEOUT_NS + 1;
	gmxd__tick(clock_ns);
	check_books("every client left");
	for (int t = 0; t < GMX_MAX_TASKS; t++)
		if (SRV.cl[t].used) {
			char m[200];
			snprintf(m, sizeof m, "slot %d (client %u) still used by %u commands after every client left", t,
				 SRV.cl[t].id, SRV.cl[t].refs);
			die("accounts", m);
		}
	if (SRV.n_pend || SRV.act_head || SRV.deferred || SRV.evicts_outstanding ||
	    gmxd_mem_resident(SRV.mem, GMX_MAX_TASKS))
		die("accounts", "pending connections, queued actions, evictions or resident bytes left");
	gmxd__fini();
	long fds_after = open_fds();
	if (fds_after != fds_before) {
		char m[100];
		snprintf(m, sizeof m, "%ld descriptors open before, %ld after", fds_before, fds_after);
		die("descriptor leak", m);
	}
	return 0;
}
