/* The STATUS reply: the daemon, its clients and recent latencies as JSON. */
#include "server_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

static void lat_pct(const uint32_t *samples, uint32_t count, double *p50, double *p99)
{
	static uint32_t tmp[GMXD_LAT_SAMPLES];
	uint32_t n = count < GMXD_LAT_SAMPLES ? count : GMXD_LAT_SAMPLES;
	*p50 = *p99 = 0;
	if (!n)
		return;
	memcpy(tmp, samples, n * sizeof *tmp);
	qsort(tmp, n, sizeof *tmp, cmp_u32);
	*p50 = tmp[n / 2] / 1e3;
	*p99 = tmp[(n * 99) / 100 < n ? (n * 99) / 100 : n - 1] / 1e3;
}

/* s as the inside of a JSON string (names may hold '"' or '\\'; paths anything). */
static const char *json_str(const char *s, char *out, size_t len)
{
	size_t o = 0;
	for (; *s && o + 7 < len; s++) {
		unsigned char ch = (unsigned char)*s;
		if (ch == '"' || ch == '\\') {
			out[o++] = '\\';
			out[o++] = (char)ch;
		} else if (ch < 0x20 || ch == 0x7f) {
			o += (size_t)snprintf(out + o, len - o, "\\u%04x", ch);
		} else {
			out[o++] = (char)ch;
		}
	}
	out[o] = 0;
	return out;
}

void gmxd__status_reply(int fd)
{
	char e1[sizeof SRV.sock_path * 6], e2[GMX_NAME_MAX * 6];
	static char buf[GMX_CTRL_MAX];
	size_t off = sizeof(gmx_msg_hdr_t);
	int64_t now = gmxd__now_ns();
	double hp50, hp99;
	lat_pct(SRV.hp_lat, SRV.n_hp_lat, &hp50, &hp99);
#define OUT(...)                                                                                             \
	do {                                                                                                 \
		int k_ = snprintf(buf + off, sizeof buf - off, __VA_ARGS__);                                 \
		if (k_ > 0)                                                                                  \
			off = off + (size_t)k_ < sizeof buf ? off + (size_t)k_ : sizeof buf - 1;             \
	} while (0)
	int live = 0;
	for (int t = 0; t < GMX_MAX_TASKS; t++)
		live += SRV.cl[t].used && !SRV.cl[t].dead;
	OUT("{\"version\":%u,\"pid\":%d,\"policy\":\"%s\",\"slice_us\":%ld,\"inflight\":%ld,"
	    "\"uptime_s\":%.3f,\"socket\":\"%s\",\"max_clients\":%ld,\"max_clients_per_user\":%ld,"
	    "\"clients_reserved\":%ld,\"n_clients\":%d,\"pending_connections\":%u,\"device_memory_bytes\":%"
	    "llu,"
	    "\"task_memory_limit_bytes\":%llu,\"metrics_url\":\"%s\",",
	    GMX_PROTO_VERSION, (int)getpid(), SRV.ops->name, SRV.cfg->slice_us, SRV.cfg->inflight,
	    (now - SRV.start_ns) / 1e9, json_str(SRV.sock_path, e1, sizeof e1), SRV.cfg->max_clients,
	    gmxd__clients_per_user(), gmxd__clients_reserved(), live, SRV.n_pend,
	    (unsigned long long)SRV.mem_cap, (unsigned long long)gmxd_mem_task_limit(SRV.mem),
	    SRV.metrics_url);
	OUT("\"refusals\":{\"not_allowed\":%llu,\"busy\":%llu,\"malformed\":%llu,\"version\":%llu,"
	    "\"timeout\":%llu,\"resources\":%llu},",
	    (unsigned long long)SRV.refusals[GMXD_REF_NOT_ALLOWED],
	    (unsigned long long)SRV.refusals[GMXD_REF_BUSY],
	    (unsigned long long)SRV.refusals[GMXD_REF_MALFORMED],
	    (unsigned long long)SRV.refusals[GMXD_REF_VERSION],
	    (unsigned long long)SRV.refusals[GMXD_REF_TIMEOUT],
	    (unsigned long long)SRV.refusals[GMXD_REF_RESOURCES]);
	uint64_t held_bytes = 0, cmds_held = 0;
	uint32_t slots = 0, actions = 0;
	for (uint32_t t = 0; t < GMX_MAX_TASKS; t++) {
		held_bytes += gmxd_mem_bytes(SRV.mem, t);
		slots += SRV.cl[t].used;
		cmds_held += SRV.cl[t].refs;
	}
	for (const action_t *a = SRV.act_head; a; a = a->next)
		actions++;
	OUT("\"accounts\":{\"slots\":%u,\"commands_held\":%llu,\"allocated_bytes\":%llu,"
	    "\"evictions_outstanding\":%u,\"actions_waiting\":%u},",
	    slots, (unsigned long long)cmds_held, (unsigned long long)held_bytes, SRV.evicts_outstanding,
	    actions);
	OUT("\"resident_bytes\":%llu,\"grants\":%llu,\"refused\":%llu,\"cut_off\":%llu,"
	    "\"protocol_errors\":%llu,\"hp_grant_latency_us\":{\"p50\":%.1f,\"p99\":%.1f,"
	    "\"samples\":%u},\"host_waits\":%llu,\"migration\":{\"plans\":%llu,\"loaded_bytes\":%llu,"
	    "\"evicted_bytes\":%llu,\"demand_paged_bytes\":%llu,\"prefetches\":%llu,"
	    "\"prefetched_bytes\":%llu,\"ahead_bytes\":%llu,\"ahead_notices\":%llu,\"ahead_matched\":%llu},"
	    "\"leased_releases\":%llu,"
	    "\"leases\":%llu,\"revokes\":%llu,\"loop\":{\"iterations\":%llu,\"sleeps\":%llu,\"deep_sleeps\":%llu,"
	    "\"drains\":%llu,\"entries\":%llu,\"timer_fires\":%llu,\"wakes_sent\":%llu,\"spins\":%llu,"
	    "\"spin_ns\":%llu,\"spin_hits\":%llu},\"clients\":[",
	    (unsigned long long)gmxd_mem_resident(SRV.mem, GMX_MAX_TASKS),
	    (unsigned long long)SRV.total_grants, (unsigned long long)SRV.refused,
	    (unsigned long long)SRV.cut_off, (unsigned long long)SRV.protocol_errors, hp50, hp99,
	    SRV.n_hp_lat < GMXD_LAT_SAMPLES ? SRV.n_hp_lat : GMXD_LAT_SAMPLES,
	    (unsigned long long)SRV.host_waits, (unsigned long long)SRV.mig_plans,
	    (unsigned long long)SRV.mig_load_bytes, (unsigned long long)SRV.mig_evict_bytes,
	    (unsigned long long)SRV.mig_short_bytes, (unsigned long long)SRV.mig_prefetches,
	    (unsigned long long)SRV.mig_prefetch_bytes, (unsigned long long)SRV.mig_ahead_bytes,
	    (unsigned long long)SRV.ahead_read, (unsigned long long)SRV.ahead_matched,
	    (unsigned long long)SRV.total_leased, (unsigned long long)SRV.total_leases,
	    (unsigned long long)SRV.total_revokes, (unsigned long long)SRV.loop.iterations,
	    (unsigned long long)SRV.loop.sleeps, (unsigned long long)SRV.loop.deep_sleeps,
	    (unsigned long long)SRV.loop.drains, (unsigned long long)SRV.loop.entries,
	    (unsigned long long)SRV.loop.timer_fires, (unsigned long long)SRV.loop.wakes_sent,
	    (unsigned long long)SRV.loop.spins, (unsigned long long)SRV.loop.spin_ns,
	    (unsigned long long)SRV.loop.spin_hits);
	int first = 1;
	for (int t = 0; t < GMX_MAX_TASKS; t++) {
		const client_t *c = &SRV.cl[t];
		if (!c->used || c->dead)
			continue;
		double p50, p99;
		lat_pct(c->lat_ns, c->nlat, &p50, &p99);
		OUT("%s{\"id\":%u,\"pid\":%d,\"uid\":%d,\"name\":\"%s\",\"priority\":%d,"
		    "\"oversubscribe\":%s,\"queued\":%u,\"inflight\":%u,\"notices\":%llu,"
		    "\"grants\":%llu,\"completions\":%llu,\"allocated_bytes\":%llu,\"footprint_bytes\":%llu,"
		    "\"resident_bytes\":%llu,\"grant_latency_us\":{\"p50\":%.1f,\"p99\":%.1f,"
		    "\"samples\":%u},\"leased\":%llu,\"lease_inflight\":%u,\"leases\":%llu,"
		    "\"revokes\":%llu,\"connected_s\":%.3f}",
		    first ? "" : ",", c->id, (int)c->pid, (int)c->uid, json_str(c->name, e2, sizeof e2),
		    c->priority, c->oversub ? "true" : "false", c->queued, c->inflight,
		    (unsigned long long)c->notices, (unsigned long long)c->grants,
		    (unsigned long long)c->completions, (unsigned long long)c->alloc_bytes,
		    (unsigned long long)gmxd_mem_footprint(SRV.mem, c->task),
		    (unsigned long long)gmxd_mem_resident(SRV.mem, c->task), p50, p99,
		    c->nlat < GMXD_LAT_SAMPLES ? c->nlat : GMXD_LAT_SAMPLES, (unsigned long long)c->leased,
		    c->l_inflight, (unsigned long long)c->leases_sent, (unsigned long long)c->revokes,
		    (now - c->connected_ns) / 1e9);
		first = 0;
	}
	OUT("]}");
#undef OUT
	buf[off++] = 0;
	gmx_msg_init((gmx_msg_hdr_t *)buf, GMX_MSG_STATUS, (uint32_t)off);
	if (send(fd, buf, off, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		gmxd_log("status reply not delivered: %s", strerror(errno));
}
