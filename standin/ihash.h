/*
 * The keyed hash of the CUDA runtime's INTEGRITY_CHECK export table (standin/darkapi.c): the
 * runtime checks the driver's answer against its own. Pure computation, unit-tested against
 * known intermediate states (tests/cuda/test_ihash.c).
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

#endif
