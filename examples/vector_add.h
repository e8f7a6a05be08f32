// out[i] = x[i] + y[i]: the smallest complete tessera kernel.
#ifndef TESSERA_EXAMPLES_VECTOR_ADD_H
#define TESSERA_EXAMPLES_VECTOR_ADD_H

#include <tessera/dsl.h>

namespace tessera::examples {

/// Meta parameter: BLOCK, elements per program. Grid: cdiv(n, BLOCK).
inline dsl::Kernel vector_add() {
  using namespace tessera::dsl;
  return kernel("vector_add", [](Ptr<f32> x, Ptr<f32> y, Ptr<f32> out, Int n, const Config &cfg) {
    const int64_t block = cfg["BLOCK"];
    Tile offsets = program_id(0) * block + arange(0, block);
    Tile mask = offsets < n;
    store(out + offsets, load(x + offsets, mask) + load(y + offsets, mask), mask);
  });
}

} // namespace tessera::examples

#endif // TESSERA_EXAMPLES_VECTOR_ADD_H
