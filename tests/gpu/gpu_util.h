// Helpers for GPU tests: skipping without a GPU, 16-bit floats on the host, device arrays and
// NVRTC reference kernels.
#ifndef TESSERA_TESTS_GPU_GPU_UTIL_H
#define TESSERA_TESTS_GPU_GPU_UTIL_H

#include "tessera/dsl/fp16.h"
#include "tessera/jit/Cache.h"
#include "tessera/jit/Nvrtc.h"
#include "tessera/jit/Runtime.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

namespace tessera::testing {

/// Base of every GPU test: skips, saying why, where no GPU can be used. Tests tune into a
/// database of their own (unless TESSERA_TUNING_DB names one): their picks, for small shapes and
/// often timed beside other test processes, must not serve the user's work from tuning.json.
class GpuTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    if (!jit::gpu_available(&why))
      GTEST_SKIP() << "no GPU: " << why;
    if (!std::getenv("TESSERA_TUNING_DB"))
      setenv("TESSERA_TUNING_DB", (jit::cache_dir() + "/tuning-tests.json").c_str(), 1);
  }
};

using tessera::from_bf16;
using tessera::from_half;
using tessera::to_bf16;
using tessera::to_half;

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1, float hi = 1) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}

/// A device copy of host data.
template <typename T> jit::DeviceBuffer upload(const std::vector<T> &host) {
  jit::DeviceBuffer buffer(std::max<size_t>(1, host.size()) * sizeof(T));
  buffer.copy_from_host(host.data(), host.size() * sizeof(T));
  return buffer;
}

template <typename T> std::vector<T> download(const jit::DeviceBuffer &buffer, size_t n) {
  std::vector<T> host(n);
  buffer.copy_to_host(host.data(), n * sizeof(T));
  return host;
}

/// A buffer of `bytes` with every byte 0xFF (NaN for floats): an output not written stays NaN.
inline jit::DeviceBuffer poisoned(size_t bytes) {
  jit::DeviceBuffer buffer(std::max<size_t>(1, bytes));
  buffer.fill_bytes(0xFF);
  return buffer;
}

inline void launch_reference(const jit::LoadedKernel &kernel, unsigned blocks,
                             std::vector<void *> params) {
  kernel.launch(blocks, 1, 1, params.data(), nullptr);
  jit::synchronize();
}

} // namespace tessera::testing

#endif // TESSERA_TESTS_GPU_GPU_UTIL_H
