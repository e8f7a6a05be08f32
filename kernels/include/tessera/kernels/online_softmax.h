// FlashAttention-2's running softmax, as a DSL building block shared by the attention kernels
// (and the example): f32 state, exp2, rows that have seen only masked keys kept exact.
#ifndef TESSERA_KERNELS_ONLINE_SOFTMAX_H
#define TESSERA_KERNELS_ONLINE_SOFTMAX_H

#include <tessera/dsl.h>

#include <cmath>
#include <functional>
#include <optional>

namespace tessera::kernels {

struct OnlineSoftmax {
  static constexpr double log2e = 1.4426950408889634, ln2 = 0.6931471805599453;
  dsl::Tile acc, row_max, row_sum;

  /// What the key loop carries: the three above, and in the deferred order pending_p (and
  /// pending_alpha where the rescale waits too).
  dsl::Carried state() {
    dsl::Carried carried{acc, row_max, row_sum};
    if (!pending_p.is_null())
      carried.push_back(pending_p);
    if (!pending_alpha.is_null())
      carried.push_back(pending_alpha);
    return carried;
  }

  OnlineSoftmax(int64_t rows, int64_t head_dim)
      : acc(dsl::zeros({rows, head_dim}, dsl::DType::f32)),
        row_max(dsl::full({rows}, -INFINITY, dsl::DType::f32)), row_sum(dsl::zeros({rows}, dsl::DType::f32)) {}

  /// Fold one key block: `scores` [rows, block] in log2 units once multiplied by `scale`
  /// (positive: scale*log2(e) for raw q.k, so the multiply fuses into the exponent's FMA), or
  /// already in log2 units without it; masked entries -inf. `load_v` loads the block's V
  /// [block, head_dim] (after the softmax math, so the load issues where the kernel's schedule
  /// wants it).
  void add(const dsl::Tile &scores, const std::optional<dsl::Tile> &scale,
           const std::function<dsl::Tile()> &load_v) {
    using namespace tessera::dsl;
    Tile alpha, p = fold(scores, scale, alpha);
    Tile v = load_v();
    acc = dot(p.to(v.dtype()), v, acc * expand_dims(alpha, 1));
  }

  /// FlashAttention-3's order, for Hopper's asynchronous wgmma: each block's P @ V is issued
  /// one block later, right after that block's Q K^T and before the softmax reads its scores,
  /// so the softmax math runs while the tensor cores multiply. Per key block:
  /// `settle_pending(); s = dot(q, trans(k)); multiply_pending(v of the previous block);
  /// add_deferred(scores)`; after the last block, `settle_pending(); multiply_pending(its v)`.
  /// `pending_p` (in state() once set) starts as zeros [rows, block] of V's dtype
  /// (defer(block, dtype)), so the first product adds 0.
  ///
  /// Where the accumulator is rescaled decides what the softmax waits for. Rescaled at the end
  /// of add_deferred, it needs the product in flight done there; ptxas then waits for that
  /// product before the first exponential (sm_90a SASS: the wait in row 0's max chain), so the
  /// softmax does not overlap its own warpgroup's P @ V. With `rescale_at_settle` the factor
  /// waits too (pending_alpha) and settle_pending(), before the next Q K^T, rescales, as
  /// FlashAttention-3 rescales O before its second GEMM: nothing in the iteration reads the
  /// product, which tile-async-dots then waits for at the next iteration's start.
  dsl::Tile pending_p, pending_alpha;
  void defer(int64_t block, dsl::DType dtype, bool rescale_at_settle = false) {
    pending_p = dsl::zeros({acc.shape()[0], block}, dtype);
    if (rescale_at_settle)
      pending_alpha = dsl::full({acc.shape()[0]}, 1.0, dsl::DType::f32);
  }
  void settle_pending() {
    if (!pending_alpha.is_null())
      acc = acc * dsl::expand_dims(pending_alpha, 1);
  }
  void multiply_pending(const dsl::Tile &v) { acc = dsl::dot(pending_p, v, acc); }
  void add_deferred(const dsl::Tile &scores, const std::optional<dsl::Tile> &scale) {
    dsl::Tile alpha, p = fold(scores, scale, alpha);
    // Unconditional: leaving the rescale out altogether (the most FlashAttention-4's lazy
    // rescaling could save) made the H200's d = 128 forward only 1.5% faster.
    if (pending_alpha.is_null())
      acc = acc * dsl::expand_dims(alpha, 1);
    else
      pending_alpha = alpha;
    pending_p = p.to(pending_p.dtype());
  }

  /// exp2(x * scale - shift), the multiply fused into the subtraction's FMA; exp2(x - shift)
  /// without a scale (x already in log2 units).
  static dsl::Tile exp2_shifted(const dsl::Tile &x, const std::optional<dsl::Tile> &scale, const dsl::Tile &shift) {
    return dsl::exp2(scale ? dsl::fma(x, *scale, -shift) : x - shift);
  }

  /// softmax(scores) V per row, in `dtype`; 0 for rows that saw no key. One division a row,
  /// then multiplies: an IEEE division an element took ~1000 instructions a thread at d = 128
  /// (ptxas's FCHK and slow-path call each), 2-5% of a 128-row program at N = 4096-8192.
  dsl::Tile output(dsl::DType dtype) const {
    return (acc * dsl::expand_dims(1.0 / safe_sum(), 1)).to(dtype);
  }
  /// The natural-log sum of exp of each row's (unscaled-by-log2e) scores; -inf for rows that
  /// saw no key.
  dsl::Tile lse() const {
    // Times ln 2, not divided by log2(e): a division is an IEEE one, with a slow path.
    return dsl::where(row_sum == 0.0, -INFINITY, (row_max + dsl::log2(safe_sum())) * ln2);
  }

private:
  /// The running max and sum updated with `scores` (times `scale`); returns their
  /// exponentials and sets `alpha`, the factor that rescales what was accumulated before.
  dsl::Tile fold(const dsl::Tile &scores, const std::optional<dsl::Tile> &scale, dsl::Tile &alpha) {
    using namespace tessera::dsl;
    // The max of the raw scores, then scaled: one multiply a row, not one a score.
    Tile block_max = max(scores, 1);
    Tile new_max = maximum(row_max, scale ? block_max * *scale : block_max);
    // A row that has seen only masked keys keeps max -inf; subtract 0 there, not -inf.
    Tile shift = where(new_max == -INFINITY, 0.0, new_max), row_shift = expand_dims(shift, 1);
    Tile p = exp2_shifted(scores, scale, row_shift);
    alpha = exp2(row_max - shift);
    row_sum = row_sum * alpha + sum(p, 1);
    row_max = new_max;
    return p;
  }
  dsl::Tile safe_sum() const { return dsl::where(row_sum == 0.0, 1.0, row_sum); }
};

} // namespace tessera::kernels

#endif // TESSERA_KERNELS_ONLINE_SOFTMAX_H
