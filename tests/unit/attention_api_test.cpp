// The attention library's C++ API, forward and backward, run through the interpreter
// (TESSERA_INTERPRET=1) against an fp64 CPU reference: causal (bottom-right), GQA/MQA, padded head dims, BSHD and BHSD
// strides, both dtypes; and every bad input rejected with a message naming it.
#include "tessera/kernels/attention.h"

#include "AttentionKernels.h"
#include "attention_check.h"
#include "interpreter_util.h"

#include "tessera/compiler/Interpreter.h"

#include <tessera/dsl/fp16.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <tuple>

namespace {

using namespace tessera;
using namespace tessera::kernels;
using dsl::DType;
using ::testing::HasSubstr;
using tessera::testing::Interpreted;
using tessera::testing::Registered;

struct Case {
  int batch, n_q, n_kv, heads_q, heads_kv, d;
  bool causal, bhsd;
  DType dtype;
  /// With the first tuned config that sets this knob (OVERLAP_SOFTMAX: FlashAttention-3's
  /// order; BLOCK_POINTERS: K and V through block pointers); KEY=VALUE sets it on the first
  /// config that sets KEY, or on the first config where none does (PERSISTENT); further
  /// ,KEY=VALUE pairs set more knobs on that config.
  const char *knob = nullptr;
  /// The backward with dQ added in the dK/dV pass (AttentionOptions::deterministic off).
  bool atomic_dq = false;
};

std::ostream &operator<<(std::ostream &os, const Case &c) {
  return os << c.batch << "x" << c.n_q << "x" << c.n_kv << " heads " << c.heads_q << "/" << c.heads_kv << " d"
            << c.d << (c.causal ? " causal" : "") << (c.bhsd ? " BHSD" : " BSHD") << " " << dsl::to_string(c.dtype)
            << (c.knob ? std::string(" ") + c.knob : "") << (c.atomic_dq ? " atomic dQ" : "");
}

/// Host memory registered with the interpreter, with a [batch, n, heads, d] view in either layout.
struct Buffer {
  Registered<uint16_t> memory;
  TensorView view;
  Buffer(DType dtype, int b, int n, int h, int d, bool bhsd)
      : memory(std::vector<uint16_t>(size_t(b) * n * h * d, 0xffff)) {
    view = {memory.ptr(), dtype, {b, n, h, d}, {}, DeviceType::cpu};
    if (bhsd)
      view.strides = {int64_t(h) * n * d, d, int64_t(n) * d, 1};
    else
      view.strides = {int64_t(n) * h * d, int64_t(h) * d, d, 1};
  }
  uint16_t &at(int b, int n, int h, int c) {
    return memory.data[b * view.strides[0] + n * view.strides[1] + h * view.strides[2] + c];
  }
};

using AttentionApi = Interpreted<::testing::TestWithParam<Case>>;

TEST_P(AttentionApi, MatchesReferenceWithinTheBar) {
  const Case c = GetParam();
  const bool bf16 = c.dtype == DType::bf16;
  auto to16 = [&](float x) { return to_16bit(x, c.dtype); };
  auto from16 = [&](uint16_t x) { return double(from_16bit(x, c.dtype)); };
  std::mt19937 rng(c.n_q * 131 + c.d);
  std::normal_distribution<float> normal;
  Buffer q(c.dtype, c.batch, c.n_q, c.heads_q, c.d, c.bhsd), k(c.dtype, c.batch, c.n_kv, c.heads_kv, c.d, c.bhsd),
      v(c.dtype, c.batch, c.n_kv, c.heads_kv, c.d, c.bhsd), o(c.dtype, c.batch, c.n_q, c.heads_q, c.d, c.bhsd);
  for (Buffer *b : {&q, &k, &v})
    for (uint16_t &x : b->memory.data)
      x = to16(normal(rng));
  Registered<float> lse_memory(std::vector<float>(size_t(c.batch) * c.heads_q * c.n_q, NAN));
  const std::vector<float> &lse = lse_memory.data;
  TensorView lse_view{lse_memory.ptr(), DType::f32, {c.batch, c.heads_q, c.n_q}, {}, DeviceType::cpu};
  AttentionOptions options;
  options.causal = c.causal;
  const std::string knob = c.knob ? c.knob : "";
  const size_t equals = knob.find('=');
  for (const dsl::Config &config : attention_forward_configs(c.d, c.causal))
    if (c.knob && !options.config && config.get(knob.substr(0, equals), 0))
      options.config = config;
  if (equals != std::string::npos) {
    if (!options.config)
      options.config = attention_forward_configs(c.d, c.causal).front();
    options.config->set_all(knob);
  }
  ASSERT_EQ(c.knob != nullptr, options.config.has_value()) << c;
  attention_forward(q.view, k.view, v.view, o.view, lse_view, options);

  // Each head gathered contiguous for the shared fp64 reference.
  auto head_of = [](Buffer &buffer, int b, int h, int n, int d) {
    std::vector<uint16_t> rows(size_t(n) * d);
    for (int i = 0; i < n; ++i)
      for (int e = 0; e < d; ++e)
        rows[size_t(i) * d + e] = buffer.at(b, i, h, e);
    return rows;
  };
  const double scale = 1 / std::sqrt(double(c.d));
  double worst = 0, naive_worst = 0, worst_lse = 0;
  bool finite = true;
  for (int b = 0; b < c.batch; ++b)
    for (int h = 0; h < c.heads_q; ++h) {
      int hk = h / (c.heads_q / c.heads_kv);
      auto qh = head_of(q, b, h, c.n_q, c.d), kh = head_of(k, b, hk, c.n_kv, c.d), vh = head_of(v, b, hk, c.n_kv, c.d);
      examples::AttentionReference want =
          examples::attention_reference(qh.data(), kh.data(), vh.data(), c.n_q, c.n_kv, c.d, scale, c.causal, bf16);
      for (int i = 0; i < c.n_q; ++i) {
        for (int e = 0; e < c.d; ++e) {
          double got = from16(o.at(b, i, h, e)), exact = want.exact[size_t(i) * c.d + e];
          finite = finite && std::isfinite(got);
          worst = std::max(worst, std::abs(got - exact));
          naive_worst = std::max(naive_worst, std::abs(want.naive[size_t(i) * c.d + e] - exact));
        }
        float got_lse = lse[(size_t(b) * c.heads_q + h) * c.n_q + i];
        if (std::isinf(want.lse[i]))
          EXPECT_TRUE(std::isinf(got_lse) && got_lse < 0) << "fully masked row " << i << ": lse " << got_lse;
        else
          worst_lse = std::max(worst_lse, std::abs(got_lse - want.lse[i]));
      }
    }
  EXPECT_TRUE(finite) << c;
  EXPECT_LE(worst, 2 * naive_worst + (bf16 ? 4e-3 : 1e-3)) << c << " (naive " << naive_worst << ")";
  EXPECT_LE(worst_lse, 1e-3) << c;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionApi,
    ::testing::Values(Case{1, 17, 17, 2, 2, 64, false, false, DType::f16},
                      Case{2, 113, 77, 4, 2, 96, true, true, DType::bf16},   // GQA, padded d, BHSD
                      Case{1, 1, 130, 2, 1, 32, true, false, DType::f16},    // MQA, one query
                      Case{1, 70, 30, 1, 1, 128, true, false, DType::f16},   // 40 fully masked rows
                      Case{1, 33, 0, 1, 1, 16, false, false, DType::bf16},   // no keys: 0 and -inf
                      Case{1, 20, 40, 1, 1, 256, false, true, DType::bf16}, // widest head dim
                      Case{2, 64, 64, 3, 3, 40, true, false, DType::f16},    // odd d, causal square
                      // FlashAttention-3's order: ragged tails, empty loops, no keys at all.
                      Case{1, 150, 200, 2, 1, 64, true, false, DType::f16, "OVERLAP_SOFTMAX"},
                      Case{1, 70, 130, 1, 1, 128, false, true, DType::bf16, "OVERLAP_SOFTMAX"},
                      Case{1, 70, 30, 1, 1, 128, true, false, DType::f16, "OVERLAP_SOFTMAX"},
                      Case{1, 33, 0, 1, 1, 16, false, false, DType::bf16, "OVERLAP_SOFTMAX"},
                      // Block pointers: blocks past the ends (rows, padded head dims) read 0.
                      Case{2, 113, 77, 4, 2, 96, true, true, DType::bf16, "BLOCK_POINTERS"},
                      Case{1, 150, 200, 2, 1, 64, true, false, DType::f16, "BLOCK_POINTERS"},
                      Case{1, 70, 30, 1, 1, 128, true, false, DType::f16, "BLOCK_POINTERS"},
                      Case{1, 33, 0, 1, 1, 16, false, false, DType::bf16, "BLOCK_POINTERS"},
                      // Q through a block pointer too (Q_BLOCK_POINTER): rows past n_q and padded
                      // head dims read 0; in persistent programs each tile's own Q.
                      Case{2, 113, 77, 4, 2, 96, true, true, DType::bf16, "BLOCK_POINTERS=1,Q_BLOCK_POINTER=1"},
                      Case{1, 70, 30, 1, 1, 128, true, false, DType::f16, "BLOCK_POINTERS=1,Q_BLOCK_POINTER=1"},
                      Case{2, 70, 130, 3, 1, 64, false, true, DType::bf16,
                           "BLOCK_POINTERS=1,Q_BLOCK_POINTER=1,PERSISTENT=1"},
                      // Persistent programs (three under the interpreter) taking the tiles in
                      // turn, every other round reversed; the causal ones heaviest first.
                      Case{2, 113, 77, 4, 2, 96, true, true, DType::bf16, "PERSISTENT=1"},
                      Case{1, 150, 200, 2, 1, 64, true, false, DType::f16, "PERSISTENT=1"},
                      Case{2, 70, 130, 3, 1, 64, false, true, DType::bf16, "PERSISTENT=1"},
                      Case{1, 33, 0, 1, 1, 16, false, false, DType::bf16, "PERSISTENT=1"},
                      // Narrower key blocks along the causal diagonal, on the 128 x 256 blocks in
                      // ping-pong: the diagonal offset both ways, rows that see no key.
                      Case{1, 150, 200, 2, 1, 64, true, false, DType::f16, "ping_pong=1,MASKED_BLOCK_N=128"},
                      Case{2, 300, 113, 3, 1, 64, true, true, DType::bf16, "ping_pong=1,MASKED_BLOCK_N=64"},
                      Case{1, 70, 290, 1, 1, 32, true, false, DType::f16, "ping_pong=1,MASKED_BLOCK_N=16"},
                      // Masked blocks every row sees whole skip the mask: before the diagonal,
                      // offset both ways (by 126: a block ends one key past a first row's
                      // horizon), and before a ragged n_kv; FlashAttention-3's order too.
                      Case{1, 300, 300, 2, 1, 64, true, false, DType::f16, "ping_pong=1,MASKED_BLOCK_N=128,SKIP_VISIBLE_MASKS=1"},
                      Case{1, 200, 326, 2, 1, 64, true, false, DType::f16, "ping_pong=1,MASKED_BLOCK_N=128,SKIP_VISIBLE_MASKS=1"},
                      Case{2, 150, 333, 3, 1, 64, true, true, DType::bf16, "ping_pong=1,MASKED_BLOCK_N=64,SKIP_VISIBLE_MASKS=1"},
                      Case{1, 290, 70, 1, 1, 32, true, false, DType::f16, "SKIP_VISIBLE_MASKS=1"},
                      Case{1, 70, 200, 2, 1, 64, false, false, DType::f16, "SKIP_VISIBLE_MASKS=1"},
                      Case{1, 150, 200, 2, 1, 128, true, false, DType::bf16, "OVERLAP_SOFTMAX=1,SKIP_VISIBLE_MASKS=1"},
                      // FlashAttention-3's last deferred product as a loop of one block
                      // (LAST_PRODUCT_IN_LOOP): a ragged diagonal, rows and query blocks that see
                      // no key, no keys at all, persistent programs with GQA and a padded d.
                      Case{1, 150, 200, 2, 1, 128, true, false, DType::f16, "ping_pong=1,LAST_PRODUCT_IN_LOOP=1"},
                      Case{1, 70, 30, 1, 1, 128, true, false, DType::f16, "OVERLAP_SOFTMAX=1,LAST_PRODUCT_IN_LOOP=1"},
                      Case{1, 33, 0, 1, 1, 16, false, false, DType::bf16, "OVERLAP_SOFTMAX=1,LAST_PRODUCT_IN_LOOP=1"},
                      Case{2, 70, 130, 3, 1, 128, false, true, DType::bf16, "ping_pong=1,PERSISTENT=1,LAST_PRODUCT_IN_LOOP=1"},
                      Case{2, 113, 77, 4, 2, 96, true, true, DType::bf16,
                           "ping_pong=1,PERSISTENT=1,Q_BLOCK_POINTER=1,LAST_PRODUCT_IN_LOOP=1"},
                      // The accumulator rescaled before the next Q K^T (RESCALE_AT_SETTLE): a
                      // ragged diagonal across both loops, rows and blocks that see no key, no
                      // keys at all, the last product as a loop, persistent programs with GQA.
                      Case{1, 150, 200, 2, 1, 64, true, false, DType::f16, "OVERLAP_SOFTMAX=1,RESCALE_AT_SETTLE=1"},
                      Case{1, 70, 30, 1, 1, 128, true, false, DType::bf16, "OVERLAP_SOFTMAX=1,RESCALE_AT_SETTLE=1"},
                      Case{1, 33, 0, 1, 1, 16, false, false, DType::bf16, "OVERLAP_SOFTMAX=1,RESCALE_AT_SETTLE=1"},
                      Case{1, 300, 426, 2, 1, 64, true, true, DType::f16,
                           "ping_pong=1,BLOCK_N=128,MASKED_BLOCK_N=128,OVERLAP_SOFTMAX=1,LAST_PRODUCT_IN_LOOP=1,"
                           "RESCALE_AT_SETTLE=1"},
                      Case{2, 113, 77, 4, 2, 96, true, true, DType::bf16,
                           "ping_pong=1,OVERLAP_SOFTMAX=1,PERSISTENT=1,LAST_PRODUCT_IN_LOOP=1,RESCALE_AT_SETTLE=1"},
                      // O stored without masks where a block's rows all lie before n_q and the
                      // head dim is unpadded (FULL_TILE_STORES): whole blocks, a ragged last
                      // block, a padded head dim; persistent programs whose tiles are both.
                      Case{1, 256, 256, 2, 1, 64, true, false, DType::f16, "FULL_TILE_STORES=1"},
                      Case{2, 150, 200, 2, 1, 64, false, true, DType::bf16, "FULL_TILE_STORES=1"},
                      Case{2, 128, 130, 3, 1, 48, true, false, DType::f16, "FULL_TILE_STORES=1"},
                      Case{2, 300, 280, 3, 1, 64, true, true, DType::bf16, "PERSISTENT=1,FULL_TILE_STORES=1"}));

/// Valid views (host memory, f16) the error tests break one at a time.
class AttentionApiErrors : public Interpreted<> {
protected:
  std::vector<uint16_t> qkv = std::vector<uint16_t>(4 * 1024), out = std::vector<uint16_t>(1024);
  std::vector<float> lse_data = std::vector<float>(64);
  TensorView q{qkv.data(), DType::f16, {1, 16, 2, 32}, {}, DeviceType::cpu};
  TensorView k{qkv.data() + 1024, DType::f16, {1, 16, 2, 32}, {}, DeviceType::cpu};
  TensorView v{qkv.data() + 2048, DType::f16, {1, 16, 2, 32}, {}, DeviceType::cpu};
  TensorView o{out.data(), DType::f16, {1, 16, 2, 32}, {}, DeviceType::cpu};
  TensorView lse{lse_data.data(), DType::f32, {1, 2, 16}, {}, DeviceType::cpu};
  AttentionOptions options;
  void expectError(const std::string &needle) {
    try {
      attention_forward(q, k, v, o, lse, options);
      ADD_FAILURE() << "no error; expected one saying: " << needle;
    } catch (const Error &e) {
      EXPECT_THAT(e.what(), HasSubstr(needle));
    }
  }
};

TEST_F(AttentionApiErrors, NameTheArgumentAndTheProblem) {
  TensorView good_q = q, good_k = k, good_v = v, good_o = o, good_lse = lse;
  auto reset = [&] { q = good_q, k = good_k, v = good_v, o = good_o, lse = good_lse; };
  q.shape = {16, 2, 32};
  expectError("q must have 4 dimensions, got [16, 2, 32]");
  reset();
  k.dtype = DType::bf16;
  expectError("k is bf16 but q is f16");
  reset();
  q.dtype = k.dtype = v.dtype = o.dtype = DType::f32;
  expectError("q must be f16 or bf16, got f32");
  reset();
  q.shape[3] = k.shape[3] = v.shape[3] = o.shape[3] = 300;
  expectError("head_dim 300 is not supported");
  reset();
  k.shape[2] = v.shape[2] = 3;
  q.shape[2] = o.shape[2] = 4;
  lse.shape = {1, 4, 16};
  expectError("heads_q (4) must be a multiple of heads_kv (3)");
  reset();
  v.shape[1] = 15;
  expectError("k [1, 16, 2, 32] and v [1, 15, 2, 32] differ");
  reset();
  o.data = qkv.data() + 512;
  expectError("o overlaps q");
  reset();
  lse.shape = {1, 16, 2};
  expectError("lse [1, 16, 2] must be [batch, heads_q, n_q] = [1, 2, 16]");
  reset();
  lse.dtype = DType::f16;
  expectError("lse must be f32");
  reset();
  q.strides = {1024, 64, 1, 2};
  expectError("q must be contiguous in its last dimension");
  reset();
  o.data = reinterpret_cast<char *>(out.data()) + 1;
  expectError("o is not aligned to its element size");
  reset();
  k.device = DeviceType::cuda;
  expectError("k is CUDA memory; expected host memory (TESSERA_INTERPRET is set)");
  reset();
  v.data = nullptr;
  expectError("v is null");
  reset();
  for (double scale : {0.0, -0.125, double(INFINITY), double(NAN)}) {
    options.scale = scale;
    expectError("scale must be positive and finite, got ");
  }
  options.scale.reset();
  options.config = attention_forward_configs(128, false).front();
  expectError("is not for head_dim 32, not causal (take one of attention_forward_configs)");
  options.config = attention_forward_configs(32, false).front();
  options.config->set("BLOCK_N", 24);
  expectError("BLOCK_N must be a power of two of at least 16");
  options.config = attention_forward_configs(32, false).front();
  options.config->set("OVERLAP_SOFTMAX", 2);
  expectError("OVERLAP_SOFTMAX must be 0 or 1");
  options.config->set("OVERLAP_SOFTMAX", 1);
  options.config->set("SPLIT_MASKED", -1);
  expectError("SPLIT_MASKED must be 0 or 1");
  options.config->set("SPLIT_MASKED", 1);
  options.config->set("BLOCK_POINTERS", 3);
  expectError("BLOCK_POINTERS must be 0 or 1");
  options.config->set("BLOCK_POINTERS", 1);
  options.config->set("Q_BLOCK_POINTER", 2);
  expectError("Q_BLOCK_POINTER must be 0 or 1");
  options.config->set("Q_BLOCK_POINTER", 0);
  options.config->set("SKIP_VISIBLE_MASKS", -1);
  expectError("SKIP_VISIBLE_MASKS must be 0 or 1");
  options.config->set("SKIP_VISIBLE_MASKS", 1);
  options.config->set("PERSISTENT", 2);
  expectError("PERSISTENT must be 0 or 1");
  options.config->set("PERSISTENT", 0);
  options.config->set("QUERIES_IN_ROWS", 2);
  expectError("QUERIES_IN_ROWS must be 0 or 1");
  options.config->set("QUERIES_IN_ROWS", 0);
  options.config->set("LAST_PRODUCT_IN_LOOP", 2);
  expectError("LAST_PRODUCT_IN_LOOP must be 0 or 1");
  options.config->set("LAST_PRODUCT_IN_LOOP", 0);
  options.config->set("FULL_TILE_STORES", 2);
  expectError("FULL_TILE_STORES must be 0 or 1");
  options.config->set("FULL_TILE_STORES", 0);
  options.config->set("RESCALE_AT_SETTLE", -1);
  expectError("RESCALE_AT_SETTLE must be 0 or 1");
  options.config->set("RESCALE_AT_SETTLE", 1);
  options.config->set("OVERLAP_SOFTMAX", 0);
  expectError("RESCALE_AT_SETTLE needs OVERLAP_SOFTMAX = 1");
  options.config->set("OVERLAP_SOFTMAX", 1);
  options.config->set("RESCALE_AT_SETTLE", 0);
  for (int64_t masked : {int64_t(0), int64_t(24), 2 * options.config->get("BLOCK_N", 0)}) {
    options.config->set("MASKED_BLOCK_N", masked);
    expectError("MASKED_BLOCK_N must be a power of two from 16 to BLOCK_N");
  }
  options.config->set("MASKED_BLOCK_N", 16);
  expectError("MASKED_BLOCK_N below BLOCK_N needs OVERLAP_SOFTMAX = 0");
  options.config->set("MASKED_BLOCK_N", options.config->get("BLOCK_N", 0));
}

// Every config of the tuning space is for its head dim and causality and keeps whole rows in
// a warp (what the layout of chained dots needs); the GPU tests run each one.
TEST_F(AttentionApiErrors, EveryConfigOfTheSpaceIsValid) {
  for (int64_t d : {32, 64, 128, 256})
    for (bool causal : {false, true})
      for (const dsl::Config &config : attention_forward_configs(d, causal)) {
        EXPECT_EQ(config["HEAD_DIM"], d);
        EXPECT_EQ(config["CAUSAL"], causal ? 1 : 0);
        EXPECT_GE(config["BLOCK_M"] / config["num_warps"], 16) << config.str() << ": a warp must own 16 rows";
      }
  // The backward passes: dK/dV's warps own key rows (BLOCK_N), dQ's query rows (BLOCK_M);
  // at d = 256 dK/dV's 8 warps share rows (split over columns).
  for (int64_t d : {32, 64, 128, 256})
    for (bool causal : {false, true})
      for (BackwardPass pass : {BackwardPass::keys_values, BackwardPass::queries})
        for (const dsl::Config &config : attention_backward_configs(d, causal, pass)) {
          EXPECT_EQ(config["HEAD_DIM"], d);
          EXPECT_EQ(config["CAUSAL"], causal ? 1 : 0);
          EXPECT_GE(config["BLOCK_M"], 16);
          EXPECT_GE(config["BLOCK_N"], 16);
          int64_t rows = pass == BackwardPass::keys_values ? config["BLOCK_N"] : config["BLOCK_M"];
          if (!(pass == BackwardPass::keys_values && d == 256)) {
            EXPECT_GE(rows / config["num_warps"], 16) << config.str() << ": a warp must own 16 rows";
          }
        }
}

} // namespace

namespace {

// attention_backward through the interpreter against fp64 CPU gradients: max error within 3x
// that of a naive same-dtype backward (DESIGN.md), finite, bitwise repeatable.
using AttentionBackwardApi = Interpreted<::testing::TestWithParam<Case>>;

TEST_P(AttentionBackwardApi, MatchesReferenceGradientsWithinTheBar) {
  const Case c = GetParam();
  const bool bf16 = c.dtype == DType::bf16;
  auto to16 = [&](float x) { return to_16bit(x, c.dtype); };
  auto from16 = [&](uint16_t x) { return double(from_16bit(x, c.dtype)); };
  std::mt19937 rng(c.n_kv * 77 + c.d);
  std::normal_distribution<float> normal;
  auto make = [&](int n, int heads) { return Buffer(c.dtype, c.batch, n, heads, c.d, c.bhsd); };
  Buffer q = make(c.n_q, c.heads_q), k = make(c.n_kv, c.heads_kv), v = make(c.n_kv, c.heads_kv),
         o = make(c.n_q, c.heads_q), dout = make(c.n_q, c.heads_q);
  for (Buffer *b : {&q, &k, &v, &dout})
    for (uint16_t &x : b->memory.data)
      x = to16(normal(rng));
  Registered<float> lse(std::vector<float>(size_t(c.batch) * c.heads_q * c.n_q, NAN));
  TensorView lse_view{lse.ptr(), DType::f32, {c.batch, c.heads_q, c.n_q}, {}, DeviceType::cpu};
  AttentionOptions options;
  options.causal = c.causal;
  for (const dsl::Config &config : attention_forward_configs(c.d, c.causal))
    if (c.knob && !options.config && config.get(c.knob, 0))
      options.config = config;
  attention_forward(q.view, k.view, v.view, o.view, lse_view, options);
  for (const dsl::Config &config : attention_backward_configs(c.d, c.causal, BackwardPass::queries))
    if (c.knob && !options.queries_config && config.get(c.knob, 0))
      options.queries_config = config; // dQ's K and V through block pointers too
  // dK/dV's config from its pass's space, else from the other dK/dV space (the pass sets
  // ATOMIC_DQ).
  for (BackwardPass pass : {c.atomic_dq ? BackwardPass::keys_values_adding_dq : BackwardPass::keys_values,
                            BackwardPass::keys_values_adding_dq})
    for (const dsl::Config &config : attention_backward_configs(c.d, c.causal, pass))
      if (c.knob && !options.keys_values_config && config.get(c.knob, 0))
        options.keys_values_config = config; // and dK/dV's Q and dO
  ASSERT_EQ(c.knob != nullptr, options.config || options.keys_values_config) << c;
  options.deterministic = !c.atomic_dq;
  Buffer dq = make(c.n_q, c.heads_q), dk = make(c.n_kv, c.heads_kv), dv = make(c.n_kv, c.heads_kv);
  attention_backward(q.view, k.view, v.view, o.view, lse_view, dout.view, dq.view, dk.view, dv.view, options);

  auto head_of = [&](Buffer &buffer, int b, int h, int n) {
    std::vector<uint16_t> rows(size_t(n) * c.d);
    for (int i = 0; i < n; ++i)
      for (int e = 0; e < c.d; ++e)
        rows[size_t(i) * c.d + e] = buffer.at(b, i, h, e);
    return rows;
  };
  // Per query head, summed into the KV heads for dK and dV.
  const double scale = 1 / std::sqrt(double(c.d));
  struct Worst {
    double ours = 0, naive = 0;
    bool finite = true;
  } worst[3]; // dq, dk, dv
  for (int b = 0; b < c.batch; ++b)
    for (int hk = 0; hk < c.heads_kv; ++hk) {
      std::vector<double> exactK(size_t(c.n_kv) * c.d), naiveK(exactK.size()), exactV(exactK.size()),
          naiveV(exactK.size());
      auto kh = head_of(k, b, hk, c.n_kv), vh = head_of(v, b, hk, c.n_kv);
      for (int h = hk * (c.heads_q / c.heads_kv); h < (hk + 1) * (c.heads_q / c.heads_kv); ++h) {
        auto qh = head_of(q, b, h, c.n_q), doh = head_of(dout, b, h, c.n_q);
        examples::AttentionBackwardReference ref = examples::attention_backward_reference(
            qh.data(), kh.data(), vh.data(), doh.data(), c.n_q, c.n_kv, c.d, scale, c.causal, bf16);
        for (int i = 0; i < c.n_q; ++i)
          for (int e = 0; e < c.d; ++e) {
            double got = from16(dq.at(b, i, h, e)), exact = ref.exact.dq[size_t(i) * c.d + e];
            worst[0].finite &= std::isfinite(got);
            worst[0].ours = std::max(worst[0].ours, std::abs(got - exact));
            worst[0].naive = std::max(worst[0].naive, std::abs(ref.naive.dq[size_t(i) * c.d + e] - exact));
          }
        for (size_t x = 0; x < exactK.size(); ++x) {
          exactK[x] += ref.exact.dk[x], naiveK[x] += ref.naive.dk[x];
          exactV[x] += ref.exact.dv[x], naiveV[x] += ref.naive.dv[x];
        }
      }
      for (int j = 0; j < c.n_kv; ++j)
        for (int e = 0; e < c.d; ++e) {
          size_t x = size_t(j) * c.d + e;
          for (auto [w, got, exact, naive] :
               {std::tuple<Worst *, double, double, double>{&worst[1], from16(dk.at(b, j, hk, e)), exactK[x], naiveK[x]},
                {&worst[2], from16(dv.at(b, j, hk, e)), exactV[x], naiveV[x]}}) {
            w->finite &= std::isfinite(got);
            w->ours = std::max(w->ours, std::abs(got - exact));
            w->naive = std::max(w->naive, std::abs(naive - exact));
          }
        }
    }
  const char *names[] = {"dq", "dk", "dv"};
  for (int g = 0; g < 3; ++g) {
    EXPECT_TRUE(worst[g].finite) << c << ": " << names[g] << " has NaN/Inf or unwritten elements";
    EXPECT_LE(worst[g].ours, 3 * worst[g].naive + (bf16 ? 8e-3 : 2e-3))
        << c << ": " << names[g] << " (naive " << worst[g].naive << ")";
  }

  // Deterministic: a second backward writes the same bits (the interpreter's bulk adds run in
  // order, so the added dQ is repeatable here too).
  Buffer dq2 = make(c.n_q, c.heads_q), dk2 = make(c.n_kv, c.heads_kv), dv2 = make(c.n_kv, c.heads_kv);
  attention_backward(q.view, k.view, v.view, o.view, lse_view, dout.view, dq2.view, dk2.view, dv2.view, options);
  EXPECT_EQ(dq.memory.data, dq2.memory.data);
  EXPECT_EQ(dk.memory.data, dk2.memory.data);
  EXPECT_EQ(dv.memory.data, dv2.memory.data);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionBackwardApi,
    ::testing::Values(Case{1, 17, 17, 2, 2, 64, false, false, DType::f16},
                      Case{1, 40, 70, 4, 2, 32, true, true, DType::bf16},  // GQA, BHSD
                      Case{1, 70, 30, 1, 1, 128, true, false, DType::f16}, // 40 rows see no key
                      Case{2, 33, 50, 2, 1, 96, false, false, DType::bf16}, // MQA, padded d
                      Case{1, 20, 40, 1, 1, 256, true, true, DType::f16},
                      Case{1, 40, 70, 4, 2, 64, true, true, DType::f16, "BLOCK_POINTERS"},
                      Case{1, 70, 45, 6, 2, 128, false, false, DType::bf16, "BLOCK_POINTERS"},
                      Case{1, 70, 30, 1, 1, 128, true, false, DType::f16, nullptr, true}, // 40 rows see no key
                      Case{2, 33, 50, 4, 2, 64, false, true, DType::bf16, nullptr, true},  // GQA, BHSD
                      Case{1, 70, 45, 6, 2, 128, false, false, DType::f16, "BLOCK_POINTERS", true},
                      // scores [queries, keys]: ragged, causal with rows that see no key, GQA
                      Case{1, 70, 45, 6, 2, 128, false, false, DType::f16, "QUERIES_IN_ROWS", true},
                      Case{1, 70, 30, 1, 1, 128, true, true, DType::bf16, "QUERIES_IN_ROWS", true},
                      // d = 64 (dQ's columns split inside a swizzle atom), causal with more
                      // keys than queries: blocks with and without the mask branch, GQA
                      Case{1, 200, 330, 4, 2, 64, true, false, DType::f16, "QUERIES_IN_ROWS", true},
                      // the same config in the deterministic pass: it adds no dQ
                      Case{1, 70, 30, 1, 1, 128, true, false, DType::f16, "QUERIES_IN_ROWS"}));

class AttentionBackwardErrors : public Interpreted<> {};

TEST_F(AttentionBackwardErrors, NameTheArgumentAndTheProblem) {
  Buffer q(DType::f16, 1, 16, 2, 32, false), k(DType::f16, 1, 16, 2, 32, false), v(DType::f16, 1, 16, 2, 32, false),
      o(DType::f16, 1, 16, 2, 32, false), dout(DType::f16, 1, 16, 2, 32, false), dq(DType::f16, 1, 16, 2, 32, false),
      dk(DType::f16, 1, 16, 2, 32, false), dv(DType::f16, 1, 16, 2, 32, false);
  Registered<float> lse(std::vector<float>(32));
  TensorView lse_view{lse.ptr(), DType::f32, {1, 2, 16}, {}, DeviceType::cpu};
  AttentionOptions options;
  auto expectError = [&](const TensorView &dq_view, const TensorView &dk_view, const std::string &needle) {
    try {
      attention_backward(q.view, k.view, v.view, o.view, lse_view, dout.view, dq_view, dk_view, dv.view, options);
      ADD_FAILURE() << "no error; expected one saying: " << needle;
    } catch (const Error &e) {
      EXPECT_THAT(e.what(), HasSubstr(needle));
    }
  };
  TensorView bad = dk.view;
  bad.shape[1] = 15;
  expectError(dq.view, bad, "attention_backward: dk [1, 15, 2, 32] must have k's shape [1, 16, 2, 32]");
  expectError(q.view, dk.view, "attention_backward: dq overlaps q");
  TensorView alias = dq.view;
  expectError(dq.view, alias, "attention_backward: dk overlaps dq");
  bad = dq.view;
  bad.dtype = DType::bf16;
  expectError(bad, dk.view, "attention_backward: dq is bf16 but q is f16");
  options.scale = -1.0;
  expectError(dq.view, dk.view, "attention_backward: scale must be positive and finite, got -1.0");
  options.scale.reset();
  options.queries_config = attention_backward_configs(64, false, BackwardPass::queries).front();
  expectError(dq.view, dk.view, "is not for head_dim 32, not causal (take one of attention_backward_configs(queries))");
  options.queries_config.reset();
  options.keys_values_config = attention_backward_configs(32, true, BackwardPass::keys_values).front();
  expectError(dq.view, dk.view, "is not for head_dim 32, not causal (take one of attention_backward_configs(keys_values))");
  options.keys_values_config = attention_backward_configs(32, false, BackwardPass::keys_values).front();
  options.keys_values_config->set("PERSISTENT", 1);
  expectError(dq.view, dk.view, "PERSISTENT is only for the forward passes (dense and block-sparse)");
}

// The causal kernels' heaviest-first order (detail::gridBlock): over a grid (5, 7) with chunks
// of 3 heads (the last one ragged), every (rank, batch-head) exactly once, in order of the
// programs' start: chunk by chunk, rank by rank within a chunk, its heads fastest.
TEST(AttentionGrid, HeaviestFirstTakesEveryBlockOnceChunkByChunk) {
  const int blocks = 5, heads = 7;
  dsl::Kernel order = dsl::kernel("grid_order", [](dsl::Ptr<dsl::i32> out, dsl::Long bytes_per_head) {
    const detail::GridBlock block = detail::gridBlock(true, bytes_per_head);
    dsl::Tile started = dsl::program_id(1) * dsl::num_programs(0) + dsl::program_id(0);
    dsl::store(out + started * 2, block.rank);
    dsl::store(out + started * 2 + 1, block.batch_head);
  });
  Registered<int32_t> out(std::vector<int32_t>(blocks * heads * 2, -1));
  std::vector<dsl::LaunchArg> args{out.ptr(), int64_t((8 << 20) / 3)};
  interpreter::run(order.trace({}), {blocks, heads}, args.data(), args.size());
  std::vector<int32_t> expected;
  for (int first = 0; first < heads; first += 3)
    for (int rank = 0; rank < blocks; ++rank)
      for (int head = first; head < std::min(first + 3, heads); ++head)
        expected.insert(expected.end(), {rank, head});
  EXPECT_EQ(out.data, expected);
}

// The persistent causal forward's plan (detail::plan_causal_schedule): every tile once, each
// program's tiles chunk by chunk and heaviest first within a chunk, and the programs' work
// (keys seen + BLOCK_M a tile) within one tile's work of each other; on the H200's shapes
// within 1% of the mean, where the static order reaches 1.04x (d = 64) and 1.14x (d = 128).
TEST(AttentionSchedule, EveryTileOnceBalancedChunkByChunk) {
  struct Shape {
    int64_t batch_heads, n_q, n_kv, block_m, programs, chunk_heads;
    double bound; // max work / mean, 0 for the list-scheduling bound alone
  };
  for (const Shape &c : {Shape{128, 4096, 4096, 128, 132, 8, 1.01}, Shape{64, 4096, 4096, 128, 132, 4, 1.01},
                         Shape{32, 16384, 16384, 128, 132, 2, 1.01}, Shape{7, 300, 1000, 64, 5, 3, 0},
                         Shape{3, 1000, 300, 64, 4, 2, 0}, Shape{1, 100, 100, 64, 132, 1, 0}}) {
    SCOPED_TRACE("batch_heads " + std::to_string(c.batch_heads) + ", n_q " + std::to_string(c.n_q) + ", n_kv " +
                 std::to_string(c.n_kv) + ", programs " + std::to_string(c.programs));
    const std::vector<int32_t> plan =
        detail::plan_causal_schedule(c.batch_heads, c.n_q, c.n_kv, c.block_m, c.programs, c.chunk_heads);
    const int64_t blocks = (c.n_q + c.block_m - 1) / c.block_m, tiles = blocks * c.batch_heads;
    ASSERT_EQ(int64_t(plan.size()), c.programs + 1 + tiles);
    EXPECT_EQ(plan[0], 0);
    EXPECT_EQ(plan[c.programs], tiles);
    auto work = [&](int32_t tile) {
      return std::clamp<int64_t>((tile % blocks + 1) * c.block_m + c.n_kv - c.n_q, 0, c.n_kv) + c.block_m;
    };
    std::vector<int> seen(tiles, 0);
    int64_t most = 0, total = 0, heaviest = 0;
    for (int64_t p = 0; p < c.programs; ++p) {
      ASSERT_LE(plan[p], plan[p + 1]);
      int64_t load = 0;
      for (int32_t i = plan[p]; i < plan[p + 1]; ++i) {
        const int32_t tile = plan[c.programs + 1 + i];
        ASSERT_GE(tile, 0);
        ASSERT_LT(tile, tiles);
        ++seen[tile];
        load += work(tile);
        heaviest = std::max(heaviest, work(tile));
        if (i > plan[p]) { // chunk by chunk, heaviest block first within one
          const int32_t before = plan[c.programs + i];
          const int64_t chunk = tile / blocks / c.chunk_heads, chunkBefore = before / blocks / c.chunk_heads;
          EXPECT_TRUE(chunk > chunkBefore || (chunk == chunkBefore && tile % blocks <= before % blocks))
              << "program " << p << ": " << before << " then " << tile;
        }
      }
      most = std::max(most, load);
      total += load;
    }
    EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), tiles);
    const double mean = double(total) / c.programs;
    EXPECT_LE(most, mean + heaviest);
    if (c.bound > 0) {
      EXPECT_LE(most / mean, c.bound);
    }
  }
}

// The tuning key rounds n_q, n_kv and batch x heads up to powers of two: a few heads of one
// batch do not share the tuning of many (their programs leave SMs idle; other blocks win).
TEST(AttentionTuningKey, SeparatesFewHeadsFromMany) {
  auto key = [](int64_t batches, int64_t heads, int64_t n_q, int64_t n_kv) {
    std::vector<dsl::LaunchArg> args(9, int64_t(0)); // n_q at 3, n_kv, heads_q, ..., batches at 8
    args[3] = n_q;
    args[4] = n_kv;
    args[5] = heads;
    args[8] = batches;
    return detail::attention_tuning_key(args, 3, 8);
  };
  EXPECT_EQ(key(2, 32, 8192, 8192), "nq8192,nkv8192,bh64");
  EXPECT_EQ(key(1, 60, 5000, 4097), key(2, 32, 8192, 8192));
  EXPECT_EQ(key(1, 2, 4224, 4224), "nq8192,nkv8192,bh2");
  EXPECT_EQ(key(3, 1, 1, 300), "nq1,nkv512,bh4");
}

// More tiles than the kernel's int32 indices of their records reach: an error, not a wrapped
// plan. 2^29 tiles are one too many.
TEST(AttentionSchedule, TooManyTilesIsAnError) {
  for (auto [heads, n, message] :
       {std::tuple{int64_t(1) << 20, int64_t(1) << 18, "4096 query blocks of 1048576 heads"},
        std::tuple{int64_t(1) << 11, int64_t(1) << 24, "262144 query blocks of 2048 heads"}}) {
    try {
      detail::plan_causal_schedule(heads, n, n, 64, 132, 1);
      ADD_FAILURE() << "planned " << message;
    } catch (const Error &e) {
      EXPECT_THAT(e.what(), HasSubstr(std::string(message) + " are more tiles than a persistent program's plan holds"));
    }
  }
}

} // namespace
