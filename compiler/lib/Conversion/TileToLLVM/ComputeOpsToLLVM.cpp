// Lowering of the tile ops that compute: constants, ranges, splats, elementwise math, shape
// ops and layout conversions, reductions, the CUDA-core dot and grid queries.
#include "Utility.h"

#include "tessera/compiler/Exp2Polynomial.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <map>

using namespace mlir;

namespace tessera::tile::lowering {

namespace {

Type registerType(const TypeConverter *converter, Type tileType) {
  auto structType = cast<LLVM::LLVMStructType>(converter->convertType(tileType));
  return structType.getBody().front();
}

struct ConstantLowering : ConvertOpToLLVMPattern<arith::ConstantOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(arith::ConstantOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto tensor = dyn_cast<RankedTensorType>(op.getType());
    if (!tensor || !tensor.getEncoding())
      return failure();
    auto splat = dyn_cast<SplatElementsAttr>(op.getValue());
    if (!splat)
      return rewriter.notifyMatchFailure(op, "only splat tile constants are supported");
    Type structType = getTypeConverter()->convertType(tensor);
    Type element = registerType(getTypeConverter(), tensor);
    Value scalar = LLVM::ConstantOp::create(rewriter, op.getLoc(), element,
                                            cast<TypedAttr>(splat.getSplatValue<Attribute>()));
    int64_t n = cast<LLVM::LLVMStructType>(structType).getBody().size();
    rewriter.replaceOp(op, pack(rewriter, op.getLoc(), structType, Values(n, scalar)));
    return success();
  }
};

struct MakeRangeLowering : ConvertOpToLLVMPattern<MakeRangeOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(MakeRangeOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = op.getType();
    auto coords = registerCoordinates(rewriter, loc, toLinearLayout(type.getEncoding(), type.getShape()));
    Value start = i32Constant(rewriter, loc, static_cast<int32_t>(op.getStart()));
    Values values;
    for (const Values &coord : coords)
      values.push_back(LLVM::AddOp::create(rewriter, loc, start, coord[0]));
    rewriter.replaceOp(op, pack(rewriter, loc, getTypeConverter()->convertType(type), values));
    return success();
  }
};

struct SplatLowering : ConvertOpToLLVMPattern<SplatOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(SplatOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto structType = cast<LLVM::LLVMStructType>(getTypeConverter()->convertType(op.getType()));
    Values values(structType.getBody().size(), adaptor.getSrc());
    rewriter.replaceOp(op, pack(rewriter, op.getLoc(), structType, values));
    return success();
  }
};

/// Any elementwise arith/math op on tiles: the same op on each register.
struct ElementwiseLowering : ConversionPattern {
  ElementwiseLowering(TypeConverter &converter, MLIRContext *context)
      : ConversionPattern(converter, MatchAnyOpTypeTag(), /*benefit=*/1, context) {}
  LogicalResult matchAndRewrite(Operation *op, ArrayRef<Value> operands,
                                ConversionPatternRewriter &rewriter) const override {
    if (!op->hasTrait<OpTrait::Elementwise>() || op->getNumResults() != 1 || op->getNumRegions())
      return failure();
    auto tensor = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!tensor || !tensor.getEncoding())
      return failure();
    Location loc = op->getLoc();
    Type structType = getTypeConverter()->convertType(tensor);
    Type element = registerType(getTypeConverter(), tensor);
    std::vector<Values> registers;
    for (Value operand : operands)
      registers.push_back(unpack(rewriter, loc, operand));
    Values results;
    for (size_t r = 0; r < cast<LLVM::LLVMStructType>(structType).getBody().size(); ++r) {
      OperationState state(loc, op->getName());
      for (const Values &values : registers)
        state.addOperands(values[r]);
      state.addTypes(element);
      state.addAttributes(op->getAttrs());
      results.push_back(rewriter.create(state)->getResult(0));
    }
    rewriter.replaceOp(op, pack(rewriter, loc, structType, results));
    return success();
  }
};

/// 2^x of an f32 register on the FMA and integer pipes (exp2_polynomial.h has the arithmetic
/// and its error).
Value polynomialExp2(OpBuilder &b, Location loc, Value x) {
  namespace poly = tessera::compiler::exp2_polynomial;
  Type f32 = b.getF32Type(), i32 = b.getI32Type();
  auto constant = [&](float value) { return LLVM::ConstantOp::create(b, loc, f32, b.getF32FloatAttr(value)); };
  // NaN-propagating clamps (min.NaN / max.NaN): NaN stays NaN through the multiply below.
  x = LLVM::MinimumOp::create(b, loc, LLVM::MaximumOp::create(b, loc, x, constant(poly::kLowest)),
                              constant(poly::kHighest));
  Value shifted = ptx(b, loc, f32, "add.rm.f32 $0, $1, $2;", "=f,f,f", {x, constant(poly::kShift)}, false);
  Value f = LLVM::FSubOp::create(b, loc, x, LLVM::FSubOp::create(b, loc, shifted, constant(poly::kShift)));
  Value p = constant(poly::kC3);
  for (float c : {poly::kC2, poly::kC1, 1.0f})
    p = LLVM::FMAOp::create(b, loc, p, f, constant(c));
  Value exponent = LLVM::ShlOp::create(b, loc, LLVM::BitcastOp::create(b, loc, i32, shifted),
                                       i32Constant(b, loc, poly::kMantissaBits));
  Value scaleBits = LLVM::AddOp::create(b, loc, exponent, i32Constant(b, loc, static_cast<int32_t>(poly::kOneBits)));
  return LLVM::FMulOp::create(b, loc, p, LLVM::BitcastOp::create(b, loc, f32, scaleBits));
}

/// exp2 and exp of f32 tiles in kernels with tile.exp2_on_fma = n: n of every 8 registers on
/// the FMA pipe (polynomialExp2), the others the scalar op (ex2.approx, on the multi-function
/// unit, which computes 16 a clock an SM against 128 FMAs): where a softmax waits on that
/// unit, both pipes share its exponentials.
template <typename MathOp, bool NaturalBase> struct SplitExponentialLowering : ConvertOpToLLVMPattern<MathOp> {
  SplitExponentialLowering(const LLVMTypeConverter &converter)
      : ConvertOpToLLVMPattern<MathOp>(converter, /*benefit=*/2) {}
  LogicalResult matchAndRewrite(MathOp op, typename MathOp::Adaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto tensor = dyn_cast<RankedTensorType>(op.getType());
    auto func = op->template getParentOfType<func::FuncOp>();
    auto eighths = func ? func->template getAttrOfType<IntegerAttr>(kExp2OnFmaAttrName) : IntegerAttr();
    if (!tensor || !tensor.getEncoding() || !tensor.getElementType().isF32() || !eighths)
      return failure();
    Location loc = op.getLoc();
    Values results;
    for (auto [index, x] : llvm::enumerate(unpack(rewriter, loc, adaptor.getOperand()))) {
      if (!tessera::compiler::exp2_polynomial::onFma(index, eighths.getInt())) {
        results.push_back(MathOp::create(rewriter, loc, x));
        continue;
      }
      if (NaturalBase)
        x = timesLog2e(rewriter, loc, x);
      results.push_back(polynomialExp2(rewriter, loc, x));
    }
    rewriter.replaceOp(op, pack(rewriter, loc, this->getTypeConverter()->convertType(tensor), results));
    return success();
  }
};

/// 2-D bases with their coordinates swapped (a layout of the transposed tile).
layout::Bases swapped(const layout::Bases &bases) {
  layout::Bases out;
  for (const layout::Coord &basis : bases)
    out.push_back({basis[1], basis[0]});
  return out;
}

/// Where a lane points in an ldmatrix/stmatrix of four 8x8 matrices: row lane % 8 of matrix
/// lane / 8, whose low bit and high bit say which 8 rows and 8 columns of a 16x16 block it is.
struct MatrixLane {
  Value row, low, high;
};
MatrixLane matrixLane(OpBuilder &b, Location loc) {
  Value lane = threadId(b, loc).lane;
  Value matrix = LLVM::LShrOp::create(b, loc, lane, i32Constant(b, loc, 3));
  return {LLVM::AndOp::create(b, loc, lane, i32Constant(b, loc, 7)),
          LLVM::AndOp::create(b, loc, matrix, i32Constant(b, loc, 1)),
          LLVM::LShrOp::create(b, loc, matrix, i32Constant(b, loc, 1))};
}

/// loadDotOperand's kStep for all steps of k.
constexpr int64_t kEveryStep = -1;

/// Tensor-core operand fragments of 16-bit elements straight from (swizzled) shared memory:
/// ldmatrix.x4 per 16x16 tile of A and per 16x16 of B (x2 when a warp has one 8-column B
/// tile). Each lane points at one 16-byte row of one 8x8 matrix; the instruction hands every
/// lane its fragment. A stage stored transposed (`storage` is the tile transposed) is read
/// with the opposite .trans, which hands each lane the same elements. With `kStep` (not
/// kEveryStep), only the fragments of that 16-wide step of k are read (the other registers stay
/// null). A plain index, not a std::optional: GCC compares an optional's value before its flag,
/// which valgrind reports as a branch on uninitialized memory (lit --vg runs every pass).
Values loadDotOperand(OpBuilder &b, Location loc, Value base, RankedTensorType storage,
                      DotOperandEncodingAttr dot, Type element, bool transposed,
                      int64_t kStep = kEveryStep) {
  int64_t rows = storage.getDimSize(transposed ? 1 : 0), cols = storage.getDimSize(transposed ? 0 : 1);
  auto dstLayout = toLinearLayout(dot, {rows, cols});
  auto mma = cast<MmaEncodingAttr>(dot.getParent());
  int64_t wm = mma.getWarpsPerCTA()[0], wn = mma.getWarpsPerCTA()[1];
  bool isA = dot.getOpIdx() == 0;
  auto index = registerIndex(dstLayout);
  Values warp = warpOffset(b, loc, dstLayout);
  auto add = [&](Value x, Value y) { return LLVM::AddOp::create(b, loc, x, y).getResult(); };
  auto addConst = [&](Value x, int64_t c) { return add(x, i32Constant(b, loc, c)); };
  auto times8 = [&](Value x) { return LLVM::ShlOp::create(b, loc, x, i32Constant(b, loc, 3)).getResult(); };
  const auto [laneRow, matrixLow, matrixHigh] = matrixLane(b, loc);
  Type i32 = b.getI32Type();
  Values out(dstLayout.numRegisters());

  // `count` matrices; this lane's matrix starts at (row, col) of the operand. Word q holds
  // the pair of matrix q at `first(q)` and the element after it along the pair's axis.
  auto ldmatrix = [&](int count, Value row, Value col, bool trans, auto first) {
    Value srow = transposed ? add(col, laneRow) : add(row, laneRow), scol = transposed ? row : col;
    Value idx = sharedIndex(b, loc, {srow, scol}, storage.getShape(), 2, /*swizzle=*/true);
    Value address = LLVM::GEPOp::create(b, loc, base.getType(), element, base, ValueRange{idx});
    std::string operands;
    for (int q = 0; q < count; ++q)
      operands += (q ? ", $" : "$") + std::to_string(q);
    std::string constraints;
    for (int q = 0; q < count; ++q)
      constraints += "=r,";
    auto result = LLVM::LLVMStructType::getLiteral(b.getContext(), SmallVector<Type>(count, i32));
    Value words = ptx(b, loc, result,
                      "ldmatrix.sync.aligned.m8n8.x" + std::to_string(count) + (trans != transposed ? ".trans" : "") +
                          ".shared.b16 {" + operands + "}, [$" + std::to_string(count) + "];",
                      constraints + "r", {address}, true);
    for (int q = 0; q < count; ++q) {
      layout::Coord at = first(q);
      layout::Coord next = isA ? layout::Coord{at[0], at[1] + 1} : layout::Coord{at[0] + 1, at[1]};
      Value v = LLVM::BitcastOp::create(b, loc, VectorType::get({2}, element), LLVM::ExtractValueOp::create(b, loc, words, q));
      out[index.at(at)] = LLVM::ExtractElementOp::create(b, loc, v, i32Constant(b, loc, 0));
      out[index.at(next)] = LLVM::ExtractElementOp::create(b, loc, v, i32Constant(b, loc, 1));
    }
  };
  if (isA) {
    // Tile (i, kk), matrix q: rows +8*(q%2), k +8*(q/2).
    for (int64_t i = 0; i < rows / wm / 16; ++i)
      for (int64_t kk = 0; kk < cols / 16; ++kk)
        if (kStep == kEveryStep || kk == kStep)
            ldmatrix(4, addConst(add(warp[0], times8(matrixLow)), i * 16), addConst(times8(matrixHigh), kk * 16), false,
                   [&](int q) { return layout::Coord{i * 16 + 8 * (q % 2), kk * 16 + 8 * (q / 2)}; });
  } else {
    // Tiles (kk, j) and (kk, j+1), matrix q: k +8*(q%2), columns +8*(q/2).
    int64_t tiles = cols / wn / 8, perLoad = tiles >= 2 ? 2 : 1;
    for (int64_t kk = 0; kk < rows / 16; ++kk)
      for (int64_t j = 0; j < tiles && (kStep == kEveryStep || kk == kStep); j += perLoad) {
        Value col = addConst(warp[1], j * 8);
        if (perLoad == 2)
          col = add(col, times8(matrixHigh));
        ldmatrix(2 * perLoad, addConst(times8(matrixLow), kk * 16), col, true,
                 [&](int q) { return layout::Coord{kk * 16 + 8 * (q % 2), (j + q / 2) * 8}; });
      }
  }
  return out;
}

/// Whether stmatrix can store `type`: 16-bit elements in an mma layout whose warps hold whole
/// 16x16 blocks, into a swizzled tile (rows of at least 32 bytes).
bool storesWithStmatrix(RankedTensorType type) {
  auto mma = dyn_cast_or_null<MmaEncodingAttr>(type.getEncoding());
  if (!mma || type.getRank() != 2 || type.getElementType().getIntOrFloatBitWidth() != 16)
    return false;
  int64_t rows = type.getDimSize(0), cols = type.getDimSize(1);
  return rows % (16 * mma.getWarpsPerCTA()[0]) == 0 && cols % (16 * mma.getWarpsPerCTA()[1]) == 0 && cols * 2 >= 32;
}

/// The mma-layout tile `registers` of `type` into the swizzled tile at `base`: stmatrix.x4 per
/// 16x16 block a warp holds, matrix q its rows +8*(q%2), columns +8*(q/2) (the registers of
/// mma's accumulator fragments, paired); lane l points at row l%8 of matrix l/8. One address a
/// block instead of one a register pair.
void storeWithStmatrix(OpBuilder &b, Location loc, Value base, RankedTensorType type, ArrayRef<Value> registers) {
  auto layout = toLinearLayout(type.getEncoding(), type.getShape());
  auto index = registerIndex(layout);
  Values warp = warpOffset(b, loc, layout);
  auto add = [&](Value x, int64_t c) { return LLVM::AddOp::create(b, loc, x, i32Constant(b, loc, c)).getResult(); };
  const auto [laneRow, matrixLow, matrixHigh] = matrixLane(b, loc);
  Value matrixRow = LLVM::ShlOp::create(b, loc, matrixLow, i32Constant(b, loc, 3));
  Value matrixCol = LLVM::ShlOp::create(b, loc, matrixHigh, i32Constant(b, loc, 3));
  Value row0 = LLVM::AddOp::create(b, loc, LLVM::AddOp::create(b, loc, warp[0], laneRow), matrixRow);
  Value col0 = LLVM::AddOp::create(b, loc, warp[1], matrixCol);
  Type element = type.getElementType();
  for (const auto &[corner, reg] : index) {
    if (corner[0] % 16 != 0 || corner[1] % 16 != 0)
      continue;
    Values words;
    for (int q = 0; q < 4; ++q) {
      layout::Coord at{corner[0] + 8 * (q % 2), corner[1] + 8 * (q / 2)};
      words.push_back(packPair(b, loc, registers[index.at(at)], registers[index.at({at[0], at[1] + 1})]));
    }
    Value idx = sharedIndex(b, loc, {add(row0, corner[0]), add(col0, corner[1])}, type.getShape(), 2, /*swizzle=*/true);
    Value address = LLVM::GEPOp::create(b, loc, base.getType(), element, base, ValueRange{idx});
    words.insert(words.begin(), address);
    ptx(b, loc, Type(), "stmatrix.sync.aligned.m8n8.x4.shared.b16 [$0], {$1, $2, $3, $4};", "r,r,r,r,r", words,
        true);
  }
}

/// broadcast, expand_dims, trans, reshape, convert_layout: register moves when the layouts
/// allow, otherwise a round trip through shared memory (written with Hopper's stmatrix from
/// tensor-core accumulators, read with ldmatrix when the result feeds a tensor core).
template <typename OpT> struct MoveLowering : ConvertOpToLLVMPattern<OpT> {
  using ConvertOpToLLVMPattern<OpT>::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(OpT op, typename OpT::Adaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Values src = unpack(rewriter, loc, adaptor.getSrc());
    Type structType = this->getTypeConverter()->convertType(op.getType());
    Values out;
    if (auto move = registerMove(op)) {
      for (int64_t reg : *move)
        out.push_back(src[reg]);
    } else {
      auto srcType = cast<RankedTensorType>(op.getSrc().getType());
      Type element = registerType(this->getTypeConverter(), srcType);
      Value base = sharedMemory(rewriter, loc, op, smemOffset(op));
      if (warpgroupMmaAllowed(op) && storesWithStmatrix(srcType))
        storeWithStmatrix(rewriter, loc, base, srcType, src);
      else
        storeTileToShared(rewriter, loc, base, toLinearLayout(srcType.getEncoding(), srcType.getShape()),
                          src, element, /*swizzle=*/true);
      barrier(rewriter, loc);
      auto dstType = cast<RankedTensorType>(op.getType());
      // Tensor-core fragments, of the tile or (a 2-D trans) of its transpose: ldmatrix.
      if (isa<ConvertLayoutOp, TransOp>(op) && srcType.getRank() == 2 && readsWithLdmatrix(dstType, srcType))
        out = loadDotOperand(rewriter, loc, base, srcType, cast<DotOperandEncodingAttr>(dstType.getEncoding()), element,
                             /*transposed=*/isa<TransOp>(op));
      else
        out = loadTileFromShared(rewriter, loc, base, resultInSource(op), element, /*swizzle=*/true);
      barrier(rewriter, loc);
    }
    rewriter.replaceOp(op, pack(rewriter, loc, structType, out));
    return success();
  }
};

/// A stage of a shared ring into registers (transposed if asked): ldmatrix for 16-bit
/// tensor-core fragments; nothing when the dots read it step by step.
struct SharedLoadLowering : ConvertOpToLLVMPattern<SharedLoadOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(SharedLoadOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    if (readByDotSteps(op)) {
      rewriter.replaceOpWithNewOp<LLVM::PoisonOp>(op, getTypeConverter()->convertType(op.getType()));
      return success();
    }
    auto type = op.getType();
    auto storage = op.getBuffer().getType().getTileType();
    Value stage = sharedStage(rewriter, loc, adaptor.getBuffer(), adaptor.getSlot(), op.getBuffer().getType());
    Type element = registerType(getTypeConverter(), type);
    layout::LinearLayout view = toLinearLayout(type.getEncoding(), type.getShape());
    if (op.getTransposed()) // the same registers, over the stored tile's coordinates
      view = layout::LinearLayout(layout::Coord(storage.getShape().begin(), storage.getShape().end()),
                                  swapped(view.registers()), swapped(view.lanes()), swapped(view.warps()));
    Values out = readsWithLdmatrix(type, storage)
                     ? loadDotOperand(rewriter, loc, stage, storage, cast<DotOperandEncodingAttr>(type.getEncoding()),
                                      element, op.getTransposed())
                     : loadTileFromShared(rewriter, loc, stage, view, element, /*swizzle=*/true);
    rewriter.replaceOp(op, pack(rewriter, loc, getTypeConverter()->convertType(type), out));
    return success();
  }
};

/// A tile from registers into a stage, laid out as the rings' stages are. The barrier before
/// it: every warp is done reading the stage's previous contents (async dots that read it were
/// waited for before the store), unless an earlier one already saw to it (readers_synced);
/// after it, the fence hands the stores to the tensor cores' (async) proxy and the barrier
/// makes all of them visible, to the storing warpgroup alone where only it reads them back
/// (warpgroup_local).
struct SharedStoreLowering : ConvertOpToLLVMPattern<SharedStoreOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(SharedStoreOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getValue().getType());
    Value stage = sharedStage(rewriter, loc, adaptor.getBuffer(), adaptor.getSlot(), op.getBuffer().getType());
    Values registers = unpack(rewriter, loc, adaptor.getValue());
    auto sync = [&] { op.getWarpgroupLocal() ? warpgroupBarrier(rewriter, loc) : barrier(rewriter, loc); };
    if (!op.getReadersSynced())
      sync();
    if (storesWithStmatrix(type))
      storeWithStmatrix(rewriter, loc, stage, type, registers);
    else
      storeTileToShared(rewriter, loc, stage, toLinearLayout(type.getEncoding(), type.getShape()), registers,
                        registerType(getTypeConverter(), type), /*swizzle=*/true);
    ptx(rewriter, loc, Type(), "fence.proxy.async.shared::cta;", "", {}, true);
    sync();
    rewriter.eraseOp(op);
    return success();
  }
};

/// Value as i32 for a shuffle, and back.
Value toShuffleWord(OpBuilder &b, Location loc, Value v) {
  Type type = v.getType();
  unsigned bits = type.getIntOrFloatBitWidth();
  if (isa<FloatType>(type))
    v = LLVM::BitcastOp::create(b, loc, b.getIntegerType(bits), v);
  if (bits < 32)
    v = LLVM::ZExtOp::create(b, loc, b.getI32Type(), v);
  return v;
}

Value fromShuffleWord(OpBuilder &b, Location loc, Value word, Type type) {
  unsigned bits = type.getIntOrFloatBitWidth();
  if (bits < 32)
    word = LLVM::TruncOp::create(b, loc, b.getIntegerType(bits), word);
  if (isa<FloatType>(type))
    word = LLVM::BitcastOp::create(b, loc, type, word);
  return word;
}

Value shuffleXor(OpBuilder &b, Location loc, Value v, int laneMask) {
  Type type = v.getType();
  auto shfl = [&](Value word) -> Value {
    return NVVM::ShflOp::create(b, loc, b.getI32Type(), i32Constant(b, loc, -1), word,
                                i32Constant(b, loc, laneMask), i32Constant(b, loc, 0x1f),
                                NVVM::ShflKind::bfly, UnitAttr());
  };
  if (type.getIntOrFloatBitWidth() == 64) {
    Value bits = isa<FloatType>(type) ? LLVM::BitcastOp::create(b, loc, b.getI64Type(), v).getResult() : v;
    Value lo = shfl(LLVM::TruncOp::create(b, loc, b.getI32Type(), bits));
    Value hi = shfl(LLVM::TruncOp::create(
        b, loc, b.getI32Type(), LLVM::LShrOp::create(b, loc, bits, constantOf(b, loc, b.getI64Type(), 32))));
    Value joined = LLVM::OrOp::create(
        b, loc, LLVM::ZExtOp::create(b, loc, b.getI64Type(), lo),
        LLVM::ShlOp::create(b, loc, LLVM::ZExtOp::create(b, loc, b.getI64Type(), hi),
                            constantOf(b, loc, b.getI64Type(), 32)));
    return isa<FloatType>(type) ? LLVM::BitcastOp::create(b, loc, type, joined).getResult() : joined;
  }
  return fromShuffleWord(b, loc, shfl(toShuffleWord(b, loc, v)), type);
}

/// A partial reduction: the value and, for argmax/argmin, its index along the axis.
struct Partial {
  Value value, index;
};

Partial combine(OpBuilder &b, Location loc, ReduceKind kind, Partial x, Partial y) {
  bool fl = isa<FloatType>(x.value.getType());
  switch (kind) {
  case ReduceKind::sum:
    return {fl ? LLVM::FAddOp::create(b, loc, x.value, y.value).getResult()
               : LLVM::AddOp::create(b, loc, x.value, y.value).getResult(), {}};
  case ReduceKind::max:
    return {fl ? LLVM::MaximumOp::create(b, loc, x.value, y.value).getResult()
               : LLVM::SMaxOp::create(b, loc, x.value, y.value).getResult(), {}};
  case ReduceKind::min:
    return {fl ? LLVM::MinimumOp::create(b, loc, x.value, y.value).getResult()
               : LLVM::SMinOp::create(b, loc, x.value, y.value).getResult(), {}};
  case ReduceKind::argmax:
  case ReduceKind::argmin: {
    bool isMax = kind == ReduceKind::argmax;
    Value better, equal;
    if (fl) {
      better = LLVM::FCmpOp::create(b, loc, isMax ? LLVM::FCmpPredicate::ogt : LLVM::FCmpPredicate::olt, y.value, x.value);
      equal = LLVM::FCmpOp::create(b, loc, LLVM::FCmpPredicate::oeq, y.value, x.value);
    } else {
      better = LLVM::ICmpOp::create(b, loc, isMax ? LLVM::ICmpPredicate::sgt : LLVM::ICmpPredicate::slt, y.value, x.value);
      equal = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq, y.value, x.value);
    }
    // Ties go to the first index.
    Value earlier = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::slt, y.index, x.index);
    Value takeY = LLVM::OrOp::create(b, loc, better, LLVM::AndOp::create(b, loc, equal, earlier));
    return {LLVM::SelectOp::create(b, loc, takeY, y.value, x.value),
            LLVM::SelectOp::create(b, loc, takeY, y.index, x.index)};
  }
  }
  return x;
}

/// Each group's values folded as a balanced tree, every group's level before any group's next
/// (an odd last value waits a level): the groups' combines interleave level by level.
std::vector<Partial> foldLevelByLevel(OpBuilder &b, Location loc, ReduceKind kind,
                                      std::vector<std::vector<Partial>> groups) {
  for (bool more = true; more;) {
    more = false;
    for (std::vector<Partial> &values : groups) {
      std::vector<Partial> next;
      for (size_t i = 0; i + 1 < values.size(); i += 2)
        next.push_back(combine(b, loc, kind, values[i], values[i + 1]));
      if (values.size() % 2)
        next.push_back(values.back());
      values = std::move(next);
      more |= values.size() > 1;
    }
  }
  std::vector<Partial> roots;
  for (const std::vector<Partial> &values : groups)
    roots.push_back(values.front());
  return roots;
}

struct ReduceLowering : ConvertOpToLLVMPattern<ReduceOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(ReduceOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto srcType = op.getSrc().getType();
    layout::LinearLayout layout = toLinearLayout(srcType.getEncoding(), srcType.getShape());
    int axis = static_cast<int>(op.getAxis());
    ReduceKind kind = op.getKind();
    bool withIndex = kind == ReduceKind::argmax || kind == ReduceKind::argmin;
    if (mixesAxisWithOthers(layout, axis))
      return rewriter.notifyMatchFailure(op, "layout mixes the reduced axis with others");
    // Partial sums in lanes that then meet in shared memory would overwrite each other.
    if (op.getWithinThreads())
      for (const auto &basis : layout.warps())
        if (basis[axis] != 0)
          return rewriter.notifyMatchFailure(op, "within_threads with warps along the axis");

    Values src = unpack(rewriter, loc, adaptor.getSrc());
    std::vector<Values> coords = registerCoordinates(rewriter, loc, layout);
    auto withoutAxis = [axis](layout::Coord c) {
      c.erase(c.begin() + axis);
      return c;
    };

    // 1. Within the thread: one partial per coordinate off the axis, folded as a chain. A
    // balanced tree of the same combines made the d = 64 attention forward 12% slower on the
    // H200 (ptxas interleaves a chain with the exponentials that wait on it), and so did two or
    // four interleaved chains, for the row max alone too: ptxas then finishes both rows' maxima
    // before the first exponential. At d = 128 those gained at most 1.5%. Two chains for the sums
    // alone (no FADD tail before P @ V in the SASS) made the 128 x 256 ping-pong 1-2% slower (12-04c);
    // a tree for the max (both rows level by level, cuDNN's shape) 10% slower, the 64 x 128
    // programs of OVERLAP_SOFTMAX 1.5-2.4% faster (12-04f): kernels with tile.tree_max (config
    // knob tree_max) fold a max that way.
    auto func = op->getParentOfType<func::FuncOp>();
    const bool tree = kind == ReduceKind::max && func && func->hasAttr(kTreeMaxAttrName);
    std::map<layout::Coord, size_t> groupOf;
    std::vector<Partial> partials;
    std::vector<std::vector<Partial>> leaves; // with the tree: each coordinate's values
    std::vector<size_t> representative;
    for (int64_t r = 0; r < layout.numRegisters(); ++r) {
      Partial p{src[r], withIndex ? coords[r][axis] : Value()};
      auto [it, inserted] = groupOf.try_emplace(withoutAxis(layout.apply(r, 0, 0)), partials.size());
      if (inserted) {
        partials.push_back(p);
        representative.push_back(r);
        if (tree)
          leaves.push_back({p});
      } else if (tree) {
        leaves[it->second].push_back(p);
      } else {
        partials[it->second] = combine(rewriter, loc, kind, partials[it->second], p);
      }
    }
    if (tree)
      partials = foldLevelByLevel(rewriter, loc, kind, std::move(leaves));
    // 2. Across the lanes along the axis: butterfly shuffles (not within_threads: a
    // tile.combine_lanes does that later).
    for (size_t bit = 0; bit < layout.lanes().size(); ++bit) {
      if (layout.lanes()[bit][axis] == 0 || op.getWithinThreads())
        continue;
      for (Partial &p : partials) {
        Partial other{shuffleXor(rewriter, loc, p.value, 1 << bit),
                      withIndex ? shuffleXor(rewriter, loc, p.index, 1 << bit) : Value()};
        p = combine(rewriter, loc, kind, p, other);
      }
    }
    // 3. Across the warps along the axis: through shared memory.
    std::vector<int> warpBits;
    for (size_t bit = 0; bit < layout.warps().size(); ++bit)
      if (layout.warps()[bit][axis] != 0)
        warpBits.push_back(static_cast<int>(bit));
    if (!warpBits.empty()) {
      Type element = src.front().getType();
      SmallVector<int64_t> rest(srcType.getShape());
      rest.erase(rest.begin() + axis);
      int64_t restCount = 1;
      for (int64_t s : rest)
        restCount *= s;
      int64_t slots = int64_t(1) << warpBits.size();
      Value values = sharedMemory(rewriter, loc, op, smemOffset(op));
      Value indices = sharedMemory(rewriter, loc, op,
                                   smemOffset(op) + slots * restCount * storageBytes(element));
      ThreadId id = threadId(rewriter, loc);
      Value slot = i32Constant(rewriter, loc, 0);
      for (size_t i = 0; i < warpBits.size(); ++i) {
        Value bit = LLVM::AndOp::create(rewriter, loc,
                                        LLVM::LShrOp::create(rewriter, loc, id.warp, i32Constant(rewriter, loc, warpBits[i])),
                                        i32Constant(rewriter, loc, 1));
        slot = LLVM::OrOp::create(rewriter, loc, slot,
                                  LLVM::ShlOp::create(rewriter, loc, bit, i32Constant(rewriter, loc, i)));
      }
      Values restIndex;
      for (size_t g = 0; g < partials.size(); ++g) {
        Values c = coords[representative[g]];
        c.erase(c.begin() + axis);
        restIndex.push_back(rest.empty() ? i32Constant(rewriter, loc, 0) : linearIndex(rewriter, loc, c, rest));
      }
      auto at = [&](Value s, Value i) {
        return LLVM::AddOp::create(rewriter, loc,
                                   LLVM::MulOp::create(rewriter, loc, s, i32Constant(rewriter, loc, restCount)), i);
      };
      for (size_t g = 0; g < partials.size(); ++g) {
        Value index = at(slot, restIndex[g]);
        Type stored = storageType(element);
        LLVM::StoreOp::create(rewriter, loc, toStorage(rewriter, loc, partials[g].value),
                              LLVM::GEPOp::create(rewriter, loc, values.getType(), stored, values, ValueRange{index}));
        if (withIndex)
          LLVM::StoreOp::create(rewriter, loc, partials[g].index,
                                LLVM::GEPOp::create(rewriter, loc, indices.getType(), rewriter.getI32Type(), indices, ValueRange{index}));
      }
      barrier(rewriter, loc);
      for (size_t g = 0; g < partials.size(); ++g) {
        Partial total;
        for (int64_t s = 0; s < slots; ++s) {
          Value index = at(i32Constant(rewriter, loc, s), restIndex[g]);
          Partial p{loadFromShared(rewriter, loc, values, index, element), Value()};
          if (withIndex)
            p.index = LLVM::LoadOp::create(rewriter, loc, rewriter.getI32Type(),
                                           LLVM::GEPOp::create(rewriter, loc, indices.getType(), rewriter.getI32Type(), indices, ValueRange{index}));
          total = s == 0 ? p : combine(rewriter, loc, kind, total, p);
        }
        partials[g] = total;
      }
      barrier(rewriter, loc);
    }
    // 4. The result's registers.
    auto pick = [&](const Partial &p) { return withIndex ? p.index : p.value; };
    auto resultType = dyn_cast<RankedTensorType>(op.getType());
    if (!resultType) {
      rewriter.replaceOp(op, pick(partials.front()));
      return success();
    }
    layout::LinearLayout result = toLinearLayout(resultType.getEncoding(), resultType.getShape());
    Values out;
    for (int64_t r = 0; r < result.numRegisters(); ++r)
      out.push_back(pick(partials[groupOf.at(result.apply(r, 0, 0))]));
    rewriter.replaceOp(op, pack(rewriter, loc, getTypeConverter()->convertType(resultType), out));
    return success();
  }
};

/// Tensor cores: one mma.sync.m16n8k16 per 16x8 accumulator tile and 16-wide step of k, its
/// fragments picked from the operands' registers (already in the fragment layouts).
LogicalResult lowerTensorCoreDot(DotOp op, DotOp::Adaptor adaptor, MmaEncodingAttr mma,
                                 const TypeConverter *converter, ConversionPatternRewriter &rewriter) {
  Location loc = op.getLoc();
  auto aType = op.getA().getType(), bType = op.getB().getType(), accType = op.getType();
  int64_t M = accType.getDimSize(0), N = accType.getDimSize(1), K = aType.getDimSize(1);
  int64_t wm = mma.getWarpsPerCTA()[0], wn = mma.getWarpsPerCTA()[1];
  auto aIndex = registerIndex(toLinearLayout(aType.getEncoding(), aType.getShape()));
  auto bIndex = registerIndex(toLinearLayout(bType.getEncoding(), bType.getShape()));
  auto cIndex = registerIndex(toLinearLayout(accType.getEncoding(), accType.getShape()));
  Values c = unpack(rewriter, loc, adaptor.getAcc());
  // An operand comes in registers, or is read from its ring stage one k-step at a time.
  auto operand = [&](Value original, Value converted, Values &regs) -> std::function<void(int64_t)> {
    auto load = original.getDefiningOp<SharedLoadOp>();
    if (!load || !readByDotSteps(load)) {
      regs = unpack(rewriter, loc, converted);
      return [](int64_t) {};
    }
    auto bufferType = load.getBuffer().getType();
    Value stage = sharedStage(rewriter, loc, rewriter.getRemappedValue(load.getBuffer()),
                              rewriter.getRemappedValue(load.getSlot()), bufferType);
    regs.assign(toLinearLayout(load.getType().getEncoding(), load.getType().getShape()).numRegisters(), Value());
    auto encoding = cast<DotOperandEncodingAttr>(load.getType().getEncoding());
    Type element = registerType(converter, load.getType());
    bool transposed = load.getTransposed();
    return [&rewriter, &regs, loc, stage, bufferType, encoding, element, transposed](int64_t kk) {
      Values step = loadDotOperand(rewriter, loc, stage, bufferType.getTileType(), encoding, element, transposed, kk);
      for (size_t r = 0; r < step.size(); ++r)
        if (step[r])
          regs[r] = step[r];
    };
  };
  Values a, b;
  auto readA = operand(op.getA(), adaptor.getA(), a), readB = operand(op.getB(), adaptor.getB(), b);
  Type half = registerType(converter, aType);
  Type f32 = rewriter.getF32Type();
  std::string type = half.isBF16() ? "bf16" : "f16";
  std::string code = "mma.sync.aligned.m16n8k16.row.col.f32." + type + "." + type +
                     ".f32 {$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};";
  auto resultType = LLVM::LLVMStructType::getLiteral(rewriter.getContext(), SmallVector<Type>(4, f32));
  auto pair = [&](Value lo, Value hi) { return packPair(rewriter, loc, lo, hi); };
  // k outermost: consecutive mma.sync write different accumulators, so none waits on the one
  // before it (a chain over k per tile would stall on the tensor pipe's latency).
  // Fragments of step kk+1 are read before step kk's mma.sync, so that their shared-memory
  // latency hides behind the tensor cores.
  readA(0);
  readB(0);
  for (int64_t kk = 0; kk < K / 16; ++kk) {
    if (kk + 1 < K / 16) {
      readA(kk + 1);
      readB(kk + 1);
    }
    for (int64_t i = 0; i < M / wm / 16; ++i)
      for (int64_t j = 0; j < N / wn / 8; ++j) {
        int64_t cRegs[4];
        for (int e = 0; e < 4; ++e)
          cRegs[e] = cIndex.at(mmaCElement(i * 16, j * 8, e));
        Values operands;
        for (int e = 0; e < 8; e += 2)
          operands.push_back(pair(a[aIndex.at(mmaAElement(i * 16, kk * 16, e))],
                                  a[aIndex.at(mmaAElement(i * 16, kk * 16, e + 1))]));
        for (int e = 0; e < 4; e += 2) {
          auto at = [&](int element) { return b[bIndex.at({kk * 16 + element % 2 + 8 * (element / 2), j * 8})]; };
          operands.push_back(pair(at(e), at(e + 1)));
        }
        for (int e = 0; e < 4; ++e)
          operands.push_back(c[cRegs[e]]);
        Value d = ptx(rewriter, loc, resultType, code, "=f,=f,=f,=f,r,r,r,r,r,r,0,1,2,3", operands, false);
        for (int e = 0; e < 4; ++e)
          c[cRegs[e]] = LLVM::ExtractValueOp::create(rewriter, loc, d, e);
      }
  }
  rewriter.replaceOp(op, pack(rewriter, loc, converter->convertType(accType), c));
  return success();
}

/// Each register plus its copies in the lanes across `lanes`' bits: butterfly shuffles.
struct CombineLanesLowering : ConvertOpToLLVMPattern<CombineLanesOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(CombineLanesOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Values values = unpack(rewriter, loc, adaptor.getSrc());
    for (int bit = 0; bit < 5; ++bit)
      if (op.getLanes() & (1 << bit))
        for (Value &value : values)
          value = LLVM::FAddOp::create(rewriter, loc, value, shuffleXor(rewriter, loc, value, 1 << bit));
    rewriter.replaceOp(op, pack(rewriter, loc, getTypeConverter()->convertType(op.getType()), values));
    return success();
  }
};

/// The wait for async (wgmma) dots.
struct DotWaitLowering : ConvertOpToLLVMPattern<DotWaitOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(DotWaitOp op, OpAdaptor adaptor, ConversionPatternRewriter &rewriter) const override {
    return lowerDotWait(op, adaptor, rewriter);
  }
};

/// The dot: on tensor cores when its layouts are mma fragments, otherwise on CUDA cores (a and
/// b through shared memory, one FMA per accumulator register per k).
struct DotLowering : ConvertOpToLLVMPattern<DotOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(DotOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    if (lowersToWarpgroupMma(op))
      return lowerWarpgroupDot(op, adaptor, getTypeConverter(), rewriter);
    if (auto mma = dyn_cast_or_null<MmaEncodingAttr>(op.getType().getEncoding()))
      return lowerTensorCoreDot(op, adaptor, mma, getTypeConverter(), rewriter);
    Location loc = op.getLoc();
    auto aType = op.getA().getType(), bType = op.getB().getType(), accType = op.getType();
    int64_t M = aType.getDimSize(0), K = aType.getDimSize(1), N = bType.getDimSize(1);
    Type inElement = registerType(getTypeConverter(), aType);
    Type accElement = registerType(getTypeConverter(), accType);
    Value aBase = sharedMemory(rewriter, loc, op, smemOffset(op));
    Value bBase = sharedMemory(rewriter, loc, op, smemOffset(op) + M * K * storageBytes(inElement));
    storeTileToShared(rewriter, loc, aBase, toLinearLayout(aType.getEncoding(), aType.getShape()),
                      unpack(rewriter, loc, adaptor.getA()), inElement);
    storeTileToShared(rewriter, loc, bBase, toLinearLayout(bType.getEncoding(), bType.getShape()),
                      unpack(rewriter, loc, adaptor.getB()), inElement);
    barrier(rewriter, loc);
    std::vector<Values> coords =
        registerCoordinates(rewriter, loc, toLinearLayout(accType.getEncoding(), accType.getShape()));
    Values acc = unpack(rewriter, loc, adaptor.getAcc());
    bool isInt = isa<IntegerType>(accElement);
    Type wide = isInt ? accElement : Type(rewriter.getF32Type());
    auto widen = [&](OpBuilder &b, Value v) -> Value {
      if (v.getType() == wide)
        return v;
      return isInt ? LLVM::SExtOp::create(b, loc, wide, v).getResult()
                   : LLVM::FPExtOp::create(b, loc, wide, v).getResult();
    };
    auto loop = scf::ForOp::create(
        rewriter, loc, i32Constant(rewriter, loc, 0), i32Constant(rewriter, loc, K),
        i32Constant(rewriter, loc, 1), acc,
        [&](OpBuilder &b, Location loc, Value k, ValueRange carried) {
          Values next;
          for (size_t r = 0; r < carried.size(); ++r) {
            Value aIndex = LLVM::AddOp::create(b, loc, LLVM::MulOp::create(b, loc, coords[r][0], i32Constant(b, loc, K)), k);
            Value bIndex = LLVM::AddOp::create(b, loc, LLVM::MulOp::create(b, loc, k, i32Constant(b, loc, N)), coords[r][1]);
            Value x = widen(b, loadFromShared(b, loc, aBase, aIndex, inElement));
            Value y = widen(b, loadFromShared(b, loc, bBase, bIndex, inElement));
            Value c = widen(b, carried[r]);
            Value sum = isInt ? LLVM::AddOp::create(b, loc, c, LLVM::MulOp::create(b, loc, x, y)).getResult()
                              : LLVM::FMAOp::create(b, loc, x, y, c).getResult();
            if (sum.getType() != accElement)
              sum = LLVM::FPTruncOp::create(b, loc, accElement, sum);
            next.push_back(sum);
          }
          scf::YieldOp::create(b, loc, next);
        });
    barrier(rewriter, loc);
    rewriter.replaceOp(op, pack(rewriter, loc, getTypeConverter()->convertType(accType), loop.getResults()));
    (void)M;
    return success();
  }
};

template <typename OpT, typename X, typename Y, typename Z>
struct GridLowering : ConvertOpToLLVMPattern<OpT> {
  using ConvertOpToLLVMPattern<OpT>::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(OpT op, typename OpT::Adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Type i32 = rewriter.getI32Type();
    Value value;
    switch (op.getAxis()) {
    case GridAxis::x: value = X::create(rewriter, op.getLoc(), i32); break;
    case GridAxis::y: value = Y::create(rewriter, op.getLoc(), i32); break;
    case GridAxis::z: value = Z::create(rewriter, op.getLoc(), i32); break;
    }
    rewriter.replaceOp(op, value);
    return success();
  }
};

/// Device printing: one gpu.printf (vprintf) per register, naming the program and the element.
struct PrintLowering : ConvertOpToLLVMPattern<PrintOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(PrintOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type i32 = rewriter.getI32Type();
    Values pid{NVVM::BlockIdXOp::create(rewriter, loc, i32), NVVM::BlockIdYOp::create(rewriter, loc, i32),
               NVVM::BlockIdZOp::create(rewriter, loc, i32)};
    std::string prefix;
    for (char c : op.getPrefix())
      prefix += c == '%' ? std::string("%%") : std::string(1, c);
    auto print = [&](const std::string &index, Values indexValues, Value value) {
      std::string format = "pid (%d, %d, %d)" + index + " " + prefix;
      Values args(pid);
      args.append(indexValues);
      if (value) {
        Type type = value.getType();
        if (isa<FloatType>(type)) {
          if (type.getIntOrFloatBitWidth() < 32)
            value = LLVM::FPExtOp::create(rewriter, loc, rewriter.getF32Type(), value);
          format += "%f";
        } else if (isa<LLVM::LLVMPointerType>(type)) {
          format += "%p";
        } else if (type.getIntOrFloatBitWidth() == 64) {
          format += "%lld";
        } else {
          if (type.getIntOrFloatBitWidth() < 32)
            value = type.isInteger(1) ? LLVM::ZExtOp::create(rewriter, loc, i32, value).getResult()
                                      : LLVM::SExtOp::create(rewriter, loc, i32, value).getResult();
          format += "%d";
        }
        args.push_back(value);
      }
      gpu::PrintfOp::create(rewriter, loc, rewriter.getStringAttr(format + "\n"), args);
    };
    if (op.getArgs().empty())
      print("", {}, Value());
    for (auto [original, converted] : llvm::zip(op.getArgs(), adaptor.getArgs())) {
      auto tensor = dyn_cast<RankedTensorType>(original.getType());
      if (!tensor) {
        print("", {}, converted);
        continue;
      }
      std::vector<Values> coords =
          registerCoordinates(rewriter, loc, toLinearLayout(tensor.getEncoding(), tensor.getShape()));
      Values registers = unpack(rewriter, loc, converted);
      std::string index = " idx (";
      for (int64_t d = 0; d < tensor.getRank(); ++d)
        index += d ? ", %d" : "%d";
      index += ")";
      for (size_t r = 0; r < registers.size(); ++r)
        print(index, coords[r], registers[r]);
    }
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void populateComputeOpPatterns(TileTypeConverter &converter, RewritePatternSet &patterns) {
  MLIRContext *context = patterns.getContext();
  patterns.add<ConstantLowering, MakeRangeLowering, SplatLowering, MoveLowering<BroadcastOp>,
               MoveLowering<ExpandDimsOp>, MoveLowering<TransOp>, MoveLowering<ReshapeOp>,
               MoveLowering<ConvertLayoutOp>, ReduceLowering, CombineLanesLowering, DotLowering, DotWaitLowering,
               PrintLowering, SharedLoadLowering, SharedStoreLowering,
               GridLowering<ProgramIdOp, NVVM::BlockIdXOp, NVVM::BlockIdYOp, NVVM::BlockIdZOp>,
               GridLowering<NumProgramsOp, NVVM::GridDimXOp, NVVM::GridDimYOp, NVVM::GridDimZOp>>(converter);
  patterns.add<SplitExponentialLowering<math::Exp2Op, false>, SplitExponentialLowering<math::ExpOp, true>>(converter);
  patterns.add<ElementwiseLowering>(converter, context);
}

} // namespace tessera::tile::lowering
