// BlockMask: block states, the builders, and the index arrays the block-sparse kernels read.
#include "tessera/kernels/block_sparse.h"

#include "tessera/compiler/Interpreter.h"
#include "tessera/error.h"

#include "AttentionKernels.h"

#include <algorithm>
#include <string>

namespace tessera::kernels {
namespace {

void require(bool ok, const std::string &what) {
  if (!ok)
    throw Error("BlockMask: " + what);
}

bool powerOfTwo(int64_t v) { return v >= 16 && (v & (v - 1)) == 0; }

/// The states of every block from `classify(batch, head, rows [r0, r1), keys [c0, c1))`.
template <typename Classify>
std::vector<BlockMask::State> blockStates(int64_t batch, int64_t heads, int64_t n_q, int64_t n_kv, int64_t block_m,
                                          int64_t block_n, Classify classify) {
  const int64_t qb = (n_q + block_m - 1) / block_m, kb = (n_kv + block_n - 1) / block_n;
  std::vector<BlockMask::State> states;
  states.reserve(batch * heads * qb * kb);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < qb; ++i)
        for (int64_t j = 0; j < kb; ++j)
          states.push_back(classify(b, h, i * block_m, std::min(n_q, (i + 1) * block_m), j * block_n,
                                    std::min(n_kv, (j + 1) * block_n)));
  return states;
}

/// A block's state under a mask that lets each row see one interval of keys, [lo(row),
/// hi(row)]: full when every row's interval covers the block's keys, skip when none meets them.
template <typename Lo, typename Hi>
BlockMask::State intervalState(int64_t r0, int64_t r1, int64_t c0, int64_t c1, Lo lo, Hi hi) {
  bool any = false, all = true;
  for (int64_t r = r0; r < r1; ++r) {
    int64_t a = std::max(c0, lo(r)), z = std::min(c1 - 1, hi(r));
    any |= a <= z;
    all &= a == c0 && z == c1 - 1;
  }
  return all ? BlockMask::State::full : any ? BlockMask::State::partial : BlockMask::State::skip;
}

} // namespace

BlockMask::BlockMask(int64_t batch, int64_t heads, int64_t n_q, int64_t n_kv, int64_t block_m, int64_t block_n,
                     const std::vector<State> &states)
    : batch_(batch), heads_(heads), n_q_(n_q), n_kv_(n_kv), block_m_(block_m), block_n_(block_n), states_(states) {
  require(batch > 0 && heads > 0 && n_q >= 0 && n_kv >= 0,
          "batch and heads must be positive and lengths non-negative, got batch " + std::to_string(batch) +
              ", heads " + std::to_string(heads) + ", n_q " + std::to_string(n_q) + ", n_kv " + std::to_string(n_kv));
  require(powerOfTwo(block_m) && powerOfTwo(block_n), "block sizes must be powers of two of at least 16, got " +
                                                          std::to_string(block_m) + "x" + std::to_string(block_n));
  const int64_t qb = q_blocks(), kb = kv_blocks();
  require(int64_t(states.size()) == batch * heads * qb * kb,
          std::to_string(states.size()) + " block states for [batch " + std::to_string(batch) + ", heads " +
              std::to_string(heads) + ", " + std::to_string(qb) + " query blocks, " + std::to_string(kb) +
              " key blocks]");
  // The last key block may reach past n_kv: the kernel masks it only as a partial block.
  if (n_kv % block_n)
    for (size_t s = kb - 1; s < states_.size(); s += kb)
      if (states_[s] == State::full)
        states_[s] = State::partial;
  const int64_t record = 2 + 2 * kb, transposedRecord = 2 + 2 * qb;
  transposedOffset_ = size_t(batch * heads * qb * record);
  indices_.assign(transposedOffset_ + batch * heads * kb * transposedRecord, 0);
  // Record `row` of width `width` gets `block` appended to its full or partial list.
  auto append = [&](size_t base, int64_t row, int64_t width, int64_t lists, State s, int64_t block) {
    int32_t *out = &indices_[base + row * width];
    if (s == State::full)
      out[2 + out[0]++] = int32_t(block);
    else if (s == State::partial)
      out[2 + lists + out[1]++] = int32_t(block);
  };
  int64_t visited = 0;
  for (int64_t bh = 0; bh < batch * heads; ++bh)
    for (int64_t i = 0; i < qb; ++i)
      for (int64_t j = 0; j < kb; ++j) {
        State s = states_[(bh * qb + i) * kb + j];
        append(0, bh * qb + i, record, kb, s, j);
        append(transposedOffset_, bh * kb + j, transposedRecord, qb, s, i);
        visited += s != State::skip;
      }
  density_ = states_.empty() ? 0 : double(visited) / double(states_.size());
}

BlockMask BlockMask::from_predicate(int64_t batch, int64_t heads, int64_t n_q, int64_t n_kv, const Visible &visible,
                                    int64_t block_m, int64_t block_n) {
  require(bool(visible), "from_predicate needs a predicate");
  return BlockMask(batch, heads, n_q, n_kv, block_m, block_n,
                   blockStates(batch, heads, n_q, n_kv, block_m, block_n,
                               [&](int64_t b, int64_t h, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
                                 bool any = false, all = true;
                                 for (int64_t r = r0; r < r1 && (all || !any); ++r)
                                   for (int64_t c = c0; c < c1 && (all || !any); ++c) {
                                     bool seen = visible(b, h, r, c);
                                     any |= seen, all &= seen;
                                   }
                                 return all ? State::full : any ? State::partial : State::skip;
                               }));
}

BlockMask BlockMask::from_mask_mod(int64_t batch, int64_t heads, int64_t n_q, int64_t n_kv, const MaskMod &mask_mod,
                                   const void *aux, int64_t block_m, int64_t block_n, void *stream) {
  require(bool(mask_mod), "from_mask_mod needs a mask_mod");
  // Checked first: the kernel compiles the block sizes in.
  BlockMask empty(batch, heads, n_q, n_kv, block_m, block_n,
                  std::vector<State>(batch * heads * ((n_q + block_m - 1) / block_m) * ((n_kv + block_n - 1) / block_n)));
  dsl::Kernel classify = detail::block_mask_states_kernel(mask_mod);
  const int64_t qb = empty.q_blocks(), kb = empty.kv_blocks();
  std::vector<int32_t> raw(batch * heads * qb * kb);
  if (!raw.empty()) {
    jit::DeviceBuffer device(raw.size() * sizeof(int32_t));
    classify.launch_on(stream, {uint32_t(qb), uint32_t(kb), uint32_t(batch * heads)},
                       {{"BLOCK_M", block_m}, {"BLOCK_N", block_n}, {"num_warps", 4}}, device.data(), aux, n_q, n_kv,
                       heads);
    jit::synchronize(stream);
    device.copy_to_host(raw.data(), raw.size() * sizeof(int32_t));
  }
  std::vector<State> states(raw.size());
  std::transform(raw.begin(), raw.end(), states.begin(), [](int32_t s) { return State(s); });
  return BlockMask(batch, heads, n_q, n_kv, block_m, block_n, states);
}

BlockMask BlockMask::causal(int64_t batch, int64_t n_q, int64_t n_kv, int64_t block_m, int64_t block_n) {
  const int64_t diagonal = n_kv - n_q;
  return BlockMask(batch, 1, n_q, n_kv, block_m, block_n,
                   blockStates(batch, 1, n_q, n_kv, block_m, block_n,
                               [&](int64_t, int64_t, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
                                 return intervalState(r0, r1, c0, c1, [](int64_t) { return int64_t(0); },
                                                      [&](int64_t r) { return r + diagonal; });
                               }));
}

BlockMask BlockMask::sliding_window(int64_t batch, int64_t n, int64_t window, int64_t block_m, int64_t block_n) {
  require(window > 0, "the window must be positive, got " + std::to_string(window));
  return BlockMask(batch, 1, n, n, block_m, block_n,
                   blockStates(batch, 1, n, n, block_m, block_n,
                               [&](int64_t, int64_t, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
                                 return intervalState(r0, r1, c0, c1, [&](int64_t r) { return r - window + 1; },
                                                      [](int64_t r) { return r; });
                               }));
}

BlockMask BlockMask::prefix_lm(int64_t batch, int64_t n, int64_t prefix, int64_t block_m, int64_t block_n) {
  require(prefix >= 0, "the prefix must not be negative, got " + std::to_string(prefix));
  return BlockMask(batch, 1, n, n, block_m, block_n,
                   blockStates(batch, 1, n, n, block_m, block_n,
                               [&](int64_t, int64_t, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
                                 return intervalState(r0, r1, c0, c1, [](int64_t) { return int64_t(0); },
                                                      [&](int64_t r) { return std::max(r, prefix - 1); });
                               }));
}

BlockMask BlockMask::documents(int64_t batch, int64_t n, const std::vector<int32_t> &documents, bool causal,
                               int64_t block_m, int64_t block_n) {
  require(int64_t(documents.size()) == batch * n, "documents holds " + std::to_string(documents.size()) +
                                                      " ids for [batch " + std::to_string(batch) + ", n " +
                                                      std::to_string(n) + "]");
  return from_predicate(
      batch, 1, n, n,
      [&](int64_t b, int64_t, int64_t q, int64_t kv) {
        return documents[b * n + q] == documents[b * n + kv] && (!causal || kv <= q);
      },
      block_m, block_n);
}

namespace mask_mods {
using dsl::Tile;

MaskMod causal(int64_t n_q, int64_t n_kv) {
  return [diagonal = n_kv - n_q](const Tile &, const Tile &, const Tile &q, const Tile &kv, const Tile &) {
    return kv <= q + diagonal;
  };
}

MaskMod sliding_window(int64_t window) {
  return [window](const Tile &, const Tile &, const Tile &q, const Tile &kv, const Tile &) {
    return kv <= q && q - kv < window;
  };
}

MaskMod prefix_lm(int64_t prefix) {
  return [prefix](const Tile &, const Tile &, const Tile &q, const Tile &kv, const Tile &) {
    return kv < prefix || kv <= q;
  };
}

MaskMod documents(int64_t n, bool causal) {
  return [n, causal](const Tile &b, const Tile &, const Tile &q, const Tile &kv, const Tile &ids) {
    Tile same = dsl::load(ids + b * n + q) == dsl::load(ids + b * n + kv);
    return causal ? same && kv <= q : same;
  };
}
} // namespace mask_mods

BlockMask::State BlockMask::state(int64_t batch, int64_t head, int64_t q_block, int64_t kv_block) const {
  return states_[((batch * heads_ + head) * q_blocks() + q_block) * kv_blocks() + kv_block];
}

const void *BlockMask::device_indices() const {
  if (!device_) {
    auto buffer = std::make_shared<jit::DeviceBuffer>(indices_.size() * sizeof(int32_t));
    buffer->copy_from_host(indices_.data(), indices_.size() * sizeof(int32_t));
    device_ = std::move(buffer);
  }
  return device_->data();
}

const void *BlockMask::device_transposed_indices() const {
  return static_cast<const int32_t *>(device_indices()) + transposedOffset_;
}

} // namespace tessera::kernels
