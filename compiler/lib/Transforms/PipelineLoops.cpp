// tile-pipeline-loops: cp.async and TMA rings for tensor-core operands (see Passes.td).
#include "tessera/compiler/Dialect/Tile/Layouts.h"
#include "tessera/compiler/Layout/SwizzledTile.h"
#include "tessera/compiler/Transforms/ConstantMemory.h"
#include "tessera/compiler/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "llvm/ADT/MapVector.h"

#include <deque>
#include <optional>

namespace tessera {
#define GEN_PASS_DEF_TILEPIPELINELOOPS
#include "tessera/compiler/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera::tile;

namespace {

/// Whether `value` is computed in `body` by ops without memory effects from values defined
/// outside the loop, the induction variable and carried values that are themselves index math
/// from one iteration to the next (a pointer advanced by a step, not an accumulator). Divisions
/// count (a persistent kernel's tile / query blocks): an iteration ahead divides by what this
/// one does, and the GPU's division does not trap. With `constants`, also by loads of single
/// values from memory the kernel never writes (a block index read from a table, as
/// block-sparse attention does).
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
  if ((!isMemoryEffectFree(def) && !indexLoad) || def->getNumRegions() != 0)
    return false;
  return llvm::all_of(def->getOperands(), [&](Value v) { return isIndexMath(v, body, seen, constants); });
}

bool isIndexMath(Value value, Block *body, const ConstantMemory *constants = nullptr) {
  DenseSet<Value> seen;
  return isIndexMath(value, body, seen, constants);
}

/// `op` cloned at the builder's position through `map` (its operands already mapped, its
/// results mapped after); a load (of a block index) reads only where `active`, as the clone may
/// run where the original would not.
void cloneMasked(OpBuilder &b, Operation *op, IRMapping &map, Value active) {
  auto load = dyn_cast<LoadOp>(op);
  if (!load) {
    b.clone(*op, map);
    return;
  }
  Location loc = load.getLoc();
  Value mask = load.getMask() ? arith::AndIOp::create(b, loc, map.lookup(load.getMask()), active).getResult() : active;
  Value other = load.getOther() ? map.lookup(load.getOther())
                                : arith::ConstantOp::create(b, loc, b.getZeroAttr(load.getType())).getResult();
  map.map(load.getResult(), LoadOp::create(b, loc, map.lookup(load.getPtr()), mask, other).getResult());
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
  cloneMasked(b, def, map, active);
  return map.lookup(value);
}

/// The body's arguments one iteration later, as far as addresses need them: the induction
/// variable plus a step, carried index math as the body yields it from `args` (with the same
/// `constants` that chose the staged loads: a carried block index read from a table, as a
/// persistent kernel reads its next tile's, is read again, only where the iteration `args`
/// exists). Other carried values (accumulators) keep `args`' value: no staged address depends
/// on them (isIndexMath), and recomputing them would copy the body's loads and dots (and its
/// inner loops) outside it.
SmallVector<Value> nextIteration(OpBuilder &b, scf::ForOp loop, Block *body, ArrayRef<Value> args,
                                 const ConstantMemory &constants) {
  auto yield = cast<scf::YieldOp>(body->getTerminator());
  Location loc = loop.getLoc();
  IRMapping map;
  Value exists; // made where some recomputed value needs it
  SmallVector<Value> next{arith::AddIOp::create(b, loc, args[0], loop.getStep())};
  for (auto [i, yielded] : llvm::enumerate(yield.getOperands())) {
    if (!isIndexMath(yielded, body, &constants)) {
      next.push_back(args[i + 1]);
      continue;
    }
    if (!exists)
      exists = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, args[0], loop.getUpperBound());
    next.push_back(recompute(b, yielded, map, body, args, exists));
  }
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
  /// not allow TMA, the block (once unit dimensions are dropped) is neither a 2-D tile of
  /// 16-bit elements of at most 256 rows with swizzled rows nor a row of at most 256 16- or
  /// 32-bit elements filling 128-byte multiples (a stage's copy lands 128-byte aligned), or
  /// its tensor is not a kernel argument (16-byte aligned) whose shape and strides (16-byte
  /// multiples, the last 1) the launcher knows.
  Value mapFor(BlockLoadOp load) {
    auto block = load.getPtr().getType().getBlockType();
    std::optional<BlockTile> tile = blockTile(block);
    if (!tmaAllowed(func) || load.getPadding() != Padding::zero || !tile)
      return {};
    const int64_t bytes = storageBytes(block.getElementType()), cols = tile->tile.getShape().back();
    int64_t atomColumns = cols, swizzleBytes = 0; // a row: one unswizzled copy
    if (tile->tile.getRank() == 2) {
      tessera::layout::SwizzledTile stored(tile->tile.getDimSize(0), cols, bytes);
      if (bytes != 2 || tile->tile.getDimSize(0) > 256 || !stored.swizzled)
        return {};
      atomColumns = stored.atomColumns;
      swizzleBytes = atomColumns * bytes;
    } else if ((bytes != 2 && bytes != 4) || cols > 256 || cols * bytes % 128) {
      return {};
    }
    MakeBlockPtrOp origin = blockPointerOrigin(load.getPtr());
    if (!origin)
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
      box.push_back(d == tile->rowDim ? tile->tile.getDimSize(0) : d == tile->colDim ? atomColumns : 1);
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
        b.getNamedAttr("swizzle_bytes", b.getI64IntegerAttr(swizzleBytes)),
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

/// The op whose result is what a stage of `load`'s block holds: the load itself, or the
/// reshape that drops its unit dimensions; null for other uses of a block with unit dimensions.
Operation *stagedResult(BlockLoadOp load, const BlockTile &tile) {
  if (load.getType().getShape() == tile.tile.getShape())
    return load;
  auto reshape = load->hasOneUse() ? dyn_cast<ReshapeOp>(*load->user_begin()) : ReshapeOp();
  return reshape && reshape.getType().getShape() == tile.tile.getShape() ? reshape : nullptr;
}

/// Block loads of the loop body the TMA copies into rings (see TensorMaps::mapFor), addressed
/// by index math: tiles used only as dot operands, and rows (per-row statistics such as the
/// backward's LSE, which the warps then read from the stage in whatever layout they use it
/// in); either through a reshape that drops the block's unit dimensions.
SmallVector<TmaLoad> tmaLoads(scf::ForOp loop, const ConstantMemory &constants, TensorMaps &maps) {
  SmallVector<TmaLoad> loads;
  for (Operation &op : *loop.getBody()) {
    auto load = dyn_cast<BlockLoadOp>(op);
    std::optional<BlockTile> tile = load ? blockTile(load.getType()) : std::nullopt;
    if (!tile || !isIndexMath(load.getPtr(), loop.getBody(), &constants))
      continue;
    Operation *operand = stagedResult(load, *tile);
    if (!operand)
      continue;
    if (tile->tile.getRank() == 1 || feedsOnlyDots(operand))
      if (Value map = maps.mapFor(load))
        loads.push_back({load, map, operand});
  }
  return loads;
}

/// Replaces one use of a staged load with a read of `buffer[slot]` at `b`; a transpose using
/// it becomes a transposed read. With `whole`, a dot's A operand is read at once, into
/// registers (B operands stay where wgmma reads them by descriptor).
void readFromRing(OpBuilder &b, OpOperand &use, Value buffer, Value slot, bool whole = false) {
  Location loc = use.get().getLoc();
  if (isTransposedDotOperand(use)) {
    auto trans = cast<TransOp>(use.getOwner());
    auto read = SharedLoadOp::create(b, loc, trans.getType(), buffer, slot, /*transposed=*/true, /*whole=*/false);
    trans.getResult().replaceAllUsesWith(read.getResult());
    trans.erase();
  } else {
    whole &= isDotOperand(use) && use.getOperandNumber() == 0;
    use.set(SharedLoadOp::create(b, loc, use.get().getType(), buffer, slot, /*transposed=*/false, whole));
  }
}

/// A TMA ring: one buffer per load it stages (same maps, same tiles, in order) and an mbarrier
/// per stage for all of them (a barrier per load, so that Q K^T waits for K alone, with or
/// without K's stage released as soon as Q K^T is done, made the H200's d = 64 forward 1-7%
/// slower, 12-04f). It lives as long as the kernel and every loop that loads those blocks fills it
/// (the two loops of a causal split, a loop run once per head of a GQA group): its
/// fills are numbered across them all, fill f landing in stage f % stages and completing that
/// stage's phase f / stages, so that a loop's first stages may be filled while the previous
/// loop (or outer iteration) still computes on the last ones.
struct TmaRing {
  SmallVector<Value> maps;
  SmallVector<Type> tiles;
  SmallVector<Value> buffers;
  Value barriers;
};

/// For each of `loads`, the index of the block among `maps` and `tiles` (a ring's, or another
/// loop's loads) it copies, those blocks holding the loads' in order, maybe with others
/// between: a loop that copies only some of the blocks of a ring's stage (the forward's last
/// deferred P @ V, a loop of one block that reads V alone, through the ring of K and V) fills
/// that ring, its stages' other buffers left as they are. Null where they do not.
std::optional<SmallVector<unsigned>> blocksOf(ArrayRef<TmaLoad> loads, ArrayRef<Value> maps, ArrayRef<Type> tiles) {
  SmallVector<unsigned> blocks;
  unsigned next = 0;
  for (const TmaLoad &load : loads) {
    while (next < maps.size() && !(maps[next] == load.map && tiles[next] == load.operand->getResult(0).getType()))
      ++next;
    if (next == maps.size())
      return std::nullopt;
    blocks.push_back(next++);
  }
  return blocks;
}

std::optional<SmallVector<unsigned>> blocksOf(ArrayRef<TmaLoad> loads, ArrayRef<TmaLoad> others) {
  SmallVector<Value> maps;
  SmallVector<Type> tiles;
  for (const TmaLoad &other : others) {
    maps.push_back(other.map);
    tiles.push_back(other.operand->getResult(0).getType());
  }
  return blocksOf(loads, maps, tiles);
}

/// Where the rings are filled for the iteration whose body arguments are `args` (masked off
/// unless `active`): cp.async copies into stage `slot`, committed as one group, and TMA loads
/// (fill number `fill`) arriving on their stage's barrier.
struct Rings {
  SmallVector<LoadOp> copied;
  SmallVector<Value> copyBuffers;
  SmallVector<TmaLoad> tma;
  TmaRing *ring = nullptr;
  SmallVector<Value> tmaBuffers; // the ring's buffer each of `tma` fills

  void fill(OpBuilder &b, Location loc, Block *body, ArrayRef<Value> args, Value active, Value slot, Value fill) {
    IRMapping map;
    for (auto [load, buffer] : llvm::zip(copied, copyBuffers))
      copyAsync(b, load, body, args, active, buffer, slot, map);
    if (!copied.empty())
      AsyncCommitOp::create(b, loc);
    if (!ring)
      return;
    for (auto [load, buffer] : llvm::zip(tma, tmaBuffers)) {
      auto copy = TmaLoadOp::create(b, loc, load.map, recompute(b, load.load.getPtr(), map, body, args, active), buffer,
                                    fill, ring->barriers, active);
      // The stage's barrier expects an arrival per buffer: the first copy arrives for those
      // this fill leaves as they are.
      if (load.load == tma.front().load && tma.size() < ring->buffers.size())
        copy.setArrivals(int32_t(1 + ring->buffers.size() - tma.size()));
    }
  }
};

/// Pipelines `loop` with its cp.async loads `copied` and, where `ring` is given, its TMA
/// loads `tma` into that ring, whose fills so far number `filled`; returns the number after
/// the loop (`filled` without a ring).
Value pipeline(scf::ForOp loop, int64_t stages, SmallVector<LoadOp> copied, SmallVector<TmaLoad> tma, TmaRing *ring,
               Value filled, const ConstantMemory &constants) {
  Rings rings{std::move(copied), {}, ring ? std::move(tma) : SmallVector<TmaLoad>{}, ring, {}};
  if (rings.copied.empty() && rings.tma.empty())
    return filled;
  if (ring) {
    std::optional<SmallVector<unsigned>> blocks = blocksOf(rings.tma, ring->maps, ring->tiles);
    for (unsigned block : *blocks)
      rings.tmaBuffers.push_back(ring->buffers[block]);
  }
  Block *body = loop.getBody();
  Location loc = loop.getLoc();
  OpBuilder b(loop);
  auto constant = [&](OpBuilder &at, int64_t v) { return arith::ConstantOp::create(at, loc, at.getI32IntegerAttr(v)); };
  // Iteration i's place in the rings: its fill number where the loop fills a TMA ring, the
  // iteration itself otherwise; its stage that place modulo the stages.
  auto place = [&](OpBuilder &at, Value iteration) {
    return ring ? arith::AddIOp::create(at, loc, filled, iteration).getResult() : iteration;
  };
  auto stageOf = [&](OpBuilder &at, Value position) {
    return arith::RemSIOp::create(at, loc, position, constant(at, stages)).getResult();
  };

  // The cp.async rings, and the first stages - 1 iterations filled before the loop.
  for (LoadOp load : rings.copied)
    rings.copyBuffers.push_back(
        SharedAllocOp::create(b, loc, SharedBufferType::get(b.getContext(), stages, cast<RankedTensorType>(load.getType()))));
  SmallVector<Value> args{loop.getLowerBound()};
  llvm::append_range(args, loop.getInitArgs());
  for (int64_t s = 0; s < stages - 1; ++s) {
    if (s > 0)
      args = nextIteration(b, loop, body, args, constants);
    Value active = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, args[0], loop.getUpperBound());
    Value position = place(b, constant(b, s));
    rings.fill(b, loc, body, args, active, stageOf(b, position), position);
  }

  // In the body: wait for this iteration's stage (with a barrier: every thread is done with the
  // stage the previous iteration read), read it, refill that previous stage.
  Operation *first = rings.copied.empty() ? rings.tma.front().load.getOperation() : rings.copied.front();
  if (!rings.tma.empty() && rings.tma.front().load->isBeforeInBlock(first))
    first = rings.tma.front().load;
  OpBuilder at(first);
  Value iteration = place(at, arith::DivSIOp::create(at, loc, arith::SubIOp::create(at, loc, loop.getInductionVar(),
                                                                                      loop.getLowerBound()),
                                                      loop.getStep()));
  Value slot = stageOf(at, iteration);
  Value ahead = arith::AddIOp::create(at, loc, iteration, constant(at, stages - 1));
  if (!rings.tma.empty()) {
    // Stage s is filled once every `stages` fills: this iteration's is its phase fill / stages.
    Value parity = arith::AndIOp::create(at, loc, arith::DivSIOp::create(at, loc, iteration, constant(at, stages)),
                                         constant(at, 1));
    WaitBarrierOp::create(at, loc, ring->barriers, slot, parity, /*sync=*/rings.copied.empty());
  }
  if (!rings.copied.empty())
    AsyncWaitOp::create(at, loc, at.getI32IntegerAttr(stages - 2));
  for (auto [load, buffer] : llvm::zip(rings.copied, rings.copyBuffers))
    for (OpOperand &use : llvm::make_early_inc_range(load->getUses()))
      readFromRing(at, use, buffer, slot);
  // A row (the backward's LSE) is read where it is used: it takes registers from there only;
  // so is a tile used in inner loops where the kernel keeps such operands in shared memory (a
  // persistent kernel's Q).
  const bool inShared = loop->getParentOfType<func::FuncOp>()->hasAttr(kInvariantOperandsInSharedAttrName);
  if (ring)
    for (auto [load, buffer] : llvm::zip(rings.tma, rings.tmaBuffers)) {
      bool row = cast<RankedTensorType>(load.operand->getResult(0).getType()).getRank() == 1;
      for (OpOperand &use : llvm::make_early_inc_range(load.operand->getUses())) {
        bool inner = use.getOwner()->getParentOfType<scf::ForOp>() != loop;
        OpBuilder reader = row || (inner && inShared) ? OpBuilder(use.getOwner()) : at;
        readFromRing(reader, use, buffer, slot, /*whole=*/inner && !inShared);
      }
    }
  SmallVector<Value> next(body->getArguments().begin(), body->getArguments().end());
  for (int64_t s = 0; s < stages - 1; ++s)
    next = nextIteration(at, loop, body, next, constants);
  Value active = arith::CmpIOp::create(at, loc, arith::CmpIPredicate::slt, next[0], loop.getUpperBound());
  rings.fill(at, loc, body, next, active, stageOf(at, ahead), ahead);
  for (LoadOp load : rings.copied)
    load.erase();
  for (TmaLoad &load : rings.tma) {
    if (load.operand != load.load.getOperation())
      load.operand->erase();
    load.load.erase();
  }

  // Nothing may still write the cp.async rings after the loop (every copy was for an
  // iteration that waited for it), and the CTA barrier keeps later fills of their memory from
  // landing under a warp still reading the last stage (with TMA rings only, that is all it does).
  b.setInsertionPointAfter(loop);
  AsyncWaitOp::create(b, loc, /*pending=*/0, /*orders_refills=*/rings.copied.empty());
  if (!ring)
    return filled;
  // The loop's iterations: ceil((upper - lower) / step), none where upper <= lower.
  Value span = arith::SubIOp::create(b, loc, loop.getUpperBound(), loop.getLowerBound());
  Value trips = arith::DivSIOp::create(
      b, loc, arith::AddIOp::create(b, loc, span, arith::SubIOp::create(b, loc, loop.getStep(), constant(b, 1))),
      loop.getStep());
  return arith::AddIOp::create(b, loc, filled, arith::MaxSIOp::create(b, loc, trips, constant(b, 0)));
}

/// Pipelines a kernel's loops in program order, numbering each TMA ring's fills across the
/// loops that fill it: a loop around such loops carries the numbers.
class Pipeliner {
public:
  Pipeliner(func::FuncOp func, int64_t stages, bool stageOutside)
      : func(func), stages(stages), stageOutside(stageOutside), constants(func), maps(func) {}

  void run() {
    // Every loop's TMA loads, and the rings they fill (made at the kernel's start), first.
    func.walk([&](scf::ForOp loop) {
      if (auto loads = tmaLoads(loop, constants, maps); !loads.empty())
        tmaOf[loop] = std::move(loads);
    });
    OpBuilder b = OpBuilder::atBlockBegin(&func.getBody().front());
    SmallVector<Value> filled;
    auto ringed = [&](Operation *loop) { return !holdsTmaLoop(loop) && inLoopsAndBranches(loop); };
    for (auto &[loop, loads] : tmaOf) {
      if (!ringed(loop))
        continue; // its loads stay block loads: the numbering cannot follow them
      // A loop copying some of another's blocks fills that one's ring.
      auto within = [&](auto &other) {
        return other.second.size() > loads.size() && ringed(other.first) && blocksOf(loads, other.second);
      };
      if (!ringOf(loads) && llvm::none_of(tmaOf, within)) {
        makeRing(b, loads, stages);
        filled.push_back(arith::ConstantOp::create(b, func.getLoc(), b.getI32IntegerAttr(0)));
      }
    }
    visit(func.getBody().front(), &filled);
    if (stageOutside && func->hasAttr(kWarpSpecializeAttrName)) {
      SmallVector<BlockLoadOp> afterLoops;
      func.walk([&](BlockLoadOp load) {
        if (!load->getParentOfType<scf::ForOp>())
          afterLoops.push_back(load);
      });
      for (BlockLoadOp load : afterLoops)
        stageOutsideLoops(load);
    }
  }

private:
  /// A ring of `stages` for `loads` (a buffer each, an mbarrier a stage), made at `b`.
  TmaRing &makeRing(OpBuilder &b, ArrayRef<TmaLoad> loads, int64_t stages) {
    TmaRing &ring = rings.emplace_back();
    for (const TmaLoad &load : loads) {
      auto tile = cast<RankedTensorType>(load.operand->getResult(0).getType());
      ring.maps.push_back(load.map);
      ring.tiles.push_back(tile);
      ring.buffers.push_back(SharedAllocOp::create(b, func.getLoc(), SharedBufferType::get(b.getContext(), stages, tile)));
    }
    ring.barriers = SharedAllocOp::create(
        b, func.getLoc(), SharedBufferType::get(b.getContext(), stages, RankedTensorType::get({1}, b.getI64Type())));
    InitBarriersOp::create(b, func.getLoc(), ring.barriers, b.getI32IntegerAttr(int32_t(loads.size())));
    return ring;
  }

  /// The index of the ring `loads` fill, if made: the one of the same blocks (maps and tiles
  /// in order), else the first that holds them among others (see blocksOf).
  std::optional<size_t> ringOf(ArrayRef<TmaLoad> loads) {
    std::optional<size_t> holding;
    for (auto [index, ring] : llvm::enumerate(rings))
      if (blocksOf(loads, ring.maps, ring.tiles)) {
        if (ring.maps.size() == loads.size())
          return index;
        if (!holding)
          holding = index;
      }
    return holding;
  }

  bool holdsTmaLoop(Operation *op) {
    return op->walk([&](scf::ForOp inner) {
               return inner != op && tmaOf.count(inner) ? WalkResult::interrupt() : WalkResult::advance();
             }).wasInterrupted();
  }

  /// Whether only loops and branches lie between `loop` and the kernel (through which the
  /// fill numbers travel as carried values and results).
  static bool inLoopsAndBranches(Operation *loop) {
    for (Operation *parent = loop->getParentOp(); !isa<func::FuncOp>(parent); parent = parent->getParentOp())
      if (!isa<scf::ForOp, scf::IfOp>(parent))
        return false;
    return true;
  }

  /// Carries the fill numbers through `branch` (which holds loops that fill rings): both
  /// branches yield their numbers after them, as new results.
  void carryThrough(scf::IfOp branch, SmallVector<Value> &filled) {
    OpBuilder b(branch);
    SmallVector<Type> types(branch.getResultTypes());
    types.append(filled.size(), b.getI32Type());
    auto carrier = scf::IfOp::create(b, branch.getLoc(), types, branch.getCondition(), /*addThenBlock=*/false,
                                     /*addElseBlock=*/false);
    carrier.getThenRegion().takeBody(branch.getThenRegion());
    if (branch.getElseRegion().empty()) {
      OpBuilder atElse = OpBuilder::atBlockEnd(&carrier.getElseRegion().emplaceBlock());
      scf::YieldOp::create(atElse, branch.getLoc());
    } else {
      carrier.getElseRegion().takeBody(branch.getElseRegion());
    }
    for (Region *region : {&carrier.getThenRegion(), &carrier.getElseRegion()}) {
      SmallVector<Value> inner(filled);
      visit(region->front(), &inner);
      Operation *yield = region->front().getTerminator();
      yield->insertOperands(yield->getNumOperands(), inner);
    }
    branch->replaceAllUsesWith(carrier.getResults().take_front(branch.getNumResults()));
    branch->erase();
    filled.assign(carrier.getResults().drop_front(types.size() - filled.size()).begin(), carrier.getResults().end());
  }

  /// Pipelines the loops in `block` in program order; with `filled`, each ring's fill number
  /// there, updated past each loop.
  void visit(Block &block, SmallVector<Value> *filled) {
    for (Operation &op : llvm::make_early_inc_range(block)) {
      auto loop = dyn_cast<scf::ForOp>(op);
      if (loop && filled && !filled->empty() && holdsTmaLoop(loop)) {
        // Carry the fill numbers through the loop: in at its start, out of its body's end.
        IRRewriter rewriter(loop.getContext());
        rewriter.setInsertionPoint(loop);
        tmaOf.erase(loop); // its own loads stay block loads
        FailureOr<LoopLikeOpInterface> replaced = loop.replaceWithAdditionalYields(
            rewriter, *filled, /*replaceInitOperandUsesInLoop=*/false,
            [](OpBuilder &, Location, ArrayRef<BlockArgument> args) { return SmallVector<Value>(args); });
        auto carrier = cast<scf::ForOp>(replaced->getOperation());
        unsigned first = carrier.getNumRegionIterArgs() - filled->size();
        SmallVector<Value> inner(carrier.getRegionIterArgs().drop_front(first));
        visit(*carrier.getBody(), &inner);
        Operation *yield = carrier.getBody()->getTerminator();
        for (auto [k, value] : llvm::enumerate(inner))
          yield->setOperand(first + k, value);
        for (auto [k, result] : llvm::enumerate(carrier.getResults().drop_front(first)))
          (*filled)[k] = result;
        // Its own copies and TMA loads (a persistent kernel's next Q) one iteration ahead, the
        // TMA's (as stages outside the loops that hide them: where the kernel stages those) in
        // a two-stage ring of their own numbered by the iteration: an iteration runs whole
        // loops, which hide them; more stages would only take shared memory.
        SmallVector<TmaLoad> own = stageOutside ? tmaLoads(carrier, constants, maps) : SmallVector<TmaLoad>{};
        TmaRing *ring = nullptr;
        Value none; // fills before the loop: its ring is its own
        if (!own.empty()) {
          OpBuilder start = OpBuilder::atBlockBegin(&func.getBody().front());
          ring = &makeRing(start, own, 2);
          none = arith::ConstantOp::create(start, carrier.getLoc(), start.getI32IntegerAttr(0));
        }
        pipeline(carrier, std::min<int64_t>(stages, 2), operandLoads(carrier, constants), std::move(own), ring, none,
                 constants);
        continue;
      }
      if (auto branch = dyn_cast<scf::IfOp>(op); branch && filled && !filled->empty() && holdsTmaLoop(branch)) {
        carryThrough(branch, *filled);
        continue;
      }
      for (Region &region : op.getRegions())
        for (Block &inner : region)
          visit(inner, nullptr); // loops nested in this op: their own copies only
      if (!loop)
        continue;
      std::optional<size_t> ring;
      if (filled && tmaOf.count(loop))
        ring = ringOf(tmaOf[loop]);
      if (!ring) {
        pipelineCopies(loop, stages);
        continue;
      }
      (*filled)[*ring] = pipeline(loop, stages, operandLoads(loop, constants), tmaOf[loop], &rings[*ring],
                                  (*filled)[*ring], constants);
    }
  }

  /// A block load outside loops whose tile only feeds dots (the forward's Q before its loops,
  /// its last deferred P @ V after them) becomes a TMA load into a stage and an mbarrier of its
  /// own, issued before the branches around it where they would run it (when its address can
  /// be computed there without a division that could trap: ops that are pure, block indices
  /// read from memory the kernel never writes). Only in warp-specialized kernels: their
  /// producer issues it in program order (the last V after its loops' last fill, so that it
  /// lands while the consumers still compute), and no other ring reuses its memory. The
  /// consumers read the stage where the load stood, or each dot in a loop reads it where the
  /// kernel keeps such operands in shared memory.
  void stageOutsideLoops(BlockLoadOp load) {
    std::optional<BlockTile> tile = blockTile(load.getType());
    Operation *operand = tile && tile->tile.getRank() == 2 ? stagedResult(load, *tile) : nullptr;
    if (!operand || !feedsOnlyDots(operand))
      return;
    Operation *top = func.getBody().front().findAncestorOpInBlock(*load);
    SmallVector<std::pair<scf::IfOp, bool>> branches; // outermost first; whether in the then-branch
    for (Operation *op = load; op != top;) {
      Region *region = op->getParentRegion();
      auto branch = dyn_cast<scf::IfOp>(region->getParentOp());
      if (!branch || !computableBefore(branch.getCondition(), top))
        return;
      branches.insert(branches.begin(), {branch, region == &branch.getThenRegion()});
      op = branch;
    }
    if (!computableBefore(load.getPtr(), top))
      return;
    Value map = maps.mapFor(load);
    if (!map)
      return;
    Location loc = load.getLoc();
    OpBuilder b(top);
    IRMapping hoisted;
    Value active = arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
    for (auto [branch, then] : branches) {
      Value taken = hoist(b, branch.getCondition(), top, hoisted, active);
      if (!then)
        taken = arith::XOrIOp::create(b, loc, taken, arith::ConstantOp::create(b, loc, b.getBoolAttr(true)));
      active = arith::AndIOp::create(b, loc, active, taken);
    }
    OpBuilder start = OpBuilder::atBlockBegin(&func.getBody().front());
    auto stage = SharedAllocOp::create(
        start, loc, SharedBufferType::get(b.getContext(), 1, cast<RankedTensorType>(operand->getResult(0).getType())));
    auto barrier = SharedAllocOp::create(
        start, loc, SharedBufferType::get(b.getContext(), 1, RankedTensorType::get({1}, b.getI64Type())));
    InitBarriersOp::create(start, loc, barrier, b.getI32IntegerAttr(1));
    Value zero = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0));
    TmaLoadOp::create(b, loc, map, hoist(b, load.getPtr(), top, hoisted, active), stage, zero, barrier, active);
    OpBuilder at(load);
    WaitBarrierOp::create(at, loc, barrier, zero, zero, /*sync=*/false);
    const bool inShared = func->hasAttr(kInvariantOperandsInSharedAttrName);
    for (OpOperand &use : llvm::make_early_inc_range(operand->getUses())) {
      bool inLoop = use.getOwner()->getParentOfType<scf::ForOp>() != nullptr;
      OpBuilder reader = inShared && inLoop ? OpBuilder(use.getOwner()) : at;
      readFromRing(reader, use, stage, zero, /*whole=*/inLoop && !inShared);
    }
    if (operand != load.getOperation())
      operand->erase();
    load.erase();
    func->setAttr(kStagedOutsideLoopsAttrName, b.getUnitAttr());
  }

  /// Whether `value` can be computed before `top` (which holds it or is defined after it).
  bool computableBefore(Value value, Operation *top) {
    Operation *def = value.getDefiningOp();
    if (!def)
      return !top->isAncestor(cast<BlockArgument>(value).getOwner()->getParentOp());
    if (!top->isAncestor(def))
      return true;
    return (isPure(def) || constants.isIndexLoad(def)) && def->getNumRegions() == 0 &&
           llvm::all_of(def->getOperands(), [&](Value operand) { return computableBefore(operand, top); });
  }

  /// `value` computed at the builder's position before `top` (computableBefore), its loads
  /// reading only where `active`.
  static Value hoist(OpBuilder &b, Value value, Operation *top, IRMapping &map, Value active) {
    if (Value mapped = map.lookupOrNull(value))
      return mapped;
    Operation *def = value.getDefiningOp();
    if (!def || !top->isAncestor(def))
      return value;
    for (Value operand : def->getOperands())
      map.map(operand, hoist(b, operand, top, map, active));
    cloneMasked(b, def, map, active);
    return map.lookup(value);
  }

  void pipelineCopies(scf::ForOp loop, int64_t ringStages) {
    pipeline(loop, ringStages, operandLoads(loop, constants), {}, nullptr, {}, constants);
  }

  func::FuncOp func;
  int64_t stages;
  bool stageOutside;
  const ConstantMemory constants; // pipelining adds no global writes
  TensorMaps maps;
  llvm::MapVector<Operation *, SmallVector<TmaLoad>> tmaOf;
  std::deque<TmaRing> rings; // stable: pipelining holds pointers to them
};

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
  using TilePipelineLoopsBase::TilePipelineLoopsBase;
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp func) {
      if (func->hasAttr(kInvariantOperandsInSharedAttrName))
        stageInvariantOperands(func);
      auto attr = func->getAttrOfType<IntegerAttr>(kNumStagesAttrName);
      int64_t stages = attr ? attr.getInt() : 3;
      if (stages < 2)
        return;
      Pipeliner(func, stages, stageOutsideLoops).run();
    });
  }
};

} // namespace
