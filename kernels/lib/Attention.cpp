#include "tessera/kernels/attention.h"
#include "tessera/kernels/catalog.h"

#include "AttentionKernels.h"
#include "tessera/compiler/Interpreter.h"
#include "tessera/jit/Autotune.h"
#include "tessera/jit/Runtime.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <mutex>
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

int64_t powerOfTwoAtLeast(int64_t n) {
  int64_t p = 1;
  while (p < n)
    p *= 2;
  return p;
}

/// The head dim the kernel computes with: a power of two of at least 16 (the rest masked).
int64_t paddedHeadDim(int64_t head_dim) { return std::max<int64_t>(16, powerOfTwoAtLeast(head_dim)); }

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

/// The tuner of one kernel variant (dtype, padded head dim, causality), made once.
jit::Autotuner &tunerFor(dsl::DType dtype, int64_t padded, bool causal) {
  static std::mutex mutex;
  static std::map<std::tuple<dsl::DType, int64_t, bool>, std::unique_ptr<jit::Autotuner>> tuners;
  std::lock_guard<std::mutex> lock(mutex);
  auto &slot = tuners[{dtype, padded, causal}];
  if (!slot) {
    jit::Autotuner::Options options;
    // Arguments 5 and 6 are n_q and n_kv; nearby lengths share a tuning.
    options.key_extra = [](const std::vector<dsl::LaunchArg> &args) {
      return "nq" + std::to_string(powerOfTwoAtLeast(args[5].integer())) + ",nkv" +
             std::to_string(powerOfTwoAtLeast(args[6].integer()));
    };
    slot = std::make_unique<jit::Autotuner>(forwardKernel(dtype), attention_forward_configs(padded, causal), options);
  }
  return *slot;
}

void checkConfig(const dsl::Config &config, int64_t padded, bool causal) {
  for (const char *name : {"BLOCK_M", "BLOCK_N"}) {
    int64_t v = config.get(name, 0);
    if (v < 16 || (v & (v - 1)))
      fail("config " + config.str() + ": " + name + " must be a power of two of at least 16");
  }
  if (config.get("HEAD_DIM", 0) != padded || config.get("CAUSAL", -1) != (causal ? 1 : 0))
    fail("config " + config.str() + " is not for head_dim " + std::to_string(padded) +
         (causal ? ", causal" : ", not causal") + " (take one of attention_forward_configs)");
}

} // namespace

std::vector<dsl::Config> attention_forward_configs(int64_t head_dim, bool causal) {
  int64_t padded = paddedHeadDim(head_dim);
  // (BLOCK_M, BLOCK_N, warps, stages, SPLIT_MASKED, Q in shared memory): every warp owns at
  // least 16 whole rows, so that the softmax statistics stay in the warp; the f32 accumulator
  // (BLOCK_M x d) must fit in registers beside the scores (BLOCK_M x BLOCK_N), which from
  // d = 128 on leaves Q to shared memory when a warp owns 32 rows. Measured on the H200: the
  // split into unmasked and masked loops pays at d <= 64 (causal +25%), costs at d = 128.
  std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>> shapes;
  if (padded <= 64)
    shapes = {{128, 64, 4, 3, 1, 0}, {128, 64, 4, 3, 0, 0}, {128, 128, 8, 2, 1, 0}, {64, 64, 4, 3, 1, 0}};
  else if (padded <= 128)
    shapes = {{128, 64, 8, 3, 0, 0}, {128, 32, 4, 3, 0, 1}, {128, 32, 4, 3, 1, 1}, {128, 64, 4, 2, 0, 1},
              {128, 64, 8, 3, 1, 0}, {64, 64, 4, 3, 1, 0}};
  else
    shapes = {{64, 32, 4, 2, 0, 1}, {64, 64, 4, 2, 0, 1}, {128, 32, 8, 2, 0, 1}, {64, 32, 4, 2, 0, 0}};
  std::vector<dsl::Config> configs;
  for (auto [bm, bn, warps, stages, split, qShared] : shapes)
    configs.push_back({{"BLOCK_M", bm}, {"BLOCK_N", bn}, {"HEAD_DIM", padded}, {"CAUSAL", causal ? 1 : 0},
                       {"SPLIT_MASKED", split}, {"num_warps", warps}, {"num_stages", stages},
                       {"invariant_operands_in_shared", qShared}});
  return configs;
}

std::vector<ShippedKernel> shipped_kernels() {
  std::vector<ShippedKernel> kernels;
  for (dsl::DType dtype : {dsl::DType::f16, dsl::DType::bf16})
    for (int64_t padded : {32, 64, 128, 256})
      for (bool causal : {false, true}) {
        std::vector<dsl::Config> configs = attention_forward_configs(padded, causal);
        for (size_t i = 0; i < configs.size(); ++i)
          kernels.push_back({forwardKernel(dtype), configs[i],
                             dsl::to_string(dtype) + ".d" + std::to_string(padded) + (causal ? ".causal" : "") +
                                 (i ? ".c" + std::to_string(i) : "")});
      }
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
  const int64_t padded = paddedHeadDim(head_dim);
  if (options.config)
    checkConfig(*options.config, padded, options.causal);
  if (!interpreter::enabled())
    for (auto [name, t] : {std::pair<const char *, const TensorView *>{"q", &q}, {"k", &k}, {"v", &v}, {"o", &o}, {"lse", &lse}})
      if (t->numel() > 0 && !jit::is_device_pointer(t->data))
        fail(std::string(name) + " is marked CUDA but its pointer is not device memory of the current GPU");
  if (o.numel() == 0)
    return;

  double scale = options.scale ? *options.scale : 1.0 / std::sqrt(static_cast<double>(head_dim));
  std::vector<dsl::LaunchArg> args{q.data, k.data, v.data, o.data, lse.data, n_q, n_kv, heads_q,
                                   heads_q / heads_kv, head_dim, q.stride(0), q.stride(1), q.stride(2),
                                   k.stride(0), k.stride(1), k.stride(2), v.stride(0), v.stride(1),
                                   v.stride(2), o.stride(0), o.stride(1), o.stride(2), static_cast<float>(scale)};
  auto grid = [&](const dsl::Config &config) {
    return dsl::Grid{static_cast<uint32_t>((n_q + config["BLOCK_M"] - 1) / config["BLOCK_M"]),
                     static_cast<uint32_t>(batch * heads_q), 1};
  };
  dsl::Config config = options.config           ? *options.config
                       : interpreter::enabled() ? attention_forward_configs(padded, options.causal).front()
                                                : tunerFor(q.dtype, padded, options.causal).config_for(grid, args);
  forwardKernel(q.dtype).launch_args(stream, grid(config), config, args.data(), args.size());
}

} // namespace tessera::kernels
