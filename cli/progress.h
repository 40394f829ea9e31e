/* Progress of long simulations on standard error, when it is a terminal: a run that has taken
 * more than GMX_PROGRESS_AFTER_S of wall time shows "WHAT: NN% simulated, S s" on one line,
 * rewritten in place, and erased when the run ends. Nothing is written to a pipe or a file. */
#ifndef GMX_CLI_PROGRESS_H
#define GMX_CLI_PROGRESS_H

#include "scenario.h"

#define GMX_PROGRESS_AFTER_S 2.0  /* runs shorter than this show nothing */
#define GMX_PROGRESS_EVERY_S 0.25 /* the line is rewritten at most this often */

typedef struct gmx_progress {
	char what[96];
	double t0, last;
	int on;    /* standard error is a terminal */
	int shown; /* a line is on the screen */
} gmx_progress_t;

/* Starts timing a run described by `fmt` (printf-like); pass gmx_progress_tick and p to it. */
void gmx_progress_start(gmx_progress_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The simulator's progress callback (ctx: a gmx_progress_t). */
void gmx_progress_tick(void *ctx, double done);

/* Erases the progress line, if one was shown. */
void gmx_progress_end(gmx_progress_t *p);

/* gmx_scenario_run with progress shown as "SCENARIO: SCHED, MEM" (same result and errors). */
int gmx_progress_run(gmx_scenario_t *sc, const char *sched, const char *mem, gmx_sim_result_t *res, char *err,
		     size_t err_len);

#endif
