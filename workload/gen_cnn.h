/* The cnn generator's internals, shared by its forward pass (gen_cnn.c) and
 * its training step (gen_cnn_train.c): tensors placed by the caching
 * allocator, the kernel emitter and the tape the forward pass records for
 * backward. Not a public interface. */
#ifndef GMX_WORKLOAD_GEN_CNN_H
#define GMX_WORKLOAD_GEN_CNN_H

#include <stdint.h>

#include "gen_internal.h"
#include "gpumux/devalloc.h"

/* Where a tensor lives (tens_t.param). */
enum {
	CNN_ACT = 0,   /* the activation allocator (activations, gradients, temporaries) */
	CNN_PARAM = 1, /* a trainable parameter (parameter allocator) */
	CNN_FIXED = 2, /* parameter allocator, not trained: BN running stats, optimizer state */
};

typedef struct tens {
	uint32_t c, h, w;
	uint32_t seg;
	uint64_t off, bytes;
	uint32_t id;   /* activations: 1.. per pass (0: untracked); parameters: index + 1 */
	uint8_t param; /* CNN_ACT, CNN_PARAM or CNN_FIXED */
} tens_t;

/* Forward operations the tape records (training). */
enum cnn_op { OP_CONV, OP_BN, OP_RELU, OP_MAXPOOL, OP_AVGPOOL, OP_ADD, OP_CAT, OP_LINEAR, OP_DROPOUT };

/* One forward operation as its backward needs it. */
typedef struct tape {
	uint8_t op;
	uint8_t prod;	  /* this entry created y (not an in-place update of it) */
	uint32_t coff;	  /* OP_CAT: x's first channel in y */
	tens_t x, y;	  /* input (OP_ADD: the identity added into y), output */
	tens_t w, b, aux; /* parameters (bytes 0: none); aux: max-pool indices, BN saved stats, dropout mask */
	double flops;
} tape_t;

/* A gradient: a tensor or a view of one, and the allocation it shares (refcounted). */
typedef struct gref {
	tens_t t;
	uint32_t base; /* index into net_t.gbase */
	uint8_t on;
} gref_t;

typedef struct gbase {
	uint32_t seg;
	uint64_t off;
	uint32_t refs;
} gbase_t;

typedef struct net {
	struct gen_ctx *g;
	int emit;
	uint64_t batch, think;
	double bw;
	gmx_devalloc_t act, par;
	tens_t *params; /* placed once, reused by every pass */
	uint32_t n_params, cap_params, next_param;
	uint32_t *act_buf, *par_buf; /* segment -> buffer (emit) */
	uint8_t *used;		     /* activation segments the current pass touched */
	uint32_t cap_used;
	int keep;     /* autograd on: act_free defers to the end of the request */
	tens_t *held; /* the deferred tensors */
	uint32_t n_held, cap_held;
	/* training (train=1): gen_cnn_train.c */
	int train, adam;
	uint32_t next_id, image_id, out_id;
	tape_t *tape;
	uint32_t n_tape, cap_tape;
	tens_t *live; /* activation by id (bytes 0: freed) */
	uint32_t cap_live;
	uint8_t *made; /* id already produced by an earlier tape entry */
	gref_t *grad;  /* activation gradient by id */
	uint32_t cap_grad;
	gbase_t *gbase;
	uint32_t n_gbase, cap_gbase;
	tens_t *pgrad; /* parameter gradient by parameter index (bytes 0: none) */
	tens_t *state; /* optimizer state: 2 per parameter (Adam: exp_avg, exp_avg_sq; SGD: momentum) */
	uint32_t cap_pgrad;
	gmx_devalloc_t snap_act; /* cnn_train_save */
	tens_t *snap_pgrad;
	uint32_t snap_cap;
	int rc;
} net_t;

typedef struct use {
	const tens_t *t;
	int rw; /* 1 read or written once, 2 read and written (in place, or two passes) */
} use_t;

/* Grows a table of `size`-byte entries to hold `need` of them, the new ones
 * zeroed. 0 or -ENOMEM. */
int cnn_grow(void **tab, uint32_t *cap, uint32_t need, size_t size);

/* A new activation-allocator tensor of `bytes` (shape c x h x w per image, for
 * the record), untracked (id 0). Errors go to n->rc. */
tens_t cnn_alloc(net_t *n, uint64_t bytes, uint32_t c, uint32_t h, uint32_t w);

/* A new activation of `bytes`, tracked by id when training (n->live). */
tens_t cnn_act_sized(net_t *n, uint64_t bytes, uint32_t c, uint32_t h, uint32_t w);

/* A new activation of batch x c x h x w floats, tracked by id when training. */
tens_t cnn_act_new(net_t *n, uint32_t c, uint32_t h, uint32_t w);

/* Returns an activation-allocator block to the allocator. */
void cnn_release(net_t *n, const tens_t *t);

/* Emits one kernel touching u[] in order (a pointer and an element count per
 * tensor); its duration from flops and bytes (gen_cnn.c's model). */
void cnn_kern(net_t *n, const char *name, double flops, const use_t *u, uint32_t nu);

/* Appends a forward operation to the tape (training only; no-op otherwise). */
void cnn_tape(net_t *n, uint8_t op, const tens_t *x, const tens_t *y, const tens_t *w, const tens_t *b,
	      const tens_t *aux, double flops, uint32_t coff);

/* Clears the per-pass training state (tape, ids, gradients) at an iteration's start. */
void cnn_train_begin(net_t *n);

/* After the forward pass produced logits y (labels: the int64 targets):
 * cross-entropy loss, zero_grad, backward over the tape, the optimizer step,
 * loss.item(); frees what the iteration allocated. */
void cnn_train_finish(net_t *n, const tens_t *y, const tens_t *labels);

/* Training: saves the state one iteration leaves to the next (the activation
 * allocator, the parameter gradients); cnn_train_restore puts it back, so the
 * next pass repeats the saved one's placements. 0 or -ENOMEM (n->rc set). */
int cnn_train_save(net_t *n);

/* Restores what cnn_train_save saved (no-op when not training). */
void cnn_train_restore(net_t *n);

/* Frees the training tables. */
void cnn_train_free(net_t *n);

#endif
