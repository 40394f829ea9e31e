/* gpumux workload model: what a task asks of the GPU, independent of where it
 * came from (a generator, an imported trace, a native file) and of where it
 * runs (the simulator, later the daemon's profiles).
 *
 * A workload is one *unit* of work (an iteration, a request, a decode step):
 * a sequence of operations that the task's host thread issues in order and
 * that the task repeats.  Every kernel lists the memory it touches, in access
 * order, as (buffer, offset, length) regions, and carries its launch
 * arguments, so a working-set predictor can learn from the arguments alone.
 *
 * Pure data: no I/O here.  The file format is in docs/workload-format.md and
 * its reader/writer in workload/.
 */
#ifndef GPUMUX_WORKLOAD_H
#define GPUMUX_WORKLOAD_H

#include <stddef.h>
#include <stdint.h>

#define GMX_WORKLOAD_FORMAT_VERSION 2

/* Kinds of operation a host thread issues. */
typedef enum gmx_op_kind {
	GMX_OP_KERNEL = 0, /* a kernel launch on a stream */
	GMX_OP_COPY_H2D,   /* async host-to-device copy on a stream */
	GMX_OP_COPY_D2H,   /* async device-to-host copy on a stream */
	GMX_OP_MEMSET,     /* async memset on a stream */
	GMX_OP_SYNC,       /* host blocks until the stream (or all, stream = -1) drains */
	GMX_OP_ALLOC,      /* a buffer becomes live (traces); no GPU time */
	GMX_OP_FREE,       /* a buffer is released (traces); no GPU time */
	GMX_OP_COPY_D2D,   /* async device-to-device copy on a stream (a copy engine) */
	GMX_OP_RECORD,     /* stream records event `event`: everything issued on it so far */
	GMX_OP_WAIT,       /* stream's later work waits for event `event`'s latest record */
	GMX_OP_KIND_COUNT
} gmx_op_kind_t;

/* Compute/memory class of a kernel, as Orion profiles it. */
typedef enum gmx_kernel_class {
	GMX_CLASS_UNKNOWN = -1,
	GMX_CLASS_MEMORY = 0,
	GMX_CLASS_COMPUTE = 1
} gmx_kernel_class_t;

/* One launch argument: a 64-bit value and whether it is a device pointer. */
typedef struct gmx_arg {
	uint64_t value;
	uint8_t is_pointer;
	uint8_t size; /* bytes the parameter occupies in the launch buffer: 4 or 8 */
} gmx_arg_t;

/* A touched range of one buffer. */
typedef struct gmx_region {
	uint32_t buffer; /* index into gmx_workload_t.buffers */
	uint64_t offset; /* bytes from the buffer's start */
	uint64_t length; /* bytes; > 0 */
} gmx_region_t;

/* A device allocation of the task. */
typedef struct gmx_buffer {
	uint64_t addr; /* device virtual address the task sees (for pointer args) */
	uint64_t size; /* bytes */
	char *name;    /* optional, may be NULL */
} gmx_buffer_t;

/* One operation.  Arrays (args, regions) are slices of the workload's pools. */
typedef struct gmx_op {
	uint8_t kind;     /* gmx_op_kind_t */
	int8_t klass;     /* gmx_kernel_class_t, kernels only */
	int16_t stream;   /* stream index >= 0; -1 for "all" on SYNC */
	uint32_t name;    /* kernels: index into names */
	uint64_t think_ns;    /* host time between the previous op's issue and this one */
	uint64_t duration_ns; /* solo GPU time on the workload's reference device */
	uint64_t bytes;       /* copies and memsets: size; ALLOC/FREE: buffer size */
	uint32_t grid[3];
	uint32_t block[3];
	uint32_t shared_mem; /* dynamic shared memory, bytes */
	uint32_t sm_demand;  /* SMs one full wave needs; 0 = unknown */
	uint32_t buffer;     /* copies/memsets/ALLOC/FREE: buffer index, UINT32_MAX if none */
	uint32_t event;      /* RECORD/WAIT: event number (any value; a WAIT on an event never
			      * recorded waits for nothing, as in CUDA) */
	uint32_t arg_first, arg_count;       /* slice of args */
	uint32_t region_first, region_count; /* slice of regions, in access order */
} gmx_op_t;

/* A task's workload: one unit of ops that repeats. */
typedef struct gmx_workload {
	char *name;
	char *device;   /* reference device preset the durations were measured on, or NULL */
	char *unit;     /* what one unit is: "iteration", "request", "step", ... */
	gmx_buffer_t *buffers;
	uint32_t n_buffers, cap_buffers;
	gmx_op_t *ops;
	uint32_t n_ops, cap_ops;
	gmx_arg_t *args;
	uint32_t n_args, cap_args;
	gmx_region_t *regions;
	uint32_t n_regions, cap_regions;
	char **names; /* interned kernel names */
	uint32_t n_names, cap_names;
} gmx_workload_t;

/* Initialises an empty workload named `name` (copied). Returns 0 or -ENOMEM. */
int gmx_workload_init(gmx_workload_t *w, const char *name);

/* Frees everything the workload owns; safe on a zeroed or half-built workload. */
void gmx_workload_free(gmx_workload_t *w);

/* Sets a string field (name, device or unit) to a copy of `value`. 0 or -ENOMEM. */
int gmx_workload_set_str(char **field, const char *value);

/* Adds a buffer of `size` bytes; address = next 2 MB-aligned free address when
 * addr == 0. Stores its index in *index. 0, -EINVAL (size 0) or -ENOMEM. */
int gmx_workload_add_buffer(gmx_workload_t *w, uint64_t addr, uint64_t size, const char *name,
			    uint32_t *index);

/* Interns a kernel name and stores its index in *index. 0 or -ENOMEM. */
int gmx_workload_intern_name(gmx_workload_t *w, const char *name, uint32_t *index);

/* Appends an op (copied; its arg/region slices are set by the next two calls)
 * and returns a pointer to it in *out (valid until the next append). 0 or -ENOMEM. */
int gmx_workload_add_op(gmx_workload_t *w, const gmx_op_t *op, gmx_op_t **out);

/* Appends an argument to the last op. 0, -EINVAL (no op) or -ENOMEM. */
int gmx_workload_add_arg(gmx_workload_t *w, uint64_t value, int is_pointer, int size);

/* Appends a touched region to the last op; checks it lies inside the buffer.
 * 0, -EINVAL (no op, bad buffer, empty or out-of-bounds region) or -ENOMEM. */
int gmx_workload_add_region(gmx_workload_t *w, uint32_t buffer, uint64_t offset, uint64_t length);

/* Total bytes of all buffers (the task's footprint); UINT64_MAX when it passes 2^64. */
uint64_t gmx_workload_footprint(const gmx_workload_t *w);

/* Sum of kernel, copy and memset solo durations of one unit, in ns. */
uint64_t gmx_workload_gpu_ns(const gmx_workload_t *w);

/* Checks internal consistency (slices in range, regions inside buffers, buffer
 * indices valid). Returns 0 or -EINVAL with a reason in msg (may be NULL). */
int gmx_workload_validate(const gmx_workload_t *w, char *msg, size_t msg_len);

/* Index of the buffer whose [addr, addr+size) holds `addr`, or -1. O(buffers). */
int64_t gmx_workload_find_buffer(const gmx_workload_t *w, uint64_t addr);

#endif
