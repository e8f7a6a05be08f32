// The operations of a tessera kernel. Each builds IR in the kernel being traced; misuse
// throws tessera::Error naming the op, the shapes and dtypes, and the kernel.
#ifndef TESSERA_DSL_OPS_H
#define TESSERA_DSL_OPS_H

#include "tessera/dsl/tile.h"

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

namespace tessera::dsl {

// --- Grid -----------------------------------------------------------------------------------
Tile program_id(int axis);   // i32, axis 0..2
Tile num_programs(int axis); // i32

// --- Making tiles ---------------------------------------------------------------------------
/// [start, end) as i32[end - start]; the size must be a power of two.
Tile arange(int64_t start, int64_t end);
/// A tile of `shape` filled with `value` (a literal or a scalar tile).
Tile full(const Shape &shape, const Tile &value, DType dtype);
Tile full(const Shape &shape, const Tile &value);
Tile zeros(const Shape &shape, DType dtype);
/// A scalar tile repeated to `shape`.
Tile splat(const Tile &scalar, const Shape &shape);

// --- Shapes ---------------------------------------------------------------------------------
/// Numpy broadcasting: size-1 dimensions repeat, missing leading dimensions are added.
Tile broadcast_to(const Tile &x, const Shape &shape);
Tile expand_dims(const Tile &x, int axis);
Tile reshape(const Tile &x, const Shape &shape);
/// Transpose of a 2-D tile.
Tile trans(const Tile &x);
/// Result dimension i is x's dimension order[i].
Tile permute(const Tile &x, const std::vector<int> &order);

/// x.to<T>() as a free function, which templates can call without `x.template to<T>()`.
template <typename T> Tile cast(const Tile &x) { return x.to(T::dtype); }

// --- Elementwise ----------------------------------------------------------------------------
Tile where(const Tile &condition, const Tile &a, const Tile &b);
Tile exp(const Tile &x);
Tile exp2(const Tile &x);
Tile log(const Tile &x);
Tile log2(const Tile &x);
Tile sqrt(const Tile &x);
Tile rsqrt(const Tile &x);
Tile abs(const Tile &x);
Tile tanh(const Tile &x);
Tile sin(const Tile &x);
Tile cos(const Tile &x);
Tile floor(const Tile &x);
Tile ceil(const Tile &x);
Tile erf(const Tile &x);
Tile fma(const Tile &a, const Tile &b, const Tile &c);
/// Elementwise maximum/minimum (NaN-propagating for floats).
Tile maximum(const Tile &a, const Tile &b);
Tile minimum(const Tile &a, const Tile &b);
/// ceil(a / b) for integer tiles.
Tile cdiv(const Tile &a, const Tile &b);

// --- Reductions along one axis (negative axes count from the end) ----------------------------
Tile sum(const Tile &x, int axis, bool keep_dims = false);
Tile max(const Tile &x, int axis, bool keep_dims = false);
Tile min(const Tile &x, int axis, bool keep_dims = false);
Tile argmax(const Tile &x, int axis, bool keep_dims = false); // i32, first index on ties
Tile argmin(const Tile &x, int axis, bool keep_dims = false);

// --- Matrix product -------------------------------------------------------------------------
enum class Precision { ieee, tf32, tf32x3 };
/// a[M,K] @ b[K,N] + acc[M,N]. f16/bf16 (and f32) inputs accumulate in f32, i8 in i32;
/// without acc the accumulator starts at zero. tf32 precisions apply to f32 inputs only.
Tile dot(const Tile &a, const Tile &b, const Tile &acc = {},
         Precision precision = Precision::ieee);

// --- Memory ---------------------------------------------------------------------------------
/// Loads through a tile of pointers; lanes where `mask` is false read `other` (which needs a
/// mask). Through a block pointer: loads the block, out-of-bounds elements read zero.
Tile load(const Tile &ptr, const Tile &mask = {}, const Tile &other = {});
/// Stores `value` (broadcast to the pointers' shape) where `mask` allows. Through a block
/// pointer: out-of-bounds elements are not written.
void store(const Tile &ptr, const Tile &value, const Tile &mask = {});

enum class MemOrder { relaxed, acquire, release, acq_rel };
enum class MemScope { cta, gpu, sys };
/// Atomic read-modify-writes; each returns the values memory held before.
Tile atomic_add(const Tile &ptr, const Tile &value, const Tile &mask = {},
                MemOrder order = MemOrder::acq_rel, MemScope scope = MemScope::gpu);
Tile atomic_max(const Tile &ptr, const Tile &value, const Tile &mask = {},
                MemOrder order = MemOrder::acq_rel, MemScope scope = MemScope::gpu);
Tile atomic_min(const Tile &ptr, const Tile &value, const Tile &mask = {},
                MemOrder order = MemOrder::acq_rel, MemScope scope = MemScope::gpu);
Tile atomic_and(const Tile &ptr, const Tile &value, const Tile &mask = {},
                MemOrder order = MemOrder::acq_rel, MemScope scope = MemScope::gpu);
Tile atomic_or(const Tile &ptr, const Tile &value, const Tile &mask = {},
               MemOrder order = MemOrder::acq_rel, MemScope scope = MemScope::gpu);
Tile atomic_xor(const Tile &ptr, const Tile &value, const Tile &mask = {},
                MemOrder order = MemOrder::acq_rel, MemScope scope = MemScope::gpu);
Tile atomic_xchg(const Tile &ptr, const Tile &value, const Tile &mask = {},
                 MemOrder order = MemOrder::acq_rel, MemScope scope = MemScope::gpu);

/// Where bulk_add puts element (i, j) of an [M, N] tile: dst[i * N + j] (row_major), or
/// dst[i * N + (j ^ 8 * (i % 4))] (swizzled, N a multiple of 32): each row's groups of 8 floats
/// permuted so that a tensor-core accumulator is staged without shared-memory bank conflicts.
enum class BulkOrder { row_major, swizzled };
/// Adds the f32 tile `values` ([M, N]) to the M * N consecutive floats at `dst` (a pointer,
/// 16-byte aligned) in `order`: a relaxed reduction like atomic_add's, as one bulk add of the
/// copy engine on Hopper. For sums many programs add into (split-K, dQ of attention).
void bulk_add(const Tile &dst, const Tile &values, BulkOrder order = BulkOrder::row_major);

/// A pointer to the `block_shape` block at `offsets` of the tensor at `base` with `shape` and
/// `strides` (in elements). `order` lists dimensions fastest-varying first (default:
/// row-major, {rank-1, ..., 0}).
Tile make_block_ptr(const Tile &base, const std::vector<Tile> &shape,
                    const std::vector<Tile> &strides, const std::vector<Tile> &offsets,
                    const Shape &block_shape, const std::vector<int> &order = {});
/// The block pointer moved by `offsets` elements per dimension.
Tile advance(const Tile &block_ptr, const std::vector<Tile> &offsets);

// --- Debugging ------------------------------------------------------------------------------
void print(const std::string &prefix, const std::vector<Tile> &values);
template <typename... Ts> void print(const std::string &prefix, const Ts &...values) {
  print(prefix, std::vector<Tile>{Tile(values)...});
}

// --- Runtime control flow -------------------------------------------------------------------
using Carried = std::vector<std::reference_wrapper<Tile>>;

/// for (i = lo; i < hi; i += step) body(i), as one loop in the kernel. The variables listed
/// in `carried` may be reassigned by the body; they hold the loop's final values afterwards.
/// A value made inside the body and used after the loop must be listed.
void for_range(const Tile &lo, const Tile &hi, const Tile &step, Carried carried,
               const std::function<void(Tile)> &body);
void for_range(const Tile &lo, const Tile &hi, const Tile &step,
               const std::function<void(Tile)> &body);

/// if (condition) then_body() else else_body(), on a scalar i1 decided at run time. The
/// variables in `carried` may be reassigned in either branch and hold the taken branch's
/// values afterwards.
void if_(const Tile &condition, Carried carried, const std::function<void()> &then_body,
         const std::function<void()> &else_body = {});
void if_(const Tile &condition, const std::function<void()> &then_body,
         const std::function<void()> &else_body = {});

} // namespace tessera::dsl

#endif // TESSERA_DSL_OPS_H
