// Layout helpers shared by the layout passes and the lowering to LLVM.
#ifndef TESSERA_COMPILER_DIALECT_TILE_LAYOUTS_H
#define TESSERA_COMPILER_DIALECT_TILE_LAYOUTS_H

#include "tessera/compiler/Dialect/Tile/TileDialect.h"

#include <functional>
#include <optional>

namespace tessera::tile {

/// The blocked layout tessera gives a tile of `shape` by default: `vector` contiguous elements
/// per thread along the last dimension, lanes filling dimensions from the last, warps from the
/// first (so row reductions stay inside a warp).
BlockedEncodingAttr defaultBlockedLayout(mlir::MLIRContext *context, llvm::ArrayRef<int64_t> shape,
                                         int numWarps, int vector);

/// The layout a trans's source needs so that the trans moves only registers.
mlir::Attribute transposedSourceLayout(mlir::Attribute resultLayout, llvm::ArrayRef<int32_t> order);

/// The encoding of a tile value (null for scalars and tiles without one).
mlir::Attribute encodingOf(mlir::Value value);
mlir::RankedTensorType withEncoding(mlir::Type tensorType, mlir::Attribute encoding);

/// Result coordinate -> source coordinate of broadcast, expand_dims, trans, reshape and
/// convert_layout.
std::function<layout::Coord(const layout::Coord &)> sourceCoordinate(mlir::Operation *op);

/// For those ops: where each result register's element sits in the source tile, as a layout
/// over the source's shape (one entry per result register, none dropped).
layout::LinearLayout resultInSource(mlir::Operation *op);

/// For those ops: the source register each result register copies, when every result
/// element already sits in its thread; otherwise the op goes through shared memory.
std::optional<std::vector<int64_t>> registerMove(mlir::Operation *op);

/// Whether some register, lane or warp basis of `layout` moves along `axis` and another
/// dimension at once: a reduction along `axis` then has no per-row partials to fold.
bool mixesAxisWithOthers(const layout::LinearLayout &layout, int axis);

/// Bytes of shared memory `op` needs while it runs (0 when it needs none).
int64_t scratchBytes(mlir::Operation *op);

/// Bytes one element of `type` occupies in memory (i1 as a byte, pointers as 8 bytes).
int64_t storageBytes(mlir::Type elementType);
/// Bytes of all the stages of a ring (before alignment).
int64_t ringBytes(SharedBufferType type);
/// The first offset, a multiple of `align`, where `bytes` of shared memory fit beside the
/// [begin, end) ranges `taken` (any order, overlapping or not): in a gap, else after them all.
int64_t firstFit(std::vector<std::pair<int64_t, int64_t>> taken, int64_t bytes, int64_t align);

/// Warps per program of the kernel containing `op` (tile.num_warps, default 4).
int numWarpsOf(mlir::Operation *op);
/// Warps a warp-specialized kernel runs beyond them, issuing its TMA loads (0 for others).
int producerWarpsOf(mlir::Operation *op);
/// 32-bit registers each thread of the kernel containing `op` starts with: an SM's 65536
/// shared by tile.programs_per_sm programs and all their warps, a multiple of 8, at most 255.
int entryRegistersOf(mlir::Operation *op);

/// Whether the kernel containing `op` may use Hopper's warpgroup MMA (tile.warpgroup_mma).
bool warpgroupMmaAllowed(mlir::Operation *op);
/// Whether the kernel containing `op` stages its stores through shared memory
/// (tile.staged_stores).
bool storesStaged(mlir::Operation *op);
/// Whether the kernel containing `op` may use Hopper's copy engine (tile.tma): TMA loads,
/// bulk adds from shared memory.
bool tmaAllowed(mlir::Operation *op);
/// Shared memory a tile.bulk_add stages its tile in for the copy engine (0 where it adds from
/// registers). It stays the op's for the whole kernel: the engine reads it after the op.
/// Two buffers where the op alternates (bulkAddAlternates), one otherwise.
int64_t bulkAddStagingBytes(BulkAddOp op);
/// Whether a staged tile.bulk_add alternates between two buffers by its loop's iteration
/// parity: it runs once in every iteration of a loop (directly in its body) that runs once
/// (no loop around it), so that consecutive runs always take different buffers.
bool bulkAddAlternates(BulkAddOp op);

/// Whether ldmatrix can read a tile stored in shared memory as `storage` into `result`'s
/// tensor-core fragments.
bool readsWithLdmatrix(mlir::RankedTensorType result, mlir::RankedTensorType storage);
/// Whether the tensor-core dots `load` feeds read its stage themselves, step by step of k.
bool readByDotSteps(SharedLoadOp load);

/// A dot operand the tensor cores read step by step from a shared-memory stage.
struct StagedOperand {
  SharedLoadOp load;
  int64_t rows, cols; // the stored tile's shape
  bool transposed;    // the operand is the stored tile transposed
  /// Whether k runs along the stored rows: A stored [M][K], B stored [N][K] (read transposed).
  bool kMajor(bool isB) const { return transposed == isB; }
};
std::optional<StagedOperand> stagedOperand(mlir::Value operand);

/// Whether wgmma reads a stored tile of `rows` x `cols` 16-bit elements as an operand whose k
/// runs along the stored rows (`kMajor`) or down its columns, through a matrix descriptor.
bool describable(int64_t rows, int64_t cols, bool kMajor);

/// Whether `dot` runs on Hopper's warpgroup MMA (wgmma.mma_async): an mma layout with 16 rows
/// a warp in whole warpgroups, B (and A unless in registers) in stages wgmma can describe.
bool lowersToWarpgroupMma(DotOp dot);
/// Whether `op` is a dot issued asynchronously (tile-async-dots' wgmma).
bool isAsyncDot(mlir::Operation *op);

} // namespace tessera::tile

#endif // TESSERA_COMPILER_DIALECT_TILE_LAYOUTS_H
