// The host side of the TMA path: what cuTensorMapEncodeTiled is given for a kernel's tensor map
// (compiler::TensorMap) at one launch, computed and checked from the launch's arguments.
#ifndef TESSERA_JIT_TENSORMAP_H
#define TESSERA_JIT_TENSORMAP_H

#include "tessera/compiler/Compiler.h"
#include "tessera/dsl/kernel.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::jit {

/// cuTensorMapEncodeTiled's arguments, innermost dimension first.
struct TensorMapEncoding {
  uint64_t address = 0;
  int element_bytes = 2;
  std::vector<uint64_t> dims;
  std::vector<uint64_t> byte_strides; // of dimensions 1.. (dimension 0 is contiguous)
  std::vector<uint32_t> box;
  int swizzle_bytes = 128;
  /// A dimension is empty: every element reads zero. The map is encoded over a 16-byte buffer
  /// of zeros instead (dims 1), since the TMA takes no empty tensor.
  bool empty = false;
};

/// The encoding of `map` for a launch of `kernel` with `args`. Throws tessera::Error naming the
/// argument where the TMA cannot take it (a misaligned address or stride, a negative stride,
/// a dimension or stride too large for it).
TensorMapEncoding plan_tensor_map(const std::string &kernel, const compiler::TensorMap &map,
                                  const dsl::LaunchArg *args, size_t count);

} // namespace tessera::jit

#endif // TESSERA_JIT_TENSORMAP_H
