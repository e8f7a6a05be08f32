#include "tessera/kernels/attention.h"
#include "tessera/kernels/block_sparse.h"
#include "tessera/kernels/catalog.h"

#include "AttentionKernels.h"
#include "tessera/compiler/Interpreter.h"
#include "tessera/jit/Autotune.h"
#include "tessera/jit/Runtime.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>

namespace tessera::kernels {

int64_t TensorView::stride(size_t dim) const {
  if (!strides.empty())
    return strides[dim];
  int64_t s = 1;
  for (size_t d = dim + 1; d < shape.size(); ++d)
    s *= shape[d];
  return s;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  return n;
}

namespace {

/// The entry point being validated, for the messages (each sets it first).
thread_local const char *api = "attention_forward";

[[noreturn]] void fail(const std::string &message) { throw Error(std::string(api) + ": " + message); }

int64_t bytesOf(dsl::DType dtype) { return std::max(1, dsl::bit_width(dtype) / 8); }

std::string shapeStr(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

/// The byte range a view touches: [first, last) (empty views touch nothing).
std::pair<uintptr_t, uintptr_t> extent(const TensorView &t) {
  if (t.numel() == 0)
    return {0, 0};
  int64_t last = 0;
  for (size_t d = 0; d < t.shape.size(); ++d)
    last += (t.shape[d] - 1) * t.stride(d);
  auto base = reinterpret_cast<uintptr_t>(t.data);
  return {base, base + static_cast<uintptr_t>(last + 1) * bytesOf(t.dtype)};
}

void checkView(const char *name, const TensorView &t, size_t rank) {
  if (t.shape.size() != rank)
    fail(std::string(name) + " must have " + std::to_string(rank) + " dimensions, got " + shapeStr(t.shape));
  if (!t.strides.empty() && t.strides.size() != rank)
    fail(std::string(name) + " has " + std::to_string(t.strides.size()) + " strides for " + std::to_string(rank) +
         " dimensions");
  for (size_t d = 0; d < rank; ++d) {
    if (t.shape[d] < 0)
      fail(std::string(name) + " has a negative dimension: " + shapeStr(t.shape));
    if (t.stride(d) < 0)
      fail(std::string(name) + " has a negative stride in dimension " + std::to_string(d));
  }
  if (t.numel() == 0)
    return;
  if (!t.data)
    fail(std::string(name) + " is null");
  if (reinterpret_cast<uintptr_t>(t.data) % bytesOf(t.dtype))
    fail(std::string(name) + " is not aligned to its element size (" + std::to_string(bytesOf(t.dtype)) +
         " bytes)");
  if (t.stride(rank - 1) != 1 && t.shape[rank - 1] > 1)
    fail(std::string(name) + " must be contiguous in its last dimension (stride " +
         std::to_string(t.stride(rank - 1)) + ")");
  DeviceType expected = interpreter::enabled() ? DeviceType::cpu : DeviceType::cuda;
  if (t.device != expected)
    fail(std::string(name) + " is " + (t.device == DeviceType::cpu ? "host" : "CUDA") + " memory; expected " +
         (expected == DeviceType::cpu ? "host memory (TESSERA_INTERPRET is set)" : "CUDA memory"));
}

void checkDisjoint(const char *written, const TensorView &out, const char *other, const TensorView &in) {
  auto [a0, a1] = extent(out);
  auto [b0, b1] = extent(in);
  if (a0 < b1 && b0 < a1)
    fail(std::string(written) + " overlaps " + other);
}

int64_t powerOfTwoAtLeast(int64_t n) {
  int64_t p = 1;
  while (p < n)
    p *= 2;
  return p;
}

/// The head dim the kernel computes with: a power of two of at least 16 (the rest masked).
int64_t paddedHeadDim(int64_t head_dim) { return std::max<int64_t>(16, powerOfTwoAtLeast(head_dim)); }

/// The head dims the kernels take, for the entry point `where`.
void checkHeadDim(int64_t head_dim, const char *where) {
  if (head_dim < 1 || head_dim > 256)
    throw Error(std::string(where) + ": head_dim " + std::to_string(head_dim) + " is not supported (1 to 256)");
}

/// How many programs of a PERSISTENT config run at once: one per program slot of the GPU's SMs
/// (under the interpreter three, so that each takes several tiles).
int64_t persistentPrograms(const dsl::Config &config) {
  if (interpreter::enabled())
    return 3;
  return int64_t(jit::current_device().sm_count) * config.get("programs_per_sm", 1);
}

/// The grid of a pass: programs over `rows` in blocks of the config's `block`, times `programs`;
/// with PERSISTENT as many programs as run at once (at most one a tile), which take those tiles
/// in turn.
jit::GridFn blockGrid(int64_t rows, const char *block, int64_t programs) {
  return [=](const dsl::Config &config) {
    const int64_t blocks = (rows + config[block] - 1) / config[block];
    if (config.get("PERSISTENT", 0) != 0)
      return dsl::Grid{static_cast<uint32_t>(std::min(blocks * programs, persistentPrograms(config))), 1, 1};
    return dsl::Grid{static_cast<uint32_t>(blocks), static_cast<uint32_t>(programs), 1};
  };
}

/// Where the forward's arguments hold n_q (n_kv and heads_q follow), the batch count, and (its
/// last) the persistent causal programs' plan.
constexpr size_t kForwardNq = 5, kForwardBatches = 23, kForwardSchedule = 25;
/// The same in the backward passes' arguments (attention_backward): dQ's, and dK/dV's, whose
/// last two are its dQ workspace and batch x heads.
constexpr size_t kQueriesNq = 7, kQueriesBatches = 28;
constexpr size_t kKeysValuesNq = 8, kKeysValuesBatches = 32, kKeysValuesDqAccum = 33;

/// The forward's `schedule` for `config`: the plan of its persistent causal programs (over as
/// many tiles as the grid has programs for), else none.
void scheduleForward(const dsl::Config &config, std::vector<dsl::LaunchArg> &args) {
  if (!config.get("PERSISTENT", 0) || !config.get("CAUSAL", 0))
    return;
  const int64_t n_q = args[kForwardNq].integer(), n_kv = args[kForwardNq + 1].integer(),
                heads_q = args[kForwardNq + 2].integer(), group = args[kForwardNq + 3].integer(),
                batches = args[kForwardBatches].integer(), head_dim = args[kForwardNq + 4].integer();
  const int64_t programs = blockGrid(n_q, "BLOCK_M", batches * heads_q)(config).x;
  args[kForwardSchedule] =
      detail::causal_schedule(batches, heads_q, group, n_q, n_kv, head_dim, config["BLOCK_M"], programs);
}

/// EVEN_BLOCKS: whether the sequence lengths are whole blocks of the config, so that the
/// backward kernels' masks leave out the bounds (FlashAttention's even-MN case).
void markEvenBlocks(dsl::Config &config, int64_t n_q, int64_t n_kv) {
  config.set("EVEN_BLOCKS", n_q % config["BLOCK_M"] == 0 && n_kv % config["BLOCK_N"] == 0 ? 1 : 0);
}

/// The forward kernel of a dtype, made once (its compiled variants are cached with it).
const dsl::Kernel &forwardKernel(dsl::DType dtype) {
  static std::mutex mutex;
  static std::optional<dsl::Kernel> kernels[2];
  std::lock_guard<std::mutex> lock(mutex);
  auto &slot = kernels[dtype == dsl::DType::bf16];
  if (!slot)
    slot = detail::attention_forward_kernel(dtype);
  return *slot;
}

/// The backward kernels of a dtype: delta, dK/dV, dQ; made once.
const std::array<dsl::Kernel, 4> &backwardKernels(dsl::DType dtype) {
  static std::mutex mutex;
  static std::optional<std::array<dsl::Kernel, 4>> kernels[2];
  std::lock_guard<std::mutex> lock(mutex);
  auto &slot = kernels[dtype == dsl::DType::bf16];
  if (!slot)
    slot = std::array<dsl::Kernel, 4>{
        detail::attention_backward_delta_kernel(dtype), detail::attention_backward_dkdv_kernel(dtype),
        detail::attention_backward_dq_kernel(dtype), detail::attention_backward_dq_convert_kernel(dtype)};
  return *slot;
}

/// The tuner of one kernel variant (the forward, or a backward pass; dtype, padded head dim,
/// causality), made once.
jit::Autotuner &tunerFor(std::optional<BackwardPass> pass, dsl::DType dtype, int64_t padded, bool causal) {
  static std::mutex mutex;
  static std::map<std::tuple<std::optional<BackwardPass>, dsl::DType, int64_t, bool>, std::unique_ptr<jit::Autotuner>>
      tuners;
  std::lock_guard<std::mutex> lock(mutex);
  auto &slot = tuners[{pass, dtype, padded, causal}];
  if (!slot) {
    const bool queries = pass == BackwardPass::queries;
    const size_t n_q = !pass ? kForwardNq : queries ? kQueriesNq : kKeysValuesNq,
                 batches = !pass ? kForwardBatches : queries ? kQueriesBatches : kKeysValuesBatches;
    jit::Autotuner::Options options;
    options.key_extra = [n_q, batches](const std::vector<dsl::LaunchArg> &args) {
      return detail::attention_tuning_key(args, n_q, batches);
    };
    if (!pass) {
      options.arguments = scheduleForward;
      slot = std::make_unique<jit::Autotuner>(forwardKernel(dtype), attention_forward_configs(padded, causal), options);
    } else {
      options.specialize = [n_q](dsl::Config &config, const std::vector<dsl::LaunchArg> &args) {
        markEvenBlocks(config, args[n_q].integer(), args[n_q + 1].integer());
      };
      // The pass adding dQ sums into its workspace (over batch x heads rows of blocks): each
      // timed run starts from the zeros the delta pass left.
      if (*pass == BackwardPass::keys_values_adding_dq)
        options.restore = [n_q, padded](const std::vector<dsl::LaunchArg> &args) {
          const size_t bytes = size_t(args[kKeysValuesDqAccum + 1].integer()) *
                               detail::dqAccumRowsOf(args[n_q].integer()) * padded * 4;
          return std::vector<std::pair<size_t, size_t>>{{kKeysValuesDqAccum, bytes}};
        };
      slot = std::make_unique<jit::Autotuner>(backwardKernels(dtype)[queries ? 2 : 1],
                                              attention_backward_configs(padded, causal, *pass), options);
    }
  }
  return *slot;
}

/// Whether the TMA can copy these views' blocks: on a Hopper GPU (or the interpreter, which
/// runs any config), 16-byte-aligned addresses and strides that are 1 or multiples of 16.
bool tmaCopies(std::initializer_list<const TensorView *> views) {
  if (!interpreter::enabled() && jit::current_device().major != 9)
    return false;
  for (const TensorView *t : views) {
    if (reinterpret_cast<uintptr_t>(t->data) % 16)
      return false;
    for (int64_t d = 0; d < 3; ++d)
      if (t->stride(d) % 16)
        return false;
  }
  return true;
}

/// Block pointers pay where the TMA copies them (tmaCopies of the tensors the pass reads through
/// them, as the compiler's specialization sees them); elsewhere `config` takes tiles of pointers.
/// `knob`: the one that asks for them (the forward's Q has its own, Q_BLOCK_POINTER).
void blockPointersWhereTheTmaCopies(dsl::Config &config, std::initializer_list<const TensorView *> views,
                                    const char *knob = "BLOCK_POINTERS") {
  if (config.get(knob, 0) && !tmaCopies(views))
    config.set(knob, 0);
}

/// A given config's knobs; PERSISTENT only where `persistent` (the forward passes, dense and
/// block-sparse, whose programs take tiles in turn: elsewhere its grid would leave work undone).
void checkConfig(const dsl::Config &config, int64_t padded, bool causal, const char *space,
                 bool persistent = false) {
  for (const char *name : {"BLOCK_M", "BLOCK_N"}) {
    int64_t v = config.get(name, 0);
    if (v < 16 || (v & (v - 1)))
      fail("config " + config.str() + ": " + name + " must be a power of two of at least 16");
  }
  for (const char *name :
       {"SPLIT_MASKED", "OVERLAP_SOFTMAX", "BLOCK_POINTERS", "Q_BLOCK_POINTER", "PERSISTENT", "QUERIES_IN_ROWS",
        "SKIP_VISIBLE_MASKS", "LAST_PRODUCT_IN_LOOP", "FULL_TILE_STORES",
        "RESCALE_AT_SETTLE"}) {
    int64_t v = config.get(name, 0);
    if (v != 0 && v != 1)
      fail("config " + config.str() + ": " + name + " must be 0 or 1");
  }
  // The forward's masked loop: key blocks of a power of two dividing BLOCK_N; narrower ones
  // only in the plain order (FlashAttention-3's carries one block's P from loop to loop).
  const int64_t bn = config.get("BLOCK_N", 0), masked = config.get("MASKED_BLOCK_N", bn);
  if (masked < 16 || (masked & (masked - 1)) || masked > bn)
    fail("config " + config.str() + ": MASKED_BLOCK_N must be a power of two from 16 to BLOCK_N");
  if (masked < bn && config.get("OVERLAP_SOFTMAX", 0))
    fail("config " + config.str() + ": MASKED_BLOCK_N below BLOCK_N needs OVERLAP_SOFTMAX = 0");
  if (config.get("RESCALE_AT_SETTLE", 0) && !config.get("OVERLAP_SOFTMAX", 0))
    fail("config " + config.str() + ": RESCALE_AT_SETTLE needs OVERLAP_SOFTMAX = 1 (it moves that order's rescale)");
  if (config.get("PERSISTENT", 0) && !persistent)
    fail("config " + config.str() + ": PERSISTENT is only for the forward passes (dense and block-sparse)");
  if (config.get("HEAD_DIM", 0) != padded || config.get("CAUSAL", -1) != (causal ? 1 : 0))
    fail("config " + config.str() + " is not for head_dim " + std::to_string(padded) +
         (causal ? ", causal" : ", not causal") + " (take one of " + space + ")");
}

} // namespace

std::string detail::attention_tuning_key(const std::vector<dsl::LaunchArg> &args, size_t nq, size_t batches) {
  auto rounded = [&](size_t at) { return std::to_string(powerOfTwoAtLeast(args[at].integer())); };
  return "nq" + rounded(nq) + ",nkv" + rounded(nq + 1) + ",bh" +
         std::to_string(powerOfTwoAtLeast(args[batches].integer() * args[nq + 2].integer()));
}

std::vector<dsl::Config> attention_forward_configs(int64_t head_dim, bool causal) {
  checkHeadDim(head_dim, "attention_forward_configs");
  int64_t padded = paddedHeadDim(head_dim);
  // Every warp owns at least 16 whole rows, so that the softmax statistics stay in the warp;
  // the f32 accumulator (BLOCK_M x d) must fit in registers beside the scores (BLOCK_M x
  // BLOCK_N), which from d = 128 on leaves Q to shared memory when a warp owns 32 rows.
  // `load` says how K and V load: 0 tiles of pointers (cp.async), 1 block pointers (the TMA
  // on Hopper where K and V are 16-byte aligned: attention_forward turns them off elsewhere,
  // and the config is then the same on pointers), 2 block pointers with a producer warpgroup
  // issuing the TMA loads (warp_specialize). `programs` programs share an SM's registers
  // (programs_per_sm), as their shared memory allows: two 64-row programs, each one consumer
  // warpgroup beside its producer, overlap one's softmax with the other's dots.
  // Measured on the H200 (B*N = 16k, BHSD, f16, N = 4k-8k): at d = 128 two such 64x64
  // programs an SM beat one 128x64 program of two consumer warpgroups by 1-9% (most with the
  // causal mask); at d <= 64 two 64x128 ones beat 64x64 programs through the TMA without a
  // producer by 5-8%. FlashAttention-3's order (OVERLAP_SOFTMAX) pays where the dots run on
  // Hopper's wgmma: at d <= 64 each warpgroup's softmax otherwise waits on its own QK (ncu: the
  // exponentials' time and the dots' add up), and with it the 64 x 128 programs run 3-9% faster
  // (medians of 30 in 5 interleaved rounds, N = 4096 and 8192, f16 and bf16; a third stage
  // never won: 64 x 128 programs no longer fit two an SM, 64 x 64 ones lose 1-4%). The split
  // into unmasked and masked loops (SPLIT_MASKED) pays with the causal mask (+25% at d <= 64).
  // At d = 128, 128 x 128 blocks on two consumer warpgroups beside a producer (Q in shared
  // memory) issue 8.5 instructions a score where 128 x 64 ones issue 10.4 (the accumulator's
  // rescale is paid once per 128 keys): they won the tuning at N = 4096 and 8192 (f16, N =
  // 8192: 1.624 ms where the first config takes 1.824; causal 0.954).
  // At d = 64 the 128 x 256 blocks on two consumer warpgroups beside a producer, in
  // FlashAttention-3's ping-pong (the warpgroups take turns at their dots), beat the 64 x 128
  // programs two an SM by 8-9%, causal by 2-5% (sustained, H200, f16 N = 4096: 1.185 ms against
  // 1.291, causal 0.696 against 0.707; bf16 N = 8192: 2.212 against 2.427, causal 1.228 against
  // 1.297): a score costs fewer instructions (the rescale and the row reductions are paid once per
  // 256 keys, QK runs as m64n256 wgmma) and one warpgroup's softmax hides under the other's dots.
  // Without the ping-pong the same blocks run no faster than the 64 x 128 programs; 128 x 128
  // blocks, ping-pong or not, gain at most 2%. With the overlapped order (OVERLAP_SOFTMAX) the
  // 128 x 256 blocks spill (with Q in shared memory and the last product in the loop's ring still
  // 104 bytes, and ptxas serializes their wgmma: C7512), and so do they on tiles of pointers (no
  // TMA: other GPUs, unaligned tensors), which is why they come second, after the default that
  // runs well everywhere. With the causal mask their gain is smaller: a 256-key block along the
  // diagonal computes twice the masked scores of a 128-key one, so there the masked loop takes
  // 128-key blocks (MASKED_BLOCK_N): 0.684 ms against 0.702 (f16, N = 4096), 1.218 against 1.231
  // (bf16, N = 8192). Only with the causal mask: without it (the masked loop then runs at most once)
  // the knob cost 7%, as ptxas schedules the unmasked loop beside a narrower masked one differently
  // (no more shared memory than a third stage, which costs nothing).
  // FlashAttention-3's ping-pong on the 128 x 128 blocks at d = 128: on the H200 (N = 4096, f16)
  // as fast as without (0.883 vs 0.877 ms, causal 0.496 vs 0.495; 128 x 64 blocks lose 1-5%), so
  // the tuner decides per GPU and shape. Persistent programs (PERSISTENT) on these configs of one
  // program an SM are not in the space: at d = 128 in ping-pong 0.944 ms against 0.955 in an A/B
  // but 0.975 against 0.969 in the tuner's trials, causal 0.575 against 0.519; the d = 64 128 x
  // 256 blocks 1.251 against 1.186, causal 0.705 against 0.688 (f16, N = 4096). Only with Q
  // too through the producer's TMA (Q_BLOCK_POINTER: a two-stage ring, the next tile's Q loaded
  // while the consumers finish this one) do they gain, and only with the causal mask, whose
  // tiles are short: 0.688 ms against 0.696 and 0.675 against 0.681 in two runs, without the
  // mask 1.276 against 1.195 (A/Bs, f16, N = 4096); bf16 N = 8192 1.216 against 1.198. So with
  // the causal mask the 128 x 256 blocks run that way (persistentIfCausal). Both forms were in
  // that space until 12-05c, and the tuner's final rounds (hot, each run after an L2 flush) read
  // them 0-2% apart and picked either from run to run, while side by side in the head-to-head's
  // protocols the persistent one was faster in every reading at N = 4096 (kernels alone f16
  // 0.642 ms against 0.660, bf16 0.639 against 0.658; sustained 0.679 against 0.697, 0.665
  // against 0.678) and in five of six at N = 8192 (h200-2026-12-05c-pinned-configs). At d = 128
  // the Q ring does not make them pay: 0.923 ms against 0.911, causal 0.539 against 0.502 (12-03i).
  // There each tile pays for its last deferred P @ V (OVERLAP_SOFTMAX) in full: inside the
  // persistent loop the pipeliner does not stage that V through the TMA (it does so only for
  // loads outside every loop), so the consumers load it into registers, convert it through the
  // 32 KB scratch and multiply on mma.sync (sm_90a SASS: 128 HMMA a warp, 76 bytes of spills;
  // 12-04j). A TMA stage for it takes 32 KB of shared memory these 225 KB configs do not have.
  // The kernel knob LAST_PRODUCT_IN_LOOP writes that product as a loop of one block instead,
  // whose V the producer's TMA copies into the ring of the loops' K and V while the masked loop
  // computes: no consumer loads, no stage of its own (the shipped 128 x 128 ping-pong takes
  // 197632 bytes instead of 230400, the persistent one 0 HMMA and no spills in 230400), and
  // every overlapped config of the spaces that had an mma.sync epilogue (the persistent 64-row
  // programs, c3, c5, c9-c12) runs it on wgmma (sm_90a SASS, 12-05).
  // Timed (12-05, sustained, 3 rounds, N = 4096): persistent 128 x 128 ping-pong with the
  // product in the loop's ring takes 0.908 ms against the shipped 0.925 (f16) and 0.883 against
  // 0.896 (bf16); with that V staged for wgmma in the scratch's memory instead (a compiler knob
  // since removed) 0.912 and 0.888; with Q_BLOCK_POINTER 0.930 and 0.900; the plain order 0.993
  // and 0.961. Causal: 0.514 against 0.509 (f16), 0.491 against 0.494 (bf16). So the d = 128
  // space holds it (persistentInLoop), and the tuner decides: in 12-05b's closing table (tuned
  // afresh) it won every unmasked cell (N = 4096 and 8192, f16 and bf16), the causal ones not.
  // Causal persistent programs take the tiles the host plans (causal_schedule), balanced to a
  // light tile where the static order left the busiest program 1.04x the mean work (1.14x at d
  // = 128): f16 N = 4096 d = 64 0.673 ms against 0.688 not persistent; d = 128 0.510 against
  // 0.507, even, so still not in that space (12-04a).
  // With 128-key masked blocks, every other query block's masked loop starts with a block before
  // the diagonal; SKIP_VISIBLE_MASKS skips its mask: causal 0.691 ms against 0.694, persistent
  // 0.681 against 0.690 (f16, N = 4096); bf16 N = 8192 1.220 against 1.226, persistent 1.230
  // against 1.237. Without the causal mask it cost 2-3% (ptxas schedules the loops differently).
  // cuDNN's d = 64 kernel (64 x 128 scores a warpgroup) takes its turns at the exponentials, not
  // the products (ncu's SASS); so does ping_pong = 2. On 128 x 128 blocks it beats turns at the
  // dots by 3-6% (f16 N = 4096 1.300 ms against 1.374, causal 0.728 against 0.746; bf16 N = 8192
  // 2.469 against 2.611), but those stay slower than the 128 x 256 blocks with turns at the dots
  // (1.205, causal 0.682), on which it loses 4-6% (1.252 against 1.201), and 20% at d = 128.
  // The d = 128 blocks of 128 x 128 store O through shared memory (staged_stores): from the
  // accumulator's layout each thread would store 4 bytes at a time, 32 stores of a third
  // wasted sectors (ncu). Staged, the ping-pong takes 0.916 ms against 0.953, without it
  // 0.939 against 0.948, causal 0.508 against 0.522 (A/B, f16, N = 4096). At d = 64 the
  // 128 x 256 blocks gain nothing from it (1.188 against 1.184, causal 0.688 against 0.687), the
  // causal persistent ones neither (12-04c, five A/Bs: 0.671-0.683 ms against 0.677-0.684).
  struct Shape {
    int64_t bm, bn, warps, stages, split, qShared, overlap, load, programs = 1, pingPong = 0, causalMaskedBn = 0,
            stagedStores = 0, persistentIfCausal = 0, persistentInLoop = 0;
  };
  // Built where returned: GCC 12 reads assigning a list to an empty vector as a memmove to null.
  const std::vector<Shape> shapes = [&]() -> std::vector<Shape> {
    if (padded <= 64)
      return {{64, 128, 4, 2, 1, 0, 1, 2, 2},
              {128, 256, 8, 2, 1, 0, 0, 2, 1, 1, 128, 0, 1},
              {64, 64, 4, 2, 1, 0, 1, 2, 3},
              {64, 128, 4, 2, 1, 0, 0, 2, 2},
              {64, 64, 4, 2, 1, 0, 0, 2, 3},
              {64, 64, 4, 3, 1, 0, 0, 1},
              {64, 64, 4, 3, 1, 0, 0, 0},
              {128, 64, 4, 3, 1, 0, 0, 0},
              {128, 64, 4, 3, 0, 0, 0, 0},
              {128, 128, 8, 2, 1, 0, 1, 0},
              {64, 64, 4, 3, 1, 0, 1, 0},
              {128, 64, 8, 3, 1, 0, 1, 0},
              {64, 64, 4, 4, 1, 0, 0, 0},
              {128, 64, 8, 3, 1, 0, 1, 2}};
    if (padded <= 128)
      return {{64, 64, 4, 2, 1, 0, 1, 2, 2}, {64, 64, 4, 2, 1, 0, 0, 2, 2}, {128, 64, 8, 3, 1, 0, 1, 2},
              {128, 64, 8, 3, 1, 0, 1, 0},   {128, 64, 8, 4, 1, 0, 1, 2},   {128, 64, 8, 4, 1, 0, 1, 0},
              {128, 32, 4, 3, 0, 1, 0, 0},   {128, 32, 4, 3, 1, 1, 0, 0},   {128, 64, 4, 2, 0, 1, 0, 0},
              {128, 64, 8, 3, 1, 0, 0, 0},   {64, 64, 4, 3, 1, 0, 0, 0},    {128, 64, 8, 3, 0, 0, 1, 0},
              {128, 128, 8, 2, 0, 1, 1, 0},  {128, 64, 8, 3, 0, 0, 0, 0},   {128, 64, 8, 3, 1, 0, 1, 1},
              {128, 128, 8, 2, 1, 1, 1, 2, 1, 0, 0, 1}, {128, 128, 8, 2, 1, 1, 1, 2, 1, 1, 0, 1},
              {128, 128, 8, 2, 1, 1, 1, 2, 1, 1, 0, 1, 0, 1}};
    return {{64, 32, 4, 2, 0, 1, 0, 0},
            {64, 64, 4, 2, 0, 1, 0, 0},
            {128, 32, 8, 2, 0, 1, 0, 0},
            {64, 32, 4, 2, 0, 0, 0, 0}};
  }();
  std::vector<dsl::Config> configs;
  for (const Shape &shape : shapes) {
    configs.push_back({{"BLOCK_M", shape.bm}, {"BLOCK_N", shape.bn}, {"HEAD_DIM", padded}, {"CAUSAL", causal ? 1 : 0},
                       {"SPLIT_MASKED", shape.split}, {"num_warps", shape.warps}, {"num_stages", shape.stages},
                       {"invariant_operands_in_shared", shape.qShared}, {"OVERLAP_SOFTMAX", shape.overlap}});
    if (shape.load)
      configs.back().set("BLOCK_POINTERS", 1);
    if (shape.load == 2)
      configs.back().set("warp_specialize", 1);
    if (shape.programs > 1)
      configs.back().set("programs_per_sm", shape.programs);
    if (shape.pingPong)
      configs.back().set("ping_pong", 1);
    if (causal && shape.causalMaskedBn) {
      configs.back().set("MASKED_BLOCK_N", shape.causalMaskedBn);
      configs.back().set("SKIP_VISIBLE_MASKS", 1);
    }
    if (shape.stagedStores)
      configs.back().set("staged_stores", 1);
    if (shape.persistentIfCausal && causal) {
      configs.back().set("PERSISTENT", 1);
      configs.back().set("Q_BLOCK_POINTER", 1);
    }
    if (shape.persistentInLoop) {
      configs.back().set("PERSISTENT", 1);
      configs.back().set("LAST_PRODUCT_IN_LOOP", 1);
      // With the causal mask also rescaling at the next block's start (RESCALE_AT_SETTLE, the
      // softmax beside its own P @ V): on an H100 (12-05d, sustained A/B, N = 4096) causal
      // 0.504 ms against 0.515 (f16) and 0.483 against 0.502 (bf16), the fastest of the
      // ping-pong configs in both (the plain ping-pong 0.517, 0.500); f16 N = 8192 0.926
      // against 0.948. Without the mask it loses 2-3% (0.943 against 0.925, bf16 0.908 against
      // 0.891, N = 8192 1.821 against 1.765), as on the 128 x 128 blocks at d = 64 and the
      // 64-row programs (0-3%).
      if (causal)
        configs.back().set("RESCALE_AT_SETTLE", 1);
    }
    // Causal persistent programs add up the row sums' lanes once, after the key loops
    // (defer_lane_sums, FlashAttention-3's order). H100, 12-05h, kernels alone, N = 4096, A/B
    // beside cuDNN: d = 64 0.615 ms against 0.640 (f16), 0.618 against 0.644 (bf16); d = 128
    // 0.456 against 0.461. Without the mask the d = 64 128 x 256 blocks lose with it (f16 1.129
    // against 1.094), so there the lanes add up in the loop.
    if (causal && configs.back().get("PERSISTENT", 0))
      configs.back().set("defer_lane_sums", 1);
  }
  return configs;
}

bool ping_pong_applies(const dsl::Config &config) {
  return config.get("warp_specialize", 0) != 0 && config.get("num_warps", 4) == 8;
}

std::vector<dsl::Config> attention_backward_configs(int64_t head_dim, bool causal, BackwardPass pass) {
  checkHeadDim(head_dim, "attention_backward_configs");
  int64_t padded = paddedHeadDim(head_dim);
  // dK/dV adding dQ (ATOMIC_DQ): its configs, where the dQ tile (BLOCK_M x d f32) staged in
  // shared memory beside the rings fits (at d = 256, blocks of up to 32 rows).
  if (pass == BackwardPass::keys_values_adding_dq) {
    std::vector<dsl::Config> configs;
    for (dsl::Config config : attention_backward_configs(head_dim, causal, BackwardPass::keys_values))
      if (config["BLOCK_M"] * padded <= 32 * 256) {
        config.set("ATOMIC_DQ", 1);
        configs.push_back(config);
      }
    // FA3's shape: 64 query rows, 128 keys on two consumer warpgroups beside the producer; dQ's
    // product [64, d] then runs on wgmma, its columns split between the warpgroups. Also with
    // the scores [queries, keys] as FA3 has them (QUERIES_IN_ROWS; H200, N = 8192, tuner's
    // trials: 4.92 vs 5.32 ms once P^T's barriers span a warpgroup, causal 2.76 vs 2.78). At
    // d = 64 each warpgroup's dQ columns lie within half a 128-byte swizzle atom of K's stage;
    // there also FA3's 128 query rows (scores [queries, keys]: 23% fewer instructions a score;
    // its 227 KB of shared memory fit once the empty barriers took an alignment gap).
    std::vector<std::pair<int64_t, int64_t>> shapes; // (BLOCK_M, QUERIES_IN_ROWS)
    if (padded == 64 || padded == 128)
      shapes = {{64, 0}, {64, 1}};
    if (padded == 64)
      shapes.push_back({128, 1});
    for (auto [rows, queries_in_rows] : shapes)
      configs.push_back({{"BLOCK_M", rows}, {"BLOCK_N", 128}, {"HEAD_DIM", padded}, {"CAUSAL", causal ? 1 : 0},
                         {"num_warps", 8}, {"num_stages", 2}, {"invariant_operands_in_shared", 1},
                         {"BLOCK_POINTERS", 1}, {"warp_specialize", 1}, {"ATOMIC_DQ", 1},
                         {"QUERIES_IN_ROWS", queries_in_rows}});
    return configs;
  }
  // (BLOCK_M, BLOCK_N, warps, stages, K/V or Q/dO in shared memory). The chained dots keep
  // each warp on 16 whole rows of the program's block (keys for dK/dV, queries for dQ) with
  // two f32 accumulators of those rows x d; the other block (BLOCK_M query rows per step of
  // dK/dV) sets the size of the score tiles beside them, small at large d to avoid spilling.
  // At d = 256, dK/dV's 8 warps split columns too.
  std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>> shapes;
  if (pass == BackwardPass::keys_values) {
    if (padded <= 64)
      shapes = {{32, 64, 4, 2, 0}, {64, 64, 4, 2, 0}, {64, 128, 8, 2, 0}, {32, 128, 8, 3, 0}, {64, 64, 4, 3, 0}};
    else if (padded <= 128)
      shapes = {{32, 64, 4, 2, 1}, {16, 64, 4, 2, 1}, {32, 128, 8, 2, 1}, {16, 128, 8, 3, 1}, {64, 64, 4, 2, 1},
                {32, 64, 4, 3, 1}};
    else
      shapes = {{64, 64, 8, 2, 1}, {32, 64, 8, 2, 1}, {16, 64, 8, 2, 1}};
  } else {
    if (padded <= 64)
      shapes = {{64, 64, 4, 2, 0}, {64, 32, 4, 2, 0}, {128, 64, 8, 2, 0}, {64, 128, 4, 2, 0}, {64, 64, 4, 3, 0}};
    else if (padded <= 128)
      shapes = {{64, 64, 4, 2, 1}, {64, 32, 4, 2, 1}, {128, 64, 8, 2, 1}, {64, 64, 4, 3, 1}, {128, 32, 8, 3, 1}};
    else
      shapes = {{64, 32, 4, 2, 1}, {64, 64, 4, 2, 1}, {64, 16, 4, 2, 1}, {128, 32, 8, 2, 1}};
  }
  std::vector<dsl::Config> configs;
  for (auto [bm, bn, warps, stages, shared] : shapes)
    configs.push_back({{"BLOCK_M", bm}, {"BLOCK_N", bn}, {"HEAD_DIM", padded}, {"CAUSAL", causal ? 1 : 0},
                       {"num_warps", warps}, {"num_stages", stages}, {"invariant_operands_in_shared", shared}});
  // dQ's K and V, and dK/dV's Q and dO, also through block pointers (the TMA on Hopper;
  // attention_backward turns them off where it cannot copy): on 4 warps, and on 8 beside a
  // producer warpgroup issuing the loads, and on 4 beside one with two programs an SM.
  if (padded <= 128) {
    const bool queries = pass == BackwardPass::queries;
    for (auto [rows, warps, specialize, programs] :
         {std::tuple{64, 4, 0, 1}, std::tuple{128, 8, 1, 1}, std::tuple{64, 4, 1, 2}}) {
      configs.push_back({{"BLOCK_M", queries ? rows : (padded > 64 ? 32 : 64)}, {"BLOCK_N", queries ? 64 : rows},
                         {"HEAD_DIM", padded}, {"CAUSAL", causal ? 1 : 0}, {"num_warps", warps}, {"num_stages", 2},
                         {"invariant_operands_in_shared", padded > 64 ? 1 : 0}, {"BLOCK_POINTERS", 1}});
      if (specialize)
        configs.back().set("warp_specialize", 1);
      if (programs > 1)
        configs.back().set("programs_per_sm", programs);
    }
    // dK/dV's best shape on tiles of pointers at d = 128, through the TMA (H200, N = 8192:
    // 4.15 vs 4.56 ms, causal 1.98 vs 2.28).
    if (!queries && padded > 64)
      configs.push_back({{"BLOCK_M", 64}, {"BLOCK_N", 64}, {"HEAD_DIM", padded}, {"CAUSAL", causal ? 1 : 0},
                         {"num_warps", 4}, {"num_stages", 2}, {"invariant_operands_in_shared", 1},
                         {"BLOCK_POINTERS", 1}});
  }
  // With the causal mask, dK/dV's blocks the diagonal crosses in a loop of their own and dQ's
  // key blocks left of it in a loop without a mask, the rest without one (SPLIT_MASKED, as in
  // the forward; the pass adding dQ ignores it).
  if (pass != BackwardPass::keys_values_adding_dq && causal)
    for (dsl::Config &config : configs)
      config.set("SPLIT_MASKED", 1);
  return configs;
}

/// The delta pass (a row sum, memory-bound): 64 rows a program.
dsl::Config deltaConfig(int64_t padded) { return {{"BLOCK_M", 64}, {"HEAD_DIM", padded}, {"num_warps", 4}}; }

/// A dense pass's config for block-sparse masks of mask_bm x mask_bn: its blocks no larger
/// than the mask's, its warps no more than the rows (rowsKey) they own; the mask's sizes in.
dsl::Config forMask(dsl::Config config, int64_t mask_bm, int64_t mask_bn, const char *rowsKey) {
  config.set("BLOCK_M", std::min(config["BLOCK_M"], mask_bm));
  config.set("BLOCK_N", std::min(config["BLOCK_N"], mask_bn));
  config.set("num_warps", std::max<int64_t>(1, std::min(config["num_warps"], config[rowsKey] / 16)));
  config.set("MASK_BLOCK_M", mask_bm);
  config.set("MASK_BLOCK_N", mask_bn);
  return config;
}

/// The config spaces of block-sparse attention's three kernels (forward, dK/dV, dQ) for masks
/// of mask_bm x mask_bn: the dense passes' spaces fitted to the mask's blocks, the first of
/// each the default.
std::array<std::vector<dsl::Config>, 3> sparseSpaces(int64_t padded, int64_t mask_bm, int64_t mask_bn) {
  std::array<std::vector<dsl::Config>, 3> spaces;
  auto add = [](std::vector<dsl::Config> &space, const dsl::Config &config) {
    // (ping-pong needs the two consumer warpgroups that blocks of 128 rows have)
    if (config.get("ping_pong", 0) && !ping_pong_applies(config))
      return;
    if (std::none_of(space.begin(), space.end(), [&](const dsl::Config &c) { return c.str() == config.str(); }))
      space.push_back(config);
  };
  for (dsl::Config forward : attention_forward_configs(padded, false)) {
    forward.set("SPLIT_MASKED", 0); // the kernel has its own split: full and partial blocks
    // The plain order first: with few blocks a row, FlashAttention-3's order costs more (a
    // product before the first block and after the last of each list) than it hides (H200).
    dsl::Config plain = forward;
    plain.set("OVERLAP_SOFTMAX", 0);
    add(spaces[0], forMask(plain, mask_bm, mask_bn, "BLOCK_M"));
    add(spaces[0], forMask(forward, mask_bm, mask_bn, "BLOCK_M"));
    // Persistent programs in the plain order, where a producer loads the next tile's first
    // blocks while the consumers finish this one: with few blocks a row (H200, 128 x 128, a
    // sliding window of 1024 at N = 8192) 4% faster; with many, or FlashAttention-3's order,
    // slower (the tuner keeps those).
    if (plain.get("warp_specialize", 0)) {
      plain.set("PERSISTENT", 1);
      add(spaces[0], forMask(plain, mask_bm, mask_bn, "BLOCK_M"));
    }
  }
  // The backward passes' configs, each also through block pointers (the TMA) where the dense
  // space has it only on tiles of pointers.
  auto addBoth = [&](std::vector<dsl::Config> &space, dsl::Config config, const char *rowsKey) {
    add(space, forMask(config, mask_bm, mask_bn, rowsKey));
    config.set("BLOCK_POINTERS", 1);
    add(space, forMask(config, mask_bm, mask_bn, rowsKey));
  };
  for (const dsl::Config &config : attention_backward_configs(padded, false, BackwardPass::keys_values))
    addBoth(spaces[1], config, "BLOCK_N");
  for (const dsl::Config &config : attention_backward_configs(padded, false, BackwardPass::queries))
    addBoth(spaces[2], config, "BLOCK_M");
  return spaces;
}

std::array<dsl::Config, 3> sparseDefaults(int64_t padded, int64_t mask_bm, int64_t mask_bn) {
  auto spaces = sparseSpaces(padded, mask_bm, mask_bn);
  return {spaces[0].front(), spaces[1].front(), spaces[2].front()};
}

std::vector<dsl::Config> block_sparse_forward_configs(int64_t head_dim, const BlockMask &mask) {
  return sparseSpaces(paddedHeadDim(head_dim), mask.block_m(), mask.block_n())[0];
}

std::vector<dsl::Config> block_sparse_backward_configs(int64_t head_dim, const BlockMask &mask, BackwardPass pass) {
  if (pass == BackwardPass::keys_values_adding_dq)
    throw Error("block_sparse_backward_configs: block-sparse attention has no dK/dV pass adding dQ "
                "(keys_values_adding_dq); its passes are keys_values and queries");
  const size_t space = pass == BackwardPass::keys_values ? 1 : 2;
  return sparseSpaces(paddedHeadDim(head_dim), mask.block_m(), mask.block_n())[space];
}

std::vector<ShippedKernel> shipped_kernels() {
  std::vector<ShippedKernel> kernels;
  // Block-sparse attention plain, and with modifiers of each kind (a mask and a score read
  // from tensors, tanh), at the default 128x128 mask blocks.
  Modifiers sample;
  sample.mask_mod = [](const dsl::Tile &b, const dsl::Tile &, const dsl::Tile &q, const dsl::Tile &kv,
                       const dsl::Tile &documents) {
    return dsl::load(documents + b * 4096 + q) == dsl::load(documents + b * 4096 + kv) && kv <= q;
  };
  sample.score_mod = [](const dsl::Tile &s, const dsl::Tile &, const dsl::Tile &, const dsl::Tile &q,
                        const dsl::Tile &kv, const dsl::Tile &bias) {
    return 30.0 * dsl::tanh(s / 30.0) + dsl::load(bias + (kv - q + 4095));
  };
  sample.score_mod_grad = [](const dsl::Tile &s, const dsl::Tile &, const dsl::Tile &, const dsl::Tile &,
                             const dsl::Tile &, const dsl::Tile &) {
    dsl::Tile t = dsl::tanh(s / 30.0);
    return 1.0 - t * t;
  };
  kernels.push_back({detail::block_mask_states_kernel(sample.mask_mod),
                     {{"BLOCK_M", 128}, {"BLOCK_N", 128}, {"num_warps", 4}}, "documents"});
  for (dsl::DType dtype : {dsl::DType::f16, dsl::DType::bf16})
    for (int64_t padded : {64, 128})
      for (bool modified : {false, true}) {
        std::string variant = dsl::to_string(dtype) + ".d" + std::to_string(padded) + (modified ? ".modified" : "");
        std::array<dsl::Config, 3> configs = sparseDefaults(padded, 128, 128);
        kernels.push_back({detail::block_sparse_forward_kernel(dtype, modified ? sample : Modifiers{}), configs[0],
                           variant});
        dsl::Config persistent = configs[0]; // and with PERSISTENT (it has a producer warpgroup)
        persistent.set("PERSISTENT", 1);
        kernels.push_back({detail::block_sparse_forward_kernel(dtype, modified ? sample : Modifiers{}), persistent,
                           variant + ".persistent"});
        kernels.push_back({detail::block_sparse_backward_dkdv_kernel(dtype, modified ? sample : Modifiers{}),
                           configs[1], variant});
        kernels.push_back({detail::block_sparse_backward_dq_kernel(dtype, modified ? sample : Modifiers{}),
                           configs[2], variant});
      }
  for (dsl::DType dtype : {dsl::DType::f16, dsl::DType::bf16})
    for (int64_t padded : {32, 64, 128, 256})
      for (bool causal : {false, true}) {
        std::string variant = dsl::to_string(dtype) + ".d" + std::to_string(padded) + (causal ? ".causal" : "");
        std::vector<dsl::Config> configs = attention_forward_configs(padded, causal);
        if (configs[0].get("warp_specialize", 0)) { // and with PERSISTENT, a knob outside the space
          dsl::Config persistent = configs[0];
          persistent.set("PERSISTENT", 1);
          kernels.push_back({forwardKernel(dtype), persistent, variant + ".persistent"});
        }
        if (configs[0].get("OVERLAP_SOFTMAX", 0)) { // and with RESCALE_AT_SETTLE, another
          dsl::Config settling = configs[0];
          settling.set("RESCALE_AT_SETTLE", 1);
          kernels.push_back({forwardKernel(dtype), settling, variant + ".rescale_at_settle"});
        }
        for (size_t i = 0; i < configs.size(); ++i) {
          kernels.push_back({forwardKernel(dtype), configs[i], variant + (i ? ".c" + std::to_string(i) : "")});
          // And with ping-pong wherever it applies, unless the space holds that config already.
          dsl::Config pingPong = configs[i];
          pingPong.set("ping_pong", 1);
          if (ping_pong_applies(configs[i]) && std::find(configs.begin(), configs.end(), pingPong) == configs.end()) {
            kernels.push_back({forwardKernel(dtype), pingPong, variant + ".c" + std::to_string(i) + ".ping_pong"});
          }
        }
        const auto &backward = backwardKernels(dtype);
        if (!causal) {
          kernels.push_back({backward[0], deltaConfig(padded), variant});
          kernels.push_back({backward[3], deltaConfig(padded), variant});
        }
        // The dK/dV pass adding dQ: every config where the library takes it by default (d =
        // 128), the first elsewhere; those and each pass's first config also at lengths that
        // are whole blocks (EVEN_BLOCKS), as the tuner times them there.
        auto withEven = [&](const dsl::Kernel &kernel, dsl::Config config, const std::string &name, bool even) {
          kernels.push_back({kernel, config, name});
          if (even) {
            markEvenBlocks(config, config["BLOCK_M"], config["BLOCK_N"]);
            kernels.push_back({kernel, config, name + ".even"});
          }
        };
        std::vector<dsl::Config> adding = attention_backward_configs(padded, causal, BackwardPass::keys_values_adding_dq);
        for (size_t i = 0; i < (padded == 128 ? adding.size() : 1); ++i)
          withEven(backward[1], adding[i], variant + ".atomic_dq" + (i ? ".c" + std::to_string(i) : ""), true);
        for (BackwardPass pass : {BackwardPass::keys_values, BackwardPass::queries}) {
          std::vector<dsl::Config> passConfigs = attention_backward_configs(padded, causal, pass);
          for (size_t i = 0; i < passConfigs.size(); ++i)
            withEven(backward[pass == BackwardPass::keys_values ? 1 : 2], passConfigs[i],
                     variant + (i ? ".c" + std::to_string(i) : ""), i == 0);
        }
      }
  return kernels;
}

namespace {

using Named = std::pair<const char *, const TensorView *>;

/// The sizes of an attention problem, checked from the views of the forward pass.
struct Problem {
  int64_t batch, n_q, n_kv, heads_q, heads_kv, head_dim;
};

Problem checkProblem(const TensorView &q, const TensorView &k, const TensorView &v, const TensorView &o,
                     const TensorView &lse) {
  checkView("q", q, 4);
  checkView("k", k, 4);
  checkView("v", v, 4);
  checkView("o", o, 4);
  checkView("lse", lse, 3);
  if (q.dtype != dsl::DType::f16 && q.dtype != dsl::DType::bf16)
    fail("q must be f16 or bf16, got " + dsl::to_string(q.dtype));
  for (auto [name, t] : {Named{"k", &k}, {"v", &v}, {"o", &o}})
    if (t->dtype != q.dtype)
      fail(std::string(name) + " is " + dsl::to_string(t->dtype) + " but q is " + dsl::to_string(q.dtype));
  if (lse.dtype != dsl::DType::f32)
    fail("lse must be f32, got " + dsl::to_string(lse.dtype));

  Problem p{q.shape[0], q.shape[1], k.shape[1], q.shape[2], k.shape[2], q.shape[3]};
  if (k.shape != v.shape)
    fail("k " + shapeStr(k.shape) + " and v " + shapeStr(v.shape) + " differ");
  if (k.shape[0] != p.batch || k.shape[3] != p.head_dim)
    fail("k " + shapeStr(k.shape) + " does not match q " + shapeStr(q.shape) + " in batch or head_dim");
  if (o.shape != q.shape)
    fail("o " + shapeStr(o.shape) + " must have q's shape " + shapeStr(q.shape));
  if (lse.shape != std::vector<int64_t>{p.batch, p.heads_q, p.n_q})
    fail("lse " + shapeStr(lse.shape) + " must be [batch, heads_q, n_q] = " + shapeStr({p.batch, p.heads_q, p.n_q}));
  if (lse.stride(2) != 1 || lse.stride(1) != p.n_q || lse.stride(0) != p.heads_q * p.n_q)
    fail("lse must be contiguous");
  if (p.heads_kv == 0 || p.heads_q % p.heads_kv)
    fail("heads_q (" + std::to_string(p.heads_q) + ") must be a multiple of heads_kv (" + std::to_string(p.heads_kv) + ")");
  checkHeadDim(p.head_dim, api);
  if (p.n_q > INT32_MAX || p.n_kv > INT32_MAX)
    fail("sequence lengths must be below 2^31");
  if (p.batch * p.heads_q > 65535)
    fail("batch*heads_q = " + std::to_string(p.batch * p.heads_q) + " is above 65535, which is not supported yet");
  return p;
}

/// The softmax scale, default 1/sqrt(head_dim); positive, as the kernels take each row's max
/// of the raw scores and scale it once (a multiply the exponent's FMA absorbs).
double checkedScale(const std::optional<double> &scale, int64_t head_dim) {
  if (scale && !(std::isfinite(*scale) && *scale > 0))
    fail("scale must be positive and finite, got " + std::to_string(*scale));
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
}

/// Each written view must not overlap any other view.
void checkWritten(std::initializer_list<Named> written, std::initializer_list<Named> read) {
  for (auto [name, t] : written) {
    for (auto [other, u] : read)
      checkDisjoint(name, *t, other, *u);
    for (auto [other, u] : written)
      if (t != u && std::string(name) < other)
        checkDisjoint(name, *t, other, *u);
  }
}

/// Makes the GPU that holds every non-empty view current for the guard's lifetime; bad input
/// when a pointer is not device memory or the views are on different GPUs.
void guardDevice(std::optional<jit::DeviceGuard> &guard, std::initializer_list<Named> views) {
  if (interpreter::enabled())
    return;
  int device = -1;
  const char *first = nullptr;
  for (auto [name, t] : views) {
    if (t->numel() == 0)
      continue;
    int here = jit::device_of(t->data);
    if (here < 0)
      fail(std::string(name) + " is marked CUDA but its pointer is not device memory");
    if (first && here != device)
      fail(std::string(name) + " is on GPU " + std::to_string(here) + " but " + first + " on GPU " +
           std::to_string(device));
    device = here, first = first ? first : name;
  }
  if (device >= 0)
    guard.emplace(device);
}

} // namespace

void attention_forward(const TensorView &q, const TensorView &k, const TensorView &v, const TensorView &o,
                       const TensorView &lse, const AttentionOptions &options, void *stream) {
  api = "attention_forward";
  const Problem p = checkProblem(q, k, v, o, lse);
  const int64_t batch = p.batch, n_q = p.n_q, n_kv = p.n_kv, heads_q = p.heads_q, heads_kv = p.heads_kv,
                head_dim = p.head_dim;
  checkWritten({{"o", &o}, {"lse", &lse}}, {{"q", &q}, {"k", &k}, {"v", &v}});
  const double scale = checkedScale(options.scale, head_dim);
  const int64_t padded = paddedHeadDim(head_dim);
  if (options.config)
    checkConfig(*options.config, padded, options.causal, "attention_forward_configs", true);
  std::optional<jit::DeviceGuard> onTheirGpu;
  guardDevice(onTheirGpu, {{"q", &q}, {"k", &k}, {"v", &v}, {"o", &o}, {"lse", &lse}});
  if (o.numel() == 0)
    return;

  std::vector<dsl::LaunchArg> args{q.data, k.data, v.data, o.data, lse.data, n_q, n_kv, heads_q,
                                   heads_q / heads_kv, head_dim, q.stride(0), q.stride(1), q.stride(2),
                                   k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1),
                                   v.stride(2), o.stride(0), o.stride(1), o.stride(2), static_cast<float>(scale),
                                   batch, heads_kv, nullptr};
  const jit::GridFn grid = blockGrid(n_q, "BLOCK_M", batch * heads_q);
  dsl::Config config = options.config           ? *options.config
                       : interpreter::enabled() ? attention_forward_configs(padded, options.causal).front()
                                                : tunerFor(std::nullopt, q.dtype, padded, options.causal).config_for(grid, args);
  blockPointersWhereTheTmaCopies(config, {&k, &v});
  blockPointersWhereTheTmaCopies(config, {&q}, "Q_BLOCK_POINTER"); // (only with BLOCK_POINTERS)
  scheduleForward(config, args);
  forwardKernel(q.dtype).launch_args(stream, grid(config), config, args.data(), args.size());
}

namespace {

/// The backward's views: the forward's, dout like o, gradients like their inputs, nothing
/// written that is read, all on one GPU (made current by `guard`).
Problem checkBackward(const TensorView &q, const TensorView &k, const TensorView &v, const TensorView &o,
                      const TensorView &lse, const TensorView &dout, const TensorView &dq, const TensorView &dk,
                      const TensorView &dv, std::optional<jit::DeviceGuard> &guard) {
  const Problem p = checkProblem(q, k, v, o, lse);
  checkView("dout", dout, 4);
  checkView("dq", dq, 4);
  checkView("dk", dk, 4);
  checkView("dv", dv, 4);
  for (auto [name, t, like, likeName] : {std::tuple<const char *, const TensorView *, const TensorView *, const char *>{
                                             "dout", &dout, &o, "o"},
                                         {"dq", &dq, &q, "q"},
                                         {"dk", &dk, &k, "k"},
                                         {"dv", &dv, &v, "v"}}) {
    if (t->shape != like->shape)
      fail(std::string(name) + " " + shapeStr(t->shape) + " must have " + likeName + "'s shape " + shapeStr(like->shape));
    if (t->dtype != q.dtype)
      fail(std::string(name) + " is " + dsl::to_string(t->dtype) + " but q is " + dsl::to_string(q.dtype));
  }
  checkWritten({{"dq", &dq}, {"dk", &dk}, {"dv", &dv}},
               {{"q", &q}, {"k", &k}, {"v", &v}, {"o", &o}, {"lse", &lse}, {"dout", &dout}});
  guardDevice(guard, {{"q", &q}, {"k", &k}, {"v", &v}, {"o", &o}, {"lse", &lse}, {"dout", &dout}, {"dq", &dq},
                      {"dk", &dk}, {"dv", &dv}});
  return p;
}

/// Whether adding dQ in the dK/dV pass beats the two passes, as measured on the H200 (f16,
/// N = 8192, tuned, same run): at head dims padded to 64 or 128 with the TMA, where two
/// consumer warpgroups run all five products on wgmma (d = 128: 5.28 vs 6.33 ms, causal 2.88
/// vs 3.27; d = 64: 6.26 vs 7.39, causal 3.30 vs 3.78, since dQ's [64, 64] product runs on
/// wgmma too and 128-row blocks fit: 8.11 vs 7.10 while it fell back to mma.sync), not on
/// mma.sync alone (d = 128: 8.25 vs 7.70). The interpreter takes it wherever allowed (it runs any config).
bool addingDqPays(int64_t padded, const TensorView &q, const TensorView &dout) {
  return interpreter::enabled() || ((padded == 64 || padded == 128) && tmaCopies({&q, &dout}));
}

/// delta = rowsum(dO * O) per query row, into a stream-ordered workspace; where given, the
/// dQ workspace's rows (detail::kDqAccumRows) zeroed too.
jit::DeviceBuffer launchDelta(const Problem &p, const TensorView &o, const TensorView &dout, void *stream,
                              void *dqAccum = nullptr) {
  jit::DeviceBuffer delta(std::max<int64_t>(4, p.batch * p.heads_q * p.n_q * 4), stream);
  dsl::Config config = deltaConfig(paddedHeadDim(p.head_dim));
  if (dqAccum)
    config.set("ZERO_DQ_ACCUM", 1);
  if (p.n_q > 0)
    backwardKernels(o.dtype)[0].launch_on(stream, blockGrid(p.n_q, "BLOCK_M", p.batch * p.heads_q)(config), config,
                                          o.data, dout.data, delta.data(), dqAccum, p.n_q, p.heads_q, p.head_dim,
                                          o.stride(0), o.stride(1), o.stride(2), dout.stride(0), dout.stride(1),
                                          dout.stride(2));
  return delta;
}

} // namespace

void attention_backward(const TensorView &q, const TensorView &k, const TensorView &v, const TensorView &o,
                        const TensorView &lse, const TensorView &dout, const TensorView &dq, const TensorView &dk,
                        const TensorView &dv, const AttentionOptions &options, void *stream) {
  api = "attention_backward";
  std::optional<jit::DeviceGuard> onTheirGpu;
  const Problem p = checkBackward(q, k, v, o, lse, dout, dq, dk, dv, onTheirGpu);
  const auto scale = static_cast<float>(checkedScale(options.scale, p.head_dim));
  const int64_t padded = paddedHeadDim(p.head_dim), group = p.heads_q / p.heads_kv;
  if (options.keys_values_config)
    checkConfig(*options.keys_values_config, padded, options.causal, "attention_backward_configs(keys_values)");
  if (options.queries_config)
    checkConfig(*options.queries_config, padded, options.causal, "attention_backward_configs(queries)");
  if (dk.numel() == 0 && dq.numel() == 0)
    return;

  const auto &kernels = backwardKernels(q.dtype);
  // Non-deterministic: dQ summed in f32 by the dK/dV pass's bulk adds, zeroed by the delta pass,
  // with a given dK/dV config, or where that beats the two passes (addingDqPays).
  const bool atomicDq = !options.deterministic && dq.numel() > 0 &&
                        (options.keys_values_config || addingDqPays(padded, q, dout));
  jit::DeviceBuffer dqAccum;
  if (atomicDq)
    dqAccum = jit::DeviceBuffer(p.batch * p.heads_q * detail::dqAccumRowsOf(p.n_q) * padded * 4, stream);
  jit::DeviceBuffer delta = launchDelta(p, o, dout, stream, atomicDq ? dqAccum.data() : nullptr);
  // Each pass with its given, default (untuned, interpreted) or tuned config.
  auto launch = [&](BackwardPass pass, const std::optional<dsl::Config> &given, const dsl::Kernel &kernel,
                    std::vector<dsl::LaunchArg> args, int64_t rows, const char *block, int64_t programsPerRow) {
    const jit::GridFn grid = blockGrid(rows, block, programsPerRow);
    const bool keysValues = pass != BackwardPass::queries;
    dsl::Config config = given                    ? *given
                         : interpreter::enabled() ? attention_backward_configs(padded, options.causal, pass).front()
                                                  : tunerFor(pass, q.dtype, padded, options.causal).config_for(grid, args);
    markEvenBlocks(config, p.n_q, p.n_kv);
    if (keysValues) {
      // The pass decides whether dQ is added, whatever a given config (from either space) says.
      config.set("ATOMIC_DQ", pass == BackwardPass::keys_values_adding_dq ? 1 : 0);
      blockPointersWhereTheTmaCopies(config, {&q, &dout}); // dK/dV reads Q and dO through them
    } else {
      blockPointersWhereTheTmaCopies(config, {&k, &v}); // dQ K and V
    }
    kernel.launch_args(stream, grid(config), config, args.data(), args.size());
  };
  const std::vector<dsl::LaunchArg> strides{q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1),
                                            k.stride(2), v.stride(0), v.stride(1), v.stride(2), dout.stride(0),
                                            dout.stride(1), dout.stride(2)};
  auto withStrides = [&](std::vector<dsl::LaunchArg> head, std::initializer_list<dsl::LaunchArg> tail) {
    head.insert(head.end(), strides.begin(), strides.end());
    head.insert(head.end(), tail);
    return head;
  };
  if (dk.numel() > 0)
    launch(atomicDq ? BackwardPass::keys_values_adding_dq : BackwardPass::keys_values, options.keys_values_config,
           kernels[1],
           withStrides({q.data, k.data, v.data, dout.data, lse.data, delta.data(), dk.data, dv.data, p.n_q, p.n_kv,
                        p.heads_q, group, p.head_dim},
                       {dk.stride(0), dk.stride(1), dk.stride(2), dv.stride(0), dv.stride(1), dv.stride(2), scale,
                        p.batch, dqAccum.data(), p.batch * p.heads_q}),
           p.n_kv, "BLOCK_N", p.batch * p.heads_kv);
  if (atomicDq) {
    const dsl::Config config = deltaConfig(padded);
    if (p.n_q > 0)
      kernels[3].launch_on(stream, blockGrid(p.n_q, "BLOCK_M", p.batch * p.heads_q)(config), config, dqAccum.data(),
                           dq.data, p.n_q, p.heads_q, p.head_dim, dq.stride(0), dq.stride(1), dq.stride(2), scale);
  } else if (dq.numel() > 0)
    launch(BackwardPass::queries, options.queries_config, kernels[2],
           withStrides({q.data, k.data, v.data, dout.data, lse.data, delta.data(), dq.data, p.n_q, p.n_kv, p.heads_q,
                        group, p.head_dim},
                       {dq.stride(0), dq.stride(1), dq.stride(2), scale, p.batch, p.heads_kv}),
           p.n_q, "BLOCK_M", p.batch * p.heads_q);
}

struct BlockSparseAttention::Compiled {
  explicit Compiled(const Modifiers &m)
      : scoreMod(bool(m.score_mod)), scoreModGrad(bool(m.score_mod_grad)),
        forward{detail::block_sparse_forward_kernel(dsl::DType::f16, m),
                detail::block_sparse_forward_kernel(dsl::DType::bf16, m)},
        keysValues{detail::block_sparse_backward_dkdv_kernel(dsl::DType::f16, m),
                   detail::block_sparse_backward_dkdv_kernel(dsl::DType::bf16, m)},
        queries{detail::block_sparse_backward_dq_kernel(dsl::DType::f16, m),
                detail::block_sparse_backward_dq_kernel(dsl::DType::bf16, m)} {}
  bool scoreMod, scoreModGrad;
  dsl::Kernel forward[2], keysValues[2], queries[2]; // f16, bf16

  /// The config of `pass` (0 forward, 1 dK/dV, 2 dQ) for these arguments: the given one
  /// (already checked against the mask), the default when interpreted, otherwise tuned per
  /// dtype, head dim, mask block size, problem size (attention_tuning_key) and blocks a program
  /// visits (its mask row's, on average) rounded to a power of two: a few blocks a row want
  /// other configs than many.
  dsl::Config configFor(int pass, const std::optional<dsl::Config> &given, bool bf16, int64_t padded,
                        const BlockMask &mask, const jit::GridFn &grid, const std::vector<dsl::LaunchArg> &args,
                        size_t nqArgument, size_t batchesArgument);

private:
  std::mutex mutex;
  std::map<std::tuple<int, bool, int64_t, int64_t, int64_t, int64_t>, std::unique_ptr<jit::Autotuner>> tuners;
};

BlockSparseAttention::BlockSparseAttention(Modifiers modifiers) : compiled_(new Compiled(modifiers)) {}

BlockSparseAttention::~BlockSparseAttention() = default;

namespace {

void checkMask(const BlockMask &mask, const Problem &p) {
  if (mask.batch() != p.batch || mask.n_q() != p.n_q || mask.n_kv() != p.n_kv ||
      (mask.heads() != 1 && mask.heads() != p.heads_q))
    fail("the block mask is for batch " + std::to_string(mask.batch()) + ", " + std::to_string(mask.heads()) +
         " heads, n_q " + std::to_string(mask.n_q()) + ", n_kv " + std::to_string(mask.n_kv()) +
         "; the inputs have batch " + std::to_string(p.batch) + ", heads_q " + std::to_string(p.heads_q) +
         ", n_q " + std::to_string(p.n_q) + ", n_kv " + std::to_string(p.n_kv) + " (mask heads must be 1 or heads_q)");
}

/// A pass's given config (none if none) checked against the mask, with the mask's block sizes
/// (PERSISTENT where `persistent`: the forward's).
std::optional<dsl::Config> sparseConfig(const std::optional<dsl::Config> &given, const BlockMask &mask,
                                        int64_t padded, const char *space, bool persistent = false) {
  if (!given)
    return std::nullopt;
  checkConfig(*given, padded, false, space, persistent);
  if (mask.block_m() % (*given)["BLOCK_M"] || mask.block_n() % (*given)["BLOCK_N"])
    fail("config " + given->str() + ": BLOCK_M and BLOCK_N must divide the mask's blocks " +
         std::to_string(mask.block_m()) + "x" + std::to_string(mask.block_n()));
  dsl::Config config = *given;
  config.set("SPLIT_MASKED", 0);
  config.set("MASK_BLOCK_M", mask.block_m());
  config.set("MASK_BLOCK_N", mask.block_n());
  return config;
}

} // namespace

dsl::Config BlockSparseAttention::Compiled::configFor(int pass, const std::optional<dsl::Config> &given, bool bf16,
                                                      int64_t padded, const BlockMask &mask, const jit::GridFn &grid,
                                                      const std::vector<dsl::LaunchArg> &args, size_t nqArgument,
                                                      size_t batchesArgument) {
  if (given)
    return *given;
  if (interpreter::enabled())
    return sparseDefaults(padded, mask.block_m(), mask.block_n())[pass];
  // dK/dV programs walk a column of the mask, the others a row.
  const int64_t visited = powerOfTwoAtLeast(
      std::max<int64_t>(1, std::llround(mask.density() * double(pass == 1 ? mask.q_blocks() : mask.kv_blocks()))));
  std::unique_ptr<jit::Autotuner> *slot;
  {
    std::lock_guard<std::mutex> lock(mutex);
    slot = &tuners[{pass, bf16, padded, mask.block_m(), mask.block_n(), visited}];
    if (!*slot) {
      jit::Autotuner::Options options;
      options.key_extra = [nqArgument, batchesArgument, visited, bm = mask.block_m(),
                           bn = mask.block_n()](const std::vector<dsl::LaunchArg> &a) {
        return "mask" + std::to_string(bm) + "x" + std::to_string(bn) + ",visits" + std::to_string(visited) + "," +
               detail::attention_tuning_key(a, nqArgument, batchesArgument);
      };
      const dsl::Kernel &kernel = pass == 0 ? forward[bf16] : pass == 1 ? keysValues[bf16] : queries[bf16];
      *slot = std::make_unique<jit::Autotuner>(kernel, sparseSpaces(padded, mask.block_m(), mask.block_n())[pass],
                                               options);
    }
  }
  return (*slot)->config_for(grid, args);
}

void BlockSparseAttention::forward(const TensorView &q, const TensorView &k, const TensorView &v, const TensorView &o,
                                   const TensorView &lse, const BlockMask &mask, const AttentionOptions &options,
                                   const SparseInputs &inputs, void *stream) const {
  api = "block_sparse_attention_forward";
  const Problem p = checkProblem(q, k, v, o, lse);
  checkWritten({{"o", &o}, {"lse", &lse}}, {{"q", &q}, {"k", &k}, {"v", &v}});
  const double scale = checkedScale(options.scale, p.head_dim);
  if (options.causal)
    fail("options.causal must be false: the block mask (and mask_mod) says which keys each query sees");
  checkMask(mask, p);
  const int64_t padded = paddedHeadDim(p.head_dim);
  const std::optional<dsl::Config> given = sparseConfig(options.config, mask, padded, "block_sparse_forward_configs", true);
  std::optional<jit::DeviceGuard> onTheirGpu;
  guardDevice(onTheirGpu, {{"q", &q}, {"k", &k}, {"v", &v}, {"o", &o}, {"lse", &lse}});
  if (o.numel() == 0)
    return;
  const std::vector<dsl::LaunchArg> args{
      q.data, k.data, v.data, o.data, lse.data, mask.device_indices(), inputs.mask_aux, inputs.score_aux, p.n_q,
      p.n_kv, p.heads_q, p.heads_q / p.heads_kv, p.head_dim, mask.heads(), mask.q_blocks(), mask.kv_blocks(),
      q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1),
      v.stride(2), o.stride(0), o.stride(1), o.stride(2), static_cast<float>(scale), p.batch, p.heads_kv};
  const jit::GridFn grid = blockGrid(p.n_q, "BLOCK_M", p.batch * p.heads_q);
  const bool bf16 = q.dtype == dsl::DType::bf16;
  dsl::Config config = compiled_->configFor(0, given, bf16, padded, mask, grid, args, /*n_q at*/ 8, /*batches at*/ 29);
  blockPointersWhereTheTmaCopies(config, {&k, &v});
  compiled_->forward[bf16].launch_args(stream, grid(config), config, args.data(), args.size());
}

void BlockSparseAttention::backward(const TensorView &q, const TensorView &k, const TensorView &v,
                                    const TensorView &o, const TensorView &lse, const TensorView &dout,
                                    const TensorView &dq, const TensorView &dk, const TensorView &dv,
                                    const BlockMask &mask, const AttentionOptions &options,
                                    const SparseInputs &inputs, void *stream) const {
  api = "block_sparse_attention_backward";
  std::optional<jit::DeviceGuard> onTheirGpu;
  const Problem p = checkBackward(q, k, v, o, lse, dout, dq, dk, dv, onTheirGpu);
  const auto scale = static_cast<float>(checkedScale(options.scale, p.head_dim));
  if (options.causal)
    fail("options.causal must be false: the block mask (and mask_mod) says which keys each query sees");
  if (compiled_->scoreMod && !compiled_->scoreModGrad)
    fail("the backward of a score_mod needs its derivative: set Modifiers::score_mod_grad");
  checkMask(mask, p);
  const int64_t padded = paddedHeadDim(p.head_dim);
  const std::optional<dsl::Config> keysConfig = sparseConfig(options.keys_values_config, mask, padded,
                                                             "block_sparse_backward_configs(keys_values)"),
                                   queriesConfig = sparseConfig(options.queries_config, mask, padded,
                                                                "block_sparse_backward_configs(queries)");
  if (dk.numel() == 0 && dq.numel() == 0)
    return;
  jit::DeviceBuffer delta = launchDelta(p, o, dout, stream);
  const bool bf16 = q.dtype == dsl::DType::bf16;
  const std::vector<dsl::LaunchArg> shape{p.n_q,        p.n_kv,        p.heads_q,     p.heads_q / p.heads_kv,
                                          p.head_dim,   mask.heads(),  mask.q_blocks(), mask.kv_blocks(),
                                          q.stride(0),  q.stride(1),   q.stride(2),   k.stride(0),
                                          k.stride(1),  k.stride(2),   v.stride(0),   v.stride(1),
                                          v.stride(2),  dout.stride(0), dout.stride(1), dout.stride(2)};
  // One pass: its arguments (head, the shape, tail), the programs along `rows` in `block`s.
  auto launch = [&](int pass, const std::optional<dsl::Config> &given, const dsl::Kernel &kernel,
                    std::vector<dsl::LaunchArg> args, std::initializer_list<dsl::LaunchArg> tail, int64_t rows,
                    const char *block, int64_t programsPerRow) {
    const size_t nqArgument = args.size();
    args.insert(args.end(), shape.begin(), shape.end());
    args.insert(args.end(), tail);
    const size_t batchesArgument = args.size() - 2; // both tails end with the batch count and one more
    const jit::GridFn grid = blockGrid(rows, block, programsPerRow);
    dsl::Config config = compiled_->configFor(pass, given, bf16, padded, mask, grid, args, nqArgument, batchesArgument);
    if (pass == 1) // dK/dV reads Q and dO through block pointers, dQ K and V
      blockPointersWhereTheTmaCopies(config, {&q, &dout});
    else
      blockPointersWhereTheTmaCopies(config, {&k, &v});
    kernel.launch_args(stream, grid(config), config, args.data(), args.size());
  };
  if (dk.numel() > 0)
    launch(1, keysConfig, compiled_->keysValues[bf16],
           {q.data, k.data, v.data, dout.data, lse.data, delta.data(), dk.data, dv.data,
            mask.device_transposed_indices(), inputs.mask_aux, inputs.score_aux},
           {dk.stride(0), dk.stride(1), dk.stride(2), dv.stride(0), dv.stride(1), dv.stride(2), scale, p.batch,
            p.batch * p.heads_q},
           p.n_kv, "BLOCK_N", p.batch * p.heads_kv);
  if (dq.numel() > 0)
    launch(2, queriesConfig, compiled_->queries[bf16],
           {q.data, k.data, v.data, dout.data, lse.data, delta.data(), dq.data, mask.device_indices(),
            inputs.mask_aux, inputs.score_aux},
           {dq.stride(0), dq.stride(1), dq.stride(2), scale, p.batch, p.heads_kv}, p.n_q, "BLOCK_M",
           p.batch * p.heads_q);
}

} // namespace tessera::kernels
