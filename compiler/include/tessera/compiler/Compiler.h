// The compiler's public face: a traced kernel in, PTX out. No MLIR or LLVM headers.
#ifndef TESSERA_COMPILER_COMPILER_H
#define TESSERA_COMPILER_COMPILER_H

#include "tessera/dsl/kernel.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::compiler {

/// An NVIDIA GPU architecture: compute capability major.minor (9.0 is the H100/H200).
struct Target {
  int major = 9;
  int minor = 0;
  /// Shared memory one program may use (opt-in), in bytes: the H100's and H200's by default.
  int64_t max_shared_memory = 232448;
  /// "sm_90a" for Hopper (its architecture-specific instructions), "sm_XY" otherwise.
  std::string arch() const;
};

/// A number the launcher reads: kernel argument `arg` (an integer), or `value` where arg < 0.
struct LaunchValue {
  int arg = -1;
  int64_t value = 0;
};

/// A TMA tensor map (CUtensorMap) the launcher encodes from the launch's arguments and passes
/// by value after them: the 2-D tensor at pointer argument `pointer`, `shape` and `strides` in
/// elements (outermost first; the last stride is 1), copied in boxes of `box` elements
/// (outermost first) whose 128-byte-or-narrower rows are swizzled by `swizzle_bytes` (0, 32,
/// 64 or 128) as the kernel's shared-memory stages lie.
struct TensorMap {
  int pointer = 0;
  int element_bytes = 2;
  std::vector<LaunchValue> shape, strides;
  std::vector<int64_t> box;
  int swizzle_bytes = 128;
};

struct CompiledKernel {
  std::string name;            // the PTX entry point
  std::string ptx;
  int num_warps = 4;           // threads per program: 32 * num_warps
  int64_t shared_memory = 0;   // dynamic shared memory bytes to launch with
  std::vector<TensorMap> tensor_maps; // extra parameters after the arguments, in order
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
