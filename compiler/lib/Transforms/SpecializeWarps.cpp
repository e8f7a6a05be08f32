// tile-specialize-warps: a producer warpgroup issues a kernel's TMA loads while the kernel's
// warps compute (see Passes.td).
#include "tessera/compiler/Dialect/Tile/Layouts.h"
#include "tessera/compiler/Transforms/ConstantMemory.h"
#include "tessera/compiler/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
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

constexpr int kProducerRegisters = 40; // index math and TMA issue

bool holdsTile(Operation *op) {
  auto isTile = [](Type type) { return isa<RankedTensorType>(type); };
  return llvm::any_of(op->getOperandTypes(), isTile) || llvm::any_of(op->getResultTypes(), isTile);
}

/// The producer's program: the consumers' TMA loads, each waiting for its stage to be released,
/// with the index math they need cloned on demand (pure scalar and block-pointer ops, and loads
/// of single values from memory the kernel never writes: block indices), and the loops that
/// hold them with only the carried values that math needs.
class Producer {
public:
  Producer(Region &consumers, OpBuilder top, const DenseMap<Value, Value> &emptyOf, const ConstantMemory &constants)
      : consumers(consumers), top(top), emptyOf(emptyOf), constants(constants) {}

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
    bool inLoop = loopBody && def->getBlock() == consumerLoopBody;
    if (!inLoop && def->getBlock() != &consumers.front())
      return {};
    for (Value operand : def->getOperands())
      if (!materialize(operand))
        return {};
    (inLoop ? *loopBody : top).clone(*def, map);
    return map.lookup(value);
  }

  /// The prologue's TMA loads: the stages are fresh (or handed over), nothing to wait for.
  LogicalResult load(TmaLoadOp load) {
    for (Value operand : load->getOperands())
      if (!materialize(operand))
        return fail(load, "a TMA load's operand is not index math the producer can compute");
    top.clone(*load, map);
    return success();
  }

  /// The consumers reached the point where a later ring's prologue may fill memory an earlier
  /// ring used: the producer waits for all of them there.
  void handOver(ArriveBarrierOp arrive) {
    Value zero = arith::ConstantOp::create(top, arrive.getLoc(), top.getI32IntegerAttr(0));
    WaitBarrierOp::create(top, arrive.getLoc(), arrive.getBarriers(), zero, zero, /*sync=*/false);
  }

  /// A pipelined loop: the same iterations, each refilling what the consumers' iteration refilled
  /// once they have released the stage. PipelineLoops refills, in iteration i, the stage that
  /// iteration i + stages - 1 reads and iteration i - 1 read; the consumers release it at that
  /// same point of iteration i, its (i / stages)-th release, whose parity is that of the stage
  /// wait of iteration i.
  LogicalResult loop(scf::ForOp consumerLoop) {
    Block *body = consumerLoop.getBody();
    llvm::MapVector<Value, SmallVector<TmaLoadOp>> refills; // by barrier ring, in program order
    DenseMap<Value, Value> parityOf;
    for (Operation &op : *body) {
      if (auto load = dyn_cast<TmaLoadOp>(op))
        refills[load.getBarriers()].push_back(load);
      if (auto wait = dyn_cast<WaitBarrierOp>(op))
        parityOf[wait.getBarriers()] = wait.getParity();
    }

    // The carried values the index math needs, through the yields.
    SetVector<Value> worklist;
    for (auto &[ring, loads] : refills) {
      if (!parityOf.count(ring))
        return fail(consumerLoop, "a loop refills a ring it does not wait for");
      worklist.insert(parityOf[ring]);
      for (TmaLoadOp load : loads)
        worklist.insert(load->getOperands().begin(), load->getOperands().end());
    }
    SmallVector<unsigned> carried;
    for (size_t i = 0; i < worklist.size(); ++i) {
      Value value = worklist[i];
      if (auto arg = dyn_cast<BlockArgument>(value); arg && arg.getOwner() == body && arg.getArgNumber() > 0) {
        unsigned index = arg.getArgNumber() - 1;
        if (isa<RankedTensorType>(arg.getType()))
          return fail(consumerLoop, "a TMA load's operand depends on a tile the loop carries");
        carried.push_back(index);
        worklist.insert(body->getTerminator()->getOperand(index));
      } else if (Operation *def = value.getDefiningOp(); def && def->getBlock() == body) {
        worklist.insert(def->getOperands().begin(), def->getOperands().end());
      }
    }
    llvm::sort(carried);

    Location loc = consumerLoop.getLoc();
    SmallVector<Value> inits;
    for (Value bound : {consumerLoop.getLowerBound(), consumerLoop.getUpperBound(), consumerLoop.getStep()})
      if (!materialize(bound))
        return fail(consumerLoop, "the loop's bounds are not index math the producer can compute");
    for (unsigned index : carried)
      if (!inits.emplace_back(materialize(consumerLoop.getInitArgs()[index])))
        return fail(consumerLoop, "a carried value's start is not index math the producer can compute");
    auto loop = scf::ForOp::create(top, loc, map.lookupOrDefault(consumerLoop.getLowerBound()),
                                   map.lookupOrDefault(consumerLoop.getUpperBound()), map.lookupOrDefault(consumerLoop.getStep()),
                                   inits);
    top.setInsertionPoint(loop); // loop-invariant math goes before the loop
    map.map(consumerLoop.getInductionVar(), loop.getInductionVar());
    for (auto [index, arg] : llvm::zip(carried, loop.getRegionIterArgs()))
      map.map(consumerLoop.getRegionIterArg(index), arg);
    OpBuilder inner = OpBuilder::atBlockEnd(loop.getBody());
    if (Operation *terminator = loop.getBody()->mightHaveTerminator() ? loop.getBody()->getTerminator() : nullptr)
      inner.setInsertionPoint(terminator);
    loopBody = &inner;
    consumerLoopBody = body;

    for (auto &[ring, loads] : refills) {
      TmaLoadOp first = loads.front();
      for (TmaLoadOp load : loads)
        if (load.getSlot() != first.getSlot() || load.getActive() != first.getActive())
          return fail(load, "a ring's refills in one iteration differ in stage or predicate");
      for (TmaLoadOp load : loads)
        for (Value operand : load->getOperands())
          if (!materialize(operand))
            return fail(load, "a TMA load's operand is not index math the producer can compute");
      Value parity = materialize(parityOf[ring]);
      if (!parity)
        return fail(consumerLoop, "the stage wait's parity is not index math the producer can compute");
      auto refill = scf::IfOp::create(inner, loc, map.lookupOrDefault(first.getActive()), /*withElseRegion=*/false);
      OpBuilder then = refill.getThenBodyBuilder();
      WaitBarrierOp::create(then, loc, emptyOf.lookup(ring), map.lookupOrDefault(first.getSlot()), parity, /*sync=*/false);
      for (TmaLoadOp load : loads)
        then.clone(*load, map);
    }

    SmallVector<Value> yields;
    for (unsigned index : carried)
      if (!yields.emplace_back(materialize(body->getTerminator()->getOperand(index))))
        return fail(consumerLoop, "a carried value's next value is not index math the producer can compute");
    if (!carried.empty())
      scf::YieldOp::create(inner, loc, yields);
    for (auto [index, result] : llvm::zip(carried, loop.getResults()))
      map.map(consumerLoop.getResult(index), result);
    loopBody = nullptr;
    consumerLoopBody = nullptr;
    top.setInsertionPointAfter(loop);
    return success();
  }

private:
  Region &consumers;
  OpBuilder top;
  OpBuilder *loopBody = nullptr;
  Block *consumerLoopBody = nullptr;
  const DenseMap<Value, Value> &emptyOf;
  const ConstantMemory &constants;
  IRMapping map;
};

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
  if (func.walk([](AsyncCopyOp copy) {
          return copy->getParentOfType<scf::ForOp>() ? WalkResult::interrupt() : WalkResult::advance();
        }).wasInterrupted())
    return fail("the kernel also has cp.async rings, whose refills need CTA barriers");
  for (TmaLoadOp load : loads) {
    Operation *parent = load->getParentOp();
    if (parent != func && !(isa<scf::ForOp>(parent) && parent->getParentOp() == func))
      return fail("TMA loads must sit in the kernel's body or in a loop directly in it");
  }

  Block &entry = func.getBody().front();
  MLIRContext *context = func.getContext();
  Location loc = func.getLoc();
  const int warps = numWarpsOf(func);
  OpBuilder b(context);

  // Shared buffers and barriers before the split; each TMA ring gets a ring of "empty"
  // barriers the consumer warps arrive on, and each ring after the first a hand-over barrier.
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
  int64_t end = llvm::alignTo(bytes ? bytes.getInt() : 0, 8);
  b.setInsertionPointAfter(allocs.back());
  SmallVector<Operation *> ringInits;
  auto barrierRing = [&](int64_t stages) {
    auto type = SharedBufferType::get(context, stages, RankedTensorType::get({1}, b.getI64Type()));
    auto ring = SharedAllocOp::create(b, loc, type);
    ring->setAttr("tile.smem_offset", b.getI64IntegerAttr(end));
    end += stages * 8;
    ringInits.push_back(InitBarriersOp::create(b, loc, ring, b.getI32IntegerAttr(warps)));
    return ring.getResult();
  };
  DenseMap<Value, Value> emptyOf;
  for (auto [k, init] : llvm::enumerate(inits)) {
    Value ring = init.getBarriers();
    emptyOf[ring] = barrierRing(cast<SharedBufferType>(ring.getType()).getStages());
    if (k > 0) {
      Value handOver = barrierRing(1);
      OpBuilder at(init);
      Value zero = arith::ConstantOp::create(at, loc, at.getI32IntegerAttr(0));
      Value yes = arith::ConstantOp::create(at, loc, at.getBoolAttr(true));
      ArriveBarrierOp::create(at, loc, handOver, zero, yes);
    }
    ringInits.push_back(init);
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
  for (Operation &op : *consumers) {
    LogicalResult done = success();
    if (auto load = dyn_cast<TmaLoadOp>(op))
      done = producer.load(load);
    else if (auto arrive = dyn_cast<ArriveBarrierOp>(op))
      producer.handOver(arrive);
    else if (auto loop = dyn_cast<scf::ForOp>(op); loop && !loop.getBody()->getOps<TmaLoadOp>().empty())
      done = producer.loop(loop);
    if (failed(done))
      return failure();
  }

  // The consumers: no TMA loads; where a loop refilled a ring, its warps release the stage
  // instead, and the CTA barriers that protected refills go (the empty barriers order them).
  DenseSet<std::pair<Block *, Value>> releasing;
  for (TmaLoadOp load : loads) {
    if (load->getBlock() != consumers && releasing.insert({load->getBlock(), load.getBarriers()}).second) {
      OpBuilder at(load);
      ArriveBarrierOp::create(at, load.getLoc(), emptyOf.lookup(load.getBarriers()), load.getSlot(), load.getActive());
    }
    load.erase();
  }
  func.walk([](WaitBarrierOp wait) { wait.setSync(false); });
  func.walk([](DotWaitOp wait) { wait.setBarrier(false); });
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
