// Internal: the state of one kernel trace and the bridge between Tile handles and MLIR
// values. Only dsl/lib includes this (it pulls in MLIR).
#ifndef TESSERA_DSL_LIB_TRACER_H
#define TESSERA_DSL_LIB_TRACER_H

#include "tessera/compiler/Dialect/Tile/TileDialect.h"
#include "tessera/dsl.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"

#include <memory>
#include <string>

namespace tessera::dsl {

struct TracedKernel::Impl {
  std::string name;
  std::unique_ptr<mlir::MLIRContext> context; // declared first: destroyed last
  mlir::OwningOpRef<mlir::ModuleOp> module;
};

mlir::Type toMlirType(DType dtype, mlir::MLIRContext *context);
DType fromMlirType(mlir::Type type); // scalar element types only

namespace detail {

/// The kernel trace running on this thread. Tiles made by it carry its id, so a tile that
/// escapes its trace is reported instead of touching freed IR.
class Tracer {
public:
  Tracer(mlir::MLIRContext *context, const std::string &kernelName);
  ~Tracer();
  Tracer(const Tracer &) = delete;
  Tracer &operator=(const Tracer &) = delete;

  /// The active trace; throws tessera::Error naming `op` when there is none.
  static Tracer &current(const char *op);

  mlir::OpBuilder builder;
  mlir::Location loc;

  /// The value of a tile of this trace; literals become constants of their default dtype.
  mlir::Value get(const Tile &tile, const char *op);
  Tile wrap(mlir::Value value) const;
  /// Verify one new op; its diagnostics become a tessera::Error naming `op`.
  void check(mlir::Operation *operation, const char *op);

  /// Create `OpT` at the insertion point, verify it and return its first result.
  template <typename OpT, typename... Args> mlir::Value make(const char *op, Args &&...args) {
    auto created = OpT::create(builder, loc, std::forward<Args>(args)...);
    check(created, op);
    return created->getNumResults() ? created->getResult(0) : mlir::Value();
  }

private:
  uint64_t id_;
  Tracer *previous_;
};

struct TileAccess {
  enum class Kind { Null, Value, IntLiteral, FloatLiteral, BoolLiteral };
  static Kind kind(const Tile &tile) { return static_cast<Kind>(tile.kind_); }
  static int64_t intValue(const Tile &tile) { return tile.int_; }
  static double floatValue(const Tile &tile) { return tile.float_; }
  static uint64_t trace(const Tile &tile) { return tile.trace_; }
  static mlir::Value value(const Tile &tile) {
    return mlir::Value::getFromOpaquePointer(tile.value_);
  }
  static Tile make(uint64_t trace, mlir::Value value) {
    Tile tile;
    tile.kind_ = Tile::Kind::Value;
    tile.trace_ = trace;
    tile.value_ = value.getAsOpaquePointer();
    return tile;
  }
};

/// The MLIR type of a tile of the active trace (checked), or its literal's default type.
mlir::Type typeOf(const Tile &tile, const char *op);

} // namespace detail
} // namespace tessera::dsl

#endif // TESSERA_DSL_LIB_TRACER_H
