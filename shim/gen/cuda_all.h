/* Input of the generator: every header that declares driver API entry points. */
#include <cuda.h>
#include <cudaProfiler.h>
