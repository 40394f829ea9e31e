/* Progress of long simulations on a terminal (progress.h). */
#include "progress.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "bench_util.h"

void gmx_progress_start(gmx_progress_t *p, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(p->what, sizeof(p->what), fmt, ap);
	va_end(ap);
	p->t0 = p->last = gmx_bench_wall_s();
	p->on = isatty(STDERR_FILENO);
	p->shown = 0;
}

void gmx_progress_tick(void *ctx, double done)
{
	gmx_progress_t *p = ctx;
	if (!p->on)
		return;
	double now = gmx_bench_wall_s();
	if (now - p->t0 < GMX_PROGRESS_AFTER_S || now - p->last < GMX_PROGRESS_EVERY_S)
		return;
	p->last = now;
	p->shown = 1;
	if (done < 0)
		done = 0;
	if (done > 1)
		done = 1;
	fprintf(stderr, "\r\033[K%s: %3.0f%% simulated, %.0f s", p->what, 100 * done, now - p->t0);
	fflush(stderr);
}

void gmx_progress_end(gmx_progress_t *p)
{
	if (p->shown) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
	}
	p->shown = 0;
}

int gmx_progress_run(gmx_scenario_t *sc, const char *sched, const char *mem, gmx_sim_result_t *res, char *err,
		     size_t err_len)
{
	gmx_progress_t p;
	gmx_progress_start(&p, "%s: %s, %s", sc->name, sched, mem);
	sc->progress = gmx_progress_tick;
	sc->progress_ctx = &p;
	int rc = gmx_scenario_run(sc, sched, mem, res, err, err_len);
	sc->progress = NULL;
	sc->progress_ctx = NULL;
	gmx_progress_end(&p);
	return rc;
}
