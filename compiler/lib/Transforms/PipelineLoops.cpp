// tile-pipeline-loops: cp.async rings for tensor-core operands (see Passes.td).
#include "tessera/compiler/Dialect/Tile/Layouts.h"
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

/// The kernel argument a pointer (or tile of pointers, or block pointer) derives from, or null
/// where it cannot be told (a select between pointers, a pointer carried by a loop).
Value pointerRoot(Value ptr) {
  while (Operation *def = ptr.getDefiningOp()) {
    Value next;
    for (Value operand : def->getOperands())
      if (isa<PointerType, BlockPointerType>(getElementTypeOrSelf(operand.getType()))) {
        if (next)
          return {};
        next = operand;
      }
    if (!next)
      return {};
    ptr = next;
  }
  auto arg = cast<BlockArgument>(ptr);
  return isa<func::FuncOp>(arg.getOwner()->getParentOp()) ? ptr : Value();
}

/// The kernel arguments whose memory the kernel never writes, found once per kernel: loading
/// from them early, for a later iteration, reads the same value.
class ConstantMemory {
public:
  explicit ConstantMemory(func::FuncOp func) {
    func.walk([&](Operation *op) {
      Value target;
      if (auto store = dyn_cast<StoreOp>(op))
        target = store.getPtr();
      else if (auto atomic = dyn_cast<AtomicRMWOp>(op))
        target = atomic.getPtr();
      else if (auto store = dyn_cast<BlockStoreOp>(op))
        target = store.getPtr();
      else
        return;
      Value root = pointerRoot(target);
      unknownWrites |= !root;
      written.insert(root);
    });
  }

  bool holds(LoadOp load) const {
    Value root = pointerRoot(load.getPtr());
    return root && !unknownWrites && !written.contains(root);
  }

private:
  bool unknownWrites = false; // a write whose argument cannot be told
  DenseSet<Value> written;
};

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
  auto load = dyn_cast<LoadOp>(def);
  bool indexLoad = constants && load && !isa<RankedTensorType>(load.getType()) && constants->holds(load);
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
    bool feedsDot = !load->use_empty() && llvm::all_of(load->getUses(), [](OpOperand &use) {
      return isDotOperand(use) || isTransposedDotOperand(use);
    });
    bool zeroOther = !load.getOther() || matchPattern(load.getOther(), m_AnyZeroFloat()) ||
                     matchPattern(load.getOther(), m_Zero());
    if (feedsDot && zeroOther && isIndexMath(load.getPtr(), body, &constants) &&
        (!load.getMask() || isIndexMath(load.getMask(), body, &constants)))
      loads.push_back(load);
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

void pipeline(scf::ForOp loop, int64_t stages, const ConstantMemory &constants) {
  SmallVector<LoadOp> loads = operandLoads(loop, constants);
  if (loads.empty())
    return;
  Block *body = loop.getBody();
  Location loc = loop.getLoc();
  OpBuilder b(loop);
  auto constant = [&](OpBuilder &at, int64_t v) { return arith::ConstantOp::create(at, loc, at.getI32IntegerAttr(v)); };

  // The rings, and the first stages - 1 iterations copied before the loop.
  SmallVector<Value> buffers;
  for (LoadOp load : loads)
    buffers.push_back(SharedAllocOp::create(
        b, loc, SharedBufferType::get(b.getContext(), stages, cast<RankedTensorType>(load.getType()))));
  SmallVector<Value> args{loop.getLowerBound()};
  llvm::append_range(args, loop.getInitArgs());
  for (int64_t s = 0; s < stages - 1; ++s) {
    if (s > 0)
      args = nextIteration(b, loop, body, args);
    Value active = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, args[0], loop.getUpperBound());
    IRMapping map;
    for (auto [load, buffer] : llvm::zip(loads, buffers))
      copyAsync(b, load, body, args, active, buffer, constant(b, s), map);
    AsyncCommitOp::create(b, loc);
  }

  // In the body: wait for this iteration's stage, read it, refill the previous one.
  OpBuilder at(loads.front());
  Value iteration = arith::DivSIOp::create(at, loc, arith::SubIOp::create(at, loc, loop.getInductionVar(), loop.getLowerBound()),
                                           loop.getStep());
  Value slot = arith::RemSIOp::create(at, loc, iteration, constant(at, stages));
  Value refill = arith::RemSIOp::create(at, loc, arith::AddIOp::create(at, loc, iteration, constant(at, stages - 1)),
                                        constant(at, stages));
  AsyncWaitOp::create(at, loc, at.getI32IntegerAttr(stages - 2));
  for (auto [load, buffer] : llvm::zip(loads, buffers))
    for (OpOperand &use : llvm::make_early_inc_range(load->getUses()))
      readFromRing(at, use, buffer, slot);
  SmallVector<Value> ahead(body->getArguments().begin(), body->getArguments().end());
  for (int64_t s = 0; s < stages - 1; ++s)
    ahead = nextIteration(at, loop, body, ahead);
  Value active = arith::CmpIOp::create(at, loc, arith::CmpIPredicate::slt, ahead[0], loop.getUpperBound());
  IRMapping map;
  for (auto [load, buffer] : llvm::zip(loads, buffers))
    copyAsync(at, load, body, ahead, active, buffer, refill, map);
  AsyncCommitOp::create(at, loc);
  for (LoadOp load : loads)
    load.erase();

  // Nothing may still write shared memory after the loop.
  b.setInsertionPointAfter(loop);
  AsyncWaitOp::create(b, loc, b.getI32IntegerAttr(0));
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
      SmallVector<scf::ForOp> loops;
      func.walk([&](scf::ForOp loop) { loops.push_back(loop); });
      for (scf::ForOp loop : loops)
        pipeline(loop, stages, constants);
    });
  }
};

} // namespace
