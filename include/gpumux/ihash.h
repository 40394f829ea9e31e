/*
 * include/gpumux/ihash.h — the keyed hash of the CUDA runtime's INTEGRITY_CHECK export table:
 * the runtime checks the driver's answer against its own computation over the driver and
 * runtime versions, process, thread, the addresses of the tables it was handed, the time and
 * the devices. Answered by the stand-in (standin/darkapi.c) and by the interposer for the tables
 * it hands out in place of the driver's (shim/modinfo.c). Pure computation (library
 * gmx_darkapi), unit-tested against known intermediate states (tests/cuda/test_ihash.c).
 */
#ifndef GMX_STANDIN_IHASH_H
#define GMX_STANDIN_IHASH_H

#include <stddef.h>
#include <stdint.h>

/* The hash state, 66 bytes as the runtime lays it out: a 48-byte mixing area (the first 16
 * bytes are the digest, then a 16-byte block buffer and the block xor the digest), a 16-byte
 * checksum, the position in the block and the checksum's running byte. */
typedef struct {
	uint8_t x[48];
	uint8_t sum[16];
	uint8_t pos, last;
} gmx_ihash_t;

/* Feeds n bytes, each xor mask, into the state. */
void gmx_ihash_bytes(gmx_ihash_t *h, const void *data, size_t n, uint8_t mask);
/* Pads the block, folds in the checksum and writes the 16-byte digest. */
void gmx_ihash_final(gmx_ihash_t *h, uint8_t out[16]);

/* What the driver hashes besides the devices, in this layout (48 bytes). */
typedef struct {
	uint32_t driver, runtime, pid, tid;
	const void *cudart_table, *integrity_table, *integrity_fn;
	uint64_t seconds;
} gmx_ihash_facts_t;

/* One device's part: its UUID and PCI domain, bus and device (28 bytes). */
typedef struct {
	uint8_t uuid[16];
	int32_t domain, bus, device;
} gmx_ihash_device_t;

/* The answer to INTEGRITY_CHECK slot 1 for runtime version f->runtime: fixed for versions
 * ending in 0 or 1, else the keyed hash of f and the n devices. */
void gmx_ihash_answer(const gmx_ihash_facts_t *f, const gmx_ihash_device_t *dev, int n, uint64_t out[2]);

#endif
