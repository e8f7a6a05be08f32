// Tracing: kernels, configs, the tracer, tile introspection and runtime control flow.
#include "Tracer.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <cctype>
#include <sstream>

namespace tessera::dsl {

using detail::TileAccess;
using detail::Tracer;

//===----------------------------------------------------------------------===//
// dtypes
//===----------------------------------------------------------------------===//

std::string to_string(DType dtype) {
  switch (dtype) {
  case DType::i1: return "i1";
  case DType::i8: return "i8";
  case DType::i16: return "i16";
  case DType::i32: return "i32";
  case DType::i64: return "i64";
  case DType::f16: return "f16";
  case DType::bf16: return "bf16";
  case DType::f32: return "f32";
  case DType::f64: return "f64";
  }
  return "?";
}

bool is_float(DType dtype) {
  return dtype == DType::f16 || dtype == DType::bf16 || dtype == DType::f32 ||
         dtype == DType::f64;
}

bool is_int(DType dtype) { return !is_float(dtype); }

int bit_width(DType dtype) {
  switch (dtype) {
  case DType::i1: return 1;
  case DType::i8: return 8;
  case DType::i16: case DType::f16: case DType::bf16: return 16;
  case DType::i32: case DType::f32: return 32;
  case DType::i64: case DType::f64: return 64;
  }
  return 0;
}

mlir::Type toMlirType(DType dtype, mlir::MLIRContext *context) {
  mlir::Builder b(context);
  switch (dtype) {
  case DType::f16: return b.getF16Type();
  case DType::bf16: return b.getBF16Type();
  case DType::f32: return b.getF32Type();
  case DType::f64: return b.getF64Type();
  default: return b.getIntegerType(bit_width(dtype));
  }
}

DType fromMlirType(mlir::Type type) {
  if (type.isF16()) return DType::f16;
  if (type.isBF16()) return DType::bf16;
  if (type.isF32()) return DType::f32;
  if (type.isF64()) return DType::f64;
  switch (type.getIntOrFloatBitWidth()) {
  case 1: return DType::i1;
  case 8: return DType::i8;
  case 16: return DType::i16;
  case 32: return DType::i32;
  default: return DType::i64;
  }
}

//===----------------------------------------------------------------------===//
// Config, ArgSpec
//===----------------------------------------------------------------------===//

int64_t Config::operator[](const std::string &name) const {
  auto it = values_.find(name);
  if (it == values_.end())
    throw Error("config has no meta parameter '" + name + "' (config: " + str() + ")");
  return it->second;
}

int64_t Config::get(const std::string &name, int64_t fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

void Config::set_all(const std::string &assignments) {
  for (size_t at = 0; at <= assignments.size();) {
    const size_t end = std::min(assignments.find(',', at), assignments.size());
    const std::string entry = assignments.substr(at, end - at);
    const size_t equals = entry.find('=');
    size_t parsed = 0;
    int64_t value = 0;
    try {
      if (equals != std::string::npos && equals > 0)
        value = std::stoll(entry.substr(equals + 1), &parsed);
    } catch (const std::exception &) {
      parsed = 0; // not an integer, or out of range
    }
    if (parsed == 0 || equals + 1 + parsed != entry.size())
      throw Error("config assignment '" + entry + "' is not KEY=VALUE with an integer VALUE (in '" + assignments +
                  "')");
    set(entry.substr(0, equals), value);
    at = end + 1;
  }
}

void Config::update(const Config &other) {
  for (const auto &[name, value] : other.values_)
    set(name, value);
}

std::string Config::str() const {
  std::string text = "{";
  for (const auto &[name, value] : values_)
    text += (text.size() > 1 ? ", " : "") + name + "=" + std::to_string(value);
  return text + "}";
}

std::string Specialization::str() const {
  std::string text;
  for (size_t i = 0; i < std::max(divisible_by_16.size(), equal_to_1.size()); ++i)
    text += i < equal_to_1.size() && equal_to_1[i]           ? '1'
            : i < divisible_by_16.size() && divisible_by_16[i] ? 'D'
                                                               : '.';
  return text;
}

std::string ArgSpec::str() const {
  return pointer ? "ptr<" + to_string(dtype) + ">" : to_string(dtype);
}

//===----------------------------------------------------------------------===//
// Tracer
//===----------------------------------------------------------------------===//

namespace detail {
namespace {
std::atomic<uint64_t> nextTraceId{1};
thread_local Tracer *activeTracer = nullptr;
} // namespace

Tracer::Tracer(mlir::MLIRContext *context, const std::string &kernelName)
    : builder(context), loc(mlir::NameLoc::get(builder.getStringAttr(kernelName))),
      id_(nextTraceId++), previous_(activeTracer) {
  activeTracer = this;
}

Tracer::~Tracer() { activeTracer = previous_; }

Tracer &Tracer::current(const char *op) {
  if (!activeTracer)
    throw Error(std::string(op) + ": used outside of a kernel trace (tiles exist only while "
                                  "a kernel body is being traced)");
  return *activeTracer;
}

mlir::Value Tracer::get(const Tile &tile, const char *op) {
  using Kind = TileAccess::Kind;
  switch (TileAccess::kind(tile)) {
  case Kind::Null:
    throw Error(std::string(op) + ": got a null tile (a default-constructed Tile was used as a value)");
  case Kind::IntLiteral:
    return make<mlir::arith::ConstantOp>(op, builder.getI32IntegerAttr(TileAccess::intValue(tile)));
  case Kind::FloatLiteral:
    return make<mlir::arith::ConstantOp>(op, builder.getF32FloatAttr(TileAccess::floatValue(tile)));
  case Kind::BoolLiteral:
    return make<mlir::arith::ConstantOp>(op, builder.getBoolAttr(TileAccess::intValue(tile) != 0));
  case Kind::Value:
    break;
  }
  if (TileAccess::trace(tile) != id_)
    throw Error(std::string(op) + ": uses a tile from another kernel trace");
  mlir::Value value = TileAccess::value(tile);
  mlir::Region *home = value.getParentRegion();
  if (!home->isAncestor(builder.getInsertionBlock()->getParent()))
    throw Error(std::string(op) + ": uses a value made inside a for_range/if_ body after that "
                                  "body ended; list its variable in the carried values");
  return value;
}

Tile Tracer::wrap(mlir::Value value) const { return TileAccess::make(id_, value); }

void Tracer::check(mlir::Operation *operation, const char *op) {
  std::string messages;
  mlir::ScopedDiagnosticHandler handler(operation->getContext(), [&](mlir::Diagnostic &diag) {
    messages += (messages.empty() ? "" : "; ") + diag.str();
    return mlir::success();
  });
  if (failed(mlir::verify(operation, /*verifyRecursively=*/false)))
    throw Error(std::string(op) + ": " + messages);
}

mlir::Type typeOf(const Tile &tile, const char *op) {
  using Kind = TileAccess::Kind;
  mlir::Builder b(Tracer::current(op).builder.getContext());
  switch (TileAccess::kind(tile)) {
  case Kind::Null: throw Error(std::string(op) + ": got a null tile");
  case Kind::IntLiteral: return b.getI32Type();
  case Kind::FloatLiteral: return b.getF32Type();
  case Kind::BoolLiteral: return b.getI1Type();
  case Kind::Value: break;
  }
  return Tracer::current(op).get(tile, op).getType();
}

} // namespace detail

//===----------------------------------------------------------------------===//
// Tile introspection
//===----------------------------------------------------------------------===//

namespace {
mlir::Type elementOf(mlir::Type type) {
  if (auto block = mlir::dyn_cast<tile::BlockPointerType>(type))
    return block.getBlockType().getElementType();
  mlir::Type element = mlir::getElementTypeOrSelf(type);
  if (auto ptr = mlir::dyn_cast<tile::PointerType>(element))
    return ptr.getPointeeType();
  return element;
}
} // namespace

Shape Tile::shape() const {
  mlir::Type type = detail::typeOf(*this, "shape");
  if (auto block = mlir::dyn_cast<tile::BlockPointerType>(type))
    return Shape(block.getBlockType().getShape());
  if (auto tensor = mlir::dyn_cast<mlir::RankedTensorType>(type))
    return Shape(tensor.getShape());
  return {};
}

DType Tile::dtype() const { return fromMlirType(elementOf(detail::typeOf(*this, "dtype"))); }

bool Tile::is_pointer() const {
  return mlir::isa<tile::PointerType>(mlir::getElementTypeOrSelf(detail::typeOf(*this, "is_pointer")));
}

bool Tile::is_block_pointer() const {
  return mlir::isa<tile::BlockPointerType>(detail::typeOf(*this, "is_block_pointer"));
}

std::string Tile::str() const {
  using Kind = TileAccess::Kind;
  switch (TileAccess::kind(*this)) {
  case Kind::Null: return "null";
  case Kind::IntLiteral: return "literal " + std::to_string(int_);
  case Kind::FloatLiteral: {
    std::ostringstream os;
    os << "literal " << float_;
    return os.str();
  }
  case Kind::BoolLiteral: return int_ ? "literal true" : "literal false";
  case Kind::Value: break;
  }
  return tile::describe(detail::typeOf(*this, "str"));
}

//===----------------------------------------------------------------------===//
// Kernel, TracedKernel
//===----------------------------------------------------------------------===//

TracedKernel::TracedKernel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TracedKernel::TracedKernel(TracedKernel &&) noexcept = default;
TracedKernel &TracedKernel::operator=(TracedKernel &&) noexcept = default;
TracedKernel::~TracedKernel() = default;

const std::string &TracedKernel::name() const { return impl_->name; }

std::string TracedKernel::str() const {
  std::string text;
  llvm::raw_string_ostream os(text);
  impl_->module->print(os);
  return text;
}

Kernel::Kernel(std::string name, std::vector<ArgSpec> signature, Body body)
    : name_(std::move(name)), signature_(std::move(signature)), body_(std::move(body)) {
  bool valid = !name_.empty() && (std::isalpha(static_cast<unsigned char>(name_[0])) || name_[0] == '_');
  for (char c : name_)
    valid = valid && (std::isalnum(static_cast<unsigned char>(c)) || c == '_');
  if (!valid)
    throw Error("kernel name '" + name_ + "' is not a C identifier ([A-Za-z_][A-Za-z0-9_]*)");
}

namespace {
std::unique_ptr<mlir::MLIRContext> makeContext() {
  mlir::DialectRegistry registry;
  registry.insert<tile::TileDialect, mlir::arith::ArithDialect, mlir::math::MathDialect,
                  mlir::scf::SCFDialect, mlir::func::FuncDialect>();
  auto context = std::make_unique<mlir::MLIRContext>(registry, mlir::MLIRContext::Threading::DISABLED);
  context->loadAllAvailableDialects();
  return context;
}
} // namespace

TracedKernel Kernel::trace(const Config &config, const Specialization &specialization) const {
  auto impl = std::make_unique<TracedKernel::Impl>();
  impl->name = name_;
  impl->context = makeContext();
  mlir::MLIRContext *context = impl->context.get();
  try {
    Tracer tracer(context, name_);
    mlir::OpBuilder &b = tracer.builder;
    impl->module = mlir::ModuleOp::create(tracer.loc);
    b.setInsertionPointToEnd(impl->module->getBody());

    llvm::SmallVector<mlir::Type> argTypes;
    for (const ArgSpec &arg : signature_) {
      mlir::Type element = toMlirType(arg.dtype, context);
      argTypes.push_back(arg.pointer ? tile::PointerType::get(context, element) : element);
    }
    auto func = mlir::func::FuncOp::create(b, tracer.loc, name_, b.getFunctionType(argTypes, {}));
    func->setAttr(tile::kKernelAttrName, b.getUnitAttr());
    llvm::SmallVector<mlir::NamedAttribute> meta;
    for (const auto &[key, value] : config.values())
      meta.push_back(b.getNamedAttr(key, b.getI64IntegerAttr(value)));
    func->setAttr("tile.config", b.getDictionaryAttr(meta));
    for (size_t i = 0; i < specialization.divisible_by_16.size() && i < signature_.size(); ++i)
      if (specialization.divisible_by_16[i])
        func.setArgAttr(i, "tile.divisibility", b.getI32IntegerAttr(16));
    mlir::Block *entry = func.addEntryBlock();
    b.setInsertionPointToStart(entry);

    std::vector<Tile> args;
    for (mlir::BlockArgument arg : entry->getArguments()) {
      size_t i = arg.getArgNumber();
      bool one = i < specialization.equal_to_1.size() && specialization.equal_to_1[i] &&
                 !signature_[i].pointer && is_int(signature_[i].dtype);
      args.push_back(one ? tracer.wrap(mlir::arith::ConstantOp::create(
                               b, tracer.loc, b.getIntegerAttr(arg.getType(), 1)))
                         : tracer.wrap(arg));
    }
    body_(args, config);
    mlir::func::ReturnOp::create(b, tracer.loc);

    std::string messages;
    mlir::ScopedDiagnosticHandler handler(context, [&](mlir::Diagnostic &diag) {
      messages += (messages.empty() ? "" : "; ") + diag.str();
      return mlir::success();
    });
    if (failed(mlir::verify(*impl->module)))
      throw Error("traced IR does not verify: " + messages);
  } catch (const Error &error) {
    throw Error("kernel '" + name_ + "' " + config.str() + ": " + error.what());
  }
  return TracedKernel(std::move(impl));
}

//===----------------------------------------------------------------------===//
// Runtime control flow
//===----------------------------------------------------------------------===//

namespace {

/// A scalar integer operand of for_range, as `type`.
mlir::Value loopBound(Tracer &t, const Tile &bound, mlir::Type type, const char *what) {
  mlir::Type own = detail::typeOf(bound, "for_range");
  if (!own.isSignlessInteger() || own.isInteger(1))
    throw Error(std::string("for_range: ") + what + " must be a scalar integer, got " +
                bound.str());
  if (TileAccess::kind(bound) == TileAccess::Kind::IntLiteral)
    return t.make<mlir::arith::ConstantOp>("for_range",
                                           t.builder.getIntegerAttr(type, TileAccess::intValue(bound)));
  mlir::Value value = t.get(bound, "for_range");
  if (own == type)
    return value;
  return t.make<mlir::arith::ExtSIOp>("for_range", type, value);
}

/// The values of the carried variables, checked (not null) and materialized.
llvm::SmallVector<mlir::Value> carriedValues(Tracer &t, Carried carried, const char *op) {
  llvm::SmallVector<mlir::Value> values;
  for (Tile &tile : carried) {
    if (tile.is_null())
      throw Error(std::string(op) + ": carried variable #" + std::to_string(values.size()) +
                  " is a null tile; give it an initial value");
    values.push_back(t.get(tile, op));
  }
  return values;
}

/// The carried variables' values at the end of a body, as `types` (their values before it):
/// literals take that type, anything else must already have it.
llvm::SmallVector<mlir::Value> yieldedValues(Tracer &t, Carried carried, mlir::TypeRange types,
                                             const char *op) {
  llvm::SmallVector<mlir::Value> values;
  size_t i = 0;
  for (Tile &tile : carried) {
    mlir::Type expected = types[i];
    if (tile.is_literal()) {
      auto tensor = mlir::dyn_cast<mlir::RankedTensorType>(expected);
      Shape shape = tensor ? Shape(tensor.getShape()) : Shape{};
      values.push_back(t.get(full(shape, tile, fromMlirType(mlir::getElementTypeOrSelf(expected))), op));
    } else {
      mlir::Value value = t.get(tile, op);
      if (value.getType() != expected)
        throw Error(std::string(op) + ": carried variable #" + std::to_string(i) + " was " +
                    tile::describe(expected) + " before and is " +
                    tile::describe(value.getType()) + " at the end of the body; carried "
                    "values keep their type and shape (cast it)");
      values.push_back(value);
    }
    ++i;
  }
  return values;
}

void rebind(Tracer &t, Carried carried, mlir::ValueRange values) {
  size_t i = 0;
  for (Tile &tile : carried)
    tile = t.wrap(values[i++]);
}

/// Insert at the end of `block`, before its terminator if it has one.
void enterBlock(mlir::OpBuilder &b, mlir::Block *block) {
  if (!block->empty() && block->back().hasTrait<mlir::OpTrait::IsTerminator>())
    b.setInsertionPoint(&block->back());
  else
    b.setInsertionPointToEnd(block);
}

} // namespace

void for_range(const Tile &lo, const Tile &hi, const Tile &step, Carried carried,
               const std::function<void(Tile)> &body) {
  Tracer &t = Tracer::current("for_range");
  if (TileAccess::kind(step) == TileAccess::Kind::IntLiteral && TileAccess::intValue(step) <= 0)
    throw Error("for_range: step must be positive, got " + step.str());
  // The induction variable is i64 if any bound is, else i32.
  mlir::Type ivType = t.builder.getI32Type();
  for (const Tile *bound : {&lo, &hi, &step})
    if (!bound->is_literal() && detail::typeOf(*bound, "for_range").isInteger(64))
      ivType = t.builder.getI64Type();
  mlir::Value lower = loopBound(t, lo, ivType, "lower bound");
  mlir::Value upper = loopBound(t, hi, ivType, "upper bound");
  mlir::Value stride = loopBound(t, step, ivType, "step");
  llvm::SmallVector<mlir::Value> inits = carriedValues(t, carried, "for_range");

  auto loop = mlir::scf::ForOp::create(t.builder, t.loc, lower, upper, stride, inits);
  {
    mlir::OpBuilder::InsertionGuard guard(t.builder);
    enterBlock(t.builder, loop.getBody());
    rebind(t, carried, loop.getRegionIterArgs());
    body(t.wrap(loop.getInductionVar()));
    if (!inits.empty()) {
      auto yielded = yieldedValues(t, carried, mlir::ValueRange(inits).getTypes(), "for_range");
      mlir::scf::YieldOp::create(t.builder, t.loc, yielded);
    }
  }
  rebind(t, carried, loop.getResults());
}

void for_range(const Tile &lo, const Tile &hi, const Tile &step,
               const std::function<void(Tile)> &body) {
  for_range(lo, hi, step, {}, body);
}

void if_(const Tile &condition, Carried carried, const std::function<void()> &then_body,
         const std::function<void()> &else_body) {
  Tracer &t = Tracer::current("if_");
  mlir::Value cond = t.get(condition, "if_");
  if (!cond.getType().isInteger(1))
    throw Error("if_: the condition must be a scalar i1, got " + condition.str() +
                (mlir::isa<mlir::RankedTensorType>(cond.getType())
                     ? " (use where() to select elementwise)"
                     : " (compare it, e.g. x != 0)"));
  llvm::SmallVector<mlir::Value> before = carriedValues(t, carried, "if_");
  mlir::TypeRange types = mlir::ValueRange(before).getTypes();
  bool hasElse = else_body || !before.empty();
  auto branch = mlir::scf::IfOp::create(t.builder, t.loc, types, cond, hasElse);

  auto trace = [&](mlir::Block *block, const std::function<void()> &fn) {
    mlir::OpBuilder::InsertionGuard guard(t.builder);
    enterBlock(t.builder, block);
    rebind(t, carried, before);
    if (fn)
      fn();
    if (!before.empty())
      mlir::scf::YieldOp::create(t.builder, t.loc, yieldedValues(t, carried, types, "if_"));
  };
  trace(branch.thenBlock(), then_body);
  if (hasElse)
    trace(branch.elseBlock(), else_body);
  rebind(t, carried, branch.getResults());
}

void if_(const Tile &condition, const std::function<void()> &then_body,
         const std::function<void()> &else_body) {
  if_(condition, {}, then_body, else_body);
}

} // namespace tessera::dsl
