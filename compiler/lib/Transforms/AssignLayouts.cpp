// tile-assign-layouts: every tile gets a layout encoding (see Passes.td).
#include "tessera/compiler/Dialect/Tile/Layouts.h"
#include "tessera/compiler/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"

#include <cmath>
#include <map>

namespace tessera {
#define GEN_PASS_DEF_TILEASSIGNLAYOUTS
#include "tessera/compiler/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera::tile;

namespace {

bool isTile(Type type) { return isa<RankedTensorType>(type); }

/// How costly a layout is to leave: tensor-core accumulators (and their row/column slices)
/// can only be left through shared memory, blocked layouts are rebuilt from index math.
int strength(Attribute layout) {
  while (auto slice = dyn_cast_or_null<SliceEncodingAttr>(layout))
    layout = slice.getParent();
  return isa_and_present<MmaEncodingAttr>(layout) ? 1 : 0;
}

/// Whether `value` is computed (in its block, through any ops) from a dot's result.
bool derivesFromDot(Value value, DenseSet<Value> &seen) {
  Operation *def = value.getDefiningOp();
  if (!def || !seen.insert(value).second)
    return false;
  if (isa<DotOp>(def))
    return true;
  return llvm::any_of(def->getOperands(), [&](Value operand) { return derivesFromDot(operand, seen); });
}

/// Layouts chosen for loop-carried tiles, by (loop number in program order, iter_arg).
using LoopLayouts = std::map<std::pair<unsigned, unsigned>, Attribute>;

class Assigner {
public:
  /// `carried`: layouts to carry loop values in; `observed` (optional) collects the layouts
  /// loop bodies yield that are stronger than the ones they are carried in.
  Assigner(func::FuncOp func, const LoopLayouts &carried, LoopLayouts *observed)
      : builder(func.getContext()), numWarps(numWarpsOf(func)),
        warpgroupMma(warpgroupMmaAllowed(func)), carried(carried), observed(observed) {
    // Attention-like chains (a dot's result feeding another dot) keep every row of a tile in
    // one warp, so that row statistics need no shared memory and the first dot's accumulator
    // is already the second dot's operand, register for register.
    func.walk([&](DotOp dot) {
      DenseSet<Value> seen;
      chainedDots |= derivesFromDot(dot.getA(), seen) || derivesFromDot(dot.getB(), seen);
    });
    // Vectors of 16 bytes of the narrowest element the kernel moves through memory.
    int64_t narrowest = 4;
    func.walk([&](Operation *op) {
      if (isa<LoadOp, StoreOp, AtomicRMWOp>(op))
        narrowest = std::min(narrowest, storageBytes(getPointeeType(
                                            getElementTypeOrSelf(op->getOperand(0).getType()))));
    });
    vector = static_cast<int>(16 / narrowest);
  }

  void assignBlock(Block &block) {
    for (Operation &op : llvm::make_early_inc_range(block))
      assignOp(&op);
  }

private:
  OpBuilder builder;
  int numWarps;
  int vector;
  bool warpgroupMma;
  bool chainedDots = false;
  const LoopLayouts &carried;
  LoopLayouts *observed;
  unsigned loopCount = 0;
  DenseMap<Operation *, unsigned> loopNumbers;

  Attribute defaultLayout(Type type) {
    return defaultBlockedLayout(builder.getContext(), cast<RankedTensorType>(type).getShape(),
                                numWarps, vector);
  }

  /// The mma layout for a dot of f16/bf16 into f32, with the warps split so that each warp's
  /// part of the accumulator is as square as possible (all along the rows in dot chains, and
  /// 16 rows a warp where Hopper's wgmma can compute it: whole warpgroups of 64 rows); null
  /// for other dots.
  Attribute tensorCoreLayout(Operation *op) {
    auto dot = dyn_cast<DotOp>(op);
    if (!dot)
      return {};
    Type in = dot.getA().getType().getElementType();
    if (!(in.isF16() || in.isBF16()) || !dot.getType().getElementType().isF32())
      return {};
    int64_t M = dot.getType().getDimSize(0), N = dot.getType().getDimSize(1);
    if ((chainedDots && M / numWarps >= 16) || (warpgroupMma && M == 16 * numWarps && numWarps % 4 == 0))
      return MmaEncodingAttr::get(op->getContext(), {static_cast<unsigned>(numWarps), 1});
    // Fewer rows than 16 a warp: warpgroups of 64 rows split the columns in slices of at least
    // 64 (wgmma's m64, as FA3 splits dQ = dS K between its two consumer warpgroups).
    if (warpgroupMma && numWarps % 4 == 0 && M % 64 == 0 && M < 16 * numWarps) {
      const unsigned wm = static_cast<unsigned>(M / 16), wn = static_cast<unsigned>(numWarps) / wm;
      if (N / wn >= 64)
        return MmaEncodingAttr::get(op->getContext(), {wm, wn});
    }
    unsigned bestM = 0;
    double bestSkew = 1e30;
    for (unsigned wm = 1; wm <= static_cast<unsigned>(numWarps); wm *= 2) {
      unsigned wn = numWarps / wm;
      if (M / wm < 16 || N / wn < 8)
        continue;
      double skew = std::abs(std::log2(double(M / wm)) - std::log2(double(N / wn)));
      if (skew <= bestSkew) {
        bestSkew = skew;
        bestM = wm;
      }
    }
    if (bestM == 0)
      return {};
    return MmaEncodingAttr::get(op->getContext(), {bestM, static_cast<unsigned>(numWarps) / bestM});
  }

  void setLayout(Value value, Attribute encoding) {
    value.setType(withEncoding(value.getType(), encoding));
  }

  /// Make `operand` (if it is a tile) arrive in `encoding`.
  void require(OpOperand &operand, Attribute encoding) {
    Value value = operand.get();
    if (!value || !isTile(value.getType()) || encodingOf(value) == encoding)
      return;
    builder.setInsertionPoint(operand.getOwner());
    operand.set(ConvertLayoutOp::create(builder, value.getLoc(),
                                        withEncoding(value.getType(), encoding), value));
  }

  void requireAll(Operation *op, Attribute encoding) {
    for (OpOperand &operand : op->getOpOperands())
      require(operand, encoding);
  }

  void assignConstant(arith::ConstantOp op) {
    auto type = withEncoding(op.getType(), defaultLayout(op.getType()));
    auto value = cast<DenseElementsAttr>(op.getValue()).reshape(type);
    builder.setInsertionPoint(op);
    op.replaceAllUsesWith(arith::ConstantOp::create(builder, op.getLoc(), type, value).getResult());
    op.erase();
  }

  void assignYield(scf::YieldOp yield) {
    Operation *parent = yield->getParentOp();
    for (OpOperand &operand : yield->getOpOperands()) {
      unsigned i = operand.getOperandNumber();
      if (!isTile(operand.get().getType()))
        continue;
      if (auto loop = dyn_cast<scf::ForOp>(parent)) {
        Attribute inLoop = encodingOf(loop.getRegionIterArgs()[i]), yielded = encodingOf(operand.get());
        if (observed && strength(yielded) > strength(inLoop))
          (*observed)[{loopNumbers.at(loop), i}] = yielded;
        require(operand, inLoop);
      } else if (auto branch = dyn_cast<scf::IfOp>(parent)) {
        // The then-branch decides the result layouts; the else-branch follows.
        Value result = branch.getResult(i);
        if (yield->getParentRegion() == &branch.getThenRegion())
          setLayout(result, encodingOf(operand.get()));
        else
          require(operand, encodingOf(result));
      }
    }
  }

  void assignOp(Operation *op) {
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      unsigned number = loopNumbers[loop] = loopCount++;
      for (unsigned i = 0; i < loop.getNumRegionIterArgs(); ++i) {
        auto it = carried.find({number, i});
        if (it != carried.end())
          require(loop.getInitArgsMutable()[i], it->second);
        Type type = loop.getInitArgs()[i].getType();
        loop.getRegionIterArgs()[i].setType(type);
        loop.getResult(i).setType(type);
      }
      assignBlock(*loop.getBody());
      return;
    }
    if (auto branch = dyn_cast<scf::IfOp>(op)) {
      assignBlock(branch.getThenRegion().front());
      if (!branch.getElseRegion().empty())
        assignBlock(branch.getElseRegion().front());
      return;
    }
    if (auto yield = dyn_cast<scf::YieldOp>(op))
      return assignYield(yield);
    if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      if (isTile(constant.getType()))
        assignConstant(constant);
      return;
    }
    if (auto store = dyn_cast<StoreOp>(op)) {
      if (isTile(store.getPtr().getType()))
        requireAll(op, encodingOf(store.getPtr()));
      return;
    }
    if (auto copy = dyn_cast<AsyncCopyOp>(op)) {
      require(copy.getMaskMutable(), encodingOf(copy.getPtr()));
      return;
    }
    if (op->getNumResults() == 0 || !isTile(op->getResult(0).getType()))
      return;

    Value result = op->getResult(0);
    if (auto reduce = dyn_cast<ReduceOp>(op)) {
      setLayout(result, SliceEncodingAttr::get(op->getContext(), reduce.getAxis(),
                                               encodingOf(reduce.getSrc())));
    } else if (auto expand = dyn_cast<ExpandDimsOp>(op)) {
      auto slice = dyn_cast<SliceEncodingAttr>(encodingOf(expand.getSrc()));
      if (slice && slice.getDim() == expand.getAxis()) {
        setLayout(result, slice.getParent());
      } else {
        Attribute layout = defaultLayout(result.getType());
        setLayout(result, layout);
        require(op->getOpOperand(0),
                SliceEncodingAttr::get(op->getContext(), expand.getAxis(), layout));
      }
    } else if (isa<BroadcastOp>(op) && isa_and_present<MmaEncodingAttr>(encodingOf(op->getOperand(0)))) {
      setLayout(result, encodingOf(op->getOperand(0))); // its size-1 dims replicate in registers
    } else if (isa<BroadcastOp>(op)) {
      Attribute layout = defaultLayout(result.getType());
      setLayout(result, layout);
      require(op->getOpOperand(0), layout);
    } else if (auto trans = dyn_cast<TransOp>(op)) {
      Attribute layout = defaultLayout(result.getType());
      setLayout(result, layout);
      require(op->getOpOperand(0), transposedSourceLayout(layout, trans.getOrder()));
    } else if (isa<ReshapeOp, MakeRangeOp, SplatOp, BlockLoadOp, ConvertLayoutOp>(op)) {
      if (!encodingOf(result))
        setLayout(result, defaultLayout(result.getType()));
    } else if (auto mma = tensorCoreLayout(op)) {
      // Tensor-core dot: accumulators in the mma layout, operands in its fragments.
      setLayout(result, mma);
      MLIRContext *context = op->getContext();
      require(op->getOpOperand(0), DotOperandEncodingAttr::get(context, 0, mma));
      require(op->getOpOperand(1), DotOperandEncodingAttr::get(context, 1, mma));
      require(op->getOpOperand(2), mma);
    } else if (isa<LoadOp, DotOp>(op)) {
      Attribute layout = defaultLayout(result.getType());
      setLayout(result, layout);
      for (OpOperand &operand : op->getOpOperands())
        if (!isa<DotOp>(op) || operand.getOperandNumber() == 2) // dot reads a and b from shared memory
          require(operand, layout);
    } else if (auto atomic = dyn_cast<AtomicRMWOp>(op)) {
      // In the values' layout when it is costlier to leave (a dot's accumulator added into
      // memory): the pointers are index math, rebuilt in any layout for free.
      Attribute layout = encodingOf(atomic.getPtr());
      if (Attribute values = encodingOf(atomic.getValue()); values && strength(values) > strength(layout))
        layout = values;
      setLayout(result, layout);
      requireAll(op, layout);
    } else {
      // Elementwise: the operand whose layout is costliest to leave decides, then the first.
      Attribute layout;
      for (Value operand : op->getOperands())
        if (isTile(operand.getType()) && encodingOf(operand) &&
            (!layout || strength(encodingOf(operand)) > strength(layout)))
          layout = encodingOf(operand); // null for tiles from outside a kernel
      if (!layout)
        layout = defaultLayout(result.getType());
      requireAll(op, layout);
      for (Value r : op->getResults())
        setLayout(r, layout);
    }
  }
};

struct TileAssignLayoutsPass : tessera::impl::TileAssignLayoutsBase<TileAssignLayoutsPass> {
  void runOnOperation() override {
    getOperation().walk([](func::FuncOp func) {
      if (func.isExternal())
        return;
      // Loops carry a value in the layout its body yields it in when that one is costlier to
      // leave (an accumulator in its mma layout): found by assigning copies until no loop
      // asks for a new one.
      LoopLayouts carried;
      for (int round = 0; round < 4; ++round) {
        auto trial = cast<func::FuncOp>(func->clone());
        LoopLayouts observed = carried;
        Assigner(trial, carried, &observed).assignBlock(trial.getBody().front());
        trial->erase();
        if (observed == carried)
          break;
        carried = std::move(observed);
      }
      Assigner(func, carried, nullptr).assignBlock(func.getBody().front());
    });
  }
};

} // namespace
