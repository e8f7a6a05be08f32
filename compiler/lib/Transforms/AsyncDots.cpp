// tile-async-dots: wgmma dots issued asynchronously, waited for where their results are read
// (see Passes.td).
#include "tessera/compiler/Dialect/Tile/Layouts.h"
#include "tessera/compiler/Transforms/Passes.h"

#include "mlir/Dialect/SCF/IR/SCF.h"

namespace tessera {
#define GEN_PASS_DEF_TILEASYNCDOTS
#include "tessera/compiler/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera::tile;

namespace {

/// Whether `op` has async dots or waits inside its regions: the groups in flight after it
/// cannot be counted from its block.
bool holdsAsyncWork(Operation *op) {
  bool found = false;
  for (Region &region : op->getRegions())
    region.walk([&](Operation *inner) { found |= isAsyncDot(inner) || isa<DotWaitOp>(inner); });
  return found;
}

/// Whether `dot`'s result only feeds a later async dot of its block as the accumulator: wgmma
/// orders dots on the same accumulators itself, so it stays in flight.
bool chainsToNextDot(DotOp dot) {
  if (!dot->hasOneUse())
    return false;
  OpOperand &use = *dot->use_begin();
  return isAsyncDot(use.getOwner()) && use.getOperandNumber() == 2 && use.getOwner()->getBlock() == dot->getBlock();
}

/// The loop whose body yields `dot`'s result, its only use, into the next iteration, and the
/// result's position among the loop's values; a null loop where there is none.
std::pair<scf::ForOp, unsigned> carryingLoop(DotOp dot) {
  if (!dot->hasOneUse())
    return {};
  OpOperand &use = *dot->use_begin();
  auto yield = dyn_cast<scf::YieldOp>(use.getOwner());
  auto loop = yield ? dyn_cast<scf::ForOp>(yield->getParentOp()) : scf::ForOp();
  if (!loop || yield->getBlock() != dot->getBlock())
    return {};
  return {loop, use.getOperandNumber()};
}

/// The loop whose next iteration takes `dot`'s result, in flight, as the accumulator of an
/// async dot of the body (the matmul's k loop), or null.
scf::ForOp carriedInFlight(DotOp dot) {
  auto [loop, position] = carryingLoop(dot);
  if (!loop)
    return {};
  BlockArgument carried = loop.getRegionIterArg(position);
  if (!carried.hasOneUse())
    return {};
  OpOperand &next = *carried.use_begin();
  return isAsyncDot(next.getOwner()) && next.getOperandNumber() == 2 && next.getOwner()->getBlock() == dot->getBlock()
             ? loop
             : scf::ForOp();
}

/// Whether `op` refills a stage: a cp.async copy or commit, or a TMA load.
bool isRefill(Operation &op) { return isa<AsyncCopyOp, AsyncCommitOp, TmaLoadOp>(op); }

/// Whether the refills of `body` may move to its end: no wait for copies follows any of them
/// (it would count the moved groups or phases differently).
bool refillsMovable(Block &body) {
  bool refilled = false;
  for (Operation &op : body) {
    if (isa<AsyncWaitOp, WaitBarrierOp>(op) && refilled)
      return false;
    refilled |= isRefill(op);
  }
  return true;
}

/// Whether `op` stores into a stage `dot` reads (a tile.shared_store: the dot must be done
/// with the old contents).
bool overwritesOperandOf(Operation *op, DotOp dot) {
  auto store = dyn_cast<SharedStoreOp>(op);
  return store && llvm::any_of(dot->getOperands(), [&](Value operand) {
           auto load = operand.getDefiningOp<SharedLoadOp>();
           return load && load.getBuffer() == store.getBuffer();
         });
}

/// From `from` on, the first op that reads `value` (the result of `dot`), issues or waits for
/// dots we cannot count, or refills a stage `dot` may be reading (a copy, or a store into its
/// operand's stage); the terminator at the latest. `pending` (if given) counts the async dots
/// passed.
Operation *waitPoint(Operation *from, Value value, DotOp dot, int64_t *pending = nullptr) {
  for (Operation *at = from;; at = at->getNextNode()) {
    bool reads = llvm::any_of(value.getUsers(), [&](Operation *user) { return at->isAncestor(user); });
    if (reads || holdsAsyncWork(at) || isa<AsyncCopyOp, TmaLoadOp>(at) || overwritesOperandOf(at, dot) ||
        at->hasTrait<OpTrait::IsTerminator>())
      return at;
    if (pending)
      *pending += isAsyncDot(at);
  }
}

/// Waits for `values` (results of async dots) before `at`, all but the last `pending` dots
/// done; later reads of the values read the wait's results.
DotWaitOp waitBefore(Operation *at, ValueRange values, int64_t pending, bool barrier) {
  OpBuilder b(at);
  auto wait = DotWaitOp::create(b, at->getLoc(), values.getTypes(), values, b.getI32IntegerAttr(pending),
                                barrier ? b.getUnitAttr() : UnitAttr());
  for (auto [value, waited] : llvm::zip(values, wait.getResults()))
    value.replaceAllUsesExcept(waited, wait);
  return wait;
}

/// A dot whose result the loop carries into its next iteration, where an op reads it before
/// any dot is issued, waited for, or a stage refilled (FlashAttention-3's P @ V, the
/// accumulator rescaled before the next Q K^T): it stays in flight through the rest of this
/// iteration and is waited for just before that read, and after the loop before the result's
/// first reader. Read later in the next iteration, after its dots (the plain order's rescale),
/// it is waited for in its own, as before: in flight across the next Q K^T it would hold
/// registers the softmax needs. Returns whether the waits were placed so.
bool waitNextIteration(DotOp dot) {
  auto [loop, position] = carryingLoop(dot);
  if (!loop)
    return false;
  BlockArgument carried = loop.getRegionIterArg(position);
  Operation *reader = nullptr;
  for (Operation &op : *loop.getBody()) {
    if (llvm::any_of(carried.getUsers(), [&](Operation *user) { return op.isAncestor(user); })) {
      reader = &op;
      break;
    }
    if (holdsAsyncWork(&op) || isAsyncDot(&op) || isa<DotWaitOp, AsyncCopyOp, TmaLoadOp>(op) ||
        overwritesOperandOf(&op, dot))
      return false;
  }
  if (!reader)
    return false;
  waitBefore(reader, {carried}, 0, /*barrier=*/false);
  Value result = loop.getResult(position);
  waitBefore(waitPoint(loop->getNextNode(), result, dot), {result}, 0, /*barrier=*/false);
  return true;
}

/// The matmul case: the body's dots carried in flight into the next iteration (`carried`, in
/// `loop`'s body with `count` async dots). After the last dot, a wait leaves this iteration's
/// dots in flight and a barrier makes sure every warpgroup is done with the previous
/// iteration's stages; the refills move after it, and a TMA stage's wait needs no barrier of
/// its own any more. The loop's results are waited for after it.
void keepInFlight(scf::ForOp loop, ArrayRef<DotOp> carried, int64_t count, Operation *lastDot) {
  Block *body = loop.getBody();
  DotWaitOp wait = waitBefore(lastDot->getNextNode(), {}, count, /*barrier=*/true);
  SmallVector<Operation *> refills;
  for (Operation &op : *body) {
    if (&op == wait.getOperation())
      break;
    if (isRefill(op))
      refills.push_back(&op);
    if (auto stageWait = dyn_cast<WaitBarrierOp>(op))
      stageWait.setSync(false);
  }
  Operation *after = wait;
  for (Operation *refill : refills) {
    refill->moveAfter(after);
    after = refill;
  }
  SmallVector<Value> results;
  for (DotOp dot : carried)
    results.push_back(loop.getResult(dot->use_begin()->getOperandNumber()));
  waitBefore(loop->getNextNode(), results, 0, /*barrier=*/false);
}

/// Lowers the pending count of each wait to at most the groups that may still be in flight
/// there (a later wait for an earlier dot, already done, waits for nothing): ptxas (CUDA 13.0)
/// reads a wait_group 2 after a wait_group 1 as if the groups between were in flight again and
/// serializes every wgmma of the kernel (C7514) when their results were read in between.
void tightenWaits(Block &block) {
  constexpr int64_t unknown = -1; // after ops holding async work
  int64_t inFlight = 0;            // at most
  for (Operation &op : block) {
    if (holdsAsyncWork(&op)) {
      inFlight = unknown;
    } else if (isAsyncDot(&op)) {
      if (inFlight != unknown)
        ++inFlight;
    } else if (auto wait = dyn_cast<DotWaitOp>(op)) {
      if (inFlight != unknown && wait.getPending() > inFlight)
        wait.setPending(inFlight);
      inFlight = wait.getPending();
    }
  }
}

/// Makes the wgmma dots of `block` async and places their waits.
void placeWaits(Block &block) {
  SmallVector<DotOp> dots;
  for (Operation &op : block)
    if (auto dot = dyn_cast<DotOp>(op); dot && lowersToWarpgroupMma(dot)) {
      dot.setAsync(true);
      dots.push_back(dot);
    }
  if (dots.empty())
    return;

  // Dots kept in flight across iterations: only where every dot of the body is such a chain,
  // nothing else in it issues dots (with other dots in the body, the next iteration's first
  // wait would end the overlap anyway, and ptxas, unsure, waits where it likes) and its
  // refills may move after the dots.
  SmallVector<DotOp> carried;
  scf::ForOp loop;
  for (DotOp dot : dots)
    if (scf::ForOp carrier = carriedInFlight(dot)) {
      loop = carrier;
      carried.push_back(dot);
    }
  bool onlyChains =
      llvm::all_of(dots, [&](DotOp dot) { return chainsToNextDot(dot) || llvm::is_contained(carried, dot); });
  if (!loop || !onlyChains || !refillsMovable(block) ||
      llvm::any_of(block, [](Operation &op) { return holdsAsyncWork(&op) || isa<SharedStoreOp>(op); }))
    carried.clear();
  else
    keepInFlight(loop, carried, int64_t(dots.size()), dots.back());

  for (DotOp dot : dots) {
    if (chainsToNextDot(dot) || llvm::is_contained(carried, dot))
      continue;
    int64_t pending = 0;
    Operation *at = waitPoint(dot->getNextNode(), dot.getResult(), dot, &pending);
    if (at->hasTrait<OpTrait::IsTerminator>() && waitNextIteration(dot))
      continue;
    waitBefore(at, dot.getResult(), pending, /*barrier=*/false);
  }
  if (carried.empty())
    tightenWaits(block);
}

struct TileAsyncDotsPass : tessera::impl::TileAsyncDotsBase<TileAsyncDotsPass> {
  void runOnOperation() override {
    SmallVector<Block *> blocks;
    getOperation().walk([&](Block *block) { blocks.push_back(block); });
    for (Block *block : blocks)
      placeWaits(*block);
  }
};

} // namespace
