// Helpers for GPU tests: skipping without a GPU, 16-bit floats on the host, device arrays and
// NVRTC reference kernels.
#ifndef TESSERA_TESTS_GPU_GPU_UTIL_H
#define TESSERA_TESTS_GPU_GPU_UTIL_H

#include "tessera/jit/Nvrtc.h"
#include "tessera/jit/Runtime.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace tessera::testing {

/// Base of every GPU test: skips, saying why, where no GPU can be used.
class GpuTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    if (!jit::gpu_available(&why))
      GTEST_SKIP() << "no GPU: " << why;
  }
};

/// IEEE half and bfloat16 on the host (round to nearest even).
inline uint16_t to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0xff)
    return static_cast<uint16_t>(sign | 0x7c00 | (mant ? 0x200 : 0));
  if (exp >= 31)
    return static_cast<uint16_t>(sign | 0x7c00);
  if (exp <= 0) {
    if (exp < -10)
      return static_cast<uint16_t>(sign);
    mant |= 0x800000;
    uint32_t shift = static_cast<uint32_t>(14 - exp);
    uint32_t half = mant >> shift, rest = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rest > mid || (rest == mid && (half & 1)))
      ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (half & 1)))
    ++half;
  return static_cast<uint16_t>(half);
}

inline float from_half(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  uint32_t x;
  if (exp == 0) {
    if (mant == 0) {
      x = sign;
    } else {
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while (!(mant & 0x400));
      x = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (mant & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    x = sign | 0x7f800000 | mant << 13;
  } else {
    x = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

inline uint16_t to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if (std::isnan(f))
    return static_cast<uint16_t>((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return static_cast<uint16_t>(x >> 16);
}

inline float from_bf16(uint16_t h) {
  uint32_t x = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

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
