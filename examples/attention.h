// Flash attention forward (FlashAttention-2's tiling, online softmax in f32 with exp2):
// O = softmax(Q K^T * scale) V and the natural-log LSE per row, never forming the N x N matrix.
#ifndef TESSERA_EXAMPLES_ATTENTION_H
#define TESSERA_EXAMPLES_ATTENTION_H

#include <tessera/dsl.h>
#include <tessera/kernels/online_softmax.h>

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

    Tile head = program_id(1).to<i64>(); // 64-bit: batch*heads*n*d may pass 2^31
    Tile rows = program_id(0) * bm + arange(0, bm);
    Tile dims = arange(0, d);
    Tile row_ok = expand_dims(rows, 1) < n_q;
    Tile q_ptrs = q + head * n_q * d + expand_dims(rows, 1) * d + expand_dims(dims, 0);
    Tile q_tile = load(q_ptrs, row_ok, 0);
    Tile k_base = k + head * n_kv * d;
    Tile v_base = v + head * n_kv * d;
    Tile qk_scale = scale * kernels::OnlineSoftmax::log2e;

    kernels::OnlineSoftmax softmax(bm, d);
    for_range(0, n_kv, bn, softmax.state(), [&](Tile start) {
      Tile cols = start + arange(0, bn);
      Tile col_ok = expand_dims(cols, 0) < n_kv;
      Tile k_tile = load(k_base + expand_dims(cols, 1) * d + expand_dims(dims, 0), expand_dims(cols, 1) < n_kv, 0);
      softmax.add(where(col_ok, dot(q_tile, trans(k_tile)), -INFINITY), qk_scale, [&] {
        return load(v_base + expand_dims(cols, 1) * d + expand_dims(dims, 0), expand_dims(cols, 1) < n_kv, 0);
      });
    });
    store(o + head * n_q * d + expand_dims(rows, 1) * d + expand_dims(dims, 0), softmax.output(T::dtype), row_ok);
    store(lse + head * n_q + rows, softmax.lse(), rows < n_q);
  });
}

} // namespace tessera::examples

#endif // TESSERA_EXAMPLES_ATTENTION_H
