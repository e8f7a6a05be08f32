// Internal: the CUDA Driver API, loaded from libcuda.so.1 at run time; every call checked.
#ifndef TESSERA_JIT_LIB_DRIVER_H
#define TESSERA_JIT_LIB_DRIVER_H

#include <cuda.h>

#include <string>

namespace tessera::jit::driver {

#define TESSERA_DRIVER_FUNCTIONS(X)                                                            \
  X(cuInit) X(cuDriverGetVersion) X(cuDeviceGet) X(cuDeviceGetCount) X(cuDeviceGetName)         \
  X(cuDeviceGetAttribute) X(cuDeviceTotalMem_v2) X(cuDevicePrimaryCtxRetain) X(cuCtxSetCurrent) \
  X(cuCtxGetCurrent) X(cuCtxGetDevice) \
  X(cuCtxSynchronize) X(cuModuleLoadDataEx) X(cuModuleUnload) X(cuModuleGetFunction)            \
  X(cuFuncSetAttribute) X(cuFuncGetAttribute) X(cuLaunchKernel) X(cuMemAlloc_v2)               \
  X(cuMemFree_v2) X(cuMemPoolCreate) X(cuMemPoolSetAttribute) X(cuMemAllocFromPoolAsync) X(cuMemFreeAsync) X(cuMemcpyDtoD_v2) X(cuMemcpyHtoD_v2) X(cuMemcpyDtoH_v2) X(cuMemsetD8_v2) X(cuStreamCreate)      \
  X(cuStreamDestroy_v2) X(cuStreamSynchronize) X(cuEventCreate) X(cuEventDestroy_v2)            \
  X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime) X(cuGetErrorName)               \
  X(cuGetErrorString) X(cuPointerGetAttributes) X(cuTensorMapEncodeTiled)

struct Api {
#define TESSERA_DECLARE(name) decltype(&::name) name = nullptr;
  TESSERA_DRIVER_FUNCTIONS(TESSERA_DECLARE)
#undef TESSERA_DECLARE
};

/// The loaded API with a context current on this thread: the caller's (the CUDA runtime's
/// current device, as torch.cuda.set_device leaves it), else device 0's primary context.
/// Throws tessera::Error saying why when there is no usable GPU.
const Api &api();

/// Makes `context` current on this thread (one of tessera's own, working for a caller whose
/// context that is), without api()'s fallback to device 0's.
void make_current(CUcontext context);

/// The primary context of device `ordinal`, retained once.
CUcontext primary_context(int ordinal);

/// Whether api() would succeed; `why` otherwise.
bool available(std::string *why);

/// Throws tessera::Error naming `call` and the CUDA error when `result` is not success.
void check(CUresult result, const char *call);

} // namespace tessera::jit::driver

#define TESSERA_CU(call) ::tessera::jit::driver::check(::tessera::jit::driver::api().call, #call)

#endif // TESSERA_JIT_LIB_DRIVER_H
