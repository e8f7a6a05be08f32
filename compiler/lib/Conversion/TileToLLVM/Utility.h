// Helpers shared by the tile -> LLVM patterns: per-thread registers of a tile, thread
// coordinates under a layout, shared memory and predicated PTX.
#ifndef TESSERA_CONVERSION_TILETOLLVM_UTILITY_H
#define TESSERA_CONVERSION_TILETOLLVM_UTILITY_H

#include "tessera/compiler/Dialect/Tile/Layouts.h"

#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

#include <map>

namespace tessera::tile::lowering {

using mlir::Location;
using mlir::OpBuilder;
using mlir::Type;
using mlir::Value;
using Values = llvm::SmallVector<Value>;

/// The LLVM type converter of tile programs: pointers become global pointers, tiles structs
/// of their per-thread registers, block pointers structs of base, shape, strides, offsets.
class TileTypeConverter : public mlir::LLVMTypeConverter {
public:
  explicit TileTypeConverter(mlir::MLIRContext *context);
};

/// The registers of a converted tile, and back.
Values unpack(OpBuilder &b, Location loc, Value structValue);
Value pack(OpBuilder &b, Location loc, Type structType, mlir::ValueRange values);

Value i32Constant(OpBuilder &b, Location loc, int64_t value);
Value constantOf(OpBuilder &b, Location loc, Type type, int64_t value);

/// x * log2(e) for an f32 `x`: exp(x) as exp2 of it.
Value timesLog2e(OpBuilder &b, Location loc, Value x);

/// Thread index within the CTA, its lane and its warp.
struct ThreadId {
  Value lane, warp;
};
ThreadId threadId(OpBuilder &b, Location loc);

/// Coordinates (i32) of every register of this thread under `layout`.
std::vector<Values> registerCoordinates(OpBuilder &b, Location loc,
                                        const layout::LinearLayout &layout);

/// The coordinates (i32) the warp bits alone contribute under `layout`.
Values warpOffset(OpBuilder &b, Location loc, const layout::LinearLayout &layout);

/// Element index of `coord` in a tile of `shape` in shared memory as storeTileToShared puts it
/// (layout::SwizzledTile with `swizzle`).
Value sharedIndex(OpBuilder &b, Location loc, llvm::ArrayRef<Value> coord, llvm::ArrayRef<int64_t> shape,
                  int64_t bytes, bool swizzle);

/// Row-major linear index (i32) of `coord` in `shape`.
Value linearIndex(OpBuilder &b, Location loc, llvm::ArrayRef<Value> coord,
                  llvm::ArrayRef<int64_t> shape);

/// The kernel's shared buffer at `offset` bytes (a `!llvm.ptr<3>`).
Value sharedMemory(OpBuilder &b, Location loc, mlir::Operation *op, int64_t offset);
/// Where tile-allocate-shared-memory put `op`'s scratch or staging (tile.smem_offset).
int64_t smemOffset(mlir::Operation *op);
/// Named barriers besides the CTA's (0): a warp-specialized kernel's consumer warps', each
/// warpgroup's own (this + its index), ping-pong's turns (this + the consumer warpgroup's).
constexpr int kConsumersBarrier = 1, kWarpgroupBarriers = 2, kTurnBarriers = 8;
/// A barrier of the threads that run tile code: the CTA's, or a warp-specialized kernel's
/// consumer warps'.
void barrier(OpBuilder &b, Location loc);
/// The executing thread's warpgroup: tid / 128.
Value warpgroupIndex(OpBuilder &b, Location loc);
/// A barrier of the executing warpgroup's 4 warps only.
void warpgroupBarrier(OpBuilder &b, Location loc);

/// A value of element type `element` as it is stored in memory (i1 as i8, pointers as i64) and
/// back.
Type storageType(Type element);
Value toStorage(OpBuilder &b, Location loc, Value value);
Value fromStorage(OpBuilder &b, Location loc, Value stored, Type element);

/// Inline PTX; `resultType` null for none.
Value ptx(OpBuilder &b, Location loc, Type resultType, llvm::StringRef code,
          llvm::StringRef constraints, mlir::ValueRange operands, bool sideEffects);

/// The PTX register class ("h", "r", "l") and bit-size suffix of an integer of `bits`.
llvm::StringRef ptxConstraint(unsigned bits);

/// Write the registers of a tile laid out by `layout` to shared memory at `base`, row-major, in
/// vectors of consecutive registers. With `swizzle`, each 16-byte chunk of a 2-D tile's row
/// moves to chunk ^ (row phase), so that the column-wise reads of tensor-core fragments hit
/// distinct banks.
void storeTileToShared(OpBuilder &b, Location loc, Value base, const layout::LinearLayout &layout,
                       llvm::ArrayRef<Value> registers, Type element, bool swizzle = false);
/// The same, each vector at the element index `indexOf` gives its first element's coordinates.
void storeTileToShared(OpBuilder &b, Location loc, Value base, const layout::LinearLayout &layout,
                       llvm::ArrayRef<Value> registers, Type element,
                       llvm::function_ref<Value(llvm::ArrayRef<Value>)> indexOf);
/// The registers `view` describes (a layout over the stored tile's coordinates), read back from
/// a tile stored by storeTileToShared with the same `swizzle`.
Values loadTileFromShared(OpBuilder &b, Location loc, Value base, const layout::LinearLayout &view,
                          Type element, bool swizzle = false);
Value loadFromShared(OpBuilder &b, Location loc, Value base, Value index, Type element);

/// Stage `slot` (i32) of a shared ring at `base`.
Value sharedStage(OpBuilder &b, Location loc, Value base, Value slot, SharedBufferType type);

/// Two 16-bit values packed into the 32-bit register a tensor-core instruction reads.
Value packPair(OpBuilder &b, Location loc, Value lo, Value hi);
/// Element `e` of mma.sync m16n8k16's fragments as lane 0 holds it (other lanes add their
/// offsets), for the tile whose first row is `row`: A (16 x 16, 8 elements) from column `k` on,
/// C (16 x 8, 4 elements) from column `col` on. wgmma's register A and accumulators are the same.
layout::Coord mmaAElement(int64_t row, int64_t k, int e);
layout::Coord mmaCElement(int64_t row, int64_t col, int e);
/// Inline PTX `code` that hands `values` (i32 or f32) through unchanged, as tied operands:
/// every write to them comes before it and every read of the results after it.
Values passThrough(OpBuilder &b, Location loc, llvm::StringRef code, mlir::ValueRange values);

/// Registers of a layout by their coordinates in lane 0 of warp 0.
std::map<layout::Coord, int64_t> registerIndex(const layout::LinearLayout &layout);

/// Hopper's warpgroup MMA (WarpgroupMma.cpp): a dot that lowersToWarpgroupMma, and the wait
/// for async ones.
mlir::LogicalResult lowerWarpgroupDot(DotOp op, DotOp::Adaptor adaptor, const mlir::TypeConverter *converter,
                                      mlir::ConversionPatternRewriter &rewriter);
mlir::LogicalResult lowerDotWait(DotWaitOp op, DotWaitOp::Adaptor adaptor, mlir::ConversionPatternRewriter &rewriter);

// Pattern sets.
void populateMemoryOpPatterns(TileTypeConverter &converter, mlir::RewritePatternSet &patterns);
void populateComputeOpPatterns(TileTypeConverter &converter, mlir::RewritePatternSet &patterns);

} // namespace tessera::tile::lowering

#endif // TESSERA_CONVERSION_TILETOLLVM_UTILITY_H
