// The tessera command line:
//   tessera info          the GPU, driver and compute capability; the compiler; the cache
//   tessera cache clear   remove every compiled kernel from the disk cache
#include "tessera/compiler/Compiler.h"
#include "tessera/error.h"
#include "tessera/jit/Cache.h"
#include "tessera/jit/Runtime.h"

#include <cstdio>
#include <string>

namespace {

int usage() {
  std::fprintf(stderr, "usage: tessera info\n       tessera cache clear\n");
  return 2;
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
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::string command = argc > 1 ? argv[1] : "";
  try {
    if (command == "info" && argc == 2)
      return info();
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
