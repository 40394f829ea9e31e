/* cnn train=1: one training iteration of a torchvision CNN as PyTorch's eager
 * mode runs it (torchvision's references/classification/train.py loop):
 *
 *   images, labels uploaded; output = model(images) in train mode;
 *   loss = cross_entropy(output, labels); optimizer.zero_grad();
 *   loss.backward(); optimizer.step(); loss.item()
 *
 * Forward: the inference pass's kernels, with batch norm in train mode (batch
 * statistics: the input read twice, running stats updated, save_mean and
 * save_invstd kept) and VGG's dropout active. The forward pass records a tape
 * (gen_cnn.h); backward replays it in reverse, as autograd's engine runs the
 * graph:
 *
 *  - convolution: cudnn_conv2d_bwd_data (dX from dY and W; skipped for the
 *    first layer, whose input needs no gradient) and cudnn_conv2d_bwd_filter
 *    (dW from X and dY), each with the forward's flops: backward ~2x forward,
 *    the usual estimate (Kaplan et al. 2020, "Scaling Laws for Neural Language
 *    Models", section 2.1: 2N flops a token forward, 4N backward);
 *  - linear: the two GEMMs likewise, and the bias gradient's reduction;
 *  - batch norm: one kernel reading X and dY twice (reductions, then dX),
 *    gamma and the saved statistics, writing dX, dgamma, dbeta;
 *  - ReLU: threshold_backward from its saved result into a new dX;
 *    max pooling: a scatter through its saved int64 indices into a zeroed dX;
 *    average pooling, dropout (through its mask) likewise memory-bound;
 *  - the residual add passes dY to both inputs (no kernel; shared);
 *    torch.cat's gradient is one narrow copy per input (the slice of dY, one
 *    strided range per image);
 *  - a tensor that several operations read gets its gradients summed:
 *    in place into the first when nothing else holds it, else into a new
 *    tensor (autograd's InputBuffer::accumulate).
 *
 * Memory, as the caching allocator sees it: every activation stays allocated
 * from its forward kernel until the backward of the operation that produced
 * it (after every backward kernel that reads it: the autograd graph saves
 * nearly all of them); a gradient lives from the backward kernel that writes
 * it to its producer's backward; parameter gradients are allocated by
 * backward and freed by the next iteration's zero_grad(set_to_none=True),
 * after its forward pass (the reference loop's order), so they are held
 * during the forward pass; optimizer state is allocated at the first step and
 * kept (in the parameter allocator: it never moves).
 *
 * Optimizer step: PyTorch's default foreach implementation on CUDA, each
 * foreach op a pass of multi_tensor_apply launches over the parameter lists
 * (chunks of 65536 elements, at most 320 blocks and 110/64/48/36 tensors a
 * launch for 1-4 lists: ATen MultiTensorApply.cuh):
 *  - sgd (torchvision's ResNet recipe: momentum 0.9, weight decay 1e-4):
 *    g' = grad + wd * p (a new tensor per parameter), buf *= momentum,
 *    buf += g', p -= lr * buf (torch/optim/sgd.py _multi_tensor_sgd);
 *  - adam: exp_avg.lerp_(grad), exp_avg_sq *= beta2,
 *    exp_avg_sq.addcmul_(grad, grad), s = sqrt(exp_avg_sq) (new tensors),
 *    s /= bias correction, s += eps, p.addcdiv_(exp_avg, s)
 *    (torch/optim/adam.py _multi_tensor_adam): 2 states a parameter. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gen_cnn.h"

#define MT_CHUNK 65536ull /* elements a block of multi_tensor_apply handles */
#define MT_MAX_BLOCKS 320ull
static const uint32_t mt_max_tensors[4] = {110, 64, 48, 36};

/* ---- tables ------------------------------------------------------------------ */

int cnn_grow(void **tab, uint32_t *cap, uint32_t need, size_t size)
{
	if (need <= *cap)
		return 0;
	uint32_t nc = 2 * need + 64;
	char *p = realloc(*tab, (size_t)nc * size);
	if (!p)
		return -ENOMEM;
	memset(p + (size_t)*cap * size, 0, (size_t)(nc - *cap) * size);
	*tab = p;
	*cap = nc;
	return 0;
}

/* The gradient slot of activation id, or NULL (n->rc set). */
static gref_t *grad_slot(net_t *n, uint32_t id)
{
	if (cnn_grow((void **)&n->grad, &n->cap_grad, id + 1, sizeof(*n->grad))) {
		n->rc = -ENOMEM;
		return NULL;
	}
	return &n->grad[id];
}

/* Parameter gradients and optimizer states sized for every parameter. */
static int ptabs(net_t *n)
{
	uint32_t cap = n->cap_pgrad;
	if (cnn_grow((void **)&n->pgrad, &cap, n->n_params, sizeof(*n->pgrad)) ||
	    cnn_grow((void **)&n->state, &n->cap_pgrad, n->n_params, 2 * sizeof(*n->state))) {
		n->rc = -ENOMEM;
		return -ENOMEM;
	}
	return 0;
}

void cnn_train_begin(net_t *n)
{
	if (!n->train)
		return;
	n->n_tape = 0;
	n->next_id = 0;
	n->n_gbase = 0;
	if (n->live)
		memset(n->live, 0, (size_t)n->cap_live * sizeof(*n->live));
	if (n->made)
		memset(n->made, 0, n->cap_live);
	if (n->grad)
		memset(n->grad, 0, (size_t)n->cap_grad * sizeof(*n->grad));
}

void cnn_tape(net_t *n, uint8_t op, const tens_t *x, const tens_t *y, const tens_t *w, const tens_t *b,
	      const tens_t *aux, double flops, uint32_t coff)
{
	if (!n->train || n->rc)
		return;
	if (cnn_grow((void **)&n->tape, &n->cap_tape, n->n_tape + 1, sizeof(*n->tape))) {
		n->rc = -ENOMEM;
		return;
	}
	tape_t *e = &n->tape[n->n_tape++];
	memset(e, 0, sizeof(*e));
	e->op = op;
	e->x = *x;
	e->y = *y;
	if (w)
		e->w = *w;
	if (b)
		e->b = *b;
	if (aux)
		e->aux = *aux;
	e->flops = flops;
	e->coff = coff;
	e->prod = y->id && !n->made[y->id];
	if (y->id)
		n->made[y->id] = 1;
}

/* Frees activation id if it is still allocated. */
static void live_free(net_t *n, uint32_t id)
{
	if (id && id < n->cap_live && n->live[id].bytes) {
		cnn_release(n, &n->live[id]);
		n->live[id].bytes = 0;
	}
}

/* ---- gradients ----------------------------------------------------------------- */

static gref_t grad_alloc(net_t *n, const tens_t *like)
{
	gref_t g = {.t = cnn_alloc(n, like->bytes, like->c, like->h, like->w), .on = 1};
	if (n->rc || cnn_grow((void **)&n->gbase, &n->cap_gbase, n->n_gbase + 1, sizeof(*n->gbase))) {
		n->rc = n->rc ? n->rc : -ENOMEM;
		g.on = 0;
		return g;
	}
	g.base = n->n_gbase++;
	n->gbase[g.base] = (gbase_t){.seg = g.t.seg, .off = g.t.off, .refs = 1};
	return g;
}

static void base_unref(net_t *n, uint32_t b)
{
	if (b < n->n_gbase && n->gbase[b].refs && !--n->gbase[b].refs) {
		tens_t t = {.seg = n->gbase[b].seg, .off = n->gbase[b].off};
		cnn_release(n, &t);
	}
}

static void grad_drop(net_t *n, uint32_t id)
{
	gref_t *s = grad_slot(n, id);
	if (s && s->on) {
		base_unref(n, s->base);
		s->on = 0;
	}
}

/* Adds gradient g (whose reference the caller hands over) to activation id's. */
static void grad_acc(net_t *n, uint32_t id, gref_t g)
{
	gref_t *s = grad_slot(n, id);
	if (!s || !g.on)
		return;
	if (!s->on) {
		*s = g;
		return;
	}
	gref_t old = *s;
	if (n->gbase[old.base].refs == 1) { /* old += g */
		use_t u[2] = {{&g.t, 1}, {&old.t, 2}};
		cnn_kern(n, "grad_accumulate_add_", 0, u, 2);
		base_unref(n, g.base);
		return;
	}
	gref_t sum = grad_alloc(n, &old.t); /* old is shared: sum = old + g */
	use_t u[3] = {{&old.t, 1}, {&g.t, 1}, {&sum.t, 1}};
	cnn_kern(n, "grad_accumulate_add", 0, u, 3);
	base_unref(n, old.base);
	base_unref(n, g.base);
	s = grad_slot(n, id);
	if (s)
		*s = sum;
}

/* Parameter p's gradient: allocated by its first backward kernel (*acc 0),
 * accumulated into by any later one (*acc 1). */
static tens_t *pgrad_for(net_t *n, const tens_t *p, int *acc)
{
	static tens_t none;
	if (ptabs(n))
		return &none;
	tens_t *d = &n->pgrad[p->id - 1];
	*acc = d->bytes != 0;
	if (!*acc)
		*d = cnn_alloc(n, p->bytes, p->c, 1, 1);
	return d;
}

/* ---- backward ------------------------------------------------------------------- */

/* dX = the slice of dY that torch.cat copied x into: one contiguous range per image. */
static void cat_backward(net_t *n, const tape_t *e, const gref_t *gy)
{
	const tens_t *x = &e->x, *y = &e->y;
	gref_t dx = grad_alloc(n, x);
	uint64_t hw = (uint64_t)y->h * y->w * 4, per = (uint64_t)x->c * hw;
	uint32_t nu = (uint32_t)n->batch + 1;
	use_t *u = malloc(nu * sizeof(*u));
	tens_t *v = malloc(nu * sizeof(*v));
	if (!u || !v) {
		n->rc = -ENOMEM;
	} else {
		for (uint32_t s = 0; s < n->batch; s++) {
			v[s] = gy->t;
			v[s].off += s * (uint64_t)y->c * hw + e->coff * hw;
			v[s].bytes = per;
			u[s] = (use_t){&v[s], 1};
		}
		u[nu - 1] = (use_t){&dx.t, 1};
		cnn_kern(n, "cat_backward_slice_copy", 0, u, nu);
	}
	free(u);
	free(v);
	grad_acc(n, x->id, dx);
}

/* Backward of one tape entry, then frees what only it still needed. */
static void backward_op(net_t *n, const tape_t *e)
{
	gref_t *s = grad_slot(n, e->y.id);
	const tens_t *x = &e->x;
	int acc = 0;
	if (s && s->on) {
		gref_t gy = *s;
		gref_t dx = {0};
		switch (e->op) {
		case OP_CONV: {
			if (x->id != n->image_id) {
				dx = grad_alloc(n, x);
				use_t u[3] = {{&gy.t, 1}, {&e->w, 1}, {&dx.t, 1}};
				cnn_kern(n, "cudnn_conv2d_bwd_data", e->flops, u, 3);
			}
			tens_t *dw = pgrad_for(n, &e->w, &acc);
			use_t u[3] = {{x, 1}, {&gy.t, 1}, {dw, 1 + acc}};
			cnn_kern(n, "cudnn_conv2d_bwd_filter", e->flops, u, 3);
			if (e->b.bytes) {
				tens_t *db = pgrad_for(n, &e->b, &acc);
				use_t ub[2] = {{&gy.t, 1}, {db, 1 + acc}};
				cnn_kern(n, "conv2d_bwd_bias_reduce", 0, ub, 2);
			}
			break;
		}
		case OP_LINEAR: {
			dx = grad_alloc(n, x);
			use_t u[3] = {{&gy.t, 1}, {&e->w, 1}, {&dx.t, 1}};
			cnn_kern(n, "cublas_sgemm_bwd_data", e->flops, u, 3);
			tens_t *dw = pgrad_for(n, &e->w, &acc);
			use_t uw[3] = {{&gy.t, 1}, {x, 1}, {dw, 1 + acc}};
			cnn_kern(n, "cublas_sgemm_bwd_weight", e->flops, uw, 3);
			tens_t *db = pgrad_for(n, &e->b, &acc);
			use_t ub[2] = {{&gy.t, 1}, {db, 1 + acc}};
			cnn_kern(n, "reduce_sum_bias_grad", 0, ub, 2);
			break;
		}
		case OP_BN: {
			dx = grad_alloc(n, x);
			tens_t *dg = pgrad_for(n, &e->w, &acc);
			tens_t *db = pgrad_for(n, &e->b, &acc);
			use_t u[7] = {{x, 2}, {&gy.t, 2}, {&e->w, 1}, {&e->aux, 1}, {dg, 1 + acc}, {db, 1 + acc}, {&dx.t, 1}};
			cnn_kern(n, "cudnn_batch_norm_bwd", 0, u, 7);
			break;
		}
		case OP_RELU: { /* in place: dY of the result becomes dY of the input */
			gref_t d = grad_alloc(n, x);
			use_t u[3] = {{&gy.t, 1}, {&e->y, 1}, {&d.t, 1}};
			cnn_kern(n, "threshold_backward", 0, u, 3);
			grad_drop(n, e->y.id);
			s = grad_slot(n, e->y.id);
			if (s)
				*s = d;
			break;
		}
		case OP_ADD: /* out += identity: the identity's gradient is out's, shared */
			n->gbase[gy.base].refs++;
			dx = gy;
			break;
		case OP_MAXPOOL: {
			dx = grad_alloc(n, x);
			use_t u[3] = {{&gy.t, 1}, {&e->aux, 1}, {&dx.t, 2}};
			cnn_kern(n, "max_pool2d_with_indices_backward", 0, u, 3);
			break;
		}
		case OP_AVGPOOL: {
			dx = grad_alloc(n, x);
			use_t u[2] = {{&gy.t, 1}, {&dx.t, 1}};
			cnn_kern(n, "avg_pool2d_backward", 0, u, 2);
			break;
		}
		case OP_DROPOUT: {
			dx = grad_alloc(n, x);
			use_t u[3] = {{&gy.t, 1}, {&e->aux, 1}, {&dx.t, 1}};
			cnn_kern(n, "masked_scale", 0, u, 3);
			break;
		}
		case OP_CAT:
			cat_backward(n, e, &gy);
			break;
		}
		if (dx.on)
			grad_acc(n, x->id, dx);
	}
	if (e->prod) { /* every reader of y has run its backward */
		grad_drop(n, e->y.id);
		if (e->y.id != n->out_id)
			live_free(n, e->y.id);
	}
	if (e->aux.id)
		live_free(n, e->aux.id);
	else if (e->aux.bytes) /* BN's saved statistics */
		cnn_release(n, &e->aux);
}

/* ---- optimizer -------------------------------------------------------------------- */

enum { L_PARAM, L_GRAD, L_S0, L_S1, L_TMP };

/* Optimizer state k of parameter i, placed in the parameter allocator on first use. */
static const tens_t *state_at(net_t *n, uint32_t i, int k)
{
	tens_t *s = &n->state[2 * i + k];
	if (!s->bytes && !n->rc) {
		*s = (tens_t){.c = n->params[i].c, .h = 1, .w = 1, .bytes = n->params[i].bytes, .param = CNN_FIXED};
		n->rc = gmx_devalloc_alloc(&n->par, s->bytes, &s->seg, &s->off);
	}
	return s;
}

static const tens_t *list_at(net_t *n, int l, uint32_t i, const tens_t *tmp)
{
	switch (l) {
	case L_PARAM:
		return &n->params[i];
	case L_GRAD:
		return &n->pgrad[i];
	case L_S0:
	case L_S1:
		return state_at(n, i, l - L_S0);
	default:
		return &tmp[i];
	}
}

/* One foreach op over the trained parameters: `depth` tensor lists, launched
 * as multi_tensor_apply cuts them (a tensor may span two launches). */
static void mt_pass(net_t *n, const char *name, const int *lists, const int *rw, int depth, const tens_t *tmp)
{
	uint32_t maxt = mt_max_tensors[depth - 1];
	tens_t v[160];
	use_t u[160];
	uint32_t nu = 0, tensors = 0;
	uint64_t blocks = 0;
	for (uint32_t i = 0; i < n->n_params && !n->rc; i++) {
		if (n->params[i].param != CNN_PARAM || !n->pgrad[i].bytes)
			continue;
		uint64_t chunks = gen_div_up(n->params[i].bytes / 4, MT_CHUNK), c0 = 0;
		while (c0 < chunks) {
			uint64_t take = chunks - c0 < MT_MAX_BLOCKS - blocks ? chunks - c0 : MT_MAX_BLOCKS - blocks;
			for (int k = 0; k < depth; k++) {
				tens_t t = *list_at(n, lists[k], i, tmp);
				uint64_t lo = c0 * MT_CHUNK * 4, hi = (c0 + take) * MT_CHUNK * 4;
				t.off += lo;
				t.bytes = (hi < t.bytes ? hi : t.bytes) - lo;
				v[nu] = t;
				u[nu] = (use_t){&v[nu], rw[k]};
				nu++;
			}
			c0 += take;
			blocks += take;
			if (++tensors == maxt || blocks == MT_MAX_BLOCKS) {
				cnn_kern(n, name, 0, u, nu);
				nu = tensors = 0;
				blocks = 0;
			}
		}
	}
	if (nu)
		cnn_kern(n, name, 0, u, nu);
}

/* A new activation-allocator tensor per trained parameter (a foreach op's
 * out-of-place result), in parameter order. NULL with n->rc set on failure. */
static tens_t *tmp_new(net_t *n)
{
	tens_t *t = calloc(n->n_params ? n->n_params : 1, sizeof(*t));
	if (!t) {
		n->rc = -ENOMEM;
		return NULL;
	}
	for (uint32_t i = 0; i < n->n_params; i++)
		if (n->params[i].param == CNN_PARAM && n->pgrad[i].bytes)
			t[i] = cnn_alloc(n, n->params[i].bytes, n->params[i].c, 1, 1);
	return t;
}

static void tmp_free(net_t *n, tens_t *t)
{
	for (uint32_t i = 0; t && i < n->n_params; i++)
		if (t[i].bytes)
			cnn_release(n, &t[i]);
	free(t);
}

static void step(net_t *n)
{
	if (ptabs(n))
		return;
	tens_t *tmp = NULL;
	if (!n->adam) {
		tmp = tmp_new(n); /* g' = grad + wd * p */
		if (!tmp)
			return;
		mt_pass(n, "foreach_add_list_alpha", (const int[]){L_GRAD, L_PARAM, L_TMP}, (const int[]){1, 1, 1}, 3, tmp);
		mt_pass(n, "foreach_mul_scalar_", (const int[]){L_S0}, (const int[]){2}, 1, tmp);
		mt_pass(n, "foreach_add_list_", (const int[]){L_TMP, L_S0}, (const int[]){1, 2}, 2, tmp);
		mt_pass(n, "foreach_add_list_", (const int[]){L_S0, L_PARAM}, (const int[]){1, 2}, 2, tmp);
	} else {
		mt_pass(n, "foreach_lerp_list_scalar_", (const int[]){L_S0, L_GRAD}, (const int[]){2, 1}, 2, NULL);
		mt_pass(n, "foreach_mul_scalar_", (const int[]){L_S1}, (const int[]){2}, 1, NULL);
		mt_pass(n, "foreach_addcmul_scalar_", (const int[]){L_S1, L_GRAD, L_GRAD}, (const int[]){2, 1, 1}, 3,
			NULL);
		tmp = tmp_new(n); /* s = sqrt(exp_avg_sq) */
		if (!tmp)
			return;
		mt_pass(n, "foreach_sqrt", (const int[]){L_S1, L_TMP}, (const int[]){1, 1}, 2, tmp);
		mt_pass(n, "foreach_div_scalarlist_", (const int[]){L_TMP}, (const int[]){2}, 1, tmp);
		mt_pass(n, "foreach_add_scalar_", (const int[]){L_TMP}, (const int[]){2}, 1, tmp);
		mt_pass(n, "foreach_addcdiv_scalarlist_", (const int[]){L_PARAM, L_S0, L_TMP}, (const int[]){2, 1, 1}, 3,
			tmp);
	}
	tmp_free(n, tmp);
}

/* ---- the iteration after the forward pass ------------------------------------------------ */

void cnn_train_finish(net_t *n, const tens_t *y, const tens_t *labels)
{
	if (n->rc)
		return;
	n->out_id = y->id;
	/* criterion: cross_entropy = log_softmax + nll_loss */
	tens_t lsm = cnn_alloc(n, y->bytes, y->c, 1, 1), loss = cnn_alloc(n, 4, 1, 1, 1);
	use_t f1[2] = {{y, 1}, {&lsm, 1}};
	cnn_kern(n, "log_softmax_fwd", 0, f1, 2);
	use_t f2[3] = {{&lsm, 1}, {labels, 1}, {&loss, 1}};
	cnn_kern(n, "nll_loss_fwd", 0, f2, 3);
	/* optimizer.zero_grad(): the previous iteration's parameter gradients go */
	if (ptabs(n))
		return;
	for (uint32_t i = 0; i < n->n_params; i++)
		if (n->pgrad[i].bytes) {
			cnn_release(n, &n->pgrad[i]);
			n->pgrad[i].bytes = 0;
		}
	/* loss.backward(): dloss = 1, through the criterion, then the tape in reverse */
	tens_t one = cnn_alloc(n, 4, 1, 1, 1), glsm = cnn_alloc(n, lsm.bytes, lsm.c, 1, 1);
	use_t b0[1] = {{&one, 1}};
	cnn_kern(n, "fill_ones", 0, b0, 1);
	use_t b1[3] = {{&one, 1}, {labels, 1}, {&glsm, 2}};
	cnn_kern(n, "nll_loss_backward", 0, b1, 3);
	cnn_release(n, &one);
	gref_t gy = grad_alloc(n, y);
	use_t b2[3] = {{&glsm, 1}, {&lsm, 1}, {&gy.t, 1}};
	cnn_kern(n, "log_softmax_backward", 0, b2, 3);
	cnn_release(n, &glsm);
	cnn_release(n, &lsm);
	gref_t *s = grad_slot(n, y->id);
	if (s)
		*s = gy;
	for (uint32_t i = n->n_tape; i-- > 0 && !n->rc;)
		backward_op(n, &n->tape[i]);
	for (uint32_t id = 0; id < n->cap_grad && !n->rc; id++)
		grad_drop(n, id);
	step(n);
	/* loss.item(): the scalar comes back (the caller's sync waits for it) */
	if (n->emit && !n->rc)
		gen_copy(n->g, GMX_OP_COPY_D2H, n->act_buf[loss.seg], loss.bytes, 0);
	cnn_release(n, &loss);
	for (uint32_t id = 1; id <= n->next_id; id++) /* images, labels, output */
		live_free(n, id);
}

/* Deep copy of an allocator's tables into dst (whose old tables are freed). */
static int devalloc_copy(gmx_devalloc_t *dst, const gmx_devalloc_t *src)
{
	gmx_devalloc_t c = *src;
	c.seg_size = malloc((src->cap_seg ? src->cap_seg : 1) * sizeof(*c.seg_size));
	c.blk = malloc((src->cap_blk ? src->cap_blk : 1) * sizeof(*c.blk));
	if (!c.seg_size || !c.blk) {
		free(c.seg_size);
		free(c.blk);
		return -ENOMEM;
	}
	if (src->n_seg)
		memcpy(c.seg_size, src->seg_size, src->n_seg * sizeof(*c.seg_size));
	if (src->n_blk)
		memcpy(c.blk, src->blk, src->n_blk * sizeof(*c.blk));
	gmx_devalloc_free(dst);
	*dst = c;
	return 0;
}

int cnn_train_save(net_t *n)
{
	if (!n->train || n->rc)
		return n->rc;
	if (devalloc_copy(&n->snap_act, &n->act)) {
		n->rc = -ENOMEM;
		return n->rc;
	}
	free(n->snap_pgrad);
	n->snap_pgrad = NULL;
	n->snap_cap = n->cap_pgrad;
	if (n->cap_pgrad) {
		n->snap_pgrad = malloc(n->cap_pgrad * sizeof(*n->pgrad));
		if (!n->snap_pgrad) {
			n->rc = -ENOMEM;
			return n->rc;
		}
		memcpy(n->snap_pgrad, n->pgrad, n->cap_pgrad * sizeof(*n->pgrad));
	}
	return 0;
}

void cnn_train_restore(net_t *n)
{
	if (!n->train || n->rc)
		return;
	if (devalloc_copy(&n->act, &n->snap_act)) {
		n->rc = -ENOMEM;
		return;
	}
	if (n->snap_cap)
		memcpy(n->pgrad, n->snap_pgrad, n->snap_cap * sizeof(*n->pgrad));
	for (uint32_t i = n->snap_cap; i < n->cap_pgrad; i++)
		n->pgrad[i] = (tens_t){0};
}

void cnn_train_free(net_t *n)
{
	free(n->tape);
	free(n->live);
	free(n->made);
	free(n->grad);
	free(n->gbase);
	free(n->pgrad);
	free(n->state);
	free(n->snap_pgrad);
	gmx_devalloc_free(&n->snap_act);
}
