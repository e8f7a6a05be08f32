// Which kernel arguments' memory a kernel never writes: loads from it may be repeated or
// moved (read early for a later iteration, or again by a producer warpgroup) and read the
// same values. Shared by the passes that copy index math (PipelineLoops, SpecializeWarps).
#ifndef TESSERA_COMPILER_TRANSFORMS_CONSTANTMEMORY_H
#define TESSERA_COMPILER_TRANSFORMS_CONSTANTMEMORY_H

#include "tessera/compiler/Dialect/Tile/TileDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

namespace tessera::tile {

/// The kernel argument a pointer (or tile of pointers, or block pointer) derives from, or null
/// where it cannot be told (a select between pointers, a pointer carried by a loop).
mlir::Value pointerRoot(mlir::Value ptr);

/// The kernel arguments whose memory `func` never writes (stores, atomics, block stores, bulk
/// adds), found once per kernel.
class ConstantMemory {
public:
  explicit ConstantMemory(mlir::func::FuncOp func);

  /// Whether `load` reads memory the kernel never writes.
  bool holds(LoadOp load) const;

  /// Whether `op` is a load of one value (not a tile) from such memory: a block index read
  /// from a table, as block-sparse attention does.
  bool isIndexLoad(mlir::Operation *op) const;

private:
  bool unknownWrites = false; // a write whose argument cannot be told
  llvm::DenseSet<mlir::Value> written;
};

} // namespace tessera::tile

#endif // TESSERA_COMPILER_TRANSFORMS_CONSTANTMEMORY_H
