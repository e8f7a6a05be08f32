// The tessera command line:
//   tessera info                            the GPU, driver, compute capability; compiler; caches
//   tessera cache clear                     remove every compiled kernel from the disk cache
//   tessera tune matmul M N K [bf16|fp16]   tune the matmul for these sizes on this GPU
//   tessera tune --export FILE              write this GPU model's tuning results to FILE
//   tessera tune --import FILE              merge FILE's results for this GPU model
#include "tessera/compiler/Compiler.h"
#include "tessera/error.h"
#include "tessera/jit/Autotune.h"
#include "tessera/jit/Cache.h"
#include "tessera/jit/Runtime.h"

#include "matmul.h"

#include <cstdio>
#include <string>

namespace {

int usage() {
  std::fprintf(stderr, "usage: tessera info\n       tessera cache clear\n"
                       "       tessera tune matmul M N K [bf16|fp16]\n"
                       "       tessera tune --export FILE | --import FILE\n");
  return 2;
}

int tuneMatmul(int64_t M, int64_t N, int64_t K, bool bf16) {
  using namespace tessera;
  jit::DeviceBuffer a(M * K * 2), b(K * N * 2), c(M * N * 2);
  a.fill_bytes(0x3C);
  b.fill_bytes(0x3C);
  dsl::Kernel kernel = bf16 ? examples::matmul<dsl::bf16>() : examples::matmul<dsl::f16>();
  jit::Autotuner::Options options;
  options.key_arguments = {3, 4, 5}; // M, N, K
  jit::Autotuner tuner(kernel, examples::matmul_configs(), options);
  auto grid = [&](const dsl::Config &config) { return examples::matmul_grid(config, M, N); };
  std::vector<dsl::LaunchArg> args{a.data(), b.data(), c.data(), M, N, K, K, 1, N, 1, N, 1};
  dsl::Config best = tuner.config_for(grid, args);
  const auto &tuning = tuner.last_tuning();
  if (!tuning) {
    std::printf("%s %lldx%lldx%lld: stored result %s (no timing runs)\n", bf16 ? "bf16" : "fp16",
                (long long)M, (long long)N, (long long)K, best.str().c_str());
    return 0;
  }
  double flops = 2.0 * M * N * K;
  std::printf("%-66s %9s %8s %5s %6s %9s\n", "config", "ms", "TFLOP/s", "regs", "spill", "compile s");
  for (const jit::Trial &trial : tuning->trials) {
    if (trial.failure.empty())
      std::printf("%-66s %9.4f %8.1f %5d %6d %9.2f\n", trial.config.str().c_str(), trial.ms,
                  flops / (trial.ms * 1e9), trial.registers, trial.spilled_bytes, trial.compile_seconds);
    else
      std::printf("%-66s %s\n", trial.config.str().c_str(), trial.failure.c_str());
  }
  const jit::Trial &fallback = tuning->trials.front();
  std::printf("best %s: %.4f ms (%.1f TFLOP/s); default %s: %s; tuned %zu configs in %.1f s\n",
              best.str().c_str(), tuning->best_ms, flops / (tuning->best_ms * 1e9), fallback.config.str().c_str(),
              fallback.failure.empty() ? (std::to_string(fallback.ms) + " ms").c_str() : fallback.failure.c_str(),
              tuning->trials.size(), tuning->seconds);
  return 0;
}

int info() {
  std::string why;
  if (tessera::jit::gpu_available(&why)) {
    tessera::jit::DeviceInfo device = tessera::jit::current_device();
    std::printf("gpu:            %s (compute capability %d.%d, %d SMs, %.1f GiB, memory clock %d MHz)\n",
                device.name.c_str(), device.major, device.minor, device.sm_count,
                device.memory_bytes / double(1 << 30), device.memory_clock_khz / 1000);
    std::printf("driver:         CUDA %d.%d\n", device.driver_version / 1000, device.driver_version % 1000 / 10);
    std::printf("target:         %s\n", tessera::compiler::Target{device.major, device.minor}.arch().c_str());
  } else {
    std::printf("gpu:            none (%s)\n", why.c_str());
  }
  std::printf("compiler:       %s\n", tessera::compiler::version().c_str());
  tessera::jit::CacheStats stats = tessera::jit::cache_stats();
  std::printf("cache:          %s (%lld kernels, %.1f KiB)\n", tessera::jit::cache_dir().c_str(),
              static_cast<long long>(stats.entries), stats.bytes / 1024.0);
  std::printf("tuning results: %s\n", tessera::jit::TuningDatabase::default_path().c_str());
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::string command = argc > 1 ? argv[1] : "";
  try {
    if (command == "info" && argc == 2)
      return info();
    if (command == "tune" && argc >= 6 && std::string(argv[2]) == "matmul") {
      bool bf16 = argc < 7 || std::string(argv[6]) != "fp16";
      return tuneMatmul(std::atoll(argv[3]), std::atoll(argv[4]), std::atoll(argv[5]), bf16);
    }
    if (command == "tune" && argc == 4 && (std::string(argv[2]) == "--export" || std::string(argv[2]) == "--import")) {
      tessera::jit::TuningDatabase database;
      tessera::jit::TuningContext context = tessera::jit::TuningContext::current();
      bool exporting = std::string(argv[2]) == "--export";
      size_t count = exporting ? database.export_to(argv[3], context) : database.import_from(argv[3], context);
      std::printf("%s %zu tuning results for %s %s %s\n", exporting ? "exported" : "imported", count,
                  context.str().c_str(), exporting ? "to" : "from", argv[3]);
      return 0;
    }
    if (command == "cache" && argc == 3 && std::string(argv[2]) == "clear") {
      long long removed = tessera::jit::cache_clear();
      std::printf("removed %lld kernels from %s\n", removed, tessera::jit::cache_dir().c_str());
      return 0;
    }
  } catch (const tessera::Error &error) {
    std::fprintf(stderr, "tessera: %s\n", error.what());
    return 1;
  }
  return usage();
}
