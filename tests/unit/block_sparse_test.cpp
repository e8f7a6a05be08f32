// Block-sparse attention through the interpreter against the fp64 reference with the same mask
// (full blocks whole, partial blocks through the mask predicate, the rest skipped) and score
// modifier: the ready-made masks, random block maps per head, rows with nothing to attend,
// mask_mod and score_mod reading tensors; the builders against from_predicate; bad input.
#include "tessera/kernels/block_sparse.h"

#include "attention_check.h"
#include "interpreter_util.h"

#include <tessera/dsl/fp16.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>
#include <set>
#include <tuple>

namespace {

using namespace tessera;
using namespace tessera::kernels;
using dsl::DType;
using dsl::Tile;
using ::testing::HasSubstr;
using tessera::testing::Interpreted;
using tessera::testing::Registered;

/// Host predicate and score of one element, as the DSL modifiers compute them.
using HostMask = std::function<bool(int b, int h, int q, int kv)>;
using HostScore = std::function<double(int b, int h, int q, int kv, double score)>;

struct Problem {
  int batch, n_q, n_kv, heads_q, heads_kv, d;
};

std::vector<uint16_t> randomHalves(std::mt19937 &rng, size_t count) {
  std::normal_distribution<float> normal;
  std::vector<uint16_t> bits(count);
  for (uint16_t &x : bits)
    x = to_half(normal(rng));
  return bits;
}

class BlockSparse : public Interpreted<> {
protected:
  /// Runs `attention` on random f16 inputs and checks O and LSE against the reference.
  void check(const Problem &p, const BlockMask &mask, const BlockSparseAttention &attention, const HostMask &partial,
             const HostScore &score = {}, const SparseInputs &inputs = {}, const AttentionOptions &options = {}) {
    std::mt19937 rng(p.n_q * 7 + p.n_kv);
    auto tensor = [&](int n, int heads) { return randomHalves(rng, size_t(p.batch) * n * heads * p.d); };
    Registered<uint16_t> q(tensor(p.n_q, p.heads_q)), k(tensor(p.n_kv, p.heads_kv)), v(tensor(p.n_kv, p.heads_kv)),
        o(std::vector<uint16_t>(size_t(p.batch) * p.n_q * p.heads_q * p.d, 0xffff));
    Registered<float> lse(std::vector<float>(size_t(p.batch) * p.heads_q * p.n_q, NAN));
    auto view = [&](Registered<uint16_t> &r, int n, int heads) {
      return TensorView{r.ptr(), DType::f16, {p.batch, n, heads, p.d}, {}, DeviceType::cpu};
    };
    attention.forward(view(q, p.n_q, p.heads_q), view(k, p.n_kv, p.heads_kv), view(v, p.n_kv, p.heads_kv),
                      view(o, p.n_q, p.heads_q), {lse.ptr(), DType::f32, {p.batch, p.heads_q, p.n_q}, {}, DeviceType::cpu},
                      mask, options, inputs);

    const double scale = 1 / std::sqrt(double(p.d));
    double worst = 0, naive = 0, worst_lse = 0;
    for (int b = 0; b < p.batch; ++b)
      for (int h = 0; h < p.heads_q; ++h) {
        int hk = h / (p.heads_q / p.heads_kv), hm = mask.heads() == 1 ? 0 : h;
        auto modify = [&](int i, int j, double s) {
          auto state = mask.state(b, hm, i / mask.block_m(), j / mask.block_n());
          bool seen = state == BlockMask::State::full || (state == BlockMask::State::partial && partial(b, h, i, j));
          return seen ? (score ? score(b, h, i, j, s) : s) : -INFINITY;
        };
        auto ref = examples::attention_reference(examples::head_rows(q.data, b, h, p.n_q, p.heads_q, p.d).data(),
                                                 examples::head_rows(k.data, b, hk, p.n_kv, p.heads_kv, p.d).data(),
                                                 examples::head_rows(v.data, b, hk, p.n_kv, p.heads_kv, p.d).data(),
                                                 p.n_q, p.n_kv, p.d, scale, false, false, modify);
        for (int i = 0; i < p.n_q; ++i) {
          for (int e = 0; e < p.d; ++e) {
            double got = from_half(o.data[((size_t(b) * p.n_q + i) * p.heads_q + h) * p.d + e]);
            double exact = ref.exact[size_t(i) * p.d + e];
            ASSERT_TRUE(std::isfinite(got)) << "row " << i << " head " << h << ": not finite or not written";
            worst = std::max(worst, std::abs(got - exact));
            naive = std::max(naive, std::abs(ref.naive[size_t(i) * p.d + e] - exact));
          }
          float got_lse = lse.data[(size_t(b) * p.heads_q + h) * p.n_q + i];
          if (std::isinf(ref.lse[i]))
            EXPECT_TRUE(std::isinf(got_lse) && got_lse < 0) << "row " << i << " sees no key: lse " << got_lse;
          else
            worst_lse = std::max(worst_lse, std::abs(got_lse - ref.lse[i]));
        }
      }
    EXPECT_LE(worst, 2 * naive + 1e-3) << "naive " << naive;
    EXPECT_LE(worst_lse, 1e-3);
  }
};

Modifiers maskOnly(std::function<Tile(const Tile &, const Tile &, const Tile &, const Tile &, const Tile &)> mod) {
  Modifiers m;
  m.mask_mod = std::move(mod);
  return m;
}

/// Document masking (causal within each of three documents) with the ids read from a tensor.
struct Documents {
  static constexpr int n = 150;
  std::vector<int32_t> ids = [] {
    std::vector<int32_t> v(n);
    for (int i = 0; i < n; ++i)
      v[i] = i < 37 ? 0 : i < 100 ? 1 : 2;
    return v;
  }();
  Registered<int32_t> aux{ids};
  BlockMask mask = BlockMask::documents(1, n, ids, true, 32, 32);
  HostMask visible = [this](int, int, int q, int kv) { return ids[q] == ids[kv] && kv <= q; };
  SparseInputs inputs() { return {aux.ptr(), nullptr}; }
  static Modifiers modifiers() {
    Modifiers m;
    m.mask_mod = mask_mods::documents(n, true);
    return m;
  }
};

/// A relative-position bias for 64 queries and 96 keys, read by score_mod from a tensor:
/// bias(q, kv) = values[kv - q + 63].
struct BiasTable {
  std::vector<float> values = [] {
    std::vector<float> v(64 + 96);
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = 0.01f * float(i % 17) - 0.05f;
    return v;
  }();
  Registered<float> aux{values};
  double at(int q, int kv) const { return values[kv - q + 63]; }
  SparseInputs inputs() { return {nullptr, aux.ptr()}; }
  static Tile read(const Tile &table, const Tile &q, const Tile &kv) { return dsl::load(table + (kv - q + 63)); }
};

/// The backward of `attention` (mask only) on random f16 inputs against the fp64 gradients
/// with the same mask: within 3x the naive same-dtype error plus a floor, bitwise repeatable.
/// `score` (optional): the score_mod and its derivative, as the host computes them.
using HostScoreGrad = std::function<std::pair<double, double>(int b, int h, int q, int kv, double score)>;

void checkBackward(const Problem &p, const BlockMask &mask, const BlockSparseAttention &attention,
                   const HostMask &partial, const SparseInputs &inputs = {}, const HostScoreGrad &score = {},
                   const AttentionOptions &options = {}) {
  std::mt19937 rng(p.n_q * 5 + p.n_kv);
  auto tensor = [&](int n, int heads) { return randomHalves(rng, size_t(p.batch) * n * heads * p.d); };
  auto poisoned = [&](int n, int heads) { return std::vector<uint16_t>(size_t(p.batch) * n * heads * p.d, 0xffff); };
  Registered<uint16_t> q(tensor(p.n_q, p.heads_q)), k(tensor(p.n_kv, p.heads_kv)), v(tensor(p.n_kv, p.heads_kv)),
      dout(tensor(p.n_q, p.heads_q)), o(poisoned(p.n_q, p.heads_q));
  Registered<float> lse(std::vector<float>(size_t(p.batch) * p.heads_q * p.n_q, NAN));
  auto view = [&](Registered<uint16_t> &r, int n, int heads) {
    return TensorView{r.ptr(), DType::f16, {p.batch, n, heads, p.d}, {}, DeviceType::cpu};
  };
  const TensorView lseView{lse.ptr(), DType::f32, {p.batch, p.heads_q, p.n_q}, {}, DeviceType::cpu};
  attention.forward(view(q, p.n_q, p.heads_q), view(k, p.n_kv, p.heads_kv), view(v, p.n_kv, p.heads_kv),
                    view(o, p.n_q, p.heads_q), lseView, mask, {}, inputs);
  auto backward = [&] {
    Registered<uint16_t> dq(poisoned(p.n_q, p.heads_q)), dk(poisoned(p.n_kv, p.heads_kv)),
        dv(poisoned(p.n_kv, p.heads_kv));
    attention.backward(view(q, p.n_q, p.heads_q), view(k, p.n_kv, p.heads_kv), view(v, p.n_kv, p.heads_kv),
                       view(o, p.n_q, p.heads_q), lseView, view(dout, p.n_q, p.heads_q), view(dq, p.n_q, p.heads_q),
                       view(dk, p.n_kv, p.heads_kv), view(dv, p.n_kv, p.heads_kv), mask, options, inputs);
    return std::array<std::vector<uint16_t>, 3>{dq.data, dk.data, dv.data};
  };
  auto grads = backward();
  EXPECT_EQ(grads, backward()) << "not bitwise repeatable";

  const double scale = 1 / std::sqrt(double(p.d));
  const int group = p.heads_q / p.heads_kv;
  double worst[3] = {}, naive[3] = {};
  for (int b = 0; b < p.batch; ++b)
    for (int hk = 0; hk < p.heads_kv; ++hk) {
      std::vector<double> exactK(size_t(p.n_kv) * p.d), roughK(exactK.size()), exactV(exactK.size()),
          roughV(exactK.size());
      for (int h = hk * group; h < (hk + 1) * group; ++h) {
        int hm = mask.heads() == 1 ? 0 : h;
        auto seen = [&](int i, int j) {
          auto state = mask.state(b, hm, i / mask.block_m(), j / mask.block_n());
          return state == BlockMask::State::full || (state == BlockMask::State::partial && partial(b, h, i, j));
        };
        auto ref = examples::attention_backward_reference(
            examples::head_rows(q.data, b, h, p.n_q, p.heads_q, p.d).data(),
            examples::head_rows(k.data, b, hk, p.n_kv, p.heads_kv, p.d).data(),
            examples::head_rows(v.data, b, hk, p.n_kv, p.heads_kv, p.d).data(),
            examples::head_rows(dout.data, b, h, p.n_q, p.heads_q, p.d).data(), p.n_q, p.n_kv, p.d, scale, false,
            false, seen,
            score ? [&](int i, int j, double s) { return score(b, h, i, j, s); }
                  : std::function<std::pair<double, double>(int, int, double)>());
        for (int i = 0; i < p.n_q; ++i)
          for (int e = 0; e < p.d; ++e) {
            double got = from_half(grads[0][((size_t(b) * p.n_q + i) * p.heads_q + h) * p.d + e]);
            ASSERT_TRUE(std::isfinite(got)) << "dq row " << i << ": not finite or not written";
            worst[0] = std::max(worst[0], std::abs(got - ref.exact.dq[size_t(i) * p.d + e]));
            naive[0] = std::max(naive[0], std::abs(ref.naive.dq[size_t(i) * p.d + e] - ref.exact.dq[size_t(i) * p.d + e]));
          }
        for (size_t x = 0; x < exactK.size(); ++x) {
          exactK[x] += ref.exact.dk[x], roughK[x] += ref.naive.dk[x];
          exactV[x] += ref.exact.dv[x], roughV[x] += ref.naive.dv[x];
        }
      }
      for (int j = 0; j < p.n_kv; ++j)
        for (int e = 0; e < p.d; ++e) {
          size_t at = ((size_t(b) * p.n_kv + j) * p.heads_kv + hk) * p.d + e, x = size_t(j) * p.d + e;
          for (auto [g, exact, rough] : {std::tuple{1, exactK[x], roughK[x]}, {2, exactV[x], roughV[x]}}) {
            double got = from_half(grads[g][at]);
            ASSERT_TRUE(std::isfinite(got)) << (g == 1 ? "dk" : "dv") << " row " << j << ": not finite or not written";
            worst[g] = std::max(worst[g], std::abs(got - exact));
            naive[g] = std::max(naive[g], std::abs(rough - exact));
          }
        }
    }
  const char *names[] = {"dq", "dk", "dv"};
  for (int g = 0; g < 3; ++g)
    EXPECT_LE(worst[g], 3 * naive[g] + 2e-3) << names[g] << " (naive " << naive[g] << ")";
}


TEST_F(BlockSparse, CausalRaggedGqa) {
  Problem p{2, 100, 130, 4, 2, 32};
  BlockSparseAttention causal(maskOnly(mask_mods::causal(100, 130)));
  check(p, BlockMask::causal(2, 100, 130, 32, 32), causal, [](int, int, int q, int kv) { return kv <= q + 30; });
}

TEST_F(BlockSparse, SlidingWindowPrefixLmAndDocuments) {
  Problem p{1, 150, 150, 2, 1, 64};
  BlockSparseAttention window(maskOnly(mask_mods::sliding_window(48)));
  check(p, BlockMask::sliding_window(1, 150, 48, 32, 32), window,
        [](int, int, int q, int kv) { return kv <= q && q - kv < 48; });

  BlockSparseAttention prefix(maskOnly(mask_mods::prefix_lm(40)));
  check(p, BlockMask::prefix_lm(1, 150, 40, 64, 32), prefix, [](int, int, int q, int kv) { return kv < 40 || kv <= q; });

  // Document ids from a tensor: mask_mod reads them through its aux pointer.
  Documents documents;
  check(p, documents.mask, BlockSparseAttention(Documents::modifiers()), documents.visible, {}, documents.inputs());
}

/// Random states of 2 heads x 3 x 3 blocks from `seed`; query block 1 of head 0 visits
/// nothing (O = 0, LSE = -inf there).
std::vector<BlockMask::State> randomStatesWithAnEmptyRow(unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<BlockMask::State> states(2 * 3 * 3);
  for (auto &s : states)
    s = BlockMask::State(rng() % 3);
  for (int j = 0; j < 3; ++j)
    states[1 * 3 + j] = BlockMask::State::skip;
  return states;
}

TEST_F(BlockSparse, RandomBlocksPerHeadWithEmptyRows) {
  Problem p{1, 96, 80, 2, 2, 32};
  const std::vector<BlockMask::State> states = randomStatesWithAnEmptyRow(3);
  BlockMask mask(1, 2, 96, 80, 32, 32, states);
  BlockSparseAttention stripes(
      maskOnly([](auto &, const Tile &h, const Tile &q, const Tile &kv, auto &) { return (q + kv + h) % 3 != 0; }));
  check(p, mask, stripes, [](int, int h, int q, int kv) { return (q + kv + h) % 3 != 0; });
  EXPECT_EQ(mask.state(0, 0, 2, 2), states[2 * 3 + 2] == BlockMask::State::full ? BlockMask::State::partial
                                                                                : states[2 * 3 + 2])
      << "the ragged last key block is never full";
}

// FlashAttention-3's order (OVERLAP_SOFTMAX): P @ V one iteration late across listed blocks of
// two BLOCK_N steps each, full and partial lists, empty rows and ragged ends; the last step as
// a loop of one or not, the accumulator rescaled before the next Q K^T (RESCALE_AT_SETTLE) or
// not.
TEST_F(BlockSparse, OverlappedForwardAcrossBlocksAndSteps) {
  Problem p{1, 150, 170, 2, 1, 64};
  std::vector<BlockMask::State> states = randomStatesWithAnEmptyRow(5);
  states[0] = BlockMask::State::full;
  BlockMask mask(1, 2, 150, 170, 64, 64, states);
  AttentionOptions overlapped;
  overlapped.config = attention_forward_configs(64, false).front();
  for (auto [key, value] : {std::pair<const char *, int64_t>{"BLOCK_M", 64}, {"BLOCK_N", 32}, {"num_warps", 4},
                            {"OVERLAP_SOFTMAX", 1}})
    overlapped.config->set(key, value);
  BlockSparseAttention stripes(
      maskOnly([](auto &, const Tile &h, const Tile &q, const Tile &kv, auto &) { return (q + 2 * kv + h) % 5 != 0; }));
  check(p, mask, stripes, [](int, int h, int q, int kv) { return (q + 2 * kv + h) % 5 != 0; }, {}, {}, overlapped);
  for (auto [last_in_loop, rescale_at_settle] : {std::pair{1, 0}, {0, 1}, {1, 1}}) {
    overlapped.config->set("LAST_PRODUCT_IN_LOOP", last_in_loop);
    overlapped.config->set("RESCALE_AT_SETTLE", rescale_at_settle);
    SCOPED_TRACE(overlapped.config->str());
    check(p, mask, stripes, [](int, int h, int q, int kv) { return (q + 2 * kv + h) % 5 != 0; }, {}, {}, overlapped);
  }
}

// Block pointers (on Hopper the TMA's copies, from producer warps where the config has them)
// at the block indices the mask lists: every block-pointer config of the block-sparse spaces
// (the forward's also persistent), random blocks of 128 with an empty row, ragged ends
// and a GQA group (dK/dV's loop over its heads). The inputs are 16-byte aligned, so that the
// block pointers stay on (attention turns them off where the TMA could not copy).
TEST_F(BlockSparse, BlockPointersAtListedBlocks) {
  Problem p{1, 300, 280, 2, 1, 64};
  BlockMask mask(1, 2, 300, 280, 128, 128, randomStatesWithAnEmptyRow(7));
  auto partial = [](int, int h, int q, int kv) { return (q + 3 * kv + h) % 4 != 0; };
  BlockSparseAttention stripes(
      maskOnly([](auto &, const Tile &h, const Tile &q, const Tile &kv, auto &) { return (q + 3 * kv + h) % 4 != 0; }));
  int forwards = 0, backwards = 0;
  std::set<std::string> tried;
  for (dsl::Config config : block_sparse_forward_configs(64, mask))
    for (int persistent : {0, 1}) // persistent programs (three here) beside a producer warpgroup
      for (int last_in_loop : {0, 1}) // FlashAttention-3's last deferred step as a loop of one
        if (config.get("BLOCK_POINTERS", 0) && (!persistent || config.get("warp_specialize", 0)) &&
            (!last_in_loop || config.get("OVERLAP_SOFTMAX", 0))) {
          config.set("PERSISTENT", persistent);
          config.set("LAST_PRODUCT_IN_LOOP", last_in_loop);
          if (!tried.insert(config.str()).second)
            continue;
          SCOPED_TRACE(config.str());
          AttentionOptions options;
          options.config = config;
          check(p, mask, stripes, partial, {}, {}, options);
          ++forwards;
        }
  for (BackwardPass pass : {BackwardPass::keys_values, BackwardPass::queries})
    for (const dsl::Config &config : block_sparse_backward_configs(64, mask, pass)) {
      if (!config.get("BLOCK_POINTERS", 0))
        continue;
      SCOPED_TRACE(config.str());
      AttentionOptions options;
      (pass == BackwardPass::keys_values ? options.keys_values_config : options.queries_config) = config;
      checkBackward(p, mask, stripes, partial, {}, {}, options);
      ++backwards;
    }
  EXPECT_GE(forwards, 3);
  EXPECT_GE(backwards, 3);
}

TEST_F(BlockSparse, ScoreModsSoftcapAlibiAndBiasTable) {
  Problem p{1, 64, 96, 2, 2, 32};
  BlockMask dense = BlockMask::from_predicate(1, 1, 64, 96, [](auto...) { return true; }, 32, 32);
  auto always = [](int, int, int, int) { return true; };
  Modifiers softcap;
  softcap.score_mod = [](const Tile &s, auto &, auto &, auto &, auto &, auto &) { return 2.0 * dsl::tanh(s / 2.0); };
  check(p, dense, BlockSparseAttention(softcap), always,
        [](int, int, int, int, double s) { return 2.0 * std::tanh(s / 2.0); });

  Modifiers alibi;
  alibi.score_mod = [](const Tile &s, auto &, const Tile &h, const Tile &q, const Tile &kv, auto &) {
    return s - (h + 1).to<dsl::f32>() * 0.25 * dsl::abs((q - kv).to<dsl::f32>());
  };
  check(p, dense, BlockSparseAttention(alibi), always,
        [](int, int h, int q, int kv, double s) { return s - (h + 1) * 0.25 * std::abs(q - kv); });

  BiasTable bias;
  Modifiers relative;
  relative.score_mod = [](const Tile &s, auto &, auto &, const Tile &q, const Tile &kv, const Tile &table) {
    return s + BiasTable::read(table, q, kv);
  };
  check(p, dense, BlockSparseAttention(relative), always,
        [&](int, int, int q, int kv, double s) { return s + bias.at(q, kv); }, bias.inputs());
}

TEST_F(BlockSparse, BackwardCausalGqaDocumentsAndRandomBlocks) {
  BlockSparseAttention causal(maskOnly(mask_mods::causal(100, 130)));
  checkBackward({2, 100, 130, 4, 2, 32}, BlockMask::causal(2, 100, 130, 32, 32), causal,
                [](int, int, int q, int kv) { return kv <= q + 30; });

  Documents documents;
  checkBackward({1, Documents::n, Documents::n, 2, 1, 64}, documents.mask, BlockSparseAttention(Documents::modifiers()),
                documents.visible, documents.inputs());

  // Per-head random blocks: rows that see nothing (dq = 0) and keys nobody sees (dk = dv = 0).
  std::mt19937 rng(9);
  std::vector<BlockMask::State> states(2 * 3 * 3);
  for (auto &s : states)
    s = BlockMask::State(rng() % 3);
  for (int j = 0; j < 3; ++j)
    states[3 + j] = BlockMask::State::skip;
  for (int i = 0; i < 6; ++i)
    states[i * 3 + 1] = BlockMask::State::skip;
  BlockSparseAttention stripes(
      maskOnly([](auto &, const Tile &h, const Tile &q, const Tile &kv, auto &) { return (q + kv + h) % 3 != 0; }));
  checkBackward({1, 96, 80, 2, 2, 32}, BlockMask(1, 2, 96, 80, 32, 32, states), stripes,
                [](int, int h, int q, int kv) { return (q + kv + h) % 3 != 0; });
}

TEST_F(BlockSparse, BackwardThroughScoreModsSoftcapAlibiAndBiasTable) {
  Problem p{1, 64, 96, 2, 2, 32};
  auto always = [](int, int, int, int) { return true; };
  Modifiers softcap = maskOnly([](auto &, auto &, const Tile &q, const Tile &kv, auto &) { return kv <= q + 32; });
  softcap.score_mod = [](const Tile &s, auto &, auto &, auto &, auto &, auto &) { return 2.0 * dsl::tanh(s / 2.0); };
  softcap.score_mod_grad = [](const Tile &s, auto &, auto &, auto &, auto &, auto &) {
    Tile t = dsl::tanh(s / 2.0);
    return 1.0 - t * t;
  };
  checkBackward(p, BlockMask::causal(1, 64, 96, 32, 32), BlockSparseAttention(softcap),
                [](int, int, int q, int kv) { return kv <= q + 32; }, {},
                [](int, int, int, int, double s) {
                  return std::pair{2.0 * std::tanh(s / 2.0), 1.0 - std::pow(std::tanh(s / 2.0), 2)};
                });

  // An added bias (ALiBi, or read from a tensor) has derivative 1.
  Modifiers alibi;
  alibi.score_mod = [](const Tile &s, auto &, const Tile &h, const Tile &q, const Tile &kv, auto &) {
    return s - (h + 1).to<dsl::f32>() * 0.25 * dsl::abs((q - kv).to<dsl::f32>());
  };
  alibi.score_mod_grad = [](auto &...) { return Tile(1.0); };
  BlockMask dense = BlockMask::from_predicate(1, 1, 64, 96, [](auto...) { return true; }, 32, 32);
  checkBackward(p, dense, BlockSparseAttention(alibi), always, {}, [](int, int h, int q, int kv, double s) {
    return std::pair{s - (h + 1) * 0.25 * std::abs(q - kv), 1.0};
  });

  BiasTable bias;
  Modifiers relative;
  relative.score_mod = [](const Tile &s, auto &, auto &, const Tile &q, const Tile &kv, const Tile &table) {
    return 3.0 * dsl::tanh(s / 3.0) + BiasTable::read(table, q, kv);
  };
  relative.score_mod_grad = [](const Tile &s, auto &, auto &, auto &, auto &, auto &) {
    Tile t = dsl::tanh(s / 3.0);
    return 1.0 - t * t;
  };
  checkBackward(p, dense, BlockSparseAttention(relative), always, bias.inputs(), [&](int, int, int q, int kv, double s) {
    return std::pair{3.0 * std::tanh(s / 3.0) + bias.at(q, kv), 1.0 - std::pow(std::tanh(s / 3.0), 2)};
  });
}

TEST_F(BlockSparse, BackwardRejectsBadModifiersOptionsAndConfigs) {
  Registered<uint16_t> x(std::vector<uint16_t>(64 * 2 * 32)), o(std::vector<uint16_t>(64 * 2 * 32)),
      g1(std::vector<uint16_t>(64 * 2 * 32)), g2(std::vector<uint16_t>(64 * 2 * 32)),
      g3(std::vector<uint16_t>(64 * 2 * 32));
  Registered<float> lse(std::vector<float>(128));
  auto view = [](Registered<uint16_t> &r) { return TensorView{r.ptr(), DType::f16, {1, 64, 2, 32}, {}, DeviceType::cpu}; };
  TensorView lseView{lse.ptr(), DType::f32, {1, 2, 64}, {}, DeviceType::cpu};
  BlockMask mask = BlockMask::causal(1, 64, 64, 32, 32);
  auto expectError = [&](const BlockSparseAttention &attention, const AttentionOptions &options,
                         const std::string &needle) {
    try {
      attention.backward(view(x), view(x), view(x), view(o), lseView, view(x), view(g1), view(g2), view(g3), mask,
                         options);
      ADD_FAILURE() << "no error; expected one saying: " << needle;
    } catch (const Error &e) {
      EXPECT_THAT(e.what(), HasSubstr(needle));
    }
  };
  Modifiers softcap;
  softcap.score_mod = [](const Tile &s, auto &, auto &, auto &, auto &, auto &) { return dsl::tanh(s); };
  expectError(BlockSparseAttention(softcap), {},
              "block_sparse_attention_backward: the backward of a score_mod needs its derivative: set "
              "Modifiers::score_mod_grad");
  AttentionOptions causal;
  causal.causal = true;
  expectError(BlockSparseAttention(), causal, "options.causal must be false");
  AttentionOptions wide; // each pass's config is checked against the mask's 32x32 blocks
  wide.keys_values_config = attention_backward_configs(32, false, BackwardPass::keys_values).front();
  wide.keys_values_config->set("BLOCK_N", 64);
  expectError(BlockSparseAttention(), wide, "must divide the mask's blocks 32x32");
  AttentionOptions alien;
  alien.queries_config = attention_backward_configs(64, false, BackwardPass::queries).front();
  expectError(BlockSparseAttention(), alien,
              "is not for head_dim 32, not causal (take one of block_sparse_backward_configs(queries))");
  AttentionOptions persistent; // the backward's programs do not take tiles in turn
  persistent.queries_config = attention_backward_configs(32, false, BackwardPass::queries).front();
  persistent.queries_config->set("PERSISTENT", 1);
  expectError(BlockSparseAttention(), persistent, "PERSISTENT is only for the forward passes (dense and block-sparse)");
  try {
    block_sparse_backward_configs(32, mask, BackwardPass::keys_values_adding_dq);
    ADD_FAILURE() << "no error for keys_values_adding_dq";
  } catch (const Error &e) {
    EXPECT_THAT(e.what(), HasSubstr("block-sparse attention has no dK/dV pass adding dQ"));
  }
}

// The block-sparse spaces fit the mask's blocks (what options.config takes), at any mask block
// size and head dim.
TEST(BlockSparseSpaces, FitTheMasksBlocks) {
  for (int64_t d : {16, 64, 96, 128, 256})
    for (auto [bm, bn] : {std::pair<int64_t, int64_t>{128, 128}, {64, 32}, {16, 256}}) {
      const BlockMask mask = BlockMask::causal(1, 256, 256, bm, bn);
      const std::vector<dsl::Config> spaces[] = {
          block_sparse_forward_configs(d, mask), block_sparse_backward_configs(d, mask, BackwardPass::keys_values),
          block_sparse_backward_configs(d, mask, BackwardPass::queries)};
      for (const std::vector<dsl::Config> &space : spaces) {
        ASSERT_FALSE(space.empty()) << d << " " << bm << "x" << bn;
        for (const dsl::Config &config : space) {
          SCOPED_TRACE(config.str());
          EXPECT_EQ(bm % config["BLOCK_M"], 0);
          EXPECT_EQ(bn % config["BLOCK_N"], 0);
          EXPECT_EQ(config["HEAD_DIM"], d == 96 ? 128 : d);
          EXPECT_EQ(config["CAUSAL"], 0);
        }
      }
    }
}

// The ready-made builders classify every block as from_predicate does with their predicates.
TEST(BlockMaskBuilders, AgreeWithFromPredicate) {
  auto same = [](const BlockMask &a, const BlockMask &b) {
    ASSERT_EQ(a.q_blocks(), b.q_blocks());
    ASSERT_EQ(a.kv_blocks(), b.kv_blocks());
    for (int64_t bt = 0; bt < a.batch(); ++bt)
      for (int64_t i = 0; i < a.q_blocks(); ++i)
        for (int64_t j = 0; j < a.kv_blocks(); ++j)
          ASSERT_EQ(int(a.state(bt, 0, i, j)), int(b.state(bt, 0, i, j))) << "block " << i << ", " << j;
  };
  for (auto [n_q, n_kv] : {std::pair{100, 130}, {130, 100}, {128, 128}, {1, 77}})
    same(BlockMask::causal(1, n_q, n_kv, 32, 16),
         BlockMask::from_predicate(1, 1, n_q, n_kv, [&](auto, auto, auto q, auto kv) { return kv <= q + n_kv - n_q; },
                                   32, 16));
  same(BlockMask::sliding_window(1, 300, 70, 64, 32),
       BlockMask::from_predicate(1, 1, 300, 300, [](auto, auto, auto q, auto kv) { return kv <= q && q - kv < 70; },
                                 64, 32));
  same(BlockMask::prefix_lm(1, 200, 50, 32, 32),
       BlockMask::from_predicate(1, 1, 200, 200, [](auto, auto, auto q, auto kv) { return kv < 50 || kv <= q; }, 32,
                                 32));
  EXPECT_NEAR(BlockMask::causal(1, 1024, 1024, 128, 128).density(), 36.0 / 64, 1e-12);
}

// from_mask_mod runs the mask_mod as a kernel (here through the interpreter) and classifies
// every block as the host predicate does: per head, with a tensor, ragged ends.
TEST_F(BlockSparse, FromMaskModMatchesTheHostPredicate) {
  auto same = [](const BlockMask &a, const BlockMask &b) {
    for (int64_t bt = 0; bt < a.batch(); ++bt)
      for (int64_t h = 0; h < a.heads(); ++h)
        for (int64_t i = 0; i < a.q_blocks(); ++i)
          for (int64_t j = 0; j < a.kv_blocks(); ++j)
            ASSERT_EQ(int(a.state(bt, h, i, j)), int(b.state(bt, h, i, j))) << bt << " " << h << " " << i << " " << j;
  };
  same(BlockMask::from_mask_mod(2, 3, 100, 130,
                                [](const Tile &, const Tile &h, const Tile &q, const Tile &kv, const Tile &) {
                                  return kv <= q + 30 && (q - kv < 40 + h * 20);
                                },
                                nullptr, 32, 16),
       BlockMask::from_predicate(2, 3, 100, 130,
                                 [](auto, auto h, auto q, auto kv) { return kv <= q + 30 && q - kv < 40 + h * 20; }, 32,
                                 16));
  Documents documents;
  same(BlockMask::from_mask_mod(1, 1, Documents::n, Documents::n, Documents::modifiers().mask_mod,
                                documents.inputs().mask_aux, 32, 32),
       documents.mask);
}

TEST(BlockMaskBuilders, RejectBadShapes) {
  auto expectError = [](const std::function<void()> &build, const std::string &needle) {
    try {
      build();
      ADD_FAILURE() << "no error; expected one saying: " << needle;
    } catch (const Error &e) {
      EXPECT_THAT(e.what(), HasSubstr(needle));
    }
  };
  expectError([] { BlockMask(1, 1, 64, 64, 24, 32, std::vector<BlockMask::State>(6)); },
              "block sizes must be powers of two of at least 16, got 24x32");
  expectError([] { BlockMask(1, 1, 64, 64, 32, 32, std::vector<BlockMask::State>(3)); },
              "3 block states for [batch 1, heads 1, 2 query blocks, 2 key blocks]");
  expectError([] { BlockMask::documents(2, 10, std::vector<int32_t>(10), false); },
              "documents holds 10 ids for [batch 2, n 10]");
  expectError([] { BlockMask::sliding_window(1, 10, 0); }, "the window must be positive");
}

TEST_F(BlockSparse, RejectsMasksThatDoNotFitTheInputs) {
  Registered<uint16_t> x(std::vector<uint16_t>(64 * 2 * 32)), o(std::vector<uint16_t>(64 * 2 * 32));
  Registered<float> lse(std::vector<float>(128));
  TensorView q{x.ptr(), DType::f16, {1, 64, 2, 32}, {}, DeviceType::cpu};
  TensorView out{o.ptr(), DType::f16, {1, 64, 2, 32}, {}, DeviceType::cpu};
  TensorView lseView{lse.ptr(), DType::f32, {1, 2, 64}, {}, DeviceType::cpu};
  BlockSparseAttention attention;
  auto expectError = [&](const BlockMask &mask, const AttentionOptions &options, const std::string &needle) {
    try {
      attention.forward(q, q, q, out, lseView, mask, options);
      ADD_FAILURE() << "no error; expected one saying: " << needle;
    } catch (const Error &e) {
      EXPECT_THAT(e.what(), HasSubstr(needle));
    }
  };
  expectError(BlockMask::causal(1, 64, 32, 32, 32), {},
              "block_sparse_attention_forward: the block mask is for batch 1, 1 heads, n_q 64, n_kv 32");
  expectError(BlockMask::from_predicate(1, 3, 64, 64, [](auto...) { return true; }, 32, 32), {},
              "mask heads must be 1 or heads_q");
  AttentionOptions causal;
  causal.causal = true;
  expectError(BlockMask::causal(1, 64, 64, 32, 32), causal, "options.causal must be false");
  AttentionOptions wide;
  wide.config = attention_forward_configs(32, false).front(); // BLOCK_M 128 > the mask's 32
  expectError(BlockMask::causal(1, 64, 64, 32, 32), wide, "must divide the mask's blocks 32x32");
  AttentionOptions persistent;
  persistent.config = attention_forward_configs(32, false).front();
  persistent.config->set("PERSISTENT", 3);
  expectError(BlockMask::causal(1, 64, 64, 128, 128), persistent, "PERSISTENT must be 0 or 1");
}

} // namespace
