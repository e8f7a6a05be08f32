// The compiler's public face: a traced kernel in, PTX out. No MLIR or LLVM headers.
#ifndef TESSERA_COMPILER_COMPILER_H
#define TESSERA_COMPILER_COMPILER_H

#include "tessera/dsl/kernel.h"

#include <cstdint>
#include <string>

namespace tessera::compiler {

/// An NVIDIA GPU architecture: compute capability major.minor (9.0 is the H100/H200).
struct Target {
  int major = 9;
  int minor = 0;
  /// "sm_90a" for Hopper (its architecture-specific instructions), "sm_XY" otherwise.
  std::string arch() const;
};

struct CompiledKernel {
  std::string name;            // the PTX entry point
  std::string ptx;
  int num_warps = 4;           // threads per program: 32 * num_warps
  int64_t shared_memory = 0;   // dynamic shared memory bytes to launch with
};

/// Lower a traced kernel to PTX for `target`. The config's "num_warps" (default 4) sets the
/// threads per program. With TESSERA_DUMP_IR=<dir>, every stage is written to <dir>.
/// Throws tessera::Error when a stage fails, with MLIR's diagnostics.
CompiledKernel compile(const dsl::TracedKernel &traced, const Target &target);

/// Identifies the compiler in cache keys: tessera and LLVM versions and a hash of the
/// compiler's sources.
std::string version();

} // namespace tessera::compiler

#endif // TESSERA_COMPILER_COMPILER_H
