// The attention kernels as DSL programs (internal to the library).
#ifndef TESSERA_KERNELS_LIB_ATTENTIONKERNELS_H
#define TESSERA_KERNELS_LIB_ATTENTIONKERNELS_H

#include "tessera/kernels/block_sparse.h"
#include "tessera/kernels/online_softmax.h"

#include <tessera/dsl.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tessera::kernels::detail {

/// Flash attention forward over strided [batch, n, heads, head_dim] Q, K, V, O and a
/// contiguous [batch, heads_q, n_q] LSE. Meta parameters: BLOCK_M, BLOCK_N, HEAD_DIM (the
/// head dim padded to a power of two >= 16), CAUSAL (0/1), SPLIT_MASKED (0/1: unmasked key
/// blocks in a loop of their own), OVERLAP_SOFTMAX (0/1: FlashAttention-3's order),
/// BLOCK_POINTERS (0/1: K and V through block pointers of [batch, n_kv, heads_kv, head_dim],
/// the TMA's on Hopper), PERSISTENT (0/1: the grid's programs, any number of them, take the
/// query blocks in turn; with CAUSAL those the last argument, `schedule`, plans for them:
/// causal_schedule). Grid: (cdiv(n_q, BLOCK_M), batch * heads_q); with PERSISTENT
/// (programs, 1).
dsl::Kernel attention_forward_kernel(dsl::DType dtype);

/// BlockMask::from_mask_mod's classifier: grid (query blocks, key blocks, batch * heads),
/// BLOCK_M/N the mask's blocks; writes each block's State (int32) to states.
dsl::Kernel block_mask_states_kernel(const MaskMod &mask_mod);

/// Block-sparse attention forward with the forward's arguments plus the mask's index arrays
/// (BlockMask::device_indices), the modifiers' aux pointers and the mask's heads and block
/// counts; meta parameters as the forward's plus MASK_BLOCK_M/N (BLOCK_M/N divide them) and
/// PERSISTENT (0/1: the grid's programs, any number of them, take the query blocks in turn).
/// Grid: (cdiv(n_q, BLOCK_M), batch * heads_q); with PERSISTENT (programs, 1).
dsl::Kernel block_sparse_forward_kernel(dsl::DType dtype, const Modifiers &modifiers);

/// The backward pass (FlashAttention 2, deterministic): delta = rowsum(dO * O) per query row
/// (grid (cdiv(n_q, BLOCK_M), batch * heads_q)); dK, dV per key block of a KV head, summing
/// the query heads of its group in order (grid (cdiv(n_kv, BLOCK_N), batch * heads_kv)); dQ
/// per query block (grid as the forward's). Same layouts and meta parameters as the forward.
dsl::Kernel attention_backward_delta_kernel(dsl::DType dtype);
dsl::Kernel attention_backward_dkdv_kernel(dsl::DType dtype);
dsl::Kernel attention_backward_dq_kernel(dsl::DType dtype);
/// The non-deterministic backward's dQ workspace, dq_accum: f32 [batch * heads_q, n_q rounded
/// up to kDqAccumRows, HEAD_DIM] contiguous, so that the dK/dV pass adds whole query blocks
/// (bulk_add) of any BLOCK_M; rows past n_q and columns past head_dim are never read.
inline constexpr int64_t kDqAccumRows = 128;
inline int64_t dqAccumRowsOf(int64_t n_q) { return (n_q + kDqAccumRows - 1) / kDqAccumRows * kDqAccumRows; }
/// Its last step: dq = scale * dq_accum in q's dtype; grid as the delta pass's.
dsl::Kernel attention_backward_dq_convert_kernel(dsl::DType dtype);

/// Block-sparse backward, deterministic: dK/dV per key block over the query blocks the
/// transposed mask lists (the GQA group in order), dQ per query block over its listed key
/// blocks; arguments as the dense backward's plus the mask's indices, mask_aux and the mask's
/// heads and block counts; mask_mod in partial blocks, score_mod with its score_mod_grad.
dsl::Kernel block_sparse_backward_dkdv_kernel(dsl::DType dtype, const Modifiers &modifiers);
dsl::Kernel block_sparse_backward_dq_kernel(dsl::DType dtype, const Modifiers &modifiers);

/// Query block `index` of head `batch_head` (of batch * heads_q), and that head's batch, head
/// and KV head: a program's work, or a persistent program's tile.
struct QueryTile {
  dsl::Tile index, batch_head, batch, head, kv_head;
  QueryTile(const dsl::Tile &index, const dsl::Tile &batch_head, const dsl::Tile &heads_q, const dsl::Tile &group)
      : index(index), batch_head(batch_head), batch(batch_head / heads_q), head(batch_head % heads_q),
        kv_head(head / group) {}
  /// From a plan's record (causal_schedule): no divisions.
  QueryTile(const dsl::Tile &index, const dsl::Tile &batch, const dsl::Tile &head, const dsl::Tile &kv_head,
            const dsl::Tile &heads_q)
      : index(index), batch_head(batch * heads_q + head), batch(batch), head(head), kv_head(kv_head) {}
};

/// How persistent programs number their tiles: query block tile % query_blocks of head
/// tile / query_blocks.
struct TileNumbering {
  dsl::Tile query_blocks, heads_q, group;
  QueryTile operator()(const dsl::Tile &tile) const {
    return QueryTile(tile % query_blocks, tile / query_blocks, heads_q, group);
  }
};

/// A persistent program's walk over the tiles 0..tiles: program p of G (num_programs(0)) takes
/// the tiles p, G + p, 2G + p, ..., every other round of G tiles in reverse (not a partial last
/// one), so that where tiles get heavier along the order (a causal mask's query blocks) each
/// program's sum evens out: at most 1.03x the mean there, where the plain order gives up to
/// 1.2x (32 query blocks a head, 132 programs).
inline void forEachTile(const dsl::Tile &tiles, const TileNumbering &numbering,
                        const std::function<void(const QueryTile &)> &body) {
  using namespace tessera::dsl;
  Tile programs = num_programs(0), program = program_id(0);
  for_range(program, tiles, programs, [&](Tile slot) {
    Tile round = slot / programs, first = round * programs;
    Tile reversed = round % 2 == 1 && first + programs <= tiles;
    body(numbering(where(reversed, first + programs - 1 - program, slot)));
  });
}

/// The int32s of a tile's record in the plan the kernel reads (causal_schedule): query block,
/// batch, head, KV head.
inline constexpr int64_t kScheduleRecord = 4;

/// A persistent program's walk over the tiles a host-planned schedule gives it
/// (causal_schedule): `schedule` holds num_programs(0) + 1 offsets, then the tiles, each a
/// record of its query block, batch, head and KV head (decoded on the host: the divisions by
/// run-time sizes held every warp where a tile starts); program p takes tiles offsets[p] ..
/// offsets[p + 1] in order. Each tile's record is read where the tile before it starts: read
/// where its own starts, the load held every warp there (ncu, causal d = 64: ~0.5% of the
/// consumers' samples).
inline void forEachScheduledTile(const dsl::Tile &schedule, const dsl::Tile &heads_q,
                                 const std::function<void(const QueryTile &)> &body) {
  using namespace tessera::dsl;
  Tile program = program_id(0), records = schedule + num_programs(0) + 1;
  Tile first = load(schedule + program), end = load(schedule + program + 1);
  auto record_at = [&](const Tile &slot) {
    std::vector<Tile> record;
    for (int64_t part = 0; part < kScheduleRecord; ++part)
      record.push_back(load(records + slot * kScheduleRecord + part, slot < end, 0));
    return record;
  };
  std::vector<Tile> next = record_at(first);
  for_range(first, end, 1, Carried(next.begin(), next.end()), [&](Tile slot) {
    std::vector<Tile> following = record_at(slot + 1);
    body(QueryTile(next[0], next[1], next[2], next[3], heads_q));
    next = following;
  });
}

/// How many heads' K and V the programs running at once stream together: a sixth of the H200's
/// 50 MB L2, so that they span at most two such chunks (16 MB), where the x-fastest order's
/// wave of 132 programs spans 2-5 heads (4-16 MB at d = 128).
inline constexpr int64_t kL2ChunkBytes = 8 << 20;
int64_t headsSharingL2(int64_t bytes_per_head, int64_t heads);

/// The persistent causal forward's plan of `programs` programs over the tiles (batch_head *
/// query_blocks + query_block): programs + 1 offsets, then each program's tiles. Chunk by
/// chunk of `chunk_heads` heads (whose K and V share L2), heaviest query block first across
/// the chunk's heads, each tile goes to the program with the least work so far (its keys
/// plus BLOCK_M for the block's own cost), as a dynamic scheduler would hand them out: the
/// programs' work ends within a light tile of each other, where a static order leaves up to
/// 1.04x the mean (1.14x at d = 128, N = 4096: fewer heads).
std::vector<int32_t> plan_causal_schedule(int64_t batch_heads, int64_t n_q, int64_t n_kv, int64_t block_m,
                                          int64_t programs, int64_t chunk_heads);
/// That plan for heads of `head_dim` (chunked as gridBlock does), each tile as its record
/// (forEachScheduledTile: decoded here, not by every program), uploaded once per shape and
/// device: what the kernel's `schedule` argument points at (host memory under the interpreter).
const void *causal_schedule(int64_t batches, int64_t heads_q, int64_t group, int64_t n_q, int64_t n_kv,
                            int64_t head_dim, int64_t block_m, int64_t programs);

/// The attention tuners' key for a problem: n_q and n_kv (the arguments at `nq` and nq + 1)
/// and the heads of all batches (heads_q, at nq + 2, times the batch count at `batches`), each
/// rounded up to a power of two. Nearby sizes share a tuning, but a few heads' pick does not
/// serve many: with too few programs to fill the SMs smaller blocks win (a test's B = 1, H = 2,
/// N = 4224 pick ran f16 d = 64 at B = 2, H = 32, N = 8192 in 2.58 ms against 2.27).
std::string attention_tuning_key(const std::vector<dsl::LaunchArg> &args, size_t nq, size_t batches);

/// The block along the grid's axis 0 (its rank: 0 first) and the batch-head along axis 1 that
/// a program of a grid (blocks, batch_heads) works on. With `heaviest_first` (causal blocks
/// differ in work), programs take ranks in order across heads, longest processing time first:
/// CUDA starts programs x-fastest, so the light blocks of every head fill the grid's tail, not
/// the heavy blocks of the last heads. They do so within chunks of heads whose
/// `bytes_per_head` (the operands a head's programs all stream) fit together in L2, so that
/// the programs running at once still share them.
struct GridBlock {
  dsl::Tile rank, batch_head;
};
inline GridBlock gridBlock(bool heaviest_first, const dsl::Tile &bytes_per_head) {
  using namespace tessera::dsl;
  if (!heaviest_first)
    return {program_id(0), program_id(1)};
  Tile blocks = num_programs(0), heads = num_programs(1);
  // headsSharingL2, on the device.
  Tile chunk_heads = maximum(minimum(kL2ChunkBytes / maximum(bytes_per_head, 1), heads.to<i64>()), 1).to<i32>();
  Tile started = program_id(1) * blocks + program_id(0); // programs started before this one
  Tile chunk = started / (chunk_heads * blocks);
  Tile first = chunk * chunk_heads, within = started - first * blocks;
  Tile size = minimum(chunk_heads, heads - first);
  return {within / size, first + within % size};
}

/// Which pairs of a block count, its query rows first_row + `row_offsets` and keys first_col +
/// `col_offsets`, broadcast together. Causal, bottom-right aligned: key <= query + diagonal,
/// which bounds the keys of every query row before n_q (< n_kv) too. Else with `bound_keys`
/// keys < n_kv; else none: every pair counts.
/// `compare_offsets`: compare each key's offset from its query's with one scalar a block, where
/// the block fixed across the loop lies along the columns (many values a thread). Its indices
/// would be loop invariants held in registers: the dK/dV loop adding dQ with [queries, keys]
/// scores spilled 168 B with them, 8 without (d = 64, 128 x 128). Along the rows (2 a thread)
/// they cost less than the offsets' differences, a loop invariant of every element.
inline std::optional<dsl::Tile> visiblePairs(bool bound_keys, bool causal, const dsl::Tile &row_offsets,
                                             const dsl::Tile &col_offsets, const dsl::Tile &first_row,
                                             const dsl::Tile &first_col, const dsl::Tile &n_kv,
                                             const dsl::Tile &diagonal, bool compare_offsets = false) {
  if (causal && compare_offsets)
    return col_offsets - row_offsets <= first_row + diagonal - first_col;
  if (causal)
    return first_col + col_offsets <= first_row + row_offsets + diagonal;
  if (bound_keys)
    return first_col + col_offsets < n_kv;
  return std::nullopt;
}

/// Pointers to rows `rows` (all `dims`) of one head of a [batch, n, heads, d] tensor whose head
/// starts at `base`, and a masked load of them (0 elsewhere).
inline dsl::Tile rowPointers(const dsl::Tile &base, const dsl::Tile &rows, const dsl::Tile &row_stride,
                             const dsl::Tile &dims) {
  return base + dsl::expand_dims(rows, 1) * row_stride + dsl::expand_dims(dims, 0);
}
inline dsl::Tile loadRows(const dsl::Tile &base, const dsl::Tile &rows, const dsl::Tile &row_stride,
                          const dsl::Tile &dims, const dsl::Tile &ok) {
  return dsl::load(rowPointers(base, rows, row_stride, dims), ok, 0);
}

/// A [batches, n, heads, head_dim] tensor of the attention kernels (q, k, v, dout): its base
/// pointer, sizes and strides (the head dim's is 1).
struct HeadTensor {
  dsl::Tile base, batches, n, heads, head_dim, sb, sn, sh;
};
/// Rows start..start + rows (all d columns) of one head of `t` through a 4-D block pointer (on
/// Hopper the TMA's copy): elements outside the tensor read 0.
inline dsl::Tile loadBlockRows(const HeadTensor &t, const dsl::Tile &batch, const dsl::Tile &head,
                               const dsl::Tile &start, int64_t rows, int64_t d) {
  dsl::Tile block = dsl::make_block_ptr(t.base, {t.batches, t.n, t.heads, t.head_dim}, {t.sb, t.sn, t.sh, 1},
                                        {batch, start, head, 0}, {1, rows, 1, d});
  return dsl::reshape(dsl::load(block), {rows, d});
}

/// One head of a HeadTensor as a kernel reads blocks of its rows: with `block_pointers` (the
/// BLOCK_POINTERS knob) through loadBlockRows, everything outside the tensor 0; otherwise
/// through tiles of pointers from the head's first element, read where `ok`.
struct HeadRows {
  HeadTensor tensor;
  dsl::Tile batch, head, first; // first: the head's first element (pointers only)
  bool block_pointers;
  HeadRows(const HeadTensor &t, const dsl::Tile &batch, const dsl::Tile &head, bool block_pointers)
      : tensor(t), batch(batch), head(head), first(t.base + batch * t.sb + head * t.sh),
        block_pointers(block_pointers) {}
  dsl::Tile load(const dsl::Tile &start, int64_t rows, const dsl::Tile &dims, const dsl::Tile &ok) const {
    if (block_pointers)
      return loadBlockRows(tensor, batch, head, start, rows, dims.shape()[0]);
    return loadRows(first, start + dsl::arange(0, rows), tensor.sn, dims, ok);
  }
};

/// A query block's saved statistics in the backward: its rows' LSE, in log2 units, and delta.
struct RowStatistics {
  dsl::Tile lse, delta;
};

/// Rows start..start + rows of query head `batch_head`'s per-row f32 statistic (the saved LSE,
/// delta), stored [batch_heads, n]: with `block_pointers` through a block pointer (on Hopper the
/// TMA's copy into the loop's stages, which each warp reads in the layout it uses), 0 past n;
/// otherwise through pointers, 0 where rows >= n.
inline dsl::Tile loadRowStatistic(const dsl::Tile &stats, const dsl::Tile &batch_heads, const dsl::Tile &n,
                                  const dsl::Tile &batch_head, const dsl::Tile &start, int64_t rows,
                                  bool block_pointers) {
  if (block_pointers)
    return dsl::reshape(dsl::load(dsl::make_block_ptr(stats, {batch_heads, n}, {n.to<dsl::i64>(), 1},
                                                      {batch_head, start}, {1, rows})),
                        {rows});
  dsl::Tile indices = start + dsl::arange(0, rows);
  return dsl::load(stats + batch_head.to<dsl::i64>() * n + indices, indices < n, 0);
}

/// Both statistics of those rows (loadRowStatistic), the LSE scaled to log2 units.
inline RowStatistics loadRowStatistics(const dsl::Tile &lse, const dsl::Tile &delta, const dsl::Tile &batch_heads,
                                       const dsl::Tile &n, const dsl::Tile &batch_head, const dsl::Tile &start,
                                       int64_t rows, bool block_pointers) {
  return {loadRowStatistic(lse, batch_heads, n, batch_head, start, rows, block_pointers) * OnlineSoftmax::log2e,
          loadRowStatistic(delta, batch_heads, n, batch_head, start, rows, block_pointers)};
}

/// How scores reach the softmax: `logits` maps a tile of q.k to the softmax's logits in log2
/// units; `slope`, when set, is the derivative of the modified score with respect to q.k *
/// scale (a score_mod's), which scales dS. Dense attention: logits = q.k * `scale` (scale *
/// log2(e)), no slope; the softmax then takes q.k and `scale` (OnlineSoftmax::add), and the
/// backward's probabilities are exp2(fma(q.k, scale, -lse)) (exp2_shifted).
struct ScoreTransform {
  std::function<dsl::Tile(const dsl::Tile &)> logits;
  std::function<dsl::Tile(const dsl::Tile &)> slope;
  std::optional<dsl::Tile> scale;

  /// exp2(logits(qk) - shift), the multiply by the scale fused into the subtraction's FMA.
  dsl::Tile exp2_shifted(const dsl::Tile &qk, const dsl::Tile &shift) const {
    return OnlineSoftmax::exp2_shifted(scale ? qk : logits(qk), scale, shift);
  }
};

/// The dense ScoreTransform.
inline ScoreTransform scaledScores(const dsl::Tile &qk_scale) {
  return {[qk_scale](const dsl::Tile &s) { return s * qk_scale; }, {}, qk_scale};
}

/// FlashAttention-2's backward steps, shared by the dense and block-sparse kernels, with the
/// saved LSE in log2 units. One query block's share of a key block's dV and dK (without the
/// final scale). The scores are [keys, queries] (transposed), or with `queries_in_rows`
/// [queries, keys] as FlashAttention-3 keeps them: each thread then holds the statistics of 2
/// rows, not of 16 columns, and dV's and dK's products read P^T and dS^T through shared memory
/// (as dQ's share, dS K, reads dS wherever its keys span warpgroups). `visible`, in the
/// scores' orientation, drops out-of-bounds and masked pairs (none: every pair counts).
/// `read_rows` reads the query block's statistics; it is called once the block's products are
/// issued, so that rows read from a pipeline stage (loadRowStatistic's block pointers) take no
/// registers while they are.
/// `with_ds` gets dS in q's dtype, in the scores' orientation, before dK's product is issued
/// (so that dQ's share, issued there, overlaps it). Where `mask_needed` (a scalar) is given,
/// `visible` is applied in a branch taken where it holds: blocks every pair of which counts
/// skip the mask's compares and selects.
inline void accumulateKeysValues(const dsl::Tile &k, const dsl::Tile &v, const dsl::Tile &q, const dsl::Tile &dout,
                                 const std::function<RowStatistics()> &read_rows,
                                 const std::optional<dsl::Tile> &visible,
                                 const ScoreTransform &score, dsl::Tile &dk_acc, dsl::Tile &dv_acc,
                                 const std::function<void(const dsl::Tile &)> &with_ds = {},
                                 bool queries_in_rows = false,
                                 const std::optional<dsl::Tile> &mask_needed = std::nullopt) {
  using namespace tessera::dsl;
  auto scores = [&](const Tile &keys_side, const Tile &queries_side) {
    return queries_in_rows ? dot(queries_side, trans(keys_side)) : dot(keys_side, trans(queries_side));
  };
  auto keys_first = [&](const Tile &t) { return queries_in_rows ? trans(t) : t; };
  const int64_t keys_axis = queries_in_rows ? 1 : 0; // a query's statistic broadcasts along it
  // Both products of the block first: on Hopper (async wgmma) P is computed while dP runs, and
  // dS while dV's product runs.
  Tile s = scores(k, q);
  Tile dp = scores(v, dout);
  const auto [row_lse, row_delta] = read_rows();
  Tile p = score.exp2_shifted(s, expand_dims(row_lse, keys_axis));
  if (visible && mask_needed)
    if_(*mask_needed, {p}, [&] { p = where(*visible, p, 0.0); });
  else if (visible)
    p = where(*visible, p, 0.0);
  dv_acc = dot(keys_first(p.to(q.dtype())), dout, dv_acc);
  Tile ds = p * (dp - expand_dims(row_delta, keys_axis));
  if (score.slope)
    ds = ds * score.slope(s);
  Tile ds16 = ds.to(q.dtype());
  if (with_ds)
    with_ds(ds16);
  dk_acc = dot(keys_first(ds16), q, dk_acc);
}

/// One key block's share of a query block's dQ (without the final scale).
inline void accumulateQueries(const dsl::Tile &q, const dsl::Tile &k, const dsl::Tile &v, const dsl::Tile &dout,
                              const dsl::Tile &row_lse, const dsl::Tile &row_delta,
                              const std::optional<dsl::Tile> &visible,
                              const ScoreTransform &score, dsl::Tile &dq_acc) {
  using namespace tessera::dsl;
  Tile s = dot(q, trans(k));
  Tile dp = dot(dout, trans(v)); // issued before P is computed: they overlap on Hopper
  Tile p = score.exp2_shifted(s, expand_dims(row_lse, 1));
  if (visible)
    p = where(*visible, p, 0.0);
  Tile ds = p * (dp - expand_dims(row_delta, 1));
  if (score.slope)
    ds = ds * score.slope(s);
  dq_acc = dot(ds.to(q.dtype()), k, dq_acc);
}

} // namespace tessera::kernels::detail

#endif // TESSERA_KERNELS_LIB_ATTENTIONKERNELS_H
