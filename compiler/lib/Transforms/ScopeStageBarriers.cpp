// tile-scope-stage-barriers (see Passes.td).
#include "tessera/compiler/Dialect/Tile/Layouts.h"
#include "tessera/compiler/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <functional>
#include <vector>

namespace tessera {
#define GEN_PASS_DEF_TILESCOPESTAGEBARRIERS
#include "tessera/compiler/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera::tile;
namespace layout = tessera::layout;

namespace {

/// For each element of a stored tile of `shape` (by its linear index), the warpgroups whose
/// warps hold it in `placement` (bit w: warpgroup w), `toStored` mapping the placement's
/// coordinates to the stored tile's.
std::vector<uint32_t> warpgroupsHolding(const layout::LinearLayout &placement, ArrayRef<int64_t> shape,
                                        const std::function<layout::Coord(const layout::Coord &)> &toStored) {
  std::vector<uint32_t> holders(shape[0] * shape[1], 0);
  for (int64_t warp = 0; warp < placement.numWarps(); ++warp)
    for (int64_t lane = 0; lane < placement.numLanes(); ++lane)
      for (int64_t reg = 0; reg < placement.numRegisters(); ++reg) {
        layout::Coord at = toStored(placement.apply(reg, lane, warp));
        holders[at[0] * shape[1] + at[1]] |= 1u << (warp / 4);
      }
  return holders;
}

/// Whether each warpgroup reads, through `load`, only elements of the stage that it wrote
/// itself (`writers`: the warpgroup holding each stored element).
bool readsOwnWrites(SharedLoadOp load, ArrayRef<int64_t> shape, ArrayRef<uint32_t> writers) {
  auto type = cast<RankedTensorType>(load.getType());
  auto stored = [&](const layout::Coord &at) {
    return load.getTransposed() ? layout::Coord{at[1], at[0]} : at;
  };
  std::vector<uint32_t> readers =
      warpgroupsHolding(toLinearLayout(type.getEncoding(), type.getShape()), shape, stored);
  for (size_t i = 0; i < readers.size(); ++i)
    if (readers[i] & ~writers[i])
      return false;
  return true;
}

/// A stage that a shared_store writes and loads beside it in the same loop body read (the
/// tile-stage-dot-operands kind: one store, memory of its own).
struct Stage {
  SharedStoreOp store;
  SmallVector<SharedLoadOp> loads;
  SmallVector<bool> local; // per load: each warpgroup reads only elements it stored
  bool warpgroupLocal() const { return llvm::all_of(local, [](bool l) { return l; }); }
};

/// Whether another ring's memory overlaps `alloc`'s (or it has none yet): the barrier before a
/// store into it may then also guard that ring's readers.
bool sharesMemory(SharedAllocOp alloc) {
  auto offsetOf = [](SharedAllocOp a) { return a->getAttrOfType<IntegerAttr>("tile.smem_offset"); };
  if (!offsetOf(alloc))
    return true;
  int64_t lo = offsetOf(alloc).getInt(), hi = lo + ringBytes(alloc.getType());
  return alloc->getParentOfType<func::FuncOp>()
      .walk([&](SharedAllocOp other) {
        if (other == alloc || !offsetOf(other))
          return WalkResult::advance();
        int64_t otherLo = offsetOf(other).getInt();
        return otherLo < hi && lo < otherLo + ringBytes(other.getType()) ? WalkResult::interrupt() : WalkResult::advance();
      })
      .wasInterrupted();
}

/// `store`'s stage, with which of its loads read only their warpgroup's writes; nothing where
/// the stage is not of that kind.
std::optional<Stage> stageOf(SharedStoreOp store) {
  auto alloc = store.getBuffer().getDefiningOp<SharedAllocOp>();
  Block *body = store->getBlock();
  if (!alloc || !isa<scf::ForOp>(body->getParentOp()) || sharesMemory(alloc))
    return std::nullopt;
  Stage stage{store, {}, {}};
  for (Operation *user : alloc->getUsers()) {
    auto load = dyn_cast<SharedLoadOp>(user);
    if (user != store && (!load || load->getBlock() != body))
      return std::nullopt;
    if (load)
      stage.loads.push_back(load);
  }
  stage.local.assign(stage.loads.size(), false);
  auto type = cast<RankedTensorType>(store.getValue().getType());
  const int warps = numWarpsOf(store);
  if (warps <= 4 || warps % 4 != 0 || type.getRank() != 2)
    return stage;
  std::vector<uint32_t> writers = warpgroupsHolding(toLinearLayout(type.getEncoding(), type.getShape()),
                                                    type.getShape(), [](const layout::Coord &at) { return at; });
  if (llvm::any_of(writers, [](uint32_t holders) { return !llvm::has_single_bit(holders); }))
    return stage;
  for (auto [load, local] : llvm::zip(stage.loads, stage.local))
    local = readsOwnWrites(load, type.getShape(), writers);
  return stage;
}

/// Ops of a loop body in execution order, around the back edge.
Operation *nextAround(Operation *op) {
  Operation *next = op->getNextNode();
  return next ? next : &op->getBlock()->front();
}

/// The barrier `op` ends with, as it lowers: none, one of each warpgroup's own warps, or one
/// of all (consumer) warps.
enum class Scope { none, warpgroup, all };
Scope barrierAfter(Operation *op) {
  if (auto store = dyn_cast<SharedStoreOp>(op))
    return store.getWarpgroupLocal() ? Scope::warpgroup : Scope::all;
  if (auto add = dyn_cast<BulkAddOp>(op))
    return bulkAddStagingBytes(add) ? Scope::all : Scope::none;
  if (auto wait = dyn_cast<DotWaitOp>(op))
    return wait.getBarrier() ? Scope::all : Scope::none;
  return Scope::none;
}

/// Where a read of the stage by `reader` (its load, or the async dot reading the load's
/// operand step by step) is done in the reading warps, at the latest: the read itself, or the
/// first dot_wait after the dot leaving it out of the dots still in flight. Null if that is
/// not before `store`, walking around the loop.
Operation *readDone(Operation *reader, Operation *store) {
  if (!isAsyncDot(reader))
    return reader;
  int64_t issuedAfter = 0;
  for (Operation *op = nextAround(reader); op != store; op = nextAround(op)) {
    if (auto wait = dyn_cast<DotWaitOp>(op); wait && issuedAfter >= wait.getPending())
      return op;
    issuedAfter += isAsyncDot(op);
  }
  return nullptr;
}

/// Whether every warp reading the stage's previous contents is done with them before
/// `stage.store` rewrites it, by a barrier after each read is done: of the readers'
/// warpgroup where they read only what it stored, of all warps otherwise. Then the store needs
/// no barrier before it.
bool readersSynced(const Stage &stage) {
  Operation *store = stage.store;
  for (auto [load, local] : llvm::zip(stage.loads, stage.local)) {
    // What reads the stage: the dots a wgmma operand feeds read it themselves.
    SmallVector<Operation *> readers;
    if (readByDotSteps(load))
      readers.append(load->user_begin(), load->user_end());
    else
      readers.push_back(load);
    const Scope needed = local ? Scope::warpgroup : Scope::all;
    for (Operation *reader : readers) {
      if (reader->getBlock() != store->getBlock())
        return false;
      Operation *done = readDone(reader, store);
      if (!done)
        return false;
      bool synced = barrierAfter(done) >= needed;
      for (Operation *op = nextAround(done); !synced && op != store; op = nextAround(op))
        synced = barrierAfter(op) >= needed;
      if (!synced)
        return false;
    }
  }
  return true;
}

struct TileScopeStageBarriersPass : tessera::impl::TileScopeStageBarriersBase<TileScopeStageBarriersPass> {
  void runOnOperation() override {
    SmallVector<Stage> stages;
    getOperation().walk([&](SharedStoreOp store) {
      if (std::optional<Stage> stage = stageOf(store)) {
        store.setWarpgroupLocal(stage->warpgroupLocal());
        stages.push_back(*stage);
      }
    });
    // Once every store's own barrier is scoped: a barrier before a store is redundant where
    // an earlier one already separates it from every read of the old contents.
    for (Stage &stage : stages)
      stage.store.setReadersSynced(readersSynced(stage));
  }
};

} // namespace
