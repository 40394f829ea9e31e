/*
 * gpumuxd's connections and clients without a loop (daemon/server_internal.h's seam): socket
 * pairs handed to gmxd__admit with the credentials of our choosing, the rings driven by hand,
 * a clock of our own. What one user may take from the others: client slots, slots held by
 * departed clients, the profile store's entries; and the store's saves (durable, private).
 */
#include "rig.h"

#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

/* One allowed user cannot take every client slot: by default it gets half of max_clients, and
 * users other than root together never the last quarter (at most GMXD_CLIENTS_RESERVE). */
static void test_one_user_cannot_take_every_slot(void **state)
{
	(void)state;
	start("timeslice", 8);
	tconn_t c[20];
	int n = 0, w = 0;
	for (int i = 0; i < 8; i++)
		w += hello(&c[n++], 1000, "a", 5) == 'W';
	assert_int_equal(w, 4);
	assert_non_null(strstr(c[n - 1].reason, "uid 1000 has 4 clients already (max_clients_per_user 4)"));
	w = 0;
	for (int i = 0; i < 4; i++)
		w += hello(&c[n++], 1001, "b", 5) == 'W';
	assert_int_equal(w, 2); /* 6 of 8 to users other than root */
	assert_non_null(strstr(c[n - 1].reason, "the last 2 of max_clients 8 are kept for root"));
	assert_int_equal(hello(&c[n++], 0, "root1", 0), 'W');
	assert_int_equal(hello(&c[n++], 0, "root2", 0), 'W');
	assert_int_equal(hello(&c[n++], 0, "root3", 0), 'R');
	assert_non_null(strstr(c[n - 1].reason, "serves 8 clients already"));
	books();
	for (int i = 0; i < n; i++)
		bye(&c[i]);
	books();
	gmxd__fini();
}

/* A low-priority client that dies with commands queued behind busy high-priority work frees
 * its slot at once: its commands are handed out unrun when it leaves, not when its turn comes
 * (which the high-priority client's work kept from coming). */
static void test_departed_slot_freed_at_once(void **state)
{
	(void)state;
	static const char *pol[] = {"timeslice", "fikit", "streamprio"};
	for (int p = 0; p < 3; p++) {
		start(pol[p], 32);
		tconn_t hp, lp;
		assert_int_equal(hello(&hp, 0, "hp", 0), 'W');
		assert_int_equal(hello(&lp, 0, "lp", 9), 'W');
		for (uint64_t s = 1; s <= 8; s++)
			up(&hp, GMX_UP_NOTICE, s); /* two granted, never completed: hp stays busy */
		gmxd__poll_rings();
		for (uint64_t s = 1; s <= 10; s++)
			up(&lp, GMX_UP_NOTICE, s);
		gmxd__poll_rings();
		int t = task_of(&lp);
		assert_true(t >= 0);
		if (SRV.cl[t].queued == 0)
			fail_msg("%s: the low-priority client's commands were not held back", pol[p]);
		bye(&lp);
		books();
		if (SRV.cl[t].used)
			fail_msg("%s: the departed client's slot is still held by %u commands", pol[p],
				 SRV.cl[t].refs);
		bye(&hp);
		books();
		gmxd__fini();
	}
}

/* The profile store has an entry per task name; names seen once do not fill it for good: the
 * least recently used entry no client holds makes room, and a live client's entry stays. */
static void test_profile_entries_reused(void **state)
{
	(void)state;
	start("fikit", 32);
	tconn_t keep, c;
	assert_int_equal(hello(&keep, 0, "keep", 0), 'W');
	gmx_kprof_t *kp = SRV.prof_ptr[task_of(&keep)];
	assert_non_null(kp);
	for (int i = 0; i < 3 * GMX_MAX_TASKS; i++) {
		char name[32];
		snprintf(name, sizeof name, "once%d", i);
		assert_int_equal(hello(&c, 1000, name, 5), 'W');
		if (!SRV.prof_ptr[task_of(&c)])
			fail_msg("client %d (%s) got no profile: the store is full of departed names", i, name);
		bye(&c);
	}
	assert_ptr_equal(SRV.prof_ptr[task_of(&keep)], kp);
	assert_string_equal(kp->task, "keep");
	bye(&keep);
	books();
	gmxd__fini();
}

/* fsync and rename as the store calls them (linked with --wrap): the order of a save. */
int __real_fsync(int fd);
int __real_rename(const char *from, const char *to);
static char events[32][700];
static int n_ev;

int __wrap_fsync(int fd)
{
	char link[64], path[512];
	snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
	ssize_t k = readlink(link, path, sizeof path - 1);
	path[k > 0 ? k : 0] = 0;
	if (n_ev < 32)
		snprintf(events[n_ev++], sizeof events[0], "fsync %s", path);
	return __real_fsync(fd);
}

int __wrap_rename(const char *from, const char *to)
{
	if (n_ev < 32)
		snprintf(events[n_ev++], sizeof events[0], "rename %s %s", from, to);
	return __real_rename(from, to);
}

static int find_event(const char *prefix, int from)
{
	for (int i = from; i < n_ev; i++)
		if (strncmp(events[i], prefix, strlen(prefix)) == 0)
			return i;
	return -1;
}

/* A save is durable and private: the temporary is flushed before it replaces the profile, the
 * directory after; the file is 0600. At start, an older readable profile is made private and a
 * temporary a crash left behind is removed. */
static void test_store_save_durable_and_private(void **state)
{
	(void)state;
	char dir[] = "/tmp/gmx-test-store.XXXXXX", path[64], tmp[128], old[128], file[128];
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/profiles", dir);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(tmp, sizeof tmp, "%s/t.gmxprof.tmp.Ab12Cd", path);
	snprintf(old, sizeof old, "%s/old.gmxprof", path);
	snprintf(file, sizeof file, "%s/t.gmxprof", path);
	FILE *f = fopen(tmp, "w");
	assert_non_null(f);
	fputs("gmxprof 1\n", f);
	fclose(f);
	f = fopen(old, "w");
	assert_non_null(f);
	fputs("gmxprof 1\n", f);
	fclose(f);
	assert_int_equal(chmod(old, 0644), 0);
	gmxd_config_default(&cfg);
	snprintf(cfg.profile_dir, sizeof cfg.profile_dir, "%s", path);
	assert_int_equal(gmxd__init(&cfg, test_clock), 0);
	struct stat st;
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(stat(old, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	if (access(tmp, F_OK) == 0)
		fail_msg("%s, left by an unfinished save, is still there", tmp);
	gmx_kprof_t p;
	assert_int_equal(gmx_kprof_init(&p, "t"), 0);
	assert_int_equal(gmx_kprof_observe(&p, 1, 0, 100000, 5000, "k"), 0);
	n_ev = 0;
	gmxd__store_save("t", &p);
	char want[400];
	snprintf(want, sizeof want, "fsync %s/t.gmxprof.tmp.", path);
	int fs = find_event(want, 0);
	snprintf(want, sizeof want, "rename %s/t.gmxprof.tmp.", path);
	int rn = find_event(want, 0);
	snprintf(want, sizeof want, "fsync %s", path);
	int fd_dir = -1;
	for (int i = rn + 1; rn >= 0 && i < n_ev; i++)
		if (strcmp(events[i], want) == 0)
			fd_dir = i;
	for (int i = 0; i < n_ev; i++)
		print_message("save: %s\n", events[i]);
	if (fs < 0 || rn < 0 || fs > rn)
		fail_msg("the temporary was not flushed before it replaced the profile");
	if (fd_dir < 0)
		fail_msg("the directory was not flushed after the rename");
	assert_int_equal(stat(file, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	gmx_kprof_free(&p);
	gmxd__fini();
	unlink(file);
	unlink(old);
	rmdir(path);
	rmdir(dir);
}

/* A client that owed nothing for longer than unresponsive_ms (idle, or queued behind others)
 * and is then told to evict has unresponsive_ms from then to acknowledge it: it was cut off at
 * the next tick, its liveness measured from its last completion (found by the soak). */
static void test_fresh_eviction_not_cut(void **state)
{
	(void)state;
	gmxd_config_default(&cfg);
	cfg.profile_dir[0] = 0;
	cfg.device_memory_mb = 64;
	cfg.unresponsive_ms = 1000;
	assert_int_equal(gmxd__init(&cfg, test_clock), 0);
	tconn_t a, b;
	int g, ev;
	assert_int_equal(hello_flags(&a, 0, "a", 5, GMX_HELLO_OVERSUBSCRIBE), 'W');
	assert_int_equal(hello_flags(&b, 0, "b", 5, GMX_HELLO_OVERSUBSCRIBE), 'W');
	up_entry(&a, GMX_UP_ALLOC, 0, 0, 1ull << 40, 48ull << 20);
	up_entry(&b, GMX_UP_ALLOC, 0, 0, 2ull << 40, 48ull << 20);
	up(&a, GMX_UP_NOTICE, 1);
	gmxd__poll_rings();
	down(&a, 1, &g, &ev, 1);
	assert_int_equal(g, 1); /* a's 48 MB loaded, a granted */
	up(&a, GMX_UP_COMPLETE, 1);
	gmxd__poll_rings();
	now_ns += 10000000000LL; /* a idle for 10 s */
	gmxd__tick(now_ns);
	up(&b, GMX_UP_NOTICE, 1);
	gmxd__poll_rings(); /* b needs 48 MB: a must evict */
	int ta = task_of(&a);
	assert_int_equal(SRV.cl[ta].evicts, 1);
	now_ns += 1000000; /* 1 ms later */
	gmxd__tick(now_ns);
	if (!SRV.cl[ta].used || SRV.cl[ta].dead || SRV.cl[ta].cut)
		fail_msg("a was cut off 1 ms after it was told to evict");
	down(&a, 0, &g, &ev, 1);
	assert_int_equal(ev, 1);
	gmxd__poll_rings();
	down(&b, 1, &g, &ev, 1);
	assert_int_equal(g, 1);
	books();
	/* Still cut off when it never answers. */
	up(&b, GMX_UP_COMPLETE, 1);
	up(&a, GMX_UP_NOTICE, 2);
	gmxd__poll_rings(); /* a needs its memory back: b evicts, and b stays silent */
	int tb = task_of(&b);
	assert_int_equal(SRV.cl[tb].evicts, 1);
	now_ns += 1500000000LL;
	gmxd__tick(now_ns);
	assert_true(!SRV.cl[tb].used || SRV.cl[tb].dead);
	bye(&a);
	bye(&b);
	books();
	gmxd__fini();
}

/* A leased client whose completions sit unread in its ring when the liveness check comes (the
 * loop lost the CPU between its read of the rings and the check, while the client reported a
 * whole batch) is not unresponsive: the check reads them first (64 clients at 500k/s cut off
 * 4-7 clients holding hundreds of unread entries). One that said nothing is still cut off. */
static void test_unread_completions_not_cut(void **state)
{
	(void)state;
	start("fikit", 8);
	cfg.unresponsive_ms = 1000;
	tconn_t a, b;
	assert_int_equal(hello(&a, 1000, "a", 3), 'W');
	assert_int_equal(hello(&b, 1000, "b", 3), 'W');
	int g, ev;
	up(&a, GMX_UP_NOTICE, 1);
	up(&b, GMX_UP_NOTICE, 1);
	gmxd__poll_rings();
	down(&a, 1, &g, &ev, 1);
	assert_int_equal(g, 1);
	down(&b, 1, &g, &ev, 1);
	assert_int_equal(g, 1);
	client_t *ca = &SRV.cl[task_of(&a)], *cb = &SRV.cl[task_of(&b)];
	assert_int_equal(ca->inflight, 1);
	assert_int_equal(cb->inflight, 1);
	now_ns += 1500000000LL; /* both ran their command 1.5 s: a reported it, not read yet */
	up(&a, GMX_UP_COMPLETE, 1);
	gmxd__tick(now_ns);
	if (!ca->used || ca->dead || ca->cut)
		fail_msg("a was cut off with its completion unread in its ring");
	assert_int_equal(ca->inflight, 0);
	assert_true(!cb->used || cb->dead); /* b said nothing: cut off */
	books();
	bye(&a);
	bye(&b);
	books();
	gmxd__fini();
}

static int count_events(const char *prefix)
{
	int n = 0;
	for (int i = 0; i < n_ev; i++)
		n += strncmp(events[i], prefix, strlen(prefix)) == 0;
	return n;
}

/* Clients of one name coming and going make the store write (and flush) that name's profile
 * at most every GMXD_SAVE_INTERVAL_NS: the first departure saves at once, later ones leave the
 * profile dirty for the tick after the interval, and shutdown saves what is still dirty. */
static void test_store_saves_rate_limited(void **state)
{
	(void)state;
	char dir[] = "/tmp/gmx-test-store.XXXXXX", path[64], file[128];
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof path, "%s/profiles", dir);
	snprintf(file, sizeof file, "%s/t.gmxprof", path);
	gmxd_config_default(&cfg);
	snprintf(cfg.profile_dir, sizeof cfg.profile_dir, "%s", path);
	snprintf(cfg.policy, sizeof cfg.policy, "fikit");
	assert_int_equal(gmxd__init(&cfg, test_clock), 0);
	n_ev = 0;
	for (int i = 0; i < 50; i++) {
		tconn_t c;
		assert_int_equal(hello(&c, 0, "t", 0), 'W');
		gmx_kprof_t *p = SRV.prof_ptr[task_of(&c)];
		assert_non_null(p);
		assert_int_equal(gmx_kprof_observe(p, 1 + (uint64_t)i, 0, 100000, 5000, "k"), 0);
		bye(&c);
		now_ns += 1000000; /* 1 ms */
		gmxd__tick(now_ns);
	}
	if (count_events("rename ") != 1)
		fail_msg("%d saves for 50 departures within 50 ms", count_events("rename "));
	now_ns += GMXD_SAVE_INTERVAL_NS;
	gmxd__tick(now_ns);
	assert_int_equal(count_events("rename "), 2); /* the interval passed: what was learned since */
	gmxd__tick(now_ns + 1);
	assert_int_equal(count_events("rename "), 2); /* nothing new */
	tconn_t c;
	assert_int_equal(hello(&c, 0, "t", 0), 'W');
	assert_int_equal(gmx_kprof_observe(SRV.prof_ptr[task_of(&c)], 99, 0, 100000, 5000, "k"), 0);
	bye(&c);
	assert_int_equal(count_events("rename "), 2);
	gmxd__fini(); /* shutdown saves it */
	assert_int_equal(count_events("rename "), 3);
	unlink(file);
	rmdir(path);
	rmdir(dir);
}

/* Kernel identities are the client's to choose: a client completing kernels of ever new
 * identities makes its profile (fikit) hold at most GMXD_PROFILE_ENTRIES_MAX entries, while a
 * known kernel keeps being learned. */
static void test_profile_entries_bounded(void **state)
{
	(void)state;
	start("fikit", 32);
	tconn_t c;
	int g, ev;
	assert_int_equal(hello(&c, 0, "many", 0), 'W');
	gmx_kprof_t *p = SRV.prof_ptr[task_of(&c)];
	assert_non_null(p);
	for (uint64_t i = 1; i <= 3000; i++) {
		up_entry(&c, GMX_UP_NOTICE, 0, i, i % 2 ? 7 : 1000 + i, 0);
		gmxd__poll_rings();
		down(&c, i, &g, &ev, 0);
		assert_int_equal(g, 1);
		now_ns += 10000;
		up(&c, GMX_UP_COMPLETE, i);
		gmxd__poll_rings();
	}
	if (p->n > GMXD_PROFILE_ENTRIES_MAX)
		fail_msg("%u profile entries for one task name (bound %d)", p->n, GMXD_PROFILE_ENTRIES_MAX);
	const gmx_kprof_entry_t *known = gmx_kprof_find(p, 7, 0);
	assert_non_null(known);
	assert_true(known->n >= 1000); /* kernel 7 ran 1500 times: still learned */
	bye(&c);
	books();
	gmxd__fini();
}

/* A server under exclusive with one client "lease" that has noticed one command (alone: the
 * policy leases it); its client record. */
static client_t *start_leased_client(tconn_t *c)
{
	start("exclusive", 8);
	assert_int_equal(hello(c, 1000, "lease", 3), 'W');
	client_t *cl = &SRV.cl[task_of(c)];
	up(c, GMX_UP_NOTICE, 1);
	gmxd__poll_rings();
	return cl;
}

/* Leased releases are checked against the lease in effect at their point of the up ring: within
 * the bound they are the policy's commands in flight; beyond the bound, after a revoke was
 * acknowledged, after the lease's end, or with a wrong acknowledgement, the client is cut off. */
static void test_leased_releases_checked(void **state)
{
	(void)state;
	const char *cut[] = {"beyond its lease", "without a lease", "after its lease ended", "acknowledgement"};
	for (int k = 0; k < 4; k++) {
		tconn_t c;
		client_t *cl = start_leased_client(&c);
		uint64_t id = 0;
		uint32_t bound = 0;
		int64_t until = -1;
		assert_int_equal(last_lease(&c, &id, &bound, &until), 1); /* alone: leased */
		assert_int_equal(bound, cfg.inflight);
		assert_int_equal(until, 0);
		up_entry(&c, GMX_UP_LEASE_ACK, 0, id, k == 3 ? 99 : 0, 0);
		up(&c, GMX_UP_COMPLETE, 1); /* the granted command: the bound counts it too */
		up_entry(&c, GMX_UP_RELEASED, 0, 2, 7, (uint64_t)now_ns);
		up_entry(&c, GMX_UP_RELEASED, 0, 3, 7, (uint64_t)now_ns);
		gmxd__poll_rings();
		books();
		if (k == 3) {
			assert_true(cl->cut && strstr(cl->cut_reason, cut[k]));
		} else {
			assert_false(cl->cut);
			assert_int_equal(cl->leased, 2);
			assert_int_equal(cl->inflight, 2); /* two leased */
			if (k == 0) {
				up_entry(&c, GMX_UP_RELEASED, 0, 4, 7, (uint64_t)now_ns); /* a third of 2 */
			} else {
				up_entry(&c, GMX_UP_COMPLETE, 0, 2, 0, (uint64_t)now_ns);
				up_entry(&c, GMX_UP_COMPLETE, 0, 3, 0, (uint64_t)now_ns);
				gmx_lease_t l = {1, now_ns + 1000};
				gmxd__dev_lease(NULL, (uint32_t)task_of(&c), k == 1 ? NULL : &l);
				assert_int_equal(last_lease(&c, &id, &bound, &until), 1);
				assert_int_equal(bound, k == 1 ? 0u : 1u);
				up_entry(&c, GMX_UP_LEASE_ACK, 0, id, 3, 0);
				up_entry(&c, GMX_UP_RELEASED, 0, 4, 7, (uint64_t)now_ns + 2000);
			}
			gmxd__poll_rings();
			assert_true(cl->cut && strstr(cl->cut_reason, cut[k]));
		}
		books();
		gmxd__tick(now_ns);
		books();
		bye(&c);
		gmxd__fini();
	}
}

/* Runs (protocol 4): one RELEASED entry naming n consecutive seqs is n leased releases, and one
 * COMPLETE naming a run n completions, each heard in turn and checked against the lease; a
 * revoke acknowledged after a run names the run's last seq; a run passing the lease's bound is
 * cut off at the release beyond it, and one longer than GMX_RUN_MAX is refused. */
static void test_leased_runs(void **state)
{
	(void)state;
	for (int k = 0; k < 3; k++) {
		tconn_t c;
		client_t *cl = start_leased_client(&c);
		uint64_t id = 0;
		uint32_t bound = 0;
		int64_t until = -1;
		assert_int_equal(last_lease(&c, &id, &bound, &until), 1);
		assert_true(bound >= 2);
		up_entry(&c, GMX_UP_LEASE_ACK, 0, id, 0, 0);
		up(&c, GMX_UP_COMPLETE, 1);
		uint32_t n = k == 0 ? bound : k == 1 ? bound + 1 : GMX_RUN_MAX + 1;
		up_entry(&c, GMX_UP_RELEASED, (n - 1) << GMX_RUN_SHIFT, 2, 7, (uint64_t)now_ns);
		gmxd__poll_rings();
		books();
		if (k == 1) {
			assert_true(cl->cut && strstr(cl->cut_reason, "beyond its lease"));
			assert_int_equal(cl->leased, bound); /* each of the run in turn, up to the bound */
		} else if (k == 2) {
			assert_true(cl->cut && strstr(cl->cut_reason, "a run of"));
			assert_int_equal(cl->leased, 0);
		} else {
			assert_false(cl->cut);
			assert_int_equal(cl->leased, bound);
			assert_int_equal(cl->inflight, bound);
			assert_int_equal(cl->last_leased_seq, 1 + bound);
			gmxd__dev_lease(NULL, (uint32_t)task_of(&c), NULL); /* revoked after the run */
			assert_int_equal(last_lease(&c, &id, &bound, &until), 1);
			assert_int_equal(bound, 0);
			up_entry(&c, GMX_UP_LEASE_ACK, 0, id, 1 + cl->leased, 0);
			up_entry(&c, GMX_UP_COMPLETE, cl->leased - 1, 2, 0, (uint64_t)now_ns);
			gmxd__poll_rings();
			books();
			assert_false(cl->cut);
			assert_int_equal(cl->inflight, 0);
			assert_int_equal(cl->completions, 1 + cl->leased);
		}
		gmxd__tick(now_ns);
		books();
		bye(&c);
		gmxd__fini();
	}
}

/* The lease bound counts every command the client has in flight, granted ones included: a
 * command granted before the lease was acknowledged and not completed leaves one leased
 * release fewer (the interposer's gmx_shim_lease_decide counts both). */
static void test_lease_bound_counts_granted(void **state)
{
	(void)state;
	start("exclusive", 8);
	tconn_t c;
	assert_int_equal(hello(&c, 1000, "lease", 3), 'W');
	client_t *cl = &SRV.cl[task_of(&c)];
	up(&c, GMX_UP_NOTICE, 1); /* granted, and a lease of cfg.inflight (2) */
	gmxd__poll_rings();
	uint64_t id = 0;
	uint32_t bound = 0;
	int64_t until = -1;
	assert_int_equal(last_lease(&c, &id, &bound, &until), 1);
	assert_int_equal(bound, 2);
	up_entry(&c, GMX_UP_LEASE_ACK, 0, id, 0, 0);
	up_entry(&c, GMX_UP_RELEASED, 0, 2, 7, (uint64_t)now_ns); /* 1 granted + 1 leased: within */
	gmxd__poll_rings();
	books();
	assert_false(cl->cut);
	assert_int_equal(cl->g_known_inflight, 1);
	up_entry(&c, GMX_UP_RELEASED, 0, 3, 7, (uint64_t)now_ns); /* a third in flight */
	gmxd__poll_rings();
	books();
	assert_true(cl->cut);
	assert_non_null(strstr(cl->cut_reason, "beyond its lease"));
	assert_non_null(strstr(cl->cut_reason, "1 leased and 1 granted"));
	gmxd__tick(now_ns);
	books();
	bye(&c);
	gmxd__fini();
}

/* What the policy is shown while it hears batched entries: each at the time it carries, in the
 * order they happened across clients (a ring read after another does not show the policy its
 * earlier releases late), and its clock never goes back. */
static const gmx_policy_ops_t *real_ops;
static gmx_policy_ops_t rec_ops;
static int64_t seen_at[16];
static uint32_t seen_task[16];
static int n_seen;

static void rec(const gmx_cmd_t *cmd)
{
	if (cmd->leased && n_seen < 16) {
		seen_task[n_seen] = cmd->task;
		seen_at[n_seen++] = gmxd__dev_now(NULL);
	}
}

static void rec_launch(gmx_policy_t *p, gmx_cmd_t *cmd)
{
	rec(cmd);
	real_ops->on_launch(p, cmd);
}

static void rec_complete(gmx_policy_t *p, gmx_cmd_t *cmd)
{
	rec(cmd);
	real_ops->on_complete(p, cmd);
}

static void test_batches_merged_by_time(void **state)
{
	(void)state;
	start("fikit", 8);
	real_ops = SRV.ops;
	rec_ops = *SRV.ops;
	rec_ops.on_launch = rec_launch;
	rec_ops.on_complete = rec_complete;
	SRV.ops = &rec_ops;
	tconn_t a, b;
	assert_int_equal(hello(&a, 1000, "a", 3), 'W');
	assert_int_equal(hello(&b, 1000, "b", 3), 'W');
	tconn_t *cs[2] = {&a, &b};
	for (int i = 0; i < 2; i++) { /* one command each, granted and completed: then a lease */
		up(cs[i], GMX_UP_NOTICE, 1);
		gmxd__poll_rings();
		int g, ev;
		down(cs[i], 1, &g, &ev, 0);
		assert_int_equal(g, 1);
		up(cs[i], GMX_UP_COMPLETE, 1);
		gmxd__poll_rings();
		uint64_t id = 0;
		uint32_t bound = 0;
		int64_t until = -1;
		if (!last_lease(cs[i], &id, &bound, &until)) { /* sent with the grant, read above */
			id = SRV.cl[task_of(cs[i])].lease_id;
			bound = SRV.cl[task_of(cs[i])].lsent[0].inflight;
		}
		assert_true(bound >= 1);
		up_entry(cs[i], GMX_UP_LEASE_ACK, 0, id, 0, 0);
	}
	gmxd__poll_rings();
	int64_t t0 = now_ns + 1000;
	/* a: released at +100, completed at +300; b: released at +200, completed at +400; a's
	 * ring is read first. */
	up_entry(&a, GMX_UP_RELEASED, 0, 2, 7, (uint64_t)(t0 + 100));
	up_entry(&a, GMX_UP_COMPLETE, 0, 2, 0, (uint64_t)(t0 + 300));
	up_entry(&b, GMX_UP_RELEASED, 0, 2, 7, (uint64_t)(t0 + 200));
	up_entry(&b, GMX_UP_COMPLETE, 0, 2, 0, (uint64_t)(t0 + 400));
	up(&a, GMX_UP_HOST_WAIT, 0); /* carries no time: after a's last, before the read */
	now_ns = t0 + 1000;
	n_seen = 0;
	gmxd__poll_rings();
	books();
	assert_false(SRV.cl[task_of(&a)].cut);
	assert_false(SRV.cl[task_of(&b)].cut);
	assert_int_equal(n_seen, 4);
	uint32_t ta = (uint32_t)task_of(&a), tb = (uint32_t)task_of(&b);
	const uint32_t want_task[4] = {ta, tb, ta, tb};
	for (int i = 0; i < 4; i++) {
		assert_int_equal(seen_task[i], want_task[i]);
		assert_int_equal(seen_at[i], t0 + 100 * (i + 1));
	}
	/* The policy's clock after the batch: never before what it was shown. */
	assert_true(gmxd__dev_now(NULL) >= t0 + 400);
	bye(&a);
	bye(&b);
	books();
	gmxd__fini();
}

/* Batched entries (gmx_ring_push_batched) wake a consumer only when it sleeps with no deadline
 * (GMX_RING_WAIT_ANY) or once the ring holds GMX_RING_FILL_MARK entries; never a busy one. */
static void test_ring_batched_wake(void **state)
{
	(void)state;
	static gmx_ring_t r;
	memset(&r, 0, sizeof r);
	gmx_ring_entry_t e = {.type = GMX_UP_RELEASED};
	int wake = -1;
	assert_int_equal(gmx_ring_push_batched(&r, &e, &wake), 0);
	assert_int_equal(wake, 0); /* awake */
	assert_int_equal(gmx_ring_prepare_sleep_as(&r, GMX_RING_WAIT_BATCH), 1); /* not empty */
	gmx_ring_entry_t o;
	assert_int_equal(gmx_ring_pop(&r, &o), 1);
	assert_int_equal(gmx_ring_prepare_sleep(&r), 0);
	assert_int_equal(gmx_ring_push_batched(&r, &e, &wake), 0);
	assert_int_equal(wake, 0); /* it reads batches by itself soon */
	assert_int_equal(r.waiting, GMX_RING_WAIT_BATCH);
	assert_int_equal(gmx_ring_pop(&r, &o), 1);
	assert_int_equal(gmx_ring_prepare_sleep_as(&r, GMX_RING_WAIT_ANY), 0);
	assert_int_equal(gmx_ring_push_batched(&r, &e, &wake), 0);
	assert_int_equal(wake, 1); /* sleeping with no deadline: woken, once */
	assert_int_equal(r.waiting, 0);
	assert_int_equal(gmx_ring_push_batched(&r, &e, &wake), 0);
	assert_int_equal(wake, 0);
	r.waiting = GMX_RING_WAIT_BATCH;
	for (uint32_t i = 2; i < GMX_RING_FILL_MARK - 1; i++) {
		assert_int_equal(gmx_ring_push_batched(&r, &e, &wake), 0);
		assert_int_equal(wake, 0);
	}
	assert_int_equal(gmx_ring_push_batched(&r, &e, &wake), 0); /* the mark */
	assert_int_equal(wake, 1);
	while (gmx_ring_space(&r))
		assert_int_equal(gmx_ring_push_batched(&r, &e, &wake), 0);
	assert_int_equal(gmx_ring_push_batched(&r, &e, &wake), -1); /* full */
}

/* The gpumux policy in gpumuxd (memplan_slice.c): a [task NAME] section's arrival period seeds
 * the HP gap predictor and the policy measures its kernels, so an LP kernel that ran 2 ms is
 * kept out of the 1 ms gap HP's period leaves (without either it goes, and the HP request
 * waits for it); LP turns follow core's slice rule over the migration a turn needs (40 MiB at
 * 25 GB/s: 16.8 ms, not slice_us), capped by a runnable task's latency target. A Poisson rate
 * seeds it too: at 909 requests/s the gap left with 95% confidence is 56 us, at 1/s 51 ms.
 * Returns whether the second LP kernel was granted at once. */
enum { DECLARE_NONE, DECLARE_PERIOD, DECLARE_BUSY_RATE, DECLARE_IDLE_RATE };
static int combined_lp_granted(int declare)
{
	gmxd_config_default(&cfg);
	snprintf(cfg.policy, sizeof cfg.policy, "gpumux");
	cfg.profile_dir[0] = 0;
	cfg.device_memory_mb = 64;
	cfg.inflight = 1;
	if (declare) {
		cfg.task[0] = (struct gmxd_task_cfg){.name = "hp", .latency_target_ms = 10};
		if (declare == DECLARE_PERIOD)
			cfg.task[0].arrival_period_us = 1100;
		else
			cfg.task[0].arrival_rate_per_s = declare == DECLARE_BUSY_RATE ? 909 : 1;
		cfg.n_task = 1;
	}
	assert_int_equal(gmxd__init(&cfg, test_clock), 0);
	tconn_t hp, lp, big;
	int g, ev;
	assert_int_equal(hello(&hp, 0, "hp", 0), 'W');
	assert_int_equal(hello(&lp, 0, "lp", 5), 'W');
	assert_int_equal(hello_flags(&big, 0, "big", 5, GMX_HELLO_OVERSUBSCRIBE), 'W');
	up_entry(&big, GMX_UP_ALLOC, 0, 0, 1ull << 40, 40ull << 20);
	gmxd__poll_rings();
	uint32_t tb = (uint32_t)task_of(&big);
	int64_t sl = gmxd__dev_slice_for(NULL, tb);
	if (sl < 16700000 || sl > 16800000)
		fail_msg("slice %lld ns for a turn that must load 40 MiB at 25 GB/s (expected 16.8 ms)", (long long)sl);
	/* The first LP kernel: nothing known of HP's gaps but its period, HP idle for longer: open. */
	up(&lp, GMX_UP_NOTICE, 1);
	gmxd__poll_rings();
	down(&lp, 1, &g, &ev, 0);
	assert_int_equal(g, 1);
	now_ns += 2000000; /* it ran 2 ms */
	up(&lp, GMX_UP_COMPLETE, 1);
	gmxd__poll_rings();
	/* One HP request of 0.1 ms; a runnable task's 10 ms target caps the turn meanwhile. */
	up(&hp, GMX_UP_NOTICE, 1);
	gmxd__poll_rings();
	down(&hp, 1, &g, &ev, 0);
	assert_int_equal(g, 1);
	sl = gmxd__dev_slice_for(NULL, tb);
	if (declare)
		assert_int_equal(sl, 10000000);
	now_ns += 100000;
	up(&hp, GMX_UP_COMPLETE, 1);
	gmxd__poll_rings();
	now_ns += 1000;
	up(&lp, GMX_UP_NOTICE, 2);
	gmxd__poll_rings();
	down(&lp, 2, &g, &ev, 0);
	bye(&hp);
	bye(&lp);
	bye(&big);
	books();
	gmxd__fini();
	return g;
}

static void test_combined_learns_durations_and_slices(void **state)
{
	(void)state;
	assert_int_equal(combined_lp_granted(DECLARE_PERIOD), 0);    /* 2 ms does not fit the 1 ms gap */
	assert_int_equal(combined_lp_granted(DECLARE_NONE), 1);	     /* no period known: the gap is open */
	assert_int_equal(combined_lp_granted(DECLARE_BUSY_RATE), 0); /* nor a 56 us one */
	assert_int_equal(combined_lp_granted(DECLARE_IDLE_RATE), 1); /* but a 51 ms one */
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	gmxd_log_to(NULL);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_one_user_cannot_take_every_slot),
	    cmocka_unit_test(test_departed_slot_freed_at_once),
	    cmocka_unit_test(test_profile_entries_reused),
	    cmocka_unit_test(test_store_save_durable_and_private),
	    cmocka_unit_test(test_fresh_eviction_not_cut),
	    cmocka_unit_test(test_unread_completions_not_cut),
	    cmocka_unit_test(test_store_saves_rate_limited),
	    cmocka_unit_test(test_profile_entries_bounded),
	    cmocka_unit_test(test_leased_releases_checked),
	    cmocka_unit_test(test_lease_bound_counts_granted),
	    cmocka_unit_test(test_leased_runs),
	    cmocka_unit_test(test_batches_merged_by_time),
	    cmocka_unit_test(test_ring_batched_wake),
	    cmocka_unit_test(test_combined_learns_durations_and_slices),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
