/* Kernel durations learned from completions (gpumux/kdur.h). */
#include "gpumux/kdur.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
	uint64_t id;
	uint64_t n;    /* observations */
	uint64_t used; /* when last observed (the table's clock) */
	int64_t s[GMX_KDUR_SAMPLES];
} kentry_t;

typedef struct {
	kentry_t *e; /* GMX_KDUR_IDS entries once the task has learned something */
	uint32_t n;
	int64_t switch_ns; /* average switch cost, -1 none seen */
} ktask_t;

struct gmx_kdur {
	uint32_t n_tasks;
	uint64_t clock;
	ktask_t *t;
};

int gmx_kdur_create(uint32_t n_tasks, gmx_kdur_t **out)
{
	if (!n_tasks)
		return -EINVAL;
	gmx_kdur_t *k = calloc(1, sizeof *k);
	if (!k)
		return -ENOMEM;
	k->t = calloc(n_tasks, sizeof *k->t);
	if (!k->t) {
		free(k);
		return -ENOMEM;
	}
	k->n_tasks = n_tasks;
	for (uint32_t i = 0; i < n_tasks; i++)
		k->t[i].switch_ns = -1;
	*out = k;
	return 0;
}

void gmx_kdur_destroy(gmx_kdur_t *k)
{
	if (!k)
		return;
	for (uint32_t i = 0; i < k->n_tasks; i++)
		free(k->t[i].e);
	free(k->t);
	free(k);
}

void gmx_kdur_forget(gmx_kdur_t *k, uint32_t task)
{
	if (k && task < k->n_tasks) {
		free(k->t[task].e);
		k->t[task] = (ktask_t){.switch_ns = -1};
	}
}

static const kentry_t *find(const ktask_t *t, uint64_t id)
{
	for (uint32_t i = 0; i < t->n; i++)
		if (t->e[i].id == id)
			return &t->e[i];
	return NULL;
}

int gmx_kdur_observe(gmx_kdur_t *k, uint32_t task, uint64_t id, int64_t dur_ns)
{
	if (!k || task >= k->n_tasks || dur_ns < 0)
		return -EINVAL;
	ktask_t *t = &k->t[task];
	if (!t->e && !(t->e = calloc(GMX_KDUR_IDS, sizeof *t->e)))
		return -ENOMEM;
	kentry_t *e = (kentry_t *)find(t, id);
	if (!e && t->n < GMX_KDUR_IDS) {
		e = &t->e[t->n++];
		*e = (kentry_t){.id = id};
	} else if (!e) { /* the least recently observed identity gives way */
		e = &t->e[0];
		for (uint32_t i = 1; i < t->n; i++)
			if (t->e[i].used < e->used)
				e = &t->e[i];
		*e = (kentry_t){.id = id};
	}
	e->s[e->n % GMX_KDUR_SAMPLES] = dur_ns;
	e->n++;
	e->used = ++k->clock;
	return 0;
}

static int64_t median(const kentry_t *e)
{
	uint32_t n = e->n < GMX_KDUR_SAMPLES ? (uint32_t)e->n : GMX_KDUR_SAMPLES;
	int64_t v[GMX_KDUR_SAMPLES];
	memcpy(v, e->s, n * sizeof *v);
	for (uint32_t i = 1; i < n; i++) /* insertion sort: n <= 16 */
		for (uint32_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
			int64_t x = v[j];
			v[j] = v[j - 1];
			v[j - 1] = x;
		}
	return v[n / 2];
}

static int64_t shortest(const kentry_t *e)
{
	uint32_t n = e->n < GMX_KDUR_SAMPLES ? (uint32_t)e->n : GMX_KDUR_SAMPLES;
	int64_t m = e->s[0];
	for (uint32_t i = 1; i < n; i++)
		m = e->s[i] < m ? e->s[i] : m;
	return m;
}

int64_t gmx_kdur_predict(const gmx_kdur_t *k, uint32_t task, uint64_t id)
{
	if (!k || task >= k->n_tasks || !k->t[task].e)
		return -1;
	const kentry_t *e = find(&k->t[task], id);
	return e ? shortest(e) : -1;
}

int64_t gmx_kdur_task_mean(const gmx_kdur_t *k, uint32_t task)
{
	if (!k || task >= k->n_tasks)
		return -1;
	const ktask_t *t = &k->t[task];
	double sum = 0, n = 0;
	for (uint32_t i = 0; i < t->n; i++) {
		sum += (double)median(&t->e[i]) * (double)t->e[i].n;
		n += (double)t->e[i].n;
	}
	return n > 0 ? (int64_t)(sum / n) : -1;
}

void gmx_kdur_switch_observe(gmx_kdur_t *k, uint32_t task, int64_t cost_ns)
{
	if (!k || task >= k->n_tasks || cost_ns < 0)
		return;
	int64_t *s = &k->t[task].switch_ns;
	*s = *s < 0 ? cost_ns : (3 * *s + cost_ns) / 4;
}

int64_t gmx_kdur_switch_ns(const gmx_kdur_t *k, uint32_t task)
{
	return k && task < k->n_tasks ? k->t[task].switch_ns : -1;
}
