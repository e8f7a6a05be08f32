#include "AttentionKernels.h"

#include "tessera/kernels/online_softmax.h"

#include <cmath>
#include <optional>

namespace tessera::kernels::detail {
namespace {

using namespace tessera::dsl;

constexpr double kLog2e = OnlineSoftmax::log2e;

/// Query head `batch_head`'s first row of the dQ workspace (see kDqAccumRows), rows of d floats.
Tile dqAccumHead(const Tile &dq_accum, const Tile &batch_head, const Tile &n_q, int64_t d) {
  Tile rows = (n_q + (kDqAccumRows - 1)) / kDqAccumRows * kDqAccumRows;
  return dq_accum + batch_head.to<i64>() * rows.to<i64>() * d;
}

/// The order the dK/dV pass adds dQ tiles into the workspace in: swizzled (conflict-free
/// staging of its accumulator) where rows are whole groups of 32 floats.
BulkOrder dqAccumOrder(int64_t d) { return d % 32 == 0 ? BulkOrder::swizzled : BulkOrder::row_major; }

/// Pointers to rows `rows` x columns `dims` of query head `batch_head`'s dQ sums, in the
/// workspace's order.
Tile dqAccumSums(const Tile &dq_accum, const Tile &batch_head, const Tile &rows, const Tile &dims, const Tile &n_q,
                 int64_t d) {
  Tile columns = expand_dims(dims, 0);
  if (dqAccumOrder(d) == BulkOrder::swizzled)
    columns = columns ^ expand_dims(rows % 4 * 8, 1);
  return dqAccumHead(dq_accum, batch_head, n_q, d) + expand_dims(rows, 1) * d + columns;
}

/// A program of the row-wise passes (delta, dQ's conversion): BLOCK_M rows of one query head,
/// grid (cdiv(n_q, BLOCK_M), batch * heads_q).
struct RowBlock {
  Tile batch_head, batch, head, rows, dims, ok;
};
RowBlock rowBlock(const Config &cfg, const Tile &n_q, const Tile &heads_q, const Tile &head_dim) {
  RowBlock block;
  block.batch_head = program_id(1);
  block.batch = (block.batch_head / heads_q).to<i64>();
  block.head = (block.batch_head % heads_q).to<i64>();
  block.rows = program_id(0) * cfg["BLOCK_M"] + arange(0, cfg["BLOCK_M"]);
  block.dims = arange(0, cfg["HEAD_DIM"]);
  block.ok = expand_dims(block.rows, 1) < n_q && expand_dims(block.dims, 0) < head_dim;
  return block;
}

/// delta[b, h, i] = sum_d dO[b, i, h, d] * O[b, i, h, d] in f32: the row term of dS. With
/// ZERO_DQ_ACCUM, also zeroes those rows of the dQ workspace (stream-ordered before dK/dV).
template <typename T> Kernel preprocess() {
  return kernel("attention_bwd_delta", [](Ptr<T> o, Ptr<T> dout, Ptr<f32> delta, Ptr<f32> dq_accum, Int n_q,
                                          Int heads_q, Int head_dim, Long o_sb, Long o_sn, Long o_sh, Long do_sb,
                                          Long do_sn, Long do_sh, const Config &cfg) {
    const auto [batch_head, batch, head, rows, dims, ok] = rowBlock(cfg, n_q, heads_q, head_dim);
    Tile o_tile = loadRows(o + batch * o_sb + head * o_sh, rows, o_sn, dims, ok);
    Tile do_tile = loadRows(dout + batch * do_sb + head * do_sh, rows, do_sn, dims, ok);
    store(delta + batch_head.to<i64>() * n_q + rows, sum(o_tile.to<f32>() * do_tile.to<f32>(), 1), rows < n_q);
    if (cfg.get("ZERO_DQ_ACCUM", 0)) // every column: a swizzled row spreads the first head_dim
      store(rowPointers(dqAccumHead(dq_accum, batch_head, n_q, cfg["HEAD_DIM"]), rows, cfg["HEAD_DIM"], dims),
            zeros({cfg["BLOCK_M"], cfg["HEAD_DIM"]}, DType::f32), expand_dims(rows, 1) < n_q);
  });
}

/// dQ = scale * the workspace's sums, in q's dtype: the non-deterministic backward's last step.
template <typename T> Kernel dqFromAccum() {
  return kernel("attention_bwd_dq_convert", [](Ptr<f32> dq_accum, Ptr<T> dq, Int n_q, Int heads_q, Int head_dim,
                                               Long dq_sb, Long dq_sn, Long dq_sh, Float scale, const Config &cfg) {
    const auto [batch_head, batch, head, rows, dims, ok] = rowBlock(cfg, n_q, heads_q, head_dim);
    Tile sums = load(dqAccumSums(dq_accum, batch_head, rows, dims, n_q, cfg["HEAD_DIM"]), ok, 0);
    store(rowPointers(dq + batch * dq_sb + head * dq_sh, rows, dq_sn, dims), (sums * scale).to(T::dtype), ok);
  });
}

/// dK and dV of one key block of one KV head: the query blocks of every query head of its
/// group, in order (deterministic), recomputing P^T from the saved LSE (FlashAttention 2).
/// With BLOCK_POINTERS, Q and dO are read through block pointers (on Hopper the TMA's copies).
/// With EVEN_BLOCKS (the host's: the lengths are whole blocks), no key bound in the mask.
/// With ATOMIC_DQ, also each query block's share of dQ (dS K, unscaled), added into the f32
/// workspace dq_accum: one pass over the scores instead of two, but the order of the
/// additions varies from run to run (not bitwise repeatable). With QUERIES_IN_ROWS, the scores
/// are [queries, keys] (accumulateKeysValues).
template <typename T> Kernel keysAndValues() {
  return kernel("attention_bwd_dkdv", [](Ptr<T> q, Ptr<T> k, Ptr<T> v, Ptr<T> dout, Ptr<f32> lse, Ptr<f32> delta,
                                         Ptr<T> dk, Ptr<T> dv, Int n_q, Int n_kv, Int heads_q, Int group,
                                         Int head_dim, Long q_sb, Long q_sn, Long q_sh, Long k_sb, Long k_sn,
                                         Long k_sh, Long v_sb, Long v_sn, Long v_sh, Long do_sb, Long do_sn,
                                         Long do_sh, Long dk_sb, Long dk_sn, Long dk_sh, Long dv_sb, Long dv_sn,
                                         Long dv_sh, Float scale, Int batches, Ptr<f32> dq_accum, Int batch_heads,
                                         const Config &cfg) {
    const int64_t bm = cfg["BLOCK_M"], bn = cfg["BLOCK_N"], d = cfg["HEAD_DIM"];
    const bool causal = cfg.get("CAUSAL", 0) != 0;
    const bool block_pointers = cfg.get("BLOCK_POINTERS", 0) != 0;
    const bool atomic_dq = cfg.get("ATOMIC_DQ", 0) != 0;
    const bool queries_in_rows = cfg.get("QUERIES_IN_ROWS", 0) != 0;
    const bool even = cfg.get("EVEN_BLOCKS", 0) != 0;
    Tile heads_kv = heads_q / group;
    // Causal: the first key blocks see the most query blocks; they start first (gridBlock),
    // chunked by the heads whose Q and dO share L2.
    const GridBlock block = gridBlock(causal, n_q.to<i64>() * head_dim * 4 * group);
    Tile batch_head = block.batch_head, key_block = block.rank;
    Tile batch = (batch_head / heads_kv).to<i64>(), kv_head = (batch_head % heads_kv).to<i64>();
    Tile cols = key_block * bn + arange(0, bn); // this program's keys
    Tile dims = arange(0, d);
    Tile dim_ok = expand_dims(dims, 0) < head_dim;
    Tile key_ok = expand_dims(cols, 1) < n_kv && dim_ok;
    Tile k_tile = loadRows(k + batch * k_sb + kv_head * k_sh, cols, k_sn, dims, key_ok);
    Tile v_tile = loadRows(v + batch * v_sb + kv_head * v_sh, cols, v_sn, dims, key_ok);
    ScoreTransform scores = scaledScores(scale * kLog2e);
    // The pass adding dQ keeps the scale's multiply apart from exp2's subtraction: fused, its
    // FlashAttention-3-shaped loop spilled 128 B, not 60 (H200, d = 128, N = 8192: 6.52 ms, 5.75).
    if (atomic_dq)
      scores.scale.reset();
    // Causal, bottom-right aligned: query i sees key j when j <= i + diagonal, so the first
    // query block that sees this key block starts at (first key - diagonal) rounded down.
    Tile diagonal = n_kv - n_q;
    Tile m_begin = 0;
    if (causal)
      m_begin = maximum(key_block * bn - diagonal, 0) / bm * bm;

    // One loop over (query head of the group, query block), so that Q and dO pipeline through
    // one ring across the heads too; the head and the block are carried (index math the
    // pipeliner can run ahead: no division). With SPLIT_MASKED and the causal mask (not with
    // ATOMIC_DQ: a second loop would stage dQ tiles of its own), two such loops: first the
    // blocks the diagonal crosses, then the rest without a mask (as the forward splits).
    Tile blocks = (maximum(n_q - m_begin, 0) + (bm - 1)) / bm;
    Tile dk_acc = zeros({bn, d}, DType::f32), dv_acc = zeros({bn, d}, DType::f32);
    // Blocks first..first + count of each query head's, the causal mask applied where `masked`.
    auto visit = [&](const Tile &first, const Tile &count, bool masked) {
      Tile begin = m_begin + first * bm, end = begin + count * bm;
      Tile member = 0 * group, start = begin;
      for_range(0, group * count, 1, {dk_acc, dv_acc, member, start}, [&](Tile) {
        Tile head = kv_head * group + member.to<i64>();
        Tile query_head = batch.to<i32>() * heads_q + head.to<i32>();
        Tile rows = start + arange(0, bm);
        Tile row_ok = expand_dims(rows, 1) < n_q && dim_ok;
        // Q's and dO's rows start..start + BLOCK_M; a block pointer reads 0 outside the tensor too.
        Tile q_tile = HeadRows({q, batches, n_q, heads_q, head_dim, q_sb, q_sn, q_sh}, batch, head, block_pointers)
                          .load(start, bm, dims, row_ok);
        Tile do_tile =
            HeadRows({dout, batches, n_q, heads_q, head_dim, do_sb, do_sn, do_sh}, batch, head, block_pointers)
                .load(start, bm, dims, row_ok);
        // Rows past n_q read LSE and delta 0 too (P = 1, dS = 0: they add nothing).
        auto read_rows = [&] {
          return loadRowStatistics(lse, delta, batch_heads, n_q, query_head, start, bm, block_pointers);
        };
        // Scores and probabilities [keys, queries], or with QUERIES_IN_ROWS [queries, keys];
        // rows with no key at all have lse = -inf and P = 0. Query rows past n_q need no mask:
        // their Q, dO, LSE and delta read 0 (P = 1, dS = 0), which adds nothing. Keys past n_kv
        // read 0 too, but P = exp2(-LSE) there may overflow: harmless to dK and dV (their rows
        // are not stored), NaN in dQ's share, a sum over keys; so the pass adding dQ bounds them.
        const int64_t keys_axis = queries_in_rows ? 1 : 0;
        const std::optional<Tile> visible = visiblePairs(
            atomic_dq && !even, causal && masked, expand_dims(arange(0, bm), keys_axis),
            expand_dims(arange(0, bn), 1 - keys_axis), start, key_block * bn, n_kv, diagonal, queries_in_rows);
        // Adding dQ, one loop visits every block: the mask only where the diagonal crosses
        // the block (its first row does not see the last key), or without the causal mask
        // where keys run past n_kv.
        std::optional<Tile> mask_needed;
        if (atomic_dq && visible) {
          Tile last_key = key_block * bn + (bn - 1);
          mask_needed = causal && masked ? start + diagonal < last_key : last_key >= n_kv;
        }
        std::optional<Tile> dq_share; // dS K, issued before dK's product, added after it
        accumulateKeysValues(
            k_tile, v_tile, q_tile, do_tile, read_rows, visible, scores, dk_acc, dv_acc,
            [&](const Tile &ds) {
              if (atomic_dq)
                dq_share = dot(queries_in_rows ? ds : trans(ds), k_tile);
            },
            queries_in_rows, mask_needed);
        if (dq_share) // whole rows of the workspace: rows past n_q add zeros (dS is 0 there)
          bulk_add(dqAccumHead(dq_accum, query_head, n_q, d) + start.to<i64>() * d, *dq_share, dqAccumOrder(d));
        Tile next = start + bm, wrap = next >= end;
        start = where(wrap, begin, next);
        member = where(wrap, member + 1, member);
      });
    };
    if (causal && !atomic_dq && cfg.get("SPLIT_MASKED", 0)) {
      // Query block `start` sees all of this program's keys once start >= last key - diagonal.
      Tile crossing = minimum(maximum((key_block * bn + bn - 1 - diagonal - m_begin + bm - 1) / bm, 0), blocks);
      visit(0, crossing, true);
      visit(crossing, blocks - crossing, false);
    } else {
      visit(0, blocks, true);
    }
    Tile out_ok = expand_dims(cols, 1) < n_kv && dim_ok;
    store(rowPointers(dk + batch * dk_sb + kv_head * dk_sh, cols, dk_sn, dims),
          (dk_acc * scale).to(T::dtype), out_ok);
    store(rowPointers(dv + batch * dv_sb + kv_head * dv_sh, cols, dv_sn, dims),
          dv_acc.to(T::dtype), out_ok);
  });
}

/// dQ of one query block: every key block it sees, P recomputed from the saved LSE. With
/// BLOCK_POINTERS, K and V are read through block pointers (on Hopper the TMA's copies). With
/// EVEN_BLOCKS, no key bound in the mask.
template <typename T> Kernel queries() {
  return kernel("attention_bwd_dq", [](Ptr<T> q, Ptr<T> k, Ptr<T> v, Ptr<T> dout, Ptr<f32> lse, Ptr<f32> delta,
                                       Ptr<T> dq, Int n_q, Int n_kv, Int heads_q, Int group, Int head_dim,
                                       Long q_sb, Long q_sn, Long q_sh, Long k_sb, Long k_sn, Long k_sh, Long v_sb,
                                       Long v_sn, Long v_sh, Long do_sb, Long do_sn, Long do_sh, Long dq_sb,
                                       Long dq_sn, Long dq_sh, Float scale, Int batches, Int heads_kv,
                                       const Config &cfg) {
    const int64_t bm = cfg["BLOCK_M"], bn = cfg["BLOCK_N"], d = cfg["HEAD_DIM"];
    const bool causal = cfg.get("CAUSAL", 0) != 0;
    const bool block_pointers = cfg.get("BLOCK_POINTERS", 0) != 0;
    const bool even = cfg.get("EVEN_BLOCKS", 0) != 0;
    // Causal: the heaviest (last) query blocks start first, as in the forward.
    const GridBlock block = gridBlock(causal, n_kv.to<i64>() * head_dim * 4);
    Tile batch_head = block.batch_head;
    Tile batch = (batch_head / heads_q).to<i64>(), head = (batch_head % heads_q).to<i64>();
    Tile kv_head = head / group;
    Tile query_block = causal ? num_programs(0) - 1 - block.rank : block.rank;
    Tile rows = query_block * bm + arange(0, bm);
    Tile dims = arange(0, d);
    Tile dim_ok = expand_dims(dims, 0) < head_dim;
    Tile row_ok = expand_dims(rows, 1) < n_q && dim_ok;
    Tile q_tile = loadRows(q + batch * q_sb + head * q_sh, rows, q_sn, dims, row_ok);
    Tile do_tile = loadRows(dout + batch * do_sb + head * do_sh, rows, do_sn, dims, row_ok);
    Tile row_lse = load(lse + batch_head.to<i64>() * n_q + rows, rows < n_q, 0) * kLog2e;
    Tile row_delta = load(delta + batch_head.to<i64>() * n_q + rows, rows < n_q, 0);
    // K's and V's rows start..start + BLOCK_N; a block pointer reads 0 outside the tensor too.
    const HeadRows keys({k, batches, n_kv, heads_kv, head_dim, k_sb, k_sn, k_sh}, batch, kv_head, block_pointers);
    const HeadRows values({v, batches, n_kv, heads_kv, head_dim, v_sb, v_sn, v_sh}, batch, kv_head, block_pointers);
    const ScoreTransform scores = scaledScores(scale * kLog2e);
    Tile diagonal = n_kv - n_q;
    Tile kv_end = n_kv;
    if (causal)
      kv_end = maximum(minimum(n_kv, query_block * bm + bm + diagonal), 0);
    // With SPLIT_MASKED, the key blocks that every row of this program sees whole (within n_kv,
    // before the causal diagonal) go through a loop without a mask, the rest through a masked
    // one after it (as in the forward).
    const bool split = cfg.get("SPLIT_MASKED", 0) != 0;
    Tile full_end = 0;
    if (split) {
      full_end = n_kv / bn * bn;
      if (causal)
        full_end = minimum(full_end, maximum((query_block * bm + diagonal + 1) / bn * bn, 0));
    }
    Tile dq_acc = zeros({bm, d}, DType::f32);
    auto visit = [&](const Tile &begin, const Tile &end, bool masked) {
      for_range(begin, end, bn, {dq_acc}, [&](Tile start) {
        Tile cols = start + arange(0, bn);
        Tile col_ok = expand_dims(cols, 1) < n_kv && dim_ok;
        Tile k_tile = keys.load(start, bn, dims, col_ok), v_tile = values.load(start, bn, dims, col_ok);
        std::optional<Tile> visible;
        if (masked)
          visible = visiblePairs(!even, causal, expand_dims(arange(0, bm), 1), expand_dims(arange(0, bn), 0),
                                 query_block * bm, start, n_kv, diagonal);
        accumulateQueries(q_tile, k_tile, v_tile, do_tile, row_lse, row_delta, visible, scores, dq_acc);
      });
    };
    if (split)
      visit(0, full_end, false);
    visit(full_end, kv_end, true);
    store(rowPointers(dq + batch * dq_sb + head * dq_sh, rows, dq_sn, dims),
          (dq_acc * scale).to(T::dtype), row_ok);
  });
}

} // namespace

Kernel attention_backward_delta_kernel(DType dtype) { return dtype == DType::bf16 ? preprocess<bf16>() : preprocess<f16>(); }
Kernel attention_backward_dkdv_kernel(DType dtype) {
  return dtype == DType::bf16 ? keysAndValues<bf16>() : keysAndValues<f16>();
}
Kernel attention_backward_dq_kernel(DType dtype) { return dtype == DType::bf16 ? queries<bf16>() : queries<f16>(); }
Kernel attention_backward_dq_convert_kernel(DType dtype) {
  return dtype == DType::bf16 ? dqFromAccum<bf16>() : dqFromAccum<f16>();
}

} // namespace tessera::kernels::detail
