#include "tessera/compiler/Layout/SwizzledTile.h"

#include <algorithm>

namespace tessera::layout {

SwizzledTile::SwizzledTile(int64_t rows, int64_t cols, int64_t elementBytes)
    : rows(rows), cols(cols), elementBytes(elementBytes), swizzled(elementBytes <= 16 && cols * elementBytes >= 32),
      chunkElements(std::max<int64_t>(1, 16 / elementBytes)),
      atomColumns(cols * elementBytes > 128 ? 128 / elementBytes : cols),
      rowsPerPhase(std::max<int64_t>(1, 128 / (atomColumns * elementBytes))),
      phases(std::min<int64_t>(atomColumns * elementBytes / 16, 8)) {}

int64_t SwizzledTile::index(int64_t row, int64_t col) const {
  if (!swizzled)
    return row * cols + col;
  int64_t atom = col / atomColumns, within = col % atomColumns;
  int64_t chunk = within / chunkElements, phase = (row / rowsPerPhase) % phases;
  return atom * rows * atomColumns + row * atomColumns + (chunk ^ phase) * chunkElements + within % chunkElements;
}

} // namespace tessera::layout
