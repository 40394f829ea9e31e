/*
 * The runtime's INTEGRITY_CHECK table {D4082055-BDE6-704B-8D34-BA123C66E1F2}, answered for the
 * tables the interposer hands out. The runtime checks the driver with a keyed hash that covers
 * the addresses of the CUDART_INTERFACE and INTEGRITY_CHECK tables it was given; when the
 * interposer gives it its own copy of CUDART_INTERFACE (learning kernels from the runtime's
 * private loads, modinfo.c), the driver's answer no longer matches and the runtime fails with
 * cudaErrorSystemNotReady (103). So while it hands out that copy, the interposer hands out its
 * own INTEGRITY_CHECK too, whose slot 1 computes the hash over the tables the runtime really
 * holds (include/gpumux/ihash.h), with the driver's version and devices.
 */
#include "modinfo.h"
#include "shim_internal.h"

#include "gpumux/ihash.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

static const unsigned char integrity_id[16] = {0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b,
					       0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2};
static const unsigned char cudart_id[16] = {0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a,
					    0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9};
#define ITABLE_SLOTS_MAX 16
#define MAX_DEVICES 64

typedef CUresult (*integrity_t)(uint32_t, uint64_t, uint64_t *);

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static const void *g_orig;
static void *g_itable[ITABLE_SLOTS_MAX];
static integrity_t g_real;

static CUresult answer(uint32_t version, uint64_t seconds, uint64_t result[2])
{
	if (!result)
		return CUDA_ERROR_INVALID_VALUE;
	if (version % 10 == 0 || version % 10 == 1) /* fixed answers: no address in them */
		return g_real(version, seconds, result);
	__typeof__(&cuDriverGetVersion) drv = GMX_REAL(cuDriverGetVersion);
	__typeof__(&cuDeviceGetCount) count = GMX_REAL(cuDeviceGetCount);
	__typeof__(&cuDeviceGetUuid) uuid = GMX_REAL(cuDeviceGetUuid);
	__typeof__(&cuDeviceGetAttribute) attr = GMX_REAL(cuDeviceGetAttribute);
	__typeof__(&cuGetExportTable) table = GMX_REAL(cuGetExportTable);
	int v = 0, n = 0;
	if (!drv || !count || !uuid || !attr || !table || drv(&v) != CUDA_SUCCESS || count(&n) != CUDA_SUCCESS)
		return g_real(version, seconds, result);
	const void *cudart = gmx_shim_modinfo_cudart_table();
	if (!cudart && table(&cudart, (const CUuuid *)cudart_id) != CUDA_SUCCESS)
		return g_real(version, seconds, result);
	gmx_ihash_facts_t f = {(uint32_t)v,	  version,    (uint32_t)getpid(), (uint32_t)(uintptr_t)pthread_self(),
			       cudart,		  g_itable,   g_itable[1],	  seconds};
	gmx_ihash_device_t dev[MAX_DEVICES];
	if (n > MAX_DEVICES)
		n = MAX_DEVICES;
	memset(dev, 0, sizeof dev);
	for (int i = 0; i < n; i++) {
		CUuuid u;
		if (uuid(&u, i) != CUDA_SUCCESS || attr(&dev[i].domain, CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, i) ||
		    attr(&dev[i].bus, CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, i) ||
		    attr(&dev[i].device, CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, i))
			return g_real(version, seconds, result);
		memcpy(dev[i].uuid, u.bytes, 16);
	}
	gmx_ihash_answer(&f, dev, n, result);
	return CUDA_SUCCESS;
}

const void *gmx_shim_integrity_table(const void *table, const CUuuid *id)
{
	if (!table || !id || memcmp(id->bytes, integrity_id, 16) != 0 || !gmx_shim_modinfo_learning())
		return table;
	pthread_mutex_lock(&g_lock);
	const void *out = table;
	if (!((void *const *)table)[1]) {
		gmx_shim_log("kernel-info INTEGRITY_CHECK table without slot 1 not wrapped");
	} else {
		int r = gmx_shim_table_copy(table, &g_orig, g_itable, ITABLE_SLOTS_MAX, "INTEGRITY_CHECK");
		if (r == 0) {
			g_real = (integrity_t)g_itable[1];
			g_itable[1] = (void *)&answer;
		}
		if (r >= 0)
			out = g_itable;
	}
	pthread_mutex_unlock(&g_lock);
	return out;
}

/* fork (loader.c): the lock is a leaf, taken last before fork and released in both processes;
 * the table stays valid in the child (the runtime's memory is copied with it). */
void gmx_shim_integrity_atfork_prepare(void)
{
	pthread_mutex_lock(&g_lock);
}

void gmx_shim_integrity_atfork_release(void)
{
	pthread_mutex_unlock(&g_lock);
}
