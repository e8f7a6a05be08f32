#include "AttentionKernels.h"

#include "tessera/kernels/online_softmax.h"

#include <cmath>

namespace tessera::kernels::detail {
namespace {

using namespace tessera::dsl;

/// BLOCK_M query rows of one (batch, head): a QueryTile (a program's, on the grid (query
/// blocks, batch * heads_q), or a persistent program's tile) and its rows and dims.
struct QueryBlock : QueryTile {
  Tile rows, dims, dim_ok;
  QueryBlock(const QueryTile &tile, int64_t bm, int64_t d, const Tile &head_dim)
      : QueryTile(tile), rows(index * bm + arange(0, bm)), dims(arange(0, d)),
        dim_ok(expand_dims(dims, 0) < head_dim) {}
};

/// The visibility of [rows x cols] (either orientation) in a listed block: in bounds, and
/// through mask_mod when the block is partial. The modifiers see positions clamped into the
/// sequences (they may read tensors at them); the bounds drop what lies past the ends. None
/// (every pair) for a full block without score_mod: its keys lie within n_kv (BlockMask lists
/// a ragged last key block as partial), and query rows past n_q add nothing to dK, dV (their
/// Q, dO, LSE and delta read 0: P = 1, dS = 0) and give dQ rows that are not stored. Without
/// `bound_rows`, query rows past n_q stay visible: the forward, where a row's softmax is its
/// own and such rows are not stored, saves a compare a score.
std::optional<Tile> visibleIn(const Modifiers &mods, bool partial, const Tile &batch, const Tile &head,
                              const Tile &q_idx, const Tile &kv_idx, const Tile &n_q, const Tile &n_kv,
                              const Tile &aux, bool bound_rows = true) {
  if (!partial && !mods.score_mod)
    return std::nullopt;
  Tile ok = bound_rows ? (q_idx < n_q && kv_idx < n_kv) : kv_idx < n_kv;
  if (partial && mods.mask_mod)
    ok = ok && mods.mask_mod(batch, head, minimum(q_idx, n_q - 1), minimum(kv_idx, n_kv - 1), aux);
  return ok;
}

/// The scores' way to the softmax: q.k * scale through score_mod (its derivative for the
/// backward) at positions q_idx, kv_idx (broadcasting against each other, clamped into the
/// sequences, as for mask_mod), in log2 units.
ScoreTransform modifiedScores(const Modifiers &mods, const Tile &scale, const Tile &batch, const Tile &head,
                              const Tile &q_idx, const Tile &kv_idx, const Tile &aux) {
  if (!mods.score_mod)
    return scaledScores(scale * OnlineSoftmax::log2e);
  return {[=](const Tile &s) { return mods.score_mod(s * scale, batch, head, q_idx, kv_idx, aux) * OnlineSoftmax::log2e; },
          [=](const Tile &s) { return mods.score_mod_grad(s * scale, batch, head, q_idx, kv_idx, aux); },
          std::nullopt};
}

/// One program per (BLOCK_M query rows, batch * head): the full key blocks its mask row lists
/// (no elementwise mask), then the partial ones (bounds and mask_mod), each mask block of
/// MASK_BLOCK_N keys in steps of BLOCK_N; score_mod on every score. With BLOCK_POINTERS, K and
/// V are read through block pointers (on Hopper the TMA's copies, addressed by the block
/// indices the producer warps read too).
template <typename T> Kernel blockSparseForward(const Modifiers &mods) {
  return kernel("block_sparse_attention_fwd", [mods](
      Ptr<T> q, Ptr<T> k, Ptr<T> v, Ptr<T> o, Ptr<f32> lse, Ptr<i32> blocks, Ptr<i32> mask_aux, Ptr<f32> score_aux,
      Int n_q, Int n_kv, Int heads_q, Int group, Int head_dim, Int mask_heads, Int mask_q_blocks, Int mask_kv_blocks,
      Long q_sb, Long q_sn, Long q_sh, Long k_sb, Long k_sn, Long k_sh, Long v_sb, Long v_sn, Long v_sh, Long o_sb,
      Long o_sn, Long o_sh, Float scale, Int batches, Int heads_kv, const Config &cfg) {
    const int64_t bm = cfg["BLOCK_M"], bn = cfg["BLOCK_N"], d = cfg["HEAD_DIM"];
    const int64_t mask_bm = cfg["MASK_BLOCK_M"], mask_bn = cfg["MASK_BLOCK_N"];
    const bool block_pointers = cfg.get("BLOCK_POINTERS", 0) != 0;

    // One query block: a program's whole work, or with PERSISTENT one of its tiles.
    auto attend = [&](const QueryBlock &block) {
      const Tile &batch = block.batch, &head = block.head, &rows = block.rows, &dims = block.dims;
      Tile batch64 = batch.to<i64>(), head64 = head.to<i64>(), kv_head64 = block.kv_head.to<i64>();
      Tile batch_head = block.batch_head, dim_ok = block.dim_ok;
      Tile row_ok = expand_dims(rows, 1) < n_q;
      Tile q_tile = loadRows(q + batch64 * q_sb + head64 * q_sh, rows, q_sn, dims, row_ok && dim_ok);
      const HeadRows keys({k, batches, n_kv, heads_kv, head_dim, k_sb, k_sn, k_sh}, batch64, kv_head64,
                          block_pointers);
      const HeadRows values({v, batches, n_kv, heads_kv, head_dim, v_sb, v_sn, v_sh}, batch64, kv_head64,
                            block_pointers);
      Tile kv_ok = broadcast_to(dim_ok, {bn, d});

      // This program's row of the mask: [full count, partial count, full blocks, partial blocks].
      Tile mask_row = (batch * mask_heads + head % mask_heads) * mask_q_blocks + block.index * bm / mask_bm;
      Tile record = blocks + mask_row.to<i64>() * (2 + 2 * mask_kv_blocks);
      OnlineSoftmax softmax(bm, d);
      // One loop over (listed block, step of BLOCK_N in it), so that K and V pipeline across blocks;
      // with OVERLAP_SOFTMAX in FlashAttention-3's order (see the dense forward). One deferral
      // spans both lists: the product pending when a list begins is the last step of the list
      // before (if it listed any), which the list's first iteration multiplies; the last listed
      // step's comes after both.
      const int64_t steps = mask_bn / bn;
      const bool overlap = cfg.get("OVERLAP_SOFTMAX", 0) != 0;
      if (overlap) // RESCALE_AT_SETTLE: see the dense forward
        softmax.defer(bn, T::dtype, cfg.get("RESCALE_AT_SETTLE", 0) != 0);
      Tile pending_from = 0, visited = 0; // the pending step's first key; steps visited so far
      // Which elements of the keys from `from` tiles of pointers may read (a block pointer
      // reads 0 past the tensor; those keys' probabilities are 0).
      auto readable = [&](const Tile &from, bool partial) {
        return partial ? kv_ok && expand_dims(from + arange(0, bn), 1) < n_kv : kv_ok;
      };
      auto visit = [&](Tile first, Tile count, bool partial) {
        // The first key of iteration j of this list.
        auto start = [&](const Tile &j) { return load(record + first + j / steps) * mask_bn + j % steps * bn; };
        for_range(0, count * steps, 1, softmax.state(), [&](Tile j) {
          if (overlap)
            softmax.settle_pending();
          Tile from = start(j), cols = from + arange(0, bn);
          Tile qk = dot(q_tile, trans(keys.load(from, bn, dims, readable(from, partial))));
          // The previous step's V (none before the first: its probabilities are 0); from the list
          // before, a full block, never ragged, reads as this list's do.
          if (overlap) {
            Tile previous = where(j > 0, start(maximum(j - 1, 0)), pending_from);
            softmax.multiply_pending(values.load(previous, bn, dims, readable(previous, partial) && (j > 0 || visited > 0)));
          }
          const ScoreTransform transform =
              modifiedScores(mods, scale, batch, head, expand_dims(minimum(rows, n_q - 1), 1),
                             expand_dims(minimum(cols, n_kv - 1), 0), score_aux);
          // Unmodified scores stay q.k: the softmax scales them (transform.scale) in its FMA.
          Tile scores = transform.scale ? qk : transform.logits(qk);
          if (partial)
            scores = where(*visibleIn(mods, true, batch, head, expand_dims(rows, 1), expand_dims(cols, 0), n_q, n_kv,
                                     mask_aux, /*bound_rows=*/false),
                           scores, -INFINITY);
          if (overlap)
            softmax.add_deferred(scores, transform.scale);
          else
            softmax.add(scores, transform.scale, [&] { return values.load(from, bn, dims, readable(from, partial)); });
        });
        if (overlap) {
          pending_from = where(count > 0, start(maximum(count * steps - 1, 0)), pending_from);
          visited = visited + count;
        }
      };
      visit(2, load(record), false);
      visit(2 + mask_kv_blocks, load(record + 1), true);
      // The last listed step's V; none after empty lists. With LAST_PRODUCT_IN_LOOP as a loop of
      // at most one step, its V through the ring of K and V (see the dense forward).
      auto multiply_last = [&] {
        softmax.settle_pending();
        softmax.multiply_pending(values.load(pending_from, bn, dims, readable(pending_from, true)));
      };
      if (overlap && cfg.get("LAST_PRODUCT_IN_LOOP", 0) != 0)
        for_range(0, minimum(visited, 1), 1, softmax.state(), [&](Tile) { multiply_last(); });
      else if (overlap)
        if_(visited > 0, {softmax.acc}, multiply_last);
      store(rowPointers(o + batch64 * o_sb + head64 * o_sh, rows, o_sn, dims),
            softmax.output(T::dtype), row_ok && dim_ok);
      store(lse + batch_head.to<i64>() * n_q + rows, softmax.lse(), rows < n_q);
    };
    if (cfg.get("PERSISTENT", 0) != 0) {
      // A program a slot of the SMs, taking tiles in turn: the producer loads the next tile's
      // first keys and values while the consumers finish this one, and no program starts or
      // ends between tiles.
      const TileNumbering numbering{cdiv(n_q, bm), heads_q, group};
      forEachTile(numbering.query_blocks * batches * heads_q, numbering,
                  [&](const QueryTile &tile) { attend(QueryBlock(tile, bm, d, head_dim)); });
    } else {
      attend(QueryBlock(QueryTile(program_id(0), program_id(1), heads_q, group), bm, d, head_dim));
    }
  });
}

/// dK, dV of BLOCK_N keys of one KV head: every query head of its group in order, over the
/// query blocks the transposed mask lists for the keys' mask block. With BLOCK_POINTERS, Q and
/// dO are read through block pointers (on Hopper the TMA's copies).
template <typename T> Kernel blockSparseKeysValues(const Modifiers &mods) {
  return kernel("block_sparse_attention_bwd_dkdv", [mods](
      Ptr<T> q, Ptr<T> k, Ptr<T> v, Ptr<T> dout, Ptr<f32> lse, Ptr<f32> delta, Ptr<T> dk, Ptr<T> dv, Ptr<i32> blocks,
      Ptr<i32> mask_aux, Ptr<f32> score_aux, Int n_q, Int n_kv, Int heads_q, Int group, Int head_dim, Int mask_heads, Int mask_q_blocks,
      Int mask_kv_blocks, Long q_sb, Long q_sn, Long q_sh, Long k_sb, Long k_sn, Long k_sh, Long v_sb, Long v_sn,
      Long v_sh, Long do_sb, Long do_sn, Long do_sh, Long dk_sb, Long dk_sn, Long dk_sh, Long dv_sb, Long dv_sn,
      Long dv_sh, Float scale, Int batches, Int batch_heads, const Config &cfg) {
    const int64_t bm = cfg["BLOCK_M"], bn = cfg["BLOCK_N"], d = cfg["HEAD_DIM"];
    const int64_t mask_bm = cfg["MASK_BLOCK_M"], mask_bn = cfg["MASK_BLOCK_N"];
    const bool block_pointers = cfg.get("BLOCK_POINTERS", 0) != 0;
    Tile heads_kv = heads_q / group;
    Tile batch = program_id(1) / heads_kv, kv_head = program_id(1) % heads_kv;
    Tile batch64 = batch.to<i64>(), kv_head64 = kv_head.to<i64>();
    Tile cols = program_id(0) * bn + arange(0, bn);
    Tile dims = arange(0, d);
    Tile dim_ok = expand_dims(dims, 0) < head_dim;
    Tile key_ok = expand_dims(cols, 1) < n_kv && dim_ok;
    Tile k_tile = loadRows(k + batch64 * k_sb + kv_head64 * k_sh, cols, k_sn, dims, key_ok);
    Tile v_tile = loadRows(v + batch64 * v_sb + kv_head64 * v_sh, cols, v_sn, dims, key_ok);
    Tile dk_acc = zeros({bn, d}, DType::f32), dv_acc = zeros({bn, d}, DType::f32);
    for_range(0, group, 1, {dk_acc, dv_acc}, [&](Tile member) {
      Tile head = kv_head * group + member, head64 = head.to<i64>();
      const HeadRows queries({q, batches, n_q, heads_q, head_dim, q_sb, q_sn, q_sh}, batch64, head64,
                             block_pointers);
      const HeadRows grads({dout, batches, n_q, heads_q, head_dim, do_sb, do_sn, do_sh}, batch64, head64,
                           block_pointers);
      Tile query_head = batch * heads_q + head;
      Tile mask_row = (batch * mask_heads + head % mask_heads) * mask_kv_blocks + program_id(0) * bn / mask_bn;
      Tile record = blocks + mask_row.to<i64>() * (2 + 2 * mask_q_blocks);
      // One loop over (listed block, step of BLOCK_M in it): Q and dO pipeline across blocks.
      const int64_t steps = mask_bm / bm;
      auto visit = [&](Tile first, Tile count, bool partial) {
        for_range(0, count * steps, 1, {dk_acc, dv_acc}, [&](Tile j) {
          Tile start = load(record + first + j / steps) * mask_bm + j % steps * bm;
          Tile rows = start + arange(0, bm);
          Tile row_ok = expand_dims(rows, 1) < n_q && dim_ok;
          Tile q_tile = queries.load(start, bm, dims, row_ok);
          Tile do_tile = grads.load(start, bm, dims, row_ok);
          auto read_rows = [&] {
            return loadRowStatistics(lse, delta, batch_heads, n_q, query_head, start, bm, block_pointers);
          };
          const std::optional<Tile> visible = visibleIn(mods, partial, batch, head, expand_dims(rows, 0),
                                                        expand_dims(cols, 1), n_q, n_kv, mask_aux);
          const ScoreTransform scores = modifiedScores(mods, scale, batch, head,
                                                       expand_dims(minimum(rows, n_q - 1), 0),
                                                       expand_dims(minimum(cols, n_kv - 1), 1), score_aux);
          accumulateKeysValues(k_tile, v_tile, q_tile, do_tile, read_rows, visible, scores, dk_acc, dv_acc);
        });
      };
      visit(2, load(record), false);
      visit(2 + mask_q_blocks, load(record + 1), true);
    });
    store(rowPointers(dk + batch64 * dk_sb + kv_head64 * dk_sh, cols, dk_sn, dims),
          (dk_acc * scale).to(T::dtype), key_ok);
    store(rowPointers(dv + batch64 * dv_sb + kv_head64 * dv_sh, cols, dv_sn, dims),
          dv_acc.to(T::dtype), key_ok);
  });
}

/// dQ of BLOCK_M queries: the key blocks their mask row lists. With BLOCK_POINTERS, K and V are
/// read through block pointers (on Hopper the TMA's copies).
template <typename T> Kernel blockSparseQueries(const Modifiers &mods) {
  return kernel("block_sparse_attention_bwd_dq", [mods](
      Ptr<T> q, Ptr<T> k, Ptr<T> v, Ptr<T> dout, Ptr<f32> lse, Ptr<f32> delta, Ptr<T> dq, Ptr<i32> blocks,
      Ptr<i32> mask_aux, Ptr<f32> score_aux, Int n_q, Int n_kv, Int heads_q, Int group, Int head_dim, Int mask_heads, Int mask_q_blocks,
      Int mask_kv_blocks, Long q_sb, Long q_sn, Long q_sh, Long k_sb, Long k_sn, Long k_sh, Long v_sb, Long v_sn,
      Long v_sh, Long do_sb, Long do_sn, Long do_sh, Long dq_sb, Long dq_sn, Long dq_sh, Float scale, Int batches,
      Int heads_kv, const Config &cfg) {
    const int64_t bm = cfg["BLOCK_M"], bn = cfg["BLOCK_N"], d = cfg["HEAD_DIM"];
    const int64_t mask_bm = cfg["MASK_BLOCK_M"], mask_bn = cfg["MASK_BLOCK_N"];
    const bool block_pointers = cfg.get("BLOCK_POINTERS", 0) != 0;
    const QueryBlock block(QueryTile(program_id(0), program_id(1), heads_q, group), bm, d, head_dim);
    const Tile &batch = block.batch, &head = block.head, &rows = block.rows, &dims = block.dims;
    Tile batch64 = batch.to<i64>(), head64 = head.to<i64>(), kv_head64 = block.kv_head.to<i64>();
    Tile batch_head = block.batch_head;
    Tile row_ok = expand_dims(rows, 1) < n_q && block.dim_ok;
    Tile q_tile = loadRows(q + batch64 * q_sb + head64 * q_sh, rows, q_sn, dims, row_ok);
    Tile do_tile = loadRows(dout + batch64 * do_sb + head64 * do_sh, rows, do_sn, dims, row_ok);
    Tile row_lse = load(lse + batch_head.to<i64>() * n_q + rows, rows < n_q, 0) * OnlineSoftmax::log2e;
    Tile row_delta = load(delta + batch_head.to<i64>() * n_q + rows, rows < n_q, 0);
    const HeadRows keys({k, batches, n_kv, heads_kv, head_dim, k_sb, k_sn, k_sh}, batch64, kv_head64,
                        block_pointers);
    const HeadRows values({v, batches, n_kv, heads_kv, head_dim, v_sb, v_sn, v_sh}, batch64, kv_head64,
                          block_pointers);
    Tile mask_row = (batch * mask_heads + head % mask_heads) * mask_q_blocks + block.index * bm / mask_bm;
    Tile record = blocks + mask_row.to<i64>() * (2 + 2 * mask_kv_blocks);
    Tile dq_acc = zeros({bm, d}, DType::f32);
    // One loop over (listed block, step of BLOCK_N in it): K and V pipeline across blocks.
    const int64_t steps = mask_bn / bn;
    auto visit = [&](Tile first, Tile count, bool partial) {
      for_range(0, count * steps, 1, {dq_acc}, [&](Tile j) {
        Tile start = load(record + first + j / steps) * mask_bn + j % steps * bn;
        Tile cols = start + arange(0, bn);
        Tile col_ok = expand_dims(cols, 1) < n_kv && block.dim_ok;
        Tile k_tile = keys.load(start, bn, dims, col_ok);
        Tile v_tile = values.load(start, bn, dims, col_ok);
        const std::optional<Tile> visible = visibleIn(mods, partial, batch, head, expand_dims(rows, 1),
                                                      expand_dims(cols, 0), n_q, n_kv, mask_aux);
        const ScoreTransform scores = modifiedScores(mods, scale, batch, head, expand_dims(minimum(rows, n_q - 1), 1),
                                                     expand_dims(minimum(cols, n_kv - 1), 0), score_aux);
        accumulateQueries(q_tile, k_tile, v_tile, do_tile, row_lse, row_delta, visible, scores, dq_acc);
      });
    };
    visit(2, load(record), false);
    visit(2 + mask_kv_blocks, load(record + 1), true);
    store(rowPointers(dq + batch64 * dq_sb + head64 * dq_sh, rows, dq_sn, dims),
          (dq_acc * scale).to(T::dtype), row_ok);
  });
}

} // namespace

Kernel block_mask_states_kernel(const MaskMod &mask_mod) {
  // A program per (query block, key block, batch * heads): how many of its in-bounds elements
  // the mask_mod lets through, none, some or all of them, as a BlockMask::State.
  return kernel("block_mask_states", [mask_mod](Ptr<i32> states, Ptr<i32> aux, Int n_q, Int n_kv, Int heads,
                                                const Config &cfg) {
    const int64_t bm = cfg["BLOCK_M"], bn = cfg["BLOCK_N"];
    Tile rows = program_id(0) * bm + arange(0, bm), cols = program_id(1) * bn + arange(0, bn);
    Tile inside = expand_dims(rows, 1) < n_q && expand_dims(cols, 0) < n_kv;
    Tile q = expand_dims(minimum(rows, n_q - 1), 1), kv = expand_dims(minimum(cols, n_kv - 1), 0);
    Tile seen = inside && mask_mod(program_id(2) / heads, program_id(2) % heads, q, kv, aux);
    Tile count = sum(sum(seen.to<f32>(), 1), 0), total = sum(sum(inside.to<f32>(), 1), 0);
    Tile state = where(count == 0.0, 0, where(count == total, 2, 1));
    store(states + (program_id(2) * num_programs(0) + program_id(0)) * num_programs(1) + program_id(1), state);
  });
}

Kernel block_sparse_forward_kernel(DType dtype, const Modifiers &modifiers) {
  return dtype == DType::bf16 ? blockSparseForward<bf16>(modifiers) : blockSparseForward<f16>(modifiers);
}
Kernel block_sparse_backward_dkdv_kernel(DType dtype, const Modifiers &modifiers) {
  return dtype == DType::bf16 ? blockSparseKeysValues<bf16>(modifiers) : blockSparseKeysValues<f16>(modifiers);
}
Kernel block_sparse_backward_dq_kernel(DType dtype, const Modifiers &modifiers) {
  return dtype == DType::bf16 ? blockSparseQueries<bf16>(modifiers) : blockSparseQueries<f16>(modifiers);
}

} // namespace tessera::kernels::detail
