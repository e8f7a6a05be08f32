// Hopper's warpgroup MMA: a tensor-core dot as wgmma.mma_async.m64nNk16, B (and A, unless it
// is in registers) read by the tensor cores straight from a swizzled shared-memory stage
// through 64-bit matrix descriptors, K-major or MN-major.
//
// The mma layout of such a dot gives every warp 16 rows (warpsPerCTA = [4g, s], M = 64g), which
// is wgmma's accumulator layout: warp w of a warpgroup holds rows 64m + 16w + {l/4, l/4 + 8} and
// columns c + 8j + 2(l%4) + {0, 1} of its column slice c.. (N / s wide), exactly as mma.sync's
// 16x8 tiles; an A operand in registers has mma.sync's A fragments. The stages are stored as
// layout::SwizzledTile lays them out: 128-byte-wide atoms, each the canonical 128-byte-swizzled
// layout (64- and 32-byte for narrower rows).
#include "Utility.h"

#include "tessera/compiler/Layout/SwizzledTile.h"

#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;

namespace tessera::tile::lowering {
namespace {

/// A staged dot operand and the address of its stage.
struct Stage : StagedOperand {
  Value start; // !llvm.ptr<3> at the stage's first byte
};

/// wgmma's swizzle mode of atom rows of `bytes` (128-, 64-, 32-byte swizzle).
int64_t swizzleMode(int64_t bytes) { return bytes == 128 ? 1 : bytes == 64 ? 2 : 3; }

/// The 64-bit matrix descriptor of the 8-row groups starting at `start` (a shared pointer).
Value matrixDescriptor(OpBuilder &b, Location loc, Value start, int64_t leadingBytes, int64_t strideBytes,
                       int64_t mode) {
  Type i64 = b.getI64Type();
  Value address = LLVM::PtrToIntOp::create(b, loc, b.getI32Type(), start);
  address = LLVM::LShrOp::create(b, loc, LLVM::AndOp::create(b, loc, address, i32Constant(b, loc, 0x3FFFF)),
                                 i32Constant(b, loc, 4));
  uint64_t fields = (uint64_t((leadingBytes >> 4) & 0x3FFF) << 16) | (uint64_t((strideBytes >> 4) & 0x3FFF) << 32) |
                    (uint64_t(mode) << 62);
  return LLVM::OrOp::create(b, loc, LLVM::ZExtOp::create(b, loc, i64, address),
                            LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(int64_t(fields))));
}

/// The descriptor of a warpgroup's rows (A: m, B: n) from `first` on (i32; when MN-major, a
/// multiple of the atom's columns or of a slice within one), at the first step of k.
Value baseDescriptor(OpBuilder &b, Location loc, const Stage &op, bool kMajor, Value first) {
  int64_t atomCols = layout::SwizzledTile(op.rows, op.cols, 2).atomColumns, atomBytes = atomCols * 2;
  // K-major: rows of atomCols elements; MN-major: atoms of rows x atomCols elements, a slice
  // within an atom starting that far into its first row.
  Value offset;
  if (kMajor) {
    offset = LLVM::MulOp::create(b, loc, first, i32Constant(b, loc, atomCols));
  } else {
    offset = LLVM::MulOp::create(b, loc, LLVM::UDivOp::create(b, loc, first, i32Constant(b, loc, atomCols)),
                                 i32Constant(b, loc, op.rows * atomCols));
    offset = LLVM::AddOp::create(b, loc, offset, LLVM::URemOp::create(b, loc, first, i32Constant(b, loc, atomCols)));
  }
  Value start = LLVM::GEPOp::create(b, loc, op.start.getType(), b.getI16Type(), op.start, ValueRange{offset});
  // K-major: k along the stored rows, 8-row groups 8 rows apart; MN-major: k down the stored
  // columns, atoms of 64 along m/n one atom apart.
  return matrixDescriptor(b, loc, start, kMajor ? 16 : op.rows * atomBytes, 8 * atomBytes, swizzleMode(atomBytes));
}

/// What to add to a base descriptor (its address counts 16 bytes) for the 16-wide step `kk`
/// of k of the rows `n0` further on (a multiple of the atom's columns when MN-major): a step
/// within an atom (K-major) or 16 rows down (MN-major).
int64_t stepUnits(const Stage &op, bool kMajor, int64_t n0, int64_t kk) {
  int64_t atomCols = layout::SwizzledTile(op.rows, op.cols, 2).atomColumns, k = kk * 16;
  int64_t elements = kMajor ? n0 * atomCols + k / atomCols * op.rows * atomCols + k % atomCols
                            : n0 / atomCols * op.rows * atomCols + k * atomCols;
  return elements * 2 / 16;
}

std::string registerList(int64_t first, int64_t count) {
  std::string list;
  for (int64_t i = 0; i < count; ++i)
    list += (i ? ", $" : "$") + std::to_string(first + i);
  return "{" + list + "}";
}

} // namespace

LogicalResult lowerWarpgroupDot(DotOp op, DotOp::Adaptor adaptor, const TypeConverter *converter,
                                ConversionPatternRewriter &rewriter) {
  Location loc = op.getLoc();
  auto accType = op.getType();
  int64_t N = accType.getDimSize(1), K = op.getA().getType().getDimSize(1);
  auto cIndex = registerIndex(toLinearLayout(accType.getEncoding(), accType.getShape()));
  // A zero accumulator is not loaded: the first step of k does not add D (scale-d 0), so its
  // registers need no zeros (which, shared with another dot's, would be copied while in flight).
  const bool zeroAcc = matchPattern(op.getAcc(), m_AnyZeroFloat());
  Values c = zeroAcc ? Values(cIndex.size()) : unpack(rewriter, loc, adaptor.getAcc());
  auto stage = [&](Value operand) -> std::optional<Stage> {
    std::optional<StagedOperand> staged = stagedOperand(operand);
    if (!staged)
      return std::nullopt;
    SharedLoadOp load = staged->load;
    return Stage{*staged, sharedStage(rewriter, loc, rewriter.getRemappedValue(load.getBuffer()),
                                      rewriter.getRemappedValue(load.getSlot()), load.getBuffer().getType())};
  };
  std::optional<Stage> a = stage(op.getA()), b = stage(op.getB());
  // Warpgroup g computes rows 64 (g % m).. of the column slice g / m, for m = wm / 4 warpgroups
  // along M.
  auto mma = cast<MmaEncodingAttr>(accType.getEncoding());
  const int64_t alongM = mma.getWarpsPerCTA()[0] / 4, slice = N / mma.getWarpsPerCTA()[1];
  // The warpgroup's index is read from lane 0 so that ptxas knows it is the same in every lane:
  // the descriptors built from it then stay in uniform registers, which wgmma reads them from,
  // instead of being moved there (R2UR) before every instruction and spilled around loops.
  Value warpgroup = LLVM::LShrOp::create(rewriter, loc, threadId(rewriter, loc).warp, i32Constant(rewriter, loc, 2));
  warpgroup = NVVM::ShflOp::create(rewriter, loc, rewriter.getI32Type(), i32Constant(rewriter, loc, -1), warpgroup,
                                   i32Constant(rewriter, loc, 0), i32Constant(rewriter, loc, 0x1f),
                                   NVVM::ShflKind::idx, UnitAttr());
  Value warpgroupRow = LLVM::MulOp::create(
      rewriter, loc, LLVM::URemOp::create(rewriter, loc, warpgroup, i32Constant(rewriter, loc, alongM)),
      i32Constant(rewriter, loc, 64));
  Value sliceColumn = LLVM::MulOp::create(
      rewriter, loc, LLVM::UDivOp::create(rewriter, loc, warpgroup, i32Constant(rewriter, loc, alongM)),
      i32Constant(rewriter, loc, slice));
  Values aRegs;
  std::map<layout::Coord, int64_t> aIndex;
  if (!a) {
    aRegs = unpack(rewriter, loc, adaptor.getA());
    aIndex = registerIndex(toLinearLayout(op.getA().getType().getEncoding(), op.getA().getType().getShape()));
  }
  Type half = op.getA().getType().getElementType(); // f16 or bf16, as LLVM spells them too
  std::string type = half.isBF16() ? "bf16" : "f16";
  Type f32 = rewriter.getF32Type();
  // One instruction covers up to 256 columns of the slice.
  int64_t width = slice <= 256 ? slice : 256;
  auto accumulator = [&](int64_t n0, int64_t r) { // register r of wgmma's D for slice columns n0..
    return cIndex.at(mmaCElement(0, n0 + 8 * (r / 4), r % 4));
  };
  // A in registers: mma.sync's A fragments of each 16-wide step of k, 4 x 32 bits a thread.
  Values aPacked;
  for (int64_t kk = 0; !a && kk < K / 16; ++kk)
    for (int e = 0; e < 8; e += 2)
      aPacked.push_back(packPair(rewriter, loc, aRegs[aIndex.at(mmaAElement(0, kk * 16, e))],
                                 aRegs[aIndex.at(mmaAElement(0, kk * 16, e + 1))]));
  // The fence hands A's registers and the accumulators through: every write to them comes
  // before it, so ptxas need not add its own (warpgroup.arrive) before each wgmma.
  Values through(aPacked);
  if (!zeroAcc)
    through.append(c.begin(), c.end());
  through = passThrough(rewriter, loc, "wgmma.fence.sync.aligned;", through);
  aPacked.assign(through.begin(), through.begin() + aPacked.size());
  if (!zeroAcc)
    c.assign(through.begin() + aPacked.size(), through.end());
  // Each operand's descriptor is computed once; every instruction adds its step's offset
  // inside its own PTX, so that a loop around the dot holds one descriptor an operand, not one
  // a step (LLVM would hoist them all, 2 registers each).
  Value aBase = a ? baseDescriptor(rewriter, loc, *a, a->kMajor(false), warpgroupRow) : Value();
  Value bBase = baseDescriptor(rewriter, loc, *b, b->kMajor(true), sliceColumn);
  for (int64_t kk = 0; kk < K / 16; ++kk)
    for (int64_t n0 = 0; n0 < slice; n0 += width) {
      int64_t count = width / 2; // accumulators a thread holds
      Values operands;
      std::string aOperand, constraints, steps = a ? "{\n.reg .b64 da, db;\n" : "{\n.reg .b64 db;\n";
      for (int64_t r = 0; r < count; ++r)
        constraints += "=f,";
      if (a) {
        operands.push_back(aBase);
        steps += "add.s64 da, $" + std::to_string(count) + ", " +
                 std::to_string(stepUnits(*a, a->kMajor(false), 0, kk)) + ";\n";
        aOperand = "da";
        constraints += "l,";
      } else {
        operands.append(aPacked.begin() + 4 * kk, aPacked.begin() + 4 * kk + 4);
        aOperand = registerList(count, 4);
        constraints += "r,r,r,r,";
      }
      operands.push_back(bBase);
      steps += "add.s64 db, $" + std::to_string(count + int64_t(operands.size()) - 1) + ", " +
               std::to_string(stepUnits(*b, b->kMajor(true), n0, kk)) + ";\n";
      constraints += "l";
      const bool accumulate = kk > 0 || !zeroAcc;
      for (int64_t r = 0; accumulate && r < count; ++r) {
        operands.push_back(c[accumulator(n0, r)]);
        constraints += "," + std::to_string(r);
      }
      // scale-d (accumulate or not), A and B unscaled; a stage is transposed when MN-major.
      std::string code = steps + "wgmma.mma_async.sync.aligned.m64n" + std::to_string(width) + "k16.f32." + type +
                         "." + type + " " + registerList(0, count) + ", " + aOperand + ", db" +
                         (accumulate ? ", 1" : ", 0") + ", 1, 1" + (a ? (a->kMajor(false) ? ", 0" : ", 1") : "") +
                         (b->kMajor(true) ? ", 0;\n}" : ", 1;\n}");
      auto resultType = LLVM::LLVMStructType::getLiteral(rewriter.getContext(), SmallVector<Type>(count, f32));
      Value d = ptx(rewriter, loc, resultType, code, constraints, operands, true);
      for (int64_t r = 0; r < count; ++r)
        c[accumulator(n0, r)] = LLVM::ExtractValueOp::create(rewriter, loc, d, r);
    }
  ptx(rewriter, loc, Type(), "wgmma.commit_group.sync.aligned;", "", {}, true);
  // The wait hands the accumulators through, so that nothing reads them before it; an async
  // dot leaves that to a later tile.dot_wait.
  if (!op.getAsync())
    c = passThrough(rewriter, loc, "wgmma.wait_group.sync.aligned 0;", c);
  rewriter.replaceOp(op, pack(rewriter, loc, converter->convertType(accType), c));
  return success();
}

LogicalResult lowerDotWait(DotWaitOp op, DotWaitOp::Adaptor adaptor, ConversionPatternRewriter &rewriter) {
  Location loc = op.getLoc();
  // One pass-through for all values: each tile's registers, in order.
  Values registers;
  SmallVector<size_t> counts;
  for (Value value : adaptor.getValues()) {
    Values unpacked = unpack(rewriter, loc, value);
    counts.push_back(unpacked.size());
    registers.append(unpacked.begin(), unpacked.end());
  }
  std::string code = "wgmma.wait_group.sync.aligned " + std::to_string(op.getPending()) + ";";
  if (registers.empty())
    ptx(rewriter, loc, Type(), code, "", {}, true);
  else
    registers = passThrough(rewriter, loc, code, registers);
  if (op.getBarrier())
    barrier(rewriter, loc);
  SmallVector<Value> results;
  size_t first = 0;
  for (auto [value, count] : llvm::zip(adaptor.getValues(), counts)) {
    results.push_back(pack(rewriter, loc, value.getType(), ValueRange(registers).slice(first, count)));
    first += count;
  }
  rewriter.replaceOp(op, results);
  return success();
}

} // namespace tessera::tile::lowering
