#include "tessera/compiler/Dialect/Tile/Layouts.h"

#include "tessera/compiler/Layout/SwizzledTile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;

namespace tessera::tile {

BlockedEncodingAttr defaultBlockedLayout(MLIRContext *context, ArrayRef<int64_t> shape,
                                         int numWarps, int vector) {
  int rank = static_cast<int>(shape.size());
  int64_t numel = 1;
  for (int64_t s : shape)
    numel *= s;
  SmallVector<unsigned> spt(rank, 1), tpw(rank, 1), wpc(rank, 1), order;
  // Vectors along the last dimension, but not so long that threads go idle.
  int64_t perThread = std::max<int64_t>(1, numel / (32 * numWarps));
  spt[rank - 1] = static_cast<unsigned>(std::min<int64_t>({vector, shape[rank - 1], perThread}));
  unsigned lanes = 32;
  for (int d = rank - 1; d >= 0 && lanes > 1; --d) {
    unsigned fit = static_cast<unsigned>(std::max<int64_t>(1, shape[d] / spt[d]));
    tpw[d] = std::min(lanes, fit);
    lanes /= tpw[d];
  }
  tpw[0] *= lanes;
  unsigned warps = numWarps;
  for (int d = 0; d < rank && warps > 1; ++d) {
    unsigned fit = static_cast<unsigned>(std::max<int64_t>(1, shape[d] / (spt[d] * tpw[d])));
    wpc[d] = std::min(warps, fit);
    warps /= wpc[d];
  }
  wpc[0] *= warps;
  for (int d = rank - 1; d >= 0; --d)
    order.push_back(d);
  return BlockedEncodingAttr::get(context, spt, tpw, wpc, order);
}

Attribute transposedSourceLayout(Attribute resultLayout, ArrayRef<int32_t> order) {
  auto blocked = dyn_cast<BlockedEncodingAttr>(resultLayout);
  if (!blocked)
    return {};
  size_t rank = order.size();
  SmallVector<unsigned> spt(rank), tpw(rank), wpc(rank), srcOrder;
  for (size_t i = 0; i < rank; ++i) {
    spt[order[i]] = blocked.getSizePerThread()[i];
    tpw[order[i]] = blocked.getThreadsPerWarp()[i];
    wpc[order[i]] = blocked.getWarpsPerCTA()[i];
  }
  for (unsigned d : blocked.getOrder())
    srcOrder.push_back(order[d]);
  return BlockedEncodingAttr::get(resultLayout.getContext(), spt, tpw, wpc, srcOrder);
}

Attribute encodingOf(Value value) {
  if (auto tensor = dyn_cast<RankedTensorType>(value.getType()))
    return tensor.getEncoding();
  return {};
}

RankedTensorType withEncoding(Type tensorType, Attribute encoding) {
  auto tensor = cast<RankedTensorType>(tensorType);
  return RankedTensorType::get(tensor.getShape(), tensor.getElementType(), encoding);
}

std::function<layout::Coord(const layout::Coord &)> sourceCoordinate(Operation *op) {
  auto srcType = cast<RankedTensorType>(op->getOperand(0).getType());
  auto dstType = cast<RankedTensorType>(op->getResult(0).getType());
  layout::Coord srcShape(srcType.getShape().begin(), srcType.getShape().end());
  layout::Coord dstShape(dstType.getShape().begin(), dstType.getShape().end());
  if (isa<BroadcastOp>(op))
    return [srcShape](const layout::Coord &c) { return layout::broadcastSource(srcShape, c); };
  if (auto expand = dyn_cast<ExpandDimsOp>(op)) {
    int axis = static_cast<int>(expand.getAxis());
    return [axis](const layout::Coord &c) { return layout::expandDimsSource(axis, c); };
  }
  if (auto trans = dyn_cast<TransOp>(op)) {
    std::vector<int> order(trans.getOrder().begin(), trans.getOrder().end());
    return [order](const layout::Coord &c) { return layout::transSource(order, c); };
  }
  if (isa<ReshapeOp>(op))
    return [srcShape, dstShape](const layout::Coord &c) {
      return layout::reshapeSource(srcShape, dstShape, c);
    };
  return [](const layout::Coord &c) { return c; }; // convert_layout
}

layout::LinearLayout resultInSource(Operation *op) {
  auto srcType = cast<RankedTensorType>(op->getOperand(0).getType());
  auto dstType = cast<RankedTensorType>(op->getResult(0).getType());
  layout::LinearLayout dst = toLinearLayout(dstType.getEncoding(), dstType.getShape());
  auto fn = sourceCoordinate(op);
  auto mapAll = [&fn](const layout::Bases &bases) {
    layout::Bases out;
    for (const auto &basis : bases)
      out.push_back(fn(basis));
    return out;
  };
  return layout::LinearLayout(
      layout::Coord(srcType.getShape().begin(), srcType.getShape().end()),
      mapAll(dst.registers()), mapAll(dst.lanes()), mapAll(dst.warps()));
}

std::optional<std::vector<int64_t>> registerMove(Operation *op) {
  auto srcType = cast<RankedTensorType>(op->getOperand(0).getType());
  if (!srcType.getEncoding() || !encodingOf(op->getResult(0)))
    return std::nullopt;
  return resultInSource(op).registersFrom(toLinearLayout(srcType.getEncoding(), srcType.getShape()));
}

bool mixesAxisWithOthers(const layout::LinearLayout &layout, int axis) {
  for (const auto *bases : {&layout.registers(), &layout.lanes(), &layout.warps()})
    for (const auto &basis : *bases)
      for (int d = 0; d < layout.rank(); ++d)
        if (d != axis && basis[axis] != 0 && basis[d] != 0)
          return true;
  return false;
}

int64_t storageBytes(Type elementType) {
  if (isa<PointerType>(elementType))
    return 8;
  return std::max<int64_t>(1, elementType.getIntOrFloatBitWidth() / 8);
}

int64_t ringBytes(SharedBufferType type) {
  RankedTensorType tile = type.getTileType();
  return type.getStages() * tile.getNumElements() * storageBytes(tile.getElementType());
}

int64_t firstFit(std::vector<std::pair<int64_t, int64_t>> taken, int64_t bytes, int64_t align) {
  llvm::sort(taken);
  int64_t offset = 0;
  for (auto [lo, hi] : taken)
    if (offset + bytes > lo)
      offset = std::max<int64_t>(offset, llvm::alignTo(hi, align));
  return offset;
}

int64_t scratchBytes(Operation *op) {
  auto bytesOf = [](Type type) {
    auto tensor = cast<RankedTensorType>(type);
    return tensor.getNumElements() * storageBytes(tensor.getElementType());
  };
  if (isa<ConvertLayoutOp, BroadcastOp, ExpandDimsOp, TransOp, ReshapeOp>(op))
    return registerMove(op) ? 0 : bytesOf(op->getOperand(0).getType());
  if (auto reduce = dyn_cast<ReduceOp>(op)) {
    auto src = reduce.getSrc().getType();
    layout::LinearLayout layout = toLinearLayout(src.getEncoding(), src.getShape());
    int64_t warpsAlongAxis = 1;
    for (const auto &basis : layout.warps())
      if (basis[reduce.getAxis()] != 0)
        warpsAlongAxis *= 2;
    if (warpsAlongAxis == 1)
      return 0;
    int64_t rest = src.getNumElements() / src.getDimSize(reduce.getAxis());
    // Partial values, and for argmax/argmin their i32 indices.
    return warpsAlongAxis * rest * (storageBytes(src.getElementType()) + 4);
  }
  if (auto dot = dyn_cast<DotOp>(op)) // tensor-core dots read registers; CUDA-core dots stage a, b
    return isa_and_present<MmaEncodingAttr>(dot.getType().getEncoding())
               ? 0
               : bytesOf(dot.getA().getType()) + bytesOf(dot.getB().getType());
  return 0;
}

/// The kernel function holding `op` (or `op` itself), null outside one.
static func::FuncOp kernelOf(Operation *op) {
  auto func = op->getParentOfType<func::FuncOp>();
  return func || !isa<func::FuncOp>(op) ? func : cast<func::FuncOp>(op);
}

/// The integer attribute `name` of the kernel holding `op`, or `fallback`.
static int kernelCount(Operation *op, StringRef name, int fallback) {
  if (auto func = kernelOf(op))
    if (auto attr = func->getAttrOfType<IntegerAttr>(name))
      return static_cast<int>(attr.getInt());
  return fallback;
}

int numWarpsOf(Operation *op) { return kernelCount(op, kNumWarpsAttrName, 4); }

int producerWarpsOf(Operation *op) { return kernelCount(op, kProducerWarpsAttrName, 0); }

int entryRegistersOf(Operation *op) {
  const int threads = (numWarpsOf(op) + producerWarpsOf(op)) * 32;
  return std::min(255, 65536 / kernelCount(op, kProgramsPerSmAttrName, 1) / threads / 8 * 8);
}

bool warpgroupMmaAllowed(Operation *op) {
  auto func = kernelOf(op);
  return func && func->hasAttr(kWarpgroupMmaAttrName);
}

bool storesStaged(Operation *op) {
  auto func = kernelOf(op);
  return func && func->hasAttr(kStagedStoresAttrName);
}

bool tmaAllowed(Operation *op) {
  auto func = kernelOf(op);
  return func && func->hasAttr(kTmaAttrName);
}

int64_t bulkAddStagingBytes(BulkAddOp op) {
  if (!tmaAllowed(op))
    return 0;
  return cast<RankedTensorType>(op.getValues().getType()).getNumElements() * 4 * (bulkAddAlternates(op) ? 2 : 1);
}

bool bulkAddAlternates(BulkAddOp op) {
  auto loop = dyn_cast<scf::ForOp>(op->getParentOp());
  return loop && !loop->getParentOfType<scf::ForOp>();
}

/// Whether ldmatrix can read a tile stored in shared memory as `storage` into `result`'s
/// tensor-core fragments: 16-bit elements, stored rows of at least 32 bytes (the swizzle's unit).
bool readsWithLdmatrix(RankedTensorType result, RankedTensorType storage) {
  return isa_and_present<DotOperandEncodingAttr>(result.getEncoding()) &&
         result.getElementType().getIntOrFloatBitWidth() == 16 && storage.getDimSize(1) * 2 >= 32;
}

/// Whether the tensor-core dots `load` feeds read its fragments themselves, one 16-wide step
/// of k just before that step's mma.sync: a warp then holds one step of an operand in
/// registers, not all of it (a 64x128 B operand would take 128 registers a thread); not a
/// load marked `whole`.
bool readByDotSteps(SharedLoadOp load) {
  return !load.getWhole() && readsWithLdmatrix(load.getType(), load.getBuffer().getType().getTileType()) &&
         llvm::all_of(load->getUses(), [](OpOperand &use) {
           auto dot = dyn_cast<DotOp>(use.getOwner());
           return dot && use.getOperandNumber() < 2 && isa_and_present<MmaEncodingAttr>(dot.getType().getEncoding());
         });
}

std::optional<StagedOperand> stagedOperand(Value operand) {
  auto load = operand.getDefiningOp<SharedLoadOp>();
  if (!load || !readByDotSteps(load))
    return std::nullopt;
  auto tile = load.getBuffer().getType().getTileType();
  return StagedOperand{load, tile.getDimSize(0), tile.getDimSize(1), load.getTransposed()};
}

/// Whether wgmma reads a stored tile of `rows` x `cols` 16-bit elements as an operand whose k
/// runs along the stored rows (`kMajor`) or down its columns: swizzled, whole 8-row groups,
/// stages 1024-byte aligned, and MN-major operands in full 128-byte atoms.
bool describable(int64_t rows, int64_t cols, bool kMajor) {
  const layout::SwizzledTile tile(rows, cols, 2);
  if (!llvm::isPowerOf2_64(cols) || !tile.swizzled || rows % 8 != 0 || rows * cols * 2 % 1024 != 0)
    return false;
  return kMajor || tile.atomColumns * 2 == 128;
}

bool lowersToWarpgroupMma(DotOp op) {
  auto mma = dyn_cast_or_null<MmaEncodingAttr>(op.getType().getEncoding());
  if (!mma || !warpgroupMmaAllowed(op))
    return false;
  int64_t M = op.getType().getDimSize(0), N = op.getType().getDimSize(1), K = op.getA().getType().getDimSize(1);
  // Warpgroups split M in blocks of 64 rows, then N in slices (LinearLayout::mma's warp order).
  unsigned wm = mma.getWarpsPerCTA()[0], wn = mma.getWarpsPerCTA()[1];
  int64_t slice = N / wn;
  if (wm % 4 != 0 || M != 16 * wm || slice % 8 != 0 || K % 16 != 0 || !op.getType().getElementType().isF32())
    return false;
  // B is read by descriptor: in the stored tile [N][K] (k along rows, read transposed) or [K][N]
  // (a warpgroup's slice then spans whole 64-column atoms or lies within one: the swizzle is
  // of the address, so a slice may start 16-byte chunks into an atom's rows, as k steps do
  // in a K-major atom).
  auto b = stagedOperand(op.getB());
  if (!b || !describable(b->rows, b->cols, b->kMajor(true)) || (slice > 256 && slice % 256 != 0) ||
      (!b->kMajor(true) && wn > 1 && slice % 64 != 0 && 64 % slice != 0))
    return false;
  // A from registers, or from a stage stored [M][K] or [K][M] (its warpgroups' 64 rows then
  // start on a 64-column atom).
  auto a = stagedOperand(op.getA());
  return !a || describable(a->rows, a->cols, a->kMajor(false));
}

bool isAsyncDot(Operation *op) {
  auto dot = dyn_cast<DotOp>(op);
  return dot && dot.getAsync();
}

} // namespace tessera::tile
