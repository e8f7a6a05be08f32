// Flash attention from C++: O = softmax(Q K^T * scale [+ causal mask]) V and the natural-log
// LSE per query row, never forming the N x N matrix.
#ifndef TESSERA_KERNELS_ATTENTION_H
#define TESSERA_KERNELS_ATTENTION_H

#include "tessera/dsl/dtype.h"
#include "tessera/dsl/kernel.h"
#include "tessera/error.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace tessera::kernels {

/// Where a tensor's memory lives (DLPack's kDLCPU = 1, kDLCUDA = 2).
enum class DeviceType : int32_t { cpu = 1, cuda = 2 };

/// A DLPack-compatible view: data, dtype, shape and strides in elements. Not owning.
struct TensorView {
  void *data = nullptr;
  dsl::DType dtype = dsl::DType::f16;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides; ///< empty: contiguous (row-major)
  DeviceType device = DeviceType::cuda;

  int64_t stride(size_t dim) const;
  int64_t numel() const;
};

struct AttentionOptions {
  bool causal = false;          ///< bottom-right aligned when n_q != n_kv (FlashAttention 2.1+)
  std::optional<double> scale;  ///< positive; default 1/sqrt(head_dim)
  /// Launch with this config (one of attention_forward_configs) instead of the autotuned one.
  std::optional<dsl::Config> config;
  /// The backward's passes with these configs (of attention_backward_configs) instead of the
  /// autotuned ones.
  std::optional<dsl::Config> keys_values_config, queries_config;
  /// false: the dK/dV pass may also add each query block's dS K into an f32 dQ workspace (bulk
  /// adds; on Hopper the copy engine's reductions), one pass over the scores instead of two
  /// (queries_config unused), so dQ's rounding varies from run to run. It does so with a given
  /// keys_values_config, and otherwise where that is not slower: on Hopper at head dims 33-128
  /// (H200, N = 8192: d = 128 5.28 vs 6.33 ms, causal 2.88 vs 3.27; d = 64 6.26 vs 7.39,
  /// causal 3.30 vs 3.78); elsewhere the two deterministic passes run.
  /// true (default): bitwise repeatable.
  bool deterministic = true;
};

/// The tuned passes of attention_backward: dK/dV (a program per key block, looping over the
/// query blocks) and dQ (a program per query block, looping over the key blocks); not
/// deterministic, dK/dV adding dQ (keys_values_config then comes from this pass's space).
enum class BackwardPass { keys_values, queries, keys_values_adding_dq };

/// The configs attention_forward is autotuned over for a head dim (BLOCK_M, BLOCK_N,
/// HEAD_DIM = head_dim padded to a power of two, CAUSAL, num_warps, num_stages, SPLIT_MASKED,
/// OVERLAP_SOFTMAX: FlashAttention-3's order of the products, for Hopper); the first
/// is the default, used untuned (TESSERA_AUTOTUNE=off) and under the interpreter. Tuning
/// runs on the first call per GPU model, dtype, head dim, causality and power-of-two buckets
/// of the lengths and batch*heads, and is remembered on disk (see jit/Autotune.h). A given
/// config may also set PERSISTENT = 1 (one program per SM slot, taking the query blocks in
/// turn; for warp-specialized configs the producer then loads the next block's Q, K and V
/// early).
std::vector<dsl::Config> attention_forward_configs(int64_t head_dim, bool causal);

/// Whether FlashAttention-3's ping-pong (knob ping_pong = 1: the two consumer warpgroups take
/// turns at their tensor-core products) fits a forward config: warp-specialized, with two
/// consumer warpgroups (num_warps = 8).
bool ping_pong_applies(const dsl::Config &config);

/// The configs a backward pass is autotuned over, like attention_forward_configs (each pass
/// tuned on its own; the first is the default).
std::vector<dsl::Config> attention_backward_configs(int64_t head_dim, bool causal, BackwardPass pass);

/// q: [batch, n_q, heads_q, head_dim]; k, v: [batch, n_kv, heads_kv, head_dim] (heads_q a
/// multiple of heads_kv: GQA/MQA); o like q; lse: f32 [batch, heads_q, n_q], contiguous.
/// fp16 or bf16, head_dim 1..256, any strides with a unit head_dim stride (so BSHD and
/// BHSD both work). Launches on `stream` (CUDA; nullptr: the default stream); under
/// TESSERA_INTERPRET it runs on the host and views are host memory. Bad input throws
/// tessera::Error naming the argument and the problem.
void attention_forward(const TensorView &q, const TensorView &k, const TensorView &v, const TensorView &o,
                       const TensorView &lse, const AttentionOptions &options = {}, void *stream = nullptr);

/// Gradients of attention_forward: from q, k, v, the forward's o and lse and the output
/// gradient dout (like o), fills dq (like q), dk and dv (like k) in q's dtype. Deterministic:
/// bitwise the same on every run (dk, dv sum the query heads of a GQA group in order). The
/// views follow attention_forward's rules; outputs must not overlap anything. `options` as
/// for the forward (its forward config is ignored). Launches on `stream` (its per-row
/// workspace allocated and freed in stream order, as the work runs) and returns at once.
void attention_backward(const TensorView &q, const TensorView &k, const TensorView &v, const TensorView &o,
                        const TensorView &lse, const TensorView &dout, const TensorView &dq, const TensorView &dk,
                        const TensorView &dv, const AttentionOptions &options = {}, void *stream = nullptr);

} // namespace tessera::kernels

#endif // TESSERA_KERNELS_ATTENTION_H
