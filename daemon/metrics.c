/*
 * gpumuxd's metrics: the Prometheus text exposition (format 0.0.4) of the daemon and of its
 * clients, served on the socket (METRICS_REQ, `gpumux metrics`) and over HTTP (http.c).
 * docs/metrics.md lists every family.
 *
 * A client's series are labelled by its identity (name, priority, uid, container), not by the
 * connection: clients with the same identity add up, and an identity's counters keep growing
 * across its clients' reconnections (what a dashboard's rate() wants). The pid is on
 * gpumux_client_info alone. Rendering happens on request, in the loop, from its own state.
 */
#include "server_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Upper bounds of the notice-to-grant histogram's finite buckets, in ns. */
static const uint64_t lat_bound_ns[GMXD_LAT_BUCKETS] = {
    1000,    5000,     10000,	 50000,	    100000,    500000,	   1000000,
    5000000, 10000000, 50000000, 100000000, 500000000, 1000000000, 5000000000ull};

_Static_assert(GMXD_IDENT_MAX > GMX_MAX_TASKS, "every connected client needs an identity");

static int same_ident(const gmxd_ident_t *i, const client_t *c)
{
	return i->used && i->priority == c->priority && i->uid == c->uid && !strcmp(i->name, c->name) &&
	       !strcmp(i->container, c->container);
}

void gmxd__metrics_join(client_t *c)
{
	int k = -1, oldest = -1;
	for (int i = 0; i < GMXD_IDENT_MAX && k < 0; i++)
		if (same_ident(&SRV.ident[i], c))
			k = i;
	for (int i = 0; i < GMXD_IDENT_MAX && k < 0; i++)
		if (!SRV.ident[i].used)
			k = i;
	if (k < 0) { /* full: reuse the identity unused longest that no client holds */
		for (int i = 0; i < GMXD_IDENT_MAX; i++) {
			int held = 0;
			for (int t = 0; t < GMX_MAX_TASKS && !held; t++)
				held = SRV.cl[t].used && !SRV.cl[t].dead && SRV.cl[t].ident == i &&
				       &SRV.cl[t] != c;
			if (!held && (oldest < 0 || SRV.ident[i].last_ns < SRV.ident[oldest].last_ns))
				oldest = i;
		}
		k = oldest;
		memset(&SRV.ident[k], 0, sizeof SRV.ident[k]);
	}
	gmxd_ident_t *id = &SRV.ident[k];
	if (!id->used) {
		id->used = 1;
		memcpy(id->name, c->name, sizeof id->name);
		memcpy(id->container, c->container, sizeof id->container);
		id->priority = c->priority;
		id->uid = c->uid;
	}
	id->last_ns = gmxd__now_ns();
	c->ident = k;
}

static void add_stats(gmxd_cstats_t *to, const gmxd_cstats_t *s)
{
	to->notices += s->notices;
	to->grants += s->grants;
	to->completions += s->completions;
	to->kernels += s->kernels;
	to->mig_in_bytes += s->mig_in_bytes;
	to->mig_out_bytes += s->mig_out_bytes;
	to->evictions += s->evictions;
	to->cutoffs += s->cutoffs;
	to->lat_count += s->lat_count;
	to->lat_sum_ns += s->lat_sum_ns;
	for (int b = 0; b <= GMXD_LAT_BUCKETS; b++)
		to->lat_bucket[b] += s->lat_bucket[b];
}

/* A connected client's counters, its own fields included. */
static gmxd_cstats_t client_stats(const client_t *c)
{
	gmxd_cstats_t s = c->st;
	s.notices = c->notices;
	s.grants = c->grants;
	s.completions = c->completions;
	return s;
}

void gmxd__metrics_leave(client_t *c)
{
	if (c->ident < 0 || c->ident >= GMXD_IDENT_MAX)
		return;
	gmxd_cstats_t s = client_stats(c);
	add_stats(&SRV.ident[c->ident].gone, &s);
	SRV.ident[c->ident].last_ns = gmxd__now_ns();
}

void gmxd__metrics_grant(client_t *c, int64_t latency_ns, int kernel)
{
	uint64_t ns = latency_ns > 0 ? (uint64_t)latency_ns : 0;
	int b = 0;
	while (b < GMXD_LAT_BUCKETS && ns > lat_bound_ns[b])
		b++;
	c->st.lat_bucket[b]++;
	c->st.lat_count++;
	c->st.lat_sum_ns += ns;
	c->st.kernels += kernel != 0;
}

void gmxd__metrics_refusal(const struct ucred *cr, int kind)
{
	if (kind < 0 || kind >= GMXD_REF_KINDS)
		return;
	int slot = -1;
	for (int i = 0; cr && i < GMXD_REF_UIDS && slot < 0; i++)
		if (SRV.ref_uid[i].used && SRV.ref_uid[i].uid == cr->uid)
			slot = i;
	for (int i = 0; cr && i < GMXD_REF_UIDS && slot < 0; i++)
		if (!SRV.ref_uid[i].used) {
			SRV.ref_uid[i].used = 1;
			SRV.ref_uid[i].uid = cr->uid;
			slot = i;
		}
	if (slot < 0)
		SRV.ref_other[kind]++;
	else
		SRV.ref_uid[slot].n[kind]++;
}

/* ---- rendering ---- */

typedef struct {
	char *buf;
	size_t cap, off, line; /* line: where the last complete line ends */
	int full;
} out_t;

static void put(out_t *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(out_t *o, const char *fmt, ...)
{
	if (o->full)
		return;
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(o->buf + o->off, o->cap - o->off, fmt, ap);
	va_end(ap);
	if (k < 0 || (size_t)k >= o->cap - o->off) {
		o->full = 1; /* cut at the last complete line */
		o->off = o->line;
		o->buf[o->off] = 0;
		return;
	}
	o->off += (size_t)k;
	if (o->off && o->buf[o->off - 1] == '\n')
		o->line = o->off;
}

static void family(out_t *o, const char *name, const char *type, const char *help)
{
	put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A label value: backslash, double quote and newline escaped (names are printable already). */
static const char *lv(const char *s, char *out, size_t len)
{
	size_t k = 0;
	for (; *s && k + 3 < len; s++) {
		if (*s == '\\' || *s == '"')
			out[k++] = '\\';
		if (*s == '\n') {
			out[k++] = '\\';
			out[k++] = 'n';
			continue;
		}
		out[k++] = *s;
	}
	out[k] = 0;
	return out;
}

/* Per identity: the counters (gone + connected), the gauges of its connected clients. */
typedef struct {
	gmxd_cstats_t s;
	int connected;
	uint32_t queued, inflight;
	uint64_t alloc, resident;
	int64_t oldest_ns; /* notice time of its oldest command waiting for a grant; 0: none */
	char labels[GMX_NAME_MAX * 2 + GMXD_CONTAINER_ID_MAX + 96];
} agg_t;

static agg_t agg[GMXD_IDENT_MAX];

static void aggregate(void)
{
	for (int i = 0; i < GMXD_IDENT_MAX; i++) {
		const gmxd_ident_t *id = &SRV.ident[i];
		memset(&agg[i], 0, sizeof agg[i]);
		if (!id->used)
			continue;
		agg[i].s = id->gone;
		char nm[GMX_NAME_MAX * 2];
		snprintf(agg[i].labels, sizeof agg[i].labels,
			 "name=\"%s\",priority=\"%d\",uid=\"%u\",container=\"%s\"",
			 lv(id->name, nm, sizeof nm), id->priority, (unsigned)id->uid, id->container);
	}
	for (int t = 0; t < GMX_MAX_TASKS; t++) {
		const client_t *c = &SRV.cl[t];
		if (!c->used || c->dead || c->ident < 0 || c->ident >= GMXD_IDENT_MAX)
			continue;
		agg_t *a = &agg[c->ident];
		gmxd_cstats_t s = client_stats(c);
		add_stats(&a->s, &s);
		a->connected++;
		a->queued += c->queued;
		a->inflight += c->inflight;
		a->alloc += c->alloc_bytes;
		a->resident += gmxd_mem_resident(SRV.mem, c->task);
		for (int h = 0; h < HASH; h++)
			for (const dcmd_t *d = c->hash[h]; d; d = d->hnext)
				if (d->state == D_QUEUED && (!a->oldest_ns || d->notice_ns < a->oldest_ns))
					a->oldest_ns = d->notice_ns;
	}
}

/* One series per identity of a counter or gauge read from agg_t by `get`. */
#define PER_IDENT(o, name, type, help, expr)                                                                 \
	do {                                                                                                 \
		family(o, name, type, help);                                                                 \
		for (int i_ = 0; i_ < GMXD_IDENT_MAX; i_++) {                                                \
			const agg_t *a = &agg[i_];                                                           \
			if (SRV.ident[i_].used)                                                              \
				put(o, "%s{%s} %llu\n", name, a->labels, (unsigned long long)(expr));        \
		}                                                                                            \
	} while (0)

static const char *const ref_reason[GMXD_REF_KINDS] = {"not_allowed", "busy",	 "malformed",
						       "version",     "timeout", "resources"};

static void render_daemon(out_t *o, int64_t now)
{
	int live = 0;
	for (int t = 0; t < GMX_MAX_TASKS; t++)
		live += SRV.cl[t].used && !SRV.cl[t].dead;
	family(o, "gpumux_up", "gauge", "1 while gpumuxd is running and answering.");
	put(o, "gpumux_up 1\n");
	family(o, "gpumux_build_info", "gauge", "The daemon's version and protocol; always 1.");
	put(o, "gpumux_build_info{version=\"%s\",protocol=\"%u\"} 1\n", GMX_VERSION, GMX_PROTO_VERSION);
	family(o, "gpumux_policy_info", "gauge", "The scheduling policy in force; always 1.");
	put(o, "gpumux_policy_info{policy=\"%s\"} 1\n", SRV.ops->name);
	family(o, "gpumux_slice_seconds", "gauge", "The policy's time slice.");
	put(o, "gpumux_slice_seconds %.6f\n", SRV.cfg->slice_us / 1e6);
	family(o, "gpumux_uptime_seconds", "gauge", "Time since the daemon started.");
	put(o, "gpumux_uptime_seconds %.3f\n", (now - SRV.start_ns) / 1e9);
	const struct {
		const char *name, *type, *help;
		unsigned long long v;
	} scalar[] = {
	    {"gpumux_clients", "gauge", "Clients connected.", (unsigned long long)live},
	    {"gpumux_clients_max", "gauge", "Clients the daemon accepts at most (max_clients).",
	     (unsigned long long)SRV.cfg->max_clients},
	    {"gpumux_connections_pending", "gauge", "Connections that have not sent their first message.",
	     SRV.n_pend},
	    {"gpumux_device_memory_bytes", "gauge",
	     "Device memory the planner may fill with oversubscribed clients' allocations.", SRV.mem_cap},
	    {"gpumux_device_memory_resident_bytes", "gauge",
	     "Oversubscribed clients' memory resident on the device, in the planner's model.",
	     gmxd_mem_resident(SRV.mem, GMX_MAX_TASKS)},
	    {"gpumux_grants_total", "counter", "Commands granted, every client.", SRV.total_grants},
	    {"gpumux_host_waits_total", "counter",
	     "Host threads that blocked on the device with work outstanding.", SRV.host_waits},
	    {"gpumux_cutoffs_total", "counter",
	     "Clients cut off (unresponsive, full ring, malformed messages).", SRV.cut_off},
	    {"gpumux_protocol_errors_total", "counter", "Malformed messages received.", SRV.protocol_errors},
	    {"gpumux_memory_plans_total", "counter",
	     "Memory plans made before grants to oversubscribed clients.", SRV.mig_plans},
	    {"gpumux_migrated_in_bytes_total", "counter", "Bytes the planner ordered loaded to the device.",
	     SRV.mig_load_bytes},
	    {"gpumux_migrated_out_bytes_total", "counter", "Bytes the planner ordered evicted to the host.",
	     SRV.mig_evict_bytes},
	    {"gpumux_demand_paged_bytes_total", "counter",
	     "Bytes of working sets that did not fit the device, left to demand paging.",
	     SRV.mig_short_bytes},
	};
	for (size_t i = 0; i < sizeof scalar / sizeof scalar[0]; i++) {
		family(o, scalar[i].name, scalar[i].type, scalar[i].help);
		put(o, "%s %llu\n", scalar[i].name, scalar[i].v);
	}
	family(o, "gpumux_refusals_total", "counter", "Connections refused, by reason and the peer's uid.");
	for (int i = 0; i < GMXD_REF_UIDS; i++)
		for (int k = 0; SRV.ref_uid[i].used && k < GMXD_REF_KINDS; k++)
			if (SRV.ref_uid[i].n[k])
				put(o, "gpumux_refusals_total{reason=\"%s\",uid=\"%u\"} %llu\n",
				    ref_reason[k], (unsigned)SRV.ref_uid[i].uid,
				    (unsigned long long)SRV.ref_uid[i].n[k]);
	for (int k = 0; k < GMXD_REF_KINDS; k++)
		if (SRV.ref_other[k])
			put(o, "gpumux_refusals_total{reason=\"%s\",uid=\"other\"} %llu\n", ref_reason[k],
			    (unsigned long long)SRV.ref_other[k]);
}

static void render_clients(out_t *o, int64_t now)
{
	family(o, "gpumux_client_info", "gauge",
	       "A connected client: its identity's labels, pid and connection id; always 1.");
	for (int t = 0; t < GMX_MAX_TASKS; t++) {
		const client_t *c = &SRV.cl[t];
		if (c->used && !c->dead && c->ident >= 0 && c->ident < GMXD_IDENT_MAX)
			put(o, "gpumux_client_info{%s,pid=\"%d\",client_id=\"%u\",oversubscribe=\"%s\"} 1\n",
			    agg[c->ident].labels, (int)c->pid, c->id, c->oversub ? "true" : "false");
	}
	PER_IDENT(o, "gpumux_client_connected", "gauge", "Clients of this identity connected now.",
		  a->connected);
	PER_IDENT(o, "gpumux_client_notices_total", "counter", "Commands announced (launch notices).",
		  a->s.notices);
	PER_IDENT(o, "gpumux_client_grants_total", "counter", "Commands granted.", a->s.grants);
	PER_IDENT(o, "gpumux_client_kernels_total", "counter",
		  "Kernel launches granted or released under a lease.", a->s.kernels);
	PER_IDENT(o, "gpumux_client_completions_total", "counter", "Granted commands reported complete.",
		  a->s.completions);
	PER_IDENT(o, "gpumux_client_queued_commands", "gauge", "Commands announced and waiting for a grant.",
		  a->queued);
	PER_IDENT(o, "gpumux_client_inflight_commands", "gauge", "Commands granted and not yet complete.",
		  a->inflight);
	family(o, "gpumux_client_queue_delay_seconds", "gauge",
	       "How long the oldest command waiting for a grant has waited (0: none waits).");
	for (int i = 0; i < GMXD_IDENT_MAX; i++)
		if (SRV.ident[i].used)
			put(o, "gpumux_client_queue_delay_seconds{%s} %.9f\n", agg[i].labels,
			    agg[i].oldest_ns && now > agg[i].oldest_ns ? (now - agg[i].oldest_ns) / 1e9
								       : 0.0);
	family(o, "gpumux_client_grant_latency_seconds", "histogram",
	       "Time from a command's launch notice to its grant.");
	for (int i = 0; i < GMXD_IDENT_MAX; i++) {
		if (!SRV.ident[i].used)
			continue;
		const agg_t *a = &agg[i];
		uint64_t cum = 0;
		for (int b = 0; b < GMXD_LAT_BUCKETS; b++) {
			cum += a->s.lat_bucket[b];
			put(o, "gpumux_client_grant_latency_seconds_bucket{%s,le=\"%g\"} %llu\n", a->labels,
			    lat_bound_ns[b] / 1e9, (unsigned long long)cum);
		}
		put(o, "gpumux_client_grant_latency_seconds_bucket{%s,le=\"+Inf\"} %llu\n", a->labels,
		    (unsigned long long)a->s.lat_count);
		put(o, "gpumux_client_grant_latency_seconds_sum{%s} %.9f\n", a->labels,
		    a->s.lat_sum_ns / 1e9);
		put(o, "gpumux_client_grant_latency_seconds_count{%s} %llu\n", a->labels,
		    (unsigned long long)a->s.lat_count);
	}
	PER_IDENT(o, "gpumux_client_migrated_in_bytes_total", "counter",
		  "Bytes ordered loaded to the device for this client.", a->s.mig_in_bytes);
	PER_IDENT(o, "gpumux_client_migrated_out_bytes_total", "counter",
		  "Bytes ordered evicted from the device to the host from this client.", a->s.mig_out_bytes);
	PER_IDENT(o, "gpumux_client_evictions_total", "counter", "Eviction orders sent to this client.",
		  a->s.evictions);
	PER_IDENT(o, "gpumux_client_allocated_bytes", "gauge",
		  "Managed memory allocated (oversubscribed clients).", a->alloc);
	PER_IDENT(o, "gpumux_client_resident_bytes", "gauge",
		  "Of it, resident on the device in the planner's model.", a->resident);
	PER_IDENT(o, "gpumux_client_cutoffs_total", "counter", "Clients of this identity cut off.",
		  a->s.cutoffs);
}

size_t gmxd__metrics_render(char *buf, size_t cap, int64_t now)
{
	out_t o = {.buf = buf, .cap = cap};
	if (!cap)
		return 0;
	buf[0] = 0;
	aggregate();
	render_daemon(&o, now);
	render_clients(&o, now);
	if (o.full)
		gmxd_log("metrics: the exposition exceeds %zu bytes; cut after %zu", cap, o.off);
	return o.off;
}

void gmxd__metrics_reply(int fd)
{
	static char text[GMXD_METRICS_MAX];
	static char msg[sizeof(gmx_msg_metrics_t) + GMXD_METRICS_CHUNK];
	size_t len = gmxd__metrics_render(text, sizeof text, gmxd__now_ns());
	/* Room for the whole reply if the kernel allows (SO_SNDBUFFORCE needs CAP_NET_ADMIN). */
	int want = (int)(2 * GMXD_METRICS_MAX);
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &want, sizeof want) != 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &want, sizeof want);
	size_t off = 0;
	do {
		size_t n = len - off < GMXD_METRICS_CHUNK ? len - off : GMXD_METRICS_CHUNK;
		gmx_msg_metrics_t *m = (gmx_msg_metrics_t *)msg;
		gmx_msg_init(&m->h, GMX_MSG_METRICS, (uint32_t)(sizeof *m + n));
		m->flags = off + n == len ? GMX_METRICS_LAST : 0;
		m->reserved = 0;
		memcpy(msg + sizeof *m, text + off, n);
		if (send(fd, msg, sizeof *m + n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
			gmxd_log("metrics reply cut after %zu of %zu bytes: %s", off, len, strerror(errno));
			return;
		}
		off += n;
	} while (off < len);
}
