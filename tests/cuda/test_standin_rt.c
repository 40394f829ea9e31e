/* The stand-in's answers a CUDA runtime relies on, through the driver API: an unknown export
 * table is refused with CUDA_ERROR_NOT_FOUND and named on stderr, the known ones are given;
 * the device has a UUID and realistic limits; GPUMUX_STANDIN_DRIVER_VERSION=12020 (set by the
 * test for the "122" run) reports 12020 and offers no cuFuncGetName/cuFuncGetParamInfo.
 * Usage: test_standin_rt 130|122   (linked against build/standin/libcuda.so.1) */
#define _GNU_SOURCE
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int failures;
#define EXPECT(cond, ...)                                                                                    \
	do {                                                                                                 \
		if (!(cond)) {                                                                               \
			printf("FAIL %s:%d: ", __FILE__, __LINE__);                                          \
			printf(__VA_ARGS__);                                                                 \
			printf("\n");                                                                        \
			failures++;                                                                          \
		}                                                                                            \
	} while (0)

int main(int argc, char **argv)
{
	int v122 = argc > 1 && strcmp(argv[1], "122") == 0;
	EXPECT(cuInit(0) == CUDA_SUCCESS, "cuInit");
	int ver = 0;
	cuDriverGetVersion(&ver);
	EXPECT(ver == (v122 ? 12020 : CUDA_VERSION), "driver version %d", ver);

	/* an unknown export table: refused and named on stderr */
	char path[] = "/tmp/gpumux-standin-rt-XXXXXX";
	int fd = mkstemp(path);
	int saved = dup(2);
	dup2(fd, 2);
	CUuuid bogus = {{0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef}};
	const void *t = (const void *)1;
	CUresult r = cuGetExportTable(&t, &bogus);
	fflush(stderr);
	dup2(saved, 2);
	char msg[512] = "";
	ssize_t n = pread(fd, msg, sizeof msg - 1, 0);
	msg[n > 0 ? n : 0] = '\0';
	close(fd);
	unlink(path);
	EXPECT(r == CUDA_ERROR_NOT_FOUND && t == NULL, "unknown table: %d", (int)r);
	EXPECT(strstr(msg, "unknown export table 01234567-89AB-CDEF-0123-456789ABCDEF") != NULL,
	       "stderr does not name the UUID: %s", msg);
	CUuuid cudart = {{0x6B, 0xD5, 0xFB, 0x6C, 0x5B, 0xF4, 0xE7, 0x4A, 0x89, 0x87, 0xD9, 0x39, 0x12, 0xFD, 0x9D, 0xF9}};
	EXPECT(cuGetExportTable(&t, &cudart) == CUDA_SUCCESS && t && *(const size_t *)t >= 9 * sizeof(void *),
	       "CUDART_INTERFACE");

	CUuuid u;
	EXPECT(cuDeviceGetUuid(&u, 0) == CUDA_SUCCESS, "uuid");
	int x = 0, y = 0, z = 0, gx = 0;
	cuDeviceGetAttribute(&x, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 0);
	cuDeviceGetAttribute(&z, CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 0);
	cuDeviceGetAttribute(&gx, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 0);
	cuDeviceGetAttribute(&y, CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 0);
	EXPECT(x == 1024 && z == 64 && gx == 2147483647 && y == 65535, "limits %d %d %d %d", x, z, gx, y);

	/* entry points by version */
	void *fn = NULL;
	CUdriverProcAddressQueryResult st;
	r = cuGetProcAddress_v2("cuFuncGetName", &fn, 13000, 0, &st);
	if (v122)
		EXPECT(r == CUDA_ERROR_NOT_FOUND && st == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND && !fn,
		       "cuFuncGetName on a 12.2 driver: %d/%d", (int)r, (int)st);
	else
		EXPECT(r == CUDA_SUCCESS && fn, "cuFuncGetName: %d", (int)r);
	r = cuGetProcAddress_v2("cuFuncGetParamInfo", &fn, 13000, 0, &st);
	EXPECT(v122 ? r == CUDA_ERROR_NOT_FOUND : r == CUDA_SUCCESS, "cuFuncGetParamInfo: %d", (int)r);
	r = cuGetProcAddress_v2("cuCtxCreate", &fn, 13000, 0, &st);
	EXPECT(r == CUDA_SUCCESS && fn == (v122 ? (void *)&cuCtxCreate_v2 : (void *)&cuCtxCreate_v4),
	       "cuCtxCreate at 13000 on a %s driver", v122 ? "12.2" : "13.0");
	r = cuGetProcAddress_v2("cuCtxGetDevice", &fn, 13000, 0, &st);
	EXPECT(r == CUDA_SUCCESS && fn == (v122 ? (void *)&cuCtxGetDevice : (void *)&cuCtxGetDevice_v2),
	       "cuCtxGetDevice at 13000");
	printf("%s: %d failures\n", v122 ? "12.2-like" : "13.0-like", failures);
	return failures != 0;
}
