/*
 * The module and library loaders and the kernel lookups, hooked so that kernels can be
 * identified on drivers without cuFuncGetName/cuFuncGetParamInfo (modinfo.c). Each hook calls
 * the driver with the arguments untouched and returns its answer; the image is parsed only
 * while learning is on (a queueing policy on such a driver, or GPUMUX_SHIM_KERNEL_INFO=image
 * or verify), before the call, while the program's image is certainly valid.
 */
#include "modinfo.h"

GMX_EXPORT CUresult CUDAAPI cuModuleLoadData(CUmodule *module, const void *image)
{
	GMX_REAL_OR_RETURN(real, cuModuleLoadData);
	gmx_fatbin_t *fb = gmx_shim_modinfo_parse_mem(image, "cuModuleLoadData");
	CUresult r = real(module, image);
	gmx_shim_modinfo_loaded(r, module ? *module : NULL, fb);
	return r;
}

GMX_EXPORT CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
					       CUjit_option *options, void **optionValues)
{
	GMX_REAL_OR_RETURN(real, cuModuleLoadDataEx);
	gmx_fatbin_t *fb = gmx_shim_modinfo_parse_mem(image, "cuModuleLoadDataEx");
	CUresult r = real(module, image, numOptions, options, optionValues);
	gmx_shim_modinfo_loaded(r, module ? *module : NULL, fb);
	return r;
}

GMX_EXPORT CUresult CUDAAPI cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
	GMX_REAL_OR_RETURN(real, cuModuleLoadFatBinary);
	gmx_fatbin_t *fb = gmx_shim_modinfo_parse_mem(fatCubin, "cuModuleLoadFatBinary");
	CUresult r = real(module, fatCubin);
	gmx_shim_modinfo_loaded(r, module ? *module : NULL, fb);
	return r;
}

GMX_EXPORT CUresult CUDAAPI cuModuleLoad(CUmodule *module, const char *fname)
{
	GMX_REAL_OR_RETURN(real, cuModuleLoad);
	gmx_fatbin_t *fb = gmx_shim_modinfo_parse_file(fname, "cuModuleLoad");
	CUresult r = real(module, fname);
	gmx_shim_modinfo_loaded(r, module ? *module : NULL, fb);
	return r;
}

GMX_EXPORT CUresult CUDAAPI cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
					      void **jitOptionsValues, unsigned int numJitOptions,
					      CUlibraryOption *libraryOptions, void **libraryOptionValues,
					      unsigned int numLibraryOptions)
{
	GMX_REAL_OR_RETURN(real, cuLibraryLoadData);
	gmx_fatbin_t *fb = gmx_shim_modinfo_parse_mem(code, "cuLibraryLoadData");
	CUresult r = real(library, code, jitOptions, jitOptionsValues, numJitOptions, libraryOptions,
			  libraryOptionValues, numLibraryOptions);
	gmx_shim_modinfo_loaded(r, library ? *library : NULL, fb);
	return r;
}

GMX_EXPORT CUresult CUDAAPI cuLibraryLoadFromFile(CUlibrary *library, const char *fileName,
						  CUjit_option *jitOptions, void **jitOptionsValues,
						  unsigned int numJitOptions, CUlibraryOption *libraryOptions,
						  void **libraryOptionValues, unsigned int numLibraryOptions)
{
	GMX_REAL_OR_RETURN(real, cuLibraryLoadFromFile);
	gmx_fatbin_t *fb = gmx_shim_modinfo_parse_file(fileName, "cuLibraryLoadFromFile");
	CUresult r = real(library, fileName, jitOptions, jitOptionsValues, numJitOptions, libraryOptions,
			  libraryOptionValues, numLibraryOptions);
	gmx_shim_modinfo_loaded(r, library ? *library : NULL, fb);
	return r;
}

GMX_EXPORT CUresult CUDAAPI cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	GMX_REAL_OR_RETURN(real, cuModuleGetFunction);
	CUresult r = real(hfunc, hmod, name);
	if (r == CUDA_SUCCESS && hfunc && gmx_shim_modinfo_learning())
		gmx_shim_modinfo_function(*hfunc, hmod, name);
	return r;
}

GMX_EXPORT CUresult CUDAAPI cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
	GMX_REAL_OR_RETURN(real, cuLibraryGetKernel);
	CUresult r = real(pKernel, library, name);
	if (r == CUDA_SUCCESS && pKernel && gmx_shim_modinfo_learning())
		gmx_shim_modinfo_function(*pKernel, library, name);
	return r;
}

GMX_EXPORT CUresult CUDAAPI cuLibraryGetModule(CUmodule *pMod, CUlibrary library)
{
	GMX_REAL_OR_RETURN(real, cuLibraryGetModule);
	CUresult r = real(pMod, library);
	if (r == CUDA_SUCCESS && pMod && gmx_shim_modinfo_learning())
		gmx_shim_modinfo_alias(*pMod, library);
	return r;
}

GMX_EXPORT CUresult CUDAAPI cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
	GMX_REAL_OR_RETURN(real, cuKernelGetFunction);
	CUresult r = real(pFunc, kernel);
	if (r == CUDA_SUCCESS && pFunc && gmx_shim_modinfo_learning())
		gmx_shim_modinfo_same_kernel(*pFunc, kernel);
	return r;
}

/* The runtime's private tables pass through, except that the module loads of CUDART_INTERFACE
 * are seen on their way (modinfo.c). */
GMX_EXPORT CUresult CUDAAPI cuGetExportTable(const void **ppExportTable, const CUuuid *pExportTableId)
{
	GMX_REAL_OR_RETURN(real, cuGetExportTable);
	CUresult r = real(ppExportTable, pExportTableId);
	if (r == CUDA_SUCCESS && ppExportTable)
		*ppExportTable = gmx_shim_integrity_table(gmx_shim_modinfo_export_table(*ppExportTable, pExportTableId),
							  pExportTableId);
	return r;
}
