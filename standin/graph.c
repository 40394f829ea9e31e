/*
 * The stand-in driver: stream capture and graphs. While a stream captures, the work submitted
 * to it (kernels, copies, memsets, host functions, event records) is recorded as graph nodes
 * instead of running; a stream that waits on an event recorded in a capture joins that
 * capture. A graph is the captured nodes in capture order (one chain: a valid order of any
 * captured dependency graph); launching its instantiation replays every node on the launch
 * stream, as if the program had submitted them there again (kernels' parameter values as
 * captured, copies and memsets moving bytes at replay).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "standin_internal.h"

#define GRAPH_MAGIC 0x67726170u
#define EXEC_MAGIC 0x65786563u

typedef struct CUgraphNode_st {
	si_cap_t c;
	unsigned char *pbuf; /* kernel parameter values (c.f's layout) */
} node_t;

struct CUgraph_st {
	unsigned magic;
	node_t **nodes;
	size_t n, cap;
};

struct CUgraphExec_st {
	unsigned magic;
	struct CUgraph_st *g; /* a copy of the graph as instantiated */
};

/* The graph each engine stream captures into (NULL: not capturing), and the capture's id. */
static struct CUgraph_st *g_capture[SI_STREAMS];
static uint64_t g_capture_id[SI_STREAMS];
static uint64_t g_next_id;
static __thread CUstreamCaptureMode tl_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

static void node_free(node_t *n)
{
	if (n) {
		free(n->pbuf);
		free(n);
	}
}

static void graph_free(struct CUgraph_st *g)
{
	if (!g)
		return;
	for (size_t i = 0; i < g->n; i++)
		node_free(g->nodes[i]);
	free(g->nodes);
	g->magic = 0;
	free(g);
}

static struct CUgraph_st *graph_new(void)
{
	struct CUgraph_st *g = calloc(1, sizeof *g);
	if (g)
		g->magic = GRAPH_MAGIC;
	return g;
}

/* Appends a copy of c to g (the kernel's parameter values copied out of params). */
static CUresult graph_add(struct CUgraph_st *g, const si_cap_t *c, void **params)
{
	node_t *n = calloc(1, sizeof *n);
	if (!n)
		return CUDA_ERROR_OUT_OF_MEMORY;
	n->c = *c;
	if (c->kind == SI_CAP_KERNEL && c->f->nparams > 0 && params) {
		size_t end = c->f->off[c->f->nparams - 1] + c->f->size[c->f->nparams - 1];
		n->pbuf = calloc(1, end);
		if (!n->pbuf) {
			free(n);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		for (int i = 0; i < c->f->nparams; i++)
			memcpy(n->pbuf + c->f->off[i], params[i], c->f->size[i]);
	}
	if (g->n == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 16;
		node_t **nn = realloc(g->nodes, cap * sizeof *nn);
		if (!nn) {
			node_free(n);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		g->nodes = nn;
		g->cap = cap;
	}
	g->nodes[g->n++] = n;
	return CUDA_SUCCESS;
}

int si__capturing(int si)
{
	return si >= 0 && si < SI_STREAMS && g_capture[si] != NULL;
}

CUresult si__capture(int si, const si_cap_t *c, void **params)
{
	pthread_mutex_lock(&S.lock);
	CUresult r = g_capture[si] ? graph_add(g_capture[si], c, params) : CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
	pthread_mutex_unlock(&S.lock);
	return r;
}

void si__capture_join(int si, int from)
{
	pthread_mutex_lock(&S.lock);
	if (from >= 0 && from < SI_STREAMS && g_capture[from] && !g_capture[si]) {
		g_capture[si] = g_capture[from];
		g_capture_id[si] = g_capture_id[from];
	}
	pthread_mutex_unlock(&S.lock);
}

void si__capture_forget(void)
{
	memset(g_capture, 0, sizeof g_capture);
}

/* Replays one node on engine stream si. */
static CUresult replay(const node_t *n, int si)
{
	const si_cap_t *c = &n->c;
	switch (c->kind) {
	case SI_CAP_KERNEL: {
		void *params[MAX_PARAMS];
		for (int i = 0; i < c->f->nparams; i++)
			params[i] = n->pbuf + c->f->off[i];
		if (!c->f->in_use)
			return CUDA_ERROR_INVALID_HANDLE; /* its module was unloaded */
		si_submit_t s = {.kind = SI_K_KERNEL,
				 .stream = si,
				 .dur_ns = si__launch_cost(c->f, n->pbuf ? params : NULL),
				 .name = c->f->name};
		if (!si_submit(&s))
			return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
		si__record_kernel(c->f, n->pbuf ? params : NULL, si, c->f->dur_ns, c->grid, c->block, 0);
		return CUDA_SUCCESS;
	}
	case SI_CAP_COPY:
		return si__copy_submit(c->dst, c->src, c->n, si);
	case SI_CAP_MEMSET:
		return si__memset_submit((uintptr_t)c->dst, c->value, c->n, c->width, si);
	case SI_CAP_HOSTFN: {
		si_submit_t s = {
		    .kind = SI_K_HOSTFN, .stream = si, .hostfn = c->hostfn, .user = c->user, .name = "hostfn"};
		return si_submit(&s) ? CUDA_SUCCESS : CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
	}
	case SI_CAP_RECORD: {
		si_submit_t s = {.kind = SI_K_RECORD, .stream = si, .event = c->event, .name = "record"};
		return si_submit(&s) ? CUDA_SUCCESS : CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
	}
	default:
		return CUDA_SUCCESS;
	}
}

/* ---- capture ---- */

static CUresult begin(CUstream h, int ptsz, CUgraph into)
{
	int si;
	CUresult r = si__resolve_stream(h, ptsz, &si);
	if (r != CUDA_SUCCESS)
		return r;
	if (h == NULL || h == CU_STREAM_LEGACY)
		if (si_stream_kind(si) == SI_S_LEGACY)
			return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* the legacy stream cannot capture */
	pthread_mutex_lock(&S.lock);
	if (g_capture[si]) {
		pthread_mutex_unlock(&S.lock);
		return CUDA_ERROR_ILLEGAL_STATE;
	}
	struct CUgraph_st *g = into ? (struct CUgraph_st *)into : graph_new();
	if (!g) {
		pthread_mutex_unlock(&S.lock);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	g_capture[si] = g;
	g_capture_id[si] = ++g_next_id;
	pthread_mutex_unlock(&S.lock);
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
	(void)mode;
	return begin(hStream, 0, NULL);
}

SI_EXPORT CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
	(void)mode;
	return begin(hStream, 1, NULL);
}

SI_EXPORT CUresult CUDAAPI cuStreamBeginCapture(CUstream hStream)
{
	return begin(hStream, 0, NULL);
}

SI_EXPORT CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream hStream)
{
	return begin(hStream, 1, NULL);
}

static CUresult end(CUstream h, int ptsz, CUgraph *phGraph)
{
	if (!phGraph)
		return CUDA_ERROR_INVALID_VALUE;
	int si;
	CUresult r = si__resolve_stream(h, ptsz, &si);
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&S.lock);
	struct CUgraph_st *g = g_capture[si];
	if (g)
		for (int i = 0; i < SI_STREAMS; i++) /* the joined streams end with the origin */
			if (g_capture[i] == g)
				g_capture[i] = NULL;
	pthread_mutex_unlock(&S.lock);
	if (!g)
		return CUDA_ERROR_ILLEGAL_STATE;
	*phGraph = g;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
	return end(hStream, 0, phGraph);
}

SI_EXPORT CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
	return end(hStream, 1, phGraph);
}

static CUresult capture_info(CUstream h, int ptsz, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *graph,
			     const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps)
{
	if (!st)
		return CUDA_ERROR_INVALID_VALUE;
	int si;
	CUresult r = si__resolve_stream(h, ptsz, &si);
	if (r != CUDA_SUCCESS)
		return r;
	pthread_mutex_lock(&S.lock);
	struct CUgraph_st *g = g_capture[si];
	*st = g ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
	if (id && g)
		*id = g_capture_id[si];
	if (graph)
		*graph = g;
	if (deps)
		*deps = g && g->n ? (const CUgraphNode *)&g->nodes[g->n - 1] : NULL;
	if (edges)
		*edges = NULL;
	if (ndeps)
		*ndeps = g && g->n ? 1 : 0;
	pthread_mutex_unlock(&S.lock);
	return CUDA_SUCCESS;
}

CUresult si__is_capturing(CUstream h, int ptsz, CUstreamCaptureStatus *st)
{
	return capture_info(h, ptsz, st, NULL, NULL, NULL, NULL, NULL);
}

SI_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id)
{
	return capture_info(h, 0, st, id, NULL, NULL, NULL, NULL);
}

SI_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_ptsz(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id)
{
	return capture_info(h, 1, st, id, NULL, NULL, NULL, NULL);
}

SI_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id,
						     CUgraph *graph, const CUgraphNode **deps, size_t *n)
{
	return capture_info(h, 0, st, id, graph, deps, NULL, n);
}

SI_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_v2_ptsz(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id,
							  CUgraph *graph, const CUgraphNode **deps, size_t *n)
{
	return capture_info(h, 1, st, id, graph, deps, NULL, n);
}

SI_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_v3(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id,
						     CUgraph *graph, const CUgraphNode **deps,
						     const CUgraphEdgeData **edges, size_t *n)
{
	return capture_info(h, 0, st, id, graph, deps, edges, n);
}

SI_EXPORT CUresult CUDAAPI cuStreamGetCaptureInfo_v3_ptsz(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id,
							  CUgraph *graph, const CUgraphNode **deps,
							  const CUgraphEdgeData **edges, size_t *n)
{
	return capture_info(h, 1, st, id, graph, deps, edges, n);
}

/* Capture in a chain has one dependency set: the last node; updating it changes nothing. */
SI_EXPORT CUresult CUDAAPI cuStreamUpdateCaptureDependencies(CUstream h, CUgraphNode *deps, size_t n,
							     unsigned int flags)
{
	(void)deps;
	(void)n;
	(void)flags;
	int si;
	return si__resolve_stream(h, 0, &si);
}

SI_EXPORT CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
	if (!mode)
		return CUDA_ERROR_INVALID_VALUE;
	CUstreamCaptureMode old = tl_mode;
	tl_mode = *mode;
	*mode = old;
	return CUDA_SUCCESS;
}

/* ---- graphs ---- */

static struct CUgraph_st *graph_of(CUgraph h)
{
	return h && h->magic == GRAPH_MAGIC ? h : NULL;
}

SI_EXPORT CUresult CUDAAPI cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
	REQUIRE_INIT();
	if (!phGraph || flags)
		return CUDA_ERROR_INVALID_VALUE;
	*phGraph = graph_new();
	return *phGraph ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

SI_EXPORT CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph)
{
	REQUIRE_INIT();
	struct CUgraph_st *g = graph_of(hGraph);
	if (!g)
		return CUDA_ERROR_INVALID_VALUE;
	graph_free(g);
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
	REQUIRE_INIT();
	struct CUgraph_st *g = graph_of(hGraph);
	if (!g || !numNodes)
		return CUDA_ERROR_INVALID_VALUE;
	if (nodes)
		for (size_t i = 0; i < *numNodes; i++)
			nodes[i] = i < g->n ? g->nodes[i] : NULL;
	*numNodes = g->n;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuGraphGetRootNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *num)
{
	REQUIRE_INIT();
	struct CUgraph_st *g = graph_of(hGraph);
	if (!g || !num)
		return CUDA_ERROR_INVALID_VALUE;
	if (nodes && *num > 0 && g->n)
		nodes[0] = g->nodes[0];
	*num = g->n ? 1 : 0;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
	if (!hNode || !type)
		return CUDA_ERROR_INVALID_VALUE;
	switch (hNode->c.kind) {
	case SI_CAP_KERNEL:
		*type = CU_GRAPH_NODE_TYPE_KERNEL;
		break;
	case SI_CAP_COPY:
		*type = CU_GRAPH_NODE_TYPE_MEMCPY;
		break;
	case SI_CAP_MEMSET:
		*type = CU_GRAPH_NODE_TYPE_MEMSET;
		break;
	case SI_CAP_HOSTFN:
		*type = CU_GRAPH_NODE_TYPE_HOST;
		break;
	case SI_CAP_RECORD:
		*type = CU_GRAPH_NODE_TYPE_EVENT_RECORD;
		break;
	default:
		*type = CU_GRAPH_NODE_TYPE_EMPTY;
		break;
	}
	return CUDA_SUCCESS;
}

static CUresult instantiate(CUgraphExec *phExec, CUgraph hGraph)
{
	REQUIRE_INIT();
	struct CUgraph_st *g = graph_of(hGraph);
	if (!phExec || !g)
		return CUDA_ERROR_INVALID_VALUE;
	struct CUgraphExec_st *x = calloc(1, sizeof *x);
	struct CUgraph_st *copy = graph_new();
	CUresult r = x && copy ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; r == CUDA_SUCCESS && i < g->n; i++) {
		const node_t *n = g->nodes[i];
		void *params[MAX_PARAMS];
		int have = n->c.kind == SI_CAP_KERNEL && n->pbuf;
		for (int k = 0; have && k < n->c.f->nparams; k++)
			params[k] = n->pbuf + n->c.f->off[k];
		r = graph_add(copy, &n->c, have ? params : NULL);
	}
	if (r != CUDA_SUCCESS) {
		free(x);
		graph_free(copy);
		return r;
	}
	x->magic = EXEC_MAGIC;
	x->g = copy;
	*phExec = x;
	return CUDA_SUCCESS;
}

SI_EXPORT CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
						       unsigned long long flags)
{
	(void)flags;
	return instantiate(phGraphExec, hGraph);
}

/* CUDA 10/11's signature: an error node and a log buffer, left empty on success. */
static CUresult instantiate_v1(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode, char *logBuffer,
			       size_t bufferSize)
{
	if (phErrorNode)
		*phErrorNode = NULL;
	if (logBuffer && bufferSize)
		logBuffer[0] = '\0';
	return instantiate(phGraphExec, hGraph);
}

SI_EXPORT CUresult CUDAAPI cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
					      char *logBuffer, size_t bufferSize)
{
	return instantiate_v1(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

SI_EXPORT CUresult CUDAAPI cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
						 char *logBuffer, size_t bufferSize)
{
	return instantiate_v1(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

SI_EXPORT CUresult CUDAAPI cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
							CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
	CUresult r = instantiate(phGraphExec, hGraph);
	if (params) {
		params->hErrNode_out = NULL;
		params->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
	}
	return r;
}

SI_EXPORT CUresult CUDAAPI cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
							     CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
	return cuGraphInstantiateWithParams(phGraphExec, hGraph, params);
}

static struct CUgraphExec_st *exec_of(CUgraphExec h)
{
	return h && h->magic == EXEC_MAGIC ? h : NULL;
}

SI_EXPORT CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec)
{
	REQUIRE_INIT();
	struct CUgraphExec_st *x = exec_of(hGraphExec);
	if (!x)
		return CUDA_ERROR_INVALID_VALUE;
	graph_free(x->g);
	x->magic = 0;
	free(x);
	return CUDA_SUCCESS;
}

static CUresult graph_launch(CUgraphExec hGraphExec, CUstream h, int ptsz)
{
	REQUIRE_CTX(c);
	(void)c;
	struct CUgraphExec_st *x = exec_of(hGraphExec);
	if (!x)
		return CUDA_ERROR_INVALID_VALUE;
	int si;
	CUresult r = si__resolve_stream(h, ptsz, &si);
	for (size_t i = 0; r == CUDA_SUCCESS && i < x->g->n; i++)
		r = replay(x->g->nodes[i], si);
	return r;
}

SI_EXPORT CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	return graph_launch(hGraphExec, hStream, 0);
}

SI_EXPORT CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
	return graph_launch(hGraphExec, hStream, 1);
}

/* Uploading is a no-op: the replayed work is the graph's, wherever it lives. */
static CUresult graph_upload(CUgraphExec hGraphExec, CUstream h, int ptsz)
{
	if (!exec_of(hGraphExec))
		return CUDA_ERROR_INVALID_VALUE;
	int si;
	return si__resolve_stream(h, ptsz, &si);
}

SI_EXPORT CUresult CUDAAPI cuGraphUpload(CUgraphExec hGraphExec, CUstream hStream)
{
	return graph_upload(hGraphExec, hStream, 0);
}

SI_EXPORT CUresult CUDAAPI cuGraphUpload_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
	return graph_upload(hGraphExec, hStream, 1);
}
