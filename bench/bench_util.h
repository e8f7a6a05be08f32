// Timing shared by the benchmarks: CUDA events around each run, median after warm-up.
#ifndef TESSERA_BENCH_BENCH_UTIL_H
#define TESSERA_BENCH_BENCH_UTIL_H

#include "tessera/jit/Runtime.h"

#include <algorithm>
#include <functional>
#include <vector>

namespace tessera::bench {

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

} // namespace tessera::bench

#endif // TESSERA_BENCH_BENCH_UTIL_H
