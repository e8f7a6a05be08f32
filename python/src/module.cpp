// tessera._tessera: the attention library for Python. Tensors arrive as descriptors
// (data pointer, dtype, shape, strides in elements, device) that the Python package builds
// from torch tensors and numpy arrays (other DLPack producers are converted to those);
// errors are tessera.Error (a ValueError) with the library's message.
#include "tessera/compiler/Interpreter.h"
#include "tessera/error.h"
#include "tessera/jit/Cache.h"
#include "tessera/jit/Runtime.h"
#include "tessera/kernels/attention.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

namespace py = pybind11;
using namespace tessera;

namespace {

dsl::DType dtypeNamed(const std::string &name) {
  for (dsl::DType dtype : {dsl::DType::f16, dsl::DType::bf16, dsl::DType::f32})
    if (dsl::to_string(dtype) == name)
      return dtype;
  throw py::type_error("tessera: unsupported dtype '" + name + "' (f16, bf16 or f32)");
}

/// (data, dtype, shape, strides, device) -> a view; device 1 = CPU, 2 = CUDA (DLPack's codes).
kernels::TensorView viewOf(const py::tuple &t) {
  if (t.size() != 5)
    throw py::value_error("tessera: a tensor descriptor is (data, dtype, shape, strides, device)");
  kernels::TensorView view;
  view.data = reinterpret_cast<void *>(t[0].cast<uintptr_t>());
  view.dtype = dtypeNamed(t[1].cast<std::string>());
  view.shape = t[2].cast<std::vector<int64_t>>();
  view.strides = t[3].cast<std::vector<int64_t>>();
  int device = t[4].cast<int>();
  if (device != 1 && device != 2)
    throw py::value_error("tessera: tensors must be on the CPU or a CUDA GPU (DLPack device " + std::to_string(device) + ")");
  view.device = device == 1 ? kernels::DeviceType::cpu : kernels::DeviceType::cuda;
  return view;
}

/// Under the interpreter, the host memory of the views is registered for the call (so that a
/// bad access is reported, not executed).
class HostMemory {
public:
  explicit HostMemory(const std::vector<kernels::TensorView> &views) {
    if (!interpreter::enabled())
      return;
    for (const kernels::TensorView &v : views) {
      if (v.numel() == 0 || !v.data)
        continue;
      int64_t last = 0;
      for (size_t d = 0; d < v.shape.size(); ++d)
        last += (v.shape[d] - 1) * v.stride(d);
      interpreter::register_allocation(v.data, static_cast<size_t>(last + 1) * (dsl::bit_width(v.dtype) / 8));
      registered_.push_back(v.data);
    }
  }
  ~HostMemory() {
    for (const void *p : registered_)
      interpreter::unregister_allocation(p);
  }

private:
  std::vector<const void *> registered_;
};

kernels::AttentionOptions optionsOf(bool causal, std::optional<double> scale) {
  kernels::AttentionOptions options;
  options.causal = causal;
  options.scale = scale;
  return options;
}

} // namespace

PYBIND11_MODULE(_tessera, m) {
  m.doc() = "tessera's attention kernels (see the tessera package)";
  py::register_exception<Error>(m, "Error", PyExc_ValueError);

  m.def(
      "attention_forward",
      [](py::tuple q, py::tuple k, py::tuple v, py::tuple o, py::tuple lse, bool causal, std::optional<double> scale,
         uintptr_t stream) {
        std::vector<kernels::TensorView> views{viewOf(q), viewOf(k), viewOf(v), viewOf(o), viewOf(lse)};
        HostMemory host(views);
        py::gil_scoped_release release;
        kernels::attention_forward(views[0], views[1], views[2], views[3], views[4], optionsOf(causal, scale),
                                   reinterpret_cast<void *>(stream));
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("o"), py::arg("lse"), py::arg("causal") = false,
      py::arg("scale") = py::none(), py::arg("stream") = 0,
      "Fills o and lse; q [B, Nq, Hq, D], k, v [B, Nk, Hk, D], lse f32 [B, Hq, Nq] (descriptors)");

  m.def(
      "attention_backward",
      [](py::tuple q, py::tuple k, py::tuple v, py::tuple o, py::tuple lse, py::tuple dout, py::tuple dq,
         py::tuple dk, py::tuple dv, bool causal, std::optional<double> scale, uintptr_t stream) {
        std::vector<kernels::TensorView> views{viewOf(q),  viewOf(k),    viewOf(v),  viewOf(o), viewOf(lse),
                                               viewOf(dout), viewOf(dq), viewOf(dk), viewOf(dv)};
        HostMemory host(views);
        py::gil_scoped_release release;
        kernels::attention_backward(views[0], views[1], views[2], views[3], views[4], views[5], views[6], views[7],
                                    views[8], optionsOf(causal, scale), reinterpret_cast<void *>(stream));
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("o"), py::arg("lse"), py::arg("dout"), py::arg("dq"),
      py::arg("dk"), py::arg("dv"), py::arg("causal") = false, py::arg("scale") = py::none(), py::arg("stream") = 0,
      "Fills dq, dk, dv (deterministic)");

  m.def("gpu_available", [] {
    std::string why;
    bool available = jit::gpu_available(&why);
    return py::make_tuple(available, why);
  });
  m.def("device_name", [] { return jit::current_device().name; });
  m.def("cache_dir", &jit::cache_dir);
  m.def("cache_clear", &jit::cache_clear, "remove every compiled kernel from the disk cache; how many");
}
