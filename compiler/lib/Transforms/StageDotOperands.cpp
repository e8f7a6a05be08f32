// tile-stage-dot-operands (see Passes.td).
#include "tessera/compiler/Dialect/Tile/Layouts.h"
#include "tessera/compiler/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace tessera {
#define GEN_PASS_DEF_TILESTAGEDOTOPERANDS
#include "tessera/compiler/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera::tile;

namespace {

/// The trans or convert_layout that moves `dot`'s operand `index` (0: A, 1: B), a 2-D tile of
/// 16-bit elements computed in registers of its block, through shared memory (not a register
/// move), where wgmma can read the tile as stored; or null.
Operation *movedThroughShared(DotOp dot, unsigned index) {
  Operation *move = dot->getOperand(index).getDefiningOp();
  if (!isa_and_present<TransOp, ConvertLayoutOp>(move) || scratchBytes(move) == 0)
    return nullptr;
  Value source = move->getOperand(0);
  auto type = cast<RankedTensorType>(source.getType());
  Operation *def = source.getDefiningOp();
  if (type.getRank() != 2 || type.getElementType().getIntOrFloatBitWidth() != 16 || !def ||
      def->getBlock() != dot->getBlock())
    return nullptr;
  // A stored [M][K] is K-major, B stored [K][N] MN-major; a trans stores the other way.
  const bool transposed = isa<TransOp>(move);
  return describable(type.getDimSize(0), type.getDimSize(1), /*kMajor=*/index == 0 ? !transposed : transposed)
             ? move
             : nullptr;
}

/// A B operand computed in registers outside the loop bodies (the forward's last deferred
/// P @ V in a persistent loop: its V, loaded by the consumers) goes to a stage in the scratch's
/// memory (tile.in_scratch), stored right before the dot, so that the dot runs on wgmma rather
/// than mma.sync and takes no shared memory of its own. Where the dot would still not run on
/// wgmma, nothing changes.
void stageInScratch(func::FuncOp func, DotOp dot, Operation *move) {
  Value source = move->getOperand(0);
  if (isa<scf::ForOp>(dot->getParentOp()))
    return;
  auto type = cast<RankedTensorType>(source.getType());
  OpBuilder b(func.getContext());
  Location loc = move->getLoc();
  b.setInsertionPointToStart(&func.getBody().front());
  auto buffer = SharedAllocOp::create(
      b, loc, SharedBufferType::get(b.getContext(), 1, RankedTensorType::get(type.getShape(), type.getElementType())));
  buffer->setAttr(kInScratchAttrName, b.getUnitAttr());
  b.setInsertionPoint(dot);
  Value slot = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0));
  auto store = SharedStoreOp::create(b, loc, source, buffer, slot);
  auto load = SharedLoadOp::create(b, loc, dot.getB().getType(), buffer, slot, /*transposed=*/isa<TransOp>(move));
  dot.getBMutable().assign(load);
  if (!lowersToWarpgroupMma(dot)) { // e.g. rows or columns wgmma does not take: as it was
    dot.getBMutable().assign(move->getResult(0));
    for (Operation *op : {load.getOperation(), store.getOperation(), slot.getDefiningOp(), buffer.getOperation()})
      op->erase();
    return;
  }
  if (move->use_empty())
    move->erase();
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
      SmallVector<std::pair<DotOp, Operation *>> moved, movedB;
      func.walk([&](DotOp dot) {
        if (Operation *move = movedThroughShared(dot, 0); move && lowersToWarpgroupMma(dot))
          moved.push_back({dot, move});
        else if (Operation *moveB = func->hasAttr(kBInScratchAttrName) ? movedThroughShared(dot, 1) : nullptr)
          movedB.push_back({dot, moveB});
      });
      for (auto [dot, move] : movedB)
        stageInScratch(func, dot, move);
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
