/*
 * Soak benchmark of gpumuxd: N protocol-level clients connect, allocate, announce and complete
 * commands (with predicted ranges, host waits and migration orders), and are killed with
 * SIGKILL at random points, then reconnect, for a configurable time. The daemon's RSS and
 * descriptor count are sampled throughout; at the end every client is killed and the daemon's
 * accounts must return to zero.
 *
 *   gmx_soak --daemon PATH [--clients N] [--duration S] [--policy NAME] [--priority P]
 *            [--kill-ms MS] [--device-mb MB] [--seed N] [--samples K] [--wedge-ms MS]
 *            [--json FILE] [--no-rss-check]
 *
 * Each session draws its priority (0..9), or takes --priority P. The default policy, fikit,
 * bounds how long a queue head waits (starve_ns, 100 ms), so a command not granted for
 * --wedge-ms is a fault; timeslice serves the best level with work only, so with mixed
 * priorities its lower levels may wait for as long as the higher ones are busy (run it with
 * --priority P).
 *
 * The clients speak the protocol of daemon/gmx_proto.h directly (no CUDA, no interposer), so
 * thousands of sessions and kills fit in a minute on two cores. Every --kill-ms (mean,
 * exponential) one client, chosen at random, is killed wherever it is: before its HELLO,
 * holding granted work, with evictions unacknowledged, mid-allocation; it is started again at
 * once. A client also ends a session by itself now and then (cleanly or abruptly).
 *
 * Checked (exit 1 when one fails; the figures are printed either way):
 *  - no client wedged: every command announced is granted within --wedge-ms (default 10000);
 *  - no well-behaved client was cut off and no protocol error was counted by the daemon;
 *  - at the end, with every client gone: no client slot, command, allocated or resident byte,
 *    outstanding eviction or queued action left (status "accounts"), and the daemon holds as
 *    many descriptors as before the first client;
 *  - RSS flat: the largest RSS after the warm-up (the first fifth, but at least 5 s or half the
 *    run, whichever is shorter: the allocator's pools fill more slowly on a loaded machine)
 *    exceeds the RSS at the end of the warm-up by at most max(2 MiB, 5%) (--no-rss-check: reported only, for sanitizer builds
 *    whose allocator keeps freed memory in quarantine).
 * Output: a table (one row per sample), a summary, and one JSON line (also to --json FILE).
 */
#define _GNU_SOURCE
#include "gmx_proto.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <ftw.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLIENTS 60
#define MAX_ALLOCS 12
#define MAX_SAMPLES 4096

/* What each client process reports to the parent (shared memory). */
typedef struct {
	uint64_t sessions, refused, grants, completions, allocs, frees, migrations, cut;
	uint64_t wedged, wedged_prio[10];
	int64_t waiting_since; /* a command announced and not granted since (0: none) */
	char wedge_why[128];
} client_stats_t;

typedef struct {
	double t_s;
	long rss_kb, fds;
	long clients, grants;
} sample_t;

static const char *g_dir;
static long g_wedge_ms = 10000;
static int g_priority = -1; /* every client's, or -1: each session draws one */

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_us(long us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
	nanosleep(&ts, NULL);
}

/* xorshift64*: each process has its own stream. */
static uint64_t rng_state;
static uint64_t rnd(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545F4914F6CDD1Dull;
}
static uint32_t rnd_below(uint32_t n)
{
	return (uint32_t)(rnd() % n);
}

static int connect_daemon(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s", g_dir, GMX_SOCKET_NAME);
	int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s >= 0 && connect(s, (struct sockaddr *)&sa, sizeof sa) != 0) {
		close(s);
		s = -1;
	}
	return s;
}

/* The daemon's status as JSON, or NULL. */
static json_t *status(void)
{
	int s = connect_daemon();
	if (s < 0)
		return NULL;
	gmx_msg_hdr_t h;
	gmx_msg_init(&h, GMX_MSG_STATUS_REQ, sizeof h);
	static char buf[GMX_CTRL_MAX + 1];
	ssize_t n = -1;
	struct pollfd p = {.fd = s, .events = POLLIN};
	if (send(s, &h, sizeof h, MSG_NOSIGNAL) == (ssize_t)sizeof h && poll(&p, 1, 5000) == 1)
		n = recv(s, buf, GMX_CTRL_MAX, 0);
	close(s);
	if (n <= (ssize_t)sizeof h || ((gmx_msg_hdr_t *)buf)->type != GMX_MSG_STATUS)
		return NULL;
	buf[n] = 0;
	return json_loads(buf + sizeof h, 0, NULL);
}

static long jint(json_t *o, const char *path)
{
	char tmp[128];
	snprintf(tmp, sizeof tmp, "%s", path);
	json_t *v = o;
	for (char *save, *k = strtok_r(tmp, ".", &save); k && v; k = strtok_r(NULL, ".", &save))
		v = json_object_get(v, k);
	return v && json_is_integer(v) ? (long)json_integer_value(v) : -1;
}

/* ---- one client process ---- */

typedef struct {
	int s, efd_up, efd_down, priority;
	gmx_shm_region_t *r;
	client_stats_t *st;
} sess_t;

static void push(sess_t *x, uint32_t type, uint32_t a, uint64_t seq, uint64_t ptr, uint64_t len)
{
	gmx_ring_entry_t e = {.type = type, .a = a, .seq = seq, .x = ptr, .y = len};
	int wake = 0;
	while (gmx_ring_push(&x->r->up, &e, &wake) != 0)
		sleep_us(50); /* the daemon drains it */
	uint64_t one = 1;
	if (wake && write(x->efd_up, &one, sizeof one) < 0 && errno != EAGAIN)
		_exit(3);
}

/* Applies the down ring: grants are counted in *granted (by seq, window of 64), migration
 * orders acknowledged. 0, or -1 when the daemon hung up. Waits up to ms for something. */
static int drain(sess_t *x, uint64_t base, uint64_t *granted_mask, int ms)
{
	gmx_ring_entry_t e;
	int got = 0, r;
	while ((r = gmx_ring_pop(&x->r->down, &e)) == 1) {
		got = 1;
		if (e.type == GMX_DOWN_GRANT && e.seq >= base && e.seq < base + 64)
			*granted_mask |= 1ull << (e.seq - base);
		else if (e.type == GMX_DOWN_MIGRATE) {
			x->st->migrations++;
			push(x, GMX_UP_MIG_DONE, e.a, e.seq, e.x, 0);
		}
	}
	if (r < 0)
		return -1;
	if (got || ms == 0)
		return 0;
	if (gmx_ring_prepare_sleep(&x->r->down)) {
		__atomic_store_n(&x->r->down.waiting, 0, __ATOMIC_RELAXED);
		return 0;
	}
	struct pollfd p[2] = {{.fd = x->efd_down, .events = POLLIN}, {.fd = x->s, .events = POLLIN}};
	int n = poll(p, 2, ms);
	__atomic_store_n(&x->r->down.waiting, 0, __ATOMIC_RELAXED);
	if (n > 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR)))
		return -1; /* nothing more is said on the socket after WELCOME: a hang-up */
	if (n > 0 && (p[0].revents & POLLIN)) {
		uint64_t v;
		if (read(x->efd_down, &v, sizeof v) < 0 && errno != EAGAIN)
			return -1;
	}
	return 0;
}

/* HELLO and WELCOME: 1 when welcomed, 0 refused (or no reply), -1 no daemon. */
static int open_session(sess_t *x, int idx, uint32_t flags)
{
	x->s = connect_daemon();
	if (x->s < 0)
		return -1;
	gmx_msg_hello_t h;
	memset(&h, 0, sizeof h);
	gmx_msg_init(&h.h, GMX_MSG_HELLO, sizeof h);
	h.priority = x->priority = g_priority >= 0 ? g_priority : (int32_t)rnd_below(10 /* 0 (highest) .. 9 */);
	h.flags = flags;
	h.pid = getpid();
	snprintf(h.name, sizeof h.name, "soak%d", idx);
	if (rnd_below(20) == 0) { /* sometimes killed (or gone) before saying anything */
		if (rnd_below(2))
			_exit(0);
		close(x->s);
		return 0;
	}
	if (send(x->s, &h, sizeof h, MSG_NOSIGNAL) != (ssize_t)sizeof h)
		return 0;
	union {
		gmx_msg_welcome_t w;
		gmx_msg_refused_t r;
	} m;
	char cbuf[CMSG_SPACE(3 * sizeof(int))];
	struct iovec iov = {.iov_base = &m, .iov_len = sizeof m};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf};
	struct pollfd p = {.fd = x->s, .events = POLLIN};
	ssize_t n = poll(&p, 1, 5000) == 1 ? recvmsg(x->s, &mh, MSG_CMSG_CLOEXEC) : -1;
	struct cmsghdr *c = n > 0 ? CMSG_FIRSTHDR(&mh) : NULL;
	if (n != (ssize_t)sizeof m.w || m.w.h.type != GMX_MSG_WELCOME || !c || c->cmsg_type != SCM_RIGHTS ||
	    c->cmsg_len != CMSG_LEN(3 * sizeof(int))) {
		x->st->refused++;
		close(x->s);
		return 0;
	}
	int fds[3];
	memcpy(fds, CMSG_DATA(c), sizeof fds);
	x->r = mmap(NULL, sizeof(gmx_shm_region_t), PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	close(fds[0]);
	x->efd_up = fds[1];
	x->efd_down = fds[2];
	if (x->r == MAP_FAILED)
		_exit(4);
	x->st->sessions++;
	return 1;
}

static void close_session(sess_t *x)
{
	munmap(x->r, sizeof(gmx_shm_region_t));
	close(x->efd_up);
	close(x->efd_down);
	close(x->s);
}

/* One session: allocations, batches of commands (ranges, notices, completions), host waits,
 * frees; ends by itself after a random number of batches. Returns when the session ended. */
static void session(sess_t *x, int oversub, uint64_t *seq)
{
	struct {
		uint64_t ptr, size;
	} al[MAX_ALLOCS];
	int nal = 0;
	const uint64_t base_ptr = 0x7f0000000000ull;
	int batches = 5 + (int)rnd_below(200);
	for (int b = 0; b < batches; b++) {
		/* Allocations come and go (oversubscribed clients report them). */
		if (oversub && nal < MAX_ALLOCS && rnd_below(3) == 0) {
			uint64_t size = ((uint64_t)1 + rnd_below(48)) << 20;
			size += rnd_below(2) ? rnd_below(4096) : 0;
			uint64_t ptr = base_ptr + ((uint64_t)rnd_below(1u << 16) << 30);
			int clash = 0;
			for (int i = 0; i < nal; i++)
				clash |= al[i].ptr == ptr;
			if (!clash) {
				push(x, GMX_UP_ALLOC, 0, 0, ptr, size);
				al[nal].ptr = ptr;
				al[nal++].size = size;
				x->st->allocs++;
			}
		}
		if (nal > 0 && rnd_below(5) == 0) {
			int i = (int)rnd_below((uint32_t)nal);
			push(x, GMX_UP_FREE, 0, 0, al[i].ptr, 0);
			al[i] = al[--nal];
			x->st->frees++;
		}
		/* A batch of commands: ranges (half of them predicted) then the notice. */
		int k = 1 + (int)rnd_below(8);
		uint64_t base = *seq, granted = 0, done = 0;
		for (int i = 0; i < k; i++) {
			uint32_t kind = rnd_below(GMX_CMD_KIND_COUNT_PROTO);
			if (oversub && nal > 0 && rnd_below(2)) {
				int nr = 1 + (int)rnd_below(3);
				for (int j = 0; j < nr; j++) {
					int a = (int)rnd_below((uint32_t)nal);
					uint64_t off = rnd_below((uint32_t)(al[a].size >> 12)) << 12;
					uint64_t len = 1 + rnd_below((uint32_t)(al[a].size - off));
					push(x, GMX_UP_RANGE, 0, *seq, al[a].ptr + off, len);
				}
			}
			push(x, GMX_UP_NOTICE, kind, (*seq)++, rnd_below(16), 0);
		}
		int64_t since = now_ns();
		x->st->waiting_since = since;
		while (done != ((k == 64 ? 0 : (1ull << k)) - 1)) {
			if (drain(x, base, &granted, 100) < 0) {
				x->st->cut++; /* hung up on us: a well-behaved client never is */
				x->st->waiting_since = 0;
				return;
			}
			uint64_t todo = granted & ~done;
			while (todo) {
				int i = __builtin_ctzll(todo);
				todo &= todo - 1;
				if (rnd_below(4) == 0)
					sleep_us(rnd_below(300)); /* the kernel runs */
				push(x, GMX_UP_COMPLETE, 0, base + (uint64_t)i, 0, 0);
				done |= 1ull << i;
				x->st->grants++;
				x->st->completions++;
				since = now_ns();
			}
			if (now_ns() - since > g_wedge_ms * 1000000LL) {
				x->st->wedged++;
				x->st->wedged_prio[x->priority]++;
				snprintf(x->st->wedge_why, sizeof x->st->wedge_why,
					 "priority %d: %d of %d commands not granted after %ld ms", x->priority,
					 k - __builtin_popcountll(done), k, g_wedge_ms);
				x->st->waiting_since = 0;
				return;
			}
		}
		x->st->waiting_since = 0;
		if (rnd_below(4) == 0)
			push(x, GMX_UP_HOST_WAIT, 0, 0, 0, 0);
		if (rnd_below(8) == 0)
			sleep_us(rnd_below(2000)); /* idle */
	}
	/* The end of a session: sometimes frees everything, sometimes just leaves. */
	if (rnd_below(2))
		for (int i = 0; i < nal; i++)
			push(x, GMX_UP_FREE, 0, 0, al[i].ptr, 0);
	if (rnd_below(4) == 0)
		_exit(0); /* as a crash would: the kernel closes everything */
}

static void client_main(int idx, client_stats_t *st, uint64_t seed)
{
	rng_state = seed | 1;
	signal(SIGPIPE, SIG_IGN);
	int oversub = idx % 2 == 0;
	uint64_t seq = 1;
	for (;;) {
		sess_t x = {.st = st};
		int r = open_session(&x, idx, oversub ? GMX_HELLO_OVERSUBSCRIBE : 0);
		if (r < 0) {
			sleep_us(50000);
			continue;
		}
		if (r == 0) {
			sleep_us(10000 + rnd_below(40000));
			continue;
		}
		session(&x, oversub, &seq);
		close_session(&x);
	}
}

/* ---- the daemon and its figures ---- */

static long rss_kb(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	long kb = -1;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
			break;
	if (f)
		fclose(f);
	return kb;
}

static long fd_count(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	long n = 0;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static pid_t start_daemon(const char *exe, const char *dir, const char *policy, long device_mb, int clients)
{
	char conf[512], log[512];
	snprintf(conf, sizeof conf, "%s/gpumuxd.conf", dir);
	snprintf(log, sizeof log, "%s/daemon.log", dir);
	FILE *f = fopen(conf, "w");
	if (!f)
		return -1;
	fprintf(f,
		"[daemon]\nruntime_dir = %s\nprofile_dir = %s/profiles\npolicy = %s\ndevice_memory_mb = %ld\n"
		"max_clients = %d\n",
		dir, dir, policy, device_mb, clients < 32 ? 32 : clients);
	fclose(f);
	pid_t pid = fork();
	if (pid == 0) {
		FILE *l = freopen(log, "w", stderr);
		(void)l;
		execl(exe, exe, "--foreground", "--config", conf, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 200 && pid > 0; i++) {
		json_t *s = status();
		if (s) {
			json_decref(s);
			return pid;
		}
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return -1;
		sleep_us(25000);
	}
	return -1;
}

static pid_t spawn_client(int idx, client_stats_t *st, uint64_t seed)
{
	pid_t p = fork();
	if (p == 0) {
		client_main(idx, st, seed);
		_exit(0);
	}
	return p;
}

static int rm_entry(const char *p, const struct stat *s, int flag, struct FTW *f)
{
	(void)s;
	(void)flag;
	(void)f;
	remove(p);
	return 0;
}

static void usage(void)
{
	fprintf(stderr, "usage: gmx_soak --daemon PATH [--clients N] [--duration S] [--policy NAME] [--priority P]\n"
			"                [--kill-ms MS] [--device-mb MB] [--seed N] [--samples K] [--wedge-ms MS]\n"
			"                [--json FILE] [--no-rss-check]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *exe = NULL, *policy = "fikit", *json_path = NULL;
	long clients = 16, duration = 60, kill_ms = 50, device_mb = 256, samples = 20;
	uint64_t seed = 1;
	int rss_check = 1;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "--no-rss-check")) {
			rss_check = 0;
			continue;
		}
		if (!v)
			usage();
		i++;
		char *end;
		long n = strtol(v, &end, 10);
		int num = *v && !*end;
		if (!strcmp(a, "--daemon"))
			exe = v;
		else if (!strcmp(a, "--policy"))
			policy = v;
		else if (!strcmp(a, "--json"))
			json_path = v;
		else if (!strcmp(a, "--clients") && num && n >= 1 && n <= MAX_CLIENTS)
			clients = n;
		else if (!strcmp(a, "--duration") && num && n >= 2)
			duration = n;
		else if (!strcmp(a, "--kill-ms") && num && n >= 1)
			kill_ms = n;
		else if (!strcmp(a, "--device-mb") && num && n >= 1)
			device_mb = n;
		else if (!strcmp(a, "--seed") && num)
			seed = (uint64_t)n;
		else if (!strcmp(a, "--samples") && num && n >= 2 && n <= MAX_SAMPLES)
			samples = n;
		else if (!strcmp(a, "--priority") && num && n >= -1 && n <= 9)
			g_priority = (int)n;
		else if (!strcmp(a, "--wedge-ms") && num && n >= 100)
			g_wedge_ms = n;
		else {
			fprintf(stderr, "gmx_soak: bad option %s %s\n", a, v);
			usage();
		}
	}
	if (!exe)
		usage();
	signal(SIGPIPE, SIG_IGN);
	char dir[] = "/tmp/gmx-soak.XXXXXX";
	if (!mkdtemp(dir)) {
		perror("gmx_soak: mkdtemp");
		return 1;
	}
	chmod(dir, 0755);
	g_dir = dir;
	pid_t dpid = start_daemon(exe, dir, policy, device_mb, (int)clients);
	if (dpid < 0) {
		fprintf(stderr, "gmx_soak: %s did not start (log in %s/daemon.log)\n", exe, dir);
		return 1;
	}
	/* The start-up probe's connection is closed by the daemon just after its reply. */
	sleep_us(200000);
	long fds0 = fd_count(dpid), rss0 = rss_kb(dpid);
	client_stats_t *st = mmap(NULL, sizeof *st * MAX_CLIENTS, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
				  -1, 0);
	if (st == MAP_FAILED)
		return 1;
	memset(st, 0, sizeof *st * MAX_CLIENTS);
	rng_state = seed * 0x9E3779B97F4A7C15ull | 1;
	pid_t pids[MAX_CLIENTS];
	uint64_t spawned = 0, kills = 0;
	for (int i = 0; i < clients; i++)
		pids[i] = spawn_client(i, &st[i], seed * 1000003u + spawned++);

	sample_t smp[MAX_SAMPLES];
	int ns = 0;
	int64_t t0 = now_ns(), end = t0 + duration * 1000000000LL;
	int64_t every = duration * 1000000000LL / samples, next_sample = t0 + every;
	int64_t next_kill = t0 + (int64_t)(-log(1.0 - (double)(rnd() >> 11) / 9007199254740992.0) * kill_ms * 1e6);
	long fds_max = fds0, rss_max = rss0;
	int daemon_died = 0;
	printf("%8s %10s %6s %8s %12s %10s %8s\n", "t_s", "rss_kb", "fds", "clients", "grants", "sessions", "kills");
	while (now_ns() < end && !daemon_died) {
		int64_t now = now_ns();
		if (now >= next_kill) {
			int i = (int)rnd_below((uint32_t)clients);
			kill(pids[i], SIGKILL);
			waitpid(pids[i], NULL, 0);
			kills++;
			st[i].waiting_since = 0;
			pids[i] = spawn_client(i, &st[i], seed * 1000003u + spawned++);
			next_kill = now + (int64_t)(-log(1.0 - (double)(rnd() >> 11) / 9007199254740992.0) * kill_ms * 1e6);
		}
		/* Clients that ended by themselves start again. */
		for (int i = 0; i < clients; i++)
			if (waitpid(pids[i], NULL, WNOHANG) == pids[i]) {
				st[i].waiting_since = 0;
				pids[i] = spawn_client(i, &st[i], seed * 1000003u + spawned++);
			}
		if (waitpid(dpid, NULL, WNOHANG) == dpid) {
			daemon_died = 1;
			break;
		}
		long f = fd_count(dpid), r = rss_kb(dpid);
		fds_max = f > fds_max ? f : fds_max;
		rss_max = r > rss_max ? r : rss_max;
		if (now >= next_sample && ns < MAX_SAMPLES) {
			json_t *s = status();
			sample_t *p = &smp[ns++];
			uint64_t sess = 0;
			for (int i = 0; i < clients; i++)
				sess += st[i].sessions;
			*p = (sample_t){(now - t0) / 1e9, r, f, s ? jint(s, "n_clients") : -1, s ? jint(s, "grants") : -1};
			json_decref(s);
			printf("%8.1f %10ld %6ld %8ld %12ld %10llu %8llu\n", p->t_s, p->rss_kb, p->fds, p->clients,
			       p->grants, (unsigned long long)sess, (unsigned long long)kills);
			fflush(stdout);
			next_sample += every;
		}
		int64_t wake = next_kill < next_sample ? next_kill : next_sample;
		int64_t nap = wake - now_ns();
		sleep_us(nap > 20000000 ? 20000 : nap > 0 ? (long)(nap / 1000) : 0);
	}
	/* The end: every client killed, then the daemon's books must come back to zero. */
	for (int i = 0; i < clients; i++) {
		kill(pids[i], SIGKILL);
		waitpid(pids[i], NULL, 0);
	}
	json_t *fin = NULL;
	long acc[6] = {-1, -1, -1, -1, -1, -1};
	static const char *acc_key[6] = {"n_clients",		      "accounts.slots",
					 "accounts.commands_held",    "accounts.allocated_bytes",
					 "accounts.evictions_outstanding", "resident_bytes"};
	int zero = 0;
	for (int t = 0; t < 200 && !daemon_died && !zero; t++) {
		json_decref(fin);
		fin = status();
		zero = fin != NULL;
		for (int k = 0; k < 6; k++) {
			acc[k] = fin ? jint(fin, acc_key[k]) : -1;
			zero &= acc[k] == 0;
		}
		zero &= fin && jint(fin, "accounts.actions_waiting") == 0;
		if (!zero)
			sleep_us(50000);
	}
	sleep_us(200000); /* the last status request's connection closes just after its reply */
	long fds_end = daemon_died ? -1 : fd_count(dpid), rss_end = daemon_died ? -1 : rss_kb(dpid);
	long cut_off = fin ? jint(fin, "cut_off") : -1, perr = fin ? jint(fin, "protocol_errors") : -1;
	long grants = fin ? jint(fin, "grants") : -1, plans = fin ? jint(fin, "migration.plans") : -1;
	json_decref(fin);
	int stop_rc = -1;
	if (!daemon_died) {
		kill(dpid, SIGTERM);
		int wst;
		if (waitpid(dpid, &wst, 0) == dpid && WIFEXITED(wst))
			stop_rc = WEXITSTATUS(wst);
	}
	client_stats_t tot = {0};
	const char *why = "";
	for (int i = 0; i < clients; i++) {
		tot.sessions += st[i].sessions;
		tot.refused += st[i].refused;
		tot.grants += st[i].grants;
		tot.allocs += st[i].allocs;
		tot.frees += st[i].frees;
		tot.migrations += st[i].migrations;
		tot.cut += st[i].cut;
		tot.wedged += st[i].wedged;
		if (st[i].wedged)
			why = st[i].wedge_why;
		for (int p = 0; p < 10; p++)
			tot.wedged_prio[p] += st[i].wedged_prio[p];
	}
	/* RSS after the warm-up: the sample closest to it, and the largest after it. */
	double warm_s = duration / 5.0;
	if (warm_s < 5.0)
		warm_s = duration / 2.0 < 5.0 ? duration / 2.0 : 5.0;
	long rss_warm = -1, rss_late_max = -1, fds_late_max = -1;
	for (int i = 0; i < ns; i++)
		if (smp[i].t_s >= warm_s) {
			if (rss_warm < 0)
				rss_warm = smp[i].rss_kb;
			rss_late_max = smp[i].rss_kb > rss_late_max ? smp[i].rss_kb : rss_late_max;
			fds_late_max = smp[i].fds > fds_late_max ? smp[i].fds : fds_late_max;
		}
	long slack = rss_warm / 20 > 2048 ? rss_warm / 20 : 2048;
	int rss_flat = rss_warm > 0 && rss_late_max <= rss_warm + slack;
	int ok = !daemon_died && zero && tot.wedged == 0 && tot.cut == 0 && cut_off == 0 && perr == 0 &&
		 fds_end == fds0 && stop_rc == 0 && (!rss_check || rss_flat);
	printf("clients %ld, %lld s, kill every %ld ms (mean): %llu sessions, %llu kills, %llu refused, %llu grants, "
	       "%llu allocations, %llu frees, %llu migration orders, %ld plans\n",
	       clients, (long long)duration, kill_ms, (unsigned long long)tot.sessions, (unsigned long long)kills,
	       (unsigned long long)tot.refused, (unsigned long long)tot.grants, (unsigned long long)tot.allocs,
	       (unsigned long long)tot.frees, (unsigned long long)tot.migrations, plans);
	printf("daemon RSS: %ld kB before clients, %ld kB after warm-up, %ld kB max after it, %ld kB at the end "
	       "(%s, slack %ld kB)\n",
	       rss0, rss_warm, rss_late_max, rss_end, rss_flat ? "flat" : "GREW", slack);
	printf("daemon descriptors: %ld before clients, %ld max, %ld at the end\n", fds0, fds_max, fds_end);
	char byp[200] = "";
	for (int p = 0, o = 0; p < 10; p++)
		o += snprintf(byp + o, sizeof byp - (size_t)o, "%s%llu", p ? "," : "",
			      (unsigned long long)tot.wedged_prio[p]);
	printf("at the end: clients %ld, slots %ld, commands %ld, allocated %ld B, evictions %ld, resident %ld B "
	       "(%s); cut off %ld, protocol errors %ld, stop rc %d\n",
	       acc[0], acc[1], acc[2], acc[3], acc[4], acc[5], zero ? "all zero" : "NOT ZERO", cut_off, perr, stop_rc);
	printf("wedged (a command not granted within %ld ms): %llu, by priority 0..9: %s%s%s\n", g_wedge_ms,
	       (unsigned long long)tot.wedged, byp, tot.wedged ? "; last: " : "", why);
	char line[1024];
	snprintf(line, sizeof line,
		 "{\"bench\":\"soak\",\"policy\":\"%s\",\"clients\":%ld,\"duration_s\":%ld,\"kill_ms\":%ld,"
		 "\"sessions\":%llu,\"kills\":%llu,\"grants\":%ld,\"migration_orders\":%llu,"
		 "\"rss_kb\":{\"start\":%ld,\"warm\":%ld,\"late_max\":%ld,\"end\":%ld,\"flat\":%s},"
		 "\"fds\":{\"start\":%ld,\"max\":%ld,\"late_max\":%ld,\"end\":%ld},\"wedged\":%llu,"
		 "\"wedged_by_priority\":[%s],\"cut_off\":%ld,"
		 "\"protocol_errors\":%ld,\"accounts_zero\":%s,\"ok\":%s}",
		 policy, clients, duration, kill_ms, (unsigned long long)tot.sessions, (unsigned long long)kills,
		 grants, (unsigned long long)tot.migrations, rss0, rss_warm, rss_late_max, rss_end,
		 rss_flat ? "true" : "false", fds0, fds_max, fds_late_max, fds_end, (unsigned long long)tot.wedged,
		 byp, cut_off, perr, zero ? "true" : "false", ok ? "true" : "false");
	printf("%s\n", line);
	if (json_path) {
		FILE *f = fopen(json_path, "w");
		if (f) {
			fprintf(f, "%s\n", line);
			fclose(f);
		}
	}
	if (ok)
		nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
	else {
		printf("FAIL (daemon log kept in %s/daemon.log)\n", dir);
	}
	return ok ? 0 : 1;
}
