/* Binary min-heap of events keyed by (time, seq). */
#include "events.h"

#include <errno.h>
#include <stdlib.h>

static int before(const gmx_event_t *x, const gmx_event_t *y)
{
	return x->time < y->time || (x->time == y->time && x->seq < y->seq);
}

int gmx_events_push(gmx_event_queue_t *q, int64_t time, uint32_t kind, uint32_t a, uint64_t b)
{
	if (q->n == q->cap) {
		uint32_t ncap = q->cap ? q->cap * 2 : 256;
		gmx_event_t *h = realloc(q->heap, ncap * sizeof(*h));
		if (!h)
			return -ENOMEM;
		q->heap = h;
		q->cap = ncap;
	}
	gmx_event_t e = {.time = time, .seq = q->next_seq++, .kind = kind, .a = a, .b = b};
	uint32_t i = q->n++;
	while (i > 0) {
		uint32_t parent = (i - 1) / 2;
		if (!before(&e, &q->heap[parent]))
			break;
		q->heap[i] = q->heap[parent];
		i = parent;
	}
	q->heap[i] = e;
	return 0;
}

int gmx_events_pop(gmx_event_queue_t *q, gmx_event_t *out)
{
	if (!q->n)
		return -ENOENT;
	*out = q->heap[0];
	gmx_event_t last = q->heap[--q->n];
	uint32_t i = 0;
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		const gmx_event_t *best = &last;
		if (l < q->n && before(&q->heap[l], best)) {
			m = l;
			best = &q->heap[l];
		}
		if (r < q->n && before(&q->heap[r], best))
			m = r;
		if (m == i)
			break;
		q->heap[i] = q->heap[m];
		i = m;
	}
	if (q->n)
		q->heap[i] = last;
	return 0;
}

void gmx_events_free(gmx_event_queue_t *q)
{
	free(q->heap);
	q->heap = NULL;
	q->n = q->cap = 0;
}
