// Row softmax: one program per row, the row held in one tile, math in f32.
#ifndef TESSERA_EXAMPLES_SOFTMAX_H
#define TESSERA_EXAMPLES_SOFTMAX_H

#include <tessera/dsl.h>

#include <cmath>

namespace tessera::examples {

/// Meta parameter: BLOCK, a power of two >= n_cols. Grid: n_rows. Strides in elements.
template <typename T> dsl::Kernel softmax() {
  using namespace tessera::dsl;
  return kernel("softmax", [](Ptr<T> in, Ptr<T> out, Int n_cols, Long in_stride, Long out_stride,
                              const Config &cfg) {
    const int64_t block = cfg["BLOCK"];
    Tile row = program_id(0).to<i64>();
    Tile cols = arange(0, block);
    Tile mask = cols < n_cols;
    Tile x = cast<f32>(load(in + row * in_stride + cols, mask, -INFINITY));
    Tile numerator = exp(x - max(x, 0));
    Tile y = numerator / sum(numerator, 0);
    store(out + row * out_stride + cols, cast<T>(y), mask);
  });
}

} // namespace tessera::examples

#endif // TESSERA_EXAMPLES_SOFTMAX_H
