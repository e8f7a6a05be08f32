// tile-vectorize-memory (see Passes.td): axis analysis and vector widths of memory ops.
#include "tessera/compiler/Dialect/Tile/Layouts.h"
#include "tessera/compiler/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/DenseMap.h"

#include <numeric>
#include <optional>

namespace tessera {
#define GEN_PASS_DEF_TILEVECTORIZEMEMORY
#include "tessera/compiler/Transforms/Passes.h.inc"
} // namespace tessera

using namespace mlir;
using namespace tessera::tile;

namespace {

constexpr int64_t kUnbounded = int64_t(1) << 30; // divisibility of 0

int64_t powerOfTwoDividing(int64_t v) {
  if (v == 0)
    return kUnbounded;
  return std::min(kUnbounded, v & -v);
}

/// Per dimension (one entry for scalars): runs of consecutive values, the power of two
/// dividing each run's first value, runs of equal values; and the value if it is constant.
struct AxisInfo {
  SmallVector<int64_t> contiguity, divisibility, constancy;
  std::optional<int64_t> constant;

  static AxisInfo unknown(Type type) {
    auto shape = dyn_cast<RankedTensorType>(type) ? cast<RankedTensorType>(type).getShape() : ArrayRef<int64_t>{};
    size_t rank = std::max<size_t>(1, shape.size());
    return {SmallVector<int64_t>(rank, 1), SmallVector<int64_t>(rank, 1), SmallVector<int64_t>(rank, 1), {}};
  }
  /// A value equal everywhere (a splat or a scalar) with divisibility `div`.
  static AxisInfo uniform(Type type, int64_t div, std::optional<int64_t> constant) {
    AxisInfo info = unknown(type);
    if (auto tensor = dyn_cast<RankedTensorType>(type))
      for (int64_t d = 0; d < tensor.getRank(); ++d)
        info.constancy[d] = tensor.getDimSize(d);
    for (int64_t &d : info.divisibility)
      d = div;
    info.constant = constant;
    return info;
  }
};

class Analysis {
public:
  explicit Analysis(func::FuncOp func) {
    for (BlockArgument arg : func.getArguments()) {
      int64_t div = 1;
      if (auto attr = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), "tile.divisibility"))
        div = attr.getInt();
      if (auto ptr = dyn_cast<PointerType>(arg.getType()))
        div = std::max<int64_t>(div, storageBytes(ptr.getPointeeType()));
      infos[arg] = AxisInfo::uniform(arg.getType(), div, {});
    }
    visitBlock(func.getBody().front());
  }

  AxisInfo get(Value v) const {
    auto it = infos.find(v);
    return it == infos.end() ? AxisInfo::unknown(v.getType()) : it->second;
  }

private:
  llvm::DenseMap<Value, AxisInfo> infos;

  static AxisInfo join(const AxisInfo &a, const AxisInfo &b) {
    AxisInfo out = a;
    for (size_t d = 0; d < out.contiguity.size(); ++d) {
      out.contiguity[d] = std::gcd(a.contiguity[d], b.contiguity[d]);
      out.divisibility[d] = std::gcd(a.divisibility[d], b.divisibility[d]);
      out.constancy[d] = std::gcd(a.constancy[d], b.constancy[d]);
    }
    if (a.constant != b.constant)
      out.constant.reset();
    return out;
  }

  static bool same(const AxisInfo &a, const AxisInfo &b) {
    return a.contiguity == b.contiguity && a.divisibility == b.divisibility &&
           a.constancy == b.constancy && a.constant == b.constant;
  }

  void visitBlock(Block &block) {
    for (Operation &op : block) {
      if (auto loop = dyn_cast<scf::ForOp>(op))
        visitLoop(loop);
      else if (auto branch = dyn_cast<scf::IfOp>(op))
        visitBranch(branch);
      else
        visit(&op);
    }
  }

  /// Loop-carried values: what holds for the initial value and for every yielded value, found
  /// by iterating the body to a fixed point.
  void visitLoop(scf::ForOp loop) {
    AxisInfo lower = get(loop.getLowerBound()), step = get(loop.getStep());
    AxisInfo iv = AxisInfo::unknown(loop.getInductionVar().getType());
    iv.divisibility[0] = std::gcd(lower.divisibility[0], step.divisibility[0]);
    infos[loop.getInductionVar()] = iv;
    for (auto [arg, init] : llvm::zip(loop.getRegionIterArgs(), loop.getInitArgs()))
      infos[arg] = get(init);
    auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
    for (int round = 0; round < 8; ++round) {
      visitBlock(*loop.getBody());
      bool changed = false;
      for (auto [arg, next] : llvm::zip(loop.getRegionIterArgs(), yield.getOperands())) {
        AxisInfo joined = join(get(arg), get(next));
        changed |= !same(joined, get(arg));
        infos[arg] = joined;
      }
      if (!changed)
        break;
    }
    for (auto [result, arg] : llvm::zip(loop.getResults(), loop.getRegionIterArgs()))
      infos[result] = get(arg);
  }

  void visitBranch(scf::IfOp branch) {
    visitBlock(branch.getThenRegion().front());
    if (branch.getElseRegion().empty())
      return;
    visitBlock(branch.getElseRegion().front());
    auto thenYield = cast<scf::YieldOp>(branch.thenBlock()->getTerminator());
    auto elseYield = cast<scf::YieldOp>(branch.elseBlock()->getTerminator());
    for (auto [result, a, b] : llvm::zip(branch.getResults(), thenYield.getOperands(), elseYield.getOperands()))
      infos[result] = join(get(a), get(b));
  }

  void visit(Operation *op) {
    if (op->getNumResults() != 1)
      return;
    Value result = op->getResult(0);
    Type type = result.getType();
    std::optional<AxisInfo> info;
    if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      APInt value;
      if (matchPattern(result, m_ConstantInt(&value)))
        info = AxisInfo::uniform(type, powerOfTwoDividing(value.getSExtValue()), value.getSExtValue());
    } else if (auto range = dyn_cast<MakeRangeOp>(op)) {
      info = AxisInfo::unknown(type);
      info->contiguity[0] = range.getType().getDimSize(0);
      info->divisibility[0] = powerOfTwoDividing(static_cast<int32_t>(range.getStart()));
    } else if (isa<SplatOp>(op)) {
      AxisInfo src = get(op->getOperand(0));
      info = AxisInfo::uniform(type, src.divisibility[0], src.constant);
    } else if (isa<arith::AddIOp, AddPtrOp, arith::SubIOp, arith::MulIOp>(op)) {
      info = combine(op, get(op->getOperand(0)), get(op->getOperand(1)));
    } else if (isa<arith::ExtSIOp, arith::ExtUIOp, arith::TruncIOp, ConvertLayoutOp>(op)) {
      info = get(op->getOperand(0));
    } else if (auto expand = dyn_cast<ExpandDimsOp>(op)) {
      AxisInfo src = get(expand.getSrc());
      int axis = static_cast<int>(expand.getAxis());
      info = src;
      info->contiguity.insert(info->contiguity.begin() + axis, 1);
      info->divisibility.insert(info->divisibility.begin() + axis, src.divisibility[0]);
      info->constancy.insert(info->constancy.begin() + axis, 1);
    } else if (auto broadcast = dyn_cast<BroadcastOp>(op)) {
      info = get(broadcast.getSrc());
      auto src = broadcast.getSrc().getType();
      for (int64_t d = 0; d < src.getRank(); ++d)
        if (src.getDimSize(d) == 1)
          info->constancy[d] = broadcast.getType().getDimSize(d);
    } else if (auto cmp = dyn_cast<arith::CmpIOp>(op)) {
      info = compare(get(cmp.getLhs()), get(cmp.getRhs()), type);
    } else if (isa<arith::AndIOp, arith::OrIOp>(op)) {
      AxisInfo a = get(op->getOperand(0)), b = get(op->getOperand(1));
      info = AxisInfo::unknown(type);
      for (size_t d = 0; d < info->constancy.size(); ++d)
        info->constancy[d] = std::gcd(a.constancy[d], b.constancy[d]);
    }
    infos[result] = info ? *info : AxisInfo::unknown(type);
  }

  AxisInfo combine(Operation *op, const AxisInfo &a, const AxisInfo &b) {
    AxisInfo out = AxisInfo::unknown(op->getResult(0).getType());
    int64_t scale = 1; // addptr offsets count elements; divisibility of pointers is in bytes
    if (auto addptr = dyn_cast<AddPtrOp>(op))
      scale = storageBytes(getPointeeType(getElementTypeOrSelf(addptr.getPtr().getType())));
    for (size_t d = 0; d < out.contiguity.size(); ++d) {
      out.constancy[d] = std::gcd(a.constancy[d], b.constancy[d]);
      if (isa<arith::MulIOp>(op)) {
        out.divisibility[d] = std::min(kUnbounded, a.divisibility[d] * b.divisibility[d]);
        if (b.constant == 1)
          out.contiguity[d] = a.contiguity[d];
        else if (a.constant == 1)
          out.contiguity[d] = b.contiguity[d];
      } else {
        out.divisibility[d] = std::gcd(a.divisibility[d], std::min(kUnbounded, b.divisibility[d] * scale));
        out.contiguity[d] = isa<arith::SubIOp>(op)
                                ? std::gcd(a.contiguity[d], b.constancy[d])
                                : std::max(std::gcd(a.contiguity[d], b.constancy[d]),
                                           std::gcd(b.contiguity[d], a.constancy[d]));
      }
    }
    if (a.constant && b.constant) {
      if (isa<arith::AddIOp>(op))
        out.constant = *a.constant + *b.constant;
      else if (isa<arith::SubIOp>(op))
        out.constant = *a.constant - *b.constant;
      else if (isa<arith::MulIOp>(op))
        out.constant = *a.constant * *b.constant;
    }
    return out;
  }

  /// A comparison of a run of consecutive values with a value constant along it cannot change
  /// inside blocks that start at multiples of both divisibilities.
  AxisInfo compare(const AxisInfo &a, const AxisInfo &b, Type type) {
    AxisInfo out = AxisInfo::unknown(type);
    for (size_t d = 0; d < out.constancy.size(); ++d) {
      int64_t same = std::gcd(a.constancy[d], b.constancy[d]);
      int64_t crossing = std::gcd(std::gcd(a.contiguity[d], a.divisibility[d]),
                                  std::gcd(b.constancy[d], b.divisibility[d]));
      out.constancy[d] = std::max(same, crossing);
    }
    return out;
  }
};

/// One thread's consecutive registers along `dim` that one access moves: the largest power of
/// two within `limit` that the layout keeps consecutive.
int64_t registersPerAccess(RankedTensorType type, int dim, int64_t limit) {
  int64_t power = 1;
  while (power * 2 <= limit)
    power *= 2;
  return toLinearLayout(type.getEncoding(), type.getShape()).contiguousRegisters(dim, power);
}

/// The widest vector of one thread's consecutive registers a memory op may move.
int64_t vectorWidth(const Analysis &analysis, Value ptr, Value mask) {
  auto type = dyn_cast<RankedTensorType>(ptr.getType());
  if (!type || !type.getEncoding())
    return 1;
  // Memory is contiguous along the fastest dimension: a blocked layout's order[0], else the last.
  auto blocked = dyn_cast<BlockedEncodingAttr>(type.getEncoding());
  int dim = blocked ? static_cast<int>(blocked.getOrder()[0]) : static_cast<int>(type.getRank()) - 1;
  int64_t bytes = storageBytes(getPointeeType(type.getElementType()));
  AxisInfo p = analysis.get(ptr);
  int64_t limit = std::min<int64_t>({std::max<int64_t>(1, 16 / bytes), p.contiguity[dim],
                                     std::max<int64_t>(1, p.divisibility[dim] / bytes)});
  if (mask)
    limit = std::min(limit, analysis.get(mask).constancy[dim]);
  return registersPerAccess(type, dim, limit);
}

/// The make_block_ptr a block pointer comes from through `advances` (null when it comes
/// from elsewhere, such as a loop's iteration argument).
MakeBlockPtrOp originOf(Value ptr, SmallVectorImpl<AdvanceOp> &advances) {
  while (auto advance = ptr.getDefiningOp<AdvanceOp>()) {
    advances.push_back(advance);
    ptr = advance.getPtr();
  }
  return ptr.getDefiningOp<MakeBlockPtrOp>();
}

/// The widest vector of one thread's consecutive registers a block load or store may move
/// along the block pointer's fastest dimension: its stride must be 1, every vector's first
/// address aligned (base, the other strides, the offset), and a boundary check on that
/// dimension the same across a vector (the tensor's extent divisible by its width).
int64_t blockVectorWidth(const Analysis &analysis, Value ptr, RankedTensorType type, ArrayRef<int32_t> checked) {
  SmallVector<AdvanceOp> advances;
  MakeBlockPtrOp origin = originOf(ptr, advances);
  if (!origin || !type.getEncoding())
    return 1;
  int dim = origin.getOrder()[0];
  if (analysis.get(origin.getStrides()[dim]).constant != 1)
    return 1;
  int64_t bytes = storageBytes(type.getElementType());
  int64_t limit = std::min<int64_t>(std::max<int64_t>(1, 16 / bytes),
                                    analysis.get(origin.getBase()).divisibility[0] / bytes);
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (d != dim)
      limit = std::min(limit, analysis.get(origin.getStrides()[d]).divisibility[0]);
  limit = std::min(limit, analysis.get(origin.getOffsets()[dim]).divisibility[0]);
  for (AdvanceOp advance : advances)
    limit = std::min(limit, analysis.get(advance.getOffsets()[dim]).divisibility[0]);
  if (llvm::is_contained(checked, dim))
    limit = std::min(limit, analysis.get(origin.getShape()[dim]).divisibility[0]);
  return registersPerAccess(type, dim, limit);
}

/// A memory op's tile.vector (none for other ops).
std::optional<int64_t> accessWidth(const Analysis &analysis, Operation *op) {
  if (auto load = dyn_cast<LoadOp>(op))
    return vectorWidth(analysis, load.getPtr(), load.getMask());
  if (auto store = dyn_cast<StoreOp>(op))
    return vectorWidth(analysis, store.getPtr(), store.getMask());
  if (auto copy = dyn_cast<AsyncCopyOp>(op))
    return vectorWidth(analysis, copy.getPtr(), copy.getMask());
  if (auto atomic = dyn_cast<AtomicRMWOp>(op))
    return vectorWidth(analysis, atomic.getPtr(), atomic.getMask());
  if (auto load = dyn_cast<BlockLoadOp>(op))
    return blockVectorWidth(analysis, load.getPtr(), load.getType(), load.getBoundaryCheck());
  if (auto store = dyn_cast<BlockStoreOp>(op))
    return blockVectorWidth(analysis, store.getPtr(), cast<RankedTensorType>(store.getValue().getType()),
                            store.getBoundaryCheck());
  return std::nullopt;
}

struct TileVectorizeMemoryPass : tessera::impl::TileVectorizeMemoryBase<TileVectorizeMemoryPass> {
  void runOnOperation() override {
    getOperation().walk([](func::FuncOp func) {
      if (func.isExternal())
        return;
      Analysis analysis(func);
      Builder b(func.getContext());
      func.walk([&](Operation *op) {
        if (std::optional<int64_t> width = accessWidth(analysis, op))
          op->setAttr("tile.vector", b.getI32IntegerAttr(*width));
      });
    });
  }
};

} // namespace
