// tile-defer-lane-sums: sums a loop carries keep each lane's partial sum through the loop and
// add the lanes up after it (see Passes.td).
#include "tessera/compiler/Dialect/Tile/Layouts.h"
#include "tessera/compiler/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include "llvm/ADT/MapVector.h"

namespace tessera {
#define GEN_PASS_DEF_TILEDEFERLANESUMS
#include "tessera/compiler/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera::tile;

namespace {

/// A loop's carried sum: its iter arg `index`, the reduce that adds each iteration's sum and
/// the lane id bits along the reduced axis (those the reduce's shuffles would cross).
struct CarriedSum {
  scf::ForOp loop;
  unsigned index;
  ReduceOp reduce;
  int32_t lanes;
};

/// The lane id bits along `reduce`'s axis, or 0 where its sum cannot stay in the lanes: warps
/// along the axis (their partials meet in shared memory) or an axis mixed with others.
int32_t lanesAlongAxis(ReduceOp reduce) {
  auto type = reduce.getSrc().getType();
  if (!type.getEncoding())
    return 0;
  tessera::layout::LinearLayout layout = toLinearLayout(type.getEncoding(), type.getShape());
  const int axis = static_cast<int>(reduce.getAxis());
  if (mixesAxisWithOthers(layout, axis))
    return 0;
  for (const auto &basis : layout.warps())
    if (basis[axis] != 0)
      return 0;
  int32_t lanes = 0;
  for (size_t bit = 0; bit < layout.lanes().size(); ++bit)
    if (layout.lanes()[bit][axis] != 0)
      lanes |= 1 << bit;
  return lanes;
}

/// Iter arg `index` of `loop` as a carried sum: the value yielded is `arg * alpha + sum` or
/// `arg + sum` (either order), `sum` a float tile.reduce sum read only there, and nothing
/// else in the loop reads `arg` or the product.
std::optional<CarriedSum> carriedSum(scf::ForOp loop, unsigned index) {
  Value arg = loop.getRegionIterArg(index);
  Value next = loop.getBody()->getTerminator()->getOperand(index);
  auto add = next.getDefiningOp<arith::AddFOp>();
  if (!add || !add->hasOneUse() || !arg.hasOneUse() || !isa<RankedTensorType>(arg.getType()))
    return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    auto reduce = add->getOperand(side).getDefiningOp<ReduceOp>();
    Value rest = add->getOperand(1 - side);
    if (!reduce || reduce.getKind() != ReduceKind::sum || reduce.getWithinThreads() || !reduce->hasOneUse())
      continue;
    auto scaled = rest.getDefiningOp<arith::MulFOp>();
    const bool carried = rest == arg || (scaled && scaled->hasOneUse() &&
                                         (scaled.getLhs() == arg || scaled.getRhs() == arg));
    if (!carried)
      continue;
    if (int32_t lanes = lanesAlongAxis(reduce))
      return CarriedSum{loop, index, reduce, lanes};
  }
  return std::nullopt;
}

bool isZeros(Value value) {
  auto constant = value.getDefiningOp<arith::ConstantOp>();
  auto splat = constant ? dyn_cast<SplatElementsAttr>(constant.getValue()) : nullptr;
  return splat && isa<FloatType>(splat.getElementType()) && splat.getSplatValue<APFloat>().isZero();
}

struct TileDeferLaneSums : tessera::impl::TileDeferLaneSumsBase<TileDeferLaneSums> {
  void runOnOperation() override {
    getOperation()->walk([](func::FuncOp func) {
      if (!func->hasAttr(kDeferLaneSumsAttrName))
        return;
      // Each loop result that a carried sum leaves, with the sum.
      llvm::MapVector<Value, CarriedSum> sums;
      func.walk([&](scf::ForOp loop) {
        for (unsigned i = 0; i < loop.getNumRegionIterArgs(); ++i)
          if (std::optional<CarriedSum> sum = carriedSum(loop, i))
            sums.insert({loop.getResult(i), *sum});
      });
      // A sum must start from zeros or from another's partial sums over the same lanes.
      for (bool dropped = true; dropped;) {
        dropped = false;
        for (auto it = sums.begin(); it != sums.end(); ++it) {
          Value init = it->second.loop.getInitArgs()[it->second.index];
          auto from = sums.find(init);
          if (isZeros(init) || (from != sums.end() && from->second.lanes == it->second.lanes))
            continue;
          sums.erase(it);
          dropped = true;
          break;
        }
      }
      for (auto &[result, sum] : sums) {
        sum.reduce.setWithinThreads(true);
        // Every reader but another carried sum's start gets the lanes' total.
        SmallVector<OpOperand *> readers;
        for (OpOperand &use : result.getUses()) {
          auto next = dyn_cast<scf::ForOp>(use.getOwner());
          const bool startsSum = next && use.getOperandNumber() >= next.getNumControlOperands() &&
                                 sums.count(next.getResult(use.getOperandNumber() - next.getNumControlOperands()));
          if (!startsSum)
            readers.push_back(&use);
        }
        if (readers.empty())
          continue;
        OpBuilder builder(sum.loop);
        builder.setInsertionPointAfter(sum.loop);
        Value total = CombineLanesOp::create(builder, sum.loop.getLoc(), result.getType(), result,
                                             builder.getI32IntegerAttr(sum.lanes));
        for (OpOperand *reader : readers)
          reader->set(total);
      }
    });
  }
};

} // namespace
