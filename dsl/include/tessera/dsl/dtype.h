// Element types of tiles and kernel arguments.
#ifndef TESSERA_DSL_DTYPE_H
#define TESSERA_DSL_DTYPE_H

#include <cstdint>
#include <string>

namespace tessera::dsl {

enum class DType { i1, i8, i16, i32, i64, f16, bf16, f32, f64 };

std::string to_string(DType dtype);
bool is_float(DType dtype);
bool is_int(DType dtype); // i1 included
int bit_width(DType dtype);

// Tag types naming element types in signatures and casts: Ptr<f16>, x.to<bf16>().
struct i1 { static constexpr DType dtype = DType::i1; };
struct i8 { static constexpr DType dtype = DType::i8; };
struct i16 { static constexpr DType dtype = DType::i16; };
struct i32 { static constexpr DType dtype = DType::i32; };
struct i64 { static constexpr DType dtype = DType::i64; };
struct f16 { static constexpr DType dtype = DType::f16; };
struct bf16 { static constexpr DType dtype = DType::bf16; };
struct f32 { static constexpr DType dtype = DType::f32; };
struct f64 { static constexpr DType dtype = DType::f64; };

/// ceil(a / b) for grid sizes on the host.
constexpr int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

} // namespace tessera::dsl

#endif // TESSERA_DSL_DTYPE_H
