// tile-specialize-warps: a producer warpgroup issues a kernel's TMA loads while the kernel's
// warps compute (see Passes.td).
#include "tessera/compiler/Dialect/Tile/Layouts.h"
#include "tessera/compiler/Transforms/ConstantMemory.h"
#include "tessera/compiler/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

namespace tessera {
#define GEN_PASS_DEF_TILESPECIALIZEWARPS
#include "tessera/compiler/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera::tile;

namespace {

constexpr int kProducerRegisters = 24; // index math and TMA issue (FlashAttention-3's budget)

bool holdsTile(Operation *op) {
  auto isTile = [](Type type) { return isa<RankedTensorType>(type); };
  return llvm::any_of(op->getOperandTypes(), isTile) || llvm::any_of(op->getResultTypes(), isTile);
}

bool holdsTmaLoads(Operation *op) {
  return op->walk([](TmaLoadOp) { return WalkResult::interrupt(); }).wasInterrupted();
}

/// The shared memory placed so far ([offset, end) of rings, bulk adds' staging and scratch),
/// and where `bytes` of mbarriers that live as long as the kernel fit: the first 8-byte
/// aligned gap (the 1024-byte alignment of swizzled rings leaves some), else the end.
struct PlacedSharedMemory {
  std::vector<std::pair<int64_t, int64_t>> taken;

  explicit PlacedSharedMemory(func::FuncOp func) {
    func.walk([&](Operation *op) {
      auto offset = op->getAttrOfType<IntegerAttr>("tile.smem_offset");
      if (!offset)
        return;
      int64_t bytes = scratchBytes(op);
      if (auto alloc = dyn_cast<SharedAllocOp>(op))
        bytes = ringBytes(alloc.getType());
      else if (auto add = dyn_cast<BulkAddOp>(op))
        bytes = bulkAddStagingBytes(add);
      taken.push_back({offset.getInt(), offset.getInt() + bytes});
    });
  }

  int64_t placeBarriers(int64_t bytes) {
    int64_t at = firstFit(taken, bytes, 8);
    taken.push_back({at, at + bytes});
    return at;
  }
};

/// The stage `load`'s fill number `fill` lands in (fill % stages).
Value stageOf(OpBuilder &b, TmaLoadOp load, Value fill) {
  Value stages = arith::ConstantOp::create(b, load.getLoc(), b.getI32IntegerAttr(load.getBuffer().getType().getStages()));
  return arith::RemUIOp::create(b, load.getLoc(), fill, stages);
}

/// The producer's program: the consumers' TMA loads, each waiting until the consumers have
/// released its stage's previous contents, with the index math they need cloned on demand
/// (pure scalar and block-pointer ops, and loads of single values from memory the kernel never
/// writes: block indices), and the loops that hold them (at any depth) with only the carried
/// values that math needs.
class Producer {
public:
  Producer(Region &consumers, OpBuilder top, const DenseMap<Value, Value> &emptyOf, const ConstantMemory &constants)
      : consumers(consumers), emptyOf(emptyOf), constants(constants) {
    scopes.push_back({&consumers.front(), top});
  }

  /// The producer's copy of the consumers' `block`: its TMA loads and the loops that hold some.
  LogicalResult block(Block &block) {
    for (Operation &op : block) {
      LogicalResult done = success();
      if (auto load = dyn_cast<TmaLoadOp>(op); load && !emitted.contains(load))
        done = fill(load);
      else if (auto loop = dyn_cast<scf::ForOp>(op); loop && holdsTmaLoads(loop))
        done = this->loop(loop);
      if (failed(done))
        return failure();
    }
    return success();
  }

private:
  struct Scope {
    Block *consumers; // the consumers' block whose ops clone here
    OpBuilder builder;
  };

  LogicalResult fail(Operation *op, const Twine &why) {
    op->emitError() << "warp_specialize: " << why;
    return failure();
  }

  /// `value` in the producer's program, or null where it is no index math.
  Value materialize(Value value) {
    if (Value mapped = map.lookupOrNull(value))
      return mapped;
    if (!consumers.isAncestor(value.getParentRegion()))
      return value; // defined before the split: both roles see it
    Operation *def = value.getDefiningOp();
    if (!def || !(isMemoryEffectFree(def) || constants.isIndexLoad(def)) || def->getNumRegions() > 0 || holdsTile(def))
      return {};
    auto scope = llvm::find_if(scopes, [&](const Scope &s) { return s.consumers == def->getBlock(); });
    if (scope == scopes.end())
      return {};
    for (Value operand : def->getOperands())
      if (!materialize(operand))
        return {};
    scope->builder.clone(*def, map);
    return map.lookup(value);
  }

  /// The loads of `first`'s block that fill the same stage of the same ring as it (K and V of
  /// one iteration), issued once every consumer warp has released the stage's previous
  /// contents: fill f waits for the release of fill f - stages, which the consumers make in
  /// their iteration f - stages + 1 (the phase (f + 1) / stages - 1 of the stage's "empty"
  /// barrier); the fills before the first release find a fresh barrier, whose phase of parity
  /// 1 counts as complete. A fill numbered by a constant below the stages (a one-shot stage's
  /// only fill) is the first of its stage: it waits for nothing.
  LogicalResult fill(TmaLoadOp first) {
    SmallVector<TmaLoadOp> loads;
    for (auto load : first->getBlock()->getOps<TmaLoadOp>())
      if (load.getBarriers() == first.getBarriers() && load.getFill() == first.getFill() &&
          load.getActive() == first.getActive())
        loads.push_back(load);
    for (TmaLoadOp load : loads)
      for (Value operand : load->getOperands())
        if (!materialize(operand))
          return fail(load, "a TMA load's operand is not index math the producer can compute");
    OpBuilder &at = scopes.back().builder;
    Location loc = first.getLoc();
    auto constant = [&](int64_t v) { return arith::ConstantOp::create(at, loc, at.getI32IntegerAttr(v)); };
    const int64_t stages = first.getBuffer().getType().getStages();
    APInt constantFill;
    bool firstOfStage = matchPattern(first.getFill(), m_ConstantInt(&constantFill)) && constantFill.getSExtValue() < stages;
    Value slot, parity;
    if (!firstOfStage) {
      Value fill = map.lookupOrDefault(first.getFill());
      slot = stageOf(at, first, fill);
      Value released = arith::DivUIOp::create(at, loc, arith::AddIOp::create(at, loc, fill, constant(1)), constant(stages));
      parity = arith::XOrIOp::create(at, loc, arith::AndIOp::create(at, loc, released, constant(1)), constant(1));
    }
    auto active = scf::IfOp::create(at, loc, map.lookupOrDefault(first.getActive()), /*withElseRegion=*/false);
    OpBuilder then = active.getThenBodyBuilder();
    if (!firstOfStage)
      WaitBarrierOp::create(then, loc, emptyOf.lookup(first.getBarriers()), slot, parity, /*sync=*/false);
    for (TmaLoadOp load : loads) {
      then.clone(*load, map);
      emitted.insert(load);
    }
    return success();
  }

  /// The carried values of `loop` the producer needs (indices), and the values from outside
  /// the loop that it needs (`outside`): those its TMA loads and the loops inside it use,
  /// through the yields.
  FailureOr<SmallVector<unsigned>> needs(scf::ForOp loop, SetVector<Value> &outside) {
    Block *body = loop.getBody();
    SetVector<Value> worklist;
    for (Operation &op : *body) {
      if (isa<TmaLoadOp>(op))
        worklist.insert(op.getOperands().begin(), op.getOperands().end());
      auto inner = dyn_cast<scf::ForOp>(op);
      if (!inner || !holdsTmaLoads(inner))
        continue;
      SetVector<Value> innerOutside;
      FailureOr<SmallVector<unsigned>> carried = needs(inner, innerOutside);
      if (failed(carried))
        return failure();
      worklist.insert(innerOutside.begin(), innerOutside.end());
      for (Value bound : {inner.getLowerBound(), inner.getUpperBound(), inner.getStep()})
        worklist.insert(bound);
      for (unsigned index : *carried)
        worklist.insert(inner.getInitArgs()[index]);
    }
    SmallVector<unsigned> carried;
    for (size_t i = 0; i < worklist.size(); ++i) {
      Value value = worklist[i];
      if (auto arg = dyn_cast<BlockArgument>(value); arg && arg.getOwner() == body) {
        if (arg.getArgNumber() == 0)
          continue; // the induction variable
        unsigned index = arg.getArgNumber() - 1;
        if (isa<RankedTensorType>(arg.getType()))
          return fail(loop, "a TMA load's operand depends on a tile the loop carries");
        carried.push_back(index);
        worklist.insert(body->getTerminator()->getOperand(index));
      } else if (Operation *def = value.getDefiningOp(); def && def->getBlock() == body) {
        if (def->getNumRegions() == 0)
          worklist.insert(def->getOperands().begin(), def->getOperands().end());
      } else {
        outside.insert(value); // defined around the loop
      }
    }
    llvm::sort(carried);
    return carried;
  }

  /// A loop that holds TMA loads: the same iterations, with the carried values they need.
  LogicalResult loop(scf::ForOp consumerLoop) {
    SetVector<Value> outside;
    FailureOr<SmallVector<unsigned>> carried = needs(consumerLoop, outside);
    if (failed(carried))
      return failure();
    Location loc = consumerLoop.getLoc();
    SmallVector<Value> bounds, inits;
    for (Value bound : {consumerLoop.getLowerBound(), consumerLoop.getUpperBound(), consumerLoop.getStep()})
      if (!bounds.emplace_back(materialize(bound)))
        return fail(consumerLoop, "the loop's bounds are not index math the producer can compute");
    for (unsigned index : *carried)
      if (!inits.emplace_back(materialize(consumerLoop.getInitArgs()[index])))
        return fail(consumerLoop, "a carried value's start is not index math the producer can compute");
    OpBuilder &outer = scopes.back().builder;
    auto loop = scf::ForOp::create(outer, loc, bounds[0], bounds[1], bounds[2], inits);
    outer.setInsertionPoint(loop); // loop-invariant math goes before the loop
    map.map(consumerLoop.getInductionVar(), loop.getInductionVar());
    for (auto [index, arg] : llvm::zip(*carried, loop.getRegionIterArgs()))
      map.map(consumerLoop.getRegionIterArg(index), arg);
    OpBuilder inner = OpBuilder::atBlockEnd(loop.getBody());
    if (Operation *terminator = loop.getBody()->mightHaveTerminator() ? loop.getBody()->getTerminator() : nullptr)
      inner.setInsertionPoint(terminator);
    scopes.push_back({consumerLoop.getBody(), inner});
    if (failed(block(*consumerLoop.getBody())))
      return failure();
    SmallVector<Value> yields;
    for (unsigned index : *carried)
      if (!yields.emplace_back(materialize(consumerLoop.getBody()->getTerminator()->getOperand(index))))
        return fail(consumerLoop, "a carried value's next value is not index math the producer can compute");
    if (!carried->empty())
      scf::YieldOp::create(scopes.back().builder, loc, yields);
    scopes.pop_back();
    for (auto [index, result] : llvm::zip(*carried, loop.getResults()))
      map.map(consumerLoop.getResult(index), result);
    scopes.back().builder.setInsertionPointAfter(loop);
    return success();
  }

  Region &consumers;
  SmallVector<Scope> scopes; // the consumers' blocks being copied, outermost first
  const DenseMap<Value, Value> &emptyOf;
  const ConstantMemory &constants;
  IRMapping map;
  DenseSet<Operation *> emitted;
};

/// Drops the consumers' waits after their TMA loops (orders_refills): the producer, which fills
/// the rings, never joins their barrier, and its empty barriers order the refills. Unless a
/// consumer writes shared memory after its first loop (a stage, a copy, a bulk add's staging,
/// whose memory may be what a lagging warp still reads): there the barrier stays.
void dropRefillWaits(Block &consumers) {
  bool pastLoop = false, writesAfter = false;
  consumers.walk<WalkOrder::PreOrder>([&](Operation *op) {
    pastLoop |= isa<scf::ForOp>(op);
    writesAfter |= pastLoop && isa<SharedStoreOp, AsyncCopyOp, BulkAddOp>(op);
  });
  if (writesAfter)
    return;
  SmallVector<AsyncWaitOp> drops;
  consumers.walk([&](AsyncWaitOp wait) {
    if (wait.getOrdersRefills())
      drops.push_back(wait);
  });
  for (AsyncWaitOp wait : drops)
    wait.erase();
}

/// Splits `func` into the producer warpgroup and the consumers (the kernel's num_warps warps).
LogicalResult specialize(func::FuncOp func) {
  SmallVector<TmaLoadOp> loads;
  func.walk([&](TmaLoadOp load) { loads.push_back(load); });
  if (loads.empty())
    return success(); // nothing to produce: the kernel keeps its warps
  auto fail = [&](const Twine &why) {
    func.emitError() << "warp_specialize: " << why;
    return failure();
  };
  if (func.getNumResults() > 0)
    return fail("kernels return nothing");
  for (TmaLoadOp load : loads)
    for (Operation *parent = load->getParentOp(); parent != func; parent = parent->getParentOp())
      if (!isa<scf::ForOp>(parent))
        return fail("TMA loads must sit in the kernel's body or in loops");

  Block &entry = func.getBody().front();
  MLIRContext *context = func.getContext();
  Location loc = func.getLoc();
  const int warps = numWarpsOf(func);
  OpBuilder b(context);

  // Shared buffers and barriers before the split; each TMA ring gets a ring of "empty"
  // barriers the consumer warps arrive on.
  SmallVector<SharedAllocOp> allocs;
  SmallVector<InitBarriersOp> inits;
  for (Operation &op : entry) {
    if (auto alloc = dyn_cast<SharedAllocOp>(op))
      allocs.push_back(alloc);
    if (auto init = dyn_cast<InitBarriersOp>(op))
      inits.push_back(init);
  }
  for (TmaLoadOp load : loads)
    if (!llvm::is_contained(llvm::map_range(inits, [](InitBarriersOp init) { return init.getBarriers(); }),
                            load.getBarriers()))
      return fail("TMA rings must be initialized in the kernel's body");
  for (SharedAllocOp alloc : llvm::reverse(allocs))
    alloc->moveBefore(&entry, entry.begin());
  auto bytes = func->getAttrOfType<IntegerAttr>(kSharedMemoryAttrName);
  int64_t end = bytes ? bytes.getInt() : 0;
  PlacedSharedMemory placed(func);
  b.setInsertionPointAfter(allocs.back());
  SmallVector<Operation *> ringInits;
  DenseMap<Value, Value> emptyOf;
  for (InitBarriersOp init : inits) {
    Value ring = init.getBarriers();
    auto type = SharedBufferType::get(context, cast<SharedBufferType>(ring.getType()).getStages(),
                                      RankedTensorType::get({1}, b.getI64Type()));
    auto empty = SharedAllocOp::create(b, loc, type);
    int64_t offset = placed.placeBarriers(type.getStages() * 8);
    empty->setAttr("tile.smem_offset", b.getI64IntegerAttr(offset));
    end = std::max(end, offset + type.getStages() * 8);
    ringInits.push_back(InitBarriersOp::create(b, loc, empty, b.getI32IntegerAttr(warps)));
    ringInits.push_back(init);
    emptyOf[ring] = empty;
  }
  // Every ring initialized after the last buffer, one after another: they share one fence and
  // one CTA barrier.
  for (Operation *init : ringInits)
    init->moveBefore(b.getInsertionBlock(), b.getInsertionPoint());
  func->setAttr(kSharedMemoryAttrName, b.getI64IntegerAttr(end));

  // The split: everything after it runs in the consumer branch.
  Value producing = InProducerWarpsOp::create(b, loc, b.getI1Type(), /*first=*/false);
  auto split = scf::IfOp::create(b, loc, producing, /*withElseRegion=*/true);
  Block *consumers = split.elseBlock();
  consumers->getOperations().splice(consumers->begin(), entry.getOperations(), std::next(split->getIterator()),
                                    std::prev(entry.end()));

  // Register budgets: the producer needs few; the consumers take the rest of what the program
  // starts with.
  func->setAttr(kProducerWarpsAttrName, b.getI32IntegerAttr(kProducerWarps));
  const int consumerThreads = warps * 32, entryRegisters = entryRegistersOf(func);
  const int pool = entryRegisters * (consumerThreads + kProducerWarps * 32);
  const int consumerRegisters =
      std::min(240, (pool - kProducerRegisters * kProducerWarps * 32) / consumerThreads / 8 * 8);
  const bool reallocate = entryRegisters < consumerRegisters;
  OpBuilder top = split.getThenBodyBuilder();
  if (reallocate) {
    SetMaxRegistersOp::create(top, loc, kProducerRegisters, /*increase=*/false);
    OpBuilder at = OpBuilder::atBlockBegin(consumers);
    SetMaxRegistersOp::create(at, loc, consumerRegisters, /*increase=*/true);
  }
  // One warp issues; the others would only spin on the same barriers, taking issue slots.
  Value issuing = InProducerWarpsOp::create(top, loc, top.getI1Type(), /*first=*/true);
  top = scf::IfOp::create(top, loc, issuing, /*withElseRegion=*/false).getThenBodyBuilder();

  const ConstantMemory constants(func);
  Producer producer(split.getElseRegion(), top, emptyOf, constants);
  if (failed(producer.block(*consumers)))
    return failure();

  // The consumers: no TMA loads; where a loop refilled a ring (its body waits on the ring),
  // its warps release the stage instead, in every iteration (the next loop's first fills, or
  // the next tile's, wait for the last iterations' releases), and the CTA barriers that
  // protected refills go (the empty barriers order them).
  DenseSet<std::pair<Block *, Value>> releasing;
  for (TmaLoadOp load : loads) {
    Block *block = load->getBlock();
    bool waits = llvm::any_of(block->getOps<WaitBarrierOp>(),
                              [&](WaitBarrierOp wait) { return wait.getBarriers() == load.getBarriers(); });
    if (waits && releasing.insert({block, load.getBarriers()}).second) {
      OpBuilder at(load);
      Value always = arith::ConstantOp::create(at, load.getLoc(), at.getBoolAttr(true));
      ArriveBarrierOp::create(at, load.getLoc(), emptyOf.lookup(load.getBarriers()), stageOf(at, load, load.getFill()),
                              always);
    }
    load.erase();
  }
  func.walk([](WaitBarrierOp wait) { wait.setSync(false); });
  func.walk([](DotWaitOp wait) { wait.setBarrier(false); });
  dropRefillWaits(*consumers);
  return success();
}

struct TileSpecializeWarpsPass : tessera::impl::TileSpecializeWarpsBase<TileSpecializeWarpsPass> {
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp func) {
      if (func->hasAttr(kWarpSpecializeAttrName) && failed(specialize(func)))
        signalPassFailure();
    });
  }
};

} // namespace
