// kernels::attention_forward on the GPU against the NVRTC fp64 reference, to DESIGN.md's bars:
// max error within 2x, mean within 1.1x, that of a naive same-dtype attention (plus a small
// floor); LSE close; no NaN; every element written (outputs poisoned); bitwise repeatable.
#include "gpu_util.h"

#include "tessera/kernels/attention.h"
#include "tessera/kernels/reference.h"

#include <cmath>
#include <optional>
#include <string>

namespace tessera::testing {
namespace {

using kernels::TensorView;
using dsl::DType;

struct Case {
  int64_t batch, n_q, n_kv, heads_q, heads_kv, head_dim;
  bool causal;
  DType dtype;
  bool bhsd; ///< [batch, heads, n, d] in memory instead of [batch, n, heads, d]
};

std::string nameOf(const Case &c) {
  return "b" + std::to_string(c.batch) + "_q" + std::to_string(c.n_q) + "_k" + std::to_string(c.n_kv) + "_h" +
         std::to_string(c.heads_q) + "x" + std::to_string(c.heads_kv) + "_d" + std::to_string(c.head_dim) +
         (c.causal ? "_causal" : "") + "_" + dsl::to_string(c.dtype) + (c.bhsd ? "_bhsd" : "");
}

/// A [batch, n, heads, d] tensor: f32 values already rounded to `dtype`, their 16-bit bits in
/// the memory order the case asks for, and a view of a device copy of those.
struct Tensor {
  std::vector<float> values; // [batch, n, heads, d]
  jit::DeviceBuffer device;
  TensorView view;
};

std::vector<int64_t> stridesOf(const Case &c, int64_t n, int64_t heads) {
  int64_t d = c.head_dim;
  return c.bhsd ? std::vector<int64_t>{heads * n * d, d, n * d, 1} : std::vector<int64_t>{n * heads * d, heads * d, d, 1};
}

Tensor makeTensor(const Case &c, int64_t n, int64_t heads, uint32_t seed) {
  Tensor t;
  int64_t count = c.batch * n * heads * c.head_dim;
  t.values = random_floats(count, seed, -1.5f, 1.5f);
  std::vector<int64_t> strides = stridesOf(c, n, heads);
  std::vector<uint16_t> bits(count);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t e = 0; e < c.head_dim; ++e) {
          float &x = t.values[((b * n + i) * heads + h) * c.head_dim + e];
          uint16_t h16 = to_16bit(x, c.dtype);
          x = from_16bit(h16, c.dtype);
          bits[b * strides[0] + i * strides[1] + h * strides[2] + e] = h16;
        }
  t.device = upload(bits);
  t.view = {t.device.data(), c.dtype, {c.batch, n, heads, c.head_dim}, strides, kernels::DeviceType::cuda};
  return t;
}

/// The view's elements as f32 in [batch, n, heads, d] order.
std::vector<float> readBack(const TensorView &view, const jit::DeviceBuffer &buffer) {
  int64_t count = view.numel();
  auto bits = download<uint16_t>(buffer, count);
  std::vector<float> out(count);
  int64_t n = view.shape[1], heads = view.shape[2], d = view.shape[3];
  for (int64_t b = 0; b < view.shape[0]; ++b)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t e = 0; e < d; ++e) {
          uint16_t x = bits[b * view.stride(0) + i * view.stride(1) + h * view.stride(2) + e];
          out[((b * n + i) * heads + h) * d + e] = from_16bit(x, view.dtype);
        }
  return out;
}

/// Runs `c` (with `config`, or the tuned one) and checks it against the reference.
void checkCase(const Case &c, std::optional<dsl::Config> config = std::nullopt) {
  Tensor q = makeTensor(c, c.n_q, c.heads_q, 1), k = makeTensor(c, c.n_kv, c.heads_kv, 2),
         v = makeTensor(c, c.n_kv, c.heads_kv, 3);
  int64_t rows = c.batch * c.heads_q * c.n_q;
  jit::DeviceBuffer o = poisoned(q.values.size() * 2), lse = poisoned(rows * 4);
  TensorView oView{o.data(), c.dtype, q.view.shape, q.view.strides, kernels::DeviceType::cuda};
  TensorView lseView{lse.data(), DType::f32, {c.batch, c.heads_q, c.n_q}, {}, kernels::DeviceType::cuda};
  kernels::AttentionOptions options;
  options.causal = c.causal;
  options.config = config;
  kernels::attention_forward(q.view, k.view, v.view, oView, lseView, options);
  jit::synchronize();
  std::vector<float> got = readBack(oView, o), gotLse = download<float>(lse, rows);

  // The same inputs through the reference, in fp64 and as a naive same-dtype implementation.
  auto dq = upload(q.values), dk = upload(k.values), dv = upload(v.values);
  jit::DeviceBuffer refO(q.values.size() * 4 + 4), refLse(rows * 4 + 4), naive(q.values.size() * 4 + 4);
  kernels::ReferenceShape shape{c.batch, c.n_q, c.n_kv, c.heads_q, c.heads_kv, c.head_dim,
                                1.0 / std::sqrt(double(c.head_dim)), c.causal};
  kernels::attention_reference(shape, static_cast<float *>(dq.data()), static_cast<float *>(dk.data()),
                               static_cast<float *>(dv.data()), static_cast<float *>(refO.data()),
                               static_cast<float *>(refLse.data()), static_cast<float *>(naive.data()), c.dtype);
  auto want = download<float>(refO, q.values.size()), wantLse = download<float>(refLse, rows);
  auto ours = kernels::error_stats(got, want), baseline = kernels::error_stats(download<float>(naive, q.values.size()), want);
  double floor = kernels::forward_error_floor(c.dtype);
  EXPECT_TRUE(ours.finite) << "NaN or Inf in the output (or an element never written)";
  EXPECT_LE(ours.max, 2 * baseline.max + floor) << "naive " << dsl::to_string(c.dtype) << " max error " << baseline.max;
  EXPECT_LE(ours.mean, 1.1 * baseline.mean + floor / 10) << "naive mean error " << baseline.mean;
  EXPECT_TRUE(kernels::within_forward_bars(ours, baseline, c.dtype));
  int lseBad = 0;
  for (int64_t r = 0; r < rows; ++r) {
    bool ok = std::isinf(wantLse[r]) ? std::isinf(gotLse[r]) && gotLse[r] < 0
                                     : std::fabs(gotLse[r] - wantLse[r]) <= 1e-3 * std::max(1.0f, std::fabs(wantLse[r]));
    if (!ok && lseBad++ < 3)
      ADD_FAILURE() << "lse row " << r << ": " << gotLse[r] << " vs " << wantLse[r];
  }
  EXPECT_EQ(lseBad, 0);

  // The forward pass is deterministic: a second run writes the same bits.
  jit::DeviceBuffer o2 = poisoned(q.values.size() * 2);
  TensorView o2View = oView;
  o2View.data = o2.data();
  kernels::attention_forward(q.view, k.view, v.view, o2View, lseView, options);
  jit::synchronize();
  EXPECT_EQ(download<uint16_t>(o, q.values.size()), download<uint16_t>(o2, q.values.size()));
}

class AttentionForward : public GpuTest, public ::testing::WithParamInterface<Case> {};

TEST_P(AttentionForward, MatchesTheFloat64ReferenceWithinTheBars) { checkCase(GetParam()); }

// Each config autotuning may pick, on ragged lengths (and a head dim the configs pad: through
// the TMA, the columns past it read zero).
TEST_F(GpuTest, AttentionForwardEveryTunedConfig) {
  for (int64_t d : {64, 96, 128, 256})
    for (bool causal : {false, true})
      for (const dsl::Config &config : kernels::attention_forward_configs(d, causal)) {
        SCOPED_TRACE(config.str());
        checkCase({2, 300, 333, 2, 1, d, causal, DType::bf16, false}, config);
      }
}

// Ping-pong (config knob ping_pong: turns at the dots, FlashAttention-3's, or at the
// exponentials) on every config of the space it applies to (warp-specialized, two consumer
// warpgroups), ragged and causal: the warpgroups' turns must pair up in every loop, the masked
// one too, and leave the results as they were.
TEST_F(GpuTest, AttentionForwardPingPong) {
  int tried = 0;
  for (int64_t d : {64, 128})
    for (bool causal : {false, true})
      for (const dsl::Config &config : kernels::attention_forward_configs(d, causal))
        for (int64_t turns : {1, 2}) {
          if (!kernels::ping_pong_applies(config) || config.get("ping_pong", 0) == turns)
            continue; // (EveryTunedConfig runs the space's own)
          dsl::Config turning = config;
          turning.set("ping_pong", turns);
          SCOPED_TRACE(turning.str());
          checkCase({2, 300, 1333, 2, 1, d, causal, DType::f16, false}, turning);
          ++tried;
        }
  EXPECT_GT(tried, 0) << "no config of the space has two consumer warpgroups";
}

/// Every config of the `dims` spaces (d = 64 and d = 128) that sets `selector` (knobs separated
/// by ',': all of them; `!KNOB`: not that one), with `knobs` set, on `n_q` queries of `heads`
/// heads (GQA, ragged, causal rows that see no key).
void checkSpacesWith(const std::string &selector, const std::vector<std::pair<const char *, int64_t>> &knobs,
                     int64_t batch, int64_t n_q, int64_t heads, const std::vector<int64_t> &dims = {64, 128}) {
  auto selected = [&](const dsl::Config &config) {
    for (size_t from = 0; from <= selector.size();) {
      const size_t comma = std::min(selector.find(',', from), selector.size());
      const std::string name = selector.substr(from, comma - from);
      if ((name[0] == '!') == (config.get(name[0] == '!' ? name.substr(1) : name, 0) != 0))
        return false;
      from = comma + 1;
    }
    return true;
  };
  int tried = 0;
  for (int64_t d : dims)
    for (bool causal : {false, true})
      for (dsl::Config config : kernels::attention_forward_configs(d, causal)) {
        if (!selected(config))
          continue;
        for (auto [key, value] : knobs)
          config.set(key, value);
        SCOPED_TRACE(config.str());
        checkCase({batch, n_q, 1333, heads, 2, d, causal, causal ? DType::bf16 : DType::f16, false}, config);
        ++tried;
      }
  EXPECT_GT(tried, 0) << "no config of the spaces sets " << selector;
}

// Persistent programs (config knob PERSISTENT) on every warp-specialized config of the spaces:
// with more tiles than the GPU holds programs (66 query blocks x 8 heads), each program walks
// several, its producer loading the next tile's Q, K and V across the tile boundary.
TEST_F(GpuTest, AttentionForwardPersistent) { checkSpacesWith("warp_specialize", {{"PERSISTENT", 1}}, 4, 4224, 8); }

// Narrower key blocks in the masked loop (MASKED_BLOCK_N, in the plain order) on the configs in
// ping-pong: the loops' blocks differ in width, each with its own ring and turns (64-key
// narrow blocks: below BLOCK_N at d = 128 too). Not on d = 128's persistent config, whose
// 230400 bytes leave no room for the narrow rings (it fails to load, saying so).
TEST_F(GpuTest, AttentionForwardNarrowMaskedBlocks) {
  for (int64_t masked : {128, 64})
    checkSpacesWith("ping_pong,!LAST_PRODUCT_IN_LOOP", {{"OVERLAP_SOFTMAX", 0}, {"MASKED_BLOCK_N", masked}}, 2, 1111,
                    4);
}

// Stores staged through shared memory (config knob staged_stores, shipped on the d = 128
// blocks of 128 x 128) on every warp-specialized config: O leaves in 16-byte vectors of the
// store's coalesced layout, ragged and causal.
TEST_F(GpuTest, AttentionForwardStagedStores) { checkSpacesWith("warp_specialize", {{"staged_stores", 1}}, 2, 1111, 4); }

// Q through the TMA (config knob Q_BLOCK_POINTER: the producer copies it, no consumer-wide
// barrier waits for it) on every config with block pointers, and in persistent programs, where
// the next tile's Q fills a two-stage ring while this tile computes.
TEST_F(GpuTest, AttentionForwardQueriesThroughTma) {
  checkSpacesWith("BLOCK_POINTERS", {{"Q_BLOCK_POINTER", 1}}, 2, 1111, 4);
  checkSpacesWith("warp_specialize", {{"Q_BLOCK_POINTER", 1}, {"PERSISTENT", 1}}, 4, 4224, 8);
}

// Masked-loop blocks that every row sees whole skip the mask (config knob SKIP_VISIBLE_MASKS)
// on every config of the spaces, ragged and causal (the diagonal offset by n_kv - n_q).
TEST_F(GpuTest, AttentionForwardSkipVisibleMasks) { checkSpacesWith("BLOCK_M", {{"SKIP_VISIBLE_MASKS", 1}}, 2, 1111, 4); }

// A share of the softmax's exponentials on the FMA pipe (compiler knob exp2_on_fma: a
// polynomial, relative error 8.6e-5) on every config of the d = 64 and d = 128 spaces: within
// the bars, fully masked rows still 0 and -inf.
TEST_F(GpuTest, AttentionForwardExponentialsOnTheFmaPipe) {
  for (int64_t eighths : {2, 8})
    checkSpacesWith("BLOCK_M", {{"exp2_on_fma", eighths}}, 2, 1111, 4);
}

// The row maxima folded as trees (compiler knob tree_max) on the overlapped configs at d = 64,
// whose 64 x 128 programs it made faster (12-04f).
TEST_F(GpuTest, AttentionForwardTreeRowMaxima) {
  checkSpacesWith("OVERLAP_SOFTMAX", {{"tree_max", 1}}, 2, 1111, 4, {64});
}

// The softmax's row sums kept as each lane's partial sums through the key loops, the lanes
// added up after them (compiler knob defer_lane_sums): every config of the spaces, ragged and
// causal (the masked loop starting from the unmasked one's partial sums), and persistent
// programs, whose sums start again at each tile.
TEST_F(GpuTest, AttentionForwardLaneSumsAfterTheLoops) {
  checkSpacesWith("BLOCK_M", {{"defer_lane_sums", 1}}, 2, 1111, 4);
  checkSpacesWith("warp_specialize", {{"defer_lane_sums", 1}, {"PERSISTENT", 1}}, 4, 4224, 8);
}

// FlashAttention-3's last deferred P @ V as a loop of one block (config knob
// LAST_PRODUCT_IN_LOOP), its V through the ring of K and V (that fill copying V alone and
// arriving for K's buffer too): every overlapped config, on tiles of pointers too, and
// persistent programs walking several tiles (the next tile's first fills after that one).
TEST_F(GpuTest, AttentionForwardLastProductInTheLoopsRing) {
  checkSpacesWith("OVERLAP_SOFTMAX", {{"LAST_PRODUCT_IN_LOOP", 1}}, 2, 1111, 4);
  checkSpacesWith("warp_specialize", {{"PERSISTENT", 1}, {"LAST_PRODUCT_IN_LOOP", 1}}, 4, 4224, 8);
  checkSpacesWith("warp_specialize", {{"PERSISTENT", 1}, {"Q_BLOCK_POINTER", 1}, {"LAST_PRODUCT_IN_LOOP", 1}}, 4, 4224,
                  8);
}

// O stored without masks where a block's rows all lie before n_q at an unpadded head dim
// (config knob FULL_TILE_STORES) on every warp-specialized config: ragged lengths (the last
// block masked), a padded head dim (every block masked), and persistent programs over whole
// blocks.
TEST_F(GpuTest, AttentionForwardFullTileStores) {
  checkSpacesWith("warp_specialize", {{"FULL_TILE_STORES", 1}}, 2, 1111, 4, {64, 96, 128});
  checkSpacesWith("warp_specialize", {{"PERSISTENT", 1}, {"FULL_TILE_STORES", 1}}, 4, 4224, 8);
}

// FlashAttention-3's order with the accumulator rescaled before the next Q K^T (config knob
// RESCALE_AT_SETTLE) on every overlapped config: P @ V stays in flight into the next
// iteration, whose start waits for it before the rescale and before the stage it read is
// released; both loops (causal), the last product as a loop or not, persistent programs, and
// the 128 x 128 ping-pong at d = 64 (d = 128's shape, outside the d = 64 space).
TEST_F(GpuTest, AttentionForwardRescaleAtSettle) {
  checkSpacesWith("OVERLAP_SOFTMAX", {{"RESCALE_AT_SETTLE", 1}}, 2, 1111, 4);
  checkSpacesWith("warp_specialize,OVERLAP_SOFTMAX",
                  {{"RESCALE_AT_SETTLE", 1}, {"LAST_PRODUCT_IN_LOOP", 1}, {"PERSISTENT", 1}}, 4, 4224, 8);
  checkSpacesWith("ping_pong",
                  {{"BLOCK_N", 128}, {"MASKED_BLOCK_N", 128}, {"OVERLAP_SOFTMAX", 1}, {"LAST_PRODUCT_IN_LOOP", 1},
                   {"RESCALE_AT_SETTLE", 1}},
                  2, 1111, 4, {64});
}

std::vector<Case> cases() {
  std::vector<Case> all;
  // Ragged lengths, causal or not.
  for (int64_t n : {1, 17, 113, 1023, 4224})
    for (bool causal : {false, true})
      all.push_back({1, n, n, 2, 2, 64, causal, DType::f16, false});
  // n_q != n_kv both ways; causal with n_q > n_kv leaves the first rows with no key at all.
  for (auto [nq, nkv] : {std::pair<int64_t, int64_t>{113, 1023}, {1023, 113}, {1, 777}, {300, 1}})
    for (bool causal : {false, true})
      all.push_back({2, nq, nkv, 2, 2, 128, causal, DType::bf16, false});
  // GQA and MQA, strided BHSD.
  all.push_back({2, 257, 300, 6, 2, 128, true, DType::f16, true});
  all.push_back({1, 200, 513, 4, 1, 64, false, DType::bf16, true});
  // Every head dim (padded ones too), both dtypes.
  for (int64_t d : {32, 40, 64, 96, 128, 200, 256})
    for (DType dtype : {DType::f16, DType::bf16})
      all.push_back({2, 200, 333, 2, 2, d, d % 64 == 0, dtype, d == 96});
  return all;
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionForward, ::testing::ValuesIn(cases()),
                         [](const auto &info) { return nameOf(info.param); });

// Offsets past 2^31 elements: K, V and O hold their second batch 2^31 + 64 elements in.
TEST_F(GpuTest, AttentionForwardAddressesPast2To31Elements) {
  const int64_t n_q = 100, n_kv = 300, d = 128, far = (int64_t(1) << 31) + 64;
  Case c{2, n_q, n_kv, 1, 1, d, true, DType::f16, false};
  Tensor q = makeTensor(c, n_q, 1, 7), k = makeTensor(c, n_kv, 1, 8), v = makeTensor(c, n_kv, 1, 9);
  // Big copies of K, V, O: batch b at element b * far.
  auto spread = [&](const Tensor &t, int64_t n) {
    jit::DeviceBuffer big((far + n * d) * 2);
    for (int64_t b = 0; b < 2; ++b)
      jit::copy_device(static_cast<char *>(big.data()) + b * far * 2,
                       static_cast<const char *>(t.device.data()) + b * n * d * 2, n * d * 2);
    return big;
  };
  jit::DeviceBuffer bigK = spread(k, n_kv), bigV = spread(v, n_kv), bigO = poisoned((far + n_q * d) * 2);
  jit::DeviceBuffer lse = poisoned(2 * n_q * 4);
  auto farView = [&](void *data, int64_t n) {
    return TensorView{data, DType::f16, {2, n, 1, d}, {far, d, d, 1}, kernels::DeviceType::cuda};
  };
  kernels::AttentionOptions options;
  options.causal = true;
  kernels::attention_forward(q.view, farView(bigK.data(), n_kv), farView(bigV.data(), n_kv),
                             farView(bigO.data(), n_q), {lse.data(), DType::f32, {2, 1, n_q}, {}, kernels::DeviceType::cuda},
                             options);
  jit::synchronize();
  jit::DeviceBuffer second(n_q * d * 2);
  jit::copy_device(second.data(), static_cast<char *>(bigO.data()) + far * 2, n_q * d * 2);
  auto dq = upload(q.values), dk = upload(k.values), dv = upload(v.values);
  jit::DeviceBuffer refO(q.values.size() * 4), refLse(2 * n_q * 4);
  kernels::attention_reference({2, n_q, n_kv, 1, 1, d, 1 / std::sqrt(double(d)), true}, static_cast<float *>(dq.data()),
                               static_cast<float *>(dk.data()), static_cast<float *>(dv.data()),
                               static_cast<float *>(refO.data()), static_cast<float *>(refLse.data()));
  auto want = download<float>(refO, q.values.size());
  auto bits = download<uint16_t>(second, n_q * d);
  double worst = 0;
  for (int64_t i = 0; i < n_q * d; ++i)
    worst = std::max(worst, std::fabs(double(from_half(bits[i])) - want[n_q * d + i]));
  EXPECT_LE(worst, 2e-3) << "the batch stored 2^31 elements in";
}

TEST_F(GpuTest, AttentionForwardRejectsHostMemoryMarkedCuda) {
  std::vector<uint16_t> host(4 * 64);
  jit::DeviceBuffer device(4 * 64 * 2), lse(4 * 4);
  TensorView onHost{host.data(), DType::f16, {1, 4, 1, 64}, {}, kernels::DeviceType::cuda};
  TensorView onDevice{device.data(), DType::f16, {1, 4, 1, 64}, {}, kernels::DeviceType::cuda};
  TensorView lseView{lse.data(), DType::f32, {1, 1, 4}, {}, kernels::DeviceType::cuda};
  jit::DeviceBuffer out(4 * 64 * 2);
  TensorView o{out.data(), DType::f16, {1, 4, 1, 64}, {}, kernels::DeviceType::cuda};
  try {
    kernels::attention_forward(onDevice, onHost, onDevice, o, lseView);
    FAIL() << "no error";
  } catch (const Error &error) {
    EXPECT_NE(std::string(error.what()).find("k is marked CUDA but its pointer is not device memory"),
              std::string::npos)
        << error.what();
  }
}

TEST_F(GpuTest, AttentionForwardRunsOnTheGpuHoldingItsTensors) {
  if (jit::device_count() < 2)
    GTEST_SKIP() << "needs 2 GPUs, " << jit::device_count() << " visible";
  const std::vector<int64_t> shape{1, 300, 2, 64};
  std::vector<uint16_t> bits(300 * 2 * 64);
  std::vector<float> values = random_floats(bits.size(), 7, -1.5f, 1.5f);
  for (size_t i = 0; i < bits.size(); ++i)
    bits[i] = to_half(values[i]);
  struct OnGpu {
    jit::DeviceBuffer x, o, lse;
    TensorView view(const jit::DeviceBuffer &b) const {
      return {b.data(), DType::f16, {1, 300, 2, 64}, {}, kernels::DeviceType::cuda};
    }
  };
  auto allocate = [&](int device) {
    jit::DeviceGuard on(device);
    return OnGpu{upload(bits), jit::DeviceBuffer(bits.size() * 2), jit::DeviceBuffer(2 * 300 * 4)};
  };
  OnGpu first = allocate(0), second = allocate(1);
  jit::DeviceGuard current(0); // the second call's tensors are on GPU 1: it must run there
  kernels::AttentionOptions causal;
  causal.causal = true;
  for (const OnGpu *g : {&first, &second}) {
    TensorView x = g->view(g->x);
    kernels::attention_forward(x, x, x, g->view(g->o),
                               {g->lse.data(), DType::f32, {1, 2, 300}, {}, kernels::DeviceType::cuda}, causal);
  }
  for (int device : {0, 1}) {
    jit::DeviceGuard on(device);
    jit::synchronize(nullptr);
  }
  EXPECT_EQ(download<uint16_t>(first.o, bits.size()), download<uint16_t>(second.o, bits.size()));
  EXPECT_EQ(jit::current_device().ordinal, 0) << "the caller's device is restored";
  TensorView onOne = second.view(second.x), onZero = first.view(first.x);
  try {
    kernels::attention_forward(onZero, onOne, onZero, first.view(first.o),
                               {first.lse.data(), DType::f32, {1, 2, 300}, {}, kernels::DeviceType::cuda});
    FAIL() << "no error";
  } catch (const Error &error) {
    EXPECT_NE(std::string(error.what()).find("k is on GPU 1 but q on GPU 0"), std::string::npos) << error.what();
  }
}

} // namespace
} // namespace tessera::testing
