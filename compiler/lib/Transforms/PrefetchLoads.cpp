// tile-prefetch-loads: two-stage software pipelining of loads in loops (see Passes.td).
#include "tessera/compiler/Dialect/Tile/TileDialect.h"
#include "tessera/compiler/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace tessera {
#define GEN_PASS_DEF_TILEPREFETCHLOADS
#include "tessera/compiler/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera::tile;

namespace {

/// Whether `value` is computed in `body` from its arguments by pure ops only.
bool isIndexMath(Value value, Block *body, DenseSet<Value> &seen) {
  if (!seen.insert(value).second)
    return true;
  if (auto arg = dyn_cast<BlockArgument>(value))
    return true; // the body's own arguments, or values from outside
  Operation *def = value.getDefiningOp();
  if (def->getBlock() != body)
    return !body->getParentOp()->isAncestor(def);
  if (!isPure(def) || def->getNumRegions() != 0)
    return false;
  return llvm::all_of(def->getOperands(), [&](Value v) { return isIndexMath(v, body, seen); });
}

/// How a block argument of the body reads where a value is recomputed.
using ArgumentFn = function_ref<Value(BlockArgument)>;

/// `value` recomputed at the builder's insertion point, the body's arguments replaced by
/// `argument`; values from outside `body` are used as they are.
Value recompute(OpBuilder &b, Value value, IRMapping &map, Block *body, ArgumentFn argument) {
  if (Value mapped = map.lookupOrNull(value))
    return mapped;
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    if (arg.getOwner() != body)
      return value;
    Value replacement = argument(arg);
    map.map(value, replacement);
    return replacement;
  }
  Operation *def = value.getDefiningOp();
  if (def->getBlock() != body)
    return value;
  for (Value operand : def->getOperands())
    recompute(b, operand, map, body, argument);
  b.clone(*def, map);
  return map.lookup(value);
}

/// A load like `load`, with its pointers, mask and other recomputed, and masked off entirely
/// unless `active` (a scalar i1) holds.
Value loadUnder(OpBuilder &b, LoadOp load, Block *body, ArgumentFn argument, Value active) {
  Location loc = load.getLoc();
  IRMapping map;
  Value ptr = recompute(b, load.getPtr(), map, body, argument);
  Type maskType = getBoolLike(ptr.getType());
  Value enabled = isa<RankedTensorType>(maskType) ? SplatOp::create(b, loc, maskType, active).getResult() : active;
  Value mask = load.getMask()
                   ? arith::AndIOp::create(b, loc, recompute(b, load.getMask(), map, body, argument), enabled).getResult()
                   : enabled;
  Value other = load.getOther() ? recompute(b, load.getOther(), map, body, argument) : Value();
  if (!other) {
    Type type = load.getType();
    auto zero = b.getZeroAttr(getElementTypeOrSelf(type));
    other = isa<RankedTensorType>(type)
                ? arith::ConstantOp::create(b, loc, SplatElementsAttr::get(cast<ShapedType>(type), zero)).getResult()
                : arith::ConstantOp::create(b, loc, cast<TypedAttr>(zero)).getResult();
  }
  return LoadOp::create(b, loc, ptr, mask, other);
}

void prefetch(scf::ForOp loop) {
  Block *body = loop.getBody();
  SmallVector<LoadOp> loads;
  for (Operation &op : *body)
    if (auto load = dyn_cast<LoadOp>(op)) {
      DenseSet<Value> seen;
      bool pure = isIndexMath(load.getPtr(), body, seen) &&
                  (!load.getMask() || isIndexMath(load.getMask(), body, seen)) &&
                  (!load.getOther() || isIndexMath(load.getOther(), body, seen));
      if (pure && isa<RankedTensorType>(load.getType()))
        loads.push_back(load);
    }
  if (loads.empty())
    return;
  Location loc = loop.getLoc();
  IRRewriter rewriter(loop.getContext());

  // The first iteration's loads, before the loop (masked off if it never runs).
  rewriter.setInsertionPoint(loop);
  Value runs = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::slt, loop.getLowerBound(),
                                     loop.getUpperBound());
  SmallVector<Value> first;
  for (LoadOp load : loads)
    first.push_back(loadUnder(rewriter, load, body, [&](BlockArgument arg) -> Value {
      if (arg == loop.getInductionVar())
        return loop.getLowerBound();
      return loop.getInitArgs()[arg.getArgNumber() - 1];
    }, runs));

  auto yieldNext = [&](OpBuilder &, Location, ArrayRef<BlockArgument> carried) {
    // The callback may run before the body moves into the new loop: work in the loads' block.
    Block *current = loads.front()->getBlock();
    Value iv = current->getArgument(0);
    auto yield = cast<scf::YieldOp>(current->getTerminator());
    SmallVector<Value> next;
    for (LoadOp load : loads) {
      // Issue the next iteration's load where this one was: the induction variable one step
      // on, each carried value as this iteration yields it.
      OpBuilder at(load);
      Value nextIv = arith::AddIOp::create(at, loc, iv, loop.getStep());
      Value active = arith::CmpIOp::create(at, loc, arith::CmpIPredicate::slt, nextIv, loop.getUpperBound());
      IRMapping currentValues;
      auto identity = [](BlockArgument arg) -> Value { return arg; };
      next.push_back(loadUnder(at, load, current, [&](BlockArgument arg) -> Value {
        if (arg == iv)
          return nextIv;
        return recompute(at, yield.getOperand(arg.getArgNumber() - 1), currentValues, current, identity);
      }, active));
    }
    for (auto [load, arg] : llvm::zip(loads, carried)) {
      load.getResult().replaceAllUsesWith(arg);
      load.erase();
    }
    return next;
  };
  if (failed(cast<LoopLikeOpInterface>(loop.getOperation())
                 .replaceWithAdditionalYields(rewriter, first, /*replaceInitOperandUsesInLoop=*/false, yieldNext)))
    return;
}

struct TilePrefetchLoadsPass : tessera::impl::TilePrefetchLoadsBase<TilePrefetchLoadsPass> {
  void runOnOperation() override {
    SmallVector<scf::ForOp> loops;
    getOperation().walk([&](scf::ForOp loop) { loops.push_back(loop); });
    for (scf::ForOp loop : loops)
      prefetch(loop);
  }
};

} // namespace
