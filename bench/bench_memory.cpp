// Memory-bound kernels on the GPU: vector add and row softmax (fp32, 8192 x 8192) in GB/s, and
// the host-side cost of launching a cached kernel. Peers (copy bandwidth, torch) come from
// peers_memory.py in the same device run; JSON lines go to the file given as argv[1].
#include "softmax.h"
#include "vector_add.h"

#include "tessera/jit/Nvrtc.h"
#include "bench_util.h"
#include "tessera/jit/Runtime.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <vector>

using namespace tessera;
using namespace tessera::dsl;

namespace {

struct Row {
  std::string what, config;
  double ms, gbps;
};

} // namespace

int main(int argc, char **argv) {
  bench::requireGpu("bench_memory");
  std::ofstream json = bench::resultsFile(argc, argv);
  jit::DeviceInfo device = jit::current_device();
  std::vector<Row> rows;

  // Vector add: 3 x 1 GiB.
  const int64_t n = int64_t(1) << 28;
  jit::DeviceBuffer x(n * 4), y(n * 4), out(n * 4);
  x.fill_bytes(0x3C); // ~0.012f everywhere: real values, not zeros
  y.fill_bytes(0x3C);
  Kernel add = examples::vector_add();
  Row best{"vector_add_f32", "", 1e30, 0};
  for (int64_t block : {1024, 2048, 4096, 8192})
    for (int64_t warps : {4, 8}) {
      Config config{{"BLOCK", block}, {"num_warps", warps}};
      double ms = bench::median_ms([&] {
        add.launch({uint32_t(cdiv(n, block))}, config, x.data(), y.data(), out.data(), int(n));
      });
      if (ms < best.ms)
        best = {"vector_add_f32", config.str(), ms, 3.0 * n * 4 / (ms * 1e6)};
    }
  rows.push_back(best);

  // Row softmax, fp32, 8192 x 8192.
  const int64_t R = 8192, C = 8192;
  jit::DeviceBuffer in(R * C * 4), sm(R * C * 4);
  in.fill_bytes(0x3C);
  Kernel softmax = examples::softmax<f32>();
  best = {"softmax_f32_8192x8192", "", 1e30, 0};
  for (int64_t warps : {4, 8, 16, 32}) {
    Config config{{"BLOCK", C}, {"num_warps", warps}};
    double ms = bench::median_ms([&] {
      softmax.launch({uint32_t(R)}, config, in.data(), sm.data(), int(C), C, C);
    });
    if (ms < best.ms)
      best = {"softmax_f32_8192x8192", config.str(), ms, 2.0 * R * C * 4 / (ms * 1e6)};
  }
  rows.push_back(best);

  // Host-side launch overhead of a cached kernel (no synchronization between launches).
  Config tiny{{"BLOCK", 128}, {"num_warps", 4}};
  add.launch({1}, tiny, x.data(), y.data(), out.data(), 1);
  jit::synchronize();
  const int launches = 20000;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < launches; ++i)
    add.launch({1}, tiny, x.data(), y.data(), out.data(), 1);
  auto t1 = std::chrono::steady_clock::now();
  jit::synchronize();
  double us = std::chrono::duration<double, std::micro>(t1 - t0).count() / launches;

  // The floor: cuLaunchKernel alone, on an NVRTC-compiled empty kernel.
  auto empty = jit::nvrtc_kernel("extern \"C\" __global__ void empty(int n) {}", "empty");
  int arg = 1;
  void *params[] = {&arg};
  empty->launch(1, 1, 1, params, nullptr);
  jit::synchronize();
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < launches; ++i)
    empty->launch(1, 1, 1, params, nullptr);
  t1 = std::chrono::steady_clock::now();
  jit::synchronize();
  double raw = std::chrono::duration<double, std::micro>(t1 - t0).count() / launches;

  std::printf("%-24s %-40s %10s %10s\n", "kernel", "config", "ms", "GB/s");
  for (const Row &row : rows) {
    std::printf("%-24s %-40s %10.4f %10.1f\n", row.what.c_str(), row.config.c_str(), row.ms, row.gbps);
    json << "{\"kind\": \"tessera\", \"what\": \"" << row.what << "\", \"config\": \"" << row.config
         << "\", \"ms\": " << row.ms << ", \"gbps\": " << row.gbps << ", \"gpu\": \"" << device.name << "\"}\n";
  }
  std::printf("launch overhead (host, cached kernel): %.2f us per launch; cuLaunchKernel alone: %.2f us\n", us, raw);
  json << "{\"kind\": \"tessera\", \"what\": \"launch_overhead_us\", \"us\": " << us
       << ", \"cuLaunchKernel_us\": " << raw << ", \"gpu\": \"" << device.name << "\"}\n";
  return 0;
}
