/*
 * gpumuxd's event loop: clients, the shared rings, and the real-time gmx_device_t the core
 * policy drives (now = CLOCK_MONOTONIC, submit = a grant in the client's down ring,
 * migrate = a migration order, set_timer = a timerfd).
 *
 * Policy calls never re-enter: work that must reach the policy while it is running (a
 * command of a dead client being submitted, which completes at once) goes to a deferred list
 * drained after the call returns. Cutting a client off also happens only at the top of the
 * loop, never from inside a policy call.
 *
 * Memory (clients registered with oversubscription): at each grant, the memory planner
 * (memplan.c, core's timeline planner underneath) makes the granted command's working set
 * resident: the ranges its client predicted from templates, or, for a command with no
 * prediction, every allocation of the client. The coming slices are the granted task's other
 * queued commands, then the other tasks in the timeline order of core/mplan.c. Evictions go
 * to their owners at once; the loads and the grant wait until every eviction is
 * acknowledged; the client runs the orders in ring order, so a kernel is released only after
 * its memory is in.
 */
#define _GNU_SOURCE
#include "daemon.h"
#include "gpumux/kprofile.h"
#include "gpumux/mplan.h"
#include "kprof_file.h"
#include "memplan.h"

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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define HASH 256
#define PENDING_MAX 64
#define PENDING_TIMEOUT_NS 2000000000LL /* a connection must say HELLO or STATUS_REQ by then */

enum { D_QUEUED, D_GRANTED, D_ORPHAN };
enum { EV_LISTEN = 1, EV_SIGNAL, EV_TIMER, EV_PENDING, EV_SOCK, EV_EFD };

typedef struct client client_t;

typedef struct dcmd {
    gmx_cmd_t c; /* what the policy sees; first, so a gmx_cmd_t* is a dcmd_t* */
    uint64_t cseq;
    client_t *cl;
    int state;
    int64_t notice_ns;
    gmx_tpl_range_t *ranges; /* predicted working set, or NULL: every allocation */
    uint32_t nranges;
    struct dcmd *hnext, *dnext;
} dcmd_t;

typedef struct {
    uint64_t ptr, size;
} dalloc_t;

struct client {
    int used, dead, cut;
    uint32_t id, task;
    int fd, efd_up, efd_down;
    gmx_shm_region_t *region;
    pid_t pid;
    uid_t uid;
    char name[GMX_NAME_MAX];
    int priority, oversub;
    dcmd_t *hash[HASH];
    uint32_t queued, inflight, refs, evicts;
    uint64_t notices, grants, completions;
    int64_t last_progress, connected_ns, last_grant_ns;
    dalloc_t *allocs;
    int nallocs;
    uint64_t alloc_bytes;
    /* RANGE entries waiting for the notice of command rseq */
    uint64_t rseq;
    uint32_t nr;
    gmx_tpl_range_t rbuf[GMX_RANGES_MAX];
    uint32_t lat_ns[GMXD_LAT_SAMPLES];
    uint32_t nlat;
    char cut_reason[192];
};

typedef struct {
    int fd;
    int64_t since;
} pending_t;

/* A ring entry waiting for evictions to be acknowledged before it may be sent. */
typedef struct action {
    struct action *next;
    uint32_t task, client_id;
    gmx_ring_entry_t e;
} action_t;

static struct {
    const gmxd_config_t *cfg;
    int ep, lfd, sfd, tfd;
    char sock_path[300];
    const gmx_policy_ops_t *ops;
    gmx_policy_t *pol;
    int in_policy;
    client_t cl[GMX_MAX_TASKS];
    pending_t pend[PENDING_MAX];
    uint32_t next_id;
    uint64_t seq, tokens;
    dcmd_t *deferred;
    action_t *act_head, *act_tail;
    uint32_t evicts_outstanding;
    uint64_t mem_cap;
    gmxd_mem_t *mem;
    uint64_t mig_load_bytes, mig_evict_bytes, mig_short_bytes, mig_plans, host_waits;
    int64_t start_ns, timer_at;
    uint64_t refused, cut_off, protocol_errors, total_grants;
    int stop;
    /* Kernel profiles by task name, kept for the daemon's lifetime so a client that comes
     * back under the same name is not measured again (policies with GMX_POLICY_PROFILES). */
    struct {
        char name[GMX_NAME_MAX];
        gmx_kprof_t prof;
        int used;
    } store[GMX_MAX_TASKS];
    gmx_kprof_t *prof_ptr[GMX_MAX_TASKS];
    /* Recent notice-to-grant latencies of high-priority clients (priority 0..2), kept after
     * the clients leave: what `gpumux status` reports as recent HP latency. */
    uint32_t hp_lat[GMXD_LAT_SAMPLES];
    uint32_t n_hp_lat;
} S;

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

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static uint64_t ev_data(int type, uint32_t idx)
{
    return ((uint64_t)type << 32) | idx;
}

static void ep_add(int fd, int type, uint32_t idx)
{
    struct epoll_event e = {.events = EPOLLIN, .data.u64 = ev_data(type, idx)};
    if (epoll_ctl(S.ep, EPOLL_CTL_ADD, fd, &e) != 0)
        gmxd_log("epoll_ctl(ADD): %s", strerror(errno));
}

static void ep_del(int fd)
{
    epoll_ctl(S.ep, EPOLL_CTL_DEL, fd, NULL);
}

/* ---- the device the policy drives ---- */

static int64_t dev_now(void *ctx)
{
    (void)ctx;
    return now_ns();
}

static void dev_set_timer(void *ctx, int64_t at)
{
    (void)ctx;
    S.timer_at = at;
    struct itimerspec it = {0};
    if (at <= 0)
        at = 1; /* "now": an absolute time in the past fires at once */
    it.it_value.tv_sec = at / 1000000000LL;
    it.it_value.tv_nsec = at % 1000000000LL;
    if (timerfd_settime(S.tfd, TFD_TIMER_ABSTIME, &it, NULL) != 0)
        gmxd_log("timerfd_settime: %s", strerror(errno));
}

static void cut(client_t *c, const char *why)
{
    if (c->cut || c->dead)
        return;
    c->cut = 1;
    snprintf(c->cut_reason, sizeof c->cut_reason, "%s", why);
}

/* Pushes to a client's down ring, waking it if it sleeps; a full ring cuts it off. */
static void push_down(client_t *c, const gmx_ring_entry_t *e)
{
    if (c->dead || c->cut)
        return;
    int w = 0;
    if (gmx_ring_push(&c->region->down, e, &w) != 0) {
        cut(c, "its grant ring is full (it stopped reading)");
        return;
    }
    if (w) {
        uint64_t one = 1;
        if (write(c->efd_down, &one, sizeof one) < 0 && errno != EAGAIN)
            gmxd_log("client %u: eventfd write: %s", c->id, strerror(errno));
    }
}

/* Sends now, or after the outstanding evictions when there are any (keeps ring order). */
static void send_action(client_t *c, const gmx_ring_entry_t *e)
{
    if (S.evicts_outstanding == 0 && !S.act_head) {
        push_down(c, e);
        return;
    }
    action_t *a = malloc(sizeof *a);
    if (!a) {
        cut(c, "out of memory queueing its grant");
        return;
    }
    *a = (action_t){NULL, c->task, c->id, *e};
    if (S.act_tail)
        S.act_tail->next = a;
    else
        S.act_head = a;
    S.act_tail = a;
}

static void flush_actions(void)
{
    while (S.evicts_outstanding == 0 && S.act_head) {
        action_t *a = S.act_head;
        S.act_head = a->next;
        if (!S.act_head)
            S.act_tail = NULL;
        client_t *c = &S.cl[a->task];
        if (c->used && c->id == a->client_id)
            push_down(c, &a->e);
        free(a);
    }
}

/* Sends one order of the memory planner: loads (always the granted client's) after the
 * outstanding evictions, evictions to their owner at once. */
static void emit_order(void *ctx, uint32_t task, int to_device, uint64_t ptr, uint64_t len)
{
    (void)ctx;
    client_t *v = &S.cl[task];
    gmx_ring_entry_t e = {.type = GMX_DOWN_MIGRATE, .a = to_device ? 1 : 0, .seq = ++S.tokens,
                          .x = ptr, .y = len};
    if (v->dead || v->cut)
        return;
    if (to_device) {
        send_action(v, &e);
        return;
    }
    push_down(v, &e);
    if (!v->cut) {
        v->evicts++;
        S.evicts_outstanding++;
    }
}

static int cmp_seq(const void *a, const void *b)
{
    uint64_t x = (*(dcmd_t *const *)a)->c.seq, y = (*(dcmd_t *const *)b)->c.seq;
    return x < y ? -1 : x > y;
}

/* One slice per task: its queued commands (but skip) in launch order, their ranges
 * appended to *buf from *start on; whole when one of them has no prediction. sl->r is set
 * by the caller once *buf stops moving. 0 or -ENOMEM. */
static int task_slice(client_t *c, const dcmd_t *skip, gmxd_mem_slice_t *sl, gmx_tpl_range_t **buf,
                      uint32_t *len, uint32_t *cap, uint32_t *start)
{
    dcmd_t *q[256];
    uint32_t nq = 0;
    *sl = (gmxd_mem_slice_t){.task = c->task};
    for (int h = 0; h < HASH; h++)
        for (dcmd_t *d = c->hash[h]; d; d = d->hnext)
            if (d != skip && d->state == D_QUEUED) {
                if (!d->nranges)
                    sl->whole = 1;
                else if (nq < sizeof q / sizeof q[0])
                    q[nq++] = d; /* the furthest commands of a long queue matter least */
            }
    if (sl->whole)
        return 0;
    qsort(q, nq, sizeof q[0], cmp_seq);
    *start = *len;
    for (uint32_t i = 0; i < nq; i++) {
        if (*len + q[i]->nranges > *cap) {
            uint32_t nc = (*cap ? *cap * 2 : 1024) + q[i]->nranges;
            gmx_tpl_range_t *nb = realloc(*buf, nc * sizeof *nb);
            if (!nb)
                return -ENOMEM;
            *buf = nb;
            *cap = nc;
        }
        memcpy(*buf + *len, q[i]->ranges, q[i]->nranges * sizeof **buf);
        *len += q[i]->nranges;
    }
    sl->n = *len - *start;
    return 0;
}

/* Makes d's working set resident before its grant (clients registered with
 * oversubscription). */
static void plan_memory(client_t *c, dcmd_t *d)
{
    if (!c->oversub)
        return;
    gmxd_mem_slice_t sl[GMX_MAX_TASKS + 1];
    sl[0] = (gmxd_mem_slice_t){c->task, d->nranges == 0, d->ranges, d->nranges};
    if (gmxd_mem_ready(S.mem, &sl[0]))
        return;
    int prio[GMX_MAX_TASKS];
    uint8_t runnable[GMX_MAX_TASKS];
    uint32_t order[GMX_MAX_TASKS];
    for (int t = 0; t < GMX_MAX_TASKS; t++) {
        const client_t *o = &S.cl[t];
        prio[t] = o->priority;
        runnable[t] = o->used && !o->dead && !o->cut && o->oversub && o->queued > 0;
    }
    uint32_t n_order = gmx_timeline_order(prio, runnable, GMX_MAX_TASKS, c->task, order);
    gmx_tpl_range_t *buf = NULL;
    uint32_t len = 0, cap = 0, n = 1, start[GMX_MAX_TASKS + 1] = {0};
    for (uint32_t k = 0; k < n_order; k++)
        if (task_slice(&S.cl[order[k]], d, &sl[n], &buf, &len, &cap, &start[n]) == 0)
            n++;
    for (uint32_t k = 1; k < n; k++)
        sl[k].r = sl[k].whole ? NULL : buf + start[k];
    gmxd_mem_stats_t st;
    int rc = gmxd_mem_plan(S.mem, sl, n, emit_order, NULL, &st);
    free(buf);
    if (rc) {
        gmxd_log("client %u (%s): memory plan failed: %s; its kernel pages on demand", c->id,
                 c->name, strerror(-rc));
        return;
    }
    S.mig_plans++;
    S.mig_load_bytes += st.load_bytes;
    S.mig_evict_bytes += st.evict_bytes;
    S.mig_short_bytes += st.short_bytes;
}

static int dev_submit(void *ctx, gmx_cmd_t *cmd)
{
    (void)ctx;
    dcmd_t *d = (dcmd_t *)cmd;
    client_t *c = d->cl;
    if (d->state == D_ORPHAN || c->dead || c->cut) {
        d->state = D_ORPHAN;
        d->dnext = S.deferred; /* completes at once, after this policy call */
        S.deferred = d;
        return 0;
    }
    int64_t now = now_ns();
    d->state = D_GRANTED;
    c->queued--;
    if (c->inflight++ == 0)
        c->last_progress = now;
    c->grants++;
    S.total_grants++;
    c->last_grant_ns = now;
    uint32_t lat = (uint32_t)(now - d->notice_ns > 0xffffffffLL ? 0xffffffffLL : now - d->notice_ns);
    c->lat_ns[c->nlat++ % GMXD_LAT_SAMPLES] = lat;
    if (c->priority <= 2)
        S.hp_lat[S.n_hp_lat++ % GMXD_LAT_SAMPLES] = lat;
    plan_memory(c, d);
    gmx_ring_entry_t e = {.type = GMX_DOWN_GRANT, .seq = d->cseq};
    send_action(c, &e);
    return 0;
}

/* Orders from a policy that plans memory itself: buffer = the task's allocation index. */
static int dev_migrate(void *ctx, const gmx_migration_t *m)
{
    (void)ctx;
    if (m->task >= GMX_MAX_TASKS || !S.cl[m->task].used)
        return -ENOENT;
    client_t *c = &S.cl[m->task];
    if (m->buffer >= (uint32_t)c->nallocs)
        return -ENOENT;
    dalloc_t *a = &c->allocs[m->buffer];
    uint64_t off = m->offset < a->size ? m->offset : a->size;
    uint64_t len = m->length < a->size - off ? m->length : a->size - off;
    gmx_ring_entry_t e = {.type = GMX_DOWN_MIGRATE, .a = m->to_device ? 1 : 0,
                          .seq = ++S.tokens, .x = a->ptr + off, .y = len};
    send_action(c, &e);
    return 0;
}

static void maybe_free_slot(client_t *c);

static void dcmd_free(dcmd_t *d)
{
    free(d->ranges);
    free(d);
}

/* Completes what was deferred during policy calls. */
static void run_deferred(void)
{
    while (S.deferred) {
        dcmd_t *d = S.deferred;
        S.deferred = d->dnext;
        client_t *c = d->cl;
        S.ops->on_complete(S.pol, &d->c);
        dcmd_free(d);
        c->refs--;
        maybe_free_slot(c);
    }
}

/* ---- clients ---- */

static void hash_put(client_t *c, dcmd_t *d)
{
    size_t h = (size_t)(d->cseq * 0x9E3779B97F4A7C15ull >> 56) % HASH;
    d->hnext = c->hash[h];
    c->hash[h] = d;
}

static dcmd_t *hash_take(client_t *c, uint64_t cseq, int remove)
{
    size_t h = (size_t)(cseq * 0x9E3779B97F4A7C15ull >> 56) % HASH;
    for (dcmd_t **pp = &c->hash[h]; *pp; pp = &(*pp)->hnext)
        if ((*pp)->cseq == cseq) {
            dcmd_t *d = *pp;
            if (remove)
                *pp = d->hnext;
            return d;
        }
    return NULL;
}

/* Frees a dead client's slot once the policy holds none of its commands. */
static void maybe_free_slot(client_t *c)
{
    if (!c->dead || c->refs > 0)
        return;
    free(c->allocs);
    memset(c, 0, sizeof *c);
}

/* Ends a client: everything it held is released now (in-flight commands complete for the
 * policy, queued ones complete when the policy hands them out, memory is forgotten). */
/* The profile file of task `name` under profile_dir, or -1 when the name
 * cannot name a file safely (anything but letters, digits, '.', '_', '-'). */
static int profile_path(const char *name, char *out, size_t len)
{
    if (!name[0] || name[0] == '.' || !S.cfg->profile_dir[0])
        return -1;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '_' || *p == '-'))
            return -1;
    int n = snprintf(out, len, "%s/%s.gmxprof", S.cfg->profile_dir, name);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* Loads the stored profile of `name` into *p (initialised) when there is one;
 * a missing file is normal (the task is measured first), a bad one is logged. */
static void profile_load(const char *name, gmx_kprof_t *p)
{
    char path[512], err[512];
    if (profile_path(name, path, sizeof path) || access(path, R_OK) != 0)
        return;
    gmx_kprof_t *v = NULL;
    uint32_t n = 0;
    if (gmx_profile_read(path, &v, &n, err, sizeof err)) {
        gmxd_log("profile store: %s (ignored; the task is measured again)", err);
        return;
    }
    for (uint32_t i = 0; i < n; i++)
        if (v[i].task && strcmp(v[i].task, name) == 0) {
            gmx_kprof_free(p);
            *p = v[i];
            memset(&v[i], 0, sizeof v[i]);
            gmxd_log("profile store: loaded %s (%u kernels)", path, p->n);
            break;
        }
    gmx_profile_free(v, n);
}

/* Writes the profile of `name` to the store, when it has learned anything. */
static void profile_save(const char *name, gmx_kprof_t *p)
{
    char path[512], err[512];
    if (!p->n || profile_path(name, path, sizeof path))
        return;
    /* Create the store's folders on first use (mkdir -p). */
    char dir[512];
    snprintf(dir, sizeof dir, "%s", S.cfg->profile_dir);
    for (char *q = dir + 1; *q; q++)
        if (*q == '/') {
            *q = 0;
            mkdir(dir, 0755);
            *q = '/';
        }
    mkdir(dir, 0755);
    /* A snapshot: the store's profile may still be measured by a policy that holds it. */
    gmx_kprof_t snap;
    if (gmx_kprof_snapshot(p, &snap)) {
        gmxd_log("profile store: cannot save %s: out of memory", path);
        return;
    }
    if (gmx_profile_write(path, &snap, 1, err, sizeof err))
        gmxd_log("profile store: cannot save: %s", err);
    else
        gmxd_log("profile store: saved %s (%u kernels)", path, snap.n);
    gmx_kprof_free(&snap);
}

static void drop_client(client_t *c, const char *why)
{
    if (c->dead)
        return;
    gmxd_log("client %u (pid %d, %s): %s; releasing %u in flight, %u queued, %llu bytes", c->id,
             (int)c->pid, c->name, why, c->inflight, c->queued,
             (unsigned long long)c->alloc_bytes);
    c->dead = 1;
    ep_del(c->fd);
    ep_del(c->efd_up);
    close(c->fd);
    close(c->efd_up);
    close(c->efd_down);
    munmap(c->region, sizeof(gmx_shm_region_t));
    S.evicts_outstanding -= c->evicts;
    c->evicts = 0;
    gmxd_mem_drop(S.mem, c->task);
    c->nr = 0;
    for (int i = 0; i < HASH; i++) {
        for (dcmd_t *d = c->hash[i], *nx; d; d = nx) {
            nx = d->hnext;
            if (d->state == D_GRANTED) {
                d->state = D_ORPHAN;
                d->dnext = S.deferred;
                S.deferred = d;
            } else {
                d->state = D_ORPHAN; /* still in the policy's queue */
            }
        }
        c->hash[i] = NULL;
    }
    c->inflight = c->queued = 0;
    /* run_deferred() may free the slot (and zero *c) once its last command
     * completes: keep the task's index for the policy. */
    uint32_t task = c->task;
    S.in_policy = 1;
    run_deferred();
    S.ops->task_done(S.pol, task);
    run_deferred();
    S.in_policy = 0;
    flush_actions();
    /* A task's profile is saved when the last client of its name leaves (and at shutdown),
     * so a daemon that is killed later loses nothing that task taught it. */
    int same_name = 0;
    for (int t = 0; t < GMX_MAX_TASKS; t++)
        same_name += S.cl[t].used && !S.cl[t].dead && strcmp(S.cl[t].name, c->name) == 0;
    for (int i = 0; i < GMX_MAX_TASKS && !same_name; i++)
        if (S.store[i].used && strcmp(S.store[i].name, c->name) == 0)
            profile_save(S.store[i].name, &S.store[i].prof);
    maybe_free_slot(c);
}

static void protocol_error(client_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void protocol_error(client_t *c, const char *fmt, ...)
{
    char why[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    S.protocol_errors++;
    cut(c, why);
}

static void up_entry(client_t *c, const gmx_ring_entry_t *e)
{
    switch (e->type) {
    case GMX_UP_NOTICE: {
        if (hash_take(c, e->seq, 0)) {
            protocol_error(c, "malformed message: a second notice for seq %llu",
                           (unsigned long long)e->seq);
            return;
        }
        if (e->a >= GMX_CMD_KIND_COUNT_PROTO) {
            protocol_error(c, "malformed message: command kind %u", e->a);
            return;
        }
        if (c->nr && c->rseq != e->seq) {
            protocol_error(c, "malformed message: predicted ranges of seq %llu, then the notice "
                              "of seq %llu", (unsigned long long)c->rseq,
                           (unsigned long long)e->seq);
            return;
        }
        dcmd_t *d = calloc(1, sizeof *d);
        if (d && c->nr) {
            d->ranges = malloc(c->nr * sizeof *d->ranges);
            if (d->ranges) {
                memcpy(d->ranges, c->rbuf, c->nr * sizeof *d->ranges);
                d->nranges = c->nr;
            }
        }
        c->nr = 0;
        if (!d) {
            cut(c, "out of memory for its notice");
            return;
        }
        d->cseq = e->seq;
        d->cl = c;
        d->state = D_QUEUED;
        d->notice_ns = now_ns();
        d->c.seq = ++S.seq;
        d->c.task = c->task;
        d->c.stream = 0;
        d->c.kind = e->a == GMX_PROTO_KIND_COPY ? GMX_OP_COPY_H2D
                    : e->a == GMX_PROTO_KIND_MEMSET ? GMX_OP_MEMSET : GMX_OP_KERNEL;
        d->c.kernel_id = e->x;
        hash_put(c, d);
        c->refs++;
        c->queued++;
        c->notices++;
        S.ops->on_launch(S.pol, &d->c);
        return;
    }
    case GMX_UP_COMPLETE: {
        dcmd_t *d = hash_take(c, e->seq, 0);
        if (!d || d->state != D_GRANTED) {
            protocol_error(c, "malformed message: completion of seq %llu, which was not granted",
                           (unsigned long long)e->seq);
            return;
        }
        hash_take(c, e->seq, 1);
        c->inflight--;
        c->completions++;
        c->last_progress = now_ns();
        S.ops->on_complete(S.pol, &d->c);
        c->refs--;
        dcmd_free(d);
        return;
    }
    case GMX_UP_ALLOC:
        if (c->nallocs >= GMXD_ALLOCS_PER_CLIENT || e->y == 0) {
            protocol_error(c, "malformed message: allocation %d of %llu bytes", c->nallocs,
                           (unsigned long long)e->y);
            return;
        }
        if (!c->allocs) {
            c->allocs = calloc(GMXD_ALLOCS_PER_CLIENT, sizeof *c->allocs);
            if (!c->allocs) {
                cut(c, "out of memory for its allocations");
                return;
            }
        }
        if (gmxd_mem_alloc(S.mem, c->task, e->x, e->y) != 0) {
            protocol_error(c, "malformed message: allocation %#llx of %llu bytes overlaps another",
                           (unsigned long long)e->x, (unsigned long long)e->y);
            return;
        }
        c->allocs[c->nallocs++] = (dalloc_t){e->x, e->y};
        c->alloc_bytes += e->y;
        return;
    case GMX_UP_FREE:
        for (int i = 0; i < c->nallocs; i++)
            if (c->allocs[i].ptr == e->x) {
                c->alloc_bytes -= c->allocs[i].size;
                gmxd_mem_free(S.mem, c->task, e->x);
                /* Keep indices stable for policies that name buffers by index. */
                memmove(&c->allocs[i], &c->allocs[i + 1],
                        (size_t)(c->nallocs - i - 1) * sizeof *c->allocs);
                c->nallocs--;
                return;
            }
        protocol_error(c, "malformed message: free of unknown address %#llx",
                       (unsigned long long)e->x);
        return;
    case GMX_UP_MIG_DONE:
        if (e->a == 0 && c->evicts > 0) {
            c->evicts--;
            S.evicts_outstanding--;
            c->last_progress = now_ns();
        }
        return;
    case GMX_UP_HOST_WAIT:
        S.host_waits++;
        if (S.ops->on_host_wait)
            S.ops->on_host_wait(S.pol, c->task);
        return;
    case GMX_UP_RANGE:
        if (c->nr && c->rseq != e->seq) {
            protocol_error(c, "malformed message: predicted ranges of seq %llu, then of seq %llu "
                              "without its notice", (unsigned long long)c->rseq,
                           (unsigned long long)e->seq);
            return;
        }
        if (c->nr >= GMX_RANGES_MAX || e->y == 0 || e->x + e->y < e->x) {
            protocol_error(c, "malformed message: predicted range %u of seq %llu (%#llx, %llu "
                              "bytes)", c->nr, (unsigned long long)e->seq,
                           (unsigned long long)e->x, (unsigned long long)e->y);
            return;
        }
        c->rseq = e->seq;
        c->rbuf[c->nr++] = (gmx_tpl_range_t){e->x, e->y};
        return;
    default:
        protocol_error(c, "malformed message: ring entry type %u", e->type);
    }
}

/* Drains every client's up ring; returns the number of entries taken. */
static int poll_rings(void)
{
    int n = 0;
    S.in_policy = 1;
    for (int t = 0; t < GMX_MAX_TASKS; t++) {
        client_t *c = &S.cl[t];
        if (!c->used || c->dead)
            continue;
        gmx_ring_entry_t e;
        int r;
        /* Bounded per client per round, so one flooding client cannot starve the others. */
        for (int k = 0; k < (int)GMX_RING_ENTRIES && !c->cut &&
                        (r = gmx_ring_pop(&c->region->up, &e)) != 0;
             k++) {
            if (r < 0) {
                protocol_error(c, "malformed message: corrupt ring indices");
                break;
            }
            up_entry(c, &e);
            run_deferred();
            n++;
        }
    }
    S.in_policy = 0;
    flush_actions();
    return n;
}

/* Is the peer allowed? root, the daemon's own user, allow_users, or a member of allow_group. */
static int peer_allowed(const struct ucred *cr)
{
    if (cr->uid == 0 || cr->uid == geteuid())
        return 1;
    for (int i = 0; i < S.cfg->n_allow_uid; i++)
        if (S.cfg->allow_uid[i] == cr->uid)
            return 1;
    for (int i = 0; i < S.cfg->n_allow_gid; i++) {
        if (S.cfg->allow_gid[i] == cr->gid)
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
                    if ((gid_t)g == S.cfg->allow_gid[i])
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
        if (S.cl[t].used && !S.cl[t].dead)
            live++;
        if (!S.cl[t].used && task < 0)
            task = t;
    }
    if (task < 0 || live >= S.cfg->max_clients) {
        S.refused++;
        send_refused(fd, EBUSY, "the daemon serves %ld clients already (max_clients)",
                     S.cfg->max_clients);
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
    client_t *c = &S.cl[task];
    memset(c, 0, sizeof *c);
    c->used = 1;
    c->id = ++S.next_id;
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
    c->oversub = (h->flags & GMX_HELLO_OVERSUBSCRIBE) || S.cfg->oversubscribe_default;
    c->connected_ns = c->last_progress = now_ns();

    gmx_msg_welcome_t w;
    memset(&w, 0, sizeof w);
    gmx_msg_init(&w.h, GMX_MSG_WELCOME, sizeof w);
    w.client_id = c->id;
    w.ring_entries = GMX_RING_ENTRIES;
    w.region_bytes = sizeof(gmx_shm_region_t);
    w.slice_ns = S.cfg->slice_us * 1000;
    snprintf(w.policy, sizeof w.policy, "%s", S.ops->name);
    int fds[3] = {mfd, eu, ed};
    char cbuf[CMSG_SPACE(sizeof fds)];
    memset(cbuf, 0, sizeof cbuf);
    struct iovec iov = {.iov_base = &w, .iov_len = sizeof w};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                        .msg_controllen = sizeof cbuf};
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
    S.prof_ptr[c->task] = NULL;
    if (S.ops->flags & GMX_POLICY_PROFILES) {
        int k = -1;
        for (int i = 0; i < GMX_MAX_TASKS && k < 0; i++)
            if (S.store[i].used && strcmp(S.store[i].name, c->name) == 0)
                k = i;
        for (int i = 0; i < GMX_MAX_TASKS && k < 0; i++)
            if (!S.store[i].used && gmx_kprof_init(&S.store[i].prof, c->name) == 0) {
                S.store[i].used = 1;
                memcpy(S.store[i].name, c->name, sizeof S.store[i].name);
                profile_load(c->name, &S.store[i].prof); /* else measured as it runs */
                k = i;
            }
        if (k >= 0)
            S.prof_ptr[c->task] = &S.store[k].prof;
    }
    S.ops->task_add(S.pol, c->task, c->priority);
    ep_add(fd, EV_SOCK, c->task);
    ep_add(eu, EV_EFD, c->task);
    gmxd_log("client %u: pid %d uid %d name '%s' priority %d%s (task %u)", c->id, (int)c->pid,
             (int)c->uid, c->name, c->priority, c->oversub ? " oversubscribed" : "", c->task);
}

static void status_reply(int fd);

/* The first message of a connection: HELLO or STATUS_REQ, checked field by field. */
static void pending_read(int idx)
{
    pending_t *p = &S.pend[idx];
    int fd = p->fd;
    p->fd = -1;
    ep_del(fd);
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
        S.protocol_errors++;
        gmxd_log("pid %d: malformed first message (%zd bytes); closed", (int)cr.pid, n);
        close(fd);
        return;
    }
    if (m.h.h.version != GMX_PROTO_VERSION) {
        S.refused++;
        send_refused(fd, EPROTONOSUPPORT, "protocol version %u; this gpumuxd speaks version %u",
                     m.h.h.version, GMX_PROTO_VERSION);
        close(fd);
        return;
    }
    if (!peer_allowed(&cr)) {
        S.refused++;
        send_refused(fd, EACCES, "uid %d (gid %d) is not allowed by gpumuxd's allow_users/"
                     "allow_group", (int)cr.uid, (int)cr.gid);
        close(fd);
        return;
    }
    if (m.h.h.type == GMX_MSG_STATUS_REQ && n == (ssize_t)sizeof(gmx_msg_hdr_t)) {
        status_reply(fd);
        close(fd);
        return;
    }
    if (m.h.h.type != GMX_MSG_HELLO || n != (ssize_t)sizeof m.h ||
        m.h.h.length != sizeof m.h - sizeof m.h.h || m.h.priority < 0 ||
        m.h.priority >= GMX_PRIORITY_LEVELS || memchr(m.h.name, 0, sizeof m.h.name) == NULL) {
        S.protocol_errors++;
        send_refused(fd, EPROTO, "malformed HELLO (type %u, %zd bytes, priority %d)", m.h.h.type,
                     n, m.h.priority);
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
        int fd = accept4(S.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        int i = 0;
        while (i < PENDING_MAX && S.pend[i].fd >= 0)
            i++;
        if (i == PENDING_MAX) {
            gmxd_log("too many connections waiting for their first message; closed one");
            close(fd);
            continue;
        }
        S.pend[i].fd = fd;
        S.pend[i].since = now_ns();
        ep_add(fd, EV_PENDING, (uint32_t)i);
    }
}

/* ---- status ---- */

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

static void status_reply(int fd)
{
    static char buf[GMX_CTRL_MAX];
    size_t off = sizeof(gmx_msg_hdr_t);
    int64_t now = now_ns();
    double hp50, hp99;
    lat_pct(S.hp_lat, S.n_hp_lat, &hp50, &hp99);
#define OUT(...)                                                                               \
    do {                                                                                       \
        int k_ = snprintf(buf + off, sizeof buf - off, __VA_ARGS__);                           \
        if (k_ > 0)                                                                            \
            off = off + (size_t)k_ < sizeof buf ? off + (size_t)k_ : sizeof buf - 1;           \
    } while (0)
    OUT("{\"version\":%u,\"pid\":%d,\"policy\":\"%s\",\"slice_us\":%ld,\"inflight\":%ld,"
        "\"uptime_s\":%.3f,\"socket\":\"%s\",\"device_memory_bytes\":%llu,"
        "\"resident_bytes\":%llu,\"grants\":%llu,\"refused\":%llu,\"cut_off\":%llu,"
        "\"protocol_errors\":%llu,\"hp_grant_latency_us\":{\"p50\":%.1f,\"p99\":%.1f,"
        "\"samples\":%u},\"host_waits\":%llu,\"migration\":{\"plans\":%llu,\"loaded_bytes\":%llu,"
        "\"evicted_bytes\":%llu,\"demand_paged_bytes\":%llu},\"clients\":[",
        GMX_PROTO_VERSION, (int)getpid(), S.ops->name, S.cfg->slice_us, S.cfg->inflight,
        (now - S.start_ns) / 1e9, S.sock_path, (unsigned long long)S.mem_cap,
        (unsigned long long)gmxd_mem_resident(S.mem, GMX_MAX_TASKS),
        (unsigned long long)S.total_grants,
        (unsigned long long)S.refused, (unsigned long long)S.cut_off,
        (unsigned long long)S.protocol_errors, hp50, hp99,
        S.n_hp_lat < GMXD_LAT_SAMPLES ? S.n_hp_lat : GMXD_LAT_SAMPLES,
        (unsigned long long)S.host_waits, (unsigned long long)S.mig_plans, (unsigned long long)S.mig_load_bytes,
        (unsigned long long)S.mig_evict_bytes, (unsigned long long)S.mig_short_bytes);
    int first = 1;
    for (int t = 0; t < GMX_MAX_TASKS; t++) {
        const client_t *c = &S.cl[t];
        if (!c->used || c->dead)
            continue;
        double p50, p99;
        lat_pct(c->lat_ns, c->nlat, &p50, &p99);
        OUT("%s{\"id\":%u,\"pid\":%d,\"uid\":%d,\"name\":\"%s\",\"priority\":%d,"
            "\"oversubscribe\":%s,\"queued\":%u,\"inflight\":%u,\"notices\":%llu,"
            "\"grants\":%llu,\"completions\":%llu,\"allocated_bytes\":%llu,"
            "\"resident_bytes\":%llu,\"grant_latency_us\":{\"p50\":%.1f,\"p99\":%.1f,"
            "\"samples\":%u},\"connected_s\":%.3f}",
            first ? "" : ",", c->id, (int)c->pid, (int)c->uid, c->name, c->priority,
            c->oversub ? "true" : "false", c->queued, c->inflight,
            (unsigned long long)c->notices, (unsigned long long)c->grants,
            (unsigned long long)c->completions, (unsigned long long)c->alloc_bytes,
            (unsigned long long)gmxd_mem_resident(S.mem, c->task), p50, p99,
            c->nlat < GMXD_LAT_SAMPLES ? c->nlat : GMXD_LAT_SAMPLES,
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

/* ---- the loop ---- */

static int setup_socket(void)
{
    const char *dir = S.cfg->runtime_dir;
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        int e = -errno;
        gmxd_log("cannot create the runtime directory %s: %s", dir, strerror(errno));
        return e;
    }
    int n = snprintf(S.sock_path, sizeof S.sock_path, "%s/%s", dir, GMX_SOCKET_NAME);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (n < 0 || (size_t)n >= sizeof sa.sun_path) {
        gmxd_log("runtime directory %s is too long for a socket path (max %zu)", dir,
                 sizeof sa.sun_path - sizeof GMX_SOCKET_NAME - 1);
        return -ENAMETOOLONG;
    }
    memcpy(sa.sun_path, S.sock_path, (size_t)n + 1);
    S.lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (S.lfd < 0)
        return -errno;
    /* A socket left by a daemon that died: remove it only if nobody answers there. */
    int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof sa) == 0) {
        close(probe);
        gmxd_log("another gpumuxd is listening on %s; stop it first", S.sock_path);
        return -EADDRINUSE;
    }
    if (probe >= 0)
        close(probe);
    unlink(S.sock_path);
    if (bind(S.lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(S.lfd, 64) != 0) {
        int e = -errno;
        gmxd_log("cannot listen on %s: %s", S.sock_path, strerror(errno));
        return e;
    }
    /* Everyone may connect; SO_PEERCRED decides who is served. */
    chmod(S.sock_path, 0666);
    return 0;
}

static void check_liveness(int64_t now)
{
    int64_t limit = S.cfg->unresponsive_ms * 1000000LL;
    for (int t = 0; t < GMX_MAX_TASKS; t++) {
        client_t *c = &S.cl[t];
        if (c->used && !c->dead && !c->cut && (c->inflight > 0 || c->evicts > 0) &&
            now - c->last_progress > limit) {
            char why[128];
            snprintf(why, sizeof why, "unresponsive: no completion for %lld ms",
                     (long long)((now - c->last_progress) / 1000000));
            cut(c, why);
        }
        if (c->used && !c->dead && c->cut) {
            S.cut_off++;
            char why[160];
            snprintf(why, sizeof why, "cut off: %.140s", c->cut_reason);
            drop_client(c, why);
        }
    }
    for (int i = 0; i < PENDING_MAX; i++)
        if (S.pend[i].fd >= 0 && now - S.pend[i].since > PENDING_TIMEOUT_NS) {
            gmxd_log("a connection sent nothing for 2 s; closed");
            ep_del(S.pend[i].fd);
            close(S.pend[i].fd);
            S.pend[i].fd = -1;
        }
}

/* Announces sleep on every up ring; nonzero if one already has entries. */
static int prepare_sleep(void)
{
    int busy = 0;
    for (int t = 0; t < GMX_MAX_TASKS; t++)
        if (S.cl[t].used && !S.cl[t].dead && gmx_ring_prepare_sleep(&S.cl[t].region->up))
            busy = 1;
    return busy;
}

static void end_sleep(void)
{
    for (int t = 0; t < GMX_MAX_TASKS; t++)
        if (S.cl[t].used && !S.cl[t].dead)
            __atomic_store_n(&S.cl[t].region->up.waiting, 0, __ATOMIC_RELAXED);
}

int gmxd_run(const gmxd_config_t *cfg)
{
    memset(&S, 0, sizeof S);
    S.cfg = cfg;
    S.lfd = S.sfd = S.tfd = S.ep = -1;
    for (int i = 0; i < PENDING_MAX; i++)
        S.pend[i].fd = -1;
    S.start_ns = now_ns();
    S.mem_cap = (uint64_t)cfg->device_memory_mb << 20;
    if (gmxd_mem_create(S.mem_cap, &S.mem) != 0) {
        gmxd_log("out of memory");
        return -ENOMEM;
    }
    S.ops = gmx_sched_find(cfg->policy);
    if (!S.ops) {
        char names[256];
        gmx_sched_names(names, sizeof names);
        gmxd_log("unknown policy '%s' (this build has %s)", cfg->policy, names);
        return -EINVAL;
    }
    gmx_sched_params_t params;
    gmx_sched_params_default(&params);
    params.slice_ns = cfg->slice_us * 1000LL;
    params.inflight_max = (uint32_t)cfg->inflight;
    params.profiles = S.prof_ptr;
    params.n_profiles = GMX_MAX_TASKS;
    params.profile_learn = 1; /* a task with no profile yet is measured as it runs */
    char err[256];
    if (gmx_sched_params_check(&params, err, sizeof err) != 0) {
        gmxd_log("%s", err);
        return -EINVAL;
    }
    gmx_device_t dev = {.ctx = NULL, .now = dev_now, .submit = dev_submit,
                        .migrate = dev_migrate, .set_timer = dev_set_timer};
    /* No registered policy calls dev.migrate today: the daemon's memory planner serves
     * oversubscribed clients at each grant (plan_memory). */
    int rc = S.ops->create(&params, &dev, &S.pol);
    if (rc != 0) {
        gmxd_log("policy %s: create failed: %s", S.ops->name, strerror(-rc));
        return rc;
    }
    signal(SIGPIPE, SIG_IGN);
    sigset_t ss;
    sigemptyset(&ss);
    sigaddset(&ss, SIGTERM);
    sigaddset(&ss, SIGINT);
    sigaddset(&ss, SIGHUP);
    sigprocmask(SIG_BLOCK, &ss, NULL);
    S.sfd = signalfd(-1, &ss, SFD_NONBLOCK | SFD_CLOEXEC);
    S.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    S.ep = epoll_create1(EPOLL_CLOEXEC);
    if (S.sfd < 0 || S.tfd < 0 || S.ep < 0) {
        gmxd_log("cannot create the event loop: %s", strerror(errno));
        return -errno;
    }
    rc = setup_socket();
    if (rc != 0)
        return rc;
    ep_add(S.lfd, EV_LISTEN, 0);
    ep_add(S.sfd, EV_SIGNAL, 0);
    ep_add(S.tfd, EV_TIMER, 0);
    gmxd_log("listening on %s (policy %s, slice %ld us, %ld in flight per client, device "
             "memory %ld MB, protocol %u)", S.sock_path, S.ops->name, cfg->slice_us,
             cfg->inflight, cfg->device_memory_mb, GMX_PROTO_VERSION);
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

    int64_t spin_ns = cfg->spin_us * 1000LL, idle_since = now_ns();
    while (!S.stop) {
        int busy = poll_rings() > 0;
        int64_t now = now_ns();
        if (busy)
            idle_since = now;
        int timeout = -1;
        for (int t = 0; t < GMX_MAX_TASKS; t++)
            if (S.cl[t].used && !S.cl[t].dead && (S.cl[t].inflight || S.cl[t].evicts))
                timeout = 100; /* liveness checks while someone holds work */
        for (int i = 0; i < PENDING_MAX; i++)
            if (S.pend[i].fd >= 0)
                timeout = 100;
        int sleep_ok = !busy && now - idle_since >= spin_ns;
        if (sleep_ok && prepare_sleep())
            sleep_ok = 0;
        struct epoll_event evs[64];
        int n = epoll_wait(S.ep, evs, 64, sleep_ok ? timeout : 0);
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
                if (read(S.sfd, &si, sizeof si) == (ssize_t)sizeof si)
                    gmxd_log("signal %u: stopping", si.ssi_signo);
                S.stop = 1;
                break;
            }
            case EV_TIMER:
                if (read(S.tfd, &v, sizeof v) > 0) {
                    S.in_policy = 1;
                    S.ops->on_timer(S.pol);
                    run_deferred();
                    S.in_policy = 0;
                    flush_actions();
                }
                break;
            case EV_PENDING:
                if (idx < PENDING_MAX && S.pend[idx].fd >= 0)
                    pending_read((int)idx);
                break;
            case EV_SOCK:
                if (idx < GMX_MAX_TASKS && S.cl[idx].used && !S.cl[idx].dead) {
                    char b[64];
                    ssize_t r = recv(S.cl[idx].fd, b, sizeof b, MSG_DONTWAIT);
                    if (r == 0 || (r < 0 && errno != EAGAIN)) {
                        poll_rings(); /* what it said before it went counts */
                        drop_client(&S.cl[idx], "disconnected");
                    } else if (r > 0) {
                        S.protocol_errors++;
                        cut(&S.cl[idx], "malformed message: data on the control socket after "
                                        "WELCOME");
                    }
                }
                break;
            case EV_EFD:
                if (idx < GMX_MAX_TASKS && S.cl[idx].used && !S.cl[idx].dead &&
                    read(S.cl[idx].efd_up, &v, sizeof v) < 0 && errno != EAGAIN)
                    gmxd_log("client %u: eventfd read: %s", S.cl[idx].id, strerror(errno));
                break;
            }
        }
        check_liveness(now_ns());
    }
    for (int t = 0; t < GMX_MAX_TASKS; t++)
        if (S.cl[t].used && !S.cl[t].dead)
            drop_client(&S.cl[t], "daemon stopping");
    unlink(S.sock_path);
    close(S.lfd);
    S.ops->destroy(S.pol);
    gmxd_mem_destroy(S.mem);
    S.mem = NULL;
    for (int i = 0; i < GMX_MAX_TASKS; i++)
        if (S.store[i].used)
            gmx_kprof_free(&S.store[i].prof);
    gmxd_log("stopped");
    return 0;
}
