#include "tessera/jit/TensorMap.h"

#include "tessera/error.h"

namespace tessera::jit {

TensorMapEncoding plan_tensor_map(const std::string &kernel, const compiler::TensorMap &map,
                                  const dsl::LaunchArg *args, size_t count) {
  auto fail = [&](int arg, const std::string &what) {
    throw Error("kernel '" + kernel + "': argument " + std::to_string(arg) + " " + what +
                " (its tensor is copied by the TMA; a config without block pointers takes it)");
  };
  auto read = [&](const compiler::LaunchValue &v) -> int64_t {
    if (v.arg < 0)
      return v.value;
    if (static_cast<size_t>(v.arg) >= count || args[v.arg].kind() != dsl::LaunchArg::Kind::Integer)
      throw Error("kernel '" + kernel + "': a tensor map reads argument " + std::to_string(v.arg) +
                  ", which is not an integer argument");
    return args[v.arg].integer();
  };
  if (static_cast<size_t>(map.pointer) >= count || args[map.pointer].kind() != dsl::LaunchArg::Kind::Pointer)
    throw Error("kernel '" + kernel + "': a tensor map's tensor, argument " + std::to_string(map.pointer) +
                ", is not a pointer argument");
  const size_t rank = map.shape.size();
  TensorMapEncoding e;
  e.element_bytes = map.element_bytes;
  e.swizzle_bytes = map.swizzle_bytes;
  e.address = static_cast<uint64_t>(args[map.pointer].integer());
  if (e.address % 16)
    fail(map.pointer, "is not 16-byte aligned");
  for (size_t d = rank; d-- > 0;) { // innermost first
    int64_t extent = read(map.shape[d]);
    if (extent > int64_t(UINT32_MAX))
      fail(map.shape[d].arg, "(a dimension, " + std::to_string(extent) + ") exceeds the TMA's 2^32 - 1");
    e.empty |= extent <= 0;
    e.dims.push_back(static_cast<uint64_t>(std::max<int64_t>(extent, 1)));
    e.box.push_back(static_cast<uint32_t>(map.box[d]));
    if (d + 1 == rank)
      continue; // the contiguous dimension
    int64_t stride = read(map.strides[d]);
    int64_t bytes = stride * map.element_bytes;
    if (stride < 0 || bytes % 16 || bytes >= (int64_t(1) << 40))
      fail(map.strides[d].arg, "(a stride, " + std::to_string(stride) +
                                   " elements) is not a non-negative multiple of 16 bytes under 2^40");
    e.byte_strides.push_back(static_cast<uint64_t>(bytes));
  }
  if (e.empty) {
    e.address = 0;
    e.dims.assign(rank, 1);
    e.byte_strides.assign(rank - 1, 16);
  }
  return e;
}

} // namespace tessera::jit
