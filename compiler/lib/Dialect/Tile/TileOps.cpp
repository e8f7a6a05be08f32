// Verifiers, folders, canonicalization patterns and custom syntax of the tile ops.
#include "tessera/compiler/Dialect/Tile/TileDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace tessera::tile;

namespace {

/// custom<Keyword>($attr): an enum attribute written as its bare keyword (`max`, `x`).
template <typename AttrT> ParseResult parseKeyword(OpAsmParser &parser, AttrT &attr) {
  using EnumT = decltype(attr.getValue());
  StringRef keyword;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseKeyword(&keyword))
    return failure();
  std::optional<EnumT> value = symbolizeEnum<EnumT>(keyword);
  if (!value)
    return parser.emitError(loc) << "unknown keyword '" << keyword << "'";
  attr = AttrT::get(parser.getContext(), *value);
  return success();
}

template <typename AttrT> void printKeyword(OpAsmPrinter &p, Operation *, AttrT attr) {
  p << stringifyEnum(attr.getValue());
}

} // namespace

#define GET_OP_CLASSES
#include "tessera/compiler/Dialect/Tile/TileOps.cpp.inc"

namespace {

std::string d(Type type) { return describe(type); }

/// Types equal up to their layout encodings (shape ops keep shapes, layouts are free).
bool sameIgnoringLayout(Type a, Type b) {
  auto ta = dyn_cast<RankedTensorType>(a), tb = dyn_cast<RankedTensorType>(b);
  if (!ta || !tb)
    return a == b;
  return ta.getShape() == tb.getShape() && ta.getElementType() == tb.getElementType();
}

/// A constant splat `src` re-typed to `resultType` (shape ops of a splat are a splat).
Attribute reshapeSplat(Attribute src, Type resultType) {
  auto splat = dyn_cast_if_present<SplatElementsAttr>(src);
  auto shaped = dyn_cast<ShapedType>(resultType);
  if (!splat || !shaped)
    return {};
  return SplatElementsAttr::get(shaped, splat.getSplatValue<Attribute>());
}

/// The value of a mask that is a constant with all lanes equal, if it is one.
std::optional<bool> uniformConstantMask(Value mask) {
  if (!mask)
    return std::nullopt;
  Attribute attr;
  if (!matchPattern(mask, m_Constant(&attr)))
    return std::nullopt;
  if (auto splat = dyn_cast<SplatElementsAttr>(attr))
    return splat.getSplatValue<bool>();
  if (auto integer = dyn_cast<IntegerAttr>(attr))
    return integer.getValue().getBoolValue();
  return std::nullopt;
}

bool isConstantZero(Value value) {
  return matchPattern(value, m_Zero());
}

/// shape_op(splat x) -> splat x: a splat has every shape for free.
template <typename ShapeOp>
struct SplatThroughShapeOp : OpRewritePattern<ShapeOp> {
  using OpRewritePattern<ShapeOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(ShapeOp op, PatternRewriter &rewriter) const override {
    auto splat = op.getSrc().template getDefiningOp<SplatOp>();
    if (!splat)
      return failure();
    rewriter.replaceOpWithNewOp<SplatOp>(op, op.getType(), splat.getSrc());
    return success();
  }
};

LogicalResult verifyPermutation(Operation *op, ArrayRef<int32_t> order, int64_t rank,
                                StringRef what) {
  if (static_cast<int64_t>(order.size()) != rank)
    return op->emitOpError() << what << " has " << order.size() << " entries for rank " << rank;
  SmallVector<bool> seen(rank, false);
  for (int32_t dim : order) {
    if (dim < 0 || dim >= rank || seen[dim])
      return op->emitOpError() << what << " [" << llvm::make_range(order.begin(), order.end())
                               << "] is not a permutation of 0.." << rank - 1;
    seen[dim] = true;
  }
  return success();
}

/// `boundary_check` lists distinct dimensions of a rank-`rank` block.
LogicalResult verifyBoundaryCheck(Operation *op, ArrayRef<int32_t> dims, int64_t rank) {
  SmallVector<bool> seen(rank, false);
  for (int32_t dim : dims) {
    if (dim < 0 || dim >= rank || seen[dim])
      return op->emitOpError() << "boundary_check lists dimension " << dim
                               << " more than once or outside 0.." << rank - 1;
    seen[dim] = true;
  }
  return success();
}

/// Pointer-like type check shared by load, store and atomic_rmw.
LogicalResult verifyMaskAndValue(Operation *op, Type ptrType, Value mask, Type valueType,
                                 StringRef valueName) {
  Type expected = getPointeeType(ptrType);
  if (valueType != expected)
    return op->emitOpError() << valueName << " " << d(valueType) << " does not match ptr "
                             << d(ptrType) << " (expected " << d(expected) << ")";
  if (mask && mask.getType() != getBoolLike(ptrType))
    return op->emitOpError() << "mask " << d(mask.getType()) << " does not match ptr "
                             << d(ptrType) << " (expected " << d(getBoolLike(ptrType)) << ")";
  return success();
}

/// Parses `%ptr, %operand (, %operand)* attr-dict : ptr-type`, resolving the operands after
/// the pointer to `trailingTypes` (in order); used by load, store and atomic_rmw.
ParseResult parsePointerAccess(OpAsmParser &parser, OperationState &result,
                               function_ref<SmallVector<Type>(Type ptrType)> operandTypes,
                               size_t minOperands, Type &ptrType) {
  SmallVector<OpAsmParser::UnresolvedOperand, 4> operands;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseOperandList(operands) || parser.parseOptionalAttrDict(result.attributes) ||
      parser.parseColonType(ptrType))
    return failure();
  if (!getPointeeType(ptrType))
    return parser.emitError(loc) << "expected a pointer or a tile of pointers, got " << ptrType;
  SmallVector<Type> types = operandTypes(ptrType);
  if (operands.size() < minOperands || operands.size() > types.size())
    return parser.emitError(loc) << "expected " << minOperands << " to " << types.size()
                                 << " operands, got " << operands.size();
  types.resize(operands.size());
  return parser.resolveOperands(operands, types, loc, result.operands);
}

void printPointerAccess(OpAsmPrinter &p, Operation *op, ValueRange operands,
                        ArrayRef<StringRef> elided) {
  p << ' ';
  p.printOperands(operands);
  p.printOptionalAttrDict(op->getAttrs(), elided);
  p << " : " << operands.front().getType();
}

} // namespace

//===----------------------------------------------------------------------===//
// make_range, splat
//===----------------------------------------------------------------------===//

LogicalResult MakeRangeOp::verify() {
  int64_t start = static_cast<int32_t>(getStart()), end = static_cast<int32_t>(getEnd());
  int64_t size = end - start;
  if (start < 0 || size <= 0)
    return emitOpError() << "range [" << start << ", " << end << ") must be non-empty and start at 0 or later";
  if (!llvm::isPowerOf2_64(size))
    return emitOpError() << "range [" << start << ", " << end << ") has " << size
                         << " elements; tile sizes must be powers of two";
  auto type = getType();
  if (type.getRank() != 1 || type.getDimSize(0) != size)
    return emitOpError() << "result " << d(type) << " does not hold the " << size
                         << " elements of [" << start << ", " << end << ")";
  return success();
}

LogicalResult SplatOp::verify() {
  if (getType().getElementType() != getSrc().getType())
    return emitOpError() << "splat of " << d(getSrc().getType()) << " cannot produce "
                         << d(getType());
  return success();
}

OpFoldResult SplatOp::fold(FoldAdaptor adaptor) {
  if (!isa_and_present<IntegerAttr, FloatAttr>(adaptor.getSrc()))
    return {};
  return SplatElementsAttr::get(getType(), adaptor.getSrc());
}

//===----------------------------------------------------------------------===//
// broadcast, expand_dims, reshape, trans
//===----------------------------------------------------------------------===//

LogicalResult BroadcastOp::verify() {
  auto src = getSrc().getType();
  auto dst = getType();
  if (src.getElementType() != dst.getElementType() || src.getRank() != dst.getRank())
    return emitOpError() << "cannot broadcast " << d(src) << " to " << d(dst)
                         << ": rank and element type must match";
  for (auto [from, to] : llvm::zip(src.getShape(), dst.getShape()))
    if (from != to && from != 1)
      return emitOpError() << "cannot broadcast " << d(src) << " to " << d(dst)
                           << ": dimension " << from << " is neither " << to << " nor 1";
  return success();
}

OpFoldResult BroadcastOp::fold(FoldAdaptor adaptor) {
  if (getSrc().getType() == getType())
    return getSrc();
  return reshapeSplat(adaptor.getSrc(), getType());
}

namespace {
/// broadcast(broadcast x) -> broadcast x.
struct CombineBroadcasts : OpRewritePattern<BroadcastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(BroadcastOp op, PatternRewriter &rewriter) const override {
    auto inner = op.getSrc().getDefiningOp<BroadcastOp>();
    if (!inner)
      return failure();
    rewriter.replaceOpWithNewOp<BroadcastOp>(op, op.getType(), inner.getSrc());
    return success();
  }
};
} // namespace

void BroadcastOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *context) {
  results.add<SplatThroughShapeOp<BroadcastOp>, CombineBroadcasts>(context);
}

LogicalResult ExpandDimsOp::verify() {
  auto src = getSrc().getType();
  int64_t axis = static_cast<int32_t>(getAxis());
  if (axis < 0 || axis > src.getRank())
    return emitOpError() << "axis " << axis << " is outside 0.." << src.getRank() << " for "
                         << d(src);
  SmallVector<int64_t> shape(src.getShape());
  shape.insert(shape.begin() + axis, 1);
  auto expected = src.clone(shape);
  if (!sameIgnoringLayout(getType(), expected))
    return emitOpError() << "expanding " << d(src) << " at axis " << axis << " gives "
                         << d(expected) << ", not " << d(getType());
  return success();
}

OpFoldResult ExpandDimsOp::fold(FoldAdaptor adaptor) {
  return reshapeSplat(adaptor.getSrc(), getType());
}

void ExpandDimsOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                               MLIRContext *context) {
  results.add<SplatThroughShapeOp<ExpandDimsOp>>(context);
}

LogicalResult ReshapeOp::verify() {
  auto src = getSrc().getType();
  auto dst = getType();
  if (src.getElementType() != dst.getElementType() ||
      src.getNumElements() != dst.getNumElements())
    return emitOpError() << "cannot reshape " << d(src) << " (" << src.getNumElements()
                         << " elements) to " << d(dst) << " (" << dst.getNumElements()
                         << " elements)";
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getSrc().getType() == getType())
    return getSrc();
  if (auto inner = getSrc().getDefiningOp<ReshapeOp>()) {
    getSrcMutable().assign(inner.getSrc());
    return getResult();
  }
  return reshapeSplat(adaptor.getSrc(), getType());
}

void ReshapeOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *context) {
  results.add<SplatThroughShapeOp<ReshapeOp>>(context);
}

LogicalResult TransOp::verify() {
  auto src = getSrc().getType();
  if (failed(verifyPermutation(*this, getOrder(), src.getRank(), "order")))
    return failure();
  SmallVector<int64_t> shape;
  for (int32_t dim : getOrder())
    shape.push_back(src.getDimSize(dim));
  auto expected = src.clone(shape);
  if (!sameIgnoringLayout(getType(), expected))
    return emitOpError() << "transposing " << d(src) << " gives " << d(expected) << ", not "
                         << d(getType());
  return success();
}

OpFoldResult TransOp::fold(FoldAdaptor adaptor) {
  auto isIdentity = [](ArrayRef<int32_t> order) {
    for (auto [i, dim] : llvm::enumerate(order))
      if (dim != static_cast<int32_t>(i))
        return false;
    return true;
  };
  if (isIdentity(getOrder()))
    return getSrc();
  if (auto inner = getSrc().getDefiningOp<TransOp>()) {
    // result[i] = inner.src[innerOrder[order[i]]]
    SmallVector<int32_t> composed;
    for (int32_t dim : getOrder())
      composed.push_back(inner.getOrder()[dim]);
    if (isIdentity(composed))
      return inner.getSrc();
    getSrcMutable().assign(inner.getSrc());
    setOrder(composed);
    return getResult();
  }
  return reshapeSplat(adaptor.getSrc(), getType());
}

void TransOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *context) {
  results.add<SplatThroughShapeOp<TransOp>>(context);
}

//===----------------------------------------------------------------------===//
// addptr
//===----------------------------------------------------------------------===//

LogicalResult AddPtrOp::verify() {
  auto ptrTensor = dyn_cast<RankedTensorType>(getPtr().getType());
  auto offTensor = dyn_cast<RankedTensorType>(getOffset().getType());
  bool sameShape = ptrTensor && offTensor ? ptrTensor.getShape() == offTensor.getShape()
                                          : !ptrTensor && !offTensor;
  if (!sameShape)
    return emitOpError() << "offset " << d(getOffset().getType())
                         << " does not have the shape of ptr " << d(getPtr().getType());
  return success();
}

OpFoldResult AddPtrOp::fold(FoldAdaptor) {
  if (isConstantZero(getOffset()))
    return getPtr();
  return {};
}

namespace {
/// addptr(addptr(p, a), b) -> addptr(p, a + b) when a and b have the same type.
struct CombineAddPtrs : OpRewritePattern<AddPtrOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AddPtrOp op, PatternRewriter &rewriter) const override {
    auto inner = op.getPtr().getDefiningOp<AddPtrOp>();
    if (!inner || inner.getOffset().getType() != op.getOffset().getType())
      return failure();
    Value sum = arith::AddIOp::create(rewriter, op.getLoc(), inner.getOffset(), op.getOffset());
    rewriter.replaceOpWithNewOp<AddPtrOp>(op, op.getType(), inner.getPtr(), sum);
    return success();
  }
};
} // namespace

void AddPtrOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *context) {
  results.add<CombineAddPtrs>(context);
}

//===----------------------------------------------------------------------===//
// load, store, atomic_rmw
//===----------------------------------------------------------------------===//

void LoadOp::build(OpBuilder &builder, OperationState &state, Value ptr, Value mask,
                   Value other) {
  build(builder, state, getPointeeType(ptr.getType()), ptr, mask, other);
}

ParseResult LoadOp::parse(OpAsmParser &parser, OperationState &result) {
  Type ptrType;
  auto types = [](Type ptr) {
    return SmallVector<Type>{ptr, getBoolLike(ptr), getPointeeType(ptr)};
  };
  if (parsePointerAccess(parser, result, types, 1, ptrType))
    return failure();
  int32_t count = result.operands.size();
  result.getOrAddProperties<Properties>().operandSegmentSizes = {1, count > 1 ? 1 : 0,
                                                                 count > 2 ? 1 : 0};
  result.addTypes(getPointeeType(ptrType));
  return success();
}

void LoadOp::print(OpAsmPrinter &p) {
  printPointerAccess(p, *this, getOperands(), {"operandSegmentSizes"});
}

LogicalResult LoadOp::verify() {
  if (failed(verifyMaskAndValue(*this, getPtr().getType(), getMask(), getType(), "result")))
    return failure();
  if (getOther() && !getMask())
    return emitOpError() << "other needs a mask: without one every lane is loaded";
  if (getOther() && getOther().getType() != getType())
    return emitOpError() << "other " << d(getOther().getType()) << " does not match result "
                         << d(getType());
  return success();
}

namespace {
/// Loads whose mask is a uniform constant: all-true drops the mask (the load keeps its
/// discardable attributes); all-false is `other`.
struct FoldConstantLoadMask : OpRewritePattern<LoadOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LoadOp op, PatternRewriter &rewriter) const override {
    std::optional<bool> mask = uniformConstantMask(op.getMask());
    if (!mask)
      return failure();
    if (*mask) {
      replaceKeepingDiscardableAttrs<LoadOp>(rewriter, op, op.getPtr(), Value(), Value());
      return success();
    }
    if (!op.getOther())
      return failure();
    rewriter.replaceOp(op, op.getOther());
    return success();
  }
};
} // namespace

void LoadOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *context) {
  results.add<FoldConstantLoadMask>(context);
}

ParseResult StoreOp::parse(OpAsmParser &parser, OperationState &result) {
  Type ptrType;
  auto types = [](Type ptr) {
    return SmallVector<Type>{ptr, getPointeeType(ptr), getBoolLike(ptr)};
  };
  return parsePointerAccess(parser, result, types, 2, ptrType);
}

void StoreOp::print(OpAsmPrinter &p) { printPointerAccess(p, *this, getOperands(), {}); }

LogicalResult StoreOp::verify() {
  return verifyMaskAndValue(*this, getPtr().getType(), getMask(), getValue().getType(),
                            "value");
}

namespace {
/// Stores whose mask is a uniform constant: all-true drops the mask (the store keeps its
/// discardable attributes); all-false is erased.
struct FoldConstantStoreMask : OpRewritePattern<StoreOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(StoreOp op, PatternRewriter &rewriter) const override {
    std::optional<bool> mask = uniformConstantMask(op.getMask());
    if (!mask)
      return failure();
    if (*mask)
      replaceKeepingDiscardableAttrs<StoreOp>(rewriter, op, op.getPtr(), op.getValue(), Value());
    else
      rewriter.eraseOp(op);
    return success();
  }
};
} // namespace

void StoreOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *context) {
  results.add<FoldConstantStoreMask>(context);
}

ParseResult AtomicRMWOp::parse(OpAsmParser &parser, OperationState &result) {
  auto &props = result.getOrAddProperties<Properties>();
  if (parseKeyword(parser, props.kind) || parser.parseComma() ||
      parseKeyword(parser, props.sem) || parser.parseComma() ||
      parseKeyword(parser, props.scope) || parser.parseComma())
    return failure();
  Type ptrType;
  auto types = [](Type ptr) {
    return SmallVector<Type>{ptr, getPointeeType(ptr), getBoolLike(ptr)};
  };
  if (parsePointerAccess(parser, result, types, 2, ptrType))
    return failure();
  result.addTypes(getPointeeType(ptrType));
  return success();
}

void AtomicRMWOp::print(OpAsmPrinter &p) {
  p << ' ' << stringifyAtomicKind(getKind()) << ", " << stringifyMemSemantic(getSem()) << ", "
    << stringifyMemScope(getScope()) << ",";
  printPointerAccess(p, *this, getOperands(), {"kind", "sem", "scope"});
}

LogicalResult AtomicRMWOp::verify() {
  Type valueType = getValue().getType();
  if (failed(verifyMaskAndValue(*this, getPtr().getType(), getMask(), valueType, "value")))
    return failure();
  if (getType() != valueType)
    return emitOpError() << "result " << d(getType()) << " does not match value "
                         << d(valueType);
  Type element = getElementTypeOrSelf(valueType);
  bool bitwise = getKind() == AtomicKind::bit_and || getKind() == AtomicKind::bit_or ||
                 getKind() == AtomicKind::bit_xor;
  if (element.isInteger(1) || (bitwise && !element.isInteger()))
    return emitOpError() << "atomic " << stringifyAtomicKind(getKind()) << " does not apply to "
                         << d(valueType);
  return success();
}

//===----------------------------------------------------------------------===//
// Block pointers
//===----------------------------------------------------------------------===//

LogicalResult MakeBlockPtrOp::verify() {
  auto block = getType().getBlockType();
  int64_t rank = block.getRank();
  auto count = [&](ValueRange values, StringRef what) -> LogicalResult {
    if (static_cast<int64_t>(values.size()) != rank)
      return emitOpError() << what << " has " << values.size() << " entries but the block "
                           << d(block) << " has rank " << rank;
    return success();
  };
  if (failed(count(getShape(), "shape")) || failed(count(getStrides(), "strides")) ||
      failed(count(getOffsets(), "offsets")))
    return failure();
  if (getBase().getType().getPointeeType() != block.getElementType())
    return emitOpError() << "base " << d(getBase().getType()) << " does not point to the "
                         << "elements of the block " << d(block);
  return verifyPermutation(*this, getOrder(), rank, "order");
}

LogicalResult AdvanceOp::verify() {
  int64_t rank = getPtr().getType().getBlockType().getRank();
  if (static_cast<int64_t>(getOffsets().size()) != rank)
    return emitOpError() << getOffsets().size() << " offsets for the rank-" << rank
                         << " block " << d(getPtr().getType());
  return success();
}

OpFoldResult AdvanceOp::fold(FoldAdaptor) {
  if (llvm::all_of(getOffsets(), isConstantZero))
    return getPtr();
  return {};
}

namespace {
/// advance(advance(p, a), b) -> advance(p, a + b).
struct CombineAdvances : OpRewritePattern<AdvanceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AdvanceOp op, PatternRewriter &rewriter) const override {
    auto inner = op.getPtr().getDefiningOp<AdvanceOp>();
    if (!inner)
      return failure();
    SmallVector<Value> sums;
    for (auto [a, b] : llvm::zip(inner.getOffsets(), op.getOffsets()))
      sums.push_back(arith::AddIOp::create(rewriter, op.getLoc(), a, b));
    rewriter.replaceOpWithNewOp<AdvanceOp>(op, op.getType(), inner.getPtr(), sums);
    return success();
  }
};
} // namespace

void AdvanceOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *context) {
  results.add<CombineAdvances>(context);
}

LogicalResult BlockLoadOp::verify() {
  auto block = getPtr().getType().getBlockType();
  if (!sameIgnoringLayout(getType(), block))
    return emitOpError() << "result " << d(getType()) << " is not the block " << d(block);
  return verifyBoundaryCheck(*this, getBoundaryCheck(), block.getRank());
}

LogicalResult BulkAddOp::verify() {
  auto type = cast<RankedTensorType>(getValues().getType());
  if (!type.getElementType().isF32() || getDst().getType().getPointeeType() != type.getElementType())
    return emitOpError() << "adds f32 tiles through an f32 pointer, got " << d(type) << " through "
                         << d(getDst().getType());
  if (type.getRank() != 2 || type.getNumElements() * 4 % 16)
    return emitOpError() << "adds a 2-D tile of a multiple of 16 bytes, got " << d(type);
  if (getSwizzled() && type.getDimSize(1) % 32)
    return emitOpError() << "swizzles rows of a multiple of 32 floats, got " << d(type);
  return success();
}

LogicalResult BlockStoreOp::verify() {
  auto block = getPtr().getType().getBlockType();
  if (!sameIgnoringLayout(getValue().getType(), block))
    return emitOpError() << "value " << d(getValue().getType()) << " is not the block "
                         << d(block);
  return verifyBoundaryCheck(*this, getBoundaryCheck(), block.getRank());
}

//===----------------------------------------------------------------------===//
// dot, reduce
//===----------------------------------------------------------------------===//

LogicalResult DotOp::verify() {
  auto a = getA().getType(), b = getB().getType(), acc = getAcc().getType();
  if (a.getRank() != 2 || b.getRank() != 2 || acc.getRank() != 2)
    return emitOpError() << "operands must be 2-D, got a " << d(a) << ", b " << d(b)
                         << ", acc " << d(acc);
  if (a.getDimSize(1) != b.getDimSize(0))
    return emitOpError() << "inner dimensions differ: a " << d(a) << " and b " << d(b);
  if (acc.getDimSize(0) != a.getDimSize(0) || acc.getDimSize(1) != b.getDimSize(1))
    return emitOpError() << "acc " << d(acc) << " is not " << a.getDimSize(0) << "x"
                         << b.getDimSize(1) << " for a " << d(a) << " and b " << d(b);
  for (int64_t dim : {a.getDimSize(0), a.getDimSize(1), b.getDimSize(1)})
    if (dim < 16)
      return emitOpError() << "every dimension must be at least 16, got a " << d(a)
                           << " and b " << d(b);
  Type in = a.getElementType(), out = acc.getElementType();
  if (in != b.getElementType())
    return emitOpError() << "a " << d(a) << " and b " << d(b)
                         << " have different element types";
  bool supported = ((in.isF16() || in.isBF16() || in.isF32()) && out.isF32()) ||
                   (in.isF16() && out.isF16()) || (in.isInteger(8) && out.isInteger(32));
  if (!supported)
    return emitOpError() << "unsupported dot of " << d(a) << " into " << d(acc)
                         << " (f16/bf16/f32 -> f32, f16 -> f16, i8 -> i32)";
  if (getInputPrecision() != InputPrecision::ieee && !in.isF32())
    return emitOpError() << "input_precision " << stringifyInputPrecision(getInputPrecision())
                         << " applies to f32 inputs, not " << d(a);
  return success();
}

namespace {
Type reducedType(RankedTensorType src, int64_t axis, ReduceKind kind) {
  Type element = kind == ReduceKind::argmax || kind == ReduceKind::argmin
                     ? IntegerType::get(src.getContext(), 32)
                     : src.getElementType();
  if (src.getRank() == 1)
    return element;
  SmallVector<int64_t> shape(src.getShape());
  shape.erase(shape.begin() + axis);
  return RankedTensorType::get(shape, element);
}
} // namespace

LogicalResult ReduceOp::verify() {
  auto src = getSrc().getType();
  int64_t axis = static_cast<int32_t>(getAxis());
  if (axis < 0 || axis >= src.getRank())
    return emitOpError() << "axis " << axis << " is outside 0.." << src.getRank() - 1
                         << " for " << d(src);
  if (src.getElementType().isInteger(1))
    return emitOpError() << stringifyReduceKind(getKind()) << " of " << d(src)
                         << " is not supported; cast to i32 first";
  Type expected = reducedType(src, axis, getKind());
  if (!sameIgnoringLayout(getType(), expected))
    return emitOpError() << stringifyReduceKind(getKind()) << " of " << d(src) << " along axis "
                         << axis << " gives " << d(expected) << ", not " << d(getType());
  if (getWithinThreads() && (getKind() != ReduceKind::sum || !isa<RankedTensorType>(getType()) ||
                             !src.getEncoding()))
    return emitOpError() << "within_threads needs a sum to a tile, with layouts";
  return success();
}

LogicalResult CombineLanesOp::verify() {
  auto type = cast<RankedTensorType>(getType());
  if (!isa<FloatType>(type.getElementType()) || !type.getEncoding())
    return emitOpError() << "combines float tiles with layouts, not " << d(type);
  if (getLanes() <= 0 || getLanes() >= 32)
    return emitOpError() << "lanes must be a mask of lane id bits, 1 to 31, not " << getLanes();
  return success();
}

namespace {
/// Reducing an axis of size 1 (on a tile of rank >= 2) is a reshape, or zeros for argmax/argmin.
struct ReduceUnitAxis : OpRewritePattern<ReduceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReduceOp op, PatternRewriter &rewriter) const override {
    auto src = op.getSrc().getType();
    auto result = dyn_cast<RankedTensorType>(op.getType());
    if (!result || src.getDimSize(op.getAxis()) != 1)
      return failure();
    if (op.getKind() == ReduceKind::argmax || op.getKind() == ReduceKind::argmin)
      rewriter.replaceOpWithNewOp<arith::ConstantOp>(op, rewriter.getZeroAttr(result));
    else
      rewriter.replaceOpWithNewOp<ReshapeOp>(op, result, op.getSrc());
    return success();
  }
};
} // namespace

void ReduceOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *context) {
  results.add<ReduceUnitAxis>(context);
}

//===----------------------------------------------------------------------===//
// convert_layout
//===----------------------------------------------------------------------===//

LogicalResult ConvertLayoutOp::verify() {
  auto src = getSrc().getType();
  if (src.getShape() != getType().getShape() || src.getElementType() != getType().getElementType())
    return emitOpError() << "converts " << d(src) << " to " << d(getType())
                         << ": shape and element type must stay";
  return success();
}

OpFoldResult ConvertLayoutOp::fold(FoldAdaptor adaptor) {
  if (getSrc().getType() == getType())
    return getSrc();
  if (auto inner = getSrc().getDefiningOp<ConvertLayoutOp>()) {
    getSrcMutable().assign(inner.getSrc());
    return getResult();
  }
  return reshapeSplat(adaptor.getSrc(), getType());
}

//===----------------------------------------------------------------------===//
// Shared-memory pipelines
//===----------------------------------------------------------------------===//

LogicalResult AsyncCopyOp::verify() {
  auto tile = getBuffer().getType().getTileType();
  Type pointee = getPointeeType(getPtr().getType());
  if (!sameIgnoringLayout(pointee, tile))
    return emitOpError() << "copies " << d(pointee) << " into stages of " << d(tile);
  if (getMask().getType().getShape() != getPtr().getType().getShape())
    return emitOpError() << "mask " << d(getMask().getType()) << " does not match ptr " << d(getPtr().getType());
  return success();
}

LogicalResult SharedLoadOp::verify() {
  auto tile = getBuffer().getType().getTileType();
  if (getTransposed()) {
    if (tile.getRank() != 2)
      return emitOpError() << "transposes only 2-D stages, not " << d(tile);
    tile = RankedTensorType::get({tile.getDimSize(1), tile.getDimSize(0)}, tile.getElementType());
  }
  if (!sameIgnoringLayout(getType(), tile))
    return emitOpError() << "reads " << d(getType()) << " from stages of " << d(tile);
  return success();
}

LogicalResult SharedStoreOp::verify() {
  auto tile = getBuffer().getType().getTileType();
  if (!sameIgnoringLayout(getValue().getType(), tile))
    return emitOpError() << "writes " << d(getValue().getType()) << " into stages of " << d(tile);
  return success();
}

namespace {
/// The ops on a ring of mbarriers: one i64 a stage.
LogicalResult verifyBarrierRing(Operation *op, SharedBufferType barriers) {
  if (!isBarrierRing(barriers))
    return op->emitOpError() << "needs stages of tensor<1xi64>, not " << d(barriers.getTileType());
  return success();
}
} // namespace

LogicalResult InitBarriersOp::verify() {
  if (failed(verifyBarrierRing(*this, getBarriers().getType())))
    return failure();
  if (getArrivals() < 1)
    return emitOpError() << "needs at least one arrival, got " << getArrivals();
  return success();
}

LogicalResult TmaLoadOp::verify() {
  auto block = getPtr().getType().getBlockType(), tile = getBuffer().getType().getTileType();
  std::optional<BlockTile> copied = blockTile(block);
  const unsigned bits = block.getElementType().getIntOrFloatBitWidth();
  if (!copied || !(bits == 16 || (bits == 32 && copied->tile.getRank() == 1)))
    return emitOpError() << "copies blocks that are, but for unit dimensions (the columns innermost), 2-D tiles "
                            "of 16-bit elements or rows of 16- or 32-bit elements, not " << d(block);
  if (!sameIgnoringLayout(copied->tile, tile))
    return emitOpError() << "copies blocks of " << d(block) << " into stages of " << d(tile);
  if (!isBarrierRing(getBarriers().getType()) || getBarriers().getType().getStages() != getBuffer().getType().getStages())
    return emitOpError() << "needs one mbarrier (tensor<1xi64>) per stage of the buffer";
  if (getArrivals() < 1)
    return emitOpError() << "arrives at least once, not " << getArrivals() << " times";
  return success();
}

LogicalResult ArriveBarrierOp::verify() { return verifyBarrierRing(*this, getBarriers().getType()); }

LogicalResult SetMaxRegistersOp::verify() {
  if (getCount() < 24 || getCount() > 256 || getCount() % 8 != 0)
    return emitOpError() << "takes a multiple of 8 from 24 to 256 registers, not " << getCount();
  return success();
}

LogicalResult WaitBarrierOp::verify() { return verifyBarrierRing(*this, getBarriers().getType()); }
