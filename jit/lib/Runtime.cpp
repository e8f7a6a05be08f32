#include "tessera/jit/Runtime.h"

#include "Driver.h"
#include "tessera/compiler/Interpreter.h"
#include "tessera/error.h"

#include <cstdlib>
#include <map>
#include <mutex>
#include <cstring>

#include <utility>

namespace tessera::jit {

bool gpu_available(std::string *why) { return driver::available(why); }

int device_count() {
  int count = 0;
  return driver::available(nullptr) && driver::api().cuDeviceGetCount(&count) == CUDA_SUCCESS ? count : 0;
}

std::string DeviceInfo::model() const {
  return name + "/" + std::to_string(sm_count) + "SM/" + std::to_string(memory_clock_khz / 1000) + "MHz";
}

int device_of(const void *pointer) {
  // One query for the three attributes (a call costs microseconds, and launches check every
  // tensor); memory CUDA does not know reads as type 0.
  unsigned int type = 0, managed = 0;
  int ordinal = -1;
  CUpointer_attribute attributes[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                      CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL};
  void *values[] = {&type, &managed, &ordinal};
  if (driver::api().cuPointerGetAttributes(3, attributes, values, reinterpret_cast<CUdeviceptr>(pointer)) !=
      CUDA_SUCCESS)
    return -1;
  if (!managed && type != CU_MEMORYTYPE_DEVICE)
    return -1; // plain or pinned host memory
  return ordinal;
}

DeviceGuard::DeviceGuard(int ordinal) {
  CUcontext current = nullptr, wanted = driver::primary_context(ordinal);
  TESSERA_CU(cuCtxGetCurrent(&current));
  if (current == wanted)
    return;
  TESSERA_CU(cuCtxSetCurrent(wanted));
  previous_ = current;
}

DeviceGuard::~DeviceGuard() {
  if (previous_)
    driver::api().cuCtxSetCurrent(static_cast<CUcontext>(previous_));
}

DeviceInfo current_device() {
  const auto &api = driver::api();
  CUdevice device;
  TESSERA_CU(cuCtxGetDevice(&device));
  // Asked once a device: the queries below took 0.7 ms on the H200, and launches ask on every
  // call (whether the TMA may copy).
  static std::mutex mutex;
  static std::map<CUdevice, DeviceInfo> known;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = known.find(device); it != known.end())
    return it->second;
  DeviceInfo info;
  info.ordinal = device; // a CUdevice is its ordinal
  char name[256] = {};
  TESSERA_CU(cuDeviceGetName(name, sizeof(name), device));
  info.name = name;
  auto attribute = [&](CUdevice_attribute which) {
    int value = 0;
    driver::check(api.cuDeviceGetAttribute(&value, which, device), "cuDeviceGetAttribute");
    return value;
  };
  info.major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  info.minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  info.sm_count = attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  info.memory_clock_khz = attribute(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
  info.max_shared_memory = attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  TESSERA_CU(cuDeviceTotalMem_v2(&info.memory_bytes, device));
  TESSERA_CU(cuDriverGetVersion(&info.driver_version));
  known.emplace(device, info);
  return info;
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes), host_(interpreter::enabled()) {
  if (host_) {
    void *host = std::calloc(bytes ? bytes : 1, 1);
    if (!host)
      throw Error("DeviceBuffer: cannot allocate " + std::to_string(bytes) + " bytes of host memory");
    interpreter::register_allocation(host, bytes);
    ptr_ = reinterpret_cast<uintptr_t>(host);
    return;
  }
  CUdeviceptr ptr = 0;
  if (bytes)
    TESSERA_CU(cuMemAlloc_v2(&ptr, bytes));
  ptr_ = ptr;
}

namespace {

/// The current device's pool for stream-ordered workspaces: tessera's own, keeping what it
/// frees (the default pool returns memory at every synchronization, and mapping a 100 MB
/// workspace again cost ~0.2 ms a call on the H200).
CUmemoryPool workspacePool() {
  CUdevice device;
  TESSERA_CU(cuCtxGetDevice(&device));
  static std::mutex mutex;
  static std::map<CUdevice, CUmemoryPool> pools;
  std::lock_guard<std::mutex> lock(mutex);
  if (auto it = pools.find(device); it != pools.end())
    return it->second;
  CUmemPoolProps props = {};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.handleTypes = CU_MEM_HANDLE_TYPE_NONE;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = device;
  CUmemoryPool pool;
  TESSERA_CU(cuMemPoolCreate(&pool, &props));
  cuuint64_t keep = ~cuuint64_t(0);
  TESSERA_CU(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
  return pools[device] = pool;
}

} // namespace

DeviceBuffer::DeviceBuffer(size_t bytes, void *stream) {
  if (interpreter::enabled()) {
    *this = DeviceBuffer(bytes);
    return;
  }
  CUdeviceptr ptr = 0;
  if (bytes)
    TESSERA_CU(cuMemAllocFromPoolAsync(&ptr, bytes, workspacePool(), static_cast<CUstream>(stream)));
  ptr_ = ptr, bytes_ = bytes, streamOrdered_ = true, stream_ = stream;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer &&other) noexcept
    : ptr_(std::exchange(other.ptr_, 0)), bytes_(std::exchange(other.bytes_, 0)), host_(other.host_),
      streamOrdered_(other.streamOrdered_), stream_(other.stream_) {}

DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&other) noexcept {
  std::swap(ptr_, other.ptr_);
  std::swap(bytes_, other.bytes_);
  std::swap(host_, other.host_);
  std::swap(streamOrdered_, other.streamOrdered_);
  std::swap(stream_, other.stream_);
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (host_ && ptr_) {
    interpreter::unregister_allocation(data());
    std::free(data());
  } else if (ptr_ && streamOrdered_) {
    driver::api().cuMemFreeAsync(ptr_, static_cast<CUstream>(stream_)); // never throw from a destructor
  } else if (ptr_) {
    driver::api().cuMemFree_v2(ptr_);
  }
}

void DeviceBuffer::copy_from_host(const void *host, size_t bytes) {
  if (bytes > bytes_)
    throw Error("copy_from_host: " + std::to_string(bytes) + " bytes into a buffer of " + std::to_string(bytes_));
  if (host_)
    std::memcpy(data(), host, bytes);
  else if (bytes)
    TESSERA_CU(cuMemcpyHtoD_v2(ptr_, host, bytes));
}

void DeviceBuffer::copy_to_host(void *host, size_t bytes) const {
  if (bytes > bytes_)
    throw Error("copy_to_host: " + std::to_string(bytes) + " bytes from a buffer of " + std::to_string(bytes_));
  if (host_)
    std::memcpy(host, data(), bytes);
  else if (bytes)
    TESSERA_CU(cuMemcpyDtoH_v2(host, ptr_, bytes));
}

void DeviceBuffer::fill_bytes(uint8_t value) {
  if (host_)
    std::memset(data(), value, bytes_);
  else if (bytes_)
    TESSERA_CU(cuMemsetD8_v2(ptr_, value, bytes_));
}

Stream::Stream() {
  if (interpreter::enabled())
    return;
  CUstream stream;
  TESSERA_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
  handle_ = stream;
}

Stream::~Stream() {
  if (handle_)
    driver::api().cuStreamDestroy_v2(static_cast<CUstream>(handle_));
}

void Stream::synchronize() const { jit::synchronize(handle_); }

Event::Event() {
  CUevent event;
  TESSERA_CU(cuEventCreate(&event, CU_EVENT_DEFAULT));
  handle_ = event;
}

Event::~Event() { driver::api().cuEventDestroy_v2(static_cast<CUevent>(handle_)); }

void Event::record(void *stream) {
  TESSERA_CU(cuEventRecord(static_cast<CUevent>(handle_), static_cast<CUstream>(stream)));
}

void Event::synchronize() const { TESSERA_CU(cuEventSynchronize(static_cast<CUevent>(handle_))); }

float Event::elapsed_since(const Event &start) const {
  float ms = 0;
  TESSERA_CU(cuEventElapsedTime(&ms, static_cast<CUevent>(start.handle_), static_cast<CUevent>(handle_)));
  return ms;
}

void synchronize() {
  if (!interpreter::enabled())
    TESSERA_CU(cuCtxSynchronize());
}

void synchronize(void *stream) {
  if (!stream)
    synchronize();
  else if (!interpreter::enabled())
    TESSERA_CU(cuStreamSynchronize(static_cast<CUstream>(stream)));
}

void copy_device(void *dst, const void *src, size_t bytes) {
  if (interpreter::enabled())
    std::memmove(dst, src, bytes);
  else if (bytes)
    TESSERA_CU(cuMemcpyDtoD_v2(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), bytes));
}

LoadedKernel::LoadedKernel(const std::string &ptx, const std::string &name, int num_warps,
                           int64_t shared_memory, std::vector<compiler::TensorMap> tensor_maps)
    : name_(name), threads_(32 * num_warps), shared_memory_(shared_memory), tensor_maps_(std::move(tensor_maps)) {
  if (int limit = current_device().max_shared_memory; shared_memory > limit)
    throw Error("kernel '" + name + "' needs " + std::to_string(shared_memory) +
                " bytes of shared memory; this GPU allows " + std::to_string(limit) + " (take a smaller config)");
  char log[8192] = {};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {log, reinterpret_cast<void *>(sizeof(log))};
  CUmodule module;
  CUresult result = driver::api().cuModuleLoadDataEx(&module, ptx.c_str(), 2, options, values);
  if (result != CUDA_SUCCESS) {
    try {
      driver::check(result, "cuModuleLoadDataEx");
    } catch (const Error &error) {
      throw Error("loading kernel '" + name + "': " + error.what() + "\n" + log);
    }
  }
  module_ = module;
  CUfunction function;
  TESSERA_CU(cuModuleGetFunction(&function, module, name.c_str()));
  function_ = function;
  if (shared_memory > 48 * 1024)
    TESSERA_CU(cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                  static_cast<int>(shared_memory)));
}

LoadedKernel::~LoadedKernel() {
  if (module_)
    driver::api().cuModuleUnload(static_cast<CUmodule>(module_));
}

void LoadedKernel::launch(unsigned gx, unsigned gy, unsigned gz, void **params, void *stream) const {
  CUresult result = driver::api().cuLaunchKernel(
      static_cast<CUfunction>(function_), gx, gy, gz, threads_, 1, 1,
      static_cast<unsigned>(shared_memory_), static_cast<CUstream>(stream), params, nullptr);
  if (result != CUDA_SUCCESS)
    driver::check(result, ("cuLaunchKernel(" + name_ + ")").c_str());
}

int LoadedKernel::registers() const {
  int value = 0;
  TESSERA_CU(cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_NUM_REGS, static_cast<CUfunction>(function_)));
  return value;
}

int LoadedKernel::spilled_bytes() const {
  int value = 0;
  TESSERA_CU(cuFuncGetAttribute(&value, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, static_cast<CUfunction>(function_)));
  return value;
}

} // namespace tessera::jit
