// tile-ping-pong: the two consumer warpgroups of a warp-specialized kernel take turns at
// issuing their wgmma or at their exponentials (see Passes.td).
#include "tessera/compiler/Dialect/Tile/Layouts.h"
#include "tessera/compiler/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace tessera {
#define GEN_PASS_DEF_TILEPINGPONG
#include "tessera/compiler/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera::tile;

namespace {

/// The consumers' block of a specialized kernel: the else branch of its split on
/// tile.in_producer_warps.
Block *consumersOf(func::FuncOp func) {
  for (auto split : func.getBody().front().getOps<scf::IfOp>()) {
    auto producing = split.getCondition().getDefiningOp<InProducerWarpsOp>();
    if (producing && !producing.getFirst() && split.elseBlock())
      return split.elseBlock();
  }
  return nullptr;
}

/// Whether `op` may wait for the other consumer warps (a barrier over them, in its lowering or
/// in its regions): shared memory stores and scratch exchanges, copy waits, CTA-syncing stage
/// waits.
bool mayWaitForOtherWarps(Operation &op) {
  auto wait = dyn_cast<WaitBarrierOp>(op);
  return op.getNumRegions() > 0 || isa<SharedStoreOp, AsyncWaitOp>(op) || (wait && wait.getSync()) ||
         op.hasAttr("tile.smem_offset");
}

/// Brackets [first, last] of a block with a take and a pass, unless something in between may
/// wait for the other warpgroup, which would be waiting for its turn.
void bracket(Operation *first, Operation *last) {
  for (Operation *op = first; op != last; op = op->getNextNode())
    if (mayWaitForOtherWarps(*op))
      return;
  OpBuilder b(first);
  WarpgroupTurnOp::create(b, first->getLoc(), TurnKind::take);
  b.setInsertionPointAfter(last);
  WarpgroupTurnOp::create(b, last->getLoc(), TurnKind::pass);
}

/// Turns at the dots: the async dots `body` issues before its first dot wait after them (a
/// wait before them is for the previous iteration's).
void takeTurnsAtDots(Block &body) {
  Operation *first = nullptr, *last = nullptr;
  for (Operation &op : body) {
    if (isa<DotWaitOp>(op) && first)
      break;
    if (isAsyncDot(&op)) {
      first = first ? first : &op;
      last = &op;
    }
  }
  if (first)
    bracket(first, last);
}

/// Turns at the exponentials: from the first of `body` (the softmax's, on the multi-function
/// unit that both warpgroups' warps of an SM sub-partition share) to the first async dot after
/// its last (P @ V), or that exponential. ptxas moves arithmetic past a bar.arrive, not past a
/// wgmma: passing the turn after the product that reads them keeps the exponentials inside.
void takeTurnsAtExponentials(Block &body) {
  Operation *first = nullptr, *last = nullptr;
  for (Operation &op : body)
    if (isa<math::Exp2Op, math::ExpOp>(op)) {
      first = first ? first : &op;
      last = &op;
    }
  if (!first)
    return;
  for (Operation *op = last->getNextNode(); op; op = op->getNextNode())
    if (isAsyncDot(op)) {
      last = op;
      break;
    }
  bracket(first, last);
}

struct TilePingPongPass : tessera::impl::TilePingPongBase<TilePingPongPass> {
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp func) {
      if (!func->hasAttr(kPingPongAttrName))
        return;
      // Without TMA loads a kernel keeps its warps (tile-specialize-warps): nothing to do.
      Block *consumers = consumersOf(func);
      if (!consumers)
        return;
      if (numWarpsOf(func) != 8) {
        func.emitError() << "ping_pong: needs two consumer warpgroups (num_warps = 8)";
        return signalPassFailure();
      }
      auto over = func->getAttrOfType<StringAttr>(kPingPongAttrName);
      if (!over || (over != kPingPongAtDots && over != kPingPongAtExponentials)) {
        func.emitError() << "ping_pong: takes turns at \"" << kPingPongAtDots << "\" or \""
                         << kPingPongAtExponentials << "\"";
        return signalPassFailure();
      }
      consumers->walk([&](scf::ForOp loop) {
        if (over == kPingPongAtDots)
          takeTurnsAtDots(*loop.getBody());
        else
          takeTurnsAtExponentials(*loop.getBody());
      });
      // After the consumers' register increase, which opens their block.
      auto at = llvm::find_if(*consumers, [](Operation &op) { return !isa<SetMaxRegistersOp>(op); });
      OpBuilder b(consumers, at);
      WarpgroupTurnOp::create(b, func.getLoc(), TurnKind::first);
    });
  }
};

} // namespace
