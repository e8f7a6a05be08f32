// Kernel::launch_on: argument checks, the specialization cache (memory, then disk, then the
// compiler) and cuLaunchKernel.
#include "tessera/jit/Cache.h"
#include "tessera/jit/Runtime.h"
#include "tessera/jit/TensorMap.h"

#include "Driver.h"

#include "tessera/compiler/Compiler.h"
#include "tessera/compiler/Interpreter.h"
#include "tessera/dsl/kernel.h"
#include "tessera/error.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace tessera::jit {

/// A kernel's loaded specializations, found by a hash of (config, specialization) and then
/// compared in full; a module is loaded into one context (device).
class KernelCache {
public:
  struct Entry {
    CUcontext context;
    dsl::Config config;
    uint64_t divisible; // bit i: argument i is a multiple of 16
    uint64_t ones;      // bit i: argument i is the integer 1
    std::unique_ptr<LoadedKernel> kernel;
  };
  /// The loaded specialization, or null; with `mutex` held.
  const LoadedKernel *find(CUcontext context, const dsl::Config &config, uint64_t divisible, uint64_t ones);
  /// Keeps `entry` unless an equal one was loaded meanwhile; the one kept. With `mutex` held.
  const LoadedKernel *insert(Entry entry);

  std::mutex mutex;
  std::unordered_map<uint64_t, std::vector<Entry>> entries;
};

namespace {

compiler::Target deviceTarget() {
  DeviceInfo info = current_device();
  return compiler::Target{info.major, info.minor, info.max_shared_memory};
}

std::string signatureText(const std::vector<dsl::ArgSpec> &signature) {
  std::string text;
  for (const dsl::ArgSpec &arg : signature)
    text += (text.empty() ? "" : ", ") + arg.str();
  return "(" + text + ")";
}

constexpr size_t kMaxArgs = 64;

/// The bytes of each argument as the kernel's parameter, checked against the signature; which
/// arguments are multiples of 16 (bytes for pointers) and which integers are 1, as bits.
uint64_t marshal(const std::string &kernel, const std::vector<dsl::ArgSpec> &signature,
                 const dsl::LaunchArg *args, size_t count, uint64_t *storage, uint64_t &ones) {
  ones = 0;
  if (count != signature.size())
    throw Error("kernel '" + kernel + "': expects " + std::to_string(signature.size()) +
                " arguments " + signatureText(signature) + ", got " + std::to_string(count));
  if (count > kMaxArgs)
    throw Error("kernel '" + kernel + "': more than " + std::to_string(kMaxArgs) + " arguments");
  uint64_t divisible = 0;
  for (size_t i = 0; i < count; ++i) {
    const dsl::ArgSpec &spec = signature[i];
    const dsl::LaunchArg &arg = args[i];
    auto fail = [&](const std::string &what) {
      throw Error("kernel '" + kernel + "': argument " + std::to_string(i) + " (" + spec.str() +
                  ") " + what);
    };
    using Kind = dsl::LaunchArg::Kind;
    storage[i] = 0;
    if (spec.pointer) {
      if (arg.kind() != Kind::Pointer)
        fail("must be a device pointer, got a number");
      storage[i] = static_cast<uint64_t>(arg.integer());
      divisible |= uint64_t(storage[i] % 16 == 0) << i;
      continue;
    }
    if (arg.kind() == Kind::Pointer)
      fail("must be a number, got a pointer");
    if (dsl::is_float(spec.dtype)) {
      double value = arg.kind() == Kind::Float ? arg.floating() : static_cast<double>(arg.integer());
      if (spec.dtype == dsl::DType::f32) {
        float f = static_cast<float>(value);
        std::memcpy(&storage[i], &f, sizeof(f));
      } else if (spec.dtype == dsl::DType::f64) {
        std::memcpy(&storage[i], &value, sizeof(value));
      } else {
        fail("has a dtype kernels cannot take as a scalar argument");
      }
      continue;
    }
    if (arg.kind() != Kind::Integer)
      fail("must be an integer, got a floating-point number");
    int64_t value = arg.integer();
    int bits = dsl::bit_width(spec.dtype);
    if (bits < 64) {
      int64_t lo = -(int64_t(1) << (bits - 1)), hi = (int64_t(1) << (bits - 1)) - 1;
      if (value < lo || value > hi)
        fail(std::to_string(value) + " does not fit in " + dsl::to_string(spec.dtype));
    }
    std::memcpy(&storage[i], &value, static_cast<size_t>(std::max(1, bits / 8)));
    divisible |= uint64_t(value % 16 == 0) << i;
    ones |= uint64_t(value == 1) << i;
  }
  return divisible;
}

uint64_t hashOf(const dsl::Config &config, uint64_t divisible, uint64_t ones) {
  uint64_t h = (1469598103934665603ull ^ divisible) * 1099511628211ull ^ ones;
  for (const auto &[name, value] : config.values()) {
    for (char c : name)
      h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    h = (h ^ static_cast<uint64_t>(value)) * 1099511628211ull;
  }
  return h;
}

dsl::Specialization specializationOf(uint64_t divisible, uint64_t ones, size_t count) {
  dsl::Specialization specialization;
  for (size_t i = 0; i < count; ++i) {
    specialization.divisible_by_16.push_back((divisible >> i) & 1);
    specialization.equal_to_1.push_back((ones >> i) & 1);
  }
  return specialization;
}

/// Compile `kernel` for `config` on this device, or take it from the disk cache.
std::unique_ptr<LoadedKernel> build(const dsl::Kernel &kernel, const dsl::Config &config,
                                    const dsl::Specialization &specialization) {
  dsl::TracedKernel traced = kernel.trace(config, specialization);
  const compiler::Target target = deviceTarget();
  std::string key = cache_key(traced.str(), target);
  std::optional<compiler::CompiledKernel> compiled = cache_load(key);
  if (!compiled) {
    compiled = compiler::compile(traced, target);
    cache_store(key, *compiled);
  }
  return std::make_unique<LoadedKernel>(compiled->ptx, compiled->name, compiled->num_warps,
                                        compiled->shared_memory, compiled->tensor_maps);
}

/// 16 bytes of zeros in the current context, allocated once: what a tensor map of an empty
/// tensor points at.
CUdeviceptr zerosOnDevice() {
  static std::mutex mutex;
  static std::unordered_map<CUcontext, CUdeviceptr> zeros;
  std::lock_guard<std::mutex> lock(mutex);
  CUcontext context = nullptr;
  TESSERA_CU(cuCtxGetCurrent(&context));
  CUdeviceptr &buffer = zeros[context];
  if (!buffer) {
    TESSERA_CU(cuMemAlloc_v2(&buffer, 16));
    TESSERA_CU(cuMemsetD8_v2(buffer, 0, 16));
  }
  return buffer;
}

/// The CUtensorMap of `map` for this launch's arguments.
CUtensorMap encodeTensorMap(const std::string &kernel, const compiler::TensorMap &map, const dsl::LaunchArg *args,
                            size_t count) {
  TensorMapEncoding e = plan_tensor_map(kernel, map, args, count);
  if (e.empty)
    e.address = zerosOnDevice();
  const CUtensorMapSwizzle swizzle = e.swizzle_bytes == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                                     : e.swizzle_bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                     : e.swizzle_bytes == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                             : CU_TENSOR_MAP_SWIZZLE_NONE;
  std::vector<cuuint32_t> elementStrides(e.dims.size(), 1);
  CUtensorMap encoded;
  CUresult result = driver::api().cuTensorMapEncodeTiled(
      &encoded,
      e.element_bytes == 4   ? CU_TENSOR_MAP_DATA_TYPE_UINT32
      : e.element_bytes == 2 ? CU_TENSOR_MAP_DATA_TYPE_UINT16
                             : CU_TENSOR_MAP_DATA_TYPE_UINT8,
      static_cast<cuuint32_t>(e.dims.size()), reinterpret_cast<void *>(e.address), e.dims.data(),
      e.byte_strides.data(), e.box.data(), elementStrides.data(), CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS)
    driver::check(result, ("cuTensorMapEncodeTiled(kernel '" + kernel + "', the tensor of argument " +
                           std::to_string(map.pointer) + ")").c_str());
  return encoded;
}

} // namespace

const LoadedKernel *KernelCache::find(CUcontext context, const dsl::Config &config, uint64_t divisible,
                                      uint64_t ones) {
  auto bucket = entries.find(hashOf(config, divisible, ones));
  if (bucket == entries.end())
    return nullptr;
  for (const Entry &entry : bucket->second)
    if (entry.context == context && entry.divisible == divisible && entry.ones == ones && entry.config == config)
      return entry.kernel.get();
  return nullptr;
}

const LoadedKernel *KernelCache::insert(Entry entry) {
  if (const LoadedKernel *loaded = find(entry.context, entry.config, entry.divisible, entry.ones))
    return loaded;
  std::vector<Entry> &bucket = entries[hashOf(entry.config, entry.divisible, entry.ones)];
  bucket.push_back(std::move(entry));
  return bucket.back().kernel.get();
}

} // namespace tessera::jit

namespace tessera::dsl {

const jit::LoadedKernel *Kernel::specialization(const Config &config, uint64_t divisible,
                                                uint64_t ones, size_t count) const {
  std::call_once(cache_->created, [this] { cache_->cache = std::make_shared<jit::KernelCache>(); });
  jit::KernelCache &cache = *cache_->cache;
  CUcontext context = nullptr;
  TESSERA_CU(cuCtxGetCurrent(&context));
  {
    std::lock_guard<std::mutex> lock(cache.mutex);
    if (const jit::LoadedKernel *loaded = cache.find(context, config, divisible, ones))
      return loaded;
  }
  // Compiled without the lock, so that threads launching other specializations compile beside
  // this one (a thread compiling the same one meanwhile costs a second compilation; the cache
  // keeps the first).
  std::unique_ptr<jit::LoadedKernel> built = jit::build(*this, config, jit::specializationOf(divisible, ones, count));
  std::lock_guard<std::mutex> lock(cache.mutex);
  return cache.insert({context, config, divisible, ones, std::move(built)});
}

std::vector<double> Kernel::compile_ahead(const std::vector<Config> &configs,
                                          const std::vector<std::vector<LaunchArg>> &args, unsigned threads) const {
  std::vector<double> seconds(configs.size(), 0.0);
  if (interpreter::enabled() || configs.size() != args.size())
    return seconds;
  std::call_once(cache_->created, [this] { cache_->cache = std::make_shared<jit::KernelCache>(); });
  jit::KernelCache &cache = *cache_->cache;
  CUcontext context = nullptr;
  TESSERA_CU(cuCtxGetCurrent(&context));
  struct Job {
    size_t index;
    uint64_t divisible, ones;
  };
  std::vector<Job> jobs;
  for (size_t i = 0; i < configs.size(); ++i) {
    uint64_t storage[jit::kMaxArgs], ones = 0, divisible = 0;
    try {
      divisible = jit::marshal(name_, signature_, args[i].data(), args[i].size(), storage, ones);
    } catch (const Error &) {
      continue; // the launch reports it
    }
    std::lock_guard<std::mutex> lock(cache.mutex);
    if (!cache.find(context, configs[i], divisible, ones))
      jobs.push_back({i, divisible, ones});
  }
  // Each thread takes the next job; the compiler keeps no state between compilations (a
  // context of its own each), the driver loads modules into the caller's context.
  std::atomic<size_t> next{0};
  auto work = [&] {
    try {
      jit::driver::make_current(context);
    } catch (const Error &) {
      return; // the launches compile instead
    }
    for (size_t j; (j = next++) < jobs.size();) {
      const Job &job = jobs[j];
      const auto start = std::chrono::steady_clock::now();
      try {
        std::unique_ptr<jit::LoadedKernel> kernel =
            jit::build(*this, configs[job.index], jit::specializationOf(job.divisible, job.ones, signature_.size()));
        seconds[job.index] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        std::lock_guard<std::mutex> lock(cache.mutex);
        cache.insert({context, configs[job.index], job.divisible, job.ones, std::move(kernel)});
      } catch (...) {
        // compiled again at its launch, which reports why it fails
      }
    }
  };
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < std::min<size_t>(std::max(threads, 1u), jobs.size()); ++t)
    helpers.emplace_back(work);
  work();
  for (std::thread &helper : helpers)
    helper.join();
  return seconds;
}

Kernel::Resources Kernel::resources(const Config &config, const LaunchArg *args, size_t count) const {
  uint64_t storage[jit::kMaxArgs];
  uint64_t ones;
  uint64_t divisible = jit::marshal(name_, signature_, args, count, storage, ones);
  const jit::LoadedKernel *loaded = specialization(config, divisible, ones, count);
  return {loaded->registers(), loaded->spilled_bytes(), loaded->shared_memory()};
}

void Kernel::launch_args(void *stream, Grid grid, const Config &config, const LaunchArg *args,
                         size_t count) const {
  uint64_t storage[jit::kMaxArgs];
  void *params[jit::kMaxArgs];
  uint64_t ones;
  uint64_t divisible = jit::marshal(name_, signature_, args, count, storage, ones);
  if (grid.x == 0 || grid.y == 0 || grid.z == 0)
    return; // no programs, nothing to do
  if (grid.x > uint32_t(std::numeric_limits<int32_t>::max()) || grid.y > 65535 || grid.z > 65535)
    throw Error("kernel '" + name_ + "': grid (" + std::to_string(grid.x) + ", " +
                std::to_string(grid.y) + ", " + std::to_string(grid.z) +
                ") exceeds the GPU's limits (2^31-1, 65535, 65535)");
  if (interpreter::enabled())
    return interpreter::run(trace(config), grid, args, count);
  const jit::LoadedKernel *loaded = specialization(config, divisible, ones, count);
  for (size_t i = 0; i < count; ++i)
    params[i] = &storage[i];
  // The TMA's tensor maps, by value after the arguments.
  const std::vector<compiler::TensorMap> &maps = loaded->tensor_maps();
  if (count + maps.size() > jit::kMaxArgs)
    throw Error("kernel '" + name_ + "': more than " + std::to_string(jit::kMaxArgs) + " parameters");
  std::vector<CUtensorMap> encoded; // CUtensorMap is 64-byte aligned
  encoded.reserve(maps.size());
  for (size_t i = 0; i < maps.size(); ++i) {
    encoded.push_back(jit::encodeTensorMap(name_, maps[i], args, count));
    params[count + i] = &encoded.back();
  }
  loaded->launch(grid.x, grid.y, grid.z, params, stream);
}

} // namespace tessera::dsl
