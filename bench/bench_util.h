// Shared by the benchmarks: the GPU check, the results file, timing by CUDA events (median
// after warm-up).
#ifndef TESSERA_BENCH_BENCH_UTIL_H
#define TESSERA_BENCH_BENCH_UTIL_H

#include "tessera/jit/Runtime.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
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
