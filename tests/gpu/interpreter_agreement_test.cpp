// The interpreter and the GPU agree on the same inputs: the interpreter runs the tile IR
// before layouts, so a disagreement points at the layout-dependent compiler (layouts,
// conversions, vectorization, pipelining, lowering).
#include "attention_check.h"
#include "layernorm.h"
#include "matmul.h"
#include "softmax.h"
#include "vector_add.h"
#include "gpu_util.h"

#include "tessera/compiler/Interpreter.h"
#include "tessera/kernels/attention.h"
#include "tessera/kernels/block_sparse.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <random>
#include <set>

namespace {

using namespace tessera;
using namespace tessera::dsl;
using tessera::testing::GpuTest;

/// `body` through the interpreter (its DeviceBuffers become host memory).
template <typename T> T interpret(const std::function<T()> &body) {
  const char *previous = std::getenv("TESSERA_INTERPRET");
  std::string saved = previous ? previous : "";
  auto restore = [&] { previous ? setenv("TESSERA_INTERPRET", saved.c_str(), 1) : unsetenv("TESSERA_INTERPRET"); };
  setenv("TESSERA_INTERPRET", "1", 1);
  T interpreted;
  try {
    interpreted = body();
  } catch (...) {
    restore();
    throw;
  }
  restore();
  return interpreted;
}

/// `body` on the GPU and then through the interpreter.
template <typename T> std::pair<T, T> on_both(const std::function<T()> &body) {
  T gpu = body();
  return {gpu, interpret<T>(body)};
}

std::vector<uint16_t> random_bits(size_t n, unsigned seed, DType dtype) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<uint16_t> values(n);
  for (uint16_t &x : values)
    x = to_16bit(normal(rng), dtype);
  return values;
}

jit::DeviceBuffer upload16(const std::vector<uint16_t> &host) {
  jit::DeviceBuffer buffer(host.size() * 2);
  buffer.copy_from_host(host.data(), host.size() * 2);
  return buffer;
}

std::vector<uint16_t> download16(const jit::DeviceBuffer &buffer, size_t n) {
  std::vector<uint16_t> host(n);
  buffer.copy_to_host(host.data(), n * 2);
  return host;
}

using InterpreterAgreement = GpuTest;

TEST_F(InterpreterAgreement, AttentionForward) {
  for (auto [heads, n_q, n_kv, d] : std::vector<std::tuple<int, int, int, int>>{
           {2, 113, 77, 64}, {1, 1, 130, 32}, {2, 256, 256, 64}, {1, 65, 200, 128}}) {
    auto [gpu, interpreted] = on_both<examples::AttentionCheck>(
        [&, heads = heads, n_q = n_q, n_kv = n_kv, d = d] { return examples::check_attention(heads, n_q, n_kv, d, 5); });
    EXPECT_TRUE(gpu.passed) << "GPU error " << gpu.max_error << " vs naive " << gpu.naive_error;
    EXPECT_TRUE(interpreted.passed) << "interpreter error " << interpreted.max_error;
    double worst = 0, worst_lse = 0;
    for (size_t i = 0; i < gpu.output.size(); ++i)
      worst = std::max(worst, double(std::abs(from_half(gpu.output[i]) - from_half(interpreted.output[i]))));
    for (size_t i = 0; i < gpu.lse.size(); ++i)
      worst_lse = std::max(worst_lse, double(std::abs(gpu.lse[i] - interpreted.lse[i])));
    // Both sum in f32 in different orders; outputs are fp16 (2^-11 relative).
    EXPECT_LE(worst, 2e-3) << heads << "x" << n_q << "x" << n_kv << "x" << d;
    EXPECT_LE(worst_lse, 1e-4) << heads << "x" << n_q << "x" << n_kv << "x" << d;
  }
}

TEST_F(InterpreterAgreement, MatmulBf16) {
  const int M = 200, N = 136, K = 328;
  auto a = random_bits(size_t(M) * K, 1, DType::bf16), b = random_bits(size_t(K) * N, 2, DType::bf16);
  for (const Config &config : {examples::matmul_configs()[0], examples::matmul_configs()[9]}) {
    auto [gpu, interpreted] = on_both<std::vector<uint16_t>>([&] {
      auto da = upload16(a), db = upload16(b);
      jit::DeviceBuffer c(size_t(M) * N * 2);
      c.fill_bytes(0xff);
      examples::matmul<dsl::bf16>().launch(examples::matmul_grid(config, M, N), config, da.data(), db.data(),
                                           c.data(), M, N, K, K, 1, N, 1, N, 1);
      jit::synchronize();
      return download16(c, size_t(M) * N);
    });
    for (size_t i = 0; i < gpu.size(); ++i) {
      float g = from_bf16(gpu[i]), want = from_bf16(interpreted[i]);
      ASSERT_NEAR(g, want, 8e-3 * std::abs(want) + 1e-2) << config.str() << " at " << i / N << "," << i % N;
    }
  }
}

TEST_F(InterpreterAgreement, SoftmaxF16) {
  const int rows = 33, cols = 1000;
  auto x = random_bits(size_t(rows) * cols, 3, DType::f16);
  auto [gpu, interpreted] = on_both<std::vector<uint16_t>>([&] {
    auto in = upload16(x);
    jit::DeviceBuffer out(size_t(rows) * cols * 2);
    out.fill_bytes(0xff);
    examples::softmax<f16>().launch({rows}, {{"BLOCK", 1024}}, in.data(), out.data(), cols, int64_t(cols),
                                    int64_t(cols));
    jit::synchronize();
    return download16(out, size_t(rows) * cols);
  });
  for (size_t i = 0; i < gpu.size(); ++i) {
    float want = from_half(interpreted[i]);
    ASSERT_NEAR(from_half(gpu[i]), want, 2e-3 * want + 1e-6) << "at " << i;
  }
}

TEST_F(InterpreterAgreement, VectorAddAndLayerNorm) {
  const int n = 5000, rows = 7, cols = 1000;
  std::vector<float> x(n), y(n);
  for (int i = 0; i < n; ++i)
    x[i] = 0.25f * float(i % 97) - 3.0f, y[i] = 1.0f / float(i + 1);
  auto added = on_both<std::vector<float>>([&] {
    jit::DeviceBuffer dx(n * 4), dy(n * 4), out(n * 4);
    dx.copy_from_host(x.data(), n * 4);
    dy.copy_from_host(y.data(), n * 4);
    out.fill_bytes(0xff);
    examples::vector_add().launch({uint32_t(cdiv(n, 1024))}, {{"BLOCK", 1024}}, dx.data(), dy.data(), out.data(), n);
    jit::synchronize();
    std::vector<float> host(n);
    out.copy_to_host(host.data(), n * 4);
    return host;
  });
  EXPECT_EQ(added.first, added.second); // one rounding each: bitwise equal

  auto input = random_bits(size_t(rows) * cols, 4, DType::f16), weight = random_bits(cols, 5, DType::f16),
       bias = random_bits(cols, 6, DType::f16);
  auto [gpu, interpreted] = on_both<std::vector<uint16_t>>([&] {
    auto dx = upload16(input), dw = upload16(weight), db = upload16(bias);
    jit::DeviceBuffer out(input.size() * 2);
    out.fill_bytes(0xff);
    const float eps = 1e-5f;
    examples::layernorm<f16>().launch({uint32_t(rows)}, {{"BLOCK", 1024}}, dx.data(), dw.data(), db.data(), out.data(),
                                      cols, eps);
    jit::synchronize();
    return download16(out, input.size());
  });
  for (size_t i = 0; i < gpu.size(); ++i) {
    float want = from_half(interpreted[i]);
    ASSERT_NEAR(from_half(gpu[i]), want, 2e-3 * std::abs(want) + 2e-3) << "at " << i / cols << "," << i % cols;
  }
}

// The dense backward (delta, dK/dV and dQ kernels): GQA, causal with n_q != n_kv, ragged ends.
TEST_F(InterpreterAgreement, AttentionBackward) {
  const int n_q = 130, n_kv = 200, heads = 4, kv_heads = 2, d = 64;
  const size_t q_count = size_t(n_q) * heads * d, kv_count = size_t(n_kv) * kv_heads * d;
  auto q = random_bits(q_count, 31, DType::f16), k = random_bits(kv_count, 32, DType::f16),
       v = random_bits(kv_count, 33, DType::f16), dout = random_bits(q_count, 34, DType::f16);
  using Grads = std::vector<std::vector<uint16_t>>;
  auto [gpu, interpreted] = on_both<Grads>([&] {
    const auto where = interpreter::enabled() ? kernels::DeviceType::cpu : kernels::DeviceType::cuda;
    jit::DeviceBuffer qd = upload16(q), kd = upload16(k), vd = upload16(v), dod = upload16(dout), o(q_count * 2),
                      lse(heads * n_q * 4), dq(q_count * 2), dk(kv_count * 2), dv(kv_count * 2);
    for (auto *g : {&dq, &dk, &dv})
      g->fill_bytes(0xff);
    auto view = [&](const jit::DeviceBuffer &b, int n, int h) {
      return kernels::TensorView{b.data(), DType::f16, {1, n, h, d}, {}, where};
    };
    const kernels::TensorView lseView{lse.data(), DType::f32, {1, heads, n_q}, {}, where};
    kernels::AttentionOptions options;
    options.causal = true;
    kernels::attention_forward(view(qd, n_q, heads), view(kd, n_kv, kv_heads), view(vd, n_kv, kv_heads),
                               view(o, n_q, heads), lseView, options);
    kernels::attention_backward(view(qd, n_q, heads), view(kd, n_kv, kv_heads), view(vd, n_kv, kv_heads),
                                view(o, n_q, heads), lseView, view(dod, n_q, heads), view(dq, n_q, heads),
                                view(dk, n_kv, kv_heads), view(dv, n_kv, kv_heads), options);
    return Grads{download16(dq, q_count), download16(dk, kv_count), download16(dv, kv_count)};
  });
  for (size_t g = 0; g < 3; ++g) {
    double worst = 0, largest = 1;
    for (size_t i = 0; i < gpu[g].size(); ++i) {
      worst = std::max(worst, double(std::abs(from_half(gpu[g][i]) - from_half(interpreted[g][i]))));
      largest = std::max(largest, double(std::abs(from_half(interpreted[g][i]))));
    }
    EXPECT_LE(worst, 4e-3 * largest) << "gradient " << g << " (dq, dk, dv)";
  }
}

// Block-sparse attention with a mask and a score read from tensors (document ids, a bias
// table), mask blocks of 128 visited in steps of the config's blocks, ragged ends.
// d = 64 in the default (plain) order, d = 128 in the dense forward's default config:
// FlashAttention-3's order (OVERLAP_SOFTMAX).
TEST_F(InterpreterAgreement, BlockSparseAttentionWithModifiers) {
  for (const int d : {64, 128}) {
    SCOPED_TRACE("d = " + std::to_string(d));
    const int n = 300, heads = 2;
    std::vector<int32_t> documents(n);
    for (int i = 0; i < n; ++i)
      documents[i] = i < 90 ? 0 : i < 260 ? 1 : 2;
    std::vector<float> table(2 * n);
    for (size_t i = 0; i < table.size(); ++i)
      table[i] = 0.02f * float(i % 13) - 0.1f;
    kernels::Modifiers mods;
    mods.mask_mod = kernels::mask_mods::documents(n, true);
    mods.score_mod = [](const Tile &s, const Tile &, const Tile &, const Tile &q, const Tile &kv, const Tile &bias) {
      return 8.0 * tanh(s / 8.0) + load(bias + (kv - q + 299));
    };
    kernels::BlockSparseAttention attention(mods);
    auto q = random_bits(size_t(n) * heads * d, 11, DType::f16), k = random_bits(q.size(), 12, DType::f16),
         v = random_bits(q.size(), 13, DType::f16);
    using Result = std::pair<std::vector<uint16_t>, std::vector<float>>;
    auto [gpu, interpreted] = on_both<Result>([&] {
      kernels::BlockMask mask = kernels::BlockMask::documents(1, n, documents, true);
      jit::DeviceBuffer qd = upload16(q), kd = upload16(k), vd = upload16(v), o(q.size() * 2), lse(heads * n * 4),
                        ids(n * 4), bias(table.size() * 4);
      ids.copy_from_host(documents.data(), n * 4);
      bias.copy_from_host(table.data(), table.size() * 4);
      const auto where = interpreter::enabled() ? kernels::DeviceType::cpu : kernels::DeviceType::cuda;
      auto view = [&](jit::DeviceBuffer &b) {
        return kernels::TensorView{b.data(), DType::f16, {1, n, heads, d}, {}, where};
      };
      kernels::SparseInputs inputs;
      inputs.mask_aux = ids.data();
      inputs.score_aux = bias.data();
      kernels::AttentionOptions options;
      if (d == 128)
        options.config = kernels::attention_forward_configs(d, false).front();
      attention.forward(view(qd), view(kd), view(vd), view(o),
                        {lse.data(), DType::f32, {1, heads, n}, {}, where}, mask, options, inputs);
      Result result{download16(o, q.size()), std::vector<float>(heads * n)};
      lse.copy_to_host(result.second.data(), heads * n * 4);
      return result;
    });
    double worst = 0, worst_lse = 0;
    for (size_t i = 0; i < gpu.first.size(); ++i)
      worst = std::max(worst, double(std::abs(from_half(gpu.first[i]) - from_half(interpreted.first[i]))));
    for (size_t i = 0; i < gpu.second.size(); ++i)
      worst_lse = std::max(worst_lse, double(std::abs(gpu.second[i] - interpreted.second[i])));
    EXPECT_LE(worst, 2e-3);
    EXPECT_LE(worst_lse, 1e-4);
  }
}

// The block-sparse backward (a mask read from a tensor, a softcap with its derivative):
// gradients from the GPU and from the interpreter on the same inputs.
TEST_F(InterpreterAgreement, BlockSparseBackward) {
  const int n = 300, heads = 2, d = 64;
  std::vector<int32_t> documents(n);
  for (int i = 0; i < n; ++i)
    documents[i] = i < 90 ? 0 : i < 260 ? 1 : 2;
  kernels::Modifiers mods;
  mods.mask_mod = kernels::mask_mods::documents(n, true);
  mods.score_mod = [](const Tile &s, auto &...) { return 4.0 * tanh(s / 4.0); };
  mods.score_mod_grad = [](const Tile &s, auto &...) {
    Tile t = tanh(s / 4.0);
    return 1.0 - t * t;
  };
  kernels::BlockSparseAttention attention(mods);
  const size_t count = size_t(n) * heads * d;
  std::vector<std::vector<uint16_t>> inputs;
  for (unsigned seed : {21, 22, 23, 24})
    inputs.push_back(random_bits(count, seed, DType::f16));
  using Grads = std::vector<std::vector<uint16_t>>;
  auto [gpu, interpreted] = on_both<Grads>([&] {
    kernels::BlockMask mask = kernels::BlockMask::documents(1, n, documents, true);
    const auto where = interpreter::enabled() ? kernels::DeviceType::cpu : kernels::DeviceType::cuda;
    std::vector<jit::DeviceBuffer> in;
    for (const auto &host : inputs)
      in.push_back(upload16(host));
    jit::DeviceBuffer o(count * 2), lse(heads * n * 4), ids(n * 4), dq(count * 2), dk(count * 2), dv(count * 2);
    ids.copy_from_host(documents.data(), n * 4);
    auto view = [&](const jit::DeviceBuffer &b) {
      return kernels::TensorView{b.data(), DType::f16, {1, n, heads, d}, {}, where};
    };
    const kernels::TensorView lseView{lse.data(), DType::f32, {1, heads, n}, {}, where};
    kernels::SparseInputs sparse;
    sparse.mask_aux = ids.data();
    attention.forward(view(in[0]), view(in[1]), view(in[2]), view(o), lseView, mask, {}, sparse);
    attention.backward(view(in[0]), view(in[1]), view(in[2]), view(o), lseView, view(in[3]), view(dq), view(dk),
                       view(dv), mask, {}, sparse);
    return Grads{download16(dq, count), download16(dk, count), download16(dv, count)};
  });
  // Both sum in f32 in different orders into fp16 gradients: a few fp16 ulps of the largest.
  for (size_t g = 0; g < 3; ++g) {
    double worst = 0, largest = 1;
    for (size_t i = 0; i < count; ++i) {
      worst = std::max(worst, double(std::abs(from_half(gpu[g][i]) - from_half(interpreted[g][i]))));
      largest = std::max(largest, double(std::abs(from_half(interpreted[g][i]))));
    }
    EXPECT_LE(worst, 4e-3 * largest) << "gradient " << g << " (dq, dk, dv)";
  }
}

// Block pointers at the block indices the mask lists (the TMA's copies, from producer warps
// where the config has them), on the GPU against the interpreter: every block-pointer config of
// the block-sparse forward's space (also persistent, and with ping-pong, where they apply) and of
// the backward's; random 128x128 blocks with an empty query block, partial blocks through a
// mask_mod, ragged ends and a GQA group. n = 304: a 16-multiple, whose LSE and delta rows the
// dK/dV pass's TMA copies too (300 in BlockSparseBackward keeps them on pointers). In shares of
// a few dozen configs' runs, one a test, so that the sharded GPU runs compile them side by side:
// as one test (125 configs) it ran past 290 s on an H100 machine, compiling one at a time.
enum class BlockPointerShare { tuned, forward, persistent_forward, backward };
struct BlockPointerCase {
  int d;
  BlockPointerShare share;
  int part = 0, parts = 1; // the share's configs i with i % parts == part
};
class BlockSparseEveryBlockPointerConfig : public GpuTest, public ::testing::WithParamInterface<BlockPointerCase> {};

TEST_P(BlockSparseEveryBlockPointerConfig, AgreesWithTheInterpreter) {
  const auto [d, share, part, parts] = GetParam();
  const int n = 304, heads_q = 2, heads_kv = 1;
  std::vector<kernels::BlockMask::State> states(heads_q * 3 * 3);
  std::mt19937 rng(17);
  for (auto &state : states)
    state = kernels::BlockMask::State(rng() % 3);
  for (int j = 0; j < 3; ++j)
    states[3 + j] = kernels::BlockMask::State::skip; // query block 1 of head 0 sees nothing
  // Its block sizes pick the spaces; each run makes its own (its indices on the device or not).
  const kernels::BlockMask blocks(1, heads_q, n, n, 128, 128, states);
  kernels::BlockSparseAttention attention(kernels::Modifiers{
      [](const Tile &, const Tile &h, const Tile &q, const Tile &kv, const Tile &) { return (q + 3 * kv + h) % 4 != 0; },
      {}, {}});
  const size_t count_q = size_t(n) * heads_q * d, count_kv = size_t(n) * heads_kv * d;
  const auto q = random_bits(count_q, 31, DType::f16), k = random_bits(count_kv, 32, DType::f16),
             v = random_bits(count_kv, 33, DType::f16), dout = random_bits(count_q, 34, DType::f16);
  using Outputs = std::vector<std::vector<float>>; // o, lse, dq, dk, dv
  auto run = [&](const kernels::AttentionOptions &forward, const kernels::AttentionOptions &backward) {
    kernels::BlockMask mask(1, heads_q, n, n, 128, 128, states);
    const auto where = interpreter::enabled() ? kernels::DeviceType::cpu : kernels::DeviceType::cuda;
    jit::DeviceBuffer qd = upload16(q), kd = upload16(k), vd = upload16(v), dod = upload16(dout), o(count_q * 2),
                      lse(heads_q * n * 4), dq(count_q * 2), dk(count_kv * 2), dv(count_kv * 2);
    auto view = [&](const jit::DeviceBuffer &b, int heads) {
      return kernels::TensorView{b.data(), DType::f16, {1, n, heads, d}, {}, where};
    };
    const kernels::TensorView lseView{lse.data(), DType::f32, {1, heads_q, n}, {}, where};
    attention.forward(view(qd, heads_q), view(kd, heads_kv), view(vd, heads_kv), view(o, heads_q), lseView, mask,
                      forward);
    attention.backward(view(qd, heads_q), view(kd, heads_kv), view(vd, heads_kv), view(o, heads_q), lseView,
                       view(dod, heads_q), view(dq, heads_q), view(dk, heads_kv), view(dv, heads_kv), mask, backward);
    auto halves = [](const jit::DeviceBuffer &b, size_t count) {
      std::vector<float> out;
      for (uint16_t x : download16(b, count))
        out.push_back(from_half(x));
      return out;
    };
    Outputs out{halves(o, count_q), std::vector<float>(heads_q * n), halves(dq, count_q), halves(dk, count_kv),
                halves(dv, count_kv)};
    lse.copy_to_host(out[1].data(), heads_q * n * 4);
    return out;
  };
  const Outputs interpreted = interpret<Outputs>([&] { return run({}, {}); });
  auto expectAgreement = [&](const Outputs &gpu, const std::string &what) {
    // f32 sums in different orders into fp16: a few ulps of the largest value; lse in f32.
    const char *names[] = {"o", "lse", "dq", "dk", "dv"};
    for (size_t t = 0; t < gpu.size(); ++t) {
      double worst = 0, largest = 1;
      for (size_t i = 0; i < gpu[t].size(); ++i) {
        if (std::isinf(interpreted[t][i]) && gpu[t][i] == interpreted[t][i])
          continue; // the empty query block's lse, -inf on both
        worst = std::max(worst, double(std::abs(gpu[t][i] - interpreted[t][i])));
        largest = std::max(largest, double(std::abs(interpreted[t][i])));
      }
      EXPECT_LE(worst, (t == 1 ? 1e-4 : 4e-3) * largest) << names[t] << ", " << what;
    }
  };
  if (share == BlockPointerShare::tuned)
    return expectAgreement(run({}, {}), "tuned configs");
  int seen = 0; // the share's configs, every part's
  auto mine = [&] { return seen++ % parts == part; }; // the next config is this part's
  if (share == BlockPointerShare::backward) {
    for (auto pass : {kernels::BackwardPass::keys_values, kernels::BackwardPass::queries})
      for (const dsl::Config &config : kernels::block_sparse_backward_configs(d, blocks, pass)) {
        if (!config.get("BLOCK_POINTERS", 0) || !mine())
          continue;
        kernels::AttentionOptions backward;
        (pass == kernels::BackwardPass::keys_values ? backward.keys_values_config : backward.queries_config) = config;
        expectAgreement(run({}, backward), "backward " + config.str());
      }
    EXPECT_GE(seen, 2 * parts) << "backward block-pointer configs: at least 2 a part";
    return;
  }
  // The forward's, also (persistent) beside a producer warpgroup; where two consumer warpgroups
  // compute, also taking turns at their wgmma (ping_pong); in FlashAttention-3's order also
  // with the last deferred step as a loop of one (LAST_PRODUCT_IN_LOOP), and (persistent) with
  // the accumulator rescaled before the next Q K^T (RESCALE_AT_SETTLE); each config once.
  const int persistent = share == BlockPointerShare::persistent_forward;
  std::set<std::string> tried;
  for (dsl::Config config : kernels::block_sparse_forward_configs(d, blocks))
    for (int ping_pong : {0, 1})
      for (int last_in_loop : {0, 1})
        for (int rescale_at_settle : {0, 1}) {
          const bool specialized = config.get("warp_specialize", 0) != 0,
                     overlapped = config.get("OVERLAP_SOFTMAX", 0) != 0;
          if (!config.get("BLOCK_POINTERS", 0) || (persistent && !specialized) ||
              (ping_pong && !kernels::ping_pong_applies(config)) || (last_in_loop && !overlapped) ||
              (rescale_at_settle && (!overlapped || !persistent)))
            continue;
          config.set("PERSISTENT", persistent);
          config.set("LAST_PRODUCT_IN_LOOP", last_in_loop);
          config.set("RESCALE_AT_SETTLE", rescale_at_settle);
          config.set("ping_pong", ping_pong);
          if (!tried.insert(config.str()).second || !mine())
            continue;
          kernels::AttentionOptions forward;
          forward.config = config;
          expectAgreement(run(forward, {}), "forward " + config.str());
        }
  EXPECT_GE(seen, 2 * parts) << "forward block-pointer configs: at least 2 a part";
}

/// At d = 64 15, 22 and 14 configs (forward, persistent forward, backward), at d = 128 24, 35, 15:
/// in parts of at most 12.
std::vector<BlockPointerCase> blockPointerCases() {
  std::vector<BlockPointerCase> cases;
  for (int d : {64, 128}) {
    cases.push_back({d, BlockPointerShare::tuned});
    for (auto [share, parts] : {std::pair{BlockPointerShare::forward, 2}, {BlockPointerShare::persistent_forward, 3},
                                {BlockPointerShare::backward, 2}})
      for (int part = 0; part < parts; ++part)
        cases.push_back({d, share, part, parts});
  }
  return cases;
}

std::string blockPointerCaseName(const ::testing::TestParamInfo<BlockPointerCase> &info) {
  const char *shares[] = {"tuned", "forward", "persistent_forward", "backward"};
  const BlockPointerCase &c = info.param;
  return "d" + std::to_string(c.d) + "_" + shares[int(c.share)] +
         (c.parts > 1 ? "_" + std::to_string(c.part + 1) + "of" + std::to_string(c.parts) : "");
}

INSTANTIATE_TEST_SUITE_P(InterpreterAgreement, BlockSparseEveryBlockPointerConfig,
                         ::testing::ValuesIn(blockPointerCases()), blockPointerCaseName);

// BlockMask::from_mask_mod on the GPU classifies every block as the host predicate does.
TEST_F(InterpreterAgreement, BlockMaskFromMaskModOnTheGpu) {
  kernels::BlockMask gpu = kernels::BlockMask::from_mask_mod(
      2, 3, 1000, 1300,
      [](const Tile &, const Tile &h, const Tile &q, const Tile &kv, const Tile &) {
        return kv <= q + 300 && (q - kv < 400 + h * 200);
      },
      nullptr, 128, 64);
  kernels::BlockMask host = kernels::BlockMask::from_predicate(
      2, 3, 1000, 1300, [](auto, auto h, auto q, auto kv) { return kv <= q + 300 && q - kv < 400 + h * 200; }, 128,
      64);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 3; ++h)
      for (int64_t i = 0; i < host.q_blocks(); ++i)
        for (int64_t j = 0; j < host.kv_blocks(); ++j)
          ASSERT_EQ(int(gpu.state(b, h, i, j)), int(host.state(b, h, i, j))) << b << " " << h << " " << i << " " << j;
}

} // namespace
