#include "maxheap.h"

#include <errno.h>
#include <stdlib.h>

int gmx_maxheap_push(gmx_maxheap_t *h, int64_t key, uint32_t id)
{
	if (h->n == h->cap) {
		uint32_t ncap = h->cap ? 2 * h->cap : 1024;
		gmx_heap_entry_t *e = realloc(h->e, ncap * sizeof(*e));
		if (!e)
			return -ENOMEM;
		h->e = e;
		h->cap = ncap;
	}
	uint32_t i = h->n++;
	while (i > 0) {
		uint32_t p = (i - 1) / 2;
		if (h->e[p].key >= key)
			break;
		h->e[i] = h->e[p];
		i = p;
	}
	h->e[i] = (gmx_heap_entry_t){key, id};
	return 0;
}

void gmx_maxheap_pop(gmx_maxheap_t *h)
{
	gmx_heap_entry_t last = h->e[--h->n];
	uint32_t i = 0;
	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		int64_t best = last.key;
		if (l < h->n && h->e[l].key > best) {
			m = l;
			best = h->e[l].key;
		}
		if (r < h->n && h->e[r].key > best)
			m = r;
		if (m == i)
			break;
		h->e[i] = h->e[m];
		i = m;
	}
	if (h->n)
		h->e[i] = last;
}
