#include "AttentionKernels.h"

#include "tessera/kernels/online_softmax.h"

#include <cmath>

namespace tessera::kernels::detail {
namespace {

using namespace tessera::dsl;

template <typename T> Kernel forward() {
  return kernel("attention_fwd", [](Ptr<T> q, Ptr<T> k, Ptr<T> v, Ptr<T> o, Ptr<f32> lse, Int n_q, Int n_kv,
                                    Int heads_q, Int group, Int head_dim, Long q_sb, Long q_sn, Long q_sh,
                                    Long k_sb, Long k_sn, Long k_sh, Long v_sb, Long v_sn, Long v_sh,
                                    Long o_sb, Long o_sn, Long o_sh, Float scale, Int batches, Int heads_kv,
                                    Ptr<i32> schedule, const Config &cfg) {
    const int64_t bm = cfg["BLOCK_M"], bn = cfg["BLOCK_N"], d = cfg["HEAD_DIM"];
    // The masked loop's key blocks may be narrower (MASKED_BLOCK_N, dividing BLOCK_N): fewer
    // keys past the causal diagonal computed only to be masked.
    const int64_t masked_bn = cfg.get("MASKED_BLOCK_N", bn);
    const bool causal = cfg.get("CAUSAL", 0) != 0;
    const bool split = cfg.get("SPLIT_MASKED", 0) != 0;
    const bool block_pointers = cfg.get("BLOCK_POINTERS", 0) != 0;
    // Q through a block pointer too (Q_BLOCK_POINTER): on Hopper the producer's TMA copies it.
    const bool q_block_pointer = block_pointers && cfg.get("Q_BLOCK_POINTER", 0) != 0;

    // Query block `query_block` of head `batch_head`: a program's whole work, or with
    // PERSISTENT one of its tiles.
    auto attend = [&](const QueryTile &tile) {
      const Tile &query_block = tile.index, &batch_head = tile.batch_head;
      Tile batch = tile.batch.to<i64>(), head = tile.head.to<i64>(), kv_head = tile.kv_head.to<i64>();
      Tile rows = query_block * bm + arange(0, bm);
      Tile dims = arange(0, d);
      Tile dim_ok = expand_dims(dims, 0) < head_dim;
      Tile row_ok = expand_dims(rows, 1) < n_q;
      Tile q_tile = q_block_pointer ? loadBlockRows({q, batches, n_q, heads_q, head_dim, q_sb, q_sn, q_sh}, batch, head,
                                                    query_block * bm, bm, d)
                                    : loadRows(q + batch * q_sb + head * q_sh, rows, q_sn, dims, row_ok && dim_ok);
      const HeadRows keys({k, batches, n_kv, heads_kv, head_dim, k_sb, k_sn, k_sh}, batch, kv_head, block_pointers);
      const HeadRows values({v, batches, n_kv, heads_kv, head_dim, v_sb, v_sn, v_sh}, batch, kv_head, block_pointers);
      Tile qk_scale = scale * OnlineSoftmax::log2e;

      // Causal, bottom-right aligned: row i sees keys j <= i + (n_kv - n_q); blocks past the
      // last row's horizon are skipped.
      Tile diagonal = n_kv - n_q;
      Tile row_start = query_block * bm;
      Tile kv_end = n_kv;
      if (causal)
        kv_end = maximum(minimum(n_kv, row_start + bm + diagonal), 0);
      // With SPLIT_MASKED, key blocks that every row of this program sees whole go through a
      // loop without masks; the ragged tail and the causal diagonal come after them, masked
      // (less work per block, but two pipelined loops: the tuner decides).
      Tile full_end = 0;
      if (split) {
        full_end = n_kv / bn * bn;
        if (causal)
          full_end = minimum(full_end, maximum((row_start + diagonal + 1) / bn * bn, 0));
      }

      OnlineSoftmax softmax(bm, d);
      // With OVERLAP_SOFTMAX, FlashAttention-3's order: each block's P @ V is issued after the
      // next block's Q K^T, and on Hopper runs while the softmax of those scores is computed. One
      // deferral spans both loops: the unmasked loop's last product is the masked loop's first,
      // so that no product at the seam multiplies a block of zeros.
      const bool overlap = cfg.get("OVERLAP_SOFTMAX", 0) != 0;
      // With SKIP_VISIBLE_MASKS a masked-loop block that every row sees whole skips the mask:
      // the block before the causal diagonal of every other query block where the unmasked loop
      // steps by 2 x MASKED_BLOCK_N, and blocks before a ragged n_kv. The mask is over a quarter
      // of a masked block's instructions (sm_90a SASS, d = 64: compare, add and select a score).
      const bool skip_visible = cfg.get("SKIP_VISIBLE_MASKS", 0) != 0;
      // With RESCALE_AT_SETTLE the accumulator is rescaled before the next Q K^T is issued
      // (see OnlineSoftmax::defer): the softmax then runs beside its own warpgroup's P @ V.
      if (overlap)
        softmax.defer(bn, T::dtype, cfg.get("RESCALE_AT_SETTLE", 0) != 0);
      // Which elements of K or V rows `cols` to read: in a masked loop those before n_kv; a
      // deferred product's V (`deferred`) those in [0, kv_end), the rows before the first block
      // reading as 0. Through a block pointer (on Hopper the TMA's copy) everything outside the
      // tensor reads 0 and other rows are read, but their probabilities are 0.
      auto readable = [&](const Tile &cols, bool masked, bool deferred) {
        Tile ok = broadcast_to(dim_ok, {cols.shape()[0], d});
        if (masked || deferred)
          ok = ok && expand_dims(cols, 1) < (deferred ? kv_end : n_kv);
        if (deferred)
          ok = ok && expand_dims(cols, 1) >= 0;
        return ok;
      };
      // V's rows first..first + width, [width, d] as stored (coalesced).
      auto load_v = [&](const Tile &first, int64_t width, bool masked, bool deferred) {
        return values.load(first, width, dims, readable(first + arange(0, width), masked, deferred));
      };
      auto visit = [&](Tile begin, Tile end, bool masked, int64_t width) {
        for_range(begin, end, width, softmax.state(), [&](Tile start) {
          if (overlap)
            softmax.settle_pending();
          Tile cols = start + arange(0, width);
          // The dot reads K transposed.
          Tile k_tile = keys.load(start, width, dims, readable(cols, masked, false));
          Tile qk = dot(q_tile, trans(k_tile));
          if (overlap)
            softmax.multiply_pending(load_v(start - bn, bn, masked, true));
          Tile scores = qk; // the softmax scales them by qk_scale
          auto mask = [&] { // keys past n_kv, or with the causal mask those past the diagonal
            scores = where(*visiblePairs(true, causal, expand_dims(arange(0, bm), 1), expand_dims(arange(0, width), 0),
                                         row_start, start, n_kv, diagonal),
                           scores, -INFINITY);
          };
          if (masked && skip_visible) {
            // Some key of the block lies past n_kv, or past the diagonal of the block's first row.
            Tile needs_mask = start + width > n_kv;
            if (causal)
              needs_mask = needs_mask || start + width - 1 > row_start + diagonal;
            if_(needs_mask, {scores}, mask);
          } else if (masked) {
            mask();
          }
          if (overlap)
            softmax.add_deferred(scores, qk_scale);
          else
            softmax.add(scores, qk_scale, [&] { return load_v(start, width, masked, false); });
        });
      };
      if (split)
        visit(0, full_end, false, bn);
      visit(full_end, kv_end, true, masked_bn);
      // The last block's product (its first row the last multiple of BLOCK_N below kv_end), if
      // any block was visited. With LAST_PRODUCT_IN_LOOP as a loop of that one block, so that
      // its V comes through the ring of the loops' V (on Hopper the producer's TMA fills it
      // while the masked loop computes) rather than a stage of its own, or, inside persistent
      // programs, the consumers' loads.
      if (overlap && cfg.get("LAST_PRODUCT_IN_LOOP", 0) != 0)
        for_range((kv_end - 1) / bn * bn, kv_end, bn, softmax.state(),
                  [&](Tile start) {
                    softmax.settle_pending();
                    softmax.multiply_pending(load_v(start, bn, true, true));
                  });
      else if (overlap)
        if_(kv_end > 0, {softmax.acc}, [&] {
          softmax.settle_pending();
          softmax.multiply_pending(load_v((kv_end - 1) / bn * bn, bn, true, true));
        });
      Tile o_ptrs = rowPointers(o + batch * o_sb + head * o_sh, rows, o_sn, dims), out = softmax.output(T::dtype);
      // With FULL_TILE_STORES a block whose rows all lie before n_q, at a head dim that is
      // HEAD_DIM, stores O without masks: the masked stores' predicates, one an element, are
      // built into a register bit by bit, a dependent chain (sm_90a SASS, d = 64: 32 bits, ~250
      // stall cycles a tile at its end).
      if (cfg.get("FULL_TILE_STORES", 0) != 0)
        if_(row_start + bm <= n_q && head_dim == d, [&] { store(o_ptrs, out); },
            [&] { store(o_ptrs, out, row_ok && dim_ok); });
      else
        store(o_ptrs, out, row_ok && dim_ok);
      store(lse + batch_head.to<i64>() * n_q + rows, softmax.lse(), rows < n_q);
    };
    // Causal blocks differ in work: the heaviest (last) query blocks start first.
    if (cfg.get("PERSISTENT", 0) != 0) {
      // A program a slot of the SMs, taking tiles in turn: the producer loads the next tile's
      // Q and first keys and values while the consumers finish this one, and no program
      // starts or ends between tiles. Causal tiles come from the host's plan (`schedule`),
      // which balances the programs' work and keeps the heads they read at once in L2; the
      // others head-major (a query-block-major causal order, the heaviest blocks of all heads
      // first, read all heads' K and V at once, past L2: H200, d = 64, N = 4096, 0.774 ms
      // against 0.705).
      if (causal) {
        forEachScheduledTile(schedule, heads_q, attend);
      } else {
        const TileNumbering numbering{cdiv(n_q, bm), heads_q, group};
        forEachTile(numbering.query_blocks * batches * heads_q, numbering, attend);
      }
    } else {
      // The heaviest blocks of the heads whose K and V share L2 start first, so that the light
      // ones fill the grid's tail.
      const GridBlock block = gridBlock(causal, n_kv.to<i64>() * head_dim * 4);
      attend(QueryTile(causal ? num_programs(0) - 1 - block.rank : block.rank, block.batch_head, heads_q, group));
    }
  });
}

} // namespace

Kernel attention_forward_kernel(DType dtype) {
  return dtype == DType::bf16 ? forward<bf16>() : forward<f16>();
}

} // namespace tessera::kernels::detail
