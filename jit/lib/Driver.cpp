#include "Driver.h"

#include "tessera/error.h"

#include <dlfcn.h>

#include <mutex>
#include <vector>

namespace tessera::jit::driver {
namespace {

struct Loaded {
  Api api;
  std::string error; // why there is no GPU, empty when there is one
  int devices = 0;
};

const Loaded &loaded() {
  static Loaded state = [] {
    Loaded s;
    void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      s.error = "the CUDA driver (libcuda.so.1) is not installed: " + std::string(dlerror());
      return s;
    }
#define TESSERA_LOAD(name)                                                                     \
  s.api.name = reinterpret_cast<decltype(s.api.name)>(dlsym(library, #name));                   \
  if (!s.api.name) {                                                                           \
    s.error = std::string("libcuda.so.1 lacks ") + #name;                                     \
    return s;                                                                                  \
  }
    TESSERA_DRIVER_FUNCTIONS(TESSERA_LOAD)
#undef TESSERA_LOAD
    CUresult result = s.api.cuInit(0);
    if (result == CUDA_SUCCESS)
      result = s.api.cuDeviceGetCount(&s.devices);
    if (result != CUDA_SUCCESS || s.devices == 0) {
      const char *name = nullptr;
      s.api.cuGetErrorName(result, &name);
      s.error = s.devices == 0 && result == CUDA_SUCCESS ? "no CUDA device is visible"
                                                         : std::string("cuInit failed: ") + (name ? name : "?");
    }
    return s;
  }();
  return state;
}

} // namespace

bool available(std::string *why) {
  const Loaded &s = loaded();
  if (why)
    *why = s.error;
  return s.error.empty();
}

const Api &api() {
  const Loaded &s = loaded();
  if (!s.error.empty())
    throw Error("no usable GPU: " + s.error);
  CUcontext current = nullptr;
  if (s.api.cuCtxGetCurrent(&current) != CUDA_SUCCESS || !current)
    check(s.api.cuCtxSetCurrent(primary_context(0)), "cuCtxSetCurrent");
  return s.api;
}

void make_current(CUcontext context) {
  const Loaded &s = loaded();
  if (!s.error.empty())
    throw Error("no usable GPU: " + s.error);
  check(s.api.cuCtxSetCurrent(context), "cuCtxSetCurrent");
}

CUcontext primary_context(int ordinal) {
  const Loaded &s = loaded();
  if (!s.error.empty())
    throw Error("no usable GPU: " + s.error);
  if (ordinal < 0 || ordinal >= s.devices)
    throw Error("there is no CUDA device " + std::to_string(ordinal) + " (" + std::to_string(s.devices) +
                " visible)");
  static std::mutex mutex;
  static std::vector<CUcontext> contexts(s.devices);
  std::lock_guard<std::mutex> lock(mutex);
  if (!contexts[ordinal]) {
    CUdevice device;
    check(s.api.cuDeviceGet(&device, ordinal), "cuDeviceGet");
    check(s.api.cuDevicePrimaryCtxRetain(&contexts[ordinal], device), "cuDevicePrimaryCtxRetain");
  }
  return contexts[ordinal];
}

void check(CUresult result, const char *call) {
  if (result == CUDA_SUCCESS)
    return;
  const Api &a = loaded().api;
  const char *name = nullptr, *text = nullptr;
  if (a.cuGetErrorName)
    a.cuGetErrorName(result, &name);
  if (a.cuGetErrorString)
    a.cuGetErrorString(result, &text);
  throw Error(std::string(call) + " failed: " + (name ? std::string(name) : "CUDA error " + std::to_string(result)) +
              (text ? std::string(" (") + text + ")" : std::string()));
}

} // namespace tessera::jit::driver
