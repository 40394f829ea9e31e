/* Device presets. Sources:
 *  [P]  MSched paper, arXiv 2512.24637v2 (RTX 5080 / RTX 3080 measurements)
 *  [T]  shared/traces/README.md (launch latency and gaps measured from HTA/kineto traces)
 *  [S]  vendor specification sheets (memory size and bandwidth, SM count, fp32 rate)
 *  [C]  CUDA C++ Programming Guide, "Features and Technical Specifications": maximum
 *       resident threads per SM by compute capability (7.0, 8.0, 9.0: 2048; 8.6, 12.0: 1536)
 *  [U]  UVMSmart's PCIe 3.0 x16 transfer curve, saturating near 12 GB/s (brief/msched.md)
 * Where no measurement exists for a device (H100/H200/A100/V100 swap rates), the
 * PCIe generation's measured figure from [P] is reused; the note says so. */
#include "preset.h"

#include <stdio.h>
#include <string.h>

#define GiB (1024ull * 1024 * 1024)

/* [T] launch-to-start on an idle GPU: 6-13 us (minimum 4 us); take the middle. */
#define LAUNCH_NS 8000
/* [T] back-to-back kernels of one stream: the median same-stream gap of the
 * GPU-bound traces is 0.75-1 us (HTA rank-0 0.83 us, kineto ResNet-50 1 us). */
#define KERNEL_GAP_NS 1000
/* [P] preemption of a context (TSG) ~32 us on the RTX 5080. */
#define CTX_SWITCH_NS 32000
/* [P] one fault costs 31.79 us on the RTX 5080, of which 1.35 us moves data:
 * the rest is control (fault buffer, servicing, TLB invalidation, replay). The
 * simulator charges it per serviced batch; see docs/simulator.md. */
#define FAULT_BATCH_NS 30440
#define FAULT_DMA_SETUP_NS 1250
/* The paper gives no split between per-batch and per-fault work (brief:
 * "what we could not find"). A batch of 256 entries costs more than a batch
 * of one: each entry is looked up, its VA block locked and its pages mapped.
 * Fitted, not measured: 150 ns per entry minimises the summed log error of
 * the three aggregate figures the paper measured under unified memory (mixes
 * A-C 6.19%, mix D 1.29% of in-memory throughput, the microbenchmark's 16.2x
 * collapse), each measured in steady state; see docs/simulator.md. */
#define FAULT_ENTRY_NS 150
/* Context and driver reservation (~200 KB per SM of context state [P] plus the
 * driver's own pools); a round 0.5 GiB. */
#define RESERVED_BYTES (GiB / 2)

/* What every preset shares: launch, context switch and fault-path costs (no
 * per-device measurement exists; the RTX 5080's are used throughout). */
#define HOST_AND_FAULT_COSTS                                                                                   \
	.launch_ns = LAUNCH_NS, .kernel_gap_ns = KERNEL_GAP_NS, .ctx_switch_ns = CTX_SWITCH_NS,                 \
	.fault_batch_ns = FAULT_BATCH_NS, .fault_entry_ns = FAULT_ENTRY_NS, .fault_dma_setup_ns = FAULT_DMA_SETUP_NS

static const gmx_preset_t presets[] = {
	{
		.name = "rtx5080",
		.description = "GeForce RTX 5080 16 GB, PCIe 5.0 x16 (MSched's main machine)",
		.hbm_bytes = 16 * GiB,
		.reserved_bytes = RESERVED_BYTES, /* every preset: contexts and driver pools */
		.host_bytes = 96 * GiB, /* [P] 96 GB DDR5 */
		.hbm_gbps = 960,        /* [S] GDDR7 256-bit 30 Gbps */
		.fp32_tflops = 56.3,    /* [S] */
		.sms = 84,              /* [S] */
		.threads_per_sm = 1536, /* [C] compute capability 12.0 */
		.link_serial_gbps = 41.7, /* [P] serial swap */
		.link_in_gbps = 31.75,    /* [P] 63.5 GB/s pipelined, split evenly */
		.link_out_gbps = 31.75,
		HOST_AND_FAULT_COSTS,
	},
	{
		.name = "rtx3080",
		.description = "GeForce RTX 3080 10 GB, PCIe 4.0 x16 (MSched's second machine)",
		.hbm_bytes = 10 * GiB,
		.reserved_bytes = RESERVED_BYTES,
		.host_bytes = 96 * GiB,
		.hbm_gbps = 760,       /* [S] */
		.fp32_tflops = 29.8,   /* [S] */
		.sms = 68,             /* [S] */
		.threads_per_sm = 1536, /* [C] 8.6 */
		.link_serial_gbps = 22.22, /* [P] */
		.link_in_gbps = 19.9,      /* [P] 39.8 GB/s pipelined, split evenly */
		.link_out_gbps = 19.9,
		HOST_AND_FAULT_COSTS,
	},
	{
		.name = "h100",
		.description = "H100 SXM 80 GB HBM3, PCIe 5.0 host link (swap rates assumed as RTX 5080's)",
		.hbm_bytes = 80 * GiB,
		.reserved_bytes = RESERVED_BYTES,
		.host_bytes = 512 * GiB,
		.hbm_gbps = 3350,     /* [S] */
		.fp32_tflops = 67,    /* [S] */
		.sms = 132,           /* [S] */
		.threads_per_sm = 2048, /* [C] 9.0 */
		.link_serial_gbps = 41.7,
		.link_in_gbps = 31.75,
		.link_out_gbps = 31.75,
		HOST_AND_FAULT_COSTS,
	},
	{
		.name = "h200",
		.description = "H200 141 GB HBM3e, PCIe 5.0 host link (swap rates assumed as RTX 5080's)",
		.hbm_bytes = 143771ull << 20, /* nvidia-smi's 143,771 MiB (140.4 GiB): the marketed
						 "141 GB" counts GiB, as the other presets' do */
		.reserved_bytes = RESERVED_BYTES,
		.host_bytes = 1024 * GiB,
		.hbm_gbps = 4800,     /* [S] */
		.fp32_tflops = 67,    /* [S] */
		.sms = 132,           /* [S] */
		.threads_per_sm = 2048, /* [C] 9.0 */
		.link_serial_gbps = 41.7,
		.link_in_gbps = 31.75,
		.link_out_gbps = 31.75,
		HOST_AND_FAULT_COSTS,
	},
	{
		.name = "a100",
		.description = "A100 40 GB HBM2, PCIe 4.0 host link (swap rates assumed as RTX 3080's)",
		.hbm_bytes = 40 * GiB,
		.reserved_bytes = RESERVED_BYTES,
		.host_bytes = 256 * GiB,
		.hbm_gbps = 1555,     /* [S] */
		.fp32_tflops = 19.5,  /* [S] */
		.sms = 108,           /* [S] */
		.threads_per_sm = 2048, /* [C] 8.0 */
		.link_serial_gbps = 22.22,
		.link_in_gbps = 19.9,
		.link_out_gbps = 19.9,
		HOST_AND_FAULT_COSTS,
	},
	{
		.name = "v100",
		.description = "V100 SXM2 32 GB HBM2, PCIe 3.0 host link (the HTA and kineto traces)",
		.hbm_bytes = 32 * GiB,
		.reserved_bytes = RESERVED_BYTES,
		.host_bytes = 256 * GiB,
		.hbm_gbps = 900,      /* [S] */
		.fp32_tflops = 15.7,  /* [S] */
		.sms = 80,            /* [S] */
		.threads_per_sm = 2048, /* [C] 7.0 */
		.link_serial_gbps = 11.0, /* [U] ~12 GB/s saturation, less the turn-around */
		.link_in_gbps = 12.0,     /* [U] */
		.link_out_gbps = 12.0,
		HOST_AND_FAULT_COSTS,
	},
	{
		.name = "v100-16",
		.description = "V100 16 GB HBM2, PCIe 3.0 host link (the Orion profiles)",
		.hbm_bytes = 16 * GiB,
		.reserved_bytes = RESERVED_BYTES,
		.host_bytes = 256 * GiB,
		.hbm_gbps = 900,
		.fp32_tflops = 15.7,
		.sms = 80,
		.threads_per_sm = 2048,
		.link_serial_gbps = 11.0,
		.link_in_gbps = 12.0,
		.link_out_gbps = 12.0,
		HOST_AND_FAULT_COSTS,
	},
};

const gmx_preset_t *gmx_preset_find(const char *name)
{
	for (size_t i = 0; i < sizeof(presets) / sizeof(presets[0]); i++)
		if (!strcmp(presets[i].name, name))
			return &presets[i];
	return NULL;
}

void gmx_preset_names(char *buf, size_t len)
{
	size_t used = 0;
	if (len)
		buf[0] = 0;
	for (size_t i = 0; i < sizeof(presets) / sizeof(presets[0]); i++) {
		int n = snprintf(buf + used, len > used ? len - used : 0, "%s%s", i ? ", " : "", presets[i].name);
		if (n > 0)
			used += (size_t)n;
	}
}

void gmx_preset_describe(FILE *out)
{
	fprintf(out, "%-8s %8s %9s %7s %5s %22s  %s\n", "preset", "memory", "bandwidth", "fp32", "SMs",
		"link serial/in/out", "description");
	for (size_t i = 0; i < sizeof(presets) / sizeof(presets[0]); i++) {
		const gmx_preset_t *p = &presets[i];
		fprintf(out, "%-8s %5.1fGiB %6.0fGB/s %5.1fTF %5u %7.2f/%.2f/%.2f GB/s  %s\n", p->name,
			p->hbm_bytes / 1073741824.0, p->hbm_gbps, p->fp32_tflops, p->sms, p->link_serial_gbps,
			p->link_in_gbps, p->link_out_gbps, p->description);
	}
}
