/* Kernel identity from the code a program loads (drivers without cuFuncGetName /
 * cuFuncGetParamInfo, i.e. before CUDA 12.4): the images given to the module and library
 * loaders are parsed (fatbin/), and each CUfunction or CUkernel handle the driver hands out is
 * mapped to the kernel of that name in its module's image. Thread-safe; never calls the driver
 * while holding its lock. */
#ifndef GMX_SHIM_MODINFO_H
#define GMX_SHIM_MODINFO_H

#include "gpumux/fatbin.h"
#include "shim_internal.h"

/* Where a launch's kernel name and layout come from (GPUMUX_SHIM_KERNEL_INFO). */
typedef enum {
	GMX_KINFO_DRIVER, /* the driver's cuFuncGetName/ParamInfo; the images when it lacks them */
	GMX_KINFO_IMAGE,  /* the images only, as on a driver before 12.4 (a test switch) */
	GMX_KINFO_VERIFY, /* the driver's answer, checked against the images' (tests) */
} gmx_kinfo_mode_t;

/* The mode from the environment (read once). */
gmx_kinfo_mode_t gmx_shim_kinfo_mode(void);

/* Nonzero when loaded images must be parsed: a queueing policy and a driver without
 * cuFuncGetName/cuFuncGetParamInfo, or mode image/verify. */
int gmx_shim_modinfo_learning(void);

/* Parses an image given by address only (cuModuleLoadData & co.): its readable extent is
 * taken from the process's memory map, so a lying header cannot make the parser read past
 * mapped memory. NULL when learning is off or the image is refused (`who` names the call in
 * the message, which is logged). */
gmx_fatbin_t *gmx_shim_modinfo_parse_mem(const void *image, const char *who);

/* Reads and parses a module file (cuModuleLoad, cuLibraryLoadFromFile); NULL as above. */
gmx_fatbin_t *gmx_shim_modinfo_parse_file(const char *path, const char *who);

/* Records a module or library handle whose load succeeded (r == CUDA_SUCCESS) with its parsed
 * image; takes fb in every case (freed when the load failed). */
void gmx_shim_modinfo_loaded(CUresult r, void *handle, gmx_fatbin_t *fb);

/* handle (a module from cuLibraryGetModule) shares the image of `owner`. */
void gmx_shim_modinfo_alias(void *handle, void *owner);

/* A function or kernel handle named `name` in module/library `owner`. */
void gmx_shim_modinfo_function(void *fn, void *owner, const char *name);

/* `fn` (cuKernelGetFunction's result) is the same kernel as `kernel`. */
void gmx_shim_modinfo_same_kernel(void *fn, void *kernel);

/* The kernel a CUfunction or CUkernel handle stands for, or NULL. The pointer stays valid
 * until its module is unloaded. */
const gmx_kernel_info_t *gmx_shim_modinfo_lookup(const void *fn);

/* Forgets a module or library and every function handle of its image. */
void gmx_shim_modinfo_unloaded(void *handle);

/* A launch went to the driver unscheduled because its kernel's parameter layout is unknown
 * (name "?" when not even that is known): counted, reported once on stderr and the shim log,
 * and the count again at exit. */
void gmx_shim_modinfo_unidentified(const void *fn, const char *name);

/* Mode verify: the driver's answer for fn against the image's (agree 1, differ 0, not in any
 * image -1); counted and reported at exit. */
int gmx_shim_modinfo_verify(const void *fn, const char *name, size_t n, const size_t *off,
			    const size_t *size);

/* cuGetExportTable's answer, with the runtime's private module loads (CUDART_INTERFACE slots
 * 1, 6 and 8) wrapped so that the images cudart 11.x loads through them are seen. */
const void *gmx_shim_modinfo_export_table(const void *table, const CUuuid *id);
/* Copies the driver's export table `table` (word 0: its size in bytes, at most max_slots
 * words) into copy, once per process: 1 when copy already holds it, 0 when copied now, -1 (and
 * a log line naming it) when it cannot be wrapped (another table was, or its size is odd).
 * *orig remembers the driver's table. Caller holds its own lock. */
int gmx_shim_table_copy(const void *table, const void **orig, void **copy, size_t max_slots, const char *name);
/* The CUDART_INTERFACE table handed to the runtime in place of the driver's, or NULL. */
const void *gmx_shim_modinfo_cudart_table(void);
/* The INTEGRITY_CHECK table to hand out for the driver's `table` (integrity.c): the
 * interposer's own while it learns, so the runtime's check covers the tables it was given;
 * any other table unchanged. */
const void *gmx_shim_integrity_table(const void *table, const CUuuid *id);

#endif
