// tile-pipeline-loops: cp.async and TMA rings for tensor-core operands (see Passes.td).
#include "tessera/compiler/Dialect/Tile/Layouts.h"
#include "tessera/compiler/Layout/SwizzledTile.h"
#include "tessera/compiler/Transforms/ConstantMemory.h"
#include "tessera/compiler/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace tessera {
#define GEN_PASS_DEF_TILEPIPELINELOOPS
#include "tessera/compiler/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera::tile;

namespace {

/// Whether `value` is computed in `body` by pure ops from values defined outside the loop, the
/// induction variable and carried values that are themselves index math from one iteration to
/// the next (a pointer advanced by a step, not an accumulator). With `constants`, also by
/// loads of single values from memory the kernel never writes (a block index read from a
/// table, as block-sparse attention does).
bool isIndexMath(Value value, Block *body, DenseSet<Value> &seen, const ConstantMemory *constants) {
  if (!seen.insert(value).second)
    return true; // a carried value's own recurrence
  if (auto arg = dyn_cast<BlockArgument>(value))
    return arg.getOwner() != body || arg.getArgNumber() == 0 ||
           isIndexMath(body->getTerminator()->getOperand(arg.getArgNumber() - 1), body, seen, constants);
  Operation *def = value.getDefiningOp();
  if (def->getBlock() != body)
    return !body->getParentOp()->isAncestor(def);
  bool indexLoad = constants && constants->isIndexLoad(def);
  if ((!isPure(def) && !indexLoad) || def->getNumRegions() != 0)
    return false;
  return llvm::all_of(def->getOperands(), [&](Value v) { return isIndexMath(v, body, seen, constants); });
}

bool isIndexMath(Value value, Block *body, const ConstantMemory *constants = nullptr) {
  DenseSet<Value> seen;
  return isIndexMath(value, body, seen, constants);
}

/// `value` recomputed at the builder's position with the body's arguments replaced by `args`.
/// Loads in it (of block indices) read only where `active`: an iteration past the end may
/// point past the table.
Value recompute(OpBuilder &b, Value value, IRMapping &map, Block *body, ArrayRef<Value> args, Value active = {}) {
  if (Value mapped = map.lookupOrNull(value))
    return mapped;
  if (auto arg = dyn_cast<BlockArgument>(value))
    return arg.getOwner() == body ? args[arg.getArgNumber()] : value;
  Operation *def = value.getDefiningOp();
  if (def->getBlock() != body)
    return value;
  for (Value operand : def->getOperands())
    map.map(operand, recompute(b, operand, map, body, args, active));
  auto load = dyn_cast<LoadOp>(def);
  if (!load) {
    b.clone(*def, map);
    return map.lookup(value);
  }
  Location loc = load.getLoc();
  Value mask = load.getMask() ? arith::AndIOp::create(b, loc, map.lookup(load.getMask()), active).getResult() : active;
  Value other = load.getOther() ? map.lookup(load.getOther())
                                : arith::ConstantOp::create(b, loc, b.getZeroAttr(load.getType())).getResult();
  Value early = LoadOp::create(b, loc, map.lookup(load.getPtr()), mask, other);
  map.map(value, early);
  return early;
}

/// The body's arguments one iteration later, as far as addresses need them: the induction
/// variable plus a step, carried index math as the body yields it from `args`. Other carried
/// values (accumulators) keep `args`' value: no staged address depends on them (isIndexMath),
/// and recomputing them would copy the body's loads and dots (and its inner loops) outside it.
SmallVector<Value> nextIteration(OpBuilder &b, scf::ForOp loop, Block *body, ArrayRef<Value> args) {
  auto yield = cast<scf::YieldOp>(body->getTerminator());
  IRMapping map;
  SmallVector<Value> next{arith::AddIOp::create(b, loop.getLoc(), args[0], loop.getStep())};
  for (auto [i, yielded] : llvm::enumerate(yield.getOperands()))
    next.push_back(isIndexMath(yielded, body) ? recompute(b, yielded, map, body, args) : args[i + 1]);
  return next;
}

/// Start copying `load`'s tile for the iteration whose body arguments are `args` into
/// `buffer[slot]`, masked off unless `active`; `map` holds what that iteration's copies
/// already recomputed (a block index read once for all of them).
void copyAsync(OpBuilder &b, LoadOp load, Block *body, ArrayRef<Value> args, Value active,
               Value buffer, Value slot, IRMapping &map) {
  Location loc = load.getLoc();
  Value ptr = recompute(b, load.getPtr(), map, body, args, active);
  auto maskType = cast<RankedTensorType>(getBoolLike(ptr.getType()));
  Value mask = SplatOp::create(b, loc, maskType, active);
  if (load.getMask())
    mask = arith::AndIOp::create(b, loc, recompute(b, load.getMask(), map, body, args, active), mask);
  AsyncCopyOp::create(b, loc, ptr, mask, buffer, slot);
}

bool isDotOperand(OpOperand &use) { return isa<DotOp>(use.getOwner()) && use.getOperandNumber() < 2; }

/// A 2-D transpose whose every use is a dot operand: read from the ring transposed.
bool isTransposedDotOperand(OpOperand &use) {
  auto trans = dyn_cast<TransOp>(use.getOwner());
  return trans && trans.getOrder().size() == 2 && trans.getOrder()[0] == 1 && !trans->use_empty() &&
         llvm::all_of(trans->getUses(), isDotOperand);
}

bool feedsOnlyDots(Operation *load) {
  return !load->use_empty() && llvm::all_of(load->getUses(), [](OpOperand &use) {
    return isDotOperand(use) || isTransposedDotOperand(use);
  });
}

/// Loads of the loop body worth staging: tiles of 16-bit elements used only as dot operands
/// (directly or transposed), addressed by index math (block indices read from constant memory
/// included), with other = 0 (cp.async zero-fills masked lanes).
SmallVector<LoadOp> operandLoads(scf::ForOp loop, const ConstantMemory &constants) {
  Block *body = loop.getBody();
  SmallVector<LoadOp> loads;
  for (Operation &op : *body) {
    auto load = dyn_cast<LoadOp>(op);
    auto type = load ? dyn_cast<RankedTensorType>(load.getType()) : nullptr;
    if (!type || type.getRank() != 2 || type.getElementType().getIntOrFloatBitWidth() != 16)
      continue;
    bool zeroOther = !load.getOther() || matchPattern(load.getOther(), m_AnyZeroFloat()) ||
                     matchPattern(load.getOther(), m_Zero());
    if (feedsOnlyDots(load) && zeroOther && isIndexMath(load.getPtr(), body, &constants) &&
        (!load.getMask() || isIndexMath(load.getMask(), body, &constants)))
      loads.push_back(load);
  }
  return loads;
}

/// The make_block_ptr a block pointer comes from, through advances and the carried values of
/// loops that yield them advanced; null where that cannot be told.
MakeBlockPtrOp blockPointerOrigin(Value ptr) {
  auto throughAdvances = [](Value v) {
    while (auto advance = v.getDefiningOp<AdvanceOp>())
      v = advance.getPtr();
    return v;
  };
  for (;;) {
    ptr = throughAdvances(ptr);
    if (auto make = ptr.getDefiningOp<MakeBlockPtrOp>())
      return make;
    auto arg = dyn_cast<BlockArgument>(ptr);
    auto loop = arg ? dyn_cast<scf::ForOp>(arg.getOwner()->getParentOp()) : scf::ForOp();
    if (!loop || arg.getArgNumber() == 0 ||
        throughAdvances(loop.getBody()->getTerminator()->getOperand(arg.getArgNumber() - 1)) != arg)
      return {};
    ptr = loop.getInitArgs()[arg.getArgNumber() - 1];
  }
}

/// A number the launcher knows: an integer kernel argument (maybe widened), or a constant.
std::optional<std::pair<int64_t, int64_t>> launchValue(Value value, func::FuncOp func) {
  if (auto widened = value.getDefiningOp<arith::ExtSIOp>())
    value = widened.getIn();
  APInt constant;
  if (matchPattern(value, m_ConstantInt(&constant)))
    return std::make_pair(int64_t(-1), constant.getSExtValue());
  auto arg = dyn_cast<BlockArgument>(value);
  if (arg && arg.getOwner() == &func.getBody().front())
    return std::make_pair(int64_t(arg.getArgNumber()), int64_t(0));
  return std::nullopt;
}

/// The kernel's TMA tensor maps: one `!tile.tensor_map` argument per tensor and block shape
/// the tensor memory accelerator copies, added when first needed.
class TensorMaps {
public:
  explicit TensorMaps(func::FuncOp func) : func(func) {}

  /// The map `load` is copied through, or null where the TMA cannot copy it: the kernel does
  /// not allow TMA, the block is not a 2-D tile of 16-bit elements of at most 256 rows with
  /// swizzled rows (once unit dimensions are dropped), or its tensor is not a kernel argument
  /// (16-byte aligned) whose shape and strides (16-byte multiples, the last 1) the launcher
  /// knows.
  Value mapFor(BlockLoadOp load) {
    auto block = load.getPtr().getType().getBlockType();
    std::optional<BlockTile> tile = blockTile(block);
    if (!tmaAllowed(func) || load.getPadding() != Padding::zero || !tile ||
        block.getElementType().getIntOrFloatBitWidth() != 16 || tile->tile.getDimSize(0) > 256)
      return {};
    const int64_t bytes = 2;
    tessera::layout::SwizzledTile stored(tile->tile.getDimSize(0), tile->tile.getDimSize(1), bytes);
    MakeBlockPtrOp origin = blockPointerOrigin(load.getPtr());
    if (!stored.swizzled || !origin)
      return {};
    auto base = dyn_cast<BlockArgument>(origin.getBase());
    if (!base || base.getOwner() != &func.getBody().front() || divisibility(base.getArgNumber()) % 16)
      return {};
    // The map's dimensions in tile->mapOrder; one box per 128-byte-wide atom of the stage,
    // swizzled as the atom is.
    SmallVector<int64_t> shapeArgs, shapeValues, strideArgs, strideValues, box;
    for (int64_t d : tile->mapOrder) {
      auto extent = launchValue(origin.getShape()[d], func);
      auto stride = launchValue(origin.getStrides()[d], func);
      if (!extent || !stride)
        return {};
      auto [arg, value] = *stride;
      bool fits = d == tile->colDim ? arg < 0 && value == 1
                                    : (arg < 0 ? value * bytes % 16 == 0 : divisibility(arg) * bytes % 16 == 0);
      if (!fits)
        return {};
      shapeArgs.push_back(extent->first);
      shapeValues.push_back(extent->second);
      strideArgs.push_back(arg);
      strideValues.push_back(value);
      box.push_back(d == tile->rowDim ? tile->tile.getDimSize(0) : d == tile->colDim ? stored.atomColumns : 1);
    }
    Builder b(func.getContext());
    NamedAttribute fields[] = {
        b.getNamedAttr("pointer", b.getI64IntegerAttr(base.getArgNumber())),
        b.getNamedAttr("element_bytes", b.getI64IntegerAttr(bytes)),
        b.getNamedAttr("shape_args", b.getDenseI64ArrayAttr(shapeArgs)),
        b.getNamedAttr("shape_values", b.getDenseI64ArrayAttr(shapeValues)),
        b.getNamedAttr("stride_args", b.getDenseI64ArrayAttr(strideArgs)),
        b.getNamedAttr("stride_values", b.getDenseI64ArrayAttr(strideValues)),
        b.getNamedAttr("box", b.getDenseI64ArrayAttr(box)),
        b.getNamedAttr("swizzle_bytes", b.getI64IntegerAttr(stored.atomColumns * bytes)),
    };
    // Loads of the same tensor in the same boxes (K in two loops) share one map.
    DictionaryAttr map = b.getDictionaryAttr(fields);
    if (Value arg = maps.lookup(map))
      return arg;
    unsigned index = func.getNumArguments();
    if (failed(func.insertArgument(index, TensorMapType::get(func.getContext()),
                                   b.getDictionaryAttr(b.getNamedAttr(kTensorMapAttrName, map)), func.getLoc())))
      return {};
    return maps[map] = func.getArgument(index);
  }

private:
  int64_t divisibility(unsigned arg) {
    auto attr = func.getArgAttrOfType<IntegerAttr>(arg, "tile.divisibility");
    return attr ? attr.getInt() : 1;
  }

  func::FuncOp func;
  DenseMap<DictionaryAttr, Value> maps;
};

/// A block load the TMA copies into a ring, with its map, and the op whose result the dots
/// read: the load itself, or the reshape that drops its unit dimensions.
struct TmaLoad {
  BlockLoadOp load;
  Value map;
  Operation *operand;
};

/// Block loads of the loop body the TMA copies into rings (see TensorMaps::mapFor): used only
/// as dot operands (a block with unit dimensions through a reshape to its 2-D tile), addressed
/// by index math.
SmallVector<TmaLoad> tmaLoads(scf::ForOp loop, const ConstantMemory &constants, TensorMaps &maps) {
  SmallVector<TmaLoad> loads;
  for (Operation &op : *loop.getBody()) {
    auto load = dyn_cast<BlockLoadOp>(op);
    if (!load || !isIndexMath(load.getPtr(), loop.getBody(), &constants))
      continue;
    Operation *operand = load;
    if (load.getType().getRank() != 2) {
      auto reshape = load->hasOneUse() ? dyn_cast<ReshapeOp>(*load->user_begin()) : ReshapeOp();
      std::optional<BlockTile> tile = blockTile(load.getType());
      if (!reshape || !tile || reshape.getType().getShape() != tile->tile.getShape())
        continue;
      operand = reshape;
    }
    if (feedsOnlyDots(operand))
      if (Value map = maps.mapFor(load))
        loads.push_back({load, map, operand});
  }
  return loads;
}

/// Replaces one use of a staged load with a read of `buffer[slot]` at `b`; a transpose using
/// it becomes a transposed read.
void readFromRing(OpBuilder &b, OpOperand &use, Value buffer, Value slot) {
  Location loc = use.get().getLoc();
  if (auto trans = dyn_cast<TransOp>(use.getOwner())) {
    auto read = SharedLoadOp::create(b, loc, trans.getType(), buffer, slot, /*transposed=*/true);
    trans.getResult().replaceAllUsesWith(read.getResult());
    trans.erase();
  } else {
    use.set(SharedLoadOp::create(b, loc, use.get().getType(), buffer, slot, /*transposed=*/false));
  }
}

/// Where stage `slot` of the rings is filled for the iteration whose body arguments are
/// `args` (masked off unless `active`): cp.async copies, committed as one group, and TMA loads
/// arriving on the stage's barrier.
struct Rings {
  SmallVector<LoadOp> copied;
  SmallVector<Value> copyBuffers;
  SmallVector<TmaLoad> tma;
  SmallVector<Value> tmaBuffers;
  Value barriers;

  void fill(OpBuilder &b, Location loc, Block *body, ArrayRef<Value> args, Value active, Value slot) {
    IRMapping map;
    for (auto [load, buffer] : llvm::zip(copied, copyBuffers))
      copyAsync(b, load, body, args, active, buffer, slot, map);
    if (!copied.empty())
      AsyncCommitOp::create(b, loc);
    for (auto [load, buffer] : llvm::zip(tma, tmaBuffers))
      TmaLoadOp::create(b, loc, load.map, recompute(b, load.load.getPtr(), map, body, args, active), buffer, slot,
                        barriers, active);
  }
};

void pipeline(scf::ForOp loop, int64_t stages, const ConstantMemory &constants, TensorMaps &maps) {
  Rings rings{operandLoads(loop, constants), {}, tmaLoads(loop, constants, maps), {}, {}};
  if (rings.copied.empty() && rings.tma.empty())
    return;
  Block *body = loop.getBody();
  Location loc = loop.getLoc();
  OpBuilder b(loop);
  auto constant = [&](OpBuilder &at, int64_t v) { return arith::ConstantOp::create(at, loc, at.getI32IntegerAttr(v)); };
  auto ring = [&](Type tile) {
    return SharedAllocOp::create(b, loc, SharedBufferType::get(b.getContext(), stages, cast<RankedTensorType>(tile)))
        .getResult();
  };

  // The rings (and the TMA's barriers, one a stage), and the first stages - 1 iterations
  // filled before the loop.
  for (LoadOp load : rings.copied)
    rings.copyBuffers.push_back(ring(load.getType()));
  for (TmaLoad &load : rings.tma)
    rings.tmaBuffers.push_back(ring(load.operand->getResult(0).getType()));
  if (!rings.tma.empty()) {
    rings.barriers = ring(RankedTensorType::get({1}, b.getI64Type()));
    InitBarriersOp::create(b, loc, rings.barriers, b.getI32IntegerAttr(int32_t(rings.tma.size())));
  }
  SmallVector<Value> args{loop.getLowerBound()};
  llvm::append_range(args, loop.getInitArgs());
  for (int64_t s = 0; s < stages - 1; ++s) {
    if (s > 0)
      args = nextIteration(b, loop, body, args);
    Value active = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, args[0], loop.getUpperBound());
    rings.fill(b, loc, body, args, active, constant(b, s));
  }

  // In the body: wait for this iteration's stage (with a barrier: every thread is done with the
  // stage the previous iteration read), read it, refill that previous stage.
  Operation *first = rings.copied.empty() ? rings.tma.front().load.getOperation() : rings.copied.front();
  if (!rings.tma.empty() && rings.tma.front().load->isBeforeInBlock(first))
    first = rings.tma.front().load;
  OpBuilder at(first);
  Value iteration = arith::DivSIOp::create(at, loc, arith::SubIOp::create(at, loc, loop.getInductionVar(), loop.getLowerBound()),
                                           loop.getStep());
  Value slot = arith::RemSIOp::create(at, loc, iteration, constant(at, stages));
  Value refill = arith::RemSIOp::create(at, loc, arith::AddIOp::create(at, loc, iteration, constant(at, stages - 1)),
                                        constant(at, stages));
  if (!rings.tma.empty()) {
    // Stage s is filled once every `stages` iterations: this iteration's fill is its phase
    // iteration / stages.
    Value parity = arith::AndIOp::create(at, loc, arith::DivSIOp::create(at, loc, iteration, constant(at, stages)),
                                         constant(at, 1));
    WaitBarrierOp::create(at, loc, rings.barriers, slot, parity, /*sync=*/rings.copied.empty());
  }
  if (!rings.copied.empty())
    AsyncWaitOp::create(at, loc, at.getI32IntegerAttr(stages - 2));
  for (auto [load, buffer] : llvm::zip(rings.copied, rings.copyBuffers))
    for (OpOperand &use : llvm::make_early_inc_range(load->getUses()))
      readFromRing(at, use, buffer, slot);
  for (auto [load, buffer] : llvm::zip(rings.tma, rings.tmaBuffers))
    for (OpOperand &use : llvm::make_early_inc_range(load.operand->getUses()))
      readFromRing(at, use, buffer, slot);
  SmallVector<Value> ahead(body->getArguments().begin(), body->getArguments().end());
  for (int64_t s = 0; s < stages - 1; ++s)
    ahead = nextIteration(at, loop, body, ahead);
  Value active = arith::CmpIOp::create(at, loc, arith::CmpIPredicate::slt, ahead[0], loop.getUpperBound());
  rings.fill(at, loc, body, ahead, active, refill);
  for (LoadOp load : rings.copied)
    load.erase();
  for (TmaLoad &load : rings.tma) {
    if (load.operand != load.load.getOperation())
      load.operand->erase();
    load.load.erase();
  }

  // Nothing may still write the rings after the loop (every TMA load was for an iteration that
  // waited for it), and the CTA barrier keeps later fills of their memory from landing under a
  // warp still reading the last stage. The barriers are retired: an outer loop may run this
  // one again and initialize them anew.
  b.setInsertionPointAfter(loop);
  AsyncWaitOp::create(b, loc, b.getI32IntegerAttr(0));
  if (rings.barriers)
    InvalBarriersOp::create(b, loc, rings.barriers);
}

/// With tile.invariant_operands_in_shared: a tile loaded outside any loop and used only as
/// dot operands inside loops is copied once into shared memory, and each dot reads it from
/// there (one k-step at a time): a 128x128 Q then takes no registers across the loop.
void stageInvariantOperands(func::FuncOp func) {
  SmallVector<LoadOp> loads;
  func.walk([&](LoadOp load) {
    auto type = dyn_cast<RankedTensorType>(load.getType());
    bool zeroOther = !load.getOther() || matchPattern(load.getOther(), m_AnyZeroFloat()) ||
                     matchPattern(load.getOther(), m_Zero());
    bool outsideLoops = !load->getParentOfType<scf::ForOp>();
    bool dotsInLoops = !load->use_empty() && llvm::all_of(load->getUses(), [](OpOperand &use) {
      return use.getOwner()->getParentOfType<scf::ForOp>() && (isDotOperand(use) || isTransposedDotOperand(use));
    });
    if (type && type.getRank() == 2 && type.getElementType().getIntOrFloatBitWidth() == 16 && zeroOther &&
        outsideLoops && dotsInLoops)
      loads.push_back(load);
  });
  for (LoadOp load : loads) {
    OpBuilder b(load);
    Location loc = load.getLoc();
    auto type = cast<RankedTensorType>(load.getType());
    Value buffer = SharedAllocOp::create(b, loc, SharedBufferType::get(b.getContext(), 1, type));
    Value zero = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0));
    Value mask = load.getMask() ? load.getMask()
                                : arith::ConstantOp::create(b, loc, DenseElementsAttr::get(
                                      cast<ShapedType>(getBoolLike(load.getPtr().getType())), true)).getResult();
    AsyncCopyOp::create(b, loc, load.getPtr(), mask, buffer, zero);
    AsyncCommitOp::create(b, loc);
    AsyncWaitOp::create(b, loc, b.getI32IntegerAttr(0));
    for (OpOperand &use : llvm::make_early_inc_range(load->getUses())) {
      OpBuilder at(use.getOwner());
      readFromRing(at, use, buffer, zero);
    }
    load.erase();
  }
}

struct TilePipelineLoopsPass : tessera::impl::TilePipelineLoopsBase<TilePipelineLoopsPass> {
  void runOnOperation() override {
    getOperation().walk([](func::FuncOp func) {
      if (func->hasAttr("tile.invariant_operands_in_shared"))
        stageInvariantOperands(func);
      auto attr = func->getAttrOfType<IntegerAttr>("tile.num_stages");
      int64_t stages = attr ? attr.getInt() : 3;
      if (stages < 2)
        return;
      const ConstantMemory constants(func); // pipelining adds no global writes
      TensorMaps maps(func);
      SmallVector<scf::ForOp> loops;
      func.walk([&](scf::ForOp loop) { loops.push_back(loop); });
      for (scf::ForOp loop : loops)
        pipeline(loop, stages, constants, maps);
    });
  }
};

} // namespace
