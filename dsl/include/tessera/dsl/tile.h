// Tile: a handle to a value of the kernel being traced (a scalar, a tile, a pointer or a
// block pointer), or a C++ literal that takes its type from the tile it meets.
#ifndef TESSERA_DSL_TILE_H
#define TESSERA_DSL_TILE_H

#include "tessera/dsl/dtype.h"

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace tessera::dsl {

namespace detail {
struct TileAccess;
}

using Shape = std::vector<int64_t>;

class Tile {
public:
  /// A null tile: "absent" for optional arguments (mask, other, acc).
  Tile() = default;

  /// A C++ number used in a kernel: it takes the dtype of the tile it is combined with
  /// (2 * x keeps x's dtype); alone it is i32 (integers), f32 (floating point) or i1 (bool).
  template <typename T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  Tile(T value) { // NOLINT(google-explicit-constructor): literals mix with tiles.
    if constexpr (std::is_same_v<T, bool>) {
      kind_ = Kind::BoolLiteral;
      int_ = value;
    } else if constexpr (std::is_integral_v<T>) {
      kind_ = Kind::IntLiteral;
      int_ = static_cast<int64_t>(value);
    } else {
      kind_ = Kind::FloatLiteral;
      float_ = static_cast<double>(value);
    }
  }

  bool is_null() const { return kind_ == Kind::Null; }
  bool is_literal() const { return kind_ != Kind::Null && kind_ != Kind::Value; }

  /// Shape ({} for scalars and pointers), element dtype (the pointee for pointers).
  Shape shape() const;
  int rank() const { return static_cast<int>(shape().size()); }
  DType dtype() const;
  bool is_pointer() const;       // pointer or tile of pointers
  bool is_block_pointer() const; // made by make_block_ptr
  /// e.g. "f32[128x64]", "ptr<f16>[128]", "i32".
  std::string str() const;

  /// Element type conversion (float<->float, int<->int, int<->float, to/from i1).
  Tile to(DType dtype) const;
  template <typename T> Tile to() const { return to(T::dtype); }
  /// Reinterpret the bits as another dtype of the same width.
  Tile bitcast(DType dtype) const;

private:
  friend struct detail::TileAccess;
  enum class Kind { Null, Value, IntLiteral, FloatLiteral, BoolLiteral };
  Kind kind_ = Kind::Null;
  uint64_t trace_ = 0;     // the trace this value belongs to
  void *value_ = nullptr;  // opaque mlir::Value
  int64_t int_ = 0;
  double float_ = 0;
};

/// Kernel argument types. Each traces as the named scalar or pointer type; inside the body
/// they are tiles like any other.
template <typename T> class Ptr : public Tile {
public:
  explicit Ptr(Tile value) : Tile(value) {}
  static constexpr DType element = T::dtype;
  static constexpr bool pointer = true;
};
template <typename T> class Scalar : public Tile {
public:
  explicit Scalar(Tile value) : Tile(value) {}
  static constexpr DType element = T::dtype;
  static constexpr bool pointer = false;
};
using Int = Scalar<i32>;
using Long = Scalar<i64>;
using Float = Scalar<f32>;

// Elementwise arithmetic with broadcasting and dtype promotion; `ptr + offset` is pointer
// arithmetic in elements. Integer / and % follow C++ (truncating, signed).
Tile operator+(const Tile &a, const Tile &b);
Tile operator-(const Tile &a, const Tile &b);
Tile operator*(const Tile &a, const Tile &b);
Tile operator/(const Tile &a, const Tile &b);
Tile operator%(const Tile &a, const Tile &b);
Tile operator&(const Tile &a, const Tile &b);
Tile operator|(const Tile &a, const Tile &b);
Tile operator^(const Tile &a, const Tile &b);
Tile operator<<(const Tile &a, const Tile &b);
Tile operator>>(const Tile &a, const Tile &b);
Tile operator&&(const Tile &a, const Tile &b);
Tile operator||(const Tile &a, const Tile &b);
Tile operator-(const Tile &a);
Tile operator~(const Tile &a);
Tile operator!(const Tile &a);
// Comparisons give i1 tiles.
Tile operator<(const Tile &a, const Tile &b);
Tile operator<=(const Tile &a, const Tile &b);
Tile operator>(const Tile &a, const Tile &b);
Tile operator>=(const Tile &a, const Tile &b);
Tile operator==(const Tile &a, const Tile &b);
Tile operator!=(const Tile &a, const Tile &b);

inline Tile &operator+=(Tile &a, const Tile &b) { return a = a + b; }
inline Tile &operator-=(Tile &a, const Tile &b) { return a = a - b; }
inline Tile &operator*=(Tile &a, const Tile &b) { return a = a * b; }
inline Tile &operator/=(Tile &a, const Tile &b) { return a = a / b; }

} // namespace tessera::dsl

#endif // TESSERA_DSL_TILE_H
