#include "tessera/kernels/attention.h"
#include "tessera/kernels/catalog.h"

#include "AttentionKernels.h"
#include "tessera/compiler/Interpreter.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <string>

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

[[noreturn]] void fail(const std::string &message) { throw Error("attention_forward: " + message); }

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

/// Block shape per padded head dim: the f32 accumulator and the K/V tiles must fit in
/// registers (8 warps from head dim 128 on, which spills with 4) and shared memory.
dsl::Config configFor(int64_t padded, bool causal) {
  int64_t bm = padded <= 128 ? 128 : 64, bn = padded <= 128 ? 64 : 32;
  return {{"BLOCK_M", bm}, {"BLOCK_N", bn}, {"HEAD_DIM", padded}, {"CAUSAL", causal ? 1 : 0},
          {"num_warps", padded >= 128 ? 8 : 4}};
}

} // namespace

std::vector<ShippedKernel> shipped_kernels() {
  std::vector<ShippedKernel> kernels;
  for (dsl::DType dtype : {dsl::DType::f16, dsl::DType::bf16})
    for (int64_t padded : {32, 64, 128, 256})
      for (bool causal : {false, true})
        kernels.push_back({detail::attention_forward_kernel(dtype), configFor(padded, causal),
                           dsl::to_string(dtype) + ".d" + std::to_string(padded) + (causal ? ".causal" : "")});
  return kernels;
}

void attention_forward(const TensorView &q, const TensorView &k, const TensorView &v, const TensorView &o,
                       const TensorView &lse, const AttentionOptions &options, void *stream) {
  checkView("q", q, 4);
  checkView("k", k, 4);
  checkView("v", v, 4);
  checkView("o", o, 4);
  checkView("lse", lse, 3);
  if (q.dtype != dsl::DType::f16 && q.dtype != dsl::DType::bf16)
    fail("q must be f16 or bf16, got " + dsl::to_string(q.dtype));
  for (auto [name, t] : {std::pair<const char *, const TensorView *>{"k", &k}, {"v", &v}, {"o", &o}})
    if (t->dtype != q.dtype)
      fail(std::string(name) + " is " + dsl::to_string(t->dtype) + " but q is " + dsl::to_string(q.dtype));
  if (lse.dtype != dsl::DType::f32)
    fail("lse must be f32, got " + dsl::to_string(lse.dtype));

  const int64_t batch = q.shape[0], n_q = q.shape[1], heads_q = q.shape[2], head_dim = q.shape[3];
  const int64_t n_kv = k.shape[1], heads_kv = k.shape[2];
  if (k.shape != v.shape)
    fail("k " + shapeStr(k.shape) + " and v " + shapeStr(v.shape) + " differ");
  if (k.shape[0] != batch || k.shape[3] != head_dim)
    fail("k " + shapeStr(k.shape) + " does not match q " + shapeStr(q.shape) + " in batch or head_dim");
  if (o.shape != q.shape)
    fail("o " + shapeStr(o.shape) + " must have q's shape " + shapeStr(q.shape));
  if (lse.shape != std::vector<int64_t>{batch, heads_q, n_q})
    fail("lse " + shapeStr(lse.shape) + " must be [batch, heads_q, n_q] = " + shapeStr({batch, heads_q, n_q}));
  if (lse.stride(2) != 1 || lse.stride(1) != n_q || lse.stride(0) != heads_q * n_q)
    fail("lse must be contiguous");
  if (heads_kv == 0 || heads_q % heads_kv)
    fail("heads_q (" + std::to_string(heads_q) + ") must be a multiple of heads_kv (" + std::to_string(heads_kv) + ")");
  if (head_dim < 1 || head_dim > 256)
    fail("head_dim " + std::to_string(head_dim) + " is not supported (1 to 256)");
  if (n_q > INT32_MAX || n_kv > INT32_MAX)
    fail("sequence lengths must be below 2^31");
  if (batch * heads_q > 65535)
    fail("batch*heads_q = " + std::to_string(batch * heads_q) + " is above 65535, which is not supported yet");
  for (auto [name, t] : {std::pair<const char *, const TensorView *>{"q", &q}, {"k", &k}, {"v", &v}})
    checkDisjoint("o", o, name, *t);
  checkDisjoint("lse", lse, "o", o);
  for (auto [name, t] : {std::pair<const char *, const TensorView *>{"q", &q}, {"k", &k}, {"v", &v}})
    checkDisjoint("lse", lse, name, *t);
  if (options.scale && !std::isfinite(*options.scale))
    fail("scale must be finite");
  if (o.numel() == 0)
    return;

  int64_t padded = 16;
  while (padded < head_dim)
    padded *= 2;
  dsl::Config config = configFor(padded, options.causal);
  double scale = options.scale ? *options.scale : 1.0 / std::sqrt(static_cast<double>(head_dim));

  static std::mutex mutex;
  static std::optional<dsl::Kernel> kernels[2];
  const dsl::Kernel *kernel;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto &slot = kernels[q.dtype == dsl::DType::bf16];
    if (!slot)
      slot = detail::attention_forward_kernel(q.dtype);
    kernel = &*slot;
  }
  auto programs = static_cast<uint32_t>((n_q + config["BLOCK_M"] - 1) / config["BLOCK_M"]);
  dsl::Grid grid{programs, static_cast<uint32_t>(batch * heads_q), 1};
  kernel->launch_on(stream, grid, config, q.data, k.data, v.data, o.data, lse.data, n_q, n_kv, heads_q,
                    heads_q / heads_kv, head_dim, q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1),
                    k.stride(2), v.stride(0), v.stride(1), v.stride(2), o.stride(0), o.stride(1), o.stride(2),
                    static_cast<float>(scale));
}

} // namespace tessera::kernels
