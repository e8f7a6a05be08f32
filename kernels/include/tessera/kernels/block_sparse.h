// Block-sparse attention with programmable masks and scores (FlashAttention's block-sparse
// algorithm, FlexAttention's mask_mod/score_mod): a BlockMask lists, for each query block,
// the key blocks to visit, split into full blocks (every element visible) and partial blocks
// (mask_mod decides per element); the kernel never touches the other blocks.
//
//   kernels::Modifiers mods;
//   mods.mask_mod = [](const Tile &b, const Tile &h, const Tile &q, const Tile &kv, const Tile &aux) {
//     return kv <= q && q - kv < 1024;                               // sliding window, causal
//   };
//   kernels::BlockSparseAttention attention(mods);                   // compiled per modifier
//   auto mask = kernels::BlockMask::from_predicate(B, 1, N, N, [](auto, auto, auto q, auto kv) {
//     return kv <= q && q - kv < 1024; });
//   attention.forward(q, k, v, o, lse, mask);
#ifndef TESSERA_KERNELS_BLOCK_SPARSE_H
#define TESSERA_KERNELS_BLOCK_SPARSE_H

#include "tessera/kernels/attention.h"

#include "tessera/dsl/tile.h"
#include "tessera/jit/Runtime.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace tessera::kernels {

/// A mask_mod (see Modifiers): whether query q of (batch, head) sees key kv, as DSL tiles.
using MaskMod = std::function<dsl::Tile(const dsl::Tile &batch, const dsl::Tile &head, const dsl::Tile &q,
                                        const dsl::Tile &kv, const dsl::Tile &aux)>;

/// A score modifier: the new score (or a derivative) from the score and the positions.
using ScoreMod = std::function<dsl::Tile(const dsl::Tile &score, const dsl::Tile &batch, const dsl::Tile &head,
                                         const dsl::Tile &q, const dsl::Tile &kv, const dsl::Tile &aux)>;

/// The elementwise masks of BlockMask's ready-made builders, to pair with them (partial blocks
/// need the mask_mod that made them partial):
///   Modifiers mods;
///   mods.mask_mod = mask_mods::sliding_window(1024);
///   BlockSparseAttention(mods).forward(q, k, v, o, lse, BlockMask::sliding_window(B, N, 1024));
namespace mask_mods {
/// BlockMask::causal: key kv <= q + n_kv - n_q.
MaskMod causal(int64_t n_q, int64_t n_kv);
/// BlockMask::sliding_window: q - window < kv <= q.
MaskMod sliding_window(int64_t window);
/// BlockMask::prefix_lm: kv < prefix or kv <= q.
MaskMod prefix_lm(int64_t prefix);
/// BlockMask::documents: the same document id, read from `aux` (SparseInputs::mask_aux: the
/// [batch, n] int32 ids on the device), and kv <= q when `causal`.
MaskMod documents(int64_t n, bool causal);
} // namespace mask_mods

/// Which key blocks each (batch, head, query block) visits. Built on the host; its index
/// arrays are copied to the GPU on first use there (or registered with the interpreter).
class BlockMask {
public:
  enum class State : uint8_t { skip = 0, partial = 1, full = 2 };
  /// Host predicate: whether query q of (batch, head) sees key kv.
  using Visible = std::function<bool(int64_t batch, int64_t head, int64_t q, int64_t kv)>;

  /// From the state of every block, [batch, heads, ceil(n_q / block_m), ceil(n_kv / block_n)]
  /// row-major; heads 1: one mask for every head. A block that reaches past n_q or n_kv is
  /// never full (the kernel masks the ragged edge there).
  BlockMask(int64_t batch, int64_t heads, int64_t n_q, int64_t n_kv, int64_t block_m, int64_t block_n,
            const std::vector<State> &states);
  /// Each block classified by evaluating `visible` on its elements.
  static BlockMask from_predicate(int64_t batch, int64_t heads, int64_t n_q, int64_t n_kv, const Visible &visible,
                                  int64_t block_m = 128, int64_t block_n = 128);
  /// The same with the mask_mod itself evaluated on the GPU (a program per block; `aux` as
  /// for the attention kernels), for masks too large to classify on the host; waits for it.
  static BlockMask from_mask_mod(int64_t batch, int64_t heads, int64_t n_q, int64_t n_kv, const MaskMod &mask_mod,
                                 const void *aux = nullptr, int64_t block_m = 128, int64_t block_n = 128,
                                 void *stream = nullptr);
  /// Bottom-right aligned causal mask: query i sees keys j <= i + n_kv - n_q.
  static BlockMask causal(int64_t batch, int64_t n_q, int64_t n_kv, int64_t block_m = 128, int64_t block_n = 128);
  /// Causal within a window: query i sees keys i - window < j <= i (n_q == n_kv).
  static BlockMask sliding_window(int64_t batch, int64_t n, int64_t window, int64_t block_m = 128,
                                  int64_t block_n = 128);
  /// Prefix-LM: every query sees the first `prefix` keys, and causally after them (n_q == n_kv).
  static BlockMask prefix_lm(int64_t batch, int64_t n, int64_t prefix, int64_t block_m = 128, int64_t block_n = 128);
  /// Document masking: `documents` holds [batch, n] document ids; a query sees the keys of
  /// its own document, causally when `causal`.
  static BlockMask documents(int64_t batch, int64_t n, const std::vector<int32_t> &documents, bool causal,
                             int64_t block_m = 128, int64_t block_n = 128);

  int64_t batch() const { return batch_; }
  int64_t heads() const { return heads_; }
  int64_t n_q() const { return n_q_; }
  int64_t n_kv() const { return n_kv_; }
  int64_t block_m() const { return block_m_; }
  int64_t block_n() const { return block_n_; }
  int64_t q_blocks() const { return (n_q_ + block_m_ - 1) / block_m_; }
  int64_t kv_blocks() const { return (n_kv_ + block_n_ - 1) / block_n_; }
  State state(int64_t batch, int64_t head, int64_t q_block, int64_t kv_block) const;
  /// Visited blocks (full or partial) over all blocks (counted once: every launch's tuning
  /// key reads it).
  double density() const { return density_; }

  /// The device index arrays the kernels read (int32, copied on the first call, on the
  /// current device): per (batch, head, query block) the counts of full and partial key
  /// blocks, then their indices in ascending order, [2 + 2 * kv_blocks] each ...
  const void *device_indices() const;
  /// ... and transposed for the backward pass: per (batch, head, key block) the query blocks
  /// that visit it, [2 + 2 * q_blocks] each.
  const void *device_transposed_indices() const;

private:
  int64_t batch_, heads_, n_q_, n_kv_, block_m_, block_n_;
  std::vector<State> states_;
  std::vector<int32_t> indices_; // both index arrays, the transposed one from transposedOffset_
  size_t transposedOffset_ = 0;
  double density_ = 0;
  mutable std::shared_ptr<jit::DeviceBuffer> device_;
};

/// The DSL lambdas compiled into the kernels; they must be elementwise. Index tiles broadcast
/// against each other: q [BLOCK_M, 1] and kv [1, BLOCK_N] (transposed, [1, BLOCK_M] and
/// [BLOCK_N, 1], in the backward's dK/dV pass), int32 positions clamped into the sequences
/// where a block reaches past their ends; batch and head int32 scalars; `aux` is the
/// pointer passed as SparseInputs::mask_aux (int32) or score_aux (f32), for masks and scores
/// read from tensors (document ids, a bias table).
struct Modifiers {
  /// Whether q sees kv (a bool tile), applied in partial blocks only.
  MaskMod mask_mod;
  /// The score (q.k * scale, f32) after modification, e.g. softcap or ALiBi; applied everywhere.
  ScoreMod score_mod;
  /// For the backward of a score_mod: its derivative with respect to the score, at the same
  /// arguments (1 - tanh(s / c)^2 for a softcap c * tanh(s / c); 1 for an added bias). Gradients
  /// flow to q, k and v only, not to tensors the score_mod reads.
  ScoreMod score_mod_grad;
};

/// Tensors the modifiers read (device memory, or host memory under the interpreter).
struct SparseInputs {
  const void *mask_aux = nullptr;  ///< int32
  const void *score_aux = nullptr; ///< f32
};

/// The configs block-sparse attention's forward is autotuned over for `mask`'s block sizes:
/// attention_forward_configs (not causal) fitted to the mask's blocks (BLOCK_M and BLOCK_N no
/// larger, no more warps than 16-row slices of BLOCK_M), each in the plain order and in
/// FlashAttention-3's, the plain warp-specialized ones also PERSISTENT; the first is the
/// default. BlockSparseAttention::forward's options.config takes one of these (or any forward
/// config whose blocks divide the mask's).
std::vector<dsl::Config> block_sparse_forward_configs(int64_t head_dim, const BlockMask &mask);

/// The same for the backward's passes (keys_values, queries: options.keys_values_config and
/// queries_config), each config of attention_backward_configs also through block pointers.
/// keys_values_adding_dq has no block-sparse kernel (tessera::Error).
std::vector<dsl::Config> block_sparse_backward_configs(int64_t head_dim, const BlockMask &mask, BackwardPass pass);

/// Block-sparse attention for one pair of modifiers; keeps its compiled kernels.
class BlockSparseAttention {
public:
  explicit BlockSparseAttention(Modifiers modifiers = {});
  ~BlockSparseAttention();

  /// As attention_forward (same views, dtypes, GQA, strides), visiting only the blocks of
  /// `mask`, whose batch, lengths must match q and k and whose heads are 1 or heads_q.
  /// options.causal must be false (causality is the mask's); rows that see no key give O = 0
  /// and LSE = -inf. options.config (one of block_sparse_forward_configs) may say
  /// PERSISTENT = 1: a program for each slot of the GPU's SMs, each taking query blocks in
  /// turn, so that its producer warpgroup (warp_specialize) loads the next block's keys while
  /// the current one finishes. Not tuned: on the H200 (N = 8192, d = 128) it ran 4% faster on
  /// a sliding window of 1024, as fast at random 5% and 50% densities, and 5-14% slower at
  /// random 10-25%, where some SMs finish their static share early.
  void forward(const TensorView &q, const TensorView &k, const TensorView &v, const TensorView &o,
               const TensorView &lse, const BlockMask &mask, const AttentionOptions &options = {},
               const SparseInputs &inputs = {}, void *stream = nullptr) const;

  /// Gradients of forward, as attention_backward (deterministic, GQA groups summed in order),
  /// visiting the same blocks: dK/dV through the mask's transposed index. A score_mod needs
  /// its score_mod_grad. options.keys_values_config and queries_config: one of
  /// block_sparse_backward_configs.
  void backward(const TensorView &q, const TensorView &k, const TensorView &v, const TensorView &o,
                const TensorView &lse, const TensorView &dout, const TensorView &dq, const TensorView &dk,
                const TensorView &dv, const BlockMask &mask, const AttentionOptions &options = {},
                const SparseInputs &inputs = {}, void *stream = nullptr) const;

private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
};

} // namespace tessera::kernels

#endif // TESSERA_KERNELS_BLOCK_SPARSE_H
