// tile-stage-dot-operands (see Passes.td).
#include "tessera/compiler/Dialect/Tile/Layouts.h"
#include "tessera/compiler/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tessera {
#define GEN_PASS_DEF_TILESTAGEDOTOPERANDS
#include "tessera/compiler/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera::tile;

namespace {

/// The trans or convert_layout that moves `dot`'s A operand, a 2-D tile of 16-bit elements
/// computed in registers of its block, through shared memory (not a register move), where
/// wgmma can read the tile as stored; or null.
Operation *movedThroughShared(DotOp dot) {
  Operation *move = dot.getA().getDefiningOp();
  if (!isa_and_present<TransOp, ConvertLayoutOp>(move) || scratchBytes(move) == 0)
    return nullptr;
  Value source = move->getOperand(0);
  auto type = cast<RankedTensorType>(source.getType());
  Operation *def = source.getDefiningOp();
  if (type.getRank() != 2 || type.getElementType().getIntOrFloatBitWidth() != 16 || !def ||
      def->getBlock() != dot->getBlock())
    return nullptr;
  // Stored [M][K] (K-major), or for a trans [K][M] (MN-major).
  return describable(type.getDimSize(0), type.getDimSize(1), /*kMajor=*/!isa<TransOp>(move)) ? move : nullptr;
}

/// One source tile's stage: written once, right after the tile is computed, read by each dot.
struct Stage {
  SharedAllocOp buffer;
  Value slot;
};

struct TileStageDotOperandsPass : tessera::impl::TileStageDotOperandsBase<TileStageDotOperandsPass> {
  void runOnOperation() override {
    getOperation().walk([](func::FuncOp func) {
      if (!warpgroupMmaAllowed(func))
        return;
      SmallVector<std::pair<DotOp, Operation *>> moved;
      func.walk([&](DotOp dot) {
        if (Operation *move = movedThroughShared(dot); move && lowersToWarpgroupMma(dot))
          moved.push_back({dot, move});
      });
      DenseMap<Value, Stage> stages;
      for (auto [dot, move] : moved) {
        Value source = move->getOperand(0);
        Stage &stage = stages[source];
        OpBuilder b(func.getContext());
        Location loc = move->getLoc();
        if (!stage.buffer) {
          auto type = cast<RankedTensorType>(source.getType());
          b.setInsertionPointToStart(&func.getBody().front());
          stage.buffer = SharedAllocOp::create(
              b, loc, SharedBufferType::get(b.getContext(), 1, RankedTensorType::get(type.getShape(), type.getElementType())));
          b.setInsertionPointAfter(source.getDefiningOp());
          stage.slot = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0));
          SharedStoreOp::create(b, loc, source, stage.buffer, stage.slot);
        }
        b.setInsertionPoint(dot);
        auto load = SharedLoadOp::create(b, loc, dot.getA().getType(), stage.buffer, stage.slot,
                                         /*transposed=*/isa<TransOp>(move));
        dot.getAMutable().assign(load); // still on wgmma: B as before, A describable
        if (move->use_empty())
          move->erase();
      }
    });
  }
};

} // namespace
