// tile-remove-layout-conversions (see Passes.td).
#include "tessera/compiler/Dialect/Tile/Layouts.h"
#include "tessera/compiler/Transforms/Passes.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace tessera {
#define GEN_PASS_DEF_TILEREMOVELAYOUTCONVERSIONS
#include "tessera/compiler/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera::tile;

namespace {

constexpr int kMaxDepth = 8;

/// The layout operand `index` of `op` needs for `op`'s result to be in `layout`, when `op` is
/// rebuilt in that layout; null when that is not a simple rule.
Attribute operandLayoutFor(Operation *op, unsigned index, Attribute layout) {
  if (isa<BroadcastOp>(op)) // the same layout on the smaller shape (its size-1 dims replicate)
    return isa<BlockedEncodingAttr, MmaEncodingAttr>(layout) ? layout : Attribute();
  if (auto expand = dyn_cast<ExpandDimsOp>(op))
    return SliceEncodingAttr::get(op->getContext(), expand.getAxis(), layout);
  return layout; // elementwise
}

bool isCheapElementwise(Operation *op) {
  return (op->hasTrait<OpTrait::Elementwise>() || isa<AddPtrOp>(op)) && isPure(op) &&
         op->getNumResults() == 1;
}

/// Whether `value` can be rebuilt in `layout` from ranges, splats, constants and reads of
/// shared memory (a stage reads into any layout: a row of LSEs straight into the slice of the
/// scores it is broadcast over).
bool canRebuild(Value value, Attribute layout, int depth) {
  Operation *op = value.getDefiningOp();
  if (!op || depth > kMaxDepth || !layout)
    return false;
  if (isa<MakeRangeOp, SplatOp, arith::ConstantOp, SharedLoadOp>(op))
    return true;
  if (!isa<BroadcastOp, ExpandDimsOp>(op) && !isCheapElementwise(op))
    return false;
  for (auto [i, operand] : llvm::enumerate(op->getOperands()))
    if (isa<RankedTensorType>(operand.getType()) &&
        !canRebuild(operand, operandLayoutFor(op, i, layout), depth + 1))
      return false;
  return true;
}

Value rebuild(PatternRewriter &rewriter, Value value, Attribute layout) {
  Operation *op = value.getDefiningOp();
  auto type = withEncoding(value.getType(), layout);
  if (type == value.getType())
    return value;
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  if (auto constant = dyn_cast<arith::ConstantOp>(op))
    return arith::ConstantOp::create(rewriter, op->getLoc(), type,
                                     cast<DenseElementsAttr>(constant.getValue()).reshape(type));
  SmallVector<Value> operands;
  for (auto [i, operand] : llvm::enumerate(op->getOperands()))
    operands.push_back(isa<RankedTensorType>(operand.getType())
                           ? rebuild(rewriter, operand, operandLayoutFor(op, i, layout))
                           : operand);
  OperationState state(op->getLoc(), op->getName(), operands, TypeRange{type}, op->getAttrs());
  return rewriter.create(state)->getResult(0);
}

/// convert_layout(x) -> x rebuilt in the target layout, when x is cheap index math.
struct RebuildInTargetLayout : OpRewritePattern<ConvertLayoutOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConvertLayoutOp op, PatternRewriter &rewriter) const override {
    Attribute layout = op.getType().getEncoding();
    if (!canRebuild(op.getSrc(), layout, 0))
      return failure();
    rewriter.replaceOp(op, rebuild(rewriter, op.getSrc(), layout));
    return success();
  }
};

/// convert(broadcast(x)) -> broadcast(convert(x)), and the same through expand_dims: the
/// conversion moves to the smaller tile (a row of LSEs, not the [keys, queries] tile it is
/// broadcast to), where it costs a fraction of the shared memory and often folds away.
struct ConvertBeforeBroadcast : OpRewritePattern<ConvertLayoutOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConvertLayoutOp op, PatternRewriter &rewriter) const override {
    Operation *grow = op.getSrc().getDefiningOp();
    if (!grow || !isa<BroadcastOp, ExpandDimsOp>(grow) || !grow->hasOneUse())
      return failure();
    Attribute layout = operandLayoutFor(grow, 0, op.getType().getEncoding());
    if (!layout)
      return failure();
    Value source = grow->getOperand(0);
    rewriter.setInsertionPoint(grow);
    Value converted = ConvertLayoutOp::create(rewriter, op.getLoc(), withEncoding(source.getType(), layout), source);
    OperationState state(grow->getLoc(), grow->getName(), ValueRange{converted}, TypeRange{op.getType()},
                         grow->getAttrs());
    rewriter.replaceOp(op, rewriter.create(state)->getResult(0));
    return success();
  }
};

/// elementwise(convert(x), ...) -> convert(elementwise(x, ...)) when every other tile operand
/// is cheap to rebuild in x's layout: conversions move toward the stores, where
/// StoreInValueLayout can drop them.
struct SinkConversionThroughElementwise : RewritePattern {
  SinkConversionThroughElementwise(MLIRContext *context)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, context) {}
  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rewriter) const override {
    if (!isCheapElementwise(op) || !isa<RankedTensorType>(op->getResult(0).getType()))
      return failure();
    Attribute source;
    for (Value operand : op->getOperands())
      if (auto convert = operand.getDefiningOp<ConvertLayoutOp>()) {
        source = convert.getSrc().getType().getEncoding();
        break;
      }
    if (!source)
      return failure();
    SmallVector<Value> operands;
    for (Value operand : op->getOperands()) {
      auto convert = operand.getDefiningOp<ConvertLayoutOp>();
      if (convert && convert.getSrc().getType().getEncoding() == source) {
        operands.push_back(convert.getSrc());
      } else if (!isa<RankedTensorType>(operand.getType())) {
        operands.push_back(operand);
      } else if (canRebuild(operand, source, 0)) {
        operands.push_back(rebuild(rewriter, operand, source));
      } else {
        return failure();
      }
    }
    Type resultType = op->getResult(0).getType();
    OperationState state(op->getLoc(), op->getName(), operands,
                         TypeRange{withEncoding(resultType, source)}, op->getAttrs());
    Value inSource = rewriter.create(state)->getResult(0);
    rewriter.replaceOpWithNewOp<ConvertLayoutOp>(op, resultType, inSource);
    return success();
  }
};

/// store(ptr, convert(v), mask) -> store in v's layout when the pointers and mask are cheap to
/// rebuild there: the value (a matmul's accumulator, say) never goes through shared memory.
/// Not where the kernel stages its stores: there the conversion buys 16-byte stores.
struct StoreInValueLayout : OpRewritePattern<StoreOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(StoreOp op, PatternRewriter &rewriter) const override {
    auto convert = op.getValue().getDefiningOp<ConvertLayoutOp>();
    if (!convert || storesStaged(op))
      return failure();
    Attribute layout = convert.getSrc().getType().getEncoding();
    if (!canRebuild(op.getPtr(), layout, 0) || (op.getMask() && !canRebuild(op.getMask(), layout, 0)))
      return failure();
    Value ptr = rebuild(rewriter, op.getPtr(), layout);
    Value mask = op.getMask() ? rebuild(rewriter, op.getMask(), layout) : Value();
    replaceKeepingDiscardableAttrs<StoreOp>(rewriter, op, ptr, convert.getSrc(), mask);
    return success();
  }
};

/// convert(shared_load) -> shared_load in the target layout: a stage of shared memory reads
/// into any layout (ldmatrix for tensor-core fragments).
struct SharedLoadInTargetLayout : OpRewritePattern<ConvertLayoutOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConvertLayoutOp op, PatternRewriter &rewriter) const override {
    auto load = op.getSrc().getDefiningOp<SharedLoadOp>();
    if (!load)
      return failure();
    rewriter.setInsertionPoint(load);
    rewriter.replaceOp(op, SharedLoadOp::create(rewriter, load.getLoc(), op.getType(), load.getBuffer(),
                                                load.getSlot(), load.getTransposed(), load.getWhole()));
    return success();
  }
};

/// convert(trans(convert(x))) into 16-bit tensor-core fragments -> trans(x) straight into
/// them: x goes to shared memory once and ldmatrix.trans reads the fragments (a dot of a
/// transposed accumulator, dQ = dS K from dS^T, takes one round trip instead of two).
struct TransposeIntoDotOperand : OpRewritePattern<ConvertLayoutOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ConvertLayoutOp op, PatternRewriter &rewriter) const override {
    auto trans = op.getSrc().getDefiningOp<TransOp>();
    if (!trans || trans.getType().getRank() != 2 || !trans->hasOneUse())
      return failure();
    Value src = trans.getSrc();
    if (auto inner = src.getDefiningOp<ConvertLayoutOp>())
      src = inner.getSrc();
    if (!readsWithLdmatrix(op.getType(), cast<RankedTensorType>(src.getType())))
      return failure();
    rewriter.replaceOpWithNewOp<TransOp>(op, op.getType(), src, trans.getOrder());
    return success();
  }
};

/// A loop-carried tile that the body only ever converts to layout L, and that it yields as a
/// conversion from L, is carried in L: the conversions move out of the loop (the accumulator
/// of a matmul stays in its mma layout from the first iteration to the last).
struct CarryInInnerLayout : OpRewritePattern<scf::ForOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(scf::ForOp loop, PatternRewriter &rewriter) const override {
    auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
    for (unsigned i = 0; i < loop.getNumRegionIterArgs(); ++i) {
      BlockArgument arg = loop.getRegionIterArgs()[i];
      auto fromInner = yield.getOperand(i).getDefiningOp<ConvertLayoutOp>();
      if (!fromInner || !isa<RankedTensorType>(arg.getType()))
        continue;
      Type inner = fromInner.getSrc().getType();
      bool onlyConvertedToInner = llvm::all_of(arg.getUsers(), [&](Operation *user) {
        auto convert = dyn_cast<ConvertLayoutOp>(user);
        return convert && convert.getType() == inner;
      });
      if (!onlyConvertedToInner)
        continue;
      Location loc = loop.getLoc();
      rewriter.setInsertionPoint(loop);
      SmallVector<Value> inits(loop.getInitArgs());
      inits[i] = ConvertLayoutOp::create(rewriter, loc, inner, inits[i]);
      auto carried = scf::ForOp::create(rewriter, loc, loop.getLowerBound(), loop.getUpperBound(),
                                        loop.getStep(), inits);
      Block *body = carried.getBody();
      if (!body->empty())
        rewriter.eraseOp(&body->back());
      rewriter.setInsertionPointToStart(body);
      SmallVector<Value> arguments(body->getArguments());
      arguments[i + 1] = ConvertLayoutOp::create(rewriter, loc, arg.getType(), body->getArgument(i + 1));
      Value yielded = fromInner.getSrc();
      rewriter.mergeBlocks(loop.getBody(), body, arguments);
      auto newYield = cast<scf::YieldOp>(body->getTerminator());
      rewriter.modifyOpInPlace(newYield, [&] { newYield->setOperand(i, yielded); });
      rewriter.setInsertionPointAfter(carried);
      SmallVector<Value> results(carried.getResults());
      results[i] = ConvertLayoutOp::create(rewriter, loc, loop.getResult(i).getType(), results[i]);
      rewriter.replaceOp(loop, results);
      return success();
    }
    return failure();
  }
};

struct TileRemoveLayoutConversionsPass
    : tessera::impl::TileRemoveLayoutConversionsBase<TileRemoveLayoutConversionsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<RebuildInTargetLayout, CarryInInnerLayout, SinkConversionThroughElementwise,
                 StoreInValueLayout, SharedLoadInTargetLayout, ConvertBeforeBroadcast, TransposeIntoDotOperand>(
        &getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
