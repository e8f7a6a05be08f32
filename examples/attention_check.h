// Runs attention_forward through the launch API (GPU, or the interpreter under
// TESSERA_INTERPRET) on random fp16 inputs and checks it against an fp64 CPU reference, with
// DESIGN.md's bar: max error within 2x that of a naive fp16 implementation plus a floor, no
// NaN, every element written.
#ifndef TESSERA_EXAMPLES_ATTENTION_CHECK_H
#define TESSERA_EXAMPLES_ATTENTION_CHECK_H

#include "attention.h"

#include <tessera/dsl/fp16.h>
#include <tessera/jit/Runtime.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <tuple>
#include <vector>

namespace tessera::examples {

struct AttentionCheck {
  double max_error = 0;       ///< kernel output vs the fp64 reference
  double naive_error = 0;     ///< naive fp16 attention vs the fp64 reference
  double max_lse_error = 0;   ///< natural-log LSE vs the reference
  bool passed = false;
  std::vector<uint16_t> output; ///< the kernel's fp16 output, [heads, n_q, d]
  std::vector<float> lse;       ///< and its LSE, [heads, n_q]
};

/// Head `h` of batch `b` of a contiguous [batch, n, heads, d] tensor, as [n, d] rows (the
/// references below take one head at a time).
template <typename T>
std::vector<T> head_rows(const std::vector<T> &all, int64_t b, int64_t h, int64_t n, int64_t heads, int64_t d) {
  std::vector<T> rows(n * d);
  for (int64_t i = 0; i < n; ++i)
    std::copy_n(&all[((b * n + i) * heads + h) * d], d, &rows[i * d]);
  return rows;
}

/// The 16-bit input type's values as doubles: `widen` reads one, `round` rounds a double to
/// the type (as an implementation in that type stores it).
struct Sixteen {
  dsl::DType dtype;
  double widen(uint16_t x) const { return from_16bit(x, dtype); }
  double round(double x) const { return widen(to_16bit(float(x), dtype)); }
};

/// One head's softmax(q k^T * scale) v from 16-bit inputs (fp16, or bf16 when `bf16`):
/// `exact` in fp64, `naive` as a same-dtype implementation gets it (probabilities and output
/// rounded to the input type), and the natural-log `lse` per row (-inf for rows that see no
/// key). `causal`: row i sees keys j <= i + n_kv - n_q (bottom-right aligned). `modify`
/// (optional): the score of row i, key j from its scaled dot product; -inf masks it.
struct AttentionReference {
  std::vector<double> exact, naive, lse;
};

inline AttentionReference attention_reference(const uint16_t *q, const uint16_t *k, const uint16_t *v, int n_q,
                                              int n_kv, int d, double scale, bool causal = false, bool bf16 = false,
                                              const std::function<double(int, int, double)> &modify = {}) {
  const Sixteen half{bf16 ? dsl::DType::bf16 : dsl::DType::f16};
  auto widen_all = [&](const uint16_t *h, int rows) {
    std::vector<double> values(size_t(rows) * d);
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = half.widen(h[i]);
    return values;
  };
  std::vector<double> qd = widen_all(q, n_q), kd = widen_all(k, n_kv), vd = widen_all(v, n_kv);
  AttentionReference ref{std::vector<double>(size_t(n_q) * d, 0.0), std::vector<double>(size_t(n_q) * d, 0.0), {}};
  std::vector<double> scores(n_kv);
  for (int i = 0; i < n_q; ++i) {
    double peak = -INFINITY;
    for (int j = 0; j < n_kv; ++j) {
      double s = 0;
      for (int c = 0; c < d; ++c)
        s += qd[i * d + c] * kd[j * d + c];
      scores[j] = causal && j > i + n_kv - n_q ? -INFINITY : modify ? modify(i, j, s * scale) : s * scale;
      peak = std::max(peak, scores[j]);
    }
    double total = 0;
    for (int j = 0; j < n_kv; ++j)
      total += std::isinf(scores[j]) ? 0 : std::exp(scores[j] - peak);
    ref.lse.push_back(total > 0 ? peak + std::log(total) : -INFINITY);
    for (int j = 0; j < n_kv && total > 0; ++j) {
      if (std::isinf(scores[j]))
        continue;
      double p = std::exp(scores[j] - peak) / total, p16 = half.round(p);
      for (int c = 0; c < d; ++c) {
        ref.exact[i * d + c] += p * vd[j * d + c];
        ref.naive[i * d + c] += p16 * vd[j * d + c];
      }
    }
    for (int c = 0; c < d; ++c)
      ref.naive[i * d + c] = half.round(ref.naive[i * d + c]);
  }
  return ref;
}

/// One head's gradients of softmax(q k^T * scale) v for the output gradient `dout`, all
/// [n | n_kv, d] 16-bit inputs: `exact` in fp64, `naive` as a same-dtype implementation gets
/// them (P, O, dP, dS and the gradients rounded to the input type); `visible` (optional)
/// masks more pairs (row i, key j); `modify` (optional) gives the modified score of (i, j) from
/// q.k * scale and its derivative there.
struct AttentionGradients {
  std::vector<double> dq, dk, dv;
};
struct AttentionBackwardReference {
  AttentionGradients exact, naive;
};

inline AttentionBackwardReference attention_backward_reference(
    const uint16_t *q, const uint16_t *k, const uint16_t *v, const uint16_t *dout, int n_q, int n_kv, int d,
    double scale, bool causal = false, bool bf16 = false, const std::function<bool(int, int)> &visible = {},
    const std::function<std::pair<double, double>(int, int, double)> &modify = {}) {
  const Sixteen half{bf16 ? dsl::DType::bf16 : dsl::DType::f16};
  auto at = [&](const uint16_t *m, int row, int c) { return half.widen(m[size_t(row) * d + c]); };
  AttentionBackwardReference ref;
  for (AttentionGradients *g : {&ref.exact, &ref.naive}) {
    g->dq.assign(size_t(n_q) * d, 0.0);
    g->dk.assign(size_t(n_kv) * d, 0.0);
    g->dv.assign(size_t(n_kv) * d, 0.0);
  }
  std::vector<double> p(n_kv), slope(n_kv, 1.0);
  for (int i = 0; i < n_q; ++i) {
    // The row's probabilities, exact.
    double peak = -INFINITY;
    for (int j = 0; j < n_kv; ++j) {
      double s = 0;
      for (int c = 0; c < d; ++c)
        s += at(q, i, c) * at(k, j, c);
      if (modify)
        std::tie(s, slope[j]) = modify(i, j, s * scale);
      else
        s *= scale;
      p[j] = (!causal || j <= i + n_kv - n_q) && (!visible || visible(i, j)) ? s : -INFINITY;
      peak = std::max(peak, p[j]);
    }
    double total = 0;
    for (int j = 0; j < n_kv; ++j)
      total += std::isinf(p[j]) ? 0 : std::exp(p[j] - peak);
    for (int j = 0; j < n_kv; ++j)
      p[j] = total > 0 && !std::isinf(p[j]) ? std::exp(p[j] - peak) / total : 0.0;
    for (bool naive : {false, true}) {
      AttentionGradients &g = naive ? ref.naive : ref.exact;
      auto r = [&](double x) { return naive ? half.round(x) : x; };
      // delta = rowsum(dO * O), with O as this implementation computes it.
      double delta = 0;
      for (int c = 0; c < d; ++c) {
        double o = 0;
        for (int j = 0; j < n_kv; ++j)
          o += r(p[j]) * at(v, j, c);
        delta += at(dout, i, c) * r(o);
      }
      for (int j = 0; j < n_kv; ++j) {
        double dpj = 0;
        for (int c = 0; c < d; ++c)
          dpj += at(dout, i, c) * at(v, j, c);
        double ds = r(r(p[j]) * (r(dpj) - delta) * slope[j]);
        for (int c = 0; c < d; ++c) {
          g.dv[size_t(j) * d + c] += r(p[j]) * at(dout, i, c);
          g.dq[size_t(i) * d + c] += ds * at(k, j, c) * scale;
          g.dk[size_t(j) * d + c] += ds * at(q, i, c) * scale;
        }
      }
    }
  }
  for (std::vector<double> *grad : {&ref.naive.dq, &ref.naive.dk, &ref.naive.dv})
    for (double &x : *grad)
      x = half.round(x);
  return ref;
}

/// Check attention_forward<f16> on [heads, n_q | n_kv, d] inputs drawn from `seed`.
inline AttentionCheck check_attention(int heads, int n_q, int n_kv, int d, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  auto random_half = [&](size_t n) {
    std::vector<uint16_t> values(n);
    for (uint16_t &x : values)
      x = to_half(normal(rng));
    return values;
  };
  std::vector<uint16_t> q = random_half(size_t(heads) * n_q * d), k = random_half(size_t(heads) * n_kv * d),
                        v = random_half(size_t(heads) * n_kv * d);
  auto upload = [](const std::vector<uint16_t> &host) {
    jit::DeviceBuffer buffer(host.size() * 2);
    buffer.copy_from_host(host.data(), host.size() * 2);
    return buffer;
  };
  jit::DeviceBuffer dq = upload(q), dk = upload(k), dv = upload(v);
  jit::DeviceBuffer out(size_t(heads) * n_q * d * 2), lse(size_t(heads) * n_q * 4);
  out.fill_bytes(0xff); // poison: NaN in fp16 and fp32
  lse.fill_bytes(0xff);
  const double scale = 1.0 / std::sqrt(double(d));
  const int64_t block = d <= 64 ? 64 : 32;
  attention_forward<dsl::f16>().launch({uint32_t(dsl::cdiv(n_q, block)), uint32_t(heads)},
                                       {{"BLOCK_M", block}, {"BLOCK_N", block}, {"HEAD_DIM", d}},
                                       dq.data(), dk.data(), dv.data(), out.data(), lse.data(), n_q,
                                       n_kv, float(scale));
  jit::synchronize();
  std::vector<uint16_t> got(size_t(heads) * n_q * d);
  std::vector<float> got_lse(size_t(heads) * n_q);
  out.copy_to_host(got.data(), got.size() * 2);
  lse.copy_to_host(got_lse.data(), got_lse.size() * 4);

  AttentionCheck check;
  bool finite = true;
  for (int h = 0; h < heads; ++h) {
    size_t qo = size_t(h) * n_q * d, kvo = size_t(h) * n_kv * d;
    AttentionReference want = attention_reference(&q[qo], &k[kvo], &v[kvo], n_q, n_kv, d, scale);
    for (size_t i = 0; i < want.exact.size(); ++i) {
      double value = from_half(got[qo + i]);
      finite = finite && std::isfinite(value);
      check.max_error = std::max(check.max_error, std::abs(value - want.exact[i]));
      check.naive_error = std::max(check.naive_error, std::abs(want.naive[i] - want.exact[i]));
    }
    for (int i = 0; i < n_q; ++i) {
      float value = got_lse[size_t(h) * n_q + i];
      finite = finite && std::isfinite(value);
      check.max_lse_error = std::max(check.max_lse_error, std::abs(value - want.lse[i]));
    }
  }
  check.passed = finite && check.max_error <= 2 * check.naive_error + 1e-3 && check.max_lse_error <= 1e-3;
  check.output = std::move(got);
  check.lse = std::move(got_lse);
  return check;
}

} // namespace tessera::examples

#endif // TESSERA_EXAMPLES_ATTENTION_CHECK_H
