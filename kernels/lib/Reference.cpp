#include "tessera/kernels/reference.h"

#include "tessera/error.h"
#include "tessera/jit/Nvrtc.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>

namespace tessera::kernels {
namespace {

// One thread per query row: the row's scores in fp64, then softmax and P V in three passes.
const char *kSource = R"(
__device__ float round16(float x, int bf16) {
  float y;
  if (bf16) asm("{ .reg .b16 h; cvt.rn.bf16.f32 h, %1; cvt.f32.bf16 %0, h; }" : "=f"(y) : "f"(x));
  else asm("{ .reg .b16 h; cvt.rn.f16.f32 h, %1; cvt.f32.f16 %0, h; }" : "=f"(y) : "f"(x));
  return y;
}

extern "C" __global__ void attention_reference(const float *q, const float *k, const float *v, float *o,
                                               float *lse, float *naive, int bf16, long long batch,
                                               long long n_q, long long n_kv, long long heads_q,
                                               long long heads_kv, int d, double scale, int causal) {
  long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (row >= batch * heads_q * n_q) return;
  long long i = row % n_q, h = row / n_q % heads_q, b = row / n_q / heads_q;
  long long hk = h / (heads_q / heads_kv);
  const float *qi = q + ((b * n_q + i) * heads_q + h) * d;
  long long last = causal ? i + n_kv - n_q : n_kv - 1; // the last key this row sees
  if (last > n_kv - 1) last = n_kv - 1;
  auto score = [&](long long j) {
    const float *kj = k + ((b * n_kv + j) * heads_kv + hk) * d;
    double s = 0;
    for (int c = 0; c < d; ++c) s += (double)qi[c] * kj[c];
    return s * scale;
  };
  double peak = -1.0 / 0.0;
  for (long long j = 0; j <= last; ++j) peak = fmax(peak, score(j));
  double total = 0;
  for (long long j = 0; j <= last; ++j) total += exp(score(j) - peak);
  double acc[256], rough[256];
  for (int c = 0; c < d; ++c) acc[c] = rough[c] = 0;
  for (long long j = 0; j <= last; ++j) {
    double p = exp(score(j) - peak);
    float p16 = round16((float)(p / total), bf16);
    const float *vj = v + ((b * n_kv + j) * heads_kv + hk) * d;
    for (int c = 0; c < d; ++c) {
      acc[c] += p * vj[c];
      rough[c] += (double)p16 * vj[c];
    }
  }
  float *oi = o + ((b * n_q + i) * heads_q + h) * d;
  for (int c = 0; c < d; ++c) oi[c] = total > 0 ? (float)(acc[c] / total) : 0.f;
  if (naive) {
    float *ni = naive + ((b * n_q + i) * heads_q + h) * d;
    for (int c = 0; c < d; ++c) ni[c] = round16((float)rough[c], bf16);
  }
  lse[(b * heads_q + h) * n_q + i] = total > 0 ? (float)(peak + log(total)) : -1.0f / 0.0f;
}
)";

} // namespace

void attention_reference(const ReferenceShape &s, const float *q, const float *k, const float *v, float *o, float *lse,
                         float *naive, dsl::DType dtype) {
  if (s.head_dim < 1 || s.head_dim > 256 || s.heads_kv < 1 || s.heads_q % s.heads_kv)
    throw Error("attention_reference: unsupported shape (head_dim 1..256, heads_q a multiple of heads_kv)");
  static std::mutex mutex;
  static std::unique_ptr<jit::LoadedKernel> kernel;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!kernel)
      kernel = jit::nvrtc_kernel(kSource, "attention_reference", 2);
  }
  int64_t rows = s.batch * s.heads_q * s.n_q;
  if (rows == 0)
    return;
  int bf16 = dtype == dsl::DType::bf16, d = static_cast<int>(s.head_dim), causal = s.causal;
  long long batch = s.batch, n_q = s.n_q, n_kv = s.n_kv, heads_q = s.heads_q, heads_kv = s.heads_kv;
  double scale = s.scale;
  void *params[] = {&q, &k, &v, &o, &lse, &naive, &bf16, &batch, &n_q, &n_kv, &heads_q, &heads_kv, &d, &scale, &causal};
  kernel->launch(static_cast<unsigned>((rows + 63) / 64), 1, 1, params, nullptr);
  jit::synchronize();
}

ErrorStats error_stats(const std::vector<float> &got, const std::vector<float> &want) {
  ErrorStats stats;
  for (size_t i = 0; i < got.size(); ++i) {
    stats.finite &= std::isfinite(got[i]);
    double diff = std::fabs(double(got[i]) - want[i]);
    stats.max = std::max(stats.max, diff);
    stats.mean += diff;
  }
  stats.mean /= static_cast<double>(std::max<size_t>(1, got.size()));
  return stats;
}

double forward_error_floor(dsl::DType dtype) { return dtype == dsl::DType::bf16 ? 1e-3 : 1.5e-4; }

bool within_forward_bars(const ErrorStats &ours, const ErrorStats &naive, dsl::DType dtype) {
  double floor = forward_error_floor(dtype);
  return ours.finite && ours.max <= 2 * naive.max + floor && ours.mean <= 1.1 * naive.mean + floor / 10;
}

} // namespace tessera::kernels
