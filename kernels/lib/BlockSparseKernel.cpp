#include "AttentionKernels.h"

#include "tessera/kernels/online_softmax.h"

#include <cmath>

namespace tessera::kernels::detail {
namespace {

using namespace tessera::dsl;

/// One program per (BLOCK_M query rows, batch * head): the full key blocks its mask row lists
/// (no elementwise mask), then the partial ones (bounds and mask_mod), each mask block of
/// MASK_BLOCK_N keys in steps of BLOCK_N; score_mod on every score.
template <typename T> Kernel blockSparseForward(const Modifiers &mods) {
  return kernel("block_sparse_attention_fwd", [mods](
      Ptr<T> q, Ptr<T> k, Ptr<T> v, Ptr<T> o, Ptr<f32> lse, Ptr<i32> blocks, Ptr<i32> mask_aux, Ptr<f32> score_aux,
      Int n_q, Int n_kv, Int heads_q, Int group, Int head_dim, Int mask_heads, Int mask_q_blocks, Int mask_kv_blocks,
      Long q_sb, Long q_sn, Long q_sh, Long k_sb, Long k_sn, Long k_sh, Long v_sb, Long v_sn, Long v_sh, Long o_sb,
      Long o_sn, Long o_sh, Float scale, const Config &cfg) {
    const int64_t bm = cfg["BLOCK_M"], bn = cfg["BLOCK_N"], d = cfg["HEAD_DIM"];
    const int64_t mask_bm = cfg["MASK_BLOCK_M"], mask_bn = cfg["MASK_BLOCK_N"];

    Tile batch_head = program_id(1);
    Tile batch = batch_head / heads_q, head = batch_head % heads_q;
    Tile kv_head = (head / group).to<i64>();
    Tile rows = program_id(0) * bm + arange(0, bm);
    Tile dims = arange(0, d);
    Tile dim_ok = expand_dims(dims, 0) < head_dim;
    Tile row_ok = expand_dims(rows, 1) < n_q;
    Tile q_tile = load(q + batch.to<i64>() * q_sb + head.to<i64>() * q_sh + expand_dims(rows, 1) * q_sn +
                           expand_dims(dims, 0),
                       row_ok && dim_ok, 0);
    Tile k_base = k + batch.to<i64>() * k_sb + kv_head * k_sh;
    Tile v_base = v + batch.to<i64>() * v_sb + kv_head * v_sh;
    Tile kv_ok = broadcast_to(dim_ok, {bn, d});

    // This program's row of the mask: [full count, partial count, full blocks, partial blocks].
    Tile mask_row = (batch * mask_heads + head % mask_heads) * mask_q_blocks + program_id(0) * bm / mask_bm;
    Tile record = blocks + mask_row.to<i64>() * (2 + 2 * mask_kv_blocks);
    OnlineSoftmax softmax(bm, d);
    auto visit = [&](Tile first, Tile count, bool partial) {
      for_range(0, count, 1, {softmax.acc, softmax.row_max, softmax.row_sum}, [&](Tile i) {
        Tile mask_block = load(record + first + i);
        Tile begin = mask_block * mask_bn;
        for_range(begin, begin + mask_bn, bn, {softmax.acc, softmax.row_max, softmax.row_sum}, [&](Tile start) {
          Tile cols = start + arange(0, bn);
          Tile ok = partial ? kv_ok && expand_dims(cols, 1) < n_kv : kv_ok;
          Tile k_tile = load(k_base + expand_dims(cols, 1) * k_sn + expand_dims(dims, 0), ok, 0);
          // The modifiers see positions clamped into the sequences (they may read tensors at
          // them); the block's rows and keys past the ends are dropped by the bounds below.
          Tile q_idx = expand_dims(minimum(rows, n_q - 1), 1), kv_idx = expand_dims(minimum(cols, n_kv - 1), 0);
          Tile scores = dot(q_tile, trans(k_tile));
          if (mods.score_mod)
            scores = mods.score_mod(scores * scale, batch, head, q_idx, kv_idx, score_aux) * OnlineSoftmax::log2e;
          else
            scores = scores * (scale * OnlineSoftmax::log2e);
          if (partial)
            scores = where(expand_dims(cols, 0) < n_kv &&
                               (mods.mask_mod ? mods.mask_mod(batch, head, q_idx, kv_idx, mask_aux) : kv_idx >= 0),
                           scores, -INFINITY);
          softmax.add(scores, [&] { return load(v_base + expand_dims(cols, 1) * v_sn + expand_dims(dims, 0), ok, 0); });
        });
      });
    };
    visit(2, load(record), false);
    visit(2 + mask_kv_blocks, load(record + 1), true);
    store(o + batch.to<i64>() * o_sb + head.to<i64>() * o_sh + expand_dims(rows, 1) * o_sn + expand_dims(dims, 0),
          softmax.output(T::dtype), row_ok && dim_ok);
    store(lse + batch_head.to<i64>() * n_q + rows, softmax.lse(), rows < n_q);
  });
}

} // namespace

Kernel block_sparse_forward_kernel(DType dtype, const Modifiers &modifiers) {
  return dtype == DType::bf16 ? blockSparseForward<bf16>(modifiers) : blockSparseForward<f16>(modifiers);
}

} // namespace tessera::kernels::detail
