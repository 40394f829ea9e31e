/* The MPS interference model: how much kernels of different tasks running at
 * the same time slow each other (docs/fikit.md, "Interference model"). */
#ifndef GMX_SIM_INTERFERENCE_H
#define GMX_SIM_INTERFERENCE_H

#include <stdint.h>

/* One kernel running on the execution engine. */
typedef struct gmx_kernel_load {
	uint32_t task;
	uint32_t sm_demand; /* SMs one full wave needs; 0 = unknown (the whole device) */
	int8_t klass;       /* gmx_kernel_class_t */
	int8_t priority;    /* 0 highest; used when the device prioritises thread blocks */
} gmx_kernel_load_t;

/* Slowdown factor (>= 1) of kernel i among the n running kernels `k` on a
 * device with `sms` SMs: 1 when all n belong to one task. */
double gmx_interference_slowdown(const gmx_kernel_load_t *k, uint32_t n, uint32_t i, uint32_t sms);

/* The same when the hardware dispatches a higher-priority kernel's thread
 * blocks first (CUDA stream priorities): a kernel's SM pressure counts only
 * kernels of its own or a better priority; memory bandwidth stays shared. */
double gmx_interference_slowdown_prioritized(const gmx_kernel_load_t *k, uint32_t n, uint32_t i, uint32_t sms);

#endif
