// Flash attention forward (FlashAttention-2's tiling, online softmax in f32 with exp2):
// O = softmax(Q K^T * scale) V and the natural-log LSE per row, never forming the N x N matrix.
#ifndef TESSERA_EXAMPLES_ATTENTION_H
#define TESSERA_EXAMPLES_ATTENTION_H

#include <tessera/dsl.h>

#include <cmath>

namespace tessera::examples {

/// Contiguous [batch*heads, n, HEAD_DIM] Q, K, V and O; LSE is [batch*heads, n_q].
/// Meta parameters: BLOCK_M, BLOCK_N, HEAD_DIM (each >= 16, powers of two).
/// Grid: (cdiv(n_q, BLOCK_M), batch*heads).
template <typename T> dsl::Kernel attention_forward() {
  using namespace tessera::dsl;
  return kernel("attention_forward", [](Ptr<T> q, Ptr<T> k, Ptr<T> v, Ptr<T> o, Ptr<f32> lse,
                                        Int n_q, Int n_kv, Float scale, const Config &cfg) {
    const int64_t bm = cfg["BLOCK_M"], bn = cfg["BLOCK_N"], d = cfg["HEAD_DIM"];
    const double log2e = 1.4426950408889634;

    Tile head = program_id(1).to<i64>(); // 64-bit: batch*heads*n*d may pass 2^31
    Tile rows = program_id(0) * bm + arange(0, bm);
    Tile dims = arange(0, d);
    Tile row_ok = expand_dims(rows, 1) < n_q;
    Tile q_ptrs = q + head * n_q * d + expand_dims(rows, 1) * d + expand_dims(dims, 0);
    Tile q_tile = load(q_ptrs, row_ok, 0);
    Tile k_base = k + head * n_kv * d;
    Tile v_base = v + head * n_kv * d;
    Tile qk_scale = scale * log2e;

    Tile acc = zeros({bm, d}, DType::f32);
    Tile row_max = full({bm}, -INFINITY, DType::f32);
    Tile row_sum = zeros({bm}, DType::f32);
    for_range(0, n_kv, bn, {acc, row_max, row_sum}, [&](Tile start) {
      Tile cols = start + arange(0, bn);
      Tile col_ok = expand_dims(cols, 0) < n_kv;
      Tile k_tile = load(k_base + expand_dims(cols, 0) * d + expand_dims(dims, 1), col_ok, 0);
      Tile scores = where(col_ok, dot(q_tile, k_tile) * qk_scale, -INFINITY);
      Tile new_max = maximum(row_max, max(scores, 1));
      // A row that has seen only masked keys keeps max -inf; subtract 0 there, not -inf.
      Tile shift = where(new_max == -INFINITY, 0.0, new_max);
      Tile p = exp2(scores - expand_dims(shift, 1));
      Tile alpha = exp2(row_max - shift);
      row_sum = row_sum * alpha + sum(p, 1);
      Tile v_tile = load(v_base + expand_dims(cols, 1) * d + expand_dims(dims, 0),
                         expand_dims(cols, 1) < n_kv, 0);
      acc = acc * expand_dims(alpha, 1) + dot(cast<T>(p), v_tile);
      row_max = new_max;
    });
    Tile safe_sum = where(row_sum == 0.0, 1.0, row_sum);
    store(o + head * n_q * d + expand_dims(rows, 1) * d + expand_dims(dims, 0),
          cast<T>(acc / expand_dims(safe_sum, 1)), row_ok);
    Tile lse_rows = where(row_sum == 0.0, -INFINITY, (row_max + log2(safe_sum)) / log2e);
    store(lse + head * n_q + rows, lse_rows, rows < n_q);
  });
}

} // namespace tessera::examples

#endif // TESSERA_EXAMPLES_ATTENTION_H
