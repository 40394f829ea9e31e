/*
 * The stand-in driver: a libcuda.so.1 for tests only, implementing the subset of the driver
 * API that gpumux's tests and interposer use, on top of the shared simulated GPU (engine.c).
 * Kernels come from small text modules (docs/standin.md): a name, a duration in µs, and the
 * parameter layout (which parameters are pointers). Memory is host memory; device memory and
 * managed residency are accounted against the simulated device's size.
 *
 * Handles are indices into fixed tables of this process, validated before use: a bad handle
 * gets the driver's error code (CUDA_ERROR_INVALID_HANDLE / INVALID_CONTEXT / INVALID_VALUE).
 */
#define _GNU_SOURCE
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include "engine.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define SI_EXPORT __attribute__((visibility("default")))
#define MAX_CTX 16
#define MAX_MOD 64
#define MAX_FN 1024
#define MAX_PARAMS 64
#define MAX_ALLOC 4096
#define CHUNK (2u << 20)            /* residency granularity: the driver's 2 MB root chunk */
#define FAULT_NS_PER_64K 31790      /* ~31.79 µs per demand fault of a 64 KB big page */
#define LINK_BYTES_PER_US 25000ull  /* bulk copies and prefetch: 25 GB/s */

struct CUctx_st {
    int in_use, id, primary, refs, legacy;
};
struct CUstream_st {
    int in_use, si, ctx;
    unsigned flags;
};
struct CUevent_st {
    int in_use, ei;
    unsigned flags;
};
struct CUfunc_st {
    int in_use;
    struct CUmod_st *mod;
    char name[SI_NAME];
    int64_t dur_ns;
    int nparams;
    size_t off[MAX_PARAMS], size[MAX_PARAMS];
    int ptr[MAX_PARAMS];
    /* A pointer's extent: ext_mul x the value of parameter ext_arg bytes (ext_arg -1: the
     * rest of its allocation). */
    int ext_arg[MAX_PARAMS];
    uint64_t ext_mul[MAX_PARAMS];
};
struct CUmod_st {
    int in_use;
};

typedef struct {
    uintptr_t base;
    size_t size;
    int kind; /* CU_MEMORYTYPE_DEVICE, _HOST, or 0x10 managed */
    unsigned host_flags;
    unsigned char *resident; /* managed: one byte per 2 MB chunk */
    uint64_t seq;
} alloc_t;

#define KIND_MANAGED 0x10

static struct {
    pthread_mutex_t lock;
    int init;
    struct CUctx_st ctx[MAX_CTX];
    struct CUstream_st streams[SI_STREAMS];
    struct CUevent_st events[SI_EVENTS];
    struct CUmod_st mods[MAX_MOD];
    struct CUfunc_st fns[MAX_FN];
    alloc_t allocs[MAX_ALLOC];
    int nallocs;
    uint64_t alloc_seq;
    int primary_refs;
} S = {.lock = PTHREAD_MUTEX_INITIALIZER};

static __thread struct CUctx_st *tl_stack[16];
static __thread int tl_depth;
static __thread int tl_ptds[MAX_CTX]; /* engine stream index + 1 of this thread's default stream */
static __thread int tl_ptds_gen;
static int g_gen = 1; /* bumped in a forked child: per-thread state of the parent is void */

static void atfork_child(void)
{
    pthread_mutex_init(&S.lock, NULL);
    memset(S.ctx, 0, sizeof S.ctx);
    memset(S.streams, 0, sizeof S.streams);
    memset(S.events, 0, sizeof S.events);
    S.init = 0;
    S.primary_refs = 0;
    tl_depth = 0;
    g_gen++;
}

/* ---- helpers ---- */

static struct CUctx_st *cur_ctx(void)
{
    return tl_depth > 0 ? tl_stack[tl_depth - 1] : NULL;
}

static int valid_ctx(CUcontext c)
{
    uintptr_t p = (uintptr_t)c, b = (uintptr_t)S.ctx;
    return p >= b && p < b + sizeof S.ctx && (p - b) % sizeof S.ctx[0] == 0 && c->in_use;
}

static struct CUstream_st *stream_of(CUstream h)
{
    uintptr_t p = (uintptr_t)h, b = (uintptr_t)S.streams;
    if (p < b || p >= b + sizeof S.streams || (p - b) % sizeof S.streams[0] != 0 || !h->in_use)
        return NULL;
    return h;
}

static struct CUevent_st *event_of(CUevent h)
{
    uintptr_t p = (uintptr_t)h, b = (uintptr_t)S.events;
    if (p < b || p >= b + sizeof S.events || (p - b) % sizeof S.events[0] != 0 || !h->in_use)
        return NULL;
    return h;
}

static struct CUfunc_st *func_of(CUfunction h)
{
    uintptr_t p = (uintptr_t)h, b = (uintptr_t)S.fns;
    if (p < b || p >= b + sizeof S.fns || (p - b) % sizeof S.fns[0] != 0 || !h->in_use)
        return NULL;
    return h;
}

static struct CUmod_st *mod_of(CUmodule h)
{
    uintptr_t p = (uintptr_t)h, b = (uintptr_t)S.mods;
    if (p < b || p >= b + sizeof S.mods || (p - b) % sizeof S.mods[0] != 0 || !h->in_use)
        return NULL;
    return h;
}

#define REQUIRE_INIT()                                                                         \
    do {                                                                                       \
        if (!S.init)                                                                           \
            return CUDA_ERROR_NOT_INITIALIZED;                                                 \
    } while (0)

#define REQUIRE_CTX(c)                                                                         \
    struct CUctx_st *c = cur_ctx();                                                            \
    if (!S.init)                                                                               \
        return CUDA_ERROR_NOT_INITIALIZED;                                                     \
    if (!c)                                                                                    \
    return CUDA_ERROR_INVALID_CONTEXT

/* The engine stream for a stream argument as the driver reads it (legacy/per-thread/own). */
static CUresult resolve_stream(CUstream h, int ptsz, int *si)
{
    struct CUctx_st *c = cur_ctx();
    if (!S.init)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (h == CU_STREAM_LEGACY || (h == NULL && !ptsz)) {
        if (!c)
            return CUDA_ERROR_INVALID_CONTEXT;
        *si = c->legacy;
        return CUDA_SUCCESS;
    }
    if (h == CU_STREAM_PER_THREAD || h == NULL) {
        if (!c)
            return CUDA_ERROR_INVALID_CONTEXT;
        if (tl_ptds_gen != g_gen) {
            memset(tl_ptds, 0, sizeof tl_ptds);
            tl_ptds_gen = g_gen;
        }
        if (!tl_ptds[c->id]) {
            int s = si_stream_open(SI_S_BLOCKING, c->id);
            if (s < 0)
                return CUDA_ERROR_OUT_OF_MEMORY;
            tl_ptds[c->id] = s + 1;
        }
        *si = tl_ptds[c->id] - 1;
        return CUDA_SUCCESS;
    }
    struct CUstream_st *s = stream_of(h);
    if (!s)
        return CUDA_ERROR_INVALID_HANDLE;
    *si = s->si;
    return CUDA_SUCCESS;
}

static alloc_t *alloc_find(uintptr_t p)
{
    for (int i = 0; i < S.nallocs; i++)
        if (p >= S.allocs[i].base && p < S.allocs[i].base + (S.allocs[i].size ? S.allocs[i].size : 1))
            return &S.allocs[i];
    return NULL;
}

static alloc_t *alloc_add(uintptr_t base, size_t size, int kind)
{
    if (S.nallocs == MAX_ALLOC)
        return NULL;
    alloc_t *a = &S.allocs[S.nallocs++];
    memset(a, 0, sizeof *a);
    a->base = base;
    a->size = size;
    a->kind = kind;
    a->seq = ++S.alloc_seq;
    return a;
}

static void alloc_remove(alloc_t *a)
{
    free(a->resident);
    *a = S.allocs[--S.nallocs];
}

static size_t chunks(size_t size)
{
    return (size + CHUNK - 1) / CHUNK;
}

static uint64_t chunk_bytes(const alloc_t *a, size_t i)
{
    size_t end = (i + 1) * (size_t)CHUNK;
    return end <= a->size ? CHUNK : a->size - i * (size_t)CHUNK;
}

/* Makes chunks [c0, c1) of a managed allocation resident; evicts this process's other managed
 * chunks (oldest allocation first) when the device is full. Returns bytes that moved. */
static uint64_t make_resident(alloc_t *a, size_t c0, size_t c1)
{
    uint64_t moved = 0;
    for (size_t i = c0; i < c1; i++) {
        if (a->resident[i])
            continue;
        uint64_t b = chunk_bytes(a, i);
        while (si_mem_reserve(b) != 0) {
            alloc_t *victim = NULL;
            size_t vc = 0;
            for (int k = 0; k < S.nallocs && !victim; k++) {
                alloc_t *o = &S.allocs[k];
                if (o->kind != KIND_MANAGED || !o->resident)
                    continue;
                for (size_t j = 0; j < chunks(o->size); j++)
                    if (o->resident[j] && !(o == a && j >= c0 && j < c1)) {
                        if (!victim || o->seq < victim->seq) {
                            victim = o;
                            vc = j;
                        }
                        break;
                    }
            }
            if (!victim)
                return moved; /* the rest stays on the host: counted as faults at launch */
            victim->resident[vc] = 0;
            si_mem_release(chunk_bytes(victim, vc));
        }
        a->resident[i] = 1;
        moved += b;
    }
    return moved;
}

/* ---- init, version, errors ---- */

SI_EXPORT CUresult CUDAAPI cuInit(unsigned int Flags)
{
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&S.lock);
    static int atfork_done;
    if (!atfork_done) {
        pthread_atfork(NULL, NULL, atfork_child);
        atfork_done = 1;
    }
    CUresult r = CUDA_SUCCESS;
    if (!S.init) {
        if (si_engine_attach() != 0)
            r = CUDA_ERROR_NO_DEVICE;
        else
            S.init = 1;
    }
    pthread_mutex_unlock(&S.lock);
    return r;
}

SI_EXPORT CUresult CUDAAPI cuDriverGetVersion(int *driverVersion)
{
    if (!driverVersion)
        return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = CUDA_VERSION;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    switch (error) {
    case CUDA_SUCCESS: *pStr = "no error"; break;
    case CUDA_ERROR_INVALID_VALUE: *pStr = "invalid argument"; break;
    case CUDA_ERROR_OUT_OF_MEMORY: *pStr = "out of memory"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *pStr = "initialization error"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *pStr = "invalid device context"; break;
    case CUDA_ERROR_INVALID_HANDLE: *pStr = "invalid resource handle"; break;
    case CUDA_ERROR_NOT_FOUND: *pStr = "named symbol not found"; break;
    case CUDA_ERROR_NOT_READY: *pStr = "device not ready"; break;
    case CUDA_ERROR_NOT_SUPPORTED: *pStr = "operation not supported"; break;
    default: *pStr = "unknown error (stand-in driver)"; break;
    }
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    static char buf[32];
    snprintf(buf, sizeof buf, "CUDA_ERROR_%d", (int)error);
    *pStr = error == CUDA_SUCCESS ? "CUDA_SUCCESS" : buf;
    return CUDA_SUCCESS;
}

/* The runtime's private tables cannot be provided by a stand-in. */
SI_EXPORT CUresult CUDAAPI cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
    (void)pExportTableId;
    if (ppExportTable)
        *ppExportTable = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* ---- devices: one simulated GPU ---- */

SI_EXPORT CUresult CUDAAPI cuDeviceGetCount(int *count)
{
    REQUIRE_INIT();
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = 1;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal)
{
    REQUIRE_INIT();
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (ordinal != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = 0;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice dev)
{
    REQUIRE_INIT();
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    if (!name || len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "gpumux stand-in GPU");
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    REQUIRE_INIT();
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    if (!bytes)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t f, t;
    si_mem_info(&f, &t);
    *bytes = t;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    REQUIRE_INIT();
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    if (!pi)
        return CUDA_ERROR_INVALID_VALUE;
    switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *pi = 84; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *pi = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *pi = 0; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: *pi = 1024; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *pi = 32; break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: *pi = 1; break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: *pi = 1; break;
    default: *pi = 0; break;
    }
    return CUDA_SUCCESS;
}

/* ---- contexts ---- */

static CUresult ctx_new(int primary, struct CUctx_st **out)
{
    for (int i = 0; i < MAX_CTX; i++)
        if (!S.ctx[i].in_use) {
            int legacy = si_stream_open(SI_S_LEGACY, i);
            if (legacy < 0)
                return CUDA_ERROR_OUT_OF_MEMORY;
            S.ctx[i] = (struct CUctx_st){1, i, primary, 1, legacy};
            *out = &S.ctx[i];
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_OUT_OF_MEMORY;
}

static void ctx_free(struct CUctx_st *c)
{
    si_wait_ctx(c->id);
    for (int i = 0; i < SI_STREAMS; i++)
        if (S.streams[i].in_use && S.streams[i].ctx == c->id) {
            si_stream_close(S.streams[i].si);
            S.streams[i].in_use = 0;
        }
    si_stream_close(c->legacy);
    c->in_use = 0;
    for (int i = 0; i < tl_depth; i++)
        if (tl_stack[i] == c)
            tl_stack[i] = NULL;
}

SI_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    REQUIRE_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&S.lock);
    CUresult r = CUDA_SUCCESS;
    struct CUctx_st *p = NULL;
    for (int i = 0; i < MAX_CTX; i++)
        if (S.ctx[i].in_use && S.ctx[i].primary)
            p = &S.ctx[i];
    if (p)
        p->refs++;
    else
        r = ctx_new(1, &p);
    if (r == CUDA_SUCCESS)
        *pctx = p;
    pthread_mutex_unlock(&S.lock);
    return r;
}

SI_EXPORT CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    REQUIRE_INIT();
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&S.lock);
    CUresult r = CUDA_ERROR_INVALID_CONTEXT;
    for (int i = 0; i < MAX_CTX; i++)
        if (S.ctx[i].in_use && S.ctx[i].primary) {
            if (--S.ctx[i].refs == 0)
                ctx_free(&S.ctx[i]);
            r = CUDA_SUCCESS;
        }
    pthread_mutex_unlock(&S.lock);
    return r;
}

static CUresult ctx_create(CUcontext *pctx, CUdevice dev)
{
    REQUIRE_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev != 0)
        return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&S.lock);
    struct CUctx_st *c = NULL;
    CUresult r = ctx_new(0, &c);
    pthread_mutex_unlock(&S.lock);
    if (r != CUDA_SUCCESS)
        return r;
    if (tl_depth == 16)
        return CUDA_ERROR_INVALID_VALUE;
    tl_stack[tl_depth++] = c; /* a created context becomes current, pushed */
    *pctx = c;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    (void)flags;
    return ctx_create(pctx, dev);
}

SI_EXPORT CUresult CUDAAPI cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                                          unsigned int flags, CUdevice dev)
{
    (void)ctxCreateParams;
    (void)flags;
    return ctx_create(pctx, dev);
}

SI_EXPORT CUresult CUDAAPI cuCtxDestroy_v2(CUcontext ctx)
{
    REQUIRE_INIT();
    if (!valid_ctx(ctx) || ctx->primary)
        return CUDA_ERROR_INVALID_CONTEXT;
    pthread_mutex_lock(&S.lock);
    ctx_free(ctx);
    pthread_mutex_unlock(&S.lock);
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx)
{
    REQUIRE_INIT();
    if (ctx && !valid_ctx(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (!ctx) {
        if (tl_depth > 0)
            tl_depth--;
        return CUDA_SUCCESS;
    }
    if (tl_depth == 0)
        tl_depth = 1;
    tl_stack[tl_depth - 1] = ctx;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pctx)
{
    REQUIRE_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = cur_ctx();
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext ctx)
{
    REQUIRE_INIT();
    if (!valid_ctx(ctx))
        return CUDA_ERROR_INVALID_CONTEXT;
    if (tl_depth == 16)
        return CUDA_ERROR_INVALID_VALUE;
    tl_stack[tl_depth++] = ctx;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext *pctx)
{
    REQUIRE_INIT();
    if (tl_depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    CUcontext c = tl_stack[--tl_depth];
    if (pctx)
        *pctx = c;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuCtxGetDevice(CUdevice *device)
{
    REQUIRE_CTX(c);
    (void)c;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    *device = 0;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuCtxSynchronize(void)
{
    REQUIRE_CTX(c);
    si_wait_ctx(c->id);
    return CUDA_SUCCESS;
}

/* ---- modules: the text format of docs/standin.md ---- */

/* Parses "p,i32,f64,b16" into the function's layout (natural alignment, as nvcc lays out). */
static int parse_params(struct CUfunc_st *f, char *spec)
{
    f->nparams = 0;
    if (!spec || strcmp(spec, "-") == 0)
        return 0;
    size_t off = 0;
    for (char *tok = strtok(spec, ","); tok; tok = strtok(NULL, ",")) {
        size_t size;
        int ptr = 0, ext_arg = -1;
        uint64_t ext_mul = 1;
        if (strcmp(tok, "p") == 0) {
            size = 8;
            ptr = 1;
        } else if (strncmp(tok, "p@", 2) == 0) {
            char *end;
            long k = strtol(tok + 2, &end, 10);
            if (end == tok + 2 || k < 0 || k >= MAX_PARAMS)
                return -1;
            if (*end == '*') {
                char *e2;
                unsigned long long mul = strtoull(end + 1, &e2, 10);
                if (e2 == end + 1 || mul == 0 || mul > (1ull << 32))
                    return -1;
                ext_mul = mul;
                end = e2;
            }
            if (*end)
                return -1;
            size = 8;
            ptr = 1;
            ext_arg = (int)k;
        } else if (!strcmp(tok, "i32") || !strcmp(tok, "u32") || !strcmp(tok, "f32")) {
            size = 4;
        } else if (!strcmp(tok, "i64") || !strcmp(tok, "u64") || !strcmp(tok, "f64")) {
            size = 8;
        } else if (!strcmp(tok, "i8") || !strcmp(tok, "u8")) {
            size = 1;
        } else if (!strcmp(tok, "i16") || !strcmp(tok, "u16")) {
            size = 2;
        } else if (tok[0] == 'b' && atoi(tok + 1) > 0) {
            size = (size_t)atoi(tok + 1);
        } else {
            return -1;
        }
        if (f->nparams == MAX_PARAMS)
            return -1;
        size_t align = size >= 8 ? 8 : size >= 4 ? 4 : size >= 2 ? 2 : 1;
        off = (off + align - 1) / align * align;
        f->off[f->nparams] = off;
        f->size[f->nparams] = size;
        f->ptr[f->nparams] = ptr;
        f->ext_arg[f->nparams] = ext_arg;
        f->ext_mul[f->nparams] = ext_mul;
        f->nparams++;
        off += size;
    }
    /* An extent names an integer parameter of at most 8 bytes. */
    for (int i = 0; i < f->nparams; i++) {
        int k = f->ext_arg[i];
        if (k >= 0 && (k >= f->nparams || f->ptr[k] || f->size[k] > 8))
            return -1;
    }
    return 0;
}

static CUresult load_text(CUmodule *module, const char *text, const char *origin)
{
    REQUIRE_INIT();
    if (!module || !text)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&S.lock);
    struct CUmod_st *m = NULL;
    for (int i = 0; i < MAX_MOD && !m; i++)
        if (!S.mods[i].in_use)
            m = &S.mods[i];
    if (!m) {
        pthread_mutex_unlock(&S.lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    char *copy = strdup(text);
    if (!copy) {
        pthread_mutex_unlock(&S.lock);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult r = CUDA_SUCCESS;
    int lineno = 0, nk = 0;
    char *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        char kw[16], name[SI_NAME], spec[512] = "-";
        double us;
        while (*line == ' ' || *line == '\t')
            line++;
        if (*line == '#' || *line == '\0' || *line == '\r')
            continue;
        int n = sscanf(line, "%15s %47s %lf %511s", kw, name, &us, spec);
        struct CUfunc_st *f = NULL;
        for (int i = 0; i < MAX_FN && !f; i++)
            if (!S.fns[i].in_use)
                f = &S.fns[i];
        if (n < 3 || strcmp(kw, "kernel") != 0 || us < 0 || !f) {
            fprintf(stderr, "gpumux stand-in: %s:%d: expected \"kernel NAME DURATION_US [PARAMS]\"%s\n",
                    origin, lineno, f ? "" : " (too many kernels)");
            r = CUDA_ERROR_INVALID_IMAGE;
            break;
        }
        memset(f, 0, sizeof *f);
        snprintf(f->name, sizeof f->name, "%s", name);
        f->dur_ns = (int64_t)(us * 1000.0);
        f->mod = m;
        if (parse_params(f, spec) != 0) {
            fprintf(stderr, "gpumux stand-in: %s:%d: bad parameter list \"%s\" (expected e.g. "
                            "p,p,i32 or -)\n", origin, lineno, spec);
            r = CUDA_ERROR_INVALID_IMAGE;
            break;
        }
        f->in_use = 1;
        nk++;
    }
    free(copy);
    if (r != CUDA_SUCCESS) {
        for (int i = 0; i < MAX_FN; i++)
            if (S.fns[i].mod == m)
                S.fns[i].in_use = 0;
    } else {
        m->in_use = 1;
        *module = m;
    }
    pthread_mutex_unlock(&S.lock);
    return r;
}

SI_EXPORT CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image)
{
    return load_text(module, image, "(image)");
}

SI_EXPORT CUresult CUDAAPI cuModuleLoad(CUmodule *module, const char *fname)
{
    REQUIRE_INIT();
    if (!fname)
        return CUDA_ERROR_INVALID_VALUE;
    FILE *fp = fopen(fname, "r");
    if (!fp)
        return CUDA_ERROR_FILE_NOT_FOUND;
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    return load_text(module, buf, fname);
}

SI_EXPORT CUresult CUDAAPI cuModuleUnload(CUmodule hmod)
{
    REQUIRE_INIT();
    pthread_mutex_lock(&S.lock);
    struct CUmod_st *m = mod_of(hmod);
    if (!m) {
        pthread_mutex_unlock(&S.lock);
        return CUDA_ERROR_INVALID_HANDLE;
    }
    for (int i = 0; i < MAX_FN; i++)
        if (S.fns[i].in_use && S.fns[i].mod == m)
            S.fns[i].in_use = 0;
    m->in_use = 0;
    pthread_mutex_unlock(&S.lock);
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    REQUIRE_INIT();
    if (!hfunc || !name)
        return CUDA_ERROR_INVALID_VALUE;
    if (!mod_of(hmod))
        return CUDA_ERROR_INVALID_HANDLE;
    for (int i = 0; i < MAX_FN; i++)
        if (S.fns[i].in_use && S.fns[i].mod == hmod && strcmp(S.fns[i].name, name) == 0) {
            *hfunc = &S.fns[i];
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_NOT_FOUND;
}

SI_EXPORT CUresult CUDAAPI cuFuncGetName(const char **name, CUfunction hfunc)
{
    REQUIRE_INIT();
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUfunc_st *f = func_of(hfunc);
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    *name = f->name;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuFuncGetParamInfo(CUfunction func, size_t paramIndex,
                                              size_t *paramOffset, size_t *paramSize)
{
    REQUIRE_INIT();
    struct CUfunc_st *f = func_of(func);
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    if (paramIndex >= (size_t)f->nparams)
        return CUDA_ERROR_INVALID_VALUE;
    if (paramOffset)
        *paramOffset = f->off[paramIndex];
    if (paramSize)
        *paramSize = f->size[paramIndex];
    return CUDA_SUCCESS;
}

/* ---- launches ---- */

/* Duration of a launch: the module's figure plus demand faults on non-resident managed memory
 * its pointer parameters reach (whole allocation, migrated by the faults). */
static int64_t launch_cost(struct CUfunc_st *f, void **params)
{
    int64_t d = f->dur_ns;
    if (!params)
        return d;
    pthread_mutex_lock(&S.lock);
    for (int i = 0; i < f->nparams; i++) {
        if (!f->ptr[i] || !params[i])
            continue;
        uintptr_t p;
        memcpy(&p, params[i], sizeof p);
        alloc_t *a = alloc_find(p);
        if (a && a->kind == KIND_MANAGED) {
            size_t c0 = 0, c1 = chunks(a->size);
            int k = f->ext_arg[i];
            if (k >= 0 && params[k]) {
                uint64_t n = 0;
                memcpy(&n, params[k], f->size[k]); /* little-endian: the low bytes */
                uint64_t len = n * f->ext_mul[i], off = p - a->base;
                uint64_t end = len > a->size - off ? a->size : off + len;
                c0 = off / CHUNK;
                c1 = (end + CHUNK - 1) / CHUNK;
            }
            uint64_t moved = make_resident(a, c0, c1);
            d += (int64_t)((moved + 65535) / 65536) * FAULT_NS_PER_64K;
        }
    }
    pthread_mutex_unlock(&S.lock);
    return d;
}

static CUresult launch(CUfunction fn, CUstream h, int ptsz, void **params, void **extra,
                       unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz)
{
    REQUIRE_CTX(c);
    (void)c;
    struct CUfunc_st *f = func_of(fn);
    if (!f)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!gx || !gy || !gz || !bx || !by || !bz || (uint64_t)bx * by * bz > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    if (f->nparams > 0 && !params && !extra)
        return CUDA_ERROR_INVALID_VALUE;
    int si;
    CUresult r = resolve_stream(h, ptsz, &si);
    if (r != CUDA_SUCCESS)
        return r;
    si_submit_t s = {.kind = SI_K_KERNEL, .stream = si, .dur_ns = launch_cost(f, params),
                     .name = f->name};
    return si_submit(&s) ? CUDA_SUCCESS : CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
}

SI_EXPORT CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                          unsigned int gridDimZ, unsigned int blockDimX,
                                          unsigned int blockDimY, unsigned int blockDimZ,
                                          unsigned int sharedMemBytes, CUstream hStream,
                                          void **kernelParams, void **extra)
{
    (void)sharedMemBytes;
    return launch(f, hStream, 0, kernelParams, extra, gridDimX, gridDimY, gridDimZ, blockDimX,
                  blockDimY, blockDimZ);
}

SI_EXPORT CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                               unsigned int gridDimY, unsigned int gridDimZ,
                                               unsigned int blockDimX, unsigned int blockDimY,
                                               unsigned int blockDimZ, unsigned int sharedMemBytes,
                                               CUstream hStream, void **kernelParams, void **extra)
{
    (void)sharedMemBytes;
    return launch(f, hStream, 1, kernelParams, extra, gridDimX, gridDimY, gridDimZ, blockDimX,
                  blockDimY, blockDimZ);
}

SI_EXPORT CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
                                                     unsigned int gridDimY, unsigned int gridDimZ,
                                                     unsigned int blockDimX, unsigned int blockDimY,
                                                     unsigned int blockDimZ,
                                                     unsigned int sharedMemBytes, CUstream hStream,
                                                     void **kernelParams)
{
    (void)sharedMemBytes;
    return launch(f, hStream, 0, kernelParams, NULL, gridDimX, gridDimY, gridDimZ, blockDimX,
                  blockDimY, blockDimZ);
}

SI_EXPORT CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(
    CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,
    unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,
    unsigned int sharedMemBytes, CUstream hStream, void **kernelParams)
{
    (void)sharedMemBytes;
    return launch(f, hStream, 1, kernelParams, NULL, gridDimX, gridDimY, gridDimZ, blockDimX,
                  blockDimY, blockDimZ);
}

SI_EXPORT CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
                                            void **kernelParams, void **extra)
{
    if (!config)
        return CUDA_ERROR_INVALID_VALUE;
    return launch(f, config->hStream, 0, kernelParams, extra, config->gridDimX, config->gridDimY,
                  config->gridDimZ, config->blockDimX, config->blockDimY, config->blockDimZ);
}

SI_EXPORT CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                                 void **kernelParams, void **extra)
{
    if (!config)
        return CUDA_ERROR_INVALID_VALUE;
    return launch(f, config->hStream, 1, kernelParams, extra, config->gridDimX, config->gridDimY,
                  config->gridDimZ, config->blockDimX, config->blockDimY, config->blockDimZ);
}

static CUresult hostfn(CUstream h, int ptsz, CUhostFn fn, void *user)
{
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    int si;
    CUresult r = resolve_stream(h, ptsz, &si);
    if (r != CUDA_SUCCESS)
        return r;
    si_submit_t s = {.kind = SI_K_HOSTFN, .stream = si, .hostfn = fn, .user = user, .name = "hostfn"};
    return si_submit(&s) ? CUDA_SUCCESS : CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
}

SI_EXPORT CUresult CUDAAPI cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    return hostfn(hStream, 0, fn, userData);
}

SI_EXPORT CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData)
{
    return hostfn(hStream, 1, fn, userData);
}

/* ---- streams ---- */

static CUresult stream_create(CUstream *ph, unsigned flags)
{
    REQUIRE_CTX(c);
    if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&S.lock);
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    for (int i = 0; i < SI_STREAMS; i++)
        if (!S.streams[i].in_use) {
            int si = si_stream_open((flags & CU_STREAM_NON_BLOCKING) ? SI_S_NONBLOCKING : SI_S_BLOCKING,
                                    c->id);
            if (si < 0)
                break;
            S.streams[i] = (struct CUstream_st){1, si, c->id, flags};
            *ph = &S.streams[i];
            r = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&S.lock);
    return r;
}

SI_EXPORT CUresult CUDAAPI cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    return stream_create(phStream, Flags);
}

SI_EXPORT CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags,
                                                      int priority)
{
    (void)priority;
    return stream_create(phStream, flags);
}

SI_EXPORT CUresult CUDAAPI cuStreamDestroy_v2(CUstream hStream)
{
    REQUIRE_INIT();
    pthread_mutex_lock(&S.lock);
    struct CUstream_st *s = stream_of(hStream);
    if (s) {
        si_stream_close(s->si);
        s->in_use = 0;
    }
    pthread_mutex_unlock(&S.lock);
    return s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult stream_sync(CUstream h, int ptsz)
{
    int si;
    CUresult r = resolve_stream(h, ptsz, &si);
    if (r != CUDA_SUCCESS)
        return r;
    if (si_stream_kind(si) == SI_S_LEGACY) /* the legacy stream waits for the whole context */
        si_wait_ctx(cur_ctx()->id);
    else
        si_wait_stream(si, 0);
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuStreamSynchronize(CUstream hStream)
{
    return stream_sync(hStream, 0);
}

SI_EXPORT CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream hStream)
{
    return stream_sync(hStream, 1);
}

static CUresult stream_query(CUstream h, int ptsz)
{
    int si;
    CUresult r = resolve_stream(h, ptsz, &si);
    if (r != CUDA_SUCCESS)
        return r;
    return si_stream_done(si, 0) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

SI_EXPORT CUresult CUDAAPI cuStreamQuery(CUstream hStream)
{
    return stream_query(hStream, 0);
}

SI_EXPORT CUresult CUDAAPI cuStreamQuery_ptsz(CUstream hStream)
{
    return stream_query(hStream, 1);
}

static CUresult stream_wait(CUstream h, int ptsz, CUevent e, unsigned flags)
{
    int si;
    CUresult r = resolve_stream(h, ptsz, &si);
    if (r != CUDA_SUCCESS)
        return r;
    struct CUevent_st *ev = event_of(e);
    if (!ev)
        return CUDA_ERROR_INVALID_HANDLE;
    (void)flags;
    int ws;
    uint64_t seq;
    if (!si_event_target(ev->ei, &ws, &seq))
        return CUDA_SUCCESS; /* never recorded: nothing to wait for */
    si_submit_t s = {.kind = SI_K_WAIT, .stream = si, .wait_stream = ws, .wait_seq = seq};
    return si_submit(&s) ? CUDA_SUCCESS : CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
}

SI_EXPORT CUresult CUDAAPI cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    return stream_wait(hStream, 0, hEvent, Flags);
}

SI_EXPORT CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    return stream_wait(hStream, 1, hEvent, Flags);
}

static CUresult stream_flags(CUstream h, int ptsz, unsigned *flags)
{
    if (!flags)
        return CUDA_ERROR_INVALID_VALUE;
    int si;
    CUresult r = resolve_stream(h, ptsz, &si);
    if (r != CUDA_SUCCESS)
        return r;
    *flags = si_stream_kind(si) == SI_S_NONBLOCKING ? CU_STREAM_NON_BLOCKING : 0;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuStreamGetFlags(CUstream hStream, unsigned int *flags)
{
    return stream_flags(hStream, 0, flags);
}

SI_EXPORT CUresult CUDAAPI cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags)
{
    return stream_flags(hStream, 1, flags);
}

static CUresult stream_ctx(CUstream h, CUcontext *pctx)
{
    REQUIRE_INIT();
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    struct CUstream_st *s = stream_of(h);
    if (s) {
        *pctx = &S.ctx[s->ctx];
        return CUDA_SUCCESS;
    }
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        if (!cur_ctx())
            return CUDA_ERROR_INVALID_CONTEXT;
        *pctx = cur_ctx();
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_INVALID_HANDLE;
}

SI_EXPORT CUresult CUDAAPI cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
    return stream_ctx(hStream, pctx);
}

SI_EXPORT CUresult CUDAAPI cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx)
{
    return stream_ctx(hStream, pctx);
}

/* Stream capture is not simulated: nothing is ever capturing. */
static CUresult is_capturing(CUstream h, int ptsz, CUstreamCaptureStatus *st)
{
    if (!st)
        return CUDA_ERROR_INVALID_VALUE;
    int si;
    CUresult r = resolve_stream(h, ptsz, &si);
    if (r != CUDA_SUCCESS)
        return r;
    *st = CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return is_capturing(hStream, 0, captureStatus);
}

SI_EXPORT CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream hStream,
                                                    CUstreamCaptureStatus *captureStatus)
{
    return is_capturing(hStream, 1, captureStatus);
}

/* ---- events ---- */

SI_EXPORT CUresult CUDAAPI cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    REQUIRE_CTX(c);
    (void)c;
    if (!phEvent)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&S.lock);
    CUresult r = CUDA_ERROR_OUT_OF_MEMORY;
    for (int i = 0; i < SI_EVENTS; i++)
        if (!S.events[i].in_use) {
            int ei = si_event_open();
            if (ei < 0)
                break;
            S.events[i] = (struct CUevent_st){1, ei, Flags};
            *phEvent = &S.events[i];
            r = CUDA_SUCCESS;
            break;
        }
    pthread_mutex_unlock(&S.lock);
    return r;
}

SI_EXPORT CUresult CUDAAPI cuEventDestroy_v2(CUevent hEvent)
{
    REQUIRE_INIT();
    pthread_mutex_lock(&S.lock);
    struct CUevent_st *e = event_of(hEvent);
    if (e) {
        si_event_close(e->ei);
        e->in_use = 0;
    }
    pthread_mutex_unlock(&S.lock);
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

static CUresult record(CUevent e, CUstream h, int ptsz)
{
    struct CUevent_st *ev = event_of(e);
    if (!ev)
        return S.init ? CUDA_ERROR_INVALID_HANDLE : CUDA_ERROR_NOT_INITIALIZED;
    int si;
    CUresult r = resolve_stream(h, ptsz, &si);
    if (r != CUDA_SUCCESS)
        return r;
    si_submit_t s = {.kind = SI_K_RECORD, .stream = si, .event = ev->ei, .name = "record"};
    return si_submit(&s) ? CUDA_SUCCESS : CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
}

SI_EXPORT CUresult CUDAAPI cuEventRecord(CUevent hEvent, CUstream hStream)
{
    return record(hEvent, hStream, 0);
}

SI_EXPORT CUresult CUDAAPI cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
    return record(hEvent, hStream, 1);
}

SI_EXPORT CUresult CUDAAPI cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    (void)flags;
    return record(hEvent, hStream, 0);
}

SI_EXPORT CUresult CUDAAPI cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream,
                                                       unsigned int flags)
{
    (void)flags;
    return record(hEvent, hStream, 1);
}

SI_EXPORT CUresult CUDAAPI cuEventQuery(CUevent hEvent)
{
    REQUIRE_INIT();
    struct CUevent_st *e = event_of(hEvent);
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    return si_event_done(e->ei) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

SI_EXPORT CUresult CUDAAPI cuEventSynchronize(CUevent hEvent)
{
    REQUIRE_INIT();
    struct CUevent_st *e = event_of(hEvent);
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    si_wait_event(e->ei);
    return CUDA_SUCCESS;
}

static CUresult elapsed(float *ms, CUevent a, CUevent b)
{
    REQUIRE_INIT();
    struct CUevent_st *x = event_of(a), *y = event_of(b);
    if (!x || !y)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!ms)
        return CUDA_ERROR_INVALID_VALUE;
    if ((x->flags | y->flags) & CU_EVENT_DISABLE_TIMING)
        return CUDA_ERROR_INVALID_HANDLE;
    if (!si_event_done(x->ei) || !si_event_done(y->ei))
        return CUDA_ERROR_NOT_READY;
    int64_t t0 = si_event_time(x->ei), t1 = si_event_time(y->ei);
    if (t0 < 0 || t1 < 0)
        return CUDA_ERROR_INVALID_HANDLE; /* not recorded */
    *ms = (float)((double)(t1 - t0) / 1e6);
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    return elapsed(pMilliseconds, hStart, hEnd);
}

SI_EXPORT CUresult CUDAAPI cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    return elapsed(pMilliseconds, hStart, hEnd);
}

/* ---- memory ---- */

static void *map_bytes(size_t n)
{
    void *p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

SI_EXPORT CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    REQUIRE_CTX(c);
    (void)c;
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (si_mem_reserve(bytesize) != 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    void *p = map_bytes(bytesize);
    pthread_mutex_lock(&S.lock);
    alloc_t *a = p ? alloc_add((uintptr_t)p, bytesize, CU_MEMORYTYPE_DEVICE) : NULL;
    pthread_mutex_unlock(&S.lock);
    if (!a) {
        if (p)
            munmap(p, bytesize);
        si_mem_release(bytesize);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    REQUIRE_CTX(c);
    (void)c;
    (void)flags;
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    void *p = map_bytes(bytesize);
    unsigned char *res = calloc(chunks(bytesize), 1);
    pthread_mutex_lock(&S.lock);
    alloc_t *a = p && res ? alloc_add((uintptr_t)p, bytesize, KIND_MANAGED) : NULL;
    if (a)
        a->resident = res;
    pthread_mutex_unlock(&S.lock);
    if (!a) {
        if (p)
            munmap(p, bytesize);
        free(res);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *dptr = (CUdeviceptr)(uintptr_t)p;
    // cppcheck-suppress memleak ; res is owned by the allocation record (a->resident)
    return CUDA_SUCCESS;
}

static CUresult host_alloc(void **pp, size_t bytesize, unsigned flags)
{
    REQUIRE_CTX(c);
    (void)c;
    if (!pp)
        return CUDA_ERROR_INVALID_VALUE;
    void *p = map_bytes(bytesize);
    pthread_mutex_lock(&S.lock);
    alloc_t *a = p ? alloc_add((uintptr_t)p, bytesize, CU_MEMORYTYPE_HOST) : NULL;
    if (a)
        a->host_flags = flags;
    pthread_mutex_unlock(&S.lock);
    if (!a) {
        if (p)
            munmap(p, bytesize);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pp = p;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    return host_alloc(pp, bytesize, 0);
}

SI_EXPORT CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    return host_alloc(pp, bytesize, Flags);
}

SI_EXPORT CUresult CUDAAPI cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    REQUIRE_INIT();
    if (!pFlags)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&S.lock);
    alloc_t *a = alloc_find((uintptr_t)p);
    int ok = a && a->kind == CU_MEMORYTYPE_HOST;
    if (ok)
        *pFlags = a->host_flags;
    pthread_mutex_unlock(&S.lock);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult free_kind(uintptr_t p, int host)
{
    REQUIRE_INIT();
    if (p == 0)
        return CUDA_SUCCESS;
    si_wait_ctx(-1); /* freeing synchronises the device, as the driver does */
    pthread_mutex_lock(&S.lock);
    alloc_t *a = alloc_find(p);
    if (!a || a->base != p || (host != (a->kind == CU_MEMORYTYPE_HOST))) {
        pthread_mutex_unlock(&S.lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (a->kind == CU_MEMORYTYPE_DEVICE)
        si_mem_release(a->size);
    if (a->kind == KIND_MANAGED)
        for (size_t i = 0; i < chunks(a->size); i++)
            if (a->resident[i])
                si_mem_release(chunk_bytes(a, i));
    munmap((void *)a->base, a->size ? a->size : 1);
    alloc_remove(a);
    pthread_mutex_unlock(&S.lock);
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuMemFree_v2(CUdeviceptr dptr)
{
    return free_kind((uintptr_t)dptr, 0);
}

SI_EXPORT CUresult CUDAAPI cuMemFreeHost(void *p)
{
    return free_kind((uintptr_t)p, 1);
}

SI_EXPORT CUresult CUDAAPI cuMemGetInfo_v2(size_t *free_b, size_t *total_b)
{
    REQUIRE_CTX(c);
    (void)c;
    if (!free_b || !total_b)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t f, t;
    si_mem_info(&f, &t);
    *free_b = f;
    *total_b = t;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute attribute,
                                                 CUdeviceptr ptr)
{
    REQUIRE_INIT();
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&S.lock);
    alloc_t *a = alloc_find((uintptr_t)ptr);
    CUresult r = CUDA_SUCCESS;
    if (!a) {
        r = CUDA_ERROR_INVALID_VALUE; /* pageable host memory or garbage, as the driver says */
    } else if (attribute == CU_POINTER_ATTRIBUTE_MEMORY_TYPE) {
        *(unsigned *)data = a->kind == KIND_MANAGED ? CU_MEMORYTYPE_UNIFIED : (unsigned)a->kind;
    } else if (attribute == CU_POINTER_ATTRIBUTE_IS_MANAGED) {
        *(unsigned *)data = a->kind == KIND_MANAGED;
    } else if (attribute == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR) {
        *(CUdeviceptr *)data = a->base;
    } else if (attribute == CU_POINTER_ATTRIBUTE_RANGE_SIZE) {
        *(size_t *)data = a->size;
    } else {
        r = CUDA_ERROR_NOT_SUPPORTED;
    }
    pthread_mutex_unlock(&S.lock);
    return r;
}

/* Checks [p, p+n) lies in one allocation (any kind when host_ok). */
static int range_ok(uintptr_t p, size_t n, int host_ok)
{
    pthread_mutex_lock(&S.lock);
    alloc_t *a = alloc_find(p);
    int ok = a && p + n <= a->base + a->size && (host_ok || a->kind != CU_MEMORYTYPE_HOST);
    pthread_mutex_unlock(&S.lock);
    return ok;
}

static int64_t copy_ns(size_t n)
{
    return (int64_t)(n / LINK_BYTES_PER_US) * 1000 + 1000;
}

/* Copies now (the data is visible at once) and occupies the simulated GPU for the transfer
 * time on the stream, so ordering and timing follow the stream. */
static CUresult copy_async(void *dst, const void *src, size_t n, CUstream h, int ptsz, int sync)
{
    int si;
    CUresult r = resolve_stream(h, ptsz, &si);
    if (r != CUDA_SUCCESS)
        return r;
    if (n)
        memmove(dst, src, n);
    si_submit_t s = {.kind = SI_K_COPY, .stream = si, .dur_ns = copy_ns(n), .name = "copy", .bytes = n};
    uint64_t seq = si_submit(&s);
    if (!seq)
        return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    if (sync)
        si_wait_stream(si, seq);
    return CUDA_SUCCESS;
}

#define DEV(p) ((void *)(uintptr_t)(p))

SI_EXPORT CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    REQUIRE_CTX(c);
    (void)c;
    if (!range_ok(dstDevice, ByteCount, 0) || !srcHost)
        return CUDA_ERROR_INVALID_VALUE;
    return copy_async(DEV(dstDevice), srcHost, ByteCount, NULL, 0, 1);
}

SI_EXPORT CUresult CUDAAPI cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    REQUIRE_CTX(c);
    (void)c;
    if (!range_ok(srcDevice, ByteCount, 0) || !dstHost)
        return CUDA_ERROR_INVALID_VALUE;
    return copy_async(dstHost, DEV(srcDevice), ByteCount, NULL, 0, 1);
}

SI_EXPORT CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount)
{
    REQUIRE_CTX(c);
    (void)c;
    if (!range_ok(dstDevice, ByteCount, 0) || !range_ok(srcDevice, ByteCount, 0))
        return CUDA_ERROR_INVALID_VALUE;
    return copy_async(DEV(dstDevice), DEV(srcDevice), ByteCount, NULL, 0, 1);
}

SI_EXPORT CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount)
{
    REQUIRE_CTX(c);
    (void)c;
    if (!dst || !src)
        return CUDA_ERROR_INVALID_VALUE;
    return copy_async(DEV(dst), DEV(src), ByteCount, NULL, 0, 1);
}

#define COPY_ASYNC_PAIR(NAME, DT, ST, DCHK, SCHK)                                               \
    static CUresult NAME##_impl(DT dst, ST src, size_t n, CUstream h, int ptsz)                \
    {                                                                                          \
        REQUIRE_CTX(c);                                                                        \
        (void)c;                                                                               \
        if (!(DCHK) || !(SCHK))                                                                \
            return CUDA_ERROR_INVALID_VALUE;                                                   \
        return copy_async((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n, h, ptsz, 0); \
    }

COPY_ASYNC_PAIR(htod, CUdeviceptr, const void *, range_ok(dst, n, 0), src != NULL)
COPY_ASYNC_PAIR(dtoh, void *, CUdeviceptr, dst != NULL, range_ok(src, n, 0))
COPY_ASYNC_PAIR(dtod, CUdeviceptr, CUdeviceptr, range_ok(dst, n, 0), range_ok(src, n, 0))
COPY_ASYNC_PAIR(any, CUdeviceptr, CUdeviceptr, dst != 0, src != 0)

SI_EXPORT CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *s, size_t n, CUstream h)
{
    return htod_impl(d, s, n, h, 0);
}
SI_EXPORT CUresult CUDAAPI cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr d, const void *s, size_t n, CUstream h)
{
    return htod_impl(d, s, n, h, 1);
}
SI_EXPORT CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void *d, CUdeviceptr s, size_t n, CUstream h)
{
    return dtoh_impl(d, s, n, h, 0);
}
SI_EXPORT CUresult CUDAAPI cuMemcpyDtoHAsync_v2_ptsz(void *d, CUdeviceptr s, size_t n, CUstream h)
{
    return dtoh_impl(d, s, n, h, 1);
}
SI_EXPORT CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h)
{
    return dtod_impl(d, s, n, h, 0);
}
SI_EXPORT CUresult CUDAAPI cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h)
{
    return dtod_impl(d, s, n, h, 1);
}
SI_EXPORT CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h)
{
    return any_impl(d, s, n, h, 0);
}
SI_EXPORT CUresult CUDAAPI cuMemcpyAsync_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h)
{
    return any_impl(d, s, n, h, 1);
}

static CUresult memset_impl(CUdeviceptr d, unsigned v, size_t n, int width, CUstream h, int ptsz,
                            int sync)
{
    REQUIRE_CTX(c);
    (void)c;
    if (!range_ok(d, n * (size_t)width, 0))
        return CUDA_ERROR_INVALID_VALUE;
    unsigned char *p = DEV(d);
    for (size_t i = 0; i < n; i++) {
        if (width == 1)
            p[i] = (unsigned char)v;
        else if (width == 2) {
            unsigned short x = (unsigned short)v;
            memcpy(p + 2 * i, &x, 2);
        } else {
            memcpy(p + 4 * i, &v, 4);
        }
    }
    int si;
    CUresult r = resolve_stream(h, ptsz, &si);
    if (r != CUDA_SUCCESS)
        return r;
    si_submit_t s = {.kind = SI_K_COPY, .stream = si, .dur_ns = copy_ns(n * (size_t)width),
                     .name = "memset", .bytes = n * (size_t)width};
    uint64_t seq = si_submit(&s);
    if (!seq)
        return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
    if (sync)
        si_wait_stream(si, seq);
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr d, unsigned char uc, size_t N)
{
    return memset_impl(d, uc, N, 1, NULL, 0, 1);
}
SI_EXPORT CUresult CUDAAPI cuMemsetD32_v2(CUdeviceptr d, unsigned int ui, size_t N)
{
    return memset_impl(d, ui, N, 4, NULL, 0, 1);
}
SI_EXPORT CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr d, unsigned char uc, size_t N, CUstream h)
{
    return memset_impl(d, uc, N, 1, h, 0, 0);
}
SI_EXPORT CUresult CUDAAPI cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char uc, size_t N, CUstream h)
{
    return memset_impl(d, uc, N, 1, h, 1, 0);
}
SI_EXPORT CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr d, unsigned short us, size_t N, CUstream h)
{
    return memset_impl(d, us, N, 2, h, 0, 0);
}
SI_EXPORT CUresult CUDAAPI cuMemsetD16Async_ptsz(CUdeviceptr d, unsigned short us, size_t N, CUstream h)
{
    return memset_impl(d, us, N, 2, h, 1, 0);
}
SI_EXPORT CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr d, unsigned int ui, size_t N, CUstream h)
{
    return memset_impl(d, ui, N, 4, h, 0, 0);
}
SI_EXPORT CUresult CUDAAPI cuMemsetD32Async_ptsz(CUdeviceptr d, unsigned int ui, size_t N, CUstream h)
{
    return memset_impl(d, ui, N, 4, h, 1, 0);
}

/* Prefetch to the device makes the range resident (evicting this process's oldest managed
 * chunks if the device is full); to the host makes it non-resident. The transfer occupies
 * the stream for its link time. */
static CUresult prefetch(CUdeviceptr p, size_t n, CUmemLocation loc, CUstream h, int ptsz)
{
    REQUIRE_CTX(c);
    (void)c;
    pthread_mutex_lock(&S.lock);
    alloc_t *a = alloc_find((uintptr_t)p);
    if (!a || a->kind != KIND_MANAGED || (uintptr_t)p + n > a->base + a->size) {
        pthread_mutex_unlock(&S.lock);
        return CUDA_ERROR_INVALID_VALUE;
    }
    size_t c0 = ((uintptr_t)p - a->base) / CHUNK, c1 = ((uintptr_t)p + n - a->base + CHUNK - 1) / CHUNK;
    uint64_t moved = 0;
    if (loc.type == CU_MEM_LOCATION_TYPE_DEVICE && loc.id == 0) {
        moved = make_resident(a, c0, c1);
    } else if (loc.type == CU_MEM_LOCATION_TYPE_HOST) {
        for (size_t i = c0; i < c1; i++)
            if (a->resident[i]) {
                a->resident[i] = 0;
                si_mem_release(chunk_bytes(a, i));
                moved += chunk_bytes(a, i);
            }
    } else {
        pthread_mutex_unlock(&S.lock);
        return CUDA_ERROR_INVALID_DEVICE;
    }
    pthread_mutex_unlock(&S.lock);
    int si;
    CUresult r = resolve_stream(h, ptsz, &si);
    if (r != CUDA_SUCCESS)
        return r;
    si_submit_t s = {.kind = SI_K_COPY, .stream = si, .dur_ns = copy_ns(moved), .name = "prefetch",
                     .bytes = moved};
    return si_submit(&s) ? CUDA_SUCCESS : CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
}

SI_EXPORT CUresult CUDAAPI cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count,
                                                 CUmemLocation location, unsigned int flags,
                                                 CUstream hStream)
{
    (void)flags;
    return prefetch(devPtr, count, location, hStream, 0);
}

SI_EXPORT CUresult CUDAAPI cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count,
                                                      CUmemLocation location, unsigned int flags,
                                                      CUstream hStream)
{
    (void)flags;
    return prefetch(devPtr, count, location, hStream, 1);
}

/* ---- cuGetProcAddress: base name + version + per-thread flag -> entry point ---- */

typedef struct {
    const char *base;
    int version, ptds;
    void *fn;
} proc_t;

#define P(base, ver, ptds, fn) {#base, ver, ptds, (void *)&fn},
static const proc_t g_procs[] = {
    P(cuInit, 2000, 0, cuInit) P(cuDriverGetVersion, 2020, 0, cuDriverGetVersion)
    P(cuGetErrorString, 6000, 0, cuGetErrorString) P(cuGetErrorName, 6000, 0, cuGetErrorName)
    P(cuGetExportTable, 3000, 0, cuGetExportTable)
    P(cuDeviceGet, 2000, 0, cuDeviceGet) P(cuDeviceGetCount, 2000, 0, cuDeviceGetCount)
    P(cuDeviceGetName, 2000, 0, cuDeviceGetName) P(cuDeviceTotalMem, 3020, 0, cuDeviceTotalMem_v2)
    P(cuDeviceGetAttribute, 2000, 0, cuDeviceGetAttribute)
    P(cuDevicePrimaryCtxRetain, 7000, 0, cuDevicePrimaryCtxRetain)
    P(cuDevicePrimaryCtxRelease, 11000, 0, cuDevicePrimaryCtxRelease_v2)
    P(cuCtxCreate, 3020, 0, cuCtxCreate_v2) P(cuCtxCreate, 12050, 0, cuCtxCreate_v4)
    P(cuCtxDestroy, 4000, 0, cuCtxDestroy_v2) P(cuCtxSetCurrent, 4000, 0, cuCtxSetCurrent)
    P(cuCtxGetCurrent, 4000, 0, cuCtxGetCurrent) P(cuCtxPushCurrent, 4000, 0, cuCtxPushCurrent_v2)
    P(cuCtxPopCurrent, 4000, 0, cuCtxPopCurrent_v2) P(cuCtxGetDevice, 2000, 0, cuCtxGetDevice)
    P(cuCtxSynchronize, 2000, 0, cuCtxSynchronize)
    P(cuModuleLoad, 2000, 0, cuModuleLoad) P(cuModuleLoadData, 2000, 0, cuModuleLoadData)
    P(cuModuleUnload, 2000, 0, cuModuleUnload) P(cuModuleGetFunction, 2000, 0, cuModuleGetFunction)
    P(cuFuncGetName, 12030, 0, cuFuncGetName) P(cuFuncGetParamInfo, 12040, 0, cuFuncGetParamInfo)
    P(cuLaunchKernel, 4000, 0, cuLaunchKernel) P(cuLaunchKernel, 7000, 1, cuLaunchKernel_ptsz)
    P(cuLaunchKernelEx, 11060, 0, cuLaunchKernelEx) P(cuLaunchKernelEx, 11060, 1, cuLaunchKernelEx_ptsz)
    P(cuLaunchCooperativeKernel, 9000, 0, cuLaunchCooperativeKernel)
    P(cuLaunchCooperativeKernel, 9000, 1, cuLaunchCooperativeKernel_ptsz)
    P(cuLaunchHostFunc, 10000, 0, cuLaunchHostFunc) P(cuLaunchHostFunc, 10000, 1, cuLaunchHostFunc_ptsz)
    P(cuStreamCreate, 2000, 0, cuStreamCreate) P(cuStreamCreateWithPriority, 5050, 0, cuStreamCreateWithPriority)
    P(cuStreamDestroy, 4000, 0, cuStreamDestroy_v2)
    P(cuStreamSynchronize, 2000, 0, cuStreamSynchronize) P(cuStreamSynchronize, 7000, 1, cuStreamSynchronize_ptsz)
    P(cuStreamQuery, 2000, 0, cuStreamQuery) P(cuStreamQuery, 7000, 1, cuStreamQuery_ptsz)
    P(cuStreamWaitEvent, 3020, 0, cuStreamWaitEvent) P(cuStreamWaitEvent, 7000, 1, cuStreamWaitEvent_ptsz)
    P(cuStreamGetFlags, 5050, 0, cuStreamGetFlags) P(cuStreamGetFlags, 7000, 1, cuStreamGetFlags_ptsz)
    P(cuStreamGetCtx, 9020, 0, cuStreamGetCtx) P(cuStreamGetCtx, 9020, 1, cuStreamGetCtx_ptsz)
    P(cuStreamIsCapturing, 10000, 0, cuStreamIsCapturing) P(cuStreamIsCapturing, 10000, 1, cuStreamIsCapturing_ptsz)
    P(cuEventCreate, 2000, 0, cuEventCreate) P(cuEventDestroy, 4000, 0, cuEventDestroy_v2)
    P(cuEventRecord, 2000, 0, cuEventRecord) P(cuEventRecord, 7000, 1, cuEventRecord_ptsz)
    P(cuEventRecordWithFlags, 11010, 0, cuEventRecordWithFlags)
    P(cuEventRecordWithFlags, 11010, 1, cuEventRecordWithFlags_ptsz)
    P(cuEventQuery, 2000, 0, cuEventQuery) P(cuEventSynchronize, 2000, 0, cuEventSynchronize)
    P(cuEventElapsedTime, 2000, 0, cuEventElapsedTime) P(cuEventElapsedTime, 12080, 0, cuEventElapsedTime_v2)
    P(cuMemAlloc, 3020, 0, cuMemAlloc_v2) P(cuMemFree, 3020, 0, cuMemFree_v2)
    P(cuMemAllocManaged, 6000, 0, cuMemAllocManaged) P(cuMemAllocHost, 3020, 0, cuMemAllocHost_v2)
    P(cuMemHostAlloc, 2020, 0, cuMemHostAlloc) P(cuMemFreeHost, 2000, 0, cuMemFreeHost)
    P(cuMemHostGetFlags, 2030, 0, cuMemHostGetFlags) P(cuMemGetInfo, 3020, 0, cuMemGetInfo_v2)
    P(cuPointerGetAttribute, 4000, 0, cuPointerGetAttribute)
    P(cuMemcpyHtoD, 3020, 0, cuMemcpyHtoD_v2) P(cuMemcpyDtoH, 3020, 0, cuMemcpyDtoH_v2)
    P(cuMemcpyDtoD, 3020, 0, cuMemcpyDtoD_v2) P(cuMemcpy, 4000, 0, cuMemcpy)
    P(cuMemcpyAsync, 4000, 0, cuMemcpyAsync) P(cuMemcpyAsync, 7000, 1, cuMemcpyAsync_ptsz)
    P(cuMemcpyHtoDAsync, 3020, 0, cuMemcpyHtoDAsync_v2) P(cuMemcpyHtoDAsync, 7000, 1, cuMemcpyHtoDAsync_v2_ptsz)
    P(cuMemcpyDtoHAsync, 3020, 0, cuMemcpyDtoHAsync_v2) P(cuMemcpyDtoHAsync, 7000, 1, cuMemcpyDtoHAsync_v2_ptsz)
    P(cuMemcpyDtoDAsync, 3020, 0, cuMemcpyDtoDAsync_v2) P(cuMemcpyDtoDAsync, 7000, 1, cuMemcpyDtoDAsync_v2_ptsz)
    P(cuMemsetD8, 3020, 0, cuMemsetD8_v2) P(cuMemsetD32, 3020, 0, cuMemsetD32_v2)
    P(cuMemsetD8Async, 3020, 0, cuMemsetD8Async) P(cuMemsetD8Async, 7000, 1, cuMemsetD8Async_ptsz)
    P(cuMemsetD16Async, 3020, 0, cuMemsetD16Async) P(cuMemsetD16Async, 7000, 1, cuMemsetD16Async_ptsz)
    P(cuMemsetD32Async, 3020, 0, cuMemsetD32Async) P(cuMemsetD32Async, 7000, 1, cuMemsetD32Async_ptsz)
    P(cuMemPrefetchAsync, 12020, 0, cuMemPrefetchAsync_v2)
    P(cuMemPrefetchAsync, 12020, 1, cuMemPrefetchAsync_v2_ptsz)
    P(cuGetProcAddress, 11030, 0, cuGetProcAddress) P(cuGetProcAddress, 12000, 0, cuGetProcAddress_v2)
};

static CUresult proc_lookup(const char *symbol, void **pfn, int ver, cuuint64_t flags,
                            CUdriverProcAddressQueryResult *st)
{
    if (!pfn)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    const proc_t *best = NULL;
    int found = 0, have_ptds = 0;
    if (symbol)
        for (size_t i = 0; i < sizeof g_procs / sizeof g_procs[0]; i++)
            if (strcmp(g_procs[i].base, symbol) == 0) {
                found = 1;
                have_ptds |= g_procs[i].ptds;
            }
    int want = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && have_ptds;
    for (size_t i = 0; found && i < sizeof g_procs / sizeof g_procs[0]; i++) {
        const proc_t *p = &g_procs[i];
        if (strcmp(p->base, symbol) == 0 && p->ptds == want && p->version <= ver &&
            (!best || p->version > best->version))
            best = p;
    }
    if (st)
        *st = best ? CU_GET_PROC_ADDRESS_SUCCESS
                   : found ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                           : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (!best)
        return CUDA_ERROR_NOT_FOUND;
    *pfn = best->fn;
    return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                            cuuint64_t flags)
{
    return proc_lookup(symbol, pfn, cudaVersion, flags, NULL);
}

SI_EXPORT CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                               cuuint64_t flags,
                                               CUdriverProcAddressQueryResult *symbolStatus)
{
    return proc_lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}

/* Test hook (not a driver entry point): takes the shared engine's lock and never returns, so
 * a test can kill the process while it holds the lock. */
SI_EXPORT void gmx_standin_test_hang_locked(void)
{
    si_engine_hang_locked();
}
