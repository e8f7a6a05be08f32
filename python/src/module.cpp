// tessera._tessera: the attention library for Python. Tensors arrive as descriptors
// (data pointer, dtype, shape, strides in elements, device) that the Python package builds
// from torch tensors and numpy arrays (other DLPack producers are converted to those);
// errors are tessera.Error (a ValueError) with the library's message.
#include "tessera/compiler/Interpreter.h"
#include "tessera/error.h"
#include "tessera/jit/Cache.h"
#include "tessera/jit/Runtime.h"
#include "tessera/kernels/attention.h"
#include "tessera/kernels/block_sparse.h"

#include <tessera/dsl.h>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <map>
#include <memory>
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

/// A block mask made in Python: one of the ready-made kinds, with its mask_mod compiled into
/// its own BlockSparseAttention, and the document ids the mask_mod reads (copied where the
/// kernels run on first use).
struct PyBlockMask {
  kernels::BlockMask mask;
  std::shared_ptr<kernels::BlockSparseAttention> attention;
  std::vector<int32_t> ids;
  mutable std::shared_ptr<jit::DeviceBuffer> idsOnDevice;

  kernels::SparseInputs inputs() const {
    kernels::SparseInputs in;
    if (!ids.empty()) {
      if (!idsOnDevice) {
        idsOnDevice = std::make_shared<jit::DeviceBuffer>(ids.size() * 4);
        idsOnDevice->copy_from_host(ids.data(), ids.size() * 4);
      }
      in.mask_aux = idsOnDevice->data();
    }
    return in;
  }
};

using dsl::Tile;

PyBlockMask withMaskMod(kernels::BlockMask mask, kernels::MaskMod mod, std::vector<int32_t> ids = {}) {
  kernels::Modifiers modifiers;
  modifiers.mask_mod = std::move(mod);
  return {std::move(mask), std::make_shared<kernels::BlockSparseAttention>(modifiers), std::move(ids), nullptr};
}

kernels::AttentionOptions optionsOf(bool causal, std::optional<double> scale) {
  kernels::AttentionOptions options;
  options.causal = causal;
  options.scale = scale;
  return options;
}

using ConfigDict = std::map<std::string, int64_t>;

std::optional<dsl::Config> configOf(const std::optional<ConfigDict> &values) {
  if (!values)
    return std::nullopt;
  dsl::Config config;
  for (const auto &[name, value] : *values)
    config.set(name, value);
  return config;
}

std::vector<ConfigDict> dictsOf(const std::vector<dsl::Config> &configs) {
  std::vector<ConfigDict> dicts;
  for (const dsl::Config &config : configs)
    dicts.push_back(config.values());
  return dicts;
}

kernels::BackwardPass backwardPassNamed(const std::string &name) {
  if (name == "keys_values")
    return kernels::BackwardPass::keys_values;
  if (name == "queries")
    return kernels::BackwardPass::queries;
  if (name == "keys_values_adding_dq")
    return kernels::BackwardPass::keys_values_adding_dq;
  throw Error("tessera: the backward pass is 'keys_values', 'queries' or 'keys_values_adding_dq', not '" + name + "'");
}

} // namespace

PYBIND11_MODULE(_tessera, m) {
  m.doc() = "tessera's attention kernels (see the tessera package)";
  py::register_exception<Error>(m, "Error", PyExc_ValueError);

  m.def(
      "attention_forward",
      [](py::tuple q, py::tuple k, py::tuple v, py::tuple o, py::tuple lse, bool causal, std::optional<double> scale,
         uintptr_t stream, std::optional<ConfigDict> config) {
        std::vector<kernels::TensorView> views{viewOf(q), viewOf(k), viewOf(v), viewOf(o), viewOf(lse)};
        HostMemory host(views);
        kernels::AttentionOptions options = optionsOf(causal, scale);
        options.config = configOf(config);
        py::gil_scoped_release release;
        kernels::attention_forward(views[0], views[1], views[2], views[3], views[4], options,
                                   reinterpret_cast<void *>(stream));
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("o"), py::arg("lse"), py::arg("causal") = false,
      py::arg("scale") = py::none(), py::arg("stream") = 0, py::arg("config") = py::none(),
      "Fills o and lse; q [B, Nq, Hq, D], k, v [B, Nk, Hk, D], lse f32 [B, Hq, Nq] (descriptors); config: a "
      "config of attention_forward_configs, run instead of the tuned one");

  m.def(
      "attention_backward",
      [](py::tuple q, py::tuple k, py::tuple v, py::tuple o, py::tuple lse, py::tuple dout, py::tuple dq,
         py::tuple dk, py::tuple dv, bool causal, std::optional<double> scale, uintptr_t stream, bool deterministic,
         std::optional<ConfigDict> keys_values_config, std::optional<ConfigDict> queries_config) {
        std::vector<kernels::TensorView> views{viewOf(q),  viewOf(k),    viewOf(v),  viewOf(o), viewOf(lse),
                                               viewOf(dout), viewOf(dq), viewOf(dk), viewOf(dv)};
        HostMemory host(views);
        kernels::AttentionOptions options = optionsOf(causal, scale);
        options.deterministic = deterministic;
        options.keys_values_config = configOf(keys_values_config);
        options.queries_config = configOf(queries_config);
        py::gil_scoped_release release;
        kernels::attention_backward(views[0], views[1], views[2], views[3], views[4], views[5], views[6], views[7],
                                    views[8], options, reinterpret_cast<void *>(stream));
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("o"), py::arg("lse"), py::arg("dout"), py::arg("dq"),
      py::arg("dk"), py::arg("dv"), py::arg("causal") = false, py::arg("scale") = py::none(), py::arg("stream") = 0,
      py::arg("deterministic") = true, py::arg("keys_values_config") = py::none(),
      py::arg("queries_config") = py::none(),
      "Fills dq, dk, dv (bitwise repeatable unless deterministic=False: dQ added in the dK/dV pass); the "
      "passes' configs: of attention_backward_configs, instead of the tuned ones");

  m.def(
      "attention_forward_configs",
      [](int64_t head_dim, bool causal) { return dictsOf(kernels::attention_forward_configs(head_dim, causal)); },
      py::arg("head_dim"), py::arg("causal") = false, "The configs attention_forward tunes over (the first: its default)");
  m.def(
      "attention_backward_configs",
      [](int64_t head_dim, bool causal, const std::string &pass) {
        return dictsOf(kernels::attention_backward_configs(head_dim, causal, backwardPassNamed(pass)));
      },
      py::arg("head_dim"), py::arg("causal") = false, py::arg("backward_pass") = "keys_values",
      "The configs a backward pass tunes over: 'keys_values' (dK/dV), 'queries' (dQ), 'keys_values_adding_dq'");

  py::class_<PyBlockMask>(m, "BlockMask", "block_mask_* builders make these")
      .def_property_readonly("batch", [](const PyBlockMask &b) { return b.mask.batch(); })
      .def_property_readonly("heads", [](const PyBlockMask &b) { return b.mask.heads(); })
      .def_property_readonly("n_q", [](const PyBlockMask &b) { return b.mask.n_q(); })
      .def_property_readonly("n_kv", [](const PyBlockMask &b) { return b.mask.n_kv(); })
      .def_property_readonly("block_size", [](const PyBlockMask &b) {
        return py::make_tuple(b.mask.block_m(), b.mask.block_n());
      })
      .def_property_readonly("density", [](const PyBlockMask &b) { return b.mask.density(); })
      .def("states", [](const PyBlockMask &b) {
        std::vector<int> states;
        for (int64_t x = 0; x < b.mask.batch(); ++x)
          for (int64_t h = 0; h < b.mask.heads(); ++h)
            for (int64_t i = 0; i < b.mask.q_blocks(); ++i)
              for (int64_t j = 0; j < b.mask.kv_blocks(); ++j)
                states.push_back(int(b.mask.state(x, h, i, j)));
        return states;
      }, "every block's state (0 skip, 1 partial, 2 full), [batch, heads, q_blocks, kv_blocks] row-major");
  m.def("block_mask_causal", [](int64_t batch, int64_t n_q, int64_t n_kv, int64_t bm, int64_t bn) {
    return withMaskMod(kernels::BlockMask::causal(batch, n_q, n_kv, bm, bn), kernels::mask_mods::causal(n_q, n_kv));
  });
  m.def("block_mask_sliding_window", [](int64_t batch, int64_t n, int64_t window, int64_t bm, int64_t bn) {
    return withMaskMod(kernels::BlockMask::sliding_window(batch, n, window, bm, bn),
                       kernels::mask_mods::sliding_window(window));
  });
  m.def("block_mask_prefix_lm", [](int64_t batch, int64_t n, int64_t prefix, int64_t bm, int64_t bn) {
    return withMaskMod(kernels::BlockMask::prefix_lm(batch, n, prefix, bm, bn), kernels::mask_mods::prefix_lm(prefix));
  });
  m.def("block_mask_documents", [](int64_t batch, int64_t n, std::vector<int32_t> ids, bool causal, int64_t bm,
                                   int64_t bn) {
    kernels::BlockMask mask = kernels::BlockMask::documents(batch, n, ids, causal, bm, bn);
    return withMaskMod(std::move(mask), kernels::mask_mods::documents(n, causal), std::move(ids));
  });
  m.def("block_mask_from_blocks", [](int64_t batch, int64_t heads, int64_t n_q, int64_t n_kv,
                                     const std::vector<bool> &visited, int64_t bm, int64_t bn) {
    std::vector<kernels::BlockMask::State> states;
    for (bool v : visited)
      states.push_back(v ? kernels::BlockMask::State::full : kernels::BlockMask::State::skip);
    return PyBlockMask{kernels::BlockMask(batch, heads, n_q, n_kv, bm, bn, states),
                       std::make_shared<kernels::BlockSparseAttention>(), {}, nullptr};
  });
  m.def(
      "block_sparse_forward",
      [](const PyBlockMask &mask, py::tuple q, py::tuple k, py::tuple v, py::tuple o, py::tuple lse,
         std::optional<double> scale, uintptr_t stream) {
        std::vector<kernels::TensorView> views{viewOf(q), viewOf(k), viewOf(v), viewOf(o), viewOf(lse)};
        HostMemory host(views);
        kernels::SparseInputs inputs = mask.inputs();
        py::gil_scoped_release release;
        mask.attention->forward(views[0], views[1], views[2], views[3], views[4], mask.mask, optionsOf(false, scale),
                                inputs, reinterpret_cast<void *>(stream));
      },
      py::arg("mask"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("o"), py::arg("lse"),
      py::arg("scale") = py::none(), py::arg("stream") = 0, "Fills o and lse visiting the mask's blocks");
  m.def(
      "block_sparse_backward",
      [](const PyBlockMask &mask, py::tuple q, py::tuple k, py::tuple v, py::tuple o, py::tuple lse, py::tuple dout,
         py::tuple dq, py::tuple dk, py::tuple dv, std::optional<double> scale, uintptr_t stream) {
        std::vector<kernels::TensorView> views{viewOf(q),  viewOf(k),    viewOf(v),  viewOf(o), viewOf(lse),
                                               viewOf(dout), viewOf(dq), viewOf(dk), viewOf(dv)};
        HostMemory host(views);
        kernels::SparseInputs inputs = mask.inputs();
        py::gil_scoped_release release;
        mask.attention->backward(views[0], views[1], views[2], views[3], views[4], views[5], views[6], views[7],
                                 views[8], mask.mask, optionsOf(false, scale), inputs,
                                 reinterpret_cast<void *>(stream));
      },
      py::arg("mask"), py::arg("q"), py::arg("k"), py::arg("v"), py::arg("o"), py::arg("lse"), py::arg("dout"),
      py::arg("dq"), py::arg("dk"), py::arg("dv"), py::arg("scale") = py::none(), py::arg("stream") = 0,
      "Fills dq, dk, dv (deterministic) visiting the mask's blocks");

  m.def("gpu_available", [] {
    std::string why;
    bool available = jit::gpu_available(&why);
    return py::make_tuple(available, why);
  });
  m.def("device_name", [] { return jit::current_device().name; });
  m.def("cache_dir", &jit::cache_dir);
  m.def("cache_clear", &jit::cache_clear, "remove every compiled kernel from the disk cache; how many");
}
