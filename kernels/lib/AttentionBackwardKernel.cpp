#include "AttentionKernels.h"

#include "tessera/kernels/online_softmax.h"

#include <cmath>

namespace tessera::kernels::detail {
namespace {

using namespace tessera::dsl;

constexpr double kLog2e = OnlineSoftmax::log2e;

/// delta[b, h, i] = sum_d dO[b, i, h, d] * O[b, i, h, d] in f32: the row term of dS.
template <typename T> Kernel preprocess() {
  return kernel("attention_bwd_delta", [](Ptr<T> o, Ptr<T> dout, Ptr<f32> delta, Int n_q, Int heads_q, Int head_dim,
                                          Long o_sb, Long o_sn, Long o_sh, Long do_sb, Long do_sn, Long do_sh,
                                          const Config &cfg) {
    const int64_t bm = cfg["BLOCK_M"], d = cfg["HEAD_DIM"];
    Tile batch_head = program_id(1);
    Tile batch = (batch_head / heads_q).to<i64>(), head = (batch_head % heads_q).to<i64>();
    Tile rows = program_id(0) * bm + arange(0, bm);
    Tile dims = arange(0, d);
    Tile ok = expand_dims(rows, 1) < n_q && expand_dims(dims, 0) < head_dim;
    Tile o_tile = loadRows(o + batch * o_sb + head * o_sh, rows, o_sn, dims, ok);
    Tile do_tile = loadRows(dout + batch * do_sb + head * do_sh, rows, do_sn, dims, ok);
    store(delta + batch_head.to<i64>() * n_q + rows, sum(o_tile.to<f32>() * do_tile.to<f32>(), 1), rows < n_q);
  });
}

/// dK and dV of one key block of one KV head: the query blocks of every query head of its
/// group, in order (deterministic), recomputing P^T from the saved LSE (FlashAttention 2).
/// With BLOCK_POINTERS, Q and dO are read through block pointers (on Hopper the TMA's copies).
template <typename T> Kernel keysAndValues() {
  return kernel("attention_bwd_dkdv", [](Ptr<T> q, Ptr<T> k, Ptr<T> v, Ptr<T> dout, Ptr<f32> lse, Ptr<f32> delta,
                                         Ptr<T> dk, Ptr<T> dv, Int n_q, Int n_kv, Int heads_q, Int group,
                                         Int head_dim, Long q_sb, Long q_sn, Long q_sh, Long k_sb, Long k_sn,
                                         Long k_sh, Long v_sb, Long v_sn, Long v_sh, Long do_sb, Long do_sn,
                                         Long do_sh, Long dk_sb, Long dk_sn, Long dk_sh, Long dv_sb, Long dv_sn,
                                         Long dv_sh, Float scale, Int batches, const Config &cfg) {
    const int64_t bm = cfg["BLOCK_M"], bn = cfg["BLOCK_N"], d = cfg["HEAD_DIM"];
    const bool causal = cfg.get("CAUSAL", 0) != 0;
    const bool block_pointers = cfg.get("BLOCK_POINTERS", 0) != 0;
    Tile heads_kv = heads_q / group;
    Tile batch_head = program_id(1);
    Tile batch = (batch_head / heads_kv).to<i64>(), kv_head = (batch_head % heads_kv).to<i64>();
    Tile cols = program_id(0) * bn + arange(0, bn); // this program's keys
    Tile dims = arange(0, d);
    Tile dim_ok = expand_dims(dims, 0) < head_dim;
    Tile key_ok = expand_dims(cols, 1) < n_kv && dim_ok;
    Tile k_tile = loadRows(k + batch * k_sb + kv_head * k_sh, cols, k_sn, dims, key_ok);
    Tile v_tile = loadRows(v + batch * v_sb + kv_head * v_sh, cols, v_sn, dims, key_ok);
    const ScoreTransform scores = scaledScores(scale * kLog2e);
    // Causal, bottom-right aligned: query i sees key j when j <= i + diagonal, so the first
    // query block that sees this key block starts at (first key - diagonal) rounded down.
    Tile diagonal = n_kv - n_q;
    Tile m_begin = 0;
    if (causal)
      m_begin = maximum(program_id(0) * bn - diagonal, 0) / bm * bm;

    // One loop over (query head of the group, query block), so that Q and dO pipeline through
    // one ring across the heads too; the head and the block are carried (index math the
    // pipeliner can run ahead: no division).
    Tile blocks = (maximum(n_q - m_begin, 0) + (bm - 1)) / bm;
    Tile dk_acc = zeros({bn, d}, DType::f32), dv_acc = zeros({bn, d}, DType::f32);
    Tile member = 0 * group, start = m_begin;
    for_range(0, group * blocks, 1, {dk_acc, dv_acc, member, start}, [&](Tile) {
      Tile head = kv_head * group + member.to<i64>();
      Tile row_base = (batch.to<i32>() * heads_q + head.to<i32>()) * n_q;
      Tile rows = start + arange(0, bm);
      Tile row_ok = expand_dims(rows, 1) < n_q && dim_ok;
      // Q's or dO's rows start..start + BLOCK_M; a block pointer reads 0 outside the tensor too.
      auto load_rows = [&](const Tile &tensor, Long sb, Long sn, Long sh) {
        if (block_pointers)
          return loadBlockRows({tensor, batches, n_q, heads_q, head_dim, sb, sn, sh}, batch, head, start, bm, d);
        return loadRows(tensor + batch * sb + head * sh, rows, sn, dims, row_ok);
      };
      Tile q_tile = load_rows(q, q_sb, q_sn, q_sh);
      Tile do_tile = load_rows(dout, do_sb, do_sn, do_sh);
      // lse is +inf-safe: rows past n_q read 0 and are masked below.
      Tile row_lse = load(lse + row_base + rows, rows < n_q, 0) * kLog2e;
      Tile row_delta = load(delta + row_base + rows, rows < n_q, 0);
      Tile visible = expand_dims(cols, 1) < n_kv && expand_dims(rows, 0) < n_q;
      if (causal)
        visible = visible && expand_dims(cols, 1) <= expand_dims(rows, 0) + diagonal;
      // Scores and probabilities transposed, [keys, queries]; rows with no key at all have
      // lse = -inf and P = 0.
      accumulateKeysValues(k_tile, v_tile, q_tile, do_tile, row_lse, row_delta, visible, scores, dk_acc, dv_acc);
      Tile next = start + bm, wrap = next >= n_q;
      start = where(wrap, m_begin, next);
      member = where(wrap, member + 1, member);
    });
    Tile out_ok = expand_dims(cols, 1) < n_kv && dim_ok;
    store(rowPointers(dk + batch * dk_sb + kv_head * dk_sh, cols, dk_sn, dims),
          (dk_acc * scale).to(T::dtype), out_ok);
    store(rowPointers(dv + batch * dv_sb + kv_head * dv_sh, cols, dv_sn, dims),
          dv_acc.to(T::dtype), out_ok);
  });
}

/// dQ of one query block: every key block it sees, P recomputed from the saved LSE. With
/// BLOCK_POINTERS, K and V are read through block pointers (on Hopper the TMA's copies).
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
    Tile batch_head = program_id(1);
    Tile batch = (batch_head / heads_q).to<i64>(), head = (batch_head % heads_q).to<i64>();
    Tile kv_head = head / group;
    Tile rows = program_id(0) * bm + arange(0, bm);
    Tile dims = arange(0, d);
    Tile dim_ok = expand_dims(dims, 0) < head_dim;
    Tile row_ok = expand_dims(rows, 1) < n_q && dim_ok;
    Tile q_tile = loadRows(q + batch * q_sb + head * q_sh, rows, q_sn, dims, row_ok);
    Tile do_tile = loadRows(dout + batch * do_sb + head * do_sh, rows, do_sn, dims, row_ok);
    Tile row_lse = load(lse + batch_head.to<i64>() * n_q + rows, rows < n_q, 0) * kLog2e;
    Tile row_delta = load(delta + batch_head.to<i64>() * n_q + rows, rows < n_q, 0);
    Tile k_base = k + batch * k_sb + kv_head * k_sh, v_base = v + batch * v_sb + kv_head * v_sh;
    const ScoreTransform scores = scaledScores(scale * kLog2e);
    Tile diagonal = n_kv - n_q;
    Tile kv_end = n_kv;
    if (causal)
      kv_end = maximum(minimum(n_kv, program_id(0) * bm + bm + diagonal), 0);

    // K's or V's rows start..start + BLOCK_N; a block pointer reads 0 outside the tensor too.
    auto load_rows = [&](const Tile &base, const Tile &tensor, Long sb, Long sn, Long sh, const Tile &start) {
      if (block_pointers)
        return loadBlockRows({tensor, batches, n_kv, heads_kv, head_dim, sb, sn, sh}, batch, kv_head, start, bn, d);
      Tile cols = start + arange(0, bn);
      return loadRows(base, cols, sn, dims, expand_dims(cols, 1) < n_kv && dim_ok);
    };

    Tile dq_acc = zeros({bm, d}, DType::f32);
    for_range(0, kv_end, bn, {dq_acc}, [&](Tile start) {
      Tile cols = start + arange(0, bn);
      Tile k_tile = load_rows(k_base, k, k_sb, k_sn, k_sh, start);
      Tile v_tile = load_rows(v_base, v, v_sb, v_sn, v_sh, start);
      Tile visible = expand_dims(cols, 0) < n_kv && expand_dims(rows, 1) < n_q;
      if (causal)
        visible = visible && expand_dims(cols, 0) <= expand_dims(rows, 1) + diagonal;
      accumulateQueries(q_tile, k_tile, v_tile, do_tile, row_lse, row_delta, visible, scores, dq_acc);
    });
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

} // namespace tessera::kernels::detail
