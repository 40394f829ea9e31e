/* tgs policy internals that tests reach (core/sched_tgs.c). */
#ifndef GMX_CORE_TGS_H
#define GMX_CORE_TGS_H

enum { GMX_TGS_SLOW_START, GMX_TGS_CONGESTION_AVOIDANCE };

/* TGS's LP rate controller (low_priority_hijack_call.c, update_rate_limit). */
typedef struct gmx_tgs_ctl {
	double limit;	 /* LP thread blocks per 50 ms window */
	double max_rate; /* HP's peak rate, blocks per report */
	int state;	 /* GMX_TGS_SLOW_START or GMX_TGS_CONGESTION_AVOIDANCE */
	int sign;	 /* direction of the last congestion-avoidance step */
	int max_diff;	 /* consecutive reports 12% or more off the peak */
} gmx_tgs_ctl_t;

/* One control step given HP's rate `recv` this report: slow start x1.5 + 1 while within 3% of
 * the peak, else /1.5 into congestion avoidance; there +max(0.025% of the peak, 1000) within
 * 3%, -max(8%, 1000) beyond; 9% off: slow start with the limit /10; 20 reports 12% off: the
 * peak x0.8, slow start, limit /2. The limit stays in [0, 2^32]. */
void gmx_tgs_update_limit(gmx_tgs_ctl_t *c, double recv);

#endif
