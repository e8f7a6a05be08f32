// The CUDA runtime tessera needs, over the Driver API (loaded at run time, so that programs
// built with tessera start, and skip GPU work with a clear reason, on machines without one).
#ifndef TESSERA_JIT_RUNTIME_H
#define TESSERA_JIT_RUNTIME_H

#include "tessera/compiler/Compiler.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessera::jit {

/// Whether a CUDA GPU can be used; if not, `why` says what is missing.
bool gpu_available(std::string *why = nullptr);

/// How many GPUs are visible (0 without a usable GPU).
int device_count();

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int sm_count = 0;
  int memory_clock_khz = 0;
  size_t memory_bytes = 0;
  int driver_version = 0;    // e.g. 13000 for CUDA 13.0
  int max_shared_memory = 0; // bytes one program may use (opt-in)
  /// "NVIDIA H200/132SM/2619MHz": what tuning results and caches are keyed by.
  std::string model() const;
};

/// The device tessera runs on in this thread: the CUDA runtime's current device (the context
/// current on the thread, as cudaSetDevice or torch.cuda.set_device leave it), else device 0.
DeviceInfo current_device();

/// The ordinal of the device whose memory `pointer` is (cuMemAlloc'd or managed), or -1 for
/// host memory, pinned or not.
int device_of(const void *pointer);

/// Makes device `ordinal` current on this thread while it lives, then restores the previous
/// context (the CUDA runtime's device guard): libraries run on their tensors' device.
class DeviceGuard {
public:
  explicit DeviceGuard(int ordinal);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard &) = delete;
  DeviceGuard &operator=(const DeviceGuard &) = delete;

private:
  void *previous_ = nullptr; // the CUcontext to restore, null when nothing changed
};

/// Device memory, freed with the object. Under TESSERA_INTERPRET it is host memory that the
/// interpreter may touch, so programs written against the GPU API run unchanged.
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  /// Stream-ordered: allocated for work on `stream` and freed after that work (no device
  /// synchronization either way): a kernel's workspace, from a pool of tessera's that keeps
  /// the memory it gets back (the next call's workspace is not mapped again).
  DeviceBuffer(size_t bytes, void *stream);
  DeviceBuffer(DeviceBuffer &&other) noexcept;
  DeviceBuffer &operator=(DeviceBuffer &&other) noexcept;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer();

  void *data() const { return reinterpret_cast<void *>(ptr_); }
  size_t size() const { return bytes_; }
  void copy_from_host(const void *host, size_t bytes);
  void copy_to_host(void *host, size_t bytes) const;
  /// Every byte set to `value` (0xFF poisons floats with NaN).
  void fill_bytes(uint8_t value);

private:
  uint64_t ptr_ = 0;
  size_t bytes_ = 0;
  bool host_ = false;
  bool streamOrdered_ = false;
  void *stream_ = nullptr;
};

/// A CUDA stream (nullptr: the legacy default stream; also under TESSERA_INTERPRET, where
/// launches run synchronously on the host).
class Stream {
public:
  Stream();
  ~Stream();
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;
  void *handle() const { return handle_; }
  void synchronize() const;

private:
  void *handle_ = nullptr;
};

/// A CUDA event for timing.
class Event {
public:
  Event();
  ~Event();
  Event(const Event &) = delete;
  Event &operator=(const Event &) = delete;
  void record(void *stream = nullptr);
  void synchronize() const;
  /// Milliseconds from `start` to this event (both recorded and completed).
  float elapsed_since(const Event &start) const;

private:
  void *handle_ = nullptr;
};

/// Wait for all work on the device.
void synchronize();
/// Wait for the work queued on `stream` (a CUstream; nullptr: all work of the context).
void synchronize(void *stream);

/// Copy `bytes` between device buffers.
void copy_device(void *dst, const void *src, size_t bytes);

/// A loaded PTX module and one of its functions.
class LoadedKernel {
public:
  LoadedKernel(const std::string &ptx, const std::string &name, int num_warps, int64_t shared_memory,
               std::vector<compiler::TensorMap> tensor_maps = {});
  ~LoadedKernel();
  LoadedKernel(const LoadedKernel &) = delete;
  LoadedKernel &operator=(const LoadedKernel &) = delete;

  /// Launch on `stream` with a grid of programs; `params` point at each argument's bytes.
  void launch(unsigned gx, unsigned gy, unsigned gz, void **params, void *stream) const;
  int registers() const;
  int spilled_bytes() const;
  int64_t shared_memory() const { return shared_memory_; }
  /// The TMA tensor maps the kernel takes after its arguments.
  const std::vector<compiler::TensorMap> &tensor_maps() const { return tensor_maps_; }

private:
  void *module_ = nullptr;
  void *function_ = nullptr;
  std::string name_;
  int threads_;
  int64_t shared_memory_;
  std::vector<compiler::TensorMap> tensor_maps_;
};

} // namespace tessera::jit

#endif // TESSERA_JIT_RUNTIME_H
