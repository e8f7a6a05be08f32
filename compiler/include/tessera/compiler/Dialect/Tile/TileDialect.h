// The `tile` dialect: what a tessera DSL kernel traces into (see TileDialect.td).
#ifndef TESSERA_COMPILER_DIALECT_TILE_TILEDIALECT_H
#define TESSERA_COMPILER_DIALECT_TILE_TILEDIALECT_H

#include <optional>

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "tessera/compiler/Layout/LinearLayout.h"

#include "tessera/compiler/Dialect/Tile/TileDialect.h.inc"
#include "tessera/compiler/Dialect/Tile/TileEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "tessera/compiler/Dialect/Tile/TileAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "tessera/compiler/Dialect/Tile/TileTypes.h.inc"

#define GET_OP_CLASSES
#include "tessera/compiler/Dialect/Tile/TileOps.h.inc"

namespace tessera::tile {

/// The type a load through `ptrLike` produces: the pointee for a scalar pointer, a tensor of
/// the pointee with the same shape for a tile of pointers; null for anything else.
mlir::Type getPointeeType(mlir::Type ptrLike);

/// i1, or a tensor of i1 with the shape of `type` when it is a tensor.
mlir::Type getBoolLike(mlir::Type type);

/// The tile a block of up to 5 dimensions holds once its unit dimensions are dropped: 2-D (a
/// [1, 64, 1, 128] block of a [batch, n, heads, d] tensor holds a 64x128 tile) or a single row
/// (a [1, 64] block of per-row statistics holds 64 values; rowDim is then -1), with the
/// dimensions its rows and columns come from; nullopt unless the columns are innermost. What
/// the TMA copies into a stage. Its tensor map lists the block's dimensions in `mapOrder`
/// (outermost first): the unit ones, then the rows, then the columns, so that the box's real
/// dimensions are the map's innermost whatever the tensor's strides (with a unit dimension of
/// a large stride between them, BHSD attention's heads, the TMA copied K and V about a third
/// slower on the H200).
struct BlockTile {
  mlir::RankedTensorType tile;
  int64_t rowDim, colDim;
  llvm::SmallVector<int64_t, 5> mapOrder;
};
std::optional<BlockTile> blockTile(mlir::RankedTensorType block);

/// rewriter.replaceOpWithNewOp<OpTy>(op, args...), the new op keeping op's discardable
/// attributes (tile.vector, say), read before op is erased.
template <typename OpTy, typename... Args>
OpTy replaceKeepingDiscardableAttrs(mlir::PatternRewriter &rewriter, mlir::Operation *op, Args &&...args) {
  mlir::DictionaryAttr discardable = op->getDiscardableAttrDictionary();
  OpTy replacement = rewriter.replaceOpWithNewOp<OpTy>(op, std::forward<Args>(args)...);
  replacement->setDiscardableAttrs(discardable);
  return replacement;
}

/// Whether `type` is a ring of mbarriers: one i64 a stage.
bool isBarrierRing(SharedBufferType type);

/// Short, readable spelling of a type for error messages: f32, f16[128x64], ptr<f32>[128].
std::string describe(mlir::Type type);

/// The placement of the elements of a tile of `shape` in `encoding` (blocked or slice).
tessera::layout::LinearLayout toLinearLayout(mlir::Attribute encoding,
                                             llvm::ArrayRef<int64_t> shape);

/// The attribute name that marks a func.func as a tile kernel.
inline constexpr llvm::StringLiteral kKernelAttrName = "tile.kernel";
/// Function attributes: warps per program, and the shared memory it needs (bytes).
inline constexpr llvm::StringLiteral kNumWarpsAttrName = "tile.num_warps";
inline constexpr llvm::StringLiteral kSharedMemoryAttrName = "tile.shared_memory";
/// Function attribute: how many stages a pipelined loop's loads fill ahead (config knob
/// num_stages; tile-pipeline-loops).
inline constexpr llvm::StringLiteral kNumStagesAttrName = "tile.num_stages";
/// Function attribute: the target has Hopper's warpgroup MMA (wgmma) and the kernel may use it.
inline constexpr llvm::StringLiteral kWarpgroupMmaAttrName = "tile.warpgroup_mma";
/// Function attribute: the target has Hopper's tensor memory accelerator and the kernel may
/// copy blocks with it; argument attribute: how the launcher builds a `!tile.tensor_map`.
inline constexpr llvm::StringLiteral kTmaAttrName = "tile.tma";
inline constexpr llvm::StringLiteral kTensorMapAttrName = "tile.tensor_map";
/// Function attribute: warp specialization was asked for (config knob warp_specialize); after
/// tile-specialize-warps, the number of producer warps the kernel runs beyond tile.num_warps.
inline constexpr llvm::StringLiteral kWarpSpecializeAttrName = "tile.warp_specialize";
inline constexpr llvm::StringLiteral kProducerWarpsAttrName = "tile.producer_warps";
/// Function attribute: tile-pipeline-loops gave a load outside loops a stage of its own
/// (stage-outside-loops), shared memory the kernel could do without.
inline constexpr llvm::StringLiteral kStagedOutsideLoopsAttrName = "tile.staged_outside_loops";
/// Function attribute: loop-invariant dot operands stay in shared memory, each dot reading
/// them there (config knob invariant_operands_in_shared; tile-pipeline-loops).
inline constexpr llvm::StringLiteral kInvariantOperandsInSharedAttrName = "tile.invariant_operands_in_shared";
/// Function attribute: ping-pong between the two consumer warpgroups was asked for (config
/// knob ping_pong; tile-ping-pong), and what they take turns at: "dots" (ping_pong = 1,
/// FlashAttention-3's order: issuing their products) or "exponentials" (ping_pong = 2: their
/// softmax's exponentials, on the multi-function unit).
inline constexpr llvm::StringLiteral kPingPongAttrName = "tile.ping_pong";
inline constexpr llvm::StringLiteral kPingPongAtDots = "dots";
inline constexpr llvm::StringLiteral kPingPongAtExponentials = "exponentials";
/// Function attribute: stores leave through shared memory in the store's coalesced layout
/// (config knob staged_stores, Hopper, where the scratch fits): tile-remove-layout-conversions
/// keeps the conversion before them, stmatrix writes it and each thread stores whole 16-byte
/// vectors.
inline constexpr llvm::StringLiteral kStagedStoresAttrName = "tile.staged_stores";
/// Function attribute: how many of every 8 exponentials (f32 exp2 and exp of tiles, per
/// thread) tile-convert-to-llvm computes by a polynomial on the FMA pipe instead of the
/// multi-function unit (config knob exp2_on_fma; absent for 0).
inline constexpr llvm::StringLiteral kExp2OnFmaAttrName = "tile.exp2_on_fma";
/// Function attribute: tile-convert-to-llvm folds each thread's values of a max reduction as
/// balanced trees, all rows level by level, instead of one chain a row (config knob tree_max).
inline constexpr llvm::StringLiteral kTreeMaxAttrName = "tile.tree_max";
/// Function attribute: tile-defer-lane-sums keeps the partial sums of the lanes holding a row
/// through the loops that carry them (config knob defer_lane_sums).
inline constexpr llvm::StringLiteral kDeferLaneSumsAttrName = "tile.defer_lane_sums";
/// The producer's warps: one warpgroup (setmaxnreg applies to whole warpgroups).
inline constexpr int kProducerWarps = 4;
/// Function attribute: how many of the kernel's programs share an SM's register file (config
/// knob programs_per_sm; 1 when absent): each gets that share of the registers.
inline constexpr llvm::StringLiteral kProgramsPerSmAttrName = "tile.programs_per_sm";

} // namespace tessera::tile

#endif // TESSERA_COMPILER_DIALECT_TILE_TILEDIALECT_H
