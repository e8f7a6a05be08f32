// Layer norm forward: y = (x - mean) / sqrt(var + eps) * weight + bias, one program per row,
// statistics in f32.
#ifndef TESSERA_EXAMPLES_LAYERNORM_H
#define TESSERA_EXAMPLES_LAYERNORM_H

#include <tessera/dsl.h>

namespace tessera::examples {

/// Meta parameter: BLOCK, a power of two >= n_cols. Grid: n_rows. Rows are contiguous.
template <typename T> dsl::Kernel layernorm() {
  using namespace tessera::dsl;
  return kernel("layernorm", [](Ptr<T> x, Ptr<T> weight, Ptr<T> bias, Ptr<T> y, Int n_cols,
                                Float eps, const Config &cfg) {
    const int64_t block = cfg["BLOCK"];
    Tile row = program_id(0).to<i64>() * n_cols;
    Tile cols = arange(0, block);
    Tile mask = cols < n_cols;
    Tile v = cast<f32>(load(x + row + cols, mask, 0));
    Tile mean = sum(v, 0) / n_cols.to<f32>();
    Tile centered = where(mask, v - mean, 0.0);
    Tile rstd = rsqrt(sum(centered * centered, 0) / n_cols.to<f32>() + eps);
    Tile w = cast<f32>(load(weight + cols, mask, 0));
    Tile b = cast<f32>(load(bias + cols, mask, 0));
    store(y + row + cols, cast<T>(centered * rstd * w + b), mask);
  });
}

} // namespace tessera::examples

#endif // TESSERA_EXAMPLES_LAYERNORM_H
