// Shared by the benchmarks: the GPU check, the results file, timing by CUDA events (median
// after warm-up).
#ifndef TESSERA_BENCH_BENCH_UTIL_H
#define TESSERA_BENCH_BENCH_UTIL_H

#include "tessera/dsl/fp16.h"
#include "tessera/dsl/dtype.h"
#include "tessera/jit/Runtime.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace tessera::bench {

/// Exits with status 1, saying why, where there is no GPU to measure on.
inline void requireGpu(const char *bench) {
  std::string why;
  if (!jit::gpu_available(&why)) {
    std::cerr << bench << ": no GPU: " << why << "\n";
    std::exit(1);
  }
}

/// The JSON-lines file named by argv[1], appended to (/dev/null without one).
inline std::ofstream resultsFile(int argc, char **argv) {
  return std::ofstream(argc > 1 ? argv[1] : "/dev/null", std::ios::app);
}

/// `count` standard-normal values of `dtype` (f16 or bf16, as torch.randn's), seeded: the
/// inputs peers are timed on too. Constant inputs flatter a kernel: no row max ever moves, and
/// fewer toggling bits draw less power on a power-capped GPU.
inline void fillNormal(jit::DeviceBuffer &buffer, dsl::DType dtype, size_t count, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  std::vector<uint16_t> host(count);
  for (uint16_t &x : host)
    x = to_16bit(normal(gen), dtype);
  buffer.copy_from_host(host.data(), count * sizeof(uint16_t));
}

/// One call (which may compile and autotune), then `seconds` with the GPU idle: later timing
/// starts from rest, not from the heat and power state earlier work left.
inline void callThenRest(const std::function<void()> &run, int seconds) {
  run();
  jit::synchronize();
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
}

/// Milliseconds a call over `calls` back-to-back calls, after one call and a 2 s rest: the
/// steady state of a kernel that runs at the power cap.
inline double sustained_ms(const std::function<void()> &run, int calls) {
  callThenRest(run, 2);
  jit::Event start, stop;
  start.record();
  for (int i = 0; i < calls; ++i)
    run();
  stop.record();
  stop.synchronize();
  return stop.elapsed_since(start) / calls;
}

/// Median milliseconds of `runs` timed runs after `warmup` untimed ones.
inline double median_ms(const std::function<void()> &run, int warmup = 10, int runs = 100) {
  for (int i = 0; i < warmup; ++i)
    run();
  jit::synchronize();
  std::vector<double> times;
  jit::Event start, stop;
  for (int i = 0; i < runs; ++i) {
    start.record();
    run();
    stop.record();
    stop.synchronize();
    times.push_back(stop.elapsed_since(start));
  }
  std::nth_element(times.begin(), times.begin() + runs / 2, times.end());
  return times[runs / 2];
}

/// median_ms after one call and a 1 s rest: measurements taken one after another otherwise
/// start from whatever heat and power state the one before left (the H200 runs attention near
/// its 700 W cap), which favours what is measured first.
inline double median_ms_from_rest(const std::function<void()> &run, int warmup = 10, int runs = 100) {
  callThenRest(run, 1);
  return median_ms(run, warmup, runs);
}

/// `count` f16 or bf16 values of `buffer`, as floats.
inline std::vector<float> readHalves(const jit::DeviceBuffer &buffer, dsl::DType dtype, size_t count) {
  std::vector<uint16_t> host(count);
  buffer.copy_to_host(host.data(), count * sizeof(uint16_t));
  std::vector<float> values(count);
  for (size_t i = 0; i < count; ++i)
    values[i] = from_16bit(host[i], dtype);
  return values;
}

/// The largest difference of `got` from `want` (another config's output of the same inputs, in
/// `dtype`) beyond 16 of the dtype's ulps at max(1, |want|), 0 where none is: configs round
/// differently, a miscompiled one is off by whole values. A benchmark that does not look would
/// time a wrong kernel as readily as a right one (a persistent walk whose next tile's Q came
/// from the current tile read 0.6% faster, 12-04e).
inline double strayFrom(const std::vector<float> &got, const std::vector<float> &want, dsl::DType dtype) {
  const double ulp = dtype == dsl::DType::bf16 ? 1.0 / 128 : 1.0 / 1024;
  double stray = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double diff = std::abs(double(got[i]) - want[i]);
    if (!(diff <= 16 * ulp * std::max(1.0, std::abs(double(want[i])))))
      stray = std::max(stray, std::isnan(diff) ? INFINITY : diff);
  }
  return stray;
}

} // namespace tessera::bench

#endif // TESSERA_BENCH_BENCH_UTIL_H
