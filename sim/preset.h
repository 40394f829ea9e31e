/* Device presets: every constant of the simulated GPU, named once, with its source. */
#ifndef GMX_SIM_PRESET_H
#define GMX_SIM_PRESET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct gmx_preset {
	const char *name;
	const char *description;
	uint64_t hbm_bytes;        /* device memory */
	uint64_t reserved_bytes;   /* held by contexts and the driver, not for user data */
	uint64_t host_bytes;       /* host memory of the reference machine */
	double hbm_gbps;           /* device memory bandwidth, GB/s */
	double fp32_tflops;        /* peak fp32 rate, for scaling compute-bound kernels */
	uint32_t sms;              /* streaming multiprocessors */
	uint32_t threads_per_sm;   /* most threads resident on one SM at once (by compute capability) */
	double link_serial_gbps;   /* PCIe swap rate when evict and load take turns (driver path) */
	double link_in_gbps;       /* host-to-device rate when both directions run at once */
	double link_out_gbps;      /* device-to-host rate when both directions run at once */
	int64_t launch_ns;         /* launch-to-start on an idle GPU */
	int64_t kernel_gap_ns;     /* gap between back-to-back kernels of one stream */
	int64_t ctx_switch_ns;     /* switching the execution engine to another context */
	int64_t fault_batch_ns;    /* control work to service one replayable fault batch */
	int64_t fault_entry_ns;    /* servicing work per distinct faulted page in a batch */
	int64_t fault_dma_setup_ns;/* per-batch DMA set-up on the fault path */
} gmx_preset_t;

/* The preset called `name`, or NULL. */
const gmx_preset_t *gmx_preset_find(const char *name);

/* Writes the preset names separated by ", " into buf. */
void gmx_preset_names(char *buf, size_t len);

/* Prints every preset with its constants to `out`. */
void gmx_preset_describe(FILE *out);

#endif
