// The DSL's operations: broadcasting, dtype promotion and checks, then tile/arith/math IR.
#include "Tracer.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/TypeUtilities.h"

#include <numeric>

namespace tessera::dsl {

using detail::TileAccess;
using detail::Tracer;
using detail::typeOf;
using mlir::Type;
using mlir::Value;
namespace arith = mlir::arith;
namespace math = mlir::math;

namespace {

using Kind = TileAccess::Kind;

std::string join(const Shape &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? "x" : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string err(const char *op, const std::string &message) { return std::string(op) + ": " + message; }

Type elementOf(Type type) { return mlir::getElementTypeOrSelf(type); }

Shape shapeOf(Type type) {
  if (auto tensor = mlir::dyn_cast<mlir::RankedTensorType>(type))
    return Shape(tensor.getShape());
  return {};
}

Type withShape(Type element, const Shape &shape) {
  if (shape.empty())
    return element;
  return mlir::RankedTensorType::get(shape, element);
}

/// The shape of a tile (a block pointer's block shape), checked against the active trace.
Shape tileShape(const Tile &x, const char *op) {
  if (x.is_literal())
    return {};
  Type type = typeOf(x, op);
  if (auto block = mlir::dyn_cast<tile::BlockPointerType>(type))
    return Shape(block.getBlockType().getShape());
  return shapeOf(type);
}

bool isFloat(Type type) { return mlir::isa<mlir::FloatType>(type); }
bool isPointer(Type type) { return mlir::isa<tile::PointerType>(elementOf(type)); }

bool isPointerTile(const Tile &x, const char *op) {
  return !x.is_literal() && isPointer(typeOf(x, op));
}
bool isBlockPointerTile(const Tile &x, const char *op) {
  return !x.is_literal() && mlir::isa<tile::BlockPointerType>(typeOf(x, op));
}

void requirePowerOfTwo(const char *op, const Shape &shape) {
  for (int64_t dim : shape)
    if (dim <= 0 || (dim & (dim - 1)) != 0)
      throw Error(err(op, "tile shape " + join(shape) + " has dimension " + std::to_string(dim) +
                              "; tile dimensions must be powers of two"));
}

Shape broadcastShapes(const char *op, const std::vector<const Tile *> &tiles) {
  size_t rank = 0;
  std::vector<Shape> shapes;
  for (const Tile *x : tiles) {
    shapes.push_back(tileShape(*x, op));
    rank = std::max(rank, shapes.back().size());
  }
  Shape out(rank, 1);
  for (size_t i = 0; i < tiles.size(); ++i) {
    size_t pad = rank - shapes[i].size();
    for (size_t d = 0; d < shapes[i].size(); ++d) {
      int64_t dim = shapes[i][d];
      int64_t &target = out[pad + d];
      if (dim == target || dim == 1)
        continue;
      if (target != 1) {
        std::string names;
        for (const Tile *x : tiles)
          names += (names.empty() ? "" : " with ") + x->str();
        throw Error(err(op, "cannot broadcast " + names));
      }
      target = dim;
    }
  }
  return out;
}

/// A literal as a constant of `element`, repeated to `shape`.
/// Numpy broadcasting of `x` to exactly `shape`, or an error naming both.
void requireBroadcastable(const char *op, const Tile &x, const Shape &shape) {
  Shape own = tileShape(x, op);
  bool ok = own.size() <= shape.size();
  for (size_t i = 0; ok && i < own.size(); ++i) {
    int64_t dim = own[own.size() - 1 - i];
    ok = dim == 1 || dim == shape[shape.size() - 1 - i];
  }
  if (!ok)
    throw Error(err(op, "cannot broadcast " + x.str() + " to " + join(shape)));
}

Value constant(Tracer &t, const Tile &literal, Type element, const Shape &shape, const char *op) {
  mlir::TypedAttr scalar;
  if (isFloat(element)) {
    double value = TileAccess::kind(literal) == Kind::FloatLiteral
                       ? TileAccess::floatValue(literal)
                       : static_cast<double>(TileAccess::intValue(literal));
    scalar = mlir::FloatAttr::get(element, value);
  } else if (element.isSignlessInteger()) {
    if (TileAccess::kind(literal) == Kind::FloatLiteral)
      throw Error(err(op, literal.str() + " cannot become an integer " +
                              tile::describe(element) + " implicitly; use an integer literal"));
    int64_t value = TileAccess::intValue(literal);
    unsigned width = element.getIntOrFloatBitWidth();
    bool fits = width >= 64 || (value >= -(int64_t(1) << (width - 1)) &&
                                value < (int64_t(1) << width));
    if (!fits)
      throw Error(err(op, literal.str() + " does not fit in " + tile::describe(element)));
    scalar = mlir::IntegerAttr::get(element, value);
  } else {
    throw Error(err(op, literal.str() + " cannot become a " + tile::describe(element)));
  }
  if (shape.empty())
    return t.make<arith::ConstantOp>(op, scalar);
  auto dense = mlir::DenseElementsAttr::get(mlir::RankedTensorType::get(shape, element), scalar);
  return t.make<arith::ConstantOp>(op, mlir::cast<mlir::TypedAttr>(dense));
}

/// `value` converted elementwise to `to` (a scalar element type).
Value castValue(Tracer &t, Value value, Type to, const char *op) {
  Type from = elementOf(value.getType());
  if (from == to)
    return value;
  if (isPointer(value.getType()) || mlir::isa<tile::PointerType>(to))
    throw Error(err(op, "cannot convert " + tile::describe(value.getType()) + " to " +
                            tile::describe(to)));
  Shape shape = shapeOf(value.getType());
  Type result = withShape(to, shape);
  bool fromFloat = isFloat(from), toFloat = isFloat(to);
  unsigned fromWidth = from.getIntOrFloatBitWidth(), toWidth = to.getIntOrFloatBitWidth();
  auto zero = [&] { return constant(t, Tile(0), from, shape, op); };
  if (fromFloat && toFloat) {
    if (fromWidth == toWidth) // f16 <-> bf16 goes through f32
      return castValue(t, castValue(t, value, mlir::Float32Type::get(to.getContext()), op), to, op);
    return toWidth > fromWidth ? t.make<arith::ExtFOp>(op, result, value)
                               : t.make<arith::TruncFOp>(op, result, value);
  }
  if (!fromFloat && !toFloat) {
    if (to.isInteger(1))
      return t.make<arith::CmpIOp>(op, arith::CmpIPredicate::ne, value, zero());
    if (toWidth > fromWidth)
      return from.isInteger(1) ? t.make<arith::ExtUIOp>(op, result, value)
                               : t.make<arith::ExtSIOp>(op, result, value);
    return t.make<arith::TruncIOp>(op, result, value);
  }
  if (!fromFloat)
    return from.isInteger(1) ? t.make<arith::UIToFPOp>(op, result, value)
                             : t.make<arith::SIToFPOp>(op, result, value);
  if (to.isInteger(1))
    return t.make<arith::CmpFOp>(op, arith::CmpFPredicate::UNE, value, zero());
  return t.make<arith::FPToSIOp>(op, result, value);
}

/// `value` broadcast (numpy rules) to `shape`.
Value broadcastValue(Tracer &t, Value value, const Shape &shape, const char *op) {
  Shape own = shapeOf(value.getType());
  if (own == shape)
    return value;
  Type element = elementOf(value.getType());
  auto type = mlir::RankedTensorType::get(shape, element);
  if (own.empty())
    return t.make<tile::SplatOp>(op, type, value);
  if (own.size() > shape.size())
    throw Error(err(op, "cannot broadcast " + tile::describe(value.getType()) + " to " + join(shape)));
  if (own.size() < shape.size()) {
    Shape padded(shape.size() - own.size(), 1);
    padded.insert(padded.end(), own.begin(), own.end());
    value = t.make<tile::ReshapeOp>(op, mlir::RankedTensorType::get(padded, element), value);
    if (padded == shape)
      return value;
  }
  return t.make<tile::BroadcastOp>(op, type, value);
}

/// `x` as a value of `element` with `shape`: literals become constants, tiles are converted
/// and broadcast.
Value coerce(Tracer &t, const Tile &x, Type element, const Shape &shape, const char *op) {
  if (x.is_literal())
    return constant(t, x, element, shape, op);
  return broadcastValue(t, castValue(t, t.get(x, op), element, op), shape, op);
}

Type literalType(const Tile &x, mlir::MLIRContext *context) {
  mlir::Builder b(context);
  switch (TileAccess::kind(x)) {
  case Kind::FloatLiteral: return b.getF32Type();
  case Kind::BoolLiteral: return b.getI1Type();
  default: return b.getI32Type();
  }
}

/// The common element type of operands: literals adopt the other operand's type (a float
/// literal makes integers f32); floats beat integers; wider beats narrower; f16 with bf16 is f32.
Type promote(const char *op, const std::vector<const Tile *> &tiles) {
  mlir::MLIRContext *context = Tracer::current(op).builder.getContext();
  Type result;
  bool floatLiteral = false, intLiteral = false;
  for (const Tile *x : tiles) {
    if (x->is_literal()) {
      floatLiteral |= TileAccess::kind(*x) == Kind::FloatLiteral;
      intLiteral |= TileAccess::kind(*x) == Kind::IntLiteral;
      continue;
    }
    Type element = elementOf(typeOf(*x, op));
    if (!result || element == result) {
      result = element;
      continue;
    }
    if (mlir::isa<tile::PointerType>(element) || mlir::isa<tile::PointerType>(result)) {
      std::string names;
      for (const Tile *y : tiles)
        names += (names.empty() ? "" : ", ") + y->str();
      throw Error(err(op, "mixes pointers with other types: " + names));
    }
    bool a = isFloat(result), b = isFloat(element);
    unsigned wa = result.getIntOrFloatBitWidth(), wb = element.getIntOrFloatBitWidth();
    if (a && b)
      result = wa == wb ? mlir::Float32Type::get(context) : (wa > wb ? result : element);
    else if (a != b)
      result = a ? result : element;
    else
      result = wa >= wb ? result : element;
  }
  mlir::Builder b(context);
  if (!result)
    return floatLiteral ? Type(b.getF32Type()) : intLiteral ? Type(b.getI32Type()) : Type(b.getI1Type());
  if (floatLiteral && !isFloat(result) && !mlir::isa<tile::PointerType>(result))
    return b.getF32Type();
  if (intLiteral && result.isInteger(1))
    return b.getI32Type();
  return result;
}

struct Prepared {
  std::vector<Value> values;
  Type element;
  Shape shape;
};

/// Operands of an elementwise op: promoted to one element type, broadcast to one shape.
Prepared prepare(Tracer &t, const char *op, const std::vector<const Tile *> &tiles) {
  Prepared p;
  p.element = promote(op, tiles);
  p.shape = broadcastShapes(op, tiles);
  for (const Tile *x : tiles)
    p.values.push_back(coerce(t, *x, p.element, p.shape, op));
  return p;
}

std::string both(const Tile &a, const Tile &b) { return a.str() + " and " + b.str(); }

void rejectPointers(const char *op, const Tile &a, const Tile &b) {
  if (isPointerTile(a, op) || isPointerTile(b, op) || isBlockPointerTile(a, op) ||
      isBlockPointerTile(b, op))
    throw Error(err(op, "does not apply to pointers, got " + both(a, b)));
}

Tile pointerOffset(const char *op, const Tile &ptr, const Tile &offset, bool negate) {
  Tracer &t = Tracer::current(op);
  Type offsetType = offset.is_literal() ? literalType(offset, t.builder.getContext())
                                        : elementOf(typeOf(offset, op));
  if (!offsetType.isSignlessInteger() || offsetType.isInteger(1))
    throw Error(err(op, "pointer offsets must be integers, got " + both(ptr, offset)));
  if (offsetType.getIntOrFloatBitWidth() < 32)
    offsetType = t.builder.getI32Type();
  Shape shape = broadcastShapes(op, {&ptr, &offset});
  Value p = broadcastValue(t, t.get(ptr, op), shape, op);
  Value o = coerce(t, offset, offsetType, shape, op);
  if (negate)
    o = t.make<arith::SubIOp>(op, constant(t, Tile(0), offsetType, shape, op), o);
  return t.wrap(t.make<tile::AddPtrOp>(op, p.getType(), p, o));
}

enum class ArithKind { Add, Sub, Mul, Div, Rem };

Tile arithmetic(const char *op, const Tile &a, const Tile &b, ArithKind kind) {
  Tracer &t = Tracer::current(op);
  if (isBlockPointerTile(a, op) || isBlockPointerTile(b, op))
    throw Error(err(op, "block pointers move with advance(), got " + both(a, b)));
  bool pa = isPointerTile(a, op), pb = isPointerTile(b, op);
  if (pa || pb) {
    if (kind == ArithKind::Add && pa != pb)
      return pointerOffset(op, pa ? a : b, pa ? b : a, false);
    if (kind == ArithKind::Sub && pa && !pb)
      return pointerOffset(op, a, b, true);
    throw Error(err(op, "pointers take only ptr + int, int + ptr and ptr - int, got " + both(a, b)));
  }
  Prepared p = prepare(t, op, {&a, &b});
  if (p.element.isInteger(1))
    throw Error(err(op, "arithmetic on i1 (" + both(a, b) + "); cast to i32 first"));
  Value x = p.values[0], y = p.values[1];
  bool fl = isFloat(p.element);
  switch (kind) {
  case ArithKind::Add: return t.wrap(fl ? t.make<arith::AddFOp>(op, x, y) : t.make<arith::AddIOp>(op, x, y));
  case ArithKind::Sub: return t.wrap(fl ? t.make<arith::SubFOp>(op, x, y) : t.make<arith::SubIOp>(op, x, y));
  case ArithKind::Mul: return t.wrap(fl ? t.make<arith::MulFOp>(op, x, y) : t.make<arith::MulIOp>(op, x, y));
  case ArithKind::Div: return t.wrap(fl ? t.make<arith::DivFOp>(op, x, y) : t.make<arith::DivSIOp>(op, x, y));
  case ArithKind::Rem: return t.wrap(fl ? t.make<arith::RemFOp>(op, x, y) : t.make<arith::RemSIOp>(op, x, y));
  }
  return {};
}

/// Integer-only binary ops (bitwise, shifts, logical): `OpT` on the promoted operands.
template <typename OpT>
Tile integerBinary(const char *op, const Tile &a, const Tile &b, bool boolOnly) {
  Tracer &t = Tracer::current(op);
  rejectPointers(op, a, b);
  Prepared p = prepare(t, op, {&a, &b});
  if (isFloat(p.element) || (boolOnly && !p.element.isInteger(1)))
    throw Error(err(op, std::string("needs ") + (boolOnly ? "i1" : "integer") +
                            " operands, got " + both(a, b)));
  return t.wrap(t.make<OpT>(op, p.values[0], p.values[1]));
}

Tile compare(const char *op, const Tile &a, const Tile &b, arith::CmpFPredicate fp,
             arith::CmpIPredicate ip, arith::CmpIPredicate up) {
  Tracer &t = Tracer::current(op);
  rejectPointers(op, a, b);
  Prepared p = prepare(t, op, {&a, &b});
  if (isFloat(p.element))
    return t.wrap(t.make<arith::CmpFOp>(op, fp, p.values[0], p.values[1]));
  return t.wrap(t.make<arith::CmpIOp>(op, p.element.isInteger(1) ? up : ip, p.values[0], p.values[1]));
}

/// A float-only unary math op.
template <typename OpT> Tile floatUnary(const char *op, const Tile &x) {
  Tracer &t = Tracer::current(op);
  Type type = x.is_literal() ? t.builder.getF32Type() : typeOf(x, op);
  if (!isFloat(elementOf(type)))
    throw Error(err(op, "needs a float tile, got " + x.str() + " (convert with .to(DType::f32))"));
  Value value = coerce(t, x, elementOf(type), shapeOf(type), op);
  return t.wrap(t.make<OpT>(op, value));
}

template <typename FloatOp, typename IntOp>
Tile extremum(const char *op, const Tile &a, const Tile &b) {
  Tracer &t = Tracer::current(op);
  rejectPointers(op, a, b);
  Prepared p = prepare(t, op, {&a, &b});
  if (isFloat(p.element))
    return t.wrap(t.make<FloatOp>(op, p.values[0], p.values[1]));
  return t.wrap(t.make<IntOp>(op, p.values[0], p.values[1]));
}

Value scalarOf(Tracer &t, const Tile &x, Type type, const char *op, const char *what) {
  Type own = x.is_literal() ? literalType(x, t.builder.getContext()) : typeOf(x, op);
  if (!own.isSignlessInteger() || own.isInteger(1))
    throw Error(err(op, std::string(what) + " must be scalar integers, got " + x.str()));
  return coerce(t, x, type, {}, op);
}

mlir::DenseI32ArrayAttr i32Array(Tracer &t, const std::vector<int> &values) {
  return t.builder.getDenseI32ArrayAttr(std::vector<int32_t>(values.begin(), values.end()));
}

std::vector<int> allDims(int64_t rank) {
  std::vector<int> dims(rank);
  std::iota(dims.begin(), dims.end(), 0);
  return dims;
}

int normalizeAxis(const char *op, int axis, int rank, const Tile &x) {
  if (axis < -rank || axis >= rank)
    throw Error(err(op, "axis " + std::to_string(axis) + " is out of range for " + x.str()));
  return axis < 0 ? axis + rank : axis;
}

Tile reduce(const char *op, const Tile &x, int axis, bool keepDims, tile::ReduceKind kind) {
  Tracer &t = Tracer::current(op);
  Value value = t.get(x, op);
  auto tensor = mlir::dyn_cast<mlir::RankedTensorType>(value.getType());
  if (!tensor || isPointer(tensor))
    throw Error(err(op, "needs a tile of numbers, got " + x.str()));
  axis = normalizeAxis(op, axis, tensor.getRank(), x);
  if (tensor.getElementType().isInteger(1))
    throw Error(err(op, "of " + x.str() + " is not supported; convert to i32 first"));
  bool index = kind == tile::ReduceKind::argmax || kind == tile::ReduceKind::argmin;
  Type element = index ? t.builder.getI32Type() : tensor.getElementType();
  Shape shape(tensor.getShape());
  shape.erase(shape.begin() + axis);
  Value result = t.make<tile::ReduceOp>(op, withShape(element, shape), value,
                                        tile::ReduceKindAttr::get(t.builder.getContext(), kind),
                                        t.builder.getI32IntegerAttr(axis));
  Tile out = t.wrap(result);
  return keepDims ? expand_dims(out, axis) : out;
}

Tile atomic(const char *op, tile::AtomicKind kind, const Tile &ptr, const Tile &value,
            const Tile &mask, MemOrder order, MemScope scope) {
  Tracer &t = Tracer::current(op);
  if (!isPointerTile(ptr, op))
    throw Error(err(op, "needs pointers, got " + ptr.str()));
  std::vector<const Tile *> tiles{&ptr, &value};
  if (!mask.is_null())
    tiles.push_back(&mask);
  Shape shape = broadcastShapes(op, tiles);
  Type pointee = tile::getPointeeType(elementOf(typeOf(ptr, op)));
  if (!value.is_literal() && elementOf(typeOf(value, op)) != pointee)
    throw Error(err(op, "value " + value.str() + " does not match the pointee of " + ptr.str()));
  Value p = broadcastValue(t, t.get(ptr, op), shape, op);
  Value v = coerce(t, value, pointee, shape, op);
  Value m;
  if (!mask.is_null()) {
    if (!mask.is_literal() && !elementOf(typeOf(mask, op)).isInteger(1))
      throw Error(err(op, "mask must be i1, got " + mask.str()));
    m = coerce(t, mask, t.builder.getI1Type(), shape, op);
  }
  mlir::MLIRContext *context = t.builder.getContext();
  return t.wrap(t.make<tile::AtomicRMWOp>(
      op, v.getType(), tile::AtomicKindAttr::get(context, kind), p, v, m,
      tile::MemSemanticAttr::get(context, static_cast<tile::MemSemantic>(order)),
      tile::MemScopeAttr::get(context, static_cast<tile::MemScope>(scope))));
}

} // namespace

//===----------------------------------------------------------------------===//
// Operators
//===----------------------------------------------------------------------===//

Tile operator+(const Tile &a, const Tile &b) { return arithmetic("add", a, b, ArithKind::Add); }
Tile operator-(const Tile &a, const Tile &b) { return arithmetic("sub", a, b, ArithKind::Sub); }
Tile operator*(const Tile &a, const Tile &b) { return arithmetic("mul", a, b, ArithKind::Mul); }
Tile operator/(const Tile &a, const Tile &b) { return arithmetic("div", a, b, ArithKind::Div); }
Tile operator%(const Tile &a, const Tile &b) { return arithmetic("rem", a, b, ArithKind::Rem); }
Tile operator&(const Tile &a, const Tile &b) { return integerBinary<arith::AndIOp>("and", a, b, false); }
Tile operator|(const Tile &a, const Tile &b) { return integerBinary<arith::OrIOp>("or", a, b, false); }
Tile operator^(const Tile &a, const Tile &b) { return integerBinary<arith::XOrIOp>("xor", a, b, false); }
Tile operator<<(const Tile &a, const Tile &b) { return integerBinary<arith::ShLIOp>("shl", a, b, false); }
Tile operator>>(const Tile &a, const Tile &b) { return integerBinary<arith::ShRSIOp>("shr", a, b, false); }
Tile operator&&(const Tile &a, const Tile &b) { return integerBinary<arith::AndIOp>("logical_and", a, b, true); }
Tile operator||(const Tile &a, const Tile &b) { return integerBinary<arith::OrIOp>("logical_or", a, b, true); }

Tile operator-(const Tile &a) {
  Tracer &t = Tracer::current("neg");
  rejectPointers("neg", a, a);
  if (!a.is_literal() && isFloat(elementOf(typeOf(a, "neg"))))
    return t.wrap(t.make<arith::NegFOp>("neg", t.get(a, "neg")));
  return arithmetic("neg", 0, a, ArithKind::Sub);
}

Tile operator~(const Tile &a) { return integerBinary<arith::XOrIOp>("not", a, -1, false); }

Tile operator!(const Tile &a) { return integerBinary<arith::XOrIOp>("logical_not", a, true, true); }

Tile operator<(const Tile &a, const Tile &b) {
  return compare("lt", a, b, arith::CmpFPredicate::OLT, arith::CmpIPredicate::slt, arith::CmpIPredicate::ult);
}
Tile operator<=(const Tile &a, const Tile &b) {
  return compare("le", a, b, arith::CmpFPredicate::OLE, arith::CmpIPredicate::sle, arith::CmpIPredicate::ule);
}
Tile operator>(const Tile &a, const Tile &b) {
  return compare("gt", a, b, arith::CmpFPredicate::OGT, arith::CmpIPredicate::sgt, arith::CmpIPredicate::ugt);
}
Tile operator>=(const Tile &a, const Tile &b) {
  return compare("ge", a, b, arith::CmpFPredicate::OGE, arith::CmpIPredicate::sge, arith::CmpIPredicate::uge);
}
Tile operator==(const Tile &a, const Tile &b) {
  return compare("eq", a, b, arith::CmpFPredicate::OEQ, arith::CmpIPredicate::eq, arith::CmpIPredicate::eq);
}
Tile operator!=(const Tile &a, const Tile &b) {
  return compare("ne", a, b, arith::CmpFPredicate::UNE, arith::CmpIPredicate::ne, arith::CmpIPredicate::ne);
}

Tile Tile::to(DType dtype) const {
  Tracer &t = Tracer::current("to");
  Type element = toMlirType(dtype, t.builder.getContext());
  if (is_literal())
    return t.wrap(constant(t, *this, element, {}, "to"));
  if (isBlockPointerTile(*this, "to"))
    throw Error(err("to", "cannot convert " + str() + " to " + to_string(dtype)));
  return t.wrap(castValue(t, t.get(*this, "to"), element, "to"));
}

Tile Tile::bitcast(DType dtype) const {
  Tracer &t = Tracer::current("bitcast");
  Value value = t.get(*this, "bitcast");
  Type from = elementOf(value.getType());
  Type to = toMlirType(dtype, t.builder.getContext());
  if (isPointer(value.getType()) || mlir::isa<tile::BlockPointerType>(value.getType()) ||
      from.getIntOrFloatBitWidth() != to.getIntOrFloatBitWidth())
    throw Error(err("bitcast", "cannot reinterpret " + str() + " as " + to_string(dtype) +
                                   " (widths must match)"));
  if (from == to)
    return *this;
  return t.wrap(t.make<arith::BitcastOp>("bitcast", withShape(to, shapeOf(value.getType())), value));
}

//===----------------------------------------------------------------------===//
// Grid and tile construction
//===----------------------------------------------------------------------===//

Tile program_id(int axis) {
  Tracer &t = Tracer::current("program_id");
  if (axis < 0 || axis > 2)
    throw Error(err("program_id", "axis must be 0, 1 or 2, got " + std::to_string(axis)));
  return t.wrap(t.make<tile::ProgramIdOp>(
      "program_id", t.builder.getI32Type(),
      tile::GridAxisAttr::get(t.builder.getContext(), static_cast<tile::GridAxis>(axis))));
}

Tile num_programs(int axis) {
  Tracer &t = Tracer::current("num_programs");
  if (axis < 0 || axis > 2)
    throw Error(err("num_programs", "axis must be 0, 1 or 2, got " + std::to_string(axis)));
  return t.wrap(t.make<tile::NumProgramsOp>(
      "num_programs", t.builder.getI32Type(),
      tile::GridAxisAttr::get(t.builder.getContext(), static_cast<tile::GridAxis>(axis))));
}

Tile arange(int64_t start, int64_t end) {
  Tracer &t = Tracer::current("arange");
  if (start < 0 || end <= start || end > INT32_MAX)
    throw Error(err("arange", "range [" + std::to_string(start) + ", " + std::to_string(end) +
                                  ") must be non-empty, start at 0 or later and fit in i32"));
  requirePowerOfTwo("arange", {end - start});
  auto type = mlir::RankedTensorType::get({end - start}, t.builder.getI32Type());
  return t.wrap(t.make<tile::MakeRangeOp>("arange", type, t.builder.getI32IntegerAttr(start),
                                          t.builder.getI32IntegerAttr(end)));
}

Tile full(const Shape &shape, const Tile &value, DType dtype) {
  Tracer &t = Tracer::current("full");
  requirePowerOfTwo("full", shape);
  if (!value.is_literal() && !tileShape(value, "full").empty())
    throw Error(err("full", "the fill value must be a scalar, got " + value.str()));
  if (!value.is_literal() && (isPointerTile(value, "full") || isBlockPointerTile(value, "full")))
    return t.wrap(broadcastValue(t, t.get(value, "full"), shape, "full"));
  return t.wrap(coerce(t, value, toMlirType(dtype, t.builder.getContext()), shape, "full"));
}

Tile full(const Shape &shape, const Tile &value) {
  Tracer &t = Tracer::current("full");
  Type type = value.is_literal() ? literalType(value, t.builder.getContext()) : typeOf(value, "full");
  if (isPointer(type))
    return full(shape, value, DType::i32);
  return full(shape, value, fromMlirType(elementOf(type)));
}

Tile zeros(const Shape &shape, DType dtype) { return full(shape, 0, dtype); }

Tile splat(const Tile &scalar, const Shape &shape) { return full(shape, scalar); }

//===----------------------------------------------------------------------===//
// Shapes
//===----------------------------------------------------------------------===//

Tile broadcast_to(const Tile &x, const Shape &shape) {
  Tracer &t = Tracer::current("broadcast_to");
  requirePowerOfTwo("broadcast_to", shape);
  requireBroadcastable("broadcast_to", x, shape);
  if (x.is_literal())
    return t.wrap(constant(t, x, literalType(x, t.builder.getContext()), shape, "broadcast_to"));
  return t.wrap(broadcastValue(t, t.get(x, "broadcast_to"), shape, "broadcast_to"));
}

Tile expand_dims(const Tile &x, int axis) {
  Tracer &t = Tracer::current("expand_dims");
  Value value = t.get(x, "expand_dims");
  Shape shape = shapeOf(value.getType());
  int rank = static_cast<int>(shape.size());
  if (axis < -(rank + 1) || axis > rank)
    throw Error(err("expand_dims", "axis " + std::to_string(axis) + " is out of range for " + x.str()));
  if (axis < 0)
    axis += rank + 1;
  if (rank == 0)
    return t.wrap(broadcastValue(t, value, {1}, "expand_dims"));
  shape.insert(shape.begin() + axis, 1);
  return t.wrap(t.make<tile::ExpandDimsOp>(
      "expand_dims", withShape(elementOf(value.getType()), shape), value,
      t.builder.getI32IntegerAttr(axis)));
}

Tile reshape(const Tile &x, const Shape &shape) {
  Tracer &t = Tracer::current("reshape");
  requirePowerOfTwo("reshape", shape);
  Value value = t.get(x, "reshape");
  Shape own = shapeOf(value.getType());
  auto count = [](const Shape &s) {
    return std::accumulate(s.begin(), s.end(), int64_t(1), std::multiplies<int64_t>());
  };
  if (count(own) != count(shape))
    throw Error(err("reshape", "cannot reshape " + x.str() + " (" + std::to_string(count(own)) +
                                   " elements) to " + join(shape) + " (" +
                                   std::to_string(count(shape)) + " elements)"));
  if (own.empty())
    return t.wrap(broadcastValue(t, value, shape, "reshape"));
  if (own == shape)
    return x;
  return t.wrap(t.make<tile::ReshapeOp>("reshape", withShape(elementOf(value.getType()), shape), value));
}

Tile permute(const Tile &x, const std::vector<int> &order) {
  Tracer &t = Tracer::current("permute");
  Value value = t.get(x, "permute");
  Shape own = shapeOf(value.getType());
  std::vector<bool> seen(own.size(), false);
  bool ok = order.size() == own.size();
  Shape shape;
  for (int dim : order) {
    ok = ok && dim >= 0 && dim < static_cast<int>(own.size()) && !seen[dim];
    if (!ok)
      break;
    seen[dim] = true;
    shape.push_back(own[dim]);
  }
  if (!ok) {
    std::string text;
    for (int dim : order)
      text += (text.empty() ? "" : ", ") + std::to_string(dim);
    throw Error(err("permute", "order {" + text + "} is not a permutation of the dimensions of " + x.str()));
  }
  return t.wrap(t.make<tile::TransOp>("permute", withShape(elementOf(value.getType()), shape),
                                      value, i32Array(t, order)));
}

Tile trans(const Tile &x) {
  if (tileShape(x, "trans").size() != 2)
    throw Error(err("trans", "needs a 2-D tile, got " + x.str() + " (use permute for other ranks)"));
  return permute(x, {1, 0});
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

Tile where(const Tile &condition, const Tile &a, const Tile &b) {
  Tracer &t = Tracer::current("where");
  if (!condition.is_literal() && !elementOf(typeOf(condition, "where")).isInteger(1))
    throw Error(err("where", "the condition must be i1, got " + condition.str()));
  Type element = promote("where", {&a, &b});
  Shape shape = broadcastShapes("where", {&condition, &a, &b});
  Value c = coerce(t, condition, t.builder.getI1Type(), shape, "where");
  Value x = coerce(t, a, element, shape, "where");
  Value y = coerce(t, b, element, shape, "where");
  return t.wrap(t.make<arith::SelectOp>("where", c, x, y));
}

Tile exp(const Tile &x) { return floatUnary<math::ExpOp>("exp", x); }
Tile exp2(const Tile &x) { return floatUnary<math::Exp2Op>("exp2", x); }
Tile log(const Tile &x) { return floatUnary<math::LogOp>("log", x); }
Tile log2(const Tile &x) { return floatUnary<math::Log2Op>("log2", x); }
Tile sqrt(const Tile &x) { return floatUnary<math::SqrtOp>("sqrt", x); }
Tile rsqrt(const Tile &x) { return floatUnary<math::RsqrtOp>("rsqrt", x); }
Tile tanh(const Tile &x) { return floatUnary<math::TanhOp>("tanh", x); }
Tile sin(const Tile &x) { return floatUnary<math::SinOp>("sin", x); }
Tile cos(const Tile &x) { return floatUnary<math::CosOp>("cos", x); }
Tile floor(const Tile &x) { return floatUnary<math::FloorOp>("floor", x); }
Tile ceil(const Tile &x) { return floatUnary<math::CeilOp>("ceil", x); }
Tile erf(const Tile &x) { return floatUnary<math::ErfOp>("erf", x); }

Tile abs(const Tile &x) {
  Tracer &t = Tracer::current("abs");
  if (!x.is_literal() && !isFloat(elementOf(typeOf(x, "abs")))) {
    if (isPointerTile(x, "abs") || isBlockPointerTile(x, "abs") || elementOf(typeOf(x, "abs")).isInteger(1))
      throw Error(err("abs", "needs numbers, got " + x.str()));
    return t.wrap(t.make<math::AbsIOp>("abs", t.get(x, "abs")));
  }
  return floatUnary<math::AbsFOp>("abs", x);
}

Tile fma(const Tile &a, const Tile &b, const Tile &c) {
  Tracer &t = Tracer::current("fma");
  Prepared p = prepare(t, "fma", {&a, &b, &c});
  if (!isFloat(p.element))
    throw Error(err("fma", "needs floats, got " + a.str() + ", " + b.str() + ", " + c.str()));
  return t.wrap(t.make<math::FmaOp>("fma", p.values[0], p.values[1], p.values[2]));
}

Tile maximum(const Tile &a, const Tile &b) {
  return extremum<arith::MaximumFOp, arith::MaxSIOp>("maximum", a, b);
}
Tile minimum(const Tile &a, const Tile &b) {
  return extremum<arith::MinimumFOp, arith::MinSIOp>("minimum", a, b);
}

Tile cdiv(const Tile &a, const Tile &b) {
  Type element = promote("cdiv", {&a, &b});
  if (isFloat(element) || element.isInteger(1) || mlir::isa<tile::PointerType>(element))
    throw Error(err("cdiv", "needs integers, got " + both(a, b)));
  return (a + b - 1) / b;
}

//===----------------------------------------------------------------------===//
// Reductions, dot
//===----------------------------------------------------------------------===//

Tile sum(const Tile &x, int axis, bool keep_dims) { return reduce("sum", x, axis, keep_dims, tile::ReduceKind::sum); }
Tile max(const Tile &x, int axis, bool keep_dims) { return reduce("max", x, axis, keep_dims, tile::ReduceKind::max); }
Tile min(const Tile &x, int axis, bool keep_dims) { return reduce("min", x, axis, keep_dims, tile::ReduceKind::min); }
Tile argmax(const Tile &x, int axis, bool keep_dims) { return reduce("argmax", x, axis, keep_dims, tile::ReduceKind::argmax); }
Tile argmin(const Tile &x, int axis, bool keep_dims) { return reduce("argmin", x, axis, keep_dims, tile::ReduceKind::argmin); }

Tile dot(const Tile &a, const Tile &b, const Tile &acc, Precision precision) {
  const char *op = "dot";
  Tracer &t = Tracer::current(op);
  Value va = t.get(a, op), vb = t.get(b, op);
  auto ta = mlir::dyn_cast<mlir::RankedTensorType>(va.getType());
  auto tb = mlir::dyn_cast<mlir::RankedTensorType>(vb.getType());
  if (!ta || !tb || ta.getRank() != 2 || tb.getRank() != 2 || isPointer(ta) || isPointer(tb))
    throw Error(err(op, "needs two 2-D tiles of numbers, got " + both(a, b)));
  if (ta.getDimSize(1) != tb.getDimSize(0))
    throw Error(err(op, "inner dimensions differ: " + both(a, b)));
  if (ta.getElementType() != tb.getElementType())
    throw Error(err(op, "operands have different dtypes: " + both(a, b) + " (convert one with .to())"));
  for (int64_t dim : {ta.getDimSize(0), ta.getDimSize(1), tb.getDimSize(1)})
    if (dim < 16)
      throw Error(err(op, "every dimension must be at least 16, got " + both(a, b)));
  Type in = ta.getElementType();
  if (precision != Precision::ieee && !in.isF32())
    throw Error(err(op, "tf32 precisions apply to f32 inputs, not " + both(a, b)));
  Shape shape{ta.getDimSize(0), tb.getDimSize(1)};
  Value vacc;
  if (acc.is_null() || acc.is_literal()) {
    DType accType;
    if (in.isF16() || in.isBF16() || in.isF32())
      accType = DType::f32;
    else if (in.isInteger(8))
      accType = DType::i32;
    else
      throw Error(err(op, "unsupported operand dtype: " + both(a, b) + " (f16, bf16, f32, i8)"));
    vacc = t.get(full(shape, acc.is_null() ? Tile(0) : acc, accType), op);
  } else {
    vacc = t.get(acc, op);
    if (shapeOf(vacc.getType()) != shape)
      throw Error(err(op, "acc " + acc.str() + " is not " + join(shape) + " for " + both(a, b)));
    Type out = elementOf(vacc.getType());
    bool accumulates = ((in.isF16() || in.isBF16() || in.isF32()) && out.isF32()) ||
                       (in.isF16() && out.isF16()) || (in.isInteger(8) && out.isInteger(32));
    if (!accumulates)
      throw Error(err(op, "acc " + acc.str() + " cannot accumulate " + both(a, b) +
                              " (f32 for f16/bf16/f32, also f16 for f16, i32 for i8)"));
  }
  return t.wrap(t.make<tile::DotOp>(
      op, vacc.getType(), va, vb, vacc,
      tile::InputPrecisionAttr::get(t.builder.getContext(), static_cast<tile::InputPrecision>(precision))));
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

Tile load(const Tile &ptr, const Tile &mask, const Tile &other) {
  const char *op = "load";
  Tracer &t = Tracer::current(op);
  if (isBlockPointerTile(ptr, op)) {
    if (!mask.is_null() || !other.is_null())
      throw Error(err(op, "a block pointer load takes no mask or other: elements outside the "
                          "tensor read zero"));
    Value p = t.get(ptr, op);
    auto block = mlir::cast<tile::BlockPointerType>(p.getType()).getBlockType();
    return t.wrap(t.make<tile::BlockLoadOp>(op, block, p, i32Array(t, allDims(block.getRank())),
                                            tile::PaddingAttr::get(t.builder.getContext(), tile::Padding::zero)));
  }
  if (!isPointerTile(ptr, op))
    throw Error(err(op, "needs pointers, got " + ptr.str()));
  if (!other.is_null() && mask.is_null())
    throw Error(err(op, "`other` needs a mask: without one every lane is loaded"));
  std::vector<const Tile *> tiles{&ptr};
  if (!mask.is_null())
    tiles.push_back(&mask);
  Shape shape = broadcastShapes(op, tiles);
  Value p = broadcastValue(t, t.get(ptr, op), shape, op);
  Type pointee = tile::getPointeeType(elementOf(p.getType()));
  Value m, o;
  if (!mask.is_null()) {
    if (!mask.is_literal() && !elementOf(typeOf(mask, op)).isInteger(1))
      throw Error(err(op, "mask must be i1, got " + mask.str()));
    m = coerce(t, mask, t.builder.getI1Type(), shape, op);
  }
  if (!other.is_null()) {
    if (!other.is_literal() && elementOf(typeOf(other, op)) != pointee)
      throw Error(err(op, "other " + other.str() + " does not match the pointee of " + ptr.str()));
    if (!other.is_literal() && shapeOf(typeOf(other, op)).size() > shape.size())
      throw Error(err(op, "other " + other.str() + " is larger than the pointers " + ptr.str()));
    o = coerce(t, other, pointee, shape, op);
  }
  return t.wrap(t.make<tile::LoadOp>(op, p, m, o));
}

void store(const Tile &ptr, const Tile &value, const Tile &mask) {
  const char *op = "store";
  Tracer &t = Tracer::current(op);
  if (isBlockPointerTile(ptr, op)) {
    if (!mask.is_null())
      throw Error(err(op, "a block pointer store takes no mask: elements outside the tensor "
                          "are not written"));
    Value p = t.get(ptr, op);
    auto block = mlir::cast<tile::BlockPointerType>(p.getType()).getBlockType();
    if (!value.is_literal() && elementOf(typeOf(value, op)) != block.getElementType())
      throw Error(err(op, "value " + value.str() + " does not match the block of " + ptr.str()));
    requireBroadcastable(op, value, Shape(block.getShape()));
    Value v = coerce(t, value, block.getElementType(), Shape(block.getShape()), op);
    t.make<tile::BlockStoreOp>(op, p, v, i32Array(t, allDims(block.getRank())));
    return;
  }
  if (!isPointerTile(ptr, op))
    throw Error(err(op, "needs pointers, got " + ptr.str()));
  std::vector<const Tile *> tiles{&ptr, &value};
  if (!mask.is_null())
    tiles.push_back(&mask);
  Shape shape = broadcastShapes(op, tiles);
  Type pointee = tile::getPointeeType(elementOf(typeOf(ptr, op)));
  if (!value.is_literal() && elementOf(typeOf(value, op)) != pointee)
    throw Error(err(op, "value " + value.str() + " does not match the pointee of " + ptr.str() +
                        " (convert it with .to())"));
  Value p = broadcastValue(t, t.get(ptr, op), shape, op);
  Value v = coerce(t, value, pointee, shape, op);
  Value m;
  if (!mask.is_null()) {
    if (!mask.is_literal() && !elementOf(typeOf(mask, op)).isInteger(1))
      throw Error(err(op, "mask must be i1, got " + mask.str()));
    m = coerce(t, mask, t.builder.getI1Type(), shape, op);
  }
  t.make<tile::StoreOp>(op, p, v, m);
}

void bulk_add(const Tile &dst, const Tile &values, BulkOrder order) {
  const char *op = "bulk_add";
  Tracer &t = Tracer::current(op);
  if (!isPointerTile(dst, op) || dst.rank() != 0 || dst.dtype() != DType::f32)
    throw Error(err(op, "adds into an f32 pointer, got " + dst.str()));
  if (values.is_literal() || values.rank() != 2 || values.dtype() != DType::f32)
    throw Error(err(op, "adds a 2-D f32 tile, got " + values.str()));
  if (values.shape()[0] * values.shape()[1] * 4 % 16)
    throw Error(err(op, "adds a multiple of 16 bytes, got " + values.str()));
  const bool swizzled = order == BulkOrder::swizzled;
  if (swizzled && values.shape()[1] % 32)
    throw Error(err(op, "swizzles rows of a multiple of 32 floats, got " + values.str()));
  t.make<tile::BulkAddOp>(op, t.get(dst, op), t.get(values, op), swizzled);
}

Tile atomic_add(const Tile &ptr, const Tile &value, const Tile &mask, MemOrder order, MemScope scope) {
  return atomic("atomic_add", tile::AtomicKind::add, ptr, value, mask, order, scope);
}
Tile atomic_max(const Tile &ptr, const Tile &value, const Tile &mask, MemOrder order, MemScope scope) {
  return atomic("atomic_max", tile::AtomicKind::max, ptr, value, mask, order, scope);
}
Tile atomic_min(const Tile &ptr, const Tile &value, const Tile &mask, MemOrder order, MemScope scope) {
  return atomic("atomic_min", tile::AtomicKind::min, ptr, value, mask, order, scope);
}
Tile atomic_and(const Tile &ptr, const Tile &value, const Tile &mask, MemOrder order, MemScope scope) {
  return atomic("atomic_and", tile::AtomicKind::bit_and, ptr, value, mask, order, scope);
}
Tile atomic_or(const Tile &ptr, const Tile &value, const Tile &mask, MemOrder order, MemScope scope) {
  return atomic("atomic_or", tile::AtomicKind::bit_or, ptr, value, mask, order, scope);
}
Tile atomic_xor(const Tile &ptr, const Tile &value, const Tile &mask, MemOrder order, MemScope scope) {
  return atomic("atomic_xor", tile::AtomicKind::bit_xor, ptr, value, mask, order, scope);
}
Tile atomic_xchg(const Tile &ptr, const Tile &value, const Tile &mask, MemOrder order, MemScope scope) {
  return atomic("atomic_xchg", tile::AtomicKind::xchg, ptr, value, mask, order, scope);
}

Tile make_block_ptr(const Tile &base, const std::vector<Tile> &shape,
                    const std::vector<Tile> &strides, const std::vector<Tile> &offsets,
                    const Shape &block_shape, const std::vector<int> &order) {
  const char *op = "make_block_ptr";
  Tracer &t = Tracer::current(op);
  if (!isPointerTile(base, op) || !tileShape(base, op).empty())
    throw Error(err(op, "the base must be a scalar pointer, got " + base.str()));
  requirePowerOfTwo(op, block_shape);
  size_t rank = block_shape.size();
  auto count = [&](size_t n, const char *what) {
    if (n != rank)
      throw Error(err(op, std::string(what) + " has " + std::to_string(n) + " entries for the " +
                              std::to_string(rank) + "-D block " + join(block_shape)));
  };
  count(shape.size(), "shape");
  count(strides.size(), "strides");
  count(offsets.size(), "offsets");
  std::vector<int> dims = order;
  if (dims.empty())
    for (int d = static_cast<int>(rank) - 1; d >= 0; --d)
      dims.push_back(d);
  count(dims.size(), "order");
  llvm::SmallVector<Value> shapeValues, strideValues, offsetValues;
  for (size_t i = 0; i < rank; ++i) {
    shapeValues.push_back(scalarOf(t, shape[i], t.builder.getI64Type(), op, "shape entries"));
    strideValues.push_back(scalarOf(t, strides[i], t.builder.getI64Type(), op, "strides"));
    offsetValues.push_back(scalarOf(t, offsets[i], t.builder.getI32Type(), op, "offsets"));
  }
  Type pointee = tile::getPointeeType(typeOf(base, op));
  auto type = tile::BlockPointerType::get(t.builder.getContext(),
                                          mlir::RankedTensorType::get(block_shape, pointee));
  return t.wrap(t.make<tile::MakeBlockPtrOp>(op, type, t.get(base, op), shapeValues,
                                             strideValues, offsetValues, i32Array(t, dims)));
}

Tile advance(const Tile &block_ptr, const std::vector<Tile> &offsets) {
  const char *op = "advance";
  Tracer &t = Tracer::current(op);
  if (!isBlockPointerTile(block_ptr, op))
    throw Error(err(op, "needs a block pointer, got " + block_ptr.str()));
  Value p = t.get(block_ptr, op);
  int64_t rank = mlir::cast<tile::BlockPointerType>(p.getType()).getBlockType().getRank();
  if (static_cast<int64_t>(offsets.size()) != rank)
    throw Error(err(op, std::to_string(offsets.size()) + " offsets for " + block_ptr.str()));
  llvm::SmallVector<Value> values;
  for (const Tile &offset : offsets)
    values.push_back(scalarOf(t, offset, t.builder.getI32Type(), op, "offsets"));
  return t.wrap(t.make<tile::AdvanceOp>(op, p.getType(), p, values));
}

void print(const std::string &prefix, const std::vector<Tile> &values) {
  Tracer &t = Tracer::current("print");
  llvm::SmallVector<Value> operands;
  for (const Tile &value : values)
    operands.push_back(t.get(value, "print"));
  t.make<tile::PrintOp>("print", t.builder.getStringAttr(prefix), operands);
}

} // namespace tessera::dsl
