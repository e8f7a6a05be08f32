#include "tessera/jit/Nvrtc.h"

#include "tessera/error.h"

#include <dlfcn.h>
#include <nvrtc.h>

#include <vector>

namespace tessera::jit {
namespace {

struct Nvrtc {
  decltype(&::nvrtcCreateProgram) create = nullptr;
  decltype(&::nvrtcCompileProgram) compile = nullptr;
  decltype(&::nvrtcGetPTXSize) ptxSize = nullptr;
  decltype(&::nvrtcGetPTX) ptx = nullptr;
  decltype(&::nvrtcGetProgramLogSize) logSize = nullptr;
  decltype(&::nvrtcGetProgramLog) log = nullptr;
  decltype(&::nvrtcDestroyProgram) destroy = nullptr;
  decltype(&::nvrtcGetErrorString) errorString = nullptr;
  std::string error;
};

const Nvrtc &nvrtc() {
  static Nvrtc api = [] {
    Nvrtc n;
    void *library = nullptr;
    for (const char *name : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
                             "/usr/local/cuda/lib64/libnvrtc.so"})
      if ((library = dlopen(name, RTLD_NOW | RTLD_LOCAL)))
        break;
    if (!library) {
      n.error = "NVRTC (libnvrtc.so) is not installed";
      return n;
    }
    auto load = [&](auto &slot, const char *symbol) {
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(dlsym(library, symbol));
      if (!slot && n.error.empty())
        n.error = std::string("libnvrtc lacks ") + symbol;
    };
    load(n.create, "nvrtcCreateProgram");
    load(n.compile, "nvrtcCompileProgram");
    load(n.ptxSize, "nvrtcGetPTXSize");
    load(n.ptx, "nvrtcGetPTX");
    load(n.logSize, "nvrtcGetProgramLogSize");
    load(n.log, "nvrtcGetProgramLog");
    load(n.destroy, "nvrtcDestroyProgram");
    load(n.errorString, "nvrtcGetErrorString");
    return n;
  }();
  if (!api.error.empty())
    throw Error(api.error);
  return api;
}

} // namespace

std::string nvrtc_compile(const std::string &source, const std::string &program_name) {
  const Nvrtc &api = nvrtc();
  DeviceInfo device = current_device();
  auto check = [&](nvrtcResult result, const char *call) {
    if (result != NVRTC_SUCCESS)
      throw Error(std::string(call) + " failed: " + api.errorString(result));
  };
  nvrtcProgram program;
  check(api.create(&program, source.c_str(), program_name.c_str(), 0, nullptr, nullptr), "nvrtcCreateProgram");
  std::string arch = "--gpu-architecture=compute_" + std::to_string(device.major * 10 + device.minor);
  const char *options[] = {arch.c_str(), "--std=c++17"};
  nvrtcResult compiled = api.compile(program, 2, options);
  size_t logSize = 0;
  api.logSize(program, &logSize);
  std::string log(logSize, '\0');
  api.log(program, log.data());
  if (compiled != NVRTC_SUCCESS) {
    api.destroy(&program);
    throw Error("NVRTC could not compile " + program_name + ":\n" + log);
  }
  size_t size = 0;
  check(api.ptxSize(program, &size), "nvrtcGetPTXSize");
  std::string ptx(size, '\0');
  check(api.ptx(program, ptx.data()), "nvrtcGetPTX");
  api.destroy(&program);
  return ptx;
}

std::unique_ptr<LoadedKernel> nvrtc_kernel(const std::string &source, const std::string &name,
                                           int num_warps, int64_t shared_memory) {
  return std::make_unique<LoadedKernel>(nvrtc_compile(source, name + ".cu"), name, num_warps,
                                        shared_memory);
}

} // namespace tessera::jit
