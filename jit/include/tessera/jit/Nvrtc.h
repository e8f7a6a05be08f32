// NVRTC: compile CUDA C++ at run time. Tests and benchmarks use it for independent reference
// kernels, so that correctness never rests on tessera's own compiler alone.
#ifndef TESSERA_JIT_NVRTC_H
#define TESSERA_JIT_NVRTC_H

#include "tessera/jit/Runtime.h"

#include <memory>
#include <string>

namespace tessera::jit {

/// PTX for the CUDA C++ `source` (kernels declared extern "C"), for the current device.
/// Throws tessera::Error with NVRTC's log when it does not compile.
std::string nvrtc_compile(const std::string &source, const std::string &program_name = "reference.cu");

/// Compile `source` and load its kernel `name` to run with 32 * num_warps threads per block.
std::unique_ptr<LoadedKernel> nvrtc_kernel(const std::string &source, const std::string &name,
                                           int num_warps = 4, int64_t shared_memory = 0);

} // namespace tessera::jit

#endif // TESSERA_JIT_NVRTC_H
